/* SPDX-License-Identifier: MIT */
/*
 * ftrace-stress: threads call traced functions in tight loops while the
 * main thread (and, for shared objects, loader threads) register,
 * unregister and re-filter ftrace_ops.  Every case runs a bounded number
 * of rounds (with a time cap for a loaded machine) and asserts only
 * invariants that hold exactly however the threads interleave.
 *
 * The central check is per call.  The main thread moves a phase counter
 * before and after every change (odd: changing, even: stable), and every
 * callback counts its hits per ops and per function in the calling
 * thread's own counters.  A thread reads the phase, calls, reads its
 * counters and the phase again: when the phase was the same stable value
 * on both sides, the call began after the last change returned and ended
 * before the next began, so it must have been traced exactly as the
 * stable state says (once per ops that selects the function, not at all
 * otherwise); across a change it may be traced at most once per ops.
 *
 * Cases (fe: the -pg -mfentry set, pf: the -fpatchable-function-entry
 * set; every case also checks every result, errno across the calls, and
 * that no callback runs for a function outside its ops' selection):
 *   switch_name_{fe,pf}        filter "X_other_one" <-> "X_other_two" with
 *                              reset=1 in one call: each call exactly as
 *                              the stable filter says, X_add never
 *   switch_glob_fe             the same with globs
 *   switch_ip_pf               the same with ftrace_set_filter_ip(reset=1)
 *   switch_notrace_{fe,pf}     filter "X_other_*", the notrace list switched
 *   unregister_{fe,pf}         slow callbacks (they spin), 1 or 2 ops with
 *                              varying flags (plain, SAVE_REGS, RECURSION),
 *                              on one site or all: no callback runs when or
 *                              after unregister returns
 *   unregister_free_{fe,pf}    the same with each ops malloc'd, then
 *                              overwritten and freed right after
 *                              unregister returns
 *   ipmodify_{fe,pf}           X_add live-patched to X_add_alt (a - b) and
 *                              back: every result a+b or a-b, redirected
 *                              exactly when the callback ran on that call;
 *                              a second IPMODIFY ops is refused (-EBUSY)
 *   ipmodify_counted_fe        plus a counting ops on the same site the
 *                              whole time: exact count
 *   multi_ops_{fe,pf}          ops A on X_mul the whole time while B (regs,
 *                              checks the arguments), C (RECURSION) and D
 *                              (A's callback) come and go: every cfg swap
 *                              keeps A exact
 *   multi_ops_regs_fe          A itself with SAVE_REGS
 *   trace_all_churn            an ops with no filter (every site) comes and
 *                              goes while threads run every fe_ and pf_
 *                              function (recursion, floating point, errno)
 *   first_patch_{fe,pf}        forked children: threads already run the
 *                              functions when ukprobes starts (fe_: its
 *                              "call __fentry__" sites become nops) and when
 *                              the sites are first patched (pf_: five 1-byte
 *                              nops become one call)
 *   dlopen_churn               two threads dlopen/call/dlclose ftdl_fe.so
 *                              and ftdl_pf.so while ops A ("dl_*") stays
 *                              registered and a trace-everything ops B
 *                              comes and goes: calls right after dlopen are
 *                              traced exactly, by both
 *   dlclose_while_registering  the same loads and unloads against a
 *                              register/unregister loop on every site:
 *                              never an error, never a fault
 *
 * The rounds a case runs are bounded, and so is its time (CAP_SECONDS):
 * each unregister waits for a grace period, which on a loaded 2-core
 * machine costs milliseconds.  X_fib's calls are not counted exactly:
 * the compiler may turn one of its two recursive calls into a loop.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "ukt.h"
#include "fttargets/targets.h"

#define NTHREADS 3
#define CAP_SECONDS 1.5		/* per case: rounds stop early on a slow machine */

/* ---- broken invariants, counted where they are seen --------------------------------- */

enum {
	E_RESULT, E_EXACT, E_TOO_MANY, E_OTHER, E_ZOMBIE, E_INSIDE, E_OPS, E_REGS,
	E_ERRNO, E_API, E_REDIRECT, NERR
};
static const char *const err_name[NERR] = {
	"wrong result",
	"a call within one stable phase not traced exactly as that phase says",
	"a call traced more often than the ops could",
	"a callback for a function its ops never selected",
	"a callback ran after unregister_ftrace_function() returned",
	"a callback was still running when unregister_ftrace_function() returned",
	"a callback got an ops whose memory is not a live ops (freed or overwritten)",
	"wrong pt_regs in a callback",
	"errno changed across a traced call",
	"an API call failed in a thread",
	"redirected without the IPMODIFY callback running on that call, or not after it ran",
};
static unsigned long err_count[NERR];
#define ERR(k) __atomic_fetch_add(&err_count[k], 1, __ATOMIC_RELAXED)

static void report_misses(void);
static void expect_no_errors(void)
{
	report_misses();
	ukt_expect_no_errors(err_name, err_count, NERR);
}

/* ---- the traced functions, both sets ------------------------------------------------ */

enum { F_ADD, F_ADD_ALT, F_MUL, F_SUM6, F_FMA3, F_FIB, F_CHAIN, F_ERRNO, F_ONE, F_TWO, NF };

struct tset {
	const char *p;		/* "fe_" or "pf_" */
	int (*add)(int, int), (*add_alt)(int, int), (*mul)(int, int);
	long (*sum6)(long, long, long, long, long, long);
	double (*fma3)(double, double, double);
	int (*fib)(int), (*chain)(int), (*errno_keep)(void), (*one)(int), (*two)(int);
};
#define TSET(p_) { #p_, FT_CAT(p_, add), FT_CAT(p_, add_alt), FT_CAT(p_, mul),		\
		   FT_CAT(p_, sum6), FT_CAT(p_, fma3), FT_CAT(p_, fib), FT_CAT(p_, chain), \
		   FT_CAT(p_, errno_keep), FT_CAT(p_, other_one), FT_CAT(p_, other_two) }
static const struct tset FE = TSET(fe_), PF = TSET(pf_);

static const struct tset *T;		/* the set a case runs */
static unsigned long ipv[NF];		/* its patch sites */

/* A function's patch site: its entry, after an endbr64 if it has one. */
static unsigned long site_of_fn(const void *fn)
{
	const unsigned char *b = fn;
	bool endbr = b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa;
	return (unsigned long)fn + (endbr ? 4 : 0);
}

static void use_set(const struct tset *t)
{
	const void *f[NF] = { (void *)t->add, (void *)t->add_alt, (void *)t->mul,
			      (void *)t->sum6, (void *)t->fma3, (void *)t->fib,
			      (void *)t->chain, (void *)t->errno_keep, (void *)t->one,
			      (void *)t->two };
	T = t;
	for (int k = 0; k < NF; k++)
		ipv[k] = site_of_fn(f[k]);
}

/* a thread may run another set than the main thread's (trace_all_churn) */
static __thread const struct tset *tl_T;
static __thread const unsigned long *tl_ipv;
#define CT (tl_T ? tl_T : T)

static int fn_index(unsigned long ip)
{
	const unsigned long *v = tl_ipv ? tl_ipv : ipv;
	for (int k = 0; k < NF; k++)
		if (v[k] == ip)
			return k;
	return -1;
}

static int fib_calls(int n)	/* calls fib(n) makes of fib, itself included */
{
	return n < 2 ? 1 : 1 + fib_calls(n - 1) + fib_calls(n - 2);
}

static int fib_ref(int n)
{
	return n < 2 ? n : fib_ref(n - 1) + fib_ref(n - 2);
}

static void filter_name(struct ftrace_ops *ops, const char *suffix, int reset)
{
	char f[128];
	snprintf(f, sizeof(f), "%s%s", T->p, suffix);
	UKT_EQ(ftrace_set_filter(ops, (unsigned char *)f, (int)strlen(f), reset), 0);
}

static void notrace_name(struct ftrace_ops *ops, const char *suffix, int reset)
{
	char f[128];
	snprintf(f, sizeof(f), "%s%s", T->p, suffix);
	UKT_EQ(ftrace_set_notrace(ops, (unsigned char *)f, (int)strlen(f), reset), 0);
}

/* ---- the phase: odd while the main thread changes something ------------------------- */

static unsigned long phase;
#define PHASE() __atomic_load_n(&phase, __ATOMIC_SEQ_CST)
static void phase_next(void)
{
	__atomic_fetch_add(&phase, 1, __ATOMIC_SEQ_CST);
}
#define STABLE(p1, p2) ((p1) == (p2) && !((p1) & 1))

/* ---- ops and their counters --------------------------------------------------------- */

#define NOPS 4
#define ROW_OTHER NF		/* hits of a function outside the set */

struct opst {
	unsigned long hits[NF + 1];
	int unreg;		/* set once unregister returned */
	long inside;		/* callbacks running now */
	int spin;		/* take a little time */
	int want_regs;		/* SAVE_REGS: regs must be there */
	int check_args;		/* a mul(x, x ^ ARGK) filter: check regs */
	unsigned long redirect;	/* IPMODIFY: send the call here */
};
static struct opst st[NOPS];
static __thread unsigned long tl[NOPS][NF + 1];	/* this thread's hits */
#define TL(k, f) __atomic_load_n(&tl[k][f], __ATOMIC_RELAXED)
#define ARGK 0x155

/* dlopen_churn: the functions of the library this thread has loaded */
static __thread unsigned long tl_dl_ip[3];
static __thread unsigned long tl_dl[NOPS][3];

static void cb_count(unsigned long ip, unsigned long parent, struct ftrace_ops *op,
		     struct pt_regs *regs)
{
	struct opst *s = op->private;
	if (s < st || s >= st + NOPS) {
		ERR(E_OPS);
		return;
	}
	int k = (int)(s - st);
	if (__atomic_load_n(&s->unreg, __ATOMIC_ACQUIRE))
		ERR(E_ZOMBIE);
	if (s->spin)
		__atomic_fetch_add(&s->inside, 1, __ATOMIC_SEQ_CST);
	if (s->want_regs != (regs != NULL))
		ERR(E_REGS);
	if (regs) {
		/* at the entry: ip the site, sp at the return address */
		if (!s->redirect && regs->ip != ip)
			ERR(E_REGS);
		if (*(unsigned long *)regs->sp != parent)
			ERR(E_REGS);
		/* (int arguments: the upper halves are undefined) */
		if (s->check_args && (uint32_t)regs->si != (uint32_t)(regs->di ^ ARGK))
			ERR(E_REGS);
	}
	int f = fn_index(ip);
	if (f < 0) {
		int d = -1;
		for (int j = 0; j < 3; j++)
			if (tl_dl_ip[j] == ip)
				d = j;
		if (d >= 0)
			tl_dl[k][d]++;
		else
			ERR(E_OTHER);	/* nothing else is called */
		f = ROW_OTHER;
	}
	__atomic_fetch_add(&s->hits[f], 1, __ATOMIC_RELAXED);
	tl[k][f]++;
	if (s->redirect && regs)
		regs->ip = s->redirect;
	if (s->spin) {
		for (int i = 0; i < 16; i++)
			__builtin_ia32_pause();
		if (__atomic_load_n(&s->unreg, __ATOMIC_ACQUIRE))
			ERR(E_ZOMBIE);
		__atomic_fetch_sub(&s->inside, 1, __ATOMIC_SEQ_CST);
	}
}

static void ops_init(struct ftrace_ops *ops, int k, unsigned long flags)
{
	struct opst *s = &st[k];
	ops->func = cb_count;
	ops->flags = flags;
	ops->private = s;
	memset(s->hits, 0, sizeof(s->hits));
	__atomic_store_n(&s->unreg, 0, __ATOMIC_RELEASE);
	s->inside = 0;
	s->want_regs = (flags & (FTRACE_OPS_FL_SAVE_REGS | FTRACE_OPS_FL_SAVE_REGS_IF_SUPPORTED)) != 0;
}

/* unregister, then mark the ops dead and check nothing of it runs */
static void unregister_checked(struct ftrace_ops *ops)
{
	struct opst *s = ops->private;
	UKT_EQ(unregister_ftrace_function(ops), 0);
	__atomic_store_n(&s->unreg, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&s->inside, __ATOMIC_SEQ_CST))
		ERR(E_INSIDE);
}

/* ---- workers ----------------------------------------------------------------------- */

struct worker {
	pthread_t th;
	int id;
	uint64_t seed;
	unsigned long iters;		/* rounds, read by the main thread */
	unsigned long calls[NF];
};
static struct worker W[NTHREADS];
static unsigned long main_calls[NF];
static int stop;
#define STOPPED() __atomic_load_n(&stop, __ATOMIC_ACQUIRE)

static void start_workers(void *(*fn)(void *), int n)
{
	__atomic_store_n(&stop, 0, __ATOMIC_RELEASE);
	for (int i = 0; i < n; i++) {
		memset(&W[i], 0, sizeof(W[i]));
		W[i].id = i;
		W[i].seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1);
		UKT_EQ(pthread_create(&W[i].th, NULL, fn, &W[i]), 0);
	}
}

/* stop and join; total[f] = calls of every worker and the main thread */
static void stop_workers(int n, unsigned long *total)
{
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int f = 0; f < NF; f++)
		total[f] = main_calls[f];
	for (int i = 0; i < n; i++) {
		UKT_EQ(pthread_join(W[i].th, NULL), 0);
		for (int f = 0; f < NF; f++)
			total[f] += W[i].calls[f];
	}
}

static void round_done(struct worker *w)
{
	__atomic_store_n(&w->iters, w->iters + 1, __ATOMIC_RELEASE);
}

/* Let the workers run about `rounds` rounds each (all of them together:
 * one may be off the CPU); at most 10 ms, never an assertion. */
static void let_workers_run(int n, unsigned long rounds)
{
	unsigned long start = 0, sum;
	for (int i = 0; i < n; i++)
		start += __atomic_load_n(&W[i].iters, __ATOMIC_ACQUIRE);
	double end = ukt_now() + 0.01;
	do {
		sched_yield();
		sum = 0;
		for (int i = 0; i < n; i++)
			sum += __atomic_load_n(&W[i].iters, __ATOMIC_ACQUIRE);
	} while (sum - start < rounds * (unsigned long)n && ukt_now() < end);
}

/*
 * One checked call of function f with argument x: result, errno, and the
 * hits of ops 0..nops-1 on f against want[k] (what a stable phase says;
 * mult: hits one call makes, e.g. fib's recursion).  Returns the hits of
 * ops 0.
 */
static int want_on[NOPS][NF];	/* stable phase: ops k traces f (set before the phase) */

/* the first few inexact calls, for the report */
struct miss { const char *set; int ops, f; unsigned long d, want, p1, p2; };
static struct miss misses[8];
static unsigned nmisses;

static void inexact(int k, int f, unsigned long d, unsigned long want, unsigned long p1,
		    unsigned long p2)
{
	ERR(E_EXACT);
	unsigned i = __atomic_fetch_add(&nmisses, 1, __ATOMIC_RELAXED);
	if (i < 8)
		misses[i] = (struct miss){ CT->p, k, f, d, want, p1, p2 };
}

static void report_misses(void)
{
	static const char *const name[NF] = { "add", "add_alt", "mul", "sum6", "fma3", "fib",
					      "chain", "errno_keep", "other_one", "other_two" };
	unsigned n = __atomic_load_n(&nmisses, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < n && i < 8; i++)
		fprintf(stderr, "  ops %d, %s%s: traced %lu times, not %lu (phase %lu..%lu)\n",
			misses[i].ops, misses[i].set, name[misses[i].f], misses[i].d,
			misses[i].want, misses[i].p1, misses[i].p2);
}

static unsigned long call_checked(int f, int x, int nops, unsigned long *calls)
{
	unsigned long h0[NOPS], want[NOPS], p1 = PHASE();
	int mult = 1;
	/* what the phase says, read before it can change (p2 tells) */
	for (int k = 0; k < nops; k++) {
		h0[k] = TL(k, f);
		want[k] = (unsigned long)__atomic_load_n(&want_on[k][f], __ATOMIC_SEQ_CST);
	}
	switch (f) {
	case F_ADD:
		if (CT->add(x, 3) != x + 3)
			ERR(E_RESULT);
		break;
	case F_MUL:
		if (CT->mul(x, x ^ ARGK) != x * (x ^ ARGK))
			ERR(E_RESULT);
		break;
	case F_SUM6:
		if (CT->sum6(x, 1, 2, 3, 4, -x) != x + 2 + 6 + 12 + 20 - 6L * x)
			ERR(E_RESULT);
		break;
	case F_FMA3:
		if (CT->fma3(x, 0.5, 0.25) != x * 0.5 + 0.25)
			ERR(E_RESULT);
		break;
	case F_FIB: {
		/* the compiler may turn one of the two recursive calls into a
		 * loop: between 1 and fib_calls(n) entries, not exact */
		int n = x % 9;
		mult = fib_calls(n);
		if (CT->fib(n) != fib_ref(n))
			ERR(E_RESULT);
		break;
	}
	case F_CHAIN:
		if (CT->chain(x) != (x + 1) * 2)
			ERR(E_RESULT);
		break;
	case F_ERRNO:
		errno = 1000 + x;
		if (CT->errno_keep() != 1000 + x || errno != 1000 + x)
			ERR(E_ERRNO);
		break;
	case F_ONE:
		if (CT->one(x) != x + 100)
			ERR(E_RESULT);
		break;
	case F_TWO:
		if (CT->two(x) != x + 200)
			ERR(E_RESULT);
		break;
	default:
		UKT_FAIL("function %d is not called here", f);
	}
	unsigned long p2 = PHASE(), h = 0;
	for (int k = 0; k < nops; k++) {
		unsigned long d = TL(k, f) - h0[k];
		if (STABLE(p1, p2) && (f == F_FIB ? (want[k] ? !d : d != 0) :
				       d != want[k] * (unsigned long)mult))
			inexact(k, f, d, want[k] * (unsigned long)mult, p1, p2);
		if (d > (unsigned long)mult)
			ERR(E_TOO_MANY);
		if (!k)
			h = d;
	}
	calls[f]++;
	return h;
}

static void set_want(int k, int f, int on)
{
	__atomic_store_n(&want_on[k][f], on, __ATOMIC_RELAXED);
}

static void clear_want(void)
{
	for (int k = 0; k < NOPS; k++)
		for (int f = 0; f < NF; f++)
			set_want(k, f, 0);
}

/* ---- 1. an atomic filter switch ------------------------------------------------------- */

static void *w_switch(void *arg)
{
	struct worker *w = arg;
	while (!STOPPED()) {
		int x = (int)(ukt_xorshift(&w->seed) & 0xffff);
		call_checked(F_ONE, x, 1, w->calls);
		call_checked(F_TWO, x, 1, w->calls);
		call_checked(F_ADD, x, 1, w->calls);
		round_done(w);
	}
	return NULL;
}

enum { SW_NAME, SW_GLOB, SW_IP, SW_NOTRACE };

/* Trace only `to` (F_ONE or F_TWO) from now on, in one call. */
static void switch_to(struct ftrace_ops *ops, int how, int to)
{
	bool one = to == F_ONE;
	switch (how) {
	case SW_NAME:
		filter_name(ops, one ? "other_one" : "other_two", 1);
		break;
	case SW_GLOB:
		filter_name(ops, one ? "other_o*" : "other_t[w]?", 1);
		break;
	case SW_IP:
		UKT_EQ(ftrace_set_filter_ip(ops, ipv[to], 0, 1), 0);
		break;
	case SW_NOTRACE:
		notrace_name(ops, one ? "other_two" : "other_one", 1);
		break;
	}
}

static void set_stable(int traced)
{
	set_want(0, F_ONE, traced == F_ONE);
	set_want(0, F_TWO, traced == F_TWO);
	set_want(0, F_ADD, 0);
}

static void filter_switch(const struct tset *t, int how)
{
	static struct ftrace_ops ops;
	unsigned long total[NF];
	int rounds = 0;

	use_set(t);
	clear_want();
	ops_init(&ops, 0, 0);
	if (how == SW_NOTRACE)
		filter_name(&ops, "other_*", 1);
	switch_to(&ops, how, F_ONE);
	UKT_EQ(register_ftrace_function(&ops), 0);
	set_stable(F_ONE);
	start_workers(w_switch, NTHREADS);
	double end = ukt_now() + CAP_SECONDS;
	for (; rounds < 200 && ukt_now() < end; rounds++) {
		for (int to = F_TWO, n = 0; n < 2; n++, to = F_ONE) {
			phase_next();
			switch_to(&ops, how, to);
			set_stable(to);
			phase_next();
			/* this thread's own calls, right after the switch */
			for (int i = 0; i < 4; i++) {
				call_checked(F_ONE, i, 1, main_calls);
				call_checked(F_TWO, i, 1, main_calls);
				call_checked(F_ADD, i, 1, main_calls);
			}
			let_workers_run(NTHREADS, 2);
		}
	}
	stop_workers(NTHREADS, total);
	printf("  %d rounds\n", rounds);
	unregister_checked(&ops);
	expect_no_errors();
	UKT_EQ(st[0].hits[F_ADD], 0);
	UKT_EQ(st[0].hits[ROW_OTHER], 0);
	for (int f = 0; f < NF; f++)
		if (f != F_ONE && f != F_TWO)
			UKT_EQ(st[0].hits[f], 0);
	UKT_ASSERT(st[0].hits[F_ONE] <= total[F_ONE]);
	UKT_ASSERT(st[0].hits[F_TWO] <= total[F_TWO]);
	/* the main thread's own calls were traced in every round */
	UKT_ASSERT(st[0].hits[F_ONE] >= 4UL * rounds);
	UKT_ASSERT(st[0].hits[F_TWO] >= 4UL * rounds);
}

UKT_CASE_T(switch_name_fe, 30) { filter_switch(&FE, SW_NAME); }
UKT_CASE_T(switch_name_pf, 30) { filter_switch(&PF, SW_NAME); }
UKT_CASE_T(switch_glob_fe, 30) { filter_switch(&FE, SW_GLOB); }
UKT_CASE_T(switch_ip_pf, 30) { filter_switch(&PF, SW_IP); }
UKT_CASE_T(switch_notrace_fe, 30) { filter_switch(&FE, SW_NOTRACE); }
UKT_CASE_T(switch_notrace_pf, 30) { filter_switch(&PF, SW_NOTRACE); }

/* ---- 2. nothing runs after unregister returns ---------------------------------------- */

static void *w_calls(void *arg)
{
	struct worker *w = arg;
	while (!STOPPED()) {
		int x = (int)(ukt_xorshift(&w->seed) & 0x3ff);
		call_checked(F_ADD, x, 2, w->calls);
		call_checked(F_MUL, x, 2, w->calls);
		call_checked(F_ONE, x, 2, w->calls);
		/* untraced work between the calls, as a program has */
		for (int i = 0; i < 100; i++)
			ukt_xorshift(&w->seed);
		round_done(w);
	}
	return NULL;
}

static void unregister_churn(const struct tset *t, bool free_ops)
{
	int nw = NTHREADS;
	static const unsigned long fl[4] = {
		0,
		FTRACE_OPS_FL_SAVE_REGS,
		FTRACE_OPS_FL_RECURSION,
		FTRACE_OPS_FL_SAVE_REGS_IF_SUPPORTED | FTRACE_OPS_FL_RECURSION,
	};
	static struct ftrace_ops fixed[2];
	struct ftrace_ops *ops[2];
	unsigned long total[NF];
	int rounds = 0;

	use_set(t);
	clear_want();
	start_workers(w_calls, nw);
	double end = ukt_now() + CAP_SECONDS;
	for (; rounds < 300 && ukt_now() < end; rounds++) {
		int n = rounds % 3 == 0 ? 2 : 1;
		bool glob = rounds & 1;
		phase_next();
		for (int k = 0; k < n; k++) {
			if (free_ops) {
				ops[k] = calloc(1, sizeof(*ops[k]));
				UKT_ASSERT(ops[k]);
			} else {
				ops[k] = &fixed[k];
			}
			ops_init(ops[k], k, fl[(rounds + k) % 4]);
			st[k].spin = 1;
			if (glob)
				filter_name(ops[k], "*", 1);	/* every X_ function */
			else
				UKT_EQ(ftrace_set_filter_ip(ops[k], ipv[F_ADD], 0, 1), 0);
			UKT_EQ(register_ftrace_function(ops[k]), 0);
			set_want(k, F_ADD, 1);
			set_want(k, F_MUL, glob);
			set_want(k, F_ONE, glob);
		}
		phase_next();
		let_workers_run(nw, 2);
		phase_next();
		for (int j = 0; j < n; j++) {
			int k = rounds & 2 ? n - 1 - j : j;
			unregister_checked(ops[k]);
			set_want(k, F_ADD, 0);
			set_want(k, F_MUL, 0);
			set_want(k, F_ONE, 0);
			if (free_ops) {
				/* the ops is the caller's again: reuse it at once */
				memset(ops[k], 0xa5, sizeof(*ops[k]));
				free(ops[k]);
			}
		}
		phase_next();
		/* nothing of either ops may run now: give it the chance */
		let_workers_run(nw, 3);
		for (int i = 0; i < 3; i++)
			call_checked(F_ADD, i, 2, main_calls);
	}
	stop_workers(nw, total);
	printf("  %d rounds\n", rounds);
	expect_no_errors();
	UKT_ASSERT(st[0].hits[ROW_OTHER] == 0);
	UKT_ASSERT(rounds > 0);
}

UKT_CASE_T(unregister_fe, 30) { unregister_churn(&FE, false); }
UKT_CASE_T(unregister_pf, 30) { unregister_churn(&PF, false); }
UKT_CASE_T(unregister_free_fe, 30) { unregister_churn(&FE, true); }
UKT_CASE_T(unregister_free_pf, 30) { unregister_churn(&PF, true); }

/* ---- 3. IPMODIFY: a live patch comes and goes ---------------------------------------- */

static bool ipm_counted;

static void *w_ipmodify(void *arg)
{
	struct worker *w = arg;
	while (!STOPPED()) {
		for (int i = 0; i < 8; i++) {
			int a = (int)(ukt_xorshift(&w->seed) & 0xfffff), b = 1 + (int)(ukt_xorshift(&w->seed) & 0xfff);
			unsigned long p1 = PHASE(), r0 = TL(0, F_ADD), c0 = TL(1, F_ADD);
			int r = T->add(a, b);
			unsigned long p2 = PHASE(), dr = TL(0, F_ADD) - r0, dc = TL(1, F_ADD) - c0;
			w->calls[F_ADD]++;
			if (r != a + b && r != a - b)
				ERR(E_RESULT);
			/* redirected exactly when the patch's callback ran */
			if ((r == a - b) != (dr == 1) || dr > 1)
				ERR(E_REDIRECT);
			if (STABLE(p1, p2) && (p1 & 2 ? r != a - b : r != a + b))
				ERR(E_EXACT);
			if (ipm_counted && dc != 1)
				ERR(E_EXACT);
		}
		round_done(w);
	}
	return NULL;
}

static void ipmodify_churn(const struct tset *t, bool counted)
{
	static struct ftrace_ops patch, other, counter;
	unsigned long total[NF];
	int rounds = 0, busy = 0;

	use_set(t);
	clear_want();
	ipm_counted = counted;
	/* phase 4k: unpatched, 4k+2: patched */
	__atomic_store_n(&phase, 0, __ATOMIC_SEQ_CST);
	if (counted) {
		ops_init(&counter, 1, 0);
		UKT_EQ(ftrace_set_filter_ip(&counter, ipv[F_ADD], 0, 1), 0);
		UKT_EQ(register_ftrace_function(&counter), 0);
	}
	ops_init(&other, 2, FTRACE_OPS_FL_SAVE_REGS | FTRACE_OPS_FL_IPMODIFY);
	st[2].redirect = ipv[F_ADD_ALT];
	UKT_EQ(ftrace_set_filter_ip(&other, ipv[F_ADD], 0, 1), 0);
	start_workers(w_ipmodify, NTHREADS);
	double end = ukt_now() + CAP_SECONDS;
	for (; rounds < 300 && ukt_now() < end; rounds++) {
		/* alternate the flags the patch asks with */
		unsigned long fl = rounds & 1 ? FTRACE_OPS_FL_SAVE_REGS | FTRACE_OPS_FL_IPMODIFY
			: FTRACE_OPS_FL_SAVE_REGS_IF_SUPPORTED | FTRACE_OPS_FL_IPMODIFY |
			  FTRACE_OPS_FL_RECURSION;
		ops_init(&patch, 0, fl);
		st[0].redirect = (unsigned long)t->add_alt;
		UKT_EQ(ftrace_set_filter_ip(&patch, ipv[F_ADD], 0, 1), 0);
		phase_next();
		UKT_EQ(register_ftrace_function(&patch), 0);
		phase_next();
		UKT_EQ(t->add(7, 3), 4);
		main_calls[F_ADD]++;
		if (rounds % 10 == 0) {
			/* a second live patch of the same function is refused
			 * (quietly: the refusal is logged) */
			setenv("UKPROBES_QUIET", "1", 1);
			UKT_EQ(register_ftrace_function(&other), -EBUSY);
			unsetenv("UKPROBES_QUIET");
			busy++;
		}
		let_workers_run(NTHREADS, 1);
		phase_next();
		unregister_checked(&patch);
		phase_next();
		UKT_EQ(t->add(7, 3), 10);
		main_calls[F_ADD]++;
		let_workers_run(NTHREADS, 1);
	}
	stop_workers(NTHREADS, total);
	printf("  %d rounds\n", rounds);
	expect_no_errors();
	UKT_EQ(st[2].hits[F_ADD], 0);
	UKT_ASSERT(busy > 0);
	if (counted) {
		unregister_checked(&counter);
		UKT_EQ(st[1].hits[F_ADD], total[F_ADD]);
	}
}

UKT_CASE_T(ipmodify_fe, 30) { ipmodify_churn(&FE, false); }
UKT_CASE_T(ipmodify_pf, 30) { ipmodify_churn(&PF, false); }
UKT_CASE_T(ipmodify_counted_fe, 30) { ipmodify_churn(&FE, true); }

/* ---- 4. several ops on one site: every cfg swap keeps the others exact ------------------- */

static void *w_mul(void *arg)
{
	struct worker *w = arg;
	while (!STOPPED()) {
		for (int i = 0; i < 8; i++) {
			int x = (int)(ukt_xorshift(&w->seed) & 0x3ff);
			if (call_checked(F_MUL, x, NOPS, w->calls) != 1)
				ERR(E_EXACT);	/* ops A: registered the whole time */
		}
		round_done(w);
	}
	return NULL;
}

static void multi_ops(const struct tset *t, unsigned long a_flags)
{
	static struct ftrace_ops ops[NOPS];
	static const unsigned long fl[NOPS] = {
		0, FTRACE_OPS_FL_SAVE_REGS, FTRACE_OPS_FL_RECURSION, 0,
	};
	bool on[NOPS] = { true };
	unsigned long total[NF];
	uint64_t seed = 12345;
	int rounds = 0;

	use_set(t);
	clear_want();
	for (int k = 0; k < NOPS; k++) {
		ops_init(&ops[k], k, k ? fl[k] : a_flags);
		st[k].check_args = 1;
		UKT_EQ(ftrace_set_filter_ip(&ops[k], ipv[F_MUL], 0, 1), 0);
	}
	UKT_EQ(register_ftrace_function(&ops[0]), 0);
	set_want(0, F_MUL, 1);
	start_workers(w_mul, NTHREADS);
	double end = ukt_now() + CAP_SECONDS;
	for (; rounds < 400 && ukt_now() < end; rounds++) {
		int k = 1 + (int)(ukt_xorshift(&seed) % (NOPS - 1));
		phase_next();
		if (on[k]) {
			unregister_checked(&ops[k]);
		} else {
			ops_init(&ops[k], k, fl[k]);
			UKT_EQ(register_ftrace_function(&ops[k]), 0);
		}
		on[k] = !on[k];
		set_want(k, F_MUL, on[k]);
		phase_next();
		for (int i = 0; i < 3; i++)
			if (call_checked(F_MUL, i, NOPS, main_calls) != 1)
				ERR(E_EXACT);
		let_workers_run(NTHREADS, 1);
	}
	stop_workers(NTHREADS, total);
	printf("  %d rounds\n", rounds);
	for (int k = 1; k < NOPS; k++)
		if (on[k])
			unregister_checked(&ops[k]);
	unregister_checked(&ops[0]);
	expect_no_errors();
	UKT_EQ(st[0].hits[F_MUL], total[F_MUL]);
	for (int k = 0; k < NOPS; k++)
		UKT_EQ(st[k].hits[ROW_OTHER], 0);
}

UKT_CASE_T(multi_ops_fe, 30) { multi_ops(&FE, 0); }
UKT_CASE_T(multi_ops_pf, 30) { multi_ops(&PF, 0); }
UKT_CASE_T(multi_ops_regs_fe, 30) { multi_ops(&FE, FTRACE_OPS_FL_SAVE_REGS); }

/* ---- every function of both sets, an ops on all of them coming and going ----------------- */

static const struct tset *const SETS[2] = { &FE, &PF };
static unsigned long ipv2[2][NF];

static void *w_everything(void *arg)
{
	struct worker *w = arg;
	static const int fns[] = { F_ADD, F_MUL, F_SUM6, F_FMA3, F_FIB, F_CHAIN, F_ERRNO,
				   F_ONE, F_TWO };
	tl_T = SETS[w->id & 1];		/* workers 0, 2: fe_; 1: pf_ */
	tl_ipv = ipv2[w->id & 1];
	while (!STOPPED()) {
		int x = (int)(ukt_xorshift(&w->seed) & 0x3ff);
		for (unsigned j = 0; j < sizeof(fns) / sizeof(fns[0]); j++)
			call_checked(fns[j], x, 1, w->calls);
		round_done(w);
	}
	return NULL;
}

UKT_CASE_T(trace_all_churn, 30)
{
	static struct ftrace_ops all;
	unsigned long total[NF];
	int rounds = 0;

	for (int s = 0; s < 2; s++) {
		use_set(SETS[s]);
		memcpy(ipv2[s], ipv, sizeof(ipv));
	}
	use_set(&FE);
	clear_want();
	ops_init(&all, 0, 0);	/* no filter: every patch site */
	start_workers(w_everything, NTHREADS);
	double end = ukt_now() + CAP_SECONDS;
	for (; rounds < 150 && ukt_now() < end; rounds++) {
		phase_next();
		unsigned long fl = rounds % 3 == 1 ? FTRACE_OPS_FL_SAVE_REGS :
			rounds % 3 == 2 ? FTRACE_OPS_FL_RECURSION : 0;
		ops_init(&all, 0, fl);
		UKT_EQ(register_ftrace_function(&all), 0);
		for (int f = 0; f < NF; f++)
			set_want(0, f, 1);
		phase_next();
		let_workers_run(NTHREADS, 1);
		phase_next();
		unregister_checked(&all);
		clear_want();
		phase_next();
		let_workers_run(NTHREADS, 1);
	}
	stop_workers(NTHREADS, total);
	printf("  %d rounds\n", rounds);
	expect_no_errors();
	UKT_ASSERT(rounds > 0);
}

/* ---- 5. the first patch of a site, with threads already running it ------------------------ */

static void *w_first(void *arg)
{
	struct worker *w = arg;
	static const int fns[] = { F_ADD, F_MUL, F_SUM6, F_FMA3, F_FIB, F_CHAIN, F_ERRNO,
				   F_ONE, F_TWO };
	while (!STOPPED()) {
		int x = (int)(ukt_xorshift(&w->seed) & 0x3ff);
		for (unsigned j = 0; j < sizeof(fns) / sizeof(fns[0]); j++)
			call_checked(fns[(j + (unsigned)w->id) % 9], x, 1, w->calls);
		round_done(w);
	}
	return NULL;
}

/* In a child that has not started ukprobes: threads first, then ukprobes. */
static void first_patch_child(const struct tset *t)
{
	static struct ftrace_ops ops;
	unsigned long total[NF];

	use_set(t);
	clear_want();
	start_workers(w_first, NTHREADS);
	let_workers_run(NTHREADS, 20);
	ops_init(&ops, 0, 0);
	phase_next();
	/* the first call into ukprobes: it starts (fe_: "call __fentry__"
	 * becomes nops under the running threads) */
	filter_name(&ops, "*", 1);
	UKT_EQ(register_ftrace_function(&ops), 0);	/* nops -> call */
	for (int f = 0; f < NF; f++)
		set_want(0, f, f != F_ADD_ALT);
	phase_next();
	let_workers_run(NTHREADS, 20);
	for (int i = 0; i < 3; i++) {
		phase_next();
		unregister_checked(&ops);
		clear_want();
		phase_next();
		let_workers_run(NTHREADS, 5);
		phase_next();
		ops_init(&ops, 0, i & 1 ? FTRACE_OPS_FL_SAVE_REGS : 0);
		UKT_EQ(register_ftrace_function(&ops), 0);
		for (int f = 0; f < NF; f++)
			set_want(0, f, f != F_ADD_ALT);
		phase_next();
		let_workers_run(NTHREADS, 5);
	}
	stop_workers(NTHREADS, total);
	unregister_checked(&ops);
	expect_no_errors();
	UKT_EQ(st[0].hits[ROW_OTHER], 0);
	UKT_EQ(st[0].hits[F_ADD_ALT], 0);
	/* no more hits than entries: chain calls add and mul, fib itself */
	for (int f = 0; f < NF; f++) {
		unsigned long entries = f == F_FIB ? total[f] * (unsigned long)fib_calls(8) :
			f == F_ADD || f == F_MUL ? total[f] + total[F_CHAIN] : total[f];
		UKT_ASSERT(st[0].hits[f] <= entries);
	}
}

static void first_patch(const struct tset *t, int children)
{
	for (int i = 0; i < children; i++) {
		fflush(stdout);
		fflush(stderr);
		pid_t pid = fork();
		UKT_ASSERT(pid >= 0);
		if (pid == 0) {
			first_patch_child(t);
			_exit(0);
		}
		int status;
		UKT_EQ(waitpid(pid, &status, 0), pid);
		if (WIFSIGNALED(status))
			UKT_FAIL("child %d killed by signal %d (%s)", i, WTERMSIG(status),
				 strsignal(WTERMSIG(status)));
		UKT_ASSERT(WIFEXITED(status));
		UKT_EQ(WEXITSTATUS(status), 0);
	}
}

UKT_CASE_T(first_patch_fe, 60) { first_patch(&FE, 8); }
UKT_CASE_T(first_patch_pf, 60) { first_patch(&PF, 8); }

/* ---- 6. shared objects loaded and unloaded under registered ops ----------------------------- */

static char dl_path[2][4200];
static void dl_paths(void)
{
	static const char *const name[2] = { "ftdl_fe.so", "ftdl_pf.so" };
	char self[4000];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	UKT_ASSERT(n > 0);
	self[n] = 0;
	char *slash = strrchr(self, '/');
	UKT_ASSERT(slash);
	*slash = 0;
	for (int i = 0; i < 2; i++) {
		snprintf(dl_path[i], sizeof(dl_path[i]), "%s/../solibs/%s", self, name[i]);
		if (access(dl_path[i], R_OK))
			UKT_FAIL("%s is missing (make tests builds it)", dl_path[i]);
	}
}

static int dl_b_on;			/* ops B (trace everything) in the stable phase */
static unsigned long dl_loads[2], dl_first_err;

enum { D_TWICE, D_THRICE, D_BOTH };

static void *w_loader(void *arg)
{
	struct worker *w = arg;
	int lib = w->id;
	const char *pre = lib ? "dl_pf_" : "dl_fe_";
	static const char *const fname[3] = { "twice", "thrice", "both" };
	while (!STOPPED()) {
		void *h = dlopen(dl_path[lib], RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			ERR(E_API);
			break;
		}
		void *fn[3];
		for (int j = 0; j < 3; j++) {
			char s[64];
			snprintf(s, sizeof(s), "%s%s", pre, fname[j]);
			fn[j] = dlsym(h, s);
			if (!fn[j]) {
				ERR(E_API);
				dlclose(h);
				return NULL;
			}
			tl_dl_ip[j] = site_of_fn(fn[j]);
		}
		/* right after dlopen: traced by A (always), by B when stable on */
		for (int i = 0; i < 4; i++) {
			int x = (int)(ukt_xorshift(&w->seed) & 0xffff);
			unsigned long p1 = PHASE(), a0[3], b0[3];
			memcpy(a0, tl_dl[0], sizeof(a0));
			memcpy(b0, tl_dl[1], sizeof(b0));
			int r = i & 1 ? ((int (*)(int))fn[D_TWICE])(x) : ((int (*)(int))fn[D_BOTH])(x);
			unsigned long p2 = PHASE();
			if (r != (i & 1 ? 2 * x : 5 * x))
				ERR(E_RESULT);
			for (int j = 0; j < 3; j++) {
				unsigned long want = i & 1 ? j == D_TWICE : 1;
				unsigned long da = tl_dl[0][j] - a0[j], db = tl_dl[1][j] - b0[j];
				if (da != want)
					ERR(E_EXACT);
				if (STABLE(p1, p2) && db != (__atomic_load_n(&dl_b_on, __ATOMIC_RELAXED) ? want : 0))
					ERR(E_EXACT);
				if (db > want)
					ERR(E_TOO_MANY);
			}
		}
		memset(tl_dl_ip, 0, sizeof(tl_dl_ip));
		if (dlclose(h))
			ERR(E_API);
		__atomic_fetch_add(&dl_loads[lib], 1, __ATOMIC_RELAXED);
		round_done(w);
	}
	return NULL;
}

static void *w_dl_calls(void *arg)
{
	struct worker *w = arg;
	while (!STOPPED()) {
		int x = (int)(ukt_xorshift(&w->seed) & 0x3ff);
		call_checked(F_ADD, x, 2, w->calls);
		call_checked(F_ONE, x, 2, w->calls);
		round_done(w);
	}
	return NULL;
}

static void *w_dl(void *arg)
{
	struct worker *w = arg;
	return w->id < 2 ? w_loader(arg) : w_dl_calls(arg);
}

UKT_CASE_T(dlopen_churn, 60)
{
	static struct ftrace_ops a, b;
	unsigned long total[NF];
	int rounds = 0, api_errs = 0;

	dl_paths();
	use_set(&FE);
	clear_want();
	/* "dl_*" must match a loaded function when it is set */
	void *h = dlopen(dl_path[0], RTLD_NOW | RTLD_LOCAL);
	UKT_ASSERT(h);
	ops_init(&a, 0, 0);
	UKT_EQ(ftrace_set_filter(&a, (unsigned char *)"dl_*", 4, 1), 0);
	UKT_EQ(register_ftrace_function(&a), 0);
	UKT_EQ(dlclose(h), 0);
	ops_init(&b, 1, 0);	/* no filter: everything */
	start_workers(w_dl, NTHREADS);
	double end = ukt_now() + 2 * CAP_SECONDS;
	for (; rounds < 200 && ukt_now() < end; rounds++) {
		phase_next();
		ops_init(&b, 1, rounds & 1 ? FTRACE_OPS_FL_SAVE_REGS : 0);
		int e = register_ftrace_function(&b);
		if (e) {
			/* report every failure, not only the first */
			if (!api_errs++)
				dl_first_err = (unsigned long)-e;
			phase_next();
			continue;
		}
		set_want(1, F_ADD, 1);
		set_want(1, F_ONE, 1);
		__atomic_store_n(&dl_b_on, 1, __ATOMIC_RELAXED);
		phase_next();
		let_workers_run(NTHREADS, 1);
		phase_next();
		e = unregister_ftrace_function(&b);
		__atomic_store_n(&st[1].unreg, 1, __ATOMIC_SEQ_CST);
		if (e && !api_errs++)
			dl_first_err = (unsigned long)-e;
		set_want(1, F_ADD, 0);
		set_want(1, F_ONE, 0);
		__atomic_store_n(&dl_b_on, 0, __ATOMIC_RELAXED);
		phase_next();
		let_workers_run(NTHREADS, 1);
	}
	stop_workers(NTHREADS, total);
	unregister_checked(&a);
	printf("  %d rounds, %lu + %lu loads\n", rounds, dl_loads[0], dl_loads[1]);
	if (api_errs)
		fprintf(stderr, "  %d register/unregister calls failed, the first with %s\n",
			api_errs, strerror((int)dl_first_err));
	expect_no_errors();
	UKT_EQ(api_errs, 0);
	UKT_ASSERT(dl_loads[0] > 0 && dl_loads[1] > 0);
	/* A never saw anything but the libraries' functions */
	for (int f = 0; f < NF; f++)
		UKT_EQ(st[0].hits[f], 0);
}

/*
 * dlclose() unmaps an object before the dynamic linker says so (r_brk
 * with RT_CONSISTENT): ukprobes must not patch, nor fail on, the sites of
 * an object that is going away.  The loaders only load and unload; the
 * main thread registers and unregisters an ops on every site as fast as
 * it can.
 */
static void *w_load_unload(void *arg)
{
	struct worker *w = arg;
	while (!STOPPED()) {
		void *h = dlopen(dl_path[w->id & 1], RTLD_NOW | RTLD_LOCAL);
		if (!h || dlclose(h))
			ERR(E_API);
		round_done(w);
	}
	return NULL;
}

UKT_CASE_T(dlclose_while_registering, 60)
{
	static struct ftrace_ops all;
	unsigned long total[NF];
	int rounds = 0, fails = 0, first = 0;

	dl_paths();
	use_set(&FE);
	clear_want();
	setenv("UKPROBES_QUIET", "1", 1);	/* one line per failure otherwise */
	start_workers(w_load_unload, 2);
	double end = ukt_now() + CAP_SECONDS;
	for (; rounds < 20000 && ukt_now() < end; rounds++) {
		ops_init(&all, 0, 0);	/* no filter: the libraries' sites too */
		int e = register_ftrace_function(&all);
		if (!e) {
			e = unregister_ftrace_function(&all);
			__atomic_store_n(&st[0].unreg, 1, __ATOMIC_SEQ_CST);
		}
		if (e && !fails++)
			first = e;
	}
	stop_workers(2, total);
	unsetenv("UKPROBES_QUIET");
	printf("  %d rounds, %lu + %lu loads\n", rounds, W[0].iters, W[1].iters);
	if (fails)
		fprintf(stderr, "  %d of %d register/unregister pairs failed, the first with %d (%s)\n",
			fails, rounds, first, strerror(-first));
	expect_no_errors();
	UKT_EQ(fails, 0);
}
