/* SPDX-License-Identifier: MIT */
/* Reading ELF files of the target: symbols, and what the injector needs. */
#ifndef UKPROBE_ELF_H
#define UKPROBE_ELF_H
#include <stddef.h>
#include <stdint.h>

struct elf_sym {
	uint64_t value;		/* st_value (link-time address) */
	uint64_t size;		/* ELF size, or the distance to the next */
	const char *name;
	int rank;		/* 0 global, 1 weak, 2 local */
};

struct elf_file {
	char *path;
	int is_dyn;		/* ET_DYN: loaded at a base */
	int has_interp;		/* PT_INTERP: dynamically linked */
	uint64_t first_vaddr;	/* p_vaddr - p_offset of the first PT_LOAD */
	struct elf_sym *syms;	/* functions and objects, sorted by value */
	size_t nsyms;
	char *strs;		/* the names' storage */
};

/* 0, or -errno; dynsym_only: only .dynsym (what the injector needs) */
int elf_open(const char *path, int dynsym_only, struct elf_file *out);
void elf_close(struct elf_file *f);
/* the symbol containing link-time address v, or NULL */
const struct elf_sym *elf_lookup(const struct elf_file *f, uint64_t v);
/* a symbol by name (the first defined one) */
const struct elf_sym *elf_find(const struct elf_file *f, const char *name);
/* the file offset of link-time address v (through the PT_LOAD headers),
 * or UINT64_MAX */
uint64_t elf_vaddr_to_off(const char *path, uint64_t v);
#endif
