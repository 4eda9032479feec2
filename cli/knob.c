/* SPDX-License-Identifier: MIT */
/*
 * `ukprobe list -p PID` and `ukprobe knob -p PID enabled|optimization
 * [0|1]`: the kprobes of a process a `ukprobe trace -p PID` is attached
 * to, and the two knobs of kprobes.txt (Appendix A: debugfs
 * kprobes/enabled; Appendix B: debug.kprobes_optimization), through the
 * agent in it: one QUERY on its query socket, one REPLY (agent/proto.h).
 * Nothing is loaded into a process that has no agent.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cli.h"
#include "../agent/proto.h"

static void list_usage(FILE *f)
{
	fprintf(f,
"Usage: ukprobe list -p PID\n"
"\n"
"Prints the kprobes of the process PID, which a 'ukprobe trace -p PID' is\n"
"attached to, as the kernel's debugfs kprobes/list does, one line each:\n"
"  ADDRESS  TYPE  SYM+0xOFF [OBJECT] FLAGS\n"
"ADDRESS in 16 hex digits; TYPE k (kprobe), r (kretprobe) or j (jprobe);\n"
"[OBJECT] the shared object's file name (a space for the main executable);\n"
"FLAGS any of [GONE] (its object was unloaded), [DISABLED] (disabled, or\n"
"every kprobe disarmed by 'ukprobe knob -p PID enabled 0'), [OPTIMIZED] (a\n"
"jump, not a breakpoint) and [FTRACE] (on a function's patch site).\n"
"\n"
"Options:\n"
"  -p, --pid=PID   the process\n"
"  -h, --help      this text\n"
"\n"
"Exit status: 0; 1 when no 'ukprobe trace -p' is attached to PID; 2 for bad\n"
"arguments.\n");
}

static void knob_usage(FILE *f)
{
	fprintf(f,
"Usage: ukprobe knob -p PID enabled [0|1]\n"
"       ukprobe knob -p PID optimization [0|1]\n"
"\n"
"Sets a knob of the kprobes in the process PID, which a 'ukprobe trace -p\n"
"PID' is attached to (kprobes.txt):\n"
"  enabled       Appendix A, debugfs kprobes/enabled: 0 disarms every kprobe\n"
"                (their hits stop; each keeps its own disabled state), 1\n"
"                rearms those not disabled\n"
"  optimization  Appendix B, sysctl debug.kprobes_optimization: 0 turns\n"
"                every jump-optimised kprobe back into a breakpoint, 1\n"
"                optimises them again\n"
"Without 0 or 1, prints the knob's value.  When the trace ends, the knobs\n"
"are put back as it found them.\n"
"\n"
"Options:\n"
"  -p, --pid=PID   the process\n"
"  -h, --help      this text\n"
"\n"
"Exit status: 0; 1 when no 'ukprobe trace -p' is attached to PID; 2 for bad\n"
"arguments.\n");
}

/* -p PID and the words after the options: 0, -1 (help printed) or 2 */
static int parse(int argc, char **argv, void (*usage)(FILE *), pid_t *pid, int *first)
{
	static const struct option lopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	*pid = 0;
	opterr = 0;
	optind = 1;
	for (;;) {
		int c = getopt_long(argc, argv, "+p:h", lopts, NULL);
		if (c == -1)
			break;
		if (c == 'h') {
			usage(stdout);
			return -1;
		}
		if (c == 'p') {
			char *end;
			errno = 0;
			long v = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || v <= 0 || v > 0x7fffffff) {
				ukp_err("%s: bad PID '%s'", argv[0], optarg);
				usage(stderr);
				return 2;
			}
			*pid = (pid_t)v;
			continue;
		}
		if (optopt && optopt < 256)
			ukp_err("%s: bad option '-%c'", argv[0], optopt);
		else
			ukp_err("%s: bad option '%s'", argv[0], argv[optind - 1]);
		usage(stderr);
		return 2;
	}
	if (!*pid) {
		ukp_err("%s: no '-p PID'", argv[0]);
		usage(stderr);
		return 2;
	}
	*first = optind;
	return 0;
}

/*
 * One QUERY to the agent of pid: the reply (text malloc'd into *text), 0,
 * or 1 with a one-line error printed.
 */
static int ask(pid_t pid, const struct ukpa_query *q, struct ukpa_reply *rep, char **text)
{
	*text = NULL;
	if (kill(pid, 0) < 0 && errno == ESRCH) {
		ukp_err("%d: no such process", (int)pid);
		return 1;
	}
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "ukprobe-agent-%d" UKPA_QUERY_SUFFIX,
			 (int)pid);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ukp_err("socket: %s", strerror(errno));
		return 1;
	}
	if (connect(fd, (struct sockaddr *)&a,
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) < 0) {
		close(fd);
		ukp_err("no ukprobe is attached to %d (no agent in it)", (int)pid);
		return 1;
	}
	void *pl;
	uint32_t len;
	int pf;
	/* a knob set re-arms or re-optimises probes: the program held
	 * meanwhile, as while a trace's probes go in (attach.c) */
	int t;
	if (q->value >= 0)
		t = held_exchange(pid, fd, UKPA_QUERY, q, sizeof *q, &pl, &len, &pf, 30000);
	else
		t = chan_send(fd, UKPA_QUERY, q, sizeof *q, NULL, 0) < 0 ? -2 :
		    chan_recv(fd, &pl, &len, &pf, 30000);
	if (t == -2) {
		close(fd);
		ukp_err("the agent in %d went away", (int)pid);
		return 1;
	}
	if (pf >= 0)
		close(pf);
	close(fd);
	if (t != UKPA_REPLY || len < sizeof *rep) {
		free(pl);
		ukp_err("the agent in %d went away", (int)pid);
		return 1;
	}
	memcpy(rep, pl, sizeof *rep);
	if (rep->err == -ENOTCONN) {
		free(pl);
		ukp_err("no ukprobe is attached to %d (its agent is idle)", (int)pid);
		return 1;
	}
	memmove(pl, (char *)pl + sizeof *rep, len - sizeof *rep + 1);
	*text = pl;
	return 0;
}

static int is_flag(const char *s, size_t n)
{
	static const char *const flags[] = { "[GONE]", "[DISABLED]", "[OPTIMIZED]", "[FTRACE]" };
	for (size_t k = 0; k < sizeof flags / sizeof *flags; k++)
		if (strlen(flags[k]) == n && !strncmp(flags[k], s, n))
			return (int)k + 1;
	return 0;
}

/*
 * One line of kprobes_list() in CLI.md's form of the kernel's
 * report_probe() line: "ADDRESS  TYPE  SYM+0xOFF [OBJECT] FLAGS", the
 * object only for a shared object, the flags run together as the kernel
 * prints them: [GONE] [DISABLED] (not when gone) [OPTIMIZED] [FTRACE],
 * with [DISABLED] also when every kprobe is disarmed (enabled 0).
 */
static void print_line(const char *l, size_t n, int disarmed)
{
	char addr[32], type[4];
	int used = 0;
	char *line = strndup(l, n);
	if (!line)
		abort();
	if (sscanf(line, "%31s %3s %n", addr, type, &used) != 2 || !used) {
		fprintf(stdout, "%s\n", line);
		free(line);
		return;
	}
	char *place = line + used;
	char *rest = place + strcspn(place, " ");
	int has[5] = { 0 };
	/* the flags at the end, then the object */
	char *end = rest + strlen(rest);
	for (;;) {
		while (end > rest && end[-1] == ' ')
			end--;
		if (end == rest || end[-1] != ']')
			break;
		char *open = end - 1;
		while (open > rest && *open != '[')
			open--;
		int f = *open == '[' ? is_flag(open, (size_t)(end - open)) : 0;
		if (!f)
			break;
		has[f] = 1;
		end = open;
	}
	*end = 0;
	char *obj = rest + strspn(rest, " ");
	*rest = 0;
	if (disarmed)
		has[2] = 1;
	int any = has[1] || has[2] || has[3] || has[4];
	printf("%s  %s  %s%s%s%s%s%s%s%s\n", addr, type, place, *obj ? " " : "", obj,
	       any ? " " : "", has[1] ? "[GONE]" : "", has[2] && !has[1] ? "[DISABLED]" : "",
	       has[3] ? "[OPTIMIZED]" : "", has[4] ? "[FTRACE]" : "");
	free(line);
}

int cmd_list(int argc, char **argv)
{
	pid_t pid;
	int first, r = parse(argc, argv, list_usage, &pid, &first);
	if (r)
		return r < 0 ? 0 : r;
	if (first < argc) {
		ukp_err("list: unexpected '%s'", argv[first]);
		list_usage(stderr);
		return 2;
	}
	struct ukpa_query q = { UKPA_Q_LIST, -1 };
	struct ukpa_reply rep;
	char *text;
	if ((r = ask(pid, &q, &rep, &text)) != 0)
		return r;
	if (rep.err < 0) {
		ukp_err("list: %s", strerror(-rep.err));
		free(text);
		return 1;
	}
	for (const char *p = text; *p;) {
		size_t n = strcspn(p, "\n");
		if (n)
			print_line(p, n, !rep.enabled);
		p += n + (p[n] == '\n');
	}
	free(text);
	fflush(stdout);
	return 0;
}

int cmd_knob(int argc, char **argv)
{
	pid_t pid;
	int first, r = parse(argc, argv, knob_usage, &pid, &first);
	if (r)
		return r < 0 ? 0 : r;
	int nargs = argc - first;
	const char *name = nargs > 0 ? argv[first] : NULL;
	const char *val = nargs > 1 ? argv[first + 1] : NULL;
	struct ukpa_query q = { 0, -1 };
	if (!name) {
		ukp_err("knob: no knob (enabled or optimization)");
		knob_usage(stderr);
		return 2;
	}
	if (!strcmp(name, "enabled"))
		q.op = UKPA_Q_ENABLED;
	else if (!strcmp(name, "optimization"))
		q.op = UKPA_Q_OPTIMIZATION;
	else {
		ukp_err("knob: unknown knob '%s' (enabled or optimization)", name);
		knob_usage(stderr);
		return 2;
	}
	if (val) {
		if (strcmp(val, "0") && strcmp(val, "1")) {
			ukp_err("knob: bad value '%s' for %s (0 or 1)", val, name);
			knob_usage(stderr);
			return 2;
		}
		q.value = val[0] - '0';
	}
	if (nargs > 2) {
		ukp_err("knob: unexpected '%s'", argv[first + 2]);
		knob_usage(stderr);
		return 2;
	}
	struct ukpa_reply rep;
	char *text;
	if ((r = ask(pid, &q, &rep, &text)) != 0)
		return r;
	free(text);
	if (rep.err < 0) {
		ukp_err("knob: %s %s: %s", name, val, strerror(-rep.err));
		return 1;
	}
	if (!val)
		printf("%d\n", q.op == UKPA_Q_ENABLED ? rep.enabled : rep.optimization);
	return 0;
}
