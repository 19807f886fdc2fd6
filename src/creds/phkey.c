/* SPDX-License-Identifier: MIT */
/*
 * The key behind stable placeholders (secrets.X.placeholder.stable): 32
 * random bytes in $XDG_STATE_HOME/agentbox/placeholder.key (default
 * ~/.local/state/agentbox/), made on first use, read by the parent before
 * each run that needs it.  The placeholder is HMAC-SHA256 under this key of
 * the secret's name and value (ab_placeholder_derive), so the key must stay
 * where no sandbox can read it (a weak value would become guessable from its
 * placeholder) or plant it (its own key would make that so): the plan keeps
 * stable placeholders only when no grant covers the file (plan_net.c).
 */
#include "agentbox/phkey.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define PHKEY_REL "/agentbox/placeholder.key"

char *ab_phkey_path(const char *home, char *const *env)
{
	const char *state = NULL;
	for (char *const *e = env; e && *e; e++)
		if (strncmp(*e, "XDG_STATE_HOME=", 15) == 0)
			state = *e + 15;
	/* the XDG rule: a relative value is ignored */
	_cleanup_free_ char *full = NULL;
	if (state && state[0] == '/')
		full = ab_path_join(state, &PHKEY_REL[1]);
	else if (home && home[0] == '/')
		full = ab_path_join(home, ".local/state" PHKEY_REL);
	return full ? ab_path_normalize(full) : NULL;
}

/* mkdir -p DIR's missing components, mode 0700. */
static int make_dirs(char *dir)
{
	struct stat st;
	if (stat(dir, &st) == 0)
		return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
	if (errno != ENOENT)
		return -errno;
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		int r = make_dirs(dir);
		*slash = '/';
		if (r < 0)
			return r;
	}
	return mkdir(dir, 0700) == 0 || errno == EEXIST ? 0 : -errno;
}

/* A new key under a temporary name, then linked to PATH: two runs starting
 * at once both read whichever link won. */
static int create_key(const char *path)
{
	_cleanup_free_ char *dir = strdup(path);
	_cleanup_free_ char *tmp = ab_asprintf("%s.XXXXXX", path);
	if (!dir || !tmp)
		return -ENOMEM;
	*strrchr(dir, '/') = '\0';
	int r = make_dirs(dir);
	if (r < 0)
		return r;
	int fd = mkostemp(tmp, O_CLOEXEC); /* mode 0600 */
	if (fd < 0)
		return -errno;
	unsigned char key[AB_PHKEY_LEN];
	ssize_t n;
	do
		n = getrandom(key, sizeof(key), 0);
	while (n < 0 && errno == EINTR);
	r = n == (ssize_t)sizeof(key) ? 0 : -(n < 0 ? errno : EIO);
	if (r == 0 && write(fd, key, sizeof(key)) != (ssize_t)sizeof(key))
		r = -EIO;
	explicit_bzero(key, sizeof(key));
	if (r == 0 && fsync(fd) < 0)
		r = -errno;
	close(fd);
	if (r == 0 && link(tmp, path) < 0 && errno != EEXIST)
		r = -errno;
	unlink(tmp);
	return r;
}

int ab_phkey_load(const char *path, unsigned char key[AB_PHKEY_LEN], ab_err *err)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		int r = create_key(path);
		if (r < 0)
			return ab_fail(err, -r, "placeholder key %s: create", path);
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return ab_fail(err, errno, "placeholder key %s", path);
	struct stat st;
	int r = fstat(fd, &st) < 0 ? -errno : 0;
	if (r == 0 && (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) ||
		       st.st_size != AB_PHKEY_LEN)) {
		close(fd);
		ab_fail(err, 0, "placeholder key %s: not a %d-byte file of uid %u with mode 0600",
			path, AB_PHKEY_LEN, (unsigned)geteuid());
		ab_err_hint(err, "remove it: agentbox makes a new one (and new placeholders)");
		return -EINVAL;
	}
	ssize_t n = r == 0 ? read(fd, key, AB_PHKEY_LEN) : -1;
	if (r == 0 && n != AB_PHKEY_LEN)
		r = n < 0 ? -errno : -EIO;
	close(fd);
	if (r < 0) {
		explicit_bzero(key, AB_PHKEY_LEN);
		return ab_fail(err, -r, "placeholder key %s", path);
	}
	return 0;
}

int ab_phkey_ensure(const char *path)
{
	struct stat st;
	if (lstat(path, &st) == 0)
		return 0;
	return errno == ENOENT ? create_key(path) : -errno;
}

void ab_phkey_id_of(const char *path, ab_phkey_id *id)
{
	struct stat st;
	memset(id, 0, sizeof(*id));
	if (lstat(path, &st) == 0) {
		id->present = true;
		id->dev = st.st_dev;
		id->ino = st.st_ino;
	}
}

int ab_phkey_settle(const char *path, const ab_phkey_id *before)
{
	ab_phkey_id now;
	ab_phkey_id_of(path, &now);
	if (!now.present || (before->present && now.dev == before->dev && now.ino == before->ino))
		return 0;
	return unlink(path) == 0 ? 1 : -errno;
}
