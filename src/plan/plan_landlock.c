/* SPDX-License-Identifier: MIT */
/*
 * The Landlock part of the plan (parent, pure): which features this kernel's
 * ABI lacks and whether the profile accepts that, the TCP ports the sandbox
 * may connect to, and one rule per mount the command reaches files through.
 * It reads the finished mount list and egress plan, so it is planned after both.
 */
#include <errno.h>
#include <string.h>

#include "plan_int.h"

/* A feature the ABI lacks is refused unless allow_downgrade names it; then
 * it is listed as not enforced. */
static int landlock_downgrades(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	const ab_host *h = in->host;
	const ab_profile *prof = in->profile;
	ab_strv missing = {0};
	int r = ab_landlock_downgrades(h->landlock_abi, &missing);
	if (r < 0)
		return ab_fail(err, -r, "plan");
	for (size_t i = 0; i < missing.n; i++) {
		const char *name = missing.v[i];
		if (strcmp(name, "landlock-refer") == 0)
			continue; /* ABI 1 denies cross-directory renames: stricter, not weaker */
		if (strcmp(name, "landlock-net") == 0 && prof->loopback.any)
			continue; /* nothing to restrict */
		if (ab_strv_contains(&prof->allow_downgrade, name)) {
			char *msg = ab_asprintf("%s: NOT ENFORCED on this kernel (Landlock ABI %d)",
						name, h->landlock_abi);
			if (!msg || ab_strv_push_take(&p->downgrades, msg) < 0) {
				ab_strv_free(&missing);
				return ab_fail(err, ENOMEM, "plan");
			}
			continue;
		}
		ab_fail(err, 0,
			"this kernel cannot enforce \"%s\" (Landlock ABI %d%s), which the "
			"profile requires",
			name, h->landlock_abi,
			h->landlock_abi == 0 ? ": Landlock unavailable" : "");
		ab_err_hint(err,
			    "use a newer kernel (Landlock ABI 6 needs Linux >= 6.12)%s, or add "
			    "\"%s\" to allow_downgrade in the profile to accept running without it",
			    h->landlock_abi == 0 ? " booted with lsm=...,landlock" : "", name);
		ab_strv_free(&missing);
		return -EINVAL;
	}
	ab_strv_free(&missing);
	return 0;
}

/* connect only: servers inside may listen, clients reach only the
 * listed ports (the network namespace already has nothing else) */
static int landlock_tcp_ports(ab_ll_plan *ll, const ab_plan *p, const ab_profile *prof, ab_err *err)
{
	ll->handled_net = LANDLOCK_ACCESS_NET_CONNECT_TCP;
	size_t want = prof->loopback.nports + p->egress.nports + 2;
	ll->tcp_ports = calloc(want, sizeof(*ll->tcp_ports));
	if (!ll->tcp_ports)
		return ab_fail(err, ENOMEM, "plan");
	for (size_t i = 0; i < prof->loopback.nports; i++) {
		long port = prof->loopback.ports[i];
		if (port < 1 || port > 65535) /* never truncate into another port */
			return ab_fail(err, 0, "loopback_ports: %ld is not a TCP port", port);
		ll->tcp_ports[ll->ntcp_ports++] = (uint16_t)port;
	}
	/* the way out: the explicit proxy, DNS over TCP, transparent ports */
	ll->tcp_ports[ll->ntcp_ports++] = p->egress.proxy_port;
	if (p->egress.transparent)
		ll->tcp_ports[ll->ntcp_ports++] = 53;
	for (size_t i = 0; i < p->egress.nports; i++)
		ll->tcp_ports[ll->ntcp_ports++] = p->egress.ports[i];
	return 0;
}

/* One rule per mount; a symlinked grant gets none (a rule would follow the
 * link).  Returns 0 or -errno. */
static int landlock_mount_rules(ab_ll_plan *ll, const ab_plan *p)
{
	int r = 0;
	for (size_t i = 0; !r && i < p->nmounts; i++) {
		const ab_mount *m = &p->mounts[i];
		if (m->flags & AB_MNT_F_SYMLINK)
			continue;
		switch (m->kind) {
		case AB_MNT_BIND_RO: r = ab_ll_plan_add(ll, m->dst, AB_LL_READ); break;
		case AB_MNT_BIND_RW:
		case AB_MNT_TMPFS: r = ab_ll_plan_add(ll, m->dst, AB_LL_WRITE); break;
		case AB_MNT_PROC: r = ab_ll_plan_add(ll, m->dst, AB_LL_PROC); break;
		case AB_MNT_DEV: r = ab_ll_plan_add(ll, m->dst, AB_LL_DEV); break;
		case AB_MNT_CONTENT: r = ab_ll_plan_add(ll, m->dst, AB_LL_READ); break;
		default: break;
		}
	}
	/* "/" itself is a read-only tmpfs of mount points: listing it is fine,
	 * reading files through it is only what the per-mount rules grant. */
	if (!r)
		r = ab_ll_plan_add(ll, "/", AB_LL_READ);
	for (size_t i = 0; !r && i < ll->nrules; i++)
		if (strcmp(ll->rules[i].path, "/") == 0)
			ll->rules[i].access = LANDLOCK_ACCESS_FS_READ_DIR;
	return r;
}

int pl_plan_landlock(ab_plan *p, const ab_plan_input *in, ab_err *err)
{
	const ab_host *h = in->host;
	const ab_profile *prof = in->profile;
	int r = landlock_downgrades(p, in, err);
	if (r < 0)
		return r;

	ab_ll_plan *ll = &p->landlock;
	ll->abi = h->landlock_abi;
	ll->enabled = h->landlock_abi > 0;
	if (!ll->enabled)
		return 0;
	ll->handled_fs = ab_landlock_fs_rights(ll->abi);
	ll->scoped = 0;
	if (ll->abi >= 6)
		ll->scoped = ab_landlock_scopes(ll->abi);
	ll->tcp_any = prof->loopback.any;
	if (ll->abi >= 4 && !prof->loopback.any && (r = landlock_tcp_ports(ll, p, prof, err)) < 0)
		return r;
	r = landlock_mount_rules(ll, p);
	return r < 0 ? ab_fail(err, -r, "plan: landlock") : 0;
}
