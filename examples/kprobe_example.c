/* SPDX-License-Identifier: MIT */
/*
 * kprobe_example: the user-space twin of the kernel's
 * samples/kprobes/kprobe_example.c.
 *
 * It plants a kprobe on a function of a shared library (by default the C
 * library's qsort).  Each time the function is called, the pre_handler
 * prints the registers at the probe point, before the first instruction
 * of the function runs, and the post_handler prints them again just after
 * that instruction has run.  The program then calls a few C library
 * functions so the probe fires, shows the probe list, removes the probe
 * and calls them once more to show that nothing fires any more.
 *
 *	kprobe_example [SYMBOL]
 *
 * SYMBOL is "function" or "object:function", as in struct kprobe's
 * symbol_name.  The functions this program calls are qsort (the default),
 * strtol and getenv, so "libc.so.6:strtol" and "libc.so.6:getenv" work
 * too.  Like the kernel sample, the handlers print; so do not point this
 * program at stdio's own functions (printf, fwrite, ...).
 *
 * Exits 0 once the probe has fired and been removed; non-zero if
 * registration failed or the probe never fired.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ukprobes.h>

#define DEFAULT_SYMBOL "libc.so.6:qsort"

static volatile unsigned long pre_hits, post_hits;

/* kprobe pre_handler: called just before the probed instruction is executed */
static int handler_pre(struct kprobe *p, struct pt_regs *regs)
{
	pre_hits++;
	printf("  <%s> pre_handler: p->addr = %p, ip = %lx, flags = 0x%lx\n",
	       p->symbol_name, (void *)p->addr, regs->ip, regs->flags);
	printf("  <%s>   arguments: di = %#lx, si = %#lx, dx = %#lx; sp = %#lx\n",
	       p->symbol_name, regs_get_kernel_argument(regs, 0),
	       regs_get_kernel_argument(regs, 1),
	       regs_get_kernel_argument(regs, 2), regs->sp);
	/* A pre_handler always returns 0. */
	return 0;
}

/* kprobe post_handler: called after the probed instruction is executed */
static void handler_post(struct kprobe *p, struct pt_regs *regs,
			 unsigned long flags)
{
	(void)flags;
	post_hits++;
	printf("  <%s> post_handler: p->addr = %p, ip = %lx, flags = 0x%lx\n",
	       p->symbol_name, (void *)p->addr, regs->ip, regs->flags);
}

/*
 * fault_handler: called if a fault happens in a handler or while the
 * probed instruction runs out of line.  Returning 0 lets the program see
 * the fault exactly as it would without the probe.
 */
static int handler_fault(struct kprobe *p, struct pt_regs *regs, int trapnr)
{
	(void)regs;
	printf("  fault_handler: p->addr = %p, trap #%d\n", (void *)p->addr,
	       trapnr);
	return 0;
}

static struct kprobe kp = {
	.symbol_name = DEFAULT_SYMBOL,
};

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;

	return (x > y) - (x < y);
}

/* Calls the functions a reader may probe, saying what it calls first. */
static void workload(int round)
{
	int v[] = { 42, 7, 19, 3, 25 };
	const char *num = "0x2a";
	const char *home;
	long n;

	printf("main: round %d: qsort() of { 42, 7, 19, 3, 25 }\n", round);
	qsort(v, sizeof(v) / sizeof(v[0]), sizeof(v[0]), cmp_int);
	printf("main:   sorted: { %d, %d, %d, %d, %d }\n",
	       v[0], v[1], v[2], v[3], v[4]);

	printf("main: round %d: strtol(\"%s\")\n", round, num);
	n = strtol(num, NULL, 0);
	printf("main:   = %ld\n", n);

	printf("main: round %d: getenv(\"HOME\")\n", round);
	home = getenv("HOME");
	printf("main:   = %s\n", home ? home : "(unset)");
}

static const char *flag_names(unsigned int flags)
{
	static char buf[64];

	snprintf(buf, sizeof(buf), "%s%s%s%s%s",
		 flags ? "" : " (none)",
		 flags & KPROBE_FLAG_GONE ? " GONE" : "",
		 flags & KPROBE_FLAG_DISABLED ? " DISABLED" : "",
		 flags & KPROBE_FLAG_OPTIMIZED ? " OPTIMIZED" : "",
		 flags & KPROBE_FLAG_FTRACE ? " FTRACE" : "");
	return buf;
}

int main(int argc, char **argv)
{
	unsigned long pre_before;
	Dl_info info;
	int ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
		fprintf(stderr, "usage: %s [SYMBOL]   (default %s)\n",
			argv[0], DEFAULT_SYMBOL);
		return 2;
	}
	if (argc == 2)
		kp.symbol_name = argv[1];

	kp.pre_handler = handler_pre;
	kp.post_handler = handler_post;
	kp.fault_handler = handler_fault;

	ret = register_kprobe(&kp);
	if (ret < 0) {
		fprintf(stderr, "register_kprobe(\"%s\") failed, returned %d (%s)\n",
			kp.symbol_name, ret, strerror(-ret));
		return 1;
	}
	printf("Planted kprobe at %p", (void *)kp.addr);
	if (dladdr(kp.addr, &info) && info.dli_sname)
		printf(" (%s+0x%lx in %s)", info.dli_sname,
		       (unsigned long)((char *)kp.addr - (char *)info.dli_saddr),
		       info.dli_fname);
	printf(", flags:%s\n", flag_names(kp.flags));
	printf("The pre_handler runs before the probed instruction (ip = p->addr),\n"
	       "the post_handler right after it (ip = the next instruction).\n\n");

	for (int round = 1; round <= 3; round++)
		workload(round);

	printf("\npre_handler ran %lu times, post_handler %lu times, nmissed = %lu\n",
	       pre_hits, post_hits, kp.nmissed);
	printf("\nkprobes_list():\n");
	ret = kprobes_list(stdout);
	if (ret < 0)
		fprintf(stderr, "kprobes_list failed: %s\n", strerror(-ret));

	unregister_kprobe(&kp);
	printf("\nkprobe at %s unregistered; calling once more, the handlers stay quiet:\n",
	       kp.symbol_name);
	pre_before = pre_hits;
	workload(4);

	if (pre_hits == 0) {
		fprintf(stderr, "\nthe probe on %s never fired: this program calls "
			"qsort, strtol and getenv; probe one of those\n",
			kp.symbol_name);
		return 1;
	}
	if (pre_hits != pre_before) {
		fprintf(stderr, "\nerror: a handler ran after unregister_kprobe()\n");
		return 1;
	}
	return ret < 0 ? 1 : 0;
}
