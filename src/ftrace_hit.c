/* SPDX-License-Identifier: MIT */
/*
 * ftrace: the hit path in C (the list walk) and the recursion lock.
 * Built with -mgeneral-regs-only: the lean trampolines save no vector
 * state, so this code must not touch it either.
 */
#include <stddef.h>
#include <ucontext.h>
#include "ftrace_int.h"
#include <sys/syscall.h>
#include "arch/x86_64/asm-offsets.h"

UKP_OFF(struct ft_cfg, tramp, FC_TRAMP, 8);
UKP_OFF(struct ft_cfg, ip, FC_IP, 8);
UKP_OFF(struct ft_cfg, ops, FC_OPS, 8);
UKP_OFF(struct ft_cfg, func, FC_FUNC, 8);
UKP_OFF(struct ft_cfg, opp, FC_OPP, 8);
UKP_OFF(struct ft_cfg, walk, FC_WALK, 8);
UKP_OFF(struct ft_cfg, n, FC_N, 4);
_Static_assert(offsetof(struct ft_cfg, e) == FC_E, "ft_cfg.e");
UKP_OFF(struct ft_ent, func, FE_FUNC, 8);
UKP_OFF(struct ft_ent, ops, FE_OPS, 8);
UKP_OFF(struct ft_ent, opp, FE_OPP, 8);
UKP_OFF(struct ft_ent, flags, FE_FLAGS, 8);
_Static_assert(sizeof(struct ft_ent) == FE_SIZE, "ft_ent size");
_Static_assert((FTRACE_OPS_FL_SAVE_REGS | FTRACE_OPS_FL_SAVE_REGS_IF_SUPPORTED) == FL_ANY_REGS &&
	       FTRACE_OPS_FL_IPMODIFY == FL_IPMODIFY, "ftrace flags");
UKP_OFF(struct ft_opp, live, FO_LIVE, 1);
UKP_OFF(struct ukp_thread, ft_depth, T_FT_DEPTH, 8);
UKP_OFF(struct ukp_thread, ft_qs, T_FT_QS, 8);
UKP_OFF(struct ukp_thread, errno_p, T_ERRNO_P, 8);

/* ---- recursion protection ---------------------------------------------------- */

/*
 * The kernel tells contexts apart by its preempt count (normal, softirq,
 * irq, NMI); a user thread's only other context is a signal handler.  A
 * context holds the lock from trylock to unlock, recorded as the stack
 * address of its trylock.  A second trylock while that is held is
 * recursion, unless a signal frame lies between the two on the stack (the
 * handler interrupted the holder), or it runs on another stack (a
 * sigaltstack).  The frame is recognised by the return address every
 * handler is entered with (the restorer), followed by a ucontext whose
 * saved sp lies above it; the scan runs only when the lock is held.
 */
#define SCAN_MAX (256UL << 10)
#define OTHER_STACK (64UL << 20)

static unsigned long restorer;

unsigned long ukp_sig_restorer(void)
{
	unsigned long r = __atomic_load_n(&restorer, __ATOMIC_RELAXED);
	/* the kernel's view of any action with a handler (ours for SIGTRAP
	 * once ukprobes started; the one running now when a handler calls
	 * this first): glibc sets the same restorer, __restore_rt, for all */
	for (long k = 0; !r && k < 65; k++) {
		long sig = k ? k : SIGTRAP;	/* ours first */
		struct ukp_ksigaction ka;
		if (sig == SIGKILL || sig == SIGSTOP)
			continue;
		if (ukp_ksigaction_get((int)sig, &ka) == 0 &&
		    (ka.flags & 0x04000000 /* SA_RESTORER */) && ka.handler > 1)
			r = ka.restorer;
	}
	if (r)
		__atomic_store_n(&restorer, r, __ATOMIC_RELAXED);
	return r;
}

static bool signal_frame_between(unsigned long sp, unsigned long holder)
{
	unsigned long r = ukp_sig_restorer();
	if (!r)
		return false;
	for (unsigned long a = (sp + 7) & ~7UL; a + 8 + sizeof(ucontext_t) <= holder + 4096 &&
	     a < holder; a += 8) {
		if (*(const unsigned long *)a != r)
			continue;
		const ucontext_t *uc = (const void *)(a + 8);
		unsigned long isp = (unsigned long)uc->uc_mcontext.gregs[REG_RSP];
		if (isp > a && isp - a < SCAN_MAX + 65536)
			return true;
	}
	return false;
}

/* is sp on this thread's sigaltstack? (only when a context is held) */
static bool on_altstack(unsigned long sp)
{
	stack_t ss;
	if (ukp_raw_syscall(SYS_sigaltstack, 0, (long)&ss, 0, 0, 0, 0) != 0 ||
	    (ss.ss_flags & SS_DISABLE))
		return false;
	return sp >= (unsigned long)ss.ss_sp && sp < (unsigned long)ss.ss_sp + ss.ss_size;
}

static bool same_stack(unsigned long a, unsigned long b)
{
	unsigned long d = a > b ? a - b : b - a;
	return d < OTHER_STACK && on_altstack(a) == on_altstack(b);
}

int ftrace_test_recursion_trylock(unsigned long ip, unsigned long parent_ip)
{
	(void)ip;
	(void)parent_ip;
	struct ukp_thread *t = ukp_thread_self();
	if (!t)
		return -1;
	unsigned long sp = (unsigned long)__builtin_frame_address(0);
	unsigned d = t->ft_rdepth;
	/* holders whose frames are gone (unlock never ran: a longjmp) */
	while (d && sp > t->ft_rsp[d - 1] && same_stack(sp, t->ft_rsp[d - 1]))
		d--;
	if (d) {
		unsigned long h = t->ft_rsp[d - 1];
		bool other = sp > h || !same_stack(sp, h);	/* another stack */
		if (!other && (h - sp > SCAN_MAX || !signal_frame_between(sp, h))) {
			t->ft_rdepth = d;
			return -1;	/* recursion within one context */
		}
	}
	if (d >= UKP_FT_CONTEXTS) {
		t->ft_rdepth = d;
		return -1;
	}
	t->ft_rsp[d] = sp;
	atomic_signal_fence(memory_order_seq_cst);
	t->ft_rdepth = d + 1;
	return (int)d;
}

void ftrace_test_recursion_unlock(int bit)
{
	struct ukp_thread *t = ukp_thread_peek();
	if (t && bit >= 0 && (unsigned)bit < t->ft_rdepth)
		t->ft_rdepth = (unsigned)bit;
}

/* ---- the list walk ---------------------------------------------------------------- */

static inline void call_one(const struct ft_ent *e, unsigned long ip, unsigned long parent,
			    struct pt_regs *regs)
{
	if (e->flags & FTRACE_OPS_FL_RECURSION) {
		int bit = ftrace_test_recursion_trylock(ip, parent);
		if (bit < 0)
			return;
		e->func(ip, parent, e->ops, regs);
		ftrace_test_recursion_unlock(bit);
	} else {
		e->func(ip, parent, e->ops, regs);
	}
}

/*
 * The walk in C, for lists where an ops asked for FTRACE_OPS_FL_RECURSION
 * (entry.S has the one for the others).  regs NULL: the trampoline saved
 * none.  Only an IPMODIFY ops (or a kprobe's pre_handler that returned
 * non-zero) may move ip: the call then goes there instead, with the same
 * arguments.  1: one did.
 */
int ukp_ftrace_walk_c(const struct ft_cfg *c, struct pt_regs *regs, unsigned long parent)
{
	struct ukp_thread *t = ukp_self;	/* the stub attached it */
	int saved = *t->errno_p;
	unsigned long want = c->ip;
	for (unsigned i = 0; i < c->n; i++) {
		const struct ft_ent *e = &c->e[i];
		if (!atomic_load_explicit(&e->opp->live, memory_order_relaxed))
			continue;
		bool regs_too = e->flags & (FTRACE_OPS_FL_SAVE_REGS |
					    FTRACE_OPS_FL_SAVE_REGS_IF_SUPPORTED);
		call_one(e, c->ip, parent, regs_too ? regs : NULL);
		if (regs && regs->ip != want) {
			if (e->flags & FTRACE_OPS_FL_IPMODIFY)
				want = regs->ip;
			else
				regs->ip = want;	/* not this ops' to move */
		}
	}
	*t->errno_p = saved;
	return want != c->ip;
}

/* The kprobes on a patch site, as one internal ops. */
void ukp_ftrace_kprobe_func(unsigned long ip, unsigned long parent_ip,
			    struct ftrace_ops *op, struct pt_regs *regs)
{
	(void)parent_ip;
	(void)op;
	struct ukp_site *s = ukp_site_lookup(ip);
	if (!s || !regs)
		return;
	/* the probes see the probed address; unless one redirects, where
	 * the call goes stays what an earlier IPMODIFY ops made it */
	unsigned long prev = regs->ip;
	regs->ip = ip;
	if (!ukp_kprobe_ftrace_hit(s, regs, 5))
		regs->ip = prev;
}
