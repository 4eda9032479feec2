/* SPDX-License-Identifier: MIT */
/*
 * zlibwork: the zlib workloads of tests/real/zlib.c, shared with the
 * every-instruction measure of tools/ukp-reach.c.  Deterministic inputs
 * (text, random, zeros, ramp, repeats) and three workloads whose results
 * go into a sink without library calls:
 *
 *   wl_every   small inputs through every API path we can reach (levels,
 *              strategies, window sizes, flushes, dictionaries, gzip
 *              headers, inflateBack, corrupt streams, checksums)
 *   wl_1mb     1 MiB round trips and a stream
 *   wl_gz      gzwrite/gzread/gzprintf ... through a memfd
 *
 * `calls` counts the workload's compress2() calls.  Call inputs_setup()
 * once first.  Header-only, like everyinsn.h.
 */
#ifndef UKT_ZLIBWORK_H
#define UKT_ZLIBWORK_H

#include <sys/mman.h>
#include <zlib.h>
#include "everyinsn.h"

static unsigned long calls;	/* compress2() calls by the workload */

/* ---- inputs ------------------------------------------------------------------- */

enum { TEXT, RANDOM, ZEROS, RAMP, REPEAT, NKINDS };

static unsigned char *make_input(int kind, size_t n, unsigned seed)
{
	static const char *const words[] = {
		"the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "probe",
		"kernel", "instruction", "breakpoint", "handler", "of", "and", "a",
		"compression", "deflate", "inflate", "window", "match", "literal", "\n",
	};
	unsigned char *p = mmap(NULL, n + 1, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	volatile unsigned char *v = p;
	size_t i = 0;

	UKT_ASSERT(p != MAP_FAILED);
	rng_seed(seed);
	switch (kind) {
	case TEXT:
		while (i < n) {
			const char *w = words[rng_below(sizeof(words) / sizeof(words[0]))];
			for (; *w && i < n; w++)
				v[i++] = (unsigned char)*w;
			if (i < n)
				v[i++] = rng_below(9) ? ' ' : ',';
		}
		break;
	case RANDOM:
		for (; i < n; i++)
			v[i] = (unsigned char)rng();
		break;
	case ZEROS:
		break;
	case RAMP:
		for (; i < n; i++)
			v[i] = (unsigned char)((i >> 1) ^ (i >> 9) ^ (i % 251 == 0 ? 0x55 : 0));
		break;
	default:
		for (; i < n; i++)
			v[i] = (unsigned char)"abcabcabd0123"[(i + i / 4096) % 13];
		break;
	}
	return p;
}

struct input {
	unsigned char *p;
	size_t n;
};

static struct input small[NKINDS][3], big[NKINDS];
static unsigned char *cbuf, *dbuf;	/* compressed, decompressed */
#define CBUF (4UL << 20)

EI_FN void inputs_setup(void)
{
	static const size_t sizes[3] = { 0, 300, 1500 };
	for (int k = 0; k < NKINDS; k++) {
		for (int s = 0; s < 3; s++) {
			size_t n = sizes[s] + (size_t)k * 37 * (s > 0);
			small[k][s].p = make_input(k, n, (unsigned)(k * 10 + s));
			small[k][s].n = n;
		}
		big[k].n = (1UL << 20) + (size_t)k;
		big[k].p = make_input(k, big[k].n, (unsigned)k + 100);
	}
	cbuf = mmap(NULL, CBUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	dbuf = mmap(NULL, CBUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
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

static void put_msg(struct ei_sink *s, const char *m)
{
	size_t n = 0;
	if (m)
		while (m[n])
			n++;
	ei_put_long(s, (long)n);
	ei_put(s, m ? m : "", n);
}

/* ---- workloads ---------------------------------------------------------------- */

/* UKT_VERBOSE=1: hits per phase of a probed run */
static struct ei_set *cur_set;
static unsigned long phase_last;

static void phase(const char *what)
{
	if (!cur_set || !ei_verbose())
		return;
	unsigned long t = 0;
	for (size_t i = 0; i < cur_set->n; i++)
		t += __atomic_load_n(&cur_set->pr[i].hits, __ATOMIC_RELAXED);
	printf("    phase %-28s %10lu hits\n", what, t - phase_last);
	phase_last = t;
}

/* compress2 + uncompress round trip; results into the sink */
static void round_trip(struct ei_sink *s, const struct input *in, int level)
{
	uLongf clen = compressBound(in->n);
	UKT_ASSERT(clen <= CBUF);
	int r = compress2(cbuf, &clen, in->p, in->n, level);
	calls++;
	ei_put_long(s, r);
	UKT_EQ(r, Z_OK);
	ei_put_long(s, (long)clen);
	ei_put(s, cbuf, clen);
	uLongf dlen = in->n + 1;
	r = uncompress(dbuf, &dlen, cbuf, clen);
	ei_put_long(s, r);
	ei_put_long(s, (long)dlen);
	UKT_EQ(r, Z_OK);
	UKT_EQ(dlen, in->n);
	UKT_ASSERT(same(dbuf, in->p, in->n));
	ei_put_long(s, (long)crc32(0, in->p, (uInt)in->n));
	ei_put_long(s, (long)adler32(1, in->p, (uInt)in->n));
}

/* deflate in pieces of `chunk` output bytes with a flush mode per call */
static size_t deflate_stream(struct ei_sink *s, const struct input *in, int level,
			     int wbits, int memlevel, int strategy, size_t chunk, int flush,
			     const unsigned char *dict, size_t dictlen)
{
	z_stream z;
	volatile unsigned char *vz = (volatile unsigned char *)&z;
	for (size_t i = 0; i < sizeof(z); i++)
		vz[i] = 0;
	int r = deflateInit2(&z, level, Z_DEFLATED, wbits, memlevel, strategy);
	ei_put_long(s, r);
	UKT_EQ(r, Z_OK);
	if (dict) {
		r = deflateSetDictionary(&z, dict, (uInt)dictlen);
		ei_put_long(s, r);
		ei_put_long(s, (long)z.adler);
	}
	if (wbits > 15 && wbits < 32) {
		static gz_header h;
		h.text = 1;
		h.time = 1234567;
		h.os = 3;
		h.name = (Bytef *)"probe.txt";
		h.comment = (Bytef *)"every instruction";
		h.hcrc = 1;
		r = deflateSetHeader(&z, &h);
		ei_put_long(s, r);
	}
	ei_put_long(s, (long)deflateBound(&z, in->n));
	z.next_in = in->p;
	size_t fed = 0, out = 0;
	int calls_ = 0;
	for (;;) {
		/* feed in slices, so flushes land in the middle */
		size_t slice = in->n / 5 + 1;
		if (z.avail_in == 0 && fed < in->n) {
			z.avail_in = (uInt)(in->n - fed < slice ? in->n - fed : slice);
			fed += z.avail_in;
		}
		z.next_out = cbuf + out;
		z.avail_out = (uInt)chunk;
		int f = fed < in->n ? flush : Z_FINISH;
		if (calls_ == 3 && level > 0 && f != Z_FINISH) {
			/* switch level and strategy mid-stream */
			r = deflateParams(&z, level == 9 ? 1 : 9, Z_DEFAULT_STRATEGY);
			ei_put_long(s, r);
		}
		r = deflate(&z, f);
		calls_++;
		out = z.total_out;
		if (r == Z_STREAM_END)
			break;
		if (r != Z_OK && r != Z_BUF_ERROR)
			UKT_FAIL("deflate = %d", r);
		UKT_ASSERT(out + chunk <= CBUF);
	}
	unsigned pend = 0;
	int bits = 0;
	ei_put_long(s, deflatePending(&z, &pend, &bits));
	ei_put_long(s, (long)z.total_in);
	ei_put_long(s, (long)z.total_out);
	ei_put_long(s, (long)z.adler);
	ei_put_long(s, z.data_type);
	ei_put(s, cbuf, out);
	ei_put_long(s, deflateEnd(&z));
	return out;
}

/* inflate cbuf[0..clen) in output pieces of `chunk`; checks the result */
static void inflate_stream(struct ei_sink *s, const struct input *in, size_t clen, int wbits,
			   size_t chunk, const unsigned char *dict, size_t dictlen, int in_step)
{
	z_stream z;
	volatile unsigned char *vz = (volatile unsigned char *)&z;
	for (size_t i = 0; i < sizeof(z); i++)
		vz[i] = 0;
	int r = inflateInit2(&z, wbits);
	ei_put_long(s, r);
	UKT_EQ(r, Z_OK);
	static gz_header h;
	static unsigned char name[64], comment[64];
	if (wbits > 15) {
		h.name = name;
		h.name_max = sizeof(name);
		h.comment = comment;
		h.comm_max = sizeof(comment);
		ei_put_long(s, inflateGetHeader(&z, &h));
	}
	size_t given = 0;
	z.next_in = cbuf;
	z.next_out = dbuf;
	for (int guard = 0;; guard++) {
		UKT_ASSERT(guard < 10000000);
		if (z.avail_in == 0 && given < clen) {
			size_t k = in_step ? (size_t)in_step : clen;
			z.avail_in = (uInt)(clen - given < k ? clen - given : k);
			given += z.avail_in;
		}
		z.avail_out = (uInt)chunk;
		r = inflate(&z, Z_NO_FLUSH);
		if (r == Z_NEED_DICT) {
			UKT_ASSERT(dict);
			ei_put_long(s, (long)z.adler);
			r = inflateSetDictionary(&z, dict, (uInt)dictlen);
			ei_put_long(s, r);
			continue;
		}
		if (r == Z_STREAM_END)
			break;
		if (r != Z_OK && r != Z_BUF_ERROR)
			UKT_FAIL("inflate = %d (%s)", r, z.msg ? z.msg : "");
	}
	ei_put_long(s, (long)z.total_out);
	ei_put_long(s, (long)z.adler);
	ei_put_long(s, inflateMark(&z));
	if (wbits > 15) {
		ei_put_long(s, h.done);
		ei_put_long(s, (long)h.time);
		put_msg(s, (char *)name);
		put_msg(s, (char *)comment);
	}
	UKT_EQ(z.total_out, in->n);
	UKT_ASSERT(same(dbuf, in->p, in->n));
	ei_put_long(s, inflateEnd(&z));
}

/* corrupt streams: the error paths, with zlib's messages */
static void inflate_corrupt(struct ei_sink *s, const struct input *in, size_t clen)
{
	for (int k = 0; k < 12 && clen > 4; k++) {
		size_t at = 2 + (size_t)k * 7 % (clen - 3);
		cbuf[at] ^= (unsigned char)(1u << (k % 8));
		z_stream z;
		volatile unsigned char *vz = (volatile unsigned char *)&z;
		for (size_t i = 0; i < sizeof(z); i++)
			vz[i] = 0;
		UKT_EQ(inflateInit(&z), Z_OK);
		z.next_in = cbuf;
		z.avail_in = (uInt)clen;
		z.next_out = dbuf;
		z.avail_out = (uInt)(in->n + 64);
		int r = inflate(&z, Z_FINISH);
		ei_put_long(s, r);
		put_msg(s, r < 0 ? z.msg : NULL);
		ei_put_long(s, (long)z.total_out);
		if (r == Z_DATA_ERROR) {
			r = inflateSync(&z);
			ei_put_long(s, r);
		}
		inflateEnd(&z);
		cbuf[at] ^= (unsigned char)(1u << (k % 8));
	}
}

/* inflateBack: zlib calls our in/out functions */
static unsigned char *back_out;
static size_t back_n;

static unsigned back_in(void *d, z_const unsigned char **buf)
{
	struct input *c = d;
	*buf = c->p;
	unsigned n = (unsigned)c->n;
	c->n = 0;
	return n;
}

static int back_put(void *d, unsigned char *buf, unsigned len)
{
	(void)d;
	volatile unsigned char *v = back_out + back_n;
	for (unsigned i = 0; i < len; i++)
		v[i] = buf[i];
	back_n += len;
	return 0;
}

static void inflate_back(struct ei_sink *s, const struct input *in, size_t rawlen)
{
	static unsigned char window[32768];
	z_stream z;
	volatile unsigned char *vz = (volatile unsigned char *)&z;
	for (size_t i = 0; i < sizeof(z); i++)
		vz[i] = 0;
	int r = inflateBackInit(&z, 15, window);
	UKT_EQ(r, Z_OK);
	struct input c = { cbuf, rawlen };
	back_out = dbuf;
	back_n = 0;
	r = inflateBack(&z, back_in, &c, back_put, NULL);
	ei_put_long(s, r);
	UKT_EQ(r, Z_STREAM_END);
	UKT_EQ(back_n, in->n);
	UKT_ASSERT(same(dbuf, in->p, in->n));
	ei_put_long(s, inflateBackEnd(&z));
}

static void checksums(struct ei_sink *s)
{
	const unsigned char *p = big[RANDOM].p;
	for (size_t len = 0; len <= 300; len++) {
		size_t o = len % 16;
		if (len > 40 && len % 3)
			continue;
		ei_put_long(s, (long)crc32(0, p + o, (uInt)len));
		ei_put_long(s, (long)adler32(1, p + o, (uInt)len));
		if (len % 7 == 0) {
			ei_put_long(s, (long)crc32_z(0x12345678, p + o + 1, len));
			ei_put_long(s, (long)adler32_z(len, p + o + 3, len));
		}
	}
	uLong a = crc32(0, p, 5000), b = crc32(0, p + 5000, 7000);
	ei_put_long(s, (long)crc32_combine(a, b, 7000));
	ei_put_long(s, (long)crc32(0, p, 12000));
	uLong op = crc32_combine_gen(7000);
	ei_put_long(s, (long)crc32_combine_op(a, b, op));
	a = adler32(1, p, 5000);
	b = adler32(1, p + 5000, 7000);
	ei_put_long(s, (long)adler32_combine(a, b, 7000));
	ei_put_long(s, (long)adler32(1, p, 12000));
	ei_put_long(s, (long)crc32(0, p + 1, 8192));
	ei_put_long(s, (long)adler32(1, p + 1, 8192));
	ei_put_long(s, (long)crc32(0, NULL, 0));
	ei_put_long(s, (long)get_crc_table()[255]);
}

EI_FN void wl_every(struct ei_sink *s)
{
	/* with 1, 6 and 9 below: every level's configuration */
	static const int levels[] = { 0, 2, 3, 4, 5, 7, 8 };
	static const struct { int wbits, memlevel, strategy; size_t chunk; int flush; } modes[] = {
		{ 15, 8, Z_DEFAULT_STRATEGY, 1 << 16, Z_NO_FLUSH },
		{ 15, 8, Z_FILTERED, 1 << 16, Z_SYNC_FLUSH },
		{ 15, 9, Z_HUFFMAN_ONLY, 1 << 16, Z_NO_FLUSH },
		{ 15, 8, Z_RLE, 1 << 16, Z_FULL_FLUSH },
		{ 15, 1, Z_FIXED, 1 << 16, Z_PARTIAL_FLUSH },
		{ -15, 8, Z_DEFAULT_STRATEGY, 1 << 16, Z_BLOCK },
		{ 31, 8, Z_DEFAULT_STRATEGY, 1 << 16, Z_NO_FLUSH },	/* gzip */
		{ 9, 2, Z_DEFAULT_STRATEGY, 1 << 16, Z_SYNC_FLUSH },	/* smallest window */
		{ 15, 8, Z_DEFAULT_STRATEGY, 7, Z_NO_FLUSH },		/* tiny output */
	};

	/*
	 * Every block costs tens of thousands of instructions of tree
	 * building whatever its size, so: few blocks, chosen paths.
	 */
	static const int big_level[NKINDS] = { 4, 1, 9, 6, 2 };
	for (int k = 0; k < NKINDS; k++) {
		if (k == TEXT || k == ZEROS)
			round_trip(s, &small[k][0], k == TEXT ? 6 : Z_DEFAULT_COMPRESSION);
		round_trip(s, &small[k][1], 1);
		round_trip(s, &small[k][1], 6);
		round_trip(s, &small[k][1], 9);
		round_trip(s, &small[k][2], big_level[k]);
	}
	/* the other levels' configurations (deflate_stored/fast/slow) */
	for (size_t l = 0; l < sizeof(levels) / sizeof(levels[0]); l++)
		round_trip(s, &small[TEXT][1], levels[l]);
	phase("round trips");
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		for (int j = 0; j < 2; j++) {
			const struct input *in = &small[(m + 2 * (size_t)j) % NKINDS][1];
			int level = (int)(m * 4 % 10);
			size_t clen = deflate_stream(s, in, level, modes[m].wbits, modes[m].memlevel,
						     modes[m].strategy, modes[m].chunk,
						     modes[m].flush, NULL, 0);
			int iw = modes[m].wbits < 0 ? -15 : modes[m].wbits > 15 ? 47 : 15;
			/* output in big and in tiny pieces (inflate_fast vs not) */
			if (j == 0)
				inflate_stream(s, in, clen, iw, 1 << 16, NULL, 0, 0);
			else
				inflate_stream(s, in, clen, iw, 1 + m, NULL, 0, (int)(3 + m));
			if (m == 5 && j == 0)
				inflate_back(s, in, clen);
			if (m == 0 && j == 0)
				inflate_corrupt(s, in, clen);
		}
	}
	phase("streams");
	/* a preset dictionary */
	{
		const struct input *in = &small[TEXT][1], *dict = &small[TEXT][2];
		size_t clen = deflate_stream(s, in, 6, 15, 8, Z_DEFAULT_STRATEGY, 1 << 16,
					     Z_NO_FLUSH, dict->p, 1000);
		inflate_stream(s, in, clen, 15, 1 << 16, dict->p, 1000, 0);
	}
	phase("dictionary");
	/* deflatePrime, deflateCopy, deflateReset, inflateCopy, inflatePrime */
	{
		z_stream a, b;
		volatile unsigned char *va = (volatile unsigned char *)&a;
		for (size_t i = 0; i < sizeof(a); i++)
			va[i] = 0;
		UKT_EQ(deflateInit2(&a, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
		ei_put_long(s, deflatePrime(&a, 3, 5));
		ei_put_long(s, deflateTune(&a, 16, 64, 128, 512));
		a.next_in = small[TEXT][1].p;
		a.avail_in = 300;
		a.next_out = cbuf;
		a.avail_out = 1 << 16;
		ei_put_long(s, deflate(&a, Z_NO_FLUSH));
		ei_put_long(s, deflateCopy(&b, &a));
		b.next_in = small[TEXT][1].p + 300;
		b.avail_in = 400;
		ei_put_long(s, deflate(&b, Z_FINISH));
		ei_put_long(s, (long)b.total_out);
		ei_put(s, cbuf, b.total_out);
		ei_put_long(s, deflateReset(&a));
		ei_put_long(s, deflateEnd(&a));
		ei_put_long(s, deflateEnd(&b));
	}
	phase("copy/prime");
	checksums(s);
	phase("checksums");
	ei_put(s, zlibVersion(), 6);
	ei_put_long(s, (long)zlibCompileFlags());
	put_msg(s, zError(Z_DATA_ERROR));
}

EI_FN void wl_1mb(struct ei_sink *s)
{
	static const int levels[] = { 1, 6, 9 };
	for (int k = 0; k < NKINDS; k++) {
		if (k == REPEAT)
			continue;
		round_trip(s, &big[k], levels[k % 3]);
		phase("1 MiB round trip");
		if (k == TEXT)
			round_trip(s, &big[k], 0);
		phase("1 MiB round trip, level 0");
	}
	/* streaming the text with a sync flush every fifth */
	size_t clen = deflate_stream(s, &big[TEXT], 4, 15, 8, Z_DEFAULT_STRATEGY, 1 << 20,
				     Z_SYNC_FLUSH, NULL, 0);
	inflate_stream(s, &big[TEXT], clen, 15, 1 << 20, NULL, 0, 0);
	phase("1 MiB stream");
}

/* gz*: through a memfd, zlib's own buffering and state machine */
EI_FN void wl_gz(struct ei_sink *s)
{
	int fd = memfd_create("ukt-gz", 0);
	UKT_ASSERT(fd >= 0);
	/* compress2 once, so the entry check has a call to count */
	round_trip(s, &small[TEXT][1], 6);

	gzFile g = gzdopen(dup(fd), "wb9");
	UKT_ASSERT(g);
	ei_put_long(s, gzbuffer(g, 1024));
	ei_put_long(s, gzwrite(g, small[TEXT][2].p, (unsigned)small[TEXT][2].n));
	ei_put_long(s, gzputs(g, "\na line of its own\n"));
	ei_put_long(s, gzputc(g, 'Z'));
	ei_put_long(s, gzsetparams(g, 1, Z_FILTERED));
	ei_put_long(s, gzwrite(g, small[RAMP][2].p, (unsigned)small[RAMP][2].n));
	ei_put_long(s, gzflush(g, Z_SYNC_FLUSH));
	ei_put_long(s, (long)gzfwrite(small[RANDOM][1].p, 7, small[RANDOM][1].n / 7, g));
	ei_put_long(s, (long)gztell(g));
	ei_put_long(s, gzclose(g));

	off_t end = lseek(fd, 0, SEEK_END);
	ei_put_long(s, (long)end);
	UKT_ASSERT(end > 0 && (size_t)end < CBUF);
	UKT_EQ(pread(fd, cbuf, (size_t)end, 0), end);
	ei_put(s, cbuf, (size_t)end);

	UKT_EQ(lseek(fd, 0, SEEK_SET), 0);
	g = gzdopen(dup(fd), "rb");
	UKT_ASSERT(g);
	ei_put_long(s, gzdirect(g));
	int n = gzread(g, dbuf, (unsigned)small[TEXT][2].n);
	ei_put_long(s, n);
	UKT_EQ(n, (long)small[TEXT][2].n);
	UKT_ASSERT(same(dbuf, small[TEXT][2].p, small[TEXT][2].n));
	char line[64];
	char *l = gzgets(g, line, sizeof(line));
	put_msg(s, l);
	l = gzgets(g, line, sizeof(line));
	put_msg(s, l);
	ei_put_long(s, gzgetc(g));
	ei_put_long(s, gzungetc('Y', g));
	ei_put_long(s, gzgetc(g));
	ei_put_long(s, (long)gzseek(g, 100, SEEK_CUR));
	n = gzread(g, dbuf, 1 << 20);
	ei_put_long(s, n);
	ei_put(s, dbuf, n > 0 ? (size_t)n : 0);
	ei_put_long(s, gzeof(g));
	ei_put_long(s, gzrewind(g));
	n = (int)gzfread(dbuf, 1, 333, g);
	ei_put_long(s, n);
	ei_put(s, dbuf, 333);
	int err;
	put_msg(s, gzerror(g, &err));
	ei_put_long(s, err);
	ei_put_long(s, gzclose(g));
	close(fd);
}

#endif
