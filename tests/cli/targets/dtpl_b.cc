/* the second CU instantiating twice_of<int> (targets/dtpl_a.cc) */
#include "dtpl.h"

int in_b(int x)
{
	return twice_of(x) + 1;
}

/* a dynamic initializer: g++ and clang++ name the function that runs it
 * _GLOBAL__sub_I_dtpl_b.cc, a name with a '.' as a file's */
int b_init = in_b(1);
