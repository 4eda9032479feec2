/* SPDX-License-Identifier: MIT */
/* The target's loaded objects, from /proc/PID/maps. */
#ifndef UKPROBE_MAPS_H
#define UKPROBE_MAPS_H
#include <stdint.h>
#include <sys/types.h>

struct map_obj {
	char *path;		/* as in maps */
	uint64_t lo, hi;	/* the range its mappings span */
	uint64_t base;		/* load bias: address = base + st_value */
	int main_exe;
	int logged;		/* from the target's own log of its loads */
};

struct map_set {
	struct map_obj *obj;
	size_t n;
};

/* adds the file-backed objects of /proc/PID/maps not yet in set (by path
 * and range); 0 or -errno */
int maps_read(pid_t pid, struct map_set *set);
void maps_free(struct map_set *set);
/* the object whose file's base name or path is name */
const struct map_obj *maps_find(const struct map_set *set, const char *name);
#endif
