/* SPDX-License-Identifier: MIT */
/* See targets.h.  FT_P is the name prefix (fe_ or pf_). */
#include <errno.h>
#include "targets.h"

#define F(name) FT_CAT(FT_P, name)
/* each function's body is opaque to the optimiser of its callers (no
 * folding or cloning: every call is a real call of the patched entry) */
#define OPAQUE(x) __asm__ volatile("" : "+r"(x))

__attribute__((noinline)) int F(add)(int a, int b) { OPAQUE(a); return a + b; }
__attribute__((noinline)) int F(add_alt)(int a, int b) { OPAQUE(a); return a - b; }
__attribute__((noinline)) int F(mul)(int a, int b) { OPAQUE(a); return a * b; }
__attribute__((noinline)) long F(sum6)(long a, long b, long c, long d, long e, long f)
{
	OPAQUE(a);
	return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f;
}
__attribute__((noinline)) double F(fma3)(double a, double b, double c)
{
	__asm__ volatile("" : "+x"(a));
	return a * b + c;
}
__attribute__((noinline)) int F(fib)(int n)
{
	OPAQUE(n);
	return n < 2 ? n : F(fib)(n - 1) + F(fib)(n - 2);
}
__attribute__((noinline)) int F(chain)(int x) { OPAQUE(x); return F(mul)(F(add)(x, 1), 2); }
__attribute__((noinline)) int F(errno_keep)(void) { return errno; }
__attribute__((noinline)) int F(other_one)(int x) { OPAQUE(x); return x + 100; }
__attribute__((noinline)) int F(other_two)(int x) { OPAQUE(x); return x + 200; }
__attribute__((noinline)) int F(twice)(int x) { OPAQUE(x); return 2 * x; }
__attribute__((noinline)) long F(sum8)(long a, long b, long c, long d, long e, long f,
				       long g, long h)
{
	OPAQUE(a);
	return a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h;
}
/* the asm after the call keeps the compiler from making it a loop */
__attribute__((noinline)) int F(depth)(int n)
{
	OPAQUE(n);
	if (n <= 0)
		return 0;
	int r = F(depth)(n - 1);
	OPAQUE(r);
	return r + 1;
}
