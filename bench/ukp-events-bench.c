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
 *	ehist	e3's fetchargs, no record: its one trigger "hist:keys=a.log2"
 *	estack	e3 with a "stacktrace" trigger, 16 frames deep (the event's
 *		record and its stack's)
 *	gbt	beside estack: glibc backtrace() of the same 16 frames, in a
 *		function called at the same depth instead of the target
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
#include <sys/wait.h>
#include <signal.h>
#include <sys/mount.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <execinfo.h>
#include <unistd.h>
#include <ukprobes.h>

typedef long (*target_fn)(long, long, const char *);

#define TARGET(name)						\
	__asm__(".text\n"					\
		".globl " #name "\n"				\
		".type " #name ", @function\n"			\
		".p2align 4\n"					\
		#name ":\n"					\
		".cfi_startproc\n"				\
		"	lea 1(%rdi), %rax\n"			\
		"	ret\n"					\
		".cfi_endproc\n"				\
		".size " #name ", .-" #name "\n")
/* the same with a 5-byte nop first: where the kernel's uprobes turn
 * their int3 into a call (its best case) */
#define TARGET_NOP5(name)					\
	__asm__(".text\n"					\
		".globl " #name "\n"				\
		".type " #name ", @function\n"			\
		".p2align 4\n"					\
		#name ":\n"					\
		"	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"	\
		"	lea 1(%rdi), %rax\n"			\
		"	ret\n"					\
		".size " #name ", .-" #name "\n")
TARGET(bt_call);
TARGET(bt_k3);
TARGET(bt_kr);
TARGET(bt_b3);
TARGET_NOP5(bt_k3n);
TARGET(bt_e0);
TARGET(bt_e3);
TARGET(bt_er);
TARGET(bt_ehist);
TARGET(bt_estack);
long bt_call(long, long, const char *);
long bt_e0(long, long, const char *);
long bt_e3(long, long, const char *);
long bt_er(long, long, const char *);
long bt_ehist(long, long, const char *);
long bt_estack(long, long, const char *);

/* glibc's backtrace() where the target would be: the same result */
static unsigned gbt_frames;
static __attribute__((noinline)) long bt_gbt(long a, long b, const char *s)
{
	void *buf[64];
	(void)b;
	(void)s;
	gbt_frames = (unsigned)backtrace(buf, 64);
	return a + 1;
}
long bt_k3(long, long, const char *);
long bt_kr(long, long, const char *);
long bt_b3(long, long, const char *);
long bt_k3n(long, long, const char *);

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
	const char *trigger;	/* added to the event */
	unsigned flags;		/* ukpev_event_create's */
	int quiet;		/* soft-disabled: no record (a histogram's) */
	int stack;		/* each call: its record and a stack record */
	int depth;		/* calls made this many frames deeper */
	unsigned frames;	/* a stack's frames, as recorded */
};

static struct row rows[] = {
	{ .name = "call", .what = "plain call of the target", .fn = bt_call },
	{ .name = "e0", .what = "event, no fetchargs", .def = "p:bench/e0 bt_e0", .fn = bt_e0,
	  .goal = 10 },
	{ .name = "e3", .what = "event: %di:s64 %si:x64 +0(%dx):string (16 bytes)",
	  .def = "p:bench/e3 bt_e3 a=%di:s64 b=%si:x64 s=+0(%dx):string", .fn = bt_e3, .goal = 25 },
	{ .name = "er", .what = "return event with $retval", .def = "r:bench/er bt_er ret=$retval",
	  .fn = bt_er, .goal = 30 },
	{ .name = "ehist", .what = "e3's fetchargs, only a hist trigger (keys=a.log2), no record",
	  .def = "p:bench/ehist bt_ehist a=%di:s64 b=%si:x64 s=+0(%dx):string", .fn = bt_ehist,
	  .goal = 15, .trigger = "hist:keys=a.log2", .quiet = 1 },
	{ .name = "estack", .what = "e3 and a stacktrace trigger", .goal = 1500,
	  .def = "p:bench/estack bt_estack a=%di:s64 b=%si:x64 s=+0(%dx):string", .fn = bt_estack,
	  .trigger = "stacktrace", .flags = UKPEV_F_STACKS, .stack = 1, .depth = 10 },
	{ .name = "gbt", .what = "glibc backtrace() at the same depth, no probe", .fn = bt_gbt,
	  .depth = 10 },
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

static struct ukpev_area *area;
static struct ukpev_reader *reader;

/* run_loop, depth frames deeper */
static __attribute__((noinline)) long deep_loop(int depth, target_fn fn, long n)
{
	if (depth <= 0)
		return run_loop(fn, n);
	long r = deep_loop(depth - 1, fn, n);
	__asm__ volatile("" : "+r"(r));	/* not a tail call */
	return r;
}

/* the records of a drain, and the frames of a stack record */
struct tally { long n; unsigned frames; };
static int tally_cb(const struct ukpev_record *rec, void *arg)
{
	struct tally *t = arg;
	t->n++;
	if (rec->event == UKPEV_EVENT_STACK)
		t->frames = rec->payload_size / 8;
	return 0;
}

/* the histogram's Totals: Hits */
static unsigned long long hist_hits(unsigned h)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	unsigned long long hits = 0;
	ukpev_reader_hist_print(reader, h, f, UKPEV_HIST_KERNEL, NULL, NULL);
	fclose(f);
	const char *t = buf ? strstr(buf, "Hits: ") : NULL;
	if (t)
		hits = strtoull(t + 6, NULL, 10);
	free(buf);
	return hits;
}

static double run_row(struct row *rw, long calls)
{
	struct ukpev_event *ev = NULL;
	unsigned hist = 0;
	if (rw->def) {
		struct ukpev_error err;
		if (ukpev_event_create(area, rw->def, rw->flags, &ev, &err) ||
		    (rw->trigger && (hist = ukpev_reader_nhists(reader),
				     ukpev_event_add_trigger(ev, rw->trigger, &err)))) {
			char buf[1024];
			ukpev_error_format(buf, sizeof(buf), rw->trigger ? rw->trigger : rw->def, &err);
			fputs(buf, stderr);
			exit(1);
		}
		if (rw->quiet)
			ukpev_event_soft_enable(ev, 0);
		wait_for_kprobe_optimizer();
		if (!optimized(ukpev_event_info(ev)->addr))
			rw->bad |= 2;
	}
	deep_loop(rw->depth, rw->fn, calls / 4);
	drain(reader);
	double best = 1e30;
	long want = rw->quiet ? 0 : rw->stack ? 2 * calls : calls;
	for (int s = 0; s < SLICES; s++) {
		double t0 = now_ns();
		long sum = deep_loop(rw->depth, rw->fn, calls);
		double t = now_ns() - t0;
		if (sum != calls * (calls - 1) / 2 + calls)
			rw->bad |= 1;
		struct tally ta = { 0, 0 };
		while (ukpev_reader_poll(reader, tally_cb, &ta, 0) > 0)
			;
		if (ev && ta.n != want)
			rw->bad |= 1;
		if (rw->stack)
			rw->frames = ta.frames;
		if (t / calls < best)
			best = t / calls;
	}
	if (rw->fn == bt_gbt)
		rw->frames = gbt_frames;
	if (rw->quiet && hist_hits(hist) != (unsigned long long)(calls / 4 + SLICES * calls))
		rw->bad |= 1;
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

/* ---- the kernel's uprobe_events, the same fetchargs, same run ----------------- */

/*
 * The peers of e3 and er: the kernel's own dynamic events on the same
 * kind of function in this process (tracefs; root), recording the same
 * fetchargs into its ring buffer.  On `lea; ret` the kernel single-steps
 * its int3 (k3, kr); after a 5-byte nop it turns the int3 into a call
 * (k3n: its best case).  Each row checks the kernel counted one hit per
 * call (uprobe_profile).  NA where tracefs cannot be used.
 */
struct krow {
	const char *name, *what;
	char kind;		/* 'p' or 'r' */
	const char *args;
	target_fn fn;
	double ns[MAXRUNS];
	char why[160];		/* NA: why */
	int bad;
};
static struct krow krows[] = {
	{ "k3", "kernel uprobe_events, the e3 fetchargs, on `lea; ret` (int3, single-stepped)",
	  'p', "a=%di:s64 b=%si:x64 s=+0(%dx):string", bt_k3, { 0 }, "", 0 },
	{ "k3n", "the same after a 5-byte nop (the kernel's optimised uprobe)",
	  'p', "a=%di:s64 b=%si:x64 s=+0(%dx):string", bt_k3n, { 0 }, "", 0 },
	{ "kr", "kernel uretprobe with $retval", 'r', "ret=$retval", bt_kr, { 0 }, "", 0 },
};
#define NKROWS (sizeof(krows) / sizeof(krows[0]))
static char tfs[64];

static int kwrite(const char *file, const char *line, int append)
{
	char p[160];
	snprintf(p, sizeof(p), "%s/%s", tfs, file);
	int fd = open(p, O_WRONLY | O_CLOEXEC | (append ? O_APPEND : O_TRUNC));
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, line, strlen(line));
	int e = n < 0 ? -errno : 0;
	close(fd);
	return e;
}

static const char *tracefs(void)
{
	if (geteuid())
		return "not root";
	if (access("/sys/kernel/tracing/uprobe_events", W_OK) &&
	    mount("nodev", "/sys/kernel/tracing", "tracefs", 0, NULL) &&
	    access("/sys/kernel/tracing/uprobe_events", W_OK))
		return "no tracefs with uprobe_events";
	snprintf(tfs, sizeof(tfs), "/sys/kernel/tracing");
	return NULL;
}

/* fn's offset in the file mapped at it, and that file */
static int file_offset(const void *fn, char *path, size_t n, unsigned long *off)
{
	FILE *m = fopen("/proc/self/maps", "re");
	char line[4352];
	int ok = -1;
	while (m && ok && fgets(line, sizeof(line), m)) {
		unsigned long lo, hi, fo;
		char file[4096];
		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %4095s", &lo, &hi, &fo, file) == 4 &&
		    (unsigned long)fn >= lo && (unsigned long)fn < hi) {
			snprintf(path, n, "%s", file);
			*off = (unsigned long)fn - lo + fo;
			ok = 0;
		}
	}
	if (m)
		fclose(m);
	return ok;
}

static long khits(const char *ev)
{
	char p[160], line[4352], file[4096], name[128];
	unsigned long h;
	long ret = -1;
	snprintf(p, sizeof(p), "%s/uprobe_profile", tfs);
	FILE *f = fopen(p, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%4095s %127s %lu", file, name, &h) == 3 && !strcmp(name, ev))
			ret = (long)h;
	if (f)
		fclose(f);
	return ret;
}

static void krun(struct krow *k, int run, long calls)
{
	char path[4096], def[4400], ev[64], del[96], en[160];
	unsigned long off;
	const char *why = tracefs();
	if (why || file_offset((const void *)k->fn, path, sizeof(path), &off)) {
		snprintf(k->why, sizeof(k->why), "%s", why ? why : "no mapping");
		return;
	}
	snprintf(ev, sizeof(ev), "%s_%d", k->name, (int)getpid());
	snprintf(def, sizeof(def), "%c:ukpevb/%s %s:0x%lx %s\n", k->kind, ev, path, off, k->args);
	snprintf(del, sizeof(del), "-:ukpevb/%s\n", ev);
	snprintf(en, sizeof(en), "events/ukpevb/%s/enable", ev);
	int e = kwrite("uprobe_events", def, 1);
	if (!e)
		e = kwrite(en, "1\n", 0);
	if (e) {
		snprintf(k->why, sizeof(k->why), "uprobe_events: %s", strerror(-e));
		kwrite("uprobe_events", del, 1);
		return;
	}
	long n = calls / 50;	/* microseconds a hit: fewer calls */
	run_loop(k->fn, n / 4);
	long h0 = khits(ev);
	double best = 1e30;
	for (int s = 0; s < SLICES; s++) {
		double t0 = now_ns();
		long sum = run_loop(k->fn, n);
		double t = now_ns() - t0;
		if (sum != n * (n - 1) / 2 + n)
			k->bad = 1;
		if (t / (double)n < best)
			best = t / (double)n;
	}
	if (khits(ev) - h0 != (long)SLICES * n)
		k->bad = 1;
	kwrite(en, "0\n", 0);
	kwrite("uprobe_events", del, 1);
	k->ns[run] = best;
}

/*
 * bpftrace's uprobe with a printf of the same three values (Debian's
 * bpftrace, where it can run: root, BPF allowed), attached to bt_b3 of
 * this very program.  Timed in this process as the others; bpftrace's
 * own output goes to a file, whose lines must be one per call.
 */
static double brun(long calls, char *why, size_t wn, int *bad)
{
	char exe[4096], prog[4300], out[64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (geteuid() || access("/usr/bin/bpftrace", X_OK) || n <= 0) {
		snprintf(why, wn, "no bpftrace (or not root)");
		return 0;
	}
	exe[n] = 0;
	snprintf(prog, sizeof(prog),
		 "uprobe:%s:bt_b3 { printf(\"%%d %%x %%s\\n\", arg0, arg1, str(arg2)); }", exe);
	snprintf(out, sizeof(out), "/tmp/ukp-events-bench-bpf.%d", (int)getpid());
	int sync[2];
	if (pipe(sync))
		return 0;
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		dup2(fd, 1);
		dup2(sync[1], 2);	/* "Attaching 1 probe..." */
		execl("/usr/bin/bpftrace", "bpftrace", "-e", prog, (char *)NULL);
		_exit(127);
	}
	close(sync[1]);
	/* attached: the kernel's int3 in our text */
	double t0 = now_ns();
	while (*(volatile unsigned char *)(void *)bt_b3 != 0xcc &&
	       *(volatile unsigned char *)(void *)bt_b3 != 0xe8 && now_ns() - t0 < 30e9)
		usleep(20000);
	double best = 0;
	if (*(volatile unsigned char *)(void *)bt_b3 == 0xcc ||
	    *(volatile unsigned char *)(void *)bt_b3 == 0xe8) {
		long m = calls / 50;
		run_loop(bt_b3, m);
		best = 1e30;
		for (int s = 0; s < SLICES; s++) {
			double a = now_ns();
			long sum = run_loop(bt_b3, m);
			double t = now_ns() - a;
			if (sum != m * (m - 1) / 2 + m)
				*bad = 1;
			if (t / (double)m < best)
				best = t / (double)m;
		}
		usleep(300000);		/* its reader catches up */
		kill(pid, SIGINT);
		/* at most 20 s to exit (a loaded machine), then killed */
		int waited = 0;
		while (waitpid(pid, NULL, WNOHANG) == 0) {
			if (++waited > 2000) {
				kill(pid, SIGKILL);
				waitpid(pid, NULL, 0);
				*bad = 1;
				break;
			}
			usleep(10000);
		}
		FILE *f = fopen(out, "re");
		long lines = 0;
		int c;
		while (f && (c = fgetc(f)) != EOF)
			lines += c == '\n';
		if (f)
			fclose(f);
		/* Attaching..., the warm-up and the slices (bpftrace may also
		 * print a lost count: then the lines fall short) */
		if (lines < (SLICES + 1) * m)
			*bad = 1;
	} else {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		snprintf(why, wn, "bpftrace did not attach");
	}
	close(sync[0]);
	unlink(out);
	return best;
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
	for (int k = 0; k < runs; k++) {
		for (unsigned i = 0; i < NROWS; i++)
			rows[i].ns[k] = run_row(&rows[i], calls);
		for (unsigned i = 0; i < NKROWS; i++)
			krun(&krows[i], k, calls);
	}
	/* bpftrace: one run (it takes seconds to start) */
	char bwhy[160] = "";
	int bbad = 0;
	double bns = brun(calls, bwhy, sizeof(bwhy), &bbad);
	double call = median(rows[0].ns, runs);
	printf("## ukp-events-bench\n\n");
	printf("%d runs x %d slices x %ld calls; per run the fastest slice, then the median; "
	       "ns per event minus the plain call (%.2f ns)\n\n", runs, SLICES, calls, call);
	printf("| row | what | ns/event | goal | |\n|---|---|---:|---:|---|\n");
	int fail = 0;
	for (unsigned i = 0; i < NROWS; i++) {
		struct row *rw = &rows[i];
		double m = median(rw->ns, runs);
		if (!rw->def && !rw->depth) {
			printf("| %s | %s | %.2f | | |\n", rw->name, rw->what, m);
			continue;
		}
		double net = m - call;
		const char *st = rw->bad & 1 ? "FAILED: records != calls" :
				 rw->bad & 2 ? "not optimised" : net <= rw->goal ? "met" : "missed";
		if (rw->bad & 1)
			fail = 1;
		if (!rw->def) {
			printf("| %s | %s (%u frames) | %.2f | | |\n", rw->name, rw->what, rw->frames,
			       net);
			continue;
		}
		if (rw->stack)
			printf("| %s | %s (%u frames) | %.2f | <= %.0f | %s; %.2f x gbt |\n", rw->name,
			       rw->what, rw->frames, net, rw->goal, st,
			       net / (median(rows[NROWS - 1].ns, runs) - call));
		else
			printf("| %s | %s | %.2f | <= %.0f | %s |\n", rw->name, rw->what, net,
			       rw->goal, st);
	}
	double e3 = median(rows[2].ns, runs) - call, er = median(rows[3].ns, runs) - call;
	for (unsigned i = 0; i < NKROWS; i++) {
		struct krow *k = &krows[i];
		if (k->why[0]) {
			printf("| %s | %s | NA: %s | | |\n", k->name, k->what, k->why);
			continue;
		}
		double net = median(k->ns, runs) - call;
		double ours = k->kind == 'r' ? er : e3;
		printf("| %s | %s | %.1f | | %s%.0f x %s |\n", k->name, k->what, net,
		       k->bad ? "FAILED: hits != calls; " : "", net / ours,
		       k->kind == 'r' ? "er" : "e3");
		if (k->bad)
			fail = 1;
	}
	if (bwhy[0] || !bns)
		printf("| b3 | bpftrace uprobe, printf of the e3 values | NA: %s | | |\n", bwhy);
	else
		printf("| b3 | bpftrace uprobe, printf of the e3 values (one run) | %.1f | | %s%.0f x e3 |\n",
		       bns - call, bbad ? "FAILED: lines != calls; " : "", (bns - call) / e3);
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
