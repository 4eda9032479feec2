/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for every reader of ELF files: ukprobe's symbol reader
 * (cli/elf.c), the engine's (src/symbols.c, included whole: it runs inside
 * the traced program, its reading is static), and the events core's
 * reading of a library's file (src/events/elffile.c: deferred places,
 * unexported symbols).  An input is a file; each reader opens it, looks
 * up symbols by name and by address, walks what it found, and closes it.
 * Nothing may crash, leak, hang or read outside the file.
 *
 * The readers map files; mk/events.mk compiles them with mmap and munmap
 * renamed to fz_mmap and fz_munmap below, which hand out a malloc'd copy
 * of exactly the bytes mapped: ASan then sees a read even one byte past
 * the end of the file (a real mapping is rounded up to a page of zeros).
 * What the engine reads from the object's memory (relocated pointers:
 * ukp_copy_nofault) comes from the input as if it were loaded at BIAS.
 */
#include "../src/symbols.c"
#include "../cli/elf.h"
#include "../src/events/elffile.h"

#define BIAS 0x7f0000000000UL

/* ---- the readers' mappings --------------------------------------------- */

static struct { void *p; size_t len; } maps[64];

void *fz_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int fz_munmap(void *addr, size_t len);

void *fz_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	(void)addr;
	if (prot != PROT_READ || !(flags & MAP_PRIVATE) || (flags & MAP_ANONYMOUS) || off)
		abort();	/* the readers only map files, whole, to read */
	unsigned k = 0;
	while (k < sizeof(maps) / sizeof(maps[0]) && maps[k].p)
		k++;
	if (k == sizeof(maps) / sizeof(maps[0]))
		abort();	/* mappings pile up: one is never unmapped */
	char *p = malloc(len ? len : 1);
	if (!p)
		return MAP_FAILED;
	size_t got = 0;
	while (got < len) {
		ssize_t r = pread(fd, p + got, len - got, (off_t)got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	memset(p + got, 0, len - got);
	maps[k].p = p;
	maps[k].len = len;
	return p;
}

int fz_munmap(void *addr, size_t len)
{
	for (unsigned k = 0; k < sizeof(maps) / sizeof(maps[0]); k++)
		if (maps[k].p == addr) {
			if (maps[k].len != len)
				abort();
			free(addr);
			maps[k].p = NULL;
			return 0;
		}
	abort();	/* not one of ours */
}

/* every reader unmaps what it mapped */
static void check_unmapped(void)
{
	for (unsigned k = 0; k < sizeof(maps) / sizeof(maps[0]); k++)
		if (maps[k].p)
			abort();
}

/* ---- what src/symbols.c calls ------------------------------------------ */

static const uint8_t *image;
static size_t image_len;

long ukp_copy_nofault(void *dst, const void *src, size_t n)
{
	unsigned long a = (unsigned long)src;
	if (a < BIAS || a - BIAS > image_len || n > image_len - (a - BIAS))
		return -EFAULT;
	memcpy(dst, image + (a - BIAS), n);
	return 0;
}

/* what the engine would log on a failed lookup */
void ukp_log(const char *fmt, ...)
{
	(void)fmt;
}

/* ukp_sym_init() takes its address; never called here */
int register_kprobe(struct kprobe *p)
{
	(void)p;
	return -ENOSYS;
}

/* ---- the readers -------------------------------------------------------- */

static void cli_reader(const char *path, uint64_t entry, char names[4][64])
{
	for (int dyn = 0; dyn < 2; dyn++) {
		struct elf_file f;
		if (elf_open(path, dyn, &f))
			continue;
		for (size_t k = 0; k < f.nsyms && k < 256; k++) {
			const struct elf_sym *s = &f.syms[k];
			if (!s->name || !elf_find(&f, s->name))
				abort();
			if (k < 4)
				snprintf(names[k], sizeof(names[k]), "%s", s->name);
			(void)elf_lookup(&f, s->value);
			(void)elf_lookup(&f, s->value + s->size - 1);
			if (k < 8)	/* (it maps the file again) */
				(void)elf_vaddr_to_off(path, s->value);
		}
		(void)elf_lookup(&f, entry);
		(void)elf_find(&f, "main");
		elf_close(&f);
	}
	(void)elf_vaddr_to_off(path, entry);
}

static void event_reader(const char *path, uint64_t entry, char names[4][64])
{
	unsigned long v;
	struct ev_elf_place pl;
	for (int k = 0; k < 4; k++) {
		(void)ev_elf_sym(path, names[k], &v);
		(void)ev_elf_place(path, names[k], k, &pl);
	}
	(void)ev_elf_place(path, NULL, entry, &pl);
	(void)ev_elf_place(path, NULL, 0x1000, &pl);
}

static void engine_reader(const char *path, uint64_t entry)
{
	struct ukp_object o = { .bias = BIAS, .exec = { BIAS, BIAS + (1UL << 32) },
				.alive = true };
	snprintf(o.path, sizeof(o.path), "%s", path);
	o.base = strrchr(o.path, '/') + 1;
	load_object_locked(&o);
	for (size_t k = 0; k < o.nsyms && k < 256; k++) {
		const struct sym *s = &o.syms[k];
		const struct sym *b = sym_by_name_locked(&o, s->name);
		if (!b || name_cmp(b->name, s->name))
			abort();
		(void)sym_by_addr_locked(&o, s->addr);
		(void)sym_by_addr_locked(&o, s->addr + s->size - 1);
	}
	(void)sym_by_name_locked(&o, "main");
	(void)sym_by_addr_locked(&o, BIAS + entry);
	struct ukp_objdesc d;
	if (!ukp_sym_object_desc(&o, &d))
		free(d.funcs);
	/* NOKPROBE_SYMBOL() ranges, through the list of objects */
	objects = &o;
	const char *why;
	for (size_t k = 0; k < o.nnokprobe && k < 64; k++)
		(void)ukp_sym_blacklisted(o.nokprobe[k].lo, &why);
	(void)ukp_sym_blacklisted(BIAS + entry, &why);
	objects = NULL;
	unsigned long *addrs;
	uint8_t *from;
	size_t n;
	(void)ukp_sym_patch_sites(&o, &addrs, &from, &n);
	free(addrs);
	free(from);
	free(o.syms);
	free(o.byname);
	free(o.strs);
	free(o.nokprobe);
	free(o.coderefs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	if (fd < 0) {
		fd = memfd_create("elf-fuzz", MFD_CLOEXEC);
		if (fd < 0)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	image = data;
	image_len = size;
	uint64_t entry = 0;
	if (size >= 32)
		memcpy(&entry, data + 24, 8);	/* e_entry */
	char names[4][64] = { "main", "f", "", "_init" };
	cli_reader(path, entry, names);
	event_reader(path, entry, names);
	engine_reader(path, entry);
	check_unmapped();
	return 0;
}
