/* SPDX-License-Identifier: MIT */
/*
 * stress-jprobe: jprobes under threads.  Workers call a function with
 * integer, stack and double arguments in a loop while the main thread
 * registers, unregisters, disables and enables jprobes (and a kretprobe
 * and a kprobe at the same address).  Bounded in time; exactly:
 *
 *   - every call returns the right value, whatever the entry function
 *     did to its copies of the arguments;
 *   - every entry sees the arguments of its own thread's call;
 *   - a jprobe that stays registered counts exactly the calls of its
 *     function; one that comes and goes never more;
 *   - an optimised kprobe's site that a jprobe joins and leaves again and
 *     again (the jump goes and comes back while threads run through it):
 *     the double arguments still reach the function.
 *
 * Cases (4 workers each):
 *   jprobe_churn                  jprobes (two entry functions in turn),
 *                                 a kretprobe and a kprobe on the same
 *                                 function come and go; a stable jprobe on
 *                                 another function counts exactly
 *   jprobe_joins_optimized_site   register_jprobe/unregister_jprobe/
 *                                 wait_for_kprobe_optimizer on the site of
 *                                 an optimised kprobe
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

enum { E_RESULT, E_ARGS, E_RETVAL, NERR };
static const char *const err_name[NERR] = {
	"wrong result of a call",
	"an entry saw arguments that are not its thread's call's",
	"a return handler saw a wrong return value",
};
static unsigned long err_count[NERR];
#define ERR(k) __atomic_fetch_add(&err_count[k], 1, __ATOMIC_RELAXED)

static void expect_no_errors(void)
{
	ukt_expect_no_errors(err_name, err_count, NERR);
}

static int stop;
#define STOPPED() __atomic_load_n(&stop, __ATOMIC_ACQUIRE)

/* ---- the probed functions -------------------------------------------------------- */

#define SJ_EXPR(a, b, c, d, e, f, g, h, x, y)					\
	((a) + 3 * (b) + 5 * (c) + 7 * (d) + 11 * (e) + 13 * (f) + 17 * (g) +	\
	 19 * (h) + (long)((x) * 16.0) + (long)((y) * 1024.0))

NOINL long sj_f(long a, long b, long c, long d, long e, long f, long g, long h,
		double x, double y)
{
	__asm__ volatile("");
	return SJ_EXPR(a, b, c, d, e, f, g, h, x, y);
}

NOINL long sj_stable(long a, double x)
{
	long t = a * 7 + (long)(x * 4.0);
	__asm__ volatile("" : "+r"(t));
	return t;
}

/* several instructions at the entry: optimisable */
NOINL long sj_opt(double x, long a)
{
	long t = (long)(x * 8.0);
	__asm__ volatile("" : "+r"(t));
	return t * 3 + a;
}

static __thread long my_a;

static bool args_ok(long a, long b, long c, long d, long e, long f, long g, long h,
		    double x, double y)
{
	return a == my_a && b == a + 1 && c == a * 3 && d == ~a && e == a - 9 &&
	       f == a * 11 && g == -a && h == a + 100 && x == (double)a * 0.5 &&
	       y == (double)(a & 0xffff) / 1024.0;
}

static unsigned long entries_a, entries_b, stable_entries, kret_returns, kp_hits;

long sj_entry_a(long a, long b, long c, long d, long e, long f, long g, long h,
		double x, double y)
{
	if (!args_ok(a, b, c, d, e, f, g, h, x, y))
		ERR(E_ARGS);
	__atomic_fetch_add(&entries_a, 1, __ATOMIC_RELAXED);
	/* clobber: its stack arguments, the vector registers */
	volatile long *pg = &g, *ph = &h;
	*pg = 0;
	*ph = 0;
	char buf[96];
	snprintf(buf, sizeof(buf), "%f %f %e", x * 1.5, y * 2.5, (double)a / 3.0);
	__asm__ volatile("" :: "r"(buf) : "memory");
	jprobe_return();
	return 0;
}

long sj_entry_b(long a, long b, long c, long d, long e, long f, long g, long h,
		double x, double y)
{
	if (!args_ok(a, b, c, d, e, f, g, h, x, y))
		ERR(E_ARGS);
	__atomic_fetch_add(&entries_b, 1, __ATOMIC_RELAXED);
	__asm__ volatile("pcmpeqd %%xmm0, %%xmm0\n pcmpeqd %%xmm1, %%xmm1" ::: "xmm0", "xmm1");
	jprobe_return();
	return 0;
}

long sj_stable_entry(long a, double x)
{
	if (a != my_a || x != (double)a * 0.5)
		ERR(E_ARGS);
	__atomic_fetch_add(&stable_entries, 1, __ATOMIC_RELAXED);
	char buf[32];
	snprintf(buf, sizeof(buf), "%f", x * 3.0);
	__asm__ volatile("" :: "r"(buf) : "memory");
	jprobe_return();
	return 0;
}

static int sj_kp_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	__atomic_fetch_add(&kp_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

static int sj_kret_entry(struct kretprobe_instance *ri, struct pt_regs *r)
{
	*(long *)ri->data = (long)r->di;
	return 0;
}

static int sj_kret_ret(struct kretprobe_instance *ri, struct pt_regs *r)
{
	long a = *(long *)ri->data;
	double x = (double)a * 0.5, y = (double)(a & 0xffff) / 1024.0;
	if ((long)regs_return_value(r) !=
	    SJ_EXPR(a, a + 1, a * 3, ~a, a - 9, a * 11, -a, a + 100, x, y))
		ERR(E_RETVAL);
	__atomic_fetch_add(&kret_returns, 1, __ATOMIC_RELAXED);
	return 0;
}

/* ---- workers -------------------------------------------------------------------------- */

struct worker {
	pthread_t th;
	int id;
	int which;		/* 0: sj_f and sj_stable; 1: sj_opt */
	unsigned long calls, stable_calls;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t s = 0x2468ace + (uint64_t)w->id * 104729;
	long (*volatile f)(long, long, long, long, long, long, long, long, double, double) = sj_f;
	long (*volatile st)(long, double) = sj_stable;
	long (*volatile op)(double, long) = sj_opt;
	while (!STOPPED()) {
		for (int rep = 0; rep < 32; rep++) {
			long a = (long)(ukt_xorshift(&s) >> 20);
			double x = (double)a * 0.5, y = (double)(a & 0xffff) / 1024.0;
			my_a = a;
			if (w->which == 0) {
				long r = f(a, a + 1, a * 3, ~a, a - 9, a * 11, -a, a + 100, x, y);
				if (r != SJ_EXPR(a, a + 1, a * 3, ~a, a - 9, a * 11, -a, a + 100, x, y))
					ERR(E_RESULT);
				w->calls++;
				if (st(a, x) != a * 7 + (long)(x * 4.0))
					ERR(E_RESULT);
				w->stable_calls++;
			} else {
				if (op(x, a) != (long)(x * 8.0) * 3 + a)
					ERR(E_RESULT);
				w->calls++;
			}
		}
	}
	return NULL;
}

static struct worker workers[NWORKERS];

static void start_workers(int which)
{
	__atomic_store_n(&stop, 0, __ATOMIC_RELEASE);
	for (int i = 0; i < NWORKERS; i++) {
		memset(&workers[i], 0, sizeof(workers[i]));
		workers[i].id = i;
		workers[i].which = which;
		UKT_EQ(pthread_create(&workers[i].th, NULL, worker_main, &workers[i]), 0);
	}
}

static void stop_workers(unsigned long *calls, unsigned long *stable_calls)
{
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	*calls = *stable_calls = 0;
	for (int i = 0; i < NWORKERS; i++) {
		UKT_EQ(pthread_join(workers[i].th, NULL), 0);
		*calls += workers[i].calls;
		*stable_calls += workers[i].stable_calls;
	}
}

/* ---- cases -------------------------------------------------------------------------- */

UKT_CASE_T(jprobe_churn, 60)
{
	uint64_t seed = 0x13579bdf;
	struct jprobe stable = { .kp.addr = (void *)sj_stable, .entry = (void *)sj_stable_entry };
	UKT_EQ(register_jprobe(&stable), 0);
	start_workers(0);

	struct jprobe *jp = NULL;
	struct kretprobe *rp = NULL;
	struct kprobe *kp = NULL;
	unsigned long regs = 0, ops = 0;
	double end = ukt_now() + CHURN_SECONDS;
	while (ukt_now() < end) {
		unsigned op = (unsigned)(ukt_xorshift(&seed) % 12);
		ops++;
		if (op < 4) {
			if (!jp) {
				jp = calloc(1, sizeof(*jp));
				UKT_ASSERT(jp);
				jp->kp.addr = (void *)sj_f;
				jp->entry = (void *)((regs & 1) ? sj_entry_b : sj_entry_a);
				UKT_EQ(register_jprobe(jp), 0);
				regs++;
			} else {
				unregister_jprobe(jp);
				free(jp);		/* the caller may free it now */
				jp = NULL;
			}
		} else if (op < 6) {
			if (jp) {
				UKT_EQ(disable_jprobe(jp), 0);
				usleep(100);
				UKT_EQ(enable_jprobe(jp), 0);
			}
		} else if (op < 8) {
			if (!rp) {
				rp = calloc(1, sizeof(*rp));
				UKT_ASSERT(rp);
				rp->kp.addr = (void *)sj_f;
				rp->entry_handler = sj_kret_entry;
				rp->handler = sj_kret_ret;
				rp->data_size = sizeof(long);
				UKT_EQ(register_kretprobe(rp), 0);
			} else {
				unregister_kretprobe(rp);
				free(rp);
				rp = NULL;
			}
		} else if (op < 10) {
			if (!kp) {
				kp = calloc(1, sizeof(*kp));
				UKT_ASSERT(kp);
				kp->addr = (void *)sj_f;
				kp->pre_handler = sj_kp_pre;
				UKT_EQ(register_kprobe(kp), 0);
			} else {
				unregister_kprobe(kp);
				free(kp);
				kp = NULL;
			}
		} else {
			usleep(1000);
		}
	}
	if (jp)
		unregister_jprobe(jp);
	if (rp)
		unregister_kretprobe(rp);
	if (kp)
		unregister_kprobe(kp);
	free(jp);
	free(rp);
	free(kp);
	unsigned long calls, stable_calls;
	stop_workers(&calls, &stable_calls);
	unregister_jprobe(&stable);
	printf("  %lu ops, %lu jprobe registrations; %lu calls: %lu + %lu entries, "
	       "%lu kretprobe returns, %lu kprobe hits\n", ops, regs, calls, entries_a,
	       entries_b, kret_returns, kp_hits);
	expect_no_errors();
	UKT_EQ(stable_entries, stable_calls);
	UKT_EQ(stable.kp.nmissed, 0);
	UKT_ASSERT(entries_a + entries_b <= calls);
	UKT_ASSERT(kret_returns <= calls && kp_hits <= calls);
	UKT_ASSERT(entries_a > 0 && entries_b > 0);
}

static int nop_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	return 0;
}

static unsigned long opt_entries;

long sj_opt_entry(double x, long a)
{
	(void)x; (void)a;
	__atomic_fetch_add(&opt_entries, 1, __ATOMIC_RELAXED);
	jprobe_return();
	return 0;
}

UKT_CASE_T(jprobe_joins_optimized_site, 60)
{
	struct kprobe kp = { .addr = (void *)sj_opt, .pre_handler = nop_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(kp.flags & KPROBE_FLAG_OPTIMIZED);
	start_workers(1);
	unsigned long cycles = 0;
	double end = ukt_now() + CHURN_SECONDS + 1.0;
	while (ukt_now() < end) {
		struct jprobe jp = { .kp.addr = (void *)sj_opt, .entry = (void *)sj_opt_entry };
		UKT_EQ(register_jprobe(&jp), 0);
		UKT_ASSERT(!(kp.flags & KPROBE_FLAG_OPTIMIZED));
		usleep(200);
		unregister_jprobe(&jp);
		wait_for_kprobe_optimizer();
		UKT_ASSERT(kp.flags & KPROBE_FLAG_OPTIMIZED);
		cycles++;
	}
	unsigned long calls, stable_calls;
	stop_workers(&calls, &stable_calls);
	unregister_kprobe(&kp);
	printf("  %lu cycles, %lu calls, %lu entries\n", cycles, calls, opt_entries);
	expect_no_errors();
	UKT_ASSERT(opt_entries > 0);
}
