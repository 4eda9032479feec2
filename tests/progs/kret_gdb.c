/*
 * kret_gdb: a kretprobed function that calls a leaf, for gdb to stop in
 * (run by tests/api/kretprobe_progs.c):
 *
 *	main -> kr_gdb_caller -> kr_gdb_probed -> kr_gdb_leaf
 *
 * The entry probe is jump-optimised before the call (gdb would take the
 * int3 of a breakpoint probe for its own).  At kr_gdb_leaf, gdb's bt must
 * show kr_gdb_leaf, kr_gdb_probed, kretprobe_trampoline, kr_gdb_caller,
 * main.  Prints "result 15 handler 1" and exits 0 when the call returned
 * the right value through the probe.
 */
#include <stdio.h>
#include <ukprobes.h>

static volatile int handler_calls;
static volatile long handler_ax;

__attribute__((noinline)) int kr_gdb_leaf(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

__attribute__((noinline)) int kr_gdb_probed(int x)
{
	int r = kr_gdb_leaf(x);
	__asm__ volatile("" : "+r"(r) :: "memory");
	return r * 2;
}

__attribute__((noinline)) int kr_gdb_caller(int x)
{
	int r = kr_gdb_probed(x);
	__asm__ volatile("" : "+r"(r) :: "memory");
	return r + 3;
}

static int on_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	handler_ax = (long)regs_return_value(regs);
	handler_calls++;
	return 0;
}

int main(void)
{
	struct kretprobe rp = { .kp.addr = (kprobe_opcode_t *)kr_gdb_probed,
				.handler = on_return, .maxactive = 1 };
	int err = register_kretprobe(&rp);
	if (err) {
		printf("register_kretprobe: %d\n", err);
		return 2;
	}
	wait_for_kprobe_optimizer();
	if (!(rp.kp.flags & KPROBE_FLAG_OPTIMIZED)) {
		printf("entry probe not optimized\n");
		return 2;
	}
	int r = kr_gdb_caller(5);
	printf("result %d handler %d\n", r, handler_calls);
	unregister_kretprobe(&rp);
	return r == 15 && handler_calls == 1 && handler_ax == 12 ? 0 : 1;
}
