/* SPDX-License-Identifier: MIT */
/*
 * The same through LD_PRELOAD, into real programs: a probing library
 * (tests/preload/alloc_probes.c: malloc, free, a kretprobe on calloc)
 * in shells that exec a chain of programs, in python3 started through a
 * shell that execs it (how version managers' shims start it), and in an
 * event loop that checks its own calls while probes come and go.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "ukt.h"

static char dir[4096];

static void find_build_dir(void)
{
	ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	UKT_ASSERT(n > 0);
	dir[n] = 0;
	*strrchr(dir, '/') = 0;		/* build/tests */
	*strrchr(dir, '/') = 0;		/* build */
}

/* cmd through sh with the probing library preloaded: its stdout, status */
static int run_probed(const char *cmd, const char *env, char *out, size_t n)
{
	char full[8192];
	snprintf(full, sizeof(full), "export %s LD_PRELOAD=%s/preload/alloc_probes.so; %s",
		 env, dir, cmd);
	FILE *p = popen(full, "r");
	UKT_ASSERT(p);
	size_t k = fread(out, 1, n - 1, p);
	out[k] = 0;
	return pclose(p);
}

/* Each program execs the next after a little work of its own, so the
 * execs fall at every point of the batches each new image starts. */
UKT_CASE_T(shell_exec_chain, 300)
{
	find_build_dir();
	const char *chain =
		"exec bash -c 'x=$(seq 1 $((RANDOM % 300)) | wc -l); "
		"exec sh -c \"y=\\$(echo a b c | wc -w); exec env Z=chain-ok printenv Z\"'";
	int bad = 0;
	for (int i = 0; i < 30; i++) {
		char out[256];
		int st = run_probed(chain, "UKT_X=1", out, sizeof(out));
		if (st != 0 || strcmp(out, "chain-ok\n")) {
			fprintf(stderr, "  run %d: status %#x, output \"%s\"\n", i, st, out);
			bad++;
		}
	}
	UKT_EQ(bad, 0);
}

UKT_CASE_T(python_through_an_exec_shim, 300)
{
	find_build_dir();
	if (access("/usr/bin/python3", X_OK))
		UKT_FAIL("no /usr/bin/python3");
	int bad = 0;
	for (int i = 0; i < 20; i++) {
		char out[256];
		int st = run_probed("exec bash -c 'exec /usr/bin/python3 -c \"print(sum(range(10)))\"'",
				    "UKT_X=1", out, sizeof(out));
		if (st != 0 || strcmp(out, "45\n")) {
			fprintf(stderr, "  run %d: status %#x, output \"%s\"\n", i, st, out);
			bad++;
		}
	}
	UKT_EQ(bad, 0);
}

/* 200 events 5 ms apart while 30 probes are optimised and removed */
UKT_CASE_T(epoll_loop_sees_no_eintr, 120)
{
	find_build_dir();
	char out[256], cmd[4200];
	snprintf(cmd, sizeof(cmd), "%s/progs/epoll_loop 200", dir);
	int st = run_probed(cmd, "UKT_CHURN=30", out, sizeof(out));
	if (st != 0)
		fprintf(stderr, "  status %#x: %s", st, out);
	UKT_EQ(st, 0);
	UKT_STREQ(out, "200 events\n");
}
