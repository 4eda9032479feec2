/* SPDX-License-Identifier: MIT */
/*
 * Source-level places and variables: a definition written as `perf probe`
 * writes it (FUNC[@SRC][:RELLINE|+OFFS|%return], SRC:LINE; variables,
 * their fields and elements, $params, $vars) is translated, through the
 * object's DWARF (libdw), into definitions of the raw grammar.
 */
#ifndef UKPROBE_DWARF_H
#define UKPROBE_DWARF_H
#include <stdio.h>

struct dw_obj;

/* the error of a failed call: message and the offset in the text */
struct dw_error {
	char msg[256];
	int offset;
};

/* opens OBJ (a path, or a library name such as libc.so.6) and its debug
 * information (its own, or the build-id debug file); NULL with err set */
struct dw_obj *dw_open(const char *obj, struct dw_error *err);
void dw_close(struct dw_obj *o);

/* does this definition need translating (a source-level place or a
 * variable fetch)? */
int dw_is_source_level(const char *def);
/* a raw place of o (SYM[+OFFS], OBJ:SYM[+OFFS], OBJ:0xN) as OBJ:0xOFFSET:
 * 0, or -1 when it is not o's or not known there */
int dw_raw_place(struct dw_obj *o, const char *place, char *out, size_t n);

/* translates DEF into raw definitions: *out (malloc'd array of malloc'd
 * strings), their count returned; -1 with err set (offset into DEF) */
int dw_translate(struct dw_obj *o, const char *def, char ***out,
		 struct dw_error *err);

/* the offset in DEF (as given to dw_translate) of what is at offset OFF
 * of RAW, one of the definitions DEF became: errors found in RAW are
 * shown in what was written */
int dw_map_offset(const char *def, const char *raw, int off);

/* -F: functions matching GLOB (NULL: all), sorted, one a line */
int dw_list_funcs(struct dw_obj *o, const char *glob, FILE *f);
/* -L: the lines of PLACE that can be probed */
int dw_list_lines(struct dw_obj *o, const char *place, FILE *f,
		  struct dw_error *err);
/* -V: the variables visible at PLACE, with their types */
int dw_list_vars(struct dw_obj *o, const char *place, FILE *f,
		 struct dw_error *err);
#endif
