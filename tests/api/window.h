/* SPDX-License-Identifier: MIT */
/*
 * Windows inside a hit, made exact for the api tests (nested.c,
 * longjmp.c): a page that is missing under userfaultfd, which the hit
 * reads, while a monitor thread has a signal delivered to the hit's
 * thread; the page's contents go in once the signal's handler has said
 * it ran (or never: fill NULL, for a handler that longjmps away).
 * userfaultfd needs privilege (vm.unprivileged_userfaultfd is 0 on
 * Debian); the tests run as root.
 */
#ifndef UKT_WINDOW_H
#define UKT_WINDOW_H

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "ukt.h"

struct ukt_window {
	char *page;
	long uffd;
	pid_t tid;		/* the hit's thread: the caller's */
	int sig;
	atomic_int *done;	/* set by the signal's handler */
	const void *fill;	/* a page's worth, or NULL */
	pthread_t monitor;
};

static inline void *ukt_window_monitor(void *a)
{
	struct ukt_window *w = a;
	struct uffd_msg m;
	struct pollfd pf = { (int)w->uffd, POLLIN, 0 };
	if (poll(&pf, 1, -1) != 1 || read((int)w->uffd, &m, sizeof(m)) != sizeof(m))
		return NULL;
	syscall(SYS_tgkill, getpid(), w->tid, w->sig);
	while (!atomic_load(w->done))
		usleep(100);
	if (w->fill) {
		struct uffdio_copy c = { (unsigned long)w->page, (unsigned long)w->fill, 4096, 0, 0 };
		ioctl((int)w->uffd, UFFDIO_COPY, &c);
	}
	return NULL;
}

/* page: one whose contents are dropped now (the caller kept them in
 * fill), or NULL for a fresh one */
static inline void ukt_window_open(struct ukt_window *w, char *page, int sig,
				   atomic_int *done, const void *fill)
{
	if (page) {
		UKT_EQ(madvise(page, 4096, MADV_DONTNEED), 0);
	} else {
		page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		UKT_ASSERT(page != MAP_FAILED);
	}
	w->page = page;
	w->tid = (pid_t)syscall(SYS_gettid);
	w->sig = sig;
	w->done = done;
	w->fill = fill;
	w->uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
	UKT_ASSERT(w->uffd >= 0);
	struct uffdio_api api = { .api = UFFD_API };
	UKT_EQ(ioctl((int)w->uffd, UFFDIO_API, &api), 0);
	struct uffdio_register reg = { { (unsigned long)page, 4096 }, UFFDIO_REGISTER_MODE_MISSING, 0 };
	UKT_EQ(ioctl((int)w->uffd, UFFDIO_REGISTER, &reg), 0);
	UKT_EQ(pthread_create(&w->monitor, NULL, ukt_window_monitor, w), 0);
}

static inline void ukt_window_close(struct ukt_window *w)
{
	UKT_EQ(pthread_join(w->monitor, NULL), 0);
}

#endif
