/* SPDX-License-Identifier: MIT */
/*
 * ukp-events-bench: nanoseconds per dynamic event, beside a plain call in
 * the same run, and what a consumer does with the records.
 *
 *	ukp-events-bench [-r RUNS] [-n CALLS]
 *
 * Rows (each an event on a jump-optimised function entry; the target is
 * `lea 1(%rdi),%rax; ret`, written in asm so the probed code is known):
 *
 *	call	the plain call of the target, no probe
 *	e0	"p bt_e0": no fetchargs
 *	e3	"p bt_e3 a=%di:s64 b=%si:x64 s=+0(%dx):string", a 16-byte string
 *	er	"r bt_er $retval"
 *
 * One run of a row: arm, warm up, then SLICES slices of CALLS calls each,
 * each timed on its own, the records drained (untimed) after each slice
 * and counted: exactly one per call, or the row fails.  A run's figure is
 * its fastest slice (a slow slice is the shared machine, not the code);
 * the table shows the median of the runs, minus the plain call.
 *
 * Then: the decode+format rate of a consumer (ukpev_format_args into
 * /dev/null), and four threads recording a million e3 events each while a
 * consumer thread drains, with the default buffers: events lost.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <ukprobes.h>

typedef long (*target_fn)(long, long, const char *);

#define TARGET(name)						\
	__asm__(".text\n"					\
		".globl " #name "\n"				\
		".type " #name ", @function\n"			\
		".p2align 4\n"					\
		#name ":\n"					\
		"	lea 1(%rdi), %rax\n"			\
		"	ret\n"					\
		".size " #name ", .-" #name "\n")
TARGET(bt_call);
TARGET(bt_e0);
TARGET(bt_e3);
TARGET(bt_er);
long bt_call(long, long, const char *);
long bt_e0(long, long, const char *);
long bt_e3(long, long, const char *);
long bt_er(long, long, const char *);

static const char str16[] = "0123456789abcdef";

static __attribute__((noinline)) long run_loop(target_fn fn, long n)
{
	long sum = 0;
	__asm__ volatile("" : "+r"(fn));
	for (long i = 0; i < n; i++)
		sum += fn(i, i, str16);
	return sum;
}

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int count_cb(const struct ukpev_record *rec, void *arg)
{
	(void)rec;
	(*(long *)arg)++;
	return 0;
}

static long drain(struct ukpev_reader *r)
{
	long n = 0;
	while (ukpev_reader_poll(r, count_cb, &n, 0) > 0)
		;
	return n;
}

/* [OPTIMIZED] in the probe list for addr */
static int optimized(unsigned long addr)
{
	char buf[1 << 16] = "", want[32];
	FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");
	kprobes_list(f);
	fclose(f);
	snprintf(want, sizeof(want), "%016lx", addr);
	char *l = strstr(buf, want);
	if (!l)
		return 0;
	char *end = strchr(l, '\n');
	if (end)
		*end = 0;
	return strstr(l, "[OPTIMIZED]") != NULL;
}

#define SLICES 8
#define MAXRUNS 31

struct row {
	const char *name, *what, *def;
	target_fn fn;
	double goal;
	double ns[MAXRUNS];
	int bad;
};

static struct row rows[] = {
	{ "call", "plain call of the target", NULL, bt_call, 0, { 0 }, 0 },
	{ "e0", "event, no fetchargs", "p:bench/e0 bt_e0", bt_e0, 10, { 0 }, 0 },
	{ "e3", "event: %di:s64 %si:x64 +0(%dx):string (16 bytes)",
	  "p:bench/e3 bt_e3 a=%di:s64 b=%si:x64 s=+0(%dx):string", bt_e3, 25, { 0 }, 0 },
	{ "er", "return event with $retval", "r:bench/er bt_er ret=$retval", bt_er, 30, { 0 }, 0 },
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

static struct ukpev_area *area;
static struct ukpev_reader *reader;

static double run_row(struct row *rw, long calls)
{
	struct ukpev_event *ev = NULL;
	if (rw->def) {
		struct ukpev_error err;
		if (ukpev_event_create(area, rw->def, 0, &ev, &err)) {
			char buf[1024];
			ukpev_error_format(buf, sizeof(buf), rw->def, &err);
			fputs(buf, stderr);
			exit(1);
		}
		wait_for_kprobe_optimizer();
		if (!optimized(ukpev_event_info(ev)->addr))
			rw->bad |= 2;
	}
	run_loop(rw->fn, calls / 4);
	drain(reader);
	double best = 1e30;
	for (int s = 0; s < SLICES; s++) {
		double t0 = now_ns();
		long sum = run_loop(rw->fn, calls);
		double t = now_ns() - t0;
		if (sum != calls * (calls - 1) / 2 + calls)
			rw->bad |= 1;
		if (ev && drain(reader) != calls)
			rw->bad |= 1;
		if (t / calls < best)
			best = t / calls;
	}
	if (ev)
		ukpev_event_remove(ev);
	return best;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	double t[MAXRUNS];
	memcpy(t, v, sizeof(double) * (size_t)n);
	qsort(t, (size_t)n, sizeof(double), cmp_d);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* ---- the consumer ------------------------------------------------------------ */

struct fmt_ctx {
	struct ukpev_reader *r;
	FILE *out;
	long n;
};

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

/* a trace line as the kernel writes it: "  comm-tid  [cpu] s.us: event: args" */
static int fmt_cb(const struct ukpev_record *rec, void *arg)
{
	struct fmt_ctx *c = arg;
	char line[4096], *p = line;
	const struct ukpev_event_info *ev = ukpev_reader_event(c->r, rec->event);
	if (!ev)
		return 0;
	size_t cl = strlen(rec->comm);
	for (size_t i = cl; i < 16; i++)
		*p++ = ' ';
	memcpy(p, rec->comm, cl);
	p += cl;
	*p++ = '-';
	p = dec(p, (unsigned)rec->tid, 1);
	memcpy(p, "  [", 3);
	p = dec(p + 3, rec->cpu, 3);
	memcpy(p, "] ", 2);
	p = dec(p + 2, rec->ts_ns / 1000000000ULL, 1);
	*p++ = '.';
	p = dec(p, rec->ts_ns / 1000 % 1000000ULL, 6);
	*p++ = ':';
	*p++ = ' ';
	size_t el = strlen(ev->event);
	memcpy(p, ev->event, el);
	p += el;
	*p++ = ':';
	int k = ukpev_format_args(ev, rec, UKPEV_FMT_FTRACE, p, sizeof(line) - (size_t)(p - line) - 1,
				  NULL, NULL);
	if (k > 0 && (size_t)k < sizeof(line) - (size_t)(p - line) - 1)
		p += k;
	*p++ = '\n';
	fwrite(line, 1, (size_t)(p - line), c->out);
	c->n++;
	return 0;
}

static double format_rate(void)
{
	struct ukpev_event *ev;
	struct ukpev_error err;
	if (ukpev_event_create(area, rows[2].def, 0, &ev, &err))
		return 0;
	FILE *out = fopen("/dev/null", "w");
	struct fmt_ctx c = { reader, out, 0 };
	double t = 0;
	for (int k = 0; k < 10; k++) {
		run_loop(bt_e3, 100000);
		double t0 = now_ns();
		while (ukpev_reader_poll(reader, fmt_cb, &c, 0) > 0)
			;
		t += now_ns() - t0;
	}
	fclose(out);
	ukpev_event_remove(ev);
	return c.n / (t / 1e9);
}

/* ---- four producers, one consumer ---------------------------------------------- */

#define PRODUCERS 4
#define PER_THREAD 1000000L
static volatile int producers_done;

static void *producer(void *arg)
{
	(void)arg;
	run_loop(bt_e3, PER_THREAD);
	__atomic_add_fetch(&producers_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void threads_run(long *got, unsigned long long *lost, double *secs)
{
	struct ukpev_area *a;
	struct ukpev_reader *r;
	struct ukpev_event *ev;
	struct ukpev_error err;
	if (ukpev_area_create(NULL, &a) || ukpev_reader_from_area(a, &r) ||
	    ukpev_event_create(a, rows[2].def, 0, &ev, &err)) {
		fprintf(stderr, "ukp-events-bench: cannot set up the threads run\n");
		exit(1);
	}
	wait_for_kprobe_optimizer();
	pthread_t th[PRODUCERS];
	long n = 0;
	double t0 = now_ns();
	producers_done = 0;
	for (int i = 0; i < PRODUCERS; i++)
		pthread_create(&th[i], NULL, producer, NULL);
	/* the consumer: this thread */
	while (__atomic_load_n(&producers_done, __ATOMIC_ACQUIRE) < PRODUCERS) {
		if (ukpev_reader_poll(r, count_cb, &n, 0) == 0)
			usleep(200);
	}
	for (int i = 0; i < PRODUCERS; i++)
		pthread_join(th[i], NULL);
	n += drain(r);
	*secs = (now_ns() - t0) / 1e9;
	*got = n;
	*lost = (unsigned long long)ukpev_reader_lost(r);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

int main(int argc, char **argv)
{
	int runs = 5;
	long calls = 50000;
	int opt;
	while ((opt = getopt(argc, argv, "r:n:")) != -1) {
		if (opt == 'r')
			runs = atoi(optarg);
		else if (opt == 'n')
			calls = atol(optarg);
		else {
			fprintf(stderr, "usage: ukp-events-bench [-r RUNS] [-n CALLS]\n");
			return 2;
		}
	}
	if (runs < 1 || runs > MAXRUNS || calls < 1000 || calls > 200000) {
		fprintf(stderr, "ukp-events-bench: RUNS 1..%d, CALLS 1000..200000\n", MAXRUNS);
		return 2;
	}
	if (ukpev_area_create(NULL, &area) || ukpev_reader_from_area(area, &reader)) {
		fprintf(stderr, "ukp-events-bench: no area\n");
		return 1;
	}
	for (int k = 0; k < runs; k++)
		for (unsigned i = 0; i < NROWS; i++)
			rows[i].ns[k] = run_row(&rows[i], calls);
	double call = median(rows[0].ns, runs);
	printf("## ukp-events-bench\n\n");
	printf("%d runs x %d slices x %ld calls; per run the fastest slice, then the median; "
	       "ns per event minus the plain call (%.2f ns)\n\n", runs, SLICES, calls, call);
	printf("| row | what | ns/event | goal | |\n|---|---|---:|---:|---|\n");
	int fail = 0;
	for (unsigned i = 0; i < NROWS; i++) {
		struct row *rw = &rows[i];
		double m = median(rw->ns, runs);
		if (!rw->def) {
			printf("| %s | %s | %.2f | | |\n", rw->name, rw->what, m);
			continue;
		}
		double net = m - call;
		const char *st = rw->bad & 1 ? "FAILED: records != calls" :
				 rw->bad & 2 ? "not optimised" : net <= rw->goal ? "met" : "missed";
		if (rw->bad & 1)
			fail = 1;
		printf("| %s | %s | %.2f | <= %.0f | %s |\n", rw->name, rw->what, net, rw->goal, st);
	}
	double rate = format_rate();
	printf("\n| consumer | decode + format (ftrace lines) into /dev/null | %.2f M events/s | "
	       ">= 5 | %s |\n", rate / 1e6, rate >= 5e6 ? "met" : "missed");
	long got;
	unsigned long long lost;
	double secs;
	threads_run(&got, &lost, &secs);
	printf("| threads | %d threads x %ld e3 events, a consumer thread draining, default "
	       "buffers (%d KiB per thread) | %ld recorded, %llu lost, %.2f s | 0 lost | %s |\n",
	       PRODUCERS, PER_THREAD, UKPEV_DEFAULT_BUFFER_KB, got, lost, secs,
	       lost == 0 && got == PRODUCERS * PER_THREAD ? "met" : "missed");
	if (got + (long)lost != PRODUCERS * PER_THREAD)
		fail = 1;
	ukpev_reader_close(reader);
	ukpev_area_destroy(area);
	return fail;
}
