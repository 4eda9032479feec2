/* SPDX-License-Identifier: MIT */
/*
 * What the optimizer's look at the threads costs them and itself
 * (docs/optimization.md, "How the optimizer learns where threads are").
 *
 *   batch-sleeping   ms per register + optimise + unregister round with
 *                    T threads asleep in nanosleep (judged from /proc)
 *   batch-running    the same with T threads spinning (each asked after
 *                    the 2 ms grace)
 *   eintr-window     a thread that computes for C us, then sleeps 1 ms in
 *                    nanosleep, again and again, while rounds run: how
 *                    many of its sleeps a question cut short (EINTR), per
 *                    thousand rounds.  Only a question that arrives in the
 *                    instant the thread enters the call can; C sweeps how
 *                    long it runs between calls.
 *
 * usage: ukp-ask-bench [--quick]
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ukprobes.h>

__attribute__((noinline)) int ask_target(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

static int nop(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; return 0; }

static long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void round_once(void)
{
	struct kprobe kp = { .addr = (void *)ask_target, .pre_handler = nop };
	if (register_kprobe(&kp)) {
		fprintf(stderr, "register_kprobe failed\n");
		exit(1);
	}
	wait_for_kprobe_optimizer();
	unregister_kprobe(&kp);
}

static atomic_int stop;
static atomic_long eintrs, sleeps;
static long compute_ns;

static void *sleeper(void *a)
{
	(void)a;
	while (!atomic_load(&stop)) {
		struct timespec ts = { 1, 0 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void *spinner(void *a)
{
	(void)a;
	while (!atomic_load(&stop))
		;
	return NULL;
}

static void *alternator(void *a)
{
	(void)a;
	while (!atomic_load(&stop)) {
		long t0 = now_ns();
		while (now_ns() - t0 < compute_ns)
			;
		struct timespec ts = { 0, 1000000 };
		if (nanosleep(&ts, NULL) && errno == EINTR)
			atomic_fetch_add(&eintrs, 1);
		atomic_fetch_add(&sleeps, 1);
	}
	return NULL;
}

static double rounds_ms(int nthreads, void *(*fn)(void *), int rounds)
{
	pthread_t th[64];
	atomic_store(&stop, 0);
	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, fn, NULL);
	struct timespec settle = { 0, 20000000 };
	nanosleep(&settle, NULL);
	long t0 = now_ns();
	for (int r = 0; r < rounds; r++)
		round_once();
	double ms = (now_ns() - t0) / 1e6 / rounds;
	atomic_store(&stop, 1);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	return ms;
}

int main(int argc, char **argv)
{
	int quick = argc > 1 && !strcmp(argv[1], "--quick");
	int rounds = quick ? 10 : 40;
	round_once();	/* the optimizer thread, the detour: made once */
	printf("| row | threads | ms per round |\n|---|---|---|\n");
	int ts[] = { 0, 8, 64 };
	for (unsigned i = 0; i < sizeof(ts) / sizeof(ts[0]); i++)
		printf("| batch-sleeping | %d | %.2f |\n", ts[i], rounds_ms(ts[i], sleeper, rounds));
	int rs[] = { 1, 4 };
	for (unsigned i = 0; i < sizeof(rs) / sizeof(rs[0]); i++)
		printf("| batch-running | %d | %.2f |\n", rs[i], rounds_ms(rs[i], spinner, rounds));
	printf("\n| row | compute between sleeps (us) | rounds | sleeps | EINTR |\n|---|---|---|---|---|\n");
	long cs[] = { 1, 100, 1000, 10000, 50000 };
	for (unsigned i = 0; i < sizeof(cs) / sizeof(cs[0]); i++) {
		compute_ns = cs[i] * 1000;
		atomic_store(&eintrs, 0);
		atomic_store(&sleeps, 0);
		int n = quick ? 50 : 300;
		rounds_ms(1, alternator, n);
		printf("| eintr-window | %ld | %d | %ld | %ld |\n", cs[i], n, atomic_load(&sleeps),
		       atomic_load(&eintrs));
	}
	return 0;
}
