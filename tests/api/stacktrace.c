/*
 * stack_trace_save(), stack_trace_save_regs() and stack_trace_print()
 * (include/ukprobes/stacktrace.h) against the truth: functions that record
 * their own return addresses (__builtin_return_address(0) at each level)
 * in an unprobed run; then the same calls with probes, whose handlers
 * take stacks that must equal it frame by frame, for every recursion
 * depth 1 to 50.  Each probed run also compares the whole trace (down to
 * the C runtime's frames) with the one st_leaf took unprobed.
 *
 * The probes of a run: a kprobe at st_leaf's entry, a kprobe in st_drive
 * where st_rec returns to (mid-function), and kretprobes on every frame's
 * function (st_leaf, st_rec, st_drive), so each return address on the
 * stack is a kretprobe stub; st_rec's entry_handler takes traces too.
 * Handlers take both kinds of trace, the _save one from a helper one
 * frame down (skipnr 1 skips that frame).
 *
 * Cases:
 *   unprobed_trace_is_the_truth          no probe: stack_trace_save from
 *                         st_leaf gives the recorded return addresses
 *   skipnr_and_size                      the same walk cut both ways
 *   probed_traces_optimized              the entry kprobes jump-optimised
 *                         (KPROBE_FLAG_OPTIMIZED), depths 1-50
 *   probed_traces_breakpoint             optimisation knob off: int3 hits,
 *                         handlers in signal context
 *   probed_traces_breakpoint_on_sigaltstack   the same with the handlers
 *                         on an alternate signal stack, with longjmp
 *   probed_traces_int3_only              a post_handler keeps st_leaf's
 *                         probe a breakpoint with the knob on; its
 *                         post_handler's traces are checked too
 *   traces_after_longjmp_across_probed_frames   st_leaf longjmps to the
 *                         test over every probed frame, each depth; then
 *                         probed runs still give the truth and no
 *                         kretprobe missed
 *   traces_after_longjmp_breakpoint      the same with the knob off
 *   probed_traces_threads                4 threads at once, each its own
 *                         truth, probed, longjmp and probed passes (the
 *                         rule cache filled by all of them)
 *   traces_in_signal_handler_cross_the_signal_frame   a program SIGUSR1
 *                         handler, raised from st_raiser: its trace goes
 *                         on past the signal frame into st_raiser and its
 *                         callers
 *   same_as_glibc_backtrace_through_libc   from a qsort comparator: libc's
 *                         frames and all below equal glibc backtrace()'s
 *   rules_of_unloaded_code_are_forgotten   a callback's traces through
 *                         a dlopen'd caller equal glibc backtrace()'s,
 *                         before and after another object with other
 *                         rules takes the unloaded one's place
 *   corrupt_registers_never_fault        regs whose sp is unmapped, whose
 *                         stack runs into a PROT_NONE page, whose ip is in
 *                         no object or whose bp chain loops: no fault,
 *                         the entries up to there
 *   print_format                          stack_trace_print's lines
 *   cxx_exceptions_prog                   tests/progs/stack_cxx (jump and
 *                         breakpoint): the same truth in handlers while
 *                         and after C++ exceptions cross kretprobed
 *                         frames, caught and rethrown at every level
 */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "ukt.h"

#define MAXD 50
#define NT (MAXD + 2)		/* RA of st_leaf, of each st_rec, of st_drive */
#define NBUF 128
#define NTHR 4			/* threads of the threads case */

#define RA() ((unsigned long)__builtin_return_address(0))
#define BARRIER() __asm__ volatile("" ::: "memory")

/* per thread: the threads case runs the same passes in several at once */
static _Thread_local unsigned long truth[MAXD + 1][NT];	/* per depth */
static _Thread_local unsigned long full[MAXD + 1][NBUF];	/* st_leaf's own, unprobed */
static _Thread_local unsigned nfull[MAXD + 1];
static _Thread_local volatile int recording, depth, jumping;
static volatile int sink;
static _Thread_local jmp_buf jb;

/* st_leaf's recording and longjmp, kept out of it: st_leaf's first
 * instructions stay a region the optimizer takes */
static __attribute__((noinline)) void leaf_extra(int n, unsigned long ra)
{
	if (recording) {
		truth[n][0] = ra;
		/* skipnr 1: from the return into st_leaf on */
		nfull[n] = stack_trace_save(full[n], NBUF, 1);
	}
	if (jumping)
		longjmp(jb, 1);
	BARRIER();
}

__attribute__((noinline)) int st_leaf(int n)
{
	leaf_extra(n, RA());
	BARRIER();
	return sink + n;
}

/* level k (0: st_leaf's caller) of n */
__attribute__((noinline)) int st_rec(int k, int n)
{
	if (recording)
		truth[n][1 + k] = RA();
	int r = k == 0 ? st_leaf(n) : st_rec(k - 1, n);
	BARRIER();
	return r + 1;
}

__attribute__((noinline)) int st_drive(int n)
{
	if (recording)
		truth[n][1 + n] = RA();
	int r = st_rec(n - 1, n);
	BARRIER();
	return r + 1;
}

/* ---- checks, from handlers ---------------------------------------------- */

static _Thread_local unsigned long nchecks, nbad;
static _Thread_local char first_bad[512];

static void bad(const char *what, unsigned i, unsigned long got, unsigned long want)
{
	if (!nbad++)
		snprintf(first_bad, sizeof(first_bad),
			 "%s, depth %d: entry %u is %#lx, want %#lx", what, depth, i, got, want);
}

/* got[0..ngot) == want[0..nwant) (exact: whole stack) or its prefix */
static void check(const char *what, const unsigned long *got, unsigned ngot,
		  const unsigned long *want, unsigned nwant, bool exact)
{
	nchecks++;
	for (unsigned i = 0; i < nwant; i++)
		if (i >= ngot || got[i] != want[i]) {
			bad(what, i, i < ngot ? got[i] : 0, want[i]);
			return;
		}
	if (exact && ngot != nwant)
		bad(what, ngot < nwant ? ngot : nwant, ngot, nwant);
}

/* the trace of the code at level `from` (0: st_leaf's return into st_rec)
 * whose own address is ip: ip, then the truth from there on, then the rest
 * of the unprobed trace */
static unsigned want_from(unsigned long *w, unsigned long ip, unsigned from)
{
	int n = depth;
	unsigned k = 0;
	if (ip)
		w[k++] = ip;
	/* full[n][0] is in st_leaf; full[n][1 + j] is truth[n][j] */
	for (unsigned j = 1 + from; j < nfull[n]; j++)
		w[k++] = full[n][j];
	return k;
}

/* stack_trace_save one frame down from the handler: skipnr 1 skips this
 * helper's own frame, so the trace starts at the return into the handler */
static __attribute__((noinline)) unsigned grab(unsigned long *b, unsigned long *ra)
{
	*ra = RA();
	unsigned n = stack_trace_save(b, NBUF, 1);
	BARRIER();
	return n;
}

/* both traces from a handler: regs' and its own, which shows the handler's
 * frame, then the same */
static __attribute__((noinline)) void traces(const char *what, struct pt_regs *regs,
					     unsigned long ip, unsigned from)
{
	unsigned long got[NBUF], want[NBUF + 2], ra;
	unsigned nw = want_from(want + 2, ip, from);
	unsigned n = stack_trace_save_regs(regs, got, NBUF, 0);
	check(what, got, n, want + 2, nw, true);
	/* the same after the handler's own frames: grab's return into
	 * this function, and this one's into the handler */
	n = grab(got, &ra);
	want[0] = ra;
	want[1] = RA();
	char w2[64];
	snprintf(w2, sizeof(w2), "%s (save)", what);
	check(w2, got, n, want, nw + 2, true);
	/* skipnr and size: two entries past the first */
	n = stack_trace_save_regs(regs, got, 2, 1);
	nchecks++;
	if (n != 2 || got[0] != want[3] || got[1] != want[4])
		bad("skipnr 1 size 2", 0, got[0], want[3]);
	BARRIER();
}

static unsigned long alt_lo, alt_hi;	/* the handlers' sigaltstack, if set */

static int leaf_pre(struct kprobe *p, struct pt_regs *regs)
{
	unsigned long here = (unsigned long)__builtin_frame_address(0);
	if (alt_lo && (here < alt_lo || here >= alt_hi))
		bad("handler off the sigaltstack", 0, here, alt_lo);
	(void)p;
	traces("st_leaf pre", regs, (unsigned long)st_leaf, 0);
	return 0;
}

static void leaf_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	(void)p;
	(void)flags;
	/* after st_leaf's first instruction: regs->ip is the next one; a
	 * trace from there is the same stack (push rbp moved sp, or not) */
	unsigned long got[NBUF], want[NBUF];
	unsigned nw = want_from(want, regs->ip, 0);
	unsigned n = stack_trace_save_regs(regs, got, NBUF, 0);
	check("st_leaf post", got, n, want, nw, true);
}

static int mid_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	traces("st_drive mid", regs, 0, (unsigned)depth);
	return 0;
}

static int leaf_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	traces("st_leaf return", regs, 0, 0);
	return 0;
}

static int rec_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	*(long *)(void *)ri->data = (long)regs->di;	/* k */
	traces("st_rec entry", regs, (unsigned long)st_rec, 1 + (unsigned)regs->di);
	return 0;
}

static int rec_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	traces("st_rec return", regs, 0, 1 + (unsigned)*(long *)(void *)ri->data);
	return 0;
}

static int drive_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	traces("st_drive return", regs, 0, 1 + (unsigned)depth);
	return 0;
}

/* ---- runs ----------------------------------------------------------------- */

struct probes {
	struct kprobe leaf, mid;
	struct kretprobe rleaf, rrec, rdrive;
};

static void probes_register(struct probes *P, bool post)
{
	memset(P, 0, sizeof(*P));
	P->leaf.addr = (kprobe_opcode_t *)st_leaf;
	P->leaf.pre_handler = leaf_pre;
	if (post)
		P->leaf.post_handler = leaf_post;
	/* where st_rec returns to in st_drive: mid-function (st_rec's own
	 * return sites may be shared by its two calls) */
	P->mid.addr = (kprobe_opcode_t *)truth[1][1];
	P->mid.pre_handler = mid_pre;
	P->rleaf.kp.addr = (kprobe_opcode_t *)st_leaf;
	P->rleaf.handler = leaf_ret;
	P->rleaf.maxactive = 4 * NTHR;
	P->rrec.kp.addr = (kprobe_opcode_t *)st_rec;
	P->rrec.handler = rec_ret;
	P->rrec.entry_handler = rec_entry;
	P->rrec.data_size = sizeof(long);
	P->rrec.maxactive = NTHR * (MAXD + 4);
	P->rdrive.kp.addr = (kprobe_opcode_t *)st_drive;
	P->rdrive.handler = drive_ret;
	P->rdrive.maxactive = 4 * NTHR;
	UKT_EQ(register_kprobe(&P->leaf), 0);
	UKT_EQ(register_kprobe(&P->mid), 0);
	UKT_EQ(register_kretprobe(&P->rleaf), 0);
	UKT_EQ(register_kretprobe(&P->rrec), 0);
	UKT_EQ(register_kretprobe(&P->rdrive), 0);
}

static void probes_unregister(struct probes *P)
{
	UKT_EQ(P->leaf.nmissed, 0);
	UKT_EQ(P->mid.nmissed, 0);
	UKT_EQ(P->rleaf.nmissed, 0);
	UKT_EQ(P->rrec.nmissed, 0);
	UKT_EQ(P->rdrive.nmissed, 0);
	unregister_kretprobe(&P->rdrive);
	unregister_kretprobe(&P->rrec);
	unregister_kretprobe(&P->rleaf);
	unregister_kprobe(&P->mid);
	unregister_kprobe(&P->leaf);
}


/* A case: the truth, then each step's probes and passes */
enum { RECORD, PROBED, JUMP };
struct step {
	void (*before)(void);
	int mode;
	unsigned long (*checks)(void);	/* how many traces it must check */
	void (*after)(void);
};

/* every depth once, from one call site whatever the step (so the trace
 * below st_drive is the same in all of them): record the truth, run
 * probed, or longjmp out of st_leaf */
static __attribute__((noinline)) void pass(const struct step *s)
{
	if (s->before)
		s->before();
	nchecks = nbad = 0;
	for (int n = 1; n <= MAXD; n++) {
		depth = n;
		recording = s->mode == RECORD;
		jumping = s->mode == JUMP;
		if (s->mode != JUMP || setjmp(jb) == 0) {
			int r = st_drive(n);
			if (r != sink + n + n + 1)
				UKT_FAIL("st_drive(%d) returned %d", n, r);
		}
		recording = jumping = 0;
		if (s->mode == RECORD && nfull[n] < (unsigned)n + 3)
			UKT_FAIL("depth %d: %u entries unprobed", n, nfull[n]);
	}
	if (nbad)
		UKT_FAIL("%lu of %lu traces wrong; first: %s", nbad, nchecks, first_bad);
	if (s->checks)
		UKT_EQ(nchecks, s->checks());
	if (s->after)
		s->after();
}

static __attribute__((noinline)) void rounds(const struct step *st, int nst)
{
	struct step all[8] = { { NULL, RECORD, NULL, NULL } };
	UKT_ASSERT(nst < 8);
	for (int i = 0; i < nst; i++)
		all[1 + i] = st[i];
	for (int i = 0; i <= nst; i++)
		pass(&all[i]);
}

/* traces per depth n: leaf pre 3 (+1 post), mid 3, leaf return 3, n
 * st_rec entries and returns 3 each, drive return 3 */
static bool with_post;
static unsigned long probed_checks(void)
{
	unsigned long want = 0;
	for (unsigned long n = 1; n <= MAXD; n++)
		want += 3 * (4 + 2 * n) + (with_post ? 1 : 0);
	return want;
}

/* before st_leaf longjmps: the st_rec entries and st_leaf's pre_handler */
static unsigned long jump_checks(void)
{
	unsigned long want = 0;
	for (unsigned long n = 1; n <= MAXD; n++)
		want += 3 * (1 + n);
	return want;
}

static struct probes P;

static void reg_opt(void)
{
	UKT_EQ(kprobes_set_optimization(1), 0);
	probes_register(&P, with_post);
	wait_for_kprobe_optimizer();
	if (!!(P.leaf.flags & KPROBE_FLAG_OPTIMIZED) != !with_post)
		kprobes_list(stderr);
	UKT_EQ(!!(P.leaf.flags & KPROBE_FLAG_OPTIMIZED), !with_post);
	UKT_ASSERT(P.rrec.kp.flags & KPROBE_FLAG_OPTIMIZED);
	UKT_ASSERT(P.rdrive.kp.flags & KPROBE_FLAG_OPTIMIZED);
}

static void reg_int3(void)
{
	UKT_EQ(kprobes_set_optimization(0), 0);
	probes_register(&P, with_post);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(!(P.leaf.flags & KPROBE_FLAG_OPTIMIZED));
	UKT_ASSERT(!(P.rrec.kp.flags & KPROBE_FLAG_OPTIMIZED));
}

static void unreg(void)
{
	probes_unregister(&P);
}

static void pass_record_once(void)
{
	rounds(NULL, 0);
}

UKT_CASE(unprobed_trace_is_the_truth)
{
	rounds(NULL, 0);
	for (int n = 1; n <= MAXD; n++)
		for (int j = 0; j <= n + 1; j++)
			if (full[n][1 + j] != truth[n][j])
				UKT_FAIL("depth %d entry %d: %#lx, want %#lx", n, j + 1,
					 full[n][1 + j], truth[n][j]);
	/* full[n][0]: the return into st_leaf from leaf_extra */
	UKT_ASSERT(full[5][0] > (unsigned long)st_leaf);
	UKT_ASSERT(full[5][0] < (unsigned long)st_leaf + 64);
	/* one level more, one entry more; below st_drive the same */
	for (int n = 2; n <= MAXD; n++) {
		UKT_EQ(nfull[n] - nfull[n - 1], 1);
		for (unsigned j = 1; j <= nfull[1] - 3; j++)
			UKT_EQ(full[n][nfull[n] - j], full[1][nfull[1] - j]);
	}
}

static __attribute__((noinline)) unsigned save_at(unsigned long *b, unsigned size, unsigned skip)
{
	unsigned n = stack_trace_save(b, size, skip);
	BARRIER();
	return n;
}

UKT_CASE(skipnr_and_size)
{
	static const unsigned cfg[][2] = { { NBUF, 0 }, { 4, 0 }, { NBUF, 2 }, { 3, 2 }, { 0, 0 }, { 1, 0 } };
	unsigned long b[6][NBUF + 1];
	unsigned n[6];
	/* one call site for all (no unrolled copies) */
#ifdef __clang__
#pragma clang loop unroll(disable)
#else
#pragma GCC unroll 1
#endif
	for (int i = 0; i < 6; i++) {
		b[i][cfg[i][0]] = 0xdead;	/* never written past size */
		n[i] = save_at(b[i], cfg[i][0], cfg[i][1]);
		UKT_EQ(b[i][cfg[i][0]], 0xdead);
	}
	UKT_ASSERT(n[0] > 4);
	UKT_EQ(n[1], 4);
	UKT_EQ(n[2], n[0] - 2);
	UKT_EQ(n[3], 3);
	UKT_EQ(n[4], 0);
	UKT_EQ(n[5], 1);
	for (unsigned j = 0; j < n[0]; j++) {
		if (j < 4)
			UKT_EQ(b[1][j], b[0][j]);
		if (j >= 2)
			UKT_EQ(b[2][j - 2], b[0][j]);
		if (j >= 2 && j < 5)
			UKT_EQ(b[3][j - 2], b[0][j]);
	}
	UKT_EQ(b[5][0], b[0][0]);
	/* the first entry is the return into save_at */
	UKT_ASSERT(b[0][0] > (unsigned long)save_at && b[0][0] < (unsigned long)save_at + 64);
}

UKT_CASE(probed_traces_optimized)
{
	/* twice: the second with every rule cached */
	const struct step st[] = {
		{ reg_opt, PROBED, probed_checks, NULL },
		{ NULL, PROBED, probed_checks, unreg },
	};
	rounds(st, 2);
}

UKT_CASE(probed_traces_breakpoint)
{
	const struct step st[] = { { reg_int3, PROBED, probed_checks, unreg } };
	rounds(st, 1);
}

/* the breakpoints' handlers run on this alternate signal stack
 * (ukprobes' SIGTRAP action has SA_ONSTACK): the walk starts there and
 * goes on from the probed code's registers on the thread's stack */
static void reg_int3_altstack(void)
{
	static char alt[256 << 10] __attribute__((aligned(16)));
	stack_t ss = { .ss_sp = alt, .ss_size = sizeof(alt), .ss_flags = 0 };
	UKT_EQ(sigaltstack(&ss, NULL), 0);
	alt_lo = (unsigned long)alt;
	alt_hi = alt_lo + sizeof(alt);
	reg_int3();
}

UKT_CASE(probed_traces_breakpoint_on_sigaltstack)
{
	const struct step st[] = {
		{ reg_int3_altstack, PROBED, probed_checks, NULL },
		{ NULL, JUMP, jump_checks, NULL },
		{ NULL, PROBED, probed_checks, unreg },
	};
	rounds(st, 3);
}

UKT_CASE(probed_traces_int3_only)
{
	with_post = true;
	const struct step st[] = { { reg_opt, PROBED, probed_checks, unreg } };
	rounds(st, 1);
}

UKT_CASE(traces_after_longjmp_across_probed_frames)
{
	const struct step st[] = {
		{ reg_opt, JUMP, jump_checks, NULL },
		{ NULL, PROBED, probed_checks, NULL },
		{ NULL, JUMP, jump_checks, NULL },
		{ NULL, PROBED, probed_checks, unreg },
	};
	rounds(st, 4);
}

UKT_CASE(traces_after_longjmp_breakpoint)
{
	const struct step st[] = {
		{ reg_int3, JUMP, jump_checks, NULL },
		{ NULL, PROBED, probed_checks, unreg },
	};
	rounds(st, 2);
}

/* ---- threads -------------------------------------------------------------- */

static pthread_barrier_t bar;
static _Thread_local int tix;

/* every thread has recorded its truth; thread 0 registers, all go on */
static void thr_arm(void)
{
	pthread_barrier_wait(&bar);
	if (tix == 0)
		reg_opt();
	pthread_barrier_wait(&bar);
}

static void thr_disarm(void)
{
	pthread_barrier_wait(&bar);
	if (tix == 0)
		unreg();
}

static void *thr(void *arg)
{
	tix = (int)(long)arg;
	const struct step st[] = {
		{ thr_arm, PROBED, probed_checks, NULL },
		{ NULL, JUMP, jump_checks, NULL },
		{ NULL, PROBED, probed_checks, thr_disarm },
	};
	rounds(st, 3);
	return NULL;
}

UKT_CASE_T(probed_traces_threads, 60)
{
	pthread_t th[NTHR];
	UKT_EQ(pthread_barrier_init(&bar, NULL, NTHR), 0);
	for (long i = 0; i < NTHR; i++)
		UKT_EQ(pthread_create(&th[i], NULL, thr, (void *)i), 0);
	for (int i = 0; i < NTHR; i++)
		UKT_EQ(pthread_join(th[i], NULL), 0);
}

/* ---- a program's signal handler ------------------------------------------- */

static unsigned long sig_got[NBUF], sig_ra;
static unsigned sig_n;

static void on_usr1(int sig)
{
	(void)sig;
	sig_n = grab(sig_got, &sig_ra);
}

__attribute__((noinline)) int st_raiser(void)
{
	raise(SIGUSR1);
	BARRIER();
	return sink;
}

UKT_CASE(traces_in_signal_handler_cross_the_signal_frame)
{
	UKT_EQ(ukt_on_signal(SIGUSR1, on_usr1, 0), 0);
	unsigned long here[NBUF];
	unsigned nh = stack_trace_save(here, NBUF, 0);
	st_raiser();
	/* the handler's frame, then the interrupted code (in raise or
	 * below it), ..., st_raiser's return into this function, and this
	 * function's callers as seen from here */
	UKT_ASSERT(sig_n > 3);
	UKT_EQ(sig_got[0], sig_ra);
	unsigned i = 1;
	while (i < sig_n && !(sig_got[i] > (unsigned long)st_raiser &&
			      sig_got[i] < (unsigned long)st_raiser + 64))
		i++;
	UKT_ASSERT(i < sig_n);
	/* i: in st_raiser; then the return into this case, then its callers */
	UKT_ASSERT(i + 1 < sig_n);
	UKT_EQ(sig_n - (i + 2), nh - 1);
	for (unsigned j = 1; j < nh; j++)
		UKT_EQ(sig_got[i + 1 + j], here[j]);
}

/* ---- through libc's own frames ----------------------------------------------- */

static unsigned long bt_a[NBUF], bt_b[NBUF];
static int bt_na, bt_nb;

static int cmp_traced(const void *x, const void *y)
{
	if (!bt_na) {
		bt_na = backtrace((void **)bt_a, NBUF);
		bt_nb = (int)stack_trace_save(bt_b, NBUF, 0);
	}
	return *(const int *)x - *(const int *)y;
}

UKT_CASE(same_as_glibc_backtrace_through_libc)
{
	/* qsort's frames are libc's (its .eh_frame), then this case's, the
	 * runner's and the C runtime's: libgcc's unwinder (backtrace) and
	 * the walker agree on every one past their own call sites */
	int v[64];
	for (int i = 0; i < 64; i++)
		v[i] = (i * 37) % 64;
	qsort(v, 64, sizeof(v[0]), cmp_traced);
	UKT_ASSERT(bt_na > 3);
	UKT_EQ(bt_nb, bt_na);
	for (int i = 1; i < bt_na; i++)
		UKT_EQ(bt_b[i], bt_a[i]);
	Dl_info di;
	UKT_ASSERT(dladdr((void *)bt_b[1], &di) && strstr(di.dli_fname, "libc.so"));
}

/* ---- dlclose, and other code at the same address ----------------------------- */

static unsigned long dl_ra;
static int dl_bad;

static int dl_cb(int x)
{
	unsigned long a[NBUF], b[NBUF];
	int na = backtrace((void **)a, NBUF);
	int nb = (int)stack_trace_save(b, NBUF, 0);
	dl_ra = RA();
	if (nb != na || b[1] != dl_ra)
		dl_bad++;
	for (int i = 1; i < na && i < nb; i++)
		if (a[i] != b[i])
			dl_bad++;
	return x;
}

/* stcb_call of solibs/<name>.so: where its callback returns to */
static void *dl_open(const char *name)
{
	char self[PATH_MAX], path[PATH_MAX + 64];
	ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	UKT_ASSERT(k > 0);
	self[k] = 0;
	*strrchr(self, '/') = 0;
	snprintf(path, sizeof(path), "%s/../solibs/%s.so", self, name);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		UKT_FAIL("%s: %s (build it with make tests)", path, dlerror());
	return h;
}

static unsigned long dl_run(void *h)
{
	int (*call)(int (*)(int), int) = (int (*)(int (*)(int), int))dlsym(h, "stcb_call");
	UKT_ASSERT(call);
	dl_bad = 0;
	for (int i = 0; i < 3; i++)
		UKT_EQ(call(dl_cb, i), i + 1);
	UKT_EQ(dl_bad, 0);
	return dl_ra;
}

UKT_CASE(rules_of_unloaded_code_are_forgotten)
{
	/* stcb_a and stcb_b: the same code but for the frame size, so the
	 * callback's return is at the same offset in both; loaded one after
	 * the other they share the address too, and a rule cached for
	 * stcb_a's there would unwind stcb_b's frame wrongly */
	unsigned long z[1];
	stack_trace_save(z, 1, 0);	/* ukprobes initialised: the hook */
	void *a = dl_open("stcb_a");
	unsigned long ra_a = dl_run(a);
	UKT_EQ(dlclose(a), 0);
	void *b = dl_open("stcb_b");
	unsigned long ra_b = dl_run(b);
	UKT_EQ(dlclose(b), 0);
	/* the point of the case: the same return address, other rules
	 * (the kernel hands the unmapped range out again, top-down) */
	UKT_EQ(ra_b, ra_a);
}

/* ---- corrupt registers -------------------------------------------------------- */

UKT_CASE(corrupt_registers_never_fault)
{
	unsigned long got[NBUF];
	struct pt_regs r;
	/* sp unmapped: ip only */
	memset(&r, 0, sizeof(r));
	r.ip = (unsigned long)st_leaf;
	r.sp = 0x1000;
	r.bp = 0x2000;
	UKT_EQ(stack_trace_save_regs(&r, got, NBUF, 0), 1);
	UKT_EQ(got[0], (unsigned long)st_leaf);
	/* a readable page of return addresses into st_drive, then a page
	 * nothing may read: the walk climbs the first and stops at the
	 * second (never past it, never faulting) */
	char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(m != MAP_FAILED);
	UKT_EQ(mprotect(m + 4096, 4096, PROT_NONE), 0);
	pass_record_once();
	unsigned long *w = (unsigned long *)(void *)m;
	for (int i = 0; i < 512; i++)
		w[i] = truth[1][0];	/* st_leaf's return into st_rec */
	r.sp = (unsigned long)m;
	r.bp = (unsigned long)(m + 4096);	/* frame pointer into the hole */
	unsigned n = stack_trace_save_regs(&r, got, NBUF, 0);
	UKT_ASSERT(n >= 2 && n <= NBUF);
	UKT_EQ(got[1], truth[1][0]);
	/* sp in the hole: ip only */
	r.sp = (unsigned long)(m + 4096);
	UKT_EQ(stack_trace_save_regs(&r, got, NBUF, 0), 1);
	r.ip = 0x10;
	r.sp = (unsigned long)m;
	r.bp = (unsigned long)m + 8;
	n = stack_trace_save_regs(&r, got, NBUF, 0);
	UKT_ASSERT(n >= 1);
	UKT_EQ(got[0], 0x10);
	/* ip in no object (the frame pointer then), a bp chain looping on
	 * itself: one frame up, then a bp below sp ends it */
	w[1] = (unsigned long)m + 8;	/* *bp: the caller's bp, the same */
	w[2] = 0x10;			/* its return address */
	r.bp = (unsigned long)m + 8;
	UKT_EQ(stack_trace_save_regs(&r, got, NBUF, 0), 2);
	UKT_EQ(got[1], 0x10);
	munmap(m, 8192);
}

/* ---- print ------------------------------------------------------------------ */

UKT_CASE(print_format)
{
	char path[] = "/tmp/ukp-stprint-XXXXXX";
	int fd = mkstemp(path);
	UKT_ASSERT(fd >= 0);
	unlink(path);
	fflush(stderr);
	int saved = dup(2);
	UKT_ASSERT(saved >= 0);
	UKT_EQ(dup2(fd, 2), 2);
	/* an offset the compiler cannot fold: a constant st_leaf+3 in the
	 * code would read as a jump target inside st_leaf's probe region */
	static volatile unsigned long three = 3;
	unsigned long e[3] = { (unsigned long)st_leaf + three, (unsigned long)&fputc, 0x10 };
	stack_trace_print(e, 3, 2);
	stack_trace_print(e, 1, 0);
	stack_trace_print(NULL, 3, 0);
	fflush(stderr);
	UKT_EQ(dup2(saved, 2), 2);
	char buf[1024] = { 0 };
	UKT_ASSERT(pread(fd, buf, sizeof(buf) - 1, 0) > 0);
	close(fd);
	/* three spaces (1 + 2), "sym+0xoff/0xsize", " [object]" for a
	 * shared object, the bare address when nothing covers it */
	char *l1 = buf, *l2 = strchr(l1, '\n');
	UKT_ASSERT(l2);
	*l2++ = 0;
	char *l3 = strchr(l2, '\n');
	UKT_ASSERT(l3);
	*l3++ = 0;
	char *l4 = strchr(l3, '\n');
	UKT_ASSERT(l4);
	*l4++ = 0;
	unsigned long size = 0;
	UKT_EQ(sscanf(l1, "   st_leaf+0x3/0x%lx", &size), 1);
	UKT_ASSERT(size > 3 && size < 256);
	char tail[64];
	UKT_EQ(sscanf(l2, "   %*[^+]+0x%*x/0x%*x [%63[^]]]", tail), 1);
	UKT_ASSERT(strncmp(tail, "libc.so", 7) == 0);
	UKT_ASSERT(strchr(l2 + 3, ' ') == strrchr(l2, ' '));	/* one blank before [ */
	UKT_STREQ(l3, "   0x10");
	char *l5 = strchr(l4, '\n');
	UKT_ASSERT(l5);
	*l5++ = 0;
	snprintf(tail, sizeof(tail), " st_leaf+0x3/0x%lx", size);
	UKT_STREQ(l4, tail);
	UKT_STREQ(l5, "");
}

/* ---- C++ exceptions (tests/progs/stack_cxx.cc) ------------------------------ */

/* runs ../progs/stack_cxx [arg] (60 s at most): it must say all ok */
static void run_cxx(const char *arg)
{
	char self[PATH_MAX], cmd[PATH_MAX + 64], out[4096];
	ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	UKT_ASSERT(k > 0);
	self[k] = 0;
	*strrchr(self, '/') = 0;
	snprintf(cmd, sizeof(cmd), "%s/../progs/stack_cxx", self);
	if (access(cmd, X_OK))
		UKT_FAIL("%s: %s (build it with make tests)", cmd, strerror(errno));
	snprintf(cmd, sizeof(cmd), "timeout 60 %s/../progs/stack_cxx %s 2>&1", self, arg);
	fflush(stdout);
	fflush(stderr);
	FILE *p = popen(cmd, "r");
	UKT_ASSERT(p);
	size_t n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = 0;
	int st = pclose(p);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || strcmp(out, "stack_cxx: all ok\n"))
		UKT_FAIL("stack_cxx %s: status %#x, said:\n%s", arg, st, out);
}

UKT_CASE_T(cxx_exceptions_prog, 130)
{
	run_cxx("");
	run_cxx("int3");
}
