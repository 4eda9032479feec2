/* SPDX-License-Identifier: MIT */
#ifndef UKPROBE_CONSUMER_H
#define UKPROBE_CONSUMER_H
#include <pthread.h>
#include <stdint.h>
#include <ukprobes/events.h>
#include "cli.h"
#include "output.h"

struct chunk;
struct qrec;
struct fold { char *line; uint64_t count; };

struct consumer {
	struct ukpev_reader *r;
	struct writer w;
	enum ukp_format format;
	uint64_t written;
	struct { pid_t tid; uint64_t until; } mute[8];	/* the machinery's records */
	int nmute;

	/* the drainer thread: reads every buffer as fast as it fills */
	pthread_t drainer;
	int running;
	int flushed;		/* the last read (ukpev_reader_flush) done */
	volatile int stop;
	pthread_mutex_t mu;
	struct chunk *ready, **ready_tail;	/* drained, for the writer */
	uint64_t ready_round_start;		/* ns: the latest published round's start */
	struct chunk *cur, *round, **round_tail;	/* being filled (drainer only) */
	struct name *names, *last_name;	/* interned thread names */
	pid_t last_tid, lost_tid;
	uint64_t last_ts;
	struct qrec *lost_first;

	/* the writer's side: records held back until no older one can come */
	struct qrec **pend, **tmp;	/* tmp: the merge's other half */
	size_t npend, cap, start;
	/* written chunks kept for the drainer (under mu): fresh memory costs
	 * a page fault a page */
	struct chunk *spare;
	int nspare;
	/* --format=folded: stacks counted (open addressing) */
	struct fold *folds;
	size_t nfold, capfold;
};

void consumer_init(struct consumer *c, struct ukpev_reader *r, FILE *out,
		   struct symbolizer *sym, enum ukp_format format);
/* records of tid are left out (agent/proto.h UKPA_MUTE); before start */
void consumer_mute(struct consumer *c, pid_t tid, uint64_t until_ns);
/* starts the drainer thread */
void consumer_start(struct consumer *c);
/* writes, in timestamp order, the records drained so far that no older
 * record can still follow */
void consumer_drain(struct consumer *c, int final);
/* stops the drainer after a last full drain, writes everything */
void consumer_end(struct consumer *c);
#endif
