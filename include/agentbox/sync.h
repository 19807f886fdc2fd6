/* SPDX-License-Identifier: MIT */
/*
 * The hand-over between agentbox's parent and the sandbox's init (the child
 * that builds the sandbox, then runs as its pid 1), on one SOCK_SEQPACKET
 * socketpair: the launcher's steps (maps, placeholders, idmapped trees, the
 * seccomp program) and what the egress side hands in or takes out
 * (listeners, the command's environment, the session's trust files).
 * src/base/sync.c.
 */
#ifndef AGENTBOX_SYNC_H
#define AGENTBOX_SYNC_H

#include <stdint.h>

#include "agentbox/common.h"

/* Messages on the sync socket (SOCK_SEQPACKET, one message per write). */
enum ab_sync_type {
	AB_SYNC_MAPS_DONE = 1,     /* parent -> child: uid/gid maps written, go on */
	AB_SYNC_PTY_MASTER,        /* child -> parent: SCM_RIGHTS master fd */
	AB_SYNC_READY,             /* child -> parent: sandbox built, command started (pid) */
	AB_SYNC_ERROR,             /* child -> parent: ab_err follows in the payload */
	AB_SYNC_EXIT,              /* child -> parent: command exit status (128+N for signals) */
	AB_SYNC_PLACEHOLDERS_DONE, /* parent -> child: placeholders exist, build the root */
	AB_SYNC_IDMAP,             /* parent -> child (root callers): SCM_RIGHTS an idmapped
				   tree for mount index `value`; value -1 ends the list */
	AB_SYNC_SECCOMP,           /* parent -> child: `value` programs follow, one raw
				   datagram of struct sock_filter each (compiled while the
				   child builds its root) */
	AB_SYNC_LISTENER,          /* child -> parent: SCM_RIGHTS an egress listener created
				   inside the netns; value = AB_LISTENER_VALUE(kind, port) */
	AB_SYNC_CONTENT,           /* parent -> child (before CONTENT_DONE): SCM_RIGHTS the
				   memfd holding the content of mount index `value`
				   (AB_MNT_F_RUNTIME: the session CA's trust files, a
				   rendered credentials file).  Empty when sent: the
				   parent fills and seals it before RUNTIME_DONE, and the
				   child copies it only after that */
	AB_SYNC_ENV,               /* parent -> child (before RUNTIME_DONE): one raw
				   datagram of `value` bytes follows, "NAME=VALUE" for the
				   command's environment (a secret's placeholder) */
	AB_SYNC_NOTIFY,            /* child -> parent: SCM_RIGHTS the seccomp user-notification
				   listener (the exec and denial record, supervise.c) */
	AB_SYNC_SOCKDIAG,          /* child -> parent (before AB_SYNC_NOTIFY): SCM_RIGHTS a
				   NETLINK_SOCK_DIAG socket made in the sandbox's network
				   namespace (connect mediation: which sockets it bound) */
	AB_SYNC_CREATOR,           /* child -> parent (before AB_SYNC_NOTIFY): SCM_RIGHTS the
				   creator's socket (src/sandbox/creator.c) */
	AB_SYNC_RUNTIME_DONE,      /* parent -> child (after SECCOMP): every CONTENT memfd
				   is filled and sealed, and every ENV sent (the broker's
				   run-time work); the child waits for it after receiving
				   the filter, before applying it */
	AB_SYNC_CONTENT_DONE,      /* parent -> child (after PLACEHOLDERS_DONE and the
				   idmapped trees, before SECCOMP): every CONTENT was
				   sent; the child waits for it at its first
				   AB_MNT_F_RUNTIME mount, or after the last mount */
};

typedef struct ab_sync_msg {
	int type;
	int value;  /* pid, status, ... */
	ab_err err; /* AB_SYNC_ERROR */
} ab_sync_msg;

/* AB_SYNC_LISTENER: which egress listener the socket is */
enum ab_listen_kind {
	AB_LISTEN_PROXY = 1,       /* 127.0.0.1:proxy_port, explicit proxy */
	AB_LISTEN_DNS_UDP = 2,     /* 127.0.0.1:53/udp */
	AB_LISTEN_DNS_TCP = 3,     /* 127.0.0.1:53/tcp */
	AB_LISTEN_TRANSPARENT = 4, /* 0.0.0.0:P, connections to synthetic addresses */
};

#define AB_LISTENER_VALUE(kind, port) ((int)(((unsigned)(kind) << 16) | (unsigned)(port)))
#define AB_LISTENER_KIND(v) ((int)(((unsigned)(v) >> 16) & 0xff))
#define AB_LISTENER_PORT(v) ((uint16_t)((unsigned)(v)&0xffff))

#define AB_SYNC_ENV_MAX 8192 /* one AB_SYNC_ENV entry */

/* Send/receive one sync message (with optional fd). */
/* LEN bytes of BUF as one message on the socket FD, with PASS_FD (>= 0)
 * attached (SCM_RIGHTS); EINTR retried.  0, or -errno (-EIO: cut short). */
int ab_send_with_fd(int fd, const void *buf, size_t len, int pass_fd);
/* ... with NFDS (at most AB_SEND_FDS_MAX) fds attached; -EINVAL past it. */
#define AB_SEND_FDS_MAX 128
int ab_send_with_fds(int fd, const void *buf, size_t len, const int *fds, size_t nfds);
int ab_sync_send(int fd, const ab_sync_msg *m, int pass_fd);
int ab_sync_recv(int fd, ab_sync_msg *m, int *recv_fd);

#endif
