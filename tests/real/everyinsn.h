/* SPDX-License-Identifier: MIT */
/*
 * everyinsn: shared helpers of the tests/real cases, which put a kprobe on
 * every instruction of real compiled code (the C library, zlib) and check
 * that the program computes exactly what it computes without probes.
 *
 *   - objects: a loaded shared object's functions, with bounds, from its
 *     .symtab, else the separate debug file found by build-id, else the
 *     .eh_frame FDEs (named from .dynsym where a symbol starts there);
 *   - sweeps: every instruction boundary of a function, decoded with
 *     Zydis from its start over its size;
 *   - closures: the functions a root reaches by direct calls and jumps
 *     inside the same object (through the PLT is another object's matter);
 *   - probe sets: one struct kprobe per boundary, counting hits in
 *     async-signal-safe handlers (atomics only), registered in one batch;
 *   - sinks: the bytes a workload computes, appended without calling any
 *     library function (the probed functions must see only the workload's
 *     own calls).
 *
 * Header-only (static functions) so that each tests/real/NAME.c stays one
 * translation unit, as the Makefile builds them.
 */
#ifndef UKT_EVERYINSN_H
#define UKT_EVERYINSN_H

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <Zydis/Zydis.h>
#include <ukprobes.h>
#include "ukt.h"

/* not every test uses every helper */
#define EI_FN static __attribute__((unused))

/* ---- time ------------------------------------------------------------- */

EI_FN double ei_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- workload helpers ------------------------------------------------------ */

/* UKT_VERBOSE=1: the cases say where the time goes */
EI_FN int ei_verbose(void)
{
	const char *v = getenv("UKT_VERBOSE");
	return v && *v && *v != '0';
}

/* a deterministic xorshift stream: inputs are the same in every run */
static uint64_t ei_rng_state;

EI_FN void rng_seed(uint64_t s)
{
	ei_rng_state = s * 0x9e3779b97f4a7c15ULL + 1;
}

EI_FN uint64_t rng(void)
{
	uint64_t x = ei_rng_state;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return ei_rng_state = x;
}

EI_FN unsigned rng_below(unsigned n)
{
	return n ? (unsigned)(rng() % n) : 0;
}

/* the workload must not call the probed functions itself */
EI_FN void fill(unsigned char *p, size_t n, unsigned seed)
{
	volatile unsigned char *v = p;
	for (size_t i = 0; i < n; i++)
		v[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 8));
}

EI_FN size_t my_strlen(const char *s)
{
	const volatile char *v = s;
	size_t n = 0;
	while (v[n])
		n++;
	return n;
}

static __attribute__((noinline, unused)) int warm_target(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}

EI_FN int warm_pre(struct kprobe *p, struct pt_regs *regs)
{
	(void)p;
	(void)regs;
	return 0;
}

/* attach this thread to the engine before probes it might itself hit */
EI_FN void warm_up(void)
{
	struct kprobe kp = { .addr = (kprobe_opcode_t *)warm_target, .pre_handler = warm_pre };
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(warm_target(1), 2);
	unregister_kprobe(&kp);
}

/* ---- sinks: results as bytes, appended without library calls ------------ */

struct ei_sink {
	unsigned char *p;
	size_t n, cap;
};

EI_FN void ei_sink_init(struct ei_sink *s, size_t cap)
{
	s->p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(s->p != MAP_FAILED);
	s->n = 0;
	s->cap = cap;
}

EI_FN void ei_sink_reset(struct ei_sink *s)
{
	s->n = 0;
}

/* volatile: keeps the compiler from turning the loop into a memcpy call */
EI_FN void ei_put(struct ei_sink *s, const void *src, size_t n)
{
	const volatile unsigned char *a = src;
	volatile unsigned char *d = s->p + s->n;

	if (s->n + n > s->cap)
		UKT_FAIL("sink overflow (%zu + %zu > %zu)", s->n, n, s->cap);
	for (size_t i = 0; i < n; i++)
		d[i] = a[i];
	s->n += n;
}

EI_FN void ei_put_long(struct ei_sink *s, long v)
{
	ei_put(s, &v, sizeof(v));
}

/* Compares two sinks; on a difference says where, with some context. */
EI_FN void ei_sink_expect_same(const struct ei_sink *ref, const struct ei_sink *got,
				const char *what)
{
	const volatile unsigned char *a = ref->p, *b = got->p;
	size_t n = ref->n < got->n ? ref->n : got->n;

	for (size_t i = 0; i < n; i++) {
		if (a[i] != b[i]) {
			size_t lo = i >= 16 ? i - 16 : 0;
			fprintf(stderr, "  %s: results differ at byte %zu of %zu\n  ref:", what, i,
				ref->n);
			for (size_t k = lo; k < i + 16 && k < n; k++)
				fprintf(stderr, " %02x", a[k]);
			fprintf(stderr, "\n  got:");
			for (size_t k = lo; k < i + 16 && k < n; k++)
				fprintf(stderr, " %02x", b[k]);
			fputc('\n', stderr);
			UKT_FAIL("%s: the probed program computed something else", what);
		}
	}
	if (ref->n != got->n)
		UKT_FAIL("%s: %zu result bytes, reference has %zu", what, got->n, ref->n);
}

/* ---- objects and their functions ---------------------------------------- */

struct ei_fn {
	unsigned long start, size;	/* run-time address */
	char name[64];
	unsigned char global;	/* 2 GLOBAL, 1 WEAK, 0 LOCAL symbol */
};

struct ei_obj {
	char path[512];
	unsigned long bias;
	unsigned long text_lo, text_hi;	/* run-time bounds of .text */
	struct ei_fn *fns;		/* sorted by start, no overlaps kept */
	size_t nfns;
	const char *how;		/* "symtab", "debug file", "eh_frame" */
};

struct ei_find {
	const char *needle;
	char path[512];
	unsigned long bias;
	int found;
};

EI_FN int ei_find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct ei_find *f = arg;
	(void)size;
	if (!f->found && info->dlpi_name && strstr(info->dlpi_name, f->needle)) {
		snprintf(f->path, sizeof(f->path), "%s", info->dlpi_name);
		f->bias = info->dlpi_addr;
		f->found = 1;
	}
	return 0;
}

EI_FN const void *ei_map_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	void *m;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		return NULL;
	}
	m = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return NULL;
	*len = st.st_size;
	return m;
}

EI_FN const Elf64_Shdr *ei_section(const void *f, const char *name, unsigned type)
{
	const Elf64_Ehdr *eh = f;
	const Elf64_Shdr *sh = (const void *)((const char *)f + eh->e_shoff);
	const char *shstr = (const char *)f + sh[eh->e_shstrndx].sh_offset;

	for (unsigned i = 0; i < eh->e_shnum; i++) {
		if (type && sh[i].sh_type != type)
			continue;
		if (name && strcmp(shstr + sh[i].sh_name, name))
			continue;
		return &sh[i];
	}
	return NULL;
}

EI_FN int ei_name_rank(const struct ei_fn *f)
{
	int r = f->global * 100, u = 0;
	while (f->name[u] == '_')
		u++;
	r -= u * 10;
	if (strchr(f->name, '@') || strchr(f->name, '.'))
		r -= 5;
	return r;
}

EI_FN int ei_cmp_fn(const void *a, const void *b)
{
	const struct ei_fn *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	/* same start: the larger first (kept), then the best name:
	 * GLOBAL, WEAK, LOCAL; fewer leading underscores; unversioned */
	if (x->size != y->size)
		return x->size > y->size ? -1 : 1;
	return ei_name_rank(y) - ei_name_rank(x);
}

EI_FN void ei_add_fn(struct ei_obj *o, size_t *cap, unsigned long start,
		      unsigned long size, const char *name)
{
	if (o->nfns == *cap) {
		*cap = *cap ? 2 * *cap : 1024;
		o->fns = realloc(o->fns, *cap * sizeof(*o->fns));
		UKT_ASSERT(o->fns);
	}
	struct ei_fn *f = &o->fns[o->nfns++];
	f->start = start;
	f->size = size;
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->global = 0;
}

/* FUNC symbols with a size, run-time addresses. */
EI_FN void ei_add_symtab(struct ei_obj *o, size_t *cap, const void *f,
			  const Elf64_Shdr *symsh)
{
	const Elf64_Ehdr *eh = f;
	const Elf64_Shdr *sh = (const void *)((const char *)f + eh->e_shoff);
	const Elf64_Sym *s = (const void *)((const char *)f + symsh->sh_offset);
	const char *str = (const char *)f + sh[symsh->sh_link].sh_offset;
	size_t n = symsh->sh_size / sizeof(*s);

	for (size_t i = 0; i < n; i++) {
		if (ELF64_ST_TYPE(s[i].st_info) != STT_FUNC || !s[i].st_size ||
		    s[i].st_shndx == SHN_UNDEF || !s[i].st_value)
			continue;
		ei_add_fn(o, cap, s[i].st_value + o->bias, s[i].st_size, str + s[i].st_name);
		o->fns[o->nfns - 1].global = ELF64_ST_BIND(s[i].st_info) == STB_GLOBAL ? 2 :
					     ELF64_ST_BIND(s[i].st_info) == STB_WEAK ? 1 : 0;
	}
}

/* Reads a DWARF-encoded pointer of .eh_frame (the encodings gcc uses). */
EI_FN int ei_read_enc(const unsigned char **pp, unsigned enc, unsigned long here,
		       unsigned long *out)
{
	const unsigned char *p = *pp;
	long v;

	if (enc == 0xff)
		return -1;
	switch (enc & 0x0f) {
	case 0x0b: { int32_t x; memcpy(&x, p, 4); v = x; p += 4; break; }	/* sdata4 */
	case 0x03: { uint32_t x; memcpy(&x, p, 4); v = x; p += 4; break; }	/* udata4 */
	case 0x04: case 0x0c: { int64_t x; memcpy(&x, p, 8); v = x; p += 8; break; }
	case 0x00: { int64_t x; memcpy(&x, p, 8); v = x; p += 8; break; }	/* absptr */
	default: return -1;
	}
	if ((enc & 0x70) == 0x10)	/* pcrel */
		v += (long)here;
	else if (enc & 0x70)
		return -1;
	*pp = p;
	*out = (unsigned long)v;
	return 0;
}

EI_FN unsigned long ei_uleb(const unsigned char **pp)
{
	unsigned long v = 0;
	int shift = 0;
	const unsigned char *p = *pp;
	while (*p & 0x80) {
		v |= (unsigned long)(*p++ & 0x7f) << shift;
		shift += 7;
	}
	v |= (unsigned long)(*p++) << shift;
	*pp = p;
	return v;
}

/*
 * FDEs of .eh_frame, file addresses: the bounds of every function that
 * has unwind information, static ones included, with no symbol at all.
 */
EI_FN void ei_add_fdes(struct ei_obj *o, size_t *cap, const void *f, unsigned long lo,
			unsigned long hi)
{
	const Elf64_Shdr *ehs = ei_section(f, ".eh_frame", 0);
	UKT_ASSERT(ehs);
	const unsigned char *base = (const unsigned char *)f + ehs->sh_offset;
	unsigned long vbase = ehs->sh_addr;	/* address in the file's image */
	const unsigned char *p = base, *end = base + ehs->sh_size;

	while (p + 4 <= end) {
		uint32_t len;
		memcpy(&len, p, 4);
		if (len == 0)
			break;
		UKT_ASSERT(len != 0xffffffff);	/* 64-bit DWARF: not from gcc */
		const unsigned char *rec = p + 4, *next = rec + len;
		uint32_t cie_ptr;
		memcpy(&cie_ptr, rec, 4);
		if (cie_ptr != 0) {
			/* an FDE: find its CIE's 'R' encoding */
			const unsigned char *cie = rec - cie_ptr;
			const char *aug = (const char *)cie + 4 + 4 + 1;
			const unsigned char *q = (const unsigned char *)aug + strlen(aug) + 1;
			unsigned enc = 0;
			ei_uleb(&q);			/* code alignment */
			while (*q & 0x80)		/* data alignment, sleb */
				q++;
			q++;
			q++;				/* return column (version 1) */
			if (aug[0] == 'z') {
				ei_uleb(&q);
				for (const char *a = aug + 1; *a; a++) {
					if (*a == 'R') {
						enc = *q++;
					} else if (*a == 'P') {
						unsigned penc = *q++;
						unsigned long dummy;
						ei_read_enc(&q, penc & 0x7f, 0, &dummy);
					} else if (*a == 'L') {
						q++;
					}
				}
			}
			const unsigned char *r = rec + 4;
			unsigned long start, range;
			unsigned long here = vbase + (unsigned long)(r - base);
			if (ei_read_enc(&r, enc, here, &start) == 0 &&
			    ei_read_enc(&r, enc & 0x0f, 0, &range) == 0 &&
			    start >= lo && start + range <= hi && range) {
				char nm[64];
				snprintf(nm, sizeof(nm), "fde@%#lx", start);
				ei_add_fn(o, cap, start + o->bias, range, nm);
			}
		}
		p = next;
	}
}

/*
 * Loads the functions of the loaded object whose path contains needle.
 * With use_fdes, the bounds come from .eh_frame and .dynsym only names
 * them (for objects without symbols, like Debian's libz).
 */
EI_FN void ei_obj_load(struct ei_obj *o, const char *needle, int use_fdes)
{
	struct ei_find fd = { .needle = needle };
	size_t len, dlen, cap = 0;
	const void *f, *d = NULL;

	memset(o, 0, sizeof(*o));
	dl_iterate_phdr(ei_find_cb, &fd);
	if (!fd.found)
		UKT_FAIL("no loaded object matches '%s'", needle);
	snprintf(o->path, sizeof(o->path), "%s", fd.path);
	o->bias = fd.bias;
	f = ei_map_file(o->path, &len);
	UKT_ASSERT(f);
	const Elf64_Shdr *text = ei_section(f, ".text", SHT_PROGBITS);
	UKT_ASSERT(text);
	o->text_lo = text->sh_addr + o->bias;
	o->text_hi = o->text_lo + text->sh_size;

	const Elf64_Shdr *st = ei_section(f, NULL, SHT_SYMTAB);
	if (use_fdes) {
		ei_add_fdes(o, &cap, f, text->sh_addr, text->sh_addr + text->sh_size);
		o->how = "eh_frame";
	} else if (st) {
		ei_add_symtab(o, &cap, f, st);
		o->how = "symtab";
	} else {
		const Elf64_Shdr *nsh = ei_section(f, ".note.gnu.build-id", SHT_NOTE);
		UKT_ASSERT(nsh);
		const Elf64_Nhdr *nh = (const void *)((const char *)f + nsh->sh_offset);
		const unsigned char *id = (const unsigned char *)(nh + 1) +
					  ((nh->n_namesz + 3) & ~3U);
		char path[256];
		int k = snprintf(path, sizeof(path), "/usr/lib/debug/.build-id/%02x/", id[0]);
		for (unsigned i = 1; i < nh->n_descsz; i++)
			k += snprintf(path + k, sizeof(path) - k, "%02x", id[i]);
		snprintf(path + k, sizeof(path) - k, ".debug");
		d = ei_map_file(path, &dlen);
		if (!d)
			UKT_FAIL("%s has no .symtab and no debug file %s", o->path, path);
		st = ei_section(d, NULL, SHT_SYMTAB);
		UKT_ASSERT(st);
		ei_add_symtab(o, &cap, d, st);
		o->how = "debug file";
	}
	qsort(o->fns, o->nfns, sizeof(*o->fns), ei_cmp_fn);

	/* names for FDE functions: a .dynsym symbol starting there */
	if (use_fdes) {
		const Elf64_Shdr *dyn = ei_section(f, NULL, SHT_DYNSYM);
		const Elf64_Shdr *sh = (const void *)((const char *)f +
						      ((const Elf64_Ehdr *)f)->e_shoff);
		const Elf64_Sym *s = (const void *)((const char *)f + dyn->sh_offset);
		const char *str = (const char *)f + sh[dyn->sh_link].sh_offset;
		for (size_t i = 0; i < dyn->sh_size / sizeof(*s); i++) {
			if (ELF64_ST_TYPE(s[i].st_info) != STT_FUNC || !s[i].st_value)
				continue;
			unsigned long a = s[i].st_value + o->bias;
			for (size_t j = 0; j < o->nfns; j++)
				if (o->fns[j].start == a)
					snprintf(o->fns[j].name, sizeof(o->fns[j].name), "%s",
						 str + s[i].st_name);
		}
	}

	/* one entry per start (the largest, named by a GLOBAL alias if
	 * any); drop functions nested inside the previous one */
	size_t w = 0;
	for (size_t i = 0; i < o->nfns; i++) {
		struct ei_fn *c = &o->fns[i];
		if (w && c->start == o->fns[w - 1].start)
			continue;	/* an alias, or nested: sorted after */
		if (w && c->start < o->fns[w - 1].start + o->fns[w - 1].size)
			continue;
		o->fns[w++] = *c;
	}
	o->nfns = w;
	munmap((void *)f, len);
	if (d)
		munmap((void *)d, dlen);
}

EI_FN const struct ei_fn *ei_fn_at(const struct ei_obj *o, unsigned long a)
{
	size_t lo = 0, hi = o->nfns;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (o->fns[mid].start <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	const struct ei_fn *f = &o->fns[lo - 1];
	return a < f->start + f->size ? f : NULL;
}

EI_FN const struct ei_fn *ei_fn_named(const struct ei_obj *o, const char *name)
{
	for (size_t i = 0; i < o->nfns; i++)
		if (!strcmp(o->fns[i].name, name))
			return &o->fns[i];
	return NULL;
}

/* ---- instruction sweeps --------------------------------------------------- */

struct ei_insn {
	unsigned long addr;
	unsigned len;
	unsigned long target;	/* direct branch/call target, else 0 */
	int is_call;
};

static ZydisDecoder ei_decoder;

/*
 * Every instruction of [start, start+size), decoded linearly from start.
 * Fails the case on bytes Zydis cannot decode or an instruction running
 * past the end.  Returns the number found; *out is malloc'd.
 */
EI_FN size_t ei_sweep(const struct ei_fn *fn, struct ei_insn **out)
{
	static int ready;
	size_t n = 0, cap = 64;
	struct ei_insn *v = malloc(cap * sizeof(*v));
	unsigned long pc = fn->start, end = fn->start + fn->size;

	if (!ready) {
		ZydisDecoderInit(&ei_decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
		ready = 1;
	}
	UKT_ASSERT(v);
	while (pc < end) {
		ZydisDecodedInstruction d;
		ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
		if (ZYAN_FAILED(ZydisDecoderDecodeFull(&ei_decoder, (const void *)pc, end - pc,
						       &d, ops)))
			UKT_FAIL("%s+%#lx (%#lx): Zydis cannot decode", fn->name,
				 pc - fn->start, pc);
		if (n == cap) {
			cap *= 2;
			v = realloc(v, cap * sizeof(*v));
			UKT_ASSERT(v);
		}
		struct ei_insn *in = &v[n++];
		in->addr = pc;
		in->len = d.length;
		in->target = 0;
		in->is_call = d.meta.category == ZYDIS_CATEGORY_CALL;
		for (int i = 0; i < 2; i++)
			if (d.raw.imm[i].is_relative)
				in->target = pc + d.length + (unsigned long)d.raw.imm[i].value.s;
		pc += d.length;
	}
	*out = v;
	return n;
}

/*
 * Every instruction boundary of fn appended to *v (grown as needed): like
 * ei_sweep(), but stops at bytes Zydis cannot decode instead of failing
 * (hand-written code of the C library holds data in a few functions).
 * 0, or 1 when the function was swept only partly.
 */
EI_FN int ei_sweep_addrs(const struct ei_fn *fn, unsigned long **v, size_t *n, size_t *cap)
{
	static ZydisDecoder dec;
	static int ready;
	unsigned long pc = fn->start, end = fn->start + fn->size;

	if (!ready) {
		ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
		ready = 1;
	}
	while (pc < end) {
		ZydisDecodedInstruction d;
		ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
		if (ZYAN_FAILED(ZydisDecoderDecodeFull(&dec, (const void *)pc, end - pc, &d, ops)))
			return 1;
		if (*n == *cap) {
			*cap = *cap ? 2 * *cap : 65536;
			*v = realloc(*v, *cap * sizeof(**v));
			if (!*v) {
				fprintf(stderr, "ei_sweep_addrs: out of memory\n");
				exit(1);
			}
		}
		(*v)[(*n)++] = pc;
		pc += d.length;
	}
	return 0;
}

/* Has the file at path a .symtab, or a debug file found by build-id? */
EI_FN int ei_has_symbols(const char *path)
{
	size_t len;
	const void *f = ei_map_file(path, &len);
	int yes = 0;

	if (!f)
		return 0;
	if (memcmp(f, ELFMAG, SELFMAG) == 0) {
		const Elf64_Shdr *nsh = ei_section(f, ".note.gnu.build-id", SHT_NOTE);
		if (ei_section(f, NULL, SHT_SYMTAB)) {
			yes = 1;
		} else if (nsh) {
			const Elf64_Nhdr *nh = (const void *)((const char *)f + nsh->sh_offset);
			const unsigned char *id = (const unsigned char *)(nh + 1) +
						  ((nh->n_namesz + 3) & ~3U);
			char dbg[256];
			int k = snprintf(dbg, sizeof(dbg), "/usr/lib/debug/.build-id/%02x/", id[0]);
			for (unsigned i = 1; i < nh->n_descsz && k < (int)sizeof(dbg) - 8; i++)
				k += snprintf(dbg + k, sizeof(dbg) - k, "%02x", id[i]);
			snprintf(dbg + k, sizeof(dbg) - k, ".debug");
			yes = access(dbg, R_OK) == 0;
		}
	}
	munmap((void *)f, len);
	return yes;
}

/* ---- closures ------------------------------------------------------------- */

struct ei_fnset {
	const struct ei_fn **v;
	size_t n;
};

EI_FN int ei_fnset_has(const struct ei_fnset *s, const struct ei_fn *f)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == f)
			return 1;
	return 0;
}

EI_FN int ei_denied(const char *name, const char *const *deny)
{
	for (size_t i = 0; deny && deny[i]; i++) {
		size_t k = strlen(deny[i]);
		if (k && deny[i][k - 1] == '*' ? !strncmp(name, deny[i], k - 1)
					       : !strcmp(name, deny[i]))
			return 1;
	}
	return 0;
}

/*
 * The functions of o that the roots reach by direct call/jmp/jcc, up to
 * depth levels away (0: the roots alone), except those named in deny
 * (a trailing '*' matches a prefix).
 */
EI_FN void ei_closure(const struct ei_obj *o, const unsigned long *roots, size_t nroots,
		       int depth, const char *const *deny, struct ei_fnset *out)
{
	size_t cap = 16;
	out->v = malloc(cap * sizeof(*out->v));
	out->n = 0;
	UKT_ASSERT(out->v);
	for (size_t i = 0; i < nroots; i++) {
		const struct ei_fn *f = ei_fn_at(o, roots[i]);
		if (!f)
			UKT_FAIL("root %#lx is in no function of %s", roots[i], o->path);
		if (!ei_fnset_has(out, f)) {
			if (out->n == cap)
				out->v = realloc(out->v, (cap *= 2) * sizeof(*out->v));
			out->v[out->n++] = f;
		}
	}
	size_t from = 0;
	for (int level = 0; level < depth; level++) {
		size_t to = out->n;
		for (size_t i = from; i < to; i++) {
			struct ei_insn *ins;
			size_t n = ei_sweep(out->v[i], &ins);
			for (size_t k = 0; k < n; k++) {
				unsigned long t = ins[k].target;
				if (!t || t < o->text_lo || t >= o->text_hi)
					continue;
				const struct ei_fn *f = ei_fn_at(o, t);
				if (!f || ei_fnset_has(out, f) || ei_denied(f->name, deny))
					continue;
				if (out->n == cap)
					out->v = realloc(out->v, (cap *= 2) * sizeof(*out->v));
				UKT_ASSERT(out->v);
				out->v[out->n++] = f;
			}
			free(ins);
		}
		from = to;
	}
}

/* ---- probe sets ----------------------------------------------------------- */

struct ei_probe {
	struct kprobe kp;	/* first: the handlers cast back */
	unsigned long addr;	/* what kp.addr must resolve to */
	unsigned long hits, post_hits;
	unsigned fn;		/* index into the set's functions */
};

static unsigned long ei_bad_ip;		/* pre_handler saw ip != addr */
static unsigned long ei_bad_post;	/* post_handler before its pre */

EI_FN int ei_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct ei_probe *e = (struct ei_probe *)p;
	if (regs->ip != e->addr)
		__atomic_fetch_add(&ei_bad_ip, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&e->hits, 1, __ATOMIC_RELAXED);
	return 0;
}

EI_FN void ei_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags)
{
	struct ei_probe *e = (struct ei_probe *)p;
	(void)regs;
	(void)flags;
	if (__atomic_add_fetch(&e->post_hits, 1, __ATOMIC_RELAXED) >
	    __atomic_load_n(&e->hits, __ATOMIC_RELAXED))
		__atomic_fetch_add(&ei_bad_post, 1, __ATOMIC_RELAXED);
}

struct ei_set {
	const struct ei_obj *obj;
	struct ei_fnset fns;
	size_t *fn_ninsn;
	struct ei_probe *pr;
	struct kprobe **kps;
	size_t n;
	unsigned long *snap;	/* hits at the last snapshot */
};

/*
 * One probe per instruction boundary of every function of fns (with
 * stride k > 1: every k-th of each function, and sym_addr).  by_name: for
 * up to that many boundaries from sym_addr on, in the function holding
 * it, use symbol_name (sym_spec, e.g. "libc.so.6:qsort") + offset instead
 * of addr; sym_spec must resolve to sym_addr.
 */
EI_FN void ei_set_build_stride(struct ei_set *s, const struct ei_obj *o,
				struct ei_fnset fns, int post, const char *sym_spec,
				unsigned long sym_addr, int by_name, unsigned stride)
{
	size_t cap = 1024;
	memset(s, 0, sizeof(*s));
	s->obj = o;
	s->fns = fns;
	s->fn_ninsn = calloc(fns.n, sizeof(*s->fn_ninsn));
	s->pr = malloc(cap * sizeof(*s->pr));
	UKT_ASSERT(s->pr && s->fn_ninsn);
	for (size_t i = 0; i < fns.n; i++) {
		struct ei_insn *ins;
		/* a callee the engine refuses as a whole (its blacklist:
		 * functions glibc's posix_spawn child runs) stays unprobed */
		struct kprobe probe_fn = { .addr = (kprobe_opcode_t *)fns.v[i]->start };
		if (register_kprobe(&probe_fn) == -EINVAL) {
			printf("  %s: refused by the blacklist, left unprobed\n", fns.v[i]->name);
			continue;
		}
		unregister_kprobe(&probe_fn);
		size_t n = ei_sweep(fns.v[i], &ins);
		s->fn_ninsn[i] = n;
		for (size_t k = 0; k < n; k++) {
			if (stride > 1 && k % stride && ins[k].addr != sym_addr)
				continue;
			if (s->n == cap) {
				cap *= 2;
				s->pr = realloc(s->pr, cap * sizeof(*s->pr));
				UKT_ASSERT(s->pr);
			}
			struct ei_probe *e = &s->pr[s->n++];
			memset(e, 0, sizeof(*e));
			e->addr = ins[k].addr;
			e->fn = (unsigned)i;
			e->kp.pre_handler = ei_pre;
			if (post)
				e->kp.post_handler = ei_post;
			if (sym_spec && by_name > 0 && ins[k].addr >= sym_addr &&
			    sym_addr >= fns.v[i]->start &&
			    sym_addr < fns.v[i]->start + fns.v[i]->size) {
				by_name--;
				e->kp.symbol_name = sym_spec;
				e->kp.offset = (unsigned)(ins[k].addr - sym_addr);
			} else {
				e->kp.addr = (kprobe_opcode_t *)ins[k].addr;
			}
		}
		free(ins);
	}
	/* the array does not move any more: point at it */
	s->kps = malloc(s->n * sizeof(*s->kps));
	s->snap = calloc(s->n, sizeof(*s->snap));
	UKT_ASSERT(s->kps && s->snap);
	for (size_t i = 0; i < s->n; i++)
		s->kps[i] = &s->pr[i].kp;
}

EI_FN void ei_set_build(struct ei_set *s, const struct ei_obj *o, struct ei_fnset fns,
			 int post, const char *sym_spec, unsigned long sym_addr, int by_name)
{
	ei_set_build_stride(s, o, fns, post, sym_spec, sym_addr, by_name, 1);
}

EI_FN void ei_set_register(struct ei_set *s)
{
	int ret = register_kprobes(s->kps, (int)s->n);
	if (ret)
		UKT_FAIL("register_kprobes(%zu probes) = %d (%s)", s->n, ret, strerror(-ret));
	for (size_t i = 0; i < s->n; i++) {
		if ((unsigned long)s->pr[i].kp.addr != s->pr[i].addr)
			UKT_FAIL("probe %zu (%s+%u): addr %p, expected %#lx", i,
				 s->pr[i].kp.symbol_name ? s->pr[i].kp.symbol_name : "-",
				 s->pr[i].kp.offset, (void *)s->pr[i].kp.addr, s->pr[i].addr);
		UKT_EQ(s->pr[i].kp.flags & KPROBE_FLAG_GONE, 0);
	}
}

EI_FN void ei_set_zero(struct ei_set *s)
{
	for (size_t i = 0; i < s->n; i++) {
		__atomic_store_n(&s->pr[i].hits, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&s->pr[i].post_hits, 0, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&ei_bad_ip, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ei_bad_post, 0, __ATOMIC_RELAXED);
}

EI_FN void ei_set_snapshot(struct ei_set *s)
{
	for (size_t i = 0; i < s->n; i++)
		s->snap[i] = __atomic_load_n(&s->pr[i].hits, __ATOMIC_RELAXED);
}

EI_FN unsigned long ei_set_total(const struct ei_set *s, size_t *distinct)
{
	unsigned long t = 0;
	size_t d = 0;
	for (size_t i = 0; i < s->n; i++) {
		t += s->snap[i];
		d += s->snap[i] != 0;
	}
	if (distinct)
		*distinct = d;
	return t;
}

EI_FN struct ei_probe *ei_set_probe_at(struct ei_set *s, unsigned long addr)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->pr[i].addr == addr)
			return &s->pr[i];
	return NULL;
}

/* Prints one line per function: instructions, how many ran, hits. */
EI_FN void ei_set_report(const struct ei_set *s, const char *what, int verbose)
{
	size_t distinct;
	unsigned long total = ei_set_total(s, &distinct);
	printf("  %s: %zu functions, %zu probes (%s), %lu hits on %zu distinct instructions\n",
	       what, s->fns.n, s->n, s->obj->how, total, distinct);
	if (!verbose)
		return;
	for (size_t f = 0; f < s->fns.n; f++) {
		unsigned long h = 0;
		size_t d = 0;
		for (size_t i = 0; i < s->n; i++)
			if (s->pr[i].fn == f) {
				h += s->snap[i];
				d += s->snap[i] != 0;
			}
		if (h)
			printf("    %-36s %5zu insns, %5zu ran, %8lu hits\n",
			       s->fns.v[f]->name, s->fn_ninsn[f], d, h);
	}
}

/* Checks after a probed run: handlers saw sane state, nothing missed. */
EI_FN void ei_set_check(struct ei_set *s, int post)
{
	UKT_EQ(__atomic_load_n(&ei_bad_ip, __ATOMIC_RELAXED), 0);
	UKT_EQ(__atomic_load_n(&ei_bad_post, __ATOMIC_RELAXED), 0);
	for (size_t i = 0; i < s->n; i++) {
		if (s->pr[i].kp.nmissed)
			UKT_FAIL("probe at %#lx (%s): nmissed %lu", s->pr[i].addr,
				 s->fns.v[s->pr[i].fn]->name, s->pr[i].kp.nmissed);
		if (post && s->pr[i].post_hits != s->pr[i].hits)
			UKT_FAIL("probe at %#lx (%s+%#lx): %lu pre, %lu post", s->pr[i].addr,
				 s->fns.v[s->pr[i].fn]->name,
				 s->pr[i].addr - s->fns.v[s->pr[i].fn]->start,
				 s->pr[i].hits, s->pr[i].post_hits);
	}
}

EI_FN void ei_set_unregister(struct ei_set *s)
{
	unregister_kprobes(s->kps, (int)s->n);
}

#endif
