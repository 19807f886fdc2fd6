/* SPDX-License-Identifier: MIT */
/*
 * The serving side of `agentbox allow` in the egress proxy (parent): the
 * control socket's connections, from the caller's uid only, each a few
 * "allow RULE" lines answered once the client has shut its side; the rules
 * join the allow list and the audit log.  The socket itself and the client
 * are control.c's; the protocol is in include/agentbox/control.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentbox/control.h"
#include "agentbox/sync.h"
#include "proxy_int.h"

typedef struct ctl_conn {
	struct ctl_conn *prev, *next;
	ab_proxy *px;
	int fd;
	pid_t pid;
	px_buf in;
} ctl_conn;

static void ctl_close(ctl_conn *k)
{
	ab_loop_unwatch(k->px->loop, k->fd);
	close(k->fd);
	px_buf_free(&k->in);
	if (k->prev)
		k->prev->next = k->next;
	else
		k->px->ctls = k->next;
	if (k->next)
		k->next->prev = k->prev;
	free(k);
}

static void ctl_line(ctl_conn *k, char *line, px_buf *ans)
{
	ab_proxy *px = k->px;
	char msg[sizeof(((ab_err *)0)->msg) + 16];
	if (strncmp(line, "allow ", 6) != 0) {
		snprintf(msg, sizeof(msg), "error unknown request\n");
		px_buf_append(ans, msg, strlen(msg));
		return;
	}
	ab_err e = {0};
	ab_netrule r;
	if (ab_netrule_parse(line + 6, &r, &e) < 0 ||
	    px_allow_rule(px, line + 6, "control", k->pid, r.text, &e) < 0) {
		snprintf(msg, sizeof(msg), "error %s\n", e.msg);
		px_buf_append(ans, msg, strlen(msg));
		return;
	}
	char note[96] = "";
	if (px->transparent && r.port && r.port != 80 && r.port != 443) {
		bool have = false;
		for (size_t i = 0; i < px->nlst; i++)
			have |= px->lst[i].kind == AB_LISTEN_TRANSPARENT &&
				px->lst[i].port == r.port;
		if (!have)
			snprintf(note, sizeof(note), " (port %u through the proxy variables only)",
				 (unsigned)r.port);
	}
	snprintf(msg, sizeof(msg), "ok %s%s\n", r.text, note);
	px_buf_append(ans, msg, strlen(msg));
}

int px_allow_rule(ab_proxy *px, const char *rule, const char *by, pid_t by_pid,
		  char text[AB_NETRULE_TEXT], ab_err *err)
{
	ab_netrule r;
	if (ab_netrule_parse(rule, &r, err) < 0 ||
	    ab_netpolicy_add(&px->pol, AB_NETLIST_ALLOW, rule, err) < 0)
		return -EINVAL;
	memcpy(text, r.text, AB_NETRULE_TEXT);
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("policy"));
	json_object_set_new(ev, "action", json_string("allow"));
	json_object_set_new(ev, "rule", json_string(r.text));
	if (strcmp(by, "control") == 0)
		json_object_set_new(ev, "by_pid", json_integer(by_pid));
	else
		json_object_set_new(ev, "by", json_string(by));
	ab_audit_emit(px->audit, ev);
	return 0;
}

static void on_ctl(ab_loop *l, int fd, unsigned ev, void *data)
{
	ctl_conn *k = data;
	ssize_t n = px_buf_read(&k->in, fd, 4096);
	if (n == -EAGAIN)
		return;
	if (n > 0 && k->in.len < AB_CONTROL_MAX_REQUEST)
		return; /* until the client's EOF */
	if (n < 0 || k->in.len >= AB_CONTROL_MAX_REQUEST) {
		ctl_close(k);
		return;
	}
	_cleanup_px_buf_ px_buf ans = {0};
	px_buf_append(&k->in, "", 1);
	for (char *line = k->in.p, *nl; line && *line; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (*line)
			ctl_line(k, line, &ans);
	}
	int fl = fcntl(fd, F_GETFL);
	(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	struct timeval tv = {1, 0};
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (ans.len)
		(void)!send(fd, ans.p, ans.len, MSG_NOSIGNAL);
	ctl_close(k);
}

static void on_ctl_accept(ab_loop *l, int fd, unsigned ev, void *data)
{
	ab_proxy *px = data;
	for (int i = 0; i < 8; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			px_accept_failed(&px->ctl_pause, errno);
			return;
		}
		struct ucred cr;
		socklen_t cl = sizeof(cr);
		/* only the user who started the sandbox may widen it (root too
		 * goes through that user: control.h) */
		if (getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != getuid()) {
			close(cfd);
			continue;
		}
		ctl_conn *k = calloc(1, sizeof(*k));
		if (!k) {
			close(cfd);
			continue;
		}
		*k = (ctl_conn){.px = px, .fd = cfd, .pid = cr.pid, .next = px->ctls};
		if (ab_loop_watch(l, cfd, AB_EV_READ, on_ctl, k) < 0) {
			close(cfd);
			free(k);
			continue;
		}
		if (px->ctls)
			px->ctls->prev = k;
		px->ctls = k;
	}
}

int ab_proxy_control(ab_proxy *px, int fd, ab_err *err)
{
	int r = ab_loop_watch(px->loop, fd, AB_EV_READ, on_ctl_accept, px);
	if (r < 0) {
		close(fd);
		return ab_fail(err, -r, "control socket");
	}
	px->ctl_fd = fd;
	px->ctl_pause = (px_pause){.px = px, .fd = fd};
	return 0;
}

void px_ctl_shutdown(ab_proxy *px)
{
	if (px->ctl_fd > 0) {
		px_pause_cancel(&px->ctl_pause);
		ab_loop_unwatch(px->loop, px->ctl_fd);
		close(px->ctl_fd);
		px->ctl_fd = -1;
	}
	while (px->ctls)
		ctl_close(px->ctls);
}
