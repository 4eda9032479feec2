/*
 * Threads against the registry: bounded in time, asserting invariants
 * that must hold exactly (results, hit counts, no handler after
 * unregister), never timings.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <ukprobes.h>
#include "ukt.h"

/* Targets: noinline, with work in the middle so mid-function probes sit
 * on real instructions. */
#define TARGET(name, k)							\
	__attribute__((noinline)) long name(long x)			\
	{								\
		long r = x;						\
		__asm__ volatile("" : "+r"(r));				\
		r = r * 3 + (k);					\
		__asm__ volatile("" : "+r"(r));				\
		return r ^ (x >> 2);					\
	}
TARGET(f_stable, 1)
TARGET(f_churn, 2)
TARGET(f_knob, 3)
static long expect(long x, long k) { return (x * 3 + k) ^ (x >> 2); }

static atomic_bool stop;
static atomic_long errors;

/* ---- probes that come and go while threads run through them ---------------- */

enum { ST_OFF, ST_LIVE, ST_DEAD };
#define NCHURN 4
static struct kprobe churn[NCHURN];
static _Atomic int churn_state[NCHURN];
static atomic_long churn_hits, stable_hits, stable_calls[8], churn_calls;

static int churn_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)r;
	int i = (int)(p - churn);
	if (atomic_load(&churn_state[i]) == ST_DEAD)
		errors++;	/* ran after unregister_kprobe() returned */
	churn_hits++;
	return 0;
}

static int stable_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	stable_hits++;
	return 0;
}

static void *hammer(void *arg)
{
	long id = (long)arg, n = 0;
	while (!atomic_load(&stop)) {
		long x = n * 7 + id;
		if (f_stable(x) != expect(x, 1) || f_churn(x) != expect(x, 2))
			errors++;
		n++;
		churn_calls++;
	}
	stable_calls[id] = n;
	return NULL;
}

static unsigned long mid_of(void *fn)
{
	/* an instruction boundary inside the function: found by trying */
	for (unsigned off = 1; off < 24; off++) {
		struct kprobe k = { .addr = (kprobe_opcode_t *)fn + off };
		if (register_kprobe(&k) == 0) {
			unregister_kprobe(&k);
			return (unsigned long)fn + off;
		}
	}
	return (unsigned long)fn;
}

UKT_CASE_T(churn_while_threads_hit, 60)
{
	enum { T = 3 };
	pthread_t th[T];
	setenv("UKPROBES_QUIET", "1", 1);
	struct kprobe stable = { .addr = (void *)f_stable, .pre_handler = stable_pre };
	unsigned long mid = mid_of((void *)f_churn);
	UKT_EQ(register_kprobe(&stable), 0);
	for (long i = 0; i < T; i++)
		UKT_EQ(pthread_create(&th[i], NULL, hammer, (void *)i), 0);

	long rounds = 0;
	double end = ukt_now() + 4;
	while (ukt_now() < end) {
		struct kprobe *v[NCHURN];
		for (int i = 0; i < NCHURN; i++) {
			memset(&churn[i], 0, sizeof(churn[i]));
			churn[i].addr = (kprobe_opcode_t *)(i & 1 ? mid : (unsigned long)f_churn);
			churn[i].pre_handler = churn_pre;
			v[i] = &churn[i];
			churn_state[i] = ST_LIVE;
		}
		if (rounds & 1) {
			UKT_EQ(register_kprobes(v, NCHURN), 0);
		} else {
			for (int i = 0; i < NCHURN; i++)
				UKT_EQ(register_kprobe(&churn[i]), 0);
		}
		UKT_EQ(disable_kprobe(&churn[rounds % NCHURN]), 0);
		UKT_EQ(enable_kprobe(&churn[rounds % NCHURN]), 0);
		if (rounds & 2) {
			unregister_kprobes(v, NCHURN);
			for (int i = 0; i < NCHURN; i++)
				churn_state[i] = ST_DEAD;
		} else {
			for (int i = 0; i < NCHURN; i++) {
				unregister_kprobe(&churn[i]);
				churn_state[i] = ST_DEAD;
			}
		}
		rounds++;
	}
	stop = true;
	long calls = 0;
	for (int i = 0; i < T; i++) {
		pthread_join(th[i], NULL);
		calls += stable_calls[i];
	}
	unregister_kprobe(&stable);
	UKT_EQ(errors, 0);
	UKT_EQ(stable_hits, calls);		/* never lost a hit */
	UKT_EQ(stable.nmissed, 0);
	UKT_ASSERT(churn_hits <= 2 * calls);	/* two probe points per call */
	UKT_ASSERT(rounds > 10 && calls > 100);
	fprintf(stderr, "  %ld registration rounds, %ld calls, %ld churn hits\n",
		rounds, calls, (long)churn_hits);
}

/* ---- the global knob flipping under load ------------------------------------ */

static atomic_long knob_hits, knob_calls;
static int knob_pre(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; knob_hits++; return 0; }

static void *knob_hammer(void *arg)
{
	long n = 0;
	(void)arg;
	while (!atomic_load(&stop)) {
		if (f_knob(n) != expect(n, 3))
			errors++;
		n++;
		knob_calls++;
	}
	return NULL;
}

UKT_CASE_T(knob_and_disable_flip_under_load, 60)
{
	enum { T = 3 };
	pthread_t th[T];
	struct kprobe kp = { .addr = (void *)f_knob, .pre_handler = knob_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	for (long i = 0; i < T; i++)
		UKT_EQ(pthread_create(&th[i], NULL, knob_hammer, (void *)i), 0);
	double end = ukt_now() + 3;
	long flips = 0;
	while (ukt_now() < end) {
		UKT_EQ(kprobes_set_enabled(0), 0);
		UKT_EQ(kprobes_set_enabled(1), 0);
		UKT_EQ(disable_kprobe(&kp), 0);
		UKT_EQ(kp.flags, KPROBE_FLAG_DISABLED);
		UKT_EQ(enable_kprobe(&kp), 0);
		UKT_EQ(kp.flags, 0);
		flips++;
	}
	stop = true;
	for (int i = 0; i < T; i++)
		pthread_join(th[i], NULL);
	UKT_EQ(errors, 0);
	UKT_ASSERT(knob_hits <= knob_calls);
	/* quiet now: exact again */
	long h0 = knob_hits;
	for (int i = 0; i < 1000; i++)
		UKT_EQ(f_knob(i), expect(i, 3));
	UKT_EQ(knob_hits, h0 + 1000);
	UKT_ASSERT(flips > 10);
	unregister_kprobe(&kp);
}

/* ---- pre and post on many threads at once ------------------------------------ */

static atomic_long pre_n, post_n;
static int pp_pre(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; pre_n++; return 0; }
static void pp_post(struct kprobe *p, struct pt_regs *r, unsigned long f) { (void)p; (void)r; (void)f; post_n++; }

static void *pp_thread(void *arg)
{
	(void)arg;
	for (long i = 0; i < 20000; i++)
		if (f_stable(i) != expect(i, 1))
			errors++;
	return NULL;
}

UKT_CASE_T(pre_and_post_on_four_threads_exact, 120)
{
	enum { T = 4 };
	pthread_t th[T];
	struct kprobe a = { .addr = (void *)f_stable, .pre_handler = pp_pre, .post_handler = pp_post };
	struct kprobe b = { .addr = (kprobe_opcode_t *)mid_of((void *)f_stable),
			    .pre_handler = pp_pre, .post_handler = pp_post };
	UKT_EQ(register_kprobe(&a), 0);
	UKT_EQ(register_kprobe(&b), 0);
	for (long i = 0; i < T; i++)
		UKT_EQ(pthread_create(&th[i], NULL, pp_thread, (void *)i), 0);
	for (int i = 0; i < T; i++)
		pthread_join(th[i], NULL);
	UKT_EQ(errors, 0);
	UKT_EQ(pre_n, 2L * T * 20000);
	UKT_EQ(post_n, 2L * T * 20000);
	UKT_EQ(a.nmissed + b.nmissed, 0);
	unregister_kprobe(&a);
	unregister_kprobe(&b);
}

/* ---- recursion on many threads --------------------------------------------- */

static atomic_long rec_outer;
static int rec_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	rec_outer++;
	if (f_churn(5) != expect(5, 2))	/* hits this probe: missed */
		errors++;
	return 0;
}

static void *rec_thread(void *arg)
{
	(void)arg;
	for (long i = 0; i < 5000; i++)
		if (f_churn(i) != expect(i, 2))
			errors++;
	return NULL;
}

UKT_CASE_T(recursion_counts_exactly_on_threads, 120)
{
	enum { T = 3 };
	pthread_t th[T];
	struct kprobe kp = { .addr = (void *)f_churn, .pre_handler = rec_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	for (long i = 0; i < T; i++)
		UKT_EQ(pthread_create(&th[i], NULL, rec_thread, (void *)i), 0);
	for (int i = 0; i < T; i++)
		pthread_join(th[i], NULL);
	UKT_EQ(errors, 0);
	UKT_EQ(rec_outer, T * 5000);
	UKT_EQ(kp.nmissed, T * 5000);
	unregister_kprobe(&kp);
}

/* ---- threads that come and go: blocks are recycled ----------------------------- */

static void *short_life(void *arg)
{
	(void)arg;
	for (long i = 0; i < 10; i++)
		if (f_stable(i) != expect(i, 1))
			errors++;
	return NULL;
}

UKT_CASE_T(thousand_short_threads, 120)
{
	struct kprobe kp = { .addr = (void *)f_stable, .pre_handler = stable_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	for (int round = 0; round < 500; round++) {
		pthread_t a, b;
		UKT_EQ(pthread_create(&a, NULL, short_life, NULL), 0);
		UKT_EQ(pthread_create(&b, NULL, short_life, NULL), 0);
		pthread_join(a, NULL);
		pthread_join(b, NULL);
		if (round % 50 == 0) {	/* grace periods with dead threads around */
			unregister_kprobe(&kp);
			kp.addr = (void *)f_stable;
			UKT_EQ(register_kprobe(&kp), 0);
		}
	}
	UKT_EQ(errors, 0);
	UKT_EQ(stable_hits, 1000 * 10);
	unregister_kprobe(&kp);
}

/* ---- unregister waits for a running handler ------------------------------------ */

static atomic_int in_slow, slow_done;
static int slow_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	in_slow = 1;
	struct timespec ts = { 0, 200 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	slow_done = 1;
	return 0;
}

static void *slow_caller(void *arg)
{
	(void)arg;
	if (f_knob(1) != expect(1, 3))
		errors++;
	return NULL;
}

UKT_CASE_T(unregister_waits_for_running_handler, 30)
{
	pthread_t th;
	struct kprobe kp = { .addr = (void *)f_knob, .pre_handler = slow_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(pthread_create(&th, NULL, slow_caller, NULL), 0);
	while (!in_slow)
		sched_yield();
	unregister_kprobe(&kp);
	UKT_EQ(slow_done, 1);	/* the handler had finished */
	pthread_join(th, NULL);
	UKT_EQ(errors, 0);
}
