/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target (any process; fuzzing only): test-escape's canary
 * scanner and result lines.  The first byte selects (low bit):
 *   0  ab_canary_scan on the rest (exact size: ASan sees any read past n):
 *      the hits must equal a naive reference scanner (same tokens, same
 *      order) and each hash must be ab_canary_hash of the token
 *   1  the rest split at '\n' into result lines, each through
 *      ab_esc_result_parse: a parsed result keeps its invariants (known
 *      probe, bounded attempts and hashes, the verdict follows the
 *      attempts), survives a JSON round trip with the same verdict, and
 *      the whole set goes through TAP, JUnit, JSON and the summary with no
 *      NUL and no control character but '\n' and '\t' in the output (DEL
 *      only in JSON), and
 *      an exit status that agrees with the verdicts
 * A small probe table stands in for the registry (which would pull in
 * every probe).
 */
#include "agentbox/escape.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ------------------------------------------------------ stand-in registry */

// clang-format off
const ab_probe_def ab_probes[] = {
	{ "CTL-01", "workspace-and-tmp-work", AB_CAT_CTL, true, false, "", NULL },
	{ "PRC-01", "privilege-posture", AB_CAT_PRC, false, true, "", NULL },
	{ "FS-01", "write-outside-workspace", AB_CAT_FS, false, false, "", NULL },
	{ "SEC-01", "ssh-keys", AB_CAT_SEC, false, false, "", NULL },
	{ "NET-06", "host-loopback", AB_CAT_NET, false, false, "", NULL },
	{ "TTY-01", "tiocsti", AB_CAT_TTY, false, false, "", NULL },
};
// clang-format on
const size_t ab_nprobes = sizeof(ab_probes) / sizeof(ab_probes[0]);

const ab_probe_def *ab_probe_find(const char *id)
{
	for (size_t i = 0; id && i < ab_nprobes; i++)
		if (strcasecmp(ab_probes[i].id, id) == 0)
			return &ab_probes[i];
	return NULL;
}

/* ---------------------------------------------------------------- scanner */

#define MAXHITS 64

typedef struct hits {
	size_t n;
	char h[MAXHITS][AB_CANARY_HASH_HEX + 1];
} hits;

static void on_hit(const char *hash, void *ctx)
{
	hits *h = ctx;
	if (strlen(hash) != AB_CANARY_HASH_HEX)
		__builtin_trap();
	if (h->n < MAXHITS)
		memcpy(h->h[h->n], hash, AB_CANARY_HASH_HEX + 1);
	h->n++;
}

static int hexl(uint8_t c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Token at p (p[0..avail)), by the grammar written out once more. */
static size_t ref_token(const uint8_t *p, size_t avail)
{
	static const char pre[] = "ABCANARY-";
	size_t k = 0, i;

	if (avail < 9 || memcmp(p, pre, 9) != 0)
		return 0;
	for (i = 9; i < avail && ((p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9'));
	     i++)
		k++;
	if (k < 2 || k > 12 || i >= avail || p[i] != '-')
		return 0;
	i++;
	for (size_t j = 0; j < AB_CANARY_HEX; j++, i++)
		if (i >= avail || !hexl(p[i]))
			return 0;
	if (i < avail && hexl(p[i]))
		return 0;
	return i;
}

static void fuzz_scan(const uint8_t *d, size_t n)
{
	hits got = {0}, want = {0};
	int r = ab_canary_scan(d, n, on_hit, &got);

	if (r < 0 || (size_t)r != got.n)
		__builtin_trap();
	for (size_t i = 0; i < n;) {
		size_t len = ref_token(d + i, n - i);
		if (!len) {
			i++;
			continue;
		}
		char h[AB_CANARY_HASH_HEX + 1];
		ab_canary_hash((const char *)d + i, len, h);
		on_hit(h, &want);
		i += len;
	}
	if (got.n != want.n)
		__builtin_trap();
	for (size_t i = 0; i < got.n && i < MAXHITS; i++)
		if (strcmp(got.h[i], want.h[i]) != 0)
			__builtin_trap();
}

/* ---------------------------------------------------------------- results */

static void check_result(const ab_esc_result *r)
{
	bool esc = false, bad = false;

	if (!r->def || r->nattempts > AB_ESC_MAX_ATTEMPTS || r->found.n > AB_ESC_MAX_FOUND ||
	    (unsigned)r->verdict > AB_ESC_SKIP)
		__builtin_trap();
	for (size_t i = 0; i < r->nattempts; i++) {
		if (!r->attempts[i].what)
			__builtin_trap();
		esc |= r->attempts[i].verdict == AB_ESC_ESCAPED;
		bad |= r->attempts[i].verdict != AB_ESC_OK;
	}
	if (r->def->control ? (bad && r->verdict != AB_ESC_ERROR) || r->verdict == AB_ESC_ESCAPED
			    : esc && r->verdict != AB_ESC_ESCAPED)
		__builtin_trap();
	if (r->nattempts == 0 && r->verdict == AB_ESC_OK)
		__builtin_trap();
}

static void round_trip(const ab_esc_result *r)
{
	json_t *j = ab_esc_result_json(r);
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	ab_esc_result back;
	ab_err err;

	if (!s)
		__builtin_trap();
	if (ab_esc_result_parse(s, ab_probes, ab_nprobes, &back, &err) < 0)
		__builtin_trap();
	if (back.def != r->def || back.verdict != r->verdict || back.nattempts != r->nattempts ||
	    back.found.n != r->found.n)
		__builtin_trap();
	ab_esc_result_free(&back);
	free(s);
	json_decref(j);
}

/* JSON may carry DEL raw (valid JSON); everything else never does. */
static void check_output(const char *buf, size_t len, bool json)
{
	if (strlen(buf) != len)
		__builtin_trap();
	for (size_t i = 0; i < len; i++)
		if (((unsigned char)buf[i] < 0x20 && buf[i] != '\n' && buf[i] != '\t') ||
		    (buf[i] == 0x7f && !json))
			__builtin_trap();
}

static void write_all(const ab_esc_results *rs)
{
	for (int f = 0; f <= 3; f++) {
		char *buf = NULL;
		size_t len = 0;
		FILE *m = open_memstream(&buf, &len);
		ab_err err;
		if (!m)
			return;
		if (f < 3 && ab_esc_write(rs, (enum ab_esc_format)f, m, &err) < 0)
			__builtin_trap();
		if (f == 3)
			ab_esc_write_summary(rs, m);
		if (fclose(m) != 0)
			__builtin_trap();
		check_output(buf, len, f == AB_ESC_JSON);
		free(buf);
	}
}

static void check_exit(const ab_esc_results *rs)
{
	int ex = ab_esc_exit_status(rs), want = AB_ESC_EXIT_OK;
	bool esc = false, err = false;

	for (size_t i = 0; i < rs->n; i++) {
		esc |= rs->v[i].verdict == AB_ESC_ESCAPED;
		err |= rs->v[i].verdict == AB_ESC_ERROR;
	}
	if (esc)
		want = AB_ESC_EXIT_ESCAPE;
	else if (rs->not_in_effect)
		want = AB_ESC_EXIT_NOT_IN_EFFECT;
	else if (rs->lab_error)
		want = AB_ESC_EXIT_LAB;
	else if (err)
		want = AB_ESC_EXIT_ERRORS;
	if (ex != want)
		__builtin_trap();
}

static void fuzz_results(const uint8_t *d, size_t n, uint8_t flags)
{
	char *text = malloc(n + 1);
	ab_esc_results rs = {0};
	char *save = NULL;

	if (!text)
		return;
	memcpy(text, d, n);
	text[n] = '\0';
	rs.v = calloc(64, sizeof(*rs.v));
	if (!rs.v) {
		free(text);
		return;
	}
	for (char *l = strtok_r(text, "\n", &save); l && rs.n < 64;
	     l = strtok_r(NULL, "\n", &save)) {
		ab_err err;
		if (ab_esc_result_parse(l, ab_probes, ab_nprobes, &rs.v[rs.n], &err) < 0) {
			if (rs.v[rs.n].def || rs.v[rs.n].attempts)
				__builtin_trap();
			continue;
		}
		check_result(&rs.v[rs.n]);
		round_trip(&rs.v[rs.n]);
		rs.n++;
	}
	rs.not_in_effect = flags & 2;
	if (flags & 4)
		rs.lab_error = strdup("lab \x01<&>\"# failed");
	if (flags & 8)
		rs.profile = strdup("prof\xff\x1b[1m");
	check_exit(&rs);
	write_all(&rs);
	ab_esc_results_free(&rs);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if ((data[0] & 1) == 0) {
		/* exact-size copy: no slack after the last byte */
		uint8_t *buf = malloc(size - 1 ? size - 1 : 1);
		if (!buf)
			return 0;
		memcpy(buf, data + 1, size - 1);
		fuzz_scan(buf, size - 1);
		free(buf);
	} else {
		fuzz_results(data + 1, size - 1, data[0]);
	}
	return 0;
}
