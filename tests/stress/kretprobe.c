/* SPDX-License-Identifier: MIT */
/*
 * stress-kretprobe: return probes under threads.  Workers call probed
 * functions in a loop while the main thread registers and unregisters
 * kretprobes on them, disables and enables them, and flips jump
 * optimisation (the entries are optimisable).  Bounded in time (a few
 * seconds each); the invariants hold exactly however threads interleave:
 *
 *   - every call returns the right value (checked against a reference
 *     computed without the probed functions), and every return handler
 *     sees the return value of its own call (the entry_handler keeps the
 *     argument in the instance's data) on the calling thread;
 *   - a kretprobe that stays registered and enabled throughout counts
 *     exactly the calls: entries == returns == calls, nmissed 0;
 *   - a kretprobe that comes and goes: returns <= entries, and at most one
 *     call per worker loses its return handler (the ones in flight when it
 *     went); no handler of it after unregister_kretprobe() returned (its
 *     handlers are then swapped for ones that count errors; never freed);
 *     maxactive is never short (at most one call per worker in flight);
 *   - registration never fails: return stubs are recycled (20 kretprobes
 *     of 1024 instances in turn: more than there are stubs for if the
 *     ones of unregistered kretprobes did not come back);
 *   - a return handler (or entry_handler) that calls another kretprobed
 *     function: that call runs unprobed and is counted in the inner
 *     probe's kp.nmissed, exactly once per outer call, results right.
 *
 * Cases (4 workers each):
 *   kret_churn_with_optimization_flips  register/unregister (single and
 *                         batch), disable/enable, kprobes_set_optimization
 *                         flips and waits; two stable kretprobes (with and
 *                         without entry_handler) count exactly
 *   kret_handlers_call_kretprobed_function  recursion guard, optimised and
 *                         not
 *   kret_maxactive_contention   maxactive 1 shared by 4 threads: every call
 *                         is a return or a miss, exactly
 *   kret_kept_instances_contention   maxactive 2 and 3 shared by 4
 *                         threads, which keep a free instance for their
 *                         next call and take the ones others keep: the
 *                         same exact counts, right results, and the
 *                         entry data of each return its own call's
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <ukprobes.h>
#include "ukt.h"

#define NOINL __attribute__((noinline, used))
#define NWORKERS 4
#define CHURN_SECONDS 3.0

#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

static pid_t gettid_(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* broken invariants, by kind */
enum {
	E_RESULT, E_RETVAL, E_TASK, E_ZOMBIE_ENTRY, E_ZOMBIE_RET, E_NOT_LIVE, E_RET_ADDR,
	E_INNER, NERR
};
static const char *const err_name[NERR] = {
	"wrong result of a call",
	"return handler: wrong return value for its call",
	"handler on another thread than the call",
	"entry_handler of an unregistered kretprobe ran",
	"return handler of an unregistered kretprobe ran",
	"entry_handler ran while its kretprobe was not registered",
	"return handler: regs->ip is not ri->ret_addr",
	"a handler's call of a kretprobed function returned a wrong value",
};
static unsigned long err_count[NERR];
#define ERR(k) __atomic_fetch_add(&err_count[k], 1, __ATOMIC_RELAXED)

static void expect_no_errors(void)
{
	ukt_expect_no_errors(err_name, err_count, NERR);
}

static int stop;
#define STOPPED() __atomic_load_n(&stop, __ATOMIC_ACQUIRE)

/* ---- the probed functions and their references ---------------------------------- */

#define NFUNC 4

NOINL unsigned long kf0(unsigned long x)
{
	unsigned long t = x * 0x9e3779b97f4a7c15UL;
	__asm__ volatile("" : "+r"(t));
	t ^= t >> 29;
	return t + 7;
}
static unsigned long ref0(unsigned long x)
{
	unsigned long t = x * 0x9e3779b97f4a7c15UL;
	t ^= t >> 29;
	return t + 7;
}

NOINL unsigned long kf1(unsigned long x)
{
	unsigned long t = (x ^ 0x5555) * 0xff51afd7ed558ccdUL;
	__asm__ volatile("" : "+r"(t));
	return t ^ (t >> 33);
}
static unsigned long ref1(unsigned long x)
{
	unsigned long t = (x ^ 0x5555) * 0xff51afd7ed558ccdUL;
	return t ^ (t >> 33);
}

NOINL unsigned long kf2(unsigned long x)
{
	unsigned long t = x + 0x1234567;
	__asm__ volatile("" : "+r"(t));
	for (int i = 0; i < (int)(x & 7); i++) {
		t = t * 6364136223846793005UL + 1442695040888963407UL;
		__asm__ volatile("" : "+r"(t));
	}
	return t;
}
static unsigned long ref2(unsigned long x)
{
	unsigned long t = x + 0x1234567;
	for (int i = 0; i < (int)(x & 7); i++)
		t = t * 6364136223846793005UL + 1442695040888963407UL;
	return t;
}

NOINL unsigned long kf3(unsigned long x)
{
	unsigned long t = x * 31 + 17;
	__asm__ volatile("" : "+r"(t));
	return t ^ (x >> 3);
}
static unsigned long ref3(unsigned long x)
{
	return (x * 31 + 17) ^ (x >> 3);
}

static unsigned long (*const funcs[NFUNC])(unsigned long) = { kf0, kf1, kf2, kf3 };
static unsigned long (*const refs[NFUNC])(unsigned long) = { ref0, ref1, ref2, ref3 };
static const char *const fnames[NFUNC] = { "kf0", "kf1", "kf2", "kf3" };

/* ---- workers -------------------------------------------------------------------------- */

struct worker {
	pthread_t th;
	int id;
	int nfunc;			/* calls funcs[0 .. nfunc-1] */
	unsigned long calls[NFUNC];
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t s = 0x9876543 + (uint64_t)w->id * 7919;
	unsigned long (*volatile fp[NFUNC])(unsigned long);
	for (int f = 0; f < NFUNC; f++)
		fp[f] = funcs[f];
	while (!STOPPED()) {
		for (int rep = 0; rep < 64; rep++) {
			unsigned long x = ukt_xorshift(&s);
			for (int f = 0; f < w->nfunc; f++) {
				if (fp[f](x + (unsigned long)f) != refs[f](x + (unsigned long)f))
					ERR(E_RESULT);
				w->calls[f]++;
			}
		}
	}
	return NULL;
}

static struct worker workers[NWORKERS];

static void start_workers(int nfunc)
{
	__atomic_store_n(&stop, 0, __ATOMIC_RELEASE);
	for (int i = 0; i < NWORKERS; i++) {
		memset(&workers[i], 0, sizeof(workers[i]));
		workers[i].id = i;
		workers[i].nfunc = nfunc;
		UKT_EQ(pthread_create(&workers[i].th, NULL, worker_main, &workers[i]), 0);
	}
}

static void stop_workers(unsigned long total[NFUNC])
{
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int f = 0; f < NFUNC; f++)
		total[f] = 0;
	for (int i = 0; i < NWORKERS; i++) {
		UKT_EQ(pthread_join(workers[i].th, NULL), 0);
		for (int f = 0; f < NFUNC; f++)
			total[f] += workers[i].calls[f];
	}
}

static void let_workers_run(void)
{
	unsigned long before = 0, after;
	for (int i = 0; i < NWORKERS; i++)
		before += __atomic_load_n(&workers[i].calls[0], __ATOMIC_RELAXED);
	double until = ukt_now() + 0.05;
	do {
		sched_yield();
		after = 0;
		for (int i = 0; i < NWORKERS; i++)
			after += __atomic_load_n(&workers[i].calls[0], __ATOMIC_RELAXED);
	} while (after < before + NWORKERS * 4 && ukt_now() < until);
}

/* ---- kretprobes that count -------------------------------------------------------- */

enum { LIVE = 1, DEAD = 2 };

struct call_data {
	unsigned long x;
	pid_t tid;
};

struct ckret {
	struct kretprobe rp;
	int func;
	int state;
	unsigned long entries, returns;
};

static int ck_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct ckret *c = container_of(ri->rp, struct ckret, rp);
	struct call_data *d = (struct call_data *)ri->data;
	if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) != LIVE)
		ERR(E_NOT_LIVE);
	d->x = regs->di;
	d->tid = gettid_();
	if (ri->task != d->tid)
		ERR(E_TASK);
	__atomic_fetch_add(&c->entries, 1, __ATOMIC_RELAXED);
	return 0;
}

static int ck_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct ckret *c = container_of(ri->rp, struct ckret, rp);
	struct call_data *d = (struct call_data *)ri->data;
	if (regs_return_value(regs) != refs[c->func](d->x))
		ERR(E_RETVAL);
	if (d->tid != gettid_() || ri->task != d->tid)
		ERR(E_TASK);
	if (regs->ip != (unsigned long)ri->ret_addr)
		ERR(E_RET_ADDR);
	__atomic_fetch_add(&c->returns, 1, __ATOMIC_RELAXED);
	return 0;
}

/* without entry_handler: the lean entry; counts returns only */
static int ck_ret_plain(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct ckret *c = container_of(ri->rp, struct ckret, rp);
	if (ri->task != gettid_())
		ERR(E_TASK);
	if (regs->ip != (unsigned long)ri->ret_addr)
		ERR(E_RET_ADDR);
	(void)regs;
	__atomic_fetch_add(&c->returns, 1, __ATOMIC_RELAXED);
	return 0;
}

static int zombie_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri; (void)regs;
	ERR(E_ZOMBIE_ENTRY);
	return 0;
}

static int zombie_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri; (void)regs;
	ERR(E_ZOMBIE_RET);
	return 0;
}

static struct ckret *ck_new(int func, bool with_entry)
{
	struct ckret *c = calloc(1, sizeof(*c));
	UKT_ASSERT(c);
	c->func = func;
	if ((func + 1) & 2)
		c->rp.kp.symbol_name = fnames[func];
	else
		c->rp.kp.addr = (kprobe_opcode_t *)funcs[func];
	c->rp.handler = with_entry ? ck_ret : ck_ret_plain;
	c->rp.entry_handler = with_entry ? ck_entry : NULL;
	c->rp.data_size = sizeof(struct call_data);
	c->rp.maxactive = 2 * NWORKERS;	/* at most NWORKERS calls in flight */
	return c;
}

/* after unregister: its handlers must never run again */
static void ck_poison(struct ckret *c)
{
	__atomic_store_n(&c->state, DEAD, __ATOMIC_RELEASE);
	__atomic_store_n(&c->rp.handler, zombie_ret, __ATOMIC_RELAXED);
	if (c->rp.entry_handler)
		__atomic_store_n(&c->rp.entry_handler, zombie_entry, __ATOMIC_RELAXED);
}

/* the invariants of one that came and went */
static void ck_check_gone(const struct ckret *c)
{
	if (c->rp.entry_handler) {
		if (c->returns > c->entries)
			UKT_FAIL("%s: %lu returns > %lu entries", fnames[c->func],
				 c->returns, c->entries);
		if (c->entries - c->returns > NWORKERS)
			UKT_FAIL("%s: %lu entries, %lu returns: more lost than calls in flight",
				 fnames[c->func], c->entries, c->returns);
	}
	if (c->rp.nmissed)
		UKT_FAIL("%s: nmissed %d with maxactive %d and %d workers", fnames[c->func],
			 c->rp.nmissed, c->rp.maxactive, NWORKERS);
}

/* ---- case 1: churn ---------------------------------------------------------------- */

#define NCHURN 3		/* kf0..kf2 churn; kf3 has the stable ones */
#define PER_FUNC 2

UKT_CASE_T(kret_churn_with_optimization_flips, 60)
{
	uint64_t seed = 0xabcdef12345ULL;
	struct ckret *live[NCHURN][PER_FUNC] = { { 0 } };
	struct ckret **gone = NULL;
	size_t ngone = 0, capgone = 0;
	unsigned long registrations = 0, batches = 0, flips = 0, disables = 0;

	/* the stable ones, optimised before the workers start */
	struct ckret *st_e = ck_new(3, true), *st_p = ck_new(3, false);
	st_e->state = st_p->state = LIVE;
	UKT_EQ(register_kretprobe(&st_e->rp), 0);
	UKT_EQ(register_kretprobe(&st_p->rp), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(ukt_probe_flags(&st_e->rp.kp) & KPROBE_FLAG_OPTIMIZED);
	UKT_ASSERT(ukt_probe_flags(&st_p->rp.kp) & KPROBE_FLAG_OPTIMIZED);
	/* and the churned functions' entries can be optimised too */
	for (int f = 0; f < NCHURN; f++) {
		struct ckret *c = ck_new(f, true);
		c->state = LIVE;
		UKT_EQ(register_kretprobe(&c->rp), 0);
		wait_for_kprobe_optimizer();
		if (!(ukt_probe_flags(&c->rp.kp) & KPROBE_FLAG_OPTIMIZED))
			UKT_FAIL("%s: entry not optimized", fnames[f]);
		UKT_EQ(funcs[f](5), refs[f](5));
		UKT_EQ(c->entries, 1);
		UKT_EQ(c->returns, 1);
		unregister_kretprobe(&c->rp);
		ck_poison(c);
	}

	start_workers(NFUNC);
	double end = ukt_now() + CHURN_SECONDS;
	int opt = 1;
	while (ukt_now() < end) {
		int f = (int)(ukt_xorshift(&seed) % NCHURN), j = (int)(ukt_xorshift(&seed) % PER_FUNC);
		unsigned op = (unsigned)(ukt_xorshift(&seed) % 16);
		struct ckret **slot = &live[f][j];
		if (!*slot) {
			*slot = ck_new(f, op & 1);
			if (op >= 12)
				(*slot)->rp.kp.flags = KPROBE_FLAG_DISABLED;
			__atomic_store_n(&(*slot)->state, LIVE, __ATOMIC_RELEASE);
			int r = register_kretprobe(&(*slot)->rp);
			if (r)
				UKT_FAIL("register_kretprobe(%s) #%lu = %d", fnames[f],
					 registrations + 1, r);
			registrations++;
		} else if (op < 5) {
			unregister_kretprobe(&(*slot)->rp);
			ck_poison(*slot);
			if (ngone == capgone) {
				capgone = capgone ? 2 * capgone : 1024;
				gone = realloc(gone, capgone * sizeof(*gone));
				UKT_ASSERT(gone);
			}
			gone[ngone++] = *slot;
			*slot = NULL;
		} else if (op < 7) {
			UKT_EQ(disable_kretprobe(&(*slot)->rp), 0);
			UKT_ASSERT(ukt_probe_flags(&(*slot)->rp.kp) & KPROBE_FLAG_DISABLED);
			disables++;
		} else if (op < 9) {
			UKT_EQ(enable_kretprobe(&(*slot)->rp), 0);
			UKT_ASSERT(!(ukt_probe_flags(&(*slot)->rp.kp) & KPROBE_FLAG_DISABLED));
		} else if (op < 11) {
			opt = !opt;
			UKT_EQ(kprobes_set_optimization(opt), 0);
			UKT_EQ(kprobes_get_optimization(), opt);
			if (op == 10)
				wait_for_kprobe_optimizer();
			flips++;
		} else if (op == 11) {
			/* every registered one in one batch out, a fresh batch in */
			struct kretprobe *v[NCHURN * PER_FUNC];
			struct ckret *cs[NCHURN * PER_FUNC];
			int n = 0;
			for (int a = 0; a < NCHURN; a++)
				for (int b = 0; b < PER_FUNC; b++)
					if (live[a][b]) {
						cs[n] = live[a][b];
						v[n++] = &live[a][b]->rp;
					}
			if (n) {
				unregister_kretprobes(v, n);
				for (int i = 0; i < n; i++) {
					ck_poison(cs[i]);
					if (ngone + 1 > capgone) {
						capgone = capgone ? 2 * capgone : 1024;
						gone = realloc(gone, capgone * sizeof(*gone));
						UKT_ASSERT(gone);
					}
					gone[ngone++] = cs[i];
				}
				memset(live, 0, sizeof(live));
			}
			n = 0;
			for (int a = 0; a < NCHURN; a++) {
				live[a][0] = ck_new(a, (a + (int)op) & 1);
				live[a][0]->state = LIVE;
				v[n++] = &live[a][0]->rp;
			}
			int r = register_kretprobes(v, n);
			if (r)
				UKT_FAIL("register_kretprobes #%lu = %d", batches + 1, r);
			registrations += (unsigned long)n;
			batches++;
		} else {
			let_workers_run();
		}
	}
	/* everything out */
	UKT_EQ(kprobes_set_optimization(1), 0);
	for (int f = 0; f < NCHURN; f++)
		for (int j = 0; j < PER_FUNC; j++)
			if (live[f][j]) {
				unregister_kretprobe(&live[f][j]->rp);
				ck_poison(live[f][j]);
				if (ngone == capgone) {
					capgone = capgone ? 2 * capgone : 1024;
					gone = realloc(gone, capgone * sizeof(*gone));
					UKT_ASSERT(gone);
				}
				gone[ngone++] = live[f][j];
			}
	/* return stubs come back: more instances, one kretprobe after the
	 * other, than there are stubs (15 * 1024), calls in flight at each
	 * unregister (the workers still call kf0) */
	for (int i = 0; i < 20; i++) {
		struct ckret *big = ck_new(0, true);
		big->rp.maxactive = 1024;
		big->state = LIVE;
		int r = register_kretprobe(&big->rp);
		if (r)
			UKT_FAIL("register_kretprobe with 1024 instances, #%d: %d", i + 1, r);
		let_workers_run();
		unregister_kretprobe(&big->rp);
		ck_poison(big);
		UKT_ASSERT(big->returns <= big->entries);
		free(big);	/* nothing of it runs any more: the caller may */
	}
	/* the stable ones got their jump back */
	wait_for_kprobe_optimizer();
	UKT_ASSERT(ukt_probe_flags(&st_e->rp.kp) & KPROBE_FLAG_OPTIMIZED);
	UKT_ASSERT(ukt_probe_flags(&st_p->rp.kp) & KPROBE_FLAG_OPTIMIZED);
	/* a little more with nothing churning, then stop */
	let_workers_run();
	unsigned long calls[NFUNC];
	stop_workers(calls);
	unregister_kretprobe(&st_e->rp);
	unregister_kretprobe(&st_p->rp);
	ck_poison(st_e);
	ck_poison(st_p);

	unsigned long entries = 0, returns = 0;
	for (size_t i = 0; i < ngone; i++) {
		ck_check_gone(gone[i]);
		if (gone[i]->rp.entry_handler) {
			entries += gone[i]->entries;
			returns += gone[i]->returns;
		}
	}
	printf("  %lu registrations (%lu batches), %lu knob flips, %lu disables; "
	       "churned: %lu entries, %lu returns; calls %lu %lu %lu %lu\n",
	       registrations, batches, flips, disables, entries, returns,
	       calls[0], calls[1], calls[2], calls[3]);
	expect_no_errors();
	UKT_EQ(st_e->entries, calls[3]);
	UKT_EQ(st_e->returns, calls[3]);
	UKT_EQ(st_p->returns, calls[3]);
	UKT_EQ(st_e->rp.nmissed, 0);
	UKT_EQ(st_p->rp.nmissed, 0);
	UKT_EQ(st_e->rp.kp.nmissed, 0);
	UKT_EQ(st_p->rp.kp.nmissed, 0);
	UKT_ASSERT(returns > 0);		/* the churned ones did fire */
	UKT_ASSERT(registrations > 10);
	/* after all that, one more works as new */
	struct ckret *c = ck_new(0, true);
	c->state = LIVE;
	UKT_EQ(register_kretprobe(&c->rp), 0);
	UKT_EQ(kf0(77), ref0(77));
	UKT_EQ(c->entries, 1);
	UKT_EQ(c->returns, 1);
	unregister_kretprobe(&c->rp);
	expect_no_errors();
}

/* ---- case 2: handlers that call kretprobed functions ---------------------------------- */

/* outer: kf0, its handlers call kf1; inner: kf1 */
static unsigned long outer_entries, outer_returns, inner_returns;

static int outer_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct call_data *d = (struct call_data *)ri->data;
	d->x = regs->di;
	unsigned long (*volatile in)(unsigned long) = kf1;
	if (in(d->x ^ 1) != ref1(d->x ^ 1))
		ERR(E_INNER);
	__atomic_fetch_add(&outer_entries, 1, __ATOMIC_RELAXED);
	return 0;
}

static int outer_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct call_data *d = (struct call_data *)ri->data;
	if (regs_return_value(regs) != ref0(d->x))
		ERR(E_RETVAL);
	unsigned long (*volatile in)(unsigned long) = kf1;
	if (in(d->x + 2) != ref1(d->x + 2))
		ERR(E_INNER);
	__atomic_fetch_add(&outer_returns, 1, __ATOMIC_RELAXED);
	return 0;
}

static int inner_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	__atomic_fetch_add(&inner_returns, 1, __ATOMIC_RELAXED);
	return 0;
}

static void recursion_round(int opt)
{
	struct kretprobe outer = { .kp.addr = (kprobe_opcode_t *)kf0, .handler = outer_ret,
				   .entry_handler = outer_entry,
				   .data_size = sizeof(struct call_data),
				   .maxactive = 2 * NWORKERS };
	struct kretprobe inner = { .kp.addr = (kprobe_opcode_t *)kf1, .handler = inner_ret,
				   .maxactive = 2 * NWORKERS };
	outer_entries = outer_returns = inner_returns = 0;
	UKT_EQ(kprobes_set_optimization(opt), 0);
	UKT_EQ(register_kretprobe(&inner), 0);
	UKT_EQ(register_kretprobe(&outer), 0);
	wait_for_kprobe_optimizer();
	UKT_EQ(!!(ukt_probe_flags(&outer.kp) & KPROBE_FLAG_OPTIMIZED), opt);
	UKT_EQ(!!(ukt_probe_flags(&inner.kp) & KPROBE_FLAG_OPTIMIZED), opt);

	start_workers(2);		/* kf0 and kf1 */
	double end = ukt_now() + CHURN_SECONDS / 3;
	while (ukt_now() < end)
		usleep(10000);
	unsigned long calls[NFUNC];
	stop_workers(calls);
	unregister_kretprobe(&outer);
	unregister_kretprobe(&inner);
	printf("  optimization %d: %lu outer calls, %lu inner calls, inner kp.nmissed %lu\n",
	       opt, calls[0], calls[1], inner.kp.nmissed);
	expect_no_errors();
	UKT_EQ(outer_entries, calls[0]);
	UKT_EQ(outer_returns, calls[0]);
	/* the handlers' calls of kf1 ran unprobed: two misses per kf0 call */
	UKT_EQ(inner_returns, calls[1]);
	UKT_EQ(inner.kp.nmissed, 2 * calls[0]);
	UKT_EQ(inner.nmissed, 0);
	UKT_EQ(outer.nmissed, 0);
	UKT_EQ(outer.kp.nmissed, 0);
	UKT_ASSERT(calls[0] > 100 && calls[1] > 100);
}

UKT_CASE_T(kret_handlers_call_kretprobed_function, 30)
{
	recursion_round(1);
	recursion_round(0);
	UKT_EQ(kprobes_set_optimization(1), 0);
}

/* ---- case 3: maxactive contention ------------------------------------------------- */

static unsigned long mc_entries, mc_returns;

static int mc_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct call_data *d = (struct call_data *)ri->data;
	d->x = regs->di;
	__atomic_fetch_add(&mc_entries, 1, __ATOMIC_RELAXED);
	return 0;
}

static int mc_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct call_data *d = (struct call_data *)ri->data;
	if (regs_return_value(regs) != ref2(d->x))
		ERR(E_RETVAL);
	__atomic_fetch_add(&mc_returns, 1, __ATOMIC_RELAXED);
	return 0;
}

static unsigned long kc_returns;

static int kc_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	__atomic_fetch_add(&kc_returns, 1, __ATOMIC_RELAXED);
	return 0;
}

/* A kretprobe on kf2 with maxactive max, optimised or not, with an entry
 * handler (its entry runs in C) or without (optimised: in the assembly),
 * while the workers call kf0..kf2 for the given time: every call is a
 * return or a miss, exactly, and every result right. */
static void contention_round(int opt, int max, int ent, double seconds)
{
	struct kretprobe rp = { .kp.addr = (kprobe_opcode_t *)kf2,
				.handler = ent ? mc_ret : kc_ret,
				.entry_handler = ent ? mc_entry : NULL,
				.data_size = sizeof(struct call_data), .maxactive = max };
	mc_entries = mc_returns = kc_returns = 0;
	UKT_EQ(kprobes_set_optimization(opt), 0);
	UKT_EQ(register_kretprobe(&rp), 0);
	wait_for_kprobe_optimizer();
	UKT_EQ(!!(ukt_probe_flags(&rp.kp) & KPROBE_FLAG_OPTIMIZED), opt);
	start_workers(3);	/* kf0, kf1, kf2 */
	double end = ukt_now() + seconds;
	while (ukt_now() < end)
		usleep(10000);
	unsigned long calls[NFUNC];
	stop_workers(calls);
	unregister_kretprobe(&rp);
	unsigned long rets = ent ? mc_returns : kc_returns;
	printf("  optimization %d, maxactive %d, entry handler %d: %lu calls, %lu returns, "
	       "%d missed\n", opt, max, ent, calls[2], rets, rp.nmissed);
	expect_no_errors();
	if (ent)
		UKT_EQ(mc_entries, mc_returns);
	UKT_EQ(rets + (unsigned long)rp.nmissed, calls[2]);
	UKT_EQ(rp.kp.nmissed, 0);
	UKT_ASSERT(rets > 0);
}

UKT_CASE_T(kret_maxactive_contention, 30)
{
	for (int opt = 1; opt >= 0; opt--)
		contention_round(opt, 1, 1, CHURN_SECONDS / 3);
	UKT_EQ(kprobes_set_optimization(1), 0);
}

UKT_CASE_T(kret_kept_instances_contention, 40)
{
	for (int opt = 1; opt >= 0; opt--)
		for (int max = 2; max <= 3; max++)
			for (int ent = 0; ent < 2; ent++)
				contention_round(opt, max, ent, CHURN_SECONDS / 8);
	UKT_EQ(kprobes_set_optimization(1), 0);
}
