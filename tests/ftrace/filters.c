/* SPDX-License-Identifier: MIT */
/*
 * ftrace filters: names, globs, "object:glob", several words, notrace over
 * filter, reset, ftrace_set_filter_ip, every error code, filters changed
 * while registered, and the two listings.
 *
 * Most cases call every traceable function of tests/fttargets once (see
 * call_everything) and then check the exact number of callbacks each one
 * got: the ones a filter selects 1 (2 for add and mul, which chain calls
 * too), every other one 0.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ukt.h"
#include "fttargets/targets.h"

/* ---- every traceable function, and how often one round calls it ---------------- */

#define FN(p, n, c) { #p #n, (void *)&FT_CAT(p, n), c }
#define FNS(p)								\
	FN(p, add, 2), FN(p, add_alt, 1), FN(p, mul, 2), FN(p, sum6, 1),	\
	FN(p, fma3, 1), FN(p, fib, 1), FN(p, chain, 1), FN(p, errno_keep, 1), \
	FN(p, other_one, 1), FN(p, other_two, 1), FN(p, twice, 1),	\
	FN(p, sum8, 1), FN(p, depth, 1)

static const struct fn {
	const char *name;
	void *addr;
	int calls;	/* per round of call_everything */
} fns[] = { FNS(fe_), FNS(pf_) };
#define NFNS ((int)(sizeof(fns) / sizeof(fns[0])))

#define CALL_SET(p)							\
	do {								\
		UKT_EQ(FT_CAT(p, add)(2, 3), 5);			\
		UKT_EQ(FT_CAT(p, add_alt)(7, 3), 4);			\
		UKT_EQ(FT_CAT(p, mul)(4, 5), 20);			\
		UKT_EQ(FT_CAT(p, sum6)(1, 1, 1, 1, 1, 1), 21);		\
		UKT_ASSERT(FT_CAT(p, fma3)(1.5, 2.0, 0.25) == 3.25);	\
		UKT_EQ(FT_CAT(p, fib)(1), 1);	/* one call */		\
		UKT_EQ(FT_CAT(p, chain)(3), 8);	/* + add + mul */	\
		errno = 7;						\
		UKT_EQ(FT_CAT(p, errno_keep)(), 7);			\
		UKT_EQ(FT_CAT(p, other_one)(1), 101);			\
		UKT_EQ(FT_CAT(p, other_two)(1), 201);			\
		UKT_EQ(FT_CAT(p, twice)(21), 42);			\
		UKT_EQ(FT_CAT(p, sum8)(1, 1, 1, 1, 1, 1, 1, 1), 36);	\
		UKT_EQ(FT_CAT(p, depth)(0), 0);	/* one call */		\
	} while (0)

static void call_everything(void)
{
	CALL_SET(fe_);
	CALL_SET(pf_);
}

/* ---- counting callbacks per function ------------------------------------------- */

static unsigned long hip[64];
static long hcnt[64], hother;

static void count_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		     struct pt_regs *regs)
{
	(void)parent_ip;
	(void)op;
	(void)regs;
	for (int i = 0; i < 64; i++) {
		if (hip[i] == ip || !hip[i]) {
			hip[i] = ip;
			hcnt[i]++;
			return;
		}
	}
	hother++;
}

static long hits_of(const void *f)
{
	for (int i = 0; i < 64 && hip[i]; i++)
		if (hip[i] == (unsigned long)f)
			return hcnt[i];
	return 0;
}

static void hits_reset(void)
{
	memset(hip, 0, sizeof(hip));
	memset(hcnt, 0, sizeof(hcnt));
	hother = 0;
}

static bool word_in(const char *list, const char *w)
{
	size_t n = strlen(w);
	for (const char *s = list; (s = strstr(s, w)) != NULL; s += n)
		if ((s == list || s[-1] == ' ') && (s[n] == ' ' || !s[n]))
			return true;
	return false;
}

/*
 * One round of calls; exactly the functions in `traced` (names separated
 * by single spaces, "*" for all of them) got their callbacks, as many as
 * they were called.
 */
#define EXPECT_TRACED(traced) expect_traced(traced, __LINE__)
static void expect_traced(const char *traced, int line)
{
	hits_reset();
	call_everything();
	int bad = 0;
	for (int i = 0; i < NFNS; i++) {
		long want = !strcmp(traced, "*") || word_in(traced, fns[i].name) ? fns[i].calls : 0;
		long got = hits_of(fns[i].addr);
		if (got != want) {
			fprintf(stderr, "  line %d: %s: %ld callbacks, want %ld\n", line,
				fns[i].name, got, want);
			bad++;
		}
	}
	if (hother)
		fprintf(stderr, "  line %d: %ld callbacks at other addresses\n", line, hother);
	if (bad || hother)
		UKT_FAIL("wrong callbacks with traced = \"%s\"", traced);
}

/* ftrace_set_filter / _notrace with a C string */
static int set_f(struct ftrace_ops *ops, const char *s, int reset)
{
	return ftrace_set_filter(ops, (unsigned char *)s, s ? (int)strlen(s) : 0, reset);
}

static int set_n(struct ftrace_ops *ops, const char *s, int reset)
{
	return ftrace_set_notrace(ops, (unsigned char *)s, s ? (int)strlen(s) : 0, reset);
}

static const char *exe_name(void)
{
	static char buf[4096];
	ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
	UKT_ASSERT(n > 0);
	buf[n] = 0;
	return strrchr(buf, '/') + 1;
}

#define BOTH(name, body)						\
	UKT_CASE(name##_fentry) { body(fe_) }				\
	UKT_CASE(name##_patchable) { body(pf_) }

#define S(p, n) #p #n

/* ---- names ------------------------------------------------------------------------ */

UKT_CASE(nothing_registered_no_callbacks)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "fe_add", 1), 0);	/* a filter alone traces nothing */
	EXPECT_TRACED("");
}

#define ONE_NAME(p)							\
	struct ftrace_ops ops = { .func = count_cb };			\
	UKT_EQ(set_f(&ops, S(p, add), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	EXPECT_TRACED(S(p, add));	/* not add_alt, nor the other set */ \
	UKT_EQ(unregister_ftrace_function(&ops), 0);			\
	EXPECT_TRACED("");
BOTH(name_selects_exactly_that_function, ONE_NAME)

UKT_CASE(no_filter_traces_every_function)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("*");
	UKT_EQ(unregister_ftrace_function(&ops), 0);
	EXPECT_TRACED("");
}

UKT_CASE(several_words_any_whitespace)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "  fe_add pf_mul\tfe_twice\n\n pf_depth  ", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("fe_add pf_mul fe_twice pf_depth");
}

/* ---- globs --------------------------------------------------------------------- */

UKT_CASE(glob_star_at_end)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "fe_other_*", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("fe_other_one fe_other_two");
}

UKT_CASE(glob_star_at_start)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "*_other_one", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("fe_other_one pf_other_one");
}

UKT_CASE(glob_star_both_ends)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "*add*", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("fe_add fe_add_alt pf_add pf_add_alt");
}

UKT_CASE(glob_star_in_middle)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "pf_s*6", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("pf_sum6");
}

UKT_CASE(glob_question_mark_is_one_character)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "?e_ad?", 1), 0);	/* not fe_add_alt */
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("fe_add");
	UKT_EQ(set_f(&ops, "fe_other_???", 1), 0);
	EXPECT_TRACED("fe_other_one fe_other_two");
	UKT_EQ(set_f(&ops, "fe_su??", 1), 0);
	EXPECT_TRACED("fe_sum6 fe_sum8");
}

UKT_CASE(glob_brackets)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "[fp][ef]_mul", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("fe_mul pf_mul");
	UKT_EQ(set_f(&ops, "fe_sum[0-7]", 1), 0);
	EXPECT_TRACED("fe_sum6");
	UKT_EQ(set_f(&ops, "pf_[!aeo]*", 1), 0);
	EXPECT_TRACED("pf_mul pf_sum6 pf_sum8 pf_fma3 pf_fib pf_chain pf_twice pf_depth");
}

UKT_CASE(glob_star_alone_is_every_function)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "fe_add", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	UKT_EQ(set_f(&ops, "*", 1), 0);
	EXPECT_TRACED("*");
}

/* ---- object:glob ---------------------------------------------------------------- */

UKT_CASE(object_glob_main_executable)
{
	char f[4200];
	struct ftrace_ops ops = { .func = count_cb };
	snprintf(f, sizeof(f), "%s:fe_a*", exe_name());
	UKT_EQ(set_f(&ops, f, 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("fe_add fe_add_alt");
	/* a glob on the object too */
	snprintf(f, sizeof(f), "%.*s*:pf_mul", (int)strlen(exe_name()) - 2, exe_name());
	UKT_EQ(set_f(&ops, f, 1), 0);
	EXPECT_TRACED("pf_mul");
	UKT_EQ(set_f(&ops, "*:fe_twice", 1), 0);
	EXPECT_TRACED("fe_twice");
	/* mixed with plain words */
	snprintf(f, sizeof(f), "pf_depth %s:fe_depth", exe_name());
	UKT_EQ(set_f(&ops, f, 1), 0);
	EXPECT_TRACED("fe_depth pf_depth");
}

UKT_CASE(object_glob_that_matches_nothing_is_einval)
{
	char f[4200];
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "fe_mul", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	UKT_EQ(set_f(&ops, "libc.so.6:fe_add", 1), -EINVAL);	/* wrong object */
	UKT_EQ(set_f(&ops, "nosuch.so:*", 0), -EINVAL);
	snprintf(f, sizeof(f), "%s:nosuch_function", exe_name());
	UKT_EQ(set_f(&ops, f, 1), -EINVAL);
	snprintf(f, sizeof(f), "%s:", exe_name());	/* an empty function glob */
	UKT_EQ(set_f(&ops, f, 1), -EINVAL);
	EXPECT_TRACED("fe_mul");
}

/* ---- words that match nothing --------------------------------------------------- */

UKT_CASE(word_matching_nothing_is_einval_and_changes_nothing)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "nosuch_function", 1), -EINVAL);
	UKT_EQ(set_f(&ops, "fe_add", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("fe_add");
	UKT_EQ(set_f(&ops, "fe_mul nosuch", 1), -EINVAL);	/* reset undone too */
	EXPECT_TRACED("fe_add");
	UKT_EQ(set_f(&ops, "nosuch fe_mul", 0), -EINVAL);
	EXPECT_TRACED("fe_add");
	UKT_EQ(set_f(&ops, "fe_mul fe_zz*", 0), -EINVAL);	/* a glob too */
	EXPECT_TRACED("fe_add");
	UKT_EQ(set_f(&ops, "fe_ad", 0), -EINVAL);	/* a prefix is not a match */
	UKT_EQ(set_f(&ops, "FE_ADD", 0), -EINVAL);	/* case matters */
	EXPECT_TRACED("fe_add");
	UKT_EQ(set_n(&ops, "nosuch", 0), -EINVAL);
	UKT_EQ(set_n(&ops, "fe_add nosuch", 1), -EINVAL);
	EXPECT_TRACED("fe_add");
}

UKT_CASE(word_matching_nothing_before_register_leaves_it_unfiltered)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "fe_add nosuch", 1), -EINVAL);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("*");
}

/* ---- reset ---------------------------------------------------------------------- */

UKT_CASE(reset_zero_adds_reset_one_replaces)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "fe_add", 1), 0);
	UKT_EQ(set_f(&ops, "pf_mul", 0), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("fe_add pf_mul");
	UKT_EQ(set_f(&ops, "fe_twice", 0), 0);
	EXPECT_TRACED("fe_add pf_mul fe_twice");
	UKT_EQ(set_f(&ops, "fe_add", 0), 0);	/* again: no change */
	EXPECT_TRACED("fe_add pf_mul fe_twice");
	UKT_EQ(set_f(&ops, "pf_sum8", 1), 0);
	EXPECT_TRACED("pf_sum8");
}

UKT_CASE(null_buffer_with_reset_traces_every_function)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "fe_add", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("fe_add");
	UKT_EQ(ftrace_set_filter(&ops, NULL, 0, 0), 0);	/* no reset: nothing */
	EXPECT_TRACED("fe_add");
	UKT_EQ(ftrace_set_filter(&ops, NULL, 0, 1), 0);
	EXPECT_TRACED("*");
	UKT_EQ(set_f(&ops, "pf_add", 1), 0);
	EXPECT_TRACED("pf_add");
}

/* ---- notrace ------------------------------------------------------------------- */

UKT_CASE(notrace_wins_over_filter)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "fe_a*", 1), 0);
	UKT_EQ(set_n(&ops, "fe_add_alt", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("fe_add");
	UKT_EQ(set_n(&ops, "fe_add", 0), 0);	/* both in notrace now */
	EXPECT_TRACED("");
	UKT_EQ(set_n(&ops, "fe_add", 1), 0);
	EXPECT_TRACED("fe_add_alt");
	UKT_EQ(set_n(&ops, NULL, 1), 0);
	EXPECT_TRACED("fe_add fe_add_alt");
}

UKT_CASE(notrace_same_as_filter_calls_nothing)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "pf_mul pf_twice", 1), 0);
	UKT_EQ(set_n(&ops, "pf_twice pf_mul", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("");
}

UKT_CASE(notrace_without_filter_traces_all_the_rest)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_n(&ops, "fe_*", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("pf_add pf_add_alt pf_mul pf_sum6 pf_fma3 pf_fib pf_chain pf_errno_keep "
		      "pf_other_one pf_other_two pf_twice pf_sum8 pf_depth");
	UKT_EQ(set_n(&ops, "pf_[a-n]*", 0), 0);
	EXPECT_TRACED("pf_other_one pf_other_two pf_twice pf_sum6 pf_sum8");
	UKT_EQ(set_n(&ops, "pf_other_one", 1), 0);	/* replaces */
	EXPECT_TRACED("fe_add fe_add_alt fe_mul fe_sum6 fe_fma3 fe_fib fe_chain fe_errno_keep "
		      "fe_other_one fe_other_two fe_twice fe_sum8 fe_depth "
		      "pf_add pf_add_alt pf_mul pf_sum6 pf_fma3 pf_fib pf_chain pf_errno_keep "
		      "pf_other_two pf_twice pf_sum8 pf_depth");
}

UKT_CASE(notrace_does_not_touch_the_filter)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "fe_add fe_mul", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	UKT_EQ(set_n(&ops, "fe_mul", 1), 0);
	EXPECT_TRACED("fe_add");
	UKT_EQ(set_n(&ops, NULL, 1), 0);	/* the filter is still there */
	EXPECT_TRACED("fe_add fe_mul");
	UKT_EQ(set_f(&ops, NULL, 1), 0);	/* and the other way round */
	UKT_EQ(set_n(&ops, "pf_*", 1), 0);
	UKT_EQ(set_f(&ops, "pf_add fe_add", 1), 0);
	EXPECT_TRACED("fe_add");
}

/* ---- len ---------------------------------------------------------------------- */

UKT_CASE(len_bounds_the_buffer)
{
	struct ftrace_ops ops = { .func = count_cb };
	unsigned char buf[] = "fe_add_alt fe_mul";
	UKT_EQ(ftrace_set_filter(&ops, buf, 6, 1), 0);	/* "fe_add" */
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("fe_add");
	UKT_EQ(ftrace_set_filter(&ops, buf, 10, 1), 0);	/* "fe_add_alt" */
	EXPECT_TRACED("fe_add_alt");
	UKT_EQ(ftrace_set_filter(&ops, buf, 3, 1), -EINVAL);	/* "fe_" */
	EXPECT_TRACED("fe_add_alt");
	UKT_EQ(ftrace_set_filter(&ops, buf, (int)sizeof(buf) - 1, 1), 0);
	EXPECT_TRACED("fe_add_alt fe_mul");
	/* a NUL before len ends the string */
	unsigned char nul[] = "pf_mul\0garbage";
	UKT_EQ(ftrace_set_filter(&ops, nul, (int)sizeof(nul), 1), 0);
	EXPECT_TRACED("pf_mul");
}

UKT_CASE(bad_arguments_are_einval)
{
	struct ftrace_ops ops = { .func = count_cb };
	unsigned char buf[] = "fe_add";
	UKT_EQ(ftrace_set_filter(NULL, buf, 6, 1), -EINVAL);
	UKT_EQ(ftrace_set_notrace(NULL, buf, 6, 1), -EINVAL);
	UKT_EQ(ftrace_set_filter_ip(NULL, (unsigned long)fe_add, 0, 1), -EINVAL);
	UKT_EQ(ftrace_set_filter(&ops, buf, -1, 1), -EINVAL);
	UKT_EQ(ftrace_set_notrace(&ops, buf, -6, 1), -EINVAL);
	UKT_EQ(ftrace_available_functions(NULL), -EINVAL);
	UKT_EQ(ftrace_enabled_functions(NULL), -EINVAL);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("*");	/* none of it left a filter */
}

/* ---- ftrace_set_filter_ip ------------------------------------------------------------ */

#define BY_IP(p)							\
	struct ftrace_ops ops = { .func = count_cb };			\
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)FT_CAT(p, mul), 0, 1), 0); \
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	EXPECT_TRACED(S(p, mul));					\
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)FT_CAT(p, sum8), 0, 0), 0); \
	EXPECT_TRACED(S(p, mul) " " S(p, sum8));			\
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)FT_CAT(p, mul), 1, 0), 0); \
	EXPECT_TRACED(S(p, sum8));					\
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)FT_CAT(p, add), 0, 1), 0); \
	EXPECT_TRACED(S(p, add));
BOTH(set_filter_ip_adds_removes_and_resets, BY_IP)

#define IP_NOT_SITE(p)							\
	struct ftrace_ops ops = { .func = count_cb };			\
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)FT_CAT(p, twice), 0, 1), 0); \
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	for (int k = 1; k < 5; k++)	/* inside the site */		\
		UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)FT_CAT(p, add) + k, 0, 0), -ENOENT); \
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)FT_CAT(p, add) + 5, 0, 0), -ENOENT); \
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)FT_CAT(p, add) - 1, 0, 1), -ENOENT); \
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)&hcnt, 0, 1), -ENOENT); \
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)strlen, 0, 1), -ENOENT); \
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)FT_CAT(p, add) + 1, 1, 0), -ENOENT); \
	EXPECT_TRACED(S(p, twice));
BOTH(set_filter_ip_not_a_patch_site_is_enoent, IP_NOT_SITE)

UKT_CASE(set_filter_ip_remove_of_absent_is_enoent)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)fe_add, 1, 0), -ENOENT);	/* empty */
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)fe_add, 0, 0), 0);
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)pf_add, 1, 0), -ENOENT);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("fe_add");
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)fe_mul, 1, 0), -ENOENT);
	/* remove with reset: the reset empties first, so it is absent */
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)fe_add, 1, 1), -ENOENT);
	EXPECT_TRACED("fe_add");
}

UKT_CASE(set_filter_ip_twice_is_one_entry)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)fe_add, 0, 1), 0);
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)fe_add, 0, 0), 0);
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)fe_mul, 0, 0), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("fe_add fe_mul");	/* called once each, not twice */
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)fe_add, 1, 0), 0);
	EXPECT_TRACED("fe_mul");
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)fe_add, 1, 0), -ENOENT);
	EXPECT_TRACED("fe_mul");
}

/* the kernel's rule: an empty filter is no filter */
UKT_CASE(set_filter_ip_removing_the_last_one_traces_everything)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)pf_twice, 0, 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("pf_twice");
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)pf_twice, 1, 0), 0);
	EXPECT_TRACED("*");
}

UKT_CASE(set_filter_ip_and_globs_combine)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "fe_other_*", 1), 0);
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)pf_fma3, 0, 0), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("fe_other_one fe_other_two pf_fma3");
	UKT_EQ(set_f(&ops, "fe_mul", 0), 0);	/* keeps the ip */
	EXPECT_TRACED("fe_other_one fe_other_two pf_fma3 fe_mul");
	UKT_EQ(set_f(&ops, "fe_twice", 1), 0);	/* drops the ip too */
	EXPECT_TRACED("fe_twice");
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)pf_fma3, 0, 0), 0);
	EXPECT_TRACED("fe_twice pf_fma3");
	UKT_EQ(ftrace_set_filter_ip(&ops, (unsigned long)pf_mul, 0, 1), 0);	/* drops the glob */
	EXPECT_TRACED("pf_mul");
	/* notrace wins over an ip too */
	UKT_EQ(set_n(&ops, "pf_mul", 1), 0);
	EXPECT_TRACED("");
}

/* ---- changes while registered ------------------------------------------------------- */

#define CHANGE_WHILE_REGISTERED(p)					\
	struct ftrace_ops ops = { .func = count_cb };			\
	UKT_EQ(set_f(&ops, S(p, add), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	EXPECT_TRACED(S(p, add));					\
	UKT_EQ(set_f(&ops, S(p, mul), 1), 0);				\
	EXPECT_TRACED(S(p, mul));					\
	UKT_EQ(set_f(&ops, S(p, other_*), 0), 0);			\
	EXPECT_TRACED(S(p, mul) " " S(p, other_one) " " S(p, other_two)); \
	UKT_EQ(set_n(&ops, S(p, other_one), 1), 0);			\
	EXPECT_TRACED(S(p, mul) " " S(p, other_two));			\
	UKT_EQ(set_f(&ops, NULL, 1), 0);				\
	UKT_EQ(set_n(&ops, "*", 1), 0);					\
	EXPECT_TRACED("");						\
	UKT_EQ(set_n(&ops, NULL, 1), 0);				\
	EXPECT_TRACED("*");						\
	UKT_EQ(set_f(&ops, S(p, depth), 1), 0);				\
	EXPECT_TRACED(S(p, depth));					\
	UKT_EQ(unregister_ftrace_function(&ops), 0);			\
	EXPECT_TRACED("");
BOTH(filter_changed_while_registered, CHANGE_WHILE_REGISTERED)

UKT_CASE(filters_outlive_a_registration)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "fe_sum6 pf_sum6", 1), 0);
	UKT_EQ(set_n(&ops, "pf_*", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("fe_sum6");
	UKT_EQ(unregister_ftrace_function(&ops), 0);
	EXPECT_TRACED("");
	UKT_EQ(set_f(&ops, "fe_sum8", 0), 0);	/* changed while unregistered */
	EXPECT_TRACED("");
	UKT_EQ(register_ftrace_function(&ops), 0);
	EXPECT_TRACED("fe_sum6 fe_sum8");
}

UKT_CASE(two_ops_filters_are_independent)
{
	struct ftrace_ops a = { .func = count_cb }, b = { .func = count_cb };
	UKT_EQ(set_f(&a, "fe_add fe_mul", 1), 0);
	UKT_EQ(set_f(&b, "fe_mul pf_mul", 1), 0);
	UKT_EQ(set_n(&b, "pf_mul", 0), 0);
	UKT_EQ(register_ftrace_function(&a), 0);
	UKT_EQ(register_ftrace_function(&b), 0);
	hits_reset();
	call_everything();
	UKT_EQ(hits_of(fe_add), 2);
	UKT_EQ(hits_of(fe_mul), 4);	/* both ops, called twice */
	UKT_EQ(hits_of(pf_mul), 0);
	UKT_EQ(unregister_ftrace_function(&a), 0);
	EXPECT_TRACED("fe_mul");
	UKT_EQ(unregister_ftrace_function(&b), 0);
	EXPECT_TRACED("");
}

/*
 * "A reset plus a new filter in one call switches atomically: at no time
 * are all functions traced."  Another thread keeps calling a function
 * that neither filter selects while the filter switches back and forth.
 */
static atomic_long sw_other, sw_sel;
static atomic_int sw_stop;

static void switch_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		      struct pt_regs *regs)
{
	(void)parent_ip;
	(void)op;
	(void)regs;
	if (ip == (unsigned long)fe_other_one || ip == (unsigned long)pf_other_one)
		atomic_fetch_add(&sw_other, 1);
	else
		atomic_fetch_add(&sw_sel, 1);
}

static void *switch_caller(void *arg)
{
	(void)arg;
	long bad = 0;
	while (!atomic_load(&sw_stop)) {
		bad += fe_other_one(1) != 101;
		bad += pf_other_one(2) != 102;
		bad += fe_add(1, 2) != 3;
		bad += pf_mul(3, 4) != 12;
	}
	return (void *)bad;
}

UKT_CASE_T(filter_switch_with_reset_never_traces_everything, 20)
{
	struct ftrace_ops ops = { .func = switch_cb };
	UKT_EQ(set_f(&ops, "fe_add", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	pthread_t t;
	UKT_EQ(pthread_create(&t, NULL, switch_caller, NULL), 0);
	for (int i = 0; i < 300; i++) {
		UKT_EQ(set_f(&ops, i & 1 ? "fe_add" : "pf_mul", 1), 0);
		if (i % 50 == 0)
			usleep(1000);
	}
	atomic_store(&sw_stop, 1);
	void *bad;
	UKT_EQ(pthread_join(t, &bad), 0);
	UKT_EQ((long)bad, 0);
	UKT_EQ(atomic_load(&sw_other), 0);
	UKT_ASSERT(atomic_load(&sw_sel) > 0);
	UKT_EQ(unregister_ftrace_function(&ops), 0);
}

/* ---- the listings ------------------------------------------------------------------- */

static char *capture(int (*list)(FILE *), int *ret)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	UKT_ASSERT(f);
	*ret = list(f);
	UKT_EQ(fclose(f), 0);
	return buf;
}

static int count_lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* line (without its '\n') is a whole line of buf, exactly once */
#define EXPECT_LINE(buf, ...) do {					\
	char l_[256];							\
	snprintf(l_, sizeof(l_), __VA_ARGS__);				\
	int n_ = 0;							\
	size_t k_ = strlen(l_);						\
	for (const char *s_ = (buf); *s_; s_ = strchr(s_, '\n') + 1) {	\
		if (!strncmp(s_, l_, k_) && s_[k_] == '\n')		\
			n_++;						\
		if (!strchr(s_, '\n'))					\
			break;						\
	}								\
	if (n_ != 1)							\
		UKT_FAIL("line \"%s\" is there %d times in:\n%s", l_, n_, (buf)); \
} while (0)

UKT_CASE(available_functions_lists_every_patch_site)
{
	int n;
	char *buf = capture(ftrace_available_functions, &n);
	UKT_EQ(n, NFNS);	/* nothing else in this process has sites */
	UKT_EQ(count_lines(buf), NFNS);
	for (int i = 0; i < NFNS; i++)
		EXPECT_LINE(buf, "%016lx  %s", (unsigned long)fns[i].addr, fns[i].name);
	free(buf);
	/* tracing changes nothing there */
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(register_ftrace_function(&ops), 0);
	char *again = capture(ftrace_available_functions, &n);
	UKT_EQ(n, NFNS);
	for (int i = 0; i < NFNS; i++)
		EXPECT_LINE(again, "%016lx  %s", (unsigned long)fns[i].addr, fns[i].name);
	free(again);
}

UKT_CASE(enabled_functions_shows_what_is_traced)
{
	int n;
	char *buf = capture(ftrace_enabled_functions, &n);
	UKT_EQ(n, 0);
	UKT_STREQ(buf, "");
	free(buf);

	struct ftrace_ops a = { .func = count_cb };
	UKT_EQ(set_f(&a, "fe_add pf_mul", 1), 0);
	UKT_EQ(register_ftrace_function(&a), 0);
	buf = capture(ftrace_enabled_functions, &n);
	UKT_EQ(n, 2);
	UKT_EQ(count_lines(buf), 2);
	EXPECT_LINE(buf, "%016lx  fe_add (1)", (unsigned long)fe_add);
	EXPECT_LINE(buf, "%016lx  pf_mul (1)", (unsigned long)pf_mul);
	free(buf);

	struct ftrace_ops b = { .func = count_cb, .flags = FTRACE_OPS_FL_SAVE_REGS };
	UKT_EQ(set_f(&b, "fe_add fe_twice", 1), 0);
	UKT_EQ(register_ftrace_function(&b), 0);
	struct ftrace_ops c = { .func = count_cb,
				.flags = FTRACE_OPS_FL_SAVE_REGS | FTRACE_OPS_FL_IPMODIFY };
	UKT_EQ(set_f(&c, "pf_mul", 1), 0);
	UKT_EQ(register_ftrace_function(&c), 0);
	buf = capture(ftrace_enabled_functions, &n);
	UKT_EQ(n, 3);
	UKT_EQ(count_lines(buf), 3);
	EXPECT_LINE(buf, "%016lx  fe_add (2) R", (unsigned long)fe_add);
	EXPECT_LINE(buf, "%016lx  fe_twice (1) R", (unsigned long)fe_twice);
	EXPECT_LINE(buf, "%016lx  pf_mul (2) R I", (unsigned long)pf_mul);
	free(buf);

	/* notrace takes a function out of the listing */
	UKT_EQ(set_n(&b, "fe_twice", 1), 0);
	buf = capture(ftrace_enabled_functions, &n);
	UKT_EQ(n, 2);
	EXPECT_LINE(buf, "%016lx  fe_add (2) R", (unsigned long)fe_add);
	EXPECT_LINE(buf, "%016lx  pf_mul (2) R I", (unsigned long)pf_mul);
	free(buf);

	UKT_EQ(unregister_ftrace_function(&a), 0);
	UKT_EQ(unregister_ftrace_function(&c), 0);
	buf = capture(ftrace_enabled_functions, &n);
	UKT_EQ(n, 1);
	char want[64];
	snprintf(want, sizeof(want), "%016lx  fe_add (1) R\n", (unsigned long)fe_add);
	UKT_STREQ(buf, want);
	free(buf);
	UKT_EQ(unregister_ftrace_function(&b), 0);
	buf = capture(ftrace_enabled_functions, &n);
	UKT_EQ(n, 0);
	UKT_STREQ(buf, "");
	free(buf);
}

UKT_CASE(enabled_functions_with_every_function_traced)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(register_ftrace_function(&ops), 0);
	int n;
	char *buf = capture(ftrace_enabled_functions, &n);
	UKT_EQ(n, NFNS);
	UKT_EQ(count_lines(buf), NFNS);
	for (int i = 0; i < NFNS; i++)
		EXPECT_LINE(buf, "%016lx  %s (1)", (unsigned long)fns[i].addr, fns[i].name);
	free(buf);
}
