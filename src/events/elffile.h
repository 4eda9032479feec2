/* SPDX-License-Identifier: MIT */
/*
 * A library's ELF file read from disk, loaded or not: the places of
 * deferred events, and symbols the dynamic linker does not export.  A
 * narrow interface of its own so that the ELF fuzzer (fuzz/elf_fuzz.c)
 * reaches the reading without the rest of the events core.
 */
#ifndef UKP_EV_ELFFILE_H
#define UKP_EV_ELFFILE_H

/* st_value of a defined data or function symbol name in the ELF file at
 * path: its symbol table, then its dynamic one, then its debug file's
 * (found by build-id).  0, or -ENOENT. */
int ev_elf_sym(const char *path, const char *name, unsigned long *value);

/* why a place is not in a file */
enum {
	EV_ELF_NOT_LIB = 1,	/* no file, not an x86-64 shared library */
	EV_ELF_NO_SYM,		/* the symbol is in neither table */
	EV_ELF_BAD_OFFS,	/* the file offset is in no loaded segment */
	EV_ELF_NOT_CODE,	/* the place is not in an executable segment */
};

struct ev_elf_place {
	unsigned long vaddr;	/* link-time address of the place */
	unsigned long dev, ino;	/* the file's identity */
};

/* Where a place lies in the shared library at path: sym + offs when sym
 * is not NULL, else file offset offs.  0 (*out filled) or EV_ELF_*. */
int ev_elf_place(const char *path, const char *sym, unsigned long offs,
		 struct ev_elf_place *out);
#endif
