/* SPDX-License-Identifier: MIT */
/*
 * Places in a library the program has not loaded yet, given by path (as
 * uprobe_events takes them): checked against the file at once, armed
 * each time the library loads (before its constructors run), taken back
 * when it is unloaded and armed again at its next load, wherever it
 * lands; at launch and at attach.  Bad places in such a file are refused
 * as any bad definition is.
 */
#include <dlfcn.h>
#include "run.h"

static const char *dfr_so(void)
{
	static char p[PATH_MAX + 32];
	snprintf(p, sizeof p, "%s/solibs/dfr.so", build_dir());
	return p;
}

/* ukprobe trace OPTS... DEFS... -- loader LIB, with script as stdin */
static struct run run_loader_lib(const char *script, const char *const *args, const char *lib)
{
	char path[] = "/tmp/ukt-dfr-inXXXXXX";
	int fd = mkstemp(path);
	UKT_ASSERT(fd >= 0);
	UKT_ASSERT(write(fd, script, strlen(script)) == (ssize_t)strlen(script));
	UKT_ASSERT(lseek(fd, 0, SEEK_SET) == 0);
	unlink(path);
	char *argv[32];
	int n = 0;
	argv[n++] = (char *)ukprobe_path();
	argv[n++] = (char *)"trace";
	for (; *args && n < 26; args++)
		argv[n++] = (char *)*args;
	argv[n++] = (char *)"--";
	argv[n++] = (char *)target("loader");
	argv[n++] = (char *)lib;
	argv[n] = NULL;
	struct run r = run_argv_in(argv, fd);
	close(fd);
	return r;
}

static struct run run_loader(const char *script, const char *const *args)
{
	return run_loader_lib(script, args, dfr_so());
}

/* the values of " key=" on the lines of event ev, in order; their count */
static int values(const char *out, const char *ev, const char *key, long *v, int max)
{
	char pat[64], k[32];
	snprintf(pat, sizeof pat, " %s: (", ev);
	snprintf(k, sizeof k, " %s=", key);
	int n = 0;
	for (const char *p = out; (p = strstr(p, pat)); p++) {
		const char *eol = strchr(p, '\n');
		const char *q = strstr(p, k);
		if (!q || (eol && q > eol))
			continue;
		UKT_ASSERT(n < max);
		v[n++] = strtol(q + strlen(k), NULL, 10);
	}
	return n;
}

/* the a= of each call the loader makes in script "o c100 x o c50 x":
 * the constructor's (-1) at each load, then 1..100, then 101..150 */
static int expected_a(long *a)
{
	int n = 0;
	a[n++] = -1;
	for (int k = 1; k <= 100; k++)
		a[n++] = k;
	a[n++] = -1;
	for (int k = 101; k <= 150; k++)
		a[n++] = k;
	return n;
}

#define SCRIPT "o\nc 100\nx\no\nc 50\nx\nq\n"

/* SCRIPT's calls, as t/mix's a= show them: their number */
static int check_mix_a(const struct run *u)
{
	long a[200], want[200];
	int nw = expected_a(want);
	RUN_EXPECT(*u, values(u->out, "mix", "a", a, 200) == nw);
	for (int j = 0; j < nw; j++)
		UKT_EQ(a[j], want[j]);
	return nw;
}

UKT_CASE(load_unload_load_again)
{
	char p[PATH_MAX + 96], r[PATH_MAX + 96], o[PATH_MAX + 96];
	snprintf(p, sizeof p, "p:t/mix %s:dfr_mix a=%%di:s32 b=%%si:s64", dfr_so());
	snprintf(r, sizeof r, "r:t/mixr %s:dfr_mix ret=$retval:s32", dfr_so());
	/* the same function by file offset */
	long off = sym_file_offset(dfr_so(), "dfr_mix");
	UKT_ASSERT(off > 0);
	snprintf(o, sizeof o, "p:t/mixo %s:0x%lx", dfr_so(), off);
	const char *args[] = { p, r, o, NULL };
	struct run u = run_loader(SCRIPT, args);
	RUN_EXPECT(u, u.status == 0);
	RUN_EXPECT(u, strstr(u.err, "ukprobe: 0 events lost\n") != NULL);
	RUN_EXPECT(u, !strstr(u.err, "not armed") && !strstr(u.err, "never loaded"));
	/* what the program computed itself, untouched */
	long sum = 0;
	for (long k = 1; k <= 150; k++)
		sum += 3 * k + 7 * k;
	char did[64];
	snprintf(did, sizeof did, "did 150 %ld\n", sum);
	RUN_EXPECT(u, strstr(u.out, did) != NULL);

	long want[160], a[200], b[200], ret[200];
	int nw = expected_a(want);
	int na = values(u.out, "mix", "a", a, 200);
	RUN_EXPECT(u, na == nw);
	UKT_EQ(values(u.out, "mix", "b", b, 200), nw);
	for (int j = 0; j < nw; j++) {
		UKT_EQ(a[j], want[j]);
		UKT_EQ(b[j], want[j] < 0 ? -2 : 7 * want[j]);
	}
	/* return probes: every call's value, each load */
	UKT_EQ(values(u.out, "mixr", "ret", ret, 200), nw);
	for (int j = 0; j < nw; j++)
		UKT_EQ(ret[j], 3 * a[j] + b[j]);
	/* by file offset: every call too */
	UKT_EQ(count_lines(u.out, " mixo: (dfr_mix+0x0/0x"), nw);
	/* symbolised as any library's, both loads */
	UKT_EQ(count_lines(u.out, " mix: (dfr_mix+0x0/0x"), nw);
	UKT_EQ(count_lines(u.out, "<- dfr_mix [dfr.so])"), nw);
	UKT_EQ(count_lines(u.out, " [dfr.so])"), 3 * nw);
	run_free(&u);
}

/* the place given by another path to the same file (a symbolic link);
 * a loaded library named by another path (libc.so.6 through a link) */
UKT_CASE(other_paths_to_the_same_file)
{
	char dir[] = "/tmp/ukt-dfr-XXXXXX";
	UKT_ASSERT(mkdtemp(dir));
	char link1[PATH_MAX], link2[PATH_MAX], libc[PATH_MAX];
	snprintf(link1, sizeof link1, "%s/libalias.so", dir);
	UKT_ASSERT(symlink(dfr_so(), link1) == 0);
	/* this process's libc: the loader's is the same file */
	void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	UKT_ASSERT(h);
	Dl_info di;
	UKT_ASSERT(dladdr(dlsym(h, "getpid"), &di) && di.dli_fname);
	UKT_ASSERT(realpath(di.dli_fname, libc));
	snprintf(link2, sizeof link2, "%s/libc-alias.so.6", dir);
	UKT_ASSERT(symlink(libc, link2) == 0);
	char p[PATH_MAX + 96], q[PATH_MAX + 96];
	snprintf(p, sizeof p, "p:t/mix %s:dfr_mix a=%%di:s32", link1);
	snprintf(q, sizeof q, "p:t/gp %s:getpid", link2);
	const char *args[] = { p, q, NULL };
	struct run u = run_loader(SCRIPT, args);
	RUN_EXPECT(u, u.status == 0);
	check_mix_a(&u);
	/* the loader's one getpid() (for "ready") */
	RUN_EXPECT(u, count_lines(u.out, " gp: (getpid+0x0/0x") == 1);
	run_free(&u);
	unlink(link1);
	unlink(link2);
	rmdir(dir);
}

/* the program loads it by a relative name (the place is given by its
 * absolute path), and symbols still show after the program is gone */
UKT_CASE(loaded_by_a_relative_name)
{
	UKT_ASSERT(chdir(build_dir()) == 0);
	char p[PATH_MAX + 96];
	snprintf(p, sizeof p, "p:t/mix %s:dfr_mix a=%%di:s32", dfr_so());
	const char *args[] = { p, NULL };
	struct run u = run_loader_lib(SCRIPT, args, "./solibs/dfr.so");
	RUN_EXPECT(u, u.status == 0);
	int nw = check_mix_a(&u);
	RUN_EXPECT(u, count_lines(u.out, " mix: (dfr_mix+0x0/0x") == nw);
	RUN_EXPECT(u, count_lines(u.out, " [dfr.so])") == nw);
	run_free(&u);
}

/* A library given by its bare name and not loaded yet: the file where
 * the dynamic linker looks by default (here LD_LIBRARY_PATH), armed at
 * each load; a name found nowhere is an error at the name */
UKT_CASE(library_by_its_name_loaded_later)
{
	char dir[PATH_MAX + 16];
	snprintf(dir, sizeof dir, "%s/solibs", build_dir());
	UKT_ASSERT(setenv("LD_LIBRARY_PATH", dir, 1) == 0);
	const char *args[] = { "p:t/mix dfr.so:dfr_mix a=%di:s32",
			       "r:t/mixr dfr.so:dfr_mix ret=$retval:s32", NULL };
	struct run u = run_loader(SCRIPT, args);
	RUN_EXPECT(u, u.status == 0 && !strstr(u.err, "not armed"));
	int nw = check_mix_a(&u);
	RUN_EXPECT(u, count_lines(u.out, " mixr: (") == nw);
	run_free(&u);
	/* a program that never loads it: no event, and the reason said */
	u = run_loader("q\n", args);
	RUN_EXPECT(u, u.status == 0 && !strstr(u.out, " mix: ") &&
			      strstr(u.err, "ukprobe: t/mix: the library of dfr.so:dfr_mix was never "
					    "loaded\n") &&
			      strstr(u.err, "ukprobe: t/mixr: the library of dfr.so:dfr_mix was never "
					    "loaded\n"));
	run_free(&u);
	UKT_ASSERT(unsetenv("LD_LIBRARY_PATH") == 0);
	/* not on the path now: an error at the name, nothing started */
	u = run_loader(SCRIPT, args);
	RUN_EXPECT(u, u.status == 2 && strstr(u.err, "Failed to find the given file") &&
			      strstr(u.err, "\n" "                   ^\n") && !strstr(u.out, "did "));
	run_free(&u);
	/* Debian's python3 loads libbz2 when bz2 is imported: found in the
	 * system's directory, as the kernel's uprobe by path sees it */
	char *py[] = { (char *)ukprobe_path(), (char *)"trace",
		       (char *)"p:t/bz libbz2.so.1.0:BZ2_bzCompress action=%si:s32", (char *)"--",
		       (char *)"/usr/bin/python3", (char *)"-c",
		       (char *)"import bz2; bz2.compress(b'x' * 1000)", NULL };
	u = run_argv(py);
	RUN_EXPECT(u, u.status == 0 && count_lines(u.out, " bz: (BZ2_bzCompress+0x0/") == 2 &&
			      count_lines(u.out, ") action=0") == 1 &&
			      count_lines(u.out, ") action=2") == 1);
	run_free(&u);
}

/* --format=json pairs a probe and a return probe on the deferred
 * function into complete events, every call of both loads */
UKT_CASE(json_pairs_calls)
{
	char p[PATH_MAX + 96], r[PATH_MAX + 96];
	snprintf(p, sizeof p, "p:t/mix %s:dfr_mix a=%%di:s32", dfr_so());
	snprintf(r, sizeof r, "r:t/mixr %s:dfr_mix ret=$retval:s32", dfr_so());
	const char *args[] = { "--format=json", p, r, NULL };
	struct run u = run_loader(SCRIPT, args);
	RUN_EXPECT(u, u.status == 0);
	long want[200];
	int nw = expected_a(want);
	RUN_EXPECT(u, count_lines(u.out, "\"ph\":\"X\"") == nw);
	RUN_EXPECT(u, count_lines(u.out, "\"name\":\"mixr\"") == 0);
	RUN_EXPECT(u, strstr(u.out, "\"args\":{\"a\":150,\"ret\":1500}") != NULL);
	run_free(&u);
}

/* A place the file's code refuses only once it is there (not an
 * instruction boundary): said at the end, the program unharmed. */
UKT_CASE(refused_at_load_is_said)
{
	char p[PATH_MAX + 96];
	snprintf(p, sizeof p, "p:t/mid %s:dfr_mix+1", dfr_so());
	const char *args[] = { p, NULL };
	struct run u = run_loader(SCRIPT, args);
	RUN_EXPECT(u, u.status == 0);
	RUN_EXPECT(u, strstr(u.out, "did 150 113250\n") != NULL);
	RUN_EXPECT(u, count_lines(u.out, " mid: (") == 0);
	char want[PATH_MAX + 200];
	snprintf(want, sizeof want,
		 "ukprobe: t/mid: not armed at %s:dfr_mix+1 when its library loaded: "
		 "Probe point is not an instruction boundary\n", dfr_so());
	RUN_EXPECT(u, strstr(u.err, want) != NULL);
	RUN_EXPECT(u, strstr(u.err, "ukprobe: 0 events lost\n") != NULL);
	run_free(&u);
}

/* bad places in a file not loaded: the kernel's error form, caret under
 * the word, exit 2, the program not started */
UKT_CASE(bad_places_in_unloaded_files)
{
	char so[PATH_MAX];
	snprintf(so, sizeof so, "%s", dfr_so());
	size_t sl = strlen(so);
	struct {
		char def[PATH_MAX + 64];
		const char *msg;
		size_t at;	/* of the caret, from the place */
	} c[8];
	int n = 0;
	/* a copy cut short: no section headers, no symbol tables */
	char dir[] = "/tmp/ukt-dfr-XXXXXX", cut[PATH_MAX];
	UKT_ASSERT(mkdtemp(dir));
	snprintf(cut, sizeof cut, "%s/cut.so", dir);
	damaged_copy(so, cut, DAMAGE_TRUNCATED);
	snprintf(c[n].def, sizeof c[n].def, "p:t/e %s/nonexistent.so:f", build_dir());
	c[n].msg = "Failed to find the given file";
	c[n++].at = 0;
	snprintf(c[n].def, sizeof c[n].def, "p:t/e %s:no_such_function", so);
	c[n].msg = "Unknown symbol";
	c[n++].at = sl + 1;
	snprintf(c[n].def, sizeof c[n].def, "p:t/e %s:0x7fffffff", so);
	c[n].msg = "Invalid file offset value";
	c[n++].at = sl + 1;
	snprintf(c[n].def, sizeof c[n].def, "p:t/e %s:dfr_data", so);	/* data */
	c[n].msg = "Failed to register probe event";
	c[n++].at = sl + 1;
	/* an executable (it can only be exec'd, and runs untraced then) */
	snprintf(c[n].def, sizeof c[n].def, "p:t/e /usr/bin/gzip:0x1000");
	c[n].msg = "Failed to find the given file";
	c[n++].at = 0;
	/* not ELF */
	snprintf(c[n].def, sizeof c[n].def, "p:t/e /etc/passwd:f");
	c[n].msg = "Failed to find the given file";
	c[n++].at = 0;
	snprintf(c[n].def, sizeof c[n].def, "p:t/e %s:dfr_mix", cut);
	c[n].msg = "Unknown symbol";
	c[n++].at = strlen(cut) + 1;
	/* its code is still there, by file offset */
	snprintf(c[n].def, sizeof c[n].def, "p:t/e %s:0x7fffffff", cut);
	c[n].msg = "Invalid file offset value";
	c[n++].at = strlen(cut) + 1;
	for (int k = 0; k < n; k++) {
		const char *args[] = { c[k].def, NULL };
		struct run u = run_loader(SCRIPT, args);
		RUN_EXPECT(u, u.status == 2);
		RUN_EXPECT(u, u.nout == 0);	/* no "ready": not started */
		char head[128];
		snprintf(head, sizeof head, "ukprobe: error: %s\n", c[k].msg);
		RUN_EXPECT(u, strstr(u.err, head) != NULL);
		char *cmd = strstr(u.err, "  Command: ");
		UKT_ASSERT(cmd);
		char *eol = strchr(cmd, '\n');
		UKT_ASSERT(eol);
		size_t caret = strlen("  Command: ") + strlen("p:t/e ") + c[k].at;
		RUN_EXPECT(u, strlen(eol + 1) > caret && eol[1 + caret] == '^');
		for (size_t j = 0; j < caret; j++)
			UKT_EQ(eol[1 + j], ' ');
		run_free(&u);
	}
	unlink(cut);
	rmdir(dir);
}

/* a library whose section headers are damaged (every section's name out
 * of range: the dynamic linker does not read them) loads and is traced
 * as any; the engine reads its symbols inside the program without
 * faulting, and finds them by the tables' types */
UKT_CASE(damaged_section_headers)
{
	char dir[] = "/tmp/ukt-dfr-XXXXXX", so[PATH_MAX], p[PATH_MAX + 96];
	UKT_ASSERT(mkdtemp(dir));
	snprintf(so, sizeof so, "%s/damaged.so", dir);
	damaged_copy(dfr_so(), so, DAMAGE_NAMES);
	snprintf(p, sizeof p, "p:t/mix %s:dfr_mix a=%%di:s32", so);
	const char *args[] = { p, NULL };
	struct run u = run_loader_lib(SCRIPT, args, so);
	RUN_EXPECT(u, u.status == 0);
	RUN_EXPECT(u, strstr(u.out, "did 150 113250\n") != NULL);
	int nw = check_mix_a(&u);
	RUN_EXPECT(u, count_lines(u.out, " mix: (dfr_mix+0x0/0x") == nw);
	run_free(&u);
	unlink(so);
	rmdir(dir);
}

/* everything readable on fd now or within ms, appended to *buf */
static void read_some(int fd, char **buf, size_t *len, int ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	while (poll(&p, 1, ms) > 0) {
		char tmp[4096];
		ssize_t n = read(fd, tmp, sizeof tmp);
		if (n <= 0)
			return;
		*buf = realloc(*buf, *len + (size_t)n + 1);
		UKT_ASSERT(*buf);
		memcpy(*buf + *len, tmp, (size_t)n);
		*len += (size_t)n;
		(*buf)[*len] = 0;
		ms = 0;
	}
}

/* attach first, the program loads the library after: armed then, and
 * again at its second load.  xobj: ukprobe's -x, run from the build
 * directory (the program runs in /); def: t/mix's definition. */
static void attach_load(const char *xobj, const char *def)
{
	int li[2], lo[2], uo[2], ue[2];
	UKT_ASSERT(pipe(li) == 0 && pipe(lo) == 0 && pipe(uo) == 0 && pipe(ue) == 0);
	pid_t l = fork();
	if (l == 0) {
		dup2(li[0], 0);
		dup2(lo[1], 1);
		close(li[1]);
		close(lo[0]);
		if (chdir("/"))
			_exit(126);
		execl(target("loader"), "loader", dfr_so(), (char *)NULL);
		_exit(126);
	}
	close(li[0]);
	close(lo[1]);
	FILE *lout = fdopen(lo[0], "r");
	char line[256];
	UKT_ASSERT(fgets(line, sizeof line, lout) && !strncmp(line, "ready ", 6));
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)l);
	pid_t u = fork();
	if (u == 0) {
		dup2(uo[1], 1);
		dup2(ue[1], 2);
		close(uo[0]);
		close(ue[0]);
		if (chdir(build_dir()))
			_exit(126);
		if (xobj)
			execl(ukprobe_path(), "ukprobe", "trace", "-x", xobj, "-p", pid,
			      "p:t/tick tick", def, (char *)NULL);
		else
			execl(ukprobe_path(), "ukprobe", "trace", "-p", pid, "p:t/tick tick", def,
			      (char *)NULL);
		_exit(126);
	}
	close(uo[1]);
	close(ue[1]);
	/* armed once a tick shows */
	char *out = NULL;
	size_t nout = 0;
	for (int tries = 0; tries < 1000 && !(out && strstr(out, " tick: (tick+0x0/")); tries++) {
		UKT_ASSERT(write(li[1], "t\n", 2) == 2);
		UKT_ASSERT(fgets(line, sizeof line, lout) && !strcmp(line, "tick\n"));
		read_some(uo[0], &out, &nout, 50);
	}
	UKT_ASSERT(out && strstr(out, " tick: (tick+0x0/"));
	static const char script[] = "o\nc 20\nx\no\nc 5\nq\n";
	UKT_ASSERT(write(li[1], script, strlen(script)) == (ssize_t)strlen(script));
	close(li[1]);
	char last[256] = "";
	while (fgets(line, sizeof line, lout))
		snprintf(last, sizeof last, "%s", line);
	fclose(lout);
	UKT_EQ(wait_status(l), 0);
	UKT_ASSERT(!strcmp(last, "did 25 3250\n"));
	/* the target's exit ends the trace, every event written */
	read_some(uo[0], &out, &nout, 30000);
	UKT_EQ(wait_status(u), 0);
	char *err = NULL;
	size_t nerr = 0;
	read_some(ue[0], &err, &nerr, 1000);
	UKT_ASSERT(err && strstr(err, "ukprobe: 0 events lost\n"));
	long a[64];
	int n = values(out, "mix", "a", a, 64);
	UKT_EQ(n, 27);
	int j = 0;
	UKT_EQ(a[j++], -1);
	for (int k = 1; k <= 20; k++)
		UKT_EQ(a[j++], k);
	UKT_EQ(a[j++], -1);
	for (int k = 21; k <= 25; k++)
		UKT_EQ(a[j++], k);
	UKT_EQ(count_lines(out, " mix: (dfr_mix+0x0/0x"), 27);
	close(uo[0]);
	close(ue[0]);
	free(out);
	free(err);
}

UKT_CASE_T(attach_then_load, 120)
{
	char mix[PATH_MAX + 96];
	snprintf(mix, sizeof mix, "p:t/mix %s:dfr_mix a=%%di:s32", dfr_so());
	attach_load(NULL, mix);
}

/* a source-level place in it, -x given relative to ukprobe's directory:
 * the agent, in a program working elsewhere, opens the same file */
UKT_CASE_T(attach_then_load_source_level, 120)
{
	attach_load("solibs/dfr.so", "p:t/mix dfr_mix a");
}
