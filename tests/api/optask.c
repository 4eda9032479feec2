/* SPDX-License-Identifier: MIT */
/*
 * The optimizer's question (optimize.c: ukp_opt_thread_query) in the
 * corners reviews found: a frame on a second stack read without
 * process_vm_readv; wait_for_kprobe_optimizer() called while a retry
 * batch runs; a program handler that longjmps out of the answer; a
 * frame in the post trampoline, which returns to a site it does not
 * show; the answer on a sigaltstack of the least size the system allows.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include "ukt.h"

long oq_load(const long *p);	/* *p + 5, its load at offset 1 of the region */
__asm__(".text\n.p2align 4\n.globl oq_load\n.type oq_load,@function\n"
	"oq_load: push %rbp\n mov (%rdi),%rax\n add $5,%rax\n pop %rbp\n ret\n"
	".size oq_load,.-oq_load\n");
long oq_other(long x);		/* x + 1 */
__asm__(".text\n.p2align 4\n.globl oq_other\n.type oq_other,@function\n"
	"oq_other: push %rbp\n mov %rdi,%rax\n add $1,%rax\n pop %rbp\n ret\n"
	".size oq_other,.-oq_other\n");

static long hits;
static int count(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; hits++; return 0; }

/* ---- a frame on the sigaltstack and its SIGSEGV frame on the thread stack,
 * process_vm_readv forbidden: both read in place (SA_NODEFER keeps SIGSEGV
 * open) ---- */
static long *page;
static atomic_int in_handler, go, usr1_in;
static volatile unsigned long fault_ip;
static char *alt;

static void usr1(int sig)
{
	(void)sig;
	atomic_store(&usr1_in, 1);
	while (!atomic_load(&go))
		sched_yield();
}
static void segv(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	ucontext_t *uc = ctx;
	if ((char *)si->si_addr != (char *)page) {
		fprintf(stderr, "  fault elsewhere: addr %p ip %#llx (the jump's bytes ran)\n",
			si->si_addr, (unsigned long long)uc->uc_mcontext.gregs[REG_RIP]);
		_exit(40);
	}
	fault_ip = (unsigned long)uc->uc_mcontext.gregs[REG_RIP];
	atomic_store(&in_handler, 1);
	raise(SIGUSR1);
	mprotect(page, 4096, PROT_READ | PROT_WRITE);
}
static void *loader(void *arg)
{
	(void)arg;
	stack_t ss = { .ss_sp = alt, .ss_size = 65536 };
	if (sigaltstack(&ss, NULL))
		return (void *)-1L;
	return (void *)oq_load(page);
}

UKT_CASE_T(frame_on_a_second_stack_without_process_vm_readv, 30)
{
	ukt_deny_syscall(SYS_process_vm_readv, EPERM);
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	*page = 37;
	alt = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_EQ(ukt_on_signal_info(SIGSEGV, segv, SA_NODEFER), 0);
	UKT_EQ(ukt_on_signal(SIGUSR1, usr1, SA_ONSTACK), 0);
	UKT_EQ(mprotect(page, 4096, PROT_NONE), 0);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, loader, NULL), 0);
	while (!atomic_load(&in_handler) || !atomic_load(&usr1_in))
		sched_yield();
	UKT_EQ(fault_ip, (unsigned long)oq_load + 1);
	struct kprobe kp = { .addr = (void *)oq_load, .pre_handler = count };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);	/* the frame was moved, read in place */
	atomic_store(&go, 1);
	void *v;
	UKT_EQ(pthread_join(th, &v), 0);
	UKT_EQ((long)v, 42);
	unregister_kprobe(&kp);
}

/* ---- a held site is tried again once its thread is gone: a wait during
 * that batch waits for it ---- */
static atomic_int ldr_tid, questions, stop_consumer;
static void *blocked_loader(void *arg)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGBUS);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	atomic_store(&ldr_tid, (int)syscall(SYS_gettid));
	return (void *)oq_load(arg);
}
/* a thread that takes the question with SIGBUS blocked (sigtimedwait) and
 * never answers: the optimizer judges it from outside after ~20+ ms; it
 * tells us a batch is being asked about right now */
static void *consumer(void *arg)
{
	(void)arg;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGBUS);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	while (!atomic_load(&stop_consumer)) {
		siginfo_t si;
		struct timespec ts = { 0, 1000000 };
		if (sigtimedwait(&set, &si, &ts) == SIGBUS && si.si_code == SI_QUEUE)
			atomic_fetch_add(&questions, 1);
	}
	return NULL;
}
static unsigned long stopped_pc(int tid)
{
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *last = strrchr(buf, ' ');
	return !strncmp(buf, "running", 7) || !last ? 0 : strtoul(last + 1, NULL, 0);
}
static long uffd_page(long **p)
{
	*p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	long uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
	UKT_ASSERT(uffd >= 0);
	struct uffdio_api api = { .api = UFFD_API };
	UKT_EQ(ioctl((int)uffd, UFFDIO_API, &api), 0);
	struct uffdio_register reg = { { (unsigned long)*p, 4096 }, UFFDIO_REGISTER_MODE_MISSING, 0 };
	UKT_EQ(ioctl((int)uffd, UFFDIO_REGISTER, &reg), 0);
	return uffd;
}
static void start_held(long **up, long *uffd, pthread_t *th)
{
	*uffd = uffd_page(up);
	UKT_EQ(pthread_create(th, NULL, blocked_loader, *up), 0);
	while (!atomic_load(&ldr_tid))
		sched_yield();
	for (int i = 0; i < 5000 && stopped_pc(atomic_load(&ldr_tid)) != (unsigned long)oq_load + 1; i++)
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	UKT_EQ(stopped_pc(atomic_load(&ldr_tid)), (unsigned long)oq_load + 1);
}
static void release_held(long *up, long uffd, pthread_t th)
{
	static long fill[512] = { 37 };
	struct uffdio_copy c = { (unsigned long)up, (unsigned long)fill, 4096, 0, 0 };
	UKT_EQ(ioctl((int)uffd, UFFDIO_COPY, &c), 0);
	void *v;
	UKT_EQ(pthread_join(th, &v), 0);
	UKT_EQ((long)v, 42);
}

UKT_CASE_T(wait_during_a_retry_batch_waits_for_it, 60)
{
	long *up, uffd;
	pthread_t th, ct;
	start_held(&up, &uffd, &th);
	UKT_EQ(pthread_create(&ct, NULL, consumer, NULL), 0);
	struct kprobe kp = { .addr = (void *)oq_load, .pre_handler = count };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EQ(ukt_probe_flags(&kp) & KPROBE_FLAG_OPTIMIZED, 0);	/* held */
	release_held(up, uffd, th);
	/* the next batch asked about must be the retry */
	int q0 = atomic_load(&questions);
	while (atomic_load(&questions) == q0)
		sched_yield();
	wait_for_kprobe_optimizer();	/* during the retry's batch: its end */
	int opt = !!(ukt_probe_flags(&kp) & KPROBE_FLAG_OPTIMIZED);
	atomic_store(&stop_consumer, 1);
	pthread_join(ct, NULL);
	UKT_EQ(opt, 1);
	unregister_kprobe(&kp);
}

/* ---- a program handler that siglongjmps out of the answer (SIGUSR2 every
 * 200 us to a spinning thread): the answer blocks them, so the optimizer
 * never waits for a reader that left ---- */
static sigjmp_buf jenv;
static atomic_int jtid, jstop;
static atomic_long jumps;
static void usr2_jump(int s) { (void)s; atomic_fetch_add(&jumps, 1); siglongjmp(jenv, 1); }
static void *jumper(void *a)
{
	(void)a;
	int tid = (int)syscall(SYS_gettid);
	if (sigsetjmp(jenv, 1) == 0)
		atomic_store(&jtid, tid);
	while (!atomic_load(&jstop))
		;
	return NULL;
}
static void *sender(void *a)
{
	(void)a;
	while (!atomic_load(&jstop)) {
		syscall(SYS_tgkill, getpid(), atomic_load(&jtid), SIGUSR2);
		nanosleep(&(struct timespec){ 0, 200000 }, NULL);
	}
	return NULL;
}
static atomic_int wdone;
static void *waiter(void *a) { (void)a; wait_for_kprobe_optimizer(); atomic_store(&wdone, 1); return NULL; }
UKT_CASE_T(program_handler_longjmps_out_of_the_answer, 60)
{
	UKT_EQ(ukt_on_signal(SIGUSR2, usr2_jump, SA_NODEFER), 0);
	{
		struct kprobe k0 = { .addr = (void *)oq_other, .pre_handler = count };
		UKT_EQ(register_kprobe(&k0), 0);
		wait_for_kprobe_optimizer();
		unregister_kprobe(&k0);
	}
	pthread_t jt, st;
	UKT_EQ(pthread_create(&jt, NULL, jumper, NULL), 0);
	while (!atomic_load(&jtid))
		sched_yield();
	UKT_EQ(pthread_create(&st, NULL, sender, NULL), 0);
	for (int it = 0; it < 40; it++) {
		struct kprobe kq = { .addr = (void *)oq_other, .pre_handler = count };
		UKT_EQ(register_kprobe(&kq), 0);
		atomic_store(&wdone, 0);
		pthread_t wt;
		UKT_EQ(pthread_create(&wt, NULL, waiter, NULL), 0);
		UKT_EQ(pthread_join(wt, NULL), 0);	/* hung: the case's timeout */
		unregister_kprobe(&kq);
	}
	UKT_ASSERT(atomic_load(&jumps) > 0);
	atomic_store(&jstop, 1);
	pthread_join(st, NULL);
	pthread_join(jt, NULL);
}

/* ---- a frame in the post trampoline (the post_handler sets TF: the trap
 * lands in its epilogue), which returns to a site it does not show: no site
 * of the batch is patched while it lives ---- */
static atomic_int arm_tf, in_trap, tgo;
static volatile unsigned long trap_ip;
static bool trap_blocks;
static void post(struct kprobe *p, struct pt_regs *r, unsigned long f)
{
	(void)p; (void)f;
	if (atomic_exchange(&arm_tf, 0))
		r->flags |= 0x100;	/* TF: trap right after the epilogue's popfq */
}
static void trap(int sig, siginfo_t *si, void *ctx)
{
	(void)sig; (void)si;
	ucontext_t *uc = ctx;
	trap_ip = (unsigned long)uc->uc_mcontext.gregs[REG_RIP];
	uc->uc_mcontext.gregs[REG_EFL] &= ~0x100LL;
	atomic_store(&in_trap, 1);
	while (!atomic_load(&tgo)) {
		if (trap_blocks)
			nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
		else
			sched_yield();
	}
}
static void *tf_loader(void *a)
{
	atomic_store(&arm_tf, 1);
	return (void *)oq_load(a);
}
static void post_tramp(bool blocks)
{
	trap_blocks = blocks;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = trap;
	sa.sa_flags = SA_SIGINFO;
	if (blocks)
		sigaddset(&sa.sa_mask, SIGBUS);
	UKT_EQ(sigaction(SIGTRAP, &sa, NULL), 0);
	static long val = 37;
	struct kprobe kp = { .addr = (void *)oq_load, .pre_handler = count, .post_handler = post };
	struct kprobe kq = { .addr = (void *)oq_load, .pre_handler = count };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(register_kprobe(&kq), 0);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, tf_loader, &val), 0);
	while (!atomic_load(&in_trap))
		sched_yield();
	Dl_info di;	/* the trap is in the library: the post trampoline */
	UKT_ASSERT(dladdr((void *)trap_ip, &di) && strstr(di.dli_fname, "libukprobes"));
	unregister_kprobe(&kp);
	wait_for_kprobe_optimizer();	/* not while that frame lives */
	UKT_EQ(ukt_probe_flags(&kq) & KPROBE_FLAG_OPTIMIZED, 0);
	atomic_store(&tgo, 1);
	void *v;
	UKT_EQ(pthread_join(th, &v), 0);
	UKT_EQ((long)v, 42);
	unregister_kprobe(&kq);
}
UKT_CASE_T(post_trampoline_frame_answering, 30) { post_tramp(false); }
UKT_CASE_T(post_trampoline_frame_blocked, 30) { post_tramp(true); }

/* ---- a dead frame in the post trampoline (its trap handler returned at
 * once; its words stay in a buffer the thread never writes): it holds
 * the sites that had a post_handler, not an unrelated one ---- */
static atomic_int dead_trapped, dead_sleeping, dead_stop;
static void trap_returns(int sig, siginfo_t *si, void *ctx)
{
	(void)sig; (void)si;
	ucontext_t *uc = ctx;
	uc->uc_mcontext.gregs[REG_EFL] &= ~0x100LL;
	atomic_store(&dead_trapped, 1);
}

static __attribute__((noinline)) void sleep_over_it(void)
{
	char big[96 * 1024];	/* never written */
	__asm__ volatile("" :: "r"(big) : "memory");
	atomic_store(&dead_sleeping, 1);
	while (!atomic_load(&dead_stop))
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
}

static void *dead_post_thread(void *a)
{
	atomic_store(&arm_tf, 1);
	long v = oq_load(a);
	sleep_over_it();
	return (void *)v;
}

UKT_CASE_T(dead_post_trampoline_frame_holds_only_post_sites, 30)
{
	UKT_EQ(ukt_on_signal_info(SIGTRAP, trap_returns, 0), 0);
	static long val = 37;
	struct kprobe kp = { .addr = (void *)oq_load, .pre_handler = count, .post_handler = post };
	UKT_EQ(register_kprobe(&kp), 0);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, dead_post_thread, &val), 0);
	while (!atomic_load(&dead_sleeping))
		sched_yield();
	UKT_EQ(atomic_load(&dead_trapped), 1);
	struct kprobe kq = { .addr = (void *)oq_other, .pre_handler = count };
	UKT_EQ(register_kprobe(&kq), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kq);
	UKT_EQ(oq_other(1), 2);
	atomic_store(&dead_stop, 1);
	void *v;
	UKT_EQ(pthread_join(th, &v), 0);
	UKT_EQ((long)v, 42);
	unregister_kprobe(&kq);
	unregister_kprobe(&kp);
}

/* ---- the answer on a sigaltstack of sysconf(_SC_MINSIGSTKSZ) bytes (what
 * the kernel says its own frame needs) between guard pages ---- */
static atomic_int f_ready, f_stop;
static void *alt_runner(void *a)
{
	size_t n = (size_t)a;
	char *m = mmap(NULL, n + 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mprotect(m, 4096, PROT_NONE);			/* guard below */
	mprotect(m + 4096 + ((n + 4095) & ~4095UL), 4096, PROT_NONE);	/* and above */
	char *sp = m + 4096 + ((n + 4095) & ~4095UL) - n;
	stack_t ss = { .ss_sp = sp, .ss_size = n };
	if (sigaltstack(&ss, NULL))
		return (void *)-1L;
	atomic_store(&f_ready, 1);
	while (!atomic_load(&f_stop))
		;
	return NULL;
}
UKT_CASE_T(answer_on_the_least_sigaltstack, 30)
{
	size_t n = (size_t)sysconf(_SC_MINSIGSTKSZ);
	UKT_ASSERT(n >= 2048);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, alt_runner, (void *)n), 0);
	while (!atomic_load(&f_ready))
		sched_yield();
	struct kprobe kq = { .addr = (void *)oq_other, .pre_handler = count };
	UKT_EQ(register_kprobe(&kq), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kq);
	atomic_store(&f_stop, 1);
	pthread_join(th, NULL);

}
