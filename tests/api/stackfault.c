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
 * shown at the probe point shows the probe point's sp.  That fault is
 * the program's, not the handler's: the program's handler may read
 * memory that faults on purpose (its own fault, not the probe's
 * fault_handler's), call the probed function (a nested hit: nmissed), or
 * longjmp away (the hit is left).  And a fault of a nested hit's path,
 * inside a handler that calls a probed function on a stack that runs
 * out, is that handler's: its fault_handler takes it.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>
#include "ukt.h"

long sf_chain(long x);	/* x + 3 */
__asm__(".text\n.p2align 4\n.globl sf_chain\n.type sf_chain,@function\n"
	"sf_chain: mov %rdi,%rax\n add $1,%rax\n add $2,%rax\n ret\n.size sf_chain,.-sf_chain\n");

/* x + 3; with bit 8 set, itself on the low byte: a call inside a call */
long sf_twice(long x);
__asm__(".text\n.p2align 4\n.globl sf_twice\n.type sf_twice,@function\n"
	"sf_twice: test $0x100,%edi\n jz 1f\n and $0xff,%edi\n sub $8,%rsp\n call sf_twice\n"
	" add $8,%rsp\n ret\n1: lea 3(%rdi),%rax\n ret\n.size sf_twice,.-sf_twice\n");

static volatile long hits;
static volatile double vd = 1.5;
static int leaf_pre(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; hits++; return 0; }
static int vec_pre(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; vd *= 1.25; hits++; return 0; }

static char *guard;	/* PROT_NONE until the program's SIGSEGV handler opens it */
static volatile int guard_faults;
static volatile unsigned long guard_ip, guard_sp;
/* what the program's handler does after opening the guard page */
enum { OPEN, LEAVE, CALL, READ };
static volatile int mode = OPEN;
static sigjmp_buf out_jb, read_jb;
static volatile int in_read, read_faults;
static long (*volatile chain_fn)(long) = sf_chain;
static volatile long nested_v;
static volatile int *volatile bad_ptr = (volatile int *)16;

static void guard_segv(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	(void)sig;
	if (in_read) {			/* the program's own read that faults */
		read_faults++;
		siglongjmp(read_jb, 1);
	}
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
	if (mode == LEAVE)
		siglongjmp(out_jb, 1);
	if (mode == CALL)
		nested_v = chain_fn(10);
	if (mode == READ && !sigsetjmp(read_jb, 0)) {
		in_read = 1;
		(void)*bad_ptr;
	}
	in_read = 0;
}

static char *stack_map;	/* the guarded stack: a page, the guard, a page */

/* Before the probes: ukprobes' own handler goes in over it at the next
 * registration, and chains to it.  The alternate stack is mapped next to
 * the guarded stack, as a thread's would be: within reach of a fault
 * taken for the handler's by its stack address. */
static void install_guard_handler(void)
{
	stack_map = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(stack_map != MAP_FAILED);
	guard = stack_map + 4096;
	char *alt = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(alt != MAP_FAILED);
	stack_t ss = { .ss_sp = alt, .ss_size = 65536 };
	UKT_EQ(sigaltstack(&ss, NULL), 0);
	UKT_EQ(ukt_on_signal_info(SIGSEGV, guard_segv, SA_ONSTACK | SA_NODEFER), 0);
}

/* fn(2) with its return address at guard end + off - 8 */
static __attribute__((noinline)) long guarded_call_fn(long (*fn)(long), unsigned off)
{
	char *top = stack_map + 2 * 4096 + off;
	long v, x = 2;
	UKT_EQ(mprotect(guard, 4096, PROT_NONE), 0);
	__asm__ volatile("mov %%rsp,%%rbx; mov %[sp],%%rsp; call *%[fn]; mov %%rbx,%%rsp"
			 : "=&a"(v), "+D"(x) : [fn] "r"(fn), [sp] "r"(top)
			 : "rbx", "rcx", "rdx", "rsi", "r8", "r9", "r10", "r11", "memory", "cc");
	return v;
}

static long guarded_call(unsigned off)
{
	return guarded_call_fn(sf_chain, off);
}

/* the same once the probe is optimised: one fault, the hit goes on */
static void call_on_guarded_stack(unsigned off)
{
	char *top = stack_map + 2 * 4096 + off;
	long h0 = hits;
	UKT_EQ(sf_chain(1), 4);
	UKT_EQ(hits - h0, 1);
	UKT_EQ(guarded_call(off), 5);
	UKT_EQ(guard_faults, 1);
	UKT_EQ(hits - h0, 2);
	if (guard_ip == (unsigned long)sf_chain)	/* shown the probe point: its sp too */
		UKT_EQ(guard_sp, (unsigned long)(top - 8));
	UKT_EQ(sf_chain(3), 6);
	UKT_EQ(hits - h0, 3);
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

/* ---- the program's handler of the handler call's push fault -------------- */

#define PUSH_OFF (8 + 304 + 8)	/* pt_regs at guard end + 8: only that push faults */

static volatile int fh_calls, fh_ret;
static int fh(struct kprobe *p, struct pt_regs *r, int trapnr)
{
	(void)p; (void)r; (void)trapnr;
	fh_calls++;
	return fh_ret;
}

static struct kprobe kp_fh;

static void arm_with_fault_handler(int ret)
{
	fh_ret = ret;
	install_guard_handler();
	kp_fh = (struct kprobe){ .addr = (void *)sf_chain, .pre_handler = leaf_pre, .fault_handler = fh };
	UKT_EQ(register_kprobe(&kp_fh), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp_fh);
	UKT_EQ(sf_chain(1), 4);
}

static void program_reads_what_faults(int fh_takes)
{
	arm_with_fault_handler(fh_takes);
	mode = READ;
	long h0 = hits;
	UKT_EQ(guarded_call(PUSH_OFF), 5);
	UKT_EQ(guard_faults, 1);
	UKT_EQ(read_faults, 1);		/* the program's, back to it */
	UKT_EQ(fh_calls, 0);		/* not the handler's */
	UKT_EQ(hits - h0, 1);
	mode = OPEN;
	UKT_EQ(sf_chain(3), 6);
	unregister_kprobe(&kp_fh);
}

UKT_CASE(program_handler_reads_what_faults) { program_reads_what_faults(0); }
UKT_CASE(program_handler_reads_what_faults_fault_handler_takes_all) { program_reads_what_faults(1); }

UKT_CASE(program_handler_calls_the_probed_function)
{
	arm_with_fault_handler(0);
	mode = CALL;
	long h0 = hits;
	UKT_EQ(guarded_call(PUSH_OFF), 5);
	UKT_EQ(nested_v, 13);
	UKT_EQ(guard_faults, 1);
	UKT_EQ(hits - h0, 1);
	UKT_EQ(kp_fh.nmissed, 1);	/* inside the hit: missed */
	UKT_EQ(fh_calls, 0);
	unregister_kprobe(&kp_fh);
}

UKT_CASE(program_handler_longjmps_out_of_the_hit)
{
	arm_with_fault_handler(0);
	mode = LEAVE;
	long h0 = hits;
	if (!sigsetjmp(out_jb, 1))
		guarded_call(PUSH_OFF);
	UKT_EQ(guard_faults, 1);
	UKT_EQ(hits - h0, 0);
	mode = OPEN;
	UKT_EQ(sf_chain(3), 6);		/* the thread is outside the hit */
	UKT_EQ(hits - h0, 1);
	UKT_EQ(kp_fh.nmissed, 0);
	ukt_unregister_ends(&kp_fh);	/* must not wait forever */
}

/* ---- a handler's nested hit on a stack that runs out ---------------------- */

long sf_inner(long x);	/* x + 1 */
__asm__(".text\n.p2align 4\n.globl sf_inner\n.type sf_inner,@function\n"
	"sf_inner: mov %rdi,%rax\n add $1,%rax\n nop\n nop\n nop\n ret\n.size sf_inner,.-sf_inner\n");
static volatile long inner_v;

static int calling_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	hits++;
	inner_v = sf_inner(7);
	return 0;
}

/*
 * The handler calls a probed function with the stack's end somewhere
 * below, at every 16 bytes of a range of depths, each in its own
 * process without a program SIGSEGV handler: a fault wherever it lands
 * in the handler's work - the nested hit's detour among them - is the
 * handler's, which its fault_handler takes (the hit goes on: the probed
 * function returns its value); one in the hit's own path before the
 * handler would kill the process, so the range starts where that path's
 * frame is mapped.  Exit 10: a fault taken, 0: none.
 */
static int depth_child(unsigned off)
{
	static char alt[65536];
	stack_t ss = { .ss_sp = alt, .ss_size = sizeof(alt) };
	if (sigaltstack(&ss, NULL))
		return 1;
	stack_map = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	guard = stack_map + 4096;
	struct kprobe in = { .addr = (void *)sf_inner, .pre_handler = leaf_pre };
	struct kprobe out = { .addr = (void *)sf_chain, .pre_handler = calling_pre,
			      .fault_handler = fh };
	fh_ret = 1;
	if (register_kprobe(&in) || register_kprobe(&out))
		return 2;
	wait_for_kprobe_optimizer();
	if (!(in.flags & KPROBE_FLAG_OPTIMIZED) || !(out.flags & KPROBE_FLAG_OPTIMIZED))
		return 3;
	if (sf_chain(1) != 4 || inner_v != 8)
		return 4;
	if (guarded_call(off) != 5)
		return 5;
	return fh_calls ? 10 : 0;
}

UKT_CASE_T(stack_fault_in_a_handlers_nested_hit_is_the_handlers, 60)
{
	int taken = 0;
	for (unsigned off = PUSH_OFF + 16; off < 1400; off += 16) {
		pid_t pid = fork();
		UKT_ASSERT(pid >= 0);
		if (pid == 0)
			_exit(depth_child(off));
		int st;
		UKT_EQ(waitpid(pid, &st, 0), pid);
		if (!WIFEXITED(st))
			UKT_FAIL("stack end %u bytes below the call: killed by signal %d", off,
				 WIFSIGNALED(st) ? WTERMSIG(st) : 0);
		if (WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 10)
			UKT_FAIL("stack end %u bytes below the call: exit %d", off, WEXITSTATUS(st));
		taken += WEXITSTATUS(st) == 10;
	}
	UKT_ASSERT(taken > 0);
}

/* ---- the C hit paths on a stack that runs out ---------------------------- */

static void open_guard_segv(int sig, siginfo_t *si, void *ctx)
{
	(void)sig; (void)ctx;
	if ((char *)si->si_addr < guard || (char *)si->si_addr >= guard + 4096)
		_exit(40);	/* a fault elsewhere: a jump through a stale record */
	mprotect(guard, 4096, PROT_READ | PROT_WRITE);
}

/* child(off, arg) in a child process for the stack's end at every 8
 * bytes of depth below the guarded call: each must exit 0 */
static void each_depth(int (*child)(unsigned off, const void *arg), const void *arg)
{
	for (unsigned off = 136; off < 4096; off += 8) {
		pid_t pid = fork();
		UKT_ASSERT(pid >= 0);
		if (pid == 0)
			_exit(child(off, arg));
		int st;
		UKT_EQ(waitpid(pid, &st, 0), pid);
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			UKT_FAIL("stack end %u bytes below the call: %s %d", off,
				 WIFEXITED(st) ? "exit" : "signal",
				 WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	}
}

static int plain_child(unsigned off, const void *arg)
{
	(void)arg;
	return guarded_call(off) == 5 ? 0 : 5;
}

/*
 * The stack's end at every 8 bytes of depth below an optimised probe
 * whose hit goes through ukprobes' C dispatch (a vector-using
 * pre_handler: the dispatch and its per-handler recovery point), each
 * depth in a forked child, the program's handler opening the guard page:
 * the probed function returns its value and the program never runs off
 * into a recovery point not yet set (which jumped to 0).  A fault in
 * ukprobes' code around a handler's call may still cost that hit its
 * handler (docs/limitations.md): not checked here.
 */
UKT_CASE_T(stack_fault_in_the_c_dispatch_at_every_depth, 120)
{
	install_guard_handler();
	UKT_EQ(ukt_on_signal_info(SIGSEGV, open_guard_segv, SA_ONSTACK | SA_NODEFER), 0);
	struct kprobe kp = { .addr = (void *)sf_chain, .pre_handler = vec_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	long h0 = hits;
	UKT_EQ(sf_chain(1), 4);
	UKT_ASSERT(hits > h0);
	each_depth(plain_child, NULL);
	unregister_kprobe(&kp);
}

/* ---- a kretprobe's entry on a stack that runs out ------------------------ */

static volatile long entries, returns;
/* the entry handlers use stack of their own, so that some depths fault
 * inside them (where the instance is kept: the return is probed) */
static int count_entry(struct kretprobe_instance *ri, struct pt_regs *r)
{
	(void)ri; (void)r;
	volatile char pad[512];
	pad[0] = pad[511] = 1;
	entries++;
	return 0;
}

/* not lean: the hit goes through the C dispatch */
static int count_entry_vec(struct kretprobe_instance *ri, struct pt_regs *r)
{
	(void)ri; (void)r;
	volatile char pad[512];
	pad[0] = pad[511] = 1;
	vd *= 1.25;
	entries++;
	return 0;
}

static int count_return(struct kretprobe_instance *ri, struct pt_regs *r)
{
	(void)ri; (void)r;
	returns++;
	return 0;
}

static void open_guard_leave(int sig, siginfo_t *si, void *ctx)
{
	open_guard_segv(sig, si, ctx);
	siglongjmp(out_jb, 1);
}

/* in a child: the guarded call, then three calls that must each take the
 * one instance there is, and a call inside a call, whose inner one finds
 * none (given back twice, the free stack would serve it again) */
static int kret_child(unsigned off, const void *arg)
{
	const struct kretprobe *rp = arg;
	if (!sigsetjmp(out_jb, 1) && guarded_call_fn(sf_twice, off) != 5)
		return 5;	/* (the program's handler may longjmp here) */
	long e0 = entries, r0 = returns, m0 = rp->nmissed;
	for (long x = 0; x < 3; x++)
		if (sf_twice(x) != x + 3)
			return 6;
	if (rp->nmissed != m0)
		return 7;	/* the instance was lost */
	if (entries - e0 != 3 || returns - r0 != 3)
		return 8;
	if (sf_twice(0x105) != 8)
		return 9;
	if (rp->nmissed != m0 + 1)
		return 10;	/* the instance was given back twice */
	if (entries - e0 != 4 || returns - r0 != 4)
		return 11;
	return 0;
}

/*
 * A kretprobe with an entry_handler and one instance, the stack's end at
 * every 8 bytes of depth below its optimised probe, each depth in a
 * forked child: wherever the fault lands in the entry's path - before
 * the entry_handler's recovery point, in it, or after - and whether the
 * program's handler returns or longjmps out of the hit, the instance is
 * never lost: three calls after it each run the entry and return
 * handlers, with nothing missed.
 */
static void kret_at_every_depth(bool lean, bool leave)
{
	install_guard_handler();
	UKT_EQ(ukt_on_signal_info(SIGSEGV, leave ? open_guard_leave : open_guard_segv,
				  SA_ONSTACK | SA_NODEFER), 0);
	struct kretprobe rp = { .kp.addr = (void *)sf_twice, .handler = count_return,
				.entry_handler = lean ? count_entry : count_entry_vec,
				.maxactive = 1 };
	UKT_EQ(register_kretprobe(&rp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&rp.kp);
	UKT_EQ(sf_twice(1), 4);
	UKT_EQ(entries, 1);
	UKT_EQ(returns, 1);
	each_depth(kret_child, &rp);
	unregister_kretprobe(&rp);
}

UKT_CASE_T(stack_fault_in_a_kretprobe_entry_at_every_depth, 120) { kret_at_every_depth(true, false); }
UKT_CASE_T(stack_fault_in_a_kretprobe_entry_left_by_longjmp, 120) { kret_at_every_depth(true, true); }
UKT_CASE_T(stack_fault_in_a_kretprobe_entry_c_dispatch, 120) { kret_at_every_depth(false, false); }
UKT_CASE_T(stack_fault_in_a_kretprobe_entry_c_dispatch_left_by_longjmp, 120)
{
	kret_at_every_depth(false, true);
}
