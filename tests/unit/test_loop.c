/* SPDX-License-Identifier: MIT */
/* Unit tests for the epoll loop (src/base/loop.c).  No privileges needed. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "agentbox/loop.h"

#define GUARD_MS 5000 /* a test that hangs this long has failed */

struct rec {
	int calls;
	int order[32];
	unsigned events[32];
	int fds[32];
	int stale; /* calls that must never happen */
	int a, b;  /* fds a test juggles */
	uint64_t ids[8];
};

static void add(struct rec *r, int tag, unsigned ev, int fd)
{
	if (r->calls < 32) {
		r->order[r->calls] = tag;
		r->events[r->calls] = ev;
		r->fds[r->calls] = fd;
	}
	r->calls++;
}

static void guard_cb(ab_loop *l, uint64_t id, void *data)
{
	fail_msg("loop test timed out");
}

static void stop_cb(ab_loop *l, uint64_t id, void *data)
{
	ab_loop_stop(l);
}

static ab_loop *new_loop(void)
{
	ab_loop *l = NULL;
	ab_err err = {0};
	assert_int_equal(ab_loop_new(&l, &err), 0);
	assert_non_null(l);
	return l;
}

/* Run for `ms` milliseconds (then stop), failing if it takes far longer. */
static void run_for(ab_loop *l, uint64_t ms)
{
	uint64_t g = ab_loop_timer(l, GUARD_MS, guard_cb, NULL);
	uint64_t s = ab_loop_timer(l, ms, stop_cb, NULL);
	assert_int_equal(ab_loop_run(l), 0);
	ab_loop_timer_cancel(l, g);
	ab_loop_timer_cancel(l, s);
}

static void make_pipe(int p[2])
{
	assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
}

/* ---- fds ---- */

static void read_stop_cb(ab_loop *l, int fd, unsigned ev, void *data)
{
	char buf[16];
	add(data, 1, ev, fd);
	assert_true(read(fd, buf, sizeof(buf)) > 0);
	ab_loop_stop(l);
}

static void test_pipe_readable(void **state)
{
	ab_loop *l = new_loop();
	struct rec r = {0};
	int p[2];
	make_pipe(p);
	assert_int_equal(ab_loop_watch(l, p[0], AB_EV_READ, read_stop_cb, &r), 0);
	assert_int_equal(write(p[1], "x", 1), 1);
	run_for(l, GUARD_MS - 100);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.fds[0], p[0]);
	assert_true(r.events[0] & AB_EV_READ);
	ab_loop_unwatch(l, p[0]);
	close(p[0]);
	close(p[1]);
	ab_loop_free(l);
}

static void count_cb(ab_loop *l, int fd, unsigned ev, void *data)
{
	add(data, 1, ev, fd);
}

static void drain_cb(ab_loop *l, uint64_t id, void *data)
{
	struct rec *r = data;
	char buf[4096];
	while (read(r->a, buf, sizeof(buf)) > 0)
		;
	add(r, 2, 0, r->a);
}

static void write_stop_cb(ab_loop *l, int fd, unsigned ev, void *data)
{
	add(data, 3, ev, fd);
	ab_loop_unwatch(l, fd);
	ab_loop_stop(l);
}

static void test_write_ready(void **state)
{
	ab_loop *l = new_loop();
	struct rec r = {0};
	int p[2];
	make_pipe(p);
	/* an empty pipe is writable right away */
	assert_int_equal(ab_loop_watch(l, p[1], AB_EV_WRITE, write_stop_cb, &r), 0);
	run_for(l, GUARD_MS - 100);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.order[0], 3);
	assert_true(r.events[0] & AB_EV_WRITE);

	/* a full one only after the reader drained it */
	char blk[4096] = {0};
	while (write(p[1], blk, sizeof(blk)) > 0)
		;
	assert_int_equal(errno, EAGAIN);
	r = (struct rec){.a = p[0]};
	assert_int_equal(ab_loop_watch(l, p[1], AB_EV_WRITE, write_stop_cb, &r), 0);
	ab_loop_timer(l, 30, drain_cb, &r);
	run_for(l, GUARD_MS - 100);
	assert_int_equal(r.calls, 2);
	assert_int_equal(r.order[0], 2); /* drain first */
	assert_int_equal(r.order[1], 3); /* then writable */
	close(p[0]);
	close(p[1]);
	ab_loop_free(l);
}

static void test_hup_reported(void **state)
{
	ab_loop *l = new_loop();
	struct rec r = {0};
	int p[2];
	make_pipe(p);
	close(p[1]);
	assert_int_equal(ab_loop_watch(l, p[0], AB_EV_READ, write_stop_cb, &r), 0);
	run_for(l, GUARD_MS - 100);
	assert_int_equal(r.calls, 1);
	assert_true(r.events[0] & AB_EV_HUP);
	close(p[0]);
	ab_loop_free(l);
}

static void test_replace_watch(void **state)
{
	ab_loop *l = new_loop();
	struct rec r1 = {0}, r2 = {0};
	int p[2];
	make_pipe(p);
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(ab_loop_watch(l, p[0], AB_EV_READ, count_cb, &r1), 0);
	assert_int_equal(ab_loop_watch(l, p[0], AB_EV_READ, read_stop_cb, &r2), 0);
	run_for(l, GUARD_MS - 100);
	assert_int_equal(r1.calls, 0);
	assert_int_equal(r2.calls, 1);
	close(p[0]);
	close(p[1]);
	ab_loop_free(l);
}

static void test_modify_pause_resume(void **state)
{
	ab_loop *l = new_loop();
	struct rec r = {0};
	int p[2];
	make_pipe(p);
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(ab_loop_watch(l, p[0], AB_EV_READ, count_cb, &r), 0);
	assert_int_equal(ab_loop_modify(l, p[0], 0), 0);
	close(p[1]); /* HUP pending too: a paused fd must not be reported at all */
	run_for(l, 50);
	assert_int_equal(r.calls, 0);
	assert_int_equal(ab_loop_modify(l, p[0], AB_EV_READ), 0);
	assert_int_equal(ab_loop_modify(l, p[0], AB_EV_READ), 0); /* no-op */
	run_for(l, 20);
	assert_true(r.calls > 0);
	ab_loop_unwatch(l, p[0]);
	close(p[0]);
	ab_loop_free(l);
}

/* ---- unwatch during dispatch ---- */

static void unwatch_self_cb(ab_loop *l, int fd, unsigned ev, void *data)
{
	add(data, 1, ev, fd);
	ab_loop_unwatch(l, fd); /* data stays in the pipe: level-triggered */
}

static void test_unwatch_self_in_cb(void **state)
{
	ab_loop *l = new_loop();
	struct rec r = {0};
	int p[2];
	make_pipe(p);
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(ab_loop_watch(l, p[0], AB_EV_READ, unwatch_self_cb, &r), 0);
	run_for(l, 50);
	assert_int_equal(r.calls, 1);
	close(p[0]);
	close(p[1]);
	ab_loop_free(l);
}

static void stale_cb(ab_loop *l, int fd, unsigned ev, void *data)
{
	((struct rec *)data)->stale++;
}

/* Both pipes are readable in the same epoll batch; whichever callback runs
 * first unwatches the other, closes it, puts a fresh (idle) pipe on the same
 * fd number and watches that.  The stale event must not reach anyone. */
static void juggle_cb(ab_loop *l, int fd, unsigned ev, void *data)
{
	struct rec *r = data;
	int other = fd == r->a ? r->b : r->a;
	int np[2];
	add(r, fd == r->a ? 1 : 2, ev, fd);
	ab_loop_unwatch(l, fd);
	ab_loop_unwatch(l, other);
	make_pipe(np);
	assert_int_equal(dup3(np[0], other, O_CLOEXEC), other);
	close(np[0]);
	r->ids[0] = (uint64_t)np[1]; /* keep the writer so no HUP */
	assert_int_equal(ab_loop_watch(l, other, AB_EV_READ, stale_cb, r), 0);
}

static void test_unwatch_other_in_cb(void **state)
{
	ab_loop *l = new_loop();
	struct rec r = {0};
	int p[2], q[2];
	make_pipe(p);
	make_pipe(q);
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(write(q[1], "x", 1), 1);
	r.a = p[0];
	r.b = q[0];
	assert_int_equal(ab_loop_watch(l, p[0], AB_EV_READ, juggle_cb, &r), 0);
	assert_int_equal(ab_loop_watch(l, q[0], AB_EV_READ, juggle_cb, &r), 0);
	run_for(l, 50);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.stale, 0);
	int other = r.order[0] == 1 ? q[0] : p[0];
	ab_loop_unwatch(l, other);
	close(p[0]);
	close(q[0]);
	close(p[1]);
	close(q[1]);
	close((int)r.ids[0]);
	ab_loop_free(l);
}

/* ---- timers ---- */

static void tag_timer_cb(ab_loop *l, uint64_t id, void *data)
{
	struct rec *r = data;
	int tag = -1;
	for (int i = 0; i < 8; i++)
		if (r->ids[i] == id)
			tag = i;
	add(r, tag, 0, -1);
}

static void test_timers_order_and_cancel(void **state)
{
	ab_loop *l = new_loop();
	struct rec r = {0};
	static const uint64_t ms[] = {40, 10, 25, 10, 30, 0};
	for (size_t i = 0; i < AB_ARRAY_SIZE(ms); i++) {
		r.ids[i] = ab_loop_timer(l, ms[i], tag_timer_cb, &r);
		assert_true(r.ids[i] > 0);
		for (size_t j = 0; j < i; j++)
			assert_true(r.ids[i] != r.ids[j]);
	}
	ab_loop_timer_cancel(l, r.ids[4]); /* the 30 ms one */
	ab_loop_timer_cancel(l, 999999);   /* unknown: ignored */
	ab_loop_timer_cancel(l, 0);
	uint64_t t0 = ab_now_ms();
	run_for(l, 80);
	assert_true(ab_now_ms() - t0 >= 80);
	static const int want[] = {5, 1, 3, 2, 0};
	assert_int_equal(r.calls, (int)AB_ARRAY_SIZE(want));
	for (size_t i = 0; i < AB_ARRAY_SIZE(want); i++)
		assert_int_equal(r.order[i], want[i]);
	ab_loop_free(l);
}

static void cancel_other_cb(ab_loop *l, uint64_t id, void *data)
{
	struct rec *r = data;
	add(r, 0, 0, -1);
	ab_loop_timer_cancel(l, r->ids[1]);
	ab_loop_timer_cancel(l, id); /* self: already popped, harmless */
}

static void test_timer_cancel_in_cb(void **state)
{
	ab_loop *l = new_loop();
	struct rec r = {0};
	r.ids[0] = ab_loop_timer(l, 5, cancel_other_cb, &r);
	r.ids[1] = ab_loop_timer(l, 5, tag_timer_cb, &r); /* same deadline, later id */
	run_for(l, 40);
	assert_int_equal(r.calls, 1);
	ab_loop_free(l);
}

static void rearm_cb(ab_loop *l, uint64_t id, void *data)
{
	struct rec *r = data;
	r->a++;
	if (r->b == 0)
		ab_loop_timer(l, 0, rearm_cb, r);
}

static void fd_stops_rearm_cb(ab_loop *l, int fd, unsigned ev, void *data)
{
	struct rec *r = data;
	r->b = 1;
	ab_loop_unwatch(l, fd);
	ab_loop_stop(l);
}

/* A 0 ms timer that keeps re-arming itself must not starve fd events. */
static void test_zero_timer_no_starvation(void **state)
{
	ab_loop *l = new_loop();
	struct rec r = {0};
	int p[2];
	make_pipe(p);
	assert_int_equal(write(p[1], "x", 1), 1);
	ab_loop_timer(l, 0, rearm_cb, &r);
	assert_int_equal(ab_loop_watch(l, p[0], AB_EV_READ, fd_stops_rearm_cb, &r), 0);
	uint64_t g = ab_loop_timer(l, GUARD_MS, guard_cb, NULL);
	assert_int_equal(ab_loop_run(l), 0);
	ab_loop_timer_cancel(l, g);
	assert_int_equal(r.b, 1);
	assert_true(r.a <= 2);
	close(p[0]);
	close(p[1]);
	ab_loop_free(l);
}

/* ---- scale ---- */

#define NPIPES 500

static void many_cb(ab_loop *l, int fd, unsigned ev, void *data)
{
	struct rec *r = data;
	char c;
	assert_int_equal(read(fd, &c, 1), 1);
	assert_int_equal(c, (char)(fd & 0x7f));
	ab_loop_unwatch(l, fd);
	if (++r->a == NPIPES)
		ab_loop_stop(l);
}

static void test_many_fds(void **state)
{
	struct rlimit rl;
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < 2 * NPIPES + 64) {
		rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
	ab_loop *l = new_loop();
	struct rec r = {0};
	static int p[NPIPES][2];
	for (int i = 0; i < NPIPES; i++) {
		make_pipe(p[i]);
		assert_int_equal(ab_loop_watch(l, p[i][0], AB_EV_READ, many_cb, &r), 0);
	}
	for (int i = NPIPES - 1; i >= 0; i--) {
		char c = (char)(p[i][0] & 0x7f);
		assert_int_equal(write(p[i][1], &c, 1), 1);
	}
	uint64_t g = ab_loop_timer(l, GUARD_MS, guard_cb, NULL);
	assert_int_equal(ab_loop_run(l), 0);
	ab_loop_timer_cancel(l, g);
	assert_int_equal(r.a, NPIPES);
	for (int i = 0; i < NPIPES; i++) {
		close(p[i][0]);
		close(p[i][1]);
	}
	ab_loop_free(l);
}

/* ---- stop ---- */

static void test_stop_and_rerun(void **state)
{
	ab_loop *l = new_loop();
	struct rec r = {0};
	for (int round = 0; round < 3; round++) {
		uint64_t t0 = ab_now_ms();
		ab_loop_timer(l, 10, stop_cb, NULL);
		uint64_t later = ab_loop_timer(l, 20, tag_timer_cb, &r);
		assert_int_equal(ab_loop_run(l), 0);
		assert_true(ab_now_ms() - t0 < 1000);
		ab_loop_timer_cancel(l, later);
	}
	assert_int_equal(r.calls, 0);
	ab_loop_stop(NULL);
	ab_loop_free(NULL);
	ab_loop_free(l);
}

/* ---- bad input ---- */

static void test_bad_args(void **state)
{
	ab_loop *l = new_loop();
	struct rec r = {0};
	int p[2];
	make_pipe(p);
	static const struct {
		int fd;
		unsigned ev;
		int want;
	} cases[] = {
		{-1, AB_EV_READ, -EINVAL},
		{1 << 20, AB_EV_READ, -EMFILE},
		{0x7fffffff, AB_EV_READ, -EMFILE},
		{0, AB_EV_HUP, -EINVAL},
		{0, 0x100, -EINVAL},
	};
	for (size_t i = 0; i < AB_ARRAY_SIZE(cases); i++)
		assert_int_equal(ab_loop_watch(l, cases[i].fd, cases[i].ev, count_cb, &r),
				 cases[i].want);
	assert_int_equal(ab_loop_watch(l, p[0], AB_EV_READ, NULL, &r), -EINVAL);
	assert_int_equal(ab_loop_modify(l, p[0], AB_EV_READ), -ENOENT);
	assert_int_equal(ab_loop_modify(l, -3, AB_EV_READ), -EINVAL);
	assert_int_equal(ab_loop_modify(l, 999999, AB_EV_READ), -ENOENT);
	ab_loop_unwatch(l, p[0]);
	ab_loop_unwatch(l, -1);
	ab_loop_unwatch(l, 1 << 22);
	assert_int_equal(ab_loop_timer(l, 1, NULL, NULL), 0);
	assert_int_equal(ab_loop_timer(NULL, 1, tag_timer_cb, NULL), 0);
	/* epoll cannot watch a regular file: EPERM, and the slot stays free */
	FILE *f = tmpfile();
	assert_non_null(f);
	assert_int_equal(ab_loop_watch(l, fileno(f), AB_EV_READ, count_cb, &r), -EPERM);
	assert_int_equal(ab_loop_modify(l, fileno(f), AB_EV_READ), -ENOENT);
	fclose(f);
	/* a closed fd number, then reused: the new file is watched */
	int fd = p[0];
	assert_int_equal(ab_loop_watch(l, fd, AB_EV_READ, count_cb, &r), 0);
	close(p[0]);
	close(p[1]);
	make_pipe(p);
	assert_int_equal(p[0], fd);
	assert_int_equal(write(p[1], "x", 1), 1);
	assert_int_equal(ab_loop_watch(l, fd, AB_EV_READ, read_stop_cb, &r), 0);
	run_for(l, GUARD_MS - 100);
	assert_int_equal(r.calls, 1);
	ab_loop_unwatch(l, fd);
	close(p[0]);
	close(p[1]);
	ab_loop_free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pipe_readable),
		cmocka_unit_test(test_write_ready),
		cmocka_unit_test(test_hup_reported),
		cmocka_unit_test(test_replace_watch),
		cmocka_unit_test(test_modify_pause_resume),
		cmocka_unit_test(test_unwatch_self_in_cb),
		cmocka_unit_test(test_unwatch_other_in_cb),
		cmocka_unit_test(test_timers_order_and_cancel),
		cmocka_unit_test(test_timer_cancel_in_cb),
		cmocka_unit_test(test_zero_timer_no_starvation),
		cmocka_unit_test(test_many_fds),
		cmocka_unit_test(test_stop_and_rerun),
		cmocka_unit_test(test_bad_args),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
