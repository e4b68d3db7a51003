// pathwalk.h: the path resolution shared by the C files of CFileLock (not part of the module's
// interface; see pathwalk.c).
#ifndef YASHIMA_PATHWALK_H
#define YASHIMA_PATHWALK_H

/// The folder holding the last component of `path`, opened O_PATH with no symlink in any component
/// (relative to `dirfd`), and in `*leaf` the last component itself. A path without '/' (or any path
/// relative to AT_FDCWD: the user's own path, whose symlinks are the user's choice) uses `dirfd` as is.
/// Returns the descriptor to use (give it back with ysh_release_parent), or -1 with errno set.
int ysh_open_parent(int dirfd, const char *path, const char **leaf);
/// Closes what ysh_open_parent opened (nothing when it returned `dirfd`), keeping errno.
void ysh_release_parent(int parent, int dirfd);

#endif
