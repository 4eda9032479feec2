/* the second CU instantiating twice_of<int> (targets/dtpl_a.cc) */
#include "dtpl.h"

int in_b(int x)
{
	return twice_of(x) + 1;
}
