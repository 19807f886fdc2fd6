/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's own pseudo-terminal.  The child opens a pty pair on the new
 * devpts instance inside the sandbox and sends the master to the parent; the
 * parent relays between its own terminal (raw mode) and the master, and
 * propagates window-size changes.  Nothing inside ever holds an fd on the
 * user's real terminal.
 */
#ifndef AGENTBOX_PTY_H
#define AGENTBOX_PTY_H

#include <sys/ioctl.h> /* struct winsize (glibc does not get it from termios.h) */
#include <stdbool.h>
#include <termios.h>

#include "agentbox/common.h"
#include "agentbox/loop.h"

/* Child side: open /dev/ptmx (inside), unlock, return master and slave fds
 * (both O_CLOEXEC).  Window size copied from `ws` if non-NULL. */
int ab_pty_open(int *master, int *slave, const struct winsize *ws, ab_err *err);

/* Grandchild side: make `slave` the controlling terminal of a new session and
 * dup it onto each of 0, 1, 2 whose bit is set in fd_mask (the ones that are
 * terminals outside; the others pass through untouched).  System calls only
 * (it may run in a process that shares init's memory): on failure returns
 * -errno with *what naming the step and *fd the fd concerned (-1 if none),
 * for the caller to format. */
int ab_pty_make_controlling(int slave, unsigned fd_mask, const char **what, int *fd);

typedef struct ab_pty_relay ab_pty_relay;

/* Parent side: put the outer terminal (in_fd, usually 0) in raw mode, copy its
 * size to `master`, and register relay callbacks on `loop`.  Restores the
 * terminal in ab_pty_relay_free (also call it on every exit path, and before
 * ab_loop_free).  Takes ownership of `master` on every return: it is closed by
 * ab_pty_relay_free, or before returning if start fails.  While the relay
 * runs, SIGPIPE is ignored if it was SIG_DFL (out_fd may be a pipe whose
 * reader went away); free restores it. */
int ab_pty_relay_start(ab_loop *loop, int in_fd, int out_fd, int master, ab_pty_relay **out,
		       ab_err *err);
/* The output relayed to the outer terminal loses the escape sequences that
 * reach the clipboard (src/sandbox/termfilter.c), unless PASS (the profile's
 * terminal.clipboard). */
void ab_pty_relay_pass_clipboard(ab_pty_relay *r, bool pass);
/* run --ask (src/sandbox/asker.c): while paused the relay reads neither the
 * user's keystrokes nor the pty's output (both wait in the kernel, and the
 * command blocks when its output fills the pty) and writes nothing to the
 * outer terminal.  Resuming nudges the window size so that a full-screen
 * program redraws what the question covered. */
void ab_pty_relay_pause(ab_pty_relay *r, bool pause);
/* Copy the outer window size to the master (on SIGWINCH). */
void ab_pty_relay_resize(ab_pty_relay *r);
/* Drain what the master still has (after the child exited; bounded to 1 s),
 * restore the terminal and fd flags, close the master, free.  NULL is a no-op.
 * Safe from a loop callback. */
void ab_pty_relay_free(ab_pty_relay *r);

/* Outer window size of fd, false if not a terminal. */
bool ab_pty_get_winsize(int fd, struct winsize *ws);

#endif
