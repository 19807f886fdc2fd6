/* SPDX-License-Identifier: MIT */
/*
 * Creation calls carried out for the sandbox (docs/nested-git.md).
 *
 * With the plan's seccomp.notify_create, every call that can give a name to
 * something (open and openat with O_CREAT, creat, mkdir*, mknod*, symlink*,
 * link*, rename*) notifies.  The supervisor (parent, src/observe/
 * supervise_create.c) reads the caller's paths once and sends them, with the
 * directories they are relative to, to the creator: a thread of the
 * sandbox's init (src/sandbox/creator.c) that holds the sandbox's Landlock
 * domain, ids and (no) capabilities but not its seccomp filter.  The creator
 * does the call on that one copy of the paths, so what was judged is what is
 * done: a second thread of the caller rewriting the string meanwhile changes
 * nothing.  A new `.git` in a writable grant backed by the host is made
 * where the host cannot follow it (ab_med_git_name); everything else is done
 * as asked.
 *
 * This header: the wire format between the two, and the pure pieces both
 * use (fuzzed by tests/fuzz/fuzz_mediate.c).
 */
#ifndef AGENTBOX_MEDIATE_H
#define AGENTBOX_MEDIATE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ab_med_op {
	AB_MED_OPEN = 1, /* path1, flags, mode: an fd comes back */
	AB_MED_MKDIR,    /* path1, mode */
	AB_MED_MKNOD,    /* path1, mode, dev */
	AB_MED_SYMLINK,  /* path1 the new name, path2 the link's text */
	AB_MED_LINK,     /* path1 the new name, path2 the existing one, flags */
	AB_MED_RENAME,   /* path1 the new name, path2 the old one, flags */
};

/* which of the request's fds came with it (SCM_RIGHTS, in this order) */
#define AB_MED_FD1 0x1 /* the directory path1 is relative to */
#define AB_MED_FD2 \
	0x2 /* the directory path2 is relative to (or, with
			* AT_EMPTY_PATH, the file itself) */

typedef struct ab_med_req {
	uint32_t op;
	uint32_t flags; /* open flags; rename flags; linkat flags */
	uint32_t mode;
	uint32_t umask;
	uint64_t dev;
	int32_t pid, tid; /* the caller's, inside (for /proc/self and /dev/fd) */
	uint32_t fds;     /* AB_MED_FD* */
	uint32_t len1, len2;
	char paths[2 * PATH_MAX]; /* path1 NUL path2 NUL */
} ab_med_req;

/* the reply: ret (>= 0) or -errno; an fd follows for a successful open */
#define AB_MED_REFUSED 0x1    /* a new .git refused (symlink, link, node, rename) */
#define AB_MED_REDIRECTED 0x2 /* a new .git made where only the sandbox sees it */
#define AB_MED_EVACUATED 0x4  /* a nested .git the host had moved there first */
#define AB_MED_DEFERRED \
	0x8 /* an open of a FIFO waits for its other end: the
			       * fd sent is a socket, the answer (and the fd)
			       * come on it later */
typedef struct ab_med_resp {
	int32_t ret;
	uint32_t what; /* AB_MED_REFUSED, AB_MED_REDIRECTED */
} ab_med_resp;

/* Where a redirected `.git` points: "/.agentbox-git/<grant>/<tag>.<n>", a
 * path of the sandbox's read-only root that the host does not have.
 * <grant> is the index of the writable grant in the plan's mounts, which
 * holds the content in "<grant>/.agentbox-git/<tag>.<n>"; <tag> is the run's
 * (plan->git_tag, hex), so that runs sharing a grant keep apart. */
#define AB_MED_LINK_ROOT "/.agentbox-git"
#define AB_MED_STORE ".agentbox-git"
#define AB_MED_NAME_MAX 63 /* bytes of "<tag>.<n>" */

/* PATH split for a call on its last component: *PARENT (a copy, "." or
 * "/" when there is none) and *LAST (the last component with any trailing
 * slashes, as the call needs them), *NAME_LEN its length without them.
 * false when there is no last component to act on ("", "/", ".", "..",
 * "a/.."): then the call is made on the whole path.  PARENT holds PATH_MAX. */
bool ab_med_split(const char *path, char *parent, size_t parent_size, const char **last,
		  size_t *name_len);

/* Is NAME (LEN bytes) ".git" in any case (a case-folding directory finds
 * ".GIT" for ".git")? */
bool ab_med_git_name(const char *name, size_t len);

/* PATH rewritten for a resolver that is not the caller: /proc/self,
 * /proc/thread-self, /dev/fd and /dev/std{in,out,err} name the caller's
 * (PID, TID inside).  1 = rewritten into OUT, 0 = not one of those
 * (OUT untouched), -1 = too long. */
int ab_med_proc_rewrite(const char *path, int pid, int tid, char *out, size_t size);

/* Is TEXT (a symlink's target) one that a redirected `.git` carries? */
bool ab_med_is_redirect(const char *text);

/* A redirect's target parsed: the grant's mount index and the entry's
 * name in its store ("<tag>.<n>").  false when TEXT is not exactly one. */
bool ab_med_parse_redirect(const char *text, unsigned *grant, char *name, size_t size);

#endif
