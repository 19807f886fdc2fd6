/* SPDX-License-Identifier: MIT */
/*
 * cli.c: every command and option, `--` handling, the point where option
 * parsing stops, and the exact usage-error messages.  Table-driven.
 */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../../src/cli/cli.h"
#include "agentbox/trace.h"

#define MAXARGS 16

/* Parse a NULL-terminated list (argv[0] = "agentbox" is added). */
static int parse(ab_cli *c, ab_err *e, const char *const *args)
{
	static char *argv[MAXARGS + 2];
	static char store[MAXARGS][128];
	int argc = 0;
	argv[argc++] = (char *)"agentbox";
	for (size_t i = 0; args[i]; i++) {
		assert_true(i < MAXARGS);
		snprintf(store[i], sizeof(store[i]), "%s", args[i]);
		argv[argc++] = store[i];
	}
	argv[argc] = NULL;
	memset(e, 0, sizeof(*e));
	return ab_cli_parse(argc, argv, c, e);
}

#define A(...) ((const char *const[]){__VA_ARGS__, NULL})

static void assert_argv(const ab_cli *c, const char *const *want)
{
	int n = 0;
	while (want[n])
		n++;
	if (c->argc != n)
		fail_msg("argc %d, want %d", c->argc, n);
	for (int i = 0; i < n; i++)
		assert_string_equal(c->argv[i], want[i]);
}

/* ---------------------------------------------------------------- top level */

static void test_top_level(void **state)
{
	const struct {
		const char *const *args;
		enum ab_cmd cmd, help_for;
	} t[] = {
		{A("--help"), AB_CMD_HELP, AB_CMD_NONE},
		{A("-h"), AB_CMD_HELP, AB_CMD_NONE},
		{A("help"), AB_CMD_HELP, AB_CMD_NONE},
		{A("help", "run"), AB_CMD_HELP, AB_CMD_RUN},
		{A("help", "check"), AB_CMD_HELP, AB_CMD_CHECK},
		{A("help", "explain"), AB_CMD_HELP, AB_CMD_EXPLAIN},
		{A("help", "doctor"), AB_CMD_HELP, AB_CMD_DOCTOR},
		{A("help", "bogus"), AB_CMD_HELP, AB_CMD_NONE},
		{A("--version"), AB_CMD_VERSION, AB_CMD_NONE},
		{A("-V"), AB_CMD_VERSION, AB_CMD_NONE},
		{A("version"), AB_CMD_VERSION, AB_CMD_NONE},
		{A("run", "--help"), AB_CMD_HELP, AB_CMD_RUN},
		{A("run", "-h"), AB_CMD_HELP, AB_CMD_RUN},
		{A("run", "-p", "x", "-h"), AB_CMD_HELP, AB_CMD_RUN},
		{A("check", "--help"), AB_CMD_HELP, AB_CMD_CHECK},
		{A("explain", "--help"), AB_CMD_HELP, AB_CMD_EXPLAIN},
		{A("doctor", "--help"), AB_CMD_HELP, AB_CMD_DOCTOR},
		{A("doctor", "-h"), AB_CMD_HELP, AB_CMD_DOCTOR},
		{A("doctor"), AB_CMD_DOCTOR, AB_CMD_NONE},
		{A("run"), AB_CMD_RUN, AB_CMD_NONE},
		{A("explain"), AB_CMD_EXPLAIN, AB_CMD_NONE},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		ab_cli c;
		ab_err e;
		int r = parse(&c, &e, t[i].args);
		if (r != 0)
			fail_msg("case %zu (%s): %s", i, t[i].args[0], e.msg);
		if (c.cmd != t[i].cmd || c.help_for != t[i].help_for)
			fail_msg("case %zu (%s): cmd %d help_for %d, want %d %d", i, t[i].args[0],
				 c.cmd, c.help_for, t[i].cmd, t[i].help_for);
		ab_cli_free(&c);
	}
}

/* ---------------------------------------------------------------- run */

static void test_run_defaults(void **state)
{
	ab_cli c;
	ab_err e;
	assert_int_equal(parse(&c, &e, A("run", "true")), 0);
	assert_int_equal(c.cmd, AB_CMD_RUN);
	assert_int_equal(c.profiles.n, 0);
	assert_null(c.workspace);
	assert_int_equal(c.pty, -1);
	assert_false(c.json);
	assert_false(c.quiet);
	assert_argv(&c, A("true"));
	ab_cli_free(&c);

	/* no command at all is not a usage error (the profile may have one) */
	assert_int_equal(parse(&c, &e, A("run", "-p", "x")), 0);
	assert_int_equal(c.argc, 0);
	ab_cli_free(&c);
}

static void test_run_options(void **state)
{
	ab_cli c;
	ab_err e;
	assert_int_equal(parse(&c, &e,
			       A("run", "-p", "a", "--profile", "b", "--profile=c", "-pd", "-w",
				 "/w1", "--workspace=/w2", "--pty", "-q", "--", "cmd", "x")),
			 0);
	assert_int_equal(c.profiles.n, 4);
	assert_string_equal(c.profiles.v[0], "a");
	assert_string_equal(c.profiles.v[1], "b");
	assert_string_equal(c.profiles.v[2], "c");
	assert_string_equal(c.profiles.v[3], "d");
	assert_string_equal(c.workspace, "/w2"); /* last -w wins */
	assert_int_equal(c.pty, 1);
	assert_true(c.quiet);
	assert_argv(&c, A("cmd", "x"));
	ab_cli_free(&c);
	assert_null(c.workspace);
	assert_int_equal(c.profiles.n, 0);

	assert_int_equal(parse(&c, &e, A("run", "--no-pty", "ls")), 0);
	assert_int_equal(c.pty, 0);
	ab_cli_free(&c);
	assert_int_equal(parse(&c, &e, A("run", "--pty", "--no-pty", "ls")), 0);
	assert_int_equal(c.pty, 0);
	ab_cli_free(&c);
	assert_int_equal(parse(&c, &e, A("run", "--quiet", "ls")), 0);
	assert_true(c.quiet);
	ab_cli_free(&c);
}

/* Option parsing stops at `--` or at the first non-option: everything after
 * belongs to the command, including things that look like our options. */
static void test_run_stops_at_command(void **state)
{
	const struct {
		const char *const *args;
		const char *const *want;
		size_t nprof;
	} t[] = {
		{A("run", "--", "ls", "-l"), A("ls", "-l"), 0},
		{A("run", "ls", "-l"), A("ls", "-l"), 0},
		{A("run", "-p", "x", "ls", "-p", "y"), A("ls", "-p", "y"), 1},
		{A("run", "ls", "--", "-p"), A("ls", "--", "-p"), 0},
		{A("run", "--", "--", "x"), A("--", "x"), 0},
		{A("run", "--", "-p", "x"), A("-p", "x"), 0},
		{A("run", "--", "--help"), A("--help"), 0},
		{A("run", "sh", "-c", "echo --pty"), A("sh", "-c", "echo --pty"), 0},
		{A("run", "-w", "/w", "--", "env"), A("env"), 0},
		{A("run", "--"), A(NULL), 0},
		{A("run", "-", "x"), A("-", "x"), 0}, /* lone '-' is a non-option */
		{A("explain", "-p", "x", "--", "ls"), A("ls"), 1},
		{A("explain", "ls", "--json"), A("ls", "--json"), 0},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		ab_cli c;
		ab_err e;
		int r = parse(&c, &e, t[i].args);
		if (r != 0)
			fail_msg("case %zu: %s", i, e.msg);
		assert_argv(&c, t[i].want);
		if (c.profiles.n != t[i].nprof)
			fail_msg("case %zu: %zu profiles", i, c.profiles.n);
		ab_cli_free(&c);
	}
}

static void test_explain_doctor(void **state)
{
	ab_cli c;
	ab_err e;
	assert_int_equal(parse(&c, &e, A("explain", "--json", "-p", "a", "-w", "/w")), 0);
	assert_int_equal(c.cmd, AB_CMD_EXPLAIN);
	assert_true(c.json);
	assert_string_equal(c.profiles.v[0], "a");
	assert_string_equal(c.workspace, "/w");
	assert_int_equal(c.argc, 0);
	ab_cli_free(&c);

	assert_int_equal(parse(&c, &e, A("doctor", "--json")), 0);
	assert_int_equal(c.cmd, AB_CMD_DOCTOR);
	assert_true(c.json);
	ab_cli_free(&c);

	assert_int_equal(parse(&c, &e, A("doctor")), 0);
	assert_false(c.json);
	ab_cli_free(&c);
}

static void test_check(void **state)
{
	ab_cli c;
	ab_err e;
	assert_int_equal(parse(&c, &e, A("check", "a", "b.json", "./c")), 0);
	assert_int_equal(c.cmd, AB_CMD_CHECK);
	assert_int_equal(c.ncheck, 3);
	assert_string_equal(c.check_files[0], "a");
	assert_string_equal(c.check_files[1], "b.json");
	assert_string_equal(c.check_files[2], "./c");
	ab_cli_free(&c);

	/* a profile file whose name starts with '-' */
	assert_int_equal(parse(&c, &e, A("check", "--", "-odd.json")), 0);
	assert_int_equal(c.ncheck, 1);
	assert_string_equal(c.check_files[0], "-odd.json");
	ab_cli_free(&c);
}

static void test_test_escape(void **state)
{
	ab_cli c;
	ab_err e;
	assert_int_equal(parse(&c, &e, A("test-escape")), 0);
	assert_int_equal(c.cmd, AB_CMD_TEST_ESCAPE);
	assert_null(c.format);
	assert_null(c.out_path);
	assert_null(c.only);
	assert_false(c.list);
	ab_cli_free(&c);
	assert_int_equal(parse(&c, &e,
			       A("test-escape", "-p", "a", "-p", "b", "--format", "junit", "-o",
				 "r.xml", "--only", "FS-01,NET-01", "-q")),
			 0);
	assert_int_equal(c.profiles.n, 2);
	assert_string_equal(c.format, "junit");
	assert_string_equal(c.out_path, "r.xml");
	assert_string_equal(c.only, "FS-01,NET-01");
	assert_true(c.quiet);
	ab_cli_free(&c);
	assert_int_equal(parse(&c, &e, A("test-escape", "--list", "--output=x", "--format=json")),
			 0);
	assert_true(c.list);
	assert_string_equal(c.out_path, "x");
	assert_string_equal(c.format, "json");
	ab_cli_free(&c);
}

static void test_grants(void **state)
{
	ab_cli c;
	ab_err e;
	assert_int_equal(
		parse(&c, &e,
		      A("run", "--allow", "a.example:8443", "--read", "/srv", "--write=out",
			"--env", "EDITOR", "--allow", "b.example", "--", "ls")),
		0);
	assert_int_equal(c.grants.n, 5);
	assert_string_equal(c.grants.v[0], "allow=a.example:8443");
	assert_string_equal(c.grants.v[1], "read=/srv");
	assert_string_equal(c.grants.v[2], "write=out");
	assert_string_equal(c.grants.v[3], "env=EDITOR");
	assert_string_equal(c.grants.v[4], "allow=b.example");
	assert_argv(&c, A("ls"));
	ab_cli_free(&c);
	assert_int_equal(parse(&c, &e, A("explain", "--allow", "x.example")), 0);
	assert_int_equal(c.grants.n, 1);
	ab_cli_free(&c);
	/* after the command they belong to the command */
	assert_int_equal(parse(&c, &e, A("run", "ls", "--allow", "x")), 0);
	assert_int_equal(c.grants.n, 0);
	assert_argv(&c, A("ls", "--allow", "x"));
	ab_cli_free(&c);
}

/* --trace takes its optional value only attached with '=' */
static void test_trace(void **state)
{
	ab_cli c;
	ab_err e;
	assert_int_equal(parse(&c, &e, A("run", "ls")), 0);
	assert_int_equal(c.trace, AB_TRACE_OFF);
	ab_cli_free(&c);
	assert_int_equal(parse(&c, &e, A("run", "--trace", "ls")), 0);
	assert_int_equal(c.trace, AB_TRACE_STRICT);
	assert_argv(&c, A("ls"));
	ab_cli_free(&c);
	assert_int_equal(parse(&c, &e, A("run", "--trace=best-effort", "--", "ls")), 0);
	assert_int_equal(c.trace, AB_TRACE_BEST_EFFORT);
	assert_argv(&c, A("ls"));
	ab_cli_free(&c);
	/* a separate word is the command, not the value */
	assert_int_equal(parse(&c, &e, A("run", "--trace", "best-effort")), 0);
	assert_int_equal(c.trace, AB_TRACE_STRICT);
	assert_argv(&c, A("best-effort"));
	ab_cli_free(&c);
	const struct {
		const char *const *args;
		const char *msg;
	} bad[] = {
		{A("run", "--trace=yes", "ls"),
		 "run: --trace takes no value or '=best-effort', not 'yes'"},
		{A("run", "--trace=", "ls"),
		 "run: --trace takes no value or '=best-effort', not ''"},
		{A("run", "--trace=Best-Effort", "ls"),
		 "run: --trace takes no value or '=best-effort', not 'Best-Effort'"},
		{A("explain", "--trace"),
		 "explain: unknown option '--trace' (see 'agentbox explain --help')"},
		{A("test-escape", "--trace"),
		 "test-escape: unknown option '--trace' (see 'agentbox test-escape --help')"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(bad); i++) {
		assert_int_equal(parse(&c, &e, bad[i].args), -EINVAL);
		assert_string_equal(e.msg, bad[i].msg);
		ab_cli_free(&c);
	}
}

/* ---------------------------------------------------------------- errors */

static void test_errors(void **state)
{
	const struct {
		const char *const *args;
		const char *msg;
	} t[] = {
		{A("bogus"), "unknown command 'bogus' (see 'agentbox --help')"},
		{A("Run"), "unknown command 'Run' (see 'agentbox --help')"},
		{A(""), "unknown command '' (see 'agentbox --help')"},
		{A("--bogus"), "unknown option '--bogus' (see 'agentbox --help')"},
		{A("-p", "x", "run"), "unknown option '-p' (see 'agentbox --help')"},
		{A("check"), "check: name at least one profile (see 'agentbox check --help')"},
		{A("check", "--"),
		 "check: name at least one profile (see 'agentbox check --help')"},
		{A("doctor", "extra"), "doctor: unexpected argument 'extra'"},
		{A("run", "-x"), "run: unknown option '-x' (see 'agentbox run --help')"},
		{A("run", "--bogus", "ls"),
		 "run: unknown option '--bogus' (see 'agentbox run --help')"},
		{A("run", "--bogus=1"),
		 "run: unknown option '--bogus=1' (see 'agentbox run --help')"},
		/* an unknown letter in a group names the letter, not a neighbour */
		{A("run", "-xq", "ls"), "run: unknown option '-x' (see 'agentbox run --help')"},
		{A("run", "-qx", "ls"), "run: unknown option '-x' (see 'agentbox run --help')"},
		{A("run", "--json", "ls"),
		 "run: unknown option '--json' (see 'agentbox run --help')"},
		{A("run", "-p", ""), "run: -p needs a profile name or path"},
		{A("run", "--profile="), "run: -p needs a profile name or path"},
		{A("run", "-p"), "run: option '-p' needs an argument (see 'agentbox run --help')"},
		{A("run", "-w"), "run: option '-w' needs an argument (see 'agentbox run --help')"},
		{A("run", "--profile"),
		 "run: option '--profile' needs an argument (see 'agentbox run --help')"},
		{A("run", "--workspace"),
		 "run: option '--workspace' needs an argument (see 'agentbox run --help')"},
		{A("run", "--pty=1"), "run: unknown option '--pty=1' (see 'agentbox run --help')"},
		/* options that exist but not for this command name the option (not its
		 * argument) */
		{A("explain", "--pty"),
		 "explain: unknown option '--pty' (see 'agentbox explain --help')"},
		{A("explain", "--no-pty"),
		 "explain: unknown option '--no-pty' (see 'agentbox explain --help')"},
		{A("explain", "-q"),
		 "explain: unknown option '-q' (see 'agentbox explain --help')"},
		{A("doctor", "-p", "x"),
		 "doctor: unknown option '-p' (see 'agentbox doctor --help')"},
		{A("doctor", "--profile", "x"),
		 "doctor: unknown option '--profile' (see 'agentbox doctor --help')"},
		{A("doctor", "-w", "/x"),
		 "doctor: unknown option '-w' (see 'agentbox doctor --help')"},
		{A("doctor", "--pty"),
		 "doctor: unknown option '--pty' (see 'agentbox doctor --help')"},
		{A("check", "-p", "x", "y"),
		 "check: unknown option '-p' (see 'agentbox check --help')"},
		{A("check", "--json", "x"),
		 "check: unknown option '--json' (see 'agentbox check --help')"},
		{A("check", "-w", "/d", "x"),
		 "check: unknown option '-w' (see 'agentbox check --help')"},
		{A("test-escape", "extra"), "test-escape: unexpected argument 'extra'"},
		{A("test-escape", "-w", "/d"),
		 "test-escape: unknown option '-w' (see 'agentbox test-escape --help')"},
		{A("test-escape", "--format"),
		 "test-escape: option '--format' needs an argument (see 'agentbox test-escape --help')"},
		{A("test-escape", "--format="), "test-escape: --format needs a value"},
		{A("test-escape", "--only", ""), "test-escape: --only needs a value"},
		{A("run", "--format", "tap", "ls"),
		 "run: unknown option '--format' (see 'agentbox run --help')"},
		{A("explain", "--list"),
		 "explain: unknown option '--list' (see 'agentbox explain --help')"},
		{A("run", "-o", "x", "ls"), "run: unknown option '-o' (see 'agentbox run --help')"},
		{A("run", "--allow", "", "ls"), "run: --allow needs a value"},
		{A("run", "--read="), "run: --read needs a value"},
		{A("check", "--allow", "x", "p"),
		 "check: unknown option '--allow' (see 'agentbox check --help')"},
		{A("test-escape", "--write", "/x"),
		 "test-escape: unknown option '--write' (see 'agentbox test-escape --help')"},
		{A("doctor", "--env", "X"),
		 "doctor: unknown option '--env' (see 'agentbox doctor --help')"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		ab_cli c;
		ab_err e;
		int r = parse(&c, &e, t[i].args);
		if (r != -EINVAL)
			fail_msg("case %zu (%s ...): r=%d", i, t[i].args[0], r);
		if (strcmp(e.msg, t[i].msg) != 0)
			fail_msg("case %zu:\n got  %s\n want %s", i, e.msg, t[i].msg);
		assert_int_equal(e.exit_code, AB_EXIT_FAIL);
		ab_cli_free(&c);
	}
}

static void test_no_command(void **state)
{
	ab_cli c;
	ab_err e = {0};
	char *argv[] = {"agentbox", NULL};
	assert_int_equal(ab_cli_parse(1, argv, &c, &e), -EINVAL);
	assert_string_equal(e.msg, "no command given (see 'agentbox --help')");
	assert_int_equal(c.cmd, AB_CMD_HELP);
	ab_cli_free(&c);
}

/* Parsing twice in one process (getopt's hidden state is reset). */
static void test_reparse(void **state)
{
	for (int i = 0; i < 3; i++) {
		ab_cli c;
		ab_err e;
		assert_int_equal(parse(&c, &e, A("run", "-qp", "a", "x")), 0);
		assert_true(c.quiet);
		assert_string_equal(c.profiles.v[0], "a");
		assert_argv(&c, A("x"));
		ab_cli_free(&c);
		assert_int_equal(parse(&c, &e, A("run", "-x")), -EINVAL);
		ab_cli_free(&c);
	}
}

/* The usage texts go to stdout and name the public options. */
static void test_usage(void **state)
{
	static const struct {
		enum ab_cmd cmd;
		const char *needle;
	} t[] = {
		{AB_CMD_NONE, "Usage: agentbox COMMAND"},
		{AB_CMD_RUN, "Usage: agentbox run [-p PROFILE]"},
		{AB_CMD_RUN, "--no-pty"},
		{AB_CMD_RUN, "--allow HOST[:PORT]"},
		{AB_CMD_CHECK, "Usage: agentbox check PROFILE"},
		{AB_CMD_EXPLAIN, "--json"},
		{AB_CMD_DOCTOR, "Usage: agentbox doctor [--json]"},
		{AB_CMD_TEST_ESCAPE, "Usage: agentbox test-escape"},
		{AB_CMD_TEST_ESCAPE, "--format tap|junit|json"},
		{AB_CMD_NONE, "test-escape"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		char *buf = NULL;
		size_t len = 0;
		FILE *mem = open_memstream(&buf, &len);
		assert_non_null(mem);
		FILE *saved = stdout;
		stdout = mem;
		ab_cli_usage(t[i].cmd);
		stdout = saved;
		fclose(mem);
		if (!strstr(buf, t[i].needle))
			fail_msg("usage %d lacks '%s'", t[i].cmd, t[i].needle);
		free(buf);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_top_level),      cmocka_unit_test(test_run_defaults),
		cmocka_unit_test(test_run_options),    cmocka_unit_test(test_run_stops_at_command),
		cmocka_unit_test(test_explain_doctor), cmocka_unit_test(test_check),
		cmocka_unit_test(test_test_escape),    cmocka_unit_test(test_grants),
		cmocka_unit_test(test_trace),          cmocka_unit_test(test_errors),
		cmocka_unit_test(test_no_command),     cmocka_unit_test(test_reparse),
		cmocka_unit_test(test_usage),
	};
	return cmocka_run_group_tests_name("cli", tests, NULL, NULL);
}
