/* SPDX-License-Identifier: MIT */
/*
 * run --ask, the paths (parent, after the run; docs/ask.md): the creations
 * the sandbox's rules refused (the supervisor's record) turned into the
 * profile lines that would grant them (the learning rules), offered on the
 * user's terminal as a diff of the profile "always" writes, written after
 * `y`; without a terminal, listed in the exit summary.
 */
#ifndef AGENTBOX_SANDBOX_PATHOFFER_H
#define AGENTBOX_SANDBOX_PATHOFFER_H

#include <stdbool.h>

#include "agentbox/audit.h"
#include "agentbox/plan.h"
#include "agentbox/supervise.h"

/* After the run (the terminal restored, the supervisor finished): offer
 * SUP's refused paths when PLAN asks and the outer terminal may be asked
 * (the asker's rules: --ask, stdin a terminal given to the pty, /dev/tty);
 * else list them on stderr when SUMMARY.  Every offer and answer goes to
 * AUDIT.  Nothing recorded: nothing said. */
void ab_path_offer(const ab_plan *plan, const ab_supervisor *sup, ab_audit *audit, bool summary);

#endif
