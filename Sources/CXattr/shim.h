// Extended attributes (Linux `<sys/xattr.h>`), which Glibc's Swift module leaves out. Used by
// SeggetSystem only: the mark a finished download carries (see `PosixFile.setAttribute`).
#ifndef SEGGET_CXATTR_SHIM_H
#define SEGGET_CXATTR_SHIM_H

#include <sys/types.h>
#include <sys/xattr.h>

#endif
