/* SPDX-License-Identifier: MIT */
/*
 * Parts of the contract that arrive in a later issue: ftrace.  They
 * return -EOPNOTSUPP (or the neutral
 * value) so that callers need no #ifdef.
 */
#include "internal.h"

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
