/* SPDX-License-Identifier: MIT */
/* Common includes for the cmocka unit tests (no privileges needed). */
#ifndef AGENTBOX_UNIT_H
#define AGENTBOX_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef AB_SRCDIR
#define AB_SRCDIR "."
#endif

/* FN(ARG) in a forked child that first moved into a new user namespace and
 * the namespaces in FLAGS (CLONE_NEWNET, ...): its return value is the
 * child's exit status, returned here; 77 when the namespaces cannot be made
 * (user namespaces refused: the caller skips). */
static inline int unit_in_new_ns(int flags, int (*fn)(void *), void *arg)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(unshare(CLONE_NEWUSER | flags) < 0 ? 77 : fn(arg));
	int st = 0;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

#endif
