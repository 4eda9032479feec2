/* SPDX-License-Identifier: MIT */
/*
 * kprobe_offset: probes a function of this very program by name, once at
 * its entry and once at an offset inside it (symbol_name + offset), then
 * shows disable_kprobe()/enable_kprobe() and the nmissed counter.
 *
 *	kprobe_offset
 *
 * The probed function, word_count(), is an ordinary global function of
 * the executable.  The executable is not linked with -rdynamic, so the
 * name is not in its dynamic symbol table: ukprobes finds it in .symtab
 * (a stripped copy of this program would get -ENOENT).
 *
 * Without a disassembler this program does not know where word_count's
 * fourth instruction starts, so it asks ukprobes: it tries offsets 1, 2,
 * 3, ... and register_kprobe() refuses every offset that is not an
 * instruction boundary with -EILSEQ.  The fourth instruction is still in
 * the function's first basic block (prologue, first load) with gcc and
 * clang at -O2, so it runs exactly once per call, as the checks expect.
 *
 * Exits 0 if every step behaved as the kprobes documentation says.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <ukprobes.h>

/* Keep word_count a real, separate function that every call enters. */
#if defined(__clang__)
#define PROBED __attribute__((noinline, used))
#else
#define PROBED __attribute__((noipa, used))
#endif

PROBED size_t word_count(const char *s);

size_t word_count(const char *s)
{
	size_t n = 0;
	int in_word = 0;

	for (; *s; s++) {
		if (isspace((unsigned char)*s)) {
			in_word = 0;
		} else if (!in_word) {
			in_word = 1;
			n++;
		}
	}
	return n;
}

static volatile unsigned long entry_hits, inner_hits;
static volatile int call_from_handler;
static int failures;

/*
 * Copies the string at user address src into buf for printing, a byte at
 * a time with copy_from_user_nofault(), so that a bad pointer prints as
 * such instead of crashing inside the handler.
 */
static const char *peek_string(unsigned long src, char *buf, size_t size)
{
	size_t i;

	for (i = 0; i + 1 < size; i++) {
		if (copy_from_user_nofault(&buf[i], (const char *)src + i, 1))
			return "<unreadable>";
		if (!buf[i])
			return buf;
	}
	buf[i] = '\0';
	return buf;
}

static int entry_pre(struct kprobe *p, struct pt_regs *regs)
{
	char text[48];

	entry_hits++;
	printf("  <%s+0x%x> word_count(\"%s\")\n", p->symbol_name, p->offset,
	       peek_string(regs->di, text, sizeof(text)));
	if (call_from_handler) {
		/*
		 * Calling the probed function from a handler: its probes are
		 * hit while this handler runs, so they fire no handler and
		 * count a miss instead (struct kprobe's nmissed).
		 */
		call_from_handler = 0;
		printf("  <%s+0x%x>   the handler itself calls word_count(\"a nested call\") = %zu\n",
		       p->symbol_name, p->offset, word_count("a nested call"));
	}
	return 0;
}

static int inner_pre(struct kprobe *p, struct pt_regs *regs)
{
	inner_hits++;
	printf("  <%s+0x%x> ip = %#lx (p->addr = %p), di = %#lx\n",
	       p->symbol_name, p->offset, regs->ip, (void *)p->addr, regs->di);
	return 0;
}

static struct kprobe entry = {
	.symbol_name = "word_count",
	.offset = 0,
	.pre_handler = entry_pre,
};
static struct kprobe inner;

static void expect(const char *what, unsigned long got, unsigned long want)
{
	if (got == want)
		return;
	printf("UNEXPECTED: %s is %lu, should be %lu\n", what, got, want);
	failures++;
}

static void count(const char *s)
{
	printf("main: word_count(\"%s\")\n", s);
	printf("main:   = %zu\n", word_count(s));
}

/*
 * Registers inner on word_count's fourth instruction (the prologue and the
 * first load of any sane compile: run on every call).  Offsets inside an
 * instruction are refused with -EILSEQ; a boundary before the fourth is
 * registered and unregistered again on the way.
 */
static int register_inner(void)
{
	int boundaries = 1, ret = -EILSEQ;

	/* x86 instructions are at most 15 bytes long. */
	for (unsigned int off = 1; off <= 3 * 15; off++) {
		inner = (struct kprobe){
			.symbol_name = "word_count",
			.offset = off,
			.pre_handler = inner_pre,
		};
		ret = register_kprobe(&inner);
		if (ret == -EILSEQ) {
			printf("  word_count+0x%x: -EILSEQ, not an instruction boundary\n", off);
			continue;
		}
		if (ret < 0)
			break;
		if (++boundaries == 4)
			break;
		printf("  word_count+0x%x: instruction %d starts here; keep looking\n",
		       off, boundaries);
		unregister_kprobe(&inner);
	}
	if (ret < 0) {
		fprintf(stderr, "register_kprobe(\"word_count\"+0x%x) failed, returned %d (%s)\n",
			inner.offset, ret, strerror(-ret));
		return ret;
	}
	printf("  word_count+0x%x: instruction 4; registered, p->addr = %p\n",
	       inner.offset, (void *)inner.addr);
	if ((char *)inner.addr != (char *)word_count + inner.offset) {
		printf("UNEXPECTED: p->addr should be word_count + 0x%x = %p\n",
		       inner.offset, (void *)((char *)word_count + inner.offset));
		failures++;
	}
	return 0;
}

int main(void)
{
	struct kprobe *both[] = { &entry, &inner };
	int ret;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("word_count() is at %p in this program\n\n", (void *)word_count);

	printf("1. Probes by name.  One at the entry of word_count():\n"
	       "   { .symbol_name = \"word_count\" }\n");
	ret = register_kprobe(&entry);
	if (ret < 0) {
		fprintf(stderr, "register_kprobe(\"word_count\") failed, returned %d (%s)\n",
			ret, strerror(-ret));
		return 1;
	}
	printf("  registered, p->addr = %p\n", (void *)entry.addr);
	printf("   and one on its fourth instruction:\n"
	       "   { .symbol_name = \"word_count\", .offset = N }\n"
	       "   where N is found by asking register_kprobe() about N = 1, 2, ...\n");
	if (register_inner() < 0) {
		unregister_kprobe(&entry);
		return 1;
	}
	count("the quick brown fox");
	count("  jumps over   the lazy dog ");
	expect("entry hits", entry_hits, 2);
	expect("inner hits", inner_hits, 2);

	printf("\n2. disable_kprobe(inner): it stays registered but does not fire\n");
	ret = disable_kprobe(&inner);
	if (ret < 0) {
		fprintf(stderr, "disable_kprobe failed: %s\n", strerror(-ret));
		failures++;
	}
	printf("  inner.flags = %#x%s\n", inner.flags,
	       inner.flags & KPROBE_FLAG_DISABLED ? " (KPROBE_FLAG_DISABLED)" : "");
	printf("  kprobes_list():\n");
	fflush(stdout);
	kprobes_list(stdout);
	count("only the entry probe fires");
	expect("entry hits", entry_hits, 3);
	expect("inner hits", inner_hits, 2);

	printf("\n   enable_kprobe(inner): both fire again\n");
	ret = enable_kprobe(&inner);
	if (ret < 0) {
		fprintf(stderr, "enable_kprobe failed: %s\n", strerror(-ret));
		failures++;
	}
	count("both probes fire");
	expect("entry hits", entry_hits, 4);
	expect("inner hits", inner_hits, 3);

	printf("\n3. nmissed: a probe hit while a handler of the same thread runs\n"
	       "   fires no handler; it counts a miss instead\n");
	printf("  before: entry.nmissed = %lu, inner.nmissed = %lu\n",
	       entry.nmissed, inner.nmissed);
	call_from_handler = 1;
	count("the entry handler calls word_count");
	printf("  after:  entry.nmissed = %lu, inner.nmissed = %lu\n",
	       entry.nmissed, inner.nmissed);
	expect("entry hits", entry_hits, 5);
	expect("inner hits", inner_hits, 4);
	expect("entry.nmissed", entry.nmissed, 1);
	expect("inner.nmissed", inner.nmissed, 1);

	printf("\n4. unregister_kprobes() removes both; no handler runs any more\n");
	unregister_kprobes(both, 2);
	count("no probes left");
	expect("entry hits", entry_hits, 5);
	expect("inner hits", inner_hits, 4);

	if (failures) {
		printf("\n%d unexpected results\n", failures);
		return 1;
	}
	printf("\nall as expected\n");
	return 0;
}
