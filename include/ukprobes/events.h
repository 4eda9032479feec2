/* SPDX-License-Identifier: MIT */
/*
 * Dynamic events: the kernel's kprobe_events / uprobe_events for user
 * space.  A definition in the kernel's grammar ("p:grp/ev libc.so.6:malloc
 * size=%di:u64") becomes a kprobe or kretprobe whose handler runs a small
 * compiled fetch program and writes a fixed binary record into a
 * per-thread buffer.  The buffers live in one shared memory area (a
 * memfd) that another process may map and drain: see docs/events.md.
 *
 * Three users:
 *   - a program tracing itself: ukpev_area_create, ukpev_event_create,
 *     ukpev_reader_from_area, ukpev_reader_poll, ukpev_format_args;
 *   - the agent inside a target: the same, passing ukpev_area_fd() out;
 *   - a consumer in another process: ukpev_reader_open(fd) and the
 *     decoding and formatting functions, which need no probe at all.
 *
 * Every function returning int returns 0 (or a count where said) or a
 * negative errno.  Functions that parse also fill a struct ukpev_error:
 * what was wrong (a message of the kernel's error log) and where (an
 * offset into the text), for ukpev_error_format().
 */
#ifndef UKPROBES_EVENTS_H
#define UKPROBES_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define UKPEV_API __attribute__((visibility("default")))
#else
#define UKPEV_API
#endif

/* ------------------------------------------------------------------ */
/* Limits and defaults                                                 */

#define UKPEV_MAX_ARGS		128	/* fetchargs per definition */
#define UKPEV_MAX_ARRAY		64	/* elements of TYPE[N] */
#define UKPEV_STRING_MAX	256	/* bytes kept of a string, NUL included:
					   255 characters, longer ones cut */
#define UKPEV_MAX_DEPTH		1024	/* nesting of +OFFS(...): more than a
					   command line of them holds */
#define UKPEV_MAX_RECORD	16384	/* bytes of one record, at most */
#define UKPEV_NAME_MAX		64	/* group and event names, NUL included */
#define UKPEV_MAX_EVENTS	1024	/* events per area (ids 0..1023) */

/* Per thread: at most this many KiB of records not yet read (the
 * kernel's buffer_size_kb); the default, 128 MiB: a million records of
 * three fetchargs, so a thread recording as fast as it can while the
 * reader gets a fraction of a CPU loses nothing. */
#define UKPEV_DEFAULT_BUFFER_KB	131072
/* The area every thread's records come from: this many MiB in total,
 * descriptions and thread blocks included, however many threads (1 GiB:
 * 4,096 threads fit, each holding at least one sub-buffer).  Memory is
 * used only as it is first written; drained sub-buffers are reused. */
#define UKPEV_DEFAULT_AREA_MB	1024
/* Buffers are made of sub-buffers of this size; a thread takes its first
 * one at its first event, so 1,000 threads idle after one event each
 * hold 64 MiB. */
#define UKPEV_SUBBUF_SIZE	65536

/* ------------------------------------------------------------------ */
/* Errors of definitions and filters                                   */

/* The kernel's error-log messages where it has one (trace_probe.h,
 * trace_events_filter.c); ukpev_strerror() gives the text. */
enum ukpev_errcode {
	UKPEV_E_NONE = 0,
	UKPEV_E_BAD_PROBE_TYPE,		/* "Invalid probe type" (not p or r) */
	UKPEV_E_BAD_MAXACT,		/* "Invalid maxactive number" */
	UKPEV_E_MAXACT_NO_KPROBE,	/* "Maxactive is not for kprobe" */
	UKPEV_E_MAXACT_TOO_BIG,		/* "Maxactive is too big" */
	UKPEV_E_NO_GROUP_NAME,		/* "Group name is not specified" */
	UKPEV_E_GROUP_TOO_LONG,		/* "Group name is too long" */
	UKPEV_E_BAD_GROUP_NAME,		/* "Group name must follow the same rules as C identifiers" */
	UKPEV_E_NO_EVENT_NAME,		/* "Event name is not specified" */
	UKPEV_E_EVENT_TOO_LONG,		/* "Event name is too long" */
	UKPEV_E_BAD_EVENT_NAME,		/* "Event name must follow the same rules as C identifiers" */
	UKPEV_E_EVENT_EXIST,		/* "Given group/event name is already used by another event" */
	UKPEV_E_NO_PLACE,		/* "Probe point is not specified" */
	UKPEV_E_BAD_PROBE_ADDR,		/* "Invalid probed address or symbol" */
	UKPEV_E_BAD_FILE_OFFS,		/* "Invalid file offset value" */
	UKPEV_E_BAD_RETPROBE,		/* "Retprobe address must be an function entry" */
	UKPEV_E_RETVAL_ON_PROBE,	/* "$retval is not available on probe" */
	UKPEV_E_BAD_STACK_NUM,		/* "Invalid stack number" */
	UKPEV_E_BAD_ARG_NUM,		/* "Invalid argument number" */
	UKPEV_E_BAD_VAR,		/* "Invalid $-variable specified" */
	UKPEV_E_BAD_MEM_ADDR,		/* "Invalid memory address" */
	UKPEV_E_BAD_IMM,		/* "Invalid immediate value" */
	UKPEV_E_IMMSTR_NO_CLOSE,	/* "String is not closed with '\"'" */
	UKPEV_E_TOO_MANY_OPS,		/* "Dereference is too much nested" */
	UKPEV_E_DEREF_NEED_BRACE,	/* "Dereference needs a brace" */
	UKPEV_E_BAD_DEREF_OFFS,		/* "Invalid dereference offset" */
	UKPEV_E_DEREF_OPEN_BRACE,	/* "Dereference brace is not closed" */
	UKPEV_E_COMM_CANT_DEREF,	/* "$comm can not be dereferenced" */
	UKPEV_E_BAD_FETCH_ARG,		/* "Invalid fetch argument" (also an
					   unknown register) */
	UKPEV_E_ARRAY_NO_CLOSE,		/* "Array is not closed" */
	UKPEV_E_BAD_ARRAY_SUFFIX,	/* "Array has wrong suffix" */
	UKPEV_E_BAD_ARRAY_NUM,		/* "Invalid array size" */
	UKPEV_E_ARRAY_TOO_BIG,		/* "Array number is too big" */
	UKPEV_E_BAD_ARRAY_TYPE,		/* "Array can be used only for memory fetch" */
	UKPEV_E_BAD_TYPE,		/* "Unknown type is specified" */
	UKPEV_E_BAD_STRING,		/* "String accepts only memory argument" */
	UKPEV_E_BAD_SYMSTRING,		/* "Symbol String doesn't accept data/userdata" */
	UKPEV_E_BAD_BITFIELD,		/* "Invalid bitfield" */
	UKPEV_E_ARG_NAME_TOO_LONG,	/* "Argument name is too long" */
	UKPEV_E_NO_ARG_NAME,		/* "Argument name is not specified" */
	UKPEV_E_BAD_ARG_NAME,		/* "Argument name must follow the same rules as C identifiers" */
	UKPEV_E_USED_ARG_NAME,		/* "This argument name is already used" */
	UKPEV_E_NO_ARG_BODY,		/* "No argument expression" */
	UKPEV_E_TOO_MANY_ARGS,		/* "Too many arguments are specified" */
	UKPEV_E_RECORD_TOO_BIG,		/* "Event record is too large" */
	UKPEV_E_UNKNOWN_SYMBOL,		/* "Unknown symbol" */
	UKPEV_E_UNKNOWN_OBJECT,		/* "Failed to find the given file" */
	UKPEV_E_BAD_INSN_BNDRY,		/* "Probe point is not an instruction boundary" */
	UKPEV_E_FAIL_REG_PROBE,		/* "Failed to register probe event" */
	UKPEV_E_NO_AREA_SPACE,		/* "Too many events" */
	/* filters */
	UKPEV_E_FILTER_PARSE,		/* "Meaningless filter expression" */
	UKPEV_E_FILTER_FIELD,		/* "Field not found" */
	UKPEV_E_FILTER_OP,		/* "Illegal operation for field type" */
	UKPEV_E_FILTER_MISSING_VAL,	/* "Invalid value (did you forget quotes)?" */
	UKPEV_E_FILTER_BAD_NUM,		/* "Illegal integer value" */
	UKPEV_E_FILTER_UNBALANCED,	/* "Too many '('" */
	UKPEV_E_FILTER_TOO_MANY,	/* "Too many terms in predicate expression" */
	UKPEV_E_FILTER_BAD_STRING,	/* "Missing matching quote" */
	UKPEV_E_FILTER_NO_EVENT,	/* "Unknown event" (of EVENT:EXPR) */
	UKPEV_E_NOFENTRY_ARGS,		/* "$arg* can be used only on function entry or exit" */
	UKPEV_E_FILTER_INVALID_OP,	/* "Invalid operator" */
	UKPEV_E_FILTER_TOO_FEW_OPEN,	/* "Too few '('" */
	UKPEV_E_FILTER_EXPECT_STRING,	/* "Expecting string field" */
	UKPEV_E_FILTER_EXPECT_DIGIT,	/* "Expecting numeric field" */
	UKPEV_E_BAD_TRIGGER,		/* "Invalid trigger" */
	UKPEV_E_TRIGGER_COUNT,		/* "Invalid trigger count" */
	/* hist triggers (trace_events_hist.c's messages where it has one) */
	UKPEV_E_HIST_FIELD,		/* "Couldn't find field" */
	UKPEV_E_HIST_MODIFIER,		/* "Invalid field modifier" */
	UKPEV_E_HIST_FIELD_TYPE,	/* "Field of this type can't be used here" */
	UKPEV_E_HIST_TOO_MANY,		/* "Too many fields" */
	UKPEV_E_HIST_NO_KEYS,		/* "No keys given" */
	UKPEV_E_HIST_SORT,		/* "Sort field not found" */
	UKPEV_E_HIST_SIZE,		/* "Invalid size" */
	UKPEV_E_HIST_ATTR,		/* "Unknown hist attribute" */
	UKPEV_E_HIST_TOO_MANY_HISTS,	/* "Too many histograms" */
	UKPEV_E_TRIGGER_NO_STACKS,	/* "Stack traces need an event created with UKPEV_F_STACKS" */
	UKPEV_E__MAX
};

struct ukpev_error {
	int code;	/* enum ukpev_errcode; UKPEV_E_NONE: no error */
	int offset;	/* in the text parsed: where the caret goes */
};

/* The message of code ("Invalid fetch argument"); never NULL. */
UKPEV_API const char *ukpev_strerror(int code);

/*
 * The kernel's error-log form, for stderr:
 *
 *	ukprobe: error: <message>\n
 *	  Command: <text>\n
 *	<11 + offset spaces>^\n
 *
 * (the caret under the first character of the offending word: column
 * strlen("  Command: ") + offset).  Like snprintf: the length it would
 * have written, buf always NUL-terminated when n > 0.
 */
UKPEV_API int ukpev_error_format(char *buf, size_t n, const char *text,
				 const struct ukpev_error *err);

/* ------------------------------------------------------------------ */
/* What an event records: its description                              */

enum ukpev_type {
	UKPEV_T_U8, UKPEV_T_U16, UKPEV_T_U32, UKPEV_T_U64,
	UKPEV_T_S8, UKPEV_T_S16, UKPEV_T_S32, UKPEV_T_S64,
	UKPEV_T_X8, UKPEV_T_X16, UKPEV_T_X32, UKPEV_T_X64,
	UKPEV_T_CHAR,		/* one byte, printed 'c' */
	UKPEV_T_STRING,		/* dynamic data: bytes at an address */
	UKPEV_T_USTRING,	/* the same (user space has one kind) */
	UKPEV_T_SYMBOL,		/* a u64 address, printed sym+0xOFF/0xSIZE */
	UKPEV_T_SYMSTR,		/* the same, printed as a string: recorded
				   as the address (nothing is formatted in
				   the probed thread), symbolised when read */
	UKPEV_T_BITFIELD,	/* bits of a u8..u64 container: unsigned */
	UKPEV_T_COMM,		/* $comm: a string */
};

struct ukpev_arg_info {
	const char *name;	/* "size", or the default "arg3" */
	const char *type_name;	/* "u64", "string", "b4@3/32", "x8[4]" */
	int type;		/* enum ukpev_type of one element */
	unsigned elem_size;	/* bytes of one element in the record:
				   1, 2, 4, 8; strings 4 (a data_loc) */
				/* string[N]: N pointers, each to a string */
	unsigned count;		/* TYPE[N]: N; otherwise 0 */
	unsigned offset;	/* of the value in the record's payload */
	unsigned bf_width, bf_shift;	/* a bitfield: value = (container
					   >> bf_shift) & mask(bf_width) */
};

#define UKPEV_KIND_PROBE	'p'
#define UKPEV_KIND_RETPROBE	'r'

struct ukpev_event_info {
	unsigned id;			/* index in its area; records carry it */
	const char *group;		/* "ukprobes" unless given */
	const char *event;		/* "p_malloc_0" unless given */
	const char *definition;		/* the text it was created from */
	int kind;			/* UKPEV_KIND_* */
	int maxactive;			/* r[N]: N; else 0 */
	unsigned long addr;		/* the probed address in the target
					   (0 in a definition only parsed) */
	const char *place;		/* PLACE as written: "libc.so.6:malloc" */
	const char *filter;		/* the filter set, or NULL */
	unsigned nargs;
	const struct ukpev_arg_info *args;
	unsigned payload_size;		/* fixed part of a record's payload */
	int deferred;			/* its object (a path) was not loaded:
					   armed each time it is, addr 0
					   until then */
};

/* ------------------------------------------------------------------ */
/* Definitions without a target                                        */

/*
 * A definition parsed and checked but not resolved nor armed: what a
 * command uses to refuse bad input before it starts or touches anything,
 * and to learn an event's group, name and fields (for --filter).
 * Symbols and objects are resolved only by ukpev_event_create().
 *   -EINVAL  bad definition: err says what and where
 *   -ENOMEM
 */
struct ukpev_def;
UKPEV_API int ukpev_def_parse(const char *definition, struct ukpev_def **out,
			      struct ukpev_error *err);
UKPEV_API void ukpev_def_free(struct ukpev_def *d);
/* Its description (id 0, addr 0); valid while d lives. */
UKPEV_API const struct ukpev_event_info *ukpev_def_info(const struct ukpev_def *d);
/*
 * Parses a filter expression against the fields of d (its fetcharg
 * names and common_pid).  -EINVAL with err's offset into expr.
 */
UKPEV_API int ukpev_filter_check(const struct ukpev_def *d, const char *expr,
				 struct ukpev_error *err);

/* ------------------------------------------------------------------ */
/* The shared area                                                     */

struct ukpev_area_opts {
	size_t sz;		/* sizeof(struct ukpev_area_opts) */
	size_t buffer_kb;	/* per thread; 0: UKPEV_DEFAULT_BUFFER_KB */
	size_t area_mb;		/* in total; 0: UKPEV_DEFAULT_AREA_MB */
};

/*
 * Creates an area: a memfd of area_mb MiB (sparse: pages are used only as
 * records are written), mapped MAP_SHARED here.  opts may be NULL.
 *   -EINVAL  opts->sz too small, buffer_kb above area_mb or below one
 *            sub-buffer (it is rounded up to two), area_mb too small
 *   -EMFILE  four areas exist in this process already
 *   -ENOMEM, or memfd_create/mmap's errno
 */
struct ukpev_area;
UKPEV_API int ukpev_area_create(const struct ukpev_area_opts *opts,
				struct ukpev_area **out);
/* The memfd (owned by the area: dup it to keep it). */
UKPEV_API int ukpev_area_fd(const struct ukpev_area *a);
/* Removes the area's events (ukpev_event_remove), unmaps, closes.
 * Close the readers made with ukpev_reader_from_area() first. */
UKPEV_API void ukpev_area_destroy(struct ukpev_area *a);
/*
 * The area's tracing_on: on 0, no event of it records (hits are counted,
 * triggers run); 1, they record again; -1 only asks.  Returns the
 * previous state, or -EINVAL.
 */
UKPEV_API int ukpev_area_tracing(struct ukpev_area *a, int on);
/*
 * Publishes the counters only the target sees (the engine's recursion
 * misses, kprobe nmissed and kretprobe nmissed) into the area for readers.
 * Call before a final read.
 */
UKPEV_API int ukpev_area_sync(struct ukpev_area *a);

/* ------------------------------------------------------------------ */
/* Events in this process                                              */

#define UKPEV_F_DISABLED	1	/* create it disabled (then enable
					   every event at once) */
#define UKPEV_F_STACKS		2	/* it will have stacktrace triggers or
					   a common_stacktrace hist key: its
					   handler walks stacks (so is never
					   lean: docs/events.md) */

/*
 * Parses definition, resolves its place and memory symbols in this
 * process, compiles its fetch program, registers its kprobe (kretprobe)
 * and publishes its description in the area.  Enabled unless
 * UKPEV_F_DISABLED.
 *   -EINVAL  bad definition (err: what and where), including an unknown
 *            symbol (UKPEV_E_UNKNOWN_SYMBOL) or object
 *            (UKPEV_E_UNKNOWN_OBJECT), a name already used in the area
 *            (UKPEV_E_EVENT_EXIST) or a place the engine refuses
 *            (UKPEV_E_BAD_INSN_BNDRY, UKPEV_E_FAIL_REG_PROBE: err->offset
 *            at PLACE)
 *   -ENOSPC  UKPEV_MAX_EVENTS already created in the area
 *   -ENOMEM, or register_kprobe()'s errno (err UKPEV_E_FAIL_REG_PROBE)
 */
struct ukpev_event;
UKPEV_API int ukpev_event_create(struct ukpev_area *a, const char *definition,
				 unsigned flags, struct ukpev_event **out,
				 struct ukpev_error *err);
/*
 * Sets (expr non-NULL, not "") or clears the event's filter.  The filter
 * runs in the probed thread before a record is committed: an event it
 * rejects takes no buffer space (it still counts as a hit).
 *   -EINVAL  bad expression (err: what and where in expr)
 */
UKPEV_API int ukpev_event_set_filter(struct ukpev_event *ev, const char *expr,
				     struct ukpev_error *err);
UKPEV_API int ukpev_event_enable(struct ukpev_event *ev);
UKPEV_API int ukpev_event_disable(struct ukpev_event *ev);
/*
 * The kernel's soft disable (a trigger's enable_event/disable_event): the
 * probe stays armed, its hits are counted and run its triggers, but
 * record only while soft-enabled (the default).  Cheap: a flag the hit
 * path reads.  Returns the previous state (1 enabled), or -EINVAL.
 */
UKPEV_API int ukpev_event_soft_enable(struct ukpev_event *ev, int on);
/*
 * Adds an event trigger (events.rst "Event triggers") that runs in the
 * probed thread at every hit of ev, whether it records or not:
 *   traceon | traceoff | enable_event:GRP:EVENT | disable_event:GRP:EVENT
 *   | stacktrace | hist:keys=...[:vals=...][:sort=...][:size=N][:name=H]
 * then optionally ":COUNT" (it fires COUNT times; not for hist) and
 * " if EXPR" (a filter of ev's fields, evaluated on the hit's values).
 * GRP:EVENT names an event of ev's area; removing that event removes the
 * trigger.  traceon and traceoff set the area's tracing
 * (ukpev_area_tracing()).  stacktrace writes, after the hit's record (or
 * alone when the event does not record), a UKPEV_EVENT_STACK record of
 * the probed code's return addresses.  hist aggregates the hit into a
 * table of the hit's thread (histogram.rst: keys with .hex .sym
 * .sym-offset .execname .log2 .buckets=N .usecs, common_pid,
 * common_timestamp, common_stacktrace), merged and printed by a reader
 * (ukpev_reader_hist_print()); it writes no record: an event whose only
 * purpose is a histogram is soft-disabled (ukpev_event_soft_enable()).
 *   -EINVAL  a bad trigger: err's offset into the text
 *   -ENOSPC  32 histograms in the area already
 *   -EOPNOTSUPP  a kernel trigger that has no meaning here (snapshot,
 *            enable_hist, disable_hist), or stacks on an event created
 *            without UKPEV_F_STACKS (UKPEV_E_TRIGGER_NO_STACKS)
 */
UKPEV_API int ukpev_event_add_trigger(struct ukpev_event *ev, const char *trigger,
				      struct ukpev_error *err);
/*
 * Checks a trigger against a definition's fields, as
 * ukpev_event_add_trigger() would (an enable_event's GRP:EVENT is not
 * looked up).  Returns 1 when the trigger walks stacks (its event then
 * needs UKPEV_F_STACKS), 0 when not, or a negative errno with err set.
 */
UKPEV_API int ukpev_trigger_check(const struct ukpev_def *d, const char *trigger,
				  struct ukpev_error *err);
/* Removes every trigger of ev. */
UKPEV_API void ukpev_event_clear_triggers(struct ukpev_event *ev);

/* Unregisters it (no handler of it runs once this returns) and frees it.
 * Its description stays in the area: records already written decode. */
UKPEV_API void ukpev_event_remove(struct ukpev_event *ev);
UKPEV_API const struct ukpev_event_info *ukpev_event_info(const struct ukpev_event *ev);
/* The event of the area named "GRP/EVENT" or "EVENT", or NULL. */
UKPEV_API struct ukpev_event *ukpev_event_find(struct ukpev_area *a, const char *name);

/*
 * on non-zero: the calling thread's hits of every event record nothing
 * and count nothing (neither hits nor misses), for the threads of a
 * tracer itself (an agent's thread arming probes on malloc, a reader
 * formatting records); 0: they record again.  Costs the hit path
 * nothing.  Returns whether the thread was muted.
 */
UKPEV_API int ukpev_thread_mute(int on);

/* ------------------------------------------------------------------ */
/* Reading: in this process or another                                 */

/* A record as delivered (the raw layout is in docs/events.md). */
#define UKPEV_EVENT_LOST	0xffffu	/* record.event of a lost marker */
#define UKPEV_EVENT_STACK	0xfffeu	/* record.event of a stacktrace
					   trigger's stack: payload_size / 8
					   addresses (uint64_t), innermost
					   first; stack_of the event it
					   follows */
struct ukpev_record {
	uint64_t ts_ns;		/* CLOCK_MONOTONIC, ns */
	pid_t pid, tid;		/* the thread that recorded it */
	unsigned cpu;
	unsigned event;		/* event id, or UKPEV_EVENT_LOST */
	uint64_t lost;		/* UKPEV_EVENT_LOST: events lost here (this
				   thread, between its previous record and
				   its next) */
	unsigned long ret_ip;	/* return probes: where the call returns
				   to (the real return address) */
	const void *payload;	/* the values, decoded by ukpev_format_*()
				   and ukpev_value_*() */
	unsigned payload_size;
	const char *comm;	/* the thread's name, as the reader last saw
				   it (at most a second old), or at its
				   first event if it is gone */
	unsigned stack_of;	/* UKPEV_EVENT_STACK: the event whose
				   trigger took it */
};

/*
 * Maps an area given its memfd (from ukpev_area_fd() in this process, or
 * received from another: /proc/PID/fd/N, SCM_RIGHTS) at any address.
 *   -EINVAL  not an area of this version; mmap's errno
 */
struct ukpev_reader;
UKPEV_API int ukpev_reader_open(int fd, struct ukpev_reader **out);
UKPEV_API int ukpev_reader_from_area(struct ukpev_area *a, struct ukpev_reader **out);
UKPEV_API void ukpev_reader_close(struct ukpev_reader *r);

/*
 * Delivers the records written since the last poll, at most max (0: no
 * limit), each once, thread by thread, each thread's in the order it
 * recorded them.  fn returning non-zero stops the poll there (that record
 * counts as delivered).  The record's memory is valid only during fn.
 * The sub-buffers read are handed back for reuse; a thread that has
 * exited (asked at most every 50 ms) and is drained gives back its
 * buffer, after a UKPEV_EVENT_LOST record of its last losses if it had
 * any.  One reader per area at a time drains it.  Returns the number of
 * records delivered.
 */
typedef int (*ukpev_record_fn)(const struct ukpev_record *rec, void *arg);
UKPEV_API int ukpev_reader_poll(struct ukpev_reader *r, ukpev_record_fn fn, void *arg,
				unsigned max);

/*
 * The last read of a trace: ukpev_reader_poll() until nothing is left,
 * then, for every thread whose latest events were lost (no record came
 * after them to carry a marker), a UKPEV_EVENT_LOST record with their
 * count.  (A thread that has exited gets that record from
 * ukpev_reader_poll() too, when its block is retired.)  Returns the
 * number of records delivered.
 */
UKPEV_API int ukpev_reader_flush(struct ukpev_reader *r, ukpev_record_fn fn, void *arg);

/* The description of event id, published by its creator, or NULL; valid
 * until the reader is closed. */
UKPEV_API const struct ukpev_event_info *ukpev_reader_event(struct ukpev_reader *r,
							    unsigned id);
/* One past the highest event id created so far. */
UKPEV_API unsigned ukpev_reader_nevents(struct ukpev_reader *r);

/* An object the target loaded (any time after its area was created):
 * what symbolises its addresses once the target is gone. */
struct ukpev_object {
	const char *path;	/* the file, symbolic links resolved */
	uint64_t lo, hi;	/* the addresses its PT_LOAD segments span */
	uint64_t bias;		/* address = bias + ELF vaddr */
};
/* The i-th object in load order: 0, or -ENOENT past the last. */
UKPEV_API int ukpev_reader_object(struct ukpev_reader *r, unsigned i, struct ukpev_object *o);

struct ukpev_stats {
	uint64_t hits;		/* probe hits (filtered out ones included) */
	uint64_t misses;	/* hits that recorded nothing: a full buffer
				   or recursion (uprobe_profile's misses) */
	uint64_t filtered;	/* hits a filter rejected */
	int arm_err;		/* a deferred event: why (UKPEV_E_*) its
				   last arming, when its object loaded,
				   failed (0: it did not) */
};
/* id's counters summed over every thread (recursion misses as of the
 * last ukpev_area_sync()). */
UKPEV_API int ukpev_reader_stats(struct ukpev_reader *r, unsigned id,
				 struct ukpev_stats *st);
/* Events lost to full buffers, all threads and events. */
UKPEV_API uint64_t ukpev_reader_lost(struct ukpev_reader *r);

/* ------------------------------------------------------------------ */
/* Decoding and formatting (any process)                               */

/*
 * Writes sym+0xOFF/0xSIZE for addr ("" when unknown: the value is then
 * printed 0x...).  Returns the length written, or a negative number.
 */
typedef int (*ukpev_symbolize_fn)(unsigned long addr, char *buf, size_t n, void *arg);
/* A symbolizer for this process's own addresses (ukprobes' symbol
 * tables): "malloc+0x0/0x1a0" (the object is not added). */
UKPEV_API int ukpev_symbolize_self(unsigned long addr, char *buf, size_t n, void *arg);

#define UKPEV_FMT_FTRACE	0	/* " size=24 p=0x55d0c0a012a0 s=\"x\"" */
#define UKPEV_FMT_JSON		1	/* "\"size\":24,\"p\":\"0x55d0..\",\"s\":\"x\"" */
/*
 * Formats every value of rec (an event described by ev): FTRACE, the
 * kernel's print forms, each as " NAME=VALUE"; JSON, the members of the
 * "args" object (no braces), u/s and bitfields as numbers, arrays as
 * arrays, strings as strings, everything else as in FTRACE but as a
 * string.  (fault) for values that could not be read.  sym may be NULL
 * (symbols then print as 0x...).  Like snprintf: the length it would have
 * written.
 */
UKPEV_API int ukpev_format_args(const struct ukpev_event_info *ev,
				const struct ukpev_record *rec, int format,
				char *buf, size_t n, ukpev_symbolize_fn sym, void *arg);

/*
 * One value, for a consumer that does its own formatting (hist keys,
 * filters of its own):
 *   ukpev_value_u64: element idx (0 unless an array) as a number,
 *     sign-extended for s types, a bitfield extracted;
 *   ukpev_value_str: a string's bytes (not NUL-terminated) and length.
 *   -EFAULT  the value could not be read in the target ((fault))
 *   -EINVAL  not that kind of value, or idx out of range
 */
UKPEV_API int ukpev_value_u64(const struct ukpev_event_info *ev, const struct ukpev_record *rec,
			      unsigned arg, unsigned idx, uint64_t *out);
UKPEV_API int ukpev_value_str(const struct ukpev_event_info *ev, const struct ukpev_record *rec,
			      unsigned arg, const char **s, size_t *len);
/* Element idx of a string[N] (pointers to strings); -EFAULT for one that
 * was unreadable.  ukpev_value_str() is element 0. */
UKPEV_API int ukpev_value_str_at(const struct ukpev_event_info *ev,
				 const struct ukpev_record *rec, unsigned arg, unsigned idx,
				 const char **s, size_t *len);

/* ------------------------------------------------------------------ */
/* Histograms                                                          */

/*
 * Histograms of hist triggers (histogram.rst), merged from every thread's
 * table at the call: ids 0 .. ukpev_reader_nhists() - 1, in the order
 * the triggers were added.  UKPEV_HIST_KERNEL writes the kernel's `hist`
 * file: "# event histogram", the trigger, one "{ KEYS } hitcount: N
 * VAL: M" line per entry in sort order, then Totals (Hits, Entries,
 * Dropped).  UKPEV_HIST_FOLDED writes each entry with a common_stacktrace
 * key as "outer;...;inner HITCOUNT" (function names, for flame graphs).
 * sym formats an address as %pS does ("sym+0xOFF/0xSIZE [object]", or ""
 * for none); .sym and folded stacks keep the name before '+'.
 * Returns the number of entries, or -EINVAL.  Safe to call while the
 * target runs (entries being added may or may not be counted).
 */
#define UKPEV_HIST_KERNEL	0
#define UKPEV_HIST_FOLDED	1
UKPEV_API unsigned ukpev_reader_nhists(struct ukpev_reader *r);
/* the event id the histogram belongs to, or -EINVAL */
UKPEV_API int ukpev_reader_hist_event(struct ukpev_reader *r, unsigned h);
UKPEV_API int ukpev_reader_hist_print(struct ukpev_reader *r, unsigned h, FILE *f, int format,
				      ukpev_symbolize_fn sym, void *arg);

#ifdef __cplusplus
}
#endif
#endif
