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
 *   writer_waits_for_a_reader_with_the_old_epoch   a reader inside, a
 *                         signal's hit nested in it and gone, its seq
 *                         stored again with the epoch it loaded before
 *                         the writer's: the writer still waits 200 ms
 *                         later; it returns once the reader leaves
 *   writer_is_done_with_a_reader_seen_at_a_later_entry  a reader inside
 *                         whose next entry the writer sees (nest 1, seq
 *                         the new epoch) without seeing the nest 0 in
 *                         between: the writer returns
 *   hit_paths_follow_the_flags  ukp_gp's low half is what a hand-written
 *                         lock stores (nest 1, in_handler 1), unless the
 *                         knob is off: kprobes_set_enabled sets and
 *                         clears UKP_GP_NOKNOB
 */
#include <pthread.h>
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
	ukp_read_lock(t);		/* a hit: nest 1, seq the epoch */
	UKT_EQ(t->nest, 1);
	UKT_EQ(atomic_load(&t->seq), e0);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, writer, NULL), 0);
	writer_still_waits();
	UKT_EQ(epoch(), e0 + 1);	/* moved on by the writer */
	ukp_read_lock(t);		/* a signal's hit: nest 2, seq alone */
	UKT_EQ(t->nest, 2);
	UKT_EQ(atomic_load(&t->seq), e0);
	ukp_read_unlock(t);		/* it leaves */
	writer_still_waits();		/* the outer reader is still in */
	/* the outer entry's seq store, of the epoch it loaded before the
	 * writer moved it on (a signal came between the load and the store) */
	atomic_store(&t->seq, e0);
	writer_still_waits();
	ukp_read_unlock(t);		/* and out */
	UKT_EQ(t->nest, 0);
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
	unsigned long lock = UKP_GP_LOCK;
	UKT_EQ(atomic_load(&ukp_gp) & 0xffffffffUL, lock);	/* membarrier here */
	UKT_EQ(kprobes_set_enabled(0), 0);
	UKT_EQ(atomic_load(&ukp_gp) & 0xffffffffUL, lock | UKP_GP_NOKNOB);
	UKT_EQ(kprobes_set_enabled(1), 0);
	UKT_EQ(atomic_load(&ukp_gp) & 0xffffffffUL, lock);
}
