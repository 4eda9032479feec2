/* SPDX-License-Identifier: MIT */
/*
 * The relocator: builds the out-of-line copy of one probed instruction.
 * Execution reaches it from the SIGTRAP handler (ip set to the slot) with
 * every register exactly as at the probe point, so only what depends on
 * the instruction's own address changes.  Nothing is single-stepped:
 * every copy ends by going where the instruction would have gone.
 *
 *   plain           insn' ; CONT(next)
 *   rip-relative    insn with disp32 re-aimed at the same target ; CONT(next)
 *   syscall         syscall ; movabs $next,%rcx ; CONT(next)
 *   jmp rel         CONT(target)
 *   jcc/loop/jrcxz/xbegin
 *                   insn with rel = +2 ; jmp short 1f ; CONT(target) ; 1: CONT(next)
 *                   (inside a detour's copy of several: the same up to 1:,
 *                   where the next instruction's copy follows; a syscall
 *                   there is followed by its movabs only)
 *   call rel        push $next.lo ; movl $next.hi,4(%rsp) ; CONT(target)
 *   call *op        push op ; lea -8(%rsp),%rsp ; push 8(%rsp) ;
 *                   movl $next.lo,16(%rsp) ; movl $next.hi,20(%rsp) ; ret $8
 *                   (push op reads op with the original %rsp, like call)
 *   jmp *op, ret    insn' (rip-relative fixed) - leaves by itself
 *
 *   CONT(x), plain: jmp x                    (e9 rel32, or jmp *0(%rip); .quad x)
 *   CONT(x), post:  lea -0x80(%rsp),%rsp ; call *16(%rip) ;
 *                   .quad site ; .quad x ; .quad ukp_post_trampoline
 *                   (steps over the red zone; the pushed return address
 *                   points at {site, x} for the trampoline)
 */
#include <errno.h>
#include <string.h>
#include "arch.h"

struct emit {
	uint8_t *buf;
	unsigned long at;	/* run-time address of buf[0] */
	size_t len;
	int err;
	size_t cap;
};

static void put(struct emit *e, const void *p, size_t n)
{
	if (e->len + n > e->cap) {
		e->err = -E2BIG;
		return;
	}
	memcpy(e->buf + e->len, p, n);
	e->len += n;
}

static void put8(struct emit *e, uint8_t b) { put(e, &b, 1); }
static void put32(struct emit *e, uint32_t v) { put(e, &v, 4); }
static void put64(struct emit *e, uint64_t v) { put(e, &v, 8); }

static int fits32(long v) { return v == (long)(int32_t)v; }

static void emit_cont(struct emit *e, unsigned long to, int post, void *site)
{
	if (post) {
		static const uint8_t lea_rz[] = { 0x48, 0x8d, 0x64, 0x24, 0x80 };
		static const uint8_t call_ind[] = { 0xff, 0x15, 16, 0, 0, 0 };
		put(e, lea_rz, sizeof(lea_rz));
		put(e, call_ind, sizeof(call_ind));
		put64(e, (uint64_t)site);
		put64(e, to);
		put64(e, (uint64_t)ukp_post_trampoline);
		return;
	}
	long rel = (long)(to - (e->at + e->len + 5));
	if (fits32(rel)) {
		put8(e, 0xe9);
		put32(e, (uint32_t)rel);
	} else {
		static const uint8_t jmp_abs[] = { 0xff, 0x25, 0, 0, 0, 0 };
		put(e, jmp_abs, sizeof(jmp_abs));
		put64(e, to);
	}
}

/* Copy the instruction to the current position, re-aiming a rip-relative
 * displacement so it reaches the same absolute address. */
static void emit_copy(struct emit *e, const struct ukp_insn *in,
		      const uint8_t *bytes)
{
	size_t at = e->len;
	put(e, bytes, in->len);
	if (e->err || in->disp_off < 0)
		return;
	int32_t disp;
	memcpy(&disp, in->bytes + in->disp_off, 4);
	unsigned long abs = in->addr + in->len + (long)disp;
	long nd = (long)(abs - (e->at + at + in->len));
	if (in->mem.addr32)	/* eip-relative: any disp32 reaches, mod 4 GiB */
		nd = (int32_t)(uint32_t)((uint32_t)abs - (uint32_t)(e->at + at + in->len));
	if (!fits32(nd)) {
		e->err = -ERANGE;
		return;
	}
	int32_t d32 = (int32_t)nd;
	memcpy(e->buf + at + in->disp_off, &d32, 4);
}

static void mark_sp(int16_t *fix, size_t from, size_t to, int v)
{
	for (size_t i = from; i < to && i < UKP_COPY_MAP_MAX; i++)
		fix[i] = (int16_t)v;
}

/* A conditional branch: taken, on to its target; not taken, on after
 * what this emits.
 *	insn with rel = +2 ; jmp short 1f ; CONT(target) ; 1:
 * (the one form every jcc, loop, jrcxz and xbegin has) */
static int emit_jcc_taken(struct emit *e, const struct ukp_insn *in, uint8_t *b, int post,
			  void *site)
{
	if (in->imm_size != 1 && in->imm_size != 2 && in->imm_size != 4)
		return -EILSEQ;
	memset(b + in->imm_off, 0, in->imm_size);
	b[in->imm_off] = 2;
	put(e, b, in->len);
	size_t jshort = e->len;
	put8(e, 0xeb);
	put8(e, 0);
	size_t taken = e->len;
	emit_cont(e, in->target, post, site);
	if (e->len - taken > 127)
		return -E2BIG;
	if (!e->err)
		e->buf[jshort + 1] = (uint8_t)(e->len - taken);
	return 0;
}

/* One instruction, relocated, then on to where it would have gone. */
static int emit_insn(struct emit *ep, const struct ukp_insn *in, int post,
		     void *site, int16_t *sp_fix, unsigned long cont)
{
	struct emit e = *ep;
	unsigned long next = in->addr + in->len;	/* cont: where it falls through */
	uint8_t b[UKP_ARCH_MAX_INSN];

	memcpy(b, in->bytes, in->len);

	switch (in->flow) {
	case UKP_FLOW_NONE:
	case UKP_FLOW_STOP:
		emit_copy(&e, in, b);
		emit_cont(&e, cont, post, site);
		break;
	case UKP_FLOW_SYSCALL:
		emit_copy(&e, in, b);
		/* the kernel left the slot's address in rcx: put back what the
		 * instruction in place would have left there */
		put8(&e, 0x48);
		put8(&e, 0xb9);
		put64(&e, next);
		emit_cont(&e, cont, post, site);
		break;
	case UKP_FLOW_JMP:
		emit_cont(&e, in->target, post, site);
		break;
	case UKP_FLOW_JCC: {
		int err = emit_jcc_taken(&e, in, b, post, site);
		if (err)
			return err;
		emit_cont(&e, cont, post, site);
		break;
	}
	case UKP_FLOW_CALL: {
		/* push $next.lo (sign-extended), then fix the high half */
		put8(&e, 0x68);
		put32(&e, (uint32_t)next);
		size_t m = e.len;
		static const uint8_t movl_hi[] = { 0xc7, 0x44, 0x24, 0x04 };
		put(&e, movl_hi, sizeof(movl_hi));
		put32(&e, (uint32_t)(next >> 32));
		mark_sp(sp_fix, m, e.len, 8);
		emit_cont(&e, in->target, post, site);
		break;
	}
	case UKP_FLOW_CALL_IND: {
		if (post)
			return -EOPNOTSUPP;	/* emulated by the trap handler */
		/* call /2 -> push /6: reads the operand exactly as call would */
		b[in->modrm_off] = (uint8_t)((b[in->modrm_off] & ~0x38) | (6 << 3));
		emit_copy(&e, in, b);
		size_t s1 = e.len;
		static const uint8_t tail1[] = {
			0x48, 0x8d, 0x64, 0x24, 0xf8,	/* lea -8(%rsp),%rsp */
			0xff, 0x74, 0x24, 0x08,		/* push 8(%rsp) */
		};
		put(&e, tail1, 5);
		mark_sp(sp_fix, s1, e.len, 8);
		size_t s2 = e.len;
		put(&e, tail1 + 5, 4);
		mark_sp(sp_fix, s2, e.len, 16);
		size_t s3 = e.len;
		static const uint8_t lo[] = { 0xc7, 0x44, 0x24, 0x10 };
		static const uint8_t hi[] = { 0xc7, 0x44, 0x24, 0x14 };
		put(&e, lo, 4);
		put32(&e, (uint32_t)next);
		put(&e, hi, 4);
		put32(&e, (uint32_t)(next >> 32));
		static const uint8_t ret8[] = { 0xc2, 0x08, 0x00 };
		put(&e, ret8, 3);
		mark_sp(sp_fix, s3, e.len, 24);
		break;
	}
	case UKP_FLOW_JMP_IND:
	case UKP_FLOW_RET:
		if (post)
			return -EOPNOTSUPP;	/* emulated by the trap handler */
		emit_copy(&e, in, b);
		break;
	}
	*ep = e;
	return e.err;
}

int ukp_arch_build_slot(const struct ukp_insn *in, uint8_t *buf,
			unsigned long slot_addr, int post, void *site,
			int16_t sp_fix[UKP_SLOT_MAX])
{
	struct emit e = { .buf = buf, .at = slot_addr, .cap = UKP_SLOT_MAX };
	int16_t fix[UKP_COPY_MAP_MAX] = { 0 };
	int err = emit_insn(&e, in, post, site, fix, in->addr + in->len);
	memcpy(sp_fix, fix, UKP_SLOT_MAX * sizeof(*fix));
	return err ? err : (int)e.len;
}

/* n bytes of v into the field of the copy at base that ends at the
 * template's label at */
static void tpl_put(struct emit *e, size_t base, const char *at, const void *v, size_t n)
{
	memcpy(e->buf + base + (size_t)(at - ukp_lean_tpl) - n, v, n);
}

/* A disp32 ending at the template's label at: to the detour's byte to */
static void tpl_rel(struct emit *e, size_t base, const char *at, size_t to)
{
	int32_t rel = (int32_t)((long)to - (long)(base + (size_t)(at - ukp_lean_tpl)));
	tpl_put(e, base, at, &rel, 4);
}

/* A disp32 ending at the template's label at: to the absolute address to */
static void tpl_abs(struct emit *e, size_t base, const char *at, unsigned long to)
{
	long rel = (long)(to - (e->at + base + (size_t)(at - ukp_lean_tpl)));
	if (!fits32(rel)) {
		e->err = -ERANGE;
		return;
	}
	int32_t v = (int32_t)rel;
	tpl_put(e, base, at, &v, 4);
}

/* A short jmp over [from, to) of the copy at base: what it skips is not
 * needed at this site */
static void tpl_skip(struct emit *e, size_t base, const char *from, const char *to)
{
	long d = (long)(to - from) - 2;
	if (d < 0 || d > 127) {
		e->err = -EINVAL;
		return;
	}
	e->buf[base + (size_t)(from - ukp_lean_tpl)] = 0xeb;
	e->buf[base + (size_t)(from - ukp_lean_tpl) + 1] = (uint8_t)d;
}

/* The copy of ukp_lean_tpl at e's end, for a detour whose header and
 * the trampolines' way are where arch.h says.  Where no status flag is
 * live at the probe point (r->flags_dead), the fast paths' usual exits
 * leave the flags as the handler left them. */
static void emit_lean_tpl(struct emit *e, const struct ukp_region *r)
{
	unsigned long addr = r->addr;
	size_t base = e->len, n = (size_t)(ukp_lean_tpl_end - ukp_lean_tpl);
	_Static_assert(UKP_ARCH_JMP_LEN == 5, "the entry's jmp rel32");
	long tls = ukp_arch_self_off;	/* the thread block, from %fs */
	if (!fits32(tls)) {
		e->err = -ERANGE;
		return;
	}
	put(e, ukp_lean_tpl, n);
	if (e->err)
		return;
	tpl_abs(e, base, ukp_lean_tpl_addr, addr);
	tpl_abs(e, base, ukp_lean_tpl_bare_addr, addr);
	int32_t v = (int32_t)tls;
	tpl_put(e, base, ukp_lean_tpl_tls, &v, 4);
	tpl_put(e, base, ukp_lean_tpl_bare_tls, &v, 4);
	tpl_put(e, base, ukp_lean_tpl_bare_tls2, &v, 4);
	uint64_t gp = (uint64_t)(uintptr_t)ukp_arch_engine->gp;
	tpl_put(e, base, ukp_lean_tpl_gp, &gp, 8);
	tpl_put(e, base, ukp_lean_tpl_bare_gp, &gp, 8);
	tpl_rel(e, base, ukp_lean_tpl_sel, UKP_ARCH_SEL);
	tpl_rel(e, base, ukp_lean_tpl_list, UKP_ARCH_SEL_SIZE + UKP_ARCH_HDR_LIST);
	tpl_rel(e, base, ukp_lean_tpl_r2, UKP_ARCH_R);
	tpl_rel(e, base, ukp_lean_tpl_jmp_r, UKP_ARCH_R);
	tpl_rel(e, base, ukp_lean_tpl_call, UKP_ARCH_R - 6);
	tpl_rel(e, base, ukp_lean_tpl_bare_list, UKP_ARCH_SEL_SIZE + UKP_ARCH_HDR_LIST);
	tpl_rel(e, base, ukp_lean_tpl_bare_jmp_r, UKP_ARCH_R);
	tpl_rel(e, base, ukp_lean_tpl_bare_call, UKP_ARCH_R - 6);
	uint64_t rare = (uint64_t)(uintptr_t)ukp_opt_exit_rare;
	memcpy(e->buf + base + n - 8, &rare, 8);
	if (r->flags_dead) {
		tpl_skip(e, base, ukp_lean_tpl_fb, ukp_lean_tpl_fb_end);
		tpl_skip(e, base, ukp_lean_tpl_bare_fb, ukp_lean_tpl_bare_fb_end);
	}
}

/* The offset of the template's copy: 8-aligned after the entry's jmp */
static unsigned tpl_at(unsigned entry)
{
	return (entry + UKP_ARCH_JMP_LEN + 7) & ~7U;
}

/* Where the detour's entry goes: one of its fast paths, or the call of
 * the trampoline */
unsigned ukp_arch_detour_sel(unsigned entry, int sel)
{
	if (sel == UKP_SEL_BARE)
		return tpl_at(entry) + (unsigned)(ukp_lean_tpl_bare - ukp_lean_tpl);
	return sel == UKP_SEL_LEAN ? tpl_at(entry) + (unsigned)(ukp_lean_tpl_sel - ukp_lean_tpl) :
	       UKP_ARCH_R - 11;
}

/* Where the disp32 ending at the template's label at, in the copy at
 * base, goes */
static unsigned long tpl_target(unsigned long base, const char *at)
{
	unsigned long end = base + (size_t)(at - ukp_lean_tpl);
	int32_t rel;
	memcpy(&rel, (const void *)(end - 4), 4);
	return end + (unsigned long)(long)rel;
}

/* The probe point and R of the bare fast path whose handler was called
 * from the frame of regs: from the detour's copy of the template, found
 * through the call's return address */
void ukp_arch_bare_frame(const struct pt_regs *regs, unsigned long *addr, unsigned long *r)
{
	unsigned long top = (unsigned long)regs & ~15UL;
	unsigned long ret = *(const unsigned long *)(top - 8);
	unsigned long base = ret - (unsigned long)(ukp_lean_tpl_bare_ret - ukp_lean_tpl);
	*addr = tpl_target(base, ukp_lean_tpl_bare_addr);
	*r = tpl_target(base, ukp_lean_tpl_bare_jmp_r);
}

int ukp_arch_build_detour(const struct ukp_region *r, uint8_t *buf,
			  unsigned long at, void *site, const void *list,
			  void (*tramp)(void), int sel_mode,
			  bool kret, unsigned *entry, unsigned *copy,
			  struct ukp_copy_map *map)
{
	struct emit e = { .buf = buf, .at = at, .cap = UKP_DETOUR_MAX };
	int err;
	static const uint8_t lea_r11[] = { 0x4c, 0x8d, 0x1d };	/* lea rel32(%rip), %r11 */
	static const uint8_t push_r11[] = { 0x41, 0x53 };
	static const uint8_t over_hdr[] = { 0xeb, 5 + UKP_ARCH_HDR_SIZE };	/* jmp over the header */
	static const uint8_t pad[5] = { 0xcc, 0xcc, 0xcc, 0xcc, 0xcc };	/* to align it */
	static const uint8_t lea_rz[] = { 0x48, 0x8d, 0x64, 0x24, 0x80 };	/* -128 */
	static const uint8_t lea_rz8[] = { 0x48, 0x8d, 0x64, 0x24, 0x88 };	/* -120 */
	static const uint8_t call_tramp[] = { 0xff, 0x15, 0xed, 0xff, 0xff, 0xff };	/* -19 */
	static const uint8_t jmp_slot[] = { 0xff, 0x64, 0x24, 0xf8 };	/* jmp *-8(%rsp) */
	static const uint8_t drop[] = { 0x48, 0x8d, 0x64, 0x24, 0x08 };	/* lea 8(%rsp),%rsp */
	_Static_assert(sizeof(drop) == UKP_ARCH_KRET_DROP_LEN, "kret.c knows the drop's length");
	_Static_assert(sizeof(jmp_slot) + sizeof(drop) == UKP_ARCH_KRET_R_LEN, "and R's");
	/* where the copy starts in the kret variant */
	const size_t copy_at = UKP_ARCH_KRET_HDR + UKP_ARCH_HDR_SIZE + sizeof(lea_rz8) + sizeof(call_tramp) +
			       UKP_ARCH_KRET_R_LEN;
	_Static_assert(sizeof(lea_r11) + 4 + sizeof(push_r11) + sizeof(over_hdr) + sizeof(pad) ==
		       UKP_ARCH_KRET_HDR, "the header's place");

	memset(map, 0, sizeof(*map));
	*entry = 0;
	if (kret) {
		/* r11 = the copy, which also goes into the word below the
		 * entry sp (free at a function's entry, and clear of the
		 * trampoline's frame); a return probe's entry may put a
		 * stub's priming call there instead (kret.c) */
		put(&e, lea_r11, sizeof(lea_r11));
		put32(&e, (uint32_t)(copy_at - (e.len + 4)));
		put(&e, push_r11, sizeof(push_r11));
		mark_sp(map->sp_fix, e.len, e.len + sizeof(over_hdr), 8);
		put(&e, over_hdr, sizeof(over_hdr));
		put(&e, pad, sizeof(pad));
	}
	if (!e.err && e.len != (kret ? UKP_ARCH_KRET_HDR : 0))
		return -EINVAL;
	if (!kret)
		put64(&e, 0);			/* sel: written below */
	put64(&e, (uint64_t)(uintptr_t)list);	/* the trampoline finds these */
	put64(&e, (uint64_t)site);		/* at */
	put64(&e, (uint64_t)tramp);
	size_t c = e.len;
	if (kret) {
		put(&e, lea_rz8, sizeof(lea_rz8));
		mark_sp(map->sp_fix, c, e.len, 8);
	} else {
		put(&e, lea_rz, sizeof(lea_rz));
	}
	c = e.len;
	put(&e, call_tramp, sizeof(call_tramp));
	mark_sp(map->sp_fix, c, e.len, 128);
	if (!e.err && !kret && e.len != UKP_ARCH_R)
		return -EINVAL;
	if (kret) {
		/* R: on through that word: to the copy, or to the priming
		 * call, which comes back to the drop of its push */
		put(&e, jmp_slot, sizeof(jmp_slot));
		c = e.len;
		put(&e, drop, sizeof(drop));
		mark_sp(map->sp_fix, c, e.len, 8);
		if (!e.err && e.len != copy_at)
			return -EINVAL;
	}
	*copy = (unsigned)e.len;
	map->n = r->ninsn;
	for (unsigned k = 0; k < r->ninsn && !e.err; k++) {
		const struct ukp_insn *in = &r->insn[k];
		map->copy_off[k] = (uint16_t)e.len;
		map->orig_off[k] = (uint16_t)(in->addr - r->addr);
		if (k + 1 == r->ninsn) {
			if ((err = emit_insn(&e, in, 0, site, map->sp_fix,
					     r->next ? r->next : in->addr + in->len)))
				return err;
		} else if (in->flow == UKP_FLOW_JCC) {
			/* inside the region (analyze.c: its target is not) */
			uint8_t b[UKP_ARCH_MAX_INSN];
			memcpy(b, in->bytes, in->len);
			if ((err = emit_jcc_taken(&e, in, b, 0, site)))
				return err;
		} else if (in->flow == UKP_FLOW_SYSCALL) {
			emit_copy(&e, in, in->bytes);
			/* rcx as the instruction in place leaves it */
			put8(&e, 0x48);
			put8(&e, 0xb9);
			put64(&e, in->addr + in->len);
		} else {
			emit_copy(&e, in, in->bytes);	/* falls through: checked */
		}
	}
	if (!e.err && e.len > sizeof(map->idx))
		e.err = -E2BIG;
	if (e.err)
		return e.err;
	map->len = (uint16_t)e.len;
	for (size_t i = 0; i < e.len; i++) {
		map->idx[i] = 0xff;
		for (unsigned k = 0; k < r->ninsn; k++)
			if (i >= map->copy_off[k])
				map->idx[i] = (uint8_t)k;
	}
	if (!kret) {
		/* the entry: a jmp straight to where sel says, its
		 * displacement 4-aligned so that one store retargets it
		 * (optimize.c); then the lean fast paths' own copy (entry.S),
		 * whose first instruction, jmp *sel, stands for the same */
		while ((at + e.len + 1) & 3)
			put8(&e, 0xcc);
		*entry = (unsigned)e.len;
		put8(&e, 0xe9);
		put32(&e, 0);
		while (e.len & 7)
			put8(&e, 0xcc);
		if (!e.err && e.len != tpl_at(*entry))
			return -EINVAL;
		emit_lean_tpl(&e, r);
		if (e.err)
			return e.err;
		unsigned to = ukp_arch_detour_sel(*entry, sel_mode);
		uint64_t sel = at + to;
		memcpy(buf + UKP_ARCH_SEL, &sel, 8);
		int32_t rel = (int32_t)((long)to - (long)(*entry + UKP_ARCH_JMP_LEN));
		memcpy(buf + *entry + 1, &rel, 4);
	}
	return (int)e.len;
}

void ukp_arch_make_jump(uint8_t out[UKP_ARCH_JMP_LEN], unsigned long addr,
			unsigned long target)
{
	int32_t rel = (int32_t)(long)(target - (addr + UKP_ARCH_JMP_LEN));
	out[0] = 0xe9;
	memcpy(out + 1, &rel, 4);
}

/* The prefix a punned jump is padded with: ES, ignored in 64-bit mode */
#define PUN_PREFIX 0x26

bool ukp_arch_pun_window(const struct ukp_region *r, unsigned p, unsigned long *lo,
			 unsigned long *hi)
{
	if (!r->pun || p >= r->len)
		return false;
	unsigned f = r->len - 1 - p;	/* the low bytes of rel32 it writes */
	uint8_t rel[4] = { 0 };
	for (unsigned i = f; i < 4; i++)
		rel[i] = r->orig[p + 1 + i];
	int32_t base;
	memcpy(&base, rel, 4);		/* its top byte is the code's: signed */
	*lo = r->addr + p + UKP_ARCH_JMP_LEN + (unsigned long)(long)base;
	*hi = *lo + ((1UL << (8 * f)) - 1);
	return true;
}

bool ukp_arch_make_pun(uint8_t *out, const struct ukp_region *r, unsigned p,
		       unsigned long target)
{
	unsigned long lo, hi;
	if (!ukp_arch_pun_window(r, p, &lo, &hi) || target < lo || target > hi)
		return false;
	int32_t rel = (int32_t)(long)(target - (r->addr + p + UKP_ARCH_JMP_LEN));
	memcpy(out, r->orig, ukp_arch_span(r));
	memset(out, PUN_PREFIX, p);
	out[p] = 0xe9;
	memcpy(out + p + 1, &rel, 4);
	return !memcmp(out + r->len, r->orig + r->len, ukp_arch_span(r) - r->len);
}

void (*ukp_arch_opt_tramp(enum ukp_vsave v))(void)
{
	switch (v) {
	case UKP_VSAVE_NONE: return ukp_opt_tramp_none;
	case UKP_VSAVE_ARGS: return ukp_opt_tramp_args;
	case UKP_VSAVE_ALL16: return ukp_opt_tramp_all16;
	case UKP_VSAVE_ALL32: return ukp_opt_tramp_all32;
	default: return ukp_opt_tramp_xsave;
	}
}

const char *ukp_arch_vsave_name(enum ukp_vsave v)
{
	switch (v) {
	case UKP_VSAVE_NONE: return "no vector registers";
	case UKP_VSAVE_ARGS: return "vector registers 0-7";
	case UKP_VSAVE_ALL16: return "vector registers 0-15";
	case UKP_VSAVE_ALL32: return "vector registers 0-31 and opmasks";
	default: return "the whole extended state (XSAVE)";
	}
}
