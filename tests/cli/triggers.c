/* SPDX-License-Identifier: MIT */
/*
 * --trigger and --format=folded against a target that counts for itself
 * (build/cli-targets/trig): histograms equal its own counts, stacks name
 * its own call chain, the kernel's print forms, bad triggers refused in
 * the error log's form, a histogram on SIGUSR1 while it runs.
 */
#include <regex.h>
#include <elf.h>
#include "run.h"

#define DEF_C "p:t/tr_c tr_c x=%di:u64"
#define DEF_S "p:t/tr_s tr_s name=+0(%di):string"

struct counts {
	unsigned long long cnt[65], sum[65];
	unsigned long long str[4];
	unsigned long calls;
};
static const char *names[] = { "alpha", "beta", "gamma", "delta" };

/* what the target printed about itself */
static void self_counts(const char *out, struct counts *c)
{
	memset(c, 0, sizeof *c);
	for (const char *p = out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		unsigned b;
		unsigned long long n, s;
		char w[16];
		if (sscanf(p, "log2 %u %llu %llu", &b, &n, &s) == 3 && b <= 64) {
			c->cnt[b] = n;
			c->sum[b] = s;
		} else if (sscanf(p, "str %15s %llu", w, &n) == 2) {
			for (int k = 0; k < 4; k++)
				if (!strcmp(w, names[k]))
					c->str[k] = n;
		} else if (sscanf(p, "calls %llu", &n) == 1) {
			c->calls = (unsigned long)n;
		}
	}
	UKT_ASSERT(c->calls > 0);
}

static char *tmpfile_path(void)
{
	static char p[4][64];
	static int k;
	k = (k + 1) % 4;
	snprintf(p[k], sizeof p[k], "/tmp/ukt-trig-XXXXXX");
	int fd = mkstemp(p[k]);
	UKT_ASSERT(fd >= 0);
	close(fd);
	return p[k];
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	UKT_ASSERT(f);
	size_t cap = 1 << 16, n = 0;
	char *b = malloc(cap);
	size_t r;
	while ((r = fread(b + n, 1, cap - n - 1, f)) > 0) {
		n += r;
		if (cap - n < 4096)
			b = realloc(b, cap *= 2);
	}
	b[n] = 0;
	fclose(f);
	return b;
}

/* the k-th histogram of the output (from "# event histogram") */
static const char *nth_hist(const char *out, int k)
{
	const char *p = out;
	for (int i = 0; i <= k; i++) {
		p = strstr(p, "# event histogram\n");
		if (!p)
			return NULL;
		if (i < k)
			p++;
	}
	return p;
}

static void hist_totals(const char *h, unsigned long long *hits, unsigned *entries,
			unsigned long long *dropped)
{
	const char *t = strstr(h, "\nTotals:\n");
	UKT_ASSERT(t);
	UKT_ASSERT(sscanf(t, "\nTotals:\n    Hits: %llu\n    Entries: %u\n    Dropped: %llu", hits,
			  entries, dropped) == 3);
}

UKT_CASE_T(histograms_equal_the_targets_counts, 60)
{
	char *o = tmpfile_path();
	struct run r = ukprobe("trace", "-o", o,
			       "--trigger=tr_c:hist:keys=x.log2:vals=x:sort=x.log2",
			       "--trigger=t/tr_s:hist:keys=name:vals=hitcount:sort=name",
			       DEF_C, DEF_S, "--", target("trig"), "3000", NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, strstr(r.err, "ukprobe: 0 events lost\n"));
	struct counts c;
	self_counts(r.out, &c);
	char *out = slurp(o);
	unlink(o);
	/* every event is enabled from the start: a histogram's event writes
	 * its lines too, one a call */
	UKT_EQ(count_lines(out, " tr_c: (tr_c+0x0/"), 3000);
	UKT_EQ(count_lines(out, " tr_s: (tr_s+0x0/"), 3000);
	const char *h = nth_hist(out, 0);
	UKT_ASSERT(h);
	const char *info = "# event histogram\n#\n# trigger info: "
			   "hist:keys=x.log2:vals=hitcount,x:sort=x.log2:size=2048 [active]\n#\n\n";
	if (strncmp(h, info, strlen(info)))
		UKT_FAIL("header:\n%.400s", h);
	unsigned entries = 0, want = 0;
	for (const char *p = strstr(h, "\n{ "); p && p < strstr(h, "\nTotals:");
	     p = strstr(p + 1, "\n{ ")) {
		unsigned b;
		unsigned long long n, s;
		if (sscanf(p, "\n{ x: ~ 2^%u } hitcount: %llu  x: %llu", &b, &n, &s) != 3)
			UKT_FAIL("bad line %.80s", p + 1);
		UKT_ASSERT(b <= 64);
		if (n != c.cnt[b] || s != c.sum[b])
			UKT_FAIL("2^%u: %llu calls, sum %llu; the target counted %llu, %llu", b, n, s,
				 c.cnt[b], c.sum[b]);
		entries++;
	}
	for (int b = 0; b <= 64; b++)
		want += c.cnt[b] != 0;
	UKT_EQ(entries, want);
	unsigned long long hits, dropped;
	unsigned ent;
	hist_totals(h, &hits, &ent, &dropped);
	UKT_EQ(hits, c.calls);
	UKT_EQ(ent, want);
	UKT_EQ(dropped, 0);
	/* the strings: the kernel's "%-50s" key, sorted by name */
	const char *h2 = nth_hist(out, 1);
	UKT_ASSERT(h2);
	const char *prev = h2;
	static const int order[] = { 0, 1, 3, 2 };	/* alpha beta delta gamma */
	for (int k = 0; k < 4; k++) {
		char line[160];
		snprintf(line, sizeof line, "{ name: %-50s } hitcount: %10llu\n", names[order[k]],
			 c.str[order[k]]);
		const char *at = strstr(h2, line);
		if (!at || at < prev)
			UKT_FAIL("no '%s' (in order) in:\n%s", line, h2);
		prev = at;
	}
	free(out);
	run_free(&r);
}

UKT_CASE_T(stacktrace_as_the_kernel_prints_it, 60)
{
	struct run r = ukprobe("trace", "--trigger=tr_c:stacktrace:3", DEF_C, "--", target("trig"),
			       "50", NULL);
	RUN_EXPECT(r, r.status == 0);
	UKT_EQ(count_lines(r.out, " tr_c: (tr_c+0x0/"), 50);
	UKT_EQ(count_lines(r.out, ": <stack trace>"), 3);
	/* each: the event's line, "<stack trace>" with the same context,
	 * then the probed place and each caller outwards */
	const char *p = r.out;
	for (int k = 0; k < 3; k++) {
		const char *st = strstr(p, ": <stack trace>\n");
		UKT_ASSERT(st);
		const char *bol = st;
		while (bol > r.out && bol[-1] != '\n')
			bol--;
		const char *prev = bol - 1;
		while (prev > r.out && prev[-1] != '\n')
			prev--;
		/* "TASK-PID [CPU] TIMESTAMP" of both lines alike */
		size_t ctx = (size_t)(st - bol);
		if (strncmp(prev, bol, ctx) || strncmp(prev + ctx, ": tr_c: (tr_c+0x0/", 18))
			UKT_FAIL("context:\n%.300s", prev);
		const char *f = st + strlen(": <stack trace>\n");
		static const char *want[] = { " => tr_c+0x0/0x", " => tr_b+0x", " => tr_a+0x",
					      " => main+0x", " => __libc_start_call_main+0x" };
		for (int j = 0; j < 5; j++) {
			if (strncmp(f, want[j], strlen(want[j])))
				UKT_FAIL("frame %d: '%.60s', want '%s'", j, f, want[j]);
			const char *eol = strchr(f, '\n');
			UKT_ASSERT(eol);
			/* no [object] for the program's own functions */
			int in_libc = strstr(want[j], "__libc") != NULL;
			const char *ob = memmem(f, (size_t)(eol - f), " [libc.so.6]", 12);
			UKT_ASSERT(in_libc ? ob != NULL : ob == NULL);
			f = eol + 1;
		}
		p = f;
	}
	run_free(&r);
}

/* a line of folded output: frames without blanks, ';' between, a count */
static int folded_line_ok(const char *line)
{
	static regex_t re;
	static int init;
	if (!init) {
		UKT_ASSERT(regcomp(&re, "^([^; ]+;)*[^; ]+ [1-9][0-9]*$", REG_EXTENDED | REG_NOSUB) == 0);
		init = 1;
	}
	return regexec(&re, line, 0, NULL, 0) == 0;
}

/* the sum of the counts of lines ending in suffix (and holding `has`) */
static unsigned long long folded_sum(const char *out, const char *has, const char *suffix)
{
	unsigned long long total = 0;
	char *copy = strdup(out), *save;
	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (!folded_line_ok(l))
			UKT_FAIL("not a folded line: '%s'", l);
		char *sp = strrchr(l, ' ');
		*sp = 0;
		size_t n = strlen(l), sl = strlen(suffix);
		if (n >= sl && !strcmp(l + n - sl, suffix) && strstr(l, has))
			total += strtoull(sp + 1, NULL, 10);
	}
	free(copy);
	return total;
}

UKT_CASE_T(folded_stacks_for_flame_graphs, 60)
{
	char *o = tmpfile_path();
	struct run r = ukprobe("trace", "--format=folded", "-o", o,
			       "--trigger=tr_c:hist:keys=common_stacktrace",
			       "--trigger=tr_s:stacktrace", DEF_C, DEF_S, "--", target("trig"), "500",
			       NULL);
	RUN_EXPECT(r, r.status == 0);
	struct counts c;
	self_counts(r.out, &c);
	char *out = slurp(o);
	unlink(o);
	UKT_ASSERT(out[0]);
	UKT_ASSERT(!strchr(out, '#'));
	/* outermost first, the probed function last */
	UKT_EQ(folded_sum(out, "__libc_start_call_main;main;", ";main;tr_a;tr_b;tr_c"), c.calls);
	UKT_EQ(folded_sum(out, "__libc_start_call_main;main;", ";main;tr_s"), c.calls);
	UKT_EQ(folded_sum(out, "", ""), 2 * c.calls);
	free(out);
	run_free(&r);

	/* the same stacks as a histogram in the kernel's form */
	r = ukprobe("trace", "--trigger=tr_c:hist:keys=common_stacktrace", DEF_C, "--",
		    target("trig"), "200", NULL);
	RUN_EXPECT(r, r.status == 0);
	const char *h = nth_hist(r.out, 0);
	UKT_ASSERT(h);
	RUN_EXPECT(r, strstr(h, "\n{ common_stacktrace:\n         tr_c+0x0/0x"));
	RUN_EXPECT(r, strstr(h, "\n         tr_b+0x"));
	RUN_EXPECT(r, strstr(h, "\n} hitcount:        200\n"));
	run_free(&r);
}

UKT_CASE_T(traceoff_and_enable_disable_event, 60)
{
	/* tr_c off after a delta, on again after an alpha: each call of tr_c
	 * comes before its iteration's tr_s */
	struct run r = ukprobe("trace", "--trigger=tr_s:disable_event:t:tr_c if name == \"delta\"",
			       "--trigger=tr_s:enable_event:t:tr_c if name == \"alpha\"",
			       DEF_C, DEF_S, "--", target("trig"), "400", NULL);
	RUN_EXPECT(r, r.status == 0);
	/* from the trace itself: the tr_s names in order, the tr_c lines
	 * between them */
	int on = 1, bad = 0, nc = 0, expected = 0;
	for (const char *p = r.out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (!strncmp(p, "#", 1) || !strstr(p, ": ("))
			continue;
		const char *eol = strchr(p, '\n');
		if (memmem(p, (size_t)(eol - p), " tr_c: (", 8)) {
			nc++;
			bad += !on;
		} else if (memmem(p, (size_t)(eol - p), " tr_s: (", 8)) {
			expected += on;	/* this iteration's tr_c came before */
			if (memmem(p, (size_t)(eol - p), "name=\"delta\"", 12))
				on = 0;
			else if (memmem(p, (size_t)(eol - p), "name=\"alpha\"", 12))
				on = 1;
		}
	}
	UKT_EQ(count_lines(r.out, " tr_s: ("), 400);
	UKT_EQ(bad, 0);
	UKT_EQ(nc, expected);
	UKT_ASSERT(nc > 0 && nc < 400);
	run_free(&r);

	/* traceoff with a condition: that hit recorded, nothing after */
	r = ukprobe("trace", "--trigger=tr_s:traceoff if name == \"delta\"", DEF_C, DEF_S, "--",
		    target("trig"), "400", NULL);
	RUN_EXPECT(r, r.status == 0);
	const char *last = NULL;
	for (const char *p = strstr(r.out, ": ("); p; p = strstr(p + 1, ": ("))
		last = p;
	UKT_ASSERT(last);
	const char *eol = strchr(last, '\n');
	RUN_EXPECT(r, eol && memmem(last, (size_t)(eol - last), "name=\"delta\"", 12));
	UKT_EQ(count_lines(r.out, "name=\"delta\""), 1);
	run_free(&r);
}

UKT_CASE(bad_triggers_are_refused_with_a_caret)
{
	static const struct { const char *trig, *msg, *cmd; int caret; } bad[] = {
		{ "--trigger=tr_c:hist:keys=nope", "Couldn't find field", "hist:keys=nope", 10 },
		{ "--trigger=tr_c:hist:keys=x.frob", "Invalid field modifier", "hist:keys=x.frob", 12 },
		{ "--trigger=tr_c:hist:keys=x:sort=y", "Sort field not found", "hist:keys=x:sort=y", 17 },
		{ "--trigger=tr_c:bogus", "Invalid trigger", "bogus", 0 },
		{ "--trigger=tr_c:traceoff:0", "Invalid trigger count", "traceoff:0", 9 },
		{ "--trigger=tr_c:stacktrace if y == 1", "Field not found", "stacktrace if y == 1", 14 },
		{ "--trigger=nope:stacktrace", "Unknown event", "nope:stacktrace", 0 },
		{ "--trigger=tr_c:enable_event:t:nope", "Unknown event", "enable_event:t:nope", 13 },
	};
	for (unsigned k = 0; k < sizeof bad / sizeof *bad; k++) {
		struct run r = ukprobe("trace", bad[k].trig, DEF_C, "--", target("trig"), "10", NULL);
		char want[512];
		snprintf(want, sizeof want, "ukprobe: error: %s\n  Command: %s\n%*s^\n", bad[k].msg,
			 bad[k].cmd, 11 + bad[k].caret, "");
		if (r.status != 2 || strcmp(r.err, want)) {
			show(&r);
			UKT_FAIL("%s: want status 2 and\n%s", bad[k].trig, want);
		}
		/* the command never ran */
		UKT_ASSERT(!strstr(r.out, "calls "));
		run_free(&r);
	}
	/* --trigger without EVENT: a usage error */
	struct run r = ukprobe("trace", "--trigger=stacktrace", DEF_C, "--", target("trig"), NULL);
	RUN_EXPECT(r, r.status == 2 &&
			      !strcmp(r.err, "ukprobe: error: An event name and ':' must come first "
					     "(EVENT:COMMAND)\n  Command: stacktrace\n           ^\n"));
	run_free(&r);
	/* --filter without EVENT: the same form, the caret where ':' is due */
	r = ukprobe("trace", "--filter=x == 1", DEF_C, "--", target("trig"), NULL);
	RUN_EXPECT(r, r.status == 2 &&
			      !strcmp(r.err, "ukprobe: error: An event name and ':' must come first "
					     "(EVENT:EXPR)\n  Command: x == 1\n            ^\n"));
	run_free(&r);
}

UKT_CASE_T(sigusr1_writes_the_histogram_so_far, 90)
{
	char *o = tmpfile_path();
	struct run r = ukprobe("trace", "-o", o, "--trigger=tr_c:hist:keys=x.log2", DEF_C, "--",
			       target("trig"), "2000", "usr1", o, NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, strstr(r.out, "half 1000\n"));
	char *out = slurp(o);
	unlink(o);
	const char *h1 = nth_hist(out, 0), *h2 = nth_hist(out, 1);
	UKT_ASSERT(h1 && h2 && !nth_hist(out, 2));
	unsigned long long hits, dropped;
	unsigned ent;
	hist_totals(h1, &hits, &ent, &dropped);
	UKT_EQ(hits, 1000);
	hist_totals(h2, &hits, &ent, &dropped);
	UKT_EQ(hits, 2000);
	free(out);
	run_free(&r);
}

UKT_CASE_T(json_stack_events, 60)
{
	struct run r = ukprobe("trace", "--format=json", "--trigger=tr_c:stacktrace:2", DEF_C, "--",
			       target("trig"), "20", NULL);
	RUN_EXPECT(r, r.status == 0);
	UKT_EQ(count_lines(r.out, "\"name\":\"<stack trace>\""), 2);
	RUN_EXPECT(r, strstr(r.out, "\"args\":{\"event\":\"tr_c\",\"stack\":[\"tr_c+0x0/0x"));
	run_free(&r);

	/* histograms: a member after the events, each the hist file's text */
	char *o = tmpfile_path();
	r = ukprobe("trace", "--format=json", "-o", o, "--trigger=tr_c:hist:keys=x.log2", DEF_C,
		    "--", target("trig"), "300", NULL);
	RUN_EXPECT(r, r.status == 0);
	char *out = slurp(o);
	unlink(o);
	const char *h = strstr(out, "\n]");
	UKT_ASSERT(h);
	if (strncmp(h, "\n],\"histograms\":[\n{\"event\":\"t/tr_c\",\"hist\":\"# event histogram\\n#"
			"\\n# trigger info: hist:keys=x.log2:vals=hitcount:sort=hitcount:size=2048 "
			"[active]\\n", 129))
		UKT_FAIL("tail:\n%s", h);
	UKT_ASSERT(strstr(h, "\\nTotals:\\n    Hits: 300\\n"));
	UKT_ASSERT(!strcmp(out + strlen(out) - 4, "\"}]}") || !strcmp(out + strlen(out) - 5, "\"}]}\n"));
	free(out);
	run_free(&r);
}

/* .hex .sym .sym-offset .execname and common_timestamp keys, in the
 * kernel's print forms */
UKT_CASE_T(key_modifiers, 60)
{
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct run r = ukprobe("trace", "--trigger=tr_c:hist:keys=x.hex",
			       "--trigger=tr_c:hist:keys=ip.sym",
			       "--trigger=tr_c:hist:keys=ip.sym-offset",
			       "--trigger=tr_c:hist:keys=common_pid.execname",
			       "--trigger=tr_c:hist:keys=common_timestamp.usecs:sort=common_timestamp",
			       "--trigger=tr_s:hist:keys=name.hex", "p:t/tr_c tr_c x=%di:u64 ip=%ip:x64",
			       DEF_S, "--", target("trig"), "4", NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* a string takes no .hex */
	RUN_EXPECT(r, r.status == 2 && strstr(r.err, "Invalid field modifier"));
	run_free(&r);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = ukprobe("trace", "--trigger=tr_c:hist:keys=x.hex", "--trigger=tr_c:hist:keys=ip.sym",
		    "--trigger=tr_c:hist:keys=ip.sym-offset",
		    "--trigger=tr_c:hist:keys=common_pid.execname",
		    "--trigger=tr_c:hist:keys=common_timestamp.usecs:sort=common_timestamp",
		    "p:t/tr_c tr_c x=%di:u64 ip=%ip:x64", "--", target("trig"), "4", NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	RUN_EXPECT(r, r.status == 0);
	for (int v = 0; v < 4; v++) {
		char line[64];
		snprintf(line, sizeof line, "\n{ x: %x } hitcount:          1\n", v);
		RUN_EXPECT(r, strstr(r.out, line));
	}
	/* "[%llx] %-45ps", "[%llx] %-55pS" */
	const char *h = strstr(r.out, "\n{ ip: [");
	UKT_ASSERT(h);
	unsigned long ip;
	UKT_ASSERT(sscanf(h, "\n{ ip: [%lx]", &ip) == 1);
	char want[256];
	snprintf(want, sizeof want, "\n{ ip: [%lx] %-45s } hitcount:          4\n", ip, "tr_c");
	RUN_EXPECT(r, strstr(r.out, want));
	const char *so = strstr(h + 1, "\n{ ip: [");
	UKT_ASSERT(so);
	char place[64];
	UKT_ASSERT(sscanf(so, "\n{ ip: [%*x] %63s", place) == 1);
	UKT_ASSERT(!strncmp(place, "tr_c+0x0/0x", 11));
	snprintf(want, sizeof want, "\n{ ip: [%lx] %-55s } hitcount:          4\n", ip, place);
	RUN_EXPECT(r, strstr(r.out, want));
	/* "%-16s[%10llu]": the thread's name and id */
	const char *ex = strstr(r.out, "\n{ common_pid: trig            [");
	RUN_EXPECT(r, ex);
	unsigned pid;
	UKT_ASSERT(sscanf(ex, "\n{ common_pid: trig            [%u] } hitcount:          4", &pid) == 1);
	UKT_ASSERT(pid > 1);
	/* CLOCK_MONOTONIC microseconds of the run, ascending */
	unsigned long long lo = (unsigned long long)t0.tv_sec * 1000000 + (unsigned long long)t0.tv_nsec / 1000;
	unsigned long long hi = (unsigned long long)t1.tv_sec * 1000000 + (unsigned long long)t1.tv_nsec / 1000;
	unsigned long long prev = 0;
	int n = 0;
	for (const char *p = strstr(r.out, "\n{ common_timestamp: "); p;
	     p = strstr(p + 1, "\n{ common_timestamp: ")) {
		unsigned long long us;
		UKT_ASSERT(sscanf(p, "\n{ common_timestamp: %llu }", &us) == 1);
		if (us < lo || us > hi || us < prev)
			UKT_FAIL("timestamp %llu outside [%llu, %llu] or before %llu", us, lo, hi, prev);
		prev = us;
		n++;
	}
	UKT_ASSERT(n >= 1 && n <= 4);
	run_free(&r);
}

/* the stack frames of gzip's write: gzip is stripped, its frames are
 * PATH[+0xOFF] with OFF in the file's addresses, so two runs (two
 * address space layouts) give the same lines, each frame right after a
 * call in the file */
static char *gzip_write_stack(const char *fmt, const char *trig)
{
	char in[] = "/tmp/ukt-stk-XXXXXX", out[] = "/tmp/ukt-stk-outXXXXXX";
	int fd = mkstemp(in);
	UKT_ASSERT(fd >= 0);
	for (int k = 0; k < 2000; k++)
		UKT_ASSERT(dprintf(fd, "line %d of something to compress\n", k) > 0);
	close(fd);
	fd = mkstemp(out);
	UKT_ASSERT(fd >= 0);
	close(fd);
	/* gzip's own output to stdout, the trace to a file */
	struct run r = ukprobe("trace", fmt, "-o", out, trig, "p:t/w libc.so.6:write", "--",
			       "/usr/bin/gzip", "-c", in, NULL);
	unlink(in);
	RUN_EXPECT(r, r.status == 0);
	run_free(&r);
	FILE *f = fopen(out, "r");
	UKT_ASSERT(f);
	static char buf[65536];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = 0;
	fclose(f);
	unlink(out);
	/* the frames only: the event's own line has the time in it */
	const char *p = strstr(buf, "<stack trace>\n");
	if (!p)
		p = strstr(buf, "{ common_stacktrace:\n");
	if (!strcmp(fmt, "--format=folded"))
		p = buf;
	if (!p)
		UKT_FAIL("no stack trace in:\n%s", buf);
	return strdup(p);
}

UKT_CASE_T(stripped_program_frames_stable_across_runs, 60)
{
#define STK "--trigger=w:stacktrace:1"
#define HST "--trigger=w:hist:keys=common_stacktrace"
	char *a = gzip_write_stack("--format=ftrace", STK);
	char *b = gzip_write_stack("--format=ftrace", STK);
	if (strcmp(a, b))
		UKT_FAIL("two runs, two stacks:\n%s\n%s", a, b);
	int n = 0;
	FILE *f = fopen("/usr/bin/gzip", "rb");
	UKT_ASSERT(f);
	Elf64_Ehdr eh;
	UKT_ASSERT(fread(&eh, sizeof eh, 1, f) == 1);
	for (const char *p = a; (p = strstr(p, " => /usr/bin/gzip[+0x")); p++, n++) {
		unsigned long va = strtoul(p + 21, NULL, 16), off = 0;
		for (int k = 0; k < eh.e_phnum; k++) {
			Elf64_Phdr ph;
			UKT_ASSERT(fseek(f, (long)(eh.e_phoff + (unsigned)k * sizeof ph), SEEK_SET) == 0 &&
				   fread(&ph, sizeof ph, 1, f) == 1);
			if (ph.p_type == PT_LOAD && va >= ph.p_vaddr + 6 &&
			    va < ph.p_vaddr + ph.p_filesz)
				off = va - ph.p_vaddr + ph.p_offset;
		}
		UKT_ASSERT(off);
		/* the byte 5 back is a call rel32's e8, or an indirect
		 * call's ff /2 is 2-6 back */
		unsigned char c[6];
		UKT_ASSERT(fseek(f, (long)off - 6, SEEK_SET) == 0 && fread(c, 1, 6, f) == 6);
		int call = c[1] == 0xe8;
		for (int k = 0; k < 5; k++)
			call |= c[k] == 0xff && ((c[k + 1] >> 3) & 7) == 2;
		if (!call)
			UKT_FAIL("frame gzip+0x%lx: no call before it", off);
	}
	fclose(f);
	UKT_ASSERT(n >= 2);
	free(a);
	free(b);
	/* folded, of stacktrace triggers and of histogram keys: the same
	 * frames, outermost first; the histogram's own stack lines */
	static const char *const forms[][2] = { { "--format=folded", STK },
		{ "--format=folded", HST }, { "--format=ftrace", HST } };
	for (int k = 0; k < 3; k++) {
		a = gzip_write_stack(forms[k][0], forms[k][1]);
		b = gzip_write_stack(forms[k][0], forms[k][1]);
		if (k < 2)
			UKT_ASSERT(strstr(a, ";/usr/bin/gzip[+0x") && strstr(a, ";write 1\n"));
		else
			UKT_ASSERT(strstr(a, "\n         /usr/bin/gzip[+0x"));
		if (strcmp(a, b))
			UKT_FAIL("%s %s: two runs, two outputs:\n%s\n%s", forms[k][0],
				 forms[k][1], a, b);
		free(a);
		free(b);
	}
}

/* folded frames of C++ code are demangled, as perf's and uftrace's are
 * (a flame graph of mangled names is unreadable); a name's blanks stay
 * (the count is after the last one), no ';' inside a frame */
UKT_CASE_T(folded_cxx_names_demangled, 60)
{
	static const char *const trig[] = { "--trigger=pf:stacktrace",
					    "--trigger=pf:hist:keys=common_stacktrace" };
	for (int k = 0; k < 2; k++) {
		char out[] = "/tmp/ukt-cxx-XXXXXX";
		int fd = mkstemp(out);
		UKT_ASSERT(fd >= 0);
		close(fd);
		struct run r = ukprobe("trace", "--format=folded", "-o", out, trig[k],
				       "p:t/pf libc.so.6:printf", "--", target("dcxx-gcc-O0"), NULL);
		RUN_EXPECT(r, r.status == 0);
		run_free(&r);
		FILE *f = fopen(out, "r");
		UKT_ASSERT(f);
		char line[4096];
		int n = 0, area = 0, tmpl = 0;
		while (fgets(line, sizeof line, f)) {
			n++;
			char *sp = strrchr(line, ' ');
			UKT_ASSERT(sp && atoi(sp + 1) == 1);
			*sp = 0;
			UKT_ASSERT(strncmp(line, "_start;", 7) == 0);
			UKT_ASSERT(!strstr(line, ";_Z"));
			area += strstr(line, ";main;geo::Shape::area(long, geo::Point const&);printf") != NULL;
			tmpl += strstr(line, ";main;unsigned long geo::minof<unsigned long>(unsigned long, "
				       "unsigned long);printf") != NULL;
		}
		fclose(f);
		unlink(out);
		UKT_EQ(n, 15);	/* the program's 15 printf calls, each from its own place */
		UKT_EQ(area, 1);
		UKT_EQ(tmpl, 1);
	}
}
