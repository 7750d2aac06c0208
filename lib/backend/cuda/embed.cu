/* SPDX-License-Identifier: MIT */
/* The embed family (ops.h PT_FAM_EMBED): token and position embeddings
 * (GPT-2; llm.c's encoder_forward/backward) on device memory, for the f32
 * and bf16 tables.  embedding_bwd and posemb_bwd add the rows in the CPU's
 * order (no atomics), so their fp32 results are the CPU's bit for bit.
 * Everything runs on the compute stream; a bad argument is recorded and
 * launches nothing (kernels.cuh). */
#include "config.h"
#include "backend/cuda/kernels.cuh"

#include <cub/device/device_radix_sort.cuh>

namespace {
using namespace ptk;

/* ---- embeddings ------------------------------------------------------------------------------------------ */
/* Token and position embeddings (GPT-2; llm.c's encoder_forward/backward).
 * Forward: a thread per output element, out[n,c] = w[tok[n]-v0, c] (0
 * outside the shard).  Backward, deterministic without atomics: the rows
 * are sorted by their token id (CUB's stable radix sort of (id, row)
 * pairs), so a token's rows sit together in increasing row order; the
 * first position of each run sums the run's rows for one column in that
 * order onto dw's value: the CPU's order, n ascending (llm.c sorts on the
 * host into buckets for the same reason). */
template <typename T>
__global__ void embedding_fwd_kernel(T *out, const int32_t *tok, const T *w, int v0, int Vl, int N, int C)
{
    const size_t total = (size_t)N * (size_t)C;
    GRID_STRIDE(i, total)
    {
        const size_t n = i / (size_t)C, c = i - n * (size_t)C;
        const int id = tok[n] - v0;
        if (id >= 0 && id < Vl) out[i] = w[(size_t)id * C + c];
        else store(out, i, 0.0f);
    }
}

/* key[n] = the row's id in the shard, Vl for rows outside it; row[n] = n */
__global__ void embedding_keys_kernel(uint32_t *key, int32_t *row, const int32_t *tok, int v0, int Vl, int N)
{
    GRID_STRIDE(i, (size_t)N)
    {
        const int id = tok[i] - v0;
        key[i] = (uint32_t)(id >= 0 && id < Vl ? id : Vl);
        row[i] = (int32_t)i;
    }
}

/* grid (column blocks, sorted positions): the first position of a run of
 * one id adds the run's rows to dw, in row order */
template <typename T>
__global__ void embedding_bwd_kernel(float *dw, const T *dout, const uint32_t *key, const int32_t *row, int Vl, int N,
                                     int C)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int i = blockIdx.y; i < N; i += gridDim.y) {
        const uint32_t id = key[i];
        if (id >= (uint32_t)Vl || (i > 0 && key[i - 1] == id)) continue;
        float *d = dw + (size_t)id * C + c;
        float acc = *d;
        for (int j = i; j < N && key[j] == id; j++) acc += load(dout, (size_t)row[j] * C + c);
        *d = acc;
    }
}

template <typename T>
void embedding_fwd(void *out, const int32_t *tok, const void *w, int v0, int Vl, int N, int C)
{
    const char *op = "embedding_fwd";
    if (!sizes_ok(op, N, "N", C, "C") || !sizes_ok(op, Vl, "Vl", 0, "-")) return;
    if (!N || !C) return;
    if (!given(op, "out, tok, w", {out, tok, w})) return;
    embedding_fwd_kernel<T><<<blocks_for((size_t)N * C), THREADS, 0, pt_cuda_stream_compute()>>>(
        (T *)out, tok, (const T *)w, v0, Vl, N, C);
    pt_cuda_op_check(op);
}

template <typename T>
void embedding_bwd(void *dw, const void *dout, const int32_t *tok, int v0, int Vl, int N, int C)
{
    const char *op = "embedding_bwd";
    if (!sizes_ok(op, N, "N", C, "C") || !sizes_ok(op, Vl, "Vl", 0, "-")) return;
    if (!N || !C || !Vl) return;
    if (!given(op, "dw, dout, tok", {dw, dout, tok})) return;
    cudaStream_t s = pt_cuda_stream_compute();
    int bits = 1; /* keys are 0 .. Vl */
    while (bits < 31 && (Vl >> bits) != 0) bits++;
    size_t cub_bytes = 0;
    if (failed(cub::DeviceRadixSort::SortPairs(nullptr, cub_bytes, (const uint32_t *)nullptr, (uint32_t *)nullptr,
                                               (const int32_t *)nullptr, (int32_t *)nullptr, N, 0, bits, s),
               op, "cub::DeviceRadixSort::SortPairs (temporary storage size)"))
        return;
    /* CUB's storage first (cudaMallocAsync's alignment), the four [N] arrays after it */
    const size_t cub_room = (cub_bytes + 255) / 256 * 256, bytes = cub_room + 4 * (size_t)N * sizeof(int32_t);
    void *tmp = nullptr;
    if (failed(cudaMallocAsync(&tmp, bytes, s), op, "cudaMallocAsync (sort buffers)")) return;
    void *cub_tmp = tmp;
    uint32_t *key_in = (uint32_t *)((char *)tmp + cub_room), *key = key_in + N;
    int32_t *row_in = (int32_t *)(key + N), *row = row_in + N;
    embedding_keys_kernel<<<blocks_for((size_t)N), THREADS, 0, s>>>(key_in, row_in, tok, v0, Vl, N);
    if (pt_cuda_op_check(op) == PT_OK &&
        !failed(cub::DeviceRadixSort::SortPairs(cub_tmp, cub_bytes, key_in, key, row_in, row, N, 0, bits, s), op,
                "cub::DeviceRadixSort::SortPairs")) {
        const dim3 grid((unsigned)((C + THREADS - 1) / THREADS), (unsigned)(N < 65535 ? N : 65535));
        embedding_bwd_kernel<T><<<grid, THREADS, 0, s>>>((float *)dw, (const T *)dout, key, row, Vl, N, C);
        pt_cuda_op_check(op);
    }
    failed(cudaFreeAsync(tmp, s), op, "cudaFreeAsync (sort buffers)");
}

/* x[b,t,:] += wpe[t,:], a thread per element */
template <typename T>
__global__ void posemb_fwd_kernel(T *x, const T *wpe, int T_, int C, size_t total)
{
    GRID_STRIDE(i, total)
    {
        const size_t r = i / (size_t)C, c = i - r * (size_t)C, t = r % (size_t)T_;
        store(x, i, load(x, i) + load(wpe, t * C + c));
    }
}

/* dwpe[t,c] += dout[b,t,c] for b = 0, 1, ..: a thread per (t, c), the
 * CPU's order */
template <typename T>
__global__ void posemb_bwd_kernel(float *dwpe, const T *dout, int B, size_t TC)
{
    GRID_STRIDE(j, TC)
    {
        float acc = dwpe[j];
        for (int b = 0; b < B; b++) acc += load(dout, (size_t)b * TC + j);
        dwpe[j] = acc;
    }
}

template <typename T>
void posemb_fwd(void *x, const void *wpe, int B, int T_, int C)
{
    const char *op = "posemb_fwd";
    if (!sizes_ok(op, B, "B", T_, "T") || !sizes_ok(op, C, "C", 0, "-")) return;
    const size_t total = (size_t)B * T_ * C;
    if (!total) return;
    if (!given(op, "x, wpe", {x, wpe})) return;
    posemb_fwd_kernel<T><<<blocks_for(total), THREADS, 0, pt_cuda_stream_compute()>>>((T *)x, (const T *)wpe, T_, C,
                                                                                        total);
    pt_cuda_op_check(op);
}

template <typename T>
void posemb_bwd(void *dwpe, const void *dout, int B, int T_, int C)
{
    const char *op = "posemb_bwd";
    if (!sizes_ok(op, B, "B", T_, "T") || !sizes_ok(op, C, "C", 0, "-")) return;
    const size_t TC = (size_t)T_ * C;
    if (!TC || !B) return;
    if (!given(op, "dwpe, dout", {dwpe, dout})) return;
    posemb_bwd_kernel<T><<<blocks_for(TC), THREADS, 0, pt_cuda_stream_compute()>>>((float *)dwpe, (const T *)dout, B,
                                                                                     TC);
    pt_cuda_op_check(op);
}

} // namespace

/* ---- the C entries and the family fill ---------------------------------------------------------- */
#define PT_CUDA_EMBED_ENTRIES(S, T) \
    extern "C" void pt_cuda_embedding_fwd_##S(void *out, const int32_t *tok, const void *w, int v0, int Vl, int N,     \
                                              int C)                                                                   \
    {                                                                                                                  \
        embedding_fwd<T>(out, tok, w, v0, Vl, N, C);                                                                   \
    }                                                                                                                  \
    extern "C" void pt_cuda_embedding_bwd_##S(void *dw, const void *dout, const int32_t *tok, int v0, int Vl, int N,   \
                                              int C)                                                                   \
    {                                                                                                                  \
        embedding_bwd<T>(dw, dout, tok, v0, Vl, N, C);                                                                 \
    }                                                                                                                  \
    extern "C" void pt_cuda_posemb_fwd_##S(void *x, const void *wpe, int B, int T_, int C)                             \
    {                                                                                                                  \
        posemb_fwd<T>(x, wpe, B, T_, C);                                                                               \
    }                                                                                                                  \
    extern "C" void pt_cuda_posemb_bwd_##S(void *dwpe, const void *dout, int B, int T_, int C)                         \
    {                                                                                                                  \
        posemb_bwd<T>(dwpe, dout, B, T_, C);                                                                           \
    }
PT_CUDA_EMBED_ENTRIES(f32, float)
PT_CUDA_EMBED_ENTRIES(bf16, bf16)

extern "C" int pt_cuda_fill_embed(pt_ops *o, const pt_prec_policy *p)
{
    PT_CUDA_SET_ACT(o, p, embedding_fwd);
    PT_CUDA_SET_ACT(o, p, embedding_bwd);
    PT_CUDA_SET_ACT(o, p, posemb_fwd);
    PT_CUDA_SET_ACT(o, p, posemb_bwd);
    return PT_OK;
}
