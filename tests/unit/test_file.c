/* SPDX-License-Identifier: MIT */
/* The output rule of lib/core/file.c, on every kind of target:
 * pt_output_check, pt_atomic_open and pt_atomic_commit replace only regular
 * files (or create absent ones).  A symbolic link (to a regular file, to
 * nothing), a FIFO, a socket, a directory and a character device (mknod
 * 1,3 like /dev/null, when this process may create one) are refused with
 * PT_EIO and one line naming the path and what it is, and are left exactly
 * as they were.  A target that turns into a link or a FIFO while the data
 * are written is refused at commit, before any file of the set is renamed,
 * and no temporary is left.  Contents are fresh random bytes every run. */
#define _GNU_SOURCE
#include "core/core.h"
#include "core/file.h"
#include "tests/tap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static char dir[256];
static pt_rng rng;

static void path_of(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", dir, name); }

static void random_text(char *buf, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++) buf[i] = (char)('a' + (int)(pt_rng_uniform(&rng) * 26) % 26);
    buf[n - 1] = '\0';
}

static int write_plain(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
    if (fd < 0) return -1;
    int rc = pt_write_all(fd, text, strlen(text));
    return close(fd) || rc ? -1 : 0;
}

static int same_text(const char *path, const char *text)
{
    char *buf = NULL;
    size_t len = 0;
    if (pt_read_regular(path, NULL, &buf, &len)) return 0;
    int same = len == strlen(text) && !memcmp(buf, text, len);
    free(buf);
    return same;
}

/* temporaries ("*.tmp.*") left in dir */
static int temporaries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

/* Write `text` to path through the atomic writer: its status */
static int atomic_write(const char *path, const char *text)
{
    pt_atomic_file f;
    int rc = pt_atomic_open(&f, path);
    if (rc) return rc;
    if (pt_write_all(f.fd, text, strlen(text))) {
        pt_atomic_abort(&f);
        return PT_EIO;
    }
    return pt_atomic_commit(&f, 1);
}

/* the st_mode type bits of path (lstat), 0 when absent */
static mode_t kind(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) ? 0 : (sb.st_mode & S_IFMT);
}

/* One refused target: pt_output_check and the atomic writer both refuse it
 * with one line naming it and `what`; it keeps its type (and, for links,
 * where it points); the link's target keeps its bytes. */
static void refused(const char *name, const char *what, const char *link_to, const char *victim_text)
{
    char path[512], msg[512], text[64];
    path_of(path, sizeof path, name);
    mode_t before = kind(path);
    random_text(text, sizeof text);
    int c = pt_output_check(path);
    snprintf(msg, sizeof msg, "%s", pt_errmsg());
    int w = atomic_write(path, text);
    const char *wmsg = pt_errmsg();
    int named = strstr(msg, path) && strstr(msg, what) && !strchr(msg, '\n') && strstr(wmsg, path) && strstr(wmsg, what);
    tap_ok(c == PT_EIO && w == PT_EIO && named, "%s: refused by pt_output_check and pt_atomic_open (%s)", name, msg);
    int kept = kind(path) == before;
    if (kept && link_to) {
        char got[512];
        ssize_t n = readlink(path, got, sizeof got - 1);
        kept = n >= 0 && (got[n] = '\0', !strcmp(got, link_to));
    }
    if (kept && victim_text) {
        char victim[512];
        path_of(victim, sizeof victim, "victim");
        kept = same_text(victim, victim_text);
    }
    tap_ok(kept && temporaries() == 0, "%s: left as it was%s, no temporary", name,
           victim_text ? " and the file it points to unchanged" : "");
}

int main(void)
{
    pt_rng_seed(&rng, ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid(), 0);
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ptrain-file.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        printf("Bail out! mkdtemp %s: %s\n", dir, strerror(errno));
        return 1;
    }
    char path[512], other[512], victim[512], text[64], vtext[64];

    /* regular and absent targets are written */
    path_of(path, sizeof path, "new.json");
    random_text(text, sizeof text);
    tap_ok(pt_output_check(path) == PT_OK && atomic_write(path, text) == PT_OK && same_text(path, text),
           "an absent target is created with the data");
    random_text(text, sizeof text);
    tap_ok(pt_output_check(path) == PT_OK && atomic_write(path, text) == PT_OK && same_text(path, text) &&
               kind(path) == S_IFREG,
           "a regular file is replaced with the new data");

    /* every other kind of target is refused */
    path_of(victim, sizeof victim, "victim");
    random_text(vtext, sizeof vtext);
    if (write_plain(victim, vtext)) {
        printf("Bail out! cannot write %s\n", victim);
        return 1;
    }
    path_of(other, sizeof other, "link");
    if (symlink(victim, other)) printf("Bail out! symlink: %s\n", strerror(errno)), exit(1);
    refused("link", "is a symbolic link, not a regular file", victim, vtext);
    path_of(other, sizeof other, "dangling");
    path_of(path, sizeof path, "nowhere");
    if (symlink(path, other)) printf("Bail out! symlink: %s\n", strerror(errno)), exit(1);
    refused("dangling", "is a symbolic link, not a regular file", path, NULL);
    tap_ok(kind(path) == 0, "the dangling link's target was not created");
    path_of(other, sizeof other, "fifo");
    if (mkfifo(other, 0644)) printf("Bail out! mkfifo: %s\n", strerror(errno)), exit(1);
    refused("fifo", "is a FIFO, not a regular file", NULL, NULL);
    path_of(other, sizeof other, "subdir");
    if (mkdir(other, 0755)) printf("Bail out! mkdir: %s\n", strerror(errno)), exit(1);
    refused("subdir", "is a directory, not a regular file", NULL, NULL);
    path_of(other, sizeof other, "sock");
    int sfd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    if (strlen(other) < sizeof sa.sun_path && sfd >= 0) {
        memcpy(sa.sun_path, other, strlen(other) + 1);
        if (bind(sfd, (struct sockaddr *)&sa, sizeof sa) == 0) refused("sock", "is a socket, not a regular file", NULL, NULL);
        else tap_ok(1, "sock: refused # SKIP cannot bind a socket at %s: %s", other, strerror(errno));
    } else {
        tap_ok(1, "sock: refused # SKIP socket path %s too long or no socket", other);
    }
    if (sfd >= 0) close(sfd);
    path_of(other, sizeof other, "null");
    if (mknod(other, S_IFCHR | 0666, makedev(1, 3)) == 0) {
        refused("null", "is a character device, not a regular file", NULL, NULL);
        unlink(other);
    } else {
        tap_ok(1, "null (a character device): refused # SKIP cannot create a character device like /dev/null here (%s; needs root with CAP_MKNOD)",
               strerror(errno));
    }

    /* a target that becomes a FIFO or a link while the data are written */
    path_of(path, sizeof path, "race-fifo");
    pt_atomic_file f;
    random_text(text, sizeof text);
    int rc = pt_atomic_open(&f, path);
    if (!rc) rc = pt_write_all(f.fd, text, strlen(text)) ? PT_EIO : PT_OK;
    if (!rc && mkfifo(path, 0644)) printf("Bail out! mkfifo: %s\n", strerror(errno)), exit(1);
    rc = rc ? rc : pt_atomic_commit(&f, 1);
    tap_ok(rc == PT_EIO && strstr(pt_errmsg(), "race-fifo is a FIFO") && kind(path) == S_IFIFO && temporaries() == 0,
           "a target that became a FIFO after pt_atomic_open is refused at commit and stays a FIFO (%s)", pt_errmsg());

    /* a set of two: the second target becomes a link; the first is not renamed either */
    pt_atomic_file two[2];
    char first[512], second[512], old1[64];
    path_of(first, sizeof first, "set-a");
    path_of(second, sizeof second, "set-b");
    random_text(old1, sizeof old1);
    write_plain(first, old1);
    random_text(text, sizeof text);
    rc = pt_atomic_open(&two[0], first);
    if (!rc) rc = pt_atomic_open(&two[1], second);
    for (int k = 0; k < 2 && !rc; k++) rc = pt_write_all(two[k].fd, text, strlen(text)) ? PT_EIO : PT_OK;
    if (!rc && symlink(victim, second)) printf("Bail out! symlink: %s\n", strerror(errno)), exit(1);
    rc = rc ? rc : pt_atomic_commit(two, 2);
    tap_ok(rc == PT_EIO && strstr(pt_errmsg(), "set-b is a symbolic link") && same_text(first, old1) &&
               kind(second) == S_IFLNK && same_text(victim, vtext) && temporaries() == 0,
           "a set whose second target became a link: nothing renamed, the first file keeps its old bytes, the "
           "link and its target untouched (%s)", pt_errmsg());

    /* clean up */
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        path_of(path, sizeof path, e->d_name);
        if (unlink(path)) rmdir(path);
    }
    if (d) closedir(d);
    rmdir(dir);
    return tap_done();
}
