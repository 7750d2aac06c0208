/* SPDX-License-Identifier: MIT */
/* Flash attention on the device: ops.h's attention_fwd / attention_bwd for
 * the fp32 and bf16 tables (ops_cuda.h's pt_cuda_attention_*).  Semantics
 * are ops.h's and the CPU's (cpu_ops.inc), the reference these kernels are
 * tested against (tests/gpu/test_attention.c): scale 1/sqrt(HS), causal on
 * global positions (query row i at q0 + i sees key row j at k0 + j iff
 * k0 + j <= q0 + i), strides ldq (q, dq) and ldkv (k, v, dk, dv), out and
 * dout [B, Tq, NH*HS], lse [B, NH, Tq] fp32; k, v, dk, dv hold NKV heads
 * (grouped-query attention, Ainslie et al. 2023, section 2.2: query head h
 * reads KV head h / (NH/NKV), pt_attn_dims); merge 1 continues the online
 * softmax from the (out, lse) already there; a row that sees no key gets
 * out 0, lse -inf; the backward reads the FINAL out and lse and ADDS to
 * dq, dk, dv.
 *
 * Algorithms:
 *  - forward: FlashAttention-2 (Dao 2023, "FlashAttention-2: Faster
 *    Attention with Better Parallelism and Work Partitioning", algorithm
 *    1): one block per (query tile, head, sequence); the query tile stays
 *    in shared memory, the key tiles stream through it (S = scale Q K^T,
 *    online softmax with a running row max m and sum l, O = O e^(m_old -
 *    m) + P V), O is divided by l once at the end and lse = m + log l
 *    written.  Key tiles wholly past the tile's diagonal are not visited.
 *    The query tiles are handed out last first (the causal ones with the
 *    most keys start first).
 *  - backward: Dao 2023 section 3.1 (D = rowsum(dO * O)) in three
 *    kernels and no atomics: D into a scratch of B*NH*Tq floats (one warp
 *    per row, a fixed shuffle tree); dk, dv with one block per (key tile,
 *    KV head, sequence) over the KV head's query heads (GQA) and their
 *    query tiles that see it (P recomputed from
 *    lse, dV += P^T dO, dS = P (dO V^T - D) scale, dK += dS^T Q); dq with
 *    one block per (query tile, head, sequence) over the key tiles it sees
 *    (P and dS again, dQ += dS K).  Each output element is owned by one
 *    thread that sums in a fixed order, so the result does not depend on
 *    the launch, and is added to the gradient once (bf16: read, add the
 *    fp32 sum, round once).
 *  Written from the papers (llm.c's attention kernels, which call cuDNN or
 *  materialise P, were not a source); no code was copied.  The D scratch
 *  is stream-ordered (cudaMallocAsync / cudaFreeAsync on the compute
 *  stream), so it lives only while the call's kernels run.
 *  With PTRAIN_ATTENTION=cudnn (the default in a build with cuDNN; flash
 *  turns it off) the bf16 entries hand the calls cuDNN
 *  takes (whole-sequence causal attention, attention_cudnn.h's rule) to
 *  cuDNN's fused SDPA (attention_cudnn.c) and run these kernels for the
 *  rest and where cuDNN has no plan.
 *
 * Tiles: BT queries x BT keys, 256 threads as 16 x 16; thread (ty, tx)
 * owns rows ty + 16 i and columns tx + 16 j (i, j < BT/16) of a score tile
 * and rows ty + 16 i, columns tx + 16 j (j < NC) of its output block, so
 * the row reductions of the softmax are shuffles among 16 lanes of one
 * warp.  Tiles are fp32 in shared memory (bf16 widened on load), rows of
 * HS4 = HS rounded up to 4 (zero-padded) at stride HS4 + 4: 16-byte aligned,
 * so the dot products over HS read float4s, and the rows that lanes read
 * fall in different banks.
 * BT = 64 for HS <= 128 (NC = 1, 2, 4, 8; the backward of HS > 64 takes
 * BT = 32 where 64 rows do not fit the device's shared memory, sm_80),
 * BT = 32 for HS <= 256, BT = 16 for HS <= 512; a larger HS is refused
 * (recorded: HS and the valid range).  All arithmetic is fp32 (FMA
 * chains; expf, logf), as the CPU's f32 and bf16 tables compute in float. */
#include "config.h"
#include "backend/cuda/attention_cudnn.h"
#include "backend/cuda/cuda_priv.h"
#include "backend/cuda/ops_cuda.h"
#include "backend/cuda/kernels.cuh"

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

namespace {

__device__ __forceinline__ float load(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void store(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__nv_bfloat16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

constexpr int THREADS = 256; /* 16 x 16 */

/* Blocks per SM the kernels' registers are bounded for (__launch_bounds__):
 * two (at most 128 registers a thread) where two blocks' shared memory fits
 * an SM (HS <= 64), else one */
__host__ __device__ constexpr int min_blocks(int NC) { return NC <= 4 ? 2 : 1; }
constexpr int MAX_HS = 512;

/* max / sum over the 16 lanes that share a row (lanes 0-15 or 16-31 of a
 * warp); every lane of the warp must call it */
__device__ __forceinline__ float group_max(float v)
{
    for (int o = 8; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float group_sum(float v)
{
    for (int o = 8; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* dst [rows, HS4] (row stride ls) = src's first nvalid rows (row stride
 * ld) of HS elements, widened to fp32; rows nvalid .. rows-1 and columns
 * HS .. HS4-1 zero */
template <typename T>
__device__ __forceinline__ void load_tile(float *dst, int ls, const T *src, size_t ld, int rows, int nvalid, int HS,
                                          int HS4)
{
    const int n = rows * HS4;
    for (int idx = threadIdx.x; idx < n; idx += THREADS) {
        const int r = idx / HS4, c = idx - r * HS4;
        dst[r * ls + c] = r < nvalid && c < HS ? load(src, (size_t)r * ld + c) : 0.0f;
    }
}

/* four floats at p (16-byte aligned: a tile row's start plus a multiple of 4) */
__device__ __forceinline__ float4 ld4(const float *p) { return *reinterpret_cast<const float4 *>(p); }

/* acc + a . b, in the order x, y, z, w */
__device__ __forceinline__ float dot4(float4 a, float4 b, float acc)
{
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
    acc = fmaf(a.z, b.z, acc);
    return fmaf(a.w, b.w, acc);
}

/* component u (0..3, a constant after unrolling) of v */
__device__ __forceinline__ float comp(float4 v, int u) { return u == 0 ? v.x : u == 1 ? v.y : u == 2 ? v.z : v.w; }

/* a tile's row stride in floats: HS rounded up to 4, plus 4 */
__host__ __device__ constexpr int tile_ld(int HS) { return (HS + 3) / 4 * 4 + 4; }

/* shared-memory floats of each kernel: the [BT, HS] tiles first (16-byte
 * aligned), then the [BT, BT + 4] score tiles (aligned too) and the row
 * vectors */
constexpr size_t fwd_smem(int BT, int HS) { return (size_t)2 * BT * tile_ld(HS) + (size_t)BT * (BT + 4); }
constexpr size_t bwd_smem(int BT, int HS)
{
    return (size_t)4 * BT * tile_ld(HS) + (size_t)2 * BT * (BT + 4) + (size_t)2 * BT;
}

/* The forward: block (reversed query tile, h, b). */
template <typename T, int BT, int NC>
__global__ void __launch_bounds__(THREADS, min_blocks(NC))
    fwd_kernel(T *out, float *lse, const T *q, const T *k, const T *v, pt_attn_dims d, int merge, float scale)
{
    constexpr int RI = BT / 16, PS = BT + 4; /* PS: the score tiles' row stride */
    extern __shared__ float smem[];
    const int HS = d.HS, ls = tile_ld(HS), HS4 = ls - 4, C = d.NH * HS;
    float *Qs = smem, *KVs = Qs + BT * ls, *Ps = KVs + BT * ls; /* Ps [BT, PS] */
    const int nqt = (d.Tq + BT - 1) / BT;
    const int it = nqt - 1 - (int)blockIdx.x, h = (int)blockIdx.y, b = (int)blockIdx.z;
    const int kvh = h / (d.NH / (d.NKV > 0 ? d.NKV : d.NH)); /* GQA: the query head's KV head */
    const int i0 = it * BT, nq = min(BT, d.Tq - i0);
    const int tx = (int)threadIdx.x % 16, ty = (int)threadIdx.x / 16;
    const T *qp = q + ((size_t)b * d.Tq + i0) * d.ldq + (size_t)h * HS;
    const T *kb = k + (size_t)b * d.Tk * d.ldkv + (size_t)kvh * HS;
    const T *vb = v + (size_t)b * d.Tk * d.ldkv + (size_t)kvh * HS;
    T *op = out + ((size_t)b * d.Tq + i0) * C + (size_t)h * HS;
    float *lp = lse + ((size_t)b * d.NH + h) * d.Tq + i0;
    int col[NC]; /* this thread's output columns, clamped into the row (the extra ones are not stored) */
#pragma unroll
    for (int j = 0; j < NC; j++) col[j] = min(tx + 16 * j, HS - 1);

    load_tile(Qs, ls, qp, (size_t)d.ldq, BT, nq, HS, HS4);
    float m[RI], l[RI], acc[RI][NC];
#pragma unroll
    for (int i = 0; i < RI; i++) {
        const int r = ty + 16 * i;
        const bool cont = merge && r < nq && lp[r] != -INFINITY; /* merge: (out, lse) are one more term */
        m[i] = cont ? lp[r] : -INFINITY;
        l[i] = cont ? 1.0f : 0.0f;
#pragma unroll
        for (int j = 0; j < NC; j++) acc[i][j] = cont ? load(op, (size_t)r * C + col[j]) : 0.0f;
    }
    /* the keys the tile's last query sees: global position <= q0 + i0 + nq - 1 */
    const long long je = (long long)d.q0 + i0 + nq - d.k0;
    const int jend = je > d.Tk ? d.Tk : je < 0 ? 0 : (int)je;
    for (int j0 = 0; j0 < jend; j0 += BT) {
        const int nk = min(BT, jend - j0);
        __syncthreads(); /* the last tile's P V is done with KVs and Ps */
        load_tile(KVs, ls, kb + (size_t)j0 * d.ldkv, (size_t)d.ldkv, BT, nk, HS, HS4);
        __syncthreads();
        float s[RI][RI];
#pragma unroll
        for (int i = 0; i < RI; i++)
#pragma unroll
            for (int j = 0; j < RI; j++) s[i][j] = 0.0f;
        for (int c = 0; c < HS4; c += 4) {
            float4 qv[RI], kv[RI];
#pragma unroll
            for (int i = 0; i < RI; i++) qv[i] = ld4(Qs + (ty + 16 * i) * ls + c);
#pragma unroll
            for (int j = 0; j < RI; j++) kv[j] = ld4(KVs + (tx + 16 * j) * ls + c);
#pragma unroll
            for (int i = 0; i < RI; i++)
#pragma unroll
                for (int j = 0; j < RI; j++) s[i][j] = dot4(qv[i], kv[j], s[i][j]);
        }
#pragma unroll
        for (int i = 0; i < RI; i++) {
            const int r = ty + 16 * i;
            /* key x of the tile is visible iff x < nk and k0 + j0 + x <= q0 + i0 + r */
            const long long lim = (long long)d.q0 + i0 + r - d.k0 - j0;
            float mt = -INFINITY;
#pragma unroll
            for (int j = 0; j < RI; j++) {
                const int x = tx + 16 * j;
                s[i][j] = r < nq && x < nk && x <= lim ? s[i][j] * scale : -INFINITY;
                mt = fmaxf(mt, s[i][j]);
            }
            mt = group_max(mt);
            const float mn = fmaxf(m[i], mt);
            float rs = 0.0f;
#pragma unroll
            for (int j = 0; j < RI; j++) {
                s[i][j] = s[i][j] == -INFINITY ? 0.0f : expf(s[i][j] - mn);
                rs += s[i][j];
            }
            rs = group_sum(rs);
            if (mt != -INFINITY) { /* the row sees keys of this tile */
                const float alpha = m[i] == -INFINITY ? 0.0f : expf(m[i] - mn);
                l[i] = l[i] * alpha + rs;
                m[i] = mn;
#pragma unroll
                for (int j = 0; j < NC; j++) acc[i][j] *= alpha;
            }
#pragma unroll
            for (int j = 0; j < RI; j++) Ps[r * PS + tx + 16 * j] = s[i][j];
        }
        __syncthreads(); /* P written, K read by all */
        load_tile(KVs, ls, vb + (size_t)j0 * d.ldkv, (size_t)d.ldkv, BT, nk, HS, HS4);
        __syncthreads();
        for (int x = 0; x < nk; x += 4) { /* P and V are zero from nk to BT */
            float4 pv[RI];
#pragma unroll
            for (int i = 0; i < RI; i++) pv[i] = ld4(Ps + (ty + 16 * i) * PS + x);
#pragma unroll
            for (int u = 0; u < 4; u++) {
                float vv[NC];
#pragma unroll
                for (int j = 0; j < NC; j++) vv[j] = KVs[(x + u) * ls + col[j]];
#pragma unroll
                for (int i = 0; i < RI; i++)
#pragma unroll
                    for (int j = 0; j < NC; j++) acc[i][j] = fmaf(comp(pv[i], u), vv[j], acc[i][j]);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < RI; i++) {
        const int r = ty + 16 * i;
        if (r >= nq) continue;
        const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
#pragma unroll
        for (int j = 0; j < NC; j++)
            if (tx + 16 * j < HS) store(op, (size_t)r * C + tx + 16 * j, l[i] > 0.0f ? acc[i][j] * inv : 0.0f);
        if (tx == 0) lp[r] = l[i] > 0.0f ? m[i] + logf(l[i]) : -INFINITY;
    }
}

/* D[b, h, i] = sum_c dout[b, i, h*HS + c] out[b, i, h*HS + c]: one warp
 * per row (n = b*Tq + i, h), lanes over c, a fixed shuffle tree */
template <typename T>
__global__ void rowdot_kernel(float *D, const T *dout, const T *out, int B, int Tq, int NH, int HS)
{
    const size_t rows = (size_t)B * Tq * NH;
    const size_t w = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = (int)threadIdx.x % 32;
    if (w >= rows) return; /* whole warps: rows is the same for every lane */
    const size_t n = w / NH;
    const int h = (int)(w % NH);
    const size_t base = n * (size_t)NH * HS + (size_t)h * HS;
    float s = 0.0f;
    for (int c = lane; c < HS; c += 32) s = fmaf(load(dout, base + c), load(out, base + c), s);
    for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
    const size_t b = n / Tq, i = n % Tq;
    if (lane == 0) D[(b * NH + h) * Tq + i] = s;
}

/* dk, dv: block (key tile, KV head g, b) over g's query heads h = g*rep ..
 * g*rep + rep-1 (rep = NH/NKV; GQA, Ainslie et al. 2023, section 2.2) and,
 * per head, the query tiles that see the key tile; thread (ty, tx) owns
 * key rows ty + 16 i and, in the score tile, query columns tx + 16 j.  The
 * sums over heads and tiles run in that fixed order in registers. */
template <typename T, int BT, int NC>
__global__ void __launch_bounds__(THREADS, min_blocks(NC))
    dkdv_kernel(T *dk, T *dv, const T *dout, const T *q, const T *k, const T *v, const float *lse, const float *D,
                pt_attn_dims d, float scale)
{
    constexpr int RI = BT / 16, PS = BT + 4; /* PS: the score tiles' row stride */
    extern __shared__ float smem[];
    const int HS = d.HS, ls = tile_ld(HS), HS4 = ls - 4, C = d.NH * HS;
    float *Ks = smem, *Vs = Ks + BT * ls, *Qs = Vs + BT * ls, *Gs = Qs + BT * ls;
    float *Ps = Gs + BT * ls, *Ss = Ps + BT * PS, *Ls = Ss + BT * PS, *Dd = Ls + BT;
    const int j0 = (int)blockIdx.x * BT, g = (int)blockIdx.y, b = (int)blockIdx.z;
    const int rep = d.NH / (d.NKV > 0 ? d.NKV : d.NH);
    const int nk = min(BT, d.Tk - j0);
    const int tx = (int)threadIdx.x % 16, ty = (int)threadIdx.x / 16;
    long long first = (long long)d.k0 + j0 - d.q0; /* the first query that sees key j0 */
    if (first < 0) first = 0;
    if (first >= d.Tq) return; /* no query sees this tile: nothing to add */
    const size_t kvoff = ((size_t)b * d.Tk + j0) * d.ldkv + (size_t)g * HS;
    int col[NC];
#pragma unroll
    for (int j = 0; j < NC; j++) col[j] = min(tx + 16 * j, HS - 1);

    load_tile(Ks, ls, k + kvoff, (size_t)d.ldkv, BT, nk, HS, HS4);
    load_tile(Vs, ls, v + kvoff, (size_t)d.ldkv, BT, nk, HS, HS4);
    float dka[RI][NC], dva[RI][NC];
#pragma unroll
    for (int i = 0; i < RI; i++)
#pragma unroll
        for (int j = 0; j < NC; j++) dka[i][j] = dva[i][j] = 0.0f;
    for (int h = g * rep; h < (g + 1) * rep; h++) {
        const T *qb = q + (size_t)b * d.Tq * d.ldq + (size_t)h * HS;
        const T *gb = dout + (size_t)b * d.Tq * C + (size_t)h * HS;
        const float *lb = lse + ((size_t)b * d.NH + h) * d.Tq, *Db = D + ((size_t)b * d.NH + h) * d.Tq;
        for (int i0 = (int)(first / BT) * BT; i0 < d.Tq; i0 += BT) {
            const int nq = min(BT, d.Tq - i0);
            __syncthreads(); /* the last tile's products are done with Qs, Gs, Ps, Ss */
            load_tile(Qs, ls, qb + (size_t)i0 * d.ldq, (size_t)d.ldq, BT, nq, HS, HS4);
            load_tile(Gs, ls, gb + (size_t)i0 * C, (size_t)C, BT, nq, HS, HS4);
            for (int x = (int)threadIdx.x; x < BT; x += THREADS) {
                Ls[x] = x < nq ? lb[i0 + x] : -INFINITY;
                Dd[x] = x < nq ? Db[i0 + x] : 0.0f;
            }
            __syncthreads();
            float s[RI][RI], dp[RI][RI];
#pragma unroll
            for (int i = 0; i < RI; i++)
#pragma unroll
                for (int j = 0; j < RI; j++) s[i][j] = dp[i][j] = 0.0f;
            for (int c = 0; c < HS4; c += 4) {
                float4 kv[RI], vv[RI], qv[RI], gv[RI];
#pragma unroll
                for (int i = 0; i < RI; i++) {
                    kv[i] = ld4(Ks + (ty + 16 * i) * ls + c);
                    vv[i] = ld4(Vs + (ty + 16 * i) * ls + c);
                }
#pragma unroll
                for (int j = 0; j < RI; j++) {
                    qv[j] = ld4(Qs + (tx + 16 * j) * ls + c);
                    gv[j] = ld4(Gs + (tx + 16 * j) * ls + c);
                }
#pragma unroll
                for (int i = 0; i < RI; i++)
#pragma unroll
                    for (int j = 0; j < RI; j++) {
                        s[i][j] = dot4(kv[i], qv[j], s[i][j]);
                        dp[i][j] = dot4(vv[i], gv[j], dp[i][j]);
                    }
            }
#pragma unroll
            for (int i = 0; i < RI; i++) {
                const int kr = ty + 16 * i;
#pragma unroll
                for (int j = 0; j < RI; j++) {
                    const int qc = tx + 16 * j;
                    const float li = Ls[qc];
                    const bool vis = kr < nk && qc < nq && li != -INFINITY &&
                                     (long long)d.k0 + j0 + kr <= (long long)d.q0 + i0 + qc;
                    const float p = vis ? expf(s[i][j] * scale - li) : 0.0f;
                    Ps[kr * PS + qc] = p;
                    Ss[kr * PS + qc] = p * (dp[i][j] - Dd[qc]) * scale;
                }
            }
            __syncthreads();
            for (int x = 0; x < nq; x += 4) { /* P, dS, dO and Q are zero from nq to BT */
                float4 pv[RI], sv[RI];
#pragma unroll
                for (int i = 0; i < RI; i++) {
                    pv[i] = ld4(Ps + (ty + 16 * i) * PS + x);
                    sv[i] = ld4(Ss + (ty + 16 * i) * PS + x);
                }
#pragma unroll
                for (int u = 0; u < 4; u++) {
                    float gv[NC], qv[NC];
#pragma unroll
                    for (int j = 0; j < NC; j++) {
                        gv[j] = Gs[(x + u) * ls + col[j]];
                        qv[j] = Qs[(x + u) * ls + col[j]];
                    }
#pragma unroll
                    for (int i = 0; i < RI; i++)
#pragma unroll
                        for (int j = 0; j < NC; j++) {
                            dva[i][j] = fmaf(comp(pv[i], u), gv[j], dva[i][j]);
                            dka[i][j] = fmaf(comp(sv[i], u), qv[j], dka[i][j]);
                        }
                }
            }
        }
    } /* query heads of g */
#pragma unroll
    for (int i = 0; i < RI; i++) {
        const int kr = ty + 16 * i;
        if (kr >= nk) continue;
        const size_t row = kvoff + (size_t)kr * d.ldkv;
#pragma unroll
        for (int j = 0; j < NC; j++) {
            const int c = tx + 16 * j;
            if (c >= HS) continue;
            store(dk, row + c, load(dk, row + c) + dka[i][j]);
            store(dv, row + c, load(dv, row + c) + dva[i][j]);
        }
    }
}

/* dq: block (reversed query tile, h, b) over the key tiles it sees; thread
 * (ty, tx) owns query rows ty + 16 i and, in the score tile, key columns
 * tx + 16 j. */
template <typename T, int BT, int NC>
__global__ void __launch_bounds__(THREADS, min_blocks(NC))
    dq_kernel(T *dq, const T *dout, const T *q, const T *k, const T *v, const float *lse, const float *D,
              pt_attn_dims d, float scale)
{
    constexpr int RI = BT / 16, PS = BT + 4; /* PS: the score tiles' row stride */
    extern __shared__ float smem[];
    const int HS = d.HS, ls = tile_ld(HS), HS4 = ls - 4, C = d.NH * HS;
    float *Qs = smem, *Gs = Qs + BT * ls, *Ks = Gs + BT * ls, *Vs = Ks + BT * ls;
    float *Ss = Vs + BT * ls, *Ls = Ss + 2 * BT * PS, *Dd = Ls + BT; /* (one score tile unused) */
    const int nqt = (d.Tq + BT - 1) / BT;
    const int it = nqt - 1 - (int)blockIdx.x, h = (int)blockIdx.y, b = (int)blockIdx.z;
    const int i0 = it * BT, nq = min(BT, d.Tq - i0);
    const int tx = (int)threadIdx.x % 16, ty = (int)threadIdx.x / 16;
    const size_t qoff = ((size_t)b * d.Tq + i0) * d.ldq + (size_t)h * HS;
    const T *gp = dout + ((size_t)b * d.Tq + i0) * C + (size_t)h * HS;
    const float *lp = lse + ((size_t)b * d.NH + h) * d.Tq + i0, *Dp = D + ((size_t)b * d.NH + h) * d.Tq + i0;
    const int kvh = h / (d.NH / (d.NKV > 0 ? d.NKV : d.NH)); /* GQA: the query head's KV head */
    const T *kb = k + (size_t)b * d.Tk * d.ldkv + (size_t)kvh * HS;
    const T *vb = v + (size_t)b * d.Tk * d.ldkv + (size_t)kvh * HS;
    int col[NC];
#pragma unroll
    for (int j = 0; j < NC; j++) col[j] = min(tx + 16 * j, HS - 1);

    load_tile(Qs, ls, q + qoff, (size_t)d.ldq, BT, nq, HS, HS4);
    load_tile(Gs, ls, gp, (size_t)C, BT, nq, HS, HS4);
    for (int x = (int)threadIdx.x; x < BT; x += THREADS) {
        Ls[x] = x < nq ? lp[x] : -INFINITY;
        Dd[x] = x < nq ? Dp[x] : 0.0f;
    }
    float dqa[RI][NC];
#pragma unroll
    for (int i = 0; i < RI; i++)
#pragma unroll
        for (int j = 0; j < NC; j++) dqa[i][j] = 0.0f;
    const long long je = (long long)d.q0 + i0 + nq - d.k0;
    const int jend = je > d.Tk ? d.Tk : je < 0 ? 0 : (int)je;
    for (int j0 = 0; j0 < jend; j0 += BT) {
        const int nk = min(BT, jend - j0);
        __syncthreads(); /* the last tile's dS K is done with Ks and Ss */
        load_tile(Ks, ls, kb + (size_t)j0 * d.ldkv, (size_t)d.ldkv, BT, nk, HS, HS4);
        load_tile(Vs, ls, vb + (size_t)j0 * d.ldkv, (size_t)d.ldkv, BT, nk, HS, HS4);
        __syncthreads();
        float s[RI][RI], dp[RI][RI];
#pragma unroll
        for (int i = 0; i < RI; i++)
#pragma unroll
            for (int j = 0; j < RI; j++) s[i][j] = dp[i][j] = 0.0f;
        for (int c = 0; c < HS4; c += 4) {
            float4 qv[RI], gv[RI], kv[RI], vv[RI];
#pragma unroll
            for (int i = 0; i < RI; i++) {
                qv[i] = ld4(Qs + (ty + 16 * i) * ls + c);
                gv[i] = ld4(Gs + (ty + 16 * i) * ls + c);
            }
#pragma unroll
            for (int j = 0; j < RI; j++) {
                kv[j] = ld4(Ks + (tx + 16 * j) * ls + c);
                vv[j] = ld4(Vs + (tx + 16 * j) * ls + c);
            }
#pragma unroll
            for (int i = 0; i < RI; i++)
#pragma unroll
                for (int j = 0; j < RI; j++) {
                    s[i][j] = dot4(qv[i], kv[j], s[i][j]);
                    dp[i][j] = dot4(gv[i], vv[j], dp[i][j]);
                }
        }
#pragma unroll
        for (int i = 0; i < RI; i++) {
            const int qr = ty + 16 * i;
            const float li = Ls[qr], Di = Dd[qr];
#pragma unroll
            for (int j = 0; j < RI; j++) {
                const int kc = tx + 16 * j;
                const bool vis = qr < nq && kc < nk && li != -INFINITY &&
                                 (long long)d.k0 + j0 + kc <= (long long)d.q0 + i0 + qr;
                const float p = vis ? expf(s[i][j] * scale - li) : 0.0f;
                Ss[qr * PS + kc] = p * (dp[i][j] - Di) * scale;
            }
        }
        __syncthreads();
        for (int x = 0; x < nk; x += 4) { /* dS and K are zero from nk to BT */
            float4 sv[RI];
#pragma unroll
            for (int i = 0; i < RI; i++) sv[i] = ld4(Ss + (ty + 16 * i) * PS + x);
#pragma unroll
            for (int u = 0; u < 4; u++) {
                float kv[NC];
#pragma unroll
                for (int j = 0; j < NC; j++) kv[j] = Ks[(x + u) * ls + col[j]];
#pragma unroll
                for (int i = 0; i < RI; i++)
#pragma unroll
                    for (int j = 0; j < NC; j++) dqa[i][j] = fmaf(comp(sv[i], u), kv[j], dqa[i][j]);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < RI; i++) {
        const int qr = ty + 16 * i;
        if (qr >= nq) continue;
        const size_t row = qoff + (size_t)qr * d.ldq;
#pragma unroll
        for (int j = 0; j < NC; j++) {
            const int c = tx + 16 * j;
            if (c < HS) store(dq, row + c, load(dq, row + c) + dqa[i][j]);
        }
    }
}

/* The device's shared memory per block with opt-in (bytes): 227 KiB on
 * sm_90, 163 KiB on sm_80 */
size_t smem_optin(void)
{
    const struct cudaDeviceProp *p = pt_cuda_props();
    if (p) return p->sharedMemPerBlockOptin;
    int dev = 0, v = 0;
    const cudaDeviceAttr a = cudaDevAttrMaxSharedMemoryPerBlockOptin;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, a, dev) != cudaSuccess) {
        cudaGetLastError(); /* not this op's error: the launch reports what fails */
        return 163 * 1024;
    }
    return (size_t)v;
}

/* The kernel's dynamic shared memory (bytes) above the 48 KiB default */
int smem_opt_in(const void *kernel, size_t bytes, const char *what, int HS)
{
    if (bytes <= 48 * 1024) return PT_OK;
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
    return e == cudaSuccess ? PT_OK
                            : pt_cuda_fail(e, "cudaFuncSetAttribute(%s kernel, %zu bytes of shared memory for HS %d)",
                                           what, bytes, HS);
}

template <typename T, int BT, int NC>
int fwd_launch(T *out, float *lse, const T *q, const T *k, const T *v, const pt_attn_dims &d, int merge)
{
    const size_t smem = fwd_smem(BT, d.HS) * sizeof(float);
    int rc = smem_opt_in((const void *)fwd_kernel<T, BT, NC>, smem, "forward", d.HS);
    if (rc != PT_OK) return rc;
    const dim3 grid((unsigned)((d.Tq + BT - 1) / BT), (unsigned)d.NH, (unsigned)d.B);
    fwd_kernel<T, BT, NC><<<grid, THREADS, smem, pt_cuda_stream_compute()>>>(out, lse, q, k, v, d, merge,
                                                                             1.0f / sqrtf((float)d.HS));
    return PT_OK;
}

template <typename T, int BT, int NC>
int bwd_launch(T *dq, T *dk, T *dv, const T *dout, const T *q, const T *k, const T *v, const float *lse,
               const float *D, const pt_attn_dims &d)
{
    const size_t smem = bwd_smem(BT, d.HS) * sizeof(float);
    int rc = smem_opt_in((const void *)dkdv_kernel<T, BT, NC>, smem, "dk, dv", d.HS);
    if (rc == PT_OK) rc = smem_opt_in((const void *)dq_kernel<T, BT, NC>, smem, "dq", d.HS);
    if (rc != PT_OK) return rc;
    const float scale = 1.0f / sqrtf((float)d.HS);
    cudaStream_t st = pt_cuda_stream_compute();
    if (d.Tk > 0) {
        const dim3 grid((unsigned)((d.Tk + BT - 1) / BT), (unsigned)(d.NKV > 0 ? d.NKV : d.NH), (unsigned)d.B);
        dkdv_kernel<T, BT, NC><<<grid, THREADS, smem, st>>>(dk, dv, dout, q, k, v, lse, D, d, scale);
    }
    const dim3 grid((unsigned)((d.Tq + BT - 1) / BT), (unsigned)d.NH, (unsigned)d.B);
    dq_kernel<T, BT, NC><<<grid, THREADS, smem, st>>>(dq, dout, q, k, v, lse, D, d, scale);
    return PT_OK;
}

/* the shape is one the kernels take; else pt_fail (one line; the caller
 * records it prefixed by the op's name) */
int check_dims(const pt_attn_dims *d)
{
    if (!d) return pt_fail(PT_EINVAL, "no dimensions (pt_attn_dims NULL)");
    if (d->B < 1 || d->B > 65535 || d->NH < 1 || d->NH > 65535)
        return pt_fail(PT_EINVAL, "B %d, NH %d are not valid (valid: 1..65535 each)", d->B, d->NH);
    if (d->HS < 1 || d->HS > MAX_HS)
        return pt_fail(PT_EUNSUPP, "head size HS %d is not supported on the device (valid: 1..%d)", d->HS, MAX_HS);
    if (d->Tq < 0 || d->Tk < 0) return pt_fail(PT_EINVAL, "Tq %d, Tk %d are not valid (valid: >= 0)", d->Tq, d->Tk);
    if (d->NKV < 0 || d->NKV > d->NH || (d->NKV > 0 && d->NH % d->NKV))
        return pt_fail(PT_EINVAL, "NKV %d KV heads for NH %d query heads (valid: 0 for NH, or a divisor of NH)", d->NKV,
                       d->NH);
    const long long C = (long long)d->NH * d->HS, KVC = (long long)pt_attn_nkv(d) * d->HS;
    if (d->ldq < C || d->ldkv < KVC)
        return pt_fail(PT_EINVAL, "row strides ldq %d, ldkv %d are not valid (valid: ldq >= NH*HS = %lld, ldkv >= "
                                  "NKV*HS = %lld)",
                       d->ldq, d->ldkv, C, KVC);
    return PT_OK;
}

template <typename T>
int attn_fwd(void *out, void *lse, const void *q, const void *k, const void *v, const pt_attn_dims *d, int merge)
{
    int rc = check_dims(d);
    if (rc != PT_OK || d->Tq == 0) return rc;
    T *o = (T *)out;
    float *l = (float *)lse;
    const T *qq = (const T *)q, *kk = (const T *)k, *vv = (const T *)v;
    const int HS = d->HS;
    if (HS <= 16) return fwd_launch<T, 64, 1>(o, l, qq, kk, vv, *d, merge);
    if (HS <= 32) return fwd_launch<T, 64, 2>(o, l, qq, kk, vv, *d, merge);
    if (HS <= 64) return fwd_launch<T, 64, 4>(o, l, qq, kk, vv, *d, merge);
    if (HS <= 128) return fwd_launch<T, 64, 8>(o, l, qq, kk, vv, *d, merge);
    if (HS <= 256) return fwd_launch<T, 32, 16>(o, l, qq, kk, vv, *d, merge);
    return fwd_launch<T, 16, 32>(o, l, qq, kk, vv, *d, merge);
}

template <typename T>
int attn_bwd(void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k, const void *v,
             const void *out, const void *lse, const pt_attn_dims *d)
{
    int rc = check_dims(d);
    if (rc != PT_OK || d->Tq == 0) return rc;
    const int HS = d->HS;
    cudaStream_t st = pt_cuda_stream_compute();
    const size_t nD = (size_t)d->B * d->NH * d->Tq;
    float *D = NULL;
    cudaError_t e = cudaMallocAsync((void **)&D, nD * sizeof(float), st);
    if (e != cudaSuccess)
        return pt_cuda_fail(e, "cudaMallocAsync(%zu bytes for D = rowsum(dout*out))", nD * sizeof(float));
    const size_t warps = nD, nblk = (warps * 32 + THREADS - 1) / THREADS;
    rowdot_kernel<T><<<(unsigned)nblk, THREADS, 0, st>>>(D, (const T *)dout, (const T *)out, d->B, d->Tq, d->NH, HS);
    T *gq = (T *)dq, *gk = (T *)dk, *gv = (T *)dv;
    const T *g = (const T *)dout, *qq = (const T *)q, *kk = (const T *)k, *vv = (const T *)v;
    const float *l = (const float *)lse;
    if (HS <= 16) rc = bwd_launch<T, 64, 1>(gq, gk, gv, g, qq, kk, vv, l, D, *d);
    else if (HS <= 32) rc = bwd_launch<T, 64, 2>(gq, gk, gv, g, qq, kk, vv, l, D, *d);
    else if (HS <= 64) rc = bwd_launch<T, 64, 4>(gq, gk, gv, g, qq, kk, vv, l, D, *d);
    else if (HS <= 128 && bwd_smem(64, HS) * sizeof(float) <= smem_optin())
        rc = bwd_launch<T, 64, 8>(gq, gk, gv, g, qq, kk, vv, l, D, *d);
    else if (HS <= 128) rc = bwd_launch<T, 32, 8>(gq, gk, gv, g, qq, kk, vv, l, D, *d); /* sm_80: 163 KiB */
    else if (HS <= 256) rc = bwd_launch<T, 32, 16>(gq, gk, gv, g, qq, kk, vv, l, D, *d);
    else rc = bwd_launch<T, 16, 32>(gq, gk, gv, g, qq, kk, vv, l, D, *d);
    e = cudaFreeAsync(D, st); /* stream-ordered: after the kernels that read it */
    if (rc == PT_OK && e != cudaSuccess) rc = pt_cuda_fail(e, "cudaFreeAsync(D)");
    return rc;
}

} // namespace

/* ---- causal softmax rows (the materialised ring's pieces, fp32) ---------------------------------------- */
namespace softmax_rows {
using ptk::given;
using ptk::refuse;
constexpr unsigned THREADS = ptk::THREADS;
constexpr unsigned FULL = ptk::FULL;

/* Causal softmax rows (Vaswani et al. 2017, 3.2.1), a warp per row (llm.c's
 * softmax_forward_kernel): the row max and the sum of exp by xor shuffles
 * (every lane ends with the same value, the order set by the warp alone);
 * row r = (bh, i) sees keys 0 .. q0+i, the rest is written 0. */
__device__ __forceinline__ float warp_max(float x)
{
    for (int k = 16; k > 0; k /= 2) {
        const float o = __shfl_xor_sync(FULL, x, k);
        x = o > x ? o : x;
    }
    return x;
}

__device__ __forceinline__ float warp_sum(float x)
{
    for (int k = 16; k > 0; k /= 2) x += __shfl_xor_sync(FULL, x, k);
    return x;
}

constexpr unsigned ROWS_PER_BLOCK = THREADS / 32;

__global__ void softmax_causal_fwd_kernel(float *att, size_t rows, int Tq, int T, int q0)
{
    const unsigned lane = threadIdx.x % 32;
    for (size_t r = (size_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32; r < rows;
         r += (size_t)gridDim.x * ROWS_PER_BLOCK) {
        float *a = att + r * (size_t)T;
        const int n = q0 + (int)(r % (size_t)Tq) + 1; /* visible keys */
        float mx = -INFINITY;
        for (int t = lane; t < n; t += 32) mx = a[t] > mx ? a[t] : mx;
        mx = warp_max(mx);
        float sum = 0.0f;
        for (int t = lane; t < n; t += 32) {
            const float e = expf(a[t] - mx);
            a[t] = e;
            sum += e;
        }
        const float inv = 1.0f / warp_sum(sum);
        for (int t = lane; t < n; t += 32) a[t] *= inv;
        for (int t = n + lane; t < T; t += 32) a[t] = 0.0f;
    }
}

/* datt = att (datt - rowsum(att datt)) scale on the visible keys, 0 after */
__global__ void softmax_causal_bwd_kernel(float *datt, const float *att, float scale, size_t rows, int Tq, int T,
                                          int q0)
{
    const unsigned lane = threadIdx.x % 32;
    for (size_t r = (size_t)blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32; r < rows;
         r += (size_t)gridDim.x * ROWS_PER_BLOCK) {
        float *d = datt + r * (size_t)T;
        const float *p = att + r * (size_t)T;
        const int n = q0 + (int)(r % (size_t)Tq) + 1;
        float dot = 0.0f;
        for (int t = lane; t < n; t += 32) dot += p[t] * d[t];
        dot = warp_sum(dot);
        for (int t = lane; t < n; t += 32) d[t] = p[t] * (d[t] - dot) * scale;
        for (int t = n + lane; t < T; t += 32) d[t] = 0.0f;
    }
}

unsigned row_blocks(size_t rows)
{
    size_t b = (rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK;
    return (unsigned)(b < 65536 ? (b ? b : 1) : 65536);
}

bool softmax_dims_ok(const char *op, int BH, int Tq, int T, int q0)
{
    if (BH >= 0 && Tq >= 0 && T >= 0 && q0 >= 0 && (long)q0 + Tq <= T) return true;
    refuse(op, "BH=%d Tq=%d T=%d q0=%d: needs sizes >= 0, q0 >= 0 and q0 + Tq <= T", BH, Tq, T, q0);
    return false;
}
} // namespace softmax_rows

/* The ops: a refused shape or a failed allocation is recorded
 * (pt_cuda_op_record), a launch error by pt_cuda_op_check. */
extern "C" void pt_cuda_attention_fwd_f32(void *out, void *lse, const void *q, const void *k, const void *v,
                                          const pt_attn_dims *d, int merge)
{
    int rc = attn_fwd<float>(out, lse, q, k, v, d, merge);
    if (rc != PT_OK) pt_cuda_op_record(rc, "attention_fwd");
    else pt_cuda_op_check("attention_fwd");
}

extern "C" void pt_cuda_attention_fwd_bf16(void *out, void *lse, const void *q, const void *k, const void *v,
                                           const pt_attn_dims *d, int merge)
{
    const void *ptrs[5] = {out, lse, q, k, v};
    if (pt_cuda_attention_cudnn_wants(d, merge, ptrs, 5)) { /* PTRAIN_ATTENTION cudnn (the default): attention_cudnn.c */
        const int crc = pt_cuda_attention_cudnn_fwd(out, lse, q, k, v, d);
        if (crc == PT_OK) pt_cuda_op_check("attention_fwd (cuDNN)");
        else if (crc != PT_ATTN_FALLBACK) pt_cuda_op_record(crc, "attention_fwd (cuDNN)");
        if (crc != PT_ATTN_FALLBACK) return;
    }
    int rc = attn_fwd<__nv_bfloat16>(out, lse, q, k, v, d, merge);
    if (rc != PT_OK) pt_cuda_op_record(rc, "attention_fwd");
    else pt_cuda_op_check("attention_fwd");
}

extern "C" void pt_cuda_attention_bwd_f32(void *dq, void *dk, void *dv, const void *dout, const void *q,
                                          const void *k, const void *v, const void *out, const void *lse,
                                          const pt_attn_dims *d)
{
    int rc = attn_bwd<float>(dq, dk, dv, dout, q, k, v, out, lse, d);
    if (rc != PT_OK) pt_cuda_op_record(rc, "attention_bwd");
    else pt_cuda_op_check("attention_bwd");
}

extern "C" void pt_cuda_attention_bwd_bf16(void *dq, void *dk, void *dv, const void *dout, const void *q,
                                           const void *k, const void *v, const void *out, const void *lse,
                                           const pt_attn_dims *d)
{
    const void *ptrs[9] = {dq, dk, dv, dout, q, k, v, out, lse};
    if (pt_cuda_attention_cudnn_wants(d, 0, ptrs, 9)) { /* PTRAIN_ATTENTION cudnn (the default): attention_cudnn.c */
        const int crc = pt_cuda_attention_cudnn_bwd(dq, dk, dv, dout, q, k, v, out, lse, d);
        if (crc == PT_OK) pt_cuda_op_check("attention_bwd (cuDNN)");
        else if (crc != PT_ATTN_FALLBACK) pt_cuda_op_record(crc, "attention_bwd (cuDNN)");
        if (crc != PT_ATTN_FALLBACK) return;
    }
    int rc = attn_bwd<__nv_bfloat16>(dq, dk, dv, dout, q, k, v, out, lse, d);
    if (rc != PT_OK) pt_cuda_op_record(rc, "attention_bwd");
    else pt_cuda_op_check("attention_bwd");
}

extern "C" void pt_cuda_softmax_causal_fwd(void *att, int BH, int Tq, int T, int q0)
{
    const char *op = "softmax_causal_fwd";
    if (!softmax_rows::softmax_dims_ok(op, BH, Tq, T, q0)) return;
    const size_t rows = (size_t)BH * Tq;
    if (!rows || !T || !softmax_rows::given(op, "att", {att})) return;
    softmax_rows::softmax_causal_fwd_kernel<<<softmax_rows::row_blocks(rows), softmax_rows::THREADS, 0, pt_cuda_stream_compute()>>>((float *)att, rows, Tq, T,
                                                                                          q0);
    pt_cuda_op_check(op);
}

extern "C" void pt_cuda_softmax_causal_bwd(void *datt, const void *att, double scale, int BH, int Tq, int T, int q0)
{
    const char *op = "softmax_causal_bwd";
    if (!softmax_rows::softmax_dims_ok(op, BH, Tq, T, q0)) return;
    const size_t rows = (size_t)BH * Tq;
    if (!rows || !T || !softmax_rows::given(op, "datt, att", {datt, att})) return;
    softmax_rows::softmax_causal_bwd_kernel<<<softmax_rows::row_blocks(rows), softmax_rows::THREADS, 0, pt_cuda_stream_compute()>>>(
        (float *)datt, (const float *)att, (float)scale, rows, Tq, T, q0);
    pt_cuda_op_check(op);
}

extern "C" int pt_cuda_fill_attention(pt_ops *o, const pt_prec_policy *p)
{
    PT_CUDA_SET_ACT(o, p, attention_fwd);
    PT_CUDA_SET_ACT(o, p, attention_bwd);
    PT_CUDA_SET_ONE(o, softmax_causal_fwd);
    PT_CUDA_SET_ONE(o, softmax_causal_bwd);
    o->attention_ref_fwd = NULL; /* the materialised reference is the CPU's (ops.h: OPT) */
    o->attention_ref_bwd = NULL;
    return PT_OK;
}
