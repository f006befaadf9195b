// What Glibc's Swift module leaves out, for SeggetSystem only: extended attributes (Linux
// `<sys/xattr.h>`: the mark a finished download carries, see `PosixFile.setAttribute`), and a rename
// that never replaces (`renameat2` with `RENAME_NOREPLACE`, see `FileSystem.renameWithoutReplacing`).
#ifndef SEGGET_CXATTR_SHIM_H
#define SEGGET_CXATTR_SHIM_H

#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/xattr.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif

// rename(2) that fails with EEXIST where `to` names anything, in one step; -1 with ENOSYS or EINVAL
// where the kernel or the file system does not offer it. glibc declares `renameat2` only under
// _GNU_SOURCE, which the Swift module of the C library is not built with.
static inline int segget_rename_noreplace(const char *from, const char *to) {
    return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE);
}

#endif
