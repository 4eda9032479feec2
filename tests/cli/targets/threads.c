/* SPDX-License-Identifier: MIT */
/* THREADS threads (argv[1], default 4) each call hit(t, seq) for seq
 * 0..N-1 (argv[2], default 10000), all at once. */
#include <pthread.h>
#include <stdlib.h>

static int n_calls = 10000;
static pthread_barrier_t bar;
volatile unsigned long sink;

__attribute__((noinline)) void hit(long t, long seq)
{
	sink += (unsigned long)(t + seq);
}

static void *run(void *a)
{
	long t = (long)a;
	pthread_barrier_wait(&bar);
	for (long k = 0; k < n_calls; k++)
		hit(t, k);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4;
	if (argc > 2)
		n_calls = atoi(argv[2]);
	pthread_t th[64];
	if (n > 64)
		n = 64;
	pthread_barrier_init(&bar, NULL, (unsigned)n);
	for (long k = 0; k < n; k++)
		pthread_create(&th[k], NULL, run, (void *)k);
	for (int k = 0; k < n; k++)
		pthread_join(th[k], NULL);
	return 0;
}
