/* SPDX-License-Identifier: MIT */
/*
 * A single thread computing in user space, never in a system call: what
 * an attach injects into.  Eight SSE registers count the loop's rounds in
 * doubles beside a general register, errno holds a value set before the
 * loop; SIGUSR1 ends the loop, then it prints "ok ROUNDS" if every lane
 * of every register equals the round count and errno is unchanged, else
 * "error ...".
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_usr1(int sig)
{
	(void)sig;
	stop = 1;
}

int main(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	static const double one[2] __attribute__((aligned(16))) = { 1.0, 1.0 };
	double acc[16] __attribute__((aligned(16)));
	unsigned long rounds = 0;
	errno = EOWNERDEAD;
	__asm__ volatile(
		"movapd (%[one]), %%xmm8\n\t"
		"xorpd %%xmm0, %%xmm0\n\txorpd %%xmm1, %%xmm1\n\t"
		"xorpd %%xmm2, %%xmm2\n\txorpd %%xmm3, %%xmm3\n\t"
		"xorpd %%xmm4, %%xmm4\n\txorpd %%xmm5, %%xmm5\n\t"
		"xorpd %%xmm6, %%xmm6\n\txorpd %%xmm7, %%xmm7\n"
		"1:\n\t"
		"addpd %%xmm8, %%xmm0\n\taddpd %%xmm8, %%xmm1\n\t"
		"addpd %%xmm8, %%xmm2\n\taddpd %%xmm8, %%xmm3\n\t"
		"addpd %%xmm8, %%xmm4\n\taddpd %%xmm8, %%xmm5\n\t"
		"addpd %%xmm8, %%xmm6\n\taddpd %%xmm8, %%xmm7\n\t"
		"addq $1, %[n]\n\t"
		"cmpl $0, %[stop]\n\t"
		"je 1b\n\t"
		"movapd %%xmm0, 0(%[acc])\n\tmovapd %%xmm1, 16(%[acc])\n\t"
		"movapd %%xmm2, 32(%[acc])\n\tmovapd %%xmm3, 48(%[acc])\n\t"
		"movapd %%xmm4, 64(%[acc])\n\tmovapd %%xmm5, 80(%[acc])\n\t"
		"movapd %%xmm6, 96(%[acc])\n\tmovapd %%xmm7, 112(%[acc])\n\t"
		: [n] "+r"(rounds)
		: [one] "r"(one), [acc] "r"(acc), [stop] "m"(stop)
		: "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
		  "memory", "cc");
	int e = errno;
	for (int i = 0; i < 16; i++)
		if (acc[i] != (double)rounds) {
			printf("error: lane %d is %.0f after %lu rounds\n", i, acc[i], rounds);
			return 1;
		}
	if (e != EOWNERDEAD) {
		printf("error: errno %d\n", e);
		return 1;
	}
	printf("ok %lu\n", rounds);
	return 0;
}
