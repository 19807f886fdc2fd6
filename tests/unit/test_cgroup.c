/* SPDX-License-Identifier: MIT */
/*
 * cgroup v2 pure helpers: the writes a plan needs, /proc/self/cgroup parsing
 * (including hostile contents), controller lists, path checks; and that
 * ab_cgroup_setup does nothing (and touches nothing) when no limit applies or
 * no delegated cgroup exists.  The live part needs cgroup v2 and is covered by
 * the integration tests where the host has one.
 */
#include "unit.h"

#include <errno.h>
#include <string.h>

#include "agentbox/cgroup.h"
#include "agentbox/sandbox.h"

static void test_plan_writes(void **state)
{
	static const struct {
		long long mem, pids;
		int n;
		const char *files[3];
		const char *values[3];
	} t[] = {
		{AB_LIMIT_UNSET, AB_LIMIT_UNSET, 0, {NULL}, {NULL}},
		{1LL << 30,
		 AB_LIMIT_UNSET,
		 2,
		 {"memory.max", "memory.swap.max"},
		 {"1073741824", "0"}},
		{AB_LIMIT_UNSET, 512, 1, {"pids.max"}, {"512"}},
		{4096, 1, 3, {"memory.max", "memory.swap.max", "pids.max"}, {"4096", "0", "1"}},
		{9223372036854775807LL,
		 AB_LIMIT_UNSET,
		 2,
		 {"memory.max", "memory.swap.max"},
		 {"9223372036854775807", "0"}},
		{0, AB_LIMIT_UNSET, -EINVAL, {NULL}, {NULL}},
		{AB_LIMIT_UNSET, 0, -EINVAL, {NULL}, {NULL}},
		{-5, 10, -EINVAL, {NULL}, {NULL}},
		{100, -2, -EINVAL, {NULL}, {NULL}},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		ab_cg_write w[AB_CGROUP_MAX_WRITES];
		int n = ab_cgroup_plan_writes(t[i].mem, t[i].pids, w, AB_ARRAY_SIZE(w));
		assert_int_equal(n, t[i].n);
		for (int k = 0; k < n; k++) {
			assert_string_equal(w[k].file, t[i].files[k]);
			assert_string_equal(w[k].value, t[i].values[k]);
			assert_int_equal(w[k].optional, strcmp(w[k].file, "memory.swap.max") == 0);
		}
	}
	ab_cg_write one[1];
	assert_int_equal(ab_cgroup_plan_writes(100, 10, one, 1), -ENOSPC);
	assert_int_equal(ab_cgroup_plan_writes(AB_LIMIT_UNSET, 10, one, 1), 1);
}

static void test_parse_self(void **state)
{
	static const struct {
		const char *in;
		int r;
		const char *path;
	} t[] = {
		{"0::/user.slice/user-1000.slice/session-2.scope\n", 0,
		 "/user.slice/user-1000.slice/session-2.scope"},
		{"0::/\n", 0, "/"},
		{"0::/a/b", 0, "/a/b"}, /* no trailing newline */
		{"12:pids:/x\n4:memory:/y\n0::/init.scope\n", 0, "/init.scope"},
		{"1:name=systemd:/\n4:memory:/a\n", -ENOENT, ""},
		{"", -ENOENT, ""},
		{"\n\n\n", -ENOENT, ""},
		{"10::/not-v2\n", -ENOENT, ""},
		{"0::relative\n", -EINVAL, ""},
		{"0::\n", -EINVAL, ""},
		{"0::/a/../../etc\n", -EINVAL, ""},
		{"0::/a/./b\n", -EINVAL, ""},
		{"0::/a//b\n", -EINVAL, ""},
		{"0::/a/\n", -EINVAL, ""},
		{"0::/a\tb\n", -EINVAL, ""},
		{"0::/a\rb\n", -EINVAL, ""},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		char out[64] = "garbage";
		int r = ab_cgroup_parse_self(t[i].in, strlen(t[i].in), out, sizeof(out));
		assert_int_equal(r, t[i].r);
		if (r == 0 || r == -EINVAL)
			assert_string_equal(out, t[i].path);
	}
}

static void test_parse_self_hostile(void **state)
{
	char out[16];
	/* too long for the buffer */
	const char *lng = "0::/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n";
	assert_int_equal(ab_cgroup_parse_self(lng, strlen(lng), out, sizeof(out)), -ENAMETOOLONG);
	/* embedded NUL inside the line */
	const char nul[] = "0::/a\0b\n";
	assert_int_equal(ab_cgroup_parse_self(nul, sizeof(nul) - 1, out, sizeof(out)), -EINVAL);
	/* length bounds the scan: the v2 line lies past `len` */
	const char *cut = "1:x:/\n0::/secret\n";
	assert_int_equal(ab_cgroup_parse_self(cut, 6, out, sizeof(out)), -ENOENT);
	/* a buffer that is not NUL-terminated */
	char raw[8];
	memcpy(raw, "0::/abcd", 8);
	assert_int_equal(ab_cgroup_parse_self(raw, sizeof(raw), out, sizeof(out)), 0);
	assert_string_equal(out, "/abcd");
	/* many lines, the last one counts */
	char big[4096];
	size_t n = 0;
	while (n + 16 < sizeof(big) - 32)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "%zu:cpu:/x\n", n % 13);
	n += (size_t)snprintf(big + n, sizeof(big) - n, "0::/last");
	assert_int_equal(ab_cgroup_parse_self(big, n, out, sizeof(out)), 0);
	assert_string_equal(out, "/last");
}

static void test_list_has(void **state)
{
	static const struct {
		const char *list, *name;
		bool has;
	} t[] = {
		{"cpuset cpu io memory hugetlb pids rdma misc\n", "memory", true},
		{"cpuset cpu io memory hugetlb pids rdma misc\n", "pids", true},
		{"cpuset cpu io memory hugetlb pids rdma misc\n", "mem", false},
		{"memoryx pidsy\n", "memory", false},
		{"pids", "pids", true},
		{"  pids  ", "pids", true},
		{"\n", "pids", false},
		{"", "pids", false},
		{"memory", "", false},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++)
		assert_int_equal(ab_cgroup_list_has(t[i].list, t[i].name), t[i].has);
	assert_false(ab_cgroup_list_has(NULL, "pids"));
}

static void test_paths(void **state)
{
	char out[128];
	assert_int_equal(ab_cgroup_child_path("/a/b", 42, out, sizeof(out)), 0);
	assert_string_equal(out, "/sys/fs/cgroup/a/b/agentbox-42");
	assert_int_equal(ab_cgroup_child_path("/", 7, out, sizeof(out)), 0);
	assert_string_equal(out, "/sys/fs/cgroup/agentbox-7");
	assert_int_equal(ab_cgroup_child_path("/a/../b", 7, out, sizeof(out)), -EINVAL);
	assert_int_equal(ab_cgroup_child_path("", 7, out, sizeof(out)), -EINVAL);
	assert_int_equal(ab_cgroup_child_path("/a", 0, out, sizeof(out)), -EINVAL);
	assert_int_equal(ab_cgroup_child_path("/a", 1, out, 20), -ENAMETOOLONG);

	assert_int_equal(ab_cgroup_parent_path("/a/b/c", out, sizeof(out)), 0);
	assert_string_equal(out, "/a/b");
	assert_int_equal(ab_cgroup_parent_path("/a", out, sizeof(out)), 0);
	assert_string_equal(out, "/");
	assert_int_equal(ab_cgroup_parent_path("/", out, sizeof(out)), -EINVAL);
	assert_int_equal(ab_cgroup_parent_path("a/b", out, sizeof(out)), -EINVAL);
	assert_int_equal(ab_cgroup_parent_path("/abc/d", out, 3), -ENAMETOOLONG);

	assert_true(ab_cgroup_path_valid("/"));
	assert_true(ab_cgroup_path_valid("/user.slice/app-x.scope"));
	assert_true(ab_cgroup_path_valid("/..a/b.."));
	assert_false(ab_cgroup_path_valid(NULL));
	assert_false(ab_cgroup_path_valid("//"));
	assert_false(ab_cgroup_path_valid("/a/.."));
	assert_false(ab_cgroup_path_valid("/./a"));
	assert_false(ab_cgroup_path_valid("/a\x7f"));
}

/* No limit wanted: nothing happens, out_path stays NULL.  (Whether limits
 * apply at all is the planner's cgroup_apply, which the caller checks.) */
static void test_setup_noop(void **state)
{
	ab_host host;
	ab_err err = {0};
	char *path = (char *)"sentinel";

	ab_host_fake(&host, 6);
	assert_int_equal(ab_cgroup_setup(AB_LIMIT_UNSET, AB_LIMIT_UNSET, &host, 1234, &path, &err),
			 0);
	assert_null(path);

	/* Asked to apply on a host without delegation: an error, not a no-op. */
	host.cgroup_version = 1;
	host.cgroup_delegated = AB_NO;
	assert_true(ab_cgroup_setup(1 << 20, AB_LIMIT_UNSET, &host, 1234, &path, &err) < 0);
	assert_null(path);
	assert_non_null(strstr(err.msg, "no delegated cgroup v2"));

	/* Invalid values from a broken planner are refused before any syscall. */
	host.cgroup_version = 2;
	host.cgroup_delegated = AB_YES;
	assert_int_equal(ab_cgroup_setup(-7, AB_LIMIT_UNSET, &host, 1234, &path, &err), -EINVAL);
	snprintf(host.cgroup_path, sizeof(host.cgroup_path), "/a/../../etc");
	assert_int_equal(ab_cgroup_setup(1 << 20, AB_LIMIT_UNSET, &host, 1234, &path, &err),
			 -EINVAL);
	assert_null(path);

	ab_cgroup_cleanup(NULL);
	ab_cgroup_cleanup("/nonexistent/agentbox-test-cgroup");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plan_writes),
		cmocka_unit_test(test_parse_self),
		cmocka_unit_test(test_parse_self_hostile),
		cmocka_unit_test(test_list_has),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_setup_noop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
