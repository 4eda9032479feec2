// SPDX-License-Identifier: MIT
// C++ members reached through base classes, and a method written on one
// line (its body on the line of its name): each prints what ukprobe must
// read there.
#include <cstdio>

struct Base {
	int b1;
	long b2;
	virtual ~Base() {}
};
struct Mid : Base {
	short m;
};
struct Der : Mid {
	int d;
	int get(int k);
};

__attribute__((noinline)) int Der::get(int k) { std::printf("get b1=%d b2=%ld m=%d d=%d k=%d\n", b1, b2, m, d, k); return b1 + k; }

int main(int argc, char **)
{
	Der x;
	x.b1 = 4 + argc;
	x.b2 = -6;
	x.m = 7;
	x.d = 8;
	return x.get(2 + argc) == 8 ? 0 : 1;
}
