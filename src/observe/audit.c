/* SPDX-License-Identifier: MIT */
/*
 * The audit log (JSON lines) and the exit summary (parent).  Writes are
 * synchronous appends of whole lines (one write(2) each), so concurrent
 * readers such as `tail -f` never see half an event.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agentbox/audit.h"
#include "agentbox/otlp.h"
#include "agentbox/seccomp.h"

typedef struct hostcount {
	char *host;
	unsigned port;
	uint64_t allowed, denied, up, down;
} hostcount;

typedef struct elsewherecount {
	char secret[65]; /* AB_SECRET_NAME_MAX + 1 */
	char *host;
	unsigned port;
	uint64_t n; /* requests */
} elsewherecount;

typedef struct denialcount {
	char category[8]; /* "syscall", "file", "socket" */
	char what[64];    /* a syscall name, the end of a path */
	char comm[16];    /* TASK_COMM_LEN */
	uint64_t n;
} denialcount;

struct ab_audit {
	int fd;
	hostcount *hosts;
	size_t nhosts;
	uint64_t dropped; /* host:port beyond AB_AUDIT_MAX_HOSTS */
	uint64_t dns_denied;
	uint64_t write_errors;
	denialcount *denials;
	size_t ndenials;
	uint64_t denials_other; /* beyond AB_AUDIT_MAX_DENIALS */
	uint64_t execs;
	elsewherecount *elsewhere;
	size_t nelsewhere;
	uint64_t elsewhere_other; /* requests beyond AB_AUDIT_MAX_ELSEWHERE pairs */
	ab_otlp *otlp;            /* run --otlp: the events also go there */
};

int ab_audit_open(const char *path, ab_audit **out, ab_err *err)
{
	ab_audit *a = calloc(1, sizeof(*a));
	if (!a)
		return ab_fail(err, ENOMEM, "audit log");
	a->fd = -1;
	if (path) {
		a->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (a->fd < 0) {
			int e = errno;
			free(a);
			return ab_fail(err, e, "audit log %s", path);
		}
		struct stat st;
		if (fstat(a->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			close(a->fd);
			free(a);
			return ab_fail(err, EINVAL, "audit log %s: not a regular file", path);
		}
	}
	*out = a;
	return 0;
}

int ab_audit_export(ab_audit *a, const char *url, const char *profile, ab_err *err)
{
	return ab_otlp_new(url, profile, &a->otlp, err);
}

int ab_audit_export_run(ab_audit *a, ab_err *err)
{
	return a ? ab_otlp_run(a->otlp, err) : 0;
}

bool ab_audit_recording(const ab_audit *a)
{
	return a && (a->fd >= 0 || a->otlp);
}

void ab_audit_free(ab_audit *a)
{
	if (!a)
		return;
	if (a->otlp) {
		ab_otlp_stats st;
		ab_otlp_finish(a->otlp, &st);
		if (st.failed || st.dropped) {
			char dropped[64] = "";
			if (st.dropped)
				snprintf(dropped, sizeof(dropped),
					 "; %llu dropped: too many waiting",
					 (unsigned long long)st.dropped);
			ab_warn("--otlp: %llu of %llu events did not reach the collector (%s%s)",
				(unsigned long long)(st.failed + st.dropped),
				(unsigned long long)(st.sent + st.failed + st.dropped),
				st.last_error[0] ? st.last_error : "lost", dropped);
		}
	}
	if (a->fd >= 0)
		close(a->fd);
	for (size_t i = 0; i < a->nhosts; i++)
		free(a->hosts[i].host);
	free(a->hosts);
	free(a->denials);
	for (size_t i = 0; i < a->nelsewhere; i++)
		free(a->elsewhere[i].host);
	free(a->elsewhere);
	free(a);
}

void ab_audit_emit(ab_audit *a, json_t *ev)
{
	if (!ev)
		return;
	if (!a || (a->fd < 0 && !a->otlp)) {
		json_decref(ev);
		return;
	}
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char t[40], full[64];
	strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(full, sizeof(full), "%s.%03ldZ", t, ts.tv_nsec / 1000000);
	/* "ts" first, then the event's own keys in insertion order */
	json_t *line = json_object();
	json_object_set_new(line, "ts", json_string(full));
	json_object_update(line, ev);
	json_decref(ev);
	/* one encoding for the file and the collector's body */
	char *s = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	ab_otlp_push(a->otlp, line, s, &ts);
	json_decref(line);
	if (!s || a->fd < 0) {
		free(s);
		return;
	}
	size_t n = strlen(s);
	s[n] = '\n';
	ssize_t w = write(a->fd, s, n + 1);
	if (w != (ssize_t)(n + 1))
		a->write_errors++;
	free(s);
}

static hostcount *find_host(ab_audit *a, const char *host, unsigned port)
{
	for (size_t i = 0; i < a->nhosts; i++)
		if (a->hosts[i].port == port && strcmp(a->hosts[i].host, host) == 0)
			return &a->hosts[i];
	if (a->nhosts >= AB_AUDIT_MAX_HOSTS)
		return NULL;
	hostcount *n = realloc(a->hosts, (a->nhosts + 1) * sizeof(*n));
	if (!n)
		return NULL;
	a->hosts = n;
	char *h = strdup(host);
	if (!h)
		return NULL;
	a->hosts[a->nhosts] = (hostcount){.host = h, .port = port};
	return &a->hosts[a->nhosts++];
}

void ab_audit_count(ab_audit *a, const char *host, unsigned port, bool allowed, uint64_t up,
		    uint64_t down)
{
	if (!a)
		return;
	hostcount *h = find_host(a, host && host[0] ? host : "?", port);
	if (!h) {
		a->dropped++;
		return;
	}
	if (allowed)
		h->allowed++;
	else
		h->denied++;
	h->up += up;
	h->down += down;
}

void ab_audit_count_dns_denied(ab_audit *a, const char *name)
{
	if (a)
		a->dns_denied++;
	(void)name;
}

/* Copy at most SIZE-1 bytes; a longer string keeps its END (paths: the file
 * name matters most), marked with "...". */
static void copy_tail(char *out, size_t size, const char *s)
{
	size_t n = strlen(s);
	if (n < size) {
		memcpy(out, s, n + 1);
		return;
	}
	memcpy(out, "...", 3);
	memcpy(out + 3, s + n - (size - 4), size - 3);
}

void ab_audit_count_denial(ab_audit *a, const char *category, const char *what, const char *comm,
			   uint64_t n)
{
	if (!a || !n)
		return;
	/* the log has it; the summary is for denials that may explain a failure */
	if (category && !strcmp(category, "syscall") && what && ab_seccomp_denial_is_probe(what))
		return;
	denialcount k = {0};
	copy_tail(k.category, sizeof(k.category), category ? category : "?");
	copy_tail(k.what, sizeof(k.what), what && what[0] ? what : "?");
	copy_tail(k.comm, sizeof(k.comm), comm && comm[0] ? comm : "?");
	for (size_t i = 0; i < a->ndenials; i++) {
		denialcount *d = &a->denials[i];
		if (!strcmp(d->category, k.category) && !strcmp(d->what, k.what) &&
		    !strcmp(d->comm, k.comm)) {
			d->n += n;
			return;
		}
	}
	denialcount *v = a->ndenials < AB_AUDIT_MAX_DENIALS
				 ? realloc(a->denials, (a->ndenials + 1) * sizeof(*v))
				 : NULL;
	if (!v) {
		a->denials_other += n;
		return;
	}
	a->denials = v;
	k.n = n;
	a->denials[a->ndenials++] = k;
}

void ab_audit_count_exec(ab_audit *a, uint64_t n)
{
	if (a)
		a->execs += n;
}

int ab_audit_count_elsewhere(ab_audit *a, const char *secret, const char *host, unsigned port)
{
	if (!a)
		return 0;
	char name[sizeof(a->elsewhere->secret)];
	copy_tail(name, sizeof(name), secret && secret[0] ? secret : "?");
	host = host && host[0] ? host : "?";
	for (size_t i = 0; i < a->nelsewhere; i++) {
		elsewherecount *e = &a->elsewhere[i];
		if (e->port == port && !strcmp(e->secret, name) && !strcmp(e->host, host)) {
			e->n++;
			return 0;
		}
	}
	elsewherecount *v = a->nelsewhere < AB_AUDIT_MAX_ELSEWHERE
				    ? realloc(a->elsewhere, (a->nelsewhere + 1) * sizeof(*v))
				    : NULL;
	char *h = v ? strdup(host) : NULL;
	if (v)
		a->elsewhere = v;
	if (!h) {
		a->elsewhere_other++;
		return -1;
	}
	elsewherecount *e = &a->elsewhere[a->nelsewhere++];
	*e = (elsewherecount){.host = h, .port = port, .n = 1};
	memcpy(e->secret, name, sizeof(name));
	return 1;
}

/* Names and paths come from inside the sandbox: no byte of them reaches the
 * terminal as a control character. */
static void put_clean(FILE *out, const char *s)
{
	char c[4 * 64 + 1]; /* the longest field (what) escaped */
	ab_clean(s, c, sizeof(c));
	fputs(c, out);
}

/* "agentbox: denied syscalls: keyctl x3 (python3), mount (sh)" - one line per
 * category, the first 8 entries. */
static void summary_denials(const ab_audit *a, FILE *out)
{
	static const struct {
		const char *category, *label;
	} cats[] = {{"syscall", "syscalls"}, {"file", "files"}, {"socket", "unix sockets"}};
	for (size_t c = 0; c < AB_ARRAY_SIZE(cats); c++) {
		size_t shown = 0, more = 0;
		for (size_t i = 0; i < a->ndenials; i++) {
			const denialcount *d = &a->denials[i];
			if (strcmp(d->category, cats[c].category) != 0)
				continue;
			if (shown == 8) {
				more++;
				continue;
			}
			fprintf(out, "%s%s", shown ? ", " : "agentbox: denied ",
				shown ? "" : cats[c].label);
			fputs(shown ? "" : ": ", out);
			put_clean(out, d->what);
			if (d->n > 1)
				fprintf(out, " x%llu", (unsigned long long)d->n);
			fputs(" (", out);
			put_clean(out, d->comm);
			fputc(')', out);
			shown++;
		}
		if (more)
			fprintf(out, ", %zu more", more);
		if (shown)
			fputc('\n', out);
	}
	if (a->denials_other)
		fprintf(out, "agentbox: %llu more denials (see the audit log)\n",
			(unsigned long long)a->denials_other);
}

/* "agentbox: placeholders sent on unchanged to hosts they are not bound to:
 * GH_TOKEN to api.anthropic.com:443 x12" - the first 8 pairs. */
static void summary_elsewhere(const ab_audit *a, FILE *out)
{
	size_t shown = 0;
	if (!a->nelsewhere && !a->elsewhere_other)
		return;
	fputs("agentbox: placeholders sent on unchanged to hosts they are not bound to:", out);
	for (size_t i = 0; i < a->nelsewhere && shown < 8; i++, shown++) {
		const elsewherecount *e = &a->elsewhere[i];
		fputs(shown ? ", " : " ", out);
		put_clean(out, e->secret);
		fputs(" to ", out);
		put_clean(out, e->host);
		fprintf(out, ":%u", e->port);
		if (e->n > 1)
			fprintf(out, " x%llu", (unsigned long long)e->n);
	}
	if (a->nelsewhere > shown)
		fprintf(out, ", %zu more", a->nelsewhere - shown);
	if (a->elsewhere_other)
		fprintf(out, "%s%llu more request%s (see the audit log)", shown ? ", " : " ",
			(unsigned long long)a->elsewhere_other, a->elsewhere_other == 1 ? "" : "s");
	fputc('\n', out);
}

void ab_audit_summary(const ab_audit *a, FILE *out)
{
	if (!a)
		return;
	if (a->execs)
		fprintf(out, "agentbox: %llu command%s recorded in the audit log\n",
			(unsigned long long)a->execs, a->execs == 1 ? "" : "s");
	summary_denials(a, out);
	summary_elsewhere(a, out);
	size_t reached = 0, refused = 0;
	for (size_t i = 0; i < a->nhosts; i++) {
		reached += a->hosts[i].allowed > 0;
		refused += a->hosts[i].denied > 0;
	}
	if (!reached && !refused && !a->dns_denied)
		return;
	fprintf(out, "agentbox: network: %zu destination%s reached, %zu refused", reached,
		reached == 1 ? "" : "s", refused);
	if (a->dns_denied)
		fprintf(out, ", %llu DNS lookup%s refused", (unsigned long long)a->dns_denied,
			a->dns_denied == 1 ? "" : "s");
	fputc('\n', out);
	size_t shown = 0;
	for (size_t i = 0; i < a->nhosts && shown < 20; i++) {
		const hostcount *h = &a->hosts[i];
		if (!h->allowed)
			continue;
		char up[32], down[32];
		ab_fmt_bytes(up, sizeof(up), h->up);
		ab_fmt_bytes(down, sizeof(down), h->down);
		fprintf(out, "  reached  %s:%u  %llu request%s, %s up, %s down\n", h->host, h->port,
			(unsigned long long)h->allowed, h->allowed == 1 ? "" : "s", up, down);
		shown++;
	}
	for (size_t i = 0; i < a->nhosts && shown < 40; i++) {
		const hostcount *h = &a->hosts[i];
		if (!h->denied)
			continue;
		fprintf(out, "  REFUSED  %s:%u  %llu attempt%s\n", h->host, h->port,
			(unsigned long long)h->denied, h->denied == 1 ? "" : "s");
		shown++;
	}
	if (a->nhosts > shown || a->dropped)
		fprintf(out, "  ... more in the audit log (--log FILE)\n");
}
