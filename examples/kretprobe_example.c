/* SPDX-License-Identifier: MIT */
/*
 * kretprobe_example: the user-space twin of the kernel's
 * samples/kprobes/kretprobe_example.c.
 *
 * A return probe on a function (by default the C library's strtol): the
 * entry_handler stamps the time into the instance's private data, the
 * return handler prints what the function returned and how long it took.
 * Then one call made from a function of this program shows the stack the
 * return handler sees: the real callers, with one kretprobe_trampoline
 * frame where the return address was replaced.  Last, the probe is
 * removed and nmissed is printed.
 *
 *	kretprobe_example [SYMBOL]
 *
 * Exits 0 once every call was seen on entry and on return.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ukprobes.h>

#define DEFAULT_SYMBOL "libc.so.6:strtol"

/* per-instance private data */
struct my_data {
	long long entry_stamp;
};

static volatile unsigned long entries, returns;
static volatile int show_stack;

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Here we use the entry_handler to timestamp function entry */
static int entry_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct my_data *data = (struct my_data *)ri->data;
	(void)regs;
	entries++;
	data->entry_stamp = now_ns();
	return 0;
}

/* Return-probe handler: log the return value and the time taken */
static int ret_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct my_data *data = (struct my_data *)ri->data;
	long long delta = now_ns() - data->entry_stamp;
	returns++;
	printf("  %s returned %ld and took %lld ns (thread %d, back to %p)\n",
	       ri->rp->kp.symbol_name, (long)regs_return_value(regs), delta,
	       (int)ri->task, (void *)ri->ret_addr);
	if (show_stack) {
		void *bt[8];
		int n = backtrace(bt, 8);
		printf("  the return handler's stack:\n");
		fflush(stdout);
		backtrace_symbols_fd(bt, n, 1);
	}
	return 0;
}

static struct kretprobe my_kretprobe = {
	.handler = ret_handler,
	.entry_handler = entry_handler,
	.data_size = sizeof(struct my_data),
	/* Probe up to 20 instances concurrently. */
	.maxactive = 20,
};

/* a caller of our own, for the stack shown above */
__attribute__((noinline)) long parse_from_caller(const char *s)
{
	long v = strtol(s, NULL, 0);
	__asm__ volatile("" : "+r"(v));
	return v;
}

int main(int argc, char **argv)
{
	my_kretprobe.kp.symbol_name = argc > 1 ? argv[1] : DEFAULT_SYMBOL;
	int ret = register_kretprobe(&my_kretprobe);
	if (ret < 0) {
		fprintf(stderr, "register_kretprobe failed, returned %d\n", ret);
		return 1;
	}
	printf("Planted return probe at %s: %p\n", my_kretprobe.kp.symbol_name,
	       (void *)my_kretprobe.kp.addr);
	wait_for_kprobe_optimizer();
	kprobes_list(stdout);

	static const char *const inputs[] = { "42", "0x2a", "-7", "1000000" };
	long sum = 0;
	for (unsigned i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++)
		sum += strtol(inputs[i], NULL, 0);
	show_stack = 1;
	sum += parse_from_caller("5");
	show_stack = 0;

	unregister_kretprobe(&my_kretprobe);
	printf("kretprobe at %p unregistered\n", (void *)my_kretprobe.kp.addr);
	printf("Missed probing %d instances of %s\n", my_kretprobe.nmissed,
	       my_kretprobe.kp.symbol_name);
	sum += strtol("1", NULL, 0);		/* no output: unregistered */
	printf("sum of the results: %ld\n", sum);
	if (argc > 1)
		return entries == returns && entries > 0 ? 0 : 1;
	return entries == 5 && returns == 5 && sum == 42 + 42 - 7 + 1000000 + 5 + 1 ? 0 : 1;
}
