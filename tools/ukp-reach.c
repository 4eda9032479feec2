/* SPDX-License-Identifier: MIT */
/*
 * ukp-reach: how many real probes end up jump-optimised, counted by
 * KPROBE_FLAG_OPTIMIZED after the optimizer ran (scripts/coverage asks
 * only the safety checks; this registers probes and lets the optimizer
 * decide, threads, detour placement and all).
 *
 *	ukp-reach single [--max-seconds S] [--per-lib N] LIBRARY...
 *	ukp-reach every [--list]
 *
 * single: one probe at a time.  For each LIBRARY (a name dlopen() finds,
 *   e.g. libz.so.1), in a child process of its own: every instruction
 *   boundary of every function (tests/real/everyinsn.h: .symtab, the
 *   debug file by build-id, else the .eh_frame FDEs), every Nth of them
 *   (N picked so that about --per-lib, default 20,000, are probed), put
 *   into batches whose probes lie at least 64 bytes apart (a region is at
 *   most 5 + 14 bytes: no probe's region holds another's, so each is
 *   optimised as if it were alone); each batch registered with a counting
 *   pre_handler, wait_for_kprobe_optimizer(), the flags counted, then
 *   unregistered.  The batches interleave across the library, so a run cut
 *   short by --max-seconds (default 20 per library) is still a sample of
 *   all of it.  Not-optimised probes are told apart by ukp_opt_check():
 *   the checks' reason, or where they pass, the optimizer's
 *   (ukp_opt_why_not(): no room for a punned jump's hop or a detour, a
 *   thread in the region).
 *
 * every: a probe on every instruction of libz at once (the functions of
 *   its .eh_frame, as tests/real/zlib.c probes them), with the counting
 *   pre_handler tests/real/zlib.c uses (reads regs->ip: the lean path
 *   when optimised).  After wait_for_kprobe_optimizer(): the share
 *   optimised; then zlib.c's wl_every workload (tests/real/zlibwork.h)
 *   runs probed, its results compared byte for byte with an unprobed run,
 *   and the cost per hit - (probed - unprobed time) / hits - is set
 *   beside one optimised probe's hit with the same handler (a
 *   `lea 1(%rdi),%rax; ret` function called in a loop, less the plain
 *   call).
 *
 *   The probes left breakpoints, and the hits that trapped, are counted
 *   by the optimizer's reason (ukp_opt_why_not(): what UKPROBES_VERBOSE=1
 *   tells); --list prints each such probe (file address, function,
 *   hits, the reason and its own region's checks).
 *
 * Both end with a Markdown table (docs/performance.md's form).  Exit
 * status 1 when a probed run computed something else, a library's child
 * died, or nothing could be measured.
 */
#include <dlfcn.h>
#include <link.h>
#include <signal.h>
#include <sys/wait.h>
#include "internal.h"
#include "real/zlibwork.h"

#define MAX_LIBS 8
#define MIN_GAP 64		/* bytes between the probes of a batch */
#define BATCH_MAX 4000

/* ---- single ------------------------------------------------------------- */

static unsigned long single_hits;

static int count_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	__atomic_fetch_add(&single_hits, 1, __ATOMIC_RELAXED);
	return 0;
}

/* what a child reports to its parent through a pipe */
struct reach {
	char name[64];
	char how[32];
	int ok;				/* measured */
	char why_not[128];
	unsigned long nbounds, stride, batches, batches_done;
	unsigned long probed, registered, optimized;
	unsigned long refused_checks, held;	/* of the not optimised */
	char top[4][112];		/* the most frequent check refusals */
	unsigned long topn[4];
	double secs;
};

struct why_count {
	char text[112];
	unsigned long n;
};

/* add n to the count of text (cut to the size of a why_count's) */
static void add_text(struct why_count *w, size_t *nw, size_t cap, const char *text,
		     unsigned long n)
{
	char t[sizeof(w[0].text)];
	snprintf(t, sizeof(t), "%s", text);
	for (size_t i = 0; i < *nw; i++)
		if (!strcmp(w[i].text, t)) {
			w[i].n += n;
			return;
		}
	if (*nw < cap) {
		snprintf(w[*nw].text, sizeof(w[0].text), "%s", t);
		w[(*nw)++].n = n;
	}
}

/* add n to the count of why's text up to its first ':' */
static void add_why(struct why_count *w, size_t *nw, size_t cap, const char *why,
		    unsigned long n)
{
	char t[64];
	size_t k = 0;
	while (why[k] && why[k] != ':' && k < sizeof(t) - 1) {
		t[k] = why[k];
		k++;
	}
	t[k] = 0;
	add_text(w, nw, cap, t, n);
}

static void count_why(struct why_count *w, size_t *nw, size_t cap, const char *why)
{
	add_why(w, nw, cap, why, 1);
}

/*
 * Why the probe at addr is a breakpoint, as the optimizer says it
 * (ukp_opt_why_not), into text with its offsets ("at +4", "to +2") as N
 * and its reason's details cut at a ':' after the first words, so that
 * probes left out for one reason count together.
 */
static const char *why_not(unsigned long addr, char *text, size_t n)
{
	char why[160] = "";
	if (ukp_opt_why_not(addr, why, sizeof(why)) == 0)
		snprintf(why, sizeof(why), "optimized");
	size_t k = 0;
	for (const char *c = why; *c && k + 2 < n; c++) {
		if ((*c == '+' || *c == '-') && c[1] >= '0' && c[1] <= '9') {
			text[k++] = 'N';
			while (c[1] >= '0' && c[1] <= '9')
				c++;
		} else if (*c == ':' && k > 16 && strncmp(text, "punned jump:", 12) &&
			   strncmp(text, "dead padding", 12)) {
			break;
		} else {
			text[k++] = *c;
		}
	}
	text[k] = 0;
	return text;
}

static void single_lib(const char *arg, unsigned long per_lib, double max_secs, struct reach *r)
{
	static struct ei_obj o;
	struct link_map *lm = NULL;
	unsigned long *bounds = NULL;
	size_t nb = 0, cap = 0;
	const char *base = strrchr(arg, '/') ? strrchr(arg, '/') + 1 : arg;

	snprintf(r->name, sizeof(r->name), "%s", base);
	void *h = dlopen(arg, RTLD_NOW | RTLD_LOCAL);
	if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) || !lm || !lm->l_name[0]) {
		snprintf(r->why_not, sizeof(r->why_not), "%s", h ? "no link map" : dlerror());
		return;
	}
	double t0 = ei_now();
	ei_obj_load(&o, lm->l_name, !ei_has_symbols(lm->l_name));
	snprintf(r->how, sizeof(r->how), "%s", o.how);
	for (size_t i = 0; i < o.nfns; i++)
		(void)ei_sweep_addrs(&o.fns[i], &bounds, &nb, &cap);
	r->nbounds = nb;
	r->stride = per_lib && nb > per_lib ? (nb + per_lib - 1) / per_lib : 1;

	/* batches: probes MIN_GAP apart, interleaved across the library */
	size_t ns = (nb + r->stride - 1) / r->stride;
	size_t nbat = (ns + BATCH_MAX - 1) / BATCH_MAX, bcap = nbat + 16;
	struct batch { unsigned long *v; size_t n, cap; } *bat = calloc(bcap, sizeof(*bat));
	if (!bat)
		UKT_FAIL("out of memory");
	for (size_t k = 0, i = 0, base = nbat; k < nb; k += r->stride, i++) {
		size_t b, tries;
		for (b = i % base, tries = 0; tries < nbat; tries++, b = (b + 1) % nbat)
			if (bat[b].n < BATCH_MAX * 2 &&
			    (!bat[b].n || bounds[k] >= bat[b].v[bat[b].n - 1] + MIN_GAP))
				break;
		if (tries == nbat) {	/* no room anywhere: one more batch */
			if (nbat == bcap) {
				bcap *= 2;
				bat = realloc(bat, bcap * sizeof(*bat));
				if (!bat)
					UKT_FAIL("out of memory");
			}
			memset(&bat[nbat], 0, sizeof(*bat));
			b = nbat++;
		}
		if (bat[b].n == bat[b].cap) {
			bat[b].cap = bat[b].cap ? 2 * bat[b].cap : 1024;
			bat[b].v = realloc(bat[b].v, bat[b].cap * sizeof(*bat[b].v));
			if (!bat[b].v)
				UKT_FAIL("out of memory");
		}
		bat[b].v[bat[b].n++] = bounds[k];
	}
	r->batches = nbat;

	struct why_count whys[32];
	size_t nwhys = 0;
	struct kprobe *kp = calloc(BATCH_MAX * 2, sizeof(*kp));
	struct kprobe **kps = calloc(BATCH_MAX * 2, sizeof(*kps));
	if (!kp || !kps)
		UKT_FAIL("out of memory");
	for (size_t b = 0; b < nbat; b++) {
		if (b && ei_now() - t0 > max_secs)
			break;
		size_t n = bat[b].n;
		for (size_t i = 0; i < n; i++) {
			memset(&kp[i], 0, sizeof(kp[i]));
			kp[i].addr = (kprobe_opcode_t *)bat[b].v[i];
			kp[i].pre_handler = count_pre;
			kps[i] = &kp[i];
		}
		if (register_kprobes(kps, (int)n) != 0) {
			/* one refused (the blacklist): register them one by one */
			for (size_t i = 0; i < n; i++) {
				memset(&kp[i], 0, sizeof(kp[i]));
				kp[i].addr = (kprobe_opcode_t *)bat[b].v[i];
				kp[i].pre_handler = count_pre;
				int e = register_kprobe(&kp[i]);
				if (e) {
					kps[i] = NULL;
					char t[64];
					snprintf(t, sizeof(t), "not registered (%s)", strerror(-e));
					count_why(whys, &nwhys, 32, t);
				}
			}
		}
		wait_for_kprobe_optimizer();
		for (size_t i = 0; i < n; i++) {
			r->probed++;
			if (!kps[i])
				continue;
			r->registered++;
			if (kp[i].flags & KPROBE_FLAG_OPTIMIZED) {
				r->optimized++;
				continue;
			}
			char why[256] = "";
			if (ukp_opt_check(bat[b].v[i], why, sizeof(why)) == 0) {
				/* the optimizer's own reason (no room
				 * for a punned jump's hop, held...) */
				char text[160];
				r->held++;
				add_text(whys, &nwhys, 32, why_not(bat[b].v[i], text, sizeof(text)),
					 1);
			} else {
				r->refused_checks++;
				why[sizeof(why) - 1] = 0;
				count_why(whys, &nwhys, 32, why);
			}
		}
		for (size_t i = 0; i < n; i++)
			if (kps[i])
				unregister_kprobe(kps[i]);
		r->batches_done++;
	}
	for (size_t k = 0; k < 4; k++) {
		size_t best = SIZE_MAX;
		for (size_t i = 0; i < nwhys; i++)
			if (whys[i].n && (best == SIZE_MAX || whys[i].n > whys[best].n))
				best = i;
		if (best == SIZE_MAX)
			break;
		snprintf(r->top[k], sizeof(r->top[k]), "%s", whys[best].text);
		r->topn[k] = whys[best].n;
		whys[best].n = 0;
	}
	r->secs = ei_now() - t0;
	r->ok = r->probed > 0;
	if (!r->ok)
		snprintf(r->why_not, sizeof(r->why_not), "no boundary probed");
}

static double pct(unsigned long a, unsigned long b)
{
	return b ? 100.0 * (double)a / (double)b : 0.0;
}

static int run_single(int argc, char **argv)
{
	unsigned long per_lib = 20000;
	double max_secs = 20;
	const char *names[MAX_LIBS];
	struct reach res[MAX_LIBS];
	size_t nlibs = 0;
	int rc = 0;

	for (int i = 0; i < argc; i++) {
		char *end;
		if (!strcmp(argv[i], "--max-seconds") && i + 1 < argc) {
			max_secs = strtod(argv[++i], &end);
			if (*end || max_secs <= 0)
				return 2;
		} else if (!strcmp(argv[i], "--per-lib") && i + 1 < argc) {
			per_lib = strtoul(argv[++i], &end, 10);
			if (*end)
				return 2;
		} else if (argv[i][0] == '-' || nlibs == MAX_LIBS) {
			return 2;
		} else {
			names[nlibs++] = argv[i];
		}
	}
	if (!nlibs)
		return 2;

	printf("one probe at a time: sampled boundaries, registered in batches (probes >= %d "
	       "bytes apart), counted by KPROBE_FLAG_OPTIMIZED after the optimizer ran\n", MIN_GAP);
	for (size_t l = 0; l < nlibs; l++) {
		int fd[2];
		struct reach *r = &res[l];
		memset(r, 0, sizeof(*r));
		snprintf(r->name, sizeof(r->name), "%s", names[l]);
		if (pipe(fd))
			return 1;
		pid_t pid = fork();
		if (pid == 0) {
			close(fd[0]);
			/* a hang is a finding too: bounded */
			alarm((unsigned)(max_secs * 3) + 120);
			struct reach c;
			memset(&c, 0, sizeof(c));
			single_lib(names[l], per_lib, max_secs, &c);
			if (write(fd[1], &c, sizeof(c)) != (ssize_t)sizeof(c))
				_exit(1);
			_exit(0);
		}
		close(fd[1]);
		struct reach c;
		ssize_t got = 0, k;
		while (got < (ssize_t)sizeof(c) &&
		       (k = read(fd[0], (char *)&c + got, sizeof(c) - (size_t)got)) > 0)
			got += k;
		close(fd[0]);
		int st = 0;
		waitpid(pid, &st, 0);
		if (got == (ssize_t)sizeof(c)) {
			*r = c;
		} else {
			snprintf(r->why_not, sizeof(r->why_not), "the child %s %d",
				 WIFSIGNALED(st) ? "died of signal" : "exited with",
				 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			rc = 1;
		}
		if (!r->ok) {
			printf("%-18s not measured: %s\n", r->name, r->why_not);
			continue;
		}
		printf("%-18s %-10s %7lu boundaries, every %lu: %lu probed in %lu of %lu batches, "
		       "%lu registered, %lu optimized (%.1f%%); not: %lu refused by the checks, "
		       "%lu pass them; %.1f s\n", r->name, r->how, r->nbounds, r->stride, r->probed,
		       r->batches_done, r->batches, r->registered, r->optimized,
		       pct(r->optimized, r->probed), r->refused_checks, r->held, r->secs);
		for (size_t k = 0; k < 4 && r->topn[k]; k++)
			printf("%-18s   %7lu %s\n", "", r->topn[k], r->top[k]);
	}

	unsigned long tp = 0, to = 0;
	double est = 0, all = 0;
	printf("\n| library | boundaries | probed (every Nth) | optimized | %% |\n");
	printf("|---|---:|---:|---:|---:|\n");
	for (size_t l = 0; l < nlibs; l++) {
		struct reach *r = &res[l];
		if (!r->ok) {
			printf("| %s | not measured: %s | | | |\n", r->name, r->why_not);
			continue;
		}
		printf("| %s | %lu | %lu (1/%lu) | %lu | %.1f%% |\n", r->name, r->nbounds, r->probed,
		       r->stride, r->optimized, pct(r->optimized, r->probed));
		tp += r->probed;
		to += r->optimized;
		/* a library stands for all its boundaries */
		est += (double)r->nbounds * pct(r->optimized, r->probed) / 100.0;
		all += (double)r->nbounds;
	}
	if (!tp)
		return 1;
	printf("| total (each library weighed by its boundaries) | %.0f | %lu | %lu | **%.1f%%** |\n",
	       all, tp, to, all > 0 ? 100.0 * est / all : 0.0);
	return rc;
}

/* ---- every -------------------------------------------------------------- */

/* bytes of ukprobes' executable slot memory (slots, detours, segments) */
static unsigned long slot_code_bytes(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	unsigned long lo, hi, t = 0;
	char perm[8];
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "ukprobes-slots") &&
		    sscanf(line, "%lx-%lx %7s", &lo, &hi, perm) == 3 && perm[2] == 'x')
			t += hi - lo;
	if (f)
		fclose(f);
	return t;
}

/* lea 1(%rdi),%rax; ret: the optimised single probe's target */
__asm__(".text\n"
	"	.p2align 4\n"
	"	.globl ukp_reach_target\n"
	"	.type ukp_reach_target, @function\n"
	"ukp_reach_target:\n"
	"	lea 1(%rdi), %rax\n"
	"	ret\n"
	"	.size ukp_reach_target, .-ukp_reach_target\n"
	"	int3; int3; int3; int3; int3; int3; int3; int3; int3; int3\n");
long ukp_reach_target(long);

/* ns per call of f over `calls` calls: the fastest of 20 slices */
static double ns_per_call(long (*volatile f)(long), unsigned long calls, long *sum)
{
	double best = 1e30;
	unsigned long per = calls / 20;
	for (int s = 0; s < 20; s++) {
		double t = ei_now();
		for (unsigned long i = 0; i < per; i++)
			*sum += f((long)i);
		t = ei_now() - t;
		best = t < best ? t : best;
	}
	return best * 1e9 / (double)per;
}

/* one optimised probe with ei_pre: its added ns per hit */
static double single_hit_ns(int *optimized)
{
	static struct ei_probe e;
	const unsigned long calls = 4000000;
	long sum = 0;

	memset(&e, 0, sizeof(e));
	e.addr = (unsigned long)ukp_reach_target;
	e.kp.addr = (kprobe_opcode_t *)ukp_reach_target;
	e.kp.pre_handler = ei_pre;
	double plain = ns_per_call(ukp_reach_target, calls, &sum);
	UKT_EQ(register_kprobe(&e.kp), 0);
	wait_for_kprobe_optimizer();
	*optimized = !!(e.kp.flags & KPROBE_FLAG_OPTIMIZED);
	double probed = ns_per_call(ukp_reach_target, calls, &sum);
	unsigned long hits = e.hits;
	unregister_kprobe(&e.kp);
	UKT_EQ(hits, calls / 20 * 20);
	UKT_EQ(ei_bad_ip, 0);
	/* every call returned x + 1: 2 runs of 20 slices of f(0..per-1) */
	long per = (long)(calls / 20);
	UKT_EQ(sum, 40 * (per * (per + 1) / 2));
	return probed - plain;
}

static int run_every(int list)
{
	static struct ei_sink ref, got;
	static struct ei_obj z;
	struct ei_fnset all;
	struct ei_set set;

	ei_sink_init(&ref, 256UL << 20);
	ei_sink_init(&got, 256UL << 20);
	inputs_setup();
	/* unprobed: the reference, and the fastest of three runs */
	double unprobed = 1e30;
	for (int i = 0; i < 3; i++) {
		struct ei_sink *s = i ? &got : &ref;
		ei_sink_reset(s);
		calls = 0;
		double t = ei_now();
		wl_every(s);
		t = ei_now() - t;
		unprobed = t < unprobed ? t : unprobed;
		if (i)
			ei_sink_expect_same(&ref, &got, "unprobed rerun");
	}

	warm_up();
	int single_opt = 0;
	double one = single_hit_ns(&single_opt);

	ei_obj_load(&z, "libz.so", 1);
	all.n = z.nfns;
	all.v = malloc(z.nfns * sizeof(*all.v));
	UKT_ASSERT(all.v);
	for (size_t i = 0; i < z.nfns; i++)
		all.v[i] = &z.fns[i];
	ei_set_build(&set, &z, all, 0, NULL, 0, 0);
	double t0 = ei_now();
	ei_set_register(&set);
	double t1 = ei_now();
	wait_for_kprobe_optimizer();
	double t2 = ei_now();
	size_t opt = 0;
	for (size_t i = 0; i < set.n; i++)
		opt += !!(set.pr[i].kp.flags & KPROBE_FLAG_OPTIMIZED);
	unsigned long code = slot_code_bytes();
	printf("every instruction of libz: %zu functions, %zu probes registered in %.2f s, "
	       "optimizer done %.2f s later: %zu optimized (%.1f%%)\n", z.nfns, set.n, t1 - t0,
	       t2 - t1, opt, pct(opt, set.n));
	/*
	 * Why the others are not, as the optimizer tells it: the checks
	 * refuse the probe's own region, or a condition of the moment keeps
	 * it a breakpoint (a punned jump whose bytes hold a neighbour's
	 * probe, a probe on dead padding under another's jump, which never
	 * runs).  And the most runs can reach: walking each function, a
	 * probe whose checks pass taking every probe its 5 bytes cover.
	 */
	struct why_count whys[32];
	size_t nwhys = 0, by_runs = 0;
	for (size_t i = 0; i < set.n;) {
		char why[256] = "";
		int ok = ukp_opt_check(set.pr[i].addr, why, sizeof(why)) == 0;
		size_t j = i + 1;
		if (ok)
			while (j < set.n && set.pr[j].fn == set.pr[i].fn &&
			       set.pr[j].addr < set.pr[i].addr + UKP_ARCH_JMP_LEN)
				j++;
		if (ok)
			by_runs += j - i;
		i = j;
	}
	/* each probe left a breakpoint by the optimizer's reason (what
	 * UKPROBES_VERBOSE=1 says), its offsets left out */
	for (size_t i = 0; i < set.n; i++) {
		char text[160];
		if (!(set.pr[i].kp.flags & KPROBE_FLAG_OPTIMIZED))
			add_text(whys, &nwhys, 32, why_not(set.pr[i].addr, text, sizeof(text)), 1);
	}
	printf("  not optimized, by the optimizer's reason:");
	for (size_t i = 0; i < nwhys; i++)
		printf("%s %lu %s", i ? ";" : "", whys[i].n, whys[i].text);
	printf("\n  the most runs can reach (a probe whose checks pass taking the probes its "
	       "jump covers): %zu (%.1f%%)\n", by_runs, pct(by_runs, set.n));

	ei_set_zero(&set);
	ei_sink_reset(&got);
	calls = 0;
	double t = ei_now();
	wl_every(&got);
	t = ei_now() - t;
	ei_set_snapshot(&set);
	ei_sink_expect_same(&ref, &got, "probed run");
	ei_set_check(&set, 0);
	size_t distinct;
	unsigned long hits = ei_set_total(&set, &distinct);
	unsigned long ohits = 0;
	for (size_t i = 0; i < set.n; i++)
		if (set.pr[i].kp.flags & KPROBE_FLAG_OPTIMIZED)
			ohits += set.snap[i];
	/* the hits that trapped, by why their probe is a breakpoint */
	struct why_count trapped[32];
	size_t ntrapped = 0;
	unsigned long thits = 0;
	for (size_t i = 0; i < set.n; i++) {
		if ((set.pr[i].kp.flags & KPROBE_FLAG_OPTIMIZED) || !set.snap[i])
			continue;
		char text[160];
		add_text(trapped, &ntrapped, 32, why_not(set.pr[i].addr, text, sizeof(text)),
			 set.snap[i]);
		thits += set.snap[i];
	}
	/* --list: every probe left a breakpoint, by its file address; its
	 * own region's checks beside the optimizer's reason */
	for (size_t i = 0; list && i < set.n; i++) {
		if (set.pr[i].kp.flags & KPROBE_FLAG_OPTIMIZED)
			continue;
		char why[160] = "", check[256] = "";
		(void)ukp_opt_why_not(set.pr[i].addr, why, sizeof(why));
		(void)ukp_opt_check(set.pr[i].addr, check, sizeof(check));
		const struct ei_fn *f = set.fns.v[set.pr[i].fn];
		printf("  breakpoint %#lx %s+%#lx: %lu hits; %s; checks: %s\n",
		       set.pr[i].addr - z.bias, f->name, set.pr[i].addr - f->start, set.snap[i],
		       why, check);
	}
	ei_set_unregister(&set);
	UKT_ASSERT(hits > 0);
	double per = (t - unprobed) * 1e9 / (double)hits;
	printf("workload (tests/real/zlibwork.h wl_every): unprobed %.3f s, probed %.3f s, "
	       "%lu hits on %zu instructions (%.1f%% of the hits on optimized probes): "
	       "%.0f ns added per hit, %.0f ns per hit all told\n", unprobed, t, hits, distinct,
	       pct(ohits, hits), per, t * 1e9 / (double)hits);
	printf("  hits that trapped: %lu", thits);
	for (size_t i = 0; i < ntrapped; i++)
		printf("; %lu %s", trapped[i].n, trapped[i].text);
	printf("\n");
	printf("one optimized probe, the same handler: %.2f ns per hit%s\n", one,
	       single_opt ? "" : " (NOT optimized: the ratio is meaningless)");

	printf("\n| every instruction of libz | figure | goal |\n");
	printf("|---|---:|---:|\n");
	printf("| probes optimized | %zu / %zu = **%.1f%%** | >= 80%% |\n", opt, set.n,
	       pct(opt, set.n));
	printf("| ukprobes' code memory (slots, detours, segments), MiB | %.1f | |\n",
	       (double)code / (1 << 20));
	printf("| hits on optimized probes | %.1f%% | |\n", pct(ohits, hits));
	printf("| hits that trapped (on breakpoints) | %lu | |\n", thits);
	printf("| the most runs can reach (walking each function) | %.1f%% | |\n",
	       pct(by_runs, set.n));
	printf("| workload, ns added per hit ((probed - unprobed) / %lu hits) | %.0f | |\n", hits,
	       per);
	printf("| one optimized probe's hit, same handler, ns | %.2f | |\n", one);
	printf("| ratio | **%.1f x** | <= 10 x |\n", one > 0 ? per / one : 0.0);
	return single_opt ? 0 : 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: ukp-reach single [--max-seconds S] [--per-lib N] LIBRARY...\n"
			"       ukp-reach every [--list]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && !strcmp(argv[1], "single")) {
		int rc = run_single(argc - 2, argv + 2);
		if (rc == 2)
			usage();
		return rc;
	}
	if (argc >= 2 && argc <= 3 && !strcmp(argv[1], "every") &&
	    (argc == 2 || !strcmp(argv[2], "--list")))
		return run_every(argc == 3);
	usage();
}
