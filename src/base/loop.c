/* SPDX-License-Identifier: MIT */
/*
 * A tiny epoll event loop: fd -> callback, one-shot timers, stop.
 * Runs in the parent only (pty relay, signalfd, pidfd, later the proxy).
 *
 * Design:
 *  - Watches live in an array of structs indexed by fd (O(1) lookup, grown on
 *    demand up to AB_LOOP_MAX_FD).  No per-watch allocation, so nothing is ever
 *    freed during dispatch.  Each watch() stamps the slot with a fresh
 *    generation; the epoll cookie is (generation << 32 | fd).  During dispatch
 *    an event is delivered only if its slot is still active with the same
 *    generation, so a callback may unwatch (or unwatch, close and re-watch a
 *    new fd with the same number) its own or any other fd without a stale
 *    event reaching the wrong callback.
 *  - Reported READ/WRITE bits are masked with the *current* interest, so an
 *    ab_loop_modify() done by an earlier callback in the same batch is obeyed.
 *  - A watch whose mask becomes 0 is removed from the epoll set (but stays
 *    registered): epoll always reports HUP/ERR, and a paused pty master whose
 *    slave closed would otherwise spin the loop.
 *  - Timers: a binary min-heap ordered by (deadline, id), so timers with the
 *    same deadline fire in creation order.  Cancel is a linear search (there
 *    are few timers).  Timers created while timers are being run wait for the
 *    next iteration, so a 0 ms timer re-arming itself cannot starve fds.
 *  - Level-triggered epoll throughout.
 *  - Rule for users: unwatch an fd *before* closing it (an fd whose file is
 *    still open elsewhere stays in the epoll set after close).
 */
#include "agentbox/loop.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#define AB_LOOP_MAX_FD (1 << 20)
#define AB_LOOP_MAX_EVENTS 256

struct watch {
	ab_fd_cb cb;
	void *data;
	unsigned events; /* requested AB_EV_READ|AB_EV_WRITE */
	uint32_t gen;    /* generation of the current watch, 0 = never */
	bool active;
	bool in_epoll;
};

struct timer {
	uint64_t when;
	uint64_t id;
	ab_timer_cb cb;
	void *data;
};

struct ab_loop {
	int epfd;
	struct watch *w;
	size_t wcap;
	struct timer *t;
	size_t tn, tcap;
	uint64_t next_timer_id;
	uint32_t next_gen;
	bool stop;
};

uint64_t ab_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int ab_loop_new(ab_loop **out, ab_err *err)
{
	ab_loop *l = calloc(1, sizeof(*l));
	if (!l)
		return ab_fail(err, ENOMEM, "event loop");
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		int e = errno;
		free(l);
		return ab_fail(err, e, "epoll_create1");
	}
	l->next_timer_id = 1;
	l->next_gen = 1;
	*out = l;
	return 0;
}

void ab_loop_free(ab_loop *l)
{
	if (!l)
		return;
	if (l->epfd >= 0)
		close(l->epfd);
	free(l->w);
	free(l->t);
	free(l);
}

/* ---- fd watches ---- */

static int grow_watches(ab_loop *l, int fd)
{
	if ((size_t)fd < l->wcap)
		return 0;
	if (fd >= AB_LOOP_MAX_FD)
		return -EMFILE;
	size_t ncap = l->wcap ? l->wcap : 64;
	while (ncap <= (size_t)fd)
		ncap *= 2;
	if (ncap > AB_LOOP_MAX_FD)
		ncap = AB_LOOP_MAX_FD;
	struct watch *nw = realloc(l->w, ncap * sizeof(*nw));
	if (!nw)
		return -ENOMEM;
	memset(nw + l->wcap, 0, (ncap - l->wcap) * sizeof(*nw));
	l->w = nw;
	l->wcap = ncap;
	return 0;
}

static uint32_t to_epoll(unsigned events)
{
	uint32_t e = 0;
	if (events & AB_EV_READ)
		e |= EPOLLIN | EPOLLRDHUP;
	if (events & AB_EV_WRITE)
		e |= EPOLLOUT;
	return e;
}

static unsigned from_epoll(uint32_t e)
{
	unsigned r = 0;
	if (e & (EPOLLIN | EPOLLPRI | EPOLLRDHUP))
		r |= AB_EV_READ;
	if (e & EPOLLOUT)
		r |= AB_EV_WRITE;
	if (e & (EPOLLHUP | EPOLLRDHUP))
		r |= AB_EV_HUP;
	if (e & EPOLLERR)
		r |= AB_EV_ERR;
	return r;
}

/* Bring the epoll registration of slot fd in line with w->events. */
static int sync_epoll(ab_loop *l, int fd, struct watch *w)
{
	if (w->events == 0) {
		if (w->in_epoll)
			(void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
		w->in_epoll = false;
		return 0;
	}
	struct epoll_event ev = {
		.events = to_epoll(w->events),
		.data.u64 = ((uint64_t)w->gen << 32) | (uint32_t)fd,
	};
	int op = w->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	int r = epoll_ctl(l->epfd, op, fd, &ev);
	/* MOD/ENOENT: the fd was closed (auto-removed) and the number reused;
	 * ADD/EEXIST: registered behind our back.  Switch operation once. */
	if (r < 0 &&
	    ((op == EPOLL_CTL_MOD && errno == ENOENT) || (op == EPOLL_CTL_ADD && errno == EEXIST)))
		r = epoll_ctl(l->epfd, op == EPOLL_CTL_MOD ? EPOLL_CTL_ADD : EPOLL_CTL_MOD, fd,
			      &ev);
	if (r < 0) {
		int e = errno;
		if (w->in_epoll)
			(void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
		w->in_epoll = false;
		return -e;
	}
	w->in_epoll = true;
	return 0;
}

int ab_loop_watch(ab_loop *l, int fd, unsigned events, ab_fd_cb cb, void *data)
{
	if (!l || fd < 0 || !cb || (events & ~(AB_EV_READ | AB_EV_WRITE)))
		return -EINVAL;
	int r = grow_watches(l, fd);
	if (r < 0)
		return r;
	struct watch *w = &l->w[fd];
	uint32_t gen = l->next_gen++;
	if (gen == 0) /* skip 0 on wrap-around */
		gen = l->next_gen++;
	if (!w->active)
		w->in_epoll = false;
	*w = (struct watch){.cb = cb,
			    .data = data,
			    .events = events,
			    .gen = gen,
			    .active = true,
			    .in_epoll = w->in_epoll};
	r = sync_epoll(l, fd, w);
	if (r < 0) {
		*w = (struct watch){.gen = gen};
		return r;
	}
	return 0;
}

int ab_loop_modify(ab_loop *l, int fd, unsigned events)
{
	if (!l || fd < 0 || (events & ~(AB_EV_READ | AB_EV_WRITE)))
		return -EINVAL;
	if ((size_t)fd >= l->wcap || !l->w[fd].active)
		return -ENOENT;
	struct watch *w = &l->w[fd];
	if (w->events == events && (w->in_epoll == (events != 0)))
		return 0; /* no syscall for a no-op (the relay calls this a lot) */
	w->events = events;
	return sync_epoll(l, fd, w);
}

void ab_loop_unwatch(ab_loop *l, int fd)
{
	if (!l || fd < 0 || (size_t)fd >= l->wcap || !l->w[fd].active)
		return;
	struct watch *w = &l->w[fd];
	if (w->in_epoll)
		(void)epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
	*w = (struct watch){.gen = w->gen};
}

/* ---- timers: binary min-heap on (when, id) ---- */

static bool timer_less(const struct timer *a, const struct timer *b)
{
	return a->when < b->when || (a->when == b->when && a->id < b->id);
}

static void heap_swap(ab_loop *l, size_t i, size_t j)
{
	struct timer tmp = l->t[i];
	l->t[i] = l->t[j];
	l->t[j] = tmp;
}

static void sift_up(ab_loop *l, size_t i)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!timer_less(&l->t[i], &l->t[p]))
			break;
		heap_swap(l, i, p);
		i = p;
	}
}

static void sift_down(ab_loop *l, size_t i)
{
	for (;;) {
		size_t c = 2 * i + 1, m = i;
		if (c < l->tn && timer_less(&l->t[c], &l->t[m]))
			m = c;
		if (c + 1 < l->tn && timer_less(&l->t[c + 1], &l->t[m]))
			m = c + 1;
		if (m == i)
			return;
		heap_swap(l, i, m);
		i = m;
	}
}

static void heap_remove(ab_loop *l, size_t i)
{
	l->tn--;
	if (i == l->tn)
		return;
	l->t[i] = l->t[l->tn];
	sift_up(l, i);
	sift_down(l, i);
}

uint64_t ab_loop_timer(ab_loop *l, uint64_t ms, ab_timer_cb cb, void *data)
{
	if (!l || !cb)
		return 0;
	if (l->tn == l->tcap) {
		size_t ncap = l->tcap ? l->tcap * 2 : 16;
		struct timer *nt = realloc(l->t, ncap * sizeof(*nt));
		if (!nt)
			return 0; /* 0 = no timer (out of memory) */
		l->t = nt;
		l->tcap = ncap;
	}
	uint64_t now = ab_now_ms();
	uint64_t when = ms > UINT64_MAX - now ? UINT64_MAX : now + ms;
	uint64_t id = l->next_timer_id++;
	l->t[l->tn] = (struct timer){.when = when, .id = id, .cb = cb, .data = data};
	sift_up(l, l->tn++);
	return id;
}

void ab_loop_timer_cancel(ab_loop *l, uint64_t id)
{
	if (!l || id == 0)
		return;
	for (size_t i = 0; i < l->tn; i++) {
		if (l->t[i].id == id) {
			heap_remove(l, i);
			return;
		}
	}
}

static int next_timeout(ab_loop *l)
{
	if (l->tn == 0)
		return -1;
	uint64_t now = ab_now_ms();
	if (l->t[0].when <= now)
		return 0;
	uint64_t d = l->t[0].when - now;
	return d > INT_MAX ? INT_MAX : (int)d;
}

static void run_timers(ab_loop *l)
{
	uint64_t now = ab_now_ms();
	uint64_t limit = l->next_timer_id; /* timers created from here wait */
	while (l->tn > 0 && !l->stop) {
		struct timer t = l->t[0];
		if (t.when > now || t.id >= limit)
			break;
		heap_remove(l, 0);
		t.cb(l, t.id, t.data);
	}
}

/* ---- dispatch ---- */

static void dispatch(ab_loop *l, const struct epoll_event *ev)
{
	int fd = (int)(uint32_t)ev->data.u64;
	uint32_t gen = (uint32_t)(ev->data.u64 >> 32);
	if (fd < 0 || (size_t)fd >= l->wcap)
		return;
	const struct watch *w = &l->w[fd];
	if (!w->active || w->gen != gen || !w->in_epoll)
		return; /* unwatched, replaced or paused since epoll_wait */
	unsigned got = from_epoll(ev->events);
	got &= w->events | AB_EV_HUP | AB_EV_ERR;
	if (!got)
		return;
	/* copy out: the callback may grow (realloc) the watch array */
	ab_fd_cb cb = w->cb;
	void *data = w->data;
	cb(l, fd, got, data);
}

int ab_loop_run(ab_loop *l)
{
	struct epoll_event evs[AB_LOOP_MAX_EVENTS];
	if (!l)
		return -EINVAL;
	l->stop = false;
	while (!l->stop) {
		int n = epoll_wait(l->epfd, evs, AB_LOOP_MAX_EVENTS, next_timeout(l));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (int i = 0; i < n && !l->stop; i++)
			dispatch(l, &evs[i]);
		if (!l->stop)
			run_timers(l);
	}
	return 0;
}

void ab_loop_stop(ab_loop *l)
{
	if (l)
		l->stop = true;
}
