/* SPDX-License-Identifier: MIT */
/*
 * Guarded JSON files get a private copy for the run (parent, pure).
 *
 * filesystem.guard names keys of a harness's state file that make the
 * harness, run later on the host, start a program or trust a folder.  The
 * file is granted writable because the harness must keep its state in it;
 * if the sandbox wrote the host's file, those keys would be live on the
 * host while the run lasts (a `claude` started outside meanwhile obeys
 * them).  So a guarded file granted on its own (a writable file bind of
 * exactly that path) is shown as a copy: the parent makes it next to the
 * file before the sandbox starts (src/sandbox/guard.c), the bind takes it in
 * place of the file, and when the run ends what the run changed of the
 * file's other keys is merged into the host's file, key by key against what
 * the host changed meanwhile.  A guarded file that is only writable as part
 * of a granted directory keeps the older way: its guarded keys are put back
 * when the run ends.
 */
#include "plan_int.h"

#include <errno.h>
#include <string.h>

/* The writable bind of exactly FILE (its own grant), or NULL. */
static ab_mount *file_bind(ab_plan *p, const char *file)
{
	for (size_t i = 0; i < p->nmounts; i++) {
		ab_mount *m = &p->mounts[i];
		if (m->kind == AB_MNT_BIND_RW && !(m->flags & (AB_MNT_F_DIR | AB_MNT_F_SYMLINK)) &&
		    m->src && strcmp(m->src, file) == 0 && strcmp(m->dst, file) == 0)
			return m;
	}
	return NULL;
}

int pl_plan_guard_copies(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	if (in->ablate & AB_ABLATE_GUARDCOPY)
		return 0;
	for (size_t i = 0; i < p->guard.n; i++) {
		const char *e = p->guard.v[i];
		const char *hash = strstr(e, "#/");
		_cleanup_free_ char *file = hash ? strndup(e, (size_t)(hash - e)) : NULL;
		if (!file)
			return ab_fail(err, ENOMEM, "plan");
		ab_mount *m = file_bind(p, file);
		if (!m || m->copy)
			continue;
		m->copy = ab_asprintf("%s.agentbox-%s", file, p->git_tag);
		if (!m->copy)
			return ab_fail(err, ENOMEM, "plan");
		m->flags |= AB_MNT_F_COPY;
	}
	return 0;
}
