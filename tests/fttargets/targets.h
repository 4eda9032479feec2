/* SPDX-License-Identifier: MIT */
/*
 * Traceable functions for the ftrace tests, built twice (Makefile):
 * fe_* with -pg -mfentry -mrecord-mcount, pf_* with
 * -fpatchable-function-entry=5.  FT_DECL declares one set.
 */
#ifndef FT_TARGETS_H
#define FT_TARGETS_H

#define FT_CAT2(a, b) a##b
#define FT_CAT(a, b) FT_CAT2(a, b)

#define FT_DECL(p)							\
	int FT_CAT(p, add)(int a, int b);				\
	int FT_CAT(p, add_alt)(int a, int b);	/* a - b: the patch */	\
	int FT_CAT(p, mul)(int a, int b);				\
	long FT_CAT(p, sum6)(long a, long b, long c, long d, long e, long f); \
	double FT_CAT(p, fma3)(double a, double b, double c);		\
	int FT_CAT(p, fib)(int n);		/* recursive */		\
	int FT_CAT(p, chain)(int x);		/* calls add and mul */	\
	int FT_CAT(p, errno_keep)(void);	/* returns errno */	\
	int FT_CAT(p, other_one)(int x);				\
	int FT_CAT(p, other_two)(int x);				\
	int FT_CAT(p, twice)(int x);		/* 2x, as dl_*_twice */	\
	long FT_CAT(p, sum8)(long a, long b, long c, long d, long e,	\
			     long f, long g, long h);	/* g, h on the stack */ \
	int FT_CAT(p, depth)(int n);		/* n+1 calls, truly recursive */

FT_DECL(fe_)
FT_DECL(pf_)

#endif
