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

/* Nested git repositories armed since SINCE are disarmed
 * (src/observe/gitnest.c); a "?" protect entry absent at the start that
 * exists now is moved aside to NAME.agentbox-disarmed.  Each move is said on
 * stderr and, with AUDIT, in the log.  The test ablation "settle" only says
 * what it would move. */
void ab_settle_run(const struct ab_plan *plan, struct timespec since, struct ab_audit *audit);

#endif
