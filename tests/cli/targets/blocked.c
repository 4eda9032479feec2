/* SPDX-License-Identifier: MIT */
/*
 * A multi-threaded program that checks its own results while it is
 * attached to: one thread blocked in read() on a pipe, one in
 * nanosleep() loops, one in a futex wait (a condition variable), the main
 * thread feeding them.  Any EINTR, short sleep or lost wakeup is counted
 * as an error.  Prints "ready PID", then on 'q' from stdin the results:
 * "ok READS SLEEPS WAKES" or "error ...", exit 0 or 1.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int pfd[2];
static atomic_int errors, stop;
static atomic_ulong reads, sleeps, wakes, fed;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static unsigned long posted, taken;

volatile unsigned long sink;

__attribute__((noinline)) unsigned long tick(unsigned long n)
{
	sink += n;
	return n + 1;
}

static void *reader(void *a)
{
	(void)a;
	unsigned long expect = 0;
	for (;;) {
		unsigned long v;
		ssize_t n = read(pfd[0], &v, sizeof v);
		if (n == 0)
			return NULL;
		if (n != sizeof v || v != expect) {
			fprintf(stderr, "read: %zd %s (v %lu, expected %lu)\n", n,
				n < 0 ? strerror(errno) : "", v, expect);
			errors++;
			return NULL;
		}
		expect++;
		reads++;
	}
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void *sleeper(void *a)
{
	(void)a;
	while (!stop) {
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		double t0 = now();
		if (nanosleep(&ts, NULL) != 0) {
			fprintf(stderr, "nanosleep: %s\n", strerror(errno));
			errors++;
		}
		if (now() - t0 < 0.049) {
			fprintf(stderr, "nanosleep: slept %.6f s only\n", now() - t0);
			errors++;
		}
		sleeps++;
		tick(sleeps);
	}
	return NULL;
}

static void *waiter(void *a)
{
	(void)a;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (taken == posted && !stop)
			pthread_cond_wait(&cv, &mu);
		if (taken == posted)
			break;
		taken++;
		wakes++;
	}
	pthread_mutex_unlock(&mu);
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t[3];
	if (pipe(pfd))
		return 2;
	/* "maplibc": libc.so.6's file also mapped as data, right below the
	 * loaded one where that is free (a program reading ELF files,
	 * ukprobes' own symbol reader) */
	if (argc > 1 && !strcmp(argv[1], "maplibc")) {
		Dl_info di;
		struct stat st;
		int fd = dladdr((void *)printf, &di) ? open(di.dli_fname, O_RDONLY) : -1;
		if (fd < 0 || fstat(fd, &st))
			return 2;
		size_t len = ((size_t)st.st_size + 4095) & ~4095UL;
		char *at = (char *)di.dli_fbase - len;
		void *m = mmap(at, len, PROT_READ, MAP_PRIVATE | MAP_FIXED_NOREPLACE, fd, 0);
		if (m == MAP_FAILED)
			m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
		if (m == MAP_FAILED)
			return 2;
		close(fd);
	}
	pthread_create(&t[0], NULL, reader, NULL);
	pthread_create(&t[1], NULL, sleeper, NULL);
	pthread_create(&t[2], NULL, waiter, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	unsigned long n = 0;
	for (;;) {
		struct pollfd p = { 0, POLLIN, 0 };
		int r = poll(&p, 1, 100);
		if (r < 0 && errno != EINTR) {
			errors++;
			break;
		}
		if (r > 0) {
			char c;
			if (read(0, &c, 1) <= 0 || c == 'q')
				break;
		}
		/* every 100 ms: a word to the reader, a post to the waiter */
		if (write(pfd[1], &n, sizeof n) != sizeof n)
			errors++;
		n++;
		fed++;
		pthread_mutex_lock(&mu);
		posted++;
		pthread_cond_signal(&cv);
		pthread_mutex_unlock(&mu);
		tick(n);
	}
	stop = 1;
	close(pfd[1]);
	pthread_mutex_lock(&mu);
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	for (int k = 0; k < 3; k++)
		pthread_join(t[k], NULL);
	if (errors || reads != fed || taken != posted) {
		printf("error %d reads %lu/%lu wakes %lu/%lu\n", (int)errors,
		       (unsigned long)reads, (unsigned long)fed, taken, posted);
		return 1;
	}
	printf("ok %lu %lu %lu\n", (unsigned long)reads, (unsigned long)sleeps,
	       (unsigned long)wakes);
	return 0;
}
