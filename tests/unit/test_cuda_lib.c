/* SPDX-License-Identifier: MIT */
/* The CUDA backend against the CUDA libraries, on any machine of a CUDA
 * build (configure: HAVE_CUDA), GPU or not:
 *   - every library's error becomes one pt_fail line naming the call and
 *     the library's error name and string, with ptrain's status code;
 *   - each GEMM plan's cuBLASLt descriptors (cuBLASLt builds them on the
 *     host) hold the plan: compute and scale types, transposes, epilogue,
 *     bias type, aux leading dimension, the three layouts;
 *   - without a GPU: the device count, pt_cuda_init, pt_backend_get("cuda"),
 *     the allocator, the copies and the GEMMs refuse in one line with the
 *     reason, and the versions line still names the libraries;
 *   - with a GPU: the "cuda" backend (its two tables), its allocator's
 *     accounting against the host arena's, zeroed blocks, copies.
 * The GEMM results themselves are tests/gpu/test_gemm's. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#ifdef HAVE_CUDNN
#include <cudnn.h>
#endif
#ifdef HAVE_NCCL
#include <nccl.h>
#endif
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_priv.h"
#include "backend/cuda/ops_cuda.h"
#include "backend/cuda/gemm.h"
#include "backend/ops.h"
#include "comm/comm_dev.h"
#include "core/core.h"
#include "tests/tap.h"

static int one_line(const char *s) { return s[0] && !strchr(s, '\n'); }
static int starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* The two CUDA tables are complete: every entry set (ops.h lets the
 * materialised attention reference alone be NULL), the dtypes right. */
static void test_tables(void)
{
    const pt_ops *t[2] = {&pt_cuda_ops_f32, &pt_cuda_ops_bf16};
    for (int k = 0; k < 2; k++) {
        const pt_ops *o = t[k];
        const size_t first = offsetof(pt_ops, embedding_fwd), n = (sizeof *o - first) / sizeof(void (*)(void));
        int missing = 0;
        char which[256] = "";
        for (size_t i = 0; i < n; i++) {
            size_t off = first + i * sizeof(void (*)(void));
            if (off == offsetof(pt_ops, attention_ref_fwd) || off == offsetof(pt_ops, attention_ref_bwd)) continue;
            void (*f)(void);
            memcpy(&f, (const char *)o + off, sizeof f);
            if (!f) {
                missing++;
                snprintf(which + strlen(which), sizeof which - strlen(which), " @%zu", off);
            }
        }
        tap_ok(missing == 0 && o->act == (k ? PT_BF16 : PT_F32) && o->acc == PT_F32,
               "pt_cuda_ops_%s: every entry set, act %s, acc fp32 (%d missing:%s)", o->name, k ? "bf16" : "fp32",
               missing, which);
    }
    /* the error record of the void ops */
    pt_cuda_ops_clear();
    tap_ok(pt_cuda_ops_status() == PT_OK && !strcmp(pt_cuda_ops_errmsg(), ""), "no op failure recorded at first");
    pt_cuda_op_record(pt_fail(PT_EINVAL, "N=-1 is not valid"), "layernorm_fwd");
    pt_cuda_op_record(pt_fail(PT_EIO, "second"), "gelu_fwd");
    tap_ok(pt_cuda_ops_status() == PT_EINVAL && !strcmp(pt_cuda_ops_errmsg(), "layernorm_fwd: N=-1 is not valid"),
           "the first failure is kept with its op's name: %s", pt_cuda_ops_errmsg());
    pt_cuda_ops_clear();
    tap_ok(pt_cuda_ops_status() == PT_OK, "and cleared");
    tap_ok(pt_cuda_gemm(0, 0, 4, 4, 4, 1.0f, NULL, 4, 0, NULL, 4, 0, 0.0f, NULL, 4, 0, 1, PT_GEMM_F32, PT_GEMM_F32) ==
                   PT_EUNSUPP &&
               strstr(pt_errmsg(), "before pt_cuda_init"),
           "the generic GEMM before pt_cuda_init is refused: %s", pt_errmsg());
}

static void test_errors(void)
{
    int rc = pt_cuda_fail(cudaErrorMemoryAllocation, "cudaMalloc(%zu bytes)", (size_t)1024);
    tap_ok(rc == PT_ENOMEM && strcmp(pt_errmsg(), "cudaMalloc(1024 bytes): out of memory (cudaErrorMemoryAllocation)") == 0,
           "a CUDA out-of-memory is PT_ENOMEM naming the call: %s", pt_errmsg());
    rc = pt_cuda_fail(cudaErrorInsufficientDriver, "%s", "cudaSetDevice(0)");
    tap_ok(rc == PT_EUNSUPP && strstr(pt_errmsg(), "cudaSetDevice(0): ") && strstr(pt_errmsg(), "cudaErrorInsufficientDriver"),
           "no driver is PT_EUNSUPP: %s", pt_errmsg());
    rc = pt_cuda_fail(cudaErrorIllegalAddress, "%s", "epilogue kernel");
    tap_ok(rc == PT_EIO && strstr(pt_errmsg(), "illegal memory access") && strstr(pt_errmsg(), "(cudaErrorIllegalAddress)") &&
               one_line(pt_errmsg()),
           "another CUDA error is PT_EIO with its string and name: %s", pt_errmsg());
    rc = pt_cublas_fail(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmul(m=%d)", 7);
    tap_ok(rc == PT_EUNSUPP && starts(pt_errmsg(), "cublasLtMatmul(m=7): ") &&
               strstr(pt_errmsg(), "CUBLAS_STATUS_NOT_SUPPORTED"),
           "cuBLAS NOT_SUPPORTED is PT_EUNSUPP: %s", pt_errmsg());
    rc = pt_cublas_fail(CUBLAS_STATUS_ALLOC_FAILED, "%s", "cublasLtCreate");
    tap_ok(rc == PT_ENOMEM && strstr(pt_errmsg(), "CUBLAS_STATUS_ALLOC_FAILED"), "cuBLAS ALLOC_FAILED is PT_ENOMEM: %s",
           pt_errmsg());
    rc = pt_cublas_fail(CUBLAS_STATUS_EXECUTION_FAILED, "%s", "cublasLtMatmul");
    tap_ok(rc == PT_EIO && strstr(pt_errmsg(), "CUBLAS_STATUS_EXECUTION_FAILED") && one_line(pt_errmsg()),
           "cuBLAS EXECUTION_FAILED is PT_EIO: %s", pt_errmsg());
#ifdef HAVE_CUDNN
    rc = pt_cudnn_fail(CUDNN_STATUS_NOT_SUPPORTED_SHAPE, "cudnnBackendFinalize(%s)", "sdpa");
    tap_ok(rc == PT_EUNSUPP && strstr(pt_errmsg(), "cudnnBackendFinalize(sdpa): ") && strstr(pt_errmsg(), "NOT_SUPPORTED"),
           "cuDNN NOT_SUPPORTED_SHAPE is PT_EUNSUPP: %s", pt_errmsg());
    rc = pt_cudnn_fail(CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED, "%s", "cudnnBackendExecute");
    tap_ok(rc == PT_ENOMEM, "cuDNN's device allocation failure is PT_ENOMEM: %s", pt_errmsg());
    rc = pt_cudnn_fail(CUDNN_STATUS_BAD_PARAM, "%s", "cudnnBackendSetAttribute");
    tap_ok(rc == PT_EIO && strstr(pt_errmsg(), "BAD_PARAM") && one_line(pt_errmsg()), "cuDNN BAD_PARAM is PT_EIO: %s",
           pt_errmsg());
#endif
#ifdef HAVE_NCCL
    pt_comm fake;
    memset(&fake, 0, sizeof fake);
    snprintf(fake.name, sizeof fake.name, "dp");
    fake.size = 4;
    rc = pt_nccl_fail(ncclInvalidUsage, NULL, "ncclAllReduce", &fake);
    tap_ok(rc == PT_ECOMM && starts(pt_errmsg(), "ncclAllReduce on group 'dp' (size 4) failed: invalid usage") &&
               one_line(pt_errmsg()),
           "an NCCL error is PT_ECOMM naming the call, the group and NCCL's string: %s", pt_errmsg());
#endif
}

/* ---- descriptors ------------------------------------------------------------------------- */

static int32_t desc_i32(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a)
{
    int32_t v = -99;
    size_t w = 0;
    return cublasLtMatmulDescGetAttribute(d, a, &v, sizeof v, &w) == CUBLAS_STATUS_SUCCESS && w == sizeof v ? v : -99;
}

static int layout_is(cublasLtMatrixLayout_t l, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld)
{
    uint32_t ty = 0;
    uint64_t r = 0, c = 0;
    int64_t l2 = 0;
    size_t w;
    int ok = cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_TYPE, &ty, sizeof ty, &w) == CUBLAS_STATUS_SUCCESS;
    ok &= cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &r, sizeof r, &w) == CUBLAS_STATUS_SUCCESS;
    ok &= cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_COLS, &c, sizeof c, &w) == CUBLAS_STATUS_SUCCESS;
    ok &= cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, &l2, sizeof l2, &w) == CUBLAS_STATUS_SUCCESS;
    return ok && ty == (uint32_t)t && r == (uint64_t)rows && c == (uint64_t)cols && l2 == ld;
}

static void test_descriptors(void)
{
    const int N = 37, C = 96, OC = 136; /* multiples of 8 where the aux needs it */
    pt_gemm_plan p;
    pt_gemm_lt lt;
    /* forward bf16 with GELU_AUX_BIAS */
    pt_gemm_plan_fwd(&p, PT_GEMM_BF16, N, C, OC, 1, 1, 1, 0.0f, 0);
    int rc = pt_gemm_lt_build(&p, &lt);
    int64_t ld = 0;
    size_t w = 0;
    cublasLtMatmulDescGetAttribute(lt.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld, &w);
    uint32_t epi = 0;
    cublasLtMatmulDescGetAttribute(lt.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi, &w);
    tap_ok(rc == PT_OK && desc_i32(lt.op, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE) == CUBLAS_COMPUTE_32F &&
               desc_i32(lt.op, CUBLASLT_MATMUL_DESC_SCALE_TYPE) == CUDA_R_32F &&
               desc_i32(lt.op, CUBLASLT_MATMUL_DESC_TRANSA) == CUBLAS_OP_T &&
               desc_i32(lt.op, CUBLASLT_MATMUL_DESC_TRANSB) == CUBLAS_OP_N && epi == CUBLASLT_EPILOGUE_GELU_AUX_BIAS &&
               desc_i32(lt.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE) == CUDA_R_16BF && ld == OC,
           "forward bf16 GELU_AUX_BIAS: fp32 compute and scale, A^T, epilogue, bf16 bias, aux ld OC (%lld)", (long long)ld);
    tap_ok(layout_is(lt.a, CUDA_R_16BF, C, OC, C) && layout_is(lt.b, CUDA_R_16BF, C, N, C) &&
               layout_is(lt.d, CUDA_R_16BF, OC, N, OC),
           "forward layouts: A = w [C,OC] ld C, B = inp [C,N] ld C, D = out [OC,N] ld OC (column-major)");
    pt_gemm_lt_free(&lt);
    tap_ok(!lt.op && !lt.a && !lt.b && !lt.d, "descriptors freed");

    /* dinp bf16 with DGELU_BGRAD: the bias gradient is fp32 */
    pt_gemm_plan_dinp(&p, PT_GEMM_BF16, N, C, OC, 1, 1, 1, 0);
    rc = pt_gemm_lt_build(&p, &lt);
    cublasLtMatmulDescGetAttribute(lt.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi, &w);
    cublasLtMatmulDescGetAttribute(lt.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld, &w);
    tap_ok(rc == PT_OK && epi == CUBLASLT_EPILOGUE_DGELU_BGRAD && ld == C &&
               desc_i32(lt.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE) == CUDA_R_32F &&
               desc_i32(lt.op, CUBLASLT_MATMUL_DESC_TRANSA) == CUBLAS_OP_N &&
               layout_is(lt.a, CUDA_R_16BF, C, OC, C) && layout_is(lt.b, CUDA_R_16BF, OC, N, OC) &&
               layout_is(lt.d, CUDA_R_16BF, C, N, C),
           "dinp bf16 DGELU_BGRAD: fp32 bias gradient, aux ld C, A = w [C,OC], B = dout [OC,N], D = dinp [C,N]");
    pt_gemm_lt_free(&lt);

    /* dw bf16 -> fp32 with BGRADB */
    pt_gemm_plan_dw(&p, PT_GEMM_BF16, N, C, OC, 1, 0);
    rc = pt_gemm_lt_build(&p, &lt);
    cublasLtMatmulDescGetAttribute(lt.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi, &w);
    tap_ok(rc == PT_OK && epi == CUBLASLT_EPILOGUE_BGRADB && desc_i32(lt.op, CUBLASLT_MATMUL_DESC_TRANSB) == CUBLAS_OP_T &&
               layout_is(lt.a, CUDA_R_16BF, C, N, C) && layout_is(lt.b, CUDA_R_16BF, OC, N, OC) &&
               layout_is(lt.d, CUDA_R_32F, C, OC, C),
           "dw bf16 BGRADB: B^T, A = inp [C,N] bf16, B = dout [OC,N] bf16, D = dw [C,OC] fp32");
    pt_gemm_lt_free(&lt);

    /* fp32 with TF32, and the unfused plan */
    pt_gemm_plan_fwd(&p, PT_GEMM_F32, N, C, OC - 1, 1, 1, 1, 1.0f, 1);
    rc = pt_gemm_lt_build(&p, &lt);
    cublasLtMatmulDescGetAttribute(lt.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi, &w);
    tap_ok(rc == PT_OK && !p.fused && epi == CUBLASLT_EPILOGUE_DEFAULT &&
               desc_i32(lt.op, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE) == CUBLAS_COMPUTE_32F_FAST_TF32 &&
               layout_is(lt.d, CUDA_R_32F, OC - 1, N, OC - 1),
           "fp32 with TF32 and OC=%d (aux not fusable): TF32 compute, DEFAULT epilogue", OC - 1);
    pt_gemm_lt_free(&lt);
    int all = 1;
    for (int e = 0; e < PT_LT_N; e++) all &= pt_gemm_lt_epilogue(e) != CUBLASLT_EPILOGUE_DEFAULT || e == PT_LT_DEFAULT;
    tap_ok(all && pt_gemm_lt_epilogue(PT_LT_BGRADB) == CUBLASLT_EPILOGUE_BGRADB &&
               pt_gemm_lt_epilogue(PT_LT_GELU_BIAS) == CUBLASLT_EPILOGUE_GELU_BIAS && pt_gemm_cuda_type(PT_GEMM_BF16) == CUDA_R_16BF,
           "every epilogue maps to its own cuBLASLt value");
}

/* ---- the device, or its absence ---------------------------------------------------------- */

static void test_no_device(const char *why)
{
    tap_ok(strstr(why, "no CUDA device visible") && one_line(why), "the device count says why there is none: %s", why);
    tap_ok(pt_cuda_init() == PT_EUNSUPP && strstr(pt_errmsg(), "no CUDA device visible"), "pt_cuda_init refuses: %s",
           pt_errmsg());
    const pt_backend *be = pt_backend_get("cuda");
    tap_ok(!be && starts(pt_errmsg(), "backend 'cuda': no CUDA device visible") && one_line(pt_errmsg()),
           "pt_backend_get(\"cuda\") is NULL with one line: %s", pt_errmsg());
    tap_ok(pt_cuda_mem.device == PT_DEV_CUDA && pt_cuda_mem.alloc(64) == NULL && pt_cuda_mem_live() == 0,
           "the device allocator gives nothing before pt_cuda_init");
    pt_arena a;
    pt_arena_init(&a, &pt_cuda_mem, 0);
    tap_ok(pt_arena_alloc(&a, 4096) == NULL && a.cur == 0 && strstr(pt_errmsg(), "4096 bytes of cuda memory"),
           "an arena on it fails in one line and charges nothing: %s", pt_errmsg());
    char host[8] = "abcdefg";
    tap_ok(pt_cuda_to_device(host, host, 8) == PT_EUNSUPP && strstr(pt_errmsg(), "before pt_cuda_init"),
           "a copy before pt_cuda_init is refused: %s", pt_errmsg());
    tap_ok(pt_cuda_matmul_fwd(PT_GEMM_F32, host, NULL, host, host, NULL, 0.0f, 1, 1, 1, PT_EPI_DEFAULT) == PT_EUNSUPP &&
               strstr(pt_errmsg(), "before pt_cuda_init"),
           "a GEMM before pt_cuda_init is refused: %s", pt_errmsg());
    tap_ok(pt_cuda_matmul_fwd(PT_GEMM_F32, host, NULL, host, host, NULL, 0.0f, 1, 1, 1, 7) == PT_EINVAL &&
               strstr(pt_errmsg(), "epi 7"),
           "a bad epilogue is refused first: %s", pt_errmsg());
    char line[512];
    pt_cuda_versions(line, sizeof line);
    tap_ok(starts(line, "gpu none (no CUDA device visible") && strstr(line, "CUDA runtime 13.") &&
               strstr(line, "cuBLASLt ") && one_line(line),
           "the versions line without a device: %s", line);
    tap_ok(pt_cuda_is_device_ptr(host) == 0 && pt_cuda_is_device_ptr(NULL) == 0, "host memory is not device memory");
}

static void test_device(int n)
{
    tap_diag("%d CUDA device(s) visible: the device checks run", n);
    const pt_backend *be = pt_backend_get("cuda");
    tap_ok(be && strcmp(be->name, "cuda") == 0 && be->ops == &pt_cuda_ops_f32 && be->ops_bf16 == &pt_cuda_ops_bf16 &&
               be->mem == &pt_cuda_mem && be->set_threads,
           "pt_backend_get(\"cuda\"): the backend, its memory, its fp32 and bf16 tables (%s)", be ? "" : pt_errmsg());
    char line[512];
    pt_cuda_versions(line, sizeof line);
    tap_ok(starts(line, "gpu ") && !strstr(line, "gpu none") && strstr(line, "(sm_"), "versions: %s", line);
    /* the same allocation sequence on a host arena and a device arena */
    pt_arena h = {0}, d;
    pt_arena_init(&d, &pt_cuda_mem, 0);
    const size_t sizes[] = {1000, 0, 1 << 20, 77, 123456};
    void *hp[5], *dp[5];
    int ok = 1;
    for (int i = 0; i < 5; i++) {
        hp[i] = pt_arena_alloc(&h, sizes[i]);
        dp[i] = pt_arena_alloc(&d, sizes[i]);
        ok &= hp[i] && dp[i] && pt_cuda_is_device_ptr(dp[i]) && h.cur == d.cur && h.peak == d.peak;
    }
    ok &= pt_cuda_mem_live() == d.cur;
    unsigned char back[1000];
    memset(back, 0xab, sizeof back);
    ok &= pt_cuda_to_host(back, dp[0], sizeof back) == PT_OK;
    for (size_t i = 0; i < sizeof back; i++) ok &= back[i] == 0;
    for (int i = 0; i < 5; i += 2) pt_arena_free(&h, hp[i]), pt_arena_free(&d, dp[i]);
    ok &= h.cur == d.cur && h.peak == d.peak && pt_cuda_mem_live() == d.cur;
    for (int i = 1; i < 5; i += 2) pt_arena_free(&h, hp[i]), pt_arena_free(&d, dp[i]);
    tap_ok(ok && d.cur == 0 && pt_cuda_mem_live() == 0,
           "a device arena charges exactly what a host arena does (cur, peak), blocks are zeroed, frees return it all");
    char src[333], dst[333];
    for (size_t i = 0; i < sizeof src; i++) src[i] = (char)(rand() & 0x7f);
    void *a = pt_cuda_mem.alloc(sizeof src), *b = pt_cuda_mem.alloc(sizeof src);
    ok = a && b && pt_cuda_to_device(a, src, sizeof src) == PT_OK && pt_cuda_copy_d2d(b, a, sizeof src) == PT_OK &&
         pt_cuda_to_host(dst, b, sizeof dst) == PT_OK && memcmp(src, dst, sizeof src) == 0;
    pt_cuda_mem.free(a), pt_cuda_mem.free(b);
    tap_ok(ok, "host -> device -> device -> host round trip");
    unsigned char u[16];
    tap_ok(pt_cuda_device_uuid(u) == PT_OK, "the device's UUID");
}

int main(void)
{
    srand((unsigned)pt_now());
    tap_ok(pt_cuda_built(), "this build has the CUDA backend");
    const char *const *names = pt_backend_names();
    tap_ok(names[0] && strcmp(names[0], "cpu") == 0 && !names[1],
           "pt_backend_names lists cpu alone (its tests give the ops host memory)");
    test_errors();
    test_tables();
    test_descriptors();
    char why[512];
    int n = pt_cuda_device_count(why, sizeof why);
    if (n < 1) test_no_device(why);
    else test_device(n);
    pt_cuda_shutdown();
    return tap_done();
}
