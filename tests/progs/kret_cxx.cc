// kret_cxx: C++ exceptions through kretprobed functions (run by
// tests/api/kretprobe_progs.c).
//
// Every probed function has maxactive 1 (the thread phase: one per
// thread), so an instance an exception left behind would make the next
// call a miss.  Each scenario runs with the entry probes hit through a
// breakpoint (optimization knob off) and through a jump:
//
//   throw_through     thrower() throws on odd i, caught by the caller
//   nested            outer() -> middle() -> thrower(), all probed;
//                     middle catches std::runtime_error only and runs a
//                     destructor while an int passes through it; outer
//                     catches the int; a logic_error is caught by middle
//                     and rethrown (throw;) to outer
//   catch_inside      the probed function catches its own exception and
//                     returns: its handler sees the value the caller gets
//   catch_in_probed_caller  a probed function catches what its probed
//                     callee threw
//   threads           4 std::thread workers doing the above at once, 10
//                     rounds each
//
// Usage: kret_cxx [single|threads|all]   (all by default)
//
// After each scenario every probed function is called once more and must
// be probed (its handler runs), nmissed must be 0, and the handler count
// equals the number of normal returns.  Prints "ok <scenario> <path>"
// per scenario and "kret_cxx: all ok" at the end; exit status 0 only if
// everything matched.
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>
#include <ukprobes.h>

#define TARGET extern "C" __attribute__((noinline))

static std::atomic<int> failures;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			std::printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			failures++;                                            \
		}                                                              \
	} while (0)

#define CHECK_EQ(a, b)                                                         \
	do {                                                                   \
		long long a_ = (long long)(a), b_ = (long long)(b);            \
		if (a_ != b_) {                                                \
			std::printf("FAIL %s:%d: %s == %s: %lld != %lld\n", __FILE__, \
				    __LINE__, #a, #b, a_, b_);                 \
			failures++;                                            \
		}                                                              \
	} while (0)

// ---- probed functions --------------------------------------------------------

static std::atomic<long> dtors;

struct Guard {
	~Guard() { dtors++; }
};

TARGET long thrower(long i)
{
	__asm__ volatile("" ::: "memory");
	if (i % 4 == 1)
		throw std::runtime_error("boom " + std::to_string(i));
	if (i % 4 == 3)
		throw (int)i;
	if (i % 8 == 6)
		throw std::logic_error("logic " + std::to_string(i));
	return i * 2;
}

TARGET long middle(long i)
{
	Guard g;
	try {
		long r = thrower(i);
		__asm__ volatile("" : "+r"(r) :: "memory");
		return r + 1;
	} catch (const std::runtime_error &e) {
		// caught here: the caller gets a value
		return -1000 - i;
	} catch (const std::logic_error &e) {
		throw;	// to outer
	}
}

TARGET long outer(long i)
{
	long r = middle(i);
	__asm__ volatile("" : "+r"(r) :: "memory");
	return r + 1;
}

TARGET long catch_inside(long i)
{
	try {
		if (i & 1)
			throw std::runtime_error("inside");
		__asm__ volatile("" ::: "memory");
	} catch (const std::exception &e) {
		return -i;
	}
	return i;
}

TARGET long probed_catcher(long i)
{
	try {
		return thrower(i) + 5;
	} catch (int v) {
		return v * 100;
	} catch (const std::exception &e) {
		return -7;
	}
}

// ---- probes --------------------------------------------------------------------

struct Probe {
	struct kretprobe rp;
	const char *name;
	std::atomic<long> rets;
	std::atomic<long> entries;
	std::atomic<long> bad;	// a return value the handler saw that the rules forbid
};

enum { P_THROWER, P_MIDDLE, P_OUTER, P_INSIDE, P_CATCHER, NPROBES };
static Probe probes[NPROBES];

static Probe *probe_of(struct kretprobe_instance *ri)
{
	for (auto &p : probes)
		if (&p.rp == ri->rp)
			return &p;
	std::abort();
}

static int on_entry(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	*(long *)(void *)ri->data = (long)regs_get_kernel_argument(regs, 0);
	probe_of(ri)->entries++;
	return 0;
}

static bool thrower_returns(long i)
{
	return i % 4 != 1 && i % 4 != 3 && i % 8 != 6;
}

// the value each probed function returns for i, when it returns
static bool returns_ok(int which, long i, long v)
{
	switch (which) {
	case P_THROWER: return thrower_returns(i) && v == i * 2;
	case P_MIDDLE:
		return i % 4 == 1 ? v == -1000 - i : thrower_returns(i) && v == i * 2 + 1;
	case P_OUTER:
		return i % 4 == 1 ? v == -1000 - i + 1 : thrower_returns(i) && v == i * 2 + 2;
	case P_INSIDE: return v == ((i & 1) ? -i : i);
	case P_CATCHER:
		return i % 4 == 3 ? v == i * 100 : thrower_returns(i) ? v == i * 2 + 5 : v == -7;
	}
	return false;
}

static int on_return(struct kretprobe_instance *ri, struct pt_regs *regs)
{
	Probe *p = probe_of(ri);
	long i = *(long *)(void *)ri->data;
	if (!returns_ok((int)(p - probes), i, (long)regs_return_value(regs)))
		p->bad++;
	p->rets++;
	return 0;
}

static void setup(int maxactive)
{
	static const struct {
		void *fn;
		const char *name;
	} fns[NPROBES] = {
		{ (void *)thrower, "thrower" }, { (void *)middle, "middle" },
		{ (void *)outer, "outer" }, { (void *)catch_inside, "catch_inside" },
		{ (void *)probed_catcher, "probed_catcher" },
	};
	struct kretprobe *rps[NPROBES];
	for (int k = 0; k < NPROBES; k++) {
		Probe &p = probes[k];
		std::memset(&p.rp, 0, sizeof(p.rp));
		p.rp.kp.addr = (kprobe_opcode_t *)fns[k].fn;
		p.rp.handler = on_return;
		p.rp.entry_handler = on_entry;
		p.rp.data_size = sizeof(long);
		p.rp.maxactive = maxactive;
		p.name = fns[k].name;
		p.rets = p.entries = p.bad = 0;
		rps[k] = &p.rp;
	}
	int r = register_kretprobes(rps, NPROBES);
	if (r) {
		std::printf("FAIL register_kretprobes: %d\n", r);
		std::exit(2);
	}
	wait_for_kprobe_optimizer();
}

static void teardown()
{
	struct kretprobe *rps[NPROBES];
	for (int k = 0; k < NPROBES; k++)
		rps[k] = &probes[k].rp;
	unregister_kretprobes(rps, NPROBES);
}

// every probe: no miss, no bad value, handler calls = normal returns
// (want_rets[k]), entries = calls (want_entries[k])
static void expect(const char *scenario, const char *path, const long *want_rets,
		   const long *want_entries)
{
	int before = failures;
	for (int k = 0; k < NPROBES; k++) {
		Probe &p = probes[k];
		if (p.rp.nmissed || p.rp.kp.nmissed || p.bad || p.rets != want_rets[k] ||
		    p.entries != want_entries[k]) {
			std::printf("FAIL %s %s: %s: nmissed %d/%lu, bad %ld, %ld handler calls "
				    "(want %ld), %ld entries (want %ld)\n",
				    scenario, path, p.name, p.rp.nmissed, p.rp.kp.nmissed,
				    p.bad.load(), p.rets.load(), want_rets[k], p.entries.load(),
				    want_entries[k]);
			failures++;
		}
	}
	if (failures == before)
		std::printf("ok %s %s\n", scenario, path);
}

static void reset_counts()
{
	for (auto &p : probes)
		p.rets = p.entries = p.bad = 0;
	dtors = 0;
}

// ---- scenarios -----------------------------------------------------------------

enum { N = 400 };

// thrower alone, caught here; returns how many threw
static long throw_through(long base)
{
	long thrown = 0;
	for (long i = base; i < base + N; i++) {
		try {
			long r = thrower(i);
			CHECK(thrower_returns(i));
			CHECK_EQ(r, i * 2);
		} catch (const std::runtime_error &e) {
			CHECK_EQ(i % 4, 1);
			CHECK(std::string(e.what()) == "boom " + std::to_string(i));
			thrown++;
		} catch (int v) {
			CHECK_EQ(i % 4, 3);
			CHECK_EQ(v, i);
			thrown++;
		} catch (const std::logic_error &e) {
			CHECK_EQ(i % 8, 6);
			thrown++;
		}
	}
	return thrown;
}

// outer -> middle -> thrower; returns {outer returns, middle returns}
static void nested(long base, long *outer_rets, long *middle_rets)
{
	for (long i = base; i < base + N; i++) {
		try {
			long r = outer(i);
			if (i % 4 == 1) {
				CHECK_EQ(r, -1000 - i + 1);
			} else {
				CHECK(thrower_returns(i));
				CHECK_EQ(r, i * 2 + 2);
			}
			++*outer_rets;
			++*middle_rets;
		} catch (int v) {
			CHECK_EQ(i % 4, 3);
			CHECK_EQ(v, i);
		} catch (const std::logic_error &e) {
			CHECK_EQ(i % 8, 6);
			CHECK(std::string(e.what()) == "logic " + std::to_string(i));
		} catch (...) {
			CHECK(!"outer's caller caught what middle should have");
		}
	}
}

static void catch_inside_run(long base)
{
	for (long i = base; i < base + N; i++)
		CHECK_EQ(catch_inside(i), (i & 1) ? -i : i);
}

static void catcher_run(long base)
{
	for (long i = base; i < base + N; i++) {
		long r = probed_catcher(i);
		if (i % 4 == 3)
			CHECK_EQ(r, i * 100);
		else if (!thrower_returns(i))
			CHECK_EQ(r, -7);
		else
			CHECK_EQ(r, i * 2 + 5);
	}
}

// one more normal call of everything: each must still be probed
static void probe_all_once()
{
	CHECK_EQ(thrower(0), 0);
	CHECK_EQ(outer(0), 2);
	CHECK_EQ(catch_inside(2), 2);
	CHECK_EQ(probed_catcher(0), 5);
}

static long count_returning(long base, bool (*pred)(long))
{
	long n = 0;
	for (long i = base; i < base + N; i++)
		n += pred(i);
	return n;
}

static bool is_odd4_1(long i) { return i % 4 == 1; }

static void run_single(int opt)
{
	const char *path = opt ? "optimized" : "breakpoint";
	kprobes_set_optimization(opt);
	setup(1);
	for (auto &p : probes) {
		bool o = p.rp.kp.flags & KPROBE_FLAG_OPTIMIZED;
		if (o != (bool)opt) {
			std::printf("FAIL %s: %s is%s optimized\n", path, p.name, o ? "" : " not");
			failures++;
		}
	}

	// throw_through: thrower probed, exceptions to this frame
	reset_counts();
	long thrown = throw_through(0);
	CHECK_EQ(thrown, N - count_returning(0, thrower_returns));
	probe_all_once();
	{
		long tr = count_returning(0, thrower_returns);
		// probe_all_once: thrower 3 times (direct, via middle, via
		// catcher), middle and outer once, catch_inside once, catcher once
		long rets[NPROBES] = { tr + 3, 1, 1, 1, 1 };
		long ents[NPROBES] = { N + 3, 1, 1, 1, 1 };
		expect("throw_through", path, rets, ents);
	}

	// nested
	reset_counts();
	long orets = 0, mrets = 0;
	nested(0, &orets, &mrets);
	// middle's Guard ran on every call, returning or not
	CHECK_EQ(dtors, N);
	probe_all_once();
	{
		long tr = count_returning(0, thrower_returns);
		long rets[NPROBES] = { tr + 3, mrets + 1, orets + 1, 1, 1 };
		long ents[NPROBES] = { N + 3, N + 1, N + 1, 1, 1 };
		expect("nested", path, rets, ents);
		CHECK_EQ(orets, count_returning(0, thrower_returns) + count_returning(0, is_odd4_1));
	}

	// catch_inside: every call returns
	reset_counts();
	catch_inside_run(0);
	probe_all_once();
	{
		long tr = count_returning(0, thrower_returns);
		(void)tr;
		long rets[NPROBES] = { 3, 1, 1, N + 1, 1 };
		long ents[NPROBES] = { 3, 1, 1, N + 1, 1 };
		expect("catch_inside", path, rets, ents);
	}

	// catch_in_probed_caller: probed_catcher catches what thrower threw
	reset_counts();
	catcher_run(0);
	probe_all_once();
	{
		long tr = count_returning(0, thrower_returns);
		long rets[NPROBES] = { tr + 3, 1, 1, 1, N + 1 };
		long ents[NPROBES] = { N + 3, 1, 1, 1, N + 1 };
		expect("catch_in_probed_caller", path, rets, ents);
	}
	teardown();
	kprobes_set_optimization(1);
}

static void run_threads(int opt)
{
	const char *path = opt ? "optimized" : "breakpoint";
	kprobes_set_optimization(opt);
	// all of it at once, one instance per thread and function, R rounds
	// (exceptions of one thread while the others take and give back
	// instances of the same kretprobes)
	enum { T = 4, R = 10 };
	setup(T);
	reset_counts();
	std::vector<std::thread> th;
	std::atomic<long> t_orets{ 0 }, t_mrets{ 0 };
	for (int t = 0; t < T; t++)
		th.emplace_back([t, &t_orets, &t_mrets] {
			long base = t * 1000;
			for (int r = 0; r < R; r++) {
				long o = 0, m = 0;
				throw_through(base);
				nested(base, &o, &m);
				catch_inside_run(base);
				catcher_run(base);
				t_orets += o;
				t_mrets += m;
			}
		});
	for (auto &t : th)
		t.join();
	probe_all_once();
	{
		long tr = 0, nin = T * N * R;
		for (int t = 0; t < T; t++)
			tr += R * count_returning(t * 1000, thrower_returns);
		// thrower: throw_through, nested and catcher runs
		long rets[NPROBES] = { 3 * tr + 3, t_mrets + 1, t_orets + 1, nin + 1, nin + 1 };
		long ents[NPROBES] = { 3 * nin + 3, nin + 1, nin + 1, nin + 1, nin + 1 };
		expect("threads", path, rets, ents);
	}
	teardown();
	kprobes_set_optimization(1);
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "all";
	bool single = !std::strcmp(what, "all") || !std::strcmp(what, "single");
	bool threads = !std::strcmp(what, "all") || !std::strcmp(what, "threads");
	if (!single && !threads) {
		std::fprintf(stderr, "usage: kret_cxx [single|threads|all]\n");
		return 2;
	}
	setvbuf(stdout, nullptr, _IOLBF, 0);
	// the uncaught case would end in std::terminate: make it loud
	std::set_terminate([] {
		std::printf("FAIL std::terminate called\n");
		std::fflush(stdout);
		std::_Exit(3);
	});
	for (int opt = 0; opt < 2; opt++) {
		if (single)
			run_single(opt);
		if (threads)
			run_threads(opt);
	}
	if (failures) {
		std::printf("kret_cxx: %d failures\n", failures.load());
		return 1;
	}
	std::printf("kret_cxx: all ok\n");
	return 0;
}
