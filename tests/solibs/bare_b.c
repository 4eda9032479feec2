/* SPDX-License-Identifier: MIT */
/* api-bare: bare_a.so's twin: h faults at +18, past bare_a.so's h */
__asm__(".text\n.p2align 6\n.globl h\n.type h,@function\n"
	"h: xor %eax,%eax\n .fill 16,1,0x90\n mov (%rax),%eax\n ret\n.size h,.-h\n"
	".p2align 6\n.globl pad\n.type pad,@function\n"
	"pad: .fill 64,1,0x90\n ret\n.size pad,.-pad\n");
