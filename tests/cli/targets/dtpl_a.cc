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

/* a conversion operator to a type of a namespace: "::" in its name */
namespace units {
struct Meters {
	long v;
};
}
struct Length {
	long mm;
	__attribute__((noinline)) operator units::Meters() const
	{
		std::printf("dtpl mm=%ld\n", mm);
		return units::Meters{ mm / 1000 };
	}
};

int main()
{
	Length len{ 4200 };
	units::Meters m = len;
	a_rather_long_namespace_name::an_even_longer_structure_name s{ 1 };
	long ps = pair_size(s, s);
	int a = twice_of(3);
	int b = in_b(4);
	std::printf("dtpl %d %d %ld %ld\n", a, b, ps, m.v);
	return 0;
}
