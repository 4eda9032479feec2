/* SPDX-License-Identifier: MIT */
/*
 * Parts of the contract that arrive in later issues: kretprobes, jprobes,
 * and ftrace.  They return -EOPNOTSUPP (or the neutral
 * value) so that callers need no #ifdef.
 */
#include "internal.h"

int register_kretprobe(struct kretprobe *rp) { (void)rp; return -EOPNOTSUPP; }
void unregister_kretprobe(struct kretprobe *rp) { if (rp) rp->kp.addr = NULL; }
int register_kretprobes(struct kretprobe **rps, int num) { (void)rps; (void)num; return -EOPNOTSUPP; }
void unregister_kretprobes(struct kretprobe **rps, int num)
{
	for (int i = 0; rps && i < num; i++)
		unregister_kretprobe(rps[i]);
}
int disable_kretprobe(struct kretprobe *rp) { (void)rp; return -EOPNOTSUPP; }
int enable_kretprobe(struct kretprobe *rp) { (void)rp; return -EOPNOTSUPP; }

int register_jprobe(struct jprobe *jp) { (void)jp; return -EOPNOTSUPP; }
void unregister_jprobe(struct jprobe *jp) { if (jp) jp->kp.addr = NULL; }
int register_jprobes(struct jprobe **jps, int num) { (void)jps; (void)num; return -EOPNOTSUPP; }
void unregister_jprobes(struct jprobe **jps, int num)
{
	for (int i = 0; jps && i < num; i++)
		unregister_jprobe(jps[i]);
}
int disable_jprobe(struct jprobe *jp) { (void)jp; return -EOPNOTSUPP; }
int enable_jprobe(struct jprobe *jp) { (void)jp; return -EOPNOTSUPP; }
void jprobe_return(void) { }


int register_ftrace_function(struct ftrace_ops *ops) { (void)ops; return -EOPNOTSUPP; }
int unregister_ftrace_function(struct ftrace_ops *ops) { (void)ops; return -EOPNOTSUPP; }
int ftrace_set_filter(struct ftrace_ops *ops, unsigned char *buf, int len, int reset)
{ (void)ops; (void)buf; (void)len; (void)reset; return -EOPNOTSUPP; }
int ftrace_set_notrace(struct ftrace_ops *ops, unsigned char *buf, int len, int reset)
{ (void)ops; (void)buf; (void)len; (void)reset; return -EOPNOTSUPP; }
int ftrace_set_filter_ip(struct ftrace_ops *ops, unsigned long ip, int remove, int reset)
{ (void)ops; (void)ip; (void)remove; (void)reset; return -EOPNOTSUPP; }
int ftrace_test_recursion_trylock(unsigned long ip, unsigned long parent_ip)
{ (void)ip; (void)parent_ip; return -EOPNOTSUPP; }
void ftrace_test_recursion_unlock(int bit) { (void)bit; }
int ftrace_set_enabled(int on) { (void)on; return -EOPNOTSUPP; }
int ftrace_get_enabled(void) { return 1; }
