/* SPDX-License-Identifier: MIT */
/*
 * AVX-512 code for tests/api/optimize.c, in an object of its own (that
 * file says why).  Built without -mavx512f: all of it is asm, with CFI
 * (the engine optimizes only code whose unwind tables it can read).
 */
#include <stdint.h>

/* zmm0-31 and k0-7 loaded from g (32 * 64 + 8 * 8 bytes) */
void ukt_dirty_avx512(const void *g);

__asm__(
	".text\n"
	".globl ukt_dirty_avx512\n.type ukt_dirty_avx512,@function\n"
	"ukt_dirty_avx512:\n"
	"	.cfi_startproc\n"
	".irp n, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, "
	"20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31\n"
	"	vmovdqu64 64*\\n(%rdi), %zmm\\n\n"
	".endr\n"
	".irp k, 0, 1, 2, 3, 4, 5, 6, 7\n"
	"	kmovw 2048+8*\\k(%rdi), %k\\k\n"
	".endr\n"
	"	ret\n"
	"	.cfi_endproc\n"
	".size ukt_dirty_avx512,.-ukt_dirty_avx512\n"

	/* AVX-512, all 32 registers and the opmasks live at both probe
	 * points: zmm0-7 accumulate a[] times zmm8-15, zmm16-23 add zmm24-31
	 * under k1-k7 and k1 again (merge-masking reads the mask and keeps
	 * the unselected lanes), the masks flip each iteration.
	 * o_zloop(a, n, struct zin *in, struct zout *out) */
	".p2align 4\n"
	".globl o_zloop\n.type o_zloop,@function\n"
	"o_zloop:\n"
	"	.cfi_startproc\n"
	" vmovupd 0(%rdx),%zmm8\n vmovupd 64(%rdx),%zmm9\n vmovupd 128(%rdx),%zmm10\n"
	" vmovupd 192(%rdx),%zmm11\n vmovupd 256(%rdx),%zmm12\n vmovupd 320(%rdx),%zmm13\n"
	" vmovupd 384(%rdx),%zmm14\n vmovupd 448(%rdx),%zmm15\n"
	" vmovupd 512(%rdx),%zmm24\n vmovupd 576(%rdx),%zmm25\n vmovupd 640(%rdx),%zmm26\n"
	" vmovupd 704(%rdx),%zmm27\n vmovupd 768(%rdx),%zmm28\n vmovupd 832(%rdx),%zmm29\n"
	" vmovupd 896(%rdx),%zmm30\n vmovupd 960(%rdx),%zmm31\n"
	" kmovw 1024(%rdx),%k1\n kmovw 1026(%rdx),%k2\n kmovw 1028(%rdx),%k3\n"
	" kmovw 1030(%rdx),%k4\n kmovw 1032(%rdx),%k5\n kmovw 1034(%rdx),%k6\n"
	" kmovw 1036(%rdx),%k7\n"
	" vpxorq %zmm0,%zmm0,%zmm0\n vpxorq %zmm1,%zmm1,%zmm1\n vpxorq %zmm2,%zmm2,%zmm2\n"
	" vpxorq %zmm3,%zmm3,%zmm3\n vpxorq %zmm4,%zmm4,%zmm4\n vpxorq %zmm5,%zmm5,%zmm5\n"
	" vpxorq %zmm6,%zmm6,%zmm6\n vpxorq %zmm7,%zmm7,%zmm7\n"
	" vmovupd %zmm24,%zmm16\n vmovupd %zmm25,%zmm17\n vmovupd %zmm26,%zmm18\n"
	" vmovupd %zmm27,%zmm19\n vmovupd %zmm28,%zmm20\n vmovupd %zmm29,%zmm21\n"
	" vmovupd %zmm30,%zmm22\n vmovupd %zmm31,%zmm23\n"
	" xor %eax,%eax\n test %rsi,%rsi\n jle 2f\n"
	".globl o_zloop_head\no_zloop_head:\n"
	"1: vaddpd (%rdi,%rax,8),%zmm0,%zmm0\n vmulpd %zmm8,%zmm0,%zmm0\n"
	" vaddpd %zmm24,%zmm16,%zmm16{%k1}\n"
	" vaddpd 64(%rdi,%rax,8),%zmm1,%zmm1\n vmulpd %zmm9,%zmm1,%zmm1\n"
	" vaddpd %zmm25,%zmm17,%zmm17{%k2}\n"
	" vaddpd 128(%rdi,%rax,8),%zmm2,%zmm2\n vmulpd %zmm10,%zmm2,%zmm2\n"
	" vaddpd %zmm26,%zmm18,%zmm18{%k3}\n"
	" vaddpd 192(%rdi,%rax,8),%zmm3,%zmm3\n vmulpd %zmm11,%zmm3,%zmm3\n"
	" vaddpd %zmm27,%zmm19,%zmm19{%k4}\n"
	".globl o_zloop_mid\no_zloop_mid:\n"
	" vaddpd 256(%rdi,%rax,8),%zmm4,%zmm4\n vmulpd %zmm12,%zmm4,%zmm4\n"
	" vaddpd %zmm28,%zmm20,%zmm20{%k5}\n"
	" vaddpd 320(%rdi,%rax,8),%zmm5,%zmm5\n vmulpd %zmm13,%zmm5,%zmm5\n"
	" vaddpd %zmm29,%zmm21,%zmm21{%k6}\n"
	" vaddpd 384(%rdi,%rax,8),%zmm6,%zmm6\n vmulpd %zmm14,%zmm6,%zmm6\n"
	" vaddpd %zmm30,%zmm22,%zmm22{%k7}\n"
	" vaddpd 448(%rdi,%rax,8),%zmm7,%zmm7\n vmulpd %zmm15,%zmm7,%zmm7\n"
	" vaddpd %zmm31,%zmm23,%zmm23{%k1}\n"
	" knotw %k1,%k1\n knotw %k2,%k2\n knotw %k3,%k3\n knotw %k4,%k4\n"
	" knotw %k5,%k5\n knotw %k6,%k6\n knotw %k7,%k7\n"
	" add $64,%rax\n cmp %rsi,%rax\n jl 1b\n"
	"2: vmovupd %zmm0,0(%rcx)\n vmovupd %zmm1,64(%rcx)\n vmovupd %zmm2,128(%rcx)\n"
	" vmovupd %zmm3,192(%rcx)\n vmovupd %zmm4,256(%rcx)\n vmovupd %zmm5,320(%rcx)\n"
	" vmovupd %zmm6,384(%rcx)\n vmovupd %zmm7,448(%rcx)\n"
	" vmovupd %zmm16,512(%rcx)\n vmovupd %zmm17,576(%rcx)\n vmovupd %zmm18,640(%rcx)\n"
	" vmovupd %zmm19,704(%rcx)\n vmovupd %zmm20,768(%rcx)\n vmovupd %zmm21,832(%rcx)\n"
	" vmovupd %zmm22,896(%rcx)\n vmovupd %zmm23,960(%rcx)\n"
	" kmovw %k1,1024(%rcx)\n kmovw %k2,1026(%rcx)\n kmovw %k3,1028(%rcx)\n"
	" kmovw %k4,1030(%rcx)\n kmovw %k5,1032(%rcx)\n kmovw %k6,1034(%rcx)\n"
	" kmovw %k7,1036(%rcx)\n vzeroupper\n ret\n"
	"	.cfi_endproc\n"
	".size o_zloop,.-o_zloop\n"
);
