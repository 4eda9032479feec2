/*
 * Real Debian programs, unchanged, probed through LD_PRELOAD with the
 * kprobe_preload example: they must produce exactly the output they
 * produce unprobed, and the probe must have fired.
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

/* Runs cmd through sh, returns its stdout (malloc'd) and exit status. */
static char *run(const char *cmd, int *status)
{
	FILE *p = popen(cmd, "r");
	UKT_ASSERT(p);
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	UKT_ASSERT(buf);
	size_t k;
	while ((k = fread(buf + n, 1, cap - n - 1, p)) > 0) {
		n += k;
		if (n + 1 == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			UKT_ASSERT(buf);
		}
	}
	buf[n] = 0;
	*status = pclose(p);
	return buf;
}

static void probed_equals_unprobed(const char *symbol, const char *cmd)
{
	char probed[16384], *plain, *out, *report;
	int st1, st2;

	find_build_dir();
	/* every process of the pipeline gets the probe */
	snprintf(probed, sizeof(probed),
		 "(export UKP_SYMBOL=%s LD_PRELOAD=%s/examples/kprobe_preload.so; %s) 2>/tmp/ukt-preload.%d",
		 symbol, dir, cmd, (int)getpid());
	plain = run(cmd, &st1);
	out = run(probed, &st2);
	UKT_EQ(st1, st2);
	UKT_STREQ(out, plain);
	char rp[64];
	snprintf(rp, sizeof(rp), "/tmp/ukt-preload.%d", (int)getpid());
	FILE *f = fopen(rp, "r");
	UKT_ASSERT(f);
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	rewind(f);
	report = calloc(1, size + 1);
	UKT_ASSERT(report);
	UKT_EQ(fread(report, 1, size, f), size);
	fclose(f);
	/* handlers print strings they read: keep strstr going past NULs */
	for (long i = 0; i < size; i++)
		if (!report[i])
			report[i] = '?';
	unlink(rp);
	/* each process's destructor: "<sym>: N hits, 0 missed" */
	char want[256];
	snprintf(want, sizeof(want), "[kprobe_preload] %s: ", symbol);
	long total = 0;
	int procs = 0;
	for (char *line = strstr(report, want); line; line = strstr(line + 1, want)) {
		char *end;
		long hits = strtol(line + strlen(want), &end, 10);
		if (end == line + strlen(want))
			continue;	/* a handler's line, not a summary */
		UKT_ASSERT(!strncmp(end, " hits, 0 missed", 15));
		total += hits;
		procs++;
	}
	if (!procs)
		UKT_FAIL("no summary in the report");
	UKT_ASSERT(total > 0);
	free(plain);
	free(out);
	free(report);
}

UKT_CASE_T(sort_probed_at_memcmp, 120)
{
	probed_equals_unprobed("libc.so.6:memcmp",
			       "seq 1 3000 | sed 's/$/ line/' | LC_ALL=C sort -r");
}

UKT_CASE_T(ls_probed_at_readdir, 120)
{
	probed_equals_unprobed("libc.so.6:readdir", "ls -la /usr/lib /usr/bin /etc | sed 's/  */ /g'");
}

UKT_CASE_T(gzip_probed_at_memcpy, 120)
{
	probed_equals_unprobed("libc.so.6:memcpy",
			       "seq 1 20000 | gzip -9 -c | gzip -d -c | md5sum");
}
