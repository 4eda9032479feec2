/* SPDX-License-Identifier: MIT */
/*
 * ELF symbols of the main executable and every shared object, loaded now
 * or later: "func" and "object:func" resolution, function bounds for the
 * instruction-boundary check, names for kprobes_list(), the blacklist
 * (ukprobes itself, its signal path, NOKPROBE_SYMBOL functions).
 *
 * .symtab is used where present, else the separate debug file found by
 * build-id under /usr/lib/debug/.build-id (Debian's -dbg packages), else
 * .dynsym.  A file is mapped while it is read; the names are copied: a
 * library rebuilt in place (truncated) while the program runs must not
 * fault it later.
 *
 * Lock order: no lock of ours is held while calling into the dynamic
 * linker (dl_iterate_phdr, dlopen, dlsym), because the dynamic linker
 * calls us (the r_brk probe in trap.c) with its own lock held.
 */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "internal.h"

struct sym {
	unsigned long addr, size;
	const char *name;
	unsigned char bind, type;
};

struct range { unsigned long lo, hi; };

struct ukp_object {
	char path[PATH_MAX];
	const char *base;		/* base name; "" for the main executable */
	unsigned long bias;		/* l_addr */
	struct range exec;		/* union of PF_X segments */
	unsigned long eh_hdr;		/* PT_GNU_EH_FRAME, or 0 */
	bool is_main, alive, loaded;
	struct sym *syms;		/* FUNC/IFUNC, by address */
	struct sym **byname;		/* same, by name */
	char *strs;			/* their names */
	size_t nsyms;
	struct range *nokprobe;
	size_t nnokprobe;
	unsigned long *coderefs;	/* code addresses its relocations make */
	size_t ncoderefs;
	bool refs_known;		/* position-independent, relocations read */
	struct ukp_object *next;
};

static pthread_mutex_t sym_lock = PTHREAD_MUTEX_INITIALIZER; /* objects */
/* Held (read) around our calls into the dynamic linker, and (write) by
 * fork's prepare handler: a fork while one of our threads is inside
 * dl_iterate_phdr() would leave the child with the dynamic linker's lock
 * held by a thread it does not have. */
static pthread_rwlock_t dl_calls = PTHREAD_RWLOCK_INITIALIZER;
static struct ukp_object *objects;	/* under sym_lock; never freed */
static struct range self_range;		/* ukprobes' own object */
static struct range extra_bl[24];	/* restorer, __errno_location, exec */
static const char *extra_bl_why[24];
static unsigned nextra;

extern char __start_ukp_text[] __attribute__((weak, visibility("hidden")));
extern char __stop_ukp_text[] __attribute__((weak, visibility("hidden")));

/* ---- loading one object's symbols ------------------------------------ */

/*
 * A file may be anything: one replaced on disk, truncated, or hostile.
 * Its reading must never fault in the program we run in; what does not
 * check out gives the object no symbols from it.  Every table lies
 * whole inside the file (overflow-safe), aligned for its entries (no
 * linker writes one otherwise), and every string ends inside its table.
 */
static bool in_file(uint64_t off, uint64_t size, size_t len)
{
	return off <= len && size <= len - off;
}

static bool table_ok(const Elf64_Shdr *sh, size_t len, size_t align)
{
	return in_file(sh->sh_offset, sh->sh_size, len) && sh->sh_offset % align == 0;
}

/* the section header string table, or NULL */
static const Elf64_Shdr *shstrtab(const void *f, size_t len)
{
	const Elf64_Ehdr *eh = f;
	const Elf64_Shdr *sh = (const void *)((const char *)f + eh->e_shoff);
	if (eh->e_shstrndx >= eh->e_shnum || !table_ok(&sh[eh->e_shstrndx], len, 1))
		return NULL;
	return &sh[eh->e_shstrndx];
}

/* is string at of table strsh (may be NULL) name */
static bool str_is(const void *f, const Elf64_Shdr *strsh, uint64_t at, const char *name)
{
	size_t n = strlen(name);
	return strsh && at < strsh->sh_size && strsh->sh_size - at > n &&
	       !memcmp((const char *)f + strsh->sh_offset + at, name, n + 1);
}

static const void *map_file(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	void *m = MAP_FAILED;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && st.st_size >= (off_t)sizeof(Elf64_Ehdr))
		m = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return NULL;
	const Elf64_Ehdr *eh = m;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shoff == 0 || eh->e_shoff % 8 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    !in_file(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), (size_t)st.st_size)) {
		munmap(m, st.st_size);
		return NULL;
	}
	*len = st.st_size;
	return m;
}

static const Elf64_Shdr *find_section(const void *f, size_t len, unsigned type,
				      const char *name)
{
	const Elf64_Ehdr *eh = f;
	const Elf64_Shdr *sh = (const void *)((const char *)f + eh->e_shoff);
	const Elf64_Shdr *shstr = shstrtab(f, len);
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		if (type && sh[i].sh_type != type)
			continue;
		if (name && !str_is(f, shstr, sh[i].sh_name, name))
			continue;
		return &sh[i];
	}
	return NULL;
}

static int cmp_addr(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;
	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	/* aliases: the global name first, then the one with a size */
	int bx = x->bind == STB_GLOBAL ? 0 : x->bind == STB_WEAK ? 1 : 2;
	int by = y->bind == STB_GLOBAL ? 0 : y->bind == STB_WEAK ? 1 : 2;
	if (bx != by)
		return bx - by;
	return (y->size > 0) - (x->size > 0);
}

/*
 * Names compare without their version: a separate debug file's .symtab
 * keeps it (fopen@@GLIBC_2.2.5, clock_nanosleep@GLIBC_2.2.5 and
 * clock_nanosleep@@GLIBC_2.17), while users name the function.  '@'
 * ends a name as its NUL does.
 */
static int name_cmp(const char *a, const char *b)
{
	for (;; a++, b++) {
		unsigned char x = *a == '@' ? 0 : (unsigned char)*a;
		unsigned char y = *b == '@' ? 0 : (unsigned char)*b;
		if (x != y || !x)
			return x - y;
	}
}

/* of names alike, the default version (@@, or none) first: what the
 * dynamic linker binds a new reference to */
static int version_rank(const char *n)
{
	const char *at = strchr(n, '@');
	return at && at[1] != '@';
}

static int cmp_name(const void *a, const void *b)
{
	const struct sym *x = *(struct sym *const *)a, *y = *(struct sym *const *)b;
	int c = name_cmp(x->name, y->name);
	if (c)
		return c;
	int bx = x->bind == STB_LOCAL, by = y->bind == STB_LOCAL;
	if (bx != by)
		return bx - by;
	return version_rank(x->name) - version_rank(y->name);
}

/* Appends the FUNC/IFUNC symbols of one symbol table. */
static void add_symtab(struct ukp_object *o, const void *f, size_t len,
		       const Elf64_Shdr *symsh)
{
	const Elf64_Ehdr *eh = f;
	const Elf64_Shdr *sh = (const void *)((const char *)f + eh->e_shoff);
	if (symsh->sh_link >= eh->e_shnum || !table_ok(symsh, len, 8))
		return;
	const Elf64_Shdr *strsh = &sh[symsh->sh_link];
	/* names are read up to their NUL: the table's last byte is one */
	if (!table_ok(strsh, len, 1) || !strsh->sh_size ||
	    ((const char *)f)[strsh->sh_offset + strsh->sh_size - 1])
		return;
	const Elf64_Sym *s = (const void *)((const char *)f + symsh->sh_offset);
	size_t n = symsh->sh_size / sizeof(*s);
	struct sym *v = realloc(o->syms, (o->nsyms + n) * sizeof(*v));
	if (!v)
		return;
	o->syms = v;
	char *str = malloc(strsh->sh_size);
	if (!str)
		return;
	memcpy(str, (const char *)f + strsh->sh_offset, strsh->sh_size);
	free(o->strs);
	o->strs = str;
	for (size_t i = 0; i < n; i++) {
		unsigned t = ELF64_ST_TYPE(s[i].st_info);
		/* a function wrapping past the top of the address space has
		 * no bounds to give the analysis */
		if ((t != STT_FUNC && t != STT_GNU_IFUNC) || s[i].st_shndx == SHN_UNDEF ||
		    !s[i].st_value || s[i].st_name >= strsh->sh_size ||
		    s[i].st_value > ULONG_MAX - o->bias ||
		    s[i].st_size >= ULONG_MAX - (s[i].st_value + o->bias))
			continue;
		v[o->nsyms++] = (struct sym){
			.addr = s[i].st_value + o->bias, .size = s[i].st_size,
			.name = str + s[i].st_name,
			.bind = ELF64_ST_BIND(s[i].st_info), .type = (unsigned char)t,
		};
	}
}

bool ukp_debug_path(const void *f, size_t len, char *path, size_t n)
{
	const Elf64_Shdr *nsh = find_section(f, len, SHT_NOTE, ".note.gnu.build-id");
	if (!nsh || !table_ok(nsh, len, 4) || nsh->sh_size < 16 || n < 256)
		return false;
	const Elf64_Nhdr *nh = (const void *)((const char *)f + nsh->sh_offset);
	uint64_t at = sizeof(*nh) + (((uint64_t)nh->n_namesz + 3) & ~3UL);
	if (nh->n_type != NT_GNU_BUILD_ID || nh->n_descsz < 2 || nh->n_descsz > 64 ||
	    !in_file(at, nh->n_descsz, nsh->sh_size))
		return false;
	const unsigned char *id = (const unsigned char *)nh + at;
	int k = snprintf(path, n, "/usr/lib/debug/.build-id/%02x/", id[0]);
	for (unsigned i = 1; i < nh->n_descsz; i++)
		k += snprintf(path + k, n - k, "%02x", id[i]);
	snprintf(path + k, n - k, ".debug");
	return true;
}

/* The separate debug file of a stripped object, by build-id. */
static const void *debug_file(const void *f, size_t len, size_t *dlen)
{
	char path[256];
	return ukp_debug_path(f, len, path, sizeof(path)) ? map_file(path, dlen) : NULL;
}

static const Elf64_Shdr *pick_symtab(const void *f, size_t len)
{
	const Elf64_Shdr *sh = find_section(f, len, SHT_SYMTAB, NULL);
	return sh && sh->sh_size > sizeof(Elf64_Sym) ? sh : NULL;
}

static void add_ref(struct ukp_object *o, unsigned long v, size_t *cap)
{
	if (v < o->exec.lo || v >= o->exec.hi)
		return;		/* data, or another object's */
	if (o->ncoderefs == *cap) {
		size_t nc = *cap ? 2 * *cap : 256;
		unsigned long *nv = realloc(o->coderefs, nc * sizeof(*nv));
		if (!nv) {
			o->refs_known = false;
			return;
		}
		o->coderefs = nv;
		*cap = nc;
	}
	o->coderefs[o->ncoderefs++] = v;
}

/*
 * The code addresses a position-independent object keeps in its data:
 * in such an object every pointer stored in data is made by a dynamic
 * relocation (RELATIVE, IRELATIVE, or 64 against one of its own
 * symbols; RELR for packed RELATIVE ones), and every one made by code by
 * a rip-relative lea, which the jump analysis decodes.  Knowing them all
 * lets it accept indirect jumps through pointers (tail calls): such a
 * jump can only land where one of these points.  A fixed-address
 * executable stores absolute addresses without relocations: not known.
 */
static void load_coderefs_locked(struct ukp_object *o, const void *f, size_t len)
{
	const Elf64_Ehdr *eh = f;
	const Elf64_Shdr *sh = (const void *)((const char *)f + eh->e_shoff);
	size_t cap = 0, read = 0;

	if (eh->e_type != ET_DYN)
		return;
	o->refs_known = true;
	for (unsigned i = 0; i < eh->e_shnum && o->refs_known; i++) {
		/* the tables of a sane file do not overlap: reading more than
		 * the file would only be one read again (and again) */
		if ((sh[i].sh_type == SHT_RELA || sh[i].sh_type == SHT_RELR) &&
		    (!table_ok(&sh[i], len, 8) || sh[i].sh_size > len - read)) {
			o->refs_known = false;
			break;
		}
		if (sh[i].sh_type == SHT_RELA) {
			read += sh[i].sh_size;
			if (sh[i].sh_entsize != sizeof(Elf64_Rela)) {
				o->refs_known = false;
				break;
			}
			const Elf64_Rela *r = (const void *)((const char *)f + sh[i].sh_offset);
			size_t n = sh[i].sh_size / sizeof(*r);
			const Elf64_Sym *syms = NULL;
			size_t nsyms = 0;
			if (sh[i].sh_link && sh[i].sh_link < eh->e_shnum &&
			    table_ok(&sh[sh[i].sh_link], len, 8)) {
				syms = (const void *)((const char *)f + sh[sh[i].sh_link].sh_offset);
				nsyms = sh[sh[i].sh_link].sh_size / sizeof(*syms);
			}
			for (size_t k = 0; k < n; k++) {
				unsigned t = ELF64_R_TYPE(r[k].r_info);
				size_t si = ELF64_R_SYM(r[k].r_info);
				if (t == R_X86_64_RELATIVE || t == R_X86_64_IRELATIVE)
					add_ref(o, o->bias + (unsigned long)r[k].r_addend, &cap);
				else if (t == R_X86_64_64 && si && si < nsyms &&
					 syms[si].st_shndx != SHN_UNDEF)
					add_ref(o, o->bias + syms[si].st_value +
						(unsigned long)r[k].r_addend, &cap);
			}
		} else if (sh[i].sh_type == SHT_RELR) {
			/* addresses and bitmaps of relocated words; the
			 * dynamic linker wrote the pointers in place: read
			 * them from memory */
			read += sh[i].sh_size;
			const Elf64_Relr *r = (const void *)((const char *)f + sh[i].sh_offset);
			size_t n = sh[i].sh_size / sizeof(*r);
			unsigned long where = 0;
			for (size_t k = 0; k < n && o->refs_known; k++) {
				unsigned long w;
				if (!(r[k] & 1)) {	/* an address */
					where = o->bias + r[k];
					if (ukp_copy_nofault(&w, (const void *)where, 8))
						o->refs_known = false;
					else
						add_ref(o, w, &cap);
					where += 8;
					continue;
				}
				for (unsigned b = 1; b < 64; b++) {	/* a bitmap */
					if (!((r[k] >> b) & 1))
						continue;
					if (ukp_copy_nofault(&w, (const void *)(where + 8 * (b - 1)), 8))
						o->refs_known = false;
					else
						add_ref(o, w, &cap);
				}
				where += 63 * 8;
			}
		}
	}
	if (!o->refs_known) {
		free(o->coderefs);
		o->coderefs = NULL;
		o->ncoderefs = 0;
	}
}

static void load_object_locked(struct ukp_object *o)
{
	size_t len = 0, dlen = 0;
	const void *f, *d = NULL;

	if (o->loaded)
		return;
	o->loaded = true;
	f = map_file(o->is_main ? "/proc/self/exe" : o->path, &len);
	if (!f)
		return;
	const Elf64_Shdr *st = pick_symtab(f, len);
	if (st) {
		add_symtab(o, f, len, st);
	} else if ((d = debug_file(f, len, &dlen)) && (st = pick_symtab(d, dlen))) {
		add_symtab(o, d, dlen, st);
	} else {
		const Elf64_Shdr *dyn = find_section(f, len, SHT_DYNSYM, NULL);
		if (dyn)
			add_symtab(o, f, len, dyn);
	}
	load_coderefs_locked(o, f, len);
	if (o->nsyms)	/* (o->syms may be NULL) */
		qsort(o->syms, o->nsyms, sizeof(*o->syms), cmp_addr);
	o->byname = malloc((o->nsyms + 1) * sizeof(*o->byname));
	if (o->byname) {
		for (size_t i = 0; i < o->nsyms; i++)
			o->byname[i] = &o->syms[i];
		qsort(o->byname, o->nsyms, sizeof(*o->byname), cmp_name);
	}
	/* NOKPROBE_SYMBOL(): the section holds relocated function pointers;
	 * read them from memory, where the dynamic linker relocated them,
	 * without faulting: a file replaced since it was loaded, or a
	 * hostile one, may say any address */
	const Elf64_Shdr *nk = find_section(f, len, 0, "ukp_nokprobe");
	if (nk && nk->sh_addr && in_file(nk->sh_offset, nk->sh_size, len)) {
		size_t n = nk->sh_size / sizeof(void *);
		unsigned long ptrs = nk->sh_addr + o->bias;
		o->nokprobe = calloc(n ? n : 1, sizeof(*o->nokprobe));
		for (size_t i = 0; o->nokprobe && i < n; i++) {
			unsigned long a;
			if (ukp_copy_nofault(&a, (const void *)(ptrs + i * sizeof(a)), sizeof(a)))
				break;
			struct range r = { a, a + 1 };
			for (size_t j = 0; j < o->nsyms; j++)
				if (o->syms[j].addr <= a && a < o->syms[j].addr + o->syms[j].size) {
					r.lo = o->syms[j].addr;
					r.hi = r.lo + o->syms[j].size;
					break;
				}
			o->nokprobe[o->nnokprobe++] = r;
		}
	}
	munmap((void *)f, len);
	if (d)
		munmap((void *)d, dlen);
}

/* ---- the list of objects --------------------------------------------- */

struct snap { char path[PATH_MAX]; unsigned long bias, eh_hdr; struct range exec; bool is_main; };
struct snap_vec { struct snap *v; size_t n, cap; unsigned long long adds, subs; };

static int snap_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct snap_vec *sv = arg;
	struct snap s = { .bias = info->dlpi_addr, .exec = { ~0UL, 0 } };
	(void)size;
	/* the same in every entry, of the list this walk sees */
	sv->adds = info->dlpi_adds;
	sv->subs = info->dlpi_subs;
	if (sv->n == 0) {
		s.is_main = true;	/* the first entry is the executable */
	} else if (!info->dlpi_name || !info->dlpi_name[0] ||
		   !strncmp(info->dlpi_name, "linux-vdso", 10)) {
		return 0;
	}
	snprintf(s.path, sizeof(s.path), "%s", s.is_main ? "" : info->dlpi_name);
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_GNU_EH_FRAME)
			s.eh_hdr = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		unsigned long lo = info->dlpi_addr + ph->p_vaddr;
		if (lo < s.exec.lo)
			s.exec.lo = lo;
		if (lo + ph->p_memsz > s.exec.hi)
			s.exec.hi = lo + ph->p_memsz;
	}
	if (sv->n == sv->cap) {
		size_t nc = sv->cap ? 2 * sv->cap : 32;
		struct snap *nv = realloc(sv->v, nc * sizeof(*nv));
		if (!nv)
			return 1;
		sv->v = nv;
		sv->cap = nc;
	}
	sv->v[sv->n++] = s;
	return 0;
}

static char main_path[PATH_MAX];

static int gen_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	unsigned long long *g = arg;
	(void)size;
	g[0] = info->dlpi_adds;
	g[1] = info->dlpi_subs;
	return 1;	/* the counters are the same in every entry: stop */
}

/* Snapshot (no lock held), then merge under sym_lock.  Skipped when the
 * dynamic linker's load/unload counters say nothing changed. */
void ukp_sym_refresh(void)
{
	static _Atomic unsigned long long seen_adds = ~0ULL, seen_subs = ~0ULL;
	unsigned long long g[2] = { 0, 0 };
	struct snap_vec sv = { 0 };

	pthread_rwlock_rdlock(&dl_calls);
	dl_iterate_phdr(gen_cb, g);
	if (g[0] == seen_adds && g[1] == seen_subs) {
		pthread_rwlock_unlock(&dl_calls);
		return;
	}
	dl_iterate_phdr(snap_cb, &sv);
	pthread_rwlock_unlock(&dl_calls);

	pthread_mutex_lock(&sym_lock);
	/* Two threads may refresh at once (one in the dynamic linker's
	 * hook, one registering): a snapshot older than the one merged last
	 * (the counters only grow) must not undo it, marking a new object
	 * missing or an unloaded one alive. */
	if (seen_adds != ~0ULL && sv.adds + sv.subs <= seen_adds + seen_subs) {
		pthread_mutex_unlock(&sym_lock);
		free(sv.v);
		return;
	}
	if (!main_path[0]) {
		ssize_t k = readlink("/proc/self/exe", main_path, sizeof(main_path) - 1);
		if (k > 0)
			main_path[k] = 0;
	}
	for (struct ukp_object *o = objects; o; o = o->next)
		o->alive = false;
	for (size_t i = 0; i < sv.n; i++) {
		struct ukp_object *o;
		for (o = objects; o; o = o->next)
			if (o->bias == sv.v[i].bias && o->is_main == sv.v[i].is_main &&
			    !strcmp(o->path, sv.v[i].is_main ? main_path : sv.v[i].path))
				break;
		if (!o) {
			o = calloc(1, sizeof(*o));
			if (!o)
				continue;
			o->is_main = sv.v[i].is_main;
			snprintf(o->path, sizeof(o->path), "%s",
				 o->is_main ? main_path : sv.v[i].path);
			const char *b = strrchr(o->path, '/');
			o->base = b ? b + 1 : o->path;
			o->bias = sv.v[i].bias;
			o->exec = sv.v[i].exec;
			o->eh_hdr = sv.v[i].eh_hdr;
			/* append: load order decides "func" lookups */
			struct ukp_object **pp = &objects;
			while (*pp)
				pp = &(*pp)->next;
			*pp = o;
		}
		o->alive = true;
	}
	seen_adds = sv.adds;
	seen_subs = sv.subs;
	pthread_mutex_unlock(&sym_lock);
	free(sv.v);
}

bool ukp_sym_object_alive(struct ukp_object *obj)
{
	return obj && obj->alive;
}

/* ---- lookups ---------------------------------------------------------- */

static const struct sym *sym_by_name_locked(struct ukp_object *o, const char *name)
{
	load_object_locked(o);
	size_t lo = 0, hi = o->nsyms;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = name_cmp(o->byname[mid]->name, name);
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < o->nsyms && !name_cmp(o->byname[lo]->name, name) ? o->byname[lo] : NULL;
}

static const struct sym *sym_by_addr_locked(struct ukp_object *o, unsigned long a)
{
	load_object_locked(o);
	/* last symbol starting at or below a */
	size_t lo = 0, hi = o->nsyms;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (o->syms[mid].addr <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* walk back over aliases and nested local symbols */
	for (size_t i = lo; i-- > 0;) {
		const struct sym *s = &o->syms[i];
		if (a >= s->addr && a < s->addr + (s->size ? s->size : 1)) {
			/* prefer the best-ranked alias at that address */
			while (i > 0 && o->syms[i - 1].addr == s->addr)
				s = &o->syms[--i];
			return s;
		}
		if (a - s->addr > (1UL << 24))
			break;
	}
	return NULL;
}

static struct ukp_object *object_of_locked(unsigned long a)
{
	for (struct ukp_object *o = objects; o; o = o->next)
		if (o->alive && a >= o->exec.lo && a < o->exec.hi)
			return o;
	return NULL;
}

static bool object_matches(const struct ukp_object *o, const char *name, size_t n)
{
	return (strlen(o->base) == n && !strncmp(o->base, name, n)) ||
	       (strlen(o->path) == n && !strncmp(o->path, name, n));
}

/* IFUNC: the implementation the dynamic linker chose, as calls reach it. */
static unsigned long resolve_ifunc(const char *path, bool is_main, const char *name)
{
	void *p = NULL;
	pthread_rwlock_rdlock(&dl_calls);
	void *h = dlopen(is_main ? NULL : path, RTLD_LAZY | RTLD_NOLOAD);
	if (h) {
		p = dlsym(h, name);
		dlclose(h);
	}
	pthread_rwlock_unlock(&dl_calls);
	return (unsigned long)p;
}

/* A bounded copy that calls nothing: registration runs it per probe, and
 * a user may have probed the C library's string functions. */
/* a symbol's name, without its version (name_cmp) */
static void copy_name(char *dst, const char *src, size_t n)
{
	size_t i = 0;
	for (; i + 1 < n && src[i] && src[i] != '@'; i++)
		dst[i] = src[i];
	dst[i] = 0;
}

static int sym_resolve(const char *spec, unsigned long *addr, bool quiet);

int ukp_sym_resolve(const char *spec, unsigned long *addr)
{
	return sym_resolve(spec, addr, false);
}

static int sym_resolve(const char *spec, unsigned long *addr, bool quiet)
{
	const char *colon = strchr(spec, ':');
	const char *name = colon ? colon + 1 : spec;
	size_t objlen = colon ? (size_t)(colon - spec) : 0;
	const struct sym *found = NULL;
	char path[PATH_MAX] = "";
	bool is_main = false, any_object = !colon;

	if (!*name || (colon && !objlen))
		return -EINVAL;
	ukp_sym_refresh();
	pthread_mutex_lock(&sym_lock);
	for (int pass = 0; pass < 2 && !found; pass++) {
		for (struct ukp_object *o = objects; o && !found; o = o->next) {
			if (!o->alive)
				continue;
			if (colon && !object_matches(o, spec, objlen))
				continue;
			any_object = true;
			const struct sym *s = sym_by_name_locked(o, name);
			/* pass 0: global/weak only, pass 1: locals too */
			if (s && (pass == 1 || s->bind != STB_LOCAL)) {
				found = s;
				copy_name(path, o->path, sizeof(path));
				is_main = o->is_main;
			}
		}
	}
	unsigned long a = found ? found->addr : 0;
	bool ifunc = found && found->type == STT_GNU_IFUNC;
	pthread_mutex_unlock(&sym_lock);
	if (!any_object) {
		if (!quiet)
			ukp_log("symbol '%s': no loaded object '%.*s'", spec, (int)objlen, spec);
		return -ENOENT;
	}
	if (!found) {
		if (!quiet)
			ukp_log("symbol '%s': not found", spec);
		return -ENOENT;
	}
	if (ifunc) {
		unsigned long impl = resolve_ifunc(path, is_main, name);
		if (impl)
			a = impl;
	}
	*addr = a;
	return 0;
}

int ukp_sym_where(unsigned long addr, struct ukp_where *w)
{
	memset(w, 0, sizeof(*w));
	pthread_mutex_lock(&sym_lock);
	struct ukp_object *o = object_of_locked(addr);
	if (!o) {
		pthread_mutex_unlock(&sym_lock);
		return -ENOENT;
	}
	w->obj = o;
	copy_name(w->object, o->is_main ? "" : o->base, sizeof(w->object));
	const struct sym *s = sym_by_addr_locked(o, addr);
	if (s) {
		w->func_start = s->addr;
		w->func_end = s->addr + s->size;
		copy_name(w->func, s->name, sizeof(w->func));
	}
	pthread_mutex_unlock(&sym_lock);
	return 0;
}

int ukp_sym_object_desc(struct ukp_object *o, struct ukp_objdesc *d)
{
	memset(d, 0, sizeof(*d));
	if (!o)
		return -ENOENT;
	pthread_mutex_lock(&sym_lock);
	load_object_locked(o);
	d->key = o;
	d->exec_lo = o->exec.lo;
	d->exec_hi = o->exec.hi;
	d->eh_hdr = o->eh_hdr;
	d->coderefs = o->coderefs;	/* objects are never freed */
	d->ncoderefs = o->ncoderefs;
	d->refs_known = o->refs_known;
	d->funcs = malloc((o->nsyms + 1) * sizeof(*d->funcs));
	for (size_t i = 0; d->funcs && i < o->nsyms; i++) {
		const struct sym *s = &o->syms[i];
		/* size 0 (_init, _fini, asm labels): at least its first byte */
		unsigned long hi = s->addr + (s->size ? s->size : 1);
		if (d->nfuncs && d->funcs[d->nfuncs - 1].lo == s->addr &&
		    d->funcs[d->nfuncs - 1].hi == hi)
			continue;	/* aliases once */
		d->funcs[d->nfuncs++] = (struct ukp_range){ s->addr, hi };
	}
	pthread_mutex_unlock(&sym_lock);
	return d->funcs ? 0 : -ENOMEM;
}

bool ukp_sym_blacklisted(unsigned long a, const char **why)
{
	bool bl = false;
	if ((a >= self_range.lo && a < self_range.hi) ||
	    (__start_ukp_text && a >= (unsigned long)__start_ukp_text &&
	     a < (unsigned long)__stop_ukp_text)) {
		*why = "ukprobes' own code";
		return true;
	}
	for (unsigned i = 0; i < nextra; i++)
		if (a >= extra_bl[i].lo && a < extra_bl[i].hi) {
			*why = extra_bl_why[i];
			return true;
		}
	pthread_mutex_lock(&sym_lock);
	struct ukp_object *o = object_of_locked(a);
	if (o) {
		load_object_locked(o);
		for (size_t i = 0; i < o->nnokprobe && !bl; i++)
			if (a >= o->nokprobe[i].lo && a < o->nokprobe[i].hi) {
				*why = "NOKPROBE_SYMBOL";
				bl = true;
			}
	}
	pthread_mutex_unlock(&sym_lock);
	return bl;
}

static void blacklist_function(unsigned long a, const char *why)
{
	struct ukp_where w;
	if (!a || nextra >= sizeof(extra_bl) / sizeof(extra_bl[0]))
		return;
	struct range r = { a, a + 16 };
	if (ukp_sym_where(a, &w) == 0 && w.func_start && w.func_end > w.func_start) {
		r.lo = w.func_start;
		r.hi = w.func_end;
	}
	extra_bl_why[nextra] = why;
	extra_bl[nextra++] = r;
}

/* dl_iterate_phdr for the rest of the library: under the fork guard */
int ukp_dl_iterate(int (*cb)(struct dl_phdr_info *, size_t, void *), void *arg)
{
	pthread_rwlock_rdlock(&dl_calls);
	int r = dl_iterate_phdr(cb, arg);
	pthread_rwlock_unlock(&dl_calls);
	return r;
}

/* fork(): the child must not inherit the lock held by another thread */
void ukp_sym_fork_prepare_dl(void) { pthread_rwlock_wrlock(&dl_calls); }
void ukp_sym_fork_prepare(void) { pthread_mutex_lock(&sym_lock); }
void ukp_sym_fork_parent(void)
{
	pthread_mutex_unlock(&sym_lock);
	pthread_rwlock_unlock(&dl_calls);
}
void ukp_sym_fork_child(void)
{
	pthread_mutex_init(&sym_lock, NULL);
	pthread_rwlock_init(&dl_calls, NULL);
}

/* Called once, with no lock held. */
void ukp_sym_init(void)
{
	Dl_info di;
	struct sigaction sa;

	ukp_sym_refresh();
	/* ukprobes itself: its whole object when it is a shared library */
	if (dladdr((void *)register_kprobe, &di) && di.dli_fbase) {
		pthread_mutex_lock(&sym_lock);
		for (struct ukp_object *o = objects; o; o = o->next)
			if (o->alive && !o->is_main && o->bias == (unsigned long)di.dli_fbase)
				self_range = o->exec;
		pthread_mutex_unlock(&sym_lock);
	}
	/* the signal return trampoline our handlers return through */
	if (sigaction(SIGTRAP, NULL, &sa) == 0)
		blacklist_function((unsigned long)sa.sa_restorer, "the signal return trampoline");
	/* what the trap path calls outside ukp_text */
	blacklist_function((unsigned long)dlsym(RTLD_DEFAULT, "__errno_location"),
			   "called on the trap path");
	/* glibc's posix_spawn (system, popen) child runs in our memory with
	 * every signal blocked and then every handler reset to the default:
	 * a breakpoint in what it runs kills the child with SIGTRAP.  (Its
	 * internal functions are found where libc6-dbg's symbols are.) */
	static const char *const spawn_fns[] = {
		"libc.so.6:__spawni_child", "libc.so.6:__libc_sigaction",
		"libc.so.6:sigprocmask", "libc.so.6:pthread_sigmask",
		"libc.so.6:dup2", "libc.so.6:execve", "libc.so.6:execveat",
		"libc.so.6:fexecve",
	};
	for (size_t i = 0; i < sizeof(spawn_fns) / sizeof(spawn_fns[0]); i++) {
		unsigned long a;
		if (sym_resolve(spawn_fns[i], &a, true) == 0)
			blacklist_function(a, "runs in posix_spawn children with signals "
					      "blocked or handlers reset");
	}
}

/* ---- ftrace patch sites ------------------------------------------------ */

/* The objects mapped now (ftrace.c), in load order. */
size_t ukp_sym_objects(struct ukp_object ***out)
{
	size_t n = 0, k = 0;
	pthread_mutex_lock(&sym_lock);
	for (struct ukp_object *o = objects; o; o = o->next)
		n += o->alive;
	*out = malloc((n + 1) * sizeof(**out));
	for (struct ukp_object *o = objects; *out && o; o = o->next)
		if (o->alive)
			(*out)[k++] = o;
	pthread_mutex_unlock(&sym_lock);
	return *out ? k : 0;
}

const char *ukp_sym_object_name(struct ukp_object *o, bool *is_main)
{
	*is_main = o->is_main;
	return o->base;
}

/*
 * The function entries the compiler recorded: __mcount_loc (-pg -mfentry
 * -mrecord-mcount) and __patchable_function_entries
 * (-fpatchable-function-entry).  Both hold one 8-byte address per entry;
 * in a position-independent object each is a RELATIVE relocation whose
 * addend the linker also wrote in place, so the file says where, before
 * the dynamic linker has relocated anything.  Returns run-time addresses
 * (malloc'd), each tagged with its section (UKP_PS_*).
 */
int ukp_sym_patch_sites(struct ukp_object *o, unsigned long **addrs, uint8_t **from, size_t *n)
{
	static const char *const secs[2] = { "__mcount_loc", "__patchable_function_entries" };
	size_t len = 0, cap = 0;
	*addrs = NULL;
	*from = NULL;
	*n = 0;
	const void *f = map_file(o->is_main ? "/proc/self/exe" : o->path, &len);
	if (!f)
		return -ENOENT;
	const Elf64_Ehdr *eh = f;
	const Elf64_Shdr *sh = (const void *)((const char *)f + eh->e_shoff);
	const Elf64_Shdr *shstr = shstrtab(f, len);
	unsigned long bias = eh->e_type == ET_DYN ? o->bias : 0;
	bool seen[2] = { false, false };
	int err = 0;
	for (unsigned i = 0; shstr && i < eh->e_shnum && !err; i++) {
		for (unsigned k = 0; k < 2; k++) {
			/* one section of each name (a second would be read
			 * as many times as it is named) */
			if (seen[k] || !str_is(f, shstr, sh[i].sh_name, secs[k]) ||
			    sh[i].sh_type != SHT_PROGBITS || !table_ok(&sh[i], len, 8))
				continue;
			seen[k] = true;
			const uint64_t *v = (const void *)((const char *)f + sh[i].sh_offset);
			size_t m = sh[i].sh_size / 8;
			if (*n + m > cap) {
				cap = *n + m;
				unsigned long *na = realloc(*addrs, cap * sizeof(*na));
				uint8_t *nf = realloc(*from, cap);
				if (na)
					*addrs = na;
				if (nf)
					*from = nf;
				if (!na || !nf) {
					err = -ENOMEM;
					break;
				}
			}
			for (size_t j = 0; j < m; j++) {
				if (!v[j])
					continue;	/* a discarded function's entry */
				(*addrs)[*n] = v[j] + bias;
				(*from)[(*n)++] = (uint8_t)k;
			}
		}
	}
	munmap((void *)f, len);
	return err;
}
