/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for src/observe/otlp.c's pure parts: the collector URL and an audit
 * event as an OTLP LogRecord (OTLP/JSON: 64-bit integers as strings,
 * arrays and objects as arrayValue/kvlistValue, nesting capped).
 */
#include "unit.h"

#include "agentbox/otlp.h"

#include <string.h>

static void url_ok(const char *url, const char *host, const char *port, const char *path)
{
	ab_otlp_url u;
	ab_err err = {0};
	assert_int_equal(ab_otlp_parse_url(url, &u, &err), 0);
	assert_string_equal(u.host, host);
	assert_string_equal(u.port, port);
	assert_string_equal(u.path, path);
}

static void url_bad(const char *url, const char *why)
{
	ab_otlp_url u;
	ab_err err = {0};
	assert_true(ab_otlp_parse_url(url, &u, &err) < 0);
	if (!strstr(err.msg, why))
		fail_msg("%s: expected \"%s\" in \"%s\"", url, why, err.msg);
}

static void test_url(void **state)
{
	(void)state;
	url_ok("http://127.0.0.1", "127.0.0.1", "4318", "/v1/logs");
	url_ok("http://127.0.0.1/", "127.0.0.1", "4318", "/v1/logs");
	url_ok("HTTP://collector.example:80/otlp/v1/logs", "collector.example", "80",
	       "/otlp/v1/logs");
	url_ok("http://[::1]:4319", "::1", "4319", "/v1/logs");
	url_ok("http://[fe80::1]/x", "fe80::1", "4318", "/x");
	url_ok("http://h:0065535", "h", "65535", "/v1/logs");
	url_bad("https://127.0.0.1", "https is not supported");
	url_bad("ftp://127.0.0.1", "not an http:// URL");
	url_bad("127.0.0.1:4318", "not an http:// URL");
	url_bad("http://", "no host");
	url_bad("http://:4318", "no host");
	url_bad("http://u:p@host", "user information");
	url_bad("http://host:", "bad port");
	url_bad("http://host:0", "bad port");
	url_bad("http://host:65536", "bad port");
	url_bad("http://host:99999999999999999999", "bad port");
	url_bad("http://host:4x", "bad port");
	url_bad("http://ho st", "bad host name");
	url_bad("http://host_name", "bad host name");
	url_bad("http://[::1", "unterminated");
	url_bad("http://[::1]x", "bad host");
	url_bad("http://[zz::1]", "bad IPv6");
	url_bad("http://host/a?b", "query");
	url_bad("http://host#f", "query or fragment");
	url_bad("http://host/a b", "bad character");
	url_bad("http://host/a\r\nX: y", "bad character");
	char longp[700];
	memset(longp, 'a', sizeof(longp));
	memcpy(longp, "http://h/", 9);
	longp[sizeof(longp) - 1] = '\0';
	url_bad(longp, "path too long");
}

static const json_t *attr(const json_t *rec, const char *key)
{
	size_t i;
	const json_t *a;
	json_array_foreach(json_object_get(rec, "attributes"), i, a)
	{
		if (strcmp(json_string_value(json_object_get(a, "key")), key) == 0)
			return json_object_get(a, "value");
	}
	return NULL;
}

static void test_record(void **state)
{
	(void)state;
	json_error_t je;
	json_t *line = json_loads("{\"ts\": \"2026-11-30T00:00:00.000Z\", \"event\": \"exec\", "
				  "\"pid\": 12, \"argv\": [\"ls\", \"-l\"], \"truncated\": true, "
				  "\"x\": null, \"r\": 1.5, \"o\": {\"a\": [1, {\"b\": \"c\"}]}}",
				  JSON_PRESERVE_ORDER, &je);
	assert_non_null(line);
	struct timespec at = {.tv_sec = 1764460800, .tv_nsec = 123456789};
	json_t *rec = ab_otlp_record(line, NULL, &at);
	assert_non_null(rec);
	assert_string_equal(json_string_value(json_object_get(rec, "timeUnixNano")),
			    "1764460800123456789");
	assert_string_equal(json_string_value(json_object_get(rec, "eventName")), "exec");
	assert_string_equal(json_string_value(json_object_get(rec, "severityText")), "INFO");
	assert_int_equal(json_integer_value(json_object_get(rec, "severityNumber")), 9);
	assert_null(attr(rec, "agentbox.ts"));
	assert_null(attr(rec, "agentbox.event"));
	assert_string_equal(
		json_string_value(json_object_get(attr(rec, "event.name"), "stringValue")), "exec");
	assert_string_equal(
		json_string_value(json_object_get(attr(rec, "agentbox.pid"), "intValue")), "12");
	assert_true(json_is_true(json_object_get(attr(rec, "agentbox.truncated"), "boolValue")));
	assert_int_equal(json_object_size(attr(rec, "agentbox.x")), 0);
	assert_true(json_real_value(json_object_get(attr(rec, "agentbox.r"), "doubleValue")) ==
		    1.5);
	char *s = json_dumps(attr(rec, "agentbox.argv"), JSON_COMPACT);
	assert_string_equal(s, "{\"arrayValue\":{\"values\":[{\"stringValue\":\"ls\"},"
			       "{\"stringValue\":\"-l\"}]}}");
	free(s);
	s = json_dumps(attr(rec, "agentbox.o"), JSON_COMPACT);
	assert_string_equal(
		s, "{\"kvlistValue\":{\"values\":[{\"key\":\"a\",\"value\":"
		   "{\"arrayValue\":{\"values\":[{\"intValue\":\"1\"},{\"kvlistValue\":"
		   "{\"values\":[{\"key\":\"b\",\"value\":{\"stringValue\":\"c\"}}]}}]}}}]}}");
	free(s);
	/* the body is the line itself */
	json_t *body = json_loads(
		json_string_value(json_object_get(json_object_get(rec, "body"), "stringValue")), 0,
		&je);
	assert_true(json_equal(body, line));
	json_decref(body);
	json_decref(rec);
	json_decref(line);

	/* denials, refusals and warnings are WARN */
	const char *warn[] = {"{\"event\": \"denied\"}", "{\"event\": \"warning\"}",
			      "{\"event\": \"placeholder-elsewhere\"}",
			      "{\"event\": \"request\", \"decision\": \"deny\"}",
			      "{\"event\": \"dns\", \"decision\": \"nxdomain\"}"};
	for (size_t i = 0; i < sizeof(warn) / sizeof(warn[0]); i++) {
		line = json_loads(warn[i], 0, &je);
		rec = ab_otlp_record(line, NULL, &at);
		assert_string_equal(json_string_value(json_object_get(rec, "severityText")),
				    "WARN");
		json_decref(rec);
		json_decref(line);
	}
	line = json_loads("{\"event\": \"request\", \"decision\": \"allow\"}", 0, &je);
	rec = ab_otlp_record(line, NULL, &at);
	assert_string_equal(json_string_value(json_object_get(rec, "severityText")), "INFO");
	json_decref(rec);
	json_decref(line);

	/* nesting deeper than any event: the rest as text, not recursion */
	char deep[512] = "{\"event\": \"x\", \"d\": ";
	for (int i = 0; i < 40; i++)
		strcat(deep, "[");
	for (int i = 0; i < 40; i++)
		strcat(deep, "]");
	strcat(deep, "}");
	line = json_loads(deep, 0, &je);
	assert_non_null(line);
	rec = ab_otlp_record(line, NULL, &at);
	assert_non_null(rec);
	s = json_dumps(attr(rec, "agentbox.d"), JSON_COMPACT);
	assert_non_null(strstr(s, "\"stringValue\":\"[[[")); /* capped at depth 8 */
	free(s);
	json_decref(rec);
	json_decref(line);
}

/* A collector whose name does not resolve: refused with the name in the
 * message (written before the half-made exporter is freed: ASan once saw
 * the message read freed memory).  In a network namespace of its own, so
 * no DNS query leaves the machine. */
static int new_unresolvable(void *arg)
{
	(void)arg;
	ab_otlp *o = NULL;
	ab_err err = {0};
	int r = ab_otlp_new("http://no-such-host.invalid:4318", "p", &o, &err);
	return r < 0 && !o && strstr(err.msg, "cannot resolve no-such-host.invalid") ? 0 : 1;
}

static void test_new_unresolvable(void **state)
{
	int st = unit_in_new_ns(CLONE_NEWNET, new_unresolvable, NULL);
	if (st == 77)
		skip();
	assert_int_equal(st, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_url),
		cmocka_unit_test(test_record),
		cmocka_unit_test(test_new_unresolvable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
