/* SPDX-License-Identifier: MIT */
/*
 * The control socket of a running sandbox (parent side: address and listen;
 * the `allow` client).  The serving side is in the proxy (src/proxy.c), which
 * owns the policy.  See include/agentbox/control.h.
 */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agentbox/control.h"

void ab_control_addr(uid_t uid, const char *workspace, struct sockaddr_un *sa, socklen_t *len)
{
	uint64_t h = 1469598103934665603ull;
	for (const char *p = workspace; *p; p++)
		h = (h ^ (unsigned char)*p) * 1099511628211ull;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	/* abstract: sun_path[0] == '\0' */
	int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "agentbox-ctl-%u-%016llx",
			 (unsigned)uid, (unsigned long long)h);
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int ab_control_listen(const char *workspace, int *out, ab_err *err)
{
	struct sockaddr_un sa;
	socklen_t len;
	ab_control_addr(getuid(), workspace, &sa, &len);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return ab_fail(err, errno, "control socket");
	if (bind(fd, (struct sockaddr *)&sa, len) < 0)
		return ab_fail(err, errno, "control socket: bind");
	if (listen(fd, 16) < 0)
		return ab_fail(err, errno, "control socket: listen");
	*out = TAKE_FD(fd);
	return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int ab_control_allow(const char *workspace, char *const *rules, int nrules, ab_err *err)
{
	struct sockaddr_un sa;
	socklen_t len;
	ab_control_addr(getuid(), workspace, &sa, &len);
	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ab_fail(err, errno, "socket");
	if (connect(fd, (struct sockaddr *)&sa, len) < 0) {
		ab_fail(err, errno == ECONNREFUSED || errno == ENOENT ? 0 : errno,
			"no agentbox is running in the workspace %s", workspace);
		ab_err_hint(err, "run this in the sandbox's workspace, or name it with -w DIR");
		return AB_EXIT_FAIL;
	}
	/* abstract names are anyone's to take: only our own agentbox (or root's)
	 * is told which hosts to allow */
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 ||
	    (cr.uid != getuid() && cr.uid != 0))
		return ab_fail(err, EPERM, "the control socket of %s belongs to another user",
			       workspace);
	size_t total = 0;
	for (int i = 0; i < nrules; i++) {
		if (strchr(rules[i], '\n') || strlen(rules[i]) > 300)
			return ab_fail(err, EINVAL, "allow: invalid rule");
		total += strlen(rules[i]) + 7;
		if (total > AB_CONTROL_MAX_REQUEST)
			return ab_fail(err, E2BIG, "allow: too many rules at once");
		if (write_all(fd, "allow ", 6) < 0 || write_all(fd, rules[i], strlen(rules[i])) < 0 ||
		    write_all(fd, "\n", 1) < 0)
			return ab_fail(err, errno, "allow: send");
	}
	shutdown(fd, SHUT_WR);
	char buf[8192];
	size_t got = 0;
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 10000) <= 0)
			return ab_fail(err, ETIMEDOUT, "allow: no answer from agentbox");
		ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got == sizeof(buf) - 1)
			break;
	}
	buf[got] = '\0';
	int rc = 0, oks = 0;
	for (char *line = buf, *nl; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			break;
		*nl = '\0';
		if (strncmp(line, "ok ", 3) == 0) {
			printf("agentbox: allowed %s\n", line + 3);
			oks++;
		} else {
			fprintf(stderr, "agentbox: %s\n", line);
			rc = 1;
		}
	}
	if (oks + (rc ? 1 : 0) == 0)
		return ab_fail(err, EPROTO, "allow: no answer from agentbox");
	return rc;
}
