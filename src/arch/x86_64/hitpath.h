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

/* t's read lock (nest 1) and in_handler = 1 at once, in one store, so
 * from here a nested hit (a signal's) only counts nmissed and leaves the
 * thread's hit record alone; to out instead if t is inside already or
 * the fast paths are off (readers not fenced by membarrier, or a fork
 * child sharing slot memory: ukp_fast_hits): then the C path decides.
 * seq stays even: sync.c takes nest set for inside, and a seq that moved
 * on for a thread that left since (HIT_UNLOCK).  The C lock's seq++ (odd)
 * is one read-modify-write more, ~0.3 ns of a return probe's 25. */
.macro HIT_LOCK t, scratch, out
	cmpq $0, T_NEST(\t)		/* nest and in_handler, both 0 */
	jne \out
	cmpl $0, ukp_fast_hits(%rip)
	je \out
	movabs $0x100000001, \scratch
	mov \scratch, T_NEST(\t)
.endm

/* in_handler 0 and the read lock left: nest 0, then seq on to the next
 * even value (ukp_read_unlock() does the same from either kind of lock) */
.macro HIT_UNLOCK t
	movq $0, T_NEST(\t)
	addq $2, T_SEQ(\t)
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
