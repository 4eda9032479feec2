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

/* A detour's entry is a jmp rel32 (its displacement 4-aligned, so one
 * store retargets it), then, 8-aligned, the copy of the fast paths'
 * template (entry.S: ukp_lean_tpl) */
static __attribute__((noinline, unused)) const uint8_t *detour_tpl(const uint8_t *e)
{
	UKT_EQ(e[0], 0xe9);
	UKT_EQ((uintptr_t)(e + 1) & 3, 0);
	return (const uint8_t *)(((uintptr_t)e + 5 + 7) & ~(uintptr_t)7);
}

/* where the entry's jmp goes */
static __attribute__((noinline, unused)) const uint8_t *detour_entry_target(const uint8_t *e)
{
	UKT_EQ(e[0], 0xe9);
	int32_t rel;
	memcpy(&rel, e + 1, 4);
	return e + 5 + rel;
}

/* The word the template's copy begins by jumping through (jmp
 * *rel32(%rip): sel), which says the same as the entry's jmp */
static __attribute__((noinline, unused)) const uint8_t *detour_sel_word(const uint8_t *e)
{
	const uint8_t *c = detour_tpl(e);
	UKT_EQ(c[0], 0xff);
	UKT_EQ(c[1], 0x25);
	int32_t rel;
	memcpy(&rel, c + 2, 4);
	return c + 6 + rel;
}

/*
 * The detour of an optimised site: the site's first byte is a jmp rel32
 * to the detour's entry; the detour's header holds the site's probe list
 * (a copy of site->probes, which must never lag behind it), the site and
 * the trampoline its probes need (arch.h, UKP_ARCH_HDR_*): after the sel
 * word at the detour's start, with the entry (a jmp where sel says, then
 * the detour's own copy of the fast paths) after the relocated region,
 * or in the return probes' variant (lea, push r11, jmp over it) the 24
 * bytes after its first 16.  Checks the site and list words.
 */
static __attribute__((noinline, unused)) const uint8_t *detour_header(unsigned long addr, uint8_t **entry)
{
	const uint8_t *c = (const uint8_t *)addr;
	UKT_EQ(c[0], 0xe9);
	int32_t rel;
	memcpy(&rel, c + 1, 4);
	uint8_t *e = (uint8_t *)(addr + 5 + (long)rel);
	static const uint8_t kret_entry[] = { 0x4c, 0x8d, 0x1d };
	const uint8_t *h = ukp_opt_detour_header(addr);
	UKT_ASSERT(h);
	if (!memcmp(e, kret_entry, 3))
		UKT_EQ((uint64_t)(uintptr_t)h, (uint64_t)(uintptr_t)(e + UKP_ARCH_KRET_HDR));
	else
		UKT_EQ((uint64_t)(uintptr_t)detour_sel_word(e),
		       (uint64_t)(uintptr_t)(h - UKP_ARCH_SEL_SIZE));
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

/* 1: the detour's entry goes straight on to its own lean fast path; 2:
 * to its bare fast path; 0: to the call of its trampoline (its jmp and
 * sel agree) */
static __attribute__((noinline, unused)) int detour_sel_fast(unsigned long addr)
{
	uint8_t *e;
	const uint8_t *h = detour_header(addr, &e);
	const uint8_t *d = h - UKP_ARCH_SEL_SIZE;
	uint64_t sel;
	memcpy(&sel, d + UKP_ARCH_SEL, 8);
	UKT_EQ((uint64_t)(uintptr_t)detour_entry_target(e), sel);
	const uint8_t *c = detour_tpl(e);
	if (sel == (uint64_t)(uintptr_t)(c + (ukp_lean_tpl_sel - ukp_lean_tpl)))
		return 1;
	if (sel == (uint64_t)(uintptr_t)(c + (ukp_lean_tpl_bare - ukp_lean_tpl)))
		return 2;
	if (sel == (uint64_t)(uintptr_t)(d + UKP_ARCH_R - 11))
		return 0;
	UKT_FAIL("the detour of %#lx selects %#lx: neither a fast path nor its call",
		 addr, (unsigned long)sel);
}

static __attribute__((noinline, unused)) const struct ukp_plist *plist_at(unsigned long addr)
{
	struct ukp_site *s = ukp_site_lookup(addr);
	UKT_ASSERT(s);
	return atomic_load(&s->probes);
}

#endif
