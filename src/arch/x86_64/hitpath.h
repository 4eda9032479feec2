/* SPDX-License-Identifier: MIT */
/*
 * Assembly only (entry.S, kret.S): the thread block and the read lock as
 * the hand-written hit paths take them (the C side is ukp_read_lock()
 * and ukp_read_unlock(), internal.h; sync.c's grace period reads what
 * these write), and the flags (without popfq) and general registers put
 * back from a saved frame.
 */
#ifndef UKP_HITPATH_H
#define UKP_HITPATH_H
#include "asm-offsets.h"

/* reg = this thread's block (ukp_self), or 0 */
.macro THREAD_SELF reg
	mov ukp_self@gottpoff(%rip), \reg
	mov %fs:(\reg), \reg
.endm

/* t's read lock (nest 1), in_handler = 3 and the epoch (seq), copied
 * from ukp_gp in one store (sync.c), so from here a nested hit (a
 * signal's) only counts nmissed and leaves the thread's hit record
 * alone; to out instead if t is inside already or one of the flags off
 * is set in ukp_gp: then the C path decides.  A signal's hit between
 * the check and the store has left by the store (a full one: nest 0). */
.macro HIT_LOCK t, scratch, out, off=UKP_GP_NOFAST|UKP_GP_NOKNOB
	cmpl $0, T_NEST(\t)		/* nest and in_handler, both 0 */
	jne \out
	mov ukp_gp(%rip), \scratch
	test $\off, \scratch
	jnz \out
	.if ((\off) & UKP_GP_NOKNOB) == 0
	and $~UKP_GP_NOKNOB, \scratch	/* a flag, not part of nest */
	.endif
	mov \scratch, T_NEST(\t)
.endm

/* in_handler 0 and the read lock left, in one store (the epoch stays:
 * nest 0 says outside) */
.macro HIT_UNLOCK t
	movl $0, T_NEST(\t)
.endm

/* SF ZF AF PF CF and OF back from the flags word saved at off(%rsp),
 * without popfq (microcoded, ~7 ns here): OF by an add that overflows
 * exactly when it was set, then sahf (which leaves OF alone).  Clobbers
 * ah and rcx. */
.macro STATUS_FLAGS_BACK off
	movzbl \off+1(%rsp), %ecx	/* bits 8-15: OF is bit 3 */
	and $8, %cl
	add $0x78, %cl			/* 0x78 + 8 overflows, 0x78 + 0 not */
	mov \off(%rsp), %ah
	sahf
.endm


/* DF (by std) and the status flags back from the flags word at off(%rsp):
 * the flags a handler may change.  Clobbers ah and rcx. */
.macro FLAGS_BACK off
	testw $0x400, \off(%rsp)
	jz 77f
	std
77:	STATUS_FLAGS_BACK \off
.endm

/* every general register back from pt_regs at %rsp (r11 unless r11=0) */
.macro LOAD_GPRS r11=1
	mov PT_R15(%rsp), %r15
	mov PT_R14(%rsp), %r14
	mov PT_R13(%rsp), %r13
	mov PT_R12(%rsp), %r12
	mov PT_BP(%rsp), %rbp
	mov PT_BX(%rsp), %rbx
	.if \r11
	mov PT_R11(%rsp), %r11
	.endif
	mov PT_R10(%rsp), %r10
	mov PT_R9(%rsp), %r9
	mov PT_R8(%rsp), %r8
	mov PT_AX(%rsp), %rax
	mov PT_CX(%rsp), %rcx
	mov PT_DX(%rsp), %rdx
	mov PT_SI(%rsp), %rsi
	mov PT_DI(%rsp), %rdi
.endm

#endif
