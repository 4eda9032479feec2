/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for ukprobe's reading of DWARF (cli/dwarf.c, included
 * whole: its helpers are static): an input is an ELF object with debug
 * information, opened as `probe -x` opens one (through a memfd's
 * /proc/self/fd path), then driven through what -F, -L, -V, -D and trace
 * do with it: the functions listed by a glob, -L of a few of them and of
 * their source's lines, -V at them, and source-level definitions naming
 * them, their lines, their variables ($vars, $params, %return, members
 * through '.' and '->', indexes, :string), as well as the raw places
 * only the debug information knows.  The names come from the object
 * itself, so a mutated object still reaches the deep code.  Nothing may
 * crash, leak, hang or read out of bounds; an error must carry an offset
 * inside its definition.
 *
 * The custom mutator mutates mostly the bytes of the .debug_* sections
 * (found through the section headers), keeping the ELF around them whole.
 */
#include "../cli/dwarf.c"

#include <elf.h>
#include <sys/mman.h>

#define MAXFN 4		/* functions driven an input */
#define MAXVAR 6	/* variables of each */

static int memfd = -1;
static char mpath[64];
static FILE *sink;

static void quiet_note(const char *msg)
{
	(void)msg;
}

/* ---- names from the object ------------------------------------------ */

struct pick {
	char func[256];
	char src[256];		/* its source's base name, or "" */
	int line;		/* its declaration's line */
	int nvar;
	char var[MAXVAR][128];
	char member[MAXVAR][128];	/* a member of its (pointed to) struct */
	int ptr[MAXVAR];	/* a pointer (or an array) */
};

/* a name the place grammar reads as one: letters, digits, '_' */
static int plain(const char *s)
{
	if (!s || !*s || strlen(s) >= 120)
		return 0;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_')
			return 0;
	return 1;
}

static void pick_vars(Dwarf_Die *fn, struct pick *p)
{
	Dwarf_Die c;
	if (dwarf_child(fn, &c) != 0)
		return;
	int guard = 0;
	do {
		int t = dwarf_tag(&c);
		if (t != DW_TAG_formal_parameter && t != DW_TAG_variable)
			continue;
		const char *nm = dwarf_diename(&c);
		if (!plain(nm))
			continue;
		int k = p->nvar++;
		snprintf(p->var[k], sizeof p->var[k], "%s", nm);
		p->member[k][0] = 0;
		p->ptr[k] = 0;
		Dwarf_Die ty, st;
		if (type_of(&c, &ty) == 0) {
			int tt = dwarf_tag(&ty);
			p->ptr[k] = tt == DW_TAG_pointer_type || tt == DW_TAG_array_type;
			if (!p->ptr[k] || type_of(&ty, &st) != 0)
				st = ty;
			Dwarf_Die m;
			if (dwarf_child(&st, &m) == 0) {
				int g2 = 0;
				do {
					const char *mn = dwarf_diename(&m);
					if (dwarf_tag(&m) == DW_TAG_member && plain(mn)) {
						snprintf(p->member[k], sizeof p->member[k], "%s", mn);
						break;
					}
				} while (++g2 < 64 && dwarf_siblingof(&m, &m) == 0);
			}
		}
	} while (p->nvar < MAXVAR && ++guard < 256 && dwarf_siblingof(&c, &c) == 0);
}

/* up to MAXFN concrete functions with plain names, spread over the list */
static int pick_functions(struct dw_obj *o, struct pick *out)
{
	struct insts s = { 0 };
	struct match m = { "*", NULL, &s, 1 };
	walk_all(o, match_fn, &m);
	size_t nc = 0;
	for (size_t i = 0; i < s.n; i++)
		if (!s.v[i].inlined && plain(dwarf_diename(&s.v[i].die)))
			s.v[nc++] = s.v[i];
	int n = 0;
	for (size_t k = 0; k < MAXFN && k < nc; k++) {
		struct inst *in = &s.v[nc <= MAXFN ? k : k * (nc - 1) / (MAXFN - 1)];
		struct pick *p = &out[n++];
		memset(p, 0, sizeof *p);
		snprintf(p->func, sizeof p->func, "%s", dwarf_diename(&in->die));
		const char *f = decl_file(&in->die, &in->cu);
		const char *b = f ? strrchr(f, '/') : NULL;
		b = b ? b + 1 : f;
		if (b && strlen(b) < 200 && strchr(b, '.') && !strpbrk(b, " \t:@;%\"'\\"))
			snprintf(p->src, sizeof p->src, "%s", b);
		dwarf_decl_line(&in->die, &p->line);
		pick_vars(&in->die, p);
	}
	free(s.v);
	return n;
}

/* ---- the entry points ----------------------------------------------- */

static void translate_one(struct dw_obj *o, const char *def)
{
	char **out = NULL;
	struct dw_error err = { "", 0 };
	int n = dw_translate(o, def, &out, &err);
	if (n < 0) {
		if (err.offset < 0 || (size_t)err.offset > strlen(def) || !err.msg[0])
			abort();
		return;
	}
	for (int k = 0; k < n; k++) {
		if (!out[k])
			abort();
		(void)dw_map_offset(def, out[k], (int)strlen(out[k]) / 2);
		free(out[k]);
	}
	free(out);
}

static void list(struct dw_obj *o, int (*fn)(struct dw_obj *, const char *, FILE *,
					   struct dw_error *), const char *place)
{
	struct dw_error err = { "", 0 };
	if (fn(o, place, sink, &err) < 0 &&
	    (err.offset < 0 || (size_t)err.offset > strlen(place) || !err.msg[0]))
		abort();
}

static void drive(struct dw_obj *o, const struct pick *p)
{
	char d[1024];
	const char *f = p->func;
	list(o, dw_list_lines, f);
	list(o, dw_list_vars, f);
	snprintf(d, sizeof d, "%s:2", f);
	list(o, dw_list_vars, d);
	snprintf(d, sizeof d, "%s;*", f);
	list(o, dw_list_vars, d);
	if (p->src[0]) {
		snprintf(d, sizeof d, "%s:%d-%d", p->src, p->line > 0 ? p->line : 1,
			 (p->line > 0 ? p->line : 1) + 20);
		list(o, dw_list_lines, d);
		snprintf(d, sizeof d, "%s@%s", f, p->src);
		list(o, dw_list_lines, d);
		snprintf(d, sizeof d, "%s:%d", p->src, p->line + 2);
		list(o, dw_list_vars, d);
		snprintf(d, sizeof d, "p %s:%d $vars", p->src, p->line + 1);
		translate_one(o, d);
	}
	snprintf(d, sizeof d, "p %s $params", f);
	translate_one(o, d);
	snprintf(d, sizeof d, "p %s:1 $vars", f);
	translate_one(o, d);
	snprintf(d, sizeof d, "r %s $params", f);
	translate_one(o, d);
	snprintf(d, sizeof d, "p %s+4", f);
	translate_one(o, d);
	snprintf(d, sizeof d, "p %s;* $vars", f);
	translate_one(o, d);
	for (int k = 0; k < p->nvar; k++) {
		const char *v = p->var[k], *m = p->member[k];
		snprintf(d, sizeof d, "p %s %s", f, v);
		translate_one(o, d);
		snprintf(d, sizeof d, "p %s%%return %s", f, v);
		translate_one(o, d);
		snprintf(d, sizeof d, "p %s:2 x=%s:string", f, v);
		translate_one(o, d);
		if (p->ptr[k]) {
			snprintf(d, sizeof d, "p %s %s[1] %s[-3]", f, v, v);
			translate_one(o, d);
			if (m[0]) {
				snprintf(d, sizeof d, "p %s %s->%s %s[2].%s", f, v, m, v, m);
				translate_one(o, d);
			}
		} else if (m[0]) {
			snprintf(d, sizeof d, "p %s %s.%s", f, v, m);
			translate_one(o, d);
		}
	}
	/* a raw place only the debug information may know */
	char **out = NULL;
	struct dw_error err = { "", 0 };
	snprintf(d, sizeof d, "p %s", f);
	int n = dw_translate_symbol(o, d, 1, &out, &err);
	for (int k = 0; k < n; k++)
		free(out[k]);
	if (n > 0)
		free(out);
	char raw[1200];
	snprintf(d, sizeof d, "%s+4", f);
	(void)dw_raw_place(o, d, raw, sizeof raw);
	snprintf(d, sizeof d, "%s+0xffffffffffffffff", f);
	(void)dw_raw_place(o, d, raw, sizeof raw);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	memfd = memfd_create("dwarf-fuzz", 0);
	if (memfd < 0)
		abort();
	snprintf(mpath, sizeof mpath, "/proc/self/fd/%d", memfd);
	sink = fopen("/dev/null", "w");
	if (!sink)
		abort();
	/* the object's own debug information only: no other file is
	 * looked for (a debuglink, a build-id's file) */
	debuginfo_path = (char *)"/nonexistent-dwarf-fuzz";
	dw_note = quiet_note;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < sizeof(Elf64_Ehdr) || size > 65536)
		return 0;
	if (ftruncate(memfd, 0) != 0 || pwrite(memfd, data, size, 0) != (ssize_t)size)
		abort();
	struct dw_error err = { "", 0 };
	struct dw_obj *o = dw_open(mpath, &err);
	if (!o)
		return 0;
	(void)dw_list_funcs(o, "*", sink);
	(void)dw_list_funcs(o, "w*", sink);
	struct pick p[MAXFN];
	int n = pick_functions(o, p);
	for (int k = 0; k < n; k++)
		drive(o, &p[k]);
	translate_one(o, "p nosuchfunction x");
	dw_close(o);
	return 0;
}

/* ---- the mutator ---------------------------------------------------- */

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
			       unsigned int seed);

static uint64_t rng;
static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

/* the .debug_* sections of an ELF64 image: offsets and sizes */
static int debug_sections(const uint8_t *d, size_t size, size_t *off, size_t *len, int max)
{
	Elf64_Ehdr eh;
	if (size < sizeof eh)
		return 0;
	memcpy(&eh, d, sizeof eh);
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff >= size ||
	    eh.e_shnum > (size - eh.e_shoff) / sizeof(Elf64_Shdr) || eh.e_shstrndx >= eh.e_shnum)
		return 0;
	Elf64_Shdr str;
	memcpy(&str, d + eh.e_shoff + eh.e_shstrndx * sizeof str, sizeof str);
	if (str.sh_offset >= size || str.sh_size > size - str.sh_offset)
		return 0;
	int n = 0;
	for (int k = 0; k < eh.e_shnum && n < max; k++) {
		Elf64_Shdr sh;
		memcpy(&sh, d + eh.e_shoff + (size_t)k * sizeof sh, sizeof sh);
		if (sh.sh_name >= str.sh_size || sh.sh_type == SHT_NOBITS ||
		    sh.sh_offset >= size || !sh.sh_size || sh.sh_size > size - sh.sh_offset)
			continue;
		const char *nm = (const char *)d + str.sh_offset + sh.sh_name;
		size_t room = str.sh_size - sh.sh_name;
		if (room > 7 && !memcmp(nm, ".debug_", 7)) {
			off[n] = sh.sh_offset;
			len[n] = sh.sh_size;
			n++;
		}
	}
	return n;
}

static const uint64_t interesting[] = {
	0, 1, 2, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xffff, 0x7fffffff,
	0x80000000, 0xffffffff, 0x7fffffffffffffff, 0xffffffffffffffff, 16, 31, 32, 64,
};

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
			       unsigned int seed)
{
	size_t off[64], len[64];
	rng = seed * 0x9e3779b97f4a7c15ULL + 1;
	int n = debug_sections(data, size, off, len, 64);
	if (!n || rnd() % 8 == 0)
		return LLVMFuzzerMutate(data, size, max_size);
	int rounds = 1 + (int)(rnd() % 4);
	for (int r = 0; r < rounds; r++) {
		int s = (int)(rnd() % (unsigned)n);
		uint8_t *b = data + off[s];
		size_t l = len[s], at = rnd() % l;
		switch (rnd() % 6) {
		case 0:	/* a bit */
			b[at] ^= (uint8_t)(1u << (rnd() % 8));
			break;
		case 1:	/* a byte */
			b[at] = (uint8_t)rnd();
			break;
		case 2: {	/* an interesting value, 1, 2, 4 or 8 bytes */
			uint64_t v = interesting[rnd() % (sizeof interesting / sizeof *interesting)];
			size_t w = (size_t)1 << (rnd() % 4);
			if (w > l - at)
				w = l - at;
			memcpy(b + at, &v, w);
			break;
		}
		case 3: {	/* bytes copied from elsewhere in the section */
			size_t from = rnd() % l, w = 1 + rnd() % 16;
			if (w > l - at)
				w = l - at;
			if (w > l - from)
				w = l - from;
			memmove(b + at, b + from, w);
			break;
		}
		case 4:	/* a small number added */
			b[at] = (uint8_t)(b[at] + (int)(rnd() % 9) - 4);
			break;
		default: {	/* libFuzzer's own, in a window of the section */
			size_t w = 1 + rnd() % 64;
			if (w > l - at)
				w = l - at;
			LLVMFuzzerMutate(b + at, w, w);
			break;
		}
		}
	}
	return size;
}
