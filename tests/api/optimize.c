/*
 * Jump-optimised probes (kprobes.txt 1.4) as users rely on them.
 *
 * Every probe is first a breakpoint probe; one without a post_handler,
 * enabled, with no other probe inside its region (the whole instructions
 * covering 5 bytes from its address) is queued, and once
 * wait_for_kprobe_optimizer() has returned it runs through a jump:
 * p->flags has KPROBE_FLAG_OPTIMIZED and kprobes_list() says [OPTIMIZED].
 * Whatever path a hit takes, handlers see and change the same registers,
 * and nothing a handler does to the vector, x87 or MXCSR state, the
 * direction flag or the stack below sp reaches the probed code.
 *
 * Most cases run the same checks twice: right after registration (or
 * with the optimization knob off: the breakpoint path) and after the
 * optimizer has run (the jump path), so a difference between the paths
 * shows up as a failure of the second run only.
 *
 * Cases:
 *   optimized_after_wait_listed_and_jumps   breakpoint first (int3 with the
 *                         knob off), then a jump (e9 rel32 out of the
 *                         function), the list line, regs at the probe,
 *                         knob off/on, unregister restores every byte
 *   two_probes_on_one_address_both_optimized
 *   post_handler_probe_at_same_address_unoptimizes   and its post_handler
 *                         runs on the very next call; unregistering it
 *                         lets the optimizer optimize again
 *   probe_inside_region_joins_a_run_or_unoptimizes   a probe at +3 joins
 *                         the jump's run (both optimised, each fires),
 *                         or, with a post_handler, unoptimises it;
 *                         -EILSEQ inside an instruction under the jump
 *   probe_after_region_both_optimized        adjacent regions
 *   disabled_probe_is_not_optimized          flag, enable/disable, global
 *                         kprobes_set_enabled()
 *   optimization_knob_unoptimizes_everything
 *   every_register_seen_and_changed_optimized
 *   handler_moves_stack_pointer_optimized
 *   redirect_to_another_function_optimized   ip changed, return 1: honoured
 *   redirect_to_return_address_skips_the_function
 *   recursion_counts_nmissed_optimized
 *   probe_without_pre_handler_optimized   only a fault_handler: runs
 *                         nothing, the calls' results unchanged
 *   optimizer_thread_runs_no_handlers   an optimised probe on nanosleep,
 *                         where the optimizer thread sleeps before each
 *                         batch: only the test's own calls reach it
 *   optimizer_thread_runs_no_return_handlers   the same with a kretprobe
 *   fault_in_handler_goes_to_fault_handler_optimized
 *   unhandled_fault_in_handler_reaches_program_handler_optimized
 *   site_optimized_while_program_handles_handler_fault   a breakpoint
 *                         hit's handler faults; the program's handler
 *                         waits until the site is optimised and returns:
 *                         the probed code goes on correctly
 *   program_signal_handler_fault_on_its_stack_is_the_programs   a
 *                         handler (optimised kprobe pre, or return) sends
 *                         its thread SIGUSR1; the program's SIGUSR1
 *                         handler, on an alternate signal stack, faults on
 *                         purpose and its SIGSEGV handler siglongjmps back:
 *                         the probe's fault_handler never sees that fault
 *                         and the SIGUSR1 handler finishes every time
 *   handler_fault_after_a_returned_signal_is_the_handlers   a handler that
 *                         had a program signal delivered and returned (its
 *                         frame's words stay below sp), or a missed nested
 *                         hit, then faults deeper, or reads a bad pointer
 *                         argument with snprintf: its fault_handler takes
 *                         each fault (the program has no SIGSEGV handler)
 *   handlers_without_regs_keep_every_register_and_flag   leaf handlers
 *                         that never read regs (the bare fast path, which
 *                         saves only rax, rcx, rdi and the flags) and ones
 *                         that write rdx, rsi, r11, rbx or read regs (a
 *                         path that builds pt_regs): every register, CF
 *                         and all six status flags come through
 *   handler_put_in_place_of_another_sees_registers   p->pre_handler
 *                         changed on an optimised probe: the new handler
 *                         sees every register
 *   nonzero_answer_without_redirect_fires_again   1 with regs->ip as it
 *                         was: the probe point runs again, on every path
 *   handler_fault_without_regs_taken_or_the_programs   a bare handler's
 *                         fault: its fault_handler takes it, or the
 *                         program's SIGSEGV handler sees the probe point's
 *                         registers and changes three, which the probed
 *                         code then gets; errno kept
 *   return_probe_on_a_bare_handler_keeps_registers   a kretprobe on a bare
 *                         handler, whose detour writes r11 at its entry:
 *                         the nested hit is missed, the registers kept
 *   program_signal_handler_fault_in_a_bare_hit_is_the_programs   a
 *                         SIGALRM handler interrupting a bare handler
 *                         faults on purpose: the program's SIGSEGV handler
 *                         gets it, the probe's fault_handler does not,
 *                         and the probed code keeps every register
 *   vectors_live_in_sse_loop_survive_handler      16 xmm live mid-loop,
 *                         two rounding modes, subnormals (FTZ/DAZ)
 *   vectors_live_in_avx_loop_survive_handler      16 ymm live mid-loop
 *   vectors_live_in_avx512_loop_survive_handler   zmm0-31 and k1-7 live
 *   zmm0_15_live_survive_handler   zmm0-15 live whole, 16-31 and the
 *                         masks written after the probe: the detour saves
 *                         0-15 zmm-wide, and all 512 bits come through
 *                         mid-loop; the handler loads garbage into all
 *   double_arguments_at_entry_survive_handler     xmm0-7 at a C entry
 *   caller_xmm_values_kept_across_call_survive    gcc's IPA-RA keeps values
 *                         in caller-saved xmm registers across a call to a
 *                         local function known not to touch them
 *   caller_ymm_values_kept_across_call_survive    the same with ymm
 *   x87_stack_live_and_control_word_survive       80-bit values on the x87
 *                         stack across the probe; the handler gets an
 *                         empty stack and may fninit/fldcw
 *   mxcsr_and_x87_cw_do_not_leak_from_integer_code
 *   direction_flag_set_at_the_probe          DF=1 in the probed code: the
 *                         handler runs with DF=0, the code keeps DF=1
 *   red_zone_and_stack_alignment             the 128 bytes below sp
 *                         survive; handlers run on an aligned stack
 *                         whatever sp is at the probe
 *   fork_child_changes_do_not_reach_parent
 *   punned_jump_into_region, punned_region_crosses_function_end,
 *   punned_call_inside_region, punned_indirect_jump_in_function
 *                         with UKPROBES_VERBOSE=1 (the case re-runs
 *                         itself with it in its environment): no region
 *                         of whole instructions there, so a "punned jump:
 *                         <reason>" line on stderr, and the probe is
 *                         optimised by a punned jump, exact
 *   padding_after_ret_may_belong_to_region   optimized, no refusal line
 *   probe_on_dead_padding_leaves_the_jump_before_it   every instruction
 *                         probed, the nop after a jmp too: the jmp is
 *                         optimised over the nop's int3, which comes back
 *                         with the knob off, a disable/enable, all
 *                         disabled; the nop's probe says why it is not
 *   dead_padding_probe_changed_while_threads_call   two threads calling
 *                         while the nop's probe is disabled, enabled,
 *                         registered again and the knob turned: results
 *                         right, the nop's probe never hit
 *   every_instruction_registered_with_the_knob_off_optimised_when_on
 *   lean_and_vector_handlers_share_a_site    16 xmm live at the probe: a
 *                         handler that keeps to the general registers
 *                         (the lean trampoline, see tests/unit/handlers.c)
 *                         alone, then with a vector-dirtying
 *                         one at the same address, then alone again;
 *                         results identical at every step
 */
#include <errno.h>
#include <fenv.h>
#include <immintrin.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>
#include <ukprobes.h>
#include "ukt.h"

/* ---- targets ------------------------------------------------------------------ */

/* o_regs: every general register loaded with a known value, CF set, then
 * o_regs_probe (a 5-byte nop), then all of them stored here. */
unsigned long o_regs_out[17];	/* ax bx cx dx si di bp r8..r15 flags sp */
unsigned long o_regs_sp;	/* sp at o_regs_probe */

long o_chain(long x);		/* x + 3: mov; add $1 (+3); add $2 (+7); ret */
#define o_chain_add1 ukt_label("o_chain_add1")
#define o_chain_add2 ukt_label("o_chain_add2")
long o_chain_b(long x);		/* x + 9, the same shape */
long o_quad(long x);		/* x + 10: mov; add $1 (+3); add $2 (+7); add $3; add $4; ret */
#define o_quad_add2 ukt_label("o_quad_add2")
long o_caller(long x);		/* calls o_chain; the return address is o_caller_ret */
#define o_caller_ret ukt_label("o_caller_ret")
void o_regs(void);
#define o_regs_probe ukt_label("o_regs_probe")
long o_sp(void);		/* 64 unless a handler moves sp */
#define o_sp_insn ukt_label("o_sp_insn")
long o_redzone(long x);		/* 16 values in the red zone across o_redzone_probe */
#define o_redzone_probe ukt_label("o_redzone_probe")
long o_align16(long x);		/* x + 7, sp 16-aligned at the probe */
#define o_align16_probe ukt_label("o_align16_probe")
long o_align_odd(long x);	/* x + 9, sp = 16n + 5 at the probe */
#define o_align_odd_probe ukt_label("o_align_odd_probe")
unsigned long o_flags(long set);	/* all status flags set (1) or clear (0) across
					   o_flags_probe; returns the flags after it */
#define o_flags_probe ukt_label("o_flags_probe")
unsigned long o_std(void);	/* DF set across o_std_probe; returns the flags after it */
#define o_std_probe ukt_label("o_std_probe")
void o_x87(const double *in, double *out);	/* out[0] = in[0] + in[1] * in[2], 80-bit */
#define o_x87_probe ukt_label("o_x87_probe")
void o_vloop(const double *a, long n, const double *m, double *out);
#define o_vloop_head ukt_label("o_vloop_head")
#define o_vloop_mid ukt_label("o_vloop_mid")
void o_yloop(const double *a, long n, const double *m, double *out);
#define o_yloop_head ukt_label("o_yloop_head")
#define o_yloop_mid ukt_label("o_yloop_mid")
long o_jin(long x, long n);	/* x * n (n >= 1); a jump back to +2 */
long o_tiny(long x);		/* x, 3 bytes, o_tiny_next right behind */
long o_tiny_next(long x);	/* x + 2 */
long o_callin(long x);		/* x + 10 through o_callin_call: call *%rax */
#define o_callin_call ukt_label("o_callin_call")
long o_ijmp(long x);		/* x + 1 through an unbounded relative jump table */
long o_sw(long x, long y);	/* switch (x) 0..3: 10, 20, 30, 40; else -1 */
long o_sw_in(long x, long y);	/* switch (x) 0..1: 21 (case 0 falls into 1); else -1 */
extern char o_sw_in_c0[];	/* its case 0 */
long o_swloop(long n, long y);	/* sum of 1 + i % 4, i < n, a table in a loop */
long o_swbad(long n, long y);	/* the same; y == 12345 would spoil the table register */
long o_swnarrow(long x, long y); /* switch ((unsigned char)(x - 5)) 0..2: 7, 8, 9; else 0 */
long o_swbase(long x, long y);	/* a byte index 0..3: 11, 12, 13, 14; entries from a label */
long o_swlea(long x, long y);	/* switch (x) 0..2: 5, 6, 7; else 0; the add as a lea */
long o_jcin(long x, long y);	/* x ? 5 : 7, the je inside the entry's region */
long o_sysin(long nr, long y);	/* system call nr (no arguments); returns the rcx it leaves */
long o_tail(long x, long (*const *fp)(long));	/* (*fp)(x + 1), a tail call */
long o_lref(long x, long n);	/* x; +2 is reached through a lea in o_lref_via */
long o_lref_via(long x);	/* x: jumps to o_lref+2 through a register */
long o_dref(long x, long n);	/* x; +2 is reached through a pointer in data */
long o_dref_via(long x);	/* x: jumps to o_dref+2 through that pointer */
long o_ret0(void);		/* 0: xor %eax,%eax; ret; padding */
long o_padjmp(long x);		/* x + 3: mov; add $1 (+3); jmp (+7) over a 4-byte
				   nop (+9, dead padding); add $2 (+13); ret */

__asm__(
	".text\n"
	".p2align 4\n"
	".globl o_chain\n.type o_chain,@function\n"
	"o_chain: mov %rdi,%rax\n"
	".globl o_chain_add1\no_chain_add1: add $1,%rax\n"
	".globl o_chain_add2\no_chain_add2: add $2,%rax\n"
	" ret\n.size o_chain,.-o_chain\n"

	".p2align 4\n"
	".globl o_chain_b\n.type o_chain_b,@function\n"
	"o_chain_b: mov %rdi,%rax\n add $4,%rax\n add $5,%rax\n ret\n"
	".size o_chain_b,.-o_chain_b\n"

	".p2align 4\n"
	".globl o_quad\n.type o_quad,@function\n"
	"o_quad: mov %rdi,%rax\n add $1,%rax\n"
	".globl o_quad_add2\no_quad_add2: add $2,%rax\n add $3,%rax\n add $4,%rax\n ret\n"
	".size o_quad,.-o_quad\n"

	".p2align 4\n"
	".globl o_caller\n.type o_caller,@function\n"
	"o_caller: sub $8,%rsp\n call o_chain\n"
	".globl o_caller_ret\no_caller_ret: add $8,%rsp\n ret\n"
	".size o_caller,.-o_caller\n"

	".p2align 4\n"
	".globl o_regs\n.type o_regs,@function\n"
	"o_regs: push %rbx\n push %rbp\n push %r12\n push %r13\n push %r14\n push %r15\n"
	" mov %rsp,o_regs_sp(%rip)\n"
	" movabs $0x0123456789000000,%rax\n movabs $0x0123456789000111,%rbx\n"
	" movabs $0x0123456789000222,%rcx\n movabs $0x0123456789000333,%rdx\n"
	" movabs $0x0123456789000444,%rsi\n movabs $0x0123456789000555,%rdi\n"
	" movabs $0x0123456789000666,%rbp\n movabs $0x0123456789000777,%r8\n"
	" movabs $0x0123456789000888,%r9\n movabs $0x0123456789000999,%r10\n"
	" movabs $0x0123456789000aaa,%r11\n movabs $0x0123456789000bbb,%r12\n"
	" movabs $0x0123456789000ccc,%r13\n movabs $0x0123456789000ddd,%r14\n"
	" movabs $0x0123456789000eee,%r15\n"
	" stc\n"
	".globl o_regs_probe\no_regs_probe: nopl 0x0(%rax,%rax,1)\n"
	" mov %rax,o_regs_out+0(%rip)\n mov %rbx,o_regs_out+8(%rip)\n"
	" mov %rcx,o_regs_out+16(%rip)\n mov %rdx,o_regs_out+24(%rip)\n"
	" mov %rsi,o_regs_out+32(%rip)\n mov %rdi,o_regs_out+40(%rip)\n"
	" mov %rbp,o_regs_out+48(%rip)\n mov %r8,o_regs_out+56(%rip)\n"
	" mov %r9,o_regs_out+64(%rip)\n mov %r10,o_regs_out+72(%rip)\n"
	" mov %r11,o_regs_out+80(%rip)\n mov %r12,o_regs_out+88(%rip)\n"
	" mov %r13,o_regs_out+96(%rip)\n mov %r14,o_regs_out+104(%rip)\n"
	" mov %r15,o_regs_out+112(%rip)\n pushfq\n pop o_regs_out+120(%rip)\n"
	" mov %rsp,o_regs_out+128(%rip)\n"
	" pop %r15\n pop %r14\n pop %r13\n pop %r12\n pop %rbp\n pop %rbx\n ret\n"
	".size o_regs,.-o_regs\n"

	/* o_flags(1): all six status flags set at o_flags_probe; o_flags(0):
	 * all clear; returns the flags after it */
	".p2align 4\n"
	".globl o_flags\n.type o_flags,@function\n"
	"o_flags: test $1,%edi\n jz 1f\n"
	" mov $0x7f,%cl\n add $1,%cl\n mov $0xd7,%ah\n sahf\n jmp 2f\n"
	"1: xor %ecx,%ecx\n add $0,%cl\n mov $0x02,%ah\n sahf\n"
	"2:\n"
	".globl o_flags_probe\no_flags_probe: nopl 0x0(%rax,%rax,1)\n"
	" pushfq\n pop %rax\n ret\n"
	".size o_flags,.-o_flags\n"

	".p2align 4\n"
	".globl o_sp\n.type o_sp,@function\n"
	"o_sp: mov %rsp,%rax\n"
	".globl o_sp_insn\no_sp_insn: lea -64(%rsp),%rsp\n"
	" sub %rsp,%rax\n add %rax,%rsp\n ret\n.size o_sp,.-o_sp\n"

	".p2align 4\n"
	".globl o_redzone\n.type o_redzone,@function\n"
	"o_redzone: xor %ecx,%ecx\n"
	"1: lea (%rdi,%rcx),%rax\n mov %rax,-128(%rsp,%rcx,8)\n inc %rcx\n cmp $16,%rcx\n jne 1b\n"
	".globl o_redzone_probe\no_redzone_probe: nopl 0x0(%rax,%rax,1)\n"
	" xor %eax,%eax\n xor %ecx,%ecx\n"
	"2: imul $31,%rax,%rax\n add -128(%rsp,%rcx,8),%rax\n inc %rcx\n cmp $16,%rcx\n jne 2b\n"
	" ret\n.size o_redzone,.-o_redzone\n"

	".p2align 4\n"
	".globl o_align16\n.type o_align16,@function\n"
	"o_align16: push %rbx\n"
	".globl o_align16_probe\no_align16_probe: nopl 0x0(%rax,%rax,1)\n"
	" lea 7(%rdi),%rax\n pop %rbx\n ret\n.size o_align16,.-o_align16\n"

	".p2align 4\n"
	".globl o_align_odd\n.type o_align_odd,@function\n"
	"o_align_odd: sub $3,%rsp\n"
	".globl o_align_odd_probe\no_align_odd_probe: nopl 0x0(%rax,%rax,1)\n"
	" lea 9(%rdi),%rax\n add $3,%rsp\n ret\n.size o_align_odd,.-o_align_odd\n"

	".p2align 4\n"
	".globl o_std\n.type o_std,@function\n"
	"o_std: std\n"
	".globl o_std_probe\no_std_probe: nopl 0x0(%rax,%rax,1)\n"
	" pushfq\n pop %rax\n cld\n ret\n.size o_std,.-o_std\n"

	".p2align 4\n"
	".globl o_x87\n.type o_x87,@function\n"
	"o_x87: fldl (%rdi)\n fldl 8(%rdi)\n fmull 16(%rdi)\n"
	".globl o_x87_probe\no_x87_probe: nopl 0x0(%rax,%rax,1)\n"
	" faddp\n fstpl (%rsi)\n ret\n.size o_x87,.-o_x87\n"

	/* acc[i] = (acc[i] + a[8j+i]) * m[i]: xmm0-7 accumulate, xmm8-15
	 * hold the multipliers, all 16 live at both probe points */
	".p2align 4\n"
	".globl o_vloop\n.type o_vloop,@function\n"
	"o_vloop: movsd 0(%rdx),%xmm8\n movsd 8(%rdx),%xmm9\n movsd 16(%rdx),%xmm10\n"
	" movsd 24(%rdx),%xmm11\n movsd 32(%rdx),%xmm12\n movsd 40(%rdx),%xmm13\n"
	" movsd 48(%rdx),%xmm14\n movsd 56(%rdx),%xmm15\n"
	" xorpd %xmm0,%xmm0\n xorpd %xmm1,%xmm1\n xorpd %xmm2,%xmm2\n xorpd %xmm3,%xmm3\n"
	" xorpd %xmm4,%xmm4\n xorpd %xmm5,%xmm5\n xorpd %xmm6,%xmm6\n xorpd %xmm7,%xmm7\n"
	" xor %eax,%eax\n test %rsi,%rsi\n jle 2f\n"
	".globl o_vloop_head\no_vloop_head:\n"
	"1: addsd (%rdi,%rax,8),%xmm0\n mulsd %xmm8,%xmm0\n"
	" addsd 8(%rdi,%rax,8),%xmm1\n mulsd %xmm9,%xmm1\n"
	" addsd 16(%rdi,%rax,8),%xmm2\n mulsd %xmm10,%xmm2\n"
	" addsd 24(%rdi,%rax,8),%xmm3\n mulsd %xmm11,%xmm3\n"
	".globl o_vloop_mid\no_vloop_mid:\n"
	" addsd 32(%rdi,%rax,8),%xmm4\n mulsd %xmm12,%xmm4\n"
	" addsd 40(%rdi,%rax,8),%xmm5\n mulsd %xmm13,%xmm5\n"
	" addsd 48(%rdi,%rax,8),%xmm6\n mulsd %xmm14,%xmm6\n"
	" addsd 56(%rdi,%rax,8),%xmm7\n mulsd %xmm15,%xmm7\n"
	" add $8,%rax\n cmp %rsi,%rax\n jl 1b\n"
	"2: movsd %xmm0,0(%rcx)\n movsd %xmm1,8(%rcx)\n movsd %xmm2,16(%rcx)\n"
	" movsd %xmm3,24(%rcx)\n movsd %xmm4,32(%rcx)\n movsd %xmm5,40(%rcx)\n"
	" movsd %xmm6,48(%rcx)\n movsd %xmm7,56(%rcx)\n ret\n"
	".size o_vloop,.-o_vloop\n"

	/* the same with ymm: 4 lanes each, 32 doubles per iteration */
	".p2align 4\n"
	".globl o_yloop\n.type o_yloop,@function\n"
	"o_yloop: vmovupd 0(%rdx),%ymm8\n vmovupd 32(%rdx),%ymm9\n vmovupd 64(%rdx),%ymm10\n"
	" vmovupd 96(%rdx),%ymm11\n vmovupd 128(%rdx),%ymm12\n vmovupd 160(%rdx),%ymm13\n"
	" vmovupd 192(%rdx),%ymm14\n vmovupd 224(%rdx),%ymm15\n"
	" vxorpd %ymm0,%ymm0,%ymm0\n vxorpd %ymm1,%ymm1,%ymm1\n vxorpd %ymm2,%ymm2,%ymm2\n"
	" vxorpd %ymm3,%ymm3,%ymm3\n vxorpd %ymm4,%ymm4,%ymm4\n vxorpd %ymm5,%ymm5,%ymm5\n"
	" vxorpd %ymm6,%ymm6,%ymm6\n vxorpd %ymm7,%ymm7,%ymm7\n"
	" xor %eax,%eax\n test %rsi,%rsi\n jle 2f\n"
	".globl o_yloop_head\no_yloop_head:\n"
	"1: vaddpd (%rdi,%rax,8),%ymm0,%ymm0\n vmulpd %ymm8,%ymm0,%ymm0\n"
	" vaddpd 32(%rdi,%rax,8),%ymm1,%ymm1\n vmulpd %ymm9,%ymm1,%ymm1\n"
	" vaddpd 64(%rdi,%rax,8),%ymm2,%ymm2\n vmulpd %ymm10,%ymm2,%ymm2\n"
	" vaddpd 96(%rdi,%rax,8),%ymm3,%ymm3\n vmulpd %ymm11,%ymm3,%ymm3\n"
	".globl o_yloop_mid\no_yloop_mid:\n"
	" vaddpd 128(%rdi,%rax,8),%ymm4,%ymm4\n vmulpd %ymm12,%ymm4,%ymm4\n"
	" vaddpd 160(%rdi,%rax,8),%ymm5,%ymm5\n vmulpd %ymm13,%ymm5,%ymm5\n"
	" vaddpd 192(%rdi,%rax,8),%ymm6,%ymm6\n vmulpd %ymm14,%ymm6,%ymm6\n"
	" vaddpd 224(%rdi,%rax,8),%ymm7,%ymm7\n vmulpd %ymm15,%ymm7,%ymm7\n"
	" add $32,%rax\n cmp %rsi,%rax\n jl 1b\n"
	"2: vmovupd %ymm0,0(%rcx)\n vmovupd %ymm1,32(%rcx)\n vmovupd %ymm2,64(%rcx)\n"
	" vmovupd %ymm3,96(%rcx)\n vmovupd %ymm4,128(%rcx)\n vmovupd %ymm5,160(%rcx)\n"
	" vmovupd %ymm6,192(%rcx)\n vmovupd %ymm7,224(%rcx)\n vzeroupper\n ret\n"
	".size o_yloop,.-o_yloop\n"

	/* AVX-512, all 32 registers and the opmasks live at both probe
	 * points: zmm0-7 accumulate a[] times zmm8-15, zmm16-23 add zmm24-31
	 * under k1-k7 and k1 again (merge-masking reads the mask and keeps
	 * the unselected lanes), the masks flip each iteration.
	 * o_zloop(a, n, struct zin *in, struct zout *out) */
	".p2align 4\n"
	".globl o_zloop\n.type o_zloop,@function\n"
	"o_zloop:\n"
	" vmovupd 0(%rdx),%zmm8\n vmovupd 64(%rdx),%zmm9\n vmovupd 128(%rdx),%zmm10\n"
	" vmovupd 192(%rdx),%zmm11\n vmovupd 256(%rdx),%zmm12\n vmovupd 320(%rdx),%zmm13\n"
	" vmovupd 384(%rdx),%zmm14\n vmovupd 448(%rdx),%zmm15\n"
	" vmovupd 512(%rdx),%zmm24\n vmovupd 576(%rdx),%zmm25\n vmovupd 640(%rdx),%zmm26\n"
	" vmovupd 704(%rdx),%zmm27\n vmovupd 768(%rdx),%zmm28\n vmovupd 832(%rdx),%zmm29\n"
	" vmovupd 896(%rdx),%zmm30\n vmovupd 960(%rdx),%zmm31\n"
	" kmovw 1024(%rdx),%k1\n kmovw 1026(%rdx),%k2\n kmovw 1028(%rdx),%k3\n"
	" kmovw 1030(%rdx),%k4\n kmovw 1032(%rdx),%k5\n kmovw 1034(%rdx),%k6\n"
	" kmovw 1036(%rdx),%k7\n"
	" vpxorq %zmm0,%zmm0,%zmm0\n vpxorq %zmm1,%zmm1,%zmm1\n vpxorq %zmm2,%zmm2,%zmm2\n"
	" vpxorq %zmm3,%zmm3,%zmm3\n vpxorq %zmm4,%zmm4,%zmm4\n vpxorq %zmm5,%zmm5,%zmm5\n"
	" vpxorq %zmm6,%zmm6,%zmm6\n vpxorq %zmm7,%zmm7,%zmm7\n"
	" vmovupd %zmm24,%zmm16\n vmovupd %zmm25,%zmm17\n vmovupd %zmm26,%zmm18\n"
	" vmovupd %zmm27,%zmm19\n vmovupd %zmm28,%zmm20\n vmovupd %zmm29,%zmm21\n"
	" vmovupd %zmm30,%zmm22\n vmovupd %zmm31,%zmm23\n"
	" xor %eax,%eax\n test %rsi,%rsi\n jle 2f\n"
	".globl o_zloop_head\no_zloop_head:\n"
	"1: vaddpd (%rdi,%rax,8),%zmm0,%zmm0\n vmulpd %zmm8,%zmm0,%zmm0\n"
	" vaddpd %zmm24,%zmm16,%zmm16{%k1}\n"
	" vaddpd 64(%rdi,%rax,8),%zmm1,%zmm1\n vmulpd %zmm9,%zmm1,%zmm1\n"
	" vaddpd %zmm25,%zmm17,%zmm17{%k2}\n"
	" vaddpd 128(%rdi,%rax,8),%zmm2,%zmm2\n vmulpd %zmm10,%zmm2,%zmm2\n"
	" vaddpd %zmm26,%zmm18,%zmm18{%k3}\n"
	" vaddpd 192(%rdi,%rax,8),%zmm3,%zmm3\n vmulpd %zmm11,%zmm3,%zmm3\n"
	" vaddpd %zmm27,%zmm19,%zmm19{%k4}\n"
	".globl o_zloop_mid\no_zloop_mid:\n"
	" vaddpd 256(%rdi,%rax,8),%zmm4,%zmm4\n vmulpd %zmm12,%zmm4,%zmm4\n"
	" vaddpd %zmm28,%zmm20,%zmm20{%k5}\n"
	" vaddpd 320(%rdi,%rax,8),%zmm5,%zmm5\n vmulpd %zmm13,%zmm5,%zmm5\n"
	" vaddpd %zmm29,%zmm21,%zmm21{%k6}\n"
	" vaddpd 384(%rdi,%rax,8),%zmm6,%zmm6\n vmulpd %zmm14,%zmm6,%zmm6\n"
	" vaddpd %zmm30,%zmm22,%zmm22{%k7}\n"
	" vaddpd 448(%rdi,%rax,8),%zmm7,%zmm7\n vmulpd %zmm15,%zmm7,%zmm7\n"
	" vaddpd %zmm31,%zmm23,%zmm23{%k1}\n"
	" knotw %k1,%k1\n knotw %k2,%k2\n knotw %k3,%k3\n knotw %k4,%k4\n"
	" knotw %k5,%k5\n knotw %k6,%k6\n knotw %k7,%k7\n"
	" add $64,%rax\n cmp %rsi,%rax\n jl 1b\n"
	"2: vmovupd %zmm0,0(%rcx)\n vmovupd %zmm1,64(%rcx)\n vmovupd %zmm2,128(%rcx)\n"
	" vmovupd %zmm3,192(%rcx)\n vmovupd %zmm4,256(%rcx)\n vmovupd %zmm5,320(%rcx)\n"
	" vmovupd %zmm6,384(%rcx)\n vmovupd %zmm7,448(%rcx)\n"
	" vmovupd %zmm16,512(%rcx)\n vmovupd %zmm17,576(%rcx)\n vmovupd %zmm18,640(%rcx)\n"
	" vmovupd %zmm19,704(%rcx)\n vmovupd %zmm20,768(%rcx)\n vmovupd %zmm21,832(%rcx)\n"
	" vmovupd %zmm22,896(%rcx)\n vmovupd %zmm23,960(%rcx)\n"
	" kmovw %k1,1024(%rcx)\n kmovw %k2,1026(%rcx)\n kmovw %k3,1028(%rcx)\n"
	" kmovw %k4,1030(%rcx)\n kmovw %k5,1032(%rcx)\n kmovw %k6,1034(%rcx)\n"
	" kmovw %k7,1036(%rcx)\n vzeroupper\n ret\n"
	".size o_zloop,.-o_zloop\n"

	/* zmm0-15 whole live across the probe (loaded 64 bytes each, stored
	 * after it); zmm16-31 and k0-7 written after it, before the ret, so
	 * dead there: the detour saves registers 0-15 zmm-wide, not 32.
	 * o_zdef(const void *in, void *out): 16 x 64 bytes each */
	".p2align 4\n"
	".globl o_zdef\n.type o_zdef,@function\n"
	"o_zdef:\n"
	".irp n, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15\n"
	" vmovdqu64 64*\\n(%rdi), %zmm\\n\n"
	".endr\n"
	".globl o_zdef_probe\no_zdef_probe: nopl 0x0(%rax,%rax,1)\n"
	".irp n, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15\n"
	" vmovdqu64 %zmm\\n, 64*\\n(%rsi)\n"
	".endr\n"
	".irp n, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31\n"
	" vmovdqu64 (%rdi), %zmm\\n\n"
	".endr\n"
	".irp k, 0, 1, 2, 3, 4, 5, 6, 7\n"
	" kmovw %eax, %k\\k\n"
	".endr\n"
	" vzeroupper\n ret\n"
	".size o_zdef,.-o_zdef\n"

	/* the region of an entry probe is xor (2) + add (3); the loop jumps
	 * back to +2, inside it */
	".p2align 4\n"
	".globl o_jin\n.type o_jin,@function\n"
	"o_jin: xor %eax,%eax\n"
	"1: add %rdi,%rax\n dec %rsi\n jg 1b\n ret\n.size o_jin,.-o_jin\n"

	/* 3 bytes, and the next function starts right behind: no padding */
	".p2align 4\n"
	".globl o_tiny\n.type o_tiny,@function\n"
	"o_tiny: mov %edi,%eax\n ret\n.size o_tiny,.-o_tiny\n"
	".globl o_tiny_next\n.type o_tiny_next,@function\n"
	"o_tiny_next: lea 2(%rdi),%rax\n ret\n.size o_tiny_next,.-o_tiny_next\n"

	".p2align 4\n"
	".type o_callin_helper,@function\n"
	"o_callin_helper: lea 10(%rdi),%rax\n ret\n.size o_callin_helper,.-o_callin_helper\n"
	".p2align 4\n"
	".globl o_callin\n.type o_callin,@function\n"
	"o_callin: push %rbx\n lea o_callin_helper(%rip),%rax\n"
	".globl o_callin_call\no_callin_call: call *%rax\n pop %rbx\n ret\n"
	".size o_callin,.-o_callin\n"

	".p2align 4\n"
	".globl o_ijmp\n.type o_ijmp,@function\n"
	"o_ijmp: lea 1(%rdi),%rax\n lea 2f(%rip),%rdx\n movslq (%rdx),%rcx\n"
	" add %rdx,%rcx\n jmp *%rcx\n1: ret\n.size o_ijmp,.-o_ijmp\n"
	".pushsection .rodata\n.p2align 2\n2: .long 1b-2b\n.popsection\n"

	/* switch tables as gcc lays them out: the bound's cmp/ja, then the
	 * table's lea, the index's zero extension, movslq, add, jmp */
	".p2align 4\n"
	".globl o_sw\n.type o_sw,@function\n"
	"o_sw: cmp $3,%rdi\n ja 9f\n lea 8f(%rip),%rdx\n mov %edi,%eax\n"
	" movslq (%rdx,%rax,4),%rax\n add %rdx,%rax\n jmp *%rax\n"
	"1: mov $10,%eax\n ret\n2: mov $20,%eax\n ret\n3: mov $30,%eax\n ret\n"
	"4: mov $40,%eax\n ret\n9: mov $-1,%rax\n ret\n.size o_sw,.-o_sw\n"
	".pushsection .rodata\n.p2align 2\n8: .long 1b-8b, 2b-8b, 3b-8b, 4b-8b\n.popsection\n"
	/* a case label 2 bytes into another case's first instructions */
	".p2align 4\n"
	".globl o_sw_in\n.type o_sw_in,@function\n"
	"o_sw_in: cmp $1,%rdi\n ja 9f\n lea 8f(%rip),%rdx\n"
	" movslq (%rdx,%rdi,4),%rax\n add %rdx,%rax\n jmp *%rax\n"
	".globl o_sw_in_c0\no_sw_in_c0: xor %eax,%eax\n1: mov $21,%eax\n ret\n"
	"9: mov $-1,%rax\n ret\n.size o_sw_in,.-o_sw_in\n"
	".pushsection .rodata\n.p2align 2\n8: .long o_sw_in_c0-8b, 1b-8b\n.popsection\n"
	/* the table's register set once, before a loop whose head lies
	 * between it and the jump; bound on an 8-bit register, zero-extended */
	".p2align 4\n"
	".globl o_swloop\n.type o_swloop,@function\n"
	"o_swloop: push %r14\n lea 8f(%rip),%r14\n xor %ecx,%ecx\n xor %r8d,%r8d\n"
	"0: cmp %rdi,%rcx\n jae 6f\n mov %ecx,%eax\n and $3,%al\n cmp $3,%al\n ja 5f\n"
	" movzbl %al,%eax\n movslq (%r14,%rax,4),%rax\n add %r14,%rax\n jmp *%rax\n"
	"1: add $1,%r8\n jmp 5f\n2: add $2,%r8\n jmp 5f\n3: add $3,%r8\n jmp 5f\n4: add $4,%r8\n"
	"5: inc %rcx\n jmp 0b\n6: mov %r8,%rax\n pop %r14\n ret\n.size o_swloop,.-o_swloop\n"
	".pushsection .rodata\n.p2align 2\n8: .long 1b-8b, 2b-8b, 3b-8b, 4b-8b\n.popsection\n"
	/* o_swloop where one way into the loop holds another value in %r14:
	 * the table cannot be proven, though it never runs that way here */
	".p2align 4\n"
	".globl o_swbad\n.type o_swbad,@function\n"
	"o_swbad: push %r14\n lea 8f(%rip),%r14\n cmp $12345,%rsi\n jne 7f\n mov %rdx,%r14\n"
	"7: xor %ecx,%ecx\n xor %r8d,%r8d\n"
	"0: cmp %rdi,%rcx\n jae 6f\n mov %ecx,%eax\n and $3,%eax\n cmp $3,%eax\n ja 5f\n"
	" movslq (%r14,%rax,4),%rax\n add %r14,%rax\n jmp *%rax\n"
	"1: add $1,%r8\n jmp 5f\n2: add $2,%r8\n jmp 5f\n3: add $3,%r8\n jmp 5f\n4: add $4,%r8\n"
	"5: inc %rcx\n jmp 0b\n6: mov %r8,%rax\n pop %r14\n ret\n.size o_swbad,.-o_swbad\n"
	".pushsection .rodata\n.p2align 2\n8: .long 1b-8b, 2b-8b, 3b-8b, 4b-8b\n.popsection\n"
	/* an 8-bit bound with no zero extension: %rax's upper bits unbounded */
	".p2align 4\n"
	".globl o_swnarrow\n.type o_swnarrow,@function\n"
	"o_swnarrow: lea -5(%rdi),%rax\n cmp $2,%al\n ja 9f\n lea 8f(%rip),%rdx\n"
	" movslq (%rdx,%rax,4),%rax\n add %rdx,%rax\n jmp *%rax\n"
	"1: mov $7,%eax\n ret\n2: mov $8,%eax\n ret\n3: mov $9,%eax\n ret\n"
	"9: xor %eax,%eax\n ret\n.size o_swnarrow,.-o_swnarrow\n"
	".pushsection .rodata\n.p2align 2\n8: .long 1b-8b, 2b-8b, 3b-8b\n.popsection\n"

	/* glibc's computed gotos: a byte-sized index (no cmp: 256 entries at
	 * most), entries relative to a label rather than the table */
	".p2align 4\n"
	".globl o_swbase\n.type o_swbase,@function\n"
	"o_swbase: movzbl %dil,%eax\n lea 8f(%rip),%rcx\n lea 0f(%rip),%rsi\n"
	" movslq (%rcx,%rax,4),%rax\n add %rsi,%rax\n jmp *%rax\n"
	"0: mov $11,%eax\n ret\n1: mov $12,%eax\n ret\n2: mov $13,%eax\n ret\n"
	"3: mov $14,%eax\n ret\n.size o_swbase,.-o_swbase\n"
	".pushsection .rodata\n.p2align 2\n8: .long 0b-0b, 1b-0b, 2b-0b, 3b-0b\n.popsection\n"
	/* the table's add as lea (%rT,%rX), as glibc's string functions do */
	".p2align 4\n"
	".globl o_swlea\n.type o_swlea,@function\n"
	"o_swlea: cmp $2,%rdi\n ja 9f\n lea 8f(%rip),%r11\n movslq (%r11,%rdi,4),%rcx\n"
	" lea (%r11,%rcx,1),%rcx\n jmp *%rcx\n"
	"1: mov $5,%eax\n ret\n2: mov $6,%eax\n ret\n3: mov $7,%eax\n ret\n"
	"9: xor %eax,%eax\n ret\n.size o_swlea,.-o_swlea\n"
	".pushsection .rodata\n.p2align 2\n8: .long 1b-8b, 2b-8b, 3b-8b\n.popsection\n"

	/* a conditional branch and a system call inside an entry's region */
	".p2align 4\n"
	".globl o_jcin\n.type o_jcin,@function\n"
	"o_jcin: test %edi,%edi\n je 1f\n mov $5,%eax\n ret\n1: mov $7,%eax\n ret\n"
	".size o_jcin,.-o_jcin\n"
	".p2align 4\n"
	".globl o_sysin\n.type o_sysin,@function\n"
	"o_sysin: xchg %edi,%eax\n syscall\n mov %rcx,%rdx\n mov %rdx,%rax\n ret\n"
	".size o_sysin,.-o_sysin\n"

	/* a tail call through a function pointer: it can only lead where a
	 * relocation or a lea of this (position-independent) executable
	 * points, and those are jump targets already */
	".p2align 4\n"
	".globl o_tail\n.type o_tail,@function\n"
	"o_tail: mov (%rsi),%rax\n add $1,%rdi\n jmp *%rax\n.size o_tail,.-o_tail\n"

	/* functions whose bytes 2.. are reached only through a pointer made
	 * elsewhere: by a lea in code, by a relocation in data */
	".p2align 4\n"
	".globl o_lref\n.type o_lref,@function\n"
	"o_lref: xor %eax,%eax\n.Lo_lref_in: add %rdi,%rax\n ret\n.size o_lref,.-o_lref\n"
	".p2align 4\n"
	".globl o_lref_via\n.type o_lref_via,@function\n"
	"o_lref_via: lea .Lo_lref_in(%rip),%rdx\n xor %eax,%eax\n jmp *%rdx\n"
	".size o_lref_via,.-o_lref_via\n"
	".p2align 4\n"
	".globl o_dref\n.type o_dref,@function\n"
	"o_dref: xor %eax,%eax\n.Lo_dref_in: add %rdi,%rax\n ret\n.size o_dref,.-o_dref\n"
	".p2align 4\n"
	".globl o_dref_via\n.type o_dref_via,@function\n"
	"o_dref_via: mov .Lo_dref_ptr(%rip),%rdx\n xor %eax,%eax\n jmp *%rdx\n"
	".size o_dref_via,.-o_dref_via\n"
	".pushsection .data.rel.ro,\"aw\"\n.p2align 3\n.Lo_dref_ptr: .quad .Lo_dref_in\n.popsection\n"

	/* a 7-byte region, a short jmp over a nop no one runs to its
	 * target: the jmp's region is the jmp and 3 bytes of the nop */
	".p2align 4\n"
	".globl o_padjmp\n.type o_padjmp,@function\n"
	"o_padjmp: mov %rdi,%rax\n add $1,%rax\n jmp 1f\n"
	" .byte 0x0f,0x1f,0x40,0x00\n"
	"1: add $2,%rax\n ret\n.size o_padjmp,.-o_padjmp\n"

	/* 3 bytes, then padding up to 16 that belongs to no symbol */
	".p2align 4\n"
	".globl o_ret0\n.type o_ret0,@function\n"
	"o_ret0: xor %eax,%eax\n ret\n.size o_ret0,.-o_ret0\n"
	".p2align 4\n"
	".type o_after_ret0,@function\n"
	"o_after_ret0: ud2\n.size o_after_ret0,.-o_after_ret0\n"
);

static long o_alt_calls;
/* a function with o_chain's signature to redirect calls to */
__attribute__((noinline)) long o_alt(long x)
{
	__asm__ volatile("" : "+r"(x));
	__atomic_fetch_add(&o_alt_calls, 1, __ATOMIC_RELAXED);
	return x * 100 + 7;
}

/* ---- helpers --------------------------------------------------------------------- */

static atomic_long hits, post_hits, fault_hits, handler_errors;

static int count_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	hits++;
	return 0;
}

static void count_post(struct kprobe *p, struct pt_regs *r, unsigned long f)
{
	(void)p; (void)r; (void)f;
	post_hits++;
}

/* the list line of a probe in the main executable */
static void want_line(char *out, size_t n, const struct kprobe *p, const char *sym,
		      unsigned off, const char *suffix)
{
	snprintf(out, n, "%016lx  k  %s+0x%x%s\n", (unsigned long)p->addr, sym, off, suffix);
}

#define EXPECT_LISTED(line) do {						\
	char lbuf_[4096];							\
	ukt_list_to(lbuf_, sizeof(lbuf_));						\
	if (!strstr(lbuf_, (line)))						\
		UKT_FAIL("no line \"%.*s\" in kprobes_list():\n%s",		\
			 (int)strlen(line) - 1, (line), lbuf_);			\
} while (0)

static uint64_t xs_state = 0x9e3779b97f4a7c15ULL;
static uint64_t xs(void)
{
	uint64_t x = xs_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return xs_state = x;
}

/* a double in [-1, 1) with all 53 bits random */
static double rnd(void)
{
	return (double)(xs() >> 11) * 0x1p-52 - 1.0;
}

static void expect_same_doubles(const double *got, const double *want, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		if (memcmp(&got[i], &want[i], sizeof(double))) {
			uint64_t g, w;
			memcpy(&g, &got[i], 8);
			memcpy(&w, &want[i], 8);
			UKT_FAIL("%s: element %zu is %a (%#llx), want %a (%#llx)", what, i, got[i],
				 (unsigned long long)g, want[i], (unsigned long long)w);
		}
	}
}

static unsigned get_mxcsr(void)
{
	unsigned v;
	__asm__ volatile("stmxcsr %0" : "=m"(v));
	return v;
}

static void set_mxcsr(unsigned v)
{
	__asm__ volatile("ldmxcsr %0" :: "m"(v));
}

static unsigned short get_x87_cw(void)
{
	unsigned short cw;
	__asm__ volatile("fnstcw %0" : "=m"(cw));
	return cw;
}

static int have_avx(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx");
}

static int have_avx512(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f");
}

/* ---- a handler that leaves no vector register, no FP control untouched -------------- */

static unsigned char big_src[1 << 17], big_dst[1 << 17];
static unsigned char garbage[32 * 64 + 8 * 8];
static int avx_ok, avx512_ok;

static void dirty_vector_registers(void)
{
	/* (this file is not built for AVX-512: the compiler keeps nothing
	 * in zmm16-31 or the opmasks, and cannot be told they change) */
	if (avx512_ok)
		__asm__ volatile(
			".irp n, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, "
			"20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31\n"
			"vmovdqu64 64*\\n(%0), %%zmm\\n\n"
			".endr\n"
			".irp k, 0, 1, 2, 3, 4, 5, 6, 7\n"
			"kmovw 2048+8*\\k(%0), %%k\\k\n"
			".endr\n"
			:: "r"(garbage)
			: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
			  "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory");
	else if (avx_ok)
		__asm__ volatile(
			"vmovdqu 0(%0),%%ymm0\n vmovdqu 32(%0),%%ymm1\n vmovdqu 64(%0),%%ymm2\n"
			"vmovdqu 96(%0),%%ymm3\n vmovdqu 128(%0),%%ymm4\n vmovdqu 160(%0),%%ymm5\n"
			"vmovdqu 192(%0),%%ymm6\n vmovdqu 224(%0),%%ymm7\n vmovdqu 256(%0),%%ymm8\n"
			"vmovdqu 288(%0),%%ymm9\n vmovdqu 320(%0),%%ymm10\n vmovdqu 352(%0),%%ymm11\n"
			"vmovdqu 384(%0),%%ymm12\n vmovdqu 416(%0),%%ymm13\n vmovdqu 448(%0),%%ymm14\n"
			"vmovdqu 480(%0),%%ymm15\n"
			:: "r"(garbage)
			: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
			  "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory");
	else
		__asm__ volatile(
			"movdqu 0(%0),%%xmm0\n movdqu 32(%0),%%xmm1\n movdqu 64(%0),%%xmm2\n"
			"movdqu 96(%0),%%xmm3\n movdqu 128(%0),%%xmm4\n movdqu 160(%0),%%xmm5\n"
			"movdqu 192(%0),%%xmm6\n movdqu 224(%0),%%xmm7\n movdqu 256(%0),%%xmm8\n"
			"movdqu 288(%0),%%xmm9\n movdqu 320(%0),%%xmm10\n movdqu 352(%0),%%xmm11\n"
			"movdqu 384(%0),%%xmm12\n movdqu 416(%0),%%xmm13\n movdqu 448(%0),%%xmm14\n"
			"movdqu 480(%0),%%xmm15\n"
			:: "r"(garbage)
			: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
			  "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "memory");
}

static void dirty_everything(void)
{
	char buf[128];
	double sum;

	/* the handler's own state is an ordinary function's: an empty x87
	 * stack (eight pushes fit) and DF clear */
	__asm__ volatile("fld1\n fld1\n fld1\n fld1\n fld1\n fld1\n fld1\n fld1\n"
			 "faddp\n faddp\n faddp\n faddp\n faddp\n faddp\n faddp\n fstpl %0"
			 : "=m"(sum) :: "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)",
			   "st(6)", "st(7)");
	if (sum != 8.0)
		handler_errors++;
	unsigned long fl;
	__asm__ volatile("pushfq\n pop %0" : "=r"(fl));
	if (fl & 0x400)
		handler_errors++;

	/* ordinary library calls that use the vector registers */
	memset(big_src, (int)(hits & 0x7f) + 1, sizeof(big_src));
	memcpy(big_dst, big_src, sizeof(big_dst));
	memmove(big_dst + 3, big_dst, sizeof(big_dst) - 3);
	if (memcmp(big_dst + 3, big_src, sizeof(big_dst) - 3))
		handler_errors++;
	/* exact values: the same text in every rounding mode */
	volatile double a = 1.5, b = 0.25, c = 1024.0;
	volatile long double d = 2.5L;
	snprintf(buf, sizeof(buf), "%f %g %e %Lf", a, b, c, d);
	if (strcmp(buf, "1.500000 0.25 1.024000e+03 2.500000"))
		handler_errors++;

	/* garbage in every xmm/ymm register */
	dirty_vector_registers();

	/* and every FP control the probed code could notice */
	fesetround(FE_UPWARD);
	set_mxcsr((get_mxcsr() & ~0x6000u) | 0x4000u | 0x8000u | 0x0040u); /* down, FTZ, DAZ */
	unsigned short cw = 0x087f;	/* x87: round up, single precision */
	__asm__ volatile("fldcw %0" :: "m"(cw));
}

static int dirty_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	dirty_everything();
	hits++;
	return 0;
}

static void dirty_init(void)
{
	avx_ok = have_avx();
	avx512_ok = have_avx512();
	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (unsigned char)(xs() >> 56);
}

/* the FP environment of the test code itself, before and after probed calls */
struct fpstate { unsigned mxcsr; unsigned short cw; int round; };

static struct fpstate fp_now(void)
{
	return (struct fpstate){ get_mxcsr() & 0xffc0u, get_x87_cw(), fegetround() };
}

#define EXPECT_FP_UNCHANGED(before) do {					\
	struct fpstate n_ = fp_now();						\
	if (n_.mxcsr != (before).mxcsr || n_.cw != (before).cw ||		\
	    n_.round != (before).round)						\
		UKT_FAIL("FP control state changed by a handler: mxcsr %#x -> %#x, " \
			 "x87 cw %#x -> %#x, rounding %d -> %d",		\
			 (before).mxcsr, n_.mxcsr, (before).cw, n_.cw,		\
			 (before).round, n_.round);				\
} while (0)

/* ---- basics ----------------------------------------------------------------------- */

static struct pt_regs seen;
static int seen_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	seen = *r;
	hits++;
	return 0;
}

UKT_CASE(optimized_after_wait_listed_and_jumps)
{
	unsigned char *code = (unsigned char *)o_chain, orig[12];
	struct kprobe kp = { .symbol_name = "o_chain", .pre_handler = seen_pre };
	char line[256];

	memcpy(orig, code, sizeof(orig));
	UKT_EQ(kprobes_get_optimization(), 1);

	/* every probe starts as a breakpoint: with the knob off it stays one */
	UKT_EQ(kprobes_set_optimization(0), 0);
	UKT_EQ(kprobes_get_optimization(), 0);
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ((unsigned long)kp.addr, (unsigned long)o_chain);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_NOT_OPTIMIZED(&kp);
	UKT_EQ(code[0], 0xcc);
	UKT_ASSERT(!memcmp(code + 1, orig + 1, sizeof(orig) - 1));
	UKT_EQ(o_caller(39), 42);
	UKT_EQ(hits, 1);
	want_line(line, sizeof(line), &kp, "o_chain", 0, "");
	EXPECT_LISTED(line);

	/* knob on: queued, optimized once the optimizer has run */
	UKT_EQ(kprobes_set_optimization(1), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	UKT_EQ(kp.flags, KPROBE_FLAG_OPTIMIZED);
	want_line(line, sizeof(line), &kp, "o_chain", 0, " [OPTIMIZED]");
	EXPECT_LISTED(line);
	/* a jmp rel32 over the region, to a detour outside the function */
	UKT_EQ(code[0], 0xe9);
	int32_t rel;
	memcpy(&rel, code + 1, 4);
	unsigned long detour = (unsigned long)code + 5 + (long)rel;
	UKT_ASSERT(detour < (unsigned long)code || detour >= (unsigned long)code + 12);
	UKT_ASSERT(!memcmp(code + 5, orig + 5, sizeof(orig) - 5));

	/* the handler sees what it saw as a breakpoint */
	memset(&seen, 0, sizeof(seen));
	for (int i = 0; i < 5; i++)
		UKT_EQ(o_caller(i * 1000 + 1), i * 1000 + 4);
	UKT_EQ(hits, 6);
	UKT_EQ(kp.nmissed, 0);
	UKT_EQ(seen.ip, (unsigned long)o_chain);
	UKT_EQ(seen.di, 4001);
	UKT_EQ(regs_get_kernel_argument(&seen, 0), 4001);
	UKT_EQ(*(unsigned long *)seen.sp, (unsigned long)o_caller_ret);
	UKT_ASSERT(seen.flags & 0x200);		/* IF, as in any user context */
	UKT_ASSERT(!(seen.flags & 0x100));	/* no TF */

	/* knob off: a breakpoint again, the rest of the region original */
	UKT_EQ(kprobes_set_optimization(0), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_NOT_OPTIMIZED(&kp);
	UKT_EQ(code[0], 0xcc);
	UKT_ASSERT(!memcmp(code + 1, orig + 1, sizeof(orig) - 1));
	UKT_EQ(o_chain(1), 4);
	UKT_EQ(hits, 7);
	UKT_EQ(kprobes_set_optimization(1), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	UKT_EQ(o_chain(2), 5);
	UKT_EQ(hits, 8);

	/* unregistering an optimized probe puts every byte back */
	unregister_kprobe(&kp);
	UKT_ASSERT(!memcmp(code, orig, sizeof(orig)));
	UKT_EQ(o_chain(3), 6);
	UKT_EQ(hits, 8);
	ukt_list_to(line, sizeof(line));
	UKT_STREQ(line, "");
}

static char order[64];
static atomic_int norder;
static int pre_a(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	order[norder++] = 'a';
	return 0;
}

static int pre_b(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	order[norder++] = 'b';
	return 0;
}

UKT_CASE(two_probes_on_one_address_both_optimized)
{
	struct kprobe a = { .addr = (void *)o_chain, .pre_handler = pre_a };
	struct kprobe b = { .addr = (void *)o_chain, .pre_handler = pre_b };
	char line[256];
	UKT_EQ(register_kprobe(&a), 0);
	UKT_EQ(register_kprobe(&b), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&a);
	UKT_EXPECT_OPTIMIZED(&b);
	want_line(line, sizeof(line), &a, "o_chain", 0, " [OPTIMIZED]");
	char buf[512], want[512];
	ukt_list_to(buf, sizeof(buf));
	snprintf(want, sizeof(want), "%s%s", line, line);
	UKT_STREQ(buf, want);
	UKT_EQ(o_chain(1), 4);
	UKT_EQ(o_chain(2), 5);
	UKT_STREQ(order, "abab");
	unregister_kprobe(&a);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&b);
	UKT_EQ(o_chain(3), 6);
	UKT_STREQ(order, "ababb");
	unregister_kprobe(&b);
	UKT_EQ(o_chain(3), 6);
	UKT_STREQ(order, "ababb");
}

UKT_CASE(post_handler_probe_at_same_address_unoptimizes)
{
	struct kprobe p = { .addr = (void *)o_chain, .pre_handler = count_pre };
	struct kprobe q = { .addr = (void *)o_chain, .post_handler = count_post };
	char line[256];
	UKT_EQ(register_kprobe(&p), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&p);
	UKT_EQ(o_chain(1), 4);
	UKT_EQ(hits, 1);

	for (int round = 0; round < 3; round++) {
		q.addr = (void *)o_chain;
		UKT_EQ(register_kprobe(&q), 0);
		/* the very next call runs q's post_handler */
		UKT_EQ(o_chain(10), 13);
		UKT_EQ(post_hits, round * 2 + 1);
		UKT_EQ(hits, round * 3 + 2);
		wait_for_kprobe_optimizer();
		UKT_EXPECT_NOT_OPTIMIZED(&p);
		UKT_EXPECT_NOT_OPTIMIZED(&q);
		want_line(line, sizeof(line), &p, "o_chain", 0, "");
		EXPECT_LISTED(line);		/* with its newline: no suffix */
		UKT_EQ(o_chain(20), 23);
		UKT_EQ(post_hits, round * 2 + 2);
		UKT_EQ(hits, round * 3 + 3);

		/* gone again: the optimizer takes p back */
		unregister_kprobe(&q);
		wait_for_kprobe_optimizer();
		UKT_EXPECT_OPTIMIZED(&p);
		UKT_EQ(o_chain(30), 33);
		UKT_EQ(hits, round * 3 + 4);
		UKT_EQ(post_hits, round * 2 + 2);
	}
	/* registered together: never optimized */
	unregister_kprobe(&p);
	p.addr = q.addr = (void *)o_chain;
	struct kprobe *both[] = { &p, &q };
	UKT_EQ(register_kprobes(both, 2), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_NOT_OPTIMIZED(&p);
	UKT_EQ(o_chain(1), 4);
	UKT_EQ(post_hits, 7);
	unregister_kprobes(both, 2);
}

UKT_CASE(probe_inside_region_joins_a_run_or_unoptimizes)
{
	struct kprobe p = { .addr = (void *)o_chain, .pre_handler = count_pre };
	struct kprobe r = { .addr = (void *)o_chain_add1, .pre_handler = count_pre };
	/* the offsets computed at run time: a constant o_chain + 1 can end
	 * up in the data (clang builds the struct from a relocated copy),
	 * and a code pointer into the region rightly stops its optimization */
	static volatile long in1 = 1, in5 = 5;
	struct kprobe bad = { .addr = (void *)((char *)o_chain + in1), .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&p), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&p);

	/* +1 is inside mov %rdi,%rax, whatever bytes the jump put there */
	setenv("UKPROBES_QUIET", "1", 1);
	UKT_EQ(register_kprobe(&bad), -EILSEQ);
	bad.addr = (void *)((char *)o_chain + in5);	/* inside add $1 */
	UKT_EQ(register_kprobe(&bad), -EILSEQ);
	unsetenv("UKPROBES_QUIET");
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&p);

	for (int round = 0; round < 3; round++) {
		long h = hits;
		r.addr = (void *)o_chain_add1;
		/* +3: under the jump; with a post_handler it stops the jump,
		 * else one detour per probe runs both (a run) */
		r.post_handler = round == 1 ? count_post : NULL;
		UKT_EQ(register_kprobe(&r), 0);
		UKT_EQ(o_chain(1), 4);		/* both fire at once */
		UKT_EQ(hits, h + 2);
		wait_for_kprobe_optimizer();
		if (round == 1) {
			UKT_EXPECT_NOT_OPTIMIZED(&p);
			UKT_EXPECT_NOT_OPTIMIZED(&r);
		} else {
			UKT_EXPECT_OPTIMIZED(&p);
			UKT_EXPECT_OPTIMIZED(&r);
		}
		UKT_EQ(o_chain(2), 5);
		UKT_EQ(hits, h + 4);
		unregister_kprobe(&r);
		wait_for_kprobe_optimizer();
		UKT_EXPECT_OPTIMIZED(&p);
		UKT_EQ(o_chain(3), 6);
		UKT_EQ(hits, h + 5);
	}
	unregister_kprobe(&p);
	UKT_EQ(o_chain(3), 6);
	UKT_EQ(hits, 15);
}

UKT_CASE(probe_after_region_both_optimized)
{
	struct kprobe p = { .addr = (void *)o_quad, .pre_handler = pre_a };
	struct kprobe r = { .addr = (void *)o_quad_add2, .pre_handler = pre_b };
	UKT_EQ(register_kprobe(&p), 0);
	UKT_EQ(register_kprobe(&r), 0);		/* +7: right after p's region */
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&p);
	UKT_EXPECT_OPTIMIZED(&r);
	UKT_EQ(o_quad(1), 11);
	UKT_EQ(o_quad(2), 12);
	UKT_STREQ(order, "abab");
	unregister_kprobe(&p);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&r);
	UKT_EQ(o_quad(3), 13);
	UKT_STREQ(order, "ababb");
	unregister_kprobe(&r);
	UKT_EQ(o_quad(3), 13);
}

UKT_CASE(disabled_probe_is_not_optimized)
{
	struct kprobe p = { .addr = (void *)o_chain, .pre_handler = count_pre,
			    .flags = KPROBE_FLAG_DISABLED };
	char line[256];
	UKT_EQ(register_kprobe(&p), 0);
	wait_for_kprobe_optimizer();
	UKT_EQ(p.flags, KPROBE_FLAG_DISABLED);
	want_line(line, sizeof(line), &p, "o_chain", 0, " [DISABLED]");
	EXPECT_LISTED(line);
	UKT_EQ(o_chain(1), 4);
	UKT_EQ(hits, 0);

	for (int round = 0; round < 3; round++) {
		UKT_EQ(enable_kprobe(&p), 0);
		UKT_EQ(o_chain(1), 4);		/* armed at once */
		UKT_EQ(hits, round * 2 + 1);
		wait_for_kprobe_optimizer();
		UKT_EXPECT_OPTIMIZED(&p);
		UKT_EQ(p.flags, KPROBE_FLAG_OPTIMIZED);
		UKT_EQ(o_chain(2), 5);
		UKT_EQ(hits, round * 2 + 2);
		UKT_EQ(disable_kprobe(&p), 0);
		UKT_EQ(o_chain(3), 6);		/* disarmed at once */
		UKT_EQ(hits, round * 2 + 2);
		wait_for_kprobe_optimizer();
		UKT_EQ(p.flags, KPROBE_FLAG_DISABLED);
		UKT_EQ(o_chain(3), 6);
		UKT_EQ(hits, round * 2 + 2);
	}

	/* the global switch: nothing fires while off, optimized again after */
	UKT_EQ(enable_kprobe(&p), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&p);
	long h = hits;
	UKT_EQ(kprobes_set_enabled(0), 0);
	UKT_EQ(o_chain(4), 7);
	wait_for_kprobe_optimizer();
	UKT_EQ(o_chain(4), 7);
	UKT_EQ(hits, h);
	UKT_EQ(kprobes_set_enabled(1), 0);
	UKT_EQ(o_chain(4), 7);
	UKT_EQ(hits, h + 1);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&p);
	UKT_EQ(o_chain(4), 7);
	UKT_EQ(hits, h + 2);
	unregister_kprobe(&p);
}

UKT_CASE(optimization_knob_unoptimizes_everything)
{
	struct kprobe a = { .addr = (void *)o_chain, .pre_handler = count_pre };
	struct kprobe b = { .addr = (void *)o_chain_b, .pre_handler = count_pre };
	struct kprobe c = { .addr = (void *)o_quad, .pre_handler = count_pre };
	struct kprobe late = { .addr = (void *)o_quad_add2, .pre_handler = count_pre };
	struct kprobe *abc[] = { &a, &b, &c };
	char buf[1024], want[1024], l1[256], l2[256], l3[256], l4[256];
	UKT_EQ(register_kprobes(abc, 3), 0);
	wait_for_kprobe_optimizer();
	long h = 0;
	for (int round = 0; round < 4; round++) {
		UKT_EXPECT_OPTIMIZED(&a);
		UKT_EXPECT_OPTIMIZED(&b);
		UKT_EXPECT_OPTIMIZED(&c);
		UKT_EQ(o_chain(1) + o_chain_b(1) + o_quad(1), 4 + 10 + 11);
		UKT_EQ(hits, h += 3);

		UKT_EQ(kprobes_set_optimization(0), 0);
		UKT_EQ(kprobes_get_optimization(), 0);
		UKT_EQ(o_chain(1) + o_chain_b(1) + o_quad(1), 4 + 10 + 11);
		UKT_EQ(hits, h += 3);
		wait_for_kprobe_optimizer();
		UKT_EXPECT_NOT_OPTIMIZED(&a);
		UKT_EXPECT_NOT_OPTIMIZED(&b);
		UKT_EXPECT_NOT_OPTIMIZED(&c);
		want_line(l1, sizeof(l1), &a, "o_chain", 0, "");
		want_line(l2, sizeof(l2), &b, "o_chain_b", 0, "");
		want_line(l3, sizeof(l3), &c, "o_quad", 0, "");
		snprintf(want, sizeof(want), "%s%s%s", l1, l2, l3);
		ukt_list_to(buf, sizeof(buf));
		UKT_STREQ(buf, want);
		/* registered while off: a breakpoint too */
		late.addr = (void *)o_quad_add2;
		UKT_EQ(register_kprobe(&late), 0);
		wait_for_kprobe_optimizer();
		UKT_EXPECT_NOT_OPTIMIZED(&late);
		UKT_EQ(o_chain(1) + o_chain_b(1) + o_quad(1), 4 + 10 + 11);
		UKT_EQ(hits, h += 4);

		UKT_EQ(kprobes_set_optimization(1), 0);
		UKT_EQ(kprobes_get_optimization(), 1);
		wait_for_kprobe_optimizer();
		UKT_EXPECT_OPTIMIZED(&late);
		want_line(l1, sizeof(l1), &a, "o_chain", 0, " [OPTIMIZED]");
		want_line(l2, sizeof(l2), &b, "o_chain_b", 0, " [OPTIMIZED]");
		want_line(l3, sizeof(l3), &c, "o_quad", 0, " [OPTIMIZED]");
		want_line(l4, sizeof(l4), &late, "o_quad", 7, " [OPTIMIZED]");
		snprintf(want, sizeof(want), "%s%s%s%s", l1, l2, l3, l4);
		ukt_list_to(buf, sizeof(buf));
		UKT_STREQ(buf, want);
		UKT_EQ(o_quad(1), 11);
		UKT_EQ(hits, h += 2);
		unregister_kprobe(&late);
	}
	unregister_kprobes(abc, 3);
	UKT_EQ(o_chain(1) + o_chain_b(1) + o_quad(1), 4 + 10 + 11);
	UKT_EQ(hits, h);
}

/* ---- registers ---------------------------------------------------------------------- */

#define V_IN(i)  (0x0123456789000000UL + (unsigned long)(i) * 0x111)
#define V_OUT(i) (0xfedcba9800000000UL + (unsigned long)(i) * 0x222)
static unsigned long reg_bad;	/* bit i: register i had a wrong value */

static int regs_pre(struct kprobe *p, struct pt_regs *r)
{
	unsigned long *v[] = { &r->ax, &r->bx, &r->cx, &r->dx, &r->si, &r->di, &r->bp,
			       &r->r8, &r->r9, &r->r10, &r->r11, &r->r12, &r->r13, &r->r14,
			       &r->r15 };
	for (int i = 0; i < 15; i++) {
		if (*v[i] != V_IN(i))
			reg_bad |= 1UL << i;
		*v[i] = V_OUT(i);
	}
	if (r->ip != (unsigned long)p->addr)
		reg_bad |= 1UL << 15;
	if (!(r->flags & 1))			/* stc right before the probe */
		reg_bad |= 1UL << 16;
	if (r->sp != o_regs_sp)
		reg_bad |= 1UL << 17;
	r->flags = (r->flags & ~1UL) | 0x80;	/* CF off, SF on */
	dirty_vector_registers();
	hits++;
	return 0;
}

static void check_regs_round(void)
{
	memset(o_regs_out, 0, sizeof(o_regs_out));
	reg_bad = 0;
	o_regs();
	if (reg_bad)
		UKT_FAIL("the pre_handler saw wrong registers: mask %#lx "
			 "(bits 0-14 ax..r15, 15 ip, 16 CF, 17 sp)", reg_bad);
	for (int i = 0; i < 15; i++)
		UKT_EQ(o_regs_out[i], V_OUT(i));
	UKT_EQ(o_regs_out[15] & 0x81, 0x80);
	UKT_EQ(o_regs_out[16], o_regs_sp);
}

UKT_CASE(every_register_seen_and_changed_optimized)
{
	avx_ok = have_avx();
	avx512_ok = have_avx512();
	struct kprobe kp = { .addr = (void *)o_regs_probe, .pre_handler = regs_pre };
	UKT_EQ(kprobes_set_optimization(0), 0);
	UKT_EQ(register_kprobe(&kp), 0);
	check_regs_round();			/* breakpoint */
	UKT_EQ(hits, 1);
	UKT_EQ(kprobes_set_optimization(1), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	for (int i = 0; i < 3; i++)
		check_regs_round();		/* jump */
	UKT_EQ(hits, 4);
	unregister_kprobe(&kp);
}

static int pre_sp(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	r->sp -= 32;
	hits++;
	return 0;
}

UKT_CASE(handler_moves_stack_pointer_optimized)
{
	UKT_EQ(o_sp(), 64);
	struct kprobe kp = { .addr = (void *)o_sp_insn, .pre_handler = pre_sp };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(o_sp(), 96);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	for (int i = 0; i < 3; i++)
		UKT_EQ(o_sp(), 96);
	UKT_EQ(hits, 4);
	unregister_kprobe(&kp);
	UKT_EQ(o_sp(), 64);
}

/* ---- changing the path ------------------------------------------------------------ */

static int redirect_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	hits++;
	r->ip = (unsigned long)o_alt;
	return 1;
}

UKT_CASE(redirect_to_another_function_optimized)
{
	struct kprobe kp = { .addr = (void *)o_chain, .pre_handler = redirect_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(o_caller(5), 507);	/* breakpoint: o_alt ran instead */
	UKT_EQ(o_alt_calls, 1);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	for (long i = 0; i < 5; i++)
		UKT_EQ(o_caller(i), i * 100 + 7);
	UKT_EQ(o_chain(9), 907);
	UKT_EQ(o_alt_calls, 7);
	UKT_EQ(hits, 7);
	unregister_kprobe(&kp);
	UKT_EQ(o_caller(5), 8);
	UKT_EQ(o_alt_calls, 7);
}

/* return at once with a value of the handler's choosing */
static int skip_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	hits++;
	r->ax = r->di * 2 + 1000;
	r->ip = *(unsigned long *)r->sp;
	r->sp += 8;
	return 1;
}

UKT_CASE(redirect_to_return_address_skips_the_function)
{
	struct kprobe kp = { .addr = (void *)o_chain, .pre_handler = skip_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(o_caller(5), 1010);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	for (long i = 0; i < 5; i++)
		UKT_EQ(o_caller(i), i * 2 + 1000);
	UKT_EQ(hits, 6);
	unregister_kprobe(&kp);
	UKT_EQ(o_caller(5), 8);
}

static long nested_result;
static int recurse_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	hits++;
	nested_result = o_chain(100);	/* the same probe: missed */
	return 0;
}

UKT_CASE(recursion_counts_nmissed_optimized)
{
	struct kprobe kp = { .addr = (void *)o_chain, .pre_handler = recurse_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	for (int i = 1; i <= 3; i++) {
		nested_result = 0;
		UKT_EQ(o_chain(1), 4);
		UKT_EQ(nested_result, 103);
		UKT_EQ(hits, i);
		UKT_EQ(kp.nmissed, i);
	}
	unregister_kprobe(&kp);
}

/* a probe with no pre_handler (only a fault_handler) is optimised and
 * runs nothing: no handler to call on any path */
static int never_fault(struct kprobe *p, struct pt_regs *r, int trapnr)
{
	(void)p; (void)r; (void)trapnr;
	fault_hits++;
	return 0;
}

UKT_CASE(probe_without_pre_handler_optimized)
{
	struct kprobe kp = { .addr = (void *)o_chain, .fault_handler = never_fault };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	for (long i = 0; i < 1000; i++)
		UKT_EQ(o_chain(i), i + 3);
	UKT_EQ(kp.nmissed, 0);
	UKT_EQ(fault_hits, 0);
	unregister_kprobe(&kp);
}

/* ukprobes' own thread (the optimizer) sleeps in nanosleep between
 * batches: a probe there runs no handler for it, on any path */
static __thread int test_thread;
static atomic_int own_hits, foreign_hits;
static void count_thread(void)
{
	if (test_thread)
		atomic_fetch_add_explicit(&own_hits, 1, memory_order_relaxed);
	else
		atomic_fetch_add_explicit(&foreign_hits, 1, memory_order_relaxed);
}

static int thread_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	count_thread();
	return 0;
}

static int thread_ret(struct kretprobe_instance *ri, struct pt_regs *r)
{
	(void)ri; (void)r;
	count_thread();
	return 0;
}

/* kp: the optimised probe on nanosleep (a kprobe's, or a kretprobe's) */
static void optimizer_sleeps_through(struct kprobe *kp)
{
	struct kprobe wake = { .addr = (void *)o_chain, .pre_handler = seen_pre };
	struct timespec ts = { 0, 1000 };

	test_thread = 1;
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(kp);
	int own = atomic_load(&own_hits);
	UKT_EQ(nanosleep(&ts, NULL), 0);
	UKT_EQ(atomic_load(&own_hits), own + 1);
	/* each registration wakes the optimizer, which sleeps before its
	 * batch: through the optimized probe */
	for (int i = 0; i < 5; i++) {
		UKT_EQ(register_kprobe(&wake), 0);
		wait_for_kprobe_optimizer();
		UKT_EXPECT_OPTIMIZED(&wake);
		unregister_kprobe(&wake);
		memset(&wake, 0, sizeof(wake));
		wake.addr = (void *)o_chain;
		wake.pre_handler = seen_pre;
	}
	UKT_EXPECT_OPTIMIZED(kp);
	UKT_EQ(atomic_load(&foreign_hits), 0);
}

UKT_CASE(optimizer_thread_runs_no_handlers)
{
	struct kprobe kp = { .symbol_name = "nanosleep", .pre_handler = thread_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	optimizer_sleeps_through(&kp);
	UKT_EQ(kp.nmissed, 0);
	unregister_kprobe(&kp);
}

UKT_CASE(optimizer_thread_runs_no_return_handlers)
{
	struct kretprobe rp = { .kp.symbol_name = "nanosleep", .handler = thread_ret };
	UKT_EQ(register_kretprobe(&rp), 0);
	optimizer_sleeps_through(&rp.kp);
	UKT_EQ(rp.nmissed, 0);
	unregister_kretprobe(&rp);
}

/* ---- faults in handlers ---------------------------------------------------------- */

static int last_trapnr = -1;
static volatile long *volatile bad_ptr = (long *)0x18;

static int pre_faults(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	hits++;
	return (int)*bad_ptr;
}

static int fault_take(struct kprobe *p, struct pt_regs *r, int trapnr)
{
	(void)p; (void)r;
	last_trapnr = trapnr;
	fault_hits++;
	return 1;
}

static int fault_pass(struct kprobe *p, struct pt_regs *r, int trapnr)
{
	(void)p; (void)r;
	last_trapnr = trapnr;
	fault_hits++;
	return 0;
}

UKT_CASE(fault_in_handler_goes_to_fault_handler_optimized)
{
	struct kprobe kp = { .addr = (void *)o_chain, .pre_handler = pre_faults,
			     .fault_handler = fault_take };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	for (int i = 0; i < 3; i++)
		UKT_EQ(o_chain(2), 5);		/* handler abandoned, code goes on */
	UKT_EQ(hits, 3);
	UKT_EQ(fault_hits, 3);
	UKT_EQ(last_trapnr, 14);
	UKT_EQ(kp.nmissed, 0);
	UKT_EXPECT_OPTIMIZED(&kp);
	unregister_kprobe(&kp);
}

static sigjmp_buf prog_jb;
static volatile int prog_sig;
static volatile unsigned long prog_addr, prog_ip;

static void prog_handler(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	prog_sig = sig;
	prog_addr = (unsigned long)si->si_addr;
	prog_ip = uc->uc_mcontext.gregs[REG_RIP];
	siglongjmp(prog_jb, 1);
}

UKT_CASE(unhandled_fault_in_handler_reaches_program_handler_optimized)
{
	ukt_install_handler(SIGSEGV, prog_handler);
	struct kprobe kp = { .addr = (void *)o_chain, .pre_handler = pre_faults,
			     .fault_handler = fault_pass };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	if (!sigsetjmp(prog_jb, 1)) {
		o_chain(1);
		UKT_FAIL("the fault vanished");
	}
	UKT_EQ(prog_sig, SIGSEGV);
	UKT_EQ(prog_addr, 0x18);
	UKT_EQ(prog_ip, (unsigned long)o_chain);	/* as if at the probed instruction */
	UKT_EQ(fault_hits, 1);
	/* the thread left the hit cleanly: the probe keeps firing, no misses */
	kp.pre_handler = count_pre;
	long before = hits;
	UKT_EQ(o_chain(1), 4);
	UKT_EQ(o_chain(2), 5);
	UKT_EQ(hits, before + 2);
	UKT_EQ(kp.nmissed, 0);
	unregister_kprobe(&kp);
}

/* The program's handler of a handler's fault runs outside the hit: the
 * optimizer may put its jump over the site meanwhile.  The abandoned hit
 * then goes on through the detour, not the slot it had picked, whose
 * jump back lands inside the new jump. */
static struct kprobe *volatile wait_kp;
static void prog_waits_for_optimizer(int sig, siginfo_t *si, void *ctx)
{
	(void)ctx;
	if (sig != SIGSEGV || si->si_addr != (void *)0x18)
		_exit(3);	/* not the handler's fault: the code went wrong */
	prog_sig = sig;
	prog_addr = (unsigned long)si->si_addr;
	struct timespec ts = { 0, 1000000 };
	for (int i = 0; i < 10000 && !(wait_kp->flags & KPROBE_FLAG_OPTIMIZED); i++)
		nanosleep(&ts, NULL);
}

UKT_CASE(site_optimized_while_program_handles_handler_fault)
{
	UKT_EQ(ukt_install_handler(SIGSEGV, prog_waits_for_optimizer), 0);
	UKT_EQ(ukt_install_handler(SIGILL, prog_waits_for_optimizer), 0);
	struct kprobe kp = { .addr = (void *)o_chain, .pre_handler = pre_faults,
			     .fault_handler = fault_pass };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_kp = &kp;
	UKT_EXPECT_NOT_OPTIMIZED(&kp);	/* queued: this hit traps */
	UKT_EQ(o_chain(2), 5);
	UKT_EQ(prog_sig, SIGSEGV);
	UKT_EQ(prog_addr, 0x18);
	UKT_EXPECT_OPTIMIZED(&kp);	/* by the time the hit went on */
	UKT_EQ(o_chain(3), 6);
	UKT_EQ(fault_hits, 2);
	unregister_kprobe(&kp);
}

/* A program's signal handler that interrupts a probe handler and faults:
 * its fault is the program's, as without the probe. */
static atomic_long usr1_sent, usr1_done, usr1_faults;
static sigjmp_buf usr1_jb;

static void usr1_segv(int sig, siginfo_t *si, void *ctx)
{
	(void)sig; (void)si; (void)ctx;
	usr1_faults++;
	siglongjmp(usr1_jb, 1);
}

static void usr1_handler(int sig)
{
	(void)sig;
	if (!sigsetjmp(usr1_jb, 1))
		(void)*bad_ptr;		/* the program probing memory */
	usr1_done++;
}

static void send_usr1(void)
{
	usr1_sent++;
	syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), SIGUSR1);
}

static int pre_sends_usr1(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	send_usr1();
	return 0;
}

static int ret_sends_usr1(struct kretprobe_instance *ri, struct pt_regs *r)
{
	(void)ri; (void)r;
	send_usr1();
	return 0;
}

/* (Not on the breakpoint path: ukprobes' SIGTRAP handler is SA_ONSTACK
 * too, so its handlers run on that same alternate stack.) */
UKT_CASE(program_signal_handler_fault_on_its_stack_is_the_programs)
{
	static char alt[1 << 16];
	stack_t ss = { .ss_sp = alt, .ss_size = sizeof(alt) };
	UKT_EQ(sigaltstack(&ss, NULL), 0);
	/* the program's handlers first: ukprobes' own go in front and chain */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = usr1_segv;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	UKT_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
	static const char *const names[] = { "optimised kprobe", "kretprobe return handler" };
	for (int mode = 0; mode < 2; mode++) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = usr1_handler;
		sa.sa_flags = SA_ONSTACK;
		UKT_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
		struct kprobe kp = { .addr = (void *)o_chain, .pre_handler = pre_sends_usr1,
				     .fault_handler = fault_take };
		struct kretprobe rp = { .kp.addr = (void *)o_chain, .handler = ret_sends_usr1,
					.kp.fault_handler = fault_take };
		if (mode == 1)
			UKT_EQ(register_kretprobe(&rp), 0);
		else
			UKT_EQ(register_kprobe(&kp), 0);
		wait_for_kprobe_optimizer();
		if (mode == 0)
			UKT_EXPECT_OPTIMIZED(&kp);
		usr1_sent = usr1_done = usr1_faults = fault_hits = 0;
		for (long i = 0; i < 50; i++)
			UKT_EQ(o_chain(i), i + 3);
		if (usr1_sent != 50 || usr1_done != 50 || usr1_faults != 50 || fault_hits)
			UKT_FAIL("%s: %ld signals sent, %ld handlers finished, %ld faults seen by "
				 "the program, %ld by the probe's fault_handler", names[mode],
				 (long)usr1_sent, (long)usr1_done, (long)usr1_faults, (long)fault_hits);
		if (mode == 1) {
			UKT_EQ(rp.nmissed, 0);
			unregister_kretprobe(&rp);
		} else {
			UKT_EQ(kp.nmissed, 0);
			unregister_kprobe(&kp);
		}
	}
}

/* A handler's own fault after a signal came and went on its stack (the
 * signal frame's words stay below sp, the restorer's address among
 * them), or after a missed nested hit: still the handler's. */
static atomic_long usr2_seen;
static int deep_mode;

static void usr2_handler(int sig)
{
	(void)sig;
	usr2_seen++;
}

static __attribute__((noinline)) void leave_dead_frame(void)
{
	syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), SIGUSR2);
}

static __attribute__((noinline)) void fault_deep(void)
{
	volatile char buf[8192];
	buf[0] = 1;
	*(volatile int *)(long)buf[0] = 0;	/* address 1: SIGSEGV */
}

static int pre_deep_fault(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	if (deep_mode == 0 || deep_mode == 3)
		leave_dead_frame();
	else if (deep_mode == 1)
		(void)o_chain(1);		/* a missed nested hit */
	if (deep_mode >= 3) {
		char out[64];
		/* an argument a probe reads that turns out a bad pointer */
		snprintf(out, sizeof(out), "%s", (const char *)(long)((r->di & 0xff) | 0x10));
		return 0;
	}
	fault_deep();
	return 0;
}

UKT_CASE(handler_fault_after_a_returned_signal_is_the_handlers)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = usr2_handler;
	UKT_EQ(sigaction(SIGUSR2, &sa, NULL), 0);
	static const char *const what[] = { "a returned program signal, then a deep fault",
					    "a missed nested hit, then a deep fault",
					    "a deep fault", "a returned signal, then snprintf of a bad pointer",
					    "snprintf of a bad pointer" };
	for (int m = 0; m < 5; m++) {
		for (int opt = 0; opt < 2; opt++) {
			deep_mode = m;
			UKT_EQ(kprobes_set_optimization(opt), 0);
			struct kprobe kp = { .addr = (void *)o_chain_b, .pre_handler = pre_deep_fault,
					     .fault_handler = fault_take };
			struct kprobe kin = { .addr = (void *)o_chain, .pre_handler = count_pre };
			UKT_EQ(register_kprobe(&kp), 0);
			if (m == 1)
				UKT_EQ(register_kprobe(&kin), 0);
			wait_for_kprobe_optimizer();
			fault_hits = 0;
			for (long i = 0; i < 20; i++)
				UKT_EQ(o_chain_b(i), i + 9);
			if (fault_hits != 20)
				UKT_FAIL("%s, %s: the fault_handler took %ld of 20 faults", what[m],
					 opt ? "optimised" : "breakpoint", (long)fault_hits);
			if (m == 1) {
				UKT_EQ(kin.nmissed, 20);
				unregister_kprobe(&kin);
			}
			unregister_kprobe(&kp);
		}
	}
	UKT_EQ(kprobes_set_optimization(1), 0);
}

/* ---- handlers that never read their registers ---------------------------------- */

/*
 * A pre_handler that is a leaf, never reads its regs and writes no
 * general register but rax, rcx and rdi runs on the detour's bare fast
 * path, which saves only those and the flags (tests/unit/handlers.c
 * checks which path each of these takes).  Every kind here, bare or not,
 * with every general register and the flags live across the probe: each
 * must come out as it went in, and a handler that reads regs after
 * another was put in its place must see them whole.
 */
static int writes_rdx_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	__asm__ volatile("mov $-1, %%edx" ::: "rdx");
	hits++;
	return 0;
}

static int writes_rsi_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	__asm__ volatile("mov $-1, %%esi" ::: "rsi");
	hits++;
	return 0;
}

static int writes_r11_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	__asm__ volatile("mov $-1, %%r11d" ::: "r11");
	hits++;
	return 0;
}

static int writes_rbx_pre(struct kprobe *p, struct pt_regs *r)	/* pushed, popped */
{
	(void)p; (void)r;
	__asm__ volatile("mov $-1, %%ebx" ::: "rbx");
	hits++;
	return 0;
}

static int writes_rdi_rcx_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	__asm__ volatile("mov $-1, %%edi\n mov $-1, %%ecx" ::: "rdi", "rcx");
	hits++;
	return 0;
}

/* reads one register through regs, writes only what a bare one may */
static int reads_di_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	if (r->di != V_IN(5))
		reg_bad |= 1UL << 5;
	hits++;
	return 0;
}

/* reads every register the probe saw */
static int sees_in_pre(struct kprobe *p, struct pt_regs *r)
{
	const unsigned long v[] = { r->ax, r->bx, r->cx, r->dx, r->si, r->di, r->bp, r->r8,
				    r->r9, r->r10, r->r11, r->r12, r->r13, r->r14, r->r15 };
	for (int i = 0; i < 15; i++)
		if (v[i] != V_IN(i))
			reg_bad |= 1UL << i;
	if (r->ip != (unsigned long)p->addr)
		reg_bad |= 1UL << 15;
	if (!(r->flags & 1))
		reg_bad |= 1UL << 16;
	hits++;
	return 0;
}

/* The stack below the caller's sp filled with garbage: what a path
 * leaves unwritten there must not be what an earlier hit wrote */
static __attribute__((noinline)) void scrub_stack(void)
{
	volatile unsigned char junk[4096];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(0xa5 ^ i);
}

/* o_regs once: every register as it went in, CF too */
static void check_regs_kept(const char *what)
{
	memset(o_regs_out, 0, sizeof(o_regs_out));
	reg_bad = 0;
	scrub_stack();
	o_regs();
	if (reg_bad)
		UKT_FAIL("%s: the handler saw wrong registers: mask %#lx", what, reg_bad);
	for (int i = 0; i < 15; i++)
		if (o_regs_out[i] != V_IN(i))
			UKT_FAIL("%s: register %d is %#lx after the probe, %#lx before", what, i,
				 o_regs_out[i], V_IN(i));
	if (!(o_regs_out[15] & 1))
		UKT_FAIL("%s: CF lost", what);
	UKT_EQ(o_regs_out[16], o_regs_sp);
}

/* o_flags both ways: all six status flags as they went in */
static void check_flags_kept(const char *what)
{
	for (long set = 0; set < 2; set++) {
		unsigned long f = o_flags(set) & 0x8d5;	/* OF SF ZF AF PF CF */
		if (f != (set ? 0x8d5UL : 0))
			UKT_FAIL("%s: status flags %#lx after the probe, %#lx before", what, f,
				 set ? 0x8d5UL : 0);
	}
}

UKT_CASE(handlers_without_regs_keep_every_register_and_flag)
{
	static const struct {
		const char *name;
		int (*pre)(struct kprobe *, struct pt_regs *);
	} hs[] = {
		{ "count_pre", count_pre },
		{ "writes_rdi_rcx_pre", writes_rdi_rcx_pre },
		{ "writes_rdx_pre", writes_rdx_pre },
		{ "writes_rsi_pre", writes_rsi_pre },
		{ "writes_r11_pre", writes_r11_pre },
		{ "writes_rbx_pre", writes_rbx_pre },
		{ "sees_in_pre", sees_in_pre },
		{ "reads_di_pre", reads_di_pre },
	};
	for (size_t h = 0; h < sizeof(hs) / sizeof(hs[0]); h++) {
		struct kprobe kr = { .addr = (void *)o_regs_probe, .pre_handler = hs[h].pre };
		struct kprobe kf = { .addr = (void *)o_flags_probe, .pre_handler = hs[h].pre };
		UKT_EQ(register_kprobe(&kr), 0);
		UKT_EQ(register_kprobe(&kf), 0);
		wait_for_kprobe_optimizer();
		UKT_EXPECT_OPTIMIZED(&kr);
		UKT_EXPECT_OPTIMIZED(&kf);
		long h0 = hits;
		for (int i = 0; i < 100; i++) {
			check_regs_kept(hs[h].name);
			check_flags_kept(hs[h].name);
		}
		UKT_EQ(hits - h0, 300);
		UKT_EQ(kr.nmissed + kf.nmissed, 0);
		unregister_kprobe(&kr);
		unregister_kprobe(&kf);
	}
}

UKT_CASE(handler_put_in_place_of_another_sees_registers)
{
	struct kprobe kp = { .addr = (void *)o_regs_probe, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	check_regs_kept("count_pre");
	kp.pre_handler = sees_in_pre;	/* not what the path was chosen for */
	long h0 = hits;
	for (int i = 0; i < 10; i++)
		check_regs_kept("sees_in_pre in count_pre's place");
	UKT_EQ(hits - h0, 10);
	kp.pre_handler = count_pre;
	check_regs_kept("count_pre again");
	UKT_EQ(hits - h0, 11);
	unregister_kprobe(&kp);
}

/* non-zero without changing regs->ip: the probed code resumes at the
 * probe point, so the probe fires again there */
static int twice_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	return (hits++ & 1) == 0;
}

static int twice_regs_pre(struct kprobe *p, struct pt_regs *r)
{
	sees_in_pre(p, r);
	return (hits & 1) == 1;		/* sees_in_pre counted */
}

UKT_CASE(nonzero_answer_without_redirect_fires_again)
{
	int (*pres[])(struct kprobe *, struct pt_regs *) = { twice_pre, twice_regs_pre };
	for (int opt = 0; opt < 2; opt++) {
		for (size_t h = 0; h < 2; h++) {
			UKT_EQ(kprobes_set_optimization(opt), 0);
			struct kprobe kp = { .addr = (void *)o_regs_probe, .pre_handler = pres[h] };
			UKT_EQ(register_kprobe(&kp), 0);
			wait_for_kprobe_optimizer();
			UKT_EQ(!!(kp.flags & KPROBE_FLAG_OPTIMIZED), opt);
			hits = 0;
			for (int i = 0; i < 10; i++)
				check_regs_kept(h ? "twice_regs_pre" : "twice_pre");
			UKT_EQ(hits, 20);
			unregister_kprobe(&kp);
		}
	}
	UKT_EQ(kprobes_set_optimization(1), 0);
}

/* The program's handler of a handler's fault sees the probe point's
 * registers, and what it changes there is what the probed code gets */
static volatile unsigned long seen_bad;
static void prog_sees_and_changes(int sig, siginfo_t *si, void *ctx)
{
	(void)sig; (void)si;
	ucontext_t *uc = ctx;
	static const int gr[] = { REG_RAX, REG_RBX, REG_RCX, REG_RDX, REG_RSI, REG_RDI, REG_RBP,
				  REG_R8, REG_R9, REG_R10, REG_R11, REG_R12, REG_R13, REG_R14,
				  REG_R15 };
	for (int i = 0; i < 15; i++)
		if ((unsigned long)uc->uc_mcontext.gregs[gr[i]] != V_IN(i))
			seen_bad |= 1UL << i;
	if ((unsigned long)uc->uc_mcontext.gregs[REG_RIP] != (unsigned long)o_regs_probe)
		seen_bad |= 1UL << 15;
	if ((unsigned long)uc->uc_mcontext.gregs[REG_RSP] != o_regs_sp)
		seen_bad |= 1UL << 16;
	if (!(uc->uc_mcontext.gregs[REG_EFL] & 1))	/* CF, set before the probe */
		seen_bad |= 1UL << 17;
	uc->uc_mcontext.gregs[REG_RAX] = (greg_t)V_OUT(0);
	uc->uc_mcontext.gregs[REG_RDX] = (greg_t)V_OUT(3);
	uc->uc_mcontext.gregs[REG_R13] = (greg_t)V_OUT(12);
	fault_hits++;
}

UKT_CASE(handler_fault_without_regs_taken_or_the_programs)
{
	for (int taken = 0; taken < 2; taken++) {
		struct kprobe kp = { .addr = (void *)o_regs_probe, .pre_handler = pre_faults,
				     .fault_handler = taken ? fault_take : fault_pass };
		ukt_install_handler(SIGSEGV, prog_sees_and_changes);
		UKT_EQ(register_kprobe(&kp), 0);
		wait_for_kprobe_optimizer();
		UKT_EXPECT_OPTIMIZED(&kp);
		long h0 = hits, f0 = fault_hits;
		for (int i = 0; i < 20; i++) {
			memset(o_regs_out, 0, sizeof(o_regs_out));
			seen_bad = 0;
			scrub_stack();
			errno = 1000 + i;
			o_regs();
			UKT_EQ(errno, 1000 + i);
			UKT_EQ(seen_bad, 0);
			for (int k = 0; k < 15; k++) {
				bool changed = !taken && (k == 0 || k == 3 || k == 12);
				unsigned long want = changed ? V_OUT(k) : V_IN(k);
				if (o_regs_out[k] != want)
					UKT_FAIL("fault %s: register %d is %#lx, want %#lx",
						 taken ? "taken" : "to the program", k,
						 o_regs_out[k], want);
			}
			UKT_ASSERT(o_regs_out[15] & 1);
			UKT_EQ(o_regs_out[16], o_regs_sp);
		}
		/* taken: fault_take and fault_pass count as the program's does */
		UKT_EQ(hits - h0, 20);
		UKT_EQ(fault_hits - f0, taken ? 20 : 40);
		UKT_EQ(kp.nmissed, 0);
		unregister_kprobe(&kp);
	}
}

/* A return probe on a bare handler: its detour at the handler's entry
 * writes r11 there (as a function's entry may), and the nested hit only
 * counts a miss; the probed code still gets r11 back */
static int probed_handler_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	hits++;
	return 0;
}

static int ret_count(struct kretprobe_instance *ri, struct pt_regs *r)
{
	(void)ri; (void)r;
	post_hits++;
	return 0;
}

UKT_CASE(return_probe_on_a_bare_handler_keeps_registers)
{
	struct kprobe kp = { .addr = (void *)o_regs_probe, .pre_handler = probed_handler_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	check_regs_kept("before the return probe");
	struct kretprobe rp = { .kp.addr = (void *)probed_handler_pre, .handler = ret_count,
				.maxactive = 4 };
	UKT_EQ(register_kretprobe(&rp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&rp.kp);
	UKT_EXPECT_OPTIMIZED(&kp);
	long h0 = hits, p0 = post_hits;
	for (int i = 0; i < 20; i++)
		check_regs_kept("a return probe on the handler");
	UKT_EQ(hits - h0, 20);
	UKT_EQ(post_hits - p0, 0);	/* inside a hit: missed */
	UKT_EQ(rp.kp.nmissed, 20);	/* the entry, nested */
	int (*volatile direct)(struct kprobe *, struct pt_regs *) = probed_handler_pre;
	UKT_EQ(direct(NULL, NULL), 0);		/* outside a hit: it fires */
	UKT_EQ(post_hits - p0, 1);
	unregister_kretprobe(&rp);
	unregister_kprobe(&kp);
}

/* A program's SIGALRM handler interrupts a bare handler on its stack and
 * faults on purpose (probing memory); its SIGSEGV handler jumps back into
 * it.  The fault is the program's, not the probe handler's: a bare
 * handler's faults come from its own code */
static volatile int alarm_seen;
static sigjmp_buf alarm_jb;
static volatile int *volatile null_int;

static int waits_for_alarm_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	while (!alarm_seen)
		__asm__ volatile("pause");
	hits++;
	return 0;
}

static void alarm_probes_memory(int sig)
{
	(void)sig;
	alarm_seen = 1;
	if (!sigsetjmp(alarm_jb, 1))
		__asm__ volatile("mov $0xdead1, %%r12\n mov $0xdead2, %%rbx\n"
				 "mov $0xdead3, %%r8\n mov (%0), %%eax"
				 :: "r"(null_int) : "r12", "rbx", "r8", "rax", "memory");
}

static void segv_back_to_alarm(int sig, siginfo_t *si, void *ctx)
{
	(void)sig; (void)si; (void)ctx;
	prog_sig++;
	siglongjmp(alarm_jb, 1);
}

UKT_CASE(program_signal_handler_fault_in_a_bare_hit_is_the_programs)
{
	struct kprobe kp = { .addr = (void *)o_regs_probe, .pre_handler = waits_for_alarm_pre,
			     .fault_handler = fault_take };
	UKT_EQ(ukt_on_signal(SIGALRM, alarm_probes_memory, 0), 0);
	ukt_install_handler(SIGSEGV, segv_back_to_alarm);
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	alarm_seen = 1;
	check_regs_kept("before");
	long f0 = fault_hits;
	for (int i = 0; i < 3; i++) {
		alarm_seen = 0;
		prog_sig = 0;
		ualarm(10000, 0);
		check_regs_kept("a program fault during the handler");
		UKT_EQ(prog_sig, 1);
	}
	UKT_EQ(fault_hits - f0, 0);
	UKT_EQ(kp.nmissed, 0);
	unregister_kprobe(&kp);
}

/* ---- vector, x87 and FP control state ----------------------------------------------- */

#define VN 128	/* doubles per o_vloop/o_yloop call: 16 (sse) / 4 (avx) iterations */

static double va[VN], vm[32];

static void vector_data(int lanes_per_acc)
{
	/* the last accumulator only ever sees subnormals: FTZ/DAZ would zero it */
	for (int i = 0; i < VN; i++) {
		int acc = (i % (8 * lanes_per_acc)) / lanes_per_acc;
		va[i] = acc == 7 ? rnd() * 0x1p-1030 : rnd();
	}
	for (int i = 0; i < 32; i++) {
		int acc = i / lanes_per_acc;
		vm[i] = acc == 7 ? 0.75 : 1.0 + rnd() * 1e-3;
	}
}

typedef void (*loop_fn)(const double *, long, const double *, double *);

/* out[mode][...] for FE_TONEAREST and FE_TOWARDZERO */
static void loop_run(loop_fn fn, double out[2][32])
{
	static const int modes[2] = { FE_TONEAREST, FE_TOWARDZERO };
	for (int m = 0; m < 2; m++) {
		UKT_EQ(fesetround(modes[m]), 0);
		struct fpstate before = fp_now();
		memset(out[m], 0, sizeof(out[m]));
		fn(va, VN, vm, out[m]);
		EXPECT_FP_UNCHANGED(before);
		UKT_EQ(fesetround(FE_TONEAREST), 0);
	}
}

/*
 * dirty_pre probes at head and mid; check(ctx, path) runs the probed loop
 * in both rounding modes and compares with the unprobed results: through
 * the breakpoints once, then through the jumps three times.  Each run
 * hits each probe iters times per mode.
 */
static void two_probes_both_paths(char *head, char *mid, int iters,
				  void (*check)(void *ctx, const char *path), void *ctx)
{
	struct kprobe kh = { .addr = (void *)head, .pre_handler = dirty_pre };
	struct kprobe km = { .addr = (void *)mid, .pre_handler = dirty_pre };
	UKT_EQ(kprobes_set_optimization(0), 0);
	UKT_EQ(register_kprobe(&kh), 0);
	UKT_EQ(register_kprobe(&km), 0);
	check(ctx, "breakpoint");
	UKT_EQ(hits, 2 * 2 * iters);
	UKT_EQ(handler_errors, 0);

	UKT_EQ(kprobes_set_optimization(1), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kh);
	UKT_EXPECT_OPTIMIZED(&km);
	for (int round = 0; round < 3; round++)
		check(ctx, "optimized");
	UKT_EQ(hits, 4 * 2 * 2 * iters);
	UKT_EQ(handler_errors, 0);
	unregister_kprobe(&kh);
	unregister_kprobe(&km);
}

struct vloop_check {
	loop_fn fn;
	double (*ref)[32];
	int nout;
};

static void vloop_check(void *ctx, const char *path)
{
	struct vloop_check *c = ctx;
	double got[2][32];
	char what[64];
	loop_run(c->fn, got);
	snprintf(what, sizeof(what), "%s, to nearest", path);
	expect_same_doubles(got[0], c->ref[0], c->nout, what);
	snprintf(what, sizeof(what), "%s, toward zero", path);
	expect_same_doubles(got[1], c->ref[1], c->nout, what);
}

static void vector_loop_case(loop_fn fn, char *head, char *mid, int lanes)
{
	double ref[2][32];
	int nout = 8 * lanes, iters = VN / nout;

	dirty_init();
	vector_data(lanes);
	loop_run(fn, ref);
	/* the data is sensitive: rounding mode and subnormals both show */
	UKT_ASSERT(memcmp(ref[0], ref[1], nout * sizeof(double)));
	UKT_ASSERT(ref[0][nout - 1] != 0.0 && fabs(ref[0][nout - 1]) < 0x1p-1022);

	struct vloop_check c = { fn, ref, nout };
	two_probes_both_paths(head, mid, iters, vloop_check, &c);
}

UKT_CASE(vectors_live_in_sse_loop_survive_handler)
{
	vector_loop_case(o_vloop, o_vloop_head, o_vloop_mid, 1);
}

UKT_CASE(vectors_live_in_avx_loop_survive_handler)
{
	if (!have_avx()) {
		printf("  no AVX here: nothing to test\n");
		return;
	}
	vector_loop_case(o_yloop, o_yloop_head, o_yloop_mid, 4);
}

struct zin {
	double m[64], add[64];
	uint16_t k[8];
};
struct zout {
	double v[128];
	uint16_t k[8];
};
void o_zloop(const double *a, long n, const struct zin *in, struct zout *out);
extern char o_zloop_head[], o_zloop_mid[];

/* out[mode] for FE_TONEAREST and FE_TOWARDZERO */
static void zloop_run(const struct zin *in, struct zout out[2])
{
	static const int modes[2] = { FE_TONEAREST, FE_TOWARDZERO };
	for (int m = 0; m < 2; m++) {
		UKT_EQ(fesetround(modes[m]), 0);
		struct fpstate before = fp_now();
		memset(&out[m], 0, sizeof(out[m]));
		o_zloop(va, VN, in, &out[m]);
		EXPECT_FP_UNCHANGED(before);
		UKT_EQ(fesetround(FE_TONEAREST), 0);
	}
}

static void expect_same_zout(const struct zout *got, const struct zout *want, const char *what)
{
	expect_same_doubles(got->v, want->v, 128, what);
	for (int k = 1; k < 8; k++)
		if (got->k[k] != want->k[k])
			UKT_FAIL("%s: k%d %#x, want %#x", what, k, got->k[k], want->k[k]);
}

struct zloop_check {
	const struct zin *in;
	const struct zout *ref;
};

static void zloop_check(void *ctx, const char *path)
{
	struct zloop_check *c = ctx;
	struct zout got[2];
	char what[64];
	zloop_run(c->in, got);
	snprintf(what, sizeof(what), "%s, to nearest", path);
	expect_same_zout(&got[0], &c->ref[0], what);
	snprintf(what, sizeof(what), "%s, toward zero", path);
	expect_same_zout(&got[1], &c->ref[1], what);
}

/* zmm0-31 and k1-k7 live at both probe points, a handler that loads
 * garbage into all of them (and calls memcpy, printf...): the detour
 * keeps them whole, on the breakpoint and the jump path alike */
UKT_CASE(vectors_live_in_avx512_loop_survive_handler)
{
	if (!have_avx512()) {
		printf("  no AVX-512 here: nothing to test\n");
		return;
	}
	static struct zin in;
	struct zout ref[2];
	dirty_init();
	vector_data(8);
	for (int i = 0; i < 64; i++) {	/* zmm7 only ever sees subnormals */
		in.m[i] = i / 8 == 7 ? 0.75 : 1.0 + rnd() * 1e-3;
		in.add[i] = rnd();
	}
	for (int k = 0; k < 8; k++)
		in.k[k] = (uint16_t)(0x5a + 37 * k);
	zloop_run(&in, ref);
	/* rounding mode shows; the masks and zmm16-23 did something */
	UKT_ASSERT(memcmp(ref[0].v, ref[1].v, 64 * sizeof(double)));
	UKT_ASSERT(memcmp(ref[0].v + 64, in.add, 64 * sizeof(double)));
	UKT_ASSERT(ref[0].v[63] != 0.0 && fabs(ref[0].v[63]) < 0x1p-1022);

	struct zloop_check c = { &in, ref };
	two_probes_both_paths(o_zloop_head, o_zloop_mid, VN / 64, zloop_check, &c);
}

void o_zdef(const void *in, void *out);
extern char o_zdef_probe[];

/* zmm0-15 live at the probe, zmm16-31 and the masks dead: all 512 bits
 * of the sixteen come through a handler that dirties every register */
UKT_CASE(zmm0_15_live_survive_handler)
{
	if (!have_avx512()) {
		printf("  no AVX-512 here: nothing to test\n");
		return;
	}
	static uint64_t in[128], out[128];
	dirty_init();
	for (int i = 0; i < 128; i++)
		in[i] = xs();
	struct kprobe kp = { .addr = (void *)o_zdef_probe, .pre_handler = dirty_pre };
	for (int opt = 0; opt < 2; opt++) {
		UKT_EQ(kprobes_set_optimization(opt), 0);
		UKT_EQ(register_kprobe(&kp), 0);
		wait_for_kprobe_optimizer();
		if (opt)
			UKT_EXPECT_OPTIMIZED(&kp);
		for (int round = 0; round < 3; round++) {
			memset(out, 0, sizeof(out));
			o_zdef(in, out);
			for (int i = 0; i < 128; i++)
				if (out[i] != in[i])
					UKT_FAIL("%s: zmm%d bits %d-%d: %#llx, want %#llx",
						 opt ? "optimized" : "breakpoint", i / 8, i % 8 * 64,
						 i % 8 * 64 + 63, (unsigned long long)out[i],
						 (unsigned long long)in[i]);
		}
		unregister_kprobe(&kp);
	}
	UKT_EQ(hits, 6);
	UKT_EQ(handler_errors, 0);
	UKT_EQ(kprobes_set_optimization(1), 0);
}

/* eight double arguments, live in xmm0-7 at the entry */
__attribute__((noinline)) double o_fargs(double a, double b, double c, double d, double e,
					 double f, double g, double h)
{
	return ((a * b + c) / d - e * f) * g + h / (a + 0.5);
}

static void fargs_run(double out[2][16])
{
	static const int modes[2] = { FE_TONEAREST, FE_TOWARDZERO };
	double (*volatile fn)(double, double, double, double, double, double, double, double) =
		o_fargs;
	for (int m = 0; m < 2; m++) {
		UKT_EQ(fesetround(modes[m]), 0);
		struct fpstate before = fp_now();
		for (int i = 0; i < 16; i++) {
			const double *v = &va[i * 8];
			out[m][i] = fn(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
		}
		EXPECT_FP_UNCHANGED(before);
		UKT_EQ(fesetround(FE_TONEAREST), 0);
	}
}

UKT_CASE(double_arguments_at_entry_survive_handler)
{
	double ref[2][16], got[2][16];
	dirty_init();
	for (int i = 0; i < VN; i++)
		va[i] = rnd() * 1000.0;
	fargs_run(ref);
	UKT_ASSERT(memcmp(ref[0], ref[1], sizeof(ref[0])));
	struct kprobe kp = { .addr = (void *)o_fargs, .pre_handler = dirty_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	fargs_run(got);
	expect_same_doubles(got[0], ref[0], 16, "breakpoint, to nearest");
	expect_same_doubles(got[1], ref[1], 16, "breakpoint, toward zero");
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	for (int round = 0; round < 3; round++) {
		fargs_run(got);
		expect_same_doubles(got[0], ref[0], 16, "optimized, to nearest");
		expect_same_doubles(got[1], ref[1], 16, "optimized, toward zero");
	}
	UKT_EQ(hits, 4 * 2 * 16);
	UKT_EQ(handler_errors, 0);
	unregister_kprobe(&kp);
}

/*
 * gcc's -fipa-ra (on at -O2): a caller that knows its local callee
 * touches no vector register keeps its own values in caller-saved xmm
 * registers across the call, so at the callee's entry registers the ABI
 * calls dead are live.  A probe on the callee must not lose them.
 */
static __attribute__((noinline)) long ipa_callee(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 3 + 1;
}

__attribute__((noinline)) void ipa_caller(const double *in, double *out, long n)
{
	double a = in[0] * in[1], b = in[1] * in[2], c = in[2] * in[3], d = in[3] * in[4];
	double e = in[4] * in[5], f = in[5] * in[6], g = in[6] * in[7], h = in[7] * in[8];
	double i = in[8] * in[9], j = in[9] * in[10], k = in[10] * in[11], l = in[11] * in[0];
	double m = (double)ipa_callee(n);
	out[0] = a * m + l; out[1] = b * m + k; out[2] = c * m + j; out[3] = d * m + i;
	out[4] = e * m + h; out[5] = f * m + g; out[6] = g * m + f; out[7] = h * m + e;
	out[8] = i * m + d; out[9] = j * m + c; out[10] = k * m + b; out[11] = l * m + a;
}

static __attribute__((noinline)) long ipa_callee_y(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 5 + 3;
}

__attribute__((noinline, target("avx"))) void ipa_caller_y(const double *in, double *out, long n)
{
	__m256d a = _mm256_loadu_pd(in), b = _mm256_loadu_pd(in + 4), c = _mm256_loadu_pd(in + 8);
	__m256d d = _mm256_mul_pd(a, b), e = _mm256_mul_pd(b, c), f = _mm256_mul_pd(c, a);
	__m256d g = _mm256_add_pd(a, c), h = _mm256_sub_pd(b, a);
	__m256d m = _mm256_set1_pd((double)ipa_callee_y(n));
	_mm256_storeu_pd(out, _mm256_add_pd(_mm256_mul_pd(d, m), g));
	_mm256_storeu_pd(out + 4, _mm256_add_pd(_mm256_mul_pd(e, m), h));
	_mm256_storeu_pd(out + 8, _mm256_add_pd(_mm256_mul_pd(f, m), a));
	_mm256_storeu_pd(out + 12, _mm256_add_pd(_mm256_mul_pd(g, m), b));
	_mm256_storeu_pd(out + 16, _mm256_add_pd(_mm256_mul_pd(h, m), c));
}

static void caller_values_case(void (*caller)(const double *, double *, long),
			       long (*callee)(long), int nout)
{
	double ref[8][20], got[8][20];
	dirty_init();
	for (int i = 0; i < VN; i++)
		va[i] = rnd();
	for (int k = 0; k < 8; k++)
		caller(&va[k * 12], ref[k], k + 1);
	struct kprobe kp = { .addr = (void *)callee, .pre_handler = dirty_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	for (int k = 0; k < 8; k++) {
		caller(&va[k * 12], got[k], k + 1);
		expect_same_doubles(got[k], ref[k], nout, "breakpoint");
	}
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	for (int k = 0; k < 8; k++) {
		caller(&va[k * 12], got[k], k + 1);
		expect_same_doubles(got[k], ref[k], nout, "optimized");
	}
	UKT_EQ(hits, 16);
	UKT_EQ(handler_errors, 0);
	unregister_kprobe(&kp);
}

UKT_CASE(caller_xmm_values_kept_across_call_survive)
{
	caller_values_case(ipa_caller, ipa_callee, 12);
}

UKT_CASE(caller_ymm_values_kept_across_call_survive)
{
	if (!have_avx()) {
		printf("  no AVX here: nothing to test\n");
		return;
	}
	caller_values_case(ipa_caller_y, ipa_callee_y, 20);
}

static int x87_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	dirty_everything();
	__asm__ volatile("fninit");	/* empties the stack the probed code filled */
	unsigned short cw = 0x0c7f;	/* toward zero, single precision */
	__asm__ volatile("fldcw %0" :: "m"(cw));
	hits++;
	return 0;
}

static void x87_run(double *out, int n)
{
	for (int i = 0; i < n; i++) {
		struct fpstate before = fp_now();
		o_x87(&va[i * 3], &out[i]);
		EXPECT_FP_UNCHANGED(before);
	}
}

UKT_CASE(x87_stack_live_and_control_word_survive)
{
	enum { N = 32 };
	double ref[N], got[N];
	int sensitive = 0;
	dirty_init();
	for (int i = 0; i < 3 * N; i++)
		va[i] = rnd() * 1e6;
	x87_run(ref, N);
	/* the 80-bit intermediate matters: rounded to double it differs */
	for (int i = 0; i < N; i++) {
		volatile double prod = va[i * 3 + 1] * va[i * 3 + 2];
		if (va[i * 3] + prod != ref[i])
			sensitive++;
	}
	UKT_ASSERT(sensitive > 0);
	struct kprobe kp = { .addr = (void *)o_x87_probe, .pre_handler = x87_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	x87_run(got, N);
	expect_same_doubles(got, ref, N, "breakpoint");
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	for (int round = 0; round < 3; round++) {
		x87_run(got, N);
		expect_same_doubles(got, ref, N, "optimized");
	}
	UKT_EQ(hits, 4 * N);
	UKT_EQ(handler_errors, 0);
	unregister_kprobe(&kp);
}

UKT_CASE(mxcsr_and_x87_cw_do_not_leak_from_integer_code)
{
	/* no vector register is live anywhere near o_chain: the controls
	 * are still the program's */
	dirty_init();
	struct kprobe kp = { .addr = (void *)o_chain, .pre_handler = dirty_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	struct fpstate before = fp_now();
	UKT_EQ(o_chain(1), 4);
	EXPECT_FP_UNCHANGED(before);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	for (int m = 0; m < 2; m++) {
		UKT_EQ(fesetround(m ? FE_TOWARDZERO : FE_TONEAREST), 0);
		before = fp_now();
		/* 1/10 and -1/10 round differently in every pair of modes */
		volatile double x = 1.0, y = 10.0;
		double q0[2] = { x / y, -x / y };
		UKT_EQ(o_chain(2), 5);
		EXPECT_FP_UNCHANGED(before);
		double q1[2] = { x / y, -x / y };
		expect_same_doubles(q1, q0, 2, "SSE division after the call");
		volatile long double lx = 1.0L, ly = 10.0L;
		long double l0 = lx / ly;
		UKT_EQ(o_caller(2), 5);
		EXPECT_FP_UNCHANGED(before);
		long double l1 = lx / ly;
		UKT_ASSERT(!memcmp(&l0, &l1, 10));
	}
	UKT_EQ(fesetround(FE_TONEAREST), 0);
	UKT_EQ(hits, 5);
	UKT_EQ(handler_errors, 0);
	unregister_kprobe(&kp);
}

static unsigned long df_seen;
static int df_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	df_seen = r->flags;
	dirty_everything();	/* memcpy/memmove with DF set would go backwards */
	hits++;
	return 0;
}

UKT_CASE(direction_flag_set_at_the_probe)
{
	dirty_init();
	struct kprobe kp = { .addr = (void *)o_std_probe, .pre_handler = df_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_ASSERT(o_std() & 0x400);
	UKT_ASSERT(df_seen & 0x400);		/* the handler sees the program's DF */
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	for (int i = 0; i < 3; i++) {
		df_seen = 0;
		UKT_ASSERT(o_std() & 0x400);	/* the code keeps it */
		UKT_ASSERT(df_seen & 0x400);
	}
	UKT_EQ(hits, 4);
	UKT_EQ(handler_errors, 0);		/* the handler ran with DF clear */
	unregister_kprobe(&kp);
}

static long redzone_ref(long x)
{
	long r = 0;
	for (long i = 0; i < 16; i++)
		r = r * 31 + (x + i);
	return r;
}

UKT_CASE(red_zone_and_stack_alignment)
{
	dirty_init();
	struct kprobe kr = { .addr = (void *)o_redzone_probe, .pre_handler = dirty_pre };
	struct kprobe k16 = { .addr = (void *)o_align16_probe, .pre_handler = dirty_pre };
	struct kprobe kodd = { .addr = (void *)o_align_odd_probe, .pre_handler = dirty_pre };
	UKT_EQ(o_redzone(5), redzone_ref(5));
	UKT_EQ(register_kprobe(&kr), 0);
	UKT_EQ(register_kprobe(&k16), 0);
	UKT_EQ(register_kprobe(&kodd), 0);
	UKT_EQ(o_redzone(5), redzone_ref(5));
	UKT_EQ(o_align16(5), 12);
	UKT_EQ(o_align_odd(5), 14);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kr);
	UKT_EXPECT_OPTIMIZED(&k16);
	UKT_EXPECT_OPTIMIZED(&kodd);
	for (long i = 0; i < 3; i++) {
		UKT_EQ(o_redzone(i * 1000), redzone_ref(i * 1000));
		UKT_EQ(o_align16(i), i + 7);
		UKT_EQ(o_align_odd(i), i + 9);
	}
	UKT_EQ(hits, 12);
	UKT_EQ(handler_errors, 0);
	unregister_kprobe(&kr);
	unregister_kprobe(&k16);
	unregister_kprobe(&kodd);
}

/* ---- fork ----------------------------------------------------------------------------- */

static long quad_hits;
static int quad_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	quad_hits++;
	return 0;
}

/*
 * The child unoptimizes, unregisters and optimizes new probes (which may
 * reuse detour memory); none of it may reach the parent's probe.
 */
UKT_CASE(fork_child_changes_do_not_reach_parent)
{
	unsigned char *code = (unsigned char *)o_chain, jmp[5];
	struct kprobe kp = { .addr = (void *)o_chain, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	memcpy(jmp, code, 5);
	UKT_EQ(o_chain(1), 4);
	UKT_EQ(hits, 1);

	pid_t pid = fork();
	UKT_ASSERT(pid >= 0);
	if (pid == 0) {
		alarm(20);
		int bad = 0;
		if (o_chain(1) != 4 || hits != 2)
			bad |= 1;
		UKT_EQ(kprobes_set_optimization(0), 0);
		wait_for_kprobe_optimizer();
		if ((ukt_probe_flags(&kp) & KPROBE_FLAG_OPTIMIZED) || o_chain(1) != 4 || hits != 3)
			bad |= 2;
		UKT_EQ(kprobes_set_optimization(1), 0);
		wait_for_kprobe_optimizer();
		if (!(ukt_probe_flags(&kp) & KPROBE_FLAG_OPTIMIZED) || o_chain(1) != 4 || hits != 4)
			bad |= 4;
		unregister_kprobe(&kp);
		struct kprobe kq = { .addr = (void *)o_quad, .pre_handler = quad_pre };
		struct kprobe kr = { .addr = (void *)o_chain, .pre_handler = redirect_pre };
		if (register_kprobe(&kq) || register_kprobe(&kr))
			bad |= 8;
		wait_for_kprobe_optimizer();
		if (!(ukt_probe_flags(&kq) & KPROBE_FLAG_OPTIMIZED) ||
		    !(ukt_probe_flags(&kr) & KPROBE_FLAG_OPTIMIZED))
			bad |= 16;
		if (o_quad(1) != 11 || quad_hits != 1 || o_chain(1) != 107)
			bad |= 32;
		_exit(bad);
	}
	int st;
	UKT_EQ(waitpid(pid, &st, 0), pid);
	if (WIFSIGNALED(st))
		UKT_FAIL("the child was killed by signal %d%s", WTERMSIG(st),
			 WTERMSIG(st) == SIGALRM ? " (hung, in wait_for_kprobe_optimizer?)" : "");
	if (WEXITSTATUS(st))
		UKT_FAIL("the child's checks failed: mask %#x (1 hit, 2 knob off, 4 knob on, "
			 "8 register, 16 optimize, 32 new probes)", WEXITSTATUS(st));

	/* the parent's probe is as it was */
	UKT_EXPECT_OPTIMIZED(&kp);
	UKT_ASSERT(!memcmp(code, jmp, 5));
	for (int i = 0; i < 3; i++)
		UKT_EQ(o_chain(1), 4);
	UKT_EQ(hits, 4);
	UKT_EQ(o_alt_calls, 0);
	UKT_EQ(o_quad(1), 11);
	UKT_EQ(quad_hits, 0);
	UKT_EQ(kprobes_set_optimization(0), 0);
	wait_for_kprobe_optimizer();
	UKT_EQ(o_chain(1), 4);
	UKT_EQ(kprobes_set_optimization(1), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	UKT_EQ(o_chain(1), 4);
	UKT_EQ(hits, 6);
	unregister_kprobe(&kp);
}

/* ---- refusals, reported with UKPROBES_VERBOSE=1 ----------------------------------------- */

/*
 * The engine may read UKPROBES_VERBOSE once, when it starts: a case that
 * needs it runs itself again in a fresh process whose environment has it
 * from the start ("<binary> <case name>"), and passes if that run passes.
 */
static void need_verbose(const char *case_name)
{
	const char *v = getenv("UKPROBES_VERBOSE");
	if (v && !strcmp(v, "1"))
		return;
	int out[2];
	UKT_EQ(pipe(out), 0);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	UKT_ASSERT(pid >= 0);
	if (pid == 0) {
		setenv("UKPROBES_VERBOSE", "1", 1);
		unsetenv("UKPROBES_QUIET");
		dup2(out[1], 1);
		close(out[0]);
		close(out[1]);
		execl("/proc/self/exe", "api-optimize[verbose]", case_name, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	static char text[8192];
	size_t n = 0;
	ssize_t k;
	while (n < sizeof(text) - 1 && (k = read(out[0], text + n, sizeof(text) - 1 - n)) > 0)
		n += (size_t)k;
	text[n] = 0;
	close(out[0]);
	int st;
	UKT_EQ(waitpid(pid, &st, 0), pid);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !strstr(text, " 1 passed, 0 failed"))
		UKT_FAIL("re-run with UKPROBES_VERBOSE=1 failed (status %#x):\n%s", st, text);
	_exit(0);
}

static int cap_fd = -1, saved_fd = -1;
static char captured[16384];

static void capture_begin(void)
{
	char tmpl[] = "/tmp/ukt-optimize-XXXXXX";
	fflush(stderr);
	cap_fd = mkstemp(tmpl);
	UKT_ASSERT(cap_fd >= 0);
	unlink(tmpl);
	saved_fd = dup(2);
	UKT_ASSERT(saved_fd >= 0);
	dup2(cap_fd, 2);
}

/* no UKT_ASSERT between begin and end: its message would be captured */
static const char *capture_end(void)
{
	fflush(stderr);
	dup2(saved_fd, 2);
	close(saved_fd);
	ssize_t n = pread(cap_fd, captured, sizeof(captured) - 1, 0);
	captured[n > 0 ? n : 0] = 0;
	close(cap_fd);
	return captured;
}

/* a line with "not optimized:" and, after it, the reason */
static bool refusal_line(const char *text, const char *reason)
{
	for (const char *l = text; l && *l;) {
		const char *eol = strchr(l, '\n');
		size_t len = eol ? (size_t)(eol - l) : strlen(l);
		char line[1024];
		snprintf(line, sizeof(line), "%.*s", (int)len, l);
		const char *at = strstr(line, "not optimized:");
		if (at && (!reason || strstr(at, reason)))
			return true;
		l = eol ? eol + 1 : NULL;
	}
	return false;
}

/*
 * A place where no region of whole instructions can take the jump, for
 * reason: the probe is optimised by a punned jump instead (verbose: a
 * "punned jump: <reason>" line), fires at every call, and the function
 * computes what it computes, probed and after.
 */
static void punned_case(const char *case_name, void *fn, void *at, const char *sym, long x,
			long want, const char *reason)
{
	long (*call)(long, long) = (long (*)(long, long))fn;
	need_verbose(case_name);

	struct kprobe kp = { .addr = (kprobe_opcode_t *)at, .pre_handler = count_pre };
	long v[3];
	int r, lr = -1;
	char list[512], want_l[256];
	uint8_t before[16];
	memcpy(before, at, sizeof(before));
	capture_begin();
	r = register_kprobe(&kp);
	wait_for_kprobe_optimizer();
	v[0] = call(x, 3);
	unsigned f0 = ukt_probe_flags(&kp);
	/* again: the knob off and on */
	kprobes_set_optimization(0);
	kprobes_set_optimization(1);
	wait_for_kprobe_optimizer();
	v[1] = call(x, 3);
	v[2] = call(x, 3);
	unsigned f1 = ukt_probe_flags(&kp);
	memset(list, 0, sizeof(list));
	FILE *lf = fmemopen(list, sizeof(list), "w");
	if (lf) {
		lr = kprobes_list(lf);
		fclose(lf);
	}
	const char *err = capture_end();

	UKT_EQ(r, 0);
	UKT_EQ(lr, 0);
	for (int i = 0; i < 3; i++)
		UKT_EQ(v[i], want);
	UKT_EQ(hits, 3);
	UKT_ASSERT(f0 & KPROBE_FLAG_OPTIMIZED);
	UKT_ASSERT(f1 & KPROBE_FLAG_OPTIMIZED);
	want_line(want_l, sizeof(want_l), &kp, sym, (unsigned)((char *)at - (char *)fn),
		  " [OPTIMIZED]");
	UKT_STREQ(list, want_l);
	char pun[160];
	snprintf(pun, sizeof(pun), "punned jump: %s", reason);
	if (!strstr(err, pun))
		UKT_FAIL("no \"%s\" line on stderr; it had:\n%s", pun, err);
	unregister_kprobe(&kp);
	UKT_ASSERT(!memcmp(before, at, sizeof(before)));
	UKT_EQ(call(x, 3), want);
	UKT_EQ(hits, 3);
}

UKT_CASE(punned_jump_into_region)
{
	/* xor (2) + add (3) from the entry; the loop jumps back to +2 */
	punned_case("punned_jump_into_region", (void *)o_jin, (void *)o_jin, "o_jin", 7, 21,
		     "jump into the region");
}

UKT_CASE(punned_region_crosses_function_end)
{
	/* 3 bytes, then o_tiny_next: the jump would overwrite its start */
	punned_case("punned_region_crosses_function_end", (void *)o_tiny, (void *)o_tiny,
		     "o_tiny", 7, 7, "region crosses the function's end");
	UKT_EQ(o_tiny_next(7), 9);
}

UKT_CASE(punned_call_inside_region)
{
	/* call *%rax (2 bytes) then pop: the call would return into the region */
	punned_case("punned_call_inside_region", (void *)o_callin, (void *)o_callin_call,
		     "o_callin", 7, 17, "call inside the region");
}

/* a switch table read: the function's probes are optimised, and every
 * case and the default still run right */
static void switch_case(long (*fn)(long, long), void *at, const long *in, const long *out, int n)
{
	struct kprobe kp = { .addr = at, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	for (int i = 0; i < n; i++)
		UKT_EQ(fn(in[i], 3), out[i]);
	unregister_kprobe(&kp);
	for (int i = 0; i < n; i++)
		UKT_EQ(fn(in[i], 3), out[i]);
}

UKT_CASE(switch_table_function_is_optimised)
{
	static const long in[] = { -1, 0, 1, 2, 3, 4, 1L << 40 };
	static const long out[] = { -1, 10, 20, 30, 40, -1, -1 };
	switch_case(o_sw, (void *)o_sw, in, out, 7);
}

UKT_CASE(switch_table_hoisted_out_of_a_loop_is_read)
{
	static const long in[] = { 0, 1, 4, 5, 9 };
	static const long out[] = { 0, 1, 10, 11, 21 };
	switch_case(o_swloop, (void *)o_swloop, in, out, 5);
}

UKT_CASE(switch_table_of_a_byte_index_from_a_label)
{
	static const long in[] = { 0, 1, 2, 3 };
	static const long out[] = { 11, 12, 13, 14 };
	switch_case(o_swbase, (void *)o_swbase, in, out, 4);
}

UKT_CASE(switch_table_added_by_lea)
{
	static const long in[] = { -5, 0, 1, 2, 3 };
	static const long out[] = { 0, 5, 6, 7, 0 };
	switch_case(o_swlea, (void *)o_swlea, in, out, 5);
}

/* the detour's copy goes on after a branch not taken, and leaves by it
 * when taken */
UKT_CASE(branch_inside_region_is_optimised)
{
	static const long in[] = { 0, 1, -1, 0 };
	static const long out[] = { 7, 5, 5, 7 };
	switch_case(o_jcin, (void *)o_jcin, in, out, 4);
}

/* the copy of a system call leaves rcx as the instruction in place does
 * (the address after it), not the copy's */
UKT_CASE(syscall_inside_region_is_optimised)
{
	long want = (long)o_sysin + 3;
	UKT_EQ(o_sysin(SYS_getpid, 0), want);
	static const long in[] = { SYS_getpid, SYS_getppid };
	const long out[] = { want, want };
	switch_case(o_sysin, (void *)o_sysin, in, out, 2);
}

/* a table target inside the entry region: the table is read, so the
 * refusal names the target, not the indirect jump */
UKT_CASE(punned_switch_case_inside_region)
{
	punned_case("punned_switch_case_inside_region", (void *)o_sw_in, (void *)o_sw_in_c0,
		     "o_sw_in", 0, 21, "jump into the region");
	UKT_EQ(o_sw_in(1, 0), 21);
	UKT_EQ(o_sw_in(2, 0), -1);
}

/* one way into the loop does not hold the table: unproven */
UKT_CASE(punned_switch_table_register_not_proven)
{
	punned_case("punned_switch_table_register_not_proven", (void *)o_swbad, (void *)o_swbad,
		     "o_swbad", 5, 11, "indirect jump in the function");
}

/* a bound on %al says nothing of %rax without a zero extension */
UKT_CASE(punned_switch_narrow_bound_without_extension)
{
	punned_case("punned_switch_narrow_bound_without_extension", (void *)o_swnarrow,
		     (void *)o_swnarrow, "o_swnarrow", 6, 8, "indirect jump in the function");
}

UKT_CASE(punned_indirect_jump_in_function)
{
	punned_case("punned_indirect_jump_in_function", (void *)o_ijmp, (void *)o_ijmp, "o_ijmp",
		     7, 8, "indirect jump in the function");
}

/* bytes 1..4 of the entry region are reached through a pointer that code
 * (a lea) or data (a relocation) makes elsewhere: refused, and the jumps
 * through the pointer keep working while the probe is in */
static void pointer_into_region_case(const char *case_name, long (*fn)(long, long),
				     const char *sym, long (*via)(long))
{
	punned_case(case_name, (void *)fn, (void *)fn, sym, 7, 7, "jump into the region");
	struct kprobe kp = { .addr = (void *)fn, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EQ(via(9), 9);
	UKT_EQ(hits, 3);	/* refusal_case's three calls; not this one */
	unregister_kprobe(&kp);
}

UKT_CASE(punned_region_a_lea_points_into)
{
	pointer_into_region_case("punned_region_a_lea_points_into", o_lref, "o_lref", o_lref_via);
}

UKT_CASE(punned_region_a_relocation_points_into)
{
	pointer_into_region_case("punned_region_a_relocation_points_into", o_dref, "o_dref",
				 o_dref_via);
}

/* a tail call through a function pointer does not keep its function
 * from being optimised */
UKT_CASE(tail_call_through_pointer_is_optimized)
{
	need_verbose("tail_call_through_pointer_is_optimized");
	long (*const fp[1])(long) = { o_tiny_next };
	struct kprobe kp = { .addr = (void *)o_tail, .pre_handler = count_pre };
	capture_begin();
	int r = register_kprobe(&kp);
	long v0 = o_tail(5, fp);
	wait_for_kprobe_optimizer();
	long v1 = o_tail(6, fp);
	const char *err = capture_end();
	UKT_EQ(r, 0);
	if (refusal_line(err, NULL))
		UKT_FAIL("refused: %s", err);
	UKT_EXPECT_OPTIMIZED(&kp);
	UKT_EQ(v0, 8);
	UKT_EQ(v1, 9);
	UKT_EQ(hits, 2);
	unregister_kprobe(&kp);
	UKT_EQ(o_tail(1, fp), 4);
	UKT_EQ(hits, 2);
}

UKT_CASE(padding_after_ret_may_belong_to_region)
{
	need_verbose("padding_after_ret_may_belong_to_region");
	struct kprobe kp = { .addr = (void *)o_ret0, .pre_handler = count_pre };
	long v0, v1;
	int r;
	capture_begin();
	r = register_kprobe(&kp);
	v0 = o_ret0();
	wait_for_kprobe_optimizer();
	v1 = o_ret0();
	const char *err = capture_end();
	UKT_EQ(r, 0);
	if (refusal_line(err, NULL))
		UKT_FAIL("refused: %s", err);
	UKT_EXPECT_OPTIMIZED(&kp);
	UKT_EQ(v0, 0);
	UKT_EQ(v1, 0);
	for (int i = 0; i < 3; i++)
		UKT_EQ(o_ret0(), 0);
	UKT_EQ(hits, 5);
	unregister_kprobe(&kp);
	UKT_EQ(o_ret0(), 0);
	UKT_EQ(hits, 5);
}

/*
 * A probe on every instruction of o_padjmp, the nop after its jmp too,
 * which never runs: the jmp's jump covers that nop's int3 (and puts it
 * back whenever it goes), so the jmp is no breakpoint; the nop's probe
 * stays one, never hit, and says why.
 */
static atomic_long pad_hits[6];
static struct kprobe pad_kp[6];

static int pad_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)r;
	pad_hits[p - pad_kp]++;
	return 0;
}

static void pad_expect(long x, const long *want)
{
	UKT_EQ(o_padjmp(x), x + 3);
	for (int i = 0; i < 6; i++)
		UKT_EQ(pad_hits[i], want[i]);
}

UKT_CASE(probe_on_dead_padding_leaves_the_jump_before_it)
{
	need_verbose("probe_on_dead_padding_leaves_the_jump_before_it");
	static const unsigned off[6] = { 0, 3, 7, 9, 13, 17 };	/* 9: the dead nop */
	const uint8_t *f = (const uint8_t *)o_padjmp;
	uint8_t orig[18];
	memcpy(orig, f, sizeof(orig));
	UKT_EQ(orig[7], 0xeb);		/* a short jmp, over the 4-byte nop */
	UKT_EQ(orig[9], 0x0f);
	struct kprobe *kps[6];
	for (int i = 0; i < 6; i++) {
		pad_kp[i] = (struct kprobe){ .addr = (void *)(f + off[i]), .pre_handler = pad_pre };
		kps[i] = &pad_kp[i];
	}
	capture_begin();
	int r = register_kprobes(kps, 6);
	wait_for_kprobe_optimizer();
	const char *err = capture_end();
	UKT_EQ(r, 0);
	if (!refusal_line(err, "dead padding under the jump at -2: never runs"))
		UKT_FAIL("no reason for the nop's probe: %s", err);
	long want[6] = { 1, 1, 1, 0, 1, 1 };
	for (int i = 0; i < 6; i++) {
		if (i == 3)
			UKT_EXPECT_NOT_OPTIMIZED(&pad_kp[i]);
		else
			UKT_EXPECT_OPTIMIZED(&pad_kp[i]);
	}
	UKT_EQ(f[7], 0xe9);		/* the jmp's own jump */
	pad_expect(1, want);

	/* the jump taken out: the nop's int3 is back under it */
	UKT_EQ(kprobes_set_optimization(0), 0);
	UKT_EQ(f[7], 0xcc);
	UKT_EQ(f[9], 0xcc);
	for (int i = 0; i < 6; i++)
		want[i] += i != 3;
	pad_expect(2, want);
	UKT_EQ(kprobes_set_optimization(1), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&pad_kp[2]);
	UKT_EQ(f[7], 0xe9);

	/* a change at the nop's probe takes the jump out first, and the
	 * optimizer makes it again */
	UKT_EQ(disable_kprobe(&pad_kp[3]), 0);
	UKT_EQ(f[9], 0x0f);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&pad_kp[2]);
	UKT_EQ(enable_kprobe(&pad_kp[3]), 0);
	UKT_EQ(f[9], 0xcc);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&pad_kp[2]);
	UKT_EXPECT_NOT_OPTIMIZED(&pad_kp[3]);
	for (int i = 0; i < 6; i++)
		want[i] += i != 3;
	pad_expect(3, want);

	/* every kprobe disabled, then enabled again */
	UKT_EQ(kprobes_set_enabled(0), 0);
	UKT_ASSERT(!memcmp(f, orig, sizeof(orig)));
	pad_expect(4, want);
	UKT_EQ(kprobes_set_enabled(1), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&pad_kp[2]);
	for (int i = 0; i < 6; i++)
		want[i] += i != 3;
	pad_expect(5, want);

	unregister_kprobes(kps, 6);
	UKT_ASSERT(!memcmp(f, orig, sizeof(orig)));
	pad_expect(6, want);
}

/*
 * Two threads call o_padjmp all along while the probe on its dead nop is
 * disabled, enabled, unregistered and registered again, and the knob
 * turned: each change takes the jmp's jump out (the nop's int3 back or
 * gone) and the optimizer makes it again, under the callers' feet.
 */
static atomic_int pad_stop;
static atomic_long pad_bad, pad_calls;

static void *pad_caller(void *arg)
{
	long x = (long)arg;
	while (!pad_stop) {
		if (o_padjmp(x) != x + 3)
			pad_bad++;
		pad_calls++;
		x++;
	}
	return NULL;
}

UKT_CASE(dead_padding_probe_changed_while_threads_call)
{
	static const unsigned off[6] = { 0, 3, 7, 9, 13, 17 };
	const uint8_t *f = (const uint8_t *)o_padjmp;
	uint8_t orig[18];
	memcpy(orig, f, sizeof(orig));
	struct kprobe *kps[6];
	for (int i = 0; i < 6; i++) {
		pad_kp[i] = (struct kprobe){ .addr = (void *)(f + off[i]), .pre_handler = pad_pre };
		kps[i] = &pad_kp[i];
	}
	UKT_EQ(register_kprobes(kps, 6), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&pad_kp[2]);
	pthread_t th[2];
	for (long t = 0; t < 2; t++)
		UKT_EQ(pthread_create(&th[t], NULL, pad_caller, (void *)(t * 1000000)), 0);
	for (int round = 0; round < 40; round++) {
		switch (round % 4) {
		case 0:
			UKT_EQ(disable_kprobe(&pad_kp[3]), 0);
			break;
		case 1:
			UKT_EQ(enable_kprobe(&pad_kp[3]), 0);
			break;
		case 2:
			unregister_kprobe(&pad_kp[3]);
			pad_kp[3] = (struct kprobe){ .addr = (void *)(f + 9), .pre_handler = pad_pre };
			UKT_EQ(register_kprobe(&pad_kp[3]), 0);
			break;
		case 3:
			UKT_EQ(kprobes_set_optimization(0), 0);
			UKT_EQ(kprobes_set_optimization(1), 0);
			break;
		}
		if (round % 2)
			wait_for_kprobe_optimizer();
	}
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&pad_kp[2]);
	UKT_EXPECT_NOT_OPTIMIZED(&pad_kp[3]);
	pad_stop = 1;
	for (int t = 0; t < 2; t++)
		pthread_join(th[t], NULL);
	UKT_EQ(pad_bad, 0);
	UKT_ASSERT(pad_calls > 0);
	UKT_EQ(pad_hits[3], 0);
	UKT_EQ(pad_hits[2], pad_calls);
	unregister_kprobes(kps, 6);
	UKT_ASSERT(!memcmp(f, orig, sizeof(orig)));
}

/*
 * Probes registered while the knob is off are analysed when it is
 * turned on: every instruction of o_quad, each within 5 bytes of the
 * next, all optimised as runs.
 */
UKT_CASE(every_instruction_registered_with_the_knob_off_optimised_when_on)
{
	static const unsigned off[6] = { 0, 3, 7, 11, 15, 19 };
	struct kprobe kp[6];
	struct kprobe *kps[6];
	UKT_EQ(kprobes_set_optimization(0), 0);
	for (int i = 0; i < 6; i++) {
		kp[i] = (struct kprobe){ .addr = (void *)((const char *)o_quad + off[i]),
					 .pre_handler = count_pre };
		kps[i] = &kp[i];
	}
	UKT_EQ(register_kprobes(kps, 6), 0);
	wait_for_kprobe_optimizer();
	for (int i = 0; i < 6; i++)
		UKT_EXPECT_NOT_OPTIMIZED(&kp[i]);
	UKT_EQ(o_quad(1), 11);
	UKT_EQ(hits, 6);
	UKT_EQ(kprobes_set_optimization(1), 0);
	wait_for_kprobe_optimizer();
	for (int i = 0; i < 6; i++)
		UKT_EXPECT_OPTIMIZED(&kp[i]);
	UKT_EQ(o_quad(2), 12);
	UKT_EQ(hits, 12);
	unregister_kprobes(kps, 6);
	UKT_EQ(o_quad(3), 13);
	UKT_EQ(hits, 12);
}

/* ---- handlers that keep to the general registers --------------------------------- */

static atomic_long lean_hits;
static volatile long lean_sum;

/* integer only: unit-handlers shows such a handler runs from the lean
 * trampoline, which saves no vector state */
static int lean_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	lean_hits++;
	lean_sum += (long)r->di;
	return 0;
}

UKT_CASE(lean_and_vector_handlers_share_a_site)
{
	double ref[2][32], got[2][32];
	int nout = 8;

	dirty_init();
	vector_data(1);
	loop_run(o_vloop, ref);
	struct kprobe kl = { .addr = (void *)o_vloop_mid, .pre_handler = lean_pre };
	struct kprobe kd = { .addr = (void *)o_vloop_mid, .pre_handler = dirty_pre };
	UKT_EQ(register_kprobe(&kl), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kl);
	for (int step = 0; step < 3; step++) {
		if (step == 1) {
			UKT_EQ(register_kprobe(&kd), 0);
			loop_run(o_vloop, got);		/* the new list, before any wait */
			expect_same_doubles(got[0], ref[0], nout, "dirty added, to nearest");
			expect_same_doubles(got[1], ref[1], nout, "dirty added, toward zero");
		}
		if (step == 2)
			unregister_kprobe(&kd);
		wait_for_kprobe_optimizer();
		UKT_EXPECT_OPTIMIZED(&kl);
		long h0 = lean_hits, d0 = hits;
		loop_run(o_vloop, got);
		expect_same_doubles(got[0], ref[0], nout, "to nearest");
		expect_same_doubles(got[1], ref[1], nout, "toward zero");
		UKT_EQ(lean_hits - h0, 2 * (VN / nout));
		UKT_EQ(hits - d0, step == 1 ? 2 * (VN / nout) : 0);
	}
	UKT_EQ(handler_errors, 0);
	unregister_kprobe(&kl);
}
