/* SPDX-License-Identifier: MIT */
/*
 * ukp-coverage: how much of real libraries jump optimisation reaches.
 *
 *	ukp-coverage [--sample N | --max-seconds S] [-v] LIBRARY...
 *
 * For each LIBRARY (a name dlopen() finds, e.g. libz.so.1, or a path):
 *   1. dlopen() it and list its functions with tests/real/everyinsn.h:
 *      .symtab, else the separate debug file found by build-id, else the
 *      .eh_frame FDEs (static functions too, named from .dynsym);
 *   2. decode every instruction boundary of every function with Zydis,
 *      from its start over its size (a function with bytes Zydis cannot
 *      decode is swept up to them, and the report says how many);
 *   3. ask ukp_opt_check() - the optimizer's own safety checks - about
 *      every function entry, then about every boundary (entries
 *      included);
 *   4. print one row per library and a total: functions, entries
 *      optimizable, boundaries optimizable; then the refusals per reason
 *      (the text of `why` before its first ':'), at entries and at all
 *      boundaries, one column per library.
 *
 * Entries are always all checked.  --sample N checks every Nth boundary
 * (counted across the library, so every function is sampled alike);
 * --max-seconds S picks N per library so that its boundary checks take
 * about S seconds, estimated from a timed pilot of ~3200 checks (the
 * engine's first checks were slow; scripts/coverage passes a budget).
 * Sampled rows say so (1/N); their counts are those of the boundaries
 * checked.
 *
 * -v prints every refused entry with its full reason.
 *
 * Exit status: 0 when every library was checked or skipped with a note
 * (the tool reports; it does not judge), 1 when it cannot run (bad
 * arguments, no library at all could be opened).
 */
#include <dlfcn.h>
#include <link.h>
#include "internal.h"
#include "real/everyinsn.h"

#define MAX_LIBS 16
#define MAX_REASONS 48

struct lib {
	const char *arg;
	char name[128];			/* base name shown */
	int skipped;
	char why_skipped[256];
	const char *how;		/* where the functions came from */
	size_t nfns, entries_ok;
	size_t nbounds;			/* every boundary found */
	size_t checked, bounds_ok;	/* boundaries checked / optimizable */
	unsigned long stride;
	size_t partial;			/* functions swept only partly */
	double secs;
};

/* reason texts, with counts [lib] at entries and at boundaries */
static struct reason {
	char text[96];
	size_t at_entry[MAX_LIBS], at_bound[MAX_LIBS];
} reasons[MAX_REASONS + 1];		/* the last one: "(other reasons)" */
static size_t nreasons;

/* the tactic of each optimizable place: [0] a region of whole
 * instructions, [k] a punned jump over a k-byte instruction */
static struct reason tactics[5] = {
	{ "region of whole instructions", { 0 }, { 0 } },
	{ "punned jump, 1-byte instruction", { 0 }, { 0 } },
	{ "punned jump, 2-byte instruction", { 0 }, { 0 } },
	{ "punned jump, 3-byte instruction", { 0 }, { 0 } },
	{ "punned jump, 4-byte instruction", { 0 }, { 0 } },
};

static struct lib libs[MAX_LIBS];
static size_t nlibs;
static int verbose;

static size_t reason_index(const char *why, int ret)
{
	char text[96];
	size_t k = 0;

	if (!why[0])
		snprintf(text, sizeof(text), "(no reason given: %s)", strerror(-ret));
	else {
		while (why[k] && why[k] != ':' && k < sizeof(text) - 1) {
			text[k] = why[k];
			k++;
		}
		text[k] = 0;
	}
	for (size_t i = 0; i < nreasons; i++)
		if (!strcmp(reasons[i].text, text))
			return i;
	if (nreasons == MAX_REASONS) {
		snprintf(reasons[MAX_REASONS].text, sizeof(reasons[0].text), "(other reasons)");
		return MAX_REASONS;
	}
	snprintf(reasons[nreasons].text, sizeof(reasons[0].text), "%s", text);
	return nreasons++;
}

/* -1: optimizable; else the reason's index */
static int check(unsigned long addr, const struct ei_fn *fn, int entry, struct lib *l)
{
	char why[256] = "";
	int r = ukp_opt_check(addr, why, sizeof(why));

	if (r == 0) {
		const char *p = strstr(why, "punned jump, ");
		unsigned k = p ? (unsigned)atoi(p + 13) : 0;
		struct reason *t = &tactics[k < 5 ? k : 0];
		(entry ? t->at_entry : t->at_bound)[l - libs]++;
		return -1;
	}
	why[sizeof(why) - 1] = 0;
	if (verbose && entry)
		printf("  %s: %s (%#lx): %s\n", l->name, fn->name, addr,
		       why[0] ? why : strerror(-r));
	return (int)reason_index(why, r);
}

static void do_lib(struct lib *l, unsigned long sample, double max_secs)
{
	static struct ei_obj o;
	struct link_map *lm = NULL;
	unsigned long *bounds = NULL;
	size_t nb = 0, cap = 0;
	const char *base = strrchr(l->arg, '/') ? strrchr(l->arg, '/') + 1 : l->arg;

	snprintf(l->name, sizeof(l->name), "%s", base);
	void *h = dlopen(l->arg, RTLD_NOW | RTLD_LOCAL);
	if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) || !lm || !lm->l_name[0]) {
		l->skipped = 1;
		snprintf(l->why_skipped, sizeof(l->why_skipped), "%s",
			 h ? "no link map" : dlerror());
		return;
	}
	double t0 = ei_now();
	ei_obj_load(&o, lm->l_name, !ei_has_symbols(lm->l_name));
	l->how = o.how;
	l->nfns = o.nfns;

	/* 1. entries, all of them; and every boundary, to check next */
	int *entry_res = malloc((o.nfns + 1) * sizeof(*entry_res));
	size_t *first = malloc((o.nfns + 1) * sizeof(*first));	/* into bounds */
	if (!entry_res || !first) {
		fprintf(stderr, "ukp-coverage: out of memory\n");
		exit(1);
	}
	for (size_t i = 0; i < o.nfns; i++) {
		entry_res[i] = check(o.fns[i].start, &o.fns[i], 1, l);
		if (entry_res[i] < 0)
			l->entries_ok++;
		else
			reasons[entry_res[i]].at_entry[l - libs]++;
		first[i] = nb;
		l->partial += ei_sweep_addrs(&o.fns[i], &bounds, &nb, &cap);
	}
	first[o.nfns] = nb;
	l->nbounds = nb;

	/*
	 * 2. how many boundaries to check: with a time budget, time a pilot
	 *    of 64 runs of up to 50 consecutive boundaries spread over the
	 *    library - consecutive, as the real pass goes (the checker may
	 *    keep what it learnt of a function), and spread, as checks cost
	 *    more in bigger functions (so the entries' time would mislead)
	 */
	l->stride = sample ? sample : 1;
	if (!sample && max_secs > 0 && nb) {
		size_t run = nb / 64 < 50 ? nb / 64 + 1 : 50, np = 0;
		double p0 = ei_now();
		char why[256];
		for (size_t b = 0; b < 64; b++)
			for (size_t k = b * (nb / 64); k < b * (nb / 64) + run && k < nb; k++, np++)
				(void)ukp_opt_check(bounds[k], why, sizeof(why));
		double want = (ei_now() - p0) / (double)np * (double)nb;
		if (want > max_secs)
			l->stride = (unsigned long)(want / max_secs) + 1;
	}

	/* 3. the boundaries; an entry's answer is known already */
	size_t f = 0;
	for (size_t k = 0; k < nb; k += l->stride) {
		while (first[f + 1] <= k)
			f++;
		int r = bounds[k] == o.fns[f].start ? entry_res[f]
						      : check(bounds[k], &o.fns[f], 0, l);
		l->checked++;
		if (r < 0)
			l->bounds_ok++;
		else
			reasons[r].at_bound[l - libs]++;
	}
	l->secs = ei_now() - t0;
	free(entry_res);
	free(first);
	free(bounds);
	free(o.fns);
	o.fns = NULL;
}

static double share(size_t ok, size_t all)
{
	return all ? 100.0 * (double)ok / (double)all : 0.0;
}

static void reason_table(const char *title, const struct reason *reasons, size_t nr,
			 int at_entry, int namew, int colw)
{
	size_t shown = 0;

	for (size_t r = 0; r < nr; r++) {
		size_t tot = 0;
		for (size_t i = 0; i < nlibs; i++)
			tot += at_entry ? reasons[r].at_entry[i] : reasons[r].at_bound[i];
		if (!tot)
			continue;
		if (!shown++) {
			printf("\n%-*s", namew, title);
			for (size_t i = 0; i < nlibs; i++)
				if (!libs[i].skipped)
					printf(" %*s", colw, libs[i].name);
			printf(" %*s\n", colw, "total");
		}
		printf("  %-*s", namew - 2, reasons[r].text);
		for (size_t i = 0; i < nlibs; i++)
			if (!libs[i].skipped)
				printf(" %*zu", colw,
				       at_entry ? reasons[r].at_entry[i] : reasons[r].at_bound[i]);
		printf(" %*zu\n", colw, tot);
	}
	if (!shown)
		printf("\n%s: none\n", title);
}

static void usage(void)
{
	fprintf(stderr, "usage: ukp-coverage [--sample N | --max-seconds S] [-v] LIBRARY...\n");
	exit(1);
}

int main(int argc, char **argv)
{
	unsigned long sample = 0;
	double max_secs = 0;
	int ndone = 0;

	for (int i = 1; i < argc; i++) {
		char *end;
		if (!strcmp(argv[i], "-v")) {
			verbose = 1;
		} else if (!strcmp(argv[i], "--sample") && i + 1 < argc) {
			sample = strtoul(argv[++i], &end, 10);
			if (*end || !sample)
				usage();
		} else if (!strcmp(argv[i], "--max-seconds") && i + 1 < argc) {
			max_secs = strtod(argv[++i], &end);
			if (*end || max_secs <= 0)
				usage();
		} else if (argv[i][0] == '-') {
			usage();
		} else if (nlibs < MAX_LIBS) {
			libs[nlibs++].arg = argv[i];
		} else {
			fprintf(stderr, "ukp-coverage: at most %d libraries\n", MAX_LIBS);
			return 1;
		}
	}
	if (!nlibs)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* the library's own setup first, as any probe would do */
	ukp_init_once();
	for (size_t i = 0; i < nlibs; i++) {
		do_lib(&libs[i], sample, max_secs);
		ndone += !libs[i].skipped;
	}

	/* the table */
	int any_sampled = 0;
	for (size_t i = 0; i < nlibs; i++)
		any_sampled |= !libs[i].skipped && libs[i].stride > 1;
	const char *const titles[2] = {
		"refusals at function entries",
		any_sampled ? "refusals at the boundaries checked" : "refusals at all boundaries",
	};
	int libw = 7, colw = 9, namew = 36;
	for (size_t i = 0; i < nlibs; i++) {
		int k = (int)strlen(libs[i].name);
		libw = k > libw ? k : libw;
		colw = k > colw ? k : colw;
	}
	for (size_t r = 0; r < nreasons; r++) {
		int k = (int)strlen(reasons[r].text) + 2;
		namew = k > namew ? k : namew;
	}
	for (size_t i = 0; i < 2; i++) {
		int k = (int)strlen(titles[i]);
		namew = k > namew ? k : namew;
	}
	printf("jump optimisation coverage (ukp_opt_check): optimizable function entries "
	       "(goal: 95%%) and instruction boundaries\n");
	printf("%-*s  %-10s %9s %8s %6s  %10s %10s %10s %6s %7s\n", libw, "library", "symbols",
	       "functions", "entry ok", "%", "boundaries", "checked", "ok", "%", "time");
	size_t tf = 0, te = 0, tb = 0, tbo = 0, tall = 0;
	double est_ok = 0, ts = 0;
	for (size_t i = 0; i < nlibs; i++) {
		struct lib *l = &libs[i];
		if (l->skipped) {
			printf("%-*s  skipped: %s\n", libw, l->name, l->why_skipped);
			continue;
		}
		char chk[32];
		if (l->stride > 1)
			snprintf(chk, sizeof(chk), "%zu 1/%lu", l->checked, l->stride);
		else
			snprintf(chk, sizeof(chk), "%zu", l->checked);
		printf("%-*s  %-10s %9zu %8zu %5.1f%%  %10zu %10s %10zu %5.1f%% %5.1f s\n", libw,
		       l->name, l->how, l->nfns, l->entries_ok, share(l->entries_ok, l->nfns),
		       l->nbounds, chk, l->bounds_ok, share(l->bounds_ok, l->checked), l->secs);
		tf += l->nfns;
		te += l->entries_ok;
		tb += l->checked;
		tbo += l->bounds_ok;
		tall += l->nbounds;
		/* a sampled library stands for all its boundaries */
		est_ok += (double)l->nbounds * share(l->bounds_ok, l->checked) / 100.0;
		ts += l->secs;
	}
	if (!ndone) {
		fprintf(stderr, "ukp-coverage: no library could be opened\n");
		return 1;
	}
	printf("%-*s  %-10s %9zu %8zu %5.1f%%  %10zu %10zu %10zu %5.1f%% %5.1f s\n", libw, "total",
	       "", tf, te, share(te, tf), tall, tb, tbo,
	       any_sampled ? (tall ? 100.0 * est_ok / (double)tall : 0.0) : share(tbo, tb), ts);
	if (any_sampled)
		printf("(checked \"1/N\": every Nth boundary of the library, all entries; the total "
		       "%% weighs each library by all its boundaries)\n");
	for (size_t i = 0; i < nlibs; i++)
		if (libs[i].partial)
			printf("(%s: %zu functions have bytes Zydis cannot decode; swept up to them)\n",
			       libs[i].name, libs[i].partial);

	reason_table("tactics at function entries", tactics, 5, 1, namew, colw);
	reason_table(any_sampled ? "tactics at the boundaries checked" :
		     "tactics at all boundaries", tactics, 5, 0, namew, colw);
	reason_table(titles[0], reasons, MAX_REASONS + 1, 1, namew, colw);
	reason_table(titles[1], reasons, MAX_REASONS + 1, 0, namew, colw);
	return 0;
}
