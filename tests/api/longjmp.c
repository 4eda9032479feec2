/* SPDX-License-Identifier: MIT */
/*
 * longjmp out of (and back into) hits, where no handler returns: the
 * thread must end outside every hit it left (later hits run, grace
 * periods on other threads end) and give back what those hits held
 * (kretprobe instances, with maxactive 1).  The windows are made exact
 * with userfaultfd: a read of a missing page inside ukprobes' own hit
 * path waits while a monitor thread has a SIGUSR1 delivered.  Also
 * threads that end, and a program fault handler that leaves by
 * setcontext, inside such hits.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <alloca.h>
#include <ucontext.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <unistd.h>
#include "ukt.h"
#include "window.h"

__asm__(".text\n"
	".globl rv_jmpm\n.type rv_jmpm,@function\nrv_jmpm:\n\tjmp *(%rdi)\n.size rv_jmpm,.-rv_jmpm\n"
	".globl rv_target\n.type rv_target,@function\nrv_target:\n\tmov $42,%eax\n\tret\n.size rv_target,.-rv_target\n");
long rv_jmpm(void *), rv_target(void);

__attribute__((noinline)) long rv_inner(long x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

__attribute__((noinline)) long rv_kret(long x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3;
}


static volatile int npre;
static int count_pre(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; npre++; return 0; }

/* ------------------------------------------------------------------ */
/* A SIGUSR1 (a timeout) whose handler longjmps out while the hit is in
 * ukprobes' C path outside any handler: here, the branch emulation of a
 * breakpoint hit reading a missing page. */
static struct kprobe outer, inner;
static struct ukt_window win;
static char *page;
static sigjmp_buf jb;
static atomic_int usr1_done;

static int nop_pre(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; return 0; }
static void nop_post(struct kprobe *p, struct pt_regs *r, unsigned long f) { (void)p; (void)r; (void)f; }
static void usr1_jumps(int sig) { (void)sig; usr1_done = 1; siglongjmp(jb, 1); }

UKT_CASE(signal_longjmp_out_of_the_c_hit_path_outside_any_handler)
{
	UKT_EQ(ukt_on_signal(SIGUSR1, usr1_jumps, 0), 0);
	outer.addr = (void *)rv_jmpm;
	outer.pre_handler = nop_pre;
	outer.post_handler = nop_post;
	inner.addr = (void *)rv_inner;
	inner.pre_handler = count_pre;
	UKT_EQ(register_kprobe(&outer), 0);
	UKT_EQ(register_kprobe(&inner), 0);
	ukt_window_open(&win, NULL, SIGUSR1, &usr1_done, NULL);	/* stays missing */
	if (!sigsetjmp(jb, 1)) {
		rv_jmpm(win.page);
		UKT_FAIL("came back");
	}
	ukt_window_close(&win);
	UKT_EQ(usr1_done, 1);
	/* the thread left every hit: its next hit runs the handler */
	UKT_EQ(rv_inner(1), 2);
	UKT_EQ(inner.nmissed, 0);
	UKT_EQ(npre, 1);
	ukt_unregister_ends(&inner);
}

/* ------------------------------------------------------------------ */
/* The program's fault handler leaves by setcontext (not a longjmp): the
 * fault's record is left on a dead frame.  A later, unrelated
 * setjmp/longjmp whose sp falls between the old fault and hit frames must
 * not be taken for "back into that handler". */
static ucontext_t main_uc;
static volatile int sc_left;
static volatile unsigned long hit_sp, fault_sp;
static int *volatile bad = (int *)0x18;
static int sc_first = 1;

static int pre_faults_once(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	npre++;
	if (sc_first) {
		sc_first = 0;
		hit_sp = (unsigned long)r;
		fault_sp = (unsigned long)__builtin_frame_address(0);
		return *bad;
	}
	return 0;
}

static void segv_setcontext(int sig) { (void)sig; sc_left = 1; setcontext(&main_uc); }

static jmp_buf jb2;
__attribute__((noinline)) static void setjmp_longjmp(void)
{
	if (!setjmp(jb2))
		longjmp(jb2, 1);
}

__attribute__((noinline)) static void at_depth(unsigned long target)
{
	unsigned long here = (unsigned long)__builtin_frame_address(0);
	volatile char *pad = alloca(here - target);
	pad[0] = 0;
	setjmp_longjmp();
	__asm__ volatile("" :: "r"(pad) : "memory");
}

UKT_CASE(setcontext_out_of_the_programs_fault_handler_leaves_no_stale_record)
{
	static char alt[1 << 16];
	stack_t ss = { .ss_sp = alt, .ss_size = sizeof(alt) };
	UKT_EQ(sigaltstack(&ss, NULL), 0);	/* the record lives (intact) there */
	UKT_EQ(ukt_on_signal(SIGSEGV, segv_setcontext, SA_ONSTACK), 0);
	inner.addr = (void *)rv_inner;
	inner.pre_handler = pre_faults_once;
	UKT_EQ(register_kprobe(&inner), 0);
	getcontext(&main_uc);
	if (!sc_left) {
		rv_inner(1);
		UKT_FAIL("came back");
	}
	UKT_EQ(npre, 1);
	/* the thread is outside the hit (the program's handler ran outside
	 * the read lock): hits run handlers */
	UKT_EQ(rv_inner(2), 3);
	UKT_EQ(npre, 2);
	/* an unrelated setjmp/longjmp below where the hit was */
	UKT_ASSERT(fault_sp < hit_sp);
	at_depth(hit_sp - 64 > fault_sp ? hit_sp - 64 : (hit_sp + fault_sp) / 2);
	UKT_EQ(rv_inner(3), 4);
	UKT_EQ(inner.nmissed, 0);
	UKT_EQ(npre, 3);
	ukt_unregister_ends(&inner);
}

/* ------------------------------------------------------------------ */
/* An entry_handler's fault goes to the program's handler, which
 * unregisters the kretprobe (the thread is outside the read lock there,
 * so that ends), reuses its memory and returns: the resumed entry must
 * not read the kretprobe again. */
static struct kretprobe *krp;
static volatile int ent_armed, nsegv;
static int entry_faults(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri; (void)regs;
	if (ent_armed)
		return *bad;
	return 0;
}
static int ret_count(struct kretprobe_instance *ri, struct pt_regs *regs) { (void)ri; (void)regs; return 0; }
static void *unreg_kret(void *a) { unregister_kretprobe(a); return NULL; }

static void segv_unregisters(int sig)
{
	(void)sig;
	if (nsegv++) {
		/* the resumed hit faulted on the reused memory */
		fprintf(stderr, "  second SIGSEGV: the hit read the freed kretprobe\n");
		_exit(3);
	}
	pthread_t u;
	pthread_create(&u, NULL, unreg_kret, krp);
	pthread_join(u, NULL);		/* ends: this thread is outside the lock */
	memset(krp, 0x41, sizeof(*krp));	/* the caller may reuse it now */
}

UKT_CASE(entry_handler_fault_then_unregister_in_the_programs_handler)
{
	UKT_EQ(ukt_on_signal(SIGSEGV, segv_unregisters, SA_NODEFER), 0);
	krp = calloc(1, sizeof(*krp));
	krp->kp.addr = (void *)rv_kret;
	krp->entry_handler = entry_faults;
	krp->handler = ret_count;
	krp->maxactive = 1;
	UKT_EQ(register_kretprobe(krp), 0);
	ent_armed = 1;
	UKT_EQ(rv_kret(2), 6);
	UKT_EQ(nsegv, 1);
}

/* ------------------------------------------------------------------ */
/* A thread ends (pthread_exit) in the program's handler of its
 * entry_handler's fault: the instance comes back (maxactive 1). */
static int entry_faults_exit(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri; (void)regs;
	if (ent_armed)
		return *bad;
	return 0;
}
static atomic_int nret4;
static int ret_count4(struct kretprobe_instance *ri, struct pt_regs *regs) { (void)ri; (void)regs; nret4++; return 0; }
static void segv_exit(int sig) { (void)sig; pthread_exit((void *)5L); }
static void *call_kret(void *a) { (void)a; rv_kret(1); return (void *)1L; }

UKT_CASE(thread_exit_in_the_programs_handler_of_an_entry_handler_fault)
{
	UKT_EQ(ukt_on_signal(SIGSEGV, segv_exit, 0), 0);
	struct kretprobe rp = { .kp.addr = (void *)rv_kret, .entry_handler = entry_faults_exit,
				.handler = ret_count4, .maxactive = 1 };
	UKT_EQ(register_kretprobe(&rp), 0);
	ent_armed = 1;
	pthread_t th;
	void *r;
	UKT_EQ(pthread_create(&th, NULL, call_kret, NULL), 0);
	UKT_EQ(pthread_join(th, &r), 0);
	UKT_EQ((long)r, 5);
	ent_armed = 0;
	UKT_EQ(rv_kret(2), 6);
	UKT_EQ(nret4, 1);
	UKT_EQ(rp.nmissed, 0);
	unregister_kretprobe(&rp);
}

/* A thread ends inside a return handler: its instance, taken off the
 * thread's list before the handler, comes back. */
static __thread int exit_in_ret;
static int ret_exits(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri; (void)regs;
	nret4++;
	if (exit_in_ret)
		pthread_exit((void *)5L);
	return 0;
}
static void *call_kret_exit(void *a) { (void)a; exit_in_ret = 1; rv_kret(1); return (void *)1L; }

UKT_CASE(thread_exit_in_a_return_handler)
{
	struct kretprobe rp = { .kp.addr = (void *)rv_kret, .handler = ret_exits, .maxactive = 1 };
	UKT_EQ(register_kretprobe(&rp), 0);
	pthread_t th;
	void *r;
	UKT_EQ(pthread_create(&th, NULL, call_kret_exit, NULL), 0);
	UKT_EQ(pthread_join(th, &r), 0);
	UKT_EQ((long)r, 5);
	UKT_EQ(nret4, 1);
	UKT_EQ(rv_kret(2), 6);
	UKT_EQ(nret4, 2);
	UKT_EQ(rp.nmissed, 0);
	unregister_kretprobe(&rp);
}

/* ------------------------------------------------------------------ */
/* The signal's longjmp interrupts a nested hit (nest 2) inside a running
 * handler: both hits are left.  The nested hit's count_missed() is held
 * on a missing page (userfaultfd): the nested probe's struct kprobe. */
__attribute__((noinline)) long rv_nested(long x)
{
	__asm__ volatile("" ::: "memory");
	return x + 2;
}
static struct kprobe *inner2;
static char saved[4096] __attribute__((aligned(4096)));
static volatile int h_calls;
static int h_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	if (++h_calls == 1)
		rv_nested(1);		/* nested: counts nmissed on inner2 */
	return 0;
}

UKT_CASE(signal_longjmp_out_of_a_nested_hit_inside_a_handler)
{
	UKT_EQ(ukt_on_signal(SIGUSR1, usr1_jumps, 0), 0);
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(page != MAP_FAILED);
	inner2 = (struct kprobe *)page;
	inner2->addr = (void *)rv_nested;
	inner2->pre_handler = nop_pre;
	inner2->post_handler = nop_post;	/* a breakpoint probe */
	UKT_EQ(register_kprobe(inner2), 0);
	outer.addr = (void *)rv_inner;
	outer.pre_handler = h_pre;
	outer.post_handler = nop_post;
	UKT_EQ(register_kprobe(&outer), 0);
	memcpy(saved, page, 4096);
	ukt_window_open(&win, page, SIGUSR1, &usr1_done, saved);
	if (!sigsetjmp(jb, 1)) {
		rv_inner(1);
		UKT_FAIL("came back");
	}
	ukt_window_close(&win);
	UKT_EQ(usr1_done, 1);
	UKT_EQ(h_calls, 1);
	UKT_EQ(rv_inner(2), 3);		/* outside every hit: runs again */
	UKT_EQ(h_calls, 2);
	UKT_EQ(outer.nmissed, 0);
	ukt_unregister_ends(&outer);
}

/* The lean trampoline's hand-written fast path, between its read lock
 * and its handler: held on the probe's own struct kprobe (its
 * pre_handler is read there), on a missing page.  A SIGUSR1 longjmps
 * out; the hit's frame is the one that path recorded, not one an earlier
 * hit through the C path left (made to lie above the target here: that
 * hit ran on a stack at higher addresses, the main thread's, and this
 * case runs on a thread of its own). */
long rv_leaf(long x);
static struct kprobe *lean_kp, bp_kp;
static volatile int lean_calls;
static int lean_pre(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; lean_calls++; return 0; }
static ucontext_t lean_back, lean_high;
static void c_hit_high(void) { rv_leaf(0); }	/* a breakpoint hit, C path */
static void lean_case(void);
static void *lean_thread(void *high_stack)
{
	getcontext(&lean_high);
	lean_high.uc_stack.ss_sp = high_stack;
	lean_high.uc_stack.ss_size = 32768;
	lean_high.uc_link = &lean_back;
	makecontext(&lean_high, c_hit_high, 0);
	UKT_EQ(swapcontext(&lean_back, &lean_high), 0);
	UKT_EQ(bp_kp.nmissed, 0);
	lean_case();
	return NULL;
}

UKT_CASE(signal_longjmp_out_of_the_lean_fast_path_before_its_handler)
{
	char high[32768] __attribute__((aligned(64)));	/* on the main stack */
	bp_kp.addr = (void *)rv_leaf;
	bp_kp.pre_handler = nop_pre;
	bp_kp.post_handler = nop_post;		/* stays a breakpoint */
	UKT_EQ(register_kprobe(&bp_kp), 0);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, lean_thread, high), 0);
	UKT_EQ(pthread_join(th, NULL), 0);
	unregister_kprobe(&bp_kp);
}

static void lean_case(void)
{
	UKT_EQ(ukt_on_signal(SIGUSR1, usr1_jumps, 0), 0);
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(page != MAP_FAILED);
	lean_kp = (struct kprobe *)page;
	lean_kp->addr = (void *)rv_inner;
	lean_kp->pre_handler = lean_pre;
	UKT_EQ(register_kprobe(lean_kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EQ(ukt_probe_flags(lean_kp) & KPROBE_FLAG_OPTIMIZED, KPROBE_FLAG_OPTIMIZED);
	UKT_EQ(rv_inner(0), 1);		/* the thread block exists: the fast path */
	UKT_EQ(lean_calls, 1);
	memcpy(saved, page, 4096);
	ukt_window_open(&win, page, SIGUSR1, &usr1_done, saved);
	if (!sigsetjmp(jb, 1)) {
		rv_inner(1);
		UKT_FAIL("came back");
	}
	ukt_window_close(&win);
	UKT_EQ(usr1_done, 1);
	UKT_EQ(lean_calls, 1);		/* its handler never ran */
	UKT_EQ(rv_inner(2), 3);		/* outside every hit: runs again */
	UKT_EQ(lean_calls, 2);
	UKT_EQ(lean_kp->nmissed, 0);
	ukt_unregister_ends(lean_kp);
}

/* A handler's own setjmp/longjmp, inside it: the hit stays a hit (a
 * probe hit after it, still inside the handler, only counts nmissed),
 * and ends as usual.  Through a breakpoint (the C path) and optimised. */
__attribute__((noinline)) long rv_leaf(long x)
{
	__asm__ volatile("" ::: "memory");
	return x + 5;
}
static struct kprobe sj_outer, sj_inner;
static volatile int sj_calls, sj_inner_calls;
static int sj_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	jmp_buf j;
	sj_calls++;
	if (!setjmp(j))
		longjmp(j, 1);
	rv_leaf(1);		/* nested in this hit */
	return 0;
}
static int sj_inner_pre(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; sj_inner_calls++; return 0; }

static void own_longjmp_inside(bool optimized)
{
	sj_outer.addr = (void *)rv_inner;
	sj_outer.pre_handler = sj_pre;
	sj_outer.post_handler = optimized ? NULL : nop_post;
	sj_inner.addr = (void *)rv_leaf;
	sj_inner.pre_handler = sj_inner_pre;
	UKT_EQ(register_kprobe(&sj_outer), 0);
	UKT_EQ(register_kprobe(&sj_inner), 0);
	wait_for_kprobe_optimizer();
	UKT_EQ(!!(ukt_probe_flags(&sj_outer) & KPROBE_FLAG_OPTIMIZED), optimized);
	for (int i = 1; i <= 3; i++) {
		UKT_EQ(rv_inner(i), i + 1);
		UKT_EQ(sj_calls, i);
		UKT_EQ(sj_inner.nmissed, i);
		UKT_EQ(sj_inner_calls, 0);
	}
	UKT_EQ(rv_leaf(1), 6);		/* outside: it runs */
	UKT_EQ(sj_inner_calls, 1);
	UKT_EQ(sj_outer.nmissed, 0);
	ukt_unregister_ends(&sj_inner);
	ukt_unregister_ends(&sj_outer);
}

UKT_CASE(handlers_own_longjmp_inside_it_breakpoint)
{
	own_longjmp_inside(false);
}

UKT_CASE(handlers_own_longjmp_inside_it_optimized)
{
	own_longjmp_inside(true);
}

/* A program SIGSEGV handler that leaves by setcontext, in a thread that
 * then reuses that stack and ends: the fault's record must not be read
 * from the dead frame (the thread's exit gives back what records hold). */
__attribute__((noinline)) long rv_a(long x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}
static __thread int sc_armed;
static int pre_faults_armed(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	if (sc_armed) {
		sc_armed = 0;
		return *bad;
	}
	return 0;
}
static volatile int sc_nseg;
static __thread ucontext_t sc_back;
static __thread volatile int sc_thread_left;
static void segv_setcontext_thread(int sig)
{
	(void)sig;
	if (sc_nseg++)
		_exit(3);	/* a second fault: ukprobes read a dead record */
	sc_thread_left = 1;
	setcontext(&sc_back);
}
__attribute__((noinline)) static void scribble(void)
{
	volatile char buf[32768];
	memset((char *)buf, 0x41, sizeof(buf));
	__asm__ volatile("" :: "r"(buf) : "memory");
}
static void *sc_thread(void *a)
{
	(void)a;
	sc_armed = 1;
	getcontext(&sc_back);
	if (!sc_thread_left)
		rv_a(1);	/* its handler faults; the program's handler
				   setcontexts back here */
	scribble();		/* the dead record's memory is reused */
	return (void *)7L;	/* the thread's exit */
}
static struct kprobe sc_kp;

static void setcontext_then_exit(bool bp)
{
	UKT_EQ(ukt_on_signal(SIGSEGV, segv_setcontext_thread, 0), 0);
	sc_kp.addr = (void *)rv_a;
	sc_kp.pre_handler = pre_faults_armed;
	sc_kp.post_handler = bp ? nop_post : NULL;
	UKT_EQ(register_kprobe(&sc_kp), 0);
	pthread_t th;
	void *r;
	UKT_EQ(pthread_create(&th, NULL, sc_thread, NULL), 0);
	UKT_EQ(pthread_join(th, &r), 0);
	UKT_EQ((long)r, 7);
	UKT_EQ(sc_nseg, 1);
	ukt_unregister_ends(&sc_kp);
}

UKT_CASE(setcontext_out_of_the_programs_handler_then_thread_exit_breakpoint)
{
	setcontext_then_exit(true);
}

UKT_CASE(setcontext_out_of_the_programs_handler_then_thread_exit_optimized)
{
	setcontext_then_exit(false);
}

/* With the knob off, kret.S's fast return path (which runs anyway: the
 * call must return) takes its lock; a C path that ends it (a fault the
 * fault_handler takes) must leave the thread outside. */
static volatile int kn_fault;
static int kn_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri; (void)regs;
	if (kn_fault) {
		kn_fault = 0;
		return *bad;
	}
	return 0;
}
static int kn_fh(struct kprobe *p, struct pt_regs *r, int trapnr) { (void)p; (void)r; (void)trapnr; return 1; }
__attribute__((noinline)) long rv_knob(long x)
{
	kprobes_set_enabled(0);		/* between the entry and the return */
	__asm__ volatile("" ::: "memory");
	return x * 5;
}
static struct kretprobe kn_rp;
static void *unreg_kret_thread(void *a) { unregister_kretprobe(a); return NULL; }

UKT_CASE(kretprobe_return_with_the_knob_off_then_a_taken_fault)
{
	kn_rp.kp.addr = (void *)rv_knob;
	kn_rp.kp.fault_handler = kn_fh;
	kn_rp.handler = kn_handler;
	kn_rp.maxactive = 4;
	UKT_EQ(register_kretprobe(&kn_rp), 0);
	kn_fault = 1;
	UKT_EQ(rv_knob(1), 5);
	UKT_EQ(kprobes_set_enabled(1), 0);
	ukt_ends_within_20s(unreg_kret_thread, &kn_rp);	/* its grace period ends */
}

/* A live fault record must not be taken for a dead one: the program's
 * SIGSEGV handler (on the alternate stack, where the record's frame is)
 * runs a coroutine on another stack, which does a local setjmp/longjmp.
 * Had ukprobes settled the record there (given back the return
 * handler's kretprobe instance), the return would give it back again
 * when the handler returns: a cycle in the free stack, two calls on one
 * instance (maxactive 1: a nested call no longer missed). */
__attribute__((noinline)) long co_rec(long n)
{
	long r = n;
	if (n > 0)
		r += co_rec(n - 1);
	__asm__ volatile("" : "+r"(r) :: "memory");
	return r + 1;
}

static int *volatile co_bad = (int *)0x18;
static volatile int co_armed, co_nsegv, co_nret;
static int co_ret_h(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri; (void)regs;
	co_nret++;
	if (co_armed) {
		co_armed = 0;
		return *co_bad;
	}
	return 0;
}

static ucontext_t co_h_uc, co_co_uc;
static jmp_buf co_cjb;
static void co_fn2(void)
{
	if (!setjmp(co_cjb))
		longjmp(co_cjb, 1);	/* a local longjmp on the coroutine's stack */
	swapcontext(&co_co_uc, &co_h_uc);
}
static void co_segv(int sig)
{
	(void)sig;
	co_nsegv++;
	static char *stk;
	stk = malloc(1 << 16);
	getcontext(&co_co_uc);
	co_co_uc.uc_stack.ss_sp = stk;
	co_co_uc.uc_stack.ss_size = 1 << 16;
	co_co_uc.uc_link = NULL;
	makecontext(&co_co_uc, co_fn2, 0);
	swapcontext(&co_h_uc, &co_co_uc);
}

static struct kretprobe co_rp;

UKT_CASE(coroutine_longjmp_in_the_programs_handler_keeps_the_record)
{
	static char alt[1 << 16];
	stack_t ss = { .ss_sp = alt, .ss_size = sizeof(alt) };
	UKT_EQ(sigaltstack(&ss, NULL), 0);
	UKT_EQ(ukt_on_signal(SIGSEGV, co_segv, SA_ONSTACK | SA_NODEFER), 0);
	co_rp.kp.addr = (void *)co_rec;
	co_rp.handler = co_ret_h;
	co_rp.maxactive = 1;
	UKT_EQ(register_kretprobe(&co_rp), 0);
	UKT_EQ(co_rec(1), 3);
	UKT_EQ(co_rp.nmissed, 1);		/* the nested call: none free */
	co_armed = 1;
	UKT_EQ(co_rec(0), 1);
	UKT_EQ(co_nsegv, 1);
	pid_t c = fork();
	if (c == 0) {
		alarm(5);
		co_rec(1);
		_exit(co_rp.nmissed == 2 ? 0 : 1);
	}
	int st = 0;
	UKT_EQ(waitpid(c, &st, 0), c);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		fprintf(stderr, "  child: status %#x (the instance was given back twice)\n", st);
	UKT_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
