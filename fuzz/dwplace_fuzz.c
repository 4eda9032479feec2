/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the source-level place parser of ukprobe (cli/dwarf.c,
 * included whole: its parser is static): perf probe's places
 * (FUNC[@SRC][:RELLINE|+OFFS|%return|;PATTERN], SRC:LINE, SRC;PATTERN) with
 * C++ names (brackets, operators), the test of whether a definition is
 * source-level, the OBJ: it may begin with, the splitting of a definition into words (a place may be
 * quoted or escaped, as perf probe's), and the comparison of C++ names in
 * one spelling.  An input
 * is a place, optionally followed by a newline and a name to compare it
 * with.  Nothing may crash, leak, hang or read out of bounds; an error must
 * carry an offset inside the place.
 */
#include "../cli/dwarf.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 2048)
		return 0;
	char *text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	char *other = strchr(text, '\n');
	if (other)
		*other++ = 0;
	struct place pl;
	struct dw_error err = { "", 0 };
	if (parse_place(text, &pl, &err, 0) < 0) {
		if (err.offset < 0 || (size_t)err.offset > strlen(text))
			abort();
	}
	char def[2100];
	snprintf(def, sizeof(def), "p %s", text);
	(void)dw_is_source_level(def);
	/* the OBJ: a place may begin with: a prefix of the place's word */
	char obj[1024];
	if (dw_def_object(def, obj, sizeof obj) &&
	    (!obj[0] || strncmp(def + 2 + strspn(def + 2, " \t"), obj, strlen(obj))))
		abort();
	int at[160], len[160];
	int nw = split_words(def, at, len, 160);
	for (int k = 0; k < nw; k++)
		if (at[k] < 0 || len[k] <= 0 || (size_t)(at[k] + len[k]) > strlen(def))
			abort();
	if (other) {
		int a = name_eq(text, other), b = name_eq(text, text);
		if (a < 0 || b < 0)
			abort();
	}
	free(text);
	return 0;
}
