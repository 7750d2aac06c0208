/* SPDX-License-Identifier: MIT */
/* pt_host_memory_keep (lib/core/core.h): after it, a large block comes
 * from the heap and stays there when freed, so the next step's block of
 * the same size faults no fresh pages in; before it, glibc maps the same
 * block freshly (the check that this test can fail).  glibc only, and not
 * under AddressSanitizer, whose allocator does not take mallopt. */
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tests/tap.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#if defined(__SANITIZE_ADDRESS__)
#define PT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PT_ASAN 1
#endif
#endif

int main(void)
{
#if defined(PT_ASAN)
    tap_skip_all("AddressSanitizer's allocator ignores mallopt");
    return 0;
#elif !defined(__GLIBC__) || !(__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    tap_skip_all("needs glibc 2.33 or later (mallopt, mallinfo2)");
    return 0;
#else
    const size_t big = (size_t)64 << 20; /* above glibc's 32 MiB mmap ceiling */
    char *p = malloc(big);
    struct mallinfo2 mi = mallinfo2();
    tap_ok(p && mi.hblkhd >= big, "before: a 64 MiB block is a fresh mapping (%zu bytes mapped)", mi.hblkhd);
    free(p);
    tap_ok(pt_host_memory_keep() == 1, "pt_host_memory_keep: glibc took both settings");
    p = malloc(big);
    mi = mallinfo2();
    tap_ok(p && mi.hblkhd < big && mi.arena >= big, "after: it comes from the heap (%zu bytes mapped, heap %zu)",
           mi.hblkhd, mi.arena);
    if (p) memset(p, 1, big);
    free(p);
    mi = mallinfo2();
    tap_ok(mi.arena >= big && mi.fordblks >= big, "freed, it stays in the heap for the next step (heap %zu, free %zu)",
           mi.arena, mi.fordblks);
    p = malloc(big);
    struct mallinfo2 m2 = mallinfo2();
    tap_ok(p && m2.arena == mi.arena, "the next block of the size reuses it: the heap did not grow (%zu bytes)",
           m2.arena);
    free(p);
    return tap_done();
#endif
}
