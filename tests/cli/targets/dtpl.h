/* A function template both files of targets/dtpl_a.cc and dtpl_b.cc
 * instantiate: each CU describes its copy, the linker keeps one */
template <typename T> T twice_of(T v)
{
	return v + v;
}

int in_b(int x);
