/* SPDX-License-Identifier: MIT */
/*
 * Code patching.  A breakpoint is one byte, and a one-byte store is atomic
 * for the instruction fetch of every other core: a thread either sees the
 * old instruction or the int3.  What remains is to make every core drop
 * stale copies of the bytes, which membarrier's SYNC_CORE does for all
 * threads of the process at once (the kernel's text_poke_bp ends with the
 * same serialisation, via IPIs).
 *
 * Batches: pages are made writable once per batch (keeping exec, since
 * other threads run them), all bytes are written, protections restored,
 * then one serialisation covers the whole batch.
 */
#include <linux/membarrier.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "internal.h"

static int sync_core_cmd;	/* probed once */

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
}

static void serialize_all_cores(void)
{
	if (sync_core_cmd)
		syscall(SYS_membarrier, sync_core_cmd, 0, 0);
}

struct map { unsigned long lo, hi; int prot; };

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
		if (sscanf(line, "%lx-%lx %7s", &e.lo, &e.hi, perm) != 3)
			continue;
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

static int prot_of(const struct map *m, size_t n, unsigned long a)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (m[mid].hi <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && a >= m[lo].lo ? m[lo].prot : -1;
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

int ukp_text_poke_batch(const struct ukp_poke *pokes, size_t n)
{
	struct map *maps;
	size_t nmaps;
	int err = 0;

	if (!n)
		return 0;
	struct ukp_poke *p = malloc(n * sizeof(*p));
	if (!p)
		return -ENOMEM;
	memcpy(p, pokes, n * sizeof(*p));
	qsort(p, n, sizeof(*p), cmp_poke);
	if (read_maps(&maps, &nmaps)) {
		free(p);
		return -ENOMEM;
	}
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
	free(p);
	serialize_all_cores();
	return err;
}
