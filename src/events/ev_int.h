/* SPDX-License-Identifier: MIT */
/*
 * Dynamic events, private: parsed definitions, fetch programs, the shared
 * area's layout, filters.  docs/events.md draws the whole.
 */
#ifndef UKP_EV_INT_H
#define UKP_EV_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>
#include <ukprobes.h>

#define EV_HIDDEN __attribute__((visibility("hidden")))

/* ------------------------------------------------------------------ */
/* Fetch programs (the kernel's struct fetch_insn)                     */

/*
 * Each fetcharg compiles to a few instructions, run in order by the hit
 * path with one 64-bit register `val`:
 *
 *	ARG	  starts fetcharg `arg` (its slot at payload offset `dst`)
 *	LD_*	  val = a register, the stack pointer, a saved argument...
 *	DEREF	  val = *(u64 *)(val + imm)	(a fault: (fault), next ARG)
 *	ADD	  val += imm
 *	ST_VAL	  the low `size` bytes of val into the slot
 *	ST_MEM	  `size` * `count` bytes at val into the slot
 *	ST_STR	  the string at val into the dynamic part
 *	ST_COMM / ST_IMMSTR  the thread's name / an immediate string
 *	ST_STRARR count pointers at val, each to a string (string[N])
 *
 * `+8(+0(%di)):u32` is ARG, LD_REG di, DEREF 0, ADD 8, ST_MEM 4.  The
 * commonest forms are one instruction each: `%di:u32` REG_VAL,
 * `+8(%di):string` REG_STR.
 */
enum ev_op {
	OP_ARG = 1,
	OP_LD_REG,	/* param: pt_regs word index */
	OP_LD_SP,	/* $stack */
	OP_LD_STACK,	/* $stackN: imm = byte offset from sp */
	OP_LD_ARG,	/* $argN at entry: param = N (1..) */
	OP_LD_SAVED,	/* $argN at a return: param = N, from the instance */
	OP_LD_RETVAL,
	OP_LD_IMM,
	OP_DEREF,
	OP_ADD,
	OP_ST_VAL,
	OP_ST_MEM,
	OP_ST_STR,
	OP_ST_COMM,
	OP_ST_IMMSTR,	/* imm: offset of the string in the event's strtab */
	OP_ST_STRARR,	/* count pointers at val, each a string (string[N]) */
	/* fused, for the common fetchargs: */
	OP_REG_VAL,	/* ARG, LD_REG, ST_VAL: slot dst, register param */
	OP_REG_STR,	/* ARG count, LD_REG param, ADD imm, ST_STR: slot dst */
	OP_END,
};

struct ev_insn {
	uint8_t op;
	uint8_t size;		/* ST_*: bytes of one element */
	uint16_t count;		/* ST_MEM: elements (1 for a scalar) */
	uint16_t param;		/* ARG: arg index; LD_REG: word; LD_ARG: N */
	uint16_t dst;		/* ARG: slot offset in the payload */
	int64_t imm;
};

/* ------------------------------------------------------------------ */
/* Parsed definitions                                                   */

enum ev_place_kind { PL_SYM, PL_OBJSYM, PL_OBJOFF, PL_ADDR };

/* one fetch as parsed, before resolution: the base and its derefs */
enum ev_base {
	B_REG, B_SP, B_STACK, B_ARG, B_RETVAL, B_IMM, B_ADDR, B_SYM, B_COMM, B_IMMSTR,
};

struct ev_parg {
	char *name;
	char *type_name;	/* canonical, for ukpev_arg_info */
	int type;		/* enum ukpev_type */
	unsigned elem_size, count;
	unsigned bf_width, bf_shift;
	int base;		/* enum ev_base */
	int reg;		/* B_REG: word index; B_ARG/B_STACK: N */
	int64_t imm;		/* B_IMM, B_ADDR */
	char *sym;		/* B_SYM: "SYM" or "OBJ:SYM" */
	int64_t sym_off;
	int sym_at;		/* offset of SYM (after the '@') in the definition */
	char *str;		/* B_IMMSTR */
	unsigned ndepth;	/* +OFFS( ) levels, innermost first */
	int64_t *offs;		/* ndepth of them (malloc'd) */
	bool memory;		/* the value is read from memory */
	unsigned offset;	/* payload slot */
};

struct ukpev_def {
	char *text;
	int kind;		/* 'p' or 'r' */
	int maxactive;
	char group[UKPEV_NAME_MAX], event[UKPEV_NAME_MAX];
	int place_kind;
	char *place;		/* as written, without %return */
	char *obj;		/* PL_OBJSYM, PL_OBJOFF */
	char *sym;		/* PL_SYM, PL_OBJSYM */
	unsigned long offs;	/* SYM+OFFS, or OBJ:0xN, or 0xADDR */
	int place_at;		/* offset of PLACE in text */
	int name_at;		/* of EVENT, or of PLACE when it names it */
	unsigned nargs;
	struct ev_parg *args;
	unsigned max_saved;	/* highest $argN used at a return */
	unsigned payload_size;	/* bitmap + fixed slots, rounded to 8 */
	unsigned max_dyn;	/* dynamic bytes a record may need */
	struct ukpev_arg_info *infos;
	struct ukpev_event_info info;
};

/* Parse a definition (no resolution).  0 or -EINVAL/-ENOMEM. */
EV_HIDDEN int ev_def_parse(const char *text, struct ukpev_def **out, struct ukpev_error *err);
EV_HIDDEN void ev_def_free(struct ukpev_def *d);
EV_HIDDEN void ev_set_err(struct ukpev_error *err, int code, int offset);

/* ------------------------------------------------------------------ */
/* Filters                                                              */

enum ev_fop {
	F_NUM = 1,	/* field (arg) cmp imm: numbers */
	F_STR,		/* field (arg) cmp/glob string */
	F_PID,		/* common_pid cmp imm */
	F_AND, F_OR, F_NOT,
};
enum ev_cmp { C_EQ, C_NE, C_LT, C_LE, C_GT, C_GE, C_BAND, C_GLOB };

struct ev_fpred {
	uint8_t op, cmp, is_signed, size;
	uint16_t dst;		/* the field's payload slot */
	uint16_t arg;		/* its index (fault bit) */
	uint8_t bf_width, bf_shift, is_dyn, pad;
	int64_t val;		/* F_NUM, F_PID */
	uint32_t str_off, str_len;	/* F_STR: in the filter's strtab */
};

#define EV_FILTER_MAX 64	/* terms, operators included */
struct ev_filter {
	char *text;
	unsigned n;
	struct ev_fpred p[EV_FILTER_MAX];
	char *strtab;
};

#define EV_MAX_HISTS	32		/* histograms per area */

/* ukpev_event.gate: what sends a hit the slow way */
#define EV_GATE_SOFT_OFF	1	/* ukpev_event_soft_enable(0) */
#define EV_GATE_TRIGGERS	2	/* it has triggers */

/* Triggers: an immutable set, swapped whole (ukpev_event_add_trigger) */
enum ev_trig_type { T_TRACEON = 1, T_TRACEOFF, T_ENABLE, T_DISABLE, T_STACKTRACE, T_HIST };
struct ev_hist;
struct ev_trigger {
	int type;
	_Atomic int64_t count;		/* < 0: no limit */
	struct ukpev_event *target;	/* T_ENABLE, T_DISABLE */
	struct ev_hist *hist;		/* T_HIST */
	struct ev_filter *filter;	/* NULL: always */
	char *text;
};
struct ev_trigset {
	unsigned n;
	bool clock;			/* a trigger needs the hit's time (a
					   stack record, a timestamp key) */
	bool hist_only;			/* every trigger a hist without stacks:
					   nothing they do changes what the
					   hit records */
	bool direct;			/* and without conditions, every field a
					   register: nothing to fetch */
	struct ev_trigger *t[];
};

/* Compile expr against d's fields.  0 or -EINVAL (err) / -ENOMEM. */
EV_HIDDEN int ev_filter_compile(const struct ukpev_def *d, const char *expr,
				struct ev_filter **out, struct ukpev_error *err);
EV_HIDDEN void ev_filter_free(struct ev_filter *f);

/* ------------------------------------------------------------------ */
/* The shared area: one memfd, only offsets inside                     */

/*
 *	+----------------------+ 0
 *	| struct ev_area_hdr   |
 *	+----------------------+ events_off
 *	| struct ev_meta [UKPEV_MAX_EVENTS]  event descriptions
 *	+----------------------+ heap_off
 *	| names, definitions, arg descriptions (bump allocated)
 *	+----------------------+ threads_off
 *	| struct ev_tblock [threads_max]     one per recording thread
 *	+----------------------+ pool_off
 *	| sub-buffers [nsubbufs] of UKPEV_SUBBUF_SIZE bytes
 *	+----------------------+ size
 */
#define EV_MAGIC	0x31766570756b75ULL	/* "ukupev1" */
#define EV_VERSION	3
#define EV_CLOCK_TSC	0	/* ts: rdtsc, converted by the reader */
#define EV_CLOCK_MONO	1	/* ts: CLOCK_MONOTONIC ns */
#define EV_CPU_RSEQ	0
#define EV_CPU_RDPID	1
#define EV_CPU_RDTSCP	2

struct ev_area_hdr {
	uint64_t magic;
	uint32_t version, hdr_size;
	uint64_t size;
	uint64_t events_off, heap_off, heap_size, threads_off, pool_off;
	uint32_t threads_max, nsubbufs, subbuf_size, buffer_subbufs;
	_Atomic uint64_t heap_used;
	_Atomic uint32_t nevents;	/* ids handed out */
	_Atomic uint32_t threads_hw;	/* thread blocks ever used */
	_Atomic uint32_t subbufs_hw;	/* sub-buffers ever used */
	uint32_t clock;			/* EV_CLOCK_* */
	_Atomic uint64_t free_subbufs;	/* tagged stack: tag << 32 | idx + 1 */
	_Atomic uint64_t free_threads;
	_Atomic uint64_t nothread_misses;	/* hits with no thread block */
	_Atomic uint64_t retired_lost;		/* lost of thread blocks retired */
	uint64_t tsc0, ns0;		/* calibration at creation */
	uint64_t mult;			/* ns = ns0 + ((tsc - tsc0) * mult >> 32) */
	/* histograms: descriptions, and the pool their tables come from */
	uint64_t hists_off, hpool_off, hpool_size;
	_Atomic uint64_t hpool_used;
	_Atomic uint32_t nhists;
	uint32_t pad_h;
	/* the objects the process loaded, in load order (event.c logs
	 * them; the reader symbolises with them after the process is gone) */
	uint64_t objs_off;
	uint32_t objs_max;
	_Atomic uint32_t nobjs;
};

#define EV_MAX_OBJS	2048
struct ev_obj {
	uint64_t lo, hi, bias;		/* its PT_LOAD range; address = bias + vaddr */
	uint64_t path_off;		/* heap string */
};

/* An event's description, published by its creator (state last). */
#define EV_META_FREE	0
#define EV_META_LIVE	1
#define EV_META_GONE	2
struct ev_meta_arg {
	uint64_t name_off, type_off;	/* heap strings */
	uint32_t type, elem_size, count, offset, bf_width, bf_shift;
};
#define EV_META_F_DEFERRED 1u	/* armed whenever its object loads */
struct ev_meta {
	_Atomic uint32_t state;
	uint32_t kind, maxactive, nargs, payload_size, flags;	/* EV_META_F_* */
	_Atomic uint64_t addr;		/* 0: a deferred event not armed yet */
	uint64_t group_off, event_off, def_off, place_off, args_off;
	_Atomic uint64_t filter_off;	/* 0: none */
	_Atomic uint64_t engine_misses;	/* ukpev_area_sync() */
	_Atomic int64_t arm_err;	/* a deferred event that could not be
					   armed when its object loaded:
					   why (UKPEV_E_*) */
	/* hits, misses, filtered of thread blocks retired (reader) */
	_Atomic uint64_t retired[3];
};

/* Per event per thread, written only by that thread. */
struct ev_count {
	uint64_t hits, misses, filtered;
};

/*
 * A recording thread.  The producer's fields are written by that thread
 * only; the reader's by the reader only.
 */
#define EV_TB_FREE	0
#define EV_TB_LIVE	1
struct ev_tblock {
	_Atomic uint32_t state;
	int32_t pid, tid;
	char comm[16];
	uint32_t free_next;		/* free stack link */
	/* producer */
	uint32_t cur;			/* sub-buffer written: idx + 1 */
	uint32_t pad0;
	/* the producer's view: pointers of the recording process */
	struct ev_subbuf *wsb;		/* sub-buffer cur */
	uint8_t *wp;			/* where the next record goes */
	uint8_t *wlimit;		/* wsb's end; wp while a marker is owed */
	const volatile uint32_t *cpu_p;	/* rseq's cpu_id of the thread, or NULL */
	uint64_t pending_lost;		/* lost since the last record */
	_Atomic uint64_t lost;		/* lost in total */
	_Atomic uint32_t held;		/* sub-buffers held (reader gives back) */
	/* reader */
	uint32_t rd;			/* sub-buffer read: idx + 1 */
	uint32_t rpos;
	uint32_t pad1;
	uint64_t lost_marked;		/* sum of the markers read */
	uint64_t lost_told;		/* lost events delivered as markers */
	char rcomm[16];			/* the name as the reader last saw it */
	uint64_t rcomm_ns;		/* when (0: not yet) */
	/* this thread's table of each histogram (offsets into the area,
	 * 0: none yet); kept, emptied, for the next thread of the block */
	uint64_t hist_off[EV_MAX_HISTS];
	struct ev_count cnt[UKPEV_MAX_EVENTS];
};

/*
 * Histograms (hist triggers).  Each is described in the area by the
 * trigger's text and its event; both sides parse the text into the same
 * struct ev_hspec, so the layout of the tables needs no more.  Every
 * thread block has its own table per histogram, written only by its
 * thread, merged by the reader:
 *
 *	struct ev_htable, then spec.size entries of spec.entry_words words:
 *	[0] tag (hash | 1; 0: empty, published last), [1..key_words] the
 *	key, then hitcount, then one sum per val
 */
#define EV_HIST_META_LIVE 1
struct ev_hist_meta {
	_Atomic uint32_t state;
	uint32_t event;
	uint64_t text_off;		/* "hist:keys=..." (heap) */
	_Atomic uint64_t nomem;		/* hits with no table (pool full) */
	_Atomic uint64_t retired_drops;	/* drops of tables merged (reader) */
};
struct ev_htable {
	uint64_t drops;			/* hits that found the table full */
	uint64_t used;			/* entries */
};

/* A sub-buffer: its header, then data. */
struct ev_subbuf {
	_Atomic uint32_t head;		/* bytes committed */
	_Atomic uint32_t closed;	/* the producer moved on to `next` */
	uint32_t next;			/* idx + 1 */
	uint32_t free_next;
	uint8_t data[];
};
#define EV_SB_DATA (UKPEV_SUBBUF_SIZE - sizeof(struct ev_subbuf))

/* A record (8-byte aligned, size a multiple of 8) */
struct ev_rec {
	uint64_t ts;
	uint16_t size;
	uint16_t event;
	uint16_t cpu;
	uint16_t flags;
	/* return probes: uint64_t ret_ip; then the payload: fault bitmap
	 * (8 * ((nargs + 63) / 64) bytes), fixed slots, dynamic data */
};
#define EV_REC_LOST_SIZE (sizeof(struct ev_rec) + 8)
/* A stacktrace trigger's record: event UKPEV_EVENT_STACK, flags the
 * event id it follows, the payload its return addresses */
#define EV_STACK_MAX 64

/* ------------------------------------------------------------------ */
/* Areas and events in this process                                     */

#define EV_MAX_AREAS 4
struct ukpev_area {
	int fd;
	int slot;			/* in each thread's TLS */
	uint32_t key;			/* unique per area made in this process */
	_Atomic uint8_t tracing_off;	/* ukpev_area_tracing(), traceoff */
	struct ev_area_hdr *hdr;
	size_t size;
	struct ukpev_event *events[UKPEV_MAX_EVENTS];
	uint32_t buffer_subbufs;
};

struct ukpev_event {
	/* read by the hit path: one cache line */
	struct ukpev_area *area;
	_Atomic(struct ev_filter *) filter;
	struct ev_insn *prog;
	char *strtab;			/* immediate strings */
	unsigned id;
	unsigned nargs;
	unsigned payload_size;
	unsigned rec_size;		/* fixed part: header, ret_ip, payload */
	unsigned max_size;		/* with the dynamic part, rounded */
	unsigned nsaved;		/* $argN saved at entry */
	bool ret;
	bool stacks;			/* UKPEV_F_STACKS: a handler that walks stacks */
	_Atomic uint8_t gate;		/* EV_GATE_*: 0, the common case */
	_Atomic(struct ev_trigset *) trig;	/* NULL: none */
	_Atomic(struct ev_insn *) prog_need;	/* the fetches the triggers need,
						   for a hit that records
						   nothing (NULL: prog) */
	/* the probe (the handlers find the event from it) */
	union {
		struct kprobe kp;
		struct kretprobe rp;
	} u __attribute__((aligned(64)));
	struct ukpev_def *def;
	bool registered;
	char *symspec;			/* kp.symbol_name */
	/* deferred (a place in a library not loaded yet): armed whenever
	 * the file (dev, ino) is loaded, at its bias plus vaddr; the rest
	 * under event.c's dfr_lock */
	bool deferred;
	bool dfr_off;			/* disabled: arm disabled */
	unsigned long dfr_vaddr;
	unsigned long dfr_bias;		/* armed at this bias */
	unsigned long dfr_dev, dfr_ino;
	unsigned long dfr_missed;	/* nmissed of earlier armings */
	struct ukpev_event *dfr_next;
	struct ukpev_event_info info;	/* def->info with id and addr */
} __attribute__((aligned(64)));

/* area.c */
/* every live area's log gets (path, lo, hi, bias) unless it has it */
EV_HIDDEN void ev_log_object(const char *path, uint64_t lo, uint64_t hi, uint64_t bias);
/* fork: the area's locks held around it (event.c's handlers call these) */
EV_HIDDEN void ev_area_fork_lock(void);
EV_HIDDEN void ev_area_fork_unlock(void);
/* event.c: the dynamic linker's changes followed (once) */
EV_HIDDEN void ev_objects_track(void);
EV_HIDDEN extern _Atomic uint32_t ev_fork_gen;
EV_HIDDEN extern int ev_cpu_mode;
EV_HIDDEN struct ev_tblock *ev_thread_attach(struct ukpev_area *a);
EV_HIDDEN uint64_t ev_heap_str(struct ev_area_hdr *h, const char *s);
EV_HIDDEN void *ev_heap_alloc(struct ev_area_hdr *h, size_t n, uint64_t *off);
static inline void *ev_at(const struct ev_area_hdr *h, uint64_t off)
{
	return (char *)h + off;
}
static inline struct ev_tblock *ev_tb(const struct ev_area_hdr *h, uint32_t i)
{
	return (struct ev_tblock *)((char *)h + h->threads_off) + i;
}
static inline struct ev_subbuf *ev_sb(const struct ev_area_hdr *h, uint32_t idx1)
{
	return (struct ev_subbuf *)((char *)h + h->pool_off +
				    (uint64_t)(idx1 - 1) * UKPEV_SUBBUF_SIZE);
}
static inline struct ev_meta *ev_meta(const struct ev_area_hdr *h, unsigned id)
{
	return (struct ev_meta *)((char *)h + h->events_off) + id;
}
EV_HIDDEN uint32_t ev_sb_get(struct ev_area_hdr *h);
EV_HIDDEN void ev_sb_put(struct ev_area_hdr *h, uint32_t idx1);
EV_HIDDEN void ev_tb_put(struct ev_area_hdr *h, uint32_t idx1);

/* hit.c */
/* A thread's blocks, per area slot: valid while key matches the area's
 * and gen the process's fork generation (a child takes new ones). */
#define EV_MUTED 0x80000000u	/* in ev_tls.gen: ukpev_thread_mute() */
struct ev_tls {
	uint32_t gen;
	uint32_t key[EV_MAX_AREAS];
	struct ev_tblock *tb[EV_MAX_AREAS];
};
EV_HIDDEN extern __thread struct ev_tls ev_tls __attribute__((tls_model("initial-exec")));
EV_HIDDEN int ev_pre_handler(struct kprobe *p, struct pt_regs *regs);
EV_HIDDEN int ev_pre_handler_clk(struct kprobe *p, struct pt_regs *regs);
EV_HIDDEN int ev_ret_handler(struct kretprobe_instance *ri, struct pt_regs *regs);
EV_HIDDEN int ev_ret_handler_clk(struct kretprobe_instance *ri, struct pt_regs *regs);
EV_HIDDEN int ev_pre_handler_stk(struct kprobe *p, struct pt_regs *regs);
EV_HIDDEN int ev_ret_handler_stk(struct kretprobe_instance *ri, struct pt_regs *regs);
EV_HIDDEN int ev_entry_handler(struct kretprobe_instance *ri, struct pt_regs *regs);
/* evaluates f over a record's payload (tid: common_pid) */
EV_HIDDEN bool ev_filter_match(const struct ev_filter *f, const uint8_t *payload,
			       const char *strtab, int32_t tid);

/* ------------------------------------------------------------------ */
/* Histograms (hist.c)                                                  */

#define EV_HIST_MAX_KEYS	3	/* the kernel's TRACING_MAP_KEYS_MAX */
#define EV_HIST_MAX_VALS	8	/* sums besides hitcount */
#define EV_HIST_MAX_SORT	2
#define EV_HIST_STACK_WORDS	32	/* frames of a common_stacktrace key */
#define EV_HIST_STR_WORDS	(UKPEV_STRING_MAX / 8)
#define EV_HIST_DEFAULT_SIZE	2048
#define EV_HIST_MAX_SIZE	131072	/* the kernel's 2^17 */

enum ev_hkind { HF_ARG = 1, HF_STR, HF_PID, HF_TS, HF_STACK, HF_CPU };
enum ev_hmod { HM_NONE = 0, HM_HEX, HM_SYM, HM_SYMOFF, HM_EXEC, HM_LOG2, HM_BUCKETS, HM_USECS };

struct ev_hfield {
	uint8_t kind, mod;	/* enum ev_hkind, ev_hmod */
	bool sign;
	uint8_t size;		/* HF_ARG: bytes of the value in the payload */
	uint16_t arg, slot;	/* HF_ARG, HF_STR: the fetcharg and its slot */
	uint8_t bf_width, bf_shift;
	uint16_t words, off;	/* keys: words in the key, first word */
	int16_t reg;		/* HF_ARG in the target: the pt_regs word the
				   value is (a plain %REG fetcharg), or -1 */
	uint64_t buckets;
	char name[UKPEV_NAME_MAX];
};

struct ev_hspec {
	unsigned nkeys, nvals, nsort;
	struct ev_hfield keys[EV_HIST_MAX_KEYS];
	struct ev_hfield vals[EV_HIST_MAX_VALS];
	struct { int field; bool desc; } sort[EV_HIST_MAX_SORT];	/* field: -1
				   hitcount, 0.. a val, 100 + k key k */
	unsigned size;		/* entries: a power of 2 */
	unsigned key_words, entry_words;
	bool stack;		/* a key is the stack */
	char name[UKPEV_NAME_MAX];
	const char *filter;	/* " if ..." of the text, or NULL */
};

/* key modifiers by name */
struct ev_hmod_name { const char *name; int mod; };
#define EV_HMODS 7
EV_HIDDEN extern const struct ev_hmod_name ev_hmods[EV_HMODS];

/* trigger.c: a trigger parsed against d (no target resolved, no
 * histogram taken): the end of its command, the event it switches (tgrp,
 * tev: enable_event/disable_event), whether it walks stacks */
struct trig_parsed {
	size_t cmd_end;
	const char *tgrp, *tev;
	size_t tgl, tel;
	bool stacks;
};
EV_HIDDEN int ev_trigger_parse(const struct ukpev_def *d, bool stacks_ok, const char *text,
			       struct ev_trigger **out, struct trig_parsed *tp,
			       struct ukpev_error *err);
EV_HIDDEN void ev_trigger_free(struct ev_trigger *t);

/* A trigger's command length (without " if EXPR", blanks trimmed); *ifp:
 * the "if", or NULL */
EV_HIDDEN size_t ev_trigger_split(const char *text, const char **ifp);
/* Parses "hist:..." (len bytes: without " if EXPR") against ev's fields.
 * -EINVAL with err's offset into text. */
EV_HIDDEN int ev_hist_parse(const struct ukpev_event_info *ev, const char *text, size_t len,
			    struct ev_hspec *out, struct ukpev_error *err);

/* In the target: a histogram trigger */
struct ev_hist {
	unsigned id;			/* its ev_hist_meta */
	struct ev_hspec spec;
};
EV_HIDDEN int ev_hist_create(struct ukpev_event *ev, const char *text, size_t len,
			     struct ev_hist **out, struct ukpev_error *err);
/* Reader */
struct ev_hreader;
struct ukpev_reader {
	struct ev_area_hdr *h;
	size_t size;
	bool own_map;
	/* TSC -> ns: ns = ns0 + (ts - tsc0) * mult >> 32, with (tsc0, ns0)
	 * the latest clock pair and mult the rate since an anchor pair a
	 * second or two older (the clock's own rate lately, NTP included) */
	uint64_t tsc0, ns0, mult, last_cal_ns;
	uint64_t anchor_tsc, anchor_ns, prev_tsc, prev_ns;
	uint64_t last_sweep_ns;		/* threads last asked if alive */
	unsigned nev;
	struct ukpev_event_info *ev;		/* cached descriptions */
	struct ukpev_arg_info **args;
	/* histograms: what retired threads left, merged (hist.c) */
	pthread_mutex_t hist_mu;
	struct ev_hreader *hists[EV_MAX_HISTS];
};
/* reader: fold the tables of a thread block being retired into r */
EV_HIDDEN void ev_hist_retire(struct ukpev_reader *r, struct ev_tblock *tb);
EV_HIDDEN void ev_hist_reader_free(struct ukpev_reader *r);
static inline struct ev_hist_meta *ev_hmeta(const struct ev_area_hdr *h, unsigned i)
{
	return (struct ev_hist_meta *)((char *)h + h->hists_off) + i;
}

#endif
