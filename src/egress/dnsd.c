/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's DNS responder (parent; UDP and TCP 127.0.0.1:53 inside the
 * sandbox's network namespace) and the synthetic address table of
 * transparent mode.  It answers A queries for names the policy could allow
 * on some port with an address of 198.18.0.0/15 (one per name, stable for
 * the run), other types of such names with "no data" (so clients fall back
 * to IPv4), and NXDOMAIN for everything else.  It never forwards a query:
 * no DNS leaves the sandbox.  Every answer is logged.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentbox/dns.h"
#include "proxy_int.h"

#define SYNTH_BASE 0xC6120000u /* 198.18.0.0 */
#define SYNTH_MASK 0xFFFE0000u /* /15 */
#define HASH_SIZE 4096u
#define DNS_TCP_MAX 64 /* concurrent TCP DNS clients */
#define DNS_TCP_TIMEOUT_MS 10000
#define DNS_TTL 60

typedef struct synth_ent {
	struct synth_ent *next; /* hash chain */
	uint32_t idx;
	char name[];
} synth_ent;

typedef struct dns_tcp {
	struct px_dns *d;
	int fd;
	px_buf in, out;
	uint64_t deadline;
} dns_tcp;

typedef struct px_dns {
	ab_proxy *px;
	synth_ent *hash[HASH_SIZE];
	synth_ent **byidx; /* index -> entry */
	size_t n, cap;
	int udp_fd;
	int tcp_fd;
	px_pause tcp_pause;
	dns_tcp *tcp[DNS_TCP_MAX];
	uint64_t timer;
} px_dns;

static uint32_t fnv1a(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* The index of name, created on first use; -ENOSPC when the table is full,
 * -ENOMEM. */
static long synth_index(px_dns *d, const char *name)
{
	uint32_t h = fnv1a(name) % HASH_SIZE;
	for (synth_ent *e = d->hash[h]; e; e = e->next)
		if (strcmp(e->name, name) == 0)
			return (long)e->idx;
	if (d->n >= AB_PROXY_MAX_SYNTH)
		return -ENOSPC;
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;
		synth_ent **n = realloc(d->byidx, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		d->byidx = n;
		d->cap = cap;
	}
	size_t len = strlen(name);
	synth_ent *e = malloc(sizeof(*e) + len + 1);
	if (!e)
		return -ENOMEM;
	memcpy(e->name, name, len + 1);
	e->idx = (uint32_t)d->n;
	e->next = d->hash[h];
	d->hash[h] = e;
	d->byidx[d->n] = e;
	return (long)d->n++;
}

bool px_is_synth(uint32_t addr)
{
	return (ntohl(addr) & SYNTH_MASK) == SYNTH_BASE;
}

const char *px_synth_name(ab_proxy *px, uint32_t addr)
{
	px_dns *d = px->dns;
	if (!d || !px_is_synth(addr))
		return NULL;
	uint32_t idx = (ntohl(addr) & ~SYNTH_MASK);
	if (idx == 0 || idx - 1 >= d->n)
		return NULL;
	return d->byidx[idx - 1]->name;
}

/* Could the policy allow this name on some port?  Deny rules without a port
 * (all ports) refuse the name outright. */
static bool name_listed(const ab_netpolicy *p, const char *name)
{
	const ab_netrule *lists[2] = {p->allow, p->priv};
	size_t counts[2] = {p->n_allow, p->n_priv};
	for (size_t i = 0; i < p->n_deny; i++) {
		const ab_netrule *r = &p->deny[i];
		if (r->port || r->kind != AB_HOST_NAME)
			continue;
		if (ab_netpolicy_check(&(ab_netpolicy){.deny = (ab_netrule *)r, .n_deny = 1}, name,
				       443, NULL) == AB_NET_DENY)
			return false;
	}
	for (int l = 0; l < 2; l++) {
		for (size_t i = 0; i < counts[l]; i++) {
			const ab_netrule *r = &lists[l][i];
			if (r->kind != AB_HOST_NAME)
				continue;
			ab_netpolicy one = {.deny = p->deny, .n_deny = p->n_deny};
			if (l == 0) {
				one.allow = (ab_netrule *)r;
				one.n_allow = 1;
			} else {
				one.priv = (ab_netrule *)r;
				one.n_priv = 1;
			}
			/* no port: 443 and 80 (a deny rule may take one of them only) */
			unsigned ports[2] = {r->port ? r->port : 443, r->port ? r->port : 80};
			for (int k = 0; k < 2; k++)
				if (ab_netpolicy_check(&one, name, ports[k], NULL) == AB_NET_ALLOW)
					return true;
		}
	}
	return false;
}

static void log_dns(px_dns *d, const ab_dns_query *q, const char *proto, const char *decision,
		    int rcode, const uint8_t *addr)
{
	json_t *ev = json_object();
	json_object_set_new(ev, "event", json_string("dns"));
	json_object_set_new(ev, "proto", json_string(proto));
	json_object_set_new(ev, "name", json_string(q->name[0] ? q->name : "."));
	json_object_set_new(ev, "qtype", json_string(ab_dns_type_name(q->qtype)));
	json_object_set_new(ev, "decision", json_string(decision));
	json_object_set_new(ev, "rcode", json_string(ab_dns_rcode_name(rcode)));
	if (addr) {
		char a[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, addr, a, sizeof(a));
		json_object_set_new(ev, "answer", json_string(a));
	}
	ab_audit_emit(d->px->audit, ev);
}

/* One query -> one response in out; returns its length, 0 for no answer. */
static int answer(px_dns *d, const uint8_t *msg, size_t len, uint8_t *out, size_t cap,
		  const char *proto)
{
	ab_dns_query q;
	int r = ab_dns_parse_query(msg, len, &q);
	if (r < 0) {
		if (q.rcode_hint < 0)
			return 0;
		log_dns(d, &q, proto, "deny", q.rcode_hint, NULL);
		r = ab_dns_build_rcode(&q, msg, q.rcode_hint, out, cap);
		return r > 0 ? r : 0;
	}
	int rcode = AB_DNS_NOERROR;
	uint8_t addr[4];
	bool listed = q.qclass == AB_DNS_CLASS_IN || q.qclass == AB_DNS_CLASS_ANY;
	if (!listed) {
		rcode = AB_DNS_REFUSED;
	} else if (!q.name[0] || !name_listed(&d->px->pol, q.name)) {
		rcode = AB_DNS_NXDOMAIN;
		ab_audit_count_dns_denied(d->px->audit, q.name);
	} else if (q.qtype == AB_DNS_TYPE_A || q.qtype == AB_DNS_TYPE_ANY) {
		long idx = synth_index(d, q.name);
		if (idx < 0) {
			rcode = AB_DNS_SERVFAIL;
		} else {
			uint32_t a = htonl(SYNTH_BASE + (uint32_t)idx + 1);
			memcpy(addr, &a, 4);
			log_dns(d, &q, proto, "allow", AB_DNS_NOERROR, addr);
			r = ab_dns_build_answer_a(&q, msg, addr, DNS_TTL, out, cap);
			return r > 0 ? r : 0;
		}
	}
	log_dns(d, &q, proto, rcode == AB_DNS_NOERROR ? "allow" : "deny", rcode, NULL);
	r = ab_dns_build_rcode(&q, msg, rcode, out, cap);
	return r > 0 ? r : 0;
}

static void on_udp(ab_loop *l, int fd, unsigned ev, void *data)
{
	px_dns *d = data;
	for (int i = 0; i < 64; i++) {
		uint8_t msg[AB_DNS_MAX_MSG + 1], out[AB_DNS_MAX_RESPONSE + 64];
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		ssize_t n =
			recvfrom(fd, msg, sizeof(msg), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
		if (n < 0)
			return;
		int m = answer(d, msg, (size_t)n, out, sizeof(out), "udp");
		if (m > 0)
			(void)sendto(fd, out, (size_t)m, MSG_DONTWAIT | MSG_NOSIGNAL,
				     (struct sockaddr *)&from, fl);
	}
}

static void tcp_close(dns_tcp *t)
{
	px_dns *d = t->d;
	for (size_t i = 0; i < DNS_TCP_MAX; i++)
		if (d->tcp[i] == t)
			d->tcp[i] = NULL;
	ab_loop_unwatch(d->px->loop, t->fd);
	close(t->fd);
	px_buf_free(&t->in);
	px_buf_free(&t->out);
	free(t);
}

static void on_tcp_client(ab_loop *l, int fd, unsigned ev, void *data)
{
	dns_tcp *t = data;
	if (ev & AB_EV_WRITE) {
		ssize_t n = px_buf_write(&t->out, fd);
		if (n < 0 && n != -EAGAIN) {
			tcp_close(t);
			return;
		}
	}
	if (ev & (AB_EV_READ | AB_EV_HUP | AB_EV_ERR)) {
		ssize_t n = px_buf_read(&t->in, fd, 4096);
		if (n == 0 || (n < 0 && n != -EAGAIN)) {
			tcp_close(t);
			return;
		}
		for (;;) {
			size_t off, len;
			int f = ab_dns_tcp_frame((const uint8_t *)t->in.p, t->in.len, &off, &len);
			if (f < 0) {
				tcp_close(t);
				return;
			}
			if (f == 0)
				break;
			uint8_t out[AB_DNS_MAX_RESPONSE + 64 + 2];
			int m = answer(t->d, (const uint8_t *)t->in.p + off, len, out + 2,
				       sizeof(out) - 2, "tcp");
			px_buf_consume(&t->in, off + len);
			/* a whole query earns more time; dripped bytes do not */
			t->deadline = ab_now_ms() + DNS_TCP_TIMEOUT_MS;
			if (m > 0) {
				out[0] = (uint8_t)(m >> 8);
				out[1] = (uint8_t)m;
				if (px_buf_append(&t->out, out, (size_t)m + 2) < 0 ||
				    t->out.len > 64 * 1024) {
					tcp_close(t);
					return;
				}
			}
		}
	}
	ab_loop_modify(l, fd, AB_EV_READ | (t->out.len ? AB_EV_WRITE : 0));
}

static void on_tcp_accept(ab_loop *l, int fd, unsigned ev, void *data)
{
	px_dns *d = data;
	for (int i = 0; i < 16; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			px_accept_failed(&d->tcp_pause, errno);
			return;
		}
		size_t slot = DNS_TCP_MAX;
		for (size_t j = 0; j < DNS_TCP_MAX && slot == DNS_TCP_MAX; j++)
			if (!d->tcp[j])
				slot = j;
		dns_tcp *t = slot < DNS_TCP_MAX ? calloc(1, sizeof(*t)) : NULL;
		if (!t) {
			close(cfd);
			continue;
		}
		*t = (dns_tcp){.d = d, .fd = cfd, .deadline = ab_now_ms() + DNS_TCP_TIMEOUT_MS};
		if (ab_loop_watch(l, cfd, AB_EV_READ, on_tcp_client, t) < 0) {
			close(cfd);
			free(t);
			continue;
		}
		d->tcp[slot] = t;
	}
}

static void on_timer(ab_loop *l, uint64_t id, void *data)
{
	px_dns *d = data;
	uint64_t now = ab_now_ms();
	for (size_t i = 0; i < DNS_TCP_MAX; i++)
		if (d->tcp[i] && now >= d->tcp[i]->deadline)
			tcp_close(d->tcp[i]);
	d->timer = ab_loop_timer(l, 1000, on_timer, d);
}

int px_dns_init(ab_proxy *px)
{
	px_dns *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->px = px;
	d->udp_fd = d->tcp_fd = -1;
	px->dns = d;
	return 0;
}

int px_dns_add_udp(ab_proxy *px, int fd)
{
	px_dns *d = px->dns;
	if (!d || d->udp_fd >= 0 || ab_loop_watch(px->loop, fd, AB_EV_READ, on_udp, d) < 0) {
		close(fd);
		return -EINVAL;
	}
	d->udp_fd = fd;
	return 0;
}

int px_dns_add_tcp(ab_proxy *px, int fd)
{
	px_dns *d = px->dns;
	if (!d || d->tcp_fd >= 0 || ab_loop_watch(px->loop, fd, AB_EV_READ, on_tcp_accept, d) < 0) {
		close(fd);
		return -EINVAL;
	}
	d->tcp_fd = fd;
	d->tcp_pause = (px_pause){.px = px, .fd = fd};
	d->timer = ab_loop_timer(px->loop, 1000, on_timer, d);
	return 0;
}

void px_dns_free(ab_proxy *px)
{
	px_dns *d = px->dns;
	if (!d)
		return;
	for (size_t i = 0; i < DNS_TCP_MAX; i++)
		if (d->tcp[i])
			tcp_close(d->tcp[i]);
	if (d->udp_fd >= 0) {
		ab_loop_unwatch(px->loop, d->udp_fd);
		close(d->udp_fd);
	}
	if (d->tcp_fd >= 0) {
		px_pause_cancel(&d->tcp_pause);
		ab_loop_unwatch(px->loop, d->tcp_fd);
		close(d->tcp_fd);
	}
	if (d->timer)
		ab_loop_timer_cancel(px->loop, d->timer);
	for (size_t i = 0; i < d->n; i++)
		free(d->byidx[i]);
	free(d->byidx);
	free(d);
	px->dns = NULL;
}
