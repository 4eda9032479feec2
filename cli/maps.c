/* SPDX-License-Identifier: MIT */
/*
 * The target's objects as /proc/PID/maps lists them: for each file its
 * address range and its load bias (the start of its offset-0 mapping less
 * the first PT_LOAD's p_vaddr - p_offset).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "elf.h"
#include "maps.h"

/* The object a mapping at lo with file offset off belongs to: one
 * starting there (an offset-0 mapping starts an object, even right after
 * another mapping of the same file), or for a later mapping the one whose
 * range it continues. */
static struct map_obj *find_same(struct map_set *s, const char *path, uint64_t lo,
				 unsigned long off)
{
	for (size_t k = s->n; k-- > 0;)
		if (!strcmp(s->obj[k].path, path) &&
		    (off == 0 ? lo == s->obj[k].lo : lo >= s->obj[k].lo && lo <= s->obj[k].hi))
			return &s->obj[k];
	return NULL;
}

int maps_read(pid_t pid, struct map_set *s)
{
	char fn[64], exe[PATH_MAX] = "";
	snprintf(fn, sizeof fn, "/proc/%d/exe", (int)pid);
	ssize_t el = readlink(fn, exe, sizeof exe - 1);
	exe[el > 0 ? el : 0] = 0;
	snprintf(fn, sizeof fn, "/proc/%d/maps", (int)pid);
	FILE *f = fopen(fn, "re");
	if (!f)
		return -errno;
	char line[PATH_MAX + 128];
	size_t first = s->n;	/* the objects this read adds */
	unsigned char *code = NULL;
	while (fgets(line, sizeof line, f)) {
		unsigned long lo, hi, off;
		char perm[8];
		int pos = 0;
		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &lo, &hi, perm, &off, &pos) < 4 ||
		    !pos)
			continue;
		char *path = line + pos;
		path[strcspn(path, "\n")] = 0;
		if (path[0] != '/')
			continue;
		struct map_obj *o = find_same(s, path, lo, off);
		if (!o && off != 0)
			continue;	/* a later mapping of an object not seen */
		if (o) {
			if (hi > o->hi)
				o->hi = hi;
			if (o >= s->obj + first && strchr(perm, 'x'))
				code[o - s->obj - first] = 1;
			continue;
		}
		struct elf_file ef;
		if (elf_open(path, 1, &ef) < 0)
			continue;	/* not ELF: a data file */
		struct map_obj *n = realloc(s->obj, (s->n + 1) * sizeof *n);
		if (!n) {
			elf_close(&ef);
			break;
		}
		unsigned char *nc = realloc(code, s->n + 1 - first);
		if (!nc) {
			elf_close(&ef);
			break;
		}
		code = nc;
		code[s->n - first] = strchr(perm, 'x') != NULL;
		s->obj = n;
		o = &s->obj[s->n++];
		*o = (struct map_obj){
			.path = strdup(path), .lo = lo, .hi = hi,
			.base = ef.is_dyn ? lo - ef.first_vaddr : 0,
			.main_exe = !strcmp(path, exe),
		};
		elf_close(&ef);
	}
	fclose(f);
	/* a file with no code mapped is not a loaded object but a file
	 * read through mmap (ukprobes' symbol reader maps libc.so.6 so, a
	 * debugger would): taken for one, its "base" is no place to call */
	size_t kept = first;
	for (size_t k = first; k < s->n; k++) {
		if (code[k - first])
			s->obj[kept++] = s->obj[k];
		else
			free(s->obj[k].path);
	}
	s->n = kept;
	free(code);
	return 0;
}

void maps_free(struct map_set *s)
{
	for (size_t k = 0; k < s->n; k++)
		free(s->obj[k].path);
	free(s->obj);
	s->obj = NULL;
	s->n = 0;
}

const struct map_obj *maps_find(const struct map_set *s, const char *name)
{
	for (size_t k = 0; k < s->n; k++) {
		const char *p = s->obj[k].path;
		const char *b = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
		if (!strcmp(p, name) || !strcmp(b, name))
			return &s->obj[k];
	}
	return NULL;
}
