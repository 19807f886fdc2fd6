/* SPDX-License-Identifier: MIT */
/* argv -> struct ab_cli.  Pure: no I/O except what the caller prints. */
#ifndef AGENTBOX_CLI_H
#define AGENTBOX_CLI_H

#include "agentbox/common.h"

enum ab_cmd {
	AB_CMD_NONE,
	AB_CMD_RUN,
	AB_CMD_CHECK,
	AB_CMD_EXPLAIN,
	AB_CMD_DOCTOR,
	AB_CMD_HELP,
	AB_CMD_VERSION,
	AB_CMD_ALLOW,
	AB_CMD_TEST_ESCAPE,
	AB_CMD_REPORT,
	AB_CMD_REVIEW, /* review mode's change set: show, land, drop (docs/review.md) */
	AB_CMD_APPLY,
	AB_CMD_DISCARD
};

typedef struct ab_cli {
	enum ab_cmd cmd;
	enum ab_cmd help_for;   /* AB_CMD_HELP: which command's help (NONE = global) */
	ab_strv profiles;       /* -p, repeatable, merged left to right; empty = "default" */
	char *workspace;        /* -w; NULL = cwd */
	bool json;              /* explain/doctor/report --json */
	bool quiet;             /* run -q: no warnings */
	int pty;                /* run: 1 --pty, 0 --no-pty, -1 auto */
	char *log_path;         /* run --log FILE: egress audit log (overrides the profile's) */
	char *otlp_url;         /* run --otlp URL: the audit events also go to that collector */
	int trace;              /* run --trace[=best-effort]: enum ab_trace_mode (trace.h) */
	bool ask;               /* run --ask */
	unsigned ask_timeout_s; /* run --ask-timeout S; 0 = default */
	char *ask_profile;      /* run --ask-profile FILE */
	char *learn;            /* run --learn FILE: write a draft profile there (learn_run.c) */
	ab_strv grants;         /* run/explain one-off grants, in order: "allow=HOST[:PORT]",
				 "read=PATH", "write=PATH", "env=NAME" */
	char **argv;            /* run: command (points into the original argv) */
	int argc;
	char *format;       /* test-escape --format tap|junit|json (NULL = tap) */
	char *out_path;     /* test-escape -o FILE (NULL = stdout) */
	char *only;         /* test-escape --only ID,... */
	bool list;          /* test-escape --list */
	bool review;        /* run/explain --review: a copy-on-write view of the workspace */
	bool diff;          /* review --diff: the unified diff, through $PAGER */
	char **check_files; /* check: profile names/paths (points into argv) */
	int ncheck;
} ab_cli;

/* Parse.  On a usage error returns -EINVAL with a message (exit 125). */
int ab_cli_parse(int argc, char **argv, ab_cli *out, ab_err *err);
void ab_cli_free(ab_cli *c);

/* Usage texts (stdout). */
void ab_cli_usage(enum ab_cmd which);

/* run --learn FILE (learn_run.c): the run, then the draft written to FILE;
 * returns the exit status (the command's, or 125 with *ERR filled) */
struct ab_plan;
int ab_cli_learn(const ab_cli *cli, const struct ab_plan *plan, ab_err *err);

#endif
