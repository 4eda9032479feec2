/* SPDX-License-Identifier: MIT */
/*
 * --format=ftrace: the kernel's trace file lines (irq-info off):
 *
 *	            prog-4242    [001]  1234.567890: p_malloc_0: (malloc+0x0/0x1a0 [libc.so.6]) size=24
 *
 * trace_print_context()'s "%16s-%-7d [%03d] %5lu.%06lu: ", then the
 * kprobe event's "(%pS)" or "(%pS <- %ps)" and the arguments.
 */
#include <stdio.h>
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

/* n in decimal, at least w digits (zero-padded), at p; the end */
static char *dec(char *p, unsigned long long n, int w)
{
	char t[24];
	int i = 24;
	do {
		t[--i] = (char)('0' + n % 10);
		n /= 10;
	} while (n || 24 - i < w);
	memcpy(p, t + i, (size_t)(24 - i));
	return p + 24 - i;
}

/* s padded with spaces to w columns, on the left (right-aligned) or on
 * the right */
static char *pad(char *p, const char *s, size_t n, size_t w, int right)
{
	if (right)
		for (; n < w; w--)
			*p++ = ' ';
	memcpy(p, s, n);
	p += n;
	if (!right)
		for (; n < w; n++)
			*p++ = ' ';
	return p;
}

static char *context(char *head, const struct ukpev_record *rec);

void fmt_ftrace_record(struct writer *w, const struct ukpev_event_info *ev,
		       const struct ukpev_record *rec)
{
	if (rec->event == UKPEV_EVENT_LOST) {
		fprintf(w->f, "TID:%d [LOST %llu EVENTS]\n", (int)rec->tid,
			(unsigned long long)rec->lost);
		return;
	}
	/* the place, as the last record of the same event and return
	 * address had it (a probe's never changes) */
	char *place = w->place;
	unsigned long ret = ev->kind == UKPEV_KIND_RETPROBE ? rec->ret_ip : 0;
	if (w->place_ev != ev || w->place_ret != ret || !w->place_ok) {
		if (ev->kind == UKPEV_KIND_RETPROBE) {
			int n = sym_format(w->sym, rec->ret_ip, 1, 1, place, sizeof w->place);
			if (n < 0 || (size_t)n >= sizeof w->place - 8)
				n = 0;
			memcpy(place + n, " <- ", 5);
			sym_format(w->sym, ev->addr, 0, 1, place + n + 4,
				   sizeof w->place - (size_t)n - 4);
		} else {
			sym_format(w->sym, ev->addr, 1, 1, place, sizeof w->place);
		}
		w->place_ev = ev;
		w->place_ret = ret;
		/* an address the symbols do not know yet may be known later */
		w->place_ok = strncmp(place, "0x", 2) != 0;
	}
	/* "%16s-%-7d [%03u] %5llu.%06llu: %s: (%s)%s\n", written by hand:
	 * printf and stdio's locking were most of the writer's time */
	char head[128];
	char *p = context(head, rec);
	FILE *f = w->f;
	fwrite_unlocked(head, 1, (size_t)(p - head), f);
	fputs_unlocked(ev->event, f);
	fwrite_unlocked(": (", 1, 3, f);
	fputs_unlocked(place, f);
	putc_unlocked(')', f);
	fputs_unlocked(fmt_args(w, ev, rec, UKPEV_FMT_FTRACE), f);
	putc_unlocked('\n', f);
}

/* trace_print_context(): "%16s-%-7d [%03u] %5llu.%06llu: " into head; its end */
static char *context(char *head, const struct ukpev_record *rec)
{
	char num[24], *p = head;
	const char *comm = rec->comm ? rec->comm : "<...>";
	size_t cl = strnlen(comm, 64);
	p = pad(p, comm, cl, 16, 1);
	*p++ = '-';
	char *e = (int)rec->tid < 0 ? (num[0] = '-', dec(num + 1, (unsigned long long)-(long long)rec->tid, 1))
				    : dec(num, (unsigned long long)rec->tid, 1);
	p = pad(p, num, (size_t)(e - num), 7, 0);
	*p++ = ' ';
	*p++ = '[';
	p = dec(p, rec->cpu, 3);
	*p++ = ']';
	*p++ = ' ';
	e = dec(num, rec->ts_ns / 1000000000ull, 1);
	p = pad(p, num, (size_t)(e - num), 5, 1);
	*p++ = '.';
	p = dec(p, rec->ts_ns % 1000000000ull / 1000, 6);
	*p++ = ':';
	*p++ = ' ';
	return p;
}

void fmt_ftrace_stack(struct writer *w, const struct ukpev_record *rec)
{
	char head[128], name[1024];
	char *p = context(head, rec);
	FILE *f = w->f;
	fwrite_unlocked(head, 1, (size_t)(p - head), f);
	fputs_unlocked("<stack trace>\n", f);
	const uint64_t *fr = rec->payload;
	for (unsigned i = 0; i < rec->payload_size / 8; i++) {
		sym_format(w->sym, (unsigned long)fr[i], 1, SYM_OBJ | SYM_UNKNOWN_IN_OBJ, name,
			   sizeof name);
		fputs_unlocked(" => ", f);
		fputs_unlocked(name, f);
		putc_unlocked('\n', f);
	}
}

void fmt_ftrace_end(struct writer *w)
{
	fflush(w->f);
}
