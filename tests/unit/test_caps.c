/* SPDX-License-Identifier: MIT */
/*
 * caps.c: rlimits, session keyring, uid/gid switch and the capability drop,
 * each in a forked child.  Capabilities come from unshare(CLONE_NEWUSER), so
 * the suite needs no root; the variants that need root in the initial user
 * namespace say so and skip when it is absent.
 */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/keyctl.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentbox/caps.h"
#include "agentbox/host.h"

#define EXIT_SKIP 77

#define CHECK(cond, what)                                                              \
	do {                                                                           \
		if (!(cond)) {                                                         \
			dprintf(2, "child: %s failed (errno %d: %s)\n", (what), errno, \
				strerror(errno));                                      \
			_exit(1);                                                      \
		}                                                                      \
	} while (0)

#define CHECK_OK(call, what)                                                              \
	do {                                                                              \
		ab_err e_ = {0};                                                          \
		int r_ = (call)(&e_);                                                     \
		if (r_ < 0) {                                                             \
			dprintf(2, "child: %s: %s\nHint: %s\n", (what), e_.msg, e_.hint); \
			_exit(2);                                                         \
		}                                                                         \
	} while (0)

typedef void (*child_fn)(void *ctx);

/* Runs fn in a child; returns false (and the test should skip) when the child
 * exited EXIT_SKIP, after printing its reason. */
static bool run_in_child(child_fn fn, void *ctx)
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		fn(ctx);
		_exit(0);
	}
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == EXIT_SKIP)
		return false;
	assert_int_equal(WEXITSTATUS(st), 0);
	return true;
}

static void skip_child(const char *why)
{
	dprintf(1, "SKIP: %s (errno %d: %s)\n", why, errno, strerror(errno));
	_exit(EXIT_SKIP);
}

static int read_cap_last_cap(void)
{
	int v = 40;
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = 40;
		fclose(f);
	}
	return v;
}

/* /proc/self/status field as a number (hex for Cap*, decimal otherwise). */
static bool status_field(const char *key, unsigned long long *out)
{
	char line[256];
	size_t kl = strlen(key);
	bool found = false;
	FILE *f = fopen("/proc/self/status", "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
			*out = strtoull(line + kl + 1, NULL, strncmp(key, "Cap", 3) == 0 ? 16 : 10);
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

static void check_all_dropped(void)
{
	static const char *zero[] = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"};
	unsigned long long v;
	for (size_t i = 0; i < AB_ARRAY_SIZE(zero); i++) {
		CHECK(status_field(zero[i], &v), zero[i]);
		if (v != 0) {
			dprintf(2, "child: %s is %llx, want 0\n", zero[i], v);
			_exit(1);
		}
	}
	CHECK(status_field("NoNewPrivs", &v) && v == 1, "NoNewPrivs 1");
	/* and nothing comes back */
	cap_t all = cap_get_proc();
	CHECK(all != NULL, "cap_get_proc");
	cap_value_t c = CAP_SYS_ADMIN;
	cap_set_flag(all, CAP_EFFECTIVE, 1, &c, CAP_SET);
	cap_set_flag(all, CAP_PERMITTED, 1, &c, CAP_SET);
	errno = 0;
	CHECK(cap_set_proc(all) < 0 && errno == EPERM, "re-raising CAP_SYS_ADMIN is refused");
	cap_free(all);
	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 0, 0, 0, 0) < 0, "no_new_privs cannot be unset");
}

static void enter_userns(void)
{
	if (unshare(CLONE_NEWUSER) < 0)
		skip_child("unshare(CLONE_NEWUSER) not allowed here");
}

/* Map 0 inside to our own ids outside (the one mapping anyone may write). */
static void map_self(uid_t ou, gid_t og)
{
	char buf[64];
	int fd;

	fd = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
	CHECK(fd >= 0 && write(fd, "deny", 4) == 4, "setgroups deny");
	close(fd);
	snprintf(buf, sizeof(buf), "0 %u 1\n", (unsigned)ou);
	fd = open("/proc/self/uid_map", O_WRONLY | O_CLOEXEC);
	CHECK(fd >= 0 && write(fd, buf, strlen(buf)) == (ssize_t)strlen(buf), "uid_map");
	close(fd);
	snprintf(buf, sizeof(buf), "0 %u 1\n", (unsigned)og);
	fd = open("/proc/self/gid_map", O_WRONLY | O_CLOEXEC);
	CHECK(fd >= 0 && write(fd, buf, strlen(buf)) == (ssize_t)strlen(buf), "gid_map");
	close(fd);
}

/* ---------------------------------------------------------------- rlimits */

static void child_nofile(void *ctx)
{
	ab_rlimit lim[] = {
		{RLIMIT_NOFILE, 64, 64, 0},
		{RLIMIT_CORE, 0, 0, 0},
	};
	ab_err err = {0};
	CHECK(ab_rlimits_apply(lim, AB_ARRAY_SIZE(lim), &err) == 0, err.msg);
	int i, fd = -1;
	errno = 0;
	for (i = 0; i < 70; i++) {
		fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			break;
	}
	CHECK(fd < 0 && errno == EMFILE, "70 opens hit EMFILE");
	CHECK(i <= 64, "at most 64 fds");
	struct rlimit rl;
	CHECK(getrlimit(RLIMIT_CORE, &rl) == 0 && rl.rlim_max == 0, "core 0");
}

static void test_rlimit_nofile(void **state)
{
	run_in_child(child_nofile, NULL);
}

static void test_rlimit_errors(void **state)
{
	static const struct {
		ab_rlimit lim;
		int ret;
		const char *msg; /* substring of err.msg */
		bool hint;
	} t[] = {
		{{RLIMIT_FSIZE, 10, 5, 0},
		 -EINVAL,
		 "setting rlimit fsize to soft=10 hard=5: Invalid argument",
		 true},
		{{RLIMIT_NOFILE, RLIM_INFINITY, 5, 0},
		 -EINVAL,
		 "rlimit nofile to soft=infinity hard=5",
		 true},
		{{9999, 1, 1, 0}, -EINVAL, "setting rlimit resource 9999 to soft=1 hard=1", false},
		{{-1, 1, 1, 0}, -EINVAL, "rlimit resource -1", false},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(t); i++) {
		ab_err err = {0};
		assert_int_equal(ab_rlimits_apply(&t[i].lim, 1, &err), t[i].ret);
		if (!strstr(err.msg, t[i].msg))
			fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err.msg, t[i].msg);
		assert_int_equal(err.hint[0] != '\0', t[i].hint);
	}
	ab_err err = {0};
	assert_int_equal(ab_rlimits_apply(NULL, 0, &err), 0);
}

/* Raising a hard limit needs CAP_SYS_RESOURCE in the initial namespace, which
 * nobody in a user namespace has, root included. */
static void child_raise(void *ctx)
{
	struct rlimit rl;
	ab_err err = {0};
	CHECK(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit");
	rl.rlim_max = rl.rlim_cur = 32;
	CHECK(setrlimit(RLIMIT_NOFILE, &rl) == 0, "lower nofile");
	enter_userns();
	ab_rlimit up = {RLIMIT_NOFILE, 64, 64, 0};
	CHECK(ab_rlimits_apply(&up, 1, &err) == -EPERM, "raise fails EPERM");
	CHECK(strstr(err.msg, "nofile") != NULL, "message names the limit");
	CHECK(strstr(err.hint, "hard limit of nofile is 32") != NULL, "hint has the limit");
}

static void test_rlimit_raise(void **state)
{
	if (!run_in_child(child_raise, NULL))
		skip();
}

/* ---------------------------------------------------------------- keyring */

static long session_keyring_id(void)
{
	return syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 1);
}

static int keyring_new(ab_err *err)
{
	return ab_keyring_new_session(0, err);
}

static void child_keyring(void *ctx)
{
	long parent = *(long *)ctx;
	CHECK_OK(keyring_new, "new session keyring");
	long mine = session_keyring_id();
	CHECK(mine > 0, "session keyring id");
	CHECK(mine != parent, "the session keyring differs from the parent's");
}

static void test_keyring(void **state)
{
	long parent = session_keyring_id();
	if (parent < 0) {
		print_message("SKIP: keyctl unavailable here (errno %d: %s)\n", errno,
			      strerror(errno));
		skip();
	}
	run_in_child(child_keyring, &parent);
}

/* An outer filter (a container engine's) that refuses keyctl with EPERM:
 * the host probe sees it, the join is skipped for exactly that errno, and
 * any other expectation still fails. */
static void child_keyring_refused(void *unused)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_keyctl, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = AB_ARRAY_SIZE(f), .filter = f};
	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, "no_new_privs");
	CHECK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0, "outer filter");
	ab_host h;
	ab_host_probe(&h, false);
	CHECK(h.keyctl_errno == EPERM, "the host probe sees keyctl refused");
	ab_err err = {0};
	CHECK(ab_keyring_new_session(0, &err) == -EPERM, "a join expected to work fails");
	CHECK(strstr(err.hint, "outer seccomp") != NULL, "the hint names the outer filter");
	ab_err err2 = {0};
	CHECK(ab_keyring_new_session(ENOSYS, &err2) == -EPERM, "another errno still fails");
	ab_err err3 = {0};
	CHECK(ab_keyring_new_session(EPERM, &err3) == 0, "refused as probed: skipped");
}

static void test_keyring_refused(void **state)
{
#if defined(__x86_64__)
	run_in_child(child_keyring_refused, NULL);
#else
	skip();
#endif
}

/* ------------------------------------------------------------ caps drop */

static int drop_last(ab_err *err)
{
	return ab_caps_drop_all(read_cap_last_cap(), err);
}

/* ctx: the cap_last_cap value to pass */
static void child_drop_userns(void *ctx)
{
	ab_err err = {0};
	unsigned long long eff;

	enter_userns();
	CHECK(status_field("CapEff", &eff) && eff != 0, "full caps in the new userns");
	if (ab_caps_drop_all(*(const int *)ctx, &err) < 0) {
		dprintf(2, "child: drop: %s\nHint: %s\n", err.msg, err.hint);
		_exit(2);
	}
	check_all_dropped();
}

static void test_drop_userns(void **state)
{
	/* the kernel's value, a stale small one, and a hostile negative one:
	 * all must end with everything dropped */
	const int last[] = {read_cap_last_cap(), 5, -7, 1000};
	for (size_t i = 0; i < AB_ARRAY_SIZE(last); i++)
		if (!run_in_child(child_drop_userns, (void *)&last[i]))
			skip();
}

static void child_drop_root(void *ctx)
{
	CHECK_OK(drop_last, "drop as root");
	check_all_dropped();
}

static void test_drop_root(void **state)
{
	if (geteuid() != 0 || !CAP_IS_SUPPORTED(CAP_SETPCAP) ||
	    prctl(PR_CAPBSET_READ, CAP_SETPCAP, 0, 0, 0) != 1) {
		print_message("SKIP: needs root in the initial user namespace "
			      "(test_drop_userns covers the same code)\n");
		skip();
	}
	run_in_child(child_drop_root, NULL);
}

/* Without CAP_SETPCAP the bounding set cannot be emptied: a clear failure. */
static void child_drop_without_caps(void *ctx)
{
	ab_err err = {0};
	if (prctl(PR_CAPBSET_READ, 0, 0, 0, 0) != 1)
		skip_child("bounding set already empty");
	cap_t none = cap_init();
	if (cap_set_proc(none) < 0)
		skip_child("cap_set_proc");
	cap_free(none);
	CHECK(ab_caps_drop_all(read_cap_last_cap(), &err) == -EPERM, "fails EPERM");
	CHECK(strstr(err.msg, "bounding set") != NULL, "message");
	CHECK(err.hint[0] != '\0', "hint");
}

static void test_drop_without_caps(void **state)
{
	if (!run_in_child(child_drop_without_caps, NULL))
		skip();
}

/* ------------------------------------------------------------ creds */

/* Userns, 0 mapped to ourselves: switch to 0 works (and keeps caps so the
 * drop still works), an unmapped uid fails with a hint, dropping groups when
 * setgroups is denied fails with a hint. */
static void child_creds_userns(void *ctx)
{
	uid_t ou = geteuid();
	gid_t og = getegid();
	ab_err err = {0};

	enter_userns();
	map_self(ou, og);

	CHECK(ab_creds_switch(0, 0, true, &err) == -EPERM, "drop groups under deny");
	CHECK(strstr(err.msg, "supplementary groups") && strstr(err.hint, "deny"),
	      "groups message");
	memset(&err, 0, sizeof(err));
	CHECK(ab_creds_switch(1000, 1000, false, &err) == -EINVAL, "unmapped id");
	CHECK(strstr(err.msg, "gid 1000") && strstr(err.hint, "not mapped"), "unmapped msg");
	memset(&err, 0, sizeof(err));
	CHECK(ab_creds_switch(0, 0, false, &err) == 0, err.msg);
	CHECK(getuid() == 0 && getgid() == 0, "ids");
	CHECK_OK(drop_last, "drop after switch");
	check_all_dropped();
}

static void test_creds_userns(void **state)
{
	if (!run_in_child(child_creds_userns, NULL))
		skip();
}

/* Root: the real root-mode sequence, 0 -> 65534 with groups dropped, then
 * the full drop still works because the switch kept the capabilities. */
static void child_creds_root(void *ctx)
{
	ab_err err = {0};
	gid_t g = 4242;
	CHECK(setgroups(1, &g) == 0, "setgroups");
	CHECK(ab_creds_switch(65534, 65534, true, &err) == 0, err.msg);
	uid_t r, e, s;
	CHECK(getresuid(&r, &e, &s) == 0 && r == 65534 && e == 65534 && s == 65534, "uids");
	CHECK(getgroups(0, NULL) == 0, "no groups");
	CHECK(prctl(PR_GET_KEEPCAPS, 0, 0, 0, 0) == 0, "keepcaps restored");
	unsigned long long eff;
	CHECK(status_field("CapEff", &eff) && eff != 0, "effective caps kept");
	CHECK_OK(drop_last, "drop after switch");
	check_all_dropped();
}

static void test_creds_root(void **state)
{
	if (geteuid() != 0) {
		print_message("SKIP: switching away from uid 0 needs root "
			      "(test_creds_userns covers the rest)\n");
		skip();
	}
	run_in_child(child_creds_root, NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rlimit_nofile),   cmocka_unit_test(test_rlimit_errors),
		cmocka_unit_test(test_rlimit_raise),    cmocka_unit_test(test_keyring),
		cmocka_unit_test(test_keyring_refused), cmocka_unit_test(test_drop_userns),
		cmocka_unit_test(test_drop_root),       cmocka_unit_test(test_drop_without_caps),
		cmocka_unit_test(test_creds_userns),    cmocka_unit_test(test_creds_root),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
