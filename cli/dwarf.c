/* SPDX-License-Identifier: MIT */
/*
 * Source-level places and variables through libdw, as `perf probe` does
 * them: a place becomes every address where its line begins (inlined
 * copies included) or a function's address past its prologue; a variable
 * becomes the raw fetch its location expression says at that address
 * (%reg, +OFF(%reg), @OBJ:SYM+OFF, nested for pointers), typed by its
 * DWARF type.  The result is raw definitions, parsed and armed as any.
 */
#include <ctype.h>
#include <dwarf.h>
#include <errno.h>
#include <fcntl.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dwarf.h"
#include "elf.h"
#include <ukprobes/events.h>

struct dw_obj {
	char *name;		/* as given: what raw places name */
	char *path;		/* the file */
	Dwfl *dwfl;
	Dwfl_Module *mod;
	Dwarf *dw;
	Dwarf_Addr bias;
	struct elf_file elf;	/* symbols, for globals */
	int has_elf;
	/* every function instance (subprogram, inlined copy), with its CU,
	 * in the order of the DWARF: read once, searched by each place */
	struct fn_die { Dwarf_Die die, cu; const char *name; } *fns;
	size_t nfns;
	int fns_read;
};

static void seterr(struct dw_error *e, int off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void seterr(struct dw_error *e, int off, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof e->msg, fmt, ap);
	va_end(ap);
	e->offset = off;
}

/* a library name (no '/') is looked for where Debian puts libraries */
static char *find_object(const char *obj)
{
	static const char *dirs[] = { "/lib/x86_64-linux-gnu",
		"/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib", "/lib" };
	if (strchr(obj, '/') || access(obj, R_OK) == 0)
		return strdup(obj);
	for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
		char p[4096];
		snprintf(p, sizeof p, "%s/%s", dirs[i], obj);
		if (access(p, R_OK) == 0)
			return strdup(p);
	}
	return strdup(obj);
}

/* set while EXPR of +OFF(EXPR) is translated: a reference is its address */
static int reference_as_address;

static char *debuginfo_path;
static const Dwfl_Callbacks offline_cb = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

struct dw_obj *dw_open(const char *obj, struct dw_error *err)
{
	struct dw_obj *o = calloc(1, sizeof *o);
	o->name = strdup(obj);
	o->path = find_object(obj);
	if (access(o->path, R_OK) != 0) {
		seterr(err, 0, strchr(obj, '/') ? "%s: %s" :
		       "%s: %s (a library's name is looked for where the program's "
		       "dynamic linker finds it, and in the system's directories: give its path)",
		       obj, strerror(errno));
		dw_close(o);
		return NULL;
	}
	o->dwfl = dwfl_begin(&offline_cb);
	if (!o->dwfl)
		goto fail;
	o->mod = dwfl_report_offline(o->dwfl, o->name, o->path, -1);
	if (!o->mod) {
		seterr(err, 0, "%s: %s", obj, dwfl_errmsg(-1));
		dw_close(o);
		return NULL;
	}
	dwfl_report_end(o->dwfl, NULL, NULL);
	o->dw = dwfl_module_getdwarf(o->mod, &o->bias);
	if (!o->dw) {
		seterr(err, 0, "%s: no debug information", obj);
		dw_close(o);
		return NULL;
	}
	if (elf_open(o->path, 0, &o->elf) == 0)
		o->has_elf = 1;
	return o;
fail:
	seterr(err, 0, "%s: %s", obj, dwfl_errmsg(-1));
	dw_close(o);
	return NULL;
}

void dw_close(struct dw_obj *o)
{
	if (!o)
		return;
	if (o->dwfl)
		dwfl_end(o->dwfl);
	if (o->has_elf)
		elf_close(&o->elf);
	free(o->fns);
	free(o->name);
	free(o->path);
	free(o);
}

/* ---- walking the functions ------------------------------------------ */

/* a function instance: a concrete subprogram or an inlined copy */
struct inst {
	Dwarf_Die die;
	Dwarf_Die cu;
	int inlined;
	int alias;	/* found by another name of its symbol's (malloc) */
};

struct insts {
	struct inst *v;
	size_t n, cap;
};

static void push_inst(struct insts *s, Dwarf_Die *die, Dwarf_Die *cu, int inl)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->v = realloc(s->v, s->cap * sizeof *s->v);
	}
	s->v[s->n].die = *die;
	s->v[s->n].cu = *cu;
	s->v[s->n].inlined = inl;
	s->v[s->n].alias = 0;
	s->n++;
}

/* tail comparison of file names, as perf's strtailcmp */
static int tail_match(const char *file, const char *src)
{
	size_t a = strlen(file), b = strlen(src);
	if (b > a) {	/* a relative name in the line table, a full one given */
		const char *t = file;
		file = src;
		src = t;
		a = strlen(file);
		b = strlen(src);
	}
	if (strcmp(file + a - b, src))
		return 0;
	return a == b || file[a - b - 1] == '/' || src[0] == '/';
}

/* the file a DIE was declared in; the CU's own file where libdw cannot
 * say (DWARF 5 file index 0, as clang writes it) */
static const char *decl_file(Dwarf_Die *die, Dwarf_Die *cu)
{
	const char *f = dwarf_decl_file(die);
	return f ? f : dwarf_diename(cu);
}

/* a function's (or inlined copy's) entry: DW_AT_entry_pc or DW_AT_low_pc,
 * else the start of its first range, as perf takes it (gcc -O2 splits a
 * function into ranges, its unlikely paths in a .cold part after them:
 * glibc's fclose is one) */
static int entry_pc(Dwarf_Die *die, Dwarf_Addr *pc)
{
	Dwarf_Addr base, start, end;
	if (dwarf_entrypc(die, pc) == 0)
		return 0;
	if (dwarf_ranges(die, 0, &base, &start, &end) > 0) {
		*pc = start;
		return 0;
	}
	return -1;
}

typedef void (*die_fn)(Dwarf_Die *die, Dwarf_Die *cu, void *arg);
/* a function instance and its name */
typedef void (*fn_visit)(Dwarf_Die *die, Dwarf_Die *cu, const char *name, void *arg);

static void walk(Dwarf_Die *die, Dwarf_Die *cu, die_fn fn, void *arg)
{
	Dwarf_Die c;
	if (dwarf_child(die, &c) != 0)
		return;
	do {
		int tag = dwarf_tag(&c);
		if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine)
			fn(&c, cu, arg);
		if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
		    tag == DW_TAG_lexical_block || tag == DW_TAG_namespace)
			walk(&c, cu, fn, arg);
	} while (dwarf_siblingof(&c, &c) == 0);
}

static void remember_fn(Dwarf_Die *die, Dwarf_Die *cu, void *arg)
{
	struct dw_obj *o = arg;
	if ((o->nfns & (o->nfns - 1)) == 0 || o->nfns == 0) {	/* 0, 1, 2, 4, ... */
		struct fn_die *v = realloc(o->fns, (o->nfns ? 2 * o->nfns : 64) * sizeof *v);
		if (!v)
			return;
		o->fns = v;
	}
	o->fns[o->nfns].die = *die;
	o->fns[o->nfns].cu = *cu;
	o->fns[o->nfns].name = dwarf_diename(die);
	o->nfns++;
}

/* fn on every function instance: the DWARF is walked once (a walk of
 * libpython's costs some 30 ms, and a definition may search it often) */
static void walk_all(struct dw_obj *o, fn_visit fn, void *arg)
{
	if (!o->fns_read) {
		Dwarf_Die *cu = NULL;
		Dwarf_Addr b;
		while ((cu = dwfl_module_nextcu(o->mod, cu, &b)) != NULL) {
			Dwarf_Die cud = *cu;
			walk(&cud, &cud, remember_fn, o);
		}
		o->fns_read = 1;
	}
	for (size_t i = 0; i < o->nfns; i++) {
		if (!o->fns[i].name)
			continue;
		Dwarf_Die die = o->fns[i].die, cu = o->fns[i].cu;
		fn(&die, &cu, o->fns[i].name, arg);
	}
}

/* ---- C++ names -------------------------------------------------------- */

/* The name of a function in a place may hold what the place grammar
 * reads otherwise: "::", template arguments (<...>), an operator's symbol.
 * Balanced <...>, (...) and [...] are part of the name (within (...), <
 * and > are plain), and so is the symbol after the keyword operator at
 * the start of a name's component, the longest of C++'s (operator<<=),
 * except that ++ before a digit is + and an offset (operator++4 is
 * operator+ at +4). */
static const struct {
	const char *sym, *code;	/* the Itanium C++ ABI's code, for event names */
} cxx_ops[] = {
	{ "<=>", "ss" }, { "<<=", "lS" }, { ">>=", "rS" }, { "->*", "pm" },
	{ "()", "cl" }, { "[]", "ix" }, { "<<", "ls" }, { ">>", "rs" },
	{ "<=", "le" }, { ">=", "ge" }, { "==", "eq" }, { "!=", "ne" },
	{ "&&", "aa" }, { "||", "oo" }, { "++", "pp" }, { "--", "mm" },
	{ "+=", "pL" }, { "-=", "mI" }, { "*=", "mL" }, { "/=", "dV" },
	{ "%=", "rM" }, { "^=", "eO" }, { "&=", "aN" }, { "|=", "oR" },
	{ "->", "pt" }, { "+", "pl" }, { "-", "mi" }, { "*", "ml" },
	{ "/", "dv" }, { "%", "rm" }, { "^", "eo" }, { "&", "an" },
	{ "|", "or" }, { "~", "co" }, { "!", "nt" }, { "=", "aS" },
	{ "<", "lt" }, { ">", "gt" }, { ",", "cm" },
};
#define N_CXX_OPS (sizeof cxx_ops / sizeof *cxx_ops)

/* the operator whose symbol starts O (the longest), or -1 */
static int cxx_op(const char *o)
{
	for (size_t k = 0; k < N_CXX_OPS; k++)
		if (!strncmp(o, cxx_ops[k].sym, strlen(cxx_ops[k].sym)))
			return (int)k;
	return -1;
}

/* at S+I: the length of "operator" and its symbol, 0 when that is not an
 * operator's name starting a component */
static size_t operator_at(const char *s, size_t i)
{
	if ((i > 0 && s[i - 1] != ':') || strncmp(s + i, "operator", 8) != 0)
		return 0;
	const char *o = s + i + 8;
	int k = cxx_op(o);
	if (k < 0)
		return 0;
	if (!strcmp(cxx_ops[k].sym, "++") && isdigit((unsigned char)o[2]))
		return 9;
	return 8 + strlen(cxx_ops[k].sym);
}

struct name_scan {
	size_t end;	/* the name is s[0, end) */
	int cxx;	/* it holds brackets or an operator */
	int path;	/* a '.' or '/' outside those: a source file's name */
	size_t last;	/* its last component starts there (after "::") */
};

/* the function name at the start of place S: up to the first '@', '%',
 * ';', '+' or ':' (not of a "::") outside brackets and operators; -1
 * with *bad its offset when a bracket is not balanced, -2 nested too deep */
static int scan_name(const char *s, struct name_scan *r, size_t *bad)
{
	char close[64];
	size_t open_at[64];
	int d = 0, conv = 0;
	memset(r, 0, sizeof *r);
	size_t i = 0;
	while (s[i]) {
		size_t ol = operator_at(s, i);
		if (ol) {
			r->cxx = 1;
			i += ol;
			continue;
		}
		/* a conversion operator's type is its name's, "::" and all
		 * (operator std::basic_string<char>::__sv_type) */
		if (!strncmp(s + i, "operator ", 9) && (i == 0 || s[i - 1] == ':')) {
			r->cxx = 1;
			conv = 1;
			i += 9;
			continue;
		}
		char c = s[i];
		int in_paren = d > 0 && close[d - 1] == ')';
		if (c == ':' && s[i + 1] == ':') {
			i += 2;
			if (!d && !conv)
				r->last = i;
			continue;
		}
		if (c == '(' || c == '[' || (c == '<' && !in_paren)) {
			if (d == 64) {
				*bad = i;
				return -2;
			}
			open_at[d] = i;
			close[d++] = c == '(' ? ')' : c == '[' ? ']' : '>';
			r->cxx = 1;
			i++;
			continue;
		}
		if (c == ')' || c == ']' || (c == '>' && !in_paren)) {
			if (!d || close[d - 1] != c) {
				*bad = i;
				return -1;
			}
			d--;
			i++;
			continue;
		}
		if (!d && strchr("@%;+:", c))
			break;
		if (!d && (c == '.' || c == '/'))
			r->path = 1;
		i++;
	}
	if (d) {
		*bad = open_at[d - 1];
		return -1;
	}
	r->end = i;
	return 0;
}

/* the first ':' of S that is not part of a "::" (C++ scope) or of the
 * name's brackets or operator */
static char *find_colon(const char *s)
{
	struct name_scan ns;
	size_t bad, from = 0;
	if (scan_name(s, &ns, &bad) == 0 && ns.cxx && !ns.path)
		from = ns.end;
	for (const char *p = s + from; (p = strchr(p, ':')) != NULL; p += 2) {
		if (p[1] != ':')
			return (char *)p;
	}
	return NULL;
}

static int int_word(const char *w, size_t l)
{
	static const char *const kw[] = { "unsigned", "signed", "long", "short", "int", "char" };
	for (size_t k = 0; k < 6; k++)
		if (strlen(kw[k]) == l && !strncmp(w, kw[k], l))
			return (int)k;
	return -1;
}

/* NAME spelled for comparing: blanks only between two words, the words of
 * an integer type as clang++ writes them (g++'s "long int" is "long",
 * "long unsigned int" "unsigned long", "unsigned" "unsigned int"); with
 * strip, without template arguments */
static void canon_name(const char *s, char *out, size_t n, int strip)
{
	size_t o = 0;
#define PUT(c) do { if (o + 1 < n) out[o++] = (c); } while (0)
#define WORDCH(c) (isalnum((unsigned char)(c)) || (c) == '_')
	for (size_t i = 0; s[i];) {
		size_t ol = operator_at(s, i);
		if (ol) {
			for (size_t k = 0; k < ol; k++)
				PUT(s[i + k]);
			i += ol;
			continue;
		}
		char c = s[i];
		if (c == ' ' || c == '\t') {
			i++;
			continue;
		}
		if (WORDCH(c)) {
			if (o && WORDCH(out[o - 1]))
				PUT(' ');
			size_t e = i;
			while (WORDCH(s[e]))
				e++;
			if (int_word(s + i, e - i) < 0) {
				for (; i < e; i++)	/* (PUT skips its argument when full) */
					PUT(s[i]);
				continue;
			}
			int cnt[6] = { 0 };
			for (;;) {	/* the run of integer words */
				cnt[int_word(s + i, e - i)]++;
				size_t j = e;
				while (s[j] == ' ' || s[j] == '\t')
					j++;
				size_t f = j;
				while (WORDCH(s[f]))
					f++;
				if (f == j || int_word(s + j, f - j) < 0)
					break;
				i = j;
				e = f;
			}
			i = e;
			const char *t = cnt[5] ? "char" : cnt[3] ? "short" : cnt[2] >= 2 ?
					"long long" : cnt[2] ? "long" : "int";
			const char *sg = cnt[0] ? "unsigned " : cnt[1] && cnt[5] ? "signed " : "";
			for (const char *q = sg; *q; q++)
				PUT(*q);
			for (const char *q = t; *q; q++)
				PUT(*q);
			continue;
		}
		if (c == '<' && strip && o && (WORDCH(out[o - 1]) || out[o - 1] == '>')) {
			int d = 0;	/* template arguments: left out */
			do {
				d += s[i] == '<';
				d -= s[i] == '>';
				i++;
			} while (s[i] && d > 0);
			continue;
		}
		PUT(c);
		i++;
	}
	out[o] = 0;
#undef PUT
#undef WORDCH
}

/* WANT (as written in a place) names HAVE (a function's name): spelled
 * alike (canon_name), or without template arguments when WANT gives none
 * (maxof is every maxof<T>, as gdb has it) */
static int name_eq(const char *want, const char *have)
{
	char w[1024], h[1024], ws[1024];
	canon_name(want, w, sizeof w, 0);
	canon_name(have, h, sizeof h, 0);
	if (!strcmp(w, h))
		return 1;
	canon_name(want, ws, sizeof ws, 1);
	if (strcmp(w, ws) != 0)
		return 0;
	canon_name(have, h, sizeof h, 1);
	return !strcmp(w, h);
}

static int is_cxx(Dwarf_Die *cu)
{
	Dwarf_Attribute at;
	Dwarf_Word lang = 0;
	if (dwarf_formudata(dwarf_attr(cu, DW_AT_language, &at), &lang) != 0)
		return 0;
	/* 0x2a, 0x2b: DW_LANG_C_plus_plus_17 and _20 (DWARF 6) */
	return lang == DW_LANG_C_plus_plus || lang == DW_LANG_C_plus_plus_03 ||
	       lang == DW_LANG_C_plus_plus_11 || lang == DW_LANG_C_plus_plus_14 ||
	       lang == 0x2a || lang == 0x2b;
}

/* the scopes (namespaces, classes) from PARENT down to the DIE at WANT,
 * each "NAME::", appended to out; 1 when found */
static int scope_path(Dwarf_Die *parent, Dwarf_Off want, char *out, size_t n)
{
	Dwarf_Die c, next;
	if (dwarf_child(parent, &c) != 0)
		return 0;
	for (;;) {
		int more = dwarf_siblingof(&c, &next) == 0;
		Dwarf_Off co = dwarf_dieoffset(&c);
		if (co == want)
			return 1;
		int t = dwarf_tag(&c);
		if (want > co && (!more || want < dwarf_dieoffset(&next)) &&
		    (t == DW_TAG_namespace || t == DW_TAG_structure_type ||
		     t == DW_TAG_class_type || t == DW_TAG_union_type)) {
			const char *nm = dwarf_diename(&c);
			size_t l = strlen(out);
			snprintf(out + l, n - l, "%s::", nm ? nm : "(anonymous namespace)");
			return scope_path(&c, want, out, n);
		}
		if (!more)
			return 0;
		c = next;
	}
}

/* a function's name with its namespaces and classes (ns::Cls::method),
 * through its declaration (DW_AT_specification, DW_AT_abstract_origin);
 * the plain name outside C++ */
static const char *qual_name(Dwarf_Die *die, Dwarf_Die *cu, char *out, size_t n)
{
	const char *nm = dwarf_diename(die);
	out[0] = 0;
	if (!nm || !is_cxx(cu))
		return nm;
	Dwarf_Die d = *die, r, cud;
	Dwarf_Attribute at;
	for (int k = 0; k < 8; k++) {
		if (dwarf_attr(&d, DW_AT_abstract_origin, &at) && dwarf_formref_die(&at, &r))
			d = r;
		else if (dwarf_attr(&d, DW_AT_specification, &at) && dwarf_formref_die(&at, &r))
			d = r;
		else
			break;
	}
	if (!dwarf_diecu(&d, &cud, NULL, NULL) ||
	    !scope_path(&cud, dwarf_dieoffset(&d), out, n)) {
		out[0] = 0;
		return nm;
	}
	size_t l = strlen(out);
	snprintf(out + l, n - l, "%s", nm);
	return out;
}

struct match {
	const char *func;	/* glob or name */
	const char *src;	/* or NULL */
	struct insts *out;
	int glob;
	int last;		/* where func's last component starts (-1: not yet known) */
};

static void match_fn(Dwarf_Die *die, Dwarf_Die *cu, const char *name, void *arg)
{
	struct match *m = arg;
	Dwarf_Addr pc;
	char qn[1024];
	if (!m->glob) {
		if (m->last < 0) {
			struct name_scan ns;
			size_t bad;
			m->last = scan_name(m->func, &ns, &bad) == 0 ? (int)ns.last : 0;
		}
		/* names compared alike begin alike (name_eq: blanks and int
		 * words inside) */
		if (name[0] != m->func[m->last])
			return;
	}
	if (entry_pc(die, &pc) != 0)
		return;
	/* C++: a qualified name (ns::f) is compared whole, a plain one
	 * with the function's own name (name_eq: template arguments) */
	if (m->glob) {
		if (fnmatch(m->func, name, 0) != 0 &&
		    (!is_cxx(cu) || fnmatch(m->func, qual_name(die, cu, qn, sizeof qn), 0) != 0))
			return;
	} else {
		size_t last = (size_t)m->last;
		if (!name_eq(m->func + last, name))
			return;
		/* ::f is f outside any namespace or class */
		const char *want = !strncmp(m->func, "::", 2) ? m->func + 2 : m->func;
		if (last && !name_eq(want, qual_name(die, cu, qn, sizeof qn)))
			return;
	}
	if (m->src) {
		const char *f = decl_file(die, cu);
		if (!f || !tail_match(f, m->src))
			return;
	}
	push_inst(m->out, die, cu, dwarf_tag(die) == DW_TAG_inlined_subroutine);
}

/*
 * A function the debug information knows by another name: glibc's
 * malloc is an alias of __libc_malloc, which alone has a DIE.  The
 * symbol table's address of name, if a subprogram starts there.
 */
static void find_alias(struct dw_obj *o, const char *name, struct insts *s)
{
	const struct elf_sym *sym = o->has_elf ? elf_find(&o->elf, name) : NULL;
	if (!sym || !sym->value)
		return;
	Dwarf_Addr bias;
	Dwarf_Die *cu = dwfl_module_addrdie(o->mod, sym->value + o->bias, &bias);
	if (!cu)
		return;
	Dwarf_Die *sc;
	int k = dwarf_getscopes(cu, sym->value, &sc);
	for (int j = 0; j < k; j++) {
		Dwarf_Addr pc;
		if (dwarf_tag(&sc[j]) == DW_TAG_subprogram && entry_pc(&sc[j], &pc) == 0 &&
		    pc == sym->value) {
			push_inst(s, &sc[j], cu, 0);
			s->v[s->n - 1].alias = 1;
			break;
		}
	}
	if (k > 0)
		free(sc);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int dw_list_funcs(struct dw_obj *o, const char *glob, FILE *f)
{
	struct insts s = { 0 };
	struct match m = { glob ? glob : "*", NULL, &s, 1, -1 };
	walk_all(o, match_fn, &m);
	char **names = malloc((s.n + 1) * sizeof *names);
	size_t n = 0;
	for (size_t i = 0; i < s.n; i++)
		if (!s.v[i].inlined) {
			char qn[1024];
			names[n++] = strdup(qual_name(&s.v[i].die, &s.v[i].cu, qn, sizeof qn));
		}
	qsort(names, n, sizeof *names, cmp_str);
	for (size_t i = 0; i < n; i++)
		if (i == 0 || strcmp(names[i], names[i - 1]))
			fprintf(f, "%s\n", names[i]);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	free(s.v);
	return 0;
}

/* ---- places ---------------------------------------------------------- */

struct place {
	char func[1024], src[1024];
	int has_line, rel;	/* SRC:LINE (rel 0) or FUNC:RELLINE (rel 1) */
	long line;
	int has_off;
	unsigned long off;
	int ret;
	int skip_prologue;	/* FUNC: past the prologue (fetches given) */
	char lazy[256];		/* ;PATTERN, or "" */
	int lazy_off;		/* its offset in the definition */
};

/* FUNC[@SRC][:RELLINE|+OFFS|%return] or SRC:LINE */
/* s without its quotes and escapes (perf probe's), in place */
static void unquote(char *s)
{
	char q = 0, *d = s;
	for (; *s; s++) {
		if (q && *s == q)
			q = 0;
		else if (!q && (*s == '"' || *s == '\''))
			q = *s;
		else if (!q && *s == '\\' && s[1])
			*d++ = *++s;
		else
			*d++ = *s;
	}
	*d = 0;
}

/* The quoted or escaped name a place begins with (`"ns::operator new":2`,
 * `f\@x`): its length in buf, up to the first separator outside quotes
 * (';' '@' '+' '%', a ':' not of a '::'); 0 when it has no quote. */
static size_t quoted_name(const char *buf)
{
	char q = 0;
	int any = 0;
	size_t i;
	for (i = 0; buf[i]; i++) {
		if (q) {
			if (buf[i] == q)
				q = 0;
		} else if (buf[i] == '"' || buf[i] == '\'') {
			q = buf[i];
			any = 1;
		} else if (buf[i] == '\\' && buf[i + 1]) {
			i++;
			any = 1;
		} else if (strchr(";@+%", buf[i]) ||
			   (buf[i] == ':' && buf[i + 1] != ':' && (!i || buf[i - 1] != ':'))) {
			break;
		}
	}
	return any ? i : 0;
}

static int parse_place(const char *p, struct place *pl, struct dw_error *err,
		       int base)
{
	memset(pl, 0, sizeof *pl);
	char buf[1024];
	snprintf(buf, sizeof buf, "%s", p);
	/* a C++ name with brackets or an operator (scan_name), or one in
	 * quotes, stands aside while the rest is read: x's in its place,
	 * the same length */
	struct name_scan ns;
	size_t bad;
	char cxx_name[sizeof pl->func] = "";
	size_t open = 0;
	char q = 0;
	for (size_t i = 0; buf[i] && (q || buf[i] != ';'); i++) {
		if (q) {
			if (buf[i] == q)
				q = 0;
		} else if (buf[i] == '"' || buf[i] == '\'') {
			q = buf[i];
			open = i;
		} else if (buf[i] == '\\' && buf[i + 1]) {
			i++;
		}
	}
	if (q) {
		seterr(err, base + (int)open, "Unclosed quote");
		return -1;
	}
	size_t qn = quoted_name(buf);
	if (qn) {
		if (qn >= sizeof cxx_name) {
			seterr(err, base, "Name too long");
			return -1;
		}
		memcpy(cxx_name, buf, qn);
		cxx_name[qn] = 0;
		unquote(cxx_name);
		if (!cxx_name[0]) {
			seterr(err, base, "Invalid place");
			return -1;
		}
		memset(buf, 'x', qn);
	}
	int sc = scan_name(buf, &ns, &bad);
	if (sc != 0) {
		if (sc == -2)
			seterr(err, base + (int)bad, "Brackets nested too deep in the name");
		else
			seterr(err, base + (int)bad, "Unbalanced '%c' in the name", buf[bad]);
		return -1;
	}
	if (ns.cxx && !ns.path) {
		if (ns.end >= sizeof cxx_name) {
			seterr(err, base, "Name too long");
			return -1;
		}
		memcpy(cxx_name, buf, ns.end);
		cxx_name[ns.end] = 0;
		memset(buf, 'x', ns.end);
	}
	char *semi = strchr(buf, ';');
	if (semi) {
		*semi = 0;
		snprintf(pl->lazy, sizeof pl->lazy, "%s", semi + 1);
		pl->lazy_off = base + (int)(semi + 1 - buf);
		if (!pl->lazy[0]) {
			seterr(err, pl->lazy_off, "Empty line pattern");
			return -1;
		}
		if (!strchr(buf, '@') && !find_colon(buf) && strpbrk(qn ? cxx_name : buf, "./")) {
			snprintf(pl->src, sizeof pl->src, "%s", qn ? cxx_name : buf);
			return 0;
		}
	}
	size_t n = strlen(buf);
	if (n > 7 && !strcmp(buf + n - 7, "%return")) {
		pl->ret = 1;
		buf[n - 7] = 0;
	}
	char *colon = find_colon(buf);
	char *at = strchr(buf, '@');
	if (colon) {
		*colon = 0;
		char *end;
		pl->line = strtol(colon + 1, &end, 10);
		if (end == colon + 1 || *end || pl->line < 0) {
			seterr(err, base + (int)(colon + 1 - buf), "Invalid line number");
			return -1;
		}
		pl->has_line = 1;
		if (!at && strpbrk(qn ? cxx_name : buf, "./")) {
			snprintf(pl->src, sizeof pl->src, "%s", qn ? cxx_name : buf);
			return pl->ret ? (seterr(err, base, "%%return needs a function"), -1) : 0;
		}
		pl->rel = 1;
	}
	if (at) {
		*at = 0;
		snprintf(pl->src, sizeof pl->src, "%s", at + 1);
	}
	char *plus = strchr(buf, '+');
	if (plus) {
		*plus = 0;
		char *end;
		pl->off = strtoul(plus + 1, &end, 0);
		if (end == plus + 1 || *end) {
			seterr(err, base + (int)(plus + 1 - buf), "Invalid offset");
			return -1;
		}
		pl->has_off = 1;
	}
	if (!buf[0]) {
		seterr(err, base, "Invalid place");
		return -1;
	}
	snprintf(pl->func, sizeof pl->func, "%s", cxx_name[0] ? cxx_name : buf);
	unquote(pl->src);	/* a line pattern is taken as written */
	return 0;
}

struct addrs {
	uint64_t *v;
	size_t n, cap;
};

static void push_addr(struct addrs *a, uint64_t v)
{
	for (size_t i = 0; i < a->n; i++)
		if (a->v[i] == v)
			return;
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 16;
		a->v = realloc(a->v, a->cap * sizeof *a->v);
	}
	a->v[a->n++] = v;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* a line table's file name made absolute with the CU's DW_AT_comp_dir */
static const char *full_path(Dwarf_Die *cu, const char *f)
{
	static char buf[4096];
	Dwarf_Attribute at;
	const char *dir;
	/* a relative DW_AT_comp_dir (glibc's "./libio") cannot make it
	 * absolute, and libdw has joined it already */
	if (!f || f[0] == '/' ||
	    !(dir = dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &at))) || dir[0] != '/')
		return f;
	snprintf(buf, sizeof buf, "%s/%s", dir, f);
	return buf;
}

/* does line LN of FILE match the lazy PATTERN (a glob over the whole
 * line, blanks ignored in both, as perf's lazy matching)? */
static void strip_blanks(char *d, const char *s, size_t n)
{
	size_t k = 0;
	for (; *s && k + 1 < n; s++)
		if (*s != ' ' && *s != '\t' && *s != '\n' && *s != '\r')
			d[k++] = *s;
	d[k] = 0;
}

static char **src_lines;
static int src_nlines;

/* FILE's lines, read once (the last file asked for is kept) */
static void load_source(const char *file)
{
	static char cached[4096];
	char **lines = src_lines;
	int nlines = src_nlines;
	if (strcmp(cached, file)) {
		for (int i = 0; i < nlines; i++)
			free(lines[i]);
		free(lines);
		lines = NULL;
		nlines = 0;
		snprintf(cached, sizeof cached, "%s", file);
		/* a regular file only: the line table may name a device or
		 * a FIFO (bad DWARF), which would never end or block */
		struct stat st;
		int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		FILE *f = NULL;
		if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
				st.st_size > (64 << 20) || !(f = fdopen(fd, "r"))))
			close(fd);
		char buf[4096];
		while (f && fgets(buf, sizeof buf, f)) {
			lines = realloc(lines, (size_t)(nlines + 1) * sizeof *lines);
			lines[nlines++] = strdup(buf);
		}
		if (f)
			fclose(f);
	}
	src_lines = lines;
	src_nlines = nlines;
}

static const char *source_line(const char *file, int ln)
{
	load_source(file);
	return ln >= 1 && ln <= src_nlines ? src_lines[ln - 1] : "";
}

/* the last source file a ;PATTERN could not read ("" if none) */
static char lazy_unread[1024];

static int lazy_match(const char *file, int ln, const char *pattern)
{
	load_source(file);
	if (!src_nlines)
		snprintf(lazy_unread, sizeof lazy_unread, "%s", file);
	if (ln < 1 || ln > src_nlines)
		return 0;
	char l[4096], p[512];
	strip_blanks(l, src_lines[ln - 1], sizeof l);
	strip_blanks(p, pattern, sizeof p);
	return fnmatch(p, l, 0) == 0;
}

/* row i of a line table: its address, line, is_stmt, end_sequence, file */
struct line_row {
	Dwarf_Addr addr;
	int line;
	bool stmt, endseq;
	const char *file;
};

static void line_row(Dwarf_Lines *lines, size_t i, struct line_row *r)
{
	Dwarf_Line *l = dwarf_onesrcline(lines, i);
	r->addr = 0;
	r->line = 0;
	r->stmt = r->endseq = false;
	dwarf_lineaddr(l, &r->addr);
	dwarf_lineno(l, &r->line);
	dwarf_linebeginstatement(l, &r->stmt);
	dwarf_lineendsequence(l, &r->endseq);
	r->file = dwarf_linesrc(l, NULL, NULL);
}

/* every address in CU where LINE (or a line matching LAZY) of a file
 * matching SRC begins (is_stmt, the previous row of its sequence on
 * another line); within DIE if set */
static void line_addrs(Dwarf_Die *cu, const char *src, long line,
		       const char *lazy, Dwarf_Die *within, struct addrs *out)
{
	Dwarf_Lines *lines;
	size_t n;
	if (dwarf_getsrclines(cu, &lines, &n) != 0)
		return;
	int prev_line = -1, prev_in = 0;
	const char *prev_file = NULL;
	for (size_t i = 0; i < n; i++) {
		struct line_row row;
		line_row(lines, i, &row);
		Dwarf_Addr a = row.addr;
		int ln = row.line;
		bool stmt = row.stmt;
		const char *f = row.file;
		if (row.endseq) {
			prev_line = -1;
			prev_file = NULL;
			continue;
		}
		if (!stmt)
			continue;
		/* within a function, a line begins at its first row there too
		 * (the function before may end on the same line: g++'s static
		 * initializers) */
		int in = !within || dwarf_haspc(within, a) > 0;
		int begins = ln != prev_line || !prev_file || !f || strcmp(f, prev_file) ||
			     (within && !prev_in);
		prev_line = ln;
		prev_file = f;
		prev_in = in;
		if (!begins || !f || !tail_match(f, src))
			continue;
		if (lazy ? !lazy_match(full_path(cu, f), ln, lazy) : ln != line)
			continue;
		if (!in)
			continue;
		push_addr(out, a);
	}
}

static int optimized_cu(Dwarf_Die *cu)
{
	Dwarf_Attribute at;
	const char *p = dwarf_formstring(dwarf_attr(cu, DW_AT_producer, &at));
	if (!p)
		return 0;
	const char *o = strstr(p, "-O");
	return o && o[2] != '0';
}

/* the address past a concrete function's prologue (perf's choice, made
 * when there are variables to fetch and the code is not optimized): the
 * line table's prologue_end, else its second line (or column) */
static uint64_t post_prologue(Dwarf_Die *fn, Dwarf_Die *cu, uint64_t entry)
{
	Dwarf_Lines *lines;
	size_t n;
	if (optimized_cu(cu) || dwarf_getsrclines(cu, &lines, &n) != 0)
		return entry;
	/* the first statement row after the entry's at another line, or at
	 * another column of it (a function on one line: its body) */
	int first_line = -1, first_col = -1;
	for (size_t i = 0; i < n; i++) {
		Dwarf_Line *l = dwarf_onesrcline(lines, i);
		Dwarf_Addr a;
		int ln, col = 0;
		bool stmt, pe;
		dwarf_lineaddr(l, &a);
		if (a < entry || dwarf_haspc(fn, a) <= 0)
			continue;
		dwarf_lineno(l, &ln);
		dwarf_linecol(l, &col);
		dwarf_linebeginstatement(l, &stmt);
		if (dwarf_lineprologueend(l, &pe) == 0 && pe)
			return a;
		if (!stmt)
			continue;
		if (first_line < 0 && a == entry) {
			first_line = ln;
			first_col = col;
			continue;
		}
		if (a > entry && (ln != first_line || (col != first_col && col > 0 && first_col > 0)))
			return a;
	}
	return entry;
}

/* a resolved address: where, and in which function instance */
struct site {
	uint64_t addr;
	struct inst in;
};

/* no line matched a ;PATTERN: because its source could not be read
 * (Debian's -dbg packages have no sources), or none matches */
static void no_lazy_match(struct dw_error *err, const struct place *pl, const char *what)
{
	if (lazy_unread[0])
		seterr(err, pl->lazy_off, "No line of %s matches %s: its source %.120s cannot be read",
		       what, pl->lazy, lazy_unread);
	else
		seterr(err, pl->lazy_off, "No line of %s matches %s", what, pl->lazy);
}

static int resolve_place(struct dw_obj *o, const struct place *pl,
			 struct site **sites, struct dw_error *err, int base)
{
	struct insts s = { 0 };
	struct addrs a = { 0 };
	size_t ns = 0;
	*sites = NULL;
	lazy_unread[0] = 0;
	if (!pl->func[0]) {
		/* SRC:LINE over every CU */
		Dwarf_Die *cu = NULL;
		Dwarf_Addr b;
		int file_seen = 0;
		while ((cu = dwfl_module_nextcu(o->mod, cu, &b)) != NULL) {
			size_t before = a.n;
			line_addrs(cu, pl->src, pl->line, pl->lazy[0] ? pl->lazy : NULL,
				   NULL, &a);
			Dwarf_Files *files;
			size_t nf;
			if (dwarf_getsrcfiles(cu, &files, &nf) == 0)
				for (size_t i = 0; i < nf; i++) {
					const char *f = dwarf_filesrc(files, i, NULL, NULL);
					if (f && tail_match(f, pl->src))
						file_seen = 1;
				}
			(void)before;
		}
		if (!file_seen) {
			/* a function whose name looks like a file's (g++'s
			 * static initializer _GLOBAL__sub_I_eh_alloc.cc):
			 * FUNC:RELLINE, FUNC;PATTERN */
			struct place f = *pl;
			struct dw_error e2 = { "", 0 };
			snprintf(f.func, sizeof f.func, "%s", pl->src);
			f.src[0] = 0;
			f.rel = 1;
			free(a.v);
			int n = strlen(pl->src) < sizeof f.func ?
				resolve_place(o, &f, sites, &e2, base) : -1;
			if (n >= 0)
				return n;
			if (e2.msg[0] && strncmp(e2.msg, "Function ", 9))
				*err = e2;	/* it is one, with another error */
			else
				seterr(err, base, "Source file is not found");
			return -1;
		}
		if (!a.n && pl->lazy[0]) {
			no_lazy_match(err, pl, pl->src);
			return -1;
		}
		if (!a.n) {
			seterr(err, base + (int)strlen(pl->src) + 1,
			       "No code at line %ld of %s", pl->line, pl->src);
			return -1;
		}
		qsort(a.v, a.n, sizeof *a.v, cmp_u64);
		*sites = calloc(a.n, sizeof **sites);
		for (size_t i = 0; i < a.n; i++) {
			(*sites)[ns].addr = a.v[i];
			/* the innermost function instance containing it */
			Dwarf_Die *cu2 = NULL;
			while ((cu2 = dwfl_module_nextcu(o->mod, cu2, &b)) != NULL) {
				Dwarf_Die *sc;
				int k = dwarf_getscopes(cu2, a.v[i], &sc);
				if (k <= 0)
					continue;
				for (int j = 0; j < k; j++) {
					int t = dwarf_tag(&sc[j]);
					if (t == DW_TAG_subprogram || t == DW_TAG_inlined_subroutine) {
						(*sites)[ns].in.die = sc[j];
						(*sites)[ns].in.cu = *cu2;
						(*sites)[ns].in.inlined = t != DW_TAG_subprogram;
						break;
					}
				}
				free(sc);
				break;
			}
			ns++;
		}
		free(a.v);
		return (int)ns;
	}
	struct match m = { pl->func, pl->src[0] ? pl->src : NULL, &s, 0, -1 };
	walk_all(o, match_fn, &m);
	if (!s.n && !pl->src[0])
		find_alias(o, pl->func, &s);
	if (!s.n) {
		/* a symbol whose code the debug information does not describe:
		 * assembly, or an IFUNC (memchr: its resolver's address) */
		int sym = !pl->src[0] && o->has_elf && elf_find(&o->elf, pl->func);
		seterr(err, base, "Function %s is not found%s%s%s", pl->func,
		       pl->src[0] ? " in " : "", pl->src,
		       sym ? " (a symbol without debug information: assembly or an IFUNC; "
			     "its registers and $argN can be read)" : "");
		return -1;
	}
	*sites = calloc(1, sizeof **sites);
	size_t cap = 1;
	for (size_t i = 0; i < s.n; i++) {
		struct inst *in = &s.v[i];
		Dwarf_Addr entry;
		entry_pc(&in->die, &entry);
		a.n = 0;
		if (pl->has_line || pl->lazy[0]) {
			int dl = 0;
			dwarf_decl_line(&in->die, &dl);
			const char *df = decl_file(&in->die, &in->cu);
			if (df)
				line_addrs(&in->cu, df, dl + pl->line,
					   pl->lazy[0] ? pl->lazy : NULL, &in->die, &a);
			/* line 0 is the entry row, as -L numbers it, where the
			 * declaration's line has no row of its own (gcc -O2
			 * gives the entry the first statement's line) */
			if (!a.n && !pl->lazy[0] && pl->line == 0)
				push_addr(&a, entry);
		} else if (pl->has_off) {
			if (in->inlined)
				continue;
			push_addr(&a, entry + pl->off);
		} else if (pl->ret) {
			if (in->inlined)
				continue;
			push_addr(&a, entry);
		} else {
			push_addr(&a, in->inlined || !pl->skip_prologue ? entry
				  : post_prologue(&in->die, &in->cu, entry));
		}
		for (size_t j = 0; j < a.n; j++) {
			/* one probe an address: a template's or an inline
			 * function's definition in every CU that used it (the
			 * linker kept one copy) is one place, not one a CU */
			size_t k = 0;
			while (k < ns && (*sites)[k].addr != a.v[j])
				k++;
			if (k < ns)
				continue;
			if (ns == cap) {
				cap *= 2;
				*sites = realloc(*sites, cap * sizeof **sites);
			}
			(*sites)[ns].addr = a.v[j];
			(*sites)[ns].in = *in;
			ns++;
		}
	}
	free(a.v);
	free(s.v);
	if (!ns) {
		free(*sites);
		*sites = NULL;
		if (pl->lazy[0])
			no_lazy_match(err, pl, pl->func);
		else if (pl->has_line)
			seterr(err, base + (int)strlen(pl->func) +
			       (pl->src[0] ? (int)strlen(pl->src) + 1 : 0) + 1,
			       "No code at line %ld of %s", pl->line, pl->func);
		else if (pl->ret || pl->has_off)
			seterr(err, base, "Function %s is only inlined: %s needs a copy that is called",
			       pl->func, pl->ret ? "%return" : "+OFFS");
		else
			seterr(err, base, "No place for %s", pl->func);
		return -1;
	}
	return (int)ns;
}

/* ---- variables ------------------------------------------------------- */

static const char *const regname[16] = {
	"%ax", "%dx", "%cx", "%bx", "%si", "%di", "%bp", "%sp",
	"%r8", "%r9", "%r10", "%r11", "%r12", "%r13", "%r14", "%r15",
};

/* where a value is: in a register, or in memory at an address given as
 * base fetch (a register's value, or a pointer fetch) plus offset, or at a
 * symbol plus offset */
enum vkind { V_REG, V_MEM, V_SYM, V_IMM, V_PIECES };
/* a piece of a value (DW_OP_piece): SIZE bytes at OFF of the value, in a
 * register, in memory, or a constant; or optimized out */
struct piece {
	long off, size;
	int present;
	struct {
		enum vkind k;
		char base[1024];
		long off;
	} v;
};
#define MAXPIECES 8
struct val {
	enum vkind k;
	char base[1024];	/* V_REG: the register or $argN; V_MEM: what
				 * holds the address; V_SYM: @OBJ:SYM */
	long off;
	int npieces;		/* V_PIECES: the pieces */
	struct piece pieces[MAXPIECES];
};

static void render(const struct val *v, char *out, size_t n)
{
	if (v->k == V_REG || v->k == V_IMM)
		snprintf(out, n, "%s", v->base);
	else if (v->k == V_MEM)
		snprintf(out, n, "%+ld(%s)", v->off, v->base);
	else if (v->off)
		snprintf(out, n, "%s%+ld", v->base, v->off);
	else
		snprintf(out, n, "%s", v->base);
}

/* the pointer held at V, dereferenced with offset OFF */
static void deref(struct val *v, long off)
{
	char r[1024];
	render(v, r, sizeof r);
	v->k = V_MEM;
	snprintf(v->base, sizeof v->base, "%s", r);
	v->off = off;
}

/* the concrete function at PC among the CU's: libdw's scopes of an
 * inlined copy go on through its abstract instance, not the function the
 * copy is in, whose frame it uses */
static int function_at(Dwarf_Die *cu, uint64_t pc, Dwarf_Die *fn)
{
	Dwarf_Die c;
	if (dwarf_child(cu, &c) != 0)
		return -1;
	do {
		if (dwarf_tag(&c) == DW_TAG_subprogram && dwarf_hasattr(&c, DW_AT_frame_base) &&
		    dwarf_haspc(&c, pc) > 0) {
			*fn = c;
			return 0;
		}
	} while (dwarf_siblingof(&c, &c) == 0);
	return -1;
}

static int frame_base(struct dw_obj *o, Dwarf_Die *scopes, int ns,
		      uint64_t pc, int *reg, long *off)
{
	Dwarf_Die fn;
	for (int i = 0; i < ns; i++) {
		Dwarf_Die *f = &scopes[i];
		if (dwarf_tag(f) != DW_TAG_subprogram && dwarf_tag(f) != DW_TAG_compile_unit)
			continue;
		if (dwarf_tag(f) == DW_TAG_compile_unit) {
			if (function_at(f, pc, &fn) != 0)
				return -1;
			f = &fn;
		}
		Dwarf_Attribute at;
		Dwarf_Op *ops;
		size_t nops;
		if (!dwarf_attr(f, DW_AT_frame_base, &at))
			continue;	/* an abstract instance */
		if (dwarf_getlocation_addr(&at, pc, &ops, &nops, 1) != 1 || nops != 1)
			return -1;
		uint8_t a = ops[0].atom;
		if (a >= DW_OP_reg0 && a <= DW_OP_reg15) {
			*reg = a - DW_OP_reg0;
			*off = 0;
			return 0;
		}
		if (a >= DW_OP_breg0 && a <= DW_OP_breg15) {
			*reg = a - DW_OP_breg0;
			*off = (long)ops[0].number;
			return 0;
		}
		if (a == DW_OP_call_frame_cfa) {
			Dwarf_Addr bias;
			Dwarf_CFI *cfi = dwfl_module_eh_cfi(o->mod, &bias);
			Dwarf_Frame *fr;
			if (!cfi)
				cfi = dwfl_module_dwarf_cfi(o->mod, &bias);
			if (!cfi || dwarf_cfi_addrframe(cfi, pc + o->bias - bias, &fr) != 0)
				return -1;
			int r = -1;
			if (dwarf_frame_cfa(fr, &ops, &nops) == 0 && nops == 1) {
				if (ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg15) {
					*reg = ops[0].atom - DW_OP_breg0;
					*off = (long)ops[0].number;
					r = 0;
				} else if (ops[0].atom == DW_OP_bregx && ops[0].number <= 15) {
					*reg = (int)ops[0].number;
					*off = (long)ops[0].number2;
					r = 0;
				}
			}
			free(fr);
			return r;
		}
		return -1;
	}
	return -1;
}

/* a symbol for a global at link-time address A: @OBJ:SYM+OFF */
static int global_val(struct dw_obj *o, uint64_t a, struct val *v)
{
	const struct elf_sym *s = o->has_elf ? elf_lookup(&o->elf, a) : NULL;
	if (!s)
		return -1;
	const char *base = strrchr(o->name, '/');
	base = base ? base + 1 : o->name;
	v->k = V_SYM;
	snprintf(v->base, sizeof v->base, "@%s:%s", base, s->name);
	v->off = (long)(a - s->value);
	return 0;
}

static int type_of(Dwarf_Die *die, Dwarf_Die *t);

/* the DWARF numbers of the registers of the first six integer arguments
 * (SysV x86-64): $arg1..$arg6 of the raw grammar */
static const int argreg[6] = { 5, 4, 1, 2, 8, 9 };

static int arg_of_reg(int r)
{
	for (int k = 0; k < 6; k++)
		if (argreg[k] == r)
			return k + 1;
	return 0;
}

/* the concrete function whose code holds the probe (the innermost
 * DW_TAG_subprogram of the scopes) */
static Dwarf_Die *subprogram_of(Dwarf_Die *scopes, int ns)
{
	for (int i = 0; i < ns; i++)
		if (dwarf_tag(&scopes[i]) == DW_TAG_subprogram)
			return &scopes[i];
	return NULL;
}

/* DW_OP_entry_value's operand when it is one register: its number, else -1 */
static int entry_value_reg(Dwarf_Attribute *at, Dwarf_Op *op)
{
	Dwarf_Attribute ea;
	Dwarf_Op *e;
	size_t en;
	if (dwarf_getlocation_attr(at, op, &ea) != 0 || dwarf_getlocation(&ea, &e, &en) != 0 ||
	    en != 1)
		return -1;
	if (e[0].atom >= DW_OP_reg0 && e[0].atom <= DW_OP_reg31)
		return e[0].atom - DW_OP_reg0;
	if (e[0].atom == DW_OP_regx)
		return (int)e[0].number;
	return -1;
}

/* where a probe reads its fetches: its address, and whether at the
 * function's return (the address is then the entry: parameters are read
 * as they were there, through $argN, saved at the entry) */
struct where {
	uint64_t pc;
	int ret;
};

static void set_reg(struct val *v, int r)
{
	v->k = V_REG;
	v->npieces = 0;
	v->off = 0;
	snprintf(v->base, sizeof v->base, "%s", regname[r]);
}

/* one location expression without pieces, ops[0..nops) */
static int eval_ops(struct dw_obj *o, Dwarf_Attribute *at, Dwarf_Op *ops, size_t nops,
		    Dwarf_Die *scopes, int ns, const struct where *w, struct val *v,
		    char *why, size_t wn)
{
	v->npieces = 0;
	uint8_t a = ops[0].atom;
	/* a value computed in place: a constant, or a register's value */
	if (nops == 2 && ops[1].atom == DW_OP_stack_value) {
		long long k;
		int is_k = 1;
		if (a >= DW_OP_lit0 && a <= DW_OP_lit31)
			k = a - DW_OP_lit0;
		else if (a == DW_OP_const1u || a == DW_OP_const2u || a == DW_OP_const4u ||
			 a == DW_OP_const8u || a == DW_OP_constu)
			k = (long long)ops[0].number;
		else if (a == DW_OP_const1s || a == DW_OP_const2s || a == DW_OP_const4s ||
			 a == DW_OP_const8s || a == DW_OP_consts)
			k = (long long)(int64_t)ops[0].number;
		else
			is_k = 0;
		if (is_k) {
			v->k = V_IMM;
			snprintf(v->base, sizeof v->base, "\\%lld", k);
			v->off = 0;
			return 0;
		}
		if (a >= DW_OP_breg0 && a <= DW_OP_breg15 && ops[0].number == 0) {
			set_reg(v, a - DW_OP_breg0);
			return 0;
		}
	}
	/* the value a register had at the entry of the function: that
	 * register at the entry itself, $argN at a return probe */
	if ((a == DW_OP_entry_value || a == DW_OP_GNU_entry_value) &&
	    (nops == 1 || (nops == 2 && ops[1].atom == DW_OP_stack_value))) {
		int r = entry_value_reg(at, &ops[0]);
		Dwarf_Die *fn = subprogram_of(scopes, ns);
		Dwarf_Addr entry;
		const char *fname = fn ? dwarf_diename(fn) : NULL;
		if (r < 0 || r > 15) {
			snprintf(why, wn, "is only known by an entry value that cannot be expressed");
			return -1;
		}
		if (w->ret && arg_of_reg(r)) {
			v->k = V_REG;
			v->off = 0;
			snprintf(v->base, sizeof v->base, "$arg%d", arg_of_reg(r));
			return 0;
		}
		if (fn && entry_pc(fn, &entry) == 0 && entry == w->pc) {
			set_reg(v, r);
			return 0;
		}
		snprintf(why, wn, "is only known by its entry value (%s at the entry of %s%s%s%s)",
			 regname[r], fname ? fname : "its function",
			 arg_of_reg(r) && fname ? "; " : "", arg_of_reg(r) && fname ? fname : "",
			 arg_of_reg(r) && fname ? "%return reads it" : "");
		return -1;
	}
	if (nops != 1) {
		snprintf(why, wn, "has an unsupported location expression");
		return -1;
	}
	if (a >= DW_OP_reg0 && a <= DW_OP_reg15) {
		set_reg(v, a - DW_OP_reg0);
		return 0;
	}
	if (a >= DW_OP_breg0 && a <= DW_OP_breg15) {
		v->k = V_MEM;
		snprintf(v->base, sizeof v->base, "%s", regname[a - DW_OP_breg0]);
		v->off = (long)ops[0].number;
		return 0;
	}
	if (a == DW_OP_fbreg) {
		int reg;
		long off;
		if (frame_base(o, scopes, ns, w->pc, &reg, &off) != 0 || reg > 15) {
			snprintf(why, wn, "has a frame base that cannot be expressed");
			return -1;
		}
		if (__builtin_add_overflow(off, (long)ops[0].number, &v->off)) {
			snprintf(why, wn, "has an offset out of range");
			return -1;
		}
		v->k = V_MEM;
		snprintf(v->base, sizeof v->base, "%s", regname[reg]);
		return 0;
	}
	if (a == DW_OP_addrx || a == DW_OP_GNU_addr_index) {
		Dwarf_Attribute ia;
		Dwarf_Addr ad;
		if (dwarf_getlocation_attr(at, &ops[0], &ia) == 0 &&
		    dwarf_formaddr(&ia, &ad) == 0 && global_val(o, ad, v) == 0)
			return 0;
		snprintf(why, wn, "is at an address no symbol covers");
		return -1;
	}
	if (a == DW_OP_addr) {
		if (global_val(o, ops[0].number, v) == 0)
			return 0;
		snprintf(why, wn, "is at an address no symbol covers");
		return -1;
	}
	snprintf(why, wn, "has an unsupported location expression");
	return -1;
}

/* a register value as the argument it is at the entry ($argN); -1 if
 * the register carries no argument */
static int reg_to_arg(struct val *v)
{
	for (int r = 0; r < 16; r++)
		if (!strcmp(v->base, regname[r]) && arg_of_reg(r)) {
			v->k = V_REG;
			v->npieces = 0;
			v->off = 0;
			snprintf(v->base, sizeof v->base, "$arg%d", arg_of_reg(r));
			return 0;
		}
	return -1;
}

/* are the members of struct or union T (peeled) all integers, enums or
 * pointers (arrays of them), each at an offset of its alignment? */
static int integer_members_left;	/* calls int_regs allows (bad DWARF: many
					 * members of the struct they are in) */
static int integer_members(Dwarf_Die *t, int depth)
{
	Dwarf_Die c, mt;
	if (depth > 4 || --integer_members_left < 0)
		return 0;
	if (dwarf_child(t, &c) != 0)
		return 1;
	do {
		if (dwarf_tag(&c) != DW_TAG_member)
			continue;
		Dwarf_Attribute at;
		Dwarf_Word off = 0, sz = 0, enc = 0;
		if (dwarf_hasattr(&c, DW_AT_bit_size) || type_of(&c, &mt) != 0)
			return 0;
		dwarf_formudata(dwarf_attr(&c, DW_AT_data_member_location, &at), &off);
		for (int k = 0; dwarf_tag(&mt) == DW_TAG_array_type; k++)
			if (k == 16 || type_of(&mt, &mt) != 0)
				return 0;	/* bad DWARF: an array of itself */
		int tag = dwarf_tag(&mt);
		if (tag == DW_TAG_structure_type || tag == DW_TAG_union_type) {
			if (!integer_members(&mt, depth + 1))
				return 0;
			continue;
		}
		if (dwarf_aggregate_size(&mt, &sz) != 0 || sz == 0 || sz > 8 || off % sz)
			return 0;
		if (tag == DW_TAG_base_type) {
			dwarf_formudata(dwarf_attr(&mt, DW_AT_encoding, &at), &enc);
			if (enc == DW_ATE_float || enc == DW_ATE_complex_float)
				return 0;
		} else if (tag != DW_TAG_pointer_type && tag != DW_TAG_enumeration_type)
			return 0;
	} while (dwarf_siblingof(&c, &c) == 0);
	return 1;
}

/* how many integer registers parameter VAR takes (SysV x86-64): one for
 * an integer, enum or pointer of at most 8 bytes, one per eightbyte for
 * a C struct of at most 16 bytes of those; 0 for anything else (a float,
 * a bigger or mixed struct, a C++ class, which may go by reference) */
static int int_regs(Dwarf_Die *var, int cxx)
{
	Dwarf_Die t;
	Dwarf_Attribute at;
	Dwarf_Word sz = 0, enc = 0;
	if (type_of(var, &t) != 0)
		return 0;
	int tag = dwarf_tag(&t);
	if (tag == DW_TAG_pointer_type || tag == DW_TAG_reference_type ||
	    tag == DW_TAG_rvalue_reference_type || tag == DW_TAG_enumeration_type)
		return 1;
	if (dwarf_aggregate_size(&t, &sz) != 0 || sz == 0)
		return 0;
	if (tag == DW_TAG_structure_type || tag == DW_TAG_union_type)
		return !cxx && sz <= 16 && (integer_members_left = 256, integer_members(&t, 0)) ?
		       (int)(sz + 7) / 8 : 0;
	if (tag != DW_TAG_base_type || sz > 8)
		return 0;
	dwarf_formudata(dwarf_attr(&t, DW_AT_encoding, &at), &enc);
	return enc != DW_ATE_float && enc != DW_ATE_complex_float;
}

/* a parameter at a return probe: $argN, the register it came in, saved at
 * the entry.  From its location at the entry where that is an argument
 * register, else by the calling convention (the N-th of parameters that
 * each take one integer register, no hidden struct return) */
static int param_at_return(Dwarf_Die *var, Dwarf_Die *scopes, int ns, const struct val *at_entry,
			   int entry_ok, struct val *v, char *why, size_t wn)
{
	Dwarf_Die *fn = subprogram_of(scopes, ns);
	if (entry_ok && at_entry->k == V_REG && at_entry->base[0] == '$') {
		*v = *at_entry;
		return 0;
	}
	if (entry_ok && at_entry->k == V_REG) {
		struct val a = *at_entry;
		if (reg_to_arg(&a) == 0) {
			*v = a;
			return 0;
		}
	}
	Dwarf_Die c, rt;
	int n = 0, cxx = ns > 0 && dwarf_tag(&scopes[ns - 1]) == DW_TAG_compile_unit &&
			 is_cxx(&scopes[ns - 1]);
	/* a function of this object only may take its arguments otherwise */
	if (fn && !dwarf_hasattr_integrate(fn, DW_AT_external))
		fn = NULL;
	if (fn && type_of(fn, &rt) == 0) {
		int tag = dwarf_tag(&rt);
		if (tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
		    tag == DW_TAG_class_type || tag == DW_TAG_array_type)
			fn = NULL;	/* a struct returned: maybe a hidden first argument */
	}
	if (fn && dwarf_child(fn, &c) == 0)
		do {
			if (dwarf_tag(&c) != DW_TAG_formal_parameter)
				continue;
			int k = int_regs(&c, cxx);
			if (!k || n + k > 6)
				break;
			if (dwarf_dieoffset(&c) == dwarf_dieoffset(var)) {
				Dwarf_Die t;
				Dwarf_Word sz = 0;
				v->k = V_REG;
				v->npieces = 0;
				v->off = 0;
				snprintf(v->base, sizeof v->base, "$arg%d", n + 1);
				if (k == 1)
					return 0;
				/* a struct in two registers: two pieces */
				type_of(var, &t);
				dwarf_aggregate_size(&t, &sz);
				v->k = V_PIECES;
				v->npieces = 2;
				for (int i = 0; i < 2; i++) {
					struct piece *p = &v->pieces[i];
					p->off = 8 * i;
					p->size = i ? (long)sz - 8 : 8;
					p->present = 1;
					p->v.k = V_REG;
					p->v.off = 0;
					snprintf(p->v.base, sizeof p->v.base, "$arg%d", n + 1 + i);
				}
				return 0;
			}
			n += k;
		} while (dwarf_siblingof(&c, &c) == 0);
	snprintf(why, wn, "is not in an argument register at the entry: a return probe cannot read it");
	return -1;
}

static int eval_loc(struct dw_obj *o, Dwarf_Die *var, Dwarf_Die *scopes,
		    int ns, const struct where *w, struct val *v, char *why, size_t wn)
{
	Dwarf_Attribute at;
	Dwarf_Op *ops;
	size_t nops;
	int tag = dwarf_tag(var);
	int ok = dwarf_attr(var, DW_AT_location, &at) != NULL;
	int r = ok ? dwarf_getlocation_addr(&at, w->pc, &ops, &nops, 1) : 0;
	static const char local_at_ret[] =
		"is a local: a return probe reads parameters (as at the entry) and globals";
	if (r <= 0 || nops == 0) {
		if (w->ret && tag == DW_TAG_formal_parameter)
			return param_at_return(var, scopes, ns, v, 0, v, why, wn);
		snprintf(why, wn, "%s", w->ret ? local_at_ret : "optimized out");
		return -1;
	}
	/* pieces: each a simple location and its size */
	size_t start = 0;
	int np = 0;
	long poff = 0;
	struct piece pcs[MAXPIECES];
	for (size_t i = 0; i < nops; i++) {
		if (ops[i].atom != DW_OP_piece && ops[i].atom != DW_OP_bit_piece)
			continue;
		/* a piece of 1 MB or more: bad DWARF, its offsets would overflow */
		if (ops[i].atom == DW_OP_bit_piece || np == MAXPIECES || ops[i].number >= 1u << 20) {
			snprintf(why, wn, "has an unsupported location expression");
			return -1;
		}
		struct piece *p = &pcs[np++];
		p->off = poff;
		p->size = (long)ops[i].number;
		poff += p->size;
		p->present = i > start;	/* an empty piece is optimized out */
		if (!p->present && w->ret && tag == DW_TAG_formal_parameter)
			return param_at_return(var, scopes, ns, v, 0, v, why, wn);
		if (p->present) {
			struct val pv;
			if (eval_ops(o, &at, ops + start, i - start, scopes, ns, w, &pv, why, wn) != 0)
				return -1;
			/* at a return: the argument registers, saved at the entry
			 * (else where the calling convention puts it) */
			if (w->ret && ((pv.k == V_REG && pv.base[0] != '$' && reg_to_arg(&pv) != 0) ||
				       pv.k == V_MEM))
				return param_at_return(var, scopes, ns, v, 0, v, why, wn);
			p->v.k = pv.k;
			p->v.off = pv.off;
			snprintf(p->v.base, sizeof p->v.base, "%s", pv.base);
		}
		start = i + 1;
	}
	if (np) {
		/* one piece standing for the whole is the whole */
		Dwarf_Die t;
		Dwarf_Word sz = 0;
		if (np == 1 && pcs[0].present && type_of(var, &t) == 0 &&
		    dwarf_aggregate_size(&t, &sz) == 0 && (Dwarf_Word)pcs[0].size >= sz) {
			v->k = pcs[0].v.k;
			v->off = pcs[0].v.off;
			snprintf(v->base, sizeof v->base, "%s", pcs[0].v.base);
			v->npieces = 0;
		} else {
			v->k = V_PIECES;
			v->npieces = np;
			memcpy(v->pieces, pcs, sizeof pcs[0] * (size_t)np);
			v->off = 0;
			v->base[0] = 0;
			return 0;
		}
	} else if (eval_ops(o, &at, ops, nops, scopes, ns, w, v, why, wn) != 0) {
		return -1;
	}
	if (!w->ret || v->k == V_SYM || v->k == V_IMM)
		return 0;
	if (tag != DW_TAG_formal_parameter) {
		snprintf(why, wn, "%s", local_at_ret);
		return -1;
	}
	return param_at_return(var, scopes, ns, v, 1, v, why, wn);
}

/* the type of DIE, typedefs and qualifiers peeled */
static int type_of(Dwarf_Die *die, Dwarf_Die *t)
{
	Dwarf_Attribute at;
	Dwarf_Die raw;
	if (!dwarf_attr_integrate(die, DW_AT_type, &at) || !dwarf_formref_die(&at, &raw))
		return -1;
	return dwarf_peel_type(&raw, t);
}

/* DIE's type as C writes it; depth bounds the nesting (a type that is
 * its own pointer, in bad DWARF) */
static void type_name_in(Dwarf_Die *die, char *out, size_t n, int depth);
static void type_name(Dwarf_Die *die, char *out, size_t n)
{
	type_name_in(die, out, n, 0);
}

static void type_name_in(Dwarf_Die *die, char *out, size_t n, int depth)
{
	Dwarf_Attribute at;
	Dwarf_Die t;
	if (!dwarf_attr_integrate(die, DW_AT_type, &at) || !dwarf_formref_die(&at, &t)) {
		snprintf(out, n, "void");
		return;
	}
	if (depth > 32) {
		snprintf(out, n, "?");
		return;
	}
	const char *nm = dwarf_diename(&t);
	char sub[200];
	switch (dwarf_tag(&t)) {
	case DW_TAG_pointer_type:
		type_name_in(&t, sub, sizeof sub, depth + 1);
		snprintf(out, n, "%s*", sub);
		return;
	case DW_TAG_const_type:
	case DW_TAG_volatile_type: {
		/* a qualified pointer is "T* const", as C declares it */
		const char *q = dwarf_tag(&t) == DW_TAG_const_type ? "const" : "volatile";
		Dwarf_Attribute qa;
		Dwarf_Die qt;
		bool ptr = dwarf_attr_integrate(&t, DW_AT_type, &qa) && dwarf_formref_die(&qa, &qt) &&
			   (dwarf_tag(&qt) == DW_TAG_pointer_type ||
			    dwarf_tag(&qt) == DW_TAG_reference_type);
		type_name_in(&t, sub, sizeof sub, depth + 1);
		size_t ql = strlen(q);
		if (ptr)
			snprintf(out, n, "%s %s", sub, q);
		else if (!strncmp(sub, q, ql) && sub[ql] == ' ')
			snprintf(out, n, "%s", sub);	/* a const array of const char */
		else
			snprintf(out, n, "%s %s", q, sub);
		return;
	}
	case DW_TAG_array_type:
		type_name_in(&t, sub, sizeof sub, depth + 1);
		snprintf(out, n, "%s[]", sub);
		return;
	case DW_TAG_structure_type:
		snprintf(out, n, "struct %s", nm ? nm : "");
		return;
	case DW_TAG_class_type:
		snprintf(out, n, "class %s", nm ? nm : "");
		return;
	case DW_TAG_reference_type:
		type_name_in(&t, sub, sizeof sub, depth + 1);
		snprintf(out, n, "%s&", sub);
		return;
	case DW_TAG_union_type:
		snprintf(out, n, "union %s", nm ? nm : "");
		return;
	case DW_TAG_enumeration_type:
		snprintf(out, n, "enum %s", nm ? nm : "");
		return;
	default:
		snprintf(out, n, "%s", nm ? nm : "?");
	}
}

static int is_char(Dwarf_Die *t)
{
	Dwarf_Attribute at;
	Dwarf_Word enc = 0, sz = 0;
	if (dwarf_tag(t) != DW_TAG_base_type)
		return 0;
	dwarf_formudata(dwarf_attr(t, DW_AT_encoding, &at), &enc);
	dwarf_aggregate_size(t, &sz);
	return sz == 1 && (enc == DW_ATE_signed_char || enc == DW_ATE_unsigned_char);
}

/* the default TYPE of a value of type T (peeled); bitfield of MEMBER */
static int default_type(Dwarf_Die *t, Dwarf_Die *member, char *out, size_t n)
{
	Dwarf_Attribute at;
	Dwarf_Word sz = 0, enc = DW_ATE_unsigned;
	int tag = dwarf_tag(t);
	if (tag == DW_TAG_pointer_type || tag == DW_TAG_reference_type ||
	    tag == DW_TAG_rvalue_reference_type) {
		snprintf(out, n, "x64");
		return 0;
	}
	if (tag != DW_TAG_base_type && tag != DW_TAG_enumeration_type)
		return -1;
	dwarf_aggregate_size(t, &sz);
	if (tag == DW_TAG_base_type)
		dwarf_formudata(dwarf_attr(t, DW_AT_encoding, &at), &enc);
	else {
		Dwarf_Die u;
		if (type_of(t, &u) == 0)
			dwarf_formudata(dwarf_attr(&u, DW_AT_encoding, &at), &enc);
	}
	int sgn = enc == DW_ATE_signed || enc == DW_ATE_signed_char;
	if (enc == DW_ATE_float || sz == 0 || sz > 8 || (sz & (sz - 1)))
		return -1;
	Dwarf_Word bs = 0;
	if (member && dwarf_attr(member, DW_AT_bit_size, &at) &&
	    dwarf_formudata(&at, &bs) == 0 && bs) {
		snprintf(out, n, "b%u@%u/%u", (unsigned)bs, 0u, (unsigned)(sz * 8));
		return 1;	/* caller fixes the bit offset */
	}
	snprintf(out, n, "%c%u", sgn ? 's' : 'u', (unsigned)(sz * 8));
	return 0;
}

/* the constant offset of a member or base class (DW_AT_data_member_location
 * 0 where absent, as in a union); -1 for a computed one (a virtual base) */
static int member_offset(Dwarf_Die *c, long *off)
{
	Dwarf_Attribute at;
	Dwarf_Word o = 0;
	if (dwarf_attr(c, DW_AT_data_member_location, &at) && dwarf_formudata(&at, &o) != 0)
		return -1;
	*off = (long)o;
	return 0;
}

/* a member NAME of struct/union/class T: its DIE and byte offset; those
 * of anonymous structs and unions, and of base classes (C++: this->m of
 * a base's m), are searched too, to a bounded depth (bad DWARF can loop) */
static int find_member_left;	/* calls find_member allows (bad DWARF: a
				 * struct with many anonymous members of itself) */
static int find_member_in(Dwarf_Die *t, const char *name, Dwarf_Die *m, long *off, int depth)
{
	Dwarf_Die c;
	if (depth > 16 || --find_member_left < 0 || dwarf_child(t, &c) != 0)
		return -1;
	do {
		int tag = dwarf_tag(&c);
		if (tag != DW_TAG_member && tag != DW_TAG_inheritance)
			continue;
		const char *nm = tag == DW_TAG_member ? dwarf_diename(&c) : NULL;
		long o;
		if (member_offset(&c, &o) != 0)
			continue;
		if (nm && !strcmp(nm, name)) {
			*m = c;
			*off = o;
			return 0;
		}
		if (!nm) {	/* an anonymous struct or union, a base class */
			Dwarf_Die t2;
			if (type_of(&c, &t2) == 0 && find_member_in(&t2, name, m, off, depth + 1) == 0)
				return __builtin_add_overflow(*off, o, off) ? -1 : 0;
		}
	} while (dwarf_siblingof(&c, &c) == 0);
	return -1;
}

static int find_member(Dwarf_Die *t, const char *name, Dwarf_Die *m, long *off)
{
	find_member_left = 4096;
	return find_member_in(t, name, m, off, 0);
}

/* a variable LAST (qualified as NAME where NAME has "::") among the
 * children of DIE, and of the namespaces in it to a bounded depth (clang
 * puts ns::g's definition there, gcc at the CU's level) */
static int find_var_in(Dwarf_Die *die, const char *name, const char *last, Dwarf_Die *var,
		       int depth)
{
	Dwarf_Die c, cu;
	if (depth > 8 || dwarf_child(die, &c) != 0)
		return -1;
	do {
		int t = dwarf_tag(&c);
		const char *nm;
		char qn[1024];
		if ((t == DW_TAG_variable || t == DW_TAG_formal_parameter) &&
		    (nm = dwarf_diename(&c)) && !strcmp(nm, last) &&
		    (last == name || (dwarf_diecu(&c, &cu, NULL, NULL) &&
				      name_eq(name + (name[0] == ':' ? 2 : 0),
					      qual_name(&c, &cu, qn, sizeof qn))))) {
			*var = c;
			return 0;
		}
	} while (dwarf_siblingof(&c, &c) == 0);
	if (dwarf_tag(die) != DW_TAG_compile_unit && dwarf_tag(die) != DW_TAG_namespace)
		return -1;
	dwarf_child(die, &c);
	do {
		if (dwarf_tag(&c) == DW_TAG_namespace && find_var_in(&c, name, last, var, depth + 1) == 0)
			return 0;
	} while (dwarf_siblingof(&c, &c) == 0);
	return -1;
}

/* the variable NAME visible in SCOPES (innermost first; names through
 * abstract origins, as inlined copies have them); C++: ns::g,
 * Cls::static_member, ::g by their scopes */
static int find_var(Dwarf_Die *scopes, int ns, const char *name, Dwarf_Die *var)
{
	const char *last = name;
	for (const char *q = strstr(name, "::"); q; q = strstr(q + 2, "::"))
		last = q + 2;
	for (int s = 0; s < ns; s++)
		if (find_var_in(&scopes[s], name, last, var, 0) == 0)
			return 0;
	return -1;
}

struct fetch_out {
	char name[256];
	char text[2048];
};

/* A default event name the events core takes (UKPEV_NAME_MAX, with room
 * for a site's _N): a long one (a template's arguments are in its
 * DW_AT_name) is cut, and the FNV-1a hash of the whole keeps it apart from
 * another cut alike */
static void shorten_event(char *ev)
{
	enum { KEEP = 44 };
	size_t n = strlen(ev);
	if (n <= KEEP + 8)
		return;
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)ev[i]) * 16777619u;
	size_t k = KEEP;
	while (k > 1 && ev[k - 1] == '_')
		k--;
	snprintf(ev + k, n + 1 - k, "_%06x", (unsigned)(h & 0xffffff));
}

static void sanitize(char *s)
{
	char *w = s;
	for (char *r = s; *r; r++) {
		if (isalnum((unsigned char)*r) || *r == '_')
			*w++ = *r;
		else if (w > s && w[-1] != '_')
			*w++ = '_';
	}
	while (w > s && w[-1] == '_')
		w--;
	*w = 0;
}

/* the part of a value in pieces SIZE bytes at OFF: the location of the
 * piece holding it whole (*bits: where in the register it starts; at
 * the start of a constant); why set otherwise */
static int piece_part(struct val *v, long off, long size, long *bits, char *why, size_t wn)
{
	*bits = 0;
	for (int i = 0; i < v->npieces; i++) {
		const struct piece *p = &v->pieces[i];
		if (off < p->off || off - p->off >= p->size)
			continue;
		if (size < 0 || size > p->size - (off - p->off)) {
			snprintf(why, wn, "is split over two pieces");
			return -1;
		}
		if (!p->present) {
			snprintf(why, wn, "is optimized out");
			return -1;
		}
		if (p->v.k == V_IMM && off != p->off) {
			snprintf(why, wn, "is in the upper bytes of a constant");
			return -1;
		}
		if (p->v.k == V_REG)	/* its bits in the register */
			*bits = (off - p->off) * 8;
		v->k = p->v.k;
		snprintf(v->base, sizeof v->base, "%s", p->v.base);
		if (__builtin_add_overflow(p->v.off, p->v.k == V_MEM || p->v.k == V_SYM ? off - p->off : 0,
					   &v->off)) {
			snprintf(why, wn, "is at an offset out of range");
			return -1;
		}
		v->npieces = 1;	/* the caller's sign that the offset is applied */
		return 0;
	}
	snprintf(why, wn, "is not in the pieces");
	return -1;
}

/* translates a variable FETCH (NAME, ->, ., [IDX]) with optional :TYPE
 * at PC; pos: its offset in the definition for errors */
/* an argument's default name: the last member's (perf-probe.txt), else
 * the variable's */
static void arg_name(const char *expr, char *out, size_t n)
{
	const char *last = expr;
	for (const char *q = expr; *q; q++)
		if ((q[0] == '.' || (q[0] == '-' && q[1] == '>') || (q[0] == ':' && q[1] == ':')) &&
		    (isalpha((unsigned char)q[q[0] == '.' ? 1 : 2]) || q[q[0] == '.' ? 1 : 2] == '_'))
			last = q + (q[0] == '.' ? 1 : 2);
	size_t ln = 0;
	while (last[ln] && (isalnum((unsigned char)last[ln]) || last[ln] == '_'))
		ln++;
	snprintf(out, n, "%.*s", (int)ln, last);
}

static int translate_var(struct dw_obj *o, Dwarf_Die *scopes, int ns,
			 const struct where *w, const char *expr, const char *type,
			 struct fetch_out *fo, struct dw_error *err, int pos,
			 const char *placename, Dwarf_Die *out_agg)
{
	char name[256];
	size_t i = 0;
	while (expr[i] && (isalnum((unsigned char)expr[i]) || expr[i] == '_' ||
			   (expr[i] == ':' && expr[i + 1] == ':' &&
			    (isalpha((unsigned char)expr[i + 2]) || expr[i + 2] == '_'))))
		i += expr[i] == ':' ? 2 : 1;
	if (!i || i >= sizeof name) {
		seterr(err, pos, "Invalid fetch argument");
		return -1;
	}
	memcpy(name, expr, i);
	name[i] = 0;
	Dwarf_Die var;
	if (find_var(scopes, ns, name, &var) != 0) {
		seterr(err, pos, "Variable %s is not visible at %s", name, placename);
		return -1;
	}
	struct val v;
	char why[256];
	if (eval_loc(o, &var, scopes, ns, w, &v, why, sizeof why) != 0) {
		seterr(err, pos, "Variable %s %s at %s", name, why, placename);
		return -1;
	}
	Dwarf_Die t, member;
	int has_member = 0, whole = 0;	/* whole: a piece is the value */
	long bitbase = 0, regbits = 0;	/* regbits: bits below it in its register */
	if (type_of(&var, &t) != 0) {
		seterr(err, pos, "Variable %s has no type", name);
		return -1;
	}
	while (expr[i]) {
		int p = pos + (int)i;
		if (expr[i] == '[') {
			char *end;
			long idx = strtol(expr + i + 1, &end, 0);
			if (end == expr + i + 1 || *end != ']') {
				seterr(err, p, "Invalid array index");
				return -1;
			}
			int tag = dwarf_tag(&t);
			Dwarf_Die et;
			Dwarf_Word esz = 0;
			if (tag != DW_TAG_array_type && tag != DW_TAG_pointer_type) {
				seterr(err, p, "%.*s is neither an array nor a pointer", (int)i, expr);
				return -1;
			}
			if (type_of(&t, &et) != 0 || dwarf_aggregate_size(&et, &esz) != 0) {
				seterr(err, p, "%.*s: elements of unknown size", (int)i, expr);
				return -1;
			}
			if (v.k == V_IMM) {
				seterr(err, p, "%.*s is a constant", (int)i, expr);
				return -1;
			}
			long eoff;	/* the element's offset (bad DWARF: any size) */
			if (esz > LONG_MAX || __builtin_mul_overflow(idx, (long)esz, &eoff)) {
				seterr(err, p, "%.*s: index %ld out of range", (int)i, expr, idx);
				return -1;
			}
			if (v.k == V_PIECES && (tag == DW_TAG_pointer_type ||
			    piece_part(&v, eoff, (long)esz, &regbits, why, sizeof why) != 0)) {
				seterr(err, p, "%.*s %s at %s", (int)i, expr,
				       tag == DW_TAG_pointer_type ? "is in pieces" : why, placename);
				return -1;
			}
			whole = 0;
			if (v.npieces) {	/* the piece holding the element */
				v.npieces = 0;
				whole = v.k != V_MEM && v.k != V_SYM;
			}
			else if (tag == DW_TAG_pointer_type)
				deref(&v, eoff);
			else if (v.k == V_REG) {
				seterr(err, p, "%.*s is in a register", (int)i, expr);
				return -1;
			} else if (__builtin_add_overflow(v.off, eoff, &v.off)) {
				seterr(err, p, "%.*s: index %ld out of range", (int)i, expr, idx);
				return -1;
			}
			t = et;
			has_member = 0;
			i = (size_t)(end - expr) + 1;
			continue;
		}
		int arrow = expr[i] == '-' && expr[i + 1] == '>';
		if (!arrow && expr[i] != '.') {
			seterr(err, p, "Invalid fetch argument");
			return -1;
		}
		size_t f = i + (arrow ? 2 : 1), e = f;
		while (expr[e] && (isalnum((unsigned char)expr[e]) || expr[e] == '_'))
			e++;
		if (e == f) {
			seterr(err, (int)(pos + f), "Invalid field name");
			return -1;
		}
		char field[256];
		snprintf(field, sizeof field, "%.*s", (int)(e - f), expr + f);
		Dwarf_Die st = t;
		/* a C++ reference: '.' reads through it */
		int ttag = dwarf_tag(&t);
		if (!arrow && (ttag == DW_TAG_reference_type || ttag == DW_TAG_rvalue_reference_type) &&
		    v.k != V_PIECES) {
			if (type_of(&t, &st) != 0) {
				seterr(err, (int)(pos + f), "%.*s has no type", (int)i, expr);
				return -1;
			}
			if (v.k == V_IMM) {
				seterr(err, p, "%.*s is a constant", (int)i, expr);
				return -1;
			}
			deref(&v, 0);
		}
		if (arrow) {
			if (dwarf_tag(&t) != DW_TAG_pointer_type || type_of(&t, &st) != 0) {
				seterr(err, (int)(pos + f), "%.*s is not a pointer", (int)i, expr);
				return -1;
			}
		}
		int stag = dwarf_tag(&st);
		if (stag != DW_TAG_structure_type && stag != DW_TAG_union_type &&
		    stag != DW_TAG_class_type) {
			seterr(err, (int)(pos + f), "%.*s is not a struct or union",
			       (int)i, expr);
			return -1;
		}
		long moff;
		if (find_member(&st, field, &member, &moff) != 0) {
			seterr(err, (int)(pos + f), "%s has no member %s",
			       dwarf_diename(&st) ? dwarf_diename(&st) : "struct", field);
			return -1;
		}
		Dwarf_Attribute at;
		Dwarf_Word dbo = 0;
		bitbase = 0;
		if (dwarf_attr(&member, DW_AT_data_bit_offset, &at) &&
		    dwarf_formudata(&at, &dbo) == 0) {
			moff = 0;
			bitbase = (long)dbo;
		} else if (dwarf_attr(&member, DW_AT_bit_offset, &at) &&
			   dwarf_formudata(&at, &dbo) == 0) {
			/* DWARF 2 style: counted from the storage unit's top bit */
			Dwarf_Word bsz = 0, bs = 0;
			dwarf_formudata(dwarf_attr(&member, DW_AT_byte_size, &at), &bsz);
			dwarf_formudata(dwarf_attr(&member, DW_AT_bit_size, &at), &bs);
			if (__builtin_mul_overflow(moff, 8, &bitbase) ||
			    __builtin_add_overflow(bitbase, (long)(bsz * 8 - dbo - bs), &bitbase)) {
				seterr(err, (int)(pos + f), "%s: bit offset out of range", field);
				return -1;
			}
			moff = 0;
		}
		if (v.k == V_IMM) {
			seterr(err, p, "%.*s is a constant", (int)i, expr);
			return -1;
		}
		if (v.k == V_PIECES) {
			/* the piece holding the member, if one holds it whole */
			Dwarf_Die mt;
			Dwarf_Word msz = 0;
			if (arrow || dwarf_hasattr(&member, DW_AT_bit_size) ||
			    type_of(&member, &mt) != 0 ||
			    dwarf_aggregate_size(&mt, &msz) != 0) {
				seterr(err, p, "%.*s is in pieces at %s", (int)i, expr, placename);
				return -1;
			}
			if (piece_part(&v, moff, (long)msz, &regbits, why, sizeof why) != 0) {
				seterr(err, (int)(pos + f), "%.*s %s at %s", (int)e, expr, why,
				       placename);
				return -1;
			}
			v.npieces = 0;
			whole = v.k != V_MEM && v.k != V_SYM;
		} else if (arrow) {
			deref(&v, moff);
			regbits = 0;
		} else if (v.k == V_REG) {
			/* a struct held in a register: the member's bits there */
			Dwarf_Die mt;
			Dwarf_Word ssz = 0, msz = 0;
			if (dwarf_hasattr(&member, DW_AT_bit_size) || dwarf_aggregate_size(&st, &ssz) != 0 ||
			    ssz > 8 || type_of(&member, &mt) != 0 || dwarf_aggregate_size(&mt, &msz) != 0 ||
			    msz > ssz || moff < 0 || moff > (long)(ssz - msz)) {
				seterr(err, p, "%.*s is in a register", (int)i, expr);
				return -1;
			}
			regbits += moff * 8;
			whole = 1;
		} else if (__builtin_add_overflow(v.off, moff, &v.off)) {
			seterr(err, (int)(pos + f), "%.*s: offset out of range", (int)e, expr);
			return -1;
		}
		has_member = 1;
		if (type_of(&member, &t) != 0) {
			seterr(err, (int)(pos + f), "%s has no type", field);
			return -1;
		}
		i = e;
	}
	if (v.k == V_PIECES) {
		int agg = dwarf_tag(&t) == DW_TAG_structure_type || dwarf_tag(&t) == DW_TAG_union_type ||
			  dwarf_tag(&t) == DW_TAG_class_type || dwarf_tag(&t) == DW_TAG_array_type;
		if (agg && out_agg && !type && dwarf_tag(&t) != DW_TAG_array_type) {
			*out_agg = t;	/* each member from the piece holding it */
			return 1;
		}
		seterr(err, pos, "Variable %s is in %d pieces at %s: %s", name, v.npieces, placename,
		       agg ? "give a member that one piece holds" : "one fetch cannot join them");
		return -1;
	}
	/* a C++ reference is what it refers to (as gdb shows it): size_type&
	 * __capacity is the count, const std::string& s the string's members;
	 * inside +OFF(...) its address, which the raw dereference reads at */
	int rtag = dwarf_tag(&t);
	if ((rtag == DW_TAG_reference_type || rtag == DW_TAG_rvalue_reference_type) &&
	    v.k != V_IMM && !reference_as_address) {
		Dwarf_Die rt;
		if (type_of(&t, &rt) == 0) {
			deref(&v, 0);
			t = rt;
			has_member = 0;
			int tag = dwarf_tag(&t);
			if (out_agg && !type && (tag == DW_TAG_structure_type ||
						 tag == DW_TAG_union_type || tag == DW_TAG_class_type)) {
				*out_agg = t;
				return 1;
			}
		}
	}
	char ty[64] = "";
	int want_string = type && (!strcmp(type, "string") || !strcmp(type, "ustring"));
	if (want_string) {
		int tag = dwarf_tag(&t);
		Dwarf_Die et;
		if ((tag != DW_TAG_pointer_type && tag != DW_TAG_array_type) ||
		    type_of(&t, &et) != 0 || !is_char(&et)) {
			seterr(err, pos, "%s is not a string (char * or char[])", expr);
			return -1;
		}
		if (v.k == V_IMM) {
			seterr(err, pos, "%s is a constant", expr);
			return -1;
		}
		if (tag == DW_TAG_pointer_type)
			deref(&v, 0);
		else if (v.k == V_REG) {
			seterr(err, pos, "%s is in a register", expr);
			return -1;
		}
		snprintf(ty, sizeof ty, "%s", type);
	} else if (type) {
		snprintf(ty, sizeof ty, "%s", type);
	} else {
		int r = default_type(&t, has_member ? &member : NULL, ty, sizeof ty);
		int tag = dwarf_tag(&t);
		if (r < 0 && tag == DW_TAG_array_type) {
			/* the elements in place, as the raw grammar's TYPE[N] */
			Dwarf_Die et;
			Dwarf_Word asz = 0, esz = 0;
			char ety[32];
			if (type_of(&t, &et) != 0 || is_char(&et)) {
				seterr(err, pos, "%s is an array of char: give an index or :string", expr);
				return -1;
			}
			if (default_type(&et, NULL, ety, sizeof ety) != 0 ||
			    dwarf_aggregate_size(&et, &esz) != 0 || !esz ||
			    dwarf_aggregate_size(&t, &asz) != 0 || !asz || asz % esz) {
				seterr(err, pos, "%s is an array of what one fetch cannot show: give an index",
				       expr);
				return -1;
			}
			if (asz / esz > 64) {
				seterr(err, pos, "%s has %lu elements, an array fetch at most 64: give an index",
				       expr, (unsigned long)(asz / esz));
				return -1;
			}
			if (v.k != V_MEM && v.k != V_SYM) {
				seterr(err, pos, "%s is an array not in memory at %s: give an index", expr,
				       placename);
				return -1;
			}
			snprintf(ty, sizeof ty, "%s[%lu]", ety, (unsigned long)(asz / esz));
			r = 0;
		} else if (r < 0 && out_agg && (tag == DW_TAG_structure_type ||
						tag == DW_TAG_union_type || tag == DW_TAG_class_type)) {
			*out_agg = t;	/* the caller fetches its members */
			return 1;
		} else if (r < 0) {
			seterr(err, pos, "%s is a struct, a union or a float: give a member", expr);
			return -1;
		}
		if (r == 1) {	/* a bitfield: address its storage unit */
			Dwarf_Word sz = 0;
			dwarf_aggregate_size(&t, &sz);
			long unit = (long)sz * 8;
			long ubyte = (bitbase / unit) * (long)sz;
			long bo = bitbase - ubyte * 8;
			Dwarf_Attribute at;
			Dwarf_Word bs = 0;
			dwarf_formudata(dwarf_attr(&member, DW_AT_bit_size, &at), &bs);
			if (__builtin_add_overflow(v.off, ubyte, &v.off)) {
				seterr(err, pos, "%s: offset out of range", expr);
				return -1;
			}
			snprintf(ty, sizeof ty, "b%u@%ld/%ld", (unsigned)bs, bo, unit);
		}
	}
	if (v.k == V_REG && regbits > 0) {
		/* above the register's low bytes: its bits (unsigned only: the
		 * raw grammar's bitfields are) */
		unsigned bsz;
		if (type || ty[0] == 'b' || sscanf(ty, "%*c%u", &bsz) != 1) {
			seterr(err, pos, "%s is in the upper bytes of a register at %s%s", expr,
			       placename, type ? ": no TYPE can be given" : "");
			return -1;
		}
		if (ty[0] == 's') {
			seterr(err, pos, "%s is signed and in the upper bytes of a register at %s "
			       "(bitfields are unsigned)", expr, placename);
			return -1;
		}
		snprintf(ty, sizeof ty, "b%u@%ld/64", bsz, regbits);
	}
	if (v.k == V_REG && has_member && !whole) {
		seterr(err, pos, "%s is in a register", expr);
		return -1;
	}
	render(&v, fo->text, sizeof fo->text);
	size_t l = strlen(fo->text);
	snprintf(fo->text + l, sizeof fo->text - l, ":%s", ty);
	arg_name(expr, fo->name, sizeof fo->name);
	return 0;
}

void (*dw_note)(const char *msg);

/* the values and structs a struct fetched whole may take, all its
 * members nested (bad DWARF: a struct of many members of itself) */
static int values_left;

/* The members of struct, union or class T that a value has (not static
 * ones; an anonymous struct or union's and a base class's as its own,
 * not a virtual base's), each passed to fn; depth bounds the nesting (a
 * cycle in bad DWARF) */
static void each_member(Dwarf_Die *t, int depth, void (*fn)(const char *name, void *arg),
			void *arg)
{
	Dwarf_Die c;
	if (depth > 8 || --values_left < 0 || dwarf_child(t, &c) != 0)
		return;
	do {
		int tag = dwarf_tag(&c);
		long off;
		if ((tag != DW_TAG_member && tag != DW_TAG_inheritance) ||
		    dwarf_hasattr(&c, DW_AT_declaration) || member_offset(&c, &off) != 0)
			continue;
		const char *nm = tag == DW_TAG_member ? dwarf_diename(&c) : NULL;
		Dwarf_Die t2;
		if (nm && dwarf_hasattr(&c, DW_AT_artificial))
			continue;	/* the compiler's (_vptr.Base), no name to give */
		if (nm)
			fn(nm, arg);
		else if (type_of(&c, &t2) == 0)	/* anonymous, or a base class */
			each_member(&t2, depth + 1, fn, arg);
	} while (dwarf_siblingof(&c, &c) == 0);
}

struct agg_walk {
	struct dw_obj *o;
	Dwarf_Die *scopes;
	int ns;
	const struct where *w;
	const char *expr, *base, *placename;
	struct fetch_out **fo;
	int *nfo, *cap, depth, pos;
};

static int fetch_value(struct dw_obj *o, Dwarf_Die *scopes, int ns, const struct where *w,
		       const char *expr, const char *type, const char *name,
		       struct fetch_out **fo, int *nfo, int *cap, struct dw_error *err, int pos,
		       const char *placename, int depth);

static void fetch_member(const char *member, void *arg)
{
	struct agg_walk *a = arg;
	char sub[1024], nm[256];
	struct dw_error e;
	if (snprintf(sub, sizeof sub, "%s.%s", a->expr, member) >= (int)sizeof sub ||
	    snprintf(nm, sizeof nm, "%s_%s", a->base, member) >= (int)sizeof nm)
		return;
	/* a char array as its string; what cannot be fetched is left out,
	 * as $vars leaves it, and said */
	struct dw_error e2;
	if (fetch_value(a->o, a->scopes, a->ns, a->w, sub, NULL, nm, a->fo, a->nfo, a->cap, &e,
			a->pos, a->placename, a->depth + 1) != 0 &&
	    fetch_value(a->o, a->scopes, a->ns, a->w, sub, "string", nm, a->fo, a->nfo, a->cap,
			&e2, a->pos, a->placename, a->depth + 1) != 0 && dw_note) {
		char msg[1400];
		snprintf(msg, sizeof msg, "%.1000s left out: %s", sub, e.msg);
		dw_note(msg);
	}
}

/*
 * The fetches of EXPR appended to *fo: one, named NAME (NULL: as
 * translate_var names it); or, for a struct, union or class value given
 * no TYPE, one per member that can be fetched, named NAME_MEMBER, nested
 * ones likewise to a depth of 4 (bpftrace prints a struct whole; the raw
 * grammar has no struct type, so its members become arguments).
 */
static int fetch_value(struct dw_obj *o, Dwarf_Die *scopes, int ns, const struct where *w,
		       const char *expr, const char *type, const char *name,
		       struct fetch_out **fo, int *nfo, int *cap, struct dw_error *err, int pos,
		       const char *placename, int depth)
{
	if (depth == 0)
		values_left = 4096;
	if (--values_left < 0) {
		seterr(err, pos, "%s: too many members to fetch", expr);
		return -1;
	}
	if (*nfo == *cap) {
		struct fetch_out *n = realloc(*fo, (size_t)(*cap ? 2 * *cap : 4) * sizeof **fo);
		if (!n) {
			seterr(err, pos, "out of memory");
			return -1;
		}
		*fo = n;
		*cap = *cap ? 2 * *cap : 4;
	}
	Dwarf_Die agg;
	struct fetch_out *f = &(*fo)[*nfo];
	int r = translate_var(o, scopes, ns, w, expr, type, f, err, pos, placename,
			      depth < 4 ? &agg : NULL);
	if (r < 0)
		return -1;
	if (r == 0) {
		if (name)
			snprintf(f->name, sizeof f->name, "%s", name);
		(*nfo)++;
		return 0;
	}
	char base[256];
	if (name)
		snprintf(base, sizeof base, "%s", name);
	else
		arg_name(expr, base, sizeof base);
	int before = *nfo;
	struct agg_walk a = { o, scopes, ns, w, expr, base, placename, fo, nfo, cap, depth, pos };
	each_member(&agg, 0, fetch_member, &a);
	if (*nfo == before) {
		seterr(err, pos, "%s has no member that can be fetched at %s", expr, placename);
		return -1;
	}
	return 0;
}

/* every parameter ($params) or every visible variable ($vars) at PC: those
 * of the innermost function or inlined copy, as -V lists them (perf's), a
 * name shadowed by an inner scope's once */
static int all_vars(struct dw_obj *o, Dwarf_Die *scopes, int ns, const struct where *w,
		    int params_only, struct fetch_out **fo, int *nfo, int *cap)
{
	const char **seen = NULL;
	size_t nseen = 0;
	for (int s = 0; s < ns; s++) {
		Dwarf_Die c;
		int tag = dwarf_tag(&scopes[s]);
		if (params_only && tag != DW_TAG_subprogram && tag != DW_TAG_inlined_subroutine)
			continue;
		if (dwarf_child(&scopes[s], &c) != 0)
			goto next;
		do {
			int t = dwarf_tag(&c);
			if (t != DW_TAG_formal_parameter && (params_only || t != DW_TAG_variable))
				continue;
			const char *nm = dwarf_diename(&c);
			if (!nm)
				continue;
			size_t k = 0;
			while (k < nseen && strcmp(seen[k], nm))
				k++;
			if (k < nseen)
				continue;
			seen = realloc(seen, (nseen + 1) * sizeof *seen);
			seen[nseen++] = nm;
			struct fetch_out f;
			struct dw_error e;
			if (translate_var(o, scopes, ns, w, nm, NULL, &f, &e, 0, "", NULL) != 0)
				continue;	/* perf skips what cannot be fetched */
			if (*nfo == *cap) {
				*cap = *cap ? 2 * *cap : 16;
				*fo = realloc(*fo, *cap * sizeof **fo);
			}
			(*fo)[(*nfo)++] = f;
		} while (dwarf_siblingof(&c, &c) == 0);
	next:
		if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine)
			break;
	}
	free(seen);
	return 0;
}

/* the scopes at PC, the function instance IN first where the pc is not
 * in its ranges (an inlined copy's entry pc may lie outside them) */
static int scopes_at(struct inst *in, uint64_t pc, Dwarf_Die **out)
{
	*out = NULL;	/* dwarf_getscopes sets it only when it finds scopes */
	int n = dwarf_getscopes(&in->cu, pc, out);
	if (n <= 0) {
		n = 0;
		*out = NULL;
	}
	for (int i = 0; i < n; i++)
		if (dwarf_dieoffset(&(*out)[i]) == dwarf_dieoffset(&in->die))
			return n;
	Dwarf_Die *v = malloc((size_t)(n + 1) * sizeof *v);
	v[0] = in->die;
	for (int i = 0; i < n; i++)
		v[i + 1] = (*out)[i];
	free(*out);
	*out = v;
	return n + 1;
}

/* ---- definitions ----------------------------------------------------- */

/*
 * The end of the word at p.  The place (quoted != 0) may hold blanks and
 * separators as perf probe's does: inside "..." or '...', or after a
 * backslash (`"geo::Vec::operator bool"`, `operator\ new`).  Other words
 * end at the first blank.
 */
static const char *word_end(const char *p, int quoted)
{
	char q = 0;
	for (; *p; p++) {
		if (q) {
			if (*p == q)
				q = 0;
		} else if (quoted && *p == ';') {
			quoted = 0;	/* a line pattern is taken as written */
		} else if (quoted && (*p == '"' || *p == '\'')) {
			q = *p;
		} else if (quoted && *p == '\\' && p[1]) {
			p++;
		} else if (*p == ' ' || *p == '\t') {
			break;
		}
	}
	return p;
}

/* has the place word quotes or escapes before any line pattern (only a
 * source-level place can) */
static int place_quoted(const char *p)
{
	size_t n = strcspn(p, ";");
	const char *q = strpbrk(p, "\"'\\");
	return q && (size_t)(q - p) < n;
}

static int is_raw_fetch(const char *f)
{
	return f[0] == '%' || f[0] == '@' || f[0] == '$' || f[0] == '+' ||
	       f[0] == '-' || f[0] == '\\' || isdigit((unsigned char)f[0]);
}

/* A raw dereference around a variable, +OFF(...(EXPR)...)[:TYPE] with EXPR
 * a variable's (+48(frame->f_code->co_name):string, the characters of a
 * CPython str): the length of the layers before EXPR (*pre), of EXPR
 * (*len), and their number (*depth).  0 when f is not one. */
static int deref_of_var(const char *f, size_t *pre, size_t *len, int *depth)
{
	const char *p = f;
	int d = 0;
	while (*p == '+' || *p == '-') {
		const char *q = p + 1;
		if (*q == 'u')
			q++;
		char *e;
		errno = 0;
		(void)strtol(q, &e, 0);
		if (e == q || errno || *e != '(')
			return 0;
		p = e + 1;
		d++;
	}
	const char *end = strchr(p, ')');
	if (!d || !end || end == p || is_raw_fetch(p) || memchr(p, '(', (size_t)(end - p)))
		return 0;
	for (int k = 0; k < d; k++)
		if (end[k] != ')')
			return 0;
	if (end[d] && end[d] != ':')
		return 0;
	*pre = (size_t)(p - f);
	*len = (size_t)(end - p);
	*depth = d;
	return 1;
}

/* does NAME (as a place's OBJ: writes it) name o: its name as opened, its
 * path, or the same file name */
static int obj_is(const struct dw_obj *o, const char *name)
{
	const char *b = strrchr(o->path, '/') ? strrchr(o->path, '/') + 1 : o->path;
	const char *nb = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
	return !strcmp(name, o->name) || !strcmp(name, o->path) || !strcmp(nb, b);
}

/* The length of the OBJ: a place begins with (libc.so.6:_int_malloc,
 * /usr/bin/prog:file.c:12), up to the first ':' that is not of a "::",
 * when what follows it is a name (FUNC:N and SRC:N have a number there,
 * the raw OBJ:0xN keeps its own); 0 when it has none */
static size_t obj_prefix(const char *p)
{
	for (size_t i = 0; p[i]; i++) {
		if (strchr(";@\"'\\<>()%", p[i]))
			return 0;
		if (p[i] == ':')
			return p[i + 1] == ':' || !i || !p[i + 1] ||
			       isdigit((unsigned char)p[i + 1]) ? 0 : i + 1;
	}
	return 0;
}

static int is_source_place(const char *p)
{
	p += obj_prefix(p);
	if (strchr(p, '@') || strchr(p, ';') || place_quoted(p))
		return 1;
	if (strstr(p, "::"))	/* a C++ name: no raw place has one */
		return 1;
	/* nor brackets or an operator (or a bracket left open) */
	struct name_scan ns;
	size_t bad;
	if (scan_name(p, &ns, &bad) != 0 || (ns.cxx && !ns.path))
		return 1;
	const char *c = strchr(p, ':');
	if (!c)
		return 0;
	/* OBJ:SYM / OBJ:0xN are raw; FUNC:N and SRC:N are source-level */
	const char *r = c + 1;
	if (!*r || !isdigit((unsigned char)*r) || (r[0] == '0' && r[1] == 'x'))
		return 0;
	/* X is a function (an identifier) or a source file (by its suffix);
	 * anything else, such as libc.so.6, is an object with an offset */
	const char *dot = NULL;
	int ident = 1;
	for (const char *q = p; q < c; q++) {
		if (*q == '.')
			dot = q;
		if (!isalnum((unsigned char)*q) && *q != '_')
			ident = 0;
	}
	if (!ident) {
		static const char *const sfx[] = { "c", "h", "cc", "cpp", "cxx", "hh",
			"hpp", "hxx", "C", "S", "s", "y", "l", "inc", "def" };
		int src = 0;
		for (size_t k = 0; dot && k < sizeof sfx / sizeof *sfx; k++)
			src |= (size_t)(c - dot - 1) == strlen(sfx[k]) &&
			       !strncmp(dot + 1, sfx[k], strlen(sfx[k]));
		if (!src)
			return 0;
	}
	while (isdigit((unsigned char)*r))
		r++;
	return *r == 0 || !strcmp(r, "%return");
}

/* the fetch of an argument (after NAME=) */
static const char *arg_fetch(const char *a)
{
	const char *eq = strchr(a, '=');
	if (eq) {
		const char *p = a;
		while (p < eq && (isalnum((unsigned char)*p) || *p == '_'))
			p++;
		if (p == eq)
			return eq + 1;
	}
	return a;
}

int dw_is_source_level(const char *def)
{
	char tok[8192];
	const char *p = def;
	for (int k = 0;; k++) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			return 0;
		const char *e = word_end(p, k == 1);
		snprintf(tok, sizeof tok, "%.*s", (int)(e - p), p);
		p = e;
		if (k == 0 && tok[0] != 'p' && tok[0] != 'r')
			return 0;
		if (k == 1 && is_source_place(tok))
			return 1;
		if (k >= 2) {
			const char *f = arg_fetch(tok);
			size_t pre, len;
			int depth;
			if (!is_raw_fetch(f) || !strcmp(f, "$params") || !strcmp(f, "$vars") ||
			    deref_of_var(f, &pre, &len, &depth))
				return 1;
		}
	}
}

/* f = +OFF(...(EXPR)...)[:TYPE] (deref_of_var): EXPR translated, a pointer
 * or a 64-bit integer, in place of itself.  0 with *fo one fetch, or -1 */
static int deref_var(struct dw_obj *o, Dwarf_Die *scopes, int ns, const struct where *w,
		     const char *f, size_t pre, size_t len, int depth, int fpos,
		     const char *placename, const char *name, int argn,
		     struct fetch_out **fo, struct dw_error *err)
{
	char expr[1024];
	snprintf(expr, sizeof expr, "%.*s", (int)len, f + pre);
	struct fetch_out *in = NULL;
	int nin = 0, cap = 0;
	if (ns <= 0) {
		seterr(err, fpos, "No scope at %s", placename);
		return -1;
	}
	reference_as_address = 1;
	int r = fetch_value(o, scopes, ns, w, expr, NULL, NULL, &in, &nin, &cap, err,
			    fpos + (int)pre, placename, 0);
	reference_as_address = 0;
	if (r != 0) {
		free(in);
		return -1;
	}
	/* its fetch without its TYPE: the last ':' outside parentheses */
	char *ty = NULL;
	int lvl = 0;
	for (char *q = nin == 1 ? in[0].text : NULL; q && *q; q++) {
		if (*q == '(')
			lvl++;
		else if (*q == ')')
			lvl--;
		else if (*q == ':' && !lvl)
			ty = q;
	}
	if (nin != 1 || !ty || (strcmp(ty, ":x64") && strcmp(ty, ":u64") && strcmp(ty, ":s64"))) {
		seterr(err, fpos + (int)pre, "%s is not a pointer: +OFF(...) reads at a "
		       "pointer's value", expr);
		free(in);
		return -1;
	}
	*ty = 0;
	*fo = calloc(1, sizeof **fo);
	if (!*fo) {
		free(in);
		seterr(err, fpos, "out of memory");
		return -1;
	}
	if (snprintf((*fo)->text, sizeof (*fo)->text, "%.*s%s%s", (int)pre, f, in[0].text,
		     f + pre + len) >= (int)sizeof (*fo)->text) {
		seterr(err, fpos, "Fetch argument is too long");
		free(in);
		free(*fo);
		*fo = NULL;
		return -1;
	}
	if (name)
		snprintf((*fo)->name, sizeof (*fo)->name, "%s", name);
	else
		snprintf((*fo)->name, sizeof (*fo)->name, "arg%d", argn);
	(void)depth;
	free(in);
	return 0;
}

static char *place_name(const struct place *pl, char *out, size_t n)
{
	if (pl->lazy[0]) {
		snprintf(out, n, "%s", pl->func[0] ? pl->func : pl->src);
		size_t l = strlen(out);
		if (l + 1 < n)
			snprintf(out + l, n - l, ";%.200s", pl->lazy);
	} else if (pl->func[0] && pl->has_line)
		snprintf(out, n, "%s:%ld", pl->func, pl->line);
	else if (pl->func[0])
		snprintf(out, n, "%s%s", pl->func, pl->ret ? "%return" : "");
	else
		snprintf(out, n, "%s:%ld", pl->src, pl->line);
	return out;
}

/* at_symbol: DEF is a raw one whose SYM only the debug information knows:
 * FUNC is the function's first byte, as SYM is */
static int translate(struct dw_obj *o, const char *def, char ***out,
		     struct dw_error *err, int at_symbol)
{
	/* tokens with their offsets */
	const char *tok[160];
	int tlen[160], toff[160], nt = 0;
	for (const char *p = def; *p;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		if (nt == 160) {
			seterr(err, (int)(p - def), "Too many arguments");
			return -1;
		}
		tok[nt] = p;
		toff[nt] = (int)(p - def);
		p = word_end(p, nt == 1);
		tlen[nt] = (int)(p - tok[nt]);
		nt++;
	}
	if (nt < 2 || (tok[0][0] != 'p' && tok[0][0] != 'r')) {
		seterr(err, 0, "Invalid command");
		return -1;
	}
	char head[256], group[128] = "", event[128] = "";
	snprintf(head, sizeof head, "%.*s", tlen[0], tok[0]);
	int is_ret = head[0] == 'r';
	char *colon = strchr(head, ':');
	if (colon) {
		char *slash = strchr(colon + 1, '/');
		if (slash) {
			snprintf(group, sizeof group, "%.*s", (int)(slash - colon - 1), colon + 1);
			snprintf(event, sizeof event, "%s", slash + 1);
		} else
			snprintf(event, sizeof event, "%s", colon + 1);
		*colon = 0;
	}
	char pstr[1024];
	snprintf(pstr, sizeof pstr, "%.*s", tlen[1], tok[1]);
	/* OBJ: before the place names o (the caller opened it by that name) */
	size_t pre = obj_prefix(pstr);
	if (pre) {
		pstr[pre - 1] = 0;
		if (!obj_is(o, pstr)) {
			seterr(err, toff[1], "%s is not the object read (%s)", pstr, o->name);
			return -1;
		}
	}
	struct place pl;
	if (parse_place(pstr + pre, &pl, err, toff[1] + (int)pre) != 0)
		return -1;
	if (is_ret)
		pl.ret = 1;
	pl.skip_prologue = nt > 2 && !at_symbol;
	struct site *sites;
	int nsites = resolve_place(o, &pl, &sites, err, toff[1] + (int)pre);
	if (nsites < 0)
		return -1;
	char pn[1100];
	place_name(&pl, pn, sizeof pn);
	char **res = calloc((size_t)nsites, sizeof *res);
	/* a site's line and scopes, while it is written */
	char *line = NULL;
	Dwarf_Die *scopes = NULL;
	int s;
	for (s = 0; s < nsites; s++) {
		uint64_t pc = sites[s].addr;
		uint64_t foff = elf_vaddr_to_off(o->path, pc);
		if (foff == UINT64_MAX) {	/* corrupt DWARF: no probe anywhere else */
			seterr(err, toff[1] + (int)pre, "%s is at 0x%" PRIx64 ", in no segment of %s",
			       pn, pc, o->name);
			goto fail_site;
		}
		struct where wh = { pc, pl.ret };
		int ns = scopes_at(&sites[s].in, pc, &scopes);
		size_t cap = 4096, len = 0;
		line = malloc(cap);
		/* the event: as given, else the function's name (perf's way) */
		char ev[sizeof pl.func + 64];
		/* by the name given where that is another name of the
		 * function's (malloc, not __libc_malloc) */
		const char *fn = sites[s].in.alias ? pl.func : dwarf_diename(&sites[s].in.die);
		if (event[0])
			snprintf(ev, sizeof ev, "%s", event);
		else {
			/* an operator by its ABI code: operator== is operator_eq */
			int op = fn && operator_at(fn, 0) ? cxx_op(fn + 8) : -1;
			if (op >= 0)
				snprintf(ev, sizeof ev, "operator_%s%s%s", cxx_ops[op].code,
					 fn + 8 + strlen(cxx_ops[op].sym), pl.ret ? "__return" : "");
			else
				snprintf(ev, sizeof ev, "%s", fn ? fn : "probe");
			sanitize(ev);
			shorten_event(ev);
			if (op < 0 && pl.ret) {
				size_t l = strlen(ev);
				snprintf(ev + l, sizeof ev - l, "__return");
			}
		}
		if (s > 0) {
			size_t l = strlen(ev);
			snprintf(ev + l, sizeof ev - l, "_%d", s);
		}
		len += (size_t)snprintf(line, cap, "%s:%s%s%s %s:0x%" PRIx64 "%s",
				head, group, group[0] ? "/" : "", ev, o->name, foff,
				pl.ret && !is_ret ? "%return" : "");
		for (int a = 2; a < nt; a++) {
			char arg[2048];
			snprintf(arg, sizeof arg, "%.*s", tlen[a], tok[a]);
			const char *f = arg_fetch(arg);
			int fpos = toff[a] + (int)(f - arg);
			char given_name[256] = "";
			if (f != arg)
				snprintf(given_name, sizeof given_name, "%.*s", (int)(f - arg - 1), arg);
			struct fetch_out *fo = NULL;
			int nfo = 0, fcap = 0;
			size_t dpre, dlen;
			int ddepth;
			if (!strcmp(f, "$params") || !strcmp(f, "$vars")) {
				if (ns > 0)
					all_vars(o, scopes, ns, &wh, f[1] == 'p', &fo, &nfo, &fcap);
			} else if (deref_of_var(f, &dpre, &dlen, &ddepth)) {
				if (deref_var(o, scopes, ns, &wh, f, dpre, dlen, ddepth, fpos, pn,
					      given_name[0] ? given_name : NULL, a - 1, &fo, err) != 0)
					goto fail_site;
				nfo = 1;
			} else if (is_raw_fetch(f)) {
				fo = calloc(1, sizeof *fo);
				nfo = 1;
				snprintf(fo->text, sizeof fo->text, "%s", f);
				snprintf(fo->name, sizeof fo->name, "arg%d", a - 1);
			} else {
				char expr[1024], *ty;
				snprintf(expr, sizeof expr, "%s", f);
				/* the TYPE after the last ':' that is not of a '::' */
				ty = NULL;
				for (char *q = expr; (q = strchr(q, ':')) != NULL; q++)
					if (q[1] == ':')
						q++;
					else
						ty = q;
				if (ty)
					*ty++ = 0;
				if (ns <= 0 || fetch_value(o, scopes, ns, &wh, expr, ty,
							   given_name[0] ? given_name : NULL,
							   &fo, &nfo, &fcap, err, fpos, pn, 0) != 0) {
					if (ns <= 0)
						seterr(err, fpos, "No scope at %s", pn);
					free(fo);
					goto fail_site;
				}
			}
			for (int k = 0; k < nfo; k++) {
				const char *nm = given_name[0] && nfo == 1 ? given_name : fo[k].name;
				size_t need = len + strlen(nm) + strlen(fo[k].text) + 4;
				if (need > cap) {
					cap = need * 2;
					line = realloc(line, cap);
				}
				len += (size_t)snprintf(line + len, cap - len, " %s=%s", nm, fo[k].text);
			}
			free(fo);
		}
		free(scopes);
		scopes = NULL;
		res[s] = line;
		line = NULL;
	}
	free(sites);
	*out = res;
	return nsites;
fail_site:
	free(line);
	free(scopes);
	for (int k = 0; k < s; k++)
		free(res[k]);
	free(res);
	free(sites);
	return -1;
}

/* the words of S (blank separated): their offsets and lengths */
static int split_words(const char *s, int *at, int *len, int max)
{
	int n = 0;
	for (const char *p = s; *p && n < max;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		at[n] = (int)(p - s);
		p = word_end(p, n == 1);
		len[n] = (int)(p - s) - at[n];
		n++;
	}
	return n;
}

int dw_map_offset(const char *def, const char *raw, int off)
{
	int ua[160], ul[160], ra[2000], rl[2000];
	int nu = split_words(def, ua, ul, 160), nr = split_words(raw, ra, rl, 2000);
	if (nu < 2 || nr < 2)
		return 0;
	int w = 0;	/* the raw word at off (or the last before it) */
	while (w + 1 < nr && ra[w + 1] <= off)
		w++;
	if (w == 0)	/* the head: as written where written alike */
		return off < ul[0] && !strncmp(def, raw, (size_t)ul[0]) ? off : ua[0];
	if (w == 1 || nu == 2)
		return ua[1];
	/* each argument written became one, $params and $vars any number:
	 * where one of those is written, the others tell how many */
	int expand = 0;
	for (int k = 2; k < nu; k++) {
		const char *f = arg_fetch(def + ua[k]);
		expand += !strncmp(f, "$params", 7) || !strncmp(f, "$vars", 5);
	}
	int u = -1, extra = (nr - 2) - (nu - 2 - expand);
	if (expand > 1)
		return ua[1];
	for (int k = 2, i = 2; k < nu && u < 0; k++) {
		const char *f = arg_fetch(def + ua[k]);
		int n = !strncmp(f, "$params", 7) || !strncmp(f, "$vars", 5) ? extra : 1;
		if (w < i + n)
			u = k;
		i += n;
	}
	if (u < 0)
		return ua[1];
	/* within the TYPE when it was written (the same text), else the fetch */
	char uw[2048], rw[2048];
	snprintf(uw, sizeof uw, "%.*s", ul[u], def + ua[u]);
	snprintf(rw, sizeof rw, "%.*s", rl[w], raw + ra[w]);
	const char *uf = arg_fetch(uw), *ut = strrchr(uf, ':'), *rt = strrchr(rw, ':');
	int in_type = rt && off >= ra[w] + (int)(rt - rw);
	if (in_type && ut && !strcmp(ut, rt))
		return ua[u] + (int)(ut - uw) + (off - ra[w] - (int)(rt - rw));
	return ua[u] + (int)(uf - uw);
}

int dw_translate(struct dw_obj *o, const char *def, char ***out,
		 struct dw_error *err)
{
	return translate(o, def, out, err, 0);
}

struct dw_cache {
	struct dw_cache *next;
	char *name;
	struct dw_obj *o;	/* NULL: it failed, with this error */
	struct dw_error err;
};

struct dw_obj *dw_cache_open(struct dw_cache **c, const char *obj, struct dw_error *err)
{
	for (struct dw_cache *e = *c; e; e = e->next)
		if (!strcmp(e->name, obj)) {
			if (!e->o)
				*err = e->err;
			return e->o;
		}
	struct dw_cache *e = calloc(1, sizeof *e);
	char *n = strdup(obj);
	if (!e || !n) {
		free(e);
		free(n);
		seterr(err, 0, "out of memory");
		return NULL;
	}
	e->o = dw_open(obj, &e->err);
	if (!e->o)
		*err = e->err;
	e->name = n;
	e->next = *c;
	*c = e;
	return e->o;
}

void dw_cache_free(struct dw_cache *c)
{
	while (c) {
		struct dw_cache *n = c->next;
		dw_close(c->o);
		free(c->name);
		free(c);
		c = n;
	}
}

int dw_def_object(const char *def, char *obj, size_t n)
{
	int at[2], len[2];
	if (split_words(def, at, len, 2) < 2 || (def[0] != 'p' && def[0] != 'r'))
		return 0;
	char place[1024];
	snprintf(place, sizeof place, "%.*s", len[1], def + at[1]);
	size_t pre = obj_prefix(place);
	if (!pre)
		return 0;
	snprintf(obj, n, "%.*s", (int)pre - 1, place);
	return 1;
}

/* an external function (DW_AT_external), for an inlined copy its origin's */
static int is_external(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	bool f = false;
	return dwarf_attr_integrate(die, DW_AT_external, &a) && dwarf_formflag(&a, &f) == 0 && f;
}

/*
 * The place of a raw definition "p[...] [OBJ:]SYM[+OFFS|%return] ..." into
 * place (OBJ, if any, NUL-ended there, *pre past it) when SYM is a C name:
 * its start, NUL-ended; NULL for any other place.
 */
static char *raw_symbol(const char *def, char place[1024], size_t *pre, int *len0)
{
	int at[3], len[3];
	if (split_words(def, at, len, 3) < 2 || (def[0] != 'p' && def[0] != 'r') ||
	    len[1] >= 1024)
		return NULL;
	*len0 = len[0];
	snprintf(place, 1024, "%.*s", len[1], def + at[1]);
	*pre = obj_prefix(place);
	if (*pre)
		place[*pre - 1] = 0;
	char *sym = place + *pre;
	size_t sl = strcspn(sym, "+%");
	if (!sl || isdigit((unsigned char)sym[0]))
		return NULL;
	for (size_t i = 0; i < sl; i++)
		if (!isalnum((unsigned char)sym[i]) && sym[i] != '_')
			return NULL;
	sym[sl] = 0;
	return sym;
}

int dw_symbol_in_tables(const char *obj, const char *def)
{
	char place[1024];
	size_t pre;
	int len0;
	const char *sym = raw_symbol(def, place, &pre, &len0);
	if (!sym)
		return 0;
	char *path = find_object(obj);
	struct elf_file ef;
	int found = 0;
	if (elf_open(path, 0, &ef) == 0) {
		found = elf_find(&ef, sym) != NULL;
		elf_close(&ef);
	}
	free(path);
	return found;
}

int dw_translate_symbol(struct dw_obj *o, const char *def, int any_function, char ***out,
			struct dw_error *err)
{
	char place[1024];
	size_t pre;
	int len0;
	/* SYM[+OFFS|%return]: a C name (a symbol the tables lack) */
	const char *sym = raw_symbol(def, place, &pre, &len0);
	if (!sym || !o->has_elf || (pre && !obj_is(o, place)) || elf_find(&o->elf, sym))
		return 0;
	struct insts s = { 0 };
	struct match m = { sym, NULL, &s, 0, -1 };
	walk_all(o, match_fn, &m);
	/* a C function of its own, or any of a library named by OBJ:; a C++
	 * function defined here, whose symbol is mangled (bump is
	 * _Z4bumpRlRK3DerOi: no table has "bump") */
	int known = 0;
	for (size_t i = 0; i < s.n; i++)
		known |= any_function || !is_external(&s.v[i].die) ||
			 (!s.v[i].inlined && is_cxx(&s.v[i].cu));
	free(s.v);
	if (!known)
		return 0;
	/* the raw grammar's default name, made explicit */
	struct ukpev_def *d;
	struct ukpev_error e;
	if (ukpev_def_parse(def, &d, &e) < 0)
		return 0;
	const struct ukpev_event_info *in = ukpev_def_info(d);
	char *named;
	int delta = 0;
	if (memchr(def, ':', (size_t)len0)) {
		named = strdup(def);
	} else {
		size_t n = strlen(def) + strlen(in->group) + strlen(in->event) + 3;
		named = malloc(n);
		int w = snprintf(named, n, "%.*s:%s/%s%s", len0, def, in->group, in->event,
				 def + len0);
		delta = w - (int)strlen(def);
	}
	ukpev_def_free(d);
	int r = translate(o, named, out, err, 1);
	if (r < 0)
		err->offset = err->offset >= len0 + delta ? err->offset - delta : 0;
	free(named);
	return r;
}

/* ---- -L and -V ------------------------------------------------------- */

/* the lines of a file (matching SRC) with code in [lo, hi], within DIE;
 * a function's entry row counts as its declaration's line (lo), as perf
 * shows it */
static void code_lines(Dwarf_Die *cu, const char *src, Dwarf_Die *within,
		       int lo, int hi, char *seen, char *path, size_t pn)
{
	Dwarf_Addr entry = 0;
	if (within && entry_pc(within, &entry) == 0)
		seen[0] = 1;
	Dwarf_Lines *lines;
	size_t n;
	if (dwarf_getsrclines(cu, &lines, &n) != 0)
		return;
	for (size_t i = 0; i < n; i++) {
		struct line_row row;
		line_row(lines, i, &row);
		Dwarf_Addr a = row.addr;
		int ln = row.line;
		const char *lf = row.file;
		if (!row.stmt || row.endseq || !lf || !tail_match(lf, src))
			continue;
		/* the file, though no line in [lo, hi] has code */
		if (!path[0])
			snprintf(path, pn, "%s", full_path(cu, lf));
		if (ln < lo || ln > hi)
			continue;
		if (within && (dwarf_haspc(within, a) <= 0 || a == entry))
			continue;
		seen[ln - lo] = 1;
	}
}

/* -L of a source not installed (libc6-dbg ships none) shows the numbers
 * alone, and says why on stderr */
static void note_unread_source(const char *path)
{
	load_source(path);
	if (src_nlines || !dw_note)
		return;
	char msg[4200];
	snprintf(msg, sizeof msg, "the source %.4000s cannot be read: only the "
		 "numbers of the lines that can be probed are shown", path);
	dw_note(msg);
}

/* -L as perf shows it: a header, then each line of the source, numbered
 * where it can be probed (relative to FUNC, or absolute for SRC:A[-B]) */
int dw_list_lines(struct dw_obj *o, const char *place, FILE *f,
		  struct dw_error *err)
{
	char buf[1024];
	snprintf(buf, sizeof buf, "%s", place);
	long lo = 0, hi = 0;
	char *colon = find_colon(buf);
	if (colon && !strchr(buf, '@') && (strchr(buf, '.') || strchr(buf, '/'))) {
		/* SRC:A[-B] */
		char *end;
		*colon = 0;
		lo = strtol(colon + 1, &end, 10);
		hi = lo;
		if (*end == '-')
			hi = strtol(end + 1, &end, 10);
		if (end == colon + 1 || *end || lo <= 0 || hi < lo || hi - lo > 100000 || hi > INT_MAX) {
			seterr(err, (int)(colon + 1 - buf), "Invalid line range");
			return -1;
		}
		char *seen = calloc((size_t)(hi - lo + 1), 1);
		char path[4096] = "";
		Dwarf_Die *cu = NULL;
		Dwarf_Addr b;
		while ((cu = dwfl_module_nextcu(o->mod, cu, &b)) != NULL)
			code_lines(cu, buf, NULL, (int)lo, (int)hi, seen, path, sizeof path);
		if (!path[0]) {
			free(seen);
			seterr(err, 0, "Source file is not found");
			return -1;
		}
		load_source(path);
		if (src_nlines && lo > src_nlines) {
			free(seen);
			seterr(err, (int)(colon + 1 - buf), "Line range is past the end of %.200s "
			       "(%d lines)", path, src_nlines);
			return -1;
		}
		fprintf(f, "<%s:%ld>\n", path, lo);
		note_unread_source(path);
		for (long l = lo; l <= hi; l++) {
			const char *t = source_line(path, (int)l);
			if (seen[l - lo])
				fprintf(f, "%7ld  %s", l, t);
			else
				fprintf(f, "         %s", t);
			if (!*t || t[strlen(t) - 1] != '\n')
				fputc('\n', f);
		}
		free(seen);
		return 0;
	}
	struct place pl;
	if (parse_place(place, &pl, err, 0) != 0)
		return -1;
	if (!pl.func[0]) {
		seterr(err, 0, "-L takes FUNC[@SRC] or SRC:LINE[-LINE]");
		return -1;
	}
	struct insts s = { 0 };
	struct match m = { pl.func, pl.src[0] ? pl.src : NULL, &s, 0, -1 };
	walk_all(o, match_fn, &m);
	if (!s.n && !pl.src[0])
		find_alias(o, pl.func, &s);
	if (!s.n) {
		seterr(err, 0, "Function %s is not found", pl.func);
		return -1;
	}
	/* the first concrete instance, relative to its declaration */
	struct inst *in = &s.v[0];
	for (size_t i = 0; i < s.n; i++)
		if (!s.v[i].inlined) {
			in = &s.v[i];
			break;
		}
	int dl = 0;
	dwarf_decl_line(&in->die, &dl);
	const char *df = decl_file(&in->die, &in->cu);
	enum { SPAN = 65536 };
	char *seen = calloc(SPAN, 1);
	char path[4096] = "";
	if (df)	/* dl <= INT_MAX: libdw's */
		code_lines(&in->cu, df, &in->die, dl, dl > INT_MAX - SPAN ? INT_MAX : dl + SPAN - 1,
			   seen, path, sizeof path);
	if (!path[0] && df)	/* no line of its own: its source all the same */
		snprintf(path, sizeof path, "%s", full_path(&in->cu, df));
	int maxl = -1;
	for (int i = 0; i < SPAN; i++)
		if (seen[i])
			maxl = i;
	fprintf(f, "<%s@%s:0>\n", pl.func, path[0] ? path : df ? df : "?");
	if (path[0])
		note_unread_source(path);
	for (int i = 0; i <= maxl; i++) {
		const char *t = path[0] ? source_line(path, dl + i) : "";
		if (seen[i])
			fprintf(f, "%7d  %s", i, t);
		else
			fprintf(f, "         %s", t);
		if (!*t || t[strlen(t) - 1] != '\n')
			fputc('\n', f);
	}
	free(seen);
	free(s.v);
	return 0;
}

/* -V as perf shows it: per address, the function symbol and offset,
 * then the variables with a location there (up to the innermost function
 * or inlined copy), "TYPE\tNAME" sorted */
int dw_list_vars(struct dw_obj *o, const char *place, FILE *f,
		 struct dw_error *err)
{
	struct place pl;
	if (parse_place(place, &pl, err, 0) != 0)
		return -1;
	struct site *sites;
	int n = resolve_place(o, &pl, &sites, err, 0);
	if (n < 0)
		return -1;
	/* perf's header, its "@" before a SRC:LINE included */
	if (pl.lazy[0])	/* the pattern left out, as perf does */
		fprintf(f, "Available variables at %s%s\n", pl.func[0] ? "" : "@",
			pl.func[0] ? pl.func : pl.src);
	else
		fprintf(f, "Available variables at %s%s\n", pl.func[0] ? "" : "@", place);
	for (int i = 0; i < n; i++) {
		Dwarf_Die *scopes;
		const struct elf_sym *sym = o->has_elf ? elf_lookup(&o->elf, sites[i].addr) : NULL;
		fprintf(f, "\t@<%s+%" PRIu64 ">\n", sym ? sym->name : "?",
			sym ? sites[i].addr - sym->value : sites[i].addr);
		int ns = scopes_at(&sites[i].in, sites[i].addr, &scopes);
		char **lines = NULL;
		size_t nl = 0;
		for (int s = 0; s < ns; s++) {
			Dwarf_Die c;
			int tag = dwarf_tag(&scopes[s]);
			if (dwarf_child(&scopes[s], &c) == 0)
				do {
					int t = dwarf_tag(&c);
					if (t != DW_TAG_formal_parameter && t != DW_TAG_variable)
						continue;
					const char *nm = dwarf_diename(&c);
					struct val v;
					char why[128], tn[512], line[1024];
					struct where wh = { sites[i].addr, 0 };
					if (!nm || eval_loc(o, &c, scopes, ns, &wh, &v,
							    why, sizeof why) != 0)
						continue;
					type_name(&c, tn, sizeof tn);
					snprintf(line, sizeof line, "%s\t%s", tn, nm);
					lines = realloc(lines, (nl + 1) * sizeof *lines);
					lines[nl++] = strdup(line);
				} while (dwarf_siblingof(&c, &c) == 0);
			if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine)
				break;
		}
		if (nl)	/* lines is NULL without them */
			qsort(lines, nl, sizeof *lines, cmp_str);
		for (size_t k = 0; k < nl; k++) {
			if (k == 0 || strcmp(lines[k], lines[k - 1]))
				fprintf(f, "\t\t%s\n", lines[k]);
		}
		if (!nl)
			fprintf(f, "\t\t(No matched variables)\n");
		for (size_t k = 0; k < nl; k++)
			free(lines[k]);
		free(lines);
		free(scopes);
	}
	free(sites);
	return 0;
}

/* A raw place in o as an address in its file: SYM[+OFFS] and
 * OBJ:SYM[+OFFS] (OBJ naming o) as OBJ:0xOFFSET, OBJ:0xN with o's name;
 * 0 with out written, or -1 (another object's, an address, unknown) */
int dw_raw_place(struct dw_obj *o, const char *place, char *out, size_t n)
{
	char p[1024];
	if (!o->has_elf || snprintf(p, sizeof p, "%s", place) >= (int)sizeof p)
		return -1;
	const char *ret = "";
	char *pct = strchr(p, '%');
	if (pct) {
		if (strcmp(pct, "%return"))
			return -1;
		*pct = 0;
		ret = "%return";
	}
	char *sym = p, *colon = strchr(p, ':');
	if (colon) {
		*colon = 0;
		if (!obj_is(o, p))
			return -1;
		sym = colon + 1;
		if (!strncmp(sym, "0x", 2)) {
			snprintf(out, n, "%s:%s%s", o->name, sym, ret);
			return 0;
		}
	}
	if (!*sym || (*sym >= '0' && *sym <= '9'))
		return -1;
	unsigned long offs = 0;
	char *plus = strchr(sym, '+');
	if (plus) {
		char *end;
		*plus = 0;
		offs = strtoul(plus + 1, &end, 0);
		if (*end)
			return -1;
	}
	const struct elf_sym *es = elf_find(&o->elf, sym);
	if (!es || !es->value || offs > UINT64_MAX - es->value)
		return -1;
	uint64_t foff = elf_vaddr_to_off(o->path, es->value + offs);
	if (!foff || foff == UINT64_MAX)	/* in no segment */
		return -1;
	snprintf(out, n, "%s:0x%" PRIx64 "%s", o->name, foff, ret);
	return 0;
}
