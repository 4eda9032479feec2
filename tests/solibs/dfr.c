/*
 * A library the ukprobe tests' loader target dlopens and dlcloses on
 * command: probes defined on it before it is loaded are armed each time
 * it is (its constructor's call included).
 */
int dfr_data = 7;

__attribute__((noinline)) int dfr_mix(int a, long b)
{
	__asm__ volatile("");
	return (int)(3 * a + b);
}

__attribute__((constructor)) static void dfr_ctor(void)
{
	dfr_data += dfr_mix(-1, -2);
}
