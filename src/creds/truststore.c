/* SPDX-License-Identifier: MIT */
/*
 * The trust files the sandbox gets for the session CA (parent, credential
 * brokering): the PEM bundle (the system's roots and the session root) and
 * the Java truststore (PKCS#12) made from it.  Public material only: no key
 * is read or written here.  See ca.h for what each holds.
 */
#include "agentbox/ca.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/pkcs12.h>
#include <openssl/rand.h>

/* ------------------------------------------------------------ trust bundle */

/*
 * The bundle is copied by the kernel, from the system file into a memfd
 * (sendfile), never through a buffer of ours: a fresh buffer's first touch
 * of each page cost more than everything else about the bundle (about 2 ms
 * for 220 KB on a virtual machine, docs/performance.md), and the kernel's
 * copy touches no page of ours.
 */

/* Up to want bytes of in (from its start) appended to out; *got what was
 * copied (the file may have shrunk: what there is). */
static int copy_in(int out, int in, size_t want, size_t *got)
{
	off_t off = 0; /* in's own offset is left alone */
	*got = 0;
	while (*got < want) {
		ssize_t n = sendfile(out, in, &off, want - *got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break; /* the file shrank: take what we have */
		*got += (size_t)n;
	}
	return 0;
}

static int copy_bundle(int out, const char *path, size_t *got, ab_err *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;

	if (fd < 0)
		return ab_fail(err, errno, "system CA bundle %s", path);
	if (fstat(fd, &st) < 0)
		return ab_fail(err, errno, "system CA bundle %s", path);
	if (!S_ISREG(st.st_mode))
		return ab_fail(err, EINVAL, "system CA bundle %s: not a regular file", path);
	if ((uintmax_t)st.st_size > AB_CA_MAX_BUNDLE)
		return ab_fail(err, EFBIG, "system CA bundle %s: larger than %u bytes", path,
			       AB_CA_MAX_BUNDLE);
	int r = copy_in(out, fd, (size_t)st.st_size, got);
	return r < 0 ? ab_fail(err, -r, "reading system CA bundle %s", path) : 0;
}

/* The caller's memfd, to be written from its start: refused unless empty. */
static int empty_memfd(int fd, const char *what, ab_err *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return ab_fail(err, errno, "%s", what);
	if (st.st_size != 0)
		return ab_fail(err, EINVAL, "%s: the memfd is not empty", what);
	return 0;
}

int ab_ca_trust_bundle(const ab_ca *ca, const char *system_bundle, int fd, size_t *len, ab_err *err)
{
	static const char *const defaults[] = {
		"/etc/ssl/certs/ca-certificates.crt",
		"/etc/pki/tls/certs/ca-bundle.crt",
		"/etc/ssl/cert.pem",
	};
	_cleanup_free_ char *pem = NULL;
	const char *path = system_bundle;
	size_t sys_len = 0;
	char last = '\n';
	int r;

	*len = 0;
	if ((r = empty_memfd(fd, "trust bundle", err)) < 0)
		return r;
	for (size_t i = 0; !path && i < AB_ARRAY_SIZE(defaults); i++)
		if (access(defaults[i], R_OK) == 0)
			path = defaults[i];
	if (path && (r = copy_bundle(fd, path, &sys_len, err)) < 0)
		return r;
	if (sys_len && pread(fd, &last, 1, (off_t)sys_len - 1) != 1)
		return ab_fail(err, errno, "trust bundle");
	if ((r = ab_ca_cert_pem(ca, &pem, err)) < 0)
		return r;
	size_t pem_len = strlen(pem);
	r = last != '\n' ? ab_write_all(fd, "\n", 1) : 0;
	if (r < 0 || (r = ab_write_all(fd, pem, pem_len)) < 0)
		return ab_fail(err, -r, "trust bundle");
	if ((r = ab_memfd_seal(fd)) < 0)
		return ab_fail(err, -r, "trust bundle: seal");
	*len = sys_len + (last != '\n') + pem_len;
	return path ? 0 : 1;
}

/* ------------------------------------------------------------ Java truststore */

/*
 * The store is written as DER directly, not through OpenSSL's PKCS12 and
 * ASN.1 item API: its shape is fixed, and building ~145 bags as OpenSSL
 * objects, then encoding them (twice: size, then bytes), cost more than the
 * rest of the trust files together (docs/performance.md).  The bytes are
 * what OpenSSL writes for the same store (tests/unit/test_truststore.c
 * re-encodes a store with OpenSSL and compares):
 *
 *   PFX ::= SEQUENCE { version INTEGER 3,
 *     authSafe ContentInfo { data, [0] OCTET STRING (AuthenticatedSafe) },
 *     macData SEQUENCE { DigestInfo { { sha256, NULL }, OCTET STRING mac },
 *                        OCTET STRING salt, INTEGER iterations } }
 *   AuthenticatedSafe ::= SEQUENCE { ContentInfo { data, [0] OCTET STRING
 *     (SafeContents) } }
 *   SafeContents ::= SEQUENCE OF SafeBag
 *   SafeBag ::= SEQUENCE { certBag, [0] CertBag { x509Certificate,
 *     [0] OCTET STRING (the certificate's DER) }, SET OF attributes }
 *
 * The attributes, sorted as DER sorts a SET OF: friendlyName (a BMPString
 * alias), and Oracle's trusted-key-usage
 * (2.16.840.1.113894.746875.1.1) holding anyExtendedKeyUsage: Java's
 * PKCS12 keystore takes a certificate bag as a trusted entry only with it.
 * The MAC is PKCS#12's: a key derived from the password (RFC 7292 B.2,
 * PKCS12_key_gen_utf8, as PKCS12_set_mac does), HMAC-SHA256 over the
 * AuthenticatedSafe.
 */
// clang-format off
static const unsigned char OID_CERTBAG[] = {0x06, 0x0b, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d,
					    0x01, 0x0c, 0x0a, 0x01, 0x03};
static const unsigned char OID_X509CERT[] = {0x06, 0x0a, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d,
					     0x01, 0x09, 0x16, 0x01};
static const unsigned char OID_FRIENDLY[] = {0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d,
					     0x01, 0x09, 0x14};
static const unsigned char OID_DATA[] = {0x06, 0x09, 0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d,
					 0x01, 0x07, 0x01};
/* SEQUENCE { jdk trusted key usage, SET { anyExtendedKeyUsage 2.5.29.37.0 } } */
static const unsigned char ATTR_JDK_TRUST[] = {0x30, 0x16,
	0x06, 0x0c, 0x60, 0x86, 0x48, 0x01, 0x86, 0xf9, 0x66, 0xad, 0xca, 0x7b, 0x01, 0x01,
	0x31, 0x06, 0x06, 0x04, 0x55, 0x1d, 0x25, 0x00};
/* SEQUENCE { SEQUENCE { sha256, NULL }, OCTET STRING (32 bytes) } ... */
static const unsigned char MAC_ALG[] = {0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01,
					0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00};
// clang-format on

#define TS_SALT_LEN 8    /* PKCS12_SALT_LEN */
#define TS_MAC_LEN 32    /* SHA-256 */
#define TS_ALIAS_MAX 32  /* "system-8191", "agentbox-session-ca" */
#define TS_HEAD_ROOM 128 /* the headers written in front of the bags */

/* A DER header's size for content of length n. */
static size_t hdr_size(size_t n)
{
	size_t k = 2;
	for (size_t v = n; n >= 0x80 && v; v >>= 8)
		k++;
	return k;
}

/* The header (tag, length n) at p; returns the byte after it. */
static unsigned char *put_hdr(unsigned char *p, unsigned char tag, size_t n)
{
	size_t k = hdr_size(n) - 2;
	*p++ = tag;
	if (!k) {
		*p++ = (unsigned char)n;
		return p;
	}
	*p++ = (unsigned char)(0x80 | k);
	for (size_t i = k; i-- > 0;)
		*p++ = (unsigned char)(n >> (8 * i));
	return p;
}

/* The header (tag, length n) written backwards, ending at end; returns
 * where it starts. */
static unsigned char *put_hdr_before(unsigned char *end, unsigned char tag, size_t n)
{
	unsigned char *p = end - hdr_size(n);
	put_hdr(p, tag, n);
	return p;
}

static unsigned char *put(unsigned char *p, const void *src, size_t n)
{
	memcpy(p, src, n);
	return p + n;
}

/* The bags as they are made: all of them in v (ab_ca_java_truststore), or,
 * with a spill memfd (ab_ca_java_truststore_fd), the latest in v and the
 * rest written to spill each time v is full: no buffer the size of the store
 * (~170 KB for a distro bundle) is allocated, whose ~40 fresh pages cost
 * ~0.5 ms on a virtual machine where a page fault costs 11 us
 * (docs/performance.md). */
typedef struct ts_buf {
	unsigned char *v; /* TS_HEAD_ROOM bytes free in front, then the bags */
	size_t len, cap;  /* len counts from v, the head room included */
	int spill;        /* -1: none, every bag is in v */
	size_t spilled;   /* the bags written to spill, which come before v's */
	int werr;         /* a failed write to spill: its errno */
} ts_buf;

#define TS_CHUNK (32 * 1024) /* v's size with a spill memfd */

/* v's bags to spill, v emptied. */
static bool ts_spill(ts_buf *b)
{
	size_t n = b->len - TS_HEAD_ROOM;
	int r = n ? ab_write_all(b->spill, b->v + TS_HEAD_ROOM, n) : 0;
	if (r < 0) {
		b->werr = -r;
		return false;
	}
	b->spilled += n;
	b->len = TS_HEAD_ROOM;
	return true;
}

static bool ts_reserve(ts_buf *b, size_t more)
{
	if (b->cap - b->len >= more)
		return true;
	if (b->spill >= 0 && b->len > TS_HEAD_ROOM && b->cap) {
		if (!ts_spill(b))
			return false;
		if (b->cap - b->len >= more)
			return true;
	}
	size_t nc = b->cap ? b->cap : b->spill >= 0 ? TS_CHUNK : 64 * 1024;
	while (nc - b->len < more)
		nc *= 2;
	unsigned char *v = realloc(b->v, nc);
	if (!v)
		return false;
	b->v = v;
	b->cap = nc;
	return true;
}

static void ts_freep(ts_buf *b)
{
	free(b->v);
	if (b->spill >= 0)
		close(b->spill);
}

static int ts_fail(const ts_buf *b, ab_err *err)
{
	return ab_fail(err, b->werr ? b->werr : ENOMEM, "Java truststore");
}

/* One certBag for the certificate der[0..len) (one DER SEQUENCE, copied as
 * it is), trusted for Java under alias. */
static bool put_bag(ts_buf *b, const unsigned char *der, size_t len, const char *alias)
{
	unsigned char fname[2 + sizeof(OID_FRIENDLY) + 4 + 2 * TS_ALIAS_MAX], *f = fname;
	size_t alen = strlen(alias), bmp = 2 * alen;

	if (alen > TS_ALIAS_MAX)
		return false;
	/* friendlyName: SEQUENCE { OID, SET { BMPString } } (short lengths) */
	f = put_hdr(f, 0x30, sizeof(OID_FRIENDLY) + 4 + bmp);
	f = put(f, OID_FRIENDLY, sizeof(OID_FRIENDLY));
	f = put_hdr(f, 0x31, 2 + bmp);
	f = put_hdr(f, 0x1e, bmp);
	for (size_t i = 0; i < alen; i++) {
		*f++ = 0;
		*f++ = (unsigned char)alias[i];
	}
	size_t flen = (size_t)(f - fname), tlen = sizeof(ATTR_JDK_TRUST);
	/* DER's SET OF order: by the encodings, a shorter prefix first */
	int c = memcmp(fname, ATTR_JDK_TRUST, flen < tlen ? flen : tlen);
	bool trust_first = c > 0 || (c == 0 && tlen < flen);
	size_t attrs = flen + tlen;
	size_t cert_val = hdr_size(len) + len;                                  /* OCTET STRING */
	size_t cert_bag = sizeof(OID_X509CERT) + hdr_size(cert_val) + cert_val; /* [0] */
	size_t bag_val = hdr_size(cert_bag) + cert_bag;                         /* SEQUENCE */
	size_t bag = sizeof(OID_CERTBAG) + hdr_size(bag_val) + bag_val + hdr_size(attrs) + attrs;

	if (!ts_reserve(b, hdr_size(bag) + bag))
		return false;
	unsigned char *p = b->v + b->len;
	p = put_hdr(p, 0x30, bag);
	p = put(p, OID_CERTBAG, sizeof(OID_CERTBAG));
	p = put_hdr(p, 0xa0, bag_val);
	p = put_hdr(p, 0x30, cert_bag);
	p = put(p, OID_X509CERT, sizeof(OID_X509CERT));
	p = put_hdr(p, 0xa0, cert_val);
	p = put_hdr(p, 0x04, len);
	p = put(p, der, len);
	p = put_hdr(p, 0x31, attrs);
	p = put(p, trust_first ? ATTR_JDK_TRUST : fname, trust_first ? tlen : flen);
	p = put(p, trust_first ? fname : ATTR_JDK_TRUST, trust_first ? flen : tlen);
	b->len = (size_t)(p - b->v);
	return true;
}

/* Whether der[0..len) is one DER SEQUENCE (definite length, nothing after
 * it): what a certificate is on the outside.  Its inside is Java's to read. */
static bool one_sequence(const unsigned char *der, long len)
{
	const unsigned char *p = der;
	long n = 0;
	int tag, cls;
	int f = ASN1_get_object(&p, &n, &tag, &cls, len);

	return !(f & 0x80) && (f & V_ASN1_CONSTRUCTED) && !(f & 1) && tag == V_ASN1_SEQUENCE &&
	       cls == V_ASN1_UNIVERSAL && n == len - (long)(p - der);
}

/* OpenSSL's own allocations, freed on scope exit. */
static void ossl_freep(void *p)
{
	OPENSSL_free(*(void **)p);
}

/* The "CERTIFICATE" blocks of a PEM text as trusted bags (other blocks are
 * skipped, as PEM_read_bio_X509 skips them); the session CA's alias is
 * fixed, and it is added when the text lacks it.  The certificates are
 * copied as DER, not decoded: OpenSSL 3.0 decodes each public key through
 * its provider decoders, which costs more than the whole rest of the
 * truststore for a system bundle (docs/performance.md). */
static int trust_bags(const ab_ca *ca, BIO *bio, ts_buf *b, ab_err *err)
{
	_cleanup_(ossl_freep) unsigned char *ours = NULL;
	int ours_len = i2d_X509(ab_ca_get0_cert(ca), &ours);
	size_t n = 0;
	bool have_ca = false;

	if (ours_len <= 0)
		return ab_ossl_fail(err, ENOMEM, "Java truststore");
	ERR_clear_error();
	for (;;) {
		_cleanup_(ossl_freep) char *name = NULL, *header = NULL;
		_cleanup_(ossl_freep) unsigned char *der = NULL;
		char alias[TS_ALIAS_MAX];
		long dlen = 0;
		int r = 0;
		if (!bio || !PEM_read_bio(bio, &name, &header, &der, &dlen))
			break;
		bool cert =
			strcmp(name, "CERTIFICATE") == 0 || strcmp(name, "X509 CERTIFICATE") == 0;
		bool is_ca = cert && !have_ca && dlen == ours_len &&
			     memcmp(der, ours, (size_t)dlen) == 0;
		if (cert && n >= AB_CA_MAX_TRUST_CERTS)
			r = ab_fail(err, E2BIG,
				    "Java truststore: more than %d certificates in the "
				    "bundle",
				    AB_CA_MAX_TRUST_CERTS);
		else if (cert && header[0])
			r = ab_fail(err, EINVAL,
				    "Java truststore: certificate %zu of the CA bundle "
				    "has PEM headers",
				    n + 1);
		else if (cert && !one_sequence(der, dlen))
			r = ab_fail(err, EINVAL,
				    "Java truststore: certificate %zu of the CA bundle "
				    "is not DER",
				    n + 1);
		snprintf(alias, sizeof(alias), is_ca ? "agentbox-session-ca" : "system-%zu", n);
		if (!r && cert && !put_bag(b, der, (size_t)dlen, alias))
			r = ts_fail(b, err);
		have_ca |= is_ca;
		n += cert;
		if (r < 0) {
			ERR_clear_error();
			return r;
		}
	}
	/* the end of the text, or a block that does not decode */
	unsigned long e = ERR_peek_last_error();
	if (bio && !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE))
		return ab_ossl_fail(err, EINVAL,
				    "Java truststore: the CA bundle has a PEM block that "
				    "does not decode");
	ERR_clear_error();
	if (!have_ca && !put_bag(b, ours, (size_t)ours_len, "agentbox-session-ca"))
		return ts_fail(b, err);
	return 0;
}

/* The headers in front of BAGS bytes of bags, written backwards to end at
 * END; returns where the PFX starts, safe and safe_len the
 * AuthenticatedSafe (what the MAC covers: from safe to END, then the bags).
 * mac_data: the MacData's size, which the PFX's length includes. */
static size_t after(const unsigned char *end, const unsigned char *q, size_t bags)
{
	return (size_t)(end - q) + bags; /* from q to the bags' end */
}

static unsigned char *ts_heads(unsigned char *end, size_t bags, size_t mac_data,
			       const unsigned char **safe, size_t *safe_len)
{
	unsigned char *p = put_hdr_before(end, 0x30, bags); /* SafeContents */
	p = put_hdr_before(p, 0x04, after(end, p, bags));   /* [0] OCTET STRING */
	p = put_hdr_before(p, 0xa0, after(end, p, bags));
	p -= sizeof(OID_DATA);
	memcpy(p, OID_DATA, sizeof(OID_DATA));
	p = put_hdr_before(p, 0x30, after(end, p, bags)); /* ContentInfo */
	p = put_hdr_before(p, 0x30, after(end, p, bags)); /* AuthenticatedSafe */
	*safe = p;
	*safe_len = after(end, p, bags);
	p = put_hdr_before(p, 0x04, *safe_len);
	p = put_hdr_before(p, 0xa0, after(end, p, bags));
	p -= sizeof(OID_DATA);
	memcpy(p, OID_DATA, sizeof(OID_DATA));
	p = put_hdr_before(p, 0x30, after(end, p, bags)); /* authSafe */
	p -= 3;
	memcpy(p, "\x02\x01\x03", 3); /* version 3 */
	return put_hdr_before(p, 0x30, after(end, p, bags) + mac_data);
}

/* MacData: SEQUENCE { DigestInfo, OCTET STRING salt, INTEGER iter } */
static size_t mac_data_size(void)
{
	size_t digest = sizeof(MAC_ALG) + 2 + TS_MAC_LEN;
	size_t inner = hdr_size(digest) + digest + 2 + TS_SALT_LEN + 4;
	return hdr_size(inner) + inner;
}

/* The bags spilled, read back through v (after its headers: v's bags are
 * spilled too by then) into the MAC. */
static bool mac_spilled(EVP_MAC_CTX *c, const ts_buf *b)
{
	unsigned char *buf = b->v + TS_HEAD_ROOM;
	size_t cap = b->cap - TS_HEAD_ROOM;
	for (size_t off = 0; off < b->spilled;) {
		size_t want = b->spilled - off < cap ? b->spilled - off : cap;
		ssize_t n = pread(b->spill, buf, want, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || !EVP_MAC_update(c, buf, (size_t)n))
			return false;
		off += (size_t)n;
	}
	return true;
}

/* The MAC of the AuthenticatedSafe: head[0..head_len), then the bags b
 * spilled, if any (v's are in head then); its MacData written at out
 * (mac_data_size() bytes). */
static int put_mac(const ts_buf *b, const unsigned char *head, size_t head_len,
		   const char *password, unsigned char *out, ab_err *err)
{
	unsigned char salt[TS_SALT_LEN], key[TS_MAC_LEN], mac[TS_MAC_LEN];
	size_t mac_len = 0;
	size_t digest = sizeof(MAC_ALG) + 2 + TS_MAC_LEN;
	size_t inner = hdr_size(digest) + digest + 2 + TS_SALT_LEN + 4;
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
		OSSL_PARAM_construct_end(),
	};
	EVP_MAC *hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *c = hmac ? EVP_MAC_CTX_new(hmac) : NULL;
	bool ok = c && RAND_bytes(salt, sizeof(salt)) == 1 &&
		  PKCS12_key_gen_utf8(password, -1, salt, sizeof(salt), PKCS12_MAC_ID,
				      PKCS12_DEFAULT_ITER, sizeof(key), key, EVP_sha256()) == 1 &&
		  EVP_MAC_init(c, key, sizeof(key), params) && EVP_MAC_update(c, head, head_len) &&
		  (b->spill < 0 || mac_spilled(c, b)) &&
		  EVP_MAC_final(c, mac, &mac_len, sizeof(mac)) && mac_len == TS_MAC_LEN;
	OPENSSL_cleanse(key, sizeof(key)); /* from a public password: tidiness */
	EVP_MAC_CTX_free(c);
	EVP_MAC_free(hmac);
	if (!ok)
		return ab_ossl_fail(err, EIO, "Java truststore: PKCS#12 MAC");
	unsigned char *p = out;
	p = put_hdr(p, 0x30, inner);
	p = put_hdr(p, 0x30, digest);
	p = put(p, MAC_ALG, sizeof(MAC_ALG));
	p = put_hdr(p, 0x04, TS_MAC_LEN);
	p = put(p, mac, TS_MAC_LEN);
	p = put_hdr(p, 0x04, TS_SALT_LEN);
	p = put(p, salt, TS_SALT_LEN);
	p = put(p, "\x02\x02", 2);
	*p++ = (unsigned char)(PKCS12_DEFAULT_ITER >> 8);
	*p++ = (unsigned char)(PKCS12_DEFAULT_ITER & 0xff);
	return 0;
}

/* The store from the PEM text BIO gives (NULL: none), LEN bytes long (at
 * most AB_CA_MAX_BUNDLE: the callers check), in memory. */
static int java_truststore(const ab_ca *ca, BIO *bio, size_t len, const char *password,
			   unsigned char **out, size_t *outlen, ab_err *err)
{
	_cleanup_(ts_freep) ts_buf b = {.spill = -1};
	const unsigned char *safe = NULL;
	size_t safe_len = 0, mac_data = mac_data_size();
	int r;

	/* the DER is about 3/4 of the base64, plus ~120 bytes a bag */
	if (!ts_reserve(&b, TS_HEAD_ROOM + len - len / 4 + 4096))
		return ab_fail(err, ENOMEM, "Java truststore");
	b.len = TS_HEAD_ROOM;
	if ((r = trust_bags(ca, bio, &b, err)) < 0)
		return r;
	if (!ts_reserve(&b, mac_data))
		return ab_fail(err, ENOMEM, "Java truststore");
	unsigned char *pfx =
		ts_heads(b.v + TS_HEAD_ROOM, b.len - TS_HEAD_ROOM, mac_data, &safe, &safe_len);
	if ((r = put_mac(&b, safe, safe_len, password, b.v + b.len, err)) < 0)
		return r;
	b.len += mac_data;
	*outlen = (size_t)(b.v + b.len - pfx);
	memmove(b.v, pfx, *outlen);
	*out = TAKE_PTR(b.v);
	return 0;
}

int ab_ca_java_truststore(const ab_ca *ca, const char *bundle, size_t len, const char *password,
			  unsigned char **out, size_t *outlen, ab_err *err)
{
	*out = NULL;
	*outlen = 0;
	if (len > AB_CA_MAX_BUNDLE)
		return ab_fail(err, EFBIG, "Java truststore: a bundle larger than %u bytes",
			       AB_CA_MAX_BUNDLE);
	_cleanup_bio_ BIO *bio = len ? BIO_new_mem_buf(bundle, (int)len) : NULL;
	if (len && !bio)
		return ab_ossl_fail(err, ENOMEM, "Java truststore");
	return java_truststore(ca, bio, len, password, out, outlen, err);
}

#define TS_MAC_DATA_MAX 96 /* mac_data_size(): 67 */

/* The store from the PEM text BIO gives, written to out: the bags through a
 * spill memfd, then the headers, the bags copied by the kernel, the MacData. */
static int java_truststore_to(const ab_ca *ca, BIO *bio, const char *password, int out,
			      size_t *outlen, ab_err *err)
{
	_cleanup_(ts_freep) ts_buf b = {.spill = -1};
	const unsigned char *safe = NULL;
	unsigned char macd[TS_MAC_DATA_MAX];
	size_t safe_len = 0, mac_data = mac_data_size(), got = 0;
	int r;

	b.spill = memfd_create("agentbox-truststore-bags", MFD_CLOEXEC);
	if (b.spill < 0)
		return ab_fail(err, errno, "Java truststore: memfd_create");
	if (!ts_reserve(&b, TS_CHUNK))
		return ab_fail(err, ENOMEM, "Java truststore");
	b.len = TS_HEAD_ROOM;
	if ((r = trust_bags(ca, bio, &b, err)) < 0)
		return r;
	if (!ts_spill(&b))
		return ts_fail(&b, err);
	unsigned char *end = b.v + TS_HEAD_ROOM;
	unsigned char *pfx = ts_heads(end, b.spilled, mac_data, &safe, &safe_len);
	if ((r = put_mac(&b, safe, (size_t)(end - safe), password, macd, err)) < 0)
		return r;
	size_t head = (size_t)(end - pfx);
	if ((r = ab_write_all(out, pfx, head)) == 0 &&
	    (r = copy_in(out, b.spill, b.spilled, &got)) == 0)
		r = got == b.spilled ? ab_write_all(out, macd, mac_data) : -EIO;
	if (r < 0)
		return ab_fail(err, -r, "Java truststore: write");
	*outlen = head + b.spilled + mac_data;
	return 0;
}

/* Read through a small buffer that is used again and again: mapping the
 * bundle instead would touch each of its pages anew (docs/performance.md). */
int ab_ca_java_truststore_fd(const ab_ca *ca, int fd, size_t len, const char *password, int out,
			     size_t *outlen, ab_err *err)
{
	*outlen = 0;
	if (len > AB_CA_MAX_BUNDLE)
		return ab_fail(err, EFBIG, "Java truststore: a bundle larger than %u bytes",
			       AB_CA_MAX_BUNDLE);
	int r = empty_memfd(out, "Java truststore", err);
	if (r < 0)
		return r;
	if (lseek(fd, 0, SEEK_SET) < 0)
		return ab_fail(err, errno, "Java truststore: the trust bundle");
	_cleanup_bio_ BIO *raw = len ? BIO_new_fd(fd, BIO_NOCLOSE) : NULL;
	_cleanup_bio_ BIO *buf = len ? BIO_new(BIO_f_buffer()) : NULL;
	if (len && (!raw || !buf))
		return ab_ossl_fail(err, ENOMEM, "Java truststore");
	BIO *bio = len ? BIO_push(buf, raw) : NULL;
	r = java_truststore_to(ca, bio, password, out, outlen, err);
	if (bio)
		BIO_pop(buf); /* each is freed on its own */
	return r;
}
