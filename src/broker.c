/* SPDX-License-Identifier: MIT */
/*
 * Credential brokering, set-up (parent, after clone, before the child builds
 * its root): read every secret once from its source, make its placeholder,
 * make the session CA, and hand the child only what it may see: the
 * placeholders (AB_SYNC_ENV) and the trust files (AB_SYNC_CONTENT, sealed
 * memfds).  The real values and the CA's keys stay in this process, which
 * the sandbox cannot reach; they are wiped when the run ends.  Done after
 * clone on purpose: the child's copy of our memory never held them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentbox/broker.h"
#include "agentbox/sandbox.h"

#define CA_DAYS 7

int ab_broker_stash(const ab_plan *plan, ab_stash *st, ab_err *err)
{
	const ab_egress_plan *e = &plan->egress;
	memset(st, 0, sizeof(*st));
	size_t need = 0;
	for (size_t i = 0; i < e->nsecrets && i < AB_SECRETS_MAX; i++) {
		const char *v = e->secrets[i].src == AB_PSECRET_ENV ? getenv(e->secrets[i].src_env)
								   : NULL;
		need += v ? strlen(v) + 1 : 0;
	}
	if (!need)
		return 0;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	st->cap = (need + pg - 1) / pg * pg;
	st->mem = mmap(NULL, st->cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (st->mem == MAP_FAILED) {
		st->mem = NULL;
		return ab_fail(err, errno, "secrets: mmap");
	}
	/* fail closed: without wipe-on-fork the clone would hold the values */
	if (madvise(st->mem, st->cap, MADV_WIPEONFORK) < 0) {
		int en = errno;
		ab_stash_free(st);
		return ab_fail(err, en, "secrets: MADV_WIPEONFORK (needs Linux >= 4.14)");
	}
	(void)madvise(st->mem, st->cap, MADV_DONTDUMP);
	(void)mlock(st->mem, st->cap);
	size_t off = 0;
	for (size_t i = 0; i < e->nsecrets && i < AB_SECRETS_MAX; i++) {
		if (e->secrets[i].src != AB_PSECRET_ENV)
			continue;
		size_t j = 0; /* two secrets from one variable: one copy */
		while (j < i && !(st->have[j] && e->secrets[j].src == AB_PSECRET_ENV &&
				  strcmp(e->secrets[j].src_env, e->secrets[i].src_env) == 0))
			j++;
		if (j < i) {
			st->off[i] = st->off[j];
			st->len[i] = st->len[j];
			st->have[i] = true;
			continue;
		}
		char *v = getenv(e->secrets[i].src_env);
		if (!v)
			continue;
		size_t n = strlen(v);
		memcpy(st->mem + off, v, n + 1);
		st->off[i] = off;
		st->len[i] = n;
		st->have[i] = true;
		off += n + 1;
		explicit_bzero(v, n); /* agentbox's own environment block, in place */
	}
	return 0;
}

void ab_stash_free(ab_stash *st)
{
	if (st->mem) {
		explicit_bzero(st->mem, st->cap);
		munmap(st->mem, st->cap);
	}
	memset(st, 0, sizeof(*st));
}

/* An env source comes from the stash (agentbox's environment no longer has
 * it); a copy the secret owns and wipes. */
static int stashed_value(const ab_stash *st, size_t i, const struct ab_profile_secret *x,
			 char **value, size_t *len, ab_err *err)
{
	if (!st || i >= AB_SECRETS_MAX || !st->have[i]) {
		ab_fail(err, 0, "environment variable %s is not set", x->src_env);
		return -ENOENT;
	}
	if (!st->len[i]) {
		ab_fail(err, 0, "environment variable %s is empty", x->src_env);
		return -ENODATA;
	}
	*value = malloc(st->len[i] + 1);
	if (!*value)
		return ab_fail(err, ENOMEM, "secrets");
	memcpy(*value, st->mem + st->off[i], st->len[i] + 1);
	*len = st->len[i];
	return 0;
}

static int load_one(const struct ab_profile_secret *x, const ab_stash *st, size_t idx,
		    ab_secret *s, ab_err *err)
{
	ab_secret_source src = {0};
	switch (x->src) {
	case AB_PSECRET_ENV:
		src.kind = AB_SECRET_SRC_ENV;
		src.env = x->src_env;
		break;
	case AB_PSECRET_FILE:
		src.kind = AB_SECRET_SRC_FILE;
		src.path = x->src_file;
		break;
	default:
		src.kind = AB_SECRET_SRC_COMMAND;
		src.argv = x->src_cmd.v;
		break;
	}
	char *value = NULL;
	size_t len = 0;
	int r = ab_secret_init(s, x->name, err);
	s->mask_in_body = x->mask_in_body;
	for (size_t i = 0; !r && i < x->hosts.n; i++)
		r = ab_secret_add_host(s, x->hosts.v[i], err);
	for (size_t i = 0; !r && i < x->places.n; i++)
		r = ab_secret_add_place(s, x->places.v[i], err);
	if (!r && x->src == AB_PSECRET_ENV)
		r = stashed_value(st, idx, x, &value, &len, err);
	else if (!r)
		r = ab_secret_load(x->name, &src, &value, &len, err);
	if (!r)
		r = ab_secret_set_value(s, value, len, err); /* takes value */
	if (!r)
		r = ab_secret_set_placeholder(s, x->ph_prefix, (size_t)x->ph_len, err);
	if (!r)
		r = ab_secret_finish(s, err);
	if (r < 0 && strncmp(err->msg, "secret ", 7) != 0)
		ab_err_prefix(err, "secret %s", x->name);
	return r < 0 ? r : 0;
}

static int send_env(int sync_fd, const char *name, const ab_secret *s, ab_err *err)
{
	size_t n = strlen(name) + 1 + s->placeholder_len;
	if (n > AB_SYNC_ENV_MAX)
		return ab_fail(err, E2BIG, "secret %s: placeholder too long", s->name);
	char *buf = malloc(n + 1);
	if (!buf)
		return ab_fail(err, ENOMEM, "secrets");
	snprintf(buf, n + 1, "%s=%s", name, s->placeholder);
	ab_sync_msg m = {.type = AB_SYNC_ENV, .value = (int)n};
	int r = ab_sync_send(sync_fd, &m, -1);
	if (r == 0) {
		ssize_t w;
		do
			w = send(sync_fd, buf, n, MSG_NOSIGNAL);
		while (w < 0 && errno == EINTR);
		r = w == (ssize_t)n ? 0 : -(w < 0 ? errno : EIO);
	}
	free(buf);
	return r < 0 ? ab_fail(err, -r, "send the placeholders") : 0;
}

/* A sealed, read-only memfd holding data. */
static int sealed_memfd(const char *name, const char *data, size_t len, ab_err *err)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return ab_fail(err, errno, "memfd_create");
	size_t off = 0;
	while (off < len) {
		ssize_t w = write(fd, data + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			int e = w < 0 ? errno : EIO;
			close(fd);
			return ab_fail(err, e, "memfd write");
		}
		off += (size_t)w;
	}
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0) {
		int e = errno;
		close(fd);
		return ab_fail(err, e, "memfd seal");
	}
	return fd;
}

/* The CA may vouch only for the hosts secrets are bound to. */
static int make_ca(const ab_plan *plan, ab_ca **out, ab_err *err)
{
	const ab_egress_plan *e = &plan->egress;
	ab_strv names = {0};
	int r = 0;
	for (size_t i = 0; !r && i < e->nsecrets; i++) {
		for (size_t j = 0; !r && j < e->secrets[i].hosts.n; j++) {
			ab_netrule rule;
			if ((r = ab_netrule_parse(e->secrets[i].hosts.v[j], &rule, err)) < 0)
				break;
			char buf[AB_HOST_BUF + 4];
			snprintf(buf, sizeof(buf), "%s%s", rule.wildcard ? "*." : "", rule.host);
			if (!ab_strv_contains(&names, buf) && ab_strv_push(&names, buf) < 0)
				r = ab_fail(err, ENOMEM, "CA");
		}
	}
	if (!r)
		r = ab_ca_new((const char *const *)names.v, CA_DAYS, out, err);
	ab_strv_free(&names);
	return r < 0 ? ab_err_prefix(err, "session CA") : 0;
}

static int send_trust(const ab_plan *plan, ab_ca *ca, int sync_fd, ab_err *err)
{
	char *bundle = NULL, *capem = NULL;
	size_t blen = 0;
	int r = ab_ca_trust_bundle(ca, NULL, &bundle, &blen, err);
	if (r >= 0)
		r = ab_ca_cert_pem(ca, &capem, err);
	int bfd = -1, cfd = -1;
	if (r >= 0 && (bfd = sealed_memfd("agentbox-ca-bundle", bundle, blen, err)) < 0)
		r = bfd;
	if (r >= 0 && (cfd = sealed_memfd("agentbox-session-ca", capem, strlen(capem), err)) < 0)
		r = cfd;
	for (size_t i = 0; r >= 0 && i < plan->nmounts; i++) {
		const ab_mount *m = &plan->mounts[i];
		if (m->kind != AB_MNT_CONTENT || !(m->flags & AB_MNT_F_RUNTIME))
			continue;
		ab_sync_msg msg = {.type = AB_SYNC_CONTENT, .value = (int)i};
		r = ab_sync_send(sync_fd, &msg, (m->flags & AB_MNT_F_CA_ONLY) ? cfd : bfd);
		if (r < 0)
			ab_fail(err, -r, "send the trust files");
	}
	if (bfd >= 0)
		close(bfd);
	if (cfd >= 0)
		close(cfd);
	free(bundle);
	free(capem);
	return r < 0 ? r : 0;
}

int ab_broker_prepare(const ab_plan *plan, const ab_stash *st, int sync_fd, ab_broker **out,
		      ab_err *err)
{
	const ab_egress_plan *e = &plan->egress;
	*out = NULL;
	if (!e->nsecrets)
		return 0;
	ab_broker *b = calloc(1, sizeof(*b));
	if (!b || !(b->secs = calloc(e->nsecrets, sizeof(*b->secs)))) {
		free(b);
		return ab_fail(err, ENOMEM, "secrets");
	}
	int r = 0;
	for (size_t i = 0; !r && i < e->nsecrets; i++) {
		r = load_one(&e->secrets[i], st, i, &b->secs[i], err);
		b->n = i + 1;
	}
	if (!r)
		r = ab_secrets_check(b->secs, b->n, err);
	for (size_t i = 0; !r && i < e->nsecrets; i++) {
		const struct ab_profile_secret *x = &e->secrets[i];
		const char *var = x->env_name ? x->env_name : x->name;
		if (var[0])
			r = send_env(sync_fd, var, &b->secs[i], err);
	}
	if (!r)
		r = make_ca(plan, &b->ca, err);
	if (!r)
		r = send_trust(plan, b->ca, sync_fd, err);
	if (r < 0) {
		ab_broker_free(b);
		return r;
	}
	*out = b;
	return 0;
}

void ab_broker_free(ab_broker *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++)
		ab_secret_free(&b->secs[i]);
	free(b->secs);
	ab_ca_free(b->ca);
	free(b);
}
