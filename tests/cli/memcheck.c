/* SPDX-License-Identifier: MIT */
/*
 * The command itself under valgrind's memcheck: launch, attach (twice to
 * one process), list, knob, JSON, stacks and histograms, source-level
 * places from DWARF, a library loaded later, bad input.  The target runs
 * natively (valgrind follows no child); the tracer side (parsers, the
 * symbolizer, the consumer, the DWARF reader) must read no uninitialised
 * or freed memory and leak nothing definitely.  A clean run is also a
 * right one: every case checks the output it expects.
 */
#include <signal.h>
#include <sys/prctl.h>
#include "run.h"

#define VG_ERR 97

/* libdw's own leak, which nothing of ukprobe's can free: dwarf_getscopes
 * (elfutils 0.188) keeps the scopes it found when it then fails to find an
 * inlined scope's abstract origin (corrupt or LTO DWARF: readelf's
 * section_name_print.part.0), and returns -1 */
static const char libdw_supp[] =
	"{\n"
	"   libdw-dwarf_getscopes-leaks-on-failure\n"
	"   Memcheck:Leak\n"
	"   match-leak-kinds: definite\n"
	"   fun:malloc\n"
	"   obj:*libdw*\n"
	"   ...\n"
	"   fun:dwarf_getscopes\n"
	"}\n";

/* the suppressions in a file of no name, open in valgrind as in us */
static const char *supp_file(void)
{
	static char arg[64];
	if (!arg[0]) {
		char path[] = "/tmp/ukprobe-memcheck-XXXXXX";
		int fd = mkstemp(path);
		UKT_ASSERT(fd >= 0);
		unlink(path);
		UKT_ASSERT(write(fd, libdw_supp, sizeof libdw_supp - 1) ==
			   (ssize_t)(sizeof libdw_supp - 1));
		snprintf(arg, sizeof arg, "--suppressions=/proc/self/fd/%d", fd);
	}
	return arg;
}

/* valgrind ... ukprobe ARGS..., with stdin from in_fd (or /dev/null) */
static struct run vg_in(int in_fd, const char *const *args)
{
	if (access("/usr/bin/valgrind", X_OK) != 0)
		UKT_FAIL("valgrind is not installed (scripts/install-deps)");
	char *argv[48];
	int n = 0;
	argv[n++] = (char *)"/usr/bin/valgrind";
	argv[n++] = (char *)"-q";
	argv[n++] = (char *)"--error-exitcode=97";
	argv[n++] = (char *)"--leak-check=full";
	argv[n++] = (char *)"--errors-for-leak-kinds=definite";
	argv[n++] = (char *)"--show-leak-kinds=definite";
	argv[n++] = (char *)supp_file();
	argv[n++] = (char *)ukprobe_path();
	for (; *args; args++) {
		UKT_ASSERT(n < 46);
		argv[n++] = (char *)*args;
	}
	argv[n] = NULL;
	return run_argv_in(argv, in_fd);
}

#define VG(...) vg_in(-1, (const char *const[]){ __VA_ARGS__, NULL })

/* no report of memcheck's ("==PID== ...") and its exit code not seen */
static void clean(const struct run *r)
{
	const char *p = r->err;
	while (p && *p) {
		if (p[0] == '=' && p[1] == '=' && p[2] >= '0' && p[2] <= '9') {
			show(r);
			UKT_FAIL("memcheck reported an error");
		}
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	RUN_EXPECT(*r, !(WIFEXITED(r->status) && WEXITSTATUS(r->status) == VG_ERR) &&
			       !(r->status >> 8 == VG_ERR));
}

UKT_CASE_T(launch_stacks_histogram_filter, 120)
{
	struct run r = VG("trace", "--trigger=tr_c:stacktrace:3", "--filter=tr_c:x >= 0",
			  "p:t/tr_c tr_c x=%di:u64", "r:t/tr_r tr_c ret=$retval:u64", "--",
			  target("trig"), "50");
	clean(&r);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, count_lines(r.out, " tr_c: (tr_c+0x0/") == 50);
	RUN_EXPECT(r, count_lines(r.out, " tr_r: (") == 50);
	RUN_EXPECT(r, count_lines(r.out, ": <stack trace>") == 3);
	run_free(&r);

	char o[] = "/tmp/ukt-vg-histXXXXXX";
	int fd = mkstemp(o);
	UKT_ASSERT(fd >= 0);
	close(fd);
	r = VG("trace", "-o", o, "--trigger=tr_c:hist:keys=x.log2",
	       "--trigger=tr_s:hist:keys=name:vals=hitcount", "p:t/tr_c tr_c x=%di:u64",
	       "p:t/tr_s tr_s name=+0(%di):string", "--", target("trig"), "50");
	clean(&r);
	RUN_EXPECT(r, r.status == 0);
	FILE *f = fopen(o, "r");
	UKT_ASSERT(f);
	char line[512];
	int buckets = 0, totals = 0;
	while (fgets(line, sizeof line, f)) {
		buckets += !strncmp(line, "{ x: ~ 2^", 9) || !strncmp(line, "{ name: ", 8);
		totals += !strncmp(line, "    Hits: 50", 12);
	}
	fclose(f);
	unlink(o);
	RUN_EXPECT(r, buckets >= 5 && totals == 2);
	run_free(&r);
}

UKT_CASE_T(launch_json, 120)
{
	struct run r = VG("trace", "--format=json", "p:t/tr_c tr_c x=%di:u64",
			  "r:t/tr_r tr_c ret=$retval:u64", "--", target("trig"), "20");
	clean(&r);
	RUN_EXPECT(r, r.status == 0);
	/* each return paired with its call */
	RUN_EXPECT(r, count_lines(r.out, "{\"name\":\"tr_c\",\"cat\":\"t\",\"ph\":\"X\"") == 20 &&
			      count_lines(r.out, ",\"ret\":") == 20);
	run_free(&r);
}


static struct proc start(const char *name)
{
	return proc_start(name, NULL);
}

static void stop(struct proc *p)
{
	UKT_ASSERT(write(p->in, "q", 1) == 1);
	close(p->in);
	char line[256], last[256] = "";
	while (fgets(line, sizeof line, p->out))
		snprintf(last, sizeof last, "%s", line);
	fclose(p->out);
	UKT_EQ(wait_status(p->pid), 0);
	UKT_ASSERT(!strncmp(last, "ok ", 3));
}

/* the second attach finds the engine's own mappings of the target's
 * files there, and the agent's log of its loads */
UKT_CASE_T(attach_twice_list_and_knob, 180)
{
	struct proc p = start("blocked");
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)p.pid);
	for (int round = 0; round < 2; round++) {
		struct run r = VG("trace", "-p", pid, "-d", "1", "p:t/tick tick n=%di:u64",
				  "r:t/tickret tick v=$retval:u64", "p:t/rd libc.so.6:read");
		clean(&r);
		RUN_EXPECT(r, r.status == 0);
		RUN_EXPECT(r, count_lines(r.out, " tick: (tick+0x0/") >= 1);
		RUN_EXPECT(r, count_lines(r.out, " <- tick) v=") >= 1);
		run_free(&r);
	}
	/* no trace attached now: list and knob say so, cleanly */
	struct run r = VG("list", "-p", pid);
	clean(&r);
	RUN_EXPECT(r, r.status != 0 && r.nerr > 0);
	run_free(&r);
	r = VG("knob", "-p", pid, "enabled", "0");
	clean(&r);
	RUN_EXPECT(r, r.status != 0 && r.nerr > 0);
	run_free(&r);
	stop(&p);
}

UKT_CASE_T(source_level, 180)
{
	const char *bin = target("dsrc-gcc-O2");
	struct run r = VG("probe", "-x", bin, "-F");
	clean(&r);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "work\n"));
	run_free(&r);
	r = VG("probe", "-x", bin, "-L", "work");
	clean(&r);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "int work("));
	run_free(&r);
	r = VG("probe", "-x", bin, "-V", "work");
	clean(&r);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "Available variables at work"));
	run_free(&r);
	r = VG("probe", "-x", bin, "-D", "p:dw/w work k");
	clean(&r);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "p:dw/w ") >= 1);
	run_free(&r);
	r = VG("trace", "p:dw/w work k", "--", bin);
	clean(&r);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " w: (work+0x") >= 1);
	run_free(&r);
	/* errors at a caret: unknown variable, line without code, bad file */
	static const char *const bad[] = { "p:dw/w work nosuchvar", "p:dw/w work:1000 k",
					   "p:dw/w nosuchfile.c:3" };
	for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
		r = VG("probe", "-x", bin, "-D", bad[k]);
		clean(&r);
		RUN_EXPECT(r, r.status != 0 && strchr(r.err, '^'));
		run_free(&r);
	}
}

/* Debian's readelf (LTO copies, scopes libdw does not find), C++
 * references and objects whole, a dereference around a variable */
UKT_CASE_T(source_level_real_programs, 240)
{
	const char *re = "/usr/bin/x86_64-linux-gnu-readelf";
	struct run r = VG("probe", "-x", re, "-V", "section_name_print");
	clean(&r);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "filedata"));
	run_free(&r);
	r = VG("probe", "-x", re, "-D", "p section_name_print $vars", "p apply_relocations $vars",
	       "r apply_relocations $retval");
	clean(&r);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "prev_reloc="));
	run_free(&r);
	r = VG("probe", "-x", target("dinh-gcc-O2"), "-D", "p bump n o r", "p Der::get this[0]",
	       "p bump x=+8(o):u32");
	clean(&r);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "p:") == 3);
	run_free(&r);
}

UKT_CASE_T(library_loaded_later, 120)
{
	char so[PATH_MAX + 32], def[PATH_MAX + 96];
	snprintf(so, sizeof so, "%s/solibs/dfr.so", build_dir());
	snprintf(def, sizeof def, "p:t/mix %s:dfr_mix a=%%di:s32", so);
	static const char script[] = "o\nc 10\nx\no\nc 5\nx\nq\n";
	char path[] = "/tmp/ukt-vg-inXXXXXX";
	int fd = mkstemp(path);
	UKT_ASSERT(fd >= 0);
	UKT_ASSERT(write(fd, script, strlen(script)) == (ssize_t)strlen(script));
	UKT_ASSERT(lseek(fd, 0, SEEK_SET) == 0);
	unlink(path);
	struct run r = vg_in(fd, (const char *const[]){ "trace", def, "--", target("loader"), so,
							NULL });
	close(fd);
	clean(&r);
	RUN_EXPECT(r, r.status == 0);
	/* two constructor calls and 15 of the script's, all named */
	RUN_EXPECT(r, count_lines(r.out, " mix: (dfr_mix+0x0/") == 17);
	run_free(&r);
}

UKT_CASE_T(bad_input, 120)
{
	static const char *const bad[] = {
		"p:t/x tick n=%zz", "p:t/x tick n=+0(%di", "r:t/x tick+4",
		"p:t/x nosuchsymbol", "p:t/x tick n=%di:u65", "q:t/x tick",
		"p:t/x tick n=$retval", "-:t/nosuch",
	};
	for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
		struct run r = VG("trace", bad[k], "--", target("trig"), "1");
		clean(&r);
		RUN_EXPECT(r, r.status != 0 && r.nerr > 0);
		run_free(&r);
	}
	struct run r = VG("trace", "--filter=t:x >", "p:t/x tr_c x=%di", "--", target("trig"), "1");
	clean(&r);
	RUN_EXPECT(r, r.status != 0 && strchr(r.err, '^'));
	run_free(&r);
	r = VG("trace", "--trigger=t:hist:keys=nosuch", "p:t/x tr_c x=%di", "--", target("trig"),
	       "1");
	clean(&r);
	RUN_EXPECT(r, r.status != 0 && r.nerr > 0);
	run_free(&r);
}
