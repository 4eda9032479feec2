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

/* where set, told what a translation leaves out (a member of a struct
 * fetched whole that cannot be fetched there), one message a call */
extern void (*dw_note)(const char *msg);

/* translates DEF into raw definitions: *out (malloc'd array of malloc'd
 * strings), their count returned; -1 with err set (offset into DEF) */
int dw_translate(struct dw_obj *o, const char *def, char ***out,
		 struct dw_error *err);

/* objects opened by name, each once (NULL: none yet); dw_cache_open
 * returns the one named OBJ, or NULL with err set */
struct dw_cache;
struct dw_obj *dw_cache_open(struct dw_cache **c, const char *obj, struct dw_error *err);
void dw_cache_free(struct dw_cache *c);

/* the object a definition's place begins with (OBJ:FUNC..., OBJ:SRC:LINE,
 * the translation reading that object's debug information) written to
 * obj: 1; 0 when it names none */
int dw_def_object(const char *def, char *obj, size_t n);

/* a raw definition whose place is SYM[+OFFS|%return] (OBJ:SYM... naming o)
 * that o's symbol tables lack but its debug information knows as a
 * function (an inlined one, one without a symbol; any_function 0: only a
 * function of o's own, not external), translated at every copy's first
 * byte, the raw default event name kept: the count as dw_translate's; 0
 * when DEF is not such a definition */
/* 1 when the raw definition's SYM is in OBJ's symbol tables (nothing
 * for DWARF to add: dw_translate_symbol would give it back) */
int dw_symbol_in_tables(const char *obj, const char *def);
int dw_translate_symbol(struct dw_obj *o, const char *def, int any_function, char ***out,
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
