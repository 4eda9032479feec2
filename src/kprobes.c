/* SPDX-License-Identifier: MIT */
/*
 * The registry: sites, probe lists, registration, arming, the knobs and
 * the list.
 *
 * Probe states (one struct kprobe):
 *
 *   unregistered --register--> registered/armed <--disable/enable--> registered/disabled
 *        ^                        |     \__ knob off: disarmed, state kept
 *        |                        |  object unloaded
 *        +------unregister--------+----> gone (KPROBE_FLAG_GONE, never runs)
 *
 * A site (one per address) is armed - its int3 written - exactly when the
 * knob is on, it is not dead, and it has a hook or a registered probe
 * that is neither disabled nor gone (site_wants_arm).  The public flags
 * are the only per-probe state; the site's list says "registered".
 *
 * Locking: ukp_lock protects the records, the site table's writers and
 * every site's armed/orig state.  The hit path takes no lock: it reads the
 * site table (entries never removed) and a site's probe list (immutable,
 * swapped whole, freed after ukp_synchronize()).  ukp_synchronize() is
 * never called with ukp_lock held, because the dlclose hook takes
 * ukp_lock from inside the hit path.
 */
#include <fcntl.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"

pthread_mutex_t ukp_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * The dynamic linker announces an unload (RT_DELETE) before it unmaps and
 * reports it done (RT_CONSISTENT) after; only then do we know which
 * objects went.  In between, code we would write may be unmapped under us
 * (a fault) or, worse, replaced by another mapping.  So the RT_DELETE hook
 * marks the window under ukp_lock (any write in progress finishes first)
 * and every path that may write code waits it out before it looks at the
 * registry.  The closing thread itself never waits (a probe handler it
 * runs in the window may register).
 */
static pthread_cond_t dl_done = PTHREAD_COND_INITIALIZER;
static bool dl_deleting, dl_closer_known;	/* under ukp_lock */
static pthread_t dl_closer;

void ukp_lock_registry(void)
{
	pthread_mutex_lock(&ukp_lock);
	while (dl_deleting && !(dl_closer_known && pthread_equal(dl_closer, pthread_self())))
		pthread_cond_wait(&dl_done, &ukp_lock);
}

__thread int ukp_log_quiet;
__thread int ukp_register_in_object;

void ukp_log(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n = snprintf(buf, sizeof(buf), "ukprobes: ");
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	if (!ukp_log_quiet && !getenv("UKPROBES_QUIET"))
		(void)!write(2, buf, n);
}

/* ---- hash maps ------------------------------------------------------------ */

/*
 * Open addressing, linear probing.  The site map is read without locks:
 * entries are never removed (a dead site is replaced in place), an entry
 * publishes its value before its key, and an outgrown array is kept
 * (never freed) so a reader can finish its probe sequence in it.
 */
struct ent { _Atomic unsigned long key; void *_Atomic val; };
struct tab { size_t mask, used; struct ent e[]; };
struct map { struct tab *_Atomic t; };

#define TOMB 1UL

static size_t hash(unsigned long k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdUL;
	k ^= k >> 33;
	return (size_t)k;
}

static void *map_get(struct map *m, unsigned long key)
{
	struct tab *t = atomic_load_explicit(&m->t, memory_order_acquire);
	if (!t)
		return NULL;
	for (size_t i = hash(key) & t->mask;; i = (i + 1) & t->mask) {
		unsigned long k = atomic_load_explicit(&t->e[i].key, memory_order_acquire);
		if (k == key)
			return atomic_load_explicit(&t->e[i].val, memory_order_relaxed);
		if (!k)
			return NULL;
	}
}

static struct tab *tab_new(size_t n)
{
	struct tab *t = calloc(1, sizeof(*t) + n * sizeof(struct ent));
	if (t)
		t->mask = n - 1;
	return t;
}

static void tab_put(struct tab *t, unsigned long key, void *val)
{
	size_t i = hash(key) & t->mask, tomb = (size_t)-1;
	for (;; i = (i + 1) & t->mask) {
		unsigned long k = atomic_load(&t->e[i].key);
		if (k == key) {
			atomic_store(&t->e[i].val, val);
			return;
		}
		if (k == TOMB && tomb == (size_t)-1)
			tomb = i;
		if (!k)
			break;
	}
	if (tomb != (size_t)-1)
		i = tomb;
	else
		t->used++;
	atomic_store_explicit(&t->e[i].val, val, memory_order_relaxed);
	atomic_store_explicit(&t->e[i].key, key, memory_order_release);
}

/* under ukp_lock */
static int map_put(struct map *m, unsigned long key, void *val, bool free_old)
{
	struct tab *t = atomic_load(&m->t);
	if (!t || (t->used + 1) * 2 > t->mask + 1) {
		size_t n = t ? 2 * (t->mask + 1) : 1024;
		struct tab *nt = tab_new(n);
		if (!nt)
			return -ENOMEM;
		for (size_t i = 0; t && i <= t->mask; i++) {
			unsigned long k = atomic_load(&t->e[i].key);
			if (k && k != TOMB)
				tab_put(nt, k, atomic_load(&t->e[i].val));
		}
		atomic_store_explicit(&m->t, nt, memory_order_release);
		if (free_old)
			free(t);	/* only for maps without lock-free readers */
		t = nt;
	}
	tab_put(t, key, val);
	return 0;
}

/* under ukp_lock; maps without lock-free readers only */
static void map_del(struct map *m, unsigned long key)
{
	struct tab *t = atomic_load(&m->t);
	if (!t)
		return;
	for (size_t i = hash(key) & t->mask;; i = (i + 1) & t->mask) {
		unsigned long k = atomic_load(&t->e[i].key);
		if (k == key) {
			atomic_store(&t->e[i].key, TOMB);
			return;
		}
		if (!k)
			return;
	}
}

static struct map sites;	/* addr -> struct ukp_site */

void ukp_sites_each_locked(void (*fn)(struct ukp_site *))
{
	struct tab *t = atomic_load_explicit(&sites.t, memory_order_acquire);
	for (size_t i = 0; t && i <= t->mask; i++) {
		struct ukp_site *s = atomic_load_explicit(&t->e[i].val, memory_order_acquire);
		if (atomic_load_explicit(&t->e[i].key, memory_order_acquire) > TOMB && s)
			fn(s);
	}
}
static struct map recs;		/* struct kprobe * -> struct rec */
static struct map patched;	/* 64-byte blocks we ever wrote code in */

#define BLOCK(a) (((a) >> 6) + 1)	/* keys are never 0 */

void ukp_mark_patched_locked(unsigned long addr, unsigned len)
{
	for (unsigned long b = BLOCK(addr); b <= BLOCK(addr + len - 1); b++)
		if (!map_get(&patched, b))
			map_put(&patched, b, (void *)1, false);
}

struct ukp_site *ukp_site_lookup(unsigned long addr)
{
	struct ukp_site *s = map_get(&sites, addr);
	return s && !atomic_load_explicit(&s->dead, memory_order_relaxed) ? s : NULL;
}

/* ---- registration records ------------------------------------------------- */

struct rec {
	struct kprobe *p;
	struct ukp_site *site;
	char kind;			/* k, r, j */
	char func[128], object[128];
	unsigned long off;
	struct rec *prev, *next;	/* registration order */
};

static struct rec *rec_head, *rec_tail;	/* under ukp_lock */
static bool initialised;

static struct rec *rec_of_locked(struct kprobe *p)
{
	return map_get(&recs, (unsigned long)p);
}

/* ---- code as it was ------------------------------------------------------- */

void ukp_read_text(unsigned long addr, uint8_t *buf, size_t n)
{
	if (ukp_copy_nofault(buf, (const void *)addr, n)) {
		/* partially unreadable: copy byte by byte, zero the rest */
		for (size_t i = 0; i < n; i++)
			if (ukp_copy_nofault(buf + i, (const void *)(addr + i), 1))
				buf[i] = 0;
	}
	/* only blocks we ever patched need a look per byte */
	for (size_t i = 0; i < n; i++) {
		unsigned long a = addr + i;
		if (!map_get(&patched, BLOCK(a))) {
			i += 63 - (a & 63);	/* on to the next block */
			continue;
		}
		struct ukp_site *s = ukp_site_lookup(a);
		if (s && s->armed && !s->ftrace)
			buf[i] = s->orig;
		else
			ukp_opt_orig_byte(a, &buf[i]);
	}
	/* ftrace patch sites read as the nops they were */
	ukp_ftrace_orig_bytes(addr, buf, n);
}

/* ---- sites ------------------------------------------------------------------ */

static bool site_wants_arm(const struct ukp_site *s)
{
	if (!ukp_knob_enabled || atomic_load(&s->dead))
		return false;
	if (s->hook)
		return true;
	const struct ukp_plist *l = atomic_load(&s->probes);
	for (unsigned i = 0; l && i < l->n; i++)
		if (!(l->p[i]->flags & (KPROBE_FLAG_DISABLED | KPROBE_FLAG_GONE)))
			return true;
	return false;
}

struct pokes { struct ukp_poke *v; size_t n, cap; };

static int pokes_add(struct pokes *pk, unsigned long addr, uint8_t byte)
{
	if (pk->n == pk->cap) {
		size_t nc = pk->cap ? 2 * pk->cap : 16;
		struct ukp_poke *nv = realloc(pk->v, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		pk->v = nv;
		pk->cap = nc;
	}
	pk->v[pk->n++] = (struct ukp_poke){ addr, byte };
	return 0;
}

/* Queue the int3 write or removal that makes the site match its state. */
static int site_update_locked(struct ukp_site *s, struct pokes *pk)
{
	bool want = site_wants_arm(s);
	if (want == s->armed)
		return 0;
	if (s->ftrace) {
		/* the site's ftrace path runs its probes: no int3 */
		int err = ukp_ftrace_kprobe_arm_locked(s->addr, want);
		if (!err)
			s->armed = want;
		return err;
	}
	int err = pokes_add(pk, s->addr, want ? UKP_ARCH_BREAKPOINT : s->orig);
	if (!err)
		s->armed = want;
	if (want)
		ukp_mark_patched_locked(s->addr, 1);
	return err;
}

static int build_slot(struct ukp_site *s, bool post, uint8_t **out)
{
	uint8_t code[UKP_SLOT_MAX];
	int16_t fix[UKP_SLOT_MAX];

	*out = NULL;
	/* size it at the probed address, then allow for far forms */
	int len = ukp_arch_build_slot(&s->insn, code, s->addr, post, s, fix);
	if (len == -EOPNOTSUPP && post)
		return 0;	/* dynamic branch: post is emulated */
	if (len < 0)
		return len;
	uint8_t *slot = ukp_slot_alloc(s->addr, (size_t)len + 32);
	if (!slot)
		return -ENOMEM;
	len = ukp_arch_build_slot(&s->insn, code, (unsigned long)slot, post, s, fix);
	if (len < 0)
		return len;
	*out = slot;
	if (post)
		s->slot_post = slot;
	else
		s->slot = slot;
	return ukp_slot_write(slot, code, (size_t)len, s, fix);
}

/*
 * The byte the file mapped at addr holds there (a file-backed mapping):
 * 0, or -ENOENT.  What the code is before anyone patched it, as the
 * kernel's uprobes read it (from the file, not the process).
 */
static int file_byte(unsigned long addr, uint8_t *b)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return -ENOENT;
	char line[4096];
	int err = -ENOENT;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, off;
		int at = 0;
		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s %n", &lo, &hi, &off, &at) < 3 ||
		    addr < lo || addr >= hi)
			continue;
		char *path = line + at;
		path[strcspn(path, "\n")] = 0;
		if (at && path[0] == '/') {
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd >= 0) {
				if (pread(fd, b, 1, (off_t)(off + (addr - lo))) == 1)
					err = 0;
				close(fd);
			}
		}
		break;
	}
	fclose(f);
	return err;
}

/* Find or create the site at addr (under ukp_lock). */
static int site_get_locked(unsigned long addr, const struct ukp_where *w,
			   struct ukp_site **out)
{
	struct ukp_site *s = ukp_site_lookup(addr);
	if (s) {
		*out = s;
		return 0;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->addr = addr;
	s->obj = w->obj;
	uint8_t code[UKP_ARCH_MAX_INSN];
	size_t avail = w->func_end > addr ? w->func_end - addr : UKP_ARCH_MAX_INSN;
	if (avail > sizeof(code))
		avail = sizeof(code);
	ukp_read_text(addr, code, avail);
	int err = ukp_arch_decode(code, avail, addr, &s->insn);
	if (err < 0) {
		free(s);
		return err;
	}
	/* an int3 the file does not hold: another tool's breakpoint (a
	 * kernel uprobe, a debugger), which takes the traps there and
	 * whose instruction it alone knows; copied, it would trap in our
	 * slot and kill the program */
	uint8_t fb;
	if (code[0] == UKP_ARCH_BREAKPOINT && !file_byte(addr, &fb) &&
	    fb != UKP_ARCH_BREAKPOINT) {
		ukp_log("kprobe at %#lx: another tool's breakpoint is there (a kernel "
			"uprobe, a debugger); not probed", addr);
		free(s);
		return -EBUSY;
	}
	s->orig = code[0];
	s->ftrace = ukp_ftrace_site_at(addr) == 1;
	uint8_t *slot;
	err = build_slot(s, false, &slot);
	if (!err)
		err = build_slot(s, true, &slot);
	if (!err)
		err = map_put(&sites, addr, s, false);
	if (err) {
		/* slot memory, if any, stays unused; nothing ran in it */
		free(s);
		return err;
	}
	*out = s;
	return 0;
}

static struct ukp_plist *plist_with(const struct ukp_plist *old, struct kprobe *add,
				    struct kprobe *drop)
{
	unsigned n = old ? old->n : 0;
	struct ukp_plist *l = malloc(sizeof(*l) + (n + 1) * sizeof(l->p[0]));
	if (!l)
		return NULL;
	l->n = 0;
	l->any_post = false;
	for (unsigned i = 0; i < n; i++)
		if (old->p[i] != drop)
			l->p[l->n++] = old->p[i];
	if (add)
		l->p[l->n++] = add;
	/* a jprobe last: it sends the thread to its entry function, after the
	 * other probes here (a kretprobe's among them) had their turn */
	for (unsigned i = 0; i + 1 < l->n; i++) {
		if (ukp_is_jprobe_handler(l->p[i])) {
			struct kprobe *j = l->p[i];
			memmove(&l->p[i], &l->p[i + 1], (l->n - i - 1) * sizeof(l->p[0]));
			l->p[l->n - 1] = j;
			break;
		}
	}
	l->gpr_only = true;
	l->post_lean = true;
	for (unsigned i = 0; i < l->n; i++) {
		struct kprobe *p = l->p[i];
		if (p->post_handler)
			l->any_post = true;
		if (p->post_handler && (!ukp_opt_gpr_only_locked((unsigned long)p->post_handler) ||
					!ukp_opt_gpr_only_locked((unsigned long)p->fault_handler)))
			l->post_lean = false;
		if (p->post_handler || !ukp_kret_probe_gpr_only_locked(p) ||
		    !ukp_opt_gpr_only_locked((unsigned long)p->fault_handler))
			l->gpr_only = false;
	}
	l->lean1 = !(l->gpr_only && l->n == 1) ? 0 :
		   ukp_opt_leaf_locked((unsigned long)l->p[0]->pre_handler) ? 2 : 1;
	l->bare_fn = l->lean1 == 2 && ukp_opt_bare_locked((unsigned long)l->p[0]->pre_handler) ?
		     (void *)l->p[0]->pre_handler : NULL;
	l->kret1 = l->n == 1 && ukp_is_kret_plain_entry(l->p[0]) && !l->p[0]->post_handler;
	l->kret = l->kret1 ? ukp_kret_of(l->p[0]) : NULL;
	return l;
}

/* ---- garbage freed after a grace period ---------------------------------- */

struct garbage { void **v; size_t n, cap; };

static void garbage_add(struct garbage *g, void *p)
{
	if (!p)
		return;
	if (g->n == g->cap) {
		size_t nc = g->cap ? 2 * g->cap : 16;
		void **nv = realloc(g->v, nc * sizeof(*nv));
		if (!nv)
			return;	/* leak rather than free too early */
		g->v = nv;
		g->cap = nc;
	}
	g->v[g->n++] = p;
}

static void garbage_free_after_grace(struct garbage *g)
{
	if (g->n)
		ukp_synchronize();
	for (size_t i = 0; i < g->n; i++)
		free(g->v[i]);
	free(g->v);
}

/* ---- initialisation ------------------------------------------------------- */

static void dl_hook(void);

/*
 * fork() while another thread registers: the child would inherit a held
 * lock and a half-done batch.  Take our locks around fork (order: our
 * dynamic-linker calls, ukp_lock, the symbol lock), so the child starts
 * from a quiet registry.
 */
static void fork_prepare(void)
{
	ukp_sym_fork_prepare_dl();	/* first: registration holds it unlocked */
	pthread_mutex_lock(&ukp_lock);
	ukp_sym_fork_prepare();
}

static void fork_parent(void)
{
	ukp_sym_fork_parent();
	pthread_mutex_unlock(&ukp_lock);
}

static void fork_child(void)
{
	ukp_sym_fork_child();
	pthread_mutex_init(&ukp_lock, NULL);
	/* a dlclose the parent was in does not go on here */
	pthread_cond_init(&dl_done, NULL);
	dl_deleting = false;
}

/* what the arch layer needs of the engine (it calls nothing of it) */
static struct ukp_arch_env arch_env = {
	.read_text = ukp_read_text,
	.ftrace_overlaps = ukp_ftrace_overlaps,
	.gp = &ukp_gp,
};

static void init_once(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	arch_env.self = &ukp_self;	/* this thread's: not a constant */
	ukp_arch_init(&arch_env);
	ukp_sync_init();
	ukp_slots_init();
	ukp_text_init();
	ukp_trap_init();
	ukp_sym_init();
	ukp_opt_init();
	ukp_kret_init();

	/* Watch the dynamic linker's r_brk (what debuggers watch) so probes
	 * in an unloaded object become gone before dlclose returns.  First:
	 * ftrace's scan below writes library code, which an unload must not
	 * race. */
	unsigned long brk = _r_debug.r_brk;
	struct ukp_where w;
	struct ukp_site *s;
	if (brk && ukp_sym_where(brk, &w) == 0) {
		struct pokes pk = { 0 };
		pthread_mutex_lock(&ukp_lock);
		if (site_get_locked(brk, &w, &s) == 0) {
			s->hook = dl_hook;
			/* a jump where it can be (an int3 there kills a thread
			 * that dlopens with SIGTRAP blocked), else a breakpoint */
			if (!ukp_opt_hook_direct_locked(s)) {
				site_update_locked(s, &pk);
				ukp_text_poke_batch(pk.v, pk.n);
			}
		}
		/* an unload that told r_brk before the hook was there */
		if (_r_debug.r_state == RT_DELETE && !dl_deleting) {
			dl_deleting = true;
			dl_closer_known = false;
		}
		pthread_mutex_unlock(&ukp_lock);
		free(pk.v);
	}
	ukp_sym_refresh();	/* what the hook may have missed */
	ukp_lock_registry();
	ukp_ftrace_init_locked();
	pthread_mutex_unlock(&ukp_lock);
	initialised = true;
}

void ukp_init_once(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, init_once);
}

static void (*_Atomic objects_hook)(void);

void ukp_set_objects_hook(void (*fn)(void))
{
	atomic_store(&objects_hook, fn);
}

/* r_brk: called by the dynamic linker around every change of the list. */
static void dl_hook(void)
{
	if (_r_debug.r_state == RT_DELETE) {
		pthread_mutex_lock(&ukp_lock);
		dl_deleting = true;
		dl_closer_known = true;
		dl_closer = pthread_self();
		pthread_mutex_unlock(&ukp_lock);
		return;
	}
	if (_r_debug.r_state != RT_CONSISTENT)
		return;
	ukp_sym_refresh();
	pthread_mutex_lock(&ukp_lock);
	ukp_objects_changed();
	if (dl_deleting) {
		dl_deleting = false;
		pthread_cond_broadcast(&dl_done);
	}
	pthread_mutex_unlock(&ukp_lock);
	void (*fn)(void) = atomic_load(&objects_hook);
	if (fn)
		fn();
}

/* under ukp_lock: probes whose object went away are gone */
void ukp_objects_changed(void)
{
	struct ukp_site *last = NULL;

	ukp_arch_forget_boundaries();	/* new code may come at old addresses */
	ukp_stack_objects_changed();	/* and so may the stack walker's rules */
	for (struct rec *r = rec_head; r; r = r->next) {
		struct ukp_site *s = r->site;
		if (!s->obj || ukp_sym_object_alive(s->obj))
			continue;
		__atomic_fetch_or(&r->p->flags, KPROBE_FLAG_GONE, __ATOMIC_RELAXED);
		if (s != last && !atomic_load(&s->dead)) {
			/* its int3 (or jump) went with the mapping; forget it */
			atomic_store(&s->dead, true);
			s->armed = false;
			s->optimized = false;
			atomic_store(&s->resume, NULL);
			__atomic_fetch_and(&r->p->flags, ~KPROBE_FLAG_OPTIMIZED, __ATOMIC_RELAXED);
		}
		last = s;
	}
	ukp_opt_objects_changed();
	ukp_ftrace_objects_changed_locked();
}

/* ---- registration ----------------------------------------------------------- */

struct prep {
	unsigned long addr;
	struct ukp_where w;
};

/* Only on the error paths: formatting per probe made registering probes
 * on snprintf's own code slow (each registration hit them). */
static const char *probe_name(const struct kprobe *p, char *buf, size_t n)
{
	if (p->symbol_name)
		snprintf(buf, n, "'%s+0x%x'", p->symbol_name, p->offset);
	else
		snprintf(buf, n, "at %p", (void *)((unsigned long)p->addr + p->offset));
	return buf;
}

/* Resolve and check one probe; no lock of ours held (dl calls inside). */
static int prepare(struct kprobe *p, struct prep *pr)
{
	char nm[200];
	const char *why;
	int err;

	if (!p)
		return -EINVAL;
	if ((p->addr && p->symbol_name) || (!p->addr && !p->symbol_name)) {
		ukp_log("kprobe %s: set exactly one of addr and symbol_name", probe_name(p, nm, sizeof(nm)));
		return -EINVAL;
	}
	if (p->symbol_name) {
		err = ukp_sym_resolve(p->symbol_name, &pr->addr);
		if (err)
			return err;
	} else {
		ukp_sym_refresh();
		pr->addr = (unsigned long)p->addr;
	}
	pr->addr += p->offset;
	struct ukp_slot_hit h;
	why = "ukprobes' own code (an out-of-line copy)";
	if (ukp_slot_find(pr->addr, &h) || ukp_sym_blacklisted(pr->addr, &why)) {
		ukp_log("kprobe %s: blacklisted (%s)", probe_name(p, nm, sizeof(nm)), why);
		return -EINVAL;
	}
	if (ukp_sym_where(pr->addr, &pr->w) != 0 && ukp_register_in_object) {
		ukp_log("kprobe %s: %#lx is in no loaded object", probe_name(p, nm, sizeof(nm)),
			pr->addr);
		return -ENOENT;
	}
	if (ukp_sym_where(pr->addr, &pr->w) != 0 && !ukp_text_is_exec(pr->addr)) {
		ukp_log("kprobe %s: %#lx is not in executable code", probe_name(p, nm, sizeof(nm)), pr->addr);
		return -EINVAL;
	}
	return 0;
}

static int register_one_locked(struct kprobe *p, struct prep *pr, char kind,
			       struct rec **out)
{
	char nm[200];
	int err;

	if (rec_of_locked(p)) {
		ukp_log("kprobe %s: already registered", probe_name(p, nm, sizeof(nm)));
		return -EINVAL;
	}
	/* resolved without our lock: an object another thread unloaded
	 * since (its hook has run by now, or it waits for our lock) must
	 * not be read, nor its address given to a site: the code there is
	 * gone, or another object's */
	if (pr->w.obj && !ukp_sym_object_alive(pr->w.obj)) {
		ukp_log("kprobe %s: %#lx: its object was unloaded meanwhile",
			probe_name(p, nm, sizeof(nm)), pr->addr);
		return -ENOENT;
	}
	if (pr->w.func_end > pr->w.func_start &&
	    ukp_arch_check_boundary(pr->w.func_start, pr->w.func_end, pr->addr)) {
		ukp_log("kprobe %s: %s+0x%lx is not an instruction boundary", probe_name(p, nm, sizeof(nm)),
			pr->w.func, pr->addr - pr->w.func_start);
		return -EILSEQ;
	}
	if ((kind == 'r' || kind == 'j') && pr->addr != pr->w.func_start) {
		/* the return address is at the sp only on entry */
		ukp_log("%s %s: not the entry of a known function (%s+0x%lx)",
			kind == 'r' ? "kretprobe" : "jprobe", probe_name(p, nm, sizeof(nm)),
			pr->w.func[0] ? pr->w.func : "?",
			pr->w.func_start ? pr->addr - pr->w.func_start : 0);
		return -EINVAL;
	}
	if (kind == 'j') {
		struct ukp_site *o = ukp_site_lookup(pr->addr);
		const struct ukp_plist *l = o ? atomic_load(&o->probes) : NULL;
		for (unsigned i = 0; l && i < l->n; i++) {
			if (ukp_is_jprobe_handler(l->p[i])) {
				ukp_log("jprobe %s: %s already has a jprobe (one per function)",
					probe_name(p, nm, sizeof(nm)), pr->w.func);
				return -EEXIST;
			}
		}
	}
	int fs = ukp_ftrace_site_at(pr->addr);
	if (fs < 0) {
		ukp_log("kprobe %s: %#lx is inside an ftrace patch site (not an instruction boundary)",
			probe_name(p, nm, sizeof(nm)), pr->addr);
		return -EILSEQ;
	}
	if (fs > 0 && kind == 'j') {
		ukp_log("jprobe %s: %s is an ftrace patch site; jprobes there are not supported",
			probe_name(p, nm, sizeof(nm)), pr->w.func);
		return -EOPNOTSUPP;
	}
	struct ukp_site *s;
	err = site_get_locked(pr->addr, &pr->w, &s);
	if (err) {
		ukp_log("kprobe %s: cannot prepare the instruction at %#lx: %s", probe_name(p, nm, sizeof(nm)),
			pr->addr, strerror(-err));
		return err;
	}
	if (!p->post_handler && kprobes_get_optimization() && !s->ftrace)
		ukp_opt_analyse_locked(s);	/* before anything is armed */
	struct rec *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->p = p;
	r->site = s;
	r->kind = kind;
	/* no formatting here: a user may have probed snprintf itself */
	memcpy(r->func, pr->w.func, sizeof(r->func));
	memcpy(r->object, pr->w.object, sizeof(r->object));
	r->off = pr->w.func_start ? pr->addr - pr->w.func_start : 0;
	*out = r;
	return 0;
}

void ukp_each_site_locked(void (*fn)(struct ukp_site *, void *), void *arg)
{
	for (struct rec *r = rec_head; r; r = r->next)
		if (!r->prev || r->prev->site != r->site)
			fn(r->site, arg);
}

static void rec_link_locked(struct rec *r)
{
	r->prev = rec_tail;
	if (rec_tail)
		rec_tail->next = r;
	else
		rec_head = r;
	rec_tail = r;
}

static void rec_unlink_locked(struct rec *r)
{
	if (r->prev)
		r->prev->next = r->next;
	else
		rec_head = r->next;
	if (r->next)
		r->next->prev = r->prev;
	else
		rec_tail = r->prev;
	map_del(&recs, (unsigned long)r->p);
}

int ukp_register_kind(struct kprobe **kps, int num, char kind)
{
	struct prep *pr;
	struct rec **rs;
	struct pokes pk = { 0 };
	struct garbage g = { 0 };
	int err = 0, i;

	if (num <= 0 || !kps)
		return -EINVAL;
	ukp_init_once();
	ukp_trap_ensure();
	pr = calloc(num, sizeof(*pr));
	rs = calloc(num, sizeof(*rs));
	if (!pr || !rs) {
		free(pr);
		free(rs);
		return -ENOMEM;
	}
	/* 1. resolve and check, without our lock */
	for (i = 0; i < num && !err; i++)
		err = prepare(kps[i], &pr[i]);
	for (i = 0; kind == 'j' && i < num && !err; i++) {
		for (int j = 0; j < i && !err; j++) {
			if (pr[j].addr == pr[i].addr) {
				ukp_log("jprobe at %#lx: two in one batch (one per function)",
					pr[i].addr);
				err = -EEXIST;
			}
		}
	}
	ukp_lock_registry();
	/* 2. build sites and records; nothing visible to the hit path yet
	 *    (the record map also catches the same struct twice) */
	for (i = 0; i < num && !err; i++) {
		err = register_one_locked(kps[i], &pr[i], kind, &rs[i]);
		if (!err && (err = map_put(&recs, (unsigned long)kps[i], rs[i], true))) {
			free(rs[i]);
			rs[i] = NULL;
		}
	}
	if (err) {
		for (i = 0; i < num; i++) {
			if (rs[i]) {
				map_del(&recs, (unsigned long)kps[i]);
				free(rs[i]);
			}
		}
		pthread_mutex_unlock(&ukp_lock);
		free(pr);
		free(rs);
		return err;
	}
	/* 3. jumps over these addresses go first (int3-first, batched) */
	struct ukp_unopt u = { 0 };
	for (i = 0; i < num; i++)
		ukp_opt_collect_locked(&u, pr[i].addr);
	ukp_opt_unoptimize_locked(&u);
	/* 4. publish: probe lists, then arm in one batch */
	for (i = 0; i < num; i++) {
		struct rec *r = rs[i];
		struct kprobe *p = kps[i];
		struct ukp_site *s = r->site;
		struct ukp_plist *old = atomic_load(&s->probes);
		struct ukp_plist *l = plist_with(old, p, NULL);
		if (!l) {
			/* Out of memory for a few bytes: undo, as a batch must. */
			for (int j = i; j < num; j++) {
				map_del(&recs, (unsigned long)kps[j]);
				free(rs[j]);
			}
			err = -ENOMEM;
			break;
		}
		p->addr = (kprobe_opcode_t *)pr[i].addr;
		p->flags &= KPROBE_FLAG_DISABLED;
		if (s->ftrace)
			p->flags |= KPROBE_FLAG_FTRACE;	/* never optimised */
		p->nmissed = 0;
		p->__ukp_priv[0] = r;
		__atomic_store_n(&p->__ukp_priv[1], s, __ATOMIC_RELAXED);	/* kret.c */
		rec_link_locked(r);
		if (l->any_post)
			__atomic_store_n(&s->had_post, true, __ATOMIC_RELAXED);
		atomic_store_explicit(&s->probes, l, memory_order_release);
		ukp_opt_list_published_locked(s);
		garbage_add(&g, old);
		site_update_locked(s, &pk);
	}
	int published = i;
	int perr = ukp_text_poke_batch(pk.v, pk.n);
	/* 5. queue what may be optimised now */
	for (i = 0; i < published; i++)
		ukp_opt_update_locked(pr[i].addr);
	pthread_mutex_unlock(&ukp_lock);
	ukp_opt_start();
	free(pk.v);
	free(pr);
	free(rs);
	garbage_free_after_grace(&g);
	if (!err && perr) {
		ukp_log("kprobe: writing the breakpoints failed: %s", strerror(-perr));
		err = perr;
	}
	if (err)
		ukp_unregister_kind(kps, published);
	return err;
}

void ukp_unregister_kind(struct kprobe **kps, int num)
{
	struct pokes pk = { 0 };
	struct garbage g = { 0 };

	if (!kps || num <= 0 || !initialised)  {
		for (int i = 0; kps && i < num; i++)
			if (kps[i])
				kps[i]->addr = NULL;
		return;
	}
	ukp_lock_registry();
	struct ukp_unopt u = { 0 };
	for (int i = 0; i < num; i++) {
		struct rec *r = kps[i] ? rec_of_locked(kps[i]) : NULL;
		if (r)
			ukp_opt_collect_locked(&u, r->site->addr);
	}
	ukp_opt_unoptimize_locked(&u);
	/* 1. unlink: new lists without the probes; disarm sites left empty */
	unsigned long *addrs = calloc(num, sizeof(*addrs));
	for (int i = 0; i < num; i++) {
		struct kprobe *p = kps[i];
		struct rec *r = p ? rec_of_locked(p) : NULL;
		if (!r) {
			if (p)
				p->addr = NULL;
			continue;
		}
		struct ukp_site *s = r->site;
		if (addrs)
			addrs[i] = s->addr;
		struct ukp_plist *old = atomic_load(&s->probes);
		struct ukp_plist *l = plist_with(old, NULL, p);
		if (l && !l->n) {
			free(l);
			l = NULL;
		}
		atomic_store_explicit(&s->probes, l, memory_order_release);
		ukp_opt_list_published_locked(s);
		garbage_add(&g, old);
		site_update_locked(s, &pk);
		rec_unlink_locked(r);
		garbage_add(&g, r);
		p->__ukp_priv[0] = NULL;
		__atomic_store_n(&p->__ukp_priv[1], NULL, __ATOMIC_RELAXED);
		__atomic_fetch_and(&p->flags, ~KPROBE_FLAG_OPTIMIZED, __ATOMIC_RELAXED);
	}
	ukp_text_poke_batch(pk.v, pk.n);
	for (int i = 0; addrs && i < num; i++)
		if (addrs[i])
			ukp_opt_update_locked(addrs[i]);
	pthread_mutex_unlock(&ukp_lock);
	ukp_opt_start();
	free(addrs);
	free(pk.v);
	/* 2. wait once for every thread to leave; 3. free */
	garbage_free_after_grace(&g);
	ukp_ftrace_reap();	/* what sites on the ftrace path retired */
}

int register_kprobe(struct kprobe *p)
{
	return ukp_register_kind(&p, 1, 'k');
}

int register_kprobes(struct kprobe **kps, int num)
{
	return ukp_register_kind(kps, num, 'k');
}

void unregister_kprobe(struct kprobe *p)
{
	ukp_unregister_kind(&p, 1);
}

void unregister_kprobes(struct kprobe **kps, int num)
{
	ukp_unregister_kind(kps, num);
}

static int set_disabled(struct kprobe *p, bool disabled)
{
	struct pokes pk = { 0 };
	int err = 0;

	if (!p)
		return -EINVAL;
	ukp_lock_registry();
	struct rec *r = rec_of_locked(p);
	if (!r) {
		err = -EINVAL;
	} else if (!disabled && (p->flags & KPROBE_FLAG_GONE)) {
		err = -EINVAL;	/* its code is gone */
	} else {
		struct ukp_unopt u = { 0 };
		ukp_opt_collect_locked(&u, r->site->addr);
		ukp_opt_unoptimize_locked(&u);
		if (disabled)
			__atomic_fetch_or(&p->flags, KPROBE_FLAG_DISABLED, __ATOMIC_RELAXED);
		else
			__atomic_fetch_and(&p->flags, ~KPROBE_FLAG_DISABLED, __ATOMIC_RELAXED);
		err = site_update_locked(r->site, &pk);
		if (!err)
			err = ukp_text_poke_batch(pk.v, pk.n);
		ukp_opt_update_locked(r->site->addr);
	}
	pthread_mutex_unlock(&ukp_lock);
	ukp_opt_start();
	free(pk.v);
	return err;
}

int disable_kprobe(struct kprobe *p) { return set_disabled(p, true); }
int enable_kprobe(struct kprobe *p) { return set_disabled(p, false); }

int kprobes_set_enabled(int on)
{
	struct pokes pk = { 0 };
	int err = 0;

	ukp_init_once();
	ukp_lock_registry();
	struct ukp_unopt u = { 0 };
	if (!on)
		for (struct rec *r = rec_head; r; r = r->next)
			ukp_opt_collect_site_locked(&u, r->site);
	ukp_opt_unoptimize_locked(&u);
	ukp_knob_enabled = !!on;
	ukp_gp_flag(UKP_GP_NOKNOB, !on);
	for (struct rec *r = rec_head; r && !err; r = r->next)
		err = site_update_locked(r->site, &pk);
	if (!err)
		err = ukp_text_poke_batch(pk.v, pk.n);
	for (struct rec *r = rec_head; on && r; r = r->next)
		ukp_opt_update_locked(r->site->addr);
	pthread_mutex_unlock(&ukp_lock);
	ukp_opt_start();
	free(pk.v);
	return err;
}

int kprobes_get_enabled(void)
{
	return ukp_knob_enabled;
}

int kprobes_list(FILE *out)
{
	if (!out)
		return -EINVAL;
	ukp_lock_registry();
	for (struct rec *r = rec_head; r; r = r->next) {
		unsigned f = r->p->flags;
		fprintf(out, "%016lx  %c  %s+0x%lx", r->site->addr, r->kind,
			r->func[0] ? r->func : "?", r->off);
		if (r->object[0])
			fprintf(out, " [%s]", r->object);
		if (f & KPROBE_FLAG_GONE)
			fputs(" [GONE]", out);
		else if (f & KPROBE_FLAG_DISABLED)
			fputs(" [DISABLED]", out);
		if (f & KPROBE_FLAG_OPTIMIZED)
			fputs(" [OPTIMIZED]", out);
		if (f & KPROBE_FLAG_FTRACE)
			fputs(" [FTRACE]", out);
		fputc('\n', out);
	}
	pthread_mutex_unlock(&ukp_lock);
	return ferror(out) ? -EIO : 0;
}

long copy_from_user_nofault(void *dst, const void *src, size_t size)
{
	ukp_init_once();	/* the fault handler must be there */
	return ukp_copy_nofault(dst, src, size);
}

unsigned long ukp_probe_resume(struct kprobe *p)
{
	struct rec *r = p->__ukp_priv[0];	/* set while registered */
	if (!r || !r->site)
		return 0;
	const struct ukp_plist *l = atomic_load_explicit(&r->site->probes,
							 memory_order_acquire);
	if (l && l->any_post && r->site->slot_post)
		return (unsigned long)r->site->slot_post;
	return (unsigned long)r->site->slot;
}
