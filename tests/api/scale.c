/*
 * 100,000 probes at once: registered in one batch, every one fires
 * exactly once, all unregistered in one batch.  (The per-hit cost with
 * that many probes is a benchmark row, not a timed test.)
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <ukprobes.h>
#include "ukt.h"

#define N 100000

/* t_nops: N one-byte nops, then ret */
void t_nops(void);
__asm__(".text\n.globl t_nops\n.type t_nops,@function\nt_nops:\n"
	".rept 100000\nnop\n.endr\nret\n.size t_nops,.-t_nops\n");

static unsigned char *hit;
static atomic_long total;

static int pre(struct kprobe *p, struct pt_regs *r)
{
	(void)r;
	hit[(unsigned char *)p->addr - (unsigned char *)t_nops]++;
	total++;
	return 0;
}

UKT_CASE_T(hundred_thousand_probes, 300)
{
	struct kprobe *kp = calloc(N, sizeof(*kp));
	struct kprobe **v = calloc(N, sizeof(*v));
	hit = calloc(N, 1);
	UKT_ASSERT(kp && v && hit);
	for (int i = 0; i < N; i++) {
		kp[i].addr = (unsigned char *)t_nops + i;
		kp[i].pre_handler = pre;
		v[i] = &kp[i];
	}
	UKT_EQ(register_kprobes(v, N), 0);
	t_nops();
	UKT_EQ(total, N);
	for (int i = 0; i < N; i++)
		UKT_EQ(hit[i], 1);
	/* a second pass through the same sites */
	t_nops();
	UKT_EQ(total, 2 * N);
	unregister_kprobes(v, N);
	t_nops();
	UKT_EQ(total, 2 * N);
	/* and again: sites and slots are reused, memory stays bounded */
	for (int i = 0; i < N; i++)
		kp[i].addr = (unsigned char *)t_nops + i;
	UKT_EQ(register_kprobes(v, N), 0);
	t_nops();
	UKT_EQ(total, 3 * N);
	unregister_kprobes(v, N);
}
