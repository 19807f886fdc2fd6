/* SPDX-License-Identifier: MIT */
/*
 * Credentials, capabilities, no_new_privs, rlimits, session keyring.
 * Child side (except ab_rlimits_describe).
 */
#ifndef AGENTBOX_CAPS_H
#define AGENTBOX_CAPS_H

#include <sys/resource.h>
#include <sys/types.h>

#include "agentbox/common.h"

typedef struct ab_rlimit {
	int resource; /* RLIMIT_* */
	rlim_t soft, hard;
	rlim_t asked; /* the profile's value, when above agentbox's hard limit
				(soft and hard are then that limit); else 0 */
} ab_rlimit;

/* Apply each rlimit (setrlimit).  Lowering only is fine; raising above the
 * inherited hard limit fails with a clear message. */
int ab_rlimits_apply(const ab_rlimit *r, size_t n, ab_err *err);

/* Join a fresh anonymous session keyring (keyctl JOIN_SESSION_KEYRING, NULL),
 * so nothing of the caller's session keyring is reachable.  Must run before
 * seccomp blocks keyctl.  `refused` (the plan's keyring_skip): the errno with
 * which keyctl was refused to agentbox itself; a join failing with exactly it
 * is skipped (0: every failure is an error). */
int ab_keyring_new_session(int refused, ab_err *err);

/* Become uid/gid inside the user namespace, with no supplementary groups when
 * `drop_groups` (setgroups may be denied for unprivileged callers).
 * Capabilities are kept across the switch (PR_SET_KEEPCAPS, effective set
 * restored) so that ab_caps_drop_all, which must come AFTER this, still holds
 * CAP_SETPCAP to empty the bounding set. */
int ab_creds_switch(uid_t uid, gid_t gid, bool drop_groups, ab_err *err);

/* Drop every capability: bounding set (0..cap_last_cap, and on to the
 * kernel's real end), ambient, then effective/permitted/inheritable (libcap),
 * then PR_SET_NO_NEW_PRIVS.  Verifies afterwards (capget, PR_CAPBSET_READ,
 * PR_CAP_AMBIENT_IS_SET, PR_GET_NO_NEW_PRIVS; no /proc needed) and fails if
 * anything remains.  Needs CAP_SETPCAP on entry: call after ab_creds_switch. */
int ab_caps_drop_all(int cap_last_cap, ab_err *err);

#endif
