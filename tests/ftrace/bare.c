/* SPDX-License-Identifier: MIT */
/*
 * An ftrace hook on a kprobe's bare pre_handler (the detour's bare fast
 * path neither tests nor restores DF: its handler never uses it).
 *
 * Cases:
 *   ftrace_site_in_handler_keeps_it_off_the_bare_path   DF set at the
 *                         probe point; the pre_handler has an ftrace
 *                         patch site, and an ftrace callback (C code,
 *                         which wants DF clear: a memcpy in it would copy
 *                         backwards) is hooked on it after the probe was
 *                         optimised: the callback runs with DF clear
 */
#include <string.h>
#include "ukt.h"
#include <ukprobes/ftrace.h>

static long bh_hits;

/* a leaf that never reads its regs, with an ftrace patch site */
__attribute__((noinline, used, patchable_function_entry(5)))
static int bh_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	bh_hits++;
	return 0;
}

unsigned long fb_std(void);
__asm__(".text\n.p2align 4\n.globl fb_std\n.type fb_std,@function\n"
	"fb_std: std\n"
	".globl fb_std_probe\nfb_std_probe: nopl 0x0(%rax,%rax,1)\n"
	" cld\n ret\n.size fb_std,.-fb_std\n");

static volatile long cb_calls, cb_df;

static void cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
	       struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op; (void)regs;
	cb_calls++;
	if (__builtin_ia32_readeflags_u64() & 0x400)
		cb_df++;
}

UKT_CASE(ftrace_site_in_handler_keeps_it_off_the_bare_path)
{
	struct kprobe kp = { .addr = (void *)ukt_label("fb_std_probe"), .pre_handler = bh_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	fb_std();	/* this thread's block made */
	static struct ftrace_ops ops = { .func = cb };
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)bh_pre, 0, 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	long h0 = bh_hits;
	for (int i = 0; i < 10; i++)
		fb_std();
	UKT_EQ(bh_hits - h0, 10);
	UKT_EQ(cb_calls, 10);
	UKT_EQ(cb_df, 0);
	unregister_ftrace_function(&ops);
	unregister_kprobe(&kp);
}
