/* SPDX-License-Identifier: MIT */
/*
 * The grace period (sync.c) against a reader caught between its two
 * stores: a hit sets nest, then makes seq odd, and on leaving clears nest,
 * then makes seq even.  A signal that comes in between and hits a probe
 * reads a probe list while seq is even; ukp_synchronize must wait for it
 * all the same.  The reader's states are set by hand here, on a thread of
 * the test, as the hit path leaves them at those instructions.
 *
 * Cases:
 *   writer_waits_for_a_hit_inside_the_lock_window   nest 1 and a nested
 *                         hit's nest 2, seq still even: the writer is
 *                         still waiting 200 ms later; it returns once
 *                         the outer lock makes seq odd
 *   writer_waits_for_a_hit_inside_the_unlock_window nest 0, seq odd, then
 *                         a nested hit makes it even (nest 1): the
 *                         writer waits; when that hit leaves and the
 *                         outer unlock puts seq back to the value the
 *                         writer saw, it returns (nest 0)
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

/* the writer has not returned in 200 ms */
static void writer_still_waits(void)
{
	sleep_ms(200);
	UKT_EQ(atomic_load(&writer_done), 0);
}

static void writer_returns(pthread_t th)
{
	UKT_EQ(pthread_join(th, NULL), 0);
	UKT_EQ(atomic_load(&writer_done), 1);
}

UKT_CASE(writer_waits_for_a_hit_inside_the_lock_window)
{
	ukp_init_once();
	struct ukp_thread *t = ukp_thread_self();
	UKT_ASSERT(t);
	UKT_EQ(t->nest, 0);
	UKT_EQ(atomic_load(&t->seq) & 1, 0);
	t->nest = 1;			/* the outer lock's first store */
	ukp_read_lock(t);		/* a signal's hit: nest 2, seq alone */
	UKT_EQ(t->nest, 2);
	UKT_EQ(atomic_load(&t->seq) & 1, 0);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, writer, NULL), 0);
	writer_still_waits();
	ukp_read_unlock(t);		/* the signal's hit leaves */
	writer_still_waits();		/* the outer reader is still in */
	atomic_store(&t->seq, atomic_load(&t->seq) + 1);	/* its second store */
	writer_returns(th);
	ukp_read_unlock(t);		/* and out */
	UKT_EQ(t->nest, 0);
	UKT_EQ(atomic_load(&t->seq) & 1, 0);
}

UKT_CASE(writer_waits_for_a_hit_inside_the_unlock_window)
{
	ukp_init_once();
	struct ukp_thread *t = ukp_thread_self();
	UKT_ASSERT(t);
	ukp_read_lock(t);		/* a hit: nest 1, seq odd */
	unsigned long odd = atomic_load(&t->seq);
	UKT_EQ(odd & 1, 1);
	t->nest = 0;			/* its unlock's first store */
	ukp_read_lock(t);		/* a signal's hit: nest 1, seq even */
	UKT_EQ(atomic_load(&t->seq), odd + 1);
	pthread_t th;
	UKT_EQ(pthread_create(&th, NULL, writer, NULL), 0);
	writer_still_waits();
	ukp_read_unlock(t);		/* it leaves: seq odd + 2 */
	/* the outer unlock's second store, from the seq it read before the
	 * signal: even, and the value the writer may have seen */
	atomic_store(&t->seq, odd + 1);
	writer_returns(th);
	UKT_EQ(t->nest, 0);
}
