/* SPDX-License-Identifier: MIT */
/*
 * run --ask, the terminal side (parent): the questions the proxy holds
 * requests for, drawn at the bottom of the user's own terminal (agentbox's
 * /dev/tty, never the sandbox's pty) while the relay is paused; the
 * answers, read from that terminal only, go back to the proxy and to the
 * audit log.  docs/ask.md.
 */
#ifndef AGENTBOX_SANDBOX_ASK_H
#define AGENTBOX_SANDBOX_ASK_H

#include <sys/types.h>

#include "agentbox/audit.h"
#include "agentbox/loop.h"
#include "agentbox/plan.h"
#include "agentbox/proxy.h"
#include "pty.h"

typedef struct ab_asker ab_asker;

/* Ask for PX's refused hosts on agentbox's controlling terminal, pausing
 * RELAY while a question is up; INIT is the sandbox's first process (whose
 * network and pid namespaces name the program that asked).  NULL when there
 * is no terminal to ask on (/dev/tty does not open): the run goes on as
 * without --ask.  All borrowed pointers outlive the asker. */
ab_asker *ab_asker_new(ab_loop *loop, ab_proxy *px, ab_pty_relay *relay, ab_audit *audit,
		       const ab_plan *plan, pid_t init);
/* Take the question off the screen, answer every pending one "closed"
 * (their requests get their 403), give the terminal back.  NULL: no-op. */
void ab_asker_free(ab_asker *a);

/* The profile's text now (*OUT NULL: no such file), at most the loader's
 * limit: 0 or -errno. */
int ab_ask_read_profile(const char *path, char **out);
/* NEW_TEXT written to FILE, unless FILE changed since OLD_TEXT (NULL: it
 * did not exist) was read (-ESTALE): a temporary file beside it, renamed
 * over it; missing directories made (0700).  0 or -errno. */
int ab_ask_write_profile(const char *file, const char *old_text, const char *new_text);

#endif
