/* SPDX-License-Identifier: MIT */
/*
 * The creations and opens for writing the sandbox's rules refused (parent:
 * the supervisor's thread), kept for run --ask's offer at exit and the exit summary
 * (src/sandbox/pathoffer.c, docs/ask.md).
 *
 * A creation call, or an open for writing, is carried out by the creator
 * (supervise_create.c), so its result is seen here: EACCES, EPERM or EROFS (Landlock, a read-only
 * mount), or ENOENT (a directory on the way that the sandbox lacks).  The
 * path is made absolute against the caller's cwd or directory fd while the
 * caller is still stopped, and kept when a draft profile would grant it or
 * name it as left out (the learning rules: ab_learn_matters); a path seen
 * again only counts.  The record is bounded (AB_SUP_REFUSALS_MAX paths; the
 * rest are counted) and kept only when asked for: otherwise this costs one
 * test per refused creation.  Like the learning record it can be lied to by
 * the program it records (the path is read once, as the creator used it):
 * it only ever feeds an offer the user reads before anything is written.
 */
#include "supervise_int.h"

#include "agentbox/learn.h"
#include "agentbox/mediate.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void ab_supervisor_keep_refusals(ab_supervisor *s)
{
	if (s && !s->refusals)
		s->refusals = calloc(AB_SUP_REFUSALS_MAX, sizeof(*s->refusals));
}

const ab_sup_refusal *ab_supervisor_refusals(const ab_supervisor *s, size_t *n, uint64_t *more)
{
	*n = s && s->refusals ? s->nrefusals : 0;
	*more = s ? s->refusals_more : 0;
	return *n ? s->refusals : NULL;
}

void sup_refusal_free(ab_supervisor *s)
{
	for (size_t i = 0; s->refusals && i < s->nrefusals; i++)
		free(s->refusals[i].path);
	free(s->refusals);
	s->refusals = NULL;
	s->nrefusals = 0;
}

/* The program behind TID, as a path inside (its exe), else its comm. */
static void prog_of(pid_t tid, char *out, size_t size)
{
	char link[64];
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)tid);
	ssize_t n = readlink(link, out, size - 1);
	if (n > 0) {
		out[n] = '\0';
		return;
	}
	sup_proc_comm(tid, out, size);
}

void sup_refusal_note(ab_supervisor *s, const struct seccomp_notif *rq, int dfd, const char *path,
		      int r)
{
	if (!s->refusals || !s->plan || !path[0] ||
	    (r != -EACCES && r != -EPERM && r != -EROFS && r != -ENOENT))
		return;
	pid_t tid = (pid_t)rq->pid;
	char base[PATH_MAX], norm[PATH_MAX];
	if (sup_caller_base(tid, path, dfd, base, sizeof(base)) < 0 ||
	    ab_sup_path_norm(base[0] ? base : NULL, path, norm, sizeof(norm)) < 0)
		return;
	for (size_t i = 0; i < s->nrefusals; i++) {
		if (strcmp(s->refusals[i].path, norm) == 0) {
			s->refusals[i].count++;
			return;
		}
	}
	/* an open for writing without O_CREAT of a file the host lacks too: no
	 * grant would make it exist */
	struct stat st;
	if (r == -ENOENT && s->mreq && s->mreq->op == AB_MED_OPEN && !(s->mreq->flags & O_CREAT) &&
	    lstat(norm, &st) < 0)
		return;
	if (s->nrefusals >= AB_SUP_REFUSALS_MAX) {
		s->refusals_more++; /* not judged: a full record costs no more */
		return;
	}
	/* ENOENT: the new name's directory is missing inside (the draft's
	 * CREATE: the nearest directory the host has) */
	enum ab_learn_kind kind = r == -ENOENT ? AB_LEARN_CREATE : AB_LEARN_WRITE;
	if (!ab_learn_matters(s->plan, kind, norm, ab_learn_real_stat, NULL))
		return;
	ab_sup_refusal *e = &s->refusals[s->nrefusals];
	*e = (ab_sup_refusal){.path = strdup(norm), .err = -r, .count = 1};
	if (!e->path)
		return;
	ab_seccomp_name(rq->data.nr, e->call, sizeof(e->call));
	prog_of(tid, e->prog, sizeof(e->prog));
	s->nrefusals++;
}
