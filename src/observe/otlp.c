/* SPDX-License-Identifier: MIT */
/*
 * OTLP/HTTP export of the audit events (include/agentbox/otlp.h).
 *
 * Shape: the emitting threads (the event loop, the supervisor) turn each
 * event into a LogRecord and append it to a bounded queue under a mutex; one
 * exporter thread takes up to AB_OTLP_BATCH records at a time, wraps them in
 * resourceLogs/scopeLogs and POSTs them with blocking I/O and timeouts on a
 * fresh connection ("Connection: close"), then reads only the status line
 * (ab_http_parse_response_head, the proxy's fuzzed parser, with limits).
 * Nothing here parses bytes from the sandbox; the collector's answer is the
 * only input, and only its status is used.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "agentbox/http.h"
#include "agentbox/otlp.h"

#define OTLP_DEFAULT_PORT "4318"
#define OTLP_DEFAULT_PATH "/v1/logs"
#define OTLP_DEPTH_MAX 8

/* ------------------------------------------------------------ pure pieces */

int ab_otlp_parse_url(const char *url, ab_otlp_url *out, ab_err *err)
{
	memset(out, 0, sizeof(*out));
	if (strncasecmp(url, "https://", 8) == 0)
		return ab_fail(err, 0,
			       "--otlp %s: https is not supported; point it at a collector on "
			       "this host over http (e.g. http://127.0.0.1:4318)",
			       url);
	if (strncasecmp(url, "http://", 7) != 0)
		return ab_fail(err, 0, "--otlp %s: not an http:// URL", url);
	const char *a = url + 7;
	size_t alen = strcspn(a, "/?#");
	if (memchr(a, '@', alen))
		return ab_fail(err, 0, "--otlp %s: user information is not supported", url);
	const char *host = a, *port = NULL;
	size_t hlen;
	if (alen && a[0] == '[') {
		const char *rb = memchr(a, ']', alen);
		if (!rb)
			return ab_fail(err, 0, "--otlp %s: unterminated [IPv6 address]", url);
		host = a + 1;
		hlen = (size_t)(rb - host);
		if (rb + 1 < a + alen) {
			if (rb[1] != ':')
				return ab_fail(err, 0, "--otlp %s: bad host", url);
			port = rb + 2;
		}
		for (size_t i = 0; i < hlen; i++)
			if (!strchr("0123456789abcdefABCDEF:.", host[i]))
				return ab_fail(err, 0, "--otlp %s: bad IPv6 address", url);
	} else {
		const char *colon = memchr(a, ':', alen);
		hlen = colon ? (size_t)(colon - a) : alen;
		port = colon ? colon + 1 : NULL;
		for (size_t i = 0; i < hlen; i++)
			if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.",
				    host[i]))
				return ab_fail(err, 0, "--otlp %s: bad host name", url);
	}
	if (hlen == 0 || hlen >= sizeof(out->host))
		return ab_fail(err, 0, "--otlp %s: no host, or a host name too long", url);
	memcpy(out->host, host, hlen);
	if (port) {
		size_t plen = (size_t)(a + alen - port);
		unsigned long v = 0;
		for (size_t i = 0; i < plen; i++) {
			if (port[i] < '0' || port[i] > '9' || v > 65535)
				return ab_fail(err, 0, "--otlp %s: bad port", url);
			v = v * 10 + (unsigned long)(port[i] - '0');
		}
		if (plen == 0 || v == 0 || v > 65535)
			return ab_fail(err, 0, "--otlp %s: bad port", url);
		snprintf(out->port, sizeof(out->port), "%lu", v);
	} else {
		snprintf(out->port, sizeof(out->port), "%s", OTLP_DEFAULT_PORT);
	}
	const char *path = a + alen;
	if (*path == '?' || *path == '#' || strpbrk(path, "?#"))
		return ab_fail(err, 0, "--otlp %s: a query or fragment is not supported", url);
	if (*path == '\0' || strcmp(path, "/") == 0)
		path = OTLP_DEFAULT_PATH;
	if (strlen(path) >= sizeof(out->path))
		return ab_fail(err, 0, "--otlp %s: path too long", url);
	for (const char *p = path; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			return ab_fail(err, 0, "--otlp %s: bad character in the path", url);
	snprintf(out->path, sizeof(out->path), "%s", path);
	return 0;
}

static json_t *any_value(const json_t *v, int depth);

static json_t *kv(const char *key, json_t *value)
{
	return value ? json_pack("{s:s, s:o}", "key", key, "value", value) : NULL;
}

static json_t *any_value(const json_t *v, int depth)
{
	char num[32];
	switch (json_typeof(v)) {
	case JSON_STRING:
		return json_pack("{s:s%}", "stringValue", json_string_value(v),
				 json_string_length(v));
	case JSON_INTEGER: /* OTLP/JSON: 64-bit integers are strings */
		snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		return json_pack("{s:s}", "intValue", num);
	case JSON_REAL: return json_pack("{s:f}", "doubleValue", json_real_value(v));
	case JSON_TRUE:
	case JSON_FALSE: return json_pack("{s:b}", "boolValue", json_is_true(v));
	case JSON_NULL: return json_object(); /* an empty AnyValue */
	default: break;
	}
	if (depth >= OTLP_DEPTH_MAX) { /* deeper than any event: as text */
		_cleanup_free_ char *s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
		return s ? json_pack("{s:s}", "stringValue", s) : NULL;
	}
	json_t *values = json_array();
	if (!values)
		return NULL;
	if (json_is_array(v)) {
		size_t i;
		const json_t *x;
		json_array_foreach(v, i, x)
		{
			if (json_array_append_new(values, any_value(x, depth + 1)) < 0)
				goto fail;
		}
		return json_pack("{s:{s:o}}", "arrayValue", "values", values);
	}
	const char *k;
	const json_t *x;
	json_object_foreach((json_t *)v, k, x)
	{
		if (json_array_append_new(values, kv(k, any_value(x, depth + 1))) < 0)
			goto fail;
	}
	return json_pack("{s:{s:o}}", "kvlistValue", "values", values);
fail:
	json_decref(values);
	return NULL;
}

static bool is_warning(const json_t *line, const char *event)
{
	static const char *const warn[] = {"denied",     "denied-repeat",  "warning",
					   "suppressed", "secret-skipped", "placeholder-elsewhere"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(warn); i++)
		if (strcmp(event, warn[i]) == 0)
			return true;
	const char *d = json_string_value(json_object_get(line, "decision"));
	return d && strcmp(d, "allow") != 0;
}

json_t *ab_otlp_record(const json_t *line, const char *body, const struct timespec *at)
{
	const char *event = json_string_value(json_object_get(line, "event"));
	if (!event)
		event = "";
	char ns[32];
	snprintf(ns, sizeof(ns), "%llu",
		 (unsigned long long)at->tv_sec * 1000000000ULL + (unsigned long long)at->tv_nsec);
	_cleanup_free_ char *own =
		body ? NULL
		     : json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	if (!body)
		body = own;
	json_t *attrs = json_array();
	if (!body || !attrs)
		goto fail;
	if (json_array_append_new(attrs,
				  kv("event.name", json_pack("{s:s}", "stringValue", event))) < 0)
		goto fail;
	const char *k;
	const json_t *x;
	json_object_foreach((json_t *)line, k, x)
	{
		if (strcmp(k, "ts") == 0 || strcmp(k, "event") == 0)
			continue;
		char key[96];
		snprintf(key, sizeof(key), "agentbox.%s", k);
		if (json_array_append_new(attrs, kv(key, any_value(x, 0))) < 0)
			goto fail;
	}
	bool warn = is_warning(line, event);
	return json_pack("{s:s, s:s, s:i, s:s, s:s, s:{s:s}, s:o}", "timeUnixNano", ns,
			 "observedTimeUnixNano", ns, "severityNumber", warn ? 13 : 9,
			 "severityText", warn ? "WARN" : "INFO", "eventName", event, "body",
			 "stringValue", body, "attributes", attrs);
fail:
	json_decref(attrs);
	return NULL;
}

/* ------------------------------------------------------------ the exporter */

struct ab_otlp {
	ab_otlp_url url;
	struct sockaddr_storage addr;
	socklen_t addrlen;
	json_t *resource; /* the Resource of every request */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	json_t *pending; /* LogRecords, under mu */
	bool stop;       /* under mu */
	bool started;
	pthread_t th;
	ab_otlp_stats st; /* sent/failed: the thread's; dropped: under mu */
};

static json_t *attr_str(const char *key, const char *value)
{
	return kv(key, json_pack("{s:s}", "stringValue", value));
}

__attribute__((format(printf, 2, 3))) static void set_error(ab_otlp *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(o->st.last_error, sizeof(o->st.last_error), fmt, ap);
	va_end(ap);
}

static int wait_fd(int fd, short ev, int ms)
{
	struct pollfd p = {.fd = fd, .events = ev};
	int r;
	do
		r = poll(&p, 1, ms);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		errno = ETIMEDOUT;
	return r > 0 ? 0 : -1;
}

/* POST one body; 0 if the collector answered 2xx. */
static int post(ab_otlp *o, const char *body, size_t blen)
{
	_cleanup_close_ int fd =
		socket(o->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0) {
		set_error(o, "socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&o->addr, o->addrlen) < 0) {
		int soe = 0;
		socklen_t sl = sizeof(soe);
		if (errno != EINPROGRESS || wait_fd(fd, POLLOUT, AB_OTLP_TIMEOUT_MS) < 0 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soe, &sl) < 0 || soe != 0) {
			set_error(o, "connect: %s", strerror(soe ? soe : errno));
			return -1;
		}
	}
	char head[1024];
	int hn =
		snprintf(head, sizeof(head),
			 "POST %s HTTP/1.1\r\nHost: %s%s%s:%s\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\nUser-Agent: agentbox/" AB_VERSION "\r\n"
			 "Connection: close\r\n\r\n",
			 o->url.path, strchr(o->url.host, ':') ? "[" : "", o->url.host,
			 strchr(o->url.host, ':') ? "]" : "", o->url.port, blen);
	const char *parts[2] = {head, body};
	size_t lens[2] = {(size_t)hn, blen};
	for (int i = 0; i < 2; i++) {
		size_t off = 0;
		while (off < lens[i]) {
			ssize_t w = send(fd, parts[i] + off, lens[i] - off, MSG_NOSIGNAL);
			if (w > 0) {
				off += (size_t)w;
				continue;
			}
			if (w < 0 && (errno == EAGAIN || errno == EINTR) &&
			    wait_fd(fd, POLLOUT, AB_OTLP_TIMEOUT_MS) == 0)
				continue;
			set_error(o, "send: %s", strerror(errno));
			return -1;
		}
	}
	char buf[AB_OTLP_HEAD_MAX];
	size_t got = 0;
	bool fresh = false; /* bytes arrived that were not parsed yet */
	ab_http_limits lim = {.max_head = sizeof(buf), .max_line = 4096, .max_headers = 100};
	for (;;) {
		ab_http_resp resp;
		int pr = fresh ? ab_http_parse_response_head(buf, got, &lim, &resp) : 0;
		if (pr < 0) {
			set_error(o, "the collector's answer is not HTTP/1.x: %s",
				  resp.reason ? resp.reason : "malformed");
			return -1;
		}
		if (pr > 0 && resp.code < 200) { /* an interim answer: the next head */
			memmove(buf, buf + pr, got - (size_t)pr);
			got -= (size_t)pr;
			fresh = got > 0;
			continue;
		}
		if (pr > 0 && resp.code < 300)
			return 0;
		if (pr > 0) {
			set_error(o, "the collector answered HTTP %d", resp.code);
			return -1;
		}
		if (got == sizeof(buf)) {
			set_error(o, "the collector's answer is too long");
			return -1;
		}
		ssize_t r = recv(fd, buf + got, sizeof(buf) - got, 0);
		if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (wait_fd(fd, POLLIN, AB_OTLP_TIMEOUT_MS) < 0) {
				set_error(o, "no answer: %s", strerror(errno));
				return -1;
			}
			continue;
		}
		if (r <= 0) {
			set_error(o, "the collector closed the connection without an answer");
			return -1;
		}
		got += (size_t)r;
		fresh = true;
	}
}

/* Send BATCH (an array of LogRecords, stolen); 0 if the collector took it. */
static int send_batch(ab_otlp *o, json_t *batch)
{
	size_t n = json_array_size(batch);
	json_t *req = json_pack("{s:[{s:O, s:[{s:{s:s, s:s}, s:o}]}]}", "resourceLogs", "resource",
				o->resource, "scopeLogs", "scope", "name", "agentbox", "version",
				AB_VERSION, "logRecords", batch);
	_cleanup_free_ char *body = req ? json_dumps(req, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
	json_decref(req);
	if (!body) {
		set_error(o, "encode: %s", strerror(ENOMEM));
		o->st.failed += n;
		return -1;
	}
	if (post(o, body, strlen(body)) == 0) {
		o->st.sent += n;
		return 0;
	}
	o->st.failed += n;
	return -1;
}

static void *exporter(void *arg)
{
	ab_otlp *o = arg;
	pthread_mutex_lock(&o->mu);
	for (;;) {
		if (!o->stop && json_array_size(o->pending) < AB_OTLP_BATCH) {
			struct timespec until;
			clock_gettime(CLOCK_MONOTONIC, &until);
			until.tv_sec += AB_OTLP_FLUSH_MS / 1000;
			until.tv_nsec += (long)(AB_OTLP_FLUSH_MS % 1000) * 1000000L;
			if (until.tv_nsec >= 1000000000L) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000L;
			}
			int r = 0;
			while (!o->stop && json_array_size(o->pending) < AB_OTLP_BATCH && r == 0)
				r = pthread_cond_timedwait(&o->cv, &o->mu, &until);
		}
		size_t n = json_array_size(o->pending);
		if (n == 0 && o->stop)
			break;
		if (n == 0)
			continue;
		/* take one batch; the rest waits for the next turn */
		json_t *batch = json_array();
		size_t take = n < AB_OTLP_BATCH ? n : AB_OTLP_BATCH;
		for (size_t i = 0; batch && i < take; i++)
			json_array_append(batch, json_array_get(o->pending, i));
		for (size_t i = 0; batch && i < take; i++)
			json_array_remove(o->pending, 0);
		pthread_mutex_unlock(&o->mu);
		int r = batch ? send_batch(o, batch) : -1;
		pthread_mutex_lock(&o->mu);
		/* out of memory, or the collector failed on the way out: what waits
		 * is lost (counted) rather than each batch waiting out its timeouts */
		if (!batch || (r < 0 && o->stop)) {
			o->st.failed += json_array_size(o->pending);
			json_array_clear(o->pending);
		}
	}
	pthread_mutex_unlock(&o->mu);
	return NULL;
}

int ab_otlp_new(const char *url, const char *profile, ab_otlp **out, ab_err *err)
{
	ab_otlp *o = calloc(1, sizeof(*o));
	if (!o)
		return ab_fail(err, ENOMEM, "--otlp");
	if (ab_otlp_parse_url(url, &o->url, err) < 0) {
		free(o);
		return -1;
	}
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG}, *ai = NULL;
	int g = getaddrinfo(o->url.host, o->url.port, &hints, &ai);
	if (g != 0 || !ai || ai->ai_addrlen > sizeof(o->addr)) {
		/* the message names the host: written before O goes */
		int r = ab_fail(err, 0, "--otlp %s: cannot resolve %s: %s", url, o->url.host,
				g ? gai_strerror(g) : "no address");
		free(o);
		if (ai)
			freeaddrinfo(ai);
		return r;
	}
	memcpy(&o->addr, ai->ai_addr, ai->ai_addrlen);
	o->addrlen = ai->ai_addrlen;
	freeaddrinfo(ai);
	char host[256] = "";
	(void)gethostname(host, sizeof(host) - 1);
	char pid[24];
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	o->resource =
		json_pack("{s:[o, o, o, o, o]}", "attributes", attr_str("service.name", "agentbox"),
			  attr_str("service.version", AB_VERSION), attr_str("host.name", host),
			  kv("process.pid", json_pack("{s:s}", "intValue", pid)),
			  attr_str("agentbox.profile", profile ? profile : ""));
	o->pending = json_array();
	if (!o->resource || !o->pending) {
		json_decref(o->resource);
		json_decref(o->pending);
		free(o);
		return ab_fail(err, ENOMEM, "--otlp");
	}
	pthread_mutex_init(&o->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&o->cv, &ca);
	pthread_condattr_destroy(&ca);
	*out = o;
	return 0;
}

int ab_otlp_run(ab_otlp *o, ab_err *err)
{
	if (!o || o->started)
		return 0;
	/* the thread must not take the signals the loop waits for */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int r = pthread_create(&o->th, NULL, exporter, o);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r != 0)
		return ab_fail(err, r, "--otlp: start the exporter");
	o->started = true;
	return 0;
}

void ab_otlp_push(ab_otlp *o, const json_t *line, const char *body, const struct timespec *at)
{
	if (!o)
		return;
	json_t *rec = ab_otlp_record(line, body, at);
	pthread_mutex_lock(&o->mu);
	if (!rec || json_array_size(o->pending) >= AB_OTLP_MAX_PENDING ||
	    json_array_append_new(o->pending, rec) < 0) {
		if (rec && json_array_size(o->pending) >= AB_OTLP_MAX_PENDING)
			json_decref(rec);
		o->st.dropped++;
	} else if (json_array_size(o->pending) == AB_OTLP_BATCH) {
		pthread_cond_signal(&o->cv);
	}
	pthread_mutex_unlock(&o->mu);
}

void ab_otlp_finish(ab_otlp *o, ab_otlp_stats *stats)
{
	if (!o)
		return;
	pthread_mutex_lock(&o->mu);
	o->stop = true;
	pthread_cond_signal(&o->cv);
	pthread_mutex_unlock(&o->mu);
	if (o->started)
		pthread_join(o->th, NULL);
	else /* the run stopped before the thread started: send it from here */
		exporter(o);
	if (stats)
		*stats = o->st;
	pthread_cond_destroy(&o->cv);
	pthread_mutex_destroy(&o->mu);
	json_decref(o->pending);
	json_decref(o->resource);
	free(o);
}
