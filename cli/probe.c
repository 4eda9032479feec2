/* SPDX-License-Identifier: MIT */
/*
 * `ukprobe probe -x OBJ`: the object's debug information as `perf probe`
 * shows it: -F functions, -L probe-able lines, -V variables at a place,
 * -D the raw definitions a source-level one becomes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ukprobes/events.h>

#include "cli.h"
#include "dwarf.h"

static void probe_usage(FILE *f)
{
	fprintf(f,
"Usage: ukprobe probe -x OBJ -F [GLOB]\n"
"       ukprobe probe -x OBJ -L PLACE\n"
"       ukprobe probe -x OBJ -V PLACE\n"
"       ukprobe probe -x OBJ -D DEFINITION...\n"
"\n"
"Reads OBJ's debug information (its own, or the debug file found by\n"
"build-id under /usr/lib/debug/.build-id) as 'perf probe' does.\n"
"PLACE is FUNC[@SRC][:RELLINE|+OFFS|%%return] or SRC:LINE; in -D, after\n"
"OBJ: it is another object's.\n"
"\n"
"  -x, --exec=OBJ     the executable or library (a path, or a name such\n"
"                     as libc.so.6)\n"
"  -F, --funcs[=GLOB] list the functions (matching GLOB)\n"
"  -L, --line=PLACE   list the lines of a function that can be probed\n"
"  -V, --vars=PLACE   list the variables visible at PLACE, with types\n"
"  -D, --definition   print each DEFINITION as the raw definitions it\n"
"                     becomes (one a line: addresses, registers, offsets)\n"
"  -h, --help         this text\n");
}

/* the kernel's error-log form for a DWARF error */
void ukp_dwarf_error(const char *text, const struct dw_error *e)
{
	ukp_error_log(e->msg, text, e->offset);
}

void ukp_dwarf_note(const char *msg)
{
	ukp_err("note: %s", msg);
}

int dw_place_offset(const char *def)
{
	size_t i = strspn(def, " \t");
	i += strcspn(def + i, " \t");
	return (int)(i + strspn(def + i, " \t"));
}

/* -D of a definition already in the raw grammar: checked as trace checks
 * it, then written as it is armed, its default name made explicit (a
 * bare FUNC with raw fetches is the SYM place, the function's first
 * byte, not a source-level one) */
static int print_raw(struct dw_obj *o, const char *def)
{
	struct ukpev_def *d;
	struct ukpev_error e;
	if (ukpev_def_parse(def, &d, &e) < 0) {
		char buf[8192];
		ukpev_error_format(buf, sizeof buf, def, &e);
		fputs(buf, stderr);
		return 2;
	}
	const struct ukpev_event_info *in = ukpev_def_info(d);
	size_t head = strcspn(def, " \t");
	if (def[0] == '-') {
		printf("%s\n", def);
		ukpev_def_free(d);
		return 0;
	}
	/* the place, where it is the object's, as its address in the file */
	size_t ps = head + strspn(def + head, " \t"), pl = strcspn(def + ps, " \t");
	char place[1100], at[1200];
	snprintf(place, sizeof place, "%.*s", (int)pl, def + ps);
	if (!o || dw_raw_place(o, place, at, sizeof at) != 0)
		snprintf(at, sizeof at, "%s", place);
	if (memchr(def, ':', head))
		printf("%.*s %s%s\n", (int)head, def, at, def + ps + pl);
	else
		printf("%.*s:%s/%s %s%s\n", (int)head, def, in->group, in->event, at,
		       def + ps + pl);
	ukpev_def_free(d);
	return 0;
}

/* -D: each definition as trace arms it, read from the object its place
 * names (OBJ:...) or else OBJ */
static int print_definitions(const char *obj, char **defs, int n)
{
	struct dw_cache *cache = NULL;
	struct dw_error err;
	int rc = 0;
	for (int i = 0; i < n && !rc; i++) {
		char on[1024], **out = NULL;
		int named = dw_def_object(defs[i], on, sizeof on);
		int dw = dw_is_source_level(defs[i]);
		struct dw_obj *o = dw_cache_open(&cache, named ? on : obj, &err);
		int m = 0;
		if (!o && dw) {	/* the place's object cannot be read */
			err.offset = dw_place_offset(defs[i]);
			ukp_dwarf_error(defs[i], &err);
			rc = 2;
			break;
		}
		if (dw)
			m = dw_translate(o, defs[i], &out, &err);
		else if (o)
			m = dw_translate_symbol(o, defs[i], named, &out, &err);
		if (m < 0) {
			ukp_dwarf_error(defs[i], &err);
			rc = 2;
			break;
		}
		if (!dw && !m) {
			rc = print_raw(o, defs[i]);
			continue;
		}
		for (int k = 0; k < m; k++) {
			printf("%s\n", out[k]);
			free(out[k]);
		}
		free(out);
	}
	dw_cache_free(cache);
	return rc;
}

int cmd_probe(int argc, char **argv)
{
	const char *obj = NULL, *arg = NULL;
	char mode = 0;
	int first_def = argc;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			probe_usage(stdout);
			return 0;
		} else if (!strcmp(a, "-x") && i + 1 < argc) {
			obj = argv[++i];
		} else if (!strncmp(a, "--exec=", 7)) {
			obj = a + 7;
		} else if (!strcmp(a, "-F") || !strcmp(a, "--funcs")) {
			mode = 'F';
			if (i + 1 < argc && argv[i + 1][0] != '-')
				arg = argv[++i];
		} else if (!strncmp(a, "--funcs=", 8)) {
			mode = 'F';
			arg = a + 8;
		} else if ((!strcmp(a, "-L") || !strcmp(a, "-V")) && i + 1 < argc) {
			mode = a[1];
			arg = argv[++i];
		} else if (!strncmp(a, "--line=", 7)) {
			mode = 'L';
			arg = a + 7;
		} else if (!strncmp(a, "--vars=", 7)) {
			mode = 'V';
			arg = a + 7;
		} else if (!strcmp(a, "-D") || !strcmp(a, "--definition")) {
			mode = 'D';
			first_def = i + 1;
			break;
		} else {
			ukp_err("probe: unknown option '%s' (see 'ukprobe probe --help')", a);
			return 2;
		}
	}
	if (!obj || !mode || (mode == 'D' && first_def >= argc)) {
		probe_usage(stderr);
		return 2;
	}
	struct dw_error err;
	dw_note = ukp_dwarf_note;
	if (mode == 'D')
		return print_definitions(obj, argv + first_def, argc - first_def);
	struct dw_obj *o = dw_open(obj, &err);
	if (!o) {
		ukp_err("%s", err.msg);
		return 1;
	}
	int rc = 0;
	if (mode == 'F') {
		dw_list_funcs(o, arg, stdout);
	} else if ((mode == 'L' ? dw_list_lines : dw_list_vars)(o, arg, stdout, &err) != 0) {
		ukp_dwarf_error(arg, &err);
		rc = 2;
	}
	dw_close(o);
	return rc;
}
