/* SPDX-License-Identifier: MIT */
/*
 * ukprobe: kprobe-based event tracing for user-space programs.
 * Subcommand dispatch, diagnostics, and where the agent lives.
 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "../agent/proto.h"

const char *ukp_prog = "ukprobe";

void ukp_err(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", ukp_prog);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

void ukp_error_log(const char *msg, const char *cmd, int offset)
{
	/* "  Command: " is 11 columns wide: the caret goes under cmd[offset] */
	int len = (int)strlen(cmd);
	if (offset < 0)
		offset = 0;
	if (offset > len)
		offset = len;
	fprintf(stderr, "%s: error: %s\n  Command: %s\n%*s^\n", ukp_prog, msg,
		cmd, 11 + offset, "");
}

const char *ukp_agent_path(void)
{
	static char path[2 * PATH_MAX];
	char exe[PATH_MAX];
	const char *env = getenv("UKPROBE_AGENT");
	if (env && *env)
		return env;
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return NULL;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	*slash = 0;
	/* installed: P/bin/ukprobe, P/lib/ukprobe/libukprobe-agent.so;
	 * build tree: build/ukprobe, build/libukprobe-agent.so */
	static const char *const rel[] = { "/../lib/ukprobe/", "/" };
	for (size_t k = 0; k < sizeof rel / sizeof *rel; k++) {
		snprintf(path, sizeof path, "%s%s%s", exe, rel[k], UKPA_SONAME);
		char *real = realpath(path, NULL);
		if (real) {
			snprintf(path, sizeof path, "%s", real);
			free(real);
			return path;
		}
	}
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f,
"Usage: ukprobe COMMAND [OPTIONS] ...\n"
"\n"
"Kprobe-based event tracing of user-space programs: the kernel's dynamic\n"
"event grammar (uprobe_events), its trace output and filters, without root.\n"
"\n"
"Commands:\n"
"  trace    record events of a program it launches or a running process\n"
"  probe    source-level places and variables of an object (DWARF)\n"
"  list     the kprobes of a process a 'trace -p' is attached to (list -p PID)\n"
"  knob     set kprobes' enabled or optimization knob in such a process\n"
"           (knob -p PID enabled|optimization 0|1)\n"
"\n"
"Options:\n"
"  -h, --help     this text; 'ukprobe COMMAND --help' describes COMMAND\n"
"  --version      the version\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		if (argc > 2 && strcmp(argv[1], "help") == 0) {
			char *sub[] = { argv[2], (char *)"--help", NULL };
			if (!strcmp(argv[2], "trace"))
				return cmd_trace(2, sub);
			if (!strcmp(argv[2], "probe"))
				return cmd_probe(2, sub);
			if (!strcmp(argv[2], "list"))
				return cmd_list(2, sub);
			if (!strcmp(argv[2], "knob"))
				return cmd_knob(2, sub);
		}
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("ukprobe %s\n", UKP_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "trace")) {
		ukp_prog = "ukprobe";
		return cmd_trace(argc - 1, argv + 1);
	}
	if (!strcmp(argv[1], "probe")) {
		ukp_prog = "ukprobe";
		return cmd_probe(argc - 1, argv + 1);
	}
	if (!strcmp(argv[1], "list"))
		return cmd_list(argc - 1, argv + 1);
	if (!strcmp(argv[1], "knob"))
		return cmd_knob(argc - 1, argv + 1);
	ukp_err("unknown command '%s' (see 'ukprobe --help')", argv[1]);
	return 2;
}
