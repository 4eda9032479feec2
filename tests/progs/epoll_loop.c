/* SPDX-License-Identifier: MIT */
/*
 * An event loop that checks its own system calls (tests/quiet): a writer
 * thread sends N bytes through a pipe, one every 5 ms (each sleep checked
 * to last its time); the main thread waits for each in epoll_wait with a
 * 10 s timeout.  Every call must return what it is there for: no EINTR,
 * no early timeout, no short sleep.  Prints "N events" and exits 0, or
 * says what went wrong and exits 1.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

static int fds[2];
static long n, bad_sleeps;

static long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void *writer(void *arg)
{
	(void)arg;
	for (long i = 0; i < n; i++) {
		long t0 = now_ns();
		struct timespec ts = { 0, 5000000 };
		if (nanosleep(&ts, NULL) != 0 || now_ns() - t0 < 5000000)
			bad_sleeps++;
		if (write(fds[1], "x", 1) != 1)
			bad_sleeps++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	n = argc > 1 ? atol(argv[1]) : 200;
	int ep = epoll_create1(0);
	if (ep < 0 || pipe(fds))
		return 2;
	struct epoll_event ev = { .events = EPOLLIN };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &ev))
		return 2;
	pthread_t th;
	if (pthread_create(&th, NULL, writer, NULL))
		return 2;
	long got = 0, eintr = 0, timeouts = 0;
	while (got < n) {
		int r = epoll_wait(ep, &ev, 1, 10000);
		if (r < 0 && errno == EINTR) {
			eintr++;
			continue;
		}
		if (r == 0) {
			timeouts++;
			continue;
		}
		char c;
		if (r < 0 || read(fds[0], &c, 1) != 1)
			return 2;
		got++;
	}
	pthread_join(th, NULL);
	if (eintr || timeouts || bad_sleeps) {
		printf("%ld events, %ld EINTR, %ld timeouts, %ld bad sleeps\n", got, eintr, timeouts,
		       bad_sleeps);
		return 1;
	}
	printf("%ld events\n", got);
	return 0;
}
