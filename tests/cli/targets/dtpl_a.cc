/* One copy of twice_of<int> in the program, two in its DWARF (one a CU):
 * a source-level probe on it is one probe, each call one event */
#include <cstdio>
#include "dtpl.h"

/* a template whose name, with its arguments, is longer than an event's */
namespace a_rather_long_namespace_name {
struct an_even_longer_structure_name {
	int v;
};
}

template <typename T, typename U> __attribute__((noinline)) long pair_size(T t, U u)
{
	return (long)sizeof(T) + (long)sizeof(U) + t.v + u.v;
}

int main()
{
	a_rather_long_namespace_name::an_even_longer_structure_name s{ 1 };
	long ps = pair_size(s, s);
	int a = twice_of(3);
	int b = in_b(4);
	std::printf("dtpl %d %d %ld\n", a, b, ps);
	return 0;
}
