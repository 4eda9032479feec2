/* SPDX-License-Identifier: MIT */
/*
 * Source-level places and variables (DWARF): targets/dsrc.c, built by gcc
 * and clang at -O0 and -O2, prints at its marked lines the values of its
 * locals, parameters, fields through pointers, elements, enums and
 * bitfields; ukprobe, given those as source-level definitions, must
 * record exactly the printed values.  `probe -D` agrees with `perf probe
 * -D` (addresses, fetches and their names, lazy ;PATTERN lines) where perf reads the
 * build; bad input is refused with the error log.
 */
#include <stddef.h>

#include "run.h"

static void expect_caret(const struct run *r, const char *msg, const char *def, int offset);

static const char *const builds[] = {
	"dsrc-gcc-O0", "dsrc-gcc-O2", "dsrc-clang-O0", "dsrc-clang-O2",
};

/* the NAME=VALUE words of line, after the first word, into w (NULLs) */
static int words(char *line, char **w, int max)
{
	int n = 0;
	for (char *s = NULL, *t = strtok_r(line, " ", &s); t && n < max;
	     t = strtok_r(NULL, " ", &s))
		w[n++] = t;
	return n;
}

/* the n-th line of the program's output starting with prefix, after it */
static char *printed(const char *out, const char *prefix, int n)
{
	const char *p = out;
	size_t l = strlen(prefix);
	for (int k = 0; *p;) {
		const char *eol = strchr(p, '\n');
		if (!eol)
			break;
		if (!strncmp(p, prefix, l) && k++ == n)
			return strndup(p + l, (size_t)(eol - p - l));
		p = eol + 1;
	}
	return NULL;
}

/* every NAME=VALUE the event recorded is what the program printed, and
 * there are `want` of them */
static void same_values(const struct run *r, const char *ev, const char *prefix,
			int calls, int want)
{
	for (int c = 0; c < calls; c++) {
		char *got = event_args(r->out, ev, c), *pr = printed(r->out, prefix, c);
		RUN_EXPECT(*r, got && pr);
		char *gw[32], *pw[32];
		int ng = words(got, gw, 32), np = words(pr, pw, 32);
		RUN_EXPECT(*r, ng == want);
		for (int i = 0; i < ng; i++) {
			int found = 0;
			for (int j = 0; j < np; j++)
				found |= !strcmp(gw[i], pw[j]);
			if (!found) {
				show(r);
				UKT_FAIL("%s: %s recorded, not printed", ev, gw[i]);
			}
		}
		free(got);
		free(pr);
	}
	RUN_EXPECT(*r, !event_args(r->out, ev, calls));
}

/* names: a field's is its own (perf-probe.txt), an element's given */
static const char work_def[] = "p:dw/work work:3 r->id k sum r->small "
	"r->flag r->level r->col r->pin->deep v2=r->vals[2]";
static const char main_def[] = "p:dw/mainl dsrc.c:51 r.id r.in.deep total";

UKT_CASE(values_at_lines_match_the_program)
{
	for (size_t b = 0; b < sizeof builds / sizeof *builds; b++) {
		struct run r = ukprobe("trace", work_def, main_def, "--",
				       target(builds[b]), NULL);
		RUN_EXPECT(r, r.status == 0);
		same_values(&r, "work", "work ", 2, 9);
		same_values(&r, "mainl", "main ", 1, 3);
		run_free(&r);
	}
}

UKT_CASE(string_of_a_char_array_field)
{
	for (size_t b = 0; b < sizeof builds / sizeof *builds; b++) {
		struct run r = ukprobe("trace", "p:dw/s work:3 name=r->name:string", "--",
				       target(builds[b]), NULL);
		RUN_EXPECT(r, r.status == 0);
		RUN_EXPECT(r, count_lines(r.out, " s: (work+0x") == 2);
		int n = count_lines(r.out, ": (work+0x");
		RUN_EXPECT(r, n >= 2 && count_lines(r.out, ") name=\"alpha\"") == n);
		run_free(&r);
	}
}

UKT_CASE(unoptimized_line_has_every_address_under_one_name)
{
	/* gcc -O0 splits line 3 of work (a call spanning three lines) in five */
	struct run r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-D",
			       "p:dw/w work:3 k", NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, count_lines(r.out, "p:dw/w") == 5);
	static const char *const names[] = { "p:dw/w ", "p:dw/w_1 ", "p:dw/w_2 ",
		"p:dw/w_3 ", "p:dw/w_4 " };
	for (int i = 0; i < 5; i++)
		RUN_EXPECT(r, count_lines(r.out, names[i]) == 1);
	run_free(&r);
	r = ukprobe("trace", "p:dw/w work:3 k", "--", target("dsrc-gcc-O0"), NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " w_4: (work+0x") == 2);
	run_free(&r);
}

UKT_CASE(list_functions_lines_and_variables)
{
	struct run r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-F", NULL);
	RUN_EXPECT(r, r.status == 0 && !strcmp(r.out, "main\nscaled\nwork\n"));
	run_free(&r);
	r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-F", "w*", NULL);
	RUN_EXPECT(r, r.status == 0 && !strcmp(r.out, "work\n"));
	run_free(&r);
	r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-L", "work", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "/tests/cli/targets/dsrc.c:0>\n") &&
		   strstr(r.out, "\n      0  __attribute__((noinline)) int work(") &&
		   strstr(r.out, "\n         {\n") &&
		   strstr(r.out, "\n      3  \tprintf(\"work id=") &&
		   strstr(r.out, "\n      6  \treturn scaled(sum, k);\n      7  }\n"));
	run_free(&r);
	r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-L", "dsrc.c:50-52", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "/tests/cli/targets/dsrc.c:50>\n     50  ") &&
		   strstr(r.out, "\n     52  \treturn 0;\n"));
	run_free(&r);
	/* lines without code are shown, not 'Source file is not found' */
	r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-L", "dsrc.c:1-2", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "/tests/cli/targets/dsrc.c:1>\n         /* A program") &&
		   count_lines(r.out, "") == 3 && !*r.err);
	run_free(&r);
	r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-L", "nosuch.c:1-2", NULL);
	expect_caret(&r, "Source file is not found", "nosuch.c:1-2", 0);
	run_free(&r);
	r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-V", "work:3", NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, count_lines(r.out, "struct rec*\tr") == 5);
	RUN_EXPECT(r, count_lines(r.out, "int\tk") == 5);
	RUN_EXPECT(r, count_lines(r.out, "int\tsum") == 5);
	run_free(&r);
	r = ukprobe("probe", "--help", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "-D, --definition"));
	run_free(&r);
	r = ukprobe("help", "probe", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "-V, --vars=PLACE"));
	run_free(&r);
	r = ukprobe("--help", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "\n  probe "));
	run_free(&r);
	r = ukprobe("trace", "--help", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "--exec=OBJ") && strstr(r.out, "SRC:LINE"));
	run_free(&r);
	r = ukprobe("probe", "-F", NULL);	/* no -x */
	RUN_EXPECT(r, r.status == 2);
	run_free(&r);
	r = ukprobe("probe", "-x", "/nonexistent/obj", "-F", NULL);
	RUN_EXPECT(r, r.status == 1 && strstr(r.err, "/nonexistent/obj"));
	run_free(&r);
}

UKT_CASE(params_and_vars)
{
	struct run r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-D",
			       "p:dw/a work:3 $params", "p:dw/b work:3 $vars", NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, count_lines(r.out, " r=-24(%bp):x64 k=-28(%bp):s32\n") +
		      count_lines(r.out, " r=-24(%bp):x64 k=-28(%bp):s32") == 10);
	RUN_EXPECT(r, count_lines(r.out, " r=-24(%bp):x64 k=-28(%bp):s32 sum=-4(%bp):s32") == 5);
	run_free(&r);
	/* $params alone makes a definition source-level (past the prologue) */
	r = ukprobe("trace", "p:dw/p work $params", "--", target("dsrc-gcc-O0"), NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " p: (work+0x") == 2);
	RUN_EXPECT(r, strstr(r.out, ") r=0x") && strstr(r.out, " k=1\n") && strstr(r.out, " k=2\n"));
	run_free(&r);
}

/* libc's own functions, through libc6-dbg's build-id debug file */
UKT_CASE(libc_parameter_by_name)
{
	struct run r = ukprobe("probe", "-x", "libc.so.6", "-D",
			       "p:dw/m __libc_malloc bytes", "p:dw/f __libc_free mem", NULL);
	RUN_EXPECT(r, r.status == 0);
	RUN_EXPECT(r, count_lines(r.out, "p:dw/m libc.so.6:0x") == 1);
	RUN_EXPECT(r, count_lines(r.out, " bytes=%di:u64") == 1);
	RUN_EXPECT(r, count_lines(r.out, " mem=%di:x64") == 1);
	/* the same address as perf's (perf types size_t x64; the contract u64) */
	if (access("/usr/bin/perf", X_OK) == 0) {
		char *perfv[] = { (char *)"/usr/bin/perf", (char *)"probe", (char *)"-x",
			(char *)"/lib/x86_64-linux-gnu/libc.so.6", (char *)"-D",
			(char *)"__libc_malloc bytes", NULL };
		struct run p = run_argv(perfv);
		const char *po = p.status == 0 ? strstr(p.out, "libc.so.6:0x") : NULL;
		const char *uo = strstr(r.out, "libc.so.6:0x");
		if (po)
			RUN_EXPECT(r, uo && strtoul(po + 10, NULL, 16) == strtoul(uo + 10, NULL, 16));
		run_free(&p);
	}
	run_free(&r);
	/* lines of libc (relative to __libc_malloc), as perf finds them */
	static const char *const lines[] = { "__libc_malloc:9 bytes", "__libc_malloc:15 bytes" };
	for (size_t k = 0; k < 2 && access("/usr/bin/perf", X_OK) == 0; k++) {
		char *perfv[] = { (char *)"/usr/bin/perf", (char *)"probe", (char *)"-x",
			(char *)"/lib/x86_64-linux-gnu/libc.so.6", (char *)"-D",
			(char *)lines[k], NULL };
		char def[64];
		snprintf(def, sizeof def, "p %s", lines[k]);
		struct run p = run_argv(perfv);
		r = ukprobe("probe", "-x", "libc.so.6", "-D", def, NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "p:") == 1);
		const char *po = p.status == 0 ? strstr(p.out, "libc.so.6:0x") : NULL;
		const char *uo = strstr(r.out, "libc.so.6:0x");
		if (po) {
			RUN_EXPECT(r, uo && strtoul(po + 10, NULL, 16) == strtoul(uo + 10, NULL, 16));
			/* the same register or memory, x64 there, u64 here */
			const char *pb = strstr(po, " bytes="), *ub = strstr(uo, " bytes=");
			RUN_EXPECT(r, pb && ub && !strncmp(pb, ub, (size_t)(strchr(pb + 1, ':') - pb)));
		}
		run_free(&p);
		run_free(&r);
	}
	/* the first malloc of the program is stdio's buffer for stdout */
	r = ukprobe("trace", "-x", "libc.so.6", "p:dw/m __libc_malloc bytes", "--",
		    target("dsrc-gcc-O0"), NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " m: (malloc+0x0/0x") >= 1);
	run_free(&r);
}

/* malloc has no DIE of its own in libc's debug information: it is an
 * alias of __libc_malloc's, found through the symbol table, and its
 * events are named as given */
UKT_CASE(libc_function_by_its_alias)
{
	struct run r = ukprobe("probe", "-x", "libc.so.6", "-D", "p malloc bytes",
			       "p __libc_malloc bytes", "p malloc%return $retval", NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "p:") == 3);
	const char *a = strstr(r.out, "p:malloc libc.so.6:0x");
	const char *b = strstr(r.out, "p:__libc_malloc libc.so.6:0x");
	RUN_EXPECT(r, a && b && strtoul(a + 21, NULL, 16) == strtoul(b + 28, NULL, 16));
	RUN_EXPECT(r, count_lines(r.out, " bytes=%di:u64") == 2);
	/* raw ($retval): the kernel's default name, as trace arms it */
	RUN_EXPECT(r, count_lines(r.out, "p:ukprobes/r_malloc_0 libc.so.6:0x") == 1);
	run_free(&r);
	r = ukprobe("probe", "-x", "libc.so.6", "-V", "malloc", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, "\tsize_t\tbytes\n") &&
			      strstr(r.out, "\tconst char[]\t__PRETTY_FUNCTION__\n"));
	run_free(&r);
	/* every call seen by both names, with the same size */
	r = ukprobe("trace", "-x", "libc.so.6", "p:dw/a malloc bytes", "p:dw/b __libc_malloc bytes",
		    "--", target("dsrc-gcc-O0"), NULL);
	RUN_EXPECT(r, r.status == 0);
	int na = count_lines(r.out, " a: (malloc+0x0/0x"), nb = count_lines(r.out, " b: (malloc+0x0/0x");
	RUN_EXPECT(r, na >= 1 && na == nb);
	for (int k = 0; k < na; k++) {
		char *va = event_args(r.out, "a", k), *vb = event_args(r.out, "b", k);
		RUN_EXPECT(r, va && vb && !strcmp(va, vb));
		free(va);
		free(vb);
	}
	run_free(&r);
	r = ukprobe("probe", "-x", "libc.so.6", "-D", "p nosuch_function_here x", NULL);
	RUN_EXPECT(r, r.status != 0 && strstr(r.err, "Function nosuch_function_here is not found"));
	run_free(&r);
}

/* gcc -O2 splits fclose into ranges (a .cold part after them): its DIE
 * has no low_pc, its entry is its first range's start (fclose's symbol);
 * fp->_fileno is read where this compiler's <stdio.h> puts it */
UKT_CASE(libc_function_in_ranges)
{
	struct run r = ukprobe("probe", "-x", "libc.so.6", "-D", "p fclose fp", NULL);
	long off = sym_file_offset("/lib/x86_64-linux-gnu/libc.so.6", "fclose");
	char want[128];
	snprintf(want, sizeof want, "p:fclose libc.so.6:0x%lx fp=%%di:x64\n", off);
	RUN_EXPECT(r, off > 0 && r.status == 0 && !strcmp(r.out, want));
	run_free(&r);
	/* memchr is an IFUNC (assembly): a symbol the DWARF does not describe */
	r = ukprobe("probe", "-x", "libc.so.6", "-D", "p memchr s c n", NULL);
	expect_caret(&r, "Function memchr is not found (a symbol without debug information: "
		     "assembly or an IFUNC; its registers and $argN can be read)", "p memchr s c n", 2);
	run_free(&r);
	/* a ;PATTERN reads the source, which libc6-dbg does not ship */
	r = ukprobe("probe", "-x", "libc.so.6", "-D", "p malloc.c;*tcache*", NULL);
	expect_caret(&r, "No line of malloc.c matches *tcache*: its source ./malloc/malloc.c "
		     "cannot be read", "p malloc.c;*tcache*", 11);
	run_free(&r);
	/* its file as the line table names it (glibc's DW_AT_comp_dir is
	 * relative: nothing to join) */
	r = ukprobe("probe", "-x", "libc.so.6", "-L", "fclose", NULL);
	RUN_EXPECT(r, r.status == 0 && !strncmp(r.out, "<fclose@./libio/iofclose.c:0>\n", 30));
	/* whose text is not installed: said, the numbers shown all the same */
	RUN_EXPECT(r, strstr(r.err, "note: the source ./libio/iofclose.c cannot be read: only the "
			     "numbers of the lines that can be probed are shown") &&
		   strstr(r.out, "\n      0  \n"));
	run_free(&r);
	char raw[128];
	snprintf(raw, sizeof raw, "p:f/r libc.so.6:fclose fd=+%zu(%%di):s32",
		 offsetof(FILE, _fileno));
	r = ukprobe("trace", "p:f/c libc.so.6:fclose fd=fp->_fileno", raw, "--", "sort",
		    "/etc/services", NULL);
	int nc = count_lines(r.out, " c: (fclose+0x0/"), nr = count_lines(r.out, " r: (fclose+0x0/");
	RUN_EXPECT(r, r.status == 0 && nc >= 2 && nc == nr);
	for (int k = 0; k < nc; k++) {
		char *c = event_args(r.out, "c", k), *w = event_args(r.out, "r", k);
		RUN_EXPECT(r, c && w && !strcmp(c, w));
		free(c);
		free(w);
	}
	run_free(&r);
}

/* a variable of an inlined copy in its function's frame (DW_OP_fbreg):
 * libdw's scopes of the copy skip the function it is in, whose frame
 * base it is; tcache_get's tc_idx in _int_malloc's frame */
UKT_CASE(inlined_copy_variable_in_the_frame)
{
	struct run r = ukprobe("probe", "-x", "libc.so.6", "-V", "tcache_get", NULL);
	RUN_EXPECT(r, r.status == 0);
	int n = 0;
	for (const char *p = r.out; (p = strstr(p, "\t@<_int_malloc+")); p++) {
		const char *e = strchr(p + 2, '@');
		const char *v = strstr(p, "\t\tsize_t\ttc_idx\n");
		RUN_EXPECT(r, v && (!e || v < e));
		n++;
	}
	RUN_EXPECT(r, n >= 1);
	run_free(&r);
}

/* -D of a raw definition is what trace arms: the place at its address in
 * the file (a bare FUNC with raw fetches is its first byte, not past the
 * prologue), the kernel's default name; a bad one refused as trace
 * refuses it */
UKT_CASE(raw_definitions_as_armed)
{
	const char *bin = target("dsrc-gcc-O0");
	long work = sym_file_offset(bin, "work");
	UKT_ASSERT(work > 0);
	struct run r = ukprobe("probe", "-x", bin, "-D", "p work x=%di", "r work", "p:g/e work+4",
			       "p 0x1139", NULL);
	char want[3 * PATH_MAX];
	snprintf(want, sizeof want,
		 "p:ukprobes/p_work_0 %s:0x%lx x=%%di\nr:ukprobes/r_work_0 %s:0x%lx\n"
		 "p:g/e %s:0x%lx\np:ukprobes/p_0x1139 0x1139\n", bin, work, bin, work, bin, work + 4);
	RUN_EXPECT(r, r.status == 0 && !strcmp(r.out, want));
	run_free(&r);
	/* trace arms the same: p_work_0 at work+0, %di there */
	r = ukprobe("trace", "p work x=%di", "--", bin, NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " p_work_0: (work+0x0/0x") >= 1);
	run_free(&r);
	r = ukprobe("probe", "-x", bin, "-D", "p work x=%dq", NULL);
	RUN_EXPECT(r, r.status == 2 && r.nout == 0 &&
			      !strcmp(r.err, "ukprobe: error: Invalid fetch argument\n"
					     "  Command: p work x=%dq\n                    ^\n"));
	run_free(&r);
}

/* perf probe -D's place and fetches (names aside) per line of out */
static char *places_and_fetches(const char *out)
{
	size_t cap = strlen(out) + 1, n = 0;
	char *res = malloc(cap), *copy = strdup(out);
	for (char *s = NULL, *l = strtok_r(copy, "\n", &s); l; l = strtok_r(NULL, "\n", &s)) {
		if (strncmp(l, "p:", 2))
			continue;
		char *w[64];
		int nw = words(l, w, 64);
		for (int i = 1; i < nw; i++) {
			char *v = w[i];	/* the place, and every NAME=FETCH */
			size_t vl = strlen(v);	/* x64 is the default TYPE: the same */
			if (vl > 4 && !strcmp(v + vl - 4, ":x64"))
				v[vl - 4] = 0;
			n += (size_t)snprintf(res + n, cap - n, "%s%s", v, i + 1 < nw ? " " : "\n");
		}
	}
	free(copy);
	return res;
}

/* -V: perf's listing, where perf reads the build */
UKT_CASE(variable_listing_agrees_with_perf_probe)
{
	if (access("/usr/bin/perf", X_OK) != 0)
		return;
	static const char *const places[] = { "work:3", "scaled@dsrc.c", "main",
		"dsrc.c:51", "work;*return*", "work+4" };
	int compared = 0;
	for (size_t b = 0; b < sizeof builds / sizeof *builds; b++)
	for (size_t k = 0; k < sizeof places / sizeof *places; k++) {
		char path[PATH_MAX];
		UKT_ASSERT(realpath(target(builds[b]), path));
		char *perfv[] = { (char *)"/usr/bin/perf", (char *)"probe", (char *)"-x", path,
			(char *)"-V", (char *)places[k], NULL };
		struct run p = run_argv(perfv);
		struct run r = ukprobe("probe", "-x", path, "-V", places[k], NULL);
		RUN_EXPECT(r, r.status == 0);
		if (p.status == 0 && p.nerr == 0) {
			if (strcmp(p.out, r.out)) {
				show(&r);
				UKT_FAIL("%s -V %s: perf says\n%s", builds[b], places[k], p.out);
			}
			compared++;
		}
		run_free(&p);
		run_free(&r);
	}
	UKT_ASSERT(compared >= 6);
}

/* -L: perf's listing, which goes on a few lines past the function */
UKT_CASE(line_listing_agrees_with_perf_probe)
{
	if (access("/usr/bin/perf", X_OK) != 0)
		return;
	static const char *const places[] = { "work", "main", "dsrc.c:44-52" };
	char path[PATH_MAX];
	UKT_ASSERT(realpath(target("dsrc-gcc-O0"), path));
	for (size_t k = 0; k < sizeof places / sizeof *places; k++) {
		char *perfv[] = { (char *)"/usr/bin/perf", (char *)"probe", (char *)"-x", path,
			(char *)"-L", (char *)places[k], NULL };
		struct run p = run_argv(perfv);
		struct run r = ukprobe("probe", "-x", path, "-L", places[k], NULL);
		RUN_EXPECT(r, r.status == 0);
		if (p.status == 0)
			RUN_EXPECT(r, r.nout <= p.nout && !strncmp(p.out, r.out, r.nout));
		run_free(&p);
		run_free(&r);
	}
}

/* the lines -L numbers in FUNC of OBJ, each probed by -D: 0 if every one
 * is taken, else the status of the -D that refused one */
static int probe_every_listed_line(const char *obj, const char *func, int *nlines)
{
	char place[512];
	/* a name with a blank (operator bool, minof<long unsigned int>) quoted */
	snprintf(place, sizeof place, strchr(func, ' ') ? "\"%s\"" : "%s", func);
	struct run l = ukprobe("probe", "-x", obj, "-L", place, NULL);
	if (l.status != 0) {
		show(&l);
		run_free(&l);
		return -1;
	}
	enum { MAXL = 400 };
	char *argv[MAXL + 8];
	char *defs[MAXL];
	int n = 0, a = 0;
	argv[a++] = (char *)ukprobe_path();
	argv[a++] = (char *)"probe";
	argv[a++] = (char *)"-x";
	argv[a++] = (char *)obj;
	argv[a++] = (char *)"-D";
	for (char *line = strchr(l.out, '\n'); line && n < MAXL; line = strchr(line, '\n')) {
		line++;
		char *end;
		long ln = strtol(line, &end, 10);
		if (end == line || strncmp(end, "  ", 2) || end - line != 7 || ln < 0)
			continue;	/* not numbered, or the blanks of a line of text */
		if (asprintf(&defs[n], "p %s:%ld", place, ln) < 0)
			abort();
		argv[a++] = defs[n++];
	}
	argv[a] = NULL;
	run_free(&l);
	*nlines = n;
	int status = 0;
	if (n) {
		struct run d = run_argv(argv);
		status = d.status;
		if (status != 0)
			show(&d);
		else if (count_lines(d.out, "p:") < n)
			status = -2;
		run_free(&d);
	}
	for (int i = 0; i < n; i++)
		free(defs[i]);
	return status;
}

/* every line -L numbers can be probed: line 0 too, the entry row, which
 * gcc -O2 gives the first statement's line, not the declaration's (main:0
 * was 'No code at line 0' of most optimized programs) */
UKT_CASE(every_line_listed_can_be_probed)
{
	static const char *const objs[] = { "dsrc-gcc-O2", "dsrc-clang-O2", "dent-gcc-O2",
		"dent-clang-O2", "dcxx-gcc-O2", "dcxx-clang-O2", "dinh-gcc-O2", "dsrc-gcc-O0",
		"blocked", "dtpl-gcc-O0", "dtpl-clang-O0" };
	int total = 0;
	for (size_t k = 0; k < sizeof objs / sizeof *objs; k++) {
		struct run f = ukprobe("probe", "-x", target(objs[k]), "-F", NULL);
		RUN_EXPECT(f, f.status == 0 && f.nout > 0);
		for (char *fn = f.out, *nl; fn && *fn; fn = nl) {
			nl = strchr(fn, '\n');
			if (nl)
				*nl++ = 0;
			int n = 0;
			int st = probe_every_listed_line(target(objs[k]), fn, &n);
			if (st != 0)
				UKT_FAIL("%s: a line -L numbers in %s is refused (%d)", objs[k], fn, st);
			total += n;
		}
		run_free(&f);
	}
	static const char *const libc_fns[] = { "fclose", "qsort", "getenv", "strtol",
		"__libc_malloc", "_int_free", "fopen", "setlocale" };
	for (size_t k = 0; k < sizeof libc_fns / sizeof *libc_fns; k++) {
		int n = 0;
		if (probe_every_listed_line("libc.so.6", libc_fns[k], &n) != 0)
			UKT_FAIL("libc: a line -L numbers in %s is refused", libc_fns[k]);
		total += n;
	}
	/* main:0 of a gcc -O2 program whose declaration line has no row:
	 * the entry */
	struct run d = ukprobe("probe", "-x", target("blocked"), "-D", "p main:0", "p main", NULL);
	RUN_EXPECT(d, d.status == 0 && count_lines(d.out, "p:") == 2);
	char *nl = strchr(d.out, '\n');
	RUN_EXPECT(d, nl);
	*nl = 0;
	char *zero = strrchr(d.out, ':'), *entry = strrchr(nl + 1, ':');
	RUN_EXPECT(d, zero && entry && !strcmp(zero, strtok(entry, "\n")));
	run_free(&d);
	UKT_ASSERT(total > 200);
}

/* no argument name twice on any line of s (the kernel refuses it) */
static int names_unique(const char *s)
{
	char *copy = strdup(s), *save = NULL;
	int ok = 1;
	for (char *line = strtok_r(copy, "\n", &save); line && ok; line = strtok_r(NULL, "\n", &save)) {
		char *names[256];
		int n = 0;
		char *w2 = NULL;
		for (char *w = strtok_r(line, " ", &w2); w && n < 256; w = strtok_r(NULL, " ", &w2)) {
			char *eq = strchr(w, '=');
			if (!eq)
				continue;
			*eq = 0;
			for (int i = 0; i < n; i++)
				if (!strcmp(names[i], w))
					ok = 0;
			names[n++] = w;
		}
	}
	free(copy);
	return ok;
}

/*
 * A Debian program nobody here built: readelf (binutils, LTO: .lto_priv,
 * .part and .cold copies), its DWARF and symbols from
 * binutils-x86-64-linux-gnu-dbg by build-id.  -V where libdw finds no
 * scope (section_name_print.part.0) crashed; $vars of an inlined copy
 * named its caller's variables too, one twice ('This argument name is
 * already used'); a static of the stripped program (prev_reloc.64, in the
 * debug file's symbol table only) was 'Unknown symbol' when armed.
 */
UKT_CASE(debian_program_built_with_lto)
{
	const char *re = "/usr/bin/x86_64-linux-gnu-readelf";
	UKT_ASSERT(access(re, X_OK) == 0);
	struct run r = ukprobe("probe", "-x", re, "-V", "section_name_print", NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "\t@<") >= 4 &&
		   count_lines(r.out, "Filedata*\tfiledata") >= 3);
	run_free(&r);
	r = ukprobe("probe", "-x", re, "-D", "p section_name_print $vars", NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " filedata=") >= 3 && names_unique(r.out));
	run_free(&r);

	/* a parameter, a member through it, and the static, against each other
	 * and against the object readelf reads */
	char obj[PATH_MAX + 16];
	snprintf(obj, sizeof obj, "%s/ukt_main.o", build_dir());
	UKT_ASSERT(access(obj, R_OK) == 0);
	char *sec[] = { (char *)re, (char *)"-SW", obj, NULL };
	struct run h = run_argv(sec);
	RUN_EXPECT(h, h.status == 0);
	const char *di = strstr(h.out, "] .debug_info ");
	unsigned long info_size = 0;
	RUN_EXPECT(h, di && sscanf(di, "] .debug_info %*s %*s %*s %lx", &info_size) == 1);
	run_free(&h);
	r = ukprobe("trace", "-x", re, "p:re/ar apply_relocations size section->sh_size prev_reloc",
		    "--", re, "-wi", obj, NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.err, "ukprobe: 0 events lost"));
	int events = 0, info_seen = 0;
	for (const char *e = strstr(r.out, " ar: "); e; e = strstr(e + 1, " ar: ")) {
		unsigned long size, sh_size, prev;
		const char *v = strstr(e, " size=");
		RUN_EXPECT(r, v && sscanf(v, " size=%lu sh_size=%lu prev_reloc=%lu", &size, &sh_size,
					  &prev) == 3);
		RUN_EXPECT(r, size == sh_size);
		info_seen += size == info_size;
		events++;
	}
	RUN_EXPECT(r, events >= 2 && info_seen == 1);
	run_free(&r);

	/* every eighth function's variables at its entry, and its return
	 * value: readelf's output unchanged */
	struct run f = ukprobe("probe", "-x", re, "-F", NULL);
	RUN_EXPECT(f, f.status == 0);
	char *argv[256];
	char *defs[240];
	int a = 0, nd = 0, k = 0;
	argv[a++] = (char *)ukprobe_path();
	argv[a++] = (char *)"trace";
	argv[a++] = (char *)"-x";
	argv[a++] = (char *)re;
	argv[a++] = (char *)"-o";
	argv[a++] = (char *)"/dev/null";
	for (char *fn = f.out, *nl; fn && *fn && nd < 200; fn = nl, k++) {
		nl = strchr(fn, '\n');
		if (nl)
			*nl++ = 0;
		if (k % 8)
			continue;
		if (asprintf(&defs[nd++], "p %s $vars", fn) < 0 ||
		    asprintf(&defs[nd++], "r %s $retval", fn) < 0)
			abort();
		argv[a++] = defs[nd - 2];
		argv[a++] = defs[nd - 1];
	}
	run_free(&f);
	char cu[PATH_MAX];
	UKT_ASSERT(realpath(target("dsrc-gcc-O2"), cu));
	argv[a++] = (char *)"--";
	argv[a++] = (char *)re;
	argv[a++] = (char *)"-a";
	argv[a++] = (char *)"-wi";
	argv[a++] = cu;
	argv[a] = NULL;
	char *plain[] = { (char *)re, (char *)"-a", (char *)"-wi", cu, NULL };
	struct run p = run_argv(plain);
	r = run_argv(argv);
	RUN_EXPECT(r, nd >= 60 && p.status == 0 && r.status == 0 &&
		   strstr(r.err, "ukprobe: 0 events lost"));
	RUN_EXPECT(r, p.nout == r.nout && !memcmp(p.out, r.out, p.nout));
	run_free(&p);
	run_free(&r);
	for (int i = 0; i < nd; i++)
		free(defs[i]);
}

/*
 * A library named without a path that only the program's RUNPATH finds
 * (pyenv's libpython3.11.so.1.0 is one): launched, where the program's
 * dynamic linker lists it; attached, the file the process has mapped.  It
 * was 'no debug information' (not found where Debian puts libraries).
 */
UKT_CASE(library_found_as_the_program_finds_it)
{
	const char *def = "p:dl/s libdlib.so.1:dlib_scale id=it->id name=it->name:string k";
	struct run r = ukprobe("trace", def, "--", target("runpath/duse"), NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " s: (dlib_scale+0x0/") == 3);
	same_values(&r, "s", "duse ", 3, 3);
	run_free(&r);
	/* -x by its name */
	r = ukprobe("trace", "-x", "libdlib.so.1", "p:dl/s dlib_scale it->id", "--",
		    target("runpath/duse"), NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " s: (dlib_scale+0x0/") == 3 &&
		   strstr(r.out, " id=12\n"));
	run_free(&r);
	/* attached */
	struct proc p = proc_start("runpath/duse", "wait");
	char pid[16];
	snprintf(pid, sizeof pid, "%d", (int)p.pid);
	r = ukprobe("trace", "-p", pid, "-d", "0.5", def, NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.err, "ukprobe: 0 events lost"));
	int n = 0;
	for (const char *e = strstr(r.out, " s: (dlib_scale+0x0/"); e;
	     e = strstr(e + 1, " s: (dlib_scale+0x0/"), n++) {
		int id;
		long k;
		char name[16];
		RUN_EXPECT(r, sscanf(strchr(e, ')'), ") id=%d name=\"%15[a-z]\" k=%ld", &id, name,
				     &k) == 3);
		RUN_EXPECT(r, k == 2 * id + 1 && (!strcmp(name, "ant") || !strcmp(name, "bee") ||
						  !strcmp(name, "cicada")));
	}
	RUN_EXPECT(r, n >= 2);
	run_free(&r);
	UKT_ASSERT(write(p.in, "q", 1) == 1);
	close(p.in);
	char line[256], last[256] = "";
	while (fgets(line, sizeof line, p.out))
		snprintf(last, sizeof last, "%s", line);
	fclose(p.out);
	UKT_ASSERT(wait_status(p.pid) == 0 && !strncmp(last, "ok ", 3));
	/* nowhere: said so */
	r = ukprobe("probe", "-x", "libdlib.so.1", "-F", NULL);
	RUN_EXPECT(r, r.status != 0 && strstr(r.err, "libdlib.so.1: No such file or directory "
						  "(a library's name is looked for where the program's "
						  "dynamic linker finds it"));
	run_free(&r);
}

/* the raw grammar's +OFF(...) around a variable that holds a pointer:
 * what a type the debug information lacks puts there (CPython's str
 * characters, +48(frame->f_code->co_name):string) */
UKT_CASE(raw_dereference_of_a_variable)
{
	for (size_t b = 0; b < sizeof builds / sizeof *builds; b++) {
		struct run r = ukprobe("trace", "p:dw/d work:3 deep=+0(r->pin):s64 id=+0(r):s32", "--",
				       target(builds[b]), NULL);
		RUN_EXPECT(r, r.status == 0);
		same_values(&r, "d", "work ", 2, 2);
		run_free(&r);
	}
	struct run r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-D",
			       "p work:3 +8(+0(r->pin)) -8(r):u8 x=+16(r):string", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, " arg1=+8(+0(+") &&
		   strstr(r.out, " arg2=-8(") && strstr(r.out, "):u8 x=+16(") &&
		   strstr(r.out, "):string\n"));
	run_free(&r);
	r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-D", "p work:3 +8(k)", NULL);
	expect_caret(&r, "k is not a pointer: +OFF(...) reads at a pointer's value", "p work:3 +8(k)", 12);
	run_free(&r);
	r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-D", "p work:3 +8(r->nosuch)", NULL);
	expect_caret(&r, "rec has no member nosuch", "p work:3 +8(r->nosuch)", 15);
	run_free(&r);
}

/* a default event name longer than the events core takes (a template's
 * arguments are in its name): cut, with a hash of the whole, and
 * __return kept */
UKT_CASE(long_template_names_make_event_names)
{
	static const char *const b2[] = { "dtpl-gcc-O0", "dtpl-clang-O0" };
	for (size_t b = 0; b < 2; b++) {
		struct run f = ukprobe("probe", "-x", target(b2[b]), "-F", "pair_size*", NULL);
		RUN_EXPECT(f, f.status == 0 && f.nout > 0);
		*strchr(f.out, '\n') = 0;
		char def[1024], ret[1024];
		snprintf(def, sizeof def, "p '%s' t", f.out);
		snprintf(ret, sizeof ret, "r '%s' $retval", f.out);
		run_free(&f);
		struct run r = ukprobe("probe", "-x", target(b2[b]), "-D", def, ret, NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "") == 2);
		char *sp = strchr(r.out, ' ');
		RUN_EXPECT(r, sp && sp - r.out - 2 < 64 && !strncmp(r.out, "p:pair_size_", 12));
		char *second = strchr(r.out, '\n') + 1, *sp2 = strchr(second, ' ');
		RUN_EXPECT(r, sp2 && sp2 - second - 2 < 64 && !strncmp(sp2 - 8, "__return", 8) &&
			   !strncmp(second + 2, r.out + 2, (size_t)(sp - r.out - 2)));
		run_free(&r);
		r = ukprobe("trace", def, ret, "--", target(b2[b]), NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, ": (") == 2);
		run_free(&r);
	}
}

/* a conversion operator to a namespace's type: the "::" inside its
 * type is its name's ('Function ... is not found' though -F listed it) */
UKT_CASE(conversion_operator_to_a_qualified_type)
{
	/* clang++ names the type as written in its scope */
	static const char *const b2[] = { "dtpl-gcc-O0", "dtpl-clang-O0" };
	static const char *const op[] = { "Length::operator units::Meters",
		"Length::operator Meters" };
	for (size_t b = 0; b < 2; b++) {
		struct run f = ukprobe("probe", "-x", target(b2[b]), "-F", "*operator*", NULL);
		char want[128], def[160];
		snprintf(want, sizeof want, "%s\n", op[b]);
		RUN_EXPECT(f, f.status == 0 && !strcmp(f.out, want));
		run_free(&f);
		snprintf(def, sizeof def, "p:c/m '%s' this->mm", op[b]);
		struct run r = ukprobe("trace", def, "--", target(b2[b]), NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " m: (") == 1);
		same_values(&r, "m", "dtpl ", 1, 1);
		run_free(&r);
		snprintf(def, sizeof def, "\"%s\"", op[b] + 8);
		r = ukprobe("probe", "-x", target(b2[b]), "-L", def, NULL);
		RUN_EXPECT(r, r.status == 0 && strstr(r.out, "operator units::Meters() const"));
		run_free(&r);
	}
}

/* a template two CUs instantiate: the linker keeps one copy, both CUs'
 * DWARF describe it at that address; one probe, one event a call (each
 * call was recorded once a CU: libstdc++'s string methods six times) */
UKT_CASE(template_in_two_units_is_one_probe)
{
	static const char *const b2[] = { "dtpl-gcc-O0", "dtpl-clang-O0" };
	for (size_t b = 0; b < 2; b++) {
		struct run r = ukprobe("probe", "-x", target(b2[b]), "-D", "p twice_of<int> v",
				       "p twice_of<int>%return $retval", NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "p:twice_of_int ") == 1 &&
			   count_lines(r.out, "p:twice_of_int__return ") == 1 &&
			   count_lines(r.out, "") == 2);
		run_free(&r);
		r = ukprobe("probe", "-x", target(b2[b]), "-V", "twice_of<int>", NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "\t@<") == 1);
		run_free(&r);
		r = ukprobe("trace", "p:t/tw twice_of<int> v", "--", target(b2[b]), NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " tw: (") == 3);
		RUN_EXPECT(r, strstr(r.out, ") v=1\n") && strstr(r.out, ") v=3\n") &&
			   strstr(r.out, ") v=4\n"));
		run_free(&r);
	}
}

/* (globals aside: perf writes @SYM+0, ukprobe @OBJ:SYM, exact in a library) */
UKT_CASE(definitions_agree_with_perf_probe)
{
	if (access("/usr/bin/perf", X_OK) != 0)
		return;
	static const char *const defs[] = { "work:3 k sum r->id r->small r->pin->deep",
		"work;*printf*", "work;*return*", "dsrc.c;*\"main*", "dsrc.c:51 res",
		"scaled@dsrc.c", "scaled@dsrc.c v f", "main argc", "work+4", "work $params" };
	char *perfv[] = { (char *)"/usr/bin/perf", (char *)"probe", (char *)"-x", NULL,
		(char *)"-D", NULL, NULL };
	for (size_t b = 0; b < sizeof builds / sizeof *builds; b++)
	for (size_t d = 0; d < sizeof defs / sizeof *defs; d++) {
		char def[256];
		snprintf(def, sizeof def, "p %s", defs[d]);
		perfv[5] = (char *)defs[d];
		char path[PATH_MAX];
		UKT_ASSERT(realpath(target(builds[b]), path));
		perfv[3] = path;
		struct run p = run_argv(perfv);
		if (p.status != 0 || !strstr(p.out, "p:")) {	/* perf cannot here */
			run_free(&p);
			continue;
		}
		struct run r = ukprobe("probe", "-x", path, "-D", def, NULL);
		RUN_EXPECT(r, r.status == 0);
		char *a = places_and_fetches(p.out), *u = places_and_fetches(r.out);
		if (strcmp(a, u)) {
			show(&r);
			UKT_FAIL("%s %s: perf says\n%sukprobe says\n%s", builds[b], def, a, u);
		}
		free(a);
		free(u);
		run_free(&p);
		run_free(&r);
	}
}

static void expect_caret(const struct run *r, const char *msg, const char *cmd, int offset)
{
	char want[2048];
	snprintf(want, sizeof want, "ukprobe: error: %s\n  Command: %s\n%*s^\n", msg, cmd,
		 11 + offset, "");
	RUN_EXPECT(*r, r->status == 2 && r->nout == 0);
	if (strcmp(r->err, want)) {
		show(r);
		UKT_FAIL("expected stderr:\n%s", want);
	}
}

UKT_CASE(bad_source_level_definitions)
{
	static const struct {
		const char *def, *msg;
		int offset;
	} bad[] = {
		{ "p work:3 nosuch", "Variable nosuch is not visible at work:3", 9 },
		{ "p work:3 k->x", "k is not a pointer", 12 },
		{ "p work:3 r.id", "r is not a struct or union", 11 },
		{ "p work:3 r->nosuch", "rec has no member nosuch", 12 },
		{ "p dsrc.c:2 k", "No code at line 2 of dsrc.c", 9 },
		{ "p work:99 k", "No code at line 99 of work", 7 },
		{ "p nofunc k", "Function nofunc is not found", 2 },
		{ "p nofile.c:3 k", "Source file is not found", 2 },
		{ "p work:3 r->vals[x]", "Invalid array index", 16 },
		{ "p work;nomatch k", "No line of work matches nomatch", 7 },
		{ "p dsrc.c;nomatch", "No line of dsrc.c matches nomatch", 9 },
	};
	for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
		struct run r = ukprobe("trace", bad[k].def, "--", target("dsrc-gcc-O0"), NULL);
		expect_caret(&r, bad[k].msg, bad[k].def, bad[k].offset);
		run_free(&r);
		r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-D", bad[k].def, NULL);
		expect_caret(&r, bad[k].msg, bad[k].def, bad[k].offset);
		run_free(&r);
	}
}

UKT_CASE(optimized_out_names_the_variable_and_place)
{
	/* at -O2 gcc keeps res in no place at line 45 of dsrc.c */
	struct run r = ukprobe("probe", "-x", target("dsrc-gcc-O2"), "-D", "p dsrc.c:51 res", NULL);
	RUN_EXPECT(r, r.status == 2 && strstr(r.err, "Variable res ") &&
		   strstr(r.err, " at dsrc.c:51\n"));
	run_free(&r);
}

UKT_CASE(inlined_copies_of_a_function)
{
	/* out of line at -O0, inlined into work at -O2: a probe either way */
	static const char *const where[] = { " i: (scaled+0x", " i: (work+0x",
		" i: (scaled+0x", " i: (work+0x" };
	for (size_t b = 0; b < sizeof builds / sizeof *builds; b++) {
		struct run r = ukprobe("trace", "p:dw/i scaled@dsrc.c", "--", target(builds[b]), NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, where[b]) == 2);
		run_free(&r);
	}
}

/* A function only DWARF knows (inlined everywhere at -O2, no symbol) as
 * the raw grammar's bare SYM place: every copy, at its first byte, under
 * the raw default name; %return of it is refused (no copy is called) */
UKT_CASE(inlined_function_as_a_raw_place)
{
	static const char *const o2[] = { "dsrc-gcc-O2", "dsrc-clang-O2" };
	for (size_t b = 0; b < 2; b++) {
		struct run r = ukprobe("trace", "p scaled", "p:dw/s scaled x=%di", "--",
				       target(o2[b]), NULL);
		RUN_EXPECT(r, r.status == 0);
		RUN_EXPECT(r, count_lines(r.out, " p_scaled_0: (work+0x") == 2);
		RUN_EXPECT(r, count_lines(r.out, " s: (work+0x") == 2);
		run_free(&r);
		r = ukprobe("probe", "-x", target(o2[b]), "-D", "p scaled", NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "p:ukprobes/p_scaled_0 ") == 1);
		run_free(&r);
		r = ukprobe("trace", "p scaled%return", "--", target(o2[b]), NULL);
		expect_caret(&r, "Function scaled is only inlined: %return needs a copy that is called",
			     "p scaled%return", 2);
		run_free(&r);
	}
	/* glibc's _FORTIFY_SOURCE inlines its own external printf into the
	 * program: bare printf stays libc's (the program calls __printf_chk,
	 * so none is seen); the program's copies only when it is named */
	const char *f = target("dsrc-fortify");
	struct run r = ukprobe("probe", "-x", f, "-D", "p printf", NULL);
	RUN_EXPECT(r, r.status == 0 && !strcmp(r.out, "p:ukprobes/p_printf_0 printf\n"));
	run_free(&r);
	r = ukprobe("trace", "p printf", "--", f, NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " p_printf_0: (") == 0);
	run_free(&r);
	char def[4200];
	snprintf(def, sizeof def, "p:dw/pf %s:printf", f);
	r = ukprobe("trace", def, "--", f, NULL);
	/* three printf calls: work's two and main's */
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " pf: (") + count_lines(r.out, " pf_1: (") == 3);
	run_free(&r);
}

/* OBJ:PLACE reads OBJ's debug information (no -x): a library's function
 * by a parameter's name beside the program's, in one trace */
UKT_CASE(places_in_another_object_by_name)
{
	const char *prog = target("dsrc-gcc-O2");
	struct run r = ukprobe("trace", "p:dw/m libc.so.6:__libc_malloc bytes",
			       "p:dw/raw libc.so.6:malloc size=%di:u64", "p:dw/w work k", "--",
			       prog, NULL);
	RUN_EXPECT(r, r.status == 0);
	int nm = count_lines(r.out, " m: (malloc+0x0/0x"), nr = count_lines(r.out, " raw: (");
	RUN_EXPECT(r, nm >= 1 && nm == nr);
	for (int k = 0; k < nm; k++) {
		char *vm = event_args(r.out, "m", k), *vr = event_args(r.out, "raw", k);
		RUN_EXPECT(r, vm && vr && !strncmp(vm, "bytes=", 6) && !strncmp(vr, "size=", 5) &&
				      !strcmp(vm + 6, vr + 5));
		free(vm);
		free(vr);
	}
	RUN_EXPECT(r, count_lines(r.out, " w: (work+0x") == 2 && strstr(r.out, ") k=1\n") &&
			      strstr(r.out, ") k=2\n"));
	run_free(&r);
	/* -D: as with -x libc.so.6 */
	r = ukprobe("probe", "-x", prog, "-D", "p libc.so.6:__libc_malloc bytes", NULL);
	struct run l = ukprobe("probe", "-x", "libc.so.6", "-D", "p __libc_malloc bytes", NULL);
	RUN_EXPECT(r, r.status == 0 && l.status == 0 && r.out[0] && !strcmp(r.out, l.out));
	run_free(&l);
	run_free(&r);
	/* errors point at the function, after OBJ: */
	r = ukprobe("trace", "p libc.so.6:nosuch_function_here x", "--", prog, NULL);
	expect_caret(&r, "Function nosuch_function_here is not found",
		     "p libc.so.6:nosuch_function_here x", 12);
	run_free(&r);
	/* an object that cannot be read is the definition's error */
	r = ukprobe("trace", "p:a/b nosuchlib.so:func x", "--", prog, NULL);
	expect_caret(&r, "nosuchlib.so: No such file or directory (a library's name is looked for where "
		     "the program's dynamic linker finds it, and in the system's directories: give its "
		     "path)", "p:a/b nosuchlib.so:func x", 6);
	run_free(&r);
	r = ukprobe("probe", "-x", prog, "-D", "p libz.so.1:deflate strm", NULL);
	expect_caret(&r, "libz.so.1: no debug information", "p libz.so.1:deflate strm", 2);
	run_free(&r);
	/* -L of a function inlined everywhere: its source, named in full */
	r = ukprobe("probe", "-x", prog, "-L", "scaled", NULL);
	RUN_EXPECT(r, r.status == 0 && !strncmp(r.out, "<scaled@/", 9) &&
			      strstr(r.out, "      0  static inline int scaled(int v, int f)"));
	run_free(&r);
}

/* the value of NAME= in an event's arguments (up to the next blank), or NULL */
static char *arg_value(const char *args, const char *name)
{
	size_t l = strlen(name);
	for (const char *p = args; p && *p; p = strchr(p, ' '), p = p ? p + 1 : NULL)
		if (!strncmp(p, name, l) && p[l] == '=')
			return strndup(p + l + 1, strcspn(p + l + 1, " "));
	return NULL;
}

/* A struct fetched whole is each of its members (NAME_MEMBER, nested,
 * arrays as TYPE[N], char arrays as strings), each equal to the member
 * fetched by itself; an array whole is TYPE[N]; what cannot be fetched
 * is left out with a note */
UKT_CASE(structs_and_arrays_whole)
{
	static const char *const m[][2] = {
		{ "r_id", "r->id" }, { "r_small", "r->small" }, { "r_flag", "r->flag" },
		{ "r_level", "r->level" }, { "r_col", "r->col" }, { "r_in_deep", "r->in.deep" },
		{ "r_pin", "r->pin" }, { "r_name", "r->name:string" },
	};
	for (size_t b = 0; b < sizeof builds / sizeof *builds; b++) {
		char one[2048] = "p:dw/e work:3";
		for (size_t k = 0; k < sizeof m / sizeof *m; k++) {
			size_t l = strlen(one);
			snprintf(one + l, sizeof one - l, " %s=%s", m[k][0], m[k][1]);
		}
		struct run r = ukprobe("trace", "p:dw/w work:3 r[0]", one, "p:dw/v work:3 r->vals",
				       "p:dw/m dsrc.c:51 r", "--", target(builds[b]), NULL);
		RUN_EXPECT(r, r.status == 0);
		for (int c = 0; c < 2; c++) {
			char *w = event_args(r.out, "w", c), *e = event_args(r.out, "e", c);
			char *v = event_args(r.out, "v", c);
			RUN_EXPECT(r, w && e && v && !strcmp(v, "vals={10,20,30,40}"));
			for (size_t k = 0; k < sizeof m / sizeof *m; k++) {
				char *x = arg_value(w, m[k][0]), *y = arg_value(e, m[k][0]);
				RUN_EXPECT(r, x && y && !strcmp(x, y));
				free(x);
				free(y);
			}
			char *vals = arg_value(w, "r_vals"), *name = arg_value(w, "r_name");
			RUN_EXPECT(r, vals && !strcmp(vals, "{10,20,30,40}") && name &&
					      !strcmp(name, "\"alpha\""));
			free(vals);
			free(name);
			free(w);
			free(e);
			free(v);
		}
		/* main's own r, in its frame: the id and deep main prints */
		char *mm = event_args(r.out, "m", 0), *pr = printed(r.out, "main ", 0);
		RUN_EXPECT(r, mm && pr);
		char *id = arg_value(mm, "r_id"), *deep = arg_value(mm, "r_in_deep");
		char *pid = arg_value(pr, "id"), *pdeep = arg_value(pr, "deep");
		RUN_EXPECT(r, id && deep && pid && pdeep && !strcmp(id, pid) && !strcmp(deep, pdeep));
		free(id);
		free(deep);
		free(pid);
		free(pdeep);
		free(mm);
		free(pr);
		run_free(&r);
	}
	/* a struct in two registers (pieces) at -O2: what pair_sum prints */
	for (size_t b = 0; b < 4; b++) {
		static const char *const dent[] = { "dent-gcc-O0", "dent-gcc-O2", "dent-clang-O0",
			"dent-clang-O2" };
		struct run r = ukprobe("trace", "p:dw/p pair_sum p", "--", target(dent[b]), NULL);
		char *p = event_args(r.out, "p", 0), *pr = printed(r.out, "pair_sum ", 0);
		RUN_EXPECT(r, r.status == 0 && p && pr);
		char *lo = arg_value(p, "p_lo"), *hi = arg_value(p, "p_hi");
		char *plo = arg_value(pr, "lo"), *phi = arg_value(pr, "hi");
		RUN_EXPECT(r, lo && hi && plo && phi && !strcmp(lo, plo) && !strcmp(hi, phi));
		free(lo);
		free(hi);
		free(plo);
		free(phi);
		free(p);
		free(pr);
		run_free(&r);
	}
	/* gcc -O2 passes mixed's signed b in %di's upper half: left out, said */
	struct run r = ukprobe("probe", "-x", target("dent-gcc-O2"), "-D", "p mixed_sum m", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, " m_a=%di:s32 m_c=%si:s64\n") &&
			      strstr(r.err, "note: m.b left out: "));
	run_free(&r);
	/* libc's malloc_state: 254 bins are more than an array fetch holds */
	r = ukprobe("probe", "-x", "libc.so.6", "-D", "p _int_malloc av->bins", NULL);
	expect_caret(&r, "av->bins has 254 elements, an array fetch at most 64: give an index",
		     "p _int_malloc av->bins", 14);
	run_free(&r);
	r = ukprobe("probe", "-x", "libc.so.6", "-D", "p _int_malloc av[0]", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, " av_fastbinsY=+16(%di):x64[10] ") &&
			      strstr(r.err, "note: av[0].bins left out: "));
	run_free(&r);
}

/* targets/dinh.cc (C++ bases, references), by g++ and clang++ */
static const char *const dinh_builds[] = {
	"dinh-gcc-O0", "dinh-gcc-O2", "dinh-clang-O0", "dinh-clang-O2",
};

/* the first event EV's argument ARG is what the program's first line
 * beginning with PREFIX says NAME is */
static void same_member(const struct run *r, const char *ev, const char *arg, const char *prefix,
			const char *name)
{
	char *w = event_args(r->out, ev, 0), *pr = printed(r->out, prefix, 0);
	char *x = w ? arg_value(w, arg) : NULL, *y = pr ? arg_value(pr, name) : NULL;
	if (!x || !y || strcmp(x, y)) {
		show(r);
		UKT_FAIL("%s: %s=%s recorded, %s=%s printed", ev, arg, x ? x : "?", name,
			 y ? y : "?");
	}
	free(x);
	free(y);
	free(w);
	free(pr);
}

/* C++: this->m of a member of a base class (and of its base), and the
 * object whole with its bases' members; globals and a static member by
 * qualified names; a method written on one line is probed past its
 * prologue (its body's column), where k is stored */
UKT_CASE(cxx_base_class_members)
{
	for (size_t k = 0; k < sizeof dinh_builds / sizeof *dinh_builds; k++) {
		struct run r = ukprobe("trace", "p:c/g Der::get this->b1 this->b2 this->m this->d k "
				       "g=ns::gval sm=Base::sm fs=::file_static",
				       "p:c/w Der::get this[0]", "--", target(dinh_builds[k]), NULL);
		RUN_EXPECT(r, r.status == 0);
		same_values(&r, "g", "get ", 1, 8);
		static const char *const m[] = { "b1", "b2", "m", "d" };
		for (size_t i = 0; i < 4; i++) {
			char n[16];
			snprintf(n, sizeof n, "this_%s", m[i]);
			same_member(&r, "w", n, "get ", m[i]);
		}
		run_free(&r);
	}
}

/* a C++ reference is what it refers to, as gdb shows it: a long& its
 * value, a const Der& the object whole (its bases' members), an int&& its
 * int; '.' reads through it */
UKT_CASE(cxx_references_are_their_referents)
{
	for (size_t k = 0; k < sizeof dinh_builds / sizeof *dinh_builds; k++) {
		struct run r = ukprobe("trace", "p:c/b bump n d=o.d b1=o.b1 r", "p:c/o bump o",
				       "p:c/a bump b1=+8(o):s32", "--", target(dinh_builds[k]), NULL);
		RUN_EXPECT(r, r.status == 0);
		same_values(&r, "b", "bump ", 1, 4);
		same_values(&r, "a", "bump ", 1, 1);	/* +OFF(o): at its address */
		same_member(&r, "o", "o_d", "bump ", "d");
		same_member(&r, "o", "o_b1", "bump ", "b1");
		char *w = event_args(r.out, "o", 0);
		RUN_EXPECT(r, w && strstr(w, "o_b2=-6") && strstr(w, "o_m=7"));
		free(w);
		run_free(&r);
	}
}

/* a raw place naming a C++ function of the program by its plain name:
 * its symbol is mangled (_Z4bumpRlRK3DerOi), so no table has "bump"
 * ('Unknown symbol'); the DWARF's concrete copy is the place */
UKT_CASE(raw_place_of_a_cxx_function)
{
	for (size_t k = 0; k < sizeof dinh_builds / sizeof *dinh_builds; k++) {
		struct run r = ukprobe("trace", "r:c/br bump v=$retval:s64", "p:c/b4 bump+4",
				       "--", target(dinh_builds[k]), NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " b4: (_Z4bumpRlRK3DerOi+0x4/") == 1);
		char *pr = printed(r.out, "bump ", 0), *n = pr ? arg_value(pr, "n") : NULL,
		     *rv = pr ? arg_value(pr, "r") : NULL, *got = event_args(r.out, "br", 0);
		RUN_EXPECT(r, n && rv && got);
		char want[64];
		snprintf(want, sizeof want, "v=%ld", atol(n) + atol(rv));
		RUN_EXPECT(r, !strcmp(got, want));
		free(pr);
		free(n);
		free(rv);
		free(got);
		run_free(&r);
	}
}

/* attach: the object is the process's /proc/PID/exe */
UKT_CASE(attach_with_a_variable)
{
	int pi[2], po[2];
	UKT_ASSERT(pipe(pi) == 0 && pipe(po) == 0);
	pid_t pid = fork();
	UKT_ASSERT(pid >= 0);
	if (pid == 0) {
		dup2(pi[0], 0);
		dup2(po[1], 1);
		close(pi[1]);
		close(po[0]);
		execl(target("sleeper"), "sleeper", (char *)NULL);
		_exit(126);
	}
	close(pi[0]);
	close(po[1]);
	FILE *out = fdopen(po[0], "r");
	char line[256], ps[32];
	UKT_ASSERT(fgets(line, sizeof line, out) && !strncmp(line, "ready ", 6));
	snprintf(ps, sizeof ps, "%d", (int)pid);
	struct run r = ukprobe("trace", "-p", ps, "-d", "0.3", "p:dw/w work n", NULL);
	UKT_ASSERT(write(pi[1], "q", 1) == 1);
	close(pi[1]);
	while (fgets(line, sizeof line, out))
		;
	fclose(out);
	UKT_EQ(wait_status(pid), 0);
	RUN_EXPECT(r, r.status == 0);
	/* work(++n): each event's n one more than the last */
	int events = 0;
	unsigned long prev = 0;
	for (const char *p = r.out; (p = strstr(p, " w: (work+0x0/0x")); p++) {
		const char *v = strstr(p, ") n=");
		RUN_EXPECT(r, v && v < strchr(p, '\n'));
		unsigned long n = strtoul(v + 4, NULL, 10);
		RUN_EXPECT(r, n > 0 && (events == 0 || n == prev + 1));
		prev = n;
		events++;
	}
	RUN_EXPECT(r, events >= 1);
	run_free(&r);
}

UKT_CASE(parameters_of_an_inlined_copy)
{
	/* scaled(sum, k): v and f are what work printed as sum and k */
	static const char *const ok[] = { "dsrc-gcc-O0", "dsrc-clang-O0", "dsrc-clang-O2" };
	for (size_t b = 0; b < sizeof ok / sizeof *ok; b++) {
		struct run r = ukprobe("trace", "p:dw/sc scaled@dsrc.c v f", "--",
				       target(ok[b]), NULL);
		RUN_EXPECT(r, r.status == 0);
		RUN_EXPECT(r, strstr(r.out, ") v=19 f=1\n") && strstr(r.out, ") v=20 f=2\n"));
		RUN_EXPECT(r, strstr(r.out, " k=1 sum=19 ") && strstr(r.out, " k=2 sum=20 "));
		run_free(&r);
	}
	/* gcc -O2 keeps them nowhere at the copy's entry (perf says so too) */
	struct run r = ukprobe("trace", "p:dw/sc scaled@dsrc.c v f", "--",
			       target("dsrc-gcc-O2"), NULL);
	expect_caret(&r, "Variable v optimized out at scaled", "p:dw/sc scaled@dsrc.c v f", 22);
	run_free(&r);
}

UKT_CASE(a_constant_location_is_an_immediate)
{
	/* gcc -O2: res is the constant 0 before the loop (DW_OP_lit0;
	 * DW_OP_stack_value), then work's first result in %ax (20) */
	struct run r = ukprobe("probe", "-x", target("dsrc-gcc-O2"), "-D",
			       "p:dw/c main;*res*+=* res", NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " res=\\0:s32") == 1 &&
		   count_lines(r.out, " res=%ax:s32") == 1);
	run_free(&r);
	r = ukprobe("trace", "p:dw/c main;*res*+=* res", "--", target("dsrc-gcc-O2"), NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.out, " c: (main+0x") &&
		   strstr(r.out, ") res=0\n") && strstr(r.out, ") res=20\n"));
	run_free(&r);
}

static const char *const dent_builds[] = {
	"dent-gcc-O0", "dent-gcc-O2", "dent-clang-O0", "dent-clang-O2",
};

/* at a return, parameters are what they were at the entry ($argN, saved
 * there), whatever their location at the return: the values printed */
UKT_CASE(parameters_at_a_return_probe)
{
	for (size_t b = 0; b < sizeof dent_builds / sizeof *dent_builds; b++) {
		struct run r = ukprobe("trace", "p:dw/r after_call%return x y",
				       "r:dw/q after_call $params", "--",
				       target(dent_builds[b]), NULL);
		RUN_EXPECT(r, r.status == 0);
		same_values(&r, "r", "after_call ", 1, 2);
		same_values(&r, "q", "after_call ", 1, 2);
		run_free(&r);
	}
	/* through a pointer parameter, and its fields as they are at the return */
	for (size_t b = 0; b < sizeof builds / sizeof *builds; b++) {
		struct run r = ukprobe("trace", "p:dw/wr work%return id=r->id k", "--",
				       target(builds[b]), NULL);
		RUN_EXPECT(r, r.status == 0);
		same_values(&r, "wr", "work ", 2, 2);
		run_free(&r);
	}
	struct run r = ukprobe("probe", "-x", target("dent-gcc-O2"), "-D",
			       "p:dw/r after_call%return x y", NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " x=$arg1:s64 y=$arg2:s64") == 1);
	run_free(&r);
}

UKT_CASE(entry_values_and_locals_where_they_cannot_be_read)
{
	/* gcc -O2: x is dead once printf is called, DW_OP_entry_value(reg5) */
	const char *def = "p:dw/a after_call:3 x";
	struct run r = ukprobe("trace", def, "--", target("dent-gcc-O2"), NULL);
	expect_caret(&r, "Variable x is only known by its entry value (%di at the entry of "
		     "after_call; after_call%return reads it) at after_call:3", def, 20);
	run_free(&r);
	/* a return probe reads no local (its value at the entry is none) */
	def = "p:dw/w work%return sum";
	for (size_t b = 0; b < sizeof builds / sizeof *builds; b++) {
		r = ukprobe("trace", def, "--", target(builds[b]), NULL);
		expect_caret(&r, "Variable sum is a local: a return probe reads parameters "
			     "(as at the entry) and globals at work%return", def, 19);
		run_free(&r);
	}
}

/* a struct passed in two registers: each member from its piece */
UKT_CASE(members_of_a_value_in_pieces)
{
	for (size_t b = 0; b < sizeof dent_builds / sizeof *dent_builds; b++) {
		struct run r = ukprobe("trace", "p:dw/p pair_sum p.lo p.hi",
				       "p:dw/m mixed_sum m.a m.c", "p:dw/s small_sum s.lo s.hi", "--",
				       target(dent_builds[b]), NULL);
		RUN_EXPECT(r, r.status == 0);
		same_values(&r, "p", "pair_sum ", 1, 2);
		same_values(&r, "m", "mixed_sum ", 1, 2);
		same_values(&r, "s", "small_sum ", 1, 2);
		run_free(&r);
		/* at the return: the registers they came in, saved at the entry
		 * (where DWARF leaves a piece out there, the calling convention's) */
		r = ukprobe("trace", "r:dw/q pair_sum p.lo p.hi", "r:dw/n mixed_sum m.a m.c",
			    "r:dw/r small_sum s.lo s.hi", "--", target(dent_builds[b]), NULL);
		RUN_EXPECT(r, r.status == 0);
		same_values(&r, "q", "pair_sum ", 1, 2);
		same_values(&r, "n", "mixed_sum ", 1, 2);
		same_values(&r, "r", "small_sum ", 1, 2);
		run_free(&r);
		/* m.b: where a piece holds it whole, its value; else refused */
		r = ukprobe("trace", "p:dw/b mixed_sum m.b", "--", target(dent_builds[b]), NULL);
		if (r.status == 0)
			same_values(&r, "b", "mixed_sum ", 1, 1);
		else
			RUN_EXPECT(r, r.status == 2 && strstr(r.err, "error: m.b ") &&
				   strstr(r.err, " at mixed_sum"));
		run_free(&r);
	}
	/* gcc -O2: the pieces are %di and %si, at the entry and at the return */
	struct run r = ukprobe("probe", "-x", target("dent-gcc-O2"), "-D",
			       "p:dw/p pair_sum p.lo p.hi", "p:dw/q pair_sum%return p.lo p.hi", NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " lo=%di:s64 hi=%si:s64") == 1 &&
		   count_lines(r.out, " lo=$arg1:s64 hi=$arg2:s64") == 1);
	run_free(&r);
	/* gcc -O2: s whole in %di, hi (unsigned) its upper half as a bitfield */
	r = ukprobe("probe", "-x", target("dent-gcc-O2"), "-D", "p:dw/s small_sum s.lo s.hi", NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " lo=%di:s32 hi=%di:b32@32/64") == 1);
	run_free(&r);
	/* b (signed) shares a register with a, in its upper half: a bitfield
	 * would lose its sign; p is two pieces */
	const char *def = "p:dw/b mixed_sum m.b";
	r = ukprobe("trace", def, "--", target("dent-gcc-O2"), NULL);
	expect_caret(&r, "m.b is signed and in the upper bytes of a register at mixed_sum "
		     "(bitfields are unsigned)", def, 17);
	run_free(&r);
	/* the whole value as one TYPE (whole with no TYPE is its members) */
	def = "p:dw/p pair_sum p:u64";
	r = ukprobe("trace", def, "--", target("dent-gcc-O2"), NULL);
	expect_caret(&r, "Variable p is in 2 pieces at pair_sum: give a member that one "
		     "piece holds", def, 16);
	run_free(&r);
}

/* C++: ns::Cls::method and ns::f as places (::f outside any namespace),
 * this->member, a member through a reference; g++ and clang++ */
UKT_CASE(cxx_qualified_names)
{
	static const char *const cxx[] = { "dcxx-gcc-O0", "dcxx-gcc-O2", "dcxx-clang-O0",
		"dcxx-clang-O2" };
	for (size_t b = 0; b < sizeof cxx / sizeof *cxx; b++) {
		struct run r = ukprobe("trace", "p:dw/area geo::Shape::area sides=this->sides_ w at.x at.y",
				       "p:dw/t ::twice v", "p:dw/i geo::inner::twice:2 v",
				       "r:dw/ar geo::Shape::area w x=at.x", "--", target(cxx[b]), NULL);
		RUN_EXPECT(r, r.status == 0);
		same_values(&r, "area", "area ", 1, 4);
		same_values(&r, "ar", "area ", 1, 2);
		same_values(&r, "i", "twice ", 1, 1);
		same_values(&r, "t", "gtwice ", 1, 1);
		run_free(&r);
		r = ukprobe("probe", "-x", target(cxx[b]), "-F", "geo::*", NULL);
		RUN_EXPECT(r, r.status == 0 && strstr(r.out, "geo::Shape::area\n") &&
			   strstr(r.out, "geo::inner::twice\n") && !strstr(r.out, "main"));
		run_free(&r);
		/* a plain name is every function of that name, as perf has it */
		r = ukprobe("probe", "-x", target(cxx[b]), "-D", "p:dw/t twice v", NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "p:dw/t") == 2);
		run_free(&r);
	}
	const char *def = "p geo::Nope::area w";
	struct run r = ukprobe("trace", def, "--", target("dcxx-gcc-O0"), NULL);
	expect_caret(&r, "Function geo::Nope::area is not found", def, 2);
	run_free(&r);
}

/* the entry address (file offset) of the only definition -D gives for def */
static unsigned long place_offset(const char *build, const char *def)
{
	struct run r = ukprobe("probe", "-x", target(build), "-D", def, NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "p:") == 1);
	const char *x = strstr(r.out, ":0x");
	RUN_EXPECT(r, x != NULL);
	unsigned long v = strtoul(x + 1, NULL, 16);
	run_free(&r);
	return v;
}

/* C++ operators and templates as places: the name's balanced <...>,
 * (...), [...] and the symbol after operator are the name, :RELLINE,
 * %return and +OFFS follow it; a template's arguments as g++ or clang++
 * spells them (long int, long), or none for every instance */
UKT_CASE(cxx_operators_and_templates)
{
	static const char *const cxx[] = { "dcxx-gcc-O0", "dcxx-gcc-O2", "dcxx-clang-O0",
		"dcxx-clang-O2" };
	for (size_t b = 0; b < sizeof cxx / sizeof *cxx; b++) {
		/* g++ -O2 gives the line of get's printf no statement row */
		const char *g4 = strstr(cxx[b], "-O0") ? "p:dw/g4 geo::Box<int>::get:2 v=this->v add" :
			"p:dw/g4 geo::Box<int>::get v=this->v add";
		struct run r = ukprobe("trace",
				       "p:dw/plus geo::Vec::operator+ x=this->x y=this->y ox=o.x oy=o.y",
				       "p:dw/eq geo::Vec::operator==:2 x=this->x ox=o.x",
				       "p:dw/call geo::Vec::operator() k y=this->y",
				       "r:dw/index geo::Vec::operator[] i",
				       "p:dw/shl geo::operator<< s x=v.x",
				       g4,
				       "p:dw/g8 geo::Box<long>::get v=this->v add",
				       "p:dw/m8 geo::maxof<long> a b",
				       "p:dw/m4 geo::maxof<int>%return a b",
				       "--", target(cxx[b]), NULL);
		RUN_EXPECT(r, r.status == 0);
		same_values(&r, "plus", "plus ", 1, 4);
		same_values(&r, "eq", "eq ", 1, 2);
		same_values(&r, "call", "call ", 1, 2);
		same_values(&r, "index", "index ", 1, 1);
		same_values(&r, "shl", "shl ", 1, 2);
		same_values(&r, "g4", "get4 ", 1, 2);
		same_values(&r, "g8", "get8 ", 1, 2);
		same_values(&r, "m8", "max8 ", 1, 2);
		same_values(&r, "m4", "max4 ", 1, 2);
		run_free(&r);
		/* without template arguments: every instance */
		r = ukprobe("probe", "-x", target(cxx[b]), "-D", "p:dw/m maxof a",
			    "p:dw/g geo::Box::get add", NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "p:dw/m") == 2 &&
			   count_lines(r.out, "p:dw/g") == 2);
		run_free(&r);
		/* an event is named after an operator by its ABI code */
		r = ukprobe("probe", "-x", target(cxx[b]), "-D", "p geo::Vec::operator==",
			    "r geo::Vec::operator()", NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "p:operator_eq ") == 1 &&
			   count_lines(r.out, "r:operator_cl__return ") == 1);
		run_free(&r);
		/* -F's names are places; -L and -V take a blank within <...> */
		r = ukprobe("probe", "-x", target(cxx[b]), "-F", "geo::maxof*", NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "geo::maxof<") == 2);
		run_free(&r);
		r = ukprobe("probe", "-x", target(cxx[b]), "-L", "geo::maxof<long int>", NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "<geo::maxof<long int>@") == 1 &&
			   count_lines(r.out, "      0  ") == 1);
		run_free(&r);
		r = ukprobe("probe", "-x", target(cxx[b]), "-V", "geo::Vec::operator[]:2", NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "\t\tint\ti") == 1);
		run_free(&r);
		/* this of a const method: a pointer to const, itself const
		 * for g++ (T* const, as C declares it; not "const const") */
		r = ukprobe("probe", "-x", target(cxx[b]), "-V", "geo::Vec::operator+", NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "\t\tconst struct Vec*") == 1 &&
			   count_lines(r.out, "this") == 1 && !strstr(r.out, "const const"));
		run_free(&r);
		/* +OFFS after a name; ++ before a digit is + and an offset */
		unsigned long eq = place_offset(cxx[b], "p geo::Vec::operator=="),
			      plus = place_offset(cxx[b], "p geo::Vec::operator+");
		UKT_EQ(place_offset(cxx[b], "p geo::Vec::operator==+4"), eq + 4);
		UKT_EQ(place_offset(cxx[b], "p geo::Vec::operator++0x3"), plus + 3);
	}
	static const struct {
		const char *def, *msg;
		int offset;
	} bad[] = {
		{ "p geo::Box<int::get v", "Unbalanced '<' in the name", 10 },
		{ "p geo::Vec::operator[]] i", "Unbalanced ']' in the name", 22 },
		{ "p geo::Box<int>)::get v", "Unbalanced ')' in the name", 15 },
		{ "p geo::Box<char>::get v", "Function geo::Box<char>::get is not found", 2 },
		{ "p geo::Vec::operator+:x", "Invalid line number", 22 },
	};
	for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
		struct run r = ukprobe("trace", bad[k].def, "--", target("dcxx-gcc-O0"), NULL);
		expect_caret(&r, bad[k].msg, bad[k].def, bad[k].offset);
		run_free(&r);
	}
}

/*
 * Names with a blank - a conversion operator, a template instantiated on
 * a type of two words (g++ and clang++ spell it differently) - in quotes
 * or with escaped blanks, as perf probe takes them: the values the
 * program prints, in every build; -L and -V take the quoted place; an
 * unclosed quote is an error at the quote.
 */
UKT_CASE(cxx_names_with_blanks_quoted)
{
	static const char *const cxx[] = { "dcxx-gcc-O0", "dcxx-gcc-O2", "dcxx-clang-O0",
		"dcxx-clang-O2" };
	for (size_t b = 0; b < sizeof cxx / sizeof *cxx; b++) {
		struct run r = ukprobe("trace",
				       "p:dw/ob \"geo::Vec::operator bool\" x=this->x y=this->y",
				       "p:dw/ob2 geo::Vec::operator\\ bool x=this->x",
				       "p:dw/mu 'geo::minof<unsigned long>' a b",
				       "p:dw/mu2 geo::minof<long\\ unsigned\\ int> a",
				       "--", target(cxx[b]), NULL);
		RUN_EXPECT(r, r.status == 0);
		same_values(&r, "ob", "bool ", 1, 2);
		same_values(&r, "ob2", "bool ", 1, 1);
		same_values(&r, "mu", "min ", 1, 2);
		same_values(&r, "mu2", "min ", 1, 1);
		run_free(&r);
		r = ukprobe("probe", "-x", target(cxx[b]), "-L", "\"geo::Vec::operator bool\"", NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "<geo::Vec::operator bool@") == 1);
		run_free(&r);
		r = ukprobe("probe", "-x", target(cxx[b]), "-V", "'geo::minof<unsigned long>'", NULL);
		RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "\ta") == 1 &&
			   count_lines(r.out, "\tb") == 1);
		run_free(&r);
	}
	static const char bad[] = "p:dw/ob \"geo::Vec::operator bool x=this->x";
	struct run r = ukprobe("trace", bad, "--", target("dcxx-gcc-O0"), NULL);
	expect_caret(&r, "Unclosed quote", bad, 8);
	run_free(&r);
}

/* what the parser or the agent finds wrong in a translated definition is
 * shown in the definition as written, the caret on the word it came from */
UKT_CASE(errors_in_translations_point_into_what_was_written)
{
	/* the agent: the object given by -x is not in the program */
	const char *def = "p:dw/a after_call x";
	struct run r = ukprobe("trace", "-x", target("dent-gcc-O2"), def, "--",
			       target("dsrc-gcc-O0"), NULL);
	expect_caret(&r, "Failed to find the given file", def, 7);
	run_free(&r);
	/* the parser: a TYPE, the same event twice, a bitfield after $params */
	def = "p:dw/a work:3 k:badtype";
	r = ukprobe("trace", def, "--", target("dsrc-gcc-O0"), NULL);
	expect_caret(&r, "Unknown type is specified", def, 16);
	run_free(&r);
	def = "p:dw/a work:3 k";
	r = ukprobe("trace", def, def, "--", target("dsrc-gcc-O0"), NULL);
	expect_caret(&r, "Given group/event name is already used by another event", def, 2);
	run_free(&r);
	def = "p:dw/a work:3 $params s=sum:b99@0/8";
	r = ukprobe("trace", def, "--", target("dsrc-gcc-O0"), NULL);
	expect_caret(&r, "Invalid bitfield", def, 28);
	run_free(&r);
}

/* -V at lines (;PATTERN) where libdw finds no scope for some address:
 * the function's own copy is read, nothing freed that was not allocated
 * (the fuzzer's first finding, on a valid clang -O0 C++ build) */
UKT_CASE(vars_where_libdw_finds_no_scope)
{
	struct run r = ukprobe("probe", "-x", target("dcxx-clang-O0"), "-V", "twice;*", NULL);
	RUN_EXPECT(r, r.status == 0);
	int n = count_lines(r.out, "\t@<");
	RUN_EXPECT(r, n >= 2 && count_lines(r.out, "\t\tint\tv") == n);
	run_free(&r);
}

/* ---- corrupt DWARF: a target copied with bytes of its debug
 * information patched where readelf shows them ---- */

/* the file offset of section NAME of the ELF file at path, or -1 */
static long section_offset(const char *path, const char *name)
{
	size_t len;
	unsigned char *f = file_bytes(path, &len);
	const Elf64_Ehdr *eh = (const void *)f;
	const Elf64_Shdr *sh = (const void *)(f + eh->e_shoff);
	const char *names = (const char *)f + sh[eh->e_shstrndx].sh_offset;
	long off = -1;
	for (int k = 0; k < eh->e_shnum; k++)
		if (!strcmp(names + sh[k].sh_name, name))
			off = (long)sh[k].sh_offset;
	free(f);
	return off;
}

/* in readelf's dump of .debug_info of path: the offset (in the section)
 * of attribute ATTR of the DIE at DIE (die >= 0), or of the first DIE of
 * tag TAG named NAME; *value: what readelf shows as its value ("<0x57>"
 * for a reference: 0x57) */
static long die_attr(const char *path, long die, const char *tag, const char *name,
		     const char *attr, long *value)
{
	char cmd[4200], line[1024], cur_tag[128] = "";
	snprintf(cmd, sizeof cmd, "readelf --debug-dump=info '%s'", path);
	FILE *p = popen(cmd, "r");
	UKT_ASSERT(p);
	long cur = -1, found = -1, aoff = -1, aval = 0;
	int named = 0;
	while (fgets(line, sizeof line, p) && found < 0) {
		unsigned lv;
		long off;
		char t[128];
		if (sscanf(line, " <%u><%lx>: Abbrev Number: %*d (%127[^)])", &lv, &off, t) == 3) {
			if (aoff >= 0 && (die >= 0 ? cur == die : named))
				found = aoff;
			cur = off;
			snprintf(cur_tag, sizeof cur_tag, "%s", t);
			named = 0;
			aoff = -1;
			continue;
		}
		char a[128], v[512];
		if (sscanf(line, " <%lx> %127s : %511[^\n]", &off, a, v) != 3)
			continue;
		if (!strcmp(a, "DW_AT_name") && tag && !strcmp(cur_tag, tag)) {
			char *s = strrchr(v, ':');	/* "(indirect string, ...): NAME" */
			s = s ? s + 2 : v;
			named = !strcmp(s, name) || !strcmp(v, name);
		}
		if (!strcmp(a, attr)) {
			aoff = off;
			aval = v[0] == '<' ? strtol(v + 1, NULL, 16) : strtol(v, NULL, 0);
		}
	}
	if (found < 0 && aoff >= 0 && (die >= 0 ? cur == die : named))
		found = aoff;
	pclose(p);
	if (value)
		*value = aval;
	return found;
}

/* a copy of from at to, LEN bytes of BYTES written at file offset AT */
static void patched_copy(const char *from, const char *to, long at, const void *bytes,
			 size_t len)
{
	size_t size;
	unsigned char *f = file_bytes(from, &size);
	UKT_ASSERT(at >= 0 && (size_t)at + len <= size);
	memcpy(f + at, bytes, len);
	write_file(to, f, size);
	free(f);
}

/* ukprobe ARGS... under timeout(1): a hang is status 124 */
static struct run ukprobe_timed(const char *a0, ...)
{
	char *argv[32];
	int n = 0;
	argv[n++] = (char *)"/usr/bin/timeout";
	argv[n++] = (char *)"20";
	argv[n++] = (char *)ukprobe_path();
	va_list ap;
	va_start(ap, a0);
	for (const char *a = a0; a && n < 31; a = va_arg(ap, const char *))
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	return run_argv(argv);
}

/* a pointer type that points to itself (its DW_AT_type its own DIE): -V
 * names it to a bounded depth, '->' says it is not a struct's */
UKT_CASE(corrupt_pointer_to_itself)
{
	const char *t = target("dsrc-gcc-O0");
	long ptr, at = die_attr(t, -1, "DW_TAG_formal_parameter", "r", "DW_AT_type", &ptr);
	UKT_ASSERT(at > 0 && ptr > 0);
	long self = die_attr(t, ptr, NULL, NULL, "DW_AT_type", NULL);
	UKT_ASSERT(self > 0);
	uint32_t ref = (uint32_t)ptr;	/* DW_FORM_ref4, the CU at 0 */
	char copy[PATH_MAX + 32];
	snprintf(copy, sizeof copy, "%s/dwc-selfptr", build_dir());
	patched_copy(t, copy, section_offset(t, ".debug_info") + self, &ref, 4);
	struct run r = ukprobe_timed("probe", "-x", copy, "-V", "work", NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "\t\tint\tk") == 1 &&
		   count_lines(r.out, "*\tr") == 1);
	run_free(&r);
	r = ukprobe_timed("probe", "-x", copy, "-D", "p work r->id", NULL);
	RUN_EXPECT(r, r.status == 2 && strstr(r.err, "r is not a struct or union"));
	run_free(&r);
	unlink(copy);
}

/* a function whose DW_AT_low_pc lies in no segment: an error at the
 * place, not a probe at OBJ:0xffffffffffffffff */
UKT_CASE(corrupt_address_in_no_segment)
{
	const char *t = target("dsrc-gcc-O0");
	long lo, at = die_attr(t, -1, "DW_TAG_subprogram", "work", "DW_AT_low_pc", &lo);
	UKT_ASSERT(at > 0 && lo > 0);
	uint64_t far = 0x7000000000;	/* DW_FORM_addr */
	char copy[PATH_MAX + 32];
	snprintf(copy, sizeof copy, "%s/dwc-nowhere", build_dir());
	patched_copy(t, copy, section_offset(t, ".debug_info") + at, &far, 8);
	const char *def = "p:dw/n work k";
	struct run r = ukprobe_timed("probe", "-x", copy, "-D", def, NULL);
	RUN_EXPECT(r, r.status == 2 && r.nout == 0 &&
		   strstr(r.err, "error: work is at 0x7000000000, in no segment of "));
	run_free(&r);
	unlink(copy);
}

/* a copy of from at to, every "FIND\0" in it made "REPL\0" (not longer) */
static void renamed_copy(const char *from, const char *to, const char *find, const char *repl)
{
	size_t size;
	unsigned char *f = file_bytes(from, &size);
	size_t fl = strlen(find) + 1, n = 0;
	UKT_ASSERT(strlen(repl) < fl);
	for (size_t k = 0; k + fl <= size; k++)
		if (!memcmp(f + k, find, fl)) {
			memcpy(f + k, repl, strlen(repl) + 1);
			n++;
		}
	UKT_ASSERT(n > 0);
	write_file(to, f, size);
	free(f);
}

/* a source file the line table names that is not a regular file (here
 * /dev/zero, which never ends): not read, for -L and for ;PATTERN */
UKT_CASE(corrupt_source_is_a_device)
{
	char copy[PATH_MAX + 32];
	snprintf(copy, sizeof copy, "%s/dwc-devsrc", build_dir());
	/* its line table: directory tests/cli/targets, file dsrc.c */
	renamed_copy(target("dsrc-gcc-O0"), copy, "tests/cli/targets", "/dev");
	renamed_copy(copy, copy, "dsrc.c", "zero");
	struct run r = ukprobe_timed("probe", "-x", copy, "-L", "work", NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "<work@/dev/zero:0>") == 1);
	run_free(&r);
	const char *def = "p:dw/z work;sum*";
	r = ukprobe_timed("probe", "-x", copy, "-D", def, NULL);
	expect_caret(&r, "No line of work matches sum*: its source /dev/zero cannot be read", def, 12);
	run_free(&r);
	unlink(copy);
}

/* an index whose offset a long cannot hold: an error, not a wrapped
 * offset (the element's size times it, and that added to where the
 * array is: r is at -96(%bp) in main) */
UKT_CASE(index_out_of_range)
{
	const char *def = "p:dw/i work r->vals[0x7fffffffffffffff]";
	struct run r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-D", def, NULL);
	expect_caret(&r, "r->vals: index 9223372036854775807 out of range", def, 19);
	run_free(&r);
	def = "p:dw/i main r.vals[-0x2000000000000000]";
	r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-D", def, NULL);
	expect_caret(&r, "r.vals: index -2305843009213693952 out of range", def, 18);
	run_free(&r);
	/* in range: as before */
	r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-D", "p:dw/i main r.vals[3]", NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "p:dw/i ") == 1);
	run_free(&r);
}

/* -L SRC:A-B with lines past what a line number (an int) holds: refused,
 * not wrapped into lines 1 to 10 */
UKT_CASE(line_range_out_of_range)
{
	const char *place = "dsrc.c:4294967297-4294967306";
	struct run r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-L", place, NULL);
	expect_caret(&r, "Invalid line range", place, 7);
	run_free(&r);
	place = "dsrc.c:2147483600-2147483647";	/* the last ones: none there */
	r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-L", place, NULL);
	RUN_EXPECT(r, r.status == 2 && strstr(r.err, "error: Line range is past the end of /") &&
		   strstr(r.err, "/tests/cli/targets/dsrc.c (") && strstr(r.err, " lines)\n"));
	run_free(&r);
}

/* -V where no variable can be read (clang -O2's small_sum at its first
 * line): said so; the empty list is not sorted (qsort of NULL: UBSan's
 * finding under the DWARF fuzzer) */
UKT_CASE(vars_none_readable)
{
	struct run r = ukprobe("probe", "-x", target("dent-clang-O2"), "-V", "small_sum:1", NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "\t\t(No matched variables)") >= 1);
	run_free(&r);
}

/* -D of a raw SYM+OFFS: an offset that wraps the address, or one past
 * every segment, is not made an offset in the file (work+UINT64_MAX was
 * the byte before work, work+0x100000 0xffffffffffffffff); the place is
 * written as given */
UKT_CASE(raw_place_offset_out_of_range)
{
	static const char *const defs[] = { "p:dw/x work+0xffffffffffffffff",
		"p:dw/x work+0x100000" };
	for (int k = 0; k < 2; k++) {
		struct run r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-D", defs[k], NULL);
		char want[128];
		snprintf(want, sizeof want, "%s\n", defs[k]);
		RUN_EXPECT(r, r.status == 0 && !strcmp(r.out, want));
		run_free(&r);
	}
	struct run r = ukprobe("probe", "-x", target("dsrc-gcc-O0"), "-D", "p:dw/x work+4", NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, "p:dw/x ") == 1 &&
		   strstr(r.out, "dsrc-gcc-O0:0x"));
	run_free(&r);
}

/* the offsets (in .debug_info) of the DW_AT_type of every anonymous
 * member of the struct named NAME in path; their count */
static int anon_member_types(const char *path, const char *name, long *at, int max, long *self)
{
	char cmd[4200], line[1024];
	snprintf(cmd, sizeof cmd, "readelf --debug-dump=info '%s'", path);
	FILE *p = popen(cmd, "r");
	UKT_ASSERT(p);
	int n = 0, in = 0, member = 0;
	unsigned slv = 0;
	long cur = -1, type_at = -1;
	while (fgets(line, sizeof line, p)) {
		unsigned lv;
		long off;
		char t[128], a[128], v[512];
		if (sscanf(line, " <%u><%lx>: Abbrev Number: %*d (%127[^)])", &lv, &off, t) == 3) {
			if (member && type_at >= 0 && n < max)
				at[n++] = type_at;
			member = 0;
			type_at = -1;
			if (in == 2 && lv <= slv)
				in = 3;
			if (in == 0 && !strcmp(t, "DW_TAG_structure_type")) {
				in = 1;
				slv = lv;
				cur = off;
			} else if (in == 1) {
				in = 0;
			}
			if (in == 2 && lv == slv + 1 && !strcmp(t, "DW_TAG_member"))
				member = 1;
			continue;
		}
		if (sscanf(line, " <%lx> %127s : %511[^\n]", &off, a, v) != 3)
			continue;
		if (in == 1 && !strcmp(a, "DW_AT_name")) {
			const char *s = strrchr(v, ':');
			in = !strcmp(s ? s + 2 : v, name) ? 2 : 0;
			if (in == 2)
				*self = cur;
		}
		if (member && !strcmp(a, "DW_AT_name"))
			member = 0;
		if (member && !strcmp(a, "DW_AT_type"))
			type_at = off;
	}
	pclose(p);
	return n;
}

/* an array type whose element type is itself: the calling convention's
 * reading of a struct holding it (a parameter at %return) stops, where
 * it peeled the array forever */
UKT_CASE(corrupt_array_of_itself)
{
	const char *t = target("dbad");
	/* the array: the type of struct arr's member v */
	long v_type, vat = die_attr(t, -1, "DW_TAG_member", "v", "DW_AT_type", &v_type);
	UKT_ASSERT(vat > 0 && v_type > 0);
	long arr = die_attr(t, v_type, NULL, NULL, "DW_AT_type", NULL);
	UKT_ASSERT(arr > 0);
	uint32_t ref = (uint32_t)v_type;	/* DW_FORM_ref4, the CU at 0 */
	char copy[PATH_MAX + 32];
	snprintf(copy, sizeof copy, "%s/dwc-selfarr", build_dir());
	patched_copy(t, copy, section_offset(t, ".debug_info") + arr, &ref, 4);
	struct run r = ukprobe_timed("probe", "-x", copy, "-D", "r:dw/x arr_sum a.w", NULL);
	RUN_EXPECT(r, r.status == 2 && strstr(r.err, "is not in an argument register"));
	run_free(&r);
	unlink(copy);
}

/* a struct whose twelve anonymous members are the struct itself: the
 * search for a member and the fetch of it whole are bounded in work,
 * not only in depth (12 to the 17th calls) */
UKT_CASE(corrupt_struct_of_itself)
{
	const char *t = target("dbad");
	long at[16], self = -1;
	int n = anon_member_types(t, "many", at, 16, &self);
	UKT_ASSERT(n == 12 && self > 0);
	char copy[PATH_MAX + 32];
	snprintf(copy, sizeof copy, "%s/dwc-selfstruct", build_dir());
	long base = section_offset(t, ".debug_info");
	uint32_t ref = (uint32_t)self;
	patched_copy(t, copy, base + at[0], &ref, 4);
	for (int k = 1; k < n; k++)
		patched_copy(copy, copy, base + at[k], &ref, 4);
	struct run r = ukprobe_timed("probe", "-x", copy, "-D", "p:dw/m arr_sum m->nosuch", NULL);
	RUN_EXPECT(r, r.status == 2 && strstr(r.err, "many has no member nosuch"));
	run_free(&r);
	r = ukprobe_timed("probe", "-x", copy, "-D", "p:dw/m arr_sum m->last", NULL);
	RUN_EXPECT(r, r.status == 0 && count_lines(r.out, " last=+48(") == 1);
	run_free(&r);
	r = ukprobe_timed("probe", "-x", copy, "-D", "p:dw/m main:3 mm", NULL);
	RUN_EXPECT(r, r.status == 0 && strstr(r.err, "too many members to fetch"));
	run_free(&r);
	unlink(copy);
}
