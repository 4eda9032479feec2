/* SPDX-License-Identifier: MIT */
/*
 * Every fetch form and type: the target (targets/fetch.c) gives the
 * definitions and prints, before each call, what each event must show;
 * ukprobe's lines must say exactly that.  Symbol sizes ("/0x" followed
 * by no digit in the expectation) match any size.
 */
#include "run.h"

static int match(const char *want, const char *got)
{
	while (*want) {
		if (!strncmp(want, "/0x", 3) && !strchr("0123456789abcdef", want[3]) &&
		    !strncmp(got, "/0x", 3)) {
			want += 3;
			got += 3;
			if (!strchr("0123456789abcdef", *got) || !*got)
				return 0;
			while (*got && strchr("0123456789abcdef", *got))
				got++;
			continue;
		}
		if (*want++ != *got++)
			return 0;
	}
	return *got == 0;
}

/*
 * ukprobe with the target's definitions first..first+n-1 on "fetch run":
 * every EXPECT line of those events must match ukprobe's line, and there
 * are exactly `calls` lines per event.
 */
static void run_fetch(int first, int n, const char *const *evs, int nevs, int calls)
{
	char *defv[] = { (char *)target("fetch"), (char *)"defs", NULL };
	struct run d = run_argv(defv);
	UKT_ASSERT(d.status == 0);
	char *argv[16];
	int na = 0, k = 0;
	argv[na++] = (char *)ukprobe_path();
	argv[na++] = (char *)"trace";
	for (char *save = NULL, *l = strtok_r(d.out, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save), k++)
		if (k >= first && k < first + n)
			argv[na++] = l;
	argv[na++] = (char *)"--";
	argv[na++] = (char *)target("fetch");
	argv[na++] = (char *)"run";
	argv[na] = NULL;
	struct run r = run_argv(argv);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, strstr(r.err, "ukprobe: 0 events lost\n") != NULL);
	int seen[8] = { 0 };
	int checked = 0;
	for (char *p = r.out; (p = strstr(p, "EXPECT ")); p++) {
		char ev[16];
		UKT_ASSERT(sscanf(p + 7, "%15s", ev) == 1);
		int e = 0;
		while (e < nevs && strcmp(evs[e], ev))
			e++;
		if (e == nevs)
			continue;	/* an event not traced in this run */
		char *want = p + 7 + strlen(ev) + 1;
		char *eol = strchr(want, '\n');
		UKT_ASSERT(eol);
		char *w = strndup(want, (size_t)(eol - want));
		char *got = event_args(r.out, ev, seen[e]++);
		if (!got || !match(w, got)) {
			show(&r);
			UKT_FAIL("%s #%d:\n  want: %s\n  got:  %s", ev, seen[e] - 1, w,
				 got ? got : "(no line)");
		}
		checked++;
		free(w);
		free(got);
	}
	UKT_EQ(checked, nevs * calls);
	for (int e = 0; e < nevs; e++) {
		UKT_EQ(seen[e], calls);
		char *extra = event_args(r.out, evs[e], calls);	/* no more lines than calls */
		UKT_ASSERT(extra == NULL);
	}
	run_free(&r);
	run_free(&d);
}

UKT_CASE(every_fetch_form_and_type)
{
	static const char *const evs[] = { "take", "args", "ret" };
	run_fetch(0, 3, evs, 3, 2);
}

/* the return probe's place: "(main+0x../0x.. <- take)" */
UKT_CASE(return_probe_place)
{
	struct run r = ukprobe("trace", "r:t/ret take", "--", target("fetch"), "run", NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, count_lines(r.out, " ret: (main+0x") == 2);
	RUN_EXPECT(r, count_lines(r.out, " <- take)") == 2);
	run_free(&r);
}

/* @SYM of a data symbol the executable does not export (.symtab only) */
UKT_CASE(data_symbols)
{
	static const char *const evs[] = { "data" };
	run_fetch(3, 1, evs, 1, 2);
}
