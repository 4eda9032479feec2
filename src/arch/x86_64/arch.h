/* SPDX-License-Identifier: MIT */
/*
 * The architecture contract (private).  Modelled on the kernel's arch_*
 * split: generic code (kprobes.c, trap.c) knows sites, probes and threads;
 * everything that knows instruction encodings or register layouts lives
 * behind these functions.  An aarch64 port provides the same set.
 */
#ifndef UKP_ARCH_H
#define UKP_ARCH_H

#include <stdbool.h>
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
			int16_t sp_fix[UKP_SLOT_MAX]);

/* ---- jump optimisation ---------------------------------------------- */

#define UKP_ARCH_JMP_LEN	5	/* jmp rel32 */
#define UKP_REGION_MAX		6	/* instructions a region may cover */
/* ...and bytes, punned reads included: how far back the optimizer looks
 * for a region over an address (optimize.c) */
#define UKP_ARCH_REGION_BYTES_MAX	16

struct ukp_range { unsigned long lo, hi; };

/* What the analysis needs to know about the object holding the code. */
struct ukp_objdesc {
	const void *key;		/* the object (analyses are cached by it) */
	unsigned long exec_lo, exec_hi;
	unsigned long eh_hdr;		/* PT_GNU_EH_FRAME, or 0 */
	struct ukp_range *funcs;	/* function symbols, by address (malloc) */
	size_t nfuncs;
	const unsigned long *coderefs;	/* code addresses relocations make */
	size_t ncoderefs;
	bool refs_known;		/* ...and that is all of them (PIC) */
};

/* Which vector state the detour saves around the handlers. */
enum ukp_vsave {
	UKP_VSAVE_NONE,		/* no vector register live: MXCSR, FCW only */
	UKP_VSAVE_ARGS,		/* vector registers 0-7 (function entry) */
	UKP_VSAVE_ALL16,	/* vector registers 0-15 */
	UKP_VSAVE_ALL32,	/* zmm0-31 and k0-7 (AVX-512) */
	UKP_VSAVE_XSAVE,	/* anything else, or liveness unknown */
};

/* The instructions a jump replaces, and what the detour must keep. */
struct ukp_region {
	unsigned long addr;
	unsigned len;		/* bytes the jump overwrites: whole instructions,
				   plus unreachable padding after the last */
	unsigned ninsn;
	struct ukp_insn insn[UKP_REGION_MAX];
	enum ukp_vsave vsave;
	bool flags_dead;	/* no status flag live at addr (liveness) */
	uint8_t orig[16];	/* the original bytes of [addr, addr+len) */
	unsigned long next;	/* where the copy's fall-through goes: 0 is
				   addr + len (a run's segment: the next one) */
	bool pun;		/* one instruction of len < 5 bytes, whose jump
				   reads its rel32's high bytes from the code
				   after it (analyze.c: region_pun); orig holds
				   of ukp_arch_span() */
};

/* The bytes whose values a region's jump depends on: its own, and for a
 * punned jump those its rel32 reads on (at most the instruction's length
 * and 4: with as many prefixes as leave one byte of its own) */
#define UKP_ARCH_PUN_SPAN_MAX 8
static inline unsigned ukp_arch_span(const struct ukp_region *r)
{
	return r->pun ? r->len + 4 : r->len;
}
/* A punned jump with p prefixes: the first and last address its target
 * can be (the hop's), or false if p is too many */
bool ukp_arch_pun_window(const struct ukp_region *r, unsigned p, unsigned long *lo,
			 unsigned long *hi);
/* ...and its bytes (ukp_arch_span(r) of them; the ones after the
 * instruction unchanged), to target in that window: false if not in it */
bool ukp_arch_make_pun(uint8_t *out, const struct ukp_region *r, unsigned p,
		       unsigned long target);

/*
 * The safety checks of section 1.4.2, from decoding the function (and, once
 * per object, every function, the unwind tables and the landing pads).
 * func_lo/func_hi: the function holding addr.  0, or a negative errno with
 * the reason in why.  Not thread-safe (the optimizer's lock).
 */
int ukp_arch_opt_analyze(unsigned long addr, unsigned long func_lo,
			 unsigned long func_hi, const struct ukp_objdesc *obj,
			 struct ukp_region *r, char *why, size_t whylen);
/* The vector class and the status flags' liveness at addr alone (a run
 * of probed instructions: each one's segment); 0, or -ENOENT. */
int ukp_arch_opt_point(unsigned long addr, unsigned long func_lo, unsigned long func_hi,
		       const struct ukp_objdesc *obj, enum ukp_vsave *vsave, bool *flags_dead);
/* Objects went away: drop their cached analyses. */
void ukp_arch_opt_forget_if(bool (*gone)(const void *key));

/*
 * Where each byte of a detour (or slot) came from: fault mapping and
 * moving a thread stopped inside a region to the copy.
 */
#define UKP_COPY_MAP_MAX 256	/* a detour's bytes up to its copy's end */
struct ukp_copy_map {
	unsigned n;				/* instructions */
	uint16_t copy_off[UKP_REGION_MAX];	/* each one's copy, from buf[0] */
	uint16_t orig_off[UKP_REGION_MAX];	/* its offset in the region */
	uint16_t len;				/* bytes of buf */
	uint8_t idx[UKP_COPY_MAP_MAX];		/* byte -> instruction (0xff: entry) */
	int16_t sp_fix[UKP_COPY_MAP_MAX];
};

/*
 * The detour: { .quad sel; .quad list; .quad site; .quad trampoline;
 * lea -128(%rsp),%rsp; call *-19(%rip); R: <relocated region>;
 * jmp addr+len; entry: jmp rel32 to where sel says (its displacement
 * 4-aligned: retargeted by one store); 8-aligned, the detour's own copy
 * of the fast paths (entry.S, ukp_lean_tpl, which begins with jmp *sel)
 * }.  Returns its length; *entry is the offset the jump targets, *copy
 * the offset of the relocated region (where a hit that trapped resumes).
 * sel (the site's list is one lean or bare probe: ukp_arch_detour_sel)
 * says the lean or bare fast path, which runs that probe's pre_handler
 * with no call into ukprobes, or the call of the trampoline.  The trampoline finds the
 * site at R - 27 and the site's probe list at R - 35: a copy of
 * site->probes that optimize.c keeps in step (written with it, before any
 * grace period), so the hit path reads the list one load sooner than
 * through the site.  That load heads the chain every optimised hit waits
 * on (list, probe, the handler's own loads).
 *
 * kret: the variant for a function's entry with a return probe, which
 * lets the probe prime the return stack buffer (kret.S), without sel:
 * { lea copy(%rip),%r11; push %r11; jmp 1f; 5 bytes of int3;
 *   .quad list; .quad site; .quad trampoline;
 *   1: lea -120(%rsp),%rsp; call *-19(%rip); R: jmp *-8(%rsp);
 *   lea 8(%rsp),%rsp; copy: <relocated region>; jmp addr+len }
 */
#define UKP_DETOUR_MAX 2048
#define UKP_ARCH_KRET_DROP_LEN 5	/* the lea 8(%rsp),%rsp before the copy */
#define UKP_ARCH_KRET_R_LEN 9		/* from R to the copy */
#define UKP_ARCH_KRET_HDR 16		/* where its { list, site, trampoline }
					   is (8-aligned: the list and
					   trampoline words are switched by
					   one store each) */
#define UKP_ARCH_HDR_LIST 0		/* the header's words */
#define UKP_ARCH_HDR_SITE 8
#define UKP_ARCH_HDR_TRAMP 16
#define UKP_ARCH_HDR_SIZE 24
#define UKP_ARCH_SEL 0			/* the other variant's sel word */
#define UKP_ARCH_SEL_SIZE 8		/* and its header after it */
#define UKP_ARCH_R 43			/* and R */
int ukp_arch_build_detour(const struct ukp_region *r, uint8_t *buf,
			  unsigned long at, void *site, const void *list,
			  void (*tramp)(void), int sel,
			  bool kret, unsigned *entry, unsigned *copy,
			  struct ukp_copy_map *map);
/* The offset sel holds: a fast path of the detour whose entry is at
 * offset entry (UKP_SEL_LEAN: one lean probe; UKP_SEL_BARE: one bare
 * probe), or (UKP_SEL_TRAMP) the call of the trampoline. */
enum { UKP_SEL_TRAMP, UKP_SEL_LEAN, UKP_SEL_BARE };
unsigned ukp_arch_detour_sel(unsigned entry, int sel);
/* The probe point and R of a bare fast path's hit whose handler is
 * running on the frame of regs (entry.S: ukp_lean_tpl_bare) */
void ukp_arch_bare_frame(const struct pt_regs *regs, unsigned long *addr, unsigned long *r);
/* The registers a bare fast path saves (and uses): its handler may write
 * these only */
#define UKP_ARCH_BARE_SAVED (UKP_GPR(UKP_RAX) | UKP_GPR(UKP_RCX) | UKP_GPR(UKP_RDI) | \
			     UKP_GPR(UKP_R11))
/* The trampoline for a vector class. */
void (*ukp_arch_opt_tramp(enum ukp_vsave v))(void);
const char *ukp_arch_vsave_name(enum ukp_vsave v);

/*
 * 0 if the code of the function at fn and of every function it calls or
 * jumps to (directly, through a PLT stub, or through a read-only GOT
 * entry) reads and writes no vector,
 * mask, x87 or MMX register, nor MXCSR or the x87 control and status
 * words; else a negative errno with the reason in why.  bounds gives the
 * function holding an address.
 */
struct ukp_code_env {
	/* the function holding addr: 0, or -ENOENT */
	int (*bounds)(unsigned long addr, unsigned long *lo, unsigned long *hi);
	/* is the 8-byte slot at addr read-only memory (a RELRO GOT entry)? */
	bool (*read_only)(unsigned long addr);
};
int ukp_arch_code_gpr_only(unsigned long fn, const struct ukp_code_env *env,
			   char *why, size_t n);
/* a leaf that cannot change errno (no call, system call or TLS store): 0;
 * then *writes and *reads (if not NULL) have bit n set for every general
 * register n (x86 numbering: rax 0, rcx 1, rdx 2 ... r15 15) that one of
 * its instructions may write, or read (as an operand or in an address),
 * and *df (if not NULL) whether one reads or writes the direction flag
 * (a string instruction, pushf, std, cld, popf) */
int ukp_arch_code_leaf(unsigned long fn, const struct ukp_code_env *env,
		       uint16_t *writes, uint16_t *reads, bool *df);
#define UKP_GPR(n) ((uint16_t)(1u << (n)))
enum { UKP_RAX, UKP_RCX, UKP_RDX, UKP_RBX, UKP_RSP, UKP_RBP, UKP_RSI, UKP_RDI,
       UKP_R8, UKP_R9, UKP_R10, UKP_R11 };
/* jmp rel32 from addr to target */
void ukp_arch_make_jump(uint8_t out[UKP_ARCH_JMP_LEN], unsigned long addr,
			unsigned long target);

/* pt_regs <-> signal context */
void ukp_arch_regs_from_uc(struct pt_regs *regs, const ucontext_t *uc);
void ukp_arch_regs_to_uc(ucontext_t *uc, const struct pt_regs *regs);
void ukp_arch_bare_fill(struct pt_regs *regs, const ucontext_t *uc);
unsigned long ukp_arch_uc_ip(const ucontext_t *uc);
void ukp_arch_uc_set_ip(ucontext_t *uc, unsigned long ip);
unsigned long ukp_arch_uc_sp(const ucontext_t *uc);
void ukp_arch_uc_set_sp(ucontext_t *uc, unsigned long sp);
int ukp_arch_trapnr(const ucontext_t *uc, int sig);

/* Emulate a dynamic branch (ret, jmp/call indirect) on regs, for a probe
 * with a post_handler.  0, or -EFAULT when memory is unreadable (the
 * caller then runs the out-of-line copy, which faults for real). */
int ukp_arch_emulate_branch(const struct ukp_insn *insn, struct pt_regs *regs);


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

/*
 * What the generic engine gives the architecture code.  The arch layer is
 * the bottom one: its C files name nothing of the engine, and what they
 * need from it comes through here (the assembly hit paths' calls of the
 * C dispatchers are the engine's entry points, as the kernel's int3
 * handler calls kprobe_int3_handler()).
 */
struct ukp_arch_env {
	/* read [addr, addr+n) as the code was before any probe or ftrace
	 * patch: the decoder and the analyses never see an int3 or a jump
	 * of ours (kprobes.c) */
	void (*read_text)(unsigned long addr, uint8_t *buf, size_t n);
	/* does [lo, hi) overlap an ftrace patch site, code ftrace owns?
	 * (ftrace.c) */
	bool (*ftrace_overlaps)(unsigned long lo, unsigned long hi);
	/* the grace-period word every fast path loads (sync.c's ukp_gp) and
	 * the calling thread's thread-block pointer (ukp_self, initial-exec
	 * TLS: its offset from %fs, which ukp_arch_init() keeps, is the same
	 * in every thread): the detours' copies of the fast paths carry both
	 * as immediates (relocate.c) */
	const void *gp;
	const void *self;
};

/* Machine features, probed once; env is kept (static storage). */
void ukp_arch_init(const struct ukp_arch_env *env);
/* what ukp_arch_init() was given, and self's offset from %fs: for the
 * arch files only */
extern const struct ukp_arch_env *ukp_arch_engine;
extern long ukp_arch_self_off;

/* entry.S */
struct ukp_jmpbuf { unsigned long rbx, rbp, r12, r13, r14, r15, rsp, rip; };
int ukp_setjmp(struct ukp_jmpbuf *jb) __attribute__((returns_twice));
__attribute__((noreturn)) void ukp_longjmp(struct ukp_jmpbuf *jb, int val);
/* Back onto the frame of the lean trampoline (or a detour's copy of its
 * fast path) whose pt_regs is regs, leaving a signal handler like
 * ukp_longjmp: after its call of the C dispatch, which continues with
 * ukp_opt_dispatch_resume(t), or of its one pre_handler, as if that had
 * returned 0 (entry.S). */
struct ukp_thread;
struct pt_regs;
__attribute__((noreturn)) void ukp_opt_resume(struct pt_regs *regs, struct ukp_thread *t);
/* The same for a kretprobe's return handler: ukp_kret_common's frame at
 * sp goes on as if its call of ukp_kret_return had been one of
 * ukp_kret_return_resume(t) (kret.S). */
__attribute__((noreturn)) void ukp_kret_resume(unsigned long sp, struct ukp_thread *t);
void ukp_post_trampoline(void);
extern char ukp_post_trampoline_end[];
void ukp_opt_tramp_none(void);
void ukp_opt_tramp_args(void);
void ukp_opt_tramp_all16(void);
void ukp_opt_tramp_all32(void);
void ukp_opt_tramp_xsave(void);
void ukp_opt_tramp_lean(void);	/* no vector, x87 or MXCSR state */
void ukp_opt_tramp_lean_leaf(void);	/* ...nor errno: one leaf handler */
void ukp_opt_tramp_kret(void);	/* a plain kretprobe's entry, in place */
/* the lean fast path every detour copies, and the labels that end what
 * each copy patches (relocate.c) */
extern const char ukp_lean_tpl[], ukp_lean_tpl_end[], ukp_lean_tpl_sel[],
	ukp_lean_tpl_addr[], ukp_lean_tpl_tls[], ukp_lean_tpl_gp[],
	ukp_lean_tpl_list[], ukp_lean_tpl_r2[], ukp_lean_tpl_jmp_r[],
	ukp_lean_tpl_call[], ukp_lean_tpl_bare[], ukp_lean_tpl_bare_tls[],
	ukp_lean_tpl_bare_gp[], ukp_lean_tpl_bare_list[], ukp_lean_tpl_bare_ret[],
	ukp_lean_tpl_bare_tls2[], ukp_lean_tpl_bare_jmp_r[],
	ukp_lean_tpl_bare_addr[], ukp_lean_tpl_bare_call[], ukp_lean_tpl_fb[],
	ukp_lean_tpl_fb_end[], ukp_lean_tpl_bare_fb[], ukp_lean_tpl_bare_fb_end[];
/* a fault in a bare fast path's handler taken: out through regs, made whole */
__attribute__((noreturn)) void ukp_opt_resume_bare(struct pt_regs *regs, struct ukp_thread *t);
void ukp_opt_exit_rare(void);
extern unsigned long ukp_xsave_size;	/* regs.c: 0 without XSAVE */
extern char ukp_opt_tramp_begin[], ukp_opt_tramp_end[];
extern char ukp_post_slow_trap[];	/* the int3 of the trampoline's slow exit */
extern char ukp_nofault_begin[], ukp_nofault_end[], ukp_nofault_fixup[];
long ukp_copy_nofault(void *dst, const void *src, size_t n);

#endif
