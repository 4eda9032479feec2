/* SPDX-License-Identifier: MIT */
/*
 * Hand-written entry code.  Everything here lives in section ukp_text,
 * which the blacklist covers with the rest of ukprobes.
 */
	.section ukp_text, "ax", @progbits

/*
 * ukp_post_trampoline: reached from a slot's CONT(x), post variant, after
 * the probed instruction ran out of line:
 *
 *	thread sp ->	| probed code's stack                    |
 *			| red zone, 128 bytes (not touched)      |
 *	entry %rsp ->	| &{site, x}  (call's return address)    |  = T: later the
 *			| struct pt_regs, 168 bytes              |    exit target
 *			| XSAVE area, 64-aligned                 |
 *
 * Saves every register into pt_regs (ip = x, sp = the thread's), the
 * whole vector/x87 state with XSAVE (FXSAVE without it), calls
 * ukp_post_dispatch(cont, regs), restores, and leaves with
 * "ret $128": it pops regs->ip from T and lands %rsp on regs->sp in one
 * instruction, so nothing below the thread's sp (its red zone) is written
 * and a signal arriving at any point finds a consistent stack.
 * If a handler moved regs->sp, the exit runs an int3 instead and the
 * SIGTRAP handler loads all registers from pt_regs (rare, so slow is ok).
 */
#define PT_R15 0
#define PT_R14 8
#define PT_R13 16
#define PT_R12 24
#define PT_BP 32
#define PT_BX 40
#define PT_R11 48
#define PT_R10 56
#define PT_R9 64
#define PT_R8 72
#define PT_AX 80
#define PT_CX 88
#define PT_DX 96
#define PT_SI 104
#define PT_DI 112
#define PT_ORIG_AX 120
#define PT_IP 128
#define PT_CS 136
#define PT_FLAGS 144
#define PT_SP 152
#define PT_SS 160
#define PT_SIZE 168
#define FRAME_SP (PT_SIZE + 8 + 128)	/* from pt_regs to the thread's sp */

	.globl ukp_post_trampoline
	.hidden ukp_post_trampoline
	.type ukp_post_trampoline, @function
ukp_post_trampoline:
	lea -PT_SIZE(%rsp), %rsp	/* lea: flags untouched */
	mov %rax, PT_AX(%rsp)
	pushfq
	pop %rax
	mov %rax, PT_FLAGS(%rsp)
	mov %r15, PT_R15(%rsp)
	mov %r14, PT_R14(%rsp)
	mov %r13, PT_R13(%rsp)
	mov %r12, PT_R12(%rsp)
	mov %rbp, PT_BP(%rsp)
	mov %rbx, PT_BX(%rsp)
	mov %r11, PT_R11(%rsp)
	mov %r10, PT_R10(%rsp)
	mov %r9, PT_R9(%rsp)
	mov %r8, PT_R8(%rsp)
	mov %rcx, PT_CX(%rsp)
	mov %rdx, PT_DX(%rsp)
	mov %rsi, PT_SI(%rsp)
	mov %rdi, PT_DI(%rsp)
	movq $-1, PT_ORIG_AX(%rsp)
	mov PT_SIZE(%rsp), %r12		/* r12 = cont = &{site, x} */
	mov 8(%r12), %rax
	mov %rax, PT_IP(%rsp)
	xor %eax, %eax
	mov %cs, %ax
	mov %rax, PT_CS(%rsp)
	mov %ss, %ax
	mov %rax, PT_SS(%rsp)
	lea FRAME_SP(%rsp), %rax
	mov %rax, PT_SP(%rsp)
	cld				/* the ABI wants DF clear in C */
	mov %rsp, %rbx			/* rbx = pt_regs */

	mov ukp_xsave_size(%rip), %rcx
	test %rcx, %rcx
	jz 1f
	sub %rcx, %rsp
	and $-64, %rsp
	xor %eax, %eax			/* XRSTOR wants a clean header */
	mov %rax, 512(%rsp)
	mov %rax, 520(%rsp)
	mov %rax, 528(%rsp)
	mov %rax, 536(%rsp)
	mov %rax, 544(%rsp)
	mov %rax, 552(%rsp)
	mov %rax, 560(%rsp)
	mov %rax, 568(%rsp)
	mov $-1, %eax
	mov $-1, %edx
	xsave64 (%rsp)
	jmp 2f
1:	sub $512, %rsp
	and $-64, %rsp
	fxsave64 (%rsp)
2:
	mov %r12, %rdi
	mov %rbx, %rsi
	call ukp_post_dispatch

	cmpq $0, ukp_xsave_size(%rip)
	je 3f
	mov $-1, %eax
	mov $-1, %edx
	xrstor64 (%rsp)
	jmp 4f
3:	fxrstor64 (%rsp)
4:	mov %rbx, %rsp
	lea FRAME_SP(%rsp), %rax
	cmp PT_SP(%rsp), %rax
	jne .Lslow
	mov PT_IP(%rsp), %rax
	mov %rax, PT_SIZE(%rsp)		/* T = exit target */
	pushq PT_FLAGS(%rsp)
	popfq
	mov PT_R15(%rsp), %r15
	mov PT_R14(%rsp), %r14
	mov PT_R13(%rsp), %r13
	mov PT_R12(%rsp), %r12
	mov PT_BP(%rsp), %rbp
	mov PT_BX(%rsp), %rbx
	mov PT_R11(%rsp), %r11
	mov PT_R10(%rsp), %r10
	mov PT_R9(%rsp), %r9
	mov PT_R8(%rsp), %r8
	mov PT_AX(%rsp), %rax
	mov PT_CX(%rsp), %rcx
	mov PT_DX(%rsp), %rdx
	mov PT_SI(%rsp), %rsi
	mov PT_DI(%rsp), %rdi
	lea PT_SIZE(%rsp), %rsp
	ret $128
.Lslow:
	.globl ukp_post_slow_trap
	.hidden ukp_post_slow_trap
ukp_post_slow_trap:
	int3				/* trap.c: %rsp points at pt_regs */
	ud2
	.size ukp_post_trampoline, .-ukp_post_trampoline

/* int ukp_setjmp(struct ukp_jmpbuf *): no signal mask, no syscall */
	.globl ukp_setjmp
	.hidden ukp_setjmp
	.type ukp_setjmp, @function
ukp_setjmp:
	mov %rbx, 0(%rdi)
	mov %rbp, 8(%rdi)
	mov %r12, 16(%rdi)
	mov %r13, 24(%rdi)
	mov %r14, 32(%rdi)
	mov %r15, 40(%rdi)
	lea 8(%rsp), %rax
	mov %rax, 48(%rdi)
	mov (%rsp), %rax
	mov %rax, 56(%rdi)
	xor %eax, %eax
	ret
	.size ukp_setjmp, .-ukp_setjmp

/* void ukp_longjmp(struct ukp_jmpbuf *, int) */
	.globl ukp_longjmp
	.hidden ukp_longjmp
	.type ukp_longjmp, @function
ukp_longjmp:
	mov 0(%rdi), %rbx
	mov 8(%rdi), %rbp
	mov 16(%rdi), %r12
	mov 24(%rdi), %r13
	mov 32(%rdi), %r14
	mov 40(%rdi), %r15
	mov 48(%rdi), %rsp
	mov %esi, %eax
	test %eax, %eax
	jnz 1f
	inc %eax
1:	jmp *56(%rdi)
	.size ukp_longjmp, .-ukp_longjmp

/*
 * long ukp_copy_nofault(void *dst, const void *src, size_t n)
 * A fault at ukp_nofault_begin makes the SIGSEGV/SIGBUS handler resume at
 * ukp_nofault_fixup, which returns -EFAULT (an exception table of one).
 */
	.globl ukp_copy_nofault, ukp_nofault_begin, ukp_nofault_end, ukp_nofault_fixup
	.hidden ukp_copy_nofault, ukp_nofault_begin, ukp_nofault_end, ukp_nofault_fixup
	.type ukp_copy_nofault, @function
ukp_copy_nofault:
	mov %rdx, %rcx
ukp_nofault_begin:
	rep movsb
ukp_nofault_end:
	xor %eax, %eax
	ret
ukp_nofault_fixup:
	mov $-14, %rax
	ret
	.size ukp_copy_nofault, .-ukp_copy_nofault

	.section .note.GNU-stack, "", @progbits
