/* SPDX-License-Identifier: MIT */
/*
 * After a run: what it left that a host program would run is set aside
 * (settle.h).  Parent, or the cleanup watcher when the parent was killed.
 */
#include "settle.h"
#include "guard.h"

#include "agentbox/audit.h"
#include "agentbox/gitscan.h"
#include "agentbox/plan.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void say(ab_audit *audit, const char *kind, const char *path, const char *line)
{
	ab_warn("%s", line);
	if (!audit)
		return;
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("warning"));
	json_object_set_new(ev, "kind", json_string(kind));
	if (path)
		json_object_set_new(ev, "path", json_string(path));
	json_object_set_new(ev, "message", json_string(line));
	ab_audit_emit(audit, ev);
}

/* Nested repositories armed during the run (src/observe/gitnest.c): every
 * writable directory is walked. */
static size_t settle_nested(const ab_plan *plan, struct timespec since, ab_audit *audit)
{
	ab_gitnest_root roots[64] = {{0}};
	size_t n = 0;
	for (size_t i = 0; i < plan->nmounts && n < AB_ARRAY_SIZE(roots); i++) {
		const ab_mount *m = &plan->mounts[i];
		struct stat st;
		/* review mode: the sandbox wrote the change set, not this tree
		 * (apply judges what it lands) */
		if (m->kind != AB_MNT_BIND_RW || !(m->flags & AB_MNT_F_DIR) || !m->src ||
		    (m->flags & AB_MNT_F_REVIEW) || stat(m->src, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		roots[n] = (ab_gitnest_root){.path = m->src, .dev = st.st_dev, .ino = st.st_ino};
		if (plan->seccomp.notify_create && ab_plan_git_grant(m)) {
			roots[n].tag = plan->git_tag;
			roots[n].index = (unsigned)i;
		}
		ab_err ierr = {0};
		if (ab_gitscan_snapshot(m->src, &roots[n].gitlinks, &ierr) < 0)
			ab_warn("%s: its gitlinks are judged only where the walk reaches",
				ierr.msg);
		n++;
	}
	_cleanup_strv_ ab_strv found = {0};
	ab_err err = {0};
	if (ab_gitnest_settle(roots, n, &plan->git_shared_rel, since, plan->git_settle, &found,
			      &err) < 0)
		ab_warn("%s", err.msg);
	for (size_t i = 0; i < n; i++)
		ab_strv_free(&roots[i].gitlinks);
	for (size_t i = 0; i < found.n; i++)
		say(audit, "git", NULL, found.v[i]);
	return found.n;
}

/* PATH to PATH.agentbox-disarmed (or -2 ... -9), its directory reached
 * without following a symbolic link.  0 or -errno; TO gets the new name. */
static int set_aside(const char *path, char *to, size_t size)
{
	const char *slash = strrchr(path, '/');
	if (!slash || slash == path)
		return -EINVAL;
	char dir[PATH_MAX];
	if ((size_t)(slash - path) >= sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(dir, path, (size_t)(slash - path));
	dir[slash - path] = '\0';
	_cleanup_close_ int dfd = ab_open_nofollow(dir, O_PATH | O_DIRECTORY);
	if (dfd < 0)
		return -errno;
	for (int i = 1; i < 10; i++) {
		if (i == 1)
			snprintf(to, size, "%s.agentbox-disarmed", slash + 1);
		else
			snprintf(to, size, "%s.agentbox-disarmed-%d", slash + 1, i);
		if (renameat2(dfd, slash + 1, dfd, to, RENAME_NOREPLACE) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

/* A "?" protect entry reserves nothing while absent (docs/protected-paths.md),
 * because its reader inside cannot take a placeholder: one the run created
 * is moved aside when it ends. */
static size_t settle_unguarded(const ab_plan *plan, ab_audit *audit)
{
	const ab_strv *u = &plan->unguarded;
	size_t moved = 0;
	for (size_t i = 0; i < u->n; i++) {
		struct stat st;
		if (lstat(u->v[i], &st) < 0)
			continue;
		char c[PATH_MAX * 4 + 1], to[NAME_MAX + 32];
		ab_clean(u->v[i], c, sizeof(c));
		int r = plan->git_settle ? set_aside(u->v[i], to, sizeof(to)) : 0;
		_cleanup_free_ char *line =
			!plan->git_settle
				? ab_asprintf("created during the run and LEFT (test ablation): %s",
					      c)
			: r < 0 ? ab_asprintf(
					  "created during the run and could NOT be moved aside: "
					  "%s: %s; review it before a program on the host reads "
					  "it",
					  c, strerror(-r))
				: ab_asprintf(
					  "created during the run, where a \"?\" entry of "
					  "filesystem.protect reserves nothing: %s, moved to %s; "
					  "review it before you move it back",
					  c, to);
		if (!line)
			return moved;
		say(audit, "unprotected", u->v[i], line);
		moved++;
	}
	return moved;
}

void ab_settle_run(const ab_plan *plan, struct timespec since, ab_guard *guard, ab_audit *audit)
{
	size_t n = settle_nested(plan, since, audit);
	n += settle_unguarded(plan, audit);
	_cleanup_strv_ ab_strv found = {0};
	if (guard)
		ab_guard_settle(guard, plan->git_settle, &found);
	for (size_t i = 0; i < found.n; i++)
		say(audit, "guarded", NULL, found.v[i]);
	n += found.n;
	if (n)
		ab_warn("what was moved aside or put back runs nothing on the host; see "
			"docs/threat-model.md, section 5");
}
