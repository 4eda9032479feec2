/* SPDX-License-Identifier: MIT */
#ifndef UKPROBES_PTRACE_H
#define UKPROBES_PTRACE_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The probed thread's registers, with the kernel's x86-64 names and order.
 * Every general register, ip, flags and sp hold the values at the probe
 * point; in a pre_handler ip is the probed address itself.  Handlers may
 * change them; the change takes effect when execution resumes.
 */
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax;
	unsigned long ip, cs, flags, sp, ss;
};

static inline unsigned long regs_return_value(struct pt_regs *regs)
{
	return regs->ax;
}

static inline unsigned long instruction_pointer(struct pt_regs *regs)
{
	return regs->ip;
}

static inline unsigned long user_stack_pointer(struct pt_regs *regs)
{
	return regs->sp;
}

/* System V argument n (0-based): di, si, dx, cx, r8, r9, then the stack. */
static inline unsigned long regs_get_kernel_argument(struct pt_regs *regs,
						     unsigned int n)
{
	switch (n) {
	case 0: return regs->di;
	case 1: return regs->si;
	case 2: return regs->dx;
	case 3: return regs->cx;
	case 4: return regs->r8;
	case 5: return regs->r9;
	default:
		/* At a function entry sp points at the return address. */
		return ((unsigned long *)regs->sp)[n - 6 + 1];
	}
}

#ifdef __cplusplus
}
#endif
#endif
