/* SPDX-License-Identifier: MIT */
#ifndef UKPROBES_STACKTRACE_H
#define UKPROBES_STACKTRACE_H

#include <ukprobes/ptrace.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The kernel's stack_trace_save() family (include/linux/stacktrace.h) for
 * the calling thread.  Entries are code addresses, innermost first; each
 * after the first is a real return address: a kretprobe's return stub on
 * the stack stands for the address it replaced, and no frame of ukprobes'
 * own machinery is stored.  Safe in every kind of handler (no lock, no
 * allocation, no fault) and in signal handlers.  docs/stacktrace.md.
 */

/* From the caller of stack_trace_save(): store[0] is the address the
 * call returns to.  Inside a handler the walk goes on from the probed
 * code's registers once the handler's own frames are done.  Returns the
 * number of entries stored; skipnr entries are skipped first. */
unsigned int stack_trace_save(unsigned long *store, unsigned int size,
			      unsigned int skipnr);

/* From a handler's registers: store[0] is regs->ip, then the return
 * addresses of the code regs describe (the probed code's stack, not the
 * handler's). */
unsigned int stack_trace_save_regs(struct pt_regs *regs, unsigned long *store,
				   unsigned int size, unsigned int skipnr);

/* One line per entry on stderr: 1 + spaces blanks, then "sym+0xoff/0xsize"
 * with " [object]" for a shared object (the kernel's %pS), or the bare
 * address when no symbol covers it. */
void stack_trace_print(const unsigned long *entries, unsigned int nr_entries,
		       int spaces);

#ifdef __cplusplus
}
#endif
#endif
