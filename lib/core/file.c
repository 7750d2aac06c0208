/* SPDX-License-Identifier: MIT */
/* Safe file access: see file.h. */
#define _GNU_SOURCE
#include "core/file.h"
#include "core/core.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *type_name(mode_t m)
{
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISLNK(m)) return "a symbolic link";
    return "not a regular file";
}

int pt_open_regular(const char *path, const char *what)
{
    if (!what) what = "file";
    if (!path || !*path) return pt_fail(PT_EIO, "no %s name given", what);
    int fd = open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return pt_fail(PT_EIO, "cannot open %s %s: %s", what, path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return pt_fail(PT_EIO, "cannot stat %s %s: %s", what, path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return pt_fail(PT_EIO, "%s %s is %s, not a regular file", what, path, type_name(sb.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(fd);
        return pt_fail(PT_EIO, "cannot read %s %s: %s", what, path, strerror(e));
    }
    return fd;
}

int pt_read_fd(int fd, const char *what, const char *name, char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    int rc = PT_OK;
    while (b) {
        if (n == cap) {
            char *nb = cap < SIZE_MAX / 4 ? realloc(b, 2 * cap + 1) : NULL;
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
        ssize_t got = read(fd, b + n, cap - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            rc = pt_fail(PT_EIO, "error reading %s%s%s: %s", what ? what : "", what ? " " : "", name, strerror(errno));
            break;
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    if (!b) return pt_fail(PT_ENOMEM, "out of memory reading %s", name);
    if (rc) {
        free(b);
        return rc;
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return PT_OK;
}

int pt_read_regular(const char *path, const char *what, char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    int fd = pt_open_regular(path, what);
    if (fd < 0) return fd;
    int rc = pt_read_fd(fd, what ? what : "file", path, buf, len);
    close(fd);
    return rc;
}

static int too_big(const char *what, const char *path, unsigned long long size, size_t max)
{
    return pt_fail(PT_EFORMAT, "%s %s is %llu bytes, more than the %zu bytes allowed", what, path, size, max);
}

int pt_read_regular_max(const char *path, const char *what, size_t max, char **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    if (!what) what = "file";
    if (max > SIZE_MAX / 4) max = SIZE_MAX / 4; /* no overflow below */
    int fd = pt_open_regular(path, what);
    if (fd < 0) return fd;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return pt_fail(PT_EIO, "cannot stat %s %s: %s", what, path, strerror(e));
    }
    if (sb.st_size < 0 || (unsigned long long)sb.st_size > max) {
        close(fd);
        return too_big(what, path, (unsigned long long)sb.st_size, max);
    }
    /* the size known: one buffer, and one byte more to see a file that grew */
    size_t cap = (size_t)sb.st_size + 1, n = 0;
    char *b = malloc(cap + 1);
    if (!b) {
        close(fd);
        return pt_fail(PT_ENOMEM, "out of memory reading %s %s (%zu bytes)", what, path, cap - 1);
    }
    for (;;) {
        if (n == cap) {
            size_t more = cap < max + 1 - cap ? 2 * cap : max + 1;
            if (more <= cap) break; /* max + 1 bytes read: over the limit */
            char *nb = realloc(b, more + 1);
            if (!nb) {
                free(b);
                close(fd);
                return pt_fail(PT_ENOMEM, "out of memory reading %s %s", what, path);
            }
            b = nb;
            cap = more;
        }
        ssize_t got = read(fd, b + n, cap - n);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            int e = errno;
            free(b);
            close(fd);
            return pt_fail(PT_EIO, "error reading %s %s: %s", what, path, strerror(e));
        }
        if (got == 0) break;
        n += (size_t)got;
    }
    close(fd);
    if (n > max) {
        free(b);
        return too_big(what, path, (unsigned long long)n, max);
    }
    b[n] = '\0';
    *buf = b;
    *len = n;
    return PT_OK;
}

int pt_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* directory part of path (malloc'ed): "a/b" -> "a", "b" -> ".", "/b" -> "/" */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

/* lstat: a symbolic link is refused as a link, whatever it points to, and
 * never followed; rename would replace a device, FIFO or socket with a
 * regular file */
int pt_output_check(const char *path)
{
    if (!path || !*path) return pt_fail(PT_EIO, "no output file name given");
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (errno == ENOENT) return PT_OK;
        return pt_fail(PT_EIO, "cannot write %s: %s", path, strerror(errno));
    }
    if (S_ISREG(sb.st_mode)) return PT_OK;
    return pt_fail(PT_EIO, "%s is %s, not a regular file: refusing to replace it (remove it or name another file)",
                   path, type_name(sb.st_mode));
}

int pt_atomic_open(pt_atomic_file *f, const char *path)
{
    memset(f, 0, sizeof *f);
    f->fd = -1;
    if (!path || !*path) return pt_fail(PT_EIO, "no output file name given");
    int rc = pt_output_check(path);
    if (rc) return rc;
    f->path = strdup(path);
    char *dir = dir_of(path);
    if (!f->path || !dir) {
        free(dir);
        pt_atomic_abort(f);
        return pt_fail(PT_ENOMEM, "out of memory");
    }
#ifdef O_TMPFILE
    f->fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
#endif
    if (f->fd < 0) {
        /* no O_TMPFILE here (e.g. some network file systems): a named,
         * exclusively created temporary */
        size_t n = strlen(path) + 16;
        f->tmp = malloc(n);
        if (!f->tmp) {
            free(dir);
            pt_atomic_abort(f);
            return pt_fail(PT_ENOMEM, "out of memory");
        }
        snprintf(f->tmp, n, "%s.tmp.XXXXXX", path);
        f->fd = mkostemp(f->tmp, O_CLOEXEC);
        if (f->fd < 0) {
            int e = errno;
            free(f->tmp);
            f->tmp = NULL;
            pt_atomic_abort(f);
            rc = pt_fail(PT_EIO, "cannot create a file in %s for %s: %s", dir, path, strerror(e));
            free(dir);
            return rc;
        }
        (void)fchmod(f->fd, 0644);
    }
    free(dir);
    return PT_OK;
}

void pt_atomic_abort(pt_atomic_file *f)
{
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    if (f->tmp) unlink(f->tmp);
    free(f->tmp);
    free(f->path);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

static void fsync_dir(const char *path)
{
    char *dir = dir_of(path);
    if (!dir) return;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    free(dir);
}

int pt_atomic_commit(pt_atomic_file *files, int n)
{
    int rc = PT_OK;
    /* 1. every file's data on disk */
    for (int i = 0; i < n && !rc; i++)
        if (fsync(files[i].fd) != 0)
            rc = pt_fail(PT_EIO, "cannot write %s (fsync failed): %s", files[i].path, strerror(errno));
    /* 2. give unnamed files a temporary name (linkat cannot replace) */
    for (int i = 0; i < n && !rc; i++) {
        if (files[i].tmp) continue;
        size_t len = strlen(files[i].path) + 32;
        char *tmp = malloc(len);
        if (!tmp) {
            rc = pt_fail(PT_ENOMEM, "out of memory");
            break;
        }
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", files[i].fd);
        for (int attempt = 0;; attempt++) {
            snprintf(tmp, len, "%s.tmp.%ld.%d", files[i].path, (long)getpid(), attempt);
            if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0) {
                files[i].tmp = tmp;
                break;
            }
            if (errno != EEXIST || attempt > 100) {
                rc = pt_fail(PT_EIO, "cannot create %s: %s", tmp, strerror(errno));
                free(tmp);
                break;
            }
        }
    }
    /* 3. close (NFS reports write errors there), before any rename */
    for (int i = 0; i < n && !rc; i++) {
        int fd = files[i].fd;
        files[i].fd = -1;
        if (close(fd) != 0) rc = pt_fail(PT_EIO, "cannot write %s (close failed): %s", files[i].path, strerror(errno));
    }
    /* 4. every target still absent or a regular file (checked again right
     * before the renames: it may have changed while the data were written) */
    for (int i = 0; i < n && !rc; i++) rc = pt_output_check(files[i].path);
    /* 5. all renames, only once every file is complete; a failed rename
     * leaves its temporary to be removed below */
    int renamed = 0;
    for (; renamed < n && !rc; renamed++)
        if (rename(files[renamed].tmp, files[renamed].path) != 0) {
            rc = pt_fail(PT_EIO, "cannot rename %s to %s: %s", files[renamed].tmp, files[renamed].path, strerror(errno));
            break;
        }
    for (int i = 0; i < renamed; i++) {
        fsync_dir(files[i].path);
        free(files[i].tmp);
        files[i].tmp = NULL; /* renamed: nothing to remove */
    }
    for (int i = 0; i < n; i++) pt_atomic_abort(&files[i]); /* closes what is open, removes temporaries */
    return rc;
}

int pt_read_file(const char *path, char **buf, size_t *len)
{
    /* a named file must be a regular one (a FIFO would block, a directory
     * reads as an error): pt_read_regular checks before reading */
    if (path && strcmp(path, "-") != 0) return pt_read_regular(path, "file", buf, len);
    return pt_read_fd(STDIN_FILENO, NULL, "standard input", buf, len);
}
