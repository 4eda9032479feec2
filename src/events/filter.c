/* SPDX-License-Identifier: MIT */
/*
 * The kernel's event filter language (events.rst, "Event filtering") over
 * an event's fetcharg names and common_pid, compiled into a postfix
 * program that the hit path evaluates on the record before committing it
 * (hit.c: ev_filter_match).
 *
 *	expr  := and ( "||" and )*
 *	and   := unary ( "&&" unary )*
 *	unary := "!" unary | "(" expr ")" | FIELD OP VALUE
 *	OP    := == != < <= > >= &   (numbers)   == != ~   (strings, ~ a glob)
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "ev_int.h"

struct fctx {
	const struct ukpev_def *d;
	const char *s;
	size_t pos;
	struct ev_filter *f;
	size_t strcap, strlen_;
	struct ukpev_error *err;
	int depth;
};

#define FFAIL(c, code, at) do { ev_set_err((c)->err, (code), (int)(at)); return -EINVAL; } while (0)

static void skip_ws(struct fctx *c)
{
	while (c->s[c->pos] && isspace((unsigned char)c->s[c->pos]))
		c->pos++;
}

static int emit(struct fctx *c, struct ev_fpred p, size_t at)
{
	if (c->f->n >= EV_FILTER_MAX)
		FFAIL(c, UKPEV_E_FILTER_TOO_MANY, at);
	c->f->p[c->f->n++] = p;
	return 0;
}

static int add_str(struct fctx *c, const char *s, size_t n, uint32_t *off)
{
	if (c->strlen_ + n + 1 > c->strcap) {
		size_t cap = (c->strcap + n + 1) * 2;
		char *t = realloc(c->f->strtab, cap);
		if (!t)
			return -ENOMEM;
		c->f->strtab = t;
		c->strcap = cap;
	}
	memcpy(c->f->strtab + c->strlen_, s, n);
	c->f->strtab[c->strlen_ + n] = 0;
	*off = (uint32_t)c->strlen_;
	c->strlen_ += n + 1;
	return 0;
}

static int parse_or(struct fctx *c);

static int parse_pred(struct fctx *c)
{
	skip_ws(c);
	size_t fat = c->pos, k = c->pos;
	while (isalnum((unsigned char)c->s[k]) || c->s[k] == '_')
		k++;
	if (k == fat)
		FFAIL(c, c->s[fat] ? UKPEV_E_FILTER_FIELD : UKPEV_E_FILTER_PARSE, fat);
	size_t fl = k - fat;
	struct ev_fpred p = { 0 };
	const struct ukpev_arg_info *ai = NULL;
	if (fl == 10 && !strncmp(c->s + fat, "common_pid", 10)) {
		p.op = F_PID;
	} else {
		for (unsigned i = 0; i < c->d->nargs; i++)
			if (strlen(c->d->infos[i].name) == fl &&
			    !strncmp(c->d->infos[i].name, c->s + fat, fl)) {
				ai = &c->d->infos[i];
				p.arg = (uint16_t)i;
				break;
			}
		if (!ai)
			FFAIL(c, UKPEV_E_FILTER_FIELD, fat);
		if (ai->count)
			FFAIL(c, UKPEV_E_FILTER_OP, fat);
		bool str = ai->type == UKPEV_T_STRING || ai->type == UKPEV_T_USTRING ||
			   ai->type == UKPEV_T_COMM;
		p.op = str ? F_STR : F_NUM;
		p.dst = (uint16_t)ai->offset;
		p.size = (uint8_t)ai->elem_size;
		p.is_signed = ai->type >= UKPEV_T_S8 && ai->type <= UKPEV_T_S64;
		if (ai->type == UKPEV_T_BITFIELD) {
			p.bf_width = (uint8_t)ai->bf_width;
			p.bf_shift = (uint8_t)ai->bf_shift;
		}
	}
	if (p.op == F_PID)
		p.is_signed = 1;
	c->pos = k;
	skip_ws(c);
	/* the operator */
	size_t oat = c->pos;
	const char *o = c->s + c->pos;
	static const struct { const char *t; int cmp; } ops[] = {
		{ "==", C_EQ }, { "!=", C_NE }, { "<=", C_LE }, { ">=", C_GE },
		{ "<", C_LT }, { ">", C_GT }, { "&", C_BAND }, { "~", C_GLOB },
	};
	int cmp = -1;
	for (unsigned i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		size_t l = strlen(ops[i].t);
		if (!strncmp(o, ops[i].t, l)) {
			/* "&&" is not "&" */
			if (ops[i].cmp == C_BAND && o[1] == '&')
				break;
			cmp = ops[i].cmp;
			c->pos += l;
			break;
		}
	}
	if (cmp < 0)
		FFAIL(c, UKPEV_E_FILTER_INVALID_OP, oat);
	p.cmp = (uint8_t)cmp;
	if (p.op == F_STR && cmp != C_EQ && cmp != C_NE && cmp != C_GLOB)
		FFAIL(c, UKPEV_E_FILTER_OP, oat);
	if (p.op != F_STR && cmp == C_GLOB)
		FFAIL(c, UKPEV_E_FILTER_OP, oat);
	skip_ws(c);
	/* the value */
	size_t vat = c->pos;
	const char *v = c->s + c->pos;
	const char *vs = v;
	size_t vl = 0;
	bool quoted = false;
	if (*v == '"' || *v == '\'') {
		const char *q = strchr(v + 1, *v);
		if (!q)
			FFAIL(c, UKPEV_E_FILTER_BAD_STRING, vat);
		vs = v + 1;
		vl = (size_t)(q - v - 1);
		c->pos += vl + 2;
		quoted = true;
	} else {
		while (v[vl] && !isspace((unsigned char)v[vl]) && v[vl] != ')' &&
		       v[vl] != '&' && v[vl] != '|')
			vl++;
		c->pos += vl;
	}
	if (!vl && !quoted)
		FFAIL(c, UKPEV_E_FILTER_MISSING_VAL, vat);
	if (p.op == F_STR) {
		if (vl > UKPEV_STRING_MAX)
			FFAIL(c, UKPEV_E_FILTER_MISSING_VAL, vat);
		int r = add_str(c, vs, vl, &p.str_off);
		if (r)
			return r;
		p.str_len = (uint32_t)vl;
	} else {
		if (quoted)
			FFAIL(c, UKPEV_E_FILTER_EXPECT_STRING, vat);
		char buf[32], *end;
		if (vl >= sizeof(buf))
			FFAIL(c, UKPEV_E_FILTER_BAD_NUM, vat);
		memcpy(buf, vs, vl);
		buf[vl] = 0;
		errno = 0;
		if (buf[0] == '-')
			p.val = strtoll(buf, &end, 0);
		else
			p.val = (int64_t)strtoull(buf, &end, 0);
		if (errno || *end || !(isdigit((unsigned char)buf[0]) || buf[0] == '-'))
			FFAIL(c, UKPEV_E_FILTER_BAD_NUM, vat);
	}
	return emit(c, p, fat);
}

static int parse_unary(struct fctx *c)
{
	skip_ws(c);
	size_t at = c->pos;
	if (c->s[at] == '!' && c->s[at + 1] != '=') {
		/* a run of '!' counted, not recursed into: any number of
		 * them is an error at worst (too many terms), never the
		 * end of the stack */
		size_t nots = 0;
		while (c->s[c->pos] == '!' && c->s[c->pos + 1] != '=') {
			c->pos++;
			nots++;
			skip_ws(c);
		}
		int r = parse_unary(c);
		for (; !r && nots; nots--)
			r = emit(c, (struct ev_fpred){ .op = F_NOT }, at);
		return r;
	}
	if (c->s[at] == '(') {
		if (++c->depth > 32)
			FFAIL(c, UKPEV_E_FILTER_TOO_MANY, at);
		c->pos++;
		int r = parse_or(c);
		if (r)
			return r;
		skip_ws(c);
		if (c->s[c->pos] != ')')
			FFAIL(c, UKPEV_E_FILTER_UNBALANCED, at);
		c->pos++;
		c->depth--;
		return 0;
	}
	if (c->s[at] == ')')
		FFAIL(c, UKPEV_E_FILTER_TOO_FEW_OPEN, at);
	return parse_pred(c);
}

static int parse_and(struct fctx *c)
{
	int r = parse_unary(c);
	for (;;) {
		if (r)
			return r;
		skip_ws(c);
		size_t at = c->pos;
		if (strncmp(c->s + c->pos, "&&", 2))
			return 0;
		c->pos += 2;
		r = parse_unary(c);
		if (!r)
			r = emit(c, (struct ev_fpred){ .op = F_AND }, at);
	}
}

static int parse_or(struct fctx *c)
{
	int r = parse_and(c);
	for (;;) {
		if (r)
			return r;
		skip_ws(c);
		size_t at = c->pos;
		if (strncmp(c->s + c->pos, "||", 2))
			return 0;
		c->pos += 2;
		r = parse_and(c);
		if (!r)
			r = emit(c, (struct ev_fpred){ .op = F_OR }, at);
	}
}

int ev_filter_compile(const struct ukpev_def *d, const char *expr, struct ev_filter **out,
		      struct ukpev_error *err)
{
	struct ukpev_error dummy;
	if (!err)
		err = &dummy;
	err->code = UKPEV_E_NONE;
	err->offset = 0;
	*out = NULL;
	struct ev_filter *f = calloc(1, sizeof(*f));
	if (!f || !(f->text = strdup(expr ? expr : ""))) {
		free(f);
		return -ENOMEM;
	}
	struct fctx c = { .d = d, .s = f->text, .f = f, .err = err };
	int r = add_str(&c, "", 0, &(uint32_t){ 0 });
	skip_ws(&c);
	if (!r && !c.s[c.pos]) {
		ev_set_err(err, UKPEV_E_FILTER_PARSE, 0);
		r = -EINVAL;
	}
	if (!r)
		r = parse_or(&c);
	if (!r) {
		skip_ws(&c);
		if (c.s[c.pos] == ')') {
			ev_set_err(err, UKPEV_E_FILTER_TOO_FEW_OPEN, (int)c.pos);
			r = -EINVAL;
		} else if (c.s[c.pos]) {
			ev_set_err(err, UKPEV_E_FILTER_PARSE, (int)c.pos);
			r = -EINVAL;
		}
	}
	if (r) {
		ev_filter_free(f);
		return r;
	}
	*out = f;
	return 0;
}

void ev_filter_free(struct ev_filter *f)
{
	if (!f)
		return;
	free(f->text);
	free(f->strtab);
	free(f);
}

int ukpev_filter_check(const struct ukpev_def *d, const char *expr, struct ukpev_error *err)
{
	struct ev_filter *f;
	if (!d)
		return -EINVAL;
	int r = ev_filter_compile(d, expr, &f, err);
	ev_filter_free(f);
	return r;
}
