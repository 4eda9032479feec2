/* SPDX-License-Identifier: MIT */
/*
 * The kretprobe return trampolines.
 *
 * A kretprobe's entry handler replaces the probed function's return
 * address by the address of one of the stubs below, the one bound to the
 * kretprobe_instance it took, and stores the real return address in that
 * stub's slot (ukp_kret_ra, in .bss).  So the return address itself says
 * which instance returns: no per-thread stack has to match calls and
 * returns, and a frame left by longjmp or an exception leaves nothing
 * behind that a later return could pick up by mistake.
 *
 * Unwinding: the stubs are where a debugger or an unwinder finds itself
 * when it walks up from the probed function (and from its callees and the
 * entry handler's view).  Their unwind information, hand-written below,
 * says where the real return address is: in the stub's slot.  The slot of
 * the stub at pc is at pc + W, where W is one constant (the distance from
 * the stubs to the slots) stored at the start of every 256-byte group of
 * stubs, so the DWARF expression needs no absolute address:
 *
 *	slot = pc + *(pc & -256)
 *
 * This is what the ia64 thread asks for (unwind directives that recover
 * the real return address); glibc backtrace(), libgcc's unwinder, gdb
 * and libunwind all read it from this object's .eh_frame.  The stub
 * shows as one frame, "kretprobe_trampoline", between the probed
 * function and its real caller, as the kernel's does.
 *
 * Layout: group g (256-aligned) = 8 units of 32 bytes.  Unit j:
 *
 *	+0	W (unit 0 only; int3 in the others), int3 up to +10
 *	+10	call *cont(%rip)	the unit's priming call (below)
 *	+16	lea W(%rip), %r11	the stub: r11 = its address + W
 *	+23	jmp ukp_kret_common
 *	+28	int3
 *
 * The stub sets r11 to stub + W, where its slot has the real return
 * address; r11 is dead at a return (caller-saved, not a return register).
 * The slots mirror the units byte for byte, 32 bytes each:
 * { primed, lean, sysflags, cont, real return address (at stub + W),
 * instance }.
 *
 * Prediction.  A return to a stub is a return the CPU did not predict:
 * its return stack buffer holds the caller's address, pushed by the
 * caller's call.  That costs 6-8 ns a call, as much as the rest of the
 * return path.  So an entry that went through a detour built for return
 * probes (relocate.c) runs the stub's priming call on its way into the
 * function: the call pushes the stub's address on the return stack (its
 * own push on the stack is dropped at cont, in the detour), so the
 * function's ret to the stub is predicted, and the stub leaves with a
 * ret to the real caller, which then matches the caller's own entry.
 * `primed` says which exit keeps the return stack in step: the ret after
 * a primed entry, a jump after any other.
 */
#include "hitpath.h"


/* bytes 10-31 of a unit: the priming call (through the slot's cont,
 * at stub + W - 8) and the stub */
.macro KRET_UNIT_TAIL
	.byte 0xff, 0x15			/* call *disp32(%rip) */
	.long ukp_kret_ra - ukp_kret_stubs - 8
	.byte 0x4c, 0x8d, 0x1d				/* lea W(%rip), %r11 */
	.long ukp_kret_ra - ukp_kret_stubs - 7
	.byte 0xe9					/* jmp rel32 */
	.long ukp_kret_common - . - 4
	.fill 4, 1, 0xcc
.endm

	.section ukp_text, "ax", @progbits
	.p2align 8
	.globl ukp_kret_stubs, kretprobe_trampoline
	.hidden ukp_kret_stubs
	.type kretprobe_trampoline, @function
ukp_kret_stubs:
kretprobe_trampoline:
	.cfi_startproc
	.cfi_personality 0x9b, ukp_kret_pers_ref
	/* At a stub (unit + 16..31) nothing is pushed: CFA = rsp (the
	 * caller's sp: libunwind takes it from the CFA), and the return
	 * address is in the unit's slot, at (pc & -32) + 16 + *(pc & -256).
	 * At a priming call (unit + 10..15) the stack is the function's at
	 * its entry: CFA = rsp + 8, the return address (the stub) at rsp.
	 *   CFA:  DW_OP_breg7 0, DW_OP_breg16 0, DW_OP_const1u 31, DW_OP_and,
	 *         DW_OP_lit16, DW_OP_lt, DW_OP_lit3, DW_OP_shl, DW_OP_plus
	 *   rip:  DW_OP_breg16 0, DW_OP_const1u 31, DW_OP_and, DW_OP_lit16,
	 *         DW_OP_lt, DW_OP_bra 18,
	 *         DW_OP_breg16 0, DW_OP_const1s -32, DW_OP_and,
	 *         DW_OP_plus_uconst 16, DW_OP_breg16 0, DW_OP_const2s -256,
	 *         DW_OP_and, DW_OP_deref, DW_OP_plus, DW_OP_skip 2,
	 *         DW_OP_breg7 0
	 * The caller's frame then has the stub's CFA, which libgcc's phase 2
	 * takes for the stub's own: the personality routine copes (kret.c). */
	.cfi_escape 0x0f, 12, 0x77, 0x00, 0x80, 0x00, 0x08, 0x1f, 0x1a, 0x40, 0x2d, 0x33, 0x24, 0x22
	.cfi_escape 0x10, 0x10, 30, 0x80, 0x00, 0x08, 0x1f, 0x1a, 0x40, 0x2d, 0x28, 0x12, 0x00, 0x80, 0x00, 0x09, 0xe0, 0x1a, 0x23, 0x10, 0x80, 0x00, 0x0b, 0x00, 0xff, 0x1a, 0x06, 0x22, 0x2f, 0x02, 0x00, 0x77, 0x00
	.rept KRET_GROUPS
	.quad ukp_kret_ra - ukp_kret_stubs	/* W */
	.fill 2, 1, 0xcc
	KRET_UNIT_TAIL
	.rept 7
	.fill 10, 1, 0xcc
	KRET_UNIT_TAIL
	.endr
	.endr
	.cfi_endproc
	.size kretprobe_trampoline, .-kretprobe_trampoline

	.section .data.rel.ro.ukp_kret, "aw", @progbits
	.p2align 3
ukp_kret_pers_ref:
	.quad ukp_kret_personality

/*
 * ukp_kret_common: r11 = the stub + W, the return address's place in its
 * slot.  Puts the real return address where a call would have (a normal
 * frame from then on), saves pt_regs and what a
 * return leaves live besides the general registers: xmm0-1 (ymm/zmm at
 * the CPU's width), the x87 registers in use (a long double result),
 * MXCSR and the x87 control word.  Calls ukp_kret_return(slot, regs),
 * which runs the handler and answers where to go (the real return
 * address, or regs->ip if the handler moved it); restores; leaves
 * there by a ret if the entry primed the return stack buffer with the
 * stub, else by a jump through r11 (then the buffer still holds the
 * caller's own return, which stays predicted).
 */
/* what ukp_kret_resume needs on the frame at the C paths' calls (bytes
 * 8-47 of their area; the fast path has none): where to go on, and the
 * registers the code after the call uses */
#define KF_RESUME 8
#define KF_RBX 16
#define KF_R12 24
#define KF_R13 32
#define KF_R14 40
#define KF_SIZE 48
.macro KRET_FRAME resume
	lea \resume(%rip), %rax
	mov %rax, KF_RESUME(%rsp)
	mov %rbx, KF_RBX(%rsp)
	mov %r12, KF_R12(%rsp)
	mov %r13, KF_R13(%rsp)
	mov %r14, KF_R14(%rsp)
.endm
#define VS_MXCSR 0
#define VS_FCW 4
#define VS_FSW 6
#define VS_V0 64
#define VS_V1 128
#define VS_X87 192
#define VS_SIZE 320

/* %rsp = pt_regs: the flags (DF and the status flags: a handler may
 * have changed them; the others nothing here touches) and the general
 * registers back, but r11 (the stub's, dead at a return) */
.macro KRET_LEAVE
	FLAGS_BACK PT_FLAGS
	LOAD_GPRS r11=0
	.cfi_restore rbx
	.cfi_restore rbp
	.cfi_restore r12
	.cfi_restore r13
	.cfi_restore r14
	.cfi_restore r15
.endm

	.section ukp_text, "ax", @progbits
	.p2align 4
	.type ukp_kret_common, @function
ukp_kret_common:
	.cfi_startproc
	/* r11 = the stub + W: where its slot has the return address; CFA
	 * as at the stub */
	.cfi_def_cfa_offset 0
	.cfi_escape 0x10, 0x10, 2, 0x7b, 0x00	/* at (r11) */
	pushq (%r11)			/* a normal frame from here */
	.cfi_def_cfa_offset 8
	.cfi_offset rip, -8
	lea -PT_SIZE(%rsp), %rsp
	.cfi_adjust_cfa_offset PT_SIZE
	mov %rax, PT_AX(%rsp)
	mov %rcx, PT_CX(%rsp)
	mov %rsi, PT_SI(%rsp)
	/*
	 * The flags without pushfq, which costs ~2 ns of the ~30 of an
	 * entry and return here: the status flags by lahf and seto, DF by
	 * the way lodsb moves rsi (nothing touches the flags before them),
	 * the others (IF, TF, AC, ID...) as the entry saw them (the slot's
	 * sysflags): only a change of those inside the call (the function's
	 * own, or a signal handler's or debugger's) would show otherwise.
	 */
	mov %rsp, %rsi
	lodsb				/* rsi: rsp + 1, or rsp - 1 with DF */
	lahf				/* ah: SF ZF AF PF CF (bits 7-0) */
	seto %cl
	sub %rsp, %rsi
	shr $63, %rsi
	shl $10, %esi			/* DF, bit 10 */
	movzbl %ah, %eax
	movzbl %cl, %ecx
	shl $11, %ecx			/* OF, bit 11 */
	or %ecx, %eax
	or %esi, %eax
	or KS_SYSFL-KS_RA(%r11), %eax
	mov %rax, PT_FLAGS(%rsp)
	mov %r15, PT_R15(%rsp)
	mov %r14, PT_R14(%rsp)
	mov %r13, PT_R13(%rsp)
	mov %r12, PT_R12(%rsp)
	mov %rbp, PT_BP(%rsp)
	mov %rbx, PT_BX(%rsp)
	.cfi_rel_offset rbx, PT_BX
	.cfi_rel_offset rbp, PT_BP
	.cfi_rel_offset r12, PT_R12
	.cfi_rel_offset r13, PT_R13
	.cfi_rel_offset r14, PT_R14
	.cfi_rel_offset r15, PT_R15
	/* read while the instance is ours: primed (bits 0-7), lean (8-15),
	 * one byte each: the entry stored primed alone, and a 2-byte load
	 * over that store would wait for it (no forwarding: ~2 ns) */
	movzbl KS_LEAN-KS_RA(%r11), %r14d
	shl $8, %r14d
	or KS_PRIMED-KS_RA(%r11), %r14b
	mov %r11, PT_R11(%rsp)
	mov %r10, PT_R10(%rsp)
	mov %r9, PT_R9(%rsp)
	mov %r8, PT_R8(%rsp)
	mov %rdx, PT_DX(%rsp)
	mov %rdi, PT_DI(%rsp)
	movq $-1, PT_ORIG_AX(%rsp)
	mov (%r11), %rax
	mov %rax, PT_IP(%rsp)
	movq $0x33, PT_CS(%rsp)
	movq $0x2b, PT_SS(%rsp)
	lea PT_SIZE+8(%rsp), %rax
	mov %rax, PT_SP(%rsp)
	mov %rsp, %rbx
	.cfi_def_cfa_register rbx
	test $0xff00, %r14d		/* lean: the handler keeps to the */
	jz 20f				/* general registers (analyze.c): no
					   other state to keep */
	and $-16, %rsp
	testl $0x400, PT_FLAGS(%rbx)
	jz 21f
	cld
21:	/*
	 * The fast path: ukp_kret_return's common case written out here
	 * (a thread block, not nested, readers fenced by membarrier, the
	 * thread's newest instance, a live kretprobe with a handler, the
	 * handler not moving regs->ip).  r12 = t, r13 = the slot, r15 =
	 * the instance, rbp = its struct ukp_kret: callee-saved, and put
	 * back from pt_regs at the end.  The record a fault in the
	 * handler resumes with (ukp_kret_resume) is the C path's, with
	 * lean_kret 2: no frame at lean_sp, rbx and r14 come from the
	 * record (cur_regs, the slot's primed).  Anything else: the C
	 * function.
	 */
	lea -KS_RA(%r11), %r13		/* s */
	mov KS_INST(%r13), %r15		/* in */
	mov KI_K(%r15), %rbp		/* k */
	mov KI_SIZE+RI_RET_ADDR(%r15), %rax
	mov %rax, PT_IP(%rbx)		/* regs->ip: the real return address */
	THREAD_SELF %r12
	test %r12, %r12
	jz 24f
	cmp T_KRET_TOP(%r12), %r15	/* unlinked with one store */
	jne 24f
	HIT_LOCK %r12, %rax, 24f, UKP_GP_NOFAST
	mov %rbx, T_CUR_REGS(%r12)	/* next: the hit's frame (in_handler 3) */
	cmpl $0, K_DEAD(%rbp)
	jne 25f
	mov K_RP(%rbp), %rdi
	mov RP_HANDLER(%rdi), %rax
	test %rax, %rax
	jz 25f
	xor %ecx, %ecx			/* errno: a leaf handler keeps it, */
	cmpb $0, K_LEAF(%rbp)		/* and a fault in one records it */
	jne 26f				/* (kret_errp NULL: trap.c) */
	mov T_ERRNO_P(%r12), %rcx
	mov (%rcx), %edx
	mov %edx, T_LEAN_ERRNO(%r12)
26:	mov %rcx, T_KRET_ERRP(%r12)
	mov KI_BELOW(%r15), %rcx	/* unlink_inst() */
	mov %rcx, T_KRET_TOP(%r12)
	mov %rdi, T_CUR(%r12)		/* &rp->kp, its first member */
	/* cur_jb is NULL already (see the lean trampoline, entry.S); a
	 * fault resumes on this stack, at rbx rounded down to 16
	 * (ukp_kret_rec_sp) */
	mov %r13, T_KRET_SLOT(%r12)
	movl $2, T_LEAN_KRET(%r12)
	lea KI_SIZE(%r15), %rdi		/* ri */
	mov %rbx, %rsi
	call *%rax			/* rp->handler(ri, regs) */
	movl $0, T_LEAN_KRET(%r12)
	movq $0, T_CUR(%r12)
	mov T_KRET_ERRP(%r12), %r8	/* read while in_handler holds: a */
	mov T_LEAN_ERRNO(%r12), %r9d	/* signal's hit after the unlock */
					/* records its own over them */
	mov PT_IP(%rbx), %rax
	cmp KI_SIZE+RI_RET_ADDR(%r15), %rax
	jne 27f				/* sent elsewhere: kret_finish in C */
	/* on to the caller (or the next stub of a chain): the slot's ra,
	 * at PT_SIZE(%rbx) from the start.  The instance: kept by the
	 * thread for its next call if it keeps none, no one is taking it
	 * (sync.c: ukp_kc_take) and another one is free for other threads
	 * (so a thread never keeps the last one); else pushed */
	mov K_FREE_TOP(%rbp), %rax
	cmpq $0, T_KC_K(%r12)
	jne 29f
	cmpl $0, T_KC_STEAL(%r12)
	jne 29f
	test %eax, %eax
	jz 29f
	mov %r15, T_KC_INST(%r12)
	mov %rbp, T_KC_K(%r12)		/* the last use of k */
	jmp 30f
29:	mov KI_SELF(%r15), %ecx		/* inst_push(): the last use of k */
28:	mov %eax, KI_NEXT_FREE(%r15)
	mov %rax, %rdx
	shr $32, %rdx
	inc %rdx
	shl $32, %rdx
	or %rcx, %rdx
	lock cmpxchg %rdx, K_FREE_TOP(%rbp)
	jne 28b
30:	HIT_UNLOCK %r12
	test %r8, %r8			/* errno back (not for a leaf) */
	jz 13f
	mov %r9d, (%r8)
	jmp 13f
27:	mov %r12, %rdi
	call ukp_kret_return_resume
	jmp ukp_kret_lean_ret
25:	HIT_UNLOCK %r12			/* the C function decides */
24:	sub $KF_SIZE, %rsp
	KRET_FRAME ukp_kret_lean_ret
	lea -KS_RA(%r11), %rdi		/* the slot */
	mov %rbx, %rsi
	mov %rsp, %rdx
	call ukp_kret_return
ukp_kret_lean_ret:
	mov %rax, PT_SIZE(%rbx)
	jmp 13f
20:	sub $VS_SIZE, %rsp
	and $-64, %rsp
	/* vector return registers, at the CPU's width */
	mov ukp_vec_level(%rip), %eax
	test %eax, %eax
	jnz 1f
	movups %xmm0, VS_V0(%rsp)
	movups %xmm1, VS_V1(%rsp)
	jmp 3f
1:	cmp $1, %eax
	jne 2f
	vmovdqu %ymm0, VS_V0(%rsp)
	vmovdqu %ymm1, VS_V1(%rsp)
	vextractf128 $1, %ymm0, %xmm2	/* xmm2-3: dead at a return */
	vextractf128 $1, %ymm1, %xmm3
	vpor %xmm3, %xmm2, %xmm2
	vptest %xmm2, %xmm2
	setz %r12b			/* r12b: both upper halves zero */
	vzeroupper			/* C code may use legacy SSE */
	jmp 3f
2:	vmovdqu64 %zmm0, VS_V0(%rsp)
	vmovdqu64 %zmm1, VS_V1(%rsp)
	vporq %zmm1, %zmm0, %zmm2	/* zmm2-3: dead at a return */
	vextracti64x4 $1, %zmm2, %ymm3	/* bits 256-511 */
	vextracti128 $1, %ymm2, %xmm2	/* bits 128-255 */
	vpor %xmm3, %xmm2, %xmm2
	vextracti128 $1, %ymm3, %xmm3	/* bits 384-511 */
	vpor %xmm3, %xmm2, %xmm2
	vptest %xmm2, %xmm2
	setz %r12b			/* r12b: both upper parts zero */
	vzeroupper
3:	stmxcsr VS_MXCSR(%rsp)
	fnstcw VS_FCW(%rsp)
	fnstsw %ax
	mov %ax, VS_FSW(%rsp)
	/* x87 registers in use (a long double or complex long double
	 * result: TOP 7 or 6): popped here, loaded back after */
	shr $11, %eax
	neg %eax
	and $7, %eax
	mov %eax, %r13d			/* r13d = how many */
	xor %ecx, %ecx
4:	cmp %r13d, %ecx
	jae 5f
	mov %ecx, %edx
	shl $4, %edx
	fstpt VS_X87(%rsp,%rdx)
	inc %ecx
	jmp 4b
5:	KRET_FRAME 23f
	testl $0x400, PT_FLAGS(%rbx)	/* DF for C, as the detours do */
	jz 6f
	cld
6:	lea -KS_RA(%r11), %rdi		/* the slot */
	mov %rbx, %rsi
	mov %rsp, %rdx
	call ukp_kret_return
23:	mov %rax, PT_SIZE(%rbx)		/* where to go */
	/* back: x87 registers in reverse order, the words, vectors */
	mov %r13d, %ecx
7:	test %ecx, %ecx
	jz 8f
	dec %ecx
	mov %ecx, %edx
	shl $4, %edx
	fldt VS_X87(%rsp,%rdx)
	jmp 7b
8:	ldmxcsr VS_MXCSR(%rsp)
	fnstcw 8(%rsp)
	movzwl 8(%rsp), %ecx
	cmpw VS_FCW(%rsp), %cx
	je 9f
	fldcw VS_FCW(%rsp)
9:	fnstsw %ax
	cmpw VS_FSW(%rsp), %ax
	je 10f
	call ukp_x87_status_restore	/* rare: 6(%rsp) is the old word */
10:	mov ukp_vec_level(%rip), %eax
	test %eax, %eax
	jnz 11f
	movups VS_V0(%rsp), %xmm0
	movups VS_V1(%rsp), %xmm1
	jmp 13f
11:	test %r12b, %r12b
	jz 14f
	vzeroupper			/* clean uppers: keep the state clean */
	vmovdqu VS_V0(%rsp), %xmm0
	vmovdqu VS_V1(%rsp), %xmm1
	jmp 13f
14:	cmp $1, %eax
	jne 12f
	vmovdqu VS_V0(%rsp), %ymm0
	vmovdqu VS_V1(%rsp), %ymm1
	jmp 13f
12:	vmovdqu64 VS_V0(%rsp), %zmm0
	vmovdqu64 VS_V1(%rsp), %zmm1
13:	mov %rbx, %rsp
	.cfi_def_cfa_register rsp
	test $0xff, %r14d
	jnz 15f
	.cfi_remember_state
	KRET_LEAVE
	mov PT_SIZE(%rsp), %r11
	lea PT_SIZE+8(%rsp), %rsp
	.cfi_def_cfa_offset 0
	.cfi_register rip, r11
	jmp *%r11			/* the return stack keeps the caller's */
15:	.cfi_restore_state
	KRET_LEAVE
	lea PT_SIZE(%rsp), %rsp		/* primed: the return stack's next */
	.cfi_def_cfa_offset 8		/* entry is the caller's, so a ret */
	ret				/* is predicted */
	.cfi_endproc
	.size ukp_kret_common, .-ukp_kret_common

/*
 * void ukp_kret_resume(unsigned long sp, struct ukp_thread *t): a fault in
 * a return handler was taken.  Leaves the signal handler (as ukp_longjmp
 * does) for ukp_kret_common's frame at sp, as if its call of
 * ukp_kret_return had been one of ukp_kret_return_resume(t); or, after
 * the fast path's call of the handler (lean_kret 2), with rbx from t's
 * record (cur_regs) and r14 from the slot it names.
 */
	.globl ukp_kret_resume
	.hidden ukp_kret_resume
	.type ukp_kret_resume, @function
ukp_kret_resume:
	mov %rdi, %rsp
	cmpl $2, T_LEAN_KRET(%rsi)
	je 1f
	mov KF_RBX(%rsp), %rbx
	mov KF_R12(%rsp), %r12
	mov KF_R13(%rsp), %r13
	mov KF_R14(%rsp), %r14
	push KF_RESUME(%rsp)
	mov %rsi, %rdi
	jmp ukp_kret_return_resume
1:	mov T_CUR_REGS(%rsi), %rbx	/* the fast path's: no frame */
	mov T_KRET_SLOT(%rsi), %rax
	movzbl KS_PRIMED(%rax), %r14d
	lea ukp_kret_lean_ret(%rip), %rax
	push %rax
	mov %rsi, %rdi
	jmp ukp_kret_return_resume
	.size ukp_kret_resume, .-ukp_kret_resume

/*
 * ukp_kret_rethrow: installed by the personality routine at a stub whose
 * caller catches an exception (kret.c), with rsp the caller's sp, rax the
 * exception and rdx the real return address.  Raises it again as if
 * from the caller's call: to the unwinder this is a function the caller
 * called.  _Unwind_RaiseException returns only if nobody catches it now
 * (nobody did before either): that is std::terminate's case.
 */
	.type ukp_kret_rethrow, @function
	.globl ukp_kret_rethrow
	.hidden ukp_kret_rethrow
ukp_kret_rethrow:
	.cfi_startproc
	.cfi_def_cfa_offset 0
	.cfi_register rip, rdx
	push %rdx
	.cfi_def_cfa_offset 8		/* as if the caller had called this */
	.cfi_offset rip, -8
	sub $8, %rsp
	.cfi_def_cfa_offset 16
	mov %rax, %rdi
	call _Unwind_RaiseException@PLT
	call ukp_kret_uncaught		/* does not return */
	ud2
	.cfi_endproc
	.size ukp_kret_rethrow, .-ukp_kret_rethrow

/*
 * void jprobe_return(void): the end of a jprobe's entry function.  Puts
 * back the stack and the registers the probed function was entered with
 * (ukp_jprobe_unwind gives the record, after restoring the stack copy),
 * and runs the function from its first instruction, out of line.  Below
 * the function's entry sp nothing is live, so the flags and the
 * continuation go there, for popfq and ret.
 */
	.globl jprobe_return
	.type jprobe_return, @function
jprobe_return:
	.cfi_startproc
	push %rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset rbp, 0
	mov %rsp, %rbp
	.cfi_def_cfa_register rbp
	and $-16, %rsp
	call ukp_jprobe_unwind		/* rax = the record, or 0 */
	test %rax, %rax
	jnz 1f
	leave				/* not in a jprobe: nothing to do */
	.cfi_def_cfa rsp, 8
	ret
1:
	.cfi_def_cfa rbp, 16
	mov %rax, %r11
	movups JR_XMM+0(%r11), %xmm0
	movups JR_XMM+16(%r11), %xmm1
	movups JR_XMM+32(%r11), %xmm2
	movups JR_XMM+48(%r11), %xmm3
	movups JR_XMM+64(%r11), %xmm4
	movups JR_XMM+80(%r11), %xmm5
	movups JR_XMM+96(%r11), %xmm6
	movups JR_XMM+112(%r11), %xmm7
	ldmxcsr JR_MXCSR(%r11)
	fldcw JR_FCW(%r11)
	mov PT_SP(%r11), %rsp
	lea -16(%rsp), %rsp
	mov JR_CONT(%r11), %rax
	mov %rax, 8(%rsp)
	mov PT_FLAGS(%r11), %rax
	mov %rax, (%rsp)
	mov PT_R15(%r11), %r15
	mov PT_R14(%r11), %r14
	mov PT_R13(%r11), %r13
	mov PT_R12(%r11), %r12
	mov PT_BP(%r11), %rbp
	mov PT_BX(%r11), %rbx
	mov PT_R10(%r11), %r10
	mov PT_R9(%r11), %r9
	mov PT_R8(%r11), %r8
	mov PT_AX(%r11), %rax
	mov PT_CX(%r11), %rcx
	mov PT_DX(%r11), %rdx
	mov PT_SI(%r11), %rsi
	mov PT_DI(%r11), %rdi
	mov PT_R11(%r11), %r11
	popfq
	ret
	.cfi_endproc
	.size jprobe_return, .-jprobe_return

	.section .note.GNU-stack, "", @progbits
