/* SPDX-License-Identifier: MIT */
/* tests/gpu: the harness of the GPU test programs (header-only).
 *
 * Each program follows llm.c's dev/cuda pattern: the CPU backend's op as
 * the reference (the double table, pt_cpu_ops_f64), the device call, the
 * comparison, and a timing line, so one run on a GPU says what is wrong and
 * by how much.  Every program starts with gpu_require(): where there is no
 * CUDA backend or no device it prints TAP's "1..0 # SKIP <reason>" and exits
 * 0, so `make check` on a machine without a GPU (CI) reports a skip with
 * the reason, never a failure.  gpu_probe() is the same answer for the
 * shell wrappers of MPI programs (exit 0 = a device, 77 = none, reason on
 * stdout).  scripts/test-gpu.sh runs them all on a GPU machine. */
#ifndef PTRAIN_GPU_TAP_H
#define PTRAIN_GPU_TAP_H
#include "backend/cuda/cuda.h"
#include "core/core.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Why this process cannot run GPU tests (into why, len bytes): 0 when it
 * can. */
static inline int gpu_missing(char *why, size_t len)
{
    if (!pt_cuda_built()) {
        snprintf(why, len, "ptrain was built without the CUDA backend");
        return 1;
    }
    return pt_cuda_device_count(why, len) < 1;
}

/* For a program's first lines (TAP): skip the whole program with the
 * reason when there is no device; else select it (pt_cuda_init) and print
 * the versions line as a comment.  A device that is there but cannot be
 * set up bails out (a failure, not a skip). */
static inline void gpu_require(void)
{
    char why[512];
    if (gpu_missing(why, sizeof why)) {
        printf("1..0 # SKIP %s\n", why);
        fflush(stdout);
        exit(0);
    }
    if (pt_cuda_init() != PT_OK) {
        printf("Bail out! pt_cuda_init: %s\n", pt_errmsg());
        fflush(stdout);
        exit(1);
    }
    char v[600];
    pt_cuda_versions(v, sizeof v);
    printf("# %s\n", v);
    fflush(stdout);
}

/* For a shell wrapper: `prog --probe` prints the reason and exits 77 when
 * there is no device, exits 0 when there is one. */
static inline void gpu_probe(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--probe") != 0) return;
    char why[512];
    int missing = gpu_missing(why, sizeof why);
    printf("%s\n", missing ? why : "device");
    exit(missing ? 77 : 0);
}

/* bf16 of a float, rounded to nearest even (NaN kept NaN), and back: the
 * host side of the tests' bf16 tensors (the same conversion as cuda_bf16.h's
 * __float2bfloat16_rn). */
static inline uint16_t gpu_f32_to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline float gpu_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* A fresh seed per run, or PTRAIN_TEST_SEED to repeat one (printed). */
static inline uint64_t gpu_seed(void)
{
    const char *s = getenv("PTRAIN_TEST_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 10) : (uint64_t)(pt_now() * 1e9) ^ (uint64_t)(uintptr_t)&seed;
    printf("# seed %llu (PTRAIN_TEST_SEED=%llu repeats it)\n", (unsigned long long)seed, (unsigned long long)seed);
    return seed;
}

/* The programs' random inputs: one LCG state (Knuth's MMIX constants),
 * seeded with gpu_seed(); gpu_urand() is uniform in [-1, 1). */
static uint64_t gpu_rs;
static inline double gpu_urand(void)
{
    gpu_rs = gpu_rs * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(gpu_rs >> 11) / (double)(1ULL << 52) - 1.0;
}

#endif
