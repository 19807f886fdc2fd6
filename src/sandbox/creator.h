/* SPDX-License-Identifier: MIT */
/*
 * The creator: a thread of the sandbox's init that carries out the creation
 * calls the supervisor sends it (include/agentbox/mediate.h).
 */
#ifndef AGENTBOX_CREATOR_H
#define AGENTBOX_CREATOR_H

#include "agentbox/common.h"
#include "agentbox/plan.h"

/* Start it: after Landlock and the capability drop, before seccomp (the
 * thread keeps the first two, and never gets the filter: the filter is
 * loaded without TSYNC, for the loading thread only).  *PARENT_END: the
 * socket the supervisor talks on, to send to the parent. */
int ab_creator_start(const ab_plan *plan, int *parent_end, ab_err *err);

/* The fds the thread holds, which init must keep when it closes the rest:
 * their number, at most MAX written to OUT. */
size_t ab_creator_fds(int *out, size_t max);

#endif
