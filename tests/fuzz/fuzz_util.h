/* SPDX-License-Identifier: MIT */
/* Helpers shared by the libFuzzer targets (tests/fuzz/README). */
#ifndef PTRAIN_FUZZ_UTIL_H
#define PTRAIN_FUZZ_UTIL_H
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The input as an in-memory regular file (memfd): path is
 * "/proc/self/fd/N", so the loaders run their real open/fstat/read path. */
static inline int fuzz_memfile(const uint8_t *data, size_t size, char *path, size_t pathlen)
{
    int fd = memfd_create("ptrain-fuzz", 0);
    if (fd < 0) abort();
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) abort();
        off += (size_t)w;
    }
    snprintf(path, pathlen, "/proc/self/fd/%d", fd);
    return fd;
}

/* The input as a NUL-terminated string (malloc'ed). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}
#endif
