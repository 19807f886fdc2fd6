/* SPDX-License-Identifier: MIT */
/*
 * probe_netrec.h: how the network and credential probes (probe_net.c,
 * probe_crd.c) make an attempt and record its verdict, over the client of
 * probe_netlib.h.  Private to src/escape/probes/.  Inside the sandbox, in a
 * probe's forked child.
 *
 * Every pnr_try_* and pnr_proxy_* call first checks the probe's time
 * budget: once it is spent the attempt is recorded as not made.
 */
#ifndef AGENTBOX_ESCAPE_PROBE_NETREC_H
#define AGENTBOX_ESCAPE_PROBE_NETREC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentbox/escape.h"
#include "probe_netlib.h"

/* Start the probe's clock and bound glibc's resolver (this child only). */
void pnr_budget_start(void);
/* Whether there is time left for another attempt (else records why not). */
bool pnr_budget(ab_probe_run *r, const char *what);
/* Whether LAB.json gave `field` (v); else records `what` as not attempted. */
bool pnr_need(ab_probe_run *r, const char *what, const char *v, const char *field);
/* The lab secret's placeholder from the environment, usable as a header
 * value; NULL after recording why not. */
const char *pnr_placeholder(ab_probe_run *r, const char *what);

/* A direct connection that must not work (fd from pn_dial*, err its errno):
 * connected is ESCAPED, a timeout OK but no proof. */
void pnr_rec_dial(ab_probe_run *r, const char *what, int fd, int err);
/* pnr_rec_dial of a TCP connect to ip:port; `prefix` starts its label. */
void pnr_try_tcp(ab_probe_run *r, const char *prefix, const char *ip, unsigned port);

/* An answer that must be a refusal: 4xx or closed without one is OK (layer
 * proxy), any other status ESCAPED, no answer in time ERROR. */
void pnr_rec_refusal(ab_probe_run *r, const char *what, const pn_resp *a);
/* CONNECT auth (alen bytes, 0: strlen) through the proxy: must be refused. */
void pnr_proxy_connect_refused(ab_probe_run *r, const char *auth, size_t alen);
/* An absolute-form request `req` sent to the proxy port: must be refused. */
void pnr_proxy_request_refused(ab_probe_run *r, const char *what, const char *req);
/* GET url (Host: host, `extra` header lines) through the proxy: refused. */
void pnr_proxy_get_refused(ab_probe_run *r, const char *url, const char *host, const char *extra);

/* A raw DNS query (type 1 A, 16 TXT, 28 AAAA) that must get no answer. */
void pnr_try_dns(ab_probe_run *r, const char *server, const char *name, uint16_t type, bool tcp);
/* getaddrinfo of a name that must not resolve: NXDOMAIN is OK (layer dns).
 * ip gets the address when it did resolve, "" otherwise. */
void pnr_rec_lookup_fails(ab_probe_run *r, const char *name, int family, char *ip, size_t n);
/* 1: the transparent path is on (DNS answers on 127.0.0.1:53), 0: off,
 * -1: unknown.  Asked once per probe process. */
int pnr_transparent_mode(ab_probe_run *r);
/* The synthetic address an allowed name resolves to (0), or -1 after
 * recording why the transparent attempt `what` cannot be made. */
int pnr_synth_addr(ab_probe_run *r, const char *what, const char *name, char *ip, size_t n);

/* A control exchange: HTTP 200 needed (and, with `want`, the lab server's
 * verdict on the secret it saw). */
void pnr_ctl_exchange(ab_probe_run *r, const char *what, const pn_target *t, const char *req,
		      const char *want);

#endif
