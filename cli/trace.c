/* SPDX-License-Identifier: MIT */
/*
 * `ukprobe trace`: checks every definition and filter with the events
 * core's parser before anything runs, starts or attaches to the target,
 * hands the definitions to the agent, and drains the shared record area
 * until the end: the target's exit (launch, attach), SIGINT/SIGTERM or
 * -d (attach).
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
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ukprobes/events.h>
#include "cli.h"
#include "opts.h"
#include "consumer.h"
#include "symbolize.h"
#include "dwarf.h"
#include "../agent/proto.h"

static volatile sig_atomic_t stop_sig;
static volatile sig_atomic_t hist_asked;	/* SIGUSR1 */

static void on_usr1(int sig)
{
	(void)sig;
	hist_asked = 1;
}

/* %pS for histograms: sym+0xOFF/0xSIZE [object], or PATH[+0xOFF] */
static int hist_sym(unsigned long addr, char *buf, size_t n, void *arg)
{
	int len = sym_format(arg, addr, 1, SYM_OBJ | SYM_UNKNOWN_IN_OBJ, buf, n);
	if (len > 0 && !strncmp(buf, "0x", 2))
		buf[0] = 0;	/* no symbol: the caller prints the address */
	return len;
}

/* folded histogram stacks: sym_folded's names */
static int fold_sym(unsigned long addr, char *buf, size_t n, void *arg)
{
	return sym_folded(arg, addr, buf, n);
}

/* json: every histogram's hist file as a member after the events,
 * "histograms":[{"event":"GRP/EVENT","hist":"..."}...] (NULL: none) */
static char *json_hists(struct ukpev_reader *rd, struct symbolizer *sym)
{
	unsigned n = ukpev_reader_nhists(rd);
	if (!n)
		return NULL;
	char *tail = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&tail, &len);
	if (!f)
		return NULL;
	fputs(",\"histograms\":[", f);
	for (unsigned h = 0; h < n; h++) {
		char *text = NULL, name[2 * UKPEV_NAME_MAX + 2] = "";
		size_t tl = 0;
		FILE *hf = open_memstream(&text, &tl);
		if (!hf)
			continue;
		ukpev_reader_hist_print(rd, h, hf, UKPEV_HIST_KERNEL, hist_sym, sym);
		fclose(hf);
		int id = ukpev_reader_hist_event(rd, h);
		const struct ukpev_event_info *ev = id >= 0 ? ukpev_reader_event(rd, (unsigned)id) : NULL;
		if (ev)
			snprintf(name, sizeof name, "%s/%s", ev->group, ev->event);
		fputs(h ? ",\n{\"event\":" : "\n{\"event\":", f);
		fmt_json_str(f, name);
		fputs(",\"hist\":", f);
		fmt_json_str(f, text ? text : "");
		fputc('}', f);
		free(text);
	}
	fputs("]", f);
	fclose(f);
	return tail;
}

/* every histogram: the kernel's hist files (folded: their stacks) */
static void write_hists(struct ukpev_reader *rd, FILE *out, struct symbolizer *sym,
			enum ukp_format format)
{
	unsigned n = ukpev_reader_nhists(rd);
	for (unsigned h = 0; h < n; h++) {
		if (format != FMT_FOLDED)
			fputc('\n', out);
		if (format == FMT_FOLDED)
			ukpev_reader_hist_print(rd, h, out, UKPEV_HIST_FOLDED, fold_sym, sym);
		else
			ukpev_reader_hist_print(rd, h, out, UKPEV_HIST_KERNEL, hist_sym, sym);
	}
	fflush(out);
}
static volatile sig_atomic_t child_pid;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* per definition, the source-level one it was translated from, or NULL */
static const char **def_src;

/* an error at *off of definition k: shown in what was written */
static const char *def_text(const struct trace_opts *t, int k, int *off)
{
	if (!def_src || !def_src[k])
		return t->defs[k];
	*off = dw_map_offset(def_src[k], t->defs[k], *off);
	return def_src[k];
}

static void print_error(const char *text, const struct ukpev_error *e)
{
	char buf[8192];
	ukpev_error_format(buf, sizeof buf, text, e);
	fputs(buf, stderr);
}

/*
 * Launch: a signal a terminal sent went to the whole process group, the
 * command included; one sent to ukprobe alone (kill) is passed on to
 * the command.  Either way ukprobe goes on until the command exits.
 * Attach: the end of the trace.
 */
static void on_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	if (child_pid > 0) {
		if (si->si_code != SI_KERNEL)
			kill((pid_t)child_pid, sig);
		return;
	}
	stop_sig = sig;
}

/* "EVENT:..." or "GRP/EVENT:..." names in */
static int names_event(const char *spec, const struct ukpev_event_info *in)
{
	size_t nl = strcspn(spec, ":"), gl = strlen(in->group), el = strlen(in->event);
	return (nl == el && !strncmp(spec, in->event, el)) ||
	       (nl == gl + 1 + el && !strncmp(spec, in->group, gl) && spec[gl] == '/' &&
		!strncmp(spec + gl + 1, in->event, el));
}

/* definitions, filters and triggers checked: 0, or 2 with the error written */
static int check_input(const struct trace_opts *t, struct ukpev_def ***defsp)
{
	struct ukpev_def **d = calloc((size_t)t->ndefs + 1, sizeof *d);
	struct ukpev_error e;
	if (!d)
		return 2;
	*defsp = d;
	for (int k = 0; k < t->ndefs; k++) {
		memset(&e, 0, sizeof e);
		if (ukpev_def_parse(t->defs[k], &d[k], &e) < 0) {
			const char *text = def_text(t, k, &e.offset);
			print_error(text, &e);
			return 2;
		}
		const struct ukpev_event_info *a = ukpev_def_info(d[k]);
		for (int j = 0; j < k; j++) {
			const struct ukpev_event_info *b = ukpev_def_info(d[j]);
			if (!strcmp(a->group, b->group) && !strcmp(a->event, b->event)) {
				e.code = UKPEV_E_EVENT_EXIST;
				/* the caret under the name where one is given */
				const char *colon = strchr(t->defs[k], ':');
				const char *sp = strchr(t->defs[k], ' ');
				e.offset = colon && (!sp || colon < sp) ? (int)(colon - t->defs[k]) + 1 : 0;
				const char *text = def_text(t, k, &e.offset);
				print_error(text, &e);
				return 2;
			}
		}
	}
	for (int k = 0; k < t->nfilters + t->ntriggers; k++) {
		int trig = k >= t->nfilters;
		const char *f = trig ? t->triggers[k - t->nfilters] : t->filters[k];
		const char *cmd = strchr(f, ':') + 1;
		int found = 0;
		for (int j = 0; j < t->ndefs; j++) {
			if (!names_event(f, ukpev_def_info(d[j])))
				continue;
			found = 1;
			memset(&e, 0, sizeof e);
			if ((trig ? ukpev_trigger_check(d[j], cmd, &e)
				  : ukpev_filter_check(d[j], cmd, &e)) < 0) {
				print_error(cmd, &e);
				return 2;
			}
		}
		if (!found) {
			e.code = UKPEV_E_FILTER_NO_EVENT;
			e.offset = 0;
			print_error(f, &e);
			return 2;
		}
		if (!trig)
			continue;
		/* enable_event:GRP:EVENT / disable_event: an event defined here */
		const char *what = !strncmp(cmd, "enable_event:", 13) ? cmd + 13 :
				   !strncmp(cmd, "disable_event:", 14) ? cmd + 14 : NULL;
		if (what) {
			const char *c2 = strchr(what, ':');
			size_t gl = (size_t)(c2 - what), el = strcspn(c2 + 1, ": \t");
			int ok = 0;
			for (int j = 0; j < t->ndefs && !ok; j++) {
				const struct ukpev_event_info *in = ukpev_def_info(d[j]);
				ok = strlen(in->group) == gl && !strncmp(in->group, what, gl) &&
				     strlen(in->event) == el && !strncmp(in->event, c2 + 1, el);
			}
			if (!ok) {
				e.code = UKPEV_E_FILTER_NO_EVENT;
				e.offset = (int)(what - cmd);
				print_error(cmd, &e);
				return 2;
			}
		}
	}
	return 0;
}

static int send_define(int fd, const struct trace_opts *t)
{
	size_t n = 0;
	for (int k = 0; k < t->ndefs; k++)
		n += strlen(t->defs[k]) + 1;
	for (int k = 0; k < t->nfilters; k++)
		n += strlen(t->filters[k]) + 1;
	for (int k = 0; k < t->ntriggers; k++)
		n += strlen(t->triggers[k]) + 1;
	char *s = malloc(n + 1), *p = s;
	if (!s)
		return -1;
	for (int k = 0; k < t->ndefs; k++)
		p = stpcpy(p, t->defs[k]) + 1;
	for (int k = 0; k < t->nfilters; k++)
		p = stpcpy(p, t->filters[k]) + 1;
	for (int k = 0; k < t->ntriggers; k++)
		p = stpcpy(p, t->triggers[k]) + 1;
	struct ukpa_define d = { t->buffer_kb, (uint32_t)t->ndefs, (uint32_t)t->nfilters, 0,
				 (uint32_t)t->ntriggers, 0 };
	int r = chan_send(fd, UKPA_DEFINE, &d, sizeof d, s, n);
	free(s);
	return r;
}

/* the agent's answer to DEFINE: the area fd, or -1 (errors printed) */
static int await_armed(int fd, const struct trace_opts *t, int *refused)
{
	*refused = 0;
	for (;;) {
		void *pl;
		uint32_t len;
		int passfd;
		int type = chan_recv(fd, &pl, &len, &passfd, 60000);
		if (type == UKPA_ARMED && passfd >= 0) {
			free(pl);
			return passfd;
		}
		if (type == UKPA_ERROR && len >= sizeof(struct ukpa_error)) {
			struct ukpa_error pe;
			memcpy(&pe, pl, sizeof pe);
			const char *msg = (const char *)pl + sizeof pe;
			int off = pe.offset;
			const char *text = pe.kind == 0 && pe.index < (unsigned)t->ndefs ?
				def_text(t, (int)pe.index, &off)
				: pe.kind == 1 && pe.index < (unsigned)t->nfilters ? t->filters[pe.index]
				: pe.kind == 3 && pe.index < (unsigned)t->ntriggers ? t->triggers[pe.index]
				: NULL;
			/* a filter (trigger): EXPR (COMMAND), after "EVENT:", unless the
			 * event is what is wrong */
			if ((pe.kind == 1 || pe.kind == 3) && text && strstr(msg, "Unknown event") == NULL)
				text = strchr(text, ':') + 1;
			if (text)
				ukp_error_log(msg, text, pe.kind == 0 ? off : pe.offset);
			else
				ukp_err("error: %s", msg);
			free(pl);
			*refused = 1;
			return -1;
		}
		free(pl);
		if (passfd >= 0)
			close(passfd);
		return -1;
	}
}

static int await_hello(int fd, pid_t *pid)
{
	void *pl;
	uint32_t len;
	int passfd;
	int type = chan_recv(fd, &pl, &len, &passfd, 60000);
	if (passfd >= 0)
		close(passfd);
	if (type == UKPA_HELLO && len >= sizeof(struct ukpa_hello)) {
		struct ukpa_hello h;
		memcpy(&h, pl, sizeof h);
		free(pl);
		if (h.version != UKPA_VERSION)
			return -2;
		*pid = h.pid;
		return 0;
	}
	free(pl);
	return type == UKPA_BUSY ? -3 : -1;
}

/* /proc/PID/exe's target */
static int exe_of(pid_t pid, char *buf, size_t n)
{
	char fn[64];
	snprintf(fn, sizeof fn, "/proc/%d/exe", (int)pid);
	ssize_t k = readlink(fn, buf, n - 1);
	if (k <= 0)
		return -1;
	buf[k] = 0;
	return 0;
}

static int target_alive(pid_t pid, int pidfd)
{
	if (pidfd >= 0) {
		struct pollfd p = { pidfd, POLLIN, 0 };
		return poll(&p, 1, 0) == 0;
	}
	return kill(pid, 0) == 0 || errno == EPERM;
}

static void write_totals(struct consumer *c, const struct trace_opts *t)
{
	/* events armed as their library loads: those the library's code
	 * refused (checked against the file at definition, but not every
	 * check can be made before the code is there) */
	for (unsigned id = 0; id < ukpev_reader_nevents(c->r); id++) {
		const struct ukpev_event_info *ev = ukpev_reader_event(c->r, id);
		struct ukpev_stats st;
		if (!ev || !ev->deferred || ukpev_reader_stats(c->r, id, &st) != 0)
			continue;
		if (st.arm_err)
			fprintf(stderr, "%s: %s/%s: not armed at %s when its library loaded: %s\n", ukp_prog,
				ev->group, ev->event, ev->place, ukpev_strerror(st.arm_err));
		else if (!ev->addr)	/* no event, and no error: say why */
			fprintf(stderr, "%s: %s/%s: the library of %s was never loaded\n", ukp_prog,
				ev->group, ev->event, ev->place);
	}
	fprintf(stderr, "%s: %llu events lost\n", ukp_prog,
		(unsigned long long)ukpev_reader_lost(c->r));
	if (!t->profile)
		return;
	unsigned n = ukpev_reader_nevents(c->r);
	for (unsigned id = 0; id < n; id++) {
		const struct ukpev_event_info *ev = ukpev_reader_event(c->r, id);
		struct ukpev_stats st;
		if (!ev || ukpev_reader_stats(c->r, id, &st) < 0)
			continue;
		char name[2 * UKPEV_NAME_MAX + 2];
		snprintf(name, sizeof name, "%s/%s", ev->group, ev->event);
		fprintf(stderr, "  %-44s %15llu %15llu\n", name,
			(unsigned long long)st.hits, (unsigned long long)st.misses);
	}
}

/* the program's file: COMMAND through PATH, or /proc/PID/exe */
static char *program_path(const struct trace_opts *t)
{
	char buf[4096];
	if (t->pid) {
		char l[64];
		snprintf(l, sizeof l, "/proc/%d/exe", (int)t->pid);
		ssize_t n = readlink(l, buf, sizeof buf - 1);
		if (n <= 0)
			return NULL;
		buf[n] = 0;
		return strdup(buf);
	}
	const char *c = t->command ? t->command[0] : NULL;
	if (!c)
		return NULL;
	if (strchr(c, '/'))
		return realpath(c, NULL);
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/bin:/bin";
	for (const char *p = path; *p;) {
		const char *e = strchr(p, ':');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, c);
		if (access(buf, X_OK) == 0)
			return realpath(buf, NULL);
		p += n + (e != NULL);
	}
	return NULL;
}

/* The file of a library named without a path (libpython3.11.so.1.0), as
 * the program's dynamic linker finds it: attached, the object the process
 * has mapped by that name; launched, what the dynamic linker lists for the
 * program (`ld.so --list`: its RPATH/RUNPATH with $ORIGIN, LD_LIBRARY_PATH,
 * ld.so.cache, as it will load them; nothing of the program runs).  NULL
 * where neither knows it. */
static char *library_path(const struct trace_opts *t, const char *prog, const char *name)
{
	/* the dynamic linker's list, read once: "\tNAME => PATH (0xADDR)" */
	static char *list;
	static int listed;
	char *found = NULL, line[8192];
	size_t nl = strlen(name);
	if (t->pid) {
		snprintf(line, sizeof line, "/proc/%d/maps", (int)t->pid);
		FILE *f = fopen(line, "re");
		while (f && !found && fgets(line, sizeof line, f)) {
			char *path = strchr(line, '/');
			if (!path)
				continue;
			path[strcspn(path, "\n")] = 0;
			const char *base = strrchr(path, '/') + 1;
			if (!strcmp(base, name))
				found = strdup(path);
		}
		if (f)
			fclose(f);
		return found;
	}
	if (!listed && prog && strchr(prog, '/')) {
		listed = 1;
		int fd[2];
		if (pipe2(fd, O_CLOEXEC) != 0)
			return NULL;
		pid_t pid = fork();
		if (pid == 0) {
			dup2(fd[1], 1);
			int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
			if (nul >= 0)
				dup2(nul, 2);
			execl("/lib64/ld-linux-x86-64.so.2", "ld.so", "--list", prog, (char *)NULL);
			_exit(127);
		}
		close(fd[1]);
		FILE *f = pid > 0 ? fdopen(fd[0], "r") : NULL;
		if (!f)
			close(fd[0]);
		size_t n = 0;
		while (f && fgets(line, sizeof line, f)) {
			size_t l = strlen(line);
			char *nlist = realloc(list, n + l + 1);
			if (!nlist)
				break;
			list = nlist;
			memcpy(list + n, line, l + 1);
			n += l;
		}
		if (f)
			fclose(f);
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
	for (const char *l = list; l && *l && !found; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "") {
		l += strspn(l, " \t");
		if (strncmp(l, name, nl) || strncmp(l + nl, " => /", 5))
			continue;
		const char *path = l + nl + 4, *end = strstr(path, " (0x"), *eol = strchr(path, '\n');
		if (end && (!eol || end < eol))
			found = strndup(path, (size_t)(end - path));
	}
	return found;
}

/* source-level definitions become raw ones (t->defs replaced), read from
 * the object their place names (OBJ:...) or else the program (-x OBJ);
 * so do raw ones whose SYM only the debug information knows (an inlined
 * function: every copy). 0, or the exit status with the error written */
static int translate_source(struct trace_opts *t)
{
	/* the raw definitions name the object by this path, which the
	 * agent opens in the target: from its working directory, not ours */
	char *prog = t->exec ? (strchr(t->exec, '/') ? realpath(t->exec, NULL) : NULL) : NULL;
	if (!prog && t->exec) {	/* -x a library's name: the program's */
		char *p = program_path(t);
		prog = library_path(t, p, t->exec);
		free(p);
	}
	if (!prog)
		prog = t->exec ? strdup(t->exec) : program_path(t);
	struct dw_cache *cache = NULL;
	struct dw_error err;
	dw_note = ukp_dwarf_note;
	const char **defs = NULL, **src = NULL;
	int n = 0, r = 0;
	for (int k = 0; k < t->ndefs && !r; k++) {
		char **out = NULL, on[1024];
		int m = 1;
		int named = dw_def_object(t->defs[k], on, sizeof on);
		int dw = dw_is_source_level(t->defs[k]);
		/* a path as the agent will open it, in the target */
		char *abs = named && strchr(on, '/') ? realpath(on, NULL) :
			    named ? library_path(t, prog, on) : NULL;
		if (abs)
			snprintf(on, sizeof on, "%s", abs);
		free(abs);
		const char *obj = named ? on : prog;
		if (dw && !obj) {
			ukp_err("source-level definitions need -x OBJ (the program is not found)");
			r = 2;
			break;
		}
		/* a raw SYM the symbol tables have needs no DWARF (whose
		 * reading, decompressing a library's debug file, costs tenths
		 * of a second) */
		struct dw_obj *o = obj && (dw || !dw_symbol_in_tables(obj, t->defs[k])) ?
				   dw_cache_open(&cache, obj, &err) : NULL;
		if (dw && !o) {	/* the place's object cannot be read */
			err.offset = dw_place_offset(t->defs[k]);
			ukp_dwarf_error(t->defs[k], &err);
			r = 2;
			break;
		}
		if (dw)
			m = dw_translate(o, t->defs[k], &out, &err);
		else if (o && (m = dw_translate_symbol(o, t->defs[k], named, &out, &err)) > 0)
			dw = 1;
		else if (m == 0)
			m = 1;
		if (m < 0) {
			ukp_dwarf_error(t->defs[k], &err);
			r = 2;
			break;
		}
		const char **nd = realloc(defs, (size_t)(n + m + 1) * sizeof *defs);
		if (nd)
			defs = nd;
		const char **ns = realloc(src, (size_t)(n + m + 1) * sizeof *src);
		if (ns)
			src = ns;
		if (!nd || !ns) {
			ukp_err("out of memory");
			r = 2;
		}
		for (int j = 0; j < m; j++) {
			if (r && dw) {
				free(out[j]);
			} else if (!r) {
				src[n] = dw ? t->defs[k] : NULL;
				defs[n++] = dw ? out[j] : t->defs[k];
			}
		}
		free(out);
	}
	dw_cache_free(cache);
	free(prog);
	if (r) {
		for (int j = 0; j < n; j++)
			if (src[j])
				free((char *)defs[j]);
		free(defs);
		free(src);
		return r;
	}
	defs[n] = NULL;
	free(t->defs);
	t->defs = defs;
	t->ndefs = n;
	def_src = src;
	return 0;
}

/* the trace itself, of checked definitions: the exit status */
static int trace_run(const struct trace_opts t)
{
	int r;
	FILE *out = stdout;
	if (t.output && !(out = fopen(t.output, "we"))) {
		ukp_err("%s: %s", t.output, strerror(errno));
		return 1;
	}

	struct sigaction sa = { .sa_sigaction = on_signal, .sa_flags = SA_SIGINFO | SA_RESTART };
	sigemptyset(&sa.sa_mask);
	signal(SIGPIPE, SIG_IGN);

	int ctl = -1;
	pid_t child = 0, pid = t.pid;
	if (t.command) {
		if ((r = launch_start(t.command, &ctl, &child)) != 0)
			return r;
		pid = child;
		child_pid = child;
	} else {
		if ((r = attach_connect(t.pid, &ctl)) != 0)
			return r;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	struct sigaction su = { .sa_handler = on_usr1, .sa_flags = SA_RESTART };
	sigemptyset(&su.sa_mask);
	sigaction(SIGUSR1, &su, NULL);

	pid_t apid = 0;
	r = await_hello(ctl, &apid);
	if (r < 0) {
		if (child) {
			int st;
			/* killed meanwhile (a terminal's ^C reaches it too) */
			if (waitpid(child, &st, WNOHANG) == child && WIFSIGNALED(st))
				return 128 + WTERMSIG(st);
			kill(child, SIGKILL);
			waitpid(child, &st, 0);
			ukp_err("the agent did not start in %s", t.command[0]);
			return 1;
		}
		ukp_err("cannot attach to %d: %s", (int)t.pid,
			r == -3 ? "already traced by another ukprobe" :
			r == -2 ? "its agent is of another ukprobe version" : "the agent does not answer");
		return 1;
	}
	/* launch: the agent's end of the channel is close-on-exec, so the
	 * channel hangs up when COMMAND execs (or ends): a program it execs
	 * runs untraced, which is said once (a shell script or a wrapper as
	 * COMMAND would otherwise give no events and no word why).  Its file
	 * now, before main runs. */
	char exe0[PATH_MAX] = "";
	bool exec_watch = child && exe_of(pid, exe0, sizeof exe0) == 0;
	int refused = 0;
	/* json: every event also records the stack pointer, which pairs a
	 * return with its call (fmt_json.c); errors show the definitions as
	 * given */
	struct trace_opts sent = t;
	if (t.format == FMT_JSON)
		sent.defs = fmt_json_defs(t.defs, t.ndefs);
	int areafd = send_define(ctl, &sent) < 0 ? -1 : await_armed(ctl, &t, &refused);
	if (t.format == FMT_JSON)
		fmt_json_defs_free(sent.defs, t.defs, t.ndefs);
	if (areafd < 0) {
		if (child) {
			int st;
			if (!refused && waitpid(child, &st, WNOHANG) == child && WIFSIGNALED(st))
				return 128 + WTERMSIG(st);
			kill(child, SIGKILL);	/* it exits before main by itself */
			waitpid(child, &st, 0);
		}
		if (!refused)
			ukp_err("the agent in %d went away", (int)pid);
		return refused ? 2 : 1;
	}
	struct ukpev_reader *rd;
	if ((r = ukpev_reader_open(areafd, &rd)) < 0) {
		ukp_err("cannot map the record area: %s", strerror(-r));
		if (child)
			kill(child, SIGKILL);
		return 1;
	}
	struct symbolizer *sym = sym_new(pid, rd);
	struct consumer c;
	consumer_init(&c, rd, out, sym, t.format);
	/* GO, and which records are the agent's own arming (sent when every
	 * probe is in); attached, the program held meanwhile (attach.c) */
	{
		void *pl;
		uint32_t len;
		int pf;
		int ty = child ? (chan_send(ctl, UKPA_GO, NULL, 0, NULL, 0),
				  chan_recv(ctl, &pl, &len, &pf, 30000))
			       : held_exchange(pid, ctl, UKPA_GO, NULL, 0, &pl, &len, &pf, 30000);
		if (ty == -2) {
			ukp_err("the agent in %d went away", (int)pid);
			return 1;
		}
		if (pf >= 0)
			close(pf);
		if (ty == UKPA_MUTE)
			for (size_t k = 0; k + sizeof(struct ukpa_mute) <= len; k += sizeof(struct ukpa_mute)) {
				struct ukpa_mute m;
				memcpy(&m, (char *)pl + k, sizeof m);
				consumer_mute(&c, m.tid, m.until_ns);
			}
		free(pl);
	}

	consumer_start(&c);

	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	double t0 = now_s(), last_maps = t0;
	int status = 0, exited = 0;
	while (!exited) {
		struct pollfd p[2] = { { pidfd, POLLIN, 0 },
				       { child ? (exec_watch ? ctl : -1) : ctl, child ? 0 : POLLIN, 0 } };
		poll(p, 2, 10);
		if (child && exec_watch && (p[1].revents & (POLLHUP | POLLERR))) {
			char exe[PATH_MAX];
			exec_watch = false;
			if (exe_of(pid, exe, sizeof exe) == 0 && strcmp(exe, exe0))
				ukp_err("%s (%d) execs %s: what it execs runs untraced",
					t.command[0], (int)pid, exe);
		}
		/* attach: the agent's end closes when the target execs (the
		 * new program has no agent) or dies */
		if (!child && (p[1].revents & (POLLHUP | POLLERR | POLLIN))) {
			exited = 1;
			consumer_drain(&c, 0);
			break;
		}
		if (now_s() - last_maps > 0.2 && target_alive(pid, pidfd)) {
			sym_refresh(sym);	/* objects loaded since */
			last_maps = now_s();
		}
		if (child) {
			pid_t w = waitpid(child, &status, WNOHANG);
			if (w == child)
				exited = 1;
		} else {
			if (stop_sig)
				break;
			if (t.duration > 0 && now_s() - t0 >= t.duration)
				break;
			if (!target_alive(pid, pidfd)) {
				exited = 1;
				break;
			}
		}
		consumer_drain(&c, 0);
		if (hist_asked && t.format == FMT_FTRACE) {
			hist_asked = 0;
			write_hists(rd, out, sym, t.format);
		}
	}
	if (!child && !exited) {
		/* every probe removed before the last drain: nothing is
		 * recorded after it */
		void *pl;
		uint32_t len;
		int pf;
		/* the program held while its probes come out (attach.c) */
		int ty = held_exchange(pid, ctl, UKPA_STOP, NULL, 0, &pl, &len, &pf, 30000);
		for (;;) {
			free(pl);
			if (pf >= 0)
				close(pf);
			if (ty == UKPA_STOPPED || ty < 0)
				break;
			ty = chan_recv(ctl, &pl, &len, &pf, 30000);
		}
	}
	close(ctl);
	if (exited)
		sym_set_dead(sym);	/* its objects are known; no maps to read */
	if (t.format == FMT_JSON)
		c.w.json_tail = json_hists(rd, sym);
	consumer_end(&c);
	free(c.w.json_tail);
	if (t.format != FMT_JSON)
		write_hists(rd, out, sym, t.format);
	if (out != stdout)
		fclose(out);
	else
		fflush(stdout);
	write_totals(&c, &t);
	ukpev_reader_close(rd);
	sym_free(sym);
	if (child) {
		if (WIFSIGNALED(status))
			return 128 + WTERMSIG(status);
		return WEXITSTATUS(status);
	}
	return 0;
}

/* what trace_parse and translate_source allocated */
static void trace_opts_free(struct trace_opts *t)
{
	for (int k = 0; def_src && k < t->ndefs; k++)
		if (def_src[k])
			free((char *)t->defs[k]);
	free(def_src);
	def_src = NULL;
	free(t->defs);
	free(t->filters);
	free(t->triggers);
}

int cmd_trace(int argc, char **argv)
{
	struct trace_opts t;
	struct ukpev_def **defs = NULL;
	int r = trace_parse(argc, argv, &t);
	if (r == 0 && (r = translate_source(&t)) == 0 && (r = check_input(&t, &defs)) == 0)
		r = trace_run(t);
	for (int k = 0; defs && k < t.ndefs; k++)
		ukpev_def_free(defs[k]);
	free(defs);
	trace_opts_free(&t);
	return r < 0 ? 0 : r;
}
