/* SPDX-License-Identifier: MIT */
/*
 * The shared area (a memfd holding every thread's records and the events'
 * descriptions) and its reader, which may be another process: nothing in
 * the area is a pointer.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/rseq.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <cpuid.h>
#include <fcntl.h>
#include "ev_int.h"

_Atomic uint32_t ev_fork_gen = 1;
int ev_cpu_mode = EV_CPU_RSEQ;

static pthread_mutex_t area_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ukpev_area *areas[EV_MAX_AREAS];	/* area_lock */
static uint32_t area_keys;			/* area_lock */

static uint64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

/* A TSC reading and the clock at the same moment: the clock read between
 * two TSC readings close together (else again: preempted, or the clock's
 * first call faulting its pages in). */
static void clock_pair(uint64_t *tsc, uint64_t *ns)
{
	for (int i = 0; i < 100; i++) {
		uint64_t a = rdtsc(), n = mono_ns(), b = rdtsc();
		*tsc = a + (b - a) / 2;
		*ns = n;
		if (b - a < 2000 && i > 0)
			return;
	}
}

/* ns per TSC tick << 32, from two samples some time apart */
static uint64_t tsc_mult(uint64_t t0, uint64_t n0, uint64_t t1, uint64_t n1)
{
	if (t1 <= t0)
		return 0;
	return (uint64_t)(((unsigned __int128)(n1 - n0) << 32) / (t1 - t0));
}

/* Can records carry the TSC?  The kernel keeps time with it (the
 * clocksource is tsc), so it runs at a constant rate on every CPU. */
static bool tsc_usable(void)
{
	if (getenv("UKPROBES_EVENTS_CLOCK") && !strcmp(getenv("UKPROBES_EVENTS_CLOCK"), "mono"))
		return false;
	FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
	char buf[32] = "";
	if (!f)
		return false;
	bool ok = fgets(buf, sizeof(buf), f) && !strncmp(buf, "tsc", 3);
	fclose(f);
	return ok;
}

static void at_fork_child(void)
{
	atomic_fetch_add(&ev_fork_gen, 1);
}

static void init_once(void)
{
	/* cpu numbers: rseq (one load) if glibc registered it, else rdpid,
	 * else rdtscp */
	const struct rseq *rs = (const struct rseq *)(void *)
		((char *)__builtin_thread_pointer() + __rseq_offset);
	unsigned a, b, c, d;
	if (__rseq_size > 0 && (int32_t)rs->cpu_id >= 0)
		ev_cpu_mode = EV_CPU_RSEQ;
	else if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 22)))
		ev_cpu_mode = EV_CPU_RDPID;
	else
		ev_cpu_mode = EV_CPU_RDTSCP;
	pthread_atfork(NULL, NULL, at_fork_child);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

void *ev_heap_alloc(struct ev_area_hdr *h, size_t n, uint64_t *off)
{
	n = (n + 7) & ~(size_t)7;
	uint64_t at = atomic_fetch_add(&h->heap_used, n);
	if (at + n > h->heap_size)
		return NULL;
	*off = h->heap_off + at;
	return ev_at(h, *off);
}

uint64_t ev_heap_str(struct ev_area_hdr *h, const char *s)
{
	uint64_t off;
	size_t n = strlen(s) + 1;
	char *p = ev_heap_alloc(h, n, &off);
	if (!p)
		return 0;
	memcpy(p, s, n);
	return off;
}

/* The object log: appended under obj_lock (taken in the dynamic linker's
 * hook: nothing under it calls the loader), published by nobjs. */
static pthread_mutex_t obj_lock = PTHREAD_MUTEX_INITIALIZER;

void ev_log_object(const char *path, uint64_t lo, uint64_t hi, uint64_t bias)
{
	pthread_mutex_lock(&area_lock);
	pthread_mutex_lock(&obj_lock);
	for (int i = 0; i < EV_MAX_AREAS; i++) {
		struct ev_area_hdr *h = areas[i] ? areas[i]->hdr : NULL;
		if (!h)
			continue;
		uint32_t n = atomic_load(&h->nobjs);
		struct ev_obj *o = ev_at(h, h->objs_off);
		/* logged unless the last object logged over its range is
		 * this one (loaded again where it was, another came between:
		 * logged again, the reader takes the latest) */
		bool have = false;
		for (uint32_t k = n; k-- > 0;) {
			if (o[k].hi <= lo || o[k].lo >= hi)
				continue;
			have = o[k].lo == lo && o[k].bias == bias &&
			       !strcmp(ev_at(h, o[k].path_off), path);
			break;
		}
		if (have || n >= h->objs_max)
			continue;
		uint64_t po = ev_heap_str(h, path);
		if (!po)
			continue;
		o[n] = (struct ev_obj){ lo, hi, bias, po };
		atomic_store_explicit(&h->nobjs, n + 1, memory_order_release);
	}
	pthread_mutex_unlock(&obj_lock);
	pthread_mutex_unlock(&area_lock);
}

void ev_area_fork_lock(void)
{
	pthread_mutex_lock(&area_lock);
	pthread_mutex_lock(&obj_lock);
}

void ev_area_fork_unlock(void)
{
	pthread_mutex_unlock(&obj_lock);
	pthread_mutex_unlock(&area_lock);
}

#define HEAP_SIZE (16UL << 20)
#define PAGE 4096UL

static uint64_t page_up(uint64_t v)
{
	return (v + PAGE - 1) & ~(PAGE - 1);
}

int ukpev_area_create(const struct ukpev_area_opts *opts, struct ukpev_area **out)
{
	size_t buffer_kb = UKPEV_DEFAULT_BUFFER_KB, area_mb = UKPEV_DEFAULT_AREA_MB;
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (opts) {
		if (opts->sz < sizeof(size_t) * 3)
			return -EINVAL;
		if (opts->buffer_kb)
			buffer_kb = opts->buffer_kb;
		if (opts->area_mb)
			area_mb = opts->area_mb;
	}
	if (!opts || !opts->buffer_kb) {
		if (buffer_kb > area_mb * 1024)	/* the default, in a small area */
			buffer_kb = area_mb * 1024;
	}
	if (buffer_kb * 1024 < UKPEV_SUBBUF_SIZE || buffer_kb / 1024 > area_mb || area_mb < 1 ||
	    area_mb > (1UL << 20))
		return -EINVAL;
	pthread_once(&once, init_once);
	struct ukpev_area *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->fd = -1;
	pthread_mutex_lock(&area_lock);
	a->slot = -1;
	for (int i = 0; i < EV_MAX_AREAS; i++)
		if (!areas[i]) {
			areas[i] = a;
			a->slot = i;
			a->key = ++area_keys;
			break;
		}
	pthread_mutex_unlock(&area_lock);
	if (a->slot < 0) {
		free(a);
		return -EMFILE;
	}
	/* everything within area_mb: the descriptions, a heap and thread
	 * blocks scaled to it, the rest sub-buffers */
	uint64_t size = (uint64_t)area_mb << 20;
	uint64_t heap_size = size / 16 < HEAP_SIZE ? size / 16 : HEAP_SIZE;
	uint64_t tm = size / (4 * UKPEV_SUBBUF_SIZE);
	uint32_t tmax = tm < 4096 ? (uint32_t)tm : 4096;
	uint64_t off = page_up(sizeof(struct ev_area_hdr));
	uint64_t events_off = off;
	off = page_up(off + (uint64_t)UKPEV_MAX_EVENTS * sizeof(struct ev_meta));
	uint64_t heap_off = off;
	off = page_up(off + heap_size);
	uint64_t threads_off = off;
	off = page_up(off + (uint64_t)tmax * sizeof(struct ev_tblock));
	/* histogram descriptions, then their tables' pool: an eighth */
	uint64_t hists_off = off;
	off = page_up(off + EV_MAX_HISTS * sizeof(struct ev_hist_meta));
	uint64_t hpool_off = off, hpool_size = page_up(size / 8);
	off += hpool_size;
	uint64_t objs_off = off;
	off = page_up(off + EV_MAX_OBJS * sizeof(struct ev_obj));
	uint64_t pool_off = (off + UKPEV_SUBBUF_SIZE - 1) & ~(uint64_t)(UKPEV_SUBBUF_SIZE - 1);
	if (pool_off + 2 * UKPEV_SUBBUF_SIZE > size) {
		pthread_mutex_lock(&area_lock);
		areas[a->slot] = NULL;
		pthread_mutex_unlock(&area_lock);
		free(a);
		return -EINVAL;
	}
	uint32_t nsub = (uint32_t)((size - pool_off) / UKPEV_SUBBUF_SIZE);
	if (buffer_kb * 1024 > (uint64_t)nsub * UKPEV_SUBBUF_SIZE)
		buffer_kb = (size_t)nsub * (UKPEV_SUBBUF_SIZE / 1024);
	int err = 0;
	a->fd = (int)syscall(SYS_memfd_create, "ukprobes-events", 1 /* MFD_CLOEXEC */);
	if (a->fd < 0)	/* no memfd (seccomp, old kernel): an unnamed file in /dev/shm */
		a->fd = open("/dev/shm", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (a->fd < 0) {
		err = -errno;
		goto fail;
	}
	if (ftruncate(a->fd, (off_t)size)) {
		err = -errno;
		goto fail;
	}
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, a->fd, 0);
	if (m == MAP_FAILED) {
		err = -errno;
		goto fail;
	}
	struct ev_area_hdr *h = m;
	a->hdr = h;
	a->size = size;
	h->version = EV_VERSION;
	h->hdr_size = sizeof(*h);
	h->size = size;
	h->events_off = events_off;
	h->heap_off = heap_off;
	h->heap_size = heap_size;
	h->heap_used = 8;	/* offset 0 of the heap: "none" */
	h->threads_off = threads_off;
	h->pool_off = pool_off;
	h->threads_max = tmax;
	h->nsubbufs = nsub;
	h->hists_off = hists_off;
	h->hpool_off = hpool_off;
	h->hpool_size = hpool_size;
	h->objs_off = objs_off;
	h->objs_max = EV_MAX_OBJS;
	h->subbuf_size = UKPEV_SUBBUF_SIZE;
	/* two at least: a thread writes one while the reader drains the other */
	h->buffer_subbufs = (uint32_t)(buffer_kb * 1024 / UKPEV_SUBBUF_SIZE);
	if (h->buffer_subbufs < 2)
		h->buffer_subbufs = 2;
	a->buffer_subbufs = h->buffer_subbufs;
	if (tsc_usable()) {
		/* a first calibration over ~5 ms; readers refine it */
		uint64_t t0, n0, t1, n1;
		clock_pair(&t0, &n0);
		do
			clock_pair(&t1, &n1);
		while (n1 - n0 < 5000000);
		h->clock = EV_CLOCK_TSC;
		h->tsc0 = t0;
		h->ns0 = n0;
		h->mult = tsc_mult(t0, n0, t1, n1);
	} else {
		h->clock = EV_CLOCK_MONO;
	}
	atomic_store_explicit((_Atomic uint64_t *)&h->magic, EV_MAGIC, memory_order_release);
	*out = a;
	ev_objects_track();	/* the objects loaded now, and from now on */
	return 0;
fail:
	if (a->fd >= 0)
		close(a->fd);
	pthread_mutex_lock(&area_lock);
	areas[a->slot] = NULL;
	pthread_mutex_unlock(&area_lock);
	free(a);
	return err;
}

int ukpev_area_fd(const struct ukpev_area *a)
{
	return a ? a->fd : -EINVAL;
}

void ukpev_area_destroy(struct ukpev_area *a)
{
	if (!a)
		return;
	for (unsigned i = 0; i < UKPEV_MAX_EVENTS; i++)
		if (a->events[i])
			ukpev_event_remove(a->events[i]);
	/* no handler runs any more; a new area in the slot has another key,
	 * so threads do not take this one's blocks for its */
	pthread_mutex_lock(&area_lock);
	areas[a->slot] = NULL;
	pthread_mutex_unlock(&area_lock);
	munmap(a->hdr, a->size);
	close(a->fd);
	free(a);
}

/* ------------------------------------------------------------------ */
/* Reader                                                              */


static int reader_init(struct ukpev_reader *r)
{
	struct ev_area_hdr *h = r->h;
	r->ev = calloc(UKPEV_MAX_EVENTS, sizeof(*r->ev));
	r->args = calloc(UKPEV_MAX_EVENTS, sizeof(*r->args));
	if (!r->ev || !r->args)
		return -ENOMEM;
	r->tsc0 = r->anchor_tsc = r->prev_tsc = h->tsc0;
	r->ns0 = r->anchor_ns = r->prev_ns = h->ns0;
	r->mult = h->mult;
	pthread_mutex_init(&r->hist_mu, NULL);
	return 0;
}

int ukpev_reader_open(int fd, struct ukpev_reader **out)
{
	struct stat st;
	if (!out)
		return -EINVAL;
	*out = NULL;
	if (fstat(fd, &st))
		return -errno;
	if ((size_t)st.st_size < sizeof(struct ev_area_hdr))
		return -EINVAL;
	struct ev_area_hdr hh;
	if (pread(fd, &hh, sizeof(hh), 0) != (ssize_t)sizeof(hh))
		return -EINVAL;
	if (hh.magic != EV_MAGIC || hh.version != EV_VERSION || hh.size != (uint64_t)st.st_size ||
	    hh.subbuf_size != UKPEV_SUBBUF_SIZE ||
	    hh.events_off + (uint64_t)UKPEV_MAX_EVENTS * sizeof(struct ev_meta) > hh.size ||
	    hh.heap_off + hh.heap_size > hh.size ||
	    hh.threads_off + (uint64_t)hh.threads_max * sizeof(struct ev_tblock) > hh.size ||
	    hh.pool_off + (uint64_t)hh.nsubbufs * UKPEV_SUBBUF_SIZE > hh.size ||
	    hh.hists_off + EV_MAX_HISTS * sizeof(struct ev_hist_meta) > hh.size ||
	    hh.hpool_off + hh.hpool_size > hh.size)
		return -EINVAL;
	void *m = mmap(NULL, hh.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	struct ukpev_reader *r = calloc(1, sizeof(*r));
	if (!r) {
		munmap(m, hh.size);
		return -ENOMEM;
	}
	r->h = m;
	r->size = hh.size;
	r->own_map = true;
	int err = reader_init(r);
	if (err) {
		ukpev_reader_close(r);
		return err;
	}
	*out = r;
	return 0;
}

int ukpev_reader_from_area(struct ukpev_area *a, struct ukpev_reader **out)
{
	if (!a || !out)
		return -EINVAL;
	struct ukpev_reader *r = calloc(1, sizeof(*r));
	*out = NULL;
	if (!r)
		return -ENOMEM;
	r->h = a->hdr;
	r->size = a->size;
	int err = reader_init(r);
	if (err) {
		ukpev_reader_close(r);
		return err;
	}
	*out = r;
	return 0;
}

void ukpev_reader_close(struct ukpev_reader *r)
{
	if (!r)
		return;
	if (r->args)
		for (unsigned i = 0; i < UKPEV_MAX_EVENTS; i++)
			free(r->args[i]);
	free(r->args);
	free(r->ev);
	ev_hist_reader_free(r);
	if (r->own_map)
		munmap(r->h, r->size);
	free(r);
}

/* A heap string of the area, checked to lie inside it. */
static const char *heap_str(const struct ev_area_hdr *h, uint64_t off)
{
	if (!off || off < h->heap_off || off >= h->heap_off + h->heap_size)
		return NULL;
	const char *s = ev_at(h, off);
	if (!memchr(s, 0, h->heap_off + h->heap_size - off))
		return NULL;
	return s;
}

const struct ukpev_event_info *ukpev_reader_event(struct ukpev_reader *r, unsigned id)
{
	if (!r)
		return NULL;
	struct ev_area_hdr *h = r->h;
	if (id >= UKPEV_MAX_EVENTS)
		return NULL;
	struct ev_meta *m = ev_meta(h, id);
	if (r->ev[id].group) {
		/* a deferred event's address: 0 until armed, and its
		 * object may load again at another address */
		if (r->ev[id].deferred)
			r->ev[id].addr = atomic_load_explicit(&m->addr, memory_order_acquire);
		return &r->ev[id];
	}
	if (atomic_load_explicit(&m->state, memory_order_acquire) == EV_META_FREE)
		return NULL;
	struct ukpev_event_info *e = &r->ev[id];
	if (m->nargs > UKPEV_MAX_ARGS)
		return NULL;
	struct ukpev_arg_info *ai = calloc(m->nargs ? m->nargs : 1, sizeof(*ai));
	if (!ai)
		return NULL;
	/* what another process wrote: checked before use */
	if (m->nargs && (m->args_off < h->heap_off ||
			 m->args_off + (uint64_t)m->nargs * sizeof(struct ev_meta_arg) >
				 h->heap_off + h->heap_size)) {
		free(ai);
		return NULL;
	}
	const struct ev_meta_arg *ma = m->nargs ? ev_at(h, m->args_off) : NULL;
	for (unsigned i = 0; i < m->nargs; i++) {
		if (ma[i].type > UKPEV_T_COMM || ma[i].count > UKPEV_MAX_ARRAY ||
		    (ma[i].elem_size != 1 && ma[i].elem_size != 2 && ma[i].elem_size != 4 &&
		     ma[i].elem_size != 8) || ma[i].bf_width > 64 || ma[i].bf_shift >= 64 ||
		    ma[i].offset > UKPEV_MAX_RECORD) {
			free(ai);
			return NULL;
		}
		ai[i] = (struct ukpev_arg_info){
			.name = heap_str(h, ma[i].name_off), .type_name = heap_str(h, ma[i].type_off),
			.type = (int)ma[i].type, .elem_size = ma[i].elem_size, .count = ma[i].count,
			.offset = ma[i].offset, .bf_width = ma[i].bf_width, .bf_shift = ma[i].bf_shift,
		};
		if (!ai[i].name || !ai[i].type_name) {
			free(ai);
			return NULL;
		}
	}
	r->args[id] = ai;
	*e = (struct ukpev_event_info){
		.id = id, .event = heap_str(h, m->event_off), .definition = heap_str(h, m->def_off),
		.kind = (int)m->kind, .maxactive = (int)m->maxactive,
		.addr = atomic_load_explicit(&m->addr, memory_order_acquire),
		.deferred = (m->flags & EV_META_F_DEFERRED) != 0,
		.place = heap_str(h, m->place_off), .nargs = m->nargs, .args = ai,
		.payload_size = m->payload_size,
	};
	e->filter = heap_str(h, atomic_load(&m->filter_off));
	e->group = heap_str(h, m->group_off);	/* last: marks it cached */
	return e->group ? e : NULL;
}

unsigned ukpev_reader_nevents(struct ukpev_reader *r)
{
	if (!r)
		return 0;
	unsigned n = atomic_load_explicit(&r->h->nevents, memory_order_acquire);
	return n > UKPEV_MAX_EVENTS ? UKPEV_MAX_EVENTS : n;
}

static uint64_t ts_ns(struct ukpev_reader *r, uint64_t ts)
{
	if (r->h->clock != EV_CLOCK_TSC)
		return ts;
	int64_t d = (int64_t)(ts - r->tsc0);
	__int128 ns = ((__int128)d * (__int128)r->mult) >> 32;
	return r->ns0 + (uint64_t)ns;
}

/* The TSC rate measured again, every 50 ms, over the last one to two
 * seconds (from the area's creation at first), and a fresh reference. */
static void recalibrate(struct ukpev_reader *r)
{
	if (r->h->clock != EV_CLOCK_TSC)
		return;
	uint64_t n = mono_ns();
	if (n - r->last_cal_ns < 50000000ULL)
		return;
	uint64_t t;
	clock_pair(&t, &n);
	r->last_cal_ns = n;
	if (n - r->anchor_ns < 100000000ULL)
		return;
	uint64_t m = tsc_mult(r->anchor_tsc, r->anchor_ns, t, n);
	if (!m)
		return;
	r->mult = m;
	r->tsc0 = t;
	r->ns0 = n;
	if (n - r->anchor_ns > 2000000000ULL) {
		r->anchor_tsc = r->prev_tsc;
		r->anchor_ns = r->prev_ns;
	}
	if (n - r->prev_ns > 1000000000ULL) {
		r->prev_tsc = t;
		r->prev_ns = n;
	}
}

/* The thread's name now (a program names its threads after they start,
 * often after their first event): read at most once a second, when it
 * has records; its name at its first event until then, or if gone. */
static void refresh_comm(struct ev_tblock *tb, uint64_t now)
{
	if (tb->rcomm_ns && now - tb->rcomm_ns < 1000000000ULL)
		return;
	tb->rcomm_ns = now;
	char path[64], buf[32];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", tb->pid, tb->tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	if (buf[n - 1] == '\n')
		n--;
	if (n > 15)
		n = 15;
	memset(tb->rcomm, 0, sizeof(tb->rcomm));
	memcpy(tb->rcomm, buf, (size_t)n);
}

static bool thread_alive(pid_t pid, pid_t tid)
{
	return syscall(SYS_tgkill, pid, tid, 0) == 0 || errno != ESRCH;
}

/* A drained block of a thread that is gone: its sub-buffer back to the
 * pool, its counters into the events' and its lost count into the
 * area's, then the block itself back for another thread. */
/* The losses of tb no marker told (its last ones), as a marker. */
static int tell_lost(struct ev_tblock *tb, ukpev_record_fn fn, void *arg)
{
	uint64_t n = atomic_load(&tb->lost);
	if (n <= tb->lost_told)
		return 0;
	char comm[17];
	memcpy(comm, tb->rcomm[0] ? tb->rcomm : tb->comm, 16);
	comm[16] = 0;
	struct ukpev_record out = {
		.pid = tb->pid, .tid = tb->tid, .event = UKPEV_EVENT_LOST,
		.lost = n - tb->lost_told, .comm = comm,
	};
	tb->lost_told = n;
	if (fn)
		fn(&out, arg);
	return 1;
}

static void retire(struct ukpev_reader *r, struct ev_tblock *tb, uint32_t ti,
		   ukpev_record_fn fn, void *arg, unsigned *done)
{
	struct ev_area_hdr *h = r->h;
	if (tb->rd) {
		if (tb->rd > h->nsubbufs)
			return;
		struct ev_subbuf *sb = ev_sb(h, tb->rd);
		if (tb->rpos != atomic_load_explicit(&sb->head, memory_order_acquire) ||
		    atomic_load_explicit(&sb->closed, memory_order_acquire))
			return;	/* more to read first */
		ev_sb_put(h, tb->rd);
		atomic_fetch_sub(&tb->held, 1);
		tb->rd = 0;
	}
	*done += (unsigned)tell_lost(tb, fn, arg);
	ev_hist_retire(r, tb);
	unsigned nev = ukpev_reader_nevents(r);
	for (unsigned i = 0; i < nev; i++) {
		struct ev_count *c = &tb->cnt[i];
		if (!c->hits)
			continue;
		struct ev_meta *m = ev_meta(h, i);
		atomic_fetch_add(&m->retired[0], c->hits);
		atomic_fetch_add(&m->retired[1], c->misses);
		atomic_fetch_add(&m->retired[2], c->filtered);
		memset(c, 0, sizeof(*c));
	}
	atomic_fetch_add(&h->retired_lost, atomic_load(&tb->lost));
	atomic_store(&tb->lost, 0);
	atomic_store_explicit(&tb->state, EV_TB_FREE, memory_order_release);
	ev_tb_put(h, ti + 1);
}

int ukpev_reader_poll(struct ukpev_reader *r, ukpev_record_fn fn, void *arg, unsigned max)
{
	if (!r)
		return -EINVAL;
	struct ev_area_hdr *h = r->h;
	unsigned done = 0;
	recalibrate(r);
	uint64_t now = mono_ns();
	bool sweep = now - r->last_sweep_ns >= 50000000ULL;
	if (sweep)
		r->last_sweep_ns = now;
	uint32_t hw = atomic_load_explicit(&h->threads_hw, memory_order_acquire);
	if (hw > h->threads_max)
		hw = h->threads_max;
	for (uint32_t ti = 0; ti < hw; ti++) {
		struct ev_tblock *tb = ev_tb(h, ti);
		if (atomic_load_explicit(&tb->state, memory_order_acquire) != EV_TB_LIVE)
			continue;
		bool got = false;
		for (;;) {
			if (!tb->rd || tb->rd > h->nsubbufs)
				break;
			struct ev_subbuf *sb = ev_sb(h, tb->rd);
			uint32_t head = atomic_load_explicit(&sb->head, memory_order_acquire);
			if (head > EV_SB_DATA)
				break;	/* corrupt: stop reading this thread */
			if (tb->rpos < head) {
				if (!got)
					refresh_comm(tb, now);
				struct ev_rec *rec = (struct ev_rec *)(void *)(sb->data + tb->rpos);
				if (rec->size < sizeof(*rec) || rec->size % 8 ||
				    tb->rpos + rec->size > head)
					break;
				char comm[17];
				memcpy(comm, tb->rcomm[0] ? tb->rcomm : tb->comm, 16);
				comm[16] = 0;
				struct ukpev_record out = {
					.pid = tb->pid, .tid = tb->tid, .cpu = rec->cpu,
					.event = rec->event, .comm = comm,
				};
				const uint8_t *pl = (const uint8_t *)(rec + 1);
				if (rec->event == UKPEV_EVENT_LOST) {
					/* less what a flush told already */
					tb->lost_marked += *(const uint64_t *)(const void *)pl;
					if (tb->lost_marked <= tb->lost_told) {
						tb->rpos += rec->size;
						continue;
					}
					out.lost = tb->lost_marked - tb->lost_told;
					tb->lost_told = tb->lost_marked;
					out.ts_ns = 0;
				} else if (rec->event == UKPEV_EVENT_STACK) {
					out.ts_ns = ts_ns(r, rec->ts);
					out.stack_of = rec->flags;
				} else {
					out.ts_ns = ts_ns(r, rec->ts);
					const struct ukpev_event_info *ev = ukpev_reader_event(r, rec->event);
					if (ev && ev->kind == UKPEV_KIND_RETPROBE) {
						out.ret_ip = *(const unsigned long *)(const void *)pl;
						pl += 8;
					}
				}
				out.payload = pl;
				out.payload_size = (unsigned)(rec->size - (pl - (const uint8_t *)rec));
				tb->rpos += rec->size;
				done++;
				got = true;
				if (fn && fn(&out, arg))
					return (int)done;
				if (max && done >= max)
					return (int)done;
				continue;
			}
			if (!atomic_load_explicit(&sb->closed, memory_order_acquire))
				break;
			/* closed: its head is final */
			if (tb->rpos < atomic_load_explicit(&sb->head, memory_order_acquire))
				continue;
			uint32_t next = sb->next;
			ev_sb_put(h, tb->rd);
			atomic_fetch_sub(&tb->held, 1);
			tb->rd = next;
			tb->rpos = 0;
		}
		/* a thread with nothing new, asked at most every 50 ms whether
		 * it is gone (one system call each) */
		if (!got && sweep && !thread_alive(tb->pid, tb->tid))
			retire(r, tb, ti, fn, arg, &done);
	}
	return (int)done;
}

int ukpev_reader_flush(struct ukpev_reader *r, ukpev_record_fn fn, void *arg)
{
	if (!r)
		return -EINVAL;
	struct ev_area_hdr *h = r->h;
	int n, total = 0;
	while ((n = ukpev_reader_poll(r, fn, arg, 0)) > 0)
		total += n;
	if (n < 0)
		return n;
	uint32_t hw = atomic_load_explicit(&h->threads_hw, memory_order_acquire);
	if (hw > h->threads_max)
		hw = h->threads_max;
	for (uint32_t ti = 0; ti < hw; ti++) {
		struct ev_tblock *tb = ev_tb(h, ti);
		if (atomic_load_explicit(&tb->state, memory_order_acquire) == EV_TB_LIVE)
			total += tell_lost(tb, fn, arg);
	}
	return total;
}

int ukpev_reader_stats(struct ukpev_reader *r, unsigned id, struct ukpev_stats *st)
{
	if (!r || !st)
		return -EINVAL;
	struct ev_area_hdr *h = r->h;
	memset(st, 0, sizeof(*st));
	if (id >= UKPEV_MAX_EVENTS ||
	    atomic_load_explicit(&ev_meta(h, id)->state, memory_order_acquire) == EV_META_FREE)
		return -ENOENT;
	uint32_t hw = atomic_load_explicit(&h->threads_hw, memory_order_acquire);
	if (hw > h->threads_max)
		hw = h->threads_max;
	for (uint32_t ti = 0; ti < hw; ti++) {
		struct ev_tblock *tb = ev_tb(h, ti);
		if (atomic_load_explicit(&tb->state, memory_order_acquire) != EV_TB_LIVE)
			continue;
		const struct ev_count *c = &tb->cnt[id];
		st->hits += __atomic_load_n(&c->hits, __ATOMIC_RELAXED);
		st->misses += __atomic_load_n(&c->misses, __ATOMIC_RELAXED);
		st->filtered += __atomic_load_n(&c->filtered, __ATOMIC_RELAXED);
	}
	struct ev_meta *m = ev_meta(h, id);
	uint64_t em = atomic_load(&m->engine_misses);
	st->hits += em + atomic_load(&m->retired[0]);
	st->misses += em + atomic_load(&m->retired[1]);
	st->filtered += atomic_load(&m->retired[2]);
	st->arm_err = (int)atomic_load(&m->arm_err);
	return 0;
}

int ukpev_reader_object(struct ukpev_reader *r, unsigned i, struct ukpev_object *o)
{
	if (!r || !o)
		return -EINVAL;
	struct ev_area_hdr *h = r->h;
	uint32_t n = atomic_load_explicit(&h->nobjs, memory_order_acquire);
	if (n > h->objs_max)
		n = h->objs_max;
	if (i >= n)
		return -ENOENT;
	/* what another process wrote: checked before use */
	if (h->objs_off < h->hdr_size || h->objs_off + (uint64_t)h->objs_max * sizeof(struct ev_obj) >
						h->size)
		return -ENOENT;
	const struct ev_obj *e = (const struct ev_obj *)ev_at(h, h->objs_off) + i;
	o->path = heap_str(h, e->path_off);
	o->lo = e->lo;
	o->hi = e->hi;
	o->bias = e->bias;
	return o->path && o->lo < o->hi ? 0 : -ENOENT;
}

uint64_t ukpev_reader_lost(struct ukpev_reader *r)
{
	if (!r)
		return 0;
	struct ev_area_hdr *h = r->h;
	uint64_t n = atomic_load(&h->retired_lost) + atomic_load(&h->nothread_misses);
	uint32_t hw = atomic_load_explicit(&h->threads_hw, memory_order_acquire);
	if (hw > h->threads_max)
		hw = h->threads_max;
	for (uint32_t ti = 0; ti < hw; ti++) {
		struct ev_tblock *tb = ev_tb(h, ti);
		if (atomic_load_explicit(&tb->state, memory_order_acquire) == EV_TB_LIVE)
			n += atomic_load(&tb->lost);
	}
	return n;
}
