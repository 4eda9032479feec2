/* SPDX-License-Identifier: MIT */
/*
 * A thread that a signal interrupted between two instructions of a
 * region, and whose signal handler still runs while the region becomes
 * a jump: when the handler returns, the thread goes on in the detour's
 * copy of the region, not in the middle of the jump's bytes.  The
 * kernel's optimizer waits for such tasks (synchronize_rcu_tasks); here
 * the optimizer's question finds the thread's signal frames and moves
 * the ip saved in them, as it moves a thread's own.
 *
 * The thread stops inside the region on purpose: the region's second
 * instruction loads from a page the program keeps closed, and the
 * program's SIGSEGV handler waits for the test to optimise the probe
 * before it opens the page and returns (the load runs again).
 *
 * Then threads parked at each instruction boundary of regions holding a
 * conditional branch or a system call (fabricated in a signal handler,
 * which sets the registers the boundary has and waits); threads left in
 * the detour of a probe whose jump is gone, whose way back a new region
 * holds (asleep in its system call, or faulting in its copy).
 *
 * Then the question's own corners: wait_for_kprobe_optimizer() called
 * while a retry batch runs; a program handler that longjmps out of the
 * answer; a frame in the post trampoline, which returns to a site it
 * does not show; the answer on a sigaltstack of the least size the
 * system allows.
 */
#include <dirent.h>
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
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include "ukt.h"

/* *p + 5, its load at offset 1 of the region [0, 8) a probe at 0 covers */
long sfr_load(const long *p);
__asm__(".text\n.p2align 4\n.globl sfr_load\n.type sfr_load,@function\n"
	"sfr_load: push %rbp\n mov (%rdi),%rax\n add $5,%rax\n pop %rbp\n ret\n"
	".size sfr_load,.-sfr_load\n");

/* *p + 5 again, the probe on the load itself: it runs in the probe's slot */
long sfr_slot_load(const long *p);
__asm__(".text\n.p2align 4\n.globl sfr_slot_load\n.type sfr_slot_load,@function\n"
	"sfr_slot_load: mov (%rdi),%rax\n add $5,%rax\n ret\n"
	".size sfr_slot_load,.-sfr_slot_load\n");
/* x + 1, for a probe in the same batch that nothing holds */
long sfr_other(long x);
__asm__(".text\n.p2align 4\n.globl sfr_other\n.type sfr_other,@function\n"
	"sfr_other: push %rbp\n mov %rdi,%rax\n add $1,%rax\n pop %rbp\n ret\n"
	".size sfr_other,.-sfr_other\n");

/* read(fd, buf, n) + 1: a probe at 0 covers [0, 7) (xor, syscall, mov),
 * one at 4 covers [4, 11) (mov, lea): the first one's copy goes back to 7,
 * inside the second one's jump */
long sfr_sys(long fd, void *buf, long n);
__asm__(".text\n.p2align 4\n.globl sfr_sys\n.type sfr_sys,@function\n"
	"sfr_sys: xor %eax,%eax\n syscall\n mov %rax,%rcx\n lea 1(%rcx),%rax\n ret\n"
	".size sfr_sys,.-sfr_sys\n");

static long *page;
static long (*volatile load_fn)(const long *) = sfr_load;
static atomic_int in_handler, go, usr1_in;
static volatile unsigned long fault_ip;
static bool nested, asleep;
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
	if ((char *)si->si_addr != (char *)page)
		_exit(40);	/* a fault elsewhere: the jump's bytes ran */
	fault_ip = (unsigned long)uc->uc_mcontext.gregs[REG_RIP];
	atomic_store(&in_handler, 1);
	if (nested)	/* waits in a second handler, on the sigaltstack */
		raise(SIGUSR1);
	while (!atomic_load(&go)) {
		if (asleep)	/* in a system call, every time it is looked at */
			nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
		else
			sched_yield();
	}
	mprotect(page, 4096, PROT_READ | PROT_WRITE);
}

static void *loader(void *arg)
{
	(void)arg;
	if (nested) {
		stack_t ss = { .ss_sp = alt, .ss_size = 65536 };
		if (sigaltstack(&ss, NULL))
			return (void *)-1L;
	}
	return (void *)load_fn(page);
}

static long hits;
static int count(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; hits++; return 0; }

/* NESTED_NO_READ: NESTED with process_vm_readv forbidden and the SIGSEGV
 * handler SA_NODEFER (SIGSEGV open): both frames are read in place */
enum { RUNS, NESTED, BLOCKED, NO_READ, NESTED_NO_READ };


static void frame_inside_region(int how)
{
	nested = how == NESTED || how == NESTED_NO_READ;
	asleep = how == BLOCKED;
	if (how == NO_READ || how == NESTED_NO_READ)	/* a container without CAP_SYS_PTRACE */
		ukt_deny_syscall(SYS_process_vm_readv, EPERM);
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(page != MAP_FAILED);
	*page = 37;
	alt = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(alt != MAP_FAILED);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = segv;
	sa.sa_flags = SA_SIGINFO | (how == NESTED_NO_READ ? SA_NODEFER : 0);
	if (how == BLOCKED)	/* the optimizer's question waits */
		sigaddset(&sa.sa_mask, SIGURG);
	UKT_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = usr1;
	sa.sa_flags = SA_ONSTACK;
	UKT_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
	UKT_EQ(mprotect(page, 4096, PROT_NONE), 0);

	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, loader, NULL), 0);
	while (!atomic_load(&in_handler) || (nested && !atomic_load(&usr1_in)))
		sched_yield();
	UKT_EQ(fault_ip, (unsigned long)sfr_load + 1);

	struct kprobe kp = { .addr = (void *)sfr_load, .pre_handler = count };
	struct kprobe kq = { .addr = (void *)sfr_other, .pre_handler = count };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(register_kprobe(&kq), 0);
	wait_for_kprobe_optimizer();
	if (how == BLOCKED || how == NO_READ)	/* not now */
		UKT_EQ(kp.flags & KPROBE_FLAG_OPTIMIZED, 0);
	else
		UKT_EXPECT_OPTIMIZED(&kp);
	if (how == NO_READ)	/* the frames could not be looked at */
		UKT_EQ(kq.flags & KPROBE_FLAG_OPTIMIZED, 0);
	else
		UKT_EXPECT_OPTIMIZED(&kq);	/* the batch went on without it */
	atomic_store(&go, 1);
	void *v;
	UKT_EQ(pthread_join(th, &v), 0);
	UKT_EQ((long)v, 42);	/* the load ran again, in the copy */
	UKT_EQ(hits, 0);	/* the thread was past the probe */
	/* left out, the probe is tried again once the thread is gone */
	for (int i = 0; i < 2000 && !(kp.flags & kq.flags & KPROBE_FLAG_OPTIMIZED); i++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	UKT_EXPECT_OPTIMIZED(&kp);
	UKT_EXPECT_OPTIMIZED(&kq);
	UKT_EQ(sfr_load(page), 42);
	UKT_EQ(hits, 1);
	unregister_kprobe(&kp);
	unregister_kprobe(&kq);
}

UKT_CASE_T(signal_frame_inside_region_moves_to_the_copy, 30) { frame_inside_region(RUNS); }

/* the handler that waits runs on the sigaltstack, nested in the one whose
 * frame holds the region's ip on the thread's stack */
UKT_CASE_T(nested_signal_frame_on_another_stack_moves_too, 30) { frame_inside_region(NESTED); }

/* the handler blocks the question's signal and sleeps: the optimizer
 * reads the thread's stack from outside, sees the frame, and leaves the
 * probe a breakpoint (it cannot move a frame of a thread that may wake);
 * the thread goes on right, through the original code, and the probe is
 * optimised on a later try */
UKT_CASE_T(frame_of_a_thread_that_cannot_answer_keeps_the_breakpoint, 60)
{
	frame_inside_region(BLOCKED);
}

/* the handler blocks SIGSEGV (the copy that may fault cannot run) and
 * process_vm_readv is forbidden: the frames cannot be read, so the whole
 * batch waits for a later try */
UKT_CASE_T(frames_that_cannot_be_read_hold_the_batch, 60) { frame_inside_region(NO_READ); }

/* the same without process_vm_readv, SIGSEGV open: the frame on the
 * sigaltstack and the one on the thread stack it leads to are both read
 * in place */
UKT_CASE_T(frame_on_a_second_stack_without_process_vm_readv, 30)
{
	frame_inside_region(NESTED_NO_READ);
}

/* ---- an asynchronous signal's frame, read in place ------------------------ */

static atomic_int usr2_in, usr2_go, async_tid;
static void usr2(int sig)
{
	(void)sig;
	atomic_store(&usr2_in, 1);
	while (!atomic_load(&usr2_go))
		sched_yield();
}

static void *async_loader(void *arg)
{
	atomic_store(&async_tid, (int)syscall(SYS_gettid));
	return (void *)sfr_load(arg);
}

static long uffd_page(long **p)
{
	*p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(*p != MAP_FAILED);
	long uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
	UKT_ASSERT(uffd >= 0);
	struct uffdio_api api = { .api = UFFD_API };
	UKT_EQ(ioctl((int)uffd, UFFDIO_API, &api), 0);
	struct uffdio_register reg = { { (unsigned long)*p, 4096 }, UFFDIO_REGISTER_MODE_MISSING, 0 };
	UKT_EQ(ioctl((int)uffd, UFFDIO_REGISTER, &reg), 0);
	return uffd;
}

/* the page's contents arrive: 37 first */
static void uffd_fill(long uffd, long *p)
{
	static long fill[512] = { 37 };
	struct uffdio_copy c = { (unsigned long)p, (unsigned long)fill, 4096, 0, 0 };
	UKT_EQ(ioctl((int)uffd, UFFDIO_COPY, &c), 0);
}

static unsigned long stopped_pc(int tid);

/* until the thread tid sleeps (not running) with its pc at pc */
static void wait_stopped_at(atomic_int *tid, unsigned long pc)
{
	while (!atomic_load(tid))
		sched_yield();
	for (int i = 0; i < 5000 && stopped_pc(atomic_load(tid)) != pc; i++)
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	UKT_EQ(stopped_pc(atomic_load(tid)), pc);
}

/*
 * The thread waits at the region's load (a userfaultfd page), a SIGUSR2
 * interrupts the wait there, and its handler waits in turn: SIGSEGV is
 * open in that handler, so the frame is read in place (ukp_copy_nofault)
 * and moved; the load then runs in the copy once the page is filled.
 */
UKT_CASE_T(async_signal_frame_inside_region_moves_to_the_copy, 30)
{
	long *up;
	long uffd = uffd_page(&up);
	UKT_EQ(ukt_on_signal(SIGUSR2, usr2, 0), 0);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, async_loader, up), 0);
	wait_stopped_at(&async_tid, (unsigned long)sfr_load + 1);
	UKT_EQ(syscall(SYS_tgkill, getpid(), atomic_load(&async_tid), SIGUSR2), 0);
	while (!atomic_load(&usr2_in))
		sched_yield();

	struct kprobe kp = { .addr = (void *)sfr_load, .pre_handler = count };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	atomic_store(&usr2_go, 1);
	uffd_fill(uffd, up);
	void *v;
	UKT_EQ(pthread_join(th, &v), 0);
	UKT_EQ((long)v, 42);
	UKT_EQ(hits, 0);
	UKT_EQ(sfr_load(up), 42);
	UKT_EQ(hits, 1);
	unregister_kprobe(&kp);
}

/* ---- a fault in a probe's slot ------------------------------------------- */

static void slot_setup(void)
{
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(page != MAP_FAILED);
	*page = 37;
	UKT_EQ(ukt_on_signal_info(SIGSEGV, segv, 0), 0);
	UKT_EQ(mprotect(page, 4096, PROT_NONE), 0);
	load_fn = sfr_slot_load;
	UKT_EQ(kprobes_set_optimization(0), 0);	/* the hit runs the slot */
}

/*
 * The probed instruction faults in its slot, and the program's handler
 * (shown the probe point) waits while the probe is optimised: it returns
 * to run the instruction again, in the detour's copy - the slot would
 * jump back into the jump's bytes.
 */
UKT_CASE_T(fault_in_a_slot_while_its_site_is_optimised, 30)
{
	slot_setup();
	struct kprobe kp = { .addr = (void *)sfr_slot_load, .pre_handler = count };
	UKT_EQ(register_kprobe(&kp), 0);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, loader, NULL), 0);
	while (!atomic_load(&in_handler))
		sched_yield();
	UKT_EQ(fault_ip, (unsigned long)sfr_slot_load);
	UKT_EQ(hits, 1);
	UKT_EQ(kprobes_set_optimization(1), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kp);
	atomic_store(&go, 1);
	void *v;
	UKT_EQ(pthread_join(th, &v), 0);
	UKT_EQ((long)v, 42);
	UKT_EQ(hits, 1);	/* run again without a second hit */
	UKT_EQ(sfr_slot_load(page), 42);
	UKT_EQ(hits, 2);
	unregister_kprobe(&kp);
}

static atomic_int frame_made, sleeper_stop;

static __attribute__((noinline)) void sleep_over_dead_frame(void)
{
	char buf[32 << 10];	/* never written: the old frame's words stay */
	__asm__ volatile("" :: "r"(buf) : "memory");
	while (!atomic_load(&sleeper_stop))
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
}

static void *dead_frame_maker(void *arg)
{
	(void)arg;
	atomic_store(&frame_made, (int)sfr_slot_load(page));
	sleep_over_dead_frame();
	return NULL;
}

/*
 * A signal frame that returned long ago (the slot fault's, its ip the
 * slot's) still lies in the untouched stack of a thread that sleeps: it
 * cannot be told from a live one, so it holds its own site back, but
 * not the rest of the batch.
 */
UKT_CASE_T(dead_frame_holds_only_its_site, 30)
{
	slot_setup();
	go = 1;		/* the handler opens the page and returns */
	struct kprobe kp = { .addr = (void *)sfr_slot_load, .pre_handler = count };
	struct kprobe kq = { .addr = (void *)sfr_other, .pre_handler = count };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(register_kprobe(&kq), 0);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, dead_frame_maker, NULL), 0);
	while (!atomic_load(&frame_made))
		sched_yield();
	UKT_EQ(atomic_load(&frame_made), 42);
	UKT_EQ(kprobes_set_optimization(1), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kq);
	UKT_EQ(sfr_other(1), 2);
	atomic_store(&sleeper_stop, 1);
	UKT_EQ(pthread_join(th, NULL), 0);
	unregister_kprobe(&kp);
	unregister_kprobe(&kq);
}

/* ---- a thread that cannot answer, stopped inside a region --------------- */

static atomic_int loader_tid;

static void *blocked_loader(void *arg)
{
	sigset_t set;	/* the optimizer's question waits */
	sigemptyset(&set);
	sigaddset(&set, SIGURG);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	atomic_store(&loader_tid, (int)syscall(SYS_gettid));
	return (void *)sfr_load(arg);
}

/* the pc /proc shows for a thread that is not running, or 0 */
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

/*
 * The thread's load at offset 1 of the region waits for a page that
 * userfaultfd keeps missing: it sleeps there, so the optimizer reads
 * where it is from outside.  The site is held out of
 * the batch rather than waited for; once the page is there the thread
 * goes on through the original code, and a later try optimises it.
 */
UKT_CASE_T(thread_stopped_inside_a_region_holds_its_probe, 60)
{
	long *up;
	long uffd = uffd_page(&up);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, blocked_loader, up), 0);
	wait_stopped_at(&loader_tid, (unsigned long)sfr_load + 1);

	struct kprobe kp = { .addr = (void *)sfr_load, .pre_handler = count };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EQ(kp.flags & KPROBE_FLAG_OPTIMIZED, 0);	/* held, not waited for */

	uffd_fill(uffd, up);
	void *v;
	UKT_EQ(pthread_join(th, &v), 0);
	UKT_EQ((long)v, 42);
	UKT_EQ(hits, 0);
	for (int i = 0; i < 2000 && !(kp.flags & KPROBE_FLAG_OPTIMIZED); i++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	UKT_EXPECT_OPTIMIZED(&kp);
	UKT_EQ(sfr_load(up), 42);
	UKT_EQ(hits, 1);
	unregister_kprobe(&kp);
}

/* ---- a held site is tried again once its thread is gone: a wait during
 * that batch waits for it ---- */
static atomic_int stop_spinner, spinning;
/* a thread that runs with the question's signal blocked: it cannot be
 * asked, so a batch waits, looking at it, until it stops */
static void *spinner(void *arg)
{
	(void)arg;
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGURG);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	atomic_store(&spinning, 1);
	while (!atomic_load(&stop_spinner))
		;
	return NULL;
}
static atomic_int waited;
static void *retry_waiter(void *a)
{
	(void)a;
	wait_for_kprobe_optimizer();
	atomic_store(&waited, 1 + !!(ukt_probe_flags(&*(struct kprobe *)a) & KPROBE_FLAG_OPTIMIZED));
	return NULL;
}
static void start_held(long **up, long *uffd, pthread_t *th)
{
	*uffd = uffd_page(up);
	UKT_EQ(pthread_create(th, NULL, blocked_loader, *up), 0);
	wait_stopped_at(&loader_tid, (unsigned long)sfr_load + 1);
}

static void release_held(long *up, long uffd, pthread_t th)
{
	uffd_fill(uffd, up);
	void *v;
	UKT_EQ(pthread_join(th, &v), 0);
	UKT_EQ((long)v, 42);
}

/* the optimizer thread is in a batch: not waiting for work (a futex
 * wait) in any of 40 looks over ~20 ms; between batches it always is */
static bool optimizer_busy(void)
{
	int opt = 0;
	DIR *d = opendir("/proc/self/task");
	UKT_ASSERT(d);
	for (struct dirent *e; (e = readdir(d));) {
		char path[300], comm[32] = "";
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (f && fgets(comm, sizeof(comm), f) && !strcmp(comm, "kprobe-optimize\n"))
			opt = atoi(e->d_name);
		if (f)
			fclose(f);
	}
	closedir(d);
	UKT_ASSERT(opt);
	for (int i = 0; i < 40; i++) {
		char path[64], buf[64] = "";
		snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", opt);
		FILE *f = fopen(path, "r");
		UKT_ASSERT(f);
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
		if (atoi(buf) == SYS_futex)
			return false;
		nanosleep(&(struct timespec){ 0, 500000 }, NULL);
	}
	return true;
}

/* The retry of the held site, once its thread is gone, cannot end while
 * the spinner runs; a wait begun in it returns when it ends, with the
 * site optimised. */
UKT_CASE_T(wait_during_a_retry_batch_waits_for_it, 60)
{
	long *up, uffd;
	pthread_t th, sp, wt;
	start_held(&up, &uffd, &th);
	struct kprobe kp = { .addr = (void *)sfr_load, .pre_handler = count };
	UKT_EQ(register_kprobe(&kp), 0);
	wait_for_kprobe_optimizer();
	UKT_EQ(ukt_probe_flags(&kp) & KPROBE_FLAG_OPTIMIZED, 0);	/* held */
	UKT_EQ(pthread_create(&sp, NULL, spinner, NULL), 0);
	while (!atomic_load(&spinning))
		sched_yield();
	release_held(up, uffd, th);
	while (!optimizer_busy())
		;
	UKT_EQ(pthread_create(&wt, NULL, retry_waiter, &kp), 0);
	nanosleep(&(struct timespec){ 0, 100000000 }, NULL);
	int early = atomic_load(&waited);
	atomic_store(&stop_spinner, 1);
	pthread_join(sp, NULL);
	pthread_join(wt, NULL);
	UKT_EQ(early, 0);	/* the batch could not end while it spun */
	UKT_EQ(atomic_load(&waited), 2);	/* returned with the retry done */
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
		struct kprobe k0 = { .addr = (void *)sfr_other, .pre_handler = count };
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
		struct kprobe kq = { .addr = (void *)sfr_other, .pre_handler = count };
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
	return (void *)sfr_load(a);
}
static void post_tramp(bool blocks)
{
	trap_blocks = blocks;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = trap;
	sa.sa_flags = SA_SIGINFO;
	if (blocks)
		sigaddset(&sa.sa_mask, SIGURG);
	UKT_EQ(sigaction(SIGTRAP, &sa, NULL), 0);
	static long val = 37;
	struct kprobe kp = { .addr = (void *)sfr_load, .pre_handler = count, .post_handler = post };
	struct kprobe kq = { .addr = (void *)sfr_load, .pre_handler = count };
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
	long v = sfr_load(a);
	sleep_over_it();
	return (void *)v;
}

UKT_CASE_T(dead_post_trampoline_frame_holds_only_post_sites, 30)
{
	UKT_EQ(ukt_on_signal_info(SIGTRAP, trap_returns, 0), 0);
	static long val = 37;
	struct kprobe kp = { .addr = (void *)sfr_load, .pre_handler = count, .post_handler = post };
	UKT_EQ(register_kprobe(&kp), 0);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, dead_post_thread, &val), 0);
	while (!atomic_load(&dead_sleeping))
		sched_yield();
	UKT_EQ(atomic_load(&dead_trapped), 1);
	struct kprobe kq = { .addr = (void *)sfr_other, .pre_handler = count };
	UKT_EQ(register_kprobe(&kq), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kq);
	UKT_EQ(sfr_other(1), 2);
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
	struct kprobe kq = { .addr = (void *)sfr_other, .pre_handler = count };
	UKT_EQ(register_kprobe(&kq), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kq);
	atomic_store(&f_stop, 1);
	pthread_join(th, NULL);

}

/* ---- a thread asleep in a stale detour, whose way out is a new region ---- */

/* f + k, computed at run time: a rip-relative lea of f + k (clang folds
 * the constant) is a code pointer into f's middle, which the analysis
 * counts as a jump target */
static kprobe_opcode_t *code_at(void *f, unsigned long k)
{
	unsigned long a = (unsigned long)f;
	__asm__("" : "+r"(a));
	return (kprobe_opcode_t *)(a + k);
}

static atomic_int reader_tid;
static int sys_pipe[2];

static void *sys_reader(void *arg)
{
	(void)arg;
	char c;
	atomic_store(&reader_tid, (int)syscall(SYS_gettid));
	return (void *)sfr_sys(sys_pipe[0], &c, 1);
}

/* the system call thread tid sleeps in (its number), or -1 running */
static long sleeping_in(int tid)
{
	char path[64], buf[256] = "";
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	FILE *f = fopen(path, "r");
	UKT_ASSERT(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	return !strncmp(buf, "running", 7) ? -1 : strtol(buf, NULL, 10);
}

/*
 * A thread sleeps in the read() of a probe's detour copy; the probe goes
 * away (its jump with it), and a probe whose region holds the address the
 * copy goes back to is registered.  Its jump must wait for the thread to
 * leave the detour: written under it, the thread would go back into the
 * jump's displacement.  Held, not waited for (the thread may sleep for
 * good); once the thread is out, a later try optimises it.
 */
UKT_CASE_T(thread_asleep_in_a_detour_holds_a_region_over_its_way_back, 60)
{
	UKT_EQ(pipe(sys_pipe), 0);
	struct kprobe kx = { .addr = (void *)sfr_sys, .pre_handler = count };
	UKT_EQ(register_kprobe(&kx), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kx);

	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, sys_reader, NULL), 0);
	while (!atomic_load(&reader_tid))
		sched_yield();
	int tid = atomic_load(&reader_tid);
	for (int i = 0; i < 5000 && !(__atomic_load_n(&hits, __ATOMIC_RELAXED) == 1 &&
				       sleeping_in(tid) == SYS_read); i++)
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	UKT_EQ(sleeping_in(tid), SYS_read);
	unsigned long pc = stopped_pc(tid);	/* in the detour's copy */
	UKT_ASSERT(pc < (unsigned long)sfr_sys || pc >= (unsigned long)code_at(sfr_sys, 16));
	unregister_kprobe(&kx);

	struct kprobe ky = { .addr = code_at(sfr_sys, 4), .pre_handler = count };
	UKT_EQ(register_kprobe(&ky), 0);
	wait_for_kprobe_optimizer();
	UKT_EQ(ukt_probe_flags(&ky) & KPROBE_FLAG_OPTIMIZED, 0);	/* held */
	UKT_EQ(stopped_pc(tid), pc);	/* still asleep there */

	UKT_EQ(write(sys_pipe[1], "x", 1), 1);
	void *v;
	UKT_EQ(pthread_join(th, &v), 0);
	UKT_EQ((long)v, 2);
	UKT_EQ(hits, 1);	/* kx's: ky's instruction ran in kx's copy */
	for (int i = 0; i < 2000 && !(ukt_probe_flags(&ky) & KPROBE_FLAG_OPTIMIZED); i++)
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	UKT_EXPECT_OPTIMIZED(&ky);
	char c;
	UKT_EQ(write(sys_pipe[1], "y", 1), 1);
	UKT_EQ(sfr_sys(sys_pipe[0], &c, 1), 2);
	UKT_EQ(c, 'y');
	UKT_EQ(hits, 2);
	unregister_kprobe(&ky);
}

/*
 * The same with a signal frame: a thread faults on the load of a probe's
 * detour copy and its handler waits; the probe goes away and a probe
 * over the copy's way back (sfr_load + 8, inside a region from + 4) is
 * registered and optimised.  The load runs again in the original code
 * (the jump it was copied for is gone), not in the copy, which would go
 * back into the new jump's displacement; on its way out it meets the new
 * probe, whose handler runs.
 */
UKT_CASE_T(fault_in_a_stale_detour_runs_again_in_the_original_code, 60)
{
	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(page != MAP_FAILED);
	*page = 37;
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = segv;
	sa.sa_flags = SA_SIGINFO;
	UKT_EQ(sigaction(SIGSEGV, &sa, NULL), 0);
	struct kprobe kx = { .addr = (void *)sfr_load, .pre_handler = count };
	UKT_EQ(register_kprobe(&kx), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&kx);

	UKT_EQ(mprotect(page, 4096, PROT_NONE), 0);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, loader, NULL), 0);
	while (!atomic_load(&in_handler))
		sched_yield();
	UKT_EQ(hits, 1);
	/* the load faulted in the detour's copy (the program's handler is
	 * shown the original instruction) */
	UKT_EQ(fault_ip, (unsigned long)code_at(sfr_load, 1));
	unregister_kprobe(&kx);

	struct kprobe ky = { .addr = code_at(sfr_load, 4), .pre_handler = count };
	UKT_EQ(register_kprobe(&ky), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&ky);

	atomic_store(&go, 1);
	void *v;
	UKT_EQ(pthread_join(th, &v), 0);
	UKT_EQ((long)v, 42);
	UKT_EQ(hits, 2);	/* kx's, then ky's */
	UKT_EQ(sfr_load(page), 42);
	UKT_EQ(hits, 3);
	unregister_kprobe(&ky);
}

/* ---- a thread parked at each instruction boundary of a region ------------ */

/*
 * Regions with a conditional branch and a system call inside (the copy
 * goes on after them): a probe at sfr_jcc_p covers [0, 6) = mov, jz, add;
 * one at sfr_sys_p covers [0, 6) = mov, syscall, add.
 *   sfr_jcc(x, y): y ? x + y : x + 100
 *   sfr_sysg(nr, y): syscall nr (getpid) + y
 */
long sfr_jcc(long x, long y);
long sfr_sysg(long nr, long y);
__asm__(".text\n.p2align 4\n.globl sfr_jcc\n.type sfr_jcc,@function\n"
	"sfr_jcc: test %esi,%esi\n"
	".globl sfr_jcc_p\nsfr_jcc_p: mov %edi,%eax\n jz 1f\n add %esi,%eax\n ret\n"
	"1: lea 100(%rax),%eax\n ret\n"
	".size sfr_jcc,.-sfr_jcc\n"
	".p2align 4\n.globl sfr_sysg\n.type sfr_sysg,@function\n"
	"sfr_sysg:\n"
	".globl sfr_sys_p\nsfr_sys_p: mov %edi,%eax\n syscall\n add %esi,%eax\n ret\n"
	".size sfr_sysg,.-sfr_sysg\n"
	/* where a parked thread's fabricated call returns */
	".globl sfr_land\nsfr_land: mov %rax,%rdi\n call park_done\n ud2\n");
extern char sfr_jcc_p[], sfr_sys_p[], sfr_land[];

/* one parking place: the boundary, and the registers there */
struct park {
	const char *what;
	char *probe;		/* the probe point, the region's start */
	unsigned off;		/* the boundary, from it */
	long ax, di, si;
	bool zf;
	long want;
};

static struct park cur_park;
static sigjmp_buf park_jb;
static atomic_int parked, park_go;
static long park_result;
static unsigned long park_stack[1024] __attribute__((aligned(16)));

void park_done(long r);
void park_done(long r)
{
	park_result = r;
	siglongjmp(park_jb, 1);
}

/* SIGUSR2: the thread goes to the boundary with the registers it has
 * there, as if called, and stays in this handler until told: its frame
 * is what the optimizer's question finds, inside the region */
static void park_here(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)si;
	ucontext_t *uc = ctx;
	greg_t *g = uc->uc_mcontext.gregs;
	unsigned long *top = park_stack + 1024 - 2;	/* 16-aligned */
	top[-1] = (unsigned long)sfr_land;		/* the return address */
	g[REG_RSP] = (greg_t)(top - 1);
	g[REG_RIP] = (greg_t)(cur_park.probe + cur_park.off);
	g[REG_RAX] = cur_park.ax;
	g[REG_RDI] = cur_park.di;
	g[REG_RSI] = cur_park.si;
	g[REG_EFL] = (g[REG_EFL] & ~0x40L) | (cur_park.zf ? 0x40L : 0);
	atomic_store(&parked, 1);
	while (!atomic_load(&park_go))
		sched_yield();
}

static void *park_thread(void *arg)
{
	(void)arg;
	if (sigsetjmp(park_jb, 1) == 0) {
		syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), SIGUSR2);
		return (void *)-1L;	/* the handler's return went elsewhere */
	}
	return (void *)1L;
}

/*
 * For each instruction boundary of the region (its start too): a thread
 * parked there (in a signal handler whose frame returns there), the probe
 * registered and optimised - the question moves the frame to the same
 * instruction in the detour's copy - then the thread goes on and must
 * compute what the function computes; the probe's handler runs only for
 * the thread parked at the start, which then enters the jump.
 */
UKT_CASE_T(thread_parked_at_each_boundary_of_a_region_goes_on_in_the_copy, 60)
{
	long pid = getpid();
	const struct park parks[] = {
		{ "jcc, at the start", sfr_jcc_p, 0, 0, 7, 5, false, 12 },
		{ "jcc, at the jz (taken)", sfr_jcc_p, 2, 7, 7, 0, true, 107 },
		{ "jcc, at the jz (not taken)", sfr_jcc_p, 2, 7, 7, 5, false, 12 },
		{ "jcc, at the add", sfr_jcc_p, 4, 7, 7, 5, false, 12 },
		/* the ret: its own 5 bytes hold the jz's target, so the region
		 * takes it in (region_extend) */
		{ "jcc, at the ret (taken in)", sfr_jcc_p, 6, 12, 7, 5, false, 12 },
		{ "syscall, at the start", sfr_sys_p, 0, 0, SYS_getpid, 3, false, pid + 3 },
		{ "syscall, at the syscall", sfr_sys_p, 2, SYS_getpid, SYS_getpid, 3, false, pid + 3 },
		{ "syscall, after it", sfr_sys_p, 4, pid, SYS_getpid, 3, false, pid + 3 },
		/* its ret: past it is the function's end */
		{ "syscall, at the ret (taken in)", sfr_sys_p, 6, pid + 3, SYS_getpid, 3, false,
		  pid + 3 },
	};
	UKT_EQ(sfr_jcc(7, 5), 12);
	UKT_EQ(sfr_jcc(7, 0), 107);
	UKT_EQ(sfr_sysg(SYS_getpid, 3), pid + 3);
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = park_here;
	sa.sa_flags = SA_SIGINFO;
	UKT_EQ(sigaction(SIGUSR2, &sa, NULL), 0);

	for (size_t i = 0; i < sizeof(parks) / sizeof(parks[0]); i++) {
		cur_park = parks[i];
		atomic_store(&parked, 0);
		atomic_store(&park_go, 0);
		park_result = 0;
		hits = 0;
		pthread_t th;
		UKT_EQ(pthread_create(&th, NULL, park_thread, NULL), 0);
		while (!atomic_load(&parked))
			sched_yield();
		struct kprobe kp = { .addr = (kprobe_opcode_t *)cur_park.probe, .pre_handler = count };
		UKT_EQ(register_kprobe(&kp), 0);
		wait_for_kprobe_optimizer();
		UKT_EXPECT_OPTIMIZED(&kp);
		atomic_store(&park_go, 1);
		void *v;
		UKT_EQ(pthread_join(th, &v), 0);
		UKT_EQ((long)v, 1);
		if (park_result != cur_park.want)
			UKT_FAIL("%s: %ld, want %ld", cur_park.what, park_result, cur_park.want);
		UKT_EQ(hits, cur_park.off == 0);
		unregister_kprobe(&kp);
	}
}

/* ---- runs: every instruction of a region probed --------------------------- */

static long ip_wrong;
static int count_ip(struct kprobe *p, struct pt_regs *r)
{
	if (r->ip != (unsigned long)p->addr)
		ip_wrong++;
	hits++;
	return 0;
}

/*
 * A probe on each instruction of the regions (mov, jz, add; mov, syscall,
 * add): one jump, one detour segment per probe (a run), each probe seen
 * at its own address, every call exact.  A thread parked at each
 * boundary goes on in the segment of the probe there, whose handler then
 * runs (its int3 had not), and in the ones after it.  Then one probe of
 * the run goes away: the others stay optimised (a shorter run), exact.
 */
UKT_CASE_T(thread_parked_at_each_boundary_of_a_run_goes_on_in_its_segments, 60)
{
	long pid = getpid();
	struct { struct park k; long hits; } parks[] = {
		{ { "jcc, at the start", sfr_jcc_p, 0, 0, 7, 5, false, 12 }, 3 },
		{ { "jcc, at the jz (taken)", sfr_jcc_p, 2, 7, 7, 0, true, 107 }, 1 },
		{ { "jcc, at the jz (not taken)", sfr_jcc_p, 2, 7, 7, 5, false, 12 }, 2 },
		{ { "jcc, at the add", sfr_jcc_p, 4, 7, 7, 5, false, 12 }, 1 },
		{ { "syscall, at the start", sfr_sys_p, 0, 0, SYS_getpid, 3, false, pid + 3 }, 3 },
		{ { "syscall, at the syscall", sfr_sys_p, 2, SYS_getpid, SYS_getpid, 3, false,
		    pid + 3 }, 2 },
		{ { "syscall, after it", sfr_sys_p, 4, pid, SYS_getpid, 3, false, pid + 3 }, 1 },
	};
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = park_here;
	sa.sa_flags = SA_SIGINFO;
	UKT_EQ(sigaction(SIGUSR2, &sa, NULL), 0);

	for (size_t i = 0; i < sizeof(parks) / sizeof(parks[0]); i++) {
		cur_park = parks[i].k;
		atomic_store(&parked, 0);
		atomic_store(&park_go, 0);
		park_result = 0;
		hits = 0;
		pthread_t th;
		UKT_EQ(pthread_create(&th, NULL, park_thread, NULL), 0);
		while (!atomic_load(&parked))
			sched_yield();
		struct kprobe kp[3];
		for (int j = 0; j < 3; j++) {
			memset(&kp[j], 0, sizeof(kp[j]));
			kp[j].addr = code_at(cur_park.probe, 2 * (unsigned long)j);
			kp[j].pre_handler = count_ip;
			UKT_EQ(register_kprobe(&kp[j]), 0);
		}
		wait_for_kprobe_optimizer();
		for (int j = 0; j < 3; j++)
			UKT_EXPECT_OPTIMIZED(&kp[j]);
		atomic_store(&park_go, 1);
		void *v;
		UKT_EQ(pthread_join(th, &v), 0);
		UKT_EQ((long)v, 1);
		if (park_result != cur_park.want)
			UKT_FAIL("%s: %ld, want %ld", cur_park.what, park_result, cur_park.want);
		if (hits != parks[i].hits)
			UKT_FAIL("%s: %ld hits, want %ld", cur_park.what, hits, parks[i].hits);
		/* every call: each probe on its way, at its own address */
		hits = 0;
		if (cur_park.probe == sfr_jcc_p) {
			UKT_EQ(sfr_jcc(7, 5), 12);
			UKT_EQ(sfr_jcc(7, 0), 107);
			UKT_EQ(hits, 3 + 2);
		} else {
			UKT_EQ(sfr_sysg(SYS_getpid, 3), pid + 3);
			UKT_EQ(hits, 3);
		}
		/* the middle one goes: the others, a shorter run, stay exact */
		unregister_kprobe(&kp[1]);
		wait_for_kprobe_optimizer();
		UKT_EXPECT_OPTIMIZED(&kp[0]);
		UKT_EXPECT_OPTIMIZED(&kp[2]);
		hits = 0;
		if (cur_park.probe == sfr_jcc_p) {
			UKT_EQ(sfr_jcc(7, 5), 12);
			UKT_EQ(sfr_jcc(7, 0), 107);
			UKT_EQ(hits, 2 + 1);
		} else {
			UKT_EQ(sfr_sysg(SYS_getpid, 3), pid + 3);
			UKT_EQ(hits, 2);
		}
		unregister_kprobe(&kp[0]);
		unregister_kprobe(&kp[2]);
		UKT_EQ(ip_wrong, 0);
	}
}

/* ---- punned jumps ------------------------------------------------------------ */

/*
 * sfr_pun(x, n) = x + 3n (n >= 1).  Its first instruction is 2 bytes and
 * the loop jumps back to the one after it (+2): no region of whole
 * instructions can take a 5-byte jump there, so the jump is punned - its
 * rel32's top bytes are the add's - and lands on a hop.
 * sfr_pun1(x, y) = x + y ends in a 1-byte ret followed by bytes of no
 * function (read as rel32 0x40000000: a target 1 GiB up), so its jump
 * there is punned with a target fixed to the byte.
 */
long sfr_pun(long x, long n);
long sfr_pun1(long x, long y);
__asm__(".text\n.p2align 4\n.globl sfr_pun\n.type sfr_pun,@function\n"
	"sfr_pun:\n"
	".globl sfr_pun_p\nsfr_pun_p: xor %eax,%eax\n"
	".globl sfr_pun_loop\nsfr_pun_loop: add $3,%rax\n dec %rsi\n jnz sfr_pun_loop\n"
	" add %rdi,%rax\n ret\n"
	".size sfr_pun,.-sfr_pun\n"
	".p2align 4\n.globl sfr_pun1\n.type sfr_pun1,@function\n"
	"sfr_pun1: lea (%rdi,%rsi),%rax\n"
	".globl sfr_pun1_p\nsfr_pun1_p: ret\n"
	".size sfr_pun1,.-sfr_pun1\n"
	".byte 0x00, 0x00, 0x00, 0x40, 0xcc, 0xcc, 0xcc, 0xcc\n");
extern char sfr_pun_p[], sfr_pun_loop[], sfr_pun1_p[];

/* The jump at p (k bytes of its own, the rest as they were): p's first
 * bytes are prefixes and an 0xe9 whose target holds a jmp rel32 (a hop) */
static void expect_punned(const char *p, unsigned k, const uint8_t *orig)
{
	const uint8_t *c = (const uint8_t *)code_at((void *)p, 0);
	unsigned np = 0;
	while (np < k && c[np] == 0x26)
		np++;
	if (np >= k || c[np] != 0xe9)
		UKT_FAIL("no punned jump at %p: %02x %02x", (void *)p, c[0], c[1]);
	if (memcmp(c + k, orig + k, 4))
		UKT_FAIL("the bytes after the punned instruction changed");
	int32_t rel;
	memcpy(&rel, c + np + 1, 4);
	const uint8_t *hop = c + np + 5 + rel;
	if (hop[0] != 0xe9)
		UKT_FAIL("the punned jump's target %p holds %02x, not a jmp", (void *)hop, hop[0]);
}

/*
 * Punned, optimised, exact; a thread parked at each boundary of the bytes
 * the jump writes or reads (the instruction, and the ones its rel32 runs
 * into) goes on and computes what the function computes: a thread at
 * the first enters the jump (its hit counts), the others run the code that
 * is still there.
 */
UKT_CASE_T(thread_parked_at_each_boundary_of_a_punned_jump_goes_on, 60)
{
	/* where the thread parks, the probe, the hits the thread makes */
	const struct { struct park k; char *probe; long hits; } parks[] = {
		{ { "pun, at the start", sfr_pun_p, 0, 0, 10, 2, false, 16 }, sfr_pun_p, 1 },
		{ { "pun, at the loop (rel32's bytes)", sfr_pun_p, 2, 3, 10, 1, false, 16 },
		  sfr_pun_p, 0 },
		{ { "pun, at the dec", sfr_pun_p, 6, 6, 10, 1, false, 16 }, sfr_pun_p, 0 },
		{ { "pun1, at the lea", (char *)sfr_pun1, 0, 0, 4, 5, false, 9 }, sfr_pun1_p, 1 },
		{ { "pun1, at the ret", sfr_pun1_p, 0, 9, 4, 5, false, 9 }, sfr_pun1_p, 1 },
	};
	UKT_EQ(sfr_pun(10, 2), 16);
	UKT_EQ(sfr_pun1(4, 5), 9);
	uint8_t orig[16], orig1[16];
	memcpy(orig, code_at(sfr_pun_p, 0), sizeof(orig));
	memcpy(orig1, code_at(sfr_pun1_p, 0), sizeof(orig1));
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = park_here;
	sa.sa_flags = SA_SIGINFO;
	UKT_EQ(sigaction(SIGUSR2, &sa, NULL), 0);

	for (size_t i = 0; i < sizeof(parks) / sizeof(parks[0]); i++) {
		cur_park = parks[i].k;
		char *at = parks[i].probe;
		cur_park.probe = (char *)code_at(cur_park.probe, 0);
		atomic_store(&parked, 0);
		atomic_store(&park_go, 0);
		park_result = 0;
		hits = 0;
		pthread_t th;
		UKT_EQ(pthread_create(&th, NULL, park_thread, NULL), 0);
		while (!atomic_load(&parked))
			sched_yield();
		struct kprobe kp = { .addr = (kprobe_opcode_t *)at, .pre_handler = count };
		UKT_EQ(register_kprobe(&kp), 0);
		wait_for_kprobe_optimizer();
		UKT_EXPECT_OPTIMIZED(&kp);
		if (at == sfr_pun_p)
			expect_punned(at, 2, orig);
		else
			expect_punned(at, 1, orig1);
		atomic_store(&park_go, 1);
		void *v;
		UKT_EQ(pthread_join(th, &v), 0);
		UKT_EQ((long)v, 1);
		if (park_result != cur_park.want)
			UKT_FAIL("%s: %ld, want %ld", cur_park.what, park_result, cur_park.want);
		UKT_EQ(hits, parks[i].hits);
		/* and every call after */
		hits = 0;
		UKT_EQ(sfr_pun(10, 4), 22);
		UKT_EQ(sfr_pun1(4, 6), 10);
		UKT_EQ(hits, 1);
		unregister_kprobe(&kp);
		if (memcmp(code_at(sfr_pun_p, 0), orig, sizeof(orig)) ||
		    memcmp(code_at(sfr_pun1_p, 0), orig1, sizeof(orig1)))
			UKT_FAIL("%s: the code is not what it was after unregister_kprobe", cur_park.what);
	}
}

/*
 * A probe in the bytes a punned jump reads (the loop's add, at +2): its
 * int3 would change the jump's target, so the punned probe goes back to
 * a breakpoint first, and is punned again once the other is gone - while
 * a thread calls the function all along: every result right, every call
 * of the punned probe counted.
 */
static atomic_int pun_stop;
static atomic_long pun_calls, pun_bad;
static void *pun_caller(void *arg)
{
	(void)arg;
	for (long n = 1; !atomic_load(&pun_stop); n = n % 7 + 1) {
		if (sfr_pun(n, n) != 4 * n)
			atomic_fetch_add(&pun_bad, 1);
		atomic_fetch_add(&pun_calls, 1);
	}
	return NULL;
}

static atomic_long hits_a, hits_b;
static int count_a(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	atomic_fetch_add(&hits_a, 1);
	return 0;
}
static int count_b(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	atomic_fetch_add(&hits_b, 1);
	return 0;
}

UKT_CASE_T(probe_in_a_punned_jumps_bytes_takes_its_jump_back, 60)
{
	uint8_t orig[16];
	memcpy(orig, code_at(sfr_pun_p, 0), sizeof(orig));
	struct kprobe a = { .addr = (kprobe_opcode_t *)sfr_pun_p, .pre_handler = count_a };
	UKT_EQ(register_kprobe(&a), 0);
	wait_for_kprobe_optimizer();
	UKT_EXPECT_OPTIMIZED(&a);
	expect_punned(sfr_pun_p, 2, orig);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, pun_caller, NULL), 0);
	for (int i = 0; i < 30; i++) {
		struct kprobe b = { .addr = (kprobe_opcode_t *)sfr_pun_loop, .pre_handler = count_b };
		UKT_EQ(register_kprobe(&b), 0);
		if (ukt_probe_flags(&a) & KPROBE_FLAG_OPTIMIZED)
			UKT_FAIL("round %d: the punned probe is still optimized beside a probe in its bytes", i);
		long hb = hits_b;
		UKT_EQ(sfr_pun(5, 3), 14);
		UKT_ASSERT(hits_b >= hb + 3);
		unregister_kprobe(&b);
		wait_for_kprobe_optimizer();
		UKT_EXPECT_OPTIMIZED(&a);
		expect_punned(sfr_pun_p, 2, orig);
	}
	atomic_store(&pun_stop, 1);
	UKT_EQ(pthread_join(th, NULL), 0);
	UKT_EQ(pun_bad, 0);
	UKT_ASSERT(pun_calls > 0);
	UKT_EQ(hits_a, pun_calls + 30);
	unregister_kprobe(&a);
	UKT_ASSERT(!memcmp(code_at(sfr_pun_p, 0), orig, sizeof(orig)));
}
