/* SPDX-License-Identifier: MIT */
/* Protected paths changed from outside: inotify on the protected inodes
 * (parent).  See include/agentbox/watch.h. */
#include "watch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

/* Is DST's covering mount (the deepest other mount at or above it) a bind of
 * a host directory?  Then a rename or unlink of DST on the host detaches
 * every mount on DST in the sandbox's namespace (Linux >= 3.18), and what a
 * mask or a rendered file covered becomes visible inside. */
static bool host_backed(const ab_plan *plan, const ab_mount *self)
{
	const ab_mount *best = NULL;
	size_t best_len = 0;
	for (size_t i = 0; i < plan->nmounts; i++) {
		const ab_mount *m = &plan->mounts[i];
		size_t n = strlen(m->dst);
		if (m == self || n < best_len || strncmp(self->dst, m->dst, n) != 0)
			continue;
		if (self->dst[n] != '/' && self->dst[n] != '\0' && !(n == 1 && m->dst[0] == '/'))
			continue;
		if (m->kind == AB_MNT_MASK || m->kind == AB_MNT_CONTENT ||
		    m->kind == AB_MNT_SYMLINK || m->kind == AB_MNT_RO_REMOUNT)
			continue; /* covers one path, or changes no content */
		best = m;
		best_len = n;
	}
	return best && (best->kind == AB_MNT_BIND_RO || best->kind == AB_MNT_BIND_RW ||
			best->kind == AB_MNT_PROTECT || best->kind == AB_MNT_PIN);
}

static bool watched(const ab_plan *plan, const ab_mount *m)
{
	if (m->kind == AB_MNT_PROTECT || m->kind == AB_MNT_PLACEHOLDER || m->kind == AB_MNT_PIN)
		return true;
	/* what a hidden path or a rendered credentials file covers on the host */
	return (m->kind == AB_MNT_MASK ||
		(m->kind == AB_MNT_CONTENT && (m->flags & AB_MNT_F_RENDER))) &&
	       host_backed(plan, m);
}

int ab_watch_init(ab_watch *w, const ab_plan *plan, ab_err *err)
{
	*w = (ab_watch){.fd = -1};
	size_t n = 0;
	for (size_t i = 0; i < plan->nmounts; i++)
		n += watched(plan, &plan->mounts[i]);
	if (n == 0)
		return 0;
	w->fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	if (w->fd < 0)
		return ab_fail(err, errno, "watch protected paths");
	return 0;
}

int ab_watch_start(ab_watch *w, const ab_plan *plan, ab_err *err)
{
	size_t n = 0;
	for (size_t i = 0; i < plan->nmounts; i++)
		n += watched(plan, &plan->mounts[i]);
	if (n == 0 || w->fd < 0)
		return 0;
	w->wd = calloc(n, sizeof(*w->wd));
	w->path = calloc(n, sizeof(*w->path));
	if (w->fd < 0 || !w->wd || !w->path) {
		int e = w->fd < 0 ? errno : ENOMEM;
		ab_watch_free(w);
		return ab_fail(err, e, "watch protected paths");
	}
	for (size_t i = 0; i < plan->nmounts; i++) {
		const ab_mount *m = &plan->mounts[i];
		if (!watched(plan, m))
			continue;
		/* removal, rename and (for files) a link-count change from a
		 * rename over it; a directory's own moves and removal */
		uint32_t mask = IN_DELETE_SELF | IN_MOVE_SELF | IN_DONT_FOLLOW;
		if (!(m->flags & AB_MNT_F_DIR))
			mask |= IN_ATTRIB;
		int wd = inotify_add_watch(w->fd, m->dst, mask);
		if (wd < 0) {
			if (errno == ENOENT && m->kind != AB_MNT_PROTECT && m->kind != AB_MNT_PIN)
				continue; /* absent: nothing on the host to uncover (a
					     placeholder that went meanwhile: its cover
					     checks it) */
			/* a hidden file agentbox's caller may not read (/etc/shadow):
			 * the sandbox runs with the same credentials and could not
			 * read it uncovered either */
			if (errno == EACCES && m->kind == AB_MNT_MASK)
				continue;
			int e = errno;
			ab_fail(err, e, "watch protected path %s", m->dst);
			if (e == ENOSPC)
				ab_err_hint(err, "raise fs.inotify.max_user_watches");
			ab_watch_free(w);
			return -e;
		}
		w->wd[w->n] = wd;
		w->path[w->n] = m->dst;
		w->n++;
	}
	return 0;
}

const char *ab_watch_changed(ab_watch *w)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	const char *changed = NULL;
	for (;;) {
		ssize_t len = read(w->fd, buf, sizeof(buf));
		if (len <= 0)
			break;
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			for (size_t i = 0; !changed && i < w->n; i++)
				if (w->wd[i] == ev->wd)
					changed = w->path[i];
			p += sizeof(*ev) + ev->len;
		}
	}
	return changed;
}

void ab_watch_free(ab_watch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	free(w->wd);
	free(w->path);
	*w = (ab_watch){.fd = -1};
}
