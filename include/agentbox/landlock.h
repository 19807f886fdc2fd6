/* SPDX-License-Identifier: MIT */
/*
 * Landlock: the second filesystem layer, mirroring the mount plan.
 * Rights are computed purely by the planner (ab_landlock_plan) for a given ABI;
 * the child applies them (ab_landlock_apply) after pivot_root and before
 * dropping capabilities.
 */
#ifndef AGENTBOX_LANDLOCK_H
#define AGENTBOX_LANDLOCK_H

#include <stdint.h>
#include <linux/landlock.h>

#include "agentbox/common.h"

/*
 * Debian 12 ships 6.1 uapi headers (Landlock ABI 2).  The constants of newer
 * ABIs are defined here so the planner, explain and the tests share one copy.
 * (Struct types and the NET_PORT rule type are private to src/kernel/landlock.c.)
 */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13) /* ABI 2 */
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0) /* ABI 4 */
#endif
#ifndef LANDLOCK_ACCESS_NET_CONNECT_TCP
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1) /* ABI 4 */
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1) /* ABI 6 */
#endif

/* The newest ABI this build knows; a newer kernel is treated as this one. */
#define AB_LANDLOCK_ABI_MAX 7

/* Access classes the mount plan assigns to each path. */
enum ab_ll_class {
	AB_LL_READ,  /* read files/dirs, execute */
	AB_LL_WRITE, /* everything (incl. refer/truncate where the ABI has them) */
	AB_LL_DEV,   /* /dev: read+write files, ioctl on devices, no mknod */
	AB_LL_PROC,  /* /proc: read + write_file */
};

typedef struct ab_ll_rule {
	char *path;      /* path inside the new root */
	uint64_t access; /* LANDLOCK_ACCESS_FS_* rights for this path (already ABI-masked) */
} ab_ll_rule;

typedef struct ab_ll_plan {
	bool enabled;         /* false when the kernel has no Landlock and the profile allows it */
	int abi;              /* ABI the plan was computed for */
	uint64_t handled_fs;  /* ruleset handled_access_fs */
	uint64_t handled_net; /* ruleset handled_access_net (0 if ABI < 4) */
	uint64_t scoped;      /* ruleset scoped (0 if ABI < 6) */
	ab_ll_rule *rules;
	size_t nrules;
	uint16_t *tcp_ports; /* ports allowed for connect+bind when handled_net != 0 */
	size_t ntcp_ports;
	bool tcp_any; /* profile said "any": net not handled at all */
} ab_ll_plan;

/* The rights an ABI knows (fs), per ABI version 1..7; 0 for unknown/0. */
uint64_t ab_landlock_fs_rights(int abi);
/* Rights for one class on one ABI. */
uint64_t ab_landlock_class_rights(enum ab_ll_class cls, int abi);
/* handled_access_net an ABI knows (CONNECT_TCP|BIND_TCP from 4, else 0). */
uint64_t ab_landlock_net_rights(int abi);
/* scoped bits an ABI knows (ABSTRACT_UNIX_SOCKET|SIGNAL from 6, else 0). */
uint64_t ab_landlock_scopes(int abi);

/* Names of the downgrades an ABI forces relative to the newest this build knows
 * (e.g. "landlock-truncate" on ABI 2).  Appends to *names. */
int ab_landlock_downgrades(int abi, ab_strv *names);

/* Add a rule (copies path). */
int ab_ll_plan_add(ab_ll_plan *p, const char *path, enum ab_ll_class cls);
void ab_ll_plan_free(ab_ll_plan *p);

/* Child side, after pivot_root: open each path O_PATH, add rules, restrict
 * self.  Paths that do not exist inside are skipped (nothing to grant).
 * Requires no_new_privs or CAP_SYS_ADMIN; we set no_new_privs first. */
int ab_landlock_apply(const ab_ll_plan *p, ab_err *err);

/* The network half of P alone (its TCP port rules; no file system rights, no
 * scopes), as a ruleset fd (O_CLOEXEC) in *OUT; -1 when P handles no network
 * access.  For the threads that connect on the sandbox's behalf
 * (src/observe/supervise.c): the kernel applies the sandbox's port rules to them. */
int ab_landlock_net_ruleset(const ab_ll_plan *p, int *out, ab_err *err);
/* The calling thread only: no_new_privs, then RULESET enforced.  0/-errno. */
int ab_landlock_restrict_thread(int ruleset);

/* Probe: ABI version (0 if unavailable) and errno why. */
int ab_landlock_probe_abi(int *errno_out);

/* Human-readable summary lines for explain. */
int ab_landlock_describe(const ab_ll_plan *p, ab_strv *lines);

#endif
