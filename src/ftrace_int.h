/* SPDX-License-Identifier: MIT */
/*
 * What ftrace.c (the registry) and ftrace_hit.c (the hit path, general
 * registers only) share with each other and with entry.S (FC_*, FO_* in
 * asm-offsets.h, checked in ftrace_hit.c).
 */
#ifndef UKP_FTRACE_INT_H
#define UKP_FTRACE_INT_H

#include "internal.h"

/* One per ftrace_ops ever used (ops->__ukp_priv[0]); never freed, since
 * filters outlive a registration and a stub may still look at `live`. */
struct ft_pat {
	char *obj;		/* object glob, NULL: any */
	char *glob;
	struct ft_pat *next;
};
struct ft_ips { unsigned long *v; size_t n; };
struct ft_filter { struct ft_pat *pats; struct ft_ips ips; };

struct ft_opp {
	_Atomic uint8_t live;		/* FO_LIVE: callbacks may run */
	struct ftrace_ops *ops;
	bool registered;
	bool gpr_only;			/* func keeps to the general registers */
	bool leaf;			/* ...and cannot change errno */
	uint16_t writes, reads;		/* a leaf's general registers
					   (ukp_opt_leaf_regs_locked) */
	struct ft_filter filter, notrace;
	struct ft_opp *next;		/* registration order */
	struct ft_opp *all_next;	/* every ops ever seen */
};

/* The callbacks of one site, immutable once published in its stub. */
struct ft_ent {
	ftrace_func_t func;
	struct ftrace_ops *ops;
	struct ft_opp *opp;
	unsigned long flags;
};
struct ft_site;
struct ft_cfg {
	const void *tramp;		/* FC_TRAMP: where the stub goes on */
	unsigned long ip;		/* FC_IP */
	struct ftrace_ops *ops;		/* FC_OPS: e[0]'s, for the one-ops path */
	ftrace_func_t func;		/* FC_FUNC */
	struct ft_opp *opp;		/* FC_OPP */
	/* FC_WALK: calls every live callback, (cfg, regs or NULL, parent);
	 * 1 if an IPMODIFY callback moved regs->ip */
	int (*walk)(const struct ft_cfg *c, struct pt_regs *regs, unsigned long parent);
	unsigned n;			/* FC_N */
	bool regs, vec;
	struct ft_site *site;
	struct ft_cfg *next_garbage;
	uint8_t *body;			/* its own code (1-3 lean ops), or NULL */
	uint8_t *entry;			/* where in body the stub jumps */
	struct ft_ent e[];		/* FC_E, FE_SIZE bytes each */
};

/* ftrace_hit.c: the walk for lists with a RECURSION ops */
int ukp_ftrace_walk_c(const struct ft_cfg *c, struct pt_regs *regs, unsigned long parent);
/* entry.S: the walk for the others */
int ukp_ftrace_walk(const struct ft_cfg *c, struct pt_regs *regs, unsigned long parent);
void ukp_ftrace_kprobe_func(unsigned long ip, unsigned long parent_ip,
			    struct ftrace_ops *op, struct pt_regs *regs);

/* entry.S */
extern const char ukp_ftrace_tramp_none[], ukp_ftrace_tramp_one[],
	ukp_ftrace_tramp_one_leaf[], ukp_ftrace_tramp_regs_one[],
	ukp_ftrace_tramp_regs_one_leaf[], ukp_ftrace_tramp_list_lean[],
	ukp_ftrace_tramp_list[], ukp_ftrace_tramp_list_vec[],
	ukp_ftrace_tramp_regs[], ukp_ftrace_tramp_regs_vec[],
	ukp_ftrace_attach[];

#endif
