/* sysfs helpers of lib/energy (see sysfs.h). */
#define _GNU_SOURCE
#include "energy/sysfs.h"
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int pt_sysfs_path(char *buf, size_t len, const char *rel)
{
    const char *root = getenv(PT_SYSFS_ENV);
    if (!root) root = "";
    int n = snprintf(buf, len, "%s%s", root, rel);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

int pt_sysfs_read(const char *path, char *buf, size_t len)
{
    if (len < 2) return -EINVAL;
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    ssize_t n;
    do n = read(fd, buf, len - 1);
    while (n < 0 && errno == EINTR);
    int e = n < 0 ? errno : 0;
    close(fd);
    if (n < 0) return -e;
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) buf[--n] = '\0';
    return 0;
}

int pt_sysfs_read_u64(const char *path, uint64_t *v)
{
    char buf[64];
    int rc = pt_sysfs_read(path, buf, sizeof buf);
    if (rc) return rc;
    char *end;
    errno = 0;
    if (buf[0] < '0' || buf[0] > '9') return -EINVAL;
    unsigned long long x = strtoull(buf, &end, 10);
    if (errno || *end) return -EINVAL;
    *v = x;
    return 0;
}

int pt_sysfs_write(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return -errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    int rc = pt_write_all(fd, text, strlen(text)) == 0 ? 0 : -errno;
    if (close(fd) != 0 && rc == 0) rc = -errno;
    return rc;
}
