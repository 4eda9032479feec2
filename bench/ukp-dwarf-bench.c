/* SPDX-License-Identifier: MIT */
/*
 * ukp-dwarf-bench: what a variable fetched by its source-level name costs
 * against the register fetch it is written with by hand, same function,
 * same run.
 *
 *	ukp-dwarf-bench [-r RUNS] [-n CALLS]
 *
 * The target, bt_d3(long a, void *b, const char *s), is C built with -g
 * (this file): its debug information describes a, b and s.  Rows:
 *
 *	call	the plain call of bt_d3, no probe
 *	e3	"p bt_d3 a=%di:s64 b=%si:x64 s=+0(%dx):string" (registers)
 *	e3n	"p bt_d3 a b s:string" (names), translated by cli/dwarf.c,
 *		the code `ukprobe` runs, into a raw definition
 *
 * Both are created with ukpev_event_create on the same function.  One run
 * of a row: arm, warm up, then SLICES slices of CALLS calls each, each
 * timed on its own, the records drained (untimed) after each slice and
 * counted: exactly one per call, or the row fails.  A run's figure is its
 * fastest slice; the rows take turns within a run (which goes first
 * alternates); the table shows the median of the runs, minus the plain
 * call, and e3n / e3 (goal: at most 1.10).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <ukprobes.h>

#include "dwarf.h"

/* `lea 1(%rdi),%rax; ret` as compiled; the empty asm keeps b and s live
 * (so their locations are described) without an instruction */
__attribute__((noinline)) long bt_d3(long a, void *b, const char *s);
__attribute__((noinline)) long bt_d3(long a, void *b, const char *s)
{
	__asm__ volatile("" : : "r"(b), "r"(s));
	return a + 1;
}

typedef long (*target_fn)(long, void *, const char *);
static const char str16[] = "0123456789abcdef";

static __attribute__((noinline)) long run_loop(target_fn fn, long n)
{
	long sum = 0;
	__asm__ volatile("" : "+r"(fn));
	for (long i = 0; i < n; i++)
		sum += fn(i, (void *)i, str16);
	return sum;
}

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int count_cb(const struct ukpev_record *rec, void *arg)
{
	(void)rec;
	(*(long *)arg)++;
	return 0;
}

static long drain(struct ukpev_reader *r)
{
	long n = 0;
	while (ukpev_reader_poll(r, count_cb, &n, 0) > 0)
		;
	return n;
}

/* [OPTIMIZED] in the probe list for addr */
static int optimized(unsigned long addr)
{
	char buf[1 << 16] = "", want[32];
	FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");
	kprobes_list(f);
	fclose(f);
	snprintf(want, sizeof(want), "%016lx", addr);
	char *l = strstr(buf, want);
	if (!l)
		return 0;
	char *end = strchr(l, '\n');
	if (end)
		*end = 0;
	return strstr(l, "[OPTIMIZED]") != NULL;
}

#define SLICES 8
#define MAXRUNS 31

struct row {
	const char *name, *what;
	char def[8192];
	double ns[MAXRUNS];
	int bad;
};

static struct row rows[] = {
	{ "call", "plain call of bt_d3", "", { 0 }, 0 },
	{ "e3", "registers: `a=%di:s64 b=%si:x64 s=+0(%dx):string`",
	  "p:bench/e3 bt_d3 a=%di:s64 b=%si:x64 s=+0(%dx):string", { 0 }, 0 },
	{ "e3n", "names: `a b s:string`, translated from DWARF", "", { 0 }, 0 },
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

static struct ukpev_area *area;
static struct ukpev_reader *reader;
static unsigned long probed;

static double run_row(struct row *rw, long calls)
{
	struct ukpev_event *ev = NULL;
	if (rw->def[0]) {
		struct ukpev_error err;
		if (ukpev_event_create(area, rw->def, 0, &ev, &err)) {
			char buf[10000];
			ukpev_error_format(buf, sizeof(buf), rw->def, &err);
			fputs(buf, stderr);
			exit(1);
		}
		probed = ukpev_event_info(ev)->addr;
		wait_for_kprobe_optimizer();
		if (!optimized(probed))
			rw->bad |= 2;
	}
	run_loop(bt_d3, calls / 4);
	drain(reader);
	double best = 1e30;
	for (int s = 0; s < SLICES; s++) {
		double t0 = now_ns();
		long sum = run_loop(bt_d3, calls);
		double t = now_ns() - t0;
		if (sum != calls * (calls - 1) / 2 + calls)
			rw->bad |= 1;
		if (ev && drain(reader) != calls)
			rw->bad |= 1;
		if (t / calls < best)
			best = t / calls;
	}
	if (ev)
		ukpev_event_remove(ev);
	return best;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	double t[MAXRUNS];
	memcpy(t, v, sizeof(double) * (size_t)n);
	qsort(t, (size_t)n, sizeof(double), cmp_d);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* the fetches of a definition: what follows its place */
static const char *fetches(const char *def)
{
	const char *p = strchr(def, ' ');
	p = p ? strchr(p + 1, ' ') : NULL;
	return p ? p + 1 : "";
}

int main(int argc, char **argv)
{
	int runs = 5;
	long calls = 50000;
	int opt;
	while ((opt = getopt(argc, argv, "r:n:")) != -1) {
		if (opt == 'r')
			runs = atoi(optarg);
		else if (opt == 'n')
			calls = atol(optarg);
		else {
			fprintf(stderr, "usage: ukp-dwarf-bench [-r RUNS] [-n CALLS]\n");
			return 2;
		}
	}
	if (runs < 1 || runs > MAXRUNS || calls < 1000 || calls > 200000) {
		fprintf(stderr, "ukp-dwarf-bench: RUNS 1..%d, CALLS 1000..200000\n", MAXRUNS);
		return 2;
	}
	/* the named definition, through this very program's DWARF */
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0) {
		fprintf(stderr, "ukp-dwarf-bench: no /proc/self/exe\n");
		return 1;
	}
	exe[n] = 0;
	static const char named[] = "p:bench/e3n bt_d3 a b s:string";
	struct dw_error derr;
	struct dw_obj *o = dw_open(exe, &derr);
	char **out = NULL;
	int nd = o ? dw_translate(o, named, &out, &derr) : -1;
	if (nd != 1) {
		fprintf(stderr, "ukp-dwarf-bench: %s: %s\n", named,
			nd < 0 ? derr.msg : "not one definition");
		return 1;
	}
	snprintf(rows[2].def, sizeof(rows[2].def), "%s", out[0]);
	free(out[0]);
	free(out);
	dw_close(o);
	if (ukpev_area_create(NULL, &area) || ukpev_reader_from_area(area, &reader)) {
		fprintf(stderr, "ukp-dwarf-bench: no area\n");
		return 1;
	}
	unsigned long where[NROWS] = { 0 };
	for (int k = 0; k < runs; k++) {
		rows[0].ns[k] = run_row(&rows[0], calls);
		for (unsigned j = 1; j < NROWS; j++) {
			unsigned i = k % 2 ? NROWS - j : j;	/* who goes first alternates */
			rows[i].ns[k] = run_row(&rows[i], calls);
			where[i] = probed;
		}
	}
	double call = median(rows[0].ns, runs);
	double e3 = median(rows[1].ns, runs) - call, e3n = median(rows[2].ns, runs) - call;
	printf("## ukp-dwarf-bench\n\n");
	printf("%d runs x %d slices x %ld calls; per run the fastest slice, then the median; "
	       "ns per event minus the plain call (%.2f ns)\n\n", runs, SLICES, calls, call);
	printf("e3n as written: %s\nas translated: %s\n\n", named, rows[2].def);
	printf("| row | what | ns/event | ratio | |\n|---|---|---:|---:|---|\n");
	int fail = 0;
	for (unsigned i = 1; i < NROWS; i++) {
		struct row *rw = &rows[i];
		double net = median(rw->ns, runs) - call;
		if (rw->bad & 1)
			fail = 1;
		const char *st = rw->bad & 1 ? "FAILED: records != calls" :
				 rw->bad & 2 ? "not optimised" : "";
		if (i == 2)
			printf("| %s | %s | %.2f | %.3f x e3 (goal <= 1.10: %s) | %s |\n", rw->name,
			       rw->what, net, e3n / e3, e3n <= 1.10 * e3 ? "met" : "missed", st);
		else
			printf("| %s | %s | %.2f | | %s |\n", rw->name, rw->what, net, st);
	}
	/* the same place and the same fetch programs, or the row is moot */
	if (where[1] != where[2] || strcmp(fetches(rows[1].def), fetches(rows[2].def))) {
		printf("\nthe translation differs from e3: %s\n", fetches(rows[2].def));
		fail = 1;
	}
	ukpev_reader_close(reader);
	ukpev_area_destroy(area);
	return fail;
}
