/* Parameters the optimizer only knows at the function's entry, or splits
 * over registers (DW_OP_entry_value, DW_OP_piece): the DWARF tests read
 * them and compare with what the program prints here. */
#include <stdio.h>

struct pair {
	long lo;
	long hi;
};

__attribute__((noinline)) void sink(long v)
{
	__asm__ volatile("" : : "r"(v) : "memory");
}

/* x is dead once printf is called: at -O2 gcc describes it from there
 * on as DW_OP_entry_value(DW_OP_reg5), its value at the entry */
__attribute__((noinline)) long after_call(long x, long y)
{
	printf("after_call x=%ld y=%ld\n", x, y);
	sink(y);
	return y + 1;
}

/* p arrives in two registers: a location of two pieces */
__attribute__((noinline)) long pair_sum(struct pair p)
{
	printf("pair_sum lo=%ld hi=%ld\n", p.lo, p.hi);
	return p.lo + p.hi;
}

struct mixed {
	int a;
	int b;
	long c;
};

/* m arrives in two registers, a and b sharing the first */
__attribute__((noinline)) long mixed_sum(struct mixed m)
{
	printf("mixed_sum a=%d b=%d c=%ld\n", m.a, m.b, m.c);
	return m.a + m.b + m.c;
}

struct small {
	int lo;
	unsigned hi;
};

/* s arrives whole in one register, hi in its upper half */
__attribute__((noinline)) long small_sum(struct small s)
{
	printf("small_sum lo=%d hi=%u\n", s.lo, s.hi);
	return s.lo + (long)s.hi;
}

int main(int argc, char **argv)
{
	(void)argv;
	long r = after_call(100 + argc, 200 + argc);
	struct pair p = { -7 * argc, 1000 + argc };
	r += pair_sum(p);
	struct mixed m = { -3 * argc, 40 + argc, 5000 + argc };
	r += mixed_sum(m);
	struct small s = { -60 - argc, 3000000000u + (unsigned)argc };
	r += small_sum(s);
	printf("main r=%ld\n", r);
	return 0;
}
