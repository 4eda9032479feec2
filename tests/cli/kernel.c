/* SPDX-License-Identifier: MIT */
/*
 * The kernel is the oracle: the same probe on libc's malloc (and on
 * write and read, where gzip allocates almost nothing), through the
 * kernel's uprobe_events (a private tracefs instance, filtered to the
 * workload's pid) and through ukprobe, on the same workloads (gzip, sort
 * of a file made here).  The calls ukprobe records are every call of the
 * program from the moment its events are armed (before main): the
 * kernel's sequence without its first few (the dynamic linker's start-up
 * ones, made before any constructor could arm anything) must equal
 * ukprobe's, size for size.
 */
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include "run.h"

#define TRACEFS "/sys/kernel/tracing"

static int tracefs_ready(void)
{
	if (access(TRACEFS "/uprobe_events", W_OK) == 0)
		return 1;
	mount("nodev", TRACEFS, "tracefs", 0, NULL);
	return access(TRACEFS "/uprobe_events", W_OK) == 0;
}

/* the file offset of link-time address v in the ELF file f */
static unsigned long file_offset(const unsigned char *f, unsigned long v)
{
	const Elf64_Ehdr *eh = (const void *)f;
	const Elf64_Phdr *ph = (const void *)(f + eh->e_phoff);
	for (int k = 0; k < eh->e_phnum; k++)
		if (ph[k].p_type == PT_LOAD && v >= ph[k].p_vaddr &&
		    v < ph[k].p_vaddr + ph[k].p_filesz)
			return v - ph[k].p_vaddr + ph[k].p_offset;
	UKT_FAIL("address 0x%lx in no PT_LOAD", v);
}

/* the file offset of the entry point (_start) of the program at path */
static unsigned long entry_offset(const char *path)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	UKT_ASSERT(fd >= 0 && fstat(fd, &st) == 0);
	const unsigned char *f = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	UKT_ASSERT(f != MAP_FAILED);
	unsigned long off = file_offset(f, ((const Elf64_Ehdr *)(const void *)f)->e_entry);
	munmap((void *)f, (size_t)st.st_size);
	close(fd);
	return off;
}

/* this process's libc.so.6 path and function fn's file offset in it */
static unsigned long libc_offset(const char *fn, char *path, size_t n)
{
	FILE *m = fopen("/proc/self/maps", "r");
	char line[4200];
	path[0] = 0;
	while (fgets(line, sizeof line, m)) {
		char *p = strchr(line, '/');
		if (p && strstr(p, "/libc.so.6")) {
			p[strcspn(p, "\n")] = 0;
			snprintf(path, n, "%s", p);
			break;
		}
	}
	fclose(m);
	UKT_ASSERT(path[0]);
	long off = sym_file_offset(path, fn);
	UKT_ASSERT(off > 0);
	return (unsigned long)off;
}

/* the size= values of lines with needle, in order */
static long *sizes(const char *out, const char *needle, int *count)
{
	long *v = NULL;
	int n = 0, cap = 0;
	for (const char *p = out; (p = strstr(p, needle)); p++) {
		const char *eol = strchr(p, '\n');
		const char *q = strstr(p, " size=");
		if (!q || (eol && q > eol))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 1024;
			v = realloc(v, (size_t)cap * sizeof *v);
		}
		v[n++] = strtol(q + 6, NULL, 10);
	}
	*count = n;
	return v;
}

static char *slurp_file(const char *path)
{
	int fd = open(path, O_RDONLY);
	UKT_ASSERT(fd >= 0);
	size_t cap = 1 << 20, n = 0;
	char *b = malloc(cap);
	ssize_t r;
	while ((r = read(fd, b + n, cap - n - 1)) > 0) {
		n += (size_t)r;
		if (cap - n < 4096)
			b = realloc(b, cap *= 2);
	}
	b[n] = 0;
	close(fd);
	return b;
}

/* argv run once under the kernel's probe at file offset off of lib: the
 * values of register reg it saw */
static long *kernel_run(const char *lib, unsigned long off, const char *reg, char *const *argv,
			const char *in_path, int *count, int *before)
{
	char inst[128], buf[4400];
	snprintf(inst, sizeof inst, TRACEFS "/instances/ukt_cli_%d", (int)getpid());
	rmdir(inst);
	UKT_ASSERT(mkdir(inst, 0755) == 0);
	char grp[64];
	snprintf(grp, sizeof grp, "ukt_cli_%d", (int)getpid());
	snprintf(buf, sizeof buf, "p:%s/f %s:0x%lx size=%%%s:u64\n", grp, lib, off, reg);
	ukt_put(TRACEFS "/uprobe_events", buf, 1);
	snprintf(buf, sizeof buf, "p:%s/start %s:0x%lx\n", grp, argv[0], entry_offset(argv[0]));
	ukt_put(TRACEFS "/uprobe_events", buf, 1);
	snprintf(buf, sizeof buf, "%s/buffer_size_kb", inst);
	ukt_put(buf, "16384", 0);

	/* the workload waits, stopped, until its pid is the only one traced */
	int out = open("/dev/null", O_WRONLY);
	pid_t pid = fork();
	if (pid == 0) {
		int in = open(in_path, O_RDONLY);
		dup2(in, 0);
		dup2(out, 1);
		raise(SIGSTOP);
		execv(argv[0], argv);
		_exit(126);
	}
	int st;
	UKT_ASSERT(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st));
	snprintf(buf, sizeof buf, "%s/set_event_pid", inst);
	char pids[32];
	snprintf(pids, sizeof pids, "%d", (int)pid);
	ukt_put(buf, pids, 0);
	snprintf(buf, sizeof buf, "%s/events/%s/enable", inst, grp);
	ukt_put(buf, "1", 0);
	kill(pid, SIGCONT);
	UKT_EQ(wait_status(pid), 0);
	ukt_put(buf, "0", 0);
	snprintf(buf, sizeof buf, "%s/trace", inst);
	char *trace = slurp_file(buf);
	/* nothing lost: entries in the buffer == entries written */
	const char *e = strstr(trace, "# entries-in-buffer/entries-written: ");
	UKT_ASSERT(e);
	long in_buf = 0, written = 0;
	UKT_ASSERT(sscanf(e, "# entries-in-buffer/entries-written: %ld/%ld", &in_buf, &written) == 2);
	UKT_EQ(in_buf, written);
	/* the calls from the program's entry point on: those before it are
	 * the dynamic linker's start-up, before any constructor */
	const char *start = strstr(trace, " start: (");
	UKT_ASSERT(start);
	long *v = sizes(start, " f: (", count);
	*before = 0;
	free(sizes(trace, " f: (", before));
	*before -= *count;
	free(trace);
	UKT_ASSERT(rmdir(inst) == 0);
	snprintf(buf, sizeof buf, "-:%s/f\n", grp);
	ukt_put(TRACEFS "/uprobe_events", buf, 1);
	snprintf(buf, sizeof buf, "-:%s/start\n", grp);
	ukt_put(TRACEFS "/uprobe_events", buf, 1);
	close(out);
	return v;
}

/* `ukprobe trace [opt] def -o FILE -- cmd...` with stdin from in_path:
 * FILE's text (the run in *r, checked to exit 0) */
static char *trace_to_file(const char *opt, const char *def, char *const *cmd,
			   const char *in_path, struct run *r)
{
	char *argv[32];
	int n = 0;
	argv[n++] = (char *)ukprobe_path();
	argv[n++] = (char *)"trace";
	if (opt)
		argv[n++] = (char *)opt;
	argv[n++] = (char *)def;
	argv[n++] = (char *)"-o";
	char outp[] = "/tmp/ukt-cli-kXXXXXX";
	int ofd = mkstemp(outp);
	UKT_ASSERT(ofd >= 0);
	close(ofd);
	argv[n++] = outp;
	argv[n++] = (char *)"--";
	for (int j = 0; cmd[j] && n < 31; j++)
		argv[n++] = cmd[j];
	argv[n] = NULL;
	int in = open(in_path, O_RDONLY);
	*r = run_argv_in(argv, in);
	close(in);
	RUN_EXPECT(*r, r->status == 0);
	char *text = slurp_file(outp);
	unlink(outp);
	return text;
}

/* fn's calls by cmd, the value of register reg at each: kernel, ukprobe */
static void compare(const char *fn, const char *reg, char *const *cmd, const char *in_path,
		    int min_calls)
{
	int nk = 0, nu = 0, startup = 0;
	char libc[4096];
	unsigned long off = libc_offset(fn, libc, sizeof libc);
	long *k = kernel_run(libc, off, reg, cmd, in_path, &nk, &startup);
	char def[128], needle[128];
	snprintf(def, sizeof def, "p:t/%s libc.so.6:%s size=%%%s:u64", fn, fn, reg);
	snprintf(needle, sizeof needle, " %s: (%s+0x0/", fn, fn);

	struct run r;
	char *trace = trace_to_file(NULL, def, cmd, in_path, &r);
	RUN_EXPECT(r, strstr(r.err, "ukprobe: 0 events lost\n") != NULL);
	long *u = sizes(trace, needle, &nu);
	printf("  %s %s: kernel %d calls from the entry point on (%d before), ukprobe %d\n",
	       cmd[0], fn, nk, startup, nu);
	UKT_ASSERT(nk >= min_calls);
	UKT_EQ(nu, nk);
	for (int j = 0; j < nu; j++)
		if (u[j] != k[j])
			UKT_FAIL("call %d: ukprobe size=%ld, kernel size=%ld", j, u[j], k[j]);
	free(trace);
	free(k);
	free(u);
	run_free(&r);
}

static void make_input(char *path)
{
	int fd = mkstemp(path);
	UKT_ASSERT(fd >= 0);
	FILE *f = fdopen(fd, "w");
	uint64_t s = 88172645463325252ull;
	for (int k = 0; k < 20000; k++) {
		int len = 1 + (int)(ukt_xorshift(&s) % 60);
		for (int j = 0; j < len; j++)
			fputc('a' + (int)(ukt_xorshift(&s) % 26), f);
		fputc('\n', f);
	}
	fclose(f);
}

UKT_CASE_T(gzip_and_sort_mallocs_match_the_kernel, 180)
{
	if (!tracefs_ready()) {
		printf("  tracefs is not available here (%s): kernel comparison not run\n", TRACEFS);
		return;
	}
	char in[] = "/tmp/ukt-cli-inXXXXXX";
	make_input(in);
	setenv("LC_ALL", "C", 1);
	/* gzip allocates almost nothing (its buffers are static): its
	 * malloc calls, then its writes, byte counts in %dx */
	char *gz[] = { (char *)"/usr/bin/gzip", (char *)"-c", in, NULL };
	compare("malloc", "di", gz, "/dev/null", 0);
	compare("write", "dx", gz, "/dev/null", 1);
	char *gzd[] = { (char *)"/usr/bin/gzip", (char *)"-c", NULL };
	compare("read", "dx", gzd, in, 1);
	char *so[] = { (char *)"/usr/bin/sort", (char *)"--parallel=1", in, NULL };
	compare("malloc", "di", so, "/dev/null", 5);
	compare("read", "dx", so, "/dev/null", 1);
	unlink(in);
}

/*
 * A histogram of fn's sizes by ukprobe's hist trigger (aggregated in the
 * target, no record written) against the same calls the kernel's uprobe
 * event recorded, bucketed here: bucket for bucket, counts and sums.
 */
static void compare_hist(const char *fn, const char *reg, char *const *cmd, const char *in_path,
			 int min_calls)
{
	int nk = 0, startup = 0;
	char libc[4096];
	unsigned long off = libc_offset(fn, libc, sizeof libc);
	long *k = kernel_run(libc, off, reg, cmd, in_path, &nk, &startup);
	unsigned long long cnt[65] = { 0 }, sum[65] = { 0 };
	for (int j = 0; j < nk; j++) {
		unsigned long v = (unsigned long)k[j];
		unsigned b = 0;
		while (b < 64 && (1UL << b) < v)	/* ilog2(roundup_pow_of_two(v)) */
			b++;
		cnt[b]++;
		sum[b] += v;
	}
	char def[128], trig[128];
	snprintf(def, sizeof def, "p:t/%s libc.so.6:%s size=%%%s:u64", fn, fn, reg);
	snprintf(trig, sizeof trig, "--trigger=%s:hist:keys=size.log2:vals=size:sort=size", fn);
	struct run r;
	char *out = trace_to_file(trig, def, cmd, in_path, &r);
	/* a histogram's event is enabled too: a line a call, as many as
	 * the kernel's */
	char needle[128];
	snprintf(needle, sizeof needle, " %s: (%s+0x0/", fn, fn);
	UKT_EQ(count_lines(out, needle), nk);
	const char *h = strstr(out, "# event histogram\n");
	if (!h)
		UKT_FAIL("no histogram in:\n%.2000s", out);
	unsigned entries = 0;
	unsigned long long hits = 0;
	for (const char *p = strstr(h, "\n{ "); p; p = strstr(p + 1, "\n{ ")) {
		unsigned b;
		unsigned long long c, s;
		if (sscanf(p, "\n{ size: ~ 2^%u } hitcount: %llu  size: %llu", &b, &c, &s) != 3)
			UKT_FAIL("bad line: %.100s", p + 1);
		UKT_ASSERT(b <= 64);
		if (c != cnt[b] || s != sum[b])
			UKT_FAIL("%s %s 2^%u: ukprobe %llu calls, sum %llu; kernel %llu, %llu",
				 cmd[0], fn, b, c, s, cnt[b], sum[b]);
		entries++;
		hits += c;
	}
	unsigned want = 0;
	for (unsigned b = 0; b <= 64; b++)
		want += cnt[b] != 0;
	printf("  %s %s: %d calls in %u buckets, kernel and ukprobe alike\n", cmd[0], fn, nk,
	       entries);
	UKT_ASSERT(nk >= min_calls);
	UKT_EQ(entries, want);
	UKT_EQ(hits, (unsigned long long)nk);
	char tot[160];
	snprintf(tot, sizeof tot, "\nTotals:\n    Hits: %d\n    Entries: %u\n    Dropped: 0\n", nk,
		 want);
	UKT_ASSERT(strstr(h, tot));
	free(out);
	free(k);
	run_free(&r);
}

UKT_CASE_T(malloc_histograms_match_the_kernel, 180)
{
	if (!tracefs_ready()) {
		printf("  tracefs is not available here (%s): kernel comparison not run\n", TRACEFS);
		return;
	}
	char in[] = "/tmp/ukt-cli-inXXXXXX";
	make_input(in);
	setenv("LC_ALL", "C", 1);
	char *so[] = { (char *)"/usr/bin/sort", (char *)"--parallel=1", in, NULL };
	compare_hist("malloc", "di", so, "/dev/null", 5);
	char *gz[] = { (char *)"/usr/bin/gzip", (char *)"-c", in, NULL };
	compare_hist("write", "dx", gz, "/dev/null", 1);
	/* more sizes: sort merging in a small buffer */
	char *sm[] = { (char *)"/usr/bin/sort", (char *)"--parallel=1", (char *)"-S", (char *)"64K",
		       in, NULL };
	compare_hist("malloc", "di", sm, "/dev/null", 20);
	unlink(in);
}

/*
 * A library the program loads only later: python3 imports bz2, whose
 * module dlopens libbz2.  The kernel's uprobe on the file and ukprobe's
 * definition by path (made before the library is there, armed when it
 * loads) see the same calls of BZ2_bzCompress with the same action (%si:
 * BZ_RUN per chunk, then BZ_FINISH until the stream ends).
 */
UKT_CASE_T(library_loaded_later_matches_the_kernel, 180)
{
	if (!tracefs_ready()) {
		printf("  tracefs is not available here (%s): kernel comparison not run\n", TRACEFS);
		return;
	}
	/* libbz2 as the dynamic linker finds it, by its real path */
	void *h = dlopen("libbz2.so.1.0", RTLD_NOW);
	UKT_ASSERT(h);
	struct link_map *lm = NULL;
	UKT_ASSERT(dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm);
	char lib[PATH_MAX];
	UKT_ASSERT(realpath(lm->l_name, lib));
	dlclose(h);
	long off = sym_file_offset(lib, "BZ2_bzCompress");
	UKT_ASSERT(off > 0);
	char in[] = "/tmp/ukt-cli-inXXXXXX";
	make_input(in);
	static const char prog[] =
		"import bz2, sys\n"
		"d = sys.stdin.buffer.read()\n"
		"c = bz2.BZ2Compressor(9)\n"
		"out = b''.join(c.compress(d[i:i + 50000]) for i in range(0, len(d), 50000))\n"
		"sys.stdout.buffer.write(out + c.flush())\n";
	char *py[] = { (char *)"/usr/bin/python3", (char *)"-c", (char *)prog, NULL };
	int nk = 0, startup = 0;
	long *k = kernel_run(lib, (unsigned long)off, "si", py, in, &nk, &startup);
	UKT_EQ(startup, 0);	/* not loaded before the program's entry */

	char def[PATH_MAX + 64];
	snprintf(def, sizeof def, "p:t/bzc %s:BZ2_bzCompress size=%%si:u64", lib);
	struct run r;
	char *trace = trace_to_file(NULL, def, py, in, &r);
	RUN_EXPECT(r, strstr(r.err, "ukprobe: 0 events lost\n") != NULL);
	int nu = 0;
	long *u = sizes(trace, " bzc: (BZ2_bzCompress+0x0/", &nu);
	printf("  python3 bz2 BZ2_bzCompress: kernel %d calls, ukprobe %d\n", nk, nu);
	UKT_ASSERT(nk >= 13);	/* 13 chunks, then the flush */
	UKT_EQ(nu, nk);
	for (int j = 0; j < nu; j++)
		if (u[j] != k[j])
			UKT_FAIL("call %d: ukprobe action=%ld, kernel action=%ld", j, u[j], k[j]);
	/* the symbol and the library's name, as for any loaded library */
	UKT_ASSERT(strstr(trace, " bzc: (BZ2_bzCompress+0x0/0x"));
	UKT_ASSERT(strstr(trace, " [libbz2.so.1.0"));
	free(trace);
	free(k);
	free(u);
	run_free(&r);
	unlink(in);
}
