/* SPDX-License-Identifier: MIT */
/*
 * The length-preserving streaming multi-pattern scanner of credential
 * brokering (parent: the egress proxy): a small Aho-Corasick automaton over
 * the compiled pattern set, fed message bytes in any split, replacing or
 * blocking matches and holding back only a suffix that could still start
 * one; text where no match can start is skipped a window at a time (a
 * Wu-Manber shift table, wm_build).  Pure: no I/O.  Rules in
 * include/agentbox/scan.h.  It knows patterns, not secrets: the secrets
 * code builds its sets on it, never the other way round.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agentbox/scan.h"

/* --------------------------------------------------------------- scanner */

/* Aho-Corasick trie node.  Node 0 is the root; 0 also means "none" for
 * child, sibling and outlink (the root is nobody's child and ends no
 * pattern). */
typedef struct {
	uint32_t child, sibling; /* first child; next sibling */
	uint32_t fail;           /* longest proper suffix that is a node */
	uint32_t outlink;        /* nearest node on the fail chain ending a pattern */
	uint32_t hold;           /* longest suffix that is a proper prefix of a pattern */
	uint32_t depth;
	int32_t term; /* pattern ending here, -1 none */
	uint8_t label;
} ac_node;

struct ab_scan_set {
	size_t npat, maxlen, nnodes;
	char **pat, **repl;
	size_t *plen;
	ab_scan_action *act;
	unsigned *id;
	ac_node *node;
	uint32_t root_next[256];
	bool root_has[256]; /* first bytes */
	bool single[256];   /* one-byte patterns */
	uint8_t pair[8192]; /* bit (a << 8 | b): some pattern starts with "ab" */
	size_t wm;          /* skip window: the shortest pattern (capped), 0: no skipping */
	uint8_t *shift;     /* [a << 8 | b]: safe skip when "ab" ends the window */
};

size_t ab_scan_set_count(const ab_scan_set *set)
{
	return set ? set->npat : 0;
}
size_t ab_scan_set_maxlen(const ab_scan_set *set)
{
	return set ? set->maxlen : 0;
}

/* The patterns may be secret values or their encodings. */
static void wipe_free(char *p, size_t len)
{
	if (!p)
		return;
	explicit_bzero(p, len);
	free(p);
}

void ab_scan_set_free(ab_scan_set *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->npat; i++) {
		wipe_free(set->pat ? set->pat[i] : NULL, set->plen ? set->plen[i] : 0);
		wipe_free(set->repl ? set->repl[i] : NULL, set->plen ? set->plen[i] : 0);
	}
	free(set->pat);
	free(set->repl);
	free(set->plen);
	free(set->act);
	free(set->id);
	free(set->shift);
	if (set->node)
		explicit_bzero(set->node, set->nnodes * sizeof(ac_node));
	free(set->node);
	explicit_bzero(set, sizeof(*set));
	free(set);
}

static uint32_t ac_child(const ab_scan_set *set, uint32_t u, uint8_t c)
{
	if (u == 0)
		return set->root_next[c];
	for (uint32_t v = set->node[u].child; v; v = set->node[v].sibling)
		if (set->node[v].label == c)
			return v;
	return 0;
}

static uint32_t ac_step(const ab_scan_set *set, uint32_t s, uint8_t c)
{
	for (;;) {
		uint32_t v = ac_child(set, s, c);
		if (v || s == 0)
			return v;
		s = set->node[s].fail;
	}
}

/* Add pattern I to the trie. */
static void ac_insert(ab_scan_set *set, size_t i)
{
	uint32_t u = 0;

	for (size_t k = 0; k < set->plen[i]; k++) {
		uint8_t c = (uint8_t)set->pat[i][k];
		uint32_t v = ac_child(set, u, c);
		if (!v) {
			v = (uint32_t)set->nnodes++;
			set->node[v] =
				(ac_node){.term = -1, .label = c, .depth = set->node[u].depth + 1};
			if (u == 0) {
				set->root_next[c] = v;
				set->root_has[c] = true;
			}
			set->node[v].sibling = set->node[u].child;
			set->node[u].child = v;
		}
		u = v;
	}
	if (set->plen[i] == 1)
		set->single[(uint8_t)set->pat[i][0]] = true;
	else {
		unsigned ab = (uint8_t)set->pat[i][0] << 8 | (uint8_t)set->pat[i][1];
		set->pair[ab >> 3] |= (uint8_t)(1u << (ab & 7));
	}
	int32_t old = set->node[u].term;
	if (old < 0 || (set->act[old] != AB_SCAN_BLOCK && set->act[i] == AB_SCAN_BLOCK))
		set->node[u].term = (int32_t)i;
}

/* Fail links, output links and hold lengths, breadth first. */
static int ac_link(ab_scan_set *set)
{
	uint32_t *queue = malloc(set->nnodes * sizeof(uint32_t));
	size_t qh = 0, qt = 0;

	if (!queue)
		return -ENOMEM;
	set->node[0].fail = set->node[0].outlink = set->node[0].hold = 0;
	for (uint32_t v = set->node[0].child; v; v = set->node[v].sibling)
		queue[qt++] = v;
	while (qh < qt) {
		uint32_t v = queue[qh++];
		ac_node *nv = &set->node[v];
		if (nv->depth > 1) {
			uint32_t parent_fail = nv->fail; /* stashed below: the parent's fail */
			nv->fail = ac_step(set, parent_fail, nv->label);
		} else {
			nv->fail = 0;
		}
		const ac_node *f = &set->node[nv->fail];
		nv->outlink = f->term >= 0 ? nv->fail : f->outlink;
		nv->hold = nv->child ? nv->depth : f->hold;
		for (uint32_t w = nv->child; w; w = set->node[w].sibling) {
			set->node[w].fail = nv->fail; /* the parent's fail, for the step above */
			queue[qt++] = w;
		}
	}
	free(queue);
	return 0;
}

/*
 * The skip-ahead filter (Wu-Manber with 2-byte q-grams): with M the length
 * of the shortest pattern (capped at AB_SCAN_WM_MAX), a match can start at
 * P only if some pattern's first M bytes are IN[P..P+M).  shift[g] is the
 * smallest distance from a position of the 2-gram g inside a pattern's
 * first M bytes to the last of them (M - 1 when g is in none): if the window
 * at P ends with g, no pattern starts at P .. P + shift[g] - 1.  Exact (a 0
 * only means "look closer") and bounded: every look moves on at least one
 * byte or hands one byte to the automaton.  Sets whose shortest pattern is
 * shorter than AB_SCAN_WM_MIN keep the byte-by-byte start filter only.
 */
#define AB_SCAN_WM_MIN 4
#define AB_SCAN_WM_MAX 255

static int wm_build(ab_scan_set *set)
{
	size_t m = SIZE_MAX;

	for (size_t i = 0; i < set->npat; i++)
		if (set->plen[i] < m)
			m = set->plen[i];
	if (set->npat == 0 || m < AB_SCAN_WM_MIN)
		return 0;
	if (m > AB_SCAN_WM_MAX)
		m = AB_SCAN_WM_MAX;
	set->shift = malloc(65536);
	if (!set->shift)
		return -ENOMEM;
	memset(set->shift, (int)(m - 1), 65536);
	for (size_t i = 0; i < set->npat; i++) {
		const uint8_t *p = (const uint8_t *)set->pat[i];
		for (size_t t = 1; t < m; t++) {
			unsigned g = (unsigned)p[t - 1] << 8 | p[t];
			if (set->shift[g] > m - 1 - t)
				set->shift[g] = (uint8_t)(m - 1 - t);
		}
	}
	set->wm = m;
	return 0;
}

static int set_copy_pattern(ab_scan_set *set, size_t i, const ab_scan_pattern *p)
{
	set->plen[i] = p->len;
	set->act[i] = p->action;
	set->id[i] = p->id;
	set->pat[i] = malloc(p->len);
	if (!set->pat[i])
		return -ENOMEM;
	memcpy(set->pat[i], p->bytes, p->len);
	if (p->action == AB_SCAN_REPLACE && p->repl) {
		set->repl[i] = malloc(p->len);
		if (!set->repl[i])
			return -ENOMEM;
		memcpy(set->repl[i], p->repl, p->len);
	}
	if (p->len > set->maxlen)
		set->maxlen = p->len;
	return 0;
}

static int set_check(const ab_scan_pattern *pats, size_t n, size_t *total, ab_err *err)
{
	*total = 0;
	if (n > AB_SCAN_MAX_PATTERNS)
		return ab_fail_code(err, AB_EXIT_FAIL, E2BIG,
				    "too many scan patterns (%zu, max %d)", n,
				    AB_SCAN_MAX_PATTERNS);
	for (size_t i = 0; i < n; i++) {
		if (!pats[i].bytes || pats[i].len == 0)
			return ab_fail_code(err, AB_EXIT_FAIL, EINVAL, "scan pattern %zu is empty",
					    i);
		if (pats[i].len > AB_SCAN_MAX_PATTERN_LEN)
			return ab_fail_code(err, AB_EXIT_FAIL, E2BIG,
					    "scan pattern %zu is too long (max %d)", i,
					    AB_SCAN_MAX_PATTERN_LEN);
		if (pats[i].action != AB_SCAN_REPLACE && pats[i].action != AB_SCAN_BLOCK)
			return ab_fail_code(err, AB_EXIT_FAIL, EINVAL,
					    "scan pattern %zu: unknown action", i);
		*total += pats[i].len;
		if (*total > AB_SCAN_MAX_TOTAL)
			return ab_fail_code(err, AB_EXIT_FAIL, E2BIG,
					    "scan patterns too large (max %d bytes in all)",
					    AB_SCAN_MAX_TOTAL);
	}
	return 0;
}

int ab_scan_set_new(const ab_scan_pattern *pats, size_t n, ab_scan_set **out, ab_err *err)
{
	ab_scan_set *set;
	size_t total;
	int r = set_check(pats, n, &total, err);

	*out = NULL;
	if (r < 0)
		return r;
	set = calloc(1, sizeof(*set));
	if (!set)
		return ab_fail(err, ENOMEM, "scan patterns");
	set->pat = calloc(n + 1, sizeof(char *));
	set->repl = calloc(n + 1, sizeof(char *));
	set->plen = calloc(n + 1, sizeof(size_t));
	set->act = calloc(n + 1, sizeof(ab_scan_action));
	set->id = calloc(n + 1, sizeof(unsigned));
	set->node = calloc(total + 1, sizeof(ac_node));
	r = set->pat && set->repl && set->plen && set->act && set->id && set->node ? 0 : -ENOMEM;
	set->npat = n;
	set->nnodes = 1;
	set->node[0].term = -1;
	for (size_t i = 0; r == 0 && i < n; i++)
		r = set_copy_pattern(set, i, &pats[i]);
	for (size_t i = 0; r == 0 && i < n; i++)
		ac_insert(set, i);
	if (r == 0)
		r = ac_link(set);
	if (r == 0)
		r = wm_build(set);
	if (r < 0) {
		ab_scan_set_free(set);
		return ab_fail(err, -r, "scan patterns");
	}
	*out = set;
	return 0;
}

int ab_scanner_init(ab_scanner *s, const ab_scan_set *set)
{
	memset(s, 0, sizeof(*s));
	if (!set)
		return -EINVAL;
	s->set = set;
	s->ring = calloc(set->maxlen ? set->maxlen : 1, sizeof(ab_scan_slot));
	s->counts = calloc(set->npat ? set->npat : 1, sizeof(size_t));
	if (!s->ring || !s->counts) {
		ab_scanner_free(s);
		return -ENOMEM;
	}
	return 0;
}

void ab_scanner_free(ab_scanner *s)
{
	if (!s)
		return;
	if (s->ring && s->set)
		explicit_bzero(s->ring,
			       (s->set->maxlen ? s->set->maxlen : 1) * sizeof(ab_scan_slot));
	free(s->ring);
	free(s->counts);
	memset(s, 0, sizeof(*s));
}

size_t ab_scanner_pending(const ab_scanner *s)
{
	return s->pending;
}

size_t ab_scanner_count(const ab_scanner *s, size_t i)
{
	return s->set && i < s->set->npat ? s->counts[i] : 0;
}

static size_t ring_cap(const ab_scanner *s)
{
	return s->set->maxlen ? s->set->maxlen : 1;
}

/* Release pending bytes until only KEEP are held. */
static void emit(ab_scanner *s, char *out, size_t *o, size_t keep)
{
	const ab_scan_set *set = s->set;
	size_t cap = ring_cap(s);

	while (s->pending > keep) {
		uint64_t j = s->pos - s->pending;
		ab_scan_slot *sl = &s->ring[j % cap];
		char c = sl->byte;
		if (sl->pat >= 0)
			c = set->repl[sl->pat] ? set->repl[sl->pat][j - sl->start] : '*';
		out[(*o)++] = c;
		sl->byte = 0;
		s->pending--;
	}
}

/* The match of pattern I at [Q, K] covers its bytes, unless a match that
 * starts earlier (or as early and is longer) already does. */
static void cover(ab_scanner *s, uint64_t q, uint64_t k, int32_t i)
{
	const ab_scan_set *set = s->set;
	size_t cap = ring_cap(s);

	for (uint64_t j = k;; j--) {
		ab_scan_slot *sl = &s->ring[j % cap];
		if (sl->pat < 0 || sl->start > q ||
		    (sl->start == q && set->plen[sl->pat] < set->plen[i])) {
			sl->pat = i;
			sl->start = q;
		} else {
			break;
		}
		if (j == q)
			break;
	}
}

static void block(ab_scanner *s, int32_t i, uint64_t q, ab_scan_hit *hit)
{
	s->blocked = true;
	explicit_bzero(s->ring, ring_cap(s) * sizeof(ab_scan_slot));
	s->pending = 0;
	if (hit) {
		hit->blocked = true;
		hit->pattern = (size_t)i;
		hit->id = s->set->id[i];
		hit->offset = q;
	}
}

/* One byte through the automaton.  1 when a BLOCK pattern matched. */
static int scan_byte(ab_scanner *s, char c, char *out, size_t *o, ab_scan_hit *hit)
{
	const ab_scan_set *set = s->set;
	uint64_t k = s->pos++;
	ab_scan_slot *sl = &s->ring[k % ring_cap(s)];
	uint32_t u;

	*sl = (ab_scan_slot){.pat = -1, .byte = c};
	s->pending++;
	s->state = ac_step(set, s->state, (uint8_t)c);
	u = set->node[s->state].term >= 0 ? s->state : set->node[s->state].outlink;
	for (; u; u = set->node[u].outlink) {
		int32_t i = set->node[u].term;
		uint64_t q = k + 1 - set->plen[i];
		s->counts[i]++;
		if (set->act[i] == AB_SCAN_BLOCK) {
			block(s, i, q, hit);
			return 1;
		}
		if (hit)
			hit->replaced++;
		cover(s, q, k, i);
	}
	emit(s, out, o, set->node[s->state].hold);
	return 0;
}

static inline bool is_pair(const ab_scan_set *set, uint8_t a, uint8_t b)
{
	unsigned ab = (unsigned)a << 8 | b;
	return set->pair[ab >> 3] & (1u << (ab & 7));
}

/* From the root with nothing pending: can a match start at IN[J]?  If not,
 * the byte is final and the state after it is the root again (the pair is
 * no prefix, so the automaton falls back to the root before the next byte). */
static inline bool may_start(const ab_scan_set *set, const char *in, size_t n, size_t j)
{
	uint8_t c = (uint8_t)in[j];

	if (!set->root_has[c])
		return false;
	if (set->single[c] || j + 1 == n)
		return true;
	return is_pair(set, c, (uint8_t)in[j + 1]);
}

/* From the root with nothing pending at IN[I]: the first position at or
 * after I where a match may start (N if none).  The bytes before it are
 * final. */
static size_t skip(const ab_scan_set *set, const char *in, size_t n, size_t i)
{
	const uint8_t *u = (const uint8_t *)in;
	size_t m = set->wm;

	if (m) {
		while (n - i >= m) {
			const uint8_t *e = u + i + m - 2;
			uint8_t d = set->shift[(unsigned)e[0] << 8 | e[1]];
			if (d) {
				i += d;
				continue;
			}
			if (may_start(set, in, n, i))
				return i;
			i++;
		}
	}
	while (i < n && !may_start(set, in, n, i))
		i++;
	return i;
}

int ab_scanner_feed(ab_scanner *s, const char *in, size_t n, char *out, size_t *outlen,
		    ab_scan_hit *hit)
{
	const ab_scan_set *set = s->set;
	size_t o = 0, i = 0;

	if (hit)
		memset(hit, 0, sizeof(*hit));
	if (!set)
		return -EINVAL;
	if (s->blocked)
		return -EPIPE;
	if (n > SIZE_MAX - s->pending || *outlen < n + s->pending)
		return -ENOBUFS;
	while (i < n) {
		/* one byte held at depth 1 that the next one does not continue:
		 * it is final, and the automaton would fall back to the root */
		if (s->pending == 1 && set->node[s->state].depth == 1 &&
		    !is_pair(set, set->node[s->state].label, (uint8_t)in[i])) {
			emit(s, out, &o, 0);
			s->state = 0;
		}
		if (s->pending == 0) {
			/* nothing held: no suffix is a proper prefix of a pattern, so
			 * the state is as good as the root (pending == hold) */
			s->state = 0;
			size_t j = skip(set, in, n, i);
			if (j > i) {
				if (out + o != in + i)
					memmove(out + o, in + i, j - i);
				o += j - i;
				s->pos += j - i;
				i = j;
				continue;
			}
		}
		if (scan_byte(s, in[i++], out, &o, hit)) {
			*outlen = o;
			return 1;
		}
	}
	*outlen = o;
	return 0;
}

int ab_scanner_flush(ab_scanner *s, char *out, size_t *outlen, ab_scan_hit *hit)
{
	size_t o = 0;

	if (hit)
		memset(hit, 0, sizeof(*hit));
	if (!s->set)
		return -EINVAL;
	if (s->blocked)
		return -EPIPE;
	if (*outlen < s->pending)
		return -ENOBUFS;
	emit(s, out, &o, 0);
	s->state = 0;
	*outlen = o;
	return 0;
}
