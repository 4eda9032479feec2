/* SPDX-License-Identifier: MIT */
/*
 * Forks and execs while attached to: every 50 ms a child that calls
 * mark(2) and _exits with status 7, and every fourth round one that execs
 * /bin/true; mark(1) in the parent each round.  Checks every child's
 * status; on 'q' prints "ok ROUNDS" or "error ...".
 */
#include <poll.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

volatile unsigned long sink;

__attribute__((noinline)) int mark(int n)
{
	sink += (unsigned long)n;
	return n;
}

int main(void)
{
	unsigned long rounds = 0, errors = 0;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (;;) {
		struct pollfd p = { 0, POLLIN, 0 };
		if (poll(&p, 1, 50) > 0) {
			char c;
			if (read(0, &c, 1) <= 0 || c == 'q')
				break;
		}
		mark(1);
		pid_t c = fork();
		if (c == 0) {
			if (rounds % 4 == 3) {
				execl("/bin/true", "true", (char *)NULL);
				_exit(99);
			}
			mark(2);
			_exit(7);
		}
		int st = 0;
		if (c < 0 || waitpid(c, &st, 0) != c || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != (rounds % 4 == 3 ? 0 : 7)) {
			fprintf(stderr, "child %d: status 0x%x\n", (int)c, st);
			errors++;
		}
		rounds++;
	}
	if (errors) {
		printf("error %lu of %lu\n", errors, rounds);
		return 1;
	}
	printf("ok %lu\n", rounds);
	return 0;
}
