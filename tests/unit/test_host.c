/* SPDX-License-Identifier: MIT */
/*
 * Host probe, the user-namespace error explainer and the doctor report.
 * The explainer and doctor are driven by fake hosts (table-driven); the real
 * probe is only checked for self-consistency (it needs no privileges).
 */
#include "unit.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "agentbox/host.h"
#include "agentbox/profile.h"

#ifndef EUSERS
#define EUSERS 87
#endif

static void test_fake(void **state)
{
	ab_host h;
	ab_host_fake(&h, 5);
	assert_int_equal(h.uid, 1000);
	assert_false(h.is_root);
	assert_int_equal(h.landlock_abi, 5);
	assert_int_equal(h.userns_ok, AB_YES);
	assert_int_equal(h.seccomp_ok, AB_YES);
	assert_int_equal(h.cgroup_version, 2);
	assert_int_equal(h.cgroup_delegated, AB_YES);
	assert_true(h.cgroup_path[0] == '/');
	assert_int_equal(h.cap_last_cap, 40);
	ab_host_fake(&h, 0);
	assert_int_equal(h.landlock_abi, 0);
	assert_int_not_equal(h.landlock_errno, 0);
}

static void test_probe_consistent(void **state)
{
	ab_host h;
	ab_host_probe(&h, false);
	assert_int_equal(h.uid, getuid());
	assert_int_equal(h.euid, geteuid());
	assert_int_equal(h.is_root, geteuid() == 0);
	assert_int_equal(h.userns_ok, AB_UNKNOWN); /* not tried */
	assert_true(h.kernel_release[0] != '\0');
	assert_true(h.cap_last_cap >= 30 && h.cap_last_cap < 64);
	assert_true(h.landlock_abi >= 0);
	assert_true(h.landlock_abi > 0 || h.landlock_errno != 0);
	assert_true(h.cgroup_version >= 0 && h.cgroup_version <= 2);
	if (h.cgroup_delegated == AB_YES) {
		assert_int_equal(h.cgroup_version, 2);
		assert_true(h.cgroup_path[0] == '/');
	} else {
		assert_string_equal(h.cgroup_path, "");
	}
	assert_true(h.legacy_tiocsti >= -1 && h.legacy_tiocsti <= 1);
	assert_true(h.io_uring_disabled >= -1 && h.io_uring_disabled <= 2);

	ab_host t;
	ab_host_probe(&t, true); /* forks a child that tries unshare */
	assert_int_not_equal(t.userns_ok, AB_UNKNOWN);
	if (t.userns_ok == AB_NO)
		assert_int_not_equal(t.userns_errno, 0);
}

typedef struct userns_case {
	const char *name;
	bool root;
	long max_ns;
	int clone_sysctl, apparmor, engine, seccomp_mode; /* engine: enum ab_engine */
	bool nocaps;
	int errnum;
	const char *msg;  /* substring of the message */
	const char *hint; /* substring of the hint */
} userns_case;

// clang-format off
static const userns_case userns_cases[] = {
	{ "max0", false, 0, -1, 1, AB_NO, 0, false, ENOSPC, "user.max_user_namespaces = 0",
	  "sysctl -w user.max_user_namespaces=" },
	{ "limit", false, 100, -1, -1, AB_NO, 0, false, ENOSPC, "limit on user namespaces",
	  "user.max_user_namespaces=" },
	{ "limit-old-kernel", true, -1, -1, -1, AB_NO, 0, false, EUSERS,
	  "limit on user namespaces", "nesting" },
	{ "debian-clone0", false, 1000, 0, -1, AB_NO, 0, false, EPERM,
	  "kernel.unprivileged_userns_clone = 0", "sysctl -w kernel.unprivileged_userns_clone=1" },
	{ "debian-clone0-root", true, 1000, 0, -1, AB_NO, 0, false, EPERM, "kernel refused",
	  "journalctl" },
	{ "ubuntu-apparmor", false, 1000, 1, 1, AB_NO, 0, true, EPERM,
	  "AppArmor restricts unprivileged user namespaces",
	  "profile agentbox " },
	{ "apparmor-root-does-not-apply", true, 1000, -1, 1, AB_NO, 0, false, EPERM,
	  "kernel refused", "journalctl" },
	{ "docker", true, 1000, -1, -1, AB_ENGINE_DOCKER, 2, false, EPERM,
	  "Docker's default seccomp profile allows new namespaces (clone/unshare with namespace "
	  "flags, setns) only with CAP_SYS_ADMIN",
	  "--security-opt seccomp=" AB_DATADIR "/containers/docker-seccomp.json" },
	{ "podman-custom", false, 1000, -1, -1, AB_ENGINE_PODMAN, 2, false, EPERM,
	  "the container's seccomp profile (podman's default allows the call) refuses new "
	  "namespaces",
	  "podman-seccomp.json" },
	{ "kubernetes", false, 1000, -1, -1, AB_ENGINE_KUBERNETES, 2, false, EPERM,
	  "the pod's seccomp profile", "type: Localhost" },
	{ "filtered-service", false, 1000, -1, -1, AB_NO, 2, false, EPERM,
	  "runs under a seccomp filter", "SystemCallFilter" },
	{ "no-config-userns", false, -1, -1, -1, AB_NO, 0, false, EINVAL,
	  "no user namespace support", "CONFIG_USER_NS" },
	{ "nocaps-other-lsm", false, 1000, -1, -1, AB_NO, 0, true, EPERM, "grants no capabilities",
	  "journalctl" },
	{ "generic", false, 1000, -1, -1, AB_NO, 0, false, ENOMEM, "Cannot allocate memory",
	  "agentbox doctor" },
};
// clang-format on

static void test_userns_error(void **state)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(userns_cases); i++) {
		const userns_case *c = &userns_cases[i];
		ab_host h;
		ab_err e;
		memset(&e, 0x55, sizeof(e));
		ab_host_fake(&h, 6);
		h.is_root = c->root;
		h.uid = h.euid = c->root ? 0 : 1000;
		h.max_user_namespaces = c->max_ns;
		h.unprivileged_userns_clone = c->clone_sysctl;
		h.apparmor_restrict_userns = c->apparmor;
		h.container = c->engine != AB_ENGINE_NONE ? AB_YES : AB_NO;
		h.ctr.engine = c->engine;
		h.seccomp_mode = c->seccomp_mode;
		h.userns_nocaps = c->nocaps;
		ab_host_userns_error(&h, c->errnum, &e);
		if (!strstr(e.msg, c->msg) || !strstr(e.hint, c->hint))
			fail_msg("case %s: msg \"%s\" hint \"%s\"", c->name, e.msg, e.hint);
		assert_int_equal(e.code, c->errnum);
		assert_int_equal(e.exit_code, 125);
		assert_non_null(strstr(e.msg, "user namespace"));
		assert_true(strlen(e.hint) < sizeof(e.hint) - 1); /* not truncated */
	}
}

static void test_userns_error_apparmor_snippet(void **state)
{
	ab_host h;
	ab_err e = {0};
	ab_host_fake(&h, 6);
	h.apparmor_restrict_userns = 1;
	ab_host_userns_error(&h, EPERM, &e);
	static const char *const parts[] = {
		"abi <abi/4.0>,",
		"include <tunables/global>",
		"flags=(unconfined) {",
		"userns,",
		"sudo tee /etc/apparmor.d/agentbox",
		"sudo apparmor_parser -r /etc/apparmor.d/agentbox",
		"sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(parts); i++)
		if (!strstr(e.hint, parts[i]))
			fail_msg("hint lacks \"%s\": %s", parts[i], e.hint);
	/* errnum 0 falls back to the probe's errno, then EPERM */
	h.userns_errno = ENOSPC;
	ab_host_userns_error(&h, 0, &e);
	assert_int_equal(e.code, ENOSPC);
	h.userns_errno = 0;
	ab_host_userns_error(&h, 0, &e);
	assert_int_equal(e.code, EPERM);
}

/* ---- doctor ---- */

static char *doctor(const ab_host *h, bool json, int *rc)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	assert_non_null(out);
	*rc = ab_doctor_report(h, json, out);
	assert_int_equal(fclose(out), 0);
	return buf;
}

static json_t *check_by_id(json_t *root, const char *id)
{
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(root, "checks"), i,
			   c) if (strcmp(json_string_value(json_object_get(c, "id")), id) ==
				  0) return c;
	fail_msg("no check %s", id);
	return NULL;
}

static void test_doctor_modern_host(void **state)
{
	ab_host h;
	int rc;
	ab_host_fake(&h, 7);
	char *t = doctor(&h, false, &rc);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(t, "Result: agentbox run can work on this host."));
	assert_null(strstr(t, "missing "));
	assert_null(strstr(t, "fix:"));
	assert_non_null(strstr(t, "ABI 7"));
	assert_non_null(strstr(t, "cgroup v2, delegated"));
	assert_non_null(strstr(t, "agentbox blocks io_uring_setup"));
	assert_non_null(strstr(t, "agentbox blocks it itself"));
	free(t);
}

static void test_doctor_old_host(void **state)
{
	ab_host h;
	int rc;
	ab_host_fake(&h, 3);
	h.cgroup_version = 1;
	h.cgroup_delegated = AB_NO;
	h.cgroup_path[0] = '\0';
	h.legacy_tiocsti = 1;
	h.io_uring_disabled = -1;
	char *t = doctor(&h, false, &rc);
	assert_int_equal(rc, 0); /* nothing required is missing */
	assert_non_null(strstr(t, "warn      Landlock"));
	assert_non_null(strstr(t, "\"landlock-net\""));
	assert_non_null(strstr(t, "landlock-net: Landlock ABI < 4"));
	assert_non_null(strstr(t, "cgroup v1"));
	assert_non_null(strstr(t, "\"allow_downgrade\": [\"cgroup-limits\"]"));
	assert_non_null(strstr(t, "fix: boot with systemd.unified_cgroup_hierarchy=1"));
	assert_non_null(strstr(t, "dev.tty.legacy_tiocsti = 1"));
	free(t);
}

/* RLIMIT_MEMLOCK: enough (the fake's 8 MiB), unlimited, too low (a warning
 * with a fix, nothing required), and root (CAP_IPC_LOCK ignores the limit). */
static void test_doctor_memlock(void **state)
{
	ab_host h;
	int rc;
	ab_host_fake(&h, 7);
	char *t = doctor(&h, false, &rc);
	assert_non_null(strstr(t, "ok        locked memory    RLIMIT_MEMLOCK 8192 KiB: enough"));
	free(t);
	h.memlock = -1;
	t = doctor(&h, false, &rc);
	assert_non_null(strstr(t, "RLIMIT_MEMLOCK unlimited: enough"));
	free(t);
	h.memlock = 64 << 10;
	t = doctor(&h, false, &rc);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(t, "warn      locked memory    RLIMIT_MEMLOCK 64 KiB: may be too "
				  "low for the 1024 KiB secure heap"));
	assert_non_null(strstr(t, "fix: raise the limit (`ulimit -l`"));
	free(t);
	h.is_root = true;
	h.uid = h.euid = 0;
	t = doctor(&h, true, &rc);
	json_error_t je;
	json_t *j = json_loads(t, 0, &je);
	assert_non_null(j);
	json_t *c = check_by_id(j, "memlock");
	assert_string_equal(json_string_value(json_object_get(c, "status")), "ok");
	assert_non_null(strstr(json_string_value(json_object_get(c, "detail")), "CAP_IPC_LOCK"));
	json_decref(j);
	free(t);
}

static void test_doctor_broken_host(void **state)
{
	ab_host h;
	int rc;
	ab_host_fake(&h, 0);
	h.userns_ok = AB_NO;
	h.userns_errno = EPERM;
	h.userns_nocaps = true;
	h.apparmor_restrict_userns = 1;
	h.seccomp_ok = AB_NO;
	char *t = doctor(&h, false, &rc);
	assert_int_equal(rc, 1);
	assert_non_null(strstr(t, "missing   user namespaces"));
	assert_non_null(strstr(t, "missing   AppArmor userns"));
	assert_non_null(strstr(t, "missing   Landlock"));
	assert_non_null(strstr(t, "missing   seccomp"));
	assert_non_null(strstr(t, "fix: allow agentbox to use user namespaces"));
	/* continuation lines of a multi-line fix are indented under the text */
	assert_non_null(strstr(t, "\n                             sudo apparmor_parser -r"));
	assert_non_null(strstr(t, "lsm= kernel parameter"));
	assert_non_null(strstr(t, "Result: agentbox run cannot work on this host; missing:"));
	free(t);

	t = doctor(&h, true, &rc);
	assert_int_equal(rc, 1);
	json_error_t jerr;
	json_t *j = json_loads(t, 0, &jerr);
	assert_non_null(j);
	assert_true(json_is_false(json_object_get(j, "ok")));
	json_t *u = check_by_id(j, "user-namespaces");
	assert_string_equal(json_string_value(json_object_get(u, "status")), "missing");
	assert_true(json_is_true(json_object_get(u, "required")));
	assert_non_null(strstr(json_string_value(json_object_get(u, "fix")), "apparmor_parser"));
	json_t *host = json_object_get(j, "host");
	assert_true(json_is_false(json_object_get(host, "userns")));
	assert_int_equal(json_integer_value(json_object_get(host, "landlock_abi")), 0);
	assert_true(json_is_array(json_object_get(host, "landlock_downgrades")));
	json_decref(j);
	free(t);
}

static void test_doctor_root_without_idmap(void **state)
{
	ab_host h;
	int rc;
	ab_host_fake(&h, 6);
	h.is_root = true;
	h.uid = h.euid = 0;
	h.idmap_mounts = AB_NO;
	h.cgroup_delegated = AB_NO;
	snprintf(h.cgroup_self, sizeof(h.cgroup_self), "/bad\xff\x01name"); /* hostile bytes */
	char *t = doctor(&h, true, &rc);
	assert_int_equal(rc, 0);
	json_error_t jerr;
	json_t *j = json_loads(t, 0, &jerr);
	if (!j)
		fail_msg("bad JSON: %s", jerr.text);
	json_t *c = check_by_id(j, "idmap-mounts");
	assert_string_equal(json_string_value(json_object_get(c, "status")), "warn");
	assert_non_null(json_object_get(c, "fix"));
	c = check_by_id(j, "cgroup");
	assert_string_equal(json_string_value(json_object_get(c, "status")), "warn");
	json_decref(j);
	free(t);
}

static void test_downgrade_describe(void **state)
{
	static const char *const names[] = {
		"landlock",           "landlock-refer", "landlock-truncate", "landlock-net",
		"landlock-ioctl-dev", "landlock-scope", "cgroup-limits",
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(names); i++) {
		const char *d = ab_downgrade_describe(names[i]);
		assert_non_null(d);
		assert_null(strstr(d, "this host cannot apply"));
	}
	/* a plan entry "name: text" is looked up by its name */
	assert_string_equal(ab_downgrade_describe("cgroup-limits: NOT ENFORCED (x)"),
			    ab_downgrade_describe("cgroup-limits"));
	assert_non_null(strstr(ab_downgrade_describe("landlock-future"), "Landlock"));
	assert_non_null(strstr(ab_downgrade_describe(""), "cannot apply"));
	assert_non_null(strstr(ab_downgrade_describe("landlock-netX"), "Landlock protection"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fake),
		cmocka_unit_test(test_probe_consistent),
		cmocka_unit_test(test_userns_error),
		cmocka_unit_test(test_userns_error_apparmor_snippet),
		cmocka_unit_test(test_doctor_modern_host),
		cmocka_unit_test(test_doctor_old_host),
		cmocka_unit_test(test_doctor_memlock),
		cmocka_unit_test(test_doctor_broken_host),
		cmocka_unit_test(test_doctor_root_without_idmap),
		cmocka_unit_test(test_downgrade_describe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
