/* SPDX-License-Identifier: MIT */
/*
 * After a run (parent, or the cleanup watcher when the parent was killed):
 * what the run left that a host program would run is set aside
 * (docs/threat-model.md, section 5).
 */
#ifndef AGENTBOX_SETTLE_H
#define AGENTBOX_SETTLE_H

#include <time.h>

struct ab_plan;
struct ab_audit;
struct ab_guard;

/* Nested git repositories armed since SINCE are disarmed
 * (src/observe/gitnest.c); a "?" protect entry absent at the start that
 * exists now is moved aside to NAME.agentbox-disarmed; the guarded keys of
 * JSON files the run changed are put back (guard.h).  Each move is said on
 * stderr and, with AUDIT, in the log.  The test ablation "settle" only says
 * what it would move. */
void ab_settle_run(const struct ab_plan *plan, struct timespec since, struct ab_guard *guard,
		   struct ab_audit *audit);

#endif
