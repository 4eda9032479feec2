/* SPDX-License-Identifier: MIT */
/*
 * The consumer: drains every thread's buffer of the shared area and
 * merges the records by timestamp.  The reader hands them thread by
 * thread; a record taken now may be older than one of another thread
 * taken in the previous drain, so records are held back until a whole
 * drain has passed since their time: those older than the previous
 * drain's start are complete and go out, sorted by (timestamp, order
 * read), which keeps each thread's own order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "consumer.h"

struct held {
	struct ukpev_record rec;
	uint64_t seq;
	char comm[24];
};

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

void consumer_init(struct consumer *c, struct ukpev_reader *r, FILE *out,
		   struct symbolizer *sym, enum ukp_format format)
{
	memset(c, 0, sizeof *c);
	c->r = r;
	c->w.f = out;
	c->w.sym = sym;
	c->format = format;
	if (format == FMT_JSON)
		fmt_json_header(&c->w);
	else
		fmt_ftrace_header(&c->w);
}

void consumer_mute(struct consumer *c, pid_t tid, uint64_t until_ns)
{
	if (c->nmute < (int)(sizeof c->mute / sizeof *c->mute)) {
		c->mute[c->nmute].tid = tid;
		c->mute[c->nmute++].until = until_ns;
	}
}

static int collect(const struct ukpev_record *rec, void *arg)
{
	struct consumer *c = arg;
	for (int k = 0; k < c->nmute; k++)
		if (rec->tid == c->mute[k].tid && rec->ts_ns <= c->mute[k].until &&
		    rec->event != UKPEV_EVENT_LOST)
			return 0;
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 4096;
		c->h = realloc(c->h, c->cap * sizeof *c->h);
		if (!c->h)
			abort();
	}
	struct held *h = &c->h[c->n++];
	h->rec = *rec;
	h->seq = c->seq++;
	/* a lost marker carries no time: it stands where it was delivered,
	 * after its thread's previous record (or, first in a drain, just
	 * before its next one) */
	if (rec->event == UKPEV_EVENT_LOST) {
		h->rec.ts_ns = rec->tid == c->last_tid ? c->last_ts : 0;
		if (rec->tid != c->last_tid)
			c->lost_pending = c->n;	/* its index + 1 */
		c->lost_tid = rec->tid;
	} else {
		if (c->lost_pending && rec->tid == c->lost_tid)
			for (size_t k = c->lost_pending - 1; k < c->n - 1; k++)
				if (c->h[k].rec.tid == rec->tid && c->h[k].rec.ts_ns == 0)
					c->h[k].rec.ts_ns = rec->ts_ns;
		c->lost_pending = 0;
		c->last_tid = rec->tid;
		c->last_ts = rec->ts_ns;
	}
	snprintf(h->comm, sizeof h->comm, "%s", rec->comm ? rec->comm : "<...>");
	h->rec.comm = NULL;
	void *p = NULL;
	if (rec->payload_size) {
		p = malloc(rec->payload_size);
		if (!p)
			abort();
		memcpy(p, rec->payload, rec->payload_size);
	}
	h->rec.payload = p;
	return 0;
}

static int cmp_held(const void *a, const void *b)
{
	const struct held *x = a, *y = b;
	if (x->rec.ts_ns != y->rec.ts_ns)
		return x->rec.ts_ns < y->rec.ts_ns ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

void consumer_drain(struct consumer *c, int final)
{
	uint64_t start = now_ns();
	size_t before = c->n;
	ukpev_reader_poll(c->r, collect, c, 0);
	if (c->n != before)
		qsort(c->h, c->n, sizeof *c->h, cmp_held);
	uint64_t limit = final ? UINT64_MAX : c->prev_start;
	size_t k = 0;
	for (; k < c->n && c->h[k].rec.ts_ns <= limit; k++) {
		struct held *h = &c->h[k];
		const struct ukpev_event_info *ev = NULL;
		h->rec.comm = h->comm;
		if (h->rec.event != UKPEV_EVENT_LOST) {
			ev = ukpev_reader_event(c->r, h->rec.event);
			if (!ev) {
				free((void *)h->rec.payload);
				continue;
			}
		}
		if (c->format == FMT_JSON)
			fmt_json_record(&c->w, ev, &h->rec);
		else
			fmt_ftrace_record(&c->w, ev, &h->rec);
		c->written++;
		free((void *)h->rec.payload);
	}
	memmove(c->h, c->h + k, (c->n - k) * sizeof *c->h);
	c->n -= k;
	c->prev_start = start;
}

void consumer_end(struct consumer *c)
{
	consumer_drain(c, 1);
	if (c->format == FMT_JSON)
		fmt_json_end(&c->w);
	else
		fmt_ftrace_end(&c->w);
	free(c->h);
	free(c->w.buf);
	free(c->w.named);
}
