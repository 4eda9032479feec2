/* SPDX-License-Identifier: MIT */
/*
 * Code patching (text.c) on pages of our own: what every probe's bytes go
 * through.  A batch writes a page of an object's code (a read-only mapping
 * of a file) with one read and one write (the bytes between pokes written
 * back as they are), other memory run by run; these check that exactly the
 * poked bytes change either way.  Every case runs on pages mapped from a
 * file and on anonymous ones.
 *
 * Cases:
 *   scattered_pokes_change_only_their_bytes   300 pokes spread over three
 *                         read-only executable pages (runs of 1 to 5 bytes,
 *                         in random order), and a page with two runs only:
 *                         every poked byte has its value, every other byte
 *                         of the pages is unchanged
 *   poked_functions_run        64 functions written into an executable page
 *                         by one batch of pokes (int3 first, then the
 *                         bodies, as probes are written) each return their
 *                         own number when called
 *   unmapped_page_is_efault    a batch with an unmapped page among mapped
 *                         ones answers -EFAULT and still writes the mapped
 *                         pages
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "internal.h"
#include "ukt.h"

#define PG 4096

static char file_name[64];

/* n read-only executable pages of byte pattern i * 7 + seed: a private
 * mapping of a file (kept until rx_done, as an object's) or anonymous */
static uint8_t *rx_pages(size_t n, uint8_t fill_seed, bool file)
{
	uint8_t *pat = malloc(n * PG);
	UKT_ASSERT(pat);
	for (size_t i = 0; i < n * PG; i++)
		pat[i] = (uint8_t)(i * 7 + fill_seed);
	uint8_t *m;
	if (file) {
		strcpy(file_name, "/tmp/ukt-text-XXXXXX");
		int fd = mkstemp(file_name);
		UKT_ASSERT(fd >= 0);
		UKT_EQ(write(fd, pat, n * PG), (ssize_t)(n * PG));
		m = mmap(NULL, n * PG, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
		close(fd);
	} else {
		m = mmap(NULL, n * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		UKT_ASSERT(m != MAP_FAILED);
		memcpy(m, pat, n * PG);
		UKT_EQ(mprotect(m, n * PG, PROT_READ | PROT_EXEC), 0);
	}
	UKT_ASSERT(m != MAP_FAILED);
	free(pat);
	return m;
}

static void rx_done(bool file)
{
	if (file)
		unlink(file_name);
}

static void scattered(bool file)
{
	uint8_t *m = rx_pages(4, 3, file);
	uint8_t want[4 * PG];
	memcpy(want, m, sizeof(want));
	struct ukp_poke p[400];
	size_t n = 0;
	srand(12345);
	/* pages 0-2: 300 bytes in runs of 1..5, at random places */
	while (n < 300) {
		size_t len = 1 + (size_t)rand() % 5;
		size_t at = (size_t)rand() % (3 * PG - len);
		for (size_t k = 0; k < len && n < 300; k++) {
			uint8_t b = (uint8_t)rand();
			bool dup = false;
			for (size_t j = 0; j < n; j++)
				dup |= p[j].addr == (unsigned long)(m + at + k);
			if (dup)
				continue;
			p[n].addr = (unsigned long)(m + at + k);
			p[n].byte = b;
			want[at + k] = b;
			n++;
		}
	}
	/* page 3: two runs, at both ends */
	for (size_t k = 0; k < 3; k++) {
		p[n].addr = (unsigned long)(m + 3 * PG + k);
		p[n].byte = (uint8_t)(0xa0 + k);
		want[3 * PG + k] = (uint8_t)(0xa0 + k);
		n++;
		p[n].addr = (unsigned long)(m + 4 * PG - 1 - k);
		p[n].byte = (uint8_t)(0xb0 + k);
		want[4 * PG - 1 - k] = (uint8_t)(0xb0 + k);
		n++;
	}
	/* the batch sorts them: hand it shuffled */
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = (size_t)rand() % (i + 1);
		struct ukp_poke t = p[i];
		p[i] = p[j];
		p[j] = t;
	}
	UKT_EQ(ukp_text_poke_batch(p, n), 0);
	for (size_t i = 0; i < sizeof(want); i++)
		if (m[i] != want[i])
			UKT_FAIL("%s: byte %zu (page %zu): %#x, want %#x", file ? "file" : "anonymous",
				 i, i / PG, m[i], want[i]);
	munmap(m, 4 * PG);
	rx_done(file);
}

UKT_CASE(scattered_pokes_change_only_their_bytes)
{
	ukp_init_once();
	scattered(true);
	scattered(false);
}

/* mov $k, %eax; ret; int3 x2 = 8 bytes per function */
static void functions(bool file)
{
	uint8_t *m = rx_pages(1, 0, file);
	enum { NF = 64, STRIDE = 48 };
	struct ukp_poke p[NF * 8];
	size_t n = 0;
	for (int f = 0; f < NF; f++) {	/* first the int3s, as a probe */
		p[n].addr = (unsigned long)(m + f * STRIDE);
		p[n++].byte = 0xcc;
	}
	UKT_EQ(ukp_text_poke_batch(p, n), 0);
	for (int f = 0; f < NF; f++)
		UKT_EQ(m[f * STRIDE], 0xcc);
	n = 0;
	for (int f = 0; f < NF; f++) {	/* bytes 1.. then byte 0 */
		uint8_t code[8] = { 0xb8, (uint8_t)(100 + f), 0, 0, 0, 0xc3, 0xcc, 0xcc };
		for (int k = 1; k < 8; k++) {
			p[n].addr = (unsigned long)(m + f * STRIDE + k);
			p[n++].byte = code[k];
		}
	}
	UKT_EQ(ukp_text_poke_batch(p, n), 0);
	n = 0;
	for (int f = 0; f < NF; f++) {
		p[n].addr = (unsigned long)(m + f * STRIDE);
		p[n++].byte = 0xb8;
	}
	UKT_EQ(ukp_text_poke_batch(p, n), 0);
	for (int f = 0; f < NF; f++) {
		int (*fn)(void) = (int (*)(void))(void *)(m + f * STRIDE);
		UKT_EQ(fn(), 100 + f);
		/* the bytes between functions untouched */
		for (int k = 8; k < STRIDE; k++)
			UKT_EQ(m[f * STRIDE + k], (uint8_t)((f * STRIDE + k) * 7));
	}
	munmap(m, PG);
	rx_done(file);
}

UKT_CASE(poked_functions_run)
{
	ukp_init_once();
	functions(true);
	functions(false);
}

static void unmapped(bool file)
{
	uint8_t *m = rx_pages(3, 9, file);
	UKT_EQ(munmap(m + PG, PG), 0);		/* a hole in the middle */
	struct ukp_poke p[30];
	size_t n = 0;
	for (int pg = 0; pg < 3; pg++)
		for (int k = 0; k < 10; k++) {	/* 10 runs per page */
			p[n].addr = (unsigned long)(m + pg * PG + k * 100);
			p[n++].byte = (uint8_t)(0x40 + k);
		}
	UKT_EQ(ukp_text_poke_batch(p, n), -EFAULT);
	for (int pg = 0; pg < 3; pg += 2)
		for (int k = 0; k < 10; k++) {
			UKT_EQ(m[pg * PG + k * 100], 0x40 + k);
			UKT_EQ(m[pg * PG + k * 100 + 1], (uint8_t)((pg * PG + k * 100 + 1) * 7 + 9));
		}
	munmap(m, PG);
	munmap(m + 2 * PG, PG);
	rx_done(file);
}

UKT_CASE(unmapped_page_is_efault)
{
	ukp_init_once();
	unmapped(true);
	unmapped(false);
}
