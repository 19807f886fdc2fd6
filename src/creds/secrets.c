/* SPDX-License-Identifier: MIT */
/*
 * Secret objects (parent: the egress proxy): a name, its value, its
 * placeholder, the hosts it is bound to and the places it may go, built and
 * checked here; and the names for the audit log.  The placeholders are made
 * in placeholder.c, the scanner sets in scanset.c, the head swap in
 * rewrite.c, the values read in sources.c.  Pure: no I/O.  Every buffer that
 * may hold a real value is wiped before it is freed.  Rules in
 * include/agentbox/secrets.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentbox/secrets.h"
#include "secrets_int.h"

void ab_secrets_wipe_free(char *p, size_t len)
{
	if (!p)
		return;
	explicit_bzero(p, len);
	free(p);
}

char *sec_memdup(const char *p, size_t n)
{
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, p, n);
		d[n] = '\0';
	}
	return d;
}

/* --------------------------------------------------------------- secrets */

static bool name_ok(const char *name)
{
	size_t n = name ? strnlen(name, AB_SECRET_NAME_MAX + 1) : 0;

	if (n == 0 || n > AB_SECRET_NAME_MAX || (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum((unsigned char)name[i]) && name[i] != '_')
			return false;
	return true;
}

int ab_secret_init(ab_secret *s, const char *name, ab_err *err)
{
	memset(s, 0, sizeof(*s));
	if (!name_ok(name))
		return ab_fail_code(
			err, AB_EXIT_FAIL, EINVAL,
			"secret name '%.80s': use letters, digits and '_' (not first a digit), "
			"at most %d characters",
			name ? name : "", AB_SECRET_NAME_MAX);
	snprintf(s->name, sizeof(s->name), "%s", name);
	return 0;
}

int ab_secret_add_host(ab_secret *s, const char *rule, ab_err *err)
{
	int r = ab_netpolicy_add(&s->hosts, AB_NETLIST_ALLOW, rule ? rule : "", err);

	if (r < 0)
		ab_err_prefix(err, "secret %s: hosts", s->name);
	return r;
}

static bool is_tchar(unsigned char c)
{
	return is_alnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Headers that frame or route a message: never a place for a secret. */
static const char *const framing_headers[] = {
	"host",    "content-length", "transfer-encoding", "connection",       "upgrade", "te",
	"trailer", "expect",         "keep-alive",        "proxy-connection",
};

static int add_header_place(ab_secret *s, const char *h, ab_err *err)
{
	char low[AB_SECRET_HEADER_MAX + 1];
	size_t n = strnlen(h, AB_SECRET_HEADER_MAX + 1);

	if (n == 0 || n > AB_SECRET_HEADER_MAX)
		return ab_fail_code(err, AB_EXIT_FAIL, EINVAL,
				    "secret %s: header name must have 1..%d characters", s->name,
				    AB_SECRET_HEADER_MAX);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)h[i];
		if (!is_tchar(c))
			return ab_fail_code(err, AB_EXIT_FAIL, EINVAL,
					    "secret %s: '%.64s' is not a header name", s->name, h);
		low[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
	}
	low[n] = '\0';
	for (size_t i = 0; i < AB_ARRAY_SIZE(framing_headers); i++)
		if (strcmp(low, framing_headers[i]) == 0)
			return ab_fail_code(err, AB_EXIT_FAIL, EINVAL,
					    "secret %s: header %s frames or routes the request and "
					    "cannot carry a secret",
					    s->name, low);
	if (!ab_strv_contains(&s->headers, low) && s->headers.n >= AB_SECRET_MAX_HEADERS)
		return ab_fail_code(err, AB_EXIT_FAIL, E2BIG,
				    "secret %s: too many header places (max %d)", s->name,
				    AB_SECRET_MAX_HEADERS);
	if (ab_strv_push_unique(&s->headers, low) < 0)
		return ab_fail(err, ENOMEM, "secret %s", s->name);
	return 0;
}

int ab_secret_add_place(ab_secret *s, const char *place, ab_err *err)
{
	int r = 0;

	if (!place)
		place = "";
	if (strncmp(place, "header:", 7) == 0)
		r = add_header_place(s, place + 7, err);
	else if (strcmp(place, "query") == 0)
		s->in_query = true;
	else if (strcmp(place, "body") == 0)
		s->in_body = true;
	else {
		r = ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: unknown place '%.64s'",
				 s->name, place);
		ab_err_hint(err, "places are \"header:NAME\", \"query\" and \"body\"");
	}
	if (r == 0)
		s->places_given = true;
	return r;
}

const char *sec_value_problem(const char *v, size_t len)
{
	if (len == 0)
		return "is empty";
	if (len > AB_SECRET_VALUE_MAX)
		return "is longer than 4096 bytes";
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)v[i];
		if (c == '\0')
			return "contains a NUL byte";
		if (c == '\r' || c == '\n')
			return "contains a line break";
		if ((c < 0x20 && c != '\t') || c == 0x7f)
			return "contains a control character";
	}
	return NULL;
}

int ab_secret_set_value(ab_secret *s, char *value, size_t len, ab_err *err)
{
	const char *why = value ? sec_value_problem(value, len) : "is missing";

	if (why) {
		ab_secrets_wipe_free(value, value ? len : 0);
		return ab_fail_code(err, AB_EXIT_FAIL, len > AB_SECRET_VALUE_MAX ? EFBIG : EINVAL,
				    "secret %s: the value %s", s->name, why);
	}
	ab_secrets_wipe_free(s->value, s->value_len);
	s->value = value;
	s->value_len = len;
	return 0;
}

int ab_secret_set_placeholder(ab_secret *s, const char *prefix, size_t len, ab_err *err)
{
	return ab_secret_set_placeholder_keyed(s, prefix, len, NULL, 0, err);
}

int ab_secret_set_placeholder_keyed(ab_secret *s, const char *prefix, size_t len,
				    const unsigned char *key, uint32_t counter, ab_err *err)
{
	char buf[AB_PLACEHOLDER_MAX + 1];
	int r;

	if (!s->value)
		return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: no value yet", s->name);
	r = key ? ab_placeholder_derive(prefix, len, key, s->name, s->value, s->value_len, counter,
					buf, sizeof(buf))
		: ab_placeholder_make(prefix, len, s->value_len, buf, sizeof(buf));
	if (r == -EINVAL)
		return ab_fail_code(
			err, AB_EXIT_FAIL, EINVAL,
			"secret %s: placeholder prefix must be at most %d characters of "
			"[A-Za-z0-9_-], the length at most %d",
			s->name, AB_PLACEHOLDER_PREFIX_MAX, AB_PLACEHOLDER_MAX);
	if (r < 0)
		return ab_fail(err, -r, "secret %s: placeholder", s->name);
	free(s->placeholder);
	s->placeholder = ab_strdup(buf);
	if (!s->placeholder)
		return ab_fail(err, ENOMEM, "secret %s", s->name);
	s->placeholder_len = (size_t)r;
	return 0;
}

int ab_secret_set_placeholder_jwt(ab_secret *s, ab_err *err)
{
	char buf[AB_PLACEHOLDER_MAX + 1];
	if (!s->value)
		return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: no value yet", s->name);
	int r = ab_jwt_placeholder_make(s->value, s->value_len, buf, sizeof(buf));
	if (r == -EINVAL) {
		ab_fail_code(err, AB_EXIT_FAIL, EINVAL,
			     "secret %s: the value is not a JWT (header.payload.signature, "
			     "each in base64url), but its placeholder is {\"jwt\": true}",
			     s->name);
		ab_err_hint(err,
			    "drop \"jwt\" from secrets.%s.placeholder if this secret is not a "
			    "JWT",
			    s->name);
		return -EINVAL;
	}
	if (r == -ERANGE)
		return ab_fail_code(
			err, AB_EXIT_FAIL, ERANGE,
			"secret %s: the JWT's signature is shorter than %d bytes: "
			"a placeholder keeping its header and payload would be guessable",
			s->name, AB_JWT_SIG_MIN_BYTES);
	if (r < 0)
		return ab_fail(err, -r, "secret %s: placeholder", s->name);
	char *ph = ab_strdup(buf);
	explicit_bzero(buf, sizeof(buf));
	if (!ph)
		return ab_fail(err, ENOMEM, "secret %s", s->name);
	free(s->placeholder);
	s->placeholder = ph;
	s->placeholder_len = (size_t)r;
	s->jwt = true;
	return 0;
}

int ab_secret_finish(ab_secret *s, ab_err *err)
{
	if (!s->value)
		return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: no value", s->name);
	if (!s->placeholder || s->placeholder_len == 0)
		return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: no placeholder",
				    s->name);
	for (size_t i = 0; i < s->placeholder_len; i++)
		if (!ph_char((unsigned char)s->placeholder[i]) &&
		    !(s->jwt && s->placeholder[i] == '.'))
			return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: bad placeholder",
					    s->name);
	if (s->hosts.n_allow == 0) {
		ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s: bound to no host", s->name);
		ab_err_hint(err, "list the hosts that may receive it under secrets.%s.hosts",
			    s->name);
		return -EINVAL;
	}
	if (!s->places_given && s->headers.n == 0 &&
	    (ab_strv_push(&s->headers, "authorization") < 0 ||
	     ab_strv_push(&s->headers, "x-api-key") < 0))
		return ab_fail(err, ENOMEM, "secret %s", s->name);
	return 0;
}

void ab_secret_free(ab_secret *s)
{
	if (!s)
		return;
	ab_secrets_wipe_free(s->value, s->value_len);
	ab_secrets_wipe_free(s->placeholder, s->placeholder_len);
	ab_netpolicy_free(&s->hosts);
	ab_strv_free(&s->headers);
	explicit_bzero(s, sizeof(*s));
}

bool ab_secret_bound(const ab_secret *s, const char *host, unsigned port)
{
	return s && host && ab_netpolicy_check(&s->hosts, host, port, NULL) == AB_NET_ALLOW;
}

bool ab_secret_forwards_elsewhere(const ab_secret *s, const char *host, unsigned port)
{
	return s && !s->refuse_elsewhere && !ab_secret_bound(s, host, port);
}

int ab_secrets_check(const ab_secret *secs, size_t n, ab_err *err)
{
	if (n > AB_SECRETS_MAX)
		return ab_fail_code(err, AB_EXIT_FAIL, E2BIG, "too many secrets (max %d)",
				    AB_SECRETS_MAX);
	for (size_t i = 0; i < n; i++) {
		if (!secs[i].value || !secs[i].placeholder ||
		    secs[i].headers.n + secs[i].in_query + secs[i].in_body == 0 ||
		    secs[i].hosts.n_allow == 0)
			return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "secret %s is incomplete",
					    secs[i].name);
		for (size_t j = 0; j < i; j++)
			if (strcmp(secs[i].name, secs[j].name) == 0)
				return ab_fail_code(err, AB_EXIT_FAIL, EINVAL,
						    "secret %s is defined twice", secs[i].name);
	}
	return 0;
}

void ab_secrets_names(const ab_secret *secs, size_t n, uint64_t mask, char *buf, size_t bufsz)
{
	size_t o = 0;

	if (!bufsz)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < n && i < 64; i++) {
		if (!(mask & (UINT64_C(1) << i)))
			continue;
		int k = snprintf(buf + o, bufsz - o, "%s%s", o ? "," : "", secs[i].name);
		if (k < 0 || (size_t)k >= bufsz - o) {
			buf[o] = '\0';
			return;
		}
		o += (size_t)k;
	}
}
