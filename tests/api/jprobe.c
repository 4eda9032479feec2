/* SPDX-License-Identifier: MIT */
/*
 * api-jprobe: jprobes (kprobes.txt 1.2 and 4.2) as users rely on them.
 *
 * A jprobe's entry function has the probed function's prototype and is
 * presented with the same registers and stack; it ends with
 * jprobe_return(), which puts back the stack and the registers the probed
 * function was entered with and runs the function from its first
 * instruction.  Every case checks the probed function's result against a
 * reference, so an entry that leaves anything behind shows.
 *
 * Cases:
 *   entry_sees_every_argument          6 integer register args, 2 stack args,
 *                                      2 doubles (xmm0-1); the entry clobbers
 *                                      its copies (writes its stack args in
 *                                      place, snprintf/printf with doubles,
 *                                      dirties xmm0-7 and ymm uppers)
 *   struct_by_value_on_the_stack       a 40-byte struct (memory class) and
 *                                      register args; the entry overwrites
 *                                      the struct where it lives
 *   registers_restored_exactly         asm caller/target: rbx rbp r12-r15,
 *                                      the 6 argument registers, xmm0-7,
 *                                      rsp, MXCSR and the x87 control word
 *                                      as the caller left them, although
 *                                      the entry garbled them all just
 *                                      before jprobe_return
 *   rounding_mode_restored             fesetround(FE_UPWARD) in the entry does
 *                                      not reach the probed function
 *   libc_function                      a jprobe on libc's strtol
 *   jprobe_return_outside_a_jprobe     returns to its caller
 *   second_jprobe_same_function_eexist -EEXIST (also when the first is
 *                                      disabled); the first still works
 *   two_jprobes_same_function_in_one_batch  -EEXIST, nothing registered
 *   not_at_function_entry_einval       -EINVAL (addr and symbol+offset),
 *                                      -EILSEQ inside an instruction
 *   missing_entry_einval
 *   register_twice_einval              an already registered jprobe: -EINVAL
 *   batch_all_or_none                  register_jprobes rolls back on error
 *   unregister_then_unprobed           and unregistering again clears addr
 *   disable_enable                     disable_jprobe/enable_jprobe, [DISABLED]
 *   listed_as_j                        kprobes_list: "<addr>  j  func+0x0"
 *   blocks_optimization_kprobe_first   an optimized kprobe loses its jump when a
 *                                      jprobe joins, regains it after
 *                                      unregister_jprobe + the optimizer
 *   blocks_optimization_jprobe_first   never optimized while the jprobe is
 *                                      there (also across the knob)
 *   kprobe_after_jprobe_still_fires    a kprobe registered after the jprobe
 *                                      at its address fires (jprobe last)
 *   kprobe_post_handler_with_jprobe    a post_handler at the jprobe's address
 *                                      runs once per call
 *   with_kretprobe_jprobe_first        jprobe + kretprobe on one function, both
 *   with_kretprobe_kretprobe_first     orders: entry runs, the return handler
 *                                      sees the right value and return address
 *   many_threads                       8 threads: each call right, entry count
 *                                      exact, entries on the calling thread
 *   nested_entry_calls_jprobed_function  the entry calls another jprobed function
 *   nested_self_chain                  an entry that calls its own probed
 *                                      function: deep nesting is bounded,
 *                                      entries + nmissed == calls
 *   unregister_while_entry_runs        another thread's entry in progress:
 *                                      its call still returns right
 */
#include <errno.h>
#include <fenv.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <ukprobes.h>
#include "ukt.h"

#define NOINL __attribute__((noinline, used))

static atomic_long entries, hits, post_hits;

static int count_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	hits++;
	return 0;
}

static void count_post(struct kprobe *p, struct pt_regs *r, unsigned long f)
{
	(void)p; (void)r; (void)f;
	post_hits++;
}

static bool listed(const char *line)
{
	char buf[8192];
	ukt_list_to(buf, sizeof(buf));
	return strstr(buf, line) != NULL;
}

/* ---- every argument --------------------------------------------------------------- */

#define MANY_EXPR(a, b, c, d, e, f, g, h, x, y)					\
	((a) + 2 * (b) + 3 * (c) + 5 * (d) + 7 * (e) + 11 * (f) + 13 * (g) +	\
	 17 * (h) + (long)((x) * 1000.0) + (long)((y) * 100000.0))

NOINL long jp_many(long a, long b, long c, long d, long e, long f, long g, long h,
		   double x, double y)
{
	__asm__ volatile("");
	return MANY_EXPR(a, b, c, d, e, f, g, h, x, y);
}

static struct { long v[8]; double x, y; } many_seen;
static char many_text[256];

long jp_many_entry(long a, long b, long c, long d, long e, long f, long g, long h,
		   double x, double y)
{
	many_seen.v[0] = a; many_seen.v[1] = b; many_seen.v[2] = c; many_seen.v[3] = d;
	many_seen.v[4] = e; many_seen.v[5] = f; many_seen.v[6] = g; many_seen.v[7] = h;
	many_seen.x = x;
	many_seen.y = y;
	entries++;
	/* the callee owns its stack arguments: write them where they live */
	volatile long *pg = &g, *ph = &h;
	*pg = -1111;
	*ph = -2222;
	/* doubles through the vector registers, libc's formatting too */
	snprintf(many_text, sizeof(many_text), "%.3f %.5f %g %e", x * 3.5, y / 7.0,
		 x + y, (double)*pg * 1.25);
	if (x == 999.0)	/* never: keeps printf (and its xmm use) in the code */
		printf("%f\n", y);
	__asm__ volatile("pcmpeqd %%xmm0, %%xmm0\n pcmpeqd %%xmm1, %%xmm1\n"
			 "pcmpeqd %%xmm2, %%xmm2\n pcmpeqd %%xmm3, %%xmm3\n"
			 "pcmpeqd %%xmm4, %%xmm4\n pcmpeqd %%xmm5, %%xmm5\n"
			 "pcmpeqd %%xmm6, %%xmm6\n pcmpeqd %%xmm7, %%xmm7\n"
			 ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7");
	jprobe_return();
	return 0;
}

UKT_CASE(entry_sees_every_argument)
{
	long (*volatile fn)(long, long, long, long, long, long, long, long, double, double) = jp_many;
	struct jprobe jp = { .kp.symbol_name = "jp_many", .entry = (void *)jp_many_entry };
	UKT_EQ(register_jprobe(&jp), 0);
	UKT_EQ((unsigned long)jp.kp.addr, (unsigned long)jp_many);

	long r = fn(1, 20, 300, 4000, 50000, 600000, 7000000, 80000000, 1.25, 0.03125);
	UKT_EQ(r, MANY_EXPR(1L, 20L, 300L, 4000L, 50000L, 600000L, 7000000L, 80000000L,
			    1.25, 0.03125));
	UKT_EQ(entries, 1);
	long want[8] = { 1, 20, 300, 4000, 50000, 600000, 7000000, 80000000 };
	for (int i = 0; i < 8; i++)
		UKT_EQ(many_seen.v[i], want[i]);
	UKT_ASSERT(many_seen.x == 1.25);
	UKT_ASSERT(many_seen.y == 0.03125);
	UKT_STREQ(many_text, "4.375 0.00446 1.28125 -1.388750e+03");

	/* and again with other values, negative ones, many times */
	for (long i = 0; i < 200; i++) {
		double x = (double)i / 8.0, y = -(double)i / 64.0;
		r = fn(-i, i * 3, i ^ 0x55, i << 20, -(i * 7), i * i, i - 100, 12345 - i, x, y);
		UKT_EQ(r, MANY_EXPR(-i, i * 3, i ^ 0x55, i << 20, -(i * 7), i * i, i - 100,
				    12345 - i, x, y));
		UKT_EQ(many_seen.v[6], i - 100);
		UKT_EQ(many_seen.v[7], 12345 - i);
		UKT_ASSERT(many_seen.x == x && many_seen.y == y);
	}
	UKT_EQ(entries, 201);
	UKT_EQ(jp.kp.nmissed, 0);
	unregister_jprobe(&jp);
}

/* ---- a struct passed by value (memory class: on the stack) ------------------------ */

struct big { long v[5]; };

#define STRUCT_EXPR(a, s, d, k)							\
	((a) * 7 + (s).v[0] + 2 * (s).v[1] + 3 * (s).v[2] + 5 * (s).v[3] +	\
	 11 * (s).v[4] + (long)((d) * 4.0) + (k) * 13)

NOINL long jp_struct(long a, struct big s, double d, long k)
{
	__asm__ volatile("");
	return STRUCT_EXPR(a, s, d, k);
}

static struct big struct_seen;
static long struct_seen_a, struct_seen_k;
static double struct_seen_d;

long jp_struct_entry(long a, struct big s, double d, long k)
{
	struct_seen = s;
	struct_seen_a = a;
	struct_seen_d = d;
	struct_seen_k = k;
	entries++;
	volatile long *pv = s.v;	/* the caller's copy, which the callee owns */
	for (int i = 0; i < 5; i++)
		pv[i] = -0x5a5a5a5a - i;
	char buf[64];
	snprintf(buf, sizeof(buf), "%f", d * 1.75);
	__asm__ volatile("" :: "r"(buf) : "memory");
	jprobe_return();
	return 0;
}

UKT_CASE(struct_by_value_on_the_stack)
{
	long (*volatile fn)(long, struct big, double, long) = jp_struct;
	struct jprobe jp = { .kp.addr = (void *)jp_struct, .entry = (void *)jp_struct_entry };
	UKT_EQ(register_jprobe(&jp), 0);
	for (long i = 1; i <= 50; i++) {
		struct big s = { { i, i * 10, i * 100, i * 1000, i * 10000 } };
		long r = fn(i + 3, s, (double)i + 0.5, -i);
		UKT_EQ(r, STRUCT_EXPR(i + 3, s, (double)i + 0.5, -i));
		for (int j = 0; j < 5; j++)
			UKT_EQ(struct_seen.v[j], s.v[j]);
		UKT_EQ(struct_seen_a, i + 3);
		UKT_EQ(struct_seen_k, -i);
		UKT_ASSERT(struct_seen_d == (double)i + 0.5);
	}
	UKT_EQ(entries, 50);
	unregister_jprobe(&jp);
}

/* ---- every register, in assembly ---------------------------------------------------- */

/*
 * jr_caller(out): loads known values into rbx rbp r12-r15, the argument
 * registers, xmm0-7, MXCSR (round down) and the x87 control word (round
 * up), records its rsp, calls jr_target, and puts its own state back.
 * jr_target stores what it finds into jr_out (the probed function).
 */
unsigned long jr_out[32];
unsigned long jr_sp_before;
void jr_caller(void);
void jr_target(void);

#define JR_MXCSR 0x3f80		/* defaults | round down (RC=01) */
#define JR_FCW 0x0b7f		/* defaults | round up (RC=10) */
__asm__(
	".text\n"
	".globl jr_caller\n.type jr_caller,@function\n"
	"jr_caller:\n"
	" push %rbx\n push %rbp\n push %r12\n push %r13\n push %r14\n push %r15\n"
	" sub $40, %rsp\n"
	" stmxcsr 0(%rsp)\n fnstcw 4(%rsp)\n"
	" movl $0x3f80, 8(%rsp)\n ldmxcsr 8(%rsp)\n"
	" movw $0x0b7f, 12(%rsp)\n fldcw 12(%rsp)\n"
	" movabs $0x1010101010101010, %rax\n movq %rax, %xmm0\n"
	" movabs $0x2020202020202020, %rax\n movq %rax, %xmm1\n"
	" movabs $0x3030303030303030, %rax\n movq %rax, %xmm2\n"
	" movabs $0x4040404040404040, %rax\n movq %rax, %xmm3\n"
	" movabs $0x5050505050505050, %rax\n movq %rax, %xmm4\n"
	" movabs $0x6060606060606060, %rax\n movq %rax, %xmm5\n"
	" movabs $0x7070707070707070, %rax\n movq %rax, %xmm6\n"
	" movabs $0x0808080808080808, %rax\n movq %rax, %xmm7\n"
	" movabs $0x1111111111111111, %rbx\n"
	" movabs $0x2222222222222222, %rbp\n"
	" movabs $0x3333333333333333, %r12\n"
	" movabs $0x4444444444444444, %r13\n"
	" movabs $0x5555555555555555, %r14\n"
	" movabs $0x6666666666666666, %r15\n"
	" movabs $0x0101010101010101, %rdi\n"
	" movabs $0x0202020202020202, %rsi\n"
	" movabs $0x0303030303030303, %rdx\n"
	" movabs $0x0404040404040404, %rcx\n"
	" movabs $0x0505050505050505, %r8\n"
	" movabs $0x0606060606060606, %r9\n"
	" mov %rsp, jr_sp_before(%rip)\n"
	" call jr_target\n"
	" ldmxcsr 0(%rsp)\n fldcw 4(%rsp)\n"
	" add $40, %rsp\n"
	" pop %r15\n pop %r14\n pop %r13\n pop %r12\n pop %rbp\n pop %rbx\n ret\n"
	".size jr_caller,.-jr_caller\n"
	".globl jr_target\n.type jr_target,@function\n"
	"jr_target:\n"
	" mov %rbx, jr_out+0(%rip)\n mov %rbp, jr_out+8(%rip)\n"
	" mov %r12, jr_out+16(%rip)\n mov %r13, jr_out+24(%rip)\n"
	" mov %r14, jr_out+32(%rip)\n mov %r15, jr_out+40(%rip)\n"
	" mov %rdi, jr_out+48(%rip)\n mov %rsi, jr_out+56(%rip)\n"
	" mov %rdx, jr_out+64(%rip)\n mov %rcx, jr_out+72(%rip)\n"
	" mov %r8, jr_out+80(%rip)\n mov %r9, jr_out+88(%rip)\n"
	" movq %xmm0, jr_out+96(%rip)\n movq %xmm1, jr_out+104(%rip)\n"
	" movq %xmm2, jr_out+112(%rip)\n movq %xmm3, jr_out+120(%rip)\n"
	" movq %xmm4, jr_out+128(%rip)\n movq %xmm5, jr_out+136(%rip)\n"
	" movq %xmm6, jr_out+144(%rip)\n movq %xmm7, jr_out+152(%rip)\n"
	" mov %rsp, jr_out+160(%rip)\n"
	" stmxcsr jr_out+168(%rip)\n fnstcw jr_out+176(%rip)\n"
	" ret\n"
	".size jr_target,.-jr_target\n");

static unsigned long jr_entry_seen[12];

/* Same prototype as jr_target (no arguments in C terms): records the
 * argument registers by asm, then garbles every register it can and
 * calls jprobe_return with them garbled. */
NOINL void jr_entry(void)
{
	__asm__ volatile(
		"mov %%rdi, 0(%0)\n mov %%rsi, 8(%0)\n mov %%rdx, 16(%0)\n"
		"mov %%rcx, 24(%0)\n mov %%r8, 32(%0)\n mov %%r9, 40(%0)\n"
		"mov %%rbx, 48(%0)\n mov %%rbp, 56(%0)\n mov %%r12, 64(%0)\n"
		"mov %%r13, 72(%0)\n mov %%r14, 80(%0)\n mov %%r15, 88(%0)\n"
		:: "a"(jr_entry_seen) : "memory");
	entries++;
	__asm__ volatile(
		"sub $8, %%rsp\n"
		"movl $0x7f80, (%%rsp)\n ldmxcsr (%%rsp)\n"	/* round toward zero */
		"movw $0x037f, (%%rsp)\n fldcw (%%rsp)\n"	/* round to nearest */
		"add $8, %%rsp\n"
		"pcmpeqd %%xmm0, %%xmm0\n pcmpeqd %%xmm1, %%xmm1\n"
		"pcmpeqd %%xmm2, %%xmm2\n pcmpeqd %%xmm3, %%xmm3\n"
		"pcmpeqd %%xmm4, %%xmm4\n pcmpeqd %%xmm5, %%xmm5\n"
		"pcmpeqd %%xmm6, %%xmm6\n pcmpeqd %%xmm7, %%xmm7\n"
		"mov $0xbad01, %%ebx\n mov $0xbad02, %%ebp\n mov $0xbad03, %%r12d\n"
		"mov $0xbad04, %%r13d\n mov $0xbad05, %%r14d\n mov $0xbad06, %%r15d\n"
		"mov $0xbad07, %%edi\n mov $0xbad08, %%esi\n mov $0xbad09, %%edx\n"
		"mov $0xbad0a, %%ecx\n mov $0xbad0b, %%r8d\n mov $0xbad0c, %%r9d\n"
		"mov $0xbad0d, %%eax\n mov $0xbad0e, %%r10d\n mov $0xbad0f, %%r11d\n"
		"and $-16, %%rsp\n"
		"sub $256, %%rsp\n"		/* a different sp, too */
		"call jprobe_return@PLT\n"
		"ud2\n" ::: "memory");
	__builtin_unreachable();
}

UKT_CASE(registers_restored_exactly)
{
	struct jprobe jp = { .kp.addr = (void *)jr_target, .entry = (void *)jr_entry };
	static const unsigned long gpr[12] = {
		0x1111111111111111, 0x2222222222222222, 0x3333333333333333,
		0x4444444444444444, 0x5555555555555555, 0x6666666666666666,
		0x0101010101010101, 0x0202020202020202, 0x0303030303030303,
		0x0404040404040404, 0x0505050505050505, 0x0606060606060606,
	};
	static const unsigned long xmm[8] = {
		0x1010101010101010, 0x2020202020202020, 0x3030303030303030,
		0x4040404040404040, 0x5050505050505050, 0x6060606060606060,
		0x7070707070707070, 0x0808080808080808,
	};
	/* unprobed: what the target sees */
	jr_caller();
	for (int i = 0; i < 12; i++)
		UKT_EQ(jr_out[i], gpr[i]);
	UKT_EQ(jr_out[20], jr_sp_before - 8);

	UKT_EQ(register_jprobe(&jp), 0);
	for (int round = 0; round < 3; round++) {
		memset(jr_out, 0, sizeof(jr_out));
		jr_caller();
		UKT_EQ(entries, round + 1);
		/* the entry saw the argument and callee-saved registers */
		for (int i = 0; i < 6; i++)
			UKT_EQ(jr_entry_seen[i], gpr[6 + i]);
		for (int i = 0; i < 6; i++)
			UKT_EQ(jr_entry_seen[6 + i], gpr[i]);
		/* and the target sees them all as the caller left them */
		for (int i = 0; i < 12; i++)
			UKT_EQ(jr_out[i], gpr[i]);
		for (int i = 0; i < 8; i++)
			UKT_EQ(jr_out[12 + i], xmm[i]);
		UKT_EQ(jr_out[20], jr_sp_before - 8);
		UKT_EQ(jr_out[21] & 0xffff, JR_MXCSR);
		UKT_EQ(jr_out[22] & 0xffff, JR_FCW);
	}
	unregister_jprobe(&jp);
	jr_caller();
	UKT_EQ(entries, 3);
	UKT_EQ(jr_out[0], gpr[0]);
}

/* ---- rounding mode (MXCSR and x87 control word) ----------------------------------- */

/* cvtsd2si (MXCSR rounding) * 100 + fistp (x87 rounding) */
NOINL long jp_round(double x)
{
	long r, q;
	__asm__ volatile("cvtsd2si %1, %0" : "=r"(r) : "x"(x));
	__asm__ volatile("fldl %1\n fistpll %0" : "=m"(q) : "m"(x));
	return r * 100 + q;
}

long jp_round_entry(double x)
{
	(void)x;
	entries++;
	fesetround(FE_UPWARD);
	jprobe_return();
	return 0;
}

UKT_CASE(rounding_mode_restored)
{
	long (*volatile fn)(double) = jp_round;
	UKT_EQ(fn(2.5), 202);		/* to nearest even */
	struct jprobe jp = { .kp.addr = (void *)jp_round, .entry = (void *)jp_round_entry };
	UKT_EQ(register_jprobe(&jp), 0);
	UKT_EQ(fn(2.5), 202);
	UKT_EQ(fn(3.5), 404);
	UKT_EQ(fegetround(), FE_TONEAREST);
	UKT_EQ(entries, 2);
	/* the caller's own mode is what the function gets (3.5: down 3,
	 * nearest even 4, up 4) */
	fesetround(FE_DOWNWARD);
	long r = fn(3.5);
	int mode = fegetround();
	fesetround(FE_TONEAREST);
	UKT_EQ(r, 303);
	UKT_EQ(mode, FE_DOWNWARD);
	UKT_EQ(entries, 3);
	unregister_jprobe(&jp);
}

/* ---- a libc function ------------------------------------------------------------- */

static char strtol_seen[32];
static int strtol_seen_base;
static char **strtol_seen_end;

long strtol_entry(const char *s, char **end, int base)
{
	snprintf(strtol_seen, sizeof(strtol_seen), "%s", s);
	strtol_seen_base = base;
	strtol_seen_end = end;
	entries++;
	jprobe_return();
	return 0;
}

UKT_CASE(libc_function)
{
	long (*volatile fn)(const char *, char **, int) = strtol;
	struct jprobe jp = { .kp.symbol_name = "libc.so.6:strtol", .entry = (void *)strtol_entry };
	UKT_EQ(register_jprobe(&jp), 0);
	char *end = NULL;
	UKT_EQ(fn("  1234xyz", &end, 10), 1234);
	UKT_STREQ(end, "xyz");
	UKT_EQ(entries, 1);
	UKT_STREQ(strtol_seen, "  1234xyz");
	UKT_EQ(strtol_seen_base, 10);
	UKT_ASSERT(strtol_seen_end == &end);
	UKT_EQ(fn("ff", NULL, 16), 255);
	UKT_EQ(strtol_seen_base, 16);
	UKT_EQ(entries, 2);
	/* strtol has aliases (strtoll): the list may name either */
	char buf[8192], head[64];
	ukt_list_to(buf, sizeof(buf));
	snprintf(head, sizeof(head), "%016lx  j  strtol", (unsigned long)jp.kp.addr);
	char *line = strstr(buf, head), *nl = line ? strchr(line, '\n') : NULL;
	static const char tail[] = "+0x0 [libc.so.6]";
	if (!line || !nl || nl - line < (long)sizeof(tail) ||
	    strncmp(nl - (sizeof(tail) - 1), tail, sizeof(tail) - 1))
		UKT_FAIL("no line \"%s...%s\" in:\n%s", head, tail, buf);
	unregister_jprobe(&jp);
	UKT_EQ(fn("77", NULL, 8), 63);
	UKT_EQ(entries, 2);
}

UKT_CASE(jprobe_return_outside_a_jprobe)
{
	volatile int after = 0;
	jprobe_return();
	after = 1;
	UKT_EQ(after, 1);
	/* and once jprobes exist in the process */
	struct jprobe jp = { .kp.addr = (void *)jp_round, .entry = (void *)jp_round_entry };
	UKT_EQ(register_jprobe(&jp), 0);
	jprobe_return();
	after = 2;
	UKT_EQ(after, 2);
	unregister_jprobe(&jp);
}

/* ---- errors --------------------------------------------------------------------- */

NOINL long jp_simple(long a, long b)
{
	__asm__ volatile("");
	return a * 31 + (b ^ 0x1234);
}

long jp_simple_entry(long a, long b)
{
	(void)a; (void)b;
	entries++;
	jprobe_return();
	return 0;
}

static atomic_long entries2;

long jp_simple_entry2(long a, long b)
{
	(void)a; (void)b;
	entries2++;
	jprobe_return();
	return 0;
}

NOINL long jp_other(long a, long b)
{
	__asm__ volatile("");
	return a * 17 - b;
}

UKT_CASE(second_jprobe_same_function_eexist)
{
	long (*volatile fn)(long, long) = jp_simple;
	struct jprobe a = { .kp.addr = (void *)jp_simple, .entry = (void *)jp_simple_entry };
	struct jprobe b = { .kp.addr = (void *)jp_simple, .entry = (void *)jp_simple_entry2 };
	struct jprobe c = { .kp.symbol_name = "jp_simple", .entry = (void *)jp_simple_entry2 };
	UKT_EQ(register_jprobe(&a), 0);
	UKT_EQ(register_jprobe(&b), -EEXIST);
	UKT_EQ(register_jprobe(&c), -EEXIST);
	UKT_EQ(fn(3, 4), 3 * 31 + (4 ^ 0x1234));
	UKT_EQ(entries, 1);
	UKT_EQ(entries2, 0);
	/* still -EEXIST when the first is disabled */
	UKT_EQ(disable_jprobe(&a), 0);
	UKT_EQ(register_jprobe(&b), -EEXIST);
	UKT_EQ(fn(3, 4), 3 * 31 + (4 ^ 0x1234));
	UKT_EQ(entries, 1);
	UKT_EQ(entries2, 0);
	UKT_EQ(enable_jprobe(&a), 0);
	UKT_EQ(fn(5, 6), 5 * 31 + (6 ^ 0x1234));
	UKT_EQ(entries, 2);
	UKT_EQ(entries2, 0);
	/* other probe kinds at the same address are fine */
	struct kprobe kp = { .addr = (void *)jp_simple, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(fn(5, 6), 5 * 31 + (6 ^ 0x1234));
	UKT_EQ(entries, 3);
	UKT_EQ(hits, 1);
	unregister_kprobe(&kp);
	/* gone: the place is free again */
	unregister_jprobe(&a);
	memset(&b, 0, sizeof(b));
	b.kp.addr = (void *)jp_simple;
	b.entry = (void *)jp_simple_entry2;
	UKT_EQ(register_jprobe(&b), 0);
	UKT_EQ(fn(7, 8), 7 * 31 + (8 ^ 0x1234));
	UKT_EQ(entries, 3);
	UKT_EQ(entries2, 1);
	unregister_jprobe(&b);
}

UKT_CASE(two_jprobes_same_function_in_one_batch)
{
	long (*volatile fn)(long, long) = jp_simple;
	struct jprobe a = { .kp.addr = (void *)jp_simple, .entry = (void *)jp_simple_entry };
	struct jprobe o = { .kp.addr = (void *)jp_other, .entry = (void *)jp_simple_entry };
	struct jprobe b = { .kp.addr = (void *)jp_simple, .entry = (void *)jp_simple_entry2 };
	struct jprobe *v[] = { &a, &o, &b };
	UKT_EQ(register_jprobes(v, 3), -EEXIST);
	UKT_ASSERT(!listed("  j  "));
	UKT_EQ(fn(1, 2), 31 + (2 ^ 0x1234));
	UKT_EQ(entries, 0);
	UKT_EQ(entries2, 0);
	unregister_jprobes(v, 3);
}

/* jx: three instructions whose boundaries are known */
long jx(long a, long b);
__asm__(".text\n.globl jx\n.type jx,@function\n"
	"jx: mov %rdi, %rax\n"
	".globl jx_second\njx_second: add %rsi, %rax\n ret\n.size jx,.-jx\n");

UKT_CASE(not_at_function_entry_einval)
{
	char *second = ukt_label("jx_second");
	UKT_EQ(second - (char *)jx, 3);
	struct jprobe jp = { .kp.addr = (void *)second, .entry = (void *)jp_simple_entry };
	UKT_EQ(register_jprobe(&jp), -EINVAL);
	memset(&jp, 0, sizeof(jp));
	jp.kp.symbol_name = "jx";
	jp.kp.offset = 3;
	jp.entry = (void *)jp_simple_entry;
	UKT_EQ(register_jprobe(&jp), -EINVAL);
	jp.kp.offset = 1;				/* inside mov %rdi,%rax */
	UKT_EQ(register_jprobe(&jp), -EILSEQ);
	UKT_ASSERT(!listed("jx"));
	UKT_EQ(jx(40, 2), 42);
	UKT_EQ(entries, 0);
	/* the entry itself is fine, and a kprobe in the middle too */
	jp.kp.offset = 0;
	UKT_EQ(register_jprobe(&jp), 0);
	struct kprobe kp = { .addr = (void *)second, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(jx(40, 2), 42);
	UKT_EQ(entries, 1);
	UKT_EQ(hits, 1);
	unregister_kprobe(&kp);
	unregister_jprobe(&jp);
}

UKT_CASE(missing_entry_einval)
{
	long (*volatile fn)(long, long) = jp_simple;
	struct jprobe jp = { .kp.addr = (void *)jp_simple };
	UKT_EQ(register_jprobe(&jp), -EINVAL);
	UKT_EQ(register_jprobe(NULL), -EINVAL);
	UKT_ASSERT(!listed("jp_simple"));
	UKT_EQ(fn(1, 1), 31 + (1 ^ 0x1234));
	/* with the entry, the same struct registers */
	jp.entry = (void *)jp_simple_entry;
	UKT_EQ(register_jprobe(&jp), 0);
	UKT_EQ(fn(1, 1), 31 + (1 ^ 0x1234));
	UKT_EQ(entries, 1);
	unregister_jprobe(&jp);
}

UKT_CASE(register_twice_einval)
{
	long (*volatile fn)(long, long) = jp_simple;
	struct jprobe jp = { .kp.addr = (void *)jp_simple, .entry = (void *)jp_simple_entry };
	UKT_EQ(register_jprobe(&jp), 0);
	UKT_EQ(register_jprobe(&jp), -EINVAL);		/* API.md: already registered */
	UKT_EQ(fn(2, 3), 2 * 31 + (3 ^ 0x1234));
	UKT_EQ(entries, 1);
	unregister_jprobe(&jp);
	UKT_EQ(fn(2, 3), 2 * 31 + (3 ^ 0x1234));
	UKT_EQ(entries, 1);
}

UKT_CASE(batch_all_or_none)
{
	long (*volatile f1)(long, long) = jp_simple, (*volatile f2)(long, long) = jp_other;
	struct jprobe a = { .kp.addr = (void *)jp_simple, .entry = (void *)jp_simple_entry };
	struct jprobe b = { .kp.addr = (void *)jp_other, .entry = (void *)jp_simple_entry2 };
	struct jprobe noentry = { .kp.addr = (void *)jp_many };
	struct jprobe nosym = { .kp.symbol_name = "no_such_function_xyz",
				.entry = (void *)jp_simple_entry };
	struct jprobe *v1[] = { &a, &b, &noentry };
	UKT_EQ(register_jprobes(v1, 3), -EINVAL);
	struct jprobe *v2[] = { &a, &b, &nosym };
	UKT_EQ(register_jprobes(v2, 3), -ENOENT);
	UKT_ASSERT(!listed("  j  "));
	UKT_EQ(f1(1, 2) + f2(1, 2), 31 + (2 ^ 0x1234) + 17 - 2);
	UKT_EQ(entries, 0);
	UKT_EQ(entries2, 0);
	/* after the failures, the good ones register as a batch */
	struct jprobe *good[] = { &a, &b };
	UKT_EQ(register_jprobes(good, 2), 0);
	UKT_EQ(f1(1, 2) + f2(1, 2), 31 + (2 ^ 0x1234) + 17 - 2);
	UKT_EQ(entries, 1);
	UKT_EQ(entries2, 1);
	unregister_jprobes(good, 2);
	UKT_EQ(f1(1, 2) + f2(1, 2), 31 + (2 ^ 0x1234) + 17 - 2);
	UKT_EQ(entries, 1);
	UKT_EQ(entries2, 1);
	UKT_ASSERT(!listed("  j  "));
	UKT_EQ(register_jprobes(NULL, 1), -EINVAL);
	UKT_EQ(register_jprobes(good, 0), -EINVAL);
}

UKT_CASE(unregister_then_unprobed)
{
	long (*volatile fn)(long, long) = jp_simple;
	struct jprobe jp = { .kp.addr = (void *)jp_simple, .entry = (void *)jp_simple_entry };
	for (int round = 0; round < 3; round++) {
		jp.kp.addr = (void *)jp_simple;
		UKT_EQ(register_jprobe(&jp), 0);
		UKT_EQ(fn(round, 1), round * 31 + (1 ^ 0x1234));
		UKT_EQ(entries, round + 1);
		unregister_jprobe(&jp);
		UKT_EQ(fn(round, 1), round * 31 + (1 ^ 0x1234));
		UKT_EQ(entries, round + 1);
		UKT_ASSERT(!listed("jp_simple"));
	}
	UKT_EQ((unsigned long)jp.kp.addr, (unsigned long)jp_simple);
	unregister_jprobe(&jp);			/* not registered: clears addr */
	UKT_ASSERT(jp.kp.addr == NULL);
	UKT_EQ(disable_jprobe(&jp), -EINVAL);
	UKT_EQ(enable_jprobe(&jp), -EINVAL);
	UKT_EQ(fn(9, 1), 9 * 31 + (1 ^ 0x1234));
	UKT_EQ(entries, 3);
}

UKT_CASE(disable_enable)
{
	long (*volatile fn)(long, long) = jp_simple;
	struct jprobe jp = { .kp.addr = (void *)jp_simple, .entry = (void *)jp_simple_entry };
	char line[128];
	UKT_EQ(register_jprobe(&jp), 0);
	UKT_EQ(fn(1, 0), 31 + 0x1234);
	UKT_EQ(entries, 1);
	UKT_EQ(disable_jprobe(&jp), 0);
	UKT_ASSERT(jp.kp.flags & KPROBE_FLAG_DISABLED);
	snprintf(line, sizeof(line), "%016lx  j  jp_simple+0x0 [DISABLED]\n",
		 (unsigned long)jp_simple);
	UKT_ASSERT(listed(line));
	for (int i = 0; i < 10; i++)
		UKT_EQ(fn(i, 0), i * 31 + 0x1234);
	UKT_EQ(entries, 1);
	UKT_EQ(enable_jprobe(&jp), 0);
	UKT_ASSERT(!(jp.kp.flags & KPROBE_FLAG_DISABLED));
	for (int i = 0; i < 10; i++)
		UKT_EQ(fn(i, 0), i * 31 + 0x1234);
	UKT_EQ(entries, 11);
	/* registered disabled */
	unregister_jprobe(&jp);
	memset(&jp, 0, sizeof(jp));
	jp.kp.addr = (void *)jp_simple;
	jp.kp.flags = KPROBE_FLAG_DISABLED;
	jp.entry = (void *)jp_simple_entry;
	UKT_EQ(register_jprobe(&jp), 0);
	UKT_EQ(fn(1, 0), 31 + 0x1234);
	UKT_EQ(entries, 11);
	UKT_EQ(enable_jprobe(&jp), 0);
	UKT_EQ(fn(1, 0), 31 + 0x1234);
	UKT_EQ(entries, 12);
	/* the global knob */
	UKT_EQ(kprobes_set_enabled(0), 0);
	UKT_EQ(fn(1, 0), 31 + 0x1234);
	UKT_EQ(entries, 12);
	UKT_EQ(kprobes_set_enabled(1), 0);
	UKT_EQ(fn(1, 0), 31 + 0x1234);
	UKT_EQ(entries, 13);
	unregister_jprobe(&jp);
	UKT_EQ(disable_jprobe(NULL), -EINVAL);
	UKT_EQ(enable_jprobe(NULL), -EINVAL);
}

UKT_CASE(listed_as_j)
{
	struct jprobe jp = { .kp.addr = (void *)jp_simple, .entry = (void *)jp_simple_entry };
	struct kprobe kp = { .addr = (void *)jp_simple, .pre_handler = count_pre };
	UKT_EQ(register_jprobe(&jp), 0);
	UKT_EQ(register_kprobe(&kp), 0);
	char buf[4096], want[256];
	ukt_list_to(buf, sizeof(buf));
	snprintf(want, sizeof(want), "%016lx  j  jp_simple+0x0\n%016lx  k  jp_simple+0x0\n",
		 (unsigned long)jp_simple, (unsigned long)jp_simple);
	UKT_STREQ(buf, want);
	unregister_kprobe(&kp);
	unregister_jprobe(&jp);
	ukt_list_to(buf, sizeof(buf));
	UKT_STREQ(buf, "");
}

/* ---- jump optimisation ------------------------------------------------------------ */

/* several instructions at the entry: a region a jump can replace */
NOINL long j_opt(long a, long b)
{
	long t = a * 3 + b * 5;
	__asm__ volatile("" : "+r"(t));
	return t - (a ^ b);
}
#define J_OPT(a, b) ((a) * 3 + (b) * 5 - ((a) ^ (b)))

static atomic_long jopt_entries;

long j_opt_entry(long a, long b)
{
	(void)a; (void)b;
	jopt_entries++;
	jprobe_return();
	return 0;
}

UKT_CASE(blocks_optimization_kprobe_first)
{
	long (*volatile fn)(long, long) = j_opt;
	struct kprobe kp = { .addr = (void *)j_opt, .pre_handler = count_pre };
	struct jprobe jp = { .kp.addr = (void *)j_opt, .entry = (void *)j_opt_entry };
	char line[128];
	UKT_EQ(kprobes_get_optimization(), 1);
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);		/* the region can be optimised at all */
	UKT_EQ(fn(4, 5), J_OPT(4, 5));
	UKT_EQ(hits, 1);

	UKT_EQ(register_jprobe(&jp), 0);
	UKT_EXPECT_NOT_OPTIMIZED(&kp);	/* taken out by the registration itself */
	wait_for_kprobe_optimizer();
	UKT_EXPECT_NOT_OPTIMIZED(&kp);
	UKT_EXPECT_NOT_OPTIMIZED(&jp.kp);
	snprintf(line, sizeof(line), "%016lx  k  j_opt+0x0\n", (unsigned long)j_opt);
	UKT_ASSERT(listed(line));
	for (long i = 0; i < 20; i++)
		UKT_EQ(fn(i, i + 7), J_OPT(i, i + 7));
	UKT_EQ(hits, 21);
	UKT_EQ(jopt_entries, 20);
	/* the knob does not bring it back */
	UKT_EQ(kprobes_set_optimization(0), 0);
	UKT_EQ(kprobes_set_optimization(1), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_NOT_OPTIMIZED(&kp);

	unregister_jprobe(&jp);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	snprintf(line, sizeof(line), "%016lx  k  j_opt+0x0 [OPTIMIZED]\n", (unsigned long)j_opt);
	UKT_ASSERT(listed(line));
	for (long i = 0; i < 20; i++)
		UKT_EQ(fn(i, -i), J_OPT(i, -i));
	UKT_EQ(hits, 41);
	UKT_EQ(jopt_entries, 20);
	unregister_kprobe(&kp);
}

UKT_CASE(blocks_optimization_jprobe_first)
{
	long (*volatile fn)(long, long) = j_opt;
	struct kprobe kp = { .addr = (void *)j_opt, .pre_handler = count_pre };
	struct jprobe jp = { .kp.addr = (void *)j_opt, .entry = (void *)j_opt_entry };
	UKT_EQ(register_jprobe(&jp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_NOT_OPTIMIZED(&jp.kp);
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_NOT_OPTIMIZED(&kp);
	UKT_EXPECT_NOT_OPTIMIZED(&jp.kp);
	UKT_EQ(fn(2, 3), J_OPT(2, 3));
	UKT_EQ(hits, 1);
	UKT_EQ(jopt_entries, 1);
	/* disabling the jprobe and enabling it again: still a jprobe there */
	UKT_EQ(disable_jprobe(&jp), 0);
	UKT_EQ(enable_jprobe(&jp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_NOT_OPTIMIZED(&kp);
	UKT_EQ(fn(2, 3), J_OPT(2, 3));
	UKT_EQ(hits, 2);
	UKT_EQ(jopt_entries, 2);
	unregister_jprobe(&jp);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	UKT_EQ(fn(2, 3), J_OPT(2, 3));
	UKT_EQ(hits, 3);
	UKT_EQ(jopt_entries, 2);
	/* and back: a new jprobe takes the jump out again */
	UKT_EQ(register_jprobe(&jp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_NOT_OPTIMIZED(&kp);
	UKT_EQ(fn(2, 3), J_OPT(2, 3));
	UKT_EQ(hits, 4);
	UKT_EQ(jopt_entries, 3);
	unregister_jprobe(&jp);
	unregister_kprobe(&kp);
	UKT_EQ(fn(2, 3), J_OPT(2, 3));
	UKT_EQ(hits, 4);
}

/* ---- other probes at the jprobe's address ------------------------------------------- */

UKT_CASE(kprobe_after_jprobe_still_fires)
{
	long (*volatile fn)(long, long) = jp_simple;
	struct jprobe jp = { .kp.addr = (void *)jp_simple, .entry = (void *)jp_simple_entry };
	struct kprobe k1 = { .addr = (void *)jp_simple, .pre_handler = count_pre };
	struct kprobe k2 = { .addr = (void *)jp_simple, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&k1), 0);
	UKT_EQ(register_jprobe(&jp), 0);
	UKT_EQ(register_kprobe(&k2), 0);
	for (long i = 0; i < 10; i++)
		UKT_EQ(fn(i, 1), i * 31 + (1 ^ 0x1234));
	UKT_EQ(entries, 10);
	UKT_EQ(hits, 20);
	UKT_EQ(k1.nmissed + k2.nmissed + jp.kp.nmissed, 0);
	unregister_kprobe(&k1);
	unregister_kprobe(&k2);
	unregister_jprobe(&jp);
}

UKT_CASE(kprobe_post_handler_with_jprobe)
{
	long (*volatile fn)(long, long) = jp_simple;
	struct jprobe jp = { .kp.addr = (void *)jp_simple, .entry = (void *)jp_simple_entry };
	struct kprobe kp = { .addr = (void *)jp_simple, .pre_handler = count_pre,
			     .post_handler = count_post };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(register_jprobe(&jp), 0);
	for (long i = 0; i < 10; i++)
		UKT_EQ(fn(i, 2), i * 31 + (2 ^ 0x1234));
	UKT_EQ(entries, 10);
	UKT_EQ(hits, 10);
	/* "post_handler runs after the probed instruction has executed":
	 * it has, once per call */
	UKT_EQ(post_hits, 10);
	unregister_jprobe(&jp);
	unregister_kprobe(&kp);
}

/* ---- with a kretprobe on the same function ("jr") ----------------------------------- */

NOINL long jk(long a, long b, double x)
{
	__asm__ volatile("");
	return a * 10 + b + (long)(x * 2.0);
}

static atomic_long jk_entries, rk_entries, rk_returns, rk_bad;
static long jk_last_a;
static double jk_last_x;

long jk_entry(long a, long b, double x)
{
	(void)b;
	jk_last_a = a;
	jk_last_x = x;
	jk_entries++;
	char buf[64];
	snprintf(buf, sizeof(buf), "%.2f", x * 9.0);	/* dirties xmm */
	__asm__ volatile("" :: "r"(buf) : "memory");
	jprobe_return();
	return 0;
}

struct jk_data { long a, b; };

static int rk_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct jk_data *d = (struct jk_data *)ri->data;
	d->a = (long)regs->di;
	d->b = (long)regs->si;
	rk_entries++;
	return 0;
}

static int rk_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct jk_data *d = (struct jk_data *)ri->data;
	/* x is a * 0.5 in every call below: 2x == a */
	if ((long)regs_return_value(regs) != d->a * 10 + d->b + d->a)
		rk_bad++;
	if (regs->ip != (unsigned long)ri->ret_addr || !ri->ret_addr)
		rk_bad++;
	if (ri->task != (pid_t)syscall(SYS_gettid))
		rk_bad++;
	rk_returns++;
	return 0;
}

static void jr_case(bool jprobe_first)
{
	long (*volatile fn)(long, long, double) = jk;
	struct jprobe jp = { .kp.addr = (void *)jk, .entry = (void *)jk_entry };
	struct kretprobe rp = { .kp.symbol_name = "jk", .handler = rk_handler,
				.entry_handler = rk_entry, .data_size = sizeof(struct jk_data),
				.maxactive = 4 };
	if (jprobe_first) {
		UKT_EQ(register_jprobe(&jp), 0);
		UKT_EQ(register_kretprobe(&rp), 0);
	} else {
		UKT_EQ(register_kretprobe(&rp), 0);
		UKT_EQ(register_jprobe(&jp), 0);
	}
	wait_for_kprobe_optimizer();
	UKT_EXPECT_NOT_OPTIMIZED(&rp.kp);
	for (long i = 1; i <= 100; i++) {
		UKT_EQ(fn(i, 7, (double)i * 0.5), i * 10 + 7 + i);
		UKT_EQ(jk_last_a, i);
		UKT_ASSERT(jk_last_x == (double)i * 0.5);
	}
	UKT_EQ(jk_entries, 100);
	UKT_EQ(rk_entries, 100);
	UKT_EQ(rk_returns, 100);
	UKT_EQ(rk_bad, 0);
	UKT_EQ(rp.nmissed, 0);
	UKT_EQ(rp.kp.nmissed + jp.kp.nmissed, 0);

	/* one goes, the other still works */
	if (jprobe_first) {
		unregister_jprobe(&jp);
		UKT_EQ(fn(3, 1, 1.5), 34);
		UKT_EQ(jk_entries, 100);
		UKT_EQ(rk_returns, 101);
		unregister_kretprobe(&rp);
	} else {
		unregister_kretprobe(&rp);
		UKT_EQ(fn(3, 1, 1.5), 34);
		UKT_EQ(jk_entries, 101);
		UKT_EQ(rk_returns, 100);
		unregister_jprobe(&jp);
	}
	UKT_EQ(rk_bad, 0);
	long e = jk_entries, r = rk_returns;
	UKT_EQ(fn(3, 1, 1.5), 34);
	UKT_EQ(jk_entries, e);
	UKT_EQ(rk_returns, r);
}

UKT_CASE(with_kretprobe_jprobe_first)
{
	jr_case(true);
}

UKT_CASE(with_kretprobe_kretprobe_first)
{
	jr_case(false);
}

/* ---- threads ---------------------------------------------------------------------- */

#define NTHREADS 8
#define NCALLS 3000

static __thread long my_tag;
static atomic_long thread_bad;

long jp_many_entry_mt(long a, long b, long c, long d, long e, long f, long g, long h,
		      double x, double y)
{
	/* every argument derives from a, which is this thread's tag */
	if (a != my_tag || b != a + 1 || c != a * 2 || d != a - 3 || e != ~a ||
	    f != a * 5 || g != a + 7 || h != -a || x != (double)a * 0.25 ||
	    y != (double)a * 0.001)
		thread_bad++;
	entries++;
	volatile long *pg = &g;
	*pg = 0;
	char buf[64];
	snprintf(buf, sizeof(buf), "%g %g", x * 1.1, y * 2.2);
	__asm__ volatile("" :: "r"(buf) : "memory");
	jprobe_return();
	return 0;
}

static void *mt_worker(void *arg)
{
	long id = (long)arg;
	long (*volatile fn)(long, long, long, long, long, long, long, long, double, double) = jp_many;
	for (long i = 0; i < NCALLS; i++) {
		long a = id * 100000 + i;
		my_tag = a;
		double x = (double)a * 0.25, y = (double)a * 0.001;
		long r = fn(a, a + 1, a * 2, a - 3, ~a, a * 5, a + 7, -a, x, y);
		if (r != MANY_EXPR(a, a + 1, a * 2, a - 3, ~a, a * 5, a + 7, -a, x, y))
			thread_bad++;
	}
	return NULL;
}

UKT_CASE_T(many_threads, 30)
{
	struct jprobe jp = { .kp.addr = (void *)jp_many, .entry = (void *)jp_many_entry_mt };
	UKT_EQ(register_jprobe(&jp), 0);
	pthread_t th[NTHREADS];
	for (long i = 0; i < NTHREADS; i++)
		UKT_EQ(pthread_create(&th[i], NULL, mt_worker, (void *)(i + 1)), 0);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	UKT_EQ(thread_bad, 0);
	UKT_EQ(entries, NTHREADS * NCALLS);
	UKT_EQ(jp.kp.nmissed, 0);
	unregister_jprobe(&jp);
}

/* ---- nesting ---------------------------------------------------------------------- */

NOINL long jn_inner(long x)
{
	__asm__ volatile("");
	return x * x + 1;
}

NOINL long jn_outer(long x, double y)
{
	__asm__ volatile("");
	return x * 3 + (long)y;
}

static atomic_long inner_entries, outer_entries, nest_bad;

long jn_inner_entry(long x)
{
	(void)x;
	inner_entries++;
	jprobe_return();
	return 0;
}

long jn_outer_entry(long x, double y)
{
	outer_entries++;
	long (*volatile in)(long) = jn_inner;
	if (in(x + 1) != (x + 1) * (x + 1) + 1)
		nest_bad++;
	char buf[32];
	snprintf(buf, sizeof(buf), "%f", y);
	__asm__ volatile("" :: "r"(buf) : "memory");
	jprobe_return();
	return 0;
}

UKT_CASE(nested_entry_calls_jprobed_function)
{
	long (*volatile out)(long, double) = jn_outer;
	long (*volatile in)(long) = jn_inner;
	struct jprobe ji = { .kp.addr = (void *)jn_inner, .entry = (void *)jn_inner_entry };
	struct jprobe jo = { .kp.addr = (void *)jn_outer, .entry = (void *)jn_outer_entry };
	struct jprobe *v[] = { &ji, &jo };
	UKT_EQ(register_jprobes(v, 2), 0);
	for (long i = 0; i < 50; i++) {
		UKT_EQ(out(i, 2.75), i * 3 + 2);
		UKT_EQ(in(i), i * i + 1);
	}
	UKT_EQ(nest_bad, 0);
	UKT_EQ(outer_entries, 50);
	UKT_EQ(inner_entries, 100);	/* 50 from the entry, 50 direct */
	UKT_EQ(ji.kp.nmissed + jo.kp.nmissed, 0);
	unregister_jprobes(v, 2);
}

static atomic_long chain_calls, chain_entries, chain_bad;

NOINL long jc(long n)
{
	__asm__ volatile("");
	chain_calls++;
	return n * 3 + 1;
}

long jc_entry(long n)
{
	chain_entries++;
	if (n > 0 && jc(n - 1) != (n - 1) * 3 + 1)
		chain_bad++;
	jprobe_return();
	return 0;
}

UKT_CASE(nested_self_chain)
{
	long (*volatile fn)(long) = jc;
	/* static: jprobe_return puts back the stack the outermost call was
	 * entered with (128 bytes above its sp: this frame), which would
	 * undo the nmissed a nested hit counts in a struct on this stack,
	 * as the kernel's jprobes would (MAX_STACK_SIZE) */
	static struct jprobe jp = { .kp.addr = (void *)jc, .entry = (void *)jc_entry };
	UKT_EQ(register_jprobe(&jp), 0);
	for (int round = 1; round <= 3; round++) {
		UKT_EQ(fn(40), 121);
		UKT_EQ(chain_bad, 0);
		/* each entry calls jc once more until a hit is missed (its
		 * call runs unprobed): the chain is bounded, every call is an
		 * entry or a miss */
		UKT_EQ(chain_entries + (long)jp.kp.nmissed, chain_calls);
		UKT_ASSERT((long)jp.kp.nmissed <= round);
		UKT_ASSERT(chain_entries >= 2 * round);	/* nesting works at all */
	}
	printf("  nesting depth of a jprobe entry: %ld (%lu missed)\n", chain_entries / 3,
	       jp.kp.nmissed);
	unregister_jprobe(&jp);
	long c = chain_calls;
	UKT_EQ(fn(5), 16);
	UKT_EQ(chain_calls, c + 1);
}

/* ---- unregister while an entry runs ----------------------------------------------- */

static atomic_int ue_in_entry, ue_go;

long ue_entry(long a, long b)
{
	(void)a; (void)b;
	ue_in_entry = 1;
	for (int i = 0; i < 2000 && !ue_go; i++)
		usleep(1000);
	usleep(20000);
	char buf[32];
	snprintf(buf, sizeof(buf), "%f", (double)a);
	__asm__ volatile("" :: "r"(buf) : "memory");
	entries++;
	jprobe_return();
	return 0;
}

static long ue_result;

static void *ue_thread(void *arg)
{
	(void)arg;
	long (*volatile fn)(long, long) = jp_simple;
	ue_result = fn(11, 22);
	return NULL;
}

UKT_CASE_T(unregister_while_entry_runs, 20)
{
	struct jprobe *jp = calloc(1, sizeof(*jp));
	UKT_ASSERT(jp);
	jp->kp.addr = (void *)jp_simple;
	jp->entry = (void *)ue_entry;
	UKT_EQ(register_jprobe(jp), 0);
	pthread_t t;
	UKT_EQ(pthread_create(&t, NULL, ue_thread, NULL), 0);
	while (!ue_in_entry)
		usleep(1000);
	ue_go = 1;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	unregister_jprobe(jp);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("  unregister_jprobe with an entry in progress took %.1f ms\n",
	       (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
	memset(jp, 0xa5, sizeof(*jp));		/* the caller may reuse it */
	free(jp);
	pthread_join(t, NULL);
	UKT_EQ(ue_result, 11 * 31 + (22 ^ 0x1234));
	UKT_EQ(entries, 1);
	long (*volatile fn)(long, long) = jp_simple;
	UKT_EQ(fn(1, 2), 31 + (2 ^ 0x1234));
	UKT_EQ(entries, 1);
}
