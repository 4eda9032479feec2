/* SPDX-License-Identifier: MIT */
/*
 * Attach: load the agent into a running process by a remote call of
 * dlopen (exported by libc.so.6 since glibc 2.34), then talk to it over
 * its abstract socket "\0ukprobe-agent-<pid>".
 *
 * The call runs on one thread only, seized and interrupted with ptrace;
 * the others run on.  Its registers (vector state included) and errno
 * are saved, the agent's path written
 * below its red zone, and the call set up with a return address of 0:
 * dlopen's return faults (SIGSEGV at ip 0), which ptrace reports before
 * the program sees anything.  orig_ax = -1 during the call keeps the
 * kernel from restarting the interrupted system call into the call; the
 * saved registers put back afterwards carry the interrupted call's
 * orig_ax and -ERESTART* in ax, so when the thread resumes the kernel
 * restarts that call exactly as after a signal with SA_RESTART: the
 * program never sees EINTR.  A thread blocked in a system call is
 * preferred (it is at a safe point: not inside malloc holding the lock
 * dlopen's own malloc would wait for), first one in a call other than
 * the sleeps that restart through restart_syscall (nanosleep, futex with
 * a timeout), then those; a thread stopped anywhere in user space last.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dlfcn.h>
#include <elf.h>

#include "cli.h"
#include "elf.h"
#include "maps.h"
#include "../agent/proto.h"

#define ERESTART_RESTARTBLOCK 516

static int read_status_field(pid_t pid, const char *field, char *out, size_t n)
{
	char fn[64], line[256];
	snprintf(fn, sizeof fn, "/proc/%d/status", (int)pid);
	FILE *f = fopen(fn, "re");
	if (!f)
		return -errno;
	size_t fl = strlen(field);
	int r = -ENOENT;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, field, fl) && line[fl] == ':') {
			char *v = line + fl + 1;
			v += strspn(v, " \t");
			v[strcspn(v, "\n")] = 0;
			snprintf(out, n, "%s", v);
			r = 0;
			break;
		}
	fclose(f);
	return r;
}

static int agent_connect(pid_t pid)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "ukprobe-agent-%d", (int)pid);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a,
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static double now_mono(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* one of the agent's threads (its listener, the engine's optimizer), by name */
static bool agent_thread(pid_t pid, pid_t tid)
{
	char fn[96], comm[32] = "";
	snprintf(fn, sizeof fn, "/proc/%d/task/%d/comm", (int)pid, (int)tid);
	int f = open(fn, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		return false;
	ssize_t k = read(f, comm, sizeof comm - 1);
	close(f);
	if (k <= 0)
		return false;
	comm[k] = 0;
	comm[strcspn(comm, "\n")] = 0;
	return !strcmp(comm, "ukprobe-agent") || !strcmp(comm, "kprobe-optimize");
}

/* the thread to make the call on: see the comment at the top */
static pid_t pick_thread(pid_t pid)
{
	char dn[64];
	snprintf(dn, sizeof dn, "/proc/%d/task", (int)pid);
	DIR *d = opendir(dn);
	pid_t best = pid;
	int best_rank = 99;
	if (!d)
		return pid;
	struct dirent *e;
	while ((e = readdir(d))) {
		pid_t tid = atoi(e->d_name);
		if (tid <= 0)
			continue;
		char fn[96], buf[64] = "";
		if (agent_thread(pid, tid))
			continue;
		snprintf(fn, sizeof fn, "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
		FILE *f = fopen(fn, "re");
		if (f) {
			if (!fgets(buf, sizeof buf, f))
				buf[0] = 0;
			fclose(f);
		}
		int rank;
		long nr = strtol(buf, NULL, 10);
		if (!strncmp(buf, "running", 7) || !strncmp(buf, "-1", 2))
			rank = 2;	/* anywhere: maybe inside malloc, holding its lock */
		else if (nr == 35 || nr == 230 || nr == 202)	/* nanosleep, clock_nanosleep, futex */
			rank = 1;
		else
			rank = 0;	/* blocked in read, poll, wait...: a safe point */
		rank = rank * 2 + (tid != pid);
		if (rank < best_rank) {
			best_rank = rank;
			best = tid;
		}
	}
	closedir(d);
	return best;
}

static int wait_stop(pid_t tid, int *status, double timeout)
{
	double end = now_mono() + timeout;
	for (;;) {
		pid_t r = waitpid(tid, status, __WALL | WNOHANG);
		if (r == tid)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (now_mono() > end)
			return -ETIMEDOUT;
		usleep(1000);
	}
}

static int poke(pid_t tid, unsigned long addr, const void *src, size_t n)
{
	struct iovec l = { (void *)src, n }, r = { (void *)addr, n };
	if (process_vm_writev(tid, &l, 1, &r, 1, 0) == (ssize_t)n)
		return 0;
	/* a page the program cannot write through this path: ptrace */
	for (size_t k = 0; k < n; k += sizeof(long)) {
		long w = 0;
		size_t c = n - k < sizeof w ? n - k : sizeof w;
		if (c < sizeof w) {
			errno = 0;
			w = ptrace(PTRACE_PEEKDATA, tid, (void *)(addr + k), NULL);
			if (errno)
				return -errno;
		}
		memcpy(&w, (const char *)src + k, c);
		if (ptrace(PTRACE_POKEDATA, tid, (void *)(addr + k), (void *)w) < 0)
			return -errno;
	}
	return 0;
}

/*
 * fn(a1, a2) called on the stopped thread tid: its registers those of
 * base but for the call's, its stack at sp (a return address of 0 there:
 * the return faults, and ptrace reports that before the program sees it).
 * The result in *ret; a negative errno, -ESRCH when the thread died.
 */
static int remote_call(pid_t tid, const struct user_regs_struct *base, unsigned long sp,
		       unsigned long fn, unsigned long a1, unsigned long a2, unsigned long *ret)
{
	struct user_regs_struct regs = *base;
	regs.rip = fn;
	regs.rdi = a1;
	regs.rsi = a2;
	regs.rax = 0;
	regs.rsp = sp;
	regs.orig_rax = (unsigned long)-1;	/* no syscall restart into the call */
	regs.eflags &= ~0x500ul;		/* DF clear, as the ABI has it at a call; no TF */
	if (ptrace(PTRACE_SETREGS, tid, NULL, &regs) < 0)
		return -errno;
	int sig = 0, st, r;
	for (;;) {
		if (ptrace(PTRACE_CONT, tid, NULL, (void *)(long)sig) < 0)
			return -errno;
		if ((r = wait_stop(tid, &st, 30)) < 0)
			return r;
		if (WIFEXITED(st) || WIFSIGNALED(st))
			return -ESRCH;	/* it died meanwhile: nothing to restore */
		sig = WSTOPSIG(st);
		if (st >> 16) {		/* a group stop or interrupt: go on */
			sig = 0;
			continue;
		}
		if (sig == SIGSEGV) {
			if (ptrace(PTRACE_GETREGS, tid, NULL, &regs) < 0)
				return -errno;
			if (regs.rip == 0) {
				*ret = regs.rax;
				return 0;
			}
		}
		/* any other signal: the program's, delivered as it would be */
	}
}

/*
 * The state of the thread the calls run on, put back afterwards: every
 * register (the general ones, and the x87/SSE/AVX state: a thread stopped
 * anywhere in user space has live values there that dlopen's string
 * functions overwrite), its signal mask, and errno (a thread stopped
 * between a failing system call and its reading errno would read what
 * the agent left).
 */
struct thread_state {
	struct user_regs_struct regs;
	unsigned char xsave[16384] __attribute__((aligned(64)));
	struct iovec xv;
	struct user_fpregs_struct fp;
	int have_x, have_fp;
	uint64_t sigmask;		/* its blocked signals */
	int have_mask;
};

static int state_save(pid_t tid, struct thread_state *ts)
{
	if (ptrace(PTRACE_GETREGS, tid, NULL, &ts->regs) < 0)
		return -errno;
	ts->xv = (struct iovec){ ts->xsave, sizeof ts->xsave };
	ts->have_x = ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &ts->xv) == 0;
	ts->have_fp = !ts->have_x && ptrace(PTRACE_GETFPREGS, tid, NULL, &ts->fp) == 0;
	ts->have_mask = ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof ts->sigmask,
			       &ts->sigmask) == 0;
	return ts->have_x || ts->have_fp ? 0 : -EIO;
}

/*
 * The calls return to address 0: a SIGSEGV that ptrace reports and that
 * is discarded.  But the kernel forces a fault's signal: where it is
 * blocked (a thread that blocks every signal, as one that sigwait()s for
 * the others, the thread an injection prefers), it would first set the
 * process's action for SIGSEGV back to the default and unblock it, the
 * program's own handler lost.  So SIGSEGV is unblocked for the calls
 * (everything else stays as the thread had it), and blocked again after.
 */
static void state_call_mask(pid_t tid, const struct thread_state *ts)
{
	uint64_t segv = 1ull << (SIGSEGV - 1);
	if (ts->have_mask && (ts->sigmask & segv)) {
		uint64_t m = ts->sigmask & ~segv;
		ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof m, &m);
	}
}

static void state_restore(pid_t tid, struct thread_state *ts)
{
	/* ip, orig_ax and ax of an interrupted system call make the kernel
	 * restart it */
	ptrace(PTRACE_SETREGS, tid, NULL, &ts->regs);
	if (ts->have_x)
		ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &ts->xv);
	else if (ts->have_fp)
		ptrace(PTRACE_SETFPREGS, tid, NULL, &ts->fp);
	if (ts->have_mask)
		ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof ts->sigmask, &ts->sigmask);
}

/* dlopen(path, RTLD_NOW) in the target (fn), errno_fn its libc's
 * __errno_location; the handle, or 0 */
static int remote_dlopen(pid_t pid, unsigned long fn, unsigned long errno_fn, const char *path,
			 unsigned long *handle)
{
	/* UKPROBE_INJECT_TID: a chosen thread (the tests use every kind) */
	const char *force = getenv("UKPROBE_INJECT_TID");
	pid_t tid = force && atoi(force) > 0 ? atoi(force) : pick_thread(pid);
	int st, r;
	if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) < 0)
		return -errno;
	if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) < 0 ||
	    (r = wait_stop(tid, &st, 10)) < 0) {
		r = -errno;
		ptrace(PTRACE_DETACH, tid, NULL, NULL);
		return r ? r : -EIO;
	}
	static struct thread_state saved;
	if ((r = state_save(tid, &saved)) < 0) {
		ptrace(PTRACE_DETACH, tid, NULL, NULL);
		return r;
	}
	size_t plen = strlen(path) + 1;
	unsigned long sp = saved.regs.rsp - 256 - plen;	/* below the red zone */
	sp &= ~15ul;
	unsigned long str = sp;
	sp -= 16;
	unsigned long zero = 0;
	sp -= 8;			/* entry: sp + 8 is 16-aligned */
	r = poke(tid, str, path, plen);
	if (!r)
		r = poke(tid, sp, &zero, sizeof zero);
	if (r) {
		ptrace(PTRACE_DETACH, tid, NULL, NULL);
		return r;
	}
	unsigned long eloc = 0;
	int err = 0, have_err = 0;
	state_call_mask(tid, &saved);
	r = remote_call(tid, &saved.regs, sp, errno_fn, 0, 0, &eloc);
	if (!r && eloc) {
		struct iovec l = { &err, sizeof err }, rv = { (void *)eloc, sizeof err };
		have_err = process_vm_readv(tid, &l, 1, &rv, 1, 0) == (ssize_t)sizeof err;
	}
	if (!r)
		r = remote_call(tid, &saved.regs, sp, fn, str, RTLD_NOW, handle);
	if (r == -ESRCH)
		return r;
	if (have_err)
		poke(tid, eloc, &err, sizeof err);
	state_restore(tid, &saved);
	ptrace(PTRACE_DETACH, tid, NULL, NULL);
	return r;
}

static int attach_fail(pid_t pid, const char *why)
{
	ukp_err("cannot attach to %d: %s", (int)pid, why);
	return 1;
}

int attach_connect(pid_t pid, int *ctl_fd)
{
	char buf[256] = "", exe[PATH_MAX];
	if (kill(pid, 0) < 0 && errno == ESRCH)
		return attach_fail(pid, "no such process");
	if (pid == getpid())
		return attach_fail(pid, "that is ukprobe itself");
	if (read_status_field(pid, "State", buf, sizeof buf) == 0 && buf[0] == 'Z')
		return attach_fail(pid, "no such process (a zombie)");
	/* a stopped process could not run the agent's thread */
	if (buf[0] == 'T')
		return attach_fail(pid, "it is stopped (SIGSTOP): continue it first");
	snprintf(buf, sizeof buf, "/proc/%d/exe", (int)pid);
	ssize_t el = readlink(buf, exe, sizeof exe - 1);
	if (el < 0)
		return attach_fail(pid, errno == EACCES || errno == EPERM ?
				   "no permission to trace it" : "no such process");
	exe[el] = 0;
	struct map_set ms = { 0 };
	int r = maps_read(pid, &ms);
	if (r < 0) {
		maps_free(&ms);
		return attach_fail(pid, r == -EACCES || r == -EPERM ?
				   "no permission to trace it" : "no such process");
	}
	const struct map_obj *libc = maps_find(&ms, "libc.so.6");
	const struct map_obj *agent = maps_find(&ms, UKPA_SONAME);
	struct elf_file ef;
	int dyn = 0;
	char exepath[PATH_MAX + 32];
	snprintf(exepath, sizeof exepath, "/proc/%d/exe", (int)pid);
	if (elf_open(exepath, 1, &ef) == 0) {
		dyn = ef.has_interp;
		elf_close(&ef);
	}
	if (!libc) {
		maps_free(&ms);
		return attach_fail(pid, dyn ? "not a glibc program (no libc.so.6 loaded)"
					    : "a statically linked program (no dynamic linker to load the agent)");
	}
	/* a ptracer already there (a debugger, another tracer) */
	if (read_status_field(pid, "TracerPid", buf, sizeof buf) == 0 && atoi(buf) != 0) {
		maps_free(&ms);
		snprintf(exe, sizeof exe, "already traced by process %s", buf);
		return attach_fail(pid, exe);
	}
	if (!agent) {
		const char *path = ukp_agent_path();
		if (!path) {
			maps_free(&ms);
			ukp_err("cannot find the agent (%s) beside the command", UKPA_SONAME);
			return 1;
		}
		char lpath[PATH_MAX + 32];
		snprintf(lpath, sizeof lpath, "/proc/%d/root%s", (int)pid, libc->path);
		if (elf_open(lpath, 1, &ef) < 0 && elf_open(libc->path, 1, &ef) < 0) {
			maps_free(&ms);
			return attach_fail(pid, "cannot read its libc.so.6");
		}
		const struct elf_sym *s = elf_find(&ef, "dlopen");
		if (!s) {
			elf_close(&ef);
			maps_free(&ms);
			return attach_fail(pid, "its glibc is older than 2.34 (no dlopen in libc.so.6)");
		}
		const struct elf_sym *e = elf_find(&ef, "__errno_location");
		if (!e) {
			elf_close(&ef);
			maps_free(&ms);
			return attach_fail(pid, "its libc.so.6 has no __errno_location");
		}
		unsigned long fn = libc->base + s->value, efn = libc->base + e->value, handle = 0;
		elf_close(&ef);
		r = remote_dlopen(pid, fn, efn, path, &handle);
		if (r == -EPERM || r == -EACCES) {
			maps_free(&ms);
			/* Yama restricts ptrace to descendants (1) or admins (2+) */
			FILE *y = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
			int scope = 0;
			if (y) {
				if (fscanf(y, "%d", &scope) != 1)
					scope = 0;
				fclose(y);
			}
			if (scope > 0) {
				snprintf(exe, sizeof exe, "no permission to trace it "
					 "(ptrace; kernel.yama.ptrace_scope is %d)", scope);
				return attach_fail(pid, exe);
			}
			return attach_fail(pid, "no permission to trace it (ptrace)");
		}
		if (r == -ESRCH) {
			maps_free(&ms);
			return attach_fail(pid, "no such process");
		}
		if (r < 0) {
			maps_free(&ms);
			snprintf(exe, sizeof exe, "loading the agent failed: %s", strerror(-r));
			return attach_fail(pid, exe);
		}
		if (!handle) {
			maps_free(&ms);
			return attach_fail(pid, "dlopen of the agent failed in the target");
		}
	}
	maps_free(&ms);
	/* the agent's listener is up once its constructor has run: dlopen
	 * returned after it */
	int fd = -ECONNREFUSED;
	for (int tries = 0; tries < 200; tries++) {
		fd = agent_connect(pid);
		if (fd >= 0)
			break;
		usleep(10000);
	}
	if (fd < 0)
		return attach_fail(pid, agent ? "already traced by another ukprobe (its agent does not answer)"
					      : "the agent does not answer");
	*ctl_fd = fd;
	return 0;
}

/*
 * Holding the program still while its probes go in and come out.
 *
 * A breakpoint hit by a thread with SIGTRAP blocked, or at its default
 * action, is fatal: the kernel kills the process before the engine sees
 * the trap.  glibc runs such code in every program: a detached thread's
 * exit (free, munmap, madvise with every signal blocked), posix_spawn's
 * parent around its clone (munmap) and its child (which resets every
 * handler: close, dup2, strlen, memcpy...).  Probes go in as breakpoints
 * and become jumps when the optimizer has run; they come out through a
 * breakpoint too.  So while the agent arms and optimises (GO) and while
 * it removes everything (STOP), every thread of the program but the
 * agent's own is held in a ptrace stop.  A thread in a vfork wait stops
 * only once its child has exec'd or exited, so none of the program's
 * spawn children runs either.
 *
 * The holder is a child process of the command: the tracer of every
 * held thread.  It ends when the command lets go (or dies: its pipe
 * closes), and the kernel then detaches each thread as it stood, a
 * signal caught in its stop kept for delivery.  Nothing of this is
 * needed for the trace to work: where a thread cannot be seized (gone,
 * not ours) or does not stop within HOLD_STOP_S, the rest goes on as
 * without the hold.
 */
#define HOLD_STOP_S	1.0

struct held {
	pid_t *tid;
	bool *stopped;
	int *sig;	/* a signal its stop caught (to pass on), or -1: a group stop */
	size_t n, cap;
};

/* what a stop status holds back: its signal, 0, or -1 for a group stop */
static int stop_sig(int st)
{
	if (!WIFSTOPPED(st))
		return 0;
	if (!(st >> 16))
		return WSTOPSIG(st);	/* signal-delivery-stop */
	if (st >> 16 == PTRACE_EVENT_STOP && WSTOPSIG(st) != SIGTRAP)
		return -1;		/* group stop (SIGSTOP...) */
	return 0;
}

static bool held_add(struct held *h, pid_t tid)
{
	for (size_t i = 0; i < h->n; i++)
		if (h->tid[i] == tid)
			return false;
	if (h->n == h->cap) {
		size_t cap = h->cap ? 2 * h->cap : 64;
		pid_t *t = realloc(h->tid, cap * sizeof *t);
		if (t)
			h->tid = t;
		bool *s = realloc(h->stopped, cap * sizeof *s);
		if (s)
			h->stopped = s;
		int *g = realloc(h->sig, cap * sizeof *g);
		if (g)
			h->sig = g;
		if (!t || !s || !g)
			return false;
		h->cap = cap;
	}
	h->tid[h->n] = tid;
	h->sig[h->n] = 0;
	h->stopped[h->n++] = false;
	return true;
}

/* every thread seized so far stopped (or gone), or the deadline passed;
 * a thread one of them clones meanwhile is seized by the kernel (TRACECLONE)
 * and waited for too */
static void held_wait(struct held *h, double deadline)
{
	for (;;) {
		size_t left = 0;
		for (size_t i = 0; i < h->n; i++)
			left += !h->stopped[i];
		if (!left || now_mono() > deadline)
			return;
		int st;
		pid_t w = waitpid(-1, &st, __WALL | WNOHANG);
		if (w < 0 && errno == ECHILD)
			return;
		if (w <= 0) {
			usleep(200);
			continue;
		}
		/* stopped, or gone; a thread cloned meanwhile may report its
		 * first stop before its parent reports the clone */
		held_add(h, w);
		for (size_t i = 0; i < h->n; i++)
			if (h->tid[i] == w) {
				h->stopped[i] = true;
				h->sig[i] = stop_sig(st);
			}
		unsigned long msg;
		if (WIFSTOPPED(st) && st >> 16 == PTRACE_EVENT_CLONE &&
		    ptrace(PTRACE_GETEVENTMSG, w, NULL, &msg) == 0)
			held_add(h, (pid_t)msg);
	}
}

/*
 * A held thread may be inside a probe's hit (a handler recording an
 * event): removing probes waits for it to leave, and would wait for the
 * whole hold.  The engine's code (libukprobes, the agent) and its
 * detours and slots (the memfd "ukprobes-slots") are where a hit runs:
 * a thread whose pc is there, or with a return address into the engine's
 * code in the stack above its sp (a handler calling libc), is let run a
 * moment and stopped again.  (A return address into the slots alone is a
 * kretprobe's stub: a probed function still running, no hit.)
 */
struct engine_code {
	struct { unsigned long lo, hi; int code; } r[16];
	int n;
};

static void engine_code_read(pid_t pid, struct engine_code *ec)
{
	char fn[64], line[512];
	snprintf(fn, sizeof fn, "/proc/%d/maps", (int)pid);
	FILE *f = fopen(fn, "re");
	ec->n = 0;
	while (f && fgets(line, sizeof line, f) && ec->n < 16) {
		unsigned long lo, hi;
		char perm[8];
		int at = 0;
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perm, &at) < 3 ||
		    perm[2] != 'x' || !at)
			continue;
		const char *path = line + at;
		int code = strstr(path, "/libukprobes.so") || strstr(path, "/" UKPA_SONAME);
		if (!code && !strstr(path, "memfd:ukprobes-slots"))
			continue;
		ec->r[ec->n].lo = lo;
		ec->r[ec->n].hi = hi;
		ec->r[ec->n++].code = code;
	}
	if (f)
		fclose(f);
}

static bool in_engine(const struct engine_code *ec, unsigned long a, bool code_only)
{
	for (int i = 0; i < ec->n; i++)
		if (a >= ec->r[i].lo && a < ec->r[i].hi && (ec->r[i].code || !code_only))
			return true;
	return false;
}

static bool in_hit(pid_t tid, const struct engine_code *ec)
{
	struct user_regs_struct regs;
	if (!ec->n || ptrace(PTRACE_GETREGS, tid, NULL, &regs) < 0)
		return false;
	if (in_engine(ec, regs.rip, false))
		return true;
	static unsigned long words[2048];	/* 16 KiB of its stack */
	struct iovec l = { words, sizeof words }, r = { (void *)regs.rsp, sizeof words };
	ssize_t got = process_vm_readv(tid, &l, 1, &r, 1, 0);
	for (ssize_t i = 0; i < got / (ssize_t)sizeof *words; i++)
		if (in_engine(ec, words[i], true))
			return true;
	return false;
}

/* a held thread found inside a hit: let go a moment and stopped again,
 * until it is out (a few tries), or let go for good */
static void held_out_of_hits(struct held *h, pid_t pid)
{
	struct engine_code ec;
	engine_code_read(pid, &ec);
	for (size_t i = 0; i < h->n; i++) {
		int tries = 0;
		while (h->stopped[i] && h->sig[i] >= 0 && in_hit(h->tid[i], &ec)) {
			void *sig = (void *)(long)h->sig[i];
			if (++tries > 20) {
				ptrace(PTRACE_DETACH, h->tid[i], NULL, sig);
				break;
			}
			if (ptrace(PTRACE_CONT, h->tid[i], NULL, sig) < 0)
				break;
			usleep(200);
			ptrace(PTRACE_INTERRUPT, h->tid[i], NULL, NULL);
			int st;
			if (waitpid(h->tid[i], &st, __WALL) != h->tid[i] || !WIFSTOPPED(st))
				break;	/* gone */
			h->sig[i] = stop_sig(st);
		}
	}
}

static void __attribute__((noreturn)) holder(pid_t pid, int rd, int wr)
{
	struct held h = { 0 };
	double deadline = now_mono() + HOLD_STOP_S;
	char dn[64];
	snprintf(dn, sizeof dn, "/proc/%d/task", (int)pid);
	/* until a look at the task list finds no thread not held: one that
	 * was running when seized may have made another before it stopped */
	for (int round = 0; round < 16 && now_mono() < deadline; round++) {
		bool added = false;
		DIR *d = opendir(dn);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			pid_t tid = atoi(e->d_name);
			if (tid <= 0 || agent_thread(pid, tid))
				continue;
			bool known = false;
			for (size_t i = 0; i < h.n && !known; i++)
				known = h.tid[i] == tid;
			if (known || ptrace(PTRACE_SEIZE, tid, NULL, (void *)PTRACE_O_TRACECLONE) < 0)
				continue;
			ptrace(PTRACE_INTERRUPT, tid, NULL, NULL);
			added |= held_add(&h, tid);
		}
		if (d)
			closedir(d);
		held_wait(&h, deadline);
		if (!added)
			break;
	}
	held_out_of_hits(&h, pid);
	if (write(wr, "h", 1) < 0)
		_exit(1);
	char c;
	while (read(rd, &c, 1) < 0 && errno == EINTR)
		;
	_exit(0);	/* every thread let go as it stood */
}

int attach_hold(pid_t pid, struct hold *hd)
{
	int down[2], up[2];
	hd->pid = -1;
	hd->fd = -1;
	if (pipe2(down, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(up, O_CLOEXEC) < 0) {
		int e = errno;
		close(down[0]);
		close(down[1]);
		return -e;
	}
	pid_t c = fork();
	if (c == 0) {
		close(down[1]);
		close(up[0]);
		holder(pid, down[0], up[1]);
	}
	close(down[0]);
	close(up[1]);
	if (c < 0) {
		int e = errno;
		close(down[1]);
		close(up[0]);
		return -e;
	}
	hd->pid = c;
	hd->fd = down[1];
	/* held (or as held as it gets) */
	struct pollfd p = { up[0], POLLIN, 0 };
	int r;
	do
		r = poll(&p, 1, (int)(HOLD_STOP_S * 1000) + 2000);
	while (r < 0 && errno == EINTR);
	close(up[0]);
	return 0;
}

void attach_release(struct hold *hd)
{
	if (hd->pid <= 0)
		return;
	close(hd->fd);
	int st;
	while (waitpid(hd->pid, &st, 0) < 0 && errno == EINTR)
		;
	hd->pid = -1;
	hd->fd = -1;
}

/*
 * A message to the agent and its next message back, the program held
 * (attach_hold) until that comes or HOLD_MS passed: what the agent does
 * meanwhile may wait for a held thread (a lock it holds), so past that
 * the program runs on and the message is waited for as without a hold.
 */
#define HOLD_MS 2000

int held_exchange(pid_t pid, int fd, uint32_t type, const void *p, size_t n,
		  void **pl, uint32_t *len, int *pf, int timeout_ms)
{
	struct hold h;
	attach_hold(pid, &h);
	*pl = NULL;
	*pf = -1;
	if (chan_send(fd, type, p, n, NULL, 0) < 0) {
		attach_release(&h);
		return -2;
	}
	if (h.pid > 0) {
		int ty = chan_recv(fd, pl, len, pf, HOLD_MS);
		bool late = ty < 0 && errno == ETIMEDOUT;
		attach_release(&h);
		if (!late)
			return ty;
		ukp_err("no answer from the agent in %d s with the program held: "
			"it runs on while its probes go in or out", HOLD_MS / 1000);
	}
	return chan_recv(fd, pl, len, pf, timeout_ms);
}
