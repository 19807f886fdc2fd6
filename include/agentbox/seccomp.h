/* SPDX-License-Identifier: MIT */
/*
 * The seccomp filter: compiled in the parent with libseccomp (after clone, while the child
 * builds its root; sent over the sync socket),
 * loaded in the child as the very last step before exec, with no allocation.
 */
#ifndef AGENTBOX_SECCOMP_H
#define AGENTBOX_SECCOMP_H

#include <linux/filter.h>
#include <stdint.h>
#include <stdio.h>

#include "agentbox/common.h"

/* What the plan decided; pure data. */
typedef struct ab_seccomp_policy {
	ab_strv extra_deny; /* profile syscalls.deny: names, EPERM */
	ab_strv allow;      /* profile syscalls.allow: relaxable default entries to drop */
	bool disabled;      /* test-only ablation switch (AGENTBOX_TEST_ABLATE=seccomp) */
	/* The record: with either set, program 1 is loaded with a
	 * user-notification listener that agentbox's parent serves
	 * (src/observe/supervise.c).  notify_denials: every EPERM/EAFNOSUPPORT rule
	 * becomes SECCOMP_RET_USER_NOTIF and the parent answers with that same
	 * errno (ab_seccomp_deny_errno) and logs it; the ENOSYS rules stay plain
	 * (they steer user space to a fallback, they deny nothing by
	 * themselves).  notify_exec: execve/execveat notify and continue. */
	bool notify_denials;
	bool notify_exec;
	/* Rendered credentials files (docs/credentials.md): rename, renameat
	 * and renameat2 notify; the parent carries out a rename onto one of
	 * them (a mount point: EBUSY otherwise) and lets every other one
	 * continue (src/observe/supervise.c). */
	bool notify_rename;
	/* Host unix sockets bound after the start (docs/threat-model.md):
	 * connect notifies; the parent resolves the address inside, refuses a
	 * pathname socket bound outside the sandbox (EACCES) unless the profile
	 * shares it (unix_sockets), and carries out every other connect itself
	 * on the caller's socket, so what it checked is what is connected. */
	bool notify_connect;
	/* The set-id mode rules (chmod family, open, openat, creat, mknod*,
	 * mkdir* with S_ISUID/S_ISGID: EPERM; openat2: ENOSYS) are left out:
	 * the plan found that every file the sandbox can create or chmod on the
	 * host belongs to its own host uid (no writable idmapped grant), where a
	 * set-id bit gives nothing.  Zero, the default, keeps them (fail
	 * closed).  Without argument rules on open and openat, the kernel's
	 * seccomp action cache lets them skip the filter. */
	bool setid_unchecked;
	/* run --learn (docs/learn.md): open, openat, creat, mkdir and mkdirat
	 * notify too; the parent records the path and lets the call continue
	 * (src/observe/supervise_learn.c).  A learning run only. */
	bool notify_learn;
	/* New `.git` entries kept off the host (include/agentbox/mediate.h):
	 * open and openat that create, truncate or write, creat, mkdir*,
	 * mknod*, symlink*, link* and rename* notify, and the parent has the sandbox's creator
	 * carry each out (src/observe/supervise_create.c); openat2, whose flags
	 * the filter cannot read, is ENOSYS (callers fall back to openat). */
	bool notify_create;
} ab_seccomp_policy;

/* Does the filter need a user-notification listener (served by the parent)? */
static inline bool ab_seccomp_listens(const ab_seccomp_policy *pol)
{
	return pol->notify_denials || pol->notify_exec || pol->notify_rename ||
	       pol->notify_connect || pol->notify_learn || pol->notify_create;
}

/* The rename calls notify_rename notifies, native names (absent ones skipped). */
#define AB_SECCOMP_RENAME_CALLS                   \
	{                                         \
		"rename", "renameat", "renameat2" \
	}

/* A compiled program (or two: libseccomp's filter, plus a tiny hand-written
 * guard that fails syscall numbers newer than this build knows with ENOSYS). */
#define AB_SECCOMP_MAX_PROGS 2

/* The highest syscall number this build knows: Linux 6.18 (file_setattr,
 * 469).  From 424 on x86_64 and aarch64 share one numbering.  Native numbers
 * above it fail with ENOSYS (the guard program), so a newer kernel cannot open
 * a door the deny list has never heard of.  Review on every kernel release. */
#define AB_SECCOMP_MAX_KNOWN_NR 469
typedef struct ab_seccomp_prog {
	struct sock_fprog progs[AB_SECCOMP_MAX_PROGS];
	size_t nprogs;
} ab_seccomp_prog;

/* Validate names in the policy (unknown syscall, not relaxable) -> error. */
int ab_seccomp_validate(const ab_seccomp_policy *pol, ab_err *err);

/* Build the filter.  Fails (with a message) on any libseccomp error. */
int ab_seccomp_compile(const ab_seccomp_policy *pol, ab_seccomp_prog *out, ab_err *err);
void ab_seccomp_prog_free(ab_seccomp_prog *p);

/* Child side: load every program (SECCOMP_FILTER_FLAG_TSYNC is not needed:
 * single-threaded); requires no_new_privs already set.  No allocation.  With
 * LISTENER non-NULL, program 1 is loaded with SECCOMP_FILTER_FLAG_NEW_LISTENER
 * and *LISTENER receives the notification fd (O_CLOEXEC). */
int ab_seccomp_apply(const ab_seccomp_prog *p, int *listener, ab_err *err);

/* The errno the policy answers a notified (denied) syscall NR with: the
 * errno of its rules (EPERM, EAFNOSUPPORT for socket families), EPERM for
 * anything the policy does not know (fail closed). */
int ab_seccomp_deny_errno(const ab_seccomp_policy *pol, int nr);
/* The same for every number below N at once (one pass over the tables). */
void ab_seccomp_deny_errnos(const ab_seccomp_policy *pol, int16_t *out, size_t n);

/* Does NR notify as a rename (notify_rename, and not denied by the policy)?
 * The supervisor carries it out or continues it; anything else it is sent
 * is a denial. */
bool ab_seccomp_notifies_rename(const ab_seccomp_policy *pol, int nr);

/* The calls notify_learn notifies, native names (absent ones skipped). */
#define AB_SECCOMP_LEARN_CALLS                                \
	{                                                     \
		"open", "openat", "creat", "mkdir", "mkdirat" \
	}
/* Does NR notify for the learning record (notify_learn, and not denied)? */
bool ab_seccomp_notifies_learn(const ab_seccomp_policy *pol, int nr);

/* The calls notify_create notifies, native names (absent ones skipped);
 * open and openat only with O_CREAT, O_TRUNC or for writing. */
#define AB_SECCOMP_CREATE_CALLS                                                               \
	{                                                                                     \
		"open", "openat", "creat", "mkdir", "mkdirat", "mknod", "mknodat", "symlink", \
			"symlinkat", "link", "linkat", "rename", "renameat", "renameat2"      \
	}
/* Does NR notify as a creation call (notify_create, and not denied)? */
bool ab_seccomp_notifies_create(const ab_seccomp_policy *pol, int nr);

/* Does NR notify as a connect (notify_connect, and not denied)? */
bool ab_seccomp_notifies_connect(const ab_seccomp_policy *pol, int nr);

/* Is a denial of NAME one that ordinary programs meet on every start (ps
 * probing NUMA support) and cope with?  The record keeps it; the exit
 * summary leaves it out, so that a summary line always means something. */
bool ab_seccomp_denial_is_probe(const char *name);

/* The syscall's name for the record ("syscall_N" when unknown). */
void ab_seccomp_name(int nr, char *buf, size_t size);

/* Does the kernel's seccomp action cache (Linux 5.11) let syscall NR skip
 * every program of P, i.e. does each one return ALLOW for NR on the native
 * arch without reading an argument?  The same emulation the kernel runs when
 * a filter is loaded (seccomp_is_const_allow).  False for an empty P. */
bool ab_seccomp_cached(const ab_seccomp_prog *p, int nr);

/* Human-readable PFC export of the libseccomp part (tests, `explain --seccomp`),
 * followed by a commented disassembly of the guard program. */
int ab_seccomp_export_pfc(const ab_seccomp_policy *pol, FILE *out, ab_err *err);

/* One line per rule group for `explain`, e.g.
 *   "EPERM: bpf perf_event_open userfaultfd ..."  "ENOSYS: clone3 fsopen ..." */
int ab_seccomp_describe(const ab_seccomp_policy *pol, ab_strv *lines, ab_err *err);

#endif
