/* SPDX-License-Identifier: MIT */
/*
 * `agentbox report` (parent, pure except ab_report_file): the model an audit
 * log is read into, and the command.  Its events are read in report_event.c,
 * rendered in report_text.c and report_json.c.
 *
 * Every distinct string is kept once (an interning pool), so the model
 * compares strings by pointer; aggregates are found through one hash map
 * with a random SipHash key (a hostile log cannot make lookups quadratic).
 * Output order never depends on the hash: lists are kept in first-seen order
 * and sorted by count, then name.  Budgets: line length, items (commands,
 * distinct keys, policy changes) and bytes of strings; beyond them events
 * are counted as dropped.
 */
#include "report_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ hashing */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                   \
	do {                       \
		v0 += v1;          \
		v1 = ROTL(v1, 13); \
		v1 ^= v0;          \
		v0 = ROTL(v0, 32); \
		v2 += v3;          \
		v3 = ROTL(v3, 16); \
		v3 ^= v2;          \
		v0 += v3;          \
		v3 = ROTL(v3, 21); \
		v3 ^= v0;          \
		v2 += v1;          \
		v1 = ROTL(v1, 17); \
		v1 ^= v2;          \
		v2 = ROTL(v2, 32); \
	} while (0)

/* SipHash-1-3 */
static uint64_t siphash(const uint64_t key[2], const void *data, size_t len)
{
	const uint8_t *in = data;
	uint64_t v0 = 0x736f6d6570736575ULL ^ key[0], v1 = 0x646f72616e646f6dULL ^ key[1];
	uint64_t v2 = 0x6c7967656e657261ULL ^ key[0], v3 = 0x7465646279746573ULL ^ key[1];
	uint64_t b = (uint64_t)len << 56, m;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		memcpy(&m, in + i, 8);
		v3 ^= m;
		SIPROUND;
		v0 ^= m;
	}
	for (size_t j = 0; i + j < len; j++)
		b |= (uint64_t)in[i + j] << (8 * j);
	v3 ^= b;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/* ------------------------------------------------------------------ model */

void *rep_vec_grow(void *v, size_t *cap, size_t need, size_t elsz)
{
	if (need <= *cap)
		return v;
	size_t nc = *cap ? *cap * 2 : 16;
	while (nc < need)
		nc *= 2;
	void *p = reallocarray(v, nc, elsz);
	if (p)
		*cap = nc;
	return p;
}

/* ---- the string pool ---- */

static bool pool_grow(ab_report *r)
{
	size_t nc = r->pool_cap ? r->pool_cap * 2 : 1024;
	pstr **n = calloc(nc, sizeof(*n));
	if (!n)
		return false;
	for (size_t i = 0; i < r->pool_cap; i++) {
		pstr *p = r->pool[i];
		if (!p)
			continue;
		size_t j = siphash(r->key, p->s, p->len) & (nc - 1);
		while (n[j])
			j = (j + 1) & (nc - 1);
		n[j] = p;
	}
	free(r->pool);
	r->pool = n;
	r->pool_cap = nc;
	return true;
}

const char *rep_intern(ab_report *r, const char *s, size_t len)
{
	if (r->oom)
		return NULL;
	if ((r->pool_n + 1) * 2 > r->pool_cap && !pool_grow(r)) {
		r->oom = true;
		return NULL;
	}
	size_t j = siphash(r->key, s, len) & (r->pool_cap - 1);
	for (; r->pool[j]; j = (j + 1) & (r->pool_cap - 1))
		if (r->pool[j]->len == len && memcmp(r->pool[j]->s, s, len) == 0)
			return r->pool[j]->s;
	size_t cost = sizeof(pstr) + len + 1;
	if (r->bytes + cost > r->lim.max_bytes)
		return NULL;
	pstr *p = malloc(cost);
	if (!p) {
		r->oom = true;
		return NULL;
	}
	p->len = len;
	memcpy(p->s, s, len);
	p->s[len] = '\0';
	r->pool[j] = p;
	r->pool_n++;
	r->bytes += cost;
	return p->s;
}

/* ---- the tuple map: 5 words -> index ---- */

static bool map_grow(ab_report *r)
{
	size_t nc = r->map_cap ? r->map_cap * 2 : 1024;
	tent *n = malloc(nc * sizeof(*n));
	if (!n)
		return false;
	for (size_t i = 0; i < nc; i++)
		n[i].v = NONE;
	for (size_t i = 0; i < r->map_cap; i++) {
		if (r->map[i].v == NONE)
			continue;
		size_t j = siphash(r->key, r->map[i].k, sizeof(r->map[i].k)) & (nc - 1);
		while (n[j].v != NONE)
			j = (j + 1) & (nc - 1);
		n[j] = r->map[i];
	}
	free(r->map);
	r->map = n;
	r->map_cap = nc;
	return true;
}

tent *rep_map_slot(ab_report *r, const uint64_t k[5])
{
	if ((r->map_n + 1) * 2 > r->map_cap && !map_grow(r)) {
		r->oom = true;
		return NULL;
	}
	size_t j = siphash(r->key, k, 5 * sizeof(uint64_t)) & (r->map_cap - 1);
	for (; r->map[j].v != NONE; j = (j + 1) & (r->map_cap - 1))
		if (memcmp(r->map[j].k, k, 5 * sizeof(uint64_t)) == 0)
			return &r->map[j];
	memcpy(r->map[j].k, k, 5 * sizeof(uint64_t));
	return &r->map[j];
}

uint32_t rep_map_get(ab_report *r, const uint64_t k[5])
{
	tent *t = rep_map_slot(r, k);
	return t ? t->v : NONE;
}

void rep_map_set(ab_report *r, tent *t, uint32_t v)
{
	if (t->v == NONE)
		r->map_n++;
	t->v = v;
}

agg *rep_agg_get(ab_report *r, int kind, const char *a, const char *b, const char *c, const char *d,
		 uint32_t port)
{
	static const size_t off[] = {
		[K_REACHED] = offsetof(ab_report, reached),
		[K_REFUSED] = offsetof(ab_report, refused),
		[K_DNS] = offsetof(ab_report, dns),
		[K_SYS] = offsetof(ab_report, sys),
		[K_FILE] = offsetof(ab_report, file),
		[K_NET] = offsetof(ab_report, net),
		[K_OTHER] = offsetof(ab_report, other),
		[K_SECRET] = offsetof(ab_report, secrets),
		[K_SKIPPED] = offsetof(ab_report, skipped),
		[K_WARN] = offsetof(ab_report, warns),
		[K_CRED] = offsetof(ab_report, creds),
	};
	typedef VEC(agg) aggvec;
	aggvec *vec = (aggvec *)((char *)r + off[kind]);
	uint64_t k[5] = {(uint64_t)kind << 32 | port, P(a), P(b), P(c), P(d)};
	tent *t = rep_map_slot(r, k);
	if (!t)
		return NULL;
	if (t->v != NONE)
		return &vec->v[t->v];
	if (!take_item(r))
		return NULL;
	agg *e = VEC_PUSH(r, *vec);
	if (!e)
		return NULL;
	*e = (agg){.a = a, .b = b, .c = c, .d = d, .port = port};
	rep_map_set(r, t, (uint32_t)(vec->n - 1));
	return e;
}

/* ------------------------------------------------------------------ time */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	unsigned yoe = (unsigned)(y - era * 400);
	unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
	z += 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	unsigned doe = (unsigned)(z - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static bool digits(const char *s, size_t n, unsigned *out)
{
	unsigned v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	*out = v;
	return true;
}

/* "2026-01-02T03:04:05.678Z"; the fraction is optional, the offset "Z" or
 * "+HH:MM" */
int64_t rep_parse_ts(const char *s, size_t n)
{
	unsigned y, mo, d, h, mi, se, ms = 0;
	if (n < 20 || !digits(s, 4, &y) || s[4] != '-' || !digits(s + 5, 2, &mo) || s[7] != '-' ||
	    !digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
	    !digits(s + 11, 2, &h) || s[13] != ':' || !digits(s + 14, 2, &mi) || s[16] != ':' ||
	    !digits(s + 17, 2, &se))
		return TS_NONE;
	if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
		return TS_NONE;
	size_t i = 19;
	if (s[i] == '.') {
		size_t k = 0;
		for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, k++)
			if (k < 3)
				ms = ms * 10 + (unsigned)(s[i] - '0');
		if (k == 0)
			return TS_NONE;
		for (; k < 3; k++)
			ms *= 10;
	}
	int64_t off = 0;
	if (i + 1 == n && (s[i] == 'Z' || s[i] == 'z')) {
		off = 0;
	} else if (i + 6 == n && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':') {
		unsigned oh, om;
		if (!digits(s + i + 1, 2, &oh) || !digits(s + i + 4, 2, &om) || oh > 23 || om > 59)
			return TS_NONE;
		off = (int64_t)(oh * 60 + om) * 60000 * (s[i] == '+' ? 1 : -1);
	} else {
		return TS_NONE;
	}
	int64_t days = days_from_civil(y, mo, d);
	return ((days * 24 + h) * 60 + mi) * 60000 + (int64_t)se * 1000 + ms - off;
}

void rep_fmt_ts(char *buf, size_t n, int64_t t)
{
	if (t == TS_NONE) {
		snprintf(buf, n, "?");
		return;
	}
	int64_t days = t / 86400000, rem = t % 86400000;
	if (rem < 0) {
		rem += 86400000;
		days--;
	}
	int64_t y;
	unsigned m, d;
	civil_from_days(days, &y, &m, &d);
	snprintf(buf, n, "%04lld-%02u-%02uT%02u:%02u:%02u.%03uZ", (long long)y, m, d,
		 (unsigned)(rem / 3600000), (unsigned)(rem / 60000 % 60),
		 (unsigned)(rem / 1000 % 60), (unsigned)(rem % 1000));
}

int64_t rep_session_ms(const session *s)
{
	int64_t end = s->end_ms != TS_NONE ? s->end_ms : s->last_ms;
	int64_t start = s->start_ms != TS_NONE ? s->start_ms : s->first_ms;
	return start != TS_NONE && end != TS_NONE && end >= start ? end - start : -1;
}

/* ------------------------------------------------------------------ feeding */

int ab_report_feed_line(ab_report *r, const char *line, size_t len)
{
	if (r->oom)
		return -ENOMEM;
	r->c.lines++;
	if (len && line[len - 1] == '\r')
		len--;
	size_t i = 0;
	while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
		i++;
	if (i == len)
		return 0; /* blank */
	json_error_t jerr;
	json_t *j = len <= r->lim.max_line ? json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr)
					   : NULL;
	if (!json_is_object(j)) {
		r->c.bad_lines++;
		if (!r->c.first_bad)
			r->c.first_bad = r->c.lines;
	} else {
		uint64_t bad = r->c.bad_lines;
		rep_on_event(r, j);
		if (r->c.bad_lines != bad && !r->c.first_bad)
			r->c.first_bad = r->c.lines;
	}
	json_decref(j);
	return r->oom ? -ENOMEM : 0;
}

int ab_report_feed(ab_report *r, const char *buf, size_t len)
{
	while (len) {
		const char *nl = memchr(buf, '\n', len);
		size_t n = nl ? (size_t)(nl - buf) : len;
		if (r->skipping) {
			/* the rest of an over-long line, already counted */
		} else if (!r->llen && nl && n <= r->lim.max_line) {
			int e = ab_report_feed_line(r, buf, n); /* a whole line in buf */
			if (e < 0)
				return e;
		} else if (r->llen + n > r->lim.max_line) {
			r->c.lines++;
			r->c.bad_lines++;
			if (!r->c.first_bad)
				r->c.first_bad = r->c.lines;
			r->llen = 0;
			r->skipping = !nl;
		} else {
			if (!r->line) {
				r->line = malloc(r->lim.max_line + 1);
				if (!r->line) {
					r->oom = true;
					return -ENOMEM;
				}
			}
			memcpy(r->line + r->llen, buf, n);
			r->llen += n;
			if (nl) {
				size_t l = r->llen;
				r->llen = 0;
				int e = ab_report_feed_line(r, r->line, l);
				if (e < 0)
					return e;
			}
		}
		if (nl)
			r->skipping = false;
		if (!nl)
			break;
		buf = nl + 1;
		len -= n + 1;
	}
	return r->oom ? -ENOMEM : 0;
}

int ab_report_end(ab_report *r)
{
	r->skipping = false;
	if (!r->llen)
		return r->oom ? -ENOMEM : 0;
	size_t l = r->llen;
	r->llen = 0;
	return ab_report_feed_line(r, r->line, l);
}

/* ------------------------------------------------------------------ life */

int ab_report_new(const ab_report_limits *limits, ab_report **out)
{
	ab_report *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	if (limits)
		r->lim = *limits;
	if (!r->lim.max_line)
		r->lim.max_line = AB_REPORT_MAX_LINE;
	if (!r->lim.max_items)
		r->lim.max_items = AB_REPORT_MAX_ITEMS;
	if (!r->lim.max_bytes)
		r->lim.max_bytes = AB_REPORT_MAX_BYTES;
	if (r->lim.max_items > NONE - 1)
		r->lim.max_items = NONE - 1;
	r->key[0] = r->lim.seed;
	r->key[1] = r->lim.seed * 0x9e3779b97f4a7c15ULL;
	if (!r->lim.seed && getrandom(r->key, sizeof(r->key), GRND_NONBLOCK) != sizeof(r->key)) {
		/* no entropy yet: still a per-process key */
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		r->key[0] = (uint64_t)ts.tv_nsec ^ P(r);
		r->key[1] = (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 32);
	}
	r->cur = r->first_root = r->last_root = NONE;
	*out = r;
	return 0;
}

void ab_report_free(ab_report *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->pool_cap; i++)
		free(r->pool[i]);
	free(r->pool);
	free(r->map);
	for (size_t i = 0; i < r->ses.n; i++)
		free(r->ses.v[i].grants);
	free(r->ses.v);
	for (size_t i = 0; i < r->cmds.n; i++)
		free(r->cmds.v[i].argv);
	free(r->cmds.v);
	free(r->reached.v);
	free(r->refused.v);
	free(r->dns.v);
	free(r->sys.v);
	free(r->file.v);
	free(r->net.v);
	free(r->other.v);
	free(r->secrets.v);
	free(r->skipped.v);
	free(r->warns.v);
	free(r->creds.v);
	free(r->syspids.v);
	free(r->pol.v);
	free(r->asks.v);
	for (size_t i = 0; i < r->revs.n; i++) {
		pathlist *l[] = {&r->revs.v[i].applied, &r->revs.v[i].left_out,
				 &r->revs.v[i].failed};
		for (size_t k = 0; k < AB_ARRAY_SIZE(l); k++) {
			free(l[k]->path);
			free(l[k]->why);
		}
	}
	free(r->revs.v);
	for (size_t i = 0; i < r->pathasks.n; i++) {
		free(r->pathasks.v[i].paths.path);
		free(r->pathasks.v[i].paths.why);
		free(r->pathasks.v[i].lines.path);
		free(r->pathasks.v[i].lines.why);
	}
	free(r->pathasks.v);
	free(r->line);
	free(r);
}

void ab_report_counts_get(const ab_report *r, ab_report_counts *out)
{
	*out = r->c;
	out->sessions = r->ses.n;
	out->commands = r->cmds.n;
	out->warnings = r->warnings;
}

/* ------------------------------------------------------------------ sorting */

typedef struct sortctx {
	const agg *v;
	bool by_name_first;
} sortctx;

static int strcmp0(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "");
}

static int cmp_agg(const void *pa, const void *pb, void *pc)
{
	const sortctx *c = pc;
	const agg *a = &c->v[*(const uint32_t *)pa], *b = &c->v[*(const uint32_t *)pb];
	int r;
	if (c->by_name_first && (r = strcmp0(a->a, b->a)) != 0)
		return r;
	if (a->n != b->n)
		return a->n > b->n ? -1 : 1;
	if ((r = strcmp0(a->a, b->a)) != 0 || (r = strcmp0(a->b, b->b)) != 0 ||
	    (r = strcmp0(a->c, b->c)) != 0)
		return r;
	return a->port < b->port ? -1 : a->port > b->port;
}

uint32_t *rep_sorted(const agg *v, size_t n, bool by_name_first)
{
	uint32_t *ix = malloc((n ? n : 1) * sizeof(*ix));
	if (!ix)
		return NULL;
	for (size_t i = 0; i < n; i++)
		ix[i] = (uint32_t)i;
	sortctx c = {v, by_name_first};
	qsort_r(ix, n, sizeof(*ix), cmp_agg, &c);
	return ix;
}

/* ------------------------------------------------------------------ the command */

static void report_freep(ab_report **r)
{
	ab_report_free(*r);
}

int ab_report_file(const char *path, bool json, FILE *out, ab_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		ab_fail(err, errno, "report: cannot open the log %s", path);
		return AB_EXIT_FAIL;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		ab_fail(err, errno, "report: %s", path);
		return AB_EXIT_FAIL;
	}
	if (!S_ISREG(st.st_mode)) {
		ab_fail(err, 0, "report: %s is not a regular file", path);
		return AB_EXIT_FAIL;
	}
	_cleanup_(report_freep) ab_report *r = NULL;
	if (ab_report_new(NULL, &r) < 0) {
		ab_fail(err, ENOMEM, "report");
		return AB_EXIT_FAIL;
	}
	_cleanup_free_ char *buf = malloc(1 << 16);
	if (!buf) {
		ab_fail(err, ENOMEM, "report");
		return AB_EXIT_FAIL;
	}
	for (;;) {
		ssize_t n = read(fd, buf, 1 << 16);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ab_fail(err, errno, "report: reading %s", path);
			return AB_EXIT_FAIL;
		}
		if (n == 0)
			break;
		if (ab_report_feed(r, buf, (size_t)n) < 0) {
			ab_fail(err, ENOMEM, "report: %s", path);
			return AB_EXIT_FAIL;
		}
	}
	if (ab_report_end(r) < 0) {
		ab_fail(err, ENOMEM, "report: %s", path);
		return AB_EXIT_FAIL;
	}
	if (!r->c.events && r->c.bad_lines) {
		ab_fail(err, 0,
			"report: %s is not an agentbox audit log (%llu line%s could not be "
			"read, none is an event)",
			path, (unsigned long long)r->c.bad_lines, plural(r->c.bad_lines, "", "s"));
		return AB_EXIT_FAIL;
	}
	ab_report_opts o = {.source = path};
	int rc = json ? ab_report_json(r, &o, out) : ab_report_text(r, &o, out);
	if (rc < 0) {
		ab_fail(err, -rc, "report: writing the report");
		return AB_EXIT_FAIL;
	}
	return 0;
}
