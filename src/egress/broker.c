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
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agentbox/broker.h"
#include "agentbox/credfile.h"
#include "agentbox/json_pos.h"
#include "agentbox/phkey.h"
#include "agentbox/sync.h"

#define CA_DAYS 7

int ab_broker_stash(const ab_plan *plan, ab_stash *st, ab_err *err)
{
	const ab_egress_plan *e = &plan->egress;
	memset(st, 0, sizeof(*st));
	size_t need = 0;
	for (size_t i = 0; i < e->nsecrets && i < AB_SECRETS_MAX; i++) {
		const char *v =
			e->secrets[i].src == AB_PSECRET_ENV ? getenv(e->secrets[i].src_env) : NULL;
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
	if (!st || i >= AB_SECRETS_MAX || !st->have[i])
		return ab_fail_code(err, AB_EXIT_FAIL, ENOENT, "environment variable %s is not set",
				    x->src_env);
	if (!st->len[i])
		return ab_fail_code(err, AB_EXIT_FAIL, ENODATA, "environment variable %s is empty",
				    x->src_env);
	*value = malloc(st->len[i] + 1);
	if (!*value)
		return ab_fail(err, ENOMEM, "secrets");
	memcpy(*value, st->mem + st->off[i], st->len[i] + 1);
	*len = st->len[i];
	return 0;
}

/* KEY: the stable placeholders' key (src/creds/phkey.c), NULL when not loaded. */
static int load_one(const struct ab_profile_secret *x, const ab_stash *st, size_t idx,
		    const unsigned char *key, ab_secret *s, ab_err *err)
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
	case AB_PSECRET_JSON:
		src.kind = AB_SECRET_SRC_JSON;
		src.path = x->src_file;
		src.pointer = x->src_pointer;
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
	if (!r && x->ph_jwt)
		r = ab_secret_set_placeholder_jwt(s, err);
	else if (!r)
		r = ab_secret_set_placeholder_keyed(s, x->ph_prefix, (size_t)x->ph_len,
						    x->ph_stable ? key : NULL, 0, err);
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
	_cleanup_free_ char *buf = malloc(n + 1);
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
	return r < 0 ? ab_fail(err, -r, "send the placeholders") : 0;
}

/* data[0..len) into FD (one of the empty memfds the child was sent), then
 * sealed. */
static int fill_sealed(int fd, const char *data, size_t len, ab_err *err)
{
	int r = ab_write_all(fd, data, len);
	if (r < 0)
		return ab_fail(err, -r, "memfd write");
	if ((r = ab_memfd_seal(fd)) < 0)
		return ab_fail(err, -r, "memfd seal");
	return 0;
}

/* -------------------------------------------------- the files, sent empty */

static int new_memfd(const char *name, ab_err *err)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	return fd < 0 ? ab_fail(err, errno, "memfd_create") : fd;
}

/* The memfd of run-time mount m, made on first need: one per kind of
 * trust file (shared by its mounts), one per rendered credentials file. */
static int file_for(ab_broker_files *f, size_t i, const ab_mount *m, ab_err *err)
{
	int *slot = &f->bundle;
	const char *name = "agentbox-ca-bundle";
	if (m->flags & AB_MNT_F_RENDER)
		slot = &f->render[i], name = "agentbox-credentials";
	else if (m->flags & AB_MNT_F_CA_ONLY)
		slot = &f->ca, name = "agentbox-session-ca";
	else if (m->flags & AB_MNT_F_JAVA)
		slot = &f->java, name = "agentbox-truststore";
	if (*slot < 0)
		*slot = new_memfd(name, err);
	return *slot;
}

int ab_broker_files_send(const ab_plan *plan, int sync_fd, ab_broker_files *f, ab_err *err)
{
	*f = (ab_broker_files){.bundle = -1, .ca = -1, .java = -1, .nmounts = plan->nmounts};
	f->render = malloc((plan->nmounts ? plan->nmounts : 1) * sizeof(*f->render));
	if (!f->render)
		return ab_fail(err, ENOMEM, "run-time files");
	for (size_t i = 0; i < plan->nmounts; i++)
		f->render[i] = -1;
	for (size_t i = 0; i < plan->nmounts; i++) {
		const ab_mount *m = &plan->mounts[i];
		if (m->kind != AB_MNT_CONTENT || !(m->flags & AB_MNT_F_RUNTIME))
			continue;
		int fd = file_for(f, i, m, err);
		if (fd < 0)
			return fd;
		ab_sync_msg msg = {.type = AB_SYNC_CONTENT, .value = (int)i};
		int r = ab_sync_send(sync_fd, &msg, fd);
		if (r < 0)
			return ab_fail(err, -r, "send the run-time files");
	}
	ab_sync_msg done = {.type = AB_SYNC_CONTENT_DONE};
	int r = ab_sync_send(sync_fd, &done, -1);
	return r < 0 ? ab_fail(err, -r, "send the run-time files") : 0;
}

void ab_broker_files_close(ab_broker_files *f)
{
	ab_closep(&f->bundle);
	ab_closep(&f->ca);
	ab_closep(&f->java);
	for (size_t i = 0; f->render && i < f->nmounts; i++)
		ab_closep(&f->render[i]);
	free(f->render);
	f->render = NULL;
}

/* The CA may vouch only for the hosts secrets are bound to. */
static int make_ca(const ab_plan *plan, ab_ca **out, ab_err *err)
{
	const ab_egress_plan *e = &plan->egress;
	_cleanup_strv_ ab_strv names = {0};
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
	return r < 0 ? ab_err_prefix(err, "session CA") : 0;
}

/* The trust files the plan mounts: the bundle, the root alone, the Java
 * truststore (read from the sealed bundle). */
static int fill_trust(ab_ca *ca, const ab_broker_files *f, ab_err *err)
{
	_cleanup_free_ char *capem = NULL;
	_cleanup_close_ int own = -1;
	size_t blen = 0, plen = 0;
	int bfd = f->bundle, r = 0;
	if (bfd < 0 && f->java >= 0 && (bfd = own = new_memfd("agentbox-ca-bundle", err)) < 0)
		return bfd;
	if (bfd >= 0)
		r = ab_ca_trust_bundle(ca, NULL, bfd, &blen, err);
	if (r >= 0 && f->ca >= 0 && (r = ab_ca_cert_pem(ca, &capem, err)) >= 0)
		r = fill_sealed(f->ca, capem, strlen(capem), err);
	if (r >= 0 && f->java >= 0 &&
	    (r = ab_ca_java_truststore_fd(ca, bfd, blen, AB_TRUST_JAVA_PASSWORD, f->java, &plen,
					  err)) >= 0 &&
	    (r = ab_memfd_seal(f->java)) < 0)
		r = ab_fail(err, -r, "Java truststore: seal");
	return r < 0 ? r : 0;
}

/* OpenSSL's secure heap, before the first key: the session's private keys
 * (and the proxy's TLS key shares) live in mlock'd, guard-paged memory that
 * is not dumped and is cleansed on free.  Not locked (RLIMIT_MEMLOCK): said
 * once; not set up at all: the keys are in the ordinary heap, as before,
 * still cleansed on free. */
static void secure_heap(void)
{
	int r = ab_ca_secure_heap_init();
	struct rlimit rl = {0};
	if (r == 0 && getrlimit(RLIMIT_MEMLOCK, &rl) < 0)
		rl.rlim_cur = 0;
	if (r == 0)
		ab_warn("the session CA's keys are not locked in memory: OpenSSL's secure heap "
			"(%u KiB) does not fit under RLIMIT_MEMLOCK (%llu KiB), so they could be "
			"swapped to disk; raise it with `ulimit -l`",
			AB_CA_SECURE_HEAP >> 10, (unsigned long long)rl.rlim_cur >> 10);
	else if (r < 0)
		ab_warn("OpenSSL's secure heap could not be set up: the session CA's keys are in "
			"the ordinary heap (cleansed on free, not locked in memory)");
}

static bool missing(int r)
{
	return r == -ENOENT;
}

static ssize_t loaded_index(const ab_broker *b, const char *name)
{
	for (size_t i = 0; i < b->n; i++)
		if (strcmp(b->secs[i].name, name) == 0)
			return (ssize_t)i;
	return -1;
}

/* Draw the placeholders again until no masked response can rebuild a value
 * from a placeholder and the bytes next to it (ab_secrets_mask_conflict).
 * A conflict that drawing again cannot remove (a JWT placeholder keeps the
 * token's header and payload) is left to the response set, which masks that
 * replacement with a filler instead. */
#define AB_PLACEHOLDER_DRAWS 64
static int redraw_placeholders(ab_broker *b, const unsigned char *key, ab_err *err)
{
	unsigned draws[AB_SECRETS_MAX] = {0};
	uint64_t given_up = 0; /* the response set's filler covers these */
	for (;;) {
		int c = ab_secrets_mask_conflict(b->secs, b->n, given_up);
		if (c == -1)
			return 0;
		if (c < 0)
			return ab_fail(err, -c, "secrets");
		if ((size_t)c >= b->n || c >= 64)
			return 0;
		if (draws[c]++ == AB_PLACEHOLDER_DRAWS) {
			given_up |= (uint64_t)1 << c;
			continue;
		}
		ab_secret *s = &b->secs[c];
		const struct ab_profile_secret *x = b->prof[c];
		/* a stable one draws the next in its keyed sequence: still the
		 * same every run */
		int r = s->jwt ? ab_secret_set_placeholder_jwt(s, err)
			       : ab_secret_set_placeholder_keyed(s, x->ph_prefix, (size_t)x->ph_len,
								 x->ph_stable ? key : NULL,
								 draws[c], err);
		if (r < 0)
			return r;
	}
}

/* Load every secret; an optional one whose source is absent is skipped. */
static int load_all(ab_broker *b, const ab_egress_plan *e, const char *ph_key, const ab_stash *st,
		    ab_err *err)
{
	/* why[i]: why secret i was skipped */
	_cleanup_free_ ab_err *why = calloc(e->nsecrets ? e->nsecrets : 1, sizeof(*why));
	_cleanup_free_ bool *skip = calloc(e->nsecrets ? e->nsecrets : 1, sizeof(*skip));
	int r = why && skip ? 0 : ab_fail(err, ENOMEM, "secrets");
	unsigned char keybuf[AB_PHKEY_LEN];
	const unsigned char *key = NULL;
	if (ph_key) {
		ab_err kerr = {0};
		if (ab_phkey_load(ph_key, keybuf, &kerr) == 0)
			key = keybuf;
		else /* only less convenient: new placeholders are as safe */
			ab_warn("%s; stable placeholders are new this run", kerr.msg);
	}
	for (size_t i = 0; !r && i < e->nsecrets; i++) {
		const struct ab_profile_secret *x = &e->secrets[i];
		ab_secret *s = &b->secs[b->n];
		r = load_one(x, st, i, key, s, &why[i]);
		if (r < 0) {
			ab_secret_free(s);
			if (x->optional && missing(r)) {
				skip[i] = true;
				r = 0;
				continue;
			}
			*err = why[i];
			if (missing(r) && x->hint)
				ab_err_hint(err, "%s", x->hint);
			break;
		}
		s->refuse_elsewhere =
			ab_psecret_elsewhere(x, e->placeholder_elsewhere) == AB_ELSEWHERE_REFUSE;
		b->prof[b->n++] = x;
	}
	/* "optional": [NAMES]: absent only while one of them is there */
	for (size_t i = 0; !r && i < e->nsecrets; i++) {
		const struct ab_profile_secret *x = &e->secrets[i];
		if (!skip[i])
			continue;
		bool ok = !x->optional_unless.n;
		for (size_t j = 0; !ok && j < x->optional_unless.n; j++)
			ok = loaded_index(b, x->optional_unless.v[j]) >= 0;
		if (!ok) {
			*err = why[i];
			if (x->hint)
				ab_err_hint(err, "%s", x->hint);
			r = -ENOENT;
		} else if (ab_strv_push(&b->skipped, x->name) < 0) {
			r = ab_fail(err, ENOMEM, "secrets");
		}
	}
	if (!r)
		r = redraw_placeholders(b, key, err);
	explicit_bzero(keybuf, sizeof(keybuf));
	return r;
}

/* A loaded secret read from a file the sandbox can read as it is would reach
 * the sandbox with its real value: refused.  A rendered file shows
 * placeholders, a denied one nothing.  The secret's own hint says what to do
 * where the profile has one (a harness's config that must stay readable). */
static int check_unseen(const ab_plan *plan, const ab_broker *b, ab_err *err)
{
	for (size_t i = 0; i < b->n; i++) {
		const struct ab_profile_secret *x = b->prof[i];
		if ((x->src != AB_PSECRET_FILE && x->src != AB_PSECRET_JSON) || !x->src_file ||
		    !ab_plan_shows(plan, x->src_file))
			continue;
		ab_fail_code(err, AB_EXIT_FAIL, EACCES,
			     "secret %s: its real value is in %s, which the sandbox can read; "
			     "agentbox refuses to run rather than show it",
			     x->name, x->src_file);
		if (x->hint)
			ab_err_hint(err, "%s", x->hint);
		else
			ab_err_hint(err,
				    "add %s to filesystem.deny, or \"render\": true to show "
				    "it with the placeholder",
				    x->src_file);
		return -EACCES;
	}
	return 0;
}

/* The render mounts: the file with the placeholders of the secrets read
 * from it, kept parts only, checked to hold none of their values.  When no
 * secret read from it was loaded (all optional and absent: e.g. Codex's
 * auth.json holding an API key rather than a ChatGPT login), nothing of it
 * is shown: an empty file, as the profile's deny would show. */
static int render_file(const ab_egress_plan *e, const ab_broker *b, const char *path, char **out,
		       size_t *len, ab_err *err)
{
	const struct ab_profile_secret *owner = NULL;
	_cleanup_json_ json_t *root = NULL, *doc = NULL;
	bool loaded = false;
	for (size_t i = 0; i < e->nsecrets && !owner; i++)
		if (e->secrets[i].render && strcmp(e->secrets[i].src_file, path) == 0)
			owner = &e->secrets[i];
	for (size_t i = 0; i < b->n; i++)
		loaded |= b->prof[i]->src == AB_PSECRET_JSON &&
			  strcmp(b->prof[i]->src_file, path) == 0;
	if (!owner)
		return ab_fail(err, EINVAL, "%s: no secret renders it", path);
	if (!loaded) {
		*out = calloc(1, 1);
		*len = 0;
		return *out ? 0 : ab_fail(err, ENOMEM, "%s", path);
	}
	int r = ab_credfile_load(path, &root, err);
	if (r < 0)
		return r;
	if (owner->render_keep.n) {
		r = ab_credfile_keep(root, owner->render_keep.v, owner->render_keep.n, &doc);
		if (r < 0)
			return ab_fail(err, -r, "%s", path);
	} else {
		doc = TAKE_PTR(root);
	}
	for (size_t i = 0; !r && i < b->n; i++) {
		const struct ab_profile_secret *x = b->prof[i];
		if (x->src != AB_PSECRET_JSON || strcmp(x->src_file, path) != 0)
			continue;
		int q = ab_credfile_set(doc, x->src_pointer, b->secs[i].placeholder,
					b->secs[i].placeholder_len);
		if (q < 0 && q != -ENOENT)
			r = ab_fail(err, -q, "%s: %s", path, x->src_pointer);
	}
	if (!r && (r = ab_credfile_dump(doc, out, len)) < 0)
		ab_fail(err, -r, "%s", path);
	/* fail closed: a value that is also somewhere else in the file */
	for (size_t i = 0; !r && i < b->n; i++) {
		if (memmem(*out, *len, b->secs[i].value, b->secs[i].value_len)) {
			ab_secrets_wipe_free(*out, *len);
			*out = NULL;
			r = ab_fail(err, 0,
				    "%s: the value of secret %s is also at a place no secret "
				    "reads; not shown inside",
				    path, b->secs[i].name);
		}
	}
	return r;
}

static int fill_rendered(const ab_plan *plan, const ab_broker *b, const ab_broker_files *f,
			 ab_err *err)
{
	for (size_t i = 0; i < plan->nmounts; i++) {
		const ab_mount *m = &plan->mounts[i];
		if (m->kind != AB_MNT_CONTENT || !(m->flags & AB_MNT_F_RENDER))
			continue;
		char *doc = NULL;
		size_t len = 0;
		int r = render_file(&plan->egress, b, m->dst, &doc, &len, err);
		if (r < 0)
			return ab_err_prefix(err, "credentials file");
		r = i < f->nmounts && f->render[i] >= 0
			    ? fill_sealed(f->render[i], doc, len, err)
			    : ab_fail(err, EPROTO, "credentials file %s: no memfd", m->dst);
		ab_secrets_wipe_free(doc, len);
		if (r < 0)
			return r;
	}
	return 0;
}

static void broker_freep(ab_broker **b)
{
	ab_broker_free(*b);
}

int ab_broker_prepare(const ab_plan *plan, const ab_stash *st, const ab_broker_files *files,
		      int sync_fd, ab_broker **out, ab_err *err)
{
	const ab_egress_plan *e = &plan->egress;
	*out = NULL;
	if (!e->nsecrets)
		return 0;
	_cleanup_(broker_freep) ab_broker *b = calloc(1, sizeof(*b));
	if (!b || !(b->secs = calloc(e->nsecrets, sizeof(*b->secs))) ||
	    !(b->prof = calloc(e->nsecrets, sizeof(*b->prof))))
		return ab_fail(err, ENOMEM, "secrets");
	ab_ca_rand_init(); /* first: before the placeholders' HMAC loads OpenSSL */
	int r = load_all(b, e, plan->ph_key, st, err);
	if (!r)
		r = check_unseen(plan, b, err);
	if (!r)
		r = ab_secrets_check(b->secs, b->n, err);
	for (size_t i = 0; !r && i < b->n; i++) {
		const struct ab_profile_secret *x = b->prof[i];
		const char *var = x->env_name ? x->env_name : x->name;
		if (var[0])
			r = send_env(sync_fd, var, &b->secs[i], err);
	}
	if (!r)
		r = fill_rendered(plan, b, files, err);
	if (!r) {
		secure_heap();
		r = make_ca(plan, &b->ca, err);
	}
	if (!r)
		r = fill_trust(b->ca, files, err);
	if (r < 0)
		return r;
	*out = TAKE_PTR(b);
	return 0;
}

/* ---------------------------------------------------- token refreshes */

static bool rotates_at(const struct ab_profile_secret *x, const char *host, unsigned port,
		       const char *path)
{
	ab_netrule rule;
	ab_err e = {0};
	if (!x->rot_host || !x->rot_path || strcmp(x->rot_path, path) != 0 ||
	    ab_netrule_parse(x->rot_host, &rule, &e) < 0)
		return false;
	return strcmp(rule.host, host) == 0 && (rule.port ? rule.port : 443) == port;
}

bool ab_broker_token_endpoint(const ab_broker *b, const char *host, unsigned port, const char *path)
{
	for (size_t i = 0; b && i < b->n; i++)
		if (rotates_at(b->prof[i], host, port, path))
			return true;
	return false;
}

static int retire(ab_broker *b, size_t i)
{
	size_t n = b->nretired + 1;
	char **v = realloc(b->retired, n * sizeof(*v));
	if (v)
		b->retired = v;
	size_t *l = realloc(b->retired_len, n * sizeof(*l));
	if (l)
		b->retired_len = l;
	size_t *o = realloc(b->retired_of, n * sizeof(*o));
	if (o)
		b->retired_of = o;
	if (!v || !l || !o)
		return -ENOMEM;
	b->retired[b->nretired] = b->secs[i].value;
	b->retired_len[b->nretired] = b->secs[i].value_len;
	b->retired_of[b->nretired] = i;
	b->nretired = n;
	b->secs[i].value = NULL;
	b->secs[i].value_len = 0;
	return 0;
}

static bool body_place(const ab_secret *s)
{
	return s->in_body;
}

static uint64_t bit(size_t i)
{
	return (uint64_t)1 << i;
}

/* A token refresh on its way: the request it answers and, per secret, the
 * new value and (when the old one will not do) a new placeholder, held
 * until they are committed. */
typedef struct rot_stage {
	const char *host;
	unsigned port;
	const char *path;
	char *nv[AB_SECRETS_MAX];
	size_t nl[AB_SECRETS_MAX];
	char *nph[AB_SECRETS_MAX];
	size_t nphl[AB_SECRETS_MAX];
	uint64_t mask;        /* the secrets rotated */
	long long expires_in; /* the response's, for the stamps */
} rot_stage;

static void rot_stage_wipe(rot_stage *st)
{
	for (size_t i = 0; i < AB_SECRETS_MAX; i++) {
		ab_secrets_wipe_free(st->nv[i], st->nl[i]);
		free(st->nph[i]);
	}
}

/* Secret I's new value from the token response (st->nv[i]), checked as a
 * value; -ENOENT when the response has none (not rotated this time: e.g. no
 * new refresh token). */
static int new_value(const ab_broker *b, size_t i, json_t *root, rot_stage *st, ab_err *err)
{
	const struct ab_profile_secret *x = b->prof[i];
	int q = ab_credfile_get(root, x->rot_field, &st->nv[i], &st->nl[i]);
	if (q == -ENOENT)
		return q;
	ab_secret probe = {0};
	if (q < 0 || ab_secret_init(&probe, x->name, err) < 0 ||
	    ab_secret_set_value(&probe, st->nv[i], st->nl[i], err) < 0) {
		st->nv[i] = NULL; /* set_value took and wiped it */
		ab_secret_free(&probe);
		return ab_fail(err, 0,
			       "token response from %s: %s is not a usable value for "
			       "secret %s",
			       st->host, x->rot_field, x->name);
	}
	probe.value = NULL; /* ours again: st->nv[i] */
	ab_secret_free(&probe);
	return 0;
}

/* A placeholder for secret I's new value when the old one will not do:
 * swapped in bodies, one of the new length; a JWT, one with the new
 * token's claims (the harness decodes them). */
static int new_placeholder(const ab_broker *b, size_t i, rot_stage *st, ab_err *err)
{
	const struct ab_profile_secret *x = b->prof[i];
	const ab_secret *s = &b->secs[i];
	if (!s->jwt && !(body_place(s) && st->nl[i] != s->placeholder_len))
		return 0;
	ab_secret t = {0};
	char *copy = malloc(st->nl[i] + 1);
	if (!copy)
		return ab_fail(err, ENOMEM, "rotate");
	memcpy(copy, st->nv[i], st->nl[i] + 1);
	if (ab_secret_init(&t, x->name, err) < 0 ||
	    ab_secret_set_value(&t, copy, st->nl[i], err) < 0 ||
	    (s->jwt ? ab_secret_set_placeholder_jwt(&t, err)
		    : ab_secret_set_placeholder(&t, x->ph_prefix, 0, err)) < 0) {
		ab_secret_free(&t);
		ab_err_prefix(err, "token response from %s", st->host);
		return -EINVAL;
	}
	st->nphl[i] = t.placeholder_len;
	st->nph[i] = TAKE_PTR(t.placeholder);
	ab_secret_free(&t);
	return 0;
}

/* Secret I's rotation staged: its new value and placeholder, and that
 * placeholder where the value was in the response ROOT. */
static int stage_one(const ab_broker *b, size_t i, json_t *root, rot_stage *st, ab_err *err)
{
	const struct ab_profile_secret *x = b->prof[i];
	const ab_secret *s = &b->secs[i];
	int r = new_value(b, i, root, st, err);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if (st->nl[i] == s->value_len && memcmp(st->nv[i], s->value, st->nl[i]) == 0) {
		/* the same value again: nothing to retire or write back */
		ab_secrets_wipe_free(st->nv[i], st->nl[i]);
		st->nv[i] = NULL;
		if (ab_credfile_set(root, x->rot_field, s->placeholder, s->placeholder_len) < 0)
			return ab_fail(err, ENOMEM, "rotate");
		return 0;
	}
	if ((r = new_placeholder(b, i, st, err)) < 0)
		return r;
	const char *ph = st->nph[i] ? st->nph[i] : s->placeholder;
	size_t phl = st->nph[i] ? st->nphl[i] : s->placeholder_len;
	if (ab_credfile_set(root, x->rot_field, ph, phl) < 0)
		return ab_fail(err, ENOMEM, "rotate");
	st->mask |= bit(i);
	return 0;
}

/* Step 1: every new value, checked, and its placeholder in the response,
 * which becomes *OUT. */
static int stage_all(const ab_broker *b, const char *body, size_t len, rot_stage *st, char **out,
		     size_t *outlen, ab_err *err)
{
	_cleanup_json_ json_t *root = NULL;
	int r = ab_credfile_parse(body, len, &root, err);
	if (r < 0)
		return ab_err_prefix(err, "token response from %s", st->host);
	if (!json_is_object(root))
		return ab_fail(err, 0, "token response from %s: not a JSON object", st->host);
	for (size_t i = 0; !r && i < b->n && i < AB_SECRETS_MAX; i++)
		if (rotates_at(b->prof[i], st->host, st->port, st->path))
			r = stage_one(b, i, root, st, err);
	if (!r && (r = ab_credfile_dump(root, out, outlen)) < 0)
		ab_fail(err, -r, "rotate");
	st->expires_in = ab_credfile_expires_in(root);
	return r;
}

/* Step 2, fail closed: no new or current value may be left in OUT. */
static int leak_check(const ab_broker *b, const rot_stage *st, const char *out, size_t outlen,
		      ab_err *err)
{
	for (size_t i = 0; i < b->n && i < AB_SECRETS_MAX; i++) {
		bool bad = (st->nv[i] && memmem(out, outlen, st->nv[i], st->nl[i])) ||
			   memmem(out, outlen, b->secs[i].value, b->secs[i].value_len);
		if (bad)
			return ab_fail(err, 0,
				       "token response from %s: a value of secret %s is at a "
				       "place no \"rotate\" names",
				       st->host, b->secs[i].name);
	}
	return 0;
}

/* Step 3: retire the old values, take the new ones. */
static int commit(ab_broker *b, rot_stage *st, ab_err *err)
{
	for (size_t i = 0; i < b->n && i < AB_SECRETS_MAX; i++) {
		if (!(st->mask & bit(i)))
			continue;
		if (retire(b, i) < 0) /* keep the old value: nothing half-done */
			return ab_fail(err, ENOMEM, "rotate");
		b->secs[i].value_len = st->nl[i];
		b->secs[i].value = TAKE_PTR(st->nv[i]);
		if (st->nph[i]) {
			free(b->secs[i].placeholder);
			b->secs[i].placeholder_len = st->nphl[i];
			b->secs[i].placeholder = TAKE_PTR(st->nph[i]);
		}
	}
	return 0;
}

/* Is secret I the first rotated one read from its file? */
static bool first_of_file(const ab_broker *b, uint64_t mask, size_t i)
{
	for (size_t j = 0; j < i; j++)
		if ((mask & bit(j)) && strcmp(b->prof[j]->src_file, b->prof[i]->src_file) == 0)
			return false;
	return true;
}

/* The host file of secret I, with the new values of every rotated secret
 * read from it, in one atomic write. */
static int write_file(const ab_broker *b, uint64_t mask, size_t i, long long expires_in,
		      ab_err *err)
{
	const char *file = b->prof[i]->src_file;
	const char *ptrs[AB_SECRETS_MAX], *vals[AB_SECRETS_MAX];
	size_t lens[AB_SECRETS_MAX], k = 0;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	ab_credfile_stamps st = {.expires_in = expires_in,
				 .now_us = (long long)now.tv_sec * 1000000 + now.tv_nsec / 1000};
	for (size_t j = i; j < b->n && j < AB_SECRETS_MAX; j++) {
		if (!(mask & bit(j)) || strcmp(b->prof[j]->src_file, file) != 0)
			continue;
		ptrs[k] = b->prof[j]->src_pointer;
		vals[k] = b->secs[j].value;
		lens[k++] = b->secs[j].value_len;
		const ab_strv *sp = &b->prof[j]->rot_stamp_ptr;
		for (size_t m = 0; m < sp->n; m++) /* beyond the cap: not stamped */
			(void)ab_credfile_stamps_add(&st, sp->v[m],
						     b->prof[j]->rot_stamp_kind.v[m]);
	}
	bool rendered = false; /* the sandbox has a mount on it: in place */
	for (size_t j = 0; j < b->n; j++)
		rendered |= b->prof[j]->render && strcmp(b->prof[j]->src_file, file) == 0;
	return ab_credfile_update(file, ptrs, vals, lens, k, &st, rendered, err);
}

/* Step 4: the host files.  0, or -EIO with err saying why the first failed
 * (the session goes on with the new values). */
static int write_back(const ab_broker *b, uint64_t mask, long long expires_in, ab_err *err)
{
	int wr = 0;
	for (size_t i = 0; i < b->n && i < AB_SECRETS_MAX; i++) {
		if (!(mask & bit(i)) || !first_of_file(b, mask, i))
			continue;
		ab_err we = {0};
		if (write_file(b, mask, i, expires_in, &we) < 0 && !wr) {
			*err = we;
			wr = -EIO;
		}
	}
	return wr;
}

int ab_broker_rotate(ab_broker *b, const char *host, unsigned port, const char *path,
		     const char *body, size_t len, char **out, size_t *outlen, uint64_t *rotated,
		     ab_err *err)
{
	*out = NULL;
	*outlen = 0;
	*rotated = 0;
	if (b->rotations >= AB_BROKER_MAX_ROTATIONS)
		return ab_fail(err, E2BIG, "more than %d token refreshes in one run",
			       AB_BROKER_MAX_ROTATIONS);
	_cleanup_(rot_stage_wipe) rot_stage st = {.host = host, .port = port, .path = path};
	int r = stage_all(b, body, len, &st, out, outlen, err);
	if (!r)
		r = leak_check(b, &st, *out, *outlen, err);
	if (!r)
		r = commit(b, &st, err);
	if (r < 0) {
		ab_secrets_wipe_free(*out, *outlen);
		*out = NULL;
		*outlen = 0;
		return r;
	}
	b->rotations++;
	*rotated = st.mask;
	return write_back(b, st.mask, st.expires_in, err);
}

int ab_broker_response_set(const ab_broker *b, ab_scan_set **out, ab_err *err)
{
	size_t n = b->n + b->nretired;
	ab_secret *all = calloc(n ? n : 1, sizeof(*all));
	if (!all)
		return ab_fail(err, ENOMEM, "secrets");
	for (size_t i = 0; i < b->n; i++)
		all[i] = b->secs[i]; /* shallow: only read */
	for (size_t i = 0; i < b->nretired; i++) {
		all[b->n + i] = b->secs[b->retired_of[i]];
		all[b->n + i].value = b->retired[i];
		all[b->n + i].value_len = b->retired_len[i];
	}
	int r = ab_secrets_response_set(all, n, out, err);
	free(all);
	return r;
}

void ab_broker_free(ab_broker *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++)
		ab_secret_free(&b->secs[i]);
	for (size_t i = 0; i < b->nretired; i++)
		ab_secrets_wipe_free(b->retired[i], b->retired_len[i]);
	free(b->retired);
	free(b->retired_len);
	free(b->retired_of);
	free(b->prof);
	ab_strv_free(&b->skipped);
	free(b->secs);
	ab_ca_free(b->ca);
	free(b);
}
