/*
 * The kprobe API as users rely on it: handlers, registers, order,
 * recursion, batches, enable/disable, the knob, the list, every error
 * code, faults and signals, dlopen/dlclose, copy_from_user_nofault.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fenv.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>
#include <ukprobes.h>
#include "ukt.h"
#include "targets.h"
#include "targets.inc"

static atomic_long hits, post_hits, fault_hits;

static int count_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p; (void)regs;
	hits++;
	return 0;
}

static void count_post(struct kprobe *p, struct pt_regs *regs, unsigned long f)
{
	(void)p; (void)regs; (void)f;
	post_hits++;
}

/* ---- basics ---------------------------------------------------------------- */

UKT_CASE(pre_handler_sees_probe_point)
{
	static struct pt_regs seen;
	struct kprobe kp = { .addr = (void *)t_add };
	int pre(struct kprobe *p, struct pt_regs *r);
	kp.pre_handler = pre;
	UKT_EQ(register_kprobe(&kp), 0);
	long v = t_add(40, 2);
	UKT_EQ(v, 42);
	unregister_kprobe(&kp);
	(void)seen;
}
int pre(struct kprobe *p, struct pt_regs *r)
{
	/* ip is the probed address itself; args are where SysV puts them */
	if (r->ip != (unsigned long)p->addr || r->di != 40 || r->si != 2 ||
	    regs_get_kernel_argument(r, 0) != 40 || regs_get_kernel_argument(r, 1) != 2 ||
	    instruction_pointer(r) != r->ip || user_stack_pointer(r) != r->sp ||
	    *(unsigned long *)r->sp < 0x1000)	/* return address on top */
		abort();
	hits++;
	return 0;
}

UKT_CASE(symbol_name_resolves_and_sets_addr)
{
	struct kprobe kp = { .symbol_name = "t_sub", .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ((unsigned long)kp.addr, (unsigned long)t_sub);
	UKT_EQ(t_sub(5, 3), 2);
	UKT_EQ(hits, 1);
	unregister_kprobe(&kp);
	UKT_EQ(t_sub(5, 3), 2);
	UKT_EQ(hits, 1);
}

static __attribute__((noinline)) int static_func(int x)
{
	__asm__ volatile("");
	return x * 7;
}

UKT_CASE(static_function_of_main_executable_from_symtab)
{
	struct kprobe kp = { .symbol_name = "static_func", .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ((unsigned long)kp.addr, (unsigned long)static_func);
	UKT_EQ(static_func(6), 42);
	UKT_EQ(hits, 1);
	unregister_kprobe(&kp);
}

UKT_CASE(object_colon_symbol_and_offset)
{
	struct kprobe kp = { .symbol_name = "libc.so.6:qsort", .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ((unsigned long)kp.addr, (unsigned long)dlsym(RTLD_DEFAULT, "qsort"));
	int a[] = { 3, 1, 2 };
	int cmp(const void *x, const void *y);
	qsort(a, 3, sizeof(int), cmp);
	UKT_EQ(hits, 1);
	UKT_ASSERT(a[0] == 1 && a[1] == 2 && a[2] == 3);
	unregister_kprobe(&kp);

	/* offset: t_dump's probe point is 6 pushes in; push %r12.. are 2 bytes */
	struct kprobe k2 = { .symbol_name = "t_dump",
			     .offset = (unsigned)(t_dump_probe - (char *)t_dump),
			     .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&k2), 0);
	UKT_EQ((unsigned long)k2.addr, (unsigned long)t_dump_probe);
	t_dump();
	UKT_EQ(hits, 2);
	unregister_kprobe(&k2);
}
int cmp(const void *x, const void *y) { return *(const int *)x - *(const int *)y; }

/* ---- error codes ------------------------------------------------------------- */

static __attribute__((noinline)) int forbidden(int x)
{
	__asm__ volatile("");
	return x + 1;
}
NOKPROBE_SYMBOL(forbidden);

static long some_data = 5;

UKT_CASE(error_codes)
{
	struct kprobe kp;

	memset(&kp, 0, sizeof(kp));
	kp.addr = (void *)t_add;
	kp.symbol_name = "t_add";
	UKT_EQ(register_kprobe(&kp), -EINVAL);		/* both */
	memset(&kp, 0, sizeof(kp));
	UKT_EQ(register_kprobe(&kp), -EINVAL);		/* neither */
	UKT_EQ(register_kprobe(NULL), -EINVAL);
	kp.symbol_name = "no_such_function_anywhere";
	UKT_EQ(register_kprobe(&kp), -ENOENT);
	kp.symbol_name = "libnosuch.so.1:malloc";
	UKT_EQ(register_kprobe(&kp), -ENOENT);
	kp.symbol_name = "libc.so.6:no_such_function";
	UKT_EQ(register_kprobe(&kp), -ENOENT);
	memset(&kp, 0, sizeof(kp));
	kp.addr = (void *)(t_dump_probe + 1 + 2);	/* inside mov %rax,x(%rip) */
	UKT_EQ(register_kprobe(&kp), -EILSEQ);
	kp.addr = NULL;
	kp.symbol_name = "t_sub";
	kp.offset = 1;					/* inside mov %rdi,%rax */
	UKT_EQ(register_kprobe(&kp), -EILSEQ);
	memset(&kp, 0, sizeof(kp));
	kp.addr = (void *)register_kprobe;		/* ukprobes itself */
	UKT_EQ(register_kprobe(&kp), -EINVAL);
	kp.addr = (void *)forbidden;			/* NOKPROBE_SYMBOL */
	UKT_EQ(register_kprobe(&kp), -EINVAL);
	kp.addr = (void *)((char *)forbidden + 1);
	UKT_EQ(register_kprobe(&kp), -EINVAL);
	kp.addr = (void *)dlsym(RTLD_DEFAULT, "__errno_location"); /* trap path */
	UKT_EQ(register_kprobe(&kp), -EINVAL);
	kp.addr = (void *)&some_data;			/* not code */
	UKT_EQ(register_kprobe(&kp), -EINVAL);
	UKT_EQ(forbidden(1), 2);

	memset(&kp, 0, sizeof(kp));
	kp.addr = (void *)t_add;
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(register_kprobe(&kp), -EINVAL);		/* twice */
	unregister_kprobe(&kp);
	UKT_EQ((unsigned long)kp.addr, (unsigned long)t_add);
	unregister_kprobe(&kp);				/* not registered: clears addr */
	UKT_ASSERT(kp.addr == NULL);
	UKT_EQ(disable_kprobe(&kp), -EINVAL);
	UKT_EQ(enable_kprobe(&kp), -EINVAL);

	UKT_EQ(register_kretprobe(NULL), -EINVAL);
	struct kretprobe rp = { .kp.addr = (void *)t_add, .kp.symbol_name = "t_add" };
	UKT_EQ(register_kretprobe(&rp), -EINVAL);	/* both */
	UKT_ASSERT(rp.__ukp_priv[0] == NULL);		/* nothing kept */
}

UKT_CASE(signal_return_trampoline_is_blacklisted)
{
	struct sigaction sa;
	struct kprobe kp = { .pre_handler = count_pre };
	/* make ukprobes install its handlers, then ask for the restorer */
	kp.addr = (void *)t_add;
	UKT_EQ(register_kprobe(&kp), 0);
	unregister_kprobe(&kp);
	UKT_EQ(sigaction(SIGTRAP, NULL, &sa), 0);
	UKT_ASSERT(sa.sa_restorer != NULL);
	memset(&kp, 0, sizeof(kp));
	kp.addr = (void *)sa.sa_restorer;
	UKT_EQ(register_kprobe(&kp), -EINVAL);
}

/* ---- several probes, order, batches ------------------------------------------- */

static char order[16];
static atomic_int norder;
static int pre_a(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; order[norder++] = 'a'; return 0; }
static int pre_b(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; order[norder++] = 'b'; return 0; }
static int pre_c(struct kprobe *p, struct pt_regs *r) { (void)p; (void)r; order[norder++] = 'c'; return 0; }

UKT_CASE(several_probes_fire_in_registration_order)
{
	struct kprobe a = { .addr = (void *)t_add, .pre_handler = pre_a };
	struct kprobe b = { .symbol_name = "t_add", .pre_handler = pre_b };
	struct kprobe c = { .addr = (void *)t_add, .pre_handler = pre_c };
	UKT_EQ(register_kprobe(&a), 0);
	UKT_EQ(register_kprobe(&b), 0);
	UKT_EQ(register_kprobe(&c), 0);
	UKT_EQ(t_add(1, 2), 3);
	UKT_STREQ(order, "abc");
	unregister_kprobe(&b);
	b.addr = NULL;
	UKT_EQ(register_kprobe(&b), 0);
	UKT_EQ(t_add(1, 2), 3);
	UKT_STREQ(order, "abcacb");
	struct kprobe *all[] = { &a, &b, &c };
	unregister_kprobes(all, 3);
	UKT_EQ(t_add(1, 2), 3);
	UKT_EQ(norder, 6);
}

UKT_CASE(batch_registration_is_all_or_nothing)
{
	struct kprobe a = { .addr = (void *)t_add, .pre_handler = count_pre };
	struct kprobe b = { .addr = (void *)t_sub, .pre_handler = count_pre };
	struct kprobe bad = { .symbol_name = "no_such_symbol_xyz", .pre_handler = count_pre };
	struct kprobe *kps[] = { &a, &b, &bad };
	UKT_EQ(register_kprobes(kps, 3), -ENOENT);
	UKT_EQ(t_add(1, 1) + t_sub(1, 1), 2);
	UKT_EQ(hits, 0);
	char buf[256] = "";
	FILE *f = fmemopen(buf, sizeof(buf), "w");
	UKT_EQ(kprobes_list(f), 0);
	fclose(f);
	UKT_STREQ(buf, "");
	/* the same struct twice in one batch */
	struct kprobe *dup[] = { &a, &a };
	UKT_EQ(register_kprobes(dup, 2), -EINVAL);
	UKT_EQ(t_add(1, 1), 2);
	UKT_EQ(hits, 0);
	/* and a good batch */
	a.addr = (void *)t_add;
	struct kprobe *good[] = { &a, &b };
	UKT_EQ(register_kprobes(good, 2), 0);
	UKT_EQ(t_add(1, 1) + t_sub(1, 1), 2);
	UKT_EQ(hits, 2);
	unregister_kprobes(good, 2);
}

/* ---- handlers change registers ------------------------------------------------ */

static int set_all_regs(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	unsigned long *v[] = { &r->ax, &r->bx, &r->cx, &r->dx, &r->si, &r->di,
			       &r->bp, &r->r8, &r->r9, &r->r10, &r->r11, &r->r12,
			       &r->r13, &r->r14, &r->r15 };
	for (int i = 0; i < 15; i++)
		*v[i] = 0x1000 + i;
	r->flags |= 1;	/* CF */
	return 0;
}

static void set_all_regs_post(struct kprobe *p, struct pt_regs *r, unsigned long f)
{
	(void)f;
	set_all_regs(p, r);
	r->flags &= ~1UL;
	r->flags |= 0x80;	/* SF */
}

static void check_dump(unsigned long flag_set, unsigned long flag_clear)
{
	for (int i = 0; i < 15; i++)
		UKT_EQ(t_dump_out[i], 0x1000 + i);
	UKT_ASSERT(t_dump_out[15] & flag_set);
	UKT_ASSERT(!(t_dump_out[15] & flag_clear));
}

UKT_CASE(pre_handler_changes_every_register)
{
	struct kprobe kp = { .addr = (void *)t_dump_probe, .pre_handler = set_all_regs };
	UKT_EQ(register_kprobe(&kp), 0);
	t_dump();
	check_dump(1, 0);
	unregister_kprobe(&kp);
}

UKT_CASE(post_handler_changes_every_register)
{
	struct kprobe kp = { .addr = (void *)t_dump_probe, .post_handler = set_all_regs_post };
	UKT_EQ(register_kprobe(&kp), 0);
	t_dump();
	check_dump(0x80, 1);
	unregister_kprobe(&kp);
}

static int redirect(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	r->ip = (unsigned long)t_sub;
	return 1;
}

UKT_CASE(pre_handler_redirects_ip)
{
	struct kprobe kp = { .addr = (void *)t_add, .pre_handler = redirect,
			     .post_handler = count_post };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(t_add(10, 3), 7);	/* ran t_sub instead */
	UKT_EQ(post_hits, 0);		/* no post_handler after a redirect */
	unregister_kprobe(&kp);
	UKT_EQ(t_add(10, 3), 13);
}

static struct pt_regs post_regs;
static void save_post(struct kprobe *p, struct pt_regs *r, unsigned long f)
{
	(void)p; (void)f;
	post_regs = *r;
	post_hits++;
}

UKT_CASE(post_handler_sees_state_after_the_instruction)
{
	struct kprobe kp = { .addr = (void *)t_add, .post_handler = save_post };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(t_add(20, 22), 42);
	UKT_EQ(post_hits, 1);
	UKT_EQ(post_regs.ax, 42);
	UKT_EQ(post_regs.ip, (unsigned long)t_add + 4);	/* lea is 4 bytes */
	unregister_kprobe(&kp);

	/* jcc taken / not taken */
	struct kprobe kj = { .addr = (void *)t_jcc_insn, .post_handler = save_post };
	UKT_EQ(register_kprobe(&kj), 0);
	UKT_EQ(t_jcc(0), 2);
	unsigned long taken = post_regs.ip;
	UKT_EQ(t_jcc(5), 1);
	UKT_EQ(post_regs.ip, (unsigned long)t_jcc_insn + 2);
	UKT_ASSERT(taken != post_regs.ip && taken > (unsigned long)t_jcc_insn);
	unregister_kprobe(&kj);

	/* call: ip = callee, the return address pushed is the original next */
	struct kprobe kc = { .addr = (void *)t_call_insn, .post_handler = save_post };
	UKT_EQ(register_kprobe(&kc), 0);
	UKT_EQ(t_call(41), 42);
	UKT_EQ(*(unsigned long *)post_regs.sp, (unsigned long)t_call_insn + 5);
	unregister_kprobe(&kc);

	/* ret (emulated): ip = the return address */
	struct kprobe kr = { .addr = (void *)((char *)t_add + 4), .post_handler = save_post };
	UKT_EQ(register_kprobe(&kr), 0);
	UKT_EQ(t_add(1, 1), 2);
	UKT_ASSERT(post_regs.ip != 0);
	Dl_info di;
	UKT_ASSERT(dladdr((void *)post_regs.ip, &di));
	unregister_kprobe(&kr);
	UKT_EQ(post_hits, 5);
}

UKT_CASE(syscall_out_of_line_leaves_rcx_as_in_place)
{
	struct kprobe kp = { .addr = (void *)t_sys_insn, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(t_sys(), (unsigned long)t_sys_next);
	UKT_EQ(hits, 1);
	kp.post_handler = count_post;
	unregister_kprobe(&kp);
	kp.addr = (void *)t_sys_insn;
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(t_sys(), (unsigned long)t_sys_next);
	UKT_EQ(post_hits, 1);
	unregister_kprobe(&kp);
}

/* ---- state the handlers must not disturb -------------------------------------- */

static int clobber_vectors(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	volatile double d = 1.0;
	for (int i = 0; i < 10; i++)
		d = d * 3.7 + 1.1;
	__asm__ volatile("vpcmpeqd %%ymm0,%%ymm0,%%ymm0\n vpcmpeqd %%ymm1,%%ymm1,%%ymm1\n"
			 "vpcmpeqd %%ymm7,%%ymm7,%%ymm7\n vpcmpeqd %%ymm15,%%ymm15,%%ymm15"
			 ::: "xmm0", "xmm1", "xmm7", "xmm15");
	fesetround(FE_UPWARD);
	unsigned short cw = 0x0c7f;	/* x87: round toward zero */
	__asm__ volatile("fldcw %0" :: "m"(cw));
	errno = 4321;
	hits++;
	return 0;
}

static void clobber_vectors_post(struct kprobe *p, struct pt_regs *r, unsigned long f)
{
	(void)f;
	clobber_vectors(p, r);
}

static void vector_state_survives(bool post)
{
	struct kprobe kv = { .addr = (void *)t_vec };
	struct kprobe ky = { .addr = (void *)t_ymm_probe };
	if (post) {
		kv.post_handler = ky.post_handler = clobber_vectors_post;
	} else {
		kv.pre_handler = ky.pre_handler = clobber_vectors;
	}
	UKT_EQ(register_kprobe(&kv), 0);
	UKT_EQ(register_kprobe(&ky), 0);
	errno = 77;
	UKT_ASSERT(t_vec(2.5) == 2.5);
	UKT_EQ(errno, 77);
	unsigned char in[32], out[32];
	for (int i = 0; i < 32; i++)
		in[i] = (unsigned char)(i * 7 + 1);
	t_ymm(in, out);
	UKT_ASSERT(!memcmp(in, out, 32));
	UKT_EQ(fegetround(), FE_TONEAREST);
	unsigned short cw;
	__asm__ volatile("fnstcw %0" : "=m"(cw));
	UKT_EQ(cw & 0x0f00, 0x0300);	/* default precision and rounding */
	UKT_EQ(hits, 2);
	unregister_kprobe(&kv);
	unregister_kprobe(&ky);
}

UKT_CASE(vector_x87_mxcsr_errno_survive_pre_handler) { vector_state_survives(false); }
UKT_CASE(vector_x87_mxcsr_errno_survive_post_handler) { vector_state_survives(true); }

/* A post_handler that keeps to the general registers: the post
 * trampoline saves no vector state for it, and its own path leaves the
 * live vector values alone too; then one that does not joins it. */
UKT_CASE(vector_state_survives_lean_post_handler)
{
	struct kprobe kv = { .addr = (void *)t_vec, .post_handler = count_post };
	struct kprobe ky = { .addr = (void *)t_ymm_probe, .post_handler = count_post };
	struct kprobe kd = { .addr = (void *)t_ymm_probe, .post_handler = clobber_vectors_post };
	UKT_EQ(register_kprobe(&kv), 0);
	UKT_EQ(register_kprobe(&ky), 0);
	unsigned char in[32], out[32];
	for (int i = 0; i < 32; i++)
		in[i] = (unsigned char)(i * 5 + 3);
	for (int round = 0; round < 2; round++) {
		for (int k = 0; k < 100; k++) {
			errno = 77;
			UKT_ASSERT(t_vec(2.5 + k) == 2.5 + k);
			UKT_EQ(errno, 77);
			memset(out, 0, sizeof(out));
			t_ymm(in, out);
			UKT_ASSERT(!memcmp(in, out, 32));
		}
		if (round == 0)
			UKT_EQ(register_kprobe(&kd), 0);
	}
	UKT_EQ(post_hits, 400);
	UKT_EQ(hits, 100);
	UKT_EQ(fegetround(), FE_TONEAREST);
	unregister_kprobe(&kd);
	unregister_kprobe(&ky);
	unregister_kprobe(&kv);
}

/* ---- recursion ------------------------------------------------------------------- */

static long nested_result;
static int recurse(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	hits++;
	nested_result = t_add(100, 1);	/* hits this probe again: missed */
	return 0;
}

UKT_CASE(recursion_counts_nmissed)
{
	struct kprobe kp = { .addr = (void *)t_add, .pre_handler = recurse };
	struct kprobe k2 = { .addr = (void *)t_add, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(register_kprobe(&k2), 0);
	UKT_EQ(t_add(1, 2), 3);
	UKT_EQ(nested_result, 101);
	UKT_EQ(hits, 2);		/* recurse once, count_pre once (outer) */
	UKT_EQ(kp.nmissed, 1);
	UKT_EQ(k2.nmissed, 1);
	UKT_EQ(t_add(1, 2), 3);
	UKT_EQ(kp.nmissed, 2);
	unregister_kprobe(&kp);
	unregister_kprobe(&k2);
}

/* ---- disable, enable, knob, list -------------------------------------------- */

UKT_CASE(disable_enable_and_the_global_knob)
{
	struct kprobe a = { .addr = (void *)t_add, .pre_handler = count_pre };
	struct kprobe b = { .addr = (void *)t_sub, .pre_handler = count_pre,
			    .flags = KPROBE_FLAG_DISABLED };
	char buf[1024], want[1024];
	UKT_EQ(register_kprobe(&a), 0);
	UKT_EQ(register_kprobe(&b), 0);		/* registered disabled */
	UKT_EQ(b.flags, KPROBE_FLAG_DISABLED);
	t_add(1, 1); t_sub(1, 1);
	UKT_EQ(hits, 1);
	ukt_list_to(buf, sizeof(buf));
	snprintf(want, sizeof(want), "%016lx  k  t_add+0x0\n%016lx  k  t_sub+0x0 [DISABLED]\n",
		 (unsigned long)t_add, (unsigned long)t_sub);
	UKT_STREQ(buf, want);

	UKT_EQ(enable_kprobe(&b), 0);
	UKT_EQ(b.flags, 0);
	t_add(1, 1); t_sub(1, 1);
	UKT_EQ(hits, 3);
	UKT_EQ(disable_kprobe(&a), 0);
	t_add(1, 1); t_sub(1, 1);
	UKT_EQ(hits, 4);

	UKT_EQ(kprobes_get_enabled(), 1);
	UKT_EQ(kprobes_set_enabled(0), 0);
	UKT_EQ(kprobes_get_enabled(), 0);
	t_add(1, 1); t_sub(1, 1);
	UKT_EQ(hits, 4);
	UKT_EQ(a.flags, KPROBE_FLAG_DISABLED);	/* own state unchanged */
	UKT_EQ(b.flags, 0);
	UKT_EQ(kprobes_set_enabled(1), 0);
	t_add(1, 1); t_sub(1, 1);
	UKT_EQ(hits, 5);			/* a stays disabled */
	UKT_EQ(enable_kprobe(&a), 0);
	t_add(1, 1);
	UKT_EQ(hits, 6);
	unregister_kprobe(&a);
	unregister_kprobe(&b);
}

UKT_CASE(list_names_shared_objects)
{
	struct kprobe kp = { .symbol_name = "libc.so.6:qsort", .offset = 0 };
	char buf[512], want[512];
	UKT_EQ(register_kprobe(&kp), 0);
	ukt_list_to(buf, sizeof(buf));
	snprintf(want, sizeof(want), "%016lx  k  qsort+0x0 [libc.so.6]\n", (unsigned long)kp.addr);
	UKT_STREQ(buf, want);
	unregister_kprobe(&kp);
}

/* ---- faults --------------------------------------------------------------------- */

static int last_trapnr = -1;
static int fault_take(struct kprobe *p, struct pt_regs *r, int trapnr)
{
	(void)p; (void)r;
	last_trapnr = trapnr;
	fault_hits++;
	return 1;
}
static int fault_pass(struct kprobe *p, struct pt_regs *r, int trapnr)
{
	(void)p; (void)r;
	last_trapnr = trapnr;
	fault_hits++;
	return 0;
}

static volatile long *volatile bad_ptr = (long *)0x18;
static int pre_faults(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	hits++;
	return (int)*bad_ptr;
}

UKT_CASE(fault_in_handler_goes_to_fault_handler)
{
	struct kprobe kp = { .addr = (void *)t_add, .pre_handler = pre_faults,
			     .fault_handler = fault_take };
	UKT_EQ(register_kprobe(&kp), 0);
	for (int i = 0; i < 3; i++)
		UKT_EQ(t_add(2, 3), 5);		/* abandoned handler, code goes on */
	UKT_EQ(hits, 3);
	UKT_EQ(fault_hits, 3);
	UKT_EQ(last_trapnr, 14);
	UKT_EQ(kp.nmissed, 0);
	unregister_kprobe(&kp);
}

static sigjmp_buf prog_jb;
static volatile int prog_sig;
static volatile unsigned long prog_addr, prog_ip;
static void prog_handler(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	prog_sig = sig;
	prog_addr = (unsigned long)si->si_addr;
	prog_ip = uc->uc_mcontext.gregs[REG_RIP];
	siglongjmp(prog_jb, 1);
}

static void install_prog_handler(int sig)
{
	ukt_install_handler(sig, prog_handler);
}

UKT_CASE(unhandled_fault_in_handler_reaches_program_handler)
{
	install_prog_handler(SIGSEGV);
	struct kprobe kp = { .addr = (void *)t_add, .pre_handler = pre_faults,
			     .fault_handler = fault_pass };
	UKT_EQ(register_kprobe(&kp), 0);
	if (!sigsetjmp(prog_jb, 1)) {
		t_add(1, 1);
		UKT_FAIL("the fault vanished");
	}
	UKT_EQ(prog_sig, SIGSEGV);
	UKT_EQ(prog_addr, 0x18);
	UKT_EQ(prog_ip, (unsigned long)t_add);	/* the probed instruction */
	UKT_EQ(fault_hits, 1);
	/* the thread left the hit path cleanly: probes keep firing */
	kp.pre_handler = count_pre;
	long before = hits;
	UKT_EQ(t_add(1, 1), 2);
	UKT_EQ(hits, before + 1);
	UKT_EQ(kp.nmissed, 0);
	unregister_kprobe(&kp);
}

/* a program handler that returns: the thread goes on where the fault
 * was, here the probed instruction with the probed registers */
static void prog_handler_returns(int sig, siginfo_t *si, void *ctx)
{
	(void)ctx;
	prog_sig = sig;
	prog_addr = (unsigned long)si->si_addr;
}

UKT_CASE(handler_fault_back_from_program_handler_skips_rest_of_hit)
{
	UKT_EQ(ukt_install_handler(SIGSEGV, prog_handler_returns), 0);
	struct kprobe a = { .addr = (void *)t_add, .pre_handler = pre_faults,
			    .fault_handler = fault_pass };
	struct kprobe b = { .addr = (void *)t_add, .pre_handler = count_pre,
			    .post_handler = count_post };
	struct kprobe c = { .addr = (void *)t_add, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&b), 0);	/* handlers run in this order */
	UKT_EQ(register_kprobe(&a), 0);
	UKT_EQ(register_kprobe(&c), 0);
	UKT_EQ(t_add(2, 3), 5);		/* the probed code went on */
	UKT_EQ(prog_sig, SIGSEGV);
	UKT_EQ(prog_addr, 0x18);
	UKT_EQ(fault_hits, 1);
	/* b's pre ran, a's ran and faulted; c's pre and b's post_handler
	 * were skipped: the list may have been freed meanwhile */
	UKT_EQ(hits, 2);
	UKT_EQ(post_hits, 0);
	UKT_EQ(a.nmissed + b.nmissed + c.nmissed, 0);
	/* the next hit runs normally */
	unregister_kprobe(&a);
	UKT_EQ(t_add(4, 5), 9);
	UKT_EQ(hits, 4);
	UKT_EQ(post_hits, 1);
	unregister_kprobe(&b);
	unregister_kprobe(&c);
}

UKT_CASE(fault_in_out_of_line_copy_looks_unprobed)
{
	install_prog_handler(SIGSEGV);
	struct kprobe kp = { .addr = (void *)t_load_insn, .pre_handler = count_pre,
			     .fault_handler = fault_pass };
	UKT_EQ(register_kprobe(&kp), 0);
	long x = 9;
	UKT_EQ(t_load(&x), 9);
	if (!sigsetjmp(prog_jb, 1)) {
		t_load((long *)0x28);
		UKT_FAIL("no fault");
	}
	UKT_EQ(prog_sig, SIGSEGV);
	UKT_EQ(prog_addr, 0x28);
	UKT_EQ(prog_ip, (unsigned long)t_load_insn);
	UKT_EQ(fault_hits, 1);
	UKT_EQ(last_trapnr, 14);
	UKT_EQ(hits, 2);
	/* with a post_handler (the other copy) */
	unregister_kprobe(&kp);
	kp.addr = (void *)t_load_insn;
	kp.post_handler = count_post;
	UKT_EQ(register_kprobe(&kp), 0);
	if (!sigsetjmp(prog_jb, 1)) {
		t_load((long *)0x38);
		UKT_FAIL("no fault");
	}
	UKT_EQ(prog_addr, 0x38);
	UKT_EQ(prog_ip, (unsigned long)t_load_insn);
	UKT_EQ(post_hits, 0);
	UKT_EQ(t_load(&x), 9);
	UKT_EQ(post_hits, 1);
	unregister_kprobe(&kp);
}

UKT_CASE(divide_error_in_copy_is_sigfpe_at_original_ip)
{
	install_prog_handler(SIGFPE);
	struct kprobe kp = { .addr = (void *)t_div_insn, .pre_handler = count_pre,
			     .fault_handler = fault_pass };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(t_div(42, 6), 7);
	if (!sigsetjmp(prog_jb, 1)) {
		t_div(1, 0);
		UKT_FAIL("no fault");
	}
	UKT_EQ(prog_sig, SIGFPE);
	UKT_EQ(prog_ip, (unsigned long)t_div_insn);
	UKT_EQ(prog_addr, (unsigned long)t_div_insn);
	UKT_EQ(last_trapnr, 0);
	unregister_kprobe(&kp);
}

UKT_CASE(fault_without_program_handler_kills_with_same_signal)
{
	pid_t pid = fork();
	if (pid == 0) {
		struct kprobe kp = { .addr = (void *)t_load_insn, .pre_handler = count_pre };
		if (register_kprobe(&kp))
			_exit(3);
		t_load((long *)0x48);
		_exit(4);
	}
	int st;
	UKT_EQ(waitpid(pid, &st, 0), pid);
	UKT_ASSERT(WIFSIGNALED(st));
	UKT_EQ(WTERMSIG(st), SIGSEGV);
}

static volatile int trap_seen;
static volatile unsigned long trap_ip;
static void prog_trap(int sig, siginfo_t *si, void *ctx)
{
	(void)sig; (void)si;
	trap_seen++;
	trap_ip = ((ucontext_t *)ctx)->uc_mcontext.gregs[REG_RIP];
}

UKT_CASE(sigtrap_not_ours_reaches_program_handler)
{
	ukt_install_handler(SIGTRAP, prog_trap);
	struct kprobe kp = { .addr = (void *)t_add, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(t_int3(), 7);			/* the program's own int3 */
	UKT_EQ(trap_seen, 1);
	UKT_EQ(trap_ip, (unsigned long)t_int3_insn + 1);
	raise(SIGTRAP);
	UKT_EQ(trap_seen, 2);
	/* a probe on the program's int3: handler, then the program's trap */
	struct kprobe k3 = { .addr = (void *)t_int3_insn, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&k3), 0);
	UKT_EQ(t_int3(), 7);
	UKT_EQ(trap_seen, 3);
	UKT_EQ(trap_ip, (unsigned long)t_int3_insn + 1);
	UKT_EQ(t_add(1, 1), 2);
	UKT_EQ(hits, 2);
	unregister_kprobe(&k3);
	unregister_kprobe(&kp);
}

/* ---- memory ------------------------------------------------------------------- */

UKT_CASE(copy_from_user_nofault)
{
	long src = 0x1122334455667788L, dst = 0;
	UKT_EQ(copy_from_user_nofault(&dst, &src, sizeof(dst)), 0);
	UKT_EQ(dst, src);
	UKT_EQ(copy_from_user_nofault(&dst, NULL, 8), -EFAULT);
	char *pg = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(pg != MAP_FAILED);
	memset(pg, 0x5a, 8192);
	munmap(pg + 4096, 4096);
	char buf[16];
	UKT_EQ(copy_from_user_nofault(buf, pg + 4090, 6), 0);
	UKT_EQ(copy_from_user_nofault(buf, pg + 4090, 16), -EFAULT);	/* straddles */
	UKT_EQ(copy_from_user_nofault(buf, pg + 5000, 1), -EFAULT);
}

/* ---- objects loaded and unloaded --------------------------------------------------- */

UKT_CASE(dlopen_after_start_and_dlclose_makes_gone)
{
	char path[4200], self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	UKT_ASSERT(n > 0);
	self[n] = 0;
	*strrchr(self, '/') = 0;
	snprintf(path, sizeof(path), "%s/../solibs/ukptarget.so", self);

	/* the library has started before the object exists */
	struct kprobe k0 = { .addr = (void *)t_add };
	UKT_EQ(register_kprobe(&k0), 0);
	struct kprobe kp = { .symbol_name = "ukptarget.so:ukpt_triple", .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), -ENOENT);

	for (int round = 0; round < 2; round++) {
		void *h = dlopen(path, RTLD_NOW);
		UKT_ASSERT(h);
		int (*triple)(int) = (int (*)(int))dlsym(h, "ukpt_triple");
		kp.addr = NULL;
		kp.flags = 0;
		UKT_EQ(register_kprobe(&kp), 0);
		UKT_EQ((unsigned long)kp.addr, (unsigned long)triple);
		UKT_EQ(triple(5), 15);
		UKT_EQ(hits, round + 1);
		char buf[512], want[512];
		ukt_list_to(buf, sizeof(buf));
		snprintf(want, sizeof(want), "%016lx  k  t_add+0x0\n%016lx  k  ukpt_triple+0x0 [ukptarget.so]\n",
			 (unsigned long)t_add, (unsigned long)kp.addr);
		UKT_STREQ(buf, want);
		UKT_EQ(dlclose(h), 0);
		UKT_EQ(kp.flags & KPROBE_FLAG_GONE, KPROBE_FLAG_GONE);
		ukt_list_to(buf, sizeof(buf));
		snprintf(want, sizeof(want), "%016lx  k  t_add+0x0\n%016lx  k  ukpt_triple+0x0 [ukptarget.so] [GONE]\n",
			 (unsigned long)t_add, (unsigned long)kp.addr);
		UKT_STREQ(buf, want);
		UKT_EQ(enable_kprobe(&kp), -EINVAL);
		unregister_kprobe(&kp);
	}
	unregister_kprobe(&k0);
}

/* ---- a breakpoint that outlives its probe -------------------------------------- */

/*
 * A thread can fetch the int3 just before unregister removes it and trap
 * after the probe is gone.  Make that state on purpose: leave an int3 at
 * an address whose probe was unregistered.  The trap must resume the
 * original instruction, with no handler and no signal to the program.
 */
UKT_CASE(trap_on_a_removed_probe_resumes_correctly)
{
	ukt_install_handler(SIGTRAP, prog_trap);
	struct kprobe kp = { .addr = (void *)t_sub, .pre_handler = count_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(t_sub(9, 4), 5);
	UKT_EQ(hits, 1);
	unregister_kprobe(&kp);
	unsigned char *code = (unsigned char *)t_sub;
	UKT_ASSERT(code[0] != 0xcc);
	unsigned long pg = (unsigned long)code & ~4095UL;
	UKT_EQ(mprotect((void *)pg, 8192, PROT_READ | PROT_WRITE | PROT_EXEC), 0);
	unsigned char orig = code[0];
	code[0] = 0xcc;				/* the stale breakpoint */
	for (int i = 0; i < 3; i++)
		UKT_EQ(t_sub(9, 4), 5);
	code[0] = orig;
	UKT_EQ(hits, 1);
	UKT_EQ(trap_seen, 0);
}

static int fork_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	hits++;
	return 0;
}

UKT_CASE(fork_child_keeps_probes_and_can_unregister)
{
	struct kprobe kp = { .addr = (void *)t_add, .pre_handler = fork_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(t_add(1, 2), 3);
	pid_t pid = fork();
	if (pid == 0) {
		if (t_add(2, 2) != 4 || hits != 2)
			_exit(1);
		unregister_kprobe(&kp);
		if (t_add(2, 2) != 4 || hits != 2)
			_exit(2);
		_exit(0);
	}
	int st;
	UKT_EQ(waitpid(pid, &st, 0), pid);
	UKT_ASSERT(WIFEXITED(st));
	UKT_EQ(WEXITSTATUS(st), 0);
	UKT_EQ(t_add(1, 2), 3);
	UKT_EQ(hits, 2);
	unregister_kprobe(&kp);
}

/* ---- sp changed by a handler; emulated dynamic branches ----------------------- */

static int pre_sp(struct kprobe *p, struct pt_regs *r) { (void)p; r->sp -= 32; return 0; }
static void post_sp(struct kprobe *p, struct pt_regs *r, unsigned long f)
{
	(void)p; (void)f;
	r->sp += 64;	/* undo the lea: takes the trampoline's slow exit */
	post_hits++;
}

UKT_CASE(handlers_move_the_stack_pointer)
{
	UKT_EQ(t_sp(), 64);
	struct kprobe kp = { .addr = (void *)t_sp_insn, .pre_handler = pre_sp };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(t_sp(), 96);
	unregister_kprobe(&kp);
	struct kprobe kq = { .addr = (void *)t_sp_insn, .post_handler = post_sp };
	UKT_EQ(register_kprobe(&kq), 0);
	for (int i = 0; i < 3; i++)
		UKT_EQ(t_sp(), 0);
	UKT_EQ(post_hits, 3);
	unregister_kprobe(&kq);
	UKT_EQ(t_sp(), 64);
}

UKT_CASE(post_handler_on_indirect_call)
{
	struct kprobe kp = { .addr = (void *)t_callr_insn, .pre_handler = count_pre,
			     .post_handler = save_post };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(t_callr(41), 42);
	UKT_EQ(hits, 1);
	UKT_EQ(post_hits, 1);
	UKT_EQ(post_regs.ip, post_regs.ax);	/* at the callee, rax held it */
	UKT_EQ(*(unsigned long *)post_regs.sp, (unsigned long)t_callr_insn + 2);
	unregister_kprobe(&kp);
	UKT_EQ(t_callr(1), 2);
}

UKT_CASE(trap_numbers_gp_and_ud)
{
	install_prog_handler(SIGSEGV);
	install_prog_handler(SIGILL);
	struct kprobe kg = { .addr = (void *)t_gp_insn, .fault_handler = fault_pass };
	struct kprobe ku = { .addr = (void *)t_ud_insn, .fault_handler = fault_pass };
	UKT_EQ(register_kprobe(&kg), 0);
	UKT_EQ(register_kprobe(&ku), 0);
	if (!sigsetjmp(prog_jb, 1)) {
		t_gp();
		UKT_FAIL("no fault");
	}
	UKT_EQ(last_trapnr, 13);
	UKT_EQ(prog_sig, SIGSEGV);
	UKT_EQ(prog_ip, (unsigned long)t_gp_insn);
	if (!sigsetjmp(prog_jb, 1)) {
		t_ud();
		UKT_FAIL("no fault");
	}
	UKT_EQ(last_trapnr, 6);
	UKT_EQ(prog_sig, SIGILL);
	UKT_EQ(prog_ip, (unsigned long)t_ud_insn);
	UKT_EQ(prog_addr, (unsigned long)t_ud_insn);
	UKT_EQ(fault_hits, 2);
	unregister_kprobe(&kg);
	unregister_kprobe(&ku);
}

static atomic_long versioned_hits;
static int versioned_pre(struct kprobe *p, struct pt_regs *r)
{
	(void)p; (void)r;
	versioned_hits++;
	return 0;
}

/*
 * Functions whose names carry versions in the separate debug file's
 * symbol table (libc6-dbg: fopen@@GLIBC_2.2.5; clock_nanosleep in two
 * versions) are named without them, and resolve to the default version,
 * where the program's calls go.
 */
UKT_CASE(versioned_libc_names_resolve)
{
	struct kprobe ka = { .symbol_name = "libc.so.6:clock_nanosleep", .pre_handler = versioned_pre };
	struct kprobe kb = { .symbol_name = "libc.so.6:fopen", .pre_handler = versioned_pre };
	UKT_EQ(register_kprobe(&ka), 0);
	UKT_EQ(register_kprobe(&kb), 0);
	UKT_EQ(clock_nanosleep(CLOCK_MONOTONIC, 0, &(struct timespec){ 0, 1000 }, NULL), 0);
	FILE *f = fopen("/proc/self/stat", "r");
	UKT_ASSERT(f);
	fclose(f);
	UKT_EQ(versioned_hits, 2);
	unregister_kprobe(&ka);
	unregister_kprobe(&kb);
}
