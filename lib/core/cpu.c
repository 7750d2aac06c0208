/* SPDX-License-Identifier: MIT */
/* pt_cpu_bf16_class (cpu.h): cpuid and XGETBV. */
#include "core/cpu.h"

#include <stdint.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

const char *pt_bf16_isa_name(int isa)
{
    switch (isa) {
    case PT_BF16_ISA_NONE: return "none";
    case PT_BF16_ISA_AVX512: return "avx512_bf16";
    case PT_BF16_ISA_AMX: return "amx_bf16";
    default: return "?";
    }
}

int pt_bf16_isa_parse(const char *s)
{
    for (int i = PT_BF16_ISA_NONE; s && i <= PT_BF16_ISA_AMX; i++)
        if (strcmp(s, pt_bf16_isa_name(i)) == 0) return i;
    return -1;
}

#if defined(__x86_64__)
static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}
#endif

int pt_cpu_bf16_class(void)
{
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7) return PT_BF16_ISA_NONE;
    __cpuid(1, a, b, c, d);
    if (!(c & (1u << 27))) return PT_BF16_ISA_NONE; /* OSXSAVE: XGETBV is there */
    /* XCR0: SSE, AVX and the three AVX-512 states (opmask, ZMM0-15 upper, ZMM16-31) */
    const uint64_t avx512 = 0xe6ull, tiles = (1ull << 17) | (1ull << 18), xcr0 = xgetbv0();
    if ((xcr0 & avx512) != avx512) return PT_BF16_ISA_NONE;
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned max_sub = a, avx512f = b & (1u << 16), amx_bf16 = d & (1u << 22), amx_tile = d & (1u << 24);
    unsigned a1 = 0;
    if (max_sub >= 1) __cpuid_count(7, 1, a1, b, c, d);
    if (!avx512f || !(a1 & (1u << 5))) return PT_BF16_ISA_NONE;
    return amx_bf16 && amx_tile && (xcr0 & tiles) == tiles ? PT_BF16_ISA_AMX : PT_BF16_ISA_AVX512;
#else
    return PT_BF16_ISA_NONE;
#endif
}
