/* SPDX-License-Identifier: MIT */
/*
 * --format=json: Chrome trace events, {"traceEvents":[...]}: one "ph":"i"
 * (thread-scoped instant) per record, ts in microseconds of
 * CLOCK_MONOTONIC, and "ph":"M" metadata naming the process and each
 * thread as it first appears.
 *
 * A probe and a return probe on the same function (the probe's address
 * is the return probe's function entry) are paired: each call on a
 * thread becomes one complete event ("ph":"X", ts the entry's, dur to the
 * return) named after the probe's event, with the arguments of both.
 * Every event also records the stack pointer (a last, hidden fetcharg
 * FMT_JSON_SP=$stack): at the entry it points at the return address, at
 * the return 8 bytes above, so a return finds its own call's entry among
 * the thread's open ones whatever happened in between (recursion, calls
 * whose return was not recorded, longjmp, filters).  An entry whose
 * return never comes is written as the "i" event it would have been
 * unpaired: when a return further out shows it abandoned, at the
 * thread's lost marker, or at the end.  Nothing is dropped.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"

/* an entry whose return has not come yet: a copy of its record */
struct jopen {
	uint64_t ts;
	uint64_t sp;		/* its stack pointer (FMT_JSON_SP), or 0 */
	pid_t pid;
	unsigned cpu;
	char comm[24];
	unsigned size;
	unsigned char *payload;
};

/* the open entries of one probe event on one thread, innermost last */
struct jstack {
	struct jstack *next;
	pid_t tid;
	unsigned ev;
	struct jopen *v;
	size_t n, cap;
};

#define JP_BUCKETS 256

struct json_pairs {
	unsigned nev;		/* events classified */
	int *pair;		/* a probe: the return probe it pairs with, or -1 */
	int *first;		/* a return probe: its first probe, or -1 */
	int *next;		/* a probe: the next probe of the same return probe */
	unsigned char *rename;	/* a probe: its return probe has names of its own */
	unsigned char *has_sp;	/* its last fetcharg is FMT_JSON_SP */
	struct jstack *tab[JP_BUCKETS];
};

const char **fmt_json_defs(const char **defs, int n)
{
	const char **out = calloc((size_t)n + 1, sizeof *out);
	if (!out)
		abort();
	for (int k = 0; k < n; k++) {
		char *d;
		struct ukpev_def *pd;
		struct ukpev_error e;
		out[k] = defs[k];
		if (asprintf(&d, "%s " FMT_JSON_SP "=$stack:x64", defs[k]) < 0)
			abort();
		/* one fetcharg more may not fit (UKPEV_MAX_ARGS, the record's
		 * size): that event goes unpaired, as given */
		if (ukpev_def_parse(d, &pd, &e) < 0) {
			free(d);
			continue;
		}
		ukpev_def_free(pd);
		out[k] = d;
	}
	return out;
}

void fmt_json_defs_free(const char **sent, const char **defs, int n)
{
	for (int k = 0; k < n; k++)
		if (sent[k] != defs[k])
			free((char *)sent[k]);
	free(sent);
}

/* ev without its FMT_JSON_SP fetcharg, for the formatter */
static const struct ukpev_event_info *shown(const struct ukpev_event_info *ev,
					    struct ukpev_event_info *tmp)
{
	if (ev->nargs && !strcmp(ev->args[ev->nargs - 1].name, FMT_JSON_SP)) {
		*tmp = *ev;
		tmp->nargs--;
		return tmp;
	}
	return ev;
}

static uint64_t sp_of(const struct ukpev_event_info *ev, const struct ukpev_record *rec)
{
	uint64_t v = 0;
	if (ev->nargs && !strcmp(ev->args[ev->nargs - 1].name, FMT_JSON_SP) &&
	    ukpev_value_u64(ev, rec, ev->nargs - 1, 0, &v) < 0)
		v = 0;
	return v;
}

void fmt_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

static void sep(struct writer *w)
{
	fputs(w->first ? "\n" : ",\n", w->f);
	w->first = 0;
}

void fmt_json_header(struct writer *w)
{
	if (!w->buf) {
		w->cap = 4096;
		w->buf = malloc(w->cap);
	}
	w->first = 1;
	fputs("{\"traceEvents\":[", w->f);
}

/* process ids are kept as -pid beside the thread ids */
static int seen(struct writer *w, pid_t id)
{
	for (size_t k = 0; k < w->nnamed; k++)
		if (w->named[k] == id)
			return 1;
	if (w->nnamed == w->capnamed) {
		w->capnamed = w->capnamed ? 2 * w->capnamed : 16;
		w->named = realloc(w->named, w->capnamed * sizeof *w->named);
		if (!w->named)
			abort();
	}
	w->named[w->nnamed++] = id;
	return 0;
}

static void meta(struct writer *w, const char *what, pid_t pid, pid_t tid, const char *name)
{
	sep(w);
	fprintf(w->f, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
		what, (int)pid, (int)tid);
	fmt_json_str(w->f, name);
	fputs("}}", w->f);
}

static void name_thread(struct writer *w, const struct ukpev_record *rec)
{
	const char *comm = rec->comm ? rec->comm : "";
	/* a process is named after its main thread's name where that
	 * records, else after its first thread's */
	if (!seen(w, -rec->pid))
		meta(w, "process_name", rec->pid, rec->pid, comm);
	if (!seen(w, rec->tid))
		meta(w, "thread_name", rec->pid, rec->tid, comm);
}

/* ---- probe / return probe pairs ------------------------------------ */

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		abort();
	return p;
}

static int names_clash(const struct ukpev_event_info *a, const struct ukpev_event_info *b)
{
	struct ukpev_event_info ta, tb;
	a = shown(a, &ta);
	b = shown(b, &tb);
	for (unsigned i = 0; i < a->nargs; i++)
		for (unsigned k = 0; k < b->nargs; k++)
			if (!strcmp(a->args[i].name, b->args[k].name))
				return 1;
	return 0;
}

/* which probes pair with which return probes: those of every event known
 * so far (all are created before the first record) */
static struct json_pairs *pairs(struct writer *w, unsigned id)
{
	struct json_pairs *jp = w->jp;
	if (!w->r)
		return NULL;
	if (!jp)
		jp = w->jp = calloc(1, sizeof *jp);
	if (!jp)
		abort();
	if (id < jp->nev)
		return jp;
	unsigned n = ukpev_reader_nevents(w->r);
	if (n <= id)
		n = id + 1;
	jp->pair = xrealloc(jp->pair, n * sizeof *jp->pair);
	jp->first = xrealloc(jp->first, n * sizeof *jp->first);
	jp->next = xrealloc(jp->next, n * sizeof *jp->next);
	jp->rename = xrealloc(jp->rename, n);
	jp->has_sp = xrealloc(jp->has_sp, n);
	for (unsigned k = 0; k < n; k++) {
		const struct ukpev_event_info *ev = ukpev_reader_event(w->r, k);
		jp->pair[k] = jp->first[k] = jp->next[k] = -1;
		jp->has_sp[k] = ev && ev->nargs && !strcmp(ev->args[ev->nargs - 1].name, FMT_JSON_SP);
	}
	memset(jp->rename, 0, n);
	for (unsigned p = 0; p < n; p++) {
		const struct ukpev_event_info *pe = ukpev_reader_event(w->r, p);
		if (!pe || pe->kind != UKPEV_KIND_PROBE || (!pe->addr && !pe->deferred))
			continue;
		for (unsigned r = 0; r < n; r++) {
			const struct ukpev_event_info *re = ukpev_reader_event(w->r, r);
			if (!re || re->kind != UKPEV_KIND_RETPROBE)
				continue;
			/* the same function: by address, or for events armed
			 * when their library loads (maybe not yet, maybe at
			 * another address each time) by the place written */
			if (pe->deferred || re->deferred ? !pe->deferred || !re->deferred ||
							   strcmp(pe->place, re->place)
							 : re->addr != pe->addr)
				continue;
			/* without the stack pointers, calls are told apart
			 * by their order alone: a filter may keep one side of
			 * a call and not the other */
			if (!(jp->has_sp[p] && jp->has_sp[r]) && (pe->filter || re->filter))
				continue;
			/* the first return probe of the function: a list per
			 * return probe, in event order */
			jp->pair[p] = (int)r;
			int *at = &jp->first[r];
			while (*at >= 0)
				at = &jp->next[*at];
			*at = (int)p;
			jp->rename[p] = (unsigned char)names_clash(pe, re);
			break;
		}
	}
	jp->nev = n;
	return jp;
}

static struct jstack *jstack_get(struct json_pairs *jp, pid_t tid, unsigned ev, int make)
{
	unsigned h = ((unsigned)tid * 31u + ev) % JP_BUCKETS;
	for (struct jstack *s = jp->tab[h]; s; s = s->next)
		if (s->tid == tid && s->ev == ev)
			return s;
	if (!make)
		return NULL;
	struct jstack *s = calloc(1, sizeof *s);
	if (!s)
		abort();
	s->tid = tid;
	s->ev = ev;
	s->next = jp->tab[h];
	jp->tab[h] = s;
	return s;
}

static void push_entry(struct json_pairs *jp, const struct ukpev_event_info *ev,
		       const struct ukpev_record *rec)
{
	struct jstack *s = jstack_get(jp, rec->tid, rec->event, 1);
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->v = xrealloc(s->v, s->cap * sizeof *s->v);
	}
	struct jopen *o = &s->v[s->n++];
	o->ts = rec->ts_ns;
	o->sp = sp_of(ev, rec);
	o->pid = rec->pid;
	o->cpu = rec->cpu;
	snprintf(o->comm, sizeof o->comm, "%s", rec->comm ? rec->comm : "");
	o->size = rec->payload_size;
	o->payload = xrealloc(NULL, o->size);
	if (o->size)
		memcpy(o->payload, rec->payload, o->size);
}

/* the record an open entry was */
static void entry_record(const struct jstack *s, const struct jopen *o,
			 struct ukpev_record *rec)
{
	memset(rec, 0, sizeof *rec);
	rec->ts_ns = o->ts;
	rec->pid = o->pid;
	rec->tid = s->tid;
	rec->cpu = o->cpu;
	rec->event = s->ev;
	rec->payload = o->payload;
	rec->payload_size = o->size;
	rec->comm = o->comm;
}

static void write_instant(struct writer *w, const struct ukpev_event_info *ev,
			  const struct ukpev_record *rec)
{
	struct ukpev_event_info tmp;
	ev = shown(ev, &tmp);
	sep(w);
	fputs("{\"name\":", w->f);
	fmt_json_str(w->f, ev->event);
	fputs(",\"cat\":", w->f);
	fmt_json_str(w->f, ev->group);
	fprintf(w->f, ",\"ph\":\"i\",\"s\":\"t\",\"ts\":%llu.%03llu,\"pid\":%d,\"tid\":%d,\"args\":{%s}}",
		(unsigned long long)(rec->ts_ns / 1000), (unsigned long long)(rec->ts_ns % 1000),
		(int)rec->pid, (int)rec->tid, fmt_args(w, ev, rec, UKPEV_FMT_JSON));
}

/* an open entry written as the instant it is, and freed */
static void write_open(struct writer *w, const struct jstack *s, struct jopen *o)
{
	const struct ukpev_event_info *ev = ukpev_reader_event(w->r, s->ev);
	struct ukpev_record rec;
	entry_record(s, o, &rec);
	if (ev)
		write_instant(w, ev, &rec);
	free(o->payload);
}

/* open entries of tid (every thread: 0) written as the instants they are */
static void flush_open(struct writer *w, pid_t tid)
{
	struct json_pairs *jp = w->jp;
	if (!jp)
		return;
	for (unsigned h = 0; h < JP_BUCKETS; h++)
		for (struct jstack *s = jp->tab[h]; s; s = s->next) {
			if (tid && s->tid != tid)
				continue;
			for (size_t k = 0; k < s->n; k++)
				write_open(w, s, &s->v[k]);
			s->n = 0;
		}
}

/*
 * The members of a return probe's "args" (as ukpev_format_args writes
 * them: "NAME":VALUE,...), those whose NAME the probe also has renamed
 * RETEVENT.NAME.
 */
static void write_ret_args(FILE *f, const char *a, const struct ukpev_event_info *pe,
			   const struct ukpev_event_info *re)
{
	while (*a == '"') {
		const char *ke = strchr(a + 1, '"');
		if (!ke)
			break;
		size_t kl = (size_t)(ke - a - 1);
		int clash = 0;
		for (unsigned i = 0; i < pe->nargs && !clash; i++)
			clash = strlen(pe->args[i].name) == kl && !strncmp(pe->args[i].name, a + 1, kl);
		if (clash) {
			fputc('"', f);
			fputs(re->event, f);
			fputc('.', f);
			fwrite(a + 1, 1, kl, f);
			fputc('"', f);
		} else {
			fwrite(a, 1, kl + 2, f);
		}
		/* the value: to the next comma outside strings and arrays */
		const char *v = ke + 1;
		int depth = 0, str = 0;
		for (; *v; v++) {
			if (str) {
				if (*v == '\\' && v[1])
					v++;
				else if (*v == '"')
					str = 0;
			} else if (*v == '"') {
				str = 1;
			} else if (*v == '[') {
				depth++;
			} else if (*v == ']') {
				depth--;
			} else if (*v == ',' && depth == 0) {
				break;
			}
		}
		fwrite(ke + 1, 1, (size_t)(v - ke - 1), f);
		if (*v != ',')
			break;
		fputc(',', f);
		a = v + 1;
	}
}

/* the return rec of return probe re closes the innermost open entry of
 * each of its probes on that thread: 1, or 0 when none was open */
static int close_entries(struct writer *w, struct json_pairs *jp,
			 const struct ukpev_event_info *re, const struct ukpev_record *rec)
{
	int any = 0;
	struct ukpev_event_info tr, tp;
	uint64_t rsp = jp->has_sp[rec->event] ? sp_of(re, rec) : 0;
	re = shown(re, &tr);
	for (int p = jp->first[rec->event]; p >= 0; p = jp->next[p]) {
		struct jstack *s = jstack_get(jp, rec->tid, (unsigned)p, 0);
		const struct ukpev_event_info *pe = ukpev_reader_event(w->r, (unsigned)p);
		if (!s || !s->n || !pe)
			continue;
		pe = shown(pe, &tp);
		size_t k = s->n - 1;
		if (rsp && jp->has_sp[p]) {
			/* the entry whose return address slot is 8 below:
			 * the newest such (a slot reused after a longjmp) */
			while (s->v[k].sp != rsp - 8 && k > 0)
				k--;
			if (s->v[k].sp != rsp - 8)
				continue;	/* not recorded (filtered, lost) */
			/* the calls it made that are still open on its
			 * stack (below its slot) never returned: abandoned
			 * by longjmp, or their return not recorded */
			size_t keep = k + 1;
			for (size_t j = k + 1; j < s->n; j++) {
				if (s->v[j].sp && s->v[j].sp < rsp - 8)
					write_open(w, s, &s->v[j]);
				else
					s->v[keep++] = s->v[j];
			}
			s->n = keep;
		}
		struct jopen o0 = s->v[k], *o = &o0;
		memmove(&s->v[k], &s->v[k + 1], (s->n - k - 1) * sizeof *s->v);
		s->n--;
		struct ukpev_record er;
		entry_record(s, o, &er);
		uint64_t dur = rec->ts_ns >= o->ts ? rec->ts_ns - o->ts : 0;
		sep(w);
		fputs("{\"name\":", w->f);
		fmt_json_str(w->f, pe->event);
		fputs(",\"cat\":", w->f);
		fmt_json_str(w->f, pe->group);
		fprintf(w->f, ",\"ph\":\"X\",\"ts\":%llu.%03llu,\"dur\":%llu.%03llu,\"pid\":%d,\"tid\":%d,\"args\":{",
			(unsigned long long)(o->ts / 1000), (unsigned long long)(o->ts % 1000),
			(unsigned long long)(dur / 1000), (unsigned long long)(dur % 1000),
			(int)o->pid, (int)s->tid);
		const char *pa = fmt_args(w, pe, &er, UKPEV_FMT_JSON);
		int have = *pa != 0;
		fputs(pa, w->f);
		const char *ra = fmt_args(w, re, rec, UKPEV_FMT_JSON);
		if (*ra) {
			if (have)
				fputc(',', w->f);
			if (jp->rename[p])
				write_ret_args(w->f, ra, pe, re);
			else
				fputs(ra, w->f);
		}
		fputs("}}", w->f);
		free(o->payload);
		any = 1;
	}
	return any;
}

void fmt_json_record(struct writer *w, const struct ukpev_event_info *ev,
		     const struct ukpev_record *rec)
{
	name_thread(w, rec);
	if (rec->event == UKPEV_EVENT_LOST) {
		/* what is open on that thread may have lost its return */
		flush_open(w, rec->tid);
		sep(w);
		fprintf(w->f, "{\"name\":\"LOST\",\"cat\":\"ukprobe\",\"ph\":\"i\",\"s\":\"t\","
			"\"ts\":%llu.%03llu,\"pid\":%d,\"tid\":%d,\"args\":{\"events\":%llu}}",
			(unsigned long long)(rec->ts_ns / 1000), (unsigned long long)(rec->ts_ns % 1000),
			(int)rec->pid, (int)rec->tid, (unsigned long long)rec->lost);
		return;
	}
	struct json_pairs *jp = pairs(w, rec->event);
	if (jp && ev->kind == UKPEV_KIND_PROBE && jp->pair[rec->event] >= 0) {
		push_entry(jp, ev, rec);
		return;
	}
	if (jp && ev->kind == UKPEV_KIND_RETPROBE && jp->first[rec->event] >= 0 &&
	    close_entries(w, jp, ev, rec))
		return;
	write_instant(w, ev, rec);
}

void fmt_json_end(struct writer *w)
{
	/* entries whose return never came */
	flush_open(w, 0);
	fputs("\n]", w->f);
	if (w->json_tail)
		fputs(w->json_tail, w->f);
	fputs("}\n", w->f);
	fflush(w->f);
	struct json_pairs *jp = w->jp;
	if (jp) {
		for (unsigned h = 0; h < JP_BUCKETS; h++)
			while (jp->tab[h]) {
				struct jstack *s = jp->tab[h];
				jp->tab[h] = s->next;
				free(s->v);
				free(s);
			}
		free(jp->pair);
		free(jp->first);
		free(jp->next);
		free(jp->rename);
		free(jp->has_sp);
		free(jp);
		w->jp = NULL;
	}
}

void fmt_json_stack(struct writer *w, const struct ukpev_event_info *ev,
		    const struct ukpev_record *rec)
{
	char name[1024];
	name_thread(w, rec);
	sep(w);
	fputs("{\"name\":\"<stack trace>\",\"cat\":", w->f);
	fmt_json_str(w->f, ev->group);
	fprintf(w->f, ",\"ph\":\"i\",\"s\":\"t\",\"ts\":%llu.%03llu,\"pid\":%d,\"tid\":%d,"
		"\"args\":{\"event\":", (unsigned long long)(rec->ts_ns / 1000),
		(unsigned long long)(rec->ts_ns % 1000), (int)rec->pid, (int)rec->tid);
	fmt_json_str(w->f, ev->event);
	fputs(",\"stack\":[", w->f);
	const uint64_t *fr = rec->payload;
	for (unsigned i = 0; i < rec->payload_size / 8; i++) {
		sym_format(w->sym, (unsigned long)fr[i], 1, SYM_OBJ | SYM_UNKNOWN_IN_OBJ, name,
			   sizeof name);
		if (i)
			fputc(',', w->f);
		fmt_json_str(w->f, name);
	}
	fputs("]}}", w->f);
}
