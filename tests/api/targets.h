/* Probe targets whose instructions the tests control exactly. */
#ifndef UKT_TARGETS_H
#define UKT_TARGETS_H

/* long t_add(long a, long b): lea (%rdi,%rsi),%rax; ret */
long t_add(long a, long b);
long t_sub(long a, long b);
/* long t_load(long *p): mov (%rdi),%rax; ret */
long t_load(long *p);
extern char t_load_insn[];
/* unsigned long t_div(unsigned long a, unsigned long b): a / b */
unsigned long t_div(unsigned long a, unsigned long b);
extern char t_div_insn[];
/* void t_dump(void): saves callee-saved regs, t_dump_probe: nop, stores
 * every general register and flags into t_dump_out[], restores */
void t_dump(void);
extern char t_dump_probe[];
extern unsigned long t_dump_out[17];	/* ax bx cx dx si di bp r8..r15 flags */
/* double t_vec(double x): t_vec_probe: nop; ret (xmm0 passes through) */
double t_vec(double x);
/* void t_ymm(const void *in, void *out): vmovdqu (%rdi),%ymm0;
 * t_ymm_probe: nop; vmovdqu %ymm0,(%rsi); vzeroupper; ret */
void t_ymm(const void *in, void *out);
extern char t_ymm_probe[];
/* unsigned long t_sys(void): mov $39,%eax; t_sys_insn: syscall;
 * t_sys_next: mov %rcx,%rax; ret  -> returns rcx after the syscall */
unsigned long t_sys(void);
extern char t_sys_insn[], t_sys_next[];
/* long t_jcc(long x): test %rdi,%rdi; t_jcc_insn: jz 1f; mov $1,%eax; ret; 1: mov $2,%eax; ret */
long t_jcc(long x);
extern char t_jcc_insn[];
/* long t_call(long x): t_call_insn: call t_add1 ... returns x + 1 */
long t_call(long x);
extern char t_call_insn[];
/* long t_int3(void): t_int3_insn: int3; mov $7,%eax; ret */
long t_int3(void);
extern char t_int3_insn[];

/* long t_sp(void): mov %rsp,%rax; t_sp_insn: lea -64(%rsp),%rsp;
 * sub %rsp,%rax; add %rax,%rsp; ret -> 64 unless a handler moves sp */
long t_sp(void);
extern char t_sp_insn[];
/* long t_callr(long x): t_callr_insn: call *%rax (t_add1) -> x + 1 */
long t_callr(long x);
extern char t_callr_insn[];
/* t_gp: load from a non-canonical address (#GP); t_ud: ud2 (#UD) */
long t_gp(void);
extern char t_gp_insn[];
void t_ud(void);
extern char t_ud_insn[];

#endif
