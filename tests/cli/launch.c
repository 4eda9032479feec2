/* SPDX-License-Identifier: MIT */
/*
 * Launch: COMMAND's exit status, environment, stdio and cwd untouched;
 * every event written, those just before _exit() or a fatal signal
 * included; fork children traced with their own tid and comm; exec'd
 * programs untraced.
 */
#include "run.h"

#define MARK "p:t/mark mark n=%di:s32"

/* the "n=" values of the t/mark lines, in order, into v; their count */
static int marks(const char *out, int *v, int max, pid_t *tids)
{
	int n = 0;
	for (const char *p = out; (p = strstr(p, " mark: (")); p++) {
		const char *q = strstr(p, " n=");
		const char *eol = strchr(p, '\n');
		if (!q || (eol && q > eol) || n >= max)
			continue;
		if (tids) {
			/* "comm-TID  [cpu]": the tid ends the word before " [" */
			const char *bol = p;
			while (bol > out && bol[-1] != '\n')
				bol--;
			const char *br = strstr(bol, " [");
			const char *dash = br;
			while (dash > bol && dash[-1] != '-')
				dash--;
			tids[n] = atoi(dash);
		}
		v[n++] = atoi(q + 3);
	}
	return n;
}

UKT_CASE(exit_statuses)
{
	static const struct { const char *how, *arg; int status; } c[] = {
		{ "exit", "0", 0 }, { "exit", "3", 3 }, { "_exit", "7", 7 },
		{ "signal", "15", 128 + 15 }, { "signal", "11", 128 + 11 },
		{ "abort", NULL, 128 + 6 },
	};
	for (size_t k = 0; k < sizeof c / sizeof *c; k++) {
		struct run r = ukprobe("trace", MARK, "--", target("ender"), "5", c[k].how,
				       c[k].arg, NULL);
		RUN_EXPECT(r, r.status == c[k].status);
		/* every mark recorded before the end is written */
		int v[16];
		int n = marks(r.out, v, 16, NULL);
		RUN_EXPECT(r, n == 5);
		for (int j = 0; j < n; j++)
			UKT_EQ(v[j], j + 1);
		RUN_EXPECT(r, strstr(r.err, "ukprobe: 0 events lost\n") != NULL);
		/* symbolised from the program's file after it ended: no
		 * [object] for the main executable */
		RUN_EXPECT(r, count_lines(r.out, " mark: (mark+0x0/0x") == 5);
		RUN_EXPECT(r, count_lines(r.out, "[ender]") == 0);
		run_free(&r);
	}
}

UKT_CASE(environment_stdio_cwd_untouched)
{
	/* the program's own LD_PRELOAD stays; ukprobe's entries are gone */
	setenv("LD_PRELOAD", "libm.so.6", 1);
	UKT_ASSERT(chdir("/tmp") == 0);
	struct run r = ukprobe("trace", MARK, "--", target("ender"), "1", "env", NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, strstr(r.out, "LD_PRELOAD=libm.so.6\n") != NULL);
	RUN_EXPECT(r, strstr(r.out, "FD=-\n") != NULL);
	RUN_EXPECT(r, strstr(r.out, "cwd=/tmp\n") != NULL);
	run_free(&r);
	unsetenv("LD_PRELOAD");
	r = ukprobe("trace", MARK, "--", target("ender"), "1", "env", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "LD_PRELOAD=-\n") != NULL);
	run_free(&r);

	/* stdin reaches the program */
	int p[2];
	UKT_ASSERT(pipe(p) == 0);
	UKT_ASSERT(write(p[1], "hello through\n", 14) == 14);
	close(p[1]);
	char *argv[] = { (char *)ukprobe_path(), (char *)"trace", (char *)MARK, (char *)"--",
			 (char *)target("ender"), (char *)"2", (char *)"cat", NULL };
	r = run_argv_in(argv, p[0]);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "hello through\n") != NULL);
	run_free(&r);
}

UKT_CASE(fork_child_traced_exec_not)
{
	struct run r = ukprobe("trace", MARK, "--", target("forker"), NULL);
	RUN_EXPECT(r, r.status == 0);
	int v[16];
	pid_t tid[16];
	int n = marks(r.out, v, 16, tid);
	/* 1 (parent), 2 2 (child), 3 (parent); no 4: the exec'd program */
	RUN_EXPECT(r, n == 4);
	UKT_EQ(v[0], 1);
	UKT_EQ(v[1], 2);
	UKT_EQ(v[2], 2);
	UKT_EQ(v[3], 3);
	const char *c = strstr(r.out, "child ");
	RUN_EXPECT(r, c != NULL);
	pid_t child = atoi(c + 6);
	UKT_EQ(tid[1], child);
	UKT_EQ(tid[2], child);
	UKT_ASSERT(tid[0] == tid[3] && tid[0] != child);
	RUN_EXPECT(r, count_lines(r.out, "forkchild-") == 2);
	RUN_EXPECT(r, strstr(r.out, "exec'd\n") != NULL);
	run_free(&r);
}

/* COMMAND exec'ing another program (a wrapper, a shell script's
 * interpreter) is said once on stderr, the new program named: it runs
 * untraced; one exec'ing itself again (forker, above) is not */
UKT_CASE(command_exec_said)
{
	struct run r = ukprobe("trace", "p libc.so.6:getpid", "-o", "/dev/null", "--", "bash", "-c",
			       "exec sleep 0.5", NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, count_lines(r.err, "execs /usr/bin/sleep: what it execs runs untraced") == 1);
	run_free(&r);
	r = ukprobe("trace", MARK, "--", target("forker"), NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.err, "execs") == NULL);
	run_free(&r);
}

UKT_CASE(command_not_found)
{
	struct run r = ukprobe("trace", MARK, "--", "/nonexistent/program", NULL);
	RUN_EXPECT(r, r.status == 127 && strstr(r.err, "/nonexistent/program"));
	run_free(&r);
}

UKT_CASE(static_command_refused)
{
	struct run r = ukprobe("trace", MARK, "--", target("static_sleep"), NULL);
	RUN_EXPECT(r, r.status == 1 && strstr(r.err, "static"));
	RUN_EXPECT(r, strstr(r.out, "ready") == NULL);		/* it never ran */
	run_free(&r);
}

/* a program the kernel runs with AT_SECURE (set-user-ID to another
 * user) gets no LD_PRELOAD: refused before it runs, exit 1, the reason
 * said; set-user-ID to ukprobe's own user changes nothing: traced */
UKT_CASE(set_user_id_command)
{
	char dir[] = "/tmp/ukt-setuid-XXXXXX";
	UKT_ASSERT(mkdtemp(dir));
	UKT_ASSERT(chmod(dir, 0755) == 0);
	char exe[PATH_MAX];
	snprintf(exe, sizeof exe, "%s/ender", dir);
	size_t n;
	unsigned char *bytes = file_bytes(target("ender"), &n);
	write_file(exe, bytes, n);
	free(bytes);
	UKT_ASSERT(chmod(exe, 04755) == 0);	/* ours: traced */
	struct run r = ukprobe("trace", MARK, "--", exe, "3", "exit", "0", NULL);
	int v[8];
	RUN_EXPECT(r, r.status == 0 && marks(r.out, v, 8, NULL) == 3);
	run_free(&r);
	UKT_ASSERT(chown(exe, 65534, 65534) == 0);	/* nobody's (the tests run as root) */
	UKT_ASSERT(chmod(exe, 04755) == 0);
	r = ukprobe("trace", MARK, "--", exe, "3", "exit", "0", NULL);
	RUN_EXPECT(r, r.status == 1 && strstr(r.err, "set-user-ID") && count_lines(r.err, "") == 1);
	RUN_EXPECT(r, marks(r.out, v, 8, NULL) == 0 && r.nout == 0);	/* it never ran */
	run_free(&r);
	unlink(exe);
	rmdir(dir);
}

/* a program whose section headers are damaged (its .dynstr said to run
 * far past the file): ukprobe reads its symbols without faulting, and
 * launches and traces it as any */
UKT_CASE(damaged_section_headers)
{
	char dir[] = "/tmp/ukt-damaged-XXXXXX";
	UKT_ASSERT(mkdtemp(dir));
	char exe[PATH_MAX];
	snprintf(exe, sizeof exe, "%s/ender", dir);
	damaged_copy(target("ender"), exe, DAMAGE_DYNSTR);
	struct run r = ukprobe("trace", MARK, "--", exe, "3", "exit", "0", NULL);
	RUN_EXPECT(r, r.status == 0);
	int v[8];
	RUN_EXPECT(r, marks(r.out, v, 8, NULL) == 3);
	RUN_EXPECT(r, strstr(r.err, "ukprobe: 0 events lost\n") != NULL);
	run_free(&r);
	unlink(exe);
	rmdir(dir);
}

/* SIGTERM sent to ukprobe alone goes on to the program, whose status
 * ukprobe then exits with */
UKT_CASE(sigterm_forwarded)
{
	int po[2];
	UKT_ASSERT(pipe(po) == 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(po[1], 1);
		int dn = open("/dev/null", O_RDWR);
		dup2(dn, 2);
		int in[2];
		if (pipe(in))	/* stdin that never closes: the sleeper runs on */
			_exit(99);
		dup2(in[0], 0);
		execl(ukprobe_path(), "ukprobe", "trace", "p:t/work work", "--",
		      target("sleeper"), (char *)NULL);
		_exit(126);
	}
	close(po[1]);
	FILE *f = fdopen(po[0], "r");
	char line[512];
	int ready = 0;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "ready ", 6)) {
			ready = 1;
			break;
		}
	UKT_ASSERT(ready);
	kill(pid, SIGTERM);
	int st = wait_status(pid);
	UKT_EQ(st, 128 + SIGTERM);
	fclose(f);
}

UKT_CASE(filters_and_profile)
{
	struct run r = ukprobe("trace", "--profile", "--filter=mark:n > 2 && n != 4",
			       "--filter=t/ret:common_pid == 1", MARK, "r:t/ret mark v=$retval:u32",
			       "--", target("ender"), "6", "exit", "0", NULL);
	RUN_EXPECT(r, r.status == 0);
	int v[16];
	int n = marks(r.out, v, 16, NULL);
	RUN_EXPECT(r, n == 3);
	UKT_EQ(v[0], 3);
	UKT_EQ(v[1], 5);
	UKT_EQ(v[2], 6);
	RUN_EXPECT(r, count_lines(r.out, " ret: (") == 0);	/* no thread is pid 1 */
	/* uprobe_profile: hits count every call, filtered ones too */
	RUN_EXPECT(r, strstr(r.err, "ukprobe: 0 events lost\n") != NULL);
	char *m = strstr(r.err, "t/mark ");
	char *t = strstr(r.err, "t/ret ");
	RUN_EXPECT(r, m && t);
	unsigned long hits, misses;
	UKT_ASSERT(sscanf(m + 7, "%lu %lu", &hits, &misses) == 2);
	UKT_EQ(hits, 6);
	UKT_EQ(misses, 0);
	UKT_ASSERT(sscanf(t + 6, "%lu %lu", &hits, &misses) == 2);
	UKT_EQ(hits, 6);
	UKT_EQ(misses, 0);
	run_free(&r);
	/* a string filter with a glob on $comm */
	r = ukprobe("trace", "--filter=mark:c ~ \"end*\" && n <= 2", "p:t/mark mark n=%di:s32 c=$comm",
		    "--", target("ender"), "4", "exit", "0", NULL);
	RUN_EXPECT(r, r.status == 0);
	n = marks(r.out, v, 16, NULL);
	RUN_EXPECT(r, n == 2);
	run_free(&r);
}

/* A function of libc's own, without a dynamic symbol: named from the
 * separate debug file found by build-id (libc6-dbg), as the engine
 * resolves it; glibc calls it once, before main. */
UKT_CASE(place_named_from_the_debug_file)
{
	struct run r = ukprobe("trace", "p:t/start libc.so.6:__libc_start_call_main", "--", "/bin/true",
			       NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, ": start: (__libc_start_call_main+0x0/0x") == 1 &&
			      count_lines(r.out, " [libc.so.6])") == 1);
	run_free(&r);
}

/* bash has getenv/setenv/unsetenv of its own, over shell variables it has
 * not read yet when the agent's constructor runs: the agent's variables
 * must leave the environment all the same, and what bash execs runs
 * untraced (an agent in it with no command would end it with 127) */
UKT_CASE(bash_execs_untraced_without_our_variables)
{
	struct run r = ukprobe("trace", "p libc.so.6:getpid", "-o", "/dev/null", "--", "bash", "-c",
			       "/bin/true; echo \"rc=$?\"; /bin/echo hello; env | grep -c 'UKPROBE_AGENT_FD\\|libukprobe-agent'",
			       NULL);
	RUN_EXPECT(r, r.status == 1 && !strcmp(r.out, "rc=0\nhello\n0\n"));
	run_free(&r);
}
