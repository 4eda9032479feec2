/* SPDX-License-Identifier: MIT */
/*
 * The runner: forks every case of this binary into its own process with
 * a timeout, prints one line per case and "N passed, N failed" at the end.
 * Usage: test-binary [substring]   runs only cases whose name contains it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "ukt.h"

extern const struct ukt_case *const __start_ukt_cases[];
extern const struct ukt_case *const __stop_ukt_cases[];

static int run_one(const struct ukt_case *c, const char *prog)
{
	unsigned timeout = c->timeout ? c->timeout : 60;
	struct timespec t0, t1;
	int status;

	fflush(stdout);
	fflush(stderr);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 0;
	}
	if (pid == 0) {
		alarm(timeout);
		c->fn();
		fflush(stdout);
		fflush(stderr);
		_exit(0);
	}
	while (waitpid(pid, &status, 0) < 0)
		;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		printf("ok   %s/%s (%.0f ms)\n", prog, c->name, ms);
		return 1;
	}
	if (WIFSIGNALED(status))
		printf("FAIL %s/%s: killed by signal %d (%s)%s\n", prog, c->name,
		       WTERMSIG(status), strsignal(WTERMSIG(status)),
		       WTERMSIG(status) == SIGALRM ? " - timed out" : "");
	else
		printf("FAIL %s/%s: exit %d\n", prog, c->name, WEXITSTATUS(status));
	return 0;
}

int main(int argc, char **argv)
{
	const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	const char *filter = argc > 1 ? argv[1] : NULL;
	int passed = 0, failed = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	/* compilers emit the section in reverse: run in file order */
	for (const struct ukt_case *const *c = __stop_ukt_cases; c-- > __start_ukt_cases;) {
		if (filter && !strstr((*c)->name, filter))
			continue;
		if (run_one(*c, prog))
			passed++;
		else
			failed++;
	}
	printf("%s: %d passed, %d failed\n", prog, passed, failed);
	return failed ? 1 : 0;
}
