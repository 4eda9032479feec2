/* SPDX-License-Identifier: MIT */
/*
 * kretprobes and jprobes (kprobes.txt sections 1.2 and 1.3).
 *
 * kretprobe: an entry probe (a kprobe at the function's first
 * instruction, jump-optimised like any other) takes a preallocated
 * instance, saves the return address in it and replaces it by the
 * address of the instance's own return stub (kret.S).  The stub says
 * which instance returns, and its unwind information says where the real
 * return address is, so stack walkers see the real callers.
 *
 * Instances are never lost:
 *   - a return runs the handler and frees the instance;
 *   - an exception (or a thread's cancellation) unwinding through the
 *     stub calls the stub's personality routine, which frees it;
 *   - longjmp (interposed here) frees those of the frames it leaves.
 *
 * Lifetime: unregistering marks the kretprobe dead, then waits for every
 * thread to leave the hit path (no handler of it runs after that, and no
 * instance is taken).  Calls still in flight return through their stubs
 * to their real callers; what the kretprobe had is freed once none is
 * busy (then, or by a later registration).  Nothing is allocated in the
 * hit path: instances come from a lock-free stack of preallocated ones,
 * and the only atomic operations of a call are taking and giving back
 * its instance.
 *
 * Built with -mgeneral-regs-only: the entry handler must be fit for the
 * lean trampoline (analyze.c checks the code itself).
 */
#include "internal.h"
#include "arch/x86_64/asm-offsets.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sched.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <unwind.h>

#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

UKP_OFF(struct ukp_jrec, cont, JR_CONT, 8);
UKP_OFF(struct ukp_jrec, mxcsr, JR_MXCSR, 4);
UKP_OFF(struct ukp_jrec, fcw, JR_FCW, 2);
UKP_OFF(struct ukp_jrec, xmm, JR_XMM, 128);

/* ---- stubs and slots (kret.S) -------------------------------------------- */

_Static_assert(sizeof(struct kret_slot) == 32, "a slot mirrors a 32-byte unit");
UKP_OFF(struct kret_slot, primed, KS_PRIMED, 1);
UKP_OFF(struct kret_slot, lean, KS_LEAN, 1);
UKP_OFF(struct kret_slot, sysflags, KS_SYSFL, 4);
UKP_OFF(struct kret_slot, ra, KS_RA, 8);
UKP_OFF(struct kret_slot, cont, KS_CONT, 8);
UKP_OFF(struct kret_slot, inst, KS_INST, 8);
/* the priming call reads cont at stub + W - 8 (kret.S) */
UKP_OFF(struct kret_slot, cont, KS_RA - 8, 8);
/* Mirrors the units of stubs: the slot of unit k is at the unit's address
 * + (slots - stubs), so a stub's return address is at stub + W. */
struct kret_slot ukp_kret_ra[KRET_NSTUBS] __attribute__((aligned(256)));
extern const char ukp_kret_stubs[] __attribute__((visibility("hidden")));
void ukp_kret_rethrow(void) __attribute__((visibility("hidden")));

#define KRET_UNIT 32
#define KRET_PRIME 10		/* the priming call's offset in a unit */
#define KRET_STUB 16		/* the stub's: right after the call */

static unsigned long stub_addr(unsigned k)
{
	return (unsigned long)ukp_kret_stubs + KRET_UNIT * (unsigned long)k + KRET_STUB;
}

static struct kret_slot *slot_of(unsigned k)
{
	return &ukp_kret_ra[k];
}

/* stub index of a return address, or -1 */
static long stub_index(unsigned long a)
{
	unsigned long off = a - (unsigned long)ukp_kret_stubs;
	if (off >= KRET_UNIT * (unsigned long)KRET_NSTUBS || off % KRET_UNIT != KRET_STUB)
		return -1;
	return (long)(off / KRET_UNIT);
}

/* free stubs, under ukp_lock */
static unsigned *stub_free;
static unsigned nstub_free;

static int stubs_init_locked(void)
{
	if (stub_free)
		return 0;
	stub_free = malloc(KRET_NSTUBS * sizeof(*stub_free));
	if (!stub_free)
		return -ENOMEM;
	for (unsigned i = 0; i < KRET_NSTUBS; i++)
		stub_free[i] = KRET_NSTUBS - 1 - i;
	nstub_free = KRET_NSTUBS;
	return 0;
}

/* ---- instances ------------------------------------------------------------ */

struct ukp_kinst {
	struct ukp_kret *k;
	struct ukp_kinst *below;	/* the thread's next older one in flight */
	unsigned long sp;		/* where the return address was */
	struct ukp_thread *t;
	unsigned long stub_addr;	/* what replaces the return address */
	unsigned long prime;		/* the stub's priming call */
	struct kret_slot *slot;
	unsigned stub;
	uint32_t next_free;		/* index + 1 in the free stack */
	uint32_t self;			/* its own index + 1 (no division) */
	uint32_t entry_armed;		/* its entry_handler's recovery point
					   is set (call_entry_handler) */
	/* struct kretprobe_instance and data_size bytes follow */
} __attribute__((aligned(16)));

struct ukp_kret {
	struct kretprobe *rp;
	_Atomic int dead;
	bool leaf;			/* the handler keeps to the general
					   registers and calls nothing: it
					   keeps errno */
	_Atomic uint64_t free_top;	/* tag << 32 | (index + 1) */
	unsigned n;
	size_t isz;
	char *mem;
	struct ukp_kret *zombie_next;
};

static struct kretprobe_instance *pub_of(struct ukp_kinst *in)
{
	return (struct kretprobe_instance *)(in + 1);
}

static struct ukp_kinst *inst_at(struct ukp_kret *k, unsigned i)
{
	return (struct ukp_kinst *)(k->mem + (size_t)i * k->isz);
}

static inline __attribute__((always_inline)) struct ukp_kinst *inst_pop(struct ukp_kret *k)
{
	uint64_t top = atomic_load_explicit(&k->free_top, memory_order_acquire);
	for (;;) {
		uint32_t i1 = (uint32_t)top;
		if (!i1)
			return NULL;
		struct ukp_kinst *in = inst_at(k, i1 - 1);
		/* read before the CAS: may be stale, then the tag fails it */
		uint32_t next = __atomic_load_n(&in->next_free, __ATOMIC_RELAXED);
		uint64_t nt = ((top >> 32) + 1) << 32 | next;
		if (atomic_compare_exchange_weak_explicit(&k->free_top, &top, nt,
							  memory_order_acquire,
							  memory_order_acquire))
			return in;
	}
}

static inline __attribute__((always_inline)) void inst_push(struct ukp_kret *k, struct ukp_kinst *in)
{
	uint32_t i1 = in->self;
	uint64_t top = atomic_load_explicit(&k->free_top, memory_order_relaxed);
	for (;;) {
		__atomic_store_n(&in->next_free, (uint32_t)top, __ATOMIC_RELAXED);
		uint64_t nt = ((top >> 32) + 1) << 32 | i1;
		if (atomic_compare_exchange_weak_explicit(&k->free_top, &top, nt,
							  memory_order_release,
							  memory_order_relaxed))
			return;
	}
}

/* what ukp_opt_tramp_kret (entry.S) does of kret_entry, where it reads it */
UKP_OFF(struct ukp_kinst, k, KI_K, 8);
UKP_OFF(struct ukp_kinst, below, KI_BELOW, 8);
UKP_OFF(struct ukp_kinst, sp, KI_SP, 8);
UKP_OFF(struct ukp_kinst, t, KI_T, 8);
UKP_OFF(struct ukp_kinst, stub_addr, KI_STUB_ADDR, 8);
UKP_OFF(struct ukp_kinst, prime, KI_PRIME, 8);
UKP_OFF(struct ukp_kinst, slot, KI_SLOT, 8);
UKP_OFF(struct ukp_kinst, next_free, KI_NEXT_FREE, 4);
UKP_OFF(struct ukp_kinst, self, KI_SELF, 4);
_Static_assert(sizeof(struct ukp_kinst) == KI_SIZE, "struct ukp_kinst's size");
UKP_OFF(struct kretprobe_instance, rp, RI_RP, 8);
UKP_OFF(struct kretprobe_instance, ret_addr, RI_RET_ADDR, 8);
UKP_OFF(struct kretprobe_instance, task, RI_TASK, 4);
UKP_OFF(struct ukp_kret, rp, K_RP, 8);
UKP_OFF(struct ukp_kret, dead, K_DEAD, 4);
UKP_OFF(struct ukp_kret, leaf, K_LEAF, 1);
UKP_OFF(struct ukp_kret, free_top, K_FREE_TOP, 8);
UKP_OFF(struct ukp_kret, isz, K_ISZ, 8);
UKP_OFF(struct ukp_kret, mem, K_MEM, 8);
_Static_assert(offsetof(struct kretprobe, kp) == 0, "struct kretprobe.kp first");
UKP_OFF(struct kretprobe, handler, RP_HANDLER, 8);
UKP_OFF(struct ukp_thread, lean_kret, T_LEAN_KRET, 4);
UKP_OFF(struct ukp_thread, kret_slot, T_KRET_SLOT, 8);
UKP_OFF(struct ukp_thread, kret_errp, T_KRET_ERRP, 8);
UKP_OFF(struct ukp_thread, kc_k, T_KC_K, 8);
UKP_OFF(struct ukp_thread, kc_inst, T_KC_INST, 8);
UKP_OFF(struct ukp_thread, kc_steal, T_KC_STEAL, 4);
_Static_assert(UKP_ARCH_KRET_DROP_LEN == 5, "ukp_opt_tramp_kret's cont");

/* unregistered kretprobes with calls still in flight, under ukp_lock */
static struct ukp_kret *zombies;

/*
 * Any call still in flight?  Only once it is dead and the grace period is
 * over: then instances are only given back (pushed, or kept by a thread:
 * taken back here), never taken, so the free stack read from its top is
 * a stable list, and a push is the last thing a call does with the
 * kretprobe's memory.
 */
static bool kret_busy(struct ukp_kret *k)
{
	/* instances threads keep back first (a return that passed the
	 * dead check before it was set may keep one after: then it is not
	 * free, and the count below says busy) */
	bool busy = false;
	for (struct ukp_kinst *in; (in = ukp_kc_take(k, &busy));)
		inst_push(k, in);
	if (busy)
		return true;
	uint64_t top = atomic_load_explicit(&k->free_top, memory_order_acquire);
	unsigned nfree = 0;
	for (uint32_t i1 = (uint32_t)top; i1 && nfree <= k->n; nfree++)
		i1 = __atomic_load_n(&inst_at(k, i1 - 1)->next_free, __ATOMIC_RELAXED);
	return nfree != k->n;
}

static void kret_free_locked(struct ukp_kret *k)
{
	for (unsigned i = 0; i < k->n; i++) {
		unsigned s = inst_at(k, i)->stub;
		slot_of(s)->inst = NULL;
		stub_free[nstub_free++] = s;
	}
	free(k->mem);
	free(k);
}

unsigned ukp_kret_nzombies(void)
{
	unsigned n = 0;
	ukp_lock_registry();
	for (struct ukp_kret *k = zombies; k; k = k->zombie_next)
		n++;
	pthread_mutex_unlock(&ukp_lock);
	return n;
}

static void reap_zombies_locked(void)
{
	for (struct ukp_kret **pp = &zombies; *pp;) {
		struct ukp_kret *k = *pp;
		if (kret_busy(k)) {
			pp = &k->zombie_next;
		} else {
			*pp = k->zombie_next;
			kret_free_locked(k);
		}
	}
}

/* rp's state off rp, dead (no handler runs from now), and with the
 * zombies: freed once no instance of it is busy (reap_zombies_locked) */
static void retire_locked(struct kretprobe *rp)
{
	struct ukp_kret *k = rp->__ukp_priv[0];
	if (!k)
		return;
	atomic_store(&k->dead, 1);
	rp->__ukp_priv[0] = NULL;
	k->zombie_next = zombies;
	zombies = k;
}

/* Off the thread's list (the newest, unless calls were left by means
 * nobody saw: then wherever it is). */
static inline void unlink_inst(struct ukp_thread *t, struct ukp_kinst *in)
{
	if (__builtin_expect(t->kret_top == in, 1)) {
		t->kret_top = in->below;
		return;
	}
	struct ukp_kinst **pp = &t->kret_top;
	while (*pp && *pp != in)
		pp = &(*pp)->below;
	if (*pp)
		*pp = in->below;
}

/* The call will not return through its stub: free the instance. */
static void inst_drop(struct ukp_thread *t, struct ukp_kinst *in)
{
	unlink_inst(t, in);
	inst_push(in->k, in);		/* last */
}

/* An unwinder passing the stub still reads its slot after telling us:
 * the instance goes to the thread's deferred list, freed by the thread's
 * next kretprobe hit, longjmp or exit (never reused before). */
static void inst_defer(struct ukp_thread *t, struct ukp_kinst *in)
{
	unlink_inst(t, in);
	in->below = t->kret_deferred;
	t->kret_deferred = in;
}

static void free_deferred(struct ukp_thread *t)
{
	while (t->kret_deferred) {
		struct ukp_kinst *in = t->kret_deferred;
		t->kret_deferred = in->below;
		inst_push(in->k, in);
	}
}

/* sync.c: t's thread is gone (or, in a fork child, was never there): none
 * of its calls will return */
/* the orphaned instance (see longjmp_reclaim) back to its free stack */
static void orphan_back(struct ukp_thread *t)
{
	struct ukp_kinst *o = t->kret_orphan;
	t->kret_orphan = NULL;
	inst_push(o->k, o);
}

void ukp_kret_thread_gone(struct ukp_thread *t)
{
	/* the instance it keeps, once no one is taking it (briefly) */
	while (atomic_exchange(&t->kc_steal, 1))
		sched_yield();
	struct ukp_kret *kk = t->kc_k;
	if (kk) {		/* off the thread first: a fork child redoes this */
		t->kc_k = NULL;
		inst_push(kk, t->kc_inst);
	}
	atomic_store_explicit(&t->kc_steal, 0, memory_order_release);
	free_deferred(t);
	ukp_hits_gone(t);	/* in a handler, or the program's of its fault */
	if (t->kret_orphan)
		orphan_back(t);
	while (t->kret_top)
		inst_drop(t, t->kret_top);
	t->jdepth = 0;
}

/* ---- the hit path --------------------------------------------------------- */

/*
 * Entered through a detour built for return probes (relocate.c)?  Its
 * first instruction sets r11 to its copy of the function's first
 * instructions (the site's resume address) and pushes that where, after
 * the handlers, it jumps through: then put the stub's priming call there
 * (kret.S), which goes on 5 bytes before the copy, where the detour
 * drops the call's push.  Any other entry (a trap, ftrace, a handler
 * before this one that changed r11) leaves it alone, and the return
 * leaves by a jump.  r11 and the stack below sp are free at a function's
 * entry.
 */
static inline void prime(struct kprobe *p, struct ukp_kinst *in, struct pt_regs *regs)
{
	const struct ukp_site *s = __atomic_load_n(&p->__ukp_priv[1], __ATOMIC_RELAXED);
	unsigned long c = s ? (unsigned long)atomic_load_explicit(&s->resume,
								 memory_order_relaxed) : 0;
	struct kret_slot *sl = in->slot;
	if (c && regs->r11 == c && ((unsigned long *)regs->sp)[-1] == c) {
		sl->cont = c - UKP_ARCH_KRET_DROP_LEN;
		sl->primed = 1;
		((unsigned long *)regs->sp)[-1] = in->prime;
	} else {
		sl->primed = 0;
	}
}

/*
 * The entry_handler, with a recovery point of its own: a fault in it that
 * is taken (by the kretprobe's fault_handler, or by the program's handler
 * returning) resumes here as if it had returned 0, and the return is
 * probed (API.md).  The instance is marked armed while the point is
 * set; a fault taken anywhere else in the entry resumes as if the
 * kretprobe's pre_handler had returned 0, and gives it back
 * (ukp_kret_entry_fault).
 */
static __attribute__((noinline)) int call_entry_handler(struct ukp_thread *t,
							struct kretprobe *rp,
							struct ukp_kinst *in,
							struct pt_regs *regs)
{
	struct ukp_jmpbuf jb, *outer = t->cur_jb;
	int r = 0;

	/* armed only while cur_jb is jb, in these orders: a fault between
	 * two stores loses the instance rather than give it back and then
	 * put it in flight too */
	if (ukp_setjmp(&jb) == 0) {
		in->entry_armed = 1;
		atomic_signal_fence(memory_order_seq_cst);
		t->cur_jb = &jb;	/* only once jb holds this frame */
		atomic_signal_fence(memory_order_seq_cst);
		r = rp->entry_handler(pub_of(in), regs);
	}
	t->cur_jb = outer;
	atomic_signal_fence(memory_order_seq_cst);
	in->entry_armed = 0;
	atomic_signal_fence(memory_order_seq_cst);
	return r;
}

/* An instance whose entry or return handler a longjmp left (trap.c):
 * that call is never finished. */
void ukp_kret_inst_left(struct ukp_kinst *in)
{
	inst_push(in->k, in);
}

/* A fault in t's kretprobe entry that is taken (by the fault_handler, or
 * by the program's handler returning) resumes as if the pre_handler had
 * returned 0: its instance goes back, unless the fault was the
 * entry_handler's, which resumes in call_entry_handler. */
void ukp_kret_entry_fault(struct ukp_thread *t)
{
	struct ukp_kinst *in = t->kret_entry;
	if (in && !in->entry_armed) {
		t->kret_entry = NULL;
		if (in != t->kret_top)	/* not in flight yet */
			inst_push(in->k, in);
	}
}

static inline __attribute__((always_inline)) int
kret_entry(struct kprobe *p, struct pt_regs *regs, bool call_entry)
{
	struct kretprobe *rp = container_of(p, struct kretprobe, kp);
	struct ukp_kret *k = rp->__ukp_priv[0];
	struct ukp_thread *t = ukp_self;

	if (!k || !t || atomic_load_explicit(&k->dead, memory_order_relaxed))
		return 0;
	if (t->kret_deferred)
		free_deferred(t);
	/* the one this thread keeps, a free one, or one another keeps */
	struct ukp_kinst *in = NULL;
	if (!atomic_load_explicit(&t->kc_steal, memory_order_acquire) && t->kc_k == k) {
		in = t->kc_inst;
		t->kc_k = NULL;
	}
	if (!in)
		in = inst_pop(k);
	if (!in) {
		bool busy = false;
		in = ukp_kc_take(k, &busy);
	}
	if (!in) {
		__atomic_fetch_add(&rp->nmissed, 1, __ATOMIC_RELAXED);
		return 0;
	}
	/* from here on a fault or a longjmp that leaves the hit gives it
	 * back (trap.c), until it is given back or in flight */
	in->entry_armed = 0;
	t->kret_entry = in;
	atomic_signal_fence(memory_order_seq_cst);
	unsigned long *ra = (unsigned long *)regs->sp;
	struct kretprobe_instance *ri = pub_of(in);
	ri->rp = rp;
	/* another kretprobe's stub (two on one function): the real one */
	unsigned long real = *ra;
	for (long j; (j = stub_index(real)) >= 0;)
		real = slot_of((unsigned)j)->ra;
	ri->ret_addr = (kprobe_opcode_t *)real;
	ri->task = t->tid;
	if (call_entry && rp->entry_handler &&
	    (call_entry_handler(t, rp, in, regs) ||
	     /* its fault went to the program's handler, outside the read
	      * lock: unregistered meanwhile, rp and p may be gone (k stays
	      * while an instance is out) */
	     atomic_load_explicit(&k->dead, memory_order_acquire))) {
		t->kret_entry = NULL;
		atomic_signal_fence(memory_order_seq_cst);
		inst_push(k, in);
		return 0;
	}
	in->sp = regs->sp;
	in->t = t;
	in->slot->ra = *ra;		/* the other stub, if any: both run */
	in->slot->sysflags = (uint32_t)(regs->flags & ~(unsigned long)FLAGS_STATUS_DF);
	prime(p, in, regs);
	in->below = t->kret_top;
	atomic_signal_fence(memory_order_seq_cst);	/* in whole before it is in flight */
	t->kret_top = in;
	*ra = in->stub_addr;
	atomic_signal_fence(memory_order_seq_cst);
	t->kret_entry = NULL;	/* in flight: a longjmp settles it there */
	return 0;
}

/* Two entry handlers: without an entry_handler no call through a pointer,
 * so the analysis can prove it lean. */
static int kret_pre_plain(struct kprobe *p, struct pt_regs *regs)
{
	return kret_entry(p, regs, false);
}

static int kret_pre_entry(struct kprobe *p, struct pt_regs *regs)
{
	return kret_entry(p, regs, true);
}

/*
 * Called by ukp_kret_common (kret.S) when a probed function returns to
 * the stub of slot s: runs the handler, frees the instance, answers where
 * the caller goes on (the real return address, or where the handler set
 * regs->ip).
 *
 * No setjmp around the handler (it would keep every local on the stack):
 * a fault the handler's fault_handler takes resumes on ukp_kret_common's
 * frame at rec_sp instead, through ukp_kret_resume (kret.S) and
 * ukp_kret_return_resume below, which finishes the return as if the
 * handler had returned.  The thread block keeps what that needs.
 */
unsigned long ukp_kret_return(struct kret_slot *s, struct pt_regs *regs,
			      unsigned long rec_sp) __attribute__((visibility("hidden")));
unsigned long ukp_kret_return_resume(struct ukp_thread *t) __attribute__((visibility("hidden")));

/* after the handler (or without one): on to where the call goes, give the
 * instance back, leave the hit path */
static inline __attribute__((always_inline)) unsigned long kret_finish(struct ukp_thread *t, struct kret_slot *s,
				 struct pt_regs *regs, uint16_t nested, int *errp, int saved_errno)
{
	struct ukp_kinst *in = s->inst;
	struct kretprobe_instance *ri = pub_of(in);
	/* on to the next stub of the chain, if any, unless the handler sent
	 * the call elsewhere: then that one never returns */
	unsigned long to = regs->ip;
	if (to == (unsigned long)ri->ret_addr) {
		to = s->ra;
	} else {
		long j = stub_index(s->ra);
		struct ukp_kinst *o = j >= 0 ? slot_of((unsigned)j)->inst : NULL;
		if (o && o->t == t)
			inst_drop(t, o);
	}
	inst_push(in->k, in);		/* the last use of k's memory */
	ukp_hit_unlock(t, nested);
	if (errp)
		*errp = saved_errno;
	return to;
}

unsigned long ukp_kret_return(struct kret_slot *s, struct pt_regs *regs, unsigned long rec_sp)
{
	struct ukp_kinst *in = s->inst;
	struct ukp_kret *k = in->k;
	struct ukp_thread *t = ukp_self;
	struct kretprobe_instance *ri = pub_of(in);

	regs->ip = (unsigned long)ri->ret_addr;	/* the real one */
	if (!t) {		/* cannot be: the entry attached it */
		inst_push(k, in);
		return s->ra;
	}
	/* a leaf handler (analyze.c) cannot change errno */
	int *errp = k->leaf ? NULL : t->errno_p;
	int saved_errno = errp ? *errp : 0;
	uint16_t nested = ukp_hit_lock(t);	/* a signal's hit leaves the list alone */
	unlink_inst(t, in);
	if (!atomic_load_explicit(&k->dead, memory_order_acquire)) {
		struct kretprobe *rp = k->rp;
		if (nested || t->internal) {
			__atomic_fetch_add(&rp->kp.nmissed, 1, __ATOMIC_RELAXED);
		} else if (rp->handler) {
			t->cur = &rp->kp;
			t->cur_regs = regs;
			t->cur_jb = NULL;	/* a fault resumes at rec_sp */
			t->abandon = 0;
			t->lean_sp = rec_sp;
			t->lean_errno = saved_errno;
			t->kret_slot = s;
			t->kret_errp = errp;
			t->lean_kret = 1;
			rp->handler(ri, regs);
			t->lean_kret = 0;
			t->cur = NULL;
		}
	}
	return kret_finish(t, s, regs, nested, errp, saved_errno);
}

/* The handler's fault was taken (by its fault_handler, or by the
 * program's handler returning): the rest of ukp_kret_return.  Nested is
 * 0: a handler runs only from the outermost hit. */
unsigned long ukp_kret_return_resume(struct ukp_thread *t)
{
	t->lean_kret = 0;
	t->cur = NULL;
	return kret_finish(t, t->kret_slot, t->cur_regs, 0, t->kret_errp, t->lean_errno);
}

/* ---- stack walkers ------------------------------------------------------- */

/*
 * stacktrace.c: the return address a walker found in the stack slot at
 * `at`, made real (kretprobe_find_ret_addr()): ra itself unless it is a
 * return stub; a stub stands for the address its instance saved, and
 * that one may be another kretprobe's stub (two on one function).  0 if
 * a stub there is no instance of this thread's returning to that slot
 * (a stale word): the walker stops rather than guess.  Signal-safe: the
 * thread's own instances in flight change only on its own stack.
 */
unsigned long ukp_kret_real_ra(unsigned long ra, unsigned long at)
{
	struct ukp_thread *t = ukp_self;
	for (int n = 0; stub_index(ra) >= 0; n++) {
		const struct kret_slot *s = slot_of((unsigned)stub_index(ra));
		const struct ukp_kinst *in = __atomic_load_n(&s->inst, __ATOMIC_RELAXED);
		if (!t || !in || in->t != t || in->sp != at || n > 64)
			return 0;
		ra = __atomic_load_n(&s->ra, __ATOMIC_RELAXED);
	}
	return ra;
}

/* ---- exceptions and longjmp ------------------------------------------------ */

/*
 * An exception (or a thread's cancellation) unwinding through a stub: that
 * call never returns.
 *
 * The stub's frame has the caller's sp as its CFA (libunwind takes the
 * caller's sp from the CFA), so libgcc, which knows a frame by its CFA,
 * cannot tell it from the caller's: when the caller catches, phase 2
 * calls this routine as the handler's frame.  Then it hands over: the
 * context of the stub is installed at ukp_kret_rethrow (kret.S) with the
 * exception and the real return address, which raises the exception
 * again as if from the caller's call, and the caller's own personality
 * lands it.
 */
_Unwind_Reason_Code ukp_kret_personality(int version, _Unwind_Action actions,
					 uint64_t cls, struct _Unwind_Exception *ue,
					 struct _Unwind_Context *ctx)
	__attribute__((visibility("hidden")));
_Unwind_Reason_Code ukp_kret_personality(int version, _Unwind_Action actions,
					 uint64_t cls, struct _Unwind_Exception *ue,
					 struct _Unwind_Context *ctx)
{
	(void)version;
	(void)cls;
	if (!(actions & _UA_CLEANUP_PHASE))
		return _URC_CONTINUE_UNWIND;
	long k = stub_index(_Unwind_GetIP(ctx));
	struct ukp_thread *t = ukp_self;
	if (k < 0 || !t)
		return _URC_CONTINUE_UNWIND;
	struct kret_slot *s = slot_of((unsigned)k);
	struct ukp_kinst *in = s->inst;
	int nested = t->in_handler;
	t->in_handler = (uint16_t)(nested | 1);	/* bit 1 kept (asm-offsets.h) */
	if ((actions & _UA_HANDLER_FRAME) && !(actions & _UA_FORCE_UNWIND)) {
		unsigned long ra = s->ra;
		if (in && in->t == t)
			inst_drop(t, in);	/* nothing reads the slot now */
		t->in_handler = nested;
		_Unwind_SetGR(ctx, __builtin_eh_return_data_regno(0), (_Unwind_Ptr)ue);
		_Unwind_SetGR(ctx, __builtin_eh_return_data_regno(1), ra);
		_Unwind_SetIP(ctx, (_Unwind_Ptr)ukp_kret_rethrow);
		return _URC_INSTALL_CONTEXT;
	}
	if (in && in->t == t)
		inst_defer(t, in);
	t->in_handler = nested;
	return _URC_CONTINUE_UNWIND;
}

/* ukp_kret_rethrow's exception found no handler this time either: what
 * the C++ runtime does then (std::terminate), or abort. */
void ukp_kret_uncaught(void) __attribute__((visibility("hidden"), noreturn));
void ukp_kret_uncaught(void)
{
	void (*terminate)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "_ZSt9terminatev");
	if (terminate)
		terminate();
	abort();
}

/*
 * longjmp leaves the frames between here and the target's sp without a
 * return: free their instances.  Only those of this thread between the
 * current sp and the target (the frames it leaves on this stack); one on
 * another stack is left alone rather than risked.
 */
static void longjmp_reclaim(const void *env)
{
	struct ukp_thread *t = ukp_self;
	if (!t)
		return;
	/* glibc x86-64: __jmpbuf[6] is the sp, mangled with the pointer
	 * guard (tcbhead_t.pointer_guard, %fs:0x30) */
	unsigned long sp = ((const unsigned long *)env)[6], guard;
	__asm__("mov %%fs:0x30, %0" : "=r"(guard));
	sp = (sp >> 0x11 | sp << (64 - 0x11)) ^ guard;
	if (t->nfrec || t->nest)
		ukp_hit_longjmp(t, sp);
	if (!t->kret_top && !t->kret_deferred && !t->kret_orphan)
		return;
	unsigned long here = (unsigned long)__builtin_frame_address(0);
	int nested = t->in_handler;
	t->in_handler = (uint16_t)(nested | 1);	/* bit 1 kept (asm-offsets.h) */
	free_deferred(t);
	/*
	 * A return handler faulted and the program's handler took the fault
	 * (trap.c).  A target past the probed function's caller: that
	 * return is never finished, its instance goes back.  One between
	 * the fault and there: back inside the return handler, whose return
	 * frees it as usual.  One below the fault or on the alternate
	 * signal stack the handler runs on: still in the program's handler.
	 */
	struct ukp_kinst *o = t->kret_orphan;
	stack_t as;
	if (o && !(sigaltstack(NULL, &as) == 0 && (as.ss_flags & SS_ONSTACK) &&
		   sp >= (unsigned long)as.ss_sp && sp < (unsigned long)as.ss_sp + as.ss_size)) {
		if (sp > o->sp)
			orphan_back(t);
		else if (sp >= t->kret_orphan_sp)	/* the faulting frame's own setjmp too */
			t->kret_orphan = NULL;
	}
	while (t->kret_top && t->kret_top->sp >= here && t->kret_top->sp < sp)
		inst_drop(t, t->kret_top);
	/* leaving a signal handler on its alternate stack: the calls on that
	 * stack are left, and so are those the signal interrupted below the
	 * target on the target's stack */
	stack_t ss;
	if (t->kret_top && sigaltstack(NULL, &ss) == 0 && (ss.ss_flags & SS_ONSTACK)) {
		unsigned long lo = (unsigned long)ss.ss_sp, hi = lo + ss.ss_size;
		if (sp < lo || sp >= hi) {
			while (t->kret_top && t->kret_top->sp >= lo && t->kret_top->sp < hi)
				inst_drop(t, t->kret_top);
			while (t->kret_top && t->kret_top->sp < sp)
				inst_drop(t, t->kret_top);
		}
	}
	t->in_handler = nested;
}

typedef void (*jmp_fn)(struct __jmp_buf_tag *, int);
static jmp_fn real_longjmp, real_siglongjmp, real__longjmp, real_longjmp_chk;

static jmp_fn next_fn(const char *name)
{
	return (jmp_fn)dlsym(RTLD_NEXT, name);
}

void ukp_kret_init(void)
{
	real_longjmp = next_fn("longjmp");
	real_siglongjmp = next_fn("siglongjmp");
	real__longjmp = next_fn("_longjmp");
	real_longjmp_chk = next_fn("__longjmp_chk");
}

#define LONGJMP(name, real)						\
	__attribute__((noreturn, visibility("default")))		\
	void name(struct __jmp_buf_tag env[1], int val)			\
	{								\
		longjmp_reclaim(env);					\
		if (!real)						\
			real = next_fn(#name);				\
		real(env, val);						\
		__builtin_unreachable();				\
	}
LONGJMP(longjmp, real_longjmp)
LONGJMP(siglongjmp, real_siglongjmp)
LONGJMP(_longjmp, real__longjmp)
LONGJMP(__longjmp_chk, real_longjmp_chk)

/* ---- registration ---------------------------------------------------------- */

bool ukp_kret_probe_gpr_only_locked(struct kprobe *p)
{
	if (p->pre_handler == kret_pre_entry) {
		struct kretprobe *rp = container_of(p, struct kretprobe, kp);
		return ukp_opt_gpr_only_locked((unsigned long)kret_pre_plain) &&
		       ukp_opt_gpr_only_locked((unsigned long)rp->entry_handler);
	}
	return ukp_opt_gpr_only_locked((unsigned long)p->pre_handler);
}

/* A CET shadow stack would see every return to a stub as an attack. */
int ukp_kret_test_shstk;

static bool shadow_stack_on(void)
{
	unsigned long features = 0;
	if (ukp_kret_test_shstk)
		return true;
	/* ARCH_SHSTK_STATUS, bit 0: ARCH_SHSTK_SHSTK */
	if (syscall(SYS_arch_prctl, 0x5005, &features) != 0)
		return false;
	return features & 1;
}

static int count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	if (!d)
		return 1;
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n ? n : 1;
}

/* kprobes.txt: max(10, 2 * NR_CPUS) with preemption.  Every thread of a
 * process can be preempted (or block) inside the function, so threads
 * count as CPUs do. */
static int default_maxactive(void)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int th = count_threads();
	long m = cpus > th ? cpus : th;
	return m * 2 > 10 ? (int)(m * 2) : 10;
}

static const char *kret_name(const struct kretprobe *rp, char *buf, size_t n)
{
	if (rp->kp.symbol_name)
		snprintf(buf, n, "'%s'", rp->kp.symbol_name);
	else
		snprintf(buf, n, "at %p", (void *)rp->kp.addr);
	return buf;
}

static struct ukp_kret *kret_new_locked(struct kretprobe *rp, int *err)
{
	char nm[160];
	int n = rp->maxactive > 0 ? rp->maxactive : default_maxactive();
	if ((*err = stubs_init_locked()))
		return NULL;
	if ((unsigned)n > nstub_free) {
		ukp_log("kretprobe %s: %d instances asked, %u return stubs left of %u",
			kret_name(rp, nm, sizeof(nm)), n, nstub_free, KRET_NSTUBS);
		*err = -ENOMEM;
		return NULL;
	}
	size_t isz = sizeof(struct ukp_kinst) + sizeof(struct kretprobe_instance) + rp->data_size;
	isz = (isz + 15) & ~(size_t)15;
	struct ukp_kret *k = calloc(1, sizeof(*k));
	char *mem = k && isz < (1UL << 30) / (size_t)n ? calloc(n, isz) : NULL;
	if (!mem) {
		free(k);
		ukp_log("kretprobe %s: no memory for %d instances of %zu bytes",
			kret_name(rp, nm, sizeof(nm)), n, isz);
		*err = -ENOMEM;
		return NULL;
	}
	k->rp = rp;
	k->n = (unsigned)n;
	k->isz = isz;
	k->mem = mem;
	/* lean: the handler keeps to the general registers (each slot
	 * says so to kret.S) */
	bool lean = ukp_opt_gpr_only_locked((unsigned long)rp->handler);
	k->leaf = lean && ukp_opt_leaf_locked((unsigned long)rp->handler);
	for (unsigned i = 0; i < k->n; i++) {
		struct ukp_kinst *in = inst_at(k, i);
		in->k = k;
		in->stub = stub_free[--nstub_free];
		in->stub_addr = stub_addr(in->stub);
		in->prime = in->stub_addr - KRET_STUB + KRET_PRIME;
		in->slot = slot_of(in->stub);
		in->next_free = i + 2 <= k->n ? i + 2 : 0;
		in->self = i + 1;
		slot_of(in->stub)->inst = in;
		slot_of(in->stub)->lean = lean;
	}
	atomic_init(&k->free_top, 1);
	return k;
}

int register_kretprobes(struct kretprobe **rps, int num)
{
	char nm[160];
	int err = 0, i;

	if (!rps || num <= 0)
		return -EINVAL;
	if (shadow_stack_on()) {
		ukp_log("kretprobe: this process runs with a CET shadow stack, which a "
			"replaced return address would break: return probes are not supported");
		return -EOPNOTSUPP;
	}
	ukp_init_once();
	struct kprobe **kps = calloc(num, sizeof(*kps));
	if (!kps)
		return -ENOMEM;
	ukp_lock_registry();
	reap_zombies_locked();
	for (i = 0; i < num && !err; i++) {
		struct kretprobe *rp = rps[i];
		if (!rp) {
			err = -EINVAL;
			break;
		}
		if (rp->__ukp_priv[0]) {
			ukp_log("kretprobe %s: already registered", kret_name(rp, nm, sizeof(nm)));
			err = -EINVAL;
			break;
		}
		struct ukp_kret *k = kret_new_locked(rp, &err);
		if (!k)
			break;
		rp->__ukp_priv[0] = k;
		rp->nmissed = 0;
		rp->kp.pre_handler = rp->entry_handler ? kret_pre_entry : kret_pre_plain;
		rp->kp.post_handler = NULL;
		kps[i] = &rp->kp;
	}
	int made = i;
	pthread_mutex_unlock(&ukp_lock);
	if (!err)
		err = ukp_register_kind(kps, num, 'r');
	if (err) {
		/* ukp_register_kind undid what it published, after a grace
		 * period; a call that entered meanwhile may still be out with
		 * an instance: as unregistering does, dead, and freed once
		 * none is busy */
		ukp_lock_registry();
		for (i = 0; i < made; i++)
			if (rps[i] && kps[i])
				retire_locked(rps[i]);
		reap_zombies_locked();
		pthread_mutex_unlock(&ukp_lock);
	}
	free(kps);
	return err;
}

int register_kretprobe(struct kretprobe *rp)
{
	return register_kretprobes(&rp, 1);
}

void unregister_kretprobes(struct kretprobe **rps, int num)
{
	if (!rps || num <= 0)
		return;
	struct kprobe **kps = calloc(num, sizeof(*kps));
	if (!kps)
		return;
	/* dead first: a return after the grace period below runs no handler */
	for (int i = 0; i < num; i++) {
		if (!rps[i])
			continue;
		kps[i] = &rps[i]->kp;
		struct ukp_kret *k = rps[i]->__ukp_priv[0];
		if (k)
			atomic_store(&k->dead, 1);
	}
	ukp_unregister_kind(kps, num);	/* waits for the hit path */
	ukp_lock_registry();
	for (int i = 0; i < num; i++)
		if (rps[i])
			retire_locked(rps[i]);
	reap_zombies_locked();
	pthread_mutex_unlock(&ukp_lock);
	free(kps);
}

void unregister_kretprobe(struct kretprobe *rp)
{
	unregister_kretprobes(&rp, 1);
}

int disable_kretprobe(struct kretprobe *rp)
{
	return rp ? disable_kprobe(&rp->kp) : -EINVAL;
}

int enable_kretprobe(struct kretprobe *rp)
{
	return rp ? enable_kprobe(&rp->kp) : -EINVAL;
}

/* ---- jprobes ------------------------------------------------------------------ */

static int jprobe_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct jprobe *jp = container_of(p, struct jprobe, kp);
	struct ukp_thread *t = ukp_self;
	/* only from a trap: its context has the vector arguments.  A thread
	 * still in a detour of this address (optimised before the jprobe
	 * came) has none to give: that call goes unprobed. */
	if (!t || t->jdepth >= UKP_JP_DEPTH || !t->cur_uc) {
		__atomic_fetch_add(&p->nmissed, 1, __ATOMIC_RELAXED);
		return 0;
	}
	struct ukp_jrec *r = &t->jrec[t->jdepth];
	r->regs = *regs;
	r->cont = ukp_probe_resume(p);
	if (!r->cont)
		return 0;
	const struct _libc_fpstate *fp = t->cur_uc->uc_mcontext.fpregs;
	if (!fp) {
		__atomic_fetch_add(&p->nmissed, 1, __ATOMIC_RELAXED);
		return 0;
	}
	r->mxcsr = fp->mxcsr;
	r->fcw = fp->cwd;
	memcpy(r->xmm, fp->_xmm, sizeof(r->xmm));
	/* the stack the callee owns: arguments beyond the registers */
	r->nstack = UKP_JP_STACK;
	while (r->nstack && ukp_copy_nofault(r->stack, (const void *)regs->sp, r->nstack))
		r->nstack /= 2;
	t->jdepth++;
	regs->ip = (unsigned long)jp->entry;
	return 1;
}

/* jprobe_return (kret.S): the record to put back, with its stack copy
 * already back in place; NULL outside a jprobe's entry. */
struct ukp_jrec *ukp_jprobe_unwind(void) __attribute__((visibility("hidden")));
struct ukp_jrec *ukp_jprobe_unwind(void)
{
	struct ukp_thread *t = ukp_self;
	if (!t || !t->jdepth)
		return NULL;
	struct ukp_jrec *r = &t->jrec[--t->jdepth];
	memcpy((void *)r->regs.sp, r->stack, r->nstack);
	return r;
}

bool ukp_is_kret_plain_entry(const struct kprobe *p)
{
	return p->pre_handler == kret_pre_plain;
}

void *ukp_kret_of(const struct kprobe *p)
{
	return ukp_is_kret_entry(p) ? container_of(p, struct kretprobe, kp)->__ukp_priv[0] : NULL;
}

bool ukp_is_kret_entry(const struct kprobe *p)
{
	return p->pre_handler == kret_pre_plain || p->pre_handler == kret_pre_entry;
}

bool ukp_is_jprobe_handler(const struct kprobe *p)
{
	return p->pre_handler == jprobe_pre;
}

int register_jprobes(struct jprobe **jps, int num)
{
	if (!jps || num <= 0)
		return -EINVAL;
	struct kprobe **kps = calloc(num, sizeof(*kps));
	if (!kps)
		return -ENOMEM;
	int err = 0;
	for (int i = 0; i < num && !err; i++) {
		if (!jps[i] || !jps[i]->entry) {
			ukp_log("jprobe: no entry function");
			err = -EINVAL;
			break;
		}
		jps[i]->kp.pre_handler = jprobe_pre;
		jps[i]->kp.post_handler = NULL;
		kps[i] = &jps[i]->kp;
	}
	if (!err)
		err = ukp_register_kind(kps, num, 'j');
	free(kps);
	return err;
}

int register_jprobe(struct jprobe *jp)
{
	return register_jprobes(&jp, 1);
}

void unregister_jprobes(struct jprobe **jps, int num)
{
	if (!jps || num <= 0)
		return;
	struct kprobe **kps = calloc(num, sizeof(*kps));
	if (!kps)
		return;
	for (int i = 0; i < num; i++)
		kps[i] = jps[i] ? &jps[i]->kp : NULL;
	ukp_unregister_kind(kps, num);
	free(kps);
}

void unregister_jprobe(struct jprobe *jp)
{
	unregister_jprobes(&jp, 1);
}

int disable_jprobe(struct jprobe *jp)
{
	return jp ? disable_kprobe(&jp->kp) : -EINVAL;
}

int enable_jprobe(struct jprobe *jp)
{
	return jp ? enable_kprobe(&jp->kp) : -EINVAL;
}
