/* SPDX-License-Identifier: MIT */
/*
 * unixsock.h: the host's bound pathname Unix sockets (src/unixsock.c), so
 * that the plan can hide those inside granted trees.
 *
 * connect(2) (and sendto(2) to a datagram socket) on a pathname socket needs
 * only write permission on the socket file: neither read-only mounts nor
 * Landlock (up to ABI 7) stop it.  A host process listening on a socket in
 * the workspace or a harness's state directory would serve the sandbox.  The
 * kernel lists every socket bound in a network namespace, with the path it
 * was bound to, in /proc/net/unix; agentbox reads the host's (its own
 * namespace's) list before the plan, and the plan masks each such socket
 * that a grant would show (plan.c, plan_host_sockets).
 */
#ifndef AGENTBOX_UNIXSOCK_H
#define AGENTBOX_UNIXSOCK_H

#include <stddef.h>

#include "agentbox/common.h"

#define AB_UNIXSOCK_PATH_MAX 107         /* sun_path less its NUL */
#define AB_UNIXSOCK_LIST_MAX (64u << 20) /* bytes of /proc/net/unix read at most */

/*
 * Parse a /proc/net/unix listing (BUF, LEN bytes; untrusted: any local user
 * names its sockets): append to OUT the path of every line that has one
 * starting with '/' (pathname sockets; abstract ones start with '@'), in
 * order, duplicates kept.  A line that is not "ADDR: HEX HEX HEX HEX HEX DEC"
 * followed by an optional " PATH" is skipped (the header, a future format),
 * as is a path longer than AB_UNIXSOCK_PATH_MAX or holding a control byte
 * (a newline in a path is the kernel printing it raw: the rest of that path
 * then reads as another line, which at worst names another existing socket
 * to hide).  Returns the number of paths appended, -EINVAL for LEN > 0 and
 * BUF NULL, -E2BIG for LEN > AB_UNIXSOCK_LIST_MAX, -ENOMEM.
 */
int ab_unixsock_parse(const char *buf, size_t len, ab_strv *out);

/*
 * The host's bound pathname sockets: /proc/net/unix parsed, each absolute
 * path plus its realpath(3) when that differs and still names a socket.
 * 0, or -errno with ERR set (unreadable, larger than AB_UNIXSOCK_LIST_MAX):
 * the caller stops, since sockets it cannot see it cannot hide.
 */
int ab_unixsock_host(ab_strv *out, ab_err *err);

#endif
