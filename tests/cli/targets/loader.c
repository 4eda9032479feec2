/* SPDX-License-Identifier: MIT */
/*
 * A program that loads a library only when told: prints "ready PID", then
 * for each line of stdin: "t" calls tick() and prints "tick"; "o" dlopens
 * argv[1] and prints "opened"; "c N" calls its dfr_mix(k, 7k) N times (k
 * counting every call from 1) and prints "did K SUM" (SUM: of the
 * results); "x" dlcloses it and prints "closed"; "q" or the end of stdin
 * ends it.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

volatile unsigned long ticks;

__attribute__((noinline)) void tick(void)
{
	ticks++;
}

int main(int argc, char **argv)
{
	void *h = NULL;
	int (*mix)(int, long) = NULL;
	long sum = 0;
	int k = 0;
	char line[64];
	if (argc < 2)
		return 2;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	while (fgets(line, sizeof line, stdin) && line[0] != 'q') {
		switch (line[0]) {
		case 't':
			tick();
			printf("tick\n");
			break;
		case 'o':
			h = dlopen(argv[1], RTLD_NOW);
			mix = h ? (int (*)(int, long))dlsym(h, "dfr_mix") : NULL;
			if (!mix) {
				printf("dlopen: %s\n", dlerror());
				return 1;
			}
			printf("opened\n");
			break;
		case 'c':
			for (long n = atol(line + 1); n > 0 && mix; n--) {
				k++;
				sum += mix(k, 7L * k);
			}
			printf("did %d %ld\n", k, sum);
			break;
		case 'x':
			if (h)
				dlclose(h);
			h = NULL;
			mix = NULL;
			printf("closed\n");
			break;
		}
		fflush(stdout);
	}
	return 0;
}
