/* CPU backend: the kernels of cpu_ops.inc instantiated for float and
 * double, and the "cpu" backend table (OpenBLAS sgemm + OpenMP loops). */
#include "backend/ops.h"
#include "core/core.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define REAL float
#define SFX(x) x##_f32
#define GEMM cblas_sgemm
#define EXP expf
#define SQRT sqrtf
#define TANH tanhf
#include "backend/cpu_ops.inc"
#undef REAL
#undef SFX
#undef GEMM
#undef EXP
#undef SQRT
#undef TANH

#define REAL double
#define SFX(x) x##_f64
#define GEMM cblas_dgemm
#define EXP exp
#define SQRT sqrt
#define TANH tanh
#include "backend/cpu_ops.inc"
#undef REAL
#undef SFX
#undef GEMM
#undef EXP
#undef SQRT
#undef TANH

/* OpenBLAS's own thread count; declared here since not every cblas.h has it */
extern void openblas_set_num_threads(int n);

static void cpu_set_threads(int n)
{
    if (n < 1) n = 1;
    openblas_set_num_threads(n);
#ifdef _OPENMP
    omp_set_num_threads(n);
#endif
}

static const pt_backend cpu_backend = {"cpu", &pt_cpu_ops_f32, cpu_set_threads, &pt_arena_mem_host};

static const char *const backend_names[] = {"cpu", NULL};

const char *const *pt_backend_names(void) { return backend_names; }

const pt_backend *pt_backend_get(const char *name)
{
    if (!name || strcmp(name, "cpu") == 0) return &cpu_backend;
    pt_fail(PT_EUNSUPP, "backend '%s' is not built in; valid: cpu", name);
    return NULL;
}
