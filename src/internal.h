/* SPDX-License-Identifier: MIT */
/* Private declarations shared by the generic parts of the engine. */
#ifndef UKP_INTERNAL_H
#define UKP_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <ukprobes.h>
#include "arch/x86_64/arch.h"
#include "arch/x86_64/asm-offsets.h"

#define UKP_HIDDEN __attribute__((visibility("hidden")))

/* Every message has one prefix and names what failed. */
void ukp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* non-zero: this thread's ukp_log() lines are dropped (a caller that
 * returns the error itself, as the events API does) */
extern __thread int ukp_log_quiet;
/* set by a caller registering in code it knows to be an object's (the
 * events core's deferred events): an address in no object the engine
 * knows is then -ENOENT (unloaded meanwhile, or not yet listed), never
 * taken for anonymous code, whose probes outlive any unload */
extern __thread int ukp_register_in_object;

/* ------------------------------------------------------------------ */
/* Threads and grace periods (sync.c)                                  */

/*
 * One block per thread that ever hit a probe, from a pool that is never
 * unmapped (so the grace-period scan can always read it).  Only its own
 * thread writes it, except `free`, which the pool reclaims.
 */
/* A hit that will run post_handlers later: which probes were live when
 * it trapped (a probe registered or enabled while the instruction runs,
 * e.g. a blocking system call, must not get a post without its pre). */
#define UKP_PENDING_PROBES 8
struct ukp_pending {
	const struct ukp_site *site;
	unsigned n;			/* > UKP_PENDING_PROBES: too many, all live */
	struct kprobe *p[UKP_PENDING_PROBES];
};
#define UKP_PENDING_DEPTH 4

/* A jprobe entry in progress: what jprobe_return puts back (kret.S reads
 * it: JR_* in asm-offsets.h) */
#define UKP_JP_DEPTH 4
#define UKP_JP_STACK 128
struct ukp_jrec {
	struct pt_regs regs;
	unsigned long cont;		/* the first instruction, out of line */
	uint32_t mxcsr;
	uint16_t fcw;
	uint8_t xmm[8][16] __attribute__((aligned(16)));
	unsigned char stack[UKP_JP_STACK];
	size_t nstack;
};
struct ukp_kinst;
#define UKP_FT_CONTEXTS 4	/* the kernel's: normal, softirq, irq, NMI */

/* kret.c and kret.S: the slot of a return stub (one per instance) */
struct kret_slot {
	uint8_t primed;			/* the entry ran the priming call */
	uint8_t lean;			/* the handler keeps to the general
					   registers (its kretprobe's lean) */
	uint32_t sysflags;		/* the entry's flags but the status
					   flags and DF (TF, AC...): the
					   return shows them (kret.S) */
	unsigned long cont;		/* where the priming call goes on */
	unsigned long ra;		/* the real return address */
	struct ukp_kinst *inst;		/* bound at registration */
};
extern struct kret_slot ukp_kret_ra[] __attribute__((visibility("hidden")));

/* ukp_read_leave()'s answer (below) */
struct ukp_read_saved {
	uint16_t nest;
	uint32_t seq;
	unsigned long hit_sp;
};

/*
 * A hit whose handler's fault the program's handler is taking (trap.c):
 * where the hit goes on (fault_resume), kept across the program's
 * handler, which may hit probes of its own and so overwrite the thread
 * block's copy; and what a longjmp out of that handler must settle
 * (ukp_hit_longjmp).  Deeper nesting than UKP_FREC_DEPTH goes unrecorded:
 * a longjmp out of those is not settled.
 */
#define UKP_FREC_DEPTH 8
struct ukp_fault_rec {
	unsigned long frame;		/* handler_fault_unhandled's */
	unsigned long fault_sp;		/* the fault's sp */
	unsigned long hit_sp;		/* the hit's frame (its pt_regs) */
	struct ukp_read_saved rs;	/* the read lock it left */
	uint16_t ih;			/* and its in_handler */
	struct kprobe *p;		/* the handler's probe */
	struct pt_regs *cur_regs;
	struct ukp_jmpbuf *cur_jb;
	unsigned long lean_sp;
	const struct ukp_plist *lean_list;
	unsigned lean_i;
	int lean_errno;
	int lean_kret;
	int ft_hit;
	struct kret_slot *kret_slot;
	int *kret_errp;
	struct ukp_kinst *kret_entry;
	const struct ukp_site *in_post;
};

struct ukp_thread {
	/* The read lock (sync.c), one word the hand-written hit paths take
	 * with one store (hitpath.h): nest, in_handler and the grace
	 * period epoch seen on entry, all copied from ukp_gp */
	uint16_t nest;			/* hit-path nesting (signals in handlers) */
	uint16_t in_handler;		/* recursion guard: nmissed */
	_Atomic uint32_t seq;		/* ukp_gp's epoch at the outermost entry */
	unsigned long hit_sp;		/* the outermost hit's frame, when the C
					   lock took it (in_handler bit 1 clear;
					   else cur_regs: asm-offsets.h) */
	pid_t tid;
	_Atomic int free;
	struct kprobe *cur;		/* probe whose handler runs now */
	struct pt_regs *cur_regs;
	struct ukp_jmpbuf *cur_jb;	/* where a handled fault resumes */
	int in_fault;
	int abandon;			/* stop running this hit's handlers */
	unsigned npending;		/* ring of hits awaiting their post */
	struct ukp_pending pending[UKP_PENDING_DEPTH];
	int in_hook;
	const struct ukp_site *in_post;	/* post dispatch of this site running */
	int internal;			/* ukprobes' own thread: no handlers
				   (and in_handler 1 for good, so the
				   hand-written paths send it to C) */
	int *errno_p;			/* this thread's errno */
	/* the lean hit running handlers (trap.c), where a fault a handler
	 * takes resumes: the trampoline's frame (found from cur_regs; a
	 * kretprobe's C return path: at lean_sp), not a setjmp per call */
	unsigned long lean_sp;
	const struct ukp_plist *lean_list;
	unsigned lean_i;
	int lean_errno;
	/* kretprobes (kret.c): this thread's instances in flight, newest
	 * first; jprobes: the entries in progress */
	struct ukp_kinst *kret_top;
	struct ukp_kinst *kret_deferred;	/* left by an unwinder (kret.c) */
	unsigned jdepth;
	const ucontext_t *cur_uc;	/* the trap's context while pre runs */
	struct ukp_jrec jrec[UKP_JP_DEPTH];
	/* copy_from_user_nofault from a handler needs no state: entry.S */
	/* ftrace (ftrace.c, entry.S): the stub calls this thread is inside
	 * (they nest: a callback may call a traced function), and how many
	 * times that depth came back to 0 (the grace period waits for a
	 * thread seen inside until either is seen to; sync.c); and the
	 * recursion contexts held by ftrace_test_recursion_trylock */
	unsigned long ft_depth, ft_qs;
	unsigned ft_rdepth;
	unsigned long ft_rsp[UKP_FT_CONTEXTS];
	/* the lean hit is a kretprobe's return (kret.c): a fault resumes
	 * through ukp_kret_resume, with these; 1: on the frame at lean_sp,
	 * 2: kret.S's fast path, which has none */
	int lean_kret;
	struct kret_slot *kret_slot;
	int *kret_errp;	/* NULL for a leaf handler (errno kept) */
	/* the instance of a return handler whose fault the program's
	 * handler is taking (trap.c), and the sp of the fault: given back if
	 * that one longjmps past it or the thread ends there (kret.c) */
	struct ukp_kinst *kret_orphan;
	unsigned long kret_orphan_sp;
	/* one free kretprobe instance the thread keeps for its next call
	 * of that kretprobe (kc_k; NULL: none), so a call and its return
	 * take no locked instruction (~7 ns each on a Xeon).  Only the
	 * thread's outermost hit touches it, and only after it loaded
	 * kc_steal (first) and found 0;
	 * another thread takes it with ukp_kc_take() (sync.c) */
	struct ukp_kret *kc_k;
	struct ukp_kinst *kc_inst;
	_Atomic int kc_steal;
	/* the handler running now was reached through an ftrace stub's
	 * call (ukp_kprobe_ftrace_hit), which counted it in (ft_depth) */
	int ft_hit;
	/* the instance a kretprobe's entry holds, from its take until it
	 * is in flight or given back (kret.c) */
	struct ukp_kinst *kret_entry;
	/* hits whose handler's fault the program's handlers are taking,
	 * outermost first (trap.c); in the block, not on those handlers'
	 * stacks, which a setcontext or an exception may leave for good */
	unsigned nfrec;
	struct ukp_fault_rec frec[UKP_FREC_DEPTH];
};

/* sync.c; inline below because every hit takes these */
extern __thread struct ukp_thread *ukp_self
	__attribute__((tls_model("initial-exec")));
extern int ukp_fast_readers	/* membarrier does the readers' fence */
	__attribute__((visibility("hidden")));
/* The grace period word (sync.c).  Bits 32-63: the epoch, moved on by
 * each grace period; bits 0-31: what a hand-written hit path stores into
 * its thread's nest and in_handler (1, 1) when it takes the read lock,
 * unless UKP_GP_NOFAST or UKP_GP_NOKNOB is set: then the C path decides.
 * NOFAST: the readers are not fenced by membarrier, or this is a fork
 * child sharing slot memory with its parent (slots.c); NOKNOB:
 * kprobes_set_enabled(0). */
extern _Atomic unsigned long ukp_gp __attribute__((visibility("hidden")));
void ukp_gp_flag(unsigned long flag, bool set);
struct ukp_thread *ukp_thread_attach(void);
/* The site whose post dispatch the thread tid runs now (its in_post), or
 * NULL: read from outside, meaningful while tid is stopped (optimize.c) */
const struct ukp_site *ukp_thread_in_post(pid_t tid);

/* attaches on first use (NULL: it could not) */
static inline struct ukp_thread *ukp_thread_self(void)
{
	struct ukp_thread *t = ukp_self;
	return __builtin_expect(t != NULL, 1) ? t : ukp_thread_attach();
}

/* NULL if never attached */
static inline struct ukp_thread *ukp_thread_peek(void)
{
	return ukp_self;
}

/* The stack a fault in a return handler resumes on (lean_kret set): the
 * C path's frame at lean_sp, or kret.S's fast path's, which does not
 * store it: pt_regs rounded down to 16. */
static inline unsigned long ukp_kret_rec_sp(const struct ukp_thread *t)
{
	return t->lean_kret == 2 ? (unsigned long)t->cur_regs & ~15UL : t->lean_sp;
}

/* A reader's store of nest before its next loads: without membarrier a
 * full fence; with it, the writer's membarrier orders them */
static inline void ukp_reader_fence(void)
{
	if (ukp_fast_readers)
		atomic_signal_fence(memory_order_seq_cst);
	else
		atomic_thread_fence(memory_order_seq_cst);
}

/* the hit's frame (hit_sp), for a longjmp out of it (trap.c) */
static inline unsigned long ukp_cur_sp(void)
{
	unsigned long sp;
	__asm__ volatile("mov %%rsp, %0" : "=r"(sp));
	return sp;
}

/* Enter/leave the hit path: readers of sites' probe lists.  nest before
 * the epoch's load, the epoch's load before any list's (sync.c). */
static inline void ukp_read_lock(struct ukp_thread *t)
{
	if (t->nest != 0) {
		t->nest++;
		return;
	}
	/* the frame before nest and again after: a signal's hit between
	 * the two leaves its own */
	unsigned long sp = ukp_cur_sp();
	t->hit_sp = sp;
	atomic_signal_fence(memory_order_seq_cst);
	t->nest = 1;
	t->hit_sp = sp;
	ukp_reader_fence();
	unsigned long g = atomic_load_explicit(&ukp_gp, memory_order_acquire);
	atomic_store_explicit(&t->seq, (uint32_t)(g >> 32), memory_order_relaxed);
}

/* every list load done before nest 0 shows (from either kind of lock:
 * a C path may end one HIT_LOCK took, hitpath.h) */
static inline void ukp_read_unlock(struct ukp_thread *t)
{
	__atomic_store_n(&t->nest, (uint16_t)(t->nest - 1), __ATOMIC_RELEASE);
}
/*
 * A C hit path holds in_handler from before its first list load to its
 * unlock, as HIT_LOCK does (hitpath.h): a signal's hit meanwhile only
 * counts nmissed (the kernel's kprobe_running() rule), so no handler of
 * that hit can fault, leave the read lock for the program's handler and
 * let a writer free the list this hit is reading.  Returns what it found
 * (1: nested), for ukp_hit_unlock.
 */
static inline uint16_t ukp_hit_hold(struct ukp_thread *t)
{
	uint16_t nested = t->in_handler;
	t->in_handler = nested | 1;	/* bit 1: an asm path's lock, kept */
	atomic_signal_fence(memory_order_seq_cst);
	return nested;
}

/* The read lock and ukp_hit_hold together.  The common case (not nested,
 * readers fenced by membarrier) as HIT_LOCK takes it: nest 1, in_handler
 * 1 and the epoch in one store, then the hit's frame (a longjmp in
 * between finds an older one: one instruction, as in the asm paths). */
static inline uint16_t ukp_hit_lock(struct ukp_thread *t)
{
	if (*(const uint32_t *)(const void *)t == 0) {	/* nest, in_handler */
		unsigned long g = atomic_load_explicit(&ukp_gp, memory_order_acquire);
		if (!(g & UKP_GP_NOFAST)) {
			__atomic_store_n((uint64_t *)(void *)t,
					 (g & ~0xffffffffUL) | 0x10001, __ATOMIC_RELAXED);
			t->hit_sp = ukp_cur_sp();
			atomic_signal_fence(memory_order_seq_cst);
			return 0;
		}
	}
	ukp_read_lock(t);
	return ukp_hit_hold(t);
}

/* in_handler back and the read lock left, in one store */
static inline void ukp_hit_unlock(struct ukp_thread *t, uint16_t nested)
{
	atomic_signal_fence(memory_order_seq_cst);
	__atomic_store_n((uint32_t *)(void *)t,
			 (uint32_t)(uint16_t)(t->nest - 1) | (uint32_t)nested << 16,
			 __ATOMIC_RELEASE);
}

/* Out of every read lock the thread holds, for the program's own handler
 * of a fault in a handler (trap.c: it may longjmp away), and back in as
 * it was: with the epoch of the outermost entry, whose hit goes on with
 * the lists it loaded then, never a newer one.  (A writer that saw nest
 * 0 meanwhile may have freed them: the hit abandons its list.) */
static inline struct ukp_read_saved ukp_read_leave(struct ukp_thread *t)
{
	struct ukp_read_saved r = {
		t->nest, atomic_load_explicit(&t->seq, memory_order_relaxed), t->hit_sp,
	};
	__atomic_store_n(&t->nest, 0, __ATOMIC_RELEASE);
	return r;
}

/* nest, in_handler and seq back in one store (as HIT_LOCK takes them): a
 * signal's hit between two stores would find nest 0 and leave its own
 * epoch in seq */
static inline void ukp_read_back(struct ukp_thread *t, struct ukp_read_saved r,
				 uint16_t in_handler)
{
	_Static_assert(offsetof(struct ukp_thread, nest) == 0 &&
		       offsetof(struct ukp_thread, in_handler) == 2 &&
		       offsetof(struct ukp_thread, seq) == 4, "the read lock word");
	uint64_t w = r.nest | (uint64_t)in_handler << 16 | (uint64_t)r.seq << 32;
	t->hit_sp = r.hit_sp;
	__atomic_store_n((uint64_t *)(void *)t, w, __ATOMIC_RELEASE);
	ukp_reader_fence();	/* the store before any later list load */
}

/* A hit with no thread block (nested in the block's own attach): enough
 * of a reader to count nmissed on the site's list. */
void ukp_anon_read_lock(void);
void ukp_anon_read_unlock(void);
/* longjmp (kret.c) to sp: the hits it leaves give back what they hold,
 * the ones it goes back into take it again (trap.c) */
void ukp_hit_longjmp(struct ukp_thread *t, unsigned long sp);
void ukp_kret_inst_left(struct ukp_kinst *in);
void ukp_kret_entry_fault(struct ukp_thread *t);
/* t's thread is gone inside a handler, or inside the program's handlers
 * of its handlers' faults: what those hits held (trap.c) */
void ukp_hits_gone(struct ukp_thread *t);
/* Returns once every thread that was in the hit path has left it. */
void ukp_synchronize(void);
/* an ftrace stub's call left from C (FT_OUT in entry.S) */
static inline void ukp_ft_out(struct ukp_thread *t)
{
	unsigned long d = t->ft_depth - 1;
	__atomic_store_n(&t->ft_depth, d, __ATOMIC_RELEASE);
	if (!d)
		__atomic_store_n(&t->ft_qs, t->ft_qs + 1, __ATOMIC_RELEASE);
}
/* Another thread's kept instance of kretprobe k (see kc_k), or NULL;
 * *busy set if a thread keeping one was inside a hit, so it could not be
 * taken.  Called inside a hit too (an entry that found none free). */
struct ukp_kinst *ukp_kc_take(const struct ukp_kret *k, bool *busy);
/* Returns once every call that was inside an ftrace stub has left it. */
void ukp_ftrace_synchronize(void);
void ukp_sync_init(void);

/* ------------------------------------------------------------------ */
/* Sites: one per probed address (kprobes.c)                           */

/* Immutable once published; swapped whole, freed after a grace period. */
struct ukp_plist {
	unsigned n;
	bool any_post;
	bool gpr_only;		/* every handler leaves vector/x87 state alone */
	uint8_t lean1;		/* gpr_only with one probe: the lean fast path;
				   2: its pre_handler is a leaf too, which
				   cannot change errno (ukp_opt_leaf_locked) */
	bool kret1;		/* one probe, a kretprobe without entry_handler:
				   ukp_opt_tramp_kret's fast path */
	bool post_lean;		/* every post_handler does (and its probe's
				   fault_handler): the post trampoline saves
				   no vector state */
	void *kret;		/* kret1: that kretprobe's struct ukp_kret
				   (kret.c), one load nearer the hit */
	void *bare_fn;		/* lean1 2 with a pre_handler the bare fast
				   path may run (ukp_opt_bare_locked): that
				   handler; else NULL */
	struct kprobe *p[];
};

struct ukp_object;

/*
 * A site lives as long as the process (its slot may still be executed by
 * a thread that trapped before the probe went away).  When its object is
 * unloaded it is marked dead and leaves the lookup table.
 */
struct ukp_site {
	unsigned long addr;
	struct ukp_insn insn;
	_Atomic(struct ukp_plist *) probes;	/* NULL: no probe now */
	uint8_t *slot;				/* out-of-line copy, no post */
	uint8_t *slot_post;			/* with the post trampoline */
	struct ukp_object *obj;
	void (*hook)(void);			/* internal: runs before probes */
	/* protected by ukp_lock: */
	bool armed;
	_Atomic bool dead;
	uint8_t orig;
	/* jump optimisation (optimize.c), under ukp_lock */
	struct ukp_opt *opt;			/* analysis and detour, built once */
	bool optimized;				/* the jump is written */
	bool queued;
	unsigned gen;				/* bumped by every unoptimisation */
	/* where a trap here resumes instead of the slot: the detour's copy
	 * of the whole region (read by the hit path) */
	_Atomic(uint8_t *) resume;
	bool ftrace;				/* an ftrace patch site: no int3 */
	uint8_t held;		/* optimize.c: 1 held out of a batch, its first
				   retry to come; 2 retried since */
	bool requeued;		/* optimize.c: queued again by a retry */
	struct ukp_site *run_head;	/* optimize.c: the site whose jump covers
					   this one, its run's segment calling
					   this one's probes (under ukp_lock) */
	bool had_post;		/* a post_handler was here (the post trampoline
				   may be returning into it) */
	uint32_t said;		/* optimize.c: a hash of the last reason told
				   (UKPROBES_VERBOSE) why it is not optimised */
	bool tell;		/* optimize.c: in the list of those to tell */
};

struct ukp_site *ukp_site_lookup(unsigned long addr);	/* lock-free */
/* code as it was before any probe or ftrace patch (the arch layer reads
 * it through ukp_arch_env) */
void ukp_read_text(unsigned long addr, uint8_t *buf, size_t n);

/* ------------------------------------------------------------------ */
/* Out-of-line slots (slots.c)                                         */

void ukp_slots_init(void);
/* Executable memory within +-1 GiB of near.  NULL on failure. */
uint8_t *ukp_slot_alloc(unsigned long near, size_t size);
void ukp_slot_set_word(uint8_t *at, uint64_t v);
void ukp_slot_set_private_word(uint8_t *at, uint64_t v);	/* a pointer */
bool ukp_slot_is_shared(const void *at);	/* with a fork parent */
void ukp_slot_set_u32(uint8_t *at, uint32_t v);
int ukp_slot_write_raw(uint8_t *slot, const uint8_t *code, size_t len);
/* Copy code into slot memory (makes it writable for the duration). */
int ukp_slot_write(uint8_t *slot, const uint8_t *code, size_t len,
		   struct ukp_site *site, const int16_t *sp_fix);
/* A detour: map (kept, not copied) says where each byte came from. */
int ukp_slot_write_detour(uint8_t *slot, const uint8_t *code, size_t len,
			  struct ukp_site *site, const struct ukp_copy_map *map,
			  unsigned entry, unsigned long exit);
/* An address inside a slot or detour, mapped back to the code it copies. */
struct ukp_slot_hit {
	struct ukp_site *site;
	unsigned long orig_ip;	/* the original instruction it stands for */
	unsigned long retry_ip;	/* where that instruction's copy starts */
	int sp_fix;		/* stack adjustment back to the original state */
	bool post, detour;
	bool own;		/* a detour's own fast path: ukprobes' code,
				   standing for no probed instruction */
	bool in_copy;		/* a detour's copy of a region's instruction
				   (not its entry, call or fast path) */
	unsigned long exit;	/* a detour's way back to the original code
				   (a run's segment: the run's end) */
};
bool ukp_slot_find(unsigned long ip, struct ukp_slot_hit *h);

/* ------------------------------------------------------------------ */
/* Code patching (text.c)                                              */

struct ukp_poke { unsigned long addr; uint8_t byte; };
/* Write the bytes, one protection change per page, one serialisation. */
int ukp_text_poke_batch(const struct ukp_poke *pokes, size_t n);
void ukp_text_init(void);
void ukp_text_serialize(void);
int ukp_text_is_exec(unsigned long addr);

/* ------------------------------------------------------------------ */
/* Symbols and objects (symbols.c)                                     */

struct ukp_where {
	unsigned long func_start, func_end;	/* 0 if unknown */
	char func[128];
	char object[128];		/* base name; "" for the main executable */
	struct ukp_object *obj;
};

int ukp_sym_resolve(const char *spec, unsigned long *addr);
/* The path of the separate debug file of the ELF image f (len bytes), by
 * its build-id note (/usr/lib/debug/.build-id/xx/yyyy.debug), in path (n
 * at least 256); false if it has none */
bool ukp_debug_path(const void *f, size_t len, char *path, size_t n);
/* The object's code as the analysis needs it (funcs: malloc'd, by address) */
int ukp_sym_object_desc(struct ukp_object *o, struct ukp_objdesc *d);
int ukp_sym_where(unsigned long addr, struct ukp_where *w);
bool ukp_sym_blacklisted(unsigned long addr, const char **why);
void ukp_sym_init(void);
/* after a dlclose: is this object still mapped? (under ukp_lock) */
bool ukp_sym_object_alive(struct ukp_object *obj);
void ukp_sym_refresh(void);
/* dl_iterate_phdr() where no fork can come meanwhile (a child would
 * inherit the dynamic linker's lock held: its first dlopen hangs);
 * every walk of the library's goes through it */
struct dl_phdr_info;
int ukp_dl_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg);
void ukp_sym_fork_prepare_dl(void);
void ukp_sym_fork_prepare(void);
void ukp_sym_fork_parent(void);
void ukp_sym_fork_child(void);
/* ftrace.c's view of the objects */
size_t ukp_sym_objects(struct ukp_object ***out);
const char *ukp_sym_object_name(struct ukp_object *o, bool *is_main);
#define UKP_PS_MCOUNT 0
#define UKP_PS_PATCHABLE 1
int ukp_sym_patch_sites(struct ukp_object *o, unsigned long **addrs, uint8_t **from, size_t *n);

/* ------------------------------------------------------------------ */
/* Signals (trap.c)                                                    */

void ukp_trap_init(void);
void ukp_trap_ensure(void);
void ukp_post_dispatch(void *cont, struct pt_regs *regs);
/* the same without the vector state saved: 0 (nothing done) if a
 * post_handler may need it */
int ukp_post_dispatch_lean(void *cont, struct pt_regs *regs);
extern int ukp_knob_enabled __attribute__((visibility("hidden")));

/* ------------------------------------------------------------------ */
/* Jump optimisation (optimize.c)                                      */

/*
 * Could a probe at addr be jump-optimised?  Runs the same safety checks
 * as the optimizer.  0, or a negative errno with the refusal in why:
 * "<reason>" or "<reason>: <details>", the reason one of
 *   "not in a known function", "region crosses the function's end",
 *   "call inside the region", "unrelocatable instruction",
 *   "jump into the region", "indirect jump in the function",
 *   "landing pad inside the region", "undecodable function",
 *   "blacklisted".
 * For tools (coverage report) and tests that link the static library.
 */
int ukp_opt_check(unsigned long addr, char *why, size_t n);
/* Why the probes at addr are not optimised now, as UKPROBES_VERBOSE=1
 * tells it ("not optimized: <why>"): 0 when they are (their own jump, or
 * a run's), else -EAGAIN with the reason in why: the analysis' refusal,
 * a condition of the moment (another probe in the region, dead padding
 * under another's jump, a post_handler...), or "held or not yet tried"
 * where every condition holds.  -ENOENT: no probe there.  For tools. */
int ukp_opt_why_not(unsigned long addr, char *why, size_t n);
/* Would a handler at fn let its probes use the lean trampoline (it and
 * all it calls leave vector, x87 and MXCSR state alone)?  0 or a negative
 * errno, with the reason in why.  For tests and tools, like the above. */
int ukp_opt_handler_check(void *fn, char *why, size_t n);
/* Tests: the header of the detour of the site at addr (arch.h), or NULL */
const uint8_t *ukp_opt_detour_header(unsigned long addr);
/* Tests: point the detour at addr to tramp (NULL: its class one)
 * whatever its probes are, as a thread can find it between a change of
 * the probe list and the switch of the pointer. */
int ukp_opt_force_tramp(unsigned long addr, void (*tramp)(void));

/*
 * The registry's side (all under ukp_lock).  Before a site's probes,
 * arming or neighbours change, the sites whose jump covers an address are
 * collected and unoptimised together (two serialisations per batch);
 * afterwards ukp_opt_update_locked queues whatever may be optimised now.
 */
struct ukp_unopt { struct ukp_site **v; size_t n, cap; };
void ukp_opt_collect_locked(struct ukp_unopt *u, unsigned long addr);
void ukp_opt_collect_site_locked(struct ukp_unopt *u, struct ukp_site *s);
void ukp_opt_unoptimize_locked(struct ukp_unopt *u);
void ukp_opt_update_locked(unsigned long addr);
/* fn(s) for every site (under ukp_lock, or single-threaded) */
void ukp_sites_each_locked(void (*fn)(struct ukp_site *));
/* s->probes changed: the detour's copy of it (arch.h) follows */
void ukp_opt_list_published_locked(struct ukp_site *s);
void ukp_opt_analyse_locked(struct ukp_site *s);	/* before arming it */
/* Does the code at fn, with all it calls, leave the vector state alone? */
bool ukp_opt_gpr_only_locked(unsigned long fn);
/* ...and a leaf that cannot change errno */
bool ukp_opt_leaf_locked(unsigned long fn);
/* ...and one the bare fast path may run (it never reads its regs) */
bool ukp_opt_bare_locked(unsigned long fn);
/* is ip in the code of a handler found bare? (signal-safe) */
bool ukp_opt_in_bare_code(unsigned long ip);
/* a leaf: true, with the general registers it may write and read
 * (ukp_arch_code_leaf's masks) */
bool ukp_opt_leaf_regs_locked(unsigned long fn, uint16_t *writes, uint16_t *reads);
void ukp_opt_start(void);		/* the optimizer thread, if work waits */
/* Hit path (trap.c): an optimised probe's trampoline calls this with
 * the probe point's registers; non-zero: a pre_handler redirected. */
int ukp_opt_dispatch(struct ukp_site *s, struct pt_regs *regs);
/* The lean trampolines': a fault a handler takes resumes on the frame
 * whose pt_regs is regs (ukp_opt_resume -> ukp_opt_dispatch_resume). */
int ukp_opt_dispatch_lean(struct ukp_site *s, struct pt_regs *regs);
int ukp_opt_dispatch_resume(struct ukp_thread *t);
/* ip is where the return probes' detour of s goes on after its
 * trampoline (through a word the stack keeps: skip it if sp moved) */
bool ukp_opt_kret_r(const struct ukp_site *s, unsigned long ip);
/*
 * The signal the optimizer asks a running thread where it is with
 * (optimize.c, "asking threads where they are"): one whose default action
 * is to ignore it, so that a question still pending when the thread
 * execs dies with the old image instead of killing the new one.
 */
#define UKP_SIG_ASK SIGURG
/* In the handler of UKP_SIG_ASK: true if it was the optimizer's question
 * (answered), false for the program's own signal. */
bool ukp_opt_thread_query(siginfo_t *si, ucontext_t *uc);
/* trap.c: is our handler the kernel's action for UKP_SIG_ASK? */
bool ukp_ask_handler_installed(void);
/* The kernel's action for sig (raw rt_sigaction: async-signal-safe, and
 * not glibc's view), 0 or a negative errno. */
struct ukp_ksigaction {
	unsigned long handler, flags, restorer, mask;
};
static inline long ukp_ksigaction_get(int sig, struct ukp_ksigaction *ka)
{
	return ukp_raw_syscall(SYS_rt_sigaction, sig, 0, (long)ka, 8, 0, 0);
}
/* the return address every signal handler is entered with (glibc's
 * __restore_rt), 0 if none is known yet (ftrace_hit.c) */
unsigned long ukp_sig_restorer(void);
/* may ukp_copy_nofault run under this signal mask (trap.c) */
bool ukp_nofault_usable(const sigset_t *mask);
void ukp_opt_objects_changed(void);
/* kprobes.c: every registered site (under ukp_lock) */
void ukp_each_site_locked(void (*fn)(struct ukp_site *, void *), void *arg);
/* kprobes.c: bytes [addr, addr+len) may differ from the original code */
void ukp_mark_patched_locked(unsigned long addr, unsigned len);

void ukp_opt_init(void);
/* Is the site's code replaced by a jump over byte addr? (read_text) */
bool ukp_opt_orig_byte(unsigned long addr, uint8_t *b);
/* the dynamic linker's hook site as a jump from the first (optimize.c) */
bool ukp_opt_hook_direct_locked(struct ukp_site *s);

/* ------------------------------------------------------------------ */
/* Registry lock: protects every registration record and site state.   */
extern pthread_mutex_t ukp_lock;
/* ukp_lock, taken once no dlclose is between unmapping and telling us
 * (every path that may write code takes it this way) */
void ukp_lock_registry(void);
/* the offsets asm-offsets.h gives the assembly, checked */
#define UKP_OFF(type, field, off, size)					\
	_Static_assert(offsetof(type, field) == (off) &&		\
		       sizeof(((type *)0)->field) == (size), #type "." #field)
void ukp_init_once(void);
void ukp_objects_changed(void);	/* the dynamic linker unmapped something */
/* Called after every change of the dynamic linker's list of objects (a
 * load, before the new objects' constructors run, or an unload), in the
 * thread that made it, with the loader's lock held and no lock of ours:
 * the events core arms deferred events there.  Set once. */
void ukp_set_objects_hook(void (*fn)(void));
int ukp_register_kind(struct kprobe **kps, int num, char kind);
void ukp_unregister_kind(struct kprobe **kps, int num);
/* where a hit of p goes on after a jprobe's entry: its out-of-line copy,
 * with the post trampoline when probes there have post_handlers */
unsigned long ukp_probe_resume(struct kprobe *p);

/* ------------------------------------------------------------------ */
/* kretprobes and jprobes (kret.c)                                      */

void ukp_kret_init(void);
/* Whether p's handlers keep to the general registers (the lean
 * trampoline's test), seeing through a kretprobe's entry handler. */
bool ukp_kret_probe_gpr_only_locked(struct kprobe *p);
bool ukp_is_jprobe_handler(const struct kprobe *p);
bool ukp_is_kret_entry(const struct kprobe *p);	/* a kretprobe's entry */
bool ukp_is_kret_plain_entry(const struct kprobe *p);	/* ...without entry_handler */
/* a kretprobe entry's struct ukp_kret (set before its kprobe is registered,
 * kept until a grace period after it is unregistered), or NULL */
void *ukp_kret_of(const struct kprobe *p);
void ukp_kret_thread_gone(struct ukp_thread *t);
/* a return address read from the stack slot at `at`, with a kretprobe
 * stub made the real one; 0: a stub of no call in flight there */
unsigned long ukp_kret_real_ra(unsigned long ra, unsigned long at);
/* ------------------------------------------------------------------ */
/* Stack traces (stacktrace.c)                                          */

/* the dynamic linker's list changed (under ukp_lock): rules cached for
 * code addresses may be stale */
void ukp_stack_objects_changed(void);
/* ------------------------------------------------------------------ */
/* ftrace function hooks (ftrace.c, ftrace_hit.c)                       */

void ukp_ftrace_init_locked(void);
void ukp_ftrace_objects_changed_locked(void);
/* 1: addr is an ftrace patch site; -1: inside one (not an instruction
 * boundary); 0: neither */
int ukp_ftrace_site_at(unsigned long addr);
/* does [lo, hi) overlap a patch site? */
bool ukp_ftrace_overlaps(unsigned long lo, unsigned long hi);
/* the bytes of patch sites as the code had them (nops), over buf */
void ukp_ftrace_orig_bytes(unsigned long addr, uint8_t *buf, size_t n);
/* a kprobe on a patch site: the site's ftrace path runs it (under ukp_lock) */
int ukp_ftrace_kprobe_arm_locked(unsigned long addr, bool on);
/* after a kprobe grace period: free what the ftrace side retired */
void ukp_ftrace_reap(void);
/* SIGTRAP at addr: a patch site being rewritten.  true if handled */
bool ukp_ftrace_trap(unsigned long addr, ucontext_t *uc);
/* trap.c: run the kprobes of site s from its ftrace path; 1: redirected */
int ukp_kprobe_ftrace_hit(struct ukp_site *s, struct pt_regs *regs, unsigned len);
/* optimize.c: move every thread out of the 1-byte nops [a+1, a+5) of
 * each patch site (to a+5) before they become one instruction */
int ukp_opt_ask_nops(const unsigned long *a, size_t n);

/* Tests: act as if the process ran with a CET shadow stack. */
extern int ukp_kret_test_shstk;
/* Tests: unregistered kretprobes whose memory is not freed yet */
unsigned ukp_kret_nzombies(void);

#endif
