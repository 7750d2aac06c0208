/* SPDX-License-Identifier: MIT */
/* Helpers shared by the libFuzzer targets (tests/fuzz/README). */
#ifndef PTRAIN_FUZZ_UTIL_H
#define PTRAIN_FUZZ_UTIL_H
#define _GNU_SOURCE
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

/* A directory of this process's own for files a loader needs by name (a
 * checkpoint directory, a fake sysfs tree): made once under $TMPDIR (or
 * /tmp), removed with what it holds when the fuzzer exits (a crash leaves
 * it, named ptrain-fuzz.XXXXXX). */
static char fuzz_dir_path[256];
static inline int fuzz_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    (void)remove(p); /* best effort: go on with the rest */
    return 0;
}
static inline void fuzz_dir_remove(void)
{
    if (fuzz_dir_path[0]) nftw(fuzz_dir_path, fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
static inline const char *fuzz_dir(void)
{
    if (!fuzz_dir_path[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/ptrain-fuzz.XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(fuzz_dir_path)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_path;
}

/* Write data[0, size) to path (created or truncated); aborts on failure
 * (the harness's own files must work). */
static inline void fuzz_write(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

/* A refusal's message must be one non-empty line (core.h's convention). */
static inline void fuzz_check_msg(const char *msg)
{
    if (!msg || !*msg || strchr(msg, '\n') || strchr(msg, '\r')) {
        fprintf(stderr, "refusal is not one line: '%s'\n", msg ? msg : "(null)");
        abort();
    }
}
#endif
