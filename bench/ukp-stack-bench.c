/* SPDX-License-Identifier: MIT */
/*
 * ukp-stack-bench: nanoseconds to take a 16-frame stack trace, ukprobes'
 * walker beside glibc's and libunwind's, on the same stack in the same
 * run.
 *
 *	ukp-stack-bench [-r RUNS] [-n CALLS]
 *
 * The stack: bs_rec() recursing DEPTH levels (more than 16, so every row
 * stops at 16 entries, never at the stack's end), then bs_bottom(), which
 * measures every row from there:
 *
 *	save		stack_trace_save(buf, 16, 0)
 *	save_regs (handler)	stack_trace_save_regs(regs, buf, 16, 0)
 *			inside the pre_handler of a jump-optimised kprobe on
 *			bs_target(), which bs_bottom() calls: the probed
 *			code's stack, walked from the handler's pt_regs
 *	save (handler)	stack_trace_save(buf, 16, 0) in that handler: its
 *			own frame, then the probed code's
 *	backtrace	glibc backtrace(buf, 16) (libgcc's _Unwind_Backtrace),
 *			looked up in libc.so.6 itself: libunwind.so, linked
 *			here, exports a backtrace() of its own that would
 *			take its place
 *	unw_backtrace	libunwind's unw_backtrace(buf, 16) (local unwinding,
 *			its default caching)
 *
 * One run of a row: CALLS calls in SLICES slices, each timed on its own
 * (CLOCK_MONOTONIC); the run's figure is its fastest slice (a slower one
 * met another process on the shared machine).  Runs are interleaved
 * (run 1 of every row, run 2 of every row...) and the table shows each
 * row's median run, with its ratio to the first row.  Every call must
 * return 16 entries, and the rows' traces must agree from the return into
 * bs_rec on (above it each row has its own call sites), or the bench
 * fails.
 */
#include <dlfcn.h>
#include <libunwind.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <ukprobes.h>

#define FRAMES 16
#define DEPTH 24
#define SLICES 10
#define MAXRUNS 64

static int runs = 9;
static int calls = 20000;

enum { R_SAVE, R_REGS, R_HSAVE, R_BT, R_UNW, NROWS };
static const char *const row_name[NROWS] = {
	"stack_trace_save", "stack_trace_save_regs (handler)", "stack_trace_save (handler)",
	"glibc backtrace", "libunwind unw_backtrace",
};
static double figure[NROWS][MAXRUNS];
static unsigned long trace[NROWS][FRAMES];
static int bad;
static int (*glibc_backtrace)(void **, int);

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* a row's run: the fastest of SLICES slices, ns per call */
static double timed(int row, struct pt_regs *regs)
{
	unsigned long buf[FRAMES];
	double best = 1e30;
	int per = calls / SLICES;
	for (int s = 0; s < SLICES; s++) {
		int n = 0;
		double t0 = now();
		for (int i = 0; i < per; i++) {
			switch (row) {
			case R_SAVE: n = (int)stack_trace_save(buf, FRAMES, 0); break;
			case R_REGS: n = (int)stack_trace_save_regs(regs, buf, FRAMES, 0); break;
			case R_HSAVE: n = (int)stack_trace_save(buf, FRAMES, 0); break;
			case R_BT: n = glibc_backtrace((void **)buf, FRAMES); break;
			case R_UNW: n = unw_backtrace((void **)buf, FRAMES); break;
			}
			__asm__ volatile("" ::: "memory");
		}
		double t = (now() - t0) / per;
		if (t < best)
			best = t;
		if (n != FRAMES) {
			fprintf(stderr, "%s: %d entries, not %d\n", row_name[row], n, FRAMES);
			bad = 1;
		}
	}
	memcpy(trace[row], buf, sizeof(buf));
	return best;
}

static int run_no;

static int pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	figure[R_REGS][run_no] = timed(R_REGS, regs);
	figure[R_HSAVE][run_no] = timed(R_HSAVE, regs);
	return 0;
}

__attribute__((noinline)) int bs_target(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

static __attribute__((noinline)) void bs_bottom(void)
{
	figure[R_SAVE][run_no] = timed(R_SAVE, NULL);
	figure[R_BT][run_no] = timed(R_BT, NULL);
	figure[R_UNW][run_no] = timed(R_UNW, NULL);
	if (bs_target(run_no) != run_no + 1)
		bad = 1;
	__asm__ volatile("" ::: "memory");
}

static __attribute__((noinline)) int bs_rec(int k)
{
	if (k == 0)
		bs_bottom();
	else
		bs_rec(k - 1);
	__asm__ volatile("" ::: "memory");
	return k;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-r") && i + 1 < argc)
			runs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-n") && i + 1 < argc)
			calls = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [-r RUNS] [-n CALLS]\n", argv[0]);
			return 2;
		}
	}
	if (runs < 1 || runs > MAXRUNS || calls < SLICES) {
		fprintf(stderr, "-r 1..%d, -n >= %d\n", MAXRUNS, SLICES);
		return 2;
	}

	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	glibc_backtrace = libc ? (int (*)(void **, int))dlsym(libc, "backtrace") : NULL;
	if (!glibc_backtrace) {
		fprintf(stderr, "no backtrace in libc.so.6\n");
		return 1;
	}

	struct kprobe kp;
	memset(&kp, 0, sizeof(kp));
	kp.addr = (kprobe_opcode_t *)bs_target;
	kp.pre_handler = pre;
	int err = register_kprobe(&kp);
	if (err) {
		fprintf(stderr, "register_kprobe: %d\n", err);
		return 1;
	}
	wait_for_kprobe_optimizer();
	if (!(kp.flags & KPROBE_FLAG_OPTIMIZED))
		fprintf(stderr, "note: the kprobe on bs_target is not optimised\n");

	/* a warm-up run (every rule cached, every page seen), then the runs */
	run_no = 0;
	bs_rec(DEPTH);
	for (run_no = 0; run_no < runs; run_no++)
		bs_rec(DEPTH);
	unregister_kprobe(&kp);
	if (kp.nmissed)
		bad = 1;

	/* the same stack: from the return into bs_rec on, every row's trace
	 * is stack_trace_save's (entry 2 there and in the rows called from
	 * bs_bottom and in save_regs: bs_target, bs_bottom, bs_rec; entry 4
	 * in the handler's own: timed, pre, then the same) */
	for (int r = R_SAVE + 1; r < NROWS; r++) {
		int off = r == R_HSAVE ? 4 : 2;
		for (int j = 0; off + j < FRAMES; j++)
			if (trace[r][off + j] != trace[R_SAVE][2 + j]) {
				fprintf(stderr, "%s: entry %d is %#lx, stack_trace_save's %d %#lx\n",
					row_name[r], off + j, trace[r][off + j], 2 + j,
					trace[R_SAVE][2 + j]);
				bad = 1;
				break;
			}
	}

	double med[NROWS];
	for (int r = 0; r < NROWS; r++) {
		qsort(figure[r], (size_t)runs, sizeof(double), cmp);
		med[r] = figure[r][runs / 2];
	}
	printf("stack traces of %d frames, ns per trace (median of %d runs, each the "
	       "fastest of %d slices of %d calls)\n\n", FRAMES, runs, SLICES, calls / SLICES);
	printf("| row | ns | ratio |\n|---|---:|---:|\n");
	for (int r = 0; r < NROWS; r++)
		printf("| %s | %.0f | %.2f |\n", row_name[r], med[r], med[r] / med[R_SAVE]);
	if (bad)
		fprintf(stderr, "ukp-stack-bench: FAILED (see above)\n");
	return bad;
}
