/* SPDX-License-Identifier: MIT */
/* Unit tests: what an optimised site's detour calls, and its probe list.
 * Not inlined: a caller's constant address folded into a lea that points
 * inside a region would make the optimizer refuse it. */
#ifndef UKT_DETOUR_H
#define UKT_DETOUR_H
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include "internal.h"
#include "ukt.h"

/*
 * The detour of an optimised site: the site's first byte is a jmp rel32
 * to the detour's entry; the detour's header holds the site's probe list
 * (a copy of site->probes, which must never lag behind it), the site and
 * the trampoline it calls (arch.h, UKP_ARCH_HDR_*): the 24 bytes before
 * the entry, or in the return probes' variant (lea, push r11, jmp over
 * it) the 24 after its first 16.  Checks the site and list words.
 */
static __attribute__((noinline, unused)) const uint8_t *detour_header(unsigned long addr, uint8_t **entry)
{
	const uint8_t *c = (const uint8_t *)addr;
	UKT_EQ(c[0], 0xe9);
	int32_t rel;
	memcpy(&rel, c + 1, 4);
	uint8_t *e = (uint8_t *)(addr + 5 + (long)rel);
	static const uint8_t kret_entry[] = { 0x4c, 0x8d, 0x1d };
	const uint8_t *h = memcmp(e, kret_entry, 3) ? e - UKP_ARCH_HDR_SIZE : e + UKP_ARCH_KRET_HDR;
	uint64_t site, list;
	memcpy(&site, h + UKP_ARCH_HDR_SITE, 8);
	UKT_EQ(site, (uint64_t)(uintptr_t)ukp_site_lookup(addr));
	memcpy(&list, h + UKP_ARCH_HDR_LIST, 8);
	UKT_EQ(list, (uint64_t)(uintptr_t)atomic_load(&ukp_site_lookup(addr)->probes));
	if (entry)
		*entry = e;
	return h;
}

static __attribute__((noinline, unused)) uint64_t detour_tramp(unsigned long addr)
{
	uint64_t tramp;
	memcpy(&tramp, detour_header(addr, NULL) + UKP_ARCH_HDR_TRAMP, 8);
	return tramp;
}

static __attribute__((noinline, unused)) const struct ukp_plist *plist_at(unsigned long addr)
{
	struct ukp_site *s = ukp_site_lookup(addr);
	UKT_ASSERT(s);
	return atomic_load(&s->probes);
}

#endif
