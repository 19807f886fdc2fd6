/* SPDX-License-Identifier: MIT */
/*
 * credfile.h: credentials files (subscription logins), the pure part
 * (parent only).  A harness that keeps OAuth tokens in a JSON file (Claude
 * Code's ~/.claude/.credentials.json, Codex's ~/.codex/auth.json) gets a
 * RENDERED copy inside the sandbox: the same document with every brokered
 * value replaced by its placeholder.  When the harness refreshes its tokens,
 * the proxy captures the token endpoint's JSON response (new real values
 * in, placeholders out) and writes the new values back to the host file.
 *
 *   - JSON pointers (RFC 6901): "" (the whole document) or "/a/b/0", "~0"
 *     for '~' and "~1" for '/'; at most AB_JSON_POINTER_MAX bytes and
 *     AB_JSON_POINTER_DEPTH tokens.  An array index is a decimal without
 *     leading zeros ("-" is refused: nothing is appended).
 *   - documents: at most AB_CREDFILE_MAX bytes in memory, AB_CREDFILE_FILE_MAX
 *     read from a file; UTF-8 JSON (jansson), no
 *     duplicate keys, an object or an array at the top.  Rendering keeps
 *     every other key and value (re-serialised compactly: whitespace and
 *     the spelling of numbers may change, the meaning does not).
 *   - every buffer that held a document or a value is wiped before it is
 *     freed, jansson's own allocations included (ab_credfile_init installs
 *     a wiping free for jansson).
 */
#ifndef AGENTBOX_CREDFILE_H
#define AGENTBOX_CREDFILE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

#include "agentbox/common.h"

#define AB_CREDFILE_MAX (64 * 1024) /* a document in memory: a token response */
/* a file read from disk: a credentials file, or a harness's config that holds
 * a key among its state (~/.claude.json; Claude Code's own limit is 8 MiB) */
#define AB_CREDFILE_FILE_MAX (8 * 1024 * 1024)
#define AB_JSON_POINTER_MAX 256
#define AB_JSON_POINTER_DEPTH 16

/* Make jansson wipe what it frees (idempotent; call before parsing). */
void ab_credfile_init(void);

/* Is PTR a JSON pointer within the limits above?  0 or -EINVAL. */
int ab_json_pointer_check(const char *ptr);

/* The value at PTR in ROOT (borrowed), or NULL when absent or PTR is bad. */
json_t *ab_json_pointer_get(json_t *root, const char *ptr);

/* Parse BUF[0..LEN) (at most AB_CREDFILE_MAX bytes) into *OUT.  0, -EFBIG,
 * or -EINVAL (not JSON, duplicate keys, neither object nor array; *err
 * says where, never what). */
int ab_credfile_parse(const char *buf, size_t len, json_t **out, ab_err *err);

/* The whole of FD, a regular file of at most AB_CREDFILE_FILE_MAX bytes read
 * from its current offset (PATH names it in errors): *BUF malloc'd, *LEN
 * bytes in a buffer of *CAP (for the wipe).  A file that grows while it is
 * read is an error (EAGAIN).  0 or -errno with *ERR set. */
int ab_credfile_read_fd(int fd, const char *path, char **buf, size_t *len, size_t *cap,
			struct stat *st, ab_err *err);

/* Parse BUF[0..LEN) as a file's content (at most AB_CREDFILE_FILE_MAX bytes),
 * like ab_credfile_parse. */
int ab_credfile_parse_file(const char *buf, size_t len, json_t **out, ab_err *err);

/* Read PATH (a regular file, at most AB_CREDFILE_FILE_MAX bytes) and parse it.
 * 0, -ENOENT (absent, or empty: agentbox reserves an absent one with an
 * empty file), -EFBIG, -EINVAL or another -errno; *err names PATH. */
int ab_credfile_load(const char *path, json_t **out, ab_err *err);

/* The string at PTR: *VALUE malloc'd (NUL-terminated; wipe it), *LEN.
 * -ENOENT (absent), -EINVAL (not a string, or holds a NUL), -ENOMEM. */
int ab_credfile_get(json_t *root, const char *ptr, char **value, size_t *len);

/* Replace the string at PTR by S[0..N).  -ENOENT (absent), -EINVAL (there
 * but not a string), -ENOMEM. */
int ab_credfile_set(json_t *root, const char *ptr, const char *s, size_t n);

/* A new document holding only the parts of ROOT at PTRS[0..N) (objects on
 * the way are created; a pointer through an array, or to nothing, keeps
 * nothing).  *OUT is an object; -ENOMEM. */
int ab_credfile_keep(json_t *root, char *const *ptrs, size_t n, json_t **out);

/* Serialise ROOT compactly: *OUT malloc'd (wipe it), *LEN. */
int ab_credfile_dump(const json_t *root, char **out, size_t *len);

/*
 * Freshness fields written with rotated values ("rotate": {"stamp": {...}}):
 * the harness's own record of when its tokens were refreshed or expire, so
 * its next run outside (or the next sandbox) does not refresh again at once.
 *   "now"            the time of the refresh, RFC 3339 UTC with microseconds
 *                    (a JSON string; Codex's last_refresh);
 *   "expires_at_ms"  milliseconds since the epoch: the time of the refresh
 *                    plus the token response's "expires_in" seconds (a JSON
 *                    integer; Claude Code's claudeAiOauth.expiresAt); skipped
 *                    when the response has no positive integer expires_in
 *                    (at most AB_CREDFILE_EXPIRES_MAX).
 * A stamp goes where its pointer says: the member is added or replaced; the
 * parent must be an object in the file, else the stamp is skipped.
 */
#define AB_CREDFILE_STAMPS_MAX 16       /* per file and write-back */
#define AB_CREDFILE_STAMPS_PER_SECRET 8 /* in a profile's "stamp" */
#define AB_CREDFILE_EXPIRES_MAX (10LL * 366 * 24 * 3600)

typedef struct ab_credfile_stamps {
	const char *ptr[AB_CREDFILE_STAMPS_MAX];  /* borrowed */
	const char *kind[AB_CREDFILE_STAMPS_MAX]; /* "now" or "expires_at_ms" */
	size_t n;
	long long expires_in; /* the token response's, seconds; <= 0: unknown */
	long long now_us;     /* the refresh's time, microseconds since the epoch */
} ab_credfile_stamps;

/* Is KIND a stamp kind? */
bool ab_credfile_stamp_kind_ok(const char *kind);
/* Add (PTR, KIND) unless PTR is there already; 0, or -E2BIG when full. */
int ab_credfile_stamps_add(ab_credfile_stamps *st, const char *ptr, const char *kind);
/* The "expires_in" of a token response ROOT: a positive integer of at most
 * AB_CREDFILE_EXPIRES_MAX, else 0. */
long long ab_credfile_expires_in(json_t *root);
/* Write the stamps into ROOT; the number written, or -ENOMEM. */
int ab_credfile_apply_stamps(json_t *root, const ab_credfile_stamps *st);

/*
 * Write new values back to the host file PATH: read it again (the latest
 * version), set VALS[i] (LENS[i] bytes) at PTRS[i] for i < N (each must
 * already be a string there) and the STAMPS (may be NULL), then either
 *   - atomically: a temporary file in the same directory (O_EXCL, mode and
 *     owner of the original), fsync'd, renamed over PATH (a symlink is
 *     followed to its target), the directory fsync'd; on failure PATH is
 *     unchanged and the temporary removed; or
 *   - IN_PLACE: the same inode rewritten (pwrite, ftruncate, fsync).  For a
 *     file a sandbox has a mount on (its rendered copy): a rename over a
 *     mount point in another mount namespace DETACHES that mount, and the
 *     sandbox would then see the host file; and a temporary file next to it
 *     would be visible inside.  Not atomic against a crash mid-write.
 */
int ab_credfile_update(const char *path, const char *const *ptrs, const char *const *vals,
		       const size_t *lens, size_t n, const ab_credfile_stamps *stamps,
		       bool in_place, ab_err *err);

#endif
