/* SPDX-License-Identifier: MIT */
/*
 * Statements of the contract (docs: /work/shared/CLI.md) no other CLI test
 * asserts: the kernel's default event names and group, the 0xADDR and
 * OBJ:0xN places, the %flags, $stack, $stackN, +u, @SYM+-OFFS and
 * @OBJ:SYM fetches (values the target itself saw), strings cut at 255
 * bytes, the 128-fetcharg and 64-element limits, the traceon trigger,
 * hist sort=F.descending and :name=H (accepted).  The target (targets/contract.c)
 * prints what it passes; ukprobe's lines must say exactly that.
 */
#include <sys/personality.h>
#include "run.h"

/* the value of the target's line "key V..." (its n-th word after key) */
static char *said(const char *out, const char *key, int n)
{
	char k[64];
	snprintf(k, sizeof k, "%s ", key);
	size_t kl = strlen(k);
	for (const char *p = out; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (strncmp(p, k, kl))
			continue;
		const char *w = p + kl;
		for (int i = 0; i < n; i++) {
			w += strcspn(w, " \n");
			if (*w != ' ')
				UKT_FAIL("line '%s' has no word %d", key, n);
			w++;
		}
		return strndup(w, strcspn(w, " \n"));
	}
	UKT_FAIL("the target said no '%s' line", key);
}

/* the n-th line of ev's arguments equals want exactly */
static void expect_args(const struct run *r, const char *ev, int n, const char *want)
{
	char *got = event_args(r->out, ev, n);
	if (!got || strcmp(got, want)) {
		show(r);
		UKT_FAIL("%s #%d:\n  want: %s\n  got:  %s", ev, n, want, got ? got : "(no line)");
	}
	free(got);
}

/* the line of stderr that starts with "GRP/EVENT " (--profile): hits and
 * misses */
static int profile(const char *err, const char *ev, unsigned long *hits, unsigned long *miss)
{
	for (const char *p = err; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		char name[128];
		if (sscanf(p, "%127s %lu %lu", name, hits, miss) == 3 && !strcmp(name, ev))
			return 1;
	}
	return 0;
}

/* the path of the libc.so.6 this process (and every target) runs with */
static void libc_path(char *path, size_t n)
{
	FILE *m = fopen("/proc/self/maps", "r");
	char line[PATH_MAX + 128];
	path[0] = 0;
	while (m && fgets(line, sizeof line, m)) {
		char *p = strchr(line, '/');
		if (p && strstr(p, "/libc.so.6")) {
			p[strcspn(p, "\n")] = 0;
			snprintf(path, n, "%s", p);
			break;
		}
	}
	if (m)
		fclose(m);
	UKT_ASSERT(path[0]);
}

/*
 * EVENT defaults as the kernel names them: p_SYM_OFFS with OFFS in
 * decimal, r_ for every return probe (%return included), GRP ukprobes
 * unless given (GRP/ with no EVENT: the default name in GRP).
 * ct_place is 16 one-byte nops and a ret: 0x11 bytes.
 */
UKT_CASE_T(default_event_names_and_group, 60)
{
	struct run r = ukprobe("trace", "--profile", "p ct_place", "p ct_place+4", "p ct_place+0x10",
			       "r ct_place", "p:g/ ct_place+2", "p:myev ct_place+3", "--",
			       target("contract"), "place", NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, count_lines(r.out, " p_ct_place_0: (ct_place+0x0/0x11)") == 1);
	RUN_EXPECT(r, count_lines(r.out, " p_ct_place_4: (ct_place+0x4/0x11)") == 1);
	RUN_EXPECT(r, count_lines(r.out, " p_ct_place_16: (ct_place+0x10/0x11)") == 1);
	RUN_EXPECT(r, count_lines(r.out, " p_ct_place_2: (ct_place+0x2/0x11)") == 1);
	RUN_EXPECT(r, count_lines(r.out, " myev: (ct_place+0x3/0x11)") == 1);
	RUN_EXPECT(r, count_lines(r.out, " r_ct_place_0: (main+0x") == 1);
	RUN_EXPECT(r, count_lines(r.out, " <- ct_place)") == 1);
	/* no name in hex, none other */
	RUN_EXPECT(r, count_lines(r.out, "p_ct_place_0x") == 0);
	RUN_EXPECT(r, count_lines(r.out, ": (") == 6);
	/* the groups: uprobe_profile's GRP/EVENT */
	static const char *const evs[] = { "ukprobes/p_ct_place_0", "ukprobes/p_ct_place_4",
		"ukprobes/p_ct_place_16", "ukprobes/r_ct_place_0", "g/p_ct_place_2", "ukprobes/myev" };
	for (unsigned k = 0; k < sizeof evs / sizeof *evs; k++) {
		unsigned long hits = 0, miss = 9;
		if (!profile(r.err, evs[k], &hits, &miss) || hits != 1 || miss != 0) {
			show(&r);
			UKT_FAIL("--profile: no '%s 1 0'", evs[k]);
		}
	}
	run_free(&r);

	/* PLACE%return: r_ as well */
	r = ukprobe("trace", "--profile", "p ct_place%return", "--", target("contract"), "place",
		    NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, count_lines(r.out, " r_ct_place_0: (main+0x") == 1);
	RUN_EXPECT(r, count_lines(r.out, " <- ct_place)") == 1);
	RUN_EXPECT(r, count_lines(r.out, "p_ct_place") == 0);
	unsigned long hits, miss;
	RUN_EXPECT(r, profile(r.err, "ukprobes/r_ct_place_0", &hits, &miss) && hits == 1);
	run_free(&r);

	/* r with MAXACTIVE, and OBJ:SYM places: named by SYM alike */
	r = ukprobe("trace", "--profile", "r5 ct_place", "p libc.so.6:getpid", "r libc.so.6:getpid",
		    "--", target("contract"), "place", NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, count_lines(r.out, " r_ct_place_0: (main+0x") == 1);
	RUN_EXPECT(r, profile(r.err, "ukprobes/r_ct_place_0", &hits, &miss) && hits == 1);
	RUN_EXPECT(r, profile(r.err, "ukprobes/p_getpid_0", &hits, &miss));
	RUN_EXPECT(r, profile(r.err, "ukprobes/r_getpid_0", &hits, &miss));
	run_free(&r);

	/* the group as JSON's "cat" */
	r = ukprobe("trace", "--format=json", "p ct_place+4", "p:g/ ct_place+2", "--",
		    target("contract"), "place", NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, count_lines(r.out, "{\"name\":\"p_ct_place_4\",\"cat\":\"ukprobes\",\"ph\":\"i\"") == 1);
	RUN_EXPECT(r, count_lines(r.out, "{\"name\":\"p_ct_place_2\",\"cat\":\"g\",\"ph\":\"i\"") == 1);
	run_free(&r);
}

/*
 * p_OBJBASENAME_0xN for a file offset (N in hex; '.', '-' and other
 * characters but letters, digits and _ become _), r_ for a return probe
 * there; the place symbolised as any.
 */
UKT_CASE_T(file_offset_event_names, 60)
{
	char libc[PATH_MAX];
	libc_path(libc, sizeof libc);
	long gp = sym_file_offset(libc, "getpid");
	UKT_ASSERT(gp > 0);
	const char *bin = target("contract");
	long fl = sym_file_offset(bin, "ct_flags");
	UKT_ASSERT(fl > 0);
	char d1[64], d2[64], d3[PATH_MAX + 64];
	snprintf(d1, sizeof d1, "p libc.so.6:0x%lx", gp);
	snprintf(d2, sizeof d2, "r libc.so.6:0x%lx", gp);
	snprintf(d3, sizeof d3, "p %s:0x%lx f=%%flags", bin, fl + 3);
	struct run r = ukprobe("trace", d1, d2, d3, "--", bin, "fetch", NULL);
	RUN_EXPECT(r, r.status == 0);
	char want[128];
	/* the target calls getpid once itself (others may too) */
	snprintf(want, sizeof want, " p_libc_so_6_0x%lx: (getpid+0x0/0x", gp);
	RUN_EXPECT(r, count_lines(r.out, want) >= 1);
	RUN_EXPECT(r, count_lines(r.out, want) == count_lines(r.out, ": (getpid+0x0/0x"));
	snprintf(want, sizeof want, " r_libc_so_6_0x%lx: (", gp);
	RUN_EXPECT(r, count_lines(r.out, want) >= 1);
	RUN_EXPECT(r, count_lines(r.out, want) == count_lines(r.out, " <- getpid [libc.so.6])"));
	RUN_EXPECT(r, count_lines(r.out, " <- getpid [libc.so.6])") >= 1);
	/* the main executable by its path: ct_flags+3, its 4 calls */
	snprintf(want, sizeof want, " p_contract_0x%lx: (ct_flags+0x3/0x6)", fl + 3);
	RUN_EXPECT(r, count_lines(r.out, want) == 4);
	run_free(&r);

	/* a '-' in the base name */
	const char *dsrc = target("dsrc-gcc-O0");
	long work = sym_file_offset(dsrc, "work");
	UKT_ASSERT(work > 0);
	snprintf(d3, sizeof d3, "p %s:0x%lx", dsrc, work);
	r = ukprobe("trace", d3, "--", dsrc, NULL);
	RUN_EXPECT(r, r.status == 0);
	snprintf(want, sizeof want, " p_dsrc_gcc_O0_0x%lx: (work+0x0/0x", work);
	RUN_EXPECT(r, count_lines(r.out, want) >= 1);
	RUN_EXPECT(r, count_lines(r.out, want) == count_lines(r.out, ": ("));
	run_free(&r);
}

/* the lines of events p_ADDR and r_ADDR in r: ADDR's place, x=AT */
static void expect_address_events(const struct run *r, const char *addr, const char *at,
				  int at_least)
{
	char want[128], ev[64];
	snprintf(want, sizeof want, " p_%s: (ct_take+0x0/0x", addr);
	int n = count_lines(r->out, want);
	RUN_EXPECT(*r, n >= at_least && n == count_lines(r->out, ": (ct_take+0x0/0x"));
	snprintf(ev, sizeof ev, "p_%s", addr);
	snprintf(want, sizeof want, "x=%s", at);
	for (int k = 0; k < n; k++)
		expect_args(r, ev, k, want);
	snprintf(want, sizeof want, " r_%s: (", addr);
	RUN_EXPECT(*r, count_lines(r->out, want) >= at_least);
	RUN_EXPECT(*r, count_lines(r->out, want) == count_lines(r->out, " <- ct_take)"));
}

/*
 * 0xADDR, an address in the target: p_0xADDR and r_0xADDR.  Attached to
 * a running target, which says where its ct_take is; and launched
 * without address space randomisation (handed down to ukprobe and the
 * program), so that ct_take's address is that of a run before, which the
 * program prints again to prove it.
 */
UKT_CASE_T(address_place, 60)
{
	struct proc p = proc_start("contract", "loop");
	char line[128], addr[40], at[40], pid[16];
	UKT_ASSERT(fgets(line, sizeof line, p.out) && sscanf(line, "addr ct_take %39s", addr) == 1);
	UKT_ASSERT(fgets(line, sizeof line, p.out) && sscanf(line, "at %39s", at) == 1);
	UKT_ASSERT(!strncmp(addr, "0x", 2) && strtoul(addr, NULL, 16) > 0);
	snprintf(pid, sizeof pid, "%d", (int)p.pid);
	char d1[64], d2[64];
	snprintf(d1, sizeof d1, "p %s x=%%di", addr);
	snprintf(d2, sizeof d2, "r %s", addr);
	struct run r = ukprobe("trace", "-p", pid, "-d", "0.5", d1, d2, NULL);
	RUN_EXPECT(r, r.status == 0);
	expect_address_events(&r, addr, at, 2);
	RUN_EXPECT(r, count_lines(r.out, " <- ct_take)") == count_lines(r.out, ": (main+0x"));
	run_free(&r);
	close(p.in);
	UKT_EQ(wait_status(p.pid), 0);
	fclose(p.out);

	if (personality(ADDR_NO_RANDOMIZE) == -1) {
		printf("  personality(ADDR_NO_RANDOMIZE) refused (%s): launch case not run\n",
		       strerror(errno));
		return;
	}
	char *argv[] = { (char *)target("contract"), (char *)"addr", NULL };
	struct run a = run_argv(argv);
	RUN_EXPECT(a, a.status == 0);
	char *fixed = said(a.out, "addr ct_take", 0);
	snprintf(d1, sizeof d1, "p %s x=%%di", fixed);
	snprintf(d2, sizeof d2, "r %s", fixed);
	r = ukprobe("trace", d1, d2, "--", target("contract"), "fetch", NULL);
	RUN_EXPECT(r, r.status == 0);
	char *again = said(r.out, "addr ct_take", 0);
	UKT_STREQ(again, fixed);
	char *at2 = said(r.out, "at", 0);
	expect_address_events(&r, fixed, at2, 1);
	RUN_EXPECT(r, count_lines(r.out, " <- ct_take)") == 1);
	RUN_EXPECT(r, count_lines(r.out, ": (fetch+0x") == 1);
	free(at2);
	free(again);
	free(fixed);
	run_free(&r);
	run_free(&a);
}

/*
 * %flags (rflags as pushfq sees them there), $stack (rsp), $stackN (its
 * Nth word), +u / -u (the u ignored), @SYM+OFFS and @SYM-OFFS of data,
 * @OBJ:SYM of a library's variable: what the target saw.
 */
UKT_CASE_T(fetch_forms_as_the_target_sees_them, 60)
{
	struct run r = ukprobe(
		"trace",
		"p:t/take ct_take v0=+u0(%di):u64 v0k=+0(%di):u64 v1=+u8(%di):s64"
		" s=+u0(+u16(%di)):string a0=-u8(+u88(%di)):u8 a8=+u0(+u88(%di)):u8"
		" a1=-u7(+88(%di)):u8",
		"p:t/data ct_take t0=@ct_tbl:u64 t1=@ct_tbl+8:u64 t1m=@ct_tbl_mid-8:u64"
		" t0m=@ct_tbl_mid-16:u64 t2=@ct_tbl_mid:u64 t3=@ct_tbl_mid+8:u64"
		" p=@libc.so.6:program_invocation_short_name"
		" ps=+0(@libc.so.6:program_invocation_short_name):string",
		"p:t/flags ct_flags+3 f=%flags",
		"p:t/stack ct_stack sp=$stack st0=$stack0 st1=$stack1 st2=$stack2",
		"--", target("contract"), "fetch", NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, strstr(r.err, "ukprobe: 0 events lost\n"));
	char want[1024];
	char *v0 = said(r.out, "take", 0), *v1 = said(r.out, "take", 1), *str = said(r.out, "take", 2);
	char *e0 = said(r.out, "take", 3), *e8 = said(r.out, "take", 11), *e1 = said(r.out, "take", 4);
	snprintf(want, sizeof want, "v0=%s v0k=%s v1=%s s=\"%s\" a0=%s a8=%s a1=%s", v0, v0, v1, str,
		 e0, e8, e1);
	expect_args(&r, "take", 0, want);

	char *t[4];
	for (int k = 0; k < 4; k++)
		t[k] = said(r.out, "tbl", k);
	char *pv = said(r.out, "pisn", 0), *pn = said(r.out, "pisn", 1);
	UKT_STREQ(pn, "contract");
	snprintf(want, sizeof want, "t0=%s t1=%s t1m=%s t0m=%s t2=%s t3=%s p=%s ps=\"%s\"", t[0], t[1],
		 t[1], t[0], t[2], t[3], pv, pn);
	expect_args(&r, "data", 0, want);

	/* one line a call, each its own flags */
	int n = 0;
	for (const char *p = r.out; (p = strstr(p, "\nflags ")); p++, n++) {
		char f[32];
		UKT_ASSERT(sscanf(p + 7, "%31s", f) == 1);
		snprintf(want, sizeof want, "f=%s", f);
		expect_args(&r, "flags", n, want);
	}
	UKT_EQ(n, 4);
	char *none = event_args(r.out, "flags", 4);
	UKT_ASSERT(!none);

	char *s[4];
	for (int k = 0; k < 4; k++)
		s[k] = said(r.out, "stack", k);
	snprintf(want, sizeof want, "sp=%s st0=%s st1=%s st2=%s", s[0], s[1], s[2], s[3]);
	expect_args(&r, "stack", 0, want);
	for (int k = 0; k < 4; k++) {
		free(t[k]);
		free(s[k]);
	}
	free(v0);
	free(v1);
	free(str);
	free(e0);
	free(e8);
	free(e1);
	free(pv);
	free(pn);
	run_free(&r);
}

/* strings (string and ustring) are recorded whole up to 255 bytes and cut
 * to their first 255 bytes beyond */
UKT_CASE_T(strings_cut_at_255_bytes, 60)
{
	struct run r = ukprobe("trace", "p:t/s ct_str s=+0(%di):string u=+0(%di):ustring", "--",
			       target("contract"), "str", NULL);
	RUN_EXPECT(r, r.status == 0);
	static const int lens[] = { 254, 255, 256, 300, 5000 };
	static char txt[5001];
	for (int k = 0; k < 5000; k++)
		txt[k] = (char)('a' + k % 26);
	for (int k = 0; k < 5; k++) {
		char line[32];
		snprintf(line, sizeof line, "str %d\n", lens[k]);
		RUN_EXPECT(r, strstr(r.out, line));
		int n = lens[k] < 255 ? lens[k] : 255;
		char want[11000];
		snprintf(want, sizeof want, "s=\"%.*s\" u=\"%.*s\"", n, txt, n, txt);
		expect_args(&r, "s", k, want);
	}
	char *none = event_args(r.out, "s", 5);
	UKT_ASSERT(!none);
	run_free(&r);
}

/* the error log's form: the message, the Command: line, a caret under
 * column col of it */
static void expect_refused(const struct run *r, const char *msg, const char *cmd, size_t col)
{
	size_t n = strlen(msg) + strlen(cmd) + col + 64;
	char *want = malloc(n);
	snprintf(want, n, "ukprobe: error: %s\n  Command: %s\n%*s^\n", msg, cmd, (int)(11 + col), "");
	if (r->status != 2 || strcmp(r->err, want)) {
		show(r);
		UKT_FAIL("want status 2 and stderr\n%s", want);
	}
	/* COMMAND never ran */
	UKT_ASSERT(!strstr(r->out, "addr ct_take"));
	free(want);
}

/* up to 128 fetchargs (named arg1..arg128 by default); a 129th refused,
 * the caret under it (the offending word) */
UKT_CASE_T(fetcharg_limit_128, 60)
{
	char def[2048] = "p:t/many ct_take";
	for (int k = 0; k < 128; k++)
		strcat(def, " %di");
	struct run r = ukprobe("trace", def, "--", target("contract"), "fetch", NULL);
	RUN_EXPECT(r, r.status == 0);
	char *at = said(r.out, "at", 0);
	char want[8192] = "";
	for (int k = 1; k <= 128; k++) {
		char a[64];
		snprintf(a, sizeof a, "%sarg%d=%s", k > 1 ? " " : "", k, at);
		strcat(want, a);
	}
	expect_args(&r, "many", 0, want);
	free(at);
	run_free(&r);

	size_t col = strlen(def) + 1;
	strcat(def, " x=%si");
	r = ukprobe("trace", def, "--", target("contract"), "fetch", NULL);
	expect_refused(&r, "Too many arguments are specified", def, col);
	run_free(&r);
}

/* TYPE[N] up to 64 elements; 65 refused, the caret under N (the kernel's
 * place for it) */
UKT_CASE_T(array_limit_64, 60)
{
	struct run r = ukprobe("trace", "p:t/arr ct_take a=+24(%di):u8[64] b=+u24(%di):x8[2]", "--",
			       target("contract"), "fetch", NULL);
	RUN_EXPECT(r, r.status == 0);
	char want[1024] = "a={";
	for (int k = 0; k < 64; k++) {
		char *e = said(r.out, "take", 3 + k);
		strcat(want, e);
		strcat(want, k < 63 ? "," : "}");
		free(e);
	}
	char *e0 = said(r.out, "take", 3), *e1 = said(r.out, "take", 4);
	char b[64];
	snprintf(b, sizeof b, " b={0x%lx,0x%lx}", strtoul(e0, NULL, 10), strtoul(e1, NULL, 10));
	strcat(want, b);
	expect_args(&r, "arr", 0, want);
	free(e0);
	free(e1);
	run_free(&r);

	const char *bad = "p:t/arr ct_take v=%si a=+24(%di):u8[65]";
	r = ukprobe("trace", bad, "--", target("contract"), "fetch", NULL);
	expect_refused(&r, "Array number is too big", bad, strlen(bad) - 3);
	run_free(&r);
}

/* which of ct_tick's i values have a line, into seen[0..n) (each counted) */
static void ticks(const struct run *r, int *seen, int n)
{
	memset(seen, 0, sizeof *seen * (size_t)n);
	int last = -1;
	for (const char *p = r->out; (p = strstr(p, " tick: (ct_tick+0x0/0x")); p++) {
		const char *q = strstr(p, ") i=");
		UKT_ASSERT(q);
		int i = atoi(q + 4);
		UKT_ASSERT(i >= 0 && i < n);
		UKT_ASSERT(i > last);	/* in the order recorded */
		last = i;
		seen[i]++;
	}
}

/*
 * traceoff then traceon: the events between are missing, those after
 * traceon are there (the ring buffer switched off and on again, for every
 * event).
 */
UKT_CASE_T(traceon_after_traceoff, 60)
{
	int seen[200];
	struct run r = ukprobe("trace", "--trigger=off:traceoff", "--trigger=on:traceon",
			       "p:t/tick ct_tick i=%di:u64", "p:t/off ct_off", "p:t/on ct_on", "--",
			       target("contract"), "onoff", "200", "50", "120", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "ticks 200\n"));
	ticks(&r, seen, 200);
	for (int i = 0; i < 200; i++)
		if (seen[i] != (i < 50 || i >= 120))
			UKT_FAIL("tick %d: %d lines", i, seen[i]);
	run_free(&r);

	/* with conditions, on the ticks themselves: off at 50 (whose line is
	 * written: a conditional trigger runs after its event), on at 120 */
	r = ukprobe("trace", "--trigger=tick:traceoff if i == 50",
		    "--trigger=tick:traceon if i == 120", "p:t/tick ct_tick i=%di:u64", "--",
		    target("contract"), "onoff", "200", "1000", "1000", NULL);
	RUN_EXPECT(r, r.status == 0);
	ticks(&r, seen, 200);
	for (int i = 0; i < 200; i++)
		if (i != 120 && seen[i] != (i <= 50 || i > 120))
			UKT_FAIL("tick %d: %d lines", i, seen[i]);
	run_free(&r);
}

/* the target's own count of tr_s(name) calls */
static unsigned long long str_count(const char *out, const char *name)
{
	char key[32];
	snprintf(key, sizeof key, "\nstr %s ", name);
	const char *p = strstr(out, key);
	UKT_ASSERT(p);
	return strtoull(p + strlen(key), NULL, 10);
}

/* the entries of the histogram starting at h ("{ name: N } hitcount: C"),
 * in order, into names/counts; their number */
static int hist_entries(const char *h, char names[][16], unsigned long long *counts, int max)
{
	int n = 0;
	const char *end = strstr(h, "\nTotals:\n");
	UKT_ASSERT(end);
	for (const char *p = strstr(h, "\n{ name: "); p && p < end && n < max;
	     p = strstr(p + 1, "\n{ name: ")) {
		if (sscanf(p, "\n{ name: %15s } hitcount: %llu", names[n], &counts[n]) != 2)
			UKT_FAIL("bad line %.80s", p + 1);
		n++;
	}
	return n;
}

/*
 * sort=F.descending: entries from the largest F down (hitcount, and a
 * string key), the trigger info as the kernel prints it; :name=H is
 * accepted, its info line the kernel's "hist:name=H:keys=...".
 */
UKT_CASE_T(hist_sort_descending_and_name, 60)
{
	static const char *const names[] = { "alpha", "beta", "gamma", "delta" };
	struct run r = ukprobe("trace", "--trigger=tr_s:hist:keys=name:vals=hitcount:sort=hitcount.descending",
			       "--trigger=tr_s:hist:keys=name:sort=name.descending",
			       "--trigger=tr_s:hist:keys=name:vals=hitcount:name=H",
			       "p:t/tr_s tr_s name=+0(%di):string", "--", target("trig"), "300",
			       NULL);
	RUN_EXPECT(r, r.status == 0);
	unsigned long long own[4];
	for (int k = 0; k < 4; k++)
		own[k] = str_count(r.out, names[k]);
	static const char *const info[] = {
		"# trigger info: hist:keys=name:vals=hitcount:sort=hitcount.descending:size=2048 [active]\n",
		"# trigger info: hist:keys=name:vals=hitcount:sort=name.descending:size=2048 [active]\n",
		"# trigger info: hist:name=H:keys=name:vals=hitcount:sort=hitcount:size=2048 [active]\n",
	};
	const char *h = r.out;
	for (int j = 0; j < 3; j++) {
		h = strstr(h, "# event histogram\n#\n");
		RUN_EXPECT(r, h != NULL);
		h += 20;
		if (info[j] && strncmp(h, info[j], strlen(info[j])))
			UKT_FAIL("histogram %d: want\n%sgot\n%.200s", j, info[j], h);
		char got[8][16];
		unsigned long long cnt[8];
		int n = hist_entries(h, got, cnt, 8);
		UKT_EQ(n, 4);
		for (int k = 0; k < 4; k++) {
			int w = 0;
			while (w < 4 && strcmp(names[w], got[k]))
				w++;
			UKT_ASSERT(w < 4);
			UKT_EQ(cnt[k], own[w]);	/* the target's own count */
			if (k == 0)
				continue;
			if (j == 0)
				UKT_ASSERT(cnt[k] <= cnt[k - 1]);
			if (j == 1)
				UKT_ASSERT(strcmp(got[k], got[k - 1]) < 0);
		}
		RUN_EXPECT(r, strstr(h, "\nTotals:\n    Hits: 300\n    Entries: 4\n    Dropped: 0\n"));
	}
	/* the counts differ: descending is an order to check */
	UKT_ASSERT(own[0] != own[1] && own[0] != own[2] && own[1] != own[2]);
	run_free(&r);
}

/* triggers of one name on two events share their data, as the kernel's
 * named histograms do (histogram.rst): each event's histogram shows the
 * sum, every count twice the target's own (both events are on tr_s) */
UKT_CASE_T(named_histograms_share_their_data, 60)
{
	static const char *const names[] = { "alpha", "beta", "gamma", "delta" };
	struct run r = ukprobe("trace", "--trigger=a:hist:name=H:keys=name:vals=hitcount",
			       "--trigger=b:hist:name=H:keys=name:vals=hitcount",
			       "--trigger=b:hist:keys=name",
			       "p:t/a tr_s name=+0(%di):string", "p:t/b tr_s name=+0(%di):string",
			       "--", target("trig"), "300", NULL);
	RUN_EXPECT(r, r.status == 0);
	unsigned long long own[4];
	for (int k = 0; k < 4; k++)
		own[k] = str_count(r.out, names[k]);
	const char *h = r.out;
	for (int j = 0; j < 3; j++) {
		h = strstr(h, "# event histogram\n#\n");
		RUN_EXPECT(r, h != NULL);
		h += 20;
		char got[8][16];
		unsigned long long cnt[8];
		UKT_EQ(hist_entries(h, got, cnt, 8), 4);
		for (int k = 0; k < 4; k++) {
			int w = 0;
			while (w < 4 && strcmp(names[w], got[k]))
				w++;
			UKT_ASSERT(w < 4);
			/* the third, unnamed, is b's alone */
			UKT_EQ(cnt[k], (j < 2 ? 2 : 1) * own[w]);
		}
		RUN_EXPECT(r, strstr(h, j < 2 ? "\nTotals:\n    Hits: 600\n" : "\nTotals:\n    Hits: 300\n"));
	}
	run_free(&r);
}
