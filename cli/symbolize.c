/* SPDX-License-Identifier: MIT */
/*
 * Symbolisation from the ELF files of the target's mappings.  The object
 * list is read from /proc/PID/maps at arming (the program is held before
 * main then) and again when an address falls in no known object while
 * the target lives; the files themselves are read only when first
 * needed, so a target that has exited is still symbolised.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ukprobes/events.h>

#include "elf.h"
#include "symbolize.h"

struct symbolizer {
	pid_t pid;
	int dead;
	struct ukpev_reader *rd;
	unsigned nlog;			/* rd's objects merged */
	struct map_set maps;
	struct elf_file *elf;	/* per maps.obj, loaded on demand */
	char *loaded;
	size_t cap;
	double last_refresh;
};

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void grow(struct symbolizer *s)
{
	if (s->maps.n <= s->cap)
		return;
	s->elf = realloc(s->elf, s->maps.n * sizeof *s->elf);
	s->loaded = realloc(s->loaded, s->maps.n);
	if (!s->elf || !s->loaded)
		abort();
	memset(s->elf + s->cap, 0, (s->maps.n - s->cap) * sizeof *s->elf);
	memset(s->loaded + s->cap, 0, s->maps.n - s->cap);
	s->cap = s->maps.n;
}

struct symbolizer *sym_new(pid_t pid, struct ukpev_reader *rd)
{
	struct symbolizer *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->pid = pid;
	s->rd = rd;
	maps_read(pid, &s->maps);
	grow(s);
	s->last_refresh = now();
	return s;
}

void sym_refresh(struct symbolizer *s)
{
	if (s->dead)
		return;
	maps_read(s->pid, &s->maps);
	grow(s);
	s->last_refresh = now();
}

void sym_set_dead(struct symbolizer *s)
{
	s->dead = 1;
}

void sym_free(struct symbolizer *s)
{
	if (!s)
		return;
	for (size_t k = 0; k < s->cap; k++)
		if (s->loaded[k] == 1)
			elf_close(&s->elf[k]);
	free(s->elf);
	free(s->loaded);
	maps_free(&s->maps);
	free(s);
}

/* The object last loaded at addr: the target's log of its loads is in
 * load order and complete, so its latest entry there wins; the maps read
 * here and there, only for what the log does not have. */
static int find(struct symbolizer *s, unsigned long addr)
{
	for (int logged = 1; logged >= 0; logged--)
		for (size_t k = s->maps.n; k-- > 0;)
			if (s->maps.obj[k].logged == logged && addr >= s->maps.obj[k].lo &&
			    addr < s->maps.obj[k].hi)
				return (int)k;
	return -1;
}

/* the objects the target logged since the last call, not in maps yet */
static void merge_log(struct symbolizer *s)
{
	struct ukpev_object o;
	while (s->rd && ukpev_reader_object(s->rd, s->nlog, &o) == 0) {
		s->nlog++;
		struct map_obj *v = realloc(s->maps.obj, (s->maps.n + 1) * sizeof *v);
		if (!v)
			abort();
		s->maps.obj = v;
		v[s->maps.n] = (struct map_obj){ strdup(o.path), o.lo, o.hi, o.bias, 0, 1 };
		if (!v[s->maps.n].path)
			abort();
		s->maps.n++;
	}
	grow(s);
}

int sym_format(struct symbolizer *s, unsigned long addr, int with_off,
	       int with_obj, char *buf, size_t n)
{
	merge_log(s);	/* one load of a counter when nothing is new */
	int k = find(s, addr);
	if (k < 0 && !s->dead && now() - s->last_refresh > 0.05) {
		sym_refresh(s);
		k = find(s, addr);
	}
	const struct elf_sym *sym = NULL;
	const struct map_obj *o = k >= 0 ? &s->maps.obj[k] : NULL;
	if (o) {
		if (!s->loaded[k]) {
			char path[4200];
			snprintf(path, sizeof path, "/proc/%d/root%s", (int)s->pid, o->path);
			s->loaded[k] = (elf_open(o->path, 0, &s->elf[k]) == 0 ||
					(!s->dead && elf_open(path, 0, &s->elf[k]) == 0)) ? 1 : 2;
		}
		if (s->loaded[k] == 1)
			sym = elf_lookup(&s->elf[k], addr - o->base);
	}
	if (!sym && o && (with_obj & SYM_UNKNOWN_IN_OBJ))
		/* the kernel's sym-userobj form, the offset in the file's
		 * own addresses (what addr2line and objdump take): stable
		 * across runs, where the address itself moves with ASLR */
		return snprintf(buf, n, "%s[+0x%lx]", o->path, (unsigned long)(addr - o->base));
	if (!sym)
		return snprintf(buf, n, "0x%lx", addr);
	int len;
	if (with_off)
		len = snprintf(buf, n, "%s+0x%lx/0x%lx", sym->name,
			       (unsigned long)(addr - o->base - sym->value),
			       (unsigned long)sym->size);
	else
		len = snprintf(buf, n, "%s", sym->name);
	if ((with_obj & SYM_OBJ) && !o->main_exe && len >= 0 && (size_t)len < n) {
		const char *b = strrchr(o->path, '/') ? strrchr(o->path, '/') + 1 : o->path;
		len += snprintf(buf + len, n - (size_t)len, " [%s]", b);
	}
	return len;
}

/* the C++ runtime's demangler (libstdc++, the Itanium ABI's), linked in */
char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

int sym_folded(struct symbolizer *s, unsigned long addr, char *buf, size_t n)
{
	sym_format(s, addr, 0, SYM_UNKNOWN_IN_OBJ, buf, n);
	if (!strncmp(buf, "_Z", 2)) {
		int st = -1;
		char *d = __cxa_demangle(buf, NULL, NULL, &st);
		if (d && st == 0)
			snprintf(buf, n, "%s", d);
		free(d);
	}
	for (char *p = buf; (p = strchr(p, ';')) != NULL;)
		*p = ':';	/* the frame separator */
	return (int)strlen(buf);
}

int sym_cb(unsigned long addr, char *buf, size_t n, void *arg)
{
	struct symbolizer *s = arg;
	int len = sym_format(s, addr, 1, 0, buf, n);
	if (len > 1 && !strncmp(buf, "0x", 2) && buf[2] != 0 &&
	    strspn(buf + 2, "0123456789abcdef") == strlen(buf + 2)) {
		if (n)
			buf[0] = 0;
		return 0;
	}
	return len;
}
