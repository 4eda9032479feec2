/* SPDX-License-Identifier: MIT */
/*
 * `ukprobe trace` options: one table drives both getopt_long and --help.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "opts.h"
#include <ukprobes/events.h>

enum { O_PROFILE = 256, O_FORMAT, O_FILTER, O_TRIGGER, O_HELP };

static const struct opt_def {
	int val;		/* short option letter or O_* */
	const char *name;	/* long name */
	const char *arg;	/* argument name, NULL: none */
	const char *help;
} opt_table[] = {
	{ 'p', "pid", "PID", "attach to the running process PID (a dynamically linked glibc program)" },
	{ 'd', "duration", "SECONDS", "with -p: end the trace after SECONDS (fractional), removing every probe" },
	{ 'x', "exec", "OBJ", "the object source-level definitions read when their place names none (default: the program)" },
	{ 'o', "output", "FILE", "write the events to FILE instead of stdout" },
	{ 'b', "buffer-size", "KB", "each thread's record buffer, in KiB (default " UKP_STR(UKP_DEFAULT_BUFFER_KB) ")" },
	{ O_PROFILE, "profile", NULL, "at the end, write 'GRP/EVENT HITS MISSES' per event to stderr (uprobe_profile)" },
	{ O_FORMAT, "format", "ftrace|json|folded", "output: the kernel's trace lines (default), Chrome trace events, or folded stacks (flame graphs)" },
	{ O_FILTER, "filter", "EVENT:EXPR", "keep only EVENT's records for which EXPR holds (repeatable)" },
	{ O_TRIGGER, "trigger", "EVENT:CMD", "an event trigger (repeatable): CMD[:COUNT] [if EXPR], CMD one of stacktrace, traceon, traceoff, enable_event:GRP:EVENT, disable_event:GRP:EVENT, hist:keys=...[:vals=...][:sort=...][:size=N]" },
	{ 'h', "help", NULL, "this text" },
};
#define NOPTS (sizeof opt_table / sizeof *opt_table)

void trace_usage(FILE *f)
{
	fprintf(f,
"Usage: ukprobe trace [OPTIONS] DEFINITION... -- COMMAND [ARG...]\n"
"       ukprobe trace [OPTIONS] -p PID DEFINITION...\n"
"\n"
"Records the events DEFINITION... of COMMAND, which it runs (every event\n"
"armed before main; exits with COMMAND's status, 128+N for signal N), or of\n"
"the running process PID (until SIGINT, SIGTERM, -d or its exit; then every\n"
"probe is removed and the process runs on untraced).\n"
"\n"
"DEFINITION is the kernel's dynamic-event grammar, one per argument:\n"
"  p[:[GRP/]EVENT] PLACE [FETCHARG...]             probe\n"
"  r[MAXACTIVE][:[GRP/]EVENT] PLACE [FETCHARG...]  return probe (or PLACE%%return)\n"
"  PLACE: SYM[+OFFS]  OBJ:SYM[+OFFS]  OBJ:0xN  0xADDR\n"
"  FETCHARG: [NAME=]FETCH[:TYPE]; FETCH: %%REG @ADDR @[OBJ:]SYM[+-OFFS] $stackN\n"
"    $stack $comm $argN $retval +|-OFFS(FETCH) \\IMM \\\"STR\"\n"
"  TYPE: u8..u64 s8..s64 x8..x64 char string ustring symbol symstr\n"
"    b<W>@<O>/<S> TYPE[N]\n"
"  Source-level (DWARF, as perf probe): PLACE FUNC[@SRC][:RELLINE|+OFFS|%%return]\n"
"    or SRC:LINE, after OBJ: for another object's; FETCH a variable NAME,\n"
"    NAME->FIELD, NAME.FIELD, NAME[IDX], $params, $vars ('ukprobe probe\n"
"    --help'); a place with several addresses becomes events EVENT,\n"
"    EVENT_1, ...\n"
"\n"
"Options:\n");
	for (size_t k = 0; k < NOPTS; k++) {
		const struct opt_def *o = &opt_table[k];
		char left[64];
		int n = 0;
		if (o->val < 256)
			n = snprintf(left, sizeof left, "-%c, ", o->val);
		else
			n = snprintf(left, sizeof left, "    ");
		snprintf(left + n, sizeof left - n, "--%s%s%s", o->name,
			 o->arg ? "=" : "", o->arg ? o->arg : "");
		fprintf(f, "  %-26s %s\n", left, o->help);
	}
	fprintf(f,
"\n"
"Output: one line per event, as the kernel's trace file, on stdout (or -o);\n"
"a stacktrace trigger's stack after its event's line; each histogram (hist\n"
"triggers) after the events, as the kernel's hist file, and on SIGUSR1.\n"
"An event with a hist trigger writes its lines too, as every event is\n"
"enabled from the start (a filter on the event keeps lines out, not hits\n"
"from the histogram).  --format=folded writes only stacks:\n"
"'outer;...;inner COUNT' lines of stacktrace triggers and common_stacktrace\n"
"keys.  'ukprobe: N events lost' on stderr at the end, always.\n"
"--format=json: a probe and a return probe on one function (the probe at its\n"
"entry) become one \"ph\":\"X\" event per call, named after the probe, ts the\n"
"entry's, dur to the return, the arguments of both (a return argument whose\n"
"name the probe has is RETEVENT.NAME); calls are matched by the stack pointer\n"
"and nest.  An entry whose return never comes or is not recorded (exit,\n"
"longjmp, a filter, more nested calls than MAXACTIVE) is an \"i\" event.\n"
"SIGINT/SIGTERM/SIGHUP: in launch mode COMMAND gets them (from a terminal\n"
"directly, from kill through ukprobe) and decides; ukprobe goes on until\n"
"COMMAND exits.  In attach mode they end the trace.\n"
"Exit status: COMMAND's (launch), 0 (attach), 1 when the target cannot be\n"
"traced, 2 for bad options, definitions or filters.\n");
}

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v > max || *s == '-')
		return -1;
	*out = v;
	return 0;
}

int trace_parse(int argc, char **argv, struct trace_opts *t)
{
	struct option lopts[NOPTS + 1];
	char sopts[2 * NOPTS + 2];
	size_t ns = 0;

	memset(t, 0, sizeof *t);
	t->buffer_kb = UKP_DEFAULT_BUFFER_KB;
	t->format = FMT_FTRACE;
	sopts[ns++] = '+';	/* stop at the first definition */
	for (size_t k = 0; k < NOPTS; k++) {
		lopts[k] = (struct option){ opt_table[k].name,
			opt_table[k].arg ? required_argument : no_argument,
			NULL, opt_table[k].val };
		if (opt_table[k].val < 256) {
			sopts[ns++] = (char)opt_table[k].val;
			if (opt_table[k].arg)
				sopts[ns++] = ':';
		}
	}
	sopts[ns] = 0;
	memset(&lopts[NOPTS], 0, sizeof lopts[NOPTS]);

	t->filters = calloc((size_t)argc + 1, sizeof *t->filters);
	t->triggers = calloc((size_t)argc + 1, sizeof *t->triggers);
	t->defs = calloc((size_t)argc + 1, sizeof *t->defs);
	if (!t->filters || !t->defs || !t->triggers)
		return 2;
	opterr = 0;
	optind = 1;
	/* options and definitions may mix: getopt with '+' stops at the
	 * first non-option, so collect it and go on */
	for (;;) {
		int c = getopt_long(argc, argv, sopts, lopts, NULL);
		if (c == -1) {
			if (optind >= argc)
				break;
			if (!strcmp(argv[optind - 1], "--") && optind > 1 &&
			    argv[optind - 1] != argv[0])
				break;
			t->defs[t->ndefs++] = argv[optind++];
			continue;
		}
		unsigned long v;
		char *end;
		switch (c) {
		case 'p':
			if (parse_uint(optarg, 0x7fffffff, &v) || v == 0) {
				ukp_err("bad PID '%s'", optarg);
				return 2;
			}
			t->pid = (pid_t)v;
			break;
		case 'd':
			errno = 0;
			t->duration = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(t->duration > 0) ||
			    !isfinite(t->duration)) {
				ukp_err("bad duration '%s' (seconds, > 0)", optarg);
				return 2;
			}
			break;
		case 'x':
			t->exec = optarg;
			break;
		case 'o':
			t->output = optarg;
			break;
		case 'b':
			/* one 64 KiB piece at least (UKPEV_SUBBUF_SIZE) */
			if (parse_uint(optarg, 1u << 20, &v) || v < UKPEV_SUBBUF_SIZE / 1024) {
				ukp_err("bad buffer size '%s' (KiB, %d to 1048576)", optarg,
					UKPEV_SUBBUF_SIZE / 1024);
				return 2;
			}
			t->buffer_kb = (unsigned)v;
			break;
		case O_PROFILE:
			t->profile = 1;
			break;
		case O_FORMAT:
			if (!strcmp(optarg, "ftrace"))
				t->format = FMT_FTRACE;
			else if (!strcmp(optarg, "json"))
				t->format = FMT_JSON;
			else if (!strcmp(optarg, "folded"))
				t->format = FMT_FOLDED;
			else {
				ukp_err("unknown format '%s' (ftrace, json or folded)", optarg);
				return 2;
			}
			break;
		case O_FILTER:
			if (!strchr(optarg, ':')) {	/* the error form, the caret where ':' is due */
				ukp_error_log("An event name and ':' must come first (EVENT:EXPR)",
					      optarg, (int)strcspn(optarg, " \t=!<>&|~("));
				return 2;
			}
			t->filters[t->nfilters++] = optarg;
			break;
		case O_TRIGGER:
			if (!strchr(optarg, ':')) {
				ukp_error_log("An event name and ':' must come first (EVENT:COMMAND)",
					      optarg, 0);
				return 2;
			}
			t->triggers[t->ntriggers++] = optarg;
			break;
		case 'h':
			trace_usage(stdout);
			return -1;
		case '?':
		default:
			if (optopt && optopt < 256)
				ukp_err("trace: bad option '-%c' (see 'ukprobe trace --help')", optopt);
			else
				ukp_err("trace: bad option '%s' (see 'ukprobe trace --help')",
					argv[optind - 1]);
			return 2;
		}
	}
	/* "--" ends the definitions: the rest is the command */
	if (optind > 1 && optind <= argc && !strcmp(argv[optind - 1], "--") &&
	    optind < argc)
		t->command = &argv[optind];
	else if (optind > 1 && optind <= argc && !strcmp(argv[optind - 1], "--")) {
		ukp_err("trace: no COMMAND after '--'");
		return 2;
	}
	if (t->ndefs == 0) {
		ukp_err("trace: no DEFINITION (see 'ukprobe trace --help')");
		return 2;
	}
	if (!t->command && !t->pid) {
		ukp_err("trace: give '-- COMMAND' to launch or '-p PID' to attach");
		return 2;
	}
	if (t->command && t->duration > 0) {
		ukp_err("trace: -d is for -p PID (a launched COMMAND is traced until it exits)");
		return 2;
	}
	if (t->command && t->pid) {
		ukp_err("trace: '-p PID' and '-- COMMAND' exclude each other");
		return 2;
	}
	return 0;
}
