/* SPDX-License-Identifier: MIT */
/* The ukprobe command: what its files share. */
#ifndef UKPROBE_CLI_H
#define UKPROBE_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define UKP_DEFAULT_BUFFER_KB 65536	/* sparse: used only as it fills */

enum ukp_format { FMT_FTRACE, FMT_JSON, FMT_FOLDED };

struct trace_opts {
	pid_t pid;			/* -p: attach; 0: launch */
	double duration;		/* -d: seconds, 0 = until the end */
	const char *output;		/* -o */
	const char *exec;		/* -x: the object of source-level defs */
	unsigned buffer_kb;		/* -b */
	int profile;			/* --profile */
	enum ukp_format format;		/* --format */
	const char **defs;		/* DEFINITION... */
	int ndefs;
	const char **filters;		/* --filter=EVENT:EXPR, as given */
	int nfilters;
	const char **triggers;		/* --trigger=EVENT:COMMAND, as given */
	int ntriggers;
	char **command;			/* after --: launch */
};

/* main.c */
extern const char *ukp_prog;
void ukp_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* the kernel's error-log form: message, Command: line, caret */
void ukp_error_log(const char *msg, const char *cmd, int offset);
/* the agent library beside the command (build tree or installed) */
const char *ukp_agent_path(void);

/* trace.c */
int cmd_trace(int argc, char **argv);

/* probe.c: `ukprobe probe`, and the error-log form of a DWARF error */
int cmd_probe(int argc, char **argv);
struct dw_error;
void ukp_dwarf_error(const char *text, const struct dw_error *e);
/* a note from the DWARF translation, on stderr */
void ukp_dwarf_note(const char *msg);
/* the offset of a definition's PLACE (its second word) */
int dw_place_offset(const char *def);

/* knob.c: `ukprobe list` and `ukprobe knob` */
int cmd_list(int argc, char **argv);
int cmd_knob(int argc, char **argv);

/* launch.c: returns the fd of the control channel, child pid in *child */
int launch_start(char **argv, int *ctl_fd, pid_t *child);

/* attach.c: loads the agent (unless loaded) and connects; 0 or exit code
 * (1) with the one-line error already printed */
int attach_connect(pid_t pid, int *ctl_fd);
/* every thread of pid but the agent's stopped (ptrace) until released,
 * as far as they can be; 0, or a negative errno when nothing is held */
struct hold {
	pid_t pid;	/* the holder process */
	int fd;
};
int attach_hold(pid_t pid, struct hold *h);
void attach_release(struct hold *h);
/* chan_send of type with the program pid held, then chan_recv of the
 * answer, letting go of the program once it came (or after at most 2 s);
 * chan_recv's result, or -2 when the message could not be sent */
int held_exchange(pid_t pid, int fd, uint32_t type, const void *p, size_t n,
		  void **pl, uint32_t *len, int *pf, int timeout_ms);

/* channel.c */
int chan_send(int fd, uint32_t type, const void *p1, size_t n1,
	      const void *p2, size_t n2);
/* receives one message; payload malloc'd into *payload (NUL-terminated),
 * a passed fd into *passfd (or -1); returns the type or -1 */
int chan_recv(int fd, void **payload, uint32_t *len, int *passfd, int timeout_ms);

#endif
