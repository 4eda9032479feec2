/*
 * kretprobes (kprobes.txt 1.3 and 4.3) as users rely on them.
 *
 * Most cases run twice: with the entry probe hit through a breakpoint
 * (the optimization knob off while the probe is registered) and through
 * a jump (after wait_for_kprobe_optimizer(), KPROBE_FLAG_OPTIMIZED
 * checked), since the entry is where the return address is replaced.
 *
 * Cases:
 *   int_and_pointer_results_seen_by_handler_and_caller
 *                         regs_return_value() is what the caller gets;
 *                         regs->ip is ri->ret_addr, regs->sp the caller's
 *   two_register_results_seen_and_received     rdx:rax (struct, __int128)
 *   errno_set_by_probed_function_survives_handler   handlers that set errno
 *                         at entry and return change nothing the caller sees
 *   ri_data_is_aligned_for_a_struct            as kprobes.txt's sample uses it
 *   fp_results_survive_handler_doing_fp_work   double, float, long double,
 *                         {double,double}, complex long double returned
 *                         bit-exact while the handler runs snprintf of
 *                         doubles, x87 arithmetic and fesetround
 *   fp_results_survive_lean_and_libc_calling_handlers  the same with a
 *                         handler that only calls memset/memcpy/strlen
 *                         (vector code inside libc) and a lean one
 *   avx_result_survives_handler_clobbering_ymm (if the CPU has AVX)
 *   avx512_result_survives_handler_clobbering_zmm (if it has AVX-512)
 *   entry_handler_data_pairs_with_return       4 threads, data_size 256
 *                         filled from the args at entry, checked at return
 *   ret_addr_is_the_real_return_address        asm caller with a label
 *                         after its call; C caller by dladdr and by the
 *                         call instruction in front of it; ri->rp, ri->task
 *   ri_task_is_the_calling_thread
 *   entry_handler_nonzero_leaves_call_unprobed
 *   handler_changes_return_value
 *   return_handler_redirects_ip                the handler sets regs->ip
 *                         to another label of the asm caller: the caller
 *                         goes on there, 1000 calls with maxactive 1 (the
 *                         instance comes back each time), errno kept
 *   return_handler_fault_taken_by_fault_handler  the handler changes ax, then
 *                         faults; the kretprobe's fault_handler takes it: the
 *                         caller gets the changed value, errno is kept, and
 *                         with maxactive 1 no instance is lost (200 calls)
 *   entry_handler_fault_taken_by_fault_handler, _program_handler_returns,
 *   entry_handler_fault_program_handler_longjmps_away  an entry_handler
 *                         that faults is abandoned as if it had returned
 *                         0: the return is probed (maxactive 1, 100 calls,
 *                         none missed); a longjmp away gives the instance
 *                         back
 *   return_handler_left_by_a_signal_handlers_longjmp  a SIGUSR2 handler
 *                         longjmps out of a running return handler: its
 *                         instance comes back (maxactive 1), later hits run
 *   handler_fault_in_a_thread_then_unregister  a thread's return handler
 *                         (and, alone, a kprobe's pre_handler on the same
 *                         function) faults on the thread's second call (the
 *                         first made its thread block: the hand-written
 *                         paths need one), its fault_handler takes it,
 *                         and the thread then waits outside any probe:
 *                         unregistering does not wait for it (the fault's
 *                         way out ends the hit path's read section)
 *   return_handler_fault_reaches_program_handler  no fault_handler: the
 *                         program's SIGSEGV handler sees the fault once per
 *                         call and returns; the calls still return right
 *   program_handler_probed_calls_during_handler_fault  that SIGSEGV handler
 *                         itself calls a kretprobed function (its return
 *                         handler runs): the faulting call still goes on
 *                         from its own frame
 *   longjmp_from_kprobe_fault_then_return_handler_fault  a kprobe's
 *                         (non-lean) pre_handler faults and the program's
 *                         SIGSEGV handler siglongjmps away; then a
 *                         kretprobe's handler faults and its fault_handler
 *                         takes it: that call still returns right (the
 *                         first fault's recovery point is not reused)
 *   signal_at_every_instruction_of_a_probed_call  single-stepping a call
 *                         of a kretprobed function (optimised entry) whose
 *                         handler writes errno: at every instruction a
 *                         SIGTRAP handler calls another kretprobed function
 *                         and a kprobed one; every result right, the
 *                         caller's errno kept, exact counts
 *   tail_call_returns_through_stub             jmp to another function
 *   two_kretprobes_on_one_function             both run once, both see
 *                         the real return address (as the kernel's do)
 *   handler_calling_probed_function_is_missed  kp.nmissed, right value
 *   maxactive_one_concurrent_threads_nmissed   N threads held inside by a
 *                         barrier: nmissed N-1, one entry, one handler
 *   maxactive_default_covers_blocked_threads
 *   kept_instances_serve_calls_that_need_them  a thread keeps a free
 *                         instance for its next call; a call needing every
 *                         instance gets it, in this thread, in a fork
 *                         child, and after that thread ended: no nmissed
 *   recursion_lifo_and_missed_depth            depth D, maxactive D+1 then
 *                         (D+1)/2
 *   register_kretprobes_all_or_none            8 at once; a bad one
 *                         (offset != 0) makes -EINVAL and none registered
 *   error_codes                                non-entry address, unknown
 *                         symbol, both/neither, blacklisted, twice,
 *                         unregistered struct
 *   unregister_with_calls_in_flight            threads held inside while
 *                         main unregisters, and hammering threads: right
 *                         values, no handler after unregister returned
 *   register_unregister_cycles_with_calls_in_flight_do_not_leak
 *   disable_enable_and_list                    "  r  " lines, [DISABLED],
 *                         [OPTIMIZED], the global knob, a kprobe on the
 *                         same function
 *   backtrace_shows_real_callers               glibc backtrace() in the
 *                         probed function, its callee and the handler,
 *                         from three call depths, against unprobed runs
 *   longjmp_out_of_probed_frames_reclaims      longjmp, _longjmp,
 *                         siglongjmp, __longjmp_chk out of one probed frame
 *                         (maxactive 1) and out of up to 4 nested ones
 *                         (maxactive 4); later calls still probed
 *   siglongjmp_from_signal_handler_reclaims    raise() and a SIGSEGV inside
 *                         the probed function
 *   siglongjmp_from_altstack_handler_reclaims  the handler on a
 *                         sigaltstack above the thread's stack
 *   signal_handler_calls_probed_function_inside_it
 *   pthread_exit_and_cancel_inside_probed_function_reclaim
 *   pthread_exit_and_cancel_in_probed_start_routine_reclaim   the probed
 *                         function is the thread's start routine
 *   fork_inside_probed_function
 */
#include <complex.h>
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fenv.h>
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <ucontext.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <semaphore.h>
#include <sys/wait.h>
#include <unistd.h>
#include <ukprobes.h>
#include "ukt.h"

static pid_t tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* opt 0: entry by breakpoint (knob off until kr_unreg), 1: by a jump */
static void kr_reg(struct kretprobe *rp, int opt)
{
	UKT_EQ(kprobes_set_optimization(opt), 0);
	int r = register_kretprobe(rp);
	if (r)
		UKT_FAIL("register_kretprobe(%s) = %d", rp->kp.symbol_name ? rp->kp.symbol_name : "addr", r);
	wait_for_kprobe_optimizer();
	UKT_EQ(!!(rp->kp.flags & KPROBE_FLAG_OPTIMIZED), opt);
}

static void kr_unreg(struct kretprobe *rp)
{
	unregister_kretprobe(rp);
	UKT_EQ(kprobes_set_optimization(1), 0);
}

static const char *path_name(int opt)
{
	return opt ? "optimized" : "breakpoint";
}

/* ---- targets -------------------------------------------------------------------- */

__attribute__((noinline)) int kr_int(int a, int b)
{
	__asm__ volatile("" ::: "memory");
	return a * 3 + b;
}

__attribute__((noinline)) void *kr_ptr(void *p, long off)
{
	__asm__ volatile("" : "+r"(p) :: "memory");
	return (char *)p + off;
}

__attribute__((noinline)) long kr_long(long x)
{
	__asm__ volatile("" : "+r"(x) :: "memory");
	return x ^ 0x5a5a5a5a5a5aL;
}

__attribute__((noinline)) double kr_dbl(double x, double y)
{
	__asm__ volatile("" : "+x"(x) :: "memory");
	return x * y + 0.25;
}

__attribute__((noinline)) float kr_flt(float x)
{
	__asm__ volatile("" : "+x"(x) :: "memory");
	return x / 3.0f;
}

__attribute__((noinline)) long double kr_ldbl(long double x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3.0L + 1.0L / 3.0L;
}

struct dd { double a, b; };
__attribute__((noinline)) struct dd kr_dd(double x)
{
	__asm__ volatile("" : "+x"(x) :: "memory");
	return (struct dd){ x / 7.0, x * 1.5 };
}

__attribute__((noinline)) _Complex long double kr_cld(long double a, long double b)
{
	__asm__ volatile("" ::: "memory");
	return a / 3.0L + (b / 7.0L) * I;
}

/* a tail call: the stub's return comes from kr_int */
__asm__(".text\n.globl kr_tail\n.type kr_tail,@function\n"
	"kr_tail: lea 1(%rdi),%edi\n nop\n jmp kr_int\n.size kr_tail,.-kr_tail\n");
int kr_tail(int a, int b);

/* an asm caller whose return address is a label: kr_asm_caller_ret */
__asm__(".text\n.globl kr_asm_caller\n.type kr_asm_caller,@function\n"
	"kr_asm_caller: sub $8,%rsp\n call kr_int\n"
	".globl kr_asm_caller_ret\nkr_asm_caller_ret: add $8,%rsp\n ret\n"
	".size kr_asm_caller,.-kr_asm_caller\n");
int kr_asm_caller(int a, int b);

/* kr_rd_target returns x + 1 to kr_rd_caller, which returns it; a
 * return handler may send it to kr_rd_alt instead, which returns
 * -(x + 1) */
__asm__(".text\n.globl kr_rd_target\n.type kr_rd_target,@function\n.p2align 4\n"
	"kr_rd_target: lea 1(%rdi),%rax\n ret\n.size kr_rd_target,.-kr_rd_target\n"
	".globl kr_rd_caller\n.type kr_rd_caller,@function\n.p2align 4\n"
	"kr_rd_caller: sub $8,%rsp\n call kr_rd_target\n add $8,%rsp\n ret\n"
	".globl kr_rd_alt\nkr_rd_alt: add $8,%rsp\n neg %rax\n ret\n"
	".size kr_rd_caller,.-kr_rd_caller\n");
long kr_rd_target(long x), kr_rd_caller(long x);
void kr_rd_alt(void);

__attribute__((noinline)) int kr_c_caller(int a)
{
	int r = kr_int(a, 1);
	__asm__ volatile("" : "+r"(r) :: "memory");
	return r + 1;
}

/* kr_a0..kr_a7: mov %rdi,%rax (3 bytes); add $N,%rax (4 bytes); ret */
#define KR_A(n) ".globl kr_a" #n "\n.type kr_a" #n ",@function\n"		\
	"kr_a" #n ": mov %rdi,%rax\n add $" #n "1,%rax\n ret\n.size kr_a" #n ",.-kr_a" #n "\n"
__asm__(".text\n" KR_A(0) KR_A(1) KR_A(2) KR_A(3) KR_A(4) KR_A(5) KR_A(6) KR_A(7));
long kr_a0(long), kr_a1(long), kr_a2(long), kr_a3(long);
long kr_a4(long), kr_a5(long), kr_a6(long), kr_a7(long);
static long (*const kr_a[8])(long) = { kr_a0, kr_a1, kr_a2, kr_a3, kr_a4, kr_a5, kr_a6, kr_a7 };

__attribute__((noinline)) int kr_forbidden(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 2;
}
NOKPROBE_SYMBOL(kr_forbidden);

/*
 * What handlers write is volatile or atomic: a handler runs where the
 * compiler sees no call (gcc's ipa-reference would otherwise keep a
 * static it knows the probed function does not touch in a register).
 */

/* ---- return values --------------------------------------------------------------- */

struct seen {
	unsigned long ax, ip, sp, ret_addr;
	pid_t task;
	struct kretprobe *rp;
};
static volatile struct seen last;
static atomic_long nret, nentry;

static int record_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	last.ax = regs_return_value(regs);
	last.ip = instruction_pointer(regs);
	last.sp = user_stack_pointer(regs);
	last.ret_addr = (unsigned long)ri->ret_addr;
	last.task = ri->task;
	last.rp = ri->rp;
	nret++;
	return 0;
}

struct entry_data {
	unsigned long sp, a, b;
	pid_t task;
};

static int record_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct entry_data *d = (void *)ri->data;
	d->sp = regs->sp;
	d->a = regs_get_kernel_argument(regs, 0);
	d->b = regs_get_kernel_argument(regs, 1);
	d->task = ri->task;
	nentry++;
	return 0;
}

static volatile struct entry_data last_entry;
static int record_ret_data(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	last_entry = *(struct entry_data *)ri->data;
	return record_ret(ri, regs);
}

UKT_CASE(int_and_pointer_results_seen_by_handler_and_caller)
{
	static char buf[64];
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe ri = { .kp.addr = (void *)kr_int, .handler = record_ret_data,
					.entry_handler = record_entry,
					.data_size = sizeof(struct entry_data) };
		struct kretprobe rp = { .kp.symbol_name = "kr_ptr", .handler = record_ret };
		struct kretprobe rl = { .kp.addr = (void *)kr_long, .handler = record_ret };
		kr_reg(&ri, opt);
		kr_reg(&rp, opt);
		kr_reg(&rl, opt);
		UKT_EQ((unsigned long)rp.kp.addr, (unsigned long)kr_ptr);
		nret = nentry = 0;
		for (int i = -5; i < 5; i++) {
			int v = kr_int(i, 1000);
			UKT_EQ(v, i * 3 + 1000);
			UKT_EQ((int)last.ax, v);
			UKT_EQ(last.rp, &ri);
			UKT_EQ(last.task, tid());
			UKT_EQ(last.ip, last.ret_addr);
			/* the caller's sp: the return address popped */
			UKT_EQ(last.sp, last_entry.sp + 8);
			UKT_EQ((int)last_entry.a, i);
			UKT_EQ((int)last_entry.b, 1000);
		}
		UKT_EQ(nret, 10);
		UKT_EQ(nentry, 10);
		char *p = kr_ptr(buf, 17);
		UKT_ASSERT(p == buf + 17);
		UKT_EQ(last.ax, (unsigned long)(buf + 17));
		UKT_EQ(last.rp, &rp);
		UKT_EQ(kr_long(-1), ~0x5a5a5a5a5a5aL);
		UKT_EQ(last.ax, (unsigned long)~0x5a5a5a5a5a5aL);
		UKT_EQ(nret, 12);
		UKT_EQ(ri.nmissed + rp.nmissed + rl.nmissed, 0);
		UKT_EQ(ri.kp.nmissed + rp.kp.nmissed + rl.kp.nmissed, 0);
		kr_unreg(&ri);
		kr_unreg(&rp);
		kr_unreg(&rl);
		UKT_EQ(kr_int(1, 2), 5);
		UKT_EQ(nret, 12);
	}
}

/* results in rdx:rax */
struct two_longs { long a, b; };
__attribute__((noinline)) struct two_longs kr_pair(long x)
{
	__asm__ volatile("" : "+r"(x) :: "memory");
	return (struct two_longs){ x + 1, ~x };
}

__attribute__((noinline)) unsigned __int128 kr_i128(unsigned long x)
{
	__asm__ volatile("" : "+r"(x) :: "memory");
	return (unsigned __int128)~x << 64 | x * 3;
}

static volatile unsigned long seen_dx;

static int record_dx(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	seen_dx = regs->dx;
	return record_ret(ri, regs);
}

UKT_CASE(two_register_results_seen_and_received)
{
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe rp = { .kp.addr = (void *)kr_pair, .handler = record_dx };
		struct kretprobe ri = { .kp.addr = (void *)kr_i128, .handler = record_dx };
		kr_reg(&rp, opt);
		kr_reg(&ri, opt);
		nret = 0;
		struct two_longs t = kr_pair(41);
		UKT_EQ(t.a, 42);
		UKT_EQ(t.b, ~41L);
		UKT_EQ(last.ax, 42);
		UKT_EQ(seen_dx, ~41UL);
		unsigned __int128 v = kr_i128(5);
		UKT_ASSERT(v == ((unsigned __int128)~5UL << 64 | 15));
		UKT_EQ(last.ax, 15);
		UKT_EQ(seen_dx, ~5UL);
		UKT_EQ(nret, 2);
		kr_unreg(&rp);
		kr_unreg(&ri);
	}
}

/* ---- errno and data alignment --------------------------------------------------------- */

__attribute__((noinline)) int kr_errno(int e)
{
	__asm__ volatile("" ::: "memory");
	errno = e;
	return -1;
}

static int clobber_errno(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	errno = EBADF;
	(void)write(-1, "", 0);	/* and a failing call of its own */
	nret++;
	return 0;
}

UKT_CASE(errno_set_by_probed_function_survives_handler)
{
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe rp = { .kp.addr = (void *)kr_errno, .handler = clobber_errno,
					.entry_handler = (kretprobe_handler_t)clobber_errno };
		kr_reg(&rp, opt);
		nret = 0;
		errno = 0;
		UKT_EQ(kr_errno(ENOENT), -1);
		UKT_EQ(errno, ENOENT);
		UKT_EQ(nret, 2);
		kr_unreg(&rp);
		/* a function that leaves errno alone: the caller's value stays */
		struct kretprobe rl = { .kp.addr = (void *)kr_long, .handler = clobber_errno,
					.entry_handler = (kretprobe_handler_t)clobber_errno };
		kr_reg(&rl, opt);
		errno = EDOM;
		UKT_EQ(kr_long(0), 0x5a5a5a5a5a5aL);
		UKT_EQ(errno, EDOM);
		UKT_EQ(nret, 4);
		kr_unreg(&rl);
	}
}

static atomic_long misaligned;

static int check_align(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)regs;
	if ((uintptr_t)ri->data % _Alignof(long long) || (uintptr_t)ri->data % _Alignof(void *))
		misaligned++;
	*(long long *)(void *)ri->data = 1;
	nret++;
	return 0;
}

/* kprobes.txt 1.3.2 and the kernel's sample keep a struct in ri->data
 * ("struct my_data *data = (struct my_data *)ri->data; data->entry_stamp
 * = ktime_get();"): it must be aligned for such a struct */
UKT_CASE(ri_data_is_aligned_for_a_struct)
{
	struct kretprobe rp = { .kp.addr = (void *)kr_long, .handler = check_align,
				.entry_handler = check_align, .data_size = 24, .maxactive = 4 };
	kr_reg(&rp, 1);
	nret = 0;
	UKT_EQ(kr_long(0), 0x5a5a5a5a5a5aL);
	UKT_EQ(nret, 2);
	if (misaligned)
		UKT_FAIL("ri->data is at offset %zu of struct kretprobe_instance: not aligned "
			 "for a long long or a pointer",
			 offsetof(struct kretprobe_instance, data));
	kr_unreg(&rp);
}

/* ---- floating point results -------------------------------------------------------- */

static atomic_long fp_calls;
static char fp_text[256];

static int fp_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	volatile double d = 1.0 / 3.0, e = sqrt(2.0);
	volatile long double ld = 2.0L / 7.0L;
	volatile float f = 1.0f / 9.0f;
	fesetround(FE_DOWNWARD);	/* MXCSR and x87 CW: must not leak */
	snprintf(fp_text, sizeof(fp_text), "%.17g %.17g %.20Lg %.9g %lu", d * e, e / d,
		 ld * ld, (double)f, regs_return_value(regs) & 0xff);
	ld = ld * 3.0L - 1.0L;
	d = d * ld;
	fp_calls++;
	return 0;
}

/* the probed calls, and the references computed once unprobed */
struct fp_results {
	double d;
	float f;
	long double ld;
	struct dd dd;
	_Complex long double cld;
	int round;
};

static void fp_run(struct fp_results *r)
{
	memset(r, 0, sizeof(*r));
	r->d = kr_dbl(1.1, 3.3);
	r->f = kr_flt(10.0f);
	r->ld = kr_ldbl(1.0L / 7.0L);
	r->dd = kr_dd(11.0);
	r->cld = kr_cld(5.0L, 9.0L);
	r->round = fegetround();
}

static void fp_same(const struct fp_results *a, const struct fp_results *b)
{
	UKT_ASSERT(!memcmp(&a->d, &b->d, sizeof(a->d)));
	UKT_ASSERT(!memcmp(&a->f, &b->f, sizeof(a->f)));
	UKT_ASSERT(!memcmp(&a->ld, &b->ld, 10));
	UKT_ASSERT(!memcmp(&a->dd, &b->dd, sizeof(a->dd)));
	UKT_ASSERT(!memcmp(&a->cld, &b->cld, 10));
	UKT_ASSERT(!memcmp((char *)&a->cld + 16, (char *)&b->cld + 16, 10));
	UKT_EQ(a->round, b->round);
}

UKT_CASE(fp_results_survive_handler_doing_fp_work)
{
	struct fp_results ref, got;
	fp_run(&ref);
	UKT_ASSERT(ref.d == 1.1 * 3.3 + 0.25);
	UKT_EQ(ref.round, FE_TONEAREST);
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe rps[5] = {
			{ .kp.addr = (void *)kr_dbl, .handler = fp_handler },
			{ .kp.addr = (void *)kr_flt, .handler = fp_handler },
			{ .kp.addr = (void *)kr_ldbl, .handler = fp_handler },
			{ .kp.addr = (void *)kr_dd, .handler = fp_handler },
			{ .kp.addr = (void *)kr_cld, .handler = fp_handler },
		};
		for (int i = 0; i < 5; i++)
			kr_reg(&rps[i], opt);
		fp_calls = 0;
		for (int k = 0; k < 3; k++) {
			fp_run(&got);
			fp_same(&ref, &got);
		}
		UKT_EQ(fp_calls, 15);
		/* the handler really computed: its text is what plain code makes */
		char want[256];
		volatile double d = 1.0 / 3.0, e = sqrt(2.0);
		volatile long double ld = 2.0L / 7.0L;
		volatile float f = 1.0f / 9.0f;
		fesetround(FE_DOWNWARD);
		snprintf(want, sizeof(want), "%.17g %.17g %.20Lg %.9g ", d * e, e / d, ld * ld,
			 (double)f);
		fesetround(FE_TONEAREST);
		UKT_ASSERT(!strncmp(fp_text, want, strlen(want)));
		for (int i = 0; i < 5; i++)
			kr_unreg(&rps[i]);
		fp_run(&got);
		fp_same(&ref, &got);
		UKT_EQ(fp_calls, 15);
	}
}

/* a handler that keeps to the general registers itself but calls libc's
 * string functions (which use vector registers), and a truly lean one */
static volatile size_t libc_len = 200;

/* libc's string functions on a length the compiler cannot see (so they
 * are called, not inlined): right only if they ran correctly (also:
 * with DF clear) */
static bool libc_work_ok(void)
{
	char a[256], b[256];
	memset(a, 'x', libc_len);
	a[libc_len] = 0;
	memcpy(b, a, libc_len + 1);
	return strlen(b) == libc_len && !memcmp(a, b, libc_len);
}

static int libc_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	if (libc_work_ok() && regs->sp)
		fp_calls++;
	return 0;
}

static int lean_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	fp_calls++;
	return 0;
}

UKT_CASE(fp_results_survive_lean_and_libc_calling_handlers)
{
	struct fp_results ref, got;
	fp_run(&ref);
	kretprobe_handler_t hs[2] = { libc_handler, lean_handler };
	for (int h = 0; h < 2; h++) {
		for (int opt = 0; opt < 2; opt++) {
			struct kretprobe rps[5] = {
				{ .kp.addr = (void *)kr_dbl, .handler = hs[h] },
				{ .kp.addr = (void *)kr_flt, .handler = hs[h] },
				{ .kp.addr = (void *)kr_ldbl, .handler = hs[h] },
				{ .kp.addr = (void *)kr_dd, .handler = hs[h] },
				{ .kp.addr = (void *)kr_cld, .handler = hs[h] },
			};
			for (int i = 0; i < 5; i++)
				kr_reg(&rps[i], opt);
			fp_calls = 0;
			for (int k = 0; k < 3; k++) {
				fp_run(&got);
				fp_same(&ref, &got);
			}
			UKT_EQ(fp_calls, 15);
			for (int i = 0; i < 5; i++)
				kr_unreg(&rps[i]);
		}
	}
}

__attribute__((noinline, target("avx"))) __m256d kr_v256(__m256d a)
{
	__asm__ volatile("" : "+x"(a) :: "memory");
	return _mm256_add_pd(a, _mm256_set_pd(4.0, 3.0, 2.0, 1.0));
}

__attribute__((target("avx"))) static int avx_handler(struct kretprobe_instance *ri,
							struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	__asm__ volatile("vpcmpeqd %%ymm0,%%ymm0,%%ymm0\n vpcmpeqd %%ymm1,%%ymm1,%%ymm1"
			 ::: "xmm0", "xmm1");
	fp_calls++;
	return 0;
}

__attribute__((noinline, target("avx"))) static int avx_check(void)
{
	double out[4];
	__m256d r = kr_v256(_mm256_set_pd(40.0, 30.0, 20.0, 10.0));
	_mm256_storeu_pd(out, r);
	return out[0] == 11.0 && out[1] == 22.0 && out[2] == 33.0 && out[3] == 44.0;
}

UKT_CASE(avx_result_survives_handler_clobbering_ymm)
{
	if (!__builtin_cpu_supports("avx")) {
		printf("  no AVX: nothing to check\n");
		return;
	}
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe rp = { .kp.addr = (void *)kr_v256, .handler = avx_handler };
		UKT_ASSERT(avx_check());
		kr_reg(&rp, opt);
		fp_calls = 0;
		for (int i = 0; i < 3; i++)
			UKT_ASSERT(avx_check());
		UKT_EQ(fp_calls, 3);
		kr_unreg(&rp);
	}
}

__attribute__((noinline, target("avx512f"))) __m512d kr_v512(__m512d a)
{
	__asm__ volatile("" : "+v"(a) :: "memory");
	return _mm512_add_pd(a, _mm512_set_pd(8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0));
}

__attribute__((target("avx512f"))) static int avx512_handler(struct kretprobe_instance *ri,
							    struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	__asm__ volatile("vpternlogd $0xff,%%zmm0,%%zmm0,%%zmm0\n"
			 " vpternlogd $0xff,%%zmm1,%%zmm1,%%zmm1" ::: "xmm0", "xmm1");
	fp_calls++;
	return 0;
}

__attribute__((noinline, target("avx512f"))) static int avx512_check(void)
{
	double out[8];
	__m512d r = kr_v512(_mm512_set_pd(80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 20.0, 10.0));
	_mm512_storeu_pd(out, r);
	for (int i = 0; i < 8; i++)
		if (out[i] != 11.0 * (i + 1))
			return 0;
	return 1;
}

/* the return path keeps zmm0-1 whole: all 512 bits of a __m512d result */
UKT_CASE(avx512_result_survives_handler_clobbering_zmm)
{
	if (!__builtin_cpu_supports("avx512f")) {
		printf("  no AVX-512: nothing to check\n");
		return;
	}
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe rp = { .kp.addr = (void *)kr_v512, .handler = avx512_handler };
		UKT_ASSERT(avx512_check());
		kr_reg(&rp, opt);
		fp_calls = 0;
		for (int i = 0; i < 3; i++)
			UKT_ASSERT(avx512_check());
		UKT_EQ(fp_calls, 3);
		kr_unreg(&rp);
	}
}

/* ---- entry/return pairing ------------------------------------------------------------ */

#define PAIR_DATA 256
static atomic_long pair_bad, pair_calls;

static unsigned char pair_byte(unsigned long a, unsigned long b, int i)
{
	return (unsigned char)(a * 31 + b * 7 + (unsigned long)i * 13);
}

static int pair_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	unsigned long a = regs_get_kernel_argument(regs, 0);
	unsigned long b = regs_get_kernel_argument(regs, 1);
	unsigned long *w = (unsigned long *)ri->data;
	w[0] = a;
	w[1] = b;
	w[2] = (unsigned long)tid();
	for (int i = 24; i < PAIR_DATA; i++)
		ri->data[i] = pair_byte(a, b, i);
	if (ri->task != tid())
		pair_bad++;
	return 0;
}

static int pair_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	unsigned long *w = (unsigned long *)ri->data;
	int a = (int)w[0], b = (int)w[1];
	if ((int)regs_return_value(regs) != a * 3 + b)
		pair_bad++;
	if ((pid_t)w[2] != tid() || ri->task != tid())
		pair_bad++;
	for (int i = 24; i < PAIR_DATA; i++)
		if ((unsigned char)ri->data[i] != pair_byte(w[0], w[1], i)) {
			pair_bad++;
			break;
		}
	pair_calls++;
	return 0;
}

#define PAIR_THREADS 4
#define PAIR_CALLS 5000

static void *pair_worker(void *arg)
{
	long id = (long)arg;
	long bad = 0;
	for (int i = 0; i < PAIR_CALLS; i++) {
		int a = (int)(id * 100000 + i), b = i & 7;
		if (kr_int(a, b) != a * 3 + b)
			bad++;
		if (kr_c_caller(a) != a * 3 + 2)
			bad++;
	}
	return (void *)bad;
}

UKT_CASE(entry_handler_data_pairs_with_return)
{
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe rp = { .kp.addr = (void *)kr_int, .handler = pair_ret,
					.entry_handler = pair_entry, .data_size = PAIR_DATA,
					.maxactive = 2 * PAIR_THREADS };
		kr_reg(&rp, opt);
		pair_bad = pair_calls = 0;
		pthread_t th[PAIR_THREADS];
		for (long i = 0; i < PAIR_THREADS; i++)
			UKT_EQ(pthread_create(&th[i], NULL, pair_worker, (void *)(i + 1)), 0);
		for (int i = 0; i < PAIR_THREADS; i++) {
			void *r;
			UKT_EQ(pthread_join(th[i], &r), 0);
			UKT_EQ((long)r, 0);
		}
		UKT_EQ(pair_bad, 0);
		UKT_EQ(pair_calls, 2L * PAIR_THREADS * PAIR_CALLS);
		UKT_EQ(rp.nmissed, 0);
		kr_unreg(&rp);
	}
}

/* ---- ri->ret_addr ---------------------------------------------------------------- */

UKT_CASE(ret_addr_is_the_real_return_address)
{
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe rp = { .kp.addr = (void *)kr_int, .handler = record_ret };
		kr_reg(&rp, opt);
		nret = 0;
		UKT_EQ(kr_asm_caller(4, 5), 17);
		UKT_EQ(nret, 1);
		UKT_EQ(last.ret_addr, (unsigned long)ukt_label("kr_asm_caller_ret"));
		UKT_EQ(last.ip, last.ret_addr);
		UKT_EQ(last.task, tid());
		UKT_EQ(last.rp, &rp);

		UKT_EQ(kr_c_caller(4), 14);
		UKT_EQ(nret, 2);
		Dl_info di;
		UKT_ASSERT(dladdr((void *)last.ret_addr, &di));
		UKT_ASSERT(di.dli_sname);
		UKT_STREQ(di.dli_sname, "kr_c_caller");
		UKT_EQ((unsigned long)di.dli_saddr, (unsigned long)kr_c_caller);
		/* right after a call rel32 to kr_int */
		const unsigned char *c = (const unsigned char *)last.ret_addr - 5;
		int32_t rel;
		memcpy(&rel, c + 1, 4);
		UKT_EQ(c[0], 0xe8);
		UKT_EQ(last.ret_addr + rel, (unsigned long)kr_int);
		kr_unreg(&rp);
	}
}

/* a thread's calls: its own tid */
static void *task_worker(void *arg)
{
	(void)arg;
	int v = kr_int(2, 2);
	return (void *)(long)(v == 8 && last.task == tid() && last.ret_addr != 0);
}

UKT_CASE(ri_task_is_the_calling_thread)
{
	struct kretprobe rp = { .kp.addr = (void *)kr_int, .handler = record_ret };
	kr_reg(&rp, 1);
	for (int i = 0; i < 3; i++) {
		pthread_t th;
		void *ok;
		UKT_EQ(pthread_create(&th, NULL, task_worker, NULL), 0);
		UKT_EQ(pthread_join(th, &ok), 0);
		UKT_EQ((long)ok, 1);
	}
	UKT_EQ(nret, 3);
	kr_unreg(&rp);
}

/* ---- entry_handler decides --------------------------------------------------------- */

static atomic_long odd_seen;

static int even_only_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	nentry++;
	*(long *)ri->data = (long)regs->di;
	return regs->di & 1;	/* non-zero: this call stays unprobed */
}

static int even_only_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	long a = *(long *)ri->data;
	if (a & 1)
		odd_seen++;
	if ((long)regs->ax != a * 3 + 1)
		odd_seen += 100;
	nret++;
	return 0;
}

UKT_CASE(entry_handler_nonzero_leaves_call_unprobed)
{
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe rp = { .kp.addr = (void *)kr_int, .handler = even_only_ret,
					.entry_handler = even_only_entry,
					.data_size = sizeof(long), .maxactive = 1 };
		kr_reg(&rp, opt);
		nentry = nret = odd_seen = 0;
		for (int i = 0; i < 100; i++)
			UKT_EQ(kr_int(i, 1), i * 3 + 1);
		UKT_EQ(nentry, 100);
		UKT_EQ(nret, 50);
		UKT_EQ(odd_seen, 0);
		/* with maxactive 1, a refused call gave its instance back */
		UKT_EQ(rp.nmissed, 0);
		kr_unreg(&rp);
	}
}

/* ---- handler changes the result ------------------------------------------------------ */

static int set_ax(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	regs->ax = regs->ax * 2 + 1;
	nret++;
	return 0;
}

UKT_CASE(handler_changes_return_value)
{
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe rp = { .kp.addr = (void *)kr_long, .handler = set_ax };
		kr_reg(&rp, opt);
		long want = (7L ^ 0x5a5a5a5a5a5aL) * 2 + 1;
		UKT_EQ(kr_long(7), want);
		kr_unreg(&rp);
		UKT_EQ(kr_long(7), 7L ^ 0x5a5a5a5a5a5aL);
	}
}

/*
 * The flags at a return.  kr_flags returns with the status flags and DF
 * its argument names (bits 0xcd5), the other flags as it was entered;
 * kr_flags_call sets the flags it enters kr_flags with (ID, bit 21, or
 * not: a system flag any program may set) and answers the flags it got
 * back, as asm code that relies on them would see them.
 */
__asm__(".text\n.globl kr_flags\n.type kr_flags,@function\n.p2align 4\n"
	"kr_flags: nopl 0(%rax,%rax,1)\n pushfq\n andq $~0xcd5,(%rsp)\n"
	" or %rdi,(%rsp)\n mov %rdi,%rax\n popfq\n ret\n.size kr_flags,.-kr_flags\n"
	".globl kr_flags_call\n.type kr_flags_call,@function\n.p2align 4\n"
	"kr_flags_call: push %rbx\n pushfq\n pop %rbx\n push %rsi\n popfq\n"
	" call kr_flags\n pushfq\n pop %rax\n push %rbx\n popfq\n pop %rbx\n ret\n"
	".size kr_flags_call,.-kr_flags_call\n");
unsigned long kr_flags(unsigned long status), kr_flags_call(unsigned long status,
							    unsigned long entry);

#define KR_FL_ID 0x200000UL
static volatile unsigned long flags_seen, flags_flip;

static int flags_lean(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	flags_seen = regs->flags;
	regs->flags ^= flags_flip;
	nret++;
	return 0;
}

/* not lean (libc's string functions), and wrong if run with DF set */
static int flags_libc(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return libc_work_ok() ? flags_lean(ri, regs) : 0;
}

static int flags_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	nentry++;
	return 0;
}

UKT_CASE(return_flags_seen_by_handler_and_kept_for_caller)
{
	/* CF PF ZF; AF SF OF with DF; none */
	static const unsigned long status[] = { 0x45, 0xc90, 0 };
	static const unsigned long entry[] = { 0x202, 0x202 | KR_FL_ID };
	const unsigned long mask = 0xcd5 | 0x200 | KR_FL_ID;
	kretprobe_handler_t hs[2] = { flags_lean, flags_libc };
	/* entry by breakpoint, by the return-probe trampoline (plain), and
	 * through the general path (an entry_handler) */
	for (int path = 0; path < 3; path++) {
		for (int h = 0; h < 2; h++) {
			struct kretprobe rp = { .kp.addr = (void *)kr_flags, .handler = hs[h],
						.entry_handler = path == 2 ? flags_entry : NULL };
			kr_reg(&rp, path > 0);
			nret = nentry = 0;
			for (int i = 0; i < 3; i++) {
				for (int e = 0; e < 2; e++) {
					for (int flip = 0; flip < 2; flip++) {
						unsigned long want = (status[i] | entry[e]) & mask;
						flags_flip = flip ? 0x441 : 0;	/* CF ZF DF */
						flags_seen = 0;
						unsigned long got = kr_flags_call(status[i], entry[e]);
						UKT_EQ(flags_seen & mask, want);
						UKT_EQ(flags_seen & 2, 2);
						UKT_EQ(got & mask, want ^ flags_flip);
					}
				}
			}
			flags_flip = 0;		/* (DF stays clear for C) */
			UKT_EQ(nret, 12);
			UKT_EQ(nentry, path == 2 ? 12 : 0);
			UKT_EQ(kr_flags(0x45), 0x45);
			kr_unreg(&rp);
		}
	}
	UKT_EQ(kr_flags_call(0x45, 0x202) & mask, 0x245);
}

static int redirect_ip(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	if (regs->ip != (unsigned long)ri->ret_addr)
		last.ip = regs->ip;	/* wrong: seen by the test */
	regs->ip = (unsigned long)kr_rd_alt;
	errno = EXDEV;			/* not a leaf: errno saved and put back */
	nret++;
	return 0;
}

UKT_CASE(return_handler_redirects_ip)
{
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe rp = { .kp.addr = (void *)kr_rd_target,
					.handler = redirect_ip, .maxactive = 1 };
		kr_reg(&rp, opt);
		nret = 0;
		last.ip = 0;
		for (long i = 0; i < 1000; i++) {
			errno = ENOENT;
			long r = kr_rd_caller(i);
			if (r != -(i + 1))
				UKT_FAIL("%s: call %ld returned %ld, want %ld", path_name(opt),
					 i, r, -(i + 1));
			UKT_EQ(errno, ENOENT);
		}
		UKT_EQ(nret, 1000);
		UKT_EQ(rp.nmissed, 0);
		UKT_EQ(last.ip, 0);
		kr_unreg(&rp);
		UKT_EQ(kr_rd_caller(41), 42);
	}
}

static int *volatile bad_ptr;	/* NULL */
static atomic_int nfault;

static int ax_then_fault(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	regs->ax += 1000;
	nret++;
	*bad_ptr = 1;		/* never goes on: the fault ends the handler */
	regs->ax += 1000000;
	return 0;
}

static int take_fault(struct kprobe *p, struct pt_regs *regs, int trapnr)
{
	(void)p; (void)regs;
	if (trapnr == 14)	/* a page fault */
		nfault++;
	return 1;
}

UKT_CASE(return_handler_fault_taken_by_fault_handler)
{
	for (int opt = 0; opt < 2; opt++) {
		nret = 0;
		nfault = 0;
		struct kretprobe rp = { .kp.addr = (void *)kr_long, .handler = ax_then_fault,
					.maxactive = 1 };
		rp.kp.fault_handler = take_fault;
		kr_reg(&rp, opt);
		for (long i = 0; i < 200; i++) {
			errno = 4321;
			long got = kr_long(i);
			UKT_EQ(errno, 4321);
			if (got != (i ^ 0x5a5a5a5a5a5aL) + 1000)
				UKT_FAIL("%s: kr_long(%ld) = %ld, want %ld", path_name(opt), i, got,
					 (i ^ 0x5a5a5a5a5a5aL) + 1000);
		}
		UKT_EQ(nret, 200);
		UKT_EQ(nfault, 200);
		UKT_EQ(rp.nmissed, 0);
		UKT_EQ(rp.kp.nmissed, 0);
		kr_unreg(&rp);
		UKT_EQ(kr_long(3), 3 ^ 0x5a5a5a5a5a5aL);
		UKT_EQ(nret, 200);
	}
}

/* entry_handler_fault_*: an entry_handler that faults while ef_armed */
static volatile int ef_armed, ef_sig_mode;	/* 1: return, 2: longjmp */
static sigjmp_buf ef_env;
static atomic_int nsig;

static int entry_faults(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri; (void)regs;
	nentry++;
	if (ef_armed)
		*bad_ptr = 1;
	return 0;
}

static int count_ret(struct kretprobe_instance *ri, struct pt_regs *regs);

static void ef_signal(int sig, siginfo_t *si, void *uc)
{
	(void)sig; (void)si; (void)uc;
	nsig++;
	if (ef_sig_mode == 2)
		siglongjmp(ef_env, 1);
}

/* mode 0: the kretprobe's fault_handler takes the fault; 1: the program's
 * handler does and returns; 2: it longjmps away, out of the call */
static void entry_fault_case(int mode)
{
	UKT_EQ(ukt_install_handler(SIGSEGV, ef_signal), 0);
	ef_sig_mode = mode;
	for (int opt = 0; opt < 2; opt++) {
		nret = 0;
		nentry = 0;
		nfault = 0;
		nsig = 0;
		struct kretprobe rp = { .kp.addr = (void *)kr_long, .handler = count_ret,
					.entry_handler = entry_faults, .maxactive = 1 };
		if (mode == 0)
			rp.kp.fault_handler = take_fault;
		kr_reg(&rp, opt);
		ef_armed = 1;
		for (volatile long i = 0; i < 100; i++) {
			if (mode == 2 && sigsetjmp(ef_env, 1))
				continue;	/* the call never happened */
			errno = 4321;
			long got = kr_long(i);
			UKT_EQ(errno, 4321);
			if (got != (i ^ 0x5a5a5a5a5a5aL))
				UKT_FAIL("%s: kr_long(%ld) = %ld", path_name(opt), i, got);
		}
		ef_armed = 0;
		UKT_EQ(nentry, 100);
		UKT_EQ(nfault, mode == 0 ? 100 : 0);
		UKT_EQ(nsig, mode == 0 ? 0 : 100);
		/* as if the entry_handler had returned 0: each return probed,
		 * and with maxactive 1 no instance was lost */
		UKT_EQ(nret, mode == 2 ? 0 : 100);
		UKT_EQ(kr_long(7), 7 ^ 0x5a5a5a5a5a5aL);
		UKT_EQ(nret, mode == 2 ? 1 : 101);
		UKT_EQ(rp.nmissed, 0);
		UKT_EQ(rp.kp.nmissed, 0);
		kr_unreg(&rp);
	}
}

UKT_CASE(entry_handler_fault_taken_by_fault_handler)
{
	entry_fault_case(0);
}

UKT_CASE(entry_handler_fault_program_handler_returns)
{
	entry_fault_case(1);
}

UKT_CASE(entry_handler_fault_program_handler_longjmps_away)
{
	entry_fault_case(2);
}

/* return_handler_left_by_longjmp: the program's signal handler longjmps
 * out of a running return handler, whose call is then never finished */
static int ret_raises(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri; (void)regs;
	if (++nret == 1)
		raise(SIGUSR2);
	return 0;
}

UKT_CASE(return_handler_left_by_a_signal_handlers_longjmp)
{
	UKT_EQ(ukt_install_handler(SIGUSR2, ef_signal), 0);
	ef_sig_mode = 2;
	for (int opt = 0; opt < 2; opt++) {
		nret = 0;
		nsig = 0;
		struct kretprobe rp = { .kp.addr = (void *)kr_long, .handler = ret_raises,
					.maxactive = 1 };
		kr_reg(&rp, opt);
		if (!sigsetjmp(ef_env, 1)) {
			kr_long(1);
			UKT_FAIL("%s: the handler came back", path_name(opt));
		}
		UKT_EQ(nsig, 1);
		UKT_EQ(nret, 1);
		/* the instance is back, and the thread outside every hit */
		UKT_EQ(kr_long(7), 7 ^ 0x5a5a5a5a5a5aL);
		UKT_EQ(nret, 2);
		UKT_EQ(rp.nmissed, 0);
		UKT_EQ(rp.kp.nmissed, 0);
		kr_unreg(&rp);
	}
}

/* the handlers of handler_fault_in_a_thread_then_unregister: they fault
 * once armed */
static atomic_int fault_armed;

static int armed_fault_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p; (void)regs;
	nret++;
	return fault_armed ? *bad_ptr : 0;
}

static int armed_fault_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	regs->ax += 1000;
	nret++;
	if (fault_armed)
		*bad_ptr = 1;
	return 0;
}

struct parked { int up[2], down[2]; long first, got; };

/* a probed call (the thread's first: its thread block is made there, on
 * the C path), one whose handler faults, then wait outside any probe */
static void *call_then_park(void *arg)
{
	struct parked *pk = arg;
	char c;
	pk->first = kr_long(76);
	fault_armed = 1;
	pk->got = kr_long(77);
	fault_armed = 0;
	if (write(pk->up[1], "x", 1) != 1 || read(pk->down[0], &c, 1) != 1)
		pk->got = -1;
	return NULL;
}

/* The hand-written hit paths take the read lock as a store and leave it in
 * assembly; a fault leaves through C (trap.c, then kret.c or the lean
 * dispatch), whose unlock must end that read section as well: otherwise
 * the grace period waits for a thread that is long gone from the hit
 * path (the case's timeout). */
UKT_CASE_T(handler_fault_in_a_thread_then_unregister, 30)
{
	for (int kind = 0; kind < 2; kind++) {
		for (int opt = 0; opt < 2; opt++) {
			nret = 0;
			nfault = 0;
			struct kretprobe rp = { .kp.addr = (void *)kr_long, .handler = armed_fault_ret };
			rp.kp.fault_handler = take_fault;
			struct kprobe kp = { .addr = (void *)kr_long, .pre_handler = armed_fault_pre,
					     .fault_handler = take_fault };
			if (kind == 0) {
				kr_reg(&rp, opt);
			} else {
				UKT_EQ(kprobes_set_optimization(opt), 0);
				UKT_EQ(register_kprobe(&kp), 0);
				wait_for_kprobe_optimizer();
				UKT_EQ(!!(kp.flags & KPROBE_FLAG_OPTIMIZED), opt);
			}
			struct parked pk;
			UKT_EQ(pipe(pk.up), 0);
			UKT_EQ(pipe(pk.down), 0);
			pthread_t th;
			char c;
			UKT_EQ(pthread_create(&th, NULL, call_then_park, &pk), 0);
			UKT_EQ(read(pk.up[0], &c, 1), 1);
			UKT_EQ(nret, 2);
			UKT_EQ(nfault, 1);
			UKT_EQ(pk.first, (76 ^ 0x5a5a5a5a5a5aL) + (kind == 0 ? 1000 : 0));
			if (kind == 0) {
				UKT_EQ(pk.got, (77 ^ 0x5a5a5a5a5a5aL) + 1000);
				kr_unreg(&rp);
			} else {
				UKT_EQ(pk.got, 77 ^ 0x5a5a5a5a5a5aL);
				unregister_kprobe(&kp);
				UKT_EQ(kprobes_set_optimization(1), 0);
			}
			UKT_EQ(write(pk.down[1], "x", 1), 1);
			UKT_EQ(pthread_join(th, NULL), 0);
			UKT_EQ(pk.got, kind == 0 ? (77 ^ 0x5a5a5a5a5a5aL) + 1000 : 77 ^ 0x5a5a5a5a5a5aL);
			close(pk.up[0]);
			close(pk.up[1]);
			close(pk.down[0]);
			close(pk.down[1]);
			UKT_EQ(kr_long(3), 3 ^ 0x5a5a5a5a5a5aL);
			UKT_EQ(nret, 2);
		}
	}
}

/* (errno written: the probed call must not see it) */
static void count_segv(int sig)
{
	(void)sig;
	nfault++;
	errno = 999;
}

static atomic_long ninner;

static int count_inner(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri; (void)regs;
	ninner++;
	return 0;
}

static void segv_calls_probed(int sig)
{
	(void)sig;
	nfault++;
	if (kr_int((int)nfault, 2) != (int)nfault * 3 + 2)
		abort();
}

/* kr_long's return handler faults and nothing takes the fault: the
 * program's SIGSEGV handler (segv) sees it once per call, and every call
 * still returns what the handler set before faulting; inner: segv calls
 * kr_int, kretprobed too, whose handler must run each time */
static void fault_to_program_handler(void (*segv)(int), bool inner)
{
	struct sigaction sa = { .sa_handler = segv }, old;
	sigemptyset(&sa.sa_mask);
	UKT_EQ(sigaction(SIGSEGV, &sa, &old), 0);
	for (int opt = 0; opt < 2; opt++) {
		nret = 0;
		nfault = 0;
		ninner = 0;
		struct kretprobe rp = { .kp.addr = (void *)kr_long, .handler = ax_then_fault,
					.maxactive = 1 };
		struct kretprobe ri = { .kp.addr = (void *)kr_int, .handler = count_inner,
					.maxactive = 1 };
		if (inner)
			UKT_EQ(register_kretprobe(&ri), 0);
		kr_reg(&rp, opt);
		for (long i = 0; i < 50; i++) {
			errno = (int)(i + 700);
			UKT_EQ(kr_long(i), (i ^ 0x5a5a5a5a5a5aL) + 1000);
			if (errno != i + 700)
				UKT_FAIL("%s: errno %d after the call, %ld before", path_name(opt),
					 errno, i + 700);
		}
		UKT_EQ(nret, 50);
		UKT_EQ(nfault, 50);
		UKT_EQ(ninner, inner ? 50 : 0);	/* the inner calls' handlers ran */
		UKT_EQ(rp.nmissed, 0);
		kr_unreg(&rp);
		if (inner) {
			UKT_EQ(ri.nmissed, 0);
			unregister_kretprobe(&ri);
		}
	}
	UKT_EQ(sigaction(SIGSEGV, &old, NULL), 0);
}

UKT_CASE(return_handler_fault_reaches_program_handler)
{
	fault_to_program_handler(count_segv, false);
}

UKT_CASE(program_handler_probed_calls_during_handler_fault)
{
	fault_to_program_handler(segv_calls_probed, true);
}

/* ---- state left by earlier faults, signals at any instruction -------------------------------- */

static sigjmp_buf lj_env;
static volatile double lj_sink;
static int *volatile lj_bad;		/* NULL */
static atomic_long lj_fh;

static void lj_segv(int sig)
{
	(void)sig;
	siglongjmp(lj_env, 1);
}

static int lj_pre_faults(struct kprobe *p, struct pt_regs *regs)
{
	(void)p; (void)regs;
	lj_sink = lj_sink * 1.5 + 1.0;	/* vector state: the C dispatch */
	*lj_bad = 1;
	return 0;
}

static int lj_ret_faults(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	regs->ax += 100;
	nret++;
	*lj_bad = 2;
	return 0;
}

static int lj_fault_handler(struct kprobe *p, struct pt_regs *regs, int trapnr)
{
	(void)p; (void)regs; (void)trapnr;
	lj_fh++;
	return 1;
}

UKT_CASE(longjmp_from_kprobe_fault_then_return_handler_fault)
{
	struct sigaction sa = { .sa_handler = lj_segv }, old;
	sigemptyset(&sa.sa_mask);
	UKT_EQ(sigaction(SIGSEGV, &sa, &old), 0);
	for (int opt = 0; opt < 2; opt++) {
		struct kprobe kp = { .addr = (void *)kr_int, .pre_handler = lj_pre_faults };
		UKT_EQ(register_kprobe(&kp), 0);
		if (sigsetjmp(lj_env, 1) == 0) {
			kr_int(1, 2);
			UKT_FAIL("kr_int returned through a faulting pre_handler");
		}
		unregister_kprobe(&kp);
		struct kretprobe rp = { .kp.addr = (void *)kr_long, .handler = lj_ret_faults,
					.kp.fault_handler = lj_fault_handler, .maxactive = 2 };
		kr_reg(&rp, opt);
		nret = 0;
		lj_fh = 0;
		for (long i = 0; i < 20; i++)
			UKT_EQ(kr_long(i), (i ^ 0x5a5a5a5a5a5aL) + 100);
		UKT_EQ(nret, 20);
		UKT_EQ(lj_fh, 20);
		UKT_EQ(rp.nmissed, 0);
		kr_unreg(&rp);
	}
	UKT_EQ(sigaction(SIGSEGV, &old, NULL), 0);
}

/*
 * A thread that dies inside a handler (pthread_exit from a pre_handler)
 * leaves its thread block with the handler's fault-resume point; a new
 * thread reuses the block.  Its first hit runs no handler (a kprobe
 * without handlers), then a return handler (or an optimised kprobe's
 * pre_handler) faults on the hand-written fast path, whose fault_handler
 * takes it: the fault must resume that hit, not the dead thread's point.
 */
static int die_in_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p; (void)regs;
	pthread_exit((void *)77L);
	return 0;
}

static void *call_kr_int(void *arg)
{
	(void)arg;
	kr_int(1, 2);
	return (void *)1L;
}

static long want_add;	/* what the faulting handler adds to kr_long's result */

static void *first_no_handler_then_faults(void *arg)
{
	(void)arg;
	kr_int(3, 4);		/* attaches, calls no handler */
	long bad = 0;
	for (long i = 0; i < 20; i++)
		if (kr_long(i) != (i ^ 0x5a5a5a5a5a5aL) + want_add)
			bad++;
	return (void *)bad;
}

/* a thread has died inside a pre_handler of kr_int; kr_int keeps a
 * kprobe without handlers */
static void thread_died_in_handler(struct kprobe *none)
{
	UKT_EQ(kprobes_set_optimization(0), 0);
	struct kprobe kp = { .addr = (void *)kr_int, .pre_handler = die_in_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	pthread_t th;
	void *r;
	UKT_EQ(pthread_create(&th, NULL, call_kr_int, NULL), 0);
	UKT_EQ(pthread_join(th, &r), 0);
	UKT_EQ((long)r, 77);
	unregister_kprobe(&kp);
	*none = (struct kprobe){ .addr = (void *)kr_int };
	UKT_EQ(register_kprobe(none), 0);	/* no handler: a breakpoint */
	UKT_EQ(kprobes_set_optimization(1), 0);
}

UKT_CASE(thread_died_in_handler_then_return_handler_fault)
{
	for (int opt = 0; opt < 2; opt++) {
		struct kprobe none;
		thread_died_in_handler(&none);
		nret = 0;
		nfault = 0;
		want_add = 1000;
		struct kretprobe rp = { .kp.addr = (void *)kr_long, .handler = ax_then_fault,
					.maxactive = 1 };
		rp.kp.fault_handler = take_fault;
		kr_reg(&rp, opt);
		pthread_t th;
		void *r;
		UKT_EQ(pthread_create(&th, NULL, first_no_handler_then_faults, NULL), 0);
		UKT_EQ(pthread_join(th, &r), 0);
		UKT_EQ((long)r, 0);
		UKT_EQ(nret, 20);
		UKT_EQ(nfault, 20);
		kr_unreg(&rp);
		unregister_kprobe(&none);
	}
}

static int pre_faults(struct kprobe *p, struct pt_regs *regs)
{
	(void)p; (void)regs;
	nret++;
	*bad_ptr = 1;
	return 0;
}

UKT_CASE(thread_died_in_handler_then_lean_kprobe_fault)
{
	struct kprobe none;
	thread_died_in_handler(&none);
	nret = 0;
	nfault = 0;
	want_add = 0;
	struct kprobe kf = { .addr = (void *)kr_long, .pre_handler = pre_faults,
			     .fault_handler = take_fault };
	UKT_EQ(register_kprobe(&kf), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(kf.flags & KPROBE_FLAG_OPTIMIZED);
	pthread_t th;
	void *r;
	UKT_EQ(pthread_create(&th, NULL, first_no_handler_then_faults, NULL), 0);
	UKT_EQ(pthread_join(th, &r), 0);
	UKT_EQ((long)r, 0);
	UKT_EQ(nret, 20);
	UKT_EQ(nfault, 20);
	unregister_kprobe(&kf);
	unregister_kprobe(&none);
}

/*
 * A return handler faults, no fault_handler takes it, and the program's
 * SIGSEGV handler leaves by siglongjmp past the probed call, or ends its
 * thread there: that return never finishes, and its instance must come
 * back (maxactive 1: otherwise every later call is missed).
 */
static sigjmp_buf orphan_env;
static __thread int orphan_exit;	/* this thread's handler: pthread_exit */

static void segv_leaves(int sig)
{
	(void)sig;
	nfault++;
	if (orphan_exit)
		pthread_exit((void *)5L);
	siglongjmp(orphan_env, 1);
}

static void *fault_then_exit(void *arg)
{
	(void)arg;
	orphan_exit = 1;
	kr_long(1);
	return (void *)1L;	/* not reached */
}

UKT_CASE(program_handler_leaving_a_return_handler_fault_gives_the_instance_back)
{
	struct sigaction sa = { .sa_handler = segv_leaves }, old;
	sigemptyset(&sa.sa_mask);
	UKT_EQ(sigaction(SIGSEGV, &sa, &old), 0);
	for (int opt = 0; opt < 2; opt++) {
		for (int how = 0; how < 2; how++) {
			nret = 0;
			nfault = 0;
			struct kretprobe rp = { .kp.addr = (void *)kr_long, .handler = ax_then_fault,
						.maxactive = 1 };
			kr_reg(&rp, opt);
			if (how == 0) {
				if (sigsetjmp(orphan_env, 1) == 0) {
					kr_long(1);
					UKT_FAIL("kr_long returned through the fault");
				}
			} else {
				pthread_t th;
				void *r;
				UKT_EQ(pthread_create(&th, NULL, fault_then_exit, NULL), 0);
				UKT_EQ(pthread_join(th, &r), 0);
				UKT_EQ((long)r, 5);
			}
			UKT_EQ(nfault, 1);
			rp.handler = count_inner;
			ninner = 0;
			for (long i = 0; i < 5; i++)
				UKT_EQ(kr_long(i), i ^ 0x5a5a5a5a5a5aL);
			UKT_EQ(ninner, 5);
			UKT_EQ(rp.nmissed, 0);
			kr_unreg(&rp);
		}
	}
	UKT_EQ(sigaction(SIGSEGV, &old, NULL), 0);
}

static atomic_long st_steps, st_bad, st_g_calls, st_g_ret, st_h_hits;
static volatile bool st_on;

static int st_ret_errno(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri; (void)regs;
	nret++;
	errno = EXDEV;			/* must not reach the caller */
	return 0;
}

static int st_count_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri; (void)regs;
	st_g_ret++;
	return 0;
}

static int st_count_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p; (void)regs;
	st_h_hits++;
	return 0;
}

/* SIGTRAP of the trap flag: at every instruction, probed calls of its own */
static void st_trap(int sig, siginfo_t *si, void *ctx)
{
	(void)sig; (void)si;
	ucontext_t *uc = ctx;
	int e = errno;
	if (!st_on || ++st_steps > 20000) {
		uc->uc_mcontext.gregs[REG_EFL] &= ~0x100L;
		errno = e;
		return;
	}
	long x = st_steps;
	st_g_calls++;
	if (kr_a2(x) != x + 21)
		st_bad++;
	if (kr_a3(x) != x + 31)
		st_bad++;
	errno = e;
}

UKT_CASE(signal_at_every_instruction_of_a_probed_call)
{
	struct sigaction sa = { .sa_sigaction = st_trap, .sa_flags = SA_SIGINFO | SA_NODEFER }, old;
	sigemptyset(&sa.sa_mask);
	UKT_EQ(sigaction(SIGTRAP, &sa, &old), 0);
	/* errno's PLT entry resolved: st_ret_errno is then proven lean (and
	 * not a leaf), so its return takes the hand-written fast path */
	errno = 0;
	struct kretprobe rf = { .kp.addr = (void *)kr_a1, .handler = st_ret_errno, .maxactive = 4 };
	struct kretprobe rg = { .kp.addr = (void *)kr_a2, .handler = st_count_ret, .maxactive = 4 };
	struct kprobe kh = { .addr = (void *)kr_a3, .pre_handler = st_count_pre };
	UKT_EQ(register_kretprobe(&rg), 0);
	UKT_EQ(register_kprobe(&kh), 0);
	kr_reg(&rf, 1);
	UKT_ASSERT(rg.kp.flags & KPROBE_FLAG_OPTIMIZED);
	UKT_ASSERT(kh.flags & KPROBE_FLAG_OPTIMIZED);
	long (*volatile f)(long) = kr_a1;
	for (int round = 0; round < 3; round++) {
		nret = 0;
		st_steps = 0;
		st_g_calls = 0;
		st_g_ret = 0;
		st_h_hits = 0;
		long missed_g = rg.kp.nmissed, missed_h = kh.nmissed;
		errno = ENOENT;
		st_on = true;
		__asm__ volatile("pushfq; orq $0x100, (%%rsp); popfq" ::: "memory", "cc");
		long r = f(round);
		__asm__ volatile("pushfq; andq $~0x100, (%%rsp); popfq" ::: "memory", "cc");
		st_on = false;
		int e = errno;
		UKT_EQ(r, round + 11);
		UKT_EQ(e, ENOENT);
		UKT_EQ(nret, 1);
		UKT_EQ(st_bad, 0);
		UKT_ASSERT(st_steps > 50);	/* it did step through the hit */
		UKT_ASSERT(st_steps < 20000);
		/* each call of the handler's ran its handlers, or was missed
		 * (a hit inside another hit's handler) */
		UKT_EQ(st_g_ret + (rg.kp.nmissed - missed_g), st_g_calls);
		UKT_EQ(st_h_hits + (kh.nmissed - missed_h), st_g_calls);
		UKT_ASSERT(st_g_ret > 0);
	}
	UKT_EQ(rf.nmissed, 0);
	kr_unreg(&rf);
	unregister_kprobe(&kh);
	unregister_kretprobe(&rg);
	UKT_EQ(sigaction(SIGTRAP, &old, NULL), 0);
}

UKT_CASE(tail_call_returns_through_stub)
{
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe rp = { .kp.addr = (void *)kr_tail, .handler = record_ret };
		kr_reg(&rp, opt);
		nret = 0;
		UKT_EQ(kr_tail(2, 3), 12);	/* kr_int(3, 3) */
		UKT_EQ(nret, 1);
		UKT_EQ(last.ax, 12);
		kr_unreg(&rp);
	}
}

/* ---- two on one function ----------------------------------------------------------------- */

static volatile unsigned long two_ret_addr[2];
static atomic_int two_calls[2];

static int two_a(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)regs;
	two_ret_addr[0] = (unsigned long)ri->ret_addr;
	two_calls[0]++;
	return 0;
}

static int two_b(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)regs;
	two_ret_addr[1] = (unsigned long)ri->ret_addr;
	two_calls[1]++;
	return 0;
}

UKT_CASE(two_kretprobes_on_one_function)
{
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe a = { .kp.addr = (void *)kr_int, .handler = two_a };
		struct kretprobe b = { .kp.addr = (void *)kr_int, .handler = two_b };
		kr_reg(&a, opt);
		kr_reg(&b, opt);
		two_calls[0] = two_calls[1] = 0;
		UKT_EQ(kr_asm_caller(1, 1), 4);
		UKT_EQ(two_calls[0], 1);
		UKT_EQ(two_calls[1], 1);
		unsigned long want = (unsigned long)ukt_label("kr_asm_caller_ret");
		UKT_EQ(two_ret_addr[0], want);
		UKT_EQ(two_ret_addr[1], want);
		kr_unreg(&b);
		UKT_EQ(kr_asm_caller(1, 1), 4);
		UKT_EQ(two_calls[0], 2);
		UKT_EQ(two_calls[1], 1);
		kr_unreg(&a);
	}
}

/* ---- recursion through the handler ---------------------------------------------------------- */

static atomic_long inner_result;

static int calls_probed(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	inner_result = kr_long(1);	/* probed itself: not again */
	nret++;
	return 0;
}

UKT_CASE(handler_calling_probed_function_is_missed)
{
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe rp = { .kp.addr = (void *)kr_long, .handler = calls_probed };
		kr_reg(&rp, opt);
		nret = 0;
		UKT_EQ(kr_long(2), 2L ^ 0x5a5a5a5a5a5aL);
		UKT_EQ(nret, 1);
		UKT_EQ(inner_result, 1L ^ 0x5a5a5a5a5a5aL);
		UKT_EQ(rp.kp.nmissed, 1);
		kr_unreg(&rp);
	}
}

/* ---- maxactive and nmissed --------------------------------------------------------------- */

static pthread_barrier_t bar;

__attribute__((noinline)) int kr_block(int id)
{
	pthread_barrier_wait(&bar);
	__asm__ volatile("" ::: "memory");
	return id * 10 + 3;
}

static void *block_worker(void *arg)
{
	int id = (int)(long)arg;
	return (void *)(long)(kr_block(id) == id * 10 + 3);
}

static int count_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	nentry++;
	return 0;
}

static int count_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	nret++;
	return 0;
}

static void run_blocked(int n)
{
	pthread_t th[16];
	UKT_EQ(pthread_barrier_init(&bar, NULL, (unsigned)n), 0);
	for (long i = 0; i < n; i++)
		UKT_EQ(pthread_create(&th[i], NULL, block_worker, (void *)i), 0);
	for (int i = 0; i < n; i++) {
		void *ok;
		UKT_EQ(pthread_join(th[i], &ok), 0);
		UKT_EQ((long)ok, 1);
	}
	pthread_barrier_destroy(&bar);
}

UKT_CASE(maxactive_one_concurrent_threads_nmissed)
{
	enum { N = 6 };
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe rp = { .kp.addr = (void *)kr_block, .handler = count_ret,
					.entry_handler = count_entry, .maxactive = 1 };
		kr_reg(&rp, opt);
		for (int round = 1; round <= 3; round++) {
			run_blocked(N);
			UKT_EQ(rp.nmissed, round * (N - 1));
			UKT_EQ(nentry, round);	/* missed: entry_handler skipped too */
			UKT_EQ(nret, round);
		}
		kr_unreg(&rp);
		nentry = nret = 0;
	}
}

UKT_CASE(maxactive_default_covers_blocked_threads)
{
	enum { N = 8 };
	struct kretprobe rp = { .kp.addr = (void *)kr_block, .handler = count_ret,
				.entry_handler = count_entry };	/* maxactive 0 */
	kr_reg(&rp, 1);
	run_blocked(N);
	UKT_EQ(rp.nmissed, 0);
	UKT_EQ(nentry, N);
	UKT_EQ(nret, N);
	kr_unreg(&rp);
}

/* ---- recursion ------------------------------------------------------------------------------ */

__attribute__((noinline)) long kr_rec(long d)
{
	if (d == 0)
		return 0;
	long r = kr_rec(d - 1);
	__asm__ volatile("" : "+r"(r) :: "memory");	/* no accumulator loop */
	return r + d * d;
}

#define REC_D 20
static volatile long rec_order[4 * REC_D];
static atomic_int nrec;

static int rec_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	*(long *)ri->data = (long)regs->di;
	return 0;
}

static int rec_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	long d = *(long *)ri->data;
	int i = nrec++;
	if (i < 2 * REC_D) {
		rec_order[2 * i] = d;
		rec_order[2 * i + 1] = (long)regs->ax;
	}
	return 0;
}

static long sumsq(long d)
{
	return d * (d + 1) * (2 * d + 1) / 6;
}

UKT_CASE(recursion_lifo_and_missed_depth)
{
	for (int opt = 0; opt < 2; opt++) {
		/* enough instances: every level, innermost first */
		struct kretprobe rp = { .kp.addr = (void *)kr_rec, .handler = rec_ret,
					.entry_handler = rec_entry, .data_size = sizeof(long),
					.maxactive = REC_D + 1 };
		kr_reg(&rp, opt);
		nrec = 0;
		UKT_EQ(kr_rec(REC_D), sumsq(REC_D));
		UKT_EQ(nrec, REC_D + 1);
		for (int i = 0; i <= REC_D; i++) {
			UKT_EQ(rec_order[2 * i], i);
			UKT_EQ(rec_order[2 * i + 1], sumsq(i));
		}
		UKT_EQ(rp.nmissed, 0);
		kr_unreg(&rp);

		/* half of them: the outer calls are probed, the deeper missed */
		int m = (REC_D + 1) / 2;
		struct kretprobe rh = { .kp.addr = (void *)kr_rec, .handler = rec_ret,
					.entry_handler = rec_entry, .data_size = sizeof(long),
					.maxactive = m };
		kr_reg(&rh, opt);
		for (int round = 1; round <= 2; round++) {
			nrec = 0;
			UKT_EQ(kr_rec(REC_D), sumsq(REC_D));
			UKT_EQ(nrec, m);
			UKT_EQ(rh.nmissed, round * (REC_D + 1 - m));
			for (int i = 0; i < m; i++) {
				long d = REC_D - m + 1 + i;
				UKT_EQ(rec_order[2 * i], d);
				UKT_EQ(rec_order[2 * i + 1], sumsq(d));
			}
		}
		kr_unreg(&rh);
	}
}

/* ---- instances a thread keeps ----------------------------------------------------------------- */

/*
 * A thread whose call returns keeps the instance for its next call when
 * another one is free; a call that finds none free takes one a thread
 * keeps.  keeper() makes one call of kr_rec(0) and then waits outside
 * any probe; kr_rec(d) needs d + 1 instances at once.
 */
static sem_t keep_done, keep_go;

static void *keeper(void *arg)
{
	(void)arg;
	long r = kr_rec(0);
	sem_post(&keep_done);
	while (sem_wait(&keep_go) && errno == EINTR)
		;
	return (void *)r;
}

UKT_CASE(kept_instances_serve_calls_that_need_them)
{
	for (int opt = 0; opt < 2; opt++) {
		/* maxactive 3: the keeper's return leaves two free, so it
		 * keeps its instance; kr_rec(2) then needs all three */
		struct kretprobe rp = { .kp.addr = (void *)kr_rec, .handler = count_ret,
					.maxactive = 3 };
		kr_reg(&rp, opt);
		nret = 0;
		UKT_EQ(sem_init(&keep_done, 0, 0), 0);
		UKT_EQ(sem_init(&keep_go, 0, 0), 0);
		pthread_t th;
		UKT_EQ(pthread_create(&th, NULL, keeper, NULL), 0);
		while (sem_wait(&keep_done) && errno == EINTR)
			;
		UKT_EQ(nret, 1);

		/* a fork child (only this thread in it) has all three too */
		fflush(NULL);
		pid_t pid = fork();
		UKT_ASSERT(pid >= 0);
		if (pid == 0) {
			long before = nret;
			int ok = kr_rec(2) == sumsq(2) && rp.nmissed == 0 && nret == before + 3;
			_exit(ok ? 0 : 1);
		}
		int st;
		UKT_EQ(waitpid(pid, &st, 0), pid);
		UKT_ASSERT(WIFEXITED(st));
		UKT_EQ(WEXITSTATUS(st), 0);

		/* and so does this thread, the keeper still there */
		for (int round = 0; round < 3; round++) {
			UKT_EQ(kr_rec(2), sumsq(2));
			UKT_EQ(rp.nmissed, 0);
		}
		UKT_EQ(nret, 1 + 3 * 3);
		sem_post(&keep_go);
		void *r;
		UKT_EQ(pthread_join(th, &r), 0);
		UKT_EQ((long)r, 0);

		/* the keeper gone: what it kept is back */
		UKT_EQ(kr_rec(2), sumsq(2));
		UKT_EQ(rp.nmissed, 0);
		kr_unreg(&rp);
		sem_destroy(&keep_done);
		sem_destroy(&keep_go);
	}
}

/* ---- batches and errors ---------------------------------------------------------------------- */

static atomic_int per_probe[8];
static struct kretprobe *batch[8];

static int batch_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	for (int i = 0; i < 8; i++)
		if (ri->rp == batch[i] && (long)regs->ax == 100 + i * 10 + 1)
			per_probe[i]++;
	return 0;
}

UKT_CASE(register_kretprobes_all_or_none)
{
	static struct kretprobe rps[8];
	char buf[4096];
	for (int i = 0; i < 8; i++) {
		memset(&rps[i], 0, sizeof(rps[i]));
		rps[i].kp.addr = (void *)kr_a[i];
		rps[i].handler = batch_ret;
		rps[i].maxactive = 2;
		batch[i] = &rps[i];
	}
	/* number 5 not at the entry: the whole batch refused */
	rps[5].kp.addr = NULL;
	rps[5].kp.symbol_name = "kr_a5";
	rps[5].kp.offset = 3;			/* add $51,%rax */
	UKT_EQ(register_kretprobes(batch, 8), -EINVAL);
	ukt_list_to(buf, sizeof(buf));
	UKT_STREQ(buf, "");
	for (int i = 0; i < 8; i++)
		UKT_EQ(kr_a[i](100), 100 + i * 10 + 1);
	for (int i = 0; i < 8; i++)
		UKT_EQ(per_probe[i], 0);
	/* the last one bad: the seven before are undone */
	rps[5].kp.offset = 0;
	rps[5].kp.addr = NULL;
	rps[7].kp.addr = (kprobe_opcode_t *)kr_a7 + 3;
	UKT_EQ(register_kretprobes(batch, 8), -EINVAL);
	ukt_list_to(buf, sizeof(buf));
	UKT_STREQ(buf, "");
	for (int i = 0; i < 8; i++)
		UKT_EQ(kr_a[i](100), 100 + i * 10 + 1);
	for (int i = 0; i < 8; i++)
		UKT_EQ(per_probe[i], 0);

	/* fixed: all of them (none was left registered: no "twice") */
	for (int i = 0; i < 8; i++) {
		rps[i].kp.addr = NULL;
		rps[i].kp.symbol_name = NULL;
		rps[i].kp.offset = 0;
		rps[i].kp.addr = (void *)kr_a[i];
	}
	UKT_EQ(register_kretprobes(batch, 8), 0);
	wait_for_kprobe_optimizer();
	ukt_list_to(buf, sizeof(buf));
	for (int i = 0; i < 8; i++) {
		char line[128];
		snprintf(line, sizeof(line), "%016lx  r  kr_a%d+0x0 [OPTIMIZED]\n",
			 (unsigned long)kr_a[i], i);
		if (!strstr(buf, line))
			UKT_FAIL("no line \"%s\" in:\n%s", line, buf);
	}
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < 8; i++)
			UKT_EQ(kr_a[i](100), 100 + i * 10 + 1);
	for (int i = 0; i < 8; i++)
		UKT_EQ(per_probe[i], 3);
	unregister_kretprobes(batch, 8);
	ukt_list_to(buf, sizeof(buf));
	UKT_STREQ(buf, "");
	for (int i = 0; i < 8; i++)
		UKT_EQ(kr_a[i](100), 100 + i * 10 + 1);
	for (int i = 0; i < 8; i++)
		UKT_EQ(per_probe[i], 3);
}

UKT_CASE(error_codes)
{
	struct kretprobe rp;

	/* not the function's entry: an instruction boundary inside it */
	memset(&rp, 0, sizeof(rp));
	rp.kp.symbol_name = "kr_a1";
	rp.kp.offset = 3;
	rp.handler = count_ret;
	UKT_EQ(register_kretprobe(&rp), -EINVAL);
	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (kprobe_opcode_t *)kr_a1 + 3;
	UKT_EQ(register_kretprobe(&rp), -EINVAL);
	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (kprobe_opcode_t *)kr_a1 + 1;	/* not even a boundary */
	int r = register_kretprobe(&rp);
	UKT_ASSERT(r == -EINVAL || r == -EILSEQ);

	memset(&rp, 0, sizeof(rp));
	rp.kp.symbol_name = "kr_no_such_function";
	UKT_EQ(register_kretprobe(&rp), -ENOENT);
	memset(&rp, 0, sizeof(rp));
	rp.kp.symbol_name = "kr_int";
	rp.kp.addr = (void *)kr_int;
	UKT_EQ(register_kretprobe(&rp), -EINVAL);	/* both */
	memset(&rp, 0, sizeof(rp));
	UKT_EQ(register_kretprobe(&rp), -EINVAL);	/* neither */
	UKT_EQ(register_kretprobe(NULL), -EINVAL);
	rp.kp.addr = (void *)kr_forbidden;
	UKT_EQ(register_kretprobe(&rp), -EINVAL);	/* NOKPROBE_SYMBOL */
	UKT_EQ(kr_forbidden(1), 3);
	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (void *)register_kretprobe;	/* ukprobes itself */
	UKT_EQ(register_kretprobe(&rp), -EINVAL);

	/* a failed registration left nothing behind */
	char buf[1024];
	ukt_list_to(buf, sizeof(buf));
	UKT_STREQ(buf, "");

	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (void *)kr_int;
	rp.handler = count_ret;
	UKT_EQ(register_kretprobe(&rp), 0);
	UKT_EQ(register_kretprobe(&rp), -EINVAL);	/* twice */
	UKT_EQ(kr_int(1, 1), 4);
	UKT_EQ(nret, 1);
	unregister_kretprobe(&rp);
	UKT_EQ((unsigned long)rp.kp.addr, (unsigned long)kr_int);
	unregister_kretprobe(&rp);			/* not registered: clears addr */
	UKT_ASSERT(rp.kp.addr == NULL);
	UKT_EQ(disable_kretprobe(&rp), -EINVAL);
	UKT_EQ(enable_kretprobe(&rp), -EINVAL);
	UKT_EQ(kr_int(1, 1), 4);
	UKT_EQ(nret, 1);
}

/* ---- unregister with calls in flight ---------------------------------------------------------- */

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_open;
static atomic_int inside;
static atomic_int unregistered, late_handler, stop_hammer;

__attribute__((noinline)) int kr_wait(int id)
{
	inside++;
	pthread_mutex_lock(&gate_mu);
	while (!gate_open)
		pthread_cond_wait(&gate_cv, &gate_mu);
	pthread_mutex_unlock(&gate_mu);
	__asm__ volatile("" ::: "memory");
	return id * 7 + 1;
}

static int late_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	(void)regs;
	if (unregistered)
		late_handler++;
	nret++;
	return 0;
}

static void *wait_worker(void *arg)
{
	int id = (int)(long)arg;
	return (void *)(long)(kr_wait(id) == id * 7 + 1);
}

static void *hammer_worker(void *arg)
{
	(void)arg;
	long bad = 0, n = 0;
	while (!stop_hammer || n < 1000) {
		if (kr_int((int)n, 3) != (int)n * 3 + 3)
			bad++;
		n++;
	}
	return (void *)bad;
}

static void gate(int open)
{
	pthread_mutex_lock(&gate_mu);
	gate_open = open;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate_mu);
}

UKT_CASE(unregister_with_calls_in_flight)
{
	enum { N = 4, H = 2 };
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe rw = { .kp.addr = (void *)kr_wait, .handler = late_ret,
					.maxactive = N };
		struct kretprobe rh = { .kp.addr = (void *)kr_int, .handler = late_ret,
					.maxactive = 8 };
		kr_reg(&rw, opt);
		kr_reg(&rh, opt);
		gate(0);
		inside = unregistered = late_handler = stop_hammer = 0;
		nret = 0;
		pthread_t th[N], hm[H];
		for (long i = 0; i < N; i++)
			UKT_EQ(pthread_create(&th[i], NULL, wait_worker, (void *)i), 0);
		for (int i = 0; i < H; i++)
			UKT_EQ(pthread_create(&hm[i], NULL, hammer_worker, NULL), 0);
		while (inside < N)
			usleep(1000);
		usleep(20000);	/* the hammers run a while probed */
		UKT_ASSERT(nret > 0);
		UKT_EQ(rw.nmissed, 0);
		struct kretprobe *both[] = { &rw, &rh };
		unregister_kretprobes(both, 2);
		unregistered = 1;
		UKT_EQ(kprobes_set_optimization(1), 0);
		usleep(20000);	/* and a while unprobed */
		stop_hammer = 1;
		gate(1);
		for (int i = 0; i < N; i++) {
			void *ok;
			UKT_EQ(pthread_join(th[i], &ok), 0);
			UKT_EQ((long)ok, 1);
		}
		for (int i = 0; i < H; i++) {
			void *bad;
			UKT_EQ(pthread_join(hm[i], &bad), 0);
			UKT_EQ((long)bad, 0);
		}
		UKT_EQ(late_handler, 0);
		/* the same function probed again: works from scratch */
		struct kretprobe again = { .kp.addr = (void *)kr_wait, .handler = count_ret,
					   .maxactive = 1 };
		kr_reg(&again, opt);
		nret = 0;
		UKT_EQ(kr_wait(3), 22);
		UKT_EQ(nret, 1);
		UKT_EQ(again.nmissed, 0);
		kr_unreg(&again);
	}
}

UKT_CASE(register_unregister_cycles_with_calls_in_flight_do_not_leak)
{
	/* far more instances over the cycles than could ever exist at once */
	for (int cycle = 0; cycle < 40; cycle++) {
		struct kretprobe rp = { .kp.addr = (void *)kr_wait, .handler = late_ret,
					.maxactive = 1000 };
		int r = register_kretprobe(&rp);
		if (r)
			UKT_FAIL("cycle %d: register_kretprobe = %d", cycle, r);
		gate(0);
		inside = 0;
		pthread_t th;
		UKT_EQ(pthread_create(&th, NULL, wait_worker, (void *)(long)cycle), 0);
		while (inside < 1)
			usleep(500);
		unregister_kretprobe(&rp);
		gate(1);
		void *ok;
		UKT_EQ(pthread_join(th, &ok), 0);
		UKT_EQ((long)ok, 1);
	}
}

/* ---- disable, enable, the list -------------------------------------------------------------- */

static int count_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	nentry++;
	return 0;
}

UKT_CASE(disable_enable_and_list)
{
	char buf[1024], want[1024];
	struct kretprobe rp = { .kp.addr = (void *)kr_int, .handler = count_ret };
	struct kretprobe rq = { .kp.symbol_name = "kr_long", .handler = count_ret,
				.kp.flags = KPROBE_FLAG_DISABLED };
	UKT_EQ(register_kretprobe(&rp), 0);
	UKT_EQ(register_kretprobe(&rq), 0);		/* registered disabled */
	wait_for_kprobe_optimizer();
	UKT_EQ(rq.kp.flags, KPROBE_FLAG_DISABLED);
	UKT_EQ(rp.kp.flags, KPROBE_FLAG_OPTIMIZED);
	ukt_list_to(buf, sizeof(buf));
	snprintf(want, sizeof(want),
		 "%016lx  r  kr_int+0x0 [OPTIMIZED]\n%016lx  r  kr_long+0x0 [DISABLED]\n",
		 (unsigned long)kr_int, (unsigned long)kr_long);
	UKT_STREQ(buf, want);
	UKT_EQ(kr_int(1, 2), 5);
	UKT_EQ(kr_long(0), 0x5a5a5a5a5a5aL);
	UKT_EQ(nret, 1);

	UKT_EQ(disable_kretprobe(&rp), 0);
	UKT_EQ(enable_kretprobe(&rq), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(rp.kp.flags & KPROBE_FLAG_DISABLED);
	UKT_EQ(rq.kp.flags, KPROBE_FLAG_OPTIMIZED);
	UKT_EQ(kr_int(1, 2), 5);
	UKT_EQ(kr_long(0), 0x5a5a5a5a5a5aL);
	UKT_EQ(nret, 2);
	ukt_list_to(buf, sizeof(buf));
	snprintf(want, sizeof(want),
		 "%016lx  r  kr_int+0x0 [DISABLED]\n%016lx  r  kr_long+0x0 [OPTIMIZED]\n",
		 (unsigned long)kr_int, (unsigned long)kr_long);
	UKT_STREQ(buf, want);

	/* the global knob */
	UKT_EQ(kprobes_set_enabled(0), 0);
	UKT_EQ(kr_long(0), 0x5a5a5a5a5a5aL);
	UKT_EQ(nret, 2);
	UKT_EQ(kprobes_set_enabled(1), 0);
	UKT_EQ(kr_long(0), 0x5a5a5a5a5a5aL);
	UKT_EQ(kr_int(1, 2), 5);
	UKT_EQ(nret, 3);

	UKT_EQ(enable_kretprobe(&rp), 0);
	/* a kprobe on the same function: both kinds listed and fired */
	struct kprobe kp = { .addr = (void *)kr_int, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	nentry = 0;
	UKT_EQ(kr_int(1, 2), 5);
	UKT_EQ(nret, 4);
	UKT_EQ(nentry, 1);
	ukt_list_to(buf, sizeof(buf));
	snprintf(want, sizeof(want), "%016lx  k  kr_int+0x0 [OPTIMIZED]\n",
		 (unsigned long)kr_int);
	UKT_ASSERT(strstr(buf, want));
	snprintf(want, sizeof(want), "%016lx  r  kr_int+0x0 [OPTIMIZED]\n",
		 (unsigned long)kr_int);
	UKT_ASSERT(strstr(buf, want));
	unregister_kprobe(&kp);
	unregister_kretprobe(&rp);
	unregister_kretprobe(&rq);
	ukt_list_to(buf, sizeof(buf));
	UKT_STREQ(buf, "");
	UKT_EQ(kr_int(1, 2), 5);
	UKT_EQ(nret, 4);
}

/* ---- stack traces --------------------------------------------------------------------------- */

#define BT_MAX 48
struct bt {
	int n;
	void *a[BT_MAX];
};
/* [probed?][depth 1..3] */
static struct bt bt_probed[2][4], bt_leaf[2][4], bt_handler[2][4], bt_caller[2][4];
static int bt_mode, bt_depth;
static volatile unsigned long bt_ret_addr;

static inline __attribute__((always_inline)) void bt_take(struct bt *b)
{
	b->n = backtrace(b->a, BT_MAX);
}

__attribute__((noinline)) void kr_bt_leaf(void)
{
	bt_take(&bt_leaf[bt_mode][bt_depth]);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) long kr_bt_probed(long x)
{
	bt_take(&bt_probed[bt_mode][bt_depth]);
	kr_bt_leaf();
	__asm__ volatile("" : "+r"(x) :: "memory");
	return x + 1;
}

__attribute__((noinline)) long kr_bt_c1(long x)
{
	long r = kr_bt_probed(x);
	bt_take(&bt_caller[bt_mode][bt_depth]);
	__asm__ volatile("" : "+r"(r) :: "memory");
	return r + 1;
}

__attribute__((noinline)) long kr_bt_c2(long x)
{
	long r = kr_bt_c1(x);
	__asm__ volatile("" : "+r"(r) :: "memory");
	return r + 1;
}

__attribute__((noinline)) long kr_bt_c3(long x)
{
	long r = kr_bt_c2(x);
	__asm__ volatile("" : "+r"(r) :: "memory");
	return r + 1;
}

int kr_bt_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)regs;
	bt_ret_addr = (unsigned long)ri->ret_addr;
	bt_take(&bt_handler[bt_mode][bt_depth]);
	return 0;
}

static const char *sym_of(void *a, const char **obj)
{
	Dl_info di;
	if (!dladdr(a, &di)) {
		*obj = "?";
		return NULL;
	}
	*obj = di.dli_fname ? di.dli_fname : "?";
	return di.dli_sname;
}

static void bt_print(const char *what, const struct bt *b)
{
	fprintf(stderr, "  %s:\n", what);
	for (int i = 0; i < b->n; i++) {
		const char *obj, *s = sym_of(b->a[i], &obj);
		fprintf(stderr, "    #%d %p %s (%s)\n", i, b->a[i], s ? s : "?", obj);
	}
}

static int is_tramp(void *a)
{
	const char *obj, *s = sym_of(a, &obj);
	return s && !strcmp(s, "kretprobe_trampoline");
}

static int is_ukp(void *a)
{
	const char *obj;
	sym_of(a, &obj);
	return strstr(obj, "libukprobes") != NULL;
}

static int name_is(void *a, const char *want)
{
	const char *obj, *s = sym_of(a, &obj);
	return s && !strcmp(s, want);
}

/* b without trampoline frames is ref, and every trampoline frame sits
 * right after the probed function, followed by its real caller */
static void bt_expect_same(const char *what, const struct bt *ref, const struct bt *b,
			   int ntramp)
{
	struct bt s = { 0 };
	int seen = 0;
	for (int i = 0; i < b->n; i++) {
		if (is_tramp(b->a[i])) {
			seen++;
			if (i == 0 || !name_is(b->a[i - 1], "kr_bt_probed") || i + 1 >= b->n ||
			    !name_is(b->a[i + 1], "kr_bt_c1") ||
			    (unsigned long)b->a[i + 1] != bt_ret_addr) {
				bt_print("unprobed", ref);
				bt_print(what, b);
				UKT_FAIL("%s: the trampoline frame is not between the probed "
					 "function and its real caller", what);
			}
			continue;
		}
		s.a[s.n++] = b->a[i];
	}
	if (seen != ntramp || s.n != ref->n || memcmp(s.a, ref->a, ref->n * sizeof(void *))) {
		bt_print("unprobed", ref);
		bt_print(what, b);
		UKT_FAIL("%s: %d trampoline frames (want %d); without them the trace %s", what,
			 seen, ntramp, s.n != ref->n ? "has another length" : "differs");
	}
}

__attribute__((noinline)) long kr_bt_call(int depth)
{
	long r;
	bt_depth = depth;
	switch (depth) {
	case 1: r = kr_bt_c1(10); break;
	case 2: r = kr_bt_c2(10); break;
	default: r = kr_bt_c3(10); break;
	}
	__asm__ volatile("" : "+r"(r) :: "memory");	/* not a tail call */
	return r;
}

UKT_CASE(backtrace_shows_real_callers)
{
	void *warm[4];
	backtrace(warm, 4);	/* glibc loads libgcc_s on the first call */
	/* run 0 unprobed, 1 breakpoint entry, 2 optimized entry: from the
	 * same call sites, so the traces can be compared address by address */
	for (int run = 0; run < 3; run++) {
		int opt = run - 1;
		struct kretprobe rp = { .kp.addr = (void *)kr_bt_probed, .handler = kr_bt_handler };
		if (run)
			kr_reg(&rp, opt);
		bt_mode = !!run;
		for (int d = 1; d <= 3; d++) {
			char what[64];
			memset(&bt_handler[1][d], 0, sizeof(struct bt));
			UKT_EQ(kr_bt_call(d), 10 + 1 + d);
			if (!run)
				continue;
			UKT_ASSERT(bt_handler[1][d].n > 0);
			/* the caller's own view is the same probed or not */
			snprintf(what, sizeof(what), "%s, depth %d, in the caller", path_name(opt), d);
			bt_expect_same(what, &bt_caller[0][d], &bt_caller[1][d], 0);
			snprintf(what, sizeof(what), "%s, depth %d, in the probed function",
				 path_name(opt), d);
			bt_expect_same(what, &bt_probed[0][d], &bt_probed[1][d], 1);
			snprintf(what, sizeof(what), "%s, depth %d, in its callee", path_name(opt), d);
			bt_expect_same(what, &bt_leaf[0][d], &bt_leaf[1][d], 1);

			/* the handler: itself, ukprobes' frames, then the real
			 * caller at the return address and what the caller sees */
			const struct bt *h = &bt_handler[1][d], *c = &bt_caller[0][d];
			int i = 1;
			while (i < h->n && is_ukp(h->a[i]))
				i++;
			if (!name_is(h->a[0], "kr_bt_handler") || i == 1 || i >= h->n ||
			    (unsigned long)h->a[i] != bt_ret_addr || h->n - i != c->n ||
			    memcmp(&h->a[i + 1], &c->a[1], (c->n - 1) * sizeof(void *))) {
				bt_print("the caller's", c);
				bt_print("the handler's", h);
				UKT_FAIL("%s, depth %d: the handler's trace is not the real "
					 "caller's", path_name(opt), d);
			}
			UKT_ASSERT(name_is(h->a[i], "kr_bt_c1"));
		}
		if (run)
			kr_unreg(&rp);
	}
}

/* ---- longjmp --------------------------------------------------------------------------------- */

static sigjmp_buf lj_env;
static int lj_kind;
extern void __longjmp_chk(struct __jmp_buf_tag env[1], int val) __attribute__((noreturn));

__attribute__((noinline)) void kr_lj_jump(void)
{
	__asm__ volatile("" ::: "memory");
	switch (lj_kind) {
	case 0: longjmp(lj_env, 1);
	case 1: _longjmp(lj_env, 1);
	case 2: siglongjmp(lj_env, 1);
	default: __longjmp_chk(lj_env, 1);
	}
}

/* depth levels deep; the innermost jumps out when asked */
__attribute__((noinline)) long kr_lj(long depth, long jump)
{
	long r;
	if (depth > 1)
		r = kr_lj(depth - 1, jump);
	else if (jump)
		kr_lj_jump(), r = 0;
	else
		r = 0;
	__asm__ volatile("" : "+r"(r) :: "memory");
	return r + depth;
}

UKT_CASE(longjmp_out_of_probed_frames_reclaims)
{
	static const char *const kinds[] = { "longjmp", "_longjmp", "siglongjmp",
					     "__longjmp_chk" };
	enum { ROUNDS = 400 };
	for (int opt = 0; opt < 2; opt++) {
		/* maxactive 1 and one probed frame; maxactive 4 and up to 4
		 * nested probed frames left by one jump */
		for (int maxd = 1; maxd <= 4; maxd += 3) {
			for (lj_kind = 0; lj_kind < 4; lj_kind++) {
				struct kretprobe rp = { .kp.addr = (void *)kr_lj,
							.handler = count_ret,
							.entry_handler = count_entry,
							.maxactive = maxd };
				kr_reg(&rp, opt);
				nret = nentry = 0;
				volatile long want_ret = 0, jumped = 0;
				for (volatile long i = 0; i < ROUNDS; i++) {
					long depth = i % maxd + 1, jump = i % 3 == 0;
					if (sigsetjmp(lj_env, lj_kind == 2) == 0) {
						long r = kr_lj(depth, jump);
						UKT_ASSERT(!jump);
						UKT_EQ(r, depth * (depth + 1) / 2);
						want_ret += depth;
					} else {
						UKT_ASSERT(jump);
						jumped++;
					}
				}
				UKT_ASSERT(jumped > 100);
				if (rp.nmissed || nret != want_ret)
					UKT_FAIL("%s, %s, maxactive %d: nmissed %d, %ld handler calls "
						 "for %ld returns", path_name(opt), kinds[lj_kind], maxd,
						 rp.nmissed, (long)nret, (long)want_ret);
				kr_unreg(&rp);
			}
		}
	}
}

/* ---- signals ----------------------------------------------------------------------------------- */

static volatile int sig_kind;	/* 0 raise(SIGUSR1), 1 SIGSEGV */

static void jump_handler(int sig)
{
	(void)sig;
	siglongjmp(lj_env, 1);
}

__attribute__((noinline)) long kr_sig(long x)
{
	if (x & 1) {
		if (sig_kind == 0)
			raise(SIGUSR1);
		else
			*(volatile long *)(uintptr_t)(x & 0x10) = 1;	/* NULL + 0 or 16 */
	}
	__asm__ volatile("" : "+r"(x) :: "memory");
	return x + 5;
}

__attribute__((noinline)) long kr_sig_outer(long x)
{
	long r = kr_sig(x);
	__asm__ volatile("" : "+r"(r) :: "memory");
	return r * 2;
}

/* rounds of calls, odd ones leave by siglongjmp from a signal handler */
static long sig_rounds(int rounds)
{
	volatile long bad = 0;
	for (volatile int i = 0; i < rounds; i++) {
		if (sigsetjmp(lj_env, 1) == 0) {
			long r = kr_sig_outer(i);
			if ((i & 1) || r != (i + 5) * 2)
				bad++;
		} else if (!(i & 1)) {
			bad++;
		}
	}
	return bad;
}

UKT_CASE(siglongjmp_from_signal_handler_reclaims)
{
	struct sigaction sa = { .sa_handler = jump_handler };
	sigemptyset(&sa.sa_mask);
	UKT_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
	UKT_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
	for (int opt = 0; opt < 2; opt++) {
		for (sig_kind = 0; sig_kind < 2; sig_kind++) {
			/* both levels probed: the outer one's instance is
			 * below the target of the jump too, and must stay */
			struct kretprobe rp = { .kp.addr = (void *)kr_sig, .handler = count_ret,
						.maxactive = 1 };
			struct kretprobe ro = { .kp.addr = (void *)kr_sig_outer,
						.handler = count_ret, .maxactive = 1 };
			kr_reg(&rp, opt);
			kr_reg(&ro, opt);
			nret = 0;
			UKT_EQ(sig_rounds(200), 0);
			if (rp.nmissed || ro.nmissed || nret != 200)
				UKT_FAIL("%s, %s: nmissed %d and %d, %ld handler calls for 200",
					 path_name(opt), sig_kind ? "SIGSEGV" : "raise", rp.nmissed,
					 ro.nmissed, (long)nret);
			kr_unreg(&rp);
			kr_unreg(&ro);
		}
	}
}

/* a thread whose signal stack lies above its own stack */
static void *altstack_worker(void *arg)
{
	stack_t ss = { .ss_sp = arg, .ss_size = 256 << 10 };
	if (sigaltstack(&ss, NULL))
		return (void *)-1L;
	return (void *)sig_rounds(200);
}

UKT_CASE(siglongjmp_from_altstack_handler_reclaims)
{
	struct sigaction sa = { .sa_handler = jump_handler, .sa_flags = SA_ONSTACK };
	sigemptyset(&sa.sa_mask);
	UKT_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
	UKT_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
	/* one mapping: the thread's stack below, the signal stack above */
	size_t st = 1 << 20, alt = 256 << 10;
	char *m = mmap(NULL, st + alt, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(m != MAP_FAILED);
	for (int opt = 0; opt < 2; opt++) {
		for (sig_kind = 0; sig_kind < 2; sig_kind++) {
			struct kretprobe rp = { .kp.addr = (void *)kr_sig, .handler = count_ret,
						.maxactive = 1 };
			kr_reg(&rp, opt);
			nret = 0;
			pthread_attr_t at;
			pthread_t th;
			void *bad;
			UKT_EQ(pthread_attr_init(&at), 0);
			UKT_EQ(pthread_attr_setstack(&at, m, st), 0);
			UKT_EQ(pthread_create(&th, &at, altstack_worker, m + st), 0);
			UKT_EQ(pthread_join(th, &bad), 0);
			pthread_attr_destroy(&at);
			UKT_EQ((long)bad, 0);
			if (rp.nmissed || nret != 100)
				UKT_FAIL("%s, %s: nmissed %d, %ld handler calls for 100 returns",
					 path_name(opt), sig_kind ? "SIGSEGV" : "raise", rp.nmissed,
					 (long)nret);
			kr_unreg(&rp);
		}
	}
}

/* the interrupted thread is inside the probed function; the signal
 * handler calls it too: two instances of one thread, LIFO */
static volatile long nested_order[4];
static atomic_int nnested;

static int nested_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	int i = nnested++;
	if (i < 4)
		nested_order[i] = (long)regs->ax;
	return 0;
}

static volatile long in_sig_result;

static void calling_handler(int sig)
{
	(void)sig;
	in_sig_result = kr_long(0x100);
}

__attribute__((noinline)) long kr_raiser(long x)
{
	raise(SIGUSR2);
	__asm__ volatile("" : "+r"(x) :: "memory");
	return x + 1;
}

UKT_CASE(signal_handler_calls_probed_function_inside_it)
{
	struct sigaction sa = { .sa_handler = calling_handler };
	sigemptyset(&sa.sa_mask);
	UKT_EQ(sigaction(SIGUSR2, &sa, NULL), 0);
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe ra = { .kp.addr = (void *)kr_raiser, .handler = nested_ret,
					.maxactive = 1 };
		struct kretprobe rl = { .kp.addr = (void *)kr_long, .handler = nested_ret,
					.maxactive = 1 };
		kr_reg(&ra, opt);
		kr_reg(&rl, opt);
		nnested = 0;
		UKT_EQ(kr_raiser(41), 42);
		UKT_EQ(in_sig_result, 0x100L ^ 0x5a5a5a5a5a5aL);
		UKT_EQ(nnested, 2);
		UKT_EQ(nested_order[0], 0x100L ^ 0x5a5a5a5a5a5aL);
		UKT_EQ(nested_order[1], 42);
		UKT_EQ(ra.nmissed + rl.nmissed, 0);
		kr_unreg(&ra);
		kr_unreg(&rl);
	}
}

/* ---- threads that never return ------------------------------------------------------------------ */

static atomic_int exit_inside;

/* how 1: pthread_exit; 2: wait to be cancelled; else return */
__attribute__((noinline)) long kr_exit(long how)
{
	if (how == 1)
		pthread_exit((void *)77L);
	if (how == 2) {
		exit_inside = 1;
		for (;;)
			pause();	/* a cancellation point */
	}
	__asm__ volatile("" : "+r"(how) :: "memory");
	return how + 1000;
}

/* a thread function that calls the probed function (not a tail call) */
static void *exit_worker(void *arg)
{
	long r = kr_exit((long)arg);
	__asm__ volatile("" : "+r"(r) :: "memory");
	return (void *)r;
}

/* a thread start routine probed itself: the same, one frame up */
__attribute__((noinline)) void *kr_thread_main(void *arg)
{
	long how = (long)arg;
	if (how == 1)
		pthread_exit((void *)77L);
	if (how == 2) {
		exit_inside = 1;
		for (;;)
			pause();
	}
	__asm__ volatile("" : "+r"(how) :: "memory");
	return (void *)(how + 1000);
}

static void wait_inside(void)
{
	for (int i = 0; !exit_inside; i++) {
		if (i > 5000)
			UKT_FAIL("the thread never got inside the probed function");
		usleep(200);
	}
}

/* threads leaving the probed function by pthread_exit and by
 * cancellation, with maxactive 1: each must give its instance back */
static void exit_rounds(void *(*start)(void *), struct kretprobe *rp, int opt)
{
	for (int i = 0; i < 20; i++) {
		pthread_t th;
		void *r;
		UKT_EQ(pthread_create(&th, NULL, start, (void *)1L), 0);
		UKT_EQ(pthread_join(th, &r), 0);
		UKT_EQ((long)r, 77);

		exit_inside = 0;
		UKT_EQ(pthread_create(&th, NULL, start, (void *)2L), 0);
		wait_inside();
		UKT_EQ(pthread_cancel(th), 0);
		UKT_EQ(pthread_join(th, &r), 0);
		UKT_ASSERT(r == PTHREAD_CANCELED);

		UKT_EQ(pthread_create(&th, NULL, start, (void *)0L), 0);
		UKT_EQ(pthread_join(th, &r), 0);
		UKT_EQ((long)r, 1000);		/* still probed */
		if (rp->nmissed || nret != i + 1 || nentry != 3 * (i + 1))
			UKT_FAIL("%s, round %d: nmissed %d, %ld entries, %ld handler calls",
				 path_name(opt), i, rp->nmissed, (long)nentry, (long)nret);
	}
}

UKT_CASE(pthread_exit_and_cancel_inside_probed_function_reclaim)
{
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe rp = { .kp.addr = (void *)kr_exit, .handler = count_ret,
					.entry_handler = count_entry, .maxactive = 1 };
		kr_reg(&rp, opt);
		nret = nentry = 0;
		exit_rounds(exit_worker, &rp, opt);
		kr_unreg(&rp);
	}
}

UKT_CASE(pthread_exit_and_cancel_in_probed_start_routine_reclaim)
{
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe rp = { .kp.addr = (void *)kr_thread_main, .handler = count_ret,
					.entry_handler = count_entry, .maxactive = 1 };
		kr_reg(&rp, opt);
		nret = nentry = 0;
		exit_rounds(kr_thread_main, &rp, opt);
		kr_unreg(&rp);
	}
}

/* ---- fork ---------------------------------------------------------------------------------------- */

__attribute__((noinline)) long kr_fork(long x)
{
	pid_t pid = fork();
	__asm__ volatile("" : "+r"(x) :: "memory");
	return pid == 0 ? x + 1 : pid > 0 ? x + 2 : -1;
}

UKT_CASE(fork_inside_probed_function)
{
	for (int opt = 0; opt < 2; opt++) {
		struct kretprobe rp = { .kp.addr = (void *)kr_fork, .handler = record_ret,
					.maxactive = 1 };
		kr_reg(&rp, opt);
		nret = 0;
		long r = kr_fork(10);
		if (r == 11) {
			/* the child: returned through its copy of the stub */
			_exit(nret == 1 && last.ax == 11 ? 0 : 3);
		}
		UKT_EQ(r, 12);
		UKT_EQ(nret, 1);
		UKT_EQ(last.ax, 12);
		int st;
		UKT_ASSERT(wait(&st) > 0);
		UKT_ASSERT(WIFEXITED(st));
		UKT_EQ(WEXITSTATUS(st), 0);
		r = kr_fork(20);
		if (r == 21)
			_exit(nret == 2 && last.ax == 21 ? 0 : 3);
		UKT_EQ(r, 22);
		UKT_ASSERT(wait(&st) > 0);
		UKT_ASSERT(WIFEXITED(st));
		UKT_EQ(WEXITSTATUS(st), 0);
		UKT_EQ(nret, 2);
		UKT_EQ(rp.nmissed, 0);
		kr_unreg(&rp);
	}
}
