/* A program whose debug information the corrupt_* cases of the DWARF
 * tests patch into loops: a struct with an array passed by value (the
 * calling convention's reading of it at %return), a struct of anonymous
 * unions (its members' search and its fetch whole). */
#include <stdio.h>

struct arr {
	int v[2];
	long w;
};

struct many {
	union { int a0; };
	union { int a1; };
	union { int a2; };
	union { int a3; };
	union { int a4; };
	union { int a5; };
	union { int a6; };
	union { int a7; };
	union { int a8; };
	union { int a9; };
	union { int a10; };
	union { int a11; };
	int last;
};

__attribute__((noinline)) long arr_sum(struct arr a, struct many *m)
{
	printf("arr_sum v0=%d w=%ld last=%d\n", a.v[0], a.w, m->last);
	return a.v[0] + a.w + m->last;
}

int main(int argc, char **argv)
{
	(void)argv;
	struct arr a = { { argc, 2 }, 3 };
	struct many mm = { .a0 = 1, .last = argc };
	long s = arr_sum(a, &mm);
	printf("main s=%ld last=%d\n", s, mm.last);
	return 0;
}
