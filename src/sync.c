/* SPDX-License-Identifier: MIT */
/*
 * Threads and grace periods.
 *
 * The hit path (SIGTRAP handler, post trampoline) reads sites' probe
 * lists without locks.  A writer that unlinks a list waits, once per
 * batch, until every thread that might still be reading it has left the
 * hit path (ukp_synchronize), and only then frees it: the kernel's
 * "unlink, synchronize_rcu, free".
 *
 * Each thread owns a struct ukp_thread from a pool that is never
 * unmapped, so the writer can always read every block.  A thread takes
 * its block the first time it enters the hit path (no malloc: the pool
 * grows by mmap, which is async-signal-safe); a pthread key destructor
 * gives it back at thread exit.
 */
#include <linux/membarrier.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"

#define POOL_CHUNK 256			/* blocks per mmap */
#define POOL_CHUNKS 4096		/* up to a million threads */

static struct ukp_thread *_Atomic pool[POOL_CHUNKS];
static _Atomic unsigned pool_used;	/* blocks handed out so far */
static pthread_key_t exit_key;
static int exit_key_ok;

static struct ukp_thread *block(unsigned i);

__thread struct ukp_thread *ukp_self
	__attribute__((tls_model("initial-exec")));
#define self ukp_self
static __thread int attaching __attribute__((tls_model("initial-exec")));

static void *raw_mmap(size_t len)
{
	long r = ukp_raw_syscall(SYS_mmap, 0, (long)len, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return r < 0 && r > -4096 ? MAP_FAILED : (void *)r;
}

static void thread_exit(void *arg)
{
	struct ukp_thread *t = arg;
	ukp_kret_thread_gone(t);	/* its calls in flight never return */
	/* a thread that dies inside a handler (pthread_exit) leaves it */
	__atomic_store_n(&t->nest, 0, __ATOMIC_RELEASE);
	t->in_handler = 0;
	__atomic_store_n(&t->ft_depth, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&t->ft_qs, t->ft_qs + 1, __ATOMIC_RELEASE);
	t->ft_rdepth = 0;
	t->nfrec = 0;
	self = NULL;
	atomic_store(&t->free, 1);
}

static _Atomic long anon_readers;

/* In a fork child only the forking thread exists: the others' blocks,
 * and the anonymous read sections they were in, must not hold up a grace
 * period forever. */
static void fork_child(void)
{
	unsigned used = atomic_load(&pool_used);
	for (unsigned i = 0; i < used; i++) {
		struct ukp_thread *t = block(i);
		if (t)		/* a claim of a taker that is not here */
			atomic_store(&t->kc_steal, 0);
		if (t && t != self) {
			ukp_kret_thread_gone(t);
			t->nest = 0;
			t->ft_depth = 0;
			atomic_store(&t->free, 1);
		}
	}
	atomic_store(&anon_readers, 0);
	if (self)
		self->tid = (pid_t)syscall(SYS_gettid);
}

/*
 * With membarrier(PRIVATE_EXPEDITED) the read side needs no fence: the
 * writer makes every running thread execute one (the "membarrier" flavour
 * of userspace RCU).  A locked xchg on entry costs ~8 ns per hit here,
 * which is most of an optimised probe's budget.
 */
int ukp_fast_readers;
#define fast_readers ukp_fast_readers
/* the hand-written hit paths are off until membarrier is registered */
#define GP_EPOCH (1UL << 32)
_Atomic unsigned long ukp_gp = GP_EPOCH | UKP_GP_LOCK | UKP_GP_NOFAST;

void ukp_gp_flag(unsigned long flag, bool set)
{
	if (set)
		atomic_fetch_or(&ukp_gp, flag);
	else
		atomic_fetch_and(&ukp_gp, ~flag);
}

void ukp_sync_init(void)
{
	if (ukp_raw_syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
			    0, 0, 0, 0, 0) == 0) {
		fast_readers = 1;
		ukp_gp_flag(UKP_GP_NOFAST, false);
	}
	exit_key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
	pthread_atfork(NULL, NULL, fork_child);
}

static struct ukp_thread *block(unsigned i)
{
	struct ukp_thread *c = atomic_load(&pool[i / POOL_CHUNK]);
	return c ? &c[i % POOL_CHUNK] : NULL;
}

/*
 * Runs in the hit path, before the thread has a block: it calls nothing a
 * user could have probed until `self` is set (raw system calls only), and
 * a hit that nests anyway finds `attaching` and runs without handlers.
 */
struct ukp_thread *ukp_thread_attach(void)
{
	struct ukp_thread *t = NULL;
	unsigned used = atomic_load(&pool_used);

	if (attaching)
		return NULL;
	attaching = 1;
	/* reuse a block whose thread has exited */
	for (unsigned i = 0; i < used && !t; i++) {
		struct ukp_thread *b = block(i);
		int one = 1;
		if (b && atomic_load(&b->free) &&
		    atomic_compare_exchange_strong(&b->free, &one, 0))
			t = b;
	}
	while (!t) {
		unsigned i = atomic_fetch_add(&pool_used, 1);
		if (i >= POOL_CHUNK * POOL_CHUNKS) {
			attaching = 0;
			return NULL;
		}
		struct ukp_thread *_Atomic *slot = &pool[i / POOL_CHUNK];
		if (!atomic_load(slot)) {
			void *m = raw_mmap(POOL_CHUNK * sizeof(struct ukp_thread));
			if (m == MAP_FAILED) {
				attaching = 0;
				return NULL;
			}
			struct ukp_thread *expect = NULL;
			if (!atomic_compare_exchange_strong(slot, &expect, m))
				ukp_raw_syscall(SYS_munmap, (long)m,
						POOL_CHUNK * sizeof(struct ukp_thread), 0, 0, 0, 0);
		}
		t = block(i);
	}
	t->tid = (pid_t)ukp_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0);
	t->nest = 0;
	t->in_handler = 0;
	t->internal = 0;
	t->errno_p = &errno;	/* __errno_location: blacklisted, no syscall */
	t->kret_top = NULL;	/* a reused block: ukp_kret_thread_gone ran */
	t->kret_deferred = NULL;
	t->kret_orphan = NULL;
	t->lean_kret = 0;
	t->jdepth = 0;
	t->cur_uc = NULL;
	/* what a thread that died in a handler (pthread_exit) or was
	 * inside one at fork left: the hand-written hit paths rely on
	 * cur_jb being NULL */
	t->cur = NULL;
	t->cur_jb = NULL;
	t->abandon = 0;
	t->ft_hit = 0;
	t->kret_entry = NULL;
	t->nfrec = 0;	/* records of a thread that is gone */
	t->npending = 0;
	t->in_hook = 0;
	t->in_post = NULL;
	t->ft_rdepth = 0;
	t->in_fault = 0;
	self = t;
	attaching = 0;
	/* From here a nested hit finds its block.  Glibc keeps the first 32
	 * keys' values inline in the thread descriptor, so for an early key
	 * this does not allocate. */
	if (exit_key_ok && exit_key < 32)
		pthread_setspecific(exit_key, t);
	return t;
}

void ukp_anon_read_lock(void)
{
	atomic_fetch_add(&anon_readers, 1);	/* lock xadd: a full barrier */
}

void ukp_anon_read_unlock(void)
{
	atomic_fetch_sub_explicit(&anon_readers, 1, memory_order_release);
}

/* a grace period's wait for one thread: yield first, then sleep */
static void backoff(unsigned spin)
{
	if (spin < 100) {
		sched_yield();
	} else {
		struct timespec ts = { 0, 100000 };
		nanosleep(&ts, NULL);
	}
}

/* the fence the fast readers leave out, run on each of them */
static void barrier_all_readers(void)
{
	if (fast_readers)
		ukp_raw_syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0, 0, 0, 0);
}

/*
 * The read lock (ukp_read_lock, HIT_LOCK in hitpath.h) sets nest, then
 * loads ukp_gp and keeps its epoch in seq, then loads probe lists; the
 * hand-written paths store all three fields at once, after the load.
 * The writer has unlinked the old list; it moves the epoch on with a
 * locked add, so a reader that loads the new epoch loads the new list
 * after it (loads are not reordered on x86).  membarrier then orders
 * every running reader: one that loaded the old list before it shows
 * its nest; one after it sees the new list.  A thread is done when seen
 * with nest 0, or with a seq at the new epoch or past it (a later entry).
 * Without membarrier the reader's full fence between its nest store and
 * its loads pairs with the locked add.
 */
void ukp_synchronize(void)
{
	struct ukp_thread *me = self;
	uint32_t e = (uint32_t)((atomic_fetch_add(&ukp_gp, GP_EPOCH) + GP_EPOCH) >> 32);
	/* after the locked add: a block handed out since (a locked add
	 * too) belongs to a thread whose loads come after it */
	unsigned used = atomic_load(&pool_used);

	barrier_all_readers();
	for (unsigned i = 0; i < used; i++) {
		struct ukp_thread *t = block(i);
		if (!t || t == me)
			continue;
		for (unsigned spin = 0;; spin++) {
			if (!__atomic_load_n(&t->nest, __ATOMIC_ACQUIRE) ||
			    (int32_t)(atomic_load(&t->seq) - e) >= 0 ||
			    atomic_load(&t->free))
				break;
			backoff(spin);
		}
	}
	/* anonymous readers are brief (a few instructions): wait them out */
	while (atomic_load(&anon_readers))
		sched_yield();
	/* readers that left did all their loads before we free */
	barrier_all_readers();
}

/*
 * A thread keeps one free kretprobe instance (kc_k, kc_inst) with plain
 * loads and stores, inside a hit, after it saw kc_steal 0 (loaded
 * first: a 0 the taker stored comes after its kc_k = NULL).  The taker
 * claims kc_steal, then membarrier makes the owner's state visible and
 * orders its next loads: an owner seen outside a hit here sees kc_steal 1
 * in its next one and leaves the cache alone; one seen inside may be
 * using it, and is left alone (*busy).  The asymmetric fence keeps the
 * owner's side free of locked instructions.
 */
/* t inside a hit (either lock) */
static bool in_hit(struct ukp_thread *t)
{
	return __atomic_load_n(&t->nest, __ATOMIC_ACQUIRE) != 0;
}

const struct ukp_site *ukp_thread_in_post(pid_t tid)
{
	unsigned used = atomic_load(&pool_used);
	for (unsigned i = 0; i < used; i++) {
		struct ukp_thread *t = block(i);
		if (t && !atomic_load(&t->free) && t->tid == tid)
			return __atomic_load_n(&t->in_post, __ATOMIC_RELAXED);
	}
	return NULL;
}

struct ukp_kinst *ukp_kc_take(const struct ukp_kret *k, bool *busy)
{
	struct ukp_thread *me = self;
	unsigned used = atomic_load(&pool_used);

	for (unsigned i = 0; i < used; i++) {
		struct ukp_thread *t = block(i);
		if (!t || __atomic_load_n(&t->kc_k, __ATOMIC_RELAXED) != k)
			continue;
		/* our own, inside this hit: the caller looked; another
		 * thread seen inside a hit already: no barrier for it */
		if (in_hit(t)) {
			if (t != me)
				*busy = true;
			continue;
		}
		if (atomic_exchange(&t->kc_steal, 1)) {
			*busy = true;	/* another taker, or the thread's exit */
			continue;
		}
		barrier_all_readers();
		struct ukp_kinst *in = NULL;
		if (t != me && in_hit(t)) {
			*busy = true;
		} else if (t->kc_k == k) {
			in = t->kc_inst;
			t->kc_k = NULL;
		}
		atomic_store_explicit(&t->kc_steal, 0, memory_order_release);
		if (in)
			return in;
	}
	return NULL;
}

/*
 * ftrace's grace period.  A stub counts every call in (ft_depth + 1)
 * before it reads anything that can change, and out (ft_depth - 1) after
 * the callbacks returned, counting in ft_qs each time the depth is back
 * at 0; all plain stores of the thread itself.  The writer has already
 * published the new state; membarrier makes every thread's counters
 * visible (a thread whose "in" store was still buffered is interrupted,
 * and reads the new state afterwards), then each thread seen inside is
 * waited for until it has been at depth 0 since: ft_qs moved on from
 * what it was before the depth was read.  Calls nest (a callback calling
 * a traced function), so depth 0 is the test, not a count of exits; and
 * it is counted, not only sampled, since a thread that calls traced
 * functions back to back is inside nearly all the time: sampled, it was
 * seen at depth 0 once in seconds.
 */
void ukp_ftrace_synchronize(void)
{
	struct ukp_thread *me = self;

	atomic_thread_fence(memory_order_seq_cst);
	unsigned used = atomic_load(&pool_used);	/* after the fence */
	barrier_all_readers();
	for (unsigned i = 0; i < used; i++) {
		struct ukp_thread *t = block(i);
		if (!t || t == me)
			continue;
		unsigned long qs = __atomic_load_n(&t->ft_qs, __ATOMIC_ACQUIRE);
		if (!__atomic_load_n(&t->ft_depth, __ATOMIC_ACQUIRE))
			continue;
		for (unsigned spin = 0;; spin++) {
			if (__atomic_load_n(&t->ft_qs, __ATOMIC_ACQUIRE) != qs ||
			    !__atomic_load_n(&t->ft_depth, __ATOMIC_ACQUIRE) ||
			    atomic_load(&t->free))
				break;
			backoff(spin);
		}
	}
	barrier_all_readers();
}
