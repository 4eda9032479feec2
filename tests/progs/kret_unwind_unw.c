/*
 * kret_unwind_unw: libunwind (unw_step, unw_get_proc_name) walks up from
 * inside a kretprobed function, from its callee and from the kretprobe's
 * handler (run by tests/api/kretprobe_progs.c; links -lunwind).
 *
 *	main -> kr_unw_outer -> kr_unw_caller -> kr_unw_probed -> kr_unw_leaf
 *
 * Each walk is taken unprobed, then with the entry probe hit through a
 * breakpoint and through a jump.  Probed, the walk from kr_unw_probed and
 * kr_unw_leaf must be the unprobed one with exactly one
 * "kretprobe_trampoline" frame right after kr_unw_probed and right before
 * kr_unw_caller (the real caller), with the same pcs; the handler's walk
 * must reach kr_unw_caller at ri->ret_addr, then kr_unw_outer and main.
 * Probed, a walk is also started as a signal arriving at the stub's
 * priming call would start it (pc there, sp on the return address, which
 * is the stub): it must go through the priming call and the stub to
 * kr_unw_caller, kr_unw_outer and main.
 * Prints the walks; exits 0 when all of that holds.
 */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <stdio.h>
#include <ucontext.h>
#include <string.h>
#include <ukprobes.h>

#define MAXF 32
struct walk {
	int n;
	unw_word_t pc[MAXF];
	char name[MAXF][64];
};

static struct walk w_probed[3], w_leaf[3], w_handler[3], w_prime[3];
static int mode;	/* 0 unprobed, 1 breakpoint, 2 optimized */
static volatile unsigned long ret_addr;
static int failures;

/* every frame from c up */
static void walk_from(struct walk *w, unw_cursor_t *c)
{
	do {
		unw_word_t pc, off;
		if (unw_get_reg(c, UNW_REG_IP, &pc))
			break;
		w->pc[w->n] = pc;
		if (unw_get_proc_name(c, w->name[w->n], sizeof(w->name[0]), &off))
			strcpy(w->name[w->n], "?");
		w->n++;
	} while (w->n < MAXF && unw_step(c) > 0);
}

static void take(struct walk *w)
{
	unw_context_t uc;
	unw_cursor_t c;
	w->n = 0;
	if (unw_getcontext(&uc) || unw_init_local(&c, &uc))
		return;
	walk_from(w, &c);
}

/* the walk a signal at the priming call of kr_unw_probed's stub would
 * take: the stack is the function's at its entry, the stub on top */
static __attribute__((noinline)) void take_at_priming_call(struct walk *w)
{
	unw_context_t uc;
	unw_cursor_t c;
	char name[64];
	unw_word_t off, cfa = 0;
	w->n = 0;
	if (!mode || unw_getcontext(&uc) || unw_init_local(&c, &uc))
		return;	/* unprobed: no stub */
	do {
		if (!unw_get_proc_name(&c, name, sizeof(name), &off) &&
		    !strcmp(name, "kr_unw_probed")) {
			if (unw_step(&c) > 0)
				unw_get_reg(&c, UNW_REG_SP, &cfa);	/* its CFA */
			break;
		}
	} while (unw_step(&c) > 0);
	if (!cfa)
		return;
	unsigned long *ra = (unsigned long *)(cfa - 8);	/* the stub */
	uc.uc_mcontext.gregs[REG_RIP] = (long)(*ra - 6);	/* call *cont(%rip) */
	uc.uc_mcontext.gregs[REG_RSP] = (long)ra;
	if (unw_init_local(&c, &uc))
		return;
	walk_from(w, &c);
}

__attribute__((noinline)) void kr_unw_leaf(void)
{
	take(&w_leaf[mode]);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) long kr_unw_probed(long x)
{
	take(&w_probed[mode]);
	take_at_priming_call(&w_prime[mode]);	/* (one call site for every mode) */
	kr_unw_leaf();
	__asm__ volatile("" : "+r"(x) :: "memory");
	return x + 1;
}

__attribute__((noinline)) long kr_unw_caller(long x)
{
	long r = kr_unw_probed(x);
	__asm__ volatile("" : "+r"(r) :: "memory");
	return r + 1;
}

__attribute__((noinline)) long kr_unw_outer(long x)
{
	long r = kr_unw_caller(x);
	__asm__ volatile("" : "+r"(r) :: "memory");
	return r + 1;
}

static int on_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	(void)regs;
	ret_addr = (unsigned long)ri->ret_addr;
	take(&w_handler[mode]);
	return 0;
}

static void print(const char *what, const struct walk *w)
{
	printf("  %s:\n", what);
	for (int i = 0; i < w->n; i++)
		printf("    #%d %#lx %s\n", i, (unsigned long)w->pc[i], w->name[i]);
}

static int idx(const struct walk *w, const char *name, int from)
{
	for (int i = from; i < w->n; i++)
		if (!strcmp(w->name[i], name))
			return i;
	return -1;
}

/* got = ref with one trampoline frame between probed and its caller */
static void expect_same(const char *what, const struct walk *ref, const struct walk *got)
{
	int t = idx(got, "kretprobe_trampoline", 0), ok = t > 0;
	ok = ok && !strcmp(got->name[t - 1], "kr_unw_probed") && t + 1 < got->n &&
	     !strcmp(got->name[t + 1], "kr_unw_caller") && got->pc[t + 1] == ret_addr &&
	     idx(got, "kretprobe_trampoline", t + 1) < 0 && got->n == ref->n + 1;
	for (int i = 0, j = 0; ok && i < got->n; i++) {
		if (i == t)
			continue;
		ok = got->pc[i] == ref->pc[j] && !strcmp(got->name[i], ref->name[j]);
		j++;
	}
	if (!ok) {
		printf("FAIL %s\n", what);
		print("unprobed", ref);
		print("probed", got);
		failures++;
	}
}

int main(void)
{
	for (mode = 0; mode < 3; mode++) {
		struct kretprobe rp = { .kp.addr = (kprobe_opcode_t *)kr_unw_probed,
					.handler = on_return, .maxactive = 2 };
		if (mode) {
			kprobes_set_optimization(mode == 2);
			int err = register_kretprobe(&rp);
			if (err) {
				printf("register_kretprobe: %d\n", err);
				return 2;
			}
			wait_for_kprobe_optimizer();
			if (!!(rp.kp.flags & KPROBE_FLAG_OPTIMIZED) != (mode == 2)) {
				printf("FAIL optimized flag %#x in mode %d\n", rp.kp.flags, mode);
				failures++;
			}
		}
		long r = kr_unw_outer(10);	/* one call site for every mode */
		if (r != 13) {
			printf("FAIL result %ld\n", r);
			failures++;
		}
		if (mode) {
			unregister_kretprobe(&rp);
			kprobes_set_optimization(1);
		}
	}
	for (int m = 1; m < 3; m++) {
		const char *path = m == 1 ? "breakpoint" : "optimized";
		char what[64];
		snprintf(what, sizeof(what), "%s: walk from kr_unw_probed", path);
		expect_same(what, &w_probed[0], &w_probed[m]);
		snprintf(what, sizeof(what), "%s: walk from kr_unw_leaf", path);
		expect_same(what, &w_leaf[0], &w_leaf[m]);
		/* the handler: the real caller at ri->ret_addr, then the rest */
		const struct walk *h = &w_handler[m];
		int c = idx(h, "kr_unw_caller", 0);
		if (c < 0 || h->pc[c] != ret_addr || c + 2 >= h->n ||
		    strcmp(h->name[c + 1], "kr_unw_outer") || strcmp(h->name[c + 2], "main") ||
		    idx(h, "kr_unw_probed", 0) >= 0) {
			printf("FAIL %s: walk from the handler\n", path);
			print("handler", h);
			failures++;
		}
		/* from the priming call: the call, the stub, then the callers */
		const struct walk *p = &w_prime[m];
		static const char *const want[] = { "kretprobe_trampoline", "kretprobe_trampoline",
						    "kr_unw_caller", "kr_unw_outer", "main" };
		int ok = p->n >= 5 && p->pc[1] == p->pc[0] + 6 && p->pc[2] == ret_addr;
		for (int i = 0; ok && i < 5; i++)
			ok = !strcmp(p->name[i], want[i]);
		if (!ok) {
			printf("FAIL %s: walk from the priming call\n", path);
			print("from the priming call", p);
			failures++;
		}
		if (m == 2) {
			print("optimized, from the priming call", p);
			print("unprobed, from kr_unw_leaf", &w_leaf[0]);
			print("optimized, from kr_unw_leaf", &w_leaf[m]);
			print("optimized, from the handler", h);
		}
	}
	printf(failures ? "kret_unwind: %d failures\n" : "kret_unwind: all ok\n", failures);
	return failures ? 1 : 0;
}
