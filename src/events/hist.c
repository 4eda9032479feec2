// SPDX-License-Identifier: MIT
/*
 * Hist triggers (the kernel's histogram.rst) for dynamic events.
 *
 * A trigger "hist:keys=..." is parsed into a struct ev_hspec against its
 * event's fields, by the target and again by the reader (the area holds
 * only the text), so both agree on the layout.  In the target each thread
 * aggregates into a table of its own (no atomics, no lock: open addressing
 * in a block of the area's histogram pool, found from its thread block);
 * the reader merges every thread's table, and keeps what exited threads
 * left.  docs/events.md, "Histograms".
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <ukprobes/events.h>
#include "ev_int.h"

/* ---- in the target ------------------------------------------------------------ */

int ev_hist_create(struct ukpev_event *ev, const char *text, size_t len, struct ev_hist **out,
		   struct ukpev_error *err)
{
	struct ev_hist *hs = calloc(1, sizeof(*hs));
	if (!hs)
		return -ENOMEM;
	int r = ev_hist_parse(&ev->info, text, len, &hs->spec, err);
	if (r) {
		free(hs);
		return r;
	}
	/* fields that are a register as it is: read from the registers */
	struct ev_hfield *fs[EV_HIST_MAX_KEYS + EV_HIST_MAX_VALS];
	unsigned nf = 0;
	for (unsigned k = 0; k < hs->spec.nkeys; k++)
		fs[nf++] = &hs->spec.keys[k];
	for (unsigned k = 0; k < hs->spec.nvals; k++)
		fs[nf++] = &hs->spec.vals[k];
	for (unsigned k = 0; k < nf; k++) {
		fs[k]->reg = -1;
		for (const struct ev_insn *in = ev->prog; fs[k]->kind == HF_ARG && in->op != OP_END;
		     in++)
			if (in->op == OP_REG_VAL && in->count == fs[k]->arg && !fs[k]->bf_width)
				fs[k]->reg = (int16_t)in->param;
	}
	struct ev_area_hdr *h = ev->area->hdr;
	uint32_t id = atomic_fetch_add(&h->nhists, 1);
	if (id >= EV_MAX_HISTS) {
		atomic_fetch_sub(&h->nhists, 1);
		ev_set_err(err, UKPEV_E_HIST_TOO_MANY_HISTS, 0);
		free(hs);
		return -ENOSPC;
	}
	struct ev_hist_meta *m = ev_hmeta(h, id);
	m->event = ev->id;
	m->text_off = ev_heap_str(h, text);	/* the reader parses it again */
	if (!m->text_off) {
		free(hs);
		return -ENOMEM;
	}
	atomic_store_explicit(&m->state, EV_HIST_META_LIVE, memory_order_release);
	hs->id = id;
	*out = hs;
	return 0;
}

/* ---- the reader ---------------------------------------------------------------- */

/* A merged map: entries of spec.entry_words words (tag first), at most
 * spec.size of them */
struct ev_hreader {
	bool parsed, bad;
	const char *filter;		/* in the area's heap */
	struct ev_hspec spec;
	unsigned cap, n;
	uint64_t *ents;
	uint64_t drops;
};

static struct ev_hreader *hreader(struct ukpev_reader *r, unsigned id)
{
	struct ev_area_hdr *h = r->h;
	if (id >= EV_MAX_HISTS)
		return NULL;
	struct ev_hist_meta *m = ev_hmeta(h, id);
	if (atomic_load_explicit(&m->state, memory_order_acquire) != EV_HIST_META_LIVE)
		return NULL;
	struct ev_hreader *hr = r->hists[id];
	if (!hr) {
		hr = calloc(1, sizeof(*hr));
		if (!hr)
			return NULL;
		r->hists[id] = hr;
	}
	if (!hr->parsed) {
		hr->parsed = true;
		const struct ukpev_event_info *ev = ukpev_reader_event(r, m->event);
		const char *text = NULL;
		if (m->text_off >= h->heap_off && m->text_off < h->heap_off + h->heap_size &&
		    memchr(ev_at(h, m->text_off), 0, h->heap_off + h->heap_size - m->text_off))
			text = ev_at(h, m->text_off);
		struct ukpev_error e;
		const char *ifp = NULL;
		hr->bad = !ev || !text ||
			  ev_hist_parse(ev, text, ev_trigger_split(text, &ifp), &hr->spec, &e);
		hr->filter = ifp ? ifp + 2 : NULL;
		while (hr->filter && (*hr->filter == ' ' || *hr->filter == '\t'))
			hr->filter++;
		if (!hr->bad) {
			hr->cap = hr->spec.size * 2;
			hr->ents = calloc(hr->cap, hr->spec.entry_words * 8);
			hr->bad = !hr->ents;
		}
	}
	return hr->bad ? NULL : hr;
}

/* Two histograms' entries mean the same (a name shares data only then:
 * the same keys and values, by name, kind and layout) */
static bool same_fields(const struct ev_hspec *a, const struct ev_hspec *b)
{
	if (a->nkeys != b->nkeys || a->nvals != b->nvals || a->size != b->size ||
	    a->key_words != b->key_words || a->entry_words != b->entry_words)
		return false;
	for (unsigned k = 0; k < a->nkeys + a->nvals; k++) {
		const struct ev_hfield *x = k < a->nkeys ? &a->keys[k] : &a->vals[k - a->nkeys];
		const struct ev_hfield *y = k < a->nkeys ? &b->keys[k] : &b->vals[k - a->nkeys];
		if (x->kind != y->kind || x->mod != y->mod || x->sign != y->sign ||
		    x->size != y->size || x->words != y->words || x->off != y->off ||
		    x->bf_width != y->bf_width || x->bf_shift != y->bf_shift ||
		    x->buckets != y->buckets || strcmp(x->name, y->name))
			return false;
	}
	return true;
}

/* Adds one entry (tag, key, counts) into map m: false if it is full. */
static bool merge_entry(struct ev_hreader *m, const uint64_t *src)
{
	const struct ev_hspec *sp = &m->spec;
	unsigned ew = sp->entry_words, mask = m->cap - 1;
	for (unsigned i = (unsigned)(src[0] >> 7) & mask;; i = (i + 1) & mask) {
		uint64_t *e = m->ents + (size_t)i * ew;
		if (e[0] == src[0] && !memcmp(e + 1, src + 1, sp->key_words * 8)) {
			for (unsigned w = 1 + sp->key_words; w < ew; w++)
				e[w] += src[w];
			return true;
		}
		if (!e[0]) {
			if (m->n >= sp->size)
				return false;
			memcpy(e, src, ew * 8);
			m->n++;
			return true;
		}
	}
}

/* Merges table t (a thread's) into m; zero: empty it afterwards. */
static void merge_table(struct ev_hreader *m, struct ev_htable *t, bool zero)
{
	const struct ev_hspec *sp = &m->spec;
	uint64_t *ents = (uint64_t *)(t + 1);
	unsigned ew = sp->entry_words;
	uint64_t tmp[1 + EV_HIST_MAX_KEYS * EV_HIST_STR_WORDS + 1 + EV_HIST_MAX_VALS];
	for (unsigned i = 0; i < sp->size; i++) {
		uint64_t *e = ents + (size_t)i * ew;
		uint64_t tag = __atomic_load_n(&e[0], __ATOMIC_ACQUIRE);
		if (!tag)
			continue;
		tmp[0] = tag;
		memcpy(tmp + 1, e + 1, sp->key_words * 8);
		for (unsigned w = 1 + sp->key_words; w < ew; w++)
			tmp[w] = __atomic_load_n(&e[w], __ATOMIC_RELAXED);
		if (!merge_entry(m, tmp))
			m->drops += tmp[1 + sp->key_words];
	}
	m->drops += __atomic_load_n(&t->drops, __ATOMIC_RELAXED);
	if (zero)
		memset(t, 0, sizeof(*t) + (size_t)sp->size * ew * 8);
}

static struct ev_htable *table_of(struct ev_area_hdr *h, const struct ev_tblock *tb, unsigned id,
				  const struct ev_hspec *sp)
{
	uint64_t off = tb->hist_off[id];
	size_t bytes = sizeof(struct ev_htable) + (size_t)sp->size * sp->entry_words * 8;
	if (!off || off < h->hpool_off || off + bytes > h->hpool_off + h->hpool_size)
		return NULL;
	return ev_at(h, off);
}

void ev_hist_retire(struct ukpev_reader *r, struct ev_tblock *tb)
{
	struct ev_area_hdr *h = r->h;
	uint32_t n = atomic_load(&h->nhists);
	pthread_mutex_lock(&r->hist_mu);
	for (unsigned id = 0; id < n && id < EV_MAX_HISTS; id++) {
		struct ev_hreader *hr = hreader(r, id);
		struct ev_htable *t = hr ? table_of(h, tb, id, &hr->spec) : NULL;
		if (t)
			merge_table(hr, t, true);
	}
	pthread_mutex_unlock(&r->hist_mu);
}

void ev_hist_reader_free(struct ukpev_reader *r)
{
	for (unsigned i = 0; i < EV_MAX_HISTS; i++) {
		if (r->hists[i])
			free(r->hists[i]->ents);
		free(r->hists[i]);
	}
}

unsigned ukpev_reader_nhists(struct ukpev_reader *r)
{
	if (!r)
		return 0;
	uint32_t n = atomic_load(&r->h->nhists);
	return n > EV_MAX_HISTS ? EV_MAX_HISTS : n;
}

int ukpev_reader_hist_event(struct ukpev_reader *r, unsigned id)
{
	if (!r || id >= ukpev_reader_nhists(r))
		return -EINVAL;
	struct ev_hist_meta *m = ev_hmeta(r->h, id);
	if (atomic_load_explicit(&m->state, memory_order_acquire) != EV_HIST_META_LIVE)
		return -EINVAL;
	return (int)m->event;
}

/* ---- printing ------------------------------------------------------------------ */

static int cmp_field(const struct ev_hspec *sp, const uint64_t *a, const uint64_t *b, int field)
{
	if (field < 100) {
		unsigned w = 1 + sp->key_words + (field < 0 ? 0 : 1 + (unsigned)field);
		return a[w] < b[w] ? -1 : a[w] > b[w];
	}
	const struct ev_hfield *f = &sp->keys[field - 100];
	const uint64_t *ka = a + 1 + f->off, *kb = b + 1 + f->off;
	if (f->kind == HF_STR)
		return strncmp((const char *)ka, (const char *)kb, f->words * 8);
	if (f->kind == HF_STACK)
		return memcmp(ka, kb, f->words * 8);
	if (f->sign && !f->mod)
		return (int64_t)*ka < (int64_t)*kb ? -1 : (int64_t)*ka > (int64_t)*kb;
	return *ka < *kb ? -1 : *ka > *kb;
}

static int cmp_entries(const void *pa, const void *pb, void *arg)
{
	const uint64_t *a = *(const uint64_t *const *)pa, *b = *(const uint64_t *const *)pb;
	const struct ev_hspec *sp = arg;
	for (unsigned s = 0; s < sp->nsort; s++) {
		int c = cmp_field(sp, a, b, sp->sort[s].field);
		if (c)
			return sp->sort[s].desc ? -c : c;
	}
	/* then by key, so equal counts print in one order every time */
	return memcmp(a + 1, b + 1, sp->key_words * 8);
}

static void print_field_spec(FILE *f, const struct ev_hfield *fl)
{
	fputs(fl->name, f);
	if (fl->mod && fl->kind != HF_STACK) {
		for (unsigned k = 0; k < EV_HMODS; k++)
			if (ev_hmods[k].mod == fl->mod)
				fprintf(f, ".%s", ev_hmods[k].name);
		if (fl->mod == HM_BUCKETS)
			fprintf(f, "=%llu", (unsigned long long)fl->buckets);
	}
}

/* the trigger as the kernel's trigger file shows it */
static void print_trigger(FILE *f, const struct ev_hspec *sp, const char *filter)
{
	fputs("hist:", f);
	if (sp->name[0])	/* the kernel keeps the attribute whole */
		fprintf(f, "name=%s:", sp->name);
	fputs("keys=", f);
	for (unsigned k = 0; k < sp->nkeys; k++) {
		if (k)
			fputc(',', f);
		print_field_spec(f, &sp->keys[k]);
	}
	fputs(":vals=hitcount", f);
	for (unsigned v = 0; v < sp->nvals; v++) {
		fputc(',', f);
		print_field_spec(f, &sp->vals[v]);
	}
	fputs(":sort=", f);
	for (unsigned s = 0; s < sp->nsort; s++) {
		int fl = sp->sort[s].field;
		if (s)
			fputc(',', f);
		if (fl == -1)
			fputs("hitcount", f);
		else if (fl < 100)
			print_field_spec(f, &sp->vals[fl]);
		else
			print_field_spec(f, &sp->keys[fl - 100]);
		if (sp->sort[s].desc)
			fputs(".descending", f);
	}
	fprintf(f, ":size=%u", sp->size);
	if (filter && *filter)
		fprintf(f, " if %s", filter);
	fputs(" [active]\n", f);
}

static void symname(ukpev_symbolize_fn sym, void *arg, unsigned long addr, bool with_off,
		    char *buf, size_t n)
{
	int len = sym ? sym(addr, buf, n, arg) : -1;
	if (len <= 0 || !buf[0]) {
		snprintf(buf, n, "0x%lx", addr);
		return;
	}
	/* "PATH[+0xOFF]": an address no symbol covers, in its object, is
	 * kept whole (its offset is all there is to name it by) */
	size_t bl = strlen(buf);
	bool in_obj = bl && buf[bl - 1] == ']' && strstr(buf, "[+0x") && !strchr(buf, ' ');
	if (!with_off && !in_obj) {	/* %ps: "sym [object]", without +0xOFF/0xSIZE */
		char *p = strstr(buf, "+0x");
		if (p) {
			char *q = p + strcspn(p, " ");
			memmove(p, q, strlen(q) + 1);
		}
	}
}

/* the name of thread/process pid as the reader knows it */
static void comm_of(struct ukpev_reader *r, uint64_t pid, char *out)
{
	struct ev_area_hdr *h = r->h;
	uint32_t hw = atomic_load(&h->threads_hw);
	for (uint32_t i = 0; i < hw && i < h->threads_max; i++) {
		struct ev_tblock *tb = ev_tb(h, i);
		if ((uint64_t)(uint32_t)tb->tid == pid && tb->comm[0]) {
			memcpy(out, tb->rcomm[0] ? tb->rcomm : tb->comm, 16);
			out[16] = 0;
			return;
		}
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/%llu/comm", (unsigned long long)pid);
	FILE *f = fopen(path, "re");
	if (f && fgets(out, 17, f)) {
		out[strcspn(out, "\n")] = 0;
		fclose(f);
		return;
	}
	if (f)
		fclose(f);
	strcpy(out, "<...>");
}

static void print_key(FILE *f, struct ukpev_reader *r, const struct ev_hspec *sp, const uint64_t *e,
		      ukpev_symbolize_fn sym, void *arg)
{
	bool multiline = false;
	char buf[512];
	fputs("{ ", f);
	for (unsigned k = 0; k < sp->nkeys; k++) {
		const struct ev_hfield *fl = &sp->keys[k];
		const uint64_t *kp = e + 1 + fl->off;
		unsigned long long v = *kp;
		if (k)
			fputs(", ", f);
		if (fl->kind == HF_STACK) {
			fputs("common_stacktrace:\n", f);
			for (unsigned w = 0; w < fl->words && kp[w]; w++) {
				symname(sym, arg, kp[w], true, buf, sizeof(buf));
				fprintf(f, "%9s%s\n", "", buf);
			}
			multiline = true;
		} else if (fl->kind == HF_STR) {
			char s[EV_HIST_STR_WORDS * 8 + 1];
			memcpy(s, kp, fl->words * 8);
			s[fl->words * 8] = 0;
			fprintf(f, "%s: %-50s", fl->name, s);
		} else if (fl->mod == HM_HEX) {
			fprintf(f, "%s: %llx", fl->name, v);
		} else if (fl->mod == HM_SYM || fl->mod == HM_SYMOFF) {
			symname(sym, arg, (unsigned long)v, fl->mod == HM_SYMOFF, buf, sizeof(buf));
			fprintf(f, fl->mod == HM_SYM ? "%s: [%llx] %-45s" : "%s: [%llx] %-55s",
				fl->name, v, buf);
		} else if (fl->mod == HM_EXEC) {
			char c[17];
			comm_of(r, v, c);
			fprintf(f, "%s: %-16s[%10llu]", fl->name, c, v);
		} else if (fl->mod == HM_LOG2) {
			fprintf(f, "%s: ~ 2^%-2llu", fl->name, v);
		} else if (fl->mod == HM_BUCKETS) {
			fprintf(f, "%s: ~ %llu-%llu", fl->name, v,
				v + (unsigned long long)fl->buckets - 1);
		} else if (fl->sign) {
			fprintf(f, "%s: %10lld", fl->name, (long long)v);
		} else {
			fprintf(f, "%s: %10llu", fl->name, v);
		}
	}
	if (!multiline)
		fputc(' ', f);
	fputc('}', f);
}

/* An entry's stacks as "outer;...;inner" (malloc'd), or NULL */
static char *folded_line(const struct ev_hspec *sp, const uint64_t *e, ukpev_symbolize_fn sym,
			 void *arg)
{
	char buf[512], *line = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&line, &len);
	if (!f)
		return NULL;
	bool any = false;
	for (unsigned k = 0; k < sp->nkeys; k++) {
		const struct ev_hfield *fl = &sp->keys[k];
		if (fl->kind != HF_STACK)
			continue;
		const uint64_t *kp = e + 1 + fl->off;
		unsigned n = 0;
		while (n < fl->words && kp[n])
			n++;
		for (unsigned i = n; i-- > 0;) {
			/* a return address names its caller: look up the call */
			symname(sym, arg, (unsigned long)kp[i] - (i ? 1 : 0), false, buf,
				sizeof(buf));
			if (i && strstr(buf, "[+0x"))	/* no name: the address itself */
				symname(sym, arg, (unsigned long)kp[i], false, buf, sizeof(buf));
			/* without the " [object]" of %ps (a name may hold blanks:
			 * a demangled one), no ';' in a frame */
			char *obj = strstr(buf, " [");
			if (obj)
				*obj = 0;
			for (char *q = buf; (q = strchr(q, ';')) != NULL;)
				*q = ':';
			fprintf(f, "%s%s", any ? ";" : "", buf);
			any = true;
		}
	}
	fclose(f);
	if (!any) {
		free(line);
		return NULL;
	}
	return line;
}

struct fold { char *line; uint64_t count; };

static int cmp_fold(const void *a, const void *b)
{
	return strcmp(((const struct fold *)a)->line, ((const struct fold *)b)->line);
}

/* one line per distinct stack (stacks that differ only in offsets or in
 * other keys are one), with the sum of their hitcounts */
static void print_folded(FILE *f, const struct ev_hspec *sp, uint64_t **order, unsigned n,
			 ukpev_symbolize_fn sym, void *arg)
{
	struct fold *fs = calloc(n ? n : 1, sizeof(*fs));
	unsigned m = 0;
	if (!fs)
		return;
	for (unsigned i = 0; i < n; i++) {
		char *l = folded_line(sp, order[i], sym, arg);
		if (l) {
			fs[m].line = l;
			fs[m++].count = order[i][1 + sp->key_words];
		}
	}
	qsort(fs, m, sizeof(*fs), cmp_fold);
	for (unsigned i = 0; i < m;) {
		unsigned j = i;
		uint64_t c = 0;
		while (j < m && !strcmp(fs[j].line, fs[i].line))
			c += fs[j++].count;
		fprintf(f, "%s %llu\n", fs[i].line, (unsigned long long)c);
		i = j;
	}
	for (unsigned i = 0; i < m; i++)
		free(fs[i].line);
	free(fs);
}

/* into m: histogram id's table of every live thread, and its drops */
static void merge_live(struct ev_hreader *m, struct ev_area_hdr *h, unsigned id)
{
	uint32_t hw = atomic_load(&h->threads_hw);
	for (uint32_t i = 0; i < hw && i < h->threads_max; i++) {
		struct ev_tblock *tb = ev_tb(h, i);
		if (atomic_load_explicit(&tb->state, memory_order_acquire) != EV_TB_LIVE)
			continue;
		struct ev_htable *t = table_of(h, tb, id, &m->spec);
		if (t)
			merge_table(m, t, false);
	}
	struct ev_hist_meta *meta = ev_hmeta(h, id);
	m->drops += atomic_load(&meta->nomem) + atomic_load(&meta->retired_drops);
}

int ukpev_reader_hist_print(struct ukpev_reader *r, unsigned id, FILE *f, int format,
			    ukpev_symbolize_fn sym, void *arg)
{
	if (!r || !f || id >= ukpev_reader_nhists(r) ||
	    (format != UKPEV_HIST_KERNEL && format != UKPEV_HIST_FOLDED))
		return -EINVAL;
	struct ev_area_hdr *h = r->h;
	pthread_mutex_lock(&r->hist_mu);
	struct ev_hreader *hr = hreader(r, id);
	if (!hr) {
		pthread_mutex_unlock(&r->hist_mu);
		return -EINVAL;
	}
	const struct ev_hspec *sp = &hr->spec;
	/* a copy of what retired threads left, plus every live table */
	struct ev_hreader m = { .spec = hr->spec, .cap = hr->cap, .n = hr->n, .drops = hr->drops };
	m.ents = malloc((size_t)m.cap * sp->entry_words * 8);
	if (!m.ents) {
		pthread_mutex_unlock(&r->hist_mu);
		return -ENOMEM;
	}
	memcpy(m.ents, hr->ents, (size_t)m.cap * sp->entry_words * 8);
	merge_live(&m, h, id);
	/* a named histogram's data are every trigger's of that name (with
	 * the same fields), as the kernel shares them: each shows the sum */
	for (unsigned j = 0; sp->name[0] && j < ukpev_reader_nhists(r); j++) {
		struct ev_hreader *o = j == id ? NULL : hreader(r, j);
		if (!o || strcmp(o->spec.name, sp->name) || !same_fields(&o->spec, sp))
			continue;
		for (unsigned i = 0; i < o->cap; i++) {
			const uint64_t *e = o->ents + (size_t)i * sp->entry_words;
			if (e[0] && !merge_entry(&m, e))
				m.drops += e[1 + sp->key_words];
		}
		m.drops += o->drops;
		merge_live(&m, h, j);
	}
	pthread_mutex_unlock(&r->hist_mu);
	uint64_t **order = malloc((m.n ? m.n : 1) * sizeof(*order));
	if (!order) {
		free(m.ents);
		return -ENOMEM;
	}
	unsigned n = 0;
	uint64_t hits = m.drops;
	for (unsigned i = 0; i < m.cap; i++) {
		uint64_t *e = m.ents + (size_t)i * sp->entry_words;
		if (e[0]) {
			order[n++] = e;
			hits += e[1 + sp->key_words];
		}
	}
	qsort_r(order, n, sizeof(*order), cmp_entries, (void *)(uintptr_t)sp);
	if (format == UKPEV_HIST_FOLDED) {
		print_folded(f, sp, order, n, sym, arg);
	} else {
		fputs("# event histogram\n#\n# trigger info: ", f);
		print_trigger(f, sp, hr->filter);
		fputs("#\n\n", f);
		for (unsigned i = 0; i < n; i++) {
			const uint64_t *e = order[i];
			const uint64_t *c = e + 1 + sp->key_words;
			print_key(f, r, sp, e, sym, arg);
			fprintf(f, " hitcount: %10llu", (unsigned long long)c[0]);
			for (unsigned v = 0; v < sp->nvals; v++) {
				const struct ev_hfield *fl = &sp->vals[v];
				fprintf(f, fl->mod == HM_HEX ? "  %s: %10llx" : "  %s: %10llu",
					fl->name, (unsigned long long)c[1 + v]);
			}
			fputc('\n', f);
		}
		fprintf(f, "\nTotals:\n    Hits: %llu\n    Entries: %u\n    Dropped: %llu\n",
			(unsigned long long)hits, n, (unsigned long long)m.drops);
	}
	free(order);
	free(m.ents);
	return (int)n;
}
