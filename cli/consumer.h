/* SPDX-License-Identifier: MIT */
#ifndef UKPROBE_CONSUMER_H
#define UKPROBE_CONSUMER_H
#include <stdint.h>
#include <ukprobes/events.h>
#include "cli.h"
#include "output.h"

struct held;
struct consumer {
	struct ukpev_reader *r;
	struct writer w;
	enum ukp_format format;
	struct held *h;
	size_t n, cap;
	uint64_t seq;
	uint64_t prev_start;	/* ns: records before it are all in */
	uint64_t written;
	struct { pid_t tid; uint64_t until; } mute[8];	/* the machinery's records */
	int nmute;
	pid_t last_tid, lost_tid;	/* placing lost markers */
	uint64_t last_ts;
	size_t lost_pending;
};

/* records of tid up to until_ns are left out (agent/proto.h UKPA_MUTE) */
void consumer_mute(struct consumer *c, pid_t tid, uint64_t until_ns);

void consumer_init(struct consumer *c, struct ukpev_reader *r, FILE *out,
		   struct symbolizer *sym, enum ukp_format format);
/* drains the buffers; writes, in timestamp order, the records older than
 * the previous drain's start (every record when final) */
void consumer_drain(struct consumer *c, int final);
void consumer_end(struct consumer *c);
#endif
