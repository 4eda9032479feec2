/* SPDX-License-Identifier: MIT */
/*
 * A probing library to preload into real programs (tests/quiet): kprobes
 * on malloc and free and a kretprobe on calloc, registered before main,
 * as a user's first try with ukprobes would.  It prints nothing, so the
 * program's output is its own.
 *
 * UKT_CHURN=N: a thread of its own also registers, optimises and removes
 * a probe on strlen N times, so batches keep coming while the program
 * runs.
 */
#include <stdlib.h>
#include <pthread.h>
#include <ukprobes.h>

static unsigned long hits;
static int count(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	__atomic_fetch_add(&hits, 1, __ATOMIC_RELAXED);
	return 0;
}
static int ret(struct kretprobe_instance *ri, struct pt_regs *r)
{
	(void)ri; (void)r;
	__atomic_fetch_add(&hits, 1, __ATOMIC_RELAXED);
	return 0;
}

static struct kprobe kmalloc = { .symbol_name = "libc.so.6:malloc", .pre_handler = count };
static struct kprobe kfree = { .symbol_name = "libc.so.6:free", .pre_handler = count };
static struct kretprobe kcalloc = {
	.kp = { .symbol_name = "libc.so.6:calloc" }, .handler = ret, .maxactive = 64,
};

static void *churn(void *arg)
{
	long n = (long)arg;
	for (long i = 0; i < n; i++) {
		struct kprobe kp = { .symbol_name = "libc.so.6:strlen", .pre_handler = count };
		if (register_kprobe(&kp))
			break;
		wait_for_kprobe_optimizer();
		unregister_kprobe(&kp);
	}
	return NULL;
}

__attribute__((constructor)) static void start(void)
{
	register_kprobe(&kmalloc);
	register_kprobe(&kfree);
	register_kretprobe(&kcalloc);
	const char *c = getenv("UKT_CHURN");
	pthread_t th;
	if (c && atol(c) > 0 && pthread_create(&th, NULL, churn, (void *)atol(c)) == 0)
		pthread_detach(th);
}
