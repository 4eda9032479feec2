/* SPDX-License-Identifier: MIT */
/*
 * ftrace-real: function hooks on real code nobody here wrote.
 *
 * Debian's zlib1g-dev (a build dependency: scripts/install-deps) ships
 * zlib's example programs as C source in /usr/share/doc/zlib1g-dev/
 * examples.  Each case compiles one of them at run time, with the
 * compiler that builds ukprobes, into a shared object with patch sites
 * (-fpatchable-function-entry=5, or -pg -mfentry -mrecord-mcount), loads
 * it and traces every function of it with a filter "<object>:*":
 *
 *   - enough.c (Mark Adler): counts the prefix codes inflate can meet and
 *     finds the largest decoding table they need.  Deeply recursive
 *     (count, been_here, examine), a few hundred thousand calls per run.
 *     Its answers for (30, 6, 15) and (286, 9, 15) are zlib's own
 *     ENOUGH_DISTS = 592 and ENOUGH_LENS = 852 (inftrees.h); the traced
 *     run must print exactly what the untraced run prints.  An oracle
 *     counts calls independently: the object is also built with
 *     -finstrument-functions (and -fno-inline, so that every call of a
 *     function is a call of its entry), whose __cyg_profile_func_enter
 *     this program defines.  Every function's hits must equal its
 *     __cyg_profile_func_enter count, for two ops at once (one with
 *     pt_regs).
 *   - zran.c (Mark Adler): random access into a gzip stream through an
 *     index of access points, over real zlib (libz.so.1).  Threads extract
 *     random ranges of 4 MiB of text and compare them with the original
 *     while the main thread registers and unregisters an ops on every
 *     function of the object, and live-patches deflate_index_extract()
 *     to a replacement of ours (IPMODIFY) and back: every range is right,
 *     every call in a stable phase traced (or redirected) exactly once.
 *
 * Cases:
 *   enough_pf_exact, enough_fe_exact   the oracle builds: exact counts of
 *                                      every function, outputs identical
 *   enough_pf_O2                       plain -O2 (inlining as a project
 *                                      builds it): outputs identical, the
 *                                      counts the same in two traced runs
 *   zran_pf_threads, zran_fe_threads   zran under churn and live patching
 *
 * If the sources are not there (a system without zlib1g-dev's examples),
 * the cases say so and pass: they test ukprobes, not the machine.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include "ukt.h"

#define EXAMPLES "/usr/share/doc/zlib1g-dev/examples"

/* ---- building a real source file at run time ----------------------------------------- */

static char dir[64];

/* Copy EXAMPLES/name (or name.gz: gzread reads both) into dir. */
static bool fetch_source(const char *name)
{
	char src[256], dst[256];
	gzFile in = NULL;
	snprintf(src, sizeof(src), EXAMPLES "/%s", name);
	if (access(src, R_OK) == 0) {
		in = gzopen(src, "rb");
	} else {
		snprintf(src, sizeof(src), EXAMPLES "/%s.gz", name);
		if (access(src, R_OK) == 0)
			in = gzopen(src, "rb");
	}
	if (!in)
		return false;
	snprintf(dst, sizeof(dst), "%s/%s", dir, name);
	FILE *out = fopen(dst, "w");
	UKT_ASSERT(out);
	char buf[8192];
	int n;
	while ((n = gzread(in, buf, sizeof(buf))) > 0)
		UKT_EQ(fwrite(buf, 1, (size_t)n, out), n);
	UKT_ASSERT(n == 0);
	gzclose(in);
	UKT_EQ(fclose(out), 0);
	return true;
}

/* The sources, into dir; false: not on this machine. */
static bool sources(const char *const *names, int n)
{
	for (int i = 0; i < n; i++) {
		if (!fetch_source(names[i])) {
			printf("  skipped: %s/%s is not on this machine (zlib1g-dev's examples)\n",
			       EXAMPLES, names[i]);
			return false;
		}
	}
	return true;
}

/*
 * Run a case in a child, in a fresh directory the parent removes
 * whatever the child's fate (a failing case _exit()s where it fails).
 */
static void in_dir(void (*body)(void))
{
	strcpy(dir, "/tmp/ukt-ftrace-real-XXXXXX");
	UKT_ASSERT(mkdtemp(dir));
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	UKT_ASSERT(pid >= 0);
	if (pid == 0) {
		body();
		fflush(stdout);
		_exit(0);
	}
	int status;
	UKT_EQ(waitpid(pid, &status, 0), pid);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "  could not remove %s\n", dir);
	if (WIFSIGNALED(status))
		UKT_FAIL("killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	UKT_ASSERT(WIFEXITED(status));
	UKT_EQ(WEXITSTATUS(status), 0);
}

/* cc <flags> -fPIC -shared -o dir/out dir/src <libs>; the path of the object */
static const char *build(const char *src, const char *out, const char *flags, const char *libs)
{
	static char path[128];
	char cmd[1024];
	snprintf(path, sizeof(path), "%s/%s", dir, out);
	snprintf(cmd, sizeof(cmd),
		 "cc %s -fPIC -shared -I'%s' -o '%s' '%s/%s' %s > '%s/cc.log' 2>&1",
		 flags, dir, path, dir, src, libs, dir);
	if (system(cmd)) {
		char log[256];
		snprintf(log, sizeof(log), "%s/cc.log", dir);
		FILE *f = fopen(log, "r");
		char line[512];
		while (f && fgets(line, sizeof(line), f))
			fprintf(stderr, "  cc: %s", line);
		if (f)
			fclose(f);
		UKT_FAIL("could not build %s: %s", out, cmd);
	}
	return path;
}

/* ---- the object's patch sites, from ftrace_available_functions() ------------------------ */

struct fn { unsigned long addr; char name[64]; };
static struct fn fns[64];
static int nfns;

/* The sites of object `obj` (its base name), as the listing gives them. */
static void list_sites(const char *obj)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	UKT_ASSERT(f);
	int n = ftrace_available_functions(f);
	UKT_EQ(fclose(f), 0);
	UKT_ASSERT(n > 0);
	nfns = 0;
	char want[128];
	snprintf(want, sizeof(want), "[%s]", obj);
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		unsigned long a;
		char name[64], o[128];
		if (sscanf(line, "%lx %63s %127s", &a, name, o) != 3 || strcmp(o, want))
			continue;
		UKT_ASSERT(nfns < 64);
		fns[nfns].addr = a;
		snprintf(fns[nfns].name, sizeof(fns[nfns].name), "%s", name);
		nfns++;
	}
	free(buf);
	UKT_ASSERT(nfns > 0);
}

static int fn_at(unsigned long site)
{
	for (int i = 0; i < nfns; i++)
		if (fns[i].addr == site)
			return i;
	return -1;
}

static int fn_named(const char *name)
{
	for (int i = 0; i < nfns; i++)
		if (!strcmp(fns[i].name, name))
			return i;
	return -1;
}

/* ---- counters ------------------------------------------------------------------------ */

static unsigned long bad_ip, bad_regs;

/* hits per site, per ops; the oracle's entries per function */
#define NOPS 2
static unsigned long hits[NOPS][64];
static unsigned long cyg[64];
static int cyg_on;

static void cb_count(unsigned long ip, unsigned long parent, struct ftrace_ops *op,
		     struct pt_regs *regs)
{
	int k = (int)(long)op->private;
	int i = fn_at(ip);
	if (i < 0) {
		__atomic_fetch_add(&bad_ip, 1, __ATOMIC_RELAXED);
		return;
	}
	if (regs && (regs->ip != ip || *(unsigned long *)regs->sp != parent))
		__atomic_fetch_add(&bad_regs, 1, __ATOMIC_RELAXED);
	if (k == 1 && !regs)
		__atomic_fetch_add(&bad_regs, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&hits[k][i], 1, __ATOMIC_RELAXED);
}

/*
 * -finstrument-functions: the compiled object calls these at every
 * function's entry and exit (with the function's address).  Exported
 * (the tests link with -rdynamic); not themselves instrumented.
 */
__attribute__((no_instrument_function, used)) void __cyg_profile_func_enter(void *fn,
									     void *caller)
{
	(void)caller;
	if (!__atomic_load_n(&cyg_on, __ATOMIC_RELAXED))
		return;
	const unsigned char *b = fn;
	unsigned long site = (unsigned long)fn;
	if (b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa)
		site += 4;	/* endbr64 */
	int i = fn_at(site);
	if (i < 0)
		__atomic_fetch_add(&bad_ip, 1, __ATOMIC_RELAXED);
	else
		__atomic_fetch_add(&cyg[i], 1, __ATOMIC_RELAXED);
}

__attribute__((no_instrument_function, used)) void __cyg_profile_func_exit(void *fn,
									    void *caller)
{
	(void)fn;
	(void)caller;
}

static void zero_counts(void)
{
	memset(hits, 0, sizeof(hits));
	memset(cyg, 0, sizeof(cyg));
}

static void set_object_filter(struct ftrace_ops *ops, const char *obj)
{
	char f[160];
	snprintf(f, sizeof(f), "%s:*", obj);
	UKT_EQ(ftrace_set_filter(ops, (unsigned char *)f, (int)strlen(f), 1), 0);
}

/* ---- enough.c ----------------------------------------------------------------------- */

typedef int (*main_fn)(int, char **);

/* What main(argc, argv) prints on stdout. */
static char *run_main(main_fn m, const char *a1, const char *a2, const char *a3)
{
	char *argv[] = { "enough", (char *)a1, (char *)a2, (char *)a3, NULL };
	FILE *tmp = tmpfile();
	UKT_ASSERT(tmp);
	fflush(stdout);
	int saved = dup(1);
	UKT_ASSERT(saved >= 0);
	UKT_ASSERT(dup2(fileno(tmp), 1) == 1);
	int rc = m(4, argv);
	fflush(stdout);
	UKT_ASSERT(dup2(saved, 1) == 1);
	close(saved);
	UKT_EQ(rc, 0);
	long n = ftell(tmp);
	UKT_ASSERT(n > 0);
	char *out = calloc(1, (size_t)n + 1);
	UKT_ASSERT(out);
	rewind(tmp);
	UKT_EQ(fread(out, 1, (size_t)n, tmp), n);
	fclose(tmp);
	return out;
}

static void expect_same(const char *what, const char *got, const char *want)
{
	if (strcmp(got, want))
		UKT_FAIL("%s: the traced run printed\n%s\ninstead of\n%s", what, got, want);
}

/* the arguments each run uses; the first two answers are zlib's constants */
static const char *const runs[][4] = {
	{ "30", "6", "15", "maximum of 592 table entries for root = 6" },	/* ENOUGH_DISTS */
	{ "120", "9", "15", NULL },
	{ "75", "7", "12", NULL },
};
#define NRUNS 3

static void enough_exact(const char *flags, const char *obj)
{
	static const char *const src[] = { "enough.c" };
	if (!sources(src, 1))
		return;
	char f[512];
	snprintf(f, sizeof(f), "-O2 -fno-inline -finstrument-functions -Dmain=enough_main %s",
		 flags);
	const char *path = build("enough.c", obj, f, "");
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		UKT_FAIL("dlopen %s: %s", path, dlerror());
	main_fn m = (main_fn)dlsym(h, "enough_main");
	UKT_ASSERT(m);
	list_sites(obj);
	UKT_ASSERT(fn_named("count") >= 0 && fn_named("examine") >= 0 &&
		   fn_named("been_here") >= 0 && fn_named("enough_main") >= 0);

	/* untraced: the reference, and the oracle's counts */
	char *ref[NRUNS];
	unsigned long ref_cyg[NRUNS][64];
	for (int r = 0; r < NRUNS; r++) {
		zero_counts();
		__atomic_store_n(&cyg_on, 1, __ATOMIC_RELAXED);
		ref[r] = run_main(m, runs[r][0], runs[r][1], runs[r][2]);
		__atomic_store_n(&cyg_on, 0, __ATOMIC_RELAXED);
		memcpy(ref_cyg[r], cyg, sizeof(cyg));
		if (runs[r][3] && !strstr(ref[r], runs[r][3]))
			UKT_FAIL("enough %s %s %s printed\n%s\nwithout \"%s\"", runs[r][0],
				 runs[r][1], runs[r][2], ref[r], runs[r][3]);
		for (int i = 0; i < 64; i++)
			UKT_EQ(hits[0][i] + hits[1][i], 0);
	}
	UKT_ASSERT(ref_cyg[1][fn_named("count")] > 100000);

	/* traced by two ops at once: one plain, one with pt_regs */
	static struct ftrace_ops a = { .func = cb_count, .private = (void *)0L };
	static struct ftrace_ops b = { .func = cb_count, .private = (void *)1L,
				       .flags = FTRACE_OPS_FL_SAVE_REGS };
	set_object_filter(&a, obj);
	set_object_filter(&b, obj);
	UKT_EQ(register_ftrace_function(&a), 0);
	UKT_EQ(register_ftrace_function(&b), 0);
	for (int r = 0; r < NRUNS; r++) {
		zero_counts();
		__atomic_store_n(&cyg_on, 1, __ATOMIC_RELAXED);
		char *out = run_main(m, runs[r][0], runs[r][1], runs[r][2]);
		__atomic_store_n(&cyg_on, 0, __ATOMIC_RELAXED);
		expect_same(runs[r][0], out, ref[r]);
		free(out);
		for (int i = 0; i < nfns; i++) {
			if (cyg[i] != ref_cyg[r][i] || hits[0][i] != cyg[i] || hits[1][i] != cyg[i])
				UKT_FAIL("enough %s %s %s, %s: %lu calls (untraced %lu), "
					 "hits %lu and %lu", runs[r][0], runs[r][1], runs[r][2],
					 fns[i].name, cyg[i], ref_cyg[r][i], hits[0][i], hits[1][i]);
		}
		UKT_EQ(hits[0][fn_named("enough_main")], 1);
	}
	UKT_EQ(unregister_ftrace_function(&b), 0);

	/* one ops left: the plain trampoline */
	zero_counts();
	__atomic_store_n(&cyg_on, 1, __ATOMIC_RELAXED);
	char *out = run_main(m, runs[1][0], runs[1][1], runs[1][2]);
	__atomic_store_n(&cyg_on, 0, __ATOMIC_RELAXED);
	expect_same(runs[1][0], out, ref[1]);
	free(out);
	for (int i = 0; i < nfns; i++) {
		UKT_EQ(hits[0][i], ref_cyg[1][i]);
		UKT_EQ(hits[1][i], 0);
	}
	UKT_EQ(unregister_ftrace_function(&a), 0);

	/* and none */
	zero_counts();
	out = run_main(m, runs[0][0], runs[0][1], runs[0][2]);
	expect_same(runs[0][0], out, ref[0]);
	free(out);
	for (int i = 0; i < nfns; i++)
		UKT_EQ(hits[0][i] + hits[1][i], 0);
	UKT_EQ(bad_ip, 0);
	UKT_EQ(bad_regs, 0);
	for (int r = 0; r < NRUNS; r++)
		free(ref[r]);
	UKT_EQ(dlclose(h), 0);
}

static void enough_pf_exact(void)
{
	enough_exact("-fpatchable-function-entry=5", "libenough_pf.so");
}
UKT_CASE_T(enough_pf_exact, 120) { in_dir(enough_pf_exact); }

static void enough_fe_exact(void)
{
	enough_exact("-pg -mfentry -mrecord-mcount", "libenough_fe.so");
}
UKT_CASE_T(enough_fe_exact, 120) { in_dir(enough_fe_exact); }

/* -O2 as a project builds it: inlining, no oracle */
static void enough_pf_O2(void)
{
	static const char *const src[] = { "enough.c" };
	static const char obj[] = "libenough_o2.so";
	if (!sources(src, 1))
		return;
	const char *path = build("enough.c", obj,
				 "-O2 -fpatchable-function-entry=5 -Dmain=enough_main", "");
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		UKT_FAIL("dlopen %s: %s", path, dlerror());
	main_fn m = (main_fn)dlsym(h, "enough_main");
	UKT_ASSERT(m);
	list_sites(obj);
	int em = fn_named("enough_main");
	UKT_ASSERT(em >= 0);

	/* the deflate literal/length code: zlib's ENOUGH_LENS, untraced */
	char *ref_big = run_main(m, "286", "9", "15");
	if (!strstr(ref_big, "maximum of 852 table entries for root = 9"))
		UKT_FAIL("enough 286 9 15 printed\n%s\nwithout ENOUGH_LENS = 852", ref_big);
	free(ref_big);
	char *ref[NRUNS];
	for (int r = 0; r < NRUNS; r++)
		ref[r] = run_main(m, runs[r][0], runs[r][1], runs[r][2]);

	static struct ftrace_ops a = { .func = cb_count, .private = (void *)0L };
	set_object_filter(&a, obj);
	UKT_EQ(register_ftrace_function(&a), 0);
	unsigned long first[NRUNS][64];
	for (int pass = 0; pass < 2; pass++) {
		for (int r = 0; r < NRUNS; r++) {
			zero_counts();
			char *out = run_main(m, runs[r][0], runs[r][1], runs[r][2]);
			expect_same(runs[r][0], out, ref[r]);
			free(out);
			UKT_EQ(hits[0][em], 1);
			unsigned long total = 0;
			for (int i = 0; i < nfns; i++) {
				total += hits[0][i];
				if (pass && hits[0][i] != first[r][i])
					UKT_FAIL("%s: %lu hits, %lu in the same run before",
						 fns[i].name, hits[0][i], first[r][i]);
			}
			UKT_ASSERT(total > 1);
			memcpy(first[r], hits[0], sizeof(first[r]));
		}
	}
	UKT_EQ(unregister_ftrace_function(&a), 0);
	zero_counts();
	char *out = run_main(m, runs[1][0], runs[1][1], runs[1][2]);
	expect_same(runs[1][0], out, ref[1]);
	free(out);
	for (int i = 0; i < nfns; i++)
		UKT_EQ(hits[0][i], 0);
	UKT_EQ(bad_ip, 0);
	for (int r = 0; r < NRUNS; r++)
		free(ref[r]);
	UKT_EQ(dlclose(h), 0);
}
UKT_CASE_T(enough_pf_O2, 120) { in_dir(enough_pf_O2); }

/* ---- zran.c ------------------------------------------------------------------------- */

struct deflate_index;		/* zran.h: the index is opaque here */
typedef int (*build_fn)(FILE *in, off_t span, struct deflate_index **built);
typedef void (*free_fn)(struct deflate_index *index);
typedef int (*extract_fn)(FILE *in, struct deflate_index *index, off_t offset,
			  unsigned char *buf, int len);

#define DATA_LEN (4 << 20)
#define NTHREADS 3

static unsigned char *data;		/* the uncompressed text */
static char gz_path[128];
static struct deflate_index *zindex;
static extract_fn z_extract;
static unsigned long phase;		/* odd while the main thread changes something */
static int stop;
static unsigned long thread_calls, real_calls, wrong, inexact, too_many;
static __thread unsigned long tl_hits, tl_fake;

static void make_data(void)
{
	static const char *const words[] = {
		"inflate", "deflate", "window", "literal", "length", "distance", "code",
		"huffman", "table", "root", "prefix", "symbol", "stream", "block", "the",
		"of", "and", "a", "\n",
	};
	uint64_t s = 42;
	data = malloc(DATA_LEN);
	UKT_ASSERT(data);
	for (size_t i = 0; i < DATA_LEN;) {
		const char *w = words[ukt_xorshift(&s) % (sizeof(words) / sizeof(words[0]))];
		for (; *w && i < DATA_LEN; w++)
			data[i++] = (unsigned char)*w;
		if (i < DATA_LEN)
			data[i++] = ukt_xorshift(&s) % 7 ? ' ' : (unsigned char)('0' + ukt_xorshift(&s) % 10);
	}
	/* as gzip (windowBits 15 + 16), with zlib */
	snprintf(gz_path, sizeof(gz_path), "%s/data.gz", dir);
	z_stream zs = { 0 };
	UKT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
	uLong cap = deflateBound(&zs, DATA_LEN);
	unsigned char *gz = malloc(cap);
	UKT_ASSERT(gz);
	zs.next_in = data;
	zs.avail_in = DATA_LEN;
	zs.next_out = gz;
	zs.avail_out = (uInt)cap;
	UKT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
	FILE *f = fopen(gz_path, "wb");
	UKT_ASSERT(f);
	UKT_EQ(fwrite(gz, 1, zs.total_out, f), zs.total_out);
	UKT_EQ(fclose(f), 0);
	deflateEnd(&zs);
	free(gz);
}

/* The live patch: deflate_index_extract() served from memory. */
static int fake_extract(FILE *in, struct deflate_index *index, off_t offset, unsigned char *buf,
			int len)
{
	(void)in;
	(void)index;
	tl_fake++;
	if (offset >= DATA_LEN)
		return 0;
	if (len > DATA_LEN - offset)
		len = (int)(DATA_LEN - offset);
	memcpy(buf, data + offset, (size_t)len);
	return len;
}

static int extract_site = -1;

static void cb_zran(unsigned long ip, unsigned long parent, struct ftrace_ops *op,
		    struct pt_regs *regs)
{
	(void)parent;
	int k = (int)(long)op->private;
	int i = fn_at(ip);
	if (i < 0) {
		__atomic_fetch_add(&bad_ip, 1, __ATOMIC_RELAXED);
		return;
	}
	__atomic_fetch_add(&hits[k][i], 1, __ATOMIC_RELAXED);
	if (i == extract_site && k == 0)
		tl_hits++;
	if (k == 1) {		/* the live patch */
		if (!regs || i != extract_site)
			__atomic_fetch_add(&bad_regs, 1, __ATOMIC_RELAXED);
		else
			regs->ip = (unsigned long)fake_extract;
	}
}

/* state of the stable phase: bit 0 counting ops on, bit 1 live patch on */
static int stable_state;

static void *extractor(void *arg)
{
	uint64_t s = 1000 + (uint64_t)(long)arg;
	FILE *in = fopen(gz_path, "rb");
	unsigned char *buf = malloc(1 << 16);
	UKT_ASSERT(in && buf);
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		off_t off = (off_t)(ukt_xorshift(&s) % (DATA_LEN + 1000));
		int len = 1 + (int)(ukt_xorshift(&s) % (1 << 16));
		unsigned long p1 = __atomic_load_n(&phase, __ATOMIC_SEQ_CST);
		int state = __atomic_load_n(&stable_state, __ATOMIC_SEQ_CST);
		unsigned long h0 = tl_hits, f0 = tl_fake;
		int got = z_extract(in, zindex, off, buf, len);
		unsigned long p2 = __atomic_load_n(&phase, __ATOMIC_SEQ_CST);
		unsigned long dh = tl_hits - h0, df = tl_fake - f0;
		int want = off >= DATA_LEN ? 0 : (int)(len < DATA_LEN - off ? len : DATA_LEN - off);
		if (got != want || memcmp(buf, data + off, (size_t)(want > 0 ? want : 0)))
			__atomic_fetch_add(&wrong, 1, __ATOMIC_RELAXED);
		if (dh > 1 || df > 1)
			__atomic_fetch_add(&too_many, 1, __ATOMIC_RELAXED);
		if (p1 == p2 && !(p1 & 1) &&
		    (dh != (unsigned long)(state & 1) || df != (unsigned long)(state >> 1 & 1))) {
			unsigned n = (unsigned)__atomic_fetch_add(&inexact, 1, __ATOMIC_RELAXED);
			if (n < 4)
				fprintf(stderr, "  phase %lu, state %d: counted %lu, redirected %lu\n",
					p1, state, dh, df);
		}
		__atomic_fetch_add(&thread_calls, 1, __ATOMIC_RELAXED);
		if (!df)
			__atomic_fetch_add(&real_calls, 1, __ATOMIC_RELAXED);
	}
	free(buf);
	fclose(in);
	return NULL;
}

static void zran_threads(const char *flags, const char *obj)
{
	static const char *const src[] = { "zran.c", "zran.h" };
	if (!sources(src, 2))
		return;
	char f[256];
	snprintf(f, sizeof(f), "-O2 %s", flags);
	const char *path = build("zran.c", obj, f, "-lz");
	make_data();
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		UKT_FAIL("dlopen %s: %s", path, dlerror());
	build_fn z_build = (build_fn)dlsym(h, "deflate_index_build");
	free_fn z_free = (free_fn)dlsym(h, "deflate_index_free");
	z_extract = (extract_fn)dlsym(h, "deflate_index_extract");
	UKT_ASSERT(z_build && z_free && z_extract);
	list_sites(obj);
	extract_site = fn_named("deflate_index_extract");
	int build_site = fn_named("deflate_index_build");
	UKT_ASSERT(extract_site >= 0 && build_site >= 0);

	/* the index, built traced: one call of the builder */
	static struct ftrace_ops count = { .func = cb_zran, .private = (void *)0L };
	static struct ftrace_ops patch = { .func = cb_zran, .private = (void *)1L,
					   .flags = FTRACE_OPS_FL_SAVE_REGS |
						    FTRACE_OPS_FL_IPMODIFY };
	set_object_filter(&count, obj);
	UKT_EQ(ftrace_set_filter(&patch, (unsigned char *)"deflate_index_extract",
				 (int)strlen("deflate_index_extract"), 1), 0);
	UKT_EQ(register_ftrace_function(&count), 0);
	FILE *in = fopen(gz_path, "rb");
	UKT_ASSERT(in);
	int points = z_build(in, 256 << 10, &zindex);
	UKT_ASSERT(points >= 8);
	UKT_EQ(hits[0][build_site], 1);
	UKT_EQ(fclose(in), 0);
	zero_counts();

	/* churn: the counting ops and the live patch come and go */
	uint64_t s = 7;
	int state = 1, rounds = 0;	/* the counting ops only */
	__atomic_store_n(&stable_state, state, __ATOMIC_SEQ_CST);
	pthread_t th[NTHREADS];
	for (long i = 0; i < NTHREADS; i++)
		UKT_EQ(pthread_create(&th[i], NULL, extractor, (void *)i), 0);
	double end = ukt_now() + 1.5;
	for (; rounds < 300 && ukt_now() < end; rounds++) {
		/* the patch stays one round at most (it is quick: the real
		 * extraction should run most of the time) */
		int flip = state & 2 || !(ukt_xorshift(&s) & 3) ? 2 : 1;
		__atomic_fetch_add(&phase, 1, __ATOMIC_SEQ_CST);
		struct ftrace_ops *ops = flip == 1 ? &count : &patch;
		if (state & flip)
			UKT_EQ(unregister_ftrace_function(ops), 0);
		else
			UKT_EQ(register_ftrace_function(ops), 0);
		state ^= flip;
		__atomic_store_n(&stable_state, state, __ATOMIC_SEQ_CST);
		__atomic_fetch_add(&phase, 1, __ATOMIC_SEQ_CST);
		unsigned long c0 = __atomic_load_n(&thread_calls, __ATOMIC_RELAXED);
		double until = ukt_now() + 0.02;
		while (__atomic_load_n(&thread_calls, __ATOMIC_RELAXED) - c0 < 2 * NTHREADS &&
		       ukt_now() < until)
			sched_yield();
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < NTHREADS; i++)
		UKT_EQ(pthread_join(th[i], NULL), 0);
	if (state & 1)
		UKT_EQ(unregister_ftrace_function(&count), 0);
	if (state & 2)
		UKT_EQ(unregister_ftrace_function(&patch), 0);
	printf("  %d access points; %d rounds, %lu extractions (%lu by zran, the others patched)\n",
	       points, rounds, thread_calls, real_calls);
	if (wrong || inexact || too_many || bad_ip || bad_regs)
		UKT_FAIL("%lu wrong extractions, %lu not traced as the stable phase says, "
			 "%lu traced twice, %lu hits outside the object, %lu bad pt_regs",
			 wrong, inexact, too_many, bad_ip, bad_regs);
	/* only the functions the workload calls were hit */
	for (int i = 0; i < nfns; i++)
		if (i != extract_site)
			UKT_EQ(hits[0][i], 0);

	/* untraced again: the real function, no callback */
	unsigned char buf[4096];
	in = fopen(gz_path, "rb");
	UKT_ASSERT(in);
	zero_counts();
	UKT_EQ(z_extract(in, zindex, DATA_LEN / 3, buf, sizeof(buf)), (int)sizeof(buf));
	UKT_ASSERT(!memcmp(buf, data + DATA_LEN / 3, sizeof(buf)));
	UKT_EQ(hits[0][extract_site] + hits[1][extract_site], 0);
	UKT_EQ(fclose(in), 0);
	z_free(zindex);
	UKT_EQ(dlclose(h), 0);
	free(data);
}

static void zran_pf_threads(void)
{
	zran_threads("-fpatchable-function-entry=5", "libzran_pf.so");
}
UKT_CASE_T(zran_pf_threads, 60) { in_dir(zran_pf_threads); }

static void zran_fe_threads(void)
{
	zran_threads("-pg -mfentry -mrecord-mcount", "libzran_fe.so");
}
UKT_CASE_T(zran_fe_threads, 60) { in_dir(zran_fe_threads); }
