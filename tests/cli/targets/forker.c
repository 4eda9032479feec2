/* SPDX-License-Identifier: MIT */
/*
 * fork and exec under tracing: mark(1) in the parent; a child that
 * renames itself "forkchild" and calls mark(2) twice; mark(3) in the
 * parent after the child ends; then the parent execs itself as
 * "forker exec", which calls mark(4) (untraced: exec'd programs run
 * without the agent).  Prints the child's pid.
 */
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

volatile unsigned long sink;

__attribute__((noinline)) int mark(int n)
{
	sink += (unsigned long)n;
	return n;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "exec")) {
		mark(4);
		printf("exec'd\n");
		return 0;
	}
	mark(1);
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		prctl(PR_SET_NAME, "forkchild");
		mark(2);
		mark(2);
		_exit(0);
	}
	int st;
	waitpid(c, &st, 0);
	printf("child %d\n", (int)c);
	mark(3);
	fflush(stdout);
	execl("/proc/self/exe", argv[0], "exec", (char *)NULL);
	return 1;
}
