/* SPDX-License-Identifier: MIT */
/*
 * report: synthetic audit logs through the aggregator and both renderers.
 * The command tree (ppid links, exec replacing a program, unknown parents,
 * sessions reusing pids, collapsing), network, denials, secrets and policy
 * aggregates, warnings and credentials files saved by rename, malformed and
 * over-long lines, hostile strings (no raw control
 * byte, C1 control, bidi override or invalid UTF-8 reaches the text output),
 * the limits, the JSON keys, feeding split anywhere, the file checks of
 * ab_report_file, and the command line.
 */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/cli/cli.h"
#include "agentbox/report.h"

#define TS(s) "{\"ts\":\"2026-01-02T03:04:" s "Z\","

/* sh -c 'true; false; ls /' under pid 2, a re-exec, an orphan, network. */
static const char
	LOG_TREE[] =
		TS("05.000") "\"event\":\"start\",\"profile\":\"default\",\"proxy\":3128,"
			     "\"transparent\":true,\"grants\":[\"--allow example.org\"]}\n" TS(
				     "05.100") "\"event\":\"exec\",\"pid\":2,\"ppid\":1,\"cwd\":\"/work\",\"path\":\"/bin/sh\","
					       "\"argv\":[\"sh\",\"-c\",\"true; false; ls /\"]}\n" TS(
						       "05.110") "\"event\":\"exec\",\"pid\":3,\"ppid\":2,\"cwd\":\"/work\",\"path\":\"true\","
								 "\"argv\":[\"true\"]}\n" TS(
									 "05.111") "\"event\":\"exit\",\"pid\":3,\"status\":0,\"ms\":1}\n" TS("05.120") "\"event\":\"exec\",\"pid\":4,\"ppid\":2,\"cwd\":\"/work\",\"path\":\"false\","
																			"\"argv\":[\"false\"]}\n" TS("05.122") "\"event\":\"exit\",\"pid\":4,\"status\":1}\n" TS("05.130") "\"event\":\"exec\",\"pid\":5,\"ppid\":2,\"cwd\":\"/\",\"path\":\"ls\","
																															   "\"argv\":[\"ls\",\"/\"]}\n" TS("05.140") "\"event\":\"exit\",\"pid\":5,\"status\":0,\"ms\":10}\n" TS("05.150") "\"event\":\"exec\",\"pid\":6,\"ppid\":2,\"cwd\":\"/work\",\"path\":\"/bin/env\","
																																													   "\"argv\":[\"env\",\"python3\",\"x.py\"]}\n" TS("05.160") "\"event\":\"exec\",\"pid\":6,\"ppid\":2,\"cwd\":\"/work\","
																																																				     "\"path\":\"/usr/bin/python3\",\"argv\":[\"python3\",\"x.py\"]}\n" TS("06.160") "\"event\":\"exit\",\"pid\":6,\"signal\":9}\n" TS("06.170") "\"event\":\"exec\",\"pid\":40,\"ppid\":39,\"cwd\":\"/work\",\"path\":\"cat\","
																																																																						 "\"argv\":[\"cat\",\"it's here\"]}\n" TS("06.200") "\"event\":\"exit\",\"pid\":2,\"status\":0}\n" TS(
																																																																							 "06.300") "\"event\":\"request\",\"conn\":1,\"side\":\"explicit\",\"method\":\"CONNECT\","
																																																																								   "\"host\":\"example.org\",\"port\":443,\"decision\":\"allow\",\"rule\":\"example.org\","
																																																																								   "\"status\":200,\"bytes_up\":100,\"bytes_down\":2048,\"duration_ms\":5,"
																																																																								   "\"secrets\":\"GH,NPM\"}\n" TS(
																																																																									   "06.400") "\"event\":\"request\",\"conn\":2,\"side\":\"explicit\",\"method\":\"GET\","
																																																																										     "\"host\":\"example.org\",\"port\":443,\"decision\":\"allow\",\"rule\":\"example.org\","
																																																																										     "\"status\":200,\"bytes_up\":1,\"bytes_down\":2,\"secrets\":[\"GH\"],"
																																																																										     "\"masked\":\"NPM\"}\n" TS("06.500") "\"event\":\"request\",\"conn\":3,\"side\":\"explicit\",\"method\":\"CONNECT\","
																																																																															  "\"host\":\"evil.test\",\"port\":443,\"decision\":\"deny\",\"rule\":\"not-listed\","
																																																																															  "\"status\":403,\"bytes_up\":0,\"bytes_down\":0,\"reason\":\"evil.test:443 is not "
																																																																															  "in the allowlist\"}\n" TS("06.600") "\"event\":\"request\",\"conn\":4,\"side\":\"transparent\",\"method\":\"GET\","
																																																																																			       "\"host\":\"evil.test\",\"port\":443,\"decision\":\"deny\",\"rule\":\"not-listed\","
																																																																																			       "\"status\":403}\n" TS("06.700") "\"event\":\"dns\",\"proto\":\"udp\",\"name\":\"evil.test\",\"qtype\":\"A\","
																																																																																								"\"decision\":\"deny\",\"rcode\":\"NXDOMAIN\"}\n" TS(
																																																																																									"06.701") "\"event\":\"dns\",\"proto\":\"udp\",\"name\":\"example.org\",\"qtype\":\"A\","
																																																																																										  "\"decision\":\"allow\",\"rcode\":\"NOERROR\",\"answer\":\"198.18.0.1\"}\n" TS("06.800") "\"event\":\"denied\",\"kind\":\"syscall\",\"syscall\":\"ptrace\","
																																																																																																					   "\"errno\":\"EPERM\",\"pid\":7,\"comm\":\"gdb\",\"ip\":\"0x1234\"}\n" TS("06.801") "\"event\":\"denied\",\"kind\":\"syscall\",\"syscall\":\"ptrace\","
																																																																																																															      "\"errno\":\"EPERM\",\"pid\":7,\"comm\":\"gdb\",\"ip\":\"0x5678\"}\n" TS(
																																																																																																																      "06.802") "\"event\":\"denied-repeat\",\"kind\":\"syscall\",\"syscall\":\"ptrace\","
																																																																																																																		"\"pid\":7,\"comm\":\"gdb\",\"count\":5}\n" TS(
																																																																																																																			"06.803") "\"event\":\"denied\",\"kind\":\"syscall\",\"syscall\":\"mount\","
																																																																																																																				  "\"errno\":\"EPERM\",\"pid\":8,\"comm\":\"sh\",\"ip\":\"0x1\"}\n" TS("06.804") "\"event\":\"suppressed\",\"kind\":\"syscall\",\"count\":3}\n" TS("06.900") "\"event\":\"denied\",\"kind\":\"file\",\"source\":\"bpf\",\"pid\":9,"
																																																																																																																																							     "\"comm\":\"cat\",\"path\":\"/etc/shadow\",\"op\":\"open\",\"errno\":\"EACCES\"}\n" TS(
																																																																																																																																								     "06.910") "\"event\":\"trace\",\"kind\":\"connect\",\"pid\":9,\"comm\":\"nc\","
																																																																																																																																									       "\"family\":\"inet\",\"addr\":\"10.0.0.1\",\"port\":22,\"ret\":-1,"
																																																																																																																																									       "\"errno\":\"EACCES\"}\n" TS(
																																																																																																																																										       "06.911") "\"event\":\"trace\",\"kind\":\"connect\",\"pid\":9,\"comm\":\"nc\","
																																																																																																																																												 "\"family\":\"inet\",\"addr\":\"127.0.0.1\",\"port\":80,\"ret\":0}\n" TS(
																																																																																																																																													 "06.912") "\"event\":\"trace-lost\",\"count\":2}\n" TS("06.913") "\"event\":\"trace\",\"kind\":\"connect\",\"pid\":9,\"comm\":\"nc\","
																																																																																																																																																					  "\"family\":\"inet6\",\"addr\":\"::1\",\"port\":81,\"ret\":-115,"
																																																																																																																																																					  "\"errno\":\"EINPROGRESS\"}\n" TS(
																																																																																																																																																						  "06.914") "\"event\":\"secret-skipped\",\"secret\":\"AWS\"}\n" TS("07.000") "\"event\":\"policy\",\"action\":\"allow\",\"rule\":\"api.example.com\","
																																																																																																																																																															      "\"by_pid\":4242}\n" TS("07.100") "\"event\":\"future-thing\",\"x\":1}\n" TS(
																																																																																																																																																																      "08.500") "\"event\":\"end\",\"status\":0}\n";

typedef struct out {
	char *buf;
	size_t len;
	FILE *f;
} out;

static void out_open(out *o)
{
	memset(o, 0, sizeof(*o));
	o->f = open_memstream(&o->buf, &o->len);
	assert_non_null(o->f);
}

static void out_close(out *o)
{
	assert_int_equal(fclose(o->f), 0);
}

static ab_report *load(const char *log, const ab_report_limits *lim)
{
	ab_report *r = NULL;
	ab_report_limits l = lim ? *lim : (ab_report_limits){0};
	l.seed = l.seed ? l.seed : 42;
	assert_int_equal(ab_report_new(&l, &r), 0);
	assert_int_equal(ab_report_feed(r, log, strlen(log)), 0);
	assert_int_equal(ab_report_end(r), 0);
	return r;
}

static char *render_text(const ab_report *r, size_t max_lines)
{
	out o;
	out_open(&o);
	ab_report_opts opts = {.source = "audit.jsonl", .max_lines = max_lines};
	assert_int_equal(ab_report_text(r, &opts, o.f), 0);
	out_close(&o);
	return o.buf;
}

static json_t *render_json(const ab_report *r)
{
	out o;
	out_open(&o);
	assert_int_equal(ab_report_json(r, NULL, o.f), 0);
	out_close(&o);
	json_error_t e;
	json_t *j = json_loads(o.buf, JSON_REJECT_DUPLICATES, &e);
	if (!j)
		fail_msg("report JSON does not parse: %s at %d:%d\n%s", e.text, e.line, e.column,
			 o.buf);
	free(o.buf);
	return j;
}

static void has(const char *text, const char *needle)
{
	if (!strstr(text, needle))
		fail_msg("missing %s in:\n%s", needle, text);
}

static void hasnt(const char *text, const char *needle)
{
	if (strstr(text, needle))
		fail_msg("unexpected %s in:\n%s", needle, text);
}

/* Every byte is printable ASCII, '\n', or part of valid UTF-8 that is not a
 * C1 control, a bidi override or a line separator. */
static void terminal_safe(const char *t)
{
	const unsigned char *s = (const unsigned char *)t;
	for (size_t i = 0; s[i]; i++) {
		if (s[i] == '\n')
			continue;
		if (s[i] < 0x20 || s[i] == 0x7f)
			fail_msg("raw control byte 0x%02x at %zu in:\n%s", s[i], i, t);
		if (s[i] == 0xc2 && s[i + 1] >= 0x80 && s[i + 1] <= 0x9f)
			fail_msg("raw C1 control at %zu", i);
		if (s[i] == 0xe2 && s[i + 1] == 0x80 && s[i + 2] >= 0xa8 && s[i + 2] <= 0xae)
			fail_msg("raw bidi/line separator at %zu", i);
		if (s[i] >= 0x80 && (s[i] < 0xc2 || s[i] > 0xf4))
			fail_msg("invalid UTF-8 lead byte 0x%02x at %zu", s[i], i);
	}
}

/* The line of t that contains needle (copied), for order/indent checks. */
static char *line_of(const char *t, const char *needle)
{
	const char *p = strstr(t, needle);
	if (!p)
		fail_msg("missing %s in:\n%s", needle, t);
	const char *b = p;
	while (b > t && b[-1] != '\n')
		b--;
	const char *e = strchr(p, '\n');
	return strndup(b, e ? (size_t)(e - b) : strlen(b));
}

static size_t indent(const char *line)
{
	size_t n = 0;
	while (line[n] == ' ')
		n++;
	return n;
}

/* ---------------------------------------------------------------- tree */

static void test_tree_text(void **state)
{
	ab_report *r = load(LOG_TREE, NULL);
	ab_report_counts c;
	ab_report_counts_get(r, &c);
	assert_int_equal(c.bad_lines, 0);
	assert_int_equal(c.unknown, 1);
	assert_int_equal(c.sessions, 1);
	assert_int_equal(c.commands, 7);
	char *t = render_text(r, 0);
	terminal_safe(t);
	has(t, "agentbox report: audit.jsonl\n");
	has(t, "Profile:  default\n");
	has(t, "Started:  2026-01-02T03:04:05.000Z\n");
	has(t, "Ended:    2026-01-02T03:04:08.500Z (exit status 0)\n");
	has(t, "Duration: 3.5 s\n");
	has(t, "Grants:   --allow example.org\n");
	has(t, "Commands (7)\n");
	_cleanup_free_ char *sh = line_of(t, "sh -c 'true; false; ls /'");
	_cleanup_free_ char *tr = line_of(t, "  true  [");
	_cleanup_free_ char *fa = line_of(t, "  false  [");
	_cleanup_free_ char *ls = line_of(t, "ls /  [");
	_cleanup_free_ char *env = line_of(t, "env python3 x.py");
	_cleanup_free_ char *py = line_of(t, "  python3 x.py  [");
	_cleanup_free_ char *cat = line_of(t, "cat 'it'\"'\"'s here'");
	has(sh, "[exit 0, 1.1 s]");
	has(sh, "  in /work");
	has(tr, "[exit 0, 1 ms]");
	has(fa, "[exit 1, 2 ms]");
	has(ls, "[exit 0, 10 ms]  in /");
	hasnt(tr, " in /work"); /* same cwd as its parent */
	has(env, "[exec]");
	has(py, "[signal 9 (SIGKILL), 1.0 s]");
	has(cat, "[?]");
	assert_int_equal(indent(sh), 2);
	assert_int_equal(indent(tr), 4);
	assert_int_equal(indent(fa), 4);
	assert_int_equal(indent(ls), 4);
	assert_int_equal(indent(env), 4);
	assert_int_equal(indent(py), 6);  /* the program env became */
	assert_int_equal(indent(cat), 2); /* ppid 39 has no exec record: top level */
	assert_true(strstr(t, tr) < strstr(t, fa) && strstr(t, fa) < strstr(t, ls));
	/* network, denials, secrets, policy */
	has(t, "reached: 1 destination, 2 requests, 101 B up, 2.0 KiB down\n");
	has(t, "    example.org:443  2 requests, 101 B up, 2.0 KiB down\n");
	has(t, "refused: 2 requests\n");
	has(t, "    evil.test:443  2 attempts, rule not-listed: evil.test:443 is not in the "
	       "allowlist\n");
	has(t, "DNS: 1 lookup answered, 1 refused\n");
	has(t, "    evil.test  1 lookup (NXDOMAIN)\n");
	has(t, "Denials (11)\n"); /* 6 syscall + 1 file + 2 requests + 1 DNS + 1 connect */
	has(t, "  syscalls: 6\n");
	has(t, "    ptrace by gdb  5 times (EPERM)\n");
	has(t, "    mount by sh  1 time (EPERM)\n");
	has(t, "    3 more records suppressed by the rate limit\n");
	has(t, "  files: 1\n");
	has(t, "    open /etc/shadow by cat  1 time (EACCES)\n");
	has(t, "  network: 4 (2 requests refused, 1 DNS lookup refused, 1 connect refused)\n");
	has(t, "    connect inet 10.0.0.1 port 22 by nc  1 time (EACCES)\n");
	has(t, "  GH -> example.org:443  2 requests\n");
	has(t, "  NPM -> example.org:443  1 request, masked in 1\n");
	has(t, "  2026-01-02T03:04:07.000Z  allow api.example.com  (by pid 4242)\n");
	has(t,
	    "\nKernel trace\n  0 execs, 3 connects (1 refused, 0 failed otherwise), 2 events lost\n");
	has(t, "  AWS not loaded: its source was absent (optional)\n");
	hasnt(t, "could not be read");
	free(t);
	ab_report_free(r);
}

static void test_tree_json(void **state)
{
	ab_report *r = load(LOG_TREE, NULL);
	json_t *j = render_json(r);
	const char *keys[] = {"version",
			      "source",
			      "lines",
			      "events",
			      "bad_lines",
			      "first_bad_line",
			      "unknown_events",
			      "dropped_events",
			      "sessions",
			      "commands",
			      "command_counts",
			      "network_counts",
			      "reached",
			      "refused",
			      "dns_refused",
			      "denial_counts",
			      "denied_syscalls",
			      "denied_files",
			      "denied_connects",
			      "denied_other",
			      "secrets",
			      "secrets_skipped",
			      "policy",
			      "policy_changes",
			      "warnings",
			      "warning_count",
			      "credentials_files",
			      "asks",
			      "ask_counts",
			      "path_asks",
			      "path_ask_counts",
			      "review",
			      "review_events"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!json_object_get(j, keys[i]))
			fail_msg("JSON report lacks \"%s\"", keys[i]);
	assert_int_equal(json_object_size(j), sizeof(keys) / sizeof(keys[0]));
	assert_int_equal(json_integer_value(json_object_get(j, "version")), 1);
	assert_int_equal(json_integer_value(json_object_get(j, "bad_lines")), 0);
	assert_true(json_is_null(json_object_get(j, "first_bad_line")));
	json_t *ses = json_array_get(json_object_get(j, "sessions"), 0);
	assert_string_equal(json_string_value(json_object_get(ses, "profile")), "default");
	assert_int_equal(json_integer_value(json_object_get(ses, "duration_ms")), 3500);
	assert_true(json_is_true(json_object_get(ses, "complete")));
	assert_int_equal(json_integer_value(json_object_get(ses, "status")), 0);
	json_t *cmds = json_object_get(j, "commands");
	assert_int_equal(json_array_size(cmds), 7);
	/* ids are indices; parents refer to earlier ids */
	const struct {
		const char *argv0;
		json_int_t parent;
		const char *state;
		json_int_t status;
		json_int_t sig;
	} want[] = {
		{"sh", -1, "exited", 0, -1},    {"true", 0, "exited", 0, -1},
		{"false", 0, "exited", 1, -1},  {"ls", 0, "exited", 0, -1},
		{"env", 0, "exec", -1, -1},     {"python3", 4, "exited", -1, 9},
		{"cat", -1, "unknown", -1, -1},
	};
	for (size_t i = 0; i < 7; i++) {
		json_t *c = json_array_get(cmds, i);
		json_t *argv = json_object_get(c, "argv");
		assert_string_equal(json_string_value(json_array_get(argv, 0)), want[i].argv0);
		json_t *p = json_object_get(c, "parent");
		if (want[i].parent < 0)
			assert_true(json_is_null(p));
		else
			assert_int_equal(json_integer_value(p), want[i].parent);
		assert_string_equal(json_string_value(json_object_get(c, "state")), want[i].state);
		json_t *st = json_object_get(c, "status"), *sg = json_object_get(c, "signal");
		if (want[i].status < 0)
			assert_true(json_is_null(st));
		else
			assert_int_equal(json_integer_value(st), want[i].status);
		if (want[i].sig < 0)
			assert_true(json_is_null(sg));
		else
			assert_int_equal(json_integer_value(sg), want[i].sig);
		for (const char *const *k =
			     (const char *const[]){"id", "session", "pid", "ppid", "path", "cwd",
						   "truncated", "start", "ms", NULL};
		     *k; k++)
			assert_non_null(json_object_get(c, *k));
	}
	json_t *ls = json_array_get(cmds, 3);
	assert_string_equal(json_string_value(json_object_get(ls, "start")),
			    "2026-01-02T03:04:05.130Z");
	assert_int_equal(json_integer_value(json_object_get(ls, "ms")), 10);
	json_t *reached = json_array_get(json_object_get(j, "reached"), 0);
	assert_string_equal(json_string_value(json_object_get(reached, "host")), "example.org");
	assert_int_equal(json_integer_value(json_object_get(reached, "requests")), 2);
	assert_int_equal(json_integer_value(json_object_get(reached, "bytes_down")), 2050);
	json_t *refused = json_array_get(json_object_get(j, "refused"), 0);
	assert_string_equal(json_string_value(json_object_get(refused, "rule")), "not-listed");
	assert_int_equal(json_integer_value(json_object_get(refused, "count")), 2);
	json_t *dc = json_object_get(j, "denial_counts");
	assert_int_equal(json_integer_value(json_object_get(dc, "total")), 11);
	assert_int_equal(json_integer_value(json_object_get(dc, "syscall")), 6);
	assert_int_equal(json_integer_value(json_object_get(dc, "suppressed")), 3);
	json_t *sys0 = json_array_get(json_object_get(j, "denied_syscalls"), 0);
	assert_string_equal(json_string_value(json_object_get(sys0, "syscall")), "ptrace");
	assert_int_equal(json_integer_value(json_object_get(sys0, "count")), 5);
	json_t *sec = json_object_get(j, "secrets");
	assert_int_equal(json_array_size(sec), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(sec, 1), "name")),
			    "NPM");
	assert_int_equal(json_integer_value(json_object_get(json_array_get(sec, 1), "masked")), 1);
	json_t *pol = json_array_get(json_object_get(j, "policy"), 0);
	assert_string_equal(json_string_value(json_object_get(pol, "rule")), "api.example.com");
	assert_int_equal(json_integer_value(json_object_get(pol, "by_pid")), 4242);
	json_decref(j);
	ab_report_free(r);
}

/* Two runs appended to one log, the same pids in each. */
static void test_sessions(void **state)
{
	static const char log[] =
		TS("00.000") "\"event\":\"start\",\"profile\":\"one\"}\n" TS("00.100") "\"event\":\"exec\",\"pid\":2,\"ppid\":1,\"argv\":[\"make\"]}\n" TS("00.200") "\"event\":\"exit\",\"pid\":2,\"status\":2}\n" TS(
			"01.000") "\"event\":\"end\"}\n" TS("02.000") "\"event\":\"start\",\"profile\":\"two\"}\n" TS("02.100") "\"event\":\"exec\",\"pid\":3,\"ppid\":2,\"argv\":[\"child\"]}\n" TS("02.200") "\"event\":\"exit\",\"pid\":2,\"status\":0}\n";
	ab_report *r = load(log, NULL);
	ab_report_counts c;
	ab_report_counts_get(r, &c);
	assert_int_equal(c.sessions, 2);
	char *t = render_text(r, 0);
	has(t, "Sessions: 2");
	has(t, "  [session 2]\n    Profile:  two\n");
	has(t, "(no end record: still running, or agentbox was killed)");
	_cleanup_free_ char *child = line_of(t, "child  [");
	assert_int_equal(indent(child), 2); /* pid 2 of run two has no exec record */
	has(t, "make  [exit 2");
	has(t, "(1 exit record without an exec record)");
	free(t);
	ab_report_free(r);
}

static void test_collapse_and_cap(void **state)
{
	char log[16384] = TS("00.000") "\"event\":\"start\",\"profile\":\"p\"}\n" TS(
		"00.001") "\"event\":\"exec\",\"pid\":2,\"ppid\":1,\"argv\":[\"make\"]}\n";
	for (int i = 0; i < 5; i++) {
		char l[256];
		snprintf(
			l, sizeof(l),
			TS("00.002") "\"event\":\"exec\",\"pid\":%d,\"ppid\":2,\"argv\":[\"cc\",\"-c\"]}\n" TS(
				"00.003") "\"event\":\"exit\",\"pid\":%d,\"status\":0,\"ms\":2}\n",
			10 + i, 10 + i);
		strcat(log, l);
	}
	strcat(log,
	       TS("00.004") "\"event\":\"exec\",\"pid\":20,\"ppid\":2,\"argv\":[\"cc\",\"-c\"]}\n" TS(
		       "00.005") "\"event\":\"exit\",\"pid\":20,\"status\":1}\n");
	for (int i = 0; i < 10; i++) {
		char l[256];
		snprintf(
			l, sizeof(l),
			TS("00.006") "\"event\":\"exec\",\"pid\":%d,\"ppid\":2,\"argv\":[\"t%d\"]}\n",
			30 + i, i);
		strcat(log, l);
	}
	ab_report *r = load(log, NULL);
	char *t = render_text(r, 0);
	has(t, "    cc -c  [exit 0, 10 ms] (5 times)\n");
	has(t, "    cc -c  [exit 1, 1 ms]\n"); /* from the timestamps */
	free(t);
	t = render_text(r, 4);
	has(t, "  make  [?]\n");
	has(t, "    t0  [?]\n");
	hasnt(t, "t1");
	has(t, "  ... 9 more commands not shown (agentbox report --json lists all)\n");
	free(t);
	ab_report_free(r);
}

/* ---------------------------------------------------------------- warnings, credentials */

#define GITLINK "a gitlink (submodule entry) was added to the index during the run: "
#define NESTED "a nested git repository was created or changed during the run: "
#define WARN_GIT "\"event\":\"warning\",\"kind\":\"git\",\"message\":\""

/* Two runs appended: warnings per run (the same message in each), a repeat,
 * an unknown kind, one without a kind; credentials files saved and refused. */
static const char LOG_WARN[] = TS("00.000") "\"event\":\"start\",\"profile\":\"one\"}\n" TS("00.100") "\"event\":\"exec\",\"pid\":2,\"ppid\":1,\"argv\":[\"codex\"]}\n" TS(
	"00.200") "\"event\":\"credentials-saved\",\"path\":\"/h/.codex/auth.json\","
		  "\"pid\":7}\n" TS(
			  "00.300") "\"event\":\"credentials-saved\",\"path\":\"/h/.codex/auth.json\","
				    "\"pid\":8}\n" TS(
					    "00.400") "\"event\":\"credentials-refused\",\"path\":\"/h/.codex/auth.json\","
						      "\"pid\":-1,\"reason\":\"the new file has other links\"}\n" TS(
							      "00.500") "\"event\":\"credentials-refused\",\"path\":\"/h/.codex/auth.json\","
									"\"pid\":9,\"reason\":\"the new file is older than the sandbox\"}\n" TS(
										"00.600") "\"event\":\"credentials-refused\",\"path\":\"/h/.codex/auth.json\","
											  "\"pid\":9,\"reason\":\"the new file is older than the sandbox\"}\n" TS("00.700") "\"event\":\"credentials-saved\",\"path\":\"/h/.tool/c.json\",\"pid\":3}\n" TS(
												  "00.800") "\"event\":\"exit\",\"pid\":2,\"status\":0}\n" TS("00.900")
												  WARN_GIT
													  GITLINK
	"vendor/lib\"}\n" TS("00.901") WARN_GIT NESTED "vendor/lib/.git\"}\n" TS("00.902")
		WARN_GIT NESTED
	"vendor/lib/.git\"}\n" TS("00.903") "\"event\":\"warning\",\"kind\":\"disk\",\"message\":\"the future\"}\n" TS("00.904") "\"event\":\"warning\",\"message\":\"no kind\"}\n" TS(
		"01.000") "\"event\":\"end\",\"status\":0}\n" TS("02.000") "\"event\":\"start\",\"profile\":\"two\"}\n" TS("02.100") "\"event\":\"exec\",\"pid\":2,\"ppid\":1,\"argv\":[\"make\"]}\n" TS("02.200")
		WARN_GIT NESTED
	"vendor/lib/.git\"}\n" TS("02.300") "\"event\":\"end\",\"status\":0}\n";

static void test_warnings_text(void **state)
{
	ab_report *r = load(LOG_WARN, NULL);
	ab_report_counts c;
	ab_report_counts_get(r, &c);
	assert_int_equal(c.bad_lines, 0);
	assert_int_equal(c.unknown, 0);
	assert_int_equal(c.dropped, 0);
	assert_int_equal(c.warnings, 6);
	assert_int_equal(c.sessions, 2);
	char *t = render_text(r, 0);
	terminal_safe(t);
	has(t, "\nWarnings (6)\n"
	       "  [session 1] git: " GITLINK "vendor/lib\n"
	       "  [session 1] git: " NESTED "vendor/lib/.git x2\n"
	       "  [session 1] disk: the future\n"
	       "  [session 1] ?: no kind\n"
	       "  [session 2] git: " NESTED "vendor/lib/.git\n"
	       "\nCommands (2)\n");
	/* right after the header: the sessions and the event count come first */
	assert_true(strstr(t, "Profile:  two") < strstr(t, "Warnings (6)"));
	assert_true(strstr(t, "Events:   ") < strstr(t, "Warnings (6)"));
	has(t, "\nSecrets\n"
	       "  credentials files saved inside: /h/.codex/auth.json x2\n"
	       "  credentials files saved inside: /h/.tool/c.json x1\n"
	       "  credentials files refused: /h/.codex/auth.json (the new file is older than the "
	       "sandbox) x2\n"
	       "  credentials files refused: /h/.codex/auth.json (the new file has other links) "
	       "x1\n"
	       "\nRuntime policy changes\n");
	hasnt(t, "none used");
	hasnt(t, "of kinds this agentbox does not know");
	free(t);
	ab_report_free(r);

	/* one run: no session labels; no warnings: no section */
	r = load(TS("00.000") "\"event\":\"start\"}\n" TS(
			 "00.100") "\"event\":\"warning\",\"kind\":\"git\",\"message\":\"m\"}\n",
		 NULL);
	t = render_text(r, 0);
	has(t, "\nWarnings (1)\n  git: m\n\nCommands (0)\n");
	has(t, "  none used\n");
	free(t);
	ab_report_free(r);
	r = load(LOG_TREE, NULL);
	t = render_text(r, 0);
	hasnt(t, "Warnings");
	hasnt(t, "credentials files");
	free(t);
	ab_report_free(r);
}

/* A unix socket connect mediation refused: a denied connect, by path. */
static void test_unix_socket_denial(void **state)
{
	ab_report *r = load(
		TS("00.000") "\"event\":\"start\"}\n" TS(
			"00.100") "\"event\":\"denied\",\"kind\":\"unix-socket\","
				  "\"path\":\"/w/d.sock\",\"reason\":\"bound outside the sandbox\","
				  "\"pid\":2,\"comm\":\"py\"}\n" TS(
					  "00.200") "\"event\":\"denied\",\"kind\":\"unix-socket\","
						    "\"path\":\"/w/d.sock\",\"pid\":2,\"comm\":\"py\"}\n" TS(
							    "00.300") "\"event\":\"denied\",\"kind\":\"unix-socket\"}\n",
		NULL);
	ab_report_counts c;
	ab_report_counts_get(r, &c);
	assert_int_equal(c.bad_lines, 1); /* no path */
	char *t = render_text(r, 0);
	has(t, "  network: 2 (0 requests refused, 0 DNS lookups refused, 2 connects refused)\n"
	       "    connect unix /w/d.sock by py  2 times (EACCES)\n");
	free(t);
	ab_report_free(r);
}

/* run --ask's offer at exit: offers counted, an answer kept with its
 * paths, their programs and the lines; a bad one is a bad line. */
static void test_ask_path(void **state)
{
	ab_report *r = load(
		TS("00.000") "\"event\":\"start\"}\n" TS(
			"00.100") "\"event\":\"ask-path\",\"phase\":\"offer\","
				  "\"paths\":[{\"path\":\"/x/out/new\",\"call\":\"openat\","
				  "\"errno\":30,\"program\":\"/usr/bin/touch\",\"count\":1}],"
				  "\"lines\":[\"filesystem.write /x/out\"],\"profile\":\"/p.json\"}\n" TS(
					  "00.200") "\"event\":\"ask-path\",\"phase\":\"answer\","
						    "\"answer\":\"yes\",\"waited_ms\":1500,"
						    "\"paths\":[{\"path\":\"/x/out/new\",\"program\":"
						    "\"/usr/bin/touch\"}],\"lines\":[\"filesystem.write "
						    "/x/out\"],\"profile\":\"/p.json\"}\n" TS(
							    "00.300") "\"event\":\"ask-path\",\"phase\":"
								      "\"answer\",\"answer\":\"no\","
								      "\"lines\":\"not a list\"}\n" TS(
									      "00.400") "\"event\":\"ask-path\","
											"\"phase\":\"answer\","
											"\"paths\":[7]}\n",
		NULL);
	ab_report_counts c;
	ab_report_counts_get(r, &c);
	assert_int_equal(c.bad_lines, 2); /* lines not a list; a path not a string */
	char *t = render_text(r, 0);
	has(t, "Paths offered at exit (run --ask): 1 offer, 1 answer\n");
	has(t, "yes (after 1.5 s), written to /p.json\n"
	       "      refused   /x/out/new (/usr/bin/touch)\n"
	       "      line      filesystem.write /x/out\n");
	free(t);
	json_t *j = render_json(r);
	json_t *a = json_array_get(json_object_get(j, "path_asks"), 0);
	assert_string_equal(json_string_value(json_object_get(a, "answer")), "yes");
	assert_string_equal(json_string_value(json_array_get(json_object_get(a, "lines"), 0)),
			    "filesystem.write /x/out");
	json_t *pc = json_object_get(j, "path_ask_counts");
	assert_int_equal(json_integer_value(json_object_get(pc, "offers")), 1);
	assert_int_equal(json_integer_value(json_object_get(pc, "answers")), 1);
	json_decref(j);
	ab_report_free(r);
}

/* A placeholder sent on to a host its secret is not bound to: the request
 * lines' "elsewhere" counted per secret and host; the placeholder-elsewhere
 * event (the first of a pair) is known and adds nothing. */
static void test_placeholder_elsewhere(void **state)
{
#define REQ(t, host, extra)                                                           \
	TS(t)                                                                         \
	"\"event\":\"request\",\"conn\":1,\"side\":\"explicit\",\"method\":\"POST\"," \
	"\"host\":\"" host "\",\"port\":443,\"decision\":\"allow\",\"rule\":\"x\","   \
	"\"status\":200,\"bytes_up\":1,\"bytes_down\":1" extra "}\n"
	ab_report *r = load(
		TS("00.000") "\"event\":\"start\"}\n" REQ("00.100", "api.anthropic.com",
							  ",\"secrets\":\"KEY\","
							  "\"elsewhere\":\"GH_TOKEN\"")
			TS("00.101") "\"event\":\"placeholder-elsewhere\",\"secret\":\"GH_TOKEN\","
				     "\"host\":\"api.anthropic.com\",\"port\":443,\"where\":\"body\","
				     "\"conn\":1}\n" REQ("00.200", "api.anthropic.com",
							 ",\"secrets\":\"KEY\","
							 "\"elsewhere\":[\"GH_TOKEN\",\"NPM\"]")
					     REQ("00.300", "api.anthropic.com",
						 ",\"elsewhere\":\"GH_TOKEN\"")
						     REQ("00.400", "x.test", ",\"elsewhere\":7"),
		NULL);
#undef REQ
	ab_report_counts c;
	ab_report_counts_get(r, &c);
	assert_int_equal(c.bad_lines, 1); /* "elsewhere" neither names nor an array */
	assert_int_equal(c.unknown, 0);
	char *t = render_text(r, 0);
	has(t, "  KEY -> api.anthropic.com:443  2 requests\n");
	has(t, "  GH_TOKEN -> api.anthropic.com:443  placeholder sent on unchanged in 3 requests "
	       "(not bound there)\n");
	has(t, "  NPM -> api.anthropic.com:443  placeholder sent on unchanged in 1 request (not "
	       "bound there)\n");
	free(t);
	json_t *j = render_json(r), *sec = json_object_get(j, "secrets");
	bool seen = false;
	for (size_t i = 0; i < json_array_size(sec); i++) {
		json_t *o = json_array_get(sec, i);
		if (strcmp(json_string_value(json_object_get(o, "name")), "GH_TOKEN") != 0)
			continue;
		assert_int_equal(json_integer_value(json_object_get(o, "elsewhere")), 3);
		assert_int_equal(json_integer_value(json_object_get(o, "requests")), 0);
		seen = true;
	}
	assert_true(seen);
	json_decref(j);
	ab_report_free(r);
}

static void test_warnings_json(void **state)
{
	ab_report *r = load(LOG_WARN, NULL);
	json_t *j = render_json(r);
	assert_int_equal(json_integer_value(json_object_get(j, "warning_count")), 6);
	assert_int_equal(json_integer_value(json_object_get(j, "unknown_events")), 0);
	json_t *w = json_object_get(j, "warnings");
	assert_int_equal(json_array_size(w), 5);
	const struct {
		json_int_t session;
		const char *kind, *msg;
		json_int_t count;
	} want[] = {
		{1, "git", GITLINK "vendor/lib", 1},
		{1, "git", NESTED "vendor/lib/.git", 2},
		{1, "disk", "the future", 1},
		{1, NULL, "no kind", 1},
		{2, "git", NESTED "vendor/lib/.git", 1},
	};
	for (size_t i = 0; i < 5; i++) {
		json_t *x = json_array_get(w, i);
		assert_int_equal(json_object_size(x), 4);
		assert_int_equal(json_integer_value(json_object_get(x, "session")),
				 want[i].session);
		if (want[i].kind)
			assert_string_equal(json_string_value(json_object_get(x, "kind")),
					    want[i].kind);
		else
			assert_true(json_is_null(json_object_get(x, "kind")));
		assert_string_equal(json_string_value(json_object_get(x, "message")), want[i].msg);
		assert_int_equal(json_integer_value(json_object_get(x, "count")), want[i].count);
	}
	json_t *cf = json_object_get(j, "credentials_files");
	assert_int_equal(json_array_size(cf), 4);
	const struct {
		const char *path, *outcome, *reason;
		json_int_t count;
	} cw[] = {
		{"/h/.codex/auth.json", "saved", NULL, 2},
		{"/h/.codex/auth.json", "refused", "the new file is older than the sandbox", 2},
		{"/h/.codex/auth.json", "refused", "the new file has other links", 1},
		{"/h/.tool/c.json", "saved", NULL, 1},
	};
	for (size_t i = 0; i < 4; i++) {
		json_t *x = json_array_get(cf, i);
		assert_int_equal(json_object_size(x), 4);
		assert_string_equal(json_string_value(json_object_get(x, "path")), cw[i].path);
		assert_string_equal(json_string_value(json_object_get(x, "outcome")),
				    cw[i].outcome);
		if (cw[i].reason)
			assert_string_equal(json_string_value(json_object_get(x, "reason")),
					    cw[i].reason);
		else
			assert_true(json_is_null(json_object_get(x, "reason")));
		assert_int_equal(json_integer_value(json_object_get(x, "count")), cw[i].count);
	}
	json_decref(j);
	ab_report_free(r);

	/* none: empty lists, a zero count */
	r = load(LOG_TREE, NULL);
	j = render_json(r);
	assert_int_equal(json_array_size(json_object_get(j, "warnings")), 0);
	assert_true(json_is_array(json_object_get(j, "warnings")));
	assert_int_equal(json_integer_value(json_object_get(j, "warning_count")), 0);
	assert_int_equal(json_array_size(json_object_get(j, "credentials_files")), 0);
	json_decref(j);
	ab_report_free(r);
}

/* Hostile message, kind, path and reason; malformed records; the cap. */
static void test_warnings_hostile(void **state)
{
	static const char log[] =
		"{\"event\":\"start\"}\n"
		"{\"event\":\"warning\",\"kind\":\"git\\u001b[2J\",\"message\":\"x: "
		"vendor/\\u001b]0;pwned\\u0007\\n[fake] \\u202eevil\\u009b\\\\\"}\n"
		"{\"event\":\"credentials-saved\",\"path\":\"/h/\\u001b[31mc\\u2066.json\","
		"\"pid\":2}\n"
		"{\"event\":\"credentials-refused\",\"path\":\"/h/c\",\"pid\":2,"
		"\"reason\":\"why\\r\\u2028\\u0085no\"}\n"
		"{\"event\":\"warning\",\"kind\":\"git\"}\n"                          /* 5 */
		"{\"event\":\"warning\",\"kind\":\"git\",\"message\":7}\n"            /* 6 */
		"{\"event\":\"warning\",\"kind\":[],\"message\":\"m\"}\n"             /* 7 */
		"{\"event\":\"credentials-saved\",\"pid\":2}\n"                       /* 8 */
		"{\"event\":\"credentials-saved\",\"path\":\"/p\",\"pid\":\"2\"}\n"   /* 9 */
		"{\"event\":\"credentials-refused\",\"path\":\"/p\",\"pid\":-2}\n"    /* 10 */
		"{\"event\":\"credentials-refused\",\"path\":\"/p\",\"reason\":{}}\n" /* 11 */
		"{\"event\":\"credentials-refused\",\"path\":\"/q\"}\n"; /* fine: no reason, pid */
	ab_report *r = load(log, NULL);
	ab_report_counts c;
	ab_report_counts_get(r, &c);
	assert_int_equal(c.bad_lines, 7);
	assert_int_equal(c.first_bad, 5);
	assert_int_equal(c.warnings, 1);
	char *t = render_text(r, 0);
	terminal_safe(t);
	hasnt(t, "\x1b");
	hasnt(t, "\n[fake]");
	has(t, "\nWarnings (1)\n  git\\x1b[2J: x: vendor/\\x1b]0;pwned\\x07\\x0a[fake] "
	       "\\xe2\\x80\\xaeevil\\xc2\\x9b\\\\\n");
	has(t, "  credentials files saved inside: /h/\\x1b[31mc\\xe2\\x81\\xa6.json x1\n");
	has(t, "  credentials files refused: /h/c (why\\x0d\\xe2\\x80\\xa8\\xc2\\x85no) x1\n");
	has(t, "  credentials files refused: /q x1\n");
	free(t);
	json_t *j = render_json(r);
	json_t *w = json_array_get(json_object_get(j, "warnings"), 0);
	assert_string_equal(json_string_value(json_object_get(w, "kind")), "git\x1b[2J");
	assert_string_equal(json_string_value(json_object_get(w, "message")),
			    "x: vendor/\x1b]0;pwned\x07\n[fake] \xe2\x80\xae"
			    "evil\xc2\x9b\\");
	json_decref(j);
	ab_report_free(r);

	/* a long message is cut on the screen, kept whole (up to 4 KiB) in JSON */
	char big[6000];
	memset(big, 'p', sizeof(big));
	int n = snprintf(big, sizeof(big), "{" WARN_GIT);
	memset(big + n, 'p', 5000);
	strcpy(big + n + 5000, "\"}\n");
	r = load(big, NULL);
	t = render_text(r, 0);
	_cleanup_free_ char *line = line_of(t, "  git: ppp");
	assert_int_equal(strlen(line), 2 + 5 + 300);
	has(line, "p...");
	free(t);
	j = render_json(r);
	w = json_array_get(json_object_get(j, "warnings"), 0);
	assert_int_equal(strlen(json_string_value(json_object_get(w, "message"))),
			 AB_REPORT_STR_MAX);
	json_decref(j);
	ab_report_free(r);
}

/* At most 50 warnings and 50 credentials lines each on the screen; beyond
 * the item budget, warnings are still counted and said to be more. */
static void test_warnings_cap(void **state)
{
	char *log = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&log, &len);
	fputs("{\"event\":\"start\"}\n", f);
	for (int i = 0; i < 70; i++)
		fprintf(f,
			"{\"event\":\"warning\",\"kind\":\"git\",\"message\":\"w%d\"}\n"
			"{\"event\":\"credentials-saved\",\"path\":\"/s%d\",\"pid\":1}\n"
			"{\"event\":\"credentials-refused\",\"path\":\"/r%d\",\"pid\":1}\n",
			i, i, i);
	fclose(f);
	ab_report *r = load(log, NULL);
	char *t = render_text(r, 0);
	has(t, "Warnings (70)\n  git: w0\n");
	has(t, "  git: w49\n  ... 20 more\n\nCommands");
	hasnt(t, "w50");
	/* by path: /s0 /s1 /s10../s19 /s2 ... /s53 is the 50th */
	has(t, "  credentials files saved inside: /s53 x1\n    ... 20 more\n"
	       "  credentials files refused: /r0 x1\n");
	has(t, "  credentials files refused: /r53 x1\n    ... 20 more\n");
	hasnt(t, "/s54 ");
	free(t);
	json_t *j = render_json(r);
	assert_int_equal(json_array_size(json_object_get(j, "warnings")), 70);
	assert_int_equal(json_array_size(json_object_get(j, "credentials_files")), 140);
	json_decref(j);
	ab_report_free(r);

	ab_report_limits l = {.max_items = 10};
	r = load(log, &l);
	ab_report_counts c;
	ab_report_counts_get(r, &c);
	assert_int_equal(c.warnings, 70);
	assert_true(c.dropped > 0);
	t = render_text(r, 0);
	_cleanup_free_ char *head = line_of(t, "Warnings (70)");
	_cleanup_free_ char *more = line_of(t, "  ... ");
	assert_int_equal(indent(more), indent(head) + 2); /* "... N more" under the heading */
	assert_true(strstr(t, "Warnings (70)") < strstr(t, "  ... "));
	assert_true(strstr(t, "  ... ") < strstr(t, "Commands"));
	has(t, "events were not kept in full");
	free(t);
	j = render_json(r);
	assert_int_equal(json_integer_value(json_object_get(j, "warning_count")), 70);
	assert_true(json_array_size(json_object_get(j, "warnings")) < 10);
	json_decref(j);
	ab_report_free(r);
	free(log);
}

/* ---------------------------------------------------------------- bad input */

static void test_malformed(void **state)
{
	static const char log[] = TS(
		"00.000") "\"event\":\"start\",\"profile\":\"p\"}\n"
			  "not json\n"                                    /* 2 */
			  "\n"                                            /* blank: not bad */
			  "   \r\n"                                       /* blank */
			  "[1,2]\n"                                       /* 5 not an object */
			  "{\"ts\":\"x\"}\n"                              /* 6 no event */
			  "{\"event\":7}\n"                               /* 7 event not a string */
			  "{\"event\":\"exec\",\"pid\":\"2\"}\n"          /* 8 pid not an integer */
			  "{\"event\":\"exec\",\"pid\":-5}\n"             /* 9 out of range */
			  "{\"event\":\"exec\",\"pid\":5,\"argv\":[1]}\n" /* 10 argv element */
			  "{\"event\":\"request\",\"host\":\"h\",\"port\":99999,\"decision\":\"allow\"}\n"
			  "{\"event\":\"dns\",\"name\":\"a\",\"name\":\"b\",\"decision\":\"deny\"}\n" /* dup */
			  "{\"event\":\"exit\",\"pid\":1e3}\n"                     /* 13 a real */
			  "{\"event\":\"exec\",\"pid\":99999999999999999999999}\n" /* 14 too big */
			  "{\"event\":\"request\",\"host\":\"h\",\"port\":1,\"decision\":\"maybe\"}\n"
			  "{\"event\":\"exec\",\"pid\":3,\"cwd\":null}\r\n" /* fine: null = absent, CRLF */
			  "{\"event\":\"end\"}\n"
			  "{\"event\":\"exec\",\"pid\":4"; /* no newline, truncated */
	ab_report *r = load(log, NULL);
	ab_report_counts c;
	ab_report_counts_get(r, &c);
	assert_int_equal(c.lines, 18);
	assert_int_equal(c.bad_lines, 12);
	assert_int_equal(c.first_bad, 2);
	assert_int_equal(c.events, 4);
	assert_int_equal(c.unknown, 1); /* decision "maybe" */
	assert_int_equal(c.commands, 1);
	char *t = render_text(r, 0);
	has(t, "12 lines could not be read (first: line 2)\n");
	free(t);
	json_t *j = render_json(r);
	assert_int_equal(json_integer_value(json_object_get(j, "bad_lines")), 12);
	assert_int_equal(json_integer_value(json_object_get(j, "first_bad_line")), 2);
	json_decref(j);
	ab_report_free(r);
}

static void test_feed_split_anywhere(void **state)
{
	ab_report *whole = load(LOG_TREE, NULL);
	char *want = render_text(whole, 0);
	ab_report *r = NULL;
	ab_report_limits l = {.seed = 7};
	assert_int_equal(ab_report_new(&l, &r), 0);
	for (size_t i = 0; LOG_TREE[i]; i++)
		assert_int_equal(ab_report_feed(r, LOG_TREE + i, 1), 0);
	assert_int_equal(ab_report_end(r), 0);
	char *got = render_text(r, 0);
	assert_string_equal(got, want);
	free(got);
	free(want);
	ab_report_free(r);
	ab_report_free(whole);
}

static void test_long_lines(void **state)
{
	ab_report_limits l = {.max_line = 64};
	char log[1024];
	char big[200];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	snprintf(log, sizeof(log),
		 "{\"event\":\"start\"}\n{\"event\":\"dns\",\"name\":\"%s\"}\n"
		 "{\"event\":\"end\"}\n%s",
		 big, big);
	/* fed in pieces, whole, and byte by byte: the same counts */
	for (int mode = 0; mode < 3; mode++) {
		ab_report *r = NULL;
		l.seed = 1;
		assert_int_equal(ab_report_new(&l, &r), 0);
		size_t n = strlen(log), step = mode == 0 ? n : mode == 1 ? 7 : 1;
		for (size_t i = 0; i < n; i += step)
			assert_int_equal(ab_report_feed(r, log + i, n - i < step ? n - i : step),
					 0);
		assert_int_equal(ab_report_end(r), 0);
		ab_report_counts c;
		ab_report_counts_get(r, &c);
		assert_int_equal(c.lines, 4);
		assert_int_equal(c.bad_lines, 2);
		assert_int_equal(c.first_bad, 2);
		assert_int_equal(c.events, 2);
		ab_report_free(r);
	}
}

/* ---------------------------------------------------------------- hostile strings */

static void test_hostile_strings(void **state)
{
	static const char log[] =
		"{\"event\":\"start\",\"profile\":\"p\\u001b[2J\",\"grants\":[\"--allow \\u009b31m\"]}\n"
		"{\"event\":\"exec\",\"pid\":2,\"ppid\":1,\"cwd\":\"/w\\nFAKE LINE\","
		"\"path\":\"x\",\"argv\":[\"echo\",\"\\u001b]0;pwned\\u0007\",\"a\\u007fb\","
		"\"\\u202eevil\",\"tab\\there\",\"back\\\\slash\"]}\n"
		"{\"event\":\"request\",\"host\":\"h\\u001b[31m.test\",\"port\":443,"
		"\"decision\":\"deny\",\"rule\":\"r\\u0085\",\"reason\":\"\\u2028x\\r\"}\n"
		"{\"event\":\"dns\",\"name\":\"\\u0000x\",\"decision\":\"deny\"}\n"
		"{\"event\":\"denied\",\"kind\":\"syscall\",\"syscall\":\"ptrace\",\"pid\":2,"
		"\"comm\":\"\\u001bc\\u009d\"}\n"
		"{\"event\":\"denied\",\"kind\":\"file\",\"path\":\"/\\u2066x\",\"comm\":\"c\"}\n"
		"{\"event\":\"policy\",\"rule\":\"\\u001b[8m\",\"by_pid\":1}\n";
	ab_report *r = load(log, NULL);
	ab_report_counts c;
	ab_report_counts_get(r, &c);
	assert_int_equal(c.bad_lines, 1); /* \u0000: jansson refuses it */
	char *t = render_text(r, 0);
	terminal_safe(t);
	hasnt(t, "\x1b");
	hasnt(t, "\x07");
	has(t, "'\\x1b]0;pwned\\x07'");
	has(t, "'a\\x7fb'");
	has(t, "'\\xe2\\x80\\xaeevil'");
	has(t, "'tab\\x09here'");
	has(t, "'back\\\\slash'");
	has(t, "in /w\\x0aFAKE LINE");
	hasnt(t, "\nFAKE LINE");
	has(t, "p\\x1b[2J");
	has(t, "--allow \\xc2\\x9b31m");
	has(t, "h\\x1b[31m.test:443");
	has(t, "rule r\\xc2\\x85: \\xe2\\x80\\xa8x\\x0d");
	has(t, "\\x1bc\\xc2\\x9d");
	has(t, "/\\xe2\\x81\\xa6x");
	has(t, "  ? \\x1b[8m  (by pid 1)");
	free(t);
	/* JSON keeps the strings exact, escaped by the encoder */
	out o;
	out_open(&o);
	assert_int_equal(ab_report_json(r, NULL, o.f), 0);
	out_close(&o);
	for (size_t i = 0; i < o.len; i++)
		if ((unsigned char)o.buf[i] < 0x20 && o.buf[i] != '\n')
			fail_msg("raw control byte in the JSON report");
		else if ((unsigned char)o.buf[i] > 0x7f)
			fail_msg("raw non-ASCII byte in the JSON report");
	has(o.buf, "\"\\u001B]0;pwned\\u0007\"");
	free(o.buf);
	ab_report_free(r);
}

static char *san(const char *s, size_t n, size_t cols, size_t *w)
{
	out o;
	out_open(&o);
	*w = ab_report_sanitize(o.f, s, n, cols);
	out_close(&o);
	return o.buf;
}

static void test_sanitize(void **state)
{
	const struct {
		const char *in;
		size_t n;
		size_t cols;
		const char *want;
		size_t w;
	} t[] = {
		{"plain", SIZE_MAX, 0, "plain", 5},
		{"\x1b]0;x\x07", SIZE_MAX, 0, "\\x1b]0;x\\x07", 12},
		{"a\x7f", SIZE_MAX, 0, "a\\x7f", 5},
		{"\xc2\x9b", SIZE_MAX, 0, "\\xc2\\x9b", 8},                    /* C1 CSI */
		{"\xc3\xa9t\xc3\xa9", SIZE_MAX, 0, "\xc3\xa9t\xc3\xa9", 3},    /* é: kept */
		{"\xff", SIZE_MAX, 0, "\\xff", 4},                             /* invalid */
		{"\xc0\xaf", SIZE_MAX, 0, "\\xc0\\xaf", 8},                    /* overlong '/' */
		{"\xe0\x80\xaf", SIZE_MAX, 0, "\\xe0\\x80\\xaf", 12},          /* overlong */
		{"\xed\xa0\x80", SIZE_MAX, 0, "\\xed\\xa0\\x80", 12},          /* surrogate */
		{"\xf4\x90\x80\x80", SIZE_MAX, 0, "\\xf4\\x90\\x80\\x80", 16}, /* > U+10FFFF */
		{"\xe2\x82", SIZE_MAX, 0, "\\xe2\\x82", 8},                    /* truncated */
		{"\xf0\x9f\x98\x80", SIZE_MAX, 0, "\xf0\x9f\x98\x80", 1},      /* emoji */
		{"\xe2\x80\xae", SIZE_MAX, 0, "\\xe2\\x80\\xae", 12},          /* RLO */
		{"\xd8\x9c", SIZE_MAX, 0, "\\xd8\\x9c", 8},                    /* ALM */
		{"a\\b", SIZE_MAX, 0, "a\\\\b", 4},
		{"abc\0def", 7, 0, "abc", 3}, /* NUL ends it */
		{"abcdef", 3, 0, "abc", 3},   /* n bytes only */
		{"abcdefghij", SIZE_MAX, 8, "abcde...", 8},
		{"abcdefgh", SIZE_MAX, 8, "abcdefgh", 8},
		{"\x1b\x1b\x1b", SIZE_MAX, 8, "\\x1b...", 7}, /* no half escape */
		{"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", SIZE_MAX, 4, "\xc3\xa9...", 4},
		{NULL, 5, 0, "", 0},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		size_t w;
		char *s = san(t[i].in, t[i].n, t[i].cols, &w);
		if (strcmp(s, t[i].want) != 0 || w != t[i].w)
			fail_msg("case %zu: got \"%s\" (%zu cols), want \"%s\" (%zu)", i, s, w,
				 t[i].want, t[i].w);
		free(s);
	}
}

/* ---------------------------------------------------------------- limits */

static void test_limits(void **state)
{
	/* argv: at most 64 entries, 256 bytes each, cut on a UTF-8 boundary */
	char *log = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&log, &len);
	fputs("{\"event\":\"exec\",\"pid\":2,\"argv\":[", f);
	for (int i = 0; i < 100; i++)
		fprintf(f, "%s\"a%d\"", i ? "," : "", i);
	fputs("]}\n{\"event\":\"exec\",\"pid\":3,\"argv\":[\"x", f);
	for (int i = 0; i < 200; i++)
		fputs("\xc3\xa9", f); /* 400 bytes of 2-byte characters */
	fputs("\"]}\n", f);
	fclose(f);
	ab_report *r = load(log, NULL);
	json_t *j = render_json(r);
	json_t *c0 = json_array_get(json_object_get(j, "commands"), 0);
	json_t *c1 = json_array_get(json_object_get(j, "commands"), 1);
	assert_int_equal(json_array_size(json_object_get(c0, "argv")), AB_REPORT_ARGV_MAX);
	assert_true(json_is_true(json_object_get(c0, "truncated")));
	const char *a = json_string_value(json_array_get(json_object_get(c1, "argv"), 0));
	assert_non_null(a); /* valid UTF-8, or jansson would have refused it */
	assert_int_equal(strlen(a), AB_REPORT_ARG_MAX - 1);
	assert_true(json_is_true(json_object_get(c1, "truncated")));
	char *t = render_text(r, 0);
	has(t, "a25 a26... [truncated]  [?]\n");
	free(t);
	json_decref(j);
	ab_report_free(r);
	free(log);

	/* items: beyond the budget, events are counted as dropped, totals stay right */
	log = NULL;
	f = open_memstream(&log, &len);
	fputs("{\"event\":\"start\"}\n", f);
	for (int i = 0; i < 50; i++)
		fprintf(f,
			"{\"event\":\"request\",\"host\":\"h%d.test\",\"port\":443,"
			"\"decision\":\"deny\",\"rule\":\"not-listed\"}\n",
			i);
	for (int i = 0; i < 50; i++)
		fprintf(f, "{\"event\":\"exec\",\"pid\":%d,\"argv\":[\"p%d\"]}\n", 100 + i, i);
	fclose(f);
	ab_report_limits l = {.max_items = 20};
	r = load(log, &l);
	ab_report_counts c;
	ab_report_counts_get(r, &c);
	assert_int_equal(c.events, 101);
	assert_int_equal(c.bad_lines, 0);
	assert_true(c.dropped >= 80);
	assert_true(c.commands == 0);
	t = render_text(r, 0);
	has(t, "refused: 50 requests\n");
	has(t, "events were not kept in full: the report holds at most 20 items");
	free(t);
	ab_report_free(r);

	/* bytes: a small string budget */
	ab_report_limits lb = {.max_bytes = 256};
	r = load(log, &lb);
	ab_report_counts_get(r, &c);
	assert_true(c.dropped > 0);
	assert_true(c.commands < 50);
	ab_report_free(r);
	free(log);
}

/* ---------------------------------------------------------------- the command */

static void test_file(void **state)
{
	char dir[] = "/tmp/ab-report-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char p[256];
	ab_err e = {0};
	FILE *devnull = fopen("/dev/null", "w");
	assert_non_null(devnull);

	snprintf(p, sizeof(p), "%s/missing", dir);
	assert_int_equal(ab_report_file(p, false, devnull, &e), AB_EXIT_FAIL);
	has(e.msg, "cannot open the log");

	assert_int_equal(ab_report_file(dir, false, devnull, &e), AB_EXIT_FAIL);
	has(e.msg, "not a regular file");

	snprintf(p, sizeof(p), "%s/fifo", dir);
	assert_int_equal(mkfifo(p, 0600), 0);
	memset(&e, 0, sizeof(e));
	assert_int_equal(ab_report_file(p, false, devnull, &e), AB_EXIT_FAIL); /* no hang */
	has(e.msg, "not a regular file");
	unlink(p);

	snprintf(p, sizeof(p), "%s/empty", dir);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fclose(f);
	out o;
	out_open(&o);
	assert_int_equal(ab_report_file(p, false, o.f, &e), 0);
	out_close(&o);
	has(o.buf, "no events\n");
	free(o.buf);

	f = fopen(p, "w");
	fputs("\x7f"
	      "ELF\x02\x01\n garbage\n",
	      f);
	fclose(f);
	memset(&e, 0, sizeof(e));
	assert_int_equal(ab_report_file(p, false, devnull, &e), AB_EXIT_FAIL);
	has(e.msg, "is not an agentbox audit log (2 lines could not be read");

	f = fopen(p, "w");
	fputs(LOG_TREE, f);
	fputs("junk\n", f);
	fclose(f);
	out_open(&o);
	assert_int_equal(ab_report_file(p, true, o.f, &e), 0);
	out_close(&o);
	json_t *j = json_loads(o.buf, 0, NULL);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "source")), p);
	assert_int_equal(json_integer_value(json_object_get(j, "bad_lines")), 1);
	json_decref(j);
	free(o.buf);

	FILE *full = fopen("/dev/full", "w");
	if (full) {
		memset(&e, 0, sizeof(e));
		assert_int_equal(ab_report_file(p, false, full, &e), AB_EXIT_FAIL);
		has(e.msg, "writing the report");
		fclose(full);
	}
	unlink(p);
	rmdir(dir);
	fclose(devnull);
}

static int cli(ab_cli *c, ab_err *e, const char *const *args)
{
	static char store[8][64];
	static char *argv[10];
	int argc = 0;
	argv[argc++] = (char *)"agentbox";
	for (size_t i = 0; args[i]; i++) {
		snprintf(store[i], sizeof(store[i]), "%s", args[i]);
		argv[argc++] = store[i];
	}
	argv[argc] = NULL;
	memset(e, 0, sizeof(*e));
	return ab_cli_parse(argc, argv, c, e);
}

#define A(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_cli(void **state)
{
	ab_cli c;
	ab_err e;
	const struct {
		const char *const *args;
		bool json;
	} ok[] = {
		{A("report", "a.log"), false},
		{A("report", "--json", "a.log"), true},
		{A("report", "a.log", "--json"), true},
		{A("report", "--", "a.log"), false},
		{A("report", "--json", "--", "a.log"), true},
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(cli(&c, &e, ok[i].args), 0);
		assert_int_equal(c.cmd, AB_CMD_REPORT);
		assert_int_equal(c.json, ok[i].json);
		assert_int_equal(c.argc, 1);
		assert_string_equal(c.argv[0], "a.log");
		ab_cli_free(&c);
	}
	assert_int_equal(cli(&c, &e, A("report", "a.log", "--help")), 0);
	assert_int_equal(c.cmd, AB_CMD_HELP);
	assert_int_equal(c.help_for, AB_CMD_REPORT);
	ab_cli_free(&c);
	assert_int_equal(cli(&c, &e, A("help", "report")), 0);
	assert_int_equal(c.help_for, AB_CMD_REPORT);
	ab_cli_free(&c);
	const struct {
		const char *const *args;
		const char *msg;
	} bad[] = {
		{A("report"), "report: name the audit log"},
		{A("report", "--json"), "report: name the audit log"},
		{A("report", ""), "report: name the audit log"},
		{A("report", "a", "b"), "report: give exactly one LOG"},
		{A("report", "a", "--bogus"), "report: unknown option '--bogus'"},
		{A("report", "--bogus", "a"), "report: unknown option '--bogus'"},
		{A("report", "-p", "x", "a"), "report: unknown option '-p'"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_true(cli(&c, &e, bad[i].args) < 0);
		has(e.msg, bad[i].msg);
		ab_cli_free(&c);
	}
	assert_int_equal(cli(&c, &e, A("report", "--", "-odd")), 0); /* a LOG named -odd */
	assert_string_equal(c.argv[0], "-odd");
	ab_cli_free(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tree_text),
		cmocka_unit_test(test_tree_json),
		cmocka_unit_test(test_ask_path),
		cmocka_unit_test(test_sessions),
		cmocka_unit_test(test_collapse_and_cap),
		cmocka_unit_test(test_warnings_text),
		cmocka_unit_test(test_unix_socket_denial),
		cmocka_unit_test(test_placeholder_elsewhere),
		cmocka_unit_test(test_warnings_json),
		cmocka_unit_test(test_warnings_hostile),
		cmocka_unit_test(test_warnings_cap),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_feed_split_anywhere),
		cmocka_unit_test(test_long_lines),
		cmocka_unit_test(test_hostile_strings),
		cmocka_unit_test(test_sanitize),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_file),
		cmocka_unit_test(test_cli),
	};
	return cmocka_run_group_tests_name("report", tests, NULL, NULL);
}
