/* SPDX-License-Identifier: MIT */
/*
 * Every fetch form and type, and what the kernel prints for them:
 *   fetch defs   the definitions to trace it with, one per line
 *   fetch run    calls take() (and a return probe's worth of it) with
 *                known values, then with an unreadable pointer, printing
 *                before each call "EXPECT <event> <args as ftrace prints
 *                them>"
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

struct rec {
	uint8_t u8;
	int8_t s8;
	uint16_t u16;
	int16_t s16;
	uint32_t u32;
	int32_t s32;
	uint64_t u64;
	int64_t s64;
	char name[40];
	uint32_t bits;
	uint16_t arr[4];
	const char *strp;
	struct rec *next;
	void (*fn)(void);
};
_Static_assert(offsetof(struct rec, u32) == 8, "layout");
_Static_assert(offsetof(struct rec, name) == 32, "layout");
_Static_assert(offsetof(struct rec, bits) == 72, "layout");
_Static_assert(offsetof(struct rec, arr) == 76, "layout");
_Static_assert(offsetof(struct rec, strp) == 88, "layout");
_Static_assert(offsetof(struct rec, next) == 96, "layout");
_Static_assert(offsetof(struct rec, fn) == 104, "layout");

int64_t gdata = -1234567890123LL;
const char *gstrp = "global string";

__attribute__((noinline)) void marker_fn(void)
{
	__asm__ volatile("");
}

__attribute__((noinline)) long take(struct rec *r, long a2, long a3, long a4,
				    long a5, long a6, long a7, long a8)
{
	/* every argument used: no compiler may leave one unset */
	__asm__ volatile("" ::"r"(r), "r"(a3), "r"(a4), "r"(a5), "r"(a6), "r"(a7));
	return a2 ^ a8;
}

static const char *const defs[] = {
	"p:t/take take u8=+0(%di):u8 s8=+1(%di):s8 u16=+2(%di):u16 s16=+4(%di):s16"
	" u32=+8(%di):u32 s32=+12(%di):s32 u64=+16(%di):u64 s64=+24(%di):s64"
	" x8=+0(%di):x8 x16=+2(%di):x16 x32=+8(%di):x32 x64=+16(%di):x64 def=+16(%di)"
	" name=+32(%di):string us=+32(%di):ustring ch=+32(%di):char"
	" bf=+72(%di):b4@3/32 arr=+76(%di):u16[4] sarr=+32(%di):char[3]"
	" sp=+0(+88(%di)):string nx=+16(+96(%di)):u64 deep=+0(+88(+96(%di))):string",
	"p:t/args take a1=$arg1 a2=$arg2:s64 a6=$arg6:s64 a7=$arg7:s64 a8=$arg8:s64"
	" si=%si:s64 st1=$stack1:s64 st2=$stack2:s64 comm=$comm imm=\\42 ims=\\\"lit\""
	" fn=+104(%di):symbol fs=+104(%di):symstr",
	"r:t/ret take rv=$retval:s64 a2=$arg2:s64 a8=$arg8:u32",
	/* a data symbol of the executable's .symtab (not exported) */
	"p:t/data take g=@gdata:s64 gx=@gdata gp=+0(@gstrp):string",
};

static void expect(struct rec *r, long a2, long a8)
{
	/* arguments a3..a7 are a2+1..a2+5 */
	if (r) {
		printf("EXPECT take u8=%u s8=%d u16=%u s16=%d u32=%u s32=%d u64=%llu s64=%lld"
		       " x8=0x%x x16=0x%x x32=0x%x x64=0x%llx def=0x%llx"
		       " name=\"%s\" us=\"%s\" ch='%c' bf=%u arr={%u,%u,%u,%u}"
		       " sarr={'%c','%c','%c'} sp=\"%s\" nx=%llu deep=\"%s\"\n",
		       r->u8, r->s8, r->u16, r->s16, r->u32, r->s32,
		       (unsigned long long)r->u64, (long long)r->s64, r->u8, r->u16, r->u32,
		       (unsigned long long)r->u64, (unsigned long long)r->u64, r->name, r->name,
		       r->name[0], (r->bits >> 3) & 0xf, r->arr[0], r->arr[1], r->arr[2],
		       r->arr[3], r->name[0], r->name[1], r->name[2], r->strp,
		       (unsigned long long)r->next->u64, r->next->strp);
		printf("EXPECT args a1=0x%lx a2=%ld a6=%ld a7=%ld a8=%ld si=%ld st1=%ld st2=%ld"
		       " comm=\"fetchtarget\" imm=0x2a ims=\"lit\""
		       " fn=marker_fn+0x0/0x fs=\"marker_fn+0x0/0x\"\n",
		       (unsigned long)r, a2, a2 + 4, a2 + 5, a8, a2, a2 + 5, a8);
	} else {
		/* memory that cannot be read: (fault), never a crash */
		printf("EXPECT take u8=(fault) s8=(fault) u16=(fault) s16=(fault)"
		       " u32=(fault) s32=(fault) u64=(fault) s64=(fault) x8=(fault)"
		       " x16=(fault) x32=(fault) x64=(fault) def=(fault) name=(fault)"
		       " us=(fault) ch=(fault) bf=(fault) arr=(fault) sarr=(fault)"
		       " sp=(fault) nx=(fault) deep=(fault)\n");
		printf("EXPECT args a1=0x10 a2=%ld a6=%ld a7=%ld a8=%ld si=%ld st1=%ld st2=%ld"
		       " comm=\"fetchtarget\" imm=0x2a ims=\"lit\""
		       " fn=(fault) fs=(fault)\n", a2, a2 + 4, a2 + 5, a8, a2, a2 + 5, a8);
	}
	printf("EXPECT data g=%lld gx=0x%llx gp=\"%s\"\n", (long long)gdata,
	       (unsigned long long)gdata, gstrp);
	printf("EXPECT ret rv=%ld a2=%ld a8=%u\n", a2 ^ a8, a2, (unsigned)a8);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "defs")) {
		for (size_t k = 0; k < sizeof defs / sizeof *defs; k++)
			printf("%s\n", defs[k]);
		return 0;
	}
	prctl(PR_SET_NAME, "fetchtarget");
	static struct rec next = { .u64 = 987654321987ull, .strp = "deeper string" };
	static struct rec r = {
		.u8 = 200, .s8 = -100, .u16 = 60000, .s16 = -30000,
		.u32 = 4000000000u, .s32 = -2000000000, .u64 = 18000000000000000000ull,
		.s64 = -9000000000000000000ll, .name = "a name, \"quoted\"",
		.bits = 0x5a, .arr = { 1, 65535, 300, 7 }, .strp = "pointed to",
		.next = &next, .fn = marker_fn,
	};
	expect(&r, -42, 0x1234567890abcdefl);
	take(&r, -42, -41, -40, -39, -38, -37, 0x1234567890abcdefl);
	/* a pointer into nothing: every memory fetch faults */
	expect(NULL, 7, 8);
	take((struct rec *)16, 7, 8, 9, 10, 11, 12, 8);
	return 0;
}
