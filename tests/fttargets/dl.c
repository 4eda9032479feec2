/* SPDX-License-Identifier: MIT */
/* A library the ftrace tests dlopen: dl_fe_* or dl_pf_* (FT_P). */
#define FT_CAT2(a, b) a##b
#define FT_CAT(a, b) FT_CAT2(a, b)
#define F(name) FT_CAT(FT_P, name)
#define OPAQUE(x) __asm__ volatile("" : "+r"(x))

__attribute__((noinline)) int F(twice)(int x) { OPAQUE(x); return 2 * x; }
__attribute__((noinline)) int F(thrice)(int x) { OPAQUE(x); return 3 * x; }
__attribute__((noinline)) int F(both)(int x) { OPAQUE(x); return F(twice)(x) + F(thrice)(x); }

/* A leaf ftrace callback far from the executables that trace with it (a
 * shared object): it writes no register (its counter is hidden, so no
 * GOT load), so the hook saves none; and it is out of a rel32 call's
 * reach from the hook's code next to the executable. */
static unsigned long F(leaf_hits_);
__attribute__((noinline)) void F(leaf_cb)(unsigned long ip, unsigned long pip, void *op, void *regs)
{
	(void)ip, (void)pip, (void)op, (void)regs;
	__atomic_fetch_add(&F(leaf_hits_), 1, __ATOMIC_RELAXED);
}
__attribute__((noinline)) unsigned long F(leaf_hits)(void) { return F(leaf_hits_); }
