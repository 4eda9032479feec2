/* SPDX-License-Identifier: MIT */
/*
 * real-zlib: probe every instruction of a larger Debian library nobody
 * here wrote - zlib (libz.so.1) - and check that compression and
 * decompression produce the same bytes as without probes.
 *
 * Debian's libz is stripped and has no debug package installed, so the
 * functions come from its .eh_frame: every FDE inside .text is one
 * function (static ones too: deflate_slow, longest_match, inflate_fast,
 * inflate_table, the crc32 braids ...), named from .dynsym where an
 * exported symbol starts there.  Every case probes every function of the
 * library, which is a superset of what compress()/uncompress()/crc32()/
 * adler32() run through (deflate reaches deflate_stored/fast/slow/rle/huff
 * through a function-pointer table, so a call-graph closure would miss
 * them).
 *
 *   zlib_every_insn        a pre_handler on every instruction; small
 *                          inputs through every API path we can reach
 *   zlib_every_insn_post   the same with a post_handler too
 *   zlib_1mb_sparse        1 MiB buffers (text, random, zeros, ramp):
 *                          every instruction would be tens of millions
 *                          of traps, so every 61st instruction boundary
 *                          (not function entries: longest_match runs
 *                          once per input byte)
 *   zlib_gz_every_insn     gzwrite/gzread/gzprintf ... through a memfd
 *
 * Each: reference run unprobed (twice: the workload is deterministic),
 * probed run with byte-identical results and round trips, compress2's
 * entry probe fired once per compress2 call, then unregistered and
 * identical again with no handler running.
 */
#include <pthread.h>
#include "zlibwork.h"

/* ---- the case --------------------------------------------------------------------- */

/*
 * The 1 MiB run: every instruction probed, and a monitor thread disables
 * each probe once it has fired `budget` times (except compress2's entry,
 * which must count exactly).  Hot loops stop trapping after a while; code
 * that runs rarely (window slides, block flushes, table rebuilds) stays
 * probed to the end.  It also disables probes while the workload runs
 * through them.
 */
struct monitor {
	struct ei_set *set;
	struct ei_probe *keep;
	unsigned long budget;
	unsigned char *off;
	size_t ndisabled;
	int stop;
	pthread_t th;
};

static void *monitor_main(void *arg)
{
	struct monitor *m = arg;
	while (!__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE)) {
		for (size_t i = 0; i < m->set->n; i++) {
			struct ei_probe *e = &m->set->pr[i];
			if (m->off[i] || e == m->keep ||
			    __atomic_load_n(&e->hits, __ATOMIC_RELAXED) < m->budget)
				continue;
			int r = disable_kprobe(&e->kp);
			if (r)
				UKT_FAIL("disable_kprobe(%#lx) = %d", e->addr, r);
			m->off[i] = 1;
			m->ndisabled++;
		}
		struct timespec ts = { 0, 3 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* a probe on every instruction of every function of libz (loaded into
 * z): the set, not yet registered; compress2's entry address */
static unsigned long libz_set(struct ei_obj *z, struct ei_set *set, int post)
{
	struct ei_fnset all;
	ei_obj_load(z, "libz.so", 1);
	unsigned long entry_addr = (unsigned long)dlsym(RTLD_DEFAULT, "compress2");
	UKT_ASSERT(entry_addr);
	all.n = z->nfns;
	all.v = malloc(z->nfns * sizeof(*all.v));
	UKT_ASSERT(all.v);
	for (size_t i = 0; i < z->nfns; i++)
		all.v[i] = &z->fns[i];
	ei_set_build(set, z, all, post, "libz.so.1:compress2", entry_addr, 8);
	return entry_addr;
}

/*
 * stride 1: every instruction of every function; stride k > 1: every k-th
 * boundary counted across the whole library (so not every function entry),
 * plus compress2's entry.
 */
static void run_zlib(void (*run)(struct ei_sink *), const char *name, int post, unsigned stride,
		     unsigned long budget)
{
	struct monitor mon = { .budget = budget };
	static struct ei_sink ref, got;
	static struct ei_obj z;
	struct ei_set set;
	double t0, t1, t2, t3;

	ei_sink_init(&ref, 256UL << 20);
	ei_sink_init(&got, 256UL << 20);
	inputs_setup();

	calls = 0;
	t0 = ei_now();
	run(&ref);
	t1 = ei_now();
	unsigned long ref_calls = calls;
	UKT_ASSERT(ref_calls > 0);
	calls = 0;
	run(&got);
	ei_sink_expect_same(&ref, &got, "unprobed rerun");
	UKT_EQ(calls, ref_calls);

	unsigned long entry_addr = libz_set(&z, &set, post);
	if (stride > 1) {
		/* thin out, keeping the compress2 probes made by name */
		size_t w = 0;
		for (size_t i = 0; i < set.n; i++)
			if (i % stride == 0 || set.pr[i].addr == entry_addr ||
			    set.pr[i].kp.symbol_name)
				set.pr[w++] = set.pr[i];
		set.n = w;
		for (size_t i = 0; i < set.n; i++)
			set.kps[i] = &set.pr[i].kp;
	}
	struct ei_probe *entry = ei_set_probe_at(&set, entry_addr);
	UKT_ASSERT(entry);
	size_t named = 0, by_name = 0;
	for (size_t i = 0; i < z.nfns; i++)
		named += strncmp(z.fns[i].name, "fde@", 4) != 0;
	for (size_t i = 0; i < set.n; i++)
		by_name += set.pr[i].kp.symbol_name != NULL;
	UKT_ASSERT(by_name > 0);

	warm_up();
	t2 = ei_now();
	ei_set_register(&set);
	t3 = ei_now();
	printf("  %s%s: libz: %zu functions (%zu exported), %zu probes (%zu by name) "
	       "registered in %.2f s\n", name, post ? " (pre+post)" : "", z.nfns, named, set.n,
	       by_name, t3 - t2);

	ei_set_zero(&set);
	ei_sink_reset(&got);
	calls = 0;
	cur_set = &set;
	phase_last = 0;
	if (budget) {
		mon.set = &set;
		mon.keep = entry;
		mon.off = calloc(set.n, 1);
		UKT_ASSERT(mon.off);
		UKT_EQ(pthread_create(&mon.th, NULL, monitor_main, &mon), 0);
	}
	t2 = ei_now();
	run(&got);
	t3 = ei_now();
	if (budget) {
		__atomic_store_n(&mon.stop, 1, __ATOMIC_RELEASE);
		pthread_join(mon.th, NULL);
		printf("  %s: %zu probes disabled after %lu hits\n", name, mon.ndisabled, budget);
		UKT_ASSERT(mon.ndisabled > 0);
		for (size_t i = 0; i < set.n; i++)
			UKT_EQ(!!(set.pr[i].kp.flags & KPROBE_FLAG_DISABLED), mon.off[i]);
	}
	cur_set = NULL;
	ei_set_snapshot(&set);
	ei_sink_expect_same(&ref, &got, "probed run");
	UKT_EQ(calls, ref_calls);
	size_t distinct;
	unsigned long total = ei_set_total(&set, &distinct);
	ei_set_report(&set, name, ei_verbose());
	printf("  %s: %lu result bytes, %lu compress2 calls; unprobed %.3f s, "
	       "probed %.3f s (%.2f us per hit)\n", name, (unsigned long)ref.n, calls,
	       t1 - t0, t3 - t2, total ? (t3 - t2) * 1e6 / total : 0.0);
	UKT_EQ(set.snap[entry - set.pr], calls);
	UKT_ASSERT(total > calls);
	ei_set_check(&set, post);

	ei_set_unregister(&set);
	ei_set_snapshot(&set);
	ei_sink_reset(&got);
	calls = 0;
	run(&got);
	ei_sink_expect_same(&ref, &got, "run after unregister");
	for (size_t i = 0; i < set.n; i++)
		if (__atomic_load_n(&set.pr[i].hits, __ATOMIC_RELAXED) != set.snap[i])
			UKT_FAIL("probe at %#lx ran after unregister_kprobes()", set.pr[i].addr);
}

/*
 * Probes apart (every stride-th boundary of libz from phase): few
 * neighbours probed, so where no region of whole instructions can take a
 * jump (a branch target after a short first instruction, the function's
 * end, a call, an indirect jump in the function) the jump is punned
 * (analyze.c: region_pun) and lands on a hop.  The workload's results are
 * the unprobed ones, and every probe counts exactly the hits it counts as
 * a breakpoint (optimisation off, then on, same probes, same workload);
 * nearly all are optimised (without puns about 1 in 8 stays a breakpoint;
 * 99.2-99.6%, where 97.4-97.8% stayed before the knob's turn analysed
 * the probes registered while it was off: two probes within 5 bytes
 * kept the first a breakpoint).
 */
static void run_zlib_apart(unsigned stride, unsigned phase)
{
	static struct ei_sink ref, got;
	static struct ei_obj z;
	struct ei_set set;

	ei_sink_init(&ref, 256UL << 20);
	ei_sink_init(&got, 256UL << 20);
	inputs_setup();
	calls = 0;
	wl_every(&ref);
	unsigned long ref_calls = calls;
	UKT_ASSERT(ref_calls > 0);

	libz_set(&z, &set, 0);
	size_t w = 0;
	for (size_t i = 0; i < set.n; i++)
		if (i % stride == phase && !set.pr[i].kp.symbol_name)
			set.pr[w++] = set.pr[i];
	set.n = w;
	for (size_t i = 0; i < set.n; i++)
		set.kps[i] = &set.pr[i].kp;
	unsigned long *bp_hits = calloc(set.n, sizeof(*bp_hits));
	UKT_ASSERT(bp_hits);

	warm_up();
	UKT_EQ(kprobes_set_optimization(0), 0);
	ei_set_register(&set);
	ei_set_zero(&set);
	ei_sink_reset(&got);
	calls = 0;
	cur_set = &set;
	phase_last = 0;
	wl_every(&got);
	ei_sink_expect_same(&ref, &got, "probed run, breakpoints");
	UKT_EQ(calls, ref_calls);
	for (size_t i = 0; i < set.n; i++)
		bp_hits[i] = __atomic_load_n(&set.pr[i].hits, __ATOMIC_RELAXED);

	UKT_EQ(kprobes_set_optimization(1), 0);
	wait_for_kprobe_optimizer();
	size_t opt = 0;
	for (size_t i = 0; i < set.n; i++)
		opt += !!(set.pr[i].kp.flags & KPROBE_FLAG_OPTIMIZED);
	ei_set_zero(&set);
	ei_sink_reset(&got);
	calls = 0;
	phase_last = 0;
	wl_every(&got);
	cur_set = NULL;
	ei_sink_expect_same(&ref, &got, "probed run, optimized");
	UKT_EQ(calls, ref_calls);
	unsigned long total = 0;
	for (size_t i = 0; i < set.n; i++) {
		unsigned long h = __atomic_load_n(&set.pr[i].hits, __ATOMIC_RELAXED);
		total += h;
		if (h != bp_hits[i])
			UKT_FAIL("probe at %#lx (%s+%#lx, %s): %lu hits optimized, %lu as a breakpoint",
				 set.pr[i].addr, set.fns.v[set.pr[i].fn]->name,
				 set.pr[i].addr - set.fns.v[set.pr[i].fn]->start,
				 set.pr[i].kp.flags & KPROBE_FLAG_OPTIMIZED ? "optimized" : "breakpoint",
				 h, bp_hits[i]);
	}
	printf("  libz every %u-th boundary from %u: %zu probes, %zu optimized (%.1f%%), "
	       "%lu hits each counted as the breakpoints counted them\n", stride, phase, set.n,
	       opt, 100.0 * opt / set.n, total);
	UKT_ASSERT(total > ref_calls);
	UKT_ASSERT(opt * 100 >= set.n * 98);
	ei_set_check(&set, 0);
	ei_set_unregister(&set);
	ei_sink_reset(&got);
	wl_every(&got);
	ei_sink_expect_same(&ref, &got, "run after unregister");
	free(bp_hits);
}

UKT_CASE_T(zlib_apart_punned_3_0, 300) { run_zlib_apart(3, 0); }
UKT_CASE_T(zlib_apart_punned_3_1, 300) { run_zlib_apart(3, 1); }
UKT_CASE_T(zlib_apart_punned_5_2, 300) { run_zlib_apart(5, 2); }

UKT_CASE_T(zlib_every_insn, 300) { run_zlib(wl_every, "zlib", 0, 1, 0); }
UKT_CASE_T(zlib_every_insn_post, 300) { run_zlib(wl_every, "zlib", 1, 1, 0); }
UKT_CASE_T(zlib_1mb_budget, 300) { run_zlib(wl_1mb, "zlib 1 MiB", 0, 1, 100); }
UKT_CASE_T(zlib_1mb_sparse, 300) { run_zlib(wl_1mb, "zlib 1 MiB", 0, 499, 0); }
UKT_CASE_T(zlib_gz_every_insn, 300) { run_zlib(wl_gz, "zlib gz", 0, 1, 0); }
