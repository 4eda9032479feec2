/* SPDX-License-Identifier: MIT */
/*
 * ftrace and registers: what SAVE_REGS callbacks see and may change,
 * IPMODIFY (live patching) and its exclusivity, ip changes of other ops
 * ignored, errno and vector state of the traced code kept, and kprobes on
 * patch sites (which run through ftrace).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fenv.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ukt.h"
#include "fttargets/targets.h"

#define BOTH(name, body)						\
	UKT_CASE(name##_fentry) { body(fe_) }				\
	UKT_CASE(name##_patchable) { body(pf_) }
#define S(p, n) #p #n
#define UL(f) ((unsigned long)(f))

static int set_f(struct ftrace_ops *ops, const char *s, int reset)
{
	return ftrace_set_filter(ops, (unsigned char *)s, (int)strlen(s), reset);
}

/*
 * ftt_call_regs(fn, args): calls fn(args[0..5]) with every other general
 * register set to a known value (rax, rbx, rbp, r10-r15), and afterwards
 * stores the callee-saved ones as fn returned them in ftt_after[].  The
 * call's return address is the label ftt_call_regs_ret.
 */
#define V_AX  0x0a0a0a0a0a0a0a0aUL
#define V_BX  0x0b0b0b0b0b0b0b0bUL
#define V_BP  0x0bb0bb0bb0bb0bb0UL
#define V_R10 0x1010101010101010UL
#define V_R11 0x1111111111111111UL
#define V_R12 0x1212121212121212UL
#define V_R13 0x1313131313131313UL
#define V_R14 0x1414141414141414UL
#define V_R15 0x1515151515151515UL
unsigned long ftt_after[6];	/* rbx rbp r12 r13 r14 r15 */
long ftt_call_regs(void *fn, const long *args);
__asm__(
	".text\n"
	".globl ftt_call_regs\n"
	".type ftt_call_regs, @function\n"
	"ftt_call_regs:\n"
	"	push %rbp\n"
	"	push %rbx\n"
	"	push %r12\n"
	"	push %r13\n"
	"	push %r14\n"
	"	push %r15\n"
	"	push %rdi\n"			/* fn; %rsp is 16-aligned now */
	"	mov %rsi, %rax\n"
	"	mov 0(%rax), %rdi\n"
	"	mov 8(%rax), %rsi\n"
	"	mov 16(%rax), %rdx\n"
	"	mov 24(%rax), %rcx\n"
	"	mov 32(%rax), %r8\n"
	"	mov 40(%rax), %r9\n"
	"	movabs $0x0b0b0b0b0b0b0b0b, %rbx\n"
	"	movabs $0x0bb0bb0bb0bb0bb0, %rbp\n"
	"	movabs $0x1010101010101010, %r10\n"
	"	movabs $0x1111111111111111, %r11\n"
	"	movabs $0x1212121212121212, %r12\n"
	"	movabs $0x1313131313131313, %r13\n"
	"	movabs $0x1414141414141414, %r14\n"
	"	movabs $0x1515151515151515, %r15\n"
	"	movabs $0x0a0a0a0a0a0a0a0a, %rax\n"
	"	call *(%rsp)\n"
	".globl ftt_call_regs_ret\n"
	"ftt_call_regs_ret:\n"
	"	mov %rbx, ftt_after+0(%rip)\n"
	"	mov %rbp, ftt_after+8(%rip)\n"
	"	mov %r12, ftt_after+16(%rip)\n"
	"	mov %r13, ftt_after+24(%rip)\n"
	"	mov %r14, ftt_after+32(%rip)\n"
	"	mov %r15, ftt_after+40(%rip)\n"
	"	add $8, %rsp\n"
	"	pop %r15\n"
	"	pop %r14\n"
	"	pop %r13\n"
	"	pop %r12\n"
	"	pop %rbx\n"
	"	pop %rbp\n"
	"	ret\n"
	".size ftt_call_regs, .-ftt_call_regs\n");

static void expect_after_intact(void)
{
	UKT_EQ(ftt_after[0], V_BX);
	UKT_EQ(ftt_after[1], V_BP);
	UKT_EQ(ftt_after[2], V_R12);
	UKT_EQ(ftt_after[3], V_R13);
	UKT_EQ(ftt_after[4], V_R14);
	UKT_EQ(ftt_after[5], V_R15);
}

/* ---- recording callbacks -------------------------------------------------------- */

static long hits;
static unsigned long last_ip, last_parent;
static struct pt_regs *last_regs_ptr;
static struct pt_regs seen;	/* *regs as the callback got it */
static unsigned long seen_ret, seen_above;	/* ((long *)regs->sp)[0], [1] */
static unsigned long seen_arg6, seen_arg7;

static void rec_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		   struct pt_regs *regs)
{
	(void)op;
	hits++;
	last_ip = ip;
	last_parent = parent_ip;
	last_regs_ptr = regs;
	if (regs) {
		seen = *regs;
		seen_ret = ((unsigned long *)regs->sp)[0];
		seen_above = ((unsigned long *)regs->sp)[1];
		seen_arg6 = regs_get_kernel_argument(regs, 6);
		seen_arg7 = regs_get_kernel_argument(regs, 7);
	}
}

static const long args6[6] = { 1, 2, 3, 4, 5, 6 };	/* sum6: 91 */

/* regs: exactly the traced thread's registers at the function's entry */
static void expect_seen_at_entry(void *fn)
{
	unsigned long ret = UL(ukt_label("ftt_call_regs_ret"));
	UKT_EQ(last_ip, UL(fn));
	UKT_EQ(last_parent, ret);
	UKT_EQ(seen.ip, UL(fn));
	UKT_EQ(seen.di, 1);
	UKT_EQ(seen.si, 2);
	UKT_EQ(seen.dx, 3);
	UKT_EQ(seen.cx, 4);
	UKT_EQ(seen.r8, 5);
	UKT_EQ(seen.r9, 6);
	UKT_EQ(seen.ax, V_AX);
	UKT_EQ(seen.bx, V_BX);
	UKT_EQ(seen.bp, V_BP);
	UKT_EQ(seen.r10, V_R10);
	UKT_EQ(seen.r11, V_R11);
	UKT_EQ(seen.r12, V_R12);
	UKT_EQ(seen.r13, V_R13);
	UKT_EQ(seen.r14, V_R14);
	UKT_EQ(seen.r15, V_R15);
	/* sp at the entry: the return address, then what the caller pushed */
	UKT_EQ(seen_ret, ret);
	UKT_EQ(seen_above, UL(fn));
	UKT_EQ(seen.sp & 15, 8);
}

/* ---- SAVE_REGS -------------------------------------------------------------------- */

#define REGS_NULL(p)							\
	struct ftrace_ops ops = { .func = rec_cb };			\
	UKT_EQ(set_f(&ops, S(p, add), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	last_regs_ptr = (void *)1;					\
	UKT_EQ(FT_CAT(p, add)(2, 3), 5);				\
	UKT_EQ(hits, 1);						\
	UKT_ASSERT(last_regs_ptr == NULL);
BOTH(regs_is_null_without_save_regs, REGS_NULL)

/* an ops without SAVE_REGS gets NULL even beside one that asked for regs */
static struct pt_regs *plain_got;
static long plain_hits;
static void plain_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		     struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op;
	plain_hits++;
	plain_got = regs;
}

#define REGS_ONLY_FOR_ASKER(p)						\
	struct ftrace_ops r = { .func = rec_cb, .flags = FTRACE_OPS_FL_SAVE_REGS }; \
	struct ftrace_ops n = { .func = plain_cb };			\
	UKT_EQ(set_f(&r, S(p, add), 1), 0);				\
	UKT_EQ(set_f(&n, S(p, add), 1), 0);				\
	UKT_EQ(register_ftrace_function(&n), 0);			\
	UKT_EQ(register_ftrace_function(&r), 0);			\
	plain_got = (void *)1;						\
	UKT_EQ(FT_CAT(p, add)(2, 3), 5);				\
	UKT_EQ(hits, 1);						\
	UKT_EQ(plain_hits, 1);						\
	UKT_ASSERT(last_regs_ptr != NULL);				\
	UKT_ASSERT(plain_got == NULL);					\
	UKT_EQ(seen.di, 2);
BOTH(regs_only_for_the_ops_that_asked, REGS_ONLY_FOR_ASKER)

#define SAVE_REGS_CONTENTS(p)						\
	struct ftrace_ops ops = { .func = rec_cb, .flags = FTRACE_OPS_FL_SAVE_REGS }; \
	UKT_EQ(set_f(&ops, S(p, sum6), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	UKT_EQ(ftt_call_regs((void *)FT_CAT(p, sum6), args6), 91);	\
	UKT_EQ(hits, 1);						\
	expect_seen_at_entry((void *)FT_CAT(p, sum6));			\
	expect_after_intact();
BOTH(save_regs_holds_every_register_at_entry, SAVE_REGS_CONTENTS)

#define SAVE_REGS_IF_SUPPORTED(p)					\
	struct ftrace_ops ops = { .func = rec_cb,			\
				  .flags = FTRACE_OPS_FL_SAVE_REGS_IF_SUPPORTED }; \
	UKT_EQ(set_f(&ops, S(p, sum6), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	UKT_EQ(ftt_call_regs((void *)FT_CAT(p, sum6), args6), 91);	\
	UKT_EQ(hits, 1);						\
	UKT_ASSERT(last_regs_ptr != NULL);				\
	expect_seen_at_entry((void *)FT_CAT(p, sum6));			\
	expect_after_intact();
BOTH(save_regs_if_supported_gives_regs, SAVE_REGS_IF_SUPPORTED)

/* the same registers when the callback is not the only one there */
#define SAVE_REGS_IN_LIST(p)						\
	struct ftrace_ops a = { .func = plain_cb };			\
	struct ftrace_ops ops = { .func = rec_cb, .flags = FTRACE_OPS_FL_SAVE_REGS }; \
	UKT_EQ(set_f(&a, S(p, sum6), 1), 0);				\
	UKT_EQ(set_f(&ops, S(p, sum6), 1), 0);				\
	UKT_EQ(register_ftrace_function(&a), 0);			\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	UKT_EQ(ftt_call_regs((void *)FT_CAT(p, sum6), args6), 91);	\
	UKT_EQ(hits, 1);						\
	UKT_EQ(plain_hits, 1);						\
	expect_seen_at_entry((void *)FT_CAT(p, sum6));			\
	expect_after_intact();
BOTH(save_regs_beside_another_ops, SAVE_REGS_IN_LIST)

/* without SAVE_REGS the callee-saved registers come through too */
#define NO_REGS_INTACT(p)						\
	struct ftrace_ops ops = { .func = plain_cb };			\
	UKT_EQ(set_f(&ops, S(p, sum6), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	UKT_EQ(ftt_call_regs((void *)FT_CAT(p, sum6), args6), 91);	\
	UKT_EQ(plain_hits, 1);						\
	expect_after_intact();
BOTH(no_save_regs_keeps_registers, NO_REGS_INTACT)

#define STACK_ARGS(p)							\
	struct ftrace_ops ops = { .func = rec_cb, .flags = FTRACE_OPS_FL_SAVE_REGS }; \
	UKT_EQ(set_f(&ops, S(p, sum8), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	UKT_EQ(FT_CAT(p, sum8)(1, 1, 1, 1, 1, 1, 70, 80), 21 + 490 + 640); \
	UKT_EQ(hits, 1);						\
	UKT_EQ(seen.di, 1);						\
	UKT_EQ(seen.r9, 1);						\
	UKT_EQ(seen_arg6, 70);						\
	UKT_EQ(seen_arg7, 80);						\
	UKT_EQ(seen_ret, last_parent);
BOTH(stack_arguments_through_regs_sp, STACK_ARGS)

/* ---- changing arguments ---------------------------------------------------------- */

static void args_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		    struct pt_regs *regs)
{
	(void)parent_ip; (void)op;
	hits++;
	if (ip == UL(fe_add) || ip == UL(pf_add)) {
		regs->di = 100;
		regs->si = 23;
	} else {	/* sum6 */
		regs->dx = 30;
		regs->r8 = 50;
		regs->r9 = 60;
	}
}

#define CHANGE_ARGS(p)							\
	struct ftrace_ops ops = { .func = args_cb, .flags = FTRACE_OPS_FL_SAVE_REGS }; \
	UKT_EQ(set_f(&ops, S(p, add) " " S(p, sum6), 1), 0);		\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	UKT_EQ(FT_CAT(p, add)(1, 2), 123);				\
	UKT_EQ(FT_CAT(p, sum6)(1, 1, 1, 1, 1, 1), 1 + 2 + 90 + 4 + 250 + 360); \
	UKT_EQ(FT_CAT(p, mul)(3, 4), 12);	/* not traced */	\
	UKT_EQ(hits, 2);						\
	UKT_EQ(unregister_ftrace_function(&ops), 0);			\
	UKT_EQ(FT_CAT(p, add)(1, 2), 3);				\
	UKT_EQ(hits, 2);
BOTH(changing_argument_registers_changes_the_call, CHANGE_ARGS)

/* a later SAVE_REGS callback sees what an earlier one changed */
static void times10_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		       struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op;
	regs->di *= 10;
}

#define CHANGE_SEEN_BY_NEXT(p)						\
	struct ftrace_ops a = { .func = times10_cb, .flags = FTRACE_OPS_FL_SAVE_REGS }; \
	struct ftrace_ops b = { .func = rec_cb, .flags = FTRACE_OPS_FL_SAVE_REGS }; \
	UKT_EQ(set_f(&a, S(p, add), 1), 0);				\
	UKT_EQ(set_f(&b, S(p, add), 1), 0);				\
	UKT_EQ(register_ftrace_function(&a), 0);			\
	UKT_EQ(register_ftrace_function(&b), 0);			\
	UKT_EQ(FT_CAT(p, add)(4, 5), 45);				\
	UKT_EQ(hits, 1);						\
	UKT_EQ(seen.di, 40);
BOTH(argument_change_is_seen_by_the_next_callback, CHANGE_SEEN_BY_NEXT)

/* ---- IPMODIFY ---------------------------------------------------------------------- */

static unsigned long redirect_from, redirect_to;
static long from_hits, to_hits;
static unsigned long from_parent, to_parent;

static void redirect_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
			struct pt_regs *regs)
{
	(void)op;
	if (ip == redirect_from) {
		from_hits++;
		from_parent = parent_ip;
		UKT_EQ(regs->ip, ip);
		regs->ip = redirect_to;
	} else if (ip == redirect_to) {
		to_hits++;
		to_parent = parent_ip;
	}
}

#define IPM (FTRACE_OPS_FL_SAVE_REGS | FTRACE_OPS_FL_IPMODIFY)

#define IPMODIFY_REDIRECT(p)						\
	struct ftrace_ops ops = { .func = redirect_cb, .flags = IPM };	\
	redirect_from = UL(FT_CAT(p, add));				\
	redirect_to = UL(FT_CAT(p, add_alt));				\
	UKT_EQ(set_f(&ops, S(p, add), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	for (int i = 0; i < 100; i++)					\
		UKT_EQ(FT_CAT(p, add)(i, 3), i - 3);			\
	UKT_EQ(FT_CAT(p, chain)(10), 18);	/* (10 - 1) * 2: called from traced code */ \
	UKT_EQ(FT_CAT(p, add_alt)(10, 3), 7);				\
	UKT_EQ(from_hits, 101);						\
	UKT_EQ(to_hits, 0);	/* not traced */			\
	UKT_EQ(unregister_ftrace_function(&ops), 0);			\
	UKT_EQ(FT_CAT(p, add)(7, 3), 10);				\
	UKT_EQ(from_hits, 101);
BOTH(ipmodify_redirects_the_call, IPMODIFY_REDIRECT)

/* the redirected call enters the new function as a call: its own patch
 * site runs with the original caller as parent */
#define IPMODIFY_INTO_TRACED(p)						\
	struct ftrace_ops ops = { .func = redirect_cb, .flags = IPM };	\
	redirect_from = UL(FT_CAT(p, add));				\
	redirect_to = UL(FT_CAT(p, add_alt));				\
	UKT_EQ(set_f(&ops, S(p, add) " " S(p, add_alt), 1), 0);	\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	UKT_EQ(FT_CAT(p, add)(30, 4), 26);				\
	UKT_EQ(from_hits, 1);						\
	UKT_EQ(to_hits, 1);						\
	UKT_EQ(to_parent, from_parent);					\
	UKT_EQ(FT_CAT(p, chain)(10), 18);				\
	UKT_EQ(from_hits, 2);						\
	UKT_EQ(to_hits, 2);						\
	UKT_ASSERT(from_parent > UL(FT_CAT(p, chain)) &&		\
		   from_parent < UL(FT_CAT(p, chain)) + 32);		\
	UKT_EQ(to_parent, from_parent);
BOTH(ipmodify_redirect_into_a_traced_function, IPMODIFY_INTO_TRACED)

/* redirect to the other build's function: a site still made of nops, or
 * one that was a call */
UKT_CASE(ipmodify_redirect_across_kinds_of_sites)
{
	struct ftrace_ops ops = { .func = redirect_cb, .flags = IPM };
	redirect_from = UL(fe_add);
	redirect_to = UL(pf_add_alt);
	UKT_EQ(set_f(&ops, "fe_add", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	UKT_EQ(fe_add(9, 4), 5);
	UKT_EQ(unregister_ftrace_function(&ops), 0);
	redirect_from = UL(pf_add);
	redirect_to = UL(fe_add_alt);
	UKT_EQ(set_f(&ops, "pf_add", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	UKT_EQ(pf_add(9, 4), 5);
	UKT_EQ(from_hits, 2);
}

/* both: new arguments and a new function */
static void redirect_args_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
			     struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op;
	hits++;
	regs->si = 1000;
	regs->ip = redirect_to;
}

#define IPMODIFY_WITH_ARGS(p)						\
	struct ftrace_ops ops = { .func = redirect_args_cb, .flags = IPM }; \
	redirect_to = UL(FT_CAT(p, mul));				\
	UKT_EQ(set_f(&ops, S(p, add), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	UKT_EQ(FT_CAT(p, add)(3, 4), 3000);				\
	UKT_EQ(hits, 1);
BOTH(ipmodify_redirect_with_changed_arguments, IPMODIFY_WITH_ARGS)

UKT_CASE(ipmodify_that_leaves_ip_alone_changes_nothing)
{
	struct ftrace_ops ops = { .func = rec_cb, .flags = IPM };
	UKT_EQ(set_f(&ops, "fe_add pf_add", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	UKT_EQ(fe_add(3, 4), 7);
	UKT_EQ(pf_add(3, 4), 7);
	UKT_EQ(hits, 2);
}

UKT_CASE(ipmodify_with_save_regs_if_supported)
{
	struct ftrace_ops ops = { .func = redirect_cb,
				  .flags = FTRACE_OPS_FL_SAVE_REGS_IF_SUPPORTED | FTRACE_OPS_FL_IPMODIFY };
	redirect_from = UL(fe_add);
	redirect_to = UL(fe_add_alt);
	UKT_EQ(set_f(&ops, "fe_add", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	UKT_EQ(fe_add(8, 3), 5);
	UKT_EQ(from_hits, 1);
}

UKT_CASE(ipmodify_without_save_regs_is_einval)
{
	struct ftrace_ops ops = { .func = redirect_cb, .flags = FTRACE_OPS_FL_IPMODIFY };
	redirect_from = UL(fe_add);
	redirect_to = UL(fe_add_alt);
	UKT_EQ(set_f(&ops, "fe_add", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), -EINVAL);
	UKT_EQ(ops.flags, FTRACE_OPS_FL_IPMODIFY);	/* not ENABLED */
	UKT_EQ(fe_add(8, 3), 11);
	UKT_EQ(from_hits, 0);
	UKT_EQ(unregister_ftrace_function(&ops), -EINVAL);	/* never registered */
}

#define NON_IPMODIFY_IGNORED(p)						\
	struct ftrace_ops ops = { .func = redirect_cb, .flags = FTRACE_OPS_FL_SAVE_REGS }; \
	redirect_from = UL(FT_CAT(p, add));				\
	redirect_to = UL(FT_CAT(p, add_alt));				\
	UKT_EQ(set_f(&ops, S(p, add), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	UKT_EQ(FT_CAT(p, add)(7, 3), 10);				\
	UKT_EQ(FT_CAT(p, add)(1, 1), 2);				\
	UKT_EQ(from_hits, 2);
BOTH(ip_change_without_ipmodify_is_ignored, NON_IPMODIFY_IGNORED)

/* an ops without IPMODIFY cannot undo or override one that has it */
static void to_mul_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		      struct pt_regs *regs)
{
	(void)parent_ip; (void)op;
	hits++;
	if (ip == redirect_from)
		regs->ip = UL(fe_mul);
}

UKT_CASE(ipmodify_wins_over_other_ops_either_order)
{
	for (int order = 0; order < 2; order++) {
		struct ftrace_ops a = { .func = redirect_cb, .flags = IPM };
		struct ftrace_ops b = { .func = to_mul_cb, .flags = FTRACE_OPS_FL_SAVE_REGS };
		redirect_from = UL(fe_add);
		redirect_to = UL(fe_add_alt);
		from_hits = hits = 0;
		UKT_EQ(set_f(&a, "fe_add", 1), 0);
		UKT_EQ(set_f(&b, "fe_add", 1), 0);
		UKT_EQ(register_ftrace_function(order ? &b : &a), 0);
		UKT_EQ(register_ftrace_function(order ? &a : &b), 0);
		UKT_EQ(fe_add(20, 6), 14);
		UKT_EQ(from_hits, 1);
		UKT_EQ(hits, 1);
		UKT_EQ(unregister_ftrace_function(&a), 0);
		UKT_EQ(fe_add(20, 6), 26);	/* b alone: ignored */
		UKT_EQ(hits, 2);
		UKT_EQ(unregister_ftrace_function(&b), 0);
	}
}

UKT_CASE(second_ipmodify_on_a_function_is_ebusy_at_register)
{
	struct ftrace_ops a = { .func = redirect_cb, .flags = IPM };
	struct ftrace_ops b = { .func = rec_cb, .flags = IPM };
	struct ftrace_ops all = { .func = rec_cb, .flags = IPM };
	redirect_from = UL(fe_add);
	redirect_to = UL(fe_add_alt);
	UKT_EQ(set_f(&a, "fe_add", 1), 0);
	UKT_EQ(register_ftrace_function(&a), 0);
	UKT_EQ(set_f(&b, "fe_a*", 1), 0);	/* overlaps in fe_add */
	UKT_EQ(register_ftrace_function(&b), -EBUSY);
	UKT_EQ(b.flags, IPM);			/* not ENABLED */
	UKT_EQ(register_ftrace_function(&all), -EBUSY);	/* no filter: every function */
	UKT_EQ(fe_add(5, 1), 4);		/* a alone */
	UKT_EQ(fe_add_alt(5, 1), 4);
	UKT_EQ(hits, 0);
	UKT_EQ(from_hits, 1);
	UKT_EQ(unregister_ftrace_function(&b), -EINVAL);
	/* a non-IPMODIFY ops on the same function is fine */
	struct ftrace_ops c = { .func = plain_cb, .flags = FTRACE_OPS_FL_SAVE_REGS };
	UKT_EQ(set_f(&c, "fe_add", 1), 0);
	UKT_EQ(register_ftrace_function(&c), 0);
	UKT_EQ(fe_add(5, 1), 4);
	UKT_EQ(plain_hits, 1);
	/* once a is gone, b may */
	UKT_EQ(unregister_ftrace_function(&a), 0);
	UKT_EQ(register_ftrace_function(&b), 0);
	UKT_EQ(fe_add(5, 1), 6);
	UKT_EQ(hits, 1);
}

UKT_CASE(disjoint_ipmodify_ops_both_register)
{
	struct ftrace_ops a = { .func = redirect_cb, .flags = IPM };
	struct ftrace_ops b = { .func = redirect_args_cb, .flags = IPM };
	redirect_from = UL(fe_add);
	redirect_to = UL(fe_mul);
	UKT_EQ(set_f(&a, "fe_add", 1), 0);
	UKT_EQ(set_f(&b, "pf_add", 1), 0);
	UKT_EQ(register_ftrace_function(&a), 0);
	UKT_EQ(register_ftrace_function(&b), 0);
	UKT_EQ(fe_add(5, 6), 30);	/* a: to fe_mul */
	UKT_EQ(pf_add(5, 6), 5000);	/* b: si = 1000, to fe_mul */
	UKT_EQ(from_hits, 1);
	UKT_EQ(hits, 1);
}

UKT_CASE(second_ipmodify_is_ebusy_at_filter_change)
{
	struct ftrace_ops a = { .func = redirect_cb, .flags = IPM };
	struct ftrace_ops b = { .func = rec_cb, .flags = IPM };
	redirect_from = UL(fe_add);
	redirect_to = UL(fe_add_alt);
	UKT_EQ(set_f(&a, "fe_add", 1), 0);
	UKT_EQ(set_f(&b, "fe_mul", 1), 0);
	UKT_EQ(register_ftrace_function(&a), 0);
	UKT_EQ(register_ftrace_function(&b), 0);
	UKT_EQ(set_f(&b, "fe_add", 0), -EBUSY);
	UKT_EQ(set_f(&b, "fe_add", 1), -EBUSY);
	UKT_EQ(set_f(&b, "fe_*", 1), -EBUSY);
	UKT_EQ(ftrace_set_filter(&b, NULL, 0, 1), -EBUSY);	/* would be every function */
	UKT_EQ(ftrace_set_filter_ip(&b, UL(fe_add), 0, 0), -EBUSY);
	UKT_EQ(ftrace_set_filter_ip(&b, UL(fe_add), 0, 1), -EBUSY);
	/* b's filter is still fe_mul alone */
	UKT_EQ(fe_add(5, 1), 4);
	UKT_EQ(hits, 0);
	UKT_EQ(fe_mul(5, 2), 10);
	UKT_EQ(hits, 1);
	UKT_EQ(last_ip, UL(fe_mul));
	UKT_EQ(fe_sum6(1, 1, 1, 1, 1, 1), 21);
	UKT_EQ(hits, 1);
	/* and the other way: a may not take b's function either */
	UKT_EQ(set_f(&a, "fe_mul", 0), -EBUSY);
	UKT_EQ(fe_mul(5, 2), 10);
	UKT_EQ(from_hits, 1);
	UKT_EQ(hits, 2);
}

UKT_CASE(second_ipmodify_is_ebusy_when_notrace_shrinks)
{
	struct ftrace_ops a = { .func = redirect_cb, .flags = IPM };
	struct ftrace_ops b = { .func = rec_cb, .flags = IPM };
	redirect_from = UL(fe_add);
	redirect_to = UL(fe_add_alt);
	UKT_EQ(set_f(&a, "fe_add", 1), 0);
	UKT_EQ(register_ftrace_function(&a), 0);
	unsigned char nt[] = "fe_add";
	UKT_EQ(ftrace_set_notrace(&b, nt, 6, 1), 0);	/* b: all but fe_add */
	UKT_EQ(register_ftrace_function(&b), 0);
	UKT_EQ(ftrace_set_notrace(&b, NULL, 0, 1), -EBUSY);
	unsigned char other[] = "fe_mul";
	UKT_EQ(ftrace_set_notrace(&b, other, 6, 1), -EBUSY);
	/* b still leaves fe_add alone (it sees the call a moved to fe_add_alt) */
	UKT_EQ(fe_add(5, 1), 4);
	UKT_EQ(from_hits, 1);
	UKT_EQ(hits, 1);
	UKT_EQ(last_ip, UL(fe_add_alt));
	UKT_EQ(fe_mul(5, 1), 5);
	UKT_EQ(hits, 2);
	UKT_EQ(last_ip, UL(fe_mul));
}

/* ---- errno ---------------------------------------------------------------------------- */

static void errno_gpr_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
			 struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op; (void)regs;
	hits++;
	errno = 99;
}

static void errno_libc_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
			  struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op; (void)regs;
	hits++;
	UKT_EQ(close(-1), -1);	/* EBADF */
	UKT_EQ(errno, EBADF);
}

static void expect_errno_kept(int (*f)(void), long want_hits)
{
	errno = 4321;
	UKT_EQ(f(), 4321);
	UKT_EQ(errno, 4321);
	errno = 0;
	UKT_EQ(f(), 0);
	UKT_EQ(errno, 0);
	UKT_EQ(hits, want_hits);
}

#define ERRNO_ONE(p, cb, fl)						\
	struct ftrace_ops ops = { .func = cb, .flags = fl };		\
	UKT_EQ(set_f(&ops, S(p, errno_keep), 1), 0);			\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	expect_errno_kept(FT_CAT(p, errno_keep), 2);

#define ERRNO_GPR(p) ERRNO_ONE(p, errno_gpr_cb, 0)
#define ERRNO_LIBC(p) ERRNO_ONE(p, errno_libc_cb, 0)
#define ERRNO_REGS(p) ERRNO_ONE(p, errno_gpr_cb, FTRACE_OPS_FL_SAVE_REGS)
#define ERRNO_REGS_LIBC(p) ERRNO_ONE(p, errno_libc_cb, FTRACE_OPS_FL_SAVE_REGS)
#define ERRNO_RECURSION(p) ERRNO_ONE(p, errno_gpr_cb, FTRACE_OPS_FL_RECURSION)
BOTH(errno_kept_callback_sets_errno, ERRNO_GPR)
BOTH(errno_kept_callback_calls_libc, ERRNO_LIBC)
BOTH(errno_kept_save_regs_callback, ERRNO_REGS)
BOTH(errno_kept_save_regs_callback_calls_libc, ERRNO_REGS_LIBC)
BOTH(errno_kept_recursion_flag, ERRNO_RECURSION)

#define ERRNO_TWO(p)							\
	struct ftrace_ops a = { .func = errno_gpr_cb };			\
	struct ftrace_ops b = { .func = errno_libc_cb };		\
	UKT_EQ(set_f(&a, S(p, errno_keep), 1), 0);			\
	UKT_EQ(set_f(&b, S(p, errno_keep), 1), 0);			\
	UKT_EQ(register_ftrace_function(&a), 0);			\
	UKT_EQ(register_ftrace_function(&b), 0);			\
	expect_errno_kept(FT_CAT(p, errno_keep), 4);
BOTH(errno_kept_two_callbacks, ERRNO_TWO)

/* ---- vector state ---------------------------------------------------------------------- */

static volatile double fp_sink;

static void fp_math_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		       struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op; (void)regs;
	hits++;
	double x = fp_sink, y = 0.7;
	for (int i = 0; i < 8; i++) {
		y = y * 1.0001 + x;
		x = x * 0.5 - y;
	}
	fp_sink = x + y;
}

static void xmm_clobber_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
			   struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op; (void)regs;
	hits++;
	__asm__ volatile("pcmpeqd %%xmm0, %%xmm0\n\t"
			 "pcmpeqd %%xmm1, %%xmm1\n\t"
			 "pcmpeqd %%xmm2, %%xmm2\n\t"
			 "pcmpeqd %%xmm3, %%xmm3\n\t"
			 "pcmpeqd %%xmm4, %%xmm4\n\t"
			 "pcmpeqd %%xmm5, %%xmm5\n\t"
			 "pcmpeqd %%xmm6, %%xmm6\n\t"
			 "pcmpeqd %%xmm7, %%xmm7"
			 ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7");
}

static double (*volatile libm_fn)(double) = sqrt;
static void libm_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		    struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op; (void)regs;
	hits++;
	fp_sink = libm_fn(fp_sink + 2.0);
	char buf[64];
	snprintf(buf, sizeof(buf), "%f", fp_sink);
}

static void rounding_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
			struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op; (void)regs;
	hits++;
	fesetround(FE_UPWARD);		/* and not put back */
}

/* 0.1 * 0.3 + 0.7 depends on the rounding mode; the reference is this
 * process's own result before anything is traced */
#define FMA_CHECK(p, cb, fl)						\
	volatile double a = 0.1, b = 0.3, c = 0.7;			\
	double want = FT_CAT(p, fma3)(a, b, c);				\
	struct ftrace_ops ops = { .func = cb, .flags = fl };		\
	UKT_EQ(set_f(&ops, S(p, fma3), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	for (int i = 0; i < 10; i++) {					\
		double got = FT_CAT(p, fma3)(a, b, c);			\
		if (got != want)					\
			UKT_FAIL("fma3 = %.17g, want %.17g", got, want); \
		UKT_EQ(fegetround(), FE_TONEAREST);			\
	}								\
	UKT_ASSERT(FT_CAT(p, fma3)(1.5, 2.0, 0.25) == 3.25);		\
	UKT_EQ(hits, 11);

#define FMA_MATH(p) FMA_CHECK(p, fp_math_cb, 0)
#define FMA_CLOBBER(p) FMA_CHECK(p, xmm_clobber_cb, 0)
#define FMA_LIBM(p) FMA_CHECK(p, libm_cb, 0)
#define FMA_ROUNDING(p) FMA_CHECK(p, rounding_cb, 0)
#define FMA_REGS_MATH(p) FMA_CHECK(p, fp_math_cb, FTRACE_OPS_FL_SAVE_REGS)
#define FMA_REGS_CLOBBER(p) FMA_CHECK(p, xmm_clobber_cb, FTRACE_OPS_FL_SAVE_REGS)
#define FMA_RECURSION_CLOBBER(p) FMA_CHECK(p, xmm_clobber_cb, FTRACE_OPS_FL_RECURSION)
BOTH(double_args_kept_callback_uses_floating_point, FMA_MATH)
BOTH(double_args_kept_callback_clobbers_xmm0_7, FMA_CLOBBER)
BOTH(double_args_kept_callback_calls_libm_and_printf, FMA_LIBM)
BOTH(rounding_mode_kept_callback_changes_it, FMA_ROUNDING)
BOTH(double_args_kept_save_regs_callback_uses_floating_point, FMA_REGS_MATH)
BOTH(double_args_kept_save_regs_callback_clobbers_xmm, FMA_REGS_CLOBBER)
BOTH(double_args_kept_recursion_flag_callback_clobbers_xmm, FMA_RECURSION_CLOBBER)

/* the vector state is kept in a list of several callbacks too */
#define FMA_TWO(p)							\
	volatile double a = 0.1, b = 0.3, c = 0.7;			\
	double want = FT_CAT(p, fma3)(a, b, c);				\
	struct ftrace_ops x = { .func = plain_cb };			\
	struct ftrace_ops y = { .func = xmm_clobber_cb };		\
	UKT_EQ(set_f(&x, S(p, fma3), 1), 0);				\
	UKT_EQ(set_f(&y, S(p, fma3), 1), 0);				\
	UKT_EQ(register_ftrace_function(&x), 0);			\
	UKT_EQ(register_ftrace_function(&y), 0);			\
	UKT_ASSERT(FT_CAT(p, fma3)(a, b, c) == want);			\
	UKT_EQ(hits, 1);						\
	UKT_EQ(plain_hits, 1);
BOTH(double_args_kept_two_callbacks, FMA_TWO)

/* ---- kprobes on patch sites ---------------------------------------------------------- */

static long kp_pre, kp_post;
static struct pt_regs kp_seen, kp_post_seen;
static unsigned long kp_ret;
static char kp_order[32];
static unsigned long kp_redirect;

static int kpre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	kp_pre++;
	kp_seen = *regs;
	kp_ret = *(unsigned long *)regs->sp;
	strcat(kp_order, "e");
	if (kp_redirect) {
		regs->ip = kp_redirect;
		return 1;
	}
	return 0;
}

static void kpost(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	(void)p; (void)flags;
	kp_post++;
	kp_post_seen = *regs;
	strcat(kp_order, "o");
}

static void expect_kprobes_list(const char *want)
{
	char buf[512];
	ukt_list_to(buf, sizeof(buf));
	UKT_STREQ(buf, want);
}

#define KPROBE_ON_SITE(p)						\
	struct kprobe kp = { .symbol_name = S(p, sum6), .pre_handler = kpre }; \
	UKT_EQ(register_kprobe(&kp), 0);				\
	UKT_EQ(UL(kp.addr), UL(FT_CAT(p, sum6)));			\
	UKT_EQ(ukt_probe_flags(&kp), KPROBE_FLAG_FTRACE);		\
	char want[128];							\
	snprintf(want, sizeof(want), "%016lx  k  " S(p, sum6) "+0x0 [FTRACE]\n", \
		 UL(FT_CAT(p, sum6)));					\
	expect_kprobes_list(want);					\
	UKT_EQ(ftt_call_regs((void *)FT_CAT(p, sum6), args6), 91);	\
	UKT_EQ(kp_pre, 1);						\
	expect_after_intact();						\
	UKT_EQ(kp_seen.ip, UL(FT_CAT(p, sum6)));			\
	UKT_EQ(kp_seen.di, 1);						\
	UKT_EQ(kp_seen.r9, 6);						\
	UKT_EQ(kp_seen.bx, V_BX);					\
	UKT_EQ(kp_seen.r11, V_R11);					\
	UKT_EQ(kp_seen.r15, V_R15);					\
	UKT_EQ(kp_ret, UL(ukt_label("ftt_call_regs_ret")));		\
	UKT_EQ(FT_CAT(p, sum6)(1, 1, 1, 1, 1, 1), 21);			\
	UKT_EQ(kp_pre, 2);						\
	unregister_kprobe(&kp);						\
	UKT_EQ(FT_CAT(p, sum6)(1, 1, 1, 1, 1, 1), 21);			\
	UKT_EQ(kp_pre, 2);						\
	expect_kprobes_list("");
BOTH(kprobe_on_patch_site_runs_through_ftrace, KPROBE_ON_SITE)

#define KPROBE_POST(p)							\
	struct kprobe kp = { .addr = (void *)FT_CAT(p, add), .pre_handler = kpre, \
			     .post_handler = kpost };			\
	UKT_EQ(register_kprobe(&kp), 0);				\
	UKT_EQ(ukt_probe_flags(&kp), KPROBE_FLAG_FTRACE);		\
	char want[128];							\
	snprintf(want, sizeof(want), "%016lx  k  " S(p, add) "+0x0 [FTRACE]\n", \
		 UL(FT_CAT(p, add)));					\
	expect_kprobes_list(want);					\
	UKT_EQ(FT_CAT(p, add)(2, 3), 5);				\
	UKT_EQ(kp_pre, 1);						\
	UKT_EQ(kp_post, 1);						\
	UKT_STREQ(kp_order, "eo");					\
	UKT_EQ(kp_seen.ip, UL(FT_CAT(p, add)));				\
	UKT_EQ(kp_post_seen.ip, UL(FT_CAT(p, add)) + 5);		\
	UKT_EQ(kp_post_seen.di, 2);					\
	UKT_EQ(FT_CAT(p, add)(4, 3), 7);				\
	UKT_EQ(kp_post, 2);						\
	unregister_kprobe(&kp);
BOTH(kprobe_post_handler_on_patch_site, KPROBE_POST)

#define KPROBE_REDIRECT(p)						\
	struct kprobe kp = { .symbol_name = S(p, add), .pre_handler = kpre, \
			     .post_handler = kpost };			\
	kp_redirect = UL(FT_CAT(p, add_alt));				\
	UKT_EQ(register_kprobe(&kp), 0);				\
	UKT_EQ(FT_CAT(p, add)(10, 3), 7);				\
	UKT_EQ(kp_pre, 1);						\
	UKT_EQ(kp_post, 0);	/* not after a redirect */		\
	unregister_kprobe(&kp);						\
	UKT_EQ(FT_CAT(p, add)(10, 3), 13);
BOTH(kprobe_pre_handler_redirect_on_patch_site, KPROBE_REDIRECT)

static int kpre_args(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	kp_pre++;
	regs->di = 40;
	return 0;
}

#define KPROBE_ARGS(p)							\
	struct kprobe kp = { .symbol_name = S(p, add), .pre_handler = kpre_args }; \
	UKT_EQ(register_kprobe(&kp), 0);				\
	UKT_EQ(FT_CAT(p, add)(2, 3), 43);				\
	UKT_EQ(kp_pre, 1);
BOTH(kprobe_pre_handler_changes_arguments_on_patch_site, KPROBE_ARGS)

#define KPROBE_INSIDE(p)						\
	for (unsigned k = 1; k < 5; k++) {				\
		struct kprobe a = { .addr = (kprobe_opcode_t *)FT_CAT(p, mul) + k, \
				    .pre_handler = kpre };		\
		UKT_EQ(register_kprobe(&a), -EILSEQ);			\
		struct kprobe b = { .symbol_name = S(p, mul), .offset = k, \
				    .pre_handler = kpre };		\
		UKT_EQ(register_kprobe(&b), -EILSEQ);			\
	}								\
	expect_kprobes_list("");					\
	UKT_EQ(FT_CAT(p, mul)(3, 5), 15);				\
	UKT_EQ(kp_pre, 0);
BOTH(kprobe_inside_patch_site_is_eilseq, KPROBE_INSIDE)

UKT_CASE(kprobe_just_after_patch_site_is_ordinary)
{
	struct kprobe kp = { .symbol_name = "pf_add", .offset = 5, .pre_handler = kpre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(UL(kp.addr), UL(pf_add) + 5);
	UKT_EQ(ukt_probe_flags(&kp) & KPROBE_FLAG_FTRACE, 0);
	UKT_EQ(pf_add(2, 3), 5);
	UKT_EQ(kp_pre, 1);
	UKT_EQ(kp_seen.ip, UL(pf_add) + 5);
	UKT_EQ(kp_seen.di, 2);
	unregister_kprobe(&kp);
}

static char *enabled_list(int *n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	UKT_ASSERT(f);
	*n = ftrace_enabled_functions(f);
	UKT_EQ(fclose(f), 0);
	return buf;
}

#define KPROBE_AND_OPS(p)						\
	struct kprobe kp = { .symbol_name = S(p, add), .pre_handler = kpre }; \
	struct ftrace_ops ops = { .func = plain_cb };			\
	UKT_EQ(set_f(&ops, S(p, add), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	UKT_EQ(register_kprobe(&kp), 0);				\
	UKT_EQ(ukt_probe_flags(&kp), KPROBE_FLAG_FTRACE);		\
	UKT_EQ(FT_CAT(p, add)(2, 3), 5);				\
	UKT_EQ(kp_pre, 1);						\
	UKT_EQ(plain_hits, 1);						\
	char want[128];							\
	int n;								\
	char *l = enabled_list(&n);					\
	snprintf(want, sizeof(want), "%016lx  " S(p, add) " (2) R K\n", UL(FT_CAT(p, add))); \
	UKT_EQ(n, 1);							\
	UKT_STREQ(l, want);						\
	free(l);							\
	unregister_kprobe(&kp);						\
	l = enabled_list(&n);						\
	snprintf(want, sizeof(want), "%016lx  " S(p, add) " (1)\n", UL(FT_CAT(p, add))); \
	UKT_EQ(n, 1);							\
	UKT_STREQ(l, want);						\
	free(l);							\
	UKT_EQ(FT_CAT(p, add)(2, 3), 5);				\
	UKT_EQ(kp_pre, 1);						\
	UKT_EQ(plain_hits, 2);						\
	kp.addr = NULL;		/* as registration resolved it */	\
	kp.flags = 0;							\
	UKT_EQ(register_kprobe(&kp), 0);				\
	UKT_EQ(unregister_ftrace_function(&ops), 0);			\
	l = enabled_list(&n);						\
	snprintf(want, sizeof(want), "%016lx  " S(p, add) " (1) R K\n", UL(FT_CAT(p, add))); \
	UKT_EQ(n, 1);							\
	UKT_STREQ(l, want);						\
	free(l);							\
	UKT_EQ(FT_CAT(p, add)(2, 3), 5);				\
	UKT_EQ(kp_pre, 2);						\
	UKT_EQ(plain_hits, 2);						\
	unregister_kprobe(&kp);						\
	l = enabled_list(&n);						\
	UKT_EQ(n, 0);							\
	UKT_STREQ(l, "");						\
	free(l);
BOTH(kprobe_and_ftrace_ops_on_one_function, KPROBE_AND_OPS)

#define KPROBE_DISABLED(p)						\
	struct kprobe kp = { .symbol_name = S(p, add), .pre_handler = kpre, \
			     .flags = KPROBE_FLAG_DISABLED };		\
	UKT_EQ(register_kprobe(&kp), 0);				\
	UKT_EQ(ukt_probe_flags(&kp), KPROBE_FLAG_DISABLED | KPROBE_FLAG_FTRACE); \
	UKT_EQ(FT_CAT(p, add)(2, 3), 5);				\
	UKT_EQ(kp_pre, 0);						\
	UKT_EQ(enable_kprobe(&kp), 0);					\
	UKT_EQ(FT_CAT(p, add)(2, 3), 5);				\
	UKT_EQ(kp_pre, 1);						\
	UKT_EQ(disable_kprobe(&kp), 0);					\
	UKT_EQ(FT_CAT(p, add)(2, 3), 5);				\
	UKT_EQ(kp_pre, 1);						\
	UKT_EQ(kprobes_set_enabled(1), 0);				\
	UKT_EQ(enable_kprobe(&kp), 0);					\
	UKT_EQ(kprobes_set_enabled(0), 0);				\
	UKT_EQ(FT_CAT(p, add)(2, 3), 5);				\
	UKT_EQ(kp_pre, 1);						\
	UKT_EQ(kprobes_set_enabled(1), 0);				\
	UKT_EQ(FT_CAT(p, add)(2, 3), 5);				\
	UKT_EQ(kp_pre, 2);
BOTH(kprobe_on_patch_site_disable_enable, KPROBE_DISABLED)

static int kp2_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p; (void)regs;
	strcat(kp_order, "2");
	return 0;
}

#define TWO_KPROBES(p)							\
	struct kprobe a = { .symbol_name = S(p, mul), .pre_handler = kpre }; \
	struct kprobe b = { .symbol_name = S(p, mul), .pre_handler = kp2_pre }; \
	UKT_EQ(register_kprobe(&a), 0);					\
	UKT_EQ(register_kprobe(&b), 0);					\
	UKT_EQ(FT_CAT(p, mul)(3, 3), 9);				\
	UKT_STREQ(kp_order, "e2");					\
	unregister_kprobe(&a);						\
	UKT_EQ(FT_CAT(p, mul)(3, 3), 9);				\
	UKT_STREQ(kp_order, "e22");
BOTH(two_kprobes_on_one_patch_site, TWO_KPROBES)

static long kret_hits;
static unsigned long kret_val;
static int kret_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	kret_hits++;
	kret_val = regs_return_value(regs);
	return 0;
}

#define KRETPROBE_ON_SITE(p)						\
	struct kretprobe rp = { .kp.symbol_name = S(p, add), .handler = kret_handler }; \
	UKT_EQ(register_kretprobe(&rp), 0);				\
	UKT_EQ(ukt_probe_flags(&rp.kp) & KPROBE_FLAG_FTRACE, KPROBE_FLAG_FTRACE); \
	UKT_EQ(FT_CAT(p, add)(20, 3), 23);				\
	UKT_EQ(kret_hits, 1);						\
	UKT_EQ(kret_val, 23);						\
	UKT_EQ(FT_CAT(p, chain)(4), 10);				\
	UKT_EQ(kret_hits, 2);						\
	UKT_EQ(kret_val, 5);						\
	unregister_kretprobe(&rp);					\
	UKT_EQ(FT_CAT(p, add)(20, 3), 23);				\
	UKT_EQ(kret_hits, 2);
BOTH(kretprobe_on_patch_site, KRETPROBE_ON_SITE)

/*
 * A kprobe on a function an IPMODIFY ops redirects (live patching): the
 * kernel either refuses one of the two (-EBUSY) or runs both; a kprobe
 * must never silently undo the redirect.
 */
#define KPROBE_ON_PATCHED(p, post)					\
	struct ftrace_ops ops = { .func = redirect_cb, .flags = IPM };	\
	redirect_from = UL(FT_CAT(p, add));				\
	redirect_to = UL(FT_CAT(p, add_alt));				\
	UKT_EQ(set_f(&ops, S(p, add), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	UKT_EQ(FT_CAT(p, add)(7, 3), 4);				\
	struct kprobe kp = { .symbol_name = S(p, add), .pre_handler = kpre, \
			     .post_handler = post };			\
	int r = register_kprobe(&kp);					\
	if (r == 0) {							\
		UKT_EQ(FT_CAT(p, add)(7, 3), 4);			\
		UKT_EQ(kp_pre, 1);					\
		UKT_EQ(from_hits, 2);					\
		unregister_kprobe(&kp);					\
	} else {							\
		UKT_EQ(r, -EBUSY);					\
	}								\
	UKT_EQ(FT_CAT(p, add)(7, 3), 4);
#define KPROBE_ON_PATCHED_PRE(p) KPROBE_ON_PATCHED(p, NULL)
#define KPROBE_ON_PATCHED_POST(p) KPROBE_ON_PATCHED(p, kpost)
BOTH(kprobe_on_an_ipmodify_redirected_function_pre_only, KPROBE_ON_PATCHED_PRE)
BOTH(kprobe_on_an_ipmodify_redirected_function_with_post, KPROBE_ON_PATCHED_POST)

/* the other order: the kprobe first, then the live patch */
UKT_CASE(ipmodify_ops_on_a_function_with_a_kprobe)
{
	struct kprobe kp = { .symbol_name = "fe_add", .pre_handler = kpre };
	UKT_EQ(register_kprobe(&kp), 0);
	struct ftrace_ops ops = { .func = redirect_cb, .flags = IPM };
	redirect_from = UL(fe_add);
	redirect_to = UL(fe_add_alt);
	UKT_EQ(set_f(&ops, "fe_add", 1), 0);
	int r = register_ftrace_function(&ops);
	if (r == 0) {
		UKT_EQ(fe_add(7, 3), 4);
		UKT_EQ(kp_pre, 1);
		UKT_EQ(from_hits, 1);
	} else {
		UKT_EQ(r, -EBUSY);
		UKT_EQ(fe_add(7, 3), 10);
		UKT_EQ(kp_pre, 1);
	}
}

/*
 * The full vector argument registers, upper halves too (__m256 arguments
 * live in ymm0-7): ftt_call_ymm(fn, in, out) loads ymm0-7 from in, calls
 * fn(5) and stores ymm0-7 as fn returned them to out.  fn does not touch
 * vector registers itself.
 */
long ftt_call_ymm(void *fn, const void *in, void *out);
__asm__(
	".text\n"
	".globl ftt_call_ymm\n"
	".type ftt_call_ymm, @function\n"
	"ftt_call_ymm:\n"
	"	push %rbx\n"
	"	mov %rdx, %rbx\n"
	"	mov %rdi, %rax\n"
	"	vmovdqu 0(%rsi), %ymm0\n"
	"	vmovdqu 32(%rsi), %ymm1\n"
	"	vmovdqu 64(%rsi), %ymm2\n"
	"	vmovdqu 96(%rsi), %ymm3\n"
	"	vmovdqu 128(%rsi), %ymm4\n"
	"	vmovdqu 160(%rsi), %ymm5\n"
	"	vmovdqu 192(%rsi), %ymm6\n"
	"	vmovdqu 224(%rsi), %ymm7\n"
	"	mov $5, %edi\n"
	"	call *%rax\n"
	"	vmovdqu %ymm0, 0(%rbx)\n"
	"	vmovdqu %ymm1, 32(%rbx)\n"
	"	vmovdqu %ymm2, 64(%rbx)\n"
	"	vmovdqu %ymm3, 96(%rbx)\n"
	"	vmovdqu %ymm4, 128(%rbx)\n"
	"	vmovdqu %ymm5, 160(%rbx)\n"
	"	vmovdqu %ymm6, 192(%rbx)\n"
	"	vmovdqu %ymm7, 224(%rbx)\n"
	"	vzeroupper\n"
	"	pop %rbx\n"
	"	ret\n"
	".size ftt_call_ymm, .-ftt_call_ymm\n");

static void ymm_clobber_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
			   struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op; (void)regs;
	hits++;
	__asm__ volatile("vpcmpeqd %%ymm0, %%ymm0, %%ymm0\n\t"
			 "vpcmpeqd %%ymm1, %%ymm1, %%ymm1\n\t"
			 "vpcmpeqd %%ymm2, %%ymm2, %%ymm2\n\t"
			 "vpcmpeqd %%ymm3, %%ymm3, %%ymm3\n\t"
			 "vpcmpeqd %%ymm4, %%ymm4, %%ymm4\n\t"
			 "vpcmpeqd %%ymm5, %%ymm5, %%ymm5\n\t"
			 "vpcmpeqd %%ymm6, %%ymm6, %%ymm6\n\t"
			 "vpcmpeqd %%ymm7, %%ymm7, %%ymm7\n\t"
			 "vzeroupper"
			 ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7");
}

static bool have_avx(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx");
}

/* Vector registers 0-7 whole through a call of fn traced by an ops with
 * callback cb and flags fl: q qwords each (4: ymm, 8: zmm), loaded by
 * ftt_call_ymm or ftt_call_zmm, skipped without the CPU feature. */
static void vec_args_kept(const char *name, void *fn, ftrace_func_t cb, unsigned long fl, int q);
#define YMM_KEPT(p, cb, fl) vec_args_kept(S(p, other_one), (void *)FT_CAT(p, other_one), cb, fl, 4);
#define ZMM_KEPT(p, cb, fl) vec_args_kept(S(p, other_one), (void *)FT_CAT(p, other_one), cb, fl, 8);
#define YMM_AVX(p) YMM_KEPT(p, ymm_clobber_cb, 0)
#define YMM_SSE(p) YMM_KEPT(p, xmm_clobber_cb, 0)
#define YMM_LIBM(p) YMM_KEPT(p, libm_cb, 0)
#define YMM_REGS_AVX(p) YMM_KEPT(p, ymm_clobber_cb, FTRACE_OPS_FL_SAVE_REGS)
#define YMM_REGS_LIBM(p) YMM_KEPT(p, libm_cb, FTRACE_OPS_FL_SAVE_REGS)
BOTH(ymm_args_kept_callback_clobbers_ymm, YMM_AVX)
BOTH(ymm_args_kept_callback_clobbers_xmm, YMM_SSE)
BOTH(ymm_args_kept_callback_calls_libm, YMM_LIBM)
BOTH(ymm_args_kept_save_regs_callback_clobbers_ymm, YMM_REGS_AVX)
BOTH(ymm_args_kept_save_regs_callback_calls_libm, YMM_REGS_LIBM)

/* The same at AVX-512's width (__m512 arguments live in zmm0-7):
 * ftt_call_zmm loads zmm0-7 whole, a callback loads all 512 bits of
 * zmm0-7 (and zmm16-31, the opmasks) with ones.  (This file is not built
 * for AVX-512: the compiler keeps nothing in zmm16-31 or k0-7.) */
long ftt_call_zmm(void *fn, const void *in, void *out);
__asm__(
	".text\n"
	".globl ftt_call_zmm\n"
	".type ftt_call_zmm, @function\n"
	"ftt_call_zmm:\n"
	"	push %rbx\n"
	"	mov %rdx, %rbx\n"
	"	mov %rdi, %rax\n"
	"	.irp n, 0, 1, 2, 3, 4, 5, 6, 7\n"
	"	vmovdqu64 64*\\n(%rsi), %zmm\\n\n"
	"	.endr\n"
	"	mov $5, %edi\n"
	"	call *%rax\n"
	"	.irp n, 0, 1, 2, 3, 4, 5, 6, 7\n"
	"	vmovdqu64 %zmm\\n, 64*\\n(%rbx)\n"
	"	.endr\n"
	"	vzeroupper\n"
	"	pop %rbx\n"
	"	ret\n"
	".size ftt_call_zmm, .-ftt_call_zmm\n");

static void zmm_clobber_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
			   struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op; (void)regs;
	hits++;
	__asm__ volatile(".irp n, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23, "
			 "24, 25, 26, 27, 28, 29, 30, 31\n"
			 "vpternlogd $0xff, %%zmm\\n, %%zmm\\n, %%zmm\\n\n"
			 ".endr\n"
			 "kxnorw %%k1, %%k1, %%k1\n"
			 "vzeroupper"
			 ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7");
}

static bool have_avx512(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f");
}

static void vec_args_kept(const char *name, void *fn, ftrace_func_t cb, unsigned long fl, int q)
{
	static uint64_t in[64], out[64];
	static struct ftrace_ops ops;	/* registered until the case ends */
	const char *r = q == 8 ? "zmm" : "ymm";
	if (q == 8 ? !have_avx512() : !have_avx()) {
		fprintf(stderr, "  (no %s: nothing to check)\n", q == 8 ? "AVX-512" : "AVX");
		return;
	}
	for (int i = 0; i < 8 * q; i++)
		in[i] = 0x0101010101010101ULL * (uint64_t)(i + 1) ^ 0x8000000000000000ULL;
	ops = (struct ftrace_ops){ .func = cb, .flags = fl };
	UKT_EQ(set_f(&ops, name, 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	UKT_EQ((q == 8 ? ftt_call_zmm : ftt_call_ymm)(fn, in, out), 105);
	UKT_EQ(hits, 1);
	for (int i = 0; i < 8 * q; i++)
		if (out[i] != in[i])
			UKT_FAIL("%s%d bits %d-%d: %#llx, want %#llx", r, i / q, i % q * 64,
				 i % q * 64 + 63, (unsigned long long)out[i],
				 (unsigned long long)in[i]);
}

#define ZMM_AVX512(p) ZMM_KEPT(p, zmm_clobber_cb, 0)
#define ZMM_LIBM(p) ZMM_KEPT(p, libm_cb, 0)
#define ZMM_REGS_AVX512(p) ZMM_KEPT(p, zmm_clobber_cb, FTRACE_OPS_FL_SAVE_REGS)
BOTH(zmm_args_kept_callback_clobbers_zmm, ZMM_AVX512)
BOTH(zmm_args_kept_callback_calls_libm, ZMM_LIBM)
BOTH(zmm_args_kept_save_regs_callback_clobbers_zmm, ZMM_REGS_AVX512)

#define FMA_REGS_LIBM(p) FMA_CHECK(p, libm_cb, FTRACE_OPS_FL_SAVE_REGS)
BOTH(double_args_kept_save_regs_callback_calls_libm_and_printf, FMA_REGS_LIBM)

/* ---- leaf callbacks: only what they write is saved -------------------------------- */

/*
 * ftt_echo: a traced function written by hand, with the patch site the
 * compiler's -fpatchable-function-entry=5 would record; it stores the
 * eight registers a function's entry may have live (rax, rcx, rdx, rsi,
 * rdi, r8, r9, r10) as it got them, and returns rdi.  Called through
 * ftt_call_regs: rdi..r9 = 1..6, rax V_AX, r10 V_R10.
 *
 * The leaf callbacks below write those registers every way an
 * instruction can (plain, partial, implicit operands, string
 * instructions, exchange, conditional move), or read the callback's
 * arguments; the hook saves only what each one writes (the leaf analysis
 * decodes all of them), so any write it missed shows here.
 */
unsigned long ftt_echoed[8];
long ftt_echo(long a);
__asm__(
	".text\n"
	".globl ftt_echo\n"
	".type ftt_echo, @function\n"
	"ftt_echo:\n"
	".Lftt_echo_site:\n"
	"	nop\n	nop\n	nop\n	nop\n	nop\n"	/* the patch site */
	"	mov %rax, ftt_echoed+0(%rip)\n"
	"	mov %rcx, ftt_echoed+8(%rip)\n"
	"	mov %rdx, ftt_echoed+16(%rip)\n"
	"	mov %rsi, ftt_echoed+24(%rip)\n"
	"	mov %rdi, ftt_echoed+32(%rip)\n"
	"	mov %r8, ftt_echoed+40(%rip)\n"
	"	mov %r9, ftt_echoed+48(%rip)\n"
	"	mov %r10, ftt_echoed+56(%rip)\n"
	"	mov %rdi, %rax\n"
	"	ret\n"
	".size ftt_echo, .-ftt_echo\n"
	".section __patchable_function_entries, \"awo\", @progbits, ftt_echo\n"
	".p2align 3\n"
	".quad .Lftt_echo_site\n"
	".text\n");

unsigned long ftt_leaf_hits, ftt_leaf_seen[4];	/* ip, parent_ip, op, regs */
unsigned char ftt_leaf_buf[16];	/* ftt_leaf_string writes it */
#define LEAF_CB(name, body)						\
	void name(unsigned long, unsigned long, struct ftrace_ops *, struct pt_regs *); \
	__asm__(".text\n.globl " #name "\n.type " #name ", @function\n"	\
		#name ":\n"						\
		"	incq ftt_leaf_hits(%rip)\n"			\
		body							\
		"	ret\n"						\
		".size " #name ", .-" #name "\n")
LEAF_CB(ftt_leaf_nothing, "");
LEAF_CB(ftt_leaf_plain, "	mov $-1, %r8\n	xor %r9d, %r9d\n	mov $7, %r10d\n");
LEAF_CB(ftt_leaf_partial, "	mov $0x55, %al\n	mov $0x66, %ch\n	mov $0x77, %r10b\n");
LEAF_CB(ftt_leaf_mul, "	mov $3, %eax\n	mul %rax\n");	/* rdx:rax, rdx implicit */
LEAF_CB(ftt_leaf_string, "	lea ftt_leaf_buf(%rip), %rdi\n	lea ftt_echoed(%rip), %rsi\n"
	"	mov $16, %ecx\n	rep movsb\n	cld\n");	/* rsi, rdi, rcx implicit */
LEAF_CB(ftt_leaf_xchg, "	xchg %rdi, %rsi\n	xchg %rdx, %r9\n	xchg %r8, %r8\n");
LEAF_CB(ftt_leaf_cmov, "	cmp %rdi, %rdi\n	cmove %rsp, %r8\n	cmovne %rsp, %r9\n");
LEAF_CB(ftt_leaf_args, "	mov %rdi, ftt_leaf_seen+0(%rip)\n	mov %rsi, ftt_leaf_seen+8(%rip)\n"
	"	mov %rdx, ftt_leaf_seen+16(%rip)\n	mov %rcx, ftt_leaf_seen+24(%rip)\n");
/* the parent alone, with one register (pad 0) and with two saved (pad 8) */
LEAF_CB(ftt_leaf_parent1, "	mov %rsi, ftt_leaf_seen+8(%rip)\n");
LEAF_CB(ftt_leaf_parent2, "	mov %rsi, ftt_leaf_seen+8(%rip)\n	mov $9, %r9d\n");
LEAF_CB(ftt_leaf_op, "	mov %rdx, ftt_leaf_seen+16(%rip)\n	mov 8(%rdx), %r10\n");

UKT_CASE(leaf_callbacks_keep_every_entry_register)
{
	static const struct { const char *name; ftrace_func_t cb; } cbs[] = {
		{ "nothing", ftt_leaf_nothing }, { "plain", ftt_leaf_plain },
		{ "partial", ftt_leaf_partial }, { "mul", ftt_leaf_mul },
		{ "string", ftt_leaf_string }, { "xchg", ftt_leaf_xchg },
		{ "cmov", ftt_leaf_cmov }, { "args", ftt_leaf_args },
		{ "parent1", ftt_leaf_parent1 }, { "parent2", ftt_leaf_parent2 },
		{ "op", ftt_leaf_op },
	};
	const unsigned long want[8] = { V_AX, 4, 3, 2, 1, 5, 6, V_R10 };
	const unsigned long ret = UL(ukt_label("ftt_call_regs_ret"));
	for (size_t i = 0; i < sizeof(cbs) / sizeof(cbs[0]); i++) {
		/* one alone (its own code block), and three at once */
		for (int three = 0; three < 2; three++) {
			struct ftrace_ops ops[3];
			memset(ops, 0, sizeof(ops));
			int n = three ? 3 : 1;
			for (int j = 0; j < n; j++) {
				ops[j].func = j == 1 ? ftt_leaf_nothing : cbs[i].cb;
				UKT_EQ(ftrace_set_filter_ip(&ops[j], UL(ftt_echo), 0, 0), 0);
				UKT_EQ(register_ftrace_function(&ops[j]), 0);
			}
			memset(ftt_echoed, 0, sizeof(ftt_echoed));
			memset(ftt_leaf_seen, 0xee, sizeof(ftt_leaf_seen));
			ftt_leaf_hits = 0;
			UKT_EQ(ftt_call_regs((void *)ftt_echo, args6), 1);
			UKT_EQ(ftt_leaf_hits, (unsigned long)n);
			static const char *const rn[8] = { "rax", "rcx", "rdx", "rsi",
							   "rdi", "r8", "r9", "r10" };
			for (int r = 0; r < 8; r++)
				if (ftt_echoed[r] != want[r])
					UKT_FAIL("%s (%d ops): %s at the entry %#lx, want %#lx",
						 cbs[i].name, n, rn[r], ftt_echoed[r], want[r]);
			expect_after_intact();
			if (cbs[i].cb == ftt_leaf_args) {
				UKT_EQ(ftt_leaf_seen[0], UL(ftt_echo));
				UKT_EQ(ftt_leaf_seen[1], ret);
				UKT_EQ(ftt_leaf_seen[2], UL(&ops[n - 1]));
				UKT_EQ(ftt_leaf_seen[3], 0);
			}
			if (cbs[i].cb == ftt_leaf_parent1 || cbs[i].cb == ftt_leaf_parent2)
				UKT_EQ(ftt_leaf_seen[1], ret);
			if (cbs[i].cb == ftt_leaf_op)
				UKT_EQ(ftt_leaf_seen[2], UL(&ops[n - 1]));
			for (int j = 0; j < n; j++)
				UKT_EQ(unregister_ftrace_function(&ops[j]), 0);
		}
	}
}

/* A leaf callback in a shared object, more than 2 GB from the hook's code
 * (next to the executable): called through a register, which must not be
 * one the hook left unsaved (the callback writes none). */
UKT_CASE(far_leaf_callback_keeps_every_entry_register)
{
	char self[4096], path[4200];
	ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	UKT_ASSERT(k > 0);
	self[k] = 0;
	*strrchr(self, '/') = 0;
	snprintf(path, sizeof(path), "%s/../solibs/ftdl_pf.so", self);
	void *h = dlopen(path, RTLD_NOW);
	if (!h)
		UKT_FAIL("dlopen %s: %s", path, dlerror());
	ftrace_func_t cb = (ftrace_func_t)dlsym(h, "dl_pf_leaf_cb");
	unsigned long (*nhits)(void) = (unsigned long (*)(void))dlsym(h, "dl_pf_leaf_hits");
	UKT_ASSERT(cb && nhits);
	long dist = (long)(UL(cb) - UL(ftt_echo));
	if (dist > -(1L << 31) && dist < (1L << 31))
		UKT_FAIL("the callback is within 2 GB of ftt_echo (%#lx, %#lx): nothing to test",
			 UL(cb), UL(ftt_echo));
	const unsigned long want[8] = { V_AX, 4, 3, 2, 1, 5, 6, V_R10 };
	static const char *const rn[8] = { "rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10" };
	struct ftrace_ops ops = { .func = cb };
	UKT_EQ(ftrace_set_filter_ip(&ops, UL(ftt_echo), 0, 0), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	for (int i = 0; i < 10; i++) {
		memset(ftt_echoed, 0, sizeof(ftt_echoed));
		UKT_EQ(ftt_call_regs((void *)ftt_echo, args6), 1);
		for (int r = 0; r < 8; r++)
			if (ftt_echoed[r] != want[r])
				UKT_FAIL("%s at the entry %#lx, want %#lx", rn[r], ftt_echoed[r],
					 want[r]);
		expect_after_intact();
	}
	UKT_EQ(nhits(), 10);
	UKT_EQ(unregister_ftrace_function(&ops), 0);
	dlclose(h);
}

/*
 * A kprobe on a patch site runs inside its stub's call, which a grace
 * period waits for.  A longjmp out of the handler's hit (by the program's
 * handler of a fault in it, or by a signal handler of the program that
 * interrupted it) leaves that call for good: grace periods must not wait
 * for it, and the probe goes on working.
 */
static sigjmp_buf lj_jb;
static volatile int lj_jumps, lj_calls;
static int *volatile lj_bad = (int *)0x18;
static int lj_fault(struct kprobe *p, struct pt_regs *regs)
{
	(void)p; (void)regs;
	lj_calls++;
	return lj_calls == 1 ? *lj_bad : 0;	/* the first hit faults */
}
static int lj_signal(struct kprobe *p, struct pt_regs *regs)
{
	(void)p; (void)regs;
	if (++lj_calls == 1)
		raise(SIGUSR1);	/* its handler longjmps out of this one */
	return 0;
}
static void lj_handler(int sig) { (void)sig; lj_jumps++; siglongjmp(lj_jb, 1); }

static void *lj_unregister_ops(void *ops)
{
	UKT_EQ(unregister_ftrace_function(ops), 0);
	return NULL;
}

static void lj_case(int (*fn)(int, int), int (*mul)(int, int), int sig,
		    int (*pre)(struct kprobe *, struct pt_regs *))
{
	UKT_EQ(ukt_on_signal(sig, lj_handler, 0), 0);
	struct kprobe kp = { .addr = (void *)fn, .pre_handler = pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(ukt_probe_flags(&kp), KPROBE_FLAG_FTRACE);
	if (!sigsetjmp(lj_jb, 1)) {
		fn(1, 1);
		UKT_FAIL("the handler came back");
	}
	UKT_EQ(lj_jumps, 1);
	UKT_EQ(lj_calls, 1);
	/* an ftrace grace period, from another thread: it must end */
	struct ftrace_ops ops = { .func = plain_cb };
	UKT_EQ(ftrace_set_filter_ip(&ops, UL(mul), 0, 0), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	UKT_EQ(mul(3, 4), 12);
	UKT_EQ(plain_hits, 1);
	ukt_ends_within_20s(lj_unregister_ops, &ops);
	/* this thread is outside every hit: the probe runs again */
	UKT_EQ(fn(2, 3), 5);
	UKT_EQ(lj_calls, 2);
	UKT_EQ(kp.nmissed, 0);
	unregister_kprobe(&kp);
}

#define LJ_FAULT(p) lj_case(FT_CAT(p, add), FT_CAT(p, mul), SIGSEGV, lj_fault);
BOTH(kprobe_on_site_longjmp_from_program_fault_handler, LJ_FAULT)
#define LJ_SIGNAL(p) lj_case(FT_CAT(p, add), FT_CAT(p, mul), SIGUSR1, lj_signal);
BOTH(kprobe_on_site_longjmp_from_program_signal_handler, LJ_SIGNAL)
