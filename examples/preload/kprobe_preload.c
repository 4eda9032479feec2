/*
 * kprobe_preload: probe a real program from the inside, without changing
 * or rebuilding it.  Build as a shared object and preload it:
 *
 *   UKP_SYMBOL=libc.so.6:opendir LD_PRELOAD=build/examples/kprobe_preload.so ls /usr
 *
 * Its constructor registers a kprobe on UKP_SYMBOL (any "object:func" or
 * "func" of the program) before main() runs; the pre_handler prints the
 * first three arguments (and the first as a string when it reads as
 * one); the destructor prints the hit count and the probe list.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <ukprobes.h>

static struct kprobe kp;
static unsigned long hits;
static FILE *report;	/* a copy of stderr: programs may close theirs at exit */

/* Handlers run inside a signal handler: format by hand, write directly. */
struct out { char b[512]; size_t n; };

static void put(struct out *o, const char *s)
{
	while (*s && o->n < sizeof(o->b) - 1)
		o->b[o->n++] = *s++;
}

static void put_hex(struct out *o, unsigned long v)
{
	char t[19] = "0x";
	int i = 2, started = 0;
	for (int sh = 60; sh >= 0; sh -= 4) {
		int d = (v >> sh) & 15;
		if (d || started || sh == 0) {
			t[i++] = "0123456789abcdef"[d];
			started = 1;
		}
	}
	t[i] = 0;
	put(o, t);
}

static void put_string_arg(struct out *o, unsigned long addr)
{
	char s[48];
	if (copy_from_user_nofault(s, (const void *)addr, sizeof(s)))
		return;
	size_t n = 0;
	while (n < sizeof(s) && s[n] >= 0x20 && s[n] < 0x7f)
		n++;
	if (n == 0 || (n < sizeof(s) && s[n] != 0))
		return;		/* not a NUL-terminated printable string */
	put(o, " \"");
	s[n] = 0;
	put(o, s);
	put(o, "\"");
}

static int pre(struct kprobe *p, struct pt_regs *regs)
{
	struct out o = { .n = 0 };
	(void)p;
	hits++;
	put(&o, "  [kprobe_preload] ");
	put(&o, kp.symbol_name);
	put(&o, ": ip=");
	put_hex(&o, regs->ip);
	put(&o, " di=");
	put_hex(&o, regs->di);
	put_string_arg(&o, regs->di);
	put(&o, " si=");
	put_hex(&o, regs->si);
	put(&o, " dx=");
	put_hex(&o, regs->dx);
	put(&o, "\n");
	/* a raw system call: calling write() could hit a probe on write */
	syscall(SYS_write, 2, o.b, o.n);
	return 0;
}

__attribute__((constructor)) static void start(void)
{
	const char *sym = getenv("UKP_SYMBOL");
	int fd = fcntl(2, F_DUPFD_CLOEXEC, 100);
	report = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!report)
		report = stderr;
	kp.symbol_name = sym && *sym ? sym : "libc.so.6:opendir";
	kp.pre_handler = pre;
	int err = register_kprobe(&kp);
	if (err) {
		fprintf(stderr, "[kprobe_preload] register_kprobe(%s): %s\n",
			kp.symbol_name, strerror(-err));
		return;
	}
	fprintf(stderr, "[kprobe_preload] probing %s at %p in pid %d\n",
		kp.symbol_name, (void *)kp.addr, (int)getpid());
}

__attribute__((destructor)) static void stop(void)
{
	if (!kp.addr)
		return;
	fprintf(report, "[kprobe_preload] %s: %lu hits, %lu missed; kprobes_list():\n",
		kp.symbol_name, hits, kp.nmissed);
	kprobes_list(report);
	fflush(report);
	unregister_kprobe(&kp);
}
