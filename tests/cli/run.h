/* SPDX-License-Identifier: MIT */
/*
 * Driving the ukprobe command as a user does: build/ukprobe with
 * arguments, its stdout and stderr read back whole, its exit status.
 * Target programs are build/cli-targets/<name>.
 */
#ifndef UKT_CLI_RUN_H
#define UKT_CLI_RUN_H

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ukt.h"

struct run {
	char *out, *err;
	size_t nout, nerr;
	int status;		/* exit status, or 128+N */
};

static inline const char *build_dir(void)
{
	static char dir[PATH_MAX];
	if (!dir[0]) {
		ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
		UKT_ASSERT(n > 0);
		dir[n] = 0;
		*strrchr(dir, '/') = 0;		/* build/tests */
		*strrchr(dir, '/') = 0;		/* build */
	}
	return dir;
}

static inline const char *ukprobe_path(void)
{
	static char p[PATH_MAX + 16];
	snprintf(p, sizeof p, "%s/ukprobe", build_dir());
	return p;
}

static inline const char *target(const char *name)
{
	static char p[4][PATH_MAX + 32];
	static int k;
	k = (k + 1) % 4;
	snprintf(p[k], sizeof p[k], "%s/cli-targets/%s", build_dir(), name);
	return p[k];
}

static inline void slurp2(int fo, int fe, struct run *r)
{
	char **buf[2] = { &r->out, &r->err };
	size_t *len[2] = { &r->nout, &r->nerr }, cap[2] = { 65536, 65536 };
	struct pollfd p[2] = { { fo, POLLIN, 0 }, { fe, POLLIN, 0 } };
	for (int k = 0; k < 2; k++) {
		*buf[k] = malloc(cap[k]);
		*len[k] = 0;
	}
	while (p[0].fd >= 0 || p[1].fd >= 0) {
		if (poll(p, 2, -1) < 0) {
			UKT_ASSERT(errno == EINTR);
			continue;
		}
		for (int k = 0; k < 2; k++) {
			if (p[k].fd < 0 || !p[k].revents)
				continue;
			if (cap[k] - *len[k] < 65536) {
				cap[k] *= 2;
				*buf[k] = realloc(*buf[k], cap[k]);
				UKT_ASSERT(*buf[k]);
			}
			ssize_t n = read(p[k].fd, *buf[k] + *len[k], cap[k] - *len[k] - 1);
			if (n <= 0) {
				close(p[k].fd);
				p[k].fd = -1;
			} else {
				*len[k] += (size_t)n;
			}
		}
	}
	r->out[r->nout] = 0;
	r->err[r->nerr] = 0;
}

static inline int wait_status(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		UKT_ASSERT(errno == EINTR);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* runs argv (NULL-terminated) with stdin from /dev/null (or in_fd) */
static inline struct run run_argv_in(char *const *argv, int in_fd)
{
	int po[2], pe[2];
	struct run r;
	memset(&r, 0, sizeof r);
	UKT_ASSERT(pipe(po) == 0 && pipe(pe) == 0);
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	UKT_ASSERT(pid >= 0);
	if (pid == 0) {
		int in = in_fd >= 0 ? in_fd : open("/dev/null", O_RDONLY);
		dup2(in, 0);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		execv(argv[0], argv);
		_exit(126);
	}
	close(po[1]);
	close(pe[1]);
	slurp2(po[0], pe[0], &r);
	r.status = wait_status(pid);
	return r;
}

static inline struct run run_argv(char *const *argv)
{
	return run_argv_in(argv, -1);
}

/* ukprobe with the arguments given, NULL-terminated */
static inline struct run ukprobe(const char *a0, ...)
{
	char *argv[256];
	int n = 0;
	va_list ap;
	argv[n++] = (char *)ukprobe_path();
	va_start(ap, a0);
	for (const char *a = a0; a && n < 255; a = va_arg(ap, const char *))
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	return run_argv(argv);
}

static inline void run_free(struct run *r)
{
	free(r->out);
	free(r->err);
}

/* number of lines of s containing needle */
static inline int count_lines(const char *s, const char *needle)
{
	int n = 0;
	const char *p = s;
	while (*p) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char *line = strndup(p, len);
		if (strstr(line, needle))
			n++;
		free(line);
		if (!e)
			break;
		p = e + 1;
	}
	return n;
}

/* the arguments of the n-th line of event ev in out (what follows
 * "ev: (...) "), malloc'd, or NULL */
static inline char *event_args(const char *out, const char *ev, int n)
{
	char key[64];
	snprintf(key, sizeof key, " %s: (", ev);
	const char *p = out;
	for (int k = 0; (p = strstr(p, key)); p++, k++) {
		if (k < n)
			continue;
		const char *close = strstr(p, ") ");
		const char *eol = strchr(p, '\n');
		UKT_ASSERT(close && eol && close < eol);
		return strndup(close + 2, (size_t)(eol - close - 2));
	}
	return NULL;
}

static inline void show(const struct run *r)
{
	fprintf(stderr, "  status %d\n  --- stdout (%zu bytes) ---\n%.4000s\n  --- stderr ---\n%.4000s\n",
		r->status, r->nout, r->out, r->err);
}

/* A target program that talks on its stdin and stdout (the cli targets
 * print "ready PID" first): started with arg (or none), the test its
 * parent; killed if the test dies. */
struct proc {
	pid_t pid;
	int in;		/* its stdin */
	FILE *out;	/* its stdout */
};

static inline struct proc proc_start(const char *name, const char *arg)
{
	int pi[2], po[2];
	struct proc p;
	UKT_ASSERT(pipe(pi) == 0 && pipe(po) == 0);
	fflush(stdout);
	fflush(stderr);
	p.pid = fork();
	UKT_ASSERT(p.pid >= 0);
	if (p.pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);	/* a failed case leaves nothing */
		dup2(pi[0], 0);
		dup2(po[1], 1);
		close(pi[1]);
		close(po[0]);
		execl(target(name), name, arg, (char *)NULL);
		_exit(126);
	}
	close(pi[0]);
	close(po[1]);
	p.in = pi[1];
	p.out = fdopen(po[0], "r");
	char line[256];
	UKT_ASSERT(fgets(line, sizeof line, p.out) && !strncmp(line, "ready ", 6));
	UKT_EQ(atoi(line + 6), p.pid);
	return p;
}

/* p's last line of output and exit status, once it ends (its stdin
 * closed: a target reading it ends then) */
static inline int proc_last(struct proc *p, char *last, size_t n)
{
	close(p->in);
	last[0] = 0;
	char line[512];
	while (fgets(line, sizeof line, p->out))
		snprintf(last, n, "%s", line);
	fclose(p->out);
	return wait_status(p->pid);
}

/* p ends with status 0 and a last line "ok ..." (what the targets print
 * when their own checks pass) */
static inline void proc_expect_ok(struct proc *p)
{
	char last[512];
	int st = proc_last(p, last, sizeof last);
	if (st != 0 || strncmp(last, "ok ", 3))
		UKT_FAIL("target: status %d, \"%s\"", st, last);
}

/* the file offset of symbol name in the ELF file at path (its symbol
 * tables), or -1 */
static inline long sym_file_offset(const char *path, const char *name)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0)
		return -1;
	unsigned char *f = malloc((size_t)st.st_size);
	UKT_ASSERT(f && pread(fd, f, (size_t)st.st_size, 0) == st.st_size);
	close(fd);
	const Elf64_Ehdr *eh = (const void *)f;
	const Elf64_Shdr *sh = (const void *)(f + eh->e_shoff);
	const Elf64_Phdr *ph = (const void *)(f + eh->e_phoff);
	long off = -1;
	for (int k = 0; k < eh->e_shnum && off < 0; k++) {
		if (sh[k].sh_type != SHT_DYNSYM && sh[k].sh_type != SHT_SYMTAB)
			continue;
		const Elf64_Sym *sy = (const void *)(f + sh[k].sh_offset);
		const char *str = (const char *)(f + sh[sh[k].sh_link].sh_offset);
		for (size_t j = 0; j < sh[k].sh_size / sizeof *sy && off < 0; j++)
			if (!strcmp(str + sy[j].st_name, name) && sy[j].st_shndx != SHN_UNDEF)
				for (int q = 0; q < eh->e_phnum; q++)
					if (ph[q].p_type == PT_LOAD && sy[j].st_value >= ph[q].p_vaddr &&
					    sy[j].st_value < ph[q].p_vaddr + ph[q].p_filesz)
						off = (long)(sy[j].st_value - ph[q].p_vaddr + ph[q].p_offset);
	}
	free(f);
	return off;
}

/* Ways to damage an ELF file where the kernel and the dynamic linker do
 * not look (its section headers), as a broken or hostile file may be:
 * the program or library still runs. */
enum damage {
	DAMAGE_NAMES,		/* every section's name outside the names */
	DAMAGE_DYNSTR,		/* .dynstr said to run far past the file */
	DAMAGE_TRUNCATED,	/* the section headers cut off */
};

/* the bytes of the file at path (malloc'd), *len of them */
static inline unsigned char *file_bytes(const char *path, size_t *len)
{
	int in = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	UKT_ASSERT(in >= 0 && fstat(in, &st) == 0);
	unsigned char *f = malloc((size_t)st.st_size);
	UKT_ASSERT(f && pread(in, f, (size_t)st.st_size, 0) == st.st_size);
	close(in);
	*len = (size_t)st.st_size;
	return f;
}

/* len bytes of f as the file at path, executable */
static inline void write_file(const char *path, const void *f, size_t len)
{
	int out = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	UKT_ASSERT(out >= 0 && write(out, f, len) == (ssize_t)len);
	close(out);
}

/* a copy of the ELF file from at to (executable), damaged as how says */
static inline void damaged_copy(const char *from, const char *to, enum damage how)
{
	size_t len;
	unsigned char *f = file_bytes(from, &len);
	Elf64_Ehdr *eh = (void *)f;
	Elf64_Shdr *sh = (void *)(f + eh->e_shoff);
	for (int k = 0; k < eh->e_shnum; k++) {
		if (how == DAMAGE_NAMES)
			sh[k].sh_name = 0xfffffff0u;
		if (how == DAMAGE_DYNSTR && sh[k].sh_type == SHT_DYNSYM)
			sh[sh[k].sh_link].sh_size = 1ul << 28;
	}
	if (how == DAMAGE_TRUNCATED)
		len = eh->e_shoff + sizeof(Elf64_Shdr);
	write_file(to, f, len);
	free(f);
}

#define RUN_EXPECT(r, cond) do {					\
	if (!(cond)) {							\
		show(&(r));						\
		UKT_FAIL("expected: %s", #cond);			\
	}								\
} while (0)

#endif
