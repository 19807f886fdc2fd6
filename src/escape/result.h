/* SPDX-License-Identifier: MIT */
/*
 * result.h: what the output formats (report.c) read from the results model
 * (result.c) beyond the public API: a result's effective verdict and
 * category, and the counts per category.  Private to src/escape/.
 */
#ifndef AGENTBOX_ESCAPE_RESULT_H
#define AGENTBOX_ESCAPE_RESULT_H

#include <stdbool.h>
#include <stddef.h>

#include "agentbox/escape.h"

bool escr_is_control(const ab_esc_result *r);
/* The verdict that counts: a control can never "escape" (its failure is
 * an error), an out-of-range verdict is an error. */
enum ab_esc_verdict escr_verdict(const ab_esc_result *r);
/* The probe's category, AB_CAT__N when it has none. */
enum ab_esc_cat escr_cat(const ab_esc_result *r);

typedef struct escr_counts {
	size_t total, by[4]; /* by effective verdict */
	double ms;
} escr_counts;

/* The results of category `cat` (ESCR_ALL_CATS: every category). */
#define ESCR_ALL_CATS (AB_CAT__N + 1u)
void escr_count(const ab_esc_results *rs, unsigned cat, escr_counts *c);

#endif
