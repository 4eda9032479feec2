/* SPDX-License-Identifier: MIT */
/*
 * Jump optimisation (kprobes.txt 1.4): the optimizer thread, detours, and
 * writing and removing the jumps while the program's threads run.
 *
 * A site is optimised when it has probes, all enabled and none with a
 * post_handler, no internal hook, the knob is on, and no other armed site
 * lies inside its region, or only plain kprobes, which its jump then
 * covers as a run (one detour segment per probe, struct seg).  Optimising
 * a batch:
 *
 *   1. (lock) analyse each queued site once (analyze.c: the safety checks
 *      and the vector class), build its detour once (kept for the life of
 *      the process, like slots), and publish `resume`: from now on a hit
 *      on the int3 resumes in the detour's copy of the whole region, so
 *      no thread newly enters bytes 1..len-1;
 *   2. wait for every thread in the hit path to leave (one that read the
 *      old resume may be about to run the one-instruction slot);
 *   3. ask every thread where it is (a SIGBUS sent with sigqueueinfo,
 *      which its handler answers): one stopped at an instruction
 *      boundary inside a region is moved to the same instruction in the
 *      detour's copy, and so is an ip its signal frames return to; one
 *      inside an old slot or post trampoline of a batch site is asked
 *      again a little later; a site a thread that cannot answer is in
 *      is left out, and tried again later;
 *   4. (lock) write bytes 1..4 of every jump (byte 0 is still the int3),
 *      serialise, write the 0xe9s, serialise.
 *
 * Unoptimising: int3 over the 0xe9, serialise, the original bytes 1..4,
 * serialise (the int3 stays while the probe is armed).  A thread still in
 * a detour leaves it by its jump back past the region.  Detours are never
 * freed.
 */
#include <dirent.h>
#include <link.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"

#define OPT_DELAY_NS	(5 * 1000 * 1000)	/* let a registration burst gather */

/*
 * A run's segment: a detour of a site whose instruction a run's jump
 * covers (or of the run's first site), holding the copy of that
 * instruction and of the unprobed ones after it up to the next probed
 * one, calling this site's probes, and going on to the next segment's
 * entry (the last one: back after the run).  Per site, one per shape
 * ever built, never freed (a thread may be inside): the site's lists
 * and trampolines are kept in step in all of them.
 */
struct seg {
	struct ukp_region r;		/* r.next: the next segment's entry */
	uint8_t *detour;
	unsigned entry, copy;
	struct ukp_copy_map map;
	unsigned long exit;		/* the run's end */
	struct seg *older;
};

struct ukp_opt {
	int state;			/* 0 untried, 1 ready, -1 refused */
	char why[112];
	struct ukp_region r;
	uint8_t *detour;
	unsigned entry, copy;
	bool kret;			/* the return probes' variant */
	struct ukp_copy_map map;
	struct seg *segs;		/* this site's segments */
	/* while this site heads a run (nrun > 0): the sites its jump covers
	 * that are armed, itself first, by address, and their segments; the
	 * jump goes to run_seg[0]'s entry */
	unsigned nrun;
	struct ukp_site *run[UKP_REGION_MAX];
	struct seg *run_seg[UKP_REGION_MAX];
	/* a punned jump (r.pun): its prefixes and the hop it lands on, a
	 * jmp to the detour's entry (made once, never freed, as detours) */
	unsigned pun_p;
	unsigned long hop;
};

static int opt_knob = 1;
static pthread_cond_t opt_cv = PTHREAD_COND_INITIALIZER;	/* with ukp_lock */
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static struct ukp_site **queue;		/* under ukp_lock */
static size_t nqueue, capqueue;
static unsigned long queued_gen, done_gen;
static bool hurry;			/* a waiter: no delay before the batch */
static bool thread_running;
static pid_t opt_tid;

/* ---- helpers ----------------------------------------------------------- */

static void sleep_ns(long ns)
{
	struct timespec ts = { ns / 1000000000L, ns % 1000000000L };
	nanosleep(&ts, NULL);
}

/* UKPROBES_VERBOSE: 1 says why a probe is not optimised, 2 also what
 * each detour saves */
static int verbose(void)
{
	static int v = -1;
	if (v < 0) {
		const char *e = getenv("UKPROBES_VERBOSE");
		v = e && *e >= '0' && *e <= '9' ? *e - '0' : e && *e;
	}
	return v;
}

static void set_flags_locked(struct ukp_site *s, bool on)
{
	if (on)
		s->said = 0;	/* a later reason not to is told again */
	const struct ukp_plist *l = atomic_load(&s->probes);
	for (unsigned i = 0; l && i < l->n; i++) {
		if (on)
			__atomic_fetch_or(&l->p[i]->flags, KPROBE_FLAG_OPTIMIZED, __ATOMIC_RELAXED);
		else
			__atomic_fetch_and(&l->p[i]->flags, ~KPROBE_FLAG_OPTIMIZED, __ATOMIC_RELAXED);
	}
}

/* the flags of a site and, heading a run, of the sites its jump covers */
static void set_run_flags_locked(struct ukp_site *s, bool on)
{
	set_flags_locked(s, on);
	for (unsigned i = 1; s->opt && i < s->opt->nrun; i++)
		set_flags_locked(s->opt->run[i], on);
}

/* Does the analysed region of s, k bytes before an address, cover it:
 * a byte its jump writes, or (punned) reads? */
static bool region_covers(const struct ukp_site *s, unsigned k)
{
	return s && s->opt && s->opt->state > 0 && k < ukp_arch_span(&s->opt->r);
}

/*
 * Is the byte k of s's analysed region dead padding: past its last
 * instruction, which does not fall through (a jmp, a ret), where the
 * analysis found only nops or int3 and no branch target
 * (analyze.c: region_jump)?  Nothing ever runs there, so a probe there
 * never fires: the jump may hide its int3 (and puts it back when it
 * goes), and it must not keep the jump, or the run before it, out.
 */
static bool region_dead_at(const struct ukp_site *s, unsigned k)
{
	if (!region_covers(s, 0) || s->opt->r.pun || k >= s->opt->r.len)
		return false;
	const struct ukp_insn *last = &s->opt->r.insn[s->opt->r.ninsn - 1];
	return s->addr + k >= last->addr + last->len;
}

bool ukp_opt_orig_byte(unsigned long addr, uint8_t *b)
{
	for (unsigned k = 1; k < UKP_ARCH_REGION_BYTES_MAX; k++) {
		struct ukp_site *s = ukp_site_lookup(addr - k);
		if (s && s->optimized && region_covers(s, k)) {
			*b = s->opt->r.orig[k];
			return true;
		}
	}
	return false;
}

/*
 * A probe that a run's segment may call: plain kprobes (pre_handlers,
 * all enabled), no post_handler, jprobe or return probe, no hook, not
 * an ftrace site.
 */
static bool plain_locked(struct ukp_site *s)
{
	if (!s->opt || s->ftrace || s->hook || atomic_load(&s->dead))
		return false;
	const struct ukp_plist *l = atomic_load(&s->probes);
	if (!l || !l->n || l->any_post)
		return false;
	for (unsigned i = 0; i < l->n; i++)
		if ((l->p[i]->flags & (KPROBE_FLAG_DISABLED | KPROBE_FLAG_GONE)) ||
		    ukp_is_jprobe_handler(l->p[i]) || ukp_is_kret_entry(l->p[i]))
			return false;
	return true;
}

static bool nope(char *why, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static bool nope(char *why, size_t n, const char *fmt, ...)
{
	if (why && n) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, n, fmt, ap);
		va_end(ap);
	}
	return false;
}

/*
 * Temporary conditions (1.4.4): may this site be optimised now?  With
 * run, armed probes inside its region may be taken into a run (*run
 * says whether it is one); without, none.  why (may be NULL): the
 * reason when not; empty where there is nothing to tell (no probe left,
 * its object gone).
 */
static bool wanted_locked(struct ukp_site *s, bool *run, char *why, size_t n)
{
	if (run)
		*run = false;
	if (why && n)
		why[0] = 0;
	if (atomic_load(&s->dead))
		return false;
	if (!opt_knob)
		return nope(why, n, "optimization is off (kprobes_set_optimization(0))");
	if (!ukp_knob_enabled)
		return nope(why, n, "all kprobes are disabled (kprobes_set_enabled(0))");
	if (s->ftrace)
		return nope(why, n, "an ftrace patch site: its ftrace hook runs the probes");
	/* the dynamic linker's hook (kprobes.c) runs from a detour too */
	const struct ukp_plist *l = atomic_load(&s->probes);
	if (!s->hook && (!l || !l->n))
		return false;
	if (l && l->any_post)
		return nope(why, n, "a probe here has a post_handler (it runs after the "
			    "instruction, single-stepped)");
	for (unsigned i = 0; l && i < l->n; i++) {
		if (l->p[i]->flags & (KPROBE_FLAG_DISABLED | KPROBE_FLAG_GONE))
			return nope(why, n, "a probe here is disabled");
		if (ukp_is_jprobe_handler(l->p[i]))
			return nope(why, n, "a jprobe here");
	}
	/* no jump, done or pending, over this address */
	for (unsigned k = 1; k < UKP_ARCH_REGION_BYTES_MAX; k++) {
		struct ukp_site *o = ukp_site_lookup(s->addr - k);
		/* (a run's site: its own region is no jump, its head's is) */
		if (region_covers(o, k) && (o->optimized || (o->resume && !o->run_head))) {
			if (s->run_head == o && atomic_load(&s->resume))
				return false;	/* in o's run: optimised with it */
			if (region_dead_at(o, k))
				return nope(why, n, "dead padding under the jump at -%u: never runs", k);
			return nope(why, n, "under the jump at -%u", k);
		}
	}
	/* no other armed probe inside (before the analysis: inside the
	 * jump's own bytes, which every region covers), unless a run takes
	 * them: each at an instruction of the analysed region, plain, not
	 * optimised nor in another run */
	unsigned len = region_covers(s, 0) ? ukp_arch_span(&s->opt->r) : UKP_ARCH_JMP_LEN;
	bool inside = false;
	for (unsigned k = 1; k < len; k++) {
		struct ukp_site *o = ukp_site_lookup(s->addr + k);
		if (!o || (!o->armed && !o->optimized))
			continue;
		/* on dead padding: never fires, whatever its probes; not
		 * with a jump of its own (done or pending) nor for the
		 * dynamic linker's hook (run NULL), which is never taken
		 * out for a probe's sake */
		if (run && !s->hook && region_dead_at(s, k) && !o->optimized &&
		    !atomic_load(&o->resume))
			continue;
		if (region_covers(s, 0) && s->opt->r.pun)
			return nope(why, n, "punned jump: another probe's %s in the bytes it reads, "
				    "at +%u", o->optimized ? "jump" : "int3", k);
		if (o->optimized)
			return nope(why, n, "the jump of the probe at +%u lies in the region", k);
		if (!region_covers(s, 0))
			return nope(why, n, "another probe in the region, at +%u (not analysed)", k);
		if (!run)
			return nope(why, n, "another probe in the region, at +%u", k);
		if (!plain_locked(o))
			return nope(why, n, "another probe in the region, at +%u, is not a plain "
				    "kprobe (a post_handler, jprobe, return probe or disabled)%s", k,
				    o->opt ? "" : " or not analysed");
		if (atomic_load(&o->resume) && o->run_head != s)
			return nope(why, n, "the probe at +%u, in the region, is being optimized", k);
		bool at_insn = false;
		for (unsigned j = 1; j < s->opt->r.ninsn; j++)
			at_insn |= s->opt->r.insn[j].addr == o->addr;
		if (!at_insn)
			return nope(why, n, "another probe in the region, at +%u, not at one of "
				    "its instructions", k);
		inside = true;
	}
	if (inside && (!plain_locked(s) || s->opt->kret))
		return nope(why, n, "probes in the region, and a return probe's entry here (a "
			    "run starts with plain kprobes)");
	if (run)
		*run = inside;
	return true;
}

/* ---- analysis and detour ------------------------------------------------- */

static void whereof(struct ukp_site *s, struct ukp_where *w)
{
	if (ukp_sym_where(s->addr, w))
		memset(w, 0, sizeof(*w));
}

/* Objects' descriptions, made once (under ukp_lock). */
struct desc_cache { struct ukp_objdesc d; struct desc_cache *next; };
static struct desc_cache *descs;

static const struct ukp_objdesc *desc_of(struct ukp_object *obj)
{
	for (struct desc_cache *c = descs; c; c = c->next)
		if (c->d.key == obj)
			return &c->d;
	struct desc_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	if (ukp_sym_object_desc(obj, &c->d)) {
		free(c);
		return NULL;
	}
	c->next = descs;
	descs = c;
	return &c->d;
}

static int analyse(unsigned long addr, struct ukp_region *r, char *why, size_t n)
{
	struct ukp_where w;
	const char *bl;
	if (ukp_sym_where(addr, &w) || !w.obj) {
		snprintf(why, n, "not in a known function");
		return -ENOENT;
	}
	if (ukp_sym_blacklisted(addr, &bl)) {
		snprintf(why, n, "blacklisted: %s", bl);
		return -EINVAL;
	}
	const struct ukp_objdesc *od = desc_of(w.obj);
	if (!od) {
		snprintf(why, n, "not in a known function");
		return -ENOMEM;
	}
	return ukp_arch_opt_analyze(addr, w.func_start, w.func_end, od, r, why, n);
}

int ukp_opt_check(unsigned long addr, char *why, size_t n)
{
	struct ukp_region r;
	ukp_init_once();
	ukp_lock_registry();
	int err = analyse(addr, &r, why, n);
	pthread_mutex_unlock(&ukp_lock);
	if (!err && r.pun) {
		/* why: "punned jump: <what the region of whole instructions met>" */
		char region[96];
		snprintf(region, sizeof(region), "%s",
			 strncmp(why, "punned jump: ", 13) ? "?" : why + 13);
		snprintf(why, n, "ok (punned jump, %u-byte instruction; its region: %s), saves %s",
			 r.len, region, ukp_arch_vsave_name(r.vsave));
	} else if (!err) {
		snprintf(why, n, "ok, saves %s", ukp_arch_vsave_name(r.vsave));
	}
	return err;
}

int ukp_opt_why_not(unsigned long addr, char *why, size_t n)
{
	int err = -EAGAIN;
	bool run;
	ukp_init_once();
	ukp_lock_registry();
	struct ukp_site *s = ukp_site_lookup(addr);
	const struct ukp_plist *l = s ? atomic_load(&s->probes) : NULL;
	if (!l || !l->n)
		err = -ENOENT;
	else if (s->optimized || (s->run_head && s->run_head->optimized && atomic_load(&s->resume)))
		err = 0;
	else if (s->opt && s->opt->state < 0)
		snprintf(why, n, "%s", s->opt->why);
	else if (wanted_locked(s, &run, why, n))
		snprintf(why, n, "held or not yet tried");
	pthread_mutex_unlock(&ukp_lock);
	if (err == -EAGAIN && !why[0])
		snprintf(why, n, "?");
	return err;
}

static void report(struct ukp_site *s, int level, const char *what)
{
	if (verbose() >= level) {
		struct ukp_where w;
		whereof(s, &w);
		ukp_log("kprobe at %s+0x%lx: %s", w.func[0] ? w.func : "?",
			s->addr - w.func_start, what);
	}
}

/*
 * Why a site is not optimised now (wanted_locked, a batch that held it),
 * once per reason: a site is looked at again at every change near it.
 */
static void report_why_not(struct ukp_site *s, const char *why)
{
	if (!verbose() || !why[0])
		return;
	uint32_t h = 2166136261u;	/* FNV-1a; 0 is "nothing said" */
	for (const char *c = why; *c; c++)
		h = (h ^ (uint8_t)*c) * 16777619u;
	h |= 1;
	if (h == s->said)
		return;
	s->said = h;
	char what[192];
	snprintf(what, sizeof(what), "not optimized: %s", why);
	report(s, 1, what);
}

static void report_refusal(struct ukp_site *s)
{
	char what[sizeof(s->opt->why) + 32];
	snprintf(what, sizeof(what), "not optimized: %s", s->opt->why);
	report(s, 1, what);
}

/*
 * The safety analysis, once per site.  Registration runs it before the
 * batch is armed: the first analysis in an object decodes all of it, and
 * in the optimizer thread every library call it makes (Zydis' memset...)
 * could be a probed one, each hit a trap.
 */
void ukp_opt_analyse_locked(struct ukp_site *s)
{
	if (s->opt)
		return;
	struct ukp_opt *o = calloc(1, sizeof(*o));
	if (!o)
		return;
	s->opt = o;
	o->state = 1;
	if (analyse(s->addr, &o->r, o->why, sizeof(o->why))) {
		o->state = -1;
		report_refusal(s);
	} else if (o->r.pun) {
		report(s, 1, o->why);	/* "punned jump: <the region's refusal>" */
	}
}

/* ---- handlers that leave the vector state alone ---------------------------- */

/*
 * Whether a handler (with all it calls) provably touches no vector, mask,
 * x87 or MMX register, nor MXCSR or the x87 control/status words, by
 * function address; NULL is fine.  Such handlers let a probe use the lean
 * trampoline, which saves none of that state (most of a detour's cost).
 * Cached; forgotten when objects go away (an address may be reused).
 */
struct gpr_cache { unsigned long fn; bool ok, leaf, df; uint16_t writes, reads; };
static struct gpr_cache *gprc;
static size_t ngprc, capgprc;

static int fn_bounds(unsigned long addr, unsigned long *lo, unsigned long *hi)
{
	struct ukp_where w;
	if (ukp_sym_where(addr, &w) || !w.obj || w.func_end <= w.func_start)
		return -ENOENT;
	*lo = w.func_start;
	*hi = w.func_end;
	return 0;
}

struct ro_query { unsigned long addr; bool ro; };

static int ro_phdr(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct ro_query *q = arg;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		unsigned long lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
		if (q->addr < lo || q->addr + 8 > hi)
			continue;
		if (ph->p_type == PT_GNU_RELRO ||
		    (ph->p_type == PT_LOAD && !(ph->p_flags & PF_W))) {
			q->ro = true;
			return 1;
		}
	}
	return 0;
}

static bool slot_read_only(unsigned long addr)
{
	struct ro_query q = { addr, false };
	dl_iterate_phdr(ro_phdr, &q);
	return q.ro;
}

static const struct ukp_code_env code_env = { fn_bounds, slot_read_only };

static const struct gpr_cache *handler_facts_locked(unsigned long fn)
{
	static const struct gpr_cache oom = { 0, false, false, true, 0xffff, 0xffff };
	for (size_t i = 0; i < ngprc; i++)
		if (gprc[i].fn == fn)
			return &gprc[i];
	char why[112];
	bool ok = ukp_arch_code_gpr_only(fn, &code_env, why, sizeof(why)) == 0;
	uint16_t writes = 0xffff, reads = 0xffff;
	bool df = true;
	bool leaf = ukp_arch_code_leaf(fn, &code_env, &writes, &reads, &df) == 0;
	if (verbose() >= 2)
		ukp_log("handler at %#lx: %s%s", fn, ok ? "leaves vector state alone" : why,
			leaf ? ", a leaf" : "");
	if (ngprc == capgprc) {
		size_t nc = capgprc ? 2 * capgprc : 16;
		struct gpr_cache *nv = realloc(gprc, nc * sizeof(*nv));
		if (!nv)
			return &oom;
		gprc = nv;
		capgprc = nc;
	}
	gprc[ngprc] = (struct gpr_cache){ fn, ok, leaf, df, writes, reads };
	return &gprc[ngprc++];
}

bool ukp_opt_gpr_only_locked(unsigned long fn)
{
	return !fn || handler_facts_locked(fn)->ok;
}

bool ukp_opt_leaf_locked(unsigned long fn)
{
	return fn && handler_facts_locked(fn)->leaf;
}

/*
 * The code [fn, end) of every handler found bare: a fault in a bare hit
 * is its handler's only if it is in there (trap.c; a leaf runs no other
 * code), not in a program signal handler that interrupted it on its
 * stack, whose registers are not the probed code's.  Written under
 * ukp_lock; read by signal handlers without a lock: an entry's fn is 0
 * while it is free, stored last (release) when it is taken, and
 * cleared when its object goes (ukp_opt_objects_changed).
 */
#define BARE_MAX 256
static struct { _Atomic unsigned long fn, end; } bare_code[BARE_MAX];
static _Atomic unsigned nbare;

/* the code no longer there, or not where it was: the entry is free */
static void bare_code_forget_gone_locked(void)
{
	unsigned n = atomic_load_explicit(&nbare, memory_order_relaxed);
	for (unsigned i = 0; i < n; i++) {
		unsigned long fn = atomic_load_explicit(&bare_code[i].fn, memory_order_relaxed), lo, hi;
		if (fn && (fn_bounds(fn, &lo, &hi) || lo != fn ||
			   hi != atomic_load_explicit(&bare_code[i].end, memory_order_relaxed)))
			atomic_store_explicit(&bare_code[i].fn, 0, memory_order_relaxed);
	}
}

/* A pre_handler the bare fast path may run (entry.S: ukp_lean_tpl_bare):
 * a leaf that never reads its regs argument (%rsi, in any way), writes
 * only registers that path saves (the stack pointer aside: a leaf that
 * returns has balanced it) and neither reads nor writes the direction
 * flag (so that path neither tests nor restores it); its code is
 * recorded (BARE_MAX of them: after that, the lean path) */
bool ukp_opt_bare_locked(unsigned long fn)
{
	const struct gpr_cache *c = fn ? handler_facts_locked(fn) : NULL;
	if (!c || !c->ok || !c->leaf || c->df || (c->reads & UKP_GPR(UKP_RSI)) ||
	    (c->writes & ~(UKP_ARCH_BARE_SAVED | UKP_GPR(UKP_RSP))))
		return false;
	/* an ftrace site in it: a hook there runs C code, which wants DF
	 * clear, and the bare path leaves DF as the probe point had it */
	unsigned long lo, hi;
	if (fn_bounds(fn, &lo, &hi) || lo != fn || ukp_ftrace_overlaps(lo, hi))
		return false;
	unsigned n = atomic_load_explicit(&nbare, memory_order_relaxed), free = n;
	for (unsigned i = 0; i < n; i++) {
		unsigned long f = atomic_load_explicit(&bare_code[i].fn, memory_order_relaxed);
		if (f == fn)
			return true;
		if (!f && free == n)
			free = i;
	}
	if (free == BARE_MAX)
		return false;
	atomic_store_explicit(&bare_code[free].end, hi, memory_order_relaxed);
	atomic_store_explicit(&bare_code[free].fn, fn, memory_order_release);
	if (free == n)
		atomic_store_explicit(&nbare, n + 1, memory_order_release);
	return true;
}

bool ukp_opt_in_bare_code(unsigned long ip)
{
	unsigned n = atomic_load_explicit(&nbare, memory_order_acquire);
	for (unsigned i = 0; i < n; i++) {
		unsigned long fn = atomic_load_explicit(&bare_code[i].fn, memory_order_acquire);
		if (fn && ip >= fn && ip < atomic_load_explicit(&bare_code[i].end, memory_order_relaxed))
			return true;
	}
	return false;
}

bool ukp_opt_leaf_regs_locked(unsigned long fn, uint16_t *writes, uint16_t *reads)
{
	const struct gpr_cache *c = fn ? handler_facts_locked(fn) : NULL;
	if (!c || !c->leaf)
		return false;
	*writes = c->writes;
	*reads = c->reads;
	return true;
}

int ukp_opt_handler_check(void *fn, char *why, size_t n)
{
	ukp_init_once();
	ukp_lock_registry();
	int err = fn ? ukp_arch_code_gpr_only((unsigned long)fn, &code_env, why, n) : 0;
	pthread_mutex_unlock(&ukp_lock);
	if (!err)
		snprintf(why, n, "ok");
	return err;
}

/* The trampoline for the site's probes as they are now: a lean one if
 * every handler leaves the vector state alone (the leaf one if the only
 * handler is a leaf), else the one for what is live at the probe point. */
static void (*tramp_vsave_locked(const struct ukp_site *s, bool kret,
				 enum ukp_vsave vsave))(void)
{
	if (s->hook)	/* ordinary C, in the dynamic linker's midst */
		return ukp_arch_opt_tramp(UKP_VSAVE_XSAVE);
	const struct ukp_plist *l = atomic_load(&s->probes);
	if (l && l->kret1 && kret)
		return ukp_opt_tramp_kret;	/* needs the kret detour's word */
	if (l && l->lean1 == 2)
		return ukp_opt_tramp_lean_leaf;
	if (l && l->gpr_only)
		return ukp_opt_tramp_lean;
	return ukp_arch_opt_tramp(vsave);
}

static void (*tramp_for_locked(const struct ukp_site *s, bool kret))(void)
{
	return tramp_vsave_locked(s, kret, s->opt->r.vsave);
}

/* a word of the detour's header (UKP_ARCH_HDR_*) */
static uint8_t *hdr_word(const struct ukp_opt *o, unsigned off)
{
	return o->detour + (o->kret ? UKP_ARCH_KRET_HDR : UKP_ARCH_SEL_SIZE) + off;
}

/* a segment's (never the return probes' variant) */
static uint8_t *seg_word(const struct seg *g, unsigned off)
{
	return g->detour + UKP_ARCH_SEL_SIZE + off;
}

/* Does the detour's entry go straight to one of its own fast paths
 * (sel)?  While the list is one lean probe (one bare probe: the bare
 * path) and the fast paths may run at all (readers fenced by membarrier:
 * decided at start, before any site): the path a fast path takes
 * otherwise puts everything back first. */
static int sel_mode_locked(const struct ukp_site *s)
{
	const struct ukp_plist *l = atomic_load(&s->probes);
	if (!l || !l->lean1 || s->hook || (atomic_load(&ukp_gp) & UKP_GP_NOFAST))
		return UKP_SEL_TRAMP;
	return l->bare_fn ? UKP_SEL_BARE : UKP_SEL_LEAN;
}

/* sel, and the entry's jmp (an aligned displacement: one store, and a
 * thread running it meanwhile goes the old way or the new one, each of
 * which checks the list for itself, as ftrace retargets its stubs) */
static void sel_set_at(uint8_t *detour, unsigned entry, int mode)
{
	if (ukp_slot_is_shared(detour))	/* the parent's code */
		return;
	unsigned to = ukp_arch_detour_sel(entry, mode);
	ukp_slot_set_word(detour + UKP_ARCH_SEL, (uint64_t)(uintptr_t)detour + to);
	ukp_slot_set_u32(detour + entry + 1,
			 (uint32_t)(int32_t)((long)to - (long)(entry + UKP_ARCH_JMP_LEN)));
}

static void sel_set_locked(const struct ukp_opt *o, int mode)
{
	if (!o->kret)
		sel_set_at(o->detour, o->entry, mode);
}

const uint8_t *ukp_opt_detour_header(unsigned long addr)
{
	ukp_lock_registry();
	struct ukp_site *s = ukp_site_lookup(addr);
	const uint8_t *h = s && s->opt && s->opt->detour ? hdr_word(s->opt, 0) : NULL;
	pthread_mutex_unlock(&ukp_lock);
	return h;
}

/* the one the trampoline is called through */
static uint8_t *tramp_word(const struct ukp_opt *o)
{
	return hdr_word(o, UKP_ARCH_HDR_TRAMP);
}

/* s->probes was just published: the detour's copy of it too, before any
 * grace period (which then covers readers of either) */
void ukp_opt_list_published_locked(struct ukp_site *s)
{
	if (s->opt && s->opt->detour)
		ukp_slot_set_private_word(hdr_word(s->opt, UKP_ARCH_HDR_LIST),
				  (uint64_t)(uintptr_t)atomic_load(&s->probes));
	for (struct seg *g = s->opt ? s->opt->segs : NULL; g; g = g->older)
		ukp_slot_set_private_word(seg_word(g, UKP_ARCH_HDR_LIST),
					  (uint64_t)(uintptr_t)atomic_load(&s->probes));
}

/* The probes changed: the detour goes on through a word in its header
 * to the trampoline they need, switched with one store (a thread
 * already in a lean path that finds a handler needing more is sent back
 * to save everything). */
static void tramp_refresh_locked(struct ukp_site *s)
{
	if (s && s->opt && s->opt->detour && !ukp_slot_is_shared(s->opt->detour)) {
		ukp_slot_set_word(tramp_word(s->opt), (uint64_t)(uintptr_t)tramp_for_locked(s, s->opt->kret));
		sel_set_locked(s->opt, sel_mode_locked(s));
	}
	for (struct seg *g = s && s->opt ? s->opt->segs : NULL; g; g = g->older) {
		if (ukp_slot_is_shared(g->detour))
			continue;
		ukp_slot_set_word(seg_word(g, UKP_ARCH_HDR_TRAMP),
				  (uint64_t)(uintptr_t)tramp_vsave_locked(s, false, g->r.vsave));
		sel_set_at(g->detour, g->entry, sel_mode_locked(s));
	}
}

/* ip is R of the site's detour of the return probes' variant (the opt
 * and its detour are never freed while the site lives, so no lock) */
bool ukp_opt_kret_r(const struct ukp_site *s, unsigned long ip)
{
	const struct ukp_opt *o = s->opt;
	return o && o->kret && o->detour &&
	       ip == (unsigned long)o->detour + o->copy - UKP_ARCH_KRET_R_LEN;
}

int ukp_opt_force_tramp(unsigned long addr, void (*tramp)(void))
{
	int err = -ENOENT;
	ukp_lock_registry();
	struct ukp_site *s = ukp_site_lookup(addr);
	if (s && s->opt && s->opt->detour) {
		ukp_slot_set_word(tramp_word(s->opt), (uint64_t)(uintptr_t)(tramp ? tramp :
				  ukp_arch_opt_tramp(s->opt->r.vsave)));
		sel_set_locked(s->opt, UKP_SEL_TRAMP);	/* that trampoline runs */
		err = 0;
	}
	pthread_mutex_unlock(&ukp_lock);
	return err;
}

/* The detour, once per site (never freed: a thread may be inside). */
/*
 * Hops: where a punned jump lands (its target fixed but for its low
 * bytes), a jmp rel32 to the detour.  Pages of our own mapped where the
 * targets fall (read+exec, written through /proc/self/mem as code is),
 * a byte map of what each holds; never freed, as slots.
 */
struct hop_page { unsigned long base; uint64_t used[4096 / 64]; };
static struct hop_page *hop_pages;	/* under ukp_lock */
static size_t nhop_pages, caphop_pages;

static bool hop_free(const struct hop_page *g, unsigned off)
{
	for (unsigned i = off; i < off + UKP_ARCH_JMP_LEN; i++)
		if (g->used[i / 64] & (1ULL << (i % 64)))
			return false;
	return true;
}

static bool reaches(unsigned long from, unsigned long to)
{
	long d = (long)(to - (from + UKP_ARCH_JMP_LEN));
	return d >= INT32_MIN && d <= INT32_MAX;
}

/* a hop's address in [lo, hi] within a page of ours, or 0 */
static unsigned long hop_in_pages(unsigned long lo, unsigned long hi, unsigned long to)
{
	for (size_t i = 0; i < nhop_pages; i++) {
		struct hop_page *g = &hop_pages[i];
		unsigned long a = lo > g->base ? lo : g->base;
		for (; a <= hi && a + UKP_ARCH_JMP_LEN <= g->base + 4096; a++)
			if (hop_free(g, (unsigned)(a - g->base)) && reaches(a, to))
				return a;
	}
	return 0;
}

static struct hop_page *hop_page_of(unsigned long a)
{
	for (size_t i = 0; i < nhop_pages; i++)
		if (a - hop_pages[i].base < 4096)
			return &hop_pages[i];
	return NULL;
}

/* a new page of ours at base (free memory only), or NULL */
static struct hop_page *hop_map(unsigned long base)
{
	if (nhop_pages == caphop_pages) {
		size_t nc = caphop_pages ? 2 * caphop_pages : 16;
		struct hop_page *nv = realloc(hop_pages, nc * sizeof(*nv));
		if (!nv)
			return NULL;
		hop_pages = nv;
		caphop_pages = nc;
	}
	void *m = mmap((void *)base, 4096, PROT_READ | PROT_EXEC,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	if ((unsigned long)m != base) {		/* a kernel without NOREPLACE */
		munmap(m, 4096);
		return NULL;
	}
	struct hop_page *g = &hop_pages[nhop_pages++];
	memset(g, 0, sizeof(*g));
	g->base = base;
	return g;
}

/* a hop in [lo, hi] to `to`, written; 0 if there is no room */
static unsigned long hop_alloc(unsigned long lo, unsigned long hi, unsigned long to)
{
	unsigned long a = hop_in_pages(lo, hi, to);
	/* else a new page: the first few the window starts in */
	for (unsigned long base = lo & ~4095UL, tries = 0; !a && base <= hi && tries < 4;
	     base += 4096, tries++) {
		unsigned long at = lo > base ? lo : base;
		if (at + UKP_ARCH_JMP_LEN > base + 4096 || !reaches(at, to) || hop_page_of(base) ||
		    !hop_map(base))
			continue;
		a = at;
	}
	if (!a)
		return 0;
	struct hop_page *g = hop_page_of(a);
	uint8_t jmp[UKP_ARCH_JMP_LEN];
	struct ukp_poke pk[UKP_ARCH_JMP_LEN];
	ukp_arch_make_jump(jmp, a, to);
	for (unsigned i = 0; i < UKP_ARCH_JMP_LEN; i++)
		pk[i] = (struct ukp_poke){ a + i, jmp[i] };
	if (ukp_text_poke_batch(pk, UKP_ARCH_JMP_LEN))
		return 0;
	for (unsigned i = (unsigned)(a - g->base); i < a - g->base + UKP_ARCH_JMP_LEN; i++)
		g->used[i / 64] |= 1ULL << (i % 64);
	return a;
}

/* The hop of a punned region, to the detour's entry: the fewest prefixes
 * first (the widest window) */
static bool pun_place_locked(struct ukp_opt *o, unsigned long entry)
{
	unsigned long lo, hi;
	for (unsigned p = 0; ukp_arch_pun_window(&o->r, p, &lo, &hi); p++) {
		unsigned long a = hop_alloc(lo, hi, entry);
		if (a) {
			o->pun_p = p;
			o->hop = a;
			return true;
		}
	}
	return false;
}

static void prepare_locked(struct ukp_site *s)
{
	ukp_opt_analyse_locked(s);
	struct ukp_opt *o = s->opt;
	if (!o || o->state < 0 || o->detour)
		return;
	uint8_t code[UKP_DETOUR_MAX];
	/* a return probe here: the variant that lets it prime the return
	 * stack buffer (a few instructions more for every hit, so only then) */
	bool kret = false;
	const struct ukp_plist *l = atomic_load(&s->probes);
	for (unsigned i = 0; l && i < l->n; i++)
		kret |= ukp_is_kret_entry(l->p[i]);
	void (*tramp)(void) = tramp_for_locked(s, kret);
	int sel = sel_mode_locked(s);
	int len = ukp_arch_build_detour(&o->r, code, s->addr, s, l, tramp, sel, kret,
					&o->entry, &o->copy, &o->map);
	uint8_t *d = len < 0 ? NULL : ukp_slot_alloc(s->addr, (size_t)len + 16);
	if (d)
		len = ukp_arch_build_detour(&o->r, code, (unsigned long)d, s, l, tramp, sel,
					    kret, &o->entry, &o->copy, &o->map);
	if (len < 0) {
		snprintf(o->why, sizeof(o->why), "unrelocatable instruction: %s",
			 strerror(-len));
	} else if (!d || ukp_slot_write_detour(d, code, (size_t)len, s, &o->map, o->entry,
						 s->addr + o->r.len)) {
		snprintf(o->why, sizeof(o->why), "no detour memory within reach");
	} else if (o->r.pun && !pun_place_locked(o, (unsigned long)d + o->entry)) {
		snprintf(o->why, sizeof(o->why), "punned jump: no room where it can land");
	} else {
		o->kret = kret;
		o->detour = d;
		if (verbose() >= 2) {
			char what[96];
			snprintf(what, sizeof(what), "detour of %u bytes; saves %s",
				 o->r.len, tramp == ukp_opt_tramp_kret ?
				 "no registers but its own (a plain kretprobe's entry)" :
				 tramp == ukp_opt_tramp_lean ?
				 "no vector state (handlers keep to general registers)" :
				 tramp == ukp_opt_tramp_lean_leaf ?
				 "no vector state nor errno (a leaf handler)" :
				 ukp_arch_vsave_name(o->r.vsave));
			report(s, 2, what);
		}
		return;
	}
	o->state = -1;
	report_refusal(s);
}

/*
 * The segment of site m in the run that s heads: instructions [from, to)
 * of s's region, going on to next (0: after them).  Made once per shape.
 */
static struct seg *seg_get_locked(struct ukp_site *m, struct ukp_site *s, unsigned from,
				  unsigned to, unsigned long next)
{
	const struct ukp_region *hr = &s->opt->r;
	unsigned long end = to < hr->ninsn ? hr->insn[to].addr : hr->addr + hr->len;
	unsigned long exit = hr->addr + hr->len;
	for (struct seg *g = m->opt->segs; g; g = g->older)
		if (g->r.len == end - m->addr && g->r.next == next && g->exit == exit &&
		    g->r.ninsn == to - from)
			return g;
	struct seg *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	g->r.addr = m->addr;
	g->r.len = (unsigned)(end - m->addr);
	g->r.ninsn = to - from;
	memcpy(g->r.insn, &hr->insn[from], g->r.ninsn * sizeof(g->r.insn[0]));
	memcpy(g->r.orig, hr->orig + (m->addr - hr->addr), g->r.len);
	g->r.next = next;
	g->exit = exit;
	if (m == s) {
		g->r.vsave = hr->vsave;
		g->r.flags_dead = hr->flags_dead;
	} else {
		struct ukp_where w;
		const struct ukp_objdesc *od = ukp_sym_where(m->addr, &w) || !w.obj ? NULL :
					       desc_of(w.obj);
		ukp_arch_opt_point(m->addr, w.func_start, w.func_end, od, &g->r.vsave,
				   &g->r.flags_dead);	/* else: everything saved */
	}
	uint8_t code[UKP_DETOUR_MAX];
	const struct ukp_plist *l = atomic_load(&m->probes);
	void (*tramp)(void) = tramp_vsave_locked(m, false, g->r.vsave);
	int sel = sel_mode_locked(m);
	int len = ukp_arch_build_detour(&g->r, code, m->addr, m, l, tramp, sel, false,
					&g->entry, &g->copy, &g->map);
	uint8_t *d = len < 0 ? NULL : ukp_slot_alloc(m->addr, (size_t)len + 16);
	if (d)
		len = ukp_arch_build_detour(&g->r, code, (unsigned long)d, m, l, tramp, sel, false,
					    &g->entry, &g->copy, &g->map);
	if (len < 0 || !d || ukp_slot_write_detour(d, code, (size_t)len, m, &g->map, g->entry,
						   exit)) {
		free(g);	/* its memory, if any, stays unused: nothing ran there */
		return NULL;
	}
	g->detour = d;
	g->older = m->opt->segs;
	m->opt->segs = g;
	return g;
}

/*
 * s heads a run: the armed sites its region covers, each one's segment
 * (built back to front: each goes on to the next one's entry).  false:
 * no memory for them (s is then left a breakpoint).
 */
static bool run_build_locked(struct ukp_site *s)
{
	struct ukp_opt *o = s->opt;
	const struct ukp_region *hr = &o->r;
	struct ukp_site *ms[UKP_REGION_MAX];
	unsigned idx[UKP_REGION_MAX], n = 0;
	struct seg *sg[UKP_REGION_MAX];

	ms[n] = s;
	idx[n++] = 0;
	for (unsigned j = 1; j < hr->ninsn; j++) {
		struct ukp_site *m = ukp_site_lookup(hr->insn[j].addr);
		if (m && m->armed) {
			ms[n] = m;
			idx[n++] = j;
		}
	}
	unsigned long next = 0;
	for (unsigned i = n; i-- > 0;) {
		sg[i] = seg_get_locked(ms[i], s, idx[i], i + 1 < n ? idx[i + 1] : hr->ninsn, next);
		if (!sg[i])
			return false;
		next = (unsigned long)sg[i]->detour + sg[i]->entry;
	}
	o->nrun = n;
	memcpy(o->run, ms, n * sizeof(ms[0]));
	memcpy(o->run_seg, sg, n * sizeof(sg[0]));
	return true;
}

/* where s's jump goes, and where a trap at s resumes */
static unsigned long jump_target(const struct ukp_opt *o)
{
	return o->nrun ? (unsigned long)o->run_seg[0]->detour + o->run_seg[0]->entry :
			 (unsigned long)o->detour + o->entry;
}

/* the bytes a jump of o writes (a punned one: its instruction's, the
 * rest are the code's own) */
static unsigned jump_len(const struct ukp_opt *o)
{
	return o->r.pun ? o->r.len : UKP_ARCH_JMP_LEN;
}

/* The bytes of o's jump into jmp; how many of them it writes, 0 if none */
static unsigned jump_bytes(const struct ukp_opt *o, uint8_t jmp[UKP_ARCH_PUN_SPAN_MAX])
{
	if (o->r.pun) {
		if (!ukp_arch_make_pun(jmp, &o->r, o->pun_p, o->hop))
			return 0;
	} else {
		ukp_arch_make_jump(jmp, o->r.addr, jump_target(o));
	}
	return jump_len(o);
}

/*
 * The armed sites on the dead padding s's jump covers point at s while
 * it is published (as a run's sites do): a change at one (disabled, all
 * kprobes disabled) takes s's jump out first, which puts its int3 back.
 */
static void pad_publish_locked(struct ukp_site *s, bool on)
{
	for (unsigned k = 1; k < UKP_ARCH_REGION_BYTES_MAX; k++) {
		struct ukp_site *c = ukp_site_lookup(s->addr + k);
		if (!c)
			continue;
		if (on && c->armed && !c->run_head && region_dead_at(s, k))
			c->run_head = s;
		else if (!on && c->run_head == s && !atomic_load(&c->resume))
			c->run_head = NULL;
	}
}

/* publish (or take back) where traps at s and its run's sites resume */
static void run_publish_locked(struct ukp_site *s, bool on)
{
	struct ukp_opt *o = s->opt;
	if (!on)
		pad_publish_locked(s, false);
	if (!o->nrun) {
		atomic_store(&s->resume, on ? o->detour + o->copy : NULL);
		if (on)
			pad_publish_locked(s, true);
		return;
	}
	for (unsigned i = 0; i < o->nrun; i++) {
		struct seg *g = o->run_seg[i];
		atomic_store(&o->run[i]->resume, on ? g->detour + g->copy : NULL);
		if (i)
			o->run[i]->run_head = on ? s : NULL;
	}
	if (on)
		pad_publish_locked(s, true);
}

/* ---- the registry's side -------------------------------------------------- */

static void unopt_add(struct ukp_unopt *u, struct ukp_site *s)
{
	for (size_t i = 0; i < u->n; i++)
		if (u->v[i] == s)
			return;
	if (u->n == u->cap) {
		size_t nc = u->cap ? 2 * u->cap : 16;
		struct ukp_site **nv = realloc(u->v, nc * sizeof(*nv));
		if (!nv)
			return;
		u->v = nv;
		u->cap = nc;
	}
	u->v[u->n++] = s;
}

void ukp_opt_collect_site_locked(struct ukp_unopt *u, struct ukp_site *s)
{
	if (s && s->run_head)
		ukp_opt_collect_site_locked(u, s->run_head);
	if (s && (s->optimized || atomic_load(&s->resume) || s->queued))
		unopt_add(u, s);
}

/* Every site whose jump (done, pending, or queued) covers addr (a run's
 * site at addr: its head's). */
void ukp_opt_collect_locked(struct ukp_unopt *u, unsigned long addr)
{
	for (unsigned k = 0; k < UKP_ARCH_REGION_BYTES_MAX; k++) {
		struct ukp_site *s = ukp_site_lookup(addr - k);
		if (s && (!k || (region_covers(s, k) && !s->run_head)))
			ukp_opt_collect_site_locked(u, s);
	}
}

static void poke_region(struct ukp_poke *pk, size_t *n, const struct ukp_site *s,
			unsigned from, unsigned to, const uint8_t *bytes)
{
	for (unsigned k = from; k < to; k++)
		pk[(*n)++] = (struct ukp_poke){ s->addr + k, bytes[k] };
}

/*
 * The dynamic linker's hook (kprobes.c: r_brk) as a jump from the first,
 * never a breakpoint: a thread that calls dlopen with every signal
 * blocked (a worker thread of a server, glibc's NSS and iconv loading
 * their modules there) would be killed by the kernel at an int3.  Only
 * where the region is one ret and the padding after it (glibc's
 * _dl_debug_state): bytes 1..4 never run, so they are written first and
 * byte 0 goes from ret to jmp in one store, with no int3 between.  The
 * site is armed and optimised as if through a batch, so that turning
 * optimisation off leaves the usual int3.  false: not done (the caller
 * arms the int3).
 */
bool ukp_opt_hook_direct_locked(struct ukp_site *s)
{
	if (!s->hook || s->armed || !wanted_locked(s, NULL, NULL, 0))
		return false;
	prepare_locked(s);
	struct ukp_opt *o = s->opt;
	if (!o || o->state < 0 || !o->detour || o->kret || o->r.ninsn != 1 || o->r.pun ||
	    o->r.insn[0].flow != UKP_FLOW_RET)
		return false;
	uint8_t jmp[UKP_ARCH_JMP_LEN];
	ukp_arch_make_jump(jmp, s->addr, (unsigned long)o->detour + o->entry);
	struct ukp_poke p1[UKP_ARCH_JMP_LEN];
	size_t n1 = 0;
	poke_region(p1, &n1, s, 1, UKP_ARCH_JMP_LEN, jmp);
	struct ukp_poke p0 = { s->addr, jmp[0] };
	if (ukp_text_poke_batch(p1, n1) || ukp_text_poke_batch(&p0, 1))
		return false;
	ukp_mark_patched_locked(s->addr, o->r.len);
	s->armed = true;	/* as if an int3 were under the jump */
	s->optimized = true;
	return true;
}

static void retried_locked(struct ukp_site *s, bool held_again);

void ukp_opt_unoptimize_locked(struct ukp_unopt *u)
{
	size_t n1 = 0, n2 = 0;
	struct ukp_poke *p1 = malloc((u->n + 1) * sizeof(*p1));
	struct ukp_poke *p2 = malloc((u->n + 1) * 4 * sizeof(*p2));

	for (size_t i = 0; i < u->n; i++) {
		struct ukp_site *s = u->v[i];
		s->gen++;
		if (s->queued && s->requeued)	/* its retry will not come */
			retried_locked(s, false);
		s->queued = false;	/* the optimizer skips it: gen changed */
		if (!s->optimized)
			continue;
		s->optimized = false;
		set_run_flags_locked(s, false);
		if (atomic_load(&s->dead) || !p1 || !p2)
			continue;
		/* the int3 stays: the registry disarms it if it must */
		p1[n1++] = (struct ukp_poke){ s->addr, UKP_ARCH_BREAKPOINT };
		size_t from = n2;
		poke_region(p2, &n2, s, 1, jump_len(s->opt), s->opt->r.orig);
		/* the int3s the jump covered: a run's sites', and those of
		 * probes on the dead padding after its last instruction */
		for (unsigned k = 1; k < jump_len(s->opt); k++) {
			const struct ukp_site *c = ukp_site_lookup(s->addr + k);
			if (c && c->armed && c->run_head == s)
				p2[from + k - 1].byte = UKP_ARCH_BREAKPOINT;
		}
		s->armed = true;
	}
	ukp_text_poke_batch(p1, n1);
	ukp_text_poke_batch(p2, n2);
	/* only now may a hit resume in the one-instruction slot: its jump
	 * back lands inside the region, which holds the original code again */
	for (size_t i = 0; i < u->n; i++) {
		struct ukp_site *s = u->v[i];
		if (s->opt) {
			run_publish_locked(s, false);
			s->opt->nrun = 0;
		}
		atomic_store(&s->resume, NULL);
	}
	free(p1);
	free(p2);
	free(u->v);
	memset(u, 0, sizeof(*u));
}

static bool push_locked(struct ukp_site ***v, size_t *n, size_t *cap, struct ukp_site *s)
{
	if (*n == *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		struct ukp_site **nv = realloc(*v, nc * sizeof(*nv));
		if (!nv)
			return false;
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = s;
	return true;
}

/*
 * Sites not queued, or left out of a batch, for a condition of the
 * moment (UKPROBES_VERBOSE only): told why once the batches in flight
 * are done, if still so.  Told at once, a probe that the next batch
 * covers with a run (its own region then no matter) or that waits for
 * its neighbours' probes to be published would read as refused.
 */
static struct ukp_site **told;
static size_t ntold, captold;

static void tell_later_locked(struct ukp_site *s)
{
	if (!verbose() || s->tell || !push_locked(&told, &ntold, &captold, s))
		return;
	s->tell = true;
	pthread_cond_signal(&opt_cv);	/* (the optimizer tells, if idle) */
}

static void tell_locked(void)
{
	for (size_t i = 0; i < ntold; i++) {
		struct ukp_site *s = told[i];
		char why[160];
		bool run;
		s->tell = false;
		if (s->queued || s->optimized || (s->opt && s->opt->state < 0))
			continue;	/* (a refused analysis was told) */
		if (!wanted_locked(s, &run, why, sizeof(why)))
			report_why_not(s, why);
	}
	ntold = 0;
}

static bool queue_locked(struct ukp_site *s)
{
	bool run;
	if (s->queued || s->optimized || (s->opt && s->opt->state < 0))
		return false;
	if (!wanted_locked(s, &run, NULL, 0)) {
		tell_later_locked(s);
		return false;
	}
	if (!push_locked(&queue, &nqueue, &capqueue, s)) {
		report_why_not(s, "out of memory for the optimizer's queue");
		return false;
	}
	s->queued = true;
	return true;
}

static void enqueue_locked(struct ukp_site *s)
{
	if (!queue_locked(s))
		return;
	queued_gen++;
	pthread_cond_signal(&opt_cv);
}

/*
 * Sites a batch could not patch (a thread that cannot answer is in the
 * region or would return into it; a thread that stayed busy): tried
 * again after a while, doubling up to RETRY_MAX_NS while they fail.
 * wait_for_kprobe_optimizer waits RETRY_WAIT_NS at most for them (such a
 * thread may sleep for good); the probe is a breakpoint meanwhile.
 */
static struct ukp_site **retry;
static size_t nretry, capretry;
#define RETRY_MIN_NS (50L * 1000 * 1000)
#define RETRY_MAX_NS (5L * 1000 * 1000 * 1000)
#define RETRY_WAIT_NS (1000L * 1000 * 1000)	/* wait_for_kprobe_optimizer */
static long retry_ns = RETRY_MIN_NS, retry_due;	/* CLOCK_MONOTONIC */
static unsigned untried;	/* held sites whose first retry is to come */
static bool retrying;		/* requeued sites in the queue or its batch */

/* s has had its retry (held again, or not), or leaves the retries */
static void retried_locked(struct ukp_site *s, bool held_again)
{
	if (s->held == 1 && untried)	/* (0 in a fork child: fork_child) */
		untried--;
	s->held = held_again ? 2 : 0;
	s->requeued = false;
}

static long mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void requeue_retry_locked(void)
{
	for (size_t i = 0; i < nretry; i++) {
		if (retry[i]->requeued)
			continue;	/* twice in the list */
		if (queue_locked(retry[i]))
			retrying = retry[i]->requeued = true;
		else
			retried_locked(retry[i], false);
	}
	nretry = 0;
}

/* After a change at addr: its site and the ones whose region covers it. */
void ukp_opt_update_locked(unsigned long addr)
{
	tramp_refresh_locked(ukp_site_lookup(addr));
	for (unsigned k = 0; k < UKP_ARCH_REGION_BYTES_MAX; k++) {
		struct ukp_site *s = ukp_site_lookup(addr - k);
		if (s && (!k || !s->opt || s->opt->state > 0))
			enqueue_locked(s);
	}
}

/* ---- asking threads where they are ---------------------------------------- */

static struct {
	_Atomic pid_t tid;
	/* the question << 2 | 1 asked, 2 fine (maybe moved), 3 busy: an
	 * answer late for its question (a thread that blocked in its
	 * handler, then went on) is never taken for a later one's */
	_Atomic unsigned state;
	unsigned question;
	_Atomic int readers;	/* handlers reading the batch: ask_all waits
				   for them before it lets the batch go */
	int attempt;		/* how often this thread was asked */
	struct ukp_site **v;
	size_t n;
	const unsigned long *nops;	/* ftrace sites of 1-byte nops */
	size_t nnops;
	bool *held;	/* sites of v a thread that cannot answer is inside
			   (or returns into): left out of the batch */
} ask;
static pthread_mutex_t ask_lock = PTHREAD_MUTEX_INITIALIZER;

/* The batch site whose region holds a (from its first byte on, or
 * after it), or -1. */
static long batch_site_at(unsigned long a, bool after)
{
	for (size_t i = 0; i < ask.n; i++) {
		const struct ukp_site *b = ask.v[i];
		if (a >= b->addr + after && a < b->addr + b->opt->r.len)
			return (long)i;
	}
	return -1;
}

/* Does a copy of the instruction at site s (its slot, its post path)
 * return into a region being patched?  Its own, or one it lies in. */
static bool in_batch_region(const struct ukp_site *s)
{
	return batch_site_at(s->addr, false) >= 0;
}

/*
 * The batch site whose region holds, past its first byte, the address a
 * thread at a in a detour goes back to (the copy's fall-through exit,
 * site + the region's length), or -1.  Only a detour whose jump is gone
 * can have it so (a live jump keeps every region over its exit out), and
 * a thread may still be in its copy: asleep in a system call there, or
 * preempted.  Its branches out are branch targets, which no region
 * holds; a call's return address is the same exit.
 */
static long detour_exit_in_batch(unsigned long a)
{
	struct ukp_slot_hit h;
	if (!ukp_slot_find(a, &h) || !h.detour)
		return -1;
	return batch_site_at(h.exit, true);
}

static bool in_post_trampoline(unsigned long a)
{
	return a >= (unsigned long)ukp_post_trampoline && a < (unsigned long)ukp_post_trampoline_end;
}

/*
 * Where the asked thread may go on at ip (where it is, or where a signal
 * frame of it returns to) while the batch is patched: 2 fine, with ip
 * moved from an instruction inside a region to the same one in the
 * detour's copy, or past nops (skipping them is running them); 3 not
 * now (inside an old slot or the post trampoline of a batch site).
 */
static int place_ip(unsigned long *ip)
{
	struct ukp_slot_hit h;
	unsigned long a = *ip;
	if (in_post_trampoline(a))
		return 3;
	if (ukp_slot_find(a, &h) && !h.detour && in_batch_region(h.site))
		return 3;
	if (detour_exit_in_batch(a) >= 0)
		return 3;	/* out of the detour in a moment */
	for (size_t i = 0; i < ask.nnops; i++)
		if (a > ask.nops[i] && a < ask.nops[i] + 5)
			*ip = ask.nops[i] + 5;
	long i = batch_site_at(a, true);
	if (i < 0)
		return 2;
	const struct ukp_site *s = ask.v[i];
	const struct ukp_opt *o = s->opt;
	/* a run: at a site of it, its segment's entry (its int3 has not run:
	 * its probes' turn comes); elsewhere the instruction's copy in the
	 * segment holding it */
	for (unsigned r = o->nrun; r-- > 0;) {
		const struct seg *g = o->run_seg[r];
		if (a < g->r.addr)
			continue;
		if (a == g->r.addr) {
			*ip = (unsigned long)g->detour + g->entry;
			return 2;
		}
		for (unsigned k = 1; k < g->map.n; k++)
			if (g->r.addr + g->map.orig_off[k] == a) {
				*ip = (unsigned long)g->detour + g->map.copy_off[k];
				return 2;
			}
		return 3;
	}
	for (unsigned k = 1; k < o->map.n; k++)
		if (s->addr + o->map.orig_off[k] == a) {
			*ip = (unsigned long)o->detour + o->map.copy_off[k];
			return 2;
		}
	return 3;
}

/*
 * The signal frames the asked thread is inside: a thread interrupted
 * between two instructions of a region, whose signal handler still runs
 * when the region is patched, would return into the jump's bytes (the
 * kernel waits for such tasks: synchronize_rcu_tasks).  Each frame is
 * found by the return address every handler is entered with (the
 * restorer), followed by the ucontext the kernel saved: its fpregs lie
 * just above it, and its sp above that unless it interrupted another
 * stack (the frame is on the sigaltstack), whose words are read too.
 * The saved ip goes through place_ip like the thread's own.
 *
 * Words are copied page by page into a mapping of the handler's own
 * with process_vm_readv: a read past a stack's end is EFAULT, not a
 * fault (in a handler that may block SIGSEGV, or under a debugger that
 * stops at every SIGSEGV).  Where it is forbidden (containers' seccomp
 * profiles without CAP_SYS_PTRACE), with ukp_copy_nofault if its faults
 * reach our handler (direct); neither: the whole batch is held.  A
 * stale frame (one that returned, its words still above sp in a frame
 * of the program's) may be moved too, its word being dead.  One that
 * place_ip would wait for is waited for a while (a handler that
 * interrupted a slot returns in microseconds), then holds its site: it
 * may be dead, and must not keep the whole batch waiting for good.
 */
#define FRAME_PATIENCE 64		/* questions, ~200 us apart */
#define FRAME_SCAN (128UL << 10)	/* bytes read above each sp */
#define FRAME_STACKS 4			/* sigaltstack and back, nested */
#define FRAME_FP_MAX (64UL << 10)	/* frame to its fpregs: xstate */
#define KERNEL_UC_WORDS 38		/* struct ucontext: flags, link,
					   stack, sigcontext, 64-bit mask */

#define FRAME_IOVS (FRAME_SCAN / 4096 + 1)
/* the mapping: FRAME_SCAN bytes of words, then the iovecs (off the
 * handler's stack, which may be a small sigaltstack) */
#define FRAME_MAP (FRAME_SCAN + FRAME_IOVS * sizeof(struct iovec))

static long read_self(void *dst, unsigned long src, size_t n, bool direct)
{
	if (direct) {	/* ukp_copy_nofault's faults reach our handler */
		size_t got = 0;
		for (unsigned long a = src; got < n;) {
			size_t len = (a | 4095) + 1 - a;
			if (len > n - got)
				len = n - got;
			if (ukp_copy_nofault((char *)dst + got, (const void *)a, len) < 0)
				break;
			got += len;
			a += len;
		}
		return (long)got;
	}
	struct iovec local = { dst, n }, *remote = (struct iovec *)((char *)dst + FRAME_SCAN);
	unsigned nr = 0;
	for (unsigned long a = src, end = src + n; a < end && nr < FRAME_IOVS; nr++) {
		unsigned long next = (a | 4095) + 1;
		remote[nr] = (struct iovec){ (void *)a, (next < end ? next : end) - a };
		a = next;
	}
	/* a partial read ends at the first page that cannot be read */
	return ukp_raw_syscall(SYS_process_vm_readv, ukp_raw_syscall(SYS_getpid, 0, 0, 0, 0, 0, 0),
			       (long)&local, 1, (long)remote, nr, 0);
}

/* Frames that cannot be looked at: every site held, or wait (nops). */
static int hold_all(void)
{
	for (size_t i = 0; ask.held && i < ask.n; i++)
		ask.held[i] = true;
	return ask.held ? 2 : 3;
}

/* A frame in the post trampoline returns to a site it does not show,
 * after the instruction of one that had a post_handler: every batch site
 * whose region holds such a site is held (or wait: nops). */
static int hold_post(void)
{
	for (size_t i = 0; i < ask.n; i++) {
		const struct ukp_site *b = ask.v[i];
		for (unsigned k = 0; k < b->opt->r.len; k++) {
			const struct ukp_site *s = k ? ukp_site_lookup(b->addr + k) : b;
			if (!s || !__atomic_load_n(&s->had_post, __ATOMIC_RELAXED))
				continue;
			if (!ask.held)
				return 3;
			ask.held[i] = true;
			break;
		}
	}
	return 2;
}

/*
 * For an ip that must not be moved (of a thread that cannot answer, and
 * may wake), or one of a signal frame that place_ip would wait for (a
 * frame may be dead: waiting for it would hold the whole batch for
 * good): 2 fine, or the batch site whose region it would go on in held
 * out of the batch (hold_post for a frame in the post trampoline); 3
 * wait (nops; the post trampoline for a thread's own ip).
 */
static int hold_ip(unsigned long a, bool frame)
{
	struct ukp_slot_hit h;
	long i = batch_site_at(a, true);
	if (i < 0 && ukp_slot_find(a, &h) && !h.detour)
		i = batch_site_at(h.site->addr, false);
	if (i < 0)
		i = detour_exit_in_batch(a);
	if (i >= 0 && ask.held) {
		ask.held[i] = true;
		return 2;
	}
	if (in_post_trampoline(a))
		return frame ? hold_post() : 3;
	unsigned long b = a;
	return i >= 0 || place_ip(&b) != 2 || b != a ? 3 : 2;
}

/* the int3 at the start of a batch site or nops, where a hit traps */
static bool at_batch_int3(unsigned long a)
{
	for (size_t i = 0; i < ask.n; i++) {
		if (ask.v[i]->addr == a)
			return true;
		for (unsigned r = 1; r < ask.v[i]->opt->nrun; r++)
			if (ask.v[i]->opt->run[r]->addr == a)
				return true;
	}
	for (size_t i = 0; i < ask.nnops; i++)
		if (ask.nops[i] == a)
			return true;
	return false;
}

#define UC_FPREGS offsetof(ucontext_t, uc_mcontext.fpregs)
#define UC_SP offsetof(ucontext_t, uc_mcontext.gregs[REG_RSP])
#define UC_IP offsetof(ucontext_t, uc_mcontext.gregs[REG_RIP])

static unsigned long word_at(const char *p, size_t off)
{
	unsigned long v;
	memcpy(&v, p + off, sizeof(v));
	return v;
}

static int frames_place(unsigned long sp, bool move, bool direct)
{
	unsigned long r = ukp_sig_restorer();
	if (!r || (!ask.n && !ask.nnops))
		return 2;
	long m = ukp_raw_syscall(SYS_mmap, 0, FRAME_MAP, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m < 0 && m > -4096)
		return hold_all();
	unsigned long *w = (unsigned long *)m, todo[FRAME_STACKS] = { sp & ~7UL };
	const size_t ucw = (sizeof(ucontext_t) + 7) / 8;
	_Static_assert(KERNEL_UC_WORDS * 8 + sizeof(siginfo_t) <= sizeof(ucontext_t),
		       "the frame's siginfo lies within the words read");
	unsigned nt = 1;
	int st = 2;
	for (unsigned k = 0; k < nt && st == 2; k++) {
		unsigned long base = todo[k];
		long got = read_self(w, base, FRAME_SCAN, false);
		bool denied = got < 0 && got != -EFAULT;	/* not EFAULT: not allowed */
		if (denied && direct) {
			got = read_self(w, base, FRAME_SCAN, true);
			denied = false;
		}
		if (denied || (k == 0 && got <= 0)) {	/* sp's own page is there */
			st = hold_all();
			break;
		}
		size_t nw = got > 0 ? (size_t)got / 8 : 0;
		for (size_t i = 0; i + 1 + ucw <= nw && st == 2; i++) {
			if (w[i] != r)
				continue;
			unsigned long a = base + 8 * i;
			const char *uc = (const char *)&w[i + 1];
			unsigned long fp = word_at(uc, UC_FPREGS), isp = word_at(uc, UC_SP);
			unsigned long ip = word_at(uc, UC_IP);
			if (fp <= a || fp - a > FRAME_FP_MAX)
				continue;	/* not a frame */
			bool here = isp >= base && isp < base + (unsigned long)got;
			if (here && isp <= fp)
				continue;	/* not a frame: its sp lies below */
			if (!here && nt < FRAME_STACKS)
				todo[nt++] = isp & ~7UL;	/* another stack */
			/* the siginfo, after the kernel's ucontext */
			const char *fsi = uc + 8 * KERNEL_UC_WORDS;
			if ((int)word_at(fsi, offsetof(siginfo_t, si_signo)) == SIGTRAP &&
			    (int)word_at(fsi, offsetof(siginfo_t, si_code)) == SI_KERNEL &&
			    at_batch_int3(ip - 1))
				continue;	/* a hit's trap: its handler places it */
			unsigned long nip = ip;
			st = move ? place_ip(&nip) : 3;
			if (st == 3 && (!move || ask.attempt >= FRAME_PATIENCE)) {
				nip = ip;
				st = hold_ip(ip, true);
			}
			if (nip != ip)
				*(volatile unsigned long *)(a + 8 + UC_IP) = nip;
		}
	}
	ukp_raw_syscall(SYS_munmap, m, FRAME_MAP, 0, 0, 0, 0);
	return st;
}

/* In the asked thread's handler of UKP_SIG_ASK (trap.c). */
bool ukp_opt_thread_query(siginfo_t *si, ucontext_t *uc)
{
	if (si->si_code != SI_QUEUE || si->si_value.sival_ptr != (void *)&ask ||
	    si->si_pid != getpid())
		return false;
	pid_t me = (pid_t)ukp_raw_syscall(SYS_gettid, 0, 0, 0, 0, 0, 0);
	unsigned asked = (unsigned)si->si_errno << 2 | 1;
	/* no program handler may run (and longjmp away, or fork) while this
	 * one counts as a reader; faults stay open for ukp_copy_nofault, and
	 * the handler's return puts the mask back */
	static const int open_sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP };
	uint64_t block = ~0ULL;
	for (size_t k = 0; k < sizeof(open_sigs) / sizeof(open_sigs[0]); k++)
		block &= ~(1ULL << (open_sigs[k] - 1));
	ukp_raw_syscall(SYS_rt_sigprocmask, SIG_BLOCK, (long)&block, 0, 8, 0, 0);
	atomic_fetch_add(&ask.readers, 1);	/* before the checks: see ask_all */
	if (atomic_load(&ask.tid) != me || atomic_load(&ask.state) != asked) {
		atomic_fetch_sub(&ask.readers, 1);
		return true;	/* a late answer to an old question */
	}
	unsigned long ip = ukp_arch_uc_ip(uc);
	struct ukp_thread *t = ukp_thread_peek();
	int st = t && t->in_post && in_batch_region(t->in_post) ? 3 : place_ip(&ip);
	ukp_arch_uc_set_ip(uc, ip);
	if (st == 2)	/* the mask this handler runs with: SA_NODEFER, none added */
		st = frames_place(ukp_arch_uc_sp(uc), true, ukp_nofault_usable(&uc->uc_sigmask));
	atomic_compare_exchange_strong(&ask.state, &asked, (asked & ~3U) | (unsigned)st);
	atomic_fetch_sub(&ask.readers, 1);
	return true;
}

/* ---- looking at a thread from outside ---------------------------------- */

/* /proc/self/task/TID/WHAT into buf, NUL-terminated: its length, or -1 */
static ssize_t read_task(pid_t tid, const char *what, char *buf, size_t n)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/%s", (int)tid, what);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t k = read(fd, buf, n - 1);
	close(fd);
	if (k < 0)
		return -1;
	buf[k] = 0;
	return k;
}

struct task_look {
	char state;			/* R running or runnable, S, D, T... */
	unsigned long long sigblk;	/* its blocked signals */
	unsigned long switches;		/* context switches, both kinds */
};

static unsigned long long status_field(const char *buf, const char *name, int base)
{
	const char *p = strstr(buf, name);
	return p ? strtoull(p + strlen(name), NULL, base) : 0;
}

static bool task_status(pid_t tid, struct task_look *l)
{
	char buf[4096];
	if (read_task(tid, "status", buf, sizeof(buf)) <= 0)
		return false;
	const char *st = strstr(buf, "\nState:");
	l->state = st ? st[strspn(st + 7, " \t") + 7] : 'X';
	l->sigblk = status_field(buf, "\nSigBlk:", 16);
	l->switches = (unsigned long)status_field(buf, "\nvoluntary_ctxt_switches:", 10) +
		      (unsigned long)status_field(buf, "\nnonvoluntary_ctxt_switches:", 10);
	return true;
}

/* A thread stopped in the post dispatch of a site inside a batch region
 * returns into that region: the batch site is held (or wait: nops).
 * Compared by address, never read: the site may be gone meanwhile. */
static int hold_post_of(const struct ukp_site *post)
{
	for (size_t i = 0; post && i < ask.n; i++) {
		const struct ukp_site *b = ask.v[i];
		for (unsigned k = 0; k < b->opt->r.len; k++) {
			if ((k ? ukp_site_lookup(b->addr + k) : b) != post)
				continue;
			if (!ask.held)
				return 3;
			ask.held[i] = true;
		}
	}
	return 2;
}

/*
 * Where a thread that sleeps in the kernel (a system call, a page fault,
 * stopped) will go on from: its user pc and sp as /proc shows them, the
 * post dispatch it runs, and the signal frames above its sp.  Nothing is
 * moved (it may wake at any moment): a batch site it would go on inside
 * is held out of the batch.  2 fine (maybe with sites held), 3 not now.
 */
static int judge_sleeper(pid_t tid, unsigned long pc, unsigned long sp)
{
	if (!pc || hold_post_of(ukp_thread_in_post(tid)) != 2)
		return 3;
	sigset_t mask;
	pthread_sigmask(SIG_SETMASK, NULL, &mask);
	int st = hold_ip(pc, false);
	if (st == 2 && sp)
		st = frames_place(sp, false, ukp_nofault_usable(&mask));
	return st;
}

enum { LOOK_DONE, LOOK_AGAIN, LOOK_RUNNING };

/*
 * Looks at thread tid without disturbing it: LOOK_DONE when it is gone
 * or sleeps where the batch may go on (sites held as judge_sleeper says),
 * LOOK_RUNNING when it runs (or may run: runnable), LOOK_AGAIN when it
 * moved while looked at, or sleeps where the batch must wait.
 *
 * The look is taken between two reads of where it sleeps; it holds only
 * if both are the same and the thread's context switch count did not
 * move from before the first to after the second: a thread that ran in
 * between and slept again was switched out, and counted.
 */
static int look(pid_t tid, struct task_look *l)
{
	char s1[256], s2[256];
	struct task_look after;
	if (!task_status(tid, l) || l->state == 'Z' || l->state == 'X')
		return LOOK_DONE;
	if (l->state == 'R')
		return LOOK_RUNNING;
	ssize_t k1 = read_task(tid, "syscall", s1, sizeof(s1));
	if (k1 <= 0)
		return LOOK_DONE;	/* gone */
	if (!strncmp(s1, "running", 7))
		return LOOK_RUNNING;
	/* "nr a1 .. a6 sp pc", or "-1 sp pc" outside a system call */
	char *last = strrchr(s1, ' ');
	unsigned long pc = last ? strtoul(last + 1, NULL, 0) : 0;
	unsigned long sp = 0;
	if (last) {
		*last = 0;
		char *second = strrchr(s1, ' ');
		sp = second ? strtoul(second + 1, NULL, 0) : 0;
		*last = ' ';
	}
	int st = judge_sleeper(tid, pc, sp);
	ssize_t k2 = read_task(tid, "syscall", s2, sizeof(s2));
	if (k2 <= 0 || !task_status(tid, &after))
		return LOOK_DONE;
	if (k2 != k1 || memcmp(s1, s2, (size_t)k1) || after.switches != l->switches)
		return LOOK_AGAIN;
	return st == 2 ? LOOK_DONE : LOOK_AGAIN;
}

/* ---- asking a running thread ------------------------------------------- */

/* One question to thread tid: LOOK_DONE answered fine (or gone),
 * LOOK_AGAIN busy (inside an old slot...) or no answer within ~20 ms. */
static int ask_thread(pid_t tid, int attempt)
{
	siginfo_t si;
	memset(&si, 0, sizeof(si));
	si.si_signo = UKP_SIG_ASK;
	si.si_code = SI_QUEUE;
	si.si_pid = getpid();
	si.si_uid = getuid();
	si.si_value.sival_ptr = (void *)&ask;
	unsigned q = ask.question = (ask.question + 1) & 0x3fffffffU;
	ask.attempt = attempt;
	si.si_errno = (int)q;	/* rt_tgsigqueueinfo passes it on */
	atomic_store(&ask.state, q << 2 | 1);
	atomic_store(&ask.tid, tid);
	if (syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, UKP_SIG_ASK, &si)) {
		atomic_store(&ask.tid, 0);
		return errno == ESRCH ? LOOK_DONE : LOOK_AGAIN;
	}
	unsigned st = 1;
	for (int spin = 0; spin < 2000 && (st = atomic_load(&ask.state) & 3) == 1; spin++) {
		if (spin < 50)
			sched_yield();
		else
			sleep_ns(10000);
	}
	atomic_store(&ask.tid, 0);
	return st == 2 ? LOOK_DONE : LOOK_AGAIN;
}

#define ASK_AFTER_NS (20L * 1000 * 1000)	/* a running thread's time
						   to fall asleep */
#define ASK_POLL_NS (100L * 1000)
#define ASK_GIVE_UP_NS (8L * 1000 * 1000 * 1000)

/*
 * Every thread but this one and the optimizer, until each is judged:
 *   1. look at each (look()): a sleeping one is judged from outside;
 *   2. a running one is looked at again every ASK_POLL_NS: most fall
 *      asleep soon (a worker going back to its queue, a loop to its
 *      poll);
 *   3. one still running after ASK_AFTER_NS is asked (ask_thread), if
 *      it can answer: the question's signal not blocked, and our handler
 *      still the kernel's action for it; else it is watched until it
 *      sleeps.
 * -EBUSY if some thread could not be judged within ASK_GIVE_UP_NS.
 */
static int ask_all(struct ukp_site **v, size_t n, bool *held, const unsigned long *nops,
		   size_t nnops)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -errno;
	pid_t me = (pid_t)syscall(SYS_gettid);	/* not in the region: here */
	size_t nt = 0, cap = 0;
	pid_t *tids = NULL;
	int *asked = NULL, err = 0;
	struct dirent *e;
	while (!err && (e = readdir(d))) {
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid <= 0 || tid == opt_tid || tid == me)
			continue;
		if (nt == cap) {
			cap = cap ? 2 * cap : 64;
			pid_t *nv = realloc(tids, cap * sizeof(*nv));
			int *na = realloc(asked, cap * sizeof(*na));
			if (nv)
				tids = nv;
			if (na)
				asked = na;
			if (!nv || !na) {
				err = -ENOMEM;
				break;
			}
		}
		asked[nt] = 0;
		tids[nt++] = tid;
	}
	closedir(d);

	pthread_mutex_lock(&ask_lock);
	ask.v = v;
	ask.n = n;
	ask.nops = nops;
	ask.nnops = nnops;
	ask.held = held;
	long t0 = mono_ns();
	while (nt && !err) {
		bool may_ask = mono_ns() - t0 >= ASK_AFTER_NS;
		size_t keep = 0;
		for (size_t i = 0; i < nt; i++) {
			struct task_look l;
			int r = look(tids[i], &l);
			if (r == LOOK_RUNNING && may_ask &&
			    !(l.sigblk & (1ULL << (UKP_SIG_ASK - 1))) && ukp_ask_handler_installed())
				r = ask_thread(tids[i], asked[i]++);
			if (r != LOOK_DONE) {
				asked[keep] = asked[i];
				tids[keep++] = tids[i];
			}
		}
		nt = keep;
		if (nt && mono_ns() - t0 > ASK_GIVE_UP_NS)
			err = -EBUSY;
		else if (nt)
			sleep_ns(ASK_POLL_NS);
	}
	/* a thread whose answer came late may still read the batch (ask.tid
	 * is 0 now: no other starts) */
	while (atomic_load(&ask.readers))
		sleep_ns(50000);
	ask.v = NULL;
	ask.n = 0;
	ask.nops = NULL;
	ask.nnops = 0;
	ask.held = NULL;
	pthread_mutex_unlock(&ask_lock);
	free(tids);
	free(asked);
	return err;
}

/* ftrace: before five 1-byte nops at a become one instruction, no thread
 * may be between them (one found there is moved past them). */
int ukp_opt_ask_nops(const unsigned long *a, size_t n)
{
	return ask_all(NULL, 0, NULL, a, n);
}

static int ask_all_threads(struct ukp_site **v, size_t n, bool *held)
{
	return ask_all(v, n, held, NULL, 0);
}

/* ---- the optimizer ---------------------------------------------------------- */

static int by_addr(const void *a, const void *b)
{
	unsigned long x = (*(struct ukp_site *const *)a)->addr;
	unsigned long y = (*(struct ukp_site *const *)b)->addr;
	return x < y ? -1 : x > y;
}

static void optimize_batch(void)
{
	struct ukp_site **batch;
	unsigned *gens;
	size_t n = 0;

	ukp_lock_registry();
	unsigned long gen_target = queued_gen;
	batch = malloc((nqueue + 1) * sizeof(*batch));
	gens = malloc((nqueue + 1) * sizeof(*gens));
	/* by address: a run's first site comes before the ones it takes */
	qsort(queue, nqueue, sizeof(*queue), by_addr);
	for (size_t i = 0; i < nqueue; i++) {
		struct ukp_site *s = queue[i];
		if (!s->queued)
			continue;
		s->queued = false;
		if (!batch || !gens) {	/* no memory: a later try */
			bool again = push_locked(&retry, &nretry, &capretry, s);
			if (s->requeued || s->held)
				retried_locked(s, again);
			continue;
		}
		bool run = false, nomem = false;
		bool ok = wanted_locked(s, &run, NULL, 0);
		if (ok) {
			prepare_locked(s);	/* (a refusal is reported there) */
			ok = s->opt && s->opt->detour && wanted_locked(s, &run, NULL, 0);
		}
		if (ok) {
			s->opt->nrun = 0;
			if (run)
				nomem = !(ok = run_build_locked(s));
		}
		if (!ok) {
			if (nomem)
				report_why_not(s, "no memory for its run's segments");
			else
				tell_later_locked(s);
			if (s->requeued)
				retried_locked(s, false);
			continue;
		}
		run_publish_locked(s, true);
		gens[n] = s->gen;
		batch[n++] = s;
	}
	nqueue = 0;
	pthread_mutex_unlock(&ukp_lock);

	int err = batch && gens ? 0 : -ENOMEM;
	bool *held = calloc(n + 1, sizeof(*held));
	if (n && !held)
		err = -ENOMEM;
	else if (n) {
		ukp_synchronize();
		err = ask_all_threads(batch, n, held);
	}
	size_t nheld = 0;

	ukp_lock_registry();
	struct ukp_poke *p1 = malloc((4 * n + 1) * sizeof(*p1));
	struct ukp_poke *p2 = malloc((n + 1) * sizeof(*p2));
	size_t n1 = 0, n2 = 0;
	if (!err && (!p1 || !p2))
		err = -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct ukp_site *s = batch[i];
		bool run = false;
		if (s->gen != gens[i] || !wanted_locked(s, &run, NULL, 0) || !s->armed ||
		    run != (s->opt->nrun > 0)) {
			if (s->gen == gens[i])	/* (else its change requeued it) */
				tell_later_locked(s);
			if (s->gen == gens[i]) {	/* (else unoptimised: taken back) */
				run_publish_locked(s, false);
				s->opt->nrun = 0;
			}
			if (s->requeued || s->held)
				retried_locked(s, false);
			continue;
		}
		if (err || held[i]) {
			/* could not prove every thread outside: later */
			const char *hw = err ? "held: the threads could not all be looked at "
					 "(tried again later)" : "held: a thread stands in the region "
					 "or would return into it (tried again later)";
			/* (and the sites its run would have covered) */
			for (unsigned r = 0; r < (s->opt->nrun ? s->opt->nrun : 1); r++)
				report_why_not(r ? s->opt->run[r] : s, hw);
			run_publish_locked(s, false);
			s->opt->nrun = 0;
			nheld += !err;
			if (!push_locked(&retry, &nretry, &capretry, s)) {
				if (s->requeued || s->held)	/* no try to wait for */
					retried_locked(s, false);
			} else if (s->requeued) {
				retried_locked(s, true);
			} else if (!s->held) {
				s->held = 1;
				untried++;
			}
			continue;
		}
		if (s->requeued || s->held)
			retried_locked(s, false);
		uint8_t jmp[UKP_ARCH_PUN_SPAN_MAX];
		unsigned jl = jump_bytes(s->opt, jmp);
		if (!jl) {	/* (cannot be: its hop is in its window) */
			run_publish_locked(s, false);
			s->opt->nrun = 0;
			continue;
		}
		poke_region(p1, &n1, s, 1, jl, jmp);
		p2[n2++] = (struct ukp_poke){ s->addr, jmp[0] };
		ukp_mark_patched_locked(s->addr, s->opt->r.len);
		s->optimized = true;
		set_run_flags_locked(s, true);
		/* the probes on its dead padding: why they stay breakpoints */
		for (unsigned k = 1; verbose() && k < jump_len(s->opt); k++) {
			struct ukp_site *c = ukp_site_lookup(s->addr + k);
			char why[64];
			snprintf(why, sizeof(why), "dead padding under the jump at -%u: never runs", k);
			if (c && c->run_head == s && !atomic_load(&c->resume))
				report_why_not(c, why);
		}
	}
	ukp_text_poke_batch(p1, n1);
	ukp_text_poke_batch(p2, n2);
	free(p1);
	free(p2);
	if (done_gen < gen_target)
		done_gen = gen_target;
	retrying = false;	/* this batch had them */
	if (!nqueue)
		tell_locked();	/* (else the next batch tells) */
	if (nheld || err) {
		retry_due = mono_ns() + retry_ns;
		retry_ns = retry_ns < RETRY_MAX_NS / 2 ? 2 * retry_ns : RETRY_MAX_NS;
	} else if (!nretry) {
		retry_ns = RETRY_MIN_NS;
	}
	pthread_cond_broadcast(&done_cv);
	pthread_mutex_unlock(&ukp_lock);
	if (err && verbose())
		ukp_log("optimizer: a thread did not leave the probed regions; will retry");
	if (nheld && verbose())
		ukp_log("optimizer: %zu probe(s) left as breakpoints: a thread that cannot be "
			"asked (signals blocked, or stopped) would return into the region", nheld);
	free(held);
	free(batch);
	free(gens);
}

static void *optimizer(void *arg)
{
	(void)arg;
	opt_tid = (pid_t)syscall(SYS_gettid);
	struct ukp_thread *self = ukp_thread_self();
	/* probes it hits run no handler: the C paths test internal, and
	 * in_handler 1 keeps it out of the hand-written ones (HIT_LOCK), as
	 * if always inside a handler; no C path it takes clears it */
	if (self) {
		self->internal = 1;
		self->in_handler = 1;
	}
	pthread_mutex_lock(&ukp_lock);
	for (;;) {
		/* retries due join the next batch, however busy the queue */
		while (!nqueue || (nretry && mono_ns() >= retry_due)) {
			if (nretry && mono_ns() >= retry_due) {
				requeue_retry_locked();
				continue;
			}
			if (ntold) {
				/* what no batch is coming to tell: after the
				 * delay a burst of registrations takes */
				long due = mono_ns() + OPT_DELAY_NS;
				struct timespec td = { due / 1000000000L, due % 1000000000L };
				pthread_cond_clockwait(&opt_cv, &ukp_lock, CLOCK_MONOTONIC, &td);
				if (!nqueue && mono_ns() >= due)
					tell_locked();
				continue;
			}
			if (!nretry) {
				pthread_cond_wait(&opt_cv, &ukp_lock);
				continue;
			}
			struct timespec ts = { retry_due / 1000000000L, retry_due % 1000000000L };
			pthread_cond_clockwait(&opt_cv, &ukp_lock, CLOCK_MONOTONIC, &ts);
		}
		/* the delay a burst takes, cut short by a waiter (as the
		 * kernel's wait_for_kprobe_optimizer flushes its delayed work) */
		long due = mono_ns() + OPT_DELAY_NS;
		struct timespec td = { due / 1000000000L, due % 1000000000L };
		while (!hurry && mono_ns() < due)
			pthread_cond_clockwait(&opt_cv, &ukp_lock, CLOCK_MONOTONIC, &td);
		hurry = false;
		pthread_mutex_unlock(&ukp_lock);
		optimize_batch();
		pthread_mutex_lock(&ukp_lock);
	}
	return NULL;
}

static void start_thread(void);

void ukp_opt_start(void)
{
	ukp_lock_registry();
	bool start = !thread_running && (nqueue || nretry);
	if (start)
		thread_running = true;
	pthread_mutex_unlock(&ukp_lock);
	if (start)
		start_thread();
}

/*
 * The optimizer thread is made at initialisation, before any probe is
 * armed: glibc's start_thread runs _setjmp and more with every signal
 * blocked, and a breakpoint hit there kills the process (the kernel
 * forces a blocked SIGTRAP).  Only a fork child, where the parent's
 * probes are armed already, makes one later (see README, limitations).
 */
static void start_thread(void)
{
	pthread_t th;
	pthread_attr_t at;
	sigset_t all, old;
	/* the program's signals go to its own threads; not the ones a
	 * probe hit or a fault raise (this thread calls libc functions a
	 * user may probe, and the kernel kills a thread that traps with
	 * SIGTRAP blocked) */
	sigfillset(&all);
	sigdelset(&all, SIGTRAP);
	sigdelset(&all, SIGSEGV);
	sigdelset(&all, SIGBUS);
	sigdelset(&all, SIGFPE);
	sigdelset(&all, SIGILL);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &at, optimizer, NULL)) {
		ukp_lock_registry();
		thread_running = false;
		pthread_mutex_unlock(&ukp_lock);
	} else {
		pthread_setname_np(th, "kprobe-optimize");	/* 15 characters at most */
	}
	pthread_attr_destroy(&at);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* A fork child's copy of the slot memory (slots.c) was taken after the
 * parent let go of the lock: a list, trampoline or entry the parent
 * switched meanwhile is in it.  Each detour's words and entry again from
 * this process's own sites. */
static void fork_child_detour(struct ukp_site *s)
{
	ukp_opt_list_published_locked(s);
	tramp_refresh_locked(s);
}

static void fork_child(void)
{
	ukp_sites_each_locked(fork_child_detour);
	/* the optimizer thread stayed in the parent; the next call starts one */
	thread_running = false;
	pthread_cond_init(&opt_cv, NULL);
	pthread_cond_init(&done_cv, NULL);
	/* a thread asking when fork ran is not in the child */
	pthread_mutex_init(&ask_lock, NULL);
	atomic_store(&ask.tid, 0);
	atomic_store(&ask.readers, 0);
	retrying = false;	/* its batch ran in the parent */
	untried = 0;		/* that batch's sites: settled at their next one */
}

void ukp_opt_init(void)
{
	pthread_atfork(NULL, NULL, fork_child);
	thread_running = true;
	start_thread();
}

void wait_for_kprobe_optimizer(void)
{
	ukp_init_once();
	ukp_opt_start();
	ukp_lock_registry();
	unsigned long target = queued_gen;
	if (done_gen < target) {
		hurry = true;
		pthread_cond_signal(&opt_cv);
	}
	while (done_gen < target && thread_running)
		pthread_cond_wait(&done_cv, &ukp_lock);
	/* sites held back: their first retry (most often it goes through),
	 * and a retry under way; a second at most (a thread may sleep in a
	 * region for good).  A site held again is not waited for again. */
	long end = mono_ns() + RETRY_WAIT_NS;
	struct timespec ts = { end / 1000000000L, end % 1000000000L };
	while ((untried || retrying) && thread_running && mono_ns() < end)
		pthread_cond_clockwait(&done_cv, &ukp_lock, CLOCK_MONOTONIC, &ts);
	if (!nqueue)
		tell_locked();	/* what no batch was left to tell */
	pthread_mutex_unlock(&ukp_lock);
}

static void collect_cb(struct ukp_site *s, void *arg)
{
	ukp_opt_collect_site_locked(arg, s);
}

/*
 * Probes registered with the knob off were not analysed (registration
 * analyses only while it is on): analysed first, since a site's check of
 * the probes inside its region needs its region, and without it every
 * probe with another within 5 bytes - every instruction of a function -
 * would stay a breakpoint.  (Analysing a site a post_handler keeps a
 * breakpoint is harmless: it is done once, and ready for when it goes.)
 */
static void analyse_cb(struct ukp_site *s, void *arg)
{
	(void)arg;
	const struct ukp_plist *l = atomic_load(&s->probes);
	if (l && l->n && !s->ftrace && !atomic_load(&s->dead))
		ukp_opt_analyse_locked(s);
}

/* (after analyse_cb over every site: a site's check reads its
 * neighbours' analyses too) */
static void enqueue_cb(struct ukp_site *s, void *arg)
{
	(void)arg;
	enqueue_locked(s);
}

int kprobes_set_optimization(int on)
{
	ukp_init_once();
	ukp_lock_registry();
	opt_knob = !!on;
	if (on) {
		ukp_each_site_locked(analyse_cb, NULL);
		ukp_each_site_locked(enqueue_cb, NULL);
	} else {
		struct ukp_unopt u = { 0 };
		ukp_each_site_locked(collect_cb, &u);
		ukp_opt_unoptimize_locked(&u);
	}
	pthread_mutex_unlock(&ukp_lock);
	ukp_opt_start();
	return 0;
}

int kprobes_get_optimization(void)
{
	return opt_knob;
}

static bool object_dead(const void *key)
{
	return !ukp_sym_object_alive((struct ukp_object *)key);
}

/* under ukp_lock, after an unload: dead sites leave the queue when the
 * optimizer sees them (their jumps went with the mapping); analyses of
 * unloaded objects are dropped */
void ukp_opt_objects_changed(void)
{
	ukp_arch_opt_forget_if(object_dead);
	ngprc = 0;
	bare_code_forget_gone_locked();
	for (struct desc_cache **pp = &descs; *pp;) {
		struct desc_cache *c = *pp;
		if (object_dead(c->d.key)) {
			*pp = c->next;
			free(c->d.funcs);
			free(c);
		} else {
			pp = &c->next;
		}
	}
}
