/* SPDX-License-Identifier: MIT */
/*
 * The function ukp-ftrace-bench calls, built three ways (Makefile):
 * -fpatchable-function-entry=5 (bt_pfe), -finstrument-functions (bt_instr)
 * and -pg (bt_pg, for uftrace).  BT_NAME is the name.
 */
__attribute__((noinline)) int BT_NAME(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x + 1;
}
