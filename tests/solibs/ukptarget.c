/* A shared object the tests dlopen, probe and dlclose. */
__attribute__((noinline)) int ukpt_triple(int x)
{
	__asm__ volatile("");
	return 3 * x;
}
