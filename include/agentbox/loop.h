/* SPDX-License-Identifier: MIT */
/*
 * A tiny epoll event loop (fd callbacks + one-shot timers), in the spirit of
 * redis's ae.  Protocol-free.  Runs in the parent only.
 */
#ifndef AGENTBOX_LOOP_H
#define AGENTBOX_LOOP_H

#include <stdint.h>

#include "agentbox/common.h"

#define AB_EV_READ 1u
#define AB_EV_WRITE 2u
#define AB_EV_HUP 4u /* reported, never requested */
#define AB_EV_ERR 8u /* reported, never requested */

typedef struct ab_loop ab_loop;
typedef void (*ab_fd_cb)(ab_loop *l, int fd, unsigned events, void *data);
typedef void (*ab_timer_cb)(ab_loop *l, uint64_t id, void *data);

int ab_loop_new(ab_loop **out, ab_err *err);
void ab_loop_free(ab_loop *l);

/* Watch fd for `events` (AB_EV_READ|AB_EV_WRITE); replaces a previous watch. */
int ab_loop_watch(ab_loop *l, int fd, unsigned events, ab_fd_cb cb, void *data);
/* Change the event mask of an existing watch. */
int ab_loop_modify(ab_loop *l, int fd, unsigned events);
void ab_loop_unwatch(ab_loop *l, int fd);

/* One-shot timer after `ms` milliseconds; returns an id > 0. */
uint64_t ab_loop_timer(ab_loop *l, uint64_t ms, ab_timer_cb cb, void *data);
void ab_loop_timer_cancel(ab_loop *l, uint64_t id);

/* Run until ab_loop_stop().  Returns 0, or -errno if epoll_wait fails. */
int ab_loop_run(ab_loop *l);
void ab_loop_stop(ab_loop *l);

/* Monotonic milliseconds. */
uint64_t ab_now_ms(void);

#endif
