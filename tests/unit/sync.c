/* SPDX-License-Identifier: MIT */
/*
 * The grace period (sync.c) against readers in the states the read lock
 * leaves them in: nest set, and seq the epoch of ukp_gp the outermost
 * entry loaded.  The writer moves the epoch on; a thread is done once it
 * is seen outside (nest 0) or at a later entry (seq at the new epoch).
 * The reader's states are set by hand here, on a thread of the test, as
 * the hit paths leave them.
 *
 * Cases:
 *   writer_waits_for_a_reader_with_the_old_epoch   a reader that set
 *                         nest (seq still an earlier entry's), a
 *                         signal's hit nested in it and gone, then its
 *                         seq store of the epoch it loaded before the
 *                         writer's: the writer still waits 200 ms later;
 *                         it returns once the reader leaves
 *   writer_waits_for_a_hit_back_from_the_programs_fault_handler  a hit,
 *                         a nested one whose handler faults; the
 *                         program's handler runs outside every lock
 *                         (ukp_read_leave) and takes a hit of its own
 *                         (the new epoch), then both hits go on
 *                         (ukp_read_back): the writer waits for the
 *                         outer one, which still reads its old list
 *   writer_is_done_with_a_reader_seen_at_a_later_entry  a reader inside
 *                         whose next entry the writer sees (nest 1, seq
 *                         the new epoch) without seeing the nest 0 in
 *                         between: the writer returns
 *   hit_paths_follow_the_flags  ukp_gp's low half is what a hand-written
 *                         lock stores (nest 1, in_handler 1), unless the
 *                         knob is off (kprobes_set_enabled sets and
 *                         clears UKP_GP_NOKNOB) or there is no membarrier
 *                         (UKP_GP_NOFAST)
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include "internal.h"
#include "ukt.h"

static atomic_int writer_done;

static void *writer(void *arg)
{
	(void)arg;
	ukp_synchronize();
	atomic_store(&writer_done, 1);
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static uint32_t epoch(void)
{
	return (uint32_t)(atomic_load(&ukp_gp) >> 32);
}

/* the writer has not returned in 200 ms */
static void writer_still_waits(void)
{
	sleep_ms(200);
	UKT_EQ(atomic_load(&writer_done), 0);
}

/* within 10 s */
static void writer_returns(pthread_t th)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	UKT_EQ(pthread_timedjoin_np(th, NULL, &ts), 0);
	UKT_EQ(atomic_load(&writer_done), 1);
}

UKT_CASE(writer_waits_for_a_reader_with_the_old_epoch)
{
	ukp_init_once();
	struct ukp_thread *t = ukp_thread_self();
	UKT_ASSERT(t);
	UKT_EQ(t->nest, 0);
	uint32_t e0 = epoch();
	atomic_store(&t->seq, e0 - 2);	/* an earlier entry's */
	t->nest = 1;			/* the C lock's first store */
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, writer, NULL), 0);
	writer_still_waits();
	UKT_EQ(epoch(), e0 + 1);	/* moved on by the writer */
	ukp_read_lock(t);		/* a signal's hit: nest 2, seq alone */
	UKT_EQ(t->nest, 2);
	UKT_EQ(atomic_load(&t->seq), e0 - 2);
	ukp_read_unlock(t);		/* it leaves */
	writer_still_waits();		/* the outer reader is still in */
	/* the outer lock's seq store, of the epoch it loaded before the
	 * writer moved it on (the signal came between the load and the
	 * store); its lists are the old ones */
	atomic_store(&t->seq, e0);
	writer_still_waits();
	ukp_read_unlock(t);		/* and out */
	UKT_EQ(t->nest, 0);
	writer_returns(th);
}

/* the reader of the case below: the steps the main thread waits for */
static atomic_int step;

static void wait_step(int s)
{
	while (atomic_load(&step) != s)
		sched_yield();
}

static void *fault_reader(void *arg)
{
	(void)arg;
	struct ukp_thread *t = ukp_thread_self();
	if (!t)
		return NULL;
	ukp_read_lock(t);		/* a hit: its lists, the old epoch */
	atomic_store(&step, 1);
	wait_step(2);			/* the writer has unlinked */
	ukp_read_lock(t);		/* a signal's hit, nested */
	/* its handler faults; the program's handler runs outside (trap.c:
	 * handler_fault_unhandled) and takes a hit of its own */
	struct ukp_read_saved rs = ukp_read_leave(t);
	ukp_read_lock(t);
	ukp_read_unlock(t);
	ukp_read_back(t, rs, 0);	/* the nested hit goes on, */
	ukp_read_unlock(t);		/* and leaves */
	atomic_store(&step, 3);		/* the outer hit is still in */
	wait_step(4);
	ukp_read_unlock(t);
	return NULL;
}

UKT_CASE(writer_waits_for_a_hit_back_from_the_programs_fault_handler)
{
	ukp_init_once();
	/* this thread's block comes first: the writer waits on it before
	 * it looks at the reader's */
	struct ukp_thread *me = ukp_thread_self();
	UKT_ASSERT(me);
	pthread_t rd, th;
	UKT_EQ(pthread_create(&rd, NULL, fault_reader, NULL), 0);
	wait_step(1);
	uint32_t e0 = epoch();
	ukp_read_lock(me);
	UKT_EQ(pthread_create(&th, NULL, writer, NULL), 0);
	writer_still_waits();		/* on this thread */
	UKT_EQ(epoch(), e0 + 1);
	atomic_store(&step, 2);
	wait_step(3);
	ukp_read_unlock(me);		/* the writer goes on to the reader */
	writer_still_waits();		/* whose outer hit is inside */
	atomic_store(&step, 4);
	UKT_EQ(pthread_join(rd, NULL), 0);
	writer_returns(th);
}

UKT_CASE(writer_is_done_with_a_reader_seen_at_a_later_entry)
{
	ukp_init_once();
	struct ukp_thread *t = ukp_thread_self();
	UKT_ASSERT(t);
	uint32_t e0 = epoch();
	ukp_read_lock(t);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, writer, NULL), 0);
	writer_still_waits();
	UKT_EQ(epoch(), e0 + 1);
	/* the reader left and came in again (its nest 0 unseen): the new
	 * entry loaded the new epoch, so it reads the new lists */
	atomic_store(&t->seq, epoch());
	writer_returns(th);
	UKT_EQ(t->nest, 1);
	ukp_read_unlock(t);
	UKT_EQ(t->nest, 0);
}

UKT_CASE(hit_paths_follow_the_flags)
{
	ukp_init_once();
	unsigned long lock = UKP_GP_LOCK | (ukp_fast_readers ? 0 : UKP_GP_NOFAST);
	UKT_EQ(atomic_load(&ukp_gp) & 0xffffffffUL, lock);
	UKT_EQ(kprobes_set_enabled(0), 0);
	UKT_EQ(atomic_load(&ukp_gp) & 0xffffffffUL, lock | UKP_GP_NOKNOB);
	UKT_EQ(kprobes_set_enabled(1), 0);
	UKT_EQ(atomic_load(&ukp_gp) & 0xffffffffUL, lock);
}
