/* SPDX-License-Identifier: MIT */
/*
 * A library's ELF file read from disk (elffile.h).  The file may be
 * anything a user names: every header, table and string is checked
 * against the file's size before it is read.
 */
#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include "internal.h"
#include "elffile.h"

/* st_value of name in the ELF file at path (its symbol table, then its
 * dynamic one), or -ENOENT and, where it has one, the path of its debug
 * file in dbg (dbg may be NULL) */
static int sym_in(const char *path, const char *name, unsigned long *value,
		  char *dbg, size_t dn)
{
	if (dbg)
		dbg[0] = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = -ENOENT;
	struct stat st;
	if (fd < 0)
		return -ENOENT;
	if (fstat(fd, &st) || (size_t)st.st_size < sizeof(Elf64_Ehdr)) {
		close(fd);
		return -ENOENT;
	}
	size_t size = (size_t)st.st_size;
	const uint8_t *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -ENOENT;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)(const void *)m;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > size || eh->e_shoff % 8 ||
	    (size - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum)
		goto out;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(const void *)(m + eh->e_shoff);
	for (int pass = 0; pass < 2 && err; pass++) {
		unsigned type = pass ? SHT_DYNSYM : SHT_SYMTAB;
		for (unsigned i = 0; i < eh->e_shnum && err; i++) {
			if (sh[i].sh_type != type || sh[i].sh_link >= eh->e_shnum ||
			    sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset ||
			    sh[i].sh_offset % 8)
				continue;
			const Elf64_Shdr *ss = &sh[sh[i].sh_link];
			if (ss->sh_offset > size || ss->sh_size > size - ss->sh_offset)
				continue;
			const char *str = (const char *)m + ss->sh_offset;
			const Elf64_Sym *sym = (const Elf64_Sym *)(const void *)(m + sh[i].sh_offset);
			size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
			for (size_t k = 0; k < n; k++) {
				unsigned t = ELF64_ST_TYPE(sym[k].st_info);
				if (sym[k].st_shndx == SHN_UNDEF || sym[k].st_name >= ss->sh_size ||
				    (t != STT_OBJECT && t != STT_FUNC && t != STT_NOTYPE &&
				     t != STT_COMMON))
					continue;
				const char *nm = str + sym[k].st_name;
				size_t left = ss->sh_size - sym[k].st_name;
				if (strnlen(nm, left) < left && !strcmp(nm, name)) {
					*value = sym[k].st_value;
					err = 0;
					break;
				}
			}
		}
	}
	if (err && dbg && !ukp_debug_path(m, size, dbg, dn))
		dbg[0] = 0;
out:
	munmap((void *)m, size);
	return err;
}

/* st_value of a defined data or function symbol name in the ELF file at
 * path: its symbol table, then its dynamic one, then the symbol table of
 * its debug file found by build-id (a stripped program's static data:
 * Debian's -dbg packages).  0, or -ENOENT. */
int ev_elf_sym(const char *path, const char *name, unsigned long *value)
{
	char dbg[256];
	int err = sym_in(path, name, value, dbg, sizeof(dbg));
	if (err && dbg[0])
		err = sym_in(dbg, name, value, NULL, 0);
	return err;
}

/* a segment the dynamic linker could map: inside the file, not wrapping
 * the address space */
static bool seg_ok(const Elf64_Phdr *ph, const struct stat *st)
{
	return ph->p_offset <= (uint64_t)st->st_size &&
	       ph->p_filesz <= (uint64_t)st->st_size - ph->p_offset &&
	       ph->p_memsz <= UINT64_MAX - ph->p_vaddr;
}

int ev_elf_place(const char *path, const char *sym, unsigned long offs,
		 struct ev_elf_place *out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), code = EV_ELF_NOT_LIB;
	struct stat st;
	Elf64_Ehdr eh;
	Elf64_Phdr ph[64];
	if (fd < 0)
		return code;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) ||
	    pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_machine != EM_X86_64 || eh.e_type != ET_DYN ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || !eh.e_phnum ||
	    eh.e_phnum > sizeof(ph) / sizeof(ph[0]) ||
	    pread(fd, ph, eh.e_phnum * sizeof(ph[0]), (off_t)eh.e_phoff) !=
		    (ssize_t)(eh.e_phnum * sizeof(ph[0])))
		goto out;
	/* a position-independent executable cannot be dlopen'ed (and one
	 * the program execs runs untraced): only libraries wait */
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		if (ph[i].p_type != PT_DYNAMIC)
			continue;
		Elf64_Dyn dyn[128];
		size_t n = ph[i].p_filesz / sizeof(dyn[0]);
		if (n > sizeof(dyn) / sizeof(dyn[0]))
			n = sizeof(dyn) / sizeof(dyn[0]);
		ssize_t got = pread(fd, dyn, n * sizeof(dyn[0]), (off_t)ph[i].p_offset);
		for (size_t k = 0; got > 0 && k < (size_t)got / sizeof(dyn[0]) &&
				   dyn[k].d_tag != DT_NULL; k++)
			if (dyn[k].d_tag == DT_FLAGS_1 && (dyn[k].d_un.d_val & DF_1_PIE))
				goto out;
	}
	unsigned long vaddr = 0;
	if (!sym) {
		code = EV_ELF_BAD_OFFS;
		bool in = false;
		for (unsigned i = 0; i < eh.e_phnum && !in; i++)
			if (ph[i].p_type == PT_LOAD && seg_ok(&ph[i], &st) &&
			    offs >= ph[i].p_offset && offs - ph[i].p_offset < ph[i].p_filesz) {
				vaddr = ph[i].p_vaddr + (offs - ph[i].p_offset);
				in = true;
			}
		if (!in)
			goto out;
	} else {
		code = EV_ELF_NO_SYM;
		if (ev_elf_sym(path, sym, &vaddr))
			goto out;
		vaddr += offs;
	}
	/* code, not data */
	code = EV_ELF_NOT_CODE;
	for (unsigned i = 0; i < eh.e_phnum && code; i++)
		if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X) && seg_ok(&ph[i], &st) &&
		    vaddr >= ph[i].p_vaddr && vaddr - ph[i].p_vaddr < ph[i].p_memsz)
			code = 0;
	out->vaddr = vaddr;
	out->dev = st.st_dev;
	out->ino = st.st_ino;
out:
	close(fd);
	return code;
}
