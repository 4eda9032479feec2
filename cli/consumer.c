/* SPDX-License-Identifier: MIT */
/*
 * The consumer.  A drainer thread empties every thread's buffer of the
 * shared area as fast as the target fills them, copying the records into
 * chunks of memory (the buffers' sub-buffers go back to the writers at
 * once); the main thread merges and writes them.
 *
 * The reader hands records thread by thread; a record read now may be
 * older than one of another thread read in an earlier round, so records
 * are held back until they are older than the start of the latest round
 * published, less a margin for a thread preempted between taking its
 * timestamp and committing its record: those are complete and go out, sorted by
 * (timestamp, order read), which keeps each thread's own order.  A kept
 * record is compact (struct qrec): they may all be held at once.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "consumer.h"

#define CHUNK_SIZE	(4u << 20)
#define MARGIN_NS	50000000ull	/* 50 ms: a thread preempted between its
					   timestamp and its commit */

struct chunk {
	struct chunk *next;
	size_t used;
	size_t live;		/* records not yet written */
	int sealed;		/* published: no record is added any more */
	char data[];
};

/* a record as kept until written: what the writer needs, compact (every
 * record of the trace may be held here at once) */
struct qrec {
	uint64_t ts_ns;
	struct chunk *ch;
	const char *comm;	/* interned: names of a session are few */
	uint64_t x;		/* lost (a LOST marker), or ret_ip */
	pid_t pid, tid;
	unsigned cpu, event;
	unsigned payload_size;
	unsigned char payload[];
};

#define QREC_SIZE(n) ((offsetof(struct qrec, payload) + (n) + 7) & ~(size_t)7)

/* the record the formatters take, from q */
static void unpack(const struct qrec *q, struct ukpev_record *r)
{
	memset(r, 0, sizeof *r);
	r->ts_ns = q->ts_ns;
	r->pid = q->pid;
	r->tid = q->tid;
	r->cpu = q->cpu;
	r->event = q->event;
	if (q->event == UKPEV_EVENT_LOST)
		r->lost = q->x;
	else if (q->event == UKPEV_EVENT_STACK)
		r->stack_of = (unsigned)q->x;
	else
		r->ret_ip = q->x;
	r->payload = q->payload;
	r->payload_size = q->payload_size;
	r->comm = q->comm;
}

/* the drainer's interned thread names (tid, name), kept to the end */
struct name { struct name *next; pid_t tid; char s[24]; };

static const char *intern(struct consumer *c, pid_t tid, const char *s)
{
	if (!s)
		s = "<...>";
	if (c->last_name && c->last_name->tid == tid && !strncmp(c->last_name->s, s, 23))
		return c->last_name->s;
	for (struct name *n = c->names; n; n = n->next)
		if (n->tid == tid && !strncmp(n->s, s, 23)) {
			c->last_name = n;
			return n->s;
		}
	struct name *n = malloc(sizeof *n);
	if (!n)
		abort();
	n->tid = tid;
	snprintf(n->s, sizeof n->s, "%s", s);
	n->next = c->names;
	c->names = n;
	c->last_name = n;
	return n->s;
}

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
	c->w.r = r;
	c->format = format;
	pthread_mutex_init(&c->mu, NULL);
	c->ready_tail = &c->ready;
	c->round_tail = &c->round;
	if (format == FMT_JSON)
		fmt_json_header(&c->w);
	else if (format == FMT_FTRACE)
		fmt_ftrace_header(&c->w);
	fflush(out);
}

void consumer_mute(struct consumer *c, pid_t tid, uint64_t until_ns)
{
	if (c->nmute < (int)(sizeof c->mute / sizeof *c->mute)) {
		c->mute[c->nmute].tid = tid;
		c->mute[c->nmute++].until = until_ns;
	}
}

/* ---- the drainer ----------------------------------------------------- */

static struct qrec *alloc_rec(struct consumer *c, size_t payload)
{
	size_t need = QREC_SIZE(payload);
	if (!c->cur || c->cur->used + need > CHUNK_SIZE - sizeof(struct chunk)) {
		size_t sz = need > CHUNK_SIZE - sizeof(struct chunk) ?
			    need + sizeof(struct chunk) : CHUNK_SIZE;
		struct chunk *ch = NULL;
		if (sz == CHUNK_SIZE) {
			pthread_mutex_lock(&c->mu);
			if ((ch = c->spare)) {
				c->spare = ch->next;
				c->nspare--;
			}
			pthread_mutex_unlock(&c->mu);
		}
		if (!ch)
			ch = malloc(sz);
		if (!ch)
			abort();
		ch->next = NULL;
		ch->used = 0;
		ch->live = 0;
		ch->sealed = 0;
		*c->round_tail = ch;
		c->round_tail = &ch->next;
		c->cur = ch;
	}
	struct qrec *q = (struct qrec *)(void *)(c->cur->data + c->cur->used);
	c->cur->used += need;
	c->cur->live++;
	q->ch = c->cur;
	return q;
}

static int collect(const struct ukpev_record *rec, void *arg)
{
	struct consumer *c = arg;
	for (int k = 0; k < c->nmute; k++)
		if (rec->tid == c->mute[k].tid && rec->ts_ns <= c->mute[k].until &&
		    rec->event != UKPEV_EVENT_LOST)
			return 0;
	struct qrec *q = alloc_rec(c, rec->payload_size);
	q->ts_ns = rec->ts_ns;
	q->comm = intern(c, rec->tid, rec->comm);
	q->x = rec->event == UKPEV_EVENT_LOST ? rec->lost :
	       rec->event == UKPEV_EVENT_STACK ? rec->stack_of : rec->ret_ip;
	q->pid = rec->pid;
	q->tid = rec->tid;
	q->cpu = rec->cpu;
	q->event = rec->event;
	q->payload_size = rec->payload_size;
	if (rec->payload_size)
		memcpy(q->payload, rec->payload, rec->payload_size);
	/* a lost marker carries no time: it stands where it was delivered,
	 * after its thread's previous record (or, first of its thread in a
	 * round, with its next one) */
	if (rec->event == UKPEV_EVENT_LOST) {
		if (rec->tid == c->last_tid) {
			q->ts_ns = c->last_ts;
		} else {
			q->ts_ns = 0;
			if (!c->lost_first || c->lost_tid != rec->tid)
				c->lost_first = q;
			c->lost_tid = rec->tid;
		}
	} else {
		if (c->lost_first && c->lost_tid == rec->tid) {
			/* every marker of this thread since lost_first */
			struct chunk *ch = c->lost_first->ch;
			char *p = (char *)c->lost_first;
			for (;;) {
				char *end = ch->data + ch->used;
				while (p < end) {
					struct qrec *x = (struct qrec *)(void *)p;
					if (x == q)
						goto fixed;
					if (x->tid == rec->tid && x->ts_ns == 0)
						x->ts_ns = rec->ts_ns;
					p += QREC_SIZE(x->payload_size);
				}
				ch = ch->next;
				if (!ch)
					break;
				p = ch->data;
			}
fixed:;
		}
		c->lost_first = NULL;
		c->last_tid = rec->tid;
		c->last_ts = rec->ts_ns;
	}
	return 0;
}

/* one round over every buffer; the chunks it filled published */
static int round_once(struct consumer *c, int flush)
{
	uint64_t start = now_ns();
	/* the last read also tells each thread's latest losses, which no
	 * record came after to carry a marker */
	int n = flush ? ukpev_reader_flush(c->r, collect, c)
		      : ukpev_reader_poll(c->r, collect, c, 0);
	if (c->lost_first) {
		/* markers with no next record of their thread: at this time */
		for (struct chunk *ch = c->lost_first->ch; ch; ch = ch->next)
			for (char *p = ch->data; p < ch->data + ch->used;) {
				struct qrec *x = (struct qrec *)(void *)p;
				if (x->event == UKPEV_EVENT_LOST && x->ts_ns == 0)
					x->ts_ns = start;
				p += QREC_SIZE(x->payload_size);
			}
		c->lost_first = NULL;
	}
	pthread_mutex_lock(&c->mu);
	if (c->round) {
		*c->ready_tail = c->round;
		c->ready_tail = c->round_tail;
	}
	/* the chunk being filled stays the drainer's: seal the others */
	for (struct chunk *ch = c->round; ch; ch = ch->next)
		if (ch != c->cur)
			ch->sealed = 1;
	c->ready_round_start = start;
	pthread_mutex_unlock(&c->mu);
	c->round = NULL;
	c->round_tail = &c->round;
	c->cur = NULL;		/* the next round starts a chunk of its own */
	return n;
}

static void *drain_thread(void *arg)
{
	struct consumer *c = arg;
	while (!c->stop) {
		if (round_once(c, 0) == 0)
			usleep(1000);
	}
	/* the last read: until nothing more comes */
	round_once(c, 1);
	c->flushed = 1;
	return NULL;
}

void consumer_start(struct consumer *c)
{
	c->running = pthread_create(&c->drainer, NULL, drain_thread, c) == 0;
}

/* ---- the writer ------------------------------------------------------ */

/*
 * --format=folded: the stacks of stacktrace triggers, counted by their
 * folded form ("outer;...;inner": function names, the probed one last).
 */
static uint64_t fold_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	return h;
}

static void fold_add(struct consumer *c, const struct ukpev_record *rec)
{
	const uint64_t *fr = rec->payload;
	unsigned n = rec->payload_size / 8;
	if (!n)
		return;
	char *line = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&line, &len);
	if (!f)
		abort();
	char name[512];
	for (unsigned i = n; i-- > 0;) {
		/* a return address names the call before it */
		sym_folded(c->w.sym, (unsigned long)fr[i] - (i ? 1 : 0), name, sizeof name);
		if (i && strstr(name, "[+0x"))	/* no name: the address as the stacks show it */
			sym_folded(c->w.sym, (unsigned long)fr[i], name, sizeof name);
		fprintf(f, "%s%s", name, i ? ";" : "");
	}
	fclose(f);
	if (c->nfold * 2 >= c->capfold) {
		size_t cap = c->capfold ? 2 * c->capfold : 1024;
		struct fold *nf = calloc(cap, sizeof *nf);
		if (!nf)
			abort();
		for (size_t k = 0; k < c->capfold; k++)
			if (c->folds[k].line) {
				size_t j = fold_hash(c->folds[k].line) & (cap - 1);
				while (nf[j].line)
					j = (j + 1) & (cap - 1);
				nf[j] = c->folds[k];
			}
		free(c->folds);
		c->folds = nf;
		c->capfold = cap;
	}
	size_t j = fold_hash(line) & (c->capfold - 1);
	while (c->folds[j].line && strcmp(c->folds[j].line, line))
		j = (j + 1) & (c->capfold - 1);
	if (c->folds[j].line) {
		free(line);
	} else {
		c->folds[j].line = line;
		c->nfold++;
	}
	c->folds[j].count++;
}

static int fold_cmp(const void *a, const void *b)
{
	const struct fold *x = a, *y = b;
	if (!x->line || !y->line)
		return !x->line - !y->line;
	return strcmp(x->line, y->line);
}

static void fold_write(struct consumer *c)
{
	if (!c->folds)
		return;
	qsort(c->folds, c->capfold, sizeof *c->folds, fold_cmp);
	for (size_t k = 0; k < c->capfold && c->folds[k].line; k++) {
		fprintf(c->w.f, "%s %llu\n", c->folds[k].line,
			(unsigned long long)c->folds[k].count);
		free(c->folds[k].line);
	}
	free(c->folds);
	c->folds = NULL;
	c->capfold = c->nfold = 0;
}

#define MAX_SPARE 16	/* chunks kept: 64 MiB */

/* a chunk written whole: back to the drainer, or freed */
static void chunk_done(struct consumer *c, struct chunk *ch)
{
	if (ch->used <= CHUNK_SIZE - sizeof(struct chunk)) {
		pthread_mutex_lock(&c->mu);
		if (c->nspare < MAX_SPARE) {
			ch->next = c->spare;
			c->spare = ch;
			c->nspare++;
			ch = NULL;
		}
		pthread_mutex_unlock(&c->mu);
	}
	free(ch);
}

static void release(struct consumer *c, struct qrec *q)
{
	struct chunk *ch = q->ch;
	if (--ch->live == 0)
		chunk_done(c, ch);
}

/* ties keep the order read: the merge below is stable */
static int before(const struct qrec *x, const struct qrec *y)
{
	return x->ts_ns < y->ts_ns;
}

/*
 * v[0..n) in (timestamp, order read): a natural merge sort.  The records
 * come as a few sorted runs (the pending ones, then one a thread a round),
 * so it takes log2(runs) passes, not log2(n) as qsort would.
 */
static void sort_runs(struct qrec **v, struct qrec **t, size_t n)
{
	while (n > 1) {
		size_t runs = 0;
		for (size_t lo = 0; lo < n;) {
			size_t mid = lo + 1;
			while (mid < n && !before(v[mid], v[mid - 1]))
				mid++;
			size_t hi = mid;
			if (hi < n) {
				hi++;
				while (hi < n && !before(v[hi], v[hi - 1]))
					hi++;
			}
			size_t a = lo, b = mid, o = lo;
			while (a < mid && b < hi)
				t[o++] = before(v[b], v[a]) ? v[b++] : v[a++];
			while (a < mid)
				t[o++] = v[a++];
			while (b < hi)
				t[o++] = v[b++];
			lo = hi;
			runs++;
		}
		memcpy(v, t, n * sizeof *v);
		if (runs == 1)
			break;
	}
}

void consumer_drain(struct consumer *c, int final)
{
	if (!c->running && !final)
		return;
	if (!c->running && !c->flushed) {
		/* no drainer (it could not start): the last read here */
		round_once(c, 1);
	}
	pthread_mutex_lock(&c->mu);
	struct chunk *list = c->ready;
	c->ready = NULL;
	c->ready_tail = &c->ready;
	uint64_t round_start = c->ready_round_start;
	pthread_mutex_unlock(&c->mu);

	size_t before = c->npend;
	for (struct chunk *ch = list, *next; ch; ch = next) {
		next = ch->next;
		size_t live = ch->live;
		char *p = ch->data, *end = ch->data + ch->used;
		if (live == 0) {
			chunk_done(c, ch);
			continue;
		}
		while (p < end) {
			struct qrec *q = (struct qrec *)(void *)p;
			if (c->npend == c->cap) {
				c->cap = c->cap ? 2 * c->cap : 65536;
				c->pend = realloc(c->pend, c->cap * sizeof *c->pend);
				c->tmp = realloc(c->tmp, c->cap * sizeof *c->tmp);
				if (!c->pend || !c->tmp)
					abort();
			}
			c->pend[c->npend++] = q;
			p += QREC_SIZE(q->payload_size);
		}
	}
	if (c->npend != before)
		sort_runs(c->pend + c->start, c->tmp, c->npend - c->start);
	uint64_t limit = final ? UINT64_MAX :
			 round_start > MARGIN_NS ? round_start - MARGIN_NS : 0;
	size_t k = c->start;
	for (; k < c->npend && c->pend[k]->ts_ns <= limit; k++) {
		struct qrec *q = c->pend[k];
		const struct ukpev_event_info *ev = NULL;
		struct ukpev_record rec;
		unpack(q, &rec);
		if (q->event != UKPEV_EVENT_LOST) {
			ev = ukpev_reader_event(c->r, q->event == UKPEV_EVENT_STACK ?
						rec.stack_of : q->event);
			if (!ev) {
				release(c, q);
				continue;
			}
		}
		if (q->event == UKPEV_EVENT_STACK) {
			if (c->format == FMT_FOLDED)
				fold_add(c, &rec);
			else if (c->format == FMT_JSON)
				fmt_json_stack(&c->w, ev, &rec);
			else
				fmt_ftrace_stack(&c->w, &rec);
		} else if (c->format == FMT_JSON) {
			fmt_json_record(&c->w, ev, &rec);
		} else if (c->format == FMT_FTRACE) {
			fmt_ftrace_record(&c->w, ev, &rec);
		}
		c->written++;
		release(c, q);
	}
	c->start = k;
	if (c->start == c->npend) {
		c->start = c->npend = 0;
	} else if (c->start > c->npend / 2) {
		memmove(c->pend, c->pend + c->start, (c->npend - c->start) * sizeof *c->pend);
		c->npend -= c->start;
		c->start = 0;
	}
}

void consumer_end(struct consumer *c)
{
	if (c->running) {
		c->stop = 1;
		pthread_join(c->drainer, NULL);
	}
	c->running = 0;
	consumer_drain(c, 1);
	if (c->format == FMT_JSON) {
		fmt_json_end(&c->w);
	} else if (c->format == FMT_FOLDED) {
		fold_write(c);
		fflush(c->w.f);
	} else {
		fmt_ftrace_end(&c->w);
	}
	free(c->pend);
	free(c->tmp);
	while (c->names) {
		struct name *n = c->names;
		c->names = n->next;
		free(n);
	}
	while (c->spare) {
		struct chunk *ch = c->spare;
		c->spare = ch->next;
		free(ch);
	}
	free(c->w.buf);
	free(c->w.named);
}
