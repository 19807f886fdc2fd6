/* SPDX-License-Identifier: MIT */
/*
 * Credential brokering, the pure part (no network, no TLS): secrets, their
 * placeholders, the request-head swap and the scanner sets (scan.h) that the
 * proxy runs bodies and responses through; and, not pure, where a value is
 * read from (ab_secret_load).  What the sandbox sees and why is
 * docs/credentials.md; what a caller must know:
 *
 *   - A value lives only in its ab_secret (wiped by ab_secret_free); it has
 *     no control byte but HTAB.  A placeholder is [A-Za-z0-9_-], as long as
 *     the value unless it is a JWT one, so a body swap keeps the framing.
 *   - ab_secrets_rewrite_head swaps a placeholder in the places the profile
 *     allows on a request to a bound host, BLOCKs it anywhere else on such a
 *     request (the target is also searched percent-decoded), and leaves it
 *     alone on other hosts, reporting it in res->elsewhere (or BLOCKs it
 *     there too with refuse_elsewhere).  Headers may change length.
 *   - The scanner (scan.h) cannot see into coded bodies: the proxy asks for
 *     identity and refuses coded responses.
 *   - Only names reach the audit log (ab_secrets_names), never a value or a
 *     placeholder.
 */
#ifndef AGENTBOX_SECRETS_H
#define AGENTBOX_SECRETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentbox/common.h"
#include "agentbox/netpolicy.h"
#include "agentbox/scan.h"

#define AB_SECRET_NAME_MAX 64
#define AB_SECRET_VALUE_MAX 4096
#define AB_SECRETS_MAX 64 /* per profile: ab_swap_result.injected is a bitmask */
#define AB_PLACEHOLDER_PREFIX_MAX 32
#define AB_PLACEHOLDER_MIN_RANDOM 22 /* 22 x log2(62) > 130 bits */
#define AB_PLACEHOLDER_MAX AB_SECRET_VALUE_MAX
#define AB_SECRET_HEADER_MAX 64        /* length of an allowed header name */
#define AB_SECRET_MAX_HEADERS 16       /* allowed header names per secret */
#define AB_SECRET_FILE_MAX (64 * 1024) /* file and command sources */
#define AB_SECRET_CMD_TIMEOUT_MS 10000

/* A response pattern is a value encoded (percent-encoding triples it): the
 * scanner's limit must hold the longest. */
_Static_assert(AB_SCAN_MAX_PATTERN_LEN >= 4 * AB_SECRET_VALUE_MAX,
	       "encoded values fit the scanner");

/* ------------------------------------------------------------ placeholders */

/*
 * Fill OUT with a fresh placeholder: PREFIX (NULL or "" for none; at most
 * AB_PLACEHOLDER_PREFIX_MAX bytes of [A-Za-z0-9_-]) followed by random
 * characters from [A-Za-z0-9] (getrandom(2), rejection sampling: no modulo
 * bias).  Total length: LEN if LEN > 0, else VALUE_LEN (the same length as
 * the real value), but never fewer than strlen(PREFIX) +
 * AB_PLACEHOLDER_MIN_RANDOM.  Returns the length (OUT is NUL-terminated), or
 * -EINVAL (bad prefix, LEN or VALUE_LEN > AB_PLACEHOLDER_MAX), -ENOBUFS
 * (OUTSZ <= length), or the getrandom error.
 */
int ab_placeholder_make(const char *prefix, size_t len, size_t value_len, char *out, size_t outsz);

/*
 * The same, but the characters come from HMAC-SHA256 under KEY
 * (AB_PHKEY_LEN bytes, secret: src/creds/phkey.c keeps it outside every sandbox)
 * of a message that holds a fixed label, NAME, VALUE[0..VALUE_LEN) and
 * COUNTER, one 32-byte block after another: the same inputs give the same
 * placeholder (a "stable" placeholder), and without KEY it reveals nothing
 * about the value, not even to a dictionary (a weak value stays unguessable
 * from its placeholder).  COUNTER draws again (a placeholder that conflicts
 * with a masked response, src/egress/broker.c).  Errors as ab_placeholder_make,
 * plus -ENOMEM and -EIO (HMAC).
 */
#define AB_PHKEY_LEN 32
int ab_placeholder_derive(const char *prefix, size_t len, const unsigned char *key,
			  const char *name, const char *value, size_t value_len, uint32_t counter,
			  char *out, size_t outsz);

/*
 * A JWT-shaped placeholder for VALUE[0..LEN), a JWS in compact form
 * (header.payload.signature, each part non-empty unpadded base64url): the
 * same header and payload (their claims stay readable, as they are in the
 * real token: a harness decodes them locally) and, in place of the
 * signature, random bytes (getrandom) encoded as base64url of exactly the
 * signature's length (a valid encoding: strict decoders accept it).  So the
 * placeholder is as long as the value, and only the part that makes the
 * token usable differs.  The signature must carry at least
 * AB_JWT_SIG_MIN_BYTES bytes (>= 128 random bits in the placeholder).
 * Returns the length (OUT NUL-terminated), -EINVAL (not a JWS: not three
 * parts, empty part, a character outside [A-Za-z0-9_-], an impossible
 * base64 length), -ERANGE (signature too short), -ENOBUFS, or the getrandom
 * error.  Never looks at what the parts decode to.
 */
#define AB_JWT_SIG_MIN_BYTES 16
int ab_jwt_placeholder_make(const char *value, size_t len, char *out, size_t outsz);

/* ---------------------------------------------------------------- secrets */

typedef struct ab_secret {
	char name[AB_SECRET_NAME_MAX + 1];
	char *value; /* owned, NUL-terminated, wiped on free */
	size_t value_len;
	char *placeholder; /* owned, NUL-terminated */
	size_t placeholder_len;
	ab_netpolicy hosts; /* the bound hosts: allow list only */
	ab_strv headers;    /* lower-cased allowed header names */
	bool in_query, in_body;
	bool mask_in_body;     /* bound host, body, no in_body: mask instead of BLOCK */
	bool refuse_elsewhere; /* a host it is not bound to: BLOCK instead of
				  forwarding the placeholder unchanged */
	bool jwt;              /* the placeholder is JWT-shaped (ab_secret_set_placeholder_jwt) */
	bool places_given;     /* private: a place was added (no default headers) */
} ab_secret;

/* Zero *S and set its name (checked).  0 or -EINVAL. */
int ab_secret_init(ab_secret *s, const char *name, ab_err *err);
/* Bind to one more host rule (netpolicy syntax).  0 or -errno. */
int ab_secret_add_host(ab_secret *s, const char *rule, ab_err *err);
/* One allowed place: "header:NAME" (case-insensitive, a token), "query" or
 * "body".  0 or -EINVAL/-E2BIG/-ENOMEM. */
int ab_secret_add_place(ab_secret *s, const char *place, ab_err *err);
/* Set the value (checked as above).  Takes VALUE (malloc'd, LEN bytes plus a
 * NUL) in every case: on failure it is wiped and freed. */
int ab_secret_set_value(ab_secret *s, char *value, size_t len, ab_err *err);
/* Generate the placeholder (ab_placeholder_make with the value's length;
 * call after ab_secret_set_value).  LEN 0: same length as the value. */
int ab_secret_set_placeholder(ab_secret *s, const char *prefix, size_t len, ab_err *err);
/* The same with KEY (NULL: random): ab_placeholder_derive of the name and value. */
int ab_secret_set_placeholder_keyed(ab_secret *s, const char *prefix, size_t len,
				    const unsigned char *key, uint32_t counter, ab_err *err);
/* Make the placeholder JWT-shaped (ab_jwt_placeholder_make; call after
 * ab_secret_set_value) and set s->jwt.  An error names the secret, never the
 * value: -EINVAL (the value is not a JWT), -ERANGE (its signature is too
 * short for an unguessable placeholder). */
int ab_secret_set_placeholder_jwt(ab_secret *s, ab_err *err);
/* Complete and check: a value, a placeholder and at least one host; applies
 * the default headers when no place was added.  0 or -EINVAL. */
int ab_secret_finish(ab_secret *s, ab_err *err);
/* Wipe the value (and the placeholder) and free everything; *S is zeroed. */
void ab_secret_free(ab_secret *s);
/* Is HOST:PORT one of the secret's bound hosts? */
bool ab_secret_bound(const ab_secret *s, const char *host, unsigned port);
/* Does a request to HOST:PORT carry S's placeholder on unchanged (not bound
 * there, no refuse_elsewhere)? */
bool ab_secret_forwards_elsewhere(const ab_secret *s, const char *host, unsigned port);
/* Checks over the whole set: N <= AB_SECRETS_MAX, unique names, every secret
 * finished.  0 or -EINVAL/-E2BIG. */
int ab_secrets_check(const ab_secret *secs, size_t n, ab_err *err);
/* "A,B" (the names of the bits set in MASK, comma-separated; truncated to
 * fit, always NUL-terminated).  For the audit log. */
void ab_secrets_names(const ab_secret *secs, size_t n, uint64_t mask, char *buf, size_t bufsz);

/* ---------------------------------------------------------------- sources */

typedef enum ab_secret_src_kind {
	AB_SECRET_SRC_ENV = 0,     /* agentbox's own environment */
	AB_SECRET_SRC_FILE = 1,    /* the file's bytes, ONE trailing "\n" or "\r\n" stripped */
	AB_SECRET_SRC_COMMAND = 2, /* the command's stdout, trailing whitespace trimmed */
	AB_SECRET_SRC_JSON = 3,    /* the string at `pointer` in the JSON file `path`
				    (credfile.h: at most 64 KiB, no duplicate keys) */
} ab_secret_src_kind;

typedef struct ab_secret_source {
	ab_secret_src_kind kind;
	const char *env;     /* ENV: the variable's name */
	const char *path;    /* FILE: read as is (FIFOs and /dev/fd/N work) */
	char *const *argv;   /* COMMAND: NULL-terminated; argv[0] looked up in PATH */
	unsigned timeout_ms; /* COMMAND: 0 means AB_SECRET_CMD_TIMEOUT_MS */
	const char *pointer; /* JSON: RFC 6901 pointer to a string */
} ab_secret_source;

/*
 * Read the secret NAME from SRC into *VALUE (malloc'd, NUL-terminated; hand
 * it to ab_secret_set_value or free it with ab_secrets_wipe_free) and *LEN.
 * FILE: more than AB_SECRET_FILE_MAX bytes is refused.  COMMAND: run with
 * posix_spawnp, stdin /dev/null, stdout captured (at most
 * AB_SECRET_FILE_MAX), stderr passed through, signal mask and SIGPIPE reset;
 * killed (SIGKILL) after the timeout; a non-zero exit or a signal is an
 * error.  A missing or empty value is an error naming the secret and the
 * source, never the value; so is a value that breaks the value rules.
 * Returns 0 or -errno (-ENOENT missing, -ENODATA empty, -EFBIG too large,
 * -ETIMEDOUT, -ECHILD for a failed command, -EINVAL bad bytes).  JSON:
 * -ENOENT also when the file has nothing at the pointer (an absent login),
 * -EINVAL when it is not JSON or the value there is not a string.
 */
int ab_secret_load(const char *name, const ab_secret_source *src, char **value, size_t *len,
		   ab_err *err);

/* ------------------------------------------------- secrets x scanner sets */

/*
 * The response set: for every secret, the value and its encodings: base64
 * (standard and URL-safe; the value encoded from offset 0, padded and
 * unpadded, and the characters that depend only on the value for each of
 * the 3 alignments inside a longer blob, those of at least 8 characters),
 * percent-encoding (upper- and lower-case hex) and JSON escaping ('"', '\\',
 * and '/' as "\/"), each where it differs from the value.  Replacement: the
 * same encoding of the placeholder when it has the same length (it does for
 * the raw value and base64 by default) and it cannot rebuild a pattern with
 * the bytes around it (see ab_secrets_mask_conflict), else a run of '*' (or
 * of another byte no pattern contains).  Pattern ids are secret indexes.
 * Values of 1..3 bytes mask every occurrence of those bytes: that is the
 * price of such a secret.
 */
int ab_secrets_response_set(const ab_secret *secs, size_t n, ab_scan_set **out, ab_err *err);

/*
 * Could a masked response show a real value?  A replacement (the placeholder
 * or its encoding) whose tail is the head of some value or encoding (or whose
 * head is the tail of one, beyond what it shares with the value it replaces,
 * or which contains one or lies in one) rebuilds it with the bytes the
 * upstream sends next to it.  Returns the index of the first secret (not in
 * SKIP: bit i = secret i) whose placeholder could, -1 when none can;
 * -ENOMEM, -E2BIG (too many), -EINVAL (one without value or placeholder).  The broker draws that
 * secret's placeholder again; ab_secrets_response_set masks what is left with
 * a filler.
 */
int ab_secrets_mask_conflict(const ab_secret *secs, size_t n, uint64_t skip);

/*
 * The request-body set for one destination: every placeholder; REPLACE by
 * the value if the secret is bound to HOST:PORT, allows "body" and its
 * placeholder is as long as its value; REPLACE by the mask (ab_secret_mask)
 * if the secret is bound to HOST:PORT, does not allow "body" and has
 * mask_in_body; REPLACE by itself (sent unchanged, counted) if the secret
 * is not bound to HOST:PORT and has no refuse_elsewhere
 * (ab_secret_forwards_elsewhere); else BLOCK.  Pattern i is secret i
 * (ab_scanner_count(s, i) tells whose placeholder was swapped, masked or
 * sent on unchanged).
 */
int ab_secrets_body_set(const ab_secret *secs, size_t n, const char *host, unsigned port,
			ab_scan_set **out, ab_err *err);
/* Does ab_secrets_body_set mask (not swap, not block) S's placeholder in a
 * body to HOST:PORT?  mask_in_body && !in_body && bound. */
bool ab_secret_masks_body(const ab_secret *s, const char *host, unsigned port);
#define AB_SECRET_MASK_TEXT "agentbox-masked"
/* Fill OUT[0..LEN) with the body mask of a LEN-byte placeholder:
 * AB_SECRET_MASK_TEXT then '*' up to LEN, or only '*' when LEN is shorter
 * than AB_SECRET_MASK_TEXT (no NUL is added). */
void ab_secret_mask(char *out, size_t len);

/* ---------------------------------------------------------- head rewrite */

#define AB_SWAP_PLACE_MAX 272 /* "host:" + any normalised host */

typedef struct ab_swap_result {
	bool blocked;
	const char *secret; /* blocked: the offending secret's name (in secs) */
	size_t secret_index;
	/* blocked: "host:evil.test" when the secret is not bound to the host,
	 * else where it was found: "header:x-foo", "header-name", "query",
	 * "path", "method", "authority", "body", "body (length differs)" */
	char place[AB_SWAP_PLACE_MAX];
	char where[AB_SWAP_PLACE_MAX]; /* where it was found, always */
	uint64_t injected;             /* bit i: secs[i]'s value was placed */
	uint64_t elsewhere;            /* bit i: secs[i]'s placeholder is in the head, which
				    goes to a host secs[i] is not bound to: left as it
				    is (ab_secret_forwards_elsewhere) */
} ab_swap_result;

/*
 * Rewrite one complete raw request head HEAD[0..LEN) (through its blank
 * line; already validated by the proxy; parsed again here with the hard
 * limits of http.h) for a request going to HOST:PORT (the destination the
 * proxy decided on).  Returns 0 with either *RES blocked (*OUT NULL) or
 * *OUT a malloc'd new head (NUL-terminated, *OUTLEN bytes) that the caller
 * frees with ab_secrets_wipe_free(*out, *outlen) once sent.  -EINVAL when
 * HEAD is not one complete head (or N > AB_SECRETS_MAX, or a secret has no
 * value or placeholder), -E2BIG when the result would exceed
 * AB_HTTP_HARD_MAX_HEAD (answer 431), -ENOMEM, -EPROTO if the new head does
 * not parse again (a bug: never forward it).  All failures: forward nothing.
 * Unless blocked, *RES->injected says whose values were placed and
 * *RES->elsewhere whose placeholders go on unchanged to a host they are not
 * bound to.
 */
int ab_secrets_rewrite_head(const ab_secret *secs, size_t n, const char *host, unsigned port,
			    const char *head, size_t len, char **out, size_t *outlen,
			    ab_swap_result *res);
/* explicit_bzero(p, len) then free(p); NULL is fine. */
void ab_secrets_wipe_free(char *p, size_t len);

/* Fill *RES (blocked) from a body-scanner hit of ab_secrets_body_set. */
void ab_secrets_body_blocked(const ab_secret *secs, size_t n, const char *host, unsigned port,
			     const ab_scan_hit *hit, ab_swap_result *res);

/* One or two printable lines for the 403 body and the log: which secret,
 * where, and how to allow it if that was intended.  Never a value. */
void ab_swap_explain(const ab_swap_result *res, char *buf, size_t bufsz);

#endif
