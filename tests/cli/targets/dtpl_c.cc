/* A file with no external symbol and an object to construct: g++ names
 * the function that constructs it after the file, _GLOBAL__sub_I_dtpl_c.cc,
 * which reads as a source file's name (targets/dtpl_a.cc) */
#include <cstdio>

namespace {
struct Greeter {
	Greeter()
	{
		std::printf("dtpl_c init\n");
	}
} greeter;
}
