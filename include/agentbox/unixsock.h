/* SPDX-License-Identifier: MIT */
/*
 * unixsock.h: the host's bound pathname Unix sockets (src/kernel/unixsock.c), so
 * that the plan can hide those inside granted trees.
 *
 * connect(2) (and sendto(2) to a datagram socket) on a pathname socket needs
 * only write permission on the socket file: neither read-only mounts nor
 * Landlock (up to ABI 7) stop it.  A host process listening on a socket in
 * the workspace or a harness's state directory would serve the sandbox.  The
 * kernel lists every socket bound in a network namespace, with the path it
 * was bound to (NETLINK_SOCK_DIAG, /proc/net/unix); agentbox reads the
 * host's (its own namespace's) list before the plan, and the plan masks
 * each such socket that a grant would show (plan.c, plan_host_sockets).
 */
#ifndef AGENTBOX_UNIXSOCK_H
#define AGENTBOX_UNIXSOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
 * Parse one datagram of a NETLINK_SOCK_DIAG dump of unix sockets
 * (UDIAG_SHOW_NAME): append the pathname of each socket that has one
 * (checked as above).  Returns 1 at NLMSG_DONE, 0 when more datagrams
 * follow, the error of an NLMSG_ERROR (e.g. -ENOENT: no unix_diag), or
 * -EPROTO (a length that runs past the buffer), -ENOMEM, -EINVAL.
 */
int ab_unixsock_parse_diag(const void *buf, size_t len, ab_strv *out);

/*
 * The same for a dump with UDIAG_SHOW_VFS: set *FOUND when a socket's
 * UNIX_DIAG_VFS is DEV (the kernel's encoding: major << 20 | minor) and INO
 * (its low 32 bits: all the kernel reports).  Returns as above.
 */
int ab_unixsock_parse_vfs(const void *buf, size_t len, uint32_t dev, uint32_t ino, bool *found);

/*
 * Is a socket bound to the file DEV:INO (as above) listening, or unbound-
 * connectionless, in the network namespace the NETLINK_SOCK_DIAG socket
 * DIAG_FD was made in?  1, 0, or -errno (connect mediation: a socket the
 * sandbox bound itself, src/observe/supervise.c).
 */
int ab_unixsock_bound_in(int diag_fd, uint32_t dev, uint32_t ino);

/*
 * The host's bound pathname sockets that another socket could reach
 * (listening, or unconnected: a bound datagram socket), from the kernel's
 * socket diagnostics (or, without unix_diag, every bound one from
 * /proc/net/unix): each absolute path once, plus the same name in its directory's realpath(3) when that
 * differs (a socket bound through a symlinked directory).  Whether a path
 * still names a socket is for the plan to check (only those under grants
 * matter).  0, or -errno with ERR set (unreadable, larger than
 * AB_UNIXSOCK_LIST_MAX): the caller stops, since sockets it cannot see it
 * cannot hide.
 */
int ab_unixsock_host(ab_strv *out, ab_err *err);

/* One of the two listings, raw (the paths as bound, unsorted): DIAG the
 * socket diagnostics, else /proc/net/unix.  0 or -errno (for tests). */
int ab_unixsock_list(bool diag, ab_strv *raw);

#endif
