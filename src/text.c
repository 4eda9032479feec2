/* SPDX-License-Identifier: MIT */
/*
 * Code patching.  A breakpoint is one byte, and a one-byte store is atomic
 * for the instruction fetch of every other core: a thread either sees the
 * old instruction or the int3.  What remains is to make every core drop
 * stale copies of the bytes, which membarrier's SYNC_CORE does for all
 * threads of the process at once (the kernel's text_poke_bp ends with the
 * same serialisation, via IPIs).
 *
 * Writes go through /proc/self/mem, as a debugger's do: the kernel writes
 * a read-only page for us (copy on write, the mapping's protection never
 * changes), and an address unmapped meanwhile gives an error, not a
 * fault.  Changing the protection instead races with the dynamic linker,
 * which changes it too while it relocates an object with text
 * relocations: a page seen writable is read-only again by the time we
 * store.  Kernels built to refuse forced writes (PROC_MEM_NO_FORCE) get
 * the old way: pages made writable once per batch, keeping exec.  Either
 * way, one serialisation covers the whole batch.
 */
#include <fcntl.h>
#include <linux/membarrier.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "internal.h"

static int sync_core_cmd;	/* probed once */

static bool mem_writes;		/* /proc/self/mem writes read-only pages */

/* raw system calls: a user may have probed libc's wrappers */
static int open_mem(void)
{
	return (int)ukp_raw_syscall(SYS_openat, AT_FDCWD, (long)"/proc/self/mem",
				    O_RDWR | O_CLOEXEC, 0, 0, 0);
}

static long pwrite_mem(int fd, const void *buf, size_t n, unsigned long addr)
{
	return ukp_raw_syscall(SYS_pwrite64, fd, (long)buf, (long)n, (long)addr, 0, 0);
}

/* Can /proc/self/mem write a read-only page?  Tried on one of our own. */
static void probe_mem_writes(void)
{
	uint8_t *pg = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int fd = open_mem();
	uint8_t b = 0xcc;
	if (pg != MAP_FAILED && fd >= 0 &&
	    pwrite_mem(fd, &b, 1, (unsigned long)pg) == 1 && pg[0] == 0xcc)
		mem_writes = true;
	if (fd >= 0)
		ukp_raw_syscall(SYS_close, fd, 0, 0, 0, 0, 0);
	if (pg != MAP_FAILED)
		munmap(pg, 4096);
}

void ukp_text_init(void)
{
	long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
	if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) &&
	    syscall(SYS_membarrier,
		    MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0)
		sync_core_cmd = MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE;
	else if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
		 syscall(SYS_membarrier,
			 MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
		sync_core_cmd = MEMBARRIER_CMD_PRIVATE_EXPEDITED;
	probe_mem_writes();
}

/* Every core drops what it may have fetched of code written since: after
 * a batch of pokes, and after code written where no thread runs (slot
 * memory) before it is published. */
void ukp_text_serialize(void)
{
	if (sync_core_cmd)
		syscall(SYS_membarrier, sync_core_cmd, 0, 0);
}

struct map { unsigned long lo, hi; int prot; bool file; };

static int read_maps(struct map **out, size_t *n)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512], perm[8];
	size_t cap = 64;
	struct map *m = malloc(cap * sizeof(*m));

	*n = 0;
	if (!f || !m) {
		if (f)
			fclose(f);
		free(m);
		return -ENOMEM;
	}
	while (fgets(line, sizeof(line), f)) {
		struct map e;
		int path = 0;
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &e.lo, &e.hi, perm, &path) < 3)
			continue;
		/* an object's file (not anonymous, not a memfd or a deleted file) */
		e.file = path > 0 && line[path] == '/' && !strstr(line + path, " (deleted)");
		e.prot = (perm[0] == 'r' ? PROT_READ : 0) |
			 (perm[1] == 'w' ? PROT_WRITE : 0) |
			 (perm[2] == 'x' ? PROT_EXEC : 0);
		if (*n == cap) {
			struct map *nm = realloc(m, 2 * cap * sizeof(*m));
			if (!nm)
				break;
			m = nm;
			cap *= 2;
		}
		m[(*n)++] = e;
	}
	fclose(f);
	*out = m;
	return 0;
}

static const struct map *map_of(const struct map *m, size_t n, unsigned long a)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m[mid].hi <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && a >= m[lo].lo ? &m[lo] : NULL;
}

static int prot_of(const struct map *m, size_t n, unsigned long a)
{
	const struct map *e = map_of(m, n, a);
	return e ? e->prot : -1;
}

int ukp_text_is_exec(unsigned long addr)
{
	struct map *m;
	size_t n;
	if (read_maps(&m, &n))
		return 0;
	int p = prot_of(m, n, addr);
	free(m);
	return p >= 0 && (p & PROT_EXEC);
}

static int cmp_poke(const void *a, const void *b)
{
	const struct ukp_poke *x = a, *y = b;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static long pread_mem(int fd, void *buf, size_t n, unsigned long addr)
{
	return ukp_raw_syscall(SYS_pread64, fd, (long)buf, (long)n, (long)addr, 0, 0);
}

/* runs of adjacent bytes in p[i..j) */
static size_t runs_of(const struct ukp_poke *p, size_t i, size_t j)
{
	size_t r = 0;
	for (size_t k = i; k < j; k++)
		r += k == i || p[k].addr != p[k - 1].addr + 1;
	return r;
}

/* May a page's bytes between pokes be read and written back?  Only in an
 * object's code: a read-only mapping of a file, which nothing but us
 * writes at run time (every patch of ours is made under ukp_lock).  Code
 * in anonymous or writable memory, or in a memfd (a JIT's, which may
 * write it through another mapping) is written run by run. */
static bool page_whole_ok(const struct map *m, size_t nm, unsigned long page)
{
	const struct map *e = map_of(m, nm, page);
	return e && e->file && !(e->prot & PROT_WRITE);
}

/*
 * Sorted pokes, each run of adjacent bytes one write; an object's code
 * page with more runs than that is one read and one write of the span
 * they cover, the bytes between them written back as they are.  A write
 * is a system call (~5 us here, most of a batch's time), and probes come
 * densely: 10,000 on small functions are a few dozen pages.  Rewriting a
 * byte with its own value changes nothing a thread running it can see.
 * The file is opened per batch: a descriptor kept open would, after
 * fork, still write the parent.
 */
static int poke_mem(int fd, const struct ukp_poke *p, size_t n)
{
	uint8_t buf[4096];
	struct map *maps = NULL;
	size_t nmaps = 0;
	bool maps_read = false;
	int err = 0;
	for (size_t i = 0; i < n;) {
		unsigned long page = p[i].addr & ~4095UL;
		size_t j = i;
		while (j < n && (p[j].addr & ~4095UL) == page)
			j++;
		bool whole = runs_of(p, i, j) > 2;
		if (whole && !maps_read) {
			maps_read = true;
			if (read_maps(&maps, &nmaps))
				maps = NULL, nmaps = 0;
		}
		if (whole && page_whole_ok(maps, nmaps, page)) {
			unsigned long a = p[i].addr;
			size_t len = p[j - 1].addr + 1 - a;
			if (pread_mem(fd, buf, len, a) == (long)len) {
				for (size_t k = i; k < j; k++)
					buf[p[k].addr - a] = p[k].byte;
				if (pwrite_mem(fd, buf, len, a) != (long)len)
					err = -EFAULT;	/* unmapped meanwhile */
			} else {
				err = -EFAULT;
			}
			i = j;
			continue;
		}
		while (i < j) {
			size_t k = 0;
			unsigned long a = p[i].addr;
			while (i < j && k < 64 && p[i].addr == a + k)
				buf[k++] = p[i++].byte;
			if (pwrite_mem(fd, buf, k, a) != (long)k)
				err = -EFAULT;	/* unmapped meanwhile */
		}
	}
	free(maps);
	ukp_raw_syscall(SYS_close, fd, 0, 0, 0, 0, 0);
	return err;
}

static int poke_mprotect(const struct ukp_poke *p, size_t n)
{
	struct map *maps;
	size_t nmaps;
	int err = 0;

	if (read_maps(&maps, &nmaps))
		return -ENOMEM;
	for (size_t i = 0; i < n;) {
		unsigned long page = p[i].addr & ~4095UL;
		int prot = prot_of(maps, nmaps, page);
		size_t j = i;
		while (j < n && (p[j].addr & ~4095UL) == page)
			j++;
		if (prot < 0) {
			err = -EFAULT;	/* unmapped meanwhile (dlclose) */
			i = j;
			continue;
		}
		if (!(prot & PROT_WRITE) &&
		    mprotect((void *)page, 4096, prot | PROT_WRITE | PROT_EXEC)) {
			err = -errno;
			i = j;
			continue;
		}
		for (; i < j; i++)
			*(volatile uint8_t *)p[i].addr = p[i].byte;
		if (!(prot & PROT_WRITE))
			mprotect((void *)page, 4096, prot);
	}
	free(maps);
	return err;
}

int ukp_text_poke_batch(const struct ukp_poke *pokes, size_t n)
{
	if (!n)
		return 0;
	struct ukp_poke *p = malloc(n * sizeof(*p));
	if (!p)
		return -ENOMEM;
	memcpy(p, pokes, n * sizeof(*p));
	qsort(p, n, sizeof(*p), cmp_poke);
	int fd = mem_writes ? open_mem() : -1;	/* no descriptor left: */
	int err = fd >= 0 ? poke_mem(fd, p, n) : poke_mprotect(p, n);
	free(p);
	ukp_text_serialize();
	return err;
}
