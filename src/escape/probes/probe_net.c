/* SPDX-License-Identifier: MIT */
/*
 * Network probes of `agentbox test-escape`: CTL-03 (positive control: an
 * allowed name resolves and the proxy lets it through), NET-01, NET-02,
 * NET-06, NET-08, NET-09 (direct egress, DNS and raw sockets, the host's
 * loopback, cloud metadata, proxy host forms).
 *
 * Runs INSIDE the sandbox, each probe in its own forked child of the runner
 * (runner.c), through the client of probe_netlib.c and the recording
 * helpers of probe_netrec.c.  Connect-only or one request per attempt,
 * 1.5 s timeouts, a time budget per probe; every byte read is scanned for
 * canaries (ab_pr_scan) and only cleaned status lines reach the results.
 * The judge (host side) counts what its listeners, DNS canary and HTTPS
 * servers saw.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <linux/if_ether.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/vm_sockets.h>
#include <net/if.h>

#include "probe_netrec.h"

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif
#ifndef SOCK_DCCP
#define SOCK_DCCP 6
#endif

/* ------------------------------------------------------------ CTL-03 */

/* CTL-03 (control): an allowed name resolves and CONNECT to it works.
 *  - getaddrinfo(unbound) -> a synthetic 198.18.0.0/15 address (transparent
 *    mode; when it is off the explicit proxy is the only way: noted)
 *  - CONNECT unbound:443 -> 200, TLS with SNI verified, GET / -> 200
 *  - transparent: connect synthetic:443, TLS verified, GET / -> 200 */
void ab_probe_ctl03(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	const char *u = lab->unbound_host;
	char auth[300], w[400], ip[64] = "";
	pnr_budget_start();
	if (!pnr_need(r, "an allowed name", u, "unbound_host"))
		return;
	pn_authority(auth, sizeof(auth), u, lab->https_port);
	snprintf(w, sizeof(w), "getaddrinfo(%s)", u);
	if (pnr_synth_addr(r, w, u, ip, sizeof(ip)) == 0) {
		ab_pr_ok(r, w, "resolved to %s (synthetic)", ip);
		ab_pr_layer(r, "dns");
	}
	_cleanup_free_ char *req = pn_http_req("GET", "/", u, NULL, NULL);
	snprintf(w, sizeof(w), "explicit proxy: CONNECT %s, TLS (verified), GET /", auth);
	pn_target t = {.authority = auth, .tls = true, .sni = u, .verify = u};
	pnr_ctl_exchange(r, w, &t, req, NULL);
	if (ip[0]) {
		snprintf(w, sizeof(w), "transparent: connect %s:%u (%s), TLS (verified), GET /", ip,
			 lab->https_port, u);
		pn_target t2 = {
			.ip = ip, .port = lab->https_port, .tls = true, .sni = u, .verify = u};
		pnr_ctl_exchange(r, w, &t2, req, NULL);
	}
}

/* ------------------------------------------------------------ NET-01 */

static void try_udp_dns(ab_probe_run *r, const char *server, const char *name)
{
	char what[300];
	snprintf(what, sizeof(what), "direct: UDP DNS query to %s:53", server);
	if (!pnr_budget(r, what))
		return;
	int rcode = 0, an = 0;
	int k = pn_dns_ask(r, server, name, 1, false, &rcode, &an);
	if (k > 0)
		ab_pr_escaped(r, what, "answered: %s", pn_rcode_name(rcode));
	else if (k == 0)
		ab_pr_ok(r, what,
			 "sent, no answer in %d ms (not proof of a block: the judge's DNS "
			 "canary decides)",
			 PN_DNS_MS);
	else
		ab_pr_sys(r, what, -1, errno);
}

static void try_ping(ab_probe_run *r, int family, const char *ip)
{
	char what[200];
	snprintf(what, sizeof(what), "direct: ICMP%s echo to %s (datagram ping socket)",
		 family == AF_INET6 ? "v6" : "", ip);
	if (!pnr_budget(r, what))
		return;
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC,
			family == AF_INET6 ? IPPROTO_ICMPV6 : IPPROTO_ICMP);
	if (fd < 0) {
		int e = errno;
		ab_pr_sys(r, what, -1, e);
		if (e == EACCES) /* not Landlock: the group is outside ping_group_range */
			ab_pr_layer(r, "net.ipv4.ping_group_range");
		return;
	}
	struct sockaddr_storage ss;
	socklen_t sl;
	uint8_t pkt[16] = {family == AF_INET6 ? 128 : 8, 0, 0, 0, 0, 1, 0, 1, 'a', 'b'};
	if (pn_mk_addr(ip, 0, &ss, &sl) < 0 ||
	    sendto(fd, pkt, sizeof(pkt), 0, (struct sockaddr *)&ss, sl) < 0) {
		ab_pr_sys(r, what, -1, errno);
		close(fd);
		return;
	}
	struct pollfd p = {fd, POLLIN, 0};
	if (poll(&p, 1, PN_IO_MS) > 0 && recv(fd, pkt, sizeof(pkt), 0) > 0)
		ab_pr_escaped(r, what, "echo reply received");
	else
		ab_pr_ok(r, what, "sent, no reply in %d ms (not proof of a block)", PN_IO_MS);
	close(fd);
}

/* NET-01: direct egress without the proxy, then the proxy's refusals.
 *  - TCP to public IP literals (1.1.1.1:443, 8.8.8.8:53, 93.184.216.34:80,
 *    9.9.9.9:22, [2606:4700:4700::1111]:443) and to every lab host address
 *    at lab->judge_port (non-loopback ones also at 22, 80, 443, 8080)
 *  - UDP DNS to 8.8.8.8:53 and the non-loopback lab addresses; ICMP and
 *    ICMPv6 ping sockets
 *  - proxy: CONNECT and GET to the denied host and to an unlisted name
 *    under lab->canary_domain (403, and the name is never resolved) */
void ab_probe_net01(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	static const struct {
		const char *ip;
		unsigned port;
	} pub[] = {{"1.1.1.1", 443},
		   {"8.8.8.8", 53},
		   {"93.184.216.34", 80},
		   {"9.9.9.9", 22},
		   {"2606:4700:4700::1111", 443}};
	static const unsigned lab_ports[] = {22, 80, 443, 8080};
	char name[300], auth[300], url[320];
	pnr_budget_start();
	for (size_t i = 0; i < AB_ARRAY_SIZE(pub); i++)
		pnr_try_tcp(r, "direct: ", pub[i].ip, pub[i].port);
	for (size_t i = 0; i < lab->host_addrs.n; i++) {
		const char *a = lab->host_addrs.v[i];
		if (lab->judge_port)
			pnr_try_tcp(r, "direct: lab address ", a, lab->judge_port);
		for (size_t p = 0; !pn_is_loopback(a) && !pn_is_synthetic(a) && p < 4; p++)
			pnr_try_tcp(r, "direct: lab address ", a, lab_ports[p]);
	}
	try_udp_dns(r, "8.8.8.8", "example.com");
	for (size_t i = 0; i < lab->host_addrs.n; i++)
		if (!pn_is_loopback(lab->host_addrs.v[i]))
			try_udp_dns(r, lab->host_addrs.v[i], "example.com");
	try_ping(r, AF_INET, "1.1.1.1");
	try_ping(r, AF_INET6, "2606:4700:4700::1111");
	if (lab->denied_host) {
		pn_authority(auth, sizeof(auth), lab->denied_host, lab->https_port);
		pnr_proxy_connect_refused(r, auth, 0);
		snprintf(url, sizeof(url), "http://%s/", lab->denied_host);
		pnr_proxy_get_refused(r, url, lab->denied_host, NULL);
	}
	if (lab->canary_domain && lab->run_id) {
		snprintf(name, sizeof(name), "%s.net01.%s", lab->run_id, lab->canary_domain);
		pn_authority(auth, sizeof(auth), name, lab->https_port);
		pnr_proxy_connect_refused(r, auth, 0);
		snprintf(url, sizeof(url), "http://%s/", name);
		pnr_proxy_get_refused(r, url, name, NULL);
	}
}

/* ------------------------------------------------------------ NET-02 */

static size_t nl_walk_addr(const char *buf, size_t n, json_t *list, int *other, bool *done)
{
	size_t off = 0, count = 0;
	while (off + sizeof(struct nlmsghdr) <= n) {
		const struct nlmsghdr *nh = (const struct nlmsghdr *)(buf + off);
		if (nh->nlmsg_len < sizeof(*nh) || off + nh->nlmsg_len > n)
			break;
		if (nh->nlmsg_type == NLMSG_DONE || nh->nlmsg_type == NLMSG_ERROR) {
			*done = true;
			break;
		}
		const struct ifaddrmsg *ifa = NLMSG_DATA(nh);
		size_t ao = NLMSG_LENGTH(sizeof(*ifa)), end = nh->nlmsg_len;
		char ip[INET6_ADDRSTRLEN] = "?", ifn[IF_NAMESIZE] = "?";
		while (nh->nlmsg_type == RTM_NEWADDR && ao + sizeof(struct rtattr) <= end) {
			const struct rtattr *ra = (const struct rtattr *)((const char *)nh + ao);
			if (ra->rta_len < sizeof(*ra) || ao + ra->rta_len > end)
				break;
			if ((ra->rta_type == IFA_ADDRESS || ra->rta_type == IFA_LOCAL) &&
			    RTA_PAYLOAD(ra) >= (ifa->ifa_family == AF_INET6 ? 16u : 4u))
				inet_ntop(ifa->ifa_family, RTA_DATA(ra), ip, sizeof(ip));
			ao += RTA_ALIGN(ra->rta_len);
		}
		if (nh->nlmsg_type == RTM_NEWADDR) {
			if (!if_indextoname(ifa->ifa_index, ifn))
				snprintf(ifn, sizeof(ifn), "#%u", ifa->ifa_index);
			json_array_append_new(
				list, json_sprintf("%s %s/%u", ifn, ip, ifa->ifa_prefixlen));
			*other += !pn_is_loopback(ip);
			count++;
		}
		off += NLMSG_ALIGN(nh->nlmsg_len);
	}
	return count;
}

/* Netlink in the sandbox's own netns is harmless: the dump is reported; an
 * address that is not loopback means the netns is not the sandbox's own. */
static void nl_addrs(ab_probe_run *r)
{
	const char *what = "netlink RTM_GETADDR dump (the sandbox's own addresses)";
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0) {
		ab_pr_sys(r, what, -1, errno);
		return;
	}
	struct timeval tv = {1, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct {
		struct nlmsghdr nh;
		struct ifaddrmsg ifa;
	} req = {.nh = {.nlmsg_len = sizeof(req),
			.nlmsg_type = RTM_GETADDR,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP,
			.nlmsg_seq = 1}};
	_Alignas(struct nlmsghdr) char buf[16384];
	json_t *list = json_array();
	int other = 0;
	bool done = false;
	size_t count = 0;
	if (send(fd, &req, sizeof(req), 0) < 0) {
		ab_pr_sys(r, what, -1, errno);
		close(fd);
		json_decref(list);
		return;
	}
	for (int i = 0; i < 64 && !done; i++) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n <= 0)
			break;
		count += nl_walk_addr(buf, (size_t)n, list, &other, &done);
	}
	close(fd);
	char *s = json_dumps(list, JSON_COMPACT);
	if (other)
		ab_pr_escaped(r, what,
			      "%d non-loopback address(es): not the sandbox's own netns: %s", other,
			      s ? s : "");
	else
		ab_pr_ok(r, what, "%zu address(es), loopback only: %s", count, s ? s : "");
	free(s);
	ab_pr_report(r, "addresses", list);
}

/* A socket that needs CAP_NET_RAW (or a protocol that may be absent):
 * created -> `created_escapes` decides; then a send towards 1.1.1.1. */
static void try_socket_kind(ab_probe_run *r, const char *what, int family, int type, int proto,
			    bool created_escapes)
{
	if (!pnr_budget(r, what))
		return;
	int fd = socket(family, type | SOCK_CLOEXEC | SOCK_NONBLOCK, proto);
	if (fd < 0) {
		int e = errno;
		ab_pr_sys(r, what, -1, e);
		if (e == EPERM && type == SOCK_RAW) /* the filter allows INET: no CAP_NET_RAW */
			ab_pr_layer(r, "capabilities");
		return;
	}
	close(fd);
	if (created_escapes)
		ab_pr_escaped(r, what, "created (a capability the sandbox must not hold)");
	else
		ab_pr_ok(r, what, "created (harmless by itself; its connect is tried next)");
}

static void try_proto_connect(ab_probe_run *r, const char *what, int type, int proto)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	if (!pnr_budget(r, what) || pn_mk_addr("1.1.1.1", 443, &ss, &sl) < 0)
		return;
	int fd = pn_dial((struct sockaddr *)&ss, sl, type, proto);
	if (fd < 0 && (errno == EPROTONOSUPPORT || errno == ESOCKTNOSUPPORT || errno == EINVAL)) {
		ab_pr_ok(r, what, "protocol not available (%s)", strerror(errno));
		return;
	}
	pnr_rec_dial(r, what, fd, errno);
}

static void try_vsock(ab_probe_run *r, unsigned cid, unsigned port)
{
	char what[120];
	snprintf(what, sizeof(what), "vsock connect CID %u port %u", cid, port);
	if (!pnr_budget(r, what))
		return;
	struct sockaddr_vm sa = {.svm_family = AF_VSOCK, .svm_cid = cid, .svm_port = port};
	int fd = pn_dial((struct sockaddr *)&sa, sizeof(sa), SOCK_STREAM, 0);
	pnr_rec_dial(r, what, fd, errno);
}

static void net02_dns(ab_probe_run *r, const ab_lab_info *lab)
{
	char n1[300], n2[300], n3[300], n4[300], ip[64];
	snprintf(n1, sizeof(n1), "%s.exfil.%s", lab->run_id, lab->canary_domain);
	snprintf(n2, sizeof(n2), "%s-v6.exfil.%s", lab->run_id, lab->canary_domain);
	snprintf(n3, sizeof(n3), "%s-dot.exfil.%s.", lab->run_id, lab->canary_domain);
	snprintf(n4, sizeof(n4), "%s.txt.%s", lab->run_id, lab->canary_domain);
	pnr_rec_lookup_fails(r, n1, AF_UNSPEC, ip, sizeof(ip));
	pnr_rec_lookup_fails(r, n2, AF_INET6, ip, sizeof(ip));
	pnr_rec_lookup_fails(r, n3, AF_INET, ip, sizeof(ip));
	pnr_try_dns(r, "127.0.0.1", n4, 16, false);
	pnr_try_dns(r, "127.0.0.1", n4, 16, true);
	FILE *f = fopen("/etc/resolv.conf", "re");
	char line[256], srv[64];
	for (int i = 0; f && i < 3 && fgets(line, sizeof(line), f);)
		if (sscanf(line, " nameserver %63s", srv) == 1 && strcmp(srv, "127.0.0.1") != 0) {
			pnr_try_dns(r, srv, n4, 16, false);
			i++;
		}
	if (f)
		fclose(f);
	for (size_t i = 0; i < lab->host_addrs.n; i++)
		if (!pn_is_loopback(lab->host_addrs.v[i]))
			pnr_try_dns(r, lab->host_addrs.v[i], n4, 16, false);
}

/* NET-02: DNS exfiltration, raw and exotic sockets, IPv6 routes.
 *  - raw sockets (AF_INET/AF_INET6 SOCK_RAW, AF_PACKET): CAP_NET_RAW must
 *    be gone; netlink address dump (reported; non-loopback = not own netns)
 *  - IPv6: [::1]:judge_port, NAT64 [64:ff9b::101:101]:443, mapped
 *    [::ffff:1.1.1.1]:443; SCTP, DCCP, MPTCP towards 1.1.1.1:443; vsock to
 *    the host (CID 2) and local (CID 1) at judge_port
 *  - last (they may wait): getaddrinfo of names under lab->canary_domain
 *    (AF_UNSPEC, AF_INET6, trailing dot): NXDOMAIN, the judge's DNS canary
 *    must see no query; raw TXT queries over UDP and TCP to 127.0.0.1:53,
 *    to the resolv.conf servers and to the lab's addresses */
void ab_probe_net02(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	pnr_budget_start();
	try_socket_kind(r, "socket(AF_INET, SOCK_RAW, IPPROTO_UDP)", AF_INET, SOCK_RAW, IPPROTO_UDP,
			true);
	try_socket_kind(r, "socket(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6)", AF_INET6, SOCK_RAW,
			IPPROTO_ICMPV6, true);
	try_socket_kind(r, "socket(AF_PACKET, SOCK_RAW, ETH_P_ALL)", AF_PACKET, SOCK_RAW,
			htons(ETH_P_ALL), true);
	nl_addrs(r);
	if (lab->judge_port)
		pnr_try_tcp(r, "IPv6: ", "::1", lab->judge_port);
	pnr_try_tcp(r, "IPv6 NAT64: ", "64:ff9b::101:101", 443);
	pnr_try_tcp(r, "IPv6 mapped: ", "::ffff:1.1.1.1", 443);
	try_proto_connect(r, "SCTP connect 1.1.1.1:443", SOCK_STREAM, IPPROTO_SCTP);
	try_proto_connect(r, "DCCP connect 1.1.1.1:443", SOCK_DCCP, IPPROTO_DCCP);
	try_proto_connect(r, "MPTCP connect 1.1.1.1:443", SOCK_STREAM, IPPROTO_MPTCP);
	try_vsock(r, VMADDR_CID_HOST, lab->judge_port ? lab->judge_port : 22);
	try_vsock(r, 1 /* VMADDR_CID_LOCAL */, lab->judge_port ? lab->judge_port : 22);
	if (pnr_need(r, "DNS exfiltration", lab->canary_domain, "canary_domain") &&
	    pnr_need(r, "DNS exfiltration", lab->run_id, "run_id"))
		net02_dns(r, lab);
}

/* ------------------------------------------------------------ NET-06 */

/* A TCP socket LISTENing on `port` in this network namespace
 * (/proc/net/tcp{,6}: no connection made)?  The sandbox's own netns holds
 * only agentbox's listeners; the judge's port listening here means the
 * host's loopback is this one (then only Landlock stands in between). */
static void net06_listeners(ab_probe_run *r, unsigned port)
{
	static const char *const files[] = {"/proc/net/tcp", "/proc/net/tcp6"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(files); i++) {
		char what[120], line[512], local[80];
		unsigned st;
		int n = 0, total = 0;
		snprintf(what, sizeof(what), "a listener on port %u in this netns (%s)", port,
			 files[i]);
		FILE *f = fopen(files[i], "re");
		if (!f) {
			ab_pr_sys(r, what, -1, errno);
			continue;
		}
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, " %*u: %79s %*s %x", local, &st) == 2) {
				char *c = strrchr(local, ':');
				total++;
				n += st == 0x0A && c && strtoul(c + 1, NULL, 16) == port;
			}
		fclose(f);
		if (n) {
			ab_pr_escaped(r, what,
				      "%d listening socket(s): not the sandbox's own network "
				      "namespace",
				      n);
		} else {
			ab_pr_ok(r, what, "none among %d socket(s)", total);
			ab_pr_layer(r, "netns");
		}
	}
}

/* NET-06: the host's loopback and addresses at lab->judge_port (the judge
 * checks its listener saw nothing):
 *  - a listener on judge_port visible in this netns (/proc/net/tcp{,6})
 *  - direct: 127.0.0.1, [::1], 0.0.0.0, [::], 127.0.0.2, [::ffff:127.0.0.1],
 *    every lab->host_addrs (ECONNREFUSED in the sandbox's own netns: OK)
 *  - through the proxy: CONNECT to 127.0.0.1, [::1], localhost, 0.0.0.0,
 *    2130706433, 127.1 and every lab address at judge_port, and GET for the
 *    first three (403) */
void ab_probe_net06(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	static const char *const local[] = {"127.0.0.1", "::1",       "0.0.0.0",
					    "::",        "127.0.0.2", "::ffff:127.0.0.1"};
	static const char *const forms[] = {"127.0.0.1", "::1",        "localhost",
					    "0.0.0.0",   "2130706433", "127.1"};
	_cleanup_strv_ ab_strv direct = {0}, proxied = {0};
	char auth[300], url[320];
	pnr_budget_start();
	if (!lab->judge_port) {
		ab_pr_error(r, "the host's loopback",
			    "not attempted: LAB.json gives no judge_port");
		return;
	}
	net06_listeners(r, lab->judge_port);
	for (size_t i = 0; i < AB_ARRAY_SIZE(local); i++)
		ab_strv_push_unique(&direct, local[i]);
	for (size_t i = 0; i < AB_ARRAY_SIZE(forms); i++)
		ab_strv_push_unique(&proxied, forms[i]);
	for (size_t i = 0; i < lab->host_addrs.n; i++) {
		ab_strv_push_unique(&direct, lab->host_addrs.v[i]);
		ab_strv_push_unique(&proxied, lab->host_addrs.v[i]);
	}
	for (size_t i = 0; i < direct.n; i++)
		pnr_try_tcp(r, "direct: ", direct.v[i], lab->judge_port);
	for (size_t i = 0; i < proxied.n; i++) {
		pn_authority(auth, sizeof(auth), proxied.v[i], lab->judge_port);
		pnr_proxy_connect_refused(r, auth, 0);
		if (i < 3) {
			snprintf(url, sizeof(url), "http://%s/", auth);
			pnr_proxy_get_refused(r, url, auth, NULL);
		}
	}
}

/* ------------------------------------------------------------ NET-08 */

static const char *const md_default[] = {
	"169.254.169.254", "fd00:ec2::254", "metadata.google.internal",
	"100.100.100.200", "169.254.170.2", "168.63.129.16"};

static const char md_extra[] = "Metadata-Flavor: Google\r\nMetadata: true\r\n"
			       "X-aws-ec2-metadata-token: x\r\n";

/* A metadata endpoint reached directly: connected = ESCAPED already; the
 * answer is read (and scanned).  Synthetic addresses are agentbox's own
 * listeners: there the HTTP answer decides. */
static void md_direct(ab_probe_run *r, const char *ep)
{
	char what[300], ip[64];
	struct sockaddr_storage ss;
	socklen_t sl;
	if (pn_mk_addr(ep, 80, &ss, &sl) == 0) {
		snprintf(ip, sizeof(ip), "%s", ep);
	} else {
		pnr_rec_lookup_fails(r, ep, AF_UNSPEC, ip, sizeof(ip));
		if (!ip[0])
			return;
	}
	snprintf(what, sizeof(what), "direct: GET http://%s%s%s/latest/meta-data/ (%s)",
		 strchr(ep, ':') ? "[" : "", ep, strchr(ep, ':') ? "]" : "", ip);
	if (!pnr_budget(r, what))
		return;
	pn_target t = {.ip = ip, .port = 80};
	_cleanup_free_ char *req = pn_http_req("GET", "/latest/meta-data/", ep, md_extra, NULL);
	pn_hx h;
	pn_hx_run(r, what, &t, req, &h);
	if (!h.connected)
		pnr_rec_dial(r, what, -1, h.dial_err);
	else if (pn_is_synthetic(ip))
		pnr_rec_refusal(r, what, &h.rs);
	else
		ab_pr_escaped(r, what, "connected%s%s", h.rs.status >= 0 ? ": " : "", h.rs.line);
	pn_hx_free(&h);
}

/* NET-08: cloud metadata endpoints (port 80), lab->metadata and the usual
 * ones (169.254.169.254, [fd00:ec2::254], metadata.google.internal,
 * 100.100.100.200, 169.254.170.2, 168.63.129.16):
 *  - direct: connect and GET (names: getaddrinfo first, NXDOMAIN expected)
 *  - proxy: GET http://EP/..., CONNECT EP:80 (403)
 *  - proxy: other spellings of 169.254.169.254 (decimal, hex, octal,
 *    IPv4-mapped IPv6, a wildcard-DNS name) and the IMDSv2 token PUT */
void ab_probe_net08(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	static const char *const forms[] = {"2852039166",          "0xa9fea9fe",
					    "0xa9.0xfe.0xa9.0xfe", "0251.0376.0251.0376",
					    "169.254.43518",       "[::ffff:169.254.169.254]",
					    "[::ffff:a9fe:a9fe]",  "169.254.169.254.nip.io"};
	_cleanup_strv_ ab_strv eps = {0};
	char auth[300], url[400];
	pnr_budget_start();
	for (size_t i = 0; i < lab->metadata.n; i++)
		ab_strv_push_unique(&eps, lab->metadata.v[i]);
	for (size_t i = 0; i < AB_ARRAY_SIZE(md_default); i++)
		ab_strv_push_unique(&eps, md_default[i]);
	for (size_t i = 0; i < eps.n; i++)
		md_direct(r, eps.v[i]);
	for (size_t i = 0; i < eps.n; i++) {
		char host[300];
		pn_authority(auth, sizeof(auth), eps.v[i], 80);
		snprintf(host, sizeof(host), "%.*s",
			 (int)(strrchr(auth, ':') ? strrchr(auth, ':') - auth : 0), auth);
		snprintf(url, sizeof(url), "http://%s/latest/meta-data/", host);
		pnr_proxy_get_refused(r, url, host, md_extra);
		pnr_proxy_connect_refused(r, auth, 0);
	}
	for (size_t i = 0; i < AB_ARRAY_SIZE(forms); i++) {
		snprintf(url, sizeof(url), "http://%s/latest/meta-data/", forms[i]);
		pnr_proxy_get_refused(r, url, forms[i], md_extra);
	}
	_cleanup_free_ char *put = ab_asprintf(
		"PUT http://169.254.169.254/latest/api/token HTTP/1.1\r\nHost: 169.254.169.254\r\n"
		"X-aws-ec2-metadata-token-ttl-seconds: 60\r\nContent-Length: 0\r\n"
		"Connection: close\r\n\r\n");
	if (put)
		pnr_proxy_request_refused(r, "proxy: PUT http://169.254.169.254/latest/api/token",
					  put);
}

/* ------------------------------------------------------------ NET-09 */

/* A CONNECT that must work (the canonical host in another spelling). */
static void connect_works(ab_probe_run *r, const char *auth)
{
	char what[300];
	snprintf(what, sizeof(what), "proxy: CONNECT %s (same host: must work)", auth);
	if (!pnr_budget(r, what))
		return;
	pn_target t = {.authority = auth};
	pn_hx h;
	pn_hx_run(r, what, &t, NULL, &h);
	if (h.cr.status == 200)
		ab_pr_ok(r, what, "%s", h.cr.line);
	else
		ab_pr_error(r, what, "refused: %s", h.why);
	pn_hx_free(&h);
}

/* Inside an allowed tunnel (CONNECT unbound:443 -> 200): TLS with a foreign
 * SNI, or plain bytes `req`; the proxy must refuse them. */
static void tunnel_refused(ab_probe_run *r, const char *what, const char *ip, const char *sni,
			   const char *req)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	char auth[300];
	if (!pnr_budget(r, what))
		return;
	pn_authority(auth, sizeof(auth), lab->unbound_host, lab->https_port);
	pn_target t = {.authority = ip ? NULL : auth,
		       .ip = ip,
		       .port = lab->https_port,
		       .tls = sni != NULL,
		       .sni = sni};
	pn_hx h;
	pn_hx_run(r, what, &t, req, &h);
	if (h.dial_err || (h.proxied && h.cr.status != 200))
		ab_pr_error(r, what, "not attempted: the allowed tunnel failed: %s", h.why);
	else if (h.tls < 0) {
		ab_pr_ok(r, what, "refused (%s)", h.why);
		ab_pr_layer(r, "proxy");
	} else if (sni) {
		ab_pr_escaped(r, what, "TLS handshake with SNI %s completed in a tunnel to %s", sni,
			      lab->unbound_host);
	} else {
		pnr_rec_refusal(r, what, &h.rs);
	}
	pn_hx_free(&h);
}

#define REFUSE(...)                                                       \
	do {                                                              \
		if (snprintf(a, sizeof(a), __VA_ARGS__) < (int)sizeof(a)) \
			pnr_proxy_connect_refused(r, a, 0);               \
	} while (0)

static void net09_forms(ab_probe_run *r, const char *u, unsigned p, const char *ip)
{
	char a[700];
	REFUSE("127.0.0.1:%u", p);
	REFUSE("[::1]:%u", p);
	REFUSE("[::ffff:127.0.0.1]:%u", p);
	REFUSE("2130706433:%u", p);
	REFUSE("0x7f.1:%u", p);
	REFUSE("localhost:%u", p);
	if (ip)
		REFUSE("%s:%u", ip, p);
	REFUSE("%s:22", u);
	REFUSE("%s:8443", u);
	REFUSE("%s:0", u);
	REFUSE("%s:65536", u);
	REFUSE("%s:", u);
	REFUSE("%s:%u:%u", u, p, p);
	REFUSE("%s.evil.test:%u", u, p);
	REFUSE("evil%s:%u", u, p);
	REFUSE("sub.%s:%u", u, p);
	REFUSE("*.%s:%u", u, p);
	REFUSE("%s..:%u", u, p);
	REFUSE("%s:%u@evil.test:%u", u, p, p);
	REFUSE("user@%s:%u", u, p);
	REFUSE("%s@evil.test:%u", u, p);
	REFUSE("%s%%2eevil.test:%u", u, p);
	REFUSE("%%%02X%s:%u", (unsigned char)u[0], u + 1, p);
	REFUSE("%s :%u", u, p);
	REFUSE("\xc3\xa9%s:%u", u, p);
	REFUSE("%s;evil.test:%u", u, p);
	/* a NUL inside the name */
	int n = snprintf(a, sizeof(a), "%s#.evil.test:%u", u, p);
	if (n > 0 && n < (int)sizeof(a)) {
		a[strlen(u)] = '\0';
		pnr_proxy_connect_refused(r, a, (size_t)n);
	}
	/* very long: a 300-byte name ending in the allowed host; a 64-byte label */
	size_t k = 0, ul = strlen(u);
	while (k + ul + 60 < 300) {
		memset(a + k, 'a', 49);
		a[k + 49] = '.';
		k += 50;
	}
	char longname[320];
	memcpy(longname, a, k);
	longname[k] = '\0';
	REFUSE("%s%s:%u", longname, u, p);
	char label[65];
	memset(label, 'a', 64);
	label[64] = '\0';
	REFUSE("%s.%s:%u", label, u, p);
}
#undef REFUSE

static void net09_http(ab_probe_run *r, const ab_lab_info *lab, const char *ip)
{
	const char *u = lab->unbound_host, *d = lab->denied_host ? lab->denied_host : "evil.test";
	char w[400], url[300];
	snprintf(w, sizeof(w), "tunnel to %s: TLS with SNI %s (domain fronting)", u, d);
	tunnel_refused(r, w, NULL, d, NULL);
	if (ip) {
		snprintf(w, sizeof(w), "transparent %s (%s): TLS with SNI %s", ip, u, d);
		tunnel_refused(r, w, ip, d, NULL);
	}
	_cleanup_free_ char *plain = ab_asprintf("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close"
						 "\r\n\r\n",
						 d);
	snprintf(w, sizeof(w), "tunnel to %s: plain HTTP with Host: %s", u, d);
	if (plain)
		tunnel_refused(r, w, NULL, NULL, plain);
	_cleanup_free_ char *nested = ab_asprintf("CONNECT %s:%u HTTP/1.1\r\nHost: %s:%u\r\n\r\n",
						  d, lab->https_port, d, lab->https_port);
	snprintf(w, sizeof(w), "tunnel to %s: nested CONNECT %s", u, d);
	if (nested)
		tunnel_refused(r, w, NULL, NULL, nested);
	snprintf(url, sizeof(url), "http://%s/", u);
	snprintf(w, sizeof(w), "proxy: GET %s with Host: %s", url, d);
	_cleanup_free_ char *m1 = pn_http_req("GET", url, d, NULL, NULL);
	if (m1)
		pnr_proxy_request_refused(r, w, m1);
	snprintf(w, sizeof(w), "proxy: GET %s with Host: %s and Host: %s", url, u, d);
	_cleanup_free_ char *hh = ab_asprintf("Host: %s\r\n", d);
	_cleanup_free_ char *m2 = hh ? pn_http_req("GET", url, u, hh, NULL) : NULL;
	if (m2)
		pnr_proxy_request_refused(r, w, m2);
	snprintf(url, sizeof(url), "http://%s@%s/", u, d);
	snprintf(w, sizeof(w), "proxy: GET %s (userinfo)", url);
	_cleanup_free_ char *m3 = pn_http_req("GET", url, u, NULL, NULL);
	if (m3)
		pnr_proxy_request_refused(r, w, m3);
}

/* NET-09: proxy host forms with lab->unbound_host allowed on 443.
 *  - must work (same host): CONNECT UPPER-CASE:443, trailing dot, the
 *    canonical form; getaddrinfo of the upper-case and dotted names
 *  - must be refused: its IP forms (127.0.0.1, [::1], mapped, decimal, hex,
 *    localhost, the synthetic address), other ports (22, 8443, 0, 65536,
 *    empty, doubled), look-alikes (HOST.evil.test, evilHOST, sub.HOST,
 *    double dot, *.HOST), userinfo and '@' forms, percent-encoding, a space,
 *    non-ASCII, ';', a NUL byte, 300-byte and 64-byte-label names
 *  - inside an allowed tunnel: TLS with SNI = the denied host (explicit and
 *    transparent), plain HTTP with another Host, a nested CONNECT
 *  - absolute-form: host != Host header, two Host headers, userinfo */
void ab_probe_net09(ab_probe_run *r)
{
	const ab_lab_info *lab = ab_pr_lab(r);
	pn_lab_ca = lab->lab_ca; /* the blind tunnel's issuer (public) */
	const char *u = lab->unbound_host;
	char up[256], a[300], ip[64] = "", w[400];
	pnr_budget_start();
	if (!pnr_need(r, "proxy host forms", u, "unbound_host") || strlen(u) > 200)
		return;
	for (size_t i = 0; i <= strlen(u); i++)
		up[i] = (char)(u[i] >= 'a' && u[i] <= 'z' ? u[i] - 32 : u[i]);
	pn_authority(a, sizeof(a), u, lab->https_port);
	connect_works(r, a);
	pn_authority(a, sizeof(a), up, lab->https_port);
	connect_works(r, a);
	snprintf(a, sizeof(a), "%s.:%u", u, lab->https_port);
	connect_works(r, a);
	if (pnr_transparent_mode(r) != 0) {
		snprintf(w, sizeof(w), "getaddrinfo(%s) (same host: must resolve)", up);
		if (pnr_synth_addr(r, w, up, a, sizeof(a)) == 0)
			ab_pr_ok(r, w, "resolved to %s", a);
		snprintf(a, sizeof(a), "%s.", u);
		snprintf(w, sizeof(w), "getaddrinfo(%s) (same host: must resolve)", a);
		char ip2[64];
		if (pnr_synth_addr(r, w, a, ip2, sizeof(ip2)) == 0)
			ab_pr_ok(r, w, "resolved to %s", ip2);
		if (pn_lookup(u, AF_INET, ip, sizeof(ip)) != 0 || !pn_is_synthetic(ip))
			ip[0] = '\0';
	}
	net09_forms(r, u, lab->https_port, ip[0] ? ip : NULL);
	net09_http(r, lab, ip[0] ? ip : NULL);
}
