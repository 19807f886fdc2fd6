/* SPDX-License-Identifier: MIT */
/*
 * Child side of egress (runs in the sandbox's new network namespace, before
 * capabilities are dropped): make the synthetic range local (transparent
 * mode), create the listening sockets the parent's proxy serves, and hand
 * them over the sync socket.  The sockets live in this namespace, so the
 * sandbox reaches them on its loopback; the parent serves them from the host
 * namespace, so upstream connections leave from there.  The sandbox never
 * holds these fds (close_range before exec).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentbox/netns.h"
#include "agentbox/sandbox.h"

/* ip route add|replace local DST/PREFIX dev lo table local: every address
 * of the range is then this namespace's own, and a listener on 0.0.0.0:P
 * accepts connections to any of them, getsockname() telling which. */
int ab_netns_route_local(int family, const char *dst, unsigned prefix, bool replace, ab_err *err)
{
	struct {
		struct nlmsghdr nh;
		struct rtmsg rt;
		char attrs[64];
	} req;
	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct rtmsg));
	req.nh.nlmsg_type = RTM_NEWROUTE;
	req.nh.nlmsg_flags =
		NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK | (replace ? NLM_F_REPLACE : NLM_F_EXCL);
	req.nh.nlmsg_seq = 1;
	req.rt.rtm_family = (unsigned char)family;
	req.rt.rtm_dst_len = (unsigned char)prefix;
	req.rt.rtm_table = RT_TABLE_LOCAL;
	req.rt.rtm_protocol = RTPROT_BOOT;
	req.rt.rtm_scope = RT_SCOPE_HOST;
	req.rt.rtm_type = RTN_LOCAL;
	unsigned char addr[16];
	size_t alen = family == AF_INET ? 4 : 16;
	if (inet_pton(family, dst, addr) != 1)
		return ab_fail(err, EINVAL, "local route: bad address %s", dst);
	uint32_t oif = if_nametoindex("lo");
	if (!oif)
		return ab_fail(err, errno, "local route: loopback interface");
	struct rtattr *a = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.nh.nlmsg_len));
	if (prefix > 0) {
		a->rta_type = RTA_DST;
		a->rta_len = (unsigned short)RTA_LENGTH(alen);
		memcpy(RTA_DATA(a), addr, alen);
		req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_ALIGN(a->rta_len);
		a = (struct rtattr *)((char *)&req + req.nh.nlmsg_len);
	}
	a->rta_type = RTA_OIF;
	a->rta_len = RTA_LENGTH(sizeof(oif));
	memcpy(RTA_DATA(a), &oif, sizeof(oif));
	req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_ALIGN(a->rta_len);

	_cleanup_close_ int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (s < 0)
		return ab_fail(err, errno, "local route: netlink socket");
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	if (sendto(s, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return ab_fail(err, errno, "local route: netlink send");
	char buf[512];
	ssize_t n = recv(s, buf, sizeof(buf), 0);
	if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)))
		return ab_fail(err, n < 0 ? errno : EPROTO, "local route: netlink reply");
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	if (h->nlmsg_type != NLMSG_ERROR)
		return ab_fail(err, EPROTO, "local route: netlink reply");
	const struct nlmsgerr *e = NLMSG_DATA(h);
	if (e->error)
		return ab_fail(err, -e->error, "add the local route %s/%u", dst, prefix);
	return 0;
}

static int listen_on(int type, const char *addr, uint16_t port, int *out, ab_err *err)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
	inet_pton(AF_INET, addr, &sa.sin_addr);
	_cleanup_close_ int s = socket(AF_INET, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return ab_fail(err, errno, "socket");
	int one = 1;
	if (type == SOCK_STREAM)
		(void)setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return ab_fail(err, errno, "bind %s:%u inside the sandbox", addr, (unsigned)port);
	if (type == SOCK_STREAM && listen(s, 4096) < 0)
		return ab_fail(err, errno, "listen %s:%u", addr, (unsigned)port);
	*out = TAKE_FD(s);
	return 0;
}

static int hand_over(int sync_fd, int kind, uint16_t port, int fd, ab_err *err)
{
	ab_sync_msg m = {.type = AB_SYNC_LISTENER, .value = AB_LISTENER_VALUE(kind, port)};
	int r = ab_sync_send(sync_fd, &m, fd);
	close(fd);
	return r < 0 ? ab_fail(err, -r, "hand the listener to agentbox") : 0;
}

int ab_netns_setup(const ab_plan *plan, int sync_fd, ab_err *err)
{
	const ab_egress_plan *e = &plan->egress;
	int fd, r;
	if ((r = listen_on(SOCK_STREAM, "127.0.0.1", e->proxy_port, &fd, err)) < 0 ||
	    (r = hand_over(sync_fd, AB_LISTEN_PROXY, e->proxy_port, fd, err)) < 0)
		return ab_err_prefix(err, "egress proxy");
	if (!e->transparent)
		return 0;
	if ((r = ab_netns_route_local(AF_INET, AB_SYNTH_NET, AB_SYNTH_PREFIX, false, err)) < 0 &&
	    ab_err_prefix(err, "transparent mode") < 0)
		return r;
	if ((r = listen_on(SOCK_DGRAM, "127.0.0.1", 53, &fd, err)) < 0 ||
	    (r = hand_over(sync_fd, AB_LISTEN_DNS_UDP, 53, fd, err)) < 0 ||
	    (r = listen_on(SOCK_STREAM, "127.0.0.1", 53, &fd, err)) < 0 ||
	    (r = hand_over(sync_fd, AB_LISTEN_DNS_TCP, 53, fd, err)) < 0)
		return ab_err_prefix(err, "DNS responder");
	for (size_t i = 0; i < e->nports; i++) {
		if ((r = listen_on(SOCK_STREAM, "0.0.0.0", e->ports[i], &fd, err)) < 0 ||
		    (r = hand_over(sync_fd, AB_LISTEN_TRANSPARENT, e->ports[i], fd, err)) < 0)
			return ab_err_prefix(err, "transparent mode");
	}
	return 0;
}
