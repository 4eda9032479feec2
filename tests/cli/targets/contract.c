/* SPDX-License-Identifier: MIT */
/*
 * A target for tests/cli/contract.c: places of a known layout, values it
 * computes at run time and prints itself (stdout), so that ukprobe's
 * lines can be checked against what the program saw.
 *
 *   contract addr       prints "addr ct_take 0x..." (the address of ct_take)
 *   contract fetch      calls ct_take, ct_flags, ct_stack with values of
 *                       this run, printing before each what it passes:
 *                         addr ct_take 0x...
 *                         at 0x...          (the address ct_take gets)
 *                         take V0 V1 STR ARR0..ARR63   (what %di points to)
 *                         tbl T0 T1 T2 T3              (ct_tbl's words)
 *                         pisn 0x... NAME   (libc's program_invocation_short_name)
 *                         flags 0x...       (rflags at ct_flags+3, one a call)
 *                         stack SP W0 W1 W2 (rsp and its words at ct_stack)
 *   contract str        ct_str(s) with strings of 254, 255, 256, 300 and
 *                       5000 bytes: "str LEN" before each; character k
 *                       of each is 'a' + k % 26
 *   contract onoff N OFF ON
 *                       ct_tick(i) for i = 0..N-1; ct_off() before the
 *                       tick OFF, ct_on() before the tick ON
 *   contract place      calls ct_place once
 *   contract loop       prints "ready PID", "addr ct_take 0x...", "at 0x..."
 *                       and calls ct_take every 10 ms until stdin ends
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/*
 * ct_place: 16 one-byte nops, then ret: every offset 0..16 is an
 * instruction boundary.
 * ct_flags(a, b): cmp b, a (3 bytes), then returns rflags as pushfq sees
 * them at ct_flags+3.
 * ct_stack(out): stores rsp, [rsp], [rsp+8], [rsp+16] at entry into out[0..3];
 * ct_stack_outer(out, a, b) calls it with a at [rsp+8] and b at [rsp+16].
 * ct_tbl, ct_tbl_mid: four words of data, ct_tbl_mid at the third.
 */
__asm__(".text\n"
	".globl ct_place\n.type ct_place,@function\nct_place:\n"
	".rept 16\nnop\n.endr\nret\n.size ct_place,.-ct_place\n"
	".globl ct_flags\n.type ct_flags,@function\nct_flags:\n"
	"cmp %rsi, %rdi\npushfq\npop %rax\nret\n.size ct_flags,.-ct_flags\n"
	".globl ct_stack\n.type ct_stack,@function\nct_stack:\n"
	"mov %rsp, 0(%rdi)\nmov 0(%rsp), %rax\nmov %rax, 8(%rdi)\n"
	"mov 8(%rsp), %rax\nmov %rax, 16(%rdi)\nmov 16(%rsp), %rax\nmov %rax, 24(%rdi)\n"
	"ret\n.size ct_stack,.-ct_stack\n"
	".globl ct_stack_outer\n.type ct_stack_outer,@function\nct_stack_outer:\n"
	"push %rdx\npush %rsi\ncall ct_stack\nadd $16, %rsp\nret\n"
	".size ct_stack_outer,.-ct_stack_outer\n"
	".data\n.balign 8\n"
	".globl ct_tbl\n.type ct_tbl,@object\nct_tbl:\n.quad 0, 0\n.size ct_tbl,16\n"
	".globl ct_tbl_mid\n.type ct_tbl_mid,@object\nct_tbl_mid:\n.quad 0, 0\n.size ct_tbl_mid,16\n"
	".text\n");

void ct_place(void);
unsigned long ct_flags(unsigned long a, unsigned long b);
void ct_stack_outer(unsigned long *out, unsigned long a, unsigned long b);
extern unsigned long ct_tbl[2], ct_tbl_mid[2];

struct take {
	uint64_t v0;
	int64_t v1;
	const char *str;
	uint8_t arr[64];
	uint8_t *mid;		/* &arr[8] */
};

volatile unsigned long sink;

__attribute__((noinline)) void ct_take(struct take *t)
{
	__asm__ volatile("" ::"r"(t));
	sink += t->v0;
}

__attribute__((noinline)) void ct_str(const char *s)
{
	__asm__ volatile("" ::"r"(s));
	sink += (unsigned char)s[0];
}

__attribute__((noinline)) void ct_tick(unsigned long i)
{
	__asm__ volatile("" ::"r"(i));
	sink += i;
}

__attribute__((noinline)) void ct_off(void)
{
	__asm__ volatile("");
	sink++;
}

__attribute__((noinline)) void ct_on(void)
{
	__asm__ volatile("");
	sink++;
}

static unsigned long seed(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long)ts.tv_nsec ^ ((unsigned long)getpid() << 20);
}

static int fetch(void)
{
	unsigned long s = seed();
	printf("addr ct_take 0x%lx\n", (unsigned long)ct_take);
	static char name[40];
	snprintf(name, sizeof name, "run-%lu", s % 100000);
	static struct take t;
	t.v0 = s * 2654435761u;
	t.v1 = -(int64_t)(s % 1000003) - 1;
	t.str = name;
	t.mid = &t.arr[8];
	printf("at 0x%lx\n", (unsigned long)&t);
	for (int k = 0; k < 64; k++)
		t.arr[k] = (uint8_t)(s >> (k % 8) * 3) + (uint8_t)k;
	printf("take %llu %lld %s", (unsigned long long)t.v0, (long long)t.v1, t.str);
	for (int k = 0; k < 64; k++)
		printf(" %u", t.arr[k]);
	printf("\n");
	ct_tbl[0] = s + 1;
	ct_tbl[1] = s * 3 + 2;
	ct_tbl_mid[0] = s * 5 + 3;
	ct_tbl_mid[1] = s * 7 + 4;
	printf("tbl %lu %lu %lu %lu\n", ct_tbl[0], ct_tbl[1], ct_tbl_mid[0], ct_tbl_mid[1]);
	/* libc's own variable (this program does not refer to it: no copy
	 * of it here) */
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	char **pisn = libc ? dlsym(libc, "program_invocation_short_name") : NULL;
	if (!pisn)
		return 1;
	printf("pisn 0x%lx %s\n", (unsigned long)*pisn, *pisn);
	fflush(stdout);
	ct_take(&t);

	static const unsigned long ab[][2] = { { 1, 2 }, { 2, 2 }, { 3, 2 },
					       { 0x8000000000000000ul, 1 } };
	for (int k = 0; k < 4; k++) {
		unsigned long f = ct_flags(ab[k][0], ab[k][1]);
		printf("flags 0x%lx\n", f);
	}
	unsigned long out[4];
	ct_stack_outer(out, s ^ 0x5555, s + 77);
	printf("stack 0x%lx 0x%lx 0x%lx 0x%lx\n", out[0], out[1], out[2], out[3]);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	if (!strcmp(mode, "addr")) {
		printf("addr ct_take 0x%lx\n", (unsigned long)ct_take);
		return 0;
	}
	if (!strcmp(mode, "fetch"))
		return fetch();
	if (!strcmp(mode, "loop")) {
		/* to attach to: ct_take every 10 ms until stdin ends */
		static struct take t;
		printf("ready %d\naddr ct_take 0x%lx\nat 0x%lx\n", (int)getpid(),
		       (unsigned long)ct_take, (unsigned long)&t);
		fflush(stdout);
		fcntl(0, F_SETFL, O_NONBLOCK);
		char c;
		while (read(0, &c, 1) < 0) {
			ct_take(&t);
			struct timespec ts = { 0, 10000000 };
			nanosleep(&ts, NULL);
		}
		return 0;
	}
	if (!strcmp(mode, "place")) {
		ct_place();
		return 0;
	}
	if (!strcmp(mode, "str")) {
		static char buf[5001];
		for (int k = 0; k < 5000; k++)
			buf[k] = (char)('a' + k % 26);
		static const int lens[] = { 254, 255, 256, 300, 5000 };
		for (int k = 0; k < 5; k++) {
			char *s = strndup(buf, (size_t)lens[k]);
			printf("str %d\n", lens[k]);
			fflush(stdout);
			ct_str(s);
			free(s);
		}
		return 0;
	}
	if (!strcmp(mode, "onoff") && argc > 4) {
		unsigned long n = strtoul(argv[2], NULL, 0), off = strtoul(argv[3], NULL, 0),
			      on = strtoul(argv[4], NULL, 0);
		for (unsigned long i = 0; i < n; i++) {
			if (i == off)
				ct_off();
			if (i == on)
				ct_on();
			ct_tick(i);
		}
		printf("ticks %lu\n", n);
		return 0;
	}
	return 2;
}
