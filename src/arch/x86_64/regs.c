/* SPDX-License-Identifier: MIT */
/* Registers: signal context <-> pt_regs, trap numbers, branch emulation. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/ucontext.h>
#include <asm/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cpuid.h>
#include "arch.h"

/* Read by entry.S: bytes of the XSAVE area (0: use FXSAVE, 512 bytes). */
unsigned long ukp_xsave_size __attribute__((visibility("hidden")));

/* Widest vector registers the OS enables: 0 SSE, 1 AVX (ymm), 2 AVX-512. */
int ukp_vec_level __attribute__((visibility("hidden")));

/* Read by entry.S: the opmasks are 64 bits wide (AVX512BW), not 16. */
unsigned char ukp_kmask_bw __attribute__((visibility("hidden")));

/* Read by entry.S: XSAVEC, which leaves out components in their initial
 * state (the AVX-512 ones, in a program that never used them). */
unsigned char ukp_xsavec __attribute__((visibility("hidden")));

static unsigned long long xgetbv0(void)
{
	unsigned lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((unsigned long long)hi << 32) | lo;
}

const struct ukp_arch_env *ukp_arch_engine;
long ukp_arch_self_off;

void ukp_arch_init(const struct ukp_arch_env *env)
{
	unsigned a, b, c, d;
	unsigned long tp;

	ukp_arch_engine = env;
	__asm__("mov %%fs:0, %0" : "=r"(tp));
	ukp_arch_self_off = (long)((unsigned long)env->self - tp);

	ukp_vec_level = 0;
	if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE) && (c & bit_AVX)) {
		unsigned long long xcr0 = xgetbv0();
		if ((xcr0 & 6) == 6)
			ukp_vec_level = 1;
		if ((xcr0 & 0xe6) == 0xe6 && __get_cpuid_count(7, 0, &a, &b, &c, &d) &&
		    (b & bit_AVX512F)) {
			ukp_vec_level = 2;
			ukp_kmask_bw = !!(b & bit_AVX512BW);
		}
	}

	if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE) &&
	    __get_cpuid_count(0xd, 0, &a, &b, &c, &d) && b >= 576)
		ukp_xsave_size = b;	/* size for the features in XCR0 */
	else
		ukp_xsave_size = 0;
	/* XSAVEC's compacted area is no larger than the standard one */
	ukp_xsavec = ukp_xsave_size && __get_cpuid_count(0xd, 1, &a, &b, &c, &d) && (a & 2);
}

#define G(r) uc->uc_mcontext.gregs[REG_##r]

void ukp_arch_regs_from_uc(struct pt_regs *regs, const ucontext_t *uc)
{
	regs->r15 = G(R15); regs->r14 = G(R14); regs->r13 = G(R13);
	regs->r12 = G(R12); regs->bp = G(RBP); regs->bx = G(RBX);
	regs->r11 = G(R11); regs->r10 = G(R10); regs->r9 = G(R9);
	regs->r8 = G(R8); regs->ax = G(RAX); regs->cx = G(RCX);
	regs->dx = G(RDX); regs->si = G(RSI); regs->di = G(RDI);
	regs->orig_ax = (unsigned long)-1;
	regs->ip = G(RIP);
	regs->flags = G(EFL);
	regs->sp = G(RSP);
	/* CSGSFS packs cs, gs, fs, ss as 16-bit fields */
	unsigned long csgsfs = G(CSGSFS);
	regs->cs = csgsfs & 0xffff;
	regs->ss = (csgsfs >> 48) & 0xffff;
}

/* pt_regs of a bare fast path's hit made whole (entry.S: it saved the
 * status flags, rax, rcx, rdi and r11 only: UKP_ARCH_BARE_SAVED), from the
 * context of a fault in its handler's own code: neither that path nor
 * the handler writes any other general register, so the others still
 * hold the probed code's values; and R above it, where the trampolines'
 * exit returns to. */
void ukp_arch_bare_fill(struct pt_regs *regs, const ucontext_t *uc)
{
	_Static_assert(UKP_ARCH_BARE_SAVED == (UKP_GPR(UKP_RAX) | UKP_GPR(UKP_RCX) |
					       UKP_GPR(UKP_RDI) | UKP_GPR(UKP_R11)),
		       "what entry.S saves");
	unsigned long addr, r;
	ukp_arch_bare_frame(regs, &addr, &r);
	regs->r15 = G(R15); regs->r14 = G(R14); regs->r13 = G(R13);
	regs->r12 = G(R12); regs->bp = G(RBP); regs->bx = G(RBX);
	regs->r10 = G(R10); regs->r9 = G(R9);
	regs->r8 = G(R8); regs->dx = G(RDX); regs->si = G(RSI);
	/* the status flags from the path's word (al OF, ah SF ZF AF PF CF,
	 * entry.S: BARE_SAVE), the others (DF, IF...) untouched since */
	unsigned long fw = regs->flags & 0xffff;
	regs->flags = ((unsigned long)G(EFL) & ~0x8d5UL) | ((fw >> 8) & 0xd5) | (fw & 1 ? 0x800 : 0);
	regs->orig_ax = (unsigned long)-1;
	regs->ip = addr;
	regs->sp = (unsigned long)regs + sizeof(*regs) + 8 + 128;
	regs->cs = 0x33;
	regs->ss = 0x2b;
	memcpy((char *)regs + sizeof(*regs), &r, sizeof(r));
}

/* Flags a user handler may not change: TF (we never single-step), IOPL,
 * VM, RF and the reserved bits. */
#define FLAGS_USER_MASK 0x00000dd5UL	/* CF PF AF ZF SF DF OF */

void ukp_arch_regs_to_uc(ucontext_t *uc, const struct pt_regs *regs)
{
	G(R15) = regs->r15; G(R14) = regs->r14; G(R13) = regs->r13;
	G(R12) = regs->r12; G(RBP) = regs->bp; G(RBX) = regs->bx;
	G(R11) = regs->r11; G(R10) = regs->r10; G(R9) = regs->r9;
	G(R8) = regs->r8; G(RAX) = regs->ax; G(RCX) = regs->cx;
	G(RDX) = regs->dx; G(RSI) = regs->si; G(RDI) = regs->di;
	G(RIP) = regs->ip;
	G(RSP) = regs->sp;
	G(EFL) = (G(EFL) & ~FLAGS_USER_MASK) | (regs->flags & FLAGS_USER_MASK);
}

unsigned long ukp_arch_uc_ip(const ucontext_t *uc) { return G(RIP); }
void ukp_arch_uc_set_ip(ucontext_t *uc, unsigned long ip) { G(RIP) = ip; }
unsigned long ukp_arch_uc_sp(const ucontext_t *uc) { return G(RSP); }
void ukp_arch_uc_set_sp(ucontext_t *uc, unsigned long sp) { G(RSP) = sp; }

int ukp_arch_trapnr(const ucontext_t *uc, int sig)
{
	/* the kernel records the hardware vector in the signal frame */
	long t = G(TRAPNO);
	if (t > 0 || sig == SIGFPE)
		return (int)t;
	switch (sig) {
	case SIGSEGV: return 14;
	case SIGBUS: return 14;
	case SIGILL: return 6;
	default: return (int)t;
	}
}

static int seg_base(int seg, unsigned long *base)
{
	long code = seg == 1 ? ARCH_GET_FS : ARCH_GET_GS;
	return syscall(SYS_arch_prctl, code, base) ? -EFAULT : 0;
}

static int effective_address(const struct ukp_insn *in, const struct pt_regs *regs,
			     unsigned long *ea)
{
	const unsigned long *r = (const unsigned long *)regs;
	unsigned long a = (unsigned long)in->mem.disp;

	if (in->mem.base == -2)
		a += in->addr + in->len;
	else if (in->mem.base >= 0)
		a += r[in->mem.base];
	else if (in->mem.base == -3)
		return -EFAULT;
	if (in->mem.index >= 0)
		a += r[in->mem.index] * in->mem.scale;
	else if (in->mem.index == -3)
		return -EFAULT;
	if (in->mem.seg) {
		unsigned long base;
		if (seg_base(in->mem.seg, &base))
			return -EFAULT;
		a += base;
	}
	*ea = in->mem.addr32 ? (uint32_t)a : a;
	return 0;
}

int ukp_arch_emulate_branch(const struct ukp_insn *in, struct pt_regs *regs)
{
	unsigned long target, next = in->addr + in->len;
	const unsigned long *r = (const unsigned long *)regs;

	switch (in->flow) {
	case UKP_FLOW_RET:
		if (ukp_copy_nofault(&target, (void *)regs->sp, 8))
			return -EFAULT;
		regs->ip = target;
		regs->sp += 8 + in->ret_pop;
		return 0;
	case UKP_FLOW_JMP_IND:
	case UKP_FLOW_CALL_IND:
		if (in->ind_reg >= 0) {
			target = r[in->ind_reg];
		} else {
			unsigned long ea;
			if (effective_address(in, regs, &ea) ||
			    ukp_copy_nofault(&target, (void *)ea, 8))
				return -EFAULT;
		}
		if (in->flow == UKP_FLOW_CALL_IND) {
			/* the push must not fault either: probe the stack first */
			unsigned long probe;
			if (ukp_copy_nofault(&probe, (void *)(regs->sp - 8), 8))
				return -EFAULT;
			*(unsigned long *)(regs->sp - 8) = next;
			regs->sp -= 8;
		}
		regs->ip = target;
		return 0;
	default:
		return -EINVAL;
	}
}
