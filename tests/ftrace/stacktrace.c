/* SPDX-License-Identifier: MIT */
/*
 * stack_trace_save() and stack_trace_save_regs() from ftrace callbacks:
 * the trace leaves ukprobes' trampoline out and goes on at the traced
 * function's entry (ip), then its caller (parent_ip), then that caller's
 * callers exactly as an unprobed stack_trace_save() in the caller saw them.
 * Both kinds of patch site (fe_: -pg -mfentry, pf_:
 * -fpatchable-function-entry), each through the trampolines of one ops
 * without pt_regs, one with (SAVE_REGS), and two ops on one function.
 *
 * Cases: callback_traces_{fentry,patchable}
 */
#include <string.h>
#include "ukt.h"
#include "fttargets/targets.h"

#define NBUF 128
#define RA() ((unsigned long)__builtin_return_address(0))
#define BARRIER() __asm__ volatile("" ::: "memory")

static int (*target)(int, int);
static unsigned long full[NBUF];	/* from ft_caller, unprobed */
static unsigned nfull;
static volatile int recording;

/* calls the traced function; unprobed, it records its own trace:
 * full[0] its call site, full[1] its return into its caller, ...  Its
 * alloca makes its CFA bp-based: the walk must have the traced
 * function's bp right past the trampoline (ukp_ftrace_walk uses rbp) */
static __attribute__((noinline)) int ft_caller(int x)
{
	volatile char *scratch = __builtin_alloca(16 + (unsigned)(x & 16));
	scratch[0] = (char)x;
	if (recording)
		nfull = stack_trace_save(full, NBUF, 0);
	int r = target(x, 1);
	BARRIER();
	return r;
}

static unsigned long nchecks, nbad;
static char first_bad[256];

static void check(const char *what, const unsigned long *got, unsigned ngot,
		  const unsigned long *want, unsigned nwant)
{
	nchecks++;
	for (unsigned i = 0; i < nwant || i < ngot; i++)
		if (i >= ngot || i >= nwant || got[i] != want[i]) {
			if (!nbad++)
				snprintf(first_bad, sizeof(first_bad),
					 "%s: entry %u of %u is %#lx, want %#lx (of %u)", what, i,
					 ngot, i < ngot ? got[i] : 0, i < nwant ? want[i] : 0, nwant);
			return;
		}
}

static __attribute__((noinline)) unsigned grab(unsigned long *b, unsigned long *ra)
{
	*ra = RA();
	unsigned n = stack_trace_save(b, NBUF, 1);
	BARRIER();
	return n;
}

/* the callback's traces: its own (grab's return into it, then ip) and,
 * with pt_regs, regs' (ip first) */
static __attribute__((noinline)) void cb(unsigned long ip, unsigned long parent_ip,
					 struct ftrace_ops *op, struct pt_regs *regs)
{
	(void)op;
	unsigned long got[NBUF], want[NBUF + 3], ra;
	/* the caller's return address is parent_ip, inside ft_caller */
	nchecks++;
	if (parent_ip <= (unsigned long)ft_caller || parent_ip >= (unsigned long)ft_caller + 128)
		if (!nbad++)
			snprintf(first_bad, sizeof(first_bad), "parent_ip %#lx", parent_ip);
	want[1] = ip;
	want[2] = parent_ip;
	for (unsigned j = 1; j < nfull; j++)
		want[2 + j] = full[j];
	unsigned nw = nfull + 2;
	unsigned n = grab(got, &ra);
	want[0] = ra;
	check("callback's own", got, n, want, nw);
	if (regs) {
		n = stack_trace_save_regs(regs, got, NBUF, 0);
		check("regs'", got, n, want + 1, nw - 1);
	}
	BARRIER();
}

/* ft_caller's calls, unprobed (recording) or not, from one call site
 * whatever the pass, so that its callers are the same in both */
static struct {
	const char *sym;
	unsigned long flags;
	int nops;
	struct ftrace_ops ops[2];
} cfg;

static void arm(void)
{
	memset(cfg.ops, 0, sizeof(cfg.ops));
	for (int k = 0; k < cfg.nops; k++) {
		cfg.ops[k].func = cb;
		cfg.ops[k].flags = cfg.flags;
		UKT_EQ(ftrace_set_filter(&cfg.ops[k], (unsigned char *)cfg.sym,
					 (int)strlen(cfg.sym), 1), 0);
		UKT_EQ(register_ftrace_function(&cfg.ops[k]), 0);
	}
	nchecks = nbad = 0;
}

static __attribute__((noinline)) void calls(int n)
{
	for (int i = 0; i < n; i++)
		if (ft_caller(i) != i + 1)	/* both targets add 1 */
			UKT_FAIL("ft_caller(%d)", i);
}

static __attribute__((noinline)) void passes(void)
{
	static volatile int npass = 2;
	static const int n[2] = { 1, 100 };
	for (int i = 0; i < npass; i++) {
		recording = i == 0;
		if (i == 1)
			arm();
		calls(n[i]);
		recording = 0;
	}
}

static void run(const char *sym, int (*fn)(int, int), unsigned long flags, int nops)
{
	target = fn;
	cfg.sym = sym;
	cfg.flags = flags;
	cfg.nops = nops;
	passes();
	for (int k = 0; k < nops; k++)
		UKT_EQ(unregister_ftrace_function(&cfg.ops[k]), 0);
	UKT_ASSERT(nfull > 3);
	if (nbad)
		UKT_FAIL("%s flags %#lx, %d ops: %lu of %lu wrong; first: %s", sym, flags, nops,
			 nbad, nchecks, first_bad);
	/* per call and ops: parent_ip, its own trace, regs' */
	UKT_EQ(nchecks, 100UL * (unsigned long)nops * (flags ? 3 : 2));
}

UKT_CASE(callback_traces_fentry)
{
	run("fe_add", fe_add, 0, 1);
	run("fe_add", fe_add, FTRACE_OPS_FL_SAVE_REGS, 1);
	run("fe_add", fe_add, 0, 2);
	run("fe_add", fe_add, FTRACE_OPS_FL_SAVE_REGS, 2);
}

UKT_CASE(callback_traces_patchable)
{
	run("pf_add", pf_add, 0, 1);
	run("pf_add", pf_add, FTRACE_OPS_FL_SAVE_REGS, 1);
	run("pf_add", pf_add, 0, 2);
	run("pf_add", pf_add, FTRACE_OPS_FL_SAVE_REGS, 2);
}
