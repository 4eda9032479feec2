/* SPDX-License-Identifier: MIT */
/* Threads: 4 x 10,000 events, every one written, each thread's in order. */
#include "run.h"

UKT_CASE_T(four_threads_exact, 120)
{
	struct run r = ukprobe("trace", "p:t/hit hit t=%di:s64 seq=%si:s64", "--",
			       target("threads"), "4", "10000", NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, strstr(r.err, "ukprobe: 0 events lost\n") != NULL);
	pid_t tid_of[4] = { 0 };
	long next[4] = { 0 };
	int total = 0;
	for (char *p = r.out; (p = strstr(p, " hit: (hit+0x0/")); p++) {
		char *bol = p;
		while (bol > r.out && bol[-1] != '\n')
			bol--;
		char *br = strstr(bol, " [");
		char *dash = br;
		while (dash > bol && dash[-1] != '-')
			dash--;
		pid_t tid = atoi(dash);
		char *tq = strstr(p, " t="), *sq = strstr(p, " seq=");
		UKT_ASSERT(tq && sq);
		long t = atol(tq + 3), seq = atol(sq + 5);
		UKT_ASSERT(t >= 0 && t < 4);
		if (!tid_of[t])
			tid_of[t] = tid;
		UKT_EQ(tid_of[t], tid);		/* one thread per t */
		UKT_EQ(seq, next[t]);		/* its own order */
		next[t]++;
		total++;
	}
	UKT_EQ(total, 40000);
	for (int t = 0; t < 4; t++) {
		UKT_EQ(next[t], 10000);
		for (int u = 0; u < t; u++)
			UKT_ASSERT(tid_of[t] != tid_of[u]);
	}
	/* the merge by time: timestamps never go back */
	double prev = 0;
	int lines = 0;
	for (char *p = r.out; (p = strstr(p, "] ")); p += 2) {
		double ts = strtod(p + 2, NULL);
		UKT_ASSERT(ts >= prev);
		prev = ts;
		lines++;
	}
	UKT_EQ(lines, 40000);
	run_free(&r);
}

/*
 * Buffers too small for what the threads record: whatever is lost is
 * counted where it was lost (TID:<tid> [LOST n EVENTS]) and in the total,
 * never silently: per thread, the records written plus those counted
 * lost are every call, and each LOST line stands for exactly the gap in
 * that thread's sequence.
 */
UKT_CASE_T(lost_events_are_counted, 120)
{
	struct run r = ukprobe("trace", "-b", "64", "p:t/hit hit t=%di:s64 seq=%si:s64", "--",
			       target("threads"), "4", "100000", NULL);
	RUN_EXPECT(r, r.status == 0);
	const char *tot = strstr(r.err, "ukprobe: ");
	RUN_EXPECT(r, tot != NULL);
	unsigned long total_lost = strtoul(tot + 9, NULL, 10);
	RUN_EXPECT(r, strstr(tot, " events lost\n") != NULL);
	struct { pid_t tid; long next; unsigned long lost, pending; } th[4];
	int nth = 0;
	unsigned long lost_lines = 0;
	for (char *line = r.out; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		pid_t tid;
		unsigned long n;
		if (sscanf(line, "TID:%d [LOST %lu EVENTS]", &tid, &n) == 2) {
			int k = 0;
			while (k < nth && th[k].tid != tid)
				k++;
			if (k == nth) {
				UKT_ASSERT(nth < 4);
				th[nth].tid = tid;
				th[nth].next = 0;
				th[nth].lost = th[nth].pending = 0;
				nth++;
			}
			th[k].pending += n;
			lost_lines += n;
			continue;
		}
		char *p = strstr(line, " hit: (hit+0x0/");
		char *eol = strchr(line, '\n');
		if (!p || (eol && p > eol))
			continue;
		char *br = strstr(line, " [");
		char *dash = br;
		while (dash > line && dash[-1] != '-')
			dash--;
		tid = atoi(dash);
		long seq = atol(strstr(p, " seq=") + 5);
		int k = 0;
		while (k < nth && th[k].tid != tid)
			k++;
		if (k == nth) {
			UKT_ASSERT(nth < 4);
			th[nth].tid = tid;
			th[nth].next = 0;
			th[nth].lost = th[nth].pending = 0;
			nth++;
		}
		/* the gap before this record is what the LOST lines said */
		if (seq != th[k].next + (long)th[k].pending)
			UKT_FAIL("thread %d: seq %ld after %ld with %lu counted lost", (int)tid, seq,
				 th[k].next, th[k].pending);
		th[k].lost += th[k].pending;
		th[k].pending = 0;
		th[k].next = seq + 1;
	}
	UKT_EQ(nth, 4);
	unsigned long sum = 0;
	for (int k = 0; k < 4; k++) {
		/* lost at the end of a thread: counted after its last record */
		UKT_EQ(th[k].next + (long)th[k].pending, 100000);
		sum += th[k].lost + th[k].pending;
	}
	UKT_EQ(sum, lost_lines);
	UKT_EQ(total_lost, lost_lines);
	printf("  %lu of 400000 events lost with 64 KiB buffers, every one counted\n", total_lost);
	run_free(&r);
}

/* CLI.md: with the default buffers, four threads recording a million
 * events each as fast as they can lose none */
UKT_CASE_T(four_million_default_buffers, 300)
{
	struct run r = ukprobe("trace", "--profile", "-o", "/dev/null",
			       "p:t/hit hit t=%di:s64 seq=%si:s64", "--",
			       target("threads"), "4", "1000000", NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, strstr(r.err, "ukprobe: 0 events lost\n") != NULL);
	char *p = strstr(r.err, "t/hit ");
	RUN_EXPECT(r, p != NULL);
	unsigned long hits, misses;
	UKT_ASSERT(sscanf(p + 6, "%lu %lu", &hits, &misses) == 2);
	UKT_EQ(hits, 4000000);
	UKT_EQ(misses, 0);
	run_free(&r);
}
