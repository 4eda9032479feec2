// SPDX-License-Identifier: MIT
// C++ members reached through base classes, globals by qualified names,
// and a method written on one line (its body on the line of its name):
// each prints what ukprobe must read there.
#include <cstdio>

namespace ns {
long gval = 40;
}
static int file_static;	/* set at run time: a place in memory at -O2 too */

struct Base {
	int b1;
	long b2;
	static int sm;
	virtual ~Base() {}
};
int Base::sm = 9;
struct Mid : Base {
	short m;
};
struct Der : Mid {
	int d;
	int get(int k);
};

__attribute__((noinline)) int Der::get(int k) { std::printf("get b1=%d b2=%ld m=%d d=%d k=%d g=%ld sm=%d fs=%d\n", b1, b2, m, d, k, ns::gval, sm, file_static); return b1 + k; }

// references: a long, an object with bases, an rvalue one
__attribute__((noinline)) long bump(long &n, const Der &o, int &&r)
{
	std::printf("bump n=%ld d=%d b1=%d r=%d\n", n, o.d, o.b1, r);
	n += r;
	return n;
}

int main(int argc, char **)
{
	Der x;
	file_static = 10 + argc;
	x.b1 = 4 + argc;
	x.b2 = -6;
	x.m = 7;
	x.d = 8;
	long n = 30 + argc;
	bump(n, x, 5 + argc);
	return x.get(2 + argc) == 8 && n == 35 + 2 * argc ? 0 : 1;
}
