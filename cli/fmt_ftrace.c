/* SPDX-License-Identifier: MIT */
/*
 * --format=ftrace: the kernel's trace file lines (irq-info off):
 *
 *	            prog-4242    [001]  1234.567890: p_malloc_0: (malloc+0x0/0x1a0 [libc.so.6]) size=24
 *
 * trace_print_context()'s "%16s-%-7d [%03d] %5lu.%06lu: ", then the
 * kprobe event's "(%pS)" or "(%pS <- %ps)" and the arguments.
 */
#include <stdlib.h>
#include <string.h>

#include "output.h"

const char *fmt_args(struct writer *w, const struct ukpev_event_info *ev,
		     const struct ukpev_record *rec, int format)
{
	for (;;) {
		int n = ukpev_format_args(ev, rec, format, w->buf, w->cap, sym_cb, w->sym);
		if (n < 0) {
			snprintf(w->buf, w->cap, "%s", format == UKPEV_FMT_JSON ? "" : " (bad record)");
			return w->buf;
		}
		if ((size_t)n < w->cap)
			return w->buf;
		w->cap = (size_t)n + 1;
		w->buf = realloc(w->buf, w->cap);
		if (!w->buf)
			abort();
	}
}

void fmt_ftrace_header(struct writer *w)
{
	if (!w->buf) {
		w->cap = 4096;
		w->buf = malloc(w->cap);
	}
	fputs("# tracer: nop\n"
	      "#\n"
	      "#           TASK-PID     CPU#     TIMESTAMP  FUNCTION\n"
	      "#              | |         |         |         |\n", w->f);
}

void fmt_ftrace_record(struct writer *w, const struct ukpev_event_info *ev,
		       const struct ukpev_record *rec)
{
	if (rec->event == UKPEV_EVENT_LOST) {
		fprintf(w->f, "TID:%d [LOST %llu EVENTS]\n", (int)rec->tid,
			(unsigned long long)rec->lost);
		return;
	}
	char place[1024];
	if (ev->kind == UKPEV_KIND_RETPROBE) {
		int n = sym_format(w->sym, rec->ret_ip, 1, 1, place, sizeof place);
		if (n < 0 || (size_t)n >= sizeof place - 8)
			n = 0;
		memcpy(place + n, " <- ", 5);
		sym_format(w->sym, ev->addr, 0, 1, place + n + 4, sizeof place - (size_t)n - 4);
	} else {
		sym_format(w->sym, ev->addr, 1, 1, place, sizeof place);
	}
	fprintf(w->f, "%16s-%-7d [%03u] %5llu.%06llu: %s: (%s)%s\n",
		rec->comm ? rec->comm : "<...>", (int)rec->tid, rec->cpu,
		(unsigned long long)(rec->ts_ns / 1000000000ull),
		(unsigned long long)(rec->ts_ns % 1000000000ull / 1000),
		ev->event, place, fmt_args(w, ev, rec, UKPEV_FMT_FTRACE));
}

void fmt_ftrace_end(struct writer *w)
{
	fflush(w->f);
}
