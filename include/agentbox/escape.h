/* SPDX-License-Identifier: MIT */
/*
 * escape.h: `agentbox test-escape` (issue 5).  Three parts, three processes:
 *
 *   harness (src/escape/lab/harness.c, lab.c, judge.c): the host side.  Enters a
 *     throwaway lab (its own mount and network namespaces, a user namespace
 *     when unprivileged), plants canaries, serves listeners and test HTTPS
 *     upstreams, runs `agentbox run -p LABPROFILE -- <copy of agentbox>
 *     __probe LAB.json RESULTS` on a pty, judges from the outside, prints.
 *   runner (src/escape/probes/runner.c): inside the sandbox, the hidden command
 *     `agentbox __probe`.  Runs each selected probe in a forked child with a
 *     timeout and writes one JSON line per probe to RESULTS.
 *   probes (src/escape/probe_*.c): real attempts, never damage.
 *   report (src/escape/report.c): pure: verdicts, exit status, TAP/JUnit/JSON.
 *
 * Canaries: every secret the lab plants is a token "ABCANARY-<KIND>-<32 hex>"
 * (KIND: [A-Z0-9]{2,12}).  The inside is never told a value: probes scan what
 * they manage to read for the token shape (ab_pr_scan) and report only a
 * SHA-256 prefix, which the judge matches against the tokens it planted.
 * Values are never printed by anyone.
 */
#ifndef AGENTBOX_ESCAPE_H
#define AGENTBOX_ESCAPE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <jansson.h>

#include "agentbox/common.h"

#define AB_CANARY_PREFIX "ABCANARY-"
#define AB_CANARY_HEX 32          /* random hex digits after KIND- */
#define AB_CANARY_HASH_HEX 16     /* reported hash: first 16 hex of SHA-256 */
#define AB_PROBE_TIMEOUT_MS 15000 /* per probe, enforced by the runner */
#define AB_ESC_MAX_ATTEMPTS 256   /* per probe; more are counted, not kept */
#define AB_ESC_MAX_FOUND 32       /* canary hashes kept per probe */
/* TTY-02's clipboard write: base64 of "agentbox-test-escape" */
#define AB_ESC_CLIP_B64 "YWdlbnRib3gtdGVzdC1lc2NhcGU="

/* Exit statuses of test-escape (docs/test-escape.md), first
 * matching wins: any escape; sandbox not in effect; lab setup failed; probe
 * errors only; everything blocked. */
#define AB_ESC_EXIT_OK 0
#define AB_ESC_EXIT_ESCAPE 1
#define AB_ESC_EXIT_ERRORS 2
#define AB_ESC_EXIT_LAB 3
#define AB_ESC_EXIT_NOT_IN_EFFECT 4

/* A verdict, for one attempt and for a whole probe.
 * OK: blocked (a probe) or worked (a positive control).
 * ESCAPED: the attempt got through (a probe) -- for a control, use ERROR. */
enum ab_esc_verdict { AB_ESC_OK, AB_ESC_ESCAPED, AB_ESC_ERROR, AB_ESC_SKIP };
const char *ab_esc_verdict_name(enum ab_esc_verdict v); /* "ok" "escaped" "error" "skip" */
int ab_esc_verdict_parse(const char *s, enum ab_esc_verdict *out);

/* ---- what the harness tells the inside (LAB.json): public facts only ---- */
/* CRD-01's host socket bound after the start: the probe creates the request
 * file in the workspace, the lab then binds the socket next to it. */
#define AB_ESC_LATE_REQ ".devserver-late.req"
#define AB_ESC_LATE_SOCK ".devserver-late.sock"

typedef struct ab_lab_info {
	char *run_id;          /* 16 hex, random per run: names markers (/tmp/abprobe-RUNID-...) */
	char *home;            /* the fake HOME (same path inside and outside) */
	char *workspace;       /* the lab's git repository (the sandbox's workspace) */
	char *sibling;         /* another repository next to it (must stay unreachable) */
	char *runtime_dir;     /* the lab's XDG_RUNTIME_DIR (/run/user/UID) */
	ab_strv agent_sockets; /* fake ssh-agent, gpg-agent, D-Bus, docker sockets (paths) */
	uint16_t judge_port;   /* canary TCP listener on every lab address (v4 and v6) */
	ab_strv host_addrs;    /* the lab host's addresses ("127.0.0.1", "::1", "192.0.2.10") */
	ab_strv metadata;      /* metadata endpoints "ADDR" or "NAME" (port 80) */
	char *bound_host;      /* allowed, the lab secret is bound to it (HTTPS :443) */
	char *unbound_host;    /* allowed, no secret bound */
	char *denied_host;     /* listed in network.deny (HTTPS server exists, must get 0 hits) */
	char *canary_domain;   /* names under it are never allowed: DNS exfiltration attempts */
	uint16_t https_port;   /* port the sandbox uses for the three hosts (443) */
	uint16_t proxy_port;   /* the explicit proxy inside (127.0.0.1:P) */
	char *secret_env;      /* name of the env var that holds the lab secret's placeholder */
	char *secret_header;   /* header the secret may be placed in ("x-lab-token") */
	char *lab_ca;          /* PEM of the lab's test CA (public): the upstreams' issuer, for
				  verifying blind tunnels (the unbound host) inside */
	pid_t canary_pid;      /* host pid of the canary process (lab pid namespace) */
	pid_t harness_pid;     /* host pid of the harness */
	char *host_git_marker; /* unused inside; the judge's PER-05 payload marker */
	ab_strv only;          /* probe ids to run (empty: all) */
} ab_lab_info;

int ab_lab_info_to_json(const ab_lab_info *l, json_t **out, ab_err *err);
int ab_lab_info_from_json(json_t *j, ab_lab_info *out, ab_err *err);
int ab_lab_info_load(const char *path, ab_lab_info *out, ab_err *err);
void ab_lab_info_free(ab_lab_info *l);

/* ---- the probe API (inside, in the probe's own forked child) ---- */
typedef struct ab_probe_run ab_probe_run;

/* An attempt expected to fail: ret < 0 -> OK with errno `err` named and its
 * layer guessed (ENOENT mount namespace, EROFS read-only mount, EACCES
 * Landlock, EPERM/ENOSYS seccomp, ENETUNREACH/ECONNREFUSED network
 * namespace); ret >= 0 -> ESCAPED.  `what` is a short human text
 * ("open ~/.ssh/id_ed25519 O_RDONLY"). */
void ab_pr_sys(ab_probe_run *r, const char *what, long ret, int err);
/* Same, but only the errnos in `ok_errs` (0-terminated) count as blocked;
 * any other failure is an ERROR (the attempt did not really happen). */
void ab_pr_sys_expect(ab_probe_run *r, const char *what, long ret, int err, const int *ok_errs);
void ab_pr_ok(ab_probe_run *r, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void ab_pr_escaped(ab_probe_run *r, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void ab_pr_error(ab_probe_run *r, const char *what, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Name the layer of the last attempt recorded ("proxy", "seccomp", ...). */
void ab_pr_layer(ab_probe_run *r, const char *layer);
/* Scan bytes the probe managed to read for canary tokens; each found is an
 * ESCAPED attempt carrying only the token's hash.  Returns how many found. */
int ab_pr_scan(ab_probe_run *r, const char *what, const void *buf, size_t n);
/* Read up to `max` bytes of a file (O_RDONLY|O_NOFOLLOW unless follow) and
 * scan them: the open's failure is recorded like ab_pr_sys, success with
 * no canary is ESCAPED only if escape_on_open, else OK ("readable, no secret"). */
void ab_pr_read_file(ab_probe_run *r, const char *path, bool follow, bool escape_on_open);
/* Extra data for the judge (e.g. the tty identity of fds 0-2).  Takes `v`. */
void ab_pr_report(ab_probe_run *r, const char *key, json_t *v);
const ab_lab_info *ab_pr_lab(const ab_probe_run *r);
/* The canary scanner itself (pure, fuzzable): calls cb(hash_hex, ctx) for
 * each token found in buf; hash_hex is AB_CANARY_HASH_HEX hex + NUL.
 * Returns the number of tokens found. */
int ab_canary_scan(const void *buf, size_t n, void (*cb)(const char *hash, void *ctx), void *ctx);
/* SHA-256 prefix of a token (for the judge; same as the scanner reports). */
void ab_canary_hash(const char *token, size_t len, char out[AB_CANARY_HASH_HEX + 1]);

/* ---- the registry ---- */
enum ab_esc_cat {
	AB_CAT_CTL,
	AB_CAT_FS,
	AB_CAT_SEC,
	AB_CAT_CRD,
	AB_CAT_NET,
	AB_CAT_PRC,
	AB_CAT_KRN,
	AB_CAT_PER,
	AB_CAT_TTY,
	AB_CAT__N
};
const char *ab_esc_cat_name(enum ab_esc_cat c); /* "CTL" "FS" ... */

typedef struct ab_probe_def {
	const char *id;   /* "FS-01" */
	const char *name; /* "write-outside-workspace" */
	enum ab_esc_cat cat;
	bool control;        /* a positive control: failing is an ERROR, not an escape */
	bool gate;           /* PRC-01: when the posture shows no sandbox at all, stop */
	const char *summary; /* one line: what it tries */
	void (*fn)(ab_probe_run *r);
} ab_probe_def;

extern const ab_probe_def ab_probes[];
extern const size_t ab_nprobes;
const ab_probe_def *ab_probe_find(const char *id);

/* Probe functions, by file. */
void ab_probe_ctl01(ab_probe_run *r);
void ab_probe_ctl02(ab_probe_run *r);
void ab_probe_ctl03(ab_probe_run *r);
void ab_probe_ctl04(ab_probe_run *r);
void ab_probe_ctl05(ab_probe_run *r);
void ab_probe_ctl06(ab_probe_run *r);
void ab_probe_fs01(ab_probe_run *r);
void ab_probe_fs02(ab_probe_run *r);
void ab_probe_fs03(ab_probe_run *r);
void ab_probe_fs04(ab_probe_run *r);
void ab_probe_sec01(ab_probe_run *r);
void ab_probe_sec02(ab_probe_run *r);
void ab_probe_sec03(ab_probe_run *r);
void ab_probe_sec04(ab_probe_run *r);
void ab_probe_sec06(ab_probe_run *r);
void ab_probe_sec07(ab_probe_run *r);
void ab_probe_crd01(ab_probe_run *r);
void ab_probe_crd03(ab_probe_run *r);
void ab_probe_net01(ab_probe_run *r);
void ab_probe_net02(ab_probe_run *r);
void ab_probe_net06(ab_probe_run *r);
void ab_probe_net08(ab_probe_run *r);
void ab_probe_net09(ab_probe_run *r);
void ab_probe_prc01(ab_probe_run *r);
void ab_probe_prc02(ab_probe_run *r);
void ab_probe_prc04(ab_probe_run *r);
void ab_probe_krn01(ab_probe_run *r);
void ab_probe_krn02(ab_probe_run *r);
void ab_probe_krn03(ab_probe_run *r);
void ab_probe_krn04(ab_probe_run *r);
void ab_probe_per01(ab_probe_run *r);
void ab_probe_per02(ab_probe_run *r);
void ab_probe_per05(ab_probe_run *r);
void ab_probe_tty01(ab_probe_run *r);
void ab_probe_tty02(ab_probe_run *r);

/* ---- results (runner -> harness, one JSON line per probe) ----
 * {"id":"FS-01","verdict":"ok","ms":12,
 *  "attempts":[{"what":"...","verdict":"ok","result":"EACCES","layer":"landlock"}],
 *  "dropped":0, "found":["<hash>"...], "report":{...}}  */
typedef struct ab_esc_attempt {
	char *what;
	enum ab_esc_verdict verdict;
	char *result; /* "EACCES", "403", "connected", "read 12 bytes", ... */
	char *layer;  /* "mount-ns", "landlock", "seccomp", "netns", "proxy", ... or NULL */
	char *source; /* NULL = inside; "judge" for the host side's findings */
} ab_esc_attempt;

typedef struct ab_esc_result {
	const ab_probe_def *def;     /* never NULL after parse (unknown ids are errors) */
	enum ab_esc_verdict verdict; /* merged: ESCAPED if any attempt escaped, ... */
	double ms;
	ab_esc_attempt *attempts;
	size_t nattempts;
	size_t dropped; /* attempts beyond AB_ESC_MAX_ATTEMPTS */
	ab_strv found;  /* canary hashes the inside reported */
	json_t *report; /* probe-specific data for the judge, or NULL */
	char *note;     /* why ERROR/SKIP (timeout, crashed, gate stop), or NULL */
} ab_esc_result;

typedef struct ab_esc_results {
	ab_esc_result *v; /* in registry order */
	size_t n;
	bool not_in_effect; /* the gate stopped the run */
	char *lab_error;    /* lab setup failed: why (then v may be empty) */
	char *profile;      /* the profile judged (display) */
} ab_esc_results;

/* Parse one result line against the probe table PROBES (strict: an id not
 * in it, a bad verdict -> error). */
int ab_esc_result_parse(const char *line, const ab_probe_def *probes, size_t nprobes,
			ab_esc_result *out, ab_err *err);
json_t *ab_esc_result_json(const ab_esc_result *r);
void ab_esc_result_free(ab_esc_result *r);
void ab_esc_results_free(ab_esc_results *rs);
/* Add an attempt (copies strings); recomputes r->verdict. */
int ab_esc_result_add(ab_esc_result *r, const char *what, enum ab_esc_verdict v, const char *result,
		      const char *layer, const char *source);
/* Recompute a probe's verdict from its attempts.  A control: any attempt
 * not OK -> ERROR.  A probe: any ESCAPED -> ESCAPED (and an ESCAPED verdict
 * is never overturned), else any ERROR -> ERROR, else all SKIP -> SKIP, else
 * OK.  No attempts -> ERROR ("no attempts recorded") unless SKIP with a note;
 * ERROR with a note (timeout, crash) stays ERROR whatever is added. */
void ab_esc_result_settle(ab_esc_result *r);
/* The exit status for a whole run (the table above). */
int ab_esc_exit_status(const ab_esc_results *rs);

enum ab_esc_format { AB_ESC_TAP, AB_ESC_JUNIT, AB_ESC_JSON };
int ab_esc_format_parse(const char *s, enum ab_esc_format *out);
/* Write the results in a format.  TAP 14: "TAP version 14", plan, one test
 * point per probe ("ok 3 - FS-01 write-outside-workspace"), a subtest with
 * one point per attempt, YAML diagnostics for failures; JUnit: <testsuites>
 * with one <testsuite> per category, one <testcase> per probe, <failure> for
 * escapes, <error> for errors, <skipped/>; JSON: one object per line per
 * probe (ab_esc_result_json) plus a final {"summary":...} line. */
int ab_esc_write(const ab_esc_results *rs, enum ab_esc_format f, FILE *out, ab_err *err);
/* A one-line summary per category, for a terminal ("FS   5 blocked"). */
void ab_esc_write_summary(const ab_esc_results *rs, FILE *out);

/* ---- entry points ---- */
typedef struct ab_test_escape_args {
	ab_strv profiles;     /* absolute paths of the profiles to judge, merged in order */
	const char *display;  /* how the user named them ("default", "a+b") */
	ab_strv keep;         /* directories the lab must keep visible (binary, profiles) */
	const char *format;   /* NULL = tap */
	const char *out_path; /* NULL = stdout */
	const char *only;     /* "ID,ID" or NULL */
	bool list, quiet;
	json_t *secrets; /* the profile's own secrets as profile JSON entries, "from"
				 left out: the lab re-declares each with a canary value
				 (same hosts, places, placeholder shape); borrowed */
	bool clipboard;  /* the profile sets terminal.clipboard: TTY-02's clipboard
				 sequence reaching the terminal is the profile's choice */
} ab_test_escape_args;
/* `agentbox test-escape`: returns the exit status (0-4, 125 usage). */
int ab_test_escape(const ab_test_escape_args *a);
/* `agentbox __canary TOKEN`: the lab's canary process (waits to be killed). */
int ab_escape_canary(void);
/* `agentbox __probe LAB.json RESULTS`: inside the sandbox.  Returns 0. */
int ab_escape_inside(int argc, char **argv);

#endif
