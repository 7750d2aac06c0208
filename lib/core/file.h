/* SPDX-License-Identifier: MIT */
/* Safe file access for every tool and loader (libc only, in
 * libptrain_core):
 *  - reading: open without blocking on FIFOs and refuse anything that is
 *    not a regular file, with one line naming the path and its type;
 *  - writing: only regular files are replaced (an existing symlink, device,
 *    FIFO, socket or directory at the target is refused, checked when the
 *    write starts and again right before the rename), and a file appears
 *    complete or not at all.  Data go to an unnamed O_TMPFILE in the
 *    target's directory (nothing is left behind when the process is
 *    killed), or where the file system lacks O_TMPFILE, to an
 *    O_CREAT|O_EXCL temporary "PATH.tmp.XXXXXX" (mkostemp: a planted
 *    symlink or file of that name is never followed or reused); fsync;
 *    rename over the target; fsync of the directory.
 * Errors go through pt_fail (PT_EIO, PT_ENOMEM) as one line.
 */
#ifndef PTRAIN_FILE_H
#define PTRAIN_FILE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Open `path` for reading.  O_NONBLOCK during open (a FIFO with no writer
 * must not block), fstat, refuse non-regular files ("X is a FIFO, not a
 * regular file"), then back to blocking I/O.  `what` names the file's role
 * in messages ("token shard", "topology file"; NULL: "file").  Returns the
 * descriptor (>= 0) or PT_EIO. */
int pt_open_regular(const char *path, const char *what);

/* Read a whole file (path, or standard input when path is NULL or "-")
 * into a malloc'd, NUL-terminated buffer of *len bytes (the NUL not
 * counted).  A named file must be a regular file (pt_open_regular:
 * FIFOs, devices and directories are refused without blocking).  PT_EIO when it cannot be opened or read, PT_ENOMEM. */
int pt_read_file(const char *path, char **buf, size_t *len);

/* Read everything from descriptor fd (to end of file; the descriptor is
 * not closed) into a malloc'ed, NUL-terminated buffer of *len bytes;
 * messages name it "WHAT NAME" (what may be NULL).  PT_EIO, PT_ENOMEM. */
int pt_read_fd(int fd, const char *what, const char *name, char **buf, size_t *len);

/* Read all of a regular file opened by pt_open_regular into a malloc'ed,
 * NUL-terminated buffer of *len bytes.  PT_EIO, PT_ENOMEM. */
int pt_read_regular(const char *path, const char *what, char **buf, size_t *len);

/* pt_read_regular for a file that may hold at most `max` bytes: its size
 * (fstat) is checked before anything is read or allocated, so a huge or
 * sparse file costs nothing, and reading stops past `max` (a file that grows
 * meanwhile).  A file over the limit is PT_EFORMAT with one line naming it,
 * its size and the limit: "WHAT PATH is N bytes, more than the M bytes
 * allowed".  Else as pt_read_regular (PT_EIO, PT_ENOMEM). */
int pt_read_regular_max(const char *path, const char *what, size_t max, char **buf, size_t *len);

/* Whether `path` may be (re)written by pt_atomic_open: it does not exist, or
 * it is a regular file (lstat: a symbolic link -- to a regular file too --,
 * directory, FIFO, socket or device is refused without being followed or
 * opened).  Tools call it before long work (a probe, an encoding) so that a
 * bad output name is refused at once; pt_atomic_open and pt_atomic_commit
 * check again.  Returns PT_OK, or PT_EIO with one line naming the path and
 * what it is ("PATH is a FIFO, not a regular file: refusing to replace it
 * (remove it or name another file)"), or why it cannot be examined. */
int pt_output_check(const char *path);

/* A file being written atomically. */
typedef struct pt_atomic_file {
    int fd;     /* write the contents here (open for reading too: a writer may read back what it wrote) */
    char *path; /* final name */
    char *tmp;  /* visible temporary name (mkostemp fallback), else NULL */
} pt_atomic_file;

/* Start writing `path` (mode 0644).  An existing `path` must be a regular
 * file: a symbolic link (to anything, a regular file included), directory,
 * FIFO, socket or device is refused (lstat, links are never followed) with
 * PT_EIO and one line "PATH is a symbolic link, not a regular file: refusing
 * to replace it ...".  PT_EIO also when the directory cannot hold a new
 * file; PT_ENOMEM. */
int pt_atomic_open(pt_atomic_file *f, const char *path);

/* Make the files visible under their final names: fsync each, link it to a
 * temporary name (O_TMPFILE) and close it (fsync and close errors are
 * reported), check every target again as pt_atomic_open did (one that
 * became a link, FIFO, device... since is refused, PT_EIO, and nothing is
 * renamed), and rename all of them, then fsync their directories.  The
 * renames happen only after every file was written and synced, so a failure
 * before them leaves every previous file untouched; a failed rename leaves
 * no temporary.  Closes and releases all of them, also on error (removing
 * what was not renamed).  PT_EIO, PT_ENOMEM. */
int pt_atomic_commit(pt_atomic_file *files, int n);

/* Drop a file being written (close; remove its temporary). */
void pt_atomic_abort(pt_atomic_file *f);

/* write(2) all of buf, retrying on EINTR and short writes: 0 or -1 (errno). */
int pt_write_all(int fd, const void *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
