/*
 * kretprobes seen from outside the C test process: the programs of
 * tests/progs (built beside this binary, in ../progs) run as children
 * with a time limit, their output checked.
 *
 *   cxx_exceptions_single_thread   kret_cxx single: C++ exceptions thrown
 *                         through, caught beside and inside kretprobed
 *                         functions (maxactive 1): caught by the right
 *                         caller, every instance back, later calls probed
 *   cxx_exceptions_threads         kret_cxx threads: the same in 4
 *                         std::thread workers at once (15 s limit)
 *   gdb_backtrace_shows_trampoline_then_real_caller   gdb -batch stops in
 *                         a leaf under a kretprobed function: bt is leaf,
 *                         probed function, kretprobe_trampoline, the real
 *                         caller, main; the program then ends normally
 *   gdb_finds_callers_registers_through_trampoline   gdb -batch stops in
 *                         the return handler (the trampoline's fast path,
 *                         which uses rbx rbp r12-r15 itself): the caller's
 *                         frame shows the values it holds in them
 *   libunwind_walk_shows_real_callers   kret_unwind_unw: unw_step from the
 *                         probed function, its callee and the handler
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "ukt.h"

/* path of build output `name` under ../progs from this binary */
static void prog_path(char *out, size_t n, const char *name)
{
	char self[PATH_MAX];
	ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	UKT_ASSERT(k > 0);
	self[k] = 0;
	char *slash = strrchr(self, '/');
	UKT_ASSERT(slash);
	*slash = 0;
	snprintf(out, n, "%s/../progs/%s", self, name);
	if (access(out, X_OK))
		UKT_FAIL("%s: %s (build it with make tests)", out, strerror(errno));
}

/*
 * Runs argv (stdout and stderr into out, NUL-terminated) for at most
 * timeout_s seconds.  Returns the wait status, or -1 if it had to be
 * killed.
 */
static int run(char *const argv[], unsigned timeout_s, char *out, size_t n)
{
	int pfd[2];
	UKT_EQ(pipe2(pfd, O_CLOEXEC), 0);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	UKT_ASSERT(pid >= 0);
	if (pid == 0) {
		setpgid(0, 0);
		dup2(pfd[1], 1);
		dup2(pfd[1], 2);
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, 0);
		alarm(0);
		execvp(argv[0], argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pfd[1]);
	size_t len = 0;
	int killed = 0;
	double deadline = ukt_now() + timeout_s;
	for (;;) {
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };
		int r = poll(&p, 1, 100);
		if (r > 0) {
			char buf[4096];
			ssize_t k = read(pfd[0], buf, sizeof(buf));
			if (k <= 0)
				break;
			size_t take = (size_t)k < n - 1 - len ? (size_t)k : n - 1 - len;
			memcpy(out + len, buf, take);
			len += take;
		}
		if (ukt_now() > deadline) {
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
			killed = 1;
			break;
		}
	}
	out[len] = 0;
	close(pfd[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return killed ? -1 : st;
}

static void show(const char *what, const char *out)
{
	fprintf(stderr, "  --- output of %s ---\n%s  ---\n", what, out);
}

static void expect_exit0(const char *what, int st, const char *out)
{
	if (st == -1) {
		show(what, out);
		UKT_FAIL("%s: killed after its time limit", what);
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		show(what, out);
		if (WIFSIGNALED(st))
			UKT_FAIL("%s: killed by signal %d", what, WTERMSIG(st));
		UKT_FAIL("%s: exit status %d", what, WEXITSTATUS(st));
	}
}

static void expect_line(const char *what, const char *out, const char *line)
{
	size_t k = strlen(line);
	for (const char *p = out; (p = strstr(p, line)); p++)
		if ((p == out || p[-1] == '\n') && (p[k] == '\n' || !p[k]))
			return;
	show(what, out);
	UKT_FAIL("%s: no line \"%s\"", what, line);
}

/* ---- C++ exceptions ------------------------------------------------------------ */

static void run_cxx(const char *mode, unsigned limit, const char *const *scenarios)
{
	static char out[1 << 16];
	char path[PATH_MAX + 32], what[64];
	prog_path(path, sizeof(path), "kret_cxx");
	char *argv[] = { path, (char *)mode, NULL };
	snprintf(what, sizeof(what), "kret_cxx %s", mode);
	int st = run(argv, limit, out, sizeof(out));
	if (strstr(out, "FAIL")) {
		show(what, out);
		UKT_FAIL("%s reported failures", what);
	}
	expect_exit0(what, st, out);
	for (int opt = 0; opt < 2; opt++) {
		for (const char *const *s = scenarios; *s; s++) {
			char line[128];
			snprintf(line, sizeof(line), "ok %s %s", *s, opt ? "optimized" : "breakpoint");
			expect_line(what, out, line);
		}
	}
	expect_line(what, out, "kret_cxx: all ok");
}

UKT_CASE_T(cxx_exceptions_single_thread, 60)
{
	static const char *const s[] = { "throw_through", "nested", "catch_inside",
					 "catch_in_probed_caller", NULL };
	run_cxx("single", 30, s);
}

UKT_CASE_T(cxx_exceptions_threads, 30)
{
	static const char *const s[] = { "threads", NULL };
	/* well under a second when right; the failure seen so far is a
	 * thread spinning forever in the unwinder */
	run_cxx("threads", 15, s);
}

/* ---- gdb ---------------------------------------------------------------------------- */

/* the function name of a gdb backtrace line "#N  [0x... in ]name (...)" */
static int frame_name(const char *line, int *num, char *name, size_t n)
{
	const char *p = line;
	if (*p != '#')
		return 0;
	*num = (int)strtol(p + 1, (char **)&p, 10);
	while (*p == ' ')
		p++;
	if (!strncmp(p, "0x", 2)) {
		const char *in = strstr(p, " in ");
		if (!in)
			return 0;
		p = in + 4;
	}
	size_t k = strcspn(p, " (\n");
	if (k >= n)
		k = n - 1;
	memcpy(name, p, k);
	name[k] = 0;
	return 1;
}

UKT_CASE_T(gdb_backtrace_shows_trampoline_then_real_caller, 90)
{
	static char out[1 << 16];
	char path[PATH_MAX + 32];
	prog_path(path, sizeof(path), "kret_gdb");
	if (access("/usr/bin/gdb", X_OK))
		UKT_FAIL("no /usr/bin/gdb (scripts/install-deps installs it)");
	char *argv[] = { "gdb", "-nx", "-batch",
			 "-ex", "break kr_gdb_leaf",
			 "-ex", "run",
			 "-ex", "bt",
			 "-ex", "continue",
			 "--args", path, NULL };
	int st = run(argv, 75, out, sizeof(out));
	expect_exit0("gdb", st, out);

	static const char *const want[] = { "kr_gdb_leaf", "kr_gdb_probed", "kretprobe_trampoline",
					    "kr_gdb_caller", "main" };
	int next = 0;
	for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		int num;
		char name[128];
		if (!frame_name(l, &num, name, sizeof(name)))
			continue;
		if (num != next || next >= 5 || strcmp(name, want[next])) {
			show("gdb", out);
			UKT_FAIL("gdb frame #%d is %s, want %s", num, name,
				 next < 5 ? want[next] : "no more frames");
		}
		next++;
	}
	if (next != 5) {
		show("gdb", out);
		UKT_FAIL("gdb showed %d frames, want 5", next);
	}
	/* the program went on through the probe and ended well */
	expect_line("gdb", out, "result 15 handler 1");
	if (!strstr(out, "exited normally]")) {
		show("gdb", out);
		UKT_FAIL("the program under gdb did not exit normally");
	}
}

UKT_CASE_T(gdb_finds_callers_registers_through_trampoline, 90)
{
	char path[PATH_MAX];
	static char out[1 << 16];
	prog_path(path, sizeof(path), "kret_gdb");
	if (access("/usr/bin/gdb", X_OK))
		UKT_FAIL("no /usr/bin/gdb (scripts/install-deps installs it)");
	char *argv[] = { "gdb", "-nx", "-batch",
			 "-ex", "break on_return",
			 "-ex", "run",
			 "-ex", "bt",
			 "-ex", "frame function kr_gdb_regs_caller",
			 "-ex", "info registers rbx rbp r12 r13 r14 r15",
			 "-ex", "continue",
			 "--args", path, "regs", NULL };
	int st = run(argv, 75, out, sizeof(out));
	expect_exit0("gdb", st, out);
	static const char *const regs[] = { "rbx", "rbp", "r12", "r13", "r14", "r15" };
	for (int i = 0; i < 6; i++) {
		char want[64];
		snprintf(want, sizeof(want), "0x%016lx", 0x1111111111111111UL * (unsigned long)(i + 1));
		const char *l = out;
		bool found = false;
		while ((l = strstr(l, regs[i])) != NULL) {
			const char *e = strchr(l, '\n');
			size_t n = e ? (size_t)(e - l) : strlen(l);
			if ((l == out || l[-1] == '\n') && memmem(l, n, want, strlen(want)))
				found = true;
			l += strlen(regs[i]);
		}
		if (!found) {
			show("gdb", out);
			UKT_FAIL("the caller's %s is not %s", regs[i], want);
		}
	}
	expect_line("gdb", out, "result 15 handler 1");
}

/* ---- libunwind --------------------------------------------------------------------------- */

UKT_CASE_T(libunwind_walk_shows_real_callers, 30)
{
	static char out[1 << 16];
	char path[PATH_MAX + 32];
	prog_path(path, sizeof(path), "kret_unwind_unw");
	char *argv[] = { path, NULL };
	int st = run(argv, 20, out, sizeof(out));
	if (strstr(out, "FAIL")) {
		show("kret_unwind_unw", out);
		UKT_FAIL("kret_unwind_unw reported failures");
	}
	expect_exit0("kret_unwind_unw", st, out);
	expect_line("kret_unwind_unw", out, "kret_unwind: all ok");
}
