/* SPDX-License-Identifier: MIT */
/* ukprobe's options, help and refusal of bad input (exit 2, error log). */
#include "run.h"

UKT_CASE(help_lists_every_option)
{
	struct run r = ukprobe("trace", "--help", NULL);
	RUN_EXPECT(r, r.status == 0);
	static const char *const opts[] = { "--pid=PID", "--duration=SECONDS",
		"--output=FILE", "--buffer-size=KB", "--profile",
		"--format=ftrace|json", "--filter=EVENT:EXPR", "--help",
		"default 65536" };
	for (size_t k = 0; k < sizeof opts / sizeof *opts; k++)
		RUN_EXPECT(r, strstr(r.out, opts[k]) != NULL);
	run_free(&r);
	r = ukprobe("--help", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "trace") && strstr(r.out, "Usage"));
	run_free(&r);
	r = ukprobe("help", "trace", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "--buffer-size=KB"));
	run_free(&r);
}

UKT_CASE(bad_usage_exits_2)
{
	static const char *const bad[][6] = {
		{ "nosuch", NULL },
		{ "trace", NULL },
		{ "trace", "p:a/b work", NULL },			/* neither -p nor -- */
		{ "trace", "--bogus", "p:a/b work", "--", "true", NULL },
		{ "trace", "-d", "x", "-p", "1", NULL },
		{ "trace", "-d", "-1", "-p", "1", NULL },
		{ "trace", "-b", "0", "p:a/b work", "--", "true" },
		{ "trace", "-b", "63", "p:a/b work", "--", "true" },	/* < one 64 KiB piece */
		{ "trace", "--format=xml", "p:a/b work", "--", "true" },
		{ "trace", "-p", "1", "p:a/b work", "--", "true" },
		{ "trace", "-d", "1", "p:a/b work", "--", "true" },
	};
	for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
		const char *a[7] = { 0 };
		memcpy(a, bad[k], sizeof bad[k]);
		struct run r = ukprobe(a[0], a[1], a[2], a[3], a[4], a[5], NULL);
		RUN_EXPECT(r, r.status == 2);
		RUN_EXPECT(r, r.nout == 0 && strncmp(r.err, "ukprobe: ", 9) == 0);
		RUN_EXPECT(r, strchr(r.err, '\n') == r.err + r.nerr - 1);	/* one line */
		run_free(&r);
	}
}

static void expect_caret(const struct run *r, const char *msg, const char *cmd, int offset);

/* a filter or trigger with no EVENT: before it: the error form */
UKT_CASE(filter_without_event_in_the_error_form)
{
	struct run r = ukprobe("trace", "--filter=nocolon", "p:a/b work", "--", "true", NULL);
	RUN_EXPECT(r, r.status == 2 && r.nout == 0);
	expect_caret(&r, "An event name and ':' must come first (EVENT:EXPR)", "nocolon", 7);
	run_free(&r);
}

/* the caret under cmd[offset]: "  Command: " is 11 columns */
static void expect_caret(const struct run *r, const char *msg, const char *cmd, int offset)
{
	char want[2048];
	snprintf(want, sizeof want, "ukprobe: error: %s\n  Command: %s\n%*s^\n", msg, cmd,
		 11 + offset, "");
	if (strcmp(r->err, want)) {
		show(r);
		UKT_FAIL("expected stderr:\n%s", want);
	}
}

UKT_CASE(bad_definition_caret_and_nothing_runs)
{
	char marker[] = "/tmp/ukt-cli-ranXXXXXX";
	int fd = mkstemp(marker);
	UKT_ASSERT(fd >= 0);
	close(fd);
	unlink(marker);
	const char *def = "p:grp/ev libc.so.6:malloc size=%dq";
	struct run r = ukprobe("trace", def, "--", "/usr/bin/touch", marker, NULL);
	RUN_EXPECT(r, r.status == 2 && r.nout == 0);
	expect_caret(&r, "Invalid fetch argument", def, (int)(strstr(def, "%dq") - def));
	UKT_ASSERT(access(marker, F_OK) != 0);		/* COMMAND never ran */
	run_free(&r);

	/* an unclosed parenthesis: the caret at the end */
	def = "p:grp/ev2 libc.so.6:malloc x=+8(%di";
	r = ukprobe("trace", def, "--", "/usr/bin/touch", marker, NULL);
	RUN_EXPECT(r, r.status == 2 && r.nout == 0 && strstr(r.err, "  Command: "));
	const char *caret = strrchr(r.err, '^');
	const char *line = caret;
	while (line > r.err && line[-1] != '\n')
		line--;
	RUN_EXPECT(r, caret - line == 11 + (long)strlen(def) ||
		      caret - line == 11 + (long)(strchr(def, '(') - def));
	UKT_ASSERT(access(marker, F_OK) != 0);
	run_free(&r);

	/* $retval on a probe */
	def = "p:grp/ev3 libc.so.6:malloc r=$retval";
	r = ukprobe("trace", def, "--", "/usr/bin/touch", marker, NULL);
	RUN_EXPECT(r, r.status == 2);
	expect_caret(&r, "$retval is not available on probe", def, (int)(strstr(def, "$retval") - def));
	UKT_ASSERT(access(marker, F_OK) != 0);
	run_free(&r);
}

UKT_CASE(bad_filter_caret)
{
	const char *def = "p:grp/ev libc.so.6:malloc size=%di:u64";
	struct run r = ukprobe("trace", "--filter=ev:nosuch > 3", def, "--", "/bin/true", NULL);
	RUN_EXPECT(r, r.status == 2 && r.nout == 0);
	expect_caret(&r, "Field not found", "nosuch > 3", 0);
	run_free(&r);
	r = ukprobe("trace", "--filter=grp/other:size > 3", def, "--", "/bin/true", NULL);
	RUN_EXPECT(r, r.status == 2);
	expect_caret(&r, "Unknown event", "grp/other:size > 3", 0);
	run_free(&r);
	r = ukprobe("trace", "--filter=grp/ev:size > 3 &&", def, "--", "/bin/true", NULL);
	RUN_EXPECT(r, r.status == 2 && strstr(r.err, "  Command: size > 3 &&\n"));
	run_free(&r);
}

/* an unknown symbol is found in the target: refused before main */
UKT_CASE(unknown_symbol_in_target)
{
	char marker[] = "/tmp/ukt-cli-ranXXXXXX";
	int fd = mkstemp(marker);
	UKT_ASSERT(fd >= 0);
	close(fd);
	unlink(marker);
	const char *def = "p:grp/ev libc.so.6:no_such_function_here x=%di";
	struct run r = ukprobe("trace", "p:grp/ok libc.so.6:malloc", def, "--",
			       "/usr/bin/touch", marker, NULL);
	RUN_EXPECT(r, r.status == 2 && r.nout == 0);
	/* the caret under the offending word: the symbol */
	expect_caret(&r, "Unknown symbol", def, (int)(strstr(def, "no_such") - def));
	UKT_ASSERT(access(marker, F_OK) != 0);
	run_free(&r);
}
