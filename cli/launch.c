/* SPDX-License-Identifier: MIT */
/*
 * Launch: COMMAND runs with the agent preloaded (added to any LD_PRELOAD
 * it has) and one end of a socketpair as its control descriptor; nothing
 * else of its environment, stdio or working directory changes.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "elf.h"
#include "../agent/proto.h"

/* COMMAND's file as execvp finds it, or NULL */
static char *find_command(const char *cmd)
{
	if (strchr(cmd, '/'))
		return strdup(cmd);
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");
		char *f = malloc(n + strlen(cmd) + 3);
		if (!f)
			return NULL;
		snprintf(f, n + strlen(cmd) + 3, "%.*s/%s", (int)n, n ? path : ".", cmd);
		if (access(f, X_OK) == 0)
			return f;
		free(f);
		path += n + (path[n] == ':');
	}
	return NULL;
}

/*
 * What makes the kernel run file with AT_SECURE, where the dynamic linker
 * ignores LD_PRELOAD and the program would run untraced: a set-user-ID or
 * set-group-ID bit giving ids other than ours, or file capabilities for
 * one who has not all of them (unless the file system or no_new_privs
 * voids both).  NULL when none.
 */
static const char *secure_exec(const char *file)
{
	struct stat st;
	struct statvfs fs;
	if (stat(file, &st) < 0 || (statvfs(file, &fs) == 0 && (fs.f_flag & ST_NOSUID)) ||
	    prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1)
		return NULL;
	if ((st.st_mode & S_ISUID) && st.st_uid != getuid())
		return "a set-user-ID program";
	if ((st.st_mode & S_ISGID) && (st.st_mode & S_IXGRP) && st.st_gid != getgid())
		return "a set-group-ID program";
	if (geteuid() != 0 && getxattr(file, "security.capability", NULL, 0) > 0)
		return "a program with file capabilities";
	return NULL;
}

int launch_start(char **argv, int *ctl_fd, pid_t *child)
{
	const char *agent = ukp_agent_path();
	int sv[2], ep[2];
	if (!agent) {
		ukp_err("cannot find the agent (%s) beside the command", UKPA_SONAME);
		return 1;
	}
	/* a static program, or one run with AT_SECURE, would run untraced:
	 * the agent cannot be preloaded */
	char *file = find_command(argv[0]);
	const char *secure = file ? secure_exec(file) : NULL;
	if (secure) {
		ukp_err("cannot trace %s: %s (the dynamic linker does not preload the agent "
			"into it)", argv[0], secure);
		free(file);
		return 1;
	}
	if (file) {
		struct elf_file ef;
		int r = elf_open(file, 1, &ef);
		free(file);
		if (r == 0) {
			int dyn = ef.has_interp;
			elf_close(&ef);
			if (!dyn) {
				ukp_err("cannot trace %s: a statically linked program "
					"(the agent cannot be preloaded)", argv[0]);
				return 1;
			}
		}
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 ||
	    pipe2(ep, O_CLOEXEC) < 0) {
		ukp_err("socketpair: %s", strerror(errno));
		return 1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		ukp_err("fork: %s", strerror(errno));
		return 1;
	}
	if (pid == 0) {
		char num[16], *pre;
		const char *old = getenv("LD_PRELOAD");
		close(sv[0]);
		close(ep[0]);
		/* the agent's end survives exec; the agent closes it on exec */
		if (fcntl(sv[1], F_SETFD, 0) < 0)
			_exit(127);
		snprintf(num, sizeof num, "%d", sv[1]);
		if (old && *old) {
			pre = malloc(strlen(agent) + strlen(old) + 2);
			if (!pre)
				_exit(127);
			sprintf(pre, "%s:%s", agent, old);
		} else {
			pre = (char *)agent;
		}
		setenv(UKPA_ENV_FD, num, 1);
		setenv("LD_PRELOAD", pre, 1);
		signal(SIGPIPE, SIG_DFL);
		execvp(argv[0], argv);
		int e = errno;
		if (write(ep[1], &e, sizeof e) < 0)
			_exit(127);
		_exit(127);
	}
	close(sv[1]);
	close(ep[1]);
	int e;
	ssize_t n;
	do
		n = read(ep[0], &e, sizeof e);
	while (n < 0 && errno == EINTR);
	close(ep[0]);
	if (n == sizeof e) {
		ukp_err("%s: %s", argv[0], strerror(e));
		waitpid(pid, NULL, 0);
		close(sv[0]);
		return e == ENOENT ? 127 : 126;
	}
	*ctl_fd = sv[0];
	*child = pid;
	return 0;
}
