/* SPDX-License-Identifier: MIT */
/*
 * Error messages, and decoding and formatting of records: the kernel's
 * print forms (trace_probe.c's print functions) and their JSON
 * counterparts.  Usable in any process: it reads only the record and
 * the event's description.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "ev_int.h"

static const char *const messages[UKPEV_E__MAX] = {
	[UKPEV_E_NONE] = "Success",
	[UKPEV_E_BAD_PROBE_TYPE] = "Invalid probe type",
	[UKPEV_E_BAD_MAXACT] = "Invalid maxactive number",
	[UKPEV_E_MAXACT_NO_KPROBE] = "Maxactive is not for kprobe",
	[UKPEV_E_MAXACT_TOO_BIG] = "Maxactive is too big",
	[UKPEV_E_NO_GROUP_NAME] = "Group name is not specified",
	[UKPEV_E_GROUP_TOO_LONG] = "Group name is too long",
	[UKPEV_E_BAD_GROUP_NAME] = "Group name must follow the same rules as C identifiers",
	[UKPEV_E_NO_EVENT_NAME] = "Event name is not specified",
	[UKPEV_E_EVENT_TOO_LONG] = "Event name is too long",
	[UKPEV_E_BAD_EVENT_NAME] = "Event name must follow the same rules as C identifiers",
	[UKPEV_E_EVENT_EXIST] = "Given group/event name is already used by another event",
	[UKPEV_E_NO_PLACE] = "Probe point is not specified",
	[UKPEV_E_BAD_PROBE_ADDR] = "Invalid probed address or symbol",
	[UKPEV_E_BAD_FILE_OFFS] = "Invalid file offset value",
	[UKPEV_E_BAD_RETPROBE] = "Retprobe address must be an function entry",
	[UKPEV_E_RETVAL_ON_PROBE] = "$retval is not available on probe",
	[UKPEV_E_BAD_STACK_NUM] = "Invalid stack number",
	[UKPEV_E_BAD_ARG_NUM] = "Invalid argument number",
	[UKPEV_E_BAD_VAR] = "Invalid $-variable specified",
	[UKPEV_E_BAD_MEM_ADDR] = "Invalid memory address",
	[UKPEV_E_BAD_IMM] = "Invalid immediate value",
	[UKPEV_E_IMMSTR_NO_CLOSE] = "String is not closed with '\"'",
	[UKPEV_E_TOO_MANY_OPS] = "Dereference is too much nested",
	[UKPEV_E_DEREF_NEED_BRACE] = "Dereference needs a brace",
	[UKPEV_E_BAD_DEREF_OFFS] = "Invalid dereference offset",
	[UKPEV_E_DEREF_OPEN_BRACE] = "Dereference brace is not closed",
	[UKPEV_E_COMM_CANT_DEREF] = "$comm can not be dereferenced",
	[UKPEV_E_BAD_FETCH_ARG] = "Invalid fetch argument",
	[UKPEV_E_ARRAY_NO_CLOSE] = "Array is not closed",
	[UKPEV_E_BAD_ARRAY_SUFFIX] = "Array has wrong suffix",
	[UKPEV_E_BAD_ARRAY_NUM] = "Invalid array size",
	[UKPEV_E_ARRAY_TOO_BIG] = "Array number is too big",
	[UKPEV_E_BAD_ARRAY_TYPE] = "Array can be used only for memory fetch",
	[UKPEV_E_BAD_TYPE] = "Unknown type is specified",
	[UKPEV_E_BAD_STRING] = "String accepts only memory argument",
	[UKPEV_E_BAD_SYMSTRING] = "Symbol String doesn't accept data/userdata",
	[UKPEV_E_BAD_BITFIELD] = "Invalid bitfield",
	[UKPEV_E_ARG_NAME_TOO_LONG] = "Argument name is too long",
	[UKPEV_E_NO_ARG_NAME] = "Argument name is not specified",
	[UKPEV_E_BAD_ARG_NAME] = "Argument name must follow the same rules as C identifiers",
	[UKPEV_E_USED_ARG_NAME] = "This argument name is already used",
	[UKPEV_E_NO_ARG_BODY] = "No argument expression",
	[UKPEV_E_TOO_MANY_ARGS] = "Too many arguments are specified",
	[UKPEV_E_RECORD_TOO_BIG] = "Event record is too large",
	[UKPEV_E_UNKNOWN_SYMBOL] = "Unknown symbol",
	[UKPEV_E_UNKNOWN_OBJECT] = "Failed to find the given file",
	[UKPEV_E_BAD_INSN_BNDRY] = "Probe point is not an instruction boundary",
	[UKPEV_E_FAIL_REG_PROBE] = "Failed to register probe event",
	[UKPEV_E_NO_AREA_SPACE] = "Too many events",
	[UKPEV_E_FILTER_PARSE] = "Meaningless filter expression",
	[UKPEV_E_FILTER_FIELD] = "Field not found",
	[UKPEV_E_FILTER_OP] = "Illegal operation for field type",
	[UKPEV_E_FILTER_MISSING_VAL] = "Invalid value (did you forget quotes)?",
	[UKPEV_E_FILTER_BAD_NUM] = "Illegal integer value",
	[UKPEV_E_FILTER_UNBALANCED] = "Too many '('",
	[UKPEV_E_FILTER_TOO_MANY] = "Too many terms in predicate expression",
	[UKPEV_E_FILTER_BAD_STRING] = "Missing matching quote",
	[UKPEV_E_FILTER_NO_EVENT] = "Unknown event",
	[UKPEV_E_NOFENTRY_ARGS] = "$arg* can be used only on function entry or exit",
	[UKPEV_E_FILTER_INVALID_OP] = "Invalid operator",
	[UKPEV_E_FILTER_TOO_FEW_OPEN] = "Too few '('",
	[UKPEV_E_FILTER_EXPECT_STRING] = "Expecting string field",
	[UKPEV_E_FILTER_EXPECT_DIGIT] = "Expecting numeric field",
	[UKPEV_E_BAD_TRIGGER] = "Invalid trigger",
	[UKPEV_E_TRIGGER_COUNT] = "Invalid trigger count",
	[UKPEV_E_HIST_FIELD] = "Couldn't find field",
	[UKPEV_E_HIST_MODIFIER] = "Invalid field modifier",
	[UKPEV_E_HIST_FIELD_TYPE] = "Field of this type can't be used here",
	[UKPEV_E_HIST_TOO_MANY] = "Too many fields",
	[UKPEV_E_HIST_NO_KEYS] = "No keys given",
	[UKPEV_E_HIST_SORT] = "Sort field not found",
	[UKPEV_E_HIST_SIZE] = "Invalid size",
	[UKPEV_E_HIST_ATTR] = "Unknown hist attribute",
	[UKPEV_E_HIST_TOO_MANY_HISTS] = "Too many histograms",
	[UKPEV_E_TRIGGER_NO_STACKS] = "Stack traces need an event created with UKPEV_F_STACKS",
};

const char *ukpev_strerror(int code)
{
	if (code < 0 || code >= UKPEV_E__MAX || !messages[code])
		return "Unknown error";
	return messages[code];
}

int ukpev_error_format(char *buf, size_t n, const char *text, const struct ukpev_error *err)
{
	static const char cmd[] = "  Command: ";
	int off = err ? err->offset : 0;
	if (!text)
		text = "";
	if (!buf)
		n = 0;
	if (off < 0)
		off = 0;
	int len = snprintf(buf, n, "ukprobe: error: %s\n%s%s\n%*s^\n",
			   ukpev_strerror(err ? err->code : 0), cmd, text,
			   (int)(sizeof(cmd) - 1) + off, "");
	return len;
}

/* ---- an output buffer, snprintf-like ------------------------------------- */

struct out {
	char *b;
	size_t n, len;
};

__attribute__((format(printf, 2, 3)))
static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	size_t room = o->len < o->n ? o->n - o->len : 0;
	int k = vsnprintf(room ? o->b + o->len : NULL, room, fmt, ap);
	va_end(ap);
	if (k > 0)
		o->len += (size_t)k;
}

static void putc_(struct out *o, char c)
{
	if (o->len + 1 < o->n) {
		o->b[o->len] = c;
		o->b[o->len + 1] = 0;
	}
	o->len++;
}

static void putn(struct out *o, const char *s, size_t k)
{
	if (o->len + k < o->n) {
		memcpy(o->b + o->len, s, k);
		o->b[o->len + k] = 0;
	} else if (o->len < o->n) {
		size_t room = o->n - o->len - 1;
		memcpy(o->b + o->len, s, room);
		o->b[o->n - 1] = 0;
	}
	o->len += k;
}

static void put_u64(struct out *o, uint64_t v)
{
	char t[24];
	int i = sizeof(t);
	do {
		t[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	putn(o, t + i, sizeof(t) - (size_t)i);
}

static void put_s64(struct out *o, int64_t v)
{
	if (v < 0) {
		putc_(o, '-');
		put_u64(o, (uint64_t)0 - (uint64_t)v);
	} else {
		put_u64(o, (uint64_t)v);
	}
}

/* 0x... into t (at least 19 bytes); its length */
static size_t hex(char *t, uint64_t v)
{
	static const char dig[] = "0123456789abcdef";
	char r[16];
	int i = 16;
	do {
		r[--i] = dig[v & 15];
		v >>= 4;
	} while (v);
	t[0] = '0';
	t[1] = 'x';
	memcpy(t + 2, r + i, (size_t)(16 - i));
	t[2 + 16 - i] = 0;
	return (size_t)(2 + 16 - i);
}

/* length of a valid UTF-8 sequence at s (n bytes left), 0 if invalid */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t k;
	unsigned c = s[0];
	if (c >= 0xc2 && c <= 0xdf)
		k = 2;
	else if (c >= 0xe0 && c <= 0xef)
		k = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		k = 4;
	else
		return 0;
	if (k > n)
		return 0;
	for (size_t i = 1; i < k; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	/* overlong forms, surrogates, beyond U+10FFFF */
	if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0) ||
	    (c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))
		return 0;
	return k;
}

/* a JSON string: escapes, UTF-8 kept, other bytes as U+FFFD */
static void put_json_str(struct out *o, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	putc_(o, '"');
	for (size_t i = 0; i < n;) {
		unsigned char c = u[i];
		if (c == '"' || c == '\\') {
			putc_(o, '\\');
			putc_(o, (char)c);
		} else if (c < 0x20 || c == 0x7f) {
			put(o, "\\u%04x", c);
		} else if (c >= 0x80) {
			size_t k = utf8_len(u + i, n - i);
			if (k) {
				putn(o, s + i, k);
				i += k;
				continue;
			}
			putn(o, "\\ufffd", 6);
		} else {
			putc_(o, (char)c);
		}
		i++;
	}
	putc_(o, '"');
}

/* ---- values ------------------------------------------------------------------ */

/* (a payload a consumer copied may be unaligned: byte access) */
static bool faulted(const struct ukpev_record *rec, unsigned arg)
{
	const uint8_t *bm = rec->payload;
	return (bm[arg / 8] >> (arg % 8)) & 1;
}

static bool is_signed(int t)
{
	return t >= UKPEV_T_S8 && t <= UKPEV_T_S64;
}

static bool is_str(int t)
{
	return t == UKPEV_T_STRING || t == UKPEV_T_USTRING || t == UKPEV_T_COMM;
}

static uint64_t load(const uint8_t *p, unsigned size, bool sign)
{
	switch (size) {
	case 1: return sign ? (uint64_t)(int64_t)*(const int8_t *)p : *p;
	case 2: { int16_t v; memcpy(&v, p, 2); return sign ? (uint64_t)(int64_t)v : (uint16_t)v; }
	case 4: { int32_t v; memcpy(&v, p, 4); return sign ? (uint64_t)(int64_t)v : (uint32_t)v; }
	default: { uint64_t v; memcpy(&v, p, 8); return v; }
	}
}

static bool arg_ok(const struct ukpev_event_info *ev, const struct ukpev_record *rec, unsigned arg)
{
	if (!ev || !rec || arg >= ev->nargs || rec->payload_size < ev->payload_size)
		return false;
	const struct ukpev_arg_info *a = &ev->args[arg];
	unsigned cnt = a->count ? a->count : 1;
	return a->offset + a->elem_size * cnt <= ev->payload_size;
}

int ukpev_value_u64(const struct ukpev_event_info *ev, const struct ukpev_record *rec,
		    unsigned arg, unsigned idx, uint64_t *out)
{
	if (!arg_ok(ev, rec, arg) || !out)
		return -EINVAL;
	const struct ukpev_arg_info *a = &ev->args[arg];
	if (is_str(a->type) || idx >= (a->count ? a->count : 1))
		return -EINVAL;
	if (faulted(rec, arg))
		return -EFAULT;
	const uint8_t *p = (const uint8_t *)rec->payload + a->offset + idx * a->elem_size;
	uint64_t v = load(p, a->elem_size, is_signed(a->type));
	if (a->type == UKPEV_T_BITFIELD) {
		v >>= a->bf_shift;
		if (a->bf_width < 64)
			v &= (1ULL << a->bf_width) - 1;
	}
	*out = v;
	return 0;
}

int ukpev_value_str_at(const struct ukpev_event_info *ev, const struct ukpev_record *rec,
		       unsigned arg, unsigned idx, const char **s, size_t *len)
{
	if (!arg_ok(ev, rec, arg) || !s || !len || !is_str(ev->args[arg].type) ||
	    idx >= (ev->args[arg].count ? ev->args[arg].count : 1))
		return -EINVAL;
	if (faulted(rec, arg))
		return -EFAULT;
	uint32_t loc;
	memcpy(&loc, (const uint8_t *)rec->payload + ev->args[arg].offset + 4 * idx, 4);
	unsigned off = loc & 0xffff, n = loc >> 16;
	if (!n)
		return -EFAULT;	/* an element of string[N] that was unreadable */
	if (off + n > rec->payload_size)
		return -EINVAL;
	*s = (const char *)rec->payload + off;
	*len = n - 1;	/* without the NUL */
	return 0;
}

int ukpev_value_str(const struct ukpev_event_info *ev, const struct ukpev_record *rec,
		    unsigned arg, const char **s, size_t *len)
{
	return ukpev_value_str_at(ev, rec, arg, 0, s, len);
}

/* one element, in ftrace's form (json: as a JSON value) */
static void put_elem(struct out *o, const struct ukpev_arg_info *a, uint64_t v, bool json,
		     ukpev_symbolize_fn sym, void *sarg)
{
	char tmp[512];
	switch (a->type) {
	case UKPEV_T_U8: case UKPEV_T_U16: case UKPEV_T_U32: case UKPEV_T_U64:
	case UKPEV_T_BITFIELD:
		put_u64(o, v);
		return;
	case UKPEV_T_S8: case UKPEV_T_S16: case UKPEV_T_S32: case UKPEV_T_S64:
		put_s64(o, (int64_t)v);
		return;
	case UKPEV_T_CHAR:
		/* the kernel's '%c'; a NUL (which would end the text here) as
		 * the escape C writes for it */
		if ((char)v)
			snprintf(tmp, sizeof(tmp), "'%c'", (char)v);
		else
			snprintf(tmp, sizeof(tmp), "'\\0'");
		break;
	case UKPEV_T_SYMBOL:
	case UKPEV_T_SYMSTR: {
		int k = sym ? sym((unsigned long)v, tmp, sizeof(tmp), sarg) : -1;
		if (k <= 0 || !tmp[0])
			snprintf(tmp, sizeof(tmp), "0x%" PRIx64, v);
		if (a->type == UKPEV_T_SYMSTR && !json) {
			put(o, "\"%s\"", tmp);
			return;
		}
		break;
	}
	default: {	/* x types */
		size_t k = hex(tmp, v);
		if (json)
			put_json_str(o, tmp, k);
		else
			putn(o, tmp, k);
		return;
	}
	}
	if (json)
		put_json_str(o, tmp, strlen(tmp));
	else
		putn(o, tmp, strlen(tmp));
}

int ukpev_format_args(const struct ukpev_event_info *ev, const struct ukpev_record *rec,
		      int format, char *buf, size_t n, ukpev_symbolize_fn sym, void *arg)
{
	if (!buf)
		n = 0;
	struct out o = { buf, n, 0 };
	bool json = format == UKPEV_FMT_JSON;
	if (n)
		buf[0] = 0;
	for (unsigned i = 0; ev && i < ev->nargs; i++) {
		const struct ukpev_arg_info *a = &ev->args[i];
		if (json) {
			if (i)
				putc_(&o, ',');
			put_json_str(&o, a->name, strlen(a->name));
			putc_(&o, ':');
		} else {
			putc_(&o, ' ');
			putn(&o, a->name, strlen(a->name));
			putc_(&o, '=');
		}
		if (!arg_ok(ev, rec, i) || faulted(rec, i)) {
			put(&o, json ? "\"(fault)\"" : "(fault)");
			continue;
		}
		if (is_str(a->type)) {
			unsigned cnt = a->count ? a->count : 1;
			if (a->count)
				putc_(&o, json ? '[' : '{');
			for (unsigned k = 0; k < cnt; k++) {
				const char *s;
				size_t len;
				if (k)
					putc_(&o, ',');
				if (ukpev_value_str_at(ev, rec, i, k, &s, &len)) {
					put(&o, json ? "\"(fault)\"" : "(fault)");
				} else if (json) {
					put_json_str(&o, s, len);
				} else {
					putc_(&o, '"');
					putn(&o, s, len);
					putc_(&o, '"');
				}
			}
			if (a->count)
				putc_(&o, json ? ']' : '}');
			continue;
		}
		unsigned cnt = a->count ? a->count : 1;
		if (a->count)
			putc_(&o, json ? '[' : '{');
		for (unsigned k = 0; k < cnt; k++) {
			uint64_t v = 0;
			if (k)
				putc_(&o, ',');
			ukpev_value_u64(ev, rec, i, k, &v);
			put_elem(&o, a, v, json, sym, arg);
		}
		if (a->count)
			putc_(&o, json ? ']' : '}');
	}
	return (int)o.len;
}
