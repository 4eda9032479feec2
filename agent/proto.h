/* SPDX-License-Identifier: MIT */
/*
 * The control channel between the ukprobe command and its agent in the
 * target: SOCK_SEQPACKET messages, each a struct ukpa_msg header followed
 * by its payload.  Launch: a socketpair end inherited by the target, its
 * number in UKPROBE_AGENT_FD.  Attach: the agent listens on the abstract
 * unix socket "\0ukprobe-agent-<pid>" for one command at a time, and on
 * "\0ukprobe-agent-<pid>-query" for short queries (`ukprobe list`,
 * `ukprobe knob`): the command sends one QUERY, the agent answers one
 * REPLY (err -ENOTCONN when no command is attached) and hangs up.
 */
#ifndef UKPROBE_AGENT_PROTO_H
#define UKPROBE_AGENT_PROTO_H

#include <stdint.h>

#define UKPA_ENV_FD	"UKPROBE_AGENT_FD"
#define UKPA_SONAME	"libukprobe-agent.so"
#define UKPA_QUERY_SUFFIX "-query"	/* the query socket: "\0ukprobe-agent-<pid>-query" */
/* 3: MUTE answers GO once every probe is optimised, attach too (the
 * command holds the program until then): an older agent does not */
#define UKPA_VERSION	3
#define UKPA_MAX_MSG	(1u << 20)

enum ukpa_type {
	/* agent -> command */
	UKPA_HELLO = 1,		/* payload: struct ukpa_hello */
	UKPA_ERROR,		/* payload: struct ukpa_error + message text */
	UKPA_ARMED,		/* every event created; the record area's fd attached */
	UKPA_BUSY,		/* another ukprobe is attached */
	UKPA_STOPPED,		/* every probe removed: no handler runs any more */
	UKPA_MUTE,		/* payload: struct ukpa_mute[]: records that are
				   the machinery's own (the agent arming, the
				   engine's optimizer thread), to leave out */
	/* command -> agent */
	UKPA_DEFINE = 16,	/* payload: struct ukpa_define + strings */
	UKPA_GO,		/* launch: let main run */
	UKPA_STOP,		/* attach: remove every probe, stay loaded */
	/* on the query socket (`ukprobe list`, `ukprobe knob`) */
	UKPA_QUERY = 48,	/* command -> agent: struct ukpa_query */
	UKPA_REPLY,		/* agent -> command: struct ukpa_reply + text */
};

struct ukpa_msg {
	uint32_t type;
	uint32_t len;		/* payload bytes after this header */
};

struct ukpa_hello {
	uint32_t version;
	int32_t pid;
};

/* definitions, then filters, then triggers, each a NUL-terminated
 * string, in order */
struct ukpa_define {
	uint32_t buffer_kb;
	uint32_t ndefs;
	uint32_t nfilters;
	uint32_t flags;
	uint32_t ntriggers;	/* EVENT:COMMAND each */
	uint32_t pad;
};

/* what failed: index into the definitions (kind 0), filters (kind 1) or
 * triggers (kind 3; kind 2: the area),
 * the byte offset of the offending word, then the message text */
struct ukpa_error {
	uint32_t kind;
	uint32_t index;
	int32_t offset;
	int32_t err;
};

/* records of thread tid are the agent's or the engine's own work, not
 * the program's (until_ns: ~0, every one) */
struct ukpa_mute {
	int32_t tid;
	uint32_t pad;
	uint64_t until_ns;
};

/* what a QUERY asks */
enum ukpa_query_op {
	UKPA_Q_LIST = 1,	/* the reply's text: kprobes_list() */
	UKPA_Q_ENABLED,		/* kprobes_set_enabled(value) (debugfs kprobes/enabled) */
	UKPA_Q_OPTIMIZATION,	/* kprobes_set_optimization(value) (debug.kprobes_optimization) */
};

struct ukpa_query {
	uint32_t op;		/* enum ukpa_query_op */
	int32_t value;		/* 0 or 1; -1: only ask */
};

/* err: 0 or a negative errno; the two knobs as they are after the query */
struct ukpa_reply {
	int32_t err;
	int32_t enabled;
	int32_t optimization;
	uint32_t pad;
};

#endif
