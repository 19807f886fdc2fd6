/* SPDX-License-Identifier: MIT */
/*
 * Renames onto a rendered credentials file (parent: the server thread).
 *
 * A rendered credentials file (docs/credentials.md) is a mount point inside:
 * a harness that saves a refreshed login by writing a new file next to it
 * and renaming that over it gets EBUSY from the kernel.  With notify_rename
 * every rename notifies.  One whose target is not exactly a rendered file
 * (the common case: decided on the new name's last component alone, then on
 * the whole path) continues: the kernel does it, as without agentbox.  One
 * onto a rendered file is carried out here, as the sandbox: the new file's
 * bytes are copied into the rendered copy and the new file is removed.
 *
 * The supervisor runs outside Landlock and may be root, so it must not be a
 * confused deputy.  It only ever copies a file the sandbox itself made into
 * the sandbox's own copy:
 *   - every path is resolved in the caller's root (/proc/TID/root,
 *     RESOLVE_IN_ROOT), with no symlink and no magic link anywhere on the
 *     way (RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS, O_NOFOLLOW);
 *   - the new file (ab_sup_rename_refusal) is a regular file with one link,
 *     owned by the sandbox's host uid, born after the sandbox started (so
 *     the sandbox made it, or moved it there: it could write and remove
 *     files in that directory itself, agentbox's Landlock rules grant
 *     writing as a whole), at most 64 KiB, not a mount point, in the same
 *     directory (and mount) as the target;
 *   - the target is a tmpfs file that is a mount point, with no name left
 *     anywhere (its staging name was removed once it was mounted), owned by
 *     the sandbox's uid: the rendered copy in the sandbox's staging memory,
 *     which the sandbox can rewrite in place anyway;
 *   - it reads and removes the new file with the sandbox's uid and gid on
 *     the file system (carry_out_as_sandbox), so only if the sandbox may;
 *   - anything else is left to the kernel (CONTINUE), which answers as
 *     before (EBUSY for the mount point) with every check of its own: a
 *     second thread of the caller changing the paths meanwhile gets nothing
 *     the caller could not do itself.
 * What is copied is the sandbox's own (placeholders: it never holds real
 * values); the real tokens reach the host file only through the proxy's
 * capture of the token response (src/egress/broker.c).  Nothing of the
 * content is logged.
 */
#include "supervise_int.h"

#include "agentbox/plan.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

/* a rename's paths as the caller gave them, the directory they are relative
 * to, joined; the new file's bytes */
struct rename_buf {
	char new_raw[PATH_MAX], old_raw[PATH_MAX];
	char nbase[PATH_MAX], obase[PATH_MAX];
	char norm[2 * PATH_MAX], nfull[2 * PATH_MAX + 2], ofull[2 * PATH_MAX + 2];
	char data[AB_SUP_RENDERED_MAX + 1];
};

static bool same_file(const struct statx *a, const struct statx *b)
{
	return a->stx_dev_major == b->stx_dev_major && a->stx_dev_minor == b->stx_dev_minor &&
	       a->stx_ino == b->stx_ino;
}

int sup_rename_configure(ab_supervisor *s, const struct ab_plan *plan, ab_err *err)
{
	for (size_t i = 0; i < plan->nmounts; i++) {
		const ab_mount *m = &plan->mounts[i];
		if (m->kind != AB_MNT_CONTENT || !(m->flags & AB_MNT_F_RENDER))
			continue;
		char **v = realloc(s->rendered, (s->nrendered + 1) * sizeof(*v));
		if (!v)
			return ab_fail(err, ENOMEM, "supervisor");
		s->rendered = v;
		if (!(v[s->nrendered] = strdup(m->dst)))
			return ab_fail(err, ENOMEM, "supervisor");
		s->nrendered++;
	}
	if (s->nrendered && !s->rb && !(s->rb = malloc(sizeof(*s->rb))))
		return ab_fail(err, ENOMEM, "supervisor");
	return 0;
}

/* The last component of PATH when it names something (not "." or "..", no
 * trailing slash), else NULL. */
static const char *plain_last(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	return *b && strcmp(b, ".") != 0 && strcmp(b, "..") != 0 ? b : NULL;
}

static bool rendered_name(const ab_supervisor *s, const char *name)
{
	for (size_t i = 0; i < s->nrendered; i++) {
		const char *b = strrchr(s->rendered[i], '/');
		if (b && strcmp(b + 1, name) == 0)
			return true;
	}
	return false;
}

/* The directory FULL's last component is in, opened (O_PATH) inside ROOT;
 * *NAME: that component. */
static int open_parent(int root, char *full, const char **name)
{
	char *slash = strrchr(full, '/');
	*slash = '\0';
	*name = slash + 1;
	struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS |
					  RESOLVE_NO_MAGICLINKS};
	int fd = (int)syscall(SYS_openat2, root, full[0] ? full : "/", &how, sizeof(how));
	return fd < 0 ? -errno : fd;
}

/* An O_PATH fd opened again for reading or writing (it is a regular file). */
static int reopen(int fd, int flags)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	int r = open(p, flags | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	return r < 0 ? -errno : r;
}

/* Outcomes of carry_out */
#define RN_GONE (-1)    /* the notification is no longer valid: nothing was done */
#define RN_REFUSED (-2) /* not carried out (*WHY): the kernel's turn (EBUSY) */

/* The paths of a rename onto a rendered file: OLD (read from the caller at
 * OADDR, relative to ODFD) and the new name read before, each joined to the
 * directory it is relative to, as given.  false when one cannot be. */
static bool both_paths(struct rename_buf *b, pid_t tid, int odfd, uint64_t oaddr)
{
	return sup_remote_str(tid, oaddr, b->old_raw, sizeof(b->old_raw)) == 0 &&
	       plain_last(b->old_raw) &&
	       sup_caller_base(tid, b->old_raw, odfd, b->obase, sizeof(b->obase)) >= 0 &&
	       sup_join_raw(b->obase, b->old_raw, b->ofull, sizeof(b->ofull)) >= 0 &&
	       sup_join_raw(b->nbase, b->new_raw, b->nfull, sizeof(b->nfull)) >= 0;
}

/* The bytes of the new file SRC (O_PATH) into B->data: their length (one
 * more than AB_SUP_RENDERED_MAX: too long), or -1 (unreadable) */
static ssize_t read_new(int src, struct rename_buf *b)
{
	_cleanup_close_ int rfd = reopen(src, O_RDONLY);
	size_t len = 0;
	if (rfd < 0)
		return -1;
	/* an interrupted read is tried again, never taken for the end: a short
	 * copy would be saved as the credentials file */
	while (len < sizeof(b->data)) {
		ssize_t n = read(rfd, b->data + len, sizeof(b->data) - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			break;
		len += (size_t)n;
	}
	return (ssize_t)len;
}

/* DATA as the whole content of the rendered copy WFD: 0, or EIO */
static int write_copy(int wfd, const char *data, size_t len)
{
	if (ftruncate(wfd, 0) < 0)
		return EIO;
	for (size_t off = 0; off < len;) {
		ssize_t n = pwrite(wfd, data + off, len - off, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return EIO;
		off += (size_t)n;
	}
	return 0;
}

/* The rename of OLD (relative to ODFD) onto the rendered file whose path
 * the caller gave as s->rb->new_raw (relative to s->rb->nbase): carried
 * out (0; EIO when the copy failed after the new file was removed), or
 * RN_REFUSED (*WHY), or RN_GONE.  Runs as the sandbox's uid and gid on the
 * file system (as_sandbox). */
static int carry_out(ab_supervisor *s, uint64_t id, pid_t tid, int odfd, uint64_t oaddr,
		     const char **why)
{
	struct rename_buf *b = s->rb;
	*why = "the new file's path cannot be read";
	if (!both_paths(b, tid, odfd, oaddr))
		return RN_REFUSED;
	char rootp[64];
	snprintf(rootp, sizeof(rootp), "/proc/%d/root", (int)tid);
	*why = "a path cannot be resolved inside the sandbox without symlinks";
	_cleanup_close_ int root = open(rootp, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return RN_REFUSED;
	const char *oname, *nname;
	_cleanup_close_ int odir = open_parent(root, b->ofull, &oname);
	_cleanup_close_ int ndir = open_parent(root, b->nfull, &nname);
	if (odir < 0 || ndir < 0)
		return RN_REFUSED;
	_cleanup_close_ int src = openat(odir, oname, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	_cleanup_close_ int tgt = openat(ndir, nname, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct statx xs, xsd, xt, xtd;
	struct statfs fs;
	if (src < 0 || tgt < 0 || sup_statx_fd(src, &xs) < 0 || sup_statx_fd(odir, &xsd) < 0 ||
	    sup_statx_fd(tgt, &xt) < 0 || sup_statx_fd(ndir, &xtd) < 0 || fstatfs(tgt, &fs) < 0)
		return RN_REFUSED;
	*why = ab_sup_rename_refusal(&xs, &xsd, &xt, &xtd, fs.f_type == TMPFS_MAGIC, s->kuid,
				     s->t0.tv_sec, (uint32_t)s->t0.tv_nsec);
	if (*why)
		return RN_REFUSED;
	*why = "the new file cannot be read";
	ssize_t len = read_new(src, b);
	if (len < 0 || len > AB_SUP_RENDERED_MAX)
		return RN_REFUSED;
	*why = "the rendered copy cannot be written";
	_cleanup_close_ int wfd = reopen(tgt, O_WRONLY);
	if (wfd < 0)
		return RN_REFUSED;
	/* all checked: is it still the same caller, stopped in this very call? */
	if (!sup_still_valid(s, id))
		return RN_GONE;
	struct statx now;
	*why = "the new file cannot be removed";
	if (statx(odir, oname, AT_SYMLINK_NOFOLLOW, STATX_INO, &now) < 0 || !same_file(&now, &xs) ||
	    unlinkat(odir, oname, 0) < 0)
		return RN_REFUSED;
	/* the new file is gone: its bytes are the rendered copy's now */
	*why = "the rendered copy cannot be written";
	int e = write_copy(wfd, b->data, (size_t)len);
	if (e)
		return e;
	*why = NULL;
	return 0;
}

/* The file system checks of this thread as the sandbox's: its uid and gid
 * (setfsuid/setfsgid act on the calling thread only; for a root agentbox
 * the change from fsuid 0 also drops CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
 * and CAP_FOWNER from its effective set, and its supplementary groups were
 * cleared when the thread started).  So the new file is read and removed
 * only if the sandbox's uid may; Landlock is the directory's: the sandbox
 * made or moved the new file there, so it holds the write rights on it,
 * which include reading and removing. */
static int carry_out_as_sandbox(ab_supervisor *s, uint64_t id, pid_t tid, int odfd, uint64_t oaddr,
				const char **why)
{
	uid_t ouid = (uid_t)setfsuid(s->kuid);
	gid_t ogid = (gid_t)setfsgid(s->kgid);
	int r = RN_REFUSED;
	*why = "cannot take the sandbox's uid";
	if ((uid_t)setfsuid((uid_t)-1) == s->kuid && (gid_t)setfsgid((gid_t)-1) == s->kgid)
		r = carry_out(s, id, tid, odfd, oaddr, why);
	setfsgid(ogid);
	setfsuid(ouid);
	return r;
}

static void log_rename(ab_supervisor *s, pid_t tid, const char *dst, const char *why)
{
	if (why &&
	    !ab_sup_bucket_take(&s->bucket, ab_now_ms(), AB_SUP_RATE_PER_S, AB_SUP_RATE_BURST)) {
		s->cred_suppressed++;
		return;
	}
	long pid = sup_inner_pid(s, tid);
	json_t *ev = json_object();
	json_object_set_new(ev, "event",
			    json_string(why ? "credentials-refused" : "credentials-saved"));
	json_object_set_new(ev, "path", sup_bytes_json(dst));
	json_object_set_new(ev, "pid", json_integer(pid));
	if (why)
		json_object_set_new(ev, "reason", json_string(why));
	ab_audit_emit(s->audit, ev);
}

/* A rename not onto a rendered file: the kernel's, or with notify_create the
 * creator's (never CONTINUE then: src/observe/supervise_create.c) */
static void pass_on(ab_supervisor *s, const struct seccomp_notif *rq)
{
	if (s->pol->notify_create)
		sup_on_create(s, rq);
	else
		sup_answer(s, rq->id, 0, true);
}

void sup_on_rename(ab_supervisor *s, const struct seccomp_notif *rq)
{
	pid_t tid = (pid_t)rq->pid;
	const __u64 *a = rq->data.args;
	int odfd = AT_FDCWD, ndfd = AT_FDCWD;
	uint64_t oaddr = a[1], naddr = a[3];
	unsigned flags = rq->data.nr == SYS_renameat2 ? (unsigned)a[4] : 0;
#ifdef SYS_rename
	if (rq->data.nr == SYS_rename) {
		oaddr = a[0];
		naddr = a[1];
	} else
#endif
	{
		odfd = (int)a[0];
		ndfd = (int)a[2];
	}
	struct rename_buf *b = s->rb;
	/* the common case, at once: not onto a rendered file (or flags the
	 * kernel would refuse anyway): the kernel does it */
	const char *nname;
	if (!b || s->no_groups_failed || flags ||
	    sup_remote_str(tid, naddr, b->new_raw, sizeof(b->new_raw)) != 0 ||
	    !(nname = plain_last(b->new_raw)) || !rendered_name(s, nname) ||
	    sup_caller_base(tid, b->new_raw, ndfd, b->nbase, sizeof(b->nbase)) < 0 ||
	    ab_sup_path_norm(b->nbase, b->new_raw, b->norm, sizeof(b->norm)) < 0) {
		pass_on(s, rq);
		return;
	}
	const char *dst = NULL;
	for (size_t i = 0; i < s->nrendered && !dst; i++)
		if (strcmp(s->rendered[i], b->norm) == 0)
			dst = s->rendered[i];
	if (!dst) {
		pass_on(s, rq);
		return;
	}
	const char *why = NULL;
	int e = carry_out_as_sandbox(s, rq->id, tid, odfd, oaddr, &why);
	if (e == RN_GONE)
		return; /* the caller went away: nothing was done */
	/* refused: the kernel does what it did before (EBUSY on the mount
	 * point; ENOENT, EXDEV, ENOTDIR... first), as the caller, with every
	 * check of its own: letting it continue grants nothing */
	if (e == RN_REFUSED)
		pass_on(s, rq);
	else
		sup_answer(s, rq->id, e, false);
	log_rename(s, tid, dst, why);
}
