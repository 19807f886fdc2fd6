/* SPDX-License-Identifier: MIT */
/*
 * `agentbox allow`: add destinations to a running sandbox's allow list.  The
 * running agentbox listens on a unix socket in a directory only its user can
 * enter: /run/user/UID/agentbox when /run/user/UID is that user's own (where
 * systemd puts $XDG_RUNTIME_DIR), else /tmp/agentbox-UID.  The directory is
 * made 0700 and used only if it is a real directory (not a link), owned by
 * the caller and closed to everyone else; another user who made it first is
 * refused, never used.  The socket is named after the workspace's device and
 * inode (ctl-DEV-INO), so -w through any path to the same directory finds
 * it; the run's workspace lock makes one agentbox per workspace, so an
 * existing socket of that name is a dead run's and is replaced.  Both ends
 * also check the peer's uid (SO_PEERCRED): the same user only, root
 * included (root reaches another user's sandbox as that user).  The sandbox
 * cannot reach it: it sees neither directory (private /run and /tmp; a grant
 * that would show one is masked, plan.c).
 *
 * Protocol: the client sends lines "allow RULE\n" and shuts down its write
 * side; the server answers one line per request, "ok RULE" or
 * "error MESSAGE".
 */
#ifndef AGENTBOX_CONTROL_H
#define AGENTBOX_CONTROL_H

#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>

#include "agentbox/common.h"

#define AB_CONTROL_MAX_REQUEST 16384

/* One place the control sockets of a user may live: the directory LEAF in
 * BASE (PATH is both joined). */
typedef struct ab_control_dir {
	char base[32];
	char leaf[32];
	char path[64];
} ab_control_dir;

/* The places for UID, in the order `allow` looks and `run` picks the first:
 * /run/user/UID/agentbox when /run/user/UID is a directory of UID's closed to
 * others, then /tmp/agentbox-UID.  Returns how many (1 or 2). */
int ab_control_dirs(uid_t uid, ab_control_dir out[2]);

/* The socket's name for the workspace WS (its stat): "ctl-DEV-INO", hex. */
void ab_control_sock_name(const struct stat *ws, char *buf, size_t n);

/* Open (CREATE: make it first, 0700) the directory LEAF in BASE: fails unless
 * it is a directory, not a symbolic link, owned by the caller, with no access
 * for group or others.  -ENOENT without a message when it does not exist and
 * CREATE is false.  *DIRFD is O_RDONLY | O_CLOEXEC. */
int ab_control_dir_open(const char *base, const char *leaf, bool create, int *dirfd, ab_err *err);

/* Run, before the plan: make the directory `run` will use, so that the plan
 * hides it from any grant that would show it.  Errors are left to
 * ab_control_open, which reports them. */
void ab_control_prepare(void);

/* Parent: listen for the workspace WS (its stat) in the first place of
 * ab_control_dirs, replacing a dead run's socket.  *FD is the listener
 * (non-blocking, close-on-exec; the caller's); *OUT removes the socket when
 * closed.  The caller holds the workspace lock. */
typedef struct ab_control ab_control;
int ab_control_open(const struct stat *ws, ab_control **out, int *fd, ab_err *err);
/* The same in the directory LEAF of BASE (tests). */
int ab_control_open_in(const char *base, const char *leaf, const struct stat *ws, ab_control **out,
		       int *fd, ab_err *err);
/* The socket's path, for messages. */
const char *ab_control_path(const ab_control *c);
/* Remove the socket (NULL: nothing). */
void ab_control_close(ab_control *c);

/* The `allow` command: send the rules to the agentbox running in workspace
 * and print its answers.  Returns the exit status: 0 all added, 1 some
 * refused, 125 (AB_EXIT_FAIL, err set) on every other failure: no sandbox
 * of the caller's there, an unsafe directory, no or no valid answer. */
int ab_control_allow(const char *workspace, char *const *rules, int nrules, ab_err *err);

#endif
