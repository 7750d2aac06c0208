/* SPDX-License-Identifier: MIT */
/* The CPU's bf16 instruction class, from cpuid alone: what the node model
 * records (topo/, "cpu_bf16") so that the planner can price a bf16 plan on
 * a CPU whose bf16 GEMM rate was never measured, and where
 * lib/backend/gemm_bf16.c's choice of implementation starts.  libc only
 * (the SPANK plugin and the tools link it). */
#ifndef PTRAIN_CORE_CPU_H
#define PTRAIN_CORE_CPU_H

#ifdef __cplusplus
extern "C" {
#endif

/* bf16 ISA classes of a CPU, ordered */
enum {
    PT_BF16_ISA_NONE = 0,   /* no bf16 instructions (or not x86): fp32 compute */
    PT_BF16_ISA_AVX512 = 1, /* AVX512_BF16 (vdpbf16ps): Cooper Lake, Zen 4, Sapphire Rapids */
    PT_BF16_ISA_AMX = 2,    /* AMX-BF16 tiles (tdpbf16ps): Sapphire Rapids and later */
};

/* This CPU's class from cpuid (leaf 7: AVX512_BF16 in sub-leaf 1, AMX-BF16
 * and AMX-TILE) and XGETBV (the OS saves the AVX-512 state; for AMX also
 * the tile configuration and data, XCR0 bits 17 and 18).  Asks the OS for
 * nothing: Linux's per-process AMX permission is the bf16 GEMM's business
 * (pt_bf16_isa, gemm_bf16.h), which may still turn AMX down.
 * PT_BF16_ISA_NONE off x86.  Never fails. */
int pt_cpu_bf16_class(void);
/* "none", "avx512_bf16", "amx_bf16"; "?" for other values */
const char *pt_bf16_isa_name(int isa);
/* The class named s (pt_bf16_isa_name's names), or -1. */
int pt_bf16_isa_parse(const char *s);

#ifdef __cplusplus
}
#endif
#endif
