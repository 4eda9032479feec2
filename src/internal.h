/* SPDX-License-Identifier: MIT */
/* Private declarations shared by the generic parts of the engine. */
#ifndef UKP_INTERNAL_H
#define UKP_INTERNAL_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <ukprobes.h>
#include "arch/x86_64/arch.h"

#define UKP_HIDDEN __attribute__((visibility("hidden")))

/* Every message has one prefix and names what failed. */
void ukp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ------------------------------------------------------------------ */
/* Threads and grace periods (sync.c)                                  */

/*
 * One block per thread that ever hit a probe, from a pool that is never
 * unmapped (so the grace-period scan can always read it).  Only its own
 * thread writes it, except `free`, which the pool reclaims.
 */
/* A hit that will run post_handlers later: which probes were live when
 * it trapped (a probe registered or enabled while the instruction runs,
 * e.g. a blocking system call, must not get a post without its pre). */
#define UKP_PENDING_PROBES 8
struct ukp_pending {
	const struct ukp_site *site;
	unsigned n;			/* > UKP_PENDING_PROBES: too many, all live */
	struct kprobe *p[UKP_PENDING_PROBES];
};
#define UKP_PENDING_DEPTH 4

struct ukp_thread {
	_Atomic unsigned long seq;	/* odd while inside the hit path */
	unsigned nest;			/* hit-path nesting (signals in handlers) */
	int in_handler;			/* recursion guard: nmissed */
	pid_t tid;
	_Atomic int free;
	struct kprobe *cur;		/* probe whose handler runs now */
	struct pt_regs *cur_regs;
	struct ukp_jmpbuf *cur_jb;	/* where a handled fault resumes */
	int in_fault;
	int abandon;			/* stop running this hit's handlers */
	unsigned npending;		/* ring of hits awaiting their post */
	struct ukp_pending pending[UKP_PENDING_DEPTH];
	int in_hook;
	/* copy_from_user_nofault from a handler needs no state: entry.S */
};

struct ukp_thread *ukp_thread_self(void);	/* attaches on first use */
struct ukp_thread *ukp_thread_peek(void);	/* NULL if never attached */
/* Enter/leave the hit path: readers of sites' probe lists. */
void ukp_read_lock(struct ukp_thread *t);
void ukp_read_unlock(struct ukp_thread *t);
/* A hit with no thread block (nested in the block's own attach): enough
 * of a reader to count nmissed on the site's list. */
void ukp_anon_read_lock(void);
void ukp_anon_read_unlock(void);
/* Returns once every thread that was in the hit path has left it. */
void ukp_synchronize(void);
void ukp_sync_init(void);

/* ------------------------------------------------------------------ */
/* Sites: one per probed address (kprobes.c)                           */

/* Immutable once published; swapped whole, freed after a grace period. */
struct ukp_plist {
	unsigned n;
	bool any_post;
	struct kprobe *p[];
};

struct ukp_object;

/*
 * A site lives as long as the process (its slot may still be executed by
 * a thread that trapped before the probe went away).  When its object is
 * unloaded it is marked dead and leaves the lookup table.
 */
struct ukp_site {
	unsigned long addr;
	struct ukp_insn insn;
	_Atomic(struct ukp_plist *) probes;	/* NULL: no probe now */
	uint8_t *slot;				/* out-of-line copy, no post */
	uint8_t *slot_post;			/* with the post trampoline */
	struct ukp_object *obj;
	void (*hook)(void);			/* internal: runs before probes */
	/* protected by ukp_lock: */
	bool armed;
	_Atomic bool dead;
	uint8_t orig;
};

struct ukp_site *ukp_site_lookup(unsigned long addr);	/* lock-free */

/* ------------------------------------------------------------------ */
/* Out-of-line slots (slots.c)                                         */

void ukp_slots_init(void);
/* Executable memory within +-1 GiB of near.  NULL on failure. */
uint8_t *ukp_slot_alloc(unsigned long near, size_t size);
/* Copy code into slot memory (makes it writable for the duration). */
int ukp_slot_write(uint8_t *slot, const uint8_t *code, size_t len,
		   struct ukp_site *site, const int8_t *sp_fix);
/* Which site does this slot address belong to?  fault path only */
struct ukp_site *ukp_slot_owner(unsigned long ip, int *sp_fix, bool *post);

/* ------------------------------------------------------------------ */
/* Code patching (text.c)                                              */

struct ukp_poke { unsigned long addr; uint8_t byte; };
/* Write the bytes, one protection change per page, one serialisation. */
int ukp_text_poke_batch(const struct ukp_poke *pokes, size_t n);
void ukp_text_init(void);
int ukp_text_is_exec(unsigned long addr);

/* ------------------------------------------------------------------ */
/* Symbols and objects (symbols.c)                                     */

struct ukp_where {
	unsigned long func_start, func_end;	/* 0 if unknown */
	char func[128];
	char object[128];		/* base name; "" for the main executable */
	struct ukp_object *obj;
};

int ukp_sym_resolve(const char *spec, unsigned long *addr);
int ukp_sym_where(unsigned long addr, struct ukp_where *w);
bool ukp_sym_blacklisted(unsigned long addr, const char **why);
void ukp_sym_init(void);
/* after a dlclose: is this object still mapped? (under ukp_lock) */
bool ukp_sym_object_alive(struct ukp_object *obj);
void ukp_sym_refresh(void);
void ukp_sym_fork_prepare_dl(void);
void ukp_sym_fork_prepare(void);
void ukp_sym_fork_parent(void);
void ukp_sym_fork_child(void);

/* ------------------------------------------------------------------ */
/* Signals (trap.c)                                                    */

void ukp_trap_init(void);
void ukp_trap_ensure(void);
void ukp_post_dispatch(void *cont, struct pt_regs *regs);
extern int ukp_knob_enabled;

/* ------------------------------------------------------------------ */
/* Registry lock: protects every registration record and site state.   */
extern pthread_mutex_t ukp_lock;
void ukp_init_once(void);
void ukp_objects_changed(void);	/* the dynamic linker unmapped something */
int ukp_register_kind(struct kprobe **kps, int num, char kind);
void ukp_unregister_kind(struct kprobe **kps, int num);

#endif
