/* SPDX-License-Identifier: MIT */
/* Unit tests for the parent/child sync messages (ab_sync_send/recv in
 * src/sandbox/sandbox.c) over a real SOCK_SEQPACKET socketpair.  No privileges. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentbox/broker.h"
#include "agentbox/sandbox.h"

static void pair(int sv[2])
{
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
}

static void test_round_trip_with_fd(void **state)
{
	int sv[2], p[2];
	pair(sv);
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	ab_sync_msg m = {.type = AB_SYNC_LISTENER, .value = 42};
	assert_int_equal(ab_sync_send(sv[0], &m, p[1]), 0);
	ab_sync_msg got;
	int fd = -1;
	assert_int_equal(ab_sync_recv(sv[1], &got, &fd), 1);
	assert_int_equal(got.type, AB_SYNC_LISTENER);
	assert_int_equal(got.value, 42);
	assert_true(fd >= 0 && fd != p[1]);
	assert_int_equal(fcntl(fd, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	assert_int_equal(write(fd, "x", 1), 1); /* the same pipe */
	char c;
	assert_int_equal(read(p[0], &c, 1), 1);
	close(fd);
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
}

/* The child fails its setup and exits while a message of ours (the seccomp
 * program) waits unread in its queue: the kernel reports ECONNRESET on our
 * end first.  The child's ERROR, sent before it closed, must still arrive. */
static void test_last_words_after_reset(void **state)
{
	int sv[2];
	pair(sv);
	ab_sync_msg ours = {.type = AB_SYNC_SECCOMP, .value = 1};
	assert_int_equal(ab_sync_send(sv[0], &ours, -1), 0);
	ab_sync_msg e = {.type = AB_SYNC_ERROR};
	snprintf(e.err.msg, sizeof(e.err.msg), "fs.protect: x has 2 hard links");
	e.err.exit_code = 125;
	assert_int_equal(ab_sync_send(sv[1], &e, -1), 0);
	close(sv[1]); /* with OURS unread */
	ab_sync_msg got;
	assert_int_equal(ab_sync_recv(sv[0], &got, NULL), 1);
	assert_int_equal(got.type, AB_SYNC_ERROR);
	assert_int_equal(got.err.exit_code, 125);
	assert_string_equal(got.err.msg, "fs.protect: x has 2 hard links");
	assert_int_equal(ab_sync_recv(sv[0], &got, NULL), 0); /* then EOF */
	close(sv[0]);
}

/* A short datagram or unterminated strings from the other side. */
static void test_hostile_messages(void **state)
{
	int sv[2];
	pair(sv);
	assert_int_equal(send(sv[1], "abc", 3, 0), 3);
	ab_sync_msg got;
	assert_int_equal(ab_sync_recv(sv[0], &got, NULL), -EPROTO);
	ab_sync_msg e;
	memset(&e, 'A', sizeof(e));
	e.type = AB_SYNC_ERROR;
	assert_int_equal(send(sv[1], &e, sizeof(e), 0), (ssize_t)sizeof(e));
	assert_int_equal(ab_sync_recv(sv[0], &got, NULL), 1);
	assert_int_equal(strlen(got.err.msg), sizeof(got.err.msg) - 1);
	assert_int_equal(strlen(got.err.hint), sizeof(got.err.hint) - 1);
	close(sv[1]);
	assert_int_equal(ab_sync_recv(sv[0], &got, NULL), 0);
	close(sv[0]);
}

/* The run-time files as the child gets them (ab_broker_files_send): one
 * CONTENT per run-time mount, in plan order, each a memfd still empty and
 * unsealed (the broker fills and seals it later); the trust bundle's mounts
 * share one, the root alone and the Java truststore have their own, each
 * rendered credentials file its own; then CONTENT_DONE, also when there is
 * nothing to send. */
static void test_broker_files(void **state)
{
	ab_mount mounts[] = {
		{.kind = AB_MNT_BIND_RO, .dst = "/usr"},
		{.kind = AB_MNT_CONTENT,
		 .dst = "/etc/ssl/certs/ca-certificates.crt",
		 .flags = AB_MNT_F_RUNTIME},
		{.kind = AB_MNT_CONTENT,
		 .dst = "/home/u/.x.json",
		 .flags = AB_MNT_F_RUNTIME | AB_MNT_F_RENDER},
		{.kind = AB_MNT_CONTENT, .dst = "/etc/motd", .src = "static"},
		{.kind = AB_MNT_CONTENT,
		 .dst = "/run/agentbox/ca-bundle.pem",
		 .flags = AB_MNT_F_RUNTIME},
		{.kind = AB_MNT_CONTENT,
		 .dst = "/run/agentbox/session-ca.pem",
		 .flags = AB_MNT_F_RUNTIME | AB_MNT_F_CA_ONLY},
		{.kind = AB_MNT_CONTENT,
		 .dst = "/run/agentbox/truststore.p12",
		 .flags = AB_MNT_F_RUNTIME | AB_MNT_F_JAVA},
		{.kind = AB_MNT_CONTENT,
		 .dst = "/etc/ssl/certs/java/cacerts",
		 .flags = AB_MNT_F_RUNTIME | AB_MNT_F_JAVA},
		{.kind = AB_MNT_CONTENT,
		 .dst = "/home/u/.y.json",
		 .flags = AB_MNT_F_RUNTIME | AB_MNT_F_RENDER},
	};
	static const int want_idx[] = {1, 2, 4, 5, 6, 7, 8};
	static const int same_as[] = {-1, -1, 0, -1, -1, 4, -1}; /* of want_idx's order */
	ab_plan plan = {0};
	plan.mounts = mounts;
	plan.nmounts = AB_ARRAY_SIZE(mounts);
	int sv[2];
	pair(sv);
	ab_broker_files f;
	ab_err err = {0};
	assert_int_equal(ab_broker_files_send(&plan, sv[0], &f, &err), 0);
	struct stat st[AB_ARRAY_SIZE(want_idx)];
	for (size_t i = 0; i < AB_ARRAY_SIZE(want_idx); i++) {
		ab_sync_msg m;
		int fd = -1;
		assert_int_equal(ab_sync_recv(sv[1], &m, &fd), 1);
		assert_int_equal(m.type, AB_SYNC_CONTENT);
		assert_int_equal(m.value, want_idx[i]);
		assert_true(fd >= 0);
		assert_int_equal(fstat(fd, &st[i]), 0);
		assert_int_equal(st[i].st_size, 0);
		assert_int_equal(fcntl(fd, F_GET_SEALS), 0);
		for (size_t j = 0; j < i; j++) {
			bool same = st[i].st_dev == st[j].st_dev && st[i].st_ino == st[j].st_ino;
			assert_int_equal(same, same_as[i] == (int)j);
		}
		close(fd);
	}
	ab_sync_msg done;
	assert_int_equal(ab_sync_recv(sv[1], &done, NULL), 1);
	assert_int_equal(done.type, AB_SYNC_CONTENT_DONE);
	/* the parent keeps its own: the bundle, the root, the Java store, two
	 * rendered files */
	assert_true(f.bundle >= 0 && f.ca >= 0 && f.java >= 0);
	assert_true(f.render[2] >= 0 && f.render[8] >= 0 && f.render[4] < 0);
	ab_broker_files_close(&f);
	assert_int_equal(f.bundle, -1);
	assert_null(f.render);
	/* nothing run-time in the plan: CONTENT_DONE alone */
	plan.nmounts = 1;
	assert_int_equal(ab_broker_files_send(&plan, sv[0], &f, &err), 0);
	assert_int_equal(ab_sync_recv(sv[1], &done, NULL), 1);
	assert_int_equal(done.type, AB_SYNC_CONTENT_DONE);
	assert_true(f.bundle < 0 && f.ca < 0 && f.java < 0);
	ab_broker_files_close(&f);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_with_fd),
		cmocka_unit_test(test_last_words_after_reset),
		cmocka_unit_test(test_hostile_messages),
		cmocka_unit_test(test_broker_files),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
