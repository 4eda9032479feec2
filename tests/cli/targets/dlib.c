/* The library of targets/duse.c: installed beside it, found through the
 * program's RUNPATH ($ORIGIN), which the DWARF tests name without a path. */
#include <string.h>
#include "dlib.h"

__attribute__((noinline)) long dlib_scale(const struct dl_item *it, long k)
{
	__asm__ volatile("" : : "r"(it) : "memory");
	return it->id * k + (long)strlen(it->name);
}
