/* SPDX-License-Identifier: MIT */
/* A library the ftrace tests dlopen: dl_fe_* or dl_pf_* (FT_P). */
#define FT_CAT2(a, b) a##b
#define FT_CAT(a, b) FT_CAT2(a, b)
#define F(name) FT_CAT(FT_P, name)
#define OPAQUE(x) __asm__ volatile("" : "+r"(x))

__attribute__((noinline)) int F(twice)(int x) { OPAQUE(x); return 2 * x; }
__attribute__((noinline)) int F(thrice)(int x) { OPAQUE(x); return 3 * x; }
__attribute__((noinline)) int F(both)(int x) { OPAQUE(x); return F(twice)(x) + F(thrice)(x); }
