/* SPDX-License-Identifier: MIT */
/*
 * Signal entry: the breakpoint hit path, fault routing, and chaining to
 * the program's own handlers.
 *
 * Hit path (SIGTRAP, si_code SI_KERNEL, at a site's int3):
 *   1. enter the read side (sync.c), find the site (lock-free table);
 *   2. with the thread already inside a handler: count nmissed, skip;
 *   3. run the pre_handlers in registration order on a pt_regs built
 *      from the signal context; one returning non-zero redirects;
 *   4. resume in the site's out-of-line copy (the post variant when a
 *      probe has a post_handler: the copy continues into the post
 *      trampoline, no second trap); dynamic branches with a post_handler
 *      are emulated here instead;
 *   5. sigreturn restores everything else, including the vector state the
 *      kernel saved in the signal frame.
 *
 * Handlers are SA_NODEFER: a probe hit inside a handler must trap again
 * (and count as missed), and a fault inside a handler must reach us; a
 * blocked SIGTRAP/SIGSEGV would make the kernel kill the process instead.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "internal.h"
#include "arch/x86_64/asm-offsets.h"

/* what entry.S's lean fast path reads, where it reads it */
UKP_OFF(struct ukp_thread, nest, T_NEST, 2);
UKP_OFF(struct ukp_thread, in_handler, T_IN_HANDLER, 2);
UKP_OFF(struct ukp_thread, seq, T_SEQ, 4);
UKP_OFF(struct ukp_thread, cur, T_CUR, 8);
UKP_OFF(struct ukp_thread, cur_regs, T_CUR_REGS, 8);
UKP_OFF(struct ukp_thread, cur_jb, T_CUR_JB, 8);
UKP_OFF(struct ukp_thread, abandon, T_ABANDON, 4);
UKP_OFF(struct ukp_thread, internal, T_INTERNAL, 4);
UKP_OFF(struct ukp_thread, errno_p, T_ERRNO_P, 8);
UKP_OFF(struct ukp_thread, lean_list, T_LEAN_LIST, 8);
UKP_OFF(struct ukp_thread, lean_i, T_LEAN_I, 4);
UKP_OFF(struct ukp_thread, lean_errno, T_LEAN_ERRNO, 4);
UKP_OFF(struct ukp_plist, lean1, L_LEAN1, 1);
UKP_OFF(struct ukp_plist, kret1, L_KRET1, 1);
UKP_OFF(struct ukp_plist, bare_fn, L_BARE_FN, 8);
UKP_OFF(struct ukp_plist, kret, L_KRET, 8);
UKP_OFF(struct ukp_thread, tid, T_TID, 4);
UKP_OFF(struct ukp_thread, kret_top, T_KRET_TOP, 8);
UKP_OFF(struct ukp_thread, kret_deferred, T_KRET_DEFERRED, 8);
UKP_OFF(struct ukp_site, resume, S_RESUME, 8);
_Static_assert(offsetof(struct ukp_plist, p) == L_P, "struct ukp_plist.p");
UKP_OFF(struct kprobe, pre_handler, KP_PRE_HANDLER, 8);
UKP_OFF(struct kprobe, flags, KP_FLAGS, 4);
_Static_assert(KP_FLAGS_DEAD == (KPROBE_FLAG_GONE | KPROBE_FLAG_DISABLED), "KP_FLAGS_DEAD");
_Static_assert(sizeof(int) == 4 && sizeof(bool) == 1, "int, bool");

int ukp_knob_enabled = 1;

static const int fault_sigs[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL };
static struct sigaction prog_act[NSIG];	/* the program's, chained to */

static void trap_handler(int sig, siginfo_t *si, void *ctx);
static void fault_handler(int sig, siginfo_t *si, void *ctx);
static void ask_handler(int sig, siginfo_t *si, void *ctx);

/* ---- chaining ----------------------------------------------------------- */

static __attribute__((noreturn)) void die(int sig, siginfo_t *si)
{
	struct sigaction dfl;
	sigset_t set;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	/* re-deliver the same siginfo, so a core or a parent sees the truth */
	syscall(SYS_rt_tgsigqueueinfo, getpid(), syscall(SYS_gettid), sig, si);
	for (;;)
		syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGKILL);
}

/* Run what the program had installed for sig, as the kernel would have. */
static void chain(int sig, siginfo_t *si, ucontext_t *uc)
{
	const struct sigaction *a = &prog_act[sig];
	bool sync_fault = si->si_code > 0 || si->si_code == SI_KERNEL;
	sigset_t old, mask;

	if (!(a->sa_flags & SA_SIGINFO) && a->sa_handler == SIG_DFL)
		die(sig, si);
	if (!(a->sa_flags & SA_SIGINFO) && a->sa_handler == SIG_IGN) {
		if (sync_fault)
			die(sig, si);	/* the kernel does not let a fault be ignored */
		return;
	}
	mask = a->sa_mask;
	if (!(a->sa_flags & SA_NODEFER))
		sigaddset(&mask, sig);
	pthread_sigmask(SIG_BLOCK, &mask, &old);
	if (a->sa_flags & SA_SIGINFO)
		a->sa_sigaction(sig, si, uc);
	else
		a->sa_handler(sig);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void (*handler_for(int sig))(int, siginfo_t *, void *)
{
	return sig == SIGTRAP ? trap_handler : sig == UKP_SIG_ASK ? ask_handler : fault_handler;
}

static bool ours(const struct sigaction *a, int sig)
{
	return (a->sa_flags & SA_SIGINFO) && a->sa_sigaction == handler_for(sig);
}

static bool prog_has_handler(const struct sigaction *a)
{
	return (a->sa_flags & SA_SIGINFO) ||
	       (a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN);
}

static void install(int sig)
{
	struct sigaction sa, cur;

	if (sigaction(sig, NULL, &cur) != 0 || ours(&cur, sig))
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler_for(sig);
	sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART | SA_ONSTACK;
	/* The question's signal is asynchronous: whether a system call it
	 * interrupts is restarted, and which stack a handler runs on, is
	 * decided by our flags.  Where the program has a handler of its own,
	 * they are its flags, so its own signals behave as without us. */
	if (sig == UKP_SIG_ASK && prog_has_handler(&cur))
		sa.sa_flags = SA_SIGINFO | SA_NODEFER | (cur.sa_flags & (SA_RESTART | SA_ONSTACK));
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, &prog_act[sig]);
}

bool ukp_ask_handler_installed(void)
{
	struct ukp_ksigaction ka;
	return ukp_ksigaction_get(UKP_SIG_ASK, &ka) == 0 &&
	       ka.handler == (unsigned long)ask_handler;
}

/* May ukp_copy_nofault run here, a signal handler whose mask is mask?
 * Its faults must reach our handler: SIGSEGV and SIGBUS not blocked, and
 * ours still the kernel's action for both (async-signal-safe). */
bool ukp_nofault_usable(const sigset_t *mask)
{
	for (int k = 0; k < 2; k++) {
		int sig = k ? SIGBUS : SIGSEGV;
		struct ukp_ksigaction ka;
		if (sigismember(mask, sig) || ukp_ksigaction_get(sig, &ka) != 0 ||
		    ka.handler != (unsigned long)fault_handler)
			return false;
	}
	return true;
}

/* Installs our handlers, or re-installs them over ones the program set
 * since (which then become the ones we chain to).  Registration calls it. */
void ukp_trap_ensure(void)
{
	install(SIGTRAP);
	for (size_t i = 0; i < sizeof(fault_sigs) / sizeof(fault_sigs[0]); i++)
		install(fault_sigs[i]);
	install(UKP_SIG_ASK);
}

void ukp_trap_init(void)
{
	ukp_trap_ensure();
}

/* ---- running handlers ---------------------------------------------------- */

static bool probe_live(const struct kprobe *p)
{
	return !(__atomic_load_n(&p->flags, __ATOMIC_RELAXED) &
		 (KPROBE_FLAG_DISABLED | KPROBE_FLAG_GONE));
}

/*
 * One handler call with a recovery point: a fault inside the handler that
 * its fault_handler takes resumes here (ukp_longjmp from fault_handler),
 * as if the handler had returned 0.  Kept out of line so no caller's
 * locals live across the setjmp.
 */
static __attribute__((noinline)) int call_handler(struct ukp_thread *t,
						  struct kprobe *p,
						  struct pt_regs *regs, bool pre)
{
	struct ukp_jmpbuf jb;
	int r = 0;

	/* the handler marked running (its faults then resume at jb) only
	 * once jb holds this frame: a fault before, at the stack this frame
	 * or setjmp's call grows into, is the program's (fault_handler) */
	if (ukp_setjmp(&jb) == 0) {
		t->cur_regs = regs;
		t->cur_jb = &jb;
		atomic_signal_fence(memory_order_seq_cst);
		t->cur = p;
		atomic_signal_fence(memory_order_seq_cst);
		if (pre)
			r = p->pre_handler(p, regs);
		else
			p->post_handler(p, regs, 0);
	}
	t->cur = NULL;
	t->cur_jb = NULL;	/* the lean trampoline's fast path relies on it */
	return r;
}

/*
 * Returns non-zero when a pre_handler redirected.  With `live`, records
 * each probe that is live when its turn comes (its pre_handler runs now,
 * so its post_handler may run later; one enabled by an earlier handler of
 * this hit is recorded only if its own turn finds it enabled).
 */
static int run_pre(struct ukp_thread *t, const struct ukp_plist *l,
		   struct pt_regs *regs, struct ukp_pending *live)
{
	int ret = 0;

	t->abandon = 0;
	for (unsigned i = 0; !t->abandon && i < l->n; i++) {	/* abandoned: l may be gone */
		struct kprobe *p = l->p[i];
		if (!probe_live(p))
			continue;
		if (live) {
			if (live->n < UKP_PENDING_PROBES)
				live->p[live->n] = p;
			live->n++;
		}
		if (p->pre_handler && call_handler(t, p, regs, true)) {
			ret = 1;
			break;
		}
	}
	return ret;
}

/* Remember which probes were live at this hit, for its post dispatch. */
static void pending_push(struct ukp_thread *t, const struct ukp_pending *live)
{
	t->pending[t->npending++ % UKP_PENDING_DEPTH] = *live;
}

/* The most recent pending hit at s, taken off the ring with anything
 * stacked above it (hits whose post never came: a fault, a longjmp). */
static bool pending_pop(struct ukp_thread *t, const struct ukp_site *s,
			struct ukp_pending *out)
{
	for (unsigned k = 0; k < UKP_PENDING_DEPTH && t->npending; k++) {
		struct ukp_pending *e = &t->pending[--t->npending % UKP_PENDING_DEPTH];
		if (e->site == s) {
			*out = *e;
			return true;
		}
	}
	return false;
}

static bool pending_has(const struct ukp_pending *e, const struct kprobe *p)
{
	if (e->n > UKP_PENDING_PROBES)
		return true;
	for (unsigned i = 0; i < e->n; i++)
		if (e->p[i] == p)
			return true;
	return false;
}

/* only: the probes live when the hit trapped (NULL: all live ones) */
static void run_post(struct ukp_thread *t, const struct ukp_plist *l,
		     struct pt_regs *regs, const struct ukp_pending *only)
{
	t->abandon = 0;
	for (unsigned i = 0; !t->abandon && i < l->n; i++) {
		struct kprobe *p = l->p[i];
		if (p->post_handler && probe_live(p) && (!only || pending_has(only, p)))
			call_handler(t, p, regs, false);
	}
}

static void count_missed(const struct ukp_plist *l)
{
	for (unsigned i = 0; i < l->n; i++)
		__atomic_fetch_add(&l->p[i]->nmissed, 1, __ATOMIC_RELAXED);
}

/* ---- the breakpoint ----------------------------------------------------- */

/* A hit by a thread without a block (nested in the block's own attach,
 * or the pool exhausted): like a hit inside a handler, nmissed only. */
static void anon_missed(const struct ukp_site *s)
{
	ukp_anon_read_lock();
	const struct ukp_plist *l = atomic_load_explicit(&s->probes, memory_order_acquire);
	if (l && ukp_knob_enabled)
		count_missed(l);
	ukp_anon_read_unlock();
}

static bool kprobe_hit(unsigned long bp, ucontext_t *uc)
{
	struct ukp_site *s = ukp_site_lookup(bp);
	if (!s || s->ftrace)
		return false;
	struct ukp_thread *t = ukp_thread_self();
	if (!t) {
		/* No thread block: a hit nested in the block's own attach (a
		 * signal handler of the program), or the pool is exhausted.
		 * Like a hit inside a handler: count it missed, run the copy. */
		anon_missed(s);
		uint8_t *r = atomic_load_explicit(&s->resume, memory_order_acquire);
		ukp_arch_uc_set_ip(uc, (unsigned long)(r ? r : s->slot));
		return true;
	}
	int saved_errno = errno;
	/* outside the read lock, as from a detour: a hook may wait for
	 * threads that wait for a grace period (the events core arms and
	 * takes back probes from the dynamic linker's) */
	if (s->hook && !t->in_hook) {
		t->in_hook = 1;
		s->hook();
		t->in_hook = 0;
	}
	ukp_read_lock(t);
	/* a site being optimised resumes in its detour's copy of the whole
	 * region, so no thread enters the bytes the jump will cover */
	uint8_t *r = atomic_load_explicit(&s->resume, memory_order_acquire);
	unsigned long resume = (unsigned long)(r ? r : s->slot);
	uint16_t nested = ukp_hit_hold(t);
	const struct ukp_plist *l = atomic_load_explicit(&s->probes, memory_order_acquire);
	if (!l || !l->n || !ukp_knob_enabled || t->internal) {
		/* ukprobes' own threads (the optimizer) are not the program */
		ukp_arch_uc_set_ip(uc, resume);
	} else if (nested) {
		count_missed(l);
		ukp_arch_uc_set_ip(uc, resume);
	} else {
		struct pt_regs regs;
		ukp_arch_regs_from_uc(&regs, uc);
		regs.ip = bp;
		struct ukp_pending live = { .site = s, .n = 0 };
		t->cur_uc = uc;	/* a jprobe reads the vector arguments there */
		unsigned jdepth = t->jdepth;
		bool any_post = l->any_post;
		int redirected = run_pre(t, l, &regs, any_post ? &live : NULL);
		t->cur_uc = NULL;
		/* a handler's fault went to the program's handler, and l
		 * may be gone since: no post_handlers for this hit; and the
		 * optimizer may have put its jump over the site meanwhile:
		 * where to resume is read again (under the lock taken back) */
		if (t->abandon) {
			any_post = false;
			r = atomic_load_explicit(&s->resume, memory_order_acquire);
			resume = (unsigned long)(r ? r : s->slot);
		}
		/* a jprobe sent the thread to its entry function: the probed
		 * instruction runs after jprobe_return, through the post slot
		 * when the other probes here have post_handlers */
		if (redirected && t->jdepth > jdepth && any_post && s->slot_post)
			pending_push(t, &live);
		if (!redirected) {
			if (any_post && s->slot_post) {
				pending_push(t, &live);
				resume = (unsigned long)s->slot_post;
			} else if (any_post && ukp_arch_emulate_branch(&s->insn, &regs) == 0) {
				run_post(t, l, &regs, &live);
				resume = regs.ip;
			}
			regs.ip = resume;
		}
		ukp_arch_regs_to_uc(uc, &regs);
	}
	ukp_hit_unlock(t, nested);
	errno = saved_errno;
	return true;
}

/* The post trampoline's exit when a handler moved sp: %rsp = pt_regs. */
static void post_slow_exit(ucontext_t *uc)
{
	const struct pt_regs *regs = (const void *)ukp_arch_uc_sp(uc);
	ukp_arch_regs_to_uc(uc, regs);
	/* a return probe's detour goes on from R through the word below the
	 * entry sp, which a moved sp leaves behind: straight to the copy (a
	 * priming left undone costs that call's returns their prediction,
	 * nothing else) */
	struct ukp_slot_hit h;
	if (ukp_slot_find(regs->ip, &h) && h.detour && ukp_opt_kret_r(h.site, regs->ip))
		ukp_arch_uc_set_ip(uc, regs->ip + UKP_ARCH_KRET_R_LEN);
}

static void trap_handler(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	unsigned long bp = ukp_arch_uc_ip(uc) - UKP_ARCH_BP_LEN;

	if (si->si_code == SI_KERNEL) {
		if (bp == (unsigned long)ukp_post_slow_trap) {
			post_slow_exit(uc);
			return;
		}
		if (ukp_ftrace_trap(bp, uc) || kprobe_hit(bp, uc))
			return;
		/* an int3 that was probed itself, trapping in its copy:
		 * show the program the address it would have seen */
		struct ukp_slot_hit h;
		if (ukp_slot_find(bp, &h) && !h.own) {
			ukp_arch_uc_set_ip(uc, h.orig_ip + 1);
			ukp_arch_uc_set_sp(uc, ukp_arch_uc_sp(uc) + h.sp_fix);
		}
	}
	chain(sig, si, uc);
}

/*
 * The post trampoline's hit: the post_handlers of the probes whose
 * pre_handlers ran for it.  lean: the trampoline saved no vector, x87 or
 * MXCSR state, so this runs them only if every post_handler of the list
 * (read under the same lock) is proven to leave that state alone, and
 * else answers 0 with nothing done: the trampoline saves it all and comes
 * back (this file keeps to the general registers itself).
 */
static int post_dispatch(void *cont, struct pt_regs *regs, bool lean)
{
	struct ukp_site *s;
	memcpy(&s, cont, sizeof(s));	/* the record in the slot is unaligned */
	struct ukp_thread *t = lean ? ukp_thread_peek() : ukp_thread_self();

	if (!t)
		return !lean;	/* attaching calls libc */
	int *errp = t->errno_p;
	int saved_errno = *errp;
	const struct ukp_site *outer = t->in_post;
	t->in_post = s;		/* the optimizer must not patch under us */
	uint16_t nested = ukp_hit_lock(t);
	const struct ukp_plist *l = atomic_load_explicit(&s->probes, memory_order_acquire);
	int done = !lean || !l || l->post_lean;
	struct ukp_pending hit;
	/* nothing recorded: no pre ran for this hit; nested: its pre was
	 * missed */
	if (done && pending_pop(t, s, &hit) && l && ukp_knob_enabled && !nested)
		run_post(t, l, regs, &hit);
	ukp_hit_unlock(t, nested);
	t->in_post = outer;
	*errp = saved_errno;
	return done;
}

void ukp_post_dispatch(void *cont, struct pt_regs *regs)
{
	post_dispatch(cont, regs, false);
}

int ukp_post_dispatch_lean(void *cont, struct pt_regs *regs)
{
	return post_dispatch(cont, regs, true);
}

/*
 * An optimised probe: the trampoline saved the registers (ip = the probed
 * address) and what vector state is live; run the pre_handlers as a trap
 * would.  1: a pre_handler redirected to regs->ip.
 */
int ukp_opt_dispatch(struct ukp_site *s, struct pt_regs *regs)
{
	struct ukp_thread *t = ukp_thread_self();
	int ret = 0;

	if (!t) {
		anon_missed(s);
		return 0;
	}
	int *errp = t->errno_p;		/* no call per hit to find errno */
	int saved_errno = *errp;
	if (s->hook && !t->in_hook) {	/* as a breakpoint hit runs it */
		t->in_hook = 1;
		s->hook();
		t->in_hook = 0;
	}
	uint16_t nested = ukp_hit_lock(t);
	const struct ukp_plist *l = atomic_load_explicit(&s->probes, memory_order_acquire);
	if (l && l->n && ukp_knob_enabled && !t->internal) {
		if (nested)
			count_missed(l);
		else
			ret = run_pre(t, l, regs, NULL);
	}
	ukp_hit_unlock(t, nested);
	*errp = saved_errno;
	return ret;
}

/*
 * Kprobes on an ftrace patch site, from the site's ftrace path (regs as
 * at the function's entry, ip = the site).  post_handlers run right after
 * the pre_handlers, with ip past the site's nop, as if it had been
 * single-stepped (the kernel's kprobes on ftrace do the same).
 */
int ukp_kprobe_ftrace_hit(struct ukp_site *s, struct pt_regs *regs, unsigned len)
{
	struct ukp_thread *t = ukp_thread_self();
	int ret = 0;

	if (!t) {
		anon_missed(s);
		return 0;
	}
	int saved_errno = *t->errno_p;
	uint16_t nested = ukp_hit_lock(t);
	const struct ukp_plist *l = atomic_load_explicit(&s->probes, memory_order_acquire);
	if (l && l->n && ukp_knob_enabled && !t->internal) {
		if (nested) {
			count_missed(l);
		} else {
			struct ukp_pending live = { .site = s, .n = 0 };
			bool any_post = l->any_post;
			t->ft_hit = 1;	/* a longjmp out settles its call */
			ret = run_pre(t, l, regs, any_post ? &live : NULL);
			if (!ret && any_post && !t->abandon) {	/* abandoned: l may be gone */
				regs->ip = s->addr + len;
				run_post(t, l, regs, &live);
				regs->ip = s->addr;
			}
			t->ft_hit = 0;
		}
	}
	ukp_hit_unlock(t, nested);
	*t->errno_p = saved_errno;
	return ret;
}

/*
 * The lean trampoline's hit: it saved no vector, x87 or MXCSR state at
 * all, so it may run only handlers proven to leave that state alone (the
 * list says so); otherwise 2, and the trampoline saves everything and
 * calls ukp_opt_dispatch.  This file is built with -mgeneral-regs-only,
 * so the code here keeps to the general registers too.
 *
 * The fast path: no setjmp per handler.  Where a fault that a handler's
 * fault_handler takes resumes is the trampoline's own frame (the one of
 * cur_regs: ukp_opt_resume): the thread block records the list and the
 * index of the handler that runs, and ukp_opt_dispatch_resume goes on
 * with the next one, as if the faulting handler had returned 0.
 */
static inline int lean_run(struct ukp_thread *t, const struct ukp_plist *l,
			   struct pt_regs *regs, unsigned i)
{
	for (; !t->abandon && i < l->n; i++) {	/* abandoned: l may be gone */
		struct kprobe *p = l->p[i];
		if (!p->pre_handler || !probe_live(p))
			continue;
		t->lean_i = i;
		t->cur = p;
		if (p->pre_handler(p, regs))
			return 1;
	}
	return 0;
}

/* The end of a lean hit, the lock with it (in one store: in_handler 0
 * with nest still 1 would leave a longjmp from a signal there without
 * the hit's frame); the saved errno is read while in_handler still keeps
 * a signal's nested hit from recording its own over it. */
static inline void lean_done(struct ukp_thread *t)
{
	int e = t->lean_errno;
	atomic_signal_fence(memory_order_seq_cst);
	t->cur = NULL;
	ukp_hit_unlock(t, 0);
	atomic_signal_fence(memory_order_seq_cst);
	*t->errno_p = e;
}

int ukp_opt_dispatch_lean(struct ukp_site *s, struct pt_regs *regs)
{
	struct ukp_thread *t = ukp_thread_peek();
	int ret = 0;

	if (!t)
		return 2;	/* attaching calls libc */
	uint16_t nested = ukp_hit_lock(t);	/* and the record below */
	const struct ukp_plist *l = atomic_load_explicit(&s->probes, memory_order_acquire);
	if (l && !l->gpr_only) {
		ret = 2;
	} else if (l && l->n && ukp_knob_enabled && !t->internal) {
		if (nested) {
			count_missed(l);
		} else {
			t->lean_errno = *t->errno_p;
			t->lean_kret = 0;
			t->lean_list = l;
			t->cur_regs = regs;
			t->cur_jb = NULL;	/* faults resume on the frame */
			t->abandon = 0;
			ret = lean_run(t, l, regs, 0);
			lean_done(t);	/* in_handler 0: nested was */
			return ret;
		}
	}
	ukp_hit_unlock(t, nested);
	return ret;
}

/* A fault in handler lean_i was taken (by its fault_handler, or by the
 * program's handler returning): on with the rest of the hit. */
int ukp_opt_dispatch_resume(struct ukp_thread *t)
{
	int ret = lean_run(t, t->lean_list, t->cur_regs, t->lean_i + 1);
	lean_done(t);
	return ret;
}

/* in_handler's bit for a bare fast path's hit (asm-offsets.h) */
#define IH_BARE (UKP_GP_BARE >> 16)

/* Leave a fault taken in a handler for where the hit goes on. */
static __attribute__((noreturn)) void fault_resume(struct ukp_thread *t)
{
	ukp_kret_entry_fault(t);
	if (t->cur_jb)
		ukp_longjmp(t->cur_jb, 1);
	if (t->lean_kret)
		ukp_kret_resume(ukp_kret_rec_sp(t), t);
	if (t->in_handler & IH_BARE)
		ukp_opt_resume_bare(t->cur_regs, t);
	ukp_opt_resume(t->cur_regs, t);
}

/* ---- faults --------------------------------------------------------------- */

/*
 * A fault inside a handler that its fault_handler did not take: the
 * program sees it as if no probe were there, at the probed instruction
 * with the probed thread's registers.  The program's handler may
 * longjmp away, so the thread leaves the hit path first (a grace period
 * may end meanwhile and free the hit's probe list); if it returns, the
 * faulting handler is abandoned, with the rest of the hit's handlers and
 * its post_handlers (no list is read again), and the probed code goes on
 * with the registers the program's handler left.
 */
/*
 * Put back the vector/x87 state the kernel saved when the fault was
 * delivered.  Leaving the signal handler by longjmp skips sigreturn (the
 * kernel hands a signal handler a reset state), and a program handler we
 * called may have changed that state too; a lean trampoline (which saved
 * none) needs it as the fault found it, which for its handlers is the
 * probed code's.  Elsewhere the trampoline or the outer signal frame
 * restores its own over this.
 */
static void fpu_restore(const ucontext_t *uc)
{
	const unsigned char *fp = (const unsigned char *)uc->uc_mcontext.fpregs;
	if (!fp)
		return;
	uint32_t magic;
	uint64_t features;
	memcpy(&magic, fp + 464, 4);		/* struct _fpx_sw_bytes */
	memcpy(&features, fp + 472, 8);
	if (magic == 0x46505853U && ukp_xsave_size && !((unsigned long)fp & 63))
		__asm__ volatile("xrstor64 (%0)" :: "r"(fp), "a"((uint32_t)features),
				 "d"((uint32_t)(features >> 32)) : "memory");
	else if (!((unsigned long)fp & 15))
		__asm__ volatile("fxrstor64 (%0)" :: "r"(fp) : "memory");
}

/* What a hit left for good (by a longjmp, or its thread's end) gives
 * back: its ftrace stub's call, the kretprobe instance its entry handler
 * (entry) or return handler (ret) held. */
static void hit_left(struct ukp_thread *t, int ft_hit, struct ukp_kinst *entry,
		     struct ukp_kinst *ret)
{
	if (ft_hit)
		ukp_ft_out(t);
	if (entry && entry != t->kret_top)	/* in flight: settled there */
		ukp_kret_inst_left(entry);
	if (ret && ret == t->kret_orphan)
		t->kret_orphan = NULL;	/* kret.c's copy of the record's */
	if (ret)
		ukp_kret_inst_left(ret);
}

static void fault_rec_left(struct ukp_thread *t, const struct ukp_fault_rec *r)
{
	hit_left(t, r->ft_hit, r->kret_entry, r->lean_kret ? r->kret_slot->inst : NULL);
}

/* the same for the hit whose handler runs now */
static void cur_hit_left(struct ukp_thread *t)
{
	hit_left(t, t->ft_hit, t->kret_entry, t->lean_kret ? t->kret_slot->inst : NULL);
	t->ft_hit = 0;
	t->kret_entry = NULL;
	t->lean_kret = 0;
}

/* Back into the hit of r: the read lock it left, its in_handler (a
 * signal's hit from here on only counts nmissed and leaves what is put
 * back here alone), and the record of where it goes on; the hit runs
 * no more handlers (its list may be gone). */
static void fault_rec_back(struct ukp_thread *t, const struct ukp_fault_rec *r)
{
	ukp_read_back(t, r->rs, r->ih);
	t->cur_regs = r->cur_regs;
	t->cur_jb = r->cur_jb;
	t->lean_sp = r->lean_sp;
	t->lean_list = r->lean_list;
	t->lean_i = r->lean_i;
	t->lean_errno = r->lean_errno;
	t->lean_kret = r->lean_kret;
	t->ft_hit = r->ft_hit;
	t->kret_entry = r->kret_entry;
	t->in_post = r->in_post;
	t->kret_slot = r->kret_slot;
	t->kret_errp = r->kret_errp;
	t->abandon = 1;
}

static void handler_fault_unhandled(struct ukp_thread *t, int sig, siginfo_t *si,
				    ucontext_t *uc)
{
	ucontext_t pc = *uc;
	struct ukp_fault_rec r = {
		(unsigned long)__builtin_frame_address(0), ukp_arch_uc_sp(uc),
		(unsigned long)t->cur_regs, { 0, 0, 0 }, t->in_handler, t->cur,
		t->cur_regs, t->cur_jb, t->lean_sp, t->lean_list, t->lean_i,
		t->lean_errno, t->lean_kret, t->ft_hit, t->kret_slot, t->kret_errp,
		t->kret_entry, t->in_post,
	};
	sigset_t all, old;

	ukp_arch_regs_to_uc(&pc, t->cur_regs);
	/* from the hit to its record (and back) in one step for a signal's
	 * longjmp (ukp_hit_longjmp): it settles one of them, never both or
	 * neither */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	t->cur = NULL;
	t->lean_kret = 0;	/* the program's handler may longjmp away */
	t->cur_jb = NULL;	/* (then a later hit's fault must not find this
				   one's: the lean fast paths leave it NULL) */
	t->ft_hit = 0;
	t->kret_entry = NULL;
	t->in_handler = 0;
	if (r.lean_kret) {
		t->kret_orphan = r.kret_slot->inst;
		t->kret_orphan_sp = r.fault_sp;
	}
	r.rs = ukp_read_leave(t);
	unsigned i = t->nfrec;
	if (i < UKP_FREC_DEPTH) {
		t->frec[i] = r;
		t->nfrec = i + 1;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	chain(sig, si, &pc);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (i < UKP_FREC_DEPTH)
		t->nfrec = i;
	fault_rec_back(t, &r);
	t->kret_orphan = NULL;	/* resumed: the rest of the return frees it */
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	ukp_arch_regs_from_uc(t->cur_regs, &pc);
	fpu_restore(&pc);
	fault_resume(t);
}

/*
 * The hits a longjmp to sp leaves, and the one it goes back into.
 *
 * First the hit the thread is in (nest): its outermost frame is cur_regs
 * where a hand-written path took the lock (in_handler bit 1), else the
 * sp the C lock recorded.  A target above it leaves every hit the thread
 * is in, nested ones too, handler running or not (a program signal
 * handler's longjmp, a SIGALRM timeout say, or a handler's own); one
 * below it but above a running handler's pt_regs leaves that handler's
 * hit; one below both is inside the handler (its own setjmp).
 *
 * Then the hits whose faults the program's handlers are taking (their
 * records): a target above one's frame leaves it; one between its fault
 * and its frame is back inside that handler, which takes its lock back
 * and runs no further handler; one below its fault is still in the
 * program's handler.
 *
 * A hit left gives back its read lock, its ftrace stub's call and the
 * kretprobe instance its entry or return handler held.  "Above" is on
 * the same stack; a frame on the alternate signal stack the thread is on
 * is left by any target off it.
 */
void ukp_hit_longjmp(struct ukp_thread *t, unsigned long sp)
{
	stack_t ss;
	unsigned long lo = 0, hi = 0, alo = 0, ahi = 0;
	bool on_alt = false;
	if (sigaltstack(NULL, &ss) == 0 && !(ss.ss_flags & SS_DISABLE)) {
		alo = (unsigned long)ss.ss_sp;
		ahi = alo + ss.ss_size;
		on_alt = ss.ss_flags & SS_ONSTACK;
		if (on_alt) {
			lo = alo;
			hi = ahi;
		}
	}
	/* records whose program handlers look gone (left by setcontext or an
	 * exception): their frames below this one on this stack, or on an
	 * alternate stack the thread is not on.  Dropped, not settled: a
	 * coroutine on another stack inside a live handler looks the same,
	 * and settling a live one would give its instance back twice (a
	 * dead one keeps what it held: an instance, an ftrace call) */
	unsigned long here = (unsigned long)__builtin_frame_address(0);
	while (t->nfrec) {
		const struct ukp_fault_rec *r = &t->frec[t->nfrec - 1];
		bool r_alt = r->frame >= alo && r->frame < ahi;
		if (r_alt == on_alt ? r->frame > here : !r_alt)
			break;
		t->nfrec--;
	}
	bool sp_alt = sp >= lo && sp < hi;
#define ALT(a) ((a) >= lo && (a) < hi)
#define ABOVE(f) (ALT(f) == sp_alt ? sp > (f) : ALT(f))
	if (t->nest) {
		unsigned long h = t->in_handler & 2 ? (unsigned long)t->cur_regs : t->hit_sp;
		bool all = ABOVE(h);
		if (!all && !(t->cur && ABOVE((unsigned long)t->cur_regs)))
			goto records;	/* inside the handler, or not left */
		t->cur = NULL;
		t->cur_jb = NULL;
		cur_hit_left(t);
		t->cur_uc = NULL;
		/* a post dispatch's site: the optimizer may patch it now */
		t->in_post = t->nfrec ? t->frec[t->nfrec - 1].in_post : NULL;
		if (all) {
			/* nest and in_handler 0 in one store */
			__atomic_store_n((uint32_t *)(void *)t, 0, __ATOMIC_RELEASE);
		} else {
			t->in_handler = 0;
			ukp_read_unlock(t);
			return;	/* the records are older than the hits left */
		}
	}
records:
	while (t->nfrec) {
		const struct ukp_fault_rec *r = &t->frec[t->nfrec - 1];
		bool left;
		if (ALT(r->hit_sp) != sp_alt) {
			if (!ALT(r->hit_sp))
				return;	/* on the handler's alternate stack */
			left = true;
		} else if (sp < r->fault_sp) {
			return;		/* still in the program's handler (its
					   frames are below the red zone) */
		} else {
			left = sp > r->hit_sp;
		}
		t->nfrec--;
		if (!left) {
			fault_rec_back(t, r);
			t->cur = r->p;
			return;
		}
		/* its orphan (kret.c) is settled here, with the record */
		fault_rec_left(t, r);
		t->in_post = t->nfrec ? t->frec[t->nfrec - 1].in_post : NULL;
	}
#undef ABOVE
#undef ALT
}

/* t's thread is gone inside a handler, or inside the program's handlers
 * of its handlers' faults: what those hits held */
void ukp_hits_gone(struct ukp_thread *t)
{
	cur_hit_left(t);
	while (t->nfrec)
		fault_rec_left(t, &t->frec[--t->nfrec]);
}

/*
 * Where a fault of a probed instruction's copy runs it again: its slot,
 * or, once the site is being optimised, the detour's copy of its region
 * (the slot jumps back to the instruction after it, which the jump may
 * cover by the time a handler that waited returns).
 *
 * In a detour: its copy while the site's jump is there or pending
 * (resume set: the copy goes back to the region's end, which stays clear
 * of other jumps).  Once the jump is gone, the original code instead -
 * the instruction in place, or the site's slot for its first one (its
 * int3 may be armed, and the hit's handlers ran) - since the copy goes
 * back to the address after the old region, which a new probe's jump may
 * cover by then: the optimizer judged the frame by the original address
 * this handler showed, and moved it if a new region held it.  Called
 * with the optimizer's question blocked: the answer sees the frame
 * before or after this choice, never between the choice and its store.
 */
static unsigned long retry_at(const struct ukp_slot_hit *h)
{
	uint8_t *r = atomic_load_explicit(&h->site->resume, memory_order_acquire);
	if (h->detour) {
		if (r || h->own)
			return h->retry_ip;
		if (h->in_copy && h->orig_ip == h->site->addr)
			return (unsigned long)h->site->slot;
		return h->orig_ip;
	}
	return r ? (unsigned long)r : h->retry_ip;
}

/* the frame's ip, if still the fault's original address, to retry_at() */
static void retry_set(const struct ukp_slot_hit *h, ucontext_t *uc, unsigned long at)
{
	uint64_t ask = 1ULL << (UKP_SIG_ASK - 1), old = 0;
	ukp_raw_syscall(SYS_rt_sigprocmask, SIG_BLOCK, (long)&ask, (long)&old, 8, 0, 0);
	if (ukp_arch_uc_ip(uc) == at)
		ukp_arch_uc_set_ip(uc, retry_at(h));
	ukp_raw_syscall(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, 8, 0, 0);
}

static void slot_fault(const struct ukp_slot_hit *h, int sig, siginfo_t *si,
		       ucontext_t *uc)
{
	struct ukp_thread *t = ukp_thread_self();
	struct ukp_site *s = h->site;
	unsigned long at = h->orig_ip;
	int handled = 0;

	/* the state the instruction had in place; for faults that report
	 * the instruction's address (SIGFPE, SIGILL), that address too */
	if ((unsigned long)si->si_addr == ukp_arch_uc_ip(uc))
		si->si_addr = (void *)at;
	ukp_arch_uc_set_ip(uc, at);
	ukp_arch_uc_set_sp(uc, ukp_arch_uc_sp(uc) + h->sp_fix);
	if (t && !t->in_handler && !t->internal) {
		struct pt_regs regs;
		int trapnr = ukp_arch_trapnr(uc, sig);
		uint16_t nested = ukp_hit_lock(t);
		const struct ukp_plist *l = atomic_load_explicit(&s->probes, memory_order_acquire);
		ukp_arch_regs_from_uc(&regs, uc);
		for (unsigned i = 0; l && i < l->n && !handled; i++) {
			struct kprobe *p = l->p[i];
			if (!p->fault_handler || !probe_live(p))
				continue;
			t->in_fault = 1;
			handled = p->fault_handler(p, &regs, trapnr);
			t->in_fault = 0;
		}
		ukp_hit_unlock(t, nested);
		if (handled) {
			ukp_arch_regs_to_uc(uc, &regs);
			/* unchanged ip: run the instruction again, out of line */
			if (regs.ip == at && regs.sp == ukp_arch_uc_sp(uc))
				retry_set(h, uc, at);
			return;
		}
	}
	chain(sig, si, uc);
	retry_set(h, uc, at);	/* retry without a second hit */
}

/*
 * A fault that finds a handler running (t->cur) is that handler's if it
 * is on the handler's stack: below the hit's pt_regs, which sit above
 * every frame of the handler on whatever path, and not further than a
 * stack goes.  One elsewhere comes from a signal handler of the program
 * that interrupted the handler on an alternate signal stack (a SIGPROF or
 * SIGALRM handler probing memory on purpose, say) and is the program's,
 * as without the probe.  (One on the same stack cannot be told apart
 * from the handler's own by what the stack holds: a signal frame that
 * has returned leaves its words below sp, so scanning for them takes
 * real handler faults for the program's.)
 */
#define HANDLER_STACK_MAX (8UL << 20)

static bool fault_in_handler(const struct ukp_thread *t, const ucontext_t *uc)
{
	/* below the 16-aligned frame the hit calls its handler from: a
	 * fault at the push of that call (sp at the frame, the stack the
	 * program must grow) is the hit's, not the handler's */
	unsigned long sp = ukp_arch_uc_sp(uc), top = (unsigned long)t->cur_regs & ~15UL;
	return sp < top && top - sp <= HANDLER_STACK_MAX;
}

/* A bare hit's fault is its handler's only in a bare handler's code
 * (optimize.c: a leaf runs no other; which one does not matter, so a
 * pre_handler swapped meanwhile changes nothing), or in a copy of one of
 * its instructions (another probe on the handler: its slot or detour);
 * elsewhere below the hit's frame it is a program signal handler's that
 * interrupted the handler, whose registers cannot complete pt_regs, and
 * the program's as without the probe */
static bool bare_own(const struct ukp_thread *t, unsigned long ip, bool slot,
		     const struct ukp_slot_hit *h)
{
	if (!(t->in_handler & IH_BARE))
		return true;
	return ukp_opt_in_bare_code(slot && !h->own ? h->orig_ip : ip);
}

/*
 * The optimizer asking where this thread is (UKP_SIG_ASK), or the
 * program's own signal of that number: an asynchronous one, never a
 * fault, so it goes to the program's handler whatever it interrupted.
 * (Not SIGTRAP: a classic signal already pending swallows another of its
 * kind, and an int3's trap lost that way would resume mid-instruction.)
 */
static void ask_handler(int sig, siginfo_t *si, void *ctx)
{
	int saved_errno = errno;
	if (si->si_code == SI_QUEUE && ukp_opt_thread_query(si, ctx))
		return;
	struct ukp_thread *t = ukp_thread_peek();
	struct kprobe *cur = t ? t->cur : NULL;
	bool bare = t && (t->in_handler & IH_BARE);
	/* a fault the program's handler takes is not the probe handler's */
	if (t && !bare)
		t->cur = NULL;
	chain(sig, si, ctx);
	if (t && !bare)
		t->cur = cur;
	errno = saved_errno;
}

static void fault_handler(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	unsigned long ip = ukp_arch_uc_ip(uc);
	int saved_errno = errno;

	/* copy_from_user_nofault: an exception table of one */
	if (ip >= (unsigned long)ukp_nofault_begin && ip < (unsigned long)ukp_nofault_end &&
	    (sig == SIGSEGV || sig == SIGBUS)) {
		ukp_arch_uc_set_ip(uc, (unsigned long)ukp_nofault_fixup);
		return;
	}
	struct ukp_slot_hit h;
	bool slot = ukp_slot_find(ip, &h);
	struct ukp_thread *t = ukp_thread_peek();
	/* a fault: one the CPU raised (a signal sent by kill or a thread is
	 * not a handler's fault, whatever it interrupted) */
	if (t && t->cur && !t->in_fault && si->si_code > 0 && fault_in_handler(t, uc) &&
	    bare_own(t, ip, slot, &h)) {
		struct kprobe *p = t->cur;
		/* a bare fast path's pt_regs: whole before anything reads it */
		if (t->in_handler & IH_BARE)
			ukp_arch_bare_fill(t->cur_regs, uc);
		/* a lean hit whose one handler is a leaf (a bare one among
		 * them): errno is the hit's (a leaf cannot change it), and
		 * neither ukp_opt_tramp_lean_leaf nor the bare path recorded
		 * it; a leaf return handler's hit did not either (kret_errp
		 * NULL): a program handler that the fault reaches and that
		 * returns must not leave its errno behind */
		if (!t->cur_jb && !t->lean_kret &&
		    ((t->in_handler & IH_BARE) || (t->lean_list && t->lean_list->lean1 == 2)))
			t->lean_errno = saved_errno;
		if (t->lean_kret && !t->kret_errp) {
			t->kret_errp = t->errno_p;
			t->lean_errno = saved_errno;
		}
		t->in_fault = 1;
		int handled = p->fault_handler &&
			      p->fault_handler(p, t->cur_regs, ukp_arch_trapnr(uc, sig));
		t->in_fault = 0;
		errno = saved_errno;
		if (handled) {
			t->cur = NULL;
			fpu_restore(uc);
			fault_resume(t);
		}
		handler_fault_unhandled(t, sig, si, uc);
	}
	if (slot && !h.own) {
		slot_fault(&h, sig, si, uc);
	} else if (t && t->cur) {
		/* not the running handler's (the push of its call in a
		 * hand-written hit path, on a stack the program grows, say;
		 * or a program signal handler's on another stack): the
		 * program's handler runs with no handler marked running, so
		 * none of its own faults are taken for the handler's.  A
		 * detour's own fast path (h.own) faults only there too: the
		 * program's fault, retried where it happened, never moved to
		 * the probe point as a fault of a probed instruction's copy */
		/* (a bare hit's faults are told apart by where they are,
		 * bare_own: cur stays, so a program handler that longjmps
		 * within itself cannot leave the hit without it) */
		struct kprobe *cur = t->cur;
		bool bare = t->in_handler & IH_BARE;
		if (!bare)
			t->cur = NULL;
		chain(sig, si, uc);
		if (!bare)
			t->cur = cur;
	} else {
		chain(sig, si, uc);
	}
	errno = saved_errno;
}
