/* SPDX-License-Identifier: MIT */
/*
 * Offsets of the C structures the hand-written hit paths read: the lean
 * trampoline's fast path and the plain kretprobe's entry (entry.S), the
 * kretprobe return's fast path (kret.S).  trap.c and kret.c check every
 * one at compile time, so a changed structure fails the build instead of
 * the hit path.
 */
#ifndef UKP_ASM_OFFSETS_H
#define UKP_ASM_OFFSETS_H

/* ukp_gp (sync.c, internal.h): what HIT_LOCK stores at T_NEST (nest 1,
 * in_handler 3, the epoch above), unless a flag says the C path decides.
 * in_handler's bit 1 says a hand-written path took the lock: its frame
 * is cur_regs, which it stores next (trap.c: ukp_hit_longjmp). */
#define UKP_GP_LOCK 0x30001
#define UKP_GP_NOFAST 2
#define UKP_GP_NOKNOB 4
/* or-ed in by a detour's bare fast path (entry.S): in_handler bit 2, its
 * pt_regs holds only what that path saved (trap.c fills in the rest) */
#define UKP_GP_BARE 0x40000

/* struct ukp_thread (internal.h) */
#define T_NEST 0
#define T_IN_HANDLER 2
#define T_SEQ 4
#define T_CUR 24
#define T_CUR_REGS 32
#define T_CUR_JB 40
#define T_ABANDON 52
#define T_INTERNAL 400
#define T_ERRNO_P 408
#define T_LEAN_LIST 424
#define T_LEAN_I 432
#define T_LEAN_ERRNO 436
#define T_TID 16
#define T_KRET_TOP 440
#define T_KRET_DEFERRED 448
#define T_KRET_SLOT 2400
#define T_KRET_ERRP 2408
#define T_LEAN_KRET 2392
#define T_FT_DEPTH 2336
#define T_FT_QS 2344
#define T_KC_K 2432
#define T_KC_INST 2440
#define T_KC_STEAL 2448
/* struct ukp_site, struct ukp_plist */
#define S_RESUME 192
#define L_LEAN1 6
#define L_KRET1 7
#define L_KRET 16
#define L_BARE_FN 24
#define L_P 32
/* struct kprobe (ukprobes/kprobes.h) */
#define KP_PRE_HANDLER 24
#define KP_FLAGS 56
#define KP_FLAGS_DEAD 3		/* KPROBE_FLAG_GONE | KPROBE_FLAG_DISABLED */

/* struct pt_regs (ukprobes/ptrace.h): the kernel's order */
#define PT_R15 0
#define PT_R14 8
#define PT_R13 16
#define PT_R12 24
#define PT_BP 32
#define PT_BX 40
#define PT_R11 48
#define PT_R10 56
#define PT_R9 64
#define PT_R8 72
#define PT_AX 80
#define PT_CX 88
#define PT_DX 96
#define PT_SI 104
#define PT_DI 112
#define PT_ORIG_AX 120
#define PT_IP 128
#define PT_CS 136
#define PT_FLAGS 144
#define PT_SP 152
#define PT_SS 160
#define PT_SIZE 168

/* kretprobe stubs (kret.S) and struct kret_slot (kret.c) */
#define KRET_GROUPS 2048	/* of 256 bytes, 8 stubs each */
#define KRET_NSTUBS (KRET_GROUPS * 8)
#define KS_PRIMED 0
#define KS_LEAN 1
#define KS_SYSFL 4
/* CF PF AF ZF SF, DF, OF: what a return's own flags give (kret.S) */
#define FLAGS_STATUS_DF 0xcd5
#define KS_RA 16

/* struct kret_slot (internal.h) */
#define KS_CONT 8
#define KS_INST 24
/* struct ukp_kinst and struct ukp_kret (kret.c), struct kretprobe and
 * struct kretprobe_instance (ukprobes/kprobes.h): the entry of a plain
 * kretprobe, ukp_opt_tramp_kret (entry.S) */
#define KI_K 0
#define KI_BELOW 8
#define KI_SP 16
#define KI_T 24
#define KI_STUB_ADDR 32
#define KI_PRIME 40
#define KI_SLOT 48
#define KI_NEXT_FREE 60
#define KI_SELF 64
#define KI_SIZE 80		/* the kretprobe_instance follows */
#define RI_RP 0
#define RI_RET_ADDR 8
#define RI_TASK 16
#define K_RP 0
#define K_DEAD 8
#define K_LEAF 12
#define K_FREE_TOP 16
#define K_ISZ 32
#define K_MEM 40
#define RP_HANDLER 96

/* struct ukp_jrec (internal.h): pt_regs first */
#define JR_CONT 168
#define JR_MXCSR 176
#define JR_FCW 180
#define JR_XMM 192

/* struct ft_cfg, struct ft_opp (ftrace_int.h) */
#define FC_TRAMP 0
#define FC_IP 8
#define FC_OPS 16
#define FC_FUNC 24
#define FC_OPP 32
#define FC_WALK 40
#define FC_N 48
#define FC_E 88
#define FE_FUNC 0
#define FE_OPS 8
#define FE_OPP 16
#define FE_FLAGS 24
#define FE_SIZE 32
#define FO_LIVE 0
/* ftrace_ops.flags (ukprobes/ftrace.h) */
#define FL_ANY_REGS 0xc		/* SAVE_REGS | SAVE_REGS_IF_SUPPORTED */
#define FL_IPMODIFY 0x1000

#endif
