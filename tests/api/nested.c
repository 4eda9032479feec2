/* SPDX-License-Identifier: MIT */
/*
 * Hits nested in a hit that is still in ukprobes' C path, outside any
 * handler: a program signal arrives while a breakpoint hit emulates its
 * branch (the kernel's rule, kprobe_running(): the nested hit only counts
 * nmissed).  The window is made exact with userfaultfd: the probed
 * instruction is an indirect jump through a page that is missing until a
 * monitor thread has had the signal delivered and handled.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include "ukt.h"
#include "window.h"

__asm__(".text\n"
	".globl nt_jmpm\n.type nt_jmpm,@function\nnt_jmpm:\n\tjmp *(%rdi)\n.size nt_jmpm,.-nt_jmpm\n"
	".globl nt_target\n.type nt_target,@function\nnt_target:\n\tmov $42,%eax\n\tret\n.size nt_target,.-nt_target\n"
	".globl nt_inner\n.type nt_inner,@function\nnt_inner:\n\tlea 1(%rdi),%rax\n\tret\n.size nt_inner,.-nt_inner\n");
long nt_jmpm(void *), nt_target(void), nt_inner(long);

static atomic_int outer_pre, outer_post, inner_pre, usr1_done, usr1_result, segvs;
static struct kprobe outer, inner;
static sigjmp_buf jb;

static int outer_pre_fn(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; outer_pre++; return 0; }
static void outer_post_fn(struct kprobe *p, struct pt_regs *r, unsigned long f)
{
	(void)p; (void)f;
	if (r->ip == (unsigned long)nt_target)
		outer_post++;
}

/* faults: had it run, the program's SIGSEGV handler would longjmp back
 * into the signal handler below, out of this hit */
static int inner_pre_faults(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	inner_pre++;
	static int *volatile bad = (int *)0x18;
	return *bad;
}

static void segv_jmp(int sig) { (void)sig; segvs++; siglongjmp(jb, 1); }
static void usr1(int sig)
{
	(void)sig;
	if (!sigsetjmp(jb, 1))
		usr1_result = (int)nt_inner(1);
	usr1_done = 1;
}

UKT_CASE(signal_hit_inside_a_breakpoint_hit_counts_missed)
{
	UKT_EQ(ukt_on_signal(SIGSEGV, segv_jmp, 0), 0);
	UKT_EQ(ukt_on_signal(SIGUSR1, usr1, 0), 0);

	/* a post_handler on an indirect jmp: the hit emulates the jump in
	 * its C path, which reads the missing page */
	outer.addr = (void *)nt_jmpm;
	outer.pre_handler = outer_pre_fn;
	outer.post_handler = outer_post_fn;
	inner.addr = (void *)nt_inner;
	inner.pre_handler = inner_pre_faults;
	UKT_EQ(register_kprobe(&outer), 0);
	UKT_EQ(register_kprobe(&inner), 0);
	/* the jump's target goes in once the signal's handler has run */
	static unsigned long fill[512] __attribute__((aligned(4096)));
	fill[0] = (unsigned long)nt_target;
	struct ukt_window w;
	ukt_window_open(&w, NULL, SIGUSR1, &usr1_done, fill);
	UKT_EQ(nt_jmpm(w.page), 42);
	ukt_window_close(&w);

	UKT_EQ(usr1_done, 1);
	UKT_EQ(usr1_result, 2);		/* the probed function ran, untouched */
	UKT_EQ(inner_pre, 0);		/* nested in a hit: no handler */
	UKT_EQ(inner.nmissed, 1);
	UKT_EQ(segvs, 0);
	UKT_EQ(outer_pre, 1);
	UKT_EQ(outer_post, 1);
	UKT_EQ(outer.nmissed, 0);

	/* the thread is outside every hit now: another thread's grace
	 * period ends (a lock left unbalanced would keep it waiting) */
	ukt_unregister_ends(&inner);
	unregister_kprobe(&outer);
}

/*
 * A signal handler of the program that longjmps out of a running probe
 * handler (a SIGALRM timeout, say) leaves the hit for good: the thread
 * must not stay "in a handler" (every later hit would count nmissed) or
 * inside the read lock (every grace period would wait for it).  On an
 * optimised probe and on a breakpoint one (a post_handler keeps it so).
 */
static volatile int lj_calls, lj_jumps;
static int lj_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	if (++lj_calls == 1)
		raise(SIGUSR2);
	return 0;
}
static void lj_post(struct kprobe *p, struct pt_regs *r, unsigned long f) { (void)p; (void)r; (void)f; }
static void lj_handler(int sig) { (void)sig; lj_jumps++; siglongjmp(jb, 1); }

static void longjmp_out_of_handler(bool with_post)
{
	UKT_EQ(ukt_on_signal(SIGUSR2, lj_handler, 0), 0);
	inner.addr = (void *)nt_inner;
	inner.pre_handler = lj_pre;
	inner.post_handler = with_post ? lj_post : NULL;
	UKT_EQ(register_kprobe(&inner), 0);
	wait_for_kprobe_optimizer();
	UKT_EQ(!!(ukt_probe_flags(&inner) & KPROBE_FLAG_OPTIMIZED), !with_post);
	if (!sigsetjmp(jb, 1)) {
		nt_inner(1);
		UKT_FAIL("the handler came back");
	}
	UKT_EQ(lj_jumps, 1);
	UKT_EQ(lj_calls, 1);
	UKT_EQ(nt_inner(2), 3);		/* outside every hit: it runs again */
	UKT_EQ(lj_calls, 2);
	UKT_EQ(inner.nmissed, 0);
	ukt_unregister_ends(&inner);
}

UKT_CASE(longjmp_out_of_an_optimized_probe_handler)
{
	longjmp_out_of_handler(false);
}

UKT_CASE(longjmp_out_of_a_breakpoint_probe_handler)
{
	longjmp_out_of_handler(true);
}

/*
 * The program's handler of a fault in a probe handler longjmps back into
 * that handler (a setjmp of its own around a risky read): the hit goes on
 * from there, inside its read lock again, and ends as usual.
 */
static sigjmp_buf back_jb;
static volatile int back_calls, back_resumed, back_posts;
static int back_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	if (++back_calls == 1) {
		static int *volatile bad = (int *)0x18;
		if (!sigsetjmp(back_jb, 1))
			return *bad;
		back_resumed++;
	}
	return 0;
}
static void back_post(struct kprobe *p, struct pt_regs *r, unsigned long f) { (void)p; (void)r; (void)f; back_posts++; }
static void back_handler(int sig) { (void)sig; siglongjmp(back_jb, 1); }

static void longjmp_back_into_handler(bool with_post)
{
	UKT_EQ(ukt_on_signal(SIGSEGV, back_handler, 0), 0);
	inner.addr = (void *)nt_inner;
	inner.pre_handler = back_pre;
	inner.post_handler = with_post ? back_post : NULL;
	UKT_EQ(register_kprobe(&inner), 0);
	wait_for_kprobe_optimizer();
	UKT_EQ(!!(ukt_probe_flags(&inner) & KPROBE_FLAG_OPTIMIZED), !with_post);
	UKT_EQ(nt_inner(1), 2);
	UKT_EQ(back_calls, 1);
	UKT_EQ(back_resumed, 1);
	UKT_EQ(back_posts, 0);		/* an abandoned hit runs no post_handler */
	UKT_EQ(nt_inner(2), 3);
	UKT_EQ(back_calls, 2);
	UKT_EQ(back_posts, with_post ? 1 : 0);
	UKT_EQ(inner.nmissed, 0);
	ukt_unregister_ends(&inner);
}

UKT_CASE(longjmp_back_into_an_optimized_probe_handler)
{
	longjmp_back_into_handler(false);
}

UKT_CASE(longjmp_back_into_a_breakpoint_probe_handler)
{
	longjmp_back_into_handler(true);
}
