/* SPDX-License-Identifier: MIT */
/*
 * real-kretprobe: a kretprobe on every function of a Debian library
 * nobody here wrote - zlib (libz.so.1) - while real work runs through it.
 *
 * The functions: every FDE of libz's .eh_frame inside .text (see
 * everyinsn.h) that ukprobes accepts a kretprobe on, which must include
 * every function libz exports, as read from the loaded object's dynamic
 * symbol table (dl_iterate_phdr, PT_DYNAMIC, DT_SYMTAB/DT_GNU_HASH); the
 * static ones (no symbol in a stripped library) are refused and counted.
 * All of them in one register_kretprobes() call, each with an
 * entry_handler and a handler counting per probe.
 *
 * The workload: deterministic inputs (text-like and random bytes)
 * through compress2 at levels 1, 6 and 9, uncompress, streaming deflate
 * and inflate in small pieces, crc32 and adler32; every output byte goes
 * into a digest.  Unprobed first (twice: it must be deterministic), then
 * probed: digests identical, round trips exact, and for every probe the
 * handler calls equal the entries (entry_handler returning 0), nmissed 0,
 * functions the workload is known to reach seen; then unregistered and
 * identical again with no handler running.
 *
 *   zlib_every_function_kretprobed_optimized   2 threads x 3 rounds of
 *                         ~1 MiB each, entries through the jump
 *   zlib_every_function_kretprobed_breakpoint  knob off: entries through
 *                         int3, a smaller workload (a trap per call)
 */
#include <errno.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <stdatomic.h>
#include <zlib.h>
#include "everyinsn.h"

/* ---- libz's exported functions, from the loaded image ------------------------ */

struct dyn_find {
	unsigned long bias;
	const Elf64_Dyn *dyn;
	int found;
};

static int dyn_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct dyn_find *f = arg;
	(void)size;
	if (f->found || !info->dlpi_name || !strstr(info->dlpi_name, "libz.so"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			f->dyn = (const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	f->bias = info->dlpi_addr;
	f->found = f->dyn != NULL;
	return 0;
}

/* the defined FUNC symbols of libz's .dynsym: run-time addresses, names */
static size_t exported_functions(unsigned long *addr, const char **name, size_t max)
{
	struct dyn_find f = { 0 };
	dl_iterate_phdr(dyn_cb, &f);
	UKT_ASSERT(f.found);
	const Elf64_Sym *sym = NULL;
	const char *str = NULL;
	const uint32_t *gnu = NULL;
	for (const Elf64_Dyn *d = f.dyn; d->d_tag != DT_NULL; d++) {
		/* the dynamic linker has relocated these to run-time addresses */
		if (d->d_tag == DT_SYMTAB)
			sym = (const void *)d->d_un.d_ptr;
		else if (d->d_tag == DT_STRTAB)
			str = (const void *)d->d_un.d_ptr;
		else if (d->d_tag == DT_GNU_HASH)
			gnu = (const void *)d->d_un.d_ptr;
	}
	UKT_ASSERT(sym && str && gnu);
	/* the symbol count from DT_GNU_HASH: past the last chain's end */
	uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom = gnu[2];
	const uint32_t *buckets = gnu + 4 + bloom * 2;	/* 64-bit bloom words */
	const uint32_t *chain = buckets + nbuckets;
	uint32_t last = 0;
	for (uint32_t b = 0; b < nbuckets; b++)
		if (buckets[b] > last)
			last = buckets[b];
	uint32_t nsyms = symoffset;
	if (last >= symoffset) {
		while (!(chain[last - symoffset] & 1))
			last++;
		nsyms = last + 1;
	}
	size_t n = 0;
	for (uint32_t i = 0; i < nsyms; i++) {
		if (ELF64_ST_TYPE(sym[i].st_info) != STT_FUNC || sym[i].st_shndx == SHN_UNDEF ||
		    !sym[i].st_value)
			continue;
		UKT_ASSERT(n < max);
		addr[n] = f.bias + sym[i].st_value;
		name[n] = str + sym[i].st_name;
		n++;
	}
	return n;
}

/* ---- the probes ---------------------------------------------------------------------- */

struct rprobe {
	struct kretprobe rp;	/* first: handlers cast back */
	const char *name;
	atomic_ulong entries, returns;
	atomic_ulong bad_task;	/* ri->task not the calling thread */
};

static struct rprobe *probes;
static size_t nprobes;
static atomic_ulong late;	/* handler calls after unregistration */
static atomic_int unregistered;

static __thread pid_t worker_tid;	/* set by each workload thread */

static int on_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct rprobe *p = (struct rprobe *)ri->rp;
	(void)regs;
	atomic_fetch_add_explicit(&p->entries, 1, memory_order_relaxed);
	return 0;
}

static int on_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	struct rprobe *p = (struct rprobe *)ri->rp;
	(void)regs;
	if (ri->task != worker_tid)
		atomic_fetch_add_explicit(&p->bad_task, 1, memory_order_relaxed);
	if (atomic_load_explicit(&unregistered, memory_order_relaxed))
		atomic_fetch_add(&late, 1);
	atomic_fetch_add_explicit(&p->returns, 1, memory_order_relaxed);
	return 0;
}

/*
 * Every function of libz the engine accepts a kretprobe on: all of its
 * FDEs, tried one by one.  ukprobes knows function entries from symbols,
 * and Debian's libz has only .dynsym: its static functions are refused
 * (-EINVAL, "not the entry of a known function") and left out, counted;
 * every exported function must be accepted.
 */
static void build_probes(void)
{
	static struct ei_obj o;
	ei_obj_load(&o, "libz.so", 1);
	UKT_ASSERT(o.nfns > 50);
	unsigned long addr[512];
	const char *name[512];
	size_t nexp = exported_functions(addr, name, 512);
	UKT_ASSERT(nexp > 50);

	probes = calloc(o.nfns, sizeof(*probes));
	UKT_ASSERT(probes);
	nprobes = 0;
	size_t refused = 0;
	setenv("UKPROBES_QUIET", "1", 1);	/* the refusals say why, 33 times */
	for (size_t i = 0; i < o.nfns; i++) {
		int exported = 0;
		for (size_t e = 0; e < nexp; e++)
			exported |= addr[e] == o.fns[i].start;
		struct kretprobe t = { .kp.addr = (kprobe_opcode_t *)o.fns[i].start };
		int r = register_kretprobe(&t);
		if (r) {
			if (exported || r != -EINVAL)
				UKT_FAIL("kretprobe on %s (%#lx%s) refused: %d", o.fns[i].name,
					 o.fns[i].start, exported ? ", exported" : "", r);
			refused++;
			continue;
		}
		unregister_kretprobe(&t);
		struct rprobe *p = &probes[nprobes++];
		p->rp.kp.addr = (kprobe_opcode_t *)o.fns[i].start;
		p->rp.entry_handler = on_entry;
		p->rp.handler = on_return;
		p->name = o.fns[i].name;
	}
	unsetenv("UKPROBES_QUIET");
	/* every exported function is among them */
	for (size_t e = 0; e < nexp; e++) {
		size_t i = 0;
		while (i < nprobes && (unsigned long)probes[i].rp.kp.addr != addr[e])
			i++;
		if (i == nprobes)
			UKT_FAIL("libz exports %s at %#lx, which no FDE starts", name[e], addr[e]);
	}
	printf("  libz: %zu functions with unwind information, %zu exported, %zu probed "
	       "(%zu static ones refused)\n", o.nfns, nexp, nprobes, refused);
}

static struct rprobe *probe_named(const char *name)
{
	for (size_t i = 0; i < nprobes; i++)
		if (!strcmp(probes[i].name, name))
			return &probes[i];
	UKT_FAIL("no probe named %s", name);
}

/* ---- the workload ---------------------------------------------------------------------- */

struct job {
	unsigned seed;
	size_t size;
	int rounds;
	uint64_t digest;
	long errors;
};

static void fnv(uint64_t *h, const void *p, size_t n)
{
	const volatile unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		*h = (*h ^ b[i]) * 0x100000001b3ULL;
}

static void fnv_long(uint64_t *h, long v)
{
	fnv(h, &v, sizeof(v));
}

/* text-like words with runs of random bytes: a deterministic generator */
static void make_input(unsigned char *p, size_t n, unsigned seed)
{
	static const char *const words[] = { "return", "probe", "kernel", "handler", "zlib",
					     "deflate", "inflate", "instance", "trampoline",
					     "the", "of", "and", "\n" };
	uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
	size_t i = 0;
	while (i < n) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (x % 17 == 0) {
			for (int k = 0; k < 40 && i < n; k++)
				p[i++] = (unsigned char)(x >> (k % 8 * 8)) ^ (unsigned char)k;
			continue;
		}
		for (const char *w = words[x % 13]; *w && i < n; w++)
			p[i++] = (unsigned char)*w;
		if (i < n)
			p[i++] = ' ';
	}
}

static void stream_round_trip(struct job *j, const unsigned char *in, size_t n,
			      unsigned char *c, size_t ccap, unsigned char *d, uint64_t *h)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	int r = deflateInit2(&z, 5, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);	/* gzip */
	fnv_long(h, r);
	z.next_in = (unsigned char *)in;
	z.next_out = c;
	size_t fed = 0;
	do {
		if (!z.avail_in && fed < n) {
			z.avail_in = (uInt)(n - fed < 65536 ? n - fed : 65536);
			fed += z.avail_in;
		}
		z.avail_out = (uInt)(ccap - z.total_out < 1024 ? ccap - z.total_out : 1024);
		r = deflate(&z, fed < n ? Z_NO_FLUSH : Z_FINISH);
	} while (r == Z_OK || r == Z_BUF_ERROR);
	fnv_long(h, r);
	size_t clen = z.total_out;
	fnv(h, c, clen);
	fnv_long(h, deflateEnd(&z));

	memset(&z, 0, sizeof(z));
	fnv_long(h, inflateInit2(&z, 15 + 32));
	z.next_in = c;
	z.avail_in = (uInt)clen;
	z.next_out = d;
	do {
		z.avail_out = (uInt)(n + 1 - z.total_out < 500 ? n + 1 - z.total_out : 500);
		r = inflate(&z, Z_NO_FLUSH);
	} while (r == Z_OK);
	fnv_long(h, r);
	fnv_long(h, (long)z.total_out);
	if (r != Z_STREAM_END || z.total_out != n || memcmp(d, in, n))
		j->errors++;
	fnv_long(h, inflateEnd(&z));
}

static void *work(void *arg)
{
	struct job *j = arg;
	worker_tid = (pid_t)syscall(SYS_gettid);
	size_t n = j->size, ccap = compressBound(n) + 1024;
	unsigned char *in = malloc(n), *c = malloc(ccap), *d = malloc(n + 1);
	UKT_ASSERT(in && c && d);
	uint64_t h = 0xcbf29ce484222325ULL;
	for (int round = 0; round < j->rounds; round++) {
		make_input(in, n, j->seed + (unsigned)round);
		static const int levels[] = { 1, 6, 9 };
		int level = levels[round % 3];
		uLongf clen = ccap;
		int r = compress2(c, &clen, in, n, level);
		fnv_long(&h, r);
		fnv_long(&h, (long)clen);
		fnv(&h, c, clen);
		uLongf dlen = n + 1;
		r = uncompress(d, &dlen, c, clen);
		fnv_long(&h, r);
		if (r != Z_OK || dlen != n || memcmp(d, in, n))
			j->errors++;
		fnv_long(&h, (long)crc32(crc32(0, NULL, 0), in, (uInt)n));
		fnv_long(&h, (long)adler32(adler32(0, NULL, 0), in, (uInt)n));
		stream_round_trip(j, in, n, c, ccap, d, &h);
	}
	j->digest = h;
	free(in);
	free(c);
	free(d);
	return NULL;
}

/* nthreads jobs at once; digests into out[] */
static void run_jobs(int nthreads, size_t size, int rounds, uint64_t *out)
{
	struct job jobs[4];
	pthread_t th[4];
	UKT_ASSERT(nthreads <= 4);
	for (int t = 0; t < nthreads; t++) {
		jobs[t] = (struct job){ .seed = 1000u * (unsigned)t + 7, .size = size,
					.rounds = rounds };
		UKT_EQ(pthread_create(&th[t], NULL, work, &jobs[t]), 0);
	}
	for (int t = 0; t < nthreads; t++) {
		UKT_EQ(pthread_join(th[t], NULL), 0);
		UKT_EQ(jobs[t].errors, 0);
		out[t] = jobs[t].digest;
	}
}

static void run_case(int opt, int nthreads, size_t size, int rounds)
{
	uint64_t ref[4], ref2[4], got[4], after[4];
	double t0 = ei_now();
	run_jobs(nthreads, size, rounds, ref);
	run_jobs(nthreads, size, rounds, ref2);
	UKT_ASSERT(!memcmp(ref, ref2, nthreads * sizeof(ref[0])));
	double t_ref = (ei_now() - t0) / 2;

	build_probes();
	struct kretprobe **rps = malloc(nprobes * sizeof(*rps));
	UKT_ASSERT(rps);
	for (size_t i = 0; i < nprobes; i++)
		rps[i] = &probes[i].rp;
	UKT_EQ(kprobes_set_optimization(opt), 0);
	int err = register_kretprobes(rps, (int)nprobes);
	if (err)
		UKT_FAIL("register_kretprobes(%zu libz functions) = %d", nprobes, err);
	wait_for_kprobe_optimizer();
	size_t nopt = 0;
	for (size_t i = 0; i < nprobes; i++)
		nopt += !!(probes[i].rp.kp.flags & KPROBE_FLAG_OPTIMIZED);
	if (!opt)
		UKT_EQ(nopt, 0);
	else
		UKT_ASSERT(nopt > nprobes / 2);

	t0 = ei_now();
	run_jobs(nthreads, size, rounds, got);
	double t_probed = ei_now() - t0;
	for (int t = 0; t < nthreads; t++)
		if (got[t] != ref[t])
			UKT_FAIL("thread %d: probed results differ from the unprobed run", t);

	unsigned long total = 0, seen = 0;
	for (size_t i = 0; i < nprobes; i++) {
		struct rprobe *p = &probes[i];
		unsigned long e = atomic_load(&p->entries), r = atomic_load(&p->returns);
		if (e != r || p->rp.nmissed || p->rp.kp.nmissed || atomic_load(&p->bad_task))
			UKT_FAIL("%s: %lu entries, %lu handler calls, nmissed %d/%lu, %lu with "
				 "another thread's ri->task", p->name, e, r, p->rp.nmissed,
				 p->rp.kp.nmissed, atomic_load(&p->bad_task));
		total += r;
		seen += r > 0;
	}
	UKT_ASSERT(total > 0);
	/* what the workload calls directly, and what deflate and inflate
	 * must reach for these inputs */
	static const char *const reached[] = { "compress2", "uncompress", "deflate", "inflate",
					       "crc32", "adler32", "deflateInit2_",
					       "inflateInit2_", "deflateEnd", "inflateEnd" };
	for (size_t i = 0; i < sizeof(reached) / sizeof(reached[0]); i++) {
		struct rprobe *p = probe_named(reached[i]);
		if (!atomic_load(&p->returns))
			UKT_FAIL("%s never returned through its kretprobe", reached[i]);
	}
	/* one compress2 per round per thread */
	UKT_EQ(atomic_load(&probe_named("compress2")->returns), (unsigned long)(nthreads * rounds));
	printf("  %s entries: %zu of %zu functions optimized, %lu calls in %zu functions, "
	       "%.2f s probed, %.2f s unprobed\n", opt ? "optimized" : "breakpoint", nopt,
	       nprobes, total, (size_t)seen, t_probed, t_ref);

	unregister_kretprobes(rps, (int)nprobes);
	atomic_store(&unregistered, 1);
	UKT_EQ(kprobes_set_optimization(1), 0);
	run_jobs(nthreads, size, rounds, after);
	UKT_ASSERT(!memcmp(ref, after, nthreads * sizeof(ref[0])));
	UKT_EQ(atomic_load(&late), 0);
	char buf[256] = "";
	FILE *f = fmemopen(buf, sizeof(buf), "w");
	UKT_EQ(kprobes_list(f), 0);
	fclose(f);
	UKT_STREQ(buf, "");
	free(rps);
}

UKT_CASE_T(zlib_every_function_kretprobed_optimized, 120)
{
	run_case(1, 2, 1 << 20, 3);
}

UKT_CASE_T(zlib_every_function_kretprobed_breakpoint, 120)
{
	run_case(0, 1, 48 << 10, 3);
}
