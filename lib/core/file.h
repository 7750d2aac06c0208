/* Safe file access for every tool and loader (libc only, in
 * libptrain_core):
 *  - reading: open without blocking on FIFOs and refuse anything that is
 *    not a regular file, with one line naming the path and its type;
 *  - writing: a file appears complete or not at all.  Data go to an
 *    unnamed O_TMPFILE in the target's directory (nothing is left behind
 *    when the process is killed), or where the file system lacks O_TMPFILE,
 *    to an O_CREAT|O_EXCL temporary "PATH.tmp.XXXXXX" (mkostemp: a planted
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

/* Read everything from descriptor fd (to end of file; the descriptor is
 * not closed) into a malloc'ed, NUL-terminated buffer of *len bytes;
 * messages name it "WHAT NAME" (what may be NULL).  PT_EIO, PT_ENOMEM. */
int pt_read_fd(int fd, const char *what, const char *name, char **buf, size_t *len);

/* Read all of a regular file opened by pt_open_regular into a malloc'ed,
 * NUL-terminated buffer of *len bytes.  PT_EIO, PT_ENOMEM. */
int pt_read_regular(const char *path, const char *what, char **buf, size_t *len);

/* A file being written atomically. */
typedef struct pt_atomic_file {
    int fd;     /* write the contents here */
    char *path; /* final name */
    char *tmp;  /* visible temporary name (mkostemp fallback), else NULL */
} pt_atomic_file;

/* Start writing `path` (mode 0644).  PT_EIO when the directory cannot hold
 * a new file, PT_ENOMEM. */
int pt_atomic_open(pt_atomic_file *f, const char *path);

/* Make the files visible under their final names: fsync each, then link
 * (O_TMPFILE) and rename all of them, then fsync their directories.  The
 * renames happen only after every file was written and synced, so a failure
 * before them leaves every previous file untouched.  Closes and releases
 * all of them, also on error (removing what was not renamed).  PT_EIO. */
int pt_atomic_commit(pt_atomic_file *files, int n);

/* Drop a file being written (close; remove its temporary). */
void pt_atomic_abort(pt_atomic_file *f);

/* write(2) all of buf, retrying on EINTR and short writes: 0 or -1 (errno). */
int pt_write_all(int fd, const void *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif
