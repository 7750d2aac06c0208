/* SPDX-License-Identifier: MIT */
/* An LD_PRELOAD fault injector for ptrain-run's start-up tests
 * (tests/mpi/test_startup.sh): malloc returns NULL (errno ENOMEM) once,
 * for the first request of exactly PTRAIN_TEST_FAIL_MALLOC bytes made by
 * the program's own code (a return address inside the main executable,
 * not a library), in a process whose name contains "ptrain-run" (the
 * libtool wrapper's shell and mpirun are left alone).  Everything else goes
 * to glibc's __libc_malloc.  Not for ASan builds (ASan owns malloc). */
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t size);
extern char *program_invocation_short_name;

static int armed = -1;     /* -1 unknown, 0 off, 1 waiting for the size */
static size_t fail_size;
static uintptr_t lo[16], hi[16];
static int nseg;

/* the main executable's loaded segments (dl_iterate_phdr's first object) */
static int main_segments(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size, (void)data;
    for (int i = 0; i < info->dlpi_phnum && nseg < 16; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD) {
            lo[nseg] = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            hi[nseg] = lo[nseg] + info->dlpi_phdr[i].p_memsz;
            nseg++;
        }
    return 1; /* the first object only */
}

static void arm(void)
{
    const char *s = getenv("PTRAIN_TEST_FAIL_MALLOC");
    char *end;
    armed = 0;
    if (!s || !*s || !strstr(program_invocation_short_name, "ptrain-run")) return;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || v == 0) return;
    fail_size = (size_t)v;
    dl_iterate_phdr(main_segments, NULL);
    armed = nseg > 0;
}

static int from_main(uintptr_t ra)
{
    for (int i = 0; i < nseg; i++)
        if (ra >= lo[i] && ra < hi[i]) return 1;
    return 0;
}

void *malloc(size_t size)
{
    static _Thread_local int inside;
    if (armed != 0 && !inside) {
        inside = 1;
        if (armed < 0) arm();
        const int hit = armed == 1 && size == fail_size && from_main((uintptr_t)__builtin_return_address(0));
        inside = 0;
        if (hit) {
            armed = 0;
            errno = ENOMEM;
            return NULL;
        }
    }
    return __libc_malloc(size);
}
