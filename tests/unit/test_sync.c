/* SPDX-License-Identifier: MIT */
/* Unit tests for the parent/child sync messages (ab_sync_send/recv in
 * src/sandbox/sandbox.c) over a real SOCK_SEQPACKET socketpair.  No privileges. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip_with_fd),
		cmocka_unit_test(test_last_words_after_reset),
		cmocka_unit_test(test_hostile_messages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
