/* SPDX-License-Identifier: MIT */
/* ftrace: a first smoke test (more in the other tests/ftrace files). */
#include <string.h>
#include "ukt.h"
#include "fttargets/targets.h"

static long hits;
static unsigned long last_ip, last_parent;

static void count_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		     struct pt_regs *regs)
{
	(void)op;
	(void)regs;
	hits++;
	last_ip = ip;
	last_parent = parent_ip;
}

#define BOTH(name, body)						\
	UKT_CASE(name##_fentry) { body(fe_) }				\
	UKT_CASE(name##_patchable) { body(pf_) }

#define ONE_FILTERED(p)							\
	struct ftrace_ops ops = { .func = count_cb };			\
	char f[64];							\
	snprintf(f, sizeof(f), "%sadd", #p);				\
	UKT_EQ(ftrace_set_filter(&ops, (unsigned char *)f, (int)strlen(f), 1), 0); \
	UKT_EQ(register_ftrace_function(&ops), 0);		\
	hits = 0;							\
	int s = 0;							\
	for (int i = 0; i < 1000; i++)					\
		s += FT_CAT(p, add)(i, 1) + FT_CAT(p, mul)(i, 2);	\
	UKT_EQ(s, 1000 * 1001 / 2 + 999 * 1000);			\
	UKT_EQ(hits, 1000);					\
	UKT_EQ(last_ip, (unsigned long)&FT_CAT(p, add));	\
	UKT_EQ(unregister_ftrace_function(&ops), 0);		\
	FT_CAT(p, add)(1, 2);						\
	UKT_EQ(hits, 1000);

BOTH(one_filtered_function_counts_every_call, ONE_FILTERED)
