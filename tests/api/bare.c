/* SPDX-License-Identifier: MIT */
/*
 * Jump-optimised probes whose pre_handler never reads its registers (the
 * detour's bare fast path), and the status flags the detours put back
 * only where they are live: the cases where that is easy to get wrong
 * (flags read across a system call, a call or the program's own trap).
 *
 * Cases:
 *   flags_across_syscall_kept      CF set, the probe, a system call,
 *                         then CF read: the kernel gives the flags back,
 *                         so they are live at the probe
 *   flags_into_a_call_kept         CF set, the probe, a call to a
 *                         hand-written callee that reads CF
 *   flags_across_program_int3_kept CF set, the probe, the program's own
 *                         int3 (its SIGTRAP handler returns), CF read
 *   flags_across_program_ud2_kept  the same with ud2, which the program's
 *                         SIGILL handler steps over
 *   handler_sets_df_through_regs, ..._flags_dead   a handler that sets
 *                         DF in regs->flags: the probed code gets it, on
 *                         the lean fast path too, where flags are live
 *                         and where they are dead
 *   xmm_live_past_program_ud2_kept xmm0 live across the probe and a ud2
 *                         the program's SIGILL handler steps over: kept
 *   df_set_at_a_bare_probe_kept    DF and every status flag set (or all
 *                         clear but DF) across a bare handler's probe:
 *                         the bare path neither tests nor restores DF
 *   bare_handler_fault_after_pre_handler_swap   a bare handler that
 *                         swaps its probe's pre_handler and faults: its
 *                         fault_handler takes the fault
 *   bare_handler_fault_with_kprobe_on_handler, ..._kretprobe_...   the
 *                         faulting instruction of a bare handler runs out
 *                         of line in another probe's detour: still the
 *                         handler's fault
 *   handler_fault_after_a_program_fault_in_the_hit_is_the_handlers   a
 *                         SIGALRM handler interrupting a bare handler
 *                         faults and its SIGSEGV handler longjmps back into
 *                         it; then the bare handler faults: that one is
 *                         its fault_handler's
 *   sigsegv_sent_during_a_bare_handler_is_the_programs   another thread
 *                         sends SIGSEGV while a bare handler runs: the
 *                         program's handler gets it, the handler finishes
 *   bare_handler_reloaded_at_same_address   a bare handler's object
 *                         unloaded, another loaded at the same address
 *                         whose handler is longer and faults past the
 *                         old one's end: the fault is the handler's
 */
#include "ukt.h"
#include <dlfcn.h>
#include <pthread.h>
#include <errno.h>
#include <setjmp.h>
#include <stdbool.h>
#include <ucontext.h>
#include <unistd.h>

unsigned long r_sys(void);	/* CF set, probe, getpid syscall, returns CF after it */
unsigned long r_call(void);	/* CF set, probe, call r_callee (returns CF it got) */
unsigned long r_df(void);	/* probe; returns the flags (pushfq) */
__asm__(
	".text\n.p2align 4\n"
	".globl r_sys\n.type r_sys,@function\n"
	"r_sys: stc\n"
	".globl r_sys_probe\nr_sys_probe: mov $39,%eax\n"
	" syscall\n setc %al\n movzbl %al,%eax\n ret\n.size r_sys,.-r_sys\n"

	".p2align 4\n"
	".globl r_callee\n.type r_callee,@function\n"
	"r_callee: setc %al\n ret\n.size r_callee,.-r_callee\n"

	".p2align 4\n"
	".globl r_call\n.type r_call,@function\n"
	"r_call: stc\n"
	".globl r_call_probe\nr_call_probe: mov $0,%eax\n"
	" call r_callee\n test %eax,%eax\n ret\n.size r_call,.-r_call\n"

	".p2align 4\n"
	".globl r_df\n.type r_df,@function\n"
	"r_df: nop\n"
	".globl r_df_probe\nr_df_probe: nopl 0x0(%rax,%rax,1)\n"
	" pushfq\n pop %rax\n cld\n ret\n.size r_df,.-r_df\n"
);

static atomic_long hits, faults;

/* a bare handler: clears CF (the add of 1 to a small counter) */
static int clobber_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	hits++;
	__asm__ volatile("clc" ::: "cc");
	return 0;
}

/* ---- 1: syscall taken as a write of every status flag ---- */
UKT_CASE(flags_across_syscall_kept)
{
	UKT_EQ(r_sys(), 1);	/* Linux keeps the flags across syscall */
	struct kprobe kp = { .addr = (void *)ukt_label("r_sys_probe"), .pre_handler = clobber_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(r_sys(), 1);	/* int3 path */
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	long h0 = hits;
	unsigned long got = r_sys();
	UKT_EQ(hits - h0, 1);
	UKT_EQ(got, 1);
	unregister_kprobe(&kp);
}

/* ---- 2: a callee that reads the caller's flags ---- */
UKT_CASE(flags_into_a_call_kept)
{
	UKT_EQ(r_call(), 1);
	struct kprobe kp = { .addr = (void *)ukt_label("r_call_probe"), .pre_handler = clobber_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(r_call(), 1);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	long h0 = hits;
	unsigned long got = r_call();
	UKT_EQ(hits - h0, 1);
	UKT_EQ(got, 1);
	unregister_kprobe(&kp);
}

/* ---- 3: a handler sets DF in regs->flags (README: handlers may change flags) ---- */
static int sets_df_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	r->flags |= 0x400;
	hits++;
	return 0;
}

UKT_CASE(handler_sets_df_through_regs)
{
	struct kprobe kp = { .addr = (void *)ukt_label("r_df_probe"), .pre_handler = sets_df_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	unsigned long f = r_df();
	UKT_ASSERT(f & 0x400);	/* the int3 path: DF as the handler left it */
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	long h0 = hits;
	f = r_df();
	UKT_EQ(hits - h0, 1);
	if (!(f & 0x400))
		UKT_FAIL("optimized: DF the handler set in regs->flags lost (flags %#lx)", f);
	unregister_kprobe(&kp);
}

/* ---- 4: a bare handler whose probe's pre_handler changes during the hit ---- */
static volatile long *volatile bad_ptr = (long *)0x18;
static int other_pre(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; return 0; }
static int swaps_then_faults_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)r;
	p->pre_handler = other_pre;	/* e.g. another thread swapping it */
	return (int)*bad_ptr;
}
static int fault_take(struct kprobe *p, struct pt_regs *r, int trapnr)
{
	(void)p; (void)r; (void)trapnr;
	faults++;
	return 1;
}
static volatile int prog_segv;
static sigjmp_buf prog_jb;
static void prog_handler(int sig, siginfo_t *si, void *ctx)
{
	(void)sig; (void)si; (void)ctx;
	prog_segv++;
	siglongjmp(prog_jb, 1);
}

long r_target(long x);
__asm__(".text\n.p2align 4\n.globl r_target\n.type r_target,@function\n"
	"r_target: nopl 0x0(%rax,%rax,1)\n lea 1(%rdi),%rax\n ret\n.size r_target,.-r_target\n");

UKT_CASE(bare_handler_fault_after_pre_handler_swap)
{
	ukt_install_handler(SIGSEGV, prog_handler);
	struct kprobe kp = { .addr = (void *)r_target, .pre_handler = other_pre,
			     .fault_handler = fault_take };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	UKT_EQ(r_target(1), 2);	/* this thread's block made */
	/* put the faulting one in place the way the bare path was chosen for */
	unregister_kprobe(&kp);
	memset(&kp, 0, sizeof(kp));
	kp.addr = (void *)r_target;
	kp.pre_handler = swaps_then_faults_pre;
	kp.fault_handler = fault_take;
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	if (sigsetjmp(prog_jb, 1) == 0) {
		UKT_EQ(r_target(1), 2);
	}
	UKT_EQ(prog_segv, 0);
	UKT_EQ(faults, 1);
	unregister_kprobe(&kp);
}

/* ---- 5: a fault in a bare handler's instruction run out of line by a
 * probe on the handler itself (the nested hit only counts a miss) ---- */
struct wrap { volatile long *bad; struct kprobe kp; };
static int loads_through_p_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)r;
	struct wrap *w = (struct wrap *)((char *)p - offsetof(struct wrap, kp));
	return (int)*w->bad;
}
static int count_pre(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; hits++; return 0; }

static void probe_on_handler(int ret)
{
	ukt_install_handler(SIGSEGV, prog_handler);
	static struct wrap w;
	w.bad = (long *)0x18;
	w.kp.addr = (void *)r_target;
	w.kp.pre_handler = loads_through_p_pre;
	w.kp.fault_handler = fault_take;
	UKT_EQ(register_kprobe(&w.kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&w.kp);
	for (int i = 0; i < 2; i++)	/* the first makes this thread's block */
		if (sigsetjmp(prog_jb, 1) == 0)
			UKT_EQ(r_target(1), 2);
	UKT_EQ(prog_segv, 0);
	UKT_EQ(faults, 2);	/* fine without a probe on the handler */
	struct kprobe kh = { .addr = (void *)loads_through_p_pre, .pre_handler = count_pre };
	struct kretprobe rp = { .kp.addr = (void *)loads_through_p_pre, .maxactive = 4 };
	if (ret)
		UKT_EQ(register_kretprobe(&rp), 0);
	else
		UKT_EQ(register_kprobe(&kh), 0);
	wait_for_kprobe_optimizer();
	if (ret)
		UKT_EXPECT_OPTIMIZED(&rp.kp);
	else
		UKT_EXPECT_OPTIMIZED(&kh);
	UKT_EXPECT_OPTIMIZED(&w.kp);
	if (sigsetjmp(prog_jb, 1) == 0)
		UKT_EQ(r_target(1), 2);
	UKT_EQ(prog_segv, 0);
	UKT_EQ(faults, 3);
	if (ret)
		unregister_kretprobe(&rp);
	else
		unregister_kprobe(&kh);
	unregister_kprobe(&w.kp);
}
UKT_CASE(bare_handler_fault_with_kprobe_on_handler) { probe_on_handler(0); }
UKT_CASE(bare_handler_fault_with_kretprobe_on_handler) { probe_on_handler(1); }

/* ---- 6: bare_code keeps the end of an unloaded handler ---- */
static void solib_path(char *out, size_t n, const char *name)
{
	char self[4096];
	ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	UKT_ASSERT(k > 0);
	self[k] = 0;
	*strrchr(self, '/') = 0;
	snprintf(out, n, "%s/../solibs/%s", self, name);
}

UKT_CASE(bare_handler_reloaded_at_same_address)
{
	ukt_install_handler(SIGSEGV, prog_handler);
	char pa[4200], pb[4200];
	solib_path(pa, sizeof(pa), "bare_a.so");
	solib_path(pb, sizeof(pb), "bare_b.so");
	void *a = dlopen(pa, RTLD_NOW);
	UKT_ASSERT(a);
	int (*ha)(struct kprobe *, struct pt_regs *) = (int (*)(struct kprobe *, struct pt_regs *))dlsym(a, "h");
	struct kprobe kp = { .addr = (void *)r_target, .pre_handler = ha };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	UKT_EQ(r_target(1), 2);
	unregister_kprobe(&kp);
	dlclose(a);
	void *b = dlopen(pb, RTLD_NOW);
	UKT_ASSERT(b);
	int (*hb)(struct kprobe *, struct pt_regs *) = (int (*)(struct kprobe *, struct pt_regs *))dlsym(b, "h");
	UKT_ASSERT(ha == hb);
	memset(&kp, 0, sizeof(kp));
	kp.addr = (void *)r_target;
	kp.pre_handler = hb;
	kp.fault_handler = fault_take;
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	for (int i = 0; i < 2; i++)
		if (sigsetjmp(prog_jb, 1) == 0)
			UKT_EQ(r_target(1), 2);
	UKT_EQ(prog_segv, 0);
	UKT_EQ(faults, 2);
	unregister_kprobe(&kp);
}

/* ---- 7: int3 taken as a stop: the program's SIGTRAP handler returns ---- */
unsigned long r_trap(void);
__asm__(".text\n.p2align 4\n.globl r_trap\n.type r_trap,@function\n"
	"r_trap: stc\n"
	".globl r_trap_probe\nr_trap_probe: mov $0,%eax\n"
	" int3\n setc %al\n ret\n.size r_trap,.-r_trap\n");
static volatile int traps;
static void on_trap(int sig) { (void)sig; traps++; }

UKT_CASE(flags_across_program_int3_kept)
{
	UKT_EQ(ukt_on_signal(SIGTRAP, on_trap, 0), 0);
	UKT_EQ(r_trap(), 1);
	struct kprobe kp = { .addr = (void *)ukt_label("r_trap_probe"), .pre_handler = clobber_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(r_trap(), 1);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	UKT_EQ(r_trap(), 1);
	UKT_EQ(traps, 3);
	unregister_kprobe(&kp);
}

/* ---- 3b: the same where the status flags are dead ---- */
unsigned long r_df_dead(void);
__asm__(".text\n.p2align 4\n.globl r_df_dead\n.type r_df_dead,@function\n"
	"r_df_dead: nop\n"
	".globl r_df_dead_probe\nr_df_dead_probe: nopl 0x0(%rax,%rax,1)\n"
	" xor %eax,%eax\n pushfq\n pop %rax\n cld\n ret\n.size r_df_dead,.-r_df_dead\n");

UKT_CASE(handler_sets_df_through_regs_flags_dead)
{
	struct kprobe kp = { .addr = (void *)ukt_label("r_df_dead_probe"), .pre_handler = sets_df_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_ASSERT(r_df_dead() & 0x400);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	unsigned long f = r_df_dead();
	if (!(f & 0x400))
		UKT_FAIL("optimized: DF the handler set in regs->flags lost (flags %#lx)", f);
	unregister_kprobe(&kp);
}

/* ---- 8: ud2 taken as a stop: the program's SIGILL handler steps over it ---- */
unsigned long r_ud2(void);
__asm__(".text\n.p2align 4\n.globl r_ud2\n.type r_ud2,@function\n"
	"r_ud2: stc\n"
	".globl r_ud2_probe\nr_ud2_probe: mov $0,%eax\n"
	" ud2\n setc %al\n ret\n.size r_ud2,.-r_ud2\n");
static volatile int ills;
static void over_ud2(int sig, siginfo_t *si, void *ctx)
{
	(void)sig; (void)si;
	ucontext_t *uc = ctx;
	uc->uc_mcontext.gregs[REG_RIP] += 2;
	ills++;
}

UKT_CASE(flags_across_program_ud2_kept)
{
	ukt_install_handler(SIGILL, over_ud2);
	UKT_EQ(r_ud2(), 1);
	struct kprobe kp = { .addr = (void *)ukt_label("r_ud2_probe"), .pre_handler = clobber_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(r_ud2(), 1);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	UKT_EQ(r_ud2(), 1);
	UKT_EQ(ills, 3);
	unregister_kprobe(&kp);
}

/* ---- 9: DF set at the probe, a bare handler (which never uses DF) ---- */
unsigned long r_std(long set);
__asm__(".text\n.p2align 4\n.globl r_std\n.type r_std,@function\n"
	"r_std: std\n test $1,%edi\n jz 1f\n"
	" mov $0x7f,%cl\n add $1,%cl\n mov $0xd7,%ah\n sahf\n jmp 2f\n"
	"1: xor %ecx,%ecx\n add $0,%cl\n mov $0x02,%ah\n sahf\n"
	"2:\n.globl r_std_probe\nr_std_probe: nopl 0x0(%rax,%rax,1)\n"
	" pushfq\n pop %rax\n cld\n ret\n.size r_std,.-r_std\n");

UKT_CASE(df_set_at_a_bare_probe_kept)
{
	struct kprobe kp = { .addr = (void *)ukt_label("r_std_probe"), .pre_handler = clobber_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	long h0 = hits;
	for (long i = 0; i < 20; i++) {
		unsigned long f = r_std(i & 1) & 0xcd5;	/* OF DF SF ZF AF PF CF */
		if (f != (i & 1 ? 0xcd5UL : 0x400UL))
			UKT_FAIL("flags %#lx after the probe, %#lx before", f,
				 i & 1 ? 0xcd5UL : 0x400UL);
	}
	UKT_EQ(hits - h0, 20);
	unregister_kprobe(&kp);
}

/* ---- 10: a vector register live past a ud2 the program steps over ---- */
void r_xud2(double *out);
__asm__(".text\n.p2align 4\n.globl r_xud2\n.type r_xud2,@function\n"
	"r_xud2: mov $0x4045000000000000,%rax\n movq %rax,%xmm0\n"	/* 42.0 */
	".globl r_xud2_probe\nr_xud2_probe: nopl 0x0(%rax,%rax,1)\n"
	" ud2\n movsd %xmm0,(%rdi)\n ret\n.size r_xud2,.-r_xud2\n");

/* a handler that writes xmm0 (not lean: the detour saves what is live) */
static int xmm_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	__asm__ volatile("pxor %%xmm0, %%xmm0" ::: "xmm0");
	hits++;
	return 0;
}

UKT_CASE(xmm_live_past_program_ud2_kept)
{
	ukt_install_handler(SIGILL, over_ud2);
	double d = 0;
	r_xud2(&d);
	UKT_ASSERT(d == 42.0);
	struct kprobe kp = { .addr = (void *)ukt_label("r_xud2_probe"), .pre_handler = xmm_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	long h0 = hits;
	for (int i = 0; i < 5; i++) {
		d = 0;
		r_xud2(&d);
		UKT_ASSERT(d == 42.0);
	}
	UKT_EQ(hits - h0, 5);
	unregister_kprobe(&kp);
}

/* ---- 11: the program's fault inside a bare hit, then the handler's own ---- */
unsigned long r_plain(void);
__asm__(".text\n.p2align 4\n.globl r_plain\n.type r_plain,@function\n"
	"r_plain: nopl 0x0(%rax,%rax,1)\n mov $7,%eax\n ret\n.size r_plain,.-r_plain\n");

static volatile int alarm_in, in_bare, alarm_inside;
static volatile long good_long;
static volatile long *volatile late_bad = &good_long;
static volatile long *volatile alarm_bad = (long *)0x28;
static sigjmp_buf alarm_jb;

/* spins until the alarm came, then reads through late_bad (a fault when
 * it is bad); rax alone, so bare */
static int alarm_then_fault_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	in_bare = 1;
	while (!alarm_in)
		__asm__ volatile("pause");
	in_bare = 0;
	hits++;
	return (int)*late_bad;
}

static void alarm_faults(int sig)
{
	(void)sig;
	alarm_inside += in_bare;
	alarm_in = 1;
	if (!sigsetjmp(alarm_jb, 1))
		*alarm_bad = 1;			/* the program's own fault */
}

static void segv_back(int sig, siginfo_t *si, void *ctx)
{
	(void)sig; (void)si; (void)ctx;
	prog_segv++;
	siglongjmp(alarm_jb, 1);
}

UKT_CASE(handler_fault_after_a_program_fault_in_the_hit_is_the_handlers)
{
	UKT_EQ(ukt_on_signal(SIGALRM, alarm_faults, 0), 0);
	ukt_install_handler(SIGSEGV, segv_back);
	struct kprobe kp = { .addr = (void *)r_plain, .pre_handler = alarm_then_fault_pre,
			     .fault_handler = fault_take };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	alarm_in = 1;
	UKT_EQ(r_plain(), 7);		/* this thread's block made */
	long h0 = hits, f0 = faults;
	for (int i = 0; i < 3; i++) {
		alarm_in = 0;
		prog_segv = 0;
		late_bad = (long *)0x18;
		ualarm(10000, 0);
		UKT_EQ(r_plain(), 7);
		UKT_EQ(prog_segv, 1);	/* the alarm handler's fault: the program's */
	}
	late_bad = &good_long;
	UKT_EQ(alarm_inside, 3);	/* each alarm came inside the handler */
	UKT_EQ(hits - h0, 3);
	UKT_EQ(faults - f0, 3);		/* each handler's fault: its fault_handler's */
	unregister_kprobe(&kp);
}

/* ---- 12: a SIGSEGV another thread sends while a bare handler runs ---- */
static volatile int segv_sent_seen;
static pthread_t main_thread;

static int waits_for_segv_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	in_bare = 1;
	while (!segv_sent_seen)
		__asm__ volatile("pause");
	in_bare = 0;
	hits++;
	return 0;
}

static void segv_sent(int sig, siginfo_t *si, void *ctx)
{
	(void)sig; (void)ctx;
	if (si->si_code == SI_TKILL && in_bare)
		segv_sent_seen = 1;
}

static void *send_segv(void *a)
{
	(void)a;
	while (!in_bare)
		__asm__ volatile("pause");
	pthread_kill(main_thread, SIGSEGV);
	return NULL;
}

UKT_CASE(sigsegv_sent_during_a_bare_handler_is_the_programs)
{
	ukt_install_handler(SIGSEGV, segv_sent);
	main_thread = pthread_self();
	struct kprobe kp = { .addr = (void *)r_plain, .pre_handler = waits_for_segv_pre,
			     .fault_handler = fault_take };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	segv_sent_seen = 1;
	UKT_EQ(r_plain(), 7);		/* this thread's block made */
	long h0 = hits, f0 = faults;
	segv_sent_seen = 0;
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, send_segv, NULL), 0);
	UKT_EQ(r_plain(), 7);
	pthread_join(th, NULL);
	UKT_EQ(segv_sent_seen, 1);	/* the program's handler had it */
	UKT_EQ(hits - h0, 1);		/* the handler finished */
	UKT_EQ(faults - f0, 0);		/* not the handler's fault */
	unregister_kprobe(&kp);
}
