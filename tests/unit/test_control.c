/* SPDX-License-Identifier: MIT */
/* Unit tests for the control socket's directory and socket (src/egress/control.c):
 * the directory is used only when it is a real directory of the caller's,
 * closed to everyone else; a dead run's socket is replaced; the socket is
 * removed at the end.  In a temporary base, never /tmp or /run/user.  The
 * other owner's case needs root (skipped otherwise). */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agentbox/control.h"

static char base[64];

static int setup(void **state)
{
	snprintf(base, sizeof(base), "/tmp/ab-unit-control-XXXXXX");
	assert_non_null(mkdtemp(base));
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static char *at(const char *leaf)
{
	static char p[128];
	snprintf(p, sizeof(p), "%s/%s", base, leaf);
	return p;
}

static int try_connect(const char *path)
{
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s >= 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	assert_true(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path));
	int r = connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : -errno;
	close(s);
	return r;
}

static void test_dirs(void **state)
{
	ab_control_dir d[2];
	struct stat st;
	if (lstat("/run/user/4242", &st) == 0)
		skip(); /* a machine with that user logged in */
	int n = ab_control_dirs(4242, d);
	assert_int_equal(n, 1);
	assert_string_equal(d[0].path, "/tmp/agentbox-4242");
	assert_string_equal(d[0].base, "/tmp");
	assert_string_equal(d[0].leaf, "agentbox-4242");
}

/* Made 0700 when absent; opened again as it is; absent and not to be made:
 * -ENOENT and no message. */
static void test_dir_made_private(void **state)
{
	ab_err err = {0};
	int fd = -1;
	assert_int_equal(ab_control_dir_open(base, "d", false, &fd, &err), -ENOENT);
	assert_string_equal(err.msg, "");
	assert_int_equal(ab_control_dir_open(base, "d", true, &fd, &err), 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	struct stat st;
	assert_int_equal(lstat(at("d"), &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(st.st_uid, getuid());
	assert_int_equal(ab_control_dir_open(base, "d", false, &fd, &err), 0);
	close(fd);
}

static void expect_refused(const char *leaf, const char *what)
{
	for (int create = 0; create < 2; create++) {
		ab_err err = {0};
		int fd = -1;
		assert_true(ab_control_dir_open(base, leaf, create, &fd, &err) < 0);
		assert_int_equal(fd, -1);
		if (!strstr(err.msg, what) || !strstr(err.msg, "refusing"))
			fail_msg("%s: %s", leaf, err.msg);
	}
}

/* What someone else could have put there first, or a directory left open. */
static void test_dir_refused(void **state)
{
	assert_int_equal(mkdir(at("open"), 0700), 0);
	assert_int_equal(chmod(at("open"), 0755), 0);
	expect_refused("open", "open to other users (mode 0755)");
	assert_int_equal(mkdir(at("target"), 0700), 0);
	char target[128];
	snprintf(target, sizeof(target), "%s", at("target"));
	assert_int_equal(symlink(target, at("link")), 0);
	expect_refused("link", "is a symbolic link of uid");
	int f = open(at("file"), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(f >= 0);
	close(f);
	expect_refused("file", "is a file of uid");
	if (getuid() != 0)
		return; /* another owner needs root to make */
	assert_int_equal(mkdir(at("theirs"), 0700), 0);
	assert_int_equal(chown(at("theirs"), 65534, 65534), 0);
	expect_refused("theirs", "belongs to uid 65534, not to you");
}

/* The socket: named after the workspace, reachable at its path, replacing a
 * dead run's; removed by ab_control_close. */
static void test_socket(void **state)
{
	struct stat ws;
	assert_int_equal(stat(base, &ws), 0);
	char name[64], path[192];
	ab_control_sock_name(&ws, name, sizeof(name));
	char want[64];
	snprintf(want, sizeof(want), "ctl-%llx-%llx", (unsigned long long)ws.st_dev,
		 (unsigned long long)ws.st_ino);
	assert_string_equal(name, want);
	snprintf(path, sizeof(path), "%s/s/%s", base, name);

	/* a dead run's socket: bound, then its listener gone */
	assert_int_equal(mkdir(at("s"), 0700), 0);
	int dead = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	assert_true(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path));
	assert_int_equal(bind(dead, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(dead);
	assert_int_equal(try_connect(path), -ECONNREFUSED);

	ab_err err = {0};
	ab_control *c = NULL;
	int fd = -1;
	assert_int_equal(ab_control_open_in(base, "s", &ws, &c, &fd, &err), 0);
	assert_non_null(c);
	assert_string_equal(ab_control_path(c), path);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);
	assert_int_equal(try_connect(path), 0);
	ab_control_close(c);
	close(fd);
	struct stat st;
	assert_int_equal(lstat(path, &st), -1);
	assert_int_equal(errno, ENOENT);
	ab_control_close(NULL);

	/* never in a directory that is not safe */
	assert_int_equal(chmod(at("s"), 0750), 0);
	c = NULL;
	fd = -1;
	assert_true(ab_control_open_in(base, "s", &ws, &c, &fd, &err) < 0);
	assert_null(c);
	assert_int_equal(fd, -1);
	assert_non_null(strstr(err.msg, "open to other users"));
	assert_int_equal(lstat(path, &st), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dirs),
		cmocka_unit_test_setup_teardown(test_dir_made_private, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dir_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_socket, setup, teardown),
	};
	return cmocka_run_group_tests_name("control", tests, NULL, NULL);
}
