/* SPDX-License-Identifier: MIT */
/*
 * The pure decisions behind a rename onto a rendered credentials file
 * (supervise_rename.c): the caller's path as text, normalised, and the
 * checks of the files involved.  Apart so that the fuzz target
 * (tests/fuzz/fuzz_suppath.c) needs nothing else.
 */
#include "agentbox/supervise.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

int ab_sup_path_norm(const char *base, const char *path, char *out, size_t size)
{
	if (!path[0] || size < 2 || (path[0] != '/' && (!base || base[0] != '/')))
		return -EINVAL;
	size_t o = 0; /* out[0..o): "" or "/a/b" */
	for (int part = path[0] == '/'; part < 2; part++) {
		const char *p = part ? path : base;
		while (*p) {
			while (*p == '/')
				p++;
			size_t n = strcspn(p, "/");
			if (n == 0 || (n == 1 && p[0] == '.')) {
				/* nothing, or "." */
			} else if (n == 2 && p[0] == '.' && p[1] == '.') {
				while (o > 0 && out[o - 1] != '/')
					o--;
				if (o > 0)
					o--;
			} else {
				if (o + 1 + n + 1 > size)
					return -ENAMETOOLONG;
				out[o++] = '/';
				memcpy(out + o, p, n);
				o += n;
			}
			p += n;
		}
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return 0;
}

static bool same_file(const struct statx *a, const struct statx *b)
{
	return a->stx_dev_major == b->stx_dev_major && a->stx_dev_minor == b->stx_dev_minor &&
	       a->stx_ino == b->stx_ino;
}

static bool mount_root(const struct statx *x)
{
	return x->stx_attributes & STATX_ATTR_MOUNT_ROOT;
}

const char *ab_sup_rename_refusal(const struct statx *src, const struct statx *src_dir,
				  const struct statx *target, const struct statx *target_dir,
				  bool target_tmpfs, uid_t kuid, int64_t t0_sec, uint32_t t0_nsec)
{
	const struct statx *all[] = {src, src_dir, target, target_dir};
	for (size_t i = 0; i < AB_ARRAY_SIZE(all); i++) {
		if ((all[i]->stx_mask & (STATX_BASIC_STATS | STATX_MNT_ID)) !=
			    (STATX_BASIC_STATS | STATX_MNT_ID) ||
		    !(all[i]->stx_attributes_mask & STATX_ATTR_MOUNT_ROOT))
			return "the kernel does not tell the file's identity";
	}
	if (!same_file(src_dir, target_dir) || src_dir->stx_mnt_id != target_dir->stx_mnt_id)
		return "the new file is in another directory";
	if (!S_ISREG(src->stx_mode))
		return "the new file is not a regular file";
	if (src->stx_nlink != 1)
		return "the new file has other links";
	if (src->stx_uid != kuid)
		return "the new file is not the sandbox's";
	if (src->stx_size > AB_SUP_RENDERED_MAX)
		return "the new file is larger than 64 KiB";
	if (mount_root(src) || src->stx_mnt_id != src_dir->stx_mnt_id ||
	    src->stx_dev_major != src_dir->stx_dev_major ||
	    src->stx_dev_minor != src_dir->stx_dev_minor)
		return "the new file is a mount point";
	if (!(src->stx_mask & STATX_BTIME))
		return "the new file's birth time is unknown";
	if (src->stx_btime.tv_sec < t0_sec ||
	    (src->stx_btime.tv_sec == t0_sec && src->stx_btime.tv_nsec < t0_nsec))
		return "the new file is older than the sandbox";
	if (!S_ISREG(target->stx_mode) || target->stx_nlink != 0 || target->stx_uid != kuid ||
	    !mount_root(target) || !target_tmpfs)
		return "the target is not the rendered copy";
	return NULL;
}
