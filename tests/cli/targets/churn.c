/* SPDX-License-Identifier: MIT */
/*
 * Threads that never stop allocating: what an injection must not
 * deadlock (a thread stopped inside malloc holds its arena's lock).
 * Three threads malloc and free in a loop, checking their blocks; the
 * main thread waits for 'q' on stdin, then prints "ok N" (N rounds) or
 * "error".
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_int stop, errors;
static atomic_ulong rounds;

static void *churn(void *a)
{
	unsigned long seed = (unsigned long)a * 2654435761u + 1;
	while (!stop) {
		size_t n = 16 + (seed = seed * 6364136223846793005ull + 1) % 4000;
		unsigned char *p = malloc(n);
		if (!p) {
			errors++;
			break;
		}
		memset(p, (int)(n & 0xff), n);
		if (p[n - 1] != (unsigned char)(n & 0xff))
			errors++;
		free(p);
		rounds++;
	}
	return NULL;
}

int main(void)
{
	pthread_t t[3];
	for (long k = 0; k < 3; k++)
		pthread_create(&t[k], NULL, churn, (void *)k);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	char c;
	while (read(0, &c, 1) == 1 && c != 'q')
		;
	stop = 1;
	for (int k = 0; k < 3; k++)
		pthread_join(t[k], NULL);
	if (errors) {
		printf("error %d\n", (int)errors);
		return 1;
	}
	printf("ok %lu\n", (unsigned long)rounds);
	return 0;
}
