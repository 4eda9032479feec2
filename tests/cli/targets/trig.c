/* SPDX-License-Identifier: MIT */
/*
 * A target for triggers and histograms that counts for itself: calls
 * tr_c(x) through tr_a -> tr_b with values it chooses, and tr_s(name),
 * then prints what it did (stdout):
 *	log2 BUCKET COUNT SUM		per ilog2(roundup_pow_of_two(x)) bucket
 *	str NAME COUNT			per tr_s name
 *	calls N
 * argv[1]: the number of tr_c calls (default 1000).  argv[2] "usr1":
 * after half the calls, SIGUSR1 to the parent (ukprobe), then wait until
 * the file argv[3] holds a histogram before going on.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

volatile unsigned long sink;

__attribute__((noinline)) void tr_c(unsigned long x)
{
	sink += x;
}

__attribute__((noinline)) void tr_b(unsigned long x)
{
	tr_c(x);
	sink++;
}

__attribute__((noinline)) void tr_a(unsigned long x)
{
	tr_b(x);
	sink++;
}

__attribute__((noinline)) void tr_s(const char *name)
{
	sink += (unsigned long)name[0];
}

static unsigned long long cnt[65], sum[65];

static unsigned bucket(unsigned long v)
{
	unsigned b = 0;
	while (b < 64 && (1UL << b) < v)
		b++;
	return b;
}

static int file_has(const char *path, const char *what)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	char buf[4096];
	int found = 0;
	while (!found && fgets(buf, sizeof buf, f))
		found = strstr(buf, what) != NULL;
	fclose(f);
	return found;
}

int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 0) : 1000;
	int usr1 = argc > 3 && !strcmp(argv[2], "usr1");
	unsigned long long s = 88172645463325252ULL;
	static const char *names[] = { "alpha", "beta", "gamma", "delta" };
	unsigned long long ns[4] = { 0 };
	for (unsigned long i = 0; i < n; i++) {
		if (usr1 && i == n / 2) {
			kill(getppid(), SIGUSR1);
			/* until ukprobe has written the histogram so far */
			for (int k = 0; k < 3000 && !file_has(argv[3], "Totals:"); k++) {
				struct timespec t = { 0, 10000000 };
				nanosleep(&t, NULL);
			}
			printf("half %lu\n", i);
		}
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		unsigned long x = i < 4 ? i : (unsigned long)(s % 5000000);
		tr_a(x);
		cnt[bucket(x)]++;
		sum[bucket(x)] += x;
		unsigned w = (unsigned)(s >> 40) % 4;
		w = w == 3 && (i & 1) ? 0 : w;
		tr_s(names[w]);
		ns[w]++;
	}
	for (unsigned b = 0; b <= 64; b++)
		if (cnt[b])
			printf("log2 %u %llu %llu\n", b, cnt[b], sum[b]);
	for (unsigned w = 0; w < 4; w++)
		printf("str %s %llu\n", names[w], ns[w]);
	printf("calls %lu\n", n);
	return 0;
}
