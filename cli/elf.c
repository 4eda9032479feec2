/* SPDX-License-Identifier: MIT */
/*
 * ELF symbol tables of the target's objects: .symtab where the file has
 * one, else .dynsym; function and data symbols sorted by address, each
 * with its size or, where that is 0, the distance to the next symbol.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elf.h"

static int cmp_sym(const void *a, const void *b)
{
	const struct elf_sym *x = a, *y = b;
	if (x->value != y->value)
		return x->value < y->value ? -1 : 1;
	/* at one address, the name a person would call it by: sized, then
	 * fewest leading underscores (malloc, not __libc_malloc), global
	 * before weak before local, shortest */
	if ((x->size == 0) != (y->size == 0))
		return x->size == 0 ? 1 : -1;
	size_t ux = strspn(x->name, "_"), uy = strspn(y->name, "_");
	if (ux != uy)
		return ux < uy ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	size_t lx = strlen(x->name), ly = strlen(y->name);
	if (lx != ly)
		return lx < ly ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int map_file(const char *path, const unsigned char **m, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		return -ENOEXEC;
	}
	void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -errno;
	*m = p;
	*len = (size_t)st.st_size;
	return 0;
}

/* A file may be anything a user names: every table read lies whole
 * inside it (overflow-safe), aligned for its entries. */
static int in_file(uint64_t off, uint64_t size, size_t len)
{
	return off <= len && size <= len - off;
}

static int table_ok(const Elf64_Shdr *sh, size_t len, size_t align)
{
	return in_file(sh->sh_offset, sh->sh_size, len) && sh->sh_offset % align == 0;
}

static int valid(const unsigned char *m, size_t len)
{
	const Elf64_Ehdr *eh = (const void *)m;
	return !memcmp(eh->e_ident, ELFMAG, SELFMAG) &&
	       eh->e_ident[EI_CLASS] == ELFCLASS64 &&
	       (!eh->e_phnum || eh->e_phentsize == sizeof(Elf64_Phdr)) &&
	       (!eh->e_shnum || eh->e_shentsize == sizeof(Elf64_Shdr)) &&
	       eh->e_phoff % 8 == 0 && eh->e_shoff % 8 == 0 &&
	       in_file(eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr), len) &&
	       in_file(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), len);
}

/* The separate debug file of the ELF image m: /usr/lib/debug/.build-id/
 * xx/yyyy.debug from its NT_GNU_BUILD_ID note, mapped; 0 or -errno. */
static int debug_file(const unsigned char *m, size_t len, const unsigned char **dm, size_t *dlen)
{
	const Elf64_Ehdr *eh = (const void *)m;
	const Elf64_Phdr *ph = (const void *)(m + eh->e_phoff);
	for (int k = 0; k < eh->e_phnum; k++) {
		if (ph[k].p_type != PT_NOTE || !in_file(ph[k].p_offset, ph[k].p_filesz, len) ||
		    ph[k].p_offset % 4)
			continue;
		const unsigned char *notes = m + ph[k].p_offset;
		uint64_t at = 0, size = ph[k].p_filesz;
		while (size - at >= sizeof(Elf64_Nhdr)) {
			const Elf64_Nhdr *nh = (const void *)(notes + at);
			const unsigned char *name = notes + at + sizeof *nh;
			uint64_t dat = at + sizeof *nh + (((uint64_t)nh->n_namesz + 3) & ~3ul);
			if (!in_file(dat, nh->n_descsz, size))
				break;
			const unsigned char *desc = notes + dat;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
			    !memcmp(name, "GNU", 4) && nh->n_descsz >= 2 && nh->n_descsz <= 64) {
				char path[256];
				int o = snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%02x/", desc[0]);
				for (unsigned i = 1; i < nh->n_descsz; i++)
					o += snprintf(path + o, sizeof path - (size_t)o, "%02x", desc[i]);
				snprintf(path + o, sizeof path - (size_t)o, ".debug");
				if (map_file(path, dm, dlen) < 0)
					return -ENOENT;
				if (!valid(*dm, *dlen)) {
					munmap((void *)*dm, *dlen);
					return -ENOEXEC;
				}
				return 0;
			}
			at = dat + (((uint64_t)nh->n_descsz + 3) & ~3ul);
			if (at > size)
				break;
		}
	}
	return -ENOENT;
}

int elf_open(const char *path, int dynsym_only, struct elf_file *f)
{
	const unsigned char *m;
	size_t len;
	memset(f, 0, sizeof *f);
	int r = map_file(path, &m, &len);
	if (r < 0)
		return r;
	if (!valid(m, len)) {
		munmap((void *)m, len);
		return -ENOEXEC;
	}
	const Elf64_Ehdr *eh = (const void *)m;
	const Elf64_Phdr *ph = (const void *)(m + eh->e_phoff);
	const Elf64_Shdr *sh = (const void *)(m + eh->e_shoff);
	int first = 1;
	f->is_dyn = eh->e_type == ET_DYN;
	for (int k = 0; k < eh->e_phnum; k++) {
		if (ph[k].p_type == PT_INTERP)
			f->has_interp = 1;
		if (ph[k].p_type == PT_LOAD && first) {
			f->first_vaddr = ph[k].p_vaddr - ph[k].p_offset;
			first = 0;
		}
	}
	/* .symtab if there is one (more names), else that of the separate
	 * debug file found by build-id (Debian's -dbg packages: libc's own
	 * functions), else .dynsym */
	const Elf64_Shdr *tab = NULL;
	const unsigned char *dm = NULL;
	size_t dlen = 0;
	for (int pass = 0; pass < 2 && !tab; pass++) {
		for (int k = 0; k < eh->e_shnum; k++) {
			uint32_t want = pass == 0 && !dynsym_only ? SHT_SYMTAB : SHT_DYNSYM;
			if (sh[k].sh_type == want && sh[k].sh_link < eh->e_shnum &&
			    table_ok(&sh[k], len, 8) && table_ok(&sh[sh[k].sh_link], len, 1)) {
				tab = &sh[k];
				break;
			}
		}
		if (pass == 0 && !tab && !dynsym_only && debug_file(m, len, &dm, &dlen) == 0) {
			const Elf64_Ehdr *de = (const void *)dm;
			const Elf64_Shdr *ds = (const void *)(dm + de->e_shoff);
			for (int k = 0; k < de->e_shnum && !tab; k++)
				if (ds[k].sh_type == SHT_SYMTAB && ds[k].sh_link < de->e_shnum &&
				    table_ok(&ds[k], dlen, 8) && table_ok(&ds[ds[k].sh_link], dlen, 1))
					tab = &ds[k];
			if (tab) {	/* its names come from the debug file */
				munmap((void *)m, len);
				m = dm;
				len = dlen;
				eh = (const void *)m;
				sh = (const void *)(m + eh->e_shoff);
			} else {
				munmap((void *)dm, dlen);
			}
		}
	}
	if (tab) {
		const Elf64_Shdr *st = &sh[tab->sh_link];
		const Elf64_Sym *s = (const void *)(m + tab->sh_offset);
		size_t n = tab->sh_size / sizeof *s;
		f->syms = calloc(n + 1, sizeof *f->syms);
		f->strs = malloc(st->sh_size + 1);
		if (!f->syms || !f->strs) {
			munmap((void *)m, len);
			elf_close(f);
			return -ENOMEM;
		}
		memcpy(f->strs, m + st->sh_offset, st->sh_size);
		f->strs[st->sh_size] = 0;
		/* a debug file's names may carry their version (fdopen@@GLIBC_2.2.5):
		 * the name is what comes before */
		for (size_t k = 0; k < st->sh_size; k++)
			if (f->strs[k] == '@' && k && f->strs[k - 1])
				while (k < st->sh_size && f->strs[k])
					f->strs[k++] = 0;
		for (size_t k = 0; k < n; k++) {
			int type = ELF64_ST_TYPE(s[k].st_info);
			if ((type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_OBJECT) ||
			    s[k].st_shndx == SHN_UNDEF || s[k].st_name >= st->sh_size ||
			    !f->strs[s[k].st_name])
				continue;
			int bind = ELF64_ST_BIND(s[k].st_info);
			f->syms[f->nsyms++] = (struct elf_sym){
				s[k].st_value, s[k].st_size, f->strs + s[k].st_name,
				bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2 };
		}
		qsort(f->syms, f->nsyms, sizeof *f->syms, cmp_sym);
		/* a size of 0: the distance to the next symbol */
		for (size_t k = 0; k < f->nsyms; k++)
			if (!f->syms[k].size) {
				size_t j = k + 1;
				while (j < f->nsyms && f->syms[j].value == f->syms[k].value)
					j++;
				if (j < f->nsyms)
					f->syms[k].size = f->syms[j].value - f->syms[k].value;
			}
	}
	munmap((void *)m, len);
	f->path = strdup(path);
	return 0;
}

void elf_close(struct elf_file *f)
{
	free(f->syms);
	free(f->strs);
	free(f->path);
	memset(f, 0, sizeof *f);
}

const struct elf_sym *elf_lookup(const struct elf_file *f, uint64_t v)
{
	size_t lo = 0, hi = f->nsyms;
	while (lo < hi) {	/* the last symbol with value <= v */
		size_t mid = (lo + hi) / 2;
		if (f->syms[mid].value <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* walk back over the ones at this address and those ending before */
	for (size_t k = lo; k-- > 0;) {
		const struct elf_sym *s = &f->syms[k];
		if (v < s->value + (s->size ? s->size : 1))
		{
			/* prefer the first (sized) one at that address */
			while (k > 0 && f->syms[k - 1].value == s->value)
				s = &f->syms[--k];
			return s;
		}
		if (lo - k > 64)
			break;
	}
	return NULL;
}

const struct elf_sym *elf_find(const struct elf_file *f, const char *name)
{
	for (size_t k = 0; k < f->nsyms; k++)
		if (!strcmp(f->syms[k].name, name))
			return &f->syms[k];
	return NULL;
}

uint64_t elf_vaddr_to_off(const char *path, uint64_t v)
{
	const unsigned char *m;
	size_t len;
	uint64_t off = UINT64_MAX;
	if (map_file(path, &m, &len) < 0)
		return off;
	if (valid(m, len)) {
		const Elf64_Ehdr *eh = (const void *)m;
		const Elf64_Phdr *ph = (const void *)(m + eh->e_phoff);
		for (int k = 0; k < eh->e_phnum; k++)
			if (ph[k].p_type == PT_LOAD && v >= ph[k].p_vaddr &&
			    v < ph[k].p_vaddr + ph[k].p_memsz)
				off = v - ph[k].p_vaddr + ph[k].p_offset;
	}
	munmap((void *)m, len);
	return off;
}
