/* SPDX-License-Identifier: MIT */
/*
 * glibc's code that runs with every signal blocked, or with every handler
 * reset, all the time: one thread posix_spawnp()s /bin/true (its child
 * closes, opens and dup2s descriptors, searches PATH and execs; the
 * parent unmaps the child's stack with signals blocked) and checks each
 * status; the main thread starts detached threads that malloc and free
 * and exit (their exit frees and unmaps with signals blocked).  On 'q' it
 * prints "ok SPAWNS THREADS" or "error ...".
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static atomic_int stop;
static atomic_ulong spawns, threads, errors;
static char first_error[128];

static void fail(const char *what, int v)
{
	if (atomic_fetch_add(&errors, 1) == 0)
		snprintf(first_error, sizeof first_error, "%s %#x", what, v);
}

static void *work(void *a)
{
	char *p = malloc(256);
	if (!p)
		fail("malloc", 0);
	else
		memset(p, 1, 256);
	free(p);
	threads++;
	return a;
}

static void *spawner(void *a)
{
	while (!stop) {
		posix_spawn_file_actions_t fa;
		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_addclose(&fa, 0);
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
		posix_spawn_file_actions_adddup2(&fa, 0, 9);
		char *argv[] = { "true", NULL };
		pid_t c;
		int e = posix_spawnp(&c, "true", &fa, NULL, argv, environ);
		posix_spawn_file_actions_destroy(&fa);
		int st = 0;
		if (e)
			fail("posix_spawnp", e);
		else if (waitpid(c, &st, 0) != c || st != 0)
			fail("child status", st);
		spawns++;
	}
	return a;
}

int main(void)
{
	pthread_t t;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, NULL, spawner, NULL))
		return 1;
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (;;) {
		struct pollfd p = { 0, POLLIN, 0 };
		if (poll(&p, 1, 1) > 0)
			break;
		pthread_t d;
		if (pthread_create(&d, &at, work, NULL))
			fail("pthread_create", 0);
	}
	stop = 1;
	pthread_join(t, NULL);
	if (errors)
		printf("error: %lu, the first: %s\n", (unsigned long)errors, first_error);
	else
		printf("ok %lu %lu\n", (unsigned long)spawns, (unsigned long)threads);
	return 0;
}
