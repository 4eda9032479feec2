/* SPDX-License-Identifier: MIT */
/*
 * The dynamic-event definition parser: the kernel's kprobe_events and
 * uprobe_events grammar (trace_probe.c's ideas), for user space.  It only
 * parses and lays out the record; event.c resolves and compiles.  Every
 * error is a code and an offset into the definition, where the caret goes.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ev_int.h"

#define ARG_NAME_MAX 64

void ev_set_err(struct ukpev_error *err, int code, int offset)
{
	if (err && err->code == UKPEV_E_NONE) {
		err->code = code;
		err->offset = offset < 0 ? 0 : offset;
	}
}

struct pctx {
	const char *text;
	struct ukpev_error *err;
	struct ukpev_def *d;
};

#define FAIL(ctx, code, at) do { ev_set_err((ctx)->err, (code), (int)(at)); return -EINVAL; } while (0)

static bool is_ident(const char *s, size_t n)
{
	if (!n || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
			return false;
	return true;
}

/* a number, all of [s, s+n): strtoull base 0 (0x.., 0.., decimal) */
static bool parse_ulong(const char *s, size_t n, unsigned long long *v)
{
	char buf[32];
	if (!n || n >= sizeof(buf) || !isdigit((unsigned char)s[0]))
		return false;
	memcpy(buf, s, n);
	buf[n] = 0;
	char *end;
	errno = 0;
	*v = strtoull(buf, &end, 0);
	return !errno && *end == 0;
}

static bool parse_long(const char *s, size_t n, long long *v)
{
	bool neg = false;
	if (n && (s[0] == '-' || s[0] == '+')) {
		neg = s[0] == '-';
		s++, n--;
	}
	unsigned long long u;
	if (!parse_ulong(s, n, &u))
		return false;
	*v = neg ? -(long long)u : (long long)u;
	return true;
}

static char *dupn(const char *s, size_t n)
{
	char *p = malloc(n + 1);
	if (p) {
		memcpy(p, s, n);
		p[n] = 0;
	}
	return p;
}

/* ---- types ---------------------------------------------------------------- */

static const struct { const char *name; int type; unsigned size; } base_types[] = {
	{ "u8", UKPEV_T_U8, 1 }, { "u16", UKPEV_T_U16, 2 },
	{ "u32", UKPEV_T_U32, 4 }, { "u64", UKPEV_T_U64, 8 },
	{ "s8", UKPEV_T_S8, 1 }, { "s16", UKPEV_T_S16, 2 },
	{ "s32", UKPEV_T_S32, 4 }, { "s64", UKPEV_T_S64, 8 },
	{ "x8", UKPEV_T_X8, 1 }, { "x16", UKPEV_T_X16, 2 },
	{ "x32", UKPEV_T_X32, 4 }, { "x64", UKPEV_T_X64, 8 },
	{ "char", UKPEV_T_CHAR, 1 }, { "string", UKPEV_T_STRING, 4 },
	{ "ustring", UKPEV_T_USTRING, 4 }, { "symbol", UKPEV_T_SYMBOL, 8 },
	{ "symstr", UKPEV_T_SYMSTR, 8 },
};

static bool is_string_type(int t)
{
	return t == UKPEV_T_STRING || t == UKPEV_T_USTRING || t == UKPEV_T_COMM;
}

/* TYPE at [s, s+n), s at offset `at` of the definition */
static int parse_type(struct pctx *c, struct ev_parg *a, const char *s, size_t n, int at)
{
	const char *br = memchr(s, '[', n);
	size_t bn = br ? (size_t)(br - s) : n;
	a->count = 0;
	if (br) {
		const char *close = memchr(br, ']', n - bn);
		if (!close)
			FAIL(c, UKPEV_E_ARRAY_NO_CLOSE, at + (int)n);
		if ((size_t)(close - s) != n - 1)
			FAIL(c, UKPEV_E_BAD_ARRAY_SUFFIX, at + (int)(close - s) + 1);
		unsigned long long cnt;
		if (!parse_ulong(br + 1, (size_t)(close - br - 1), &cnt) || cnt == 0)
			FAIL(c, UKPEV_E_BAD_ARRAY_NUM, at + (int)bn + 1);
		if (cnt > UKPEV_MAX_ARRAY)
			FAIL(c, UKPEV_E_ARRAY_TOO_BIG, at + (int)bn + 1);
		a->count = (unsigned)cnt;
	}
	if (bn && s[0] == 'b' && bn > 1 && isdigit((unsigned char)s[1])) {
		/* b<WIDTH>@<OFFSET>/<SIZE> */
		char buf[32];
		if (bn >= sizeof(buf))
			FAIL(c, UKPEV_E_BAD_BITFIELD, at);
		memcpy(buf, s, bn);
		buf[bn] = 0;
		unsigned w, o, sz;
		int used = 0;
		if (sscanf(buf, "b%u@%u/%u%n", &w, &o, &sz, &used) != 3 || (size_t)used != bn ||
		    (sz != 8 && sz != 16 && sz != 32 && sz != 64) || w == 0 || w > sz || o >= sz ||
		    w + o > sz)
			FAIL(c, UKPEV_E_BAD_BITFIELD, at);
		a->type = UKPEV_T_BITFIELD;
		a->elem_size = sz / 8;
		a->bf_width = w;
		a->bf_shift = o;
	} else {
		size_t i;
		for (i = 0; i < sizeof(base_types) / sizeof(base_types[0]); i++)
			if (strlen(base_types[i].name) == bn && !strncmp(base_types[i].name, s, bn))
				break;
		if (i == sizeof(base_types) / sizeof(base_types[0]))
			FAIL(c, UKPEV_E_BAD_TYPE, at);
		a->type = base_types[i].type;
		a->elem_size = base_types[i].size;
	}
	a->type_name = dupn(s, n);
	return a->type_name ? 0 : -ENOMEM;
}

/* ---- fetches -------------------------------------------------------------- */

/* pt_regs word index of a register name, or -1 */
static int reg_index(const char *s, size_t n)
{
	static const char *const names[] = {
		"r15", "r14", "r13", "r12", "bp", "bx", "r11", "r10", "r9", "r8",
		"ax", "cx", "dx", "si", "di", "orig_ax", "ip", "cs", "flags", "sp", "ss",
	};
	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (strlen(names[i]) == n && !strncmp(names[i], s, n))
			return i;
	return -1;
}

static bool sym_char(char ch)
{
	return isalnum((unsigned char)ch) || ch == '_' || ch == '.' || ch == '@' || ch == '$';
}

/*
 * @SYM[+|-OFFS] or @OBJ:SYM[+|-OFFS]: split into a symbol spec and an
 * offset.  s excludes the '@', which is at offset at.
 */
static int parse_memsym(struct pctx *c, struct ev_parg *a, const char *s, size_t n, int at)
{
	size_t i = 0, symstart = 0;
	const char *colon = memchr(s, ':', n);
	if (colon)
		symstart = (size_t)(colon - s) + 1;
	if (colon && symstart == 1)
		FAIL(c, UKPEV_E_BAD_MEM_ADDR, at);
	i = symstart;
	if (i >= n || !(isalpha((unsigned char)s[i]) || s[i] == '_' || s[i] == '.'))
		FAIL(c, UKPEV_E_BAD_MEM_ADDR, at);
	while (i < n && sym_char(s[i]))
		i++;
	long long off = 0;
	if (i < n) {
		if ((s[i] != '+' && s[i] != '-') || !parse_long(s + i, n - i, &off))
			FAIL(c, UKPEV_E_BAD_MEM_ADDR, at + 1 + (int)i);
	}
	a->base = B_SYM;
	a->sym = dupn(s, i);
	a->sym_off = off;
	a->sym_at = at + 1;
	a->memory = true;
	return a->sym ? 0 : -ENOMEM;
}

/* FETCH at [s, s+n), at its offset; depth of +OFFS( ) nesting so far */
static int parse_fetch(struct pctx *c, struct ev_parg *a, const char *s, size_t n, int at,
		       unsigned depth)
{
	if (!n)
		FAIL(c, UKPEV_E_NO_ARG_BODY, at);
	switch (s[0]) {
	case '%': {
		int r = reg_index(s + 1, n - 1);
		if (r < 0)
			FAIL(c, UKPEV_E_BAD_FETCH_ARG, at);
		a->base = B_REG;
		a->reg = r;
		return 0;
	}
	case '@': {
		unsigned long long v;
		if (n > 1 && isdigit((unsigned char)s[1])) {
			if (!parse_ulong(s + 1, n - 1, &v))
				FAIL(c, UKPEV_E_BAD_MEM_ADDR, at);
			a->base = B_ADDR;
			a->imm = (int64_t)v;
			a->memory = true;
			return 0;
		}
		return parse_memsym(c, a, s + 1, n - 1, at);
	}
	case '$': {
		const char *v = s + 1;
		size_t vn = n - 1;
		unsigned long long num;
		if (vn == 5 && !strncmp(v, "stack", 5)) {
			a->base = B_SP;
		} else if (vn > 5 && !strncmp(v, "stack", 5)) {
			if (!parse_ulong(v + 5, vn - 5, &num) || num > 4096 || (v[5] == '0' && vn > 6))
				FAIL(c, UKPEV_E_BAD_STACK_NUM, at);
			a->base = B_STACK;
			a->reg = (int)num;
		} else if (vn >= 3 && !strncmp(v, "arg", 3)) {
			if (!parse_ulong(v + 3, vn - 3, &num) || num == 0 || num > 64 ||
			    v[3] == '0')
				FAIL(c, UKPEV_E_BAD_ARG_NUM, at);
			if (c->d->kind == 'p' && c->d->place_kind != PL_ADDR &&
			    c->d->place_kind != PL_OBJOFF && c->d->offs != 0)
				FAIL(c, UKPEV_E_NOFENTRY_ARGS, at);
			a->base = B_ARG;
			a->reg = (int)num;
			if (c->d->kind == 'r' && num > c->d->max_saved)
				c->d->max_saved = (unsigned)num;
		} else if (vn == 6 && !strncmp(v, "retval", 6)) {
			if (c->d->kind != 'r')
				FAIL(c, UKPEV_E_RETVAL_ON_PROBE, at);
			a->base = B_RETVAL;
		} else if (vn == 4 && !strncmp(v, "comm", 4)) {
			if (depth)
				FAIL(c, UKPEV_E_COMM_CANT_DEREF, at);
			a->base = B_COMM;
		} else {
			FAIL(c, UKPEV_E_BAD_VAR, at);
		}
		return 0;
	}
	case '\\': {
		if (n > 1 && s[1] == '"') {
			if (depth)
				FAIL(c, UKPEV_E_BAD_FETCH_ARG, at);
			if (n < 3 || s[n - 1] != '"')
				FAIL(c, UKPEV_E_IMMSTR_NO_CLOSE, at);
			if (memchr(s + 2, '"', n - 3))
				FAIL(c, UKPEV_E_IMMSTR_NO_CLOSE, at);
			a->base = B_IMMSTR;
			a->str = dupn(s + 2, n - 3);
			return a->str ? 0 : -ENOMEM;
		}
		long long v;
		if (!parse_long(s + 1, n - 1, &v))
			FAIL(c, UKPEV_E_BAD_IMM, at);
		a->base = B_IMM;
		a->imm = v;
		return 0;
	}
	case '+':
	case '-': {
		const char *open = memchr(s, '(', n);
		size_t i = 1;
		if (i < n && s[i] == 'u')
			i++;
		size_t numlen = open ? (size_t)(open - s) - i : n - i;
		unsigned long long off;
		if (!open) {
			size_t k = i;
			while (k < n && isalnum((unsigned char)s[k]))
				k++;
			if (k == i || !parse_ulong(s + i, k - i, &off))
				FAIL(c, UKPEV_E_BAD_DEREF_OFFS, at);
			FAIL(c, UKPEV_E_DEREF_NEED_BRACE, at + (int)k);
		}
		if (!parse_ulong(s + i, numlen, &off))
			FAIL(c, UKPEV_E_BAD_DEREF_OFFS, at);
		if (depth + 1 > UKPEV_MAX_DEPTH)
			FAIL(c, UKPEV_E_TOO_MANY_OPS, at);
		/* the matching ')' */
		size_t k = (size_t)(open - s) + 1;
		int lvl = 1;
		for (; k < n; k++) {
			if (s[k] == '(')
				lvl++;
			else if (s[k] == ')' && --lvl == 0)
				break;
		}
		if (k >= n)
			FAIL(c, UKPEV_E_DEREF_OPEN_BRACE, (int)strlen(c->text));
		if (k != n - 1)
			FAIL(c, UKPEV_E_BAD_FETCH_ARG, at + (int)k + 1);
		size_t in = (size_t)(open - s) + 1;
		int r = parse_fetch(c, a, s + in, k - in, at + (int)in, depth + 1);
		if (r)
			return r;
		if (a->base == B_IMMSTR)
			FAIL(c, UKPEV_E_BAD_FETCH_ARG, at + (int)in);
		int64_t *no = realloc(a->offs, (a->ndepth + 1) * sizeof(*no));
		if (!no)
			FAIL(c, UKPEV_E_TOO_MANY_OPS, at);
		a->offs = no;
		a->offs[a->ndepth++] = s[0] == '-' ? -(int64_t)off : (int64_t)off;
		a->memory = true;
		return 0;
	}
	default:
		FAIL(c, UKPEV_E_BAD_FETCH_ARG, at);
	}
}

/* whether [s, s+n) reads as a TYPE: a base type or a bitfield, perhaps
 * an array of it */
static bool type_like(const char *s, size_t n)
{
	const char *br = memchr(s, '[', n);
	size_t bn = br ? (size_t)(br - s) : n;
	if (bn > 1 && s[0] == 'b' && isdigit((unsigned char)s[1]))
		return true;
	for (size_t i = 0; i < sizeof(base_types) / sizeof(base_types[0]); i++)
		if (strlen(base_types[i].name) == bn && !strncmp(base_types[i].name, s, bn))
			return true;
	return false;
}

/* where the TYPE part of an argument body starts (the ':'), or n */
static size_t type_colon(const char *s, size_t n)
{
	if (n >= 2 && s[0] == '\\' && s[1] == '"') {
		const char *q = memchr(s + 2, '"', n - 2);
		if (!q)
			return n;
		const char *col = memchr(q, ':', n - (size_t)(q - s));
		return col ? (size_t)(col - s) : n;
	}
	if (s[0] == '@') {
		/* @OBJ:SYM (an object has '/' or ".so" in its name, or a '.'
		 * and no TYPE follows) or @SYM:TYPE (a static local's symbol
		 * has a '.': prev_reloc.64:u32) */
		const char *c1 = memchr(s, ':', n);
		if (!c1)
			return n;
		const char *c2 = memchr(c1 + 1, ':', n - (size_t)(c1 + 1 - s));
		if (c2)
			return (size_t)(c2 - s);
		size_t on = (size_t)(c1 - s);
		bool objlike = memchr(s, '/', on) || memmem(s, on, ".so", 3) ||
			       (memchr(s, '.', on) && !type_like(c1 + 1, n - on - 1));
		return objlike ? n : on;
	}
	int lvl = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '(')
			lvl++;
		else if (s[i] == ')')
			lvl--;
		else if (s[i] == ':' && lvl <= 0)
			return i;
	}
	return n;
}

static int parse_arg(struct pctx *c, struct ev_parg *a, unsigned idx, const char *s, size_t n,
		     int at)
{
	const char *body = s;
	size_t bn = n;
	int bat = at;
	/* NAME= : a prefix with no character a FETCH starts with */
	const char *eq = memchr(s, '=', n);
	if (eq && !memchr(s, '\\', (size_t)(eq - s)) && !memchr(s, '(', (size_t)(eq - s)) &&
	    !memchr(s, '%', (size_t)(eq - s)) && !memchr(s, '@', (size_t)(eq - s)) &&
	    !memchr(s, '$', (size_t)(eq - s))) {
		size_t nl = (size_t)(eq - s);
		if (nl == 0)
			FAIL(c, UKPEV_E_NO_ARG_NAME, at);
		if (nl >= ARG_NAME_MAX)
			FAIL(c, UKPEV_E_ARG_NAME_TOO_LONG, at);
		if (!is_ident(s, nl))
			FAIL(c, UKPEV_E_BAD_ARG_NAME, at);
		a->name = dupn(s, nl);
		body = eq + 1;
		bn = n - nl - 1;
		bat = at + (int)nl + 1;
	} else {
		char buf[16];
		snprintf(buf, sizeof(buf), "arg%u", idx + 1);
		a->name = strdup(buf);
	}
	if (!a->name)
		return -ENOMEM;
	if (!bn)
		FAIL(c, UKPEV_E_NO_ARG_BODY, bat);
	size_t tc = type_colon(body, bn);
	int r = parse_fetch(c, a, body, tc, bat, 0);
	if (r)
		return r;
	int tat = bat + (int)tc + 1;
	if (tc < bn) {
		if (tc + 1 == bn)
			FAIL(c, UKPEV_E_BAD_TYPE, tat);
		r = parse_type(c, a, body + tc + 1, bn - tc - 1, tat);
		if (r)
			return r;
	} else {
		const char *dflt = a->base == B_COMM || a->base == B_IMMSTR ? "string" : "x64";
		r = parse_type(c, a, dflt, strlen(dflt), bat);
		if (r)
			return r;
	}
	/* what the fetch allows */
	if (a->base == B_COMM || a->base == B_IMMSTR) {
		if (a->type != UKPEV_T_STRING && a->type != UKPEV_T_USTRING)
			FAIL(c, UKPEV_E_BAD_TYPE, tat);
		if (a->base == B_COMM)
			a->type = UKPEV_T_COMM;
	} else if (is_string_type(a->type)) {
		if (!a->memory)
			FAIL(c, UKPEV_E_BAD_STRING, tat);
	}
	if (a->count && !a->memory)
		FAIL(c, UKPEV_E_BAD_ARRAY_TYPE, tat);
	/* the name once */
	for (unsigned i = 0; i < idx; i++)
		if (!strcmp(c->d->args[i].name, a->name))
			FAIL(c, UKPEV_E_USED_ARG_NAME, at);
	return 0;
}

/* ---- the head and the place ----------------------------------------------- */

static void sanitize(char *s)
{
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_')
			*s = '_';
}

static int parse_name(struct pctx *c, const char *s, size_t n, int at)
{
	struct ukpev_def *d = c->d;
	const char *slash = memchr(s, '/', n);
	const char *ev = s;
	size_t en = n;
	int eat = at;
	if (slash) {
		size_t gl = (size_t)(slash - s);
		if (!gl)
			FAIL(c, UKPEV_E_NO_GROUP_NAME, at);
		if (gl >= UKPEV_NAME_MAX)
			FAIL(c, UKPEV_E_GROUP_TOO_LONG, at);
		if (!is_ident(s, gl))
			FAIL(c, UKPEV_E_BAD_GROUP_NAME, at);
		memcpy(d->group, s, gl);
		d->group[gl] = 0;
		ev = slash + 1;
		en = n - gl - 1;
		eat = at + (int)gl + 1;
	}
	if (en) {
		if (en >= UKPEV_NAME_MAX)
			FAIL(c, UKPEV_E_EVENT_TOO_LONG, eat);
		if (!is_ident(ev, en))
			FAIL(c, UKPEV_E_BAD_EVENT_NAME, eat);
		memcpy(d->event, ev, en);
		d->event[en] = 0;
		d->name_at = eat;
	}
	return 0;
}

static int parse_place(struct pctx *c, const char *s, size_t n, int at)
{
	struct ukpev_def *d = c->d;
	static const char ret[] = "%return";
	size_t rl = sizeof(ret) - 1;
	if (n >= rl && !memcmp(s + n - rl, ret, rl)) {
		d->kind = 'r';
		n -= rl;
	}
	if (memchr(s, '%', n))
		FAIL(c, UKPEV_E_BAD_PROBE_ADDR, at + (int)((const char *)memchr(s, '%', n) - s));
	if (!n)
		FAIL(c, UKPEV_E_BAD_PROBE_ADDR, at);
	d->place = dupn(s, n);
	if (!d->place)
		return -ENOMEM;
	d->place_at = at;
	if (!d->event[0])
		d->name_at = at;
	unsigned long long v;
	if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		if (!parse_ulong(s, n, &v))
			FAIL(c, UKPEV_E_BAD_PROBE_ADDR, at);
		d->place_kind = PL_ADDR;
		d->offs = v;
		return 0;
	}
	const char *colon = memchr(s, ':', n);
	const char *sym = s;
	size_t sn = n;
	if (colon) {
		size_t ol = (size_t)(colon - s);
		if (!ol)
			FAIL(c, UKPEV_E_BAD_PROBE_ADDR, at);
		d->obj = dupn(s, ol);
		if (!d->obj)
			return -ENOMEM;
		sym = colon + 1;
		sn = n - ol - 1;
		int sat = at + (int)ol + 1;
		if (sn && isdigit((unsigned char)sym[0])) {
			if (!parse_ulong(sym, sn, &v))
				FAIL(c, UKPEV_E_BAD_FILE_OFFS, sat);
			d->place_kind = PL_OBJOFF;
			d->offs = v;
			return 0;
		}
		d->place_kind = PL_OBJSYM;
		at = sat;
	} else {
		d->place_kind = PL_SYM;
	}
	size_t i = 0;
	if (!sn || !(isalpha((unsigned char)sym[0]) || sym[0] == '_' || sym[0] == '.'))
		FAIL(c, UKPEV_E_BAD_PROBE_ADDR, at);
	while (i < sn && sym_char(sym[i]))
		i++;
	d->sym = dupn(sym, i);
	if (!d->sym)
		return -ENOMEM;
	if (i < sn) {
		if (sym[i] != '+' || !parse_ulong(sym + i + 1, sn - i - 1, &v))
			FAIL(c, UKPEV_E_BAD_PROBE_ADDR, at + (int)i);
		d->offs = v;
	}
	if (d->kind == 'r' && d->offs)
		FAIL(c, UKPEV_E_BAD_RETPROBE, d->place_at);
	return 0;
}

/* the next word: [*pos, ...) up to white space, \"...\" kept whole */
static bool next_word(const char *t, size_t *pos, size_t *start, size_t *len)
{
	size_t i = *pos;
	while (t[i] && isspace((unsigned char)t[i]))
		i++;
	if (!t[i])
		return false;
	*start = i;
	bool inq = false;
	for (; t[i]; i++) {
		if (!inq && isspace((unsigned char)t[i]))
			break;
		if (t[i] == '"' && i > 0 && (t[i - 1] == '\\' || inq))
			inq = !inq;
	}
	*len = i - *start;
	*pos = i;
	return true;
}

static unsigned align_up(unsigned v, unsigned a)
{
	return (v + a - 1) / a * a;
}

static int layout(struct pctx *c)
{
	struct ukpev_def *d = c->d;
	unsigned off = d->nargs ? 8 * ((d->nargs + 63) / 64) : 0;
	unsigned dyn = 0;
	for (unsigned i = 0; i < d->nargs; i++) {
		struct ev_parg *a = &d->args[i];
		unsigned es = a->elem_size, cnt = a->count ? a->count : 1;
		off = align_up(off, es);
		a->offset = off;
		off += es * cnt;
		if (a->type == UKPEV_T_COMM)
			dyn += 16;
		else if (a->base == B_IMMSTR)
			dyn += (unsigned)strlen(a->str) + 1;
		else if (is_string_type(a->type))
			dyn += UKPEV_STRING_MAX * cnt;
		dyn = align_up(dyn, 1);
	}
	d->payload_size = align_up(off, 8);
	d->max_dyn = align_up(dyn, 8);
	return 0;
}

static int build_info(struct ukpev_def *d)
{
	d->infos = calloc(d->nargs ? d->nargs : 1, sizeof(*d->infos));
	if (!d->infos)
		return -ENOMEM;
	for (unsigned i = 0; i < d->nargs; i++) {
		struct ev_parg *a = &d->args[i];
		d->infos[i] = (struct ukpev_arg_info){
			.name = a->name, .type_name = a->type_name, .type = a->type,
			.elem_size = a->elem_size, .count = a->count, .offset = a->offset,
			.bf_width = a->bf_width, .bf_shift = a->bf_shift,
		};
	}
	d->info = (struct ukpev_event_info){
		.group = d->group, .event = d->event, .definition = d->text,
		.kind = d->kind, .maxactive = d->maxactive, .place = d->place,
		.nargs = d->nargs, .args = d->infos, .payload_size = d->payload_size,
	};
	return 0;
}

static int default_name(struct ukpev_def *d)
{
	char buf[256];
	switch (d->place_kind) {
	case PL_ADDR:
		snprintf(buf, sizeof(buf), "%c_0x%lx", d->kind, d->offs);
		break;
	case PL_OBJOFF: {
		const char *b = strrchr(d->obj, '/');
		snprintf(buf, sizeof(buf), "%c_%s_0x%lx", d->kind, b ? b + 1 : d->obj, d->offs);
		break;
	}
	default:
		snprintf(buf, sizeof(buf), "%c_%s_%lu", d->kind, d->sym, d->offs);
		break;
	}
	sanitize(buf);
	buf[UKPEV_NAME_MAX - 1] = 0;
	strcpy(d->event, buf);
	return 0;
}

int ev_def_parse(const char *text, struct ukpev_def **out, struct ukpev_error *err)
{
	struct ukpev_error dummy;
	if (!err)
		err = &dummy;
	err->code = UKPEV_E_NONE;
	err->offset = 0;
	*out = NULL;
	if (!text) {
		ev_set_err(err, UKPEV_E_BAD_PROBE_TYPE, 0);
		return -EINVAL;
	}
	struct ukpev_def *d = calloc(1, sizeof(*d));
	if (!d || !(d->text = strdup(text))) {
		free(d);
		return -ENOMEM;
	}
	struct pctx c = { d->text, err, d };
	strcpy(d->group, "ukprobes");
	size_t pos = 0, ws, wl;
	int r = -EINVAL;
	if (!next_word(text, &pos, &ws, &wl)) {
		ev_set_err(err, UKPEV_E_BAD_PROBE_TYPE, 0);
		goto fail;
	}
	/* p[:[GRP/][EVENT]] or r[MAXACTIVE][:[GRP/][EVENT]] */
	const char *h = text + ws;
	if (h[0] != 'p' && h[0] != 'r') {
		ev_set_err(err, UKPEV_E_BAD_PROBE_TYPE, (int)ws);
		goto fail;
	}
	d->kind = h[0];
	size_t i = 1;
	while (i < wl && isdigit((unsigned char)h[i]))
		i++;
	if (i > 1) {
		unsigned long long ma;
		if (d->kind == 'p') {
			ev_set_err(err, UKPEV_E_MAXACT_NO_KPROBE, (int)ws + 1);
			goto fail;
		}
		if (!parse_ulong(h + 1, i - 1, &ma) || ma == 0) {
			ev_set_err(err, UKPEV_E_BAD_MAXACT, (int)ws + 1);
			goto fail;
		}
		if (ma > 4096) {
			ev_set_err(err, UKPEV_E_MAXACT_TOO_BIG, (int)ws + 1);
			goto fail;
		}
		d->maxactive = (int)ma;
	}
	if (i < wl) {
		if (h[i] != ':') {
			ev_set_err(err, d->kind == 'r' ? UKPEV_E_BAD_MAXACT : UKPEV_E_BAD_PROBE_TYPE,
				   (int)(ws + (d->kind == 'r' ? 1 : 0)));
			goto fail;
		}
		if ((r = parse_name(&c, h + i + 1, wl - i - 1, (int)(ws + i + 1))))
			goto fail;
		r = -EINVAL;
	}
	if (!next_word(text, &pos, &ws, &wl)) {
		ev_set_err(err, UKPEV_E_NO_PLACE, (int)strlen(text));
		goto fail;
	}
	if ((r = parse_place(&c, text + ws, wl, (int)ws)))
		goto fail;
	/* fetchargs */
	d->args = calloc(UKPEV_MAX_ARGS, sizeof(*d->args));
	if (!d->args) {
		r = -ENOMEM;
		goto fail;
	}
	while (next_word(text, &pos, &ws, &wl)) {
		if (d->nargs == UKPEV_MAX_ARGS) {
			ev_set_err(err, UKPEV_E_TOO_MANY_ARGS, (int)ws);
			r = -EINVAL;
			goto fail;
		}
		struct ev_parg *a = &d->args[d->nargs];
		r = parse_arg(&c, a, d->nargs, text + ws, wl, (int)ws);
		d->nargs++;
		if (r)
			goto fail;
		layout(&c);
		if (sizeof(struct ev_rec) + 8 + d->payload_size + d->max_dyn > UKPEV_MAX_RECORD) {
			ev_set_err(err, UKPEV_E_RECORD_TOO_BIG, (int)ws);
			r = -EINVAL;
			goto fail;
		}
	}
	layout(&c);
	if (!d->event[0])
		default_name(d);
	if ((r = build_info(d)))
		goto fail;
	*out = d;
	return 0;
fail:
	if (r == -ENOMEM)
		err->code = UKPEV_E_NONE;
	ev_def_free(d);
	return r == -ENOMEM ? -ENOMEM : -EINVAL;
}

void ev_def_free(struct ukpev_def *d)
{
	if (!d)
		return;
	for (unsigned i = 0; d->args && i < d->nargs; i++) {
		free(d->args[i].name);
		free(d->args[i].type_name);
		free(d->args[i].sym);
		free(d->args[i].str);
		free(d->args[i].offs);
	}
	free(d->args);
	free(d->infos);
	free(d->place);
	free(d->obj);
	free(d->sym);
	free(d->text);
	free(d);
}

int ukpev_def_parse(const char *definition, struct ukpev_def **out, struct ukpev_error *err)
{
	if (!out)
		return -EINVAL;
	return ev_def_parse(definition, out, err);
}

void ukpev_def_free(struct ukpev_def *d)
{
	ev_def_free(d);
}

const struct ukpev_event_info *ukpev_def_info(const struct ukpev_def *d)
{
	return d ? &d->info : NULL;
}
