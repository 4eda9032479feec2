/* SPDX-License-Identifier: MIT */
/* The control channel's messages (agent/proto.h), command side. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "cli.h"
#include "../agent/proto.h"

int chan_send(int fd, uint32_t type, const void *p1, size_t n1,
	      const void *p2, size_t n2)
{
	struct ukpa_msg h = { type, (uint32_t)(n1 + n2) };
	struct iovec iov[3] = {
		{ &h, sizeof h }, { (void *)p1, n1 }, { (void *)p2, n2 } };
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = 3 };
	ssize_t r;
	do
		r = sendmsg(fd, &m, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	return r == (ssize_t)(sizeof h + n1 + n2) ? 0 : -1;
}

int chan_recv(int fd, void **payload, uint32_t *len, int *passfd, int timeout_ms)
{
	char *buf = malloc(UKPA_MAX_MSG + 1);
	union {
		struct cmsghdr c;
		char b[CMSG_SPACE(sizeof(int))];
	} cb;
	struct iovec iov = { buf, UKPA_MAX_MSG };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cb.b, .msg_controllen = sizeof cb.b };
	if (passfd)
		*passfd = -1;
	*payload = NULL;
	if (!buf)
		return -1;
	if (timeout_ms >= 0) {
		struct pollfd p = { fd, POLLIN, 0 };
		int r;
		do
			r = poll(&p, 1, timeout_ms);
		while (r < 0 && errno == EINTR);
		if (r <= 0) {
			free(buf);
			errno = r == 0 ? ETIMEDOUT : errno;
			return -1;
		}
	}
	ssize_t n;
	do
		n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < (ssize_t)sizeof(struct ukpa_msg)) {
		free(buf);
		if (n >= 0)
			errno = ECONNRESET;
		return -1;
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int f;
			memcpy(&f, CMSG_DATA(c), sizeof f);
			if (passfd)
				*passfd = f;
		}
	struct ukpa_msg h;
	memcpy(&h, buf, sizeof h);
	if (h.len != (size_t)n - sizeof h) {
		free(buf);
		errno = EPROTO;
		return -1;
	}
	memmove(buf, buf + sizeof h, h.len);
	buf[h.len] = 0;
	*payload = buf;
	*len = h.len;
	return (int)h.type;
}
