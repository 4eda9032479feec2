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
