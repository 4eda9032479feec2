/* SPDX-License-Identifier: MIT */
/* api-bare: a bare pre_handler h (3 bytes), then padding to 64; its
 * twin bare_b.so has a longer h at the same offset */
__asm__(".text\n.p2align 6\n.globl h\n.type h,@function\n"
	"h: xor %eax,%eax\n ret\n.size h,.-h\n"
	".p2align 6\n.globl pad\n.type pad,@function\n"
	"pad: .fill 64,1,0x90\n ret\n.size pad,.-pad\n");
