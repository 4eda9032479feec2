/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the dynamic-event definition parser, the filter
 * parser and the trigger parser (hist triggers included).  An input is a
 * definition, optionally followed by a newline and a filter expression
 * for that definition's fields, then optionally a newline and a trigger
 * for them (COMMAND[:COUNT] [if EXPR]), optionally followed
 * by a NUL and bytes taken as a record's payload for that definition,
 * which is then formatted (as a reader does with what another process
 * wrote).  Nothing may crash, leak, hang or read out of bounds (ASan,
 * UBSan); an error must carry an offset inside the text it parsed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ukprobes/events.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 8192)
		return 0;
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	size_t tl = strlen(text);
	const uint8_t *payload = tl < size ? data + tl + 1 : NULL;
	size_t psize = tl < size ? size - tl - 1 : 0;
	char *filter = strchr(text, '\n');
	if (filter)
		*filter++ = 0;
	char *trigger = filter ? strchr(filter, '\n') : NULL;
	if (trigger)
		*trigger++ = 0;
	struct ukpev_def *d = NULL;
	struct ukpev_error err;
	char buf[16384];
	if (ukpev_def_parse(text, &d, &err)) {
		if (err.offset < 0 || (size_t)err.offset > strlen(text))
			abort();
		ukpev_error_format(buf, sizeof(buf), text, &err);
	} else {
		const struct ukpev_event_info *in = ukpev_def_info(d);
		if (!in->group[0] || !in->event[0] || in->nargs > UKPEV_MAX_ARGS)
			abort();
		if (filter && ukpev_filter_check(d, filter, &err)) {
			if (err.offset < 0 || (size_t)err.offset > strlen(filter))
				abort();
			ukpev_error_format(buf, sizeof(buf), filter, &err);
		}
		if (trigger) {
			int r = ukpev_trigger_check(d, trigger, &err);
			if (r < 0) {
				if (err.offset < 0 || (size_t)err.offset > strlen(trigger))
					abort();
				ukpev_error_format(buf, sizeof(buf), trigger, &err);
			} else if (r > 1) {
				abort();
			}
		}
		if (payload) {
			/* a copy at an odd address: a consumer's copy need
			 * not be aligned as records are */
			uint8_t *pl = calloc(1, psize + 8);
			if (pl) {
				memcpy(pl + 1, payload, psize);
				struct ukpev_record rec = { .payload = pl + 1,
							    .payload_size = (unsigned)psize };
				ukpev_format_args(in, &rec, UKPEV_FMT_FTRACE, buf, sizeof(buf), NULL, NULL);
				ukpev_format_args(in, &rec, UKPEV_FMT_JSON, buf, sizeof(buf), NULL, NULL);
				free(pl);
			}
		}
		ukpev_def_free(d);
	}
	free(text);
	return 0;
}
