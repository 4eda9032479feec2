/* SPDX-License-Identifier: MIT */
/*
 * Recursive calls that count themselves, for probe / return probe pairs:
 *   recur N DEPTH        N times rec(DEPTH): rec(d) calls rec(d - 1) while
 *                        d > 0 and returns d; then tree(min(DEPTH, 6))
 *                        once: two calls of tree(d - 1) each
 *   recur N DEPTH jump   the same, then rec(DEPTH) once more whose
 *                        innermost call longjmps out of every level
 * prints "rec=<calls> tree=<calls> jumped=<calls left by longjmp>".
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long rec_calls, tree_calls, jumped;
static jmp_buf env;
static int jump_at_bottom;

__attribute__((noinline)) int rec(int d)
{
	rec_calls++;
	if (d > 0) {
		int r = rec(d - 1);
		__asm__ volatile("" : : "r"(r) : "memory");
	} else if (jump_at_bottom) {
		longjmp(env, 1);
	}
	return d;
}

__attribute__((noinline)) int tree(int d)
{
	tree_calls++;
	if (d > 0) {
		tree(d - 1);
		tree(d - 1);
	}
	return d;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return 100;
	int n = atoi(argv[1]), depth = atoi(argv[2]);
	for (int k = 0; k < n; k++)
		rec(depth);
	tree(depth < 6 ? depth : 6);
	if (argc > 3 && !strcmp(argv[3], "jump")) {
		unsigned long before = rec_calls;
		jump_at_bottom = 1;
		if (!setjmp(env))
			rec(depth);
		jumped = rec_calls - before;
	}
	printf("rec=%lu tree=%lu jumped=%lu\n", rec_calls, tree_calls, jumped);
	return 0;
}
