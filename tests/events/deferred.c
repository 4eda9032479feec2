/* SPDX-License-Identifier: MIT */
/*
 * Deferred events (a place in a library given by path, not loaded when
 * the event is made): unarmed and addressless until the library loads,
 * armed at each load in the state enable/disable left them, the objects
 * logged for the reader; with loads, unloads, event creation and removal
 * racing in threads and in a fork child, every call made while an event
 * is armed is recorded exactly once.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "evt.h"

static const char *dfr_so(void)
{
	static char p[PATH_MAX];
	if (!p[0]) {
		ssize_t n = readlink("/proc/self/exe", p, sizeof p - 32);
		UKT_ASSERT(n > 0);
		p[n] = 0;
		*strrchr(p, '/') = 0;	/* build/tests */
		*strrchr(p, '/') = 0;	/* build */
		strcat(p, "/solibs/dfr.so");
	}
	return p;
}

typedef int (*mix_fn)(int, long);

static void *load(mix_fn *mix)
{
	void *h = dlopen(dfr_so(), RTLD_NOW);
	UKT_ASSERT(h);
	*mix = (mix_fn)dlsym(h, "dfr_mix");
	UKT_ASSERT(*mix);
	return h;
}

/* records of event id in the area now, their a= (s64 arg 0) in order */
static unsigned drain_a(struct ukpev_reader *r, unsigned id, long *a, unsigned max)
{
	unsigned n = evt_drain(r), k = 0;
	const struct ukpev_event_info *ev = ukpev_reader_event(r, id);
	UKT_ASSERT(ev);
	for (unsigned i = 0; i < n; i++) {
		if (evt_recs[i].r.event != id)
			continue;
		uint64_t v;
		UKT_EQ(ukpev_value_u64(ev, &evt_recs[i].r, 0, 0, &v), 0);
		if (k < max)
			a[k] = (int)v;
		k++;
	}
	return k;
}

UKT_CASE(armed_at_each_load_in_its_state)
{
	UKT_ASSERT(!dlopen(dfr_so(), RTLD_NOW | RTLD_NOLOAD));
	struct ukpev_area *a = evt_area(0);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	char def[PATH_MAX + 64];
	snprintf(def, sizeof def, "p:g/mix %s:dfr_mix a=%%di:s32", dfr_so());
	struct ukpev_event *e;
	struct ukpev_error err;
	UKT_EQ(ukpev_event_create(a, def, UKPEV_F_DISABLED, &e, &err), 0);
	unsigned id = ukpev_event_info(e)->id;
	const struct ukpev_event_info *ri = ukpev_reader_event(r, id);
	UKT_ASSERT(ri && ri->deferred && ri->addr == 0);

	mix_fn mix;
	void *h = load(&mix);
	ri = ukpev_reader_event(r, id);
	UKT_EQ(ri->addr, (unsigned long)mix);	/* armed, the address known */
	mix(1, 0);				/* disabled: nothing */
	UKT_EQ(ukpev_event_enable(e), 0);
	mix(2, 0);
	UKT_EQ(ukpev_event_disable(e), 0);
	mix(3, 0);
	UKT_EQ(ukpev_event_enable(e), 0);
	mix(4, 0);
	long v[16];
	UKT_EQ(drain_a(r, id, v, 16), 2);
	UKT_EQ(v[0], 2);
	UKT_EQ(v[1], 4);
	/* the reader knows the library, where it is */
	Dl_info di;
	UKT_ASSERT(dladdr((void *)mix, &di));
	struct ukpev_object o;
	bool logged = false;
	for (unsigned i = 0; ukpev_reader_object(r, i, &o) == 0; i++)
		logged |= !strcmp(o.path, dfr_so()) && o.bias == (uint64_t)di.dli_fbase &&
			  o.lo <= (uint64_t)mix && (uint64_t)mix < o.hi;
	UKT_ASSERT(logged);
	UKT_EQ(dlclose(h), 0);

	/* unloaded: taken back; loaded again: armed, enabled as left,
	 * the constructor's call (a = -1) recorded */
	h = load(&mix);
	mix(5, 0);
	UKT_EQ(ukpev_event_disable(e), 0);
	mix(6, 0);
	UKT_EQ(dlclose(h), 0);
	h = load(&mix);		/* disabled now: the constructor unseen */
	UKT_EQ(ukpev_event_enable(e), 0);
	mix(7, 0);
	UKT_EQ(drain_a(r, id, v, 16), 3);
	UKT_EQ(v[0], -1);
	UKT_EQ(v[1], 5);
	UKT_EQ(v[2], 7);
	/* removed while loaded: the code is the file's again */
	ukpev_event_remove(e);
	mix(8, 0);
	UKT_EQ(evt_drain(r), 0);
	UKT_EQ(*(const unsigned char *)mix, 0x8d);	/* lea (dfr.so's first byte) */
	UKT_EQ(dlclose(h), 0);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

/* ---- racing -------------------------------------------------------------- */

#define ROUNDS 150
#define CALLS 20
static _Atomic bool stop;

static _Atomic pid_t loader_tid;
/* glibc's fork does not wait for another thread's dlopen or dlclose: a
 * child forked in their midst inherits the dynamic linker's list half
 * changed (its own dlopen may then fail an assertion, tracing or not).
 * So forks here come between them, the library loaded or not. */
static pthread_mutex_t dl_ops = PTHREAD_MUTEX_INITIALIZER;

static void *loader(void *arg)
{
	long *made = arg;
	atomic_store(&loader_tid, (pid_t)syscall(SYS_gettid));
	for (int k = 0; k < ROUNDS; k++) {
		mix_fn mix;
		pthread_mutex_lock(&dl_ops);
		void *h = load(&mix);
		pthread_mutex_unlock(&dl_ops);
		for (int j = 0; j < CALLS; j++)
			mix(k * CALLS + j, 0);
		pthread_mutex_lock(&dl_ops);
		dlclose(h);
		pthread_mutex_unlock(&dl_ops);
		*made += CALLS;
	}
	return NULL;
}

/* another deferred event on the same library made and removed over and
 * over, and a probe of the program's own */
NOIL void dfr_local(void)
{
	__asm__ volatile("");
}

static void *churner(void *arg)
{
	struct ukpev_area *a = arg;
	char def[PATH_MAX + 64];
	snprintf(def, sizeof def, "p:g/churn %s:dfr_mix", dfr_so());
	/* ids are not reused: 2 of the area's 1024 a turn */
	for (int k = 0; k < 400 && !atomic_load(&stop); k++) {
		struct ukpev_event *e = evt_create(a, def);
		struct ukpev_event *l = evt_create(a, "p:g/local dfr_local");
		dfr_local();
		ukpev_event_remove(l);
		ukpev_event_remove(e);
	}
	return NULL;
}

static unsigned long counted, child_calls, other;
static long next_a;
static unsigned long out_of_order;
static unsigned count_id;

static int count_cb(const struct ukpev_record *rec, void *arg)
{
	struct ukpev_reader *r = arg;
	if (rec->event != count_id)
		return 0;
	uint64_t u;
	UKT_EQ(ukpev_value_u64(ukpev_reader_event(r, count_id), rec, 0, 0, &u), 0);
	long v = (int)u;
	if (v == -1)
		return 0;	/* a constructor's */
	if (rec->tid != atomic_load(&loader_tid)) {
		if (v == 1)
			child_calls++;
		else
			other++;
		return 0;
	}
	if (v != next_a)
		out_of_order++;
	next_a = v + 1;
	counted++;
	return 0;
}

UKT_CASE_T(loads_unloads_and_event_churn_race, 120)
{
	struct ukpev_area *a = evt_area(8192);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_from_area(a, &r), 0);
	char def[PATH_MAX + 64];
	snprintf(def, sizeof def, "p:g/mix %s:dfr_mix a=%%di:s32", dfr_so());
	struct ukpev_event *e = evt_create(a, def);
	count_id = ukpev_event_info(e)->id;
	pthread_t lt, ct;
	long made = 0;
	UKT_EQ(pthread_create(&ct, NULL, churner, a), 0);
	UKT_EQ(pthread_create(&lt, NULL, loader, &made), 0);
	/* a fork child now and then: it loads, calls and exits well */
	int children = 0;
	for (int k = 0; k < 10; k++) {
		pthread_mutex_lock(&dl_ops);
		pid_t p = fork();
		pthread_mutex_unlock(&dl_ops);
		UKT_ASSERT(p >= 0);
		if (p == 0) {
			alarm(20);
			mix_fn mix;
			void *h = load(&mix);
			_exit(mix(1, 2) == 5 && dlclose(h) == 0 ? 0 : 1);
		}
		int st;
		UKT_EQ(waitpid(p, &st, 0), p);
		UKT_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		children++;
		while (ukpev_reader_poll(r, count_cb, r, 0) > 0)
			;
	}
	UKT_EQ(pthread_join(lt, NULL), 0);
	atomic_store(&stop, true);
	UKT_EQ(pthread_join(ct, NULL), 0);
	int n;
	while ((n = ukpev_reader_poll(r, count_cb, r, 0)) > 0)
		;
	UKT_EQ(n, 0);
	printf("  %d loads and unloads, %d fork children: %lu calls recorded\n", ROUNDS, children,
	       counted);
	/* every call of the loader thread's, in order; each child's one */
	UKT_EQ(ukpev_reader_lost(r), 0);
	UKT_EQ(counted, (unsigned long)made);
	UKT_EQ(out_of_order, 0);
	UKT_EQ(child_calls, (unsigned long)children);
	UKT_EQ(other, 0);
	ukpev_event_remove(e);
	ukpev_reader_close(r);
	ukpev_area_destroy(a);
}

/* ---- fork while the events core walks the loaded objects ---------------- */

static void *scanner(void *arg)
{
	(void)arg;
	char def[PATH_MAX + 64];
	snprintf(def, sizeof def, "p:g/scan %s:dfr_mix", dfr_so());
	/* each creation walks the dynamic linker's list (is the library
	 * loaded?) and scans the objects, as each new area does */
	while (!atomic_load(&stop)) {
		struct ukpev_area *a = evt_area(0);
		for (int k = 0; k < 10 && !atomic_load(&stop); k++)
			ukpev_event_remove(evt_create(a, def));
		ukpev_area_destroy(a);
	}
	return NULL;
}

/*
 * A child forked while another thread of ours is inside
 * dl_iterate_phdr() inherits the dynamic linker's lock held by a thread
 * it does not have: its first dlopen() hangs.  The events core's walks
 * of the object list hold the engine's fork guard, so forks come
 * between them.  No lock of ours is held in the child either: it makes
 * and removes an event of its own.
 */
UKT_CASE_T(fork_while_objects_are_walked, 120)
{
	pthread_t st;
	atomic_store(&stop, false);
	UKT_EQ(pthread_create(&st, NULL, scanner, NULL), 0);
	int bad = 0;
	for (int k = 0; k < 100 && !bad; k++) {
		pid_t p = fork();
		UKT_ASSERT(p >= 0);
		if (p == 0) {
			alarm(10);
			mix_fn mix;
			void *h = load(&mix);
			struct ukpev_area_opts o = { .sz = sizeof(o) };
			struct ukpev_area *a;
			struct ukpev_event *e;
			struct ukpev_error err;
			int ok = mix(1, 2) == 5 && ukpev_area_create(&o, &a) == 0 &&
				 ukpev_event_create(a, "p:g/childmix dfr_local", 0, &e, &err) == 0;
			if (ok)
				ukpev_area_destroy(a);
			_exit(ok && dlclose(h) == 0 ? 0 : 1);
		}
		int s;
		UKT_EQ(waitpid(p, &s, 0), p);
		if (!WIFEXITED(s) || WEXITSTATUS(s) != 0) {
			printf("  fork %d: child %s %d\n", k, WIFEXITED(s) ? "exit" : "signal",
			       WIFEXITED(s) ? WEXITSTATUS(s) : WTERMSIG(s));
			bad++;
		}
	}
	atomic_store(&stop, true);
	UKT_EQ(pthread_join(st, NULL), 0);
	UKT_EQ(bad, 0);
}
