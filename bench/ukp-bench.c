/* SPDX-License-Identifier: MIT */
/*
 * ukp-bench: nanoseconds per probe hit, beside floors and peers measured in
 * the same run.
 *
 *	ukp-bench [--quick] [--scale F] [-n HITS] [-r RUNS] [ROW...]
 *	ukp-bench --list
 *
 * Every row is a descriptor in rows[] below: a target function, a setup
 * that arms whatever is being measured, a check that the handlers fired
 * exactly once per call, and a teardown.  One run of a row is
 *
 *	setup; warm-up calls; timed calls; check; teardown
 *
 * and the runs are interleaved (run 1 of every row, then run 2 of every
 * row, ...) so that a load change on the machine hits every row alike.
 * Each run's timed calls are split into SLICES slices, each timed on its
 * own, and the run's figure is its fastest slice: the cost when nothing
 * else on the machine (a shared 2-core VM here) got in the way; a slow
 * slice is interference, not the code.  Every row is measured the same
 * way, so the ratios stay fair.  The table shows the median of the runs.
 *
 * The targets are written in a top-level asm() block so that the probed
 * instruction is known exactly.  Most are the same instruction pair:
 *
 *	lea 1(%rdi),%rax	<- probed
 *	ret
 *
 * lea is an instruction that the kernel's uprobes single-step (they
 * emulate nops, push, jmp and call instead), and it is one a ukprobe has
 * to run out of line.  "floor" and "uprobe5" put 5 bytes (a call, a nop)
 * before that pair, "om" probes the middle of a function; every target
 * returns x + 1.  Each timed call adds its return value to a sum that is
 * checked as well, so an out-of-line copy that computed something else
 * is caught.
 *
 * Rows flagged ROW_CHILD are measured in a process forked before anything
 * else happens, which never calls into ukprobes (the "int3" floor installs
 * its own SIGTRAP handler there, which would otherwise fight the
 * library's).
 *
 * The rows, with their floors and peers:
 *
 *	call	the bare call of a target
 *	floor	the floor of a jump-optimised probe: the target starts with a
 *		5-byte call into a hand-written stub that saves and restores
 *		what a detour must and calls an empty C function
 *	int3	the floor of a trap-based probe
 *	uprobe	kernel uprobe on the lea (single-stepped)
 *	uprobe5	kernel uprobe on a 5-byte nop, which newer kernels (6.18)
 *		optimise into a call to a trampoline
 *	b, k	breakpoint ukprobes (optimisation off)
 *	b100k	b among 100,000 other probes
 *	o	optimised ukprobe at a function entry (region lea + ret)
 *	om	optimised ukprobe mid-function with %xmm0 live across it
 *	ol	o with a handler that reads a register (pt_regs built)
 *	o10k	not ns per hit: milliseconds to register 10,000 optimisable
 *		probes in one batch, to wait for the optimizer and to
 *		unregister them (a table of its own)
 *
 * A row meant to measure an optimised probe fails (exit status 1) when
 * the probe is not optimised after wait_for_kprobe_optimizer(): it never
 * reports the cost of a breakpoint under an optimised name.
 *
 * Adding a row (e.g. "r", "ro"): define a target with UKPB_TARGET, write
 * setup/check/teardown (or reuse the kprobe ones with another kp_ctx),
 * and add a line to rows[].
 */
#include <ukprobes.h>

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_HITS	200000L	/* per run of a trap row */
#define DEFAULT_RUNS	5
#define QUICK_HITS	20000L
#define QUICK_RUNS	3
#define SLICES		20	/* a run is timed in slices: see the header */
#define CALL_MULT	100	/* the "call" row is ~1000x cheaper */
#define OPT_MULT	10	/* optimised probes: no trap, but a call into
				   the engine */
#define MAX_RUNS	99
#define MSG_LEN		200

#define container_of(ptr, type, member) \
	((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* ------------------------------------------------------------------ */
/* Targets                                                             */

/*
 * A global function in .text; body is asm text.  Globals (and -rdynamic)
 * let the engine and kprobes_list() name them.
 */
#define UKPB_TARGET(name, align, body)				\
	"	.pushsection .text, \"ax\", @progbits\n"		\
	"	.globl " #name "\n"					\
	"	.type " #name ", @function\n"				\
	"	.p2align " #align "\n"					\
	#name ":\n"							\
	body								\
	"	.size " #name ", . - " #name "\n"			\
	"	.p2align " #align ", 0xcc\n"				\
	"	.popsection\n"

#define LEA_RET		"	lea 1(%rdi), %rax\n	ret\n"

/*
 * The "floor" stub: what an ideal detour does around a handler call, and
 * nothing else.  The target's first instruction is `call ukpb_floor_stub`,
 * the 5 bytes a jump-optimised probe patches in.
 *
 *	ukpb_tgt_floor:			stack in the stub, after the pushes:
 *	  call ukpb_floor_stub		  [ret into ukpb_tgt_floor+5]
 *	  lea 1(%rdi),%rax		  128 bytes: the red zone, untouched
 *	  ret				  flags
 *					  rax rcx rdx rbx rbp rsi rdi
 *					  r8 ... r15	<- %rsp = %rbx
 *					  (0 or 8 bytes of alignment)
 *
 * The call itself writes its return address at -8(%rsp); at a function
 * entry that is free (the function has not used its red zone yet), which
 * is why this floor is a function entry.  A detour at an arbitrary place
 * is entered by jmp instead; either way it steps over the red zone first,
 * as this stub does, so the stub costs what that detour costs.  cld:
 * the probed code may run with DF set, a C function must not (CLD_IF_DF).
 * Flags are saved with pushfq and put back without popfq (FLAGS_RESTORE below):
 * popfq alone costs ~7 ns (measured on an AMD EPYC VM), near half the stub.
 * Vector state is not saved: the empty function touches none (a real
 * detour must keep it for handlers that do).
 */
#define PUSH_GPRS							\
	"	push %rax\n	push %rcx\n	push %rdx\n	push %rbx\n"	\
	"	push %rbp\n	push %rsi\n	push %rdi\n	push %r8\n"	\
	"	push %r9\n	push %r10\n	push %r11\n	push %r12\n"	\
	"	push %r13\n	push %r14\n	push %r15\n"
#define POP_GPRS							\
	"	pop %r15\n	pop %r14\n	pop %r13\n	pop %r12\n"	\
	"	pop %r11\n	pop %r10\n	pop %r9\n	pop %r8\n"	\
	"	pop %rdi\n	pop %rsi\n	pop %rbp\n	pop %rbx\n"	\
	"	pop %rdx\n	pop %rcx\n	pop %rax\n"

/*
 * Flags back without popfq (microcoded: ~7 ns here, as dear as the rest
 * of the stub): DF by std, OF by an add that overflows exactly when it
 * was set, SF ZF AF PF CF by sahf; the same as ukprobes' detours.  %rsp
 * points at the saved flags; rax and rcx are restored after.
 */
#define FLAGS_RESTORE							\
	"	push %rax\n	push %rcx\n"				\
	"	testw $0x400, 16(%rsp)\n	jz 1f\n	std\n1:\n"	\
	"	movzbl 17(%rsp), %ecx\n	shr $3, %ecx\n	and $1, %ecx\n" \
	"	mov $0x7f, %al\n	add %cl, %al\n"			\
	"	mov 16(%rsp), %ah\n	sahf\n"				\
	"	pop %rcx\n	pop %rax\n"

/* DF clear for C, as ukprobes' detours do it: cld only when the saved
 * flags (at 120(%rbx), above the 15 registers) have DF set - cld costs
 * ~1 ns here, the test less. */
#define CLD_IF_DF							\
	"	testl $0x400, 120(%rbx)\n	jz 2f\n	cld\n2:\n"

/* "floorv": the vector state a detour calling arbitrary C must keep on
 * top: 16 ymm registers (xmm without AVX is not measured: this bench
 * needs AVX), MXCSR and the x87 control word. */
#define V1(i) "	vmovdqu %ymm" #i ", " #i "*32+32(%rsp)\n"
#define L1(i) "	vmovdqu " #i "*32+32(%rsp), %ymm" #i "\n"
#define VEC16(a, b, c) V1(0) V1(1) V1(2) V1(3) V1(4) V1(5) V1(6) V1(7) \
	V1(8) V1(9) V1(10) V1(11) V1(12) V1(13) V1(14) V1(15)
#define VEC16_LOAD L1(0) L1(1) L1(2) L1(3) L1(4) L1(5) L1(6) L1(7) \
	L1(8) L1(9) L1(10) L1(11) L1(12) L1(13) L1(14) L1(15)

/* "floorz": the same on AVX-512, where a detour must keep zmm0-31 and the
 * opmasks (kmovw: AVX512F alone; the width costs nothing here) */
#define Z1(i) "	vmovdqu64 %zmm" #i ", " #i "*64+64(%rsp)\n"
#define ZL1(i) "	vmovdqu64 " #i "*64+64(%rsp), %zmm" #i "\n"
#define K1(i) "	kmovw %k" #i ", 2112+" #i "*8(%rsp)\n"
#define KL1(i) "	kmovw 2112+" #i "*8(%rsp), %k" #i "\n"
#define ZMM32 Z1(0) Z1(1) Z1(2) Z1(3) Z1(4) Z1(5) Z1(6) Z1(7) Z1(8) Z1(9) \
	Z1(10) Z1(11) Z1(12) Z1(13) Z1(14) Z1(15) Z1(16) Z1(17) Z1(18) Z1(19) \
	Z1(20) Z1(21) Z1(22) Z1(23) Z1(24) Z1(25) Z1(26) Z1(27) Z1(28) Z1(29) \
	Z1(30) Z1(31) K1(0) K1(1) K1(2) K1(3) K1(4) K1(5) K1(6) K1(7)
#define ZMM32_LOAD ZL1(0) ZL1(1) ZL1(2) ZL1(3) ZL1(4) ZL1(5) ZL1(6) ZL1(7) \
	ZL1(8) ZL1(9) ZL1(10) ZL1(11) ZL1(12) ZL1(13) ZL1(14) ZL1(15) ZL1(16) \
	ZL1(17) ZL1(18) ZL1(19) ZL1(20) ZL1(21) ZL1(22) ZL1(23) ZL1(24) \
	ZL1(25) ZL1(26) ZL1(27) ZL1(28) ZL1(29) ZL1(30) ZL1(31) KL1(0) KL1(1) \
	KL1(2) KL1(3) KL1(4) KL1(5) KL1(6) KL1(7)

/* floorv's and floorz's stub: the floor's, with a save area of area
 * bytes aligned to align below the registers, MXCSR and the x87 control
 * word in its first 8, and save/load around the empty C call */
#define VEC_FLOOR_STUB(area, align, save, load)			\
	"	lea -128(%rsp), %rsp\n"				\
	"	pushfq\n"						\
	PUSH_GPRS							\
	"	mov %rsp, %rbx\n"					\
	"	sub $(" area "), %rsp\n"				\
	"	and $-" align ", %rsp\n"				\
	"	stmxcsr 0(%rsp)\n"					\
	"	fnstcw 4(%rsp)\n"					\
	save								\
	CLD_IF_DF							\
	"	mov %rbx, %rdi\n"					\
	"	call ukpb_floor_empty\n"				\
	load								\
	"	ldmxcsr 0(%rsp)\n"					\
	"	fldcw 4(%rsp)\n"					\
	"	mov %rbx, %rsp\n"					\
	POP_GPRS							\
	FLAGS_RESTORE							\
	"	lea 128+8(%rsp), %rsp\n"				\
	"	ret\n"

/* A global 32-bit constant in .rodata: sizes and offsets of the code. */
#define DATA_LONG(name, expr)						\
	"	.pushsection .rodata, \"a\", @progbits\n"		\
	"	.globl " #name "\n"					\
	"	.type " #name ", @object\n"				\
	"	.p2align 2\n"						\
	#name ":\n"							\
	"	.long " expr "\n"					\
	"	.size " #name ", 4\n"					\
	"	.popsection\n"

/*
 * "om": %xmm0 = x + 1 is computed before the probed instruction and used
 * after it, so a detour that loses vector state returns a wrong value.
 * The probed lea has a disp32 (7 bytes): the optimised region is that one
 * instruction.  ukpb_om_off is its offset in the function.
 */
#define OM_BODY								\
	"	movq %rdi, %xmm0\n"					\
	"	pcmpeqd %xmm1, %xmm1\n"		/* -1 in each qword */	\
	"	psubq %xmm1, %xmm0\n"		/* xmm0 = x + 1 */	\
	".Lukpb_om_probe:\n"						\
	"	lea 0x1000(%rdi), %rax\n"	/* <- probed */		\
	"	movq %xmm0, %rdx\n"					\
	"	sub %rdi, %rax\n"					\
	"	lea -0x1000(%rax,%rdx), %rax\n"	/* x + 1 */		\
	"	ret\n"

/*
 * "o10k": 10,000 functions ukpb_many_0000 ... ukpb_many_9999, each
 * lea 1(%rdi),%rax; ret padded with int3 to 16 bytes, so function i is at
 * ukpb_many_0000 + 16 * i; ukpb_many_size is the size of them all.  (No
 * start/end labels in .text: only functions there, so the engine finds
 * each probe's function by its own symbol.)
 */
#define MANY		10000
#define MANY_STRIDE	16
#define MANY_PHASES	3	/* register, optimize, unregister */
#define DIGITS		"0,1,2,3,4,5,6,7,8,9"
#define MANY_FN		"ukpb_many_\\a\\b\\c\\d"

__asm__(
	UKPB_TARGET(ukpb_tgt_call, 6, LEA_RET)
	UKPB_TARGET(ukpb_tgt_floor, 6,
		    "	call ukpb_floor_stub\n" LEA_RET)
	UKPB_TARGET(ukpb_floor_stub, 6,
		    "	lea -128(%rsp), %rsp\n"
		    "	pushfq\n"
		    PUSH_GPRS
		    "	mov %rsp, %rbx\n"
		    "	and $-16, %rsp\n"
		    CLD_IF_DF
		    "	mov %rbx, %rdi\n"
		    "	call ukpb_floor_empty\n"
		    "	mov %rbx, %rsp\n"
		    POP_GPRS
		    FLAGS_RESTORE
		    "	lea 128+8(%rsp), %rsp\n"
		    "	ret\n")
	UKPB_TARGET(ukpb_tgt_floorv, 6,
		    "	call ukpb_floorv_stub\n" LEA_RET)
	UKPB_TARGET(ukpb_floorv_stub, 6,
		    VEC_FLOOR_STUB("32+32*16", "32", VEC16("vmovdqu %%ymm", ", ", "(%rsp)"),
				   VEC16_LOAD))
	UKPB_TARGET(ukpb_tgt_floorz, 6,
		    "	call ukpb_floorz_stub\n" LEA_RET)
	UKPB_TARGET(ukpb_floorz_stub, 6,
		    VEC_FLOOR_STUB("64+64*32+64", "64", ZMM32 "	vzeroupper\n", ZMM32_LOAD))
	UKPB_TARGET(ukpb_tgt_int3, 6, "	int3\n" LEA_RET)
	/* alone on its page: the kernel swaps the page for a copy */
	UKPB_TARGET(ukpb_tgt_uprobe, 12, LEA_RET)
	/* nopl 0x0(%rax,%rax,1), written as bytes: an assembler may pick
	 * another encoding, and the kernel optimises only this one */
	UKPB_TARGET(ukpb_tgt_uprobe5, 12,
		    "	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n" LEA_RET)
	UKPB_TARGET(ukpb_tgt_b, 6, LEA_RET)
	UKPB_TARGET(ukpb_tgt_k, 6, LEA_RET)
	UKPB_TARGET(ukpb_tgt_b100k, 6, LEA_RET)
	/* lea + ret: exactly the 5 bytes a jump replaces */
	UKPB_TARGET(ukpb_tgt_o, 6, LEA_RET)
	UKPB_TARGET(ukpb_tgt_om, 6, OM_BODY)
	/* return probes and jprobes: one target each */
	UKPB_TARGET(ukpb_tgt_j, 6, LEA_RET)
	UKPB_TARGET(ukpb_tgt_r, 6, LEA_RET)
	UKPB_TARGET(ukpb_tgt_rb, 6, LEA_RET)
	UKPB_TARGET(ukpb_tgt_ro, 6, LEA_RET)
	UKPB_TARGET(ukpb_tgt_kr, 6, LEA_RET)
	UKPB_TARGET(ukpb_tgt_jr, 6, LEA_RET)
	UKPB_TARGET(ukpb_tgt_uret, 12, LEA_RET)
	DATA_LONG(ukpb_om_off, ".Lukpb_om_probe - ukpb_tgt_om")
	/* 100,000 one-byte nops: the other probes of the "b100k" row */
	UKPB_TARGET(ukpb_nop_sled, 6, "	.rept 100000\n	nop\n	.endr\n	ret\n")
	"	.pushsection .text, \"ax\", @progbits\n"
	"	.p2align 12, 0xcc\n"
	"	.irp a," DIGITS "\n	.irp b," DIGITS "\n"
	"	.irp c," DIGITS "\n	.irp d," DIGITS "\n"
	"	.globl " MANY_FN "\n"
	"	.type " MANY_FN ", @function\n"
	MANY_FN ":\n"
	LEA_RET
	"	.size " MANY_FN ", . - " MANY_FN "\n"
	"	.p2align 4, 0xcc\n"
	"	.endr\n	.endr\n	.endr\n	.endr\n"
	".Lukpb_many_end:\n"
	"	.p2align 12, 0xcc\n"
	"	.popsection\n"
	DATA_LONG(ukpb_many_size, ".Lukpb_many_end - ukpb_many_0000")
);

typedef long (*target_fn)(long);
long ukpb_tgt_call(long);
long ukpb_tgt_floor(long);
long ukpb_tgt_floorv(long);
long ukpb_tgt_floorz(long);
long ukpb_tgt_int3(long);
long ukpb_tgt_uprobe(long);
long ukpb_tgt_uprobe5(long);
long ukpb_tgt_b(long);
long ukpb_tgt_k(long);
long ukpb_tgt_b100k(long);
long ukpb_tgt_o(long);
long ukpb_tgt_om(long);
long ukpb_tgt_j(long);
long ukpb_tgt_r(long);
long ukpb_tgt_rb(long);
long ukpb_tgt_ro(long);
long ukpb_tgt_kr(long);
long ukpb_tgt_jr(long);
long ukpb_tgt_uret(long);
void ukpb_nop_sled(void);
long ukpb_many_0000(long);
extern const unsigned int ukpb_om_off, ukpb_many_size;

/* Called by the floor stub: empty, but a real call. */
void ukpb_floor_empty(void *saved);
__attribute__((noinline, used)) void ukpb_floor_empty(void *saved)
{
	__asm__ volatile("" : : "r"(saved) : "memory");
}

/* The measured loop, the same for every row. */
static __attribute__((noinline)) long run_loop(target_fn fn, long n)
{
	long sum = 0;

	/* hide fn, so the call stays an indirect call in every row */
	__asm__ volatile("" : "+r"(fn));
	for (long i = 0; i < n; i++)
		sum += fn(i);
	return sum;
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ------------------------------------------------------------------ */
/* Rows                                                                */

/* ROW_OPT: an optimised probe, compared with "floor" and "uprobe5";
 * ROW_BATCH: no target; batch() measures MANY_PHASES times in ms */
enum { ROW_CHILD = 1, ROW_PROBE = 2, ROW_GOAL = 4, ROW_OPT = 8,
       ROW_BATCH = 16 };
enum { ST_OK, ST_NA, ST_FAIL };

struct row {
	const char *name;
	const char *what;
	target_fn target;
	unsigned flags;
	long mult;			/* hits per run = mult * hits */
	/* 0, or ST_NA / ST_FAIL with msg set */
	int (*setup)(struct row *r, char *msg);
	/* calls: the number of calls since setup; 0, or ST_FAIL with msg */
	int (*check)(struct row *r, long calls, char *msg);
	void (*teardown)(struct row *r);
	/* ROW_BATCH: 0 with ms[] set, or ST_NA / ST_FAIL with msg set */
	int (*batch)(struct row *r, double *ms, char *msg);
	void *ctx;

	/* results */
	int selected, state;
	char msg[MSG_LEN];
	int nruns;
	double ns[MAX_RUNS];
	double med;
	double ms[MANY_PHASES][MAX_RUNS], ms_med[MANY_PHASES];	/* ROW_BATCH */
};

static void msgf(char *msg, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void msgf(char *msg, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, MSG_LEN, fmt, ap);
	va_end(ap);
}

static const char *errname(int e)
{
	const char *s = strerrorname_np(e);

	return s ? s : "?";
}

/* --- int3: bare trap round trip, in the clean child --- */

static volatile unsigned long int3_hits;
static struct sigaction int3_old;

static void int3_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
	int3_hits++;	/* the kernel left rip after the int3 */
}

static int avx512_setup(struct row *r, char *msg)
{
	(void)r;
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx512f")) {
		msgf(msg, "no AVX-512 here");
		return ST_NA;
	}
	return 0;
}

static int int3_setup(struct row *r, char *msg)
{
	struct sigaction sa;

	(void)r;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = int3_handler;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTRAP, &sa, &int3_old)) {
		msgf(msg, "sigaction: %s", strerror(errno));
		return ST_NA;
	}
	int3_hits = 0;
	return 0;
}

static int int3_check(struct row *r, long calls, char *msg)
{
	(void)r;
	if (int3_hits != (unsigned long)calls) {
		msgf(msg, "SIGTRAP handler ran %lu times for %ld calls",
		     int3_hits, calls);
		return ST_FAIL;
	}
	return 0;
}

static void int3_teardown(struct row *r)
{
	(void)r;
	sigaction(SIGTRAP, &int3_old, NULL);
}

/* --- uprobe, uprobe5: kernel uprobes through tracefs --- */

/*
 * Both rows use one event name, probe_<pid> (scripts/bench removes those
 * a killed run left): a row creates it in setup and removes it in
 * teardown, so at most one exists at a time.
 */
static struct {
	int tried, ok;			/* path and tracefs found */
	char why[MSG_LEN];		/* why not */
	char exe[PATH_MAX];
	char dir[64];			/* tracefs */
	int mounted;			/* by us: unmount at exit */
	char name[64];			/* probe_<pid> */
	char events[128], enable[192], profile[128];
	char del[128];
	volatile sig_atomic_t armed;	/* event exists */
} up;

/* A row's probe point: the row's target in /proc/self/exe. */
struct up_ctx {
	int tried, ok;			/* offset computed */
	char why[MSG_LEN];		/* why not */
	char add[PATH_MAX + 128];	/* the uprobe_events line */
	int ret;			/* a uretprobe ("r:") */
	unsigned char first;		/* target's first byte while armed */
};

struct find_obj {
	uintptr_t addr, bias;
	int found, main_exe;
};

static int find_obj_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	struct find_obj *f = data;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && f->addr >= lo &&
		    f->addr < lo + ph->p_memsz) {
			f->found = 1;
			f->bias = info->dlpi_addr;
			f->main_exe = !info->dlpi_name || !info->dlpi_name[0];
			return 1;
		}
	}
	return 0;
}

/* File offset in /proc/self/exe of the code at addr; 0 or -1 with why. */
static int exe_offset(const void *addr, unsigned long *off, char *why)
{
	struct find_obj f = { .addr = (uintptr_t)addr };
	ElfW(Ehdr) eh;
	ElfW(Phdr) ph;
	unsigned char fbytes[8];
	int fd, ret = -1;

	dl_iterate_phdr(find_obj_cb, &f);
	if (!f.found || !f.main_exe) {
		msgf(why, "target not found in the main executable's segments");
		return -1;
	}
	uintptr_t v = f.addr - f.bias;

	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		msgf(why, "/proc/self/exe: %s", strerror(errno));
		return -1;
	}
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(ph)) {
		msgf(why, "/proc/self/exe: not a 64-bit ELF file");
		goto out;
	}
	for (int i = 0; i < eh.e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph), eh.e_phoff + i * sizeof(ph)) !=
		    sizeof(ph)) {
			msgf(why, "/proc/self/exe: short program header");
			goto out;
		}
		if (ph.p_type != PT_LOAD || v < ph.p_vaddr ||
		    v - ph.p_vaddr >= ph.p_filesz)
			continue;
		*off = ph.p_offset + (v - ph.p_vaddr);
		/* the file must hold the bytes we run */
		if (pread(fd, fbytes, sizeof(fbytes), *off) != sizeof(fbytes) ||
		    memcmp(fbytes, addr, sizeof(fbytes))) {
			msgf(why, "/proc/self/exe at 0x%lx differs from the "
			     "code in memory (binary rebuilt?)", *off);
			goto out;
		}
		ret = 0;
		goto out;
	}
	msgf(why, "no PT_LOAD of /proc/self/exe holds vaddr 0x%lx",
	     (unsigned long)v);
out:
	close(fd);
	return ret;
}

/* Writes s to path; 0 or an errno.  Async-signal-safe. */
static int write_file(const char *path, const char *s, int append)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC | (append ? O_APPEND : 0));
	int e = 0;

	if (fd < 0)
		return errno;
	if (write(fd, s, strlen(s)) < 0)
		e = errno;
	close(fd);
	return e;
}

static int tracefs_find(char *why)
{
	static const char *const dirs[] = {
		"/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
	char p[128];

	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
			snprintf(p, sizeof(p), "%s/uprobe_events", dirs[i]);
			if (access(p, W_OK) == 0) {
				snprintf(up.dir, sizeof(up.dir), "%s", dirs[i]);
				return 0;
			}
		}
		if (pass == 0) {
			if (access("/sys/kernel/tracing", F_OK)) {
				msgf(why, "no /sys/kernel/tracing (tracefs "
				     "not in this kernel?)");
				return -1;
			}
			if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0,
				  NULL)) {
				msgf(why, "mount -t tracefs: %s",
				     strerror(errno));
				return -1;
			}
			up.mounted = 1;
		}
	}
	msgf(why, "tracefs has no uprobe_events (CONFIG_UPROBE_EVENTS off?)");
	return -1;
}

static void uprobe_prepare(void)
{
	ssize_t n;

	up.tried = 1;
	if (geteuid() != 0) {
		msgf(up.why, "not root");
		return;
	}
	n = readlink("/proc/self/exe", up.exe, sizeof(up.exe) - 1);
	if (n < 0) {
		msgf(up.why, "readlink /proc/self/exe: %s", strerror(errno));
		return;
	}
	up.exe[n] = 0;
	if (strpbrk(up.exe, " \t\n")) {
		msgf(up.why, "executable path has white space: %s", up.exe);
		return;
	}
	if (tracefs_find(up.why))
		return;
	snprintf(up.name, sizeof(up.name), "probe_%d", (int)getpid());
	snprintf(up.events, sizeof(up.events), "%s/uprobe_events", up.dir);
	snprintf(up.profile, sizeof(up.profile), "%s/uprobe_profile", up.dir);
	snprintf(up.enable, sizeof(up.enable), "%s/events/ukpbench/%s/enable",
		 up.dir, up.name);
	snprintf(up.del, sizeof(up.del), "-:ukpbench/%s\n", up.name);
	up.ok = 1;
}

static void uprobe_prepare_row(struct row *r, struct up_ctx *u)
{
	unsigned long off;

	u->tried = 1;
	if (exe_offset((const void *)r->target, &off, u->why))
		return;
	snprintf(u->add, sizeof(u->add), "%c:ukpbench/%s %s:0x%lx\n",
		 u->ret ? 'r' : 'p', up.name, up.exe, off);
	u->ok = 1;
}

/* Disables and removes the event.  Async-signal-safe. */
static int uprobe_remove(void)
{
	int e;

	write_file(up.enable, "0\n", 0);
	e = write_file(up.events, up.del, 1);
	if (e == ENOENT)	/* not there: nothing to do */
		e = 0;
	if (!e)
		up.armed = 0;
	return e;
}

static int uprobe_setup(struct row *r, char *msg)
{
	struct up_ctx *u = r->ctx;
	int e;

	if (!up.tried)
		uprobe_prepare();
	if (!up.ok) {
		msgf(msg, "%s", up.why);
		return ST_NA;
	}
	if (!u->tried)
		uprobe_prepare_row(r, u);
	if (!u->ok) {
		msgf(msg, "%s", u->why);
		return ST_NA;
	}
	uprobe_remove();	/* a leftover of a killed run with our pid */
	up.armed = 1;
	e = write_file(up.events, u->add, 1);
	if (e) {
		up.armed = 0;
		msgf(msg, "writing '%.*s' to uprobe_events: %s",
		     (int)strlen(u->add) - 1, u->add, strerror(e));
		return ST_NA;
	}
	e = write_file(up.enable, "1\n", 0);
	if (e) {
		uprobe_remove();
		msgf(msg, "enabling ukpbench/%s: %s", up.name, strerror(e));
		return ST_NA;
	}
	return 0;
}

/* Hits of our event in uprobe_profile: "  <file> <event> <hits>". */
static long uprobe_hits(char *msg)
{
	char line[PATH_MAX + 128], file[PATH_MAX], ev[128];
	unsigned long hits;
	long ret = -1;
	FILE *f = fopen(up.profile, "re");

	if (!f) {
		msgf(msg, "%s: %s", up.profile, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%4095s %127s %lu", file, ev, &hits) == 3 &&
		    !strcmp(ev, up.name))
			ret = (long)hits;
	fclose(f);
	if (ret < 0)
		msgf(msg, "ukpbench/%s missing from uprobe_profile", up.name);
	return ret;
}

static int uprobe_check(struct row *r, long calls, char *msg)
{
	struct up_ctx *u = r->ctx;
	long hits = uprobe_hits(msg);

	/* what the kernel made of the target: 0xcc, or 0xe8 (a call to the
	 * uprobe trampoline) where it optimised the probe */
	u->first = *(const volatile unsigned char *)(void *)r->target;
	if (hits < 0)
		return ST_FAIL;
	if (hits != calls) {
		msgf(msg, "uprobe hit %ld times for %ld calls", hits, calls);
		return ST_FAIL;
	}
	return 0;
}

static void uprobe_teardown(struct row *r)
{
	int e;

	(void)r;
	e = uprobe_remove();
	if (e)
		fprintf(stderr, "ukp-bench: removing ukpbench/%s: %s\n",
			up.name, strerror(e));
}

/* --- ukprobes: struct kprobe rows --- */

struct kp_ctx {
	struct kprobe kp;
	int post;			/* also a post_handler */
	int opt;			/* 0: optimisation off while measured,
					   1: on, and the probe must be optimised */
	/* NULL: the probe is on the target's entry, by address; else by
	   symbol_name, at *off from the target's entry */
	const char *sym;
	const unsigned int *off;
	int opt_saved;			/* knob value to restore, or -1 */
	int vec;			/* the pre_handler does double arithmetic */
	int regs;			/* the pre_handler reads a register */
	unsigned long pre_hits, post_hits, sum;
	double acc;
};

static int kp_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)regs;
	container_of(p, struct kp_ctx, kp)->pre_hits++;
	return 0;
}

/* A handler that reads its registers (an argument, as tracing handlers
 * do), so its detour builds pt_regs: the lean path, not the bare one */
static int kp_pre_regs(struct kprobe *p, struct pt_regs *regs)
{
	struct kp_ctx *c = container_of(p, struct kp_ctx, kp);
	c->sum += regs->di;
	c->pre_hits++;
	return 0;
}

/* A handler that touches vector state (SSE double arithmetic): its
 * probe's detour must save what is live there, unlike kp_pre's. */
static int kp_pre_vec(struct kprobe *p, struct pt_regs *regs)
{
	struct kp_ctx *c = container_of(p, struct kp_ctx, kp);
	c->acc = c->acc * 0.5 + (double)(long)regs->di;
	c->pre_hits++;
	return 0;
}

static void kp_post(struct kprobe *p, struct pt_regs *regs,
		    unsigned long flags)
{
	(void)regs, (void)flags;
	container_of(p, struct kp_ctx, kp)->post_hits++;
}

/* Sets the optimisation knob to on (0/1) for a row; the value to restore
 * afterwards, or -1 when it was already so. */
static int opt_knob(int on)
{
	int was = kprobes_get_optimization();

	if (was >= 0 && !was != !on && kprobes_set_optimization(on) == 0)
		return was;
	return -1;
}

static void opt_knob_restore(int saved)
{
	if (saved >= 0)
		kprobes_set_optimization(saved);
}

static void kp_teardown(struct row *r)
{
	struct kp_ctx *c = r->ctx;

	unregister_kprobe(&c->kp);
	opt_knob_restore(c->opt_saved);
}

static int kp_setup(struct row *r, char *msg)
{
	struct kp_ctx *c = r->ctx;
	kprobe_opcode_t *want = (kprobe_opcode_t *)(void *)r->target;
	int ret;

	memset(&c->kp, 0, sizeof(c->kp));
	c->pre_hits = c->post_hits = 0;
	if (c->sym) {
		c->kp.symbol_name = c->sym;
		c->kp.offset = *c->off;
		want += *c->off;
	} else {
		c->kp.addr = want;
	}
	c->kp.pre_handler = c->vec ? kp_pre_vec : c->regs ? kp_pre_regs : kp_pre;
	if (c->post)
		c->kp.post_handler = kp_post;
	c->opt_saved = opt_knob(c->opt);
	ret = register_kprobe(&c->kp);
	if (ret < 0) {
		opt_knob_restore(c->opt_saved);
		msgf(msg, "error %d %s: %s", ret, errname(-ret),
		     strerror(-ret));
		return ST_NA;
	}
	if (c->opt)
		wait_for_kprobe_optimizer();
	if (c->kp.addr != want) {
		msgf(msg, "register_kprobe put addr at %p, want %p",
		     (void *)c->kp.addr, (void *)want);
		kp_teardown(r);
		return ST_FAIL;
	}
	if (!c->opt != !(c->kp.flags & KPROBE_FLAG_OPTIMIZED)) {
		msgf(msg, "probe is %soptimised%s (flags 0x%x)",
		     c->opt ? "not " : "",
		     c->opt ? " after wait_for_kprobe_optimizer()" : "",
		     c->kp.flags);
		kp_teardown(r);
		return ST_FAIL;
	}
	return 0;
}

static int kp_check(struct row *r, long calls, char *msg)
{
	struct kp_ctx *c = r->ctx;

	if (!c->opt != !(c->kp.flags & KPROBE_FLAG_OPTIMIZED)) {
		msgf(msg, "probe got %soptimised while measured (flags 0x%x)",
		     c->opt ? "un" : "", c->kp.flags);
		return ST_FAIL;
	}
	if (c->pre_hits != (unsigned long)calls ||
	    (c->post && c->post_hits != (unsigned long)calls) ||
	    (!c->post && c->post_hits) || c->kp.nmissed) {
		msgf(msg, "%ld calls: pre_handler %lu, post_handler %lu, "
		     "nmissed %lu", calls, c->pre_hits, c->post_hits,
		     c->kp.nmissed);
		return ST_FAIL;
	}
	return 0;
}

/* --- j, r, rb, ro, kr, jr: return probes and jprobes --- */

/*
 * The rows of kprobes.txt section 6 (k = kprobe, j = jprobe, r = return
 * probe, kr = kprobe + return probe, jr = jprobe + return probe on the
 * same function), each call counted by every handler it must run:
 *	j	jprobe (always a breakpoint: it blocks optimisation)
 *	r	kretprobe, handler only, breakpoint entry (optimisation off)
 *	rb	r with an entry_handler and per-instance data (the pairing
 *		the document describes), breakpoint entry
 *	ro	kretprobe, handler only, optimised entry
 *	kr	kprobe (pre_handler) + kretprobe, optimised entry
 *	jr	jprobe + kretprobe (breakpoint entry)
 */
struct kr_ctx {
	struct kretprobe rp;
	struct kprobe kp;
	struct jprobe jp;
	int opt, ret, entry, kprobe, jprobe;	/* what the row has */
	int opt_saved;
	unsigned long ret_hits, entry_hits, pre_hits, j_hits;
	long last_ret;
};

static struct kr_ctx *kr_cur_j;		/* the jprobe row being measured */

static int kr_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct kr_ctx *c = container_of(ri->rp, struct kr_ctx, rp);
	c->last_ret = (long)regs_return_value(regs);
	c->ret_hits++;
	return 0;
}

static int kr_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct kr_ctx *c = container_of(ri->rp, struct kr_ctx, rp);
	*(unsigned long *)(void *)ri->data = regs->di;
	c->entry_hits++;
	return 0;
}

static int kr_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)regs;
	container_of(p, struct kr_ctx, kp)->pre_hits++;
	return 0;
}

static long kr_jentry(long x)
{
	(void)x;
	kr_cur_j->j_hits++;
	jprobe_return();
	return 0;
}

static void kr_teardown(struct row *r)
{
	struct kr_ctx *c = r->ctx;

	/* unregistering one that is not registered only clears its addr */
	if (c->ret)
		unregister_kretprobe(&c->rp);
	if (c->kprobe)
		unregister_kprobe(&c->kp);
	if (c->jprobe)
		unregister_jprobe(&c->jp);
	opt_knob_restore(c->opt_saved);
}

static int kr_setup(struct row *r, char *msg)
{
	struct kr_ctx *c = r->ctx;
	kprobe_opcode_t *at = (kprobe_opcode_t *)(void *)r->target;
	int ret = 0;

	memset(&c->rp, 0, sizeof(c->rp));
	memset(&c->kp, 0, sizeof(c->kp));
	memset(&c->jp, 0, sizeof(c->jp));
	c->ret_hits = c->entry_hits = c->pre_hits = c->j_hits = 0;
	c->opt_saved = opt_knob(c->opt);
	if (c->jprobe) {
		c->jp.kp.addr = at;
		c->jp.entry = (void *)kr_jentry;
		kr_cur_j = c;
		ret = register_jprobe(&c->jp);
	}
	if (!ret && c->kprobe) {
		c->kp.addr = at;
		c->kp.pre_handler = kr_pre;
		ret = register_kprobe(&c->kp);
	}
	if (!ret && c->ret) {
		c->rp.kp.addr = at;
		c->rp.handler = kr_ret;
		if (c->entry) {
			c->rp.entry_handler = kr_entry;
			c->rp.data_size = 16;
		}
		ret = register_kretprobe(&c->rp);
	}
	if (ret < 0) {
		msgf(msg, "error %d %s: %s", ret, errname(-ret), strerror(-ret));
		kr_teardown(r);
		return ST_NA;
	}
	if (c->opt) {
		wait_for_kprobe_optimizer();
		if (!(c->rp.kp.flags & KPROBE_FLAG_OPTIMIZED)) {
			msgf(msg, "entry not optimised (flags 0x%x)", c->rp.kp.flags);
			kr_teardown(r);
			return ST_FAIL;
		}
	}
	return 0;
}

static int kr_check(struct row *r, long calls, char *msg)
{
	struct kr_ctx *c = r->ctx;
	unsigned long want = (unsigned long)calls;

	if ((c->ret && c->ret_hits != want) ||
	    (c->entry && c->entry_hits != want) ||
	    (c->kprobe && c->pre_hits != want) ||
	    (c->jprobe && c->j_hits != want) ||
	    (c->ret && c->rp.nmissed) || c->rp.kp.nmissed) {
		msgf(msg, "%ld calls: return handler %lu, entry_handler %lu, "
		     "pre_handler %lu, jprobe entry %lu, nmissed %d",
		     calls, c->ret_hits, c->entry_hits, c->pre_hits, c->j_hits,
		     c->rp.nmissed);
		return ST_FAIL;
	}
	if (c->opt && !(c->rp.kp.flags & KPROBE_FLAG_OPTIMIZED)) {
		msgf(msg, "entry got unoptimised while measured");
		return ST_FAIL;
	}
	return 0;
}

/* --- b100k: the "b" probe with 100,000 other probes registered --- */

#define CROWD 100000
static struct kprobe *crowd;
static struct kprobe **crowd_v;

static int crowd_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p, (void)regs;
	return 0;
}

static int crowd_setup(struct row *r, char *msg)
{
	int ret;

	if (!crowd) {
		crowd = calloc(CROWD, sizeof(*crowd));
		crowd_v = calloc(CROWD, sizeof(*crowd_v));
		if (!crowd || !crowd_v) {
			msgf(msg, "out of memory");
			return ST_NA;
		}
	}
	for (int i = 0; i < CROWD; i++) {
		memset(&crowd[i], 0, sizeof(crowd[i]));
		crowd[i].addr = (kprobe_opcode_t *)(void *)ukpb_nop_sled + i;
		crowd[i].pre_handler = crowd_pre;
		crowd_v[i] = &crowd[i];
	}
	ret = register_kprobes(crowd_v, CROWD);
	if (ret < 0) {
		msgf(msg, "registering %d probes: error %d %s", CROWD, ret,
		     errname(-ret));
		return ST_NA;
	}
	ret = kp_setup(r, msg);
	if (ret)
		unregister_kprobes(crowd_v, CROWD);
	return ret;
}

static void crowd_teardown(struct row *r)
{
	kp_teardown(r);
	unregister_kprobes(crowd_v, CROWD);
}

/* --- o10k: 10,000 optimised probes, registered and removed in batches --- */

static const char *const many_phase[MANY_PHASES] = {
	"register", "optimize", "unregister" };
static struct kprobe *many;
static struct kprobe **many_v;
static unsigned long *many_hits;

static int many_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)regs;
	many_hits[p - many]++;
	return 0;
}

static kprobe_opcode_t *many_addr(int i)
{
	return (kprobe_opcode_t *)(void *)ukpb_many_0000 + i * MANY_STRIDE;
}

/*
 * Calls a few of the functions: each must return x + 1 and, while the
 * probes are registered, have fired its probe once more.
 */
static int many_call_some(int armed, char *msg)
{
	static const int pick[] = { 0, 1, 2, 4999, 5000, 9998, 9999 };

	for (size_t k = 0; k < sizeof(pick) / sizeof(pick[0]); k++) {
		int i = pick[k];
		unsigned long before = many_hits[i];
		long x = 1000L * i + 7;
		long y = ((target_fn)(void *)many_addr(i))(x);

		if (y != x + 1) {
			msgf(msg, "ukpb_many_%04d(%ld) returned %ld%s", i, x, y,
			     armed ? " while optimised" : " after unregister");
			return ST_FAIL;
		}
		if (many_hits[i] != before + !!armed || many[i].nmissed) {
			msgf(msg, "ukpb_many_%04d: its probe fired %lu times "
			     "for 1 call %s (nmissed %lu)", i,
			     many_hits[i] - before,
			     armed ? "while optimised" : "after unregister",
			     many[i].nmissed);
			return ST_FAIL;
		}
	}
	return 0;
}

static int many_run(struct row *r, double *ms, char *msg)
{
	long long t[4];
	int ret, saved, nopt = 0, first_not = -1;

	(void)r;
	if (ukpb_many_size != MANY * MANY_STRIDE) {
		msgf(msg, "ukpb_many_* take %u bytes, want %d", ukpb_many_size,
		     MANY * MANY_STRIDE);
		return ST_FAIL;
	}
	if (!many) {
		many = calloc(MANY, sizeof(*many));
		many_v = calloc(MANY, sizeof(*many_v));
		many_hits = calloc(MANY, sizeof(*many_hits));
		if (!many || !many_v || !many_hits) {
			msgf(msg, "out of memory");
			return ST_NA;
		}
	}
	for (int i = 0; i < MANY; i++) {
		memset(&many[i], 0, sizeof(many[i]));
		many[i].addr = many_addr(i);
		many[i].pre_handler = many_pre;
		many_v[i] = &many[i];
		many_hits[i] = 0;
	}
	saved = opt_knob(1);
	t[0] = now_ns();
	ret = register_kprobes(many_v, MANY);
	t[1] = now_ns();
	if (ret < 0) {
		opt_knob_restore(saved);
		msgf(msg, "registering %d probes: error %d %s", MANY, ret,
		     errname(-ret));
		return ST_NA;
	}
	wait_for_kprobe_optimizer();
	t[2] = now_ns();
	for (int i = 0; i < MANY; i++) {
		if (many[i].flags & KPROBE_FLAG_OPTIMIZED)
			nopt++;
		else if (first_not < 0)
			first_not = i;
	}
	if (nopt != MANY) {
		msgf(msg, "%d of %d probes optimised after "
		     "wait_for_kprobe_optimizer() (ukpb_many_%04d: flags 0x%x)",
		     nopt, MANY, first_not, many[first_not].flags);
		ret = ST_FAIL;
	} else {
		ret = many_call_some(1, msg);
	}
	t[3] = now_ns();
	unregister_kprobes(many_v, MANY);
	ms[2] = (double)(now_ns() - t[3]) / 1e6;
	opt_knob_restore(saved);
	if (ret)
		return ret;
	ms[0] = (double)(t[1] - t[0]) / 1e6;
	ms[1] = (double)(t[2] - t[1]) / 1e6;
	return many_call_some(0, msg);
}

static struct kp_ctx kp_b100k = { .post = 0, .opt = 0 };
static struct kp_ctx kp_b = { .post = 0, .opt = 0 };
static struct kp_ctx kp_k = { .post = 1, .opt = 0 };
static struct kp_ctx kp_o = { .post = 0, .opt = 1 };
static struct kp_ctx kp_om = { .post = 0, .opt = 1, .sym = "ukpb_tgt_om",
			       .off = &ukpb_om_off };
static struct kp_ctx kp_ov = { .post = 0, .opt = 1, .vec = 1 };
static struct kp_ctx kp_ol = { .post = 0, .opt = 1, .regs = 1 };
static struct kp_ctx kp_omv = { .post = 0, .opt = 1, .vec = 1, .sym = "ukpb_tgt_om",
				.off = &ukpb_om_off };
static struct up_ctx up_lea, up_nop5, up_ret = { .ret = 1 };
static struct kr_ctx kr_j = { .jprobe = 1 };
static struct kr_ctx kr_r = { .ret = 1 };
static struct kr_ctx kr_rb = { .ret = 1, .entry = 1 };
static struct kr_ctx kr_ro = { .ret = 1, .opt = 1 };
static struct kr_ctx kr_kr = { .ret = 1, .opt = 1, .kprobe = 1 };
static struct kr_ctx kr_jr = { .ret = 1, .jprobe = 1 };

/* --- the table --- */

static struct row rows[] = {
	{ .name = "call", .target = ukpb_tgt_call, .mult = CALL_MULT,
	  .what = "plain call of a noinline function (lea 1(%rdi),%rax; ret)" },
	{ .name = "floor", .target = ukpb_tgt_floor, .mult = CALL_MULT,
	  .what = "hand-made detour at the entry: call stub; red zone, flags, "
		  "15 GPRs, align, cld, empty C call (jump-probe floor)" },
	{ .name = "floorv", .target = ukpb_tgt_floorv, .mult = CALL_MULT,
	  .what = "floor + what a detour calling any C must keep: ymm0-15, "
		  "MXCSR, x87 control word" },
	{ .name = "floorz", .target = ukpb_tgt_floorz, .mult = CALL_MULT,
	  .what = "floor + what such a detour keeps on AVX-512: zmm0-31, k0-7, "
		  "MXCSR, x87 control word",
	  .setup = avx512_setup },
	{ .name = "int3", .target = ukpb_tgt_int3, .mult = 1,
	  .flags = ROW_CHILD,
	  .what = "int3 + SIGTRAP handler that returns, in a clean child",
	  .setup = int3_setup, .check = int3_check,
	  .teardown = int3_teardown },
	{ .name = "uprobe", .target = ukpb_tgt_uprobe, .mult = 1,
	  .flags = ROW_PROBE,
	  .what = "kernel uprobe via tracefs on the lea (single-stepped)",
	  .setup = uprobe_setup, .check = uprobe_check,
	  .teardown = uprobe_teardown, .ctx = &up_lea },
	{ .name = "uprobe5", .target = ukpb_tgt_uprobe5, .mult = 1,
	  .flags = ROW_PROBE,
	  .what = "kernel uprobe via tracefs on a 5-byte nop (0f 1f 44 00 00) "
		  "before the lea",
	  .setup = uprobe_setup, .check = uprobe_check,
	  .teardown = uprobe_teardown, .ctx = &up_nop5 },
	{ .name = "b", .target = ukpb_tgt_b, .mult = 1,
	  .flags = ROW_PROBE | ROW_GOAL,
	  .what = "ukprobe, pre_handler only, optimisation off (boosted)",
	  .setup = kp_setup, .check = kp_check, .teardown = kp_teardown,
	  .ctx = &kp_b },
	{ .name = "k", .target = ukpb_tgt_k, .mult = 1,
	  .flags = ROW_PROBE | ROW_GOAL,
	  .what = "ukprobe, pre_handler + post_handler",
	  .setup = kp_setup, .check = kp_check, .teardown = kp_teardown,
	  .ctx = &kp_k },
	{ .name = "b100k", .target = ukpb_tgt_b100k, .mult = 1,
	  .flags = ROW_PROBE,
	  .what = "the b probe with 100,000 other probes registered (O(1) lookup)",
	  .setup = crowd_setup, .check = kp_check, .teardown = crowd_teardown,
	  .ctx = &kp_b100k },
	{ .name = "o", .target = ukpb_tgt_o, .mult = OPT_MULT,
	  .flags = ROW_PROBE | ROW_OPT,
	  .what = "ukprobe, pre_handler only, optimised, at a function entry "
		  "(region lea + ret)",
	  .setup = kp_setup, .check = kp_check, .teardown = kp_teardown,
	  .ctx = &kp_o },
	{ .name = "om", .target = ukpb_tgt_om, .mult = OPT_MULT,
	  .flags = ROW_PROBE | ROW_OPT,
	  .what = "ukprobe, pre_handler only, optimised, mid-function "
		  "(ukpb_tgt_om+off, a 7-byte lea) with %xmm0 live across it",
	  .setup = kp_setup, .check = kp_check, .teardown = kp_teardown,
	  .ctx = &kp_om },
	{ .name = "ol", .target = ukpb_tgt_o, .mult = OPT_MULT,
	  .flags = ROW_PROBE | ROW_OPT,
	  .what = "o with a pre_handler that reads regs->di: the detour builds "
		  "pt_regs (the lean path; o's handler reads none: the bare path)",
	  .setup = kp_setup, .check = kp_check, .teardown = kp_teardown,
	  .ctx = &kp_ol },
	{ .name = "ov", .target = ukpb_tgt_o, .mult = OPT_MULT,
	  .flags = ROW_PROBE | ROW_OPT,
	  .what = "o with a pre_handler doing double arithmetic: the detour "
		  "saves the vector registers live there, MXCSR, x87 words",
	  .setup = kp_setup, .check = kp_check, .teardown = kp_teardown,
	  .ctx = &kp_ov },
	{ .name = "omv", .target = ukpb_tgt_om, .mult = OPT_MULT,
	  .flags = ROW_PROBE | ROW_OPT,
	  .what = "om with that pre_handler",
	  .setup = kp_setup, .check = kp_check, .teardown = kp_teardown,
	  .ctx = &kp_omv },
	{ .name = "j", .target = ukpb_tgt_j, .mult = 1,
	  .flags = ROW_PROBE,
	  .what = "jprobe: entry function + jprobe_return (breakpoint)",
	  .setup = kr_setup, .check = kr_check, .teardown = kr_teardown,
	  .ctx = &kr_j },
	{ .name = "r", .target = ukpb_tgt_r, .mult = 1,
	  .flags = ROW_PROBE,
	  .what = "kretprobe, handler only, breakpoint entry (optimisation off)",
	  .setup = kr_setup, .check = kr_check, .teardown = kr_teardown,
	  .ctx = &kr_r },
	{ .name = "rb", .target = ukpb_tgt_rb, .mult = 1,
	  .flags = ROW_PROBE,
	  .what = "r + entry_handler and 16 bytes of per-instance data",
	  .setup = kr_setup, .check = kr_check, .teardown = kr_teardown,
	  .ctx = &kr_rb },
	{ .name = "ro", .target = ukpb_tgt_ro, .mult = OPT_MULT,
	  .flags = ROW_PROBE | ROW_OPT,
	  .what = "kretprobe, handler only, optimised entry (entry + return)",
	  .setup = kr_setup, .check = kr_check, .teardown = kr_teardown,
	  .ctx = &kr_ro },
	{ .name = "kr", .target = ukpb_tgt_kr, .mult = OPT_MULT,
	  .flags = ROW_PROBE | ROW_OPT,
	  .what = "kprobe (pre_handler) + kretprobe on one function, optimised",
	  .setup = kr_setup, .check = kr_check, .teardown = kr_teardown,
	  .ctx = &kr_kr },
	{ .name = "jr", .target = ukpb_tgt_jr, .mult = 1,
	  .flags = ROW_PROBE,
	  .what = "jprobe + kretprobe on one function (breakpoint)",
	  .setup = kr_setup, .check = kr_check, .teardown = kr_teardown,
	  .ctx = &kr_jr },
	{ .name = "uret", .target = ukpb_tgt_uret, .mult = 1,
	  .flags = ROW_PROBE,
	  .what = "kernel uretprobe via tracefs (entry trap + return trap)",
	  .setup = uprobe_setup, .check = uprobe_check,
	  .teardown = uprobe_teardown, .ctx = &up_ret },
	{ .name = "o10k", .flags = ROW_BATCH,
	  .what = "ms to register 10,000 optimisable probes in one batch, "
		  "wait_for_kprobe_optimizer() until all are optimised, "
		  "unregister them",
	  .batch = many_run },
};
#define NROWS ((int)(sizeof(rows) / sizeof(rows[0])))

static struct row *row_named(const char *name)
{
	for (int i = 0; i < NROWS; i++)
		if (!strcmp(rows[i].name, name))
			return &rows[i];
	return NULL;
}

/* ------------------------------------------------------------------ */
/* One run of one row                                                  */

struct result {
	int state;
	double ns;			/* per hit */
	double ms[MANY_PHASES];		/* ROW_BATCH */
	char msg[MSG_LEN];
};

static void run_one(struct row *r, long n, struct result *res)
{
	long warm = n / 10 > 0 ? n / 10 : 1;
	long long t0, t1;
	long sum;
	int st;

	memset(res, 0, sizeof(*res));
	if (r->batch) {
		res->state = r->batch(r, res->ms, res->msg);
		return;
	}
	if (r->setup && (st = r->setup(r, res->msg))) {
		res->state = st;
		return;
	}
	sum = run_loop(r->target, warm);
	if (sum != warm * (warm + 1) / 2) {
		msgf(res->msg, "warm-up: wrong return values");
		res->state = ST_FAIL;
		goto out;
	}
	/* timed in slices; the run's figure is its fastest slice */
	double best = -1;
	for (long k = 0, done = 0; k < SLICES; k++) {
		long m = k == SLICES - 1 ? n - done : n / SLICES;
		if (m <= 0)
			continue;
		t0 = now_ns();
		sum = run_loop(r->target, m);
		t1 = now_ns();
		done += m;
		if (sum != m * (m + 1) / 2) {
			msgf(res->msg, "wrong return values (sum %ld, want %ld)",
			     sum, m * (m + 1) / 2);
			res->state = ST_FAIL;
			goto out;
		}
		double ns = (double)(t1 - t0) / (double)m;
		if (best < 0 || ns < best)
			best = ns;
	}
	if (r->check && (st = r->check(r, warm + n, res->msg))) {
		res->state = st;
		goto out;
	}
	res->ns = best;
out:
	if (r->teardown)
		r->teardown(r);
}

/* The clean child: forked first, never calls into ukprobes. */
static struct {
	pid_t pid;
	int cmd, res;			/* pipe ends in the parent */
} child = { .pid = -1, .cmd = -1, .res = -1 };

struct child_cmd {
	int row;
	long n;
};

static int read_full(int fd, void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t k = read(fd, (char *)buf + done, len - done);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		done += (size_t)k;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t k = write(fd, (const char *)buf + done, len - done);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		done += (size_t)k;
	}
	return 0;
}

static void child_loop(int cmd, int res)
{
	struct child_cmd c;
	struct result r;

	while (read_full(cmd, &c, sizeof(c)) == 0) {
		if (c.row < 0 || c.row >= NROWS)
			_exit(2);
		run_one(&rows[c.row], c.n, &r);
		if (write_full(res, &r, sizeof(r)))
			_exit(2);
	}
	_exit(0);
}

static int child_start(void)
{
	int cp[2], rp[2];

	if (pipe2(cp, O_CLOEXEC) || pipe2(rp, O_CLOEXEC)) {
		perror("ukp-bench: pipe");
		return -1;
	}
	fflush(NULL);
	child.pid = fork();
	if (child.pid < 0) {
		perror("ukp-bench: fork");
		return -1;
	}
	if (child.pid == 0) {
		close(cp[1]);
		close(rp[0]);
		child_loop(cp[0], rp[1]);
	}
	close(cp[0]);
	close(rp[1]);
	child.cmd = cp[1];
	child.res = rp[0];
	return 0;
}

static void child_stop(void)
{
	if (child.pid <= 0)
		return;
	close(child.cmd);
	close(child.res);
	waitpid(child.pid, NULL, 0);
	child.pid = -1;
}

static void run_in_child(struct row *r, long n, struct result *res)
{
	struct child_cmd c = { (int)(r - rows), n };
	int status;

	if (child.pid > 0 && write_full(child.cmd, &c, sizeof(c)) == 0 &&
	    read_full(child.res, res, sizeof(*res)) == 0)
		return;
	memset(res, 0, sizeof(*res));
	res->state = ST_FAIL;
	if (child.pid <= 0) {
		msgf(res->msg, "no clean child process");
		return;
	}
	if (waitpid(child.pid, &status, 0) == child.pid) {
		if (WIFSIGNALED(status))
			msgf(res->msg, "clean child killed by signal %d (%s)",
			     WTERMSIG(status), strsignal(WTERMSIG(status)));
		else
			msgf(res->msg, "clean child exited with status %d",
			     WEXITSTATUS(status));
	} else {
		msgf(res->msg, "lost the clean child: %s", strerror(errno));
	}
	child.pid = -1;
}

/* ------------------------------------------------------------------ */
/* Clean-up on exit and on SIGINT/SIGTERM/SIGHUP                       */

static void cleanup(void)
{
	if (up.armed)
		uprobe_remove();
	if (up.mounted) {
		umount2(up.dir, MNT_DETACH);
		up.mounted = 0;
	}
}

static void on_signal(int sig)
{
	if (up.armed)
		uprobe_remove();
	if (up.mounted)
		umount2(up.dir, MNT_DETACH);
	if (child.pid > 0)
		kill(child.pid, SIGKILL);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* ------------------------------------------------------------------ */
/* Output                                                              */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
	double s[MAX_RUNS];

	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static int prec(double x)
{
	return x < 10 ? 2 : x < 1000 ? 1 : 0;
}

/* A number in a width-w column with sensible precision. */
static void put_num(int w, double x)
{
	printf(" %*.*f", w, prec(x), x);
}

static const struct row *valid(const char *name)
{
	const struct row *r = row_named(name);

	return r && r->selected && r->state == ST_OK && r->nruns ? r : NULL;
}

static void put_ratio(const struct row *r, const struct row *base, int show)
{
	if (show && base && base->med > 0)
		put_num(9, r->med / base->med);
	else
		printf(" %9s", "-");
}

/* the machine, as print_header() found it: the Markdown table names it */
static char model[128] = "?";
static struct utsname uts;

static void print_header(long hits, int runs)
{
	char line[256], load[64] = "?";
	FILE *f;

	uname(&uts);
	if ((f = fopen("/proc/cpuinfo", "re"))) {
		while (fgets(line, sizeof(line), f)) {
			char *c = strchr(line, ':');

			if (!strncmp(line, "model name", 10) && c) {
				snprintf(model, sizeof(model), "%s", c + 2);
				model[strcspn(model, "\n")] = 0;
				break;
			}
		}
		fclose(f);
	}
	if ((f = fopen("/proc/loadavg", "re"))) {
		if (fgets(load, sizeof(load), f))
			load[strcspn(load, "\n")] = 0;
		fclose(f);
	}
	printf("ukp-bench: Linux %s, %s, %ld CPUs, loadavg %s\n", uts.release,
	       model, sysconf(_SC_NPROCESSORS_ONLN), load);
	printf("ukp-bench: %ld hits per run (call: %ld), %d runs interleaved, "
	       "median ns per hit\n\n", hits, hits * CALL_MULT, runs);
}

/* "n/a (why)" or "FAILED (why)" for a row without figures; 0 if it has */
static int put_state(const struct row *r)
{
	if (r->state == ST_NA)
		printf(" n/a (%s)\n", r->msg);
	else if (r->state == ST_FAIL)
		printf(" FAILED (%s)\n", r->msg);
	return r->state != ST_OK;
}

static void put_range(const double *v, int n)
{
	double lo = v[0], hi = v[0];

	for (int k = 1; k < n; k++) {
		lo = v[k] < lo ? v[k] : lo;
		hi = v[k] > hi ? v[k] : hi;
	}
	printf("   %.*f..%.*f", prec(lo), lo, prec(hi), hi);
}

/* What the kernel made of a uprobe row's target, seen while armed. */
static const char *uprobe_note(const struct row *r)
{
	const struct up_ctx *u = r->ctx;

	if (r->setup != uprobe_setup || !valid(r->name))
		return "";
	switch (u->first) {
	case 0xcc:
		return " [kernel: int3]";
	case 0xe8:
		return " [kernel: optimised into a call]";
	default:
		return " [kernel: unexpected first byte]";
	}
}

static void print_table(void)
{
	const struct row *call = valid("call"), *int3 = valid("int3");
	const struct row *upr = valid("uprobe"), *flr = valid("floor");
	const struct row *upr5 = valid("uprobe5");
	int batch = 0;

	printf("%-8s %10s %9s %9s %9s %9s %9s   %s\n", "row", "ns/hit",
	       "x call", "x floor", "x int3", "x uprobe", "x uprobe5",
	       "runs min..max ns");
	for (int i = 0; i < NROWS; i++) {
		const struct row *r = &rows[i];
		int probe = r->flags & ROW_PROBE;

		if (!r->selected)
			continue;
		if (r->flags & ROW_BATCH) {
			batch = 1;
			continue;
		}
		printf("%-8s", r->name);
		if (put_state(r))
			continue;
		put_num(10, r->med);
		put_ratio(r, call, 1);
		put_ratio(r, flr, probe);
		put_ratio(r, int3, probe);
		put_ratio(r, upr, probe);
		put_ratio(r, upr5, probe);
		put_range(r->ns, r->nruns);
		printf("\n");
	}
	if (batch) {
		printf("\n%-8s", "row");
		for (int p = 0; p < MANY_PHASES; p++)
			printf(" %10s", many_phase[p]);
		printf("   ms, median; %s runs min..max\n", many_phase[0]);
		for (int i = 0; i < NROWS; i++) {
			const struct row *r = &rows[i];

			if (!r->selected || !(r->flags & ROW_BATCH))
				continue;
			printf("%-8s", r->name);
			if (put_state(r))
				continue;
			for (int p = 0; p < MANY_PHASES; p++)
				put_num(10, r->ms_med[p]);
			put_range(r->ms[0], r->nruns);
			printf("\n");
		}
	}
	printf("\n");
	for (int i = 0; i < NROWS; i++)
		if (rows[i].selected)
			printf("  %-8s %s%s\n", rows[i].name, rows[i].what,
			       uprobe_note(&rows[i]));
	printf("\n");
	for (int i = 0; i < NROWS; i++) {
		const struct row *r = &rows[i];

		if (!(r->flags & ROW_GOAL) || !valid(r->name))
			continue;
		printf("goal %-4s", r->name);
		if (int3) {
			double x = r->med / int3->med;

			printf(" %.2fx int3 (want <= 1.20: %s)", x,
			       x <= 1.2 ? "yes" : "NO");
		}
		if (upr) {
			double x = r->med / upr->med;

			printf("%s %.2fx uprobe (want < 1: %s)", int3 ? "," : "",
			       x, x < 1 ? "yes" : "NO");
		}
		if (!int3 && !upr)
			printf(" no int3 or uprobe floor to compare with");
		printf("\n");
	}
	for (int i = 0; i < NROWS; i++) {
		const struct row *r = &rows[i];

		if (!(r->flags & ROW_OPT) || !valid(r->name))
			continue;
		printf("opt  %-4s %.1f ns", r->name, r->med);
		if (flr)
			printf(", %.2fx the floor (%.1f ns)", r->med / flr->med,
			       flr->med);
		if (upr5)
			printf(", %.3fx uprobe5 (%.0f ns)", r->med / upr5->med,
			       upr5->med);
		/* the vector rows: against the floor keeping all vector
		 * state by moves at this CPU's width */
		const struct row *fv = valid("floorz") ? valid("floorz") : valid("floorv");
		if (fv && (!strcmp(r->name, "ov") || !strcmp(r->name, "omv")))
			printf(", %.2fx %s (%.1f ns)", r->med / fv->med, fv->name, fv->med);
		printf("\n");
	}
	/* return probes: against the optimised entry alone and the kernel's
	 * uretprobe (goal for ro: <= 25 ns and <= 3x o); and against ol,
	 * whose handler reads registers as ro's return handler does */
	const struct row *o = valid("o"), *ol = valid("ol"), *uret = valid("uret");
	static const char *const rets[] = { "r", "rb", "ro", "kr", "jr" };
	for (size_t i = 0; i < sizeof(rets) / sizeof(rets[0]); i++) {
		const struct row *r = valid(rets[i]);
		if (!r)
			continue;
		printf("ret  %-4s %.1f ns", r->name, r->med);
		if (o)
			printf(", %.2fx o", r->med / o->med);
		if (uret)
			printf(", %.4fx uretprobe (%.0f ns)", r->med / uret->med,
			       uret->med);
		if (!strcmp(r->name, "ro") && o)
			printf(" (goal <= 25 ns and <= 3x o: %s)",
			       r->med <= 25 && r->med <= 3 * o->med ? "yes" : "NO");
		if (!strcmp(r->name, "ro") && ol)
			printf(", %.2fx ol", r->med / ol->med);
		printf("\n");
	}
}

/* A ratio with two significant digits or more, as the tables show them */
static void md_ratio(const char *sep, double x, const char *of)
{
	int p = x >= 10 ? 0 : x >= 0.1 ? 2 : x >= 0.01 ? 3 : 4;

	printf("%s%.*f × %s", sep, p, x, of);
}

/*
 * The table again, in the Markdown form docs/performance.md uses: one
 * line per row, ns per hit and the ratios that matter for it, so that
 * updating the figures there is this output pasted.
 */
static void print_markdown(long hits, int runs)
{
	static const struct { const char *name, *what; } md[] = {
		{ "call", "plain call" },
		{ "floor", "hand-made detour: flags + 15 GPRs, empty C call" },
		{ "floorv", "floor + ymm0-15, MXCSR, x87 CW" },
		{ "floorz", "floor + zmm0-31, k0-7, MXCSR, x87 CW" },
		{ "int3", "int3 + SIGTRAP round trip" },
		{ "uprobe", "kernel uprobe, single-stepped `lea`" },
		{ "uprobe5", "kernel uprobe on a 5-byte nop (optimised into a call)" },
		{ "b", "breakpoint probe, pre_handler" },
		{ "k", "breakpoint probe, pre + post_handler" },
		{ "b100k", "`b` among 100,000 other probes" },
		{ "o", "optimised probe at an entry, counting handler (the bare path)" },
		{ "om", "optimised, mid-function, xmm0 live (bare)" },
		{ "ol", "`o` with a handler that reads `regs->di` (the lean path)" },
		{ "ov", "`o` with a handler doing double arithmetic" },
		{ "omv", "`om` with that handler" },
		{ "j", "jprobe (breakpoint)" },
		{ "r", "kretprobe, breakpoint entry" },
		{ "rb", "`r` + entry_handler and 16 bytes of data" },
		{ "ro", "kretprobe, optimised entry: entry + return" },
		{ "kr", "kprobe + kretprobe on one function, optimised" },
		{ "jr", "jprobe + kretprobe on one function" },
		{ "uret", "kernel uretprobe" },
		{ "o10k", "register / optimise / unregister 10,000 probes, ms" },
	};
	const struct row *int3 = valid("int3"), *flr = valid("floor");
	const struct row *upr5 = valid("uprobe5"), *uret = valid("uret");
	const struct row *o = valid("o"), *ol = valid("ol");
	const struct row *fv = valid("floorz") ? valid("floorz") : valid("floorv");
	_Static_assert(sizeof(md) / sizeof(md[0]) == NROWS, "a Markdown line per row");

	printf("\nMarkdown (docs/performance.md):\n\n");
	printf("`make bench` on %s (Linux %s, %ld CPUs): %ld hits per run, "
	       "median of %d interleaved runs.\n\n", model, uts.release,
	       sysconf(_SC_NPROCESSORS_ONLN), hits, runs);
	printf("| row | what | ns/hit | ratio |\n|---|---|---:|---|\n");
	for (size_t i = 0; i < sizeof(md) / sizeof(md[0]); i++) {
		const struct row *r = row_named(md[i].name);
		const char *n = md[i].name;
		int bold = !strcmp(n, "o") || !strcmp(n, "ro");

		if (!r || !r->selected)
			continue;
		if (bold || !strcmp(n, "b") || !strcmp(n, "k") || !strcmp(n, "om"))
			printf("| **%s** | %s |", n, md[i].what);
		else
			printf("| %s | %s |", n, md[i].what);
		if (r->state != ST_OK || !r->nruns) {
			printf(" %s | %s |\n", r->state == ST_FAIL ? "FAILED" : "n/a", r->msg);
			continue;
		}
		if (r->flags & ROW_BATCH) {
			for (int p = 0; p < MANY_PHASES; p++)
				printf("%s%.*f", p ? " / " : " ", prec(r->ms_med[p]), r->ms_med[p]);
			printf(" | |\n");
			continue;
		}
		printf(bold ? " **%.*f** |" : " %.*f |", prec(r->med), r->med);
		const char *sep = " ";
		if (!strcmp(n, "b") || !strcmp(n, "k") || !strcmp(n, "b100k")) {
			if (int3)
				md_ratio(sep, r->med / int3->med, "int3");
		} else if (!strcmp(n, "o") || !strcmp(n, "om") || !strcmp(n, "ol")) {
			if (flr)
				md_ratio(sep, r->med / flr->med, "floor"), sep = ", ";
			if (upr5 && strcmp(n, "ol"))
				printf("%s%.0f × faster than uprobe5", sep, upr5->med / r->med);
		} else if (!strcmp(n, "ov") || !strcmp(n, "omv")) {
			if (fv)
				md_ratio(sep, r->med / fv->med, fv->name);
		} else if (!strcmp(n, "ro") || !strcmp(n, "kr")) {
			if (o)
				md_ratio(sep, r->med / o->med, "o"), sep = ", ";
			if (ol && !strcmp(n, "ro"))
				md_ratio(sep, r->med / ol->med, "ol"), sep = ", ";
			if (uret && !strcmp(n, "ro"))
				md_ratio(sep, r->med / uret->med, "uret");
		} else if (!strcmp(n, "r") || !strcmp(n, "rb") || !strcmp(n, "j") ||
			   !strcmp(n, "jr")) {
			if (uret)
				md_ratio(sep, r->med / uret->med, "uret");
		}
		printf(" |\n");
	}
}

/* ------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
"usage: ukp-bench [--quick] [--scale F] [-n HITS] [-r RUNS] [ROW...]\n"
"       ukp-bench --list\n"
"  --quick     %ld hits x %d runs instead of %ld x %d\n"
"  --scale F   multiply the hits per run by F (e.g. 0.1, 10)\n"
"  -n HITS     hits per run of a trap row (the call row does x%d)\n"
"  -r RUNS     runs per row, 1..%d; the table shows the median\n"
"  ROW...      only these rows (default: all)\n"
"Exit status: 0, 1 if a row's handlers did not fire once per call (or it\n"
"failed otherwise), 2 on a usage error.\n",
		QUICK_HITS, QUICK_RUNS, DEFAULT_HITS, DEFAULT_RUNS, CALL_MULT,
		MAX_RUNS);
}

/* "-s V", "--long V" or "--long=V"; *val is NULL when V is missing. */
static int opt_match(int argc, char **argv, int *i, const char *s,
		     const char *l, const char **val)
{
	const char *a = argv[*i];
	size_t n = strlen(l);

	if ((s && !strcmp(a, s)) || !strcmp(a, l)) {
		*val = *i + 1 < argc ? argv[++*i] : NULL;
		return 1;
	}
	if (!strncmp(a, l, n) && a[n] == '=') {
		*val = a + n + 1;
		return 1;
	}
	return 0;
}

static int parse_num(const char *s, double *v)
{
	char *end;

	if (!s || !*s)
		return -1;
	errno = 0;
	*v = strtod(s, &end);
	return errno || *end || *v <= 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
	long hits = DEFAULT_HITS;
	int runs = DEFAULT_RUNS, any = 0, child_rows = 0, rc = 0;
	double scale = 1, v;
	long opt_hits = 0;
	int opt_runs = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *val = NULL;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--list")) {
			for (int k = 0; k < NROWS; k++)
				printf("%-8s %s\n", rows[k].name, rows[k].what);
			return 0;
		} else if (!strcmp(a, "--quick")) {
			hits = QUICK_HITS;
			runs = QUICK_RUNS;
		} else if (opt_match(argc, argv, &i, NULL, "--scale", &val)) {
			if (parse_num(val, &scale))
				goto bad;
		} else if (opt_match(argc, argv, &i, "-n", "--hits", &val)) {
			if (parse_num(val, &v) || v != (long)v)
				goto bad;
			opt_hits = (long)v;
		} else if (opt_match(argc, argv, &i, "-r", "--runs", &val)) {
			if (parse_num(val, &v) || v != (int)v || v > MAX_RUNS)
				goto bad;
			opt_runs = (int)v;
		} else if (a[0] != '-' && row_named(a)) {
			row_named(a)->selected = 1;
			any = 1;
		} else {
			fprintf(stderr, "ukp-bench: unknown %s '%s'\n",
				a[0] == '-' ? "option" : "row", a);
			usage(stderr);
			return 2;
		}
		continue;
bad:
		fprintf(stderr, "ukp-bench: bad value for %s\n", a);
		return 2;
	}
	if (opt_hits)
		hits = opt_hits;
	if (opt_runs)
		runs = opt_runs;
	hits = (long)(hits * scale);
	if (hits < 1)
		hits = 1;
	for (int i = 0; i < NROWS; i++) {
		if (!any)
			rows[i].selected = 1;
		if (rows[i].selected && (rows[i].flags & ROW_CHILD))
			child_rows = 1;
	}

	/* before anything touches ukprobes */
	signal(SIGPIPE, SIG_IGN);
	if (child_rows && child_start())
		return 1;
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);

	print_header(hits, runs);
	fflush(stdout);
	for (int k = 0; k < runs; k++) {
		if (isatty(2))
			fprintf(stderr, "\rukp-bench: run %d/%d ", k + 1, runs);
		for (int i = 0; i < NROWS; i++) {
			struct row *r = &rows[i];
			struct result res;
			long n = hits * r->mult;

			if (!r->selected || r->state != ST_OK)
				continue;
			if (isatty(2))
				fprintf(stderr, "%s ", r->name);
			if (r->flags & ROW_CHILD)
				run_in_child(r, n, &res);
			else
				run_one(r, n, &res);
			if (res.state == ST_NA && k > 0)
				res.state = ST_FAIL;	/* worked before */
			if (res.state != ST_OK) {
				r->state = res.state;
				if (k > 0)
					msgf(r->msg, "run %d: %.*s", k + 1,
					     MSG_LEN - 16, res.msg);
				else
					memcpy(r->msg, res.msg, MSG_LEN);
				if (r->state == ST_FAIL) {
					fprintf(stderr, "%sukp-bench: %s: %s\n",
						isatty(2) ? "\n" : "",
						r->name, r->msg);
					rc = 1;
				}
				continue;
			}
			for (int p = 0; p < MANY_PHASES; p++)
				r->ms[p][r->nruns] = res.ms[p];
			r->ns[r->nruns++] = res.ns;
		}
	}
	if (isatty(2))
		fprintf(stderr, "\r%40s\r", "");
	child_stop();
	for (int i = 0; i < NROWS; i++) {
		struct row *r = &rows[i];

		if (r->state != ST_OK || !r->nruns)
			continue;
		r->med = median(r->ns, r->nruns);
		for (int p = 0; p < MANY_PHASES; p++)
			r->ms_med[p] = median(r->ms[p], r->nruns);
	}
	print_table();
	print_markdown(hits, runs);
	return rc;
}
