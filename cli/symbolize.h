/* SPDX-License-Identifier: MIT */
/* Addresses of the target as sym+0xOFF/0xSIZE [object]. */
#ifndef UKPROBE_SYMBOLIZE_H
#define UKPROBE_SYMBOLIZE_H
#include <stddef.h>
#include <sys/types.h>
#include "maps.h"

struct symbolizer;
struct ukpev_reader;
/* rd (may be NULL): the target's log of the objects it loaded, which
 * outlives the target and its mappings */
struct symbolizer *sym_new(pid_t pid, struct ukpev_reader *rd);
void sym_free(struct symbolizer *s);
/* re-reads the target's maps (objects loaded since), while it lives */
void sym_refresh(struct symbolizer *s);
void sym_set_dead(struct symbolizer *s);
/* with_off: "sym+0xOFF/0xSIZE", else "sym"; then " [object]" when
 * with_obj has SYM_OBJ and the object is not the main executable; when
 * no symbol covers addr, "PATH[+0xOFF]" if with_obj has
 * SYM_UNKNOWN_IN_OBJ and an object does (OFF: addr less its load bias),
 * else "0x...".  Returns the length. */
#define SYM_OBJ 1
#define SYM_UNKNOWN_IN_OBJ 2
int sym_format(struct symbolizer *s, unsigned long addr, int with_off,
	       int with_obj, char *buf, size_t n);
/* a frame of a folded stack: the function's name, demangled (C++), with
 * no offset and no object; PATH[+0xOFF] where no symbol covers addr */
int sym_folded(struct symbolizer *s, unsigned long addr, char *buf, size_t n);
/* the callback for ukpev_format_args (symbol, symstr types) */
int sym_cb(unsigned long addr, char *buf, size_t n, void *arg);
#endif
