/* SPDX-License-Identifier: MIT */
/*
 * Executable memory for out-of-line copies, within reach (rel32) of the
 * probed code.  Slots are never freed or reused for other code: a thread
 * that trapped may still be about to run a slot long after its probe is
 * gone (a site keeps its slots for the life of the process, and a site is
 * per address, so re-registering at an address reuses the same slots and
 * memory stays bounded by the number of distinct probed addresses).
 *
 * A chunk is CHUNK_SIZE bytes of code plus, elsewhere, a table saying
 * which site each slot belongs to (for faults and signals taken inside a
 * slot).  Chunks are only appended, readers need no lock.
 *
 * The code is one memfd mapped twice: read+exec near the probed code, and
 * read+write anywhere.  Slots are written through the second view, so no
 * page is ever writable and executable and no protection changes per
 * slot (an mprotect costs ~18 us while other threads run).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "internal.h"

#define CHUNK_SIZE (256UL << 10)
#define REACH (1UL << 30)
#define META_MAX (CHUNK_SIZE / 8)

struct slot_meta {
	uint32_t off, len;
	struct ukp_site *site;
	int16_t *sp_fix;		/* NULL when all zero */
	bool post;
	const struct ukp_copy_map *map;	/* detours: where each byte came from */
	unsigned entry;			/* detours: where the jump lands */
	unsigned long exit;		/* detours: where the copy goes back */
};

struct chunk {
	unsigned long base;
	uint8_t *rw;		/* the writable view of the same memory */
	bool shared;		/* a fork child's, still the parent's too */
	size_t used;		/* under ukp_lock */
	struct slot_meta *meta;
	_Atomic unsigned nmeta;
	struct chunk *_Atomic next;
};

static struct chunk *_Atomic chunks;

/*
 * A fork child inherits the slot memory as MAP_SHARED: parent and child
 * would write their next slots into the same bytes.  In the child, give
 * every chunk memory of its own (a new memfd with the same contents,
 * mapped over both views) before fork() returns there.
 */
static void fork_child(void)
{
	for (struct chunk *c = atomic_load(&chunks); c; c = atomic_load(&c->next)) {
		int fd = memfd_create("ukprobes-slots", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, CHUNK_SIZE) ||
		    pwrite(fd, (void *)c->base, CHUNK_SIZE, 0) != (ssize_t)CHUNK_SIZE ||
		    mmap((void *)c->base, CHUNK_SIZE, PROT_READ | PROT_EXEC,
			 MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED ||
		    mmap(c->rw, CHUNK_SIZE, PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
			/* keep both safe: no more slots in this chunk, no
			 * pointer of this process written into it (the
			 * detours' list words: ukp_slot_set_private_word),
			 * and none read from it: the hit paths that read
			 * them are off, the C paths read the site's */
			c->used = CHUNK_SIZE;
			c->shared = true;
			ukp_gp_flag(UKP_GP_NOFAST, true);
			ukp_log("fork child: cannot copy the slot memory at %#lx: %s; optimised "
				"probes take the slower C path here",
				c->base, strerror(errno));
		}
		if (fd >= 0)
			close(fd);
	}
}

void ukp_slots_init(void)
{
	pthread_atfork(NULL, NULL, fork_child);
}

static unsigned long dist(unsigned long a, unsigned long b)
{
	return a > b ? a - b : b - a;
}

/* Find free address space near `near` from /proc/self/maps. */
static unsigned long find_gap(unsigned long near, size_t size)
{
	FILE *f = fopen("/proc/self/maps", "re");
	unsigned long prev_end = 0x10000, best = 0, bestd = ~0UL;
	unsigned long lo, hi;
	char line[512];

	if (!f)
		return 0;
	for (;;) {
		int more = fgets(line, sizeof(line), f) != NULL;
		if (more && sscanf(line, "%lx-%lx", &lo, &hi) != 2)
			continue;
		if (!more)
			lo = 0x7ffffffff000UL;
		/* gap [prev_end, lo) */
		if (lo > prev_end && lo - prev_end >= size + 2 * 4096) {
			/* below near: top of the gap; above: bottom of it,
			 * one page of distance from the neighbours */
			unsigned long cand[2] = { lo - size - 4096, prev_end + 4096 };
			for (int i = 0; i < 2; i++) {
				unsigned long c = cand[i];
				unsigned long d = dist(c, near) > dist(c + size, near) ?
						  dist(c, near) : dist(c + size, near);
				/* prefer below the code: above the main
				 * executable is where brk grows the heap */
				if (c > near)
					d += 64UL << 20;
				if (d < REACH && d < bestd) {
					bestd = d;
					best = c;
				}
			}
		}
		if (!more)
			break;
		if (hi > prev_end)
			prev_end = hi;
	}
	fclose(f);
	return best;
}

static struct chunk *new_chunk(unsigned long near)
{
	int fd = memfd_create("ukprobes-slots", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, CHUNK_SIZE)) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	void *rw = mmap(NULL, CHUNK_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (rw == MAP_FAILED) {
		close(fd);
		return NULL;
	}
	for (int tries = 0; tries < 8; tries++) {
		unsigned long at = find_gap(near, CHUNK_SIZE);
		if (!at)
			break;
		void *m = mmap((void *)at, CHUNK_SIZE, PROT_READ | PROT_EXEC,
			       MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
		if (m == MAP_FAILED)
			continue;	/* raced with another mapping */
		if ((unsigned long)m != at) {
			munmap(m, CHUNK_SIZE);
			continue;
		}
		struct chunk *c = calloc(1, sizeof(*c));
		void *meta = mmap(NULL, META_MAX * sizeof(struct slot_meta),
				  PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (!c || meta == MAP_FAILED) {
			free(c);
			munmap(m, CHUNK_SIZE);
			break;
		}
		close(fd);
		c->base = at;
		c->rw = rw;
		c->meta = meta;
		c->next = atomic_load(&chunks);
		atomic_store(&chunks, c);
		return c;
	}
	munmap(rw, CHUNK_SIZE);
	close(fd);
	return NULL;
}

uint8_t *ukp_slot_alloc(unsigned long near, size_t size)
{
	size = (size + 15) & ~15UL;	/* keep copies 16-byte aligned */
	for (struct chunk *c = atomic_load(&chunks); c; c = c->next) {
		if (c->used + size > CHUNK_SIZE || atomic_load(&c->nmeta) >= META_MAX)
			continue;
		unsigned long s = c->base + c->used;
		if (dist(s, near) < REACH && dist(s + size, near) < REACH) {
			c->used += size;
			return (uint8_t *)s;
		}
	}
	struct chunk *c = new_chunk(near);
	if (!c)
		return NULL;
	c->used = size;
	return (uint8_t *)c->base;
}

static struct chunk *chunk_of(unsigned long a)
{
	for (struct chunk *c = atomic_load(&chunks); c; c = atomic_load(&c->next))
		if (a >= c->base && a < c->base + CHUNK_SIZE)
			return c;
	return NULL;
}

/* Copy code into the slot through the writable view and record what it
 * is.  Nothing executes these bytes yet: the site is published later. */
static int slot_put(uint8_t *slot, const uint8_t *code, size_t len,
		    struct slot_meta m)
{
	struct chunk *c = chunk_of((unsigned long)slot);
	if (!c)
		return -EINVAL;
	memcpy(c->rw + ((unsigned long)slot - c->base), code, len);
	m.off = (uint32_t)((unsigned long)slot - c->base);
	m.len = (uint32_t)len;
	unsigned n = atomic_load(&c->nmeta);
	c->meta[n] = m;
	atomic_store_explicit(&c->nmeta, n + 1, memory_order_release);
	return 0;
}

/* Code that stands for no probed instruction (an ftrace stub): written
 * without a record, so ukp_slot_find() does not know it. */
int ukp_slot_write_raw(uint8_t *slot, const uint8_t *code, size_t len)
{
	struct chunk *c = chunk_of((unsigned long)slot);
	if (!c)
		return -EINVAL;
	memcpy(c->rw + ((unsigned long)slot - c->base), code, len);
	return 0;
}

/* One aligned 8-byte word of written slot memory, replaced in one store
 * (a detour's trampoline pointer, which threads read as they pass). */
void ukp_slot_set_word(uint8_t *at, uint64_t v)
{
	struct chunk *c = chunk_of((unsigned long)at);
	if (c && !((unsigned long)at & 7))
		__atomic_store_n((uint64_t *)(void *)(c->rw + ((unsigned long)at - c->base)), v,
				 __ATOMIC_RELEASE);
}

/* Is at in slot memory a fork child shares with its parent (fork_child)? */
bool ukp_slot_is_shared(const void *at)
{
	struct chunk *c = chunk_of((unsigned long)at);
	return c && c->shared;
}

/* The same for a word that means something in this process only (a heap
 * pointer): left alone in memory shared with a fork parent or child
 * (fork_child), where only the process that made it writes it. */
void ukp_slot_set_private_word(uint8_t *at, uint64_t v)
{
	if (!ukp_slot_is_shared(at))
		ukp_slot_set_word(at, v);
}

/* An aligned 4-byte field of written code (a jump's displacement), in one
 * store: a thread running the instruction meanwhile sees the old target or
 * the new one, never a mix. */
void ukp_slot_set_u32(uint8_t *at, uint32_t v)
{
	struct chunk *c = chunk_of((unsigned long)at);
	if (c && !((unsigned long)at & 3))
		__atomic_store_n((uint32_t *)(void *)(c->rw + ((unsigned long)at - c->base)), v,
				 __ATOMIC_RELEASE);
}

int ukp_slot_write(uint8_t *slot, const uint8_t *code, size_t len,
		   struct ukp_site *site, const int16_t *sp_fix)
{
	int16_t *fix = NULL;

	for (size_t i = 0; i < len && sp_fix; i++) {
		if (sp_fix[i]) {
			fix = malloc(len * sizeof(*fix));
			if (!fix)
				return -ENOMEM;
			memcpy(fix, sp_fix, len * sizeof(*fix));
			break;
		}
	}
	int err = slot_put(slot, code, len, (struct slot_meta){
		.site = site, .sp_fix = fix, .post = slot == site->slot_post });
	if (err)
		free(fix);
	return err;
}

int ukp_slot_write_detour(uint8_t *slot, const uint8_t *code, size_t len,
			  struct ukp_site *site, const struct ukp_copy_map *map,
			  unsigned entry, unsigned long exit)
{
	return slot_put(slot, code, len, (struct slot_meta){
		.site = site, .map = map, .entry = entry, .exit = exit });
}

static const struct slot_meta *meta_of(unsigned long ip, struct chunk **cp)
{
	struct chunk *c = chunk_of(ip);
	if (!c)
		return NULL;
	unsigned long off = ip - c->base;
	unsigned n = atomic_load_explicit(&c->nmeta, memory_order_acquire);
	unsigned lo = 0, hi = n;
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (c->meta[mid].off + c->meta[mid].len <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo >= n || off < c->meta[lo].off)
		return NULL;
	*cp = c;
	return &c->meta[lo];
}

bool ukp_slot_find(unsigned long ip, struct ukp_slot_hit *h)
{
	struct chunk *c;
	const struct slot_meta *m = meta_of(ip, &c);
	if (!m)
		return false;
	unsigned long base = c->base + m->off, o = ip - base;
	h->site = m->site;
	h->post = m->post;
	h->detour = m->map != NULL;
	h->own = m->map && o >= m->map->len;
	h->in_copy = false;
	h->exit = m->exit;
	if (m->map) {
		const struct ukp_copy_map *map = m->map;
		/* past the copy: the detour's own fast path (own: the
		 * fault and trap handlers leave it alone) */
		unsigned k = o < map->len ? map->idx[o] : 0xff;
		h->sp_fix = o < map->len ? map->sp_fix[o] : 0;
		if (k == 0xff) {
			h->orig_ip = m->site->addr;
			h->retry_ip = base + m->entry;
		} else {
			h->orig_ip = m->site->addr + map->orig_off[k];
			h->retry_ip = base + map->copy_off[k];
			h->in_copy = true;
		}
	} else {
		h->sp_fix = m->sp_fix ? m->sp_fix[o] : 0;
		h->orig_ip = m->site->addr;
		h->retry_ip = base;
	}
	return true;
}

