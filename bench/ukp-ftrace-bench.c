/* SPDX-License-Identifier: MIT */
/*
 * ukp-ftrace-bench: per-call cost of ftrace hooks with an empty callback,
 * beside the same-run floors: the plain call (the patch site a nop),
 * -finstrument-functions with empty hooks, and the site patched by hand
 * to call a stub that saves the caller-saved registers and returns (what
 * any entry hook must at least do).  `--pg-child` is the loop alone, for
 * `uftrace record` on the -pg build (scripts/bench runs it when uftrace is
 * installed).
 *
 * Rows: call, instr, stub, one (one ops, no SAVE_REGS), regs (one ops,
 * SAVE_REGS), three (three ops), empty (one ops whose callback does
 * nothing at all: what an empty hook costs; every other hook row's callback
 * counts its calls, which costs a memory increment per call and lets the
 * row check it ran exactly once per call - the empty row instead checks
 * that the site is patched and listed enabled with one callback, before
 * and after its runs), each -r runs of -n calls: the median,
 * and the fastest run, which the differences and ratios use (on a shared
 * virtual machine the median of a few nanoseconds moves by a third from
 * one run to the next; the fastest run is what the code costs).  As in
 * ukp-bench, a run's calls are timed in SLICES slices and the run counts
 * its fastest slice: the VM's slow spells last tens of milliseconds, as
 * long as a whole run, and would otherwise make every run of a row slow
 * by chance.  Every row is timed the same way.  Every hook row checks
 * its callback ran exactly once per call.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <ukprobes.h>

int bt_pfe(int x);
int bt_instr(int x);
int bt_pg(int x);

/* -finstrument-functions: empty hooks (not instrumented themselves) */
__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void *f, void *c)
{
	(void)f;
	(void)c;
}
__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void *f, void *c)
{
	(void)f;
	(void)c;
}

/* the floor: a stub that saves what a C call may clobber and returns */
__asm__(".text\n.globl bt_floor_stub\nbt_floor_stub:\n"
	"push %rax\npush %rcx\npush %rdx\npush %rsi\npush %rdi\n"
	"push %r8\npush %r9\npush %r10\npush %r11\n"
	"pop %r11\npop %r10\npop %r9\npop %r8\npop %rdi\n"
	"pop %rsi\npop %rdx\npop %rcx\npop %rax\nret\n");
void bt_floor_stub(void);

static long n_calls = 2000000;
static int runs = 21;
/* a counter per ops (op->private): three callbacks counting into one
 * variable would time the chain of increments, not the hooks */
static long counts[3];

static void cb(unsigned long ip, unsigned long pip, struct ftrace_ops *op, struct pt_regs *regs)
{
	(void)ip;
	(void)pip;
	(void)regs;
	++*(long *)op->private;
}

static void cb_empty(unsigned long ip, unsigned long pip, struct ftrace_ops *op,
		     struct pt_regs *regs)
{
	(void)ip;
	(void)pip;
	(void)op;
	(void)regs;
}

/* bt_pfe's site patched (a call) and listed enabled with one callback */
static int hooked_once(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return 0;
	ftrace_enabled_functions(f);
	fclose(f);
	char want[64];
	snprintf(want, sizeof(want), "%016lx  bt_pfe (1)", (unsigned long)bt_pfe);
	int ok = buf && strstr(buf, want) && *(const unsigned char *)bt_pfe == 0xe8;
	free(buf);
	return ok;
}

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static volatile int sink;	/* the calls' results go somewhere */

static double loop_n(int (*fn)(int), long n)
{
	double t0 = now_ns();
	for (long i = 0; i < n; i++)
		sink += fn((int)i);
	return (now_ns() - t0) / (double)n;
}

#define SLICES 20

/* one run: ns per call of its fastest slice */
static double loop(int (*fn)(int))
{
	double best = -1;
	for (long k = 0, done = 0; k < SLICES; k++) {
		long m = k == SLICES - 1 ? n_calls - done : n_calls / SLICES;
		if (m <= 0)
			continue;
		double ns = loop_n(fn, m);
		done += m;
		if (best < 0 || ns < best)
			best = ns;
	}
	return best;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

struct stat { double med, min; };
enum { R_CALL, R_INSTR, R_STUB, R_ONE, R_REGS, R_THREE, R_EMPTY, NROWS };
static double samples[NROWS][64];

/* one run of a row: -n calls, its callback exactly once per call */
static void sample(int row, int r, int (*fn)(int), long expect_hits, const char *name)
{
	memset(counts, 0, sizeof(counts));
	samples[row][r] = loop(fn);
	long hits = counts[0] + counts[1] + counts[2];
	if (hits != expect_hits) {
		fprintf(stderr, "ukp-ftrace-bench: %s: %ld callbacks for %ld calls\n",
			name, hits, expect_hits);
		exit(1);
	}
}

static struct stat stat_of(int row)
{
	qsort(samples[row], runs, sizeof(samples[row][0]), cmp_d);
	return (struct stat){ samples[row][runs / 2], samples[row][0] };
}

static int patch(void *site, const unsigned char *code)
{
	unsigned long page = (unsigned long)site & ~4095UL;
	if (mprotect((void *)page, 8192, PROT_READ | PROT_WRITE | PROT_EXEC))
		return -errno;
	memcpy(site, code, 5);
	__builtin___clear_cache((char *)site, (char *)site + 5);
	return mprotect((void *)page, 8192, PROT_READ | PROT_EXEC) ? -errno : 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--pg-child")) {
		/* under uftrace record: the loop over the -pg build alone */
		if (argc > 2)
			n_calls = atol(argv[2]);
		double ns = loop(bt_pg);	/* timed as every other row */
		printf("%.2f\n", ns);
		return 0;
	}
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-r") && i + 1 < argc)
			runs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "-n") && i + 1 < argc)
			n_calls = atol(argv[++i]);
		else if (!strcmp(argv[i], "--quick"))
			n_calls = 1000000, runs = 5;
	}
	if (runs < 1 || runs > 63)
		runs = 7;

	struct ftrace_ops empty = { .func = cb_empty },
			  one = { .func = cb, .private = &counts[0] },
			  regs = { .func = cb, .private = &counts[0], .flags = FTRACE_OPS_FL_SAVE_REGS };
	struct ftrace_ops three[3] = { { .func = cb, .private = &counts[0] },
				       { .func = cb, .private = &counts[1] },
				       { .func = cb, .private = &counts[2] } };
	unsigned char f[] = "bt_pfe";
	int err = ftrace_set_filter(&one, f, 6, 1);
	for (int i = 0; i < 3 && !err; i++)
		err = ftrace_set_filter(&three[i], f, 6, 1);
	if (!err)
		err = ftrace_set_filter(&regs, f, 6, 1);
	if (err) {
		fprintf(stderr, "ukp-ftrace-bench: ftrace_set_filter: %s\n", strerror(-err));
		return 1;
	}

	/* the floor: the site by hand, then its nop back */
	unsigned char save[5], c[5] = { 0xe8 };
	memcpy(save, (void *)bt_pfe, 5);
	int32_t rel = (int32_t)((unsigned long)bt_floor_stub - ((unsigned long)bt_pfe + 5));
	memcpy(c + 1, &rel, 4);
	/* the rows take turns, run by run: a slow spell of the machine hits
	 * them all alike */
	for (int r = 0; r < runs; r++) {
		sample(R_CALL, r, bt_pfe, 0, "call");
		sample(R_INSTR, r, bt_instr, 0, "instr");
		if (patch((void *)bt_pfe, c) || (sample(R_STUB, r, bt_pfe, 0, "stub"),
						 patch((void *)bt_pfe, save))) {
			fprintf(stderr, "ukp-ftrace-bench: cannot patch the floor stub in\n");
			return 1;
		}
		err = register_ftrace_function(&empty);
		if (!err) {
			if (!hooked_once()) {
				fprintf(stderr, "ukp-ftrace-bench: empty: bt_pfe is not hooked\n");
				return 1;
			}
			sample(R_EMPTY, r, bt_pfe, 0, "empty");
			if (!hooked_once()) {
				fprintf(stderr, "ukp-ftrace-bench: empty: bt_pfe lost its hook\n");
				return 1;
			}
			err = unregister_ftrace_function(&empty);
		}
		if (!err)
			err = register_ftrace_function(&one);
		if (!err) {
			sample(R_ONE, r, bt_pfe, n_calls, "one");
			err = unregister_ftrace_function(&one);
		}
		if (!err)
			err = register_ftrace_function(&regs);
		if (!err) {
			sample(R_REGS, r, bt_pfe, n_calls, "regs");
			err = unregister_ftrace_function(&regs);
		}
		for (int i = 0; i < 3 && !err; i++)
			err = register_ftrace_function(&three[i]);
		if (!err)
			sample(R_THREE, r, bt_pfe, 3 * n_calls, "three");
		for (int i = 0; i < 3 && !err; i++)
			err = unregister_ftrace_function(&three[i]);
		if (err) {
			fprintf(stderr, "ukp-ftrace-bench: (un)register_ftrace_function: %s\n",
				strerror(-err));
			return 1;
		}
	}
	struct stat call = stat_of(R_CALL), instr = stat_of(R_INSTR), stub = stat_of(R_STUB),
		    o = stat_of(R_ONE), rg = stat_of(R_REGS), th = stat_of(R_THREE),
		    em = stat_of(R_EMPTY);

	/* uftrace record on the -pg build of this program, if installed */
	double uft = -1;
	char cmd[8192], dir[] = "/tmp/ukp-uftrace-XXXXXX";
	if (system("command -v uftrace >/dev/null 2>&1") == 0 && mkdtemp(dir)) {
		snprintf(cmd, sizeof(cmd), "uftrace record -d %s/data %s-pg --pg-child %ld 2>/dev/null",
			 dir, argv[0], n_calls);
		double v[64];
		int nv = 0;
		for (int r = 0; r < runs; r++) {
			FILE *p = popen(cmd, "r");
			if (p && fscanf(p, "%lf", &v[nv]) == 1)
				nv++;
			if (p)
				pclose(p);
		}
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "ukp-ftrace-bench: could not remove %s\n", dir);
		if (nv) {
			qsort(v, nv, sizeof(v[0]), cmp_d);
			uft = v[nv / 2];
		}
	}

	printf("ftrace: ns per call, %d runs of %ld calls; -call and the ratio use the fastest run\n",
	       runs, n_calls);
	printf("%-7s %8s %8s %10s %12s\n", "row", "median", "fastest", "-call", "x(stub-call)");
	double fl = stub.min - call.min;
	const struct { const char *name; struct stat v; } rows[] = {
		{ "call", call }, { "instr", instr }, { "stub", stub }, { "one", o },
		{ "regs", rg }, { "three", th }, { "empty", em },
	};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		printf("%-7s %8.2f %8.2f", rows[i].name, rows[i].v.med, rows[i].v.min);
		if (i > 0)
			printf(" %10.2f", rows[i].v.min - call.min);
		if (i > 1)
			printf(" %12.2f", (rows[i].v.min - call.min) / fl);
		if (i == 5)
			printf("   three/one %.2f", (th.min - call.min) / (o.min - call.min));
		printf("\n");
	}
	if (uft > 0)
		printf("%-7s %8.2f %8s %10.2f %12.2f   (uftrace record, -pg build, median)\n",
		       "uftrace", uft, "", uft - call.min, (uft - call.min) / fl);
	else
		printf("uftrace: not installed, row skipped\n");

	/* the same in the Markdown form docs/performance.md uses */
	char model[128] = "?", line[256];
	FILE *ci = fopen("/proc/cpuinfo", "re");
	while (ci && fgets(line, sizeof(line), ci)) {
		char *col = strchr(line, ':');
		if (!strncmp(line, "model name", 10) && col) {
			snprintf(model, sizeof(model), "%s", col + 2);
			model[strcspn(model, "\n")] = 0;
			break;
		}
	}
	if (ci)
		fclose(ci);
	printf("\nMarkdown (docs/performance.md):\n\n");
	printf("`make bench` (ftrace) on %s: ns per call over the untraced call "
	       "(itself %.2f ns), fastest of %d runs of %ld calls.\n\n",
	       model, call.min, runs, n_calls);
	printf("| row | what | ns over the call | ratio |\n|---|---|---:|---|\n");
	/* ratios: 1 against the stub, 2 also against one ops */
	const struct { const char *name, *what; struct stat v; int bold, ratios; } md[] = {
		{ "instr", "`-finstrument-functions`, empty hooks", instr, 0, 1 },
		{ "stub", "hand-patched call to a register-saving stub (the floor)", stub, 0, 0 },
		{ "one", "one ops, no SAVE_REGS", o, 1, 1 },
		{ "empty", "`one` with a callback that does nothing", em, 0, 1 },
		{ "regs", "one ops, SAVE_REGS", rg, 1, 1 },
		{ "three", "three ops", th, 1, 2 },
	};
	for (size_t i = 0; i < sizeof(md) / sizeof(md[0]); i++) {
		double d = md[i].v.min - call.min;
		if (md[i].bold)
			printf("| **%s** | %s | **%.2f** |", md[i].name, md[i].what, d);
		else
			printf("| %s | %s | %.2f |", md[i].name, md[i].what, d);
		if (md[i].ratios >= 1)
			printf(" %.2f × stub", d / fl);
		if (md[i].ratios >= 2)
			printf(", %.2f × one", d / (o.min - call.min));
		printf(" |\n");
	}
	if (uft > 0)
		printf("| uftrace | `uftrace record`, `-pg` build (median) | %.1f | %.0f × stub |\n",
		       uft - call.min, (uft - call.min) / fl);
	return 0;
}
