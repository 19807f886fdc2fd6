/* SPDX-License-Identifier: MIT */
/* Command-line parsing (parent, pure: fills struct ab_cli, prints only usage). */
#include "cli.h"
#include "agentbox/ask.h"
#include "agentbox/trace.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	enum ab_cmd cmd;
} commands[] = {
	{"run", AB_CMD_RUN},         {"check", AB_CMD_CHECK},
	{"explain", AB_CMD_EXPLAIN}, {"doctor", AB_CMD_DOCTOR},
	{"help", AB_CMD_HELP},       {"version", AB_CMD_VERSION},
	{"allow", AB_CMD_ALLOW},     {"test-escape", AB_CMD_TEST_ESCAPE},
	{"report", AB_CMD_REPORT},   {"review", AB_CMD_REVIEW},
	{"apply", AB_CMD_APPLY},     {"discard", AB_CMD_DISCARD},
};

void ab_cli_usage(enum ab_cmd which)
{
	switch (which) {
	case AB_CMD_RUN:
		fputs("Usage: agentbox run [-p PROFILE]... [-w DIR] [--pty|--no-pty] [--log FILE] [-q]\n"
		      "                    [--otlp URL] [--allow HOST[:PORT]] [--read PATH] [--write PATH]\n"
		      "                    [--env NAME] [--trace[=best-effort]] [--ask [--ask-timeout S]\n"
		      "                    [--ask-profile FILE]] [--review] [--learn FILE]\n"
		      "                    [--] COMMAND [ARG...]\n"
		      "\n"
		      "Run COMMAND in a sandbox built from PROFILE (default: \"default\").\n"
		      "With no COMMAND, the profile's \"command\" runs.\n"
		      "\n"
		      "  -p, --profile PROFILE  profile name or path; repeat to merge (left to right)\n"
		      "  -w, --workspace DIR    writable workspace (default: current directory)\n"
		      "      --pty              always give the command its own pseudo-terminal\n"
		      "      --no-pty           never (plain stdio passes through)\n"
		      "      --log FILE         append the audit log (JSON lines) to FILE: requests,\n"
		      "                         commands run, syscalls denied (docs/audit.md)\n"
		      "      --otlp URL         also send those events as OpenTelemetry logs to the\n"
		      "                         collector at http://HOST[:PORT][/PATH] (OTLP/HTTP JSON;\n"
		      "                         port 4318 and /v1/logs when not given)\n"
		      "  -q, --quiet            no warnings about forced downgrades, no exit summary\n"
		      "      --allow HOST[:PORT]  also allow this destination (as network.allow)\n"
		      "      --read PATH        also bind PATH read-only (as filesystem.read)\n"
		      "      --write PATH       also bind PATH read-write (as filesystem.write)\n"
		      "      --env NAME         also pass variable NAME (or a pattern, as env.pass)\n"
		      "                         (each repeatable; shown by explain and in the audit log)\n"
		      "      --trace            also record programs started, connect attempts and\n"
		      "                         file operations refused (EACCES/EPERM) with kernel\n"
		      "                         tracing (BPF) into the audit log; needs root or\n"
		      "                         CAP_BPF+CAP_PERFMON, else agentbox stops (exit 125)\n"
		      "      --trace=best-effort  the same, but without the privileges: a warning,\n"
		      "                         and the command runs untraced\n"
		      "      --ask              when the proxy refuses a host that is not listed,\n"
		      "                         hold the request and ask on your terminal: allow\n"
		      "                         once, for this run, always (written to a profile,\n"
		      "                         after a diff) or deny (as \"ask\": true; never\n"
		      "                         without a terminal; docs/ask.md); at exit, offer\n"
		      "                         the paths the sandbox was refused writing\n"
		      "      --ask-timeout S    no answer in S seconds is a deny (default 60)\n"
		      "      --ask-profile FILE the profile \"always\" writes (default: the last -p\n"
		      "                         that is a file of yours, else a new one in\n"
		      "                         ~/.config/agentbox/profiles that extends it)\n"
		      "      --review           work on a copy-on-write view of the workspace: the\n"
		      "                         real one is untouched; at exit the changes are\n"
		      "                         listed, then `agentbox apply` or `discard` them\n"
		      "                         (docs/review.md; as \"workspace\": {\"mode\": \"review\"})\n"
		      "      --learn FILE       learn a profile: every destination the proxy is asked\n"
		      "                         for is allowed and recorded, and so are the files the\n"
		      "                         command opens, creates and runs (slower); then FILE\n"
		      "                         gets a draft profile that extends PROFILE with what\n"
		      "                         it lacked, secrets and the home never included\n"
		      "                         (docs/learn.md).  A draft to review, not an authority\n"
		      "\n"
		      "Exit status: the command's; 128+N if it was killed by signal N;\n"
		      "125 agentbox failed; 126 command not executable; 127 command not found.\n",
		      stdout);
		break;
	case AB_CMD_CHECK:
		fputs("Usage: agentbox check PROFILE...\n"
		      "\n"
		      "Validate profiles (names or paths) as run would on this machine: each is\n"
		      "loaded and its plan built (nothing runs).  Prints nothing and exits 0 when\n"
		      "all are valid; otherwise prints FILE:LINE:COL: message (or profile:\n"
		      "message for a rule between keys) and exits 125.\n",
		      stdout);
		break;
	case AB_CMD_EXPLAIN:
		fputs("Usage: agentbox explain [-p PROFILE]... [-w DIR] [--json] [--allow ...] [--read ...]\n"
		      "                        [--write ...] [--env ...] [--] [COMMAND...]\n"
		      "\n"
		      "Print the boundary a run would get on this machine, before anything runs:\n"
		      "readable, writable and hidden paths, network, secrets, environment,\n"
		      "syscall policy, Landlock rules, limits, and every downgrade this kernel forces.\n"
		      "\n"
		      "  -p, --profile PROFILE  profile name or path; repeat to merge\n"
		      "  -w, --workspace DIR    workspace (default: current directory)\n"
		      "      --json             machine-readable output\n"
		      "      --allow, --read, --write, --env   one-off grants, as for run\n",
		      stdout);
		break;
	case AB_CMD_ALLOW:
		fputs("Usage: agentbox allow [-w DIR] HOST[:PORT]...\n"
		      "\n"
		      "Add destinations to the allow list of the sandbox running in DIR (default:\n"
		      "the current directory), for the rest of its run: a human approving a host\n"
		      "the agent was refused.  Same syntax as network.allow; deny rules still win.\n"
		      "Only the user who started the sandbox can do this, root included: root\n"
		      "approves a host for another user's sandbox as that user (sudo -u USER\n"
		      "agentbox allow ...).  Nothing inside the sandbox can.\n"
		      "\n"
		      "Exit status: 0 every rule added, 1 the sandbox refused one, 125 any other\n"
		      "failure (no sandbox of yours runs in DIR, an unsafe control directory, no\n"
		      "answer), with a message.\n",
		      stdout);
		break;
	case AB_CMD_TEST_ESCAPE:
		fputs("Usage: agentbox test-escape [-p PROFILE]... [--format tap|junit|json] [-o FILE]\n"
		      "                            [--only ID,...] [--list] [-q]\n"
		      "\n"
		      "Prove a profile on this machine: build a throwaway lab (fake home with canary\n"
		      "secrets, listeners, fake agents, test HTTPS hosts), run a battery of real\n"
		      "escape attempts inside `agentbox run` with PROFILE (default: \"default\"),\n"
		      "and judge from inside and outside.  Nothing on the real host is touched.\n"
		      "\n"
		      "  -p, --profile PROFILE  profile name or path; repeat to merge\n"
		      "      --format FORMAT    tap (TAP 14, default), junit (JUnit XML), json (lines)\n"
		      "  -o, --output FILE      write the results to FILE instead of stdout\n"
		      "      --only ID,...      run only these probes (controls and PRC-01 always run)\n"
		      "      --list             list the probes and exit\n"
		      "  -q, --quiet            no per-category summary on stderr\n"
		      "\n"
		      "Exit status: 0 everything blocked; 1 an escape; 2 probe errors only;\n"
		      "3 the lab could not be built; 4 the sandbox is not in effect; 125 usage.\n",
		      stdout);
		break;
	case AB_CMD_REPORT:
		fputs("Usage: agentbox report [--json] LOG\n"
		      "\n"
		      "Summarize an audit log written by `agentbox run --log LOG`: the session\n"
		      "(profile, times, grants), the command tree with exit statuses, hosts\n"
		      "reached and refused, denials, secrets used (names only) and runtime\n"
		      "policy changes.  Lines that cannot be read are counted, never fatal.\n"
		      "\n"
		      "      --json             one JSON object with the same aggregates\n"
		      "\n"
		      "Exit status: 0 done (an empty log reports \"no events\"); 125 usage, or LOG\n"
		      "is missing, not a regular file, unreadable or not an audit log.\n",
		      stdout);
		break;
	case AB_CMD_REVIEW:
	case AB_CMD_APPLY:
	case AB_CMD_DISCARD:
		fputs("Usage: agentbox review [-w DIR] [--log FILE] [--diff]\n"
		      "       agentbox apply [-w DIR] [--log FILE] [PATH...]\n"
		      "       agentbox discard [-w DIR] [--log FILE]\n"
		      "\n"
		      "The change set a `run --review` in DIR (default: the current directory) left\n"
		      "pending.  review lists it again: added, modified and deleted files with\n"
		      "line counts, the risky ones flagged; --diff shows the unified diff (through\n"
		      "$PAGER on a terminal).  apply lands every change, or only those at or\n"
		      "below the PATHs given, each file atomically; a nested .git, a protected\n"
		      "path or a special file is applied only when named.  discard drops the\n"
		      "change set; the workspace stays as it is.  Each writes a \"review\" event\n"
		      "to the audit log the run used (its --log or network.log), or to --log FILE.\n"
		      "\n"
		      "Exit status: 0 done; 1 apply left something out (said why); 125 no change\n"
		      "set, a sandbox still running in DIR, or another failure.\n",
		      stdout);
		break;
	case AB_CMD_DOCTOR:
		fputs("Usage: agentbox doctor [--json]\n"
		      "\n"
		      "Probe the kernel (user namespaces, AppArmor restriction, Landlock ABI, seccomp,\n"
		      "cgroups, legacy TIOCSTI, io_uring, idmapped mounts) and say what works and\n"
		      "how to fix what does not.  Exit 0 when agentbox can run here, 1 otherwise.\n",
		      stdout);
		break;
	default:
		fputs("Usage: agentbox COMMAND [OPTIONS]\n"
		      "\n"
		      "A deny-by-default sandbox for AI coding agents.\n"
		      "\n"
		      "Commands:\n"
		      "  run [-p PROFILE] [-w DIR] [--] COMMAND [ARG...]   run COMMAND in the sandbox\n"
		      "  check PROFILE...                                  validate profiles\n"
		      "  explain [-p PROFILE] [-w DIR] [--json]            print the resolved boundary\n"
		      "  doctor [--json]                                   check this kernel\n"
		      "  allow [-w DIR] HOST[:PORT]...                     allow a host in a running sandbox\n"
		      "  test-escape [-p PROFILE] [--format F]             prove the sandbox holds here\n"
		      "  report [--json] LOG                               summarize an audit log\n"
		      "  review [-w DIR] [--diff]                          show run --review's changes\n"
		      "  apply [-w DIR] [PATH...]                          land them (all, or PATHs)\n"
		      "  discard [-w DIR]                                  drop them\n"
		      "\n"
		      "Options:\n"
		      "  -h, --help      show help (also: agentbox COMMAND --help)\n"
		      "  -V, --version   show version\n"
		      "\n"
		      "See agentbox(1) and agentbox-profile(5).\n",
		      stdout);
	}
}

void ab_cli_free(ab_cli *c)
{
	ab_strv_free(&c->profiles);
	ab_strv_free(&c->grants);
	free(c->workspace);
	c->workspace = NULL;
	free(c->log_path);
	c->log_path = NULL;
	free(c->otlp_url);
	c->otlp_url = NULL;
	free(c->ask_profile);
	c->ask_profile = NULL;
	free(c->learn);
	c->learn = NULL;
	free(c->format);
	free(c->out_path);
	free(c->only);
	c->format = c->out_path = c->only = NULL;
}

/* *DST = a copy of V (an option's value; the last one given wins). */
static int set_copy(char **dst, const char *v, const char *sub, ab_err *err)
{
	free(*dst);
	*dst = strdup(v);
	return *dst ? 0 : ab_fail(err, ENOMEM, "%s", sub);
}

/* The same for a value that may not be empty. */
static int set_str(char **dst, const char *v, const char *sub, const char *opt, ab_err *err)
{
	if (!v[0])
		return ab_fail(err, 0, "%s: %s needs a value", sub, opt);
	return set_copy(dst, v, sub, err);
}

enum {
	OPT_PTY = 1000,
	OPT_NO_PTY,
	OPT_JSON,
	OPT_LOG,
	OPT_FORMAT,
	OPT_ONLY,
	OPT_LIST,
	OPT_ALLOW,
	OPT_READ,
	OPT_WRITE,
	OPT_ENV,
	OPT_TRACE,
	OPT_OTLP,
	OPT_ASK,
	OPT_ASK_TIMEOUT,
	OPT_ASK_PROFILE,
	OPT_REVIEW,
	OPT_DIFF,
	OPT_LEARN
};

/* The option getopt_long just returned, as the user spelled it: "--name" for
 * a long option, "-c" for a short one (also inside a group such as "-qx"),
 * else the whole argument (an unknown long option). */
static const char *opt_name(char *buf, size_t len, int o, int idx, const struct option *longopts,
			    char **argv)
{
	const char *arg = argv[optind - 1];
	if (idx >= 0)
		snprintf(buf, len, "--%s", longopts[idx].name);
	else if (o == ':' && strncmp(arg, "--", 2) == 0)
		return arg; /* long option at the end, missing its argument */
	else if ((o == '?' || o == ':') && optopt > 0 && optopt < 256)
		snprintf(buf, len, "-%c", optopt);
	else if (o > 0 && o < 256 && o != '?' && o != ':')
		snprintf(buf, len, "-%c", o);
	else
		return arg;
	return buf;
}

/* What one option asks of the option loop besides an error: go on, stop
 * there (--help), or refuse it as unknown for this command. */
enum { SUB_NEXT = 0, SUB_HELP = 1, SUB_UNKNOWN = 2 };

/* run --ask, --ask-timeout SECONDS, --ask-profile FILE (docs/ask.md). */
static int ask_opt(ab_cli *c, int o, const char *sub, ab_err *err)
{
	if (c->cmd != AB_CMD_RUN)
		return SUB_UNKNOWN;
	if (o == OPT_ASK) {
		c->ask = true;
		return SUB_NEXT;
	}
	if (o == OPT_ASK_PROFILE) {
		int r = set_str(&c->ask_profile, optarg, sub, "--ask-profile", err);
		return r < 0 ? r : SUB_NEXT;
	}
	char *end = NULL;
	errno = 0;
	unsigned long v = strtoul(optarg, &end, 10);
	if (!optarg[0] || *end || errno || v < 1 || v > AB_ASK_MAX_TIMEOUT_S || optarg[0] == '-')
		return ab_fail(err, 0, "%s: --ask-timeout takes seconds (1-%d), not '%s'", sub,
			       AB_ASK_MAX_TIMEOUT_S, optarg);
	c->ask_timeout_s = (unsigned)v;
	return SUB_NEXT;
}

/* An option only run takes (grants: run and explain). */
static int run_opt(ab_cli *c, int o, const char *sub, ab_err *err)
{
	int r;
	switch (o) {
	case OPT_ALLOW:
	case OPT_READ:
	case OPT_WRITE:
	case OPT_ENV: {
		if (c->cmd != AB_CMD_RUN && c->cmd != AB_CMD_EXPLAIN)
			return SUB_UNKNOWN;
		const char *kind = o == OPT_ALLOW   ? "allow"
				   : o == OPT_READ  ? "read"
				   : o == OPT_WRITE ? "write"
						    : "env";
		if (!optarg[0])
			return ab_fail(err, 0, "%s: --%s needs a value", sub, kind);
		char *g = ab_asprintf("%s=%s", kind, optarg);
		if (!g || ab_strv_push_take(&c->grants, g) < 0)
			return ab_fail(err, ENOMEM, "%s", sub);
		return SUB_NEXT;
	}
	case OPT_PTY:
	case OPT_NO_PTY:
		if (c->cmd != AB_CMD_RUN)
			return SUB_UNKNOWN;
		c->pty = o == OPT_PTY ? 1 : 0;
		return SUB_NEXT;
	case OPT_REVIEW:
		if (c->cmd != AB_CMD_RUN && c->cmd != AB_CMD_EXPLAIN)
			return SUB_UNKNOWN;
		c->review = true;
		return SUB_NEXT;
	case OPT_DIFF:
		if (c->cmd != AB_CMD_REVIEW)
			return SUB_UNKNOWN;
		c->diff = true;
		return SUB_NEXT;
	case OPT_OTLP:
		if (c->cmd != AB_CMD_RUN)
			return SUB_UNKNOWN;
		r = set_str(&c->otlp_url, optarg, sub, "--otlp", err);
		return r < 0 ? r : SUB_NEXT;
	case OPT_LOG: /* review / apply / discard: where their event goes */
		if (c->cmd != AB_CMD_RUN && c->cmd != AB_CMD_REVIEW && c->cmd != AB_CMD_APPLY &&
		    c->cmd != AB_CMD_DISCARD)
			return SUB_UNKNOWN;
		if (!optarg[0])
			return ab_fail(err, 0, "%s: --log needs a file name", sub);
		r = set_copy(&c->log_path, optarg, sub, err);
		return r < 0 ? r : SUB_NEXT;
	case OPT_LEARN:
		if (c->cmd != AB_CMD_RUN)
			return SUB_UNKNOWN;
		if (!optarg[0])
			return ab_fail(err, 0, "%s: --learn needs a file name", sub);
		r = set_copy(&c->learn, optarg, sub, err);
		return r < 0 ? r : SUB_NEXT;
	case OPT_TRACE:
		if (c->cmd != AB_CMD_RUN)
			return SUB_UNKNOWN;
		if (!optarg)
			c->trace = AB_TRACE_STRICT;
		else if (strcmp(optarg, "best-effort") == 0)
			c->trace = AB_TRACE_BEST_EFFORT;
		else
			return ab_fail(err, 0,
				       "%s: --trace takes no value or '=best-effort', not "
				       "'%s'",
				       sub, optarg);
		return SUB_NEXT;
	case OPT_ASK:
	case OPT_ASK_TIMEOUT:
	case OPT_ASK_PROFILE: return ask_opt(c, o, sub, err);
	default: return SUB_UNKNOWN;
	}
}

/* One option getopt_long returned (O, spelled SPELLED) for command SUB. */
static int sub_opt(ab_cli *c, int o, const char *spelled, const char *sub, ab_err *err)
{
	bool run_like =
		c->cmd == AB_CMD_RUN || c->cmd == AB_CMD_EXPLAIN || c->cmd == AB_CMD_TEST_ESCAPE;
	bool esc = c->cmd == AB_CMD_TEST_ESCAPE;
	bool ws_ok = c->cmd == AB_CMD_RUN || c->cmd == AB_CMD_EXPLAIN || c->cmd == AB_CMD_ALLOW ||
		     c->cmd == AB_CMD_REVIEW || c->cmd == AB_CMD_APPLY || c->cmd == AB_CMD_DISCARD;
	int r;
	switch (o) {
	case 'h':
		c->help_for = c->cmd;
		c->cmd = AB_CMD_HELP;
		return SUB_HELP;
	case 'p':
		if (!run_like)
			return SUB_UNKNOWN;
		if (!optarg[0])
			return ab_fail(err, 0, "%s: -p needs a profile name or path", sub);
		if (ab_strv_push(&c->profiles, optarg) < 0)
			return ab_fail(err, ENOMEM, "%s", sub);
		return SUB_NEXT;
	case 'w':
		if (!ws_ok)
			return SUB_UNKNOWN;
		r = set_copy(&c->workspace, optarg, sub, err);
		return r < 0 ? r : SUB_NEXT;
	case OPT_FORMAT:
	case OPT_ONLY:
	case 'o':
		if (!esc)
			return SUB_UNKNOWN;
		r = set_str(o == OPT_FORMAT ? &c->format
			    : o == OPT_ONLY ? &c->only
					    : &c->out_path,
			    optarg, sub, spelled, err);
		return r < 0 ? r : SUB_NEXT;
	case OPT_LIST:
		if (!esc)
			return SUB_UNKNOWN;
		c->list = true;
		return SUB_NEXT;
	case 'q':
		if (c->cmd != AB_CMD_RUN && !esc)
			return SUB_UNKNOWN;
		c->quiet = true;
		return SUB_NEXT;
	case OPT_JSON:
		if (c->cmd != AB_CMD_EXPLAIN && c->cmd != AB_CMD_DOCTOR && c->cmd != AB_CMD_REPORT)
			return SUB_UNKNOWN;
		c->json = true;
		return SUB_NEXT;
	case ':':
		return ab_fail(err, 0,
			       "%s: option '%s' needs an argument (see 'agentbox %s --help')", sub,
			       spelled, sub);
	default: return run_opt(c, o, sub, err);
	}
}

/* The options of command argv[0], up to its first operand or "--":
 * 0, SUB_HELP (--help: parsing stops there) or -errno. */
static int parse_opts(int argc, char **argv, ab_cli *c, ab_err *err)
{
	static const struct option longopts[] = {
		{"profile", required_argument, NULL, 'p'},
		{"workspace", required_argument, NULL, 'w'},
		{"pty", no_argument, NULL, OPT_PTY},
		{"no-pty", no_argument, NULL, OPT_NO_PTY},
		{"json", no_argument, NULL, OPT_JSON},
		{"quiet", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{"log", required_argument, NULL, OPT_LOG},
		{"format", required_argument, NULL, OPT_FORMAT},
		{"only", required_argument, NULL, OPT_ONLY},
		{"list", no_argument, NULL, OPT_LIST},
		{"output", required_argument, NULL, 'o'},
		{"allow", required_argument, NULL, OPT_ALLOW},
		{"read", required_argument, NULL, OPT_READ},
		{"write", required_argument, NULL, OPT_WRITE},
		{"env", required_argument, NULL, OPT_ENV},
		{"trace", optional_argument, NULL, OPT_TRACE},
		{"otlp", required_argument, NULL, OPT_OTLP},
		{"ask", no_argument, NULL, OPT_ASK},
		{"ask-timeout", required_argument, NULL, OPT_ASK_TIMEOUT},
		{"ask-profile", required_argument, NULL, OPT_ASK_PROFILE},
		{"review", no_argument, NULL, OPT_REVIEW},
		{"diff", no_argument, NULL, OPT_DIFF},
		{"learn", required_argument, NULL, OPT_LEARN},
		{NULL, 0, NULL, 0},
	};
	const char *sub = argv[0];
	optind = 0; /* full reset of getopt state */
	opterr = 0;
	char name[64];
	for (;;) {
		int idx = -1;
		int o = getopt_long(argc, argv, "+:p:w:qho:", longopts, &idx);
		if (o == -1)
			return 0;
		const char *spelled = opt_name(name, sizeof(name), o, idx, longopts, argv);
		int r = sub_opt(c, o, spelled, sub, err);
		if (r == SUB_UNKNOWN)
			return ab_fail(err, 0, "%s: unknown option '%s' (see 'agentbox %s --help')",
				       sub, spelled, sub);
		if (r != SUB_NEXT)
			return r;
	}
}

/* report's operands: exactly one LOG, and options may also follow it
 * (`agentbox report LOG --json`).  0, SUB_HELP or -errno. */
static int report_operands(ab_cli *c, ab_err *err)
{
	int log = -1;
	bool opts = strcmp(c->argv[-1], "--") != 0; /* getopt took a "--" */
	for (int i = 0; i < c->argc; i++) {
		const char *a = c->argv[i];
		if (opts && strcmp(a, "--") == 0) {
			opts = false;
		} else if (opts && strcmp(a, "--json") == 0) {
			c->json = true;
		} else if (opts && (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)) {
			c->help_for = c->cmd;
			c->cmd = AB_CMD_HELP;
			return SUB_HELP;
		} else if (opts && a[0] == '-' && a[1]) {
			return ab_fail(err, 0,
				       "report: unknown option '%s' (see 'agentbox report "
				       "--help')",
				       a);
		} else if (log >= 0) {
			return ab_fail(err, 0,
				       "report: give exactly one LOG (see 'agentbox "
				       "report --help')");
		} else {
			log = i;
		}
	}
	if (log < 0 || !c->argv[log][0])
		return ab_fail(err, 0, "report: name the audit log (see 'agentbox report --help')");
	c->argv += log;
	c->argc = 1;
	return 0;
}

/* The operands each command needs (c->argv, c->argc: what follows the
 * options); 0, SUB_HELP or -errno. */
static int check_operands(ab_cli *c, const char *sub, ab_err *err)
{
	switch (c->cmd) {
	case AB_CMD_CHECK:
		if (c->argc == 0)
			return ab_fail(
				err, 0,
				"check: name at least one profile (see 'agentbox check --help')");
		c->check_files = c->argv;
		c->ncheck = c->argc;
		return 0;
	case AB_CMD_ALLOW:
		if (c->argc == 0)
			return ab_fail(
				err, 0,
				"allow: name at least one HOST[:PORT] (see 'agentbox allow --help')");
		return 0;
	case AB_CMD_REPORT: return report_operands(c, err);
	case AB_CMD_DOCTOR:
	case AB_CMD_TEST_ESCAPE:
	case AB_CMD_REVIEW:
	case AB_CMD_DISCARD:
		if (c->argc != 0)
			return ab_fail(err, 0, "%s: unexpected argument '%s'", sub, c->argv[0]);
		return 0;
	default: return 0;
	}
}

static int parse_sub(int argc, char **argv, ab_cli *c, ab_err *err)
{
	int r = parse_opts(argc, argv, c, err);
	if (r != 0)
		return r < 0 ? r : 0;
	c->argv = argv + optind;
	c->argc = argc - optind;
	r = check_operands(c, argv[0], err);
	return r < 0 ? r : 0;
}

int ab_cli_parse(int argc, char **argv, ab_cli *c, ab_err *err)
{
	memset(c, 0, sizeof(*c));
	c->pty = -1;
	if (argc < 2) {
		c->cmd = AB_CMD_HELP;
		return ab_fail(err, 0, "no command given (see 'agentbox --help')");
	}
	const char *a = argv[1];
	if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
		c->cmd = AB_CMD_HELP;
		return 0;
	}
	if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
		c->cmd = AB_CMD_VERSION;
		return 0;
	}
	for (size_t i = 0; i < AB_ARRAY_SIZE(commands); i++) {
		if (strcmp(a, commands[i].name) != 0)
			continue;
		c->cmd = commands[i].cmd;
		if (c->cmd == AB_CMD_VERSION)
			return 0;
		if (c->cmd == AB_CMD_HELP) {
			c->help_for = AB_CMD_NONE;
			if (argc > 2) {
				for (size_t j = 0; j < AB_ARRAY_SIZE(commands); j++)
					if (strcmp(argv[2], commands[j].name) == 0)
						c->help_for = commands[j].cmd;
			}
			return 0;
		}
		return parse_sub(argc - 1, argv + 1, c, err);
	}
	if (a[0] == '-')
		return ab_fail(err, 0, "unknown option '%s' (see 'agentbox --help')", a);
	return ab_fail(err, 0, "unknown command '%s' (see 'agentbox --help')", a);
}
