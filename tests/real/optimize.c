/* SPDX-License-Identifier: MIT */
/*
 * real-optimize: jump-optimized probes (kprobes.txt section 1.4) on real
 * library code nobody here wrote, checked as tests/real/libc.c checks
 * breakpoint probes: the program computes exactly what it computes
 * without probes, and every probe counts exactly what ran.
 *
 * Each case
 *   1. runs a deterministic workload twice without probes (the reference,
 *      and a check that the workload is deterministic);
 *   2. collects the root functions (an IFUNC: the implementation calls
 *      reach) and what they reach by direct calls and jumps inside the
 *      library, leaving out malloc and free's family (their paths depend
 *      on the heap the engine's own allocations leave, so their hit
 *      counts are not repeatable);
 *   3. registers counting pre_handlers (pre only: optimizable); cases
 *      opt_F_MODE for F in qsort strtod snprintf memcpy strlen:
 *        _every   every instruction boundary: most regions hold another
 *                 probe, so only a few probes can be optimized (long
 *                 instructions);
 *        _entries every function entry, two levels of callees deeper:
 *                 the common use, most optimized;
 *        _stride  every 5th boundary of each function (and each entry);
 *      calls wait_for_kprobe_optimizer(), counts KPROBE_FLAG_OPTIMIZED,
 *      prints the share and (but for _every) checks kprobes_list() says
 *      [OPTIMIZED] as often;
 *   4. reruns the workload: byte-identical results, the root's entry probe
 *      hit exactly once per call of the root, more hits than calls (but
 *      for strlen's lone entry probe), no nmissed, every handler saw
 *      regs->ip == the probed address;
 *   5. kprobes_set_optimization(0): no probe optimized any more; reruns:
 *      identical results and, probe by probe, exactly the hits of the
 *      optimized run (a detour counts what a breakpoint counts);
 *      kprobes_set_optimization(1): the same number optimized again;
 *   6. unregisters the optimized probes, reruns: identical results, no
 *      handler ran after unregister_kprobes() returned;
 *   7. last, requires the share of step 3: > 0 for _every, at least
 *      MIN_SHARE_ENTRIES / MIN_SHARE_STRIDE percent for the others (last,
 *      so that an engine that optimizes less still gets checked above).
 *
 * The memcpy workload also calls mempcpy: glibc's
 * __mempcpy_avx_unaligned_erms jumps to __memmove_avx_unaligned_erms+3,
 * inside the 5-byte region of a jump at memcpy's entry - from another
 * function.  Its results must stay identical too.
 *
 * opt_zlib_entries: every function of libz.so.1 (from .eh_frame, static ones
 * too), entry probes, a deflate/inflate round-trip workload, the same
 * steps.
 *
 * UKT_VERBOSE=1 prints the functions, the hits per function and when
 * each step starts.
 */
#include <float.h>
#include <stdbool.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <wchar.h>
#include <zlib.h>
#include "everyinsn.h"

/* step 7: share of probes optimized, percent */
#define MIN_SHARE_ENTRIES 50
#define MIN_SHARE_STRIDE 20
#define STRIDE 5

/* ---- the workload side ---------------------------------------------------- */

static unsigned long calls;		/* calls of the root, by the workload */

/* pages readable and writable, then a PROT_NONE page */
static unsigned char *guarded(size_t pages)
{
	unsigned char *m = mmap(NULL, (pages + 1) * 4096, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(m != MAP_FAILED);
	UKT_ASSERT(mprotect(m + pages * 4096, 4096, PROT_NONE) == 0);
	return m;
}

/* an exported function of any loaded object; an IFUNC: the implementation */
static void *sym(const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);
	if (!p)
		UKT_FAIL("dlsym(%s): %s", name, dlerror());
	return p;
}

/* ---- memcpy (and mempcpy) ------------------------------------------------------ */

static void *(*volatile f_memcpy)(void *, const void *, size_t);
static void *(*volatile f_mempcpy)(void *, const void *, size_t);
static unsigned char *mbuf;		/* 1 MiB + guard */
#define MBUF (1UL << 20)

static void mem_setup(void)
{
	f_memcpy = (void *(*)(void *, const void *, size_t))sym("memcpy");
	f_mempcpy = (void *(*)(void *, const void *, size_t))sym("mempcpy");
	if (!mbuf)
		mbuf = guarded(MBUF / 4096);
}

static const size_t big_lens[] = {
	301, 511, 512, 513, 1024, 2049, 4096, 4097, 8192, 16385, 65536 + 7, 300001,
};

/* copy len bytes from src+so to dst+do, with memcpy or mempcpy; sink it */
static void one_copy(struct ei_sink *s, int p, size_t len, size_t so, size_t dof,
		     unsigned seed)
{
	unsigned char *src = mbuf, *dst = mbuf + MBUF / 2;
	fill(src, len + so + 64, seed);
	fill(dst, len + dof + 64, ~seed);
	void *r;
	if (p) {
		r = f_mempcpy(dst + dof, src + so, len);
	} else {
		r = f_memcpy(dst + dof, src + so, len);
		calls++;
	}
	ei_put_long(s, (long)((unsigned char *)r - dst));
	ei_put(s, dst, len + dof + 32);
}

static void wl_memcpy(struct ei_sink *s)
{
	rng_seed(1);
	for (size_t len = 0; len <= 300; len++)
		for (int k = 0; k < 4; k++)
			one_copy(s, k == 3, len, rng_below(64), rng_below(64), (unsigned)rng());
	for (size_t i = 0; i < sizeof(big_lens) / sizeof(big_lens[0]); i++)
		for (int p = 0; p < 2; p++)
			one_copy(s, p, big_lens[i], (i * 7) & 63, (i * 13) & 63, (unsigned)i);
	/* reading right up to a guard page */
	for (size_t len = 0; len <= 300; len += 7) {
		unsigned char *src = mbuf + MBUF - len, *dst = mbuf;
		fill(src, len, (unsigned)len);
		void *r = f_memcpy(dst + 1, src, len);
		calls++;
		ei_put_long(s, (long)((unsigned char *)r - dst));
		r = f_mempcpy(dst + 3, src, len);
		ei_put_long(s, (long)((unsigned char *)r - dst));
		ei_put(s, dst, len + 4);
	}
}

/* ---- strlen ------------------------------------------------------------------ */

static size_t (*volatile f_strlen)(const char *);
static char *sbuf;			/* 64 KiB + guard */
#define SBUF (64UL << 10)

static void str_setup(void)
{
	f_strlen = (size_t (*)(const char *))sym("strlen");
	if (!sbuf)
		sbuf = (char *)guarded(SBUF / 4096);
}

static void make_str(char *p, size_t len, int span)
{
	volatile char *v = p;
	for (size_t i = 0; i < len; i++)
		v[i] = (char)('a' + rng_below((unsigned)span));
	v[len] = 0;
}

static void one_strlen(struct ei_sink *s, const char *p)
{
	size_t r = f_strlen(p);
	calls++;
	ei_put_long(s, (long)r);
}

static void wl_strlen(struct ei_sink *s)
{
	rng_seed(3);
	for (size_t len = 0; len <= 300; len++)
		for (size_t o = 0; o < 64; o += (len < 40 ? 3 : 17)) {
			make_str(sbuf + o, len, 26);
			one_strlen(s, sbuf + o);
		}
	/* the terminator is the last byte before the guard page */
	for (size_t len = 0; len <= 300; len += 3) {
		char *p = sbuf + SBUF - 1 - len;
		make_str(p, len, 26);
		one_strlen(s, p);
	}
	/* start offsets within a page's last 128 bytes */
	for (size_t o = 4096 - 128; o < 4096; o += 3) {
		make_str(sbuf + o, 200, 3);
		one_strlen(s, sbuf + o);
	}
	for (size_t len = 1000; len < 40000; len = len * 2 + 13) {
		make_str(sbuf + (len & 63), len, 26);
		one_strlen(s, sbuf + (len & 63));
	}
}

/* ---- strtod -------------------------------------------------------------------- */

static double (*volatile f_strtod)(const char *, char **);

static const char *const float_inputs[] = {
	"0", "-0", "1", "-1", "0.1", "0.5", "3.14159265358979323846", "1e308",
	"1.7976931348623157e308", "1.7976931348623159e308", "1e309", "-1e309",
	"2.2250738585072014e-308", "2.2250738585072011e-308", "4.9e-324", "5e-324",
	"2.4703282292062327e-324", "2.4703282292062328e-324", "1e-320", "1e-400",
	"9007199254740993", "9007199254740992.5", "123456789012345678901234567890",
	"0.000000000000000000000000000001234", "1e23", "8.5e-5", "  \t\n+12.5e+3xyz", ".5",
	"5.", "e5", "", "-", "+.", "1e", "1e+", "0x", "0x1", "0x1p-1074", "0x1p-1075",
	"0x1.fffffffffffffp1023", "0x1.fffffffffffff8p1023", "0X.8P-3",
	"0x1.00000000000008000001p0", "0x123456789abcdefp-30", "-0x0p0", "0xp1", "inf",
	"-INF", "Infinity", "infinit", "nan", "-nan", "NAN(0x123)", "nan(abc_123)", "nan(",
	"1,5", "0000000000000000000000000000000000001", "1e-2147483649", "1e2147483648",
	"0e9999999999",
};

static void strtod_setup(void)
{
	f_strtod = (double (*)(const char *, char **))sym("strtod");
}

static void one_strtod(struct ei_sink *s, const char *in)
{
	char *end;
	errno = 0;
	double d = f_strtod(in, &end);
	calls++;
	int e = errno;
	ei_put(s, &d, sizeof(d));
	ei_put_long(s, end - in);
	ei_put_long(s, e);
}

static void put_exp(volatile char *v, size_t *n, int ex)
{
	char t[8];
	int m = 0;
	if (ex < 0) {
		v[(*n)++] = '-';
		ex = -ex;
	}
	do
		t[m++] = (char)('0' + ex % 10);
	while (ex /= 10);
	while (m)
		v[(*n)++] = t[--m];
}

static void wl_strtod(struct ei_sink *s)
{
	char buf[400];

	for (size_t i = 0; i < sizeof(float_inputs) / sizeof(float_inputs[0]); i++)
		one_strtod(s, float_inputs[i]);
	rng_seed(7);
	/* random decimals: digits, point, exponent */
	for (int i = 0; i < 250; i++) {
		volatile char *v = buf;
		size_t n = 0, nd = 1 + rng_below(i % 25 == 0 ? 300 : 25);
		if (rng_below(3) == 0)
			v[n++] = rng_below(2) ? '-' : '+';
		size_t point = rng_below((unsigned)nd + 1);
		for (size_t k = 0; k < nd; k++) {
			if (k == point)
				v[n++] = '.';
			v[n++] = (char)('0' + rng_below(10));
		}
		if (rng_below(2)) {
			v[n++] = rng_below(2) ? 'e' : 'E';
			put_exp(v, &n, (int)rng_below(700) - 350);
		}
		v[n] = 0;
		one_strtod(s, buf);
	}
	/* random hex floats */
	for (int i = 0; i < 80; i++) {
		static const char hx[] = "0123456789abcdefABCDEF";
		volatile char *v = buf;
		size_t n = 0, nd = 1 + rng_below(20);
		v[n++] = '0';
		v[n++] = rng_below(2) ? 'x' : 'X';
		for (size_t k = 0; k < nd; k++) {
			if (k == nd / 2 && rng_below(2))
				v[n++] = '.';
			v[n++] = hx[rng_below(22)];
		}
		v[n++] = 'p';
		put_exp(v, &n, (int)rng_below(2300) - 1150);
		v[n] = 0;
		one_strtod(s, buf);
	}
}

/* ---- qsort ------------------------------------------------------------------------ */

static void (*volatile f_qsort)(void *, size_t, size_t, int (*)(const void *, const void *));
static void (*volatile f_qsort_r)(void *, size_t, size_t,
				  int (*)(const void *, const void *, void *), void *);
static unsigned long cmp_calls;
static unsigned char *qbuf;

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	cmp_calls++;
	return (x > y) - (x < y);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	cmp_calls++;
	return (x > y) - (x < y);
}

static int cmp_u8(const void *a, const void *b)
{
	cmp_calls++;
	return *(const unsigned char *)a - *(const unsigned char *)b;
}

/* first 2 bytes are the key; the rest is payload (stability shows) */
static int cmp_key16(const void *a, const void *b)
{
	const unsigned char *x = a, *y = b;
	cmp_calls++;
	return (x[0] << 8 | x[1]) - (y[0] << 8 | y[1]);
}

static int cmp_r(const void *a, const void *b, void *arg)
{
	return *(const int *)arg * cmp_key16(a, b);
}

static void sort_setup(void)
{
	f_qsort = (void (*)(void *, size_t, size_t, int (*)(const void *, const void *)))
		sym("qsort");
	f_qsort_r = (void (*)(void *, size_t, size_t,
			      int (*)(const void *, const void *, void *), void *))
		sym("qsort_r");
	if (!qbuf)
		qbuf = guarded(64);
}

/* kinds: random, sorted, reversed, all equal, few distinct, organ pipe */
static void gen(unsigned char *p, size_t n, size_t size, int kind)
{
	volatile unsigned char *v = p;
	for (size_t i = 0; i < n; i++) {
		unsigned key;
		switch (kind) {
		case 0: key = (unsigned)rng(); break;
		case 1: key = (unsigned)i * 3; break;
		case 2: key = (unsigned)(n - i) * 3; break;
		case 3: key = 42; break;
		case 4: key = (unsigned)rng_below(4); break;
		default: key = (unsigned)(i < n / 2 ? i : n - i); break;
		}
		for (size_t b = 0; b < size; b++)
			v[i * size + b] = (unsigned char)(b < 4 ? key >> (8 * (3 - b)) :
							  i * 7 + b);
	}
}

static void wl_qsort(struct ei_sink *s)
{
	static const size_t sizes[] = { 4, 8, 1, 2, 12, 24, 33 };
	static const size_t counts[] = { 0, 1, 2, 3, 5, 7, 8, 16, 17, 33, 70 };

	rng_seed(10);
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		size_t size = sizes[si];
		for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
			size_t n = counts[ci];
			int kind = (int)((si + ci) % 6);
			gen(qbuf, n, size, kind);
			cmp_calls = 0;
			if (size == 4 && kind != 4)
				f_qsort(qbuf, n, size, cmp_int);
			else if (size == 8 && kind != 4)
				f_qsort(qbuf, n, size, cmp_u64);
			else if (size >= 2)
				f_qsort(qbuf, n, size, cmp_key16);
			else
				f_qsort(qbuf, n, size, cmp_u8);
			calls++;
			ei_put_long(s, (long)cmp_calls);
			ei_put(s, qbuf, n * size);
		}
	}
	/* big enough for a malloc'd temporary (> 1 KiB) */
	for (int kind = 0; kind < 6; kind += 2) {
		gen(qbuf, 120, 24, kind);
		f_qsort(qbuf, 120, 24, cmp_key16);
		calls++;
		ei_put(s, qbuf, 120 * 24);
	}
	/* qsort_r reaches the same code; not counted as qsort calls */
	for (int dir = -1; dir <= 1; dir += 2) {
		gen(qbuf, 60, 40, 4);
		f_qsort_r(qbuf, 60, 40, cmp_r, &dir);
		ei_put(s, qbuf, 60 * 40);
	}
}

/* ---- snprintf ---------------------------------------------------------------------- */

static int (*volatile f_snprintf)(char *, size_t, const char *, ...);
static char pbuf[4096];

static void printf_setup(void)
{
	f_snprintf = (int (*)(char *, size_t, const char *, ...))sym("snprintf");
}

static void put_printed(struct ei_sink *s, int r, size_t cap)
{
	ei_put_long(s, r);
	if (cap)
		ei_put(s, pbuf, my_strlen(pbuf) + 1);
}

/* P(cap, fmt, args...): one counted snprintf into pbuf */
#define P(cap, ...) do {						\
	size_t cap_ = (cap);						\
	int r_ = f_snprintf(cap_ ? pbuf : NULL, cap_, __VA_ARGS__);	\
	calls++;							\
	put_printed(s, r_, cap_);					\
} while (0)

static void wl_snprintf(struct ei_sink *s)
{
	static const int ints[] = { 0, -1, 42, INT_MAX, INT_MIN, 255 };
	static const char *const ifmts[] = {
		"%d", "%u", "%x", "%#X", "%#o", "%-5d|", "%05d", "%+d", "% d", "%.3d",
		"%hhd", "%c", "%-+08d|",
	};
	static const double dbls[] = {
		0.0, -0.0, 1.0, -1.5, 0.1, 2.5, 1e300, 5e-324, 123456789.123456789, 1e23,
		DBL_MAX, 1.0 / 3.0,
	};
	static const char *const dfmts[] = {
		"%f", "%.0f", "%.20f", "%e", "%#.0e", "%.15e", "%g", "%.17g", "%#g", "%a",
		"%.3A", "%10.4f|", "%-12.3e|", "% .2f", "%013.4f",
	};

	for (size_t f = 0; f < sizeof(ifmts) / sizeof(ifmts[0]); f++)
		for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#pragma GCC diagnostic ignored "-Wformat-security"
			P(sizeof(pbuf), ifmts[f], ints[i]);
#pragma GCC diagnostic pop
		}
	for (size_t f = 0; f < sizeof(dfmts) / sizeof(dfmts[0]); f++)
		for (size_t i = 0; i < sizeof(dbls) / sizeof(dbls[0]); i++) {
			if (dbls[i] == DBL_MAX && f != 3)
				continue;	/* %f of DBL_MAX: 300 digits */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#pragma GCC diagnostic ignored "-Wformat-security"
			P(sizeof(pbuf), dfmts[f], dbls[i]);
#pragma GCC diagnostic pop
		}
	P(sizeof(pbuf), "%lld %llx %llo %llu", LLONG_MIN, LLONG_MAX, 1LL << 40, 12345ULL);
	P(sizeof(pbuf), "%jd %zd %td %ld", (intmax_t)-7, (ssize_t)8, (ptrdiff_t)-9, 10L);
	double inf = HUGE_VAL, nan_ = NAN;
	P(sizeof(pbuf), "%f %F %e %g %a", inf, -inf, inf, -inf, inf);
	P(sizeof(pbuf), "%f %F %e %g %a", nan_, -nan_, nan_, nan_, nan_);
	P(sizeof(pbuf), "%Lf %Le %Lg %La", 1.5L, 1e4000L, 3.0L / 7, 1e-4000L);
	P(sizeof(pbuf), "%s|%10s|%-10s|%.2s|%*s|%-*.*s|", "abc", "abc", "abc", "abc", 7, "x",
	  9, 3, "abcdef");
	P(sizeof(pbuf), "%s", (char *)NULL);
	P(sizeof(pbuf), "%%|%c%c|%5c|%-3c|", 'a', 0x80 | 'b', 'x', 'y');
	P(sizeof(pbuf), "%2$s %1$d %3$.2f %2$s", 17, "pos", 2.5);
	P(sizeof(pbuf), "%p %p", (void *)0, (void *)0x1234abcd);
	P(sizeof(pbuf), "%ls|%lc|%5ls|", L"wide", (wint_t)L'w', L"ab");
	P(sizeof(pbuf), "%300d|", 5);
	int nn = -1;
	P(sizeof(pbuf), "abc%n def", &nn);
	ei_put_long(s, nn);
	/* truncation, and counting only */
	for (size_t cap = 0; cap < 24; cap += 3)
		P(cap, "%s-%d-%f-%x", "truncated output", 123456, 2.75, 0xdeadbeefu);
	P(0, "%100d%100s", 1, "x");
	rng_seed(12);
	for (int i = 0; i < 40; i++) {
		uint64_t bits = rng();
		double d;
		volatile unsigned char *dv = (volatile unsigned char *)&d;
		for (int k = 0; k < 8; k++)
			dv[k] = (unsigned char)(bits >> (8 * k));
		if (isnan(d))
			continue;
		P(sizeof(pbuf), "%.17g %a %.3e", d, d, d);
		P(sizeof(pbuf), "%ld %lx", (long)bits, (unsigned long)bits);
	}
}

/* ---- zlib ------------------------------------------------------------------------------ */

static unsigned char *zin[4], *cbuf, *dbuf;
static size_t zin_n[4];
#define ZBUF (1UL << 20)

static void zlib_setup(void)
{
	static const char *const words[] = {
		"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "probe",
		"detour", "buffer", "jump", "optimized", "region", "\n",
	};
	if (cbuf)
		return;
	for (int k = 0; k < 4; k++) {
		size_t n = (size_t)(k == 0 ? 48000 : 20000) + (size_t)k * 37, i = 0;
		volatile unsigned char *v;
		zin[k] = mmap(NULL, n + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			      -1, 0);
		UKT_ASSERT(zin[k] != MAP_FAILED);
		zin_n[k] = n;
		v = zin[k];
		rng_seed((uint64_t)k + 40);
		while (i < n) {
			switch (k) {
			case 0: {	/* text */
				const char *w = words[rng_below(sizeof(words) / sizeof(words[0]))];
				for (; *w && i < n; w++)
					v[i++] = (unsigned char)*w;
				if (i < n)
					v[i++] = ' ';
				break;
			}
			case 1:	/* random */
				v[i++] = (unsigned char)rng();
				break;
			case 2:	/* zeros */
				v[i++] = 0;
				break;
			default:	/* ramp */
				v[i] = (unsigned char)((i >> 1) ^ (i >> 9) ^ (i % 251 == 0 ? 0x55 : 0));
				i++;
				break;
			}
		}
	}
	cbuf = mmap(NULL, ZBUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	dbuf = mmap(NULL, ZBUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	UKT_ASSERT(cbuf != MAP_FAILED && dbuf != MAP_FAILED);
}

static int same(const unsigned char *a, const unsigned char *b, size_t n)
{
	const volatile unsigned char *x = a, *y = b;
	for (size_t i = 0; i < n; i++)
		if (x[i] != y[i])
			return 0;
	return 1;
}

static void zero_stream(z_stream *z)
{
	volatile unsigned char *v = (volatile unsigned char *)z;
	for (size_t i = 0; i < sizeof(*z); i++)
		v[i] = 0;
}

/* compress2 + uncompress; counts compress2 calls */
static void z_round_trip(struct ei_sink *s, int k, int level)
{
	uLongf clen = compressBound(zin_n[k]);
	UKT_ASSERT(clen <= ZBUF);
	int r = compress2(cbuf, &clen, zin[k], zin_n[k], level);
	calls++;
	UKT_EQ(r, Z_OK);
	ei_put_long(s, (long)clen);
	ei_put(s, cbuf, clen);
	uLongf dlen = zin_n[k] + 1;
	r = uncompress(dbuf, &dlen, cbuf, clen);
	ei_put_long(s, r);
	UKT_EQ(r, Z_OK);
	UKT_EQ(dlen, zin_n[k]);
	UKT_ASSERT(same(dbuf, zin[k], zin_n[k]));
	ei_put_long(s, (long)crc32(0, zin[k], (uInt)zin_n[k]));
	ei_put_long(s, (long)adler32(1, zin[k], (uInt)zin_n[k]));
}

/* deflate with a flush every slice and small output pieces, then inflate
 * in small pieces both ways (inflate_fast and the slow path) */
static void z_stream_trip(struct ei_sink *s, int k, int level, int wbits, int strategy,
			  int flush, size_t chunk)
{
	z_stream z;
	zero_stream(&z);
	UKT_EQ(deflateInit2(&z, level, Z_DEFLATED, wbits, 8, strategy), Z_OK);
	size_t fed = 0, out = 0, slice = zin_n[k] / 7 + 1;
	z.next_in = zin[k];
	for (;;) {
		if (z.avail_in == 0 && fed < zin_n[k]) {
			z.avail_in = (uInt)(zin_n[k] - fed < slice ? zin_n[k] - fed : slice);
			fed += z.avail_in;
		}
		z.next_out = cbuf + out;
		z.avail_out = (uInt)chunk;
		int r = deflate(&z, fed < zin_n[k] ? flush : Z_FINISH);
		out = z.total_out;
		if (r == Z_STREAM_END)
			break;
		if (r != Z_OK && r != Z_BUF_ERROR)
			UKT_FAIL("deflate = %d", r);
		UKT_ASSERT(out + chunk <= ZBUF);
	}
	ei_put_long(s, (long)out);
	ei_put_long(s, (long)z.adler);
	ei_put(s, cbuf, out);
	ei_put_long(s, deflateEnd(&z));

	for (int pass = 0; pass < 2; pass++) {
		z_stream y;
		zero_stream(&y);
		UKT_EQ(inflateInit2(&y, wbits > 15 ? 47 : wbits), Z_OK);
		size_t given = 0, step = pass ? 97 : out;
		y.next_in = cbuf;
		y.next_out = dbuf;
		for (int guard = 0;; guard++) {
			UKT_ASSERT(guard < 1000000);
			if (y.avail_in == 0 && given < out) {
				y.avail_in = (uInt)(out - given < step ? out - given : step);
				given += y.avail_in;
			}
			y.avail_out = pass ? 61 : (uInt)(ZBUF - y.total_out);
			int r = inflate(&y, Z_NO_FLUSH);
			if (r == Z_STREAM_END)
				break;
			if (r != Z_OK && r != Z_BUF_ERROR)
				UKT_FAIL("inflate = %d (%s)", r, y.msg ? y.msg : "");
		}
		ei_put_long(s, (long)y.total_out);
		ei_put_long(s, (long)y.adler);
		UKT_EQ(y.total_out, zin_n[k]);
		UKT_ASSERT(same(dbuf, zin[k], zin_n[k]));
		ei_put_long(s, inflateEnd(&y));
	}
}

static void wl_zlib(struct ei_sink *s)
{
	static const int levels[] = { 1, 6, 9, 0, 3 };
	for (int k = 0; k < 4; k++)
		for (int l = 0; l < (k == 0 ? 5 : 2); l++)
			z_round_trip(s, k, levels[(l + k) % 5]);
	z_stream_trip(s, 0, 6, 15, Z_DEFAULT_STRATEGY, Z_SYNC_FLUSH, 4096);
	z_stream_trip(s, 3, 4, 31, Z_FILTERED, Z_FULL_FLUSH, 333);
	z_stream_trip(s, 1, 1, -15, Z_HUFFMAN_ONLY, Z_NO_FLUSH, 1 << 16);
	z_stream_trip(s, 0, 9, 15, Z_RLE, Z_PARTIAL_FLUSH, 1000);
	z_stream_trip(s, 2, 2, 9, Z_FIXED, Z_BLOCK, 7);
}

/* a lighter round for a probe on every 5th instruction of libz (most
 * as breakpoints in step 5: ~7 us a hit) */
static void wl_zlib_light(struct ei_sink *s)
{
	z_round_trip(s, 1, 6);
	z_round_trip(s, 2, 1);
	z_stream_trip(s, 2, 2, 9, Z_FIXED, Z_BLOCK, 7);
}

/* ---- the generic case ---------------------------------------------------------------- */

/*
 * The malloc family: its paths depend on the heap the engine's own
 * allocations left, so hits per instruction would differ between runs.
 */
static const char *const heap_deny[] = {
	"malloc", "free", "realloc", "calloc", "cfree", "__libc_malloc", "__libc_free",
	"__libc_realloc", "__libc_calloc", "__malloc_*", "_int_*", "sysmalloc*", "malloc_*",
	"tcache_*", "arena_*", "_mid_memalign", "__libc_memalign", "unlink_chunk*",
	"alloc_perturb", "free_perturb", "mremap_chunk", "munmap_chunk", "systrim*",
	"__default_morecore", "__glibc_morecore", "_IO_*alloc*", "__mmap", "mmap*",
	"__munmap", "munmap", "mprotect", "__mprotect", "__madvise", "madvise",
	NULL,
};

struct target {
	const char *name;
	const char *obj;		/* needle of the loaded object */
	const char *roots[4];		/* dlsym names; roots[0] is counted */
	const char *spec;		/* symbol_name for the root's first probes */
	int depth;			/* closure depth; < 0: every function of obj */
	void (*setup)(void);
	void (*run)(struct ei_sink *);
	bool branchy;			/* _stride: some region with a branch
					   inside must be optimized and hit */
};

enum mode { M_EVERY, M_ENTRIES, M_STRIDE };
static const char *const mode_name[] = { "every instruction", "function entries",
					  "every 5th instruction" };

/* UKT_VERBOSE=1: where the time goes */
static double stage_t0;

static void stage(const struct target *t, const char *what)
{
	if (ei_verbose())
		printf("    [%s %7.2f s] %s\n", t->name, ei_now() - stage_t0, what);
}

static size_t count_optimized(const struct ei_set *set)
{
	size_t n = 0;
	for (size_t i = 0; i < set->n; i++)
		n += !!(__atomic_load_n(&set->pr[i].kp.flags, __ATOMIC_RELAXED) &
			KPROBE_FLAG_OPTIMIZED);
	return n;
}

/* lines of kprobes_list() that say [OPTIMIZED] */
static size_t listed_optimized(void)
{
	char *buf = NULL, *p;
	size_t len = 0, n = 0;
	FILE *f = open_memstream(&buf, &len);

	UKT_ASSERT(f);
	UKT_EQ(kprobes_list(f), 0);
	UKT_EQ(fclose(f), 0);
	for (p = buf; (p = strstr(p, "[OPTIMIZED]")); p++)
		n++;
	free(buf);
	return n;
}

/* one probed run: identical results, the root's entry counted right */
static void probed_run(const struct target *t, struct ei_set *set, struct ei_probe *entry,
		       struct ei_sink *ref, struct ei_sink *got, unsigned long ref_calls,
		       const char *what, double *secs)
{
	ei_set_zero(set);
	ei_sink_reset(got);
	calls = 0;
	double t0 = ei_now();
	t->run(got);
	*secs = ei_now() - t0;
	ei_set_snapshot(set);
	ei_sink_expect_same(ref, got, what);
	UKT_EQ(calls, ref_calls);
	if (set->snap[entry - set->pr] != calls)
		UKT_FAIL("%s: %s's entry probe hit %lu times in %lu calls%s", what, t->roots[0],
			 set->snap[entry - set->pr], calls,
			 entry->kp.flags & KPROBE_FLAG_OPTIMIZED ? " (optimized)" : "");
	ei_set_check(set, 0);
}

/* Does the 5-byte region of a jump at a hold a conditional branch (or a
 * system call) before its last instruction?  The detour's copy must go
 * on after it. */
static bool branch_inside_region(unsigned long a)
{
	unsigned long pc = a;
	bool inside = false;
	while (pc < a + 5) {
		ZydisDecodedInstruction d;
		if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(&ei_decoder, NULL, (const void *)pc, 15, &d)))
			return false;
		pc += d.length;
		if (pc < a + 5 && (d.meta.category == ZYDIS_CATEGORY_COND_BR ||
				   d.mnemonic == ZYDIS_MNEMONIC_SYSCALL))
			inside = true;
	}
	return inside;
}

static void run_opt(const struct target *t, enum mode mode)
{
	static struct ei_sink ref, got;
	static struct ei_obj obj;
	struct ei_fnset fns;
	struct ei_set set;
	unsigned long roots[4], ref_calls;
	size_t nroots = 0;
	double t0, t1, t_ref, t_opt, t_int3;

	stage_t0 = ei_now();
	ei_sink_init(&ref, 64UL << 20);
	ei_sink_init(&got, 64UL << 20);
	t->setup();

	/* 1. reference, and the workload's own determinism */
	calls = 0;
	t0 = ei_now();
	t->run(&ref);
	t_ref = ei_now() - t0;
	ref_calls = calls;
	UKT_ASSERT(ref_calls > 0);
	calls = 0;
	t->run(&got);
	ei_sink_expect_same(&ref, &got, "unprobed rerun");
	UKT_EQ(calls, ref_calls);

	/* 2. what to probe */
	for (; nroots < 4 && t->roots[nroots]; nroots++)
		roots[nroots] = (unsigned long)sym(t->roots[nroots]);
	if (t->depth >= 0) {
		ei_obj_load(&obj, t->obj, 0);
		/* entries are cheap: two levels more of callees */
		ei_closure(&obj, roots, nroots, t->depth + (mode == M_ENTRIES ? 2 : 0),
			   heap_deny, &fns);
	} else {
		/* every function (libz: from .eh_frame) */
		ei_obj_load(&obj, t->obj, 1);
		fns.n = obj.nfns;
		fns.v = malloc(obj.nfns * sizeof(*fns.v));
		UKT_ASSERT(fns.v);
		for (size_t i = 0; i < obj.nfns; i++)
			fns.v[i] = &obj.fns[i];
	}
	unsigned stride = mode == M_EVERY ? 1 : mode == M_STRIDE ? STRIDE : UINT_MAX;
	stage(t, "building the probe set");
	ei_set_build_stride(&set, &obj, fns, 0, t->spec, roots[0], 8, stride);
	struct ei_probe *entry = ei_set_probe_at(&set, roots[0]);
	if (!entry)
		UKT_FAIL("%s at %#lx is not probed", t->roots[0], roots[0]);
	for (size_t i = 0; ei_verbose() && i < fns.n; i++)
		printf("    %-36s %#lx, %lu bytes\n", fns.v[i]->name, fns.v[i]->start,
		       fns.v[i]->size);

	/* which regions hold a branch, read before any is patched */
	unsigned char *br = calloc(set.n + 1, 1);
	UKT_ASSERT(br);
	for (size_t i = 0; mode == M_STRIDE && i < set.n; i++)
		br[i] = branch_inside_region(set.pr[i].addr);

	/* 3. register, let the optimizer run */
	stage(t, "registering");
	warm_up();
	UKT_EQ(kprobes_get_optimization(), 1);
	t0 = ei_now();
	ei_set_register(&set);
	wait_for_kprobe_optimizer();
	t1 = ei_now();
	size_t nopt = count_optimized(&set);
	printf("  %s (%s): %zu functions, %zu probes; %zu optimized (%.1f%%) in %.2f s\n",
	       t->name, mode_name[mode], fns.n, set.n, nopt, 100.0 * (double)nopt / (double)set.n,
	       t1 - t0);
	/* (not with every instruction probed: the list is written through
	 * stdio's probed code, hundreds of breakpoint hits per line) */
	if (mode != M_EVERY)
		UKT_EQ(listed_optimized(), nopt);
	UKT_EQ(set.pr[0].kp.flags & KPROBE_FLAG_GONE, 0);

	/* 4. the optimized run */
	stage(t, "optimized run");
	probed_run(t, &set, entry, &ref, &got, ref_calls, "probed run (optimized)", &t_opt);
	unsigned long *snap_opt = malloc(set.n * sizeof(*snap_opt));
	unsigned char *opt_flag = malloc(set.n);
	UKT_ASSERT(snap_opt && opt_flag);
	for (size_t i = 0; i < set.n; i++) {
		snap_opt[i] = set.snap[i];
		opt_flag[i] = !!(set.pr[i].kp.flags & KPROBE_FLAG_OPTIMIZED);
	}
	size_t distinct, reached = 0, opt_hit = 0;
	unsigned long total = ei_set_total(&set, &distinct), total_opt = 0;
	for (size_t i = 0; i < set.n; i++) {
		if (set.pr[i].kp.flags & KPROBE_FLAG_OPTIMIZED) {
			total_opt += set.snap[i];
			opt_hit += set.snap[i] != 0;
		}
	}
	for (size_t f = 0; f < fns.n; f++)
		for (size_t i = 0; i < set.n; i++)
			if (set.pr[i].fn == f && set.snap[i]) {
				reached++;
				break;
			}
	ei_set_report(&set, t->name, ei_verbose());
	/* regions with a branch inside, optimized and run */
	size_t br_opt = 0, br_hit = 0;
	for (size_t i = 0; mode == M_STRIDE && i < set.n; i++)
		if ((set.pr[i].kp.flags & KPROBE_FLAG_OPTIMIZED) && br[i]) {
			br_opt++;
			br_hit += set.snap[i] != 0;
		}
	if (mode == M_STRIDE)
		printf("  %s: %zu optimized regions with a branch inside, %zu of them hit\n",
		       t->name, br_opt, br_hit);
	/* more probes than the entry ran (strlen's entry is all there is) */
	UKT_ASSERT(total > calls || (mode == M_ENTRIES && fns.n == 1));

	/* 5. the same probes as breakpoints: the same hits, probe by probe */
	stage(t, "knob 0, run as breakpoints");
	t0 = ei_now();
	UKT_EQ(kprobes_set_optimization(0), 0);
	wait_for_kprobe_optimizer();
	double t_unopt = ei_now() - t0;
	UKT_EQ(kprobes_get_optimization(), 0);
	UKT_EQ(count_optimized(&set), 0);
	probed_run(t, &set, entry, &ref, &got, ref_calls, "probed run (not optimized)", &t_int3);
	for (size_t i = 0; i < set.n; i++)
		if (set.snap[i] != snap_opt[i])
			UKT_FAIL("probe at %#lx (%s+%#lx)%s: %lu hits optimized, %lu as a breakpoint",
				 set.pr[i].addr, fns.v[set.pr[i].fn]->name,
				 set.pr[i].addr - fns.v[set.pr[i].fn]->start,
				 opt_flag[i] ? " (optimized)" : "",
				 snap_opt[i], set.snap[i]);
	t0 = ei_now();
	UKT_EQ(kprobes_set_optimization(1), 0);
	wait_for_kprobe_optimizer();
	double t_reopt = ei_now() - t0;
	UKT_EQ(count_optimized(&set), nopt);
	printf("  %s: %lu calls, %lu hits on %zu instructions of %zu reached functions; "
	       "%lu hits on %zu optimized probes\n", t->name, calls, total, distinct, reached,
	       total_opt, opt_hit);
	printf("  %s: runs: unprobed %.3f s, optimized %.3f s, as breakpoints %.3f s; "
	       "knob 0 %.2f s, knob 1 %.2f s\n", t->name, t_ref, t_opt, t_int3, t_unopt, t_reopt);

	/* 6. unregistered while optimized: same results, no handler runs */
	stage(t, "unregistering");
	ei_set_unregister(&set);
	ei_set_snapshot(&set);
	ei_sink_reset(&got);
	calls = 0;
	t->run(&got);
	ei_sink_expect_same(&ref, &got, "run after unregister");
	for (size_t i = 0; i < set.n; i++)
		if (__atomic_load_n(&set.pr[i].hits, __ATOMIC_RELAXED) != set.snap[i])
			UKT_FAIL("probe at %#lx ran after unregister_kprobes()", set.pr[i].addr);

	stage(t, "done");

	/* 7. the share */
	if (mode == M_STRIDE && t->branchy)	/* copies that go on after a branch ran */
		UKT_ASSERT(br_hit > 0);
	if (mode == M_EVERY)
		UKT_ASSERT(nopt > 0);
	else if (nopt * 100 < set.n * (mode == M_ENTRIES ? MIN_SHARE_ENTRIES : MIN_SHARE_STRIDE))
		UKT_FAIL("%zu of %zu probes optimized, want at least %d%%", nopt, set.n,
			 mode == M_ENTRIES ? MIN_SHARE_ENTRIES : MIN_SHARE_STRIDE);
	free(snap_opt);
	free(opt_flag);
	free(br);
}

static const struct target t_qsort = {
	"qsort", "libc.so.6", { "qsort", "qsort_r" }, "libc.so.6:qsort", 2, sort_setup,
	wl_qsort, .branchy = false,
};
static const struct target t_strtod = {
	"strtod", "libc.so.6", { "strtod" }, "libc.so.6:strtod", 3, strtod_setup, wl_strtod,
	.branchy = true,
};
static const struct target t_snprintf = {
	"snprintf", "libc.so.6", { "snprintf" }, "libc.so.6:snprintf", 3, printf_setup,
	wl_snprintf, .branchy = true,
};
static const struct target t_memcpy = {
	"memcpy", "libc.so.6", { "memcpy", "mempcpy" }, "libc.so.6:memcpy", 1, mem_setup,
	wl_memcpy, .branchy = false,
};
static const struct target t_strlen = {
	"strlen", "libc.so.6", { "strlen" }, "libc.so.6:strlen", 1, str_setup, wl_strlen,
	.branchy = false,
};
static const struct target t_zlib_light = {
	"zlib", "libz.so", { "compress2" }, "libz.so.1:compress2", -1, zlib_setup, wl_zlib_light,
	.branchy = true,
};
static const struct target t_zlib = {
	"zlib", "libz.so", { "compress2" }, "libz.so.1:compress2", -1, zlib_setup, wl_zlib,
	.branchy = true,
};

UKT_CASE_T(opt_qsort_every, 120) { run_opt(&t_qsort, M_EVERY); }
UKT_CASE_T(opt_strtod_every, 120) { run_opt(&t_strtod, M_EVERY); }
UKT_CASE_T(opt_snprintf_every, 120) { run_opt(&t_snprintf, M_EVERY); }
UKT_CASE_T(opt_memcpy_every, 120) { run_opt(&t_memcpy, M_EVERY); }
UKT_CASE_T(opt_strlen_every, 120) { run_opt(&t_strlen, M_EVERY); }

UKT_CASE_T(opt_qsort_entries, 60) { run_opt(&t_qsort, M_ENTRIES); }
UKT_CASE_T(opt_strtod_entries, 60) { run_opt(&t_strtod, M_ENTRIES); }
UKT_CASE_T(opt_snprintf_entries, 60) { run_opt(&t_snprintf, M_ENTRIES); }
UKT_CASE_T(opt_memcpy_entries, 60) { run_opt(&t_memcpy, M_ENTRIES); }
UKT_CASE_T(opt_strlen_entries, 60) { run_opt(&t_strlen, M_ENTRIES); }

UKT_CASE_T(opt_qsort_stride, 60) { run_opt(&t_qsort, M_STRIDE); }
UKT_CASE_T(opt_strtod_stride, 60) { run_opt(&t_strtod, M_STRIDE); }
UKT_CASE_T(opt_snprintf_stride, 60) { run_opt(&t_snprintf, M_STRIDE); }
UKT_CASE_T(opt_memcpy_stride, 60) { run_opt(&t_memcpy, M_STRIDE); }
UKT_CASE_T(opt_strlen_stride, 60) { run_opt(&t_strlen, M_STRIDE); }

UKT_CASE_T(opt_zlib_entries, 60) { run_opt(&t_zlib, M_ENTRIES); }
UKT_CASE_T(opt_zlib_stride, 120) { run_opt(&t_zlib_light, M_STRIDE); }
