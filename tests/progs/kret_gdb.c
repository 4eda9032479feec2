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
 *
 * "kret_gdb regs": main -> kr_gdb_regs_caller -> kr_gdb_probed instead,
 * where the caller (asm) holds 0x11..11, 0x22..22, ... in rbx rbp r12 r13
 * r14 r15 across the call; gdb, stopped in the return handler (run by the
 * trampoline, which uses those registers itself), must find them in the
 * caller's frame through the trampoline's unwind information.
 */
#include <stdio.h>
#include <string.h>
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

int kr_gdb_probed(int x);
__asm__(".text\n.globl kr_gdb_regs_caller\n.type kr_gdb_regs_caller,@function\n"
	"kr_gdb_regs_caller:\n .cfi_startproc\n"
	" push %rbx\n .cfi_adjust_cfa_offset 8\n .cfi_rel_offset rbx, 0\n"
	" push %rbp\n .cfi_adjust_cfa_offset 8\n .cfi_rel_offset rbp, 0\n"
	" push %r12\n .cfi_adjust_cfa_offset 8\n .cfi_rel_offset r12, 0\n"
	" push %r13\n .cfi_adjust_cfa_offset 8\n .cfi_rel_offset r13, 0\n"
	" push %r14\n .cfi_adjust_cfa_offset 8\n .cfi_rel_offset r14, 0\n"
	" push %r15\n .cfi_adjust_cfa_offset 8\n .cfi_rel_offset r15, 0\n"
	" sub $8, %rsp\n .cfi_adjust_cfa_offset 8\n"
	" movabs $0x1111111111111111, %rbx\n movabs $0x2222222222222222, %rbp\n"
	" movabs $0x3333333333333333, %r12\n movabs $0x4444444444444444, %r13\n"
	" movabs $0x5555555555555555, %r14\n movabs $0x6666666666666666, %r15\n"
	" call kr_gdb_probed\n add $3, %eax\n"
	" add $8, %rsp\n .cfi_adjust_cfa_offset -8\n"
	" pop %r15\n .cfi_adjust_cfa_offset -8\n pop %r14\n .cfi_adjust_cfa_offset -8\n"
	" pop %r13\n .cfi_adjust_cfa_offset -8\n pop %r12\n .cfi_adjust_cfa_offset -8\n"
	" pop %rbp\n .cfi_adjust_cfa_offset -8\n pop %rbx\n .cfi_adjust_cfa_offset -8\n"
	" ret\n .cfi_endproc\n.size kr_gdb_regs_caller,.-kr_gdb_regs_caller\n");
int kr_gdb_regs_caller(int x);

static int on_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)ri;
	handler_ax = (long)regs_return_value(regs);
	handler_calls++;
	return 0;
}

int main(int argc, char **argv)
{
	int regs = argc > 1 && !strcmp(argv[1], "regs");
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
	int r = regs ? kr_gdb_regs_caller(5) : kr_gdb_caller(5);
	printf("result %d handler %d\n", r, handler_calls);
	unregister_kretprobe(&rp);
	return r == 15 && handler_calls == 1 && handler_ax == 12 ? 0 : 1;
}
