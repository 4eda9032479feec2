/* SPDX-License-Identifier: MIT */
/*
 * A dynamically linked program without the C library (it has a dynamic
 * linker, no libc.so.6): what attach must refuse as "not glibc".  Raw
 * system calls only: prints "ready PID", then sleeps until killed.
 */
#include <stddef.h>

static long sys(long nr, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return r;
}

/* the entry: no return address on the stack, align it for the C code */
__asm__(".globl _start\n"
	"_start:\n"
	"	xor %ebp, %ebp\n"
	"	and $-16, %rsp\n"
	"	call cmain\n"
	"	hlt\n");

__attribute__((used, noreturn)) void cmain(void);
__attribute__((used, noreturn)) void cmain(void)
{
	char buf[32];
	static const char ready[] = "ready ";
	for (int j = 0; j < 6; j++)
		buf[j] = ready[j];
	long pid = sys(39, 0, 0, 0);	/* getpid */
	char digits[16];
	int n = 0, k = 6;
	do
		digits[n++] = (char)('0' + pid % 10);
	while ((pid /= 10) && n < 15);
	while (n)
		buf[k++] = digits[--n];
	buf[k++] = '\n';
	sys(1, 1, (long)buf, k);	/* write */
	for (;;) {
		long ts[2] = { 1, 0 };
		sys(35, (long)ts, 0, 0);	/* nanosleep */
	}
}
