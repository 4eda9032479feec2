/* SPDX-License-Identifier: MIT */
/*
 * The hit path of dynamic events: what runs in the probed thread.
 *
 * Built with -mgeneral-regs-only -fno-jump-tables and calling nothing
 * outside this file but ukp_copy_nofault (mk/events.mk): so the engine's
 * analysis finds the handlers keep to the general registers and runs
 * them on its lean path (no vector state saved).  No lock, no allocation,
 * no formatting, no system call but at a thread's first event (gettid,
 * its name).
 *
 * One hit:
 *   1. the thread's block (TLS; its first event, or a fork child's,
 *      takes one from the area);
 *   2. count the hit; reserve the largest record the event can need in
 *      the thread's sub-buffer (a full buffer: count a lost event);
 *   3. header (TSC, cpu from rseq), run the fetch program into it;
 *   4. the filter, on the record in place: rejected, nothing committed;
 *   5. commit: one release store of the sub-buffer's head.
 */
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/rseq.h>
#include <time.h>
#include "internal.h"
#include <ukprobes/stacktrace.h>
#include "ev_int.h"

__thread struct ev_tls ev_tls __attribute__((tls_model("initial-exec")));

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* ---- small helpers that call nothing ------------------------------------ */

static inline void ev_bzero(void *p, size_t n)
{
	__asm__ volatile("rep stosb" : "+D"(p), "+c"(n) : "a"(0) : "memory");
}

static inline void ev_bcopy(void *d, const void *s, size_t n)
{
	__asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
}

static inline uint64_t ev_rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

/* the cpu without rseq */
static unsigned ev_cpu_slow(void)
{
	uint64_t id;
	if (ev_cpu_mode == EV_CPU_RDPID) {
		__asm__ volatile("rdpid %0" : "=r"(id));
	} else {
		uint32_t lo, hi, aux;
		__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
		id = aux;
	}
	return (unsigned)(id & 0xfff);
}

/* ---- lock-free stacks of indexes in the area (tag << 32 | idx + 1) ------ */

static inline uint32_t *lf_next(char *base, size_t stride, size_t off, uint32_t idx1)
{
	return (uint32_t *)(void *)(base + (size_t)(idx1 - 1) * stride + off);
}

static uint32_t lf_pop(_Atomic uint64_t *head, char *base, size_t stride, size_t off)
{
	uint64_t old = atomic_load_explicit(head, memory_order_acquire);
	for (;;) {
		uint32_t idx = (uint32_t)old;
		if (!idx)
			return 0;
		/* a stale next (idx popped and reused meanwhile) fails the
		 * CAS: the tag moved on */
		uint32_t next = __atomic_load_n(lf_next(base, stride, off, idx), __ATOMIC_RELAXED);
		uint64_t nw = (((old >> 32) + 1) << 32) | next;
		if (atomic_compare_exchange_weak_explicit(head, &old, nw, memory_order_acq_rel,
							  memory_order_acquire))
			return idx;
	}
}

static void lf_push(_Atomic uint64_t *head, char *base, size_t stride, size_t off, uint32_t idx)
{
	uint64_t old = atomic_load_explicit(head, memory_order_relaxed);
	for (;;) {
		__atomic_store_n(lf_next(base, stride, off, idx), (uint32_t)old, __ATOMIC_RELAXED);
		uint64_t nw = (((old >> 32) + 1) << 32) | idx;
		if (atomic_compare_exchange_weak_explicit(head, &old, nw, memory_order_release,
							  memory_order_relaxed))
			return;
	}
}

uint32_t ev_sb_get(struct ev_area_hdr *h)
{
	uint32_t i = lf_pop(&h->free_subbufs, (char *)h + h->pool_off, UKPEV_SUBBUF_SIZE,
			    offsetof(struct ev_subbuf, free_next));
	if (i)
		return i;
	/* never used ones: the high-water mark, moved only while below the
	 * end (a full pool asked again and again must not wrap it) */
	uint32_t n = atomic_load_explicit(&h->subbufs_hw, memory_order_relaxed);
	while (n < h->nsubbufs)
		if (atomic_compare_exchange_weak_explicit(&h->subbufs_hw, &n, n + 1,
							  memory_order_relaxed, memory_order_relaxed))
			return n + 1;
	return 0;
}

void ev_sb_put(struct ev_area_hdr *h, uint32_t idx1)
{
	lf_push(&h->free_subbufs, (char *)h + h->pool_off, UKPEV_SUBBUF_SIZE,
		offsetof(struct ev_subbuf, free_next), idx1);
}

void ev_tb_put(struct ev_area_hdr *h, uint32_t idx1)
{
	lf_push(&h->free_threads, (char *)h + h->threads_off, sizeof(struct ev_tblock),
		offsetof(struct ev_tblock, free_next), idx1);
}

static uint32_t tb_get(struct ev_area_hdr *h)
{
	uint32_t i = lf_pop(&h->free_threads, (char *)h + h->threads_off,
			    sizeof(struct ev_tblock), offsetof(struct ev_tblock, free_next));
	if (i)
		return i;
	uint32_t n = atomic_load_explicit(&h->threads_hw, memory_order_relaxed);
	while (n < h->threads_max)
		if (atomic_compare_exchange_weak_explicit(&h->threads_hw, &n, n + 1,
							  memory_order_relaxed, memory_order_relaxed))
			return n + 1;
	return 0;
}

/* ---- a thread's first event ------------------------------------------------ */

/* The thread's block in a's area: taken at its first event, and again in
 * a fork child (which must not write into its parent's buffers). */
__attribute__((noinline)) struct ev_tblock *ev_thread_attach(struct ukpev_area *a)
{
	struct ev_area_hdr *h = a->hdr;
	uint32_t gen = atomic_load_explicit(&ev_fork_gen, memory_order_relaxed);
	if (ev_tls.gen != gen) {
		for (int i = 0; i < EV_MAX_AREAS; i++)
			ev_tls.tb[i] = NULL;
		ev_tls.gen = gen;
	}
	if (ev_tls.tb[a->slot] && ev_tls.key[a->slot] == a->key)
		return ev_tls.tb[a->slot];
	ev_tls.tb[a->slot] = NULL;
	uint32_t ti = tb_get(h);
	if (!ti)
		return NULL;
	struct ev_tblock *tb = ev_tb(h, ti - 1);
	uint32_t sb = ev_sb_get(h);
	if (!sb) {
		lf_push(&h->free_threads, (char *)h + h->threads_off, sizeof(struct ev_tblock),
			offsetof(struct ev_tblock, free_next), ti);
		return NULL;
	}
	struct ev_subbuf *s = ev_sb(h, sb);
	atomic_store_explicit(&s->head, 0, memory_order_relaxed);
	atomic_store_explicit(&s->closed, 0, memory_order_relaxed);
	s->next = 0;
	tb->pid = (int32_t)ukp_raw_syscall(SYS_getpid, 0, 0, 0, 0, 0, 0);
	tb->tid = (int32_t)ukp_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0);
	ev_bzero(tb->comm, sizeof(tb->comm));
	ukp_raw_syscall(SYS_prctl, PR_GET_NAME, (long)tb->comm, 0, 0, 0, 0);
	tb->comm[15] = 0;
	tb->cpu_p = NULL;
	if (ev_cpu_mode == EV_CPU_RSEQ) {
		const struct rseq *rs = (const struct rseq *)(void *)
			((char *)__builtin_thread_pointer() + __rseq_offset);
		tb->cpu_p = (const volatile uint32_t *)&rs->cpu_id;
	}
	tb->cur = sb;
	tb->wsb = s;
	tb->wp = s->data;
	tb->wlimit = s->data + EV_SB_DATA;
	tb->pending_lost = 0;
	atomic_store_explicit(&tb->lost, 0, memory_order_relaxed);
	atomic_store_explicit(&tb->held, 1, memory_order_relaxed);
	tb->rd = sb;
	tb->rpos = 0;
	tb->lost_marked = 0;
	tb->lost_told = 0;
	tb->rcomm_ns = 0;
	/* counters: zeroed by whoever freed the block (or never used) */
	atomic_store_explicit(&tb->state, EV_TB_LIVE, memory_order_release);
	ev_tls.key[a->slot] = a->key;
	ev_tls.tb[a->slot] = tb;
	return tb;
}

/* ---- buffers ---------------------------------------------------------------- */

/* The current sub-buffer is too full: move to a fresh one, within the
 * thread's limit.  false: none (the event is lost). */
__attribute__((noinline)) static bool ev_switch(struct ev_area_hdr *h, struct ev_tblock *tb)
{
	if (atomic_load_explicit(&tb->held, memory_order_relaxed) >= h->buffer_subbufs)
		return false;
	uint32_t n = ev_sb_get(h);
	if (!n)
		return false;
	struct ev_subbuf *s = ev_sb(h, n), *old = ev_sb(h, tb->cur);
	atomic_store_explicit(&s->head, 0, memory_order_relaxed);
	atomic_store_explicit(&s->closed, 0, memory_order_relaxed);
	s->next = 0;
	atomic_fetch_add_explicit(&tb->held, 1, memory_order_relaxed);
	/* next before closed: a reader that sees closed finds next */
	old->next = n;
	atomic_store_explicit(&old->closed, 1, memory_order_release);
	tb->cur = n;
	tb->wsb = s;
	tb->wp = s->data;
	return true;
}

static inline void ev_commit(struct ev_tblock *tb, unsigned size)
{
	tb->wp += size;
	atomic_store_explicit(&tb->wsb->head, (uint32_t)(tb->wp - tb->wsb->data),
			      memory_order_release);
}

/* Not room for need bytes in this sub-buffer, or a lost marker owed. */
__attribute__((noinline)) static uint8_t *ev_reserve_slow(struct ev_area_hdr *h,
							  struct ev_tblock *tb, unsigned need)
{
	unsigned total = need + (tb->pending_lost ? EV_REC_LOST_SIZE : 0);
	if (tb->wp + total > tb->wsb->data + EV_SB_DATA && !ev_switch(h, tb))
		return NULL;
	if (tb->pending_lost) {
		struct ev_rec *r = (struct ev_rec *)(void *)tb->wp;
		r->ts = 0;
		r->size = EV_REC_LOST_SIZE;
		r->event = UKPEV_EVENT_LOST;
		r->cpu = 0;
		r->flags = 0;
		*(uint64_t *)(void *)(r + 1) = tb->pending_lost;
		tb->pending_lost = 0;
		ev_commit(tb, EV_REC_LOST_SIZE);
	}
	tb->wlimit = tb->wsb->data + EV_SB_DATA;
	return tb->wp;
}

/* No room: the event is lost, counted where it was lost. */
__attribute__((noinline)) static void ev_lost(struct ev_tblock *tb, struct ev_count *cnt)
{
	tb->pending_lost++;
	tb->wlimit = tb->wp;	/* the next record goes the slow way */
	atomic_store_explicit(&tb->lost, atomic_load_explicit(&tb->lost, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	__atomic_store_n(&cnt->misses, cnt->misses + 1, __ATOMIC_RELAXED);
}

/* ---- fetching ---------------------------------------------------------------- */

static inline unsigned long ev_arg(const struct pt_regs *regs, unsigned n, bool *fault)
{
	switch (n) {
	case 1: return regs->di;
	case 2: return regs->si;
	case 3: return regs->dx;
	case 4: return regs->cx;
	case 5: return regs->r8;
	case 6: return regs->r9;
	default: {
		/* at the entry, sp holds the return address; arg 7 above it */
		unsigned long v;
		if (ukp_copy_nofault(&v, (const void *)(regs->sp + 8 * (n - 6)), 8)) {
			*fault = true;
			return 0;
		}
		return v;
	}
	}
}

/* A string at src into dst: its length with the NUL, or 0 if unreadable.
 * Read in pieces that never cross a page, so a string that ends before
 * an unmapped page is read whole. */
static unsigned ev_copy_str(uint8_t *dst, unsigned long src)
{
	unsigned got = 0;
	while (got < UKPEV_STRING_MAX - 1) {
		unsigned long at = src + got;
		unsigned chunk = 32;
		unsigned room = UKPEV_STRING_MAX - 1 - got;
		unsigned page = 4096 - (unsigned)(at & 4095);
		if (chunk > room)
			chunk = room;
		if (chunk > page)
			chunk = page;
		if (ukp_copy_nofault(dst + got, (const void *)at, chunk))
			return 0;
		unsigned i = 0;
		/* a word at a time: a zero byte sets its high bit in
		 * (w - 0x01..01) & ~w & 0x80..80 (the lowest one exactly) */
		for (; i + 8 <= chunk; i += 8) {
			uint64_t w;
			__builtin_memcpy(&w, dst + got + i, 8);
			uint64_t z = (w - 0x0101010101010101ULL) & ~w & 0x8080808080808080ULL;
			if (z)
				return got + i + (unsigned)__builtin_ctzll(z) / 8 + 1;
		}
		for (; i < chunk; i++)
			if (!dst[got + i])
				return got + i + 1;
		got += chunk;
	}
	dst[UKPEV_STRING_MAX - 1] = 0;
	return UKPEV_STRING_MAX;
}

static inline void ev_store_val(uint8_t *slot, unsigned size, unsigned long v)
{
	switch (size) {
	case 1: *slot = (uint8_t)v; break;
	case 2: *(uint16_t *)(void *)slot = (uint16_t)v; break;
	case 4: *(uint32_t *)(void *)slot = (uint32_t)v; break;
	default: *(uint64_t *)(void *)slot = v; break;
	}
}

/*
 * Runs e's program into the payload pl (its fixed part is e's
 * payload_size bytes; strings go after it).  Returns the bytes of
 * dynamic data used.
 */
static inline unsigned ev_run_prog(const struct ukpev_event *e, const struct ev_insn *in,
				   const struct pt_regs *regs, const unsigned long *saved,
				   uint8_t *pl, const struct ev_tblock *tb)
{
	unsigned long val = 0;
	uint8_t *slot = pl;
	unsigned arg = 0, dyn = e->payload_size, dyn0 = dyn;
	uint64_t *bitmap = (uint64_t *)(void *)pl;
	for (unsigned w = 0; w < (e->nargs + 63) / 64; w++)
		bitmap[w] = 0;
	for (;; in++) {
		bool fault = false;
		switch (in->op) {
		case OP_REG_VAL:
			ev_store_val(pl + in->dst, in->size,
				     ((const unsigned long *)(const void *)regs)[in->param]);
			continue;
		case OP_REG_STR: {
			unsigned long src = ((const unsigned long *)(const void *)regs)[in->param] +
					    (unsigned long)in->imm;
			unsigned len = ev_copy_str(pl + dyn, src);
			if (len) {
				*(uint32_t *)(void *)(pl + in->dst) = (uint32_t)len << 16 | dyn;
				dyn += len;
			} else {
				bitmap[in->count / 64] |= 1ULL << (in->count % 64);
			}
			continue;
		}
		case OP_ARG:
			arg = in->param;
			slot = pl + in->dst;
			continue;
		case OP_LD_REG:
			val = ((const unsigned long *)(const void *)regs)[in->param];
			continue;
		case OP_ST_VAL:
			ev_store_val(slot, in->size, val);
			continue;
		case OP_LD_SP:
			val = regs->sp;
			continue;
		case OP_LD_STACK:
			fault = ukp_copy_nofault(&val, (const void *)(regs->sp + in->imm), 8) != 0;
			break;
		case OP_LD_ARG:
			val = ev_arg(regs, in->param, &fault);
			break;
		case OP_LD_SAVED:
			val = saved[in->param - 1];
			continue;
		case OP_LD_RETVAL:
			val = regs->ax;
			continue;
		case OP_LD_IMM:
			val = (unsigned long)in->imm;
			continue;
		case OP_DEREF:
			fault = ukp_copy_nofault(&val, (const void *)(val + in->imm), 8) != 0;
			break;
		case OP_ADD:
			val += in->imm;
			continue;
		case OP_ST_MEM:
			fault = ukp_copy_nofault(slot, (const void *)val,
						 (size_t)in->size * in->count) != 0;
			break;
		case OP_ST_STR:
		case OP_ST_COMM:
		case OP_ST_IMMSTR: {
			unsigned len;
			if (in->op == OP_ST_STR) {
				len = ev_copy_str(pl + dyn, val);
			} else {
				const char *s = in->op == OP_ST_COMM ? tb->comm : e->strtab + in->imm;
				len = 0;
				while (s[len])
					len++;
				len++;
				ev_bcopy(pl + dyn, s, len);
			}
			if (len) {
				*(uint32_t *)(void *)slot = (uint32_t)len << 16 | dyn;
				dyn += len;
				continue;
			}
			fault = true;
			break;
		}
		case OP_ST_STRARR:
			/* each element on its own: an unreadable one has
			 * length 0, printed (fault) */
			for (unsigned k = 0; k < in->count; k++) {
				unsigned long sp;
				unsigned len = 0;
				if (!ukp_copy_nofault(&sp, (const void *)(val + 8 * k), 8))
					len = ev_copy_str(pl + dyn, sp);
				((uint32_t *)(void *)slot)[k] = len ? (uint32_t)len << 16 | dyn : 0;
				dyn += len;
			}
			continue;
		default:	/* OP_END */
			return dyn - dyn0;
		}
		if (fault) {
			bitmap[arg / 64] |= 1ULL << (arg % 64);
			/* on to the next fetcharg */
			while (in[1].op != OP_ARG && in[1].op != OP_END && in[1].op != OP_REG_VAL &&
			       in[1].op != OP_REG_STR)
				in++;
		}
	}
	return dyn - dyn0;
}

static inline unsigned ev_run(const struct ukpev_event *e, const struct pt_regs *regs,
			      const unsigned long *saved, uint8_t *pl,
			      const struct ev_tblock *tb)
{
	return ev_run_prog(e, e->prog, regs, saved, pl, tb);
}

/* ---- filters ------------------------------------------------------------------ */

/* glob: * ? [...] ([!...] negated, ranges a-z); 1 if s matches pat */
static int ev_glob_match(const char *p, size_t pn, const char *s, size_t sn)
{
	size_t pi = 0, si = 0, star_p = (size_t)-1, star_s = 0;
	while (si < sn) {
		if (pi < pn && p[pi] == '*') {
			star_p = ++pi;
			star_s = si;
			continue;
		}
		if (pi < pn && p[pi] == '[') {
			size_t k = pi + 1;
			bool neg = k < pn && (p[k] == '!' || p[k] == '^');
			if (neg)
				k++;
			bool hit = false, closed = false;
			size_t first = k;
			for (; k < pn; k++) {
				if (p[k] == ']' && k > first) {
					closed = true;
					break;
				}
				if (k + 2 < pn && p[k + 1] == '-' && p[k + 2] != ']') {
					if (s[si] >= p[k] && s[si] <= p[k + 2])
						hit = true;
					k += 2;
				} else if (p[k] == s[si]) {
					hit = true;
				}
			}
			if (closed && hit != neg) {
				pi = k + 1;
				si++;
				continue;
			}
			if (!closed && p[pi] == s[si]) {	/* a plain '[' */
				pi++;
				si++;
				continue;
			}
		} else if (pi < pn && (p[pi] == '?' || p[pi] == s[si])) {
			pi++;
			si++;
			continue;
		}
		if (star_p == (size_t)-1)
			return 0;
		pi = star_p;
		si = ++star_s;
	}
	while (pi < pn && p[pi] == '*')
		pi++;
	return pi == pn;
}

static inline uint64_t ev_load(const uint8_t *p, unsigned size, bool sign)
{
	switch (size) {
	case 1: return sign ? (uint64_t)(int64_t)*(const int8_t *)p : *p;
	case 2: return sign ? (uint64_t)(int64_t)*(const int16_t *)(const void *)p
			    : *(const uint16_t *)(const void *)p;
	case 4: return sign ? (uint64_t)(int64_t)*(const int32_t *)(const void *)p
			    : *(const uint32_t *)(const void *)p;
	default: return *(const uint64_t *)(const void *)p;
	}
}

static inline bool ev_cmp_num(unsigned cmp, uint64_t a, uint64_t b, bool sign)
{
	if (cmp == C_EQ)
		return a == b;
	if (cmp == C_NE)
		return a != b;
	if (cmp == C_BAND)
		return (a & b) != 0;
	bool lt = sign ? (int64_t)a < (int64_t)b : a < b;
	bool eq = a == b;
	if (cmp == C_LT)
		return lt;
	if (cmp == C_LE)
		return lt || eq;
	if (cmp == C_GT)
		return !lt && !eq;
	return !lt;	/* C_GE */
}

bool ev_filter_match(const struct ev_filter *f, const uint8_t *pl, const char *strtab,
		     int32_t tid)
{
	uint64_t stack = 0;	/* a bit stack of results, top at bit 0 */
	const uint64_t *bitmap = (const uint64_t *)(const void *)pl;
	for (unsigned i = 0; i < f->n; i++) {
		const struct ev_fpred *p = &f->p[i];
		bool r;
		if (p->op == F_AND || p->op == F_OR) {
			bool b = stack & 1, a = (stack >> 1) & 1;
			stack >>= 2;
			r = p->op == F_AND ? (a && b) : (a || b);
		} else if (p->op == F_NOT) {
			r = !(stack & 1);
			stack >>= 1;
		} else if (p->op == F_PID) {
			r = ev_cmp_num(p->cmp, (uint64_t)(int64_t)tid, (uint64_t)p->val, true);
		} else if (bitmap[p->arg / 64] & (1ULL << (p->arg % 64))) {
			r = false;	/* (fault): no comparison holds */
		} else if (p->op == F_NUM) {
			uint64_t v = ev_load(pl + p->dst, p->size, p->is_signed);
			if (p->bf_width) {
				v >>= p->bf_shift;
				if (p->bf_width < 64)
					v &= (1ULL << p->bf_width) - 1;
			}
			r = ev_cmp_num(p->cmp, v, (uint64_t)p->val, p->is_signed);
		} else {
			uint32_t loc = *(const uint32_t *)(const void *)(pl + p->dst);
			const char *s = (const char *)pl + (loc & 0xffff);
			size_t sn = loc >> 16;
			if (sn)
				sn--;	/* without the NUL */
			const char *v = strtab + p->str_off;
			if (p->cmp == C_GLOB) {
				r = ev_glob_match(v, p->str_len, s, sn);
			} else {
				bool eq = sn == p->str_len;
				for (size_t k = 0; eq && k < sn; k++)
					eq = s[k] == v[k];
				r = p->cmp == C_EQ ? eq : !eq;
			}
		}
		stack = stack << 1 | r;
	}
	return stack & 1;
}

/* ---- histograms --------------------------------------------------------------- */

static inline uint64_t ev_hash_key(const uint64_t *k, unsigned n)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL;
	for (unsigned i = 0; i < n; i++) {
		h = (h ^ k[i]) * 0xff51afd7ed558ccdULL;
		h ^= h >> 29;
	}
	return h | 1;	/* 0: an empty entry */
}

static inline uint64_t ev_hload(const struct ev_hfield *f, const uint8_t *pl,
				const struct pt_regs *regs)
{
	const uint8_t *p;
	if (f->reg >= 0) {	/* the register itself, as its fetch would store it */
		p = (const uint8_t *)&((const unsigned long *)(const void *)regs)[f->reg];
	} else {
		if ((((const uint64_t *)(const void *)pl)[f->arg / 64] >> (f->arg % 64)) & 1)
			return 0;	/* (fault) */
		p = pl + f->slot;
	}
	uint64_t v;
	switch (f->size) {
	case 1: v = f->sign ? (uint64_t)(int64_t)*(const int8_t *)p : *p; break;
	case 2: v = f->sign ? (uint64_t)(int64_t)*(const int16_t *)(const void *)p
			    : *(const uint16_t *)(const void *)p; break;
	case 4: v = f->sign ? (uint64_t)(int64_t)*(const int32_t *)(const void *)p
			    : *(const uint32_t *)(const void *)p; break;
	default: v = *(const uint64_t *)(const void *)p; break;
	}
	if (f->bf_width) {
		v >>= f->bf_shift;
		if (f->bf_width < 64)
			v &= (1ULL << f->bf_width) - 1;
	}
	return v;
}

static inline uint64_t ev_hval(const struct ev_hfield *f, const uint8_t *pl,
			       const struct pt_regs *regs, const struct ev_tblock *tb)
{
	return f->kind == HF_ARG ? ev_hload(f, pl, regs) :
	       f->kind == HF_PID ? (uint64_t)(uint32_t)tb->tid : 0;
}

/*
 * A hit of histogram hs in this thread's table (the kernel's
 * event_hist_trigger): the key built from the hit's values, then the
 * entry found or added, its hitcount and sums bumped.  The table is this
 * thread's alone: plain stores, the tag of a new entry published last for
 * a reader.  full: a stack key is walked (not lean).
 */
static inline __attribute__((always_inline)) void
ev_hist_hit(const struct ev_hist *hs, struct ukpev_area *a, struct ev_tblock *tb,
	    const uint8_t *pl, const struct pt_regs *regs, uint64_t ts, bool full)
{
	const struct ev_hspec *sp = &hs->spec;
	struct ev_area_hdr *h = a->hdr;
	uint64_t key[EV_HIST_MAX_KEYS * EV_HIST_STR_WORDS];
	_Static_assert(EV_HIST_STR_WORDS >= EV_HIST_STACK_WORDS, "key room");
	for (unsigned k = 0; k < sp->nkeys; k++) {
		const struct ev_hfield *f = &sp->keys[k];
		uint64_t *kp = key + f->off;
		uint64_t v = 0;
		if (f->kind == HF_ARG) {
			v = ev_hload(f, pl, regs);
		} else if (f->kind == HF_PID) {
			v = (uint64_t)(uint32_t)tb->tid;
		} else if (f->kind == HF_TS) {
			v = h->clock == EV_CLOCK_TSC ? h->ns0 + (uint64_t)(((unsigned __int128)
				(ts - h->tsc0) * h->mult) >> 32) : ts;
			if (f->mod == HM_USECS)
				v /= 1000;
		} else if (f->kind == HF_STR) {
			ev_bzero(kp, f->words * 8u);
			uint32_t dl = *(const uint32_t *)(const void *)(pl + f->slot);
			unsigned len = dl >> 16, off = dl & 0xffff;
			bool bad = ((((const uint64_t *)(const void *)pl)[f->arg / 64] >>
				     (f->arg % 64)) & 1) || !len;
			if (bad) {
				ev_bcopy(kp, "(fault)", 8);
			} else {
				if (len > f->words * 8u)
					len = f->words * 8u;
				ev_bcopy(kp, pl + off, len - 1);	/* without the NUL */
			}
			continue;
		} else {	/* HF_STACK */
			unsigned n = 0;
			if (full)
				n = stack_trace_save_regs((struct pt_regs *)(uintptr_t)regs,
							  (unsigned long *)kp, f->words, 0);
			for (unsigned w = n; w < f->words; w++)
				kp[w] = 0;
			continue;
		}
		if (f->mod == HM_LOG2)	/* ilog2(roundup_pow_of_two(v)) */
			v = v <= 1 ? 0 : 64u - (unsigned)__builtin_clzll(v - 1);
		else if (f->mod == HM_BUCKETS)
			v = v / f->buckets * f->buckets;
		*kp = v;
	}
	uint64_t off = tb->hist_off[hs->id];
	if (unlikely(!off)) {
		/* this thread's table: from the pool, once per thread block */
		uint64_t bytes = sizeof(struct ev_htable) + (uint64_t)sp->size * sp->entry_words * 8;
		bytes = (bytes + 63) & ~(uint64_t)63;
		uint64_t at = atomic_fetch_add_explicit(&h->hpool_used, bytes, memory_order_relaxed);
		if (at + bytes > h->hpool_size) {
			atomic_fetch_add_explicit(&ev_hmeta(h, hs->id)->nomem, 1,
						  memory_order_relaxed);
			return;
		}
		off = h->hpool_off + at;
		tb->hist_off[hs->id] = off;
	}
	struct ev_htable *t = ev_at(h, off);
	uint64_t *ents = (uint64_t *)(t + 1);
	unsigned kw = sp->key_words, ew = sp->entry_words, mask = sp->size - 1;
	uint64_t tag = ev_hash_key(key, kw);
	for (unsigned i = (unsigned)(tag >> 7) & mask, n = 0; n <= mask; i = (i + 1) & mask, n++) {
		uint64_t *e = ents + (uint64_t)i * ew;
		uint64_t et = e[0];
		if (et == tag) {
			unsigned w = 0;
			while (w < kw && e[1 + w] == key[w])
				w++;
			if (w < kw)
				continue;
			uint64_t *c = e + 1 + kw;
			__atomic_store_n(&c[0], c[0] + 1, __ATOMIC_RELAXED);
			for (unsigned v = 0; v < sp->nvals; v++)
				__atomic_store_n(&c[1 + v], c[1 + v] + ev_hval(&sp->vals[v], pl, regs, tb),
						 __ATOMIC_RELAXED);
			return;
		}
		if (!et) {
			for (unsigned w = 0; w < kw; w++)
				e[1 + w] = key[w];
			uint64_t *c = e + 1 + kw;
			c[0] = 1;
			for (unsigned v = 0; v < sp->nvals; v++)
				c[1 + v] = ev_hval(&sp->vals[v], pl, regs, tb);
			__atomic_store_n(&t->used, t->used + 1, __ATOMIC_RELAXED);
			__atomic_store_n(&e[0], tag, __ATOMIC_RELEASE);	/* publish */
			return;
		}
	}
	__atomic_store_n(&t->drops, t->drops + 1, __ATOMIC_RELAXED);
}

__attribute__((noinline)) static void
ev_hist_hit_lean(const struct ev_hist *hs, struct ukpev_area *a, struct ev_tblock *tb,
		 const uint8_t *pl, const struct pt_regs *regs, uint64_t ts)
{
	ev_hist_hit(hs, a, tb, pl, regs, ts, false);
}

__attribute__((noinline)) static void
ev_hist_hit_full(const struct ev_hist *hs, struct ukpev_area *a, struct ev_tblock *tb,
		 const uint8_t *pl, const struct pt_regs *regs, uint64_t ts)
{
	ev_hist_hit(hs, a, tb, pl, regs, ts, true);
}

/* ---- handlers ------------------------------------------------------------------ */

/* what a hit's triggers did (ev_triggers' result) */
#define EV_TF_STACK	1	/* a stacktrace trigger fired */
#define EV_TF_COND_OFF	2	/* a traceoff with a condition fired */
#define EV_TF_COND_ON	4	/* a traceon with a condition fired */

/* A hit's triggers (events.rst): each with its filter and count */
static inline __attribute__((always_inline)) unsigned
ev_triggers(const struct ev_trigset *ts, const uint8_t *pl, struct ev_tblock *tb,
	    struct ukpev_area *a, const struct pt_regs *regs, uint64_t t, bool full)
{
	unsigned did = 0;
	for (unsigned i = 0; i < ts->n; i++) {
		struct ev_trigger *tr = ts->t[i];
		if (tr->filter && !ev_filter_match(tr->filter, pl, tr->filter->strtab, tb->tid))
			continue;
		int64_t c = atomic_load_explicit(&tr->count, memory_order_relaxed);
		while (c > 0 && !atomic_compare_exchange_weak_explicit(&tr->count, &c, c - 1,
								       memory_order_relaxed,
								       memory_order_relaxed))
			;
		if (c == 0)
			continue;	/* used up */
		switch (tr->type) {
		case T_TRACEON:
			atomic_store_explicit(&a->tracing_off, 0, memory_order_relaxed);
			did |= tr->filter ? EV_TF_COND_ON : 0;
			break;
		case T_TRACEOFF:
			atomic_store_explicit(&a->tracing_off, 1, memory_order_relaxed);
			did |= tr->filter ? EV_TF_COND_OFF : 0;
			break;
		case T_ENABLE:
			atomic_fetch_and_explicit(&tr->target->gate, (uint8_t)~EV_GATE_SOFT_OFF,
						  memory_order_relaxed);
			break;
		case T_DISABLE:
			atomic_fetch_or_explicit(&tr->target->gate, EV_GATE_SOFT_OFF,
						 memory_order_relaxed);
			break;
		case T_STACKTRACE:
			did |= full ? EV_TF_STACK : 0;
			break;
		case T_HIST:
			if (full)
				ev_hist_hit_full(tr->hist, a, tb, pl, regs, t);
			else
				ev_hist_hit_lean(tr->hist, a, tb, pl, regs, t);
			break;
		}
	}
	return did;
}

/* A stacktrace trigger's record, after the event's: the probed code's
 * return addresses (event UKPEV_EVENT_STACK, flags: the event's id). */
__attribute__((noinline)) static void ev_stack(const struct ukpev_event *e,
					       const struct pt_regs *regs, uint64_t ts,
					       uint64_t cpu, struct ev_tblock *tb,
					       struct ev_count *cnt)
{
	unsigned long fr[EV_STACK_MAX];
	unsigned n = stack_trace_save_regs((struct pt_regs *)(uintptr_t)regs, fr, EV_STACK_MAX, 0);
	unsigned size = (unsigned)sizeof(struct ev_rec) + 8 * n;
	uint8_t *p = tb->wp;
	if (p + size > tb->wlimit) {
		p = ev_reserve_slow(e->area->hdr, tb, size);
		if (!p) {
			ev_lost(tb, cnt);
			return;
		}
	}
	struct ev_rec *r = (struct ev_rec *)(void *)p;
	r->ts = ts;
	r->size = (uint16_t)size;
	r->event = UKPEV_EVENT_STACK;
	r->cpu = (uint16_t)cpu;
	r->flags = (uint16_t)e->id;
	ev_bcopy(r + 1, fr, 8 * n);
	ev_commit(tb, size);
}

/* A hit of a quiet event (soft-disabled: a histogram's) that found no
 * room in the buffer: its triggers still see its values, fetched here */
static inline __attribute__((always_inline)) void
ev_quiet_scratch(struct ukpev_event *e, const struct pt_regs *regs, const unsigned long *saved,
		 unsigned long ret_ip, uint64_t ts, struct ev_tblock *tb,
		 const struct ev_trigset *trig, bool full)
{
	uint64_t buf[2048 / 8];
	uint8_t *pl = (uint8_t *)buf;
	if (e->ret) {
		*(uint64_t *)(void *)pl = ret_ip;
		pl += 8;
	}
	const struct ev_insn *need = atomic_load_explicit(&e->prog_need, memory_order_acquire);
	if (e->nargs)
		ev_run_prog(e, need ? need : e->prog, regs, saved, pl, tb);
	ev_triggers(trig, pl, tb, e->area, regs, ts, full);
}

static inline __attribute__((always_inline)) uint64_t ev_clock(bool clk)
{
	if (!clk)
		return ev_rdtsc();
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * Reserve, fetch, filter, commit.  gated: the event is soft-disabled, has
 * triggers, or tracing is off (ev_hit sends those here through
 * ev_record_gated, so the common case reads none of it).
 */
static inline __attribute__((always_inline)) int
ev_record(struct ukpev_event *e, const struct pt_regs *regs, const unsigned long *saved,
	  unsigned long ret_ip, uint64_t ts, struct ev_tblock *tb, struct ev_count *cnt,
	  bool gated, bool full, bool clk)
{
	struct ukpev_area *a = e->area;
	bool quiet = false;
	const struct ev_trigset *trig = NULL;
	if (gated) {
		/* nothing recorded, but triggers still need the values */
		quiet = (atomic_load_explicit(&e->gate, memory_order_relaxed) & EV_GATE_SOFT_OFF) ||
			atomic_load_explicit(&a->tracing_off, memory_order_relaxed);
		trig = atomic_load_explicit(&e->trig, memory_order_acquire);
		if (quiet && !trig)
			return 0;
		/* the time: for a record, or a trigger that needs it */
		if (!quiet || trig->clock)
			ts = ev_clock(clk);
	}
	uint8_t *p = tb->wp;
	if (unlikely(p + e->max_size > tb->wlimit)) {
		if (gated && quiet && e->max_size <= 2048 - 8) {
			/* nothing to write: only the triggers need the values */
			ev_quiet_scratch(e, regs, saved, ret_ip, ts, tb, trig, full);
			return 0;
		}
		p = ev_reserve_slow(a->hdr, tb, e->max_size);
		if (!p) {
			ev_lost(tb, cnt);
			return 0;
		}
	}
	struct ev_rec *r = (struct ev_rec *)(void *)p;
	r->ts = ts;
	uint64_t cpu = likely(tb->cpu_p != NULL) ? *tb->cpu_p : ev_cpu_slow();
	uint8_t *pl = (uint8_t *)(r + 1);
	if (e->ret) {
		*(uint64_t *)(void *)pl = ret_ip;
		pl += 8;
	}
	/* an event that records nothing fetches only what its triggers need */
	const struct ev_insn *need = gated && quiet ?
		atomic_load_explicit(&e->prog_need, memory_order_acquire) : NULL;
	unsigned dyn = !e->nargs ? 0 : need ? ev_run_prog(e, need, regs, saved, pl, tb)
					    : ev_run(e, regs, saved, pl, tb);
	unsigned size = (e->rec_size + dyn + 7) & ~7u;
	/* size, event, cpu, flags (0): one store */
	_Static_assert(offsetof(struct ev_rec, size) == 8 && offsetof(struct ev_rec, event) == 10 &&
		       offsetof(struct ev_rec, cpu) == 12 && offsetof(struct ev_rec, flags) == 14,
		       "the record header");
	*(uint64_t *)(void *)&r->size = size | (uint64_t)(uint16_t)e->id << 16 |
					(uint64_t)(uint16_t)cpu << 32;
	bool stack = false;
	if (gated) {
		if (trig) {
			bool was_off = atomic_load_explicit(&a->tracing_off, memory_order_relaxed);
			unsigned did = ev_triggers(trig, pl, tb, a, regs, ts, full);
			stack = did & EV_TF_STACK;
			/* a trigger may have turned this event or tracing on or
			 * off: as the kernel, one without a condition before
			 * this hit records, one with a condition after */
			bool soft = atomic_load_explicit(&e->gate, memory_order_relaxed) &
				    EV_GATE_SOFT_OFF;
			bool off = atomic_load_explicit(&a->tracing_off, memory_order_relaxed);
			if ((did & EV_TF_COND_OFF) && !was_off)
				off = false;
			if ((did & EV_TF_COND_ON) && was_off)
				off = true;
			quiet = soft || off;
			if (!quiet && !ts) {	/* turned on by its own trigger */
				ts = ev_clock(clk);
				r->ts = ts;
			}
			if (!quiet && need) {	/* turned on by its own trigger: all of it */
				dyn = ev_run(e, regs, saved, pl, tb);
				size = (e->rec_size + dyn + 7) & ~7u;
				*(uint64_t *)(void *)&r->size = size |
					(uint64_t)(uint16_t)e->id << 16 | (uint64_t)(uint16_t)cpu << 32;
			}
		}
		if (quiet) {
			/* a soft-disabled event's stacktrace trigger still writes */
			if (full && stack &&
			    !atomic_load_explicit(&a->tracing_off, memory_order_relaxed))
				ev_stack(e, regs, ts, cpu, tb, cnt);
			return 0;
		}
	}
	const struct ev_filter *f = atomic_load_explicit(&e->filter, memory_order_acquire);
	if (f && !ev_filter_match(f, pl, f->strtab, tb->tid)) {
		__atomic_store_n(&cnt->filtered, cnt->filtered + 1, __ATOMIC_RELAXED);
		return 0;
	}
	/* commit: the record, then the head that shows it (release) */
	struct ev_subbuf *sb = tb->wsb;
	uint8_t *end = p + size;
	tb->wp = end;
	atomic_store_explicit(&sb->head, (uint32_t)(end - sb->data), memory_order_release);
	if (full && unlikely(stack))
		ev_stack(e, regs, ts, cpu, tb, cnt);
	return 0;
}

/* The slow way: the event is soft-disabled, has triggers, or tracing is
 * off.  The time is read only when something needs it.  One function per
 * kind of handler: a lean one must not reach the vDSO's clock. */
#define EV_GATED(name, full, clk)							\
__attribute__((noinline)) static int							\
name(struct ukpev_event *e, const struct pt_regs *regs, const unsigned long *saved,	\
     unsigned long ret_ip, struct ev_tblock *tb, struct ev_count *cnt)			\
{											\
	return ev_record(e, regs, saved, ret_ip, 0, tb, cnt, true, full, clk);		\
}
EV_GATED(ev_record_gated, false, false)
EV_GATED(ev_record_gated_clk, false, true)
EV_GATED(ev_record_gated_full, true, false)
EV_GATED(ev_record_gated_full_clk, true, true)

/*
 * A soft-disabled event whose triggers are all histograms (of values,
 * not stacks): its hits record nothing and no trigger can change that,
 * so only the fetches the histograms need, then the histograms.  The
 * values are fetched into the thread's buffer without taking it (or, when
 * it is full, the general way).
 */
static inline __attribute__((always_inline)) int
ev_hist_only(struct ukpev_event *e, const struct ev_trigset *ts, const struct pt_regs *regs,
	     const unsigned long *saved, unsigned long ret_ip, struct ev_tblock *tb,
	     struct ev_count *cnt, bool clk)
{
	uint8_t *p = tb->wp;
	if (unlikely(p + e->max_size > tb->wlimit))
		return (clk ? ev_record_gated_clk : ev_record_gated)(e, regs, saved, ret_ip, tb, cnt);
	uint8_t *pl = p + sizeof(struct ev_rec);
	if (e->ret) {
		*(uint64_t *)(void *)pl = ret_ip;
		pl += 8;
	}
	if (e->nargs && !ts->direct) {
		const struct ev_insn *need = atomic_load_explicit(&e->prog_need,
								  memory_order_acquire);
		ev_run_prog(e, need ? need : e->prog, regs, saved, pl, tb);
	}
	uint64_t t = ts->clock ? ev_clock(clk) : 0;
	struct ukpev_area *a = e->area;
	for (unsigned i = 0; i < ts->n; i++) {
		struct ev_trigger *tr = ts->t[i];
		if (tr->filter && !ev_filter_match(tr->filter, pl, tr->filter->strtab, tb->tid))
			continue;
		ev_hist_hit(tr->hist, a, tb, pl, regs, t, false);
	}
	return 0;
}

#define EV_HIST_ONLY(name, clk)								\
__attribute__((noinline)) static int							\
name(struct ukpev_event *e, const struct ev_trigset *ts, const struct pt_regs *regs,	\
     const unsigned long *saved, unsigned long ret_ip, struct ev_tblock *tb,		\
     struct ev_count *cnt)								\
{											\
	return ev_hist_only(e, ts, regs, saved, ret_ip, tb, cnt, clk);			\
}
EV_HIST_ONLY(ev_hist_only_lean, false)
EV_HIST_ONLY(ev_hist_only_clk, true)

static inline __attribute__((always_inline)) int
ev_hit(struct ukpev_event *e, const struct pt_regs *regs, const unsigned long *saved,
       unsigned long ret_ip, bool clk, bool full)
{
	struct ukpev_area *a = e->area;
	bool gated = atomic_load_explicit(&e->gate, memory_order_relaxed) |
		     atomic_load_explicit(&a->tracing_off, memory_order_relaxed);
	/* first: its latency under the rest */
	uint64_t ts = likely(!gated) ? ev_clock(clk) : 0;
	struct ev_tblock *tb = ev_tls.tb[a->slot];
	if (unlikely(!tb || ev_tls.key[a->slot] != a->key ||
		     ev_tls.gen != atomic_load_explicit(&ev_fork_gen, memory_order_relaxed))) {
		if (ev_tls.gen & EV_MUTED)
			return 0;	/* ukpev_thread_mute() */
		tb = ev_thread_attach(a);
		if (!tb) {
			atomic_fetch_add_explicit(&a->hdr->nothread_misses, 1, memory_order_relaxed);
			return 0;
		}
	}
	struct ev_count *cnt = &tb->cnt[e->id];
	__atomic_store_n(&cnt->hits, cnt->hits + 1, __ATOMIC_RELAXED);
	if (unlikely(gated)) {
		const struct ev_trigset *ts = atomic_load_explicit(&e->trig, memory_order_acquire);
		if (ts && ts->hist_only && !full &&
		    atomic_load_explicit(&e->gate, memory_order_relaxed) ==
		    (EV_GATE_SOFT_OFF | EV_GATE_TRIGGERS) &&
		    !atomic_load_explicit(&a->tracing_off, memory_order_relaxed))
			return (clk ? ev_hist_only_clk : ev_hist_only_lean)(e, ts, regs, saved, ret_ip,
									    tb, cnt);
	}
	if (unlikely(gated))
		return full ? (clk ? ev_record_gated_full_clk : ev_record_gated_full)
				(e, regs, saved, ret_ip, tb, cnt)
			    : (clk ? ev_record_gated_clk : ev_record_gated)
				(e, regs, saved, ret_ip, tb, cnt);
	return ev_record(e, regs, saved, ret_ip, ts, tb, cnt, false, full, clk);
}

#define EV_OF_KP(p) ((struct ukpev_event *)(void *)((char *)(p) - offsetof(struct ukpev_event, u)))

int ev_pre_handler(struct kprobe *p, struct pt_regs *regs)
{
	return ev_hit(EV_OF_KP(p), regs, NULL, 0, false, false);
}

int ev_ret_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return ev_hit(EV_OF_KP(ri->rp), regs, (const unsigned long *)(void *)ri->data,
		      (unsigned long)ri->ret_addr, false, false);
}

/* Without a usable TSC: the clock from the vDSO (not a lean handler) */
int ev_pre_handler_clk(struct kprobe *p, struct pt_regs *regs)
{
	return ev_hit(EV_OF_KP(p), regs, NULL, 0, true, false);
}

int ev_ret_handler_clk(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	return ev_hit(EV_OF_KP(ri->rp), regs, (const unsigned long *)(void *)ri->data,
		      (unsigned long)ri->ret_addr, true, false);
}

/* Events whose triggers walk the stack (stacktrace, a common_stacktrace
 * key): the walker looks objects up in the C library, so these handlers
 * are never lean. */
int ev_pre_handler_stk(struct kprobe *p, struct pt_regs *regs)
{
	struct ukpev_event *e = EV_OF_KP(p);
	if (e->area->hdr->clock == EV_CLOCK_MONO)
		return ev_hit(e, regs, NULL, 0, true, true);
	return ev_hit(e, regs, NULL, 0, false, true);
}

int ev_ret_handler_stk(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct ukpev_event *e = EV_OF_KP(ri->rp);
	const unsigned long *saved = (const unsigned long *)(void *)ri->data;
	if (e->area->hdr->clock == EV_CLOCK_MONO)
		return ev_hit(e, regs, saved, (unsigned long)ri->ret_addr, true, true);
	return ev_hit(e, regs, saved, (unsigned long)ri->ret_addr, false, true);
}

/* A return probe whose fetchargs use $argN: they are saved at the entry. */
int ev_entry_handler(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	const struct ukpev_event *e = EV_OF_KP(ri->rp);
	unsigned long *s = (unsigned long *)(void *)ri->data;
	for (unsigned i = 1; i <= e->nsaved; i++) {
		bool fault = false;
		s[i - 1] = ev_arg(regs, i, &fault);
	}
	return 0;
}

/* Outside the hit path: a muted thread's gen never matches the fork
 * generation, so its hits take the branch above and stop there. */
int ukpev_thread_mute(int on)
{
	int was = (ev_tls.gen & EV_MUTED) != 0;
	if (on)
		ev_tls.gen |= EV_MUTED;
	else
		ev_tls.gen &= ~EV_MUTED;
	return was;
}
