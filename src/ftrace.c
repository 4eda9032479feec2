/* SPDX-License-Identifier: MIT */
/*
 * ftrace function hooks: the registry.
 *
 * Patch sites are the function entries the compiler recorded (symbols.c
 * reads the sections), in every object loaded now or later.  A site is a
 * 5-byte nop until some ops traces it; then it calls the site's own stub,
 * 128 bytes of slot memory next to it:
 *
 *	push %r11
 *	mov %fs:ukp_self, %r11		; the thread block
 *	test %r11, %r11 ; jz attach
 *	incq ft_depth(%r11)		; this call is inside (grace periods)
 *	jmp <code>			; the cfg's own code, or far:
 *   far:	mov cfg(%rip), %r11 ; jmp *(%r11)	; entry.S, reading the cfg
 *	...
 *	cfg: .quad <struct ft_cfg *>
 *
 * What changes is the cfg word and the jmp's displacement (one aligned
 * 4-byte store): adding or removing an ops on a site that stays traced
 * makes a new cfg, and the old one (with its code block, which goes back
 * to the site) is freed after a grace period (the counters above; sync.c).
 * Code at the site changes only between "traced" and "not traced", with
 * the int3 protocol (the kernel's text_poke_bp): int3 first, then the
 * tail, then the first byte, each step serialised; a thread that meets
 * the int3 meanwhile has the new instruction emulated by the SIGTRAP
 * handler.
 *
 * The trampolines: one ops that needs neither registers nor vector state
 * calls its func directly (the kernel's dynamic trampoline); anything
 * else goes through a list walk in C, with pt_regs when an ops asked for
 * SAVE_REGS and the argument vector registers when a callback is not
 * proven to keep to the general registers (the analysis of analyze.c).
 */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "ftrace_int.h"

struct ft_site {
	unsigned long addr;
	uint8_t len;		/* 5, or 6: a 6-byte call became nop5 + nop */
	bool nops;		/* still five 1-byte nops */
	bool dead, kprobe, active;
	bool shared;		/* its stub a fork parent's too: not ours */
	uint8_t *stub;
	struct ft_cfg *cfg;
	uint8_t *spare[3];	/* bodies no thread runs any more */
	uint8_t nspare;
	char *name;
	const char *obj;	/* object base name */
	bool is_main;
	struct ukp_object *o;
};

struct ft_tab { size_t n; struct ft_site *v[]; };	/* by address */

static struct ft_tab *_Atomic tab;	/* published whole; old ones kept */
static struct ft_opp *ops_head;	/* registered, in order; under ukp_lock */
static struct ft_opp *all_opps;	/* every one ever made */
#define DEAD_IP 1UL	/* an ip filter entry whose function was unloaded */
static int ft_enabled = 1;
static struct ft_cfg *garbage;	/* retired cfgs awaiting a grace period */
static unsigned long tls_self;	/* %fs offset of ukp_self */
static bool initialised;

/* the int3 protocol's emulation table, for the SIGTRAP handler */
struct ft_trans { unsigned long addr, target, skip; };
struct ft_transtab { size_t n; struct ft_trans v[]; };
static struct ft_transtab *_Atomic trans;
static struct ft_transtab *trans_garbage[64];	/* freed by reap() */
static size_t ntrans_garbage;

static struct ftrace_ops kprobe_ops;	/* kprobes on patch sites */
static struct ft_opp kprobe_opp = { .live = 1, .ops = &kprobe_ops };

static const uint8_t nop5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

/* ---- the site table ----------------------------------------------------- */

/* the first site at or after addr */
static size_t site_index(const struct ft_tab *t, unsigned long addr)
{
	size_t lo = 0, hi = t->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (t->v[mid]->addr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct ft_site *site_of(unsigned long addr)
{
	struct ft_tab *t = atomic_load_explicit(&tab, memory_order_acquire);
	if (!t)
		return NULL;
	size_t i = site_index(t, addr);
	return i < t->n && t->v[i]->addr == addr ? t->v[i] : NULL;
}

int ukp_ftrace_site_at(unsigned long addr)
{
	struct ft_tab *t = atomic_load_explicit(&tab, memory_order_acquire);
	if (!t)
		return 0;
	size_t i = site_index(t, addr > 4 ? addr - 4 : 0);
	for (; i < t->n && t->v[i]->addr <= addr; i++) {
		if (t->v[i]->addr == addr)
			return 1;
		if (addr < t->v[i]->addr + 5)
			return -1;
	}
	return 0;
}

bool ukp_ftrace_overlaps(unsigned long lo, unsigned long hi)
{
	struct ft_tab *t = atomic_load_explicit(&tab, memory_order_acquire);
	if (!t || hi <= lo)
		return false;
	size_t i = site_index(t, lo > 5 ? lo - 5 : 0);
	for (; i < t->n && t->v[i]->addr < hi; i++)
		if (t->v[i]->addr + 5 > lo)
			return true;
	return false;
}

void ukp_ftrace_orig_bytes(unsigned long addr, uint8_t *buf, size_t n)
{
	struct ft_tab *t = atomic_load_explicit(&tab, memory_order_acquire);
	if (!t || !t->n)
		return;
	size_t i = site_index(t, addr > 5 ? addr - 5 : 0);
	for (; i < t->n && t->v[i]->addr < addr + n; i++) {
		const struct ft_site *s = t->v[i];
		for (unsigned k = 0; k < 5; k++)
			if (s->addr + k >= addr && s->addr + k < addr + n)
				buf[s->addr + k - addr] = nop5[k];
	}
}

static int cmp_site(const void *a, const void *b)
{
	const struct ft_site *x = *(struct ft_site *const *)a, *y = *(struct ft_site *const *)b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* ---- finding the sites ---------------------------------------------------- */

static bool is_endbr64(const uint8_t *b)
{
	return b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa;
}

/*
 * What is at a recorded address: the site (a function's first
 * instruction, after an endbr64) and its form.  Returns 0 and fills s, or
 * a reason it is not usable.
 */
static const char *classify(unsigned long rec, uint8_t from, struct ft_site *s,
			    struct ukp_poke *fix, size_t *nfix)
{
	uint8_t b[24];
	struct ukp_where w;
	unsigned long a = rec;

	*nfix = 0;
	if (ukp_copy_nofault(b, (const void *)a, sizeof(b)))
		return "unreadable";
	if (is_endbr64(b)) {
		a += 4;
		memmove(b, b + 4, sizeof(b) - 4);
	}
	if (from == UKP_PS_PATCHABLE) {
		/* -fpatchable-function-entry=N,M: M of the N nops come before
		 * the function; the site is the function's own first bytes */
		unsigned run = 0;
		while (run < 16 && b[run] == 0x90)
			run++;
		if (run < 5)
			return "fewer than 5 nops";
		for (unsigned k = 0; k + 5 <= run; k++) {
			if (ukp_sym_where(a + k, &w) == 0 && w.func_start == a + k) {
				s->addr = a + k;
				s->len = 5;
				s->nops = true;
				goto named;
			}
			if (k == 0 && ukp_sym_where(a, &w) == 0 && w.func_start &&
			    w.func_start + 4 == a) {
				s->addr = a;	/* after the function's endbr64 */
				s->len = 5;
				s->nops = true;
				goto named;
			}
		}
		return "no function starts at the nops";
	}
	if (!memcmp(b, nop5, 5)) {
		s->len = 5;		/* -mnop-mcount */
	} else if (b[0] == 0xe8) {
		s->len = 5;		/* call __fentry__ */
	} else if ((b[0] == 0xff && b[1] == 0x15) || (b[0] == 0x67 && b[1] == 0xe8)) {
		s->len = 6;		/* call *__fentry__@GOTPCREL(%rip) */
	} else {
		return "not a call to __fentry__ or a nop";
	}
	s->addr = a;
	if (memcmp(b, nop5, 5)) {
		/* a call: it becomes nops, as the kernel does at boot */
		for (unsigned k = 0; k < s->len; k++)
			fix[(*nfix)++] = (struct ukp_poke){ a + k, k < 5 ? nop5[k] : 0x90 };
	}
	if (ukp_sym_where(a, &w) != 0 || !w.func_start ||
	    (w.func_start != a && !(w.func_start + 4 == a)))
		return "not at a function's entry (-pg without -mfentry?)";
named:
	s->name = strdup(w.func);
	return s->name ? NULL : "out of memory";
}

static int ft_patch(struct ft_site **v, const unsigned long *targets, size_t n);

/* Read the sites of every object not seen yet, forget those unloaded. */
static void scan_objects_locked(bool fresh)
{
	struct ukp_object **objs;
	size_t nobj = ukp_sym_objects(&objs);
	struct ft_tab *old = atomic_load(&tab);
	size_t cap = (old ? old->n : 0) + 64, n = 0;
	struct ft_tab *nt = malloc(sizeof(*nt) + cap * sizeof(nt->v[0]));
	struct ukp_poke *fix = NULL;
	size_t nfix = 0, capfix = 0;
	bool changed = false;

	if (!nt) {
		free(objs);
		return;
	}
	/* keep the sites of objects still mapped */
	for (size_t i = 0; old && i < old->n; i++) {
		struct ft_site *s = old->v[i];
		bool alive = false;
		for (size_t k = 0; k < nobj && !alive; k++)
			alive = objs[k] == s->o;
		if (alive) {
			nt->v[n++] = s;
			continue;
		}
		/* its code went with the mapping: the stub stays (slot memory
		 * is never reused), the callbacks are dropped */
		s->dead = true;
		s->active = false;
		/* an ip in a filter meant this function, not whatever a
		 * later object puts at its address (the kernel clears a
		 * module's entries from filter hashes the same way) */
		for (struct ft_opp *o = all_opps; o; o = o->all_next) {
			struct ft_ips *sets[2] = { &o->filter.ips, &o->notrace.ips };
			for (int k = 0; k < 2; k++)	/* still a filter: */
				for (size_t j = 0; j < sets[k]->n; j++)	/* not "all" */
					if (sets[k]->v[j] == s->addr)
						sets[k]->v[j] = DEAD_IP;
		}
		if (s->cfg) {
			s->cfg->next_garbage = garbage;
			garbage = s->cfg;
			s->cfg = NULL;
		}
		changed = true;
	}
	/* objects whose sites are not known yet */
	static struct ukp_object **seen;
	static size_t nseen, capseen;
	for (size_t k = 0; k < nobj; k++) {
		bool known = false;
		for (size_t i = 0; i < n && !known; i++)
			known = nt->v[i]->o == objs[k];
		for (size_t i = 0; i < nseen && !known; i++)
			known = seen[i] == objs[k];
		if (known)
			continue;
		unsigned long *addrs;
		uint8_t *from;
		size_t m;
		if (ukp_sym_patch_sites(objs[k], &addrs, &from, &m) == 0 && m) {
			bool is_main;
			const char *oname = ukp_sym_object_name(objs[k], &is_main);
			for (size_t j = 0; j < m; j++) {
				struct ft_site tmp = { 0 };
				struct ukp_poke f[6];
				size_t nf;
				const char *why = classify(addrs[j], from[j], &tmp, f, &nf);
				if (why) {
					if (getenv("UKPROBES_VERBOSE"))
						ukp_log("ftrace: %s entry %#lx in %s skipped: %s",
							from[j] ? "__patchable_function_entries" : "__mcount_loc",
							addrs[j], oname, why);
					free(tmp.name);
					continue;
				}
				bool dup = false;
				for (size_t i = 0; i < n && !dup; i++)
					dup = nt->v[i]->addr == tmp.addr;
				if (dup) {
					free(tmp.name);
					continue;
				}
				if (n == cap) {
					struct ft_tab *g = realloc(nt, sizeof(*nt) + 2 * cap * sizeof(nt->v[0]));
					if (g) {
						nt = g;
						cap *= 2;
					}
				}
				if (nfix + nf > capfix) {
					size_t nc = 2 * (nfix + nf) + 16;
					struct ukp_poke *g = realloc(fix, nc * sizeof(*fix));
					if (g) {
						fix = g;
						capfix = nc;
					}
				}
				struct ft_site *s = n < cap && nfix + nf <= capfix ? malloc(sizeof(*s)) : NULL;
				if (!s) {
					free(tmp.name);
					continue;
				}
				*s = tmp;
				/* an object the dynamic linker is loading: none
				 * of its code ran yet, its nops are one site */
				if (fresh)
					s->nops = false;
				s->o = objs[k];
				s->obj = oname;
				s->is_main = is_main;
				nt->v[n++] = s;
				memcpy(fix + nfix, f, nf * sizeof(*f));
				nfix += nf;
				changed = true;
			}
		}
		free(addrs);
		free(from);
		/* remember objects without sites too (never read twice) */
		if (nseen == capseen) {
			size_t nc = capseen ? 2 * capseen : 32;
			struct ukp_object **g = realloc(seen, nc * sizeof(*g));
			if (!g)
				continue;
			seen = g;
			capseen = nc;
		}
		seen[nseen++] = objs[k];
	}
	/* an object unloaded and loaded again is read again */
	for (size_t i = 0; i < nseen;) {
		bool alive = false;
		for (size_t k = 0; k < nobj && !alive; k++)
			alive = objs[k] == seen[i];
		if (alive)
			i++;
		else
			seen[i] = seen[--nseen];
	}
	free(objs);
	if (!changed) {
		free(nt);
		free(fix);
		return;
	}
	qsort(nt->v, n, sizeof(nt->v[0]), cmp_site);
	nt->n = n;
	atomic_store_explicit(&tab, nt, memory_order_release);
	/* old tables stay: a reader may be in one (a few bytes per site) */
	if (nfix) {
		/* call __fentry__ -> nops: int3, tail, first byte */
		struct ft_site **v = malloc(nfix * sizeof(*v));
		unsigned long *tg = calloc(nfix, sizeof(*tg));
		size_t nv = 0;
		for (size_t i = 0; v && tg && i < nfix; i++) {
			struct ft_site *s = site_of(fix[i].addr);
			if (s)
				v[nv++] = s;
		}
		if (v && tg)
			ft_patch(v, tg, nv);
		free(v);
		free(tg);
	}
	free(fix);
}

/* ---- patching --------------------------------------------------------------- */

static int cmp_trans(const void *a, const void *b)
{
	const struct ft_trans *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/*
 * Make sites v[i] call targets[i] (0: the nop), all together: int3 on
 * each first byte, then (for sites still made of 1-byte nops) every
 * thread moved out of them, then the tails, then the first bytes.
 */
/* A site's bytes (s->len of them): call target, or nops for 0 */
static void site_code(const struct ft_site *s, unsigned long target, uint8_t code[6])
{
	if (target) {
		int32_t rel = (int32_t)(target - (s->addr + 5));
		code[0] = 0xe8;
		memcpy(code + 1, &rel, 4);
	} else {
		memcpy(code, nop5, 5);
	}
	code[5] = 0x90;
}

static int ft_patch(struct ft_site **v, const unsigned long *targets, size_t n)
{
	if (!n)
		return 0;
	struct ft_transtab *tt = malloc(sizeof(*tt) + n * sizeof(tt->v[0]));
	struct ukp_poke *p0 = malloc(n * sizeof(*p0));
	struct ukp_poke *p1 = malloc(6 * n * sizeof(*p1));
	struct ukp_poke *p2 = malloc(n * sizeof(*p2));
	unsigned long *nops = malloc(n * sizeof(*nops));
	uint8_t *orig0 = malloc(n);
	size_t n1 = 0, nn = 0;
	int err = -ENOMEM;

	if (!tt || !p0 || !p1 || !p2 || !nops || !orig0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		struct ft_site *s = v[i];
		uint8_t code[6], b0;
		if (ukp_copy_nofault(&b0, (const void *)s->addr, 1))
			b0 = nop5[0];
		site_code(s, targets[i], code);
		tt->v[i] = (struct ft_trans){ s->addr, targets[i], s->addr + s->len };
		p0[i] = (struct ukp_poke){ s->addr, UKP_ARCH_BREAKPOINT };
		p2[i] = (struct ukp_poke){ s->addr, code[0] };
		orig0[i] = b0;
		for (unsigned k = 1; k < s->len; k++)
			p1[n1++] = (struct ukp_poke){ s->addr + k, code[k] };
		if (s->nops)
			nops[nn++] = s->addr;
		ukp_mark_patched_locked(s->addr, s->len);
	}
	tt->n = n;
	qsort(tt->v, n, sizeof(tt->v[0]), cmp_trans);
	atomic_store_explicit(&trans, tt, memory_order_release);
	err = ukp_text_poke_batch(p0, n);
	if (!err && nn)
		err = ukp_opt_ask_nops(nops, nn);
	if (err) {
		/* put the first bytes back: the sites stay what they were */
		for (size_t i = 0; i < n; i++)
			p0[i].byte = orig0[i];
		ukp_text_poke_batch(p0, n);
	} else {
		err = ukp_text_poke_batch(p1, n1);
		int e2 = ukp_text_poke_batch(p2, n);
		if (!err)
			err = e2;
		for (size_t i = 0; i < n; i++)
			v[i]->nops = false;
	}
	atomic_store_explicit(&trans, NULL, memory_order_release);
	/* the trap handler reads tt as an anonymous reader: freed after a
	 * grace period, which must not be waited for under ukp_lock (the
	 * dynamic linker's hook runs as a reader and takes the lock) */
	if (ntrans_garbage < 64)
		trans_garbage[ntrans_garbage++] = tt;
	/* else kept: a reader may still be in it */
	tt = NULL;
out:
	free(tt);
	free(p0);
	free(p1);
	free(p2);
	free(nops);
	free(orig0);
	return err;
}

bool ukp_ftrace_trap(unsigned long addr, ucontext_t *uc)
{
	bool done = false;
	/* every breakpoint comes here first: no shared write unless a patch
	 * is under way */
	if (!atomic_load_explicit(&trans, memory_order_relaxed))
		goto settled;
	ukp_anon_read_lock();
	struct ft_transtab *tt = atomic_load_explicit(&trans, memory_order_acquire);
	if (tt) {
		size_t lo = 0, hi = tt->n;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (tt->v[mid].addr < addr)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < tt->n && tt->v[lo].addr == addr) {
			const struct ft_trans *e = &tt->v[lo];
			if (e->target) {
				/* emulate the call: at a function's entry the
				 * stack below sp is free */
				unsigned long sp = ukp_arch_uc_sp(uc) - 8;
				*(unsigned long *)sp = addr + 5;
				ukp_arch_uc_set_sp(uc, sp);
				ukp_arch_uc_set_ip(uc, e->target);
			} else {
				ukp_arch_uc_set_ip(uc, e->skip);
			}
			done = true;
		}
	}
	ukp_anon_read_unlock();
settled:
	if (!done && site_of(addr)) {
		/* the patch finished after this thread trapped: run what is
		 * there now */
		uint8_t b;
		if (!ukp_copy_nofault(&b, (const void *)addr, 1) && b != UKP_ARCH_BREAKPOINT) {
			ukp_arch_uc_set_ip(uc, addr);
			done = true;
		}
	}
	return done;
}

/* ---- stubs -------------------------------------------------------------------- */

#define STUB_SIZE 128
#define STUB_ATTACH 64	/* .quad ukp_ftrace_attach (a cache line of its own) */
#define STUB_CFG 72	/* .quad cfg */
#define BODY_SIZE 256	/* the code of a cfg of lean ops (body_code) */

static struct ft_cfg cfg_none = { .tramp = ukp_ftrace_tramp_none };
/* where in every stub (the same layout for all: make_stub) */
static size_t stub_disp;	/* the jmp's displacement, 4-byte aligned */
static size_t stub_far;		/* on through the cfg word to entry.S */

/* the displacement of the stub's jmp to target */
static uint32_t stub_rel(const struct ft_site *s, const uint8_t *target)
{
	return (uint32_t)(int32_t)(target - (s->stub + stub_disp + 4));
}

/* The instructions stubs and code blocks share (each at c + *k). */
static void emit_self_r11(uint8_t *c, size_t *k)	/* mov %fs:ukp_self, %r11 */
{
	int32_t d = (int32_t)tls_self;
	memcpy(c + *k, (const uint8_t[]){ 0x64, 0x4c, 0x8b, 0x1c, 0x25 }, 5);
	memcpy(c + *k + 5, &d, 4);
	*k += 9;
}

static void emit_r11_insn(uint8_t *c, size_t *k, uint8_t op, uint8_t modrm, size_t off)
{						/* op d32(%r11): REX.W+B */
	int32_t d = (int32_t)off;
	c[(*k)++] = 0x49; c[(*k)++] = op; c[(*k)++] = modrm;
	memcpy(c + *k, &d, 4);
	*k += 4;
}
#define EMIT_INCQ_R11(c, k, field)	/* incq field(%r11) */ \
	emit_r11_insn(c, k, 0xff, 0x83, offsetof(struct ukp_thread, field))
#define EMIT_ERRNO_P_RAX(c, k)		/* mov errno_p(%r11), %rax */ \
	emit_r11_insn(c, k, 0x8b, 0x83, offsetof(struct ukp_thread, errno_p))

static int make_stub(struct ft_site *s)
{
	uint8_t c[STUB_SIZE];
	size_t k = 0;
	uint8_t *raw = ukp_slot_alloc(s->addr, STUB_SIZE + 64);
	if (!raw)
		return -ENOMEM;
	uint8_t *st = (uint8_t *)(((unsigned long)raw + 63) & ~63UL);
	int32_t d;

	memset(c, 0xcc, sizeof(c));
	c[k++] = 0x41; c[k++] = 0x53;				/* push %r11 */
	emit_self_r11(c, &k);
	c[k++] = 0x4d; c[k++] = 0x85; c[k++] = 0xdb;		/* test %r11, %r11 */
	c[k++] = 0x74; size_t jz = k++;				/* jz attach */
	size_t again = k;
	if (!ukp_fast_readers)
		c[k++] = 0xf0;					/* lock */
	EMIT_INCQ_R11(c, &k, ft_depth);
	while ((k + 1) & 3)
		c[k++] = 0x90;					/* nop */
	c[k++] = 0xe9;						/* jmp far (for now) */
	stub_disp = k;
	k += 4;
	stub_far = k;
	c[k++] = 0x4c; c[k++] = 0x8b; c[k++] = 0x1d;		/* mov cfg(%rip), %r11 */
	d = (int32_t)(STUB_CFG - (k + 4));
	memcpy(c + k, &d, 4); k += 4;
	c[k++] = 0x41; c[k++] = 0xff; c[k++] = 0x23;		/* jmp *(%r11) */
	if (k > STUB_ATTACH)
		return -EOVERFLOW;
	d = (int32_t)(stub_far - (stub_disp + 4));
	memcpy(c + stub_disp, &d, 4);
	uint64_t w = (uint64_t)(unsigned long)ukp_ftrace_attach;
	memcpy(c + STUB_ATTACH, &w, 8);
	w = (uint64_t)(unsigned long)&cfg_none;
	memcpy(c + STUB_CFG, &w, 8);
	k = STUB_CFG + 8;
	c[jz] = (uint8_t)(k - (jz + 1));
	c[k++] = 0xff; c[k++] = 0x15;				/* call *attach(%rip) */
	d = (int32_t)(STUB_ATTACH - (k + 4));
	memcpy(c + k, &d, 4); k += 4;
	c[k++] = 0x4d; c[k++] = 0x85; c[k++] = 0xdb;		/* test %r11, %r11 */
	c[k++] = 0x75;						/* jnz again */
	c[k] = (uint8_t)(int8_t)(again - (k + 1)); k++;
	c[k++] = 0x41; c[k++] = 0x5b;				/* pop %r11 */
	c[k++] = 0xc3;						/* ret */
	if (k > STUB_SIZE)
		return -EOVERFLOW;
	int err = ukp_slot_write_raw(st, c, sizeof(c));
	if (err)
		return err;
	s->stub = st;
	return 0;
}

/*
 * The code of a cfg of one to three lean ops (the kernel's dynamic
 * trampoline, per site):
 * the stub jumps here with %r11 = the thread block, counted in; every
 * address is an immediate, so nothing on the way to the callback waits
 * for a load (entry.S's trampoline, which reads them from the cfg, is
 * ~1.5 ns slower here for that chain of loads).
 *
 * A block is reused for another cfg of its site once a grace period has
 * passed since its last one was replaced: every thread inside then has
 * come out.  A thread that has counted out may still be in the last
 * instructions (the count of depth 0, pop %r11, ret), so these, the count
 * out before them, stand at the block's end, written once when the block
 * is made and the same for every cfg; the code before them is what
 * changes, and it ends where they begin.
 */
#define BODY_TAIL (BODY_SIZE - 28)

static size_t body_tail(uint8_t *c)
{
	size_t k = BODY_TAIL;

	emit_self_r11(c, &k);
	emit_r11_insn(c, &k, 0xff, 0x8b, offsetof(struct ukp_thread, ft_depth));	/* decq */
	c[k++] = 0x75; c[k++] = 7;				/* jnz (inside still) */
	EMIT_INCQ_R11(c, &k, ft_qs);				/* depth 0 again */
	c[k++] = 0x41; c[k++] = 0x5b;				/* pop %r11 */
	c[k++] = 0xc3;						/* ret */
	return k;
}

/* A function's entry may have these live: the argument registers, al
 * (a variadic call's vector count) and r10 (a nested function's static
 * chain).  r11 is the stub's, saved there. */
#define ENTRY_LIVE (UKP_GPR(UKP_RAX) | UKP_GPR(UKP_RCX) | UKP_GPR(UKP_RDX) | \
		    UKP_GPR(UKP_RSI) | UKP_GPR(UKP_RDI) | UKP_GPR(UKP_R8) | \
		    UKP_GPR(UKP_R9) | UKP_GPR(UKP_R10))
/* the callback's arguments: ip, parent_ip, op, regs */
#define CB_ARGS (UKP_GPR(UKP_RDI) | UKP_GPR(UKP_RSI) | UKP_GPR(UKP_RDX) | UKP_GPR(UKP_RCX))

/* push or pop general register r (0-15) */
static void emit_push_pop(uint8_t *v, size_t *k, unsigned r, bool pop)
{
	if (r >= 8)
		v[(*k)++] = 0x41;
	v[(*k)++] = (uint8_t)((pop ? 0x58 : 0x50) + (r & 7));
}

/*
 * The changing part into c (BODY_TAIL bytes at most), for a block at b:
 * every callback of the cfg in turn; its length, 0 if it does not fit.
 *
 * What it saves around them: whatever of ENTRY_LIVE a callback may
 * change.  A callback that is a leaf (ukp_opt_leaf_regs_locked: no call,
 * so every instruction it can run was decoded) changes only the
 * registers it writes, and reads only the arguments it names; so only
 * those are saved and set, and a callback that does nothing costs no
 * more than the call.  Anything else: all of ENTRY_LIVE, every argument,
 * and errno.  (Saving all eight always cost a counting callback
 * 15 cycles a call here, 3.08 ns over the plain call; saving its two,
 * 14: 2.77 ns.)
 */
static size_t body_code(uint8_t *c, const uint8_t *b, const struct ft_cfg *cf)
{
	bool errno_kept = false;
	uint16_t save = 0;
	uint8_t v[BODY_SIZE + 64];
	size_t k = 0, calls[8], ncalls = 0;
	unsigned long callfn[8];
	uint64_t q;
	int32_t d;

	for (unsigned i = 0; i < cf->n; i++) {
		const struct ft_opp *o = cf->e[i].opp;
		errno_kept |= !o->leaf;
		save |= o->writes | (o->reads & CB_ARGS);
	}
	save = errno_kept ? ENTRY_LIVE : save & ENTRY_LIVE;
	unsigned nsaved = 0;
	for (unsigned r = 0; r < 16; r++)
		if (save & UKP_GPR(r)) {
			emit_push_pop(v, &k, r, false);
			nsaved++;
		}
	/* the stub pushed r11 over the site's return address: sp is 16-byte
	 * aligned at a call when 8 * nsaved + pad is a multiple of 16 */
	unsigned pad = nsaved & 1 ? 0 : 8;
	if (errno_kept) {
		EMIT_ERRNO_P_RAX(v, &k);			/* (rax is saved) */
		v[k++] = 0x8b; v[k++] = 0x00;			/* mov (%rax), %eax */
		v[k++] = 0x50;					/* push %rax */
		if (!pad)
			return 0;	/* ENTRY_LIVE is eight */
	} else if (pad) {
		v[k++] = 0x48; v[k++] = 0x83; v[k++] = 0xec; v[k++] = 8;	/* sub $8, %rsp */
	}
	/* where the function's return address is (the callback's parent_ip):
	 * above pad, the saved registers, r11 and the site's return */
	uint8_t parent_at = (uint8_t)(pad + 8 * nsaved + 16);
	for (unsigned i = 0; i < cf->n; i++) {
		const struct ft_ent *e = &cf->e[i];
		uint16_t args = e->opp->leaf ? e->opp->reads & CB_ARGS : CB_ARGS;
		if (k + 64 > sizeof(v) || ncalls == 8)
			return 0;	/* too many: entry.S walks them */
		v[k++] = 0x49; v[k++] = 0xbb;			/* movabs &live, %r11 */
		q = (uint64_t)(unsigned long)&e->opp->live;
		memcpy(v + k, &q, 8); k += 8;
		v[k++] = 0x41; v[k++] = 0x80;			/* cmpb $0, (%r11) */
		v[k++] = 0x3b; v[k++] = 0x00;
		v[k++] = 0x74; size_t je = k++;			/* je: unregistered */
		if (args & UKP_GPR(UKP_RDI)) {
			v[k++] = 0x48; v[k++] = 0xbf;		/* movabs ip, %rdi */
			q = cf->ip;
			memcpy(v + k, &q, 8); k += 8;
		}
		if (args & UKP_GPR(UKP_RSI)) {
			v[k++] = 0x48; v[k++] = 0x8b; v[k++] = 0x74;	/* mov parent_at(%rsp), */
			v[k++] = 0x24; v[k++] = parent_at;		/* %rsi */
		}
		if (args & UKP_GPR(UKP_RDX)) {
			v[k++] = 0x48; v[k++] = 0xba;		/* movabs ops, %rdx */
			q = (uint64_t)(unsigned long)e->ops;
			memcpy(v + k, &q, 8); k += 8;
		}
		if (args & UKP_GPR(UKP_RCX)) {
			v[k++] = 0x31; v[k++] = 0xc9;		/* xor %ecx, %ecx */
		}
		/* a direct call if func is in reach from anywhere in the block */
		long rel = (long)(unsigned long)e->func - (long)(unsigned long)b;
		if (rel > INT32_MIN + 2 * BODY_SIZE && rel < INT32_MAX - 2 * BODY_SIZE) {
			callfn[ncalls] = (unsigned long)e->func;
			calls[ncalls++] = k;
			v[k++] = 0xe8;				/* call func (below) */
			k += 4;
		} else {	/* r11: free here, rax may not be saved */
			v[k++] = 0x49; v[k++] = 0xbb;		/* movabs func, %r11 */
			q = (uint64_t)(unsigned long)e->func;
			memcpy(v + k, &q, 8); k += 8;
			v[k++] = 0x41; v[k++] = 0xff; v[k++] = 0xd3;	/* call *%r11 */
		}
		v[je] = (uint8_t)(k - (je + 1));
	}
	if (errno_kept) {
		emit_self_r11(v, &k);
		EMIT_ERRNO_P_RAX(v, &k);
		v[k++] = 0x59;					/* pop %rcx */
		v[k++] = 0x89; v[k++] = 0x08;			/* mov %ecx, (%rax) */
	} else if (pad) {
		v[k++] = 0x48; v[k++] = 0x83; v[k++] = 0xc4; v[k++] = 8;	/* add $8, %rsp */
	}
	for (unsigned r = 16; r-- > 0;)
		if (save & UKP_GPR(r))
			emit_push_pop(v, &k, r, true);		/* on into the tail */
	if (k > BODY_TAIL)
		return 0;
	size_t start = BODY_TAIL - k;
	for (size_t i = 0; i < ncalls; i++) {	/* the calls' displacements */
		size_t at = calls[i];
		d = (int32_t)((long)callfn[i] - (long)(unsigned long)(b + start + at + 5));
		memcpy(v + at + 1, &d, 4);
	}
	memcpy(c + start, v, k);
	return k;
}

/* ---- filters ------------------------------------------------------------------ */

static bool ips_has(const struct ft_ips *s, unsigned long ip)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == ip)
			return true;
	return false;
}

static bool pat_matches(const struct ft_pat *p, const struct ft_site *s)
{
	if (p->obj && fnmatch(p->obj, s->obj, 0))
		return false;
	return !fnmatch(p->glob, s->name, 0);
}

static bool filter_matches(const struct ft_filter *f, const struct ft_site *s)
{
	if (ips_has(&f->ips, s->addr))
		return true;
	for (const struct ft_pat *p = f->pats; p; p = p->next)
		if (pat_matches(p, s))
			return true;
	return false;
}

static bool filter_empty(const struct ft_filter *f)
{
	return !f->pats && !f->ips.n;
}

static bool traces(const struct ft_opp *o, const struct ft_site *s)
{
	if (filter_matches(&o->notrace, s))
		return false;
	return filter_empty(&o->filter) || filter_matches(&o->filter, s);
}

static bool active(const struct ft_opp *o)
{
	return o->registered && (ft_enabled || (o->ops->flags & FTRACE_OPS_FL_PERMANENT));
}

static void filter_free(struct ft_filter *f)
{
	while (f->pats) {
		struct ft_pat *p = f->pats;
		f->pats = p->next;
		free(p->obj);
		free(p->glob);
		free(p);
	}
	free(f->ips.v);
	f->ips.v = NULL;
	f->ips.n = 0;
}

static int filter_copy(struct ft_filter *dst, const struct ft_filter *src)
{
	struct ft_pat **tail = &dst->pats;
	memset(dst, 0, sizeof(*dst));
	for (const struct ft_pat *p = src->pats; p; p = p->next) {
		struct ft_pat *q = calloc(1, sizeof(*q));
		if (!q || !(q->glob = strdup(p->glob)) || (p->obj && !(q->obj = strdup(p->obj)))) {
			if (q) {
				free(q->glob);
				free(q);
			}
			filter_free(dst);
			return -ENOMEM;
		}
		*tail = q;
		tail = &q->next;
	}
	if (src->ips.n) {
		dst->ips.v = malloc(src->ips.n * sizeof(unsigned long));
		if (!dst->ips.v) {
			filter_free(dst);
			return -ENOMEM;
		}
		memcpy(dst->ips.v, src->ips.v, src->ips.n * sizeof(unsigned long));
		dst->ips.n = src->ips.n;
	}
	return 0;
}

static struct ft_opp *opp_of(struct ftrace_ops *ops, bool make)
{
	struct ft_opp *o = ops->__ukp_priv[0];
	if (o || !make)
		return o;
	o = calloc(1, sizeof(*o));
	if (o) {
		o->ops = ops;
		ops->__ukp_priv[0] = o;
		o->all_next = all_opps;
		all_opps = o;
	}
	return o;
}

/* ---- computing what each site calls ----------------------------------------------- */

static bool is_regs(unsigned long f)
{
	return f & (FTRACE_OPS_FL_SAVE_REGS | FTRACE_OPS_FL_SAVE_REGS_IF_SUPPORTED);
}

static size_t wanted(const struct ft_site *s, struct ft_ent *e, size_t max)
{
	size_t n = 0;
	if (s->dead)
		return 0;
	for (struct ft_opp *o = ops_head; o && n < max; o = o->next)
		if (active(o) && traces(o, s))
			e[n++] = (struct ft_ent){ o->ops->func, o->ops, o, o->ops->flags };
	if (s->kprobe && n < max)
		e[n++] = (struct ft_ent){ ukp_ftrace_kprobe_func, &kprobe_ops, &kprobe_opp,
					  FTRACE_OPS_FL_SAVE_REGS | FTRACE_OPS_FL_IPMODIFY };
	return n;
}

static bool same(const struct ft_cfg *c, const struct ft_ent *e, size_t n)
{
	if (!c)
		return n == 0;
	if (c->n != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (c->e[i].opp != e[i].opp || c->e[i].func != e[i].func ||
		    c->e[i].flags != e[i].flags)
			return false;
	return true;
}

static struct ft_cfg *cfg_new(struct ft_site *s, const struct ft_ent *e, size_t n)
{
	struct ft_cfg *c = calloc(1, sizeof(*c) + n * sizeof(c->e[0]));
	if (!c)
		return NULL;
	memcpy(c->e, e, n * sizeof(*e));
	c->n = (unsigned)n;
	c->ip = s->addr;
	c->site = s;
	bool rec = false;
	for (size_t i = 0; i < n; i++) {
		c->regs |= is_regs(e[i].flags);
		c->vec |= e[i].opp == &kprobe_opp || !e[i].opp->gpr_only;
		rec |= (e[i].flags & FTRACE_OPS_FL_RECURSION) != 0;
	}
	c->ops = e[0].ops;
	c->func = e[0].func;
	c->opp = e[0].opp;
	c->walk = rec ? ukp_ftrace_walk_c : ukp_ftrace_walk;
	bool leaf = n == 1 && e[0].opp->leaf;
	if (n == 1 && !c->regs && !c->vec && !rec)
		c->tramp = leaf ? ukp_ftrace_tramp_one_leaf : ukp_ftrace_tramp_one;
	else if (n == 1 && !c->vec && !rec)
		c->tramp = leaf ? ukp_ftrace_tramp_regs_one_leaf : ukp_ftrace_tramp_regs_one;
	else if (!c->regs && !c->vec && !rec)
		c->tramp = ukp_ftrace_tramp_list_lean;
	else if (c->regs)
		c->tramp = c->vec ? ukp_ftrace_tramp_regs_vec : ukp_ftrace_tramp_regs;
	else
		c->tramp = c->vec ? ukp_ftrace_tramp_list_vec : ukp_ftrace_tramp_list;
	if (c->tramp == ukp_ftrace_tramp_one || c->tramp == ukp_ftrace_tramp_one_leaf ||
	    (c->tramp == ukp_ftrace_tramp_list_lean && n <= 3)) {
		/* its own code; without memory for it, the same through
		 * the cfg word and entry.S */
		uint8_t code[BODY_SIZE];
		uint8_t *b = NULL;
		memset(code, 0xcc, sizeof(code));
		if (s->nspare) {
			b = s->spare[--s->nspare];
		} else if ((b = ukp_slot_alloc((unsigned long)s->stub, BODY_SIZE)) != NULL) {
			body_tail(code);	/* written once, never changed */
			if (ukp_slot_write_raw(b, code, sizeof(code)))
				b = NULL;
		}
		size_t len = b ? body_code(code, b, c) : 0;
		if (len && !ukp_slot_write_raw(b + BODY_TAIL - len, code + BODY_TAIL - len, len)) {
			c->body = b;
			c->entry = b + BODY_TAIL - len;
		} else if (b && s->nspare < sizeof(s->spare) / sizeof(s->spare[0])) {
			s->spare[s->nspare++] = b;
		}
	}
	return c;
}

/* A cfg no thread uses any more (a grace period after it was replaced, or
 * never published); its code goes back to its site. */
static void cfg_free_locked(struct ft_cfg *c)
{
	if (!c)
		return;
	struct ft_site *s = c->site;
	if (c->body && s->nspare < sizeof(s->spare) / sizeof(s->spare[0]))
		s->spare[s->nspare++] = c->body;
	free(c);
}

/* Bring the sites (all if v is NULL) to what the registered ops want. */
static int apply_locked(struct ft_site **only, size_t nonly)
{
	struct ft_tab *t = atomic_load(&tab);
	size_t n = only ? nonly : t ? t->n : 0;
	struct ft_site **pv = malloc((n + 1) * sizeof(*pv));
	unsigned long *pt = malloc((n + 1) * sizeof(*pt));
	struct ft_site **cs = malloc((n + 1) * sizeof(*cs));
	struct ft_cfg **cc = malloc((n + 1) * sizeof(*cc));
	size_t max = 1;		/* every registered ops, and the kprobes */
	for (struct ft_opp *o = ops_head; o; o = o->next)
		max++;
	struct ft_ent *e = malloc(max * sizeof(*e));
	size_t np = 0;
	int err = 0;

	if (!pv || !pt || !e || !cs || !cc) {
		free(pv);
		free(pt);
		free(e);
		free(cs);
		free(cc);
		return -ENOMEM;
	}
	/* first every new cfg and its code, written where no thread runs */
	size_t nc = 0;
	bool bodies = false;
	for (size_t i = 0; i < n; i++) {
		struct ft_site *s = only ? only[i] : t->v[i];
		if (s->shared)
			continue;	/* untraced here for good: ft_fork_child */
		size_t ne = wanted(s, e, max);
		if (same(s->cfg, e, ne))
			continue;
		struct ft_cfg *c = NULL;
		if (ne) {
			if (!s->stub && (err = make_stub(s)) != 0)
				break;
			c = cfg_new(s, e, ne);
			if (!c) {
				err = -ENOMEM;
				break;
			}
			bodies |= c->body != NULL;
		}
		cs[nc] = s;
		cc[nc++] = c;
	}
	if (err) {
		while (nc--)
			cfg_free_locked(cc[nc]);
		nc = 0;
	}
	if (bodies)
		ukp_text_serialize();
	/* then publish them: one store each (the cfg word, then the jmp) */
	for (size_t i = 0; i < nc; i++) {
		struct ft_site *s = cs[i];
		struct ft_cfg *c = cc[i];
		if (s->stub) {
			ukp_slot_set_word(s->stub + STUB_CFG, (uint64_t)(unsigned long)(c ? c : &cfg_none));
			ukp_slot_set_u32(s->stub + stub_disp,
					 stub_rel(s, c && c->body ? c->entry : s->stub + stub_far));
		}
		if (s->cfg) {
			s->cfg->next_garbage = garbage;
			garbage = s->cfg;
		}
		s->cfg = c;
		if ((c != NULL) != s->active) {
			pv[np] = s;
			pt[np++] = c ? (unsigned long)s->stub : 0;
		}
	}
	if (np) {
		int e2 = ft_patch(pv, pt, np);
		if (!e2) {
			for (size_t i = 0; i < np; i++)
				pv[i]->active = pt[i] != 0;
		} else if (!err) {
			err = e2;
		}
	}
	free(pv);
	free(pt);
	free(e);
	free(cs);
	free(cc);
	return err;
}

/* After the lock is dropped: a grace period, then free what was retired. */
static void reap(void)
{
	ukp_lock_registry();
	struct ft_cfg *g = garbage;
	garbage = NULL;
	struct ft_transtab *tg[64];
	size_t ntg = ntrans_garbage;
	memcpy(tg, trans_garbage, ntg * sizeof(tg[0]));
	ntrans_garbage = 0;
	pthread_mutex_unlock(&ukp_lock);
	ukp_ftrace_synchronize();
	if (ntg) {
		ukp_synchronize();
		for (size_t i = 0; i < ntg; i++)
			free(tg[i]);
	}
	if (!g)
		return;
	pthread_mutex_lock(&ukp_lock);	/* the sites' spare code */
	while (g) {
		struct ft_cfg *next = g->next_garbage;
		cfg_free_locked(g);
		g = next;
	}
	pthread_mutex_unlock(&ukp_lock);
}

void ukp_ftrace_reap(void)
{
	if (__atomic_load_n(&garbage, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&ntrans_garbage, __ATOMIC_RELAXED))
		reap();
}

/* Would o, tracing the sites its filters select, share a site with
 * another IPMODIFY ops? */
static const struct ft_site *ipmodify_conflict(const struct ft_opp *o)
{
	struct ft_tab *t = atomic_load(&tab);
	if (!(o->ops->flags & FTRACE_OPS_FL_IPMODIFY))
		return NULL;
	for (size_t i = 0; t && i < t->n; i++) {
		const struct ft_site *s = t->v[i];
		if (s->dead || !traces(o, s))
			continue;
		for (struct ft_opp *x = ops_head; x; x = x->next)
			if (x != o && x->registered && (x->ops->flags & FTRACE_OPS_FL_IPMODIFY) &&
			    traces(x, s))
				return s;
	}
	return NULL;
}

/* ---- init and objects ------------------------------------------------------------- */

/*
 * A fork child that could not make the slot memory its own shares the
 * sites' stubs with its parent (slots.c), whose later changes write its
 * own cfg and code addresses into them: the child must not run them, nor
 * write its own there.  So every site whose stub is shared goes back to
 * its nops in the child (its own copy of the text) and stays untraced
 * here.  The child is one thread and this runs before fork() returns in
 * it, so the bytes are simply written, the code page made writable for
 * the moment: the usual text writes need a descriptor (/proc/self/mem,
 * or /proc/self/maps for the protections), and none may be left.
 */
static bool child_unpatch(const struct ft_site *s)
{
	uint8_t code[6];
	site_code(s, 0, code);
	unsigned long lo = s->addr & ~4095UL, hi = (s->addr + s->len + 4095) & ~4095UL;
	if (mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE | PROT_EXEC))
		return false;
	memcpy((void *)s->addr, code, s->len);
	mprotect((void *)lo, hi - lo, PROT_READ | PROT_EXEC);	/* code pages are r-x */
	return true;
}

static void ft_fork_child(void)
{
	struct ft_tab *t = atomic_load(&tab);
	size_t nshared = 0, nleft = 0;
	if (!t)
		return;
	ukp_lock_registry();
	for (size_t i = 0; i < t->n; i++) {
		struct ft_site *s = t->v[i];
		if (!s->stub || !ukp_slot_is_shared(s->stub))
			continue;
		s->shared = true;
		nshared++;
		if (s->active && !child_unpatch(s)) {
			nleft++;	/* still calls the stub: its cfg stays */
			continue;
		}
		s->active = false;
		if (s->cfg) {
			s->cfg->next_garbage = garbage;
			garbage = s->cfg;
			s->cfg = NULL;
		}
	}
	pthread_mutex_unlock(&ukp_lock);
	if (nshared)
		ukp_log("fork child: %zu ftrace hooks shared with the parent (no memory of "
			"its own): those functions are not traced here%s", nshared,
			nleft ? "; some could not be taken out (mprotect), and run the "
				"parent's hooks" : "");
}

void ukp_ftrace_init_locked(void)
{
	unsigned long fs;
	__asm__ volatile("mov %%fs:0, %0" : "=r"(fs));
	tls_self = (unsigned long)&ukp_self - fs;
	kprobe_ops.func = ukp_ftrace_kprobe_func;
	kprobe_ops.flags = FTRACE_OPS_FL_SAVE_REGS | FTRACE_OPS_FL_IPMODIFY;
	scan_objects_locked(false);
	if (!initialised)
		pthread_atfork(NULL, NULL, ft_fork_child);	/* after slots.c's */
	initialised = true;
}

void ukp_ftrace_objects_changed_locked(void)
{
	if (!initialised)
		return;
	scan_objects_locked(true);
	if (ops_head)
		apply_locked(NULL, 0);
}

int ukp_ftrace_kprobe_arm_locked(unsigned long addr, bool on)
{
	struct ft_site *s = site_of(addr);
	if (!s || s->dead)
		return -ENOENT;
	if (s->shared && on) {
		ukp_log("kprobe at %s: its ftrace hook is shared with the parent process "
			"(fork without a descriptor for memory of its own)", s->name);
		return -EBUSY;
	}
	if (s->kprobe == on)
		return 0;
	s->kprobe = on;
	return apply_locked(&s, 1);
}

/* ---- the API -------------------------------------------------------------------- */

static void lock(void)
{
	ukp_init_once();
	ukp_lock_registry();
}

int register_ftrace_function(struct ftrace_ops *ops)
{
	if (!ops || !ops->func) {
		ukp_log("register_ftrace_function: %s is NULL", ops ? "ops->func" : "ops");
		return -EINVAL;
	}
	if ((ops->flags & FTRACE_OPS_FL_IPMODIFY) && !is_regs(ops->flags)) {
		ukp_log("register_ftrace_function: IPMODIFY needs SAVE_REGS");
		return -EINVAL;
	}
	lock();
	struct ft_opp *o = opp_of(ops, true);
	int err = 0;
	const struct ft_site *c;
	if (!o) {
		err = -ENOMEM;
	} else if (o->registered) {
		ukp_log("register_ftrace_function: ops %p is already registered", (void *)ops);
		err = -EBUSY;
	} else if ((ops->flags & FTRACE_OPS_FL_PERMANENT) && !ft_enabled) {
		ukp_log("register_ftrace_function: a PERMANENT ops while ftrace is disabled");
		err = -EBUSY;
	} else if ((c = ipmodify_conflict(o)) != NULL) {
		ukp_log("register_ftrace_function: %s already has an IPMODIFY ops", c->name);
		err = -EBUSY;
	}
	if (!err) {
		o->gpr_only = ukp_opt_gpr_only_locked((unsigned long)ops->func);
		o->leaf = o->gpr_only && ukp_opt_leaf_regs_locked((unsigned long)ops->func,
								   &o->writes, &o->reads);
		o->registered = true;
		atomic_store(&o->live, 1);
		o->next = NULL;
		struct ft_opp **pp = &ops_head;
		while (*pp)
			pp = &(*pp)->next;
		*pp = o;
		ops->flags |= FTRACE_OPS_FL_ENABLED;
		err = apply_locked(NULL, 0);
		if (err) {
			ukp_log("register_ftrace_function: cannot patch every site: %s", strerror(-err));
			atomic_store(&o->live, 0);
			o->registered = false;
			*pp = NULL;
			ops->flags &= ~FTRACE_OPS_FL_ENABLED;
			apply_locked(NULL, 0);
		}
	}
	pthread_mutex_unlock(&ukp_lock);
	if (err)
		reap();
	return err;
}

int unregister_ftrace_function(struct ftrace_ops *ops)
{
	if (!ops)
		return -EINVAL;
	lock();
	struct ft_opp *o = opp_of(ops, false);
	if (!o || !o->registered) {
		pthread_mutex_unlock(&ukp_lock);
		ukp_log("unregister_ftrace_function: ops %p is not registered", (void *)ops);
		return -EINVAL;
	}
	atomic_store(&o->live, 0);	/* a stub's old cfg skips it from now */
	o->registered = false;
	for (struct ft_opp **pp = &ops_head; *pp; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			break;
		}
	ops->flags &= ~FTRACE_OPS_FL_ENABLED;
	int err = apply_locked(NULL, 0);
	pthread_mutex_unlock(&ukp_lock);
	reap();		/* no callback of ops runs after this */
	return err;
}

/*
 * Make nf o's filter or notrace list (*cur), unless o, registered, would
 * then share a site with another IPMODIFY ops (-EBUSY, nothing changes);
 * then bring the sites along.  Called with ukp_lock held; drops it.
 */
static int filter_commit(const char *fn, struct ft_opp *o, struct ft_filter *cur,
			 struct ft_filter nf)
{
	struct ft_filter old = *cur;
	*cur = nf;
	const struct ft_site *c = o->registered ? ipmodify_conflict(o) : NULL;
	if (c) {
		ukp_log("%s: %s already has an IPMODIFY ops", fn, c->name);
		*cur = old;
		filter_free(&nf);
		pthread_mutex_unlock(&ukp_lock);
		return -EBUSY;
	}
	filter_free(&old);
	int err = o->registered ? apply_locked(NULL, 0) : 0;
	pthread_mutex_unlock(&ukp_lock);
	reap();
	return err;
}

/* One filter word: "glob" or "object:glob".  Does it match a live site? */
static int parse_pat(const char *w, size_t n, struct ft_pat **out, size_t *matches)
{
	struct ft_pat *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	const char *colon = memchr(w, ':', n);
	if (colon) {
		p->obj = strndup(w, (size_t)(colon - w));
		p->glob = strndup(colon + 1, n - (size_t)(colon - w) - 1);
	} else {
		p->glob = strndup(w, n);
	}
	if (!p->glob || (colon && !p->obj)) {
		free(p->obj);
		free(p->glob);
		free(p);
		return -ENOMEM;
	}
	struct ft_tab *t = atomic_load(&tab);
	*matches = 0;
	for (size_t i = 0; t && i < t->n; i++)
		if (!t->v[i]->dead && pat_matches(p, t->v[i]))
			(*matches)++;
	*out = p;
	return 0;
}

static int set_regex(struct ftrace_ops *ops, unsigned char *buf, int len, int reset,
		     bool notrace)
{
	const char *fn = notrace ? "ftrace_set_notrace" : "ftrace_set_filter";
	if (!ops) {
		ukp_log("%s: ops is NULL", fn);
		return -EINVAL;
	}
	if (buf && len < 0) {
		ukp_log("%s: negative length %d", fn, len);
		return -EINVAL;
	}
	lock();
	struct ft_opp *o = opp_of(ops, true);
	struct ft_filter nf;
	int err = o ? 0 : -ENOMEM;
	if (!err) {
		if (reset)
			memset(&nf, 0, sizeof(nf));
		else
			err = filter_copy(&nf, notrace ? &o->notrace : &o->filter);
	}
	const char *s = (const char *)buf;
	size_t n = buf ? strnlen(s, (size_t)len) : 0;
	for (size_t i = 0; !err && i < n;) {
		while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == ','))
			i++;
		size_t j = i;
		while (j < n && !(s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == ','))
			j++;
		if (j == i)
			break;
		struct ft_pat *p;
		size_t m;
		err = parse_pat(s + i, j - i, &p, &m);
		if (err)
			break;
		if (!m) {
			ukp_log("%s: '%.*s' matches no traceable function", fn, (int)(j - i), s + i);
			free(p->obj);
			free(p->glob);
			free(p);
			err = -EINVAL;
			break;
		}
		p->next = nf.pats;
		nf.pats = p;
		i = j;
	}
	if (err) {
		if (o)
			filter_free(&nf);
		pthread_mutex_unlock(&ukp_lock);
		return err;
	}
	return filter_commit(fn, o, notrace ? &o->notrace : &o->filter, nf);
}

int ftrace_set_filter(struct ftrace_ops *ops, unsigned char *buf, int len, int reset)
{
	return set_regex(ops, buf, len, reset, false);
}

int ftrace_set_notrace(struct ftrace_ops *ops, unsigned char *buf, int len, int reset)
{
	return set_regex(ops, buf, len, reset, true);
}

int ftrace_set_filter_ip(struct ftrace_ops *ops, unsigned long ip, int remove, int reset)
{
	if (!ops) {
		ukp_log("ftrace_set_filter_ip: ops is NULL");
		return -EINVAL;
	}
	lock();
	struct ft_opp *o = opp_of(ops, true);
	if (!o) {
		pthread_mutex_unlock(&ukp_lock);
		return -ENOMEM;
	}
	struct ft_site *s = ip ? site_of(ip) : NULL;
	if (ip && (!s || s->dead)) {
		pthread_mutex_unlock(&ukp_lock);
		ukp_log("ftrace_set_filter_ip: %#lx is not a patch site (a traced function's entry)", ip);
		return -ENOENT;
	}
	struct ft_filter nf;
	int err = 0;
	if (reset)
		memset(&nf, 0, sizeof(nf));
	else
		err = filter_copy(&nf, &o->filter);
	if (!err && ip) {
		bool has = ips_has(&nf.ips, ip);
		if (remove) {
			if (!has) {
				ukp_log("ftrace_set_filter_ip: %#lx is not in the filter", ip);
				err = -ENOENT;
			}
			for (size_t i = 0; has && i < nf.ips.n; i++)
				if (nf.ips.v[i] == ip)
					nf.ips.v[i--] = nf.ips.v[--nf.ips.n];
		} else if (!has) {
			unsigned long *g = realloc(nf.ips.v, (nf.ips.n + 1) * sizeof(*g));
			if (!g)
				err = -ENOMEM;
			else
				(nf.ips.v = g)[nf.ips.n++] = ip;
		}
	}
	if (err) {
		filter_free(&nf);
		pthread_mutex_unlock(&ukp_lock);
		return err;
	}
	return filter_commit("ftrace_set_filter_ip", o, &o->filter, nf);
}

int ftrace_set_enabled(int on)
{
	lock();
	ft_enabled = on != 0;
	int err = apply_locked(NULL, 0);
	pthread_mutex_unlock(&ukp_lock);
	reap();
	return err;
}

int ftrace_get_enabled(void)
{
	return __atomic_load_n(&ft_enabled, __ATOMIC_RELAXED);
}

/* ---- listing ----------------------------------------------------------------------- */

static void site_line(FILE *out, const struct ft_site *s)
{
	fprintf(out, "%016lx  %s", s->addr, s->name);
	if (!s->is_main)
		fprintf(out, " [%s]", s->obj);
}

int ftrace_available_functions(FILE *out)
{
	if (!out)
		return -EINVAL;
	lock();
	struct ft_tab *t = atomic_load(&tab);
	int n = 0;
	for (size_t i = 0; t && i < t->n; i++) {
		if (t->v[i]->dead)
			continue;
		site_line(out, t->v[i]);
		fputc('\n', out);
		n++;
	}
	pthread_mutex_unlock(&ukp_lock);
	return n;
}

int ftrace_enabled_functions(FILE *out)
{
	if (!out)
		return -EINVAL;
	lock();
	struct ft_tab *t = atomic_load(&tab);
	int n = 0;
	for (size_t i = 0; t && i < t->n; i++) {
		const struct ft_site *s = t->v[i];
		if (s->dead || !s->cfg)
			continue;
		bool ipm = false;
		for (unsigned k = 0; k < s->cfg->n; k++)
			ipm |= (s->cfg->e[k].flags & FTRACE_OPS_FL_IPMODIFY) &&
			       s->cfg->e[k].opp != &kprobe_opp;
		site_line(out, s);
		fprintf(out, " (%u)%s%s%s\n", s->cfg->n, s->cfg->regs ? " R" : "",
			ipm ? " I" : "", s->kprobe ? " K" : "");
		n++;
	}
	pthread_mutex_unlock(&ukp_lock);
	return n;
}
