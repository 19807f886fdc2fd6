/* SPDX-License-Identifier: MIT */
/*
 * The pure pieces of the creation calls carried out for the sandbox
 * (include/agentbox/mediate.h): the path split, the `.git` name, the
 * /proc/self rewrite and the redirect's link text.  No system call here.
 */
#include "agentbox/mediate.h"

#include <stdio.h>
#include <string.h>

bool ab_med_split(const char *path, char *parent, size_t parent_size, const char **last,
		  size_t *name_len)
{
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	if (n == 0 || (n == 1 && path[0] == '/'))
		return false;
	size_t s = n; /* the last slash before the last component, or n: none */
	for (size_t i = n; i > 0; i--) {
		if (path[i - 1] == '/') {
			s = i - 1;
			break;
		}
	}
	size_t start = s == n ? 0 : s + 1;
	size_t len = n - start;
	if ((len == 1 && path[start] == '.') ||
	    (len == 2 && path[start] == '.' && path[start + 1] == '.'))
		return false;
	const char *p = s == n ? "." : s == 0 ? "/" : NULL;
	size_t plen = p ? strlen(p) : s;
	if (plen + 1 > parent_size)
		return false;
	memcpy(parent, p ? p : path, plen);
	parent[plen] = '\0';
	*last = path + start;
	*name_len = len;
	return true;
}

bool ab_med_git_name(const char *name, size_t len)
{
	static const char git[] = ".git";
	if (len != 4)
		return false;
	for (size_t i = 0; i < 4; i++) {
		char c = name[i];
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c != git[i])
			return false;
	}
	return true;
}

/* Does PATH start with the component(s) PREFIX, followed by '/' or its end?
 * Then *REST points there. */
static bool has_prefix(const char *path, const char *prefix, const char **rest)
{
	size_t n = strlen(prefix);
	if (strncmp(path, prefix, n) != 0 || (path[n] != '/' && path[n] != '\0'))
		return false;
	*rest = path + n;
	return true;
}

int ab_med_proc_rewrite(const char *path, int pid, int tid, char *out, size_t size)
{
	static const char *const std[] = {"/dev/stdin", "/dev/stdout", "/dev/stderr"};
	const char *rest;
	int n = -1;
	for (int i = 0; i < 3; i++)
		if (has_prefix(path, std[i], &rest))
			n = snprintf(out, size, "/proc/%d/fd/%d%s", pid, i, rest);
	if (n < 0 && has_prefix(path, "/dev/fd", &rest))
		n = snprintf(out, size, "/proc/%d/fd%s", pid, rest);
	else if (n < 0 && has_prefix(path, "/proc/self", &rest))
		n = snprintf(out, size, "/proc/%d%s", pid, rest);
	else if (n < 0 && has_prefix(path, "/proc/thread-self", &rest))
		n = snprintf(out, size, "/proc/%d/task/%d%s", pid, tid, rest);
	if (n < 0)
		return 0;
	return (size_t)n < size ? 1 : -1;
}

bool ab_med_parse_redirect(const char *text, unsigned *grant, char *name, size_t size)
{
	const char *rest;
	if (!has_prefix(text, AB_MED_LINK_ROOT, &rest) || *rest != '/')
		return false;
	const char *g = rest + 1;
	unsigned v = 0;
	size_t digits = 0;
	for (; g[digits] >= '0' && g[digits] <= '9' && digits < 6; digits++)
		v = v * 10 + (unsigned)(g[digits] - '0');
	if (!digits || g[digits] != '/' || (digits > 1 && g[0] == '0'))
		return false;
	const char *e = g + digits + 1;
	size_t el = strlen(e);
	if (!el || el > AB_MED_NAME_MAX || el >= size || strchr(e, '/') || strcmp(e, ".") == 0 ||
	    strcmp(e, "..") == 0)
		return false;
	/* "TAG.N": the run's tag (hex), the entry's number */
	const char *dot = strchr(e, '.');
	if (!dot || dot == e || !dot[1])
		return false;
	for (size_t i = 0; i < el; i++) {
		bool hex = (e[i] >= '0' && e[i] <= '9') || (e[i] >= 'a' && e[i] <= 'f');
		if (!(hex || (e + i == dot)) || (e + i > dot && !(e[i] >= '0' && e[i] <= '9')))
			return false;
	}
	*grant = v;
	memcpy(name, e, el + 1);
	return true;
}

bool ab_med_is_redirect(const char *text)
{
	unsigned g;
	char name[AB_MED_NAME_MAX + 1];
	return ab_med_parse_redirect(text, &g, name, sizeof(name));
}
