/* SPDX-License-Identifier: MIT */
/*
 * The "floorz" row's target (ukp-bench.c), in a shared object of its own:
 * the engine decides per object whether code may keep values in zmm16-31
 * and the opmasks (AVX-512 code anywhere in it), so this stub, which
 * saves them, would make every other row's probes in ukp-bench keep them
 * too.  ukp-bench dlopen()s it where the CPU has AVX-512.
 */
#include "../floor.h"

/* "floorz": the same on AVX-512, where a detour must keep zmm0-31 and the
 * opmasks (kmovw: AVX512F alone; the width costs nothing here) */
#define Z1(i) "	vmovdqu64 %zmm" #i ", " #i "*64+64(%rsp)\n"
#define ZL1(i) "	vmovdqu64 " #i "*64+64(%rsp), %zmm" #i "\n"
#define K1(i) "	kmovw %k" #i ", 2112+" #i "*8(%rsp)\n"
#define KL1(i) "	kmovw 2112+" #i "*8(%rsp), %k" #i "\n"
#define ZMM32 Z1(0) Z1(1) Z1(2) Z1(3) Z1(4) Z1(5) Z1(6) Z1(7) Z1(8) Z1(9) \
	Z1(10) Z1(11) Z1(12) Z1(13) Z1(14) Z1(15) Z1(16) Z1(17) Z1(18) Z1(19) \
	Z1(20) Z1(21) Z1(22) Z1(23) Z1(24) Z1(25) Z1(26) Z1(27) Z1(28) Z1(29) \
	Z1(30) Z1(31) K1(0) K1(1) K1(2) K1(3) K1(4) K1(5) K1(6) K1(7)
#define ZMM32_LOAD ZL1(0) ZL1(1) ZL1(2) ZL1(3) ZL1(4) ZL1(5) ZL1(6) ZL1(7) \
	ZL1(8) ZL1(9) ZL1(10) ZL1(11) ZL1(12) ZL1(13) ZL1(14) ZL1(15) ZL1(16) \
	ZL1(17) ZL1(18) ZL1(19) ZL1(20) ZL1(21) ZL1(22) ZL1(23) ZL1(24) \
	ZL1(25) ZL1(26) ZL1(27) ZL1(28) ZL1(29) ZL1(30) ZL1(31) KL1(0) KL1(1) \
	KL1(2) KL1(3) KL1(4) KL1(5) KL1(6) KL1(7)

void ukpb_floorz_empty(void *saved) __attribute__((visibility("hidden")));
__attribute__((noinline, used)) void ukpb_floorz_empty(void *saved)
{
	__asm__ volatile("" :: "r"(saved) : "memory");
}

__asm__(
	UKPB_TARGET(ukpb_tgt_floorz, 6,
		    "	call ukpb_floorz_stub\n" LEA_RET)
	UKPB_TARGET(ukpb_floorz_stub, 6,
		    "	lea -128(%rsp), %rsp\n"
		    "	pushfq\n"
		    PUSH_GPRS
		    "	mov %rsp, %rbx\n"
		    "	sub $(64+64*32+64), %rsp\n"
		    "	and $-64, %rsp\n"
		    "	stmxcsr 0(%rsp)\n"
		    "	fnstcw 4(%rsp)\n"
		    ZMM32
		    "	vzeroupper\n"
		    CLD_IF_DF
		    "	mov %rbx, %rdi\n"
		    "	call ukpb_floorz_empty\n"
		    ZMM32_LOAD
		    "	ldmxcsr 0(%rsp)\n"
		    "	fldcw 4(%rsp)\n"
		    "	mov %rbx, %rsp\n"
		    POP_GPRS
		    FLAGS_RESTORE
		    "	lea 128+8(%rsp), %rsp\n"
		    "	ret\n")
);
