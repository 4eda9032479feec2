/* SPDX-License-Identifier: MIT */
/*
 * Records and buffers: exact counts and per-thread order with threads,
 * fork children, lost events, filters, a reader in another process, and
 * probes on the C library's own functions.
 */
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "evt.h"
#include "events/ev_int.h"

volatile unsigned long sink;

NOIL void t_count(unsigned long i)
{
	sink = i;
}

NOIL void t_fs(long n, const char *s)
{
	sink = (unsigned long)n + (unsigned long)s;
}

static pid_t gettid_(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* ---- per-thread counting ---------------------------------------------------- */

#define NTH 4
struct tcount {
	pid_t tid[NTH + 2];
	unsigned long n[NTH + 2], next[NTH + 2], bad_order;
	unsigned long lost, other;
	const struct ukpev_event_info *ev;
};

static int count_cb(const struct ukpev_record *rec, void *arg)
{
	struct tcount *c = arg;
	if (rec->event == UKPEV_EVENT_LOST) {
		c->lost += rec->lost;
		return 0;
	}
	uint64_t v;
	if (ukpev_value_u64(c->ev, rec, 0, 0, &v)) {
		c->other++;
		return 0;
	}
	for (int i = 0; i < NTH + 2; i++) {
		if (c->tid[i] == 0)
			c->tid[i] = rec->tid;
		if (c->tid[i] == rec->tid) {
			if (v != c->next[i])
				c->bad_order++;
			c->next[i] = v + 1;
			c->n[i]++;
			return 0;
		}
	}
	c->other++;
	return 0;
}

static unsigned long per_thread;
static void *producer(void *arg)
{
	(void)arg;
	for (unsigned long i = 0; i < per_thread; i++)
		t_count(i);
	return NULL;
}

static void run_threads(struct ukpev_reader *r, struct tcount *c, bool drain_meanwhile)
{
	pthread_t th[NTH];
	for (int i = 0; i < NTH; i++)
		UKT_EQ(pthread_create(&th[i], NULL, producer, NULL), 0);
	if (drain_meanwhile) {
		/* the reader works while they record */
		for (int k = 0; k < 100000; k++) {
			if (ukpev_reader_poll(r, count_cb, c, 0) < 0)
				UKT_FAIL("poll");
			unsigned long tot = 0;
			for (int i = 0; i < NTH + 2; i++)
				tot += c->n[i];
			if (tot == NTH * per_thread)
				break;
			sched_yield();
		}
	}
	for (int i = 0; i < NTH; i++)
		pthread_join(th[i], NULL);
	while (ukpev_reader_poll(r, count_cb, c, 0) > 0)
		;
}

static void check_threads(struct tcount *c)
{
	UKT_EQ(c->other, 0);
	UKT_EQ(c->lost, 0);
	UKT_EQ(c->bad_order, 0);
	for (int i = 0; i < NTH; i++) {
		UKT_ASSERT(c->tid[i] != 0);
		UKT_EQ(c->n[i], per_thread);
	}
	UKT_EQ(c->tid[NTH], 0);
}

UKT_CASE(threads_exact_and_ordered)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *e = evt_create(a, "p t_count i=%di:u64");
	struct tcount c = { .ev = ukpev_event_info(e) };
	per_thread = 10000;
	run_threads(r, &c, false);
	check_threads(&c);
	struct ukpev_stats st;
	UKT_EQ(ukpev_reader_stats(r, ukpev_event_info(e)->id, &st), 0);
	UKT_EQ(st.hits, NTH * per_thread);
	UKT_EQ(st.misses, 0);
	UKT_EQ(ukpev_reader_lost(r), 0);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

UKT_CASE_T(threads_with_a_reader_draining, 60)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *e = evt_create(a, "p t_count i=%di:u64 s=+0(%di):string");
	struct tcount c = { .ev = ukpev_event_info(e) };
	per_thread = 200000;
	run_threads(r, &c, true);
	check_threads(&c);
	UKT_EQ(ukpev_reader_lost(r), 0);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

/* ---- fork --------------------------------------------------------------------- */

UKT_CASE(fork_child_has_its_own_buffer)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *e = evt_create(a, "p t_count i=%di:u64");
	t_count(1);
	pid_t child = fork();
	UKT_ASSERT(child >= 0);
	if (child == 0) {
		for (int i = 0; i < 3; i++)
			t_count(100 + (unsigned long)i);
		_exit(0);
	}
	int st;
	UKT_EQ(waitpid(child, &st, 0), child);
	UKT_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	t_count(2);
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(r), 5);
	const struct ukpev_event_info *ev = ukpev_event_info(e);
	unsigned long parent_vals[2], child_vals[3];
	unsigned np = 0, nc = 0;
	for (unsigned i = 0; i < evt_n; i++) {
		uint64_t v;
		UKT_EQ(ukpev_value_u64(ev, &evt_recs[i].r, 0, 0, &v), 0);
		if (evt_recs[i].r.pid == getpid()) {
			UKT_EQ(evt_recs[i].r.tid, gettid_());
			UKT_ASSERT(np < 2);
			parent_vals[np++] = v;
		} else {
			UKT_EQ(evt_recs[i].r.pid, child);
			UKT_EQ(evt_recs[i].r.tid, child);
			UKT_ASSERT(nc < 3);
			child_vals[nc++] = v;
		}
	}
	UKT_EQ(np, 2);
	UKT_EQ(nc, 3);
	UKT_EQ(parent_vals[0], 1);
	UKT_EQ(parent_vals[1], 2);
	for (unsigned i = 0; i < 3; i++)
		UKT_EQ(child_vals[i], 100 + i);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

/* ---- lost events ---------------------------------------------------------------- */

UKT_CASE(full_buffer_counts_lost_events)
{
	/* 128 KiB: two sub-buffers of 2047 records of 32 bytes */
	struct ukpev_area *a = evt_area(128);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *e = evt_create(a, "p t_count i=%di:u64");
	const struct ukpev_event_info *ev = ukpev_event_info(e);
	for (unsigned long i = 0; i < 10000; i++)
		t_count(i);
	unsigned per_sb = (unsigned)((UKPEV_SUBBUF_SIZE - sizeof(struct ev_subbuf)) / 32);
	unsigned kept = 2 * per_sb, lost = 10000 - kept;
	evt_lost = 0;
	UKT_EQ(evt_drain(r), kept < EVT_MAX ? kept : EVT_MAX);
	UKT_EQ(evt_lost, 0);	/* not known as a marker yet */
	UKT_EQ(ukpev_reader_lost(r), lost);
	struct ukpev_stats st;
	UKT_EQ(ukpev_reader_stats(r, ev->id, &st), 0);
	UKT_EQ(st.hits, 10000);
	UKT_EQ(st.misses, lost);
	/* the records kept are the first ones, in order */
	for (unsigned i = 0; i < evt_n; i++) {
		uint64_t v;
		UKT_EQ(ukpev_value_u64(ev, &evt_recs[i].r, 0, 0, &v), 0);
		UKT_EQ(v, i);
	}
	/* room again: the next record is preceded by the marker */
	t_count(77777);
	evt_lost = 0;
	UKT_EQ(evt_drain(r), 1);
	UKT_EQ(evt_lost, lost);
	uint64_t v;
	UKT_EQ(ukpev_value_u64(ev, &evt_recs[0].r, 0, 0, &v), 0);
	UKT_EQ(v, 77777);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

/* ---- filters ------------------------------------------------------------------------ */

static unsigned filtered_run(struct ukpev_reader *r, struct ukpev_event *e, const char *expr)
{
	struct ukpev_error err;
	if (ukpev_event_set_filter(e, expr, &err))
		UKT_FAIL("filter '%s': %s at %d", expr, ukpev_strerror(err.code), err.offset);
	ukpev_event_enable(e);
	for (long i = 0; i < 20; i++)
		t_fs(i, i % 2 ? "abc" : "xyz");
	t_fs(-1, "ab");
	t_fs(-2, NULL);
	ukpev_event_disable(e);
	return evt_drain(r);
}

UKT_CASE(filters)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *e = evt_create(a, "p:f/fs t_fs n=%di:s32 s=+0(%si):string u=%di:u8");
	const struct ukpev_event_info *ev = ukpev_event_info(e);
	char pid_eq[64], pid_ne[64];
	snprintf(pid_eq, sizeof(pid_eq), "common_pid == %d", gettid_());
	snprintf(pid_ne, sizeof(pid_ne), "common_pid != %d", gettid_());
	static struct { const char *expr; unsigned n; } t[] = {
		{ "n > 5 && n < 10", 4 },
		{ "n >= 5 && n <= 10", 6 },
		{ "n < 0", 2 },
		{ "u > 200", 2 },		/* -1, -2 as u8 */
		{ "n == 3 || n == 4 || n == -2", 3 },
		{ "!(n & 1) && n >= 0", 10 },
		{ "s == \"abc\"", 10 },
		{ "s != \"abc\"", 11 },		/* a (fault) holds no comparison */
		{ "s ~ \"ab*\"", 11 },
		{ "s ~ \"?b\"", 1 },
		{ "s ~ \"[xa]*\"", 21 },
		{ "s ~ \"*[!c]\"", 11 },
		{ "s == ab", 1 },
		{ "(s ~ \"x*\" || n == -1) && n != 0", 10 },
		{ NULL, 22 },			/* pid_eq */
		{ NULL, 0 },			/* pid_ne */
		{ "", 22 },			/* cleared */
	};
	unsigned nt = sizeof(t) / sizeof(t[0]);
	t[nt - 3].expr = pid_eq;
	t[nt - 2].expr = pid_ne;
	uint64_t hits = 0, recorded = 0;
	for (unsigned i = 0; i < nt; i++) {
		unsigned n = filtered_run(r, e, t[i].expr);
		if (n != t[i].n)
			UKT_FAIL("filter '%s': %u records, want %u", t[i].expr, n, t[i].n);
		hits += 22;
		recorded += n;
	}
	struct ukpev_stats st;
	UKT_EQ(ukpev_reader_stats(r, ev->id, &st), 0);
	UKT_EQ(st.hits, hits);
	UKT_EQ(st.filtered, hits - recorded);
	UKT_EQ(st.misses, 0);
	/* the filter is published with the event */
	UKT_EQ(ukpev_event_set_filter(e, "n == 1", NULL), 0);
	struct ukpev_reader *r2;
	UKT_EQ(ukpev_reader_from_area(a, &r2), 0);
	UKT_STREQ(ukpev_reader_event(r2, ev->id)->filter, "n == 1");
	ukpev_reader_close(r2);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

/* ---- a reader in another process ------------------------------------------------------ */

UKT_CASE(outside_reader)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_event *e = evt_create(a, "p:out/ev t_fs n=%di:s32 s=+0(%si):string");
	struct ukpev_event *e2 = evt_create(a, "r t_fs%return");
	t_fs(7, "seven");
	t_fs(-8, NULL);
	ukpev_event_disable(e);
	ukpev_event_disable(e2);
	int fds[2];
	UKT_EQ(pipe(fds), 0);
	pid_t parent = getpid(), child = fork();
	UKT_ASSERT(child >= 0);
	if (child == 0) {
		/* as the command does: the target's fd through /proc */
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", parent, ukpev_area_fd(a));
		int fd = open(path, O_RDWR);
		struct ukpev_reader *r;
		if (fd < 0 || ukpev_reader_open(fd, &r))
			_exit(3);
		/* mapped elsewhere than the area the parent made (inherited here) */
		if (*(void **)r == (void *)a->hdr)
			_exit(4);
		evt_drain(r);
		FILE *out = fdopen(fds[1], "w");
		for (unsigned i = 0; i < evt_n; i++) {
			const struct ukpev_event_info *ev = ukpev_reader_event(r, evt_recs[i].r.event);
			fprintf(out, "%s/%s %c tid=%d%s\n", ev->group, ev->event, ev->kind,
				evt_recs[i].r.tid, evt_fmt(r, i, UKPEV_FMT_FTRACE));
		}
		fclose(out);
		ukpev_reader_close(r);
		_exit(0);
	}
	close(fds[1]);
	char buf[1024] = "";
	size_t got = 0;
	ssize_t k;
	while ((k = read(fds[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)k;
	buf[got] = 0;
	int st;
	UKT_EQ(waitpid(child, &st, 0), child);
	UKT_EQ(WEXITSTATUS(st), 0);
	char want[1024];
	int me = gettid_();
	snprintf(want, sizeof(want),
		 "out/ev p tid=%d n=7 s=\"seven\"\n"
		 "ukprobes/r_t_fs_0 r tid=%d\n"
		 "out/ev p tid=%d n=-8 s=(fault)\n"
		 "ukprobes/r_t_fs_0 r tid=%d\n", me, me, me, me);
	UKT_STREQ(buf, want);
	ukpev_area_destroy(a);
}

/* ---- enable, disable, remove ------------------------------------------------------------ */

UKT_CASE(enable_disable_remove)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *e;
	struct ukpev_error err;
	UKT_EQ(ukpev_event_create(a, "p:g/cnt t_count i=%di:u64", UKPEV_F_DISABLED, &e, &err), 0);
	t_count(1);
	UKT_EQ(evt_drain(r), 0);
	UKT_EQ(ukpev_event_enable(e), 0);
	t_count(2);
	UKT_EQ(ukpev_event_disable(e), 0);
	t_count(3);
	UKT_EQ(ukpev_event_enable(e), 0);
	t_count(4);
	UKT_ASSERT(ukpev_event_find(a, "g/cnt") == e);
	UKT_ASSERT(ukpev_event_find(a, "cnt") == e);
	UKT_ASSERT(ukpev_event_find(a, "x/cnt") == NULL);
	unsigned id = ukpev_event_info(e)->id;
	ukpev_event_remove(e);
	t_count(5);
	UKT_EQ(evt_drain(r), 2);
	/* removed, its description stays: the records decode */
	const struct ukpev_event_info *ev = ukpev_reader_event(r, id);
	UKT_ASSERT(ev);
	uint64_t v;
	UKT_EQ(ukpev_value_u64(ev, &evt_recs[0].r, 0, 0, &v), 0);
	UKT_EQ(v, 2);
	UKT_EQ(ukpev_value_u64(ev, &evt_recs[1].r, 0, 0, &v), 0);
	UKT_EQ(v, 4);
	/* the name is free again */
	e = evt_create(a, "p:g/cnt t_count");
	UKT_ASSERT(ukpev_event_info(e)->id != id);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

/* ---- code nobody here wrote: the C library ---------------------------------------------- */

UKT_CASE(libc_functions)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	evt_drain(r);	/* evt_recs allocated before any probe */
	struct ukpev_event *m = evt_create(a, "p:libc/malloc libc.so.6:malloc size=%di:u64");
	struct ukpev_event *mr = evt_create(a, "r:libc/malloc_ret libc.so.6:malloc ret=$retval "
					    "size=$arg1:u64");
	struct ukpev_event *s = evt_create(a, "p:libc/strlen libc.so.6:strlen s=+0(%di):string");
	static char text[] = "hello-ukprobes";
	char *volatile tp = text;
	void *p = malloc(12345);
	size_t len = strlen(tp);
	ukpev_event_disable(m);
	ukpev_event_disable(mr);
	ukpev_event_disable(s);
	UKT_EQ(len, 14);
	evt_drain(r);
	bool saw_malloc = false, saw_ret = false, saw_strlen = false;
	char want_ret[128];
	snprintf(want_ret, sizeof(want_ret), " ret=%p size=12345", p);
	for (unsigned i = 0; i < evt_n; i++) {
		if (evt_recs[i].r.tid != gettid_())
			continue;
		const char *f = evt_fmt(r, i, UKPEV_FMT_FTRACE);
		unsigned id = evt_recs[i].r.event;
		if (id == ukpev_event_info(m)->id && !strcmp(f, " size=12345"))
			saw_malloc = true;
		if (id == ukpev_event_info(mr)->id && !strcmp(f, want_ret))
			saw_ret = true;
		if (id == ukpev_event_info(s)->id && !strcmp(f, " s=\"hello-ukprobes\""))
			saw_strlen = true;
	}
	UKT_ASSERT(saw_malloc);
	UKT_ASSERT(saw_ret);
	UKT_ASSERT(saw_strlen);
	/* where malloc is, as the probe names it */
	char sym[128];
	ukpev_symbolize_self(ukpev_event_info(m)->addr, sym, sizeof(sym), NULL);
	UKT_ASSERT(!strncmp(sym, "malloc+0x0/", 11) || !strncmp(sym, "__libc_malloc+0x0/", 18));
	free(p);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

/* ---- many threads --------------------------------------------------------------------- */

static pthread_barrier_t many_bar;
static void *one_event(void *arg)
{
	t_count((unsigned long)arg);
	pthread_barrier_wait(&many_bar);
	return NULL;
}

static void *one_event_exit(void *arg)
{
	t_count((unsigned long)arg);
	return NULL;
}

/* 1,000 threads alive at once, each with its buffer, in the default area */
UKT_CASE_T(thousand_threads, 120)
{
	struct ukpev_area *a;
	UKT_EQ(ukpev_area_create(NULL, &a), 0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	evt_create(a, "p t_count i=%di:u64");
	enum { N = 1000 };
	static pthread_t th[N];
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 64 << 10);
	UKT_EQ(pthread_barrier_init(&many_bar, NULL, N + 1), 0);
	for (unsigned long i = 0; i < N; i++)
		UKT_EQ(pthread_create(&th[i], &at, one_event, (void *)i), 0);
	pthread_barrier_wait(&many_bar);
	/* all alive, each recorded: the memory the area uses */
	struct stat st;
	UKT_EQ(fstat(ukpev_area_fd(a), &st), 0);
	unsigned long used = (unsigned long)st.st_blocks * 512;
	UKT_EQ(st.st_size, (off_t)UKPEV_DEFAULT_AREA_MB << 20);	/* all of it, at most */
	UKT_ASSERT(used <= (1UL << 30));
	UKT_ASSERT(used >= N * 4096UL);	/* sparse: what was written */
	fprintf(stderr, "  %d threads: %lu KiB of the area in use\n", N, used >> 10);
	for (int i = 0; i < N; i++)
		pthread_join(th[i], NULL);
	UKT_EQ(evt_drain(r), N);
	static bool seen[N];
	for (unsigned i = 0; i < N; i++) {
		const struct ukpev_event_info *ev = ukpev_reader_event(r, evt_recs[i].r.event);
		uint64_t v;
		UKT_EQ(ukpev_value_u64(ev, &evt_recs[i].r, 0, 0, &v), 0);
		UKT_ASSERT(v < N && !seen[v]);
		seen[v] = true;
	}
	UKT_EQ(ukpev_reader_lost(r), 0);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

/* threads that come and go: their blocks are retired, reused, and their
 * counts kept */
UKT_CASE_T(thread_churn_reuses_blocks, 120)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *e = evt_create(a, "p t_count i=%di:u64");
	unsigned long total = 0;
	for (unsigned long b = 0; b < 40; b++) {
		pthread_t th[25];
		for (unsigned long i = 0; i < 25; i++)
			UKT_EQ(pthread_create(&th[i], NULL, one_event_exit, (void *)(b * 25 + i)), 0);
		for (int i = 0; i < 25; i++)
			pthread_join(th[i], NULL);
		/* the reader asks every 50 ms which threads are gone */
		double until = ukt_now() + 0.06;
		total += evt_drain(r);
		while (ukt_now() < until)
			sched_yield();
		total += evt_drain(r);
	}
	UKT_EQ(total, 1000);
	UKT_ASSERT(atomic_load(&a->hdr->threads_hw) < 200);
	struct ukpev_stats st;
	UKT_EQ(ukpev_reader_stats(r, ukpev_event_info(e)->id, &st), 0);
	UKT_EQ(st.hits, 1000);
	UKT_EQ(st.misses, 0);
	UKT_EQ(ukpev_reader_lost(r), 0);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

/* ---- recursion: an event hit inside another probe's handler -------------------------- */

NOIL void t_inner(unsigned long v)
{
	sink = v;
}

NOIL void t_outer(void)
{
	sink = 0;
}

static int outer_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	t_inner(99);	/* its event's handler cannot run here: a miss */
	return 0;
}

UKT_CASE(recursion_is_a_miss)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *e = evt_create(a, "p t_inner v=%di:u64");
	struct kprobe kp = { .symbol_name = "t_outer", .pre_handler = outer_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	t_outer();
	t_inner(1);
	unregister_kprobe(&kp);
	ukpev_event_disable(e);
	UKT_EQ(evt_drain(r), 1);
	const struct ukpev_event_info *ev = ukpev_event_info(e);
	uint64_t v;
	UKT_EQ(ukpev_value_u64(ev, &evt_recs[0].r, 0, 0, &v), 0);
	UKT_EQ(v, 1);
	UKT_EQ(ukpev_area_sync(a), 0);
	struct ukpev_stats st;
	UKT_EQ(ukpev_reader_stats(r, ev->id, &st), 0);
	UKT_EQ(st.hits, 2);
	UKT_EQ(st.misses, 1);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

/* losses at the end of a thread: told by a flush, or when the thread is
 * gone, once */
static struct { pid_t tid; uint64_t lost; unsigned lost_records, records; } fl;
static int flush_cb(const struct ukpev_record *rec, void *arg)
{
	(void)arg;
	if (rec->event == UKPEV_EVENT_LOST) {
		fl.tid = rec->tid;
		fl.lost += rec->lost;
		fl.lost_records++;
	} else {
		fl.records++;
	}
	return 0;
}

static void *fill_and_exit(void *arg)
{
	(void)arg;
	for (unsigned long i = 0; i < 10000; i++)
		t_count(i);
	return (void *)(long)syscall(SYS_gettid);
}

UKT_CASE(final_losses_are_told)
{
	struct ukpev_area *a = evt_area(128);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	evt_create(a, "p t_count i=%di:u64");
	unsigned per_sb = (unsigned)((UKPEV_SUBBUF_SIZE - sizeof(struct ev_subbuf)) / 32);
	unsigned kept = 2 * per_sb, lost = 10000 - kept;
	/* this thread: a flush tells its last losses */
	fill_and_exit(NULL);
	memset(&fl, 0, sizeof(fl));
	UKT_EQ(ukpev_reader_flush(r, flush_cb, NULL), (int)kept + 1);
	UKT_EQ(fl.records, kept);
	UKT_EQ(fl.lost_records, 1);
	UKT_EQ(fl.lost, lost);
	UKT_EQ(fl.tid, gettid_());
	/* and not again when the thread's own marker comes */
	t_count(1);
	memset(&fl, 0, sizeof(fl));
	UKT_EQ(ukpev_reader_flush(r, flush_cb, NULL), 1);
	UKT_EQ(fl.records, 1);
	UKT_EQ(fl.lost_records, 0);
	/* a thread that is gone: told when its block is retired */
	pthread_t th;
	void *tid;
	UKT_EQ(pthread_create(&th, NULL, fill_and_exit, NULL), 0);
	pthread_join(th, &tid);
	memset(&fl, 0, sizeof(fl));
	/* the reader asks every 50 ms which threads are gone: poll until it
	 * has (bounded generously; the count is what is checked) */
	double until = ukt_now() + 10;
	while (!fl.lost_records && ukt_now() < until)
		ukpev_reader_poll(r, flush_cb, NULL, 0);
	UKT_EQ(fl.records, kept);
	UKT_EQ(fl.lost_records, 1);
	UKT_EQ(fl.lost, lost);
	UKT_EQ(fl.tid, (pid_t)(long)tid);
	UKT_EQ(ukpev_reader_lost(r), 2 * lost);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

/* a muted thread records and counts nothing; others go on */
static void *count_three(void *arg)
{
	(void)arg;
	for (unsigned long i = 0; i < 3; i++)
		t_count(i);
	return NULL;
}

UKT_CASE(muted_thread)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *e = evt_create(a, "p t_count i=%di:u64");
	t_count(1);
	UKT_EQ(ukpev_thread_mute(1), 0);
	t_count(2);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, count_three, NULL), 0);
	pthread_join(th, NULL);
	UKT_EQ(ukpev_thread_mute(0), 1);
	t_count(3);
	UKT_EQ(evt_drain(r), 5);
	unsigned mine = 0;
	for (unsigned i = 0; i < evt_n; i++)
		if (evt_recs[i].r.tid == gettid_())
			mine++;
	UKT_EQ(mine, 2);
	struct ukpev_stats st;
	UKT_EQ(ukpev_reader_stats(r, ukpev_event_info(e)->id, &st), 0);
	UKT_EQ(st.hits, 5);
	UKT_EQ(st.misses, 0);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

/* a thread named after its first event: its records carry the new name */
static void *rename_after(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, "before");
	t_count(1);
	prctl(PR_SET_NAME, "after");
	t_count(2);
	return NULL;
}

UKT_CASE(thread_renamed)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	evt_create(a, "p t_count c=$comm");
	/* alive when the reader looks: its name now */
	rename_after(NULL);
	UKT_EQ(evt_drain(r), 2);
	UKT_STREQ(evt_recs[0].r.comm, "after");
	UKT_STREQ(evt_recs[1].r.comm, "after");
	/* $comm is the name at the thread's first event */
	UKT_STREQ(evt_fmt(r, 1, UKPEV_FMT_FTRACE), " c=\"before\"");
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

/* the whole pool taken: events are lost, not blocked, and the pool is
 * whole again once read */
UKT_CASE(pool_exhausted)
{
	struct ukpev_area_opts o = { .sz = sizeof(o), .area_mb = 1 };
	struct ukpev_area *a;
	UKT_EQ(ukpev_area_create(&o, &a), 0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *e = evt_create(a, "p t_count i=%di:u64");
	uint32_t nsub = a->hdr->nsubbufs;
	unsigned per_sb = (unsigned)((UKPEV_SUBBUF_SIZE - sizeof(struct ev_subbuf)) / 32);
	UKT_ASSERT(nsub >= 2 && nsub < 20);
	for (int round = 0; round < 3; round++) {
		for (unsigned long i = 0; i < 100000; i++)
			t_count(i);
		memset(&fl, 0, sizeof(fl));
		UKT_ASSERT(ukpev_reader_flush(r, flush_cb, NULL) > 0);
		/* the first round starts with an empty pool; the later ones
		 * after a marker and with the current sub-buffer partly used */
		if (round == 0) {
			UKT_EQ(fl.records, nsub * per_sb);
			UKT_EQ(fl.lost, 100000 - nsub * per_sb);
		}
		UKT_EQ(fl.records + fl.lost, 100000);
		UKT_EQ(atomic_load(&a->hdr->subbufs_hw), nsub);
	}
	struct ukpev_stats st;
	UKT_EQ(ukpev_reader_stats(r, ukpev_event_info(e)->id, &st), 0);
	UKT_EQ(st.hits, 300000);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

NOIL long t_twice(long x)
{
	sink = (unsigned long)x;
	return 2 * x;
}

UKT_CASE(return_event_created_disabled)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *e;
	struct ukpev_error err;
	UKT_EQ(ukpev_event_create(a, "r t_twice ret=$retval:s64 x=$arg1:s64", UKPEV_F_DISABLED, &e,
				  &err), 0);
	t_twice(1);
	UKT_EQ(ukpev_event_enable(e), 0);
	t_twice(2);
	UKT_EQ(ukpev_event_disable(e), 0);
	t_twice(3);
	UKT_EQ(evt_drain(r), 1);
	UKT_STREQ(evt_fmt(r, 0, UKPEV_FMT_FTRACE), " ret=4 x=2");
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

/* ---- soft enable, tracing on/off, triggers ------------------------------------------- */

static unsigned count_event(unsigned id)
{
	unsigned n = 0;
	for (unsigned i = 0; i < evt_n; i++)
		n += evt_recs[i].r.event == id;
	return n;
}

UKT_CASE(soft_enable_and_tracing)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *e = evt_create(a, "p t_count i=%di:u64");
	UKT_EQ(ukpev_event_soft_enable(e, 0), 1);
	t_count(1);
	UKT_EQ(ukpev_event_soft_enable(e, 1), 0);
	t_count(2);
	UKT_EQ(ukpev_area_tracing(a, 0), 1);
	UKT_EQ(ukpev_area_tracing(a, -1), 0);
	t_count(3);
	UKT_EQ(ukpev_area_tracing(a, 1), 0);
	t_count(4);
	UKT_EQ(evt_drain(r), 2);
	UKT_STREQ(evt_fmt(r, 0, UKPEV_FMT_FTRACE), " i=2");
	UKT_STREQ(evt_fmt(r, 1, UKPEV_FMT_FTRACE), " i=4");
	struct ukpev_stats st;
	UKT_EQ(ukpev_reader_stats(r, ukpev_event_info(e)->id, &st), 0);
	UKT_EQ(st.hits, 4);
	UKT_EQ(st.misses, 0);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

UKT_CASE(triggers)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	struct ukpev_event *ea = evt_create(a, "p:g/a t_count i=%di:u64");
	struct ukpev_event *eb = evt_create(a, "p:g/b t_fs n=%di:s32");
	unsigned ida = ukpev_event_info(ea)->id, idb = ukpev_event_info(eb)->id;
	struct ukpev_error err;
	/* b on from a's hit with i == 3; off again at i == 5, once */
	UKT_EQ(ukpev_event_soft_enable(eb, 0), 1);
	UKT_EQ(ukpev_event_add_trigger(ea, "enable_event:g:b if i == 3", &err), 0);
	UKT_EQ(ukpev_event_add_trigger(ea, "disable_event:g:b:1 if i >= 5", &err), 0);
	for (long i = 0; i < 8; i++) {
		t_count((unsigned long)i);
		t_fs(i, "x");
	}
	UKT_EQ(evt_drain(r), 8 + 2);	/* a: all; b: 3, 4 */
	UKT_EQ(count_event(ida), 8);
	UKT_EQ(count_event(idb), 2);
	/* b was switched off at i == 5; that trigger's count is used up, so
	 * b stays as it is set now */
	UKT_EQ(ukpev_event_soft_enable(eb, 1), 0);
	t_count(6);
	t_fs(9, "x");
	UKT_EQ(evt_drain(r), 2);
	ukpev_event_clear_triggers(ea);
	/* traceoff with a condition: that hit recorded (the kernel runs such
	 * a trigger after the record), the rest not */
	UKT_EQ(ukpev_event_add_trigger(eb, "traceoff:1 if n == 2", &err), 0);
	for (long i = 0; i < 4; i++)
		t_fs(i, "x");
	UKT_EQ(ukpev_area_tracing(a, -1), 0);
	UKT_EQ(evt_drain(r), 3);	/* n 0, 1, 2 */
	/* and one without: before the record, so that hit goes unrecorded */
	ukpev_event_clear_triggers(eb);
	UKT_EQ(ukpev_area_tracing(a, 1), 0);
	UKT_EQ(ukpev_event_add_trigger(eb, "traceoff:1", &err), 0);
	t_fs(5, "x");
	t_fs(6, "x");
	UKT_EQ(evt_drain(r), 0);
	UKT_EQ(ukpev_area_tracing(a, -1), 0);
	UKT_EQ(ukpev_event_add_trigger(ea, "traceon", &err), 0);
	t_fs(7, "x");	/* off */
	t_count(1);	/* on again (a's hit recorded: triggers run first) */
	t_fs(8, "x");
	UKT_EQ(evt_drain(r), 2);
	UKT_EQ(ukpev_area_tracing(a, -1), 1);
	/* a removed event's triggers go: a's hits go on harmlessly */
	UKT_EQ(ukpev_event_add_trigger(ea, "disable_event:g:b", &err), 0);
	ukpev_event_remove(eb);
	t_count(2);
	UKT_EQ(evt_drain(r), 1);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

UKT_CASE(bad_triggers)
{
	struct ukpev_area *a = evt_area(0);
	struct ukpev_event *ea = evt_create(a, "p:g/a t_count i=%di:u64");
	evt_create(a, "p:g/b t_fs");
	static const struct { const char *t; int r, code, off; } bad[] = {
		{ "bogus", -EINVAL, UKPEV_E_BAD_TRIGGER, 0 },
		{ "traceoff:x", -EINVAL, UKPEV_E_TRIGGER_COUNT, 9 },
		{ "traceoff:0", -EINVAL, UKPEV_E_TRIGGER_COUNT, 9 },
		{ "traceoff:1:2", -EINVAL, UKPEV_E_BAD_TRIGGER, 11 },
		{ "enable_event:g", -EINVAL, UKPEV_E_BAD_TRIGGER, 14 },
		{ "enable_event::b", -EINVAL, UKPEV_E_BAD_TRIGGER, 13 },
		{ "enable_event:g:nope", -EINVAL, UKPEV_E_FILTER_NO_EVENT, 13 },
		{ "traceoff if nofield == 1", -EINVAL, UKPEV_E_FILTER_FIELD, 12 },
		{ "traceon if i ==", -EINVAL, UKPEV_E_FILTER_MISSING_VAL, 15 },
		{ "stacktrace", -EOPNOTSUPP, UKPEV_E_TRIGGER_NO_STACKS, 0 },
		{ "hist:keys=common_stacktrace", -EOPNOTSUPP, UKPEV_E_TRIGGER_NO_STACKS, 0 },
		{ "snapshot", -EOPNOTSUPP, UKPEV_E_BAD_TRIGGER, 0 },
		{ "hist", -EINVAL, UKPEV_E_HIST_NO_KEYS, 4 },
		{ "hist:vals=i", -EINVAL, UKPEV_E_HIST_NO_KEYS, 5 },
		{ "hist:keys=nofield", -EINVAL, UKPEV_E_HIST_FIELD, 10 },
		{ "hist:keys=i.bogus", -EINVAL, UKPEV_E_HIST_MODIFIER, 12 },
		{ "hist:keys=i.buckets", -EINVAL, UKPEV_E_HIST_MODIFIER, 12 },
		{ "hist:keys=i.buckets=0", -EINVAL, UKPEV_E_HIST_MODIFIER, 12 },
		{ "hist:keys=i:vals=common_stacktrace", -EINVAL, UKPEV_E_HIST_FIELD_TYPE, 17 },
		{ "hist:keys=i:sort=x", -EINVAL, UKPEV_E_HIST_SORT, 17 },
		{ "hist:keys=i:size=0", -EINVAL, UKPEV_E_HIST_SIZE, 17 },
		{ "hist:keys=i:size=1000000", -EINVAL, UKPEV_E_HIST_SIZE, 17 },
		{ "hist:keys=i:frob=1", -EINVAL, UKPEV_E_HIST_ATTR, 12 },
		{ "hist:keys=i,i,i,i", -EINVAL, UKPEV_E_HIST_TOO_MANY, 16 },
		{ "hist:keys=i if nofield == 1", -EINVAL, UKPEV_E_FILTER_FIELD, 15 },
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ukpev_error err;
		int r = ukpev_event_add_trigger(ea, bad[i].t, &err);
		if (r != bad[i].r || err.code != bad[i].code || err.offset != bad[i].off)
			UKT_FAIL("'%s': %d \"%s\" at %d", bad[i].t, r, ukpev_strerror(err.code),
				 err.offset);
	}
	ukpev_area_destroy(a);
}
