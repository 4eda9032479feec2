/* SPDX-License-Identifier: MIT */
/*
 * ukp-bench: nanoseconds per probe hit, beside floors and peers measured in
 * the same run.
 *
 *	ukp-bench [--quick] [--scale F] [-n HITS] [-r RUNS] [ROW...]
 *	ukp-bench --list
 *
 * Every row is a descriptor in rows[] below: a target function, a setup
 * that arms whatever is being measured, a check that the handlers fired
 * exactly once per call, and a teardown.  One run of a row is
 *
 *	setup; warm-up calls; timed calls; check; teardown
 *
 * and the runs are interleaved (run 1 of every row, then run 2 of every
 * row, ...) so that a load change on the machine hits every row alike.
 * The table shows the median of the runs.
 *
 * Every target is the same instruction pair, written in a top-level asm()
 * block so that the probed instruction is known exactly:
 *
 *	lea 1(%rdi),%rax	<- probed
 *	ret
 *
 * lea is an instruction that the kernel's uprobes single-step (they
 * emulate nops, push, jmp and call instead), and it is one a ukprobe has
 * to run out of line.  Each timed call adds its return value to a sum that
 * is checked as well, so an out-of-line copy that computed something else
 * is caught.
 *
 * Rows flagged ROW_CHILD are measured in a process forked before anything
 * else happens, which never calls into ukprobes (the "int3" floor installs
 * its own SIGTRAP handler there, which would otherwise fight the
 * library's).
 *
 * Adding a row (e.g. "o", "r", "ro"): define a target with UKPB_TARGET,
 * write setup/check/teardown (or reuse the kprobe ones with another
 * kp_ctx), and add a line to rows[].
 */
#include <ukprobes.h>

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_HITS	200000L	/* per run of a trap row */
#define DEFAULT_RUNS	5
#define QUICK_HITS	20000L
#define QUICK_RUNS	3
#define CALL_MULT	100	/* the "call" row is ~1000x cheaper */
#define MAX_RUNS	99
#define MSG_LEN		200

#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* ------------------------------------------------------------------ */
/* Targets                                                             */

/*
 * A global function in .text; body is asm text.  Globals (and -rdynamic)
 * let the engine and kprobes_list() name them.
 */
#define UKPB_TARGET(name, align, body)				\
	"	.pushsection .text, \"ax\", @progbits\n"		\
	"	.globl " #name "\n"					\
	"	.type " #name ", @function\n"				\
	"	.p2align " #align "\n"					\
	#name ":\n"							\
	body								\
	"	.size " #name ", . - " #name "\n"			\
	"	.p2align " #align ", 0xcc\n"				\
	"	.popsection\n"

#define LEA_RET		"	lea 1(%rdi), %rax\n	ret\n"

__asm__(
	UKPB_TARGET(ukpb_tgt_call, 6, LEA_RET)
	UKPB_TARGET(ukpb_tgt_int3, 6, "	int3\n" LEA_RET)
	/* alone on its page: the kernel swaps the page for a copy */
	UKPB_TARGET(ukpb_tgt_uprobe, 12, LEA_RET)
	UKPB_TARGET(ukpb_tgt_b, 6, LEA_RET)
	UKPB_TARGET(ukpb_tgt_k, 6, LEA_RET)
	UKPB_TARGET(ukpb_tgt_b100k, 6, LEA_RET)
	/* 100,000 one-byte nops: the other probes of the "b100k" row */
	UKPB_TARGET(ukpb_nop_sled, 6, "	.rept 100000\n	nop\n	.endr\n	ret\n")
);

typedef long (*target_fn)(long);
long ukpb_tgt_call(long);
long ukpb_tgt_int3(long);
long ukpb_tgt_uprobe(long);
long ukpb_tgt_b(long);
long ukpb_tgt_k(long);
long ukpb_tgt_b100k(long);
void ukpb_nop_sled(void);

/* The measured loop, the same for every row. */
static __attribute__((noinline)) long run_loop(target_fn fn, long n)
{
	long sum = 0;

	/* hide fn, so the call stays an indirect call in every row */
	__asm__ volatile("" : "+r"(fn));
	for (long i = 0; i < n; i++)
		sum += fn(i);
	return sum;
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ------------------------------------------------------------------ */
/* Rows                                                                */

enum { ROW_CHILD = 1, ROW_PROBE = 2, ROW_GOAL = 4 };
enum { ST_OK, ST_NA, ST_FAIL };

struct row {
	const char *name;
	const char *what;
	target_fn target;
	unsigned flags;
	long mult;			/* hits per run = mult * hits */
	/* 0, or ST_NA / ST_FAIL with msg set */
	int (*setup)(struct row *r, char *msg);
	/* calls: the number of calls since setup; 0, or ST_FAIL with msg */
	int (*check)(struct row *r, long calls, char *msg);
	void (*teardown)(struct row *r);
	void *ctx;

	/* results */
	int selected, state;
	char msg[MSG_LEN];
	int nruns;
	double ns[MAX_RUNS];
	double med;
};

static void msgf(char *msg, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void msgf(char *msg, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, MSG_LEN, fmt, ap);
	va_end(ap);
}

static const char *errname(int e)
{
	const char *s = strerrorname_np(e);

	return s ? s : "?";
}

/* --- int3: bare trap round trip, in the clean child --- */

static volatile unsigned long int3_hits;
static struct sigaction int3_old;

static void int3_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
	int3_hits++;	/* the kernel left rip after the int3 */
}

static int int3_setup(struct row *r, char *msg)
{
	struct sigaction sa;

	(void)r;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = int3_handler;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTRAP, &sa, &int3_old)) {
		msgf(msg, "sigaction: %s", strerror(errno));
		return ST_NA;
	}
	int3_hits = 0;
	return 0;
}

static int int3_check(struct row *r, long calls, char *msg)
{
	(void)r;
	if (int3_hits != (unsigned long)calls) {
		msgf(msg, "SIGTRAP handler ran %lu times for %ld calls",
		     int3_hits, calls);
		return ST_FAIL;
	}
	return 0;
}

static void int3_teardown(struct row *r)
{
	(void)r;
	sigaction(SIGTRAP, &int3_old, NULL);
}

/* --- uprobe: kernel uprobe through tracefs --- */

static struct {
	int tried, ok;			/* path and offset computed */
	char why[MSG_LEN];		/* why not */
	char exe[PATH_MAX];
	unsigned long off;
	char dir[64];			/* tracefs */
	int mounted;			/* by us: unmount at exit */
	char name[64];			/* probe_<pid> */
	char events[128], enable[192], profile[128];
	char add[PATH_MAX + 128], del[128];
	volatile sig_atomic_t armed;	/* event exists */
} up;

struct find_obj {
	uintptr_t addr, bias;
	int found, main_exe;
};

static int find_obj_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct find_obj *f = data;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && f->addr >= lo &&
		    f->addr < lo + ph->p_memsz) {
			f->found = 1;
			f->bias = info->dlpi_addr;
			f->main_exe = !info->dlpi_name || !info->dlpi_name[0];
			return 1;
		}
	}
	return 0;
}

/* File offset in /proc/self/exe of the code at addr; 0 or -1 with why. */
static int exe_offset(const void *addr, unsigned long *off, char *why)
{
	struct find_obj f = { .addr = (uintptr_t)addr };
	ElfW(Ehdr) eh;
	ElfW(Phdr) ph;
	unsigned char fbytes[8];
	int fd, ret = -1;

	dl_iterate_phdr(find_obj_cb, &f);
	if (!f.found || !f.main_exe) {
		msgf(why, "target not found in the main executable's segments");
		return -1;
	}
	uintptr_t v = f.addr - f.bias;

	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		msgf(why, "/proc/self/exe: %s", strerror(errno));
		return -1;
	}
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(ph)) {
		msgf(why, "/proc/self/exe: not a 64-bit ELF file");
		goto out;
	}
	for (int i = 0; i < eh.e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph), eh.e_phoff + i * sizeof(ph)) !=
		    sizeof(ph)) {
			msgf(why, "/proc/self/exe: short program header");
			goto out;
		}
		if (ph.p_type != PT_LOAD || v < ph.p_vaddr ||
		    v - ph.p_vaddr >= ph.p_filesz)
			continue;
		*off = ph.p_offset + (v - ph.p_vaddr);
		/* the file must hold the bytes we run */
		if (pread(fd, fbytes, sizeof(fbytes), *off) != sizeof(fbytes) ||
		    memcmp(fbytes, addr, sizeof(fbytes))) {
			msgf(why, "/proc/self/exe at 0x%lx differs from the "
			     "code in memory (binary rebuilt?)", *off);
			goto out;
		}
		ret = 0;
		goto out;
	}
	msgf(why, "no PT_LOAD of /proc/self/exe holds vaddr 0x%lx",
	     (unsigned long)v);
out:
	close(fd);
	return ret;
}

/* Writes s to path; 0 or an errno.  Async-signal-safe. */
static int write_file(const char *path, const char *s, int append)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC | (append ? O_APPEND : 0));
	int e = 0;

	if (fd < 0)
		return errno;
	if (write(fd, s, strlen(s)) < 0)
		e = errno;
	close(fd);
	return e;
}

static int tracefs_find(char *why)
{
	static const char *const dirs[] = {
		"/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	char p[128];

	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
			snprintf(p, sizeof(p), "%s/uprobe_events", dirs[i]);
			if (access(p, W_OK) == 0) {
				snprintf(up.dir, sizeof(up.dir), "%s", dirs[i]);
				return 0;
			}
		}
		if (pass == 0) {
			if (access("/sys/kernel/tracing", F_OK)) {
				msgf(why, "no /sys/kernel/tracing (tracefs "
				     "not in this kernel?)");
				return -1;
			}
			if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0,
				  NULL)) {
				msgf(why, "mount -t tracefs: %s",
				     strerror(errno));
				return -1;
			}
			up.mounted = 1;
		}
	}
	msgf(why, "tracefs has no uprobe_events (CONFIG_UPROBE_EVENTS off?)");
	return -1;
}

static void uprobe_prepare(void)
{
	ssize_t n;

	up.tried = 1;
	if (geteuid() != 0) {
		msgf(up.why, "not root");
		return;
	}
	n = readlink("/proc/self/exe", up.exe, sizeof(up.exe) - 1);
	if (n < 0) {
		msgf(up.why, "readlink /proc/self/exe: %s", strerror(errno));
		return;
	}
	up.exe[n] = 0;
	if (strpbrk(up.exe, " \t\n")) {
		msgf(up.why, "executable path has white space: %s", up.exe);
		return;
	}
	if (exe_offset((const void *)ukpb_tgt_uprobe, &up.off, up.why))
		return;
	if (tracefs_find(up.why))
		return;
	snprintf(up.name, sizeof(up.name), "probe_%d", (int)getpid());
	snprintf(up.events, sizeof(up.events), "%s/uprobe_events", up.dir);
	snprintf(up.profile, sizeof(up.profile), "%s/uprobe_profile", up.dir);
	snprintf(up.enable, sizeof(up.enable), "%s/events/ukpbench/%s/enable",
		 up.dir, up.name);
	snprintf(up.add, sizeof(up.add), "p:ukpbench/%s %s:0x%lx\n",
		 up.name, up.exe, up.off);
	snprintf(up.del, sizeof(up.del), "-:ukpbench/%s\n", up.name);
	up.ok = 1;
}

/* Disables and removes the event.  Async-signal-safe. */
static int uprobe_remove(void)
{
	int e;

	write_file(up.enable, "0\n", 0);
	e = write_file(up.events, up.del, 1);
	if (e == ENOENT)	/* not there: nothing to do */
		e = 0;
	if (!e)
		up.armed = 0;
	return e;
}

static int uprobe_setup(struct row *r, char *msg)
{
	int e;

	(void)r;
	if (!up.tried)
		uprobe_prepare();
	if (!up.ok) {
		msgf(msg, "%s", up.why);
		return ST_NA;
	}
	uprobe_remove();	/* a leftover of a killed run with our pid */
	up.armed = 1;
	e = write_file(up.events, up.add, 1);
	if (e) {
		up.armed = 0;
		msgf(msg, "writing '%.*s' to uprobe_events: %s",
		     (int)strlen(up.add) - 1, up.add, strerror(e));
		return ST_NA;
	}
	e = write_file(up.enable, "1\n", 0);
	if (e) {
		uprobe_remove();
		msgf(msg, "enabling ukpbench/%s: %s", up.name, strerror(e));
		return ST_NA;
	}
	return 0;
}

/* Hits of our event in uprobe_profile: "  <file> <event> <hits>". */
static long uprobe_hits(char *msg)
{
	char line[PATH_MAX + 128], file[PATH_MAX], ev[128];
	unsigned long hits;
	long ret = -1;
	FILE *f = fopen(up.profile, "re");

	if (!f) {
		msgf(msg, "%s: %s", up.profile, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%4095s %127s %lu", file, ev, &hits) == 3 &&
		    !strcmp(ev, up.name))
			ret = (long)hits;
	fclose(f);
	if (ret < 0)
		msgf(msg, "ukpbench/%s missing from uprobe_profile", up.name);
	return ret;
}

static int uprobe_check(struct row *r, long calls, char *msg)
{
	long hits = uprobe_hits(msg);

	(void)r;
	if (hits < 0)
		return ST_FAIL;
	if (hits != calls) {
		msgf(msg, "uprobe hit %ld times for %ld calls", hits, calls);
		return ST_FAIL;
	}
	return 0;
}

static void uprobe_teardown(struct row *r)
{
	int e;

	(void)r;
	e = uprobe_remove();
	if (e)
		fprintf(stderr, "ukp-bench: removing ukpbench/%s: %s\n",
			up.name, strerror(e));
}

/* --- ukprobes: struct kprobe rows --- */

struct kp_ctx {
	struct kprobe kp;
	int post;			/* also a post_handler */
	int opt;			/* 0: optimisation off while measured */
	int opt_saved;			/* knob value to restore, or -1 */
	unsigned long pre_hits, post_hits;
};

static int kp_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)regs;
	container_of(p, struct kp_ctx, kp)->pre_hits++;
	return 0;
}

static void kp_post(struct kprobe *p, struct pt_regs *regs,
		    unsigned long flags)
{
	(void)regs, (void)flags;
	container_of(p, struct kp_ctx, kp)->post_hits++;
}

static int kp_setup(struct row *r, char *msg)
{
	struct kp_ctx *c = r->ctx;
	int ret;

	memset(&c->kp, 0, sizeof(c->kp));
	c->pre_hits = c->post_hits = 0;
	c->kp.addr = (kprobe_opcode_t *)(void *)r->target;
	c->kp.pre_handler = kp_pre;
	if (c->post)
		c->kp.post_handler = kp_post;
	c->opt_saved = -1;
	if (!c->opt && kprobes_get_optimization() > 0 &&
	    kprobes_set_optimization(0) == 0)
		c->opt_saved = 1;
	ret = register_kprobe(&c->kp);
	if (ret < 0) {
		if (c->opt_saved >= 0)
			kprobes_set_optimization(c->opt_saved);
		msgf(msg, "error %d %s: %s", ret, errname(-ret),
		     strerror(-ret));
		return ST_NA;
	}
	if (c->opt)
		wait_for_kprobe_optimizer();
	if ((void *)c->kp.addr != (void *)r->target) {
		msgf(msg, "register_kprobe moved addr to %p", (void *)c->kp.addr);
		unregister_kprobe(&c->kp);
		return ST_FAIL;
	}
	if (!c->opt != !(c->kp.flags & KPROBE_FLAG_OPTIMIZED)) {
		msgf(msg, "probe is %soptimised (flags 0x%x)",
		     c->opt ? "not " : "", c->kp.flags);
		unregister_kprobe(&c->kp);
		return ST_FAIL;
	}
	return 0;
}

static int kp_check(struct row *r, long calls, char *msg)
{
	struct kp_ctx *c = r->ctx;

	if (!c->opt && (c->kp.flags & KPROBE_FLAG_OPTIMIZED)) {
		msgf(msg, "probe got optimised while measured (flags 0x%x)",
		     c->kp.flags);
		return ST_FAIL;
	}
	if (c->pre_hits != (unsigned long)calls ||
	    (c->post && c->post_hits != (unsigned long)calls) ||
	    (!c->post && c->post_hits) || c->kp.nmissed) {
		msgf(msg, "%ld calls: pre_handler %lu, post_handler %lu, "
		     "nmissed %lu", calls, c->pre_hits, c->post_hits,
		     c->kp.nmissed);
		return ST_FAIL;
	}
	return 0;
}

static void kp_teardown(struct row *r)
{
	struct kp_ctx *c = r->ctx;

	unregister_kprobe(&c->kp);
	if (c->opt_saved >= 0)
		kprobes_set_optimization(c->opt_saved);
}

/* --- b100k: the "b" probe with 100,000 other probes registered --- */

#define CROWD 100000
static struct kprobe *crowd;
static struct kprobe **crowd_v;

static int crowd_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p, (void)regs;
	return 0;
}

static int crowd_setup(struct row *r, char *msg)
{
	int ret;

	if (!crowd) {
		crowd = calloc(CROWD, sizeof(*crowd));
		crowd_v = calloc(CROWD, sizeof(*crowd_v));
		if (!crowd || !crowd_v) {
			msgf(msg, "out of memory");
			return ST_NA;
		}
	}
	for (int i = 0; i < CROWD; i++) {
		memset(&crowd[i], 0, sizeof(crowd[i]));
		crowd[i].addr = (kprobe_opcode_t *)(void *)ukpb_nop_sled + i;
		crowd[i].pre_handler = crowd_pre;
		crowd_v[i] = &crowd[i];
	}
	ret = register_kprobes(crowd_v, CROWD);
	if (ret < 0) {
		msgf(msg, "registering %d probes: error %d %s", CROWD, ret,
		     errname(-ret));
		return ST_NA;
	}
	ret = kp_setup(r, msg);
	if (ret)
		unregister_kprobes(crowd_v, CROWD);
	return ret;
}

static void crowd_teardown(struct row *r)
{
	kp_teardown(r);
	unregister_kprobes(crowd_v, CROWD);
}

static struct kp_ctx kp_b100k = { .post = 0, .opt = 0 };
static struct kp_ctx kp_b = { .post = 0, .opt = 0 };
static struct kp_ctx kp_k = { .post = 1, .opt = 0 };

/* --- the table --- */

static struct row rows[] = {
	{ .name = "call", .target = ukpb_tgt_call, .mult = CALL_MULT,
	  .what = "plain call of a noinline function (lea 1(%rdi),%rax; ret)" },
	{ .name = "int3", .target = ukpb_tgt_int3, .mult = 1,
	  .flags = ROW_CHILD,
	  .what = "int3 + SIGTRAP handler that returns, in a clean child",
	  .setup = int3_setup, .check = int3_check,
	  .teardown = int3_teardown },
	{ .name = "uprobe", .target = ukpb_tgt_uprobe, .mult = 1,
	  .flags = ROW_PROBE,
	  .what = "kernel uprobe via tracefs on the lea (single-stepped)",
	  .setup = uprobe_setup, .check = uprobe_check,
	  .teardown = uprobe_teardown },
	{ .name = "b", .target = ukpb_tgt_b, .mult = 1,
	  .flags = ROW_PROBE | ROW_GOAL,
	  .what = "ukprobe, pre_handler only, optimisation off (boosted)",
	  .setup = kp_setup, .check = kp_check, .teardown = kp_teardown,
	  .ctx = &kp_b },
	{ .name = "k", .target = ukpb_tgt_k, .mult = 1,
	  .flags = ROW_PROBE | ROW_GOAL,
	  .what = "ukprobe, pre_handler + post_handler",
	  .setup = kp_setup, .check = kp_check, .teardown = kp_teardown,
	  .ctx = &kp_k },
	{ .name = "b100k", .target = ukpb_tgt_b100k, .mult = 1,
	  .flags = ROW_PROBE,
	  .what = "the b probe with 100,000 other probes registered (O(1) lookup)",
	  .setup = crowd_setup, .check = kp_check, .teardown = crowd_teardown,
	  .ctx = &kp_b100k },
};
#define NROWS ((int)(sizeof(rows) / sizeof(rows[0])))

static struct row *row_named(const char *name)
{
	for (int i = 0; i < NROWS; i++)
		if (!strcmp(rows[i].name, name))
			return &rows[i];
	return NULL;
}

/* ------------------------------------------------------------------ */
/* One run of one row                                                  */

struct result {
	int state;
	double ns;			/* per hit */
	char msg[MSG_LEN];
};

static void run_one(struct row *r, long n, struct result *res)
{
	long warm = n / 10 > 0 ? n / 10 : 1;
	long long t0, t1;
	long sum;
	int st;

	memset(res, 0, sizeof(*res));
	if (r->setup && (st = r->setup(r, res->msg))) {
		res->state = st;
		return;
	}
	sum = run_loop(r->target, warm);
	if (sum != warm * (warm + 1) / 2) {
		msgf(res->msg, "warm-up: wrong return values");
		res->state = ST_FAIL;
		goto out;
	}
	t0 = now_ns();
	sum = run_loop(r->target, n);
	t1 = now_ns();
	if (sum != n * (n + 1) / 2) {
		msgf(res->msg, "wrong return values (sum %ld, want %ld)",
		     sum, n * (n + 1) / 2);
		res->state = ST_FAIL;
		goto out;
	}
	if (r->check && (st = r->check(r, warm + n, res->msg))) {
		res->state = st;
		goto out;
	}
	res->ns = (double)(t1 - t0) / (double)n;
out:
	if (r->teardown)
		r->teardown(r);
}

/* The clean child: forked first, never calls into ukprobes. */
static struct {
	pid_t pid;
	int cmd, res;			/* pipe ends in the parent */
} child = { .pid = -1, .cmd = -1, .res = -1 };

struct child_cmd {
	int row;
	long n;
};

static int read_full(int fd, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t k = read(fd, (char *)buf + done, len - done);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		done += (size_t)k;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t k = write(fd, (const char *)buf + done, len - done);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		done += (size_t)k;
	}
	return 0;
}

static void child_loop(int cmd, int res)
{
	struct child_cmd c;
	struct result r;

	while (read_full(cmd, &c, sizeof(c)) == 0) {
		if (c.row < 0 || c.row >= NROWS)
			_exit(2);
		run_one(&rows[c.row], c.n, &r);
		if (write_full(res, &r, sizeof(r)))
			_exit(2);
	}
	_exit(0);
}

static int child_start(void)
{
	int cp[2], rp[2];

	if (pipe2(cp, O_CLOEXEC) || pipe2(rp, O_CLOEXEC)) {
		perror("ukp-bench: pipe");
		return -1;
	}
	fflush(NULL);
	child.pid = fork();
	if (child.pid < 0) {
		perror("ukp-bench: fork");
		return -1;
	}
	if (child.pid == 0) {
		close(cp[1]);
		close(rp[0]);
		child_loop(cp[0], rp[1]);
	}
	close(cp[0]);
	close(rp[1]);
	child.cmd = cp[1];
	child.res = rp[0];
	return 0;
}

static void child_stop(void)
{
	if (child.pid <= 0)
		return;
	close(child.cmd);
	close(child.res);
	waitpid(child.pid, NULL, 0);
	child.pid = -1;
}

static void run_in_child(struct row *r, long n, struct result *res)
{
	struct child_cmd c = { (int)(r - rows), n };
	int status;

	if (child.pid > 0 && write_full(child.cmd, &c, sizeof(c)) == 0 &&
	    read_full(child.res, res, sizeof(*res)) == 0)
		return;
	memset(res, 0, sizeof(*res));
	res->state = ST_FAIL;
	if (child.pid <= 0) {
		msgf(res->msg, "no clean child process");
		return;
	}
	if (waitpid(child.pid, &status, 0) == child.pid) {
		if (WIFSIGNALED(status))
			msgf(res->msg, "clean child killed by signal %d (%s)",
			     WTERMSIG(status), strsignal(WTERMSIG(status)));
		else
			msgf(res->msg, "clean child exited with status %d",
			     WEXITSTATUS(status));
	} else {
		msgf(res->msg, "lost the clean child: %s", strerror(errno));
	}
	child.pid = -1;
}

/* ------------------------------------------------------------------ */
/* Clean-up on exit and on SIGINT/SIGTERM/SIGHUP                       */

static void cleanup(void)
{
	if (up.armed)
		uprobe_remove();
	if (up.mounted) {
		umount2(up.dir, MNT_DETACH);
		up.mounted = 0;
	}
}

static void on_signal(int sig)
{
	if (up.armed)
		uprobe_remove();
	if (up.mounted)
		umount2(up.dir, MNT_DETACH);
	if (child.pid > 0)
		kill(child.pid, SIGKILL);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* ------------------------------------------------------------------ */
/* Output                                                              */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
	double s[MAX_RUNS];

	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static int prec(double x)
{
	return x < 10 ? 2 : x < 1000 ? 1 : 0;
}

/* A number in a width-w column with sensible precision. */
static void put_num(int w, double x)
{
	printf(" %*.*f", w, prec(x), x);
}

static const struct row *valid(const char *name)
{
	const struct row *r = row_named(name);

	return r && r->selected && r->state == ST_OK && r->nruns ? r : NULL;
}

static void put_ratio(const struct row *r, const struct row *base, int show)
{
	if (show && base && base->med > 0)
		put_num(9, r->med / base->med);
	else
		printf(" %9s", "-");
}

static void print_header(long hits, int runs)
{
	struct utsname u;
	char model[128] = "?", line[256], load[64] = "?";
	FILE *f;

	uname(&u);
	if ((f = fopen("/proc/cpuinfo", "re"))) {
		while (fgets(line, sizeof(line), f)) {
			char *c = strchr(line, ':');

			if (!strncmp(line, "model name", 10) && c) {
				snprintf(model, sizeof(model), "%s", c + 2);
				model[strcspn(model, "\n")] = 0;
				break;
			}
		}
		fclose(f);
	}
	if ((f = fopen("/proc/loadavg", "re"))) {
		if (fgets(load, sizeof(load), f))
			load[strcspn(load, "\n")] = 0;
		fclose(f);
	}
	printf("ukp-bench: Linux %s, %s, %ld CPUs, loadavg %s\n", u.release,
	       model, sysconf(_SC_NPROCESSORS_ONLN), load);
	printf("ukp-bench: %ld hits per run (call: %ld), %d runs interleaved, "
	       "median ns per hit\n\n", hits, hits * CALL_MULT, runs);
}

static void print_table(void)
{
	const struct row *call = valid("call"), *int3 = valid("int3");
	const struct row *upr = valid("uprobe");

	printf("%-8s %10s %9s %9s %9s   %s\n", "row", "ns/hit", "x call",
	       "x int3", "x uprobe", "runs min..max ns");
	for (int i = 0; i < NROWS; i++) {
		const struct row *r = &rows[i];
		int probe = r->flags & ROW_PROBE;

		if (!r->selected)
			continue;
		printf("%-8s", r->name);
		if (r->state == ST_NA) {
			printf(" n/a (%s)\n", r->msg);
			continue;
		}
		if (r->state == ST_FAIL) {
			printf(" FAILED (%s)\n", r->msg);
			continue;
		}
		put_num(10, r->med);
		put_ratio(r, call, 1);
		put_ratio(r, int3, probe);
		put_ratio(r, upr, probe);
		double lo = r->ns[0], hi = r->ns[0];

		for (int k = 1; k < r->nruns; k++) {
			lo = r->ns[k] < lo ? r->ns[k] : lo;
			hi = r->ns[k] > hi ? r->ns[k] : hi;
		}
		printf("   %.*f..%.*f\n", prec(lo), lo, prec(hi), hi);
	}
	printf("\n");
	for (int i = 0; i < NROWS; i++)
		if (rows[i].selected)
			printf("  %-8s %s\n", rows[i].name, rows[i].what);
	printf("\n");
	for (int i = 0; i < NROWS; i++) {
		const struct row *r = &rows[i];

		if (!(r->flags & ROW_GOAL) || !valid(r->name))
			continue;
		printf("goal %-4s", r->name);
		if (int3) {
			double x = r->med / int3->med;

			printf(" %.2fx int3 (want <= 1.20: %s)", x,
			       x <= 1.2 ? "yes" : "NO");
		}
		if (upr) {
			double x = r->med / upr->med;

			printf("%s %.2fx uprobe (want < 1: %s)", int3 ? "," : "",
			       x, x < 1 ? "yes" : "NO");
		}
		if (!int3 && !upr)
			printf(" no int3 or uprobe floor to compare with");
		printf("\n");
	}
}

/* ------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
"usage: ukp-bench [--quick] [--scale F] [-n HITS] [-r RUNS] [ROW...]\n"
"       ukp-bench --list\n"
"  --quick     %ld hits x %d runs instead of %ld x %d\n"
"  --scale F   multiply the hits per run by F (e.g. 0.1, 10)\n"
"  -n HITS     hits per run of a trap row (the call row does x%d)\n"
"  -r RUNS     runs per row, 1..%d; the table shows the median\n"
"  ROW...      only these rows (default: all)\n"
"Exit status: 0, 1 if a row's handlers did not fire once per call (or it\n"
"failed otherwise), 2 on a usage error.\n",
		QUICK_HITS, QUICK_RUNS, DEFAULT_HITS, DEFAULT_RUNS, CALL_MULT,
		MAX_RUNS);
}

/* "-s V", "--long V" or "--long=V"; *val is NULL when V is missing. */
static int opt_match(int argc, char **argv, int *i, const char *s,
		     const char *l, const char **val)
{
	const char *a = argv[*i];
	size_t n = strlen(l);

	if ((s && !strcmp(a, s)) || !strcmp(a, l)) {
		*val = *i + 1 < argc ? argv[++*i] : NULL;
		return 1;
	}
	if (!strncmp(a, l, n) && a[n] == '=') {
		*val = a + n + 1;
		return 1;
	}
	return 0;
}

static int parse_num(const char *s, double *v)
{
	char *end;

	if (!s || !*s)
		return -1;
	errno = 0;
	*v = strtod(s, &end);
	return errno || *end || *v <= 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
	long hits = DEFAULT_HITS;
	int runs = DEFAULT_RUNS, any = 0, child_rows = 0, rc = 0;
	double scale = 1, v;
	long opt_hits = 0;
	int opt_runs = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = NULL;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--list")) {
			for (int k = 0; k < NROWS; k++)
				printf("%-8s %s\n", rows[k].name, rows[k].what);
			return 0;
		} else if (!strcmp(a, "--quick")) {
			hits = QUICK_HITS;
			runs = QUICK_RUNS;
		} else if (opt_match(argc, argv, &i, NULL, "--scale", &val)) {
			if (parse_num(val, &scale))
				goto bad;
		} else if (opt_match(argc, argv, &i, "-n", "--hits", &val)) {
			if (parse_num(val, &v) || v != (long)v)
				goto bad;
			opt_hits = (long)v;
		} else if (opt_match(argc, argv, &i, "-r", "--runs", &val)) {
			if (parse_num(val, &v) || v != (int)v || v > MAX_RUNS)
				goto bad;
			opt_runs = (int)v;
		} else if (a[0] != '-' && row_named(a)) {
			row_named(a)->selected = 1;
			any = 1;
		} else {
			fprintf(stderr, "ukp-bench: unknown %s '%s'\n",
				a[0] == '-' ? "option" : "row", a);
			usage(stderr);
			return 2;
		}
		continue;
bad:
		fprintf(stderr, "ukp-bench: bad value for %s\n", a);
		return 2;
	}
	if (opt_hits)
		hits = opt_hits;
	if (opt_runs)
		runs = opt_runs;
	hits = (long)(hits * scale);
	if (hits < 1)
		hits = 1;
	for (int i = 0; i < NROWS; i++) {
		if (!any)
			rows[i].selected = 1;
		if (rows[i].selected && (rows[i].flags & ROW_CHILD))
			child_rows = 1;
	}

	/* before anything touches ukprobes */
	signal(SIGPIPE, SIG_IGN);
	if (child_rows && child_start())
		return 1;
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);

	print_header(hits, runs);
	fflush(stdout);
	for (int k = 0; k < runs; k++) {
		if (isatty(2))
			fprintf(stderr, "\rukp-bench: run %d/%d ", k + 1, runs);
		for (int i = 0; i < NROWS; i++) {
			struct row *r = &rows[i];
			struct result res;
			long n = hits * r->mult;

			if (!r->selected || r->state != ST_OK)
				continue;
			if (isatty(2))
				fprintf(stderr, "%s ", r->name);
			if (r->flags & ROW_CHILD)
				run_in_child(r, n, &res);
			else
				run_one(r, n, &res);
			if (res.state == ST_NA && k > 0)
				res.state = ST_FAIL;	/* worked before */
			if (res.state != ST_OK) {
				r->state = res.state;
				if (k > 0)
					msgf(r->msg, "run %d: %.*s", k + 1,
					     MSG_LEN - 16, res.msg);
				else
					memcpy(r->msg, res.msg, MSG_LEN);
				if (r->state == ST_FAIL) {
					fprintf(stderr, "%sukp-bench: %s: %s\n",
						isatty(2) ? "\n" : "",
						r->name, r->msg);
					rc = 1;
				}
				continue;
			}
			r->ns[r->nruns++] = res.ns;
		}
	}
	if (isatty(2))
		fprintf(stderr, "\r%40s\r", "");
	child_stop();
	for (int i = 0; i < NROWS; i++)
		if (rows[i].state == ST_OK && rows[i].nruns)
			rows[i].med = median(rows[i].ns, rows[i].nruns);
	print_table();
	return rc;
}
