/* SPDX-License-Identifier: MIT */
/*
 * ukt: the test harness.  A case is one macro; the runner (ukt_main.c)
 * forks every case into its own process, so a crash in one cannot hide
 * the others, and bounds each with a timeout.
 *
 *	UKT_CASE(register_twice) { ... UKT_ASSERT(x == 1); ... }
 */
#ifndef UKT_H
#define UKT_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ukt_case {
	const char *name;
	void (*fn)(void);
	unsigned timeout;	/* seconds; 0 = default */
};

#define UKT_CASE_T(name_, timeout_)					\
	static void ukt_fn_##name_(void);				\
	static const struct ukt_case ukt_case_##name_ = {		\
		#name_, ukt_fn_##name_, timeout_ };			\
	static const struct ukt_case *const ukt_ptr_##name_		\
	__attribute__((used, section("ukt_cases"))) = &ukt_case_##name_; \
	static void ukt_fn_##name_(void)

#define UKT_CASE(name_) UKT_CASE_T(name_, 0)

#define UKT_FAIL(...) do {						\
	fprintf(stderr, "  %s:%d: ", __FILE__, __LINE__);		\
	fprintf(stderr, __VA_ARGS__);					\
	fputc('\n', stderr);						\
	fflush(stderr);							\
	_exit(1);							\
} while (0)

#define UKT_ASSERT(cond) do {						\
	if (!(cond))							\
		UKT_FAIL("assertion failed: %s", #cond);		\
} while (0)

#define UKT_EQ(a, b) do {						\
	long long ukt_a_ = (long long)(a), ukt_b_ = (long long)(b);	\
	if (ukt_a_ != ukt_b_)						\
		UKT_FAIL("%s == %s: %lld != %lld (0x%llx != 0x%llx)",	\
			 #a, #b, ukt_a_, ukt_b_,			\
			 (unsigned long long)ukt_a_,			\
			 (unsigned long long)ukt_b_);			\
} while (0)

#define UKT_STREQ(a, b) do {						\
	const char *ukt_a_ = (a), *ukt_b_ = (b);			\
	if (strcmp(ukt_a_, ukt_b_))					\
		UKT_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, ukt_a_, ukt_b_); \
} while (0)

#include <unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>
#include <stddef.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <ukprobes.h>

/* seconds on the monotonic clock: the stress cases' time bounds */
/* write s into the file at path (appended, or over what it held) */
static inline void ukt_put(const char *path, const char *s, int append)
{
	int fd = open(path, O_WRONLY | (append ? O_APPEND : O_TRUNC));
	if (fd < 0)
		UKT_FAIL("%s: %s", path, strerror(errno));
	ssize_t n = write(fd, s, strlen(s));
	if (n != (ssize_t)strlen(s))
		UKT_FAIL("%s <- %s: %s", path, s, strerror(errno));
	close(fd);
}

static inline double ukt_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* xorshift64: the stress cases' reproducible pseudo-random choices */
static inline uint64_t ukt_xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/*
 * A label inside a test's asm function, by name (the tests link with
 * -rdynamic).  Taking its address in C would put a lea of it in the
 * program, and jump optimisation rightly counts every code address the
 * program makes as a place an indirect jump may land: a region over the
 * label could no longer be optimised.
 */
static inline char *ukt_label(const char *name)
{
	char *a = dlsym(RTLD_DEFAULT, name);
	if (!a) {
		fprintf(stderr, "  no symbol %s: %s\n", name, dlerror());
		_exit(1);
	}
	return a;
}

/*
 * Stress tests count each kind of broken invariant as they run and check
 * them at the end: each count that is not zero is printed with its name,
 * and the case fails if any is.
 */
static inline void ukt_expect_no_errors(const char *const *name,
					unsigned long *count, int n)
{
	unsigned long total = 0;
	for (int k = 0; k < n; k++) {
		unsigned long c = __atomic_load_n(&count[k], __ATOMIC_RELAXED);
		if (c)
			fprintf(stderr, "  %lu x %s\n", c, name[k]);
		total += c;
	}
	UKT_EQ(total, 0);
}

/* ---- probes ---------------------------------------------------------------- */

/* kprobes_list() into buf, NUL-terminated */
static inline void ukt_list_to(char *buf, size_t n)
{
	memset(buf, 0, n);
	FILE *f = fmemopen(buf, n, "w");
	UKT_ASSERT(f);
	UKT_EQ(kprobes_list(f), 0);
	fclose(f);
}

/* the program's own handler h for sig, with these sa_flags (SA_ONSTACK,
 * SA_NODEFER...), nothing blocked: sigaction's answer */
static inline int ukt_on_signal(int sig, void (*h)(int), int flags)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = h;
	sa.sa_flags = flags;
	return sigaction(sig, &sa, NULL);
}

/* the same for an SA_SIGINFO handler */
static inline int ukt_on_signal_info(int sig, void (*h)(int, siginfo_t *, void *), int flags)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = h;
	sa.sa_flags = SA_SIGINFO | flags;
	return sigaction(sig, &sa, NULL);
}

/* the program's own SA_SIGINFO handler for sig: sigaction's answer */
static inline int ukt_install_handler(int sig, void (*h)(int, siginfo_t *, void *))
{
	return ukt_on_signal_info(sig, h, 0);
}

/* From now on the system call nr fails with err in this process (a
 * seccomp filter: a sandbox that forbids it); everything else runs. */
static inline void ukt_deny_syscall(long nr, int err)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
	UKT_EQ(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	UKT_EQ(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog), 0);
}

/* p->flags as another thread (the optimizer) last wrote them */
static inline unsigned ukt_probe_flags(const struct kprobe *p)
{
	return __atomic_load_n(&p->flags, __ATOMIC_ACQUIRE);
}

#define UKT_EXPECT_OPTIMIZED(p) do {						\
	unsigned f_ = ukt_probe_flags(p);					\
	if (!(f_ & KPROBE_FLAG_OPTIMIZED))					\
		UKT_FAIL("%s at %p is not optimized (flags %#x)", #p,		\
			 (void *)(p)->addr, f_);				\
} while (0)

#define UKT_EXPECT_NOT_OPTIMIZED(p) do {					\
	unsigned f_ = ukt_probe_flags(p);					\
	if (f_ & KPROBE_FLAG_OPTIMIZED)						\
		UKT_FAIL("%s at %p is optimized (flags %#x)", #p,		\
			 (void *)(p)->addr, f_);				\
} while (0)

/* fn(arg) on a thread, which must end within 20 s: a grace period that
 * never ends (a thread left inside a hit) fails the case, not its
 * timeout */
struct ukt_ends { void *(*fn)(void *); void *arg; atomic_int done; };

static inline void *ukt_ends_run(void *a)
{
	struct ukt_ends *e = a;
	e->fn(e->arg);
	atomic_store(&e->done, 1);
	return NULL;
}

static inline void ukt_ends_within_20s(void *(*fn)(void *), void *arg)
{
	static struct ukt_ends e;	/* outlives a thread that hangs */
	e.fn = fn;
	e.arg = arg;
	atomic_store(&e.done, 0);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, ukt_ends_run, &e), 0);
	for (double t0 = ukt_now(); !atomic_load(&e.done) && ukt_now() - t0 < 20;)
		usleep(1000);
	if (!atomic_load(&e.done))
		UKT_FAIL("still waiting after 20 s (a grace period that does not end?)");
	UKT_EQ(pthread_join(th, NULL), 0);
}

static inline void *ukt_unregister_kprobe_fn(void *p)
{
	unregister_kprobe(p);
	return NULL;
}

/* unregister_kprobe(p) from another thread ends: no thread is left
 * inside a hit (its grace period waits for every one) */
static inline void ukt_unregister_ends(struct kprobe *p)
{
	ukt_ends_within_20s(ukt_unregister_kprobe_fn, p);
}

#endif
