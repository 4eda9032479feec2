/* A program whose library, libdlib.so.1, lies in its own directory and is
 * found through its RUNPATH ($ORIGIN), nowhere the system looks.  With no
 * argument it calls it three times, printing what it passes; with "wait"
 * it says "ready PID", then calls it every 10 ms until a byte arrives on
 * stdin, and says "ok N". */
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "dlib.h"

int main(int argc, char **argv)
{
	static const char *const names[] = { "ant", "bee", "cicada" };
	if (argc > 1 && !strcmp(argv[1], "wait")) {
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		long n = 0;
		for (;;) {
			struct pollfd p = { 0, POLLIN, 0 };
			if (poll(&p, 1, 10) > 0)
				break;
			struct dl_item it = { (int)(n % 100), names[n % 3] };
			if (dlib_scale(&it, 2 * it.id + 1) < 0)
				return 1;
			n++;
		}
		printf("ok %ld\n", n);
		return 0;
	}
	long sum = 0;
	for (int i = 0; i < 3; i++) {
		struct dl_item it = { 10 + i, names[i] };
		printf("duse id=%d name=\"%s\" k=%d\n", it.id, it.name, 7 * i);
		sum += dlib_scale(&it, 7 * i);
	}
	printf("sum %ld\n", sum);
	return 0;
}
