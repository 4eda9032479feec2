/* SPDX-License-Identifier: MIT */
/*
 * An optimised probe's hit on a stack that must grow: the program's own
 * SIGSEGV handler (on an alternate stack) opens a guard page below sp and
 * returns, as a program growing its stacks by hand does.  Whichever store
 * of the hit path faults - the detour's call of its trampoline, the
 * register save of the detour's own fast path, the push of the handler's
 * call in that path or in the shared lean trampoline - the program's
 * handler sees one fault, the hit goes on where it stopped, and the
 * probed function returns its value with the probe counted once.  A fault
 * shown at the probe point shows the probe point's sp.
 */
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include "ukt.h"

long sf_chain(long x);	/* x + 3 */
__asm__(".text\n.p2align 4\n.globl sf_chain\n.type sf_chain,@function\n"
	"sf_chain: mov %rdi,%rax\n add $1,%rax\n add $2,%rax\n ret\n.size sf_chain,.-sf_chain\n");

static volatile long hits;
static volatile double vd = 1.5;
static int leaf_pre(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; hits++; return 0; }
static int vec_pre(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; vd *= 1.25; hits++; return 0; }

static char *guard;	/* PROT_NONE until the program's SIGSEGV handler opens it */
static volatile int guard_faults;
static volatile unsigned long guard_ip, guard_sp;

static void guard_segv(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	(void)sig;
	if ((char *)si->si_addr < guard || (char *)si->si_addr >= guard + 4096) {
		char msg[200];
		int n = snprintf(msg, sizeof(msg), "  stray fault at %p ip %#llx; first guard fault ip %#lx sp %#lx\n",
				 si->si_addr, (unsigned long long)uc->uc_mcontext.gregs[REG_RIP],
				 guard_ip, guard_sp);
		(void)!write(2, msg, (size_t)n);
		_exit(7);
	}
	guard_faults++;
	guard_ip = (unsigned long)uc->uc_mcontext.gregs[REG_RIP];
	guard_sp = (unsigned long)uc->uc_mcontext.gregs[REG_RSP];
	mprotect(guard, 4096, PROT_READ | PROT_WRITE);	/* the stack grows */
}

/* before the probes: ukprobes' own handler goes in over it at the next
 * registration, and chains to it */
static void install_guard_handler(void)
{
	static char alt[65536];
	stack_t ss = { .ss_sp = alt, .ss_size = sizeof(alt) };
	UKT_EQ(sigaltstack(&ss, NULL), 0);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = guard_segv;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	UKT_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
}

/* sf_chain(2) called with its return address at guard end + off - 8,
 * once the probe is optimised */
static void call_on_guarded_stack(unsigned off)
{
	char *m = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(m != MAP_FAILED);
	guard = m + 4096;
	char *top = m + 2 * 4096 + off;
	long h0 = hits;
	UKT_EQ(sf_chain(1), 4);
	UKT_EQ(hits - h0, 1);
	UKT_EQ(mprotect(guard, 4096, PROT_NONE), 0);
	long v, x = 2;
	__asm__ volatile("mov %%rsp,%%rbx; mov %[sp],%%rsp; call *%[fn]; mov %%rbx,%%rsp"
			 : "=&a"(v), "+D"(x) : [fn] "r"(sf_chain), [sp] "r"(top)
			 : "rbx", "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "memory", "cc");
	UKT_EQ(v, 5);
	UKT_EQ(guard_faults, 1);
	UKT_EQ(hits - h0, 2);
	if (guard_ip == (unsigned long)sf_chain)	/* shown the probe point: its sp too */
		UKT_EQ(guard_sp, (unsigned long)(top - 8));
	UKT_EQ(sf_chain(3), 6);
	UKT_EQ(hits - h0, 3);
	munmap(m, 3 * 4096);
}

static void run(int (*pre)(struct kprobe *, struct pt_regs *), unsigned off)
{
	install_guard_handler();
	struct kprobe kp = { .addr = (void *)sf_chain, .pre_handler = pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	call_on_guarded_stack(off);
	UKT_EQ(kp.nmissed, 0);
	unregister_kprobe(&kp);
}

/* entry sp = guard end + 160: the trampoline call's slot (sp - 136) is
 * mapped, the fast path's pt_regs stores (down to sp - 304) fault */
UKT_CASE(stack_fault_in_the_detours_fast_path) { run(leaf_pre, 168); }

/* pt_regs at guard end + 8: only the push of the handler's call faults */
UKT_CASE(stack_fault_at_the_handlers_call) { run(leaf_pre, 8 + 304 + 8); }

/* a vector-using handler: the detour calls its trampoline, whose push
 * (sp - 136) faults, shown at the probe point with its sp */
UKT_CASE(stack_fault_at_the_detours_call) { run(vec_pre, 8 + 128); }

/* The shared lean trampoline (a return probe's detour, called through
 * its header, with one lean kprobe left): the push of the handler's call */
static int ret_handler(struct kretprobe_instance *ri, struct pt_regs *r) { (void)ri; (void)r; return 0; }

UKT_CASE(stack_fault_at_the_handlers_call_shared_trampoline)
{
	install_guard_handler();
	struct kretprobe rp = { .kp.addr = (void *)sf_chain, .handler = ret_handler };
	UKT_EQ(register_kretprobe(&rp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&rp.kp);	/* the detour: the return probes' variant */
	struct kprobe kp = { .addr = (void *)sf_chain, .pre_handler = leaf_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	unregister_kretprobe(&rp);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	call_on_guarded_stack(8 + 304 + 8);
	UKT_EQ(kp.nmissed, 0);
	unregister_kprobe(&kp);
}
