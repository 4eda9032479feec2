/* SPDX-License-Identifier: MIT */
/* A process to attach to: prints "ready", then calls work() every 10 ms
 * until its stdin closes or 'q' arrives; prints how many calls it made. */
#include <poll.h>
#include <stdio.h>
#include <unistd.h>

volatile unsigned long sink;

__attribute__((noinline)) unsigned long work(unsigned long n)
{
	sink += n;
	return n * 2;
}

int main(void)
{
	unsigned long n = 0;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (;;) {
		struct pollfd p = { 0, POLLIN, 0 };
		if (poll(&p, 1, 10) > 0) {
			char c;
			if (read(0, &c, 1) <= 0 || c == 'q')
				break;
		}
		work(++n);
	}
	printf("calls %lu\n", n);
	return 0;
}
