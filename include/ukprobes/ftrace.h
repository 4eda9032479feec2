/* SPDX-License-Identifier: MIT */
#ifndef UKPROBES_FTRACE_H
#define UKPROBES_FTRACE_H

#include <ukprobes/ptrace.h>
#include <ukprobes/kprobes.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ftrace_ops;
typedef void (*ftrace_func_t)(unsigned long ip, unsigned long parent_ip,
			      struct ftrace_ops *op, struct pt_regs *regs);

/* ftrace_ops.flags, with the kernel's bit values */
#define FTRACE_OPS_FL_ENABLED			(1UL << 0)
#define FTRACE_OPS_FL_SAVE_REGS			(1UL << 2)
#define FTRACE_OPS_FL_SAVE_REGS_IF_SUPPORTED	(1UL << 3)
#define FTRACE_OPS_FL_RECURSION			(1UL << 4)
#define FTRACE_OPS_FL_IPMODIFY			(1UL << 12)
#define FTRACE_OPS_FL_RCU			(1UL << 14)
#define FTRACE_OPS_FL_PERMANENT			(1UL << 16)

struct ftrace_ops {
	ftrace_func_t func;
	unsigned long flags;
#ifdef __cplusplus
	void *private_;
#else
	void *private;
#endif
	/* private engine state: callers zero-initialise */
	void *__ukp_priv[8];
};

UKP_API int register_ftrace_function(struct ftrace_ops *ops);
UKP_API int unregister_ftrace_function(struct ftrace_ops *ops);
UKP_API int ftrace_set_filter(struct ftrace_ops *ops, unsigned char *buf,
			      int len, int reset);
UKP_API int ftrace_set_notrace(struct ftrace_ops *ops, unsigned char *buf,
			       int len, int reset);
UKP_API int ftrace_set_filter_ip(struct ftrace_ops *ops, unsigned long ip,
				 int remove, int reset);
UKP_API int ftrace_test_recursion_trylock(unsigned long ip,
					  unsigned long parent_ip);
UKP_API void ftrace_test_recursion_unlock(int bit);
UKP_API int ftrace_set_enabled(int on);
UKP_API int ftrace_get_enabled(void);

/*
 * The kernel's available_filter_functions and enabled_functions: one line
 * per patch site, "<address, 16 hex digits>  <function> [<object>]"
 * (object left out for the main executable); enabled ones add
 * " (<number of callbacks>)" and " R" (pt_regs saved), " I" (an IPMODIFY
 * ops), " K" (kprobes).  Return the number of lines, or -EINVAL.
 */
UKP_API int ftrace_available_functions(FILE *out);
UKP_API int ftrace_enabled_functions(FILE *out);

#ifdef __cplusplus
}
#endif
#endif
