/* SPDX-License-Identifier: MIT */
/*
 * The "one thread sigwait()s" design: every thread but one blocks every
 * signal, and that one waits for them in sigwait() (blocked in a system
 * call, as an injection prefers).  The program has its own SIGSEGV
 * handler.  On 'q' it checks that a fault still reaches its handler and
 * that the waiting thread's mask is still every signal; prints "ok MASK"
 * or "error ...".
 */
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static sigjmp_buf jb;
static volatile pid_t waiter_tid;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(jb, 1);
}

static void *waiter(void *a)
{
	waiter_tid = (pid_t)syscall(SYS_gettid);
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGUSR2);
	for (;;) {
		int sig;
		sigwait(&s, &sig);
	}
	return a;
}

/* SigBlk of thread tid, from /proc */
static unsigned long long sigblk(pid_t tid)
{
	char fn[64], line[256];
	snprintf(fn, sizeof fn, "/proc/self/task/%d/status", (int)tid);
	FILE *f = fopen(fn, "r");
	unsigned long long v = 0;
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "SigBlk:", 7))
			v = strtoull(line + 7, NULL, 16);
	if (f)
		fclose(f);
	return v;
}

int main(void)
{
	struct sigaction sa = { .sa_handler = on_segv, .sa_flags = SA_NODEFER };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);	/* inherited by the waiter */
	pthread_t t;
	if (pthread_create(&t, NULL, waiter, NULL))
		return 1;
	while (!waiter_tid)
		usleep(1000);
	unsigned long long blk0 = sigblk(waiter_tid);
	/* the main thread takes faults, the waiter none */
	sigset_t segv;
	sigemptyset(&segv);
	sigaddset(&segv, SIGSEGV);
	pthread_sigmask(SIG_UNBLOCK, &segv, NULL);
	printf("ready %d %d\n", (int)getpid(), (int)waiter_tid);
	fflush(stdout);
	char c;
	while (read(0, &c, 1) == 1 && c != 'q')
		;
	if (sigblk(waiter_tid) != blk0) {
		printf("error: the waiter's mask is %llx, was %llx\n", sigblk(waiter_tid), blk0);
		return 1;
	}
	if (sigsetjmp(jb, 1) == 0) {
		*(volatile int *)16 = 1;
		printf("error: no fault\n");
		return 1;
	}
	printf("ok %llx\n", blk0);
	return 0;
}
