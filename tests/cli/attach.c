/* SPDX-License-Identifier: MIT */
/*
 * Attach: a multi-threaded program with threads blocked in read,
 * nanosleep and futex runs on correctly through attach, tracing and
 * detach, with the injection made on each kind of thread; its code is
 * the file's again after detach; a second attach reuses the agent;
 * SIGINT ends the trace; every attach error is one line, exit 1.
 */
#include <stdbool.h>
#include <dirent.h>
#include <elf.h>
#include <sys/stat.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <stddef.h>
#include "run.h"


static struct proc start(const char *name)
{
	return proc_start(name, NULL);
}

/* 'q', then its last line and exit status */
static int finish(struct proc *p, char *last, size_t n)
{
	UKT_ASSERT(write(p->in, "q", 1) == 1);
	return proc_last(p, last, n);
}

/* 'q', then status 0 and "ok ..." last */
static void finish_ok(struct proc *p)
{
	UKT_ASSERT(write(p->in, "q", 1) == 1);
	proc_expect_ok(p);
}

/* the thread of p blocked in system call nr (by /proc/PID/task/T/syscall) */
static pid_t thread_in(pid_t pid, long nr)
{
	for (int tries = 0; tries < 500; tries++) {
		char dn[64];
		snprintf(dn, sizeof dn, "/proc/%d/task", (int)pid);
		DIR *d = opendir(dn);
		UKT_ASSERT(d);
		struct dirent *e;
		while ((e = readdir(d))) {
			int tid = atoi(e->d_name);
			if (tid <= 0)
				continue;
			char fn[128], buf[128] = "";
			snprintf(fn, sizeof fn, "%s/%d/syscall", dn, tid);
			FILE *f = fopen(fn, "r");
			if (f) {
				if (!fgets(buf, sizeof buf, f))
					buf[0] = 0;
				fclose(f);
			}
			if (buf[0] >= '0' && buf[0] <= '9' && atol(buf) == nr && tid != pid) {
				closedir(d);
				return tid;
			}
		}
		closedir(d);
		usleep(10000);
	}
	UKT_FAIL("no thread of %d in system call %ld", (int)pid, nr);
}

#define TICK "p:t/tick tick n=%di:u64"

static void attach_on(long nr)
{
	struct proc p = start("blocked");
	char pid[16], tid[16];
	snprintf(pid, sizeof pid, "%d", (int)p.pid);
	if (nr >= 0)
		snprintf(tid, sizeof tid, "%d", (int)thread_in(p.pid, nr));
	else
		snprintf(tid, sizeof tid, "%d", (int)p.pid);
	setenv("UKPROBE_INJECT_TID", tid, 1);
	struct run r = ukprobe("trace", "-p", pid, "-d", "0.6", TICK, NULL);
	unsetenv("UKPROBE_INJECT_TID");
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, count_lines(r.out, " tick: (tick+0x0/") >= 2);
	RUN_EXPECT(r, strstr(r.err, "ukprobe: 0 events lost\n") != NULL);
	run_free(&r);
	finish_ok(&p);
}

/* the program has libc.so.6's file mapped as data too, below the loaded
 * one: the agent is loaded through the loaded libc's dlopen, not a
 * mapping of the file's bytes that is not code */
UKT_CASE(attach_with_libc_file_mapped_as_data)
{
	struct proc p = proc_start("blocked", "maplibc");
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)p.pid);
	struct run r = ukprobe("trace", "-p", pid, "-d", "0.6", TICK, NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, count_lines(r.out, " tick: (tick+0x0/") >= 2);
	run_free(&r);
	finish_ok(&p);
}

UKT_CASE(attach_via_thread_in_read) { attach_on(0); }
UKT_CASE(attach_via_thread_in_nanosleep) { attach_on(230); }	/* clock_nanosleep */
UKT_CASE(attach_via_thread_in_futex) { attach_on(202); }
UKT_CASE(attach_via_main_thread_in_poll) { attach_on(-1); }

/*
 * The text of the executable and of every library in memory equals the
 * files' after detach (the agent and libukprobes themselves aside).  One
 * place excepted: libukprobes, loaded for good, keeps its hook on the
 * dynamic linker's r_brk (_dl_debug_state, what debuggers watch) to know
 * of every dlclose: a jmp rel32 over the ret and the padding after it
 * (docs/concurrency.md); that is the library's, not a probe ukprobe added.
 */
static void compare_text_(pid_t pid, int want_libc)
{
	char fn[64];
	snprintf(fn, sizeof fn, "/proc/%d/maps", (int)pid);
	FILE *m = fopen(fn, "r");
	UKT_ASSERT(m);
	snprintf(fn, sizeof fn, "/proc/%d/mem", (int)pid);
	int mem = open(fn, O_RDONLY);
	UKT_ASSERT(mem >= 0);
	char line[PATH_MAX + 128];
	int compared = 0, libc = 0;
	while (fgets(line, sizeof line, m)) {
		unsigned long lo, hi, off;
		char perm[8], path[PATH_MAX];
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %4095s", &lo, &hi, perm, &off, path) != 5)
			continue;
		/* files only: not the engine's memfd-backed slots */
		if (path[0] != '/' || perm[2] != 'x' || strstr(path, "libukprobe") ||
		    !strncmp(path, "/memfd:", 7) || strstr(line, "(deleted)"))
			continue;
		int file = open(path, O_RDONLY);
		UKT_ASSERT(file >= 0);
		size_t n = hi - lo;
		char *a = malloc(n), *b = calloc(1, n);
		UKT_ASSERT(pread(mem, a, n, (off_t)lo) == (ssize_t)n);
		ssize_t fr = pread(file, b, n, (off_t)off);
		UKT_ASSERT(fr > 0);
		long rbrk = strstr(path, "/ld-linux") ? sym_file_offset(path, "_dl_debug_state") : -1;
		/* the hook: a jmp rel32 where the file has its ret */
		long hk = rbrk - (long)off;
		bool hook = rbrk >= (long)off && hk + 5 <= fr && (unsigned char)a[hk] == 0xe9 &&
			    (unsigned char)b[hk] == 0xc3;
		for (ssize_t i = 0; i < fr; i++)
			if (a[i] != b[i] && !(hook && i >= hk && i < hk + 5))
				UKT_FAIL("%s: text differs from the file after detach at offset 0x%lx",
					 path, off + (unsigned long)i);
		compared++;
		libc += strstr(path, "/libc.so.6") != NULL;
		free(a);
		free(b);
		close(file);
	}
	UKT_ASSERT(compared >= 1 && libc == want_libc);
	fclose(m);
	close(mem);
}
#define compare_text(pid) compare_text_(pid, 1)

UKT_CASE(code_restored_and_second_attach)
{
	struct proc p = start("blocked");
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)p.pid);
	for (int round = 0; round < 2; round++) {
		struct run r = ukprobe("trace", "-p", pid, "-d", "0.4", TICK,
				       "r:t/tickret tick v=$retval:u64", NULL);
		RUN_EXPECT(r, r.status == 0);
		RUN_EXPECT(r, count_lines(r.out, " tick: (tick+0x0/") >= 1);
		RUN_EXPECT(r, count_lines(r.out, " <- tick) v=") >= 1);
		run_free(&r);
		compare_text(p.pid);
	}
	/* one agent, loaded once */
	char fn[64], line[PATH_MAX + 128];
	snprintf(fn, sizeof fn, "/proc/%d/maps", (int)p.pid);
	FILE *m = fopen(fn, "r");
	int agents = 0;
	while (fgets(line, sizeof line, m))
		if (strstr(line, "libukprobe-agent.so") && strstr(line, " r--p 00000000 "))
			agents++;
	fclose(m);
	UKT_EQ(agents, 1);
	finish_ok(&p);
}

UKT_CASE(sigint_ends_the_trace)
{
	struct proc p = start("sleeper");
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)p.pid);
	int po[2], pe[2];
	UKT_ASSERT(pipe(po) == 0 && pipe(pe) == 0);
	pid_t u = fork();
	if (u == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		execl(ukprobe_path(), "ukprobe", "trace", "-p", pid, "p:t/work work n=%di:u64",
		      (char *)NULL);
		_exit(126);
	}
	close(po[1]);
	close(pe[1]);
	/* the first event line shows the probes are in */
	FILE *f = fdopen(po[0], "r");
	char line[512];
	int got = 0;
	while (fgets(line, sizeof line, f))
		if (strstr(line, " work: (work+0x0/")) {
			got = 1;
			break;
		}
	UKT_ASSERT(got);
	kill(u, SIGINT);
	while (fgets(line, sizeof line, f))
		;
	fclose(f);
	struct run r = { 0 };
	r.status = wait_status(u);
	UKT_EQ(r.status, 0);
	char err[512] = "";
	ssize_t n = read(pe[0], err, sizeof err - 1);
	UKT_ASSERT(n > 0);
	UKT_ASSERT(strstr(err, "ukprobe: 0 events lost\n"));
	close(pe[0]);
	/* detached, no probe left: the target goes on and ends well */
	char buf[64];
	snprintf(buf, sizeof buf, "/proc/%d/status", (int)p.pid);
	FILE *s = fopen(buf, "r");
	while (fgets(line, sizeof line, s))
		if (!strncmp(line, "TracerPid:", 10))
			UKT_EQ(atoi(line + 10), 0);
	fclose(s);
	compare_text(p.pid);
	char last[512];
	UKT_EQ(finish(&p, last, sizeof last), 0);
	UKT_ASSERT(!strncmp(last, "calls ", 6));
}

/* one line, exit 1, nothing written to stdout */
static void expect_refused(struct run *r, const char *why)
{
	RUN_EXPECT(*r, r->status == 1 && r->nout == 0);
	RUN_EXPECT(*r, strstr(r->err, why) != NULL);
	RUN_EXPECT(*r, strchr(r->err, '\n') == r->err + r->nerr - 1);
}

UKT_CASE(attach_errors)
{
	/* no such process: a pid just reaped */
	pid_t gone = fork();
	if (gone == 0)
		_exit(0);
	wait_status(gone);
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)gone);
	struct run r = ukprobe("trace", "-p", pid, TICK, NULL);
	expect_refused(&r, "no such process");
	run_free(&r);

	/* a static binary */
	struct proc s = start("static_sleep");
	snprintf(pid, sizeof pid, "%d", (int)s.pid);
	r = ukprobe("trace", "-p", pid, "p:t/work work", NULL);
	expect_refused(&r, "statically linked");
	run_free(&r);
	compare_text_(s.pid, 0);	/* static: no libc.so.6 */
	char last[512];
	UKT_EQ(finish(&s, last, sizeof last), 0);

	/* dynamically linked, but not against glibc */
	struct proc ng = start("noglibc");
	snprintf(pid, sizeof pid, "%d", (int)ng.pid);
	r = ukprobe("trace", "-p", pid, "p:t/x 0x1000", NULL);
	expect_refused(&r, "not a glibc program");
	run_free(&r);
	kill(ng.pid, SIGKILL);
	UKT_EQ(wait_status(ng.pid), 128 + SIGKILL);
	fclose(ng.out);
	close(ng.in);

	/* traced already: by a debugger (here, this test) */
	struct proc p = start("sleeper");
	snprintf(pid, sizeof pid, "%d", (int)p.pid);
	UKT_ASSERT(ptrace(PTRACE_SEIZE, p.pid, NULL, NULL) == 0);
	r = ukprobe("trace", "-p", pid, "p:t/work work", NULL);
	expect_refused(&r, "already traced");
	run_free(&r);
	int st;
	UKT_ASSERT(ptrace(PTRACE_INTERRUPT, p.pid, NULL, NULL) == 0);
	UKT_ASSERT(waitpid(p.pid, &st, 0) == p.pid && WIFSTOPPED(st));
	UKT_ASSERT(ptrace(PTRACE_DETACH, p.pid, NULL, NULL) == 0);

	/* stopped by a signal */
	kill(p.pid, SIGSTOP);
	for (int tries = 0; tries < 200; tries++) {
		char fn[64], line[256];
		snprintf(fn, sizeof fn, "/proc/%d/stat", (int)p.pid);
		FILE *f = fopen(fn, "r");
		UKT_ASSERT(f && fgets(line, sizeof line, f));
		fclose(f);
		if (strstr(line, ") T "))
			break;
		usleep(10000);
	}
	r = ukprobe("trace", "-p", pid, "p:t/work work", NULL);
	expect_refused(&r, "stopped");
	run_free(&r);
	kill(p.pid, SIGCONT);

	/* a definition the target refuses (unknown symbol): exit 2, the
	 * error log, nothing armed, the target runs on */
	const char *bad = "p:t/nope no_such_function_in_it";
	r = ukprobe("trace", "-p", pid, "p:t/work work", bad, NULL);
	RUN_EXPECT(r, r.status == 2 && r.nout == 0);
	RUN_EXPECT(r, strstr(r.err, "ukprobe: error: Unknown symbol\n  Command: p:t/nope") != NULL);
	run_free(&r);
	compare_text(p.pid);

	/* no permission: ukprobe run as another user */
	int po[2], pe[2];
	UKT_ASSERT(pipe(po) == 0 && pipe(pe) == 0);
	pid_t u = fork();
	if (u == 0) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		if (getuid() == 0 && (setgid(65534) || setuid(65534)))
			_exit(125);
		execl(ukprobe_path(), "ukprobe", "trace", "-p", pid, "p:t/work work", (char *)NULL);
		_exit(126);
	}
	close(po[1]);
	close(pe[1]);
	memset(&r, 0, sizeof r);
	slurp2(po[0], pe[0], &r);
	r.status = wait_status(u);
	if (getuid() == 0)
		expect_refused(&r, "no permission");
	else
		printf("  (no-permission case needs root to switch users: not run)\n");
	run_free(&r);

	/* another ukprobe attached: the second is refused */
	int qo[2];
	UKT_ASSERT(pipe(qo) == 0);
	pid_t first = fork();
	if (first == 0) {
		dup2(qo[1], 1);
		int dn = open("/dev/null", O_WRONLY);
		dup2(dn, 2);
		execl(ukprobe_path(), "ukprobe", "trace", "-p", pid, "-d", "30",
		      "p:t/work work", (char *)NULL);
		_exit(126);
	}
	close(qo[1]);
	FILE *f = fdopen(qo[0], "r");
	char line[512];
	int got = 0;
	while (fgets(line, sizeof line, f))
		if (strstr(line, " work: (")) {
			got = 1;
			break;
		}
	UKT_ASSERT(got);
	r = ukprobe("trace", "-p", pid, "p:t/work work", NULL);
	expect_refused(&r, "already traced by another ukprobe");
	run_free(&r);
	kill(first, SIGTERM);
	UKT_EQ(wait_status(first), 0);
	fclose(f);
	compare_text(p.pid);
	UKT_EQ(finish(&p, last, sizeof last), 0);
	UKT_ASSERT(!strncmp(last, "calls ", 6));
}

/* the target's exit ends the trace: status 0, events written */
UKT_CASE(target_exit_ends_trace)
{
	struct proc p = start("sleeper");
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)p.pid);
	int po[2];
	UKT_ASSERT(pipe(po) == 0);
	pid_t u = fork();
	if (u == 0) {
		dup2(po[1], 1);
		int dn = open("/dev/null", O_WRONLY);
		dup2(dn, 2);
		execl(ukprobe_path(), "ukprobe", "trace", "-p", pid, "p:t/work work n=%di:u64",
		      (char *)NULL);
		_exit(126);
	}
	close(po[1]);
	FILE *f = fdopen(po[0], "r");
	char line[512];
	unsigned long lastn = 0, calls = 0;
	int lines = 0;
	while (fgets(line, sizeof line, f)) {
		char *q = strstr(line, " n=");
		if (!q)
			continue;
		lastn = strtoul(q + 3, NULL, 10);
		if (++lines == 3) {
			/* end the target now: every call it made is written */
			char last[512];
			UKT_EQ(finish(&p, last, sizeof last), 0);
			UKT_ASSERT(!strncmp(last, "calls ", 6));
			calls = strtoul(last + 6, NULL, 10);
		}
	}
	UKT_ASSERT(lines >= 3);
	UKT_EQ(lastn, calls);
	UKT_EQ(wait_status(u), 0);
	fclose(f);
}

/*
 * Probes on the very calls the program's threads are blocked in, and on
 * those the agent's own thread makes (poll, recvmsg, read): the program
 * runs on and ends well, and none of the agent's calls is written.
 */
UKT_CASE(probes_on_blocking_calls)
{
	struct proc p = start("blocked");
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)p.pid);
	struct run r = ukprobe("trace", "-p", pid, "-d", "0.6",
			       "p:t/read libc.so.6:read fd=%di:s32 n=%dx:u64",
			       "p:t/poll libc.so.6:poll", "p:t/recvmsg libc.so.6:recvmsg",
			       "r:t/write_ret libc.so.6:write ret=$retval:s64", NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, count_lines(r.out, " read: (read+0x0/") >= 2);
	RUN_EXPECT(r, count_lines(r.out, " n=8") >= 2);		/* the reader's words */
	RUN_EXPECT(r, count_lines(r.out, " poll: (poll+0x0/") >= 2);	/* the main thread */
	RUN_EXPECT(r, count_lines(r.out, " write_ret: (") >= 2);
	RUN_EXPECT(r, count_lines(r.out, " recvmsg: (") == 0);		/* the agent's only */
	run_free(&r);
	finish_ok(&p);
}

/*
 * A program that forks and execs while attached to: its children run
 * (the agent removes the probes in a child: attached, only the process
 * itself is traced), exec, and end as without tracing; after detach no
 * child hits anything.
 */
UKT_CASE(fork_and_exec_while_attached)
{
	struct proc p = start("spawner");
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)p.pid);
	struct run r = ukprobe("trace", "-p", pid, "-d", "0.6", "p:t/mark mark n=%di:s32", NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, count_lines(r.out, " mark: (mark+0x0/") >= 3);
	RUN_EXPECT(r, count_lines(r.out, " n=1") >= 3);
	RUN_EXPECT(r, count_lines(r.out, " n=2") == 0);		/* children untraced */
	run_free(&r);
	usleep(200000);		/* rounds after detach */
	compare_text(p.pid);
	finish_ok(&p);
}

/* attach to threads that never stop allocating, with malloc and free
 * probed: the injection deadlocks nothing, the hold is not given up, the
 * program checks its blocks */
UKT_CASE(attach_to_allocating_threads)
{
	struct proc p = start("churn");
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)p.pid);
	for (int round = 0; round < 2; round++) {
		/* half a second of the threads' work: enough for 100 calls
		 * on a machine loaded many times over */
		struct run r = ukprobe("trace", "-p", pid, "-d", "0.5", "-o", "/dev/null", "--profile",
				       "p:t/malloc libc.so.6:malloc size=%di:u64",
				       "r:t/free libc.so.6:free", NULL);
		RUN_EXPECT(r, r.status == 0);
		/* held while the probes went in and out, though its threads
		 * are in handlers much of the time (held_out_of_hits) */
		RUN_EXPECT(r, strstr(r.err, "with the program held") == NULL);
		char *h = strstr(r.err, "t/malloc ");
		RUN_EXPECT(r, h != NULL);
		unsigned long hits = strtoul(h + 9, NULL, 10);
		RUN_EXPECT(r, hits > 100);
		run_free(&r);
	}
	compare_text(p.pid);
	finish_ok(&p);
}

/* the agent's socket is abstract (no file permissions): it serves root
 * and the target's own user only; anyone else is hung up on unheard */
UKT_CASE(agent_serves_only_its_users)
{
	if (getuid() != 0) {
		printf("  (needs root to switch users: not run)\n");
		return;
	}
	struct proc p = start("sleeper");
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)p.pid);
	struct run r = ukprobe("trace", "-p", pid, "-d", "0.2", "p:t/work work", NULL);
	RUN_EXPECT(r, r.status == 0);		/* the agent is loaded now */
	run_free(&r);
	for (int other = 0; other < 2; other++) {
		pid_t c = fork();
		if (c == 0) {
			if (other && (setgid(65534) || setuid(65534)))
				_exit(10);
			struct sockaddr_un a = { .sun_family = AF_UNIX };
			int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1,
					 "ukprobe-agent-%d", (int)p.pid);
			int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
			if (fd < 0 || connect(fd, (struct sockaddr *)&a,
					      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)))
				_exit(11);
			struct pollfd q = { fd, POLLIN, 0 };
			if (poll(&q, 1, 5000) != 1)
				_exit(12);
			char buf[64];
			ssize_t got = recv(fd, buf, sizeof buf, 0);
			_exit(got > 0 ? 20 : got == 0 ? 21 : 13);	/* 20: HELLO, 21: hung up */
		}
		UKT_EQ(wait_status(c), other ? 21 : 20);
	}
	char last[512];
	UKT_EQ(finish(&p, last, sizeof last), 0);
}

/*
 * A thread computing in user space is the one injected into (a
 * single-threaded program has no other): its vector registers and errno
 * are as they were when it goes on, so what it computes is unchanged.
 * Two programs, each attached to once (the injection is the first
 * attach's).
 */
UKT_CASE(attach_keeps_registers_and_errno)
{
	for (int round = 0; round < 2; round++) {
		struct proc p = start("spin");
		char pid[16];
		snprintf(pid, sizeof pid, "%d", (int)p.pid);
		usleep(20000);
		struct run r = ukprobe("trace", "-p", pid, "-d", "0.2", "-o", "/dev/null",
				       "p:t/free libc.so.6:free", NULL);
		RUN_EXPECT(r, r.status == 0);
		run_free(&r);
		UKT_ASSERT(kill(p.pid, SIGUSR1) == 0);
		proc_expect_ok(&p);
	}
}

/*
 * glibc runs code with every signal blocked (a detached thread's exit:
 * free, munmap, madvise; posix_spawn's parent around its clone: munmap)
 * or with every handler reset (posix_spawn's child: close, open, dup2,
 * the PATH search's string functions), where a breakpoint kills the
 * thread's process.  Attached to over and over with probes on them, the
 * program goes on, every child exits 0, and the probes were hit.
 */
UKT_CASE(attach_to_signal_blocking_glibc_code)
{
	struct proc p = start("sigblk");
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)p.pid);
	unsigned long hits = 0;
	for (int round = 0; round < 5; round++) {
		struct run r = ukprobe("trace", "-p", pid, "-d", "0.2", "-o", "/dev/null", "--profile",
				       "p:t/munmap libc.so.6:munmap", "p:t/madvise libc.so.6:madvise",
				       "p:t/close libc.so.6:__close_nocancel", "p:t/strlen libc.so.6:strlen",
				       "p:t/free libc.so.6:free", "r:t/memcpy libc.so.6:memcpy", NULL);
		RUN_EXPECT(r, r.status == 0);
		char *h = strstr(r.err, "t/munmap ");
		RUN_EXPECT(r, h != NULL);
		hits += strtoul(h + 9, NULL, 10);
		run_free(&r);
		UKT_ASSERT(kill(p.pid, 0) == 0);
	}
	UKT_ASSERT(hits > 0);
	finish_ok(&p);
}

/*
 * The injection in a thread that blocks every signal (one that sigwait()s
 * for the program): the return of each remote call faults, and the
 * kernel, forcing a blocked SIGSEGV, would unblock it in that thread and
 * set the process's action back to the default.  The thread's mask is
 * as it was after, and a fault still reaches the program's handler.
 */
UKT_CASE(attach_into_a_thread_blocking_every_signal)
{
	struct proc p = start("sigwaiter");
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)p.pid);
	char tid[16];
	snprintf(tid, sizeof tid, "%d", (int)thread_in(p.pid, 128));	/* rt_sigtimedwait */
	setenv("UKPROBE_INJECT_TID", tid, 1);
	struct run r = ukprobe("trace", "-p", pid, "-d", "0.2", "-o", "/dev/null",
			       "p:t/free libc.so.6:free", NULL);
	unsetenv("UKPROBE_INJECT_TID");
	RUN_EXPECT(r, r.status == 0);
	run_free(&r);
	finish_ok(&p);
}
