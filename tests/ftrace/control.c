/* SPDX-License-Identifier: MIT */
/*
 * ftrace control: registration and its errors, the ENABLED flag, callback
 * order and arguments, many ops, threads, unregister's guarantee,
 * PERMANENT and ftrace_set_enabled, recursion (FL_RECURSION and
 * ftrace_test_recursion_trylock/unlock, signal handlers as another
 * context), objects loaded and unloaded with dlopen/dlclose, and a fork
 * child that shares the hooks' memory with its parent.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "ukt.h"
#include "fttargets/targets.h"

#define BOTH(name, body)						\
	UKT_CASE(name##_fentry) { body(fe_) }				\
	UKT_CASE(name##_patchable) { body(pf_) }
#define S(p, n) #p #n
#define UL(f) ((unsigned long)(f))
/* patch sites of this executable (fttargets, both ways; filters.c checks
 * them one by one): the listings with a library loaded are this plus 3 */
static int nmain(void)
{
	static int n;
	if (!n) {
		FILE *f = fopen("/dev/null", "w");
		UKT_ASSERT(f);
		n = ftrace_available_functions(f);
		fclose(f);
		UKT_ASSERT(n >= 26);
	}
	return n;
}
#define NMAIN nmain()

static int set_f(struct ftrace_ops *ops, const char *s, int reset)
{
	return ftrace_set_filter(ops, (unsigned char *)s, (int)strlen(s), reset);
}

static atomic_long hits;
static void count_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		     struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op; (void)regs;
	atomic_fetch_add(&hits, 1);
}

/* ---- registration ------------------------------------------------------------------ */

UKT_CASE(register_null_is_einval)
{
	struct ftrace_ops nofunc = { 0 };
	UKT_EQ(register_ftrace_function(NULL), -EINVAL);
	UKT_EQ(register_ftrace_function(&nofunc), -EINVAL);
	UKT_EQ(nofunc.flags, 0);
	UKT_EQ(unregister_ftrace_function(NULL), -EINVAL);
	UKT_EQ(unregister_ftrace_function(&nofunc), -EINVAL);
}

UKT_CASE(register_twice_is_ebusy_and_calls_once)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "fe_add", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	UKT_EQ(register_ftrace_function(&ops), -EBUSY);
	UKT_EQ(ops.flags, FTRACE_OPS_FL_ENABLED);
	UKT_EQ(fe_add(1, 2), 3);
	UKT_EQ(hits, 1);
	UKT_EQ(unregister_ftrace_function(&ops), 0);	/* one unregister is enough */
	UKT_EQ(fe_add(1, 2), 3);
	UKT_EQ(hits, 1);
	UKT_EQ(unregister_ftrace_function(&ops), -EINVAL);
}

UKT_CASE(unregister_of_unregistered_is_einval)
{
	struct ftrace_ops never = { .func = count_cb };
	UKT_EQ(unregister_ftrace_function(&never), -EINVAL);
	struct ftrace_ops filtered = { .func = count_cb };	/* has engine state, never registered */
	UKT_EQ(set_f(&filtered, "fe_add", 1), 0);
	UKT_EQ(unregister_ftrace_function(&filtered), -EINVAL);
	UKT_EQ(fe_add(1, 2), 3);
	UKT_EQ(hits, 0);
}

UKT_CASE(enabled_flag_follows_registration)
{
	struct ftrace_ops ops = { .func = count_cb, .flags = FTRACE_OPS_FL_SAVE_REGS };
	UKT_EQ(set_f(&ops, "pf_add", 1), 0);
	UKT_EQ(ops.flags, FTRACE_OPS_FL_SAVE_REGS);
	UKT_EQ(register_ftrace_function(&ops), 0);
	UKT_EQ(ops.flags, FTRACE_OPS_FL_SAVE_REGS | FTRACE_OPS_FL_ENABLED);
	UKT_EQ(unregister_ftrace_function(&ops), 0);
	UKT_EQ(ops.flags, FTRACE_OPS_FL_SAVE_REGS);
	UKT_EQ(register_ftrace_function(&ops), 0);
	UKT_EQ(ops.flags, FTRACE_OPS_FL_SAVE_REGS | FTRACE_OPS_FL_ENABLED);
	UKT_EQ(pf_add(1, 2), 3);
	UKT_EQ(hits, 1);
}

#define REREGISTER(p)							\
	struct ftrace_ops ops = { .func = count_cb };			\
	UKT_EQ(set_f(&ops, S(p, mul), 1), 0);				\
	for (int round = 0; round < 5; round++) {			\
		UKT_EQ(register_ftrace_function(&ops), 0);		\
		for (int i = 0; i < 10; i++)				\
			UKT_EQ(FT_CAT(p, mul)(i, 3), 3 * i);		\
		UKT_EQ(hits, 10 * (round + 1));				\
		UKT_EQ(unregister_ftrace_function(&ops), 0);		\
		UKT_EQ(FT_CAT(p, mul)(2, 3), 6);			\
		UKT_EQ(hits, 10 * (round + 1));				\
	}
BOTH(register_unregister_again_and_again, REREGISTER)

/* ---- what callbacks get ------------------------------------------------------------- */

static char order[64];
static void order_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		     struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)regs;
	strcat(order, (const char *)op->private);
}

#define ORDER(p)							\
	struct ftrace_ops a = { .func = order_cb, .private = "A" };	\
	struct ftrace_ops b = { .func = order_cb, .private = "B",	\
				.flags = FTRACE_OPS_FL_SAVE_REGS };	\
	struct ftrace_ops c = { .func = order_cb, .private = "C",	\
				.flags = FTRACE_OPS_FL_RECURSION };	\
	UKT_EQ(set_f(&a, S(p, add), 1), 0);				\
	UKT_EQ(set_f(&c, S(p, a*), 1), 0);				\
	UKT_EQ(register_ftrace_function(&a), 0);			\
	UKT_EQ(register_ftrace_function(&b), 0);	/* every function */ \
	UKT_EQ(register_ftrace_function(&c), 0);			\
	UKT_EQ(FT_CAT(p, add)(1, 1), 2);				\
	UKT_STREQ(order, "ABC");					\
	order[0] = 0;							\
	UKT_EQ(unregister_ftrace_function(&b), 0);			\
	UKT_EQ(FT_CAT(p, add)(1, 1), 2);				\
	UKT_STREQ(order, "AC");						\
	order[0] = 0;							\
	UKT_EQ(register_ftrace_function(&b), 0);			\
	UKT_EQ(FT_CAT(p, add)(1, 1), 2);				\
	UKT_STREQ(order, "ACB");					\
	order[0] = 0;							\
	UKT_EQ(FT_CAT(p, mul)(1, 1), 1);				\
	UKT_STREQ(order, "B");
BOTH(callbacks_run_in_registration_order, ORDER)

static unsigned long cb_ip[8], cb_parent[8];
static struct ftrace_ops *cb_op[8];
static int ncb;
static void args_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		    struct pt_regs *regs)
{
	(void)regs;
	if (ncb < 8) {
		cb_ip[ncb] = ip;
		cb_parent[ncb] = parent_ip;
		cb_op[ncb] = op;
	}
	ncb++;
}

/* the address a `call rel32` just before ret went to, or 0 */
static unsigned long call_target(unsigned long ret)
{
	const uint8_t *c = (const uint8_t *)ret - 5;
	if (c[0] != 0xe8)
		return 0;
	int32_t rel;
	memcpy(&rel, c + 1, 4);
	return ret + (long)rel;
}

/*
 * chain(x) = mul(add(x, 1), 2): add is called (parent: in chain), mul is
 * a tail call (a jmp: its parent is chain's own parent, in this case).
 */
#define IP_AND_PARENT(p)						\
	static int cookie;						\
	struct ftrace_ops ops = { .func = args_cb, .private = &cookie }; \
	UKT_EQ(set_f(&ops, S(p, chain) " " S(p, add) " " S(p, mul), 1), 0); \
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	UKT_EQ(FT_CAT(p, chain)(4), 10);				\
	UKT_EQ(ncb, 3);							\
	UKT_EQ(cb_ip[0], UL(FT_CAT(p, chain)));				\
	UKT_EQ(cb_ip[1], UL(FT_CAT(p, add)));				\
	UKT_EQ(cb_ip[2], UL(FT_CAT(p, mul)));				\
	for (int i = 0; i < 3; i++) {					\
		UKT_ASSERT(cb_op[i] == &ops);				\
		UKT_ASSERT(cb_op[i]->private == &cookie);		\
	}								\
	UKT_EQ(call_target(cb_parent[0]), UL(FT_CAT(p, chain)));	\
	UKT_EQ(call_target(cb_parent[1]), UL(FT_CAT(p, add)));		\
	UKT_ASSERT(cb_parent[1] > UL(FT_CAT(p, chain)) &&		\
		   cb_parent[1] < UL(FT_CAT(p, chain)) + 32);		\
	UKT_EQ(cb_parent[2], cb_parent[0]);
BOTH(callback_gets_ip_parent_ip_and_op, IP_AND_PARENT)

/*
 * Up to three lean ops on a function (no flags) run through code made for
 * the site: each callback once, in order, with its own op and the same ip
 * and parent_ip; an unregistered one skipped; errno (which the callback
 * sets) and the function's result kept.  Four go through entry.S's walk.
 */
static void list_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		    struct pt_regs *regs)
{
	args_cb(ip, parent_ip, op, regs);
	strcat(order, (const char *)op->private);
	errno = 55;
}

#define LEAN_LIST(p)							\
	struct ftrace_ops o[4] = { { .func = list_cb, .private = "A" },	\
				   { .func = list_cb, .private = "B" },	\
				   { .func = list_cb, .private = "C" },	\
				   { .func = list_cb, .private = "D" } }; \
	static const char *const want[] = { "A", "AB", "ABC", "ABCD" };	\
	for (int k = 0; k < 4; k++) {					\
		UKT_EQ(set_f(&o[k], S(p, add), 1), 0);			\
		UKT_EQ(register_ftrace_function(&o[k]), 0);		\
		for (int round = 0; round < 100; round++) {		\
			order[0] = 0;					\
			ncb = 0;					\
			errno = 1234;					\
			UKT_EQ(FT_CAT(p, add)(round, 1), round + 1);	\
			UKT_EQ(errno, 1234);				\
			UKT_STREQ(order, want[k]);			\
			UKT_EQ(ncb, k + 1);				\
			for (int i = 0; i <= k; i++) {			\
				UKT_EQ(cb_ip[i], UL(FT_CAT(p, add)));	\
				UKT_EQ(cb_parent[i], cb_parent[0]);	\
				UKT_ASSERT(cb_op[i] == &o[i]);		\
			}						\
		}							\
	}								\
	UKT_EQ(unregister_ftrace_function(&o[1]), 0);			\
	UKT_EQ(unregister_ftrace_function(&o[3]), 0);			\
	order[0] = 0;							\
	UKT_EQ(FT_CAT(p, add)(2, 2), 4);				\
	UKT_STREQ(order, "AC");						\
	UKT_EQ(unregister_ftrace_function(&o[0]), 0);			\
	UKT_EQ(unregister_ftrace_function(&o[2]), 0);			\
	order[0] = 0;							\
	UKT_EQ(FT_CAT(p, add)(2, 2), 4);				\
	UKT_STREQ(order, "");
BOTH(lean_lists_of_one_to_four_ops_in_order_with_errno_kept, LEAN_LIST)

UKT_CASE(rcu_flag_is_accepted_and_called)
{
	struct ftrace_ops ops = { .func = count_cb, .flags = FTRACE_OPS_FL_RCU };
	UKT_EQ(set_f(&ops, "fe_add", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	UKT_EQ(fe_add(1, 2), 3);
	UKT_EQ(hits, 1);
}

/* ---- many ops ------------------------------------------------------------------------ */

static long many_hits[100];
static void many_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		    struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)regs;
	many_hits[(long)op->private]++;
}

#define MANY 70
#define MANY_OPS(p)							\
	static struct ftrace_ops ops[MANY];				\
	for (long i = 0; i < MANY; i++) {				\
		ops[i].func = many_cb;					\
		ops[i].private = (void *)i;				\
		UKT_EQ(set_f(&ops[i], S(p, add), 1), 0);		\
		UKT_EQ(register_ftrace_function(&ops[i]), 0);		\
	}								\
	UKT_EQ(FT_CAT(p, add)(1, 2), 3);				\
	int missing = 0;						\
	for (long i = 0; i < MANY; i++)					\
		if (many_hits[i] != 1) {				\
			fprintf(stderr, "  ops %ld: %ld callbacks\n", i, many_hits[i]); \
			missing++;					\
		}							\
	UKT_EQ(missing, 0);
BOTH(seventy_ops_on_one_function_are_all_called, MANY_OPS)

UKT_CASE(trace_all_ops_beside_filtered_ones)
{
	struct ftrace_ops all = { .func = many_cb, .private = (void *)0 };
	struct ftrace_ops one = { .func = many_cb, .private = (void *)1 };
	UKT_EQ(set_f(&one, "pf_twice", 1), 0);
	UKT_EQ(register_ftrace_function(&all), 0);
	UKT_EQ(register_ftrace_function(&one), 0);
	UKT_EQ(fe_twice(2), 4);
	UKT_EQ(pf_twice(2), 4);
	UKT_EQ(pf_chain(2), 6);	/* chain, add, mul */
	UKT_EQ(many_hits[0], 5);
	UKT_EQ(many_hits[1], 1);
	UKT_EQ(unregister_ftrace_function(&all), 0);
	UKT_EQ(fe_twice(2), 4);
	UKT_EQ(pf_twice(2), 4);
	UKT_EQ(many_hits[0], 5);
	UKT_EQ(many_hits[1], 2);
}

/* ---- threads --------------------------------------------------------------------------- */

struct caller_arg { int set; int n; long bad; int errno_seen; };

static void *caller(void *arg)
{
	struct caller_arg *a = arg;
	/* the thread's very first traced call: errno must come through it */
	errno = 4321;
	a->errno_seen = a->set ? pf_errno_keep() : fe_errno_keep();
	if (errno != 4321)
		a->bad++;
	for (int i = 0; i < a->n; i++)
		a->bad += (a->set ? pf_add(i, 1) : fe_add(i, 1)) != i + 1;
	return NULL;
}

static void errno_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		     struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op; (void)regs;
	atomic_fetch_add(&hits, 1);
	errno = 77;
}

UKT_CASE(callbacks_from_new_threads_counted_exactly)
{
	for (int regs = 0; regs < 2; regs++) {
		struct ftrace_ops ops = { .func = errno_cb,
					  .flags = regs ? FTRACE_OPS_FL_SAVE_REGS : 0 };
		UKT_EQ(set_f(&ops, "fe_add pf_add fe_errno_keep pf_errno_keep", 1), 0);
		UKT_EQ(register_ftrace_function(&ops), 0);
		hits = 0;
		pthread_t t[4];
		struct caller_arg a[4];
		for (int i = 0; i < 4; i++) {
			a[i] = (struct caller_arg){ .set = i & 1, .n = 1000 };
			UKT_EQ(pthread_create(&t[i], NULL, caller, &a[i]), 0);
		}
		for (int i = 0; i < 4; i++) {
			UKT_EQ(pthread_join(t[i], NULL), 0);
			UKT_EQ(a[i].bad, 0);
			UKT_EQ(a[i].errno_seen, 4321);
		}
		UKT_EQ(hits, 4 * 1001);
		UKT_EQ(unregister_ftrace_function(&ops), 0);
	}
}

static atomic_int in_cb, cb_done;
static void slow_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		    struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op; (void)regs;
	atomic_store(&in_cb, 1);
	usleep(50000);
	atomic_fetch_add(&cb_done, 1);
	atomic_store(&in_cb, 0);
}

static atomic_int stop;
static void *loop_other_one(void *arg)
{
	long bad = 0;
	(void)arg;
	while (!atomic_load(&stop))
		bad += fe_other_one(5) != 105;
	return (void *)bad;
}

UKT_CASE_T(unregister_returns_after_running_callbacks_finish, 10)
{
	struct ftrace_ops ops = { .func = slow_cb };
	UKT_EQ(set_f(&ops, "fe_other_one", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	pthread_t t;
	UKT_EQ(pthread_create(&t, NULL, loop_other_one, NULL), 0);
	while (!atomic_load(&in_cb))
		usleep(100);
	UKT_EQ(unregister_ftrace_function(&ops), 0);
	UKT_EQ(atomic_load(&in_cb), 0);
	int done = atomic_load(&cb_done);
	UKT_ASSERT(done >= 1);
	usleep(120000);		/* no callback starts after unregister returned */
	UKT_EQ(atomic_load(&cb_done), done);
	UKT_EQ(atomic_load(&in_cb), 0);
	atomic_store(&stop, 1);
	void *bad;
	UKT_EQ(pthread_join(t, &bad), 0);
	UKT_EQ((long)bad, 0);
}

static void *loop_both(void *arg)
{
	long bad = 0;
	(void)arg;
	while (!atomic_load(&stop)) {
		bad += fe_add(3, 4) != 7;
		bad += pf_mul(3, 4) != 12;
		bad += fe_sum6(1, 1, 1, 1, 1, 1) != 21;
	}
	return (void *)bad;
}

UKT_CASE_T(register_and_unregister_while_another_thread_calls, 20)
{
	pthread_t t;
	UKT_EQ(pthread_create(&t, NULL, loop_both, NULL), 0);
	for (int i = 0; i < 40; i++) {
		struct ftrace_ops a = { .func = count_cb };
		struct ftrace_ops r = { .func = count_cb, .flags = FTRACE_OPS_FL_SAVE_REGS };
		UKT_EQ(set_f(&a, i & 1 ? "fe_add pf_mul" : "fe_sum6", 1), 0);
		UKT_EQ(register_ftrace_function(&a), 0);
		UKT_EQ(register_ftrace_function(&r), 0);	/* every function */
		UKT_EQ(unregister_ftrace_function(&a), 0);
		UKT_EQ(unregister_ftrace_function(&r), 0);
	}
	atomic_store(&stop, 1);
	void *bad;
	UKT_EQ(pthread_join(t, &bad), 0);
	UKT_EQ((long)bad, 0);
	long h = hits;
	UKT_EQ(fe_add(1, 1), 2);
	UKT_EQ(hits, h);
}

/* A callback that keeps its thread inside a stub for 2 ms a call, the
 * thread calling it back to back: the thread is at depth 0 for a few
 * nanoseconds every 2 ms.  Each unregister waits for it (a grace period)
 * and must see that moment, not hope to sample it: sampled every 100 us,
 * one wait took seconds on average and the case its timeout. */
static atomic_long busy_calls;
static void busy_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		    struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op; (void)regs;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	do
		clock_gettime(CLOCK_MONOTONIC, &b);
	while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 2000000);
	atomic_fetch_add(&busy_calls, 1);
}

static void *loop_add(void *arg)
{
	long bad = 0;
	(void)arg;
	while (!atomic_load(&stop))
		bad += fe_add(3, 4) != 7;
	return (void *)bad;
}

UKT_CASE_T(unregister_returns_while_another_thread_is_nearly_always_inside, 20)
{
	struct ftrace_ops busy = { .func = busy_cb };
	UKT_EQ(set_f(&busy, "fe_add", 1), 0);
	UKT_EQ(register_ftrace_function(&busy), 0);
	pthread_t t;
	UKT_EQ(pthread_create(&t, NULL, loop_add, NULL), 0);
	while (atomic_load(&busy_calls) < 2)
		usleep(1000);
	for (int i = 0; i < 20; i++) {
		struct ftrace_ops a = { .func = count_cb };
		UKT_EQ(set_f(&a, "pf_mul", 1), 0);
		UKT_EQ(register_ftrace_function(&a), 0);
		long h = hits;
		UKT_EQ(pf_mul(3, 4), 12);
		UKT_EQ(hits, h + 1);
		UKT_EQ(unregister_ftrace_function(&a), 0);
		UKT_EQ(pf_mul(3, 4), 12);
		UKT_EQ(hits, h + 1);
	}
	atomic_store(&stop, 1);
	void *bad;
	UKT_EQ(pthread_join(t, &bad), 0);
	UKT_EQ((long)bad, 0);
	UKT_EQ(unregister_ftrace_function(&busy), 0);
	long n = busy_calls;
	UKT_EQ(fe_add(1, 1), 2);
	UKT_EQ(busy_calls, n);
}

/* ---- PERMANENT and ftrace_set_enabled ------------------------------------------------- */

UKT_CASE(set_enabled_and_get_enabled)
{
	UKT_EQ(ftrace_get_enabled(), 1);
	UKT_EQ(ftrace_set_enabled(0), 0);
	UKT_EQ(ftrace_get_enabled(), 0);
	UKT_EQ(ftrace_set_enabled(0), 0);
	UKT_EQ(ftrace_get_enabled(), 0);
	UKT_EQ(ftrace_set_enabled(5), 0);
	UKT_EQ(ftrace_get_enabled(), 1);
	UKT_EQ(ftrace_set_enabled(1), 0);
	UKT_EQ(ftrace_get_enabled(), 1);
}

static long perm_hits, norm_hits;
static void perm_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		    struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op; (void)regs;
	perm_hits++;
}
static void norm_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		    struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op; (void)regs;
	norm_hits++;
}

#define PERMANENT(p)							\
	struct ftrace_ops perm = { .func = perm_cb, .flags = FTRACE_OPS_FL_PERMANENT }; \
	struct ftrace_ops norm = { .func = norm_cb };			\
	UKT_EQ(set_f(&perm, S(p, add), 1), 0);				\
	UKT_EQ(set_f(&norm, S(p, add) " " S(p, mul), 1), 0);		\
	UKT_EQ(register_ftrace_function(&perm), 0);			\
	UKT_EQ(register_ftrace_function(&norm), 0);			\
	UKT_EQ(FT_CAT(p, add)(1, 2), 3);				\
	UKT_EQ(perm_hits, 1);						\
	UKT_EQ(norm_hits, 1);						\
	UKT_EQ(ftrace_set_enabled(0), 0);				\
	UKT_EQ(ftrace_get_enabled(), 0);				\
	for (int i = 0; i < 10; i++) {					\
		UKT_EQ(FT_CAT(p, add)(i, 2), i + 2);			\
		UKT_EQ(FT_CAT(p, mul)(i, 2), i * 2);			\
	}								\
	UKT_EQ(perm_hits, 11);						\
	UKT_EQ(norm_hits, 1);						\
	UKT_EQ(ftrace_set_enabled(1), 0);				\
	UKT_EQ(FT_CAT(p, add)(1, 2), 3);				\
	UKT_EQ(FT_CAT(p, mul)(1, 2), 2);				\
	UKT_EQ(perm_hits, 12);						\
	UKT_EQ(norm_hits, 3);
BOTH(disabling_stops_all_but_permanent_ops, PERMANENT)

UKT_CASE(permanent_ops_cannot_register_while_disabled)
{
	struct ftrace_ops perm = { .func = perm_cb, .flags = FTRACE_OPS_FL_PERMANENT };
	struct ftrace_ops norm = { .func = norm_cb };
	UKT_EQ(set_f(&perm, "fe_add", 1), 0);
	UKT_EQ(set_f(&norm, "fe_add", 1), 0);
	UKT_EQ(ftrace_set_enabled(0), 0);
	UKT_EQ(register_ftrace_function(&perm), -EBUSY);
	UKT_EQ(perm.flags, FTRACE_OPS_FL_PERMANENT);	/* not ENABLED */
	UKT_EQ(unregister_ftrace_function(&perm), -EINVAL);
	/* an ordinary ops registers, and waits */
	UKT_EQ(register_ftrace_function(&norm), 0);
	UKT_EQ(fe_add(1, 2), 3);
	UKT_EQ(perm_hits, 0);
	UKT_EQ(norm_hits, 0);
	UKT_EQ(ftrace_set_enabled(1), 0);
	UKT_EQ(fe_add(1, 2), 3);
	UKT_EQ(norm_hits, 1);
	UKT_EQ(register_ftrace_function(&perm), 0);
	UKT_EQ(fe_add(1, 2), 3);
	UKT_EQ(perm_hits, 1);
	UKT_EQ(norm_hits, 2);
}

UKT_CASE(changes_while_disabled_apply_when_enabled)
{
	struct ftrace_ops norm = { .func = norm_cb };
	UKT_EQ(set_f(&norm, "fe_add", 1), 0);
	UKT_EQ(register_ftrace_function(&norm), 0);
	UKT_EQ(ftrace_set_enabled(0), 0);
	UKT_EQ(set_f(&norm, "pf_add", 1), 0);
	UKT_EQ(fe_add(1, 2) + pf_add(1, 2), 6);
	UKT_EQ(norm_hits, 0);
	UKT_EQ(ftrace_set_enabled(1), 0);
	UKT_EQ(fe_add(1, 2) + pf_add(1, 2), 6);
	UKT_EQ(norm_hits, 1);		/* pf_add only */
	UKT_EQ(ftrace_set_enabled(0), 0);
	UKT_EQ(unregister_ftrace_function(&norm), 0);
	UKT_EQ(ftrace_set_enabled(1), 0);
	UKT_EQ(fe_add(1, 2) + pf_add(1, 2), 6);
	UKT_EQ(norm_hits, 1);
}

/* live patching, the reason PERMANENT exists: the redirect survives */
static void patch_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		     struct pt_regs *regs)
{
	(void)parent_ip; (void)op;
	perm_hits++;
	if (ip == UL(fe_add))
		regs->ip = UL(fe_add_alt);
	else
		regs->ip = UL(pf_add_alt);
}

UKT_CASE(permanent_ipmodify_keeps_redirecting_while_disabled)
{
	struct ftrace_ops patch = { .func = patch_cb,
				    .flags = FTRACE_OPS_FL_PERMANENT | FTRACE_OPS_FL_SAVE_REGS |
					     FTRACE_OPS_FL_IPMODIFY };
	UKT_EQ(set_f(&patch, "fe_add pf_add", 1), 0);
	UKT_EQ(register_ftrace_function(&patch), 0);
	UKT_EQ(fe_add(9, 2), 7);
	UKT_EQ(ftrace_set_enabled(0), 0);
	UKT_EQ(fe_add(9, 2), 7);
	UKT_EQ(pf_add(9, 2), 7);
	UKT_EQ(ftrace_set_enabled(1), 0);
	UKT_EQ(pf_add(9, 2), 7);
	UKT_EQ(perm_hits, 4);
	UKT_EQ(unregister_ftrace_function(&patch), 0);
	UKT_EQ(fe_add(9, 2), 11);
}

/* ---- recursion ----------------------------------------------------------------------------- */

static long rec_hits, rec_inner_bad, rec_missed;
static int rec_depth;

/* calls the function it traces (fe_add or pf_add) */
static void reenter_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		       struct pt_regs *regs)
{
	(void)parent_ip; (void)op; (void)regs;
	rec_hits++;
	if (rec_depth++ < 3)	/* a guard of its own, for the unprotected case */
		rec_inner_bad += ((int (*)(int, int))ip)(20, 22) != 42;
	rec_depth--;
}

#define NO_RECURSION_FLAG(p)						\
	struct ftrace_ops ops = { .func = reenter_cb };			\
	UKT_EQ(set_f(&ops, S(p, add), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	UKT_EQ(FT_CAT(p, add)(1, 2), 3);				\
	UKT_EQ(rec_hits, 4);	/* depths 0..2 call again, 3 stops */	\
	UKT_EQ(rec_inner_bad, 0);
BOTH(without_recursion_flag_callback_is_reentered, NO_RECURSION_FLAG)

#define RECURSION_FLAG(p)						\
	struct ftrace_ops ops = { .func = reenter_cb, .flags = FTRACE_OPS_FL_RECURSION }; \
	UKT_EQ(set_f(&ops, S(p, add), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	for (int i = 0; i < 100; i++)					\
		UKT_EQ(FT_CAT(p, add)(i, 2), i + 2);			\
	UKT_EQ(rec_hits, 100);						\
	UKT_EQ(rec_inner_bad, 0);
BOTH(recursion_flag_callback_is_not_reentered, RECURSION_FLAG)

#define RECURSION_FLAG_REGS(p)						\
	struct ftrace_ops ops = { .func = reenter_cb,			\
				  .flags = FTRACE_OPS_FL_RECURSION | FTRACE_OPS_FL_SAVE_REGS }; \
	UKT_EQ(set_f(&ops, S(p, add), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	for (int i = 0; i < 100; i++)					\
		UKT_EQ(FT_CAT(p, add)(i, 2), i + 2);			\
	UKT_EQ(rec_hits, 100);						\
	UKT_EQ(rec_inner_bad, 0);
BOTH(recursion_flag_with_save_regs_is_not_reentered, RECURSION_FLAG_REGS)

/* the protection is about the callback, not about recursive functions */
#define RECURSION_FLAG_NESTED_CALLS(p)					\
	struct ftrace_ops ops = { .func = count_cb, .flags = FTRACE_OPS_FL_RECURSION }; \
	UKT_EQ(set_f(&ops, S(p, depth) " " S(p, chain) " " S(p, add) " " S(p, mul), 1), 0); \
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	UKT_EQ(FT_CAT(p, depth)(9), 9);					\
	UKT_EQ(hits, 10);						\
	UKT_EQ(FT_CAT(p, chain)(1), 4);					\
	UKT_EQ(hits, 13);
BOTH(recursion_flag_still_sees_recursive_functions, RECURSION_FLAG_NESTED_CALLS)

/* a FL_RECURSION callback calling another traced function: suppressed for
 * this ops; an ops without the flag still sees that call */
static long mul_from_a, mul_from_b;
static void call_mul_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
			struct pt_regs *regs)
{
	(void)parent_ip; (void)op; (void)regs;
	if (ip == UL(fe_add))
		rec_inner_bad += fe_mul(6, 7) != 42;
	else
		mul_from_a++;
}
static void count_mul_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
			 struct pt_regs *regs)
{
	(void)parent_ip; (void)op; (void)regs;
	if (ip == UL(fe_mul))
		mul_from_b++;
}

UKT_CASE(recursion_flag_suppresses_other_functions_of_the_callback)
{
	struct ftrace_ops a = { .func = call_mul_cb, .flags = FTRACE_OPS_FL_RECURSION };
	struct ftrace_ops b = { .func = count_mul_cb };
	UKT_EQ(set_f(&a, "fe_add fe_mul", 1), 0);
	UKT_EQ(set_f(&b, "fe_mul", 1), 0);
	UKT_EQ(register_ftrace_function(&a), 0);
	UKT_EQ(register_ftrace_function(&b), 0);
	UKT_EQ(fe_add(1, 2), 3);
	UKT_EQ(rec_inner_bad, 0);
	UKT_EQ(mul_from_a, 0);
	UKT_EQ(mul_from_b, 1);
	UKT_EQ(fe_mul(2, 2), 4);	/* outside a callback: both */
	UKT_EQ(mul_from_a, 1);
	UKT_EQ(mul_from_b, 2);
}

UKT_CASE(trylock_twice_in_one_context_fails)
{
	int b1 = ftrace_test_recursion_trylock(UL(fe_add), 0);
	UKT_ASSERT(b1 >= 0);
	int b2 = ftrace_test_recursion_trylock(UL(fe_add), 0);
	UKT_ASSERT(b2 < 0);
	ftrace_test_recursion_unlock(b1);
	int b3 = ftrace_test_recursion_trylock(UL(fe_add), 0);
	UKT_ASSERT(b3 >= 0);
	ftrace_test_recursion_unlock(b3);
	for (int i = 0; i < 1000; i++) {	/* no leak */
		int b = ftrace_test_recursion_trylock(0, 0);
		UKT_ASSERT(b >= 0);
		ftrace_test_recursion_unlock(b);
	}
}

static __attribute__((noinline)) int trylock_deeper(void)
{
	int b = ftrace_test_recursion_trylock(0, 0);
	__asm__ volatile("" ::: "memory");
	if (b >= 0)
		ftrace_test_recursion_unlock(b);
	return b;
}

UKT_CASE(trylock_from_a_deeper_frame_fails)
{
	int b1 = ftrace_test_recursion_trylock(0, 0);
	UKT_ASSERT(b1 >= 0);
	UKT_ASSERT(trylock_deeper() < 0);
	ftrace_test_recursion_unlock(b1);
	UKT_ASSERT(trylock_deeper() >= 0);
}

static void *trylock_thread(void *arg)
{
	(void)arg;
	int b = ftrace_test_recursion_trylock(0, 0);
	if (b >= 0)
		ftrace_test_recursion_unlock(b);
	return (void *)(long)b;
}

UKT_CASE(trylock_is_per_thread)
{
	int b1 = ftrace_test_recursion_trylock(0, 0);
	UKT_ASSERT(b1 >= 0);
	pthread_t t;
	void *r;
	UKT_EQ(pthread_create(&t, NULL, trylock_thread, NULL), 0);
	UKT_EQ(pthread_join(t, &r), 0);
	UKT_ASSERT((long)r >= 0);
	ftrace_test_recursion_unlock(b1);
}

/* a callback protecting itself by hand */
static void manual_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		      struct pt_regs *regs)
{
	(void)op; (void)regs;
	int bit = ftrace_test_recursion_trylock(ip, parent_ip);
	if (bit < 0) {
		rec_missed++;
		return;
	}
	rec_hits++;
	rec_inner_bad += ((int (*)(int, int))ip)(20, 22) != 42;
	ftrace_test_recursion_unlock(bit);
}

#define MANUAL(p)							\
	struct ftrace_ops ops = { .func = manual_cb };			\
	UKT_EQ(set_f(&ops, S(p, add), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	for (int i = 0; i < 50; i++)					\
		UKT_EQ(FT_CAT(p, add)(i, 1), i + 1);			\
	UKT_EQ(rec_hits, 50);						\
	UKT_EQ(rec_missed, 50);						\
	UKT_EQ(rec_inner_bad, 0);
BOTH(trylock_in_a_callback_stops_recursion, MANUAL)

/*
 * A signal handler is another context (the kernel's irq): a handler that
 * interrupted a holder of the lock takes it, and the holder still holds
 * it afterwards.
 */
static volatile int sig_bit = -100, sig_runs;
static void trylock_handler(int sig)
{
	(void)sig;
	sig_runs++;
	int b = ftrace_test_recursion_trylock(0, 0);
	sig_bit = b;
	if (b >= 0)
		ftrace_test_recursion_unlock(b);
}

static int after_bit = -100, before_bit = -100;
static int (*raise_fn)(void);
static int raise_usr1(void) { return raise(SIGUSR1); }
static int kill_self_usr1(void) { return pthread_kill(pthread_self(), SIGUSR1); }

static void lock_and_signal_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
			       struct pt_regs *regs)
{
	(void)op; (void)regs;
	int bit = ftrace_test_recursion_trylock(ip, parent_ip);
	before_bit = bit;
	if (bit < 0)
		return;
	rec_hits++;
	UKT_EQ(raise_fn(), 0);
	/* still held here */
	after_bit = ftrace_test_recursion_trylock(ip, parent_ip);
	if (after_bit >= 0)
		ftrace_test_recursion_unlock(after_bit);
	ftrace_test_recursion_unlock(bit);
}

static void install_usr1(bool onstack)
{
	struct sigaction sa = { 0 };
	sa.sa_handler = trylock_handler;
	sa.sa_flags = onstack ? SA_ONSTACK : 0;
	sigemptyset(&sa.sa_mask);
	UKT_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
}

/* the handler got the lock, and the callback it interrupted kept its own */
static void expect_lock_kept(void)
{
	UKT_EQ(sig_runs, 1);
	UKT_ASSERT(before_bit >= 0);
	if (sig_bit < 0)
		UKT_FAIL("trylock in the signal handler failed (%d)", sig_bit);
	if (after_bit >= 0)
		UKT_FAIL("the interrupted callback lost its lock (trylock = %d)", after_bit);
}

static void expect_handler_took_lock(void)
{
	expect_lock_kept();
	UKT_EQ(rec_hits, 1);
	/* and all is released */
	int b = ftrace_test_recursion_trylock(0, 0);
	UKT_ASSERT(b >= 0);
	ftrace_test_recursion_unlock(b);
}

#define SIGNAL_CASE(p, how)						\
	install_usr1(false);						\
	raise_fn = how;							\
	struct ftrace_ops ops = { .func = lock_and_signal_cb };		\
	UKT_EQ(set_f(&ops, S(p, add), 1), 0);				\
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	UKT_EQ(FT_CAT(p, add)(1, 2), 3);				\
	expect_handler_took_lock();
#define SIGNAL_RAISE(p) SIGNAL_CASE(p, raise_usr1)
#define SIGNAL_PTHREAD_KILL(p) SIGNAL_CASE(p, kill_self_usr1)
BOTH(trylock_succeeds_in_a_signal_handler_raise, SIGNAL_RAISE)
BOTH(trylock_succeeds_in_a_signal_handler_pthread_kill, SIGNAL_PTHREAD_KILL)

/*
 * The same without any callback: a holder interrupted by a handler.
 * First with nothing of ukprobes used before but the lock itself, then
 * after an ops was registered (the library initialised).
 */
static void plain_holder_interrupted(void)
{
	install_usr1(false);
	int b = ftrace_test_recursion_trylock(0, 0);
	UKT_ASSERT(b >= 0);
	UKT_EQ(raise(SIGUSR1), 0);
	UKT_EQ(sig_runs, 1);
	if (sig_bit < 0)
		UKT_FAIL("trylock in the signal handler failed (%d)", sig_bit);
	UKT_ASSERT(trylock_deeper() < 0);	/* still held */
	ftrace_test_recursion_unlock(b);
	UKT_ASSERT(trylock_deeper() >= 0);
}

UKT_CASE(trylock_in_a_handler_interrupting_a_plain_holder_first_use)
{
	plain_holder_interrupted();
}

UKT_CASE(trylock_in_a_handler_interrupting_a_plain_holder_after_register)
{
	struct ftrace_ops ops = { .func = count_cb };
	UKT_EQ(set_f(&ops, "fe_add", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	plain_holder_interrupted();
}

/* handlers on an alternate signal stack */
static char main_altstack[64 << 10] __attribute__((aligned(16)));

/* ops traces fe_add with lock_and_signal_cb, whose SIGUSR1 handler runs on
 * the thread's alternate signal stack */
static void trace_fe_add_signalling_on_altstack(struct ftrace_ops *ops)
{
	install_usr1(true);
	raise_fn = raise_usr1;
	memset(ops, 0, sizeof(*ops));
	ops->func = lock_and_signal_cb;
	UKT_EQ(set_f(ops, "fe_add", 1), 0);
	UKT_EQ(register_ftrace_function(ops), 0);
}

UKT_CASE(trylock_succeeds_in_a_handler_on_sigaltstack)
{
	stack_t ss = { .ss_sp = main_altstack, .ss_size = sizeof(main_altstack) };
	UKT_EQ(sigaltstack(&ss, NULL), 0);
	struct ftrace_ops ops;
	trace_fe_add_signalling_on_altstack(&ops);
	UKT_EQ(fe_add(1, 2), 3);
	expect_handler_took_lock();
}

/*
 * A thread with its own alternate signal stack, mapped as such stacks
 * usually are (by the thread, with mmap: next to the thread's stacks, as
 * Rust's runtime does for every thread).
 */
static void *alt_at, *stack_at;
static void *thread_with_altstack(void *arg)
{
	(void)arg;
	size_t sz = 64 << 10;
	void *m = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(m != MAP_FAILED);
	alt_at = m;
	stack_at = __builtin_frame_address(0);
	stack_t ss = { .ss_sp = m, .ss_size = sz };
	UKT_EQ(sigaltstack(&ss, NULL), 0);
	UKT_EQ(fe_add(1, 2), 3);
	return NULL;
}

UKT_CASE(trylock_succeeds_in_a_handler_on_a_thread_mmap_sigaltstack)
{
	struct ftrace_ops ops;
	trace_fe_add_signalling_on_altstack(&ops);
	pthread_t t;
	UKT_EQ(pthread_create(&t, NULL, thread_with_altstack, NULL), 0);
	UKT_EQ(pthread_join(t, NULL), 0);
	if (sig_bit < 0 || after_bit >= 0)
		fprintf(stderr, "  thread stack at %p, its sigaltstack at %p (%+ld)\n", stack_at,
			alt_at, (long)((char *)alt_at - (char *)stack_at));
	expect_lock_kept();
}

/* a thread whose 64 KB alternate signal stack is at arg */
static void *thread_altstack_at(void *arg)
{
	stack_t ss = { .ss_sp = arg, .ss_size = 64 << 10 };
	UKT_EQ(sigaltstack(&ss, NULL), 0);
	UKT_EQ(fe_add(1, 2), 3);
	return NULL;
}

/* one mapping: the thread's stack below, its alternate signal stack above */

UKT_CASE(trylock_in_a_handler_on_sigaltstack_above_the_thread_stack)
{
	struct ftrace_ops ops;
	trace_fe_add_signalling_on_altstack(&ops);
	size_t stk = 1 << 20, alt = 64 << 10;
	char *m = mmap(NULL, stk + alt, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(m != MAP_FAILED);
	pthread_attr_t at;
	UKT_EQ(pthread_attr_init(&at), 0);
	UKT_EQ(pthread_attr_setstack(&at, m, stk), 0);
	pthread_t t;
	UKT_EQ(pthread_create(&t, &at, thread_altstack_at, m + stk), 0);
	UKT_EQ(pthread_join(t, NULL), 0);
	expect_lock_kept();
}

/* one mapping: the alternate signal stack at its bottom, the thread's
 * stack 1 MB above (within a few MB, as mmap places them) */

UKT_CASE(trylock_in_a_handler_on_sigaltstack_below_the_thread_stack)
{
	struct ftrace_ops ops;
	trace_fe_add_signalling_on_altstack(&ops);
	size_t gap = 1 << 20, stk = 1 << 20;
	char *m = mmap(NULL, gap + stk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(m != MAP_FAILED);
	pthread_attr_t at;
	UKT_EQ(pthread_attr_init(&at), 0);
	UKT_EQ(pthread_attr_setstack(&at, m + gap, stk), 0);
	pthread_t t;
	UKT_EQ(pthread_create(&t, &at, thread_altstack_at, m), 0);
	UKT_EQ(pthread_join(t, NULL), 0);
	expect_lock_kept();
}

/* FL_RECURSION: a handler that interrupted the callback gets its own
 * callbacks (another context), the callback itself does not */
static long sig_mul_hits, rec_add_hits;
static void mul_handler(int sig)
{
	(void)sig;
	sig_runs++;
	rec_inner_bad += fe_mul(3, 3) != 9;
}

static void flag_signal_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
			   struct pt_regs *regs)
{
	(void)parent_ip; (void)op; (void)regs;
	if (ip == UL(fe_add)) {
		rec_add_hits++;
		raise(SIGUSR1);
		rec_inner_bad += fe_mul(2, 2) != 4;	/* suppressed */
	} else {
		sig_mul_hits++;
	}
}

UKT_CASE(recursion_flag_signal_handler_is_another_context)
{
	struct sigaction sa = { 0 };
	sa.sa_handler = mul_handler;
	sigemptyset(&sa.sa_mask);
	UKT_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
	struct ftrace_ops ops = { .func = flag_signal_cb, .flags = FTRACE_OPS_FL_RECURSION };
	UKT_EQ(set_f(&ops, "fe_add fe_mul", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	UKT_EQ(fe_add(1, 2), 3);
	UKT_EQ(sig_runs, 1);
	UKT_EQ(rec_add_hits, 1);
	UKT_EQ(sig_mul_hits, 1);	/* the handler's call, not the callback's */
	UKT_EQ(rec_inner_bad, 0);
}

/* the same with the handler on an alternate stack mapped just above the
 * thread's stack: after the handler, the callback must still be protected */
static void *thread_flag_signal(void *arg)
{
	stack_t ss = { .ss_sp = arg, .ss_size = 64 << 10 };
	UKT_EQ(sigaltstack(&ss, NULL), 0);
	UKT_EQ(fe_add(1, 2), 3);
	return NULL;
}

UKT_CASE(recursion_flag_still_protects_after_a_handler_on_an_altstack)
{
	struct sigaction sa = { 0 };
	sa.sa_handler = mul_handler;
	sa.sa_flags = SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	UKT_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
	struct ftrace_ops ops = { .func = flag_signal_cb, .flags = FTRACE_OPS_FL_RECURSION };
	UKT_EQ(set_f(&ops, "fe_add fe_mul", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	size_t stk = 1 << 20, alt = 64 << 10;
	char *m = mmap(NULL, stk + alt, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(m != MAP_FAILED);
	pthread_attr_t at;
	UKT_EQ(pthread_attr_init(&at), 0);
	UKT_EQ(pthread_attr_setstack(&at, m, stk), 0);
	pthread_t t;
	UKT_EQ(pthread_create(&t, &at, thread_flag_signal, m + stk), 0);
	UKT_EQ(pthread_join(t, NULL), 0);
	UKT_EQ(sig_runs, 1);
	UKT_EQ(rec_add_hits, 1);
	UKT_EQ(rec_inner_bad, 0);
	/* 1: the handler's fe_mul; a 2nd would be the callback's own call,
	 * i.e. the callback re-entered */
	UKT_EQ(sig_mul_hits, 1);
}

/* ---- objects loaded and unloaded ----------------------------------------------------- */

static void solib_path(char *path, size_t n, const char *name)
{
	char self[4096];
	ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	UKT_ASSERT(k > 0);
	self[k] = 0;
	*strrchr(self, '/') = 0;
	snprintf(path, n, "%s/../solibs/%s", self, name);
}

static void *open_lib(const char *name)
{
	char path[4200];
	solib_path(path, sizeof(path), name);
	void *h = dlopen(path, RTLD_NOW);
	if (!h)
		UKT_FAIL("dlopen %s: %s", path, dlerror());
	return h;
}

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

static bool has_line(const char *buf, const char *line)
{
	size_t k = strlen(line);
	for (const char *s = buf; s && *s; s = strchr(s, '\n') ? strchr(s, '\n') + 1 : NULL)
		if (!strncmp(s, line, k) && s[k] == '\n')
			return true;
	return false;
}

static unsigned long dl_hit_ip[16];
static int dl_nhits;
static void dl_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		  struct pt_regs *regs)
{
	(void)parent_ip; (void)op; (void)regs;
	if (dl_nhits < 16)
		dl_hit_ip[dl_nhits] = ip;
	dl_nhits++;
}

static long dl_hits_of(void *f)
{
	long n = 0;
	for (int i = 0; i < dl_nhits && i < 16; i++)
		n += dl_hit_ip[i] == UL(f);
	return n;
}

struct dlf { int (*twice)(int), (*thrice)(int), (*both)(int); };
static struct dlf dl_syms(void *h, const char *p)
{
	char n[64];
	struct dlf f;
	snprintf(n, sizeof(n), "dl_%stwice", p);
	f.twice = (int (*)(int))dlsym(h, n);
	snprintf(n, sizeof(n), "dl_%sthrice", p);
	f.thrice = (int (*)(int))dlsym(h, n);
	snprintf(n, sizeof(n), "dl_%sboth", p);
	f.both = (int (*)(int))dlsym(h, n);
	UKT_ASSERT(f.twice && f.thrice && f.both);
	return f;
}

/* the library's five functions listed (the three here, and the leaf
 * callback ftrace-regs uses with its counter's reader), or none */
static void expect_lib_listed(const char *lib, const char *p, const struct dlf *f, bool listed)
{
	int n;
	char *buf = capture(ftrace_available_functions, &n);
	UKT_EQ(n, listed ? NMAIN + 5 : NMAIN);
	if (listed) {
		char l[256];
		snprintf(l, sizeof(l), "%016lx  dl_%stwice [%s]", UL(f->twice), p, lib);
		UKT_ASSERT(has_line(buf, l));
		snprintf(l, sizeof(l), "%016lx  dl_%sthrice [%s]", UL(f->thrice), p, lib);
		UKT_ASSERT(has_line(buf, l));
		snprintf(l, sizeof(l), "%016lx  dl_%sboth [%s]", UL(f->both), p, lib);
		UKT_ASSERT(has_line(buf, l));
	} else if (strstr(buf, "dl_")) {
		UKT_FAIL("an unloaded library's functions are still listed:\n%s", buf);
	}
	free(buf);
}

#define DL_TRACE_ALL(lib, p)						\
	(void)NMAIN;	/* before the library is loaded */		\
	struct ftrace_ops ops = { .func = dl_cb };			\
	UKT_EQ(register_ftrace_function(&ops), 0);	/* every function */ \
	void *h = open_lib(lib);					\
	struct dlf f = dl_syms(h, p);					\
	expect_lib_listed(lib, p, &f, true);				\
	UKT_EQ(f.both(5), 25);						\
	UKT_EQ(dl_nhits, 3);						\
	UKT_EQ(dl_hits_of(f.both), 1);					\
	UKT_EQ(dl_hits_of(f.twice), 1);					\
	UKT_EQ(dl_hits_of(f.thrice), 1);				\
	UKT_EQ(f.thrice(2), 6);						\
	UKT_EQ(dl_nhits, 4);						\
	UKT_EQ(dlclose(h), 0);						\
	expect_lib_listed(lib, p, &f, false);				\
	dl_nhits = 0;							\
	UKT_EQ(fe_add(1, 1) + pf_add(1, 1), 4);	/* still tracing */	\
	UKT_EQ(dl_nhits, 2);						\
	int n;								\
	char *en = capture(ftrace_enabled_functions, &n);		\
	UKT_EQ(n, NMAIN);						\
	UKT_ASSERT(!strstr(en, "dl_"));					\
	free(en);
UKT_CASE(dlopen_trace_all_ops_traces_new_library_fentry) { DL_TRACE_ALL("ftdl_fe.so", "fe_") }
UKT_CASE(dlopen_trace_all_ops_traces_new_library_patchable) { DL_TRACE_ALL("ftdl_pf.so", "pf_") }

#define DL_GLOB(lib, p)							\
	struct ftrace_ops ops = { .func = dl_cb };			\
	UKT_EQ(set_f(&ops, "*" #p "twice", 1), 0);	/* p##twice only, now */ \
	UKT_EQ(register_ftrace_function(&ops), 0);			\
	void *h = open_lib(lib);					\
	struct dlf f = dl_syms(h, #p);					\
	UKT_EQ(f.both(5), 25);						\
	UKT_EQ(dl_nhits, 1);						\
	UKT_EQ(dl_hits_of(f.twice), 1);					\
	UKT_EQ(FT_CAT(p, twice)(4), 8);					\
	UKT_EQ(dl_nhits, 2);						\
	UKT_EQ(dl_hit_ip[1], UL(FT_CAT(p, twice)));			\
	int n;								\
	char *en = capture(ftrace_enabled_functions, &n);		\
	char l[256];							\
	UKT_EQ(n, 2);							\
	snprintf(l, sizeof(l), "%016lx  dl_" #p "twice [%s] (1)", UL(f.twice), lib); \
	UKT_ASSERT(has_line(en, l));					\
	free(en);							\
	UKT_EQ(dlclose(h), 0);						\
	en = capture(ftrace_enabled_functions, &n);			\
	UKT_EQ(n, 1);							\
	snprintf(l, sizeof(l), "%016lx  " #p "twice (1)", UL(FT_CAT(p, twice))); \
	UKT_ASSERT(has_line(en, l));					\
	free(en);
UKT_CASE(dlopen_glob_ops_traces_matching_new_functions_fentry) { DL_GLOB("ftdl_fe.so", fe_) }
UKT_CASE(dlopen_glob_ops_traces_matching_new_functions_patchable) { DL_GLOB("ftdl_pf.so", pf_) }

UKT_CASE(object_glob_selects_library_functions)
{
	struct ftrace_ops ops = { .func = dl_cb };
	UKT_EQ(set_f(&ops, "ftdl_fe.so:*", 1), -EINVAL);	/* not loaded yet */
	void *h = open_lib("ftdl_fe.so");
	struct dlf f = dl_syms(h, "fe_");
	UKT_EQ(set_f(&ops, "ftdl_fe.so:dl_*", 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	UKT_EQ(f.both(1), 5);
	UKT_EQ(fe_twice(1), 2);
	UKT_EQ(dl_nhits, 3);
	UKT_EQ(set_f(&ops, "ftdl_*.so:*thrice", 1), 0);
	dl_nhits = 0;
	UKT_EQ(f.both(1), 5);
	UKT_EQ(dl_nhits, 1);
	UKT_EQ(dl_hit_ip[0], UL(f.thrice));
	UKT_EQ(set_f(&ops, "ftdl_pf.so:*", 1), -EINVAL);	/* the other one is not loaded */
	UKT_EQ(set_f(&ops, "ftdl_fe.so:fe_add", 1), -EINVAL);	/* fe_add is not in it */
	dl_nhits = 0;
	UKT_EQ(f.both(1), 5);
	UKT_EQ(dl_nhits, 1);
	UKT_EQ(unregister_ftrace_function(&ops), 0);
	UKT_EQ(dlclose(h), 0);
}

UKT_CASE(set_filter_ip_on_a_library_function)
{
	void *h = open_lib("ftdl_pf.so");
	struct dlf f = dl_syms(h, "pf_");
	struct ftrace_ops ops = { .func = dl_cb };
	UKT_EQ(ftrace_set_filter_ip(&ops, UL(f.thrice), 0, 1), 0);
	UKT_EQ(ftrace_set_filter_ip(&ops, UL(f.thrice) + 1, 0, 0), -ENOENT);
	UKT_EQ(register_ftrace_function(&ops), 0);
	UKT_EQ(f.both(2), 10);
	UKT_EQ(dl_nhits, 1);
	UKT_EQ(dl_hit_ip[0], UL(f.thrice));
	UKT_EQ(unregister_ftrace_function(&ops), 0);
	UKT_EQ(dlclose(h), 0);
	/* the address is no patch site any more */
	UKT_EQ(ftrace_set_filter_ip(&ops, UL(f.twice), 0, 0), -ENOENT);
}

/* a filter that named only an unloaded library's functions is not empty:
 * the ops must not start tracing everything (the kernel keeps the module's
 * entries in the hash, zeroed, for this reason) */
UKT_CASE(filter_of_an_unloaded_library_does_not_become_trace_all)
{
	void *h = open_lib("ftdl_fe.so");
	struct dlf f = dl_syms(h, "fe_");
	struct ftrace_ops glob = { .func = dl_cb };
	struct ftrace_ops ip = { .func = dl_cb };
	UKT_EQ(set_f(&glob, "ftdl_fe.so:dl_fe_t*", 1), 0);
	UKT_EQ(ftrace_set_filter_ip(&ip, UL(f.both), 0, 1), 0);
	UKT_EQ(register_ftrace_function(&glob), 0);
	UKT_EQ(register_ftrace_function(&ip), 0);
	UKT_EQ(f.both(1), 5);
	UKT_EQ(dl_nhits, 3);
	UKT_EQ(dlclose(h), 0);
	dl_nhits = 0;
	UKT_EQ(fe_add(1, 1) + pf_mul(2, 2) + fe_twice(1), 8);
	UKT_EQ(dl_nhits, 0);
	int n;
	char *en = capture(ftrace_enabled_functions, &n);
	UKT_EQ(n, 0);
	UKT_STREQ(en, "");
	free(en);
}

UKT_CASE(dlopen_again_after_dlclose_traces_again)
{
	struct ftrace_ops all = { .func = dl_cb };
	UKT_EQ(register_ftrace_function(&all), 0);
	for (int round = 0; round < 3; round++) {
		void *h = open_lib(round & 1 ? "ftdl_pf.so" : "ftdl_fe.so");
		struct dlf f = dl_syms(h, round & 1 ? "pf_" : "fe_");
		dl_nhits = 0;
		UKT_EQ(f.both(3), 15);
		UKT_EQ(dl_nhits, 3);
		UKT_EQ(dlclose(h), 0);
	}
	/* a glob ops set while the library is loaded, kept over a reload */
	struct ftrace_ops g = { .func = dl_cb };
	void *h = open_lib("ftdl_fe.so");
	UKT_EQ(set_f(&g, "ftdl_fe.so:dl_fe_thrice", 1), 0);
	UKT_EQ(unregister_ftrace_function(&all), 0);
	UKT_EQ(register_ftrace_function(&g), 0);
	UKT_EQ(dlclose(h), 0);
	h = open_lib("ftdl_fe.so");
	struct dlf f = dl_syms(h, "fe_");
	dl_nhits = 0;
	UKT_EQ(f.both(3), 15);
	UKT_EQ(dl_nhits, 1);
	UKT_EQ(dl_hit_ip[0], UL(f.thrice));
	UKT_EQ(dlclose(h), 0);
}

/*
 * An ip filter names one function of one loaded object.  After that
 * object is unloaded, another object loaded at the same address must not
 * be traced through it (the kernel zeroes the module's entries on unload).
 */
UKT_CASE(ip_filter_does_not_carry_over_to_another_library)
{
	void *h = open_lib("ftdl_fe.so");
	struct dlf f = dl_syms(h, "fe_");
	unsigned long old_twice = UL(f.twice);
	struct ftrace_ops ops = { .func = dl_cb };
	UKT_EQ(ftrace_set_filter_ip(&ops, old_twice, 0, 1), 0);
	UKT_EQ(register_ftrace_function(&ops), 0);
	UKT_EQ(f.twice(2), 4);
	UKT_EQ(dl_nhits, 1);
	UKT_EQ(dlclose(h), 0);
	h = open_lib("ftdl_pf.so");
	struct dlf g = dl_syms(h, "pf_");
	if (UL(g.twice) != old_twice)
		fprintf(stderr, "  (ftdl_pf.so did not land at ftdl_fe.so's address: "
			"the case shows less)\n");
	dl_nhits = 0;
	UKT_EQ(g.both(2), 10);
	UKT_EQ(dl_nhits, 0);
	UKT_EQ(dlclose(h), 0);
}

static long kp_hits;
static int kp_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p; (void)regs;
	kp_hits++;
	return 0;
}

UKT_CASE(kprobe_on_a_library_patch_site_goes_with_dlclose)
{
	void *h = open_lib("ftdl_fe.so");
	struct dlf f = dl_syms(h, "fe_");
	struct kprobe kp = { .symbol_name = "ftdl_fe.so:dl_fe_thrice", .pre_handler = kp_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(UL(kp.addr), UL(f.thrice));
	UKT_EQ(ukt_probe_flags(&kp), KPROBE_FLAG_FTRACE);
	char buf[512], want[512];
	ukt_list_to(buf, sizeof(buf));
	snprintf(want, sizeof(want), "%016lx  k  dl_fe_thrice+0x0 [ftdl_fe.so] [FTRACE]\n",
		 UL(f.thrice));
	UKT_STREQ(buf, want);
	UKT_EQ(f.both(1), 5);
	UKT_EQ(kp_hits, 1);
	UKT_EQ(dlclose(h), 0);
	UKT_EQ(ukt_probe_flags(&kp), KPROBE_FLAG_FTRACE | KPROBE_FLAG_GONE);
	ukt_list_to(buf, sizeof(buf));
	snprintf(want, sizeof(want), "%016lx  k  dl_fe_thrice+0x0 [ftdl_fe.so] [GONE] [FTRACE]\n",
		 UL(f.thrice));
	UKT_STREQ(buf, want);
	int n;
	char *en = capture(ftrace_enabled_functions, &n);
	UKT_EQ(n, 0);
	free(en);
	unregister_kprobe(&kp);
	ukt_list_to(buf, sizeof(buf));
	UKT_STREQ(buf, "");
}

/* ---- fork ------------------------------------------------------------------------- */

static atomic_long hits2;
static void count2_cb(unsigned long ip, unsigned long parent_ip, struct ftrace_ops *op,
		      struct pt_regs *regs)
{
	(void)ip; (void)parent_ip; (void)op; (void)regs;
	atomic_fetch_add(&hits2, 1);
}

/*
 * fork with the fd table full: the child cannot make the hooks' memory
 * its own (slots.c) and shares the sites' stubs with its parent.  The
 * parent then changes its ops on the traced function (its new code and
 * cfg addresses go into the shared stub), and the child registers and
 * unregisters ops of its own.  Neither may disturb the other: the child's
 * calls return right and run no callback (its shared sites are untraced
 * there, as the log says), and the parent's callbacks run exactly once
 * per call after.
 */
#define FORK_SHARED(p)							\
	struct ftrace_ops a = { .func = count_cb };			\
	UKT_EQ(set_f(&a, S(p, add), 1), 0);				\
	UKT_EQ(register_ftrace_function(&a), 0);			\
	UKT_EQ(FT_CAT(p, add)(2, 3), 5);				\
	UKT_EQ(hits, 1);						\
	struct rlimit old, rl;						\
	UKT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);			\
	rl = old;							\
	rl.rlim_cur = 64;						\
	UKT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);			\
	int fds[64], n = 0, up[2], go[2];				\
	UKT_EQ(pipe(up), 0);						\
	UKT_EQ(pipe(go), 0);						\
	while (n < 64 && (fds[n] = dup(2)) >= 0)			\
		n++;							\
	UKT_ASSERT(n < 64);						\
	pid_t pid = fork();						\
	UKT_ASSERT(pid >= 0);						\
	if (pid == 0) {							\
		for (int i = 0; i < n; i++)				\
			close(fds[i]);					\
		close(up[0]);						\
		close(go[1]);						\
		char ok = 'x', c;					\
		if (read(go[0], &c, 1) != 1)				\
			_exit(3);					\
		static struct ftrace_ops b = { .func = count2_cb };	\
		if (set_f(&b, S(p, add), 1) || register_ftrace_function(&b)) \
			ok = 'r';					\
		long h1 = hits, h2 = hits2;				\
		for (int i = 0; i < 100 && ok == 'x'; i++)		\
			if (FT_CAT(p, add)(i, 7) != i + 7)		\
				ok = 'v';				\
		if (ok == 'x' && (hits != h1 || hits2 != h2))		\
			ok = 't';	/* untraced here: no callback */	\
		unregister_ftrace_function(&b);				\
		unregister_ftrace_function(&a);				\
		if (ok == 'x' && FT_CAT(p, add)(1, 1) != 2)		\
			ok = 'u';					\
		if (write(up[1], &ok, 1) != 1)				\
			_exit(2);					\
		_exit(0);						\
	}								\
	for (int i = 0; i < n; i++)					\
		close(fds[i]);						\
	close(up[1]);							\
	close(go[0]);							\
	UKT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);			\
	struct ftrace_ops c2 = { .func = count2_cb };			\
	UKT_EQ(set_f(&c2, S(p, add), 1), 0);				\
	UKT_EQ(register_ftrace_function(&c2), 0);			\
	UKT_EQ(FT_CAT(p, add)(1, 2), 3);				\
	UKT_EQ(hits, 2);						\
	UKT_EQ(hits2, 1);						\
	UKT_EQ(write(go[1], "x", 1), 1);				\
	char ok = 0;							\
	ssize_t got = read(up[0], &ok, 1);				\
	int st;								\
	UKT_EQ(waitpid(pid, &st, 0), pid);				\
	if (got != 1 || !WIFEXITED(st) || WEXITSTATUS(st))		\
		UKT_FAIL("child: %s %d", WIFSIGNALED(st) ? "killed by signal" : "exit", \
			 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st)); \
	if (ok != 'x')							\
		UKT_FAIL("child: %c (r: register, v: a value, t: a callback ran, " \
			 "u: after unregister)", ok);			\
	for (int i = 0; i < 100; i++)					\
		UKT_EQ(FT_CAT(p, add)(i, 1), i + 1);			\
	UKT_EQ(hits, 102);						\
	UKT_EQ(hits2, 101);						\
	UKT_EQ(unregister_ftrace_function(&c2), 0);			\
	UKT_EQ(unregister_ftrace_function(&a), 0);			\
	close(up[0]);							\
	close(go[1]);
UKT_CASE(fork_child_sharing_hooks_fentry) { FORK_SHARED(fe_) }
UKT_CASE(fork_child_sharing_hooks_patchable) { FORK_SHARED(pf_) }
