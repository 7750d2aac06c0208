/* SPDX-License-Identifier: MIT */
/* The GEMM layer's host-side logic (see gemm_plan.h): no CUDA header. */
#include "backend/cuda/gemm_plan.h"
#include "core/core.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

_Static_assert(PT_GEMM_F32 == (int)PT_F32 && PT_GEMM_BF16 == (int)PT_BF16, "gemm_plan.h's element types are pt_dtype's");

const char *pt_lt_epi_name(int e)
{
    static const char *const names[PT_LT_N] = {"DEFAULT", "BIAS", "GELU", "GELU_BIAS", "GELU_AUX",
                                               "GELU_AUX_BIAS", "DGELU", "DGELU_BGRAD", "BGRADB"};
    return e >= 0 && e < PT_LT_N ? names[e] : "?";
}

static int check_sizes(const char *op, int act, int N, int C, int OC)
{
    if (act != PT_GEMM_F32 && act != PT_GEMM_BF16)
        return pt_fail(PT_EINVAL, "%s: element type %d is not valid (valid: %d fp32, %d bf16)", op, act, PT_GEMM_F32,
                       PT_GEMM_BF16);
    if (N < 1 || C < 1 || OC < 1 || C > (1 << 24) || OC > (1 << 24))
        return pt_fail(PT_EINVAL, "%s: N=%d C=%d OC=%d is not a valid shape (valid: N >= 1, 1 <= C, OC <= %d)", op, N,
                       C, OC, 1 << 24);
    return PT_OK;
}

/* the common part: zeroed plan, the problem, the operands as stored */
static void problem(pt_gemm_plan *p, int kind, int transa, int transb, int64_t m, int64_t n, int64_t k, int64_t lda,
                    int64_t ldb, int64_t ldd, int a_role, int b_role, int ab, int d, float beta, int tf32)
{
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->transa = transa;
    p->transb = transb;
    p->m = m, p->n = n, p->k = k;
    /* op(A) is [m, k]: A is stored [k, m] when transposed */
    p->a_rows = transa ? k : m, p->a_cols = transa ? m : k, p->lda = lda;
    p->b_rows = transb ? n : k, p->b_cols = transb ? k : n, p->ldb = ldb;
    p->ldd = ldd;
    p->a_role = a_role, p->b_role = b_role;
    p->ab_elem = ab, p->d_elem = d;
    p->tf32 = tf32 && ab == PT_GEMM_F32;
    p->beta = beta;
    p->bias_elem = -1;
    p->fused = 1;
}

/* the aux rule (cublasLt.h, EPILOGUE_AUX_LD): else unfused */
static void aux_rule(pt_gemm_plan *p)
{
    if (p->aux_ld && p->aux_ld % PT_GEMM_AUX_LD_MULTIPLE)
        pt_gemm_plan_unfuse(p, "the aux matrix's leading dimension %lld is not a multiple of %d (cuBLASLt's rule)",
                            (long long)p->aux_ld, PT_GEMM_AUX_LD_MULTIPLE);
}

int pt_gemm_plan_fwd(pt_gemm_plan *p, int act, int N, int C, int OC, int has_bias, int gelu, int has_aux,
                     float beta, int tf32)
{
    int rc = check_sizes("matmul_fwd", act, N, C, OC);
    if (rc != PT_OK) return rc;
    if (beta != 0.0f && beta != 1.0f)
        return pt_fail(PT_EINVAL, "matmul_fwd: beta %g is not valid (valid: 0 writes out, 1 accumulates into it)",
                       (double)beta);
    if (has_aux && !gelu)
        return pt_fail(PT_EINVAL, "matmul_fwd: an aux matrix without PT_EPI_GELU (aux keeps the pre-GELU values)");
    problem(p, PT_GEMM_FWD, 1, 0, OC, N, C, C, C, OC, PT_ROLE_W, PT_ROLE_INP, act, act, beta, tf32);
    p->has_bias = !!has_bias, p->gelu = !!gelu, p->has_aux = !!has_aux;
    if (gelu)
        p->lt_epi = has_aux ? (has_bias ? PT_LT_GELU_AUX_BIAS : PT_LT_GELU_AUX) : (has_bias ? PT_LT_GELU_BIAS : PT_LT_GELU);
    else
        p->lt_epi = has_bias ? PT_LT_BIAS : PT_LT_DEFAULT;
    if (has_bias) p->bias_elem = act, p->bias_len = OC;
    if (has_aux) p->aux_ld = OC;
    aux_rule(p);
    return PT_OK;
}

int pt_gemm_plan_dinp(pt_gemm_plan *p, int act, int N, int C, int OC, int dgelu, int has_aux, int has_dbias, int tf32)
{
    int rc = check_sizes("matmul_bwd (dinp)", act, N, C, OC);
    if (rc != PT_OK) return rc;
    if (dgelu && !has_aux)
        return pt_fail(PT_EINVAL, "matmul_bwd: PT_EPI_DGELU needs aux (the pre-GELU values of the layer that made inp)");
    if (has_dbias && !dgelu)
        return pt_fail(PT_EINVAL, "matmul_bwd: dbias_aux without PT_EPI_DGELU (it is the bias gradient of the GELU layer)");
    /* DEFAULT accumulates (beta 1); DGELU writes (beta 0): ops.h */
    problem(p, PT_GEMM_DINP, 0, 0, C, N, OC, C, OC, C, PT_ROLE_W, PT_ROLE_DOUT, act, act, dgelu ? 0.0f : 1.0f, tf32);
    p->dgelu = !!dgelu, p->has_aux = !!dgelu, p->has_dbias = !!has_dbias;
    p->lt_epi = dgelu ? (has_dbias ? PT_LT_DGELU_BGRAD : PT_LT_DGELU) : PT_LT_DEFAULT;
    if (dgelu) p->aux_ld = C;
    if (has_dbias) p->bias_elem = PT_GEMM_F32, p->bias_len = C, p->bias_accum = 1;
    aux_rule(p);
    return PT_OK;
}

int pt_gemm_plan_dw(pt_gemm_plan *p, int act, int N, int C, int OC, int has_dbias, int tf32)
{
    int rc = check_sizes("matmul_bwd (dw)", act, N, C, OC);
    if (rc != PT_OK) return rc;
    /* the weight gradient is the fp32 accumulator whatever the activations */
    problem(p, PT_GEMM_DW, 0, 1, C, OC, N, C, OC, C, PT_ROLE_INP, PT_ROLE_DOUT, act, PT_GEMM_F32, 1.0f, tf32);
    p->has_dbias = !!has_dbias;
    p->lt_epi = has_dbias ? PT_LT_BGRADB : PT_LT_DEFAULT;
    if (has_dbias) p->bias_elem = PT_GEMM_F32, p->bias_len = OC, p->bias_accum = 1;
    return PT_OK;
}

void pt_gemm_plan_unfuse(pt_gemm_plan *p, const char *why, ...)
{
    p->fused = 0;
    p->lt_epi = PT_LT_DEFAULT;
    p->bias_elem = -1;
    p->bias_len = 0;
    p->bias_accum = 0;
    p->aux_ld = 0;
    /* the plain GEMM writes what the epilogue kernel then reads: DGELU's
     * product is written, the forward keeps its beta */
    va_list ap;
    va_start(ap, why);
    vsnprintf(p->why, sizeof p->why, why, ap);
    va_end(ap);
}

int pt_gemm_align(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    if (!a) return 0;
    int al = 1;
    while (al < 256 && !(a & (uintptr_t)al)) al <<= 1;
    return al;
}

void pt_gemm_key_of(const pt_gemm_plan *p, const void *a, const void *b, const void *d, const void *bias,
                    const void *aux, pt_gemm_key *k)
{
    memset(k, 0, sizeof *k);
    k->kind = p->kind;
    k->transa = p->transa, k->transb = p->transb;
    k->ab_elem = p->ab_elem, k->d_elem = p->d_elem;
    k->tf32 = p->tf32;
    k->lt_epi = p->lt_epi;
    k->bias_elem = p->bias_elem;
    k->bias_accum = p->bias_accum;
    k->beta_one = p->beta != 0.0f;
    k->has_bias = p->has_bias, k->gelu = p->gelu, k->has_aux = p->has_aux;
    k->dgelu = p->dgelu, k->has_dbias = p->has_dbias;
    k->m = p->m, k->n = p->n, k->k = p->k;
    k->lda = p->lda, k->ldb = p->ldb, k->ldd = p->ldd, k->aux_ld = p->aux_ld;
    k->align_a = pt_gemm_align(a);
    k->align_b = pt_gemm_align(b);
    k->align_d = pt_gemm_align(d);
    k->align_bias = p->bias_elem >= 0 ? pt_gemm_align(bias) : 0;
    k->align_aux = p->aux_ld ? pt_gemm_align(aux) : 0;
}

uint64_t pt_gemm_key_hash(const pt_gemm_key *k)
{
    /* FNV-1a, 64 bits (Fowler, Noll, Vo), then fmix64 */
    const unsigned char *b = (const unsigned char *)k;
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < sizeof *k; i++) h = (h ^ b[i]) * UINT64_C(0x100000001b3);
    /* FNV's low bits barely move when keys differ in high bits only (N =
     * 16, 32, 48, ...), and the cache indexes by the low bits: finish with
     * MurmurHash3's fmix64 (Appleby), which mixes every bit into all */
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    h *= UINT64_C(0xc4ceb9fe1a85ec53);
    h ^= h >> 33;
    return h;
}
