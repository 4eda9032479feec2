/* SPDX-License-Identifier: MIT */
/*
 * The ukprobe agent: the library the command loads into its target
 * (preloaded at launch, dlopen'ed by a remote call at attach).  It creates
 * the events through the events core, in the target, and hands the
 * command the shared record area's memfd over the control channel
 * (proto.h).
 *
 * Launch: the constructor finds UKPROBE_AGENT_FD, takes its own variables
 * out of the environment (programs the target execs run untraced), serves
 * the command until "go", and only then lets the program reach main.
 * Attach: the constructor starts one thread that listens on the abstract
 * socket "\0ukprobe-agent-<pid>" and serves one command at a time; when
 * that command stops (or goes away) every event is removed and the agent
 * stays loaded, idle, for the next attach.
 */
#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#include <ukprobes.h>
#include <ukprobes/events.h>
#include "proto.h"

#define AGENT_API __attribute__((visibility("default")))

struct session {
	int fd;
	struct ukpev_area *area;
	struct ukpev_event **ev;
	unsigned nev;
	/* the knobs as the session found them, put back at its end when a
	 * `ukprobe knob` changed them */
	int knobs_set, enabled0, optimization0;
};

static int send_msg(int fd, uint32_t type, const void *p, size_t n,
		    const void *p2, size_t n2, int passfd)
{
	struct ukpa_msg h = { type, (uint32_t)(n + n2) };
	struct iovec iov[3] = { { &h, sizeof h }, { (void *)p, n }, { (void *)p2, n2 } };
	union {
		struct cmsghdr c;
		char b[CMSG_SPACE(sizeof(int))];
	} cb;
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 3 };
	if (passfd >= 0) {
		memset(&cb, 0, sizeof cb);
		m.msg_control = cb.b;
		m.msg_controllen = sizeof cb.b;
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &passfd, sizeof passfd);
	}
	ssize_t r;
	do
		r = sendmsg(fd, &m, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -1 : 0;
}

/* one message into buf (at most cap bytes of payload): its type, or -1 */
static int recv_msg(int fd, char *buf, size_t cap, uint32_t *len)
{
	struct ukpa_msg h;
	struct iovec iov[2] = { { &h, sizeof h }, { buf, cap } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
	ssize_t r;
	do
		r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r < (ssize_t)sizeof h || h.len != (size_t)r - sizeof h)
		return -1;
	*len = h.len;
	return (int)h.type;
}

static void send_error(int fd, unsigned kind, unsigned index,
		       const struct ukpev_error *e, int err)
{
	struct ukpa_error pe = { kind, index, e->offset, err };
	const char *msg = e->code ? ukpev_strerror(e->code) : strerror(-err);
	send_msg(fd, UKPA_ERROR, &pe, sizeof pe, msg, strlen(msg) + 1, -1);
}

static void session_end(struct session *s)
{
	/* the area's destruction removes every event: no handler of them
	 * runs once it returns */
	if (s->area) {
		ukpev_area_sync(s->area);
		ukpev_area_destroy(s->area);
	}
	free(s->ev);
	s->area = NULL;
	s->ev = NULL;
	s->nev = 0;
	if (s->knobs_set) {
		if (kprobes_get_optimization() != s->optimization0)
			kprobes_set_optimization(s->optimization0);
		if (kprobes_get_enabled() != s->enabled0)
			kprobes_set_enabled(s->enabled0);
		s->knobs_set = 0;
	}
}

/* "EVENT:..." or "GRP/EVENT:..." names the event of definition def */
static int name_matches(const char *spec, const char *def)
{
	struct ukpev_def *pd;
	struct ukpev_error pe;
	const char *colon = strchr(spec, ':');
	if (!colon || ukpev_def_parse(def, &pd, &pe) < 0)
		return 0;
	const struct ukpev_event_info *in = ukpev_def_info(pd);
	size_t nl = (size_t)(colon - spec), gl = strlen(in->group), el = strlen(in->event);
	int m = (nl == el && !strncmp(spec, in->event, el)) ||
		(nl == gl + 1 + el && !strncmp(spec, in->group, gl) && spec[gl] == '/' &&
		 !strncmp(spec + gl + 1, in->event, el));
	ukpev_def_free(pd);
	return m;
}

/*
 * DEFINE: every definition created (disabled), every filter set, then all
 * enabled at once.  Replies ARMED with the area's memfd, or ERROR (and
 * nothing stays armed).
 */
static int define(struct session *s, const char *buf, uint32_t len)
{
	struct ukpa_define d;
	if (len < sizeof d)
		return -1;
	memcpy(&d, buf, sizeof d);
	const char *p = buf + sizeof d, *end = buf + len;
	unsigned nstr = d.ndefs + d.nfilters + d.ntriggers;
	const char **defs = calloc(nstr + 1, sizeof *defs);
	bool *stacks = calloc(d.ndefs + 1, sizeof *stacks);
	s->ev = calloc(d.ndefs + 1, sizeof *s->ev);
	if (!defs || !s->ev || !stacks) {
		free(defs);
		free(stacks);
		return -1;
	}
	for (unsigned k = 0; k < nstr; k++) {
		const char *z = memchr(p, 0, (size_t)(end - p));
		if (!z) {
			free(defs);
			free(stacks);
			return -1;
		}
		defs[k] = p;
		p = z + 1;
	}
	const char **trig = defs + d.ndefs + d.nfilters;
	/* events whose triggers walk stacks get a handler that can */
	for (unsigned k = 0; k < d.ntriggers; k++)
		for (unsigned j = 0; j < d.ndefs; j++) {
			struct ukpev_def *pd;
			struct ukpev_error pe;
			if (!name_matches(trig[k], defs[j]) || ukpev_def_parse(defs[j], &pd, &pe) < 0)
				continue;
			if (ukpev_trigger_check(pd, strchr(trig[k], ':') + 1, &pe) == 1)
				stacks[j] = true;
			ukpev_def_free(pd);
		}
	struct ukpev_area_opts o = { sizeof o, d.buffer_kb, 0 };
	struct ukpev_error e = { 0, 0 };
	int r = ukpev_area_create(&o, &s->area);
	if (r < 0) {
		send_error(s->fd, 2, 0, &e, r);
		goto fail;
	}
	for (unsigned k = 0; k < d.ndefs; k++) {
		r = ukpev_event_create(s->area, defs[k],
				       UKPEV_F_DISABLED | (stacks[k] ? UKPEV_F_STACKS : 0), &s->ev[k], &e);
		if (r < 0) {
			send_error(s->fd, 0, k, &e, r);
			goto fail;
		}
		s->nev++;
	}
	for (unsigned k = 0; k < d.nfilters; k++) {
		const char *f = defs[d.ndefs + k];
		const char *colon = strchr(f, ':');
		char name[2 * UKPEV_NAME_MAX + 2];
		size_t nl = colon ? (size_t)(colon - f) : 0;
		if (!colon || nl >= sizeof name) {
			e = (struct ukpev_error){ UKPEV_E_FILTER_NO_EVENT, 0 };
			send_error(s->fd, 1, k, &e, -EINVAL);
			goto fail;
		}
		memcpy(name, f, nl);
		name[nl] = 0;
		/* every event of that name (GRP/EVENT or EVENT) */
		int found = 0;
		for (unsigned j = 0; j < s->nev; j++) {
			const struct ukpev_event_info *in = ukpev_event_info(s->ev[j]);
			char full[2 * UKPEV_NAME_MAX + 2];
			snprintf(full, sizeof full, "%s/%s", in->group, in->event);
			if (strcmp(name, in->event) && strcmp(name, full))
				continue;
			found = 1;
			r = ukpev_event_set_filter(s->ev[j], colon + 1, &e);
			if (r < 0) {
				/* the offset is into EXPR, as the command shows it */
				send_error(s->fd, 1, k, &e, r);
				goto fail;
			}
		}
		if (!found) {
			e = (struct ukpev_error){ UKPEV_E_FILTER_NO_EVENT, 0 };
			send_error(s->fd, 1, k, &e, -EINVAL);
			goto fail;
		}
	}
	for (unsigned k = 0; k < d.ntriggers; k++) {
		const char *cmd = strchr(trig[k], ':') + 1;
		int found = 0;
		for (unsigned j = 0; j < s->nev; j++) {
			if (!name_matches(trig[k], defs[j]))
				continue;
			found = 1;
			r = ukpev_event_add_trigger(s->ev[j], cmd, &e);
			if (r < 0) {
				send_error(s->fd, 3, k, &e, r);
				goto fail;
			}
		}
		if (!found) {
			e = (struct ukpev_error){ UKPEV_E_FILTER_NO_EVENT, 0 };
			send_error(s->fd, 3, k, &e, -EINVAL);
			goto fail;
		}
	}
	free(defs);
	free(stacks);
	return send_msg(s->fd, UKPA_ARMED, NULL, 0, NULL, 0, ukpev_area_fd(s->area));
fail:
	free(defs);
	free(stacks);
	session_end(s);
	return 1;
}

/*
 * Every event on at once: with kprobes disarmed globally while they are
 * enabled one by one, the engine's own calls in between (it allocates
 * as it arms) hit none of them; the rearming writes every probe in one
 * batch.
 */
static void enable_all(struct session *s)
{
	int was = kprobes_get_enabled();
	if (was)
		kprobes_set_enabled(0);
	for (unsigned k = 0; k < s->nev; k++)
		ukpev_event_enable(s->ev[k]);
	if (was)
		kprobes_set_enabled(1);
}

/*
 * Tells the command which records are the machinery's: those of the
 * thread that arms (the agent's own) and of the engine's optimizer
 * thread.
 */
static void send_mute(int fd)
{
	struct ukpa_mute m[8];
	int n = 0;
	m[n++] = (struct ukpa_mute){ (int32_t)syscall(SYS_gettid), 0, ~0ull };
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	while (d && (e = readdir(d)) && n < 8) {
		char fn[300], comm[32] = "";
		snprintf(fn, sizeof fn, "/proc/self/task/%s/comm", e->d_name);
		int f = open(fn, O_RDONLY | O_CLOEXEC);
		if (f < 0)
			continue;
		ssize_t r = read(f, comm, sizeof comm - 1);
		close(f);
		if (r > 0 && !strncmp(comm, "kprobe-optimize", 15))
			m[n++] = (struct ukpa_mute){ atoi(e->d_name), 0, ~0ull };
	}
	if (d)
		closedir(d);
	send_msg(fd, UKPA_MUTE, m, (size_t)n * sizeof *m, NULL, 0, -1);
}

static int hello(int fd)
{
	struct ukpa_hello h = { UKPA_VERSION, getpid() };
	return send_msg(fd, UKPA_HELLO, &h, sizeof h, NULL, 0, -1);
}

/* ---- launch -------------------------------------------------------- */

static struct ukpev_area *launch_area;

static void at_exit_sync(void)
{
	if (launch_area)
		ukpev_area_sync(launch_area);
}

/*
 * LD_PRELOAD without this library, and no UKPROBE_AGENT_FD: what programs
 * it execs see.  Edited in environ itself, in place, with no call: a
 * program may define its own getenv/setenv/unsetenv (bash does, over its
 * shell variables, which it has not read from environ yet when this
 * runs), and the edit must reach what it reads at main.
 */
extern char **environ;

static char **env_entry(const char *name)
{
	size_t n = strlen(name);
	for (char **e = environ; e && *e; e++)
		if (!strncmp(*e, name, n) && (*e)[n] == '=')
			return e;
	return NULL;
}

static void env_drop(char **e)
{
	for (; *e; e++)
		e[0] = e[1];
}

static void clean_env(void)
{
	char **e = env_entry(UKPA_ENV_FD);
	if (e)
		env_drop(e);
	e = env_entry("LD_PRELOAD");
	if (!e)
		return;
	/* the words but ours, written back over the value (never longer) */
	char *v = *e + strlen("LD_PRELOAD="), *out = v;
	for (char *w = v; *w;) {
		size_t len = strcspn(w, ": ");
		const char *base = w;
		for (size_t k = 0; k < len; k++)
			if (w[k] == '/')
				base = w + k + 1;
		bool ours = len && (size_t)(w + len - base) == strlen(UKPA_SONAME) &&
			    !strncmp(base, UKPA_SONAME, strlen(UKPA_SONAME));
		if (len && !ours) {
			if (out != v)
				*out++ = ':';
			memmove(out, w, len);
			out += len;
		}
		w += len;
		while (*w == ':' || *w == ' ')
			w++;
	}
	*out = 0;
	if (out == v)
		env_drop(e);
}

/*
 * The arming runs on a thread of its own while the program's main thread
 * waits for it in the constructor: every record the engine's work makes
 * (it allocates as it arms) carries that thread's id, which the command
 * leaves out.
 */
static struct session launch_session;

static void *launch_thread(void *arg)
{
	static char buf[UKPA_MAX_MSG];
	int fd = (int)(long)arg;
	uint32_t len;
	launch_session.fd = fd;
	/* what this thread makes the engine do (it allocates as it arms)
	 * records nothing */
	ukpev_thread_mute(1);
	if (hello(fd) < 0)
		return NULL;
	for (;;) {
		int t = recv_msg(fd, buf, sizeof buf, &len);
		if (t == UKPA_DEFINE) {
			if (define(&launch_session, buf, len) != 0)
				break;	/* refused: the command kills us */
			continue;
		}
		if (t == UKPA_GO) {
			launch_area = launch_session.area;
			enable_all(&launch_session);
			/* every probe a jump before main runs (a breakpoint
			 * would kill a thread of the program that blocks
			 * SIGTRAP) */
			wait_for_kprobe_optimizer();
			send_mute(fd);
			return (void *)1;
		}
		break;
	}
	return NULL;
}

static int listen_abstract(const char *name);
static void spawn_listener(void *arg);
static int listen_fd = -1;	/* sessions: "\0ukprobe-agent-<pid>" */
static int query_fd = -1;	/* queries: "\0ukprobe-agent-<pid>-query" */

/* a fork child of a launched program is traced on, with no thread to
 * answer queries: it does not keep its parent's socket */
static void launch_fork_child(void)
{
	if (query_fd >= 0)
		close(query_fd);
	query_fd = -1;
}

static void launch(int fd)
{
	/* `ukprobe list` and `knob` on the launched program, as at attach;
	 * set up before the events are armed: after, the calls it makes
	 * (getpid, socket, pthread_create...) would be events of the
	 * program's */
	char name[64];
	snprintf(name, sizeof name, "ukprobe-agent-%d" UKPA_QUERY_SUFFIX, (int)getpid());
	query_fd = listen_abstract(name);
	if (query_fd >= 0) {
		pthread_atfork(NULL, NULL, launch_fork_child);
		spawn_listener(&launch_session);
	}
	atexit(at_exit_sync);
	pthread_t t;
	void *ok = NULL;
	if (pthread_create(&t, NULL, launch_thread, (void *)(long)fd) != 0 ||
	    pthread_join(t, &ok) != 0 || !ok)
		_exit(127);	/* the command went away or refused: never run main */
}

/* ---- attach --------------------------------------------------------- */

static int peer_allowed(int c);

/*
 * Attach: a child the program forks while a command is attached inherits
 * the probes, but no agent thread, and no command will ever stop it: it
 * removes them at once and runs untraced, as without tracing.  (Launch
 * is different: there children are traced, until they end.)
 */
static struct ukpev_area *attach_area;
static int atfork_set;

static void attach_fork_child(void)
{
	struct ukpev_area *a = attach_area;
	attach_area = NULL;
	if (a)
		ukpev_area_destroy(a);
}

/*
 * A QUERY on a side connection (`ukprobe list`, `ukprobe knob`): the
 * kprobes list, or a knob set, answered with a REPLY.  The knobs are the
 * process's; the session puts back what it found when it ends.
 */
static void query(struct session *s, int c, const char *buf, uint32_t len)
{
	struct ukpa_query q;
	struct ukpa_reply rep = { 0, 0, 0, 0 };
	char *text = NULL;
	size_t tlen = 0;
	if (len < sizeof q) {
		rep.err = -EINVAL;
	} else {
		memcpy(&q, buf, sizeof q);
		if ((q.op == UKPA_Q_ENABLED || q.op == UKPA_Q_OPTIMIZATION) &&
		    q.value >= 0 && !s->knobs_set) {
			s->knobs_set = 1;
			s->enabled0 = kprobes_get_enabled();
			s->optimization0 = kprobes_get_optimization();
		}
		if (q.op == UKPA_Q_LIST) {
			FILE *f = open_memstream(&text, &tlen);
			rep.err = f ? kprobes_list(f) : -ENOMEM;
			if (f)
				fclose(f);
		} else if (q.op == UKPA_Q_ENABLED || q.op == UKPA_Q_OPTIMIZATION) {
			if (q.value >= 0) {
				rep.err = q.op == UKPA_Q_ENABLED ? kprobes_set_enabled(q.value > 0)
								 : kprobes_set_optimization(q.value > 0);
				/* (re)optimisation done: a list made after the
				 * reply shows the result, not a queue */
				wait_for_kprobe_optimizer();
			}
		} else {
			rep.err = -EINVAL;
		}
	}
	rep.enabled = kprobes_get_enabled();
	rep.optimization = kprobes_get_optimization();
	/* one message: at most UKPA_MAX_MSG */
	if (tlen > UKPA_MAX_MSG - sizeof rep - 1)
		tlen = UKPA_MAX_MSG - sizeof rep - 1;
	send_msg(c, UKPA_REPLY, &rep, sizeof rep, text ? text : "", text ? tlen : 0, -1);
	free(text);
}

#define SIDE_MAX	4	/* query connections open at once */
#define SIDE_MS		5000	/* one that sends nothing is hung up on */

/* one message from the command of session s: 0, or -1 when it is gone */
static int session_msg(struct session *s)
{
	static char buf[UKPA_MAX_MSG];
	uint32_t len;
	int t = recv_msg(s->fd, buf, sizeof buf, &len);
	if (t == UKPA_DEFINE && !s->area) {
		if (define(s, buf, len) < 0)
			return -1;
	} else if (t == UKPA_GO && s->area) {
		/* after the engine's own fork handlers (registered at its
		 * first registration): it is consistent in the child when
		 * ours runs */
		if (!atfork_set)
			atfork_set = pthread_atfork(NULL, NULL, attach_fork_child) == 0;
		attach_area = s->area;
		enable_all(s);
		/* every probe a jump before the command lets the program's
		 * threads run on (it holds them: a breakpoint would kill one
		 * that blocks SIGTRAP) */
		wait_for_kprobe_optimizer();
		send_mute(s->fd);
	} else if (t == UKPA_STOP) {
		/* the events off in this process first: a child forked from
		 * then on inherits them off, one forked before lets go of the
		 * area in its fork handler (a fork between letting go and the
		 * area's end recorded a child's event) */
		for (unsigned k = 0; k < s->nev; k++)
			ukpev_event_disable(s->ev[k]);
		attach_area = NULL;
		session_end(s);
		send_msg(s->fd, UKPA_STOPPED, NULL, 0, NULL, 0, -1);
		return -1;	/* over: a query after it finds nothing attached */
	} else {
		return -1;	/* the command is gone: remove everything */
	}
	return 0;
}

/*
 * The agent's thread: one command at a time on the session socket (a
 * second one is told BUSY), and any number of short QUERY connections
 * on the query socket (`ukprobe list`, `ukprobe knob`), answered only
 * while a command is attached.  Apart, so that a list never makes a
 * trace that connects at the same moment find the agent busy.
 */
static void *listener(void *arg)
{
	static char buf[4096];
	/* launch: queries about the launch's session, which this thread
	 * neither reads nor ends (and no session socket) */
	struct session *launched = arg;
	struct session own = { .fd = -1 }, *s = launched ? launched : &own;
	struct { int fd; struct timespec t; } side[SIDE_MAX];
	int nside = 0;
	uint32_t len;
	ukpev_thread_mute(1);	/* its calls into probed functions record nothing */
	for (;;) {
		struct pollfd p[3 + SIDE_MAX] = { { listen_fd, POLLIN, 0 }, { query_fd, POLLIN, 0 },
						  { launched ? -1 : s->fd, POLLIN, 0 } };
		for (int k = 0; k < nside; k++)
			p[3 + k] = (struct pollfd){ side[k].fd, POLLIN, 0 };
		if (poll(p, (nfds_t)(3 + nside), nside ? 500 : -1) < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		for (int k = nside - 1; k >= 0; k--) {
			long ms = (now.tv_sec - side[k].t.tv_sec) * 1000 +
				  (now.tv_nsec - side[k].t.tv_nsec) / 1000000;
			if (!p[3 + k].revents && ms < SIDE_MS)
				continue;
			if ((p[3 + k].revents & POLLIN) &&
			    recv_msg(side[k].fd, buf, sizeof buf, &len) == UKPA_QUERY) {
				if (launched || s->fd >= 0) {
					query(s, side[k].fd, buf, len);
				} else {
					struct ukpa_reply rep = { -ENOTCONN, kprobes_get_enabled(),
								  kprobes_get_optimization(), 0 };
					send_msg(side[k].fd, UKPA_REPLY, &rep, sizeof rep, NULL, 0, -1);
				}
			}
			close(side[k].fd);
			side[k] = side[--nside];
		}
		if (p[1].revents & POLLIN) {
			int c = accept4(query_fd, NULL, NULL, SOCK_CLOEXEC);
			if (c >= 0) {
				if (peer_allowed(c) && nside < SIDE_MAX) {
					side[nside].fd = c;
					side[nside++].t = now;
				} else {
					close(c);
				}
			}
		}
		if (p[0].revents & POLLIN) {
			int c = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
			if (c >= 0 && !peer_allowed(c)) {
				close(c);
			} else if (c >= 0 && s->fd >= 0) {
				/* another command meanwhile: told it is busy */
				send_msg(c, UKPA_BUSY, NULL, 0, NULL, 0, -1);
				close(c);
			} else if (c >= 0) {
				s->fd = c;
				if (hello(c) < 0) {
					close(c);
					s->fd = -1;
				}
			}
		}
		if (!launched && s->fd >= 0 && p[2].revents && p[2].fd == s->fd &&
		    session_msg(s) < 0) {
			attach_area = NULL;
			session_end(s);
			close(s->fd);
			s->fd = -1;
		}
	}
}

/*
 * An abstract socket has no file permissions: anyone on the machine can
 * connect.  Only root and this process's own user may arm probes in it
 * (they read its memory), as only they may ptrace it.
 */
static int peer_allowed(int c)
{
	struct ucred cr;
	socklen_t len = sizeof cr;
	if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return 0;
	return cr.uid == 0 || cr.uid == geteuid();
}

/* a listening SOCK_SEQPACKET socket on the abstract name "\0NAME" */
static int listen_abstract(const char *name)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int n = snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "%s", name);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) < 0 ||
	    listen(fd, 4) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void start_listener(void)
{
	char name[64];
	snprintf(name, sizeof name, "ukprobe-agent-%d", (int)getpid());
	listen_fd = listen_abstract(name);
	if (listen_fd < 0)
		return;
	snprintf(name, sizeof name, "ukprobe-agent-%d" UKPA_QUERY_SUFFIX, (int)getpid());
	query_fd = listen_abstract(name);	/* without it: no list, no knob */
	spawn_listener(NULL);
}

/* the agent's thread; arg: the launch's session, or NULL (attach) */
static void spawn_listener(void *arg)
{
	/* the program's signals are never delivered to this thread; the
	 * synchronous ones stay open: this thread may hit a probe itself
	 * (its poll, recvmsg, read...) and the engine's SIGTRAP must reach
	 * it, or the kernel kills the process */
	sigset_t all, old;
	sigfillset(&all);
	static const int sync_sigs[] = { SIGTRAP, SIGSEGV, SIGBUS, SIGILL, SIGFPE };
	for (size_t k = 0; k < sizeof sync_sigs / sizeof *sync_sigs; k++)
		sigdelset(&all, sync_sigs[k]);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_t t;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &at, listener, arg) == 0)
		pthread_setname_np(t, "ukprobe-agent");
	pthread_attr_destroy(&at);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* what the command reads back to know this agent is the one it built */
AGENT_API int ukprobe_agent_version = UKPA_VERSION;

__attribute__((constructor)) static void agent_init(void)
{
	const char *v = getenv(UKPA_ENV_FD);
	if (v) {
		char *end;
		long fd = strtol(v, &end, 10);
		clean_env();
		if (*end || fd < 0 || fcntl((int)fd, F_SETFD, FD_CLOEXEC) < 0)
			_exit(127);
		launch((int)fd);
		return;
	}
	start_listener();
}
