/* SPDX-License-Identifier: MIT */
/*
 * Which handlers may run from the lean trampoline: the detour that saves
 * no vector, mask, x87 or MMX register, nor MXCSR or the x87 control and
 * status words, because the handler (and everything it calls) provably
 * leaves them alone.  The analysis decodes the handler and follows every
 * direct call and jump, and calls through the GOT into real libc code.
 *
 * Cases:
 *   integer_handlers_are_lean        counting, reading pt_regs, calling
 *                         libc's getpid through its PLT entry
 *   vector_and_x87_handlers_are_not  inline SSE/AVX (the api tests'
 *                         register-dirtying handler), double arithmetic in
 *                         a helper it calls (the reason names the helper's
 *                         instruction), long double (x87), libc's strlen
 *   unfollowable_calls_are_not       a call through a function pointer
 *   leaf_callbacks_cannot_change_errno  which callbacks ftrace calls
 *                         without keeping errno: no call, tail call, jump
 *                         out, system call or thread-local store
 *   lean_handler_runs_optimized      a lean handler's probe is optimised,
 *                         fires exactly once per call, and the vector
 *                         values live across it survive
 *   lean_trampoline_saves_for_a_vector_handler   a thread in the lean
 *                         trampoline that finds a handler needing vector
 *                         state in the list (the moment between a list
 *                         change and the trampoline switch, forced here)
 *                         saves everything first
 *   fault_in_lean_handler_keeps_vectors   a lean handler faults with
 *                         %xmm0 live at the probe: its fault_handler takes
 *                         the fault; or none does and the program's own
 *                         SIGSEGV handler (which dirties xmm0) returns;
 *                         either way the probed code's result is right
 *   fault_in_lean_handler_goes_on_with_the_next   (two probes, C path)
 *   leaf_handler_runs_from_the_leaf_trampoline   one leaf pre_handler: the
 *                         detour calls ukp_opt_tramp_lean_leaf (no errno
 *                         kept); a handler calling libc or writing errno:
 *                         ukp_opt_tramp_lean; errno as the program left
 *                         it either way, at an entry and mid-function,
 *                         with the stack 8 or 16 bytes off alignment
 *   fault_in_one_lean_handler_keeps_errno   the fault of a leaf handler
 *                         (which recorded no errno) and of an errno-writing
 *                         one, taken by the fault_handler or by a program
 *                         handler that sets errno and returns: the probed
 *                         code goes on with its own errno, on both stack
 *                         alignments (the resume finds the frame from
 *                         pt_regs)
 *   status_flags_put_back_only_where_live   a handler that sets CF, on
 *                         the bare and the lean fast path: where a flag
 *                         is read after the probe the detour puts them
 *                         back, where a compare writes them all first it
 *                         jumps over that, and both give the right answer
 *   shared_fork_child_leaves_the_parents_detour_alone   a fork child
 *                         that cannot copy the slot memory unregisters
 *                         its probe: the parent's detour still goes to
 *                         its bare path
 *   fork_child_detour_words_are_its_own   200 forks while another
 *                         thread registers and unregisters a second
 *                         probe there: each child's detour names the
 *                         child's own list (the copy is made after the
 *                         parent lets go of the lock)
 *   post_handlers_lean_or_not   a list whose post_handlers (and their
 *                         probes' fault_handlers) keep to the general
 *                         registers says so (the post trampoline saves
 *                         no vector state for it); one with a vector
 *                         post_handler or fault_handler does not
 *   no_membarrier_takes_the_trampolines_call   without membarrier (a
 *                         seccomp filter answers ENOSYS before ukprobes
 *                         starts) the fast paths are off: a lean probe's
 *                         detour goes straight to its trampoline's call,
 *                         not through its own fast path, and counts
 *                         every hit
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "internal.h"
#include "ukt.h"
#include "detour.h"

static atomic_long hits;
static volatile long sum;

static int lean_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	hits++;
	sum += (long)r->di ^ (long)r->si;
	return 0;
}

/* a leaf that never reads its regs: the bare fast path's */
static int bare_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	hits++;
	return 0;
}

/* the same clearing DF: not bare (that path leaves DF alone) */
static int cld_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	__asm__ volatile("cld" ::: "cc");
	hits++;
	return 0;
}

static int getpid_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	hits += getpid() > 0;
	return 0;
}

static int sse_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	__asm__ volatile("pxor %%xmm3, %%xmm3" ::: "xmm3");
	return 0;
}

static int avx_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	__asm__ volatile("vpxor %%ymm9, %%ymm9, %%ymm9" ::: "xmm9");
	return 0;
}

static int mxcsr_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	unsigned m;
	__asm__ volatile("stmxcsr %0" : "=m"(m));
	return m == 1;
}

static volatile double fp_sink;

/* every vector instruction in the helper (an int argument, the store
 * there): clang converted a double argument in the caller */
__attribute__((noinline)) static void fp_helper(long x)
{
	fp_sink = (double)x * 1.5 + 0.25;
}

static int calls_fp_helper_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	fp_helper((long)r->di);
	return 0;
}

static int long_double_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	volatile long double x = (long double)(long)r->di;
	x = x / 3.0L;
	return x == 7.0L;
}

/* libc's strlen (an IFUNC: the SSE2, AVX2 or EVEX variant): vector code */
static int strlen_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	return strlen((const char *)r->di) == 3;
}

static int (*volatile indirect_target)(struct kprobe *, struct pt_regs *) = lean_pre;

static int fnptr_pre(struct kprobe *p, struct pt_regs *r)
{
	return indirect_target(p, r);
}

/* reason NULL: must be lean; else refused with reason in the message */
static void expect(void *fn, const char *name, const char *reason)
{
	char why[160] = "";
	int r = ukp_opt_handler_check(fn, why, sizeof(why));
	printf("  %-20s %s\n", name, why);
	if (!reason && r)
		UKT_FAIL("%s: refused: %s", name, why);
	if (reason && !r)
		UKT_FAIL("%s: accepted, expected \"%s\"", name, reason);
	if (reason && r && r > -4096 && !strstr(why, reason))
		UKT_FAIL("%s: reason \"%s\", expected \"%s\"", name, why, reason);
}

UKT_CASE(integer_handlers_are_lean)
{
	UKT_ASSERT(getpid() > 0);	/* binds the PLT entry (lazy binding) */
	expect((void *)lean_pre, "lean_pre", NULL);
	expect((void *)getpid_pre, "getpid_pre", NULL);
	expect(NULL, "no handler", NULL);
}

UKT_CASE(vector_and_x87_handlers_are_not)
{
	expect((void *)sse_pre, "sse_pre", "pxor");
	expect((void *)avx_pre, "avx_pre", "vpxor");
	expect((void *)mxcsr_pre, "mxcsr_pre", "stmxcsr");
	expect((void *)calls_fp_helper_pre, "calls_fp_helper_pre", "uses vector/x87 state");
	expect((void *)long_double_pre, "long_double_pre", "uses vector/x87 state");
	const char *volatile abc = "abc";
	UKT_EQ(strlen(abc), 3);		/* binds strlen's PLT entry (lazy binding) */
	expect((void *)strlen_pre, "strlen_pre", "uses vector/x87 state");
	/* the reason names the helper's instruction, not the handler's */
	char why[160];
	UKT_ASSERT(ukp_opt_handler_check((void *)calls_fp_helper_pre, why, sizeof(why)) < 0);
	const char *at = strstr(why, " at ");
	UKT_ASSERT(at != NULL);
	unsigned long a = strtoul(at + 4, NULL, 16);
	if (a < (unsigned long)fp_helper || a >= (unsigned long)fp_helper + 64)
		UKT_FAIL("reason points at %#lx, not into fp_helper at %p", a, (void *)fp_helper);
}

UKT_CASE(unfollowable_calls_are_not)
{
	expect((void *)fnptr_pre, "fnptr_pre", "cannot follow");
}

/* ftrace keeps errno around a callback unless it is a leaf that cannot
 * write it */
static __thread int tl_count;
static int tls_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	tl_count++;
	return 0;
}

static int errno_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	errno = 7;
	return 0;
}

__asm__(".text\n.globl u_tail\n.type u_tail,@function\n"
	"u_tail: test %rdi, %rdi\n jz 1f\n jmp getpid\n1: ret\n.size u_tail,.-u_tail\n"
	".globl u_sys\n.type u_sys,@function\n"
	"u_sys: mov $39, %eax\n syscall\n ret\n.size u_sys,.-u_sys\n"
	".globl u_leaf_loop\n.type u_leaf_loop,@function\n"
	"u_leaf_loop: xor %eax, %eax\n1: add %rdi, %rax\n dec %rsi\n jnz 1b\n ret\n"
	".size u_leaf_loop,.-u_leaf_loop\n");
void u_tail(void), u_sys(void), u_leaf_loop(void);

static bool leaf(void *fn)
{
	pthread_mutex_lock(&ukp_lock);
	bool r = ukp_opt_leaf_locked((unsigned long)fn);
	pthread_mutex_unlock(&ukp_lock);
	return r;
}

UKT_CASE(leaf_callbacks_cannot_change_errno)
{
	ukp_init_once();
	UKT_ASSERT(leaf((void *)lean_pre));
	UKT_ASSERT(leaf((void *)u_leaf_loop));		/* a loop stays inside */
	UKT_ASSERT(!leaf((void *)getpid_pre));		/* calls libc */
	UKT_ASSERT(!leaf((void *)errno_pre));		/* __errno_location */
	UKT_ASSERT(!leaf((void *)tls_pre));		/* a store through %fs */
	UKT_ASSERT(!leaf((void *)u_tail));		/* a tail call */
	UKT_ASSERT(!leaf((void *)u_sys));		/* a system call */
	UKT_ASSERT(!leaf(NULL));
	UKT_ASSERT(!leaf((void *)((char *)lean_pre + 1)));	/* not a function's start */
	UKT_EQ(tls_pre(NULL, NULL) + errno_pre(NULL, NULL), 0);
}

/* what a leaf may write and read, implicit operands included (ftrace
 * saves only what its leaf callbacks write: ftrace.c body_code) */
__asm__(".text\n"
	".globl u_m_ret\n.type u_m_ret,@function\nu_m_ret: ret\n.size u_m_ret,.-u_m_ret\n"
	".globl u_m_mul\n.type u_m_mul,@function\n"
	"u_m_mul: mov %rdi, %rax\n mul %rsi\n ret\n.size u_m_mul,.-u_m_mul\n"
	".globl u_m_str\n.type u_m_str,@function\n"
	"u_m_str: rep stosb\n ret\n.size u_m_str,.-u_m_str\n"
	".globl u_m_cpuid\n.type u_m_cpuid,@function\n"
	"u_m_cpuid: push %rbx\n cpuid\n pop %rbx\n ret\n.size u_m_cpuid,.-u_m_cpuid\n"
	".globl u_m_mem\n.type u_m_mem,@function\n"
	"u_m_mem: mov 8(%rdx,%rcx,2), %r8d\n cmovz %r9, %r10\n ret\n.size u_m_mem,.-u_m_mem\n"
	/* decoded in a sweep as movabs to rax; run, it writes r8 */
	".globl u_m_midjump\n.type u_m_midjump,@function\n"
	"u_m_midjump: jmp 1f\n .byte 0x48, 0xb8\n1: mov $1, %r8d\n nop\n nop\n nop\n ret\n"
	".size u_m_midjump,.-u_m_midjump\n"
	/* tail calls as the last instruction: not leaves */
	".globl u_m_tailjmp\n.type u_m_tailjmp,@function\n"
	"u_m_tailjmp: mov %rdi, %rax\n jmp getpid\n.size u_m_tailjmp,.-u_m_tailjmp\n"
	".globl u_m_tailind\n.type u_m_tailind,@function\n"
	"u_m_tailind: mov %rdi, %rax\n jmp *%rax\n.size u_m_tailind,.-u_m_tailind\n"
	/* its symbol ends before its ret: it would run off its end */
	".globl u_m_falloff\n.type u_m_falloff,@function\n"
	"u_m_falloff: mov $1, %eax\n.size u_m_falloff,.-u_m_falloff\n mov $2, %r9d\n ret\n");
void u_m_ret(void), u_m_mul(void), u_m_str(void), u_m_cpuid(void), u_m_mem(void);
void u_m_midjump(void), u_m_falloff(void), u_m_tailjmp(void), u_m_tailind(void);

UKT_CASE(leaf_register_masks)
{
	static const struct { const char *name; void (*fn)(void); uint16_t w, r; } m[] = {
		{ "ret", u_m_ret, 0, 0 },
		{ "mul", u_m_mul, UKP_GPR(UKP_RAX) | UKP_GPR(UKP_RDX),
		  UKP_GPR(UKP_RAX) | UKP_GPR(UKP_RSI) | UKP_GPR(UKP_RDI) },
		{ "rep stosb", u_m_str, UKP_GPR(UKP_RCX) | UKP_GPR(UKP_RDI),
		  UKP_GPR(UKP_RAX) | UKP_GPR(UKP_RCX) | UKP_GPR(UKP_RDI) },
		{ "cpuid", u_m_cpuid, UKP_GPR(UKP_RAX) | UKP_GPR(UKP_RCX) | UKP_GPR(UKP_RDX) |
		  UKP_GPR(UKP_RBX), UKP_GPR(UKP_RAX) | UKP_GPR(UKP_RCX) | UKP_GPR(UKP_RBX) },
		{ "mov, cmov", u_m_mem, UKP_GPR(UKP_R8) | UKP_GPR(UKP_R10),
		  UKP_GPR(UKP_RCX) | UKP_GPR(UKP_RDX) | UKP_GPR(UKP_R9) },	/* r10: a write */
	};
	ukp_init_once();
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		uint16_t w = 0, r = 0;
		pthread_mutex_lock(&ukp_lock);
		bool ok = ukp_opt_leaf_regs_locked((unsigned long)m[i].fn, &w, &r);
		pthread_mutex_unlock(&ukp_lock);
		if (!ok)
			UKT_FAIL("%s: not a leaf", m[i].name);
		/* rsp: every ret reads and writes it */
		w &= (uint16_t)~UKP_GPR(UKP_RSP);
		r &= (uint16_t)~UKP_GPR(UKP_RSP);
		if (w != m[i].w || r != m[i].r)
			UKT_FAIL("%s: writes %#x reads %#x, want %#x and %#x", m[i].name,
				 w, r, m[i].w, m[i].r);
	}
	uint16_t w = 0, r = 0;
	pthread_mutex_lock(&ukp_lock);
	UKT_ASSERT(!ukp_opt_leaf_regs_locked((unsigned long)u_tail, &w, &r));
	/* the sweep cannot vouch for these: a branch into the middle of an
	 * instruction, code running past the symbol's end */
	UKT_ASSERT(!ukp_opt_leaf_regs_locked((unsigned long)u_m_midjump, &w, &r));
	UKT_ASSERT(!ukp_opt_leaf_regs_locked((unsigned long)u_m_falloff, &w, &r));
	/* a jump out as the last instruction (the sweep ends there too) */
	UKT_ASSERT(!ukp_opt_leaf_regs_locked((unsigned long)u_m_tailjmp, &w, &r));
	UKT_ASSERT(!ukp_opt_leaf_regs_locked((unsigned long)u_m_tailind, &w, &r));
	pthread_mutex_unlock(&ukp_lock);
}

/* xmm0 = x + 1 across the probed lea: lost if the detour dropped it */
__asm__(".text\n.globl u_xmm_live\n.type u_xmm_live,@function\n"
	"u_xmm_live: movq %rdi, %xmm0\n pcmpeqd %xmm1, %xmm1\n psubq %xmm1, %xmm0\n"
	".globl u_xmm_live_probe\nu_xmm_live_probe:\n"
	" lea 0x1000(%rdi), %rax\n movq %xmm0, %rdx\n sub %rdi, %rax\n"
	" lea -0x1000(%rax,%rdx), %rax\n ret\n.size u_xmm_live,.-u_xmm_live\n");
long u_xmm_live(long);
extern char u_xmm_live_probe[];

UKT_CASE(lean_handler_runs_optimized)
{
	long (*volatile fn)(long) = u_xmm_live;
	struct kprobe kp = { .addr = (void *)u_xmm_live_probe, .pre_handler = lean_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(kp.flags & KPROBE_FLAG_OPTIMIZED);
	long h0 = hits;
	for (long i = 0; i < 1000; i++)
		UKT_EQ(fn(i * 7919), i * 7919 + 1);
	UKT_EQ(hits - h0, 1000);
	unregister_kprobe(&kp);
	UKT_EQ(fn(41), 42);
	UKT_EQ(hits - h0, 1000);
}

static int dirty_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	__asm__ volatile("pcmpeqd %%xmm0, %%xmm0\n pcmpeqd %%xmm1, %%xmm1" ::: "xmm0", "xmm1");
	hits += 1000;
	return 0;
}

UKT_CASE(lean_trampoline_saves_for_a_vector_handler)
{
	long (*volatile fn)(long) = u_xmm_live;
	struct kprobe kl = { .addr = (void *)u_xmm_live_probe, .pre_handler = lean_pre };
	struct kprobe kd = { .addr = (void *)u_xmm_live_probe, .pre_handler = dirty_pre };
	UKT_EQ(register_kprobe(&kl), 0);
	UKT_EQ(register_kprobe(&kd), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(kl.flags & KPROBE_FLAG_OPTIMIZED);
	UKT_ASSERT(kd.flags & KPROBE_FLAG_OPTIMIZED);
	long h0 = hits;
	UKT_EQ(detour_sel_fast((unsigned long)u_xmm_live_probe), 0);
	UKT_EQ(fn(10), 11);
	UKT_EQ(hits - h0, 1001);
	UKT_EQ(ukp_opt_force_tramp((unsigned long)u_xmm_live_probe, ukp_opt_tramp_lean), 0);
	UKT_EQ(detour_sel_fast((unsigned long)u_xmm_live_probe), 0);
	for (long i = 0; i < 100; i++)
		UKT_EQ(fn(i * 31), i * 31 + 1);
	UKT_EQ(hits - h0, 101 * 1001);
	unregister_kprobe(&kd);
	/* one lean probe left: the detour's own fast path again */
	wait_for_kprobe_optimizer();
	UKT_ASSERT(kl.flags & KPROBE_FLAG_OPTIMIZED);
	UKT_EQ(detour_sel_fast((unsigned long)u_xmm_live_probe), 1);
	UKT_EQ(detour_tramp((unsigned long)u_xmm_live_probe), (uint64_t)(uintptr_t)ukp_opt_tramp_lean_leaf);
	for (long i = 0; i < 100; i++)
		UKT_EQ(fn(i * 37), i * 37 + 1);
	UKT_EQ(hits - h0, 101 * 1001 + 100);
	unregister_kprobe(&kl);
	UKT_EQ(fn(1), 2);
}

static volatile long *volatile bad_ptr = (volatile long *)16;

static int faulting_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	hits++;
	return (int)*bad_ptr;
}

static int take_fault(struct kprobe *p, struct pt_regs *r, int trapnr)
{
	(void)p; (void)r; (void)trapnr;
	hits += 100;
	return 1;
}

static void prog_segv(int sig, siginfo_t *si, void *ctx)
{
	(void)sig; (void)si; (void)ctx;
	__asm__ volatile("pcmpeqd %%xmm0, %%xmm0" ::: "xmm0");
	hits += 10000;
}

UKT_CASE(fault_in_lean_handler_keeps_vectors)
{
	long (*volatile fn)(long) = u_xmm_live;
	char why[160];
	UKT_EQ(ukp_opt_handler_check((void *)faulting_pre, why, sizeof(why)), 0);
	UKT_EQ(ukp_opt_handler_check((void *)take_fault, why, sizeof(why)), 0);

	/* the probe's fault_handler takes it */
	struct kprobe kp = { .addr = (void *)u_xmm_live_probe, .pre_handler = faulting_pre,
			     .fault_handler = take_fault };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(kp.flags & KPROBE_FLAG_OPTIMIZED);
	long h0 = hits;
	for (long i = 0; i < 20; i++)
		UKT_EQ(fn(i * 1000 + 7), i * 1000 + 8);
	UKT_EQ(hits - h0, 20 * 101);
	unregister_kprobe(&kp);

	/* nobody takes it: the program's handler runs and returns */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = prog_segv;
	sa.sa_flags = SA_SIGINFO;
	UKT_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
	struct kprobe kq = { .addr = (void *)u_xmm_live_probe, .pre_handler = faulting_pre };
	UKT_EQ(register_kprobe(&kq), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(kq.flags & KPROBE_FLAG_OPTIMIZED);
	h0 = hits;
	for (long i = 0; i < 20; i++)
		UKT_EQ(fn(i * 1000 + 9), i * 1000 + 10);
	UKT_EQ(hits - h0, 20 * 10001);
	unregister_kprobe(&kq);
}

/* errno set, then a fault: the probed code must see neither */
static int errno_faulting_pre(struct kprobe *p, struct pt_regs *r)
{
	errno = 77;
	return faulting_pre(p, r);
}

/*
 * A lean hit keeps no setjmp per handler: a fault taken by a handler's
 * fault_handler resumes on the trampoline's frame and goes on with the
 * next probe of the site, with errno and every register of the probed
 * code as they were.
 */
UKT_CASE(fault_in_lean_handler_goes_on_with_the_next)
{
	long (*volatile fn)(long) = u_xmm_live;
	char why[160];
	errno = 0;	/* binds __errno_location's PLT entry: a lazy one is not lean */
	if (ukp_opt_handler_check((void *)errno_faulting_pre, why, sizeof(why)))
		UKT_FAIL("errno_faulting_pre not lean: %s", why);
	UKT_EQ(ukp_opt_handler_check((void *)lean_pre, why, sizeof(why)), 0);

	struct kprobe ka = { .addr = (void *)u_xmm_live_probe, .pre_handler = errno_faulting_pre,
			     .fault_handler = take_fault };
	struct kprobe kb = { .addr = (void *)u_xmm_live_probe, .pre_handler = lean_pre };
	UKT_EQ(register_kprobe(&ka), 0);
	UKT_EQ(register_kprobe(&kb), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(ka.flags & KPROBE_FLAG_OPTIMIZED);
	UKT_EQ(ukp_opt_force_tramp((unsigned long)u_xmm_live_probe, ukp_opt_tramp_lean), 0);
	long h0 = hits;
	for (long i = 0; i < 50; i++) {
		errno = 5;
		UKT_EQ(fn(i * 977 + 3), i * 977 + 4);
		UKT_EQ(errno, 5);
	}
	UKT_EQ(hits - h0, 50 * 102);	/* a: 1 + 100 (fault taken), b: 1 */
	UKT_EQ(ka.nmissed, 0);
	UKT_EQ(kb.nmissed, 0);
	unregister_kprobe(&kb);
	unregister_kprobe(&ka);
	UKT_EQ(fn(41), 42);
	UKT_EQ(hits - h0, 50 * 102);
}

/* the probe point 16-aligned (u_xmm_live's are 8 off: no push before) */
__asm__(".text\n.globl u_pushed\n.type u_pushed,@function\n"
	"u_pushed: push %rbx\n"
	".globl u_pushed_probe\nu_pushed_probe:\n"
	" lea 0x1000(%rdi), %rax\n mov %rdi, %rbx\n sub %rbx, %rax\n"
	" lea -0xfff(%rax,%rbx), %rax\n pop %rbx\n ret\n.size u_pushed,.-u_pushed\n");
long u_pushed(long);
extern char u_pushed_probe[];

/* x + 1 from each probed function, and where its probe goes */
static const struct lean_target {
	const char *name;
	long (*fn)(long);
	void *at;
} lean_targets[] = {
	{ "u_xmm_live entry", u_xmm_live, (void *)u_xmm_live },
	{ "u_xmm_live mid", u_xmm_live, u_xmm_live_probe },
	{ "u_pushed mid (16-aligned)", u_pushed, u_pushed_probe },
};
#define NTARGETS (sizeof(lean_targets) / sizeof(lean_targets[0]))

/* one probe, optimised, on the trampoline wanted, with the list's flag,
 * its detour's entry going to the fast path wanted (detour_sel_fast) */
static void expect_one_lean(struct kprobe *kp, int lean1, void (*tramp)(void), int sel,
			    const char *name)
{
	wait_for_kprobe_optimizer();
	if (!(kp->flags & KPROBE_FLAG_OPTIMIZED))
		UKT_FAIL("%s: not optimised", name);
	UKT_EQ(plist_at((unsigned long)kp->addr)->lean1, lean1);
	if (detour_tramp((unsigned long)kp->addr) != (uint64_t)(uintptr_t)tramp)
		UKT_FAIL("%s: the detour calls %#lx, not %p", name,
			 (unsigned long)detour_tramp((unsigned long)kp->addr), (void *)tramp);
	int got = detour_sel_fast((unsigned long)kp->addr);
	if (got != sel)
		UKT_FAIL("%s: the detour's entry goes to %s, not %s", name,
			 got == 2 ? "the bare fast path" : got ? "the lean fast path" : "its call",
			 sel == 2 ? "the bare fast path" : sel ? "the lean fast path" : "its call");
}

static int sys_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	hits += syscall(-1) == -1;	/* ENOSYS into errno */
	return 0;
}

UKT_CASE(leaf_handler_runs_from_the_leaf_trampoline)
{
	static const struct {
		const char *name;
		int (*pre)(struct kprobe *, struct pt_regs *);
		int lean1;
		void (*tramp)(void);
		int sel;
		long per_call;
	} hs[] = {
		{ "lean_pre (a leaf)", lean_pre, 2, ukp_opt_tramp_lean_leaf, 1, 1 },
		{ "bare_pre (a leaf, no regs)", bare_pre, 2, ukp_opt_tramp_lean_leaf, 2, 1 },
		{ "cld_pre (a leaf, no regs, writes DF)", cld_pre, 2, ukp_opt_tramp_lean_leaf, 1, 1 },
		{ "getpid_pre (calls libc)", getpid_pre, 1, ukp_opt_tramp_lean, 1, 1 },
		{ "errno_pre (writes errno)", errno_pre, 1, ukp_opt_tramp_lean, 1, 0 },
		{ "sys_pre (a failing system call)", sys_pre, 1, ukp_opt_tramp_lean, 1, 1 },
	};
	char why[160];
	/* binds the PLT entries the handlers call: a lazy one is not lean */
	errno = 0;
	(void)syscall(SYS_getpid);
	(void)getpid();
	for (size_t h = 0; h < sizeof(hs) / sizeof(hs[0]); h++) {
		if (ukp_opt_handler_check((void *)hs[h].pre, why, sizeof(why)))
			UKT_FAIL("%s not lean: %s", hs[h].name, why);
		for (size_t k = 0; k < NTARGETS; k++) {
			const struct lean_target *tg = &lean_targets[k];
			struct kprobe kp = { .addr = tg->at, .pre_handler = hs[h].pre };
			UKT_EQ(register_kprobe(&kp), 0);
			expect_one_lean(&kp, hs[h].lean1, hs[h].tramp, hs[h].sel, tg->name);
			long h0 = hits;
			for (long i = 0; i < 1000; i++) {
				errno = (int)(i + 1000);
				UKT_EQ(tg->fn(i * 7919), i * 7919 + 1);
				if (errno != i + 1000)
					UKT_FAIL("%s at %s: errno %d after the call, %ld before",
						 hs[h].name, tg->name, errno, i + 1000);
			}
			UKT_EQ(hits - h0, 1000 * hs[h].per_call);
			UKT_EQ(kp.nmissed, 0);
			unregister_kprobe(&kp);
		}
	}
}

static void prog_segv_errno(int sig, siginfo_t *si, void *ctx)
{
	(void)sig; (void)si; (void)ctx;
	errno = 999;
	hits += 10000;
}

UKT_CASE(fault_in_one_lean_handler_keeps_errno)
{
	static const struct {
		const char *name;
		int (*pre)(struct kprobe *, struct pt_regs *);
		int lean1;
		void (*tramp)(void);
		int sel;
	} hs[] = {
		{ "faulting_pre (a leaf, no regs: bare)", faulting_pre, 2,
		  ukp_opt_tramp_lean_leaf, 2 },
		{ "errno_faulting_pre (errno 77, then the fault)", errno_faulting_pre, 1,
		  ukp_opt_tramp_lean, 1 },
	};
	char why[160];
	errno = 0;	/* binds __errno_location's PLT entry */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = prog_segv_errno;
	sa.sa_flags = SA_SIGINFO;
	UKT_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
	for (size_t h = 0; h < sizeof(hs) / sizeof(hs[0]); h++) {
		if (ukp_opt_handler_check((void *)hs[h].pre, why, sizeof(why)))
			UKT_FAIL("%s not lean: %s", hs[h].name, why);
		for (size_t k = 0; k < NTARGETS; k++) {
			const struct lean_target *tg = &lean_targets[k];
			for (int taken = 0; taken < 2; taken++) {
				struct kprobe kp = { .addr = tg->at, .pre_handler = hs[h].pre,
						     .fault_handler = taken ? take_fault : NULL };
				UKT_EQ(register_kprobe(&kp), 0);
				expect_one_lean(&kp, hs[h].lean1, hs[h].tramp, hs[h].sel, tg->name);
				long h0 = hits;
				for (long i = 0; i < 20; i++) {
					errno = (int)(i + 3000);
					UKT_EQ(tg->fn(i * 1000 + 7), i * 1000 + 8);
					if (errno != i + 3000)
						UKT_FAIL("%s at %s, fault %s: errno %d after "
							 "the call, %ld before", hs[h].name,
							 tg->name, taken ? "taken" : "to the program",
							 errno, i + 3000);
				}
				UKT_EQ(hits - h0, 20 * (taken ? 101 : 10001));
				UKT_EQ(kp.nmissed, 0);
				unregister_kprobe(&kp);
			}
		}
	}
}

UKT_CASE(no_membarrier_takes_the_trampolines_call)
{
	ukt_deny_syscall(SYS_membarrier, ENOSYS);	/* everything else allowed */
	ukp_init_once();
	UKT_EQ(ukp_fast_readers, 0);
	UKT_ASSERT(atomic_load(&ukp_gp) & UKP_GP_NOFAST);
	long (*volatile fn)(long) = u_xmm_live;
	struct kprobe kp = { .addr = (void *)u_xmm_live_probe, .pre_handler = lean_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(kp.flags & KPROBE_FLAG_OPTIMIZED);
	UKT_EQ(plist_at((unsigned long)u_xmm_live_probe)->lean1, 2);
	UKT_EQ(detour_sel_fast((unsigned long)u_xmm_live_probe), 0);
	long h0 = hits;
	for (long i = 0; i < 1000; i++)
		UKT_EQ(fn(i * 13), i * 13 + 1);
	UKT_EQ(hits - h0, 1000);
	UKT_EQ(kp.nmissed, 0);
	unregister_kprobe(&kp);
}

static void lean_post(struct kprobe *p, struct pt_regs *r, unsigned long f)
{
	(void)p; (void)r; (void)f;
	hits++;
}

static void dirty_post(struct kprobe *p, struct pt_regs *r, unsigned long f)
{
	(void)f;
	dirty_pre(p, r);
}

static int dirty_fault(struct kprobe *p, struct pt_regs *r, int trapnr)
{
	(void)trapnr;
	return dirty_pre(p, r);
}

UKT_CASE(post_handlers_lean_or_not)
{
	long (*volatile fn)(long) = u_xmm_live;
	struct kprobe a = { .addr = (void *)u_xmm_live_probe, .post_handler = lean_post };
	struct kprobe b = { .addr = (void *)u_xmm_live_probe, .pre_handler = dirty_pre };
	UKT_EQ(register_kprobe(&a), 0);
	UKT_EQ(plist_at((unsigned long)u_xmm_live_probe)->post_lean, true);
	long h0 = hits;
	for (long i = 0; i < 100; i++)
		UKT_EQ(fn(i * 3), i * 3 + 1);
	UKT_EQ(hits - h0, 100);
	/* a vector pre_handler beside it: the post_handlers still are lean */
	UKT_EQ(register_kprobe(&b), 0);
	UKT_EQ(plist_at((unsigned long)u_xmm_live_probe)->post_lean, true);
	UKT_EQ(fn(5), 6);
	UKT_EQ(hits - h0, 1100 + 1);
	unregister_kprobe(&b);
	unregister_kprobe(&a);
	struct kprobe c = { .addr = (void *)u_xmm_live_probe, .post_handler = dirty_post };
	UKT_EQ(register_kprobe(&c), 0);
	UKT_EQ(plist_at((unsigned long)u_xmm_live_probe)->post_lean, false);
	for (long i = 0; i < 100; i++)
		UKT_EQ(fn(i * 3), i * 3 + 1);
	unregister_kprobe(&c);
	struct kprobe d = { .addr = (void *)u_xmm_live_probe, .post_handler = lean_post,
			    .fault_handler = dirty_fault };
	UKT_EQ(register_kprobe(&d), 0);
	UKT_EQ(plist_at((unsigned long)u_xmm_live_probe)->post_lean, false);
	unregister_kprobe(&d);
}

/* u_flags_live: CF from a compare read after its probe; u_flags_dead:
 * the compare after it (each returns a < b, unsigned) */
__asm__(".text\n"
	".globl u_flags_live\n.type u_flags_live,@function\n"
	"u_flags_live: cmp %rsi, %rdi\n"
	".globl u_flags_live_probe\nu_flags_live_probe: nopl 0x0(%rax,%rax,1)\n"
	" setb %al\n movzbl %al, %eax\n ret\n.size u_flags_live,.-u_flags_live\n"
	".globl u_flags_dead\n.type u_flags_dead,@function\n"
	"u_flags_dead: nopl 0x0(%rax,%rax,1)\n cmp %rsi, %rdi\n"
	" setb %al\n movzbl %al, %eax\n ret\n.size u_flags_dead,.-u_flags_dead\n");
long u_flags_live(long a, long b), u_flags_dead(long a, long b);
extern const char u_flags_live_probe[];

/* a handler that leaves CF set and ZF clear */
static int cf_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	hits++;
	__asm__ volatile("stc" ::: "cc");
	return 0;
}

UKT_CASE(status_flags_put_back_only_where_live)
{
	static const struct {
		const char *name;
		long (*fn)(long, long);
		const void *at;
		bool dead;
	} tg[] = {
		{ "u_flags_live", u_flags_live, u_flags_live_probe, false },
		{ "u_flags_dead", u_flags_dead, (const void *)u_flags_dead, true },
	};
	int (*pres[])(struct kprobe *, struct pt_regs *) = { cf_pre, lean_pre };
	for (size_t k = 0; k < 2; k++) {
		for (size_t h = 0; h < 2; h++) {
			struct kprobe kp = { .addr = (void *)tg[k].at, .pre_handler = pres[h] };
			UKT_EQ(register_kprobe(&kp), 0);
			wait_for_kprobe_optimizer();
			UKT_ASSERT(kp.flags & KPROBE_FLAG_OPTIMIZED);
			UKT_EQ(detour_sel_fast((unsigned long)kp.addr), h ? 1 : 2);
			/* the fast paths' exits in the detour's copy: a jmp over
			 * the flags' restore only where none is live */
			uint8_t *e;
			detour_header((unsigned long)kp.addr, &e);
			const uint8_t *fb = detour_tpl(e) + (ukp_lean_tpl_fb - ukp_lean_tpl);
			const uint8_t *bfb = detour_tpl(e) + (ukp_lean_tpl_bare_fb - ukp_lean_tpl);
			if ((fb[0] == 0xeb) != tg[k].dead || (bfb[0] == 0xeb) != tg[k].dead)
				UKT_FAIL("%s: the flags are %sput back", tg[k].name,
					 tg[k].dead ? "" : "not ");
			long h0 = hits;
			for (long i = 0; i < 200; i++) {
				long a = i * 7919 - 700000, b = 12345 - i * 31;
				if (tg[k].fn(a, b) != ((unsigned long)a < (unsigned long)b))
					UKT_FAIL("%s: wrong answer for %ld, %ld", tg[k].name, a, b);
			}
			UKT_EQ(hits - h0, 200);
			unregister_kprobe(&kp);
		}
	}
}

/* ---- fork children and the detours' words ---- */
long u_fork(long x);
__asm__(".text\n.p2align 4\n.globl u_fork\n.type u_fork,@function\n"
	"u_fork: nopl 0x0(%rax,%rax,1)\n lea 1(%rdi),%rax\n ret\n.size u_fork,.-u_fork\n");

UKT_CASE(shared_fork_child_leaves_the_parents_detour_alone)
{
	long (*volatile fn)(long) = u_fork;
	struct kprobe kp = { .addr = (void *)u_fork, .pre_handler = bare_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(kp.flags & KPROBE_FLAG_OPTIMIZED);
	UKT_EQ(fn(1), 2);
	UKT_EQ(detour_sel_fast((unsigned long)u_fork), 2);
	/* no descriptor left for the child's own slot memory: it shares */
	struct rlimit old, rl;
	UKT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
	rl = old;
	rl.rlim_cur = 64;
	UKT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	int fds[64], n = 0;
	while (n < 64 && (fds[n] = dup(2)) >= 0)
		n++;
	pid_t pid = fork();
	UKT_ASSERT(pid >= 0);
	if (pid == 0) {
		for (int i = 0; i < n; i++)
			close(fds[i]);
		unregister_kprobe(&kp);	/* this process's list only */
		_exit(0);
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
	UKT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
	int st;
	UKT_EQ(waitpid(pid, &st, 0), pid);
	UKT_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	long h0 = hits;
	UKT_EQ(fn(1), 2);
	UKT_EQ(hits - h0, 1);
	UKT_EQ(detour_sel_fast((unsigned long)u_fork), 2);	/* as the parent left it */
	unregister_kprobe(&kp);
}

static atomic_int churn_stop;
static void *churn(void *a)
{
	(void)a;
	static struct kprobe k2;
	while (!atomic_load(&churn_stop)) {
		memset(&k2, 0, sizeof(k2));
		k2.addr = (void *)u_fork;
		k2.pre_handler = bare_pre;
		if (register_kprobe(&k2) == 0)
			unregister_kprobe(&k2);
	}
	return NULL;
}

UKT_CASE(fork_child_detour_words_are_its_own)
{
	struct kprobe kp = { .addr = (void *)u_fork, .pre_handler = bare_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(kp.flags & KPROBE_FLAG_OPTIMIZED);
	const uint8_t *h = ukp_opt_detour_header((unsigned long)u_fork);
	UKT_ASSERT(h);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, churn, NULL), 0);
	int bad = 0, n;
	for (n = 0; n < 200 && !bad; n++) {
		pid_t pid = fork();
		if (pid == 0) {
			/* the parent changes the list meanwhile: this process's
			 * copy of the detour must name this process's list */
			uint64_t w;
			memcpy(&w, h + UKP_ARCH_HDR_LIST, 8);
			struct ukp_site *s = ukp_site_lookup((unsigned long)u_fork);
			_exit(w == (uint64_t)(uintptr_t)atomic_load(&s->probes) ? 0 : 1);
		}
		int st;
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			bad = 1;
	}
	atomic_store(&churn_stop, 1);
	pthread_join(th, NULL);
	unregister_kprobe(&kp);
	if (bad)
		UKT_FAIL("fork %d: the child's detour list word is not its site's list", n);
}
