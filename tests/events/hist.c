/* SPDX-License-Identifier: MIT */
/*
 * Hist and stacktrace triggers: exact counts and sums against what the
 * target counts for itself (log2 buckets, string keys, threads that come
 * and go, a full table), stacks against the return addresses the probed
 * code records itself, and the kernel's hist file format.
 */
#include <pthread.h>
#include <sys/syscall.h>
#include "evt.h"

volatile unsigned long sink;

NOIL void h_count(unsigned long i)
{
	sink = i;
}

NOIL void h_fs(long n, const char *s)
{
	sink = (unsigned long)n + (unsigned long)s;
}

/* the histogram printed, in memory */
static char *hist_text(struct ukpev_reader *r, unsigned h, int format)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	UKT_ASSERT(f);
	int n = ukpev_reader_hist_print(r, h, f, format, ukpev_symbolize_self, NULL);
	fclose(f);
	UKT_ASSERT(n >= 0);
	return buf;
}

static void totals(const char *t, unsigned long long *hits, unsigned *entries,
		   unsigned long long *dropped)
{
	const char *p = strstr(t, "\nTotals:\n");
	UKT_ASSERT(p);
	if (sscanf(p, "\nTotals:\n    Hits: %llu\n    Entries: %u\n    Dropped: %llu", hits, entries,
		   dropped) != 3)
		UKT_FAIL("bad totals in:\n%s", t);
}

static unsigned long long xs = 88172645463325252ULL;
static unsigned long next_value(void)
{
	xs ^= xs << 13;
	xs ^= xs >> 7;
	xs ^= xs << 17;
	return (unsigned long)(xs % 3000000);
}

static unsigned log2_bucket(unsigned long v)
{
	unsigned b = 0;
	while ((1UL << b) < v)	/* the smallest power of two >= v */
		b++;
	return b;
}

UKT_CASE(log2_buckets_exact)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *e = evt_create(a, "p:g/c h_count i=%di:u64");
	struct ukpev_error err;
	UKT_EQ(ukpev_event_soft_enable(e, 0), 1);
	UKT_EQ(ukpev_event_add_trigger(e, "hist:keys=i.log2:vals=i:sort=i.log2", &err), 0);
	UKT_EQ(ukpev_reader_nhists(r), 1);
	UKT_EQ(ukpev_reader_hist_event(r, 0), (int)ukpev_event_info(e)->id);
	unsigned long long cnt[64] = { 0 }, sum[64] = { 0 };
	unsigned n = 20000;
	for (unsigned k = 0; k < n; k++) {
		unsigned long v = k < 3 ? k : next_value();
		h_count(v);
		cnt[log2_bucket(v)]++;
		sum[log2_bucket(v)] += v;
	}
	/* a soft-disabled event records nothing */
	UKT_EQ(evt_drain(r), 0);
	char *t = hist_text(r, 0, UKPEV_HIST_KERNEL);
	const char *info = "# event histogram\n#\n# trigger info: "
			   "hist:keys=i.log2:vals=hitcount,i:sort=i.log2:size=2048 [active]\n#\n\n";
	if (strncmp(t, info, strlen(info)))
		UKT_FAIL("header:\n%s", t);
	unsigned entries = 0, prev = 0;
	for (const char *p = strstr(t, "{ "); p && !strncmp(p, "{ ", 2); p = strchr(p, '\n') + 1) {
		unsigned b;
		unsigned long long c, s;
		if (sscanf(p, "{ i: ~ 2^%u } hitcount: %llu  i: %llu", &b, &c, &s) != 3)
			UKT_FAIL("bad line: %.80s", p);
		UKT_ASSERT(b < 64);
		if (entries && b <= prev)
			UKT_FAIL("not sorted by key: 2^%u after 2^%u", b, prev);
		prev = b;
		if (c != cnt[b] || s != sum[b])
			UKT_FAIL("2^%u: %llu hits, sum %llu; the target counted %llu, %llu", b, c, s,
				 cnt[b], sum[b]);
		entries++;
	}
	unsigned want = 0;
	for (unsigned b = 0; b < 64; b++)
		want += cnt[b] != 0;
	UKT_EQ(entries, want);
	unsigned long long hits, dropped;
	unsigned ent;
	totals(t, &hits, &ent, &dropped);
	UKT_EQ(hits, n);
	UKT_EQ(ent, want);
	UKT_EQ(dropped, 0);
	free(t);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

UKT_CASE(string_keys_and_format)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *e = evt_create(a, "p:g/s h_fs n=%di:s64 s=+0(%si):string");
	struct ukpev_error err;
	UKT_EQ(ukpev_event_add_trigger(e, "hist:keys=s:vals=n:sort=hitcount.descending if n > 0",
				       &err), 0);
	static const char *words[] = { "alpha", "beta", "gamma" };
	for (int i = 0; i < 60; i++)
		h_fs(i % 7, words[i % 3 == 0 ? 0 : i % 5 == 0 ? 1 : 2]);
	/* the event still records (it was not soft-disabled) */
	UKT_EQ(evt_drain(r), 60);
	unsigned long long c[3] = { 0 }, s[3] = { 0 };
	for (int i = 0; i < 60; i++) {
		if (i % 7 == 0)
			continue;	/* the trigger's filter */
		int w = i % 3 == 0 ? 0 : i % 5 == 0 ? 1 : 2;
		c[w]++;
		s[w] += (unsigned long long)(i % 7);
	}
	char *t = hist_text(r, 0, UKPEV_HIST_KERNEL);
	const char *info = "# event histogram\n#\n# trigger info: hist:keys=s:vals=hitcount,n:"
			   "sort=hitcount.descending:size=2048 if n > 0 [active]\n#\n\n";
	if (strncmp(t, info, strlen(info)))
		UKT_FAIL("header:\n%s", t);
	/* the kernel's forms: %-50s, %10llu */
	unsigned long long prev = ~0ULL;
	for (int w = 0; w < 3; w++) {
		char line[256];
		snprintf(line, sizeof(line), "{ s: %-50s } hitcount: %10llu  n: %10llu\n", words[w],
			 c[w], s[w]);
		const char *at = strstr(t, line);
		if (!at)
			UKT_FAIL("no line '%s' in:\n%s", line, t);
	}
	/* descending by hitcount */
	for (const char *p = strstr(t, "{ "); p && !strncmp(p, "{ ", 2); p = strchr(p, '\n') + 1) {
		unsigned long long hc;
		const char *h = strstr(p, "hitcount:");
		UKT_ASSERT(h && sscanf(h, "hitcount: %llu", &hc) == 1);
		UKT_ASSERT(hc <= prev);
		prev = hc;
	}
	unsigned long long hits, dropped;
	unsigned ent;
	totals(t, &hits, &ent, &dropped);
	UKT_EQ(hits, c[0] + c[1] + c[2]);
	UKT_EQ(ent, 3);
	UKT_EQ(dropped, 0);
	free(t);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

#define NTH 4
#define PER 5000
static void *worker(void *arg)
{
	unsigned long k = (unsigned long)arg;
	for (unsigned i = 0; i < PER; i++)
		h_count(k * 1000 + i % (k + 1));
	return NULL;
}

/* each thread has its own table; the reader merges them, before and after
 * the threads are gone (their tables then folded into the reader's) */
UKT_CASE_T(threads_merge_exact, 60)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *e = evt_create(a, "p:g/c h_count i=%di:u64");
	struct ukpev_error err;
	UKT_EQ(ukpev_event_soft_enable(e, 0), 1);
	UKT_EQ(ukpev_event_add_trigger(e, "hist:keys=i.buckets=1000,common_pid:vals=i", &err), 0);
	for (int round = 0; round < 3; round++) {
		pthread_t th[NTH];
		for (unsigned long k = 0; k < NTH; k++)
			UKT_EQ(pthread_create(&th[k], NULL, worker, (void *)k), 0);
		for (int k = 0; k < NTH; k++)
			pthread_join(th[k], NULL);
		if (round == 1) {
			/* the reader notices the threads are gone: tables retired */
			usleep(120000);
			evt_drain(r);
		}
		char *t = hist_text(r, 0, UKPEV_HIST_KERNEL);
		unsigned long long hits, dropped;
		unsigned ent;
		totals(t, &hits, &ent, &dropped);
		UKT_EQ(hits, (unsigned long long)NTH * PER * (round + 1));
		UKT_EQ(dropped, 0);
		UKT_EQ(ent, NTH * (round + 1));	/* one pid per thread */
		/* per bucket: every thread of every round */
		for (unsigned long k = 0; k < NTH; k++) {
			unsigned long long sum = 0, cnt = 0;
			for (const char *p = strstr(t, "{ "); p && !strncmp(p, "{ ", 2);
			     p = strchr(p, '\n') + 1) {
				unsigned long long lo, hi, c, s;
				unsigned pid;
				if (sscanf(p, "{ i: ~ %llu-%llu, common_pid: %u } hitcount: %llu  i: %llu",
					   &lo, &hi, &pid, &c, &s) != 5)
					UKT_FAIL("bad line %.100s", p);
				UKT_EQ(hi, lo + 999);
				if (lo == k * 1000) {
					cnt += c;
					sum += s;
				}
			}
			unsigned long long want = 0;
			for (unsigned i = 0; i < PER; i++)
				want += k * 1000 + i % (k + 1);
			UKT_EQ(cnt, (unsigned long long)PER * (round + 1));
			UKT_EQ(sum, want * (round + 1));
		}
		free(t);
	}
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

UKT_CASE(full_table_counts_drops)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *e = evt_create(a, "p:g/c h_count i=%di:u64");
	struct ukpev_error err;
	UKT_EQ(ukpev_event_soft_enable(e, 0), 1);
	UKT_EQ(ukpev_event_add_trigger(e, "hist:keys=i:size=3", &err), 0);	/* 4 */
	for (int rep = 0; rep < 3; rep++)
		for (unsigned long v = 0; v < 10; v++)
			h_count(v);
	char *t = hist_text(r, 0, UKPEV_HIST_KERNEL);
	UKT_ASSERT(strstr(t, ":size=4 [active]"));
	unsigned long long hits, dropped;
	unsigned ent;
	totals(t, &hits, &ent, &dropped);
	UKT_EQ(hits, 30);
	UKT_EQ(ent, 4);
	UKT_EQ(dropped, 18);
	/* the four kept, 3 hits each, the first four values met */
	for (unsigned long v = 0; v < 4; v++) {
		char line[128];
		snprintf(line, sizeof(line), "{ i: %10lu } hitcount: %10u\n", v, 3);
		if (!strstr(t, line))
			UKT_FAIL("no '%s' in\n%s", line, t);
	}
	free(t);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

/* ---- stacks ------------------------------------------------------------------- */

static unsigned long ra[4];	/* return addresses, as the code records them */

NOIL void s_leaf(unsigned long x)
{
	ra[0] = (unsigned long)__builtin_return_address(0);
	sink = x;
	__asm__ volatile("" ::: "memory");
}

NOIL void s_mid(unsigned long x)
{
	ra[1] = (unsigned long)__builtin_return_address(0);
	s_leaf(x + 1);
	__asm__ volatile("" ::: "memory");
}

static unsigned long top_ra[8];
static unsigned ntop;

NOIL void s_top(unsigned long x)
{
	ra[2] = (unsigned long)__builtin_return_address(0);
	top_ra[ntop++ & 7] = ra[2];
	s_mid(x + 1);
	__asm__ volatile("" ::: "memory");
}

struct stk_rec {
	unsigned event, stack_of, n;
	unsigned long f[64];
};
static struct stk_rec stks[64];
static unsigned nstk, nrec;

static int keep_stack(const struct ukpev_record *rec, void *arg)
{
	(void)arg;
	if (rec->event == UKPEV_EVENT_STACK && nstk < 64) {
		struct stk_rec *s = &stks[nstk++];
		s->stack_of = rec->stack_of;
		s->n = rec->payload_size / 8;
		UKT_ASSERT(s->n <= 64);
		memcpy(s->f, rec->payload, s->n * 8);
		s->event = nrec;	/* the index of the record it follows */
	}
	nrec++;
	return 0;
}

UKT_CASE(stacktrace_trigger_records_the_real_stack)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	/* the truth, unprobed (a return probe's trampoline would stand in
	 * for s_mid's own return address) */
	s_top(10);
	unsigned long truth[2] = { ra[0], ra[1] };
	struct ukpev_event *e;
	struct ukpev_error err;
	UKT_EQ(ukpev_event_create(a, "p:g/leaf s_leaf x=%di:u64", UKPEV_F_STACKS, &e, &err), 0);
	struct ukpev_event *er;
	UKT_EQ(ukpev_event_create(a, "r:g/mid s_mid", UKPEV_F_STACKS, &er, &err), 0);
	UKT_EQ(ukpev_event_add_trigger(e, "stacktrace:2", &err), 0);
	UKT_EQ(ukpev_event_add_trigger(er, "stacktrace", &err), 0);
	ntop = 0;
	for (int i = 0; i < 3; i++)
		s_top(10);
	nstk = nrec = 0;
	while (ukpev_reader_poll(r, keep_stack, NULL, 0) > 0)
		;
	/* leaf x3 (+2 stacks), mid x3 (+3 stacks) */
	UKT_EQ(nrec, 6 + 5);
	UKT_EQ(nstk, 5);
	unsigned leaf = 0, mid = 0;
	for (unsigned i = 0; i < nstk; i++) {
		struct stk_rec *s = &stks[i];
		UKT_ASSERT(s->n >= 4);
		if (s->stack_of == ukpev_event_info(e)->id) {
			/* the probed place, then each caller outwards */
			UKT_EQ(s->f[0], (unsigned long)s_leaf);
			UKT_EQ(s->f[1], truth[0]);
			UKT_EQ(s->f[2], truth[1]);
			UKT_EQ(s->f[3], top_ra[leaf]);	/* s_top is not probed */
			leaf++;
		} else {
			UKT_EQ(s->stack_of, ukpev_event_info(er)->id);
			/* at the return: where s_mid returns to, then its caller's */
			UKT_EQ(s->f[0], truth[1]);
			UKT_EQ(s->f[1], top_ra[mid]);
			mid++;
		}
	}
	UKT_EQ(leaf, 2);
	UKT_EQ(mid, 3);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

UKT_CASE(stack_keys_fold)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *e;
	struct ukpev_error err;
	UKT_EQ(ukpev_event_create(a, "p:g/leaf s_leaf x=%di:u64", UKPEV_F_STACKS, &e, &err), 0);
	UKT_EQ(ukpev_event_soft_enable(e, 0), 1);
	UKT_EQ(ukpev_event_add_trigger(e, "hist:keys=common_stacktrace", &err), 0);
	for (int i = 0; i < 5; i++)
		s_top(1);
	for (int i = 0; i < 2; i++)
		s_mid(1);
	char *t = hist_text(r, 0, UKPEV_HIST_FOLDED);
	/* two stacks: ...;s_top;s_mid;s_leaf 5 and ...;s_mid;s_leaf 2 */
	char *l1 = strstr(t, ";s_top;s_mid;s_leaf 5\n");
	char *l2 = strstr(t, ";s_mid;s_leaf 2\n");
	if (!l1 || !l2 || (l2 >= l1 && l2 < l1 + strlen(";s_top;s_mid;s_leaf 5")))
		UKT_FAIL("folded:\n%s", t);
	free(t);
	t = hist_text(r, 0, UKPEV_HIST_KERNEL);
	UKT_ASSERT(strstr(t, "{ common_stacktrace:\n         s_leaf+0x0/"));
	UKT_ASSERT(strstr(t, "} hitcount:          5\n"));
	unsigned long long hits, dropped;
	unsigned ent;
	totals(t, &hits, &ent, &dropped);
	UKT_EQ(hits, 7);
	UKT_ASSERT(ent >= 2);	/* s_mid's two calls may be two call sites */
	free(t);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

/* the events' handlers stay lean; the stack-walking ones are separate */
UKT_CASE(lean_handlers_with_hist)
{
	extern int ukp_opt_handler_check(void *fn, char *why, size_t n);
	extern int ev_pre_handler(struct kprobe *, struct pt_regs *);
	extern int ev_ret_handler(struct kretprobe_instance *, struct pt_regs *);
	char why[256] = "";
	if (ukp_opt_handler_check((void *)ev_pre_handler, why, sizeof(why)))
		UKT_FAIL("ev_pre_handler is not lean: %s", why);
	if (ukp_opt_handler_check((void *)ev_ret_handler, why, sizeof(why)))
		UKT_FAIL("ev_ret_handler is not lean: %s", why);
}
