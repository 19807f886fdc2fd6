/* SPDX-License-Identifier: MIT */
/*
 * What explain.c (the text) and explain_json.c (the JSON object) share:
 * how a plan's pieces are named and picked.  Private to src/plan/.
 */
#ifndef AB_EXPLAIN_INT_H
#define AB_EXPLAIN_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "agentbox/plan.h"
#include "agentbox/profile.h"

bool ex_env_value_shown(const char *name, size_t len);
bool ex_mask_listed(const ab_plan *p, const ab_mount *m);
bool ex_pick_protect(const ab_plan *p, const ab_mount *m);
bool ex_pick_ro(const ab_plan *p, const ab_mount *m);
bool ex_pick_rw(const ab_plan *p, const ab_mount *m);
const char *ex_pty_name(const ab_plan *p);
void ex_rights_text(uint64_t access, uint64_t handled, char *buf, size_t len);
const char *ex_rlimit_name(int res);
const char *ex_secret_elsewhere(const ab_egress_plan *e, const struct ab_profile_secret *x,
				char *by, size_t n);
const char *ex_secret_source(const struct ab_profile_secret *x, char *buf, size_t n);

/* explain --json: the whole plan as one JSON object on OUT; 0 or -ENOMEM
 * (the caller checks the stream for write errors). */
int ex_explain_json(const ab_plan *p, const ab_profile *prof, const ab_strv *sc, FILE *out);

#endif
