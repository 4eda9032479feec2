/* SPDX-License-Identifier: MIT */
/*
 * Another tool's breakpoint where a probe is asked for: the kernel's
 * uprobes (through tracefs) put an int3 into the process's copy of the
 * code, which ukprobes would read as the instruction.  Its copy of an
 * int3 would trap in its slot and kill the program once the kernel's
 * uprobe is gone (seen: a program started while another process had a
 * uprobe on libc's malloc).  The probe is refused with -EBUSY instead;
 * once the uprobe is gone, the same probe registers and fires.
 *
 *   kernel_uprobe_there_is_ebusy    on a function of this executable
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ukt.h"

#define TRACEFS "/sys/kernel/tracing"

long fo_target(long x);
__attribute__((noinline, used)) long fo_target(long x)
{
	__asm__ volatile("");
	return 3 * x + 1;
}

static long hits;
static int count(struct kprobe *p, struct pt_regs *r)
{
	(void)p;
	(void)r;
	hits++;
	return 0;
}

/* the path and file offset of the mapping holding a */
static unsigned long mapped_at(unsigned long a, char *path, size_t n)
{
	FILE *f = fopen("/proc/self/maps", "r");
	UKT_ASSERT(f);
	char line[4096];
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, off;
		int at = 0;
		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %n", &lo, &hi, &off, &at) < 3 ||
		    a < lo || a >= hi)
			continue;
		line[strcspn(line, "\n")] = 0;
		snprintf(path, n, "%s", line + at);
		fclose(f);
		return off + (a - lo);
	}
	UKT_FAIL("%#lx is in no mapping", a);
}

UKT_CASE_T(kernel_uprobe_there_is_ebusy, 60)
{
	if (access(TRACEFS "/uprobe_events", W_OK))
		mount("nodev", TRACEFS, "tracefs", 0, NULL);
	if (access(TRACEFS "/uprobe_events", W_OK))
		UKT_FAIL("no tracefs at " TRACEFS " (uprobe_events): %s", strerror(errno));
	unsigned long a = (unsigned long)fo_target;
	__asm__("" : "+r"(a));
	char path[4096], buf[4600], grp[64], en[256];
	unsigned long off = mapped_at(a, path, sizeof(path));
	snprintf(grp, sizeof(grp), "ukt_foreign_%d", (int)getpid());
	snprintf(buf, sizeof(buf), "p:%s/f %s:0x%lx\n", grp, path, off);
	ukt_put(TRACEFS "/uprobe_events", buf, 1);
	snprintf(en, sizeof(en), TRACEFS "/events/%s/f/enable", grp);
	ukt_put(en, "1", 0);
	/* the kernel's int3 is in our copy of the code now */
	UKT_EQ(*(volatile unsigned char *)a, 0xcc);

	struct kprobe kp = { .addr = (kprobe_opcode_t *)a, .pre_handler = count };
	int r = register_kprobe(&kp);
	UKT_EQ(fo_target(4), 13);	/* the kernel's probe, ours not */
	ukt_put(en, "0", 0);
	snprintf(buf, sizeof(buf), "-:%s/f\n", grp);
	ukt_put(TRACEFS "/uprobe_events", buf, 1);
	UKT_EQ(r, -EBUSY);
	UKT_EQ(hits, 0);
	UKT_EQ(fo_target(5), 16);

	/* the uprobe gone: the code as it was, and the probe takes */
	UKT_ASSERT(*(volatile unsigned char *)a != 0xcc);
	memset(&kp, 0, sizeof(kp));
	kp.addr = (kprobe_opcode_t *)a;
	kp.pre_handler = count;
	UKT_EQ(register_kprobe(&kp), 0);
	UKT_EQ(fo_target(6), 19);
	UKT_EQ(hits, 1);
	wait_for_kprobe_optimizer();
	UKT_EQ(fo_target(7), 22);
	UKT_EQ(hits, 2);
	unregister_kprobe(&kp);
	UKT_EQ(fo_target(8), 25);
	UKT_EQ(hits, 2);
}
