/* SPDX-License-Identifier: MIT */
/*
 * Hand-written entry code.  Everything here lives in section ukp_text,
 * which the blacklist covers with the rest of ukprobes.
 */
#include "hitpath.h"
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
#define FRAME_SP (PT_SIZE + 8 + 128)	/* from pt_regs to the thread's sp */

/* Both trampolines enter with the return address at (%rsp): room for
 * pt_regs below it, every general register and the flags into it (lea and
 * mov leave the flags alone).  pushfq writes the flags straight into
 * their field: one store, where a pop and a move would be two more
 * memory operations (the hit path is store-bound).  skip: bytes stepped
 * over first (a detour's own fast path: the red zone and the word a call
 * would have pushed, in the same lea). */
.macro SAVE_GPRS skip=0
	lea -(\skip+PT_SIZE-PT_FLAGS-8)(%rsp), %rsp	/* lea: flags untouched */
	pushfq					/* to PT_FLAGS */
	lea -PT_FLAGS(%rsp), %rsp
	mov %rax, PT_AX(%rsp)
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
.endm

/* ...and leave through "ret $128": pops the exit target written over the
 * return address and lands %rsp on the thread's sp (see above). */
.macro LOAD_GPRS_AND_LEAVE
	LOAD_GPRS
	lea PT_SIZE(%rsp), %rsp
	ret $128
.endm

/* The whole extended state below %rsp, 64-aligned: XSAVE (XSAVEC where
 * the CPU has it) with a clean header (XRSTOR wants one), FXSAVE on
 * machines without it.  Uses rax, rcx, rdx and labels 1-2 and 5;
 * XRSTOR_ALL uses rax, rdx and labels 3-4. */
.macro XSAVE_ALL
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
	cmpb $0, ukp_xsavec(%rip)
	jne 5f
	xsave64 (%rsp)
	jmp 2f
5:	xsavec64 (%rsp)		/* components in their initial state */
	jmp 2f			/* left out: XRSTOR initialises them */
1:	sub $512, %rsp
	and $-64, %rsp
	fxsave64 (%rsp)
2:
.endm

.macro XRSTOR_ALL
	cmpq $0, ukp_xsave_size(%rip)
	je 3f
	mov $-1, %eax
	mov $-1, %edx
	xrstor64 (%rsp)
	jmp 4f
3:	fxrstor64 (%rsp)
4:
.endm

	.globl ukp_post_trampoline
	.hidden ukp_post_trampoline
	.type ukp_post_trampoline, @function
ukp_post_trampoline:
	SAVE_GPRS
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

	/* post_handlers proven to keep to the general registers run with
	 * no vector state saved (answer 1); else everything is saved */
	and $-16, %rsp
	mov %r12, %rdi
	mov %rbx, %rsi
	call ukp_post_dispatch_lean
	test %eax, %eax
	jnz 8f				/* (XSAVE_ALL has a 5:) */
	XSAVE_ALL
	mov %r12, %rdi
	mov %rbx, %rsi
	call ukp_post_dispatch

	XRSTOR_ALL
8:	mov %rbx, %rsp
	lea FRAME_SP(%rsp), %rax
	cmp PT_SP(%rsp), %rax
	jne .Lslow
	mov PT_IP(%rsp), %rax
	mov %rax, PT_SIZE(%rsp)		/* T = exit target */
	pushq PT_FLAGS(%rsp)
	popfq
	LOAD_GPRS_AND_LEAVE
.Lslow:
	.globl ukp_post_slow_trap
	.hidden ukp_post_slow_trap
ukp_post_slow_trap:
	int3				/* trap.c: %rsp points at pt_regs */
	ud2
	.globl ukp_post_trampoline_end
	.hidden ukp_post_trampoline_end
ukp_post_trampoline_end:
	.size ukp_post_trampoline, .-ukp_post_trampoline

/*
 * Jump-optimised probes.  The probed code jumps to its detour:
 *
 *	D:	.quad sel ; .quad list ; .quad site ; .quad trampoline
 *	D+32:	lea -128(%rsp),%rsp		(step over the red zone)
 *	D+37:	call *D+24(%rip)
 *	D+43:	<relocated region> ; jmp back	(R: the pushed return address)
 *	entry:	jmp <where sel says> ; <the detour's own fast paths>
 *
 * sel (and the entry's jmp, kept in step) says the lean or bare fast
 * path's copy (ukp_lean_tpl, below) or D+32.  list is the site's probe list (arch.h: a copy kept in step
 * with site->probes, one load nearer than through the site).
 *
 * (A return probe's variant has no sel and a few instructions more
 * around the rest: relocate.c.)
 *
 * The trampoline saves pt_regs as the post trampoline does (ip = the
 * probed address), the vector state its class needs, calls
 * ukp_opt_dispatch(site, regs), restores, and returns to R with
 * "ret $128", which also lands %rsp back on the probed code's sp: a
 * balanced call/ret, so the return predictor stays right.  A pre_handler
 * that redirected (dispatch returns non-zero) leaves through regs->ip
 * instead: the same ret with the target written over R, or, if it moved
 * sp too, the int3 slow exit.
 *
 * Classes (analyze.c decides from liveness at the probe point):
 *   none   MXCSR and the x87 control word only (restored if changed)
 *   args   + vector registers 0-7, full width (xmm, ymm or zmm)
 *   all16  + vector registers 0-15
 *   all32  + zmm0-31 and the opmasks k0-7 (AVX-512 only)
 *   xsave  the whole extended state (XSAVE), x87 stack reset for the
 *          handlers
 */
#define VS_NONE 0
#define VS_ARGS 1
#define VS_ALL16 2
#define VS_ALL32 3
#define VS_XSAVE 4

/* The save area below %rsp: a header (0 MXCSR, 4 x87 control word, 6 x87
 * status word, 12 scratch, 16 a flag byte), then vector register n at
 * 32 + 16n (xmm), 32 + 32n (ymm) or 64 + 64n (zmm: 64-aligned, so no
 * store splits a cache line), and for 32 registers the opmasks k0-7 after
 * them (MASKS_OFF). */
#define VOFF16(n) (32 + 16 * (n))
#define VOFF32(n) (32 + 32 * (n))
#define VOFF64(n) (64 + 64 * (n))
#define MASKS_OFF (64 + 64 * 32)
.macro VS_AREA nvec, w
	.if \w == 64
	sub $(64 + 64 * \nvec + (\nvec / 32) * 64), %rsp
	and $-64, %rsp
	.else
	sub $(32 + 32 * \nvec), %rsp
	and $-32, %rsp
	.endif
.endm
.macro SAVE_VEC n, w
	.if \w == 64
	vmovdqu64 %zmm\n, VOFF64(\n)(%rsp)
	.elseif \w == 32
	vmovdqu %ymm\n, VOFF32(\n)(%rsp)
	.else
	movdqu %xmm\n, VOFF16(\n)(%rsp)
	.endif
.endm
.macro LOAD_VEC n, w
	.if \w == 64
	vmovdqu64 VOFF64(\n)(%rsp), %zmm\n
	.elseif \w == 32
	vmovdqu VOFF32(\n)(%rsp), %ymm\n
	.else
	movdqu VOFF16(\n)(%rsp), %xmm\n
	.endif
.endm
/* A register saved w (32 or 64) bytes wide whose bits 128+ were zero:
 * a VEX.128 load zeroes them again and keeps the upper state clean.
 * zmm16-31 have no VEX encoding and no part in that state: whole. */
.macro LOAD_VEC_CLEAN n, w
	.if \w == 32
	vmovdqu VOFF32(\n)(%rsp), %xmm\n
	.elseif \n < 16
	vmovdqu VOFF64(\n)(%rsp), %xmm\n
	.else
	vmovdqu64 VOFF64(\n)(%rsp), %zmm\n
	.endif
.endm
/* r0 |= r1 | ... | r(cnt-1), a tree (clobbers them) */
.macro OR_TREE cnt, op, r
	.if \cnt >= 16
	\op %\r\()9, %\r\()8, %\r\()8
	\op %\r\()11, %\r\()10, %\r\()10
	\op %\r\()13, %\r\()12, %\r\()12
	\op %\r\()15, %\r\()14, %\r\()14
	\op %\r\()10, %\r\()8, %\r\()8
	\op %\r\()14, %\r\()12, %\r\()12
	\op %\r\()12, %\r\()8, %\r\()8
	.endif
	\op %\r\()1, %\r\()0, %\r\()0
	\op %\r\()3, %\r\()2, %\r\()2
	\op %\r\()5, %\r\()4, %\r\()4
	\op %\r\()7, %\r\()6, %\r\()6
	\op %\r\()2, %\r\()0, %\r\()0
	\op %\r\()6, %\r\()4, %\r\()4
	\op %\r\()4, %\r\()0, %\r\()0
	.if \cnt >= 16
	\op %\r\()8, %\r\()0, %\r\()0
	.endif
.endm
/* ZF = bits 128+ of vector registers 0..min(cnt, 16)-1 are all zero, ymm
 * at w 32, zmm at w 64 (after saving them: clobbers them) */
.macro UPPERS_ZERO cnt, w
	.if \w == 64
	OR_TREE \cnt, vporq, zmm
	vextracti64x4 $1, %zmm0, %ymm1	/* bits 256-511 */
	vextracti128 $1, %ymm0, %xmm0	/* bits 128-255 */
	vpor %xmm1, %xmm0, %xmm0
	vextracti128 $1, %ymm1, %xmm1	/* bits 384-511 */
	vpor %xmm1, %xmm0, %xmm0
	.else
	OR_TREE \cnt, vorps, ymm
	vextractf128 $1, %ymm0, %xmm0
	.endif
	vptest %xmm0, %xmm0
.endm
.macro VEC_ALL op, cnt, w
	.irp n, 0, 1, 2, 3, 4, 5, 6, 7
	\op \n, \w
	.endr
	.if \cnt >= 16
	.irp n, 8, 9, 10, 11, 12, 13, 14, 15
	\op \n, \w
	.endr
	.endif
	.if \cnt == 32
	.irp n, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31
	\op \n, \w
	.endr
	.endif
.endm
/* k0-7 at MASKS_OFF, op save or load: 64 bits each with AVX512BW, 16
 * without (kmovq is AVX512BW's).  Uses labels 51-52. */
.macro KMASKS op
	cmpb $0, ukp_kmask_bw(%rip)
	je 51f
	.irp k, 0, 1, 2, 3, 4, 5, 6, 7
	.ifc \op, save
	kmovq %k\k, MASKS_OFF + 8 * \k(%rsp)
	.else
	kmovq MASKS_OFF + 8 * \k(%rsp), %k\k
	.endif
	.endr
	jmp 52f
51:
	.irp k, 0, 1, 2, 3, 4, 5, 6, 7
	.ifc \op, save
	kmovw %k\k, MASKS_OFF + 8 * \k(%rsp)
	.else
	kmovw MASKS_OFF + 8 * \k(%rsp), %k\k
	.endif
	.endr
52:
.endm

/*
 * Vector registers 0..nvec-1 (8, 16; 32 at w 64) saved w (32: ymm, 64:
 * zmm) bytes wide in a VS_AREA around \call, and for 32 the opmasks.
 * If every upper part was zero, they come back through VEX.128 loads
 * after a vzeroupper: the clean upper state the probed code may be in.
 * Loading ymm/zmm would leave it dirty, and on an AMD EPYC legacy-SSE
 * code after that pays ~120 ns per hit.  Uses labels 41-42 (and
 * KMASKS').
 */
.macro CALL_VEC nvec, w, call:vararg
	VEC_ALL SAVE_VEC, \nvec, \w
	.if \nvec == 32
	KMASKS save
	UPPERS_ZERO 16, \w
	.else
	UPPERS_ZERO \nvec, \w
	.endif
	setz 16(%rsp)			/* every upper part was zero */
	vzeroupper			/* C code may use legacy SSE */
	\call
	.if \nvec == 32
	KMASKS load
	.endif
	cmpb $0, 16(%rsp)
	je 41f
	vzeroupper			/* back to the clean upper state */
	VEC_ALL LOAD_VEC_CLEAN, \nvec, \w
	jmp 42f
41:	VEC_ALL LOAD_VEC, \nvec, \w
42:
.endm

/* pt_regs of the probe point; rdi = the site, rbx = pt_regs */
.macro OPT_ENTRY
	SAVE_GPRS
	mov PT_SIZE(%rsp), %r13		/* R, kept (r13 is saved) */
	mov -27(%r13), %rdi		/* the site; its first field: addr */
	mov (%rdi), %rax
	mov %rax, PT_IP(%rsp)
	movq $0x33, PT_CS(%rsp)
	movq $0x2b, PT_SS(%rsp)
	lea FRAME_SP(%rsp), %rax
	mov %rax, PT_SP(%rsp)
	testl $0x400, PT_FLAGS(%rsp)	/* the ABI wants DF clear in C; */
	jz 1f				/* cld costs ~1 ns, the test less */
	cld
1:	mov %rsp, %rbx			/* rbx = pt_regs */
.endm

/* the argument (caller-saved) registers, rax..r10 */
.macro PUSH_ARGS
	push %rax
	push %rcx
	push %rdx
	push %rsi
	push %rdi
	push %r8
	push %r9
	push %r10
.endm
.macro POP_ARGS
	pop %r10
	pop %r9
	pop %r8
	pop %rdi
	pop %rsi
	pop %rdx
	pop %rcx
	pop %rax
.endm

/* %rsp = pt_regs, ans (eax unless given) = the dispatch's answer: back
 * to R, or where a handler sent the probed code */
.macro OPT_EXIT ans=%eax
	lea FRAME_SP(%rsp), %rcx
	cmp PT_SP(%rsp), %rcx
	jne 30f				/* a handler moved sp */
	test \ans, \ans
	jnz 20f
	/* flags without popfq (FLAGS_BACK): the ones a handler may change;
	 * the others, TF, AC..., the trampoline never touches */
10:	FLAGS_BACK PT_FLAGS
	LOAD_GPRS_AND_LEAVE
20:	mov PT_IP(%rsp), %rax		/* redirected by a pre_handler */
	mov %rax, PT_SIZE(%rsp)
	jmp 10b
30:	test \ans, \ans			/* sp moved: the int3 exit loads */
	jnz ukp_post_slow_trap		/* everything from pt_regs; without */
	mov PT_SIZE(%rsp), %rax		/* a redirect, on to the region's */
	mov %rax, PT_IP(%rsp)		/* copy */
	jmp ukp_post_slow_trap
.endm

/* XSAVE the whole extended state around ukp_opt_dispatch(rdi, rbx);
 * eax = its answer */
.macro OPT_CALL_XSAVE
	XSAVE_ALL
	fninit				/* handlers get an empty x87 stack */
	mov %rbx, %rsi
	call ukp_opt_dispatch
	mov %eax, %r12d
	XRSTOR_ALL
	mov %r12d, %eax
.endm

/* MXCSR and the x87 control and status words into the VS_AREA header */
.macro VS_HEAD
	stmxcsr 0(%rsp)
	fnstcw 4(%rsp)
	fnstsw %ax
	mov %ax, 6(%rsp)
.endm

.macro OPT_TRAMP name, vs, nvec
	.p2align 6
	.globl \name
	.hidden \name
	.type \name, @function
\name:
	OPT_ENTRY
	.if \vs == VS_XSAVE
	OPT_CALL_XSAVE
	.else
	mov %rbx, %rsi			/* ukp_opt_dispatch(rdi, rsi) */
	.if \vs == VS_NONE
	VS_AREA 0, 32
	VS_HEAD
	call ukp_opt_dispatch
	.elseif \vs == VS_ALL32
	VS_AREA 32, 64			/* analyze.c: AVX-512 only */
	VS_HEAD
	CALL_VEC 32, 64, call ukp_opt_dispatch
	.else
	cmpl $1, ukp_vec_level(%rip)
	jb 5f
	ja 4f
	VS_AREA \nvec, 32
	VS_HEAD
	CALL_VEC \nvec, 32, call ukp_opt_dispatch
	jmp 6f
4:	VS_AREA \nvec, 64
	VS_HEAD
	CALL_VEC \nvec, 64, call ukp_opt_dispatch
	jmp 6f
5:	VS_AREA \nvec, 16
	VS_HEAD
	VEC_ALL SAVE_VEC, \nvec, 16
	call ukp_opt_dispatch
	VEC_ALL LOAD_VEC, \nvec, 16
6:
	.endif
	/* the probed code's MXCSR (modes and exception flags: reading it
	 * again to compare costs more than loading it), and its x87 control
	 * and status words if a handler changed them */
	ldmxcsr 0(%rsp)
	fnstcw 12(%rsp)
	movzwl 12(%rsp), %ecx
	cmpw 4(%rsp), %cx
	je 7f
	fldcw 4(%rsp)
7:	mov %eax, %r12d
	fnstsw %ax
	cmpw 6(%rsp), %ax
	je 8f
	call ukp_x87_status_restore	/* rare: 6(%rsp) is the old word */
8:	mov %r12d, %eax
	.endif
	mov %rbx, %rsp
	OPT_EXIT
	.size \name, .-\name
.endm

/* The x87 status word a handler changed (exception flags from its own
 * x87 arithmetic): put back the one saved at 8(%rsp) of the caller's
 * frame (6(%rsp) before the call) through the x87 environment. */
	.globl ukp_x87_status_restore
	.hidden ukp_x87_status_restore
	.type ukp_x87_status_restore, @function
ukp_x87_status_restore:
	lea -40(%rsp), %rsp
	fnstenv (%rsp)			/* 28 bytes; masks every exception */
	movzwl 40+8+6(%rsp), %ecx
	mov %cx, 4(%rsp)		/* the status word field */
	fldenv (%rsp)			/* control word too, as saved above */
	lea 40(%rsp), %rsp
	ret
	.size ukp_x87_status_restore, .-ukp_x87_status_restore

	.globl ukp_opt_tramp_begin
	.hidden ukp_opt_tramp_begin
ukp_opt_tramp_begin:
	OPT_TRAMP ukp_opt_tramp_none, VS_NONE, 0
	OPT_TRAMP ukp_opt_tramp_args, VS_ARGS, 8
	OPT_TRAMP ukp_opt_tramp_all16, VS_ALL16, 16
	OPT_TRAMP ukp_opt_tramp_all32, VS_ALL32, 32
	OPT_TRAMP ukp_opt_tramp_xsave, VS_XSAVE, 0

/*
 * The lean trampolines: for probes whose handlers all keep to the general
 * registers (analyze.c proves it, the probe list records it), so no
 * vector, x87 or MXCSR state is saved at all.  If the list changed under
 * it (a probe that needs more was added), the dispatch answers 2 and this
 * saves everything and dispatches again.
 *
 * The fast path, ukp_opt_dispatch_lean for the common case written out:
 * a thread block, one live probe with a pre_handler on a lean list; not
 * nested, not ukprobes' own thread, readers fenced by membarrier, knob
 * on (HIT_LOCK tests these).  Every general register is in pt_regs already, so
 * the callee-saved ones are free: r12 = t, r13 = R (OPT_ENTRY), then the list.  Anything else
 * (or anything found changed after taking the read lock) goes to the C
 * dispatch.  ukp_opt_tramp_lean_leaf takes only lists whose pre_handler
 * is a leaf (lean1 2), which cannot change errno: it neither saves nor
 * restores it, and a fault in it finds errno as the hit did (trap.c).
 *
 * The record a fault in the handler resumes with (trap.c) is the C
 * dispatch's: the list, and pt_regs, which is all ukp_opt_resume needs
 * to find the frame (LEAN_ENTRY's).  cur_jb is NULL already: every C
 * path clears it after its handler, handler_fault_unhandled before the
 * program's handler, which may longjmp away, and the attach of a reused
 * thread block (sync.c), whose thread may have died in a handler.
 * lean_i and abandon are not needed: a resume after handler 0 of a
 * one-probe list finds nothing more to run whatever they say.
 */
/* The one pre_handler of a lean list (r13; r12 = t, rbx = pt_regs)
 * called, or to out if it is gone, the read lock left after it; its
 * answer (non-zero: it redirected) in ans.  Not a leaf: errno saved
 * around it (eax is scratch then, so ans is r13d).  ukp_opt_resume
 * comes back right after the call with eax 0. */
.macro LEAN_CALL leaf, out, ans=%r13d
	mov L_P(%r13), %rdi		/* p */
	mov KP_PRE_HANDLER(%rdi), %rax
	test %rax, %rax
	jz \out
	testl $KP_FLAGS_DEAD, KP_FLAGS(%rdi)
	jnz \out
	.if !\leaf
	mov T_ERRNO_P(%r12), %rcx
	mov (%rcx), %ecx
	mov %ecx, T_LEAN_ERRNO(%r12)
	.endif
	mov %r13, T_LEAN_LIST(%r12)
	mov %rdi, T_CUR(%r12)
	mov %rbx, %rsi
	call *%rax			/* p->pre_handler(p, regs) */
	.ifnc \ans, %eax
	mov %eax, \ans
	.endif
	.if !\leaf
	mov T_LEAN_ERRNO(%r12), %eax	/* read while in_handler holds */
	.endif
	movq $0, T_CUR(%r12)
	.if !\leaf
	mov T_ERRNO_P(%r12), %rdx
	cmp %eax, (%rdx)		/* a load is cheaper than a store */
	je 48f
	mov %eax, (%rdx)
48:
	.endif
	HIT_UNLOCK %r12
.endm

.macro LEAN_FAST leaf
	THREAD_SELF %r12
	test %r12, %r12
	jz .Llean_c
	HIT_LOCK %r12, %rax, .Llean_c
	mov %rbx, T_CUR_REGS(%r12)	/* next: the hit's frame (in_handler 3) */
	mov -35(%r13), %r13		/* the list (the detour's copy; r13 = R) */
	test %r13, %r13
	jz .Llean_c_unlock
	.if \leaf
	cmpb $2, L_LEAN1(%r13)		/* one probe, lean, a leaf */
	jne .Llean_c_unlock
	.else
	cmpb $0, L_LEAN1(%r13)		/* one probe, handlers proven lean */
	je .Llean_c_unlock
	.endif
	LEAN_CALL \leaf, .Llean_c_unlock
	mov %rbx, %rsp
	OPT_EXIT %r13d			/* straight out: no answer 2 here */
.endm

/* pt_regs (rbx), then the frame a fault resumes on: rsp = rbx rounded
 * down to 16 (ukp_opt_resume) */
.macro LEAN_ENTRY
	OPT_ENTRY
	and $-16, %rsp
.endm

	.p2align 6
	.globl ukp_opt_tramp_lean_leaf
	.hidden ukp_opt_tramp_lean_leaf
	.type ukp_opt_tramp_lean_leaf, @function
ukp_opt_tramp_lean_leaf:
	LEAN_ENTRY
	LEAN_FAST 1
	.size ukp_opt_tramp_lean_leaf, .-ukp_opt_tramp_lean_leaf

	.p2align 6
	.globl ukp_opt_tramp_lean
	.hidden ukp_opt_tramp_lean
	.type ukp_opt_tramp_lean, @function
ukp_opt_tramp_lean:
	LEAN_ENTRY
	LEAN_FAST 0
	/* both trampolines' way to the C dispatch, which decides */
.Llean_c_unlock:
	HIT_UNLOCK %r12
	mov PT_SIZE(%rbx), %rax		/* R */
	mov -27(%rax), %rdi		/* the site */
.Llean_c:
	mov %rbx, %rsi
	call ukp_opt_dispatch_lean
ukp_opt_lean_ret:
	cmp $2, %eax
	je 1f
	mov %rbx, %rsp
	OPT_EXIT
1:	mov PT_SIZE(%rbx), %rax		/* R */
	mov -27(%rax), %rdi		/* the site */
	OPT_CALL_XSAVE
	mov %rbx, %rsp
	OPT_EXIT
	.size ukp_opt_tramp_lean, .-ukp_opt_tramp_lean

/*
 * The entry of a plain kretprobe (no entry_handler: kret_pre_plain) that
 * is the only probe of its site, through the detour built for return
 * probes.  Nothing of the program's runs here, so no pt_regs: this does
 * kret.c's kret_entry() in place with the few registers it needs, and
 * keeps the flags.  On the stack, from the function's entry sp (sp0)
 * down: the return address at sp0, the detour's word below it (the
 * copy's address; r11 holds it too), 120 more bytes of red zone, R, and
 * what is saved here.  Anything but the common case (no thread block
 * yet, a nested hit, the list changed, no free instance: nmissed, two
 * kretprobes on the function, deferred instances to free) puts everything
 * back and goes through the lean trampoline instead, which runs
 * kret_pre_plain as any pre_handler.
 */
#define KT_FL 64			/* the flags, pushed first */
#define KT_R 72
#define KT_SP0 208			/* 72 + 8 + 120 + 8 */
	.p2align 6
	.globl ukp_opt_tramp_kret
	.hidden ukp_opt_tramp_kret
	.type ukp_opt_tramp_kret, @function
ukp_opt_tramp_kret:
	pushfq
	PUSH_ARGS
	THREAD_SELF %rsi		/* t */
	test %rsi, %rsi
	jz 90f
	HIT_LOCK %rsi, %rax, 90f
	mov %rsp, T_CUR_REGS(%rsi)	/* next: the hit's frame (in_handler 3) */
	mov KT_R(%rsp), %rax
	mov -27(%rax), %rdi		/* the site */
	mov -35(%rax), %rdx		/* its list (the detour's copy) */
	test %rdx, %rdx
	jz 89f
	cmpb $0, L_KRET1(%rdx)
	je 89f
	cmpq $0, T_KRET_DEFERRED(%rsi)
	jne 89f
	mov L_KRET(%rdx), %r8		/* k, from the list: a load sooner */
	mov L_P(%rdx), %rdx		/* rp (its kprobe comes first) */
	testl $KP_FLAGS_DEAD, KP_FLAGS(%rdx)
	jnz 89f
	test %r8, %r8
	jz 89f
	cmpl $0, K_DEAD(%r8)
	jne 89f
	/* the return address another kretprobe's stub: the C path */
	mov KT_SP0(%rsp), %r9		/* the real return address */
	lea ukp_kret_stubs(%rip), %rax
	mov %r9, %r10
	sub %rax, %r10
	cmp $KRET_NSTUBS*32, %r10
	jae 1f
	and $31, %r10d
	cmp $16, %r10d
	je 89f
1:	/* the instance this thread keeps for k, if no one is taking it
	 * (sync.c: ukp_kc_take): no locked instruction */
	cmpl $0, T_KC_STEAL(%rsi)	/* first: then kc_k is current */
	jne 5f
	cmp T_KC_K(%rsi), %r8
	jne 5f
	mov T_KC_INST(%rsi), %rcx
	movq $0, T_KC_K(%rsi)
	jmp 6f
5:	/* inst_pop(): the free stack's top, tag << 32 | index + 1 */
	mov K_FREE_TOP(%r8), %rax
2:	test %eax, %eax
	jz 89f				/* none free: nmissed, in C */
	lea -1(%rax), %ecx		/* index (zero-extends) */
	imul K_ISZ(%r8), %rcx
	add K_MEM(%r8), %rcx		/* in */
	mov KI_NEXT_FREE(%rcx), %r10d
	mov %rax, %r9
	shr $32, %r9
	inc %r9
	shl $32, %r9
	or %r10, %r9
	lock cmpxchg %r9, K_FREE_TOP(%r8)
	jne 2b				/* rax: the top now */
6:	/* ours: fill it in as kret_entry does */
	mov KT_SP0(%rsp), %r9
	mov %rdx, KI_SIZE+RI_RP(%rcx)
	mov %r9, KI_SIZE+RI_RET_ADDR(%rcx)
	mov T_TID(%rsi), %eax
	mov %eax, KI_SIZE+RI_TASK(%rcx)
	lea KT_SP0(%rsp), %rax
	mov %rax, KI_SP(%rcx)
	mov %rsi, KI_T(%rcx)
	mov KI_SLOT(%rcx), %r10
	mov %r9, KS_RA(%r10)
	mov KT_FL(%rsp), %eax
	and $~FLAGS_STATUS_DF, %eax
	mov %eax, KS_SYSFL(%r10)
	/* prime(): r11 the copy (then so is the detour's word, which it
	 * pushed): the stub's priming call goes there instead */
	mov S_RESUME(%rdi), %rax
	cmp %rax, %r11
	jne 3f
	sub $5, %rax			/* UKP_ARCH_KRET_DROP_LEN */
	mov %rax, KS_CONT(%r10)
	movb $1, KS_PRIMED(%r10)
	mov KI_PRIME(%rcx), %rax
	mov %rax, KT_SP0-8(%rsp)
	jmp 4f
3:	movb $0, KS_PRIMED(%r10)
4:	mov T_KRET_TOP(%rsi), %rax
	mov %rax, KI_BELOW(%rcx)
	mov %rcx, T_KRET_TOP(%rsi)
	mov KI_STUB_ADDR(%rcx), %rax
	mov %rax, KT_SP0(%rsp)		/* the function returns to the stub */
	HIT_UNLOCK %rsi
	STATUS_FLAGS_BACK KT_FL		/* DF was not touched */
	POP_ARGS
	lea 8(%rsp), %rsp		/* lea: the flags stay */
	ret $128
89:	HIT_UNLOCK %rsi			/* not the common case: unlock, */
90:	POP_ARGS			/* put everything back, */
	popfq
	jmp ukp_opt_tramp_lean		/* and the general path decides */
	.size ukp_opt_tramp_kret, .-ukp_opt_tramp_kret

/*
 * void ukp_opt_resume(struct pt_regs *regs, struct ukp_thread *t): a
 * fault in a lean handler was taken.  Leaves the signal handler (as
 * ukp_longjmp does) for the frame of the lean trampoline whose pt_regs
 * is regs: sp at regs rounded down to 16, below which the trampoline's
 * call left its return address.  That call was one of
 * ukp_opt_dispatch_lean, which goes on as if it had been one of
 * ukp_opt_dispatch_resume(t) (the rest of the hit's handlers), or of
 * the one pre_handler of a lean fast path (LEAN_FAST, or a detour's copy
 * of it, ukp_lean_tpl), which goes on as if it had returned 0 with r12 =
 * t and rbx = regs; the hit's errno first (the fast path that records
 * one puts it back again, the leaf ones do not: trap.c recorded it).
 */
	.globl ukp_opt_resume
	.hidden ukp_opt_resume
	.type ukp_opt_resume, @function
ukp_opt_resume:
	mov %rdi, %rbx
	and $-16, %rdi
	mov -8(%rdi), %rax		/* where the call returns */
	mov %rdi, %rsp
	lea ukp_opt_lean_ret(%rip), %rcx
	cmp %rcx, %rax
	jne 1f
	push %rax
	mov %rsi, %rdi
	jmp ukp_opt_dispatch_resume
1:	mov %rsi, %r12
	mov T_LEAN_ERRNO(%r12), %ecx
	mov T_ERRNO_P(%r12), %rdx
	mov %ecx, (%rdx)
	mov %rax, %rcx
	xor %eax, %eax
	jmp *%rcx
	.size ukp_opt_resume, .-ukp_opt_resume

/*
 * void ukp_opt_resume_bare(struct pt_regs *regs, struct ukp_thread *t):
 * a fault in the handler of a bare fast path was taken, and trap.c made
 * regs whole (every field, and R above it).  Leaves the signal handler for
 * that frame, puts the hit's errno back, leaves the hit as the path would
 * and goes out through the trampolines' exit, which loads every register
 * from regs (a program handler that took the fault may have changed any).
 */
	.globl ukp_opt_resume_bare
	.hidden ukp_opt_resume_bare
	.type ukp_opt_resume_bare, @function
ukp_opt_resume_bare:
	mov %rdi, %rsp
	mov T_LEAN_ERRNO(%rsi), %ecx
	mov T_ERRNO_P(%rsi), %rdx
	mov %ecx, (%rdx)
	movq $0, T_CUR(%rsi)
	HIT_UNLOCK %rsi
	xor %eax, %eax
	OPT_EXIT
	.size ukp_opt_resume_bare, .-ukp_opt_resume_bare

/* The rare ends of a detour's own lean fast path (ukp_lean_tpl): a
 * handler redirected the probed code or moved its sp.  %rsp = pt_regs,
 * R written, eax = the pre_handler's answer. */
	.globl ukp_opt_exit_rare
	.hidden ukp_opt_exit_rare
	.type ukp_opt_exit_rare, @function
ukp_opt_exit_rare:
	OPT_EXIT
	.size ukp_opt_exit_rare, .-ukp_opt_exit_rare

/*
 * ukp_lean_tpl: the lean fast path (LEAN_FAST, both kinds) as a template
 * that relocate.c copies into every detour but a return probe's, as the
 * kernel's optprobes copy theirs.  The detour (arch.h):
 *
 *	0:  .quad sel, list, site, trampoline
 *	32: lea -128(%rsp),%rsp; call *-19(%rip)	(the trampolines' way)
 *	43: R: <relocated region>; jmp addr+len
 *	    entry: jmp rel32 (to sel's target)
 *	    (8-aligned) the copy of this template
 *
 * The entry jumps through sel: to the fast path below while the site's
 * list is one lean probe (optimize.c switches it with the list), else
 * to the call of the trampoline the probes need, which returns to R.
 * The fast path has no call into ukprobes and no ret $128 (it jumps to
 * R), the probe point's address and ukp_gp's are immediates, the thread
 * block is one %fs load and the list one RIP-relative load.  A hit it
 * cannot finish (no thread block, nested, a flag set in ukp_gp, DF set,
 * the list changed, a dead probe) puts every register back and takes
 * the trampoline's way, so every ret of a trampoline pairs with a call
 * (the return stack buffer predicts it).  The frame is the trampolines'
 * own, so a fault in the handler resumes as there (ukp_opt_resume).
 * Patched per copy: the displacements and immediates ending at the
 * ukp_lean_tpl_* labels, and the last word; everything else refers only
 * inside the template.
 */
	.p2align 4
	.globl ukp_lean_tpl
	.hidden ukp_lean_tpl
ukp_lean_tpl:
	jmp *0(%rip)			/* sel */
	.globl ukp_lean_tpl_sel
	.hidden ukp_lean_tpl_sel
ukp_lean_tpl_sel:			/* the fast path */
	SAVE_GPRS 128+8			/* the red zone, R's word (unwritten) */
	testl $0x400, PT_FLAGS(%rsp)	/* DF set: the trampoline clears it */
	jnz .Ltpl_slow
	mov %rsp, %rbx			/* rbx = pt_regs */
	lea 0(%rip), %rax		/* the probe point */
	.globl ukp_lean_tpl_addr
	.hidden ukp_lean_tpl_addr
ukp_lean_tpl_addr:
	mov %rax, PT_IP(%rsp)
	movq $0x33, PT_CS(%rsp)
	movq $0x2b, PT_SS(%rsp)
	lea FRAME_SP(%rsp), %rax
	mov %rax, PT_SP(%rsp)
	and $-16, %rsp			/* LEAN_ENTRY's frame */
	mov %fs:0x7fffffff, %r12	/* ukp_self (its offset from %fs) */
	.globl ukp_lean_tpl_tls
	.hidden ukp_lean_tpl_tls
ukp_lean_tpl_tls:
	test %r12, %r12
	jz .Ltpl_slow_rbx
	/* HIT_LOCK, ukp_gp through its absolute address */
	cmpl $0, T_NEST(%r12)
	jne .Ltpl_slow_rbx
	movabs 0x7fffffffffffffff, %rax	/* ukp_gp */
	.globl ukp_lean_tpl_gp
	.hidden ukp_lean_tpl_gp
ukp_lean_tpl_gp:
	test $(UKP_GP_NOFAST|UKP_GP_NOKNOB), %rax
	jnz .Ltpl_slow_rbx
	mov %rax, T_NEST(%r12)
	mov %rbx, T_CUR_REGS(%r12)	/* next: the hit's frame (in_handler 3) */
	mov 0(%rip), %r13		/* the list (the header's copy) */
	.globl ukp_lean_tpl_list
	.hidden ukp_lean_tpl_list
ukp_lean_tpl_list:
	test %r13, %r13
	jz .Ltpl_slow_unlock
	cmpb $2, L_LEAN1(%r13)		/* one probe, lean, a leaf */
	jne .Ltpl_errno
	LEAN_CALL 1, .Ltpl_slow_unlock, %eax
.Ltpl_exit:				/* eax: non-zero, it redirected */
	mov %rbx, %rsp
	lea FRAME_SP(%rsp), %rcx
	cmp PT_SP(%rsp), %rcx
	jne .Ltpl_rare			/* a handler moved sp */
	test %eax, %eax
	jnz .Ltpl_rare
	testl $0x400, PT_FLAGS(%rsp)	/* a handler set DF in regs->flags */
	jnz .Ltpl_rare
	.globl ukp_lean_tpl_fb
	.hidden ukp_lean_tpl_fb
ukp_lean_tpl_fb:			/* status flags dead: a jmp over (relocate.c) */
	STATUS_FLAGS_BACK PT_FLAGS	/* DF clear: on entry (else the slow
					   way), after the handler (the ABI),
					   in regs->flags (just tested) */
	.globl ukp_lean_tpl_fb_end
	.hidden ukp_lean_tpl_fb_end
ukp_lean_tpl_fb_end:
	LOAD_GPRS
	lea FRAME_SP(%rsp), %rsp
	.byte 0xe9			/* jmp R */
	.long 0
	.globl ukp_lean_tpl_jmp_r
	.hidden ukp_lean_tpl_jmp_r
ukp_lean_tpl_jmp_r:

.Ltpl_errno:				/* one probe, lean, not a leaf */
	cmpb $0, L_LEAN1(%r13)
	je .Ltpl_slow_unlock
	LEAN_CALL 0, .Ltpl_slow_unlock
	mov %r13d, %eax
	jmp .Ltpl_exit

.Ltpl_rare:				/* %rsp = pt_regs */
	lea 0(%rip), %rcx		/* R */
	.globl ukp_lean_tpl_r2
	.hidden ukp_lean_tpl_r2
ukp_lean_tpl_r2:
	mov %rcx, PT_SIZE(%rsp)
	jmp *.Ltpl_exit_rare(%rip)

.Ltpl_slow_unlock:
	HIT_UNLOCK %r12
.Ltpl_slow_rbx:
	mov %rbx, %rsp
.Ltpl_slow:				/* %rsp = pt_regs: all back, DF too */
	FLAGS_BACK PT_FLAGS
	LOAD_GPRS
	lea PT_SIZE+8(%rsp), %rsp	/* sp - 128 */
	.byte 0xe9			/* jmp to the call of the trampoline */
	.long 0
	.globl ukp_lean_tpl_call
	.hidden ukp_lean_tpl_call
ukp_lean_tpl_call:

/*
 * The bare fast path: sel's target while the site's list is one bare
 * probe (optimize.c: ukp_opt_bare_locked), a leaf pre_handler that never
 * reads its regs argument and writes no general register but rax, rcx,
 * rdi (the ones this path uses itself) and r11 (which a return probe's
 * detour on the handler's own entry writes, as a function's entry may).
 * The handler neither reads nor writes DF either, so DF is neither
 * tested nor put back.  Nothing the handler can see needs pt_regs, so
 * only the status flags (lahf and seto: pushfq costs more here, ~0.4 ns
 * a hit) and those four registers are saved, in their pt_regs fields
 * (the flags as BARE_SAVE's word, not the flags register's layout); the
 * other fields stay unwritten.  in_handler bit 2, taken with the lock in the same store,
 * says so: a fault in the handler's own code first fills the rest in
 * from the signal context (trap.c), then resumes through
 * ukp_opt_resume_bare.  The list names the handler it analysed
 * (L_BARE_FN): a probe whose pre_handler was changed since takes the
 * trampoline's way.  The handler is called from pt_regs' address rounded
 * down to 16, as on the lean paths; cur_regs is that address, and gives
 * it back after the call (nothing of the hit's changes it meanwhile).
 * A non-zero answer resumes at the probe point (regs->ip, which the
 * handler cannot have changed), as every other path does.  No exit
 * returns without a call: the slow one jumps to the trampoline's call,
 * as the lean path's does, and the others jump.
 */
.macro BARE_SAVE
	mov %rax, PT_AX(%rsp)
	lahf				/* ah: SF ZF AF PF CF */
	seto %al
	mov %ax, PT_FLAGS(%rsp)		/* al OF, ah the rest: BARE_FLAGS */
	mov %rcx, PT_CX(%rsp)
	mov %rdi, PT_DI(%rsp)
	mov %r11, PT_R11(%rsp)
.endm
/* the status flags back from BARE_SAVE's word (clobbers eax) */
.macro BARE_FLAGS
	movzwl PT_FLAGS(%rsp), %eax
	add $0x7f, %al			/* 0x7f + 1 overflows, 0x7f + 0 not */
	sahf
.endm
.macro BARE_LOAD
	mov PT_AX(%rsp), %rax
	mov PT_CX(%rsp), %rcx
	mov PT_DI(%rsp), %rdi
	mov PT_R11(%rsp), %r11
.endm
	.globl ukp_lean_tpl_bare
	.hidden ukp_lean_tpl_bare
ukp_lean_tpl_bare:
	lea -(128+8+PT_SIZE)(%rsp), %rsp	/* lea: flags untouched */
	BARE_SAVE
	mov %fs:0x7fffffff, %rcx	/* t = ukp_self */
	.globl ukp_lean_tpl_bare_tls
	.hidden ukp_lean_tpl_bare_tls
ukp_lean_tpl_bare_tls:
	test %rcx, %rcx
	jz .Lbare_slow
	cmpl $0, T_NEST(%rcx)		/* HIT_LOCK, with in_handler bit 2 */
	jne .Lbare_slow
	movabs 0x7fffffffffffffff, %rax	/* ukp_gp */
	.globl ukp_lean_tpl_bare_gp
	.hidden ukp_lean_tpl_bare_gp
ukp_lean_tpl_bare_gp:
	test $(UKP_GP_NOFAST|UKP_GP_NOKNOB), %rax
	jnz .Lbare_slow
	or $UKP_GP_BARE, %rax
	mov %rax, T_NEST(%rcx)
	mov %rsp, T_CUR_REGS(%rcx)	/* next: the hit's frame (in_handler 7) */
	mov 0(%rip), %rdi		/* the list (the header's copy) */
	.globl ukp_lean_tpl_bare_list
	.hidden ukp_lean_tpl_bare_list
ukp_lean_tpl_bare_list:
	test %rdi, %rdi
	jz .Lbare_slow_unlock
	mov L_BARE_FN(%rdi), %rax	/* 0: not one bare probe */
	test %rax, %rax
	jz .Lbare_slow_unlock
	mov L_P(%rdi), %rdi		/* p */
	cmp KP_PRE_HANDLER(%rdi), %rax
	jne .Lbare_slow_unlock
	testl $KP_FLAGS_DEAD, KP_FLAGS(%rdi)
	jnz .Lbare_slow_unlock
	mov %rdi, T_CUR(%rcx)
	and $-16, %rsp			/* LEAN_ENTRY's frame */
	call *%rax			/* p->pre_handler(p, -) */
	.globl ukp_lean_tpl_bare_ret
	.hidden ukp_lean_tpl_bare_ret
ukp_lean_tpl_bare_ret:
	mov %fs:0x7fffffff, %rcx	/* t again */
	.globl ukp_lean_tpl_bare_tls2
	.hidden ukp_lean_tpl_bare_tls2
ukp_lean_tpl_bare_tls2:
	mov T_CUR_REGS(%rcx), %rsp	/* pt_regs again: the hit's own */
	movq $0, T_CUR(%rcx)
	HIT_UNLOCK %rcx
	test %eax, %eax
	jnz .Lbare_again
	.globl ukp_lean_tpl_bare_fb
	.hidden ukp_lean_tpl_bare_fb
ukp_lean_tpl_bare_fb:			/* status flags dead: a jmp over */
	BARE_FLAGS
	.globl ukp_lean_tpl_bare_fb_end
	.hidden ukp_lean_tpl_bare_fb_end
ukp_lean_tpl_bare_fb_end:
	BARE_LOAD
	lea FRAME_SP(%rsp), %rsp
	.byte 0xe9			/* jmp R */
	.long 0
	.globl ukp_lean_tpl_bare_jmp_r
	.hidden ukp_lean_tpl_bare_jmp_r
ukp_lean_tpl_bare_jmp_r:
.Lbare_again:				/* to regs->ip: the probe point */
	BARE_FLAGS
	BARE_LOAD
	lea FRAME_SP(%rsp), %rsp
	.byte 0xe9			/* jmp addr */
	.long 0
	.globl ukp_lean_tpl_bare_addr
	.hidden ukp_lean_tpl_bare_addr
ukp_lean_tpl_bare_addr:
.Lbare_slow_unlock:
	HIT_UNLOCK %rcx
.Lbare_slow:				/* %rsp = pt_regs: all back (DF was */
	BARE_FLAGS			/* never touched), and on to the call of */
	BARE_LOAD			/* the trampoline, which saves all and decides */
	lea PT_SIZE+8(%rsp), %rsp	/* sp - 128 */
	.byte 0xe9
	.long 0
	.globl ukp_lean_tpl_bare_call
	.hidden ukp_lean_tpl_bare_call
ukp_lean_tpl_bare_call:
	.p2align 3, 0xcc
.Ltpl_exit_rare:
	.quad 0				/* ukp_opt_exit_rare: written per copy */
	.globl ukp_lean_tpl_end
	.hidden ukp_lean_tpl_end
ukp_lean_tpl_end:

	.globl ukp_opt_tramp_end
	.hidden ukp_opt_tramp_end
ukp_opt_tramp_end:

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


/*
 * ftrace.  A patch site calls its stub (ftrace.c), which counts the call
 * in (ft_depth) and jumps here with
 *
 *	%r11 = the site's cfg	(%rsp) = the traced function's r11
 *	8(%rsp) = the return into it (site + 5)
 *	16(%rsp) = the return into its caller (parent_ip)
 *
 * Each trampoline counts the call out (FT_OUT) once it is done with the
 * cfg, and returns into the function with every register it had (the
 * flags are not live at a function's entry).  The stack below the
 * function's entry sp is free: no red zone to step over.
 */

/* The call is out: one level less deep, and a count of the times the
 * thread came back to depth 0 (a grace period waits for either; sync.c).
 * \reg: the thread block. */
.macro FT_OUT reg
	decq T_FT_DEPTH(\reg)
	jnz 9f
	incq T_FT_QS(\reg)
9:
.endm

/* Call \fn with the argument vector registers (0-7, full width), MXCSR
 * and the x87 control word saved around it; %rbx = the frame to come
 * back to.  Argument registers for \fn are set already. */
.macro FT_CALL_VEC fn
	cmpl $1, ukp_vec_level(%rip)
	jb 5f
	ja 7f
	VS_AREA 8, 32
	stmxcsr 0(%rsp)
	fnstcw 4(%rsp)
	CALL_VEC 8, 32, call \fn
	jmp 6f
7:	VS_AREA 8, 64			/* AVX-512: zmm0-7 */
	stmxcsr 0(%rsp)
	fnstcw 4(%rsp)
	CALL_VEC 8, 64, call \fn
	jmp 6f
5:	VS_AREA 8, 16
	stmxcsr 0(%rsp)
	fnstcw 4(%rsp)
	VEC_ALL SAVE_VEC, 8, 16
	call \fn
	VEC_ALL LOAD_VEC, 8, 16
6:	ldmxcsr 0(%rsp)
	fldcw 4(%rsp)
.endm

	.globl ukp_ftrace_tramp_begin
	.hidden ukp_ftrace_tramp_begin
ukp_ftrace_tramp_begin:

/* cfg_none: the site stops being traced; the call passes through */
	.globl ukp_ftrace_tramp_none
	.hidden ukp_ftrace_tramp_none
	.type ukp_ftrace_tramp_none, @function
ukp_ftrace_tramp_none:
	THREAD_SELF %r11
	FT_OUT %r11
	pop %r11
	ret
	.size ukp_ftrace_tramp_none, .-ukp_ftrace_tramp_none

/* One ops, no pt_regs, a callback proven to keep to the general
 * registers (the kernel's dynamic trampoline): call it directly.  errno
 * is kept around it unless the callback is a leaf (no call, no system
 * call, no thread-local store: it cannot change errno). */
.macro FT_ONE name, errno
	.p2align 6
	.globl \name
	.hidden \name
	.type \name, @function
\name:
	PUSH_ARGS
	mov FC_OPP(%r11), %rax
	cmpb $0, FO_LIVE(%rax)		/* unregistered meanwhile */
	je 1f
	.if \errno
	THREAD_SELF %rax
	mov T_ERRNO_P(%rax), %rax
	mov (%rax), %eax		/* errno, 4 bytes as it is stored: an */
	push %rax			/* 8-byte load would not forward */
	.else
	sub $8, %rsp			/* (16-aligned) */
	.endif
	mov FC_IP(%r11), %rdi
	mov 88(%rsp), %rsi		/* parent_ip */
	mov FC_OPS(%r11), %rdx
	xor %ecx, %ecx			/* regs = NULL */
	call *FC_FUNC(%r11)
	.if \errno
	THREAD_SELF %r11
	mov T_ERRNO_P(%r11), %rax
	pop %rcx
	mov %ecx, (%rax)
	jmp 2f
	.else
	add $8, %rsp
	.endif
1:	THREAD_SELF %r11
2:	FT_OUT %r11
	POP_ARGS
	pop %r11
	ret
	.size \name, .-\name
.endm
	FT_ONE ukp_ftrace_tramp_one, 1
	FT_ONE ukp_ftrace_tramp_one_leaf, 0

/* Several ops, none with pt_regs or RECURSION, every callback proven to
 * keep to the general registers: the list walked here, without the
 * general walk's call, ip bookkeeping and flag tests. */
	.p2align 6
	.globl ukp_ftrace_tramp_list_lean
	.hidden ukp_ftrace_tramp_list_lean
	.type ukp_ftrace_tramp_list_lean, @function
ukp_ftrace_tramp_list_lean:
	PUSH_ARGS
	push %rbx
	push %r12
	push %r13
	push %r14
	push %r15			/* (16-aligned) */
	mov %r11, %r12			/* cfg */
	THREAD_SELF %rax
	mov T_ERRNO_P(%rax), %r14
	mov (%r14), %r15d		/* errno */
	lea FC_E(%r12), %rbx
	mov FC_N(%r12), %r13d
	shl $5, %r13			/* FE_SIZE */
	add %rbx, %r13			/* the end of the list */
1:	mov FE_OPP(%rbx), %rax
	cmpb $0, FO_LIVE(%rax)		/* unregistered meanwhile */
	je 2f
	mov FC_IP(%r12), %rdi
	mov 120(%rsp), %rsi		/* parent_ip */
	mov FE_OPS(%rbx), %rdx
	xor %ecx, %ecx			/* regs = NULL */
	call *FE_FUNC(%rbx)
2:	add $FE_SIZE, %rbx
	cmp %r13, %rbx
	jb 1b
	mov %r15d, (%r14)
	THREAD_SELF %r11
	FT_OUT %r11
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %rbx
	POP_ARGS
	pop %r11
	ret
	.size ukp_ftrace_tramp_list_lean, .-ukp_ftrace_tramp_list_lean

/* Several ops, or callbacks that need more: the walk (cfg, NULL, parent). */
.macro FT_LIST name, vec
	.p2align 6
	.globl \name
	.hidden \name
	.type \name, @function
\name:
	PUSH_ARGS
	push %rbx
	push %r12
	push %r12			/* (16-aligned) */
	mov %rsp, %rbx
	mov %r11, %rdi
	xor %esi, %esi			/* no pt_regs */
	mov 104(%rsp), %rdx		/* parent_ip */
	.if \vec
	FT_CALL_VEC *FC_WALK(%rdi)
	.else
	call *FC_WALK(%rdi)
	.endif
	mov %rbx, %rsp
	THREAD_SELF %r11
	FT_OUT %r11
	pop %r12
	pop %r12
	pop %rbx
	POP_ARGS
	pop %r11
	ret
	.size \name, .-\name
.endm

/* The regs trampolines' frame: pt_regs as at the function's first
 * instruction (ip = the site, sp = its entry sp), %r12 = the cfg, %rbx =
 * the frame.  ...and the way out: counted out, registers loaded back from
 * pt_regs, through the return address (which a redirect overwrote). */
.macro FT_REGS_FRAME
	SAVE_GPRS
	mov %r11, %r12			/* cfg (r12 is in pt_regs) */
	mov PT_SIZE(%rsp), %rax		/* the function's r11 */
	mov %rax, PT_R11(%rsp)
	mov FC_IP(%r12), %rax
	mov %rax, PT_IP(%rsp)
	movq $0x33, PT_CS(%rsp)
	movq $0x2b, PT_SS(%rsp)
	lea PT_SIZE+16(%rsp), %rax
	mov %rax, PT_SP(%rsp)
	mov %rsp, %rbx
.endm
.macro FT_REGS_LEAVE
	THREAD_SELF %rax
	FT_OUT %rax
	LOAD_GPRS
	lea PT_SIZE+8(%rsp), %rsp
	ret
.endm

/* pt_regs as at the function's first instruction (ip = the site, sp =
 * its entry sp): the walk (cfg, regs, parent).  Registers are
 * loaded back from pt_regs; if an IPMODIFY ops moved ip, the call goes
 * there instead, its return address still the caller's. */
.macro FT_REGS name, vec
	.p2align 6
	.globl \name
	.hidden \name
	.type \name, @function
\name:
	FT_REGS_FRAME
	mov %r12, %rdi
	mov %rbx, %rsi
	mov PT_SIZE+16(%rbx), %rdx	/* parent_ip */
	.if \vec
	FT_CALL_VEC *FC_WALK(%rdi)
	.else
	call *FC_WALK(%rdi)
	.endif
	mov %rbx, %rsp
	test %eax, %eax
	jz 1f
	mov PT_IP(%rsp), %rax		/* redirected: over the return */
	mov %rax, PT_SIZE+8(%rsp)	/* into the function */
1:	FT_REGS_LEAVE
	.size \name, .-\name
.endm

/* One ops with pt_regs (no RECURSION, general registers only): FT_REGS
 * with the callback called directly instead of the walk.  Its ip move
 * counts only for an IPMODIFY ops, as in the walk. */
.macro FT_REGS_ONE name, errno
	.p2align 6
	.globl \name
	.hidden \name
	.type \name, @function
\name:
	FT_REGS_FRAME
	mov FC_OPP(%r12), %rax
	cmpb $0, FO_LIVE(%rax)		/* unregistered meanwhile */
	je 1f
	.if \errno
	THREAD_SELF %rax
	mov T_ERRNO_P(%rax), %r13	/* r13, r14: loaded back from pt_regs */
	mov (%r13), %r14d
	.endif
	mov FC_IP(%r12), %rdi
	mov PT_SIZE+16(%rbx), %rsi	/* parent_ip */
	mov FC_OPS(%r12), %rdx
	mov %rbx, %rcx
	call *FC_FUNC(%r12)
	.if \errno
	mov %r14d, (%r13)
	.endif
	mov PT_IP(%rbx), %rax
	cmp FC_IP(%r12), %rax
	je 1f
	testl $FL_IPMODIFY, FC_E+FE_FLAGS(%r12)
	jz 1f				/* not this ops' to move */
	mov %rax, PT_SIZE+8(%rbx)	/* redirected: over the return */
1:	FT_REGS_LEAVE
	.size \name, .-\name
.endm
	FT_REGS_ONE ukp_ftrace_tramp_regs_one, 1
	FT_REGS_ONE ukp_ftrace_tramp_regs_one_leaf, 0

/*
 * int ukp_ftrace_walk(cfg, regs or NULL, parent): every live callback of
 * the list, in order, each given regs if its ops asked for them; ip moved
 * by one whose ops is not IPMODIFY is put back.  1: ip moved.  An
 * ordinary function (ukp_ftrace_walk_c is its C twin, with RECURSION).
 */
	.globl ukp_ftrace_walk
	.hidden ukp_ftrace_walk
	.type ukp_ftrace_walk, @function
ukp_ftrace_walk:
	push %rbp
	push %rbx
	push %r12
	push %r13
	push %r14
	push %r15
	sub $24, %rsp			/* end of the list, errno's address */
	mov %rdi, %r12			/* cfg */
	mov %rsi, %rbx			/* regs */
	mov %rdx, %r13			/* parent_ip */
	mov FC_IP(%r12), %r15		/* where the call goes */
	THREAD_SELF %rax
	mov T_ERRNO_P(%rax), %rax
	mov %rax, 8(%rsp)
	mov (%rax), %r14d		/* errno */
	lea FC_E(%r12), %rbp
	mov FC_N(%r12), %eax
	shl $5, %rax			/* FE_SIZE */
	add %rbp, %rax
	mov %rax, (%rsp)
1:	cmp (%rsp), %rbp
	jae 9f
	mov FE_OPP(%rbp), %rax
	cmpb $0, FO_LIVE(%rax)
	je 8f
	mov FC_IP(%r12), %rdi
	mov %r13, %rsi
	mov FE_OPS(%rbp), %rdx
	xor %ecx, %ecx
	testl $FL_ANY_REGS, FE_FLAGS(%rbp)
	jz 2f
	mov %rbx, %rcx
2:	call *FE_FUNC(%rbp)
	test %rbx, %rbx
	jz 8f
	mov PT_IP(%rbx), %rax
	cmp %rax, %r15
	je 8f
	testl $FL_IPMODIFY, FE_FLAGS(%rbp)
	jz 3f
	mov %rax, %r15			/* an IPMODIFY ops sent it there */
	jmp 8f
3:	mov %r15, PT_IP(%rbx)		/* not this ops' to move */
8:	add $FE_SIZE, %rbp
	jmp 1b
9:	mov 8(%rsp), %rax
	mov %r14d, (%rax)
	xor %eax, %eax
	cmp FC_IP(%r12), %r15
	setne %al
	add $24, %rsp
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %rbx
	pop %rbp
	ret
	.size ukp_ftrace_walk, .-ukp_ftrace_walk

	FT_LIST ukp_ftrace_tramp_list, 0
	FT_LIST ukp_ftrace_tramp_list_vec, 1
	FT_REGS ukp_ftrace_tramp_regs, 0
	FT_REGS ukp_ftrace_tramp_regs_vec, 1

/* A stub's thread with no block yet: attach one (libc may run: every
 * register and the whole vector state saved).  %r11 = the block or 0. */
	.globl ukp_ftrace_attach
	.hidden ukp_ftrace_attach
	.type ukp_ftrace_attach, @function
ukp_ftrace_attach:
	SAVE_GPRS
	mov %rsp, %rbx
	XSAVE_ALL
	call ukp_thread_attach
	mov %rax, PT_R11(%rbx)
	XRSTOR_ALL
	mov %rbx, %rsp
	LOAD_GPRS
	lea PT_SIZE(%rsp), %rsp
	ret
	.size ukp_ftrace_attach, .-ukp_ftrace_attach

	.globl ukp_ftrace_tramp_end
	.hidden ukp_ftrace_tramp_end
ukp_ftrace_tramp_end:

/* -pg -mfentry code calls this until its sites become nops (ftrace.c
 * does that when ukprobes starts, and for each object loaded later). */
	.globl __fentry__
	.type __fentry__, @function
__fentry__:
	ret
	.size __fentry__, .-__fentry__
	.section .note.GNU-stack, "", @progbits
