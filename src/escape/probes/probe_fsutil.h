/* SPDX-License-Identifier: MIT */
/*
 * Internal to src/escape/probes/: helpers of the file, secret and
 * persistence probes (probe_fsutil.c), used by probe_fs.c, probe_fsctl.c,
 * probe_fsmount.c and probe_secper.c.  Inside the sandbox only.
 */
#ifndef AGENTBOX_ESCAPE_PROBE_FSUTIL_H
#define AGENTBOX_ESCAPE_PROBE_FSUTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/types.h>

#include "agentbox/escape.h"

#define PMAX 4096
#define READ_MAX (1u << 20)
#define RD_FLAGS (O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
#define APPEND_FLAGS (O_WRONLY | O_APPEND | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)

/* A failed create/open with one of these is "blocked"; anything else
 * (EEXIST, ENOSPC, ...) means the attempt did not really happen. */
extern const int fsp_k_blocked[];

/* snprintf that reports truncation (false). */
bool fsp_pf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
double fsp_now_ms(void);
const char *fsp_ename(int e); /* "ENOENT" */
const char *fsp_run_id(ab_probe_run *r);
/* DIR/abprobe-RUNID-TAG (DIR "/" gives /abprobe-...). */
bool fsp_mkname(char *buf, size_t n, ab_probe_run *r, const char *dir, const char *tag);
bool fsp_write_str(int fd, const char *s);
void fsp_mark(json_t *arr, const char *path);
/* Hand an array to the report if it holds anything (else drop it). */
void fsp_report_arr(ab_probe_run *r, const char *key, json_t *arr);
bool fsp_under(const char *path, const char *dir);
/* The places that are private tmpfs inside (threat-model.md section 5). */
bool fsp_is_private(ab_probe_run *r, const char *p);
/* ab_pr_sys, except that a failure with one of `reached` (0-terminated)
 * shows the call got past every permission check: ESCAPED. */
void fsp_sys_reach(ab_probe_run *r, const char *what, long ret, int err, const int *reached,
		   const char *why);
/* Make a call, then record it like ab_pr_sys / fsp_sys_reach.  errno is
 * read after the call (never pass `call(), errno` as two arguments: their
 * order of evaluation is unspecified).  Evaluates to the call's result. */
#define FSP_SYS(r, what, call)                              \
	({                                                  \
		long fsp_ret_ = (long)(call);               \
		int fsp_err_ = errno;                       \
		ab_pr_sys((r), (what), fsp_ret_, fsp_err_); \
		fsp_ret_;                                   \
	})
#define FSP_REACH(r, what, call, reached, why)                                    \
	({                                                                        \
		long fsp_ret_ = (long)(call);                                     \
		int fsp_err_ = errno;                                             \
		fsp_sys_reach((r), (what), fsp_ret_, fsp_err_, (reached), (why)); \
		fsp_ret_;                                                         \
	})
/* Zero-byte open for appending, recorded like ab_pr_sys. */
void fsp_append_open(ab_probe_run *r, const char *what, const char *path, bool follow);
/* pread from offset 0 (an inherited fd's offset stays); bytes or -1. */
ssize_t fsp_fd_read_all(int fd, char *buf, size_t max);
/* Read and scan a regular-file fd; records "what".  Returns tokens. */
int fsp_scan_fd(ab_probe_run *r, const char *what, int fd, bool escape_on_open);
/* openat + fsp_scan_fd; the open's failure recorded like ab_pr_sys. */
int fsp_read_at(ab_probe_run *r, const char *what, int dirfd, const char *rel, bool escape_on_open);
/* Follow ".." from dirfd to its top: 1 if that is not this process's root
 * (*top gets an O_PATH fd on it), 0 if it is, -1 undetermined (errno). */
int fsp_dir_top(int dirfd, int *top);
/* Is mount MNT_ID idmapped, by the mountinfo text MI (its per-mount options
 * carry "idmapped", Linux 5.12)?  1 yes, 0 no, -1 no line for MNT_ID. */
int fsp_mountinfo_idmapped(const char *mi, unsigned long long mnt_id);
/* The same for the mount PATH (not followed) is on: 1, 0, -1 undetermined. */
int fsp_path_idmapped(const char *path);
/* Record whether dirfd reaches outside the sandbox's tree; if it does, try
 * the lab's canaries relative to the top. */
void fsp_check_dir_fd(ab_probe_run *r, const char *what, int dirfd);

/* ---- the bounded recursive reader ("the secret sweep") ---- */
typedef int (*fsp_scan_fn)(void *ctx, const char *what, const void *buf, size_t n);
int fsp_scan_pr(void *ctx, const char *what, const void *buf, size_t n);    /* ctx: the run */
int fsp_scan_count(void *ctx, const char *what, const void *buf, size_t n); /* counts only */

struct fsp_walk {
	fsp_scan_fn scan;
	void *ctx;
	char *buf; /* READ_MAX */
	int files, dirs, tokens, unreadable, max_depth, max_files;
	double deadline;
	const char *skip_name; /* a directory name not to enter (".git") */
	const char *skip_path; /* a directory not to enter (the workspace) */
};
void fsp_walk_init(struct fsp_walk *w, fsp_scan_fn fn, void *ctx, char *buf, int depth,
		   double budget_ms);
/* Read and scan dfd/name (a regular file, never a link or a device). */
void fsp_walk_file(struct fsp_walk *w, int dfd, const char *name, const char *path);
/* Walk the directory dfd (taken over) named path. */
void fsp_walk_dir(struct fsp_walk *w, int dfd, const char *path, int depth);
/* Walk path (or read it, if a file) and record one attempt for it. */
void fsp_walk_record(ab_probe_run *r, const char *path, int depth, double budget_ms,
		     const char *skip_path);

/* The home directories to try: the lab's, $HOME, the passwd entry's. */
struct fsp_homes {
	const char *v[4];
	size_t n;
};
void fsp_homes_add(struct fsp_homes *h, const char *p);
void fsp_homes_get(ab_probe_run *r, struct fsp_homes *h, bool with_root);
/* Read HOME/rel for every home (a file without a canary is recorded OK). */
void fsp_read_home_files(ab_probe_run *r, const struct fsp_homes *h, const char *const *rels,
			 size_t n);

#endif
