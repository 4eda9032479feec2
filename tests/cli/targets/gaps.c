/* SPDX-License-Identifier: MIT */
/*
 * How long a thread of a program is kept from running (scripts/bench: an
 * attach holds the program while probes go in and out).  A thread reads
 * CLOCK_MONOTONIC in a loop; each gap above 1 ms between two reads is
 * noted.  On SIGUSR1 (or after 60 s) it prints "gaps N MAX_MS SUM_MS":
 * the gaps over 1 ms, the largest, and their sum.
 */
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_usr1(int sig)
{
	(void)sig;
	stop = 1;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

struct res { int n; double max, sum; };

static void run(struct res *r)
{
	double t0 = now(), last = t0;
	while (!stop && last - t0 < 60) {
		double t = now();
		if (t - last > 1e-3) {
			r->n++;
			r->sum += t - last;
			if (t - last > r->max)
				r->max = t - last;
		}
		last = t;
	}
}

int main(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	struct res a = { 0, 0, 0 };
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	run(&a);
	printf("gaps %d %.2f %.2f\n", a.n, a.max * 1e3, a.sum * 1e3);
	return 0;
}
