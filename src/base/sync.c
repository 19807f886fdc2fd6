/* SPDX-License-Identifier: MIT */
/*
 * The hand-over between agentbox's parent and the sandbox's init: one message
 * per SOCK_SEQPACKET datagram, an fd beside it where the message carries one
 * (include/agentbox/sync.h).  Both sides of the launcher and the egress side
 * (listeners, the command's environment, the session's trust files) speak it;
 * it knows nothing of either.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentbox/sync.h"

int ab_send_with_fds(int fd, const void *buf, size_t len, const int *fds, size_t nfds)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	union {
		char buf[CMSG_SPACE(AB_SEND_FDS_MAX * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds > AB_SEND_FDS_MAX)
		return -EINVAL;
	if (nfds) {
		memset(&u, 0, sizeof(u));
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	ssize_t n;
	do
		n = sendmsg(fd, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)len ? 0 : -(n < 0 ? errno : EIO);
}

int ab_send_with_fd(int fd, const void *buf, size_t len, int pass_fd)
{
	return ab_send_with_fds(fd, buf, len, &pass_fd, pass_fd >= 0);
}

int ab_sync_send(int fd, const ab_sync_msg *m, int pass_fd)
{
	return ab_send_with_fd(fd, m, sizeof(*m), pass_fd);
}

/* Returns 1 on a message, 0 on EOF, -errno on error. */
int ab_sync_recv(int fd, ab_sync_msg *m, int *recv_fd)
{
	struct iovec iov = {.iov_base = m, .iov_len = sizeof(*m)};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = u.buf,
			     .msg_controllen = sizeof(u.buf)};
	if (recv_fd)
		*recv_fd = -1;
	/* A peer that closed with our messages unread in its queue leaves
	 * ECONNRESET pending on this end, reported once before the messages it
	 * sent first (its last words: the child's ERROR after a failed setup,
	 * while our seccomp program waited unread).  Read on past it. */
	ssize_t n;
	do
		n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && (errno == EINTR || errno == ECONNRESET));
	if (n < 0)
		return -errno;
	if (n == 0)
		return 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int got;
			memcpy(&got, CMSG_DATA(c), sizeof(int));
			if (recv_fd && *recv_fd < 0)
				*recv_fd = got;
			else
				close(got);
		}
	}
	if (n != (ssize_t)sizeof(*m) || (msg.msg_flags & MSG_TRUNC))
		return -EPROTO;
	m->err.msg[sizeof(m->err.msg) - 1] = '\0';
	m->err.hint[sizeof(m->err.hint) - 1] = '\0';
	return 1;
}
