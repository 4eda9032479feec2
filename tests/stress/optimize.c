/*
 * stress-optimize: jump optimisation flipping thousands of times while
 * threads run the probed code.
 *
 * Three asm functions whose probed regions span several instructions
 * (so a thread can be anywhere inside one when the jump is written or
 * taken out): an entry, a mid-function point and a loop head that the
 * loop jumps back to.  A pre-only probe on each stays registered and
 * enabled for the whole case; only their optimisation state flips, by
 *
 *   - the knob: kprobes_set_optimization(0/1), with and without waiting
 *     in between (requests that cancel each other in the queue);
 *   - a post_handler probe at the same address, registered and
 *     unregistered (alone or in a batch, sometimes before the optimizer
 *     has run);
 *   - a probe inside the region, registered and unregistered: with a
 *     post_handler it blocks the jump, without it joins the jump's run;
 *   - disable/enable of one of them (that one is then not exact);
 *   - register, optimize, unregister of fresh probes (an optimized probe
 *     removed under running threads; no handler after unregister);
 *   - all of the above while the program's own SIGPROF (a POSIX timer)
 *     and SIGUSR1 (tgkill from another thread) handlers call the probed
 *     functions.  (Not SIGALRM: the runner's timeout is alarm(), and a
 *     second SIGALRM is dropped while the timer's one is pending.)
 *
 * Exactly, however the threads interleave:
 *   - every call returns the right value;
 *   - every thread counts its own calls, and the probes that stay
 *     registered and enabled count exactly those calls (hits + nmissed
 *     when signal handlers may call the functions inside a handler); with
 *     no signals, each call's hit is checked on the spot, per thread;
 *   - after each wait_for_kprobe_optimizer() the flags say what the
 *     contract says: OPTIMIZED when nothing blocks it, not when something
 *     does;
 *   - a transient probe's handlers never run after its unregister returned,
 *     its post_handler never more often than its pre_handler.
 * Bounded by iteration counts and a deadline; timings are never asserted.
 * Between two changes of state the workers always get through the
 * functions (let_workers_run), so flips and calls interleave however fast
 * either is.  A crash prints the faulting address and what the controller
 * was doing.
 *
 * Cases (3 workers each):
 *   stress_knob_flips                    kprobes_set_optimization(0/1)
 *   stress_post_handler_probe_flips      a post_handler probe on each site
 *   stress_inner_probe_flips             a probe inside each region
 *   stress_disable_enable_flips          disable/enable the mid-function probe
 *   stress_register_optimize_unregister  fresh probes optimized and removed
 *   stress_flips_with_program_signals    knob, post and inner flips in turn
 *                                        under SIGPROF and SIGUSR1 whose
 *                                        handlers call the probed functions
 *   stress_lean_and_vector_handlers_switch  the lean trampoline (no vector
 *                                        state saved) and a saving one
 *                                        switching at one site, xmm0-7 live
 *   stress_leaf_and_errno_handlers_switch   the leaf trampoline (no errno
 *                                        kept) and the plain lean one
 *                                        switching at one site, handlers
 *                                        faulting now and then, errno
 *                                        checked around every call
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <dlfcn.h>
#include <ucontext.h>
#include <ukprobes.h>
#include "ukt.h"

/* ---- the probed functions ------------------------------------------------------- */

unsigned long s_inc3(unsigned long x);			/* x + 3 */
unsigned long s_mix(unsigned long x, unsigned long y);	/* ((x + 5) * 3 ^ 0x55) - y */
unsigned long s_sum(const unsigned long *p, unsigned long n);
#define s_inc3_in ukt_label("s_inc3_in")
#define s_mix_probe ukt_label("s_mix_probe")
#define s_mix_in ukt_label("s_mix_in")
#define s_sum_head ukt_label("s_sum_head")
#define s_sum_in ukt_label("s_sum_in")

__asm__(
	".text\n"
	/* entry probe: region mov (3) + add (4); s_inc3_in is inside it */
	".p2align 4\n"
	".globl s_inc3\n.type s_inc3,@function\n"
	"s_inc3: mov %rdi,%rax\n"
	".globl s_inc3_in\ns_inc3_in: add $1,%rax\n add $2,%rax\n ret\n"
	".size s_inc3,.-s_inc3\n"
	/* mid-function probe: region imul (4) + xor (4) */
	".p2align 4\n"
	".globl s_mix\n.type s_mix,@function\n"
	"s_mix: lea 5(%rdi),%rax\n"
	".globl s_mix_probe\ns_mix_probe: imul $3,%rax,%rax\n"
	".globl s_mix_in\ns_mix_in: xor $0x55,%rax\n sub %rsi,%rax\n ret\n"
	".size s_mix,.-s_mix\n"
	/* loop head, jumped back to on every iteration: region add (3) + add (4) */
	".p2align 4\n"
	".globl s_sum\n.type s_sum,@function\n"
	"s_sum: xor %eax,%eax\n test %rsi,%rsi\n jle 2f\n"
	".globl s_sum_head\ns_sum_head:\n"
	"1: add (%rdi),%rax\n"
	".globl s_sum_in\ns_sum_in: add $8,%rdi\n dec %rsi\n jnz 1b\n"
	"2: ret\n.size s_sum,.-s_sum\n"
);

static unsigned long ref_mix(unsigned long x, unsigned long y) { return ((x + 5) * 3 ^ 0x55) - y; }

static unsigned long ref_sum(const unsigned long *p, unsigned long n)
{
	unsigned long s = 0;
	for (unsigned long i = 0; i < n; i++)
		s += p[i];
	return s;
}

#define NFN 3		/* s_inc3, s_mix, s_sum */
#define site(k) ((k) == 0 ? (char *)s_inc3 : (k) == 1 ? s_mix_probe : s_sum_head)
#define inner(k) ((k) == 0 ? s_inc3_in : (k) == 1 ? s_mix_in : s_sum_in)
static const char *const fname[NFN] = { "s_inc3", "s_mix+4", "s_sum loop head" };

/* ---- bookkeeping ------------------------------------------------------------------ */

enum { E_RESULT, E_IP, E_LOST, E_ZOMBIE, E_POST_GT_PRE, E_HANDLER_SIG, NERR };
static const char *const err_name[NERR] = {
	"wrong result",
	"regs->ip is not the probe address",
	"a call of a function whose probe stayed registered and enabled did not hit it exactly",
	"handler of an unregistered probe ran",
	"more post_handler than pre_handler calls",
	"a signal handler saw a wrong result",
};
static unsigned long err_count[NERR];
#define ERR(k) __atomic_fetch_add(&err_count[k], 1, __ATOMIC_RELAXED)

/* optimisation state seen after wait_for_kprobe_optimizer() */
static unsigned long opt_missing, opt_unexpected, opt_checks;
static char first_mismatch[256];

static void note_state(const struct kprobe *p, bool want_opt, const char *when, long iter)
{
	bool opt = __atomic_load_n(&p->flags, __ATOMIC_ACQUIRE) & KPROBE_FLAG_OPTIMIZED;
	opt_checks++;
	if (opt == want_opt)
		return;
	if (want_opt)
		opt_missing++;
	else
		opt_unexpected++;
	if (!first_mismatch[0])
		snprintf(first_mismatch, sizeof(first_mismatch),
			 "iteration %ld, %s: probe at %p is%s optimized (flags %#x)", iter, when,
			 (void *)p->addr, opt ? "" : " not", p->flags);
}

static void expect_no_errors(void)
{
	ukt_expect_no_errors(err_name, err_count, NERR);
}

static void expect_states_right(void)
{
	if (opt_missing || opt_unexpected)
		UKT_FAIL("%lu of %lu state checks wrong (%lu not optimized when they should be, "
			 "%lu optimized when they should not); first: %s",
			 opt_missing + opt_unexpected, opt_checks, opt_missing, opt_unexpected,
			 first_mismatch);
}

/* ---- the probes that stay ----------------------------------------------------------- */

static struct kprobe P[NFN];
static unsigned long p_hits[NFN];
static __thread unsigned long tls_hits[NFN];

static int p_pre(struct kprobe *p, struct pt_regs *r)
{
	int k = (int)(p - P);
	if (r->ip != (unsigned long)p->addr)
		ERR(E_IP);
	__atomic_fetch_add(&p_hits[k], 1, __ATOMIC_RELAXED);
	tls_hits[k]++;
	return 0;
}

/* ---- probes that come and go ------------------------------------------------------ */

enum { LIVE = 1, DEAD = 2 };
struct tprobe {
	struct kprobe kp;		/* first: handlers cast back */
	int state;
	unsigned long pre, post;
	int fn;
};
static unsigned long t_pre_total[NFN];	/* pre hits of every transient probe, per function */

static int t_pre(struct kprobe *p, struct pt_regs *r)
{
	struct tprobe *t = (struct tprobe *)p;
	if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != LIVE)
		ERR(E_ZOMBIE);
	if (r->ip != (unsigned long)p->addr)
		ERR(E_IP);
	__atomic_fetch_add(&t->pre, 1, __ATOMIC_RELAXED);
	return 0;
}

static void t_post(struct kprobe *p, struct pt_regs *r, unsigned long flags)
{
	struct tprobe *t = (struct tprobe *)p;
	(void)r; (void)flags;
	if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) != LIVE)
		ERR(E_ZOMBIE);
	__atomic_fetch_add(&t->post, 1, __ATOMIC_RELAXED);
}

/* never freed: a late handler finds DEAD, not reused memory */
static struct tprobe *t_new(int fn, void *addr, bool post)
{
	struct tprobe *t = calloc(1, sizeof(*t));
	UKT_ASSERT(t);
	t->kp.addr = addr;
	t->kp.pre_handler = t_pre;
	if (post)
		t->kp.post_handler = t_post;
	t->fn = fn;
	__atomic_store_n(&t->state, LIVE, __ATOMIC_RELEASE);
	return t;
}

static void t_gone(struct tprobe *t)
{
	__atomic_store_n(&t->state, DEAD, __ATOMIC_RELEASE);
	unsigned long pre = __atomic_load_n(&t->pre, __ATOMIC_RELAXED);
	if (__atomic_load_n(&t->post, __ATOMIC_RELAXED) > pre)
		ERR(E_POST_GT_PRE);
	t_pre_total[t->fn] += pre;
}

static void t_register(struct tprobe **t, int n, bool batch)
{
	if (batch) {
		struct kprobe *v[NFN];
		for (int i = 0; i < n; i++)
			v[i] = &t[i]->kp;
		int r = register_kprobes(v, n);
		if (r)
			UKT_FAIL("register_kprobes() = %d", r);
	} else {
		for (int i = 0; i < n; i++) {
			int r = register_kprobe(&t[i]->kp);
			if (r)
				UKT_FAIL("register_kprobe(%p) = %d", (void *)t[i]->kp.addr, r);
		}
	}
}

static void t_unregister(struct tprobe **t, int n, bool batch)
{
	if (batch) {
		struct kprobe *v[NFN];
		for (int i = 0; i < n; i++)
			v[i] = &t[i]->kp;
		unregister_kprobes(v, n);
	} else {
		for (int i = 0; i < n; i++)
			unregister_kprobe(&t[i]->kp);
	}
	for (int i = 0; i < n; i++)
		t_gone(t[i]);
}

/* ---- workers ------------------------------------------------------------------------ */

#define NW 3
#define MIN_FLIPS 3	/* each method of M_MIXED once, and a no-wait variant */
static int stop = 1;		/* no workers running */
#define STOPPED() __atomic_load_n(&stop, __ATOMIC_ACQUIRE)
static bool exact[NFN];		/* P[k] registered and enabled throughout */
static bool percall;		/* check each call's hit on the spot (no signals) */

struct worker {
	pthread_t th;
	pid_t tid;
	int id;
	unsigned long calls[NFN];	/* s_sum: loop iterations, one hit each */
	unsigned long progress;		/* call groups done so far */
};
static struct worker W[NW];
static int ready;

static const unsigned long arr[8] = {
	0x0123456789abcdefUL, 0xfedcba9876543210UL, 0x1111111111111111UL, 0x8000000000000001UL,
	0x7fffffffffffffffUL, 0x5555aaaa5555aaaaUL, 0x0f0f0f0f0f0f0f0fUL, 0xdeadbeefcafef00dUL,
};

/* calls made by signal handlers, whichever thread they ran on */
static unsigned long sig_calls[NFN];
static unsigned long sig_prof, sig_usr1;

static void call_all_from_handler(void)
{
	unsigned long x = __atomic_load_n(&sig_calls[0], __ATOMIC_RELAXED) * 7 + 1;
	if (s_inc3(x) != x + 3)
		ERR(E_HANDLER_SIG);
	__atomic_fetch_add(&sig_calls[0], 1, __ATOMIC_RELAXED);
	if (s_mix(x, 9) != ref_mix(x, 9))
		ERR(E_HANDLER_SIG);
	__atomic_fetch_add(&sig_calls[1], 1, __ATOMIC_RELAXED);
	unsigned long n = x % 8;
	if (s_sum(arr, n) != ref_sum(arr, n))
		ERR(E_HANDLER_SIG);
	__atomic_fetch_add(&sig_calls[2], n, __ATOMIC_RELAXED);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t s = 0x1234567ULL + (uint64_t)w->id * 7919;
	unsigned long c[NFN] = { 0 };
	sigset_t set;

	w->tid = (pid_t)syscall(SYS_gettid);
	sigemptyset(&set);
	sigaddset(&set, SIGPROF);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
	__atomic_fetch_add(&ready, 1, __ATOMIC_RELEASE);

	while (!STOPPED()) {
		for (int rep = 0; rep < 64; rep++) {
			unsigned long x = ukt_xorshift(&s), y = x >> 17, h;

			h = tls_hits[0];
			if (s_inc3(x) != x + 3)
				ERR(E_RESULT);
			if (percall && exact[0] && tls_hits[0] != h + 1)
				ERR(E_LOST);
			c[0]++;

			h = tls_hits[1];
			if (s_mix(x, y) != ref_mix(x, y))
				ERR(E_RESULT);
			if (percall && exact[1] && tls_hits[1] != h + 1)
				ERR(E_LOST);
			c[1]++;

			unsigned long n = x % 8;
			h = tls_hits[2];
			if (s_sum(arr, n) != ref_sum(arr, n))
				ERR(E_RESULT);
			if (percall && exact[2] && tls_hits[2] != h + n)
				ERR(E_LOST);
			c[2] += n;
			__atomic_store_n(&w->progress, w->progress + 1, __ATOMIC_RELEASE);
		}
	}
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	for (int k = 0; k < NFN; k++)
		w->calls[k] = c[k];
	return NULL;
}

static void start_workers(void)
{
	__atomic_store_n(&stop, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&ready, 0, __ATOMIC_RELEASE);
	for (int i = 0; i < NW; i++) {
		memset(&W[i], 0, sizeof(W[i]));
		W[i].id = i;
		UKT_EQ(pthread_create(&W[i].th, NULL, worker_main, &W[i]), 0);
	}
	while (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) < NW)
		sched_yield();
}

static void stop_workers(unsigned long calls[NFN])
{
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	memset(calls, 0, NFN * sizeof(calls[0]));
	for (int i = 0; i < NW; i++) {
		UKT_EQ(pthread_join(W[i].th, NULL), 0);
		for (int k = 0; k < NFN; k++)
			calls[k] += W[i].calls[k];
	}
}

/*
 * After each change of state the workers go through the functions in that
 * state before the next change: however fast the flips (or slow the
 * workers), they interleave.  Every 16th time each worker must have run
 * (none is stuck or starved); otherwise any of them will do.
 */
static unsigned long settles;

static void relax(unsigned *spins)
{
	/* spin a little (the workers are microseconds away), then give the
	 * core up (one may be waiting for it) */
	if (++*spins < 2000)
		__builtin_ia32_pause();
	else
		sched_yield();
}

static void let_workers_run(void)
{
	unsigned long snap[NW], sum0 = 0, sum;
	unsigned spins = 0;
	if (STOPPED())
		return;
	for (int i = 0; i < NW; i++)
		sum0 += snap[i] = __atomic_load_n(&W[i].progress, __ATOMIC_ACQUIRE);
	if (settles++ % 16 == 0) {
		for (int i = 0; i < NW; i++)
			while (__atomic_load_n(&W[i].progress, __ATOMIC_ACQUIRE) < snap[i] + 2)
				relax(&spins);
		return;
	}
	for (;;) {
		sum = 0;
		for (int i = 0; i < NW; i++)
			sum += __atomic_load_n(&W[i].progress, __ATOMIC_ACQUIRE);
		if (sum >= sum0 + 2 * NW)
			break;
		relax(&spins);
	}
}

/* ---- the program's own signals ---------------------------------------------------- */

static void prof_handler(int sig)
{
	(void)sig;
	int e = errno;
	call_all_from_handler();
	__atomic_fetch_add(&sig_prof, 1, __ATOMIC_RELAXED);
	errno = e;
}

static void usr1_handler(int sig)
{
	(void)sig;
	int e = errno;
	call_all_from_handler();
	__atomic_fetch_add(&sig_usr1, 1, __ATOMIC_RELAXED);
	errno = e;
}

static int sender_stop;
static unsigned long usr1_sent;

static void *sender_main(void *arg)
{
	(void)arg;
	pid_t pid = getpid();
	while (!__atomic_load_n(&sender_stop, __ATOMIC_ACQUIRE)) {
		for (int i = 0; i < NW; i++) {
			if (syscall(SYS_tgkill, pid, W[i].tid, SIGUSR1) == 0)
				usr1_sent++;
			/* paced: a storm would only starve the workers */
			double until = ukt_now() + 50e-6;
			while (ukt_now() < until)
				;
		}
	}
	return NULL;
}

static timer_t timer;
static pthread_t sender;

static void signals_start(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = prof_handler;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	UKT_EQ(sigaction(SIGPROF, &sa, NULL), 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = usr1_handler;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	UKT_EQ(sigaction(SIGUSR1, &sa, NULL), 0);

	struct sigevent sev;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_SIGNAL;
	sev.sigev_signo = SIGPROF;
	UKT_EQ(timer_create(CLOCK_MONOTONIC, &sev, &timer), 0);
	struct itimerspec its = { { 0, 300000 }, { 0, 300000 } };	/* every 300 us */
	UKT_EQ(timer_settime(timer, 0, &its, NULL), 0);
	__atomic_store_n(&sender_stop, 0, __ATOMIC_RELEASE);
	UKT_EQ(pthread_create(&sender, NULL, sender_main, NULL), 0);
}

static void signals_stop(void)
{
	UKT_EQ(timer_delete(timer), 0);
	__atomic_store_n(&sender_stop, 1, __ATOMIC_RELEASE);
	UKT_EQ(pthread_join(sender, NULL), 0);
	usleep(20 * 1000);	/* let what was sent land before the workers stop */
}

static void signals_reset(void)
{
	/* discard anything still pending, then the defaults, then unblock */
	signal(SIGPROF, SIG_IGN);
	signal(SIGUSR1, SIG_IGN);
	signal(SIGPROF, SIG_DFL);
	signal(SIGUSR1, SIG_DFL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGPROF);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

/* ---- when it crashes: where, and what the controller was doing -------------------- */

static const char *volatile phase = "setup";
static volatile long phase_it = -1;
#define AT(what) (phase = (what), phase_it = it)

static void crash_report(int sig, siginfo_t *si, void *ctx)
{
	unsigned long ip = ((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP];
	char buf[512];
	Dl_info di;
	int n = snprintf(buf, sizeof(buf), "  signal %d (%s) at ip %#lx", sig, strsignal(sig), ip);
	if (dladdr((void *)ip, &di) && di.dli_sname)
		n += snprintf(buf + n, sizeof(buf) - n, " (%s+%#lx)", di.dli_sname,
			      ip - (unsigned long)di.dli_saddr);
	n += snprintf(buf + n, sizeof(buf) - n, ", si_addr %p; the controller: flip %ld, %s\n",
		      si->si_addr, phase_it, phase);
	(void)!write(2, buf, (size_t)n);
	/* die of it now: the faulting bytes may be fine again by the time
	 * the instruction would be retried */
	signal(sig, SIG_DFL);
	raise(sig);		/* SA_NODEFER: delivered at once */
	_exit(128 + sig);
}

/* before the first registration, so that ukprobes chains to it */
static void install_crash_report(void)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE };
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = crash_report;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	for (unsigned i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		UKT_EQ(sigaction(sigs[i], &sa, NULL), 0);
}

/* ---- the flips -------------------------------------------------------------------- */

enum method { M_KNOB, M_POST, M_INNER, M_DISABLE, M_REREG, M_MIXED };
static const char *const method_name[] = { "knob", "post_handler probe", "inner probe",
					    "disable/enable", "register/unregister", "mixed" };

static void check_all(bool want_opt, const char *when, long it)
{
	for (int k = 0; k < NFN; k++)
		if (exact[k])
			note_state(&P[k], want_opt, when, it);
	let_workers_run();
}

static void flip_knob(long it)
{
	if (it % 4 == 1) {
		/* requests that cancel each other before the optimizer runs */
		AT("knob 0-1-0-1");
		UKT_EQ(kprobes_set_optimization(0), 0);
		UKT_EQ(kprobes_set_optimization(1), 0);
		UKT_EQ(kprobes_set_optimization(0), 0);
		UKT_EQ(kprobes_set_optimization(1), 0);
		AT("knob 0-1-0-1, waiting");
		wait_for_kprobe_optimizer();
		AT("knob 0-1-0-1, waited");
		check_all(true, "knob 0-1-0-1, wait", it);
		return;
	}
	AT("knob off");
	UKT_EQ(kprobes_set_optimization(0), 0);
	AT("knob off, waiting");
	wait_for_kprobe_optimizer();
	AT("knob off, waited");
	check_all(false, "knob off, wait", it);
	AT("knob on");
	UKT_EQ(kprobes_set_optimization(1), 0);
	AT("knob on, waiting");
	wait_for_kprobe_optimizer();
	AT("knob on, waited");
	check_all(true, "knob on, wait", it);
}

/* a post_handler probe at each site (at), or a probe inside each region
 * (!at): with a post_handler every other two iterations, which blocks the
 * jump; without, it joins the jump's run (the jump is taken out and put
 * back with the run's segments, and again without) */
static void flip_blockers(long it, bool at)
{
	struct tprobe *t[NFN];
	bool post = at || (it & 4);
	for (int k = 0; k < NFN; k++)
		t[k] = t_new(k, at ? site(k) : inner(k), post);
	AT(at ? "registering post_handler probes" : "registering inner probes");
	t_register(t, NFN, it & 1);
	if (it % 4 == 1) {
		/* gone again before the optimizer ran */
		AT("unregistering them at once");
		t_unregister(t, NFN, it & 2);
		AT("unregistered them at once, waiting");
		wait_for_kprobe_optimizer();
		AT("unregistered them at once, waited");
		check_all(true, "blocker registered and unregistered, wait", it);
		return;
	}
	AT("registered them, waiting");
	wait_for_kprobe_optimizer();
	AT("registered them, waited");
	check_all(!post, at ? "post_handler probe registered, wait" :
		  post ? "inner post_handler probe registered, wait" :
		  "inner probe registered (a run), wait", it);
	AT("unregistering them");
	t_unregister(t, NFN, it & 2);
	AT("unregistered them, waiting");
	wait_for_kprobe_optimizer();
	AT("unregistered them, waited");
	check_all(true, "blocker unregistered, wait", it);
}

static void flip_disable(long it)
{
	AT("disabling");
	UKT_EQ(disable_kprobe(&P[1]), 0);
	AT("disabled, waiting");
	wait_for_kprobe_optimizer();
	AT("disabled, waited");
	note_state(&P[1], false, "disabled, wait", it);
	check_all(true, "another probe disabled, wait", it);
	AT("enabling");
	UKT_EQ(enable_kprobe(&P[1]), 0);
	AT("enabled, waiting");
	wait_for_kprobe_optimizer();
	AT("enabled, waited");
	note_state(&P[1], true, "enabled, wait", it);
	let_workers_run();
}

static void flip_rereg(long it)
{
	struct tprobe *t = t_new(1, site(1), false);
	AT("registering a fresh probe");
	t_register(&t, 1, false);
	if (it % 4 != 1) {	/* else: unregistered while still queued */
		AT("registered a fresh probe, waiting");
		wait_for_kprobe_optimizer();
		AT("registered a fresh probe, waited");
		note_state(&t->kp, true, "fresh probe, wait", it);
		let_workers_run();
	}
	AT("unregistering the fresh probe");
	t_unregister(&t, 1, false);
	AT("unregistered the fresh probe");
	check_all(true, "other probe unregistered", it);
}

static void run(enum method m, bool signals, double seconds, long max_iter)
{
	unsigned long calls[NFN];

	long it = -1;
	setenv("UKPROBES_QUIET", "1", 1);
	install_crash_report();
	if (signals) {
		/* only the workers take them (they unblock both); blocked before
		 * the first registration, so that no thread the engine starts
		 * inherits them unblocked */
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGPROF);
		sigaddset(&set, SIGUSR1);
		pthread_sigmask(SIG_BLOCK, &set, NULL);
	}
	AT("registering the probes that stay");
	percall = !signals;
	for (int k = 0; k < NFN; k++) {
		exact[k] = !(k == 1 && (m == M_DISABLE || m == M_REREG));
		memset(&P[k], 0, sizeof(P[k]));
		P[k].addr = (kprobe_opcode_t *)site(k);
		P[k].pre_handler = p_pre;
		if (exact[k])
			UKT_EQ(register_kprobe(&P[k]), 0);
	}
	if (m == M_DISABLE)
		UKT_EQ(register_kprobe(&P[1]), 0);
	AT("registered the probes that stay, waiting");
	wait_for_kprobe_optimizer();
	check_all(true, "registered, wait", -1);

	start_workers();
	if (signals)
		signals_start();

	/* at least MIN_FLIPS, however long they take (the case's timeout
	 * bounds that); then until the deadline or max_iter */
	it = 0;
	double end = ukt_now() + seconds;
	for (; it < max_iter && (it < MIN_FLIPS || ukt_now() < end); it++) {
		enum method mm = m == M_MIXED ? (enum method)(it % 3) : m;
		switch (mm) {
		case M_KNOB: flip_knob(it); break;
		case M_POST: flip_blockers(it, true); break;
		case M_INNER: flip_blockers(it, false); break;
		case M_DISABLE: flip_disable(it); break;
		case M_REREG: flip_rereg(it); break;
		case M_MIXED: break;
		}
	}

	AT("stopping the workers");
	if (signals)
		signals_stop();
	stop_workers(calls);
	if (signals)
		signals_reset();
	/* no handler can run any more: what they did is final */
	for (int k = 0; k < NFN; k++)
		calls[k] += __atomic_load_n(&sig_calls[k], __ATOMIC_RELAXED);

	/* quiet again: exact, optimized, every call */
	AT("quiet calls");
	wait_for_kprobe_optimizer();
	check_all(true, "after the run, wait", it);
	unsigned long h0[NFN];
	for (int k = 0; k < NFN; k++)
		h0[k] = __atomic_load_n(&p_hits[k], __ATOMIC_RELAXED);
	for (unsigned long i = 0; i < 1000; i++) {
		UKT_EQ(s_inc3(i), i + 3);
		UKT_EQ(s_mix(i, 1), ref_mix(i, 1));
		UKT_EQ(s_sum(arr, i % 8), ref_sum(arr, i % 8));
	}
	unsigned long quiet[NFN] = { 1000, 1000, 0 };
	for (unsigned long i = 0; i < 1000; i++)
		quiet[2] += i % 8;

	printf("  %s%s: %ld flips, %lu/%lu/%lu calls (%lu/%lu/%lu hits), %lu state checks",
	       method_name[m], signals ? " + signals" : "", it, calls[0], calls[1], calls[2],
	       p_hits[0], p_hits[1], p_hits[2], opt_checks);
	if (signals)
		printf(", %lu SIGPROF, %lu SIGUSR1 handled (%lu sent), nmissed %lu/%lu/%lu",
		       sig_prof, sig_usr1, usr1_sent, P[0].nmissed, P[1].nmissed, P[2].nmissed);
	printf("\n");

	expect_no_errors();
	for (int k = 0; k < NFN; k++) {
		if (!exact[k]) {
			if (p_hits[k] + t_pre_total[k] > calls[k] + quiet[k])
				UKT_FAIL("%s: %lu + %lu hits for %lu calls", fname[k], p_hits[k],
					 t_pre_total[k], calls[k] + quiet[k]);
			continue;
		}
		if (p_hits[k] - h0[k] != quiet[k])
			UKT_FAIL("%s: %lu hits for %lu quiet calls", fname[k], p_hits[k] - h0[k],
				 quiet[k]);
		if (h0[k] + P[k].nmissed != calls[k])
			UKT_FAIL("%s: %lu hits + %lu nmissed for %lu calls", fname[k], h0[k],
				 P[k].nmissed, calls[k]);
		if (!signals)
			UKT_EQ(P[k].nmissed, 0);
		if (t_pre_total[k] > calls[k] + quiet[k])
			UKT_FAIL("%s: transient probes counted %lu hits for %lu calls", fname[k],
				 t_pre_total[k], calls[k] + quiet[k]);
	}
	if (signals) {
		UKT_ASSERT(sig_prof > 0);
		UKT_ASSERT(sig_usr1 > 0);
	}
	UKT_ASSERT(calls[0] >= (unsigned long)it);	/* interleaved (let_workers_run) */
	expect_states_right();
	for (int k = 0; k < NFN; k++)
		unregister_kprobe(&P[k]);
	for (unsigned long i = 0; i < 10; i++)
		UKT_EQ(s_inc3(i), i + 3);
}

UKT_CASE_T(stress_knob_flips, 60) { run(M_KNOB, false, 3.0, 5000); }
UKT_CASE_T(stress_post_handler_probe_flips, 60) { run(M_POST, false, 3.0, 5000); }
UKT_CASE_T(stress_inner_probe_flips, 60) { run(M_INNER, false, 3.0, 5000); }
UKT_CASE_T(stress_disable_enable_flips, 60) { run(M_DISABLE, false, 3.0, 5000); }
UKT_CASE_T(stress_register_optimize_unregister, 60) { run(M_REREG, false, 3.0, 5000); }
UKT_CASE_T(stress_flips_with_program_signals, 60) { run(M_MIXED, true, 4.0, 5000); }

/* ---- lean and full trampolines switching under running threads ------------------- */

/*
 * One probe whose handler keeps to the general registers stays on
 * v_live+off, where %xmm0-%xmm7 hold values computed before the probe and
 * summed after it; its site runs the lean trampoline (no vector state
 * saved).  The controller registers and unregisters, 2000 times, a second
 * pre-only probe at the same address whose handler overwrites xmm0-15:
 * the site switches to a trampoline that saves the vector registers and
 * back, while the workers run through it.  A worker in the lean
 * trampoline that meets the new list must save everything first.
 * Exactly: every result right, and the staying probe counts every call.
 */
unsigned long v_live(unsigned long x);	/* 40 * x + 28, through xmm0-7 */
#define v_live_probe ukt_label("v_live_probe")
__asm__(
	".text\n.p2align 4\n.globl v_live\n.type v_live,@function\n"
	"v_live: movq %rdi,%xmm0\n lea 1(%rdi),%rax\n movq %rax,%xmm1\n"
	" lea 2(%rdi),%rax\n movq %rax,%xmm2\n lea 3(%rdi),%rax\n movq %rax,%xmm3\n"
	" lea 4(%rdi),%rax\n movq %rax,%xmm4\n lea 5(%rdi),%rax\n movq %rax,%xmm5\n"
	" lea 6(%rdi),%rax\n movq %rax,%xmm6\n lea 7(%rdi),%rax\n movq %rax,%xmm7\n"
	".globl v_live_probe\nv_live_probe:\n"
	" lea 0x1000(%rdi),%rax\n"	/* probed: 7 bytes, the whole region */
	" paddq %xmm1,%xmm0\n paddq %xmm3,%xmm2\n paddq %xmm5,%xmm4\n paddq %xmm7,%xmm6\n"
	" paddq %xmm2,%xmm0\n paddq %xmm6,%xmm4\n paddq %xmm4,%xmm0\n"
	" movq %xmm0,%rax\n imul $4,%rax,%rax\n sub %rdi,%rax\n sub %rdi,%rax\n"
	" sub %rdi,%rax\n sub %rdi,%rax\n lea 0(%rax,%rdi,8),%rax\n"
	" lea 0(%rax,%rdi,4),%rax\n sub $84,%rax\n ret\n"
	".size v_live,.-v_live\n");

static unsigned long v_ref(unsigned long x) { return 40 * x + 28; }

static unsigned long lean_hits, dirty_hits;
static _Atomic int v_stop;
static unsigned long v_calls[3], v_wrong;

static int lean_count_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	__atomic_fetch_add(&lean_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

static int vec_dirty_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	__asm__ volatile("pcmpeqd %%xmm0,%%xmm0\n pcmpeqd %%xmm1,%%xmm1\n pcmpeqd %%xmm2,%%xmm2\n"
			 "pcmpeqd %%xmm3,%%xmm3\n pcmpeqd %%xmm4,%%xmm4\n pcmpeqd %%xmm5,%%xmm5\n"
			 "pcmpeqd %%xmm6,%%xmm6\n pcmpeqd %%xmm7,%%xmm7\n"
			 ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7");
	__atomic_fetch_add(&dirty_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

static void *v_worker(void *arg)
{
	int w = (int)(long)arg;
	uint64_t seed = 0x9e3779b97f4a7c15ULL * (unsigned long)(w + 1);
	unsigned long (*volatile fn)(unsigned long) = v_live, n = 0;
	while (!atomic_load(&v_stop)) {
		unsigned long x = ukt_xorshift(&seed) >> 8;
		if (fn(x) != v_ref(x))
			__atomic_fetch_add(&v_wrong, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&v_calls[w], ++n, __ATOMIC_RELAXED);
	}
	return NULL;
}

/*
 * Three workers (worker(0..2), each counting its calls in calls[w]) run
 * while a probe like tmpl is registered at its address and unregistered
 * again, up to 2000 times in 5 s, the workers getting through with it
 * each time; then *stop and the workers are joined.  The times it came
 * and went; *total: the workers' calls.
 */
static long second_probe_comes_and_goes(void *(*worker)(void *), unsigned long calls[3],
					_Atomic int *stop, const struct kprobe *tmpl,
					unsigned long *total)
{
	pthread_t th[3];
	for (long w = 0; w < 3; w++)
		UKT_EQ(pthread_create(&th[w], NULL, worker, (void *)w), 0);
	double deadline = ukt_now() + 5.0;
	long it;
	for (it = 0; it < 2000 && ukt_now() < deadline; it++) {
		struct kprobe second = *tmpl;
		UKT_EQ(register_kprobe(&second), 0);
		if (it % 8 == 0)
			wait_for_kprobe_optimizer();
		unsigned long c0 = __atomic_load_n(&calls[it % 3], __ATOMIC_RELAXED);
		while (__atomic_load_n(&calls[it % 3], __ATOMIC_RELAXED) == c0 && ukt_now() < deadline)
			sched_yield();	/* let the workers through with it */
		unregister_kprobe(&second);
		if (it % 8 == 4)
			wait_for_kprobe_optimizer();
	}
	atomic_store(stop, 1);
	for (int w = 0; w < 3; w++)
		pthread_join(th[w], NULL);
	*total = calls[0] + calls[1] + calls[2];
	wait_for_kprobe_optimizer();
	return it;
}

UKT_CASE_T(stress_lean_and_vector_handlers_switch, 60)
{
	for (unsigned long x = 0; x < 100; x++)
		UKT_EQ(v_live(x), v_ref(x));
	struct kprobe keep = { .addr = (void *)v_live_probe, .pre_handler = lean_count_pre };
	UKT_EQ(register_kprobe(&keep), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(keep.flags & KPROBE_FLAG_OPTIMIZED);

	const struct kprobe dirty = { .addr = (void *)v_live_probe, .pre_handler = vec_dirty_pre };
	unsigned long calls;
	long it = second_probe_comes_and_goes(v_worker, v_calls, &v_stop, &dirty, &calls);
	printf("  %ld switches, %lu calls, %lu lean hits, %lu vector-handler hits\n", it, calls,
	       lean_hits, dirty_hits);
	UKT_EQ(v_wrong, 0);
	UKT_EQ(lean_hits, calls);
	UKT_EQ(keep.nmissed, 0);
	UKT_ASSERT(dirty_hits > 0);
	UKT_ASSERT(keep.flags & KPROBE_FLAG_OPTIMIZED);
	unregister_kprobe(&keep);
	UKT_EQ(v_live(5), v_ref(5));
}

/* ---- the leaf trampoline and errno, switching under running threads --------------- */

/*
 * One probe with a leaf pre_handler (no call: it cannot change errno)
 * stays on v_live+off: its site runs ukp_opt_tramp_lean_leaf, which
 * keeps no errno.  The controller registers and unregisters, 2000 times,
 * a second probe there whose pre_handler writes errno: the site's list
 * is then two probes (the C dispatch, which keeps errno), and back.  Both
 * handlers fault for one input in 64 (their fault_handler takes it): the
 * fault path must find errno for the leaf trampoline's hits.  Workers set
 * errno to a value of their own before every call and check it after.
 * Exactly: every result and every errno right, and the staying probe
 * counts every call.
 */
static volatile long *volatile e_bad = (volatile long *)24;
static unsigned long e_hits, e_faults, e_writer_hits;
static _Atomic int e_stop;
static unsigned long e_calls[3], e_wrong, e_errno_wrong;

static int e_leaf_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	__atomic_fetch_add(&e_hits, 1, __ATOMIC_RELAXED);
	if ((r->di & 63) == 1)
		return (int)*e_bad;
	return 0;
}

static int e_writer_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	errno = 4242;
	__atomic_fetch_add(&e_writer_hits, 1, __ATOMIC_RELAXED);
	if ((r->di & 63) == 2)
		return (int)*e_bad;
	return 0;
}

static int e_take(struct kprobe *p, struct pt_regs *r, int trapnr)
{
	(void)p; (void)r; (void)trapnr;
	__atomic_fetch_add(&e_faults, 1, __ATOMIC_RELAXED);
	return 1;
}

static void *e_worker(void *arg)
{
	int w = (int)(long)arg;
	uint64_t seed = 0x2545f4914f6cdd1dULL * (unsigned long)(w + 1);
	unsigned long (*volatile fn)(unsigned long) = v_live, n = 0;
	while (!atomic_load(&e_stop)) {
		unsigned long x = ukt_xorshift(&seed) >> 8;
		int mine = (int)(w * 1000000 + (n & 0xfffff) + 1);
		errno = mine;
		if (fn(x) != v_ref(x))
			__atomic_fetch_add(&e_wrong, 1, __ATOMIC_RELAXED);
		if (errno != mine)
			__atomic_fetch_add(&e_errno_wrong, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&e_calls[w], ++n, __ATOMIC_RELAXED);
	}
	return NULL;
}

UKT_CASE_T(stress_leaf_and_errno_handlers_switch, 60)
{
	errno = 0;	/* binds __errno_location's PLT entry: a lazy one is not lean */
	struct kprobe keep = { .addr = (void *)v_live_probe, .pre_handler = e_leaf_pre,
			       .fault_handler = e_take };
	UKT_EQ(register_kprobe(&keep), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(keep.flags & KPROBE_FLAG_OPTIMIZED);

	const struct kprobe writer = { .addr = (void *)v_live_probe, .pre_handler = e_writer_pre,
				       .fault_handler = e_take };
	unsigned long calls;
	long it = second_probe_comes_and_goes(e_worker, e_calls, &e_stop, &writer, &calls);
	printf("  %ld switches, %lu calls, %lu leaf hits, %lu errno-writer hits, %lu faults taken\n",
	       it, calls, e_hits, e_writer_hits, e_faults);
	UKT_EQ(e_wrong, 0);
	UKT_EQ(e_errno_wrong, 0);
	UKT_EQ(e_hits, calls);
	UKT_EQ(keep.nmissed, 0);
	UKT_ASSERT(e_faults > 0);
	UKT_ASSERT(e_writer_hits > 0);
	UKT_ASSERT(keep.flags & KPROBE_FLAG_OPTIMIZED);
	unregister_kprobe(&keep);
	UKT_EQ(v_live(5), v_ref(5));
}
