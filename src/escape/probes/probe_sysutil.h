/* SPDX-License-Identifier: MIT */
/*
 * probe_sysutil.h: helpers of the process, keyring, terminal and kernel
 * probes (probe_prc.c, probe_secproc.c, probe_tty.c, probe_krn.c), defined
 * in probe_sysutil.c, and the syscall numbers and flags they need that
 * older headers lack.  Private to src/escape/probes/.  Inside the sandbox,
 * in a probe's forked child only.
 */
#ifndef AGENTBOX_ESCAPE_PROBE_SYSUTIL_H
#define AGENTBOX_ESCAPE_PROBE_SYSUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agentbox/escape.h"

/* Newer than Debian 12's headers (asm-generic numbers, shared by x86_64 and aarch64). */
#ifndef SYS_statmount
#define SYS_statmount 457
#endif
#ifndef SYS_listmount
#define SYS_listmount 458
#endif
#ifndef SYS_lsm_set_self_attr
#define SYS_lsm_set_self_attr 460
#endif
#ifndef SYS_open_tree_attr
#define SYS_open_tree_attr 467
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef OPEN_TREE_CLONE
#define OPEN_TREE_CLONE 1
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef SECBIT_NOROOT
#define SECBIT_NOROOT 1
#endif

#define PSYS_SMALL 8192
#define PSYS_SUB_TIMEOUT_MS 2000
#define PSYS_L(x) ((long)(uintptr_t)(x))

/* errnos that mean "blocked": EPERM/ENOSYS (seccomp, or a capability check) */
extern const int psys_b_seccomp[];
extern const int psys_b_enosys[];

const char *psys_ename(int e);
/* ret >= 0: ESCAPED.  A failure with an errno in `blocked` (or any failure
 * when blocked is NULL): OK with `layer`.  Any other errno (EBADF, EFAULT,
 * EINVAL...): the call reached the kernel, not filtered: ESCAPED. */
void psys_rec_filtered(ab_probe_run *r, const char *what, long ret, int err, const int *blocked,
		       const char *layer);
/* Name the layer of the last attempt: l1 if err == e1, l2 if err == e2 (e2 != 0). */
void psys_layer_for(ab_probe_run *r, int err, int e1, const char *l1, int e2, const char *l2);
/* Up to n-1 bytes of a file, NUL-terminated; -1 with errno. */
ssize_t psys_read_small(const char *path, char *buf, size_t n);
/* Printable copy of s (trailing newline dropped), at most n-1 chars. */
void psys_printable(const char *s, size_t len, char *out, size_t n);
/* Open path O_WRONLY|O_APPEND and close it without writing; an fd is ESCAPED. */
void psys_open_for_write(ab_probe_run *r, const char *path);
/* Open, read and scan path: a canary found is ESCAPED; else opening it is
 * ESCAPED when escape_on_open, OK when not.  A failed open is blocked
 * (ENOENT names pid-ns, another errno fail_layer when given). */
void psys_read_scan(ab_probe_run *r, const char *what, const char *path, bool escape_on_open,
		    const char *fail_layer);
/* Whether pid is in our session, i.e. one of this sandbox's processes (a
 * lab pid number that exists here is pid reuse).  Not pid 1, agentbox's
 * init: callers treat it apart. */
bool psys_pid_is_ours(pid_t pid);
/* Scan every readable /proc/PID/{environ,cmdline} but our own; with
 * count_outside, processes of other sessions than ours (pid 1 aside) are
 * counted as visible from outside: any is ESCAPED. */
void psys_scan_all_procs(ab_probe_run *r, bool count_outside);

/* A forked sub-child, so that a success cannot change the probe process. */
struct psys_out {
	long ret;
	int err;
};
typedef long (*psys_fn)(const void *arg);
/* 0 with *out filled; the signal that killed the child; -1 (timeout, fork). */
int psys_sub_run(psys_fn fn, const void *arg, struct psys_out *out);
/* Record a sub_run result: SIGSYS is OK (seccomp), another signal or no
 * result is an ERROR, else psys_rec_filtered. */
void psys_rec_sub(ab_probe_run *r, const char *what, int rc, const struct psys_out *o,
		  const int *blocked, const char *layer);

/* A raw syscall with up to 6 arguments, run in a sub-child. */
struct psys_sc {
	const char *what;
	long nr;
	long a[6];
	const int *blocked; /* NULL: a real attempt, any failure blocks */
	const char *layer;  /* layer to name when blocked, or NULL (errno's guess) */
};
void psys_run_table(ab_probe_run *r, const struct psys_sc *t, size_t n);

#endif
