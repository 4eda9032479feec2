/* SPDX-License-Identifier: MIT */
/*
 * Stack traces: the kernel's stack_trace_save() family (docs/stacktrace.md).
 *
 * The walker reads the rules of .eh_frame: _dl_find_object() (lock-free,
 * async-signal-safe) gives the object's .eh_frame_hdr, whose binary search
 * table gives the FDE; its CFA and register rules, interpreted up to the
 * frame's address, come down to "CFA = sp or bp + n (or *(bp + n)), the
 * return address and the caller's bp at CFA + m", one word per code
 * address, kept in a table every thread reads and fills without a lock.
 * Code with no rule is walked by its frame pointer.
 *
 * Nothing here allocates, locks or faults: stack words are read only on
 * pages known readable (a few page ranges per thread, each page checked
 * once with process_vm_readv, or ukp_copy_nofault where that is
 * forbidden); the objects' unwind tables are read where the dynamic
 * linker says they are mapped.
 *
 * What the walk shows is the program's: a kretprobe's stub is replaced by
 * the return address it stands for (kret.c), and ukprobes' own frames are
 * left out: met inside a handler, the walk goes on from the probed code's
 * registers (the thread block's cur_regs); met inside an ftrace callback,
 * from the traced function's entry, found by the return into its patch
 * site that the trampoline's frame holds.
 *
 * Built with -mgeneral-regs-only: it leaves the vector, x87 and MXCSR
 * state alone, whichever way a handler calling it was entered.
 */
#include "internal.h"
#include "arch/x86_64/unwind.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

extern char __start_ukp_text[] __attribute__((weak, visibility("hidden")));
extern char __stop_ukp_text[] __attribute__((weak, visibility("hidden")));
extern char ukp_ftrace_tramp_begin[] __attribute__((visibility("hidden")));
extern char ukp_ftrace_tramp_end[] __attribute__((visibility("hidden")));
extern char ukp_ftrace_walk[] __attribute__((visibility("hidden")));
extern char ukp_ftrace_attach[] __attribute__((visibility("hidden")));

#define MAX_FRAMES 4096		/* a loop in a corrupt stack ends here */

/* ---- readable stack pages ------------------------------------------------- */

/*
 * Per thread: up to RANGES runs of pages known readable, each one word
 * (first page << 28 | pages), so a signal's walk meanwhile sees a run
 * whole or not at all.  Stacks stay mapped while their thread lives.
 */
#define RANGES 4
#define RUN_BITS 28
static __thread uint64_t ok_run[RANGES];
static __thread unsigned ok_next;

static bool page_known(unsigned long pg)
{
	for (int i = 0; i < RANGES; i++) {
		uint64_t r = __atomic_load_n(&ok_run[i], __ATOMIC_RELAXED);
		if (pg - (r >> RUN_BITS) < (r & ((1UL << RUN_BITS) - 1)))
			return true;
	}
	return false;
}

static void page_learn(unsigned long pg)
{
	if (pg >> (64 - RUN_BITS))	/* no room in a run's word: checked */
		return;			/* again at every read */
	for (int i = 0; i < RANGES; i++) {
		uint64_t r = ok_run[i], lo = r >> RUN_BITS, n = r & ((1UL << RUN_BITS) - 1);
		if (!n || n + 1 >= 1UL << RUN_BITS)
			continue;
		if (pg == lo + n) {
			__atomic_store_n(&ok_run[i], r + 1, __ATOMIC_RELAXED);
			return;
		}
		if (pg + 1 == lo) {
			__atomic_store_n(&ok_run[i], (uint64_t)pg << RUN_BITS | (n + 1), __ATOMIC_RELAXED);
			return;
		}
	}
	__atomic_store_n(&ok_run[ok_next++ % RANGES], (uint64_t)pg << RUN_BITS | 1, __ATOMIC_RELAXED);
}

/* Is the page readable?  Without faulting: the kernel reads a byte of it
 * for us, or (no process_vm_readv here: seccomp) ukp_copy_nofault does
 * where its faults reach our handler. */
static bool page_check(unsigned long pg)
{
	char b;
	struct iovec l = { &b, 1 }, r = { (void *)(pg << 12), 1 };
	long pid = ukp_raw_syscall(SYS_getpid, 0, 0, 0, 0, 0, 0);
	long n = ukp_raw_syscall(SYS_process_vm_readv, pid, (long)&l, 1, (long)&r, 1, 0);
	if (n == 1)
		return true;
	if (n != -ENOSYS && n != -EPERM)
		return false;
	sigset_t m;
	memset(&m, 0, sizeof(m));
	if (ukp_raw_syscall(SYS_rt_sigprocmask, SIG_BLOCK, 0, (long)&m, 8, 0, 0) != 0 ||
	    !ukp_nofault_usable(&m))
		return false;
	return ukp_copy_nofault(&b, (const void *)(pg << 12), 1) == 0;
}

/* A stack word, or false if it cannot be read (not aligned, not mapped) */
static inline bool rd(unsigned long a, unsigned long *v)
{
	if (a & 7)
		return false;
	unsigned long pg = a >> 12;
	if (__builtin_expect(!page_known(pg), 0)) {
		if (!page_check(pg))
			return false;
		page_learn(pg);
	}
	*v = *(const unsigned long *)a;
	return true;
}

/* ---- the rules of one code address ------------------------------------------ */

/*
 * One word: how the caller's frame is found from this one.
 *   bits 0-1	CFA: 1 sp + off, 2 bp + off, 3 *(bp + off)
 *   bit 2	the return address is saved at CFA + ra (else: the
 *		outermost frame, its return address undefined)
 *   bit 3	the caller's bp is saved at CFA + bpo (else unchanged)
 *   bit 4	a signal frame ('S'): the kernel's ucontext is at sp
 *   bits 8-15	ra / 8, signed;  bits 16-23 bpo / 8, signed
 *   bits 24-31	the objects' generation it was read in
 *   bits 32-63	off, signed
 * 0: no rule (no FDE, or one this walker does not follow).
 */
#define R_CFA_SP	1
#define R_CFA_BP	2
#define R_CFA_DEREF	3
#define R_RA		(1 << 2)
#define R_BP		(1 << 3)
#define R_SIG		(1 << 4)

static inline int r_kind(uint64_t r) { return (int)(r & 3); }
static inline long r_ra(uint64_t r) { return (long)(int8_t)(r >> 8) * 8; }
static inline long r_bpo(uint64_t r) { return (long)(int8_t)(r >> 16) * 8; }
static inline long r_off(uint64_t r) { return (long)(int32_t)(r >> 32); }

/* bumped by every change of the objects (under ukp_lock) */
static _Atomic unsigned stack_gen;

/* ---- the rule cache ------------------------------------------------------- */

/*
 * Direct-mapped, two ways.  A writer claims an entry by swapping its key
 * for BUSY, then stores the rule and the key: a reader takes the rule if
 * the key it read before and after is its address (a rule is one word,
 * never torn), and its generation is the current one.  A writer that
 * finds BUSY (another thread, or the walk its signal interrupted) skips.
 */
#define CACHE_BITS 12
#define BUSY (~0UL)
struct centry {
	_Atomic unsigned long key;
	_Atomic uint64_t rule;
};
static struct centry cache[1 << CACHE_BITS];

static inline unsigned chash(unsigned long pc)
{
	return (unsigned)((pc * 0x9e3779b97f4a7c15UL) >> (64 - CACHE_BITS)) & ~1U;
}

static inline bool cache_get(unsigned long pc, unsigned gen, uint64_t *rule)
{
	struct centry *e = &cache[chash(pc)];
	for (int w = 0; w < 2; w++, e++) {
		if (atomic_load_explicit(&e->key, memory_order_acquire) != pc)
			continue;
		uint64_t r = atomic_load_explicit(&e->rule, memory_order_relaxed);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&e->key, memory_order_relaxed) != pc ||
		    ((r >> 24) & 0xff) != (gen & 0xff))
			continue;
		*rule = r;
		return true;
	}
	return false;
}

static void cache_put(unsigned long pc, uint64_t rule)
{
	unsigned h = chash(pc);
	struct centry *e = &cache[h | (unsigned)((pc >> 4) & 1)];
	unsigned long k = atomic_load_explicit(&e->key, memory_order_relaxed);
	if (k == BUSY || !atomic_compare_exchange_strong_explicit(&e->key, &k, BUSY,
								  memory_order_acquire,
								  memory_order_relaxed))
		return;
	atomic_store_explicit(&e->rule, rule, memory_order_relaxed);
	atomic_store_explicit(&e->key, pc, memory_order_release);
}

void ukp_stack_objects_changed(void)
{
	atomic_fetch_add(&stack_gen, 1);
	for (size_t i = 0; i < sizeof(cache) / sizeof(cache[0]); i++) {
		unsigned long k = atomic_load_explicit(&cache[i].key, memory_order_relaxed);
		if (k != BUSY)
			atomic_compare_exchange_strong(&cache[i].key, &k, 0);
	}
}

/* ---- .eh_frame ------------------------------------------------------------ */

struct cur {
	const uint8_t *p, *end;
	bool bad;
};

static uint64_t uleb(struct cur *c)
{
	uint64_t v = 0;
	for (unsigned s = 0; c->p < c->end; s += 7) {
		uint8_t b = *c->p++;
		if (s < 64)
			v |= (uint64_t)(b & 0x7f) << s;
		if (!(b & 0x80))
			return v;
	}
	c->bad = true;
	return 0;
}

static int64_t sleb(struct cur *c)
{
	uint64_t v = 0;
	unsigned s = 0;
	for (;;) {
		if (c->p >= c->end) {
			c->bad = true;
			return 0;
		}
		uint8_t b = *c->p++;
		if (s < 64)
			v |= (uint64_t)(b & 0x7f) << s;
		s += 7;
		if (!(b & 0x80)) {
			if (s < 64 && (b & 0x40))
				v |= ~0ULL << s;
			return (int64_t)v;
		}
	}
}

static uint64_t fixed(struct cur *c, unsigned n)
{
	if ((size_t)(c->end - c->p) < n) {
		c->bad = true;
		return 0;
	}
	uint64_t v = 0;
	memcpy(&v, c->p, n);	/* little-endian */
	c->p += n;
	return v;
}

#define PE_OMIT 0xff

/* A pointer in DW_EH_PE encoding enc (pcrel and datarel applied; data is
 * the .eh_frame_hdr for datarel) */
static unsigned long rd_enc(struct cur *c, uint8_t enc, unsigned long data)
{
	if (enc == PE_OMIT)
		return 0;
	unsigned long at = (unsigned long)c->p, v;
	switch (enc & 0x0f) {
	case 0x00: v = fixed(c, 8); break;
	case 0x01: v = uleb(c); break;
	case 0x02: v = fixed(c, 2); break;
	case 0x03: v = fixed(c, 4); break;
	case 0x04: v = fixed(c, 8); break;
	case 0x09: v = (unsigned long)sleb(c); break;
	case 0x0a: v = (unsigned long)(long)(int16_t)fixed(c, 2); break;
	case 0x0b: v = (unsigned long)(long)(int32_t)fixed(c, 4); break;
	case 0x0c: v = fixed(c, 8); break;
	default: c->bad = true; return 0;
	}
	switch (enc & 0x70) {
	case 0x00: break;
	case 0x10: v += at; break;
	case 0x30: v += data; break;
	default: c->bad = true; return 0;
	}
	if (enc & 0x80)		/* indirect: only in augmentation data we skip */
		c->bad = true;
	return v;
}

/* a register's rule, for the two registers a frame's rules need */
enum { RU_SAME, RU_UNDEF, RU_OFF, RU_OTHER };
struct rrule {
	uint8_t how;
	long off;
};
struct cfi {
	int cfa_reg;		/* DWARF number; -1: an expression */
	long cfa_off;
	bool cfa_deref;		/* the expression *(bp + cfa_off) */
	struct rrule ra, bp;
};

static struct rrule *reg_of(struct cfi *s, uint64_t reg)
{
	return reg == UKP_DW_RA ? &s->ra : reg == UKP_DW_BP ? &s->bp : NULL;
}

/* A CFA expression this walker follows: DW_OP_breg6 n; DW_OP_deref (the
 * frame of a function that realigns its stack) */
static void cfa_expr(struct cfi *s, const uint8_t *p, uint64_t len)
{
	struct cur c = { p, p + len, false };
	s->cfa_reg = -1;
	s->cfa_deref = false;
	if (len < 3 || *c.p++ != 0x76)	/* DW_OP_breg6 */
		return;
	long off = (long)sleb(&c);
	if (c.bad || c.p + 1 != c.end || *c.p != 0x06)	/* DW_OP_deref */
		return;
	s->cfa_reg = UKP_DW_BP;
	s->cfa_off = off;
	s->cfa_deref = true;
}

/*
 * Runs CFA instructions [c) until the location passes pc.  init: the
 * CIE's rules (DW_CFA_restore), NULL while running the CIE's own.
 * false: an instruction this walker cannot follow.
 */
#define CFI_STACK 8
static bool cfi_run(struct cur *c, struct cfi *s, const struct cfi *init,
		    unsigned long *loc, unsigned long pc, uint64_t caf, int64_t daf,
		    uint8_t fde_enc)
{
	struct cfi stack[CFI_STACK];
	unsigned depth = 0;

	while (c->p < c->end && !c->bad) {
		uint8_t op = *c->p++, low = op & 0x3f;
		uint64_t reg, adv = 0;
		struct rrule *r;
		switch (op >> 6) {
		case 1:		/* DW_CFA_advance_loc */
			adv = low * caf;
			goto advance;
		case 2:		/* DW_CFA_offset */
			reg = low;
			if ((r = reg_of(s, reg)))
				*r = (struct rrule){ RU_OFF, (long)uleb(c) * daf };
			else
				uleb(c);
			continue;
		case 3:		/* DW_CFA_restore */
			if ((r = reg_of(s, low)))
				*r = init ? *reg_of((struct cfi *)init, low) : (struct rrule){ RU_SAME, 0 };
			continue;
		}
		switch (op) {
		case 0x00:	/* nop */
			break;
		case 0x01:	/* set_loc */
			*loc = rd_enc(c, fde_enc, 0);
			if (*loc > pc)
				return true;
			break;
		case 0x02: adv = fixed(c, 1) * caf; goto advance;
		case 0x03: adv = fixed(c, 2) * caf; goto advance;
		case 0x04: adv = fixed(c, 4) * caf; goto advance;
		case 0x05:	/* offset_extended */
			reg = uleb(c);
			if ((r = reg_of(s, reg)))
				*r = (struct rrule){ RU_OFF, (long)uleb(c) * daf };
			else
				uleb(c);
			break;
		case 0x11:	/* offset_extended_sf */
			reg = uleb(c);
			if ((r = reg_of(s, reg)))
				*r = (struct rrule){ RU_OFF, (long)sleb(c) * daf };
			else
				sleb(c);
			break;
		case 0x06:	/* restore_extended */
			reg = uleb(c);
			if ((r = reg_of(s, reg)))
				*r = init ? *reg_of((struct cfi *)init, reg) : (struct rrule){ RU_SAME, 0 };
			break;
		case 0x07:	/* undefined */
			if ((r = reg_of(s, uleb(c))))
				*r = (struct rrule){ RU_UNDEF, 0 };
			break;
		case 0x08:	/* same_value */
			if ((r = reg_of(s, uleb(c))))
				*r = (struct rrule){ RU_SAME, 0 };
			break;
		case 0x09:	/* register */
			if ((r = reg_of(s, uleb(c))))
				*r = (struct rrule){ RU_OTHER, 0 };
			uleb(c);
			break;
		case 0x0a:	/* remember_state */
			if (depth == CFI_STACK)
				return false;
			stack[depth++] = *s;
			break;
		case 0x0b:	/* restore_state */
			if (!depth)
				return false;
			*s = stack[--depth];	/* the whole row, CFA too */
			break;
		case 0x0c:	/* def_cfa */
			s->cfa_reg = (int)uleb(c);
			s->cfa_off = (long)uleb(c);
			s->cfa_deref = false;
			break;
		case 0x12:	/* def_cfa_sf */
			s->cfa_reg = (int)uleb(c);
			s->cfa_off = (long)sleb(c) * daf;
			s->cfa_deref = false;
			break;
		case 0x0d:	/* def_cfa_register */
			s->cfa_reg = (int)uleb(c);
			s->cfa_deref = false;
			break;
		case 0x0e:	/* def_cfa_offset */
			s->cfa_off = (long)uleb(c);
			break;
		case 0x13:	/* def_cfa_offset_sf */
			s->cfa_off = (long)sleb(c) * daf;
			break;
		case 0x0f: {	/* def_cfa_expression */
			uint64_t n = uleb(c);
			if ((size_t)(c->end - c->p) < n)
				return false;
			cfa_expr(s, c->p, n);
			c->p += n;
			break;
		}
		case 0x10:	/* expression */
		case 0x16: {	/* val_expression */
			reg = uleb(c);
			uint64_t n = uleb(c);
			if ((size_t)(c->end - c->p) < n)
				return false;
			c->p += n;
			if ((r = reg_of(s, reg)))
				*r = (struct rrule){ RU_OTHER, 0 };
			break;
		}
		case 0x14:	/* val_offset */
			reg = uleb(c);
			uleb(c);
			if ((r = reg_of(s, reg)))
				*r = (struct rrule){ RU_OTHER, 0 };
			break;
		case 0x15:	/* val_offset_sf */
			reg = uleb(c);
			sleb(c);
			if ((r = reg_of(s, reg)))
				*r = (struct rrule){ RU_OTHER, 0 };
			break;
		case 0x2e:	/* GNU_args_size */
			uleb(c);
			break;
		case 0x2f:	/* GNU_negative_offset_extended */
			reg = uleb(c);
			if ((r = reg_of(s, reg)))
				*r = (struct rrule){ RU_OFF, -(long)uleb(c) * daf };
			else
				uleb(c);
			break;
		default:
			return false;
		}
		continue;
advance:
		*loc += adv;
		if (*loc > pc)
			return true;
	}
	return !c->bad;
}

/* A CIE: what its FDEs need */
struct cie {
	uint64_t caf;
	int64_t daf;
	uint64_t ra_reg;
	uint8_t fde_enc;
	bool aug_z, sig;
	struct cur init;	/* its initial instructions */
};

static bool cie_parse(const uint8_t *p, struct cie *ci)
{
	uint32_t len = *(const uint32_t *)(const void *)p;
	if (len == 0 || len == 0xffffffff)	/* no 64-bit .eh_frame here */
		return false;
	struct cur c = { p + 4, p + 4 + len, false };
	if (fixed(&c, 4) != 0)			/* the CIE id */
		return false;
	uint8_t ver = (uint8_t)fixed(&c, 1);
	const char *aug = (const char *)c.p;
	while (c.p < c.end && *c.p)
		c.p++;
	c.p++;
	if (c.p >= c.end || (aug[0] == 'e' && aug[1] == 'h'))
		return false;
	ci->caf = uleb(&c);
	ci->daf = sleb(&c);
	ci->ra_reg = ver == 1 ? fixed(&c, 1) : uleb(&c);
	ci->fde_enc = 0;
	ci->aug_z = aug[0] == 'z';
	ci->sig = false;
	if (ci->aug_z) {
		uint64_t alen = uleb(&c);
		const uint8_t *aend = c.p + alen;
		bool known = true;
		for (const char *a = aug + 1; *a && known && !c.bad; a++) {
			switch (*a) {
			case 'R': ci->fde_enc = (uint8_t)fixed(&c, 1); break;
			case 'L': fixed(&c, 1); break;
			case 'P': rd_enc(&c, (uint8_t)fixed(&c, 1) & 0x7f, 0); break;
			case 'S': ci->sig = true; break;
			case 'B': break;
			default: known = false;	/* the rest: skipped whole */
			}
		}
		if (aend > c.end)
			return false;
		c.p = aend;
	}
	ci->init = c;
	return !c.bad && ci->ra_reg == UKP_DW_RA;
}

/* The FDE covering pc in the object whose .eh_frame_hdr is hdr, by its
 * binary search table (datarel sdata4, what every linker writes) */
static const uint8_t *fde_find(const uint8_t *hdr, unsigned long pc)
{
	if (hdr[0] != 1 || hdr[3] != 0x3b)
		return NULL;
	struct cur c = { hdr + 4, hdr + 32, false };
	rd_enc(&c, hdr[1], (unsigned long)hdr);
	unsigned long n = rd_enc(&c, hdr[2], (unsigned long)hdr);
	if (c.bad || !n)
		return NULL;
	const int32_t *t = (const int32_t *)(const void *)c.p;
	unsigned long lo = 0, hi = n;
	long rel = (long)(pc - (unsigned long)hdr);
	if (rel < t[0])
		return NULL;
	while (hi - lo > 1) {
		unsigned long mid = (lo + hi) / 2;
		if (t[2 * mid] <= rel)
			lo = mid;
		else
			hi = mid;
	}
	return hdr + t[2 * lo + 1];
}

/* The rule of code address pc (0: none) */
static uint64_t rule_compute(unsigned long pc, unsigned gen)
{
	struct dl_find_object fo;
	if (_dl_find_object((void *)pc, &fo) != 0 || !fo.dlfo_eh_frame)
		return 0;
	const uint8_t *fde = fde_find(fo.dlfo_eh_frame, pc);
	if (!fde)
		return 0;
	uint64_t len = *(const uint32_t *)fde;
	const uint8_t *p = fde + 4;
	if (len == 0xffffffff || len == 0)
		return 0;
	uint32_t cie_off = *(const uint32_t *)p;
	if (!cie_off)
		return 0;	/* a CIE, not an FDE */
	struct cie ci;
	if (!cie_parse(p - cie_off, &ci))
		return 0;
	struct cur c = { p + 4, fde + 4 + len, false };
	unsigned long start = rd_enc(&c, ci.fde_enc, 0);
	unsigned long range = rd_enc(&c, ci.fde_enc & 0x0f, 0);
	if (c.bad || pc < start || pc - start >= range)
		return 0;
	if (ci.aug_z)
		c.p += uleb(&c);

	struct cfi init = { UKP_DW_SP, 8, false, { RU_SAME, 0 }, { RU_SAME, 0 } };
	unsigned long loc = start;
	struct cur ic = ci.init;
	if (!cfi_run(&ic, &init, NULL, &loc, ~0UL, ci.caf, ci.daf, ci.fde_enc))
		return 0;
	struct cfi s = init;
	loc = start;
	if (!cfi_run(&c, &s, &init, &loc, pc, ci.caf, ci.daf, ci.fde_enc))
		return 0;

	uint64_t r = (uint64_t)(gen & 0xff) << 24;
	if (ci.sig)
		return r | R_SIG | R_CFA_SP;
	if (s.cfa_deref)
		r |= R_CFA_DEREF;
	else if (s.cfa_reg == UKP_DW_SP)
		r |= R_CFA_SP;
	else if (s.cfa_reg == UKP_DW_BP)
		r |= R_CFA_BP;
	else
		return 0;
	if (s.cfa_off != (int32_t)s.cfa_off)
		return 0;
	r |= (uint64_t)(uint32_t)(int32_t)s.cfa_off << 32;
	if (s.ra.how == RU_OFF) {
		if (s.ra.off % 8 || s.ra.off / 8 != (int8_t)(s.ra.off / 8))
			return 0;
		r |= R_RA | (uint64_t)(uint8_t)(int8_t)(s.ra.off / 8) << 8;
	} else if (s.ra.how != RU_UNDEF) {
		return 0;
	}
	if (s.bp.how == RU_OFF) {
		if (s.bp.off % 8 || s.bp.off / 8 != (int8_t)(s.bp.off / 8))
			return 0;
		r |= R_BP | (uint64_t)(uint8_t)(int8_t)(s.bp.off / 8) << 16;
	} else if (s.bp.how != RU_SAME) {
		return 0;
	}
	return r;
}

static inline uint64_t rule_of(unsigned long pc)
{
	unsigned gen = atomic_load_explicit(&stack_gen, memory_order_acquire);
	uint64_t r;
	if (__builtin_expect(cache_get(pc, gen, &r), 1))
		return r;
	r = rule_compute(pc, gen);
	if (r)
		cache_put(pc, r);
	return r;
}

/* ---- the walk --------------------------------------------------------------- */

struct walk {
	unsigned long *store;
	unsigned size, skip, n;
	struct ukp_thread *t;
	bool left_handler;	/* went on from cur_regs already */
};

/* false: store is full */
static inline bool emit(struct walk *w, unsigned long a)
{
	if (w->skip) {
		w->skip--;
		return true;
	}
	w->store[w->n++] = a;
	return w->n < w->size;
}

static inline bool in_ukp(unsigned long ip)
{
	return __start_ukp_text && ip >= (unsigned long)__start_ukp_text &&
	       ip < (unsigned long)__stop_ukp_text;
}

/* The return into a patch site an ftrace trampoline's frame holds, above
 * the callback's CFA sp: where the traced function stands at its entry.
 * The words below it are the trampoline's saves (the traced function's
 * argument registers, pt_regs, vector state) and padding: the first word
 * that is the return of a patch site's call is taken. */
#define FT_SCAN 4096
static bool ftrace_entry(struct ukp_uframe *f)
{
	for (unsigned long a = f->sp; a < f->sp + FT_SCAN; a += 8) {
		unsigned long v;
		if (!rd(a, &v))
			return false;
		/* a patch site's call now (0xe8: traced; an untraced one is
		 * a nop, so a stale word naming it is not taken) */
		if (v > 5 && ukp_ftrace_site_at(v - 5) == 1 &&
		    __atomic_load_n((const uint8_t *)(v - 5), __ATOMIC_RELAXED) == 0xe8) {
			/* ukp_ftrace_walk keeps the trampoline's bp, pushed
			 * first, 64 bytes above its callee's CFA */
			if (f->ip >= (unsigned long)ukp_ftrace_walk &&
			    f->ip < (unsigned long)ukp_ftrace_attach && !rd(f->sp + 64, &f->bp))
				return false;
			f->ip = v - 5;
			f->sp = a + 8;
			f->exact = true;
			return true;
		}
	}
	return false;
}

/* One frame up by its rule.  false: the end of the stack, or a frame
 * that cannot be followed. */
static bool step(struct ukp_uframe *f, uint64_t r, bool ukp)
{
	unsigned long cfa, ra, bp = f->bp, slot;

	if (!r) {
		if (ukp)	/* ukprobes' assembly: no frame pointer there */
			return false;
		/* no rule: the frame pointer chain, bp -> { caller's bp, ra } */
		if (bp <= f->sp || bp - f->sp > (1UL << 26) || !rd(bp, &bp) ||
		    !rd(f->bp + 8, &ra))
			return false;
		slot = f->bp + 8;
		cfa = slot + 8;
	} else if (r & R_SIG) {
		unsigned long uc = f->sp, ip, sp;
		if (!rd(uc + UKP_ARCH_SIGFRAME_IP, &ip) || !rd(uc + UKP_ARCH_SIGFRAME_SP, &sp) ||
		    !rd(uc + UKP_ARCH_SIGFRAME_BP, &bp) || !ip)
			return false;
		*f = (struct ukp_uframe){ ip, sp, bp, true };
		return true;
	} else {
		switch (r_kind(r)) {
		case R_CFA_SP: cfa = f->sp + r_off(r); break;
		case R_CFA_BP: cfa = f->bp + r_off(r); break;
		default:
			if (!rd(f->bp + r_off(r), &cfa))
				return false;
		}
		if (!(r & R_RA))
			return false;	/* the outermost frame */
		slot = cfa + r_ra(r);
		if (!rd(slot, &ra))
			return false;
		if ((r & R_BP) && !rd(cfa + r_bpo(r), &bp))
			return false;
	}
	if (cfa <= f->sp)
		return false;	/* stacks grow down: a loop otherwise */
	ra = ukp_kret_real_ra(ra, slot);
	if (!ra)
		return false;
	*f = (struct ukp_uframe){ ra, cfa, bp, false };
	return true;
}

static void walk(struct walk *w, struct ukp_uframe f)
{
	if (!w->size)
		return;
	for (unsigned k = 0; k < MAX_FRAMES; k++) {
		bool ukp = in_ukp(f.ip);
		if (ukp) {
			struct ukp_thread *t = w->t;
			const struct pt_regs *cr = t ? t->cur_regs : NULL;
			if (f.ip >= (unsigned long)ukp_ftrace_tramp_begin &&
			    f.ip < (unsigned long)ukp_ftrace_tramp_end) {
				/* an ftrace callback's caller: on from the
				 * traced function's entry */
				if (!ftrace_entry(&f))
					return;
				ukp = false;
			} else if (t && t->cur && cr && !w->left_handler) {
				/* a handler's caller: on from the probed code */
				w->left_handler = true;
				ukp_arch_uframe_from_regs(&f, cr);
				ukp = in_ukp(f.ip);
			}
		}
		uint64_t r = rule_of(f.exact ? f.ip : f.ip - 1);
		/* a signal handler's return, into a restorer without an
		 * 'S' FDE: the frame of the signal */
		if (!r && !ukp && f.ip == ukp_sig_restorer())
			r = R_SIG | R_CFA_SP;
		if (!ukp && !(r & R_SIG) && !emit(w, f.ip))
			return;
		if (!step(&f, r, ukp))
			return;
	}
}

/* The first call initialises ukprobes (its dlclose hook keeps the rules
 * fresh); afterwards that is one load. */
static struct walk walk_begin(unsigned long *store, unsigned size, unsigned skip)
{
	ukp_init_once();
	return (struct walk){ store, size, skip, 0, ukp_thread_peek(), false };
}

__attribute__((visibility("default"), noinline))
unsigned int stack_trace_save(unsigned long *store, unsigned int size, unsigned int skipnr)
{
	struct ukp_uframe f;
	UKP_ARCH_CALLER_FRAME(&f);
	struct walk w = walk_begin(store, size, skipnr);
	walk(&w, f);
	return w.n;
}

__attribute__((visibility("default")))
unsigned int stack_trace_save_regs(struct pt_regs *regs, unsigned long *store,
				   unsigned int size, unsigned int skipnr)
{
	struct ukp_uframe f;
	ukp_arch_uframe_from_regs(&f, regs);
	struct walk w = walk_begin(store, size, skipnr);
	w.left_handler = true;	/* regs are the frame: no handler's below */
	walk(&w, f);
	return w.n;
}

__attribute__((visibility("default")))
void stack_trace_print(const unsigned long *entries, unsigned int nr_entries, int spaces)
{
	if (!entries)
		return;
	ukp_init_once();
	for (unsigned i = 0; i < nr_entries; i++) {
		struct ukp_where wh;
		unsigned long a = entries[i];
		int pad = 1 + (spaces > 0 ? spaces : 0);
		if (ukp_sym_where(a, &wh) == 0 && wh.func[0] && wh.func_end > wh.func_start) {
			if (wh.object[0])
				fprintf(stderr, "%*c%s+0x%lx/0x%lx [%s]\n", pad, ' ', wh.func,
					a - wh.func_start, wh.func_end - wh.func_start, wh.object);
			else
				fprintf(stderr, "%*c%s+0x%lx/0x%lx\n", pad, ' ', wh.func,
					a - wh.func_start, wh.func_end - wh.func_start);
		} else {
			fprintf(stderr, "%*c0x%lx\n", pad, ' ', a);
		}
	}
}
