/* SPDX-License-Identifier: MIT */
/*
 * The engine's own machinery must be invisible to the program: threads
 * blocked in system calls while probes are optimised and ftrace filters
 * change are never woken (no EINTR, no sleep cut short), and a thread
 * that execs while the optimizer looks at it starts its new image as if
 * nothing had looked.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <ukprobes/ftrace.h>
#include "ukt.h"
#include "fttargets/targets.h"

__attribute__((noinline)) int quiet_target(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 3 + 1;
}

static long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* ---- the blocked threads ---------------------------------------------------- */

enum {
	B_EPOLL, B_POLL, B_SELECT, B_PPOLL, B_FUTEX, B_READ, B_ACCEPT, B_SIGWAIT,
	/* these sleep for SLEEP_MS again and again until told to stop */
	B_NANOSLEEP, B_CLOCK_NANOSLEEP, B_EPOLL_T, B_POLL_T, B_SELECT_T,
	B_N
};
static const char *const bname[B_N] = {
	"epoll_wait", "poll", "select", "ppoll", "futex wait", "read", "accept",
	"sigtimedwait", "nanosleep", "clock_nanosleep", "epoll_wait (timed)",
	"poll (timed)", "select (timed)",
};
#define SLEEP_MS 150

static int evfd, ep, pipe_poll[2], pipe_sel[2], pipe_ppoll[2], pipe_read[2], lsock;
static int ep_t, pipe_t[2];
static _Atomic uint32_t futex_word;
static atomic_int tids[B_N], stop_sleepers;
static struct sockaddr_un addr;
/* per thread: the first wrong result (0: none) and how many calls */
static long bad[B_N], bad_errno[B_N], calls[B_N];

static void note(int k, long r, int e)
{
	if (!bad[k]) {
		bad[k] = r ? r : -1000;
		bad_errno[k] = e;
	}
}

static void *blocked(void *arg)
{
	int k = (int)(long)arg;
	char c;
	long r = 0;
	atomic_store(&tids[k], (int)syscall(SYS_gettid));
	switch (k) {
	case B_EPOLL: {
		struct epoll_event ev;
		r = epoll_wait(ep, &ev, 1, -1);
		break;
	}
	case B_POLL: {
		struct pollfd p = { pipe_poll[0], POLLIN, 0 };
		r = poll(&p, 1, -1);
		break;
	}
	case B_SELECT: {
		fd_set s;
		FD_ZERO(&s);
		FD_SET(pipe_sel[0], &s);
		r = select(pipe_sel[0] + 1, &s, NULL, NULL, NULL);
		break;
	}
	case B_PPOLL: {
		struct pollfd p = { pipe_ppoll[0], POLLIN, 0 };
		r = ppoll(&p, 1, NULL, NULL);
		break;
	}
	case B_FUTEX: {
		/* with a timeout: interrupted, it would not be restarted */
		struct timespec ts = { 120, 0 };
		while (!atomic_load(&futex_word)) {
			r = syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
			calls[k]++;
			if (r != 0 && !(r == -1 && errno == EAGAIN))
				note(k, r, errno);
		}
		return NULL;
	}
	case B_READ:
		r = read(pipe_read[0], &c, 1);
		break;
	case B_ACCEPT:
		r = accept(lsock, NULL, NULL);
		if (r >= 0) {
			close((int)r);
			r = 1;
		}
		break;
	case B_SIGWAIT: {
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, SIGUSR1);
		struct timespec ts = { 120, 0 };
		r = sigtimedwait(&set, NULL, &ts) == SIGUSR1 ? 1 : -1;
		break;
	}
	default:
		while (!atomic_load(&stop_sleepers)) {
			struct timespec ts = { 0, SLEEP_MS * 1000000L }, rem;
			long t0 = now_ns();
			int e = 0;
			switch (k) {
			case B_NANOSLEEP:
				r = nanosleep(&ts, &rem);
				break;
			case B_CLOCK_NANOSLEEP:
				r = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &rem);
				e = (int)r;	/* it returns the error */
				break;
			case B_EPOLL_T: {
				struct epoll_event ev;
				r = epoll_wait(ep_t, &ev, 1, SLEEP_MS);
				break;
			}
			case B_POLL_T: {
				struct pollfd p = { pipe_t[0], POLLIN, 0 };
				r = poll(&p, 1, SLEEP_MS);
				break;
			}
			case B_SELECT_T: {
				fd_set s;
				FD_ZERO(&s);
				FD_SET(pipe_t[0], &s);
				struct timeval tv = { 0, SLEEP_MS * 1000 };
				r = select(pipe_t[0] + 1, &s, NULL, NULL, &tv);
				break;
			}
			}
			long took = now_ns() - t0;
			calls[k]++;
			if (r != 0)
				note(k, r, e ? e : errno);
			else if (took < SLEEP_MS * 1000000L)
				note(k, -2000 - took / 1000000, 0);	/* cut short */
		}
		return NULL;
	}
	calls[k]++;
	if (r != 1)
		note(k, r, errno);
	return NULL;
}

/* the thread sleeps in a system call (not running), as /proc shows it */
static bool asleep(int tid)
{
	char path[64], buf[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 && strncmp(buf, "running", 7) != 0;
}

static void wake_all(void)
{
	uint64_t one = 1;
	UKT_EQ(write(evfd, &one, 8), 8);
	UKT_EQ(write(pipe_poll[1], "x", 1), 1);
	UKT_EQ(write(pipe_sel[1], "x", 1), 1);
	UKT_EQ(write(pipe_ppoll[1], "x", 1), 1);
	UKT_EQ(write(pipe_read[1], "x", 1), 1);
	atomic_store(&futex_word, 1);
	syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	UKT_ASSERT(s >= 0);
	UKT_EQ(connect(s, (struct sockaddr *)&addr, sizeof(addr)), 0);
	close(s);
	/* (gone already if it returned early: that is reported below) */
	syscall(SYS_tgkill, getpid(), atomic_load(&tids[B_SIGWAIT]), SIGUSR1);
	atomic_store(&stop_sleepers, 1);
}

static void setup_fds(void)
{
	evfd = eventfd(0, EFD_CLOEXEC);
	ep = epoll_create1(EPOLL_CLOEXEC);
	ep_t = epoll_create1(EPOLL_CLOEXEC);
	UKT_ASSERT(evfd >= 0 && ep >= 0 && ep_t >= 0);
	struct epoll_event ev = { .events = EPOLLIN };
	UKT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, evfd, &ev), 0);
	UKT_EQ(pipe2(pipe_poll, O_CLOEXEC), 0);
	UKT_EQ(pipe2(pipe_sel, O_CLOEXEC), 0);
	UKT_EQ(pipe2(pipe_ppoll, O_CLOEXEC), 0);
	UKT_EQ(pipe2(pipe_read, O_CLOEXEC), 0);
	UKT_EQ(pipe2(pipe_t, O_CLOEXEC), 0);
	ev.data.fd = pipe_t[0];
	UKT_EQ(epoll_ctl(ep_t, EPOLL_CTL_ADD, pipe_t[0], &ev), 0);
	lsock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	UKT_ASSERT(lsock >= 0);
	addr.sun_family = AF_UNIX;
	/* abstract: nothing to clean up */
	snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "ukt-quiet-%d", (int)getpid());
	UKT_EQ(bind(lsock, (struct sockaddr *)&addr, sizeof(addr)), 0);
	UKT_EQ(listen(lsock, 4), 0);
	/* sigtimedwait takes SIGUSR1, which every thread blocks */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	UKT_EQ(pthread_sigmask(SIG_BLOCK, &set, NULL), 0);
}

static void cb(unsigned long ip, unsigned long pip, struct ftrace_ops *op, struct pt_regs *fr)
{
	(void)ip; (void)pip; (void)op; (void)fr;
}

static int count_hits;
static int count(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; count_hits++; return 0; }

static void set_filter(struct ftrace_ops *ops, const char *s, int reset)
{
	UKT_EQ(ftrace_set_filter(ops, (unsigned char *)s, (int)strlen(s), reset), 0);
}

/*
 * Every blocking call the issue names, asleep before the first round,
 * then 20 rounds of register, optimise, unregister and ftrace filter
 * changes: none returns early, none with EINTR, each timed sleep lasts
 * its full time.
 */
UKT_CASE_T(blocked_calls_are_never_woken, 120)
{
	setup_fds();
	pthread_t th[B_N];
	for (int k = 0; k < B_N; k++)
		UKT_EQ(pthread_create(&th[k], NULL, blocked, (void *)(long)k), 0);
	for (int k = 0; k < B_N; k++) {
		int i = 0;
		while ((!atomic_load(&tids[k]) || !asleep(atomic_load(&tids[k]))) && i++ < 20000)
			nanosleep(&(struct timespec){ 0, 100000 }, NULL);
		UKT_ASSERT(asleep(atomic_load(&tids[k])));
	}
	struct ftrace_ops ops = { .func = cb };
	for (int round = 0; round < 20; round++) {
		struct kprobe kp = { .addr = (void *)quiet_target, .pre_handler = count };
		UKT_EQ(register_kprobe(&kp), 0);
		wait_for_kprobe_optimizer();
		UKT_EXPECT_OPTIMIZED(&kp);
		UKT_EQ(quiet_target(round), round * 3 + 1);
		unregister_kprobe(&kp);
		set_filter(&ops, round & 1 ? "fe_add" : "pf_add", 1);
		set_filter(&ops, "pf_mul", 0);
		UKT_EQ(register_ftrace_function(&ops), 0);
		UKT_EQ(pf_add(round, 1), round + 1);
		set_filter(&ops, "fe_mul", 1);
		UKT_EQ(unregister_ftrace_function(&ops), 0);
	}
	UKT_EQ(count_hits, 20);
	/* the timed sleepers each slept at least once more than the rounds */
	wake_all();
	for (int k = 0; k < B_N; k++)
		UKT_EQ(pthread_join(th[k], NULL), 0);
	int wrong = 0;
	for (int k = 0; k < B_N; k++) {
		if (bad[k]) {
			fprintf(stderr, "  %s: returned %ld (errno %ld: %s) after %ld calls\n",
				bname[k], bad[k], bad_errno[k], strerror((int)bad_errno[k]), calls[k]);
			wrong++;
		}
		if (!calls[k]) {
			fprintf(stderr, "  %s: never returned\n", bname[k]);
			wrong++;
		}
	}
	UKT_EQ(wrong, 0);
}

/* ---- exec while the optimizer looks --------------------------------------- */

static void spin_ns(long ns)
{
	long t0 = now_ns();
	while (now_ns() - t0 < ns)
		;
}

/*
 * A fresh process per try registers a probe and execs /bin/true after a
 * delay swept across the optimizer's batch (its 5 ms gathering delay, the
 * look at every thread, the question to one that keeps running): each
 * spinning until it execs, so the optimizer finds it running.  Every
 * image runs to its normal exit.
 */
UKT_CASE_T(exec_while_asked_runs_the_new_image, 300)
{
	int tries = 400, died = 0, other = 0;
	for (int i = 0; i < tries; i++) {
		long delay = (i % 80) * 150000L;	/* 0 to 12 ms */
		pid_t pid = fork();
		UKT_ASSERT(pid >= 0);
		if (pid == 0) {
			struct kprobe kp = { .addr = (void *)quiet_target, .pre_handler = count };
			if (register_kprobe(&kp))
				_exit(100);
			if (i & 1)	/* a second thread in the process, asleep */
				quiet_target(1);
			spin_ns(delay);
			execl("/bin/true", "true", (char *)NULL);
			_exit(101);
		}
		int st;
		UKT_EQ(waitpid(pid, &st, 0), pid);
		if (WIFSIGNALED(st)) {
			if (!died)
				fprintf(stderr, "  try %d (exec after %ld us): killed by signal %d\n",
					i, delay / 1000, WTERMSIG(st));
			died++;
		} else if (WEXITSTATUS(st)) {
			fprintf(stderr, "  try %d: exit status %d\n", i, WEXITSTATUS(st));
			other++;
		}
	}
	if (died)
		fprintf(stderr, "  %d of %d exec'd images died\n", died, tries);
	UKT_EQ(died, 0);
	UKT_EQ(other, 0);
}

/* ---- dlopen with every signal blocked ------------------------------------- */

/* arg: do not call into the library (a breakpoint probe in it would
 * kill this thread: docs/limitations.md) */
static void *dl_blocked(void *arg)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return (void *)1L;
	const char *(*ver)(void) = (const char *(*)(void))dlsym(h, "zlibVersion");
	long bad = !ver || (!arg && !ver()[0]);
	dlclose(h);
	return (void *)bad;
}

/*
 * The engine follows dlopen and dlclose through the dynamic linker's
 * r_brk, which every load and unload calls.  A breakpoint there would
 * kill a thread that blocks SIGTRAP (the kernel's default action for a
 * blocked trap), as worker threads that block every signal do, and
 * glibc's NSS and iconv load their modules wherever they are called.
 * The hook is a jump: such a thread loads and unloads, and a probe in
 * the library it unloads is gone before dlclose returns, as always.
 */
UKT_CASE_T(dlopen_with_every_signal_blocked, 60)
{
	struct kprobe kp = { .addr = (void *)quiet_target, .pre_handler = count };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	for (int i = 0; i < 3; i++) {
		pthread_t th;
		void *r;
		UKT_EQ(pthread_create(&th, NULL, dl_blocked, NULL), 0);
		UKT_EQ(pthread_join(th, &r), 0);
		UKT_EQ((long)r, 0);
	}
	/* and the hook still follows: a probe in a library loaded and then
	 * unloaded by a thread with every signal blocked is gone */
	void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
	UKT_ASSERT(h);
	struct kprobe kz = { .symbol_name = "libz.so.1:zlibVersion", .pre_handler = count };
	UKT_EQ(register_kprobe(&kz), 0);
	pthread_t th;
	void *r;
	UKT_EQ(pthread_create(&th, NULL, dl_blocked, (void *)1), 0);
	UKT_EQ(pthread_join(th, &r), 0);
	UKT_EQ((long)r, 0);
	UKT_EQ(ukt_probe_flags(&kz) & KPROBE_FLAG_GONE, 0);	/* still ours, opened twice */
	dlclose(h);
	UKT_ASSERT(ukt_probe_flags(&kz) & KPROBE_FLAG_GONE);
	unregister_kprobe(&kz);
	unregister_kprobe(&kp);
}
