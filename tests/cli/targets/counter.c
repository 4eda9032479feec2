/* SPDX-License-Identifier: MIT */
/*
 * A process to attach to that calls on command: prints "ready PID", then
 * for each line of stdin "c N" calls mark() N times (its argument: the
 * call's number, from 1 on) and prints "did TOTAL"; "q" or the end of
 * stdin ends it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

volatile unsigned long sink;

__attribute__((noinline)) unsigned long mark(unsigned long n)
{
	sink += n;
	return n;
}

int main(void)
{
	unsigned long total = 0;
	char line[64];
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof line, stdin) && line[0] != 'q') {
		if (line[0] != 'c')
			continue;
		long n = atol(line + 1);
		for (long k = 0; k < n; k++)
			mark(++total);
		printf("did %lu\n", total);
		fflush(stdout);
	}
	return 0;
}
