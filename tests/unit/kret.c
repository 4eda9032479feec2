/* SPDX-License-Identifier: MIT */
/*
 * kretprobes and jprobes seen from the inside (kret.c): what the public
 * API cannot show.
 *
 * Cases:
 *   shadow_stack_refuses_kretprobes   with a CET shadow stack (simulated by
 *                         ukp_kret_test_shstk) register_kretprobe(s) returns
 *                         -EOPNOTSUPP and registers nothing; kprobes and
 *                         jprobes are unaffected; kretprobes work again once
 *                         it is off
 *   plain_kretprobe_entry_is_lean     without entry_handler, the entry's
 *                         pre_handler passes the handler analysis and the
 *                         optimised entry's detour calls the trampoline that
 *                         does the entry in place, ukp_opt_tramp_kret (read
 *                         from the detour's header)
 *   kret_trampoline_finds_the_list_changed  a kprobe joins that entry: the
 *                         detour goes to the lean trampoline; a thread that
 *                         still finds ukp_opt_tramp_kret there (the header
 *                         forced back) is sent on to it and both probes run;
 *                         the kprobe gone, the entry is done in place again;
 *                         a new thread's first call (no thread block yet)
 *                         is counted as well
 *   integer_entry_handler_stays_lean  an entry_handler that keeps to general
 *                         registers: still the lean trampoline
 *   vector_entry_handler_is_not_lean  one that touches xmm0: a saving
 *                         trampoline, and the probed function's double
 *                         argument survives it
 *   jprobe_found_by_a_thread_in_a_detour  a thread that took an optimised
 *                         probe's jump just before a jprobe joined the site
 *                         (simulated by running the old detour) finds the
 *                         jprobe on the optimised path: its double argument
 *                         must reach the probed function
 *   optimised_entry_primes_the_return_stack  an optimised entry runs the
 *                         stub's priming call (kret.S): the slots it used say
 *                         so and go on in the site's detour; a breakpoint
 *                         entry does not prime
 *   r11_written_at_the_entry_is_harmless  a kprobe's pre_handler at the same
 *                         entry (before or after the kretprobe's) sets
 *                         regs->r11, which the return probes' detour uses:
 *                         every result and count stays exact
 *   kept_instance_checked_before_it_is_read  the assembly entry loads the
 *                         thread's kc_steal before its kc_k (the other
 *                         order let a taker and the keeper both have the
 *                         instance: sync.c, ukp_kc_take); read from the
 *                         trampoline's code, as no schedule can be forced
 *                         between two adjacent loads without a debugger
 *   kept_instance_comes_back_at_unregister  a thread keeps a free instance
 *                         for its next call and waits outside any probe:
 *                         unregistering takes it back, so the kretprobe's
 *                         memory is freed at once (no zombie left)
 *   fork_child_sharing_slot_memory  fork with the fd table full, so the
 *                         child cannot make the slot memory its own (slots.c)
 *                         and shares the detours with the parent: the
 *                         child's probes change its lists, not the parent's
 *                         detour (whose list word stays the parent's), and
 *                         the child's hits, through the C path, see the
 *                         child's probes (one added, then the parent's one
 *                         removed: the child's alone runs); the parent's
 *                         calls after that run right, and a kretprobe's
 *                         entry and return in both
 */
#include <errno.h>
#include <Zydis/Zydis.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "arch/x86_64/asm-offsets.h"
#include "ukt.h"
#include "detour.h"

#define NOINL __attribute__((noinline, used))

static atomic_long hits, entries, returns;

NOINL long u_kf(long a, long b)
{
	long t = a * 3 + b * 5;
	__asm__ volatile("" : "+r"(t));
	return t - (a ^ b);
}
#define U_KF(a, b) ((a) * 3 + (b) * 5 - ((a) ^ (b)))

NOINL long u_kd(double x, long a)
{
	long t = (long)(x * 8.0);
	__asm__ volatile("" : "+r"(t));
	return t + a;
}

static int count_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	hits++;
	return 0;
}

static int count_ret(struct kretprobe_instance *ri, struct pt_regs *r)
{
	(void)ri; (void)r;
	returns++;
	return 0;
}

static int int_entry(struct kretprobe_instance *ri, struct pt_regs *r)
{
	*(long *)ri->data = (long)r->di;
	entries++;
	return 0;
}

static int vec_entry(struct kretprobe_instance *ri, struct pt_regs *r)
{
	(void)ri; (void)r;
	__asm__ volatile("pcmpeqd %%xmm0, %%xmm0\n pcmpeqd %%xmm1, %%xmm1" ::: "xmm0", "xmm1");
	entries++;
	return 0;
}

static uint8_t *detour_entry(unsigned long addr)
{
	uint8_t *e;
	detour_header(addr, &e);
	return e;
}

/* ---- CET shadow stack ------------------------------------------------------------- */

UKT_CASE(shadow_stack_refuses_kretprobes)
{
	long (*volatile fn)(long, long) = u_kf;
	struct kretprobe rp = { .kp.addr = (void *)u_kf, .handler = count_ret };
	struct kretprobe rq = { .kp.symbol_name = "u_kd", .handler = count_ret };
	struct kretprobe *v[] = { &rp, &rq };
	char buf[1024];

	ukp_kret_test_shstk = 1;
	UKT_EQ(register_kretprobe(&rp), -EOPNOTSUPP);
	UKT_EQ(register_kretprobes(v, 2), -EOPNOTSUPP);
	ukt_list_to(buf, sizeof(buf));
	UKT_STREQ(buf, "");
	UKT_EQ(fn(4, 5), U_KF(4, 5));
	UKT_EQ(returns, 0);
	/* unregistering what was refused: nothing to do, no harm */
	unregister_kretprobe(&rp);
	UKT_EQ(fn(4, 5), U_KF(4, 5));
	/* other probe kinds do not replace return addresses */
	struct kprobe kp = { .addr = (void *)u_kf, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(fn(1, 2), U_KF(1, 2));
	UKT_EQ(hits, 1);
	unregister_kprobe(&kp);

	ukp_kret_test_shstk = 0;
	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (void *)u_kf;
	rp.handler = count_ret;
	UKT_EQ(register_kretprobe(&rp), 0);
	UKT_EQ(fn(4, 5), U_KF(4, 5));
	UKT_EQ(returns, 1);
	unregister_kretprobe(&rp);
	memset(&rp, 0, sizeof(rp));
	rp.kp.addr = (void *)u_kf;
	rp.handler = count_ret;
	UKT_EQ(register_kretprobes(v, 2), 0);
	UKT_EQ(fn(4, 5), U_KF(4, 5));
	UKT_EQ(u_kd(1.0, 1), 9);
	UKT_EQ(returns, 3);
	unregister_kretprobes(v, 2);
}

/* ---- the lean entry ----------------------------------------------------------------- */

UKT_CASE(plain_kretprobe_entry_is_lean)
{
	long (*volatile fn)(long, long) = u_kf;
	struct kretprobe rp = { .kp.addr = (void *)u_kf, .handler = count_ret };
	char why[160];
	UKT_EQ(register_kretprobe(&rp), 0);
	/* the entry's pre_handler is the library's: the analysis proves it */
	UKT_ASSERT(rp.kp.pre_handler != NULL);
	if (ukp_opt_handler_check((void *)rp.kp.pre_handler, why, sizeof(why)))
		UKT_FAIL("kretprobe entry without entry_handler not lean: %s", why);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(rp.kp.flags & KPROBE_FLAG_OPTIMIZED);
	UKT_ASSERT(plist_at((unsigned long)u_kf)->gpr_only);
	UKT_ASSERT(plist_at((unsigned long)u_kf)->kret1);
	/* the list hands the trampoline this kretprobe's state directly */
	UKT_ASSERT(rp.__ukp_priv[0] != NULL);
	UKT_EQ((uintptr_t)plist_at((unsigned long)u_kf)->kret, (uintptr_t)rp.__ukp_priv[0]);
	UKT_EQ(detour_tramp((unsigned long)u_kf), (uint64_t)(uintptr_t)ukp_opt_tramp_kret);
	for (long i = 0; i < 1000; i++)
		UKT_EQ(fn(i, i * 7), U_KF(i, i * 7));
	UKT_EQ(returns, 1000);
	UKT_EQ(rp.nmissed, 0);
	UKT_EQ(rp.kp.nmissed, 0);
	unregister_kretprobe(&rp);
	UKT_EQ(fn(1, 1), U_KF(1, 1));
	UKT_EQ(returns, 1000);
}

static void *call_u_kf_once(void *arg)
{
	long (*volatile fn)(long, long) = u_kf;
	*(long *)arg = fn(20, 22);
	return NULL;
}

UKT_CASE(kret_trampoline_finds_the_list_changed)
{
	long (*volatile fn)(long, long) = u_kf;
	struct kretprobe rp = { .kp.addr = (void *)u_kf, .handler = count_ret };
	UKT_EQ(register_kretprobe(&rp), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(rp.kp.flags & KPROBE_FLAG_OPTIMIZED);
	UKT_EQ(detour_tramp((unsigned long)u_kf), (uint64_t)(uintptr_t)ukp_opt_tramp_kret);
	UKT_EQ(fn(1, 2), U_KF(1, 2));
	UKT_EQ(returns, 1);

	struct kprobe kp = { .addr = (void *)u_kf, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(kp.flags & KPROBE_FLAG_OPTIMIZED);
	UKT_ASSERT(!plist_at((unsigned long)u_kf)->kret1);
	UKT_EQ(detour_tramp((unsigned long)u_kf), (uint64_t)(uintptr_t)ukp_opt_tramp_lean);
	UKT_EQ(fn(3, 4), U_KF(3, 4));
	UKT_EQ(hits, 1);
	UKT_EQ(returns, 2);
	/* a thread that read the header before the switch */
	UKT_EQ(ukp_opt_force_tramp((unsigned long)u_kf, ukp_opt_tramp_kret), 0);
	for (long i = 0; i < 100; i++)
		UKT_EQ(fn(i, 5), U_KF(i, 5));
	UKT_EQ(hits, 101);
	UKT_EQ(returns, 102);

	unregister_kprobe(&kp);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(rp.kp.flags & KPROBE_FLAG_OPTIMIZED);
	UKT_EQ(detour_tramp((unsigned long)u_kf), (uint64_t)(uintptr_t)ukp_opt_tramp_kret);
	UKT_EQ(fn(5, 6), U_KF(5, 6));
	UKT_EQ(hits, 101);
	UKT_EQ(returns, 103);
	long r = 0;
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, call_u_kf_once, &r), 0);
	UKT_EQ(pthread_join(th, NULL), 0);
	UKT_EQ(r, U_KF(20, 22));
	UKT_EQ(returns, 104);
	UKT_EQ(rp.nmissed, 0);
	UKT_EQ(rp.kp.nmissed, 0);
	unregister_kretprobe(&rp);
	UKT_EQ(fn(1, 1), U_KF(1, 1));
	UKT_EQ(returns, 104);
}

UKT_CASE(integer_entry_handler_stays_lean)
{
	long (*volatile fn)(long, long) = u_kf;
	struct kretprobe rp = { .kp.addr = (void *)u_kf, .handler = count_ret,
				.entry_handler = int_entry, .data_size = sizeof(long) };
	char why[160];
	if (ukp_opt_handler_check((void *)int_entry, why, sizeof(why)))
		UKT_FAIL("int_entry not lean: %s", why);
	UKT_EQ(register_kretprobe(&rp), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(rp.kp.flags & KPROBE_FLAG_OPTIMIZED);
	UKT_ASSERT(plist_at((unsigned long)u_kf)->gpr_only);
	UKT_EQ(detour_tramp((unsigned long)u_kf), (uint64_t)(uintptr_t)ukp_opt_tramp_lean);
	for (long i = 0; i < 1000; i++)
		UKT_EQ(fn(i, 3), U_KF(i, 3));
	UKT_EQ(entries, 1000);
	UKT_EQ(returns, 1000);
	unregister_kretprobe(&rp);
}

UKT_CASE(vector_entry_handler_is_not_lean)
{
	long (*volatile fn)(double, long) = u_kd;
	struct kretprobe rp = { .kp.addr = (void *)u_kd, .handler = count_ret,
				.entry_handler = vec_entry };
	char why[160];
	UKT_ASSERT(ukp_opt_handler_check((void *)vec_entry, why, sizeof(why)) < 0);
	UKT_EQ(register_kretprobe(&rp), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(rp.kp.flags & KPROBE_FLAG_OPTIMIZED);
	UKT_ASSERT(!plist_at((unsigned long)u_kd)->gpr_only);
	UKT_ASSERT(detour_tramp((unsigned long)u_kd) != (uint64_t)(uintptr_t)ukp_opt_tramp_lean);
	for (long i = 0; i < 1000; i++)
		UKT_EQ(fn((double)i + 0.25, i), i * 8 + 2 + i);
	UKT_EQ(entries, 1000);
	UKT_EQ(returns, 1000);
	unregister_kretprobe(&rp);
	/* and back: a plain one on the same function saves nothing */
	struct kretprobe rq = { .kp.addr = (void *)u_kd, .handler = count_ret };
	UKT_EQ(register_kretprobe(&rq), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(rq.kp.flags & KPROBE_FLAG_OPTIMIZED);
	UKT_EQ(detour_tramp((unsigned long)u_kd), (uint64_t)(uintptr_t)ukp_opt_tramp_kret);
	UKT_EQ(fn(2.5, 1), 21);
	UKT_EQ(returns, 1001);
	unregister_kretprobe(&rq);
}

/* ---- a jprobe seen on the optimised path ------------------------------------------- */

static double jd_seen;

long u_kd_entry(double x, long a)
{
	(void)a;
	jd_seen = x;
	entries++;
	jprobe_return();
	return 0;
}

UKT_CASE(jprobe_found_by_a_thread_in_a_detour)
{
	long (*volatile fn)(double, long) = u_kd;
	struct kprobe kp = { .addr = (void *)u_kd, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(kp.flags & KPROBE_FLAG_OPTIMIZED);
	UKT_EQ(fn(2.5, 3), 23);
	UKT_EQ(hits, 1);
	/* where a thread goes that takes the jump now */
	long (*in_detour)(double, long) = (long (*)(double, long))(void *)
		detour_entry((unsigned long)u_kd);
	UKT_EQ(in_detour(2.5, 3), 23);		/* as good as the function */
	UKT_EQ(hits, 2);

	/* a jprobe joins: the jump goes, but a thread that took it just
	 * before (it is in the detour: never freed for that reason) finds
	 * the new probe list there */
	struct jprobe jp = { .kp.addr = (void *)u_kd, .entry = (void *)u_kd_entry };
	UKT_EQ(register_jprobe(&jp), 0);
	UKT_ASSERT(!(kp.flags & KPROBE_FLAG_OPTIMIZED));
	UKT_EQ(fn(2.5, 3), 23);			/* the breakpoint path */
	UKT_EQ(entries, 1);
	UKT_ASSERT(jd_seen == 2.5);
	long r = in_detour(2.5, 3);
	UKT_EQ(hits, 4);
	UKT_ASSERT(entries == 1 || jd_seen == 2.5);	/* if its entry ran, with x */
	UKT_EQ(r, 23);				/* x reached u_kd */
	unregister_jprobe(&jp);
	unregister_kprobe(&kp);
}

/* ---- priming the return stack buffer ------------------------------------------------ */

static unsigned primed_slots(unsigned long *cont)
{
	unsigned n = 0;
	for (unsigned k = 0; k < KRET_NSTUBS; k++)
		if (ukp_kret_ra[k].primed) {
			n++;
			*cont = ukp_kret_ra[k].cont;
		}
	return n;
}

UKT_CASE(optimised_entry_primes_the_return_stack)
{
	long (*volatile fn)(long, long) = u_kf;
	unsigned long cont = 0;
	UKT_EQ(primed_slots(&cont), 0);
	struct kretprobe rp = { .kp.addr = (void *)u_kf, .handler = count_ret, .maxactive = 1 };
	UKT_EQ(register_kretprobe(&rp), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(rp.kp.flags & KPROBE_FLAG_OPTIMIZED);
	for (long i = 0; i < 100; i++)
		UKT_EQ(fn(i, 2), U_KF(i, 2));
	UKT_EQ(returns, 100);
	/* one instance, primed, going on 5 bytes before the detour's copy */
	UKT_EQ(primed_slots(&cont), 1);
	const struct ukp_site *s = ukp_site_lookup((unsigned long)u_kf);
	UKT_ASSERT(s != NULL);
	uint8_t *copy = atomic_load(&s->resume);
	UKT_ASSERT(copy != NULL);
	UKT_EQ(cont + UKP_ARCH_KRET_DROP_LEN, (unsigned long)copy);
	unregister_kretprobe(&rp);

	/* by breakpoint: the entry cannot prime, and says so */
	UKT_EQ(kprobes_set_optimization(0), 0);
	struct kretprobe rq = { .kp.addr = (void *)u_kf, .handler = count_ret, .maxactive = 1 };
	UKT_EQ(register_kretprobe(&rq), 0);
	for (long i = 0; i < 100; i++)
		UKT_EQ(fn(i, 5), U_KF(i, 5));
	UKT_EQ(returns, 200);
	UKT_EQ(primed_slots(&cont), 0);
	unregister_kretprobe(&rq);
	UKT_EQ(kprobes_set_optimization(1), 0);
}

static int set_r11(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	r->r11 = 0xdead0000beefUL;	/* dead at an entry: no effect */
	hits++;
	return 0;
}

UKT_CASE(r11_written_at_the_entry_is_harmless)
{
	long (*volatile fn)(long, long) = u_kf;
	for (int kprobe_first = 0; kprobe_first < 2; kprobe_first++) {
		struct kretprobe rp = { .kp.addr = (void *)u_kf, .handler = count_ret };
		struct kprobe kp = { .addr = (void *)u_kf, .pre_handler = set_r11 };
		if (kprobe_first)
			UKT_EQ(register_kprobe(&kp), 0);
		UKT_EQ(register_kretprobe(&rp), 0);
		if (!kprobe_first)
			UKT_EQ(register_kprobe(&kp), 0);
		wait_for_kprobe_optimizer();
		UKT_ASSERT(rp.kp.flags & KPROBE_FLAG_OPTIMIZED);
		UKT_ASSERT(kp.flags & KPROBE_FLAG_OPTIMIZED);
		hits = returns = 0;
		for (long i = 0; i < 1000; i++)
			UKT_EQ(fn(i, i ^ 3), U_KF(i, i ^ 3));
		UKT_EQ(hits, 1000);
		UKT_EQ(returns, 1000);
		UKT_EQ(rp.nmissed, 0);
		/* the kretprobe alone again: the site keeps its detour */
		unregister_kprobe(&kp);
		for (long i = 0; i < 10; i++)
			UKT_EQ(fn(i, 1), U_KF(i, 1));
		UKT_EQ(returns, 1010);
		unregister_kretprobe(&rp);
	}
}

/* ---- fork ------------------------------------------------------------------------- */

static int count_pre2(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	hits += 100;
	return 0;
}

UKT_CASE(fork_child_sharing_slot_memory)
{
	long (*volatile fn)(long, long) = u_kf;
	long (*volatile fd)(double, long) = u_kd;
	struct kprobe kp = { .addr = (void *)u_kf, .pre_handler = count_pre };
	struct kretprobe rp = { .kp.addr = (void *)u_kd, .handler = count_ret };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(register_kretprobe(&rp), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(kp.flags & KPROBE_FLAG_OPTIMIZED);
	UKT_ASSERT(rp.kp.flags & KPROBE_FLAG_OPTIMIZED);
	(void)detour_tramp((unsigned long)u_kf);	/* checks the list word */
	(void)detour_tramp((unsigned long)u_kd);
	UKT_EQ(fn(1, 2), U_KF(1, 2));
	UKT_EQ(fd(2.0, 1), 17);
	UKT_EQ(hits, 1);
	UKT_EQ(returns, 1);
	/* the fd table full at the fork: the child's memfd_create fails */
	struct rlimit old, rl;
	UKT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
	rl = old;
	rl.rlim_cur = 64;
	UKT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	int fds[64], n = 0, pfd[2], go[2];
	UKT_EQ(pipe(pfd), 0);
	UKT_EQ(pipe(go), 0);
	while (n < 64 && (fds[n] = dup(2)) >= 0)
		n++;
	UKT_ASSERT(n < 64);
	pid_t pid = fork();
	UKT_ASSERT(pid >= 0);
	if (pid == 0) {
		for (int i = 0; i < n; i++)
			close(fds[i]);
		close(pfd[0]);
		close(go[1]);
		/* the parent has changed its list meanwhile, and written its
		 * address in the shared detour: here that address is the
		 * child's own heap, filled with 0x41 */
		char ok = 'x', c;
		if (read(go[0], &c, 1) != 1)
			_exit(3);
		for (int i = 0; i < 512; i++) {
			void *x = malloc(16 + (size_t)(i % 9) * 8);
			if (x)
				memset(x, 0x41, 16 + (size_t)(i % 9) * 8);
		}
		/* the child's own probe: its list has both; its calls see
		 * both, through the C path (the detour's list word is the
		 * parent's) */
		static struct kprobe k2 = { .pre_handler = count_pre2 };
		k2.addr = (void *)u_kf;
		hits = returns = 0;
		if (register_kprobe(&k2))
			ok = 'r';
		wait_for_kprobe_optimizer();
		if (ok == 'x' && !(k2.flags & KPROBE_FLAG_OPTIMIZED))
			ok = 'o';
		for (long i = 0; i < 100 && ok == 'x'; i++)
			if (fn(i, 7) != U_KF(i, 7) || fd(1.0, i) != 8 + i)
				ok = 'v';
		if (ok == 'x' && (hits != 100 * 101 || returns != 100))
			ok = 'c';
		unregister_kprobe(&kp);		/* k2 alone: a lean list */
		wait_for_kprobe_optimizer();
		if (ok == 'x' && !(k2.flags & KPROBE_FLAG_OPTIMIZED))
			ok = 'O';
		if (ok == 'x' && (fn(1, 1) != U_KF(1, 1) || hits != 100 * 101 + 100))
			ok = 'u';
		unregister_kprobe(&k2);
		if (write(pfd[1], &ok, 1) != 1)
			_exit(2);
		_exit(0);
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
	close(pfd[1]);		/* a child that dies: end of file */
	close(go[0]);
	UKT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
	/* a new list here, its address written into the detour both share */
	struct kprobe k3 = { .addr = (void *)u_kf, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&k3), 0);
	wait_for_kprobe_optimizer();
	UKT_ASSERT(k3.flags & KPROBE_FLAG_OPTIMIZED);
	unregister_kprobe(&k3);
	wait_for_kprobe_optimizer();
	UKT_EQ(write(go[1], "x", 1), 1);
	char ok = 0;
	ssize_t got = read(pfd[0], &ok, 1);
	int st;
	UKT_EQ(waitpid(pid, &st, 0), pid);
	if (got != 1 || !WIFEXITED(st) || WEXITSTATUS(st))
		UKT_FAIL("child: %s %d", WIFSIGNALED(st) ? "killed by signal" : "exit",
			 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	if (ok != 'x')
		UKT_FAIL("child: %c (r: register, o/O: not optimised, v: a value, c: counts, "
			 "u: after unregister)", ok);
	/* the parent's detour still holds the parent's list; new allocations
	 * (where the child's lists were) change nothing for its calls */
	(void)detour_tramp((unsigned long)u_kf);
	static void *x[256];
	for (int i = 0; i < 256; i++) {
		x[i] = malloc(24 + (size_t)(i & 24));
		UKT_ASSERT(x[i]);
		memset(x[i], 0x41, 24);
	}
	hits = returns = 0;
	for (long i = 0; i < 100; i++) {
		UKT_EQ(fn(i, 3), U_KF(i, 3));
		UKT_EQ(fd(0.5, i), 4 + i);
	}
	UKT_EQ(hits, 100);
	UKT_EQ(returns, 100);
	unregister_kretprobe(&rp);
	unregister_kprobe(&kp);
	for (int i = 0; i < 256; i++)
		free(x[i]);
	close(pfd[0]);
	close(go[1]);
}

static sem_t kc_done, kc_go;
static struct ukp_thread *kc_block;

static void *kc_keeper(void *arg)
{
	(void)arg;
	long r = u_kd(2.0, 1);		/* 17: keeps its instance */
	kc_block = ukp_self;
	sem_post(&kc_done);
	while (sem_wait(&kc_go) && errno == EINTR)
		;
	return (void *)r;
}

UKT_CASE(kept_instance_comes_back_at_unregister)
{
	struct kretprobe rp = { .kp.addr = (void *)u_kd, .handler = count_ret, .maxactive = 4 };
	UKT_EQ(register_kretprobe(&rp), 0);
	wait_for_kprobe_optimizer();
	UKT_EQ(ukp_kret_nzombies(), 0);
	UKT_EQ(sem_init(&kc_done, 0, 0), 0);
	UKT_EQ(sem_init(&kc_go, 0, 0), 0);
	returns = 0;
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, kc_keeper, NULL), 0);
	while (sem_wait(&kc_done) && errno == EINTR)
		;
	UKT_EQ(returns, 1);
	/* the keeper's block keeps an instance of it */
	UKT_ASSERT(kc_block != NULL);
	UKT_ASSERT(kc_block->kc_k == rp.__ukp_priv[0]);
	unregister_kretprobe(&rp);
	/* taken back from the thread waiting outside any probe: freed now */
	UKT_EQ(ukp_kret_nzombies(), 0);
	UKT_ASSERT(kc_block->kc_k == NULL);
	sem_post(&kc_go);
	void *r;
	UKT_EQ(pthread_join(th, &r), 0);
	UKT_EQ((long)r, 17);
	sem_destroy(&kc_done);
	sem_destroy(&kc_go);
}

UKT_CASE(kept_instance_checked_before_it_is_read)
{
	ZydisDecoder dec;
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	const uint8_t *pc = (const uint8_t *)(uintptr_t)ukp_opt_tramp_kret;
	const uint8_t *end = (const uint8_t *)ukp_opt_tramp_end;
	long steal_at = -1, k_at = -1, inst_at = -1;
	for (long i = 0; pc < end; i++) {
		ZydisDecodedInstruction d;
		ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
		UKT_ASSERT(ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, pc, (size_t)(end - pc), &d, op)));
		for (unsigned j = 0; j < d.operand_count_visible; j++) {
			if (op[j].type != ZYDIS_OPERAND_TYPE_MEMORY ||
			    !(op[j].actions & ZYDIS_OPERAND_ACTION_MASK_READ))
				continue;
			long disp = (long)op[j].mem.disp.value;
			if (disp == T_KC_STEAL && steal_at < 0)
				steal_at = i;
			if (disp == T_KC_K && k_at < 0)
				k_at = i;
			if (disp == T_KC_INST && inst_at < 0)
				inst_at = i;
		}
		pc += d.length;
	}
	UKT_ASSERT(steal_at >= 0 && k_at >= 0 && inst_at >= 0);
	if (!(steal_at < k_at && k_at < inst_at))
		UKT_FAIL("ukp_opt_tramp_kret reads kc_steal at instruction %ld, kc_k at %ld, "
			 "kc_inst at %ld: kc_steal must come first", steal_at, k_at, inst_at);
}
