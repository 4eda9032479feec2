/* SPDX-License-Identifier: MIT */
/*
 * Events in this process: resolve a parsed definition, compile its fetch
 * program, register its probe, publish its description in the area.
 */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"
#include "ev_int.h"
#include "elffile.h"

/* creation, removal and filter changes of every area */
static pthread_mutex_t ev_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- objects and symbols ------------------------------------------------ */

struct objfind {
	const char *name;
	size_t len;
	bool found;
	bool is_main;
	char path[4096];
	unsigned long base;
	const ElfW(Phdr) *phdr;
	int phnum;
};

static const char *base_name(const char *p)
{
	const char *b = strrchr(p, '/');
	return b ? b + 1 : p;
}

static int objfind_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct objfind *f = arg;
	const char *path = info->dlpi_name;
	char exe[4096];
	bool is_main = !path || !*path;
	if (is_main) {
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n <= 0)
			return 0;
		exe[n] = 0;
		path = exe;
	}
	if (strcmp(path, f->name) && strcmp(base_name(path), f->name))
		return 0;
	f->found = true;
	f->is_main = is_main;
	snprintf(f->path, sizeof(f->path), "%s", path);
	f->base = info->dlpi_addr;
	f->phdr = info->dlpi_phdr;
	f->phnum = info->dlpi_phnum;
	return 1;
}

/* the loaded object that is the file (dev, ino), whatever path it was
 * loaded by (symbolic links, /lib for /usr/lib) */
struct objfile {
	unsigned long dev, ino;
	bool found;
	struct objfind *f;
};

static int objfile_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct objfile *o = arg;
	struct stat st;
	char exe[4096];
	const char *path = info->dlpi_name;
	(void)size;
	if (!path || !*path) {
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n <= 0)
			return 0;
		exe[n] = 0;
		path = exe;
	}
	if (stat(path, &st) || st.st_dev != o->dev || st.st_ino != o->ino)
		return 0;
	o->found = true;
	if (o->f) {
		o->f->found = true;
		o->f->is_main = path == exe;
		snprintf(o->f->path, sizeof(o->f->path), "%s", path);
		o->f->base = info->dlpi_addr;
		o->f->phdr = info->dlpi_phdr;
		o->f->phnum = info->dlpi_phnum;
	}
	return 1;
}

static bool find_object(const char *name, struct objfind *f)
{
	memset(f, 0, sizeof(*f));
	f->name = name;
	ukp_dl_iterate(objfind_cb, f);
	struct stat st;
	if (!f->found && strchr(name, '/') && !stat(name, &st)) {
		struct objfile o = { st.st_dev, st.st_ino, false, f };
		ukp_dl_iterate(objfile_cb, &o);
	}
	return f->found;
}

/* OBJ:0xN: the address file offset N of OBJ is mapped at; 0 if none */
static unsigned long file_offset_addr(const struct objfind *f, unsigned long off)
{
	for (int i = 0; i < f->phnum; i++) {
		const ElfW(Phdr) *p = &f->phdr[i];
		if (p->p_type == PT_LOAD && off >= p->p_offset && off < p->p_offset + p->p_filesz)
			return f->base + p->p_vaddr + (off - p->p_offset);
	}
	return 0;
}

struct objlist {
	unsigned n;
	struct { char path[4096]; unsigned long base; bool is_main; } o[64];
};

static int objlist_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct objlist *l = arg;
	if (l->n == sizeof(l->o) / sizeof(l->o[0]))
		return 1;
	const char *path = info->dlpi_name;
	bool is_main = !path || !*path;
	if (is_main) {
		ssize_t k = readlink("/proc/self/exe", l->o[l->n].path, sizeof(l->o[0].path) - 1);
		if (k <= 0)
			return 0;
		l->o[l->n].path[k] = 0;
	} else {
		snprintf(l->o[l->n].path, sizeof(l->o[0].path), "%s", path);
	}
	l->o[l->n].base = info->dlpi_addr;
	l->o[l->n].is_main = is_main;
	l->n++;
	return 0;
}

/* "SYM" or "OBJ:SYM", data or function, exported or only in the symbol
 * table.  0, -ENOENT (symbol), -ENXIO (object) */
static int resolve_sym(const char *spec, unsigned long *addr)
{
	const char *colon = strchr(spec, ':');
	const char *name = colon ? colon + 1 : spec;
	void *p = NULL;
	struct objfind f;
	if (colon) {
		char obj[4096];
		snprintf(obj, sizeof(obj), "%.*s", (int)(colon - spec), spec);
		if (!find_object(obj, &f))
			return -ENXIO;
		void *h = dlopen(f.is_main ? NULL : f.path, RTLD_LAZY | RTLD_NOLOAD);
		if (h) {
			p = dlsym(h, name);
			dlclose(h);
		}
	} else {
		p = dlsym(RTLD_DEFAULT, spec);
	}
	if (p) {
		*addr = (unsigned long)p;
		return 0;
	}
	/* not exported: the symbol tables of the files, the executable first */
	unsigned long v;
	if (colon) {
		if (!ev_elf_sym(f.path, name, &v)) {
			*addr = f.base + v;
			return 0;
		}
	} else {
		struct objlist *l = calloc(1, sizeof(*l));
		if (l) {
			ukp_dl_iterate(objlist_cb, l);
			for (unsigned i = 0; i < l->n; i++)
				if (!ev_elf_sym(l->o[i].path, name, &v)) {
					*addr = l->o[i].base + v;
					free(l);
					return 0;
				}
			free(l);
		}
	}
	return ukp_sym_resolve(spec, addr) ? -ENOENT : 0;
}

/* ---- deferred events ---------------------------------------------------- */

/*
 * A place in a library given by path that the program has not loaded
 * (yet): what uprobe_events does with a path, and kprobe_events with a
 * module not loaded.  The definition is checked against the file (an ELF
 * shared library, the symbol in its tables, the place in executable
 * code), the event is published unarmed (address 0), and every change of
 * the dynamic linker's list of objects (ukp_set_objects_hook: in the
 * thread that loads, before the new objects' constructors run) arms the
 * deferred events whose file is now loaded, at its load bias, and takes
 * back those whose object went away, to arm them again at the next load.
 *
 * dfr_lock guards the list and each deferred event's probe state; it is
 * taken after ev_lock and before the engine's locks, and never held
 * across a call into the dynamic linker.
 */
static pthread_mutex_t dfr_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ukpev_event *dfr_head;
static _Atomic bool dfr_any;


/* where a deferred event's place lies in its file: its vaddr, with the
 * file's identity; 0 or a UKPEV_E_* code */
/* the directories of the loaded objects, in load order */
struct objdirs {
	char (*v)[PATH_MAX];
	size_t n, cap;
};

static int objdirs_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct objdirs *o = arg;
	const char *p = info->dlpi_name, *slash = p ? strrchr(p, '/') : NULL;
	if (!slash || slash == p || (size_t)(slash - p) >= PATH_MAX)
		return 0;
	if (o->n == o->cap) {
		size_t nc = o->cap ? 2 * o->cap : 16;
		char (*nv)[PATH_MAX] = realloc(o->v, nc * sizeof(*nv));
		if (!nv)
			return 1;
		o->v = nv;
		o->cap = nc;
	}
	memcpy(o->v[o->n], p, (size_t)(slash - p));
	o->v[o->n][slash - p] = 0;
	o->n++;
	return 0;
}

/* a library name (no '/') not loaded: the file by that name where the
 * dynamic linker looks by default - LD_LIBRARY_PATH, the directories of
 * what is loaded (a program's own RUNPATH directory among them), the
 * system's - that is a library with the place in it.  0 or UKPEV_E_* */
static int dfr_search(const struct ukpev_def *d, char *path, size_t n)
{
	static const char *const sys[] = { "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
					   "/lib64", "/usr/lib64", "/lib", "/usr/lib",
					   "/usr/local/lib" };
	char llp[4096];
	const char *env = getenv("LD_LIBRARY_PATH");
	snprintf(llp, sizeof(llp), "%s", env ? env : "");
	struct objdirs od = { 0 };
	ukp_dl_iterate(objdirs_cb, &od);
	int code = UKPEV_E_UNKNOWN_OBJECT;
	char *save = NULL;
	const char *dir = strtok_r(llp, ":;", &save);
	size_t i = 0, j = 0;
	while (code) {
		if (!dir && i < od.n)
			dir = od.v[i++];
		else if (!dir && j < sizeof(sys) / sizeof(sys[0]))
			dir = sys[j++];
		if (!dir)
			break;
		struct ev_elf_place p;
		if ((size_t)snprintf(path, n, "%s/%s", dir, d->obj) < n &&
		    ev_elf_place(path, NULL, 0, &p) != EV_ELF_NOT_LIB)
			code = 0;
		/* the next of LD_LIBRARY_PATH's, then of the others */
		dir = save ? strtok_r(NULL, ":;", &save) : NULL;
		if (!dir)
			save = NULL;
	}
	free(od.v);
	return code;
}

static int dfr_check(const struct ukpev_def *d, struct ukpev_event *e)
{
	char found[PATH_MAX];
	const char *path = d->obj;
	if (!strchr(d->obj, '/')) {
		int c = dfr_search(d, found, sizeof(found));
		if (c)
			return c;
		path = found;
	}
	struct ev_elf_place p;
	bool by_offs = d->place_kind == PL_OBJOFF;
	switch (ev_elf_place(path, by_offs ? NULL : d->sym, d->offs, &p)) {
	case 0:
		e->dfr_vaddr = p.vaddr;
		e->dfr_dev = p.dev;
		e->dfr_ino = p.ino;
		return 0;
	case EV_ELF_NO_SYM:
		return UKPEV_E_UNKNOWN_SYMBOL;
	case EV_ELF_BAD_OFFS:
		return UKPEV_E_BAD_FILE_OFFS;
	case EV_ELF_NOT_CODE:
		return by_offs ? UKPEV_E_BAD_FILE_OFFS : UKPEV_E_FAIL_REG_PROBE;
	default:
		return UKPEV_E_UNKNOWN_OBJECT;
	}
}

static int place_error(struct ukpev_def *d, int r)
{
	if (r == -EILSEQ)
		return UKPEV_E_BAD_INSN_BNDRY;
	if (r == -ENOENT)
		return UKPEV_E_UNKNOWN_SYMBOL;
	return UKPEV_E_FAIL_REG_PROBE;
	(void)d;
}

struct loaded_at {
	unsigned long bias, dev, ino;
	bool yes;
};

static int loaded_at_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct loaded_at *l = arg;
	struct stat st;
	(void)size;
	if (info->dlpi_addr == l->bias && info->dlpi_name && info->dlpi_name[0] &&
	    !stat(info->dlpi_name, &st) && st.st_dev == l->dev && st.st_ino == l->ino) {
		l->yes = true;
		return 1;
	}
	return 0;
}

/* under dfr_lock: the probe of e at bias; 0 or -errno (-ENOENT: the
 * library is not there any more, which is not the place's fault) */
static int dfr_arm_locked(struct ukpev_event *e, unsigned long bias)
{
	unsigned long addr = bias + e->dfr_vaddr;
	struct ev_meta *m = ev_meta(e->area->hdr, e->id);
	/* the address before the first hit can be recorded */
	atomic_store_explicit(&m->addr, addr, memory_order_release);
	e->info.addr = addr;
	int r;
	/* a fresh struct each time: the engine's state of an earlier
	 * arming is gone with its unregistration */
	if (e->ret) {
		struct kretprobe rp = {
			.handler = e->u.rp.handler, .entry_handler = e->u.rp.entry_handler,
			.data_size = e->u.rp.data_size, .maxactive = e->u.rp.maxactive,
		};
		rp.kp.addr = (kprobe_opcode_t *)addr;
		rp.kp.flags = e->dfr_off ? KPROBE_FLAG_DISABLED : 0;
		e->u.rp = rp;
	} else {
		struct kprobe kp = { .pre_handler = e->u.kp.pre_handler };
		kp.addr = (kprobe_opcode_t *)addr;
		kp.flags = e->dfr_off ? KPROBE_FLAG_DISABLED : 0;
		e->u.kp = kp;
	}
	ukp_register_in_object = 1;
	ukp_log_quiet++;	/* why goes to arm_err */
	r = e->ret ? register_kretprobe(&e->u.rp) : register_kprobe(&e->u.kp);
	ukp_log_quiet--;
	ukp_register_in_object = 0;
	if (r) {
		/* the engine finds no code there when another thread has
		 * unloaded the library since it was seen */
		struct loaded_at l = { bias, e->dfr_dev, e->dfr_ino, false };
		ukp_dl_iterate(loaded_at_cb, &l);
		if (!l.yes)
			r = -ENOENT;
	}
	if (r == -ENOENT) {
		/* unloaded meanwhile: not the place's fault; at its next load */
		atomic_store(&m->arm_err, 0);
		e->dfr_bias = 0;
		return r;
	}
	atomic_store(&m->arm_err, r ? place_error(e->def, r) : 0);
	e->dfr_bias = bias;
	if (r)
		return r;
	e->registered = true;
	return 0;
}

/* under dfr_lock: take e's probe back (its object went away, or e goes) */
static void dfr_disarm_locked(struct ukpev_event *e)
{
	if (!e->registered)
		return;
	if (e->ret)
		unregister_kretprobe(&e->u.rp);
	else
		unregister_kprobe(&e->u.kp);
	e->dfr_missed += e->u.kp.nmissed + (e->ret ? (unsigned long)e->u.rp.nmissed : 0);
	e->registered = false;
}

struct dfr_obj {
	unsigned long bias, lo, hi;
	char *path;
};
struct dfr_objs {
	struct dfr_obj *v;
	size_t n, cap;
};

static int dfr_objs_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct dfr_objs *o = arg;
	(void)size;
	if (!info->dlpi_name || !info->dlpi_name[0])
		return 0;	/* the executable (never deferred), the vdso */
	if (o->n == o->cap) {
		size_t nc = o->cap ? 2 * o->cap : 32;
		struct dfr_obj *nv = realloc(o->v, nc * sizeof(*nv));
		if (!nv)
			return 1;
		o->v = nv;
		o->cap = nc;
	}
	unsigned long lo = ~0UL, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		if (info->dlpi_addr + ph->p_vaddr < lo)
			lo = info->dlpi_addr + ph->p_vaddr;
		if (info->dlpi_addr + ph->p_vaddr + ph->p_memsz > hi)
			hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
	}
	if (lo >= hi)
		return 0;
	o->v[o->n].bias = info->dlpi_addr;
	o->v[o->n].lo = lo & ~4095UL;
	o->v[o->n].hi = hi;
	o->v[o->n].path = strdup(info->dlpi_name);
	if (o->v[o->n].path)
		o->n++;
	return 0;
}

/* Log the objects loaded (for the reader's symbols), arm the deferred
 * events whose file is loaded, take back those whose object went away:
 * after every change of the list of objects, at an area's creation, and
 * after a deferred event's. */
/*
 * What each loaded object is: its file (dev, ino) and real path, learnt
 * when first seen - for a new object, inside the dlopen that maps it,
 * where a relative name means what the loader took it to mean - and
 * kept while it stays loaded at that bias.
 */
struct objid {
	unsigned long bias, dev, ino;
	char *name, *real;
	bool seen, fresh;
};
static pthread_mutex_t objid_lock = PTHREAD_MUTEX_INITIALIZER;

static struct objid *objids;
static size_t nobjids;

/* under objid_lock: objs' identities, in order, as indexes in objids
 * (-1: none; NULL on ENOMEM) */
static long *objids_of_locked(const struct dfr_objs *objs)
{
	long *of = malloc((objs->n ? objs->n : 1) * sizeof(*of));
	if (!of)
		return NULL;
	for (size_t k = 0; k < nobjids; k++)
		objids[k].seen = objids[k].fresh = false;
	for (size_t i = 0; i < objs->n; i++) {
		size_t k;
		of[i] = -1;
		for (k = 0; k < nobjids; k++)
			if (objids[k].bias == objs->v[i].bias && !objids[k].seen &&
			    !strcmp(objids[k].name, objs->v[i].path))
				break;
		if (k == nobjids) {
			struct objid *nv = realloc(objids, (nobjids + 1) * sizeof(*nv));
			if (!nv)
				continue;
			objids = nv;
			struct stat st;
			char real[PATH_MAX];
			bool ok = !stat(objs->v[i].path, &st) && realpath(objs->v[i].path, real);
			objids[k] = (struct objid){
				.bias = objs->v[i].bias, .dev = ok ? st.st_dev : 0,
				.ino = ok ? st.st_ino : 0, .name = strdup(objs->v[i].path),
				.real = ok ? strdup(real) : NULL, .fresh = true,
			};
			if (!objids[k].name) {
				free(objids[k].real);
				continue;
			}
			nobjids++;
		}
		objids[k].seen = true;
		of[i] = (long)k;
	}
	return of;
}

/* under objid_lock: forget the objects no longer loaded */
static void objids_prune_locked(void)
{
	size_t n = 0;
	for (size_t k = 0; k < nobjids; k++) {
		if (objids[k].seen) {
			objids[n++] = objids[k];
		} else {
			free(objids[k].name);
			free(objids[k].real);
		}
	}
	nobjids = n;
}

/* all: log every object (a new area), not only those new here */
static void objects_scan(bool all)
{
	struct dfr_objs objs = { 0 };
	ukp_dl_iterate(dfr_objs_cb, &objs);	/* before our locks */
	pthread_mutex_lock(&objid_lock);
	long *of = objids_of_locked(&objs);
	for (size_t i = 0; of && i < objs.n; i++)
		if (of[i] >= 0 && objids[of[i]].real && (all || objids[of[i]].fresh))
			ev_log_object(objids[of[i]].real, objs.v[i].lo, objs.v[i].hi,
				      objs.v[i].bias);
	if (of && atomic_load(&dfr_any)) {
		/* the engine's view of the objects as ours (from another
		 * thread than the loader's, a load may be midway: listed,
		 * mapped, its hook to come) */
		ukp_sym_refresh();
		pthread_mutex_lock(&dfr_lock);
		for (struct ukpev_event *e = dfr_head; e; e = e->dfr_next) {
			size_t k;
			for (k = 0; k < objs.n; k++)
				if (of[k] >= 0 && objids[of[k]].ino == e->dfr_ino &&
				    objids[of[k]].dev == e->dfr_dev)
					break;
			bool loaded = k < objs.n;
			/* one whose library went stays registered, gone (as
			 * the kernel keeps a module's), until it loads again */
			if (e->registered && loaded && (objs.v[k].bias != e->dfr_bias ||
							(e->u.kp.flags & KPROBE_FLAG_GONE)))
				dfr_disarm_locked(e);
			/* an arming that failed is tried again at the next load */
			if (!e->registered && loaded &&
			    !(atomic_load(&ev_meta(e->area->hdr, e->id)->arm_err) &&
			      e->dfr_bias == objs.v[k].bias))
				dfr_arm_locked(e, objs.v[k].bias);
		}
		pthread_mutex_unlock(&dfr_lock);
	}
	if (of)
		objids_prune_locked();
	pthread_mutex_unlock(&objid_lock);
	for (size_t i = 0; i < objs.n; i++)
		free(objs.v[i].path);
	free(objs.v);
	free(of);
}

/* fork: no lock of ours held by a thread the child will not have (the
 * child's first dlopen runs objects_scan, its first event takes ev_lock);
 * in the order they nest, before the engine's */
static void track_lock_all(void)
{
	pthread_mutex_lock(&ev_lock);
	pthread_mutex_lock(&objid_lock);
	pthread_mutex_lock(&dfr_lock);
	ev_area_fork_lock();
}

static void track_unlock_all(void)
{
	ev_area_fork_unlock();
	pthread_mutex_unlock(&dfr_lock);
	pthread_mutex_unlock(&objid_lock);
	pthread_mutex_unlock(&ev_lock);
}

static void objects_changed(void)
{
	objects_scan(false);
}

static void track_init(void)
{
	ukp_init_once();	/* the engine's fork handlers first: ours run before */
	pthread_atfork(track_lock_all, track_unlock_all, track_unlock_all);
	ukp_set_objects_hook(objects_changed);
}

void ev_objects_track(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, track_init);
	objects_scan(true);
}

/* ---- compiling -------------------------------------------------------------- */

static int compile(struct ukpev_event *e, struct ukpev_error *err)
{
	struct ukpev_def *d = e->def;
	size_t cap = 2, n = 0, strsz = 1, maxdepth = 0;
	for (unsigned i = 0; i < d->nargs; i++) {
		cap += 6 + d->args[i].ndepth;
		if (d->args[i].ndepth > maxdepth)
			maxdepth = d->args[i].ndepth;
		if (d->args[i].base == B_IMMSTR)
			strsz += strlen(d->args[i].str) + 1;
	}
	int64_t *reads = malloc((maxdepth + 1) * sizeof(*reads));
	e->prog = calloc(cap, sizeof(*e->prog));
	e->strtab = calloc(1, strsz);
	if (!e->prog || !e->strtab || !reads) {
		free(reads);
		return -ENOMEM;
	}
	size_t stroff = 1;
#define EMIT(...) (e->prog[n++] = (struct ev_insn){ __VA_ARGS__ })
	for (unsigned i = 0; i < d->nargs; i++) {
		struct ev_parg *a = &d->args[i];
		bool strtype = a->type == UKPEV_T_STRING || a->type == UKPEV_T_USTRING;
		if (a->base == B_REG && a->ndepth == 0) {
			EMIT(.op = OP_REG_VAL, .param = (uint16_t)a->reg, .dst = (uint16_t)a->offset,
			     .size = (uint8_t)a->elem_size, .count = (uint16_t)i);
			continue;
		}
		if (a->base == B_REG && a->ndepth == 1 && strtype && !a->count) {
			EMIT(.op = OP_REG_STR, .param = (uint16_t)a->reg, .dst = (uint16_t)a->offset,
			     .count = (uint16_t)i, .imm = a->offs[0]);
			continue;
		}
		EMIT(.op = OP_ARG, .param = (uint16_t)i, .dst = (uint16_t)a->offset);
		unsigned nr = 0;
		switch (a->base) {
		case B_REG:
			EMIT(.op = OP_LD_REG, .param = (uint16_t)a->reg);
			break;
		case B_SP:
			EMIT(.op = OP_LD_SP);
			break;
		case B_STACK:
			EMIT(.op = OP_LD_STACK, .imm = 8 * (int64_t)a->reg);
			break;
		case B_ARG:
			EMIT(.op = d->kind == 'r' ? OP_LD_SAVED : OP_LD_ARG, .param = (uint16_t)a->reg);
			break;
		case B_RETVAL:
			EMIT(.op = OP_LD_RETVAL);
			break;
		case B_IMM:
			EMIT(.op = OP_LD_IMM, .imm = a->imm);
			break;
		case B_ADDR:
			EMIT(.op = OP_LD_IMM, .imm = a->imm);
			reads[nr++] = 0;
			break;
		case B_SYM: {
			unsigned long addr;
			int r = resolve_sym(a->sym, &addr);
			if (r) {
				ev_set_err(err, r == -ENXIO ? UKPEV_E_UNKNOWN_OBJECT : UKPEV_E_UNKNOWN_SYMBOL,
					   a->sym_at);
				free(reads);
				return -EINVAL;
			}
			EMIT(.op = OP_LD_IMM, .imm = (int64_t)(addr + (unsigned long)a->sym_off));
			reads[nr++] = 0;
			break;
		}
		case B_COMM:
			EMIT(.op = OP_ST_COMM);
			continue;
		case B_IMMSTR:
			strcpy(e->strtab + stroff, a->str);
			EMIT(.op = OP_ST_IMMSTR, .imm = (int64_t)stroff);
			stroff += strlen(a->str) + 1;
			continue;
		}
		for (unsigned k = 0; k < a->ndepth; k++)
			reads[nr++] = a->offs[k];
		bool str = a->type == UKPEV_T_STRING || a->type == UKPEV_T_USTRING;
		if (!nr) {
			EMIT(.op = OP_ST_VAL, .size = (uint8_t)a->elem_size);
			continue;
		}
		for (unsigned k = 0; k + 1 < nr; k++)
			EMIT(.op = OP_DEREF, .imm = reads[k]);
		if (reads[nr - 1])
			EMIT(.op = OP_ADD, .imm = reads[nr - 1]);
		if (str && a->count)
			EMIT(.op = OP_ST_STRARR, .count = (uint16_t)a->count);
		else if (str)
			EMIT(.op = OP_ST_STR);
		else
			EMIT(.op = OP_ST_MEM, .size = (uint8_t)a->elem_size,
			     .count = (uint16_t)(a->count ? a->count : 1));
	}
	EMIT(.op = OP_END);
#undef EMIT
	free(reads);
	return 0;
}

/* ---- publishing ---------------------------------------------------------------- */

static int publish(struct ukpev_event *e)
{
	struct ev_area_hdr *h = e->area->hdr;
	struct ukpev_def *d = e->def;
	struct ev_meta *m = ev_meta(h, e->id);
	uint64_t aoff = 0;
	struct ev_meta_arg *ma = NULL;
	if (d->nargs) {
		ma = ev_heap_alloc(h, d->nargs * sizeof(*ma), &aoff);
		if (!ma)
			return -ENOSPC;
	}
	for (unsigned i = 0; i < d->nargs; i++) {
		const struct ukpev_arg_info *ai = &d->infos[i];
		ma[i] = (struct ev_meta_arg){
			.name_off = ev_heap_str(h, ai->name), .type_off = ev_heap_str(h, ai->type_name),
			.type = (uint32_t)ai->type, .elem_size = ai->elem_size, .count = ai->count,
			.offset = ai->offset, .bf_width = ai->bf_width, .bf_shift = ai->bf_shift,
		};
		if (!ma[i].name_off || !ma[i].type_off)
			return -ENOSPC;
	}
	m->kind = (uint32_t)d->kind;
	m->maxactive = (uint32_t)d->maxactive;
	m->nargs = d->nargs;
	m->payload_size = d->payload_size;
	m->flags = e->deferred ? EV_META_F_DEFERRED : 0;
	atomic_store(&m->addr, e->info.addr);
	atomic_store(&m->arm_err, 0);
	m->group_off = ev_heap_str(h, d->group);
	m->event_off = ev_heap_str(h, d->event);
	m->def_off = ev_heap_str(h, d->text);
	m->place_off = ev_heap_str(h, d->place);
	m->args_off = aoff;
	atomic_store(&m->filter_off, 0);
	atomic_store(&m->engine_misses, 0);
	if (!m->group_off || !m->event_off || !m->def_off || !m->place_off)
		return -ENOSPC;
	atomic_store_explicit(&m->state, EV_META_LIVE, memory_order_release);
	return 0;
}

/* ---- the API ---------------------------------------------------------------------- */

int ukpev_event_create(struct ukpev_area *a, const char *definition, unsigned flags,
		       struct ukpev_event **out, struct ukpev_error *err)
{
	struct ukpev_error dummy;
	if (!err)
		err = &dummy;
	if (!a || !out)
		return -EINVAL;
	*out = NULL;
	struct ukpev_def *d;
	int r = ev_def_parse(definition, &d, err);
	if (r)
		return r;
	/* the hit path's fields on one cache line */
	struct ukpev_event *e = aligned_alloc(64, (sizeof(*e) + 63) & ~(size_t)63);
	if (e)
		memset(e, 0, sizeof(*e));
	if (!e) {
		ev_def_free(d);
		return -ENOMEM;
	}
	e->area = a;
	e->def = d;
	e->ret = d->kind == 'r';
	e->nsaved = d->max_saved;
	e->nargs = d->nargs;
	e->payload_size = d->payload_size;
	e->rec_size = (unsigned)sizeof(struct ev_rec) + (e->ret ? 8 : 0) + d->payload_size;
	e->max_size = (e->rec_size + d->max_dyn + 7) & ~7u;
	e->info = d->info;
	pthread_mutex_lock(&ev_lock);
	/* errors go back in err, not to the program's stderr */
	int quiet = ukp_log_quiet;
	ukp_log_quiet = 1;
	/* the name once per area */
	for (unsigned i = 0; i < UKPEV_MAX_EVENTS; i++) {
		struct ukpev_event *o = a->events[i];
		if (o && !strcmp(o->def->group, d->group) && !strcmp(o->def->event, d->event)) {
			ev_set_err(err, UKPEV_E_EVENT_EXIST, d->name_at);
			r = -EINVAL;
			goto fail;
		}
	}
	if ((r = compile(e, err)))
		goto fail;
	/* the place */
	unsigned long addr = 0;
	const char *symname = NULL;
	char spec[4096];
	struct objfind f;
	switch (d->place_kind) {
	case PL_ADDR:
		addr = d->offs;
		break;
	case PL_OBJOFF:
	case PL_OBJSYM: {
		bool loaded = find_object(d->obj, &f);
		/* a library given by path whose file shows the place: armed
		 * at each of its loads, whether loaded now or not */
		int code = strchr(d->obj, '/') || !loaded ? dfr_check(d, e) : UKPEV_E_UNKNOWN_OBJECT;
		if (!code) {
			e->deferred = true;
			break;
		}
		if (!loaded) {
			ev_set_err(err, code, d->place_at + (code == UKPEV_E_UNKNOWN_OBJECT ?
							     0 : (int)strlen(d->obj) + 1));
			r = -EINVAL;
			goto fail;
		}
		if (d->place_kind == PL_OBJOFF) {
			addr = file_offset_addr(&f, d->offs);
			if (!addr) {
				ev_set_err(err, UKPEV_E_BAD_FILE_OFFS,
					   d->place_at + (int)strlen(d->obj) + 1);
				r = -EINVAL;
				goto fail;
			}
			break;
		}
		/* the object as the engine names it (found, maybe, by
		 * another path to the same file) */
		if (snprintf(spec, sizeof(spec), "%s:%s", f.path, d->sym) >= (int)sizeof(spec)) {
			ev_set_err(err, UKPEV_E_UNKNOWN_SYMBOL, d->place_at + (int)strlen(d->obj) + 1);
			r = -EINVAL;
			goto fail;
		}
		symname = spec;
		break;
	}
	default:
		symname = d->sym;
		break;
	}
	unsigned id = atomic_load(&a->hdr->nevents);
	if (id >= UKPEV_MAX_EVENTS) {
		ev_set_err(err, UKPEV_E_NO_AREA_SPACE, 0);
		r = -ENOSPC;
		goto fail;
	}
	e->id = id;
	e->info.id = id;
	bool clk = a->hdr->clock != EV_CLOCK_TSC;
	struct kprobe *kp = &e->u.kp;
	if (e->deferred) {
		e->info.deferred = 1;
		e->dfr_off = (flags & UKPEV_F_DISABLED) != 0;
	} else if (symname) {
		e->symspec = strdup(symname);
		if (!e->symspec) {
			r = -ENOMEM;
			goto fail;
		}
		kp->symbol_name = e->symspec;
		kp->offset = (unsigned)d->offs;
	} else {
		kp->addr = (kprobe_opcode_t *)addr;
	}
	if (flags & UKPEV_F_DISABLED)
		kp->flags = KPROBE_FLAG_DISABLED;
	e->stacks = (flags & UKPEV_F_STACKS) != 0;
	if (e->ret) {
		e->u.rp.handler = (flags & UKPEV_F_STACKS) ? ev_ret_handler_stk :
				  clk ? ev_ret_handler_clk : ev_ret_handler;
		e->u.rp.entry_handler = e->nsaved ? ev_entry_handler : NULL;
		e->u.rp.data_size = e->nsaved * sizeof(unsigned long);
		e->u.rp.maxactive = d->maxactive;
		r = e->deferred ? 0 : register_kretprobe(&e->u.rp);
	} else {
		kp->pre_handler = (flags & UKPEV_F_STACKS) ? ev_pre_handler_stk :
				  clk ? ev_pre_handler_clk : ev_pre_handler;
		r = e->deferred ? 0 : register_kprobe(kp);
	}
	if (e->deferred && find_object(d->obj, &f)) {
		/* loaded now: armed now, a refusal said now */
		ukp_sym_refresh();
		pthread_mutex_lock(&dfr_lock);
		r = dfr_arm_locked(e, f.base);
		pthread_mutex_unlock(&dfr_lock);
		if (r == -ENOENT)
			r = 0;	/* unloaded meanwhile: armed at its next load */
	}
	if (r) {
		int code = place_error(d, r);
		int at = d->place_at;
		if (code == UKPEV_E_UNKNOWN_SYMBOL && d->place_kind == PL_OBJSYM)
			at += (int)strlen(d->obj) + 1;
		ev_set_err(err, code, at);
		r = -EINVAL;
		goto fail;
	}
	if (!e->deferred)
		e->registered = true;
	e->info.addr = (unsigned long)kp->addr;
	if ((r = publish(e))) {
		ev_set_err(err, UKPEV_E_NO_AREA_SPACE, 0);
		goto fail;
	}
	atomic_store(&a->hdr->nevents, id + 1);
	a->events[id] = e;
	if (e->deferred) {
		pthread_mutex_lock(&dfr_lock);
		e->dfr_next = dfr_head;
		dfr_head = e;
		atomic_store(&dfr_any, true);
		pthread_mutex_unlock(&dfr_lock);
	}
	ukp_log_quiet = quiet;
	pthread_mutex_unlock(&ev_lock);
	if (e->deferred)
		objects_scan(false);	/* loaded meanwhile */
	*out = e;
	return 0;
fail:
	ukp_log_quiet = quiet;
	if (e->registered) {
		if (e->ret)
			unregister_kretprobe(&e->u.rp);
		else
			unregister_kprobe(&e->u.kp);
	}
	pthread_mutex_unlock(&ev_lock);
	free(e->prog);
	free(e->strtab);
	free(e->symspec);
	ev_def_free(d);
	free(e);
	return r;
}

int ukpev_event_set_filter(struct ukpev_event *ev, const char *expr, struct ukpev_error *err)
{
	struct ev_filter *f = NULL;
	if (!ev)
		return -EINVAL;
	if (expr && *expr) {
		int r = ev_filter_compile(ev->def, expr, &f, err);
		if (r)
			return r;
	}
	pthread_mutex_lock(&ev_lock);
	struct ev_meta *m = ev_meta(ev->area->hdr, ev->id);
	atomic_store(&m->filter_off, f ? ev_heap_str(ev->area->hdr, f->text) : 0);
	struct ev_filter *old = atomic_exchange_explicit(&ev->filter, f, memory_order_acq_rel);
	ev->info.filter = f ? f->text : NULL;
	pthread_mutex_unlock(&ev_lock);
	if (old) {
		ukp_synchronize();	/* no hit reads it any more */
		ev_filter_free(old);
	}
	return 0;
}

/* ---- triggers ---------------------------------------------------------------------- */

/* A new set: old's triggers but those whose target is gone (NULL: keep
 * all), and add (NULL: none).  NULL for an empty set; *err on ENOMEM. */
static struct ev_trigset *trigset_with(const struct ev_trigset *old, const struct ukpev_event *gone,
				       struct ev_trigger *add, bool *nomem)
{
	unsigned n = (old ? old->n : 0) + (add ? 1 : 0);
	*nomem = false;
	if (!n)
		return NULL;
	struct ev_trigset *s = malloc(sizeof(*s) + n * sizeof(s->t[0]));
	if (!s) {
		*nomem = true;
		return NULL;
	}
	s->n = 0;
	for (unsigned i = 0; old && i < old->n; i++)
		if (!gone || old->t[i]->target != gone)
			s->t[s->n++] = old->t[i];
	if (add)
		s->t[s->n++] = add;
	if (!s->n) {
		free(s);
		return NULL;
	}
	s->clock = false;
	s->hist_only = true;
	for (unsigned i = 0; i < s->n; i++) {
		const struct ev_trigger *t = s->t[i];
		s->clock |= t->type == T_STACKTRACE;
		s->hist_only &= t->type == T_HIST && !t->hist->spec.stack;
	}
	s->direct = s->hist_only;
	for (unsigned i = 0; i < s->n && s->direct; i++) {
		const struct ev_trigger *t = s->t[i];
		const struct ev_hspec *sp = &t->hist->spec;
		s->direct &= !t->filter;
		for (unsigned k = 0; k < sp->nkeys; k++)
			s->direct &= sp->keys[k].kind != HF_STR &&
				     (sp->keys[k].kind != HF_ARG || sp->keys[k].reg >= 0);
		for (unsigned k = 0; k < sp->nvals; k++)
			s->direct &= sp->vals[k].kind != HF_ARG || sp->vals[k].reg >= 0;
	}
	for (unsigned i = 0; i < s->n; i++) {
		const struct ev_trigger *t = s->t[i];
		for (unsigned k = 0; t->hist && k < t->hist->spec.nkeys; k++)
			s->clock |= t->hist->spec.keys[k].kind == HF_TS;
	}
	return s;
}

/*
 * The fetches the triggers of a soft-disabled event need (the fields of
 * its histograms and of its triggers' conditions): the hit of an event
 * that records nothing runs only these.  NULL: every fetch (or none is
 * left out).
 */
static struct ev_insn *need_prog(const struct ukpev_event *e, const struct ev_trigset *ts)
{
	unsigned n = e->nargs;
	if (!ts || !n)
		return NULL;
	bool *need = calloc(n, sizeof(*need));
	if (!need)
		return NULL;
	for (unsigned i = 0; i < ts->n; i++) {
		const struct ev_trigger *t = ts->t[i];
		for (unsigned k = 0; t->filter && k < t->filter->n; k++) {
			const struct ev_fpred *p = &t->filter->p[k];
			if ((p->op == F_NUM || p->op == F_STR) && p->arg < n)
				need[p->arg] = true;
		}
		if (t->hist) {
			const struct ev_hspec *sp = &t->hist->spec;
			for (unsigned k = 0; k < sp->nkeys; k++)
				if (sp->keys[k].kind == HF_ARG || sp->keys[k].kind == HF_STR)
					need[sp->keys[k].arg] = true;
			for (unsigned k = 0; k < sp->nvals; k++)
				if (sp->vals[k].kind == HF_ARG)
					need[sp->vals[k].arg] = true;
		}
	}
	unsigned all = 0, len = 0;
	for (unsigned i = 0; i < n; i++)
		all += need[i];
	while (e->prog[len].op != OP_END)
		len++;
	struct ev_insn *p = all < n ? calloc(len + 1, sizeof(*p)) : NULL;
	if (p) {
		unsigned arg = 0, m = 0;
		for (unsigned k = 0; k < len; k++) {
			const struct ev_insn *in = &e->prog[k];
			if (in->op == OP_ARG)
				arg = in->param;
			else if (in->op == OP_REG_VAL || in->op == OP_REG_STR)
				arg = in->count;
			if (arg < n && need[arg])
				p[m++] = *in;
		}
		p[m].op = OP_END;
	}
	free(need);
	return p;
}

int ukpev_event_add_trigger(struct ukpev_event *ev, const char *text, struct ukpev_error *err)
{
	struct ukpev_error dummy;
	if (!err)
		err = &dummy;
	err->code = UKPEV_E_NONE;
	err->offset = 0;
	if (!ev || !text)
		return -EINVAL;
	struct ev_trigger *t;
	struct trig_parsed tp;
	int r = ev_trigger_parse(ev->def, ev->stacks, text, &t, &tp, err);
	if (r)
		return r;
	size_t cmd_end = tp.cmd_end;
	t->text = strdup(text);
	if (!t->text) {
		ev_trigger_free(t);
		return -ENOMEM;
	}
	if (t->type == T_HIST) {	/* last: it takes one of the area's histograms */
		r = ev_hist_create(ev, text, cmd_end, &t->hist, err);
		if (r) {
			ev_trigger_free(t);
			return r;
		}
	}
	pthread_mutex_lock(&ev_lock);
	if (tp.tgrp) {
		for (unsigned i = 0; i < UKPEV_MAX_EVENTS && !t->target; i++) {
			struct ukpev_event *o = ev->area->events[i];
			if (o && strlen(o->def->group) == tp.tgl &&
			    !strncmp(o->def->group, tp.tgrp, tp.tgl) &&
			    strlen(o->def->event) == tp.tel && !strncmp(o->def->event, tp.tev, tp.tel))
				t->target = o;
		}
		if (!t->target) {
			pthread_mutex_unlock(&ev_lock);
			ev_set_err(err, UKPEV_E_FILTER_NO_EVENT, (int)(tp.tgrp - text));
			ev_trigger_free(t);
			return -EINVAL;
		}
	}
	bool nomem;
	struct ev_trigset *old = atomic_load(&ev->trig);
	struct ev_trigset *s = trigset_with(old, NULL, t, &nomem);
	if (nomem) {
		pthread_mutex_unlock(&ev_lock);
		ev_trigger_free(t);
		return -ENOMEM;
	}
	struct ev_insn *np = need_prog(ev, s);
	struct ev_insn *oldp = atomic_exchange_explicit(&ev->prog_need, np, memory_order_acq_rel);
	atomic_store_explicit(&ev->trig, s, memory_order_release);
	atomic_fetch_or(&ev->gate, EV_GATE_TRIGGERS);
	pthread_mutex_unlock(&ev_lock);
	if (old || oldp) {
		ukp_synchronize();	/* no hit reads the old set any more */
		free(old);
		free(oldp);
	}
	return 0;
}

void ukpev_event_clear_triggers(struct ukpev_event *ev)
{
	if (!ev)
		return;
	pthread_mutex_lock(&ev_lock);
	struct ev_trigset *old = atomic_exchange(&ev->trig, NULL);
	struct ev_insn *oldp = atomic_exchange(&ev->prog_need, NULL);
	atomic_fetch_and(&ev->gate, (uint8_t)~EV_GATE_TRIGGERS);
	pthread_mutex_unlock(&ev_lock);
	if (!old && !oldp)
		return;
	ukp_synchronize();
	free(oldp);
	if (!old)
		return;
	for (unsigned i = 0; i < old->n; i++)
		ev_trigger_free(old->t[i]);
	free(old);
}

int ukpev_event_soft_enable(struct ukpev_event *ev, int on)
{
	if (!ev)
		return -EINVAL;
	uint8_t was = on ? atomic_fetch_and(&ev->gate, (uint8_t)~EV_GATE_SOFT_OFF)
			 : atomic_fetch_or(&ev->gate, EV_GATE_SOFT_OFF);
	return !(was & EV_GATE_SOFT_OFF);
}

int ukpev_area_tracing(struct ukpev_area *a, int on)
{
	if (!a)
		return -EINVAL;
	if (on < 0)
		return !atomic_load(&a->tracing_off);
	return !atomic_exchange(&a->tracing_off, on ? 0 : 1);
}

static int event_switch(struct ukpev_event *ev, bool on)
{
	if (!ev)
		return -EINVAL;
	if (ev->deferred) {
		/* armed in this state when its object loads */
		pthread_mutex_lock(&dfr_lock);
		ev->dfr_off = !on;
		int r = 0;
		if (ev->registered)
			r = ev->ret ? (on ? enable_kretprobe : disable_kretprobe)(&ev->u.rp)
				    : (on ? enable_kprobe : disable_kprobe)(&ev->u.kp);
		pthread_mutex_unlock(&dfr_lock);
		return r;
	}
	return ev->ret ? (on ? enable_kretprobe : disable_kretprobe)(&ev->u.rp)
		       : (on ? enable_kprobe : disable_kprobe)(&ev->u.kp);
}

int ukpev_event_enable(struct ukpev_event *ev)
{
	return event_switch(ev, true);
}

int ukpev_event_disable(struct ukpev_event *ev)
{
	return event_switch(ev, false);
}

void ukpev_event_remove(struct ukpev_event *ev)
{
	if (!ev)
		return;
	if (ev->deferred) {
		/* off the list, no scan arms it again; its probe taken back
		 * with no lock of ours held (a grace period) */
		pthread_mutex_lock(&dfr_lock);
		struct ukpev_event **pp = &dfr_head;
		while (*pp && *pp != ev)
			pp = &(*pp)->dfr_next;
		if (*pp)
			*pp = ev->dfr_next;
		bool armed = ev->registered;
		ev->registered = false;
		pthread_mutex_unlock(&dfr_lock);
		if (armed) {
			ev->registered = true;
			dfr_disarm_locked(ev);	/* its own now */
		}
	} else if (ev->ret) {
		unregister_kretprobe(&ev->u.rp);
	} else {
		unregister_kprobe(&ev->u.kp);
	}
	pthread_mutex_lock(&ev_lock);
	/* triggers of other events that switch this one: dropped (their
	 * old sets freed once no hit reads them) */
	struct ev_trigset *olds[UKPEV_MAX_EVENTS];
	unsigned nolds = 0;
	for (unsigned i = 0; i < UKPEV_MAX_EVENTS; i++) {
		struct ukpev_event *o = ev->area->events[i];
		struct ev_trigset *ts = o && o != ev ? atomic_load(&o->trig) : NULL;
		bool hit = false, nomem;
		for (unsigned k = 0; ts && k < ts->n; k++)
			hit |= ts->t[k]->target == ev;
		if (!hit)
			continue;
		struct ev_trigset *ns = trigset_with(ts, ev, NULL, &nomem);
		if (nomem) {	/* keep the triggers, but inert */
			for (unsigned k = 0; k < ts->n; k++)
				if (ts->t[k]->target == ev)
					atomic_store(&ts->t[k]->count, 0);
			continue;
		}
		atomic_store_explicit(&o->trig, ns, memory_order_release);
		if (!ns)
			atomic_fetch_and(&o->gate, (uint8_t)~EV_GATE_TRIGGERS);
		olds[nolds++] = ts;
	}
	struct ev_meta *m = ev_meta(ev->area->hdr, ev->id);
	atomic_fetch_add(&m->engine_misses, ev->deferred ? ev->dfr_missed :
			 ev->u.kp.nmissed + (ev->ret ? (unsigned long)ev->u.rp.nmissed : 0));
	atomic_store_explicit(&m->state, EV_META_GONE, memory_order_release);
	ev->area->events[ev->id] = NULL;
	pthread_mutex_unlock(&ev_lock);
	if (nolds) {
		ukp_synchronize();
		for (unsigned i = 0; i < nolds; i++) {
			for (unsigned k = 0; k < olds[i]->n; k++)
				if (olds[i]->t[k]->target == ev)
					ev_trigger_free(olds[i]->t[k]);
			free(olds[i]);
		}
	}
	struct ev_trigset *own = atomic_load(&ev->trig);
	for (unsigned k = 0; own && k < own->n; k++)
		ev_trigger_free(own->t[k]);
	free(own);
	ev_filter_free(atomic_load(&ev->filter));
	free(atomic_load(&ev->prog_need));
	free(ev->prog);
	free(ev->strtab);
	free(ev->symspec);
	ev_def_free(ev->def);
	free(ev);
}

const struct ukpev_event_info *ukpev_event_info(const struct ukpev_event *ev)
{
	return ev ? &ev->info : NULL;
}

struct ukpev_event *ukpev_event_find(struct ukpev_area *a, const char *name)
{
	if (!a || !name)
		return NULL;
	const char *slash = strchr(name, '/');
	struct ukpev_event *found = NULL;
	pthread_mutex_lock(&ev_lock);
	for (unsigned i = 0; i < UKPEV_MAX_EVENTS && !found; i++) {
		struct ukpev_event *e = a->events[i];
		if (!e)
			continue;
		if (slash) {
			size_t gl = (size_t)(slash - name);
			if (strlen(e->def->group) == gl && !strncmp(e->def->group, name, gl) &&
			    !strcmp(e->def->event, slash + 1))
				found = e;
		} else if (!strcmp(e->def->event, name)) {
			found = e;
		}
	}
	pthread_mutex_unlock(&ev_lock);
	return found;
}

int ukpev_area_sync(struct ukpev_area *a)
{
	if (!a)
		return -EINVAL;
	pthread_mutex_lock(&ev_lock);
	for (unsigned i = 0; i < UKPEV_MAX_EVENTS; i++) {
		struct ukpev_event *e = a->events[i];
		if (!e)
			continue;
		if (e->deferred)
			pthread_mutex_lock(&dfr_lock);
		uint64_t n = e->u.kp.nmissed + (e->ret ? (unsigned long)e->u.rp.nmissed : 0);
		if (e->deferred) {
			n = e->dfr_missed + (e->registered ? n : 0);
			pthread_mutex_unlock(&dfr_lock);
		}
		atomic_store(&ev_meta(a->hdr, i)->engine_misses, n);
	}
	pthread_mutex_unlock(&ev_lock);
	return 0;
}

int ukpev_symbolize_self(unsigned long addr, char *buf, size_t n, void *arg)
{
	(void)arg;
	struct ukp_where w;
	if (!buf)
		return -1;
	if (n)
		buf[0] = 0;
	if (ukp_sym_where(addr, &w) || !w.func[0])
		return -1;
	return snprintf(buf, n, "%s+0x%lx/0x%lx", w.func, addr - w.func_start,
			w.func_end > w.func_start ? w.func_end - w.func_start : 1UL);
}
