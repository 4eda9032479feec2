/* One copy of twice_of<int> in the program, two in its DWARF (one a CU):
 * a source-level probe on it is one probe, each call one event */
#include <cstdio>
#include "dtpl.h"

int main()
{
	int a = twice_of(3);
	int b = in_b(4);
	std::printf("dtpl %d %d\n", a, b);
	return 0;
}
