/* SPDX-License-Identifier: MIT */
/*
 * explain: a plan built by hand (not by plan.c) printed as text and JSON.
 * Checks the sections and their order, that values of passed-through
 * variables never appear, that downgrades are loud, that hostile strings
 * (control characters, invalid UTF-8) cannot forge report lines or break the
 * JSON, and that a failing output stream is an error.
 */
#include "unit.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "agentbox/plan.h"

#define SECRET "ghp_SECRETvalue123"

typedef struct fixture {
	ab_plan p;
	ab_profile prof;
	ab_mount mounts[16];
	ab_ll_rule rules[4];
	uint16_t ports[2];
	ab_rlimit rl[2];
} fixture;

static void push(ab_strv *v, const char *s)
{
	assert_int_equal(ab_strv_push(v, s), 0);
}

static void add_mount(fixture *f, enum ab_mnt_kind k, const char *src, const char *dst,
		      unsigned flags, const char *why)
{
	f->mounts[f->p.nmounts++] = (ab_mount){.kind = k,
					       .src = (char *)src,
					       .dst = (char *)dst,
					       .flags = flags,
					       .why = (char *)why};
}

/* An unprivileged caller, default-like profile, Landlock ABI 4, no cgroup. */
static fixture *make_fixture(void)
{
	fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	ab_plan *p = &f->p;

	f->prof.name = (char *)"default";
	f->prof.description = (char *)"Deny by default";
	push(&f->prof.files, "/usr/share/agentbox/profiles/default.json");

	p->outer_uid = p->inside_uid = p->map_kuid = 1000;
	p->outer_gid = p->inside_gid = p->map_kgid = 1000;
	p->user_name = (char *)"alice";
	p->hostname = (char *)"agentbox";
	p->workspace = (char *)"/home/alice/proj";
	p->home = (char *)"/home/alice";
	p->cwd = (char *)"/home/alice/proj/src";
	p->mounts = f->mounts;
	add_mount(f, AB_MNT_PROC, NULL, "/proc", AB_MNT_F_DIR, "proc");
	add_mount(f, AB_MNT_DEV, NULL, "/dev", AB_MNT_F_DIR, "dev");
	add_mount(f, AB_MNT_TMPFS, NULL, "/home/alice", AB_MNT_F_DIR, "private home");
	add_mount(f, AB_MNT_BIND_RO, "/usr", "/usr", AB_MNT_F_DIR, "fs.read");
	add_mount(f, AB_MNT_SYMLINK, "usr/bin", "/bin", 0, "fs.read");
	add_mount(f, AB_MNT_BIND_RW, "/home/alice/proj", "/home/alice/proj", AB_MNT_F_DIR,
		  "workspace");
	add_mount(f, AB_MNT_MASK, NULL, "/etc/shadow", 0, "fs.deny");
	add_mount(f, AB_MNT_MASK, NULL, "/proc/kcore", AB_MNT_F_OPTIONAL, "proc");
	add_mount(f, AB_MNT_PROTECT, "/home/alice/proj/.git/hooks", "/home/alice/proj/.git/hooks",
		  AB_MNT_F_DIR, "fs.protect");
	add_mount(f, AB_MNT_PLACEHOLDER, NULL, "/home/alice/proj/.vscode", AB_MNT_F_DIR,
		  "fs.protect");
	add_mount(f, AB_MNT_RO_REMOUNT, NULL, "/proc/sys", AB_MNT_F_OPTIONAL, "proc");
	add_mount(f, AB_MNT_CONTENT, "alice:x:1000:1000::/home/alice:/bin/sh\n", "/etc/passwd", 0,
		  "identity");
	push(&p->hidden, "/etc/shadow");
	push(&p->absent, "/opt/tools (fs.read)");

	p->landlock = (ab_ll_plan){
		.enabled = true,
		.abi = 4,
		.handled_fs = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
			      LANDLOCK_ACCESS_FS_WRITE_FILE,
		.handled_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP,
		.rules = f->rules,
		.tcp_ports = f->ports};
	f->rules[p->landlock.nrules++] =
		(ab_ll_rule){"/usr", LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR};
	f->rules[p->landlock.nrules++] = (ab_ll_rule){"/home/alice/proj", p->landlock.handled_fs};
	f->ports[p->landlock.ntcp_ports++] = 8080;

	f->rl[0] = (ab_rlimit){RLIMIT_NOFILE, 1024, 1024, 0};
	f->rl[1] = (ab_rlimit){RLIMIT_CORE, 0, 0, 0};
	p->rlimits = f->rl;
	p->nrlimits = 2;
	p->cg_memory = 1LL << 30;
	p->cg_pids = AB_LIMIT_UNSET;
	p->cgroup_apply = false;

	push(&p->envp, "PATH=/usr/bin:/bin");
	push(&p->envp, "HOME=/home/alice");
	push(&p->envp, "TERM=xterm-256color");
	push(&p->envp, "LC_ALL=C.UTF-8");
	push(&p->envp, "GITHUB_TOKEN=" SECRET);
	push(&p->envp, "MY_SETTING=" SECRET "2");
	push(&p->envp, "LCX=" SECRET "3"); /* not an LC_ variable */
	p->use_pty = true;
	push(&p->downgrades, "cgroup-limits: limits.memory/limits.pids are NOT ENFORCED "
			     "(no delegated cgroup v2 here)");
	push(&p->downgrades, "landlock-scope");
	push(&p->warnings, "supplementary groups of uid 1000 are kept");
	return f;
}

static void free_fixture(fixture *f)
{
	ab_strv_free(&f->prof.files);
	ab_strv_free(&f->p.hidden);
	ab_strv_free(&f->p.absent);
	ab_strv_free(&f->p.envp);
	ab_strv_free(&f->p.downgrades);
	ab_strv_free(&f->p.warnings);
	ab_strv_free(&f->p.seccomp.extra_deny);
	free(f);
}

/* Run explain into a memory buffer; returns the malloc'd output. */
static char *explain(fixture *f, bool json)
{
	char *buf = NULL;
	size_t len = 0;
	ab_err err = {0};
	FILE *out = open_memstream(&buf, &len);
	assert_non_null(out);
	int r = ab_plan_explain(&f->p, &f->prof, json, out, &err);
	if (r < 0)
		fprintf(stderr, "explain: %s\n", err.msg);
	assert_int_equal(r, 0);
	assert_int_equal(fclose(out), 0);
	return buf;
}

static const char *find_after(const char *hay, const char *needle, const char *from)
{
	const char *p = strstr(from ? from : hay, needle);
	if (!p)
		fail_msg("missing \"%s\" in:\n%s", needle, hay);
	return p;
}

static void test_text_sections_in_order(void **state)
{
	fixture *f = make_fixture();
	char *t = explain(f, false);
	static const char *const order[] = {
		"Profile: default\n",
		"  file: /usr/share/agentbox/profiles/default.json\n",
		"  description: Deny by default\n",
		"\nIdentity\n",
		"  inside: uid 1000, gid 1000 (user \"alice\")\n",
		"\nWorkspace\n",
		"  /home/alice/proj (writable)\n",
		"  cwd: /home/alice/proj/src\n",
		"\nFilesystem",
		"  readable (read-only binds):\n",
		"    /usr  [fs.read]\n",
		"  writable:\n",
		"    /home/alice  [private home, private empty tmpfs]\n",
		"    /home/alice/proj  [workspace]\n",
		"  hidden",
		"    /etc/shadow\n",
		"    /proc/kcore  [proc]\n",
		"  protected",
		"    /home/alice/proj/.git/hooks  [",
		"    /home/alice/proj/.vscode  [fs.protect, absent: reserved by an empty read-only directory]\n",
		"  devices, proc and system files:\n",
		"    /bin -> usr/bin",
		"    /etc/passwd  [",
		"  granted but not present on this host (skipped):\n",
		"    /opt/tools (fs.read)\n",
		"\nNetwork\n",
		"  only loopback inside; the one way out is agentbox's egress proxy\n",
		"  loopback TCP connect (Landlock; listening is not restricted): 8080\n",
		"\nSecrets (brokered",
		"  none\n",
		"\nEnvironment",
		"\nSyscalls (seccomp)\n",
		"\nLandlock\n",
		"    /usr: read_file read_dir\n",
		"    /home/alice/proj: all\n",
		"\nLimits\n",
		"  nofile: 1024\n",
		"  core: 0\n",
		"  memory: 1073741824 bytes (1.0 GiB) [NOT ENFORCED",
		"  pids: not limited\n",
		"\nTerminal\n  own pseudo-terminal",
		"\nDowngrades",
		"  !! cgroup-limits: limits.memory/limits.pids are NOT ENFORCED",
		"  !! NOT ENFORCED: landlock-scope\n",
		"\nWarnings\n",
		"  supplementary groups of uid 1000 are kept\n",
	};
	const char *at = t;
	for (size_t i = 0; i < AB_ARRAY_SIZE(order); i++)
		at = find_after(t, order[i], at) + 1;
	free(t);
	free_fixture(f);
}

static void test_text_env_names_only(void **state)
{
	fixture *f = make_fixture();
	char *t = explain(f, false);
	assert_null(strstr(t, SECRET));
	assert_null(strstr(t, "alice:x:1000")); /* generated file content not printed */
	find_after(t, "  GITHUB_TOKEN\n", NULL);
	find_after(t, "  MY_SETTING\n", NULL);
	find_after(t, "  LCX\n", NULL);
	find_after(t, "  PATH=/usr/bin:/bin\n", NULL);
	find_after(t, "  HOME=/home/alice\n", NULL);
	find_after(t, "  TERM=xterm-256color\n", NULL);
	find_after(t, "  LC_ALL=C.UTF-8\n", NULL);
	free(t);
	free_fixture(f);
}

static void test_text_variants(void **state)
{
	fixture *f = make_fixture();
	f->p.landlock.tcp_any = true;
	f->p.use_pty = false;
	f->p.cgroup_apply = true;
	f->p.cg_pids = 256;
	ab_strv_free(&f->p.downgrades);
	ab_strv_free(&f->p.warnings);
	char *t = explain(f, false);
	find_after(t, "  loopback TCP connect (Landlock; listening is not restricted): any\n",
		   NULL);
	find_after(t, "  passthrough: plain stdio", NULL);
	find_after(t, "  memory: 1073741824 bytes (1.0 GiB) [cgroup v2]\n", NULL);
	find_after(t, "  pids: 256 [cgroup v2]\n", NULL);
	find_after(t, "  none: every protection is enforced\n", NULL);
	find_after(t, "\nWarnings\n  none\n", NULL);
	assert_null(strstr(t, "NOT ENFORCED"));
	free(t);

	f->p.landlock.tcp_any = false;
	f->p.landlock.enabled = false;
	f->p.root_mode = true;
	f->p.drop_groups = true;
	t = explain(f, false);
	find_after(t,
		   "  loopback TCP connect (Landlock; listening is not restricted): not restricted",
		   NULL);
	find_after(t, "  supplementary groups: dropped\n", NULL);
	find_after(t, "(root: the command never runs as root", NULL);
	free(t);

	/* the units go on past TiB as in the audit summary and the report
	 * (this said "2048.0 TiB") */
	f->p.cg_memory = 2048LL << 40;
	t = explain(f, false);
	find_after(t, "  memory: 2251799813685248 bytes (2.0 PiB) [cgroup v2]\n", NULL);
	free(t);
	f->p.cg_memory = 1023;
	t = explain(f, false);
	find_after(t, "  memory: 1023 bytes [cgroup v2]\n", NULL);
	free(t);
	free_fixture(f);
}

/* Each secret says what happens to its placeholder on other hosts, and
 * which key decided: its own "elsewhere", network.placeholder_elsewhere, or
 * the default (forward). */
static void test_secrets_elsewhere(void **state)
{
	struct ab_profile_secret sec[3] = {
		{.name = "A", .src = AB_PSECRET_ENV, .src_env = "A"},
		{.name = "B",
		 .src = AB_PSECRET_ENV,
		 .src_env = "B",
		 .elsewhere = AB_ELSEWHERE_REFUSE},
		{.name = "C",
		 .src = AB_PSECRET_ENV,
		 .src_env = "C",
		 .elsewhere = AB_ELSEWHERE_FORWARD},
	};
	fixture *f = make_fixture();
	f->p.egress.secrets = sec;
	f->p.egress.nsecrets = AB_ARRAY_SIZE(sec);
	static const char fwd[] = "    elsewhere: forward: the placeholder in a request to another "
				  "host goes on unchanged, and is recorded (";
	static const char ref[] = "    elsewhere: refuse: a request to another host that carries "
				  "the placeholder is refused, where agentbox reads it "
				  "(intercepted, plain HTTP) (";
	for (int k = 0; k < 2; k++) {
		f->p.egress.placeholder_elsewhere = k ? AB_ELSEWHERE_REFUSE : AB_ELSEWHERE_UNSET;
		char *t = explain(f, false);
		char want[3][400];
		const char *a = find_after(t, "  A  from env A", NULL);
		snprintf(want[0], sizeof(want[0]), "%s%s\n", k ? ref : fwd,
			 k ? "network.placeholder_elsewhere)" : "the default)");
		snprintf(want[1], sizeof(want[1]), "%ssecrets.B.elsewhere)\n", ref);
		snprintf(want[2], sizeof(want[2]), "%ssecrets.C.elsewhere)\n", fwd);
		const char *b = find_after(t, want[0], a);
		b = find_after(t, "  B  from env B", b);
		b = find_after(t, want[1], b);
		b = find_after(t, "  C  from env C", b);
		find_after(t, want[2], b);
		free(t);

		t = explain(f, true);
		json_error_t je;
		json_t *j = json_loads(t, 0, &je), *s = json_object_get(j, "secrets");
		assert_int_equal(json_array_size(s), 3);
		static const char *const want_j[2][3][2] = {
			{{"forward", "default"},
			 {"refuse", "secrets.B.elsewhere"},
			 {"forward", "secrets.C.elsewhere"}},
			{{"refuse", "network.placeholder_elsewhere"},
			 {"refuse", "secrets.B.elsewhere"},
			 {"forward", "secrets.C.elsewhere"}},
		};
		for (size_t i = 0; i < 3; i++) {
			json_t *o = json_array_get(s, i);
			assert_string_equal(json_string_value(json_object_get(o, "elsewhere")),
					    want_j[k][i][0]);
			assert_string_equal(json_string_value(json_object_get(o, "elsewhere_by")),
					    want_j[k][i][1]);
		}
		json_decref(j);
		free(t);
	}
	free_fixture(f);
}

static void test_text_hostile_strings_escaped(void **state)
{
	fixture *f = make_fixture();
	/* A path with a newline must not be able to start a fake line. */
	f->mounts[3].dst = (char *)"/usr\n  writable:\n    /";
	push(&f->p.envp, "EVIL\nHOME=/x=y");
	push(&f->p.warnings, "tab\there\x1b[31m");
	char *t = explain(f, false);
	find_after(t, "    /usr\\x0a  writable:\\x0a    / (from /usr)  [fs.read]\n", NULL);
	find_after(t, "  EVIL\\x0aHOME\n", NULL);
	find_after(t, "  tab\\x09here\\x1b[31m\n", NULL);
	assert_null(strstr(t, "\x1b"));
	free(t);
	free_fixture(f);
}

static json_t *explain_json(fixture *f)
{
	char *t = explain(f, true);
	json_error_t jerr;
	json_t *j = json_loads(t, 0, &jerr);
	if (!j)
		fail_msg("bad JSON (%s) in:\n%s", jerr.text, t);
	assert_null(strstr(t, SECRET));
	assert_null(strstr(t, "alice:x:1000"));
	free(t);
	return j;
}

static bool array_has(json_t *a, const char *s)
{
	size_t i;
	json_t *v;
	assert_true(json_is_array(a));
	json_array_foreach(a, i, v) if (json_is_string(v) &&
					strcmp(json_string_value(v), s) == 0) return true;
	return false;
}

static void test_json_keys_and_values(void **state)
{
	static const char *const keys[] = {
		"profile",  "identity", "workspace", "cwd",     "mounts",     "readable",
		"writable", "hidden",   "protected", "network", "secrets",    "env",
		"seccomp",  "landlock", "limits",    "pty",     "downgrades", "warnings",
	};
	fixture *f = make_fixture();
	json_t *j = explain_json(f);
	for (size_t i = 0; i < AB_ARRAY_SIZE(keys); i++)
		if (!json_object_get(j, keys[i]))
			fail_msg("missing key %s", keys[i]);
	/* key order is the insertion order (sorted keys off) */
	assert_string_equal(json_object_iter_key(json_object_iter(j)), "profile");

	assert_string_equal(
		json_string_value(json_object_get(json_object_get(j, "profile"), "name")),
		"default");
	assert_int_equal(
		json_integer_value(json_object_get(json_object_get(j, "identity"), "inside_uid")),
		1000);
	assert_string_equal(json_string_value(json_object_get(j, "workspace")), "/home/alice/proj");
	assert_true(array_has(json_object_get(j, "readable"), "/usr"));
	assert_true(array_has(json_object_get(j, "writable"), "/home/alice/proj"));
	assert_true(array_has(json_object_get(j, "writable"), "/home/alice"));
	assert_true(array_has(json_object_get(j, "hidden"), "/etc/shadow"));
	assert_true(array_has(json_object_get(j, "hidden"), "/proc/kcore"));
	assert_int_equal(json_array_size(json_object_get(j, "protected")), 2);
	assert_int_equal(json_array_size(json_object_get(j, "secrets")), 0);
	assert_int_equal(json_array_size(json_object_get(j, "downgrades")), 2);
	assert_string_equal(json_string_value(json_object_get(j, "pty")), "own");

	json_t *net = json_object_get(j, "network");
	assert_string_equal(json_string_value(json_object_get(net, "mode")), "proxy");
	json_t *ports = json_object_get(net, "loopback_ports");
	assert_int_equal(json_array_size(ports), 1);
	assert_int_equal(json_integer_value(json_array_get(ports, 0)), 8080);

	json_t *env = json_object_get(j, "env");
	assert_true(array_has(json_object_get(env, "names"), "GITHUB_TOKEN"));
	json_t *vals = json_object_get(env, "values");
	assert_null(json_object_get(vals, "GITHUB_TOKEN"));
	assert_null(json_object_get(vals, "LCX"));
	assert_string_equal(json_string_value(json_object_get(vals, "LC_ALL")), "C.UTF-8");

	json_t *ll = json_object_get(j, "landlock");
	assert_int_equal(json_integer_value(json_object_get(ll, "abi")), 4);
	assert_true(json_is_true(json_object_get(ll, "enabled")));
	json_t *rule = json_array_get(json_object_get(ll, "rules"), 0);
	assert_string_equal(json_string_value(json_object_get(rule, "path")), "/usr");
	assert_string_equal(json_string_value(json_object_get(rule, "access")),
			    "read_file read_dir");

	json_t *lim = json_object_get(j, "limits");
	assert_int_equal(json_integer_value(json_object_get(lim, "memory")), 1LL << 30);
	assert_true(json_is_null(json_object_get(lim, "pids")));
	assert_true(json_is_false(json_object_get(lim, "cgroup")));
	json_t *nofile = json_object_get(json_object_get(lim, "rlimits"), "nofile");
	assert_int_equal(json_integer_value(json_object_get(nofile, "soft")), 1024);
	json_decref(j);
	free_fixture(f);
}

static void test_json_mounts(void **state)
{
	fixture *f = make_fixture();
	json_t *j = explain_json(f);
	json_t *m = json_object_get(j, "mounts");
	assert_int_equal(json_array_size(m), f->p.nmounts);
	for (size_t i = 0; i < f->p.nmounts; i++) {
		json_t *e = json_array_get(m, i);
		assert_string_equal(json_string_value(json_object_get(e, "kind")),
				    ab_mnt_kind_name(f->mounts[i].kind));
		assert_string_equal(json_string_value(json_object_get(e, "dst")), f->mounts[i].dst);
		assert_true(json_is_array(json_object_get(e, "flags")));
	}
	json_t *ws = json_array_get(m, 5);
	assert_string_equal(json_string_value(json_object_get(ws, "why")), "workspace");
	assert_string_equal(json_string_value(json_array_get(json_object_get(ws, "flags"), 0)),
			    "dir");
	json_t *content = json_array_get(m, 11);
	assert_true(json_is_null(json_object_get(content, "src")));
	json_decref(j);
	free_fixture(f);
}

static void test_json_any_and_invalid_utf8(void **state)
{
	fixture *f = make_fixture();
	f->p.landlock.tcp_any = true;
	f->mounts[3].dst = (char *)"/usr/\xff\xfe";
	push(&f->p.envp, "BAD\xc3=x");
	json_t *j = explain_json(f);
	assert_string_equal(
		json_string_value(json_object_get(json_object_get(j, "network"), "loopback_ports")),
		"any");
	assert_true(array_has(json_object_get(j, "readable"), "/usr/??"));
	assert_true(array_has(json_object_get(json_object_get(j, "env"), "names"), "BAD?"));
	json_decref(j);
	free_fixture(f);
}

static void test_output_error(void **state)
{
	fixture *f = make_fixture();
	char small[64];
	ab_err err = {0};
	for (int json = 0; json <= 1; json++) {
		FILE *out = fmemopen(small, sizeof(small), "w");
		assert_non_null(out);
		setvbuf(out, NULL, _IONBF, 0);
		assert_true(ab_plan_explain(&f->p, &f->prof, json, out, &err) < 0);
		assert_non_null(strstr(err.msg, "explain"));
		fclose(out);
	}
	free_fixture(f);
}

static void test_mnt_kind_names(void **state)
{
	static const struct {
		enum ab_mnt_kind k;
		const char *name;
	} t[] = {
		{AB_MNT_TMPFS, "tmpfs"},     {AB_MNT_BIND_RO, "bind-ro"},
		{AB_MNT_BIND_RW, "bind-rw"}, {AB_MNT_PROC, "proc"},
		{AB_MNT_DEV, "dev"},         {AB_MNT_MASK, "mask"},
		{AB_MNT_PROTECT, "protect"}, {AB_MNT_PLACEHOLDER, "placeholder"},
		{AB_MNT_SYMLINK, "symlink"}, {AB_MNT_RO_REMOUNT, "ro-remount"},
		{AB_MNT_CONTENT, "content"}, {(enum ab_mnt_kind)99, "unknown"},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++)
		assert_string_equal(ab_mnt_kind_name(t[i].k), t[i].name);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_text_sections_in_order),
		cmocka_unit_test(test_text_env_names_only),
		cmocka_unit_test(test_text_variants),
		cmocka_unit_test(test_secrets_elsewhere),
		cmocka_unit_test(test_text_hostile_strings_escaped),
		cmocka_unit_test(test_json_keys_and_values),
		cmocka_unit_test(test_json_mounts),
		cmocka_unit_test(test_json_any_and_invalid_utf8),
		cmocka_unit_test(test_output_error),
		cmocka_unit_test(test_mnt_kind_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
