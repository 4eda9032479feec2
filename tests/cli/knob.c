/* SPDX-License-Identifier: MIT */
/*
 * `ukprobe list -p PID` and `ukprobe knob -p PID enabled|optimization
 * 0|1` while a `ukprobe trace -p PID` is attached: the kernel's debugfs
 * list lines, [OPTIMIZED] and [DISABLED] as the knobs set them, hits that
 * stop while disarmed and come back after, against the calls the target
 * counts itself; the knobs put back when the trace ends; errors.
 */
#include <stdbool.h>
#include <ctype.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include "run.h"


static struct proc start(const char *name)
{
	return proc_start(name, NULL);
}

/* counter: N more calls of mark(); its total after them */
static unsigned long calls(struct proc *p, int n)
{
	char cmd[32], line[64];
	int len = snprintf(cmd, sizeof cmd, "c %d\n", n);
	UKT_ASSERT(write(p->in, cmd, (size_t)len) == len);
	UKT_ASSERT(fgets(line, sizeof line, p->out) && !strncmp(line, "did ", 4));
	return strtoul(line + 4, NULL, 10);
}

static int quit(struct proc *p)
{
	UKT_ASSERT(write(p->in, "q\n", 2) == 2);
	close(p->in);
	fclose(p->out);
	return wait_status(p->pid);
}

/* ukprobe trace -p PID --profile -o FILE DEFS... in the background; its
 * stderr into FILE.err */
static pid_t trace_bg(pid_t pid, const char *file, const char *d1, const char *d2,
		      const char *d3)
{
	char ps[16];
	snprintf(ps, sizeof ps, "%d", (int)pid);
	fflush(stdout);
	fflush(stderr);
	pid_t u = fork();
	UKT_ASSERT(u >= 0);
	if (u == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(null, 1);
		char ef[PATH_MAX];
		snprintf(ef, sizeof ef, "%s.err", file);
		int err = open(ef, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(err, 2);
		execl(ukprobe_path(), "ukprobe", "trace", "-p", ps, "--profile", "-o", file, d1,
		      d2, d3, (char *)NULL);
		_exit(126);
	}
	return u;
}

static int end_trace(pid_t u)
{
	kill(u, SIGINT);
	return wait_status(u);
}

static struct run list(pid_t pid)
{
	char ps[16];
	snprintf(ps, sizeof ps, "%d", (int)pid);
	return ukprobe("list", "-p", ps, NULL);
}

static struct run knob(pid_t pid, const char *name, const char *val)
{
	char ps[16];
	snprintf(ps, sizeof ps, "%d", (int)pid);
	return ukprobe("knob", "-p", ps, name, val, NULL);
}

static int is_flag_name(const char *p, size_t n)
{
	static const char *f[] = { "[GONE]", "[DISABLED]", "[OPTIMIZED]", "[FTRACE]" };
	for (int k = 0; k < 4; k++)
		if (n == strlen(f[k]) && !strncmp(p, f[k], n))
			return 1;
	return 0;
}

/*
 * One line of the list in CLI.md's form: "%016lx  %c  SYM+0xOFF", then
 * " [OBJ]" for a shared object, then " " and the flags run together
 * (when any).  Its flags in *flags; 0 if the form is wrong.
 */
static int parse_line(const char *l, char *type, char *place, size_t np, char *obj,
		      size_t no, char *flags, size_t nf)
{
	for (int k = 0; k < 16; k++)
		if (!isxdigit((unsigned char)l[k]) || isupper((unsigned char)l[k]))
			return 0;
	if (strncmp(l + 16, "  ", 2) || !strchr("krj", l[18]) || strncmp(l + 19, "  ", 2))
		return 0;
	*type = l[18];
	const char *p = l + 21, *e = p + strcspn(p, " ");
	if (!strstr(p, "+0x") || strstr(p, "+0x") > e)
		return 0;
	snprintf(place, np, "%.*s", (int)(e - p), p);
	p = e;
	obj[0] = 0;
	flags[0] = 0;
	if (!*p)
		return 1;
	if (*p++ != ' ')
		return 0;
	if (*p == '[' && (e = strchr(p, ']')) && !is_flag_name(p, (size_t)(e - p + 1))) {
		snprintf(obj, no, "%.*s", (int)(e - p + 1), p);
		p = e + 1;
		if (!*p)
			return 1;
		if (*p++ != ' ')
			return 0;
	}
	snprintf(flags, nf, "%s", p);
	/* nothing but the four flags, run together, in the kernel's order */
	const char *order[] = { "[GONE]", "[DISABLED]", "[OPTIMIZED]", "[FTRACE]" };
	for (int k = 0; k < 4; k++)
		if (!strncmp(p, order[k], strlen(order[k])))
			p += strlen(order[k]);
	return *p == 0 && flags[0];
}

/* the list's lines: each in the kernel's form; how many, how many have
 * FLAG (NULL: no check), the place of each in places */
static int list_check(const struct run *r, const char *flag, int *nflag, int *nmark,
		      int *nlibc)
{
	int n = 0;
	*nflag = *nmark = *nlibc = 0;
	for (const char *p = r->out; *p;) {
		const char *e = strchr(p, '\n');
		UKT_ASSERT(e);
		char *line = strndup(p, (size_t)(e - p));
		char type, place[256], obj[256], flags[256];
		if (!parse_line(line, &type, place, sizeof place, obj, sizeof obj, flags,
				sizeof flags))
			UKT_FAIL("not in the kernel's form: '%s'", line);
		if (!strcmp(place, "mark+0x0") && !obj[0])
			(*nmark)++;
		if (!strcmp(obj, "[libc.so.6]"))
			(*nlibc)++;
		if (flag && strstr(flags, flag))
			(*nflag)++;
		free(line);
		n++;
		p = e + 1;
	}
	return n;
}

/* lists until the trace is attached and every line has [OPTIMIZED]
 * (the optimizer works in the background after the arming), at most 30 s */
static void wait_optimized(pid_t pid, int want)
{
	for (int tries = 0;; tries++) {
		struct run r = list(pid);
		int nopt, nmark, nlibc;
		if (r.status == 1 && tries < 3000) {	/* not attached yet */
			RUN_EXPECT(r, strstr(r.err, "no ukprobe is attached"));
			run_free(&r);
			usleep(10000);
			continue;
		}
		RUN_EXPECT(r, r.status == 0);
		int n = list_check(&r, "[OPTIMIZED]", &nopt, &nmark, &nlibc);
		int nd;
		list_check(&r, "[DISABLED]", &nd, &nmark, &nlibc);
		if (n == want && nopt == want && nd == 0) {
			run_free(&r);
			return;
		}
		if (tries == 3000)
			RUN_EXPECT(r, !"every probe optimized");
		run_free(&r);
		usleep(10000);
	}
}

/* the HITS of --profile's GRP/EVENT line in FILE.err */
static unsigned long profile_hits(const char *file, const char *ev)
{
	char ef[PATH_MAX], line[512];
	snprintf(ef, sizeof ef, "%s.err", file);
	FILE *f = fopen(ef, "r");
	UKT_ASSERT(f);
	unsigned long hits = ~0ul;
	while (fgets(line, sizeof line, f)) {
		char name[128];
		unsigned long h, m;
		if (sscanf(line, " %127s %lu %lu", name, &h, &m) == 3 && !strcmp(name, ev))
			hits = h;
	}
	fclose(f);
	UKT_ASSERT(hits != ~0ul);
	return hits;
}

/* the n= values of the mark lines of an ftrace output file */
static int marks(const char *path, unsigned long *v, int max)
{
	FILE *f = fopen(path, "r");
	UKT_ASSERT(f);
	char line[1024];
	int n = 0;
	while (fgets(line, sizeof line, f)) {
		char *m = strstr(line, " mark: (mark+0x0/");
		if (!m)
			continue;
		char *a = strstr(m, " n=");
		UKT_ASSERT(a && n < max);
		v[n++] = strtoul(a + 3, NULL, 10);
	}
	fclose(f);
	return n;
}

UKT_CASE(list_and_knobs_while_attached)
{
	struct proc p = start("counter");
	char path[] = "/tmp/ukt-cli-knobXXXXXX";
	int fd = mkstemp(path);
	UKT_ASSERT(fd >= 0);
	close(fd);
	pid_t u = trace_bg(p.pid, path, "p:t/mark mark n=%di:u64", "r:t/mark_ret mark",
			   "p:t/flush libc.so.6:fflush");
	/* the list answers once the trace is attached; every probe becomes a
	 * jump */
	wait_optimized(p.pid, 3);
	struct run r = list(p.pid);
	int nf, nmark, nlibc;
	RUN_EXPECT(r, list_check(&r, NULL, &nf, &nmark, &nlibc) == 3 && nmark == 2 && nlibc == 1);
	RUN_EXPECT(r, count_lines(r.out, "  k  mark+0x0 [OPTIMIZED]") == 1 &&
		      count_lines(r.out, "  r  mark+0x0 [OPTIMIZED]") == 1 &&
		      count_lines(r.out, "  k  fflush+0x0 [libc.so.6] [OPTIMIZED]") +
		      count_lines(r.out, "  k  _IO_fflush+0x0 [libc.so.6] [OPTIMIZED]") == 1);
	RUN_EXPECT(r, r.nerr == 0);
	run_free(&r);

	UKT_EQ(calls(&p, 10), 10);			/* recorded */

	/* disarmed: every line [DISABLED], no jump left */
	r = knob(p.pid, "enabled", "0");
	RUN_EXPECT(r, r.status == 0 && r.nout == 0 && r.nerr == 0);
	run_free(&r);
	r = knob(p.pid, "enabled", NULL);
	RUN_EXPECT(r, r.status == 0 && !strcmp(r.out, "0\n"));
	run_free(&r);
	r = list(p.pid);
	int nd, nopt;
	RUN_EXPECT(r, list_check(&r, "[DISABLED]", &nd, &nmark, &nlibc) == 3 && nd == 3);
	RUN_EXPECT(r, list_check(&r, "[OPTIMIZED]", &nopt, &nmark, &nlibc) == 3 && nopt == 0);
	run_free(&r);
	UKT_EQ(calls(&p, 20), 30);			/* not recorded */

	/* rearmed: jumps again (the reply comes after the optimizer) */
	r = knob(p.pid, "enabled", "1");
	RUN_EXPECT(r, r.status == 0 && r.nout == 0);
	run_free(&r);
	r = list(p.pid);
	RUN_EXPECT(r, list_check(&r, "[DISABLED]", &nd, &nmark, &nlibc) == 3 && nd == 0);
	RUN_EXPECT(r, list_check(&r, "[OPTIMIZED]", &nopt, &nmark, &nlibc) == 3 && nopt == 3);
	run_free(&r);
	UKT_EQ(calls(&p, 30), 60);			/* recorded */

	/* optimization 0: breakpoints, still armed */
	r = knob(p.pid, "optimization", "0");
	RUN_EXPECT(r, r.status == 0 && r.nout == 0);
	run_free(&r);
	r = knob(p.pid, "optimization", NULL);
	RUN_EXPECT(r, r.status == 0 && !strcmp(r.out, "0\n"));
	run_free(&r);
	r = list(p.pid);
	RUN_EXPECT(r, list_check(&r, "[OPTIMIZED]", &nopt, &nmark, &nlibc) == 3 && nopt == 0);
	RUN_EXPECT(r, list_check(&r, "[DISABLED]", &nd, &nmark, &nlibc) == 3 && nd == 0);
	run_free(&r);
	UKT_EQ(calls(&p, 5), 65);			/* recorded, by breakpoints */
	r = knob(p.pid, "optimization", "1");
	RUN_EXPECT(r, r.status == 0 && r.nout == 0);
	run_free(&r);
	r = list(p.pid);
	RUN_EXPECT(r, list_check(&r, "[OPTIMIZED]", &nopt, &nmark, &nlibc) == 3 && nopt == 3);
	run_free(&r);
	UKT_EQ(calls(&p, 5), 70);			/* recorded */

	/* left disarmed: the end of the trace puts the knob back */
	r = knob(p.pid, "enabled", "0");
	RUN_EXPECT(r, r.status == 0);
	run_free(&r);
	UKT_EQ(calls(&p, 1), 71);			/* not recorded */
	UKT_EQ(end_trace(u), 0);
	unsigned long v[256];
	int n = marks(path, v, 256);
	UKT_EQ(n, 10 + 30 + 5 + 5);
	for (int k = 0; k < n; k++)
		UKT_EQ(v[k], (unsigned long)k + (k < 10 ? 1 : 21));
	/* the hits too: none while disarmed */
	UKT_EQ(profile_hits(path, "t/mark"), 50);
	UKT_EQ(profile_hits(path, "t/mark_ret"), 50);

	/* the agent idle: nothing attached */
	r = list(p.pid);
	RUN_EXPECT(r, r.status == 1 && r.nout == 0 && count_lines(r.err, "") == 1 &&
		      strstr(r.err, "no ukprobe is attached"));
	run_free(&r);

	/* a second trace: armed (the knob was put back) */
	u = trace_bg(p.pid, path, "p:t/mark mark n=%di:u64", "r:t/mark_ret mark",
		     "p:t/flush libc.so.6:fflush");
	wait_optimized(p.pid, 3);
	r = knob(p.pid, "enabled", NULL);
	RUN_EXPECT(r, r.status == 0 && !strcmp(r.out, "1\n"));
	run_free(&r);
	UKT_EQ(calls(&p, 3), 74);
	UKT_EQ(end_trace(u), 0);
	n = marks(path, v, 256);
	UKT_EQ(n, 3);
	UKT_EQ(profile_hits(path, "t/mark"), 3);
	UKT_EQ(v[0], 72);
	UKT_EQ(v[2], 74);
	UKT_EQ(quit(&p), 0);
	unlink(path);
	char ef[PATH_MAX];
	snprintf(ef, sizeof ef, "%s.err", path);
	unlink(ef);
}

/* ukprobe trace -o FILE DEFS... -- counter: the program's stdin and
 * stdout are p's (ukprobe's own stderr to FILE.err); p.pid the program's */
static pid_t launch_bg(struct proc *p, const char *file, const char *d1, const char *d2)
{
	int pi[2], po[2];
	UKT_ASSERT(pipe(pi) == 0 && pipe(po) == 0);
	fflush(stdout);
	fflush(stderr);
	pid_t u = fork();
	UKT_ASSERT(u >= 0);
	if (u == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(pi[0], 0);
		dup2(po[1], 1);
		close(pi[1]);
		close(po[0]);
		char ef[PATH_MAX];
		snprintf(ef, sizeof ef, "%s.err", file);
		int err = open(ef, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		dup2(err, 2);
		execl(ukprobe_path(), "ukprobe", "trace", "-o", file, d1, d2, "--",
		      target("counter"), (char *)NULL);
		_exit(126);
	}
	close(pi[0]);
	close(po[1]);
	p->in = pi[1];
	p->out = fdopen(po[0], "r");
	char line[256];
	UKT_ASSERT(fgets(line, sizeof line, p->out) && !strncmp(line, "ready ", 6));
	p->pid = atoi(line + 6);
	return u;
}

/* a program ukprobe launched answers list and knob as an attached one:
 * its probes, disarmed and armed again, the calls made meanwhile not
 * recorded; a knob left off stays off (the program's, to its end) */
UKT_CASE(list_and_knob_on_a_launched_program)
{
	char path[] = "/tmp/ukt-cli-knoblXXXXXX";
	int fd = mkstemp(path);
	UKT_ASSERT(fd >= 0);
	close(fd);
	struct proc p;
	pid_t u = launch_bg(&p, path, "p:t/mark mark n=%di:u64", "r:t/mark_ret mark");
	/* armed (every probe a jump) before main ran */
	struct run r = list(p.pid);
	int nmark, nlibc, nopt, nd;
	RUN_EXPECT(r, r.status == 0 &&
			      list_check(&r, "[OPTIMIZED]", &nopt, &nmark, &nlibc) == 2 &&
			      nopt == 2 && nmark == 2);
	run_free(&r);
	UKT_EQ(calls(&p, 10), 10);			/* recorded */
	r = knob(p.pid, "enabled", "0");
	RUN_EXPECT(r, r.status == 0 && r.nout == 0 && r.nerr == 0);
	run_free(&r);
	r = list(p.pid);
	RUN_EXPECT(r, list_check(&r, "[DISABLED]", &nd, &nmark, &nlibc) == 2 && nd == 2);
	run_free(&r);
	UKT_EQ(calls(&p, 20), 30);			/* not recorded */
	r = knob(p.pid, "enabled", "1");
	RUN_EXPECT(r, r.status == 0);
	run_free(&r);
	r = knob(p.pid, "optimization", NULL);
	RUN_EXPECT(r, r.status == 0 && !strcmp(r.out, "1\n"));
	run_free(&r);
	UKT_EQ(calls(&p, 5), 35);			/* recorded */
	UKT_ASSERT(write(p.in, "q\n", 2) == 2);
	close(p.in);
	fclose(p.out);
	UKT_EQ(wait_status(u), 0);
	unsigned long v[64];
	int n = marks(path, v, 64);
	UKT_EQ(n, 15);
	for (int k = 0; k < n; k++)
		UKT_EQ(v[k], (unsigned long)k + (k < 10 ? 1 : 21));
	/* gone with the program */
	r = list(p.pid);
	RUN_EXPECT(r, r.status == 1 && r.nout == 0 && strstr(r.err, "no such process"));
	run_free(&r);
	unlink(path);
	char ef[PATH_MAX];
	snprintf(ef, sizeof ef, "%s.err", path);
	unlink(ef);
}

/* one line on stderr naming the reason, nothing on stdout, exit 1 */
static void expect_not_attached(struct run r, const char *why)
{
	RUN_EXPECT(r, r.status == 1 && r.nout == 0 && count_lines(r.err, "") == 1 &&
		      strstr(r.err, why));
	run_free(&r);
}

UKT_CASE(list_and_knob_errors)
{
	/* a process without an agent: nothing is loaded into it */
	struct proc p = start("counter");
	char ps[16];
	snprintf(ps, sizeof ps, "%d", (int)p.pid);
	expect_not_attached(list(p.pid), "no ukprobe is attached");
	expect_not_attached(knob(p.pid, "enabled", "0"), "no ukprobe is attached");
	expect_not_attached(knob(p.pid, "optimization", NULL), "no ukprobe is attached");
	char maps[64], line[512];
	snprintf(maps, sizeof maps, "/proc/%d/maps", (int)p.pid);
	FILE *m = fopen(maps, "r");
	UKT_ASSERT(m);
	while (fgets(line, sizeof line, m))
		UKT_ASSERT(!strstr(line, "libukprobe-agent"));
	fclose(m);
	UKT_EQ(calls(&p, 2), 2);
	UKT_EQ(quit(&p), 0);
	/* no such process (p is reaped) */
	expect_not_attached(list(p.pid), "no such process");
	expect_not_attached(knob(p.pid, "enabled", "1"), "no such process");

	/* bad arguments: exit 2 with the usage, before anything is asked */
	const char *bad[][6] = {
		{ "list", NULL },
		{ "list", "-p", NULL },
		{ "list", "-p", "abc", NULL },
		{ "list", "-p", "0", NULL },
		{ "list", "-p", ps, "extra", NULL },
		{ "list", "-q", ps, NULL },
		{ "knob", "enabled", "1", NULL },
		{ "knob", "-p", ps, NULL },
		{ "knob", "-p", ps, "speed", "1" },
		{ "knob", "-p", ps, "enabled", "2" },
		{ "knob", "-p", ps, "enabled", "on" },
		{ "knob", "-p", ps, "optimization", "-1" },
	};
	for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
		struct run r = ukprobe(bad[k][0], bad[k][1], bad[k][2], bad[k][3], bad[k][4],
				       bad[k][5], NULL);
		RUN_EXPECT(r, r.status == 2 && r.nout == 0 && strstr(r.err, "ukprobe: ") == r.err &&
			      strstr(r.err, "Usage: ukprobe "));
		run_free(&r);
	}
	struct run r = ukprobe("knob", "-p", ps, "enabled", "1", "0", NULL);
	RUN_EXPECT(r, r.status == 2 && strstr(r.err, "Usage: ukprobe knob"));
	run_free(&r);
}

UKT_CASE(list_and_knob_help)
{
	struct run r = ukprobe("--help", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "  list ") && strstr(r.out, "  knob ") &&
		      strstr(r.out, "enabled|optimization"));
	run_free(&r);
	r = ukprobe("list", "--help", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "Usage: ukprobe list -p PID") &&
		      strstr(r.out, "[OPTIMIZED]") && strstr(r.out, "[DISABLED]") &&
		      strstr(r.out, "[GONE]") && strstr(r.out, "[FTRACE]"));
	run_free(&r);
	r = ukprobe("help", "knob", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "Usage: ukprobe knob -p PID enabled") &&
		      strstr(r.out, "optimization"));
	run_free(&r);
}

/* the query socket, like the session's, answers only root and the
 * target's user: another is hung up on, unanswered */
UKT_CASE(query_socket_serves_only_its_users)
{
	if (getuid() != 0) {
		printf("  (needs root to switch users: not run)\n");
		return;
	}
	struct proc p = start("counter");
	char path[] = "/tmp/ukt-cli-knobXXXXXX";
	int fd = mkstemp(path);
	UKT_ASSERT(fd >= 0);
	close(fd);
	pid_t u = trace_bg(p.pid, path, "p:t/mark mark", "r:t/mark_ret mark",
			   "p:t/flush libc.so.6:fflush");
	wait_optimized(p.pid, 3);
	for (int other = 0; other < 2; other++) {
		fflush(stdout);
		pid_t c = fork();
		if (c == 0) {
			if (other && (setgid(65534) || setuid(65534)))
				_exit(10);
			struct sockaddr_un a = { .sun_family = AF_UNIX };
			int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1,
					 "ukprobe-agent-%d-query", (int)p.pid);
			int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
			if (s < 0 || connect(s, (struct sockaddr *)&a,
					     (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)))
				_exit(11);
			struct { uint32_t type, len; int32_t op, value; } q = { 48, 8, 2, 0 };
			send(s, &q, sizeof q, MSG_NOSIGNAL);	/* enabled 0: refused */
			struct pollfd pf = { s, POLLIN, 0 };
			if (poll(&pf, 1, 5000) != 1)
				_exit(12);
			char buf[256];
			ssize_t got = recv(s, buf, sizeof buf, 0);
			_exit(got > 0 ? 20 : 21);	/* 20: REPLY, 21: hung up */
		}
		UKT_EQ(wait_status(c), other ? 21 : 20);
		if (!other) {
			/* root's query went through: put the knob back */
			struct run r = knob(p.pid, "enabled", "1");
			RUN_EXPECT(r, r.status == 0);
			run_free(&r);
		}
	}
	/* the other user's query changed nothing */
	struct run r = knob(p.pid, "enabled", NULL);
	RUN_EXPECT(r, r.status == 0 && !strcmp(r.out, "1\n"));
	run_free(&r);
	UKT_EQ(end_trace(u), 0);
	UKT_EQ(quit(&p), 0);
	unlink(path);
	char ef[PATH_MAX];
	snprintf(ef, sizeof ef, "%s.err", path);
	unlink(ef);
}

/*
 * Disarming and arming again puts every probe back as a breakpoint until
 * the optimizer has run: on functions glibc runs with every signal
 * blocked or every handler reset (a detached thread's exit, posix_spawn's
 * child; sigblk does both all the time), that breakpoint would kill the
 * program or its child.  The program is held while a knob is set: five
 * rounds of enabled 0 and 1, and it goes on.  (optimization 0 asks for
 * breakpoints from then on: that such a program dies of them is the
 * knob's meaning, not tested.)
 */
UKT_CASE(knob_rearms_with_the_program_held)
{
	struct proc p = start("sigblk");
	char path[] = "/tmp/ukt-cli-knobXXXXXX";
	int fd = mkstemp(path);
	UKT_ASSERT(fd >= 0);
	close(fd);
	pid_t u = trace_bg(p.pid, path, "p:t/munmap libc.so.6:munmap",
			   "p:t/madvise libc.so.6:madvise", "p:t/strlen libc.so.6:strlen");
	wait_optimized(p.pid, 3);
	for (int round = 0; round < 5; round++) {
		for (int k = 0; k < 2; k++) {
			struct run r = knob(p.pid, "enabled", k ? "1" : "0");
			RUN_EXPECT(r, r.status == 0 && r.nerr == 0);
			run_free(&r);
		}
		UKT_ASSERT(kill(p.pid, 0) == 0);
	}
	UKT_EQ(end_trace(u), 0);
	UKT_ASSERT(profile_hits(path, "t/munmap") > 0);
	UKT_ASSERT(write(p.in, "q", 1) == 1);
	proc_expect_ok(&p);
	unlink(path);
	char ef[PATH_MAX];
	snprintf(ef, sizeof ef, "%s.err", path);
	unlink(ef);
}
