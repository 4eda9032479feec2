/* SPDX-License-Identifier: MIT */
/*
 * x86-64 for the stack walker (stacktrace.c): the DWARF register numbers
 * of the registers a frame's rules need, the frame it starts from, and
 * the kernel's signal frame.
 */
#ifndef UKP_ARCH_UNWIND_H
#define UKP_ARCH_UNWIND_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <ucontext.h>
#include <ukprobes/ptrace.h>

/* DWARF numbers (System V x86-64 psABI, figure 3.36) */
#define UKP_DW_BP	6
#define UKP_DW_SP	7
#define UKP_DW_RA	16	/* the return address column */
#define UKP_DW_NREGS	17

/* What a walk keeps of a frame: the rules of x86-64 code only ever
 * need the stack and frame pointers to find the caller's. */
struct ukp_uframe {
	unsigned long ip, sp, bp;
	bool exact;	/* ip is where the thread stopped (a probe point, a
			   signal), not a return address: its own rules
			   apply, not those of the call before it */
};

/* The caller's frame of the function this is inlined into (a frame
 * pointer kept there: __builtin_frame_address), the walk's start. */
#define UKP_ARCH_CALLER_FRAME(f) do {					\
	unsigned long *fp_ = (unsigned long *)__builtin_frame_address(0); \
	(f)->ip = (unsigned long)__builtin_return_address(0);		\
	(f)->sp = (unsigned long)(fp_ + 2);				\
	(f)->bp = fp_[0];						\
	(f)->exact = false;						\
} while (0)

static inline void ukp_arch_uframe_from_regs(struct ukp_uframe *f,
					     const struct pt_regs *r)
{
	f->ip = r->ip;
	f->sp = r->sp;
	f->bp = r->bp;
	f->exact = true;
}

/* Returned into the restorer, sp is the ucontext the kernel saved (the
 * handler's return popped): where its ip, sp and bp are. */
#define UKP_ARCH_SIGFRAME_IP	offsetof(ucontext_t, uc_mcontext.gregs[REG_RIP])
#define UKP_ARCH_SIGFRAME_SP	offsetof(ucontext_t, uc_mcontext.gregs[REG_RSP])
#define UKP_ARCH_SIGFRAME_BP	offsetof(ucontext_t, uc_mcontext.gregs[REG_RBP])

#endif
