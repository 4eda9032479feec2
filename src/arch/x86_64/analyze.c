/* SPDX-License-Identifier: MIT */
/*
 * The safety analysis of jump optimisation (kprobes.txt 1.4.2), done the
 * way user space can prove it.
 *
 * A jump overwrites the instructions covering 5 bytes from the probe
 * address (the "region").  It is safe when nothing can ever resume inside
 * bytes 1..len-1 of the region:
 *
 *   - no direct jump or call anywhere in the object targets them: every
 *     function of the object is decoded once (symbols, plus every range
 *     of the unwind tables, which also covers local functions and the
 *     .cold parts that jump back into their parent), and every branch
 *     target is kept in one sorted array;
 *   - no jump table does: the pattern compilers emit for a switch
 *     (lea table(%rip); movslq (table,idx,4); add; jmp *) is read, with
 *     its bound from the cmp/ja that guards it;
 *   - no pointer does: in a position-independent object every code
 *     address its data holds is made by a dynamic relocation and every
 *     one its code makes by a rip-relative lea; both count as jump
 *     targets, so an indirect jump through a pointer (a tail call, an
 *     absolute table, a demangled pointer) can only land on one of them.
 *     A function with any other indirect jump (address arithmetic that is
 *     not a table we read; in a fixed-address executable, anything but a
 *     jump through the GOT) is refused, as the kernel refuses it;
 *   - no C++ landing pad does (read from each FDE's LSDA);
 *   - no return address does: a call may only be the region's last
 *     instruction;
 *   - every instruction can run out of line, and only the last one may
 *     leave the line for good (jmp, ret) or call; a conditional branch
 *     or a system call inside goes on in the detour's copy.
 * Padding after a function's last instruction belongs to no function and
 * no code reaches it, so a region that ends in a ret/jmp may extend over it.
 *
 * The same decoding gives vector-register liveness at the probe point, so
 * the detour saves only what the probed code still needs.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <Zydis/Zydis.h>
#include "arch.h"

extern int ukp_vec_level;	/* regs.c: 0 SSE, 1 AVX, 2 AVX-512 */

static ZydisDecoder dec;
static int dec_ready;

static void dec_init(void)
{
	if (!dec_ready) {
		ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
		dec_ready = 1;
	}
}

/* ---- growable arrays -------------------------------------------------- */

struct ulv { unsigned long *v; size_t n, cap; };

static int ulv_add(struct ulv *a, unsigned long x)
{
	if (a->n == a->cap) {
		size_t nc = a->cap ? 2 * a->cap : 256;
		unsigned long *nv = realloc(a->v, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		a->v = nv;
		a->cap = nc;
	}
	a->v[a->n++] = x;
	return 0;
}

static int cmp_ul(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;
	return x < y ? -1 : x > y;
}

/*
 * Sorts v[0..n): an object's every instruction and jump target, up to
 * about a million addresses, which qsort's comparisons through a
 * function pointer took a sixth of a first registration to sort.  A
 * least-significant-digit radix sort by 11 bits (the passes over digits
 * every address shares are skipped); qsort where it cannot get a buffer.
 */
static void sort_ul(unsigned long *v, size_t n)
{
	size_t i = 1;
	while (i < n && v[i - 1] <= v[i])
		i++;
	if (i >= n)
		return;			/* sorted already (the instructions are) */
	/* the second buffer and the digit counts in one block (not 16 KiB
	 * of a registering thread's stack) */
	unsigned long *tmp = n > 256 ? malloc((n + (1 << 11)) * sizeof(*tmp)) : NULL;
	size_t *count = (size_t *)(tmp + n);
	if (!tmp) {
		qsort(v, n, sizeof(*v), cmp_ul);
		return;
	}
	unsigned long all_or = 0, all_and = ~0ul;
	for (i = 0; i < n; i++) {
		all_or |= v[i];
		all_and &= v[i];
	}
	unsigned long *from = v, *to = tmp;
	for (unsigned shift = 0; shift < 64; shift += 11) {
		if ((((all_or ^ all_and) >> shift) & 0x7ff) == 0)
			continue;	/* one digit everywhere: nothing to move */
		memset(count, 0, (1 << 11) * sizeof(*count));
		for (i = 0; i < n; i++)
			count[(from[i] >> shift) & 0x7ff]++;
		size_t sum = 0;
		for (size_t d = 0; d < (1 << 11); d++) {
			size_t c = count[d];
			count[d] = sum;
			sum += c;
		}
		for (i = 0; i < n; i++)
			to[count[(from[i] >> shift) & 0x7ff]++] = from[i];
		unsigned long *t = from;
		from = to;
		to = t;
	}
	if (from != v)
		memcpy(v, from, n * sizeof(*v));
	free(tmp);
}

static void ulv_sort_unique(struct ulv *a)
{
	if (!a->n)
		return;
	sort_ul(a->v, a->n);
	size_t k = 1;
	for (size_t i = 1; i < a->n; i++)
		if (a->v[i] != a->v[k - 1])
			a->v[k++] = a->v[i];
	a->n = k;
}

/* first element >= x */
static size_t ulv_lower(const struct ulv *a, unsigned long x)
{
	size_t lo = 0, hi = a->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (a->v[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static bool ulv_has(const struct ulv *a, unsigned long x)
{
	size_t i = ulv_lower(a, x);
	return i < a->n && a->v[i] == x;
}

/* ---- the object's code, read as it was ---------------------------------- */

static uint8_t *read_code(unsigned long lo, unsigned long hi)
{
	uint8_t *b = malloc(hi - lo + 16);
	if (b) {
		ukp_arch_engine->read_text(lo, b, hi - lo);
		memset(b + (hi - lo), 0, 16);
	}
	return b;
}

/* ---- unwind tables: code ranges and landing pads ------------------------ */

static uint64_t uleb(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;
	unsigned sh = 0;
	while (*p < end) {
		uint8_t b = *(*p)++;
		if (sh < 64)
			v |= (uint64_t)(b & 0x7f) << sh;
		sh += 7;
		if (!(b & 0x80))
			break;
	}
	return v;
}

static int64_t sleb(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;
	unsigned sh = 0;
	uint8_t b = 0;
	while (*p < end) {
		b = *(*p)++;
		if (sh < 64)
			v |= (uint64_t)(b & 0x7f) << sh;
		sh += 7;
		if (!(b & 0x80))
			break;
	}
	if (sh < 64 && (b & 0x40))
		v |= ~0ULL << sh;
	return (int64_t)v;
}

/* DW_EH_PE_* pointer; datarel relative to `data`.  -1 on what we cannot read. */
static int read_enc(const uint8_t **p, const uint8_t *end, uint8_t enc,
		    unsigned long data, unsigned long *out)
{
	const uint8_t *at = *p;
	uint64_t v;
	if (enc == 0xff)
		return -1;
	switch (enc & 0x0f) {
	case 0x00: if (end - at < 8) return -1; memcpy(&v, at, 8); *p += 8; break;
	case 0x01: v = uleb(p, end); break;
	case 0x02: { uint16_t x; if (end - at < 2) return -1; memcpy(&x, at, 2); v = x; *p += 2; break; }
	case 0x03: { uint32_t x; if (end - at < 4) return -1; memcpy(&x, at, 4); v = x; *p += 4; break; }
	case 0x04: if (end - at < 8) return -1; memcpy(&v, at, 8); *p += 8; break;
	case 0x09: v = (uint64_t)sleb(p, end); break;
	case 0x0a: { int16_t x; if (end - at < 2) return -1; memcpy(&x, at, 2); v = (uint64_t)(int64_t)x; *p += 2; break; }
	case 0x0b: { int32_t x; if (end - at < 4) return -1; memcpy(&x, at, 4); v = (uint64_t)(int64_t)x; *p += 4; break; }
	case 0x0c: if (end - at < 8) return -1; memcpy(&v, at, 8); *p += 8; break;
	default: return -1;
	}
	switch (enc & 0x70) {
	case 0x00: break;
	case 0x10: if (v) v += (unsigned long)at; break;
	case 0x30: v += data; break;
	default: return -1;
	}
	if (enc & 0x80)
		return -1;	/* indirect: only personality routines use it */
	*out = v;
	return 0;
}

struct cie_info { const uint8_t *cie; uint8_t fde_enc, lsda_enc; bool z, ok; };

static void parse_cie(const uint8_t *cie, struct cie_info *ci)
{
	uint32_t len;
	memcpy(&len, cie, 4);
	const uint8_t *p = cie + 8, *end = cie + 4 + len;
	ci->cie = cie;
	ci->fde_enc = 0;	/* absptr */
	ci->lsda_enc = 0xff;
	ci->z = false;
	ci->ok = false;
	if (len == 0xffffffff || p >= end)
		return;
	uint8_t version = *p++;
	const char *aug = (const char *)p;
	size_t alen = strnlen(aug, (size_t)(end - p));
	p += alen + 1;
	uleb(&p, end);		/* code alignment */
	sleb(&p, end);		/* data alignment */
	if (version == 1)
		p++;
	else
		uleb(&p, end);	/* return address register */
	if (aug[0] == 'z') {
		ci->z = true;
		uint64_t n = uleb(&p, end);
		const uint8_t *q = p;
		p += n;
		for (size_t i = 1; i < alen && q < end; i++) {
			unsigned long dummy;
			switch (aug[i]) {
			case 'R': ci->fde_enc = *q++; break;
			case 'L': ci->lsda_enc = *q++; break;
			case 'P': {
				uint8_t e = *q++;
				if (read_enc(&q, end, (uint8_t)(e & 0x7f), 0, &dummy))
					return;
				break;
			}
			case 'S': case 'B': break;
			default: return;
			}
		}
	} else if (alen) {
		return;		/* old augmentations: not emitted on x86-64 */
	}
	ci->ok = true;
}

/* Landing pads of one LSDA. */
static int read_lsda(const uint8_t *p, unsigned long func, struct ulv *pads)
{
	const uint8_t *end = p + 65536;	/* bounded by the call-site length */
	unsigned long lpstart = func, v;
	uint8_t enc = *p++;
	if (enc != 0xff && read_enc(&p, end, enc, 0, &lpstart))
		return -1;
	enc = *p++;
	if (enc != 0xff)
		uleb(&p, end);	/* type table offset */
	uint8_t cs = *p++;
	uint64_t cslen = uleb(&p, end);
	const uint8_t *cend = p + cslen;
	while (p < cend) {
		unsigned long start, len, lp;
		if (read_enc(&p, cend, cs, 0, &start) || read_enc(&p, cend, cs, 0, &len) ||
		    read_enc(&p, cend, cs, 0, &lp))
			return -1;
		uleb(&p, cend);	/* action */
		(void)start;
		(void)len;
		if (lp && ulv_add(pads, lpstart + lp))
			return -1;
	}
	(void)v;
	return 0;
}

/*
 * Every FDE of the object through .eh_frame_hdr's search table: code
 * ranges into `ranges` (lo, hi pairs), landing pads into `targets`.
 * Returns -1 when the tables cannot be read (then landing pads are
 * unknown: C++ code is refused).
 */
static int read_unwind(unsigned long hdr, struct ulv *ranges, struct ulv *targets)
{
	const uint8_t *h = (const uint8_t *)hdr, *p = h + 4;
	const uint8_t *lim = h + (1UL << 30);
	unsigned long ehf, count;
	if (!hdr || h[0] != 1 || h[3] != 0x3b)
		return -1;
	if (read_enc(&p, lim, h[1], hdr, &ehf) || read_enc(&p, lim, h[2], hdr, &count))
		return -1;
	const int32_t *tab = (const int32_t *)p;
	struct cie_info ci = { 0 };
	for (unsigned long i = 0; i < count; i++) {
		const uint8_t *fde = h + tab[2 * i + 1];
		uint32_t len, cid;
		memcpy(&len, fde, 4);
		if (len == 0xffffffff || len < 8)
			return -1;
		memcpy(&cid, fde + 4, 4);
		const uint8_t *cie = fde + 4 - cid, *fend = fde + 4 + len;
		if (cie != ci.cie)
			parse_cie(cie, &ci);
		if (!ci.ok)
			return -1;
		const uint8_t *q = fde + 8;
		unsigned long lo, range;
		if (read_enc(&q, fend, ci.fde_enc, hdr, &lo) ||
		    read_enc(&q, fend, ci.fde_enc & 0x0f, hdr, &range))
			return -1;
		if (ulv_add(ranges, lo) || ulv_add(ranges, lo + range))
			return -1;
		if (ci.z) {
			uint64_t n = uleb(&q, fend);
			unsigned long lsda = 0;
			if (ci.lsda_enc != 0xff && n &&
			    read_enc(&q, fend, ci.lsda_enc, hdr, &lsda))
				return -1;
			if (lsda && read_lsda((const uint8_t *)lsda, lo, targets))
				return -1;
		}
	}
	return 0;
}

/* ---- object scan ------------------------------------------------------------ */

#define TAINT_INDIRECT 1
#define TAINT_UNDECODABLE 2

/* df: its table register was proven by reg_value_at over [lo, hi), which
 * must then be reached by no other range's table (checked after all are
 * read) */
struct jtab { unsigned long jmp; size_t first, n; bool df; unsigned long lo, hi; };

struct objscan {
	const void *key;
	struct ulv targets;		/* sorted: every address code may jump to */
	struct ulv ext_targets;		/* sorted: those a branch from another
					   code range jumps to */
	struct ukp_range *ranges;	/* every known code range, by lo */
	size_t nranges;
	struct ukp_range *taint;	/* ranges refused as a whole */
	int *taint_why;
	size_t ntaint;
	struct jtab *jt;		/* readable jump tables, by jmp address */
	size_t njt;
	struct ulv jt_targets;
	unsigned long exec_lo, exec_hi;	/* the object's code */
	struct ulv insns;		/* while scanning: every instruction's
					   address, sorted */
	bool unwind_ok;
	struct objscan *next;
};

static struct objscan *scans;
static void lcache_drop(void);

static int cmp_range(const void *a, const void *b)
{
	const struct ukp_range *x = a, *y = b;
	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return x->hi < y->hi ? -1 : x->hi > y->hi;
}

static bool same_reg(ZydisRegister a, ZydisRegister b)
{
	return a != ZYDIS_REGISTER_NONE && b != ZYDIS_REGISTER_NONE &&
	       ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, a) ==
	       ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, b);
}

struct dinsn {
	ZydisDecodedInstruction d;
	ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
	unsigned long addr;
};

static bool decode_at(const uint8_t *code, unsigned long lo, unsigned long hi,
		      unsigned long pc, struct dinsn *di)
{
	di->addr = pc;
	return ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, code + (pc - lo), hi - pc,
						    &di->d, di->op));
}

static bool writes_reg(const struct dinsn *di, ZydisRegister r)
{
	for (unsigned i = 0; i < di->d.operand_count; i++)
		if (di->op[i].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    (di->op[i].actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
		    same_reg(di->op[i].reg.value, r))
			return true;
	return false;
}

/* kept across a call by the System V ABI */
static bool callee_saved(ZydisRegister r)
{
	switch (ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r)) {
	case ZYDIS_REGISTER_RBX: case ZYDIS_REGISTER_RBP: case ZYDIS_REGISTER_R12:
	case ZYDIS_REGISTER_R13: case ZYDIS_REGISTER_R14: case ZYDIS_REGISTER_R15:
		return true;
	default:
		return false;
	}
}

/*
 * The one value register r holds at address at whenever code gets there,
 * if every way there passes a `lea tab(%rip),%r` and nothing else writes
 * r since: a forward "must" analysis over the range [lo, hi).  Ways in
 * are the range's start, every jump target that a branch from another
 * range or anything but a direct branch (a pointer, a landing pad) may
 * reach, and the unknown targets of every indirect jump in the range
 * (whatever r holds at any of them may arrive anywhere).  A call keeps r
 * only if it is callee-saved.  Returns the table address or 0.
 */
#define DF_TOP 0UL
#define DF_UNKNOWN 1UL
static unsigned long df_meet(unsigned long a, unsigned long b)
{
	return a == DF_TOP ? b : b == DF_TOP || a == b ? a : DF_UNKNOWN;
}

static unsigned long reg_value_at(struct objscan *os, const uint8_t *code, unsigned long lo,
				  unsigned long hi, ZydisRegister r, unsigned long at)
{
	size_t n = 0, cap = 256;
	struct dfi { unsigned long addr, target, in, out; uint8_t len, kind; } *v;
	enum { K_FALL, K_JCC, K_JMP, K_IND, K_END, K_CALL };
	v = malloc(cap * sizeof(*v));
	if (!v)
		return 0;
	struct ulv inner = { 0 };
	unsigned long result = 0;
	for (unsigned long pc = lo; pc < hi;) {
		struct dinsn di;
		if (!decode_at(code, lo, hi, pc, &di))
			goto out;
		if (n == cap) {
			struct dfi *nv = realloc(v, 2 * cap * sizeof(*v));
			if (!nv)
				goto out;
			v = nv;
			cap *= 2;
		}
		struct dfi *e = &v[n++];
		*e = (struct dfi){ pc, 0, DF_TOP, DF_TOP, di.d.length, K_FALL };
		switch (di.d.meta.category) {
		case ZYDIS_CATEGORY_COND_BR:
			e->kind = K_JCC;
			break;
		case ZYDIS_CATEGORY_UNCOND_BR:
			e->kind = di.d.raw.imm[0].is_relative ? K_JMP : K_IND;
			break;
		case ZYDIS_CATEGORY_RET:
			e->kind = K_END;
			break;
		case ZYDIS_CATEGORY_CALL:
			e->kind = K_CALL;
			break;
		default:
			if (di.d.mnemonic == ZYDIS_MNEMONIC_UD2 || di.d.mnemonic == ZYDIS_MNEMONIC_HLT)
				e->kind = K_END;
		}
		if ((e->kind == K_JCC || e->kind == K_JMP) && di.d.raw.imm[0].is_relative) {
			e->target = pc + di.d.length + (unsigned long)di.d.raw.imm[0].value.s;
			if (e->target >= lo && e->target < hi)
				ulv_add(&inner, e->target);
		}
		/* what the instruction leaves in r: the table, unknown, or
		 * as it was (DF_TOP here) */
		if (di.d.mnemonic == ZYDIS_MNEMONIC_LEA && di.op[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    di.op[0].reg.value == ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r) &&
		    di.op[1].mem.base == ZYDIS_REGISTER_RIP && di.op[1].mem.index == ZYDIS_REGISTER_NONE)
			e->out = pc + di.d.length + (unsigned long)di.op[1].mem.disp.value;
		else if (writes_reg(&di, r) || (e->kind == K_CALL && !callee_saved(r)))
			e->out = DF_UNKNOWN;
		pc += di.d.length;
	}
	ulv_sort_unique(&inner);
	/* the ways in from outside what is decoded here */
	for (size_t i = 0; i < n; i++)
		if (i == 0 || ulv_has(&os->ext_targets, v[i].addr) ||
		    (ulv_has(&os->targets, v[i].addr) && !ulv_has(&inner, v[i].addr)))
			v[i].in = DF_UNKNOWN;
	/* to the fixpoint: in only goes down (TOP, a value, UNKNOWN) */
	unsigned long ind = DF_TOP;
	for (bool changed = true; changed;) {
		changed = false;
		for (size_t i = 0; i < n; i++) {
			struct dfi *e = &v[i];
			unsigned long in = df_meet(e->in, ind);
			if (in != e->in) {
				e->in = in;
				changed = true;
			}
			if (in == DF_TOP)
				continue;
			unsigned long out = e->out == DF_TOP ? in : e->out;
			if (e->kind == K_IND) {
				unsigned long m = df_meet(ind, out);
				if (m != ind) {
					ind = m;
					changed = true;
				}
			}
			if (i + 1 < n && (e->kind == K_FALL || e->kind == K_JCC || e->kind == K_CALL)) {
				unsigned long m = df_meet(v[i + 1].in, out);
				if (m != v[i + 1].in) {
					v[i + 1].in = m;
					changed = true;
				}
			}
			if ((e->kind == K_JCC || e->kind == K_JMP) && e->target >= lo && e->target < hi) {
				size_t a = 0, b = n;	/* the target's entry, by address */
				while (a < b) {
					size_t mid = (a + b) / 2;
					if (v[mid].addr < e->target)
						a = mid + 1;
					else
						b = mid;
				}
				if (a == n || v[a].addr != e->target) {
					result = 0;	/* into an instruction: give up */
					goto out;
				}
				unsigned long m = df_meet(v[a].in, out);
				if (m != v[a].in) {
					v[a].in = m;
					changed = true;
				}
			}
		}
	}
	for (size_t i = 0; i < n; i++)
		if (v[i].addr == at && v[i].in != DF_TOP && v[i].in != DF_UNKNOWN)
			result = v[i].in;
out:
	free(inner.v);
	free(v);
	return result;
}

/*
 * A switch jump table: walking back from `jmp *%rX` over straight-line
 * code, the forms gcc and clang emit:
 *	cmp $max,%eI ; ja default ; [mov/movzx into %rI] ;
 *	lea tab(%rip),%rT ; movslq (%rT,%rI,4),%rX ; add %rT,%rX ; jmp *%rX
 * and their variants: the add as `lea (%rB,%rX),%rD ; jmp *%rD`; entries
 * relative to another label than the table (`add %rB,%rX` with %rB from
 * its own lea: glibc's computed gotos); the lea anywhere on the line
 * after the cmp, or before it (branches out of the line are fine; a call
 * only with the registers callee-saved), or before a loop the line is in
 * (reg_value_at); the bound a cmp and the branch after it (a bound on a
 * register narrower than 32 bits holds only through a zero extension of
 * it into %rI), or a zero extension of a byte (at most 256 entries).
 * Appends the table's targets and returns 0, or -1 when not proven.
 */
static int read_jump_table(struct objscan *os, const uint8_t *code,
			   unsigned long lo, unsigned long hi,
			   const unsigned long *starts, size_t k)
{
	struct dinsn di;
	ZydisRegister rx, rt = ZYDIS_REGISTER_NONE, ri = ZYDIS_REGISTER_NONE;
	ZydisRegister rb = ZYDIS_REGISTER_NONE, rb2 = ZYDIS_REGISTER_NONE;
	unsigned long table = 0, base = 0, nent = 0;
	int state = 0;	/* 0: want add, 1: movslq, 2: leas/bound, 3: leas only */
	bool have_table = false, have_base = false;
	unsigned zext = 0;	/* width a zero extension into %rI came from */

	if (!decode_at(code, lo, hi, starts[k], &di) ||
	    di.op[0].type != ZYDIS_OPERAND_TYPE_REGISTER)
		return -1;
	rx = di.op[0].reg.value;
	unsigned long jmp = starts[k];
	unsigned long use = 0;	/* the movslq: where %rT (and %rB) are read */
	for (size_t j = k; j-- > 0 && k - j < 64 && !(have_table && have_base && nent);) {
		/* reached from elsewhere: the index or the table unproven (the
		 * table may yet be, by reg_value_at) */
		if (ulv_has(&os->targets, starts[j + 1])) {
			if (state == 3)
				break;
			return -1;
		}
		if (!decode_at(code, lo, hi, starts[j], &di))
			return -1;
		ZydisMnemonic m = di.d.mnemonic;
		if (state == 0) {
			if (m == ZYDIS_MNEMONIC_ADD && same_reg(di.op[0].reg.value, rx) &&
			    di.op[1].type == ZYDIS_OPERAND_TYPE_REGISTER) {
				rb = di.op[1].reg.value;
			} else if (m == ZYDIS_MNEMONIC_LEA && same_reg(di.op[0].reg.value, rx) &&
				   di.op[1].mem.scale <= 1 && di.op[1].mem.disp.value == 0 &&
				   di.op[1].mem.base != ZYDIS_REGISTER_NONE &&
				   di.op[1].mem.base != ZYDIS_REGISTER_RIP &&
				   di.op[1].mem.index != ZYDIS_REGISTER_NONE) {
				/* which of the two the movslq wrote: state 1 */
				rb = di.op[1].mem.base;
				rb2 = di.op[1].mem.index;
			} else {
				return -1;
			}
			state = 1;
			continue;
		}
		if (state == 1) {
			if (m != ZYDIS_MNEMONIC_MOVSXD) {
				/* other work scheduled in between: it must leave
				 * the registers of the add alone */
				if (writes_reg(&di, rx) || writes_reg(&di, rb) ||
				    (rb2 != ZYDIS_REGISTER_NONE && writes_reg(&di, rb2)) ||
				    di.d.meta.category == ZYDIS_CATEGORY_COND_BR ||
				    di.d.meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
				    di.d.meta.category == ZYDIS_CATEGORY_CALL ||
				    di.d.meta.category == ZYDIS_CATEGORY_RET)
					return -1;
				continue;
			}
			if (di.op[0].type != ZYDIS_OPERAND_TYPE_REGISTER ||
			    di.op[1].type != ZYDIS_OPERAND_TYPE_MEMORY || di.op[1].mem.scale != 4 ||
			    di.op[1].mem.disp.value != 0 || di.op[1].mem.base == ZYDIS_REGISTER_RIP)
				return -1;
			ZydisRegister d = di.op[0].reg.value;
			if (rb2 != ZYDIS_REGISTER_NONE) {	/* lea (%rB,%rE) */
				if (same_reg(d, rb2))
					;
				else if (same_reg(d, rb))
					rb = rb2;
				else
					return -1;
			} else if (!same_reg(d, rx)) {
				return -1;
			}
			if (same_reg(rb, d))
				return -1;
			rt = di.op[1].mem.base;
			ri = di.op[1].mem.index;
			if (same_reg(ri, rt) || same_reg(ri, rb))
				return -1;
			use = starts[j];
			state = 2;
			continue;
		}
		if (m == ZYDIS_MNEMONIC_LEA && di.op[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    di.op[1].mem.base == ZYDIS_REGISTER_RIP && di.op[1].mem.index == ZYDIS_REGISTER_NONE &&
		    ((!have_table && same_reg(di.op[0].reg.value, rt)) ||
		     (!have_base && same_reg(di.op[0].reg.value, rb)))) {
			unsigned long v = starts[j] + di.d.length + (unsigned long)di.op[1].mem.disp.value;
			if (!have_table && same_reg(di.op[0].reg.value, rt)) {
				table = v;
				have_table = true;
			}
			if (!have_base && same_reg(di.op[0].reg.value, rb)) {
				base = v;
				have_base = true;
			}
			continue;
		}
		if (state == 2 && (m == ZYDIS_MNEMONIC_JNBE || m == ZYDIS_MNEMONIC_JNB) && j > 0) {
			/* the bound: the cmp right before this branch */
			struct dinsn c;
			if (ulv_has(&os->targets, starts[j]) ||
			    !decode_at(code, lo, hi, starts[j - 1], &c) ||
			    c.d.mnemonic != ZYDIS_MNEMONIC_CMP ||
			    c.op[0].type != ZYDIS_OPERAND_TYPE_REGISTER ||
			    !same_reg(c.op[0].reg.value, ri) ||
			    c.op[1].type != ZYDIS_OPERAND_TYPE_IMMEDIATE)
				return -1;
			unsigned w = c.op[0].size;
			if (w < 32 && !(zext && zext <= w))
				return -1;
			unsigned long max = c.op[1].imm.value.u;
			if (w < 64)
				max &= (1UL << w) - 1;
			nent = m == ZYDIS_MNEMONIC_JNBE ? max + 1 : max;
			state = 3;
			j--;	/* past the cmp */
			continue;
		}
		/* a byte zero-extended into %rI: a bound of its own */
		if (state == 2 && m == ZYDIS_MNEMONIC_MOVZX && di.op[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    same_reg(di.op[0].reg.value, ri) && di.op[1].size == 8) {
			nent = 256;
			state = 3;
			continue;
		}
		/* anything else must leave the index (until the bound) and
		 * the table registers (until their leas) alone; a register
		 * copy into %rI (mov, movzx) moves the index to its source,
		 * whose bound then holds for it (zero extended: of its low
		 * zext bits) */
		if (state == 2 && di.op[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    same_reg(di.op[0].reg.value, ri) && di.op[1].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    !same_reg(di.op[1].reg.value, rt) && !same_reg(di.op[1].reg.value, rb) &&
		    (m == ZYDIS_MNEMONIC_MOV || m == ZYDIS_MNEMONIC_MOVZX)) {
			unsigned w = m == ZYDIS_MNEMONIC_MOVZX ? di.op[1].size :
				     di.op[0].size == 32 ? 32 : 0;
			if (w && (!zext || w < zext))
				zext = w;
			ri = di.op[1].reg.value;
			continue;
		}
		bool wt = (!have_table && writes_reg(&di, rt)) || (!have_base && writes_reg(&di, rb));
		if (state == 3 && wt)
			break;
		if ((state == 2 && writes_reg(&di, ri)) || wt)
			return -1;
		/* a conditional branch leaves this straight line, which goes on
		 * the same; a call keeps only the callee-saved registers */
		if (di.d.meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
		    di.d.meta.category == ZYDIS_CATEGORY_RET ||
		    (di.d.meta.category == ZYDIS_CATEGORY_CALL &&
		     (state == 2 || (!have_table && !callee_saved(rt)) ||
		      (!have_base && !callee_saved(rb))))) {
			if (state == 3)
				break;
			return -1;
		}
	}
	/* a table register set before a loop: what every way here holds */
	bool df = false;
	if (state == 3 && !have_table) {
		table = reg_value_at(os, code, lo, hi, rt, use);
		have_table = df = table != 0;
	}
	if (state == 3 && !have_base) {
		base = same_reg(rb, rt) ? table : reg_value_at(os, code, lo, hi, rb, use);
		have_base = base != 0;
		df = true;
	}
	if (!have_table || !have_base || !nent || nent > 65536)
		return -1;
	size_t first = os->jt_targets.n;
	for (unsigned long e = 0; e < nent; e++) {
		int32_t off;
		if (ukp_copy_nofault(&off, (const void *)(table + 4 * e), 4))
			return -1;
		/* past the real table's end (a bound wider than it) the words
		 * are not entries: a real one leads to an instruction */
		unsigned long t = base + (unsigned long)(long)off;
		if (t >= os->exec_lo && t < os->exec_hi && ulv_has(&os->insns, t) &&
		    ulv_add(&os->jt_targets, t))
			return -1;
	}
	struct jtab *nj = realloc(os->jt, (os->njt + 1) * sizeof(*nj));
	if (!nj)
		return -1;
	os->jt = nj;
	os->jt[os->njt++] = (struct jtab){ jmp, first, os->jt_targets.n - first, df, lo, hi };
	return 0;
}

static void taint(struct objscan *os, unsigned long lo, unsigned long hi, int why)
{
	struct ukp_range *nr = realloc(os->taint, (os->ntaint + 1) * sizeof(*nr));
	int *nw = realloc(os->taint_why, (os->ntaint + 1) * sizeof(*nw));
	if (nr)
		os->taint = nr;
	if (nw)
		os->taint_why = nw;
	if (nr && nw) {
		os->taint[os->ntaint] = (struct ukp_range){ lo, hi };
		os->taint_why[os->ntaint++] = why;
	}
}

/* Is this indirect jump one through memory we can call a tail call
 * (jmp *disp(%rip): the GOT) ? */
static bool is_got_jump(const ZydisDecodedInstruction *d, const ZydisDecodedOperand *op)
{
	(void)d;
	return op[0].type == ZYDIS_OPERAND_TYPE_MEMORY && op[0].mem.base == ZYDIS_REGISTER_RIP &&
	       op[0].mem.index == ZYDIS_REGISTER_NONE;
}

/*
 * Does this indirect jump go through a pointer (a tail call through a
 * function pointer, a pointer demangled, an absolute table), rather than
 * an address computed by arithmetic (a relative jump table)?  In an object
 * whose code references are all known (every pointer its data holds comes
 * from a relocation, every one its code makes from a rip-relative lea:
 * all of them are jump targets), a pointer can only lead where one of
 * those leads, or where a call returns.  Walks back over straight-line
 * code to what last set the jump's register.
 */
static bool pointer_jump(const uint8_t *code, unsigned long lo, unsigned long hi,
			 const unsigned long *starts, size_t k, const struct ulv *targets)
{
	struct dinsn di;
	if (!decode_at(code, lo, hi, starts[k], &di))
		return false;
	if (di.op[0].type == ZYDIS_OPERAND_TYPE_MEMORY)
		return true;		/* jmp *mem: a pointer loaded */
	if (di.op[0].type != ZYDIS_OPERAND_TYPE_REGISTER)
		return false;
	ZydisRegister r = di.op[0].reg.value;
	for (size_t j = k; j-- > 0 && k - j <= 32;) {
		if (ulv_has(targets, starts[j + 1]))
			return false;	/* a label: set elsewhere too */
		if (!decode_at(code, lo, hi, starts[j], &di))
			return false;
		if (!writes_reg(&di, r))
			continue;
		switch (di.d.mnemonic) {
		case ZYDIS_MNEMONIC_MOV:
			if (di.op[1].type == ZYDIS_OPERAND_TYPE_MEMORY)
				return true;
			if (di.op[1].type != ZYDIS_OPERAND_TYPE_REGISTER)
				return false;
			r = di.op[1].reg.value;
			continue;
		case ZYDIS_MNEMONIC_POP:
			return true;
		case ZYDIS_MNEMONIC_LEA:	/* its target is a jump target */
			return di.op[1].mem.base == ZYDIS_REGISTER_RIP &&
			       di.op[1].mem.index == ZYDIS_REGISTER_NONE;
		case ZYDIS_MNEMONIC_ROR:	/* glibc's PTR_DEMANGLE */
		case ZYDIS_MNEMONIC_ROL:
			if (di.op[1].type != ZYDIS_OPERAND_TYPE_IMMEDIATE)
				return false;
			continue;
		case ZYDIS_MNEMONIC_XOR:
			if (di.op[1].type != ZYDIS_OPERAND_TYPE_MEMORY ||
			    di.op[1].mem.segment != ZYDIS_REGISTER_FS)
				return false;
			continue;
		default:
			return false;	/* arithmetic: a relative table */
		}
	}
	return false;
}

static struct objscan *scan_object(const struct ukp_objdesc *od)
{
	for (struct objscan *s = scans; s; s = s->next)
		if (s->key == od->key)
			return s;
	struct objscan *os = calloc(1, sizeof(*os));
	if (!os)
		return NULL;
	os->key = od->key;
	os->exec_lo = od->exec_lo;
	os->exec_hi = od->exec_hi;
	dec_init();

	struct ulv rv = { 0 };
	for (size_t i = 0; i < od->nfuncs; i++) {
		ulv_add(&rv, od->funcs[i].lo);
		ulv_add(&rv, od->funcs[i].hi);
	}
	os->unwind_ok = read_unwind(od->eh_hdr, &rv, &os->targets) == 0;
	size_t nr = rv.n / 2;
	os->ranges = calloc(nr ? nr : 1, sizeof(*os->ranges));
	for (size_t i = 0; os->ranges && i < nr; i++)
		os->ranges[i] = (struct ukp_range){ rv.v[2 * i], rv.v[2 * i + 1] };
	free(rv.v);
	if (!os->ranges) {
		free(os);
		return NULL;
	}
	qsort(os->ranges, nr, sizeof(*os->ranges), cmp_range);
	size_t k = 0;
	for (size_t i = 0; i < nr; i++) {
		struct ukp_range r = os->ranges[i];
		if (r.hi <= r.lo || r.lo < od->exec_lo || r.hi > od->exec_hi)
			continue;
		if (k && os->ranges[k - 1].lo == r.lo && os->ranges[k - 1].hi == r.hi)
			continue;
		os->ranges[k++] = r;
	}
	os->nranges = k;

	/* pass 1: direct branch targets; where the indirect jumps are */
	struct ulv ind = { 0 };		/* (range index, jmp address) pairs */
	for (size_t i = 0; i < os->nranges; i++) {
		unsigned long lo = os->ranges[i].lo, hi = os->ranges[i].hi;
		uint8_t *code = read_code(lo, hi);
		if (!code)
			continue;
		ZydisDecodedInstruction d;
		ZydisDecoderContext ctx;
		ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
		for (unsigned long pc = lo; pc < hi;) {
			if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(&dec, &ctx, code + (pc - lo),
								      hi - pc, &d))) {
				taint(os, lo, hi, TAINT_UNDECODABLE);
				break;
			}
			/* the operands only where they are looked at (a third of
			 * the decoding time of every instruction of an object) */
			bool lea = od->refs_known && d.mnemonic == ZYDIS_MNEMONIC_LEA;
			bool ijmp = d.meta.category == ZYDIS_CATEGORY_UNCOND_BR &&
				    !d.raw.imm[0].is_relative;
			if ((lea || ijmp) &&
			    ZYAN_FAILED(ZydisDecoderDecodeOperands(&dec, &ctx, &d, op, d.operand_count))) {
				taint(os, lo, hi, TAINT_UNDECODABLE);
				break;
			}
			for (int m = 0; m < 2; m++)
				if (d.raw.imm[m].is_relative) {
					unsigned long t = pc + d.length +
							  (unsigned long)d.raw.imm[m].value.s;
					ulv_add(&os->targets, t);
					if (t < lo || t >= hi)
						ulv_add(&os->ext_targets, t);
				}
			/* a code address made by code: where a pointer may lead */
			if (lea && op[1].mem.base == ZYDIS_REGISTER_RIP) {
				unsigned long a = pc + d.length + (unsigned long)op[1].mem.disp.value;
				if (a >= od->exec_lo && a < od->exec_hi)
					ulv_add(&os->targets, a);
			}
			ulv_add(&os->insns, pc);
			if (ijmp && !is_got_jump(&d, op)) {
				ulv_add(&ind, i);
				ulv_add(&ind, pc);
			}
			pc += d.length;
		}
		free(code);
	}
	for (size_t j = 0; od->refs_known && j < od->ncoderefs; j++)
		ulv_add(&os->targets, od->coderefs[j]);	/* ...and by data */
	ulv_sort_unique(&os->targets);
	ulv_sort_unique(&os->ext_targets);
	ulv_sort_unique(&os->insns);

	/* pass 2: jump tables (needs the targets, to see labels) */
	for (size_t j = 0; j < ind.n; j += 2) {
		size_t i = ind.v[j];
		unsigned long lo = os->ranges[i].lo, hi = os->ranges[i].hi, at = ind.v[j + 1];
		uint8_t *code = read_code(lo, hi);
		struct ulv starts = { 0 };
		int ok = -1;
		if (code) {
			/* instruction starts from the range start up to the jmp */
			ZydisDecodedInstruction d;
			for (unsigned long pc = lo; pc <= at;) {
				ulv_add(&starts, pc);
				if (pc == at)
					break;
				if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(&dec, NULL, code + (pc - lo),
									      hi - pc, &d)))
					break;
				pc += d.length;
			}
			if (starts.n && starts.v[starts.n - 1] == at) {
				ok = read_jump_table(os, code, lo, hi, starts.v, starts.n - 1);
				if (ok && od->refs_known &&
				    pointer_jump(code, lo, hi, starts.v, starts.n - 1, &os->targets))
					ok = 0;
			}
		}
		if (ok)
			taint(os, lo, hi, TAINT_INDIRECT);
		free(starts.v);
		free(code);
	}
	free(ind.v);
	free(os->insns.v);
	os->insns = (struct ulv){ 0 };
	/* reg_value_at saw the ways into its range that were known then: a
	 * table of another range (a hot part's switch with cases in its
	 * .cold part) leading into it was not one of them */
	for (size_t t = 0; t < os->njt; t++) {
		const struct jtab *a = &os->jt[t];
		for (size_t u = 0; a->df && u < os->njt; u++) {
			const struct jtab *b = &os->jt[u];
			if (b->jmp >= a->lo && b->jmp < a->hi)
				continue;
			for (size_t e = 0; e < b->n; e++) {
				unsigned long x = os->jt_targets.v[b->first + e];
				if (x >= a->lo && x < a->hi) {
					taint(os, a->lo, a->hi, TAINT_INDIRECT);
					break;
				}
			}
		}
	}
	for (size_t j = 0; j < os->jt_targets.n; j++)
		ulv_add(&os->targets, os->jt_targets.v[j]);
	ulv_sort_unique(&os->targets);
	os->next = scans;
	scans = os;
	return os;
}

void ukp_arch_opt_forget_if(bool (*gone)(const void *key))
{
	lcache_drop();
	for (struct objscan **pp = &scans; *pp;) {
		struct objscan *s = *pp;
		if (!gone(s->key)) {
			pp = &s->next;
			continue;
		}
		*pp = s->next;
		free(s->targets.v);
		free(s->ext_targets.v);
		free(s->ranges);
		free(s->taint);
		free(s->taint_why);
		free(s->jt);
		free(s->jt_targets.v);
		free(s);
	}
}

/* ---- vector liveness ---------------------------------------------------------- */

/* lo: low 128 bits of vector registers 0-31 (bits 0-31), mask registers
 * (32-39), the x87/MMX stack (40), the status flags (41: not vector
 * state, but solved the same way); hi: bits 128 and up of vector 0-31. */
struct vm { uint64_t lo, hi; };

#define VM_K(n)		(1ULL << (32 + (n)))
#define VM_X87		(1ULL << 40)
#define VM_FLAGS	(1ULL << 41)
#define VM_ALLVEC	0xffffffffULL
#define VM_ALLK		(0xffULL << 32)
#define VM_ARGS		0xffULL

static inline struct vm vm_or(struct vm a, struct vm b) { return (struct vm){ a.lo | b.lo, a.hi | b.hi }; }
static inline struct vm vm_andn(struct vm a, struct vm b) { return (struct vm){ a.lo & ~b.lo, a.hi & ~b.hi }; }
static inline bool vm_eq(struct vm a, struct vm b) { return a.lo == b.lo && a.hi == b.hi; }
static const struct vm VM_ARGV = { VM_ARGS, VM_ARGS };

static bool is_zero_idiom(const ZydisDecodedInstruction *d, const ZydisDecodedOperand *op)
{
	switch (d->mnemonic) {
	case ZYDIS_MNEMONIC_PXOR: case ZYDIS_MNEMONIC_XORPS: case ZYDIS_MNEMONIC_XORPD:
	case ZYDIS_MNEMONIC_PSUBB: case ZYDIS_MNEMONIC_PSUBW: case ZYDIS_MNEMONIC_PSUBD:
	case ZYDIS_MNEMONIC_PSUBQ:
		return op[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		       op[1].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		       op[0].reg.value == op[1].reg.value;
	case ZYDIS_MNEMONIC_VPXOR: case ZYDIS_MNEMONIC_VXORPS: case ZYDIS_MNEMONIC_VXORPD:
	case ZYDIS_MNEMONIC_VPXORD: case ZYDIS_MNEMONIC_VPXORQ:
		return op[1].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		       op[2].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		       op[1].reg.value == op[2].reg.value;
	default:
		return false;
	}
}

/* What one instruction reads and (fully) writes of the vector state. */
static void usedef(const ZydisDecodedInstruction *d, const ZydisDecodedOperand *op,
		   struct vm *use, struct vm *def)
{
	bool zero = is_zero_idiom(d, op);
	*use = (struct vm){ 0, 0 };
	*def = (struct vm){ 0, 0 };
	if (d->mnemonic == ZYDIS_MNEMONIC_VZEROUPPER) {
		def->hi = 0xffff;
		return;
	}
	if (d->mnemonic == ZYDIS_MNEMONIC_VZEROALL) {
		def->lo = def->hi = 0xffff;
		return;
	}
	if (d->mnemonic == ZYDIS_MNEMONIC_EMMS || d->mnemonic == ZYDIS_MNEMONIC_FNINIT) {
		def->lo = VM_X87;
		return;
	}
	for (unsigned i = 0; i < d->operand_count; i++) {
		const ZydisDecodedOperand *o = &op[i];
		struct vm bits = { 0, 0 };
		bool partial = false;
		ZydisRegister regs[3] = { ZYDIS_REGISTER_NONE, ZYDIS_REGISTER_NONE, ZYDIS_REGISTER_NONE };
		/* EVEX's write-mask field naming k0 means "no mask": Zydis
		 * lists k0 as read, the CPU reads no opmask */
		if (o->encoding == ZYDIS_OPERAND_ENCODING_MASK &&
		    d->avx.mask.mode == ZYDIS_MASK_MODE_DISABLED)
			continue;
		if (o->type == ZYDIS_OPERAND_TYPE_REGISTER)
			regs[0] = o->reg.value;
		else if (o->type == ZYDIS_OPERAND_TYPE_MEMORY) {
			regs[1] = o->mem.index;	/* VSIB */
		}
		for (int r = 0; r < 3; r++) {
			ZydisRegister reg = regs[r];
			switch (ZydisRegisterGetClass(reg)) {
			case ZYDIS_REGCLASS_XMM:
				bits.lo |= 1ULL << (reg - ZYDIS_REGISTER_XMM0);
				/* VEX/EVEX writes zero bits 128+; legacy SSE
				 * leaves them: only the low part is touched */
				if (d->encoding != ZYDIS_INSTRUCTION_ENCODING_LEGACY)
					bits.hi |= 1ULL << (reg - ZYDIS_REGISTER_XMM0);
				break;
			case ZYDIS_REGCLASS_YMM:
				bits.lo |= 1ULL << (reg - ZYDIS_REGISTER_YMM0);
				bits.hi |= 1ULL << (reg - ZYDIS_REGISTER_YMM0);
				break;
			case ZYDIS_REGCLASS_ZMM:
				bits.lo |= 1ULL << (reg - ZYDIS_REGISTER_ZMM0);
				bits.hi |= 1ULL << (reg - ZYDIS_REGISTER_ZMM0);
				break;
			case ZYDIS_REGCLASS_MASK:
				bits.lo |= VM_K(reg - ZYDIS_REGISTER_K0);
				break;
			case ZYDIS_REGCLASS_X87:
			case ZYDIS_REGCLASS_MMX:
				bits.lo |= VM_X87;
				partial = true;
				break;
			default:
				break;
			}
		}
		if (!bits.lo && !bits.hi)
			continue;
		if (o->type == ZYDIS_OPERAND_TYPE_MEMORY || partial) {
			/* VSIB index, or the x87 stack: read, never wholly written */
			*use = vm_or(*use, bits);
			continue;
		}
		if ((o->actions & ZYDIS_OPERAND_ACTION_MASK_READ) && !zero)
			*use = vm_or(*use, bits);
		if (o->actions & ZYDIS_OPERAND_ACTION_CONDWRITE) {
			*use = vm_or(*use, bits);	/* may keep the old value */
		} else if (o->actions & ZYDIS_OPERAND_ACTION_WRITE) {
			/* a legacy SSE write of an xmm keeps bits 128+: bits
			 * has only the low part then, so only that dies */
			*def = vm_or(*def, bits);
			/* EVEX merge-masking keeps unselected elements */
			if (d->encoding == ZYDIS_INSTRUCTION_ENCODING_EVEX &&
			    d->avx.mask.mode == ZYDIS_MASK_MODE_MERGING &&
			    d->avx.mask.reg != ZYDIS_REGISTER_K0 &&
			    d->avx.mask.reg != ZYDIS_REGISTER_NONE)
				*use = vm_or(*use, bits);
		}
	}
}

/*
 * The status flags (CF PF AF ZF SF OF) as one: read if an instruction
 * tests any, dead before one that writes all six for certain.  Not a
 * shift or rotate (a count of 0 leaves them), not a rep string
 * instruction (rcx 0 runs none of it), not a system call or software
 * interrupt (the kernel gives the program its own flags back; Zydis
 * describes the instruction alone).  A call and a return read them: a
 * callee or a caller written by hand may use flags set on the other
 * side (gcc never does; IPA-RA could keep them across a callee that
 * leaves them alone), and code after an instruction that traps
 * (int3, ud2, hlt) runs again if a signal handler returns to it.
 */
#define STATUS_FLAGS (ZYDIS_CPUFLAG_CF | ZYDIS_CPUFLAG_PF | ZYDIS_CPUFLAG_AF | \
		      ZYDIS_CPUFLAG_ZF | ZYDIS_CPUFLAG_SF | ZYDIS_CPUFLAG_OF)

static void flags_usedef(const ZydisDecodedInstruction *d, struct vm *use, struct vm *def)
{
	if (d->meta.category == ZYDIS_CATEGORY_CALL ||
	    d->meta.category == ZYDIS_CATEGORY_SYSCALL ||
	    d->meta.category == ZYDIS_CATEGORY_INTERRUPT) {
		use->lo |= VM_FLAGS;
		return;
	}
	const ZydisAccessedFlags *f = d->cpu_flags;
	if (!f)
		return;
	if (f->tested & STATUS_FLAGS)
		use->lo |= VM_FLAGS;
	ZydisAccessedFlagsMask w = f->modified | f->set_0 | f->set_1 | f->undefined;
	bool sure = (w & STATUS_FLAGS) == STATUS_FLAGS &&
		    !(d->attributes & (ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE |
				       ZYDIS_ATTRIB_HAS_REPNE));
	switch (d->mnemonic) {
	case ZYDIS_MNEMONIC_SHL: case ZYDIS_MNEMONIC_SHR: case ZYDIS_MNEMONIC_SAR:
	case ZYDIS_MNEMONIC_ROL: case ZYDIS_MNEMONIC_ROR: case ZYDIS_MNEMONIC_RCL:
	case ZYDIS_MNEMONIC_RCR: case ZYDIS_MNEMONIC_SHLD: case ZYDIS_MNEMONIC_SHRD:
		sure = false;
		break;
	default:
		break;
	}
	if (sure)
		def->lo |= VM_FLAGS;
}

enum fkind { K_FALL, K_JMP, K_JCC, K_CALL, K_RET, K_JIND, K_STOP };

struct finsn {
	unsigned long addr;
	uint8_t len, kind;
	unsigned long target;
	struct vm use, def, in;
	long jt;		/* jump table index, -1 none */
};

static long find_insn(const struct finsn *f, size_t n, unsigned long a)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (f[mid].addr < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && f[lo].addr == a ? (long)lo : -1;
}

static struct vm live_at(const struct finsn *f, size_t n, unsigned long t,
			 struct vm all)
{
	long i = find_insn(f, n, t);
	return i >= 0 ? f[i].in : all;	/* a tail call, a cold part: all */
}

/* The last function's liveness, for probes on many of its instructions. */
static struct {
	const struct objscan *os;
	unsigned long lo, hi;
	struct finsn *f;
	size_t n;
	bool ok, entry_jumped;
} lcache;

static void lcache_drop(void)
{
	free(lcache.f);
	memset(&lcache, 0, sizeof(lcache));
}

static bool liveness_compute(const struct objscan *os, unsigned long lo, unsigned long hi);

/* Vector state live at addr, from the function [lo, hi).  false: unknown. */
static bool liveness(const struct objscan *os, unsigned long lo, unsigned long hi,
		     unsigned long addr, struct vm *out)
{
	if (lcache.os != os || lcache.lo != lo || lcache.hi != hi) {
		lcache_drop();
		lcache.os = os;
		lcache.lo = lo;
		lcache.hi = hi;
		lcache.ok = liveness_compute(os, lo, hi);
	}
	if (!lcache.ok)
		return false;
	long at = find_insn(lcache.f, lcache.n, addr);
	if (at < 0)
		return false;
	*out = lcache.f[at].in;
	/* the x87 stack is empty at a function's entry (ABI; no IPA-RA
	 * for a stack), unless the function jumps back there */
	if (addr == lo && !lcache.entry_jumped)
		out->lo &= ~VM_X87;
	return true;
}

/* Decode [lo, hi) into lcache.f and solve liveness to a fixed point.
 * false: undecodable, or no fixed point. */
static bool liveness_compute(const struct objscan *os, unsigned long lo, unsigned long hi)
{
	uint8_t *code = read_code(lo, hi);
	size_t cap = 64, n = 0;
	struct finsn *f = malloc(cap * sizeof(*f));
	bool x87_used = false, ok = true, entry_jumped = false;
	ZydisDecodedInstruction d;
	ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];

	if (!code || !f) {
		free(code);
		free(f);
		return false;
	}
	for (unsigned long pc = lo; pc < hi && ok;) {
		if (ZYAN_FAILED(ZydisDecoderDecodeFull(&dec, code + (pc - lo), hi - pc, &d, op))) {
			ok = false;
			break;
		}
		if (n == cap) {
			struct finsn *nf = realloc(f, 2 * cap * sizeof(*f));
			if (!nf) {
				ok = false;
				break;
			}
			f = nf;
			cap *= 2;
		}
		struct finsn *e = &f[n++];
		memset(e, 0, sizeof(*e));
		e->addr = pc;
		e->len = d.length;
		e->jt = -1;
		usedef(&d, op, &e->use, &e->def);
		flags_usedef(&d, &e->use, &e->def);
		if (e->use.lo & VM_X87)
			x87_used = true;
		bool rel = d.raw.imm[0].is_relative;
		if (rel)
			e->target = pc + d.length + (unsigned long)d.raw.imm[0].value.s;
		switch (d.meta.category) {
		case ZYDIS_CATEGORY_COND_BR:
			e->kind = K_JCC;
			break;
		case ZYDIS_CATEGORY_UNCOND_BR:
			e->kind = rel ? K_JMP : K_JIND;
			if (!rel)
				for (size_t j = 0; j < os->njt; j++)
					if (os->jt[j].jmp == pc)
						e->jt = (long)j;
			if (!rel && e->jt < 0 && !is_got_jump(&d, op))
				e->jt = -2;	/* unknown targets */
			break;
		case ZYDIS_CATEGORY_CALL:
			/* no vector register dies at a call: with IPA-RA, gcc
			 * keeps values in "caller-saved" registers across calls
			 * to local functions it knows leave them alone.  The
			 * x87 stack is empty at every call. */
			e->kind = K_CALL;
			e->use = vm_or(e->use, VM_ARGV);
			e->def = (struct vm){ VM_X87, 0 };
			break;
		case ZYDIS_CATEGORY_RET:
			e->kind = K_RET;
			break;
		default:
			if (d.mnemonic == ZYDIS_MNEMONIC_UD2 || d.mnemonic == ZYDIS_MNEMONIC_HLT ||
			    d.mnemonic == ZYDIS_MNEMONIC_INT3 || d.mnemonic == ZYDIS_MNEMONIC_UD1 ||
			    d.mnemonic == ZYDIS_MNEMONIC_UD0)
				e->kind = K_STOP;
			else if (rel)
				e->kind = K_JCC;	/* xbegin, loop */
			else
				e->kind = K_FALL;
		}
		if ((e->kind == K_JMP || e->kind == K_JCC) && e->target == lo)
			entry_jumped = true;
		pc += d.length;
	}
	free(code);
	/* At a return every vector register may still be needed: besides
	 * the return value, a caller compiled with IPA-RA may keep its own
	 * values in registers this function never writes (so the ABI's "only
	 * the arguments are live at entry" does not hold for local
	 * functions).  The x87 stack: st0-1 when the function uses the x87
	 * at all (a C handler keeps the x87 stack balanced, so values the
	 * ABI parks there across our code survive it otherwise). */
	struct vm all = { (ukp_vec_level >= 2 ? VM_ALLVEC | VM_ALLK : 0xffffULL) | VM_X87 | VM_FLAGS,
			  ukp_vec_level >= 2 ? VM_ALLVEC : 0xffffULL };
	struct vm retuse = all;
	if (!x87_used)
		retuse.lo &= ~VM_X87;
	for (size_t i = 0; i < n; i++)
		if (f[i].kind == K_RET)
			f[i].use = vm_or(f[i].use, retuse);

	/* backwards to a fixed point */
	bool changed = ok;
	for (int pass = 0; changed && pass < 64; pass++) {
		changed = false;
		for (size_t i = n; i-- > 0;) {
			struct finsn *e = &f[i];
			struct vm o = { 0, 0 };
			struct vm next = i + 1 < n ? f[i + 1].in : all;
			switch (e->kind) {
			case K_FALL: case K_CALL: o = next; break;
			case K_JCC: o = vm_or(next, live_at(f, n, e->target, all)); break;
			case K_JMP: o = live_at(f, n, e->target, all); break;
			case K_RET: break;
			case K_STOP: o = all; break;	/* a program handler may resume
							   after it (flags_usedef) */
			case K_JIND:
				if (e->jt < 0)
					o = all;	/* tail call or unknown */
				else
					for (size_t t = 0; t < os->jt[e->jt].n; t++)
						o = vm_or(o, live_at(f, n,
							os->jt_targets.v[os->jt[e->jt].first + t], all));
				break;
			}
			struct vm in = vm_or(e->use, vm_andn(o, e->def));
			if (!vm_eq(in, e->in)) {
				e->in = in;
				changed = true;
			}
		}
	}
	lcache.f = f;
	lcache.n = n;
	lcache.entry_jumped = entry_jumped;
	return ok && !changed;
}

/* ---- the region ------------------------------------------------------------- */

static const struct ukp_range *range_containing(const struct objscan *os, unsigned long a)
{
	/* ranges may nest (aliases, FDE vs symbol): look at every one that
	 * starts at or below a, nearest first, a few back */
	size_t lo = 0, hi = os->nranges;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (os->ranges[mid].lo <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, k = 0; i-- > 0 && k < 64; k++)
		if (a < os->ranges[i].hi)
			return &os->ranges[i];
	return NULL;
}

static int refuse(char *why, size_t n, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int refuse(char *why, size_t n, int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return err;
}

static void liveness_class(const struct objscan *os, unsigned long flo, unsigned long fhi,
			   unsigned long addr, enum ukp_vsave *vsave, bool *flags_dead);

/*
 * The punned jump (E9Patch's tactic, PLDI 2020): where no region of whole
 * instructions can take a 5-byte jump, the first instruction alone (k < 5
 * bytes) becomes a jump whose rel32 runs on into the bytes after it, which
 * stay as they are.  Every instruction boundary but the first stays where
 * it was, with the same bytes, so nothing can jump into the region - a
 * branch target right after it, an indirect jump no analysis bounds, the
 * function's end, a call: none of these matters.  The price: the jump's
 * target is fixed but for its low k-1 bytes (fewer with prefixes, which
 * give other targets), so it lands on a hop (a jmp rel32 to the detour)
 * placed there (optimize.c), and the bytes it reads after the instruction
 * (up to k + 4 with the most prefixes: ukp_arch_span) must not change while
 * it is there (no other probe's int3 or jump, no ftrace site).
 */
static int region_pun(const struct ukp_objdesc *od, unsigned long addr, unsigned long fhi,
		      struct ukp_region *r, char *why, size_t wn)
{
	memset(r, 0, sizeof(*r));
	r->addr = addr;
	if (addr + UKP_ARCH_PUN_SPAN_MAX > od->exec_hi)
		return refuse(why, wn, -EINVAL, "punned jump past the object's code");
	uint8_t buf[16];
	ukp_arch_engine->read_text(addr, buf, sizeof(buf));
	struct ukp_insn *in = &r->insn[0];
	size_t avail = fhi - addr < UKP_ARCH_MAX_INSN ? fhi - addr : UKP_ARCH_MAX_INSN;
	if (ukp_arch_decode(buf, avail, addr, in) < 0)
		return refuse(why, wn, -EILSEQ, "undecodable function: at %#lx", addr);
	if (in->is_int3)
		return refuse(why, wn, -EINVAL, "unrelocatable instruction: int3");
	if (in->len >= UKP_ARCH_JMP_LEN || addr + in->len > fhi)
		return refuse(why, wn, -EINVAL, "no punned jump: one instruction");
	r->ninsn = 1;
	r->len = in->len;
	r->pun = true;
	memcpy(r->orig, buf, ukp_arch_span(r));
	/* an int3 in the bytes it reads may be another tool's breakpoint,
	 * whose removal would move the jump's target */
	if (memchr(r->orig + r->len, UKP_ARCH_BREAKPOINT, ukp_arch_span(r) - r->len))
		return refuse(why, wn, -EINVAL, "punned jump: an int3 in the bytes it reads");
	if (ukp_arch_engine->ftrace_overlaps(addr, addr + ukp_arch_span(r)))
		return refuse(why, wn, -EBUSY, "ftrace patch site inside the region");
	return 0;
}

static int region_jump(const struct objscan *os, const struct ukp_objdesc *od,
		       unsigned long addr, unsigned long fhi, struct ukp_region *r,
		       char *why, size_t wn, unsigned min_len);

/*
 * A region ends where an instruction begins (a) that could take no jump
 * of its own: its 5 bytes hold a branch target, or run past the function's
 * end, or a call.  Probed with the region's site - every instruction of a
 * loop, say - it stays a breakpoint.  So the region takes it in (the jump
 * is the same 5 bytes; the copy holds one instruction more), while a is
 * no branch target itself and the region reaches it by falling through,
 * up to UKP_ARCH_REGION_BYTES_MAX bytes.
 */
static void region_extend(const struct objscan *os, const struct ukp_objdesc *od,
			  unsigned long fhi, struct ukp_region *r)
{
	for (int step = 0; step < UKP_REGION_MAX; step++) {
		const struct ukp_insn *last = &r->insn[r->ninsn - 1];
		unsigned long a = r->addr + r->len;
		if (a >= fhi || last->addr + last->len != a || r->ninsn == UKP_REGION_MAX ||
		    (last->flow != UKP_FLOW_NONE && last->flow != UKP_FLOW_JCC &&
		     last->flow != UKP_FLOW_SYSCALL))
			return;
		size_t ti = ulv_lower(&os->targets, a);
		if (ti < os->targets.n && os->targets.v[ti] == a)
			return;		/* a jump lands there: it stays a boundary */
		struct ukp_region ar;
		char w[96];
		memset(&ar, 0, sizeof(ar));
		ar.addr = a;
		if (region_jump(os, od, a, fhi, &ar, w, sizeof(w), UKP_ARCH_JMP_LEN) != -EINVAL ||
		    (!strstr(w, "jump into the region") && !strstr(w, "crosses the function's end") &&
		     !strstr(w, "call inside the region")))
			return;		/* a takes a jump of its own (or nothing can) */
		uint8_t b[UKP_ARCH_MAX_INSN];
		struct ukp_insn ai;
		size_t avail = fhi - a < sizeof(b) ? fhi - a : sizeof(b);
		ukp_arch_engine->read_text(a, b, avail);
		if (ukp_arch_decode(b, avail, a, &ai) < 0 || a + ai.len - r->addr > UKP_ARCH_REGION_BYTES_MAX)
			return;
		struct ukp_region xr;
		memset(&xr, 0, sizeof(xr));
		xr.addr = r->addr;
		if (region_jump(os, od, r->addr, fhi, &xr, w, sizeof(w),
				(unsigned)(a + ai.len - r->addr)))
			return;
		*r = xr;
	}
}

int ukp_arch_opt_analyze(unsigned long addr, unsigned long flo, unsigned long fhi,
			 const struct ukp_objdesc *od, struct ukp_region *r,
			 char *why, size_t wn)
{
	memset(r, 0, sizeof(*r));
	r->addr = addr;
	if (!od || !od->key)
		return refuse(why, wn, -ENOENT, "not in a known function");
	struct objscan *os = scan_object(od);
	if (!os)
		return refuse(why, wn, -ENOMEM, "undecodable function: out of memory");
	if (fhi <= flo) {
		const struct ukp_range *fr = range_containing(os, addr);
		if (!fr)
			return refuse(why, wn, -ENOENT, "not in a known function");
		flo = fr->lo;
		fhi = fr->hi;
	}
	bool indirect = false;
	for (size_t i = 0; i < os->ntaint; i++) {
		if (addr >= os->taint[i].lo && addr < os->taint[i].hi) {
			if (os->taint_why[i] != TAINT_INDIRECT)
				return refuse(why, wn, -EINVAL, "undecodable function");
			indirect = true;
		}
	}
	int err = os->unwind_ok ? region_jump(os, od, addr, fhi, r, why, wn, UKP_ARCH_JMP_LEN) :
		  refuse(why, wn, -EINVAL, "landing pad inside the region: unwind tables unreadable");
	if (!err && !indirect)
		region_extend(os, od, fhi, r);
	/* an indirect jump might land inside the region: unless it has no
	 * inside (one instruction, no padding); the first reason to give */
	if (indirect && (err == -EINVAL || (!err && (r->ninsn > 1 || r->len > r->insn[0].len))))
		err = refuse(why, wn, -EINVAL, "indirect jump in the function");
	if (err == -EINVAL || err == -EBUSY) {
		char pwhy[96];
		struct ukp_region pr;
		if (!region_pun(od, addr, fhi, &pr, pwhy, sizeof(pwhy))) {
			/* why: what the region of whole instructions met */
			snprintf(pwhy, sizeof(pwhy), "%s", why);
			snprintf(why, wn, "punned jump: %s", pwhy);
			*r = pr;
			err = 0;
		}
	}
	if (!err)
		liveness_class(os, flo, fhi, addr, &r->vsave, &r->flags_dead);
	return err;
}

/* The region of whole instructions a jump at addr overwrites, checked */
static int region_jump(const struct objscan *os, const struct ukp_objdesc *od,
		       unsigned long addr, unsigned long fhi, struct ukp_region *r,
		       char *why, size_t wn, unsigned min_len)
{
	/* instructions covering 5 bytes (min_len: at least that many) */
	uint8_t buf[32];
	ukp_arch_engine->read_text(addr, buf, sizeof(buf));
	unsigned long pc = addr;
	bool falls = true;
	while (pc < addr + min_len) {
		if (!falls)
			break;	/* the rest must be unreachable padding */
		if (pc >= fhi)
			return refuse(why, wn, -EINVAL, "region crosses the function's end");
		if (r->ninsn == UKP_REGION_MAX)
			return refuse(why, wn, -EINVAL, "unrelocatable instruction: too many");
		struct ukp_insn *in = &r->insn[r->ninsn];
		size_t avail = fhi - pc < UKP_ARCH_MAX_INSN ? fhi - pc : UKP_ARCH_MAX_INSN;
		if (ukp_arch_decode(buf + (pc - addr), avail, pc, in) < 0)
			return refuse(why, wn, -EILSEQ, "undecodable function: at %#lx", pc);
		if (pc + in->len > fhi)
			return refuse(why, wn, -EINVAL, "region crosses the function's end");
		r->ninsn++;
		pc += in->len;
		bool last = pc >= addr + min_len;
		switch (in->flow) {
		case UKP_FLOW_NONE:
			if (in->is_int3)
				return refuse(why, wn, -EINVAL, "unrelocatable instruction: int3");
			break;
		case UKP_FLOW_CALL:
		case UKP_FLOW_CALL_IND:
			if (!last)
				return refuse(why, wn, -EINVAL, "call inside the region");
			break;
		case UKP_FLOW_SYSCALL:
		case UKP_FLOW_JCC:
			/* inside the region too: the detour's copy goes on
			 * after it (a jcc's target inside is refused below,
			 * as every jump into the region is) */
			break;
		case UKP_FLOW_JMP:
		case UKP_FLOW_RET:
		case UKP_FLOW_JMP_IND:
		case UKP_FLOW_STOP:
			falls = false;
			break;
		}
	}
	if (pc < addr + min_len && min_len > UKP_ARCH_JMP_LEN)
		return refuse(why, wn, -EINVAL, "region ends before what it must cover");
	unsigned long end = addr + UKP_ARCH_JMP_LEN > pc ? addr + UKP_ARCH_JMP_LEN : pc;
	/* padding: past the function, in no other function, never executed,
	 * and looking like what compilers and assemblers pad with (nops,
	 * int3): a symbol of size 0 such as _fini, or code of another
	 * section, is not padding */
	for (unsigned long b = pc; b < end;) {
		ZydisDecodedInstruction d;
		if (b >= od->exec_hi || (b >= fhi && range_containing(os, b)))
			return refuse(why, wn, -EINVAL, "region crosses the function's end");
		if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(&dec, NULL, buf + (b - addr),
							      sizeof(buf) - (b - addr), &d)) ||
		    (d.mnemonic != ZYDIS_MNEMONIC_NOP && d.mnemonic != ZYDIS_MNEMONIC_INT3))
			return refuse(why, wn, -EINVAL, "region crosses the function's end");
		b += d.length;
	}
	r->len = (unsigned)(end - addr);
	memcpy(r->orig, buf, r->len);
	if (ukp_arch_engine->ftrace_overlaps(addr, end))
		return refuse(why, wn, -EBUSY, "ftrace patch site inside the region");
	size_t ti = ulv_lower(&os->targets, addr + 1);
	if (ti < os->targets.n && os->targets.v[ti] < end)
		return refuse(why, wn, -EINVAL, "jump into the region: to +%lu",
			      os->targets.v[ti] - addr);
	return 0;
}

/* The vector class and the flags' liveness at addr, from the function */
static void liveness_class(const struct objscan *os, unsigned long flo, unsigned long fhi,
			   unsigned long addr, enum ukp_vsave *vsave, bool *flags_dead)
{
	struct vm live;
	/* the trampolines save registers whole, at the CPU's width (a
	 * register live in its low 128 bits only is saved zmm-wide on
	 * AVX-512); only a live x87 stack, or liveness unknown, needs
	 * XSAVE.  Registers 16-31 and the opmasks exist on AVX-512 alone,
	 * where liveness counts them (liveness_compute()'s "all").  The
	 * status flags dead there: the detour's fast paths need not put them
	 * back (relocate.c) */
	bool known = liveness(os, flo, fhi, addr, &live);
	*flags_dead = known && !(live.lo & VM_FLAGS);
	live.lo &= ~VM_FLAGS;
	if (!known || (live.lo & VM_X87)) {
		*vsave = UKP_VSAVE_XSAVE;
	} else if (!live.lo && !live.hi) {
		*vsave = UKP_VSAVE_NONE;
	} else if (!((live.lo | live.hi) & ~VM_ARGS)) {
		*vsave = UKP_VSAVE_ARGS;
	} else if (!((live.lo | live.hi) & ~0xffffULL)) {
		*vsave = UKP_VSAVE_ALL16;
	} else {
		*vsave = ukp_vec_level >= 2 ? UKP_VSAVE_ALL32 : UKP_VSAVE_XSAVE;
	}
}

int ukp_arch_opt_point(unsigned long addr, unsigned long flo, unsigned long fhi,
		       const struct ukp_objdesc *od, enum ukp_vsave *vsave, bool *flags_dead)
{
	*vsave = UKP_VSAVE_XSAVE;	/* unknown: everything */
	*flags_dead = false;
	if (!od || !od->key)
		return -ENOENT;
	struct objscan *os = scan_object(od);
	if (!os)
		return -ENOMEM;
	if (fhi <= flo) {
		const struct ukp_range *fr = range_containing(os, addr);
		if (!fr)
			return -ENOENT;
		flo = fr->lo;
		fhi = fr->hi;
	}
	liveness_class(os, flo, fhi, addr, vsave, flags_dead);
	return 0;
}

/* ---- handlers that keep to the general registers ------------------------ */

/* Instruction sets with nothing but general-register state. */
static bool gpr_isa(ZydisISAExt e)
{
	switch (e) {
	case ZYDIS_ISA_EXT_BASE: case ZYDIS_ISA_EXT_LONGMODE: case ZYDIS_ISA_EXT_BMI1:
	case ZYDIS_ISA_EXT_BMI2: case ZYDIS_ISA_EXT_LZCNT: case ZYDIS_ISA_EXT_ADOX_ADCX:
	case ZYDIS_ISA_EXT_MOVBE: case ZYDIS_ISA_EXT_CET: case ZYDIS_ISA_EXT_PAUSE:
	case ZYDIS_ISA_EXT_RDTSCP: case ZYDIS_ISA_EXT_RDPID: case ZYDIS_ISA_EXT_RDRAND:
	case ZYDIS_ISA_EXT_RDSEED: case ZYDIS_ISA_EXT_RDWRFSGS: case ZYDIS_ISA_EXT_CLFSH:
	case ZYDIS_ISA_EXT_CLFLUSHOPT: case ZYDIS_ISA_EXT_CLWB:
		return true;
	default:
		return false;
	}
}

/* Does the instruction read or write anything but general registers,
 * flags and memory?  Two independent checks: its instruction set, and
 * every operand (hidden ones too: MXCSR, the x87 words). */
static bool touches_fpu(const ZydisDecodedInstruction *d, const ZydisDecodedOperand *op)
{
	if (!gpr_isa(d->meta.isa_ext))
		return true;
	for (unsigned i = 0; i < d->operand_count; i++) {
		ZydisRegister r[2] = { ZYDIS_REGISTER_NONE, ZYDIS_REGISTER_NONE };
		if (op[i].type == ZYDIS_OPERAND_TYPE_REGISTER)
			r[0] = op[i].reg.value;
		else if (op[i].type == ZYDIS_OPERAND_TYPE_MEMORY)
			r[0] = op[i].mem.base, r[1] = op[i].mem.index;
		for (int k = 0; k < 2; k++) {
			switch (ZydisRegisterGetClass(r[k])) {
			case ZYDIS_REGCLASS_XMM: case ZYDIS_REGCLASS_YMM: case ZYDIS_REGCLASS_ZMM:
			case ZYDIS_REGCLASS_MASK: case ZYDIS_REGCLASS_X87: case ZYDIS_REGCLASS_MMX:
			case ZYDIS_REGCLASS_TMM:
				return true;
			default:
				break;
			}
			if (r[k] == ZYDIS_REGISTER_MXCSR || r[k] == ZYDIS_REGISTER_X87CONTROL ||
			    r[k] == ZYDIS_REGISTER_X87STATUS || r[k] == ZYDIS_REGISTER_X87TAG)
				return true;
		}
	}
	return false;
}

/* A call or jump target outside the function: through a PLT stub to the
 * function its GOT entry holds now (an unresolved lazy entry leads to the
 * resolver, which saves vector state: refused, as it should be).  Only
 * code in no function is taken for a stub; its slot may be writable (lazy
 * binding), but only the dynamic linker writes it. */
/* A jump or call through *disp(%rip): the slot's address and what it
 * holds now */
static bool through_slot(const struct dinsn *di, unsigned long *slot, unsigned long *target)
{
	return is_got_jump(&di->d, di->op) &&
	       ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(&di->d, &di->op[0], di->addr, slot)) &&
	       !ukp_copy_nofault(target, (const void *)*slot, sizeof(*target));
}

static unsigned long resolve_stub(unsigned long t, const struct ukp_code_env *env)
{
	int (*bounds)(unsigned long, unsigned long *, unsigned long *) = env->bounds;
	unsigned long lo, hi;
	for (int hop = 0; hop < 2 && bounds(t, &lo, &hi); hop++) {
		uint8_t code[32];
		struct dinsn di;
		if (ukp_copy_nofault(code, (const void *)t, 16) ||
		    !decode_at(code, t, t + 16, t, &di))
			return 0;
		if (di.d.mnemonic == ZYDIS_MNEMONIC_ENDBR64) {
			if (!decode_at(code, t, t + 16, t + di.d.length, &di))
				return 0;
		}
		unsigned long slot, target;
		if (di.d.mnemonic != ZYDIS_MNEMONIC_JMP || !through_slot(&di, &slot, &target))
			return 0;
		t = target;
	}
	return bounds(t, &lo, &hi) ? 0 : t;
}

#define GPR_MAX_FUNCS 256

int ukp_arch_code_gpr_only(unsigned long fn, const struct ukp_code_env *env,
			   char *why, size_t n)
{
	int (*bounds)(unsigned long, unsigned long *, unsigned long *) = env->bounds;
	struct ulv todo = { 0 }, seen = { 0 };
	int err = 0;

	dec_init();
	if (ulv_add(&todo, fn))
		return refuse(why, n, -ENOMEM, "out of memory");
	while (todo.n && !err) {
		unsigned long f = todo.v[--todo.n], lo, hi;
		if (bounds(f, &lo, &hi)) {
			err = refuse(why, n, -ENOENT, "code at %#lx is in no known function", f);
			break;
		}
		if (ulv_has(&seen, lo))
			continue;
		if (seen.n >= GPR_MAX_FUNCS) {
			err = refuse(why, n, -E2BIG, "calls more than %d functions", GPR_MAX_FUNCS);
			break;
		}
		if (ulv_add(&seen, lo)) {
			err = refuse(why, n, -ENOMEM, "out of memory");
			break;
		}
		ulv_sort_unique(&seen);
		uint8_t *code = read_code(lo, hi);
		if (!code) {
			err = refuse(why, n, -ENOMEM, "out of memory");
			break;
		}
		for (unsigned long pc = lo; pc < hi && !err;) {
			struct dinsn di;
			if (!decode_at(code, lo, hi, pc, &di)) {
				err = refuse(why, n, -EILSEQ, "undecodable code at %#lx", pc);
				break;
			}
			pc += di.d.length;
			const ZydisDecodedInstruction *d = &di.d;
			if (touches_fpu(d, di.op)) {
				err = refuse(why, n, -EDOM, "%s at %#lx uses vector/x87 state",
					     ZydisMnemonicGetString(d->mnemonic), di.addr);
				break;
			}
			bool branch = d->meta.category == ZYDIS_CATEGORY_CALL ||
				      d->meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
				      d->meta.category == ZYDIS_CATEGORY_COND_BR;
			if (!branch)
				continue;
			unsigned long t = 0;
			if (di.op[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
				if (!ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(d, &di.op[0], di.addr, &t)))
					t = 0;
				if (t >= lo && t < hi)
					continue;	/* the sweep covers it */
				t = resolve_stub(t, env);
			} else {
				/* a GOT entry (-fno-plt), read-only after relocation;
				 * a writable one is a function pointer that can change */
				unsigned long slot;
				if (through_slot(&di, &slot, &t) && env->read_only(slot))
					t = resolve_stub(t, env);
				else
					t = 0;
			}
			if (!t) {
				err = refuse(why, n, -EDOM, "%s at %#lx goes where the analysis cannot follow",
					     ZydisMnemonicGetString(d->mnemonic), di.addr);
			} else if (ulv_add(&todo, t)) {
				err = refuse(why, n, -ENOMEM, "out of memory");
			}
		}
		free(code);
	}
	free(todo.v);
	free(seen.v);
	return err;
}

/*
 * Is fn a leaf that cannot change errno: no call, no jump out of itself
 * (a tail call) or through a register, no system call, no store through
 * %fs or %gs (errno is thread-local)?  Then ftrace's trampolines need not
 * keep errno around it.  0 if so.
 */
/* bit n for general register n (any width of it), else 0 */
static uint16_t gpr_bit(ZydisRegister r)
{
	ZydisRegister w = ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
	if (ZydisRegisterGetClass(w) != ZYDIS_REGCLASS_GPR64)
		return 0;
	ZyanI8 id = ZydisRegisterGetId(w);
	return id >= 0 && id < 16 ? UKP_GPR(id) : 0;
}

int ukp_arch_code_leaf(unsigned long fn, const struct ukp_code_env *env,
		       uint16_t *writes, uint16_t *reads, bool *df)
{
	unsigned long lo, hi;
	int ok = -EDOM;
	uint16_t w = 0, r = 0;
	bool dfu = false;

	dec_init();
	if (env->bounds(fn, &lo, &hi) || fn != lo)
		return -ENOENT;
	uint8_t *code = read_code(lo, hi);
	/* per byte: 1 an instruction starts there, 2 a branch goes there
	 * (every target must be a start: a jump into the middle of an
	 * instruction would run bytes the sweep decoded as something else) */
	uint8_t *mark = calloc(hi - lo, 1);
	if (!code || !mark) {
		free(code);
		free(mark);
		return -ENOMEM;
	}
	unsigned long pc = lo;
	bool ends = false;	/* the last instruction does not fall through */
	bool refused = false;	/* an instruction no leaf has: the sweep stops
				   there, and pc may be hi all the same */
	for (; pc < hi;) {
		struct dinsn di;
		if (!decode_at(code, lo, hi, pc, &di)) {
			refused = true;
			break;
		}
		mark[pc - lo] |= 1;
		pc += di.d.length;
		const ZydisDecodedInstruction *d = &di.d;
		ends = d->meta.category == ZYDIS_CATEGORY_RET ||
		       d->meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
		       d->mnemonic == ZYDIS_MNEMONIC_UD2;
		if (d->meta.category == ZYDIS_CATEGORY_CALL ||
		    d->meta.category == ZYDIS_CATEGORY_SYSCALL ||
		    d->meta.category == ZYDIS_CATEGORY_INTERRUPT ||
		    d->meta.category == ZYDIS_CATEGORY_SYSTEM) {
			refused = true;
			break;
		}
		if (d->meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
		    d->meta.category == ZYDIS_CATEGORY_COND_BR) {
			unsigned long t;
			if (di.op[0].type != ZYDIS_OPERAND_TYPE_IMMEDIATE ||
			    !ZYAN_SUCCESS(ZydisCalcAbsoluteAddress(d, &di.op[0], di.addr, &t)) ||
			    t < lo || t >= hi) {
				refused = true;	/* out of the function */
				break;
			}
			mark[t - lo] |= 2;
		}
		const ZydisAccessedFlags *cf = d->cpu_flags;
		if (cf && ((cf->tested | cf->modified | cf->set_0 | cf->set_1 | cf->undefined) &
			   ZYDIS_CPUFLAG_DF))
			dfu = true;
		bool tls_store = false;
		/* every operand, the implicit ones too (mul's rdx, movs's
		 * rsi and rdi, cpuid's four...) */
		for (unsigned i = 0; i < d->operand_count; i++) {
			const ZydisDecodedOperand *o = &di.op[i];
			if (o->type == ZYDIS_OPERAND_TYPE_REGISTER) {
				if (o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE)
					w |= gpr_bit(o->reg.value);
				if (o->actions & ZYDIS_OPERAND_ACTION_MASK_READ)
					r |= gpr_bit(o->reg.value);
			} else if (o->type == ZYDIS_OPERAND_TYPE_MEMORY) {
				r |= gpr_bit(o->mem.base) | gpr_bit(o->mem.index);
				if ((o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
				    (o->mem.segment == ZYDIS_REGISTER_FS ||
				     o->mem.segment == ZYDIS_REGISTER_GS))
					tls_store = true;
			}
		}
		if (tls_store) {
			refused = true;
			break;
		}
	}
	/* the whole function decoded and accepted, it cannot run off its end
	 * (a wrong symbol size), and every branch lands on an instruction */
	if (!refused && pc == hi && ends && !memchr(mark, 2, hi - lo)) {
		ok = 0;
		if (writes)
			*writes = w;
		if (reads)
			*reads = r;
		if (df)
			*df = dfu;
	}
	free(code);
	free(mark);
	return ok;
}
