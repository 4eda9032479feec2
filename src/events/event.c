/* SPDX-License-Identifier: MIT */
/*
 * Events in this process: resolve a parsed definition, compile its fetch
 * program, register its probe, publish its description in the area.
 */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"
#include "ev_int.h"

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

static bool find_object(const char *name, struct objfind *f)
{
	memset(f, 0, sizeof(*f));
	f->name = name;
	dl_iterate_phdr(objfind_cb, f);
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

/* st_value of a defined data or function symbol name in the ELF file at
 * path: its symbol table, then its dynamic one.  0, or -ENOENT. */
static int elf_sym(const char *path, const char *name, unsigned long *value)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = -ENOENT;
	struct stat st;
	if (fd < 0)
		return -ENOENT;
	if (fstat(fd, &st) || (size_t)st.st_size < sizeof(Elf64_Ehdr)) {
		close(fd);
		return -ENOENT;
	}
	size_t size = (size_t)st.st_size;
	const uint8_t *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -ENOENT;
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)(const void *)m;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > size ||
	    (size - eh->e_shoff) / sizeof(Elf64_Shdr) < eh->e_shnum)
		goto out;
	const Elf64_Shdr *sh = (const Elf64_Shdr *)(const void *)(m + eh->e_shoff);
	for (int pass = 0; pass < 2 && err; pass++) {
		unsigned type = pass ? SHT_DYNSYM : SHT_SYMTAB;
		for (unsigned i = 0; i < eh->e_shnum && err; i++) {
			if (sh[i].sh_type != type || sh[i].sh_link >= eh->e_shnum ||
			    sh[i].sh_offset > size || sh[i].sh_size > size - sh[i].sh_offset)
				continue;
			const Elf64_Shdr *ss = &sh[sh[i].sh_link];
			if (ss->sh_offset > size || ss->sh_size > size - ss->sh_offset)
				continue;
			const char *str = (const char *)m + ss->sh_offset;
			const Elf64_Sym *sym = (const Elf64_Sym *)(const void *)(m + sh[i].sh_offset);
			size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
			for (size_t k = 0; k < n; k++) {
				unsigned t = ELF64_ST_TYPE(sym[k].st_info);
				if (sym[k].st_shndx == SHN_UNDEF || sym[k].st_name >= ss->sh_size ||
				    (t != STT_OBJECT && t != STT_FUNC && t != STT_NOTYPE &&
				     t != STT_COMMON))
					continue;
				const char *nm = str + sym[k].st_name;
				size_t left = ss->sh_size - sym[k].st_name;
				if (strnlen(nm, left) < left && !strcmp(nm, name)) {
					*value = sym[k].st_value;
					err = 0;
					break;
				}
			}
		}
	}
out:
	munmap((void *)m, size);
	return err;
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
		if (!elf_sym(f.path, name, &v)) {
			*addr = f.base + v;
			return 0;
		}
	} else {
		struct objlist *l = calloc(1, sizeof(*l));
		if (l) {
			dl_iterate_phdr(objlist_cb, l);
			for (unsigned i = 0; i < l->n; i++)
				if (!elf_sym(l->o[i].path, name, &v)) {
					*addr = l->o[i].base + v;
					free(l);
					return 0;
				}
			free(l);
		}
	}
	return ukp_sym_resolve(spec, addr) ? -ENOENT : 0;
}

/* ---- compiling -------------------------------------------------------------- */

static int compile(struct ukpev_event *e, struct ukpev_error *err)
{
	struct ukpev_def *d = e->def;
	size_t cap = 2 + (size_t)d->nargs * (6 + UKPEV_MAX_DEPTH), n = 0, strsz = 1;
	for (unsigned i = 0; i < d->nargs; i++)
		if (d->args[i].base == B_IMMSTR)
			strsz += strlen(d->args[i].str) + 1;
	e->prog = calloc(cap, sizeof(*e->prog));
	e->strtab = calloc(1, strsz);
	if (!e->prog || !e->strtab)
		return -ENOMEM;
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
		int64_t reads[UKPEV_MAX_DEPTH + 1];
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
	m->addr = e->info.addr;
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

static int place_error(struct ukpev_def *d, int r)
{
	if (r == -EILSEQ)
		return UKPEV_E_BAD_INSN_BNDRY;
	if (r == -ENOENT)
		return UKPEV_E_UNKNOWN_SYMBOL;
	return UKPEV_E_FAIL_REG_PROBE;
	(void)d;
}

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
		if (!find_object(d->obj, &f)) {
			ev_set_err(err, UKPEV_E_UNKNOWN_OBJECT, d->place_at);
			r = -EINVAL;
			goto fail;
		}
		addr = file_offset_addr(&f, d->offs);
		if (!addr) {
			ev_set_err(err, UKPEV_E_BAD_FILE_OFFS, d->place_at + (int)strlen(d->obj) + 1);
			r = -EINVAL;
			goto fail;
		}
		break;
	case PL_OBJSYM:
		if (!find_object(d->obj, &f)) {
			ev_set_err(err, UKPEV_E_UNKNOWN_OBJECT, d->place_at);
			r = -EINVAL;
			goto fail;
		}
		snprintf(spec, sizeof(spec), "%s:%s", d->obj, d->sym);
		symname = spec;
		break;
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
	if (symname) {
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
		r = register_kretprobe(&e->u.rp);
	} else {
		kp->pre_handler = (flags & UKPEV_F_STACKS) ? ev_pre_handler_stk :
				  clk ? ev_pre_handler_clk : ev_pre_handler;
		r = register_kprobe(kp);
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
	e->registered = true;
	e->info.addr = (unsigned long)kp->addr;
	if ((r = publish(e))) {
		ev_set_err(err, UKPEV_E_NO_AREA_SPACE, 0);
		goto fail;
	}
	atomic_store(&a->hdr->nevents, id + 1);
	a->events[id] = e;
	ukp_log_quiet = quiet;
	pthread_mutex_unlock(&ev_lock);
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

int ukpev_event_enable(struct ukpev_event *ev)
{
	if (!ev)
		return -EINVAL;
	return ev->ret ? enable_kretprobe(&ev->u.rp) : enable_kprobe(&ev->u.kp);
}

int ukpev_event_disable(struct ukpev_event *ev)
{
	if (!ev)
		return -EINVAL;
	return ev->ret ? disable_kretprobe(&ev->u.rp) : disable_kprobe(&ev->u.kp);
}

void ukpev_event_remove(struct ukpev_event *ev)
{
	if (!ev)
		return;
	if (ev->ret)
		unregister_kretprobe(&ev->u.rp);
	else
		unregister_kprobe(&ev->u.kp);
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
	atomic_fetch_add(&m->engine_misses, ev->u.kp.nmissed +
			 (ev->ret ? (unsigned long)ev->u.rp.nmissed : 0));
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
		uint64_t n = e->u.kp.nmissed + (e->ret ? (unsigned long)e->u.rp.nmissed : 0);
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
