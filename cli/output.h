/* SPDX-License-Identifier: MIT */
/* The writers: ftrace lines and Chrome trace events. */
#ifndef UKPROBE_OUTPUT_H
#define UKPROBE_OUTPUT_H
#include <stdio.h>
#include <ukprobes/events.h>
#include "symbolize.h"

struct writer {
	FILE *f;
	struct symbolizer *sym;
	pid_t pid;		/* the traced process (json metadata) */
	char *buf;		/* scratch for the arguments */
	size_t cap;
	/* ftrace: the place of the last record written, and what it was for */
	const struct ukpev_event_info *place_ev;
	unsigned long place_ret;
	int place_ok;
	char place[1024];
	/* json: threads named so far */
	pid_t *named;
	size_t nnamed, capnamed;
	int first;
	/* json: the events' descriptions, and the probe / return probe
	 * pairs written as complete events (fmt_json.c) */
	struct ukpev_reader *r;
	struct json_pairs *jp;
	/* json: members written after "traceEvents" (",\"name\":..."), or NULL */
	char *json_tail;
};

void fmt_ftrace_header(struct writer *w);
void fmt_ftrace_record(struct writer *w, const struct ukpev_event_info *ev,
		       const struct ukpev_record *rec);
void fmt_ftrace_end(struct writer *w);
/* a stacktrace trigger's record: "<stack trace>" and " => " frames */
void fmt_ftrace_stack(struct writer *w, const struct ukpev_record *rec);

void fmt_json_header(struct writer *w);
void fmt_json_record(struct writer *w, const struct ukpev_event_info *ev,
		     const struct ukpev_record *rec);
void fmt_json_end(struct writer *w);
/* s as a JSON string (quotes, escapes) */
void fmt_json_str(FILE *f, const char *s);
/* a stacktrace trigger's record: an instant event "<stack trace>" of
 * the event's group, its frames in args.stack, innermost first */
void fmt_json_stack(struct writer *w, const struct ukpev_event_info *ev,
		    const struct ukpev_record *rec);
/* the definitions as sent for json: each with a last fetcharg
 * FMT_JSON_SP=$stack (where it fits), not shown, by which a return is
 * paired with its call */
#define FMT_JSON_SP "__ukprobe_sp"
const char **fmt_json_defs(const char **defs, int n);
/* what fmt_json_defs(defs, n) returned */
void fmt_json_defs_free(const char **sent, const char **defs, int n);

/* the arguments of rec, formatted (in w->buf) */
const char *fmt_args(struct writer *w, const struct ukpev_event_info *ev,
		     const struct ukpev_record *rec, int format);
#endif
