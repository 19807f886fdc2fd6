/* SPDX-License-Identifier: MIT */
/*
 * The record of what ran and what was denied, parent side: serves the
 * seccomp user-notification listener the sandbox's init hands over
 * (AB_SYNC_NOTIFY).  Exec notifications are logged and continued; denied
 * syscalls are answered with the policy's errno, then logged once per call
 * site, rate-limited; renames onto a rendered credentials file and connects
 * are carried out for the sandbox.  A record, not a decision: see
 * docs/audit.md for the time-of-check caveat.
 */
#ifndef AGENTBOX_SUPERVISE_H
#define AGENTBOX_SUPERVISE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agentbox/audit.h"
#include "agentbox/common.h"
#include "agentbox/loop.h"
#include "agentbox/seccomp.h"

#define AB_SUP_ARGV_MAX 64      /* argv entries kept per exec record */
#define AB_SUP_ARG_MAX 256      /* bytes kept per argv entry (and the path) */
#define AB_SUP_TRACKED_MAX 4096 /* live exec'd processes whose exit is awaited */
#define AB_SUP_SITES_MAX 4096   /* distinct (pid, syscall, call site) denial keys */
#define AB_SUP_RATE_PER_S 50    /* denial records per second, after the burst */
#define AB_SUP_RATE_BURST 200
/* exec records reach the log in batches, this long after the first of one */
#define AB_SUP_BATCH_MS 10

#define AB_SUP_RENDERED_MAX (64 * 1024) /* a new credentials file (= AB_CREDFILE_MAX) */

typedef struct ab_supervisor ab_supervisor;
struct ab_plan;

/* POL: the policy the filter was compiled from (borrowed; for the errnos).
 * AUDIT: the run's log (borrowed).  No fd yet. */
int ab_supervisor_new(const ab_seccomp_policy *pol, ab_audit *audit, ab_supervisor **out,
		      ab_err *err);
/* What the supervisor takes from the plan (copies what it needs): the
 * sandbox's uid and gid on the host; the rendered credentials files
 * (notify_rename: a rename of a new file onto one of them is carried out
 * here, copied in and the new file removed; every other rename continues);
 * for connect mediation, the profile's unix_sockets and the Landlock port
 * rules (a ruleset the connect threads enforce on themselves). */
int ab_supervisor_configure(ab_supervisor *s, const struct ab_plan *plan, ab_err *err);
/* Serve the listener FD (owned from here on, closed on error too) of the
 * sandbox whose first process is INIT (host pid: its pid namespace names the
 * pids in the record). */
int ab_supervisor_attach(ab_supervisor *s, ab_loop *loop, int fd, pid_t init, ab_err *err);
/* The sandbox's NETLINK_SOCK_DIAG socket (AB_SYNC_SOCKDIAG; owned from here
 * on): connect mediation asks it which unix sockets the sandbox bound.  Set
 * before the listener is attached. */
void ab_supervisor_set_diag(ab_supervisor *s, int fd);
/* The creator's socket (AB_SYNC_CREATOR; owned from here on): notify_create's
 * calls are carried out through it (include/agentbox/mediate.h).  Set before
 * the listener is attached. */
void ab_supervisor_set_creator(ab_supervisor *s, int fd);
/* run --learn: fill SET (include/agentbox/learn.h) from the file calls and
 * execs; before attach.  The set is the supervisor's until it is finished. */
struct ab_learn_set;
void ab_supervisor_learn(ab_supervisor *s, struct ab_learn_set *set);
/* run --learn: the program (its path inside) that connected from the
 * sandbox's loopback port PORT, as noted when the supervisor carried the
 * connect out; false when unknown.  Any thread. */
bool ab_supervisor_learn_port(ab_supervisor *s, uint16_t port, char *out, size_t size);
/* run --ask or --trace: keep a bounded record of the creations and opens
 * for writing (notify_create) the sandbox's rules refused - EACCES, EPERM or EROFS from
 * the creator, or ENOENT for a directory on the way the sandbox lacks -
 * de-duplicated by path, kept only when a draft profile would grant or name
 * the path (ab_learn_matters).  Before attach. */
#define AB_SUP_REFUSALS_MAX 64
typedef struct ab_sup_refusal {
	char *path;                /* absolute, normalised, as a path inside */
	char call[24];             /* the call ("openat", "mkdir" ...) */
	int err;                   /* its errno */
	char prog[AB_SUP_ARG_MAX]; /* the program, its path inside */
	uint64_t count;
} ab_sup_refusal;
void ab_supervisor_keep_refusals(ab_supervisor *s);
/* After ab_supervisor_finish: the record (*N entries, NULL when none was
 * kept) and *MORE, refusals of other paths once the record was full (not
 * judged). */
const ab_sup_refusal *ab_supervisor_refusals(const ab_supervisor *s, size_t *n, uint64_t *more);
/* The sandbox is gone: the exits still pending, the repeat counts. */
void ab_supervisor_finish(ab_supervisor *s);
void ab_supervisor_free(ab_supervisor *s);

/* ---- pure pieces, exposed for the unit tests ---- */

/* /proc/PID/status text -> the innermost NStgid and PPid; -1 when absent. */
void ab_sup_parse_status(const char *text, long *ns_tgid, long *ppid, long *tgid);
/* /proc/PID/stat text -> the exit_code field (52), -1 when absent. */
int ab_sup_parse_stat_exit(const char *text);

/* PATH (absolute, or relative to BASE, an absolute path) with "//", "." and
 * ".." resolved as text ("/.." is "/"), no trailing slash, into OUT.  The
 * same as the kernel's walk when nothing on the way is a symlink.  0,
 * -EINVAL (a relative BASE, an empty PATH), -ENAMETOOLONG. */
int ab_sup_path_norm(const char *base, const char *path, char *out, size_t size);

/* What the supervisor checks before it carries out a rename of SRC onto a
 * rendered file (statx of both, the directory SRC is in, the file TARGET
 * is in): NULL when it may, else the reason (static text).  The new file:
 * a regular file with one link, owned by KUID, at most AB_SUP_RENDERED_MAX
 * bytes, no mount point, born (btime) at or after T0 (the sandbox made it),
 * in the same directory as the target.  The target: a regular file with no
 * link left (the staging name is gone), owned by KUID, a mount point, on
 * tmpfs (TARGET_TMPFS): the rendered copy. */
struct statx;
const char *ab_sup_rename_refusal(const struct statx *src, const struct statx *src_dir,
				  const struct statx *target, const struct statx *target_dir,
				  bool target_tmpfs, uid_t kuid, int64_t t0_sec, uint32_t t0_nsec);

/* A token bucket: `rate` per second, `burst` deep; times in ms. */
typedef struct ab_sup_bucket {
	double tokens;
	uint64_t last_ms;
} ab_sup_bucket;
bool ab_sup_bucket_take(ab_sup_bucket *b, uint64_t now_ms, unsigned rate, unsigned burst);

#endif
