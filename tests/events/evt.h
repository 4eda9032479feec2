/* SPDX-License-Identifier: MIT */
/* Helpers of the dynamic-event tests: an area, events, records kept. */
#ifndef EVT_H
#define EVT_H

#include <errno.h>
#include <ukt.h>
#include <ukprobes/events.h>

#ifdef __clang__
#define NOIL __attribute__((noinline, used))
#else
#define NOIL __attribute__((noinline, noclone, used))
#endif

/* a copy of a delivered record */
struct evt_rec {
	struct ukpev_record r;
	uint8_t payload[UKPEV_MAX_RECORD] __attribute__((aligned(8)));
	char comm[17];
};

#define EVT_MAX 4096
static struct evt_rec *evt_recs;
static unsigned evt_n;
static uint64_t evt_lost;	/* sum of the lost markers seen */

static int evt_keep(const struct ukpev_record *rec, void *arg)
{
	(void)arg;
	if (rec->event == UKPEV_EVENT_LOST) {
		evt_lost += rec->lost;
		return 0;
	}
	if (evt_n >= EVT_MAX)
		return 0;
	struct evt_rec *k = &evt_recs[evt_n++];
	k->r = *rec;
	memcpy(k->payload, rec->payload, rec->payload_size);
	k->r.payload = k->payload;
	snprintf(k->comm, sizeof(k->comm), "%s", rec->comm);
	k->r.comm = k->comm;
	return 0;
}

/* every record now in the area, into evt_recs (from 0) */
static inline unsigned evt_drain(struct ukpev_reader *r)
{
	if (!evt_recs)
		evt_recs = calloc(EVT_MAX, sizeof(*evt_recs));
	UKT_ASSERT(evt_recs);
	evt_n = 0;
	int n;
	while ((n = ukpev_reader_poll(r, evt_keep, NULL, 0)) > 0)
		;
	UKT_ASSERT(n == 0);
	return evt_n;
}

static inline struct ukpev_area *evt_area(size_t buffer_kb)
{
	struct ukpev_area_opts o = { .sz = sizeof(o), .buffer_kb = buffer_kb, .area_mb = 64 };
	struct ukpev_area *a;
	int r = ukpev_area_create(&o, &a);
	if (r)
		UKT_FAIL("ukpev_area_create: %d", r);
	return a;
}

static inline struct ukpev_event *evt_create(struct ukpev_area *a, const char *def)
{
	struct ukpev_event *e;
	struct ukpev_error err;
	int r = ukpev_event_create(a, def, 0, &e, &err);
	if (r) {
		char buf[2048];
		ukpev_error_format(buf, sizeof(buf), def, &err);
		UKT_FAIL("ukpev_event_create %d:\n%s", r, buf);
	}
	return e;
}

/* the formatted values of record i (ftrace form) */
static inline const char *evt_fmt(struct ukpev_reader *r, unsigned i, int format)
{
	static char buf[65536];
	const struct ukpev_event_info *ev = ukpev_reader_event(r, evt_recs[i].r.event);
	UKT_ASSERT(ev);
	ukpev_format_args(ev, &evt_recs[i].r, format, buf, sizeof(buf), ukpev_symbolize_self, NULL);
	return buf;
}

#endif
