/* SPDX-License-Identifier: MIT */
/*
 * `agentbox allow`: add destinations to a running sandbox's allow list.  The
 * running agentbox listens on an abstract unix socket in the HOST network
 * namespace (the sandbox has its own, so nothing inside can reach it), named
 * after the caller's uid and the workspace; only peers with the same uid (or
 * root) are served (SO_PEERCRED).  Protocol: the client sends lines
 * "allow RULE\n" and shuts down its write side; the server answers one line
 * per request, "ok RULE" or "error MESSAGE".
 */
#ifndef AGENTBOX_CONTROL_H
#define AGENTBOX_CONTROL_H

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "agentbox/common.h"

#define AB_CONTROL_MAX_REQUEST 16384

/* The socket address for (uid, workspace). */
void ab_control_addr(uid_t uid, const char *workspace, struct sockaddr_un *sa, socklen_t *len);

/* Parent: listen (non-blocking, close-on-exec).  -EADDRINUSE when another
 * agentbox serves this workspace. */
int ab_control_listen(const char *workspace, int *out, ab_err *err);

/* The `allow` command: send the rules to the agentbox running in workspace
 * and print its answers.  Returns the exit status (0 all added, 1 some
 * refused, 125 no sandbox there / usage). */
int ab_control_allow(const char *workspace, char *const *rules, int nrules, ab_err *err);

#endif
