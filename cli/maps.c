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

static struct map_obj *find_same(struct map_set *s, const char *path, uint64_t lo)
{
	for (size_t k = 0; k < s->n; k++)
		if (!strcmp(s->obj[k].path, path) &&
		    lo >= s->obj[k].lo && lo <= s->obj[k].hi)
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
		struct map_obj *o = find_same(s, path, lo);
		if (!o && off != 0)
			continue;	/* a later mapping of an object not seen */
		if (o) {
			if (hi > o->hi)
				o->hi = hi;
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
