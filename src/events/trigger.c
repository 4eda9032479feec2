// SPDX-License-Identifier: MIT
/*
 * Triggers as text: a trigger's command, count and condition, and the
 * hist trigger's keys, values and sort (histogram.rst), parsed against an
 * event's fields with no target (ukpev_trigger_check(), the fuzzer) and
 * by the target and the reader alike (event.c, hist.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <ukprobes/events.h>
#include "ev_int.h"

void ev_trigger_free(struct ev_trigger *t)
{
	if (!t)
		return;
	ev_filter_free(t->filter);
	free(t->hist);
	free(t->text);
	free(t);
}

/* the word [s, s+n) is a number: *v */
static bool trig_count(const char *s, size_t n, int64_t *v)
{
	char buf[24], *end;
	if (!n || n >= sizeof(buf) || s[0] < '0' || s[0] > '9')
		return false;
	memcpy(buf, s, n);
	buf[n] = 0;
	errno = 0;
	unsigned long long c = strtoull(buf, &end, 10);
	if (errno || *end || c == 0 || c > INT64_MAX)
		return false;
	*v = (int64_t)c;
	return true;
}

/* ---- parsing --------------------------------------------------------------- */

size_t ev_trigger_split(const char *text, const char **ifp)
{
	size_t len = strlen(text), end = len;
	*ifp = NULL;
	for (size_t i = 0; i + 2 <= len; i++)
		if ((i == 0 || text[i - 1] == ' ' || text[i - 1] == '\t') && !strncmp(text + i, "if", 2) &&
		    (text[i + 2] == ' ' || text[i + 2] == '\t' || text[i + 2] == 0)) {
			*ifp = text + i;
			end = i;
			break;
		}
	while (end && (text[end - 1] == ' ' || text[end - 1] == '\t'))
		end--;
	return end;
}

static bool word_is(const char *s, size_t n, const char *lit)
{
	return strlen(lit) == n && !memcmp(s, lit, n);
}

const struct ev_hmod_name ev_hmods[] = {
	{ "hex", HM_HEX }, { "sym", HM_SYM }, { "sym-offset", HM_SYMOFF },
	{ "execname", HM_EXEC }, { "log2", HM_LOG2 }, { "buckets", HM_BUCKETS },
	{ "usecs", HM_USECS },
};

/* One field "NAME[.MOD[=N]]" at text[at, at + n) into f; key: as a key. */
static int parse_field(const struct ukpev_event_info *ev, const char *text, size_t at, size_t n,
		       bool key, struct ev_hfield *f, struct ukpev_error *err)
{
	const char *s = text + at;
	memset(f, 0, sizeof(*f));
	f->reg = -1;
	size_t nl = 0;
	while (nl < n && s[nl] != '.')
		nl++;
	if (!nl || nl >= UKPEV_NAME_MAX) {
		ev_set_err(err, UKPEV_E_HIST_FIELD, (int)at);
		return -EINVAL;
	}
	memcpy(f->name, s, nl);
	if (word_is(s, nl, "common_pid") || word_is(s, nl, "pid")) {
		f->kind = HF_PID;
		strcpy(f->name, "common_pid");
	} else if (word_is(s, nl, "common_timestamp")) {
		f->kind = HF_TS;
	} else if (word_is(s, nl, "common_stacktrace") || word_is(s, nl, "stacktrace")) {
		f->kind = HF_STACK;
		strcpy(f->name, "common_stacktrace");
	} else {
		unsigned i;
		for (i = 0; i < ev->nargs; i++)
			if (word_is(s, nl, ev->args[i].name))
				break;
		if (i == ev->nargs) {
			ev_set_err(err, UKPEV_E_HIST_FIELD, (int)at);
			return -EINVAL;
		}
		const struct ukpev_arg_info *a = &ev->args[i];
		f->arg = (uint16_t)i;
		f->slot = (uint16_t)a->offset;
		if (a->count) {
			ev_set_err(err, UKPEV_E_HIST_FIELD_TYPE, (int)at);
			return -EINVAL;
		}
		switch (a->type) {
		case UKPEV_T_STRING: case UKPEV_T_USTRING: case UKPEV_T_COMM:
			f->kind = HF_STR;
			break;
		default:
			f->kind = HF_ARG;
			f->size = (uint8_t)a->elem_size;
			f->sign = a->type >= UKPEV_T_S8 && a->type <= UKPEV_T_S64;
			f->bf_width = (uint8_t)a->bf_width;
			f->bf_shift = (uint8_t)a->bf_shift;
			break;
		}
	}
	if (nl < n) {
		const char *m = s + nl + 1;
		size_t ml = n - nl - 1, eq = 0;
		while (eq < ml && m[eq] != '=')
			eq++;
		unsigned k;
		for (k = 0; k < EV_HMODS; k++)
			if (word_is(m, eq, ev_hmods[k].name))
				break;
		int mod = k < EV_HMODS ? ev_hmods[k].mod : -1;
		/* what each field may take: stacks none, strings none,
		 * timestamps usecs; vals hex only */
		bool ok = mod > 0 && f->kind != HF_STACK &&
			  (f->kind != HF_STR) &&
			  (mod != HM_USECS || f->kind == HF_TS) &&
			  (mod != HM_EXEC || f->kind == HF_PID) &&
			  (key || mod == HM_HEX) &&
			  ((mod == HM_BUCKETS) == (eq < ml));
		if (ok && mod == HM_BUCKETS) {
			char buf[24], *end;
			size_t bl = ml - eq - 1;
			ok = bl && bl < sizeof(buf);
			if (ok) {
				memcpy(buf, m + eq + 1, bl);
				buf[bl] = 0;
				errno = 0;
				unsigned long long b = strtoull(buf, &end, 0);
				ok = !errno && !*end && b >= 1 && buf[0] != '-';
				f->buckets = b;
			}
		}
		if (!ok) {
			ev_set_err(err, UKPEV_E_HIST_MODIFIER, (int)(at + nl + 1));
			return -EINVAL;
		}
		f->mod = (uint8_t)mod;
	}
	if (!key && f->kind != HF_ARG) {
		ev_set_err(err, UKPEV_E_HIST_FIELD_TYPE, (int)at);
		return -EINVAL;
	}
	f->words = f->kind == HF_STR ? EV_HIST_STR_WORDS : f->kind == HF_STACK ?
		   EV_HIST_STACK_WORDS : 1;
	return 0;
}

/* "a,b,c" at text[at, at + n): each field */
static int parse_list(const struct ukpev_event_info *ev, const char *text, size_t at, size_t n,
		      bool key, struct ev_hfield *fs, unsigned max, unsigned *count,
		      struct ukpev_error *err)
{
	size_t i = at, end = at + n;
	while (i <= end) {
		size_t j = i;
		while (j < end && text[j] != ',')
			j++;
		if (j == i) {
			ev_set_err(err, UKPEV_E_HIST_FIELD, (int)i);
			return -EINVAL;
		}
		if (!key && word_is(text + i, j - i, "hitcount")) {
			i = j + 1;
			continue;
		}
		if (*count >= max) {
			ev_set_err(err, UKPEV_E_HIST_TOO_MANY, (int)i);
			return -EINVAL;
		}
		int r = parse_field(ev, text, i, j - i, key, &fs[*count], err);
		if (r)
			return r;
		(*count)++;
		i = j + 1;
	}
	return 0;
}

int ev_hist_parse(const struct ukpev_event_info *ev, const char *text, size_t len,
		  struct ev_hspec *hs, struct ukpev_error *err)
{
	memset(hs, 0, sizeof(*hs));
	hs->size = EV_HIST_DEFAULT_SIZE;
	hs->sort[0].field = -1;
	hs->nsort = 1;
	if (len < 4 || memcmp(text, "hist", 4) || (len > 4 && text[4] != ':')) {
		ev_set_err(err, UKPEV_E_BAD_TRIGGER, 0);
		return -EINVAL;
	}
	size_t sort_at = 0, sort_len = 0;
	bool have_sort = false;
	for (size_t i = 5; i <= len && len > 4;) {
		size_t j = i;
		while (j < len && text[j] != ':')
			j++;
		const char *w = text + i;
		size_t wl = j - i, eq = 0;
		while (eq < wl && w[eq] != '=')
			eq++;
		/* the value after '=', or (none) the end of the word */
		size_t v = eq < wl ? i + eq + 1 : i + wl, vl = eq < wl ? wl - eq - 1 : 0;
		int r = 0;
		if (word_is(w, eq, "keys") || word_is(w, eq, "key")) {
			if (eq == wl || !vl) {
				ev_set_err(err, UKPEV_E_HIST_NO_KEYS, (int)i);
				return -EINVAL;
			}
			r = parse_list(ev, text, v, vl, true, hs->keys, EV_HIST_MAX_KEYS, &hs->nkeys,
				       err);
		} else if (word_is(w, eq, "vals") || word_is(w, eq, "values")) {
			if (eq == wl || !vl) {
				ev_set_err(err, UKPEV_E_HIST_FIELD, (int)v);
				return -EINVAL;
			}
			r = parse_list(ev, text, v, vl, false, hs->vals, EV_HIST_MAX_VALS, &hs->nvals,
				       err);
		} else if (word_is(w, eq, "sort")) {
			have_sort = true;
			sort_at = v;
			sort_len = vl;
			if (eq == wl || !vl) {
				ev_set_err(err, UKPEV_E_HIST_SORT, (int)v);
				return -EINVAL;
			}
		} else if (word_is(w, eq, "size")) {
			char buf[16], *end;
			bool ok = eq < wl && vl && vl < sizeof(buf);
			unsigned long sz = 0;
			if (ok) {
				memcpy(buf, text + v, vl);
				buf[vl] = 0;
				errno = 0;
				sz = strtoul(buf, &end, 10);
				ok = !errno && !*end && sz >= 1 && sz <= EV_HIST_MAX_SIZE;
			}
			if (!ok) {
				ev_set_err(err, UKPEV_E_HIST_SIZE, (int)(eq < wl ? v : i));
				return -EINVAL;
			}
			unsigned p = 1;
			while (p < sz)
				p <<= 1;
			hs->size = p < 2 ? 2 : p;
		} else if (word_is(w, eq, "name")) {
			if (eq == wl || !vl || vl >= sizeof(hs->name)) {
				ev_set_err(err, UKPEV_E_HIST_ATTR, (int)i);
				return -EINVAL;
			}
			memcpy(hs->name, text + v, vl);
			hs->name[vl] = 0;
		} else {
			ev_set_err(err, UKPEV_E_HIST_ATTR, (int)i);
			return -EINVAL;
		}
		if (r)
			return r;
		i = j + 1;
	}
	if (!hs->nkeys) {
		ev_set_err(err, UKPEV_E_HIST_NO_KEYS, len > 4 ? 5 : (int)len);
		return -EINVAL;
	}
	unsigned kw = 0;
	for (unsigned k = 0; k < hs->nkeys; k++) {
		hs->keys[k].off = (uint16_t)kw;
		kw += hs->keys[k].words;
		hs->stack |= hs->keys[k].kind == HF_STACK;
	}
	hs->key_words = kw;
	hs->entry_words = 1 + kw + 1 + hs->nvals;
	if (have_sort) {
		hs->nsort = 0;
		for (size_t i = sort_at; i <= sort_at + sort_len;) {
			size_t j = i;
			while (j < sort_at + sort_len && text[j] != ',')
				j++;
			if (hs->nsort >= EV_HIST_MAX_SORT || j == i) {
				ev_set_err(err, UKPEV_E_HIST_SORT, (int)i);
				return -EINVAL;
			}
			size_t nl = j - i;
			bool desc = false, asc = false;
			if (nl > 11 && !memcmp(text + j - 11, ".descending", 11)) {
				desc = true;
				nl -= 11;
			} else if (nl > 10 && !memcmp(text + j - 10, ".ascending", 10)) {
				asc = true;
				nl -= 10;
			}
			(void)asc;
			int field = -2;
			const char *w = text + i;
			if (word_is(w, nl, "hitcount")) {
				field = -1;
			} else {
				/* a val or a key by name, with its modifier or not */
				for (unsigned k = 0; k < hs->nvals && field == -2; k++)
					if (word_is(w, nl, hs->vals[k].name))
						field = (int)k;
				for (unsigned k = 0; k < hs->nkeys && field == -2; k++) {
					size_t kn = strlen(hs->keys[k].name);
					if ((nl == kn || (nl > kn && w[kn] == '.')) &&
					    !memcmp(w, hs->keys[k].name, kn))
						field = 100 + (int)k;
					else if (hs->keys[k].kind == HF_STACK &&
						 word_is(w, nl, "stacktrace"))
						field = 100 + (int)k;
				}
			}
			if (field == -2) {
				ev_set_err(err, UKPEV_E_HIST_SORT, (int)i);
				return -EINVAL;
			}
			hs->sort[hs->nsort].field = field;
			hs->sort[hs->nsort].desc = desc;
			hs->nsort++;
			i = j + 1;
		}
	}
	return 0;
}

/*
 * A trigger's text parsed against d's fields: the trigger (no target
 * resolved, no histogram taken), the end of its command, the event it
 * switches (tgrp, tev: enable_event/disable_event), whether it walks
 * stacks.  stacks_ok: the event's handler may walk stacks.
 */
int ev_trigger_parse(const struct ukpev_def *d, bool stacks_ok, const char *text,
			 struct ev_trigger **out, struct trig_parsed *tp, struct ukpev_error *err)
{
	/* COMMAND[:ARGS...][:COUNT] [if EXPR] */
	const char *ifp;
	size_t cmd_end = ev_trigger_split(text, &ifp);
	memset(tp, 0, sizeof(*tp));
	tp->cmd_end = cmd_end;
	/* the words of the command */
	const char *w[6];
	size_t wl[6];
	unsigned nw = 0;
	for (size_t i = 0; i <= cmd_end && nw < 6;) {
		size_t j = i;
		while (j < cmd_end && text[j] != ':')
			j++;
		w[nw] = text + i;
		wl[nw++] = j - i;
		i = j + 1;
	}
	struct ev_trigger *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	atomic_store(&t->count, -1);
	unsigned need = 1;
#define IS(k, lit) (wl[k] == sizeof(lit) - 1 && !strncmp(w[k], lit, sizeof(lit) - 1))
	if (IS(0, "traceon")) {
		t->type = T_TRACEON;
	} else if (IS(0, "traceoff")) {
		t->type = T_TRACEOFF;
	} else if (IS(0, "enable_event") || IS(0, "disable_event")) {
		t->type = IS(0, "enable_event") ? T_ENABLE : T_DISABLE;
		need = 3;
	} else if (IS(0, "stacktrace")) {
		t->type = T_STACKTRACE;
		tp->stacks = true;
	} else if (IS(0, "hist")) {
		t->type = T_HIST;
		struct ev_hspec *sp = malloc(sizeof(*sp));
		int r = sp ? ev_hist_parse(&d->info, text, cmd_end, sp, err) : -ENOMEM;
		tp->stacks = !r && sp->stack;
		free(sp);
		if (r) {
			ev_trigger_free(t);
			return r;
		}
		nw = need;	/* the words are the histogram's */
	} else if (IS(0, "snapshot") || IS(0, "enable_hist") || IS(0, "disable_hist")) {
		ev_set_err(err, UKPEV_E_BAD_TRIGGER, 0);
		ev_trigger_free(t);
		return -EOPNOTSUPP;
	} else {
		ev_set_err(err, UKPEV_E_BAD_TRIGGER, 0);
		ev_trigger_free(t);
		return -EINVAL;
	}
#undef IS
	if (tp->stacks && !stacks_ok) {
		ev_set_err(err, UKPEV_E_TRIGGER_NO_STACKS, 0);
		ev_trigger_free(t);
		return -EOPNOTSUPP;
	}
	if (nw < need || nw > need + 1 || (need == 3 && (!wl[1] || !wl[2]))) {
		ev_set_err(err, UKPEV_E_BAD_TRIGGER, nw < need ? (int)cmd_end :
			   need == 3 && !wl[1] ? (int)(w[1] - text) :
			   need == 3 && !wl[2] ? (int)(w[2] - text) : (int)(w[need + 1] - text));
		ev_trigger_free(t);
		return -EINVAL;
	}
	if (need == 3) {
		tp->tgrp = w[1];
		tp->tgl = wl[1];
		tp->tev = w[2];
		tp->tel = wl[2];
	}
	if (nw == need + 1) {
		int64_t c;
		if (!trig_count(w[need], wl[need], &c)) {
			ev_set_err(err, UKPEV_E_TRIGGER_COUNT, (int)(w[need] - text));
			ev_trigger_free(t);
			return -EINVAL;
		}
		atomic_store(&t->count, c);
	}
	if (ifp) {
		const char *expr = ifp + 2;
		int r = ev_filter_compile(d, expr, &t->filter, err);
		if (r) {
			if (err->code != UKPEV_E_NONE)
				err->offset += (int)(expr - text);
			ev_trigger_free(t);
			return r;
		}
	}
	*out = t;
	return 0;
}

int ukpev_trigger_check(const struct ukpev_def *d, const char *text, struct ukpev_error *err)
{
	struct ukpev_error dummy;
	if (!err)
		err = &dummy;
	err->code = UKPEV_E_NONE;
	err->offset = 0;
	if (!d || !text)
		return -EINVAL;
	struct ev_trigger *t;
	struct trig_parsed tp;
	int r = ev_trigger_parse(d, true, text, &t, &tp, err);
	if (r)
		return r;
	ev_trigger_free(t);
	return tp.stacks;
}

