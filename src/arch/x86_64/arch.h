/* SPDX-License-Identifier: MIT */
/*
 * The architecture contract (private).  Modelled on the kernel's arch_*
 * split: generic code (kprobes.c, trap.c) knows sites, probes and threads;
 * everything that knows instruction encodings or register layouts lives
 * behind these functions.  An aarch64 port provides the same set.
 */
#ifndef UKP_ARCH_H
#define UKP_ARCH_H

#include <stddef.h>
#include <stdint.h>
#include <ucontext.h>
#include <ukprobes/ptrace.h>

#define UKP_ARCH_BREAKPOINT	0xcc	/* int3 */
#define UKP_ARCH_BP_LEN		1
#define UKP_ARCH_MAX_INSN	15

/* What the out-of-line copy has to do about control flow. */
enum ukp_insn_flow {
	UKP_FLOW_NONE,		/* falls through to the next instruction */
	UKP_FLOW_JMP,		/* jmp rel: goes to target */
	UKP_FLOW_JCC,		/* jcc/loop/jrcxz/xbegin rel: target or next */
	UKP_FLOW_CALL,		/* call rel: pushes next, goes to target */
	UKP_FLOW_RET,		/* ret [imm16]: target on the stack */
	UKP_FLOW_JMP_IND,	/* jmp r/m64 */
	UKP_FLOW_CALL_IND,	/* call r/m64 */
	UKP_FLOW_SYSCALL,	/* syscall: rcx = next afterwards */
	UKP_FLOW_STOP,		/* never falls through (ud2, hlt, int3...) */
};

/* A memory operand, for computing an effective address (post handlers on
 * indirect branches are emulated).  Register numbers index pt_regs as
 * unsigned long[]; -1 means none. */
struct ukp_mem {
	int base, index;
	unsigned scale;
	int64_t disp;
	int rip_relative;
	int addr32;		/* 0x67: eip-relative, wraps at 4 GiB */
	int seg;		/* 0 none, 1 fs, 2 gs */
};

struct ukp_insn {
	unsigned long addr;
	uint8_t len;
	uint8_t bytes[UKP_ARCH_MAX_INSN];
	enum ukp_insn_flow flow;
	unsigned long target;	/* for relative branches */
	int8_t disp_off;	/* offset of a rip-relative disp32, or -1 */
	int8_t imm_size;	/* size of the relative immediate, if any */
	int8_t imm_off;
	int8_t modrm_off;	/* jmp/call r/m64: the ModRM byte */
	uint16_t ret_pop;	/* ret imm16 */
	int ind_reg;		/* jmp/call *%reg: pt_regs index, or -1 */
	int ind_is_mem;
	struct ukp_mem mem;	/* jmp/call *mem */
	int uses_rsp_base;	/* memory operand based on %rsp */
	int is_int3;
	char mnemonic[16];
};

/* Decode one instruction at code (avail readable bytes) located at addr.
 * Returns its length, or -EILSEQ. */
int ukp_arch_decode(const void *code, size_t avail, unsigned long addr,
		    struct ukp_insn *insn);

/* Does decoding from func_start reach addr exactly?  0, -EILSEQ.
 * Caches the last function's boundaries (callers hold the registry lock). */
int ukp_arch_check_boundary(unsigned long func_start, unsigned long func_end,
			    unsigned long addr);
void ukp_arch_forget_boundaries(void);

/*
 * Build the out-of-line copy of insn into buf (at least UKP_SLOT_MAX
 * bytes), to be placed at slot_addr.  With post set, control goes through
 * the post trampoline (continuation records carry cont_site) instead of
 * straight back.  Returns the length, or a negative errno (-ERANGE when a
 * displacement does not reach from slot_addr).  *sp_fix receives, for
 * each byte offset, the stack adjustment that maps a fault there back to
 * the original state (all zero for most instructions).
 */
#define UKP_SLOT_MAX 160
int ukp_arch_build_slot(const struct ukp_insn *insn, uint8_t *buf,
			unsigned long slot_addr, int post, void *cont_site,
			int8_t sp_fix[UKP_SLOT_MAX]);

/* pt_regs <-> signal context */
void ukp_arch_regs_from_uc(struct pt_regs *regs, const ucontext_t *uc);
void ukp_arch_regs_to_uc(ucontext_t *uc, const struct pt_regs *regs);
unsigned long ukp_arch_uc_ip(const ucontext_t *uc);
void ukp_arch_uc_set_ip(ucontext_t *uc, unsigned long ip);
unsigned long ukp_arch_uc_sp(const ucontext_t *uc);
void ukp_arch_uc_set_sp(ucontext_t *uc, unsigned long sp);
int ukp_arch_trapnr(const ucontext_t *uc, int sig);

/* Emulate a dynamic branch (ret, jmp/call indirect) on regs, for a probe
 * with a post_handler.  0, or -EFAULT when memory is unreadable (the
 * caller then runs the out-of-line copy, which faults for real). */
int ukp_arch_emulate_branch(const struct ukp_insn *insn, struct pt_regs *regs);

/* Provided by generic code: reads code as it was before any probe. */
void ukp_read_text(unsigned long addr, uint8_t *buf, size_t n);

/* A system call without libc: the hit path must not call functions a
 * user may have probed (a probe on mmap() hit while attaching a thread
 * would recurse forever). */
static inline long ukp_raw_syscall(long nr, long a, long b, long c, long d,
				   long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/* Machine features, probed once. */
void ukp_arch_init(void);

/* entry.S */
struct ukp_jmpbuf { unsigned long rbx, rbp, r12, r13, r14, r15, rsp, rip; };
int ukp_setjmp(struct ukp_jmpbuf *jb) __attribute__((returns_twice));
__attribute__((noreturn)) void ukp_longjmp(struct ukp_jmpbuf *jb, int val);
void ukp_post_trampoline(void);
extern char ukp_post_slow_trap[];	/* the int3 of the trampoline's slow exit */
extern char ukp_nofault_begin[], ukp_nofault_end[], ukp_nofault_fixup[];
long ukp_copy_nofault(void *dst, const void *src, size_t n);

#endif
