/* SPDX-License-Identifier: MIT */
/*
 * The hand-made floors' building blocks (ukp-bench.c, lib/floorz.c): asm
 * text for top-level asm() blocks.
 */
#ifndef UKPB_FLOOR_H
#define UKPB_FLOOR_H

/*
 * A global function in .text; body is asm text.  Globals (and -rdynamic)
 * let the engine and kprobes_list() name them.
 */
#define UKPB_TARGET(name, align, body)				\
	"	.pushsection .text, \"ax\", @progbits\n"		\
	"	.globl " #name "\n"					\
	"	.type " #name ", @function\n"				\
	"	.p2align " #align "\n"					\
	#name ":\n"							\
	body								\
	"	.size " #name ", . - " #name "\n"			\
	"	.p2align " #align ", 0xcc\n"				\
	"	.popsection\n"

#define LEA_RET		"	lea 1(%rdi), %rax\n	ret\n"

#define PUSH_GPRS							\
	"	push %rax\n	push %rcx\n	push %rdx\n	push %rbx\n"	\
	"	push %rbp\n	push %rsi\n	push %rdi\n	push %r8\n"	\
	"	push %r9\n	push %r10\n	push %r11\n	push %r12\n"	\
	"	push %r13\n	push %r14\n	push %r15\n"
#define POP_GPRS							\
	"	pop %r15\n	pop %r14\n	pop %r13\n	pop %r12\n"	\
	"	pop %r11\n	pop %r10\n	pop %r9\n	pop %r8\n"	\
	"	pop %rdi\n	pop %rsi\n	pop %rbp\n	pop %rbx\n"	\
	"	pop %rdx\n	pop %rcx\n	pop %rax\n"

/*
 * Flags back without popfq (microcoded: ~7 ns here, as dear as the rest
 * of the stub): DF by std, OF by an add that overflows exactly when it
 * was set, SF ZF AF PF CF by sahf; the same as ukprobes' detours.  %rsp
 * points at the saved flags; rax and rcx are restored after.
 */
#define FLAGS_RESTORE							\
	"	push %rax\n	push %rcx\n"				\
	"	testw $0x400, 16(%rsp)\n	jz 1f\n	std\n1:\n"	\
	"	movzbl 17(%rsp), %ecx\n	shr $3, %ecx\n	and $1, %ecx\n" \
	"	mov $0x7f, %al\n	add %cl, %al\n"			\
	"	mov 16(%rsp), %ah\n	sahf\n"				\
	"	pop %rcx\n	pop %rax\n"

/* DF clear for C, as ukprobes' detours do it: cld only when the saved
 * flags (at 120(%rbx), above the 15 registers) have DF set - cld costs
 * ~1 ns here, the test less. */
#define CLD_IF_DF							\
	"	testl $0x400, 120(%rbx)\n	jz 2f\n	cld\n2:\n"

#endif
