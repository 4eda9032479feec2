/* SPDX-License-Identifier: MIT */
/*
 * Ends in the way argv asks, after calling mark(1..N):
 *   ender N exit CODE | _exit CODE | signal SIG | abort
 *   ender N env      prints LD_PRELOAD and UKPROBE_AGENT_FD ("-" unset), cwd
 *   ender N cat      copies stdin to stdout
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile unsigned long sink;

__attribute__((noinline)) int mark(int n)
{
	sink += (unsigned long)n;
	return n;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 100;
	int n = atoi(argv[1]);
	for (int k = 1; k <= n; k++)
		mark(k);
	const char *how = argv[2];
	int arg = argc > 3 ? atoi(argv[3]) : 0;
	if (!strcmp(how, "exit")) {
		exit(arg);
	} else if (!strcmp(how, "_exit")) {
		_exit(arg);
	} else if (!strcmp(how, "signal")) {
		signal(arg, SIG_DFL);
		raise(arg);
		return 101;
	} else if (!strcmp(how, "abort")) {
		abort();
	} else if (!strcmp(how, "env")) {
		const char *p = getenv("LD_PRELOAD"), *f = getenv("UKPROBE_AGENT_FD");
		char cwd[4096];
		printf("LD_PRELOAD=%s\nFD=%s\ncwd=%s\n", p ? p : "-", f ? f : "-",
		       getcwd(cwd, sizeof cwd) ? cwd : "?");
		return 0;
	} else if (!strcmp(how, "cat")) {
		int c;
		while ((c = getchar()) != EOF)
			putchar(c);
		return 0;
	}
	return 100;
}
