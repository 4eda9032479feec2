/* SPDX-License-Identifier: MIT */
#ifndef UKPROBES_KPROBES_H
#define UKPROBES_KPROBES_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>
#include <ukprobes/ptrace.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define UKP_API __attribute__((visibility("default")))
#else
#define UKP_API
#endif

typedef unsigned char kprobe_opcode_t;

/* struct kprobe.flags */
#define KPROBE_FLAG_GONE	1	/* the probed object was unloaded */
#define KPROBE_FLAG_DISABLED	2	/* registered but not armed */
#define KPROBE_FLAG_OPTIMIZED	4	/* replaced by a jump to a detour buffer */
#define KPROBE_FLAG_FTRACE	8	/* runs on an ftrace patch site */

struct kprobe;
typedef int (*kprobe_pre_handler_t)(struct kprobe *p, struct pt_regs *regs);
typedef void (*kprobe_post_handler_t)(struct kprobe *p, struct pt_regs *regs,
				      unsigned long flags);
typedef int (*kprobe_fault_handler_t)(struct kprobe *p, struct pt_regs *regs,
				      int trapnr);

/*
 * Callers zero-initialise the whole struct, then set addr (or symbol_name
 * and offset) and the handlers.
 */
struct kprobe {
	kprobe_opcode_t *addr;		/* or symbol_name + offset, never both */
	const char *symbol_name;	/* "func" or "object:func" */
	unsigned int offset;
	kprobe_pre_handler_t pre_handler;
	kprobe_post_handler_t post_handler;
	kprobe_fault_handler_t fault_handler;
	unsigned long nmissed;		/* hits skipped by recursion */
	unsigned int flags;		/* KPROBE_FLAG_* */
	/* private engine state */
	void *__ukp_priv[4];
};

struct kretprobe;
struct kretprobe_instance {
	struct kretprobe *rp;
	kprobe_opcode_t *ret_addr;	/* the real return address */
	pid_t task;			/* thread id of the probed call */
	/* data_size bytes, per instance, aligned for any type */
	char data[] __attribute__((aligned(16)));
};

typedef int (*kretprobe_handler_t)(struct kretprobe_instance *ri,
				   struct pt_regs *regs);

struct kretprobe {
	struct kprobe kp;
	kretprobe_handler_t handler;
	kretprobe_handler_t entry_handler;
	int maxactive;			/* <= 0: a default */
	int nmissed;
	size_t data_size;
	void *__ukp_priv[4];
};

struct jprobe {
	struct kprobe kp;
	void *entry;			/* same prototype as the probed function */
};

/*
 * Every function returns 0 or a negative errno:
 *   -EINVAL  both or neither of addr and symbol_name; already registered;
 *            blacklisted address (ukprobes itself, its signal path,
 *            NOKPROBE_SYMBOL functions); not executable code
 *   -ENOENT  unknown symbol or object
 *   -EILSEQ  not an instruction boundary of its function, or undecodable
 *   -ENOMEM  out of memory or of executable slots near the address
 *   -EOPNOTSUPP  a feature this build does not have yet
 * On success p->addr holds the resolved address.
 */
UKP_API int register_kprobe(struct kprobe *p);
UKP_API void unregister_kprobe(struct kprobe *p);
UKP_API int register_kprobes(struct kprobe **kps, int num);
UKP_API void unregister_kprobes(struct kprobe **kps, int num);
UKP_API int disable_kprobe(struct kprobe *p);
UKP_API int enable_kprobe(struct kprobe *p);

UKP_API int register_kretprobe(struct kretprobe *rp);
UKP_API void unregister_kretprobe(struct kretprobe *rp);
UKP_API int register_kretprobes(struct kretprobe **rps, int num);
UKP_API void unregister_kretprobes(struct kretprobe **rps, int num);
UKP_API int disable_kretprobe(struct kretprobe *rp);
UKP_API int enable_kretprobe(struct kretprobe *rp);

UKP_API int register_jprobe(struct jprobe *jp);
UKP_API void unregister_jprobe(struct jprobe *jp);
UKP_API int register_jprobes(struct jprobe **jps, int num);
UKP_API void unregister_jprobes(struct jprobe **jps, int num);
UKP_API int disable_jprobe(struct jprobe *jp);
UKP_API int enable_jprobe(struct jprobe *jp);
UKP_API void jprobe_return(void);

/* Returns once every queued (un)optimisation is done. */
UKP_API void wait_for_kprobe_optimizer(void);
/* debugfs kprobes/enabled: 0 disarms every probe, 1 rearms the enabled. */
UKP_API int kprobes_set_enabled(int on);
UKP_API int kprobes_get_enabled(void);
/* sysctl debug.kprobes_optimization */
UKP_API int kprobes_set_optimization(int on);
UKP_API int kprobes_get_optimization(void);
/* debugfs kprobes/list: one line per probe. */
UKP_API int kprobes_list(FILE *out);

/* Reads size bytes at src; 0, or -EFAULT if any byte is unreadable. */
UKP_API long copy_from_user_nofault(void *dst, const void *src, size_t size);

/*
 * NOKPROBE_SYMBOL(fname) blacklists the function fname: registering a
 * probe anywhere inside it fails with -EINVAL.  Use it at file scope in
 * any object of the process (the executable or a shared object).
 */
#define __UKP_CAT2(a, b) a##b
#define __UKP_CAT(a, b) __UKP_CAT2(a, b)
#define NOKPROBE_SYMBOL(fname)						\
	static const void *const __UKP_CAT(__ukp_nokprobe_, fname)	\
	__attribute__((used, section("ukp_nokprobe"))) = (const void *)&fname

#ifdef __cplusplus
}
#endif
#endif
