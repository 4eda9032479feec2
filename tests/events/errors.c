/* SPDX-License-Identifier: MIT */
/*
 * Bad definitions and filters: each refused with its message and the
 * caret under the offending word, in the kernel's error-log form.
 */
#include "evt.h"

volatile long sink;
NOIL long t_fn(long a, long b)
{
	sink = a;
	return 0x12345678 + b;
}

struct bad { const char *text; int code; int offset; };

#define LONG64 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static const struct bad bad_defs[] = {
	{ "x malloc", UKPEV_E_BAD_PROBE_TYPE, 0 },
	{ "p5 malloc", UKPEV_E_MAXACT_NO_KPROBE, 1 },
	{ "r0 malloc", UKPEV_E_BAD_MAXACT, 1 },
	{ "r5000 malloc", UKPEV_E_MAXACT_TOO_BIG, 1 },
	{ "rx malloc", UKPEV_E_BAD_MAXACT, 1 },
	{ "p:/ev malloc", UKPEV_E_NO_GROUP_NAME, 2 },
	{ "p:1grp/ev malloc", UKPEV_E_BAD_GROUP_NAME, 2 },
	{ "p:grp/e-v malloc", UKPEV_E_BAD_EVENT_NAME, 6 },
	{ "p:grp/" LONG64 " malloc", UKPEV_E_EVENT_TOO_LONG, 6 },
	{ "p:" LONG64 "/ev malloc", UKPEV_E_GROUP_TOO_LONG, 2 },
	{ "p", UKPEV_E_NO_PLACE, 1 },
	{ "p:ev", UKPEV_E_NO_PLACE, 4 },
	{ "p 12abc", UKPEV_E_BAD_PROBE_ADDR, 2 },
	{ "p 0xzz", UKPEV_E_BAD_PROBE_ADDR, 2 },
	{ "p malloc+zz", UKPEV_E_BAD_PROBE_ADDR, 8 },
	{ "p libc.so.6:0x12g", UKPEV_E_BAD_FILE_OFFS, 12 },
	{ "r malloc+4", UKPEV_E_BAD_RETPROBE, 2 },
	{ "p malloc+4%return", UKPEV_E_BAD_RETPROBE, 2 },
	{ "p malloc $retval", UKPEV_E_RETVAL_ON_PROBE, 9 },
	{ "p malloc $stackx", UKPEV_E_BAD_STACK_NUM, 9 },
	{ "p malloc $arg0", UKPEV_E_BAD_ARG_NUM, 9 },
	{ "p malloc $foo", UKPEV_E_BAD_VAR, 9 },
	{ "p malloc @", UKPEV_E_BAD_MEM_ADDR, 9 },
	{ "p malloc @0x12q", UKPEV_E_BAD_MEM_ADDR, 9 },
	{ "p malloc @sym+zz", UKPEV_E_BAD_MEM_ADDR, 13 },
	{ "p malloc \\12x", UKPEV_E_BAD_IMM, 9 },
	{ "p malloc \\\"abc", UKPEV_E_IMMSTR_NO_CLOSE, 9 },
	{ "p malloc +0%di", UKPEV_E_DEREF_NEED_BRACE, 11 },
	{ "p malloc +zz(%di)", UKPEV_E_BAD_DEREF_OFFS, 9 },
	{ "p malloc +0(%di", UKPEV_E_DEREF_OPEN_BRACE, 15 },
	{ "p malloc x=+0(%di y=%si", UKPEV_E_DEREF_OPEN_BRACE, 23 },
	{ "p malloc +0($comm)", UKPEV_E_COMM_CANT_DEREF, 12 },
	{ "p malloc %dq", UKPEV_E_BAD_FETCH_ARG, 9 },
	{ "p:grp/ev libc.so.6:malloc size=%dq", UKPEV_E_BAD_FETCH_ARG, 31 },
	{ "p malloc +0(%di)x", UKPEV_E_BAD_FETCH_ARG, 16 },
	{ "p malloc di", UKPEV_E_BAD_FETCH_ARG, 9 },
	{ "p malloc +0(%di):u8[4", UKPEV_E_ARRAY_NO_CLOSE, 21 },
	{ "p malloc +0(%di):u8[4]x", UKPEV_E_BAD_ARRAY_SUFFIX, 22 },
	{ "p malloc +0(%di):u8[0]", UKPEV_E_BAD_ARRAY_NUM, 20 },
	{ "p malloc +0(%di):u8[65]", UKPEV_E_ARRAY_TOO_BIG, 20 },
	{ "p malloc %di:u8[2]", UKPEV_E_BAD_ARRAY_TYPE, 13 },
	{ "p malloc %di:u7", UKPEV_E_BAD_TYPE, 13 },
	{ "p malloc %di:", UKPEV_E_BAD_TYPE, 13 },
	{ "p malloc %di:string", UKPEV_E_BAD_STRING, 13 },
	{ "p malloc $comm:u32", UKPEV_E_BAD_TYPE, 15 },
	{ "p malloc +0(%di):b9@0/8", UKPEV_E_BAD_BITFIELD, 17 },
	{ "p malloc +0(%di):b4@6/8", UKPEV_E_BAD_BITFIELD, 17 },
	{ "p malloc =%di", UKPEV_E_NO_ARG_NAME, 9 },
	{ "p malloc 1x=%di", UKPEV_E_BAD_ARG_NAME, 9 },
	{ "p malloc x=", UKPEV_E_NO_ARG_BODY, 11 },
	{ "p malloc x=%di x=%si", UKPEV_E_USED_ARG_NAME, 15 },
	{ "p malloc " LONG64 "=%di", UKPEV_E_ARG_NAME_TOO_LONG, 9 },
	{ "p malloc+4 $arg1", UKPEV_E_NOFENTRY_ARGS, 11 },
};

static void check(const char *text, int r, const struct ukpev_error *err, int code, int offset)
{
	if (r != -EINVAL || err->code != code || err->offset != offset)
		UKT_FAIL("'%s': r %d, \"%s\" at %d; want \"%s\" at %d", text, r,
			 ukpev_strerror(err->code), err->offset, ukpev_strerror(code), offset);
	/* the caret column: strlen("  Command: ") + offset */
	size_t sz = 2 * strlen(text) + 256;
	char *buf = malloc(sz), *want = malloc(sz);
	UKT_ASSERT(buf && want);
	int n = ukpev_error_format(buf, sz, text, err);
	snprintf(want, sz, "ukprobe: error: %s\n  Command: %s\n%*s^\n",
		 ukpev_strerror(code), text, 11 + offset, "");
	UKT_STREQ(buf, want);
	UKT_EQ(n, (int)strlen(want));
	free(buf);
	free(want);
}

UKT_CASE(malformed_definitions)
{
	unsigned n = sizeof(bad_defs) / sizeof(bad_defs[0]);
	UKT_ASSERT(n >= 30);
	for (unsigned i = 0; i < n; i++) {
		const struct bad *b = &bad_defs[i];
		struct ukpev_def *d = NULL;
		struct ukpev_error err = { 0 };
		int r = ukpev_def_parse(b->text, &d, &err);
		check(b->text, r, &err, b->code, b->offset);
		UKT_ASSERT(d == NULL);
	}
}

/* a record larger than UKPEV_MAX_RECORD: refused at the fetcharg that
 * makes it so; the definition without it is fine */
UKT_CASE(record_too_big)
{
	char def[8192];
	int n = snprintf(def, sizeof(def), "p malloc");
	for (int i = 0; i < 80; i++)
		n += snprintf(def + n, sizeof(def) - (size_t)n, " s%d=+0(%%di):string", i);
	struct ukpev_def *d;
	struct ukpev_error err;
	UKT_EQ(ukpev_def_parse(def, &d, &err), -EINVAL);
	UKT_EQ(err.code, UKPEV_E_RECORD_TOO_BIG);
	UKT_ASSERT(def[err.offset - 1] == ' ' && def[err.offset] == 's');
	def[err.offset - 1] = 0;
	UKT_EQ(ukpev_def_parse(def, &d, &err), 0);
	UKT_ASSERT(ukpev_def_info(d)->nargs > 50);
	ukpev_def_free(d);
}

/* the contract's example, byte for byte */
UKT_CASE(cli_example)
{
	struct ukpev_def *d;
	struct ukpev_error err;
	const char *def = "p:grp/ev libc.so.6:malloc size=%dq";
	UKT_EQ(ukpev_def_parse(def, &d, &err), -EINVAL);
	char buf[512];
	ukpev_error_format(buf, sizeof(buf), def, &err);
	UKT_STREQ(buf, "ukprobe: error: Invalid fetch argument\n"
		       "  Command: p:grp/ev libc.so.6:malloc size=%dq\n"
		       "                                          ^\n");
}

UKT_CASE(nesting_limit)
{
	static char def[16 + 4 * (UKPEV_MAX_DEPTH + 1)];
	int n = snprintf(def, sizeof(def), "p malloc ");
	for (int i = 0; i < UKPEV_MAX_DEPTH + 1; i++)
		n += snprintf(def + n, sizeof(def) - (size_t)n, "+0(");
	n += snprintf(def + n, sizeof(def) - (size_t)n, "%%di");
	for (int i = 0; i < UKPEV_MAX_DEPTH + 1; i++)
		n += snprintf(def + n, sizeof(def) - (size_t)n, ")");
	struct ukpev_def *d;
	struct ukpev_error err;
	check(def, ukpev_def_parse(def, &d, &err), &err, UKPEV_E_TOO_MANY_OPS,
	      9 + 3 * UKPEV_MAX_DEPTH);
	/* one level less is fine */
	memmove(def + 9, def + 12, strlen(def + 12) + 1);
	def[strlen(def) - 1] = 0;
	UKT_EQ(ukpev_def_parse(def, &d, &err), 0);
	ukpev_def_free(d);
}

/* errors found only when the event is created in the process */
UKT_CASE(resolution_errors)
{
	struct ukpev_area *a = evt_area(0);
	static const struct bad t[] = {
		{ "p no_such_function_xyz", UKPEV_E_UNKNOWN_SYMBOL, 2 },
		{ "p nosuchlib.so:malloc", UKPEV_E_UNKNOWN_OBJECT, 2 },
		{ "p libc.so.6:no_such_fn_xyz", UKPEV_E_UNKNOWN_SYMBOL, 12 },
		{ "p nosuchlib.so:0x10", UKPEV_E_UNKNOWN_OBJECT, 2 },
		{ "p libc.so.6:0x7fffffff", UKPEV_E_BAD_FILE_OFFS, 12 },
		{ "p t_fn a=@no_such_var_xyz", UKPEV_E_UNKNOWN_SYMBOL, 10 },
		{ "p t_fn a=+8(@no_such_var_xyz)", UKPEV_E_UNKNOWN_SYMBOL, 13 },
		{ "p t_fn a=@nolib.so:x", UKPEV_E_UNKNOWN_OBJECT, 10 },
		{ "p t_fn+1", UKPEV_E_BAD_INSN_BNDRY, 2 },
	};
	for (unsigned i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct ukpev_event *e = NULL;
		struct ukpev_error err;
		int r = ukpev_event_create(a, t[i].text, 0, &e, &err);
		check(t[i].text, r, &err, t[i].code, t[i].offset);
		UKT_ASSERT(e == NULL);
	}
	/* a name used twice in one area */
	struct ukpev_event *e1 = evt_create(a, "p:dup t_fn"), *e2 = NULL;
	struct ukpev_error err;
	check("p:dup t_fn", ukpev_event_create(a, "p:dup t_fn", 0, &e2, &err), &err,
	      UKPEV_E_EVENT_EXIST, 2);
	struct ukpev_event *e3 = evt_create(a, "p t_fn");
	check("p  t_fn", ukpev_event_create(a, "p  t_fn", 0, &e2, &err), &err,
	      UKPEV_E_EVENT_EXIST, 3);
	ukpev_event_remove(e1);
	ukpev_event_remove(e3);
	/* nothing of the refused ones was armed */
	char list[4096];
	ukt_list_to(list, sizeof(list));
	UKT_STREQ(list, "");
	ukpev_area_destroy(a);
}

static const struct bad bad_filters[] = {
	{ "", UKPEV_E_FILTER_PARSE, 0 },
	{ "   ", UKPEV_E_FILTER_PARSE, 0 },
	{ "nofield == 1", UKPEV_E_FILTER_FIELD, 0 },
	{ "n == 1 && nofield == 2", UKPEV_E_FILTER_FIELD, 10 },
	{ "n = 1", UKPEV_E_FILTER_INVALID_OP, 2 },
	{ "n == ", UKPEV_E_FILTER_MISSING_VAL, 5 },
	{ "n == abc", UKPEV_E_FILTER_BAD_NUM, 5 },
	{ "n == 12x", UKPEV_E_FILTER_BAD_NUM, 5 },
	{ "n == \"abc\"", UKPEV_E_FILTER_EXPECT_STRING, 5 },
	{ "s < \"abc\"", UKPEV_E_FILTER_OP, 2 },
	{ "s & 1", UKPEV_E_FILTER_OP, 2 },
	{ "n ~ 1", UKPEV_E_FILTER_OP, 2 },
	{ "(n == 1", UKPEV_E_FILTER_UNBALANCED, 0 },
	{ "((n == 1) || (u > 2)", UKPEV_E_FILTER_UNBALANCED, 0 },
	{ "n == 1)", UKPEV_E_FILTER_TOO_FEW_OPEN, 6 },
	{ "s == \"abc", UKPEV_E_FILTER_BAD_STRING, 5 },
	{ "n == 1 &&", UKPEV_E_FILTER_PARSE, 9 },
	{ "n == 1 junk", UKPEV_E_FILTER_PARSE, 7 },
	{ "a == 1", UKPEV_E_FILTER_OP, 0 },
	{ "!", UKPEV_E_FILTER_PARSE, 1 },
};

UKT_CASE(malformed_filters)
{
	struct ukpev_def *d;
	struct ukpev_error err;
	UKT_EQ(ukpev_def_parse("p t_fn n=%di:s32 u=%si:u64 s=+0(%dx):string b=+0(%cx):b3@1/8 "
			       "a=+0(%dx):u8[2]", &d, &err), 0);
	for (unsigned i = 0; i < sizeof(bad_filters) / sizeof(bad_filters[0]); i++) {
		const struct bad *b = &bad_filters[i];
		check(b->text, ukpev_filter_check(d, b->text, &err), &err, b->code, b->offset);
	}
	/* too many terms */
	char f[2048] = "";
	for (int i = 0; i < 33; i++)
		strcat(f, i ? " || n == 1" : "n == 1");
	UKT_EQ(ukpev_filter_check(d, f, &err), -EINVAL);
	UKT_EQ(err.code, UKPEV_E_FILTER_TOO_MANY);
	/* a run of '!' as long as a command line takes: an error at its
	 * first, never a stack overflow (it was one '!' a stack frame) */
	size_t nn = 1000000;
	char *nots = malloc(nn + 8);
	UKT_ASSERT(nots);
	memset(nots, '!', nn);
	strcpy(nots + nn, "n == 1");
	UKT_EQ(ukpev_filter_check(d, nots, &err), -EINVAL);
	UKT_EQ(err.code, UKPEV_E_FILTER_TOO_MANY);
	UKT_EQ(err.offset, 0);
	free(nots);
	/* and good ones */
	static const char *const good[] = {
		"n == 1", "n != -1 && u >= 0x10", "!(n < 3) || s ~ \"a*\"", "s == 'x y'",
		"common_pid == 1", "b & 2", "s != abc", "((n > 1))", "!!(n <= 2)",
	};
	for (unsigned i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		if (ukpev_filter_check(d, good[i], &err))
			UKT_FAIL("'%s': %s at %d", good[i], ukpev_strerror(err.code), err.offset);
	ukpev_def_free(d);
}

/* nothing is a crash: truncated and mangled definitions parse or fail */
UKT_CASE(every_prefix)
{
	static const char *const defs[] = {
		"r16:grp/ev libc.so.6:malloc%return x=+8(-16(+0(%di))):x32[4] s=+0(%si):string "
		"c=$comm i=\\\"imm str\" n=\\-12:s8 b=+1(%sp):b3@2/16 y=@libc.so.6:environ:u64",
		"p:g/e 0x1234 a=$stack7 b=$arg9 c=@0x1000:symbol d=+0(@sym-8):symstr",
	};
	for (unsigned k = 0; k < 2; k++) {
		size_t len = strlen(defs[k]);
		char buf[512];
		for (size_t i = 0; i <= len; i++) {
			memcpy(buf, defs[k], i);
			buf[i] = 0;
			struct ukpev_def *d = NULL;
			struct ukpev_error err;
			int r = ukpev_def_parse(buf, &d, &err);
			UKT_ASSERT(r == 0 || r == -EINVAL);
			UKT_ASSERT(r == 0 ? d != NULL : (err.offset >= 0 && (size_t)err.offset <= i));
			ukpev_def_free(d);
		}
	}
	struct ukpev_def *d;
	struct ukpev_error err;
	UKT_EQ(ukpev_def_parse(defs[0], &d, &err), 0);
	const struct ukpev_event_info *in = ukpev_def_info(d);
	UKT_EQ(in->kind, 'r');
	UKT_EQ(in->maxactive, 16);
	UKT_EQ(in->nargs, 7);
	UKT_STREQ(in->args[0].type_name, "x32[4]");
	UKT_STREQ(in->args[3].name, "i");
	UKT_STREQ(in->args[6].type_name, "u64");
	ukpev_def_free(d);
}

/* a refused event says nothing on the program's stderr: the error is
 * the caller's to report */
UKT_CASE(refusals_are_silent)
{
	struct ukpev_area *a = evt_area(0);
	unsetenv("UKPROBES_QUIET");
	FILE *tmp = tmpfile();
	UKT_ASSERT(tmp);
	int saved = dup(2);
	dup2(fileno(tmp), 2);
	static const char *const defs[] = {
		"p no_such_function_xyz", "p libc.so.6:no_such_fn_xyz", "p t_fn+1",
		"p t_fn a=@no_such_var_xyz",
	};
	for (unsigned i = 0; i < sizeof(defs) / sizeof(defs[0]); i++) {
		struct ukpev_event *e;
		struct ukpev_error err;
		UKT_EQ(ukpev_event_create(a, defs[i], 0, &e, &err), -EINVAL);
	}
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	UKT_EQ(ftell(tmp), 0);
	fclose(tmp);
	ukpev_area_destroy(a);
}

/* misuse of the API is an error, not a crash */
UKT_CASE(null_arguments)
{
	struct ukpev_error err;
	struct ukpev_def *d;
	UKT_EQ(ukpev_def_parse(NULL, &d, &err), -EINVAL);
	UKT_EQ(ukpev_def_parse("p f", NULL, &err), -EINVAL);
	UKT_ASSERT(ukpev_def_info(NULL) == NULL);
	UKT_EQ(ukpev_filter_check(NULL, "a == 1", &err), -EINVAL);
	UKT_EQ(ukpev_area_create(NULL, NULL), -EINVAL);
	UKT_EQ(ukpev_area_fd(NULL), -EINVAL);
	UKT_EQ(ukpev_area_sync(NULL), -EINVAL);
	ukpev_area_destroy(NULL);
	struct ukpev_event *e;
	UKT_EQ(ukpev_event_create(NULL, "p f", 0, &e, &err), -EINVAL);
	UKT_EQ(ukpev_event_set_filter(NULL, "a", &err), -EINVAL);
	UKT_EQ(ukpev_event_enable(NULL), -EINVAL);
	UKT_EQ(ukpev_event_disable(NULL), -EINVAL);
	ukpev_event_remove(NULL);
	UKT_ASSERT(ukpev_event_info(NULL) == NULL);
	UKT_ASSERT(ukpev_event_find(NULL, "x") == NULL);
	struct ukpev_reader *r;
	UKT_EQ(ukpev_reader_open(-1, &r), -EBADF);
	UKT_EQ(ukpev_reader_open(0, NULL), -EINVAL);
	UKT_EQ(ukpev_reader_from_area(NULL, &r), -EINVAL);
	UKT_EQ(ukpev_reader_poll(NULL, NULL, NULL, 0), -EINVAL);
	UKT_EQ(ukpev_reader_flush(NULL, NULL, NULL), -EINVAL);
	UKT_ASSERT(ukpev_reader_event(NULL, 0) == NULL);
	UKT_EQ(ukpev_reader_nevents(NULL), 0);
	UKT_EQ(ukpev_reader_lost(NULL), 0);
	struct ukpev_stats st;
	UKT_EQ(ukpev_reader_stats(NULL, 0, &st), -EINVAL);
	ukpev_reader_close(NULL);
	uint64_t v;
	const char *s;
	size_t n;
	UKT_EQ(ukpev_value_u64(NULL, NULL, 0, 0, &v), -EINVAL);
	UKT_EQ(ukpev_value_str(NULL, NULL, 0, &s, &n), -EINVAL);
	UKT_EQ(ukpev_format_args(NULL, NULL, UKPEV_FMT_FTRACE, NULL, 0, NULL, NULL), 0);
	UKT_ASSERT(ukpev_error_format(NULL, 0, NULL, NULL) > 0);
	UKT_STREQ(ukpev_strerror(-1), "Unknown error");
	UKT_STREQ(ukpev_strerror(UKPEV_E__MAX), "Unknown error");
	/* a file that is not an area */
	FILE *f = tmpfile();
	fputs("not an area, not at all, no header here", f);
	fflush(f);
	UKT_EQ(ukpev_reader_open(fileno(f), &r), -EINVAL);
	fclose(f);
}
