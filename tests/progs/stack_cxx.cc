// stack_cxx: stack traces taken in handlers after C++ exceptions crossed
// kretprobed frames (run by tests/api/stacktrace.c, case
// cxx_exceptions_prog).
//
// sx_drive(n) -> sx_rec(n-1) -> ... -> sx_rec(0) -> sx_leaf, with a kprobe
// at sx_leaf and kretprobes on all three functions.  A first pass records
// the truth unprobed (each function's __builtin_return_address(0), and
// sx_leaf's own stack_trace_save); then, for every depth 1 to 30, a pass
// where sx_leaf throws, every sx_rec catches and rethrows (throw;) except
// the one at level n/2, which keeps it and returns; then a pass without a
// throw.  Every handler's stack_trace_save_regs() must equal the truth
// from its frame on; every passes' calls must return what they should,
// and no kretprobe may miss.  Prints "stack_cxx: all ok" and exits 0, or
// says what differed and exits 1.  With the argument "int3" the probes
// stay breakpoints (optimisation off).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ukprobes.h>

#define TARGET extern "C" __attribute__((noinline))
#define RA() ((unsigned long)__builtin_return_address(0))
#define BARRIER() __asm__ volatile("" ::: "memory")

enum { MAXD = 30, NBUF = 128 };
enum { RECORD, THROW, PLAIN };

static unsigned long truth[MAXD + 1][MAXD + 2];
static unsigned long full[MAXD + 1][NBUF];	// sx_leaf's own, unprobed
static unsigned nfull[MAXD + 1];
static volatile int mode, depth, catch_at;
static volatile int sink;
static unsigned long nchecks, nbad;
static char first_bad[256];

static __attribute__((noinline)) void leaf_extra(int n, unsigned long ra)
{
	if (mode == RECORD) {
		truth[n][0] = ra;
		nfull[n] = stack_trace_save(full[n], NBUF, 1);
	}
	if (mode == THROW)
		throw n;
	BARRIER();
}

TARGET int sx_leaf(int n)
{
	leaf_extra(n, RA());
	BARRIER();
	return sink + n;
}

TARGET int sx_rec(int k, int n)
{
	if (mode == RECORD)
		truth[n][1 + k] = RA();
	int r;
	try {
		r = k == 0 ? sx_leaf(n) : sx_rec(k - 1, n);
	} catch (int e) {
		if (k != catch_at)
			throw;
		r = -e;
	}
	BARRIER();
	return r + 1;
}

TARGET int sx_drive(int n)
{
	if (mode == RECORD)
		truth[n][1 + n] = RA();
	int r = sx_rec(n - 1, n);
	BARRIER();
	return r + 1;
}

// the trace from the frame whose own address is ip (0: none), from truth
// level `from` on, then the unprobed trace's rest
static void check_regs(const char *what, struct pt_regs *regs, unsigned long ip, unsigned from)
{
	int n = depth;
	unsigned long got[NBUF], want[NBUF + 1];
	unsigned k = 0;
	if (ip)
		want[k++] = ip;
	for (unsigned j = 1 + from; j < nfull[n]; j++)
		want[k++] = full[n][j];
	unsigned m = stack_trace_save_regs(regs, got, NBUF, 0);
	nchecks++;
	for (unsigned i = 0; i < k || i < m; i++)
		if (i >= k || i >= m || got[i] != want[i]) {
			if (!nbad++)
				snprintf(first_bad, sizeof(first_bad),
					 "%s, depth %d mode %d: entry %u of %u is %#lx, want %#lx of %u",
					 what, n, (int)mode, i, m, i < m ? got[i] : 0,
					 i < k ? want[i] : 0, k);
			return;
		}
}

static int leaf_pre(struct kprobe *, struct pt_regs *regs)
{
	check_regs("sx_leaf pre", regs, (unsigned long)sx_leaf, 0);
	return 0;
}

static int leaf_ret(struct kretprobe_instance *, struct pt_regs *regs)
{
	check_regs("sx_leaf return", regs, 0, 0);
	return 0;
}

static int rec_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	*(long *)(void *)ri->data = (long)regs->di;
	return 0;
}

static int rec_ret(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	check_regs("sx_rec return", regs, 0, 1 + (unsigned)*(long *)(void *)ri->data);
	return 0;
}

static int drive_ret(struct kretprobe_instance *, struct pt_regs *regs)
{
	check_regs("sx_drive return", regs, 0, 1 + (unsigned)depth);
	return 0;
}

static struct kprobe kp;
static struct kretprobe rl, rr, rd;

static bool arm(bool opt)
{
	kprobes_set_optimization(opt ? 1 : 0);
	kp.addr = (kprobe_opcode_t *)sx_leaf;
	kp.pre_handler = leaf_pre;
	rl.kp.addr = (kprobe_opcode_t *)sx_leaf;
	rl.handler = leaf_ret;
	rl.maxactive = 2;
	rr.kp.addr = (kprobe_opcode_t *)sx_rec;
	rr.handler = rec_ret;
	rr.entry_handler = rec_entry;
	rr.data_size = sizeof(long);
	rr.maxactive = MAXD + 2;	// exactly enough: a lost instance misses
	rd.kp.addr = (kprobe_opcode_t *)sx_drive;
	rd.handler = drive_ret;
	rd.maxactive = 2;
	if (register_kprobe(&kp) || register_kretprobe(&rl) || register_kretprobe(&rr) ||
	    register_kretprobe(&rd)) {
		fprintf(stderr, "stack_cxx: registration failed\n");
		return false;
	}
	wait_for_kprobe_optimizer();
	if (!!(rr.kp.flags & KPROBE_FLAG_OPTIMIZED) != opt) {
		fprintf(stderr, "stack_cxx: sx_rec's entry %soptimised\n", opt ? "not " : "");
		return false;
	}
	return true;
}

// every depth once, from one call site whatever the mode
static __attribute__((noinline)) int pass(int m)
{
	int bad = 0;
	for (int n = 1; n <= MAXD; n++) {
		depth = n;
		catch_at = n / 2;
		mode = m;
		int r = sx_drive(n);
		mode = PLAIN;
		// thrown: caught at level n/2, which returns -n + 1; each level
		// above adds 1, and sx_drive too
		int want = m == THROW ? -n + 1 + (n - 1 - n / 2) + 1 : sink + n + n + 1;
		if (r != want) {
			fprintf(stderr, "stack_cxx: mode %d depth %d: %d, want %d\n", m, n, r, want);
			bad = 1;
		}
	}
	return bad;
}

int main(int argc, char **argv)
{
	bool opt = !(argc > 1 && !strcmp(argv[1], "int3"));
	static volatile int npass = 5;
	static const int modes[] = { RECORD, PLAIN, THROW, PLAIN, THROW };
	int bad = 0;
	for (int i = 0; i < npass; i++) {
		if (i == 1 && !arm(opt))
			return 1;
		nchecks = nbad = 0;
		bad |= pass(modes[i]);
		if (nbad) {
			fprintf(stderr, "stack_cxx: pass %d: %lu of %lu traces wrong; first: %s\n",
				i, nbad, nchecks, first_bad);
			bad = 1;
		}
		// sx_leaf pre and every return; thrown: sx_leaf's pre, then
		// the returns of levels n/2 .. n-1 and of sx_drive
		unsigned long want = 0;
		for (int n = 1; n <= MAXD; n++)
			want += modes[i] == RECORD ? 0 : modes[i] == PLAIN ? 1 + 1 + n + 1
								    : 1 + (n - n / 2) + 1;
		if (nchecks != want) {
			fprintf(stderr, "stack_cxx: pass %d: %lu traces, want %lu\n", i, nchecks, want);
			bad = 1;
		}
	}
	if (kp.nmissed || rl.nmissed || rr.nmissed || rd.nmissed) {
		fprintf(stderr, "stack_cxx: missed %lu %d %d %d\n", kp.nmissed, rl.nmissed,
			rr.nmissed, rd.nmissed);
		bad = 1;
	}
	unregister_kretprobe(&rd);
	unregister_kretprobe(&rr);
	unregister_kretprobe(&rl);
	unregister_kprobe(&kp);
	if (!bad)
		printf("stack_cxx: all ok\n");
	return bad;
}
