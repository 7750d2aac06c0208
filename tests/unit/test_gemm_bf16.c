/* The bf16 GEMM and the bf16 conversions (lib/backend/gemm_bf16.h).
 *
 *  1. fp32 -> bf16 rounding: fixed cases (ties to even in both directions,
 *     one bit off a tie, subnormal ties, overflow to inf, infinities, -0,
 *     NaNs, including signalling NaNs whose payload lies only in the low 16
 *     bits, which truncation would turn into inf), then 2^20 random bit
 *     patterns against an independent reference: the nearer of the two
 *     bf16 neighbours, compared in double, the even one on a tie.
 *  2. Round trip: all 65536 bf16 values widen and round back to themselves
 *     (NaNs to a NaN of the same sign).
 *  3. The array converters equal the scalar ones (odd lengths, 2 threads).
 *  4. Each implementation (onednn, sbgemm, sgemm; one not in this build or
 *     this OpenBLAS is a TAP SKIP with the reason) against an fp64 product
 *     of the same bf16 inputs on fresh random values: odd M, N, K, every
 *     transpose pair, fp32 and bf16 C, alpha/beta/bias (beta 0 over a C of
 *     NaNs: C must not be read; beta 1: accumulation), padded leading
 *     dimensions whose padding holds NaNs (a read there shows) and C
 *     padding that must stay untouched; shapes past the sgemm path's tile
 *     rows and columns and past the bf16-output row blocks, and K cut in
 *     pieces by a small tile budget.  Tolerance per element:
 *     1e-4 of sum|alpha a b| + |beta c| + |bias| (fp32 accumulation), plus
 *     2^-8 of |C| for a bf16 C (one rounding); the worst ratio is printed.
 *  5. The choice: the rule for this CPU's ISA class; PTRAIN_BF16_GEMM
 *     forces, refuses an unknown name (one line naming it and the valid
 *     ones) and refuses one that cannot run here; with oneDNN on an AMX
 *     or AVX512_BF16 CPU, DNNL_MAX_CPU_ISA=avx512_core makes the class
 *     none and avx512_core_bf16 the class avx512_bf16, both choosing sgemm.  Children are this program run again
 * (/proc/self/exe --child).
 *  6. The ISA class against /proc/cpuinfo's flags.
 *  7. Argument errors. */
#define _GNU_SOURCE
#include "backend/gemm_bf16.h"
#include "backend/ops.h"
#include "core/core.h"
#include "tests/tap.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static int bf16_isnan(pt_bf16 h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0; }

/* value of a bf16 pattern as a double, the inf pattern read as +-2^128 (the
 * next step past the largest finite, where IEEE's overflow rule puts it) */
static double bf16_value_ext(uint32_t h)
{
    if ((h & 0x7fff) == 0x7f80) return (h & 0x8000) ? -ldexp(1, 128) : ldexp(1, 128);
    return (double)float_of(h << 16);
}

/* reference rounding of a non-NaN float: the nearer of the two bf16 patterns
 * around it, the even one on a tie */
static pt_bf16 ref_round(float x)
{
    uint32_t u = bits_of(x);
    uint32_t lo = u >> 16;
    if ((u & 0xffff) == 0) return (pt_bf16)lo;
    uint32_t hi = lo + 1; /* one step away from zero */
    double dl = fabs((double)x - bf16_value_ext(lo)), dh = fabs((double)x - bf16_value_ext(hi));
    if (dl < dh) return (pt_bf16)lo;
    if (dh < dl) return (pt_bf16)hi;
    return (pt_bf16)((lo & 1) ? hi : lo);
}

/* ------------------------------------------------------------------ children */

static int child_main(void)
{
    int rc = pt_gemm_bf16_select();
    char msg[600];
    snprintf(msg, sizeof msg, "%s", rc ? pt_errmsg() : pt_gemm_bf16_summary());
    /* a call must return the same error as the choice */
    pt_bf16 a[4] = {0x3f80, 0x3f80, 0x3f80, 0x3f80};
    float c[4];
    int rc2 = pt_gemm_bf16(0, 0, 2, 2, 2, 1, a, 2, a, 2, 0, c, PT_BF16_OUT_F32, 2, NULL);
    printf("%s\t%d\t%d\t%d\t%s\n", pt_gemm_bf16_impl_name(pt_gemm_bf16_impl()), rc, rc2, pt_bf16_isa(), msg);
    return 0;
}

/* run this program with --child under var=val (val NULL: unset); fills the
 * child's fields; returns 0 when it could not be run */
static int child(const char *var, const char *val, char *impl, size_t ni, int *rc, int *rc2, int *isa, char *msg,
                 size_t nm)
{
    const char *old = getenv(var);
    char *saved = old ? strdup(old) : NULL;
    if (val) setenv(var, val, 1);
    else unsetenv(var);
    char self[4096], cmd[4200], out[1024] = "";
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    int ok = 0;
    if (len > 0) {
        self[len] = 0;
        snprintf(cmd, sizeof cmd, "'%s' --child", self);
        FILE *p = popen(cmd, "r");
        ok = p && fgets(out, sizeof out, p) != NULL;
        if (p) ok = pclose(p) == 0 && ok;
    }
    if (saved) setenv(var, saved, 1);
    else unsetenv(var);
    free(saved);
    out[strcspn(out, "\n")] = 0;
    char *f[5] = {out, NULL, NULL, NULL, NULL};
    for (int i = 1; i < 5 && f[i - 1]; i++) {
        char *t = strchr(f[i - 1], '\t');
        if (t) *t = 0, f[i] = t + 1;
    }
    if (!ok || !f[4]) return 0;
    snprintf(impl, ni, "%s", f[0]);
    *rc = atoi(f[1]), *rc2 = atoi(f[2]), *isa = atoi(f[3]);
    snprintf(msg, nm, "%s", f[4]);
    return 1;
}

/* ------------------------------------------------------------------ GEMM check */

typedef struct gcase {
    int M, N, K;
    int pad; /* extra leading-dimension elements, filled with NaN */
} gcase;

static pt_rng rng;

static pt_bf16 rnd_bf16(void) { return pt_f32_to_bf16((float)pt_rng_normal(&rng)); }

/* one call of impl against the fp64 product; returns the worst error as a
 * fraction of its tolerance (> 1 fails), or -1 when the call failed */
static double check_one(int impl, int ta, int tb, const gcase *g, int ctype, float alpha, float beta, int with_bias,
                        char *fail, size_t nf)
{
    const int M = g->M, N = g->N, K = g->K;
    const int lda = (ta ? M : K) + g->pad, ldb = (tb ? K : N) + g->pad, ldc = N + g->pad;
    const size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
    pt_bf16 *A = malloc(sizeof(pt_bf16) * na), *B = malloc(sizeof(pt_bf16) * nb);
    void *C = malloc((ctype == PT_BF16_OUT_F32 ? sizeof(float) : sizeof(pt_bf16)) * nc);
    double *c0 = malloc(sizeof(double) * (size_t)M * N);
    float *bias = malloc(sizeof(float) * (size_t)(N > 0 ? N : 1));
    if (!A || !B || !C || !c0 || !bias) {
        snprintf(fail, nf, "out of memory");
        free(A), free(B), free(C), free(c0), free(bias);
        return -1;
    }
    const pt_bf16 qnan = 0x7fc0;
    for (size_t r = 0; r < (size_t)(ta ? K : M); r++)
        for (int j = 0; j < lda; j++) A[r * lda + j] = j < (ta ? M : K) ? rnd_bf16() : qnan;
    for (size_t r = 0; r < (size_t)(tb ? N : K); r++)
        for (int j = 0; j < ldb; j++) B[r * ldb + j] = j < (tb ? K : N) ? rnd_bf16() : qnan;
    for (int n = 0; n < N; n++) bias[n] = (float)pt_rng_normal(&rng);
    /* C: beta 0 -> NaN everywhere (must not be read); else random; padding: sentinel 7 */
    for (int m = 0; m < M; m++)
        for (int j = 0; j < ldc; j++) {
            float v = j >= N ? 7.0f : beta == 0 ? NAN : (float)pt_rng_normal(&rng);
            if (ctype == PT_BF16_OUT_F32) ((float *)C)[(size_t)m * ldc + j] = v;
            else ((pt_bf16 *)C)[(size_t)m * ldc + j] = pt_f32_to_bf16(v);
            if (j < N)
                c0[(size_t)m * N + j] = ctype == PT_BF16_OUT_F32 ? v : pt_bf16_to_f32(pt_f32_to_bf16(v));
        }
    int rc =
        pt_gemm_bf16_with(impl, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ctype, ldc, with_bias ? bias : NULL);
    double worst = 0;
    if (rc) {
        snprintf(fail, nf, "call failed: %s", pt_errmsg());
        worst = -1;
    }
    for (int m = 0; m < M && !rc; m++)
        for (int n = 0; n < ldc; n++) {
            const size_t i = (size_t)m * ldc + n;
            const double got =
                ctype == PT_BF16_OUT_F32 ? (double)((float *)C)[i] : (double)pt_bf16_to_f32(((pt_bf16 *)C)[i]);
            if (n >= N) {
                if (got != 7.0) {
                    snprintf(fail, nf, "C padding [%d,%d] changed to %g", m, n, got);
                    worst = INFINITY;
                }
                continue;
            }
            double s = 0, sa = 0;
            for (int k = 0; k < K; k++) {
                double a = pt_bf16_to_f32(ta ? A[(size_t)k * lda + m] : A[(size_t)m * lda + k]);
                double b = pt_bf16_to_f32(tb ? B[(size_t)n * ldb + k] : B[(size_t)k * ldb + n]);
                s += a * b, sa += fabs(a * b);
            }
            double ref = alpha * s, scale = fabs(alpha) * sa;
            if (beta != 0) ref += beta * c0[(size_t)m * N + n], scale += fabs(beta * c0[(size_t)m * N + n]);
            if (with_bias) ref += bias[n], scale += fabs(bias[n]);
            double tol = 1e-4 * scale + (ctype == PT_BF16_OUT_BF16 ? ldexp(fabs(ref), -8) : 0) + 1e-30;
            double r = fabs(got - ref) / tol;
            if (!(r <= worst)) { /* NaN counts as worst */
                worst = isnan(r) ? INFINITY : r;
                if (worst > 1)
                    snprintf(fail, nf, "C[%d,%d] = %.7g, fp64 %.7g (tolerance %.2g)", m, n, got, ref, tol);
            }
        }
    free(A), free(B), free(C), free(c0), free(bias);
    return worst;
}

/* the cases of one shape and transpose pair, (output, alpha, beta, bias):
 * full: both outputs with (1, 0, no) over NaNs, (1, 1, yes), (0.75, 0.5,
 * yes), (1, 1, no); a big shape: (bf16, 1, 0, no) and (fp32, 1, 1, yes).
 * Returns the worst ratio; fail describes the first failure. */
static double check_shape(int impl, int ta, int tb, const gcase *g, int full, char *fail, size_t nf)
{
    static const struct { int ctype; float alpha, beta; int bias; } all[] = {
        {PT_BF16_OUT_F32, 1, 0, 0},  {PT_BF16_OUT_F32, 1, 1, 1},  {PT_BF16_OUT_F32, 0.75f, 0.5f, 1},
        {PT_BF16_OUT_F32, 1, 1, 0},  {PT_BF16_OUT_BF16, 1, 0, 0}, {PT_BF16_OUT_BF16, 1, 1, 1},
        {PT_BF16_OUT_BF16, 0.75f, 0.5f, 1}, {PT_BF16_OUT_BF16, 1, 1, 0},
    };
    static const int bigcases[] = {4, 1};
    const int n = full ? 8 : 2;
    double worst = 0;
    for (int i = 0; i < n; i++) {
        const int j = full ? i : bigcases[i];
        char f[300] = "";
        double w = check_one(impl, ta, tb, g, all[j].ctype, all[j].alpha, all[j].beta, all[j].bias, f, sizeof f);
        if (w < 0 || w > 1) {
            if (!*fail)
                snprintf(fail, nf, "%s C, alpha %g beta %g%s: %s", all[j].ctype == PT_BF16_OUT_BF16 ? "bf16" : "fp32",
                         all[j].alpha, all[j].beta, all[j].bias ? " +bias" : "", f);
            if (w < 0) w = INFINITY;
        }
        if (w > worst) worst = w;
    }
    return worst;
}

/* ------------------------------------------------------------------ /proc/cpuinfo */

/* bf16 class from /proc/cpuinfo's first flags line; -2 unreadable */
static int proc_class(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return -2;
    char *line = NULL;
    size_t cap = 0;
    int cls = -2;
    while (getline(&line, &cap, f) > 0) {
        if (strncmp(line, "flags", 5) != 0) continue;
        static const char *want[8] = {"avx512f",  "avx512cd",    "avx512bw", "avx512dq",
                                      "avx512vl", "avx512_bf16", "amx_bf16", "amx_tile"};
        int has[8] = {0};
        char *p = strchr(line, ':');
        for (char *tok = p ? strtok(p + 1, " \t\n") : NULL; tok; tok = strtok(NULL, " \t\n"))
            for (int i = 0; i < 8; i++)
                if (strcmp(tok, want[i]) == 0) has[i] = 1;
        int avx512 = has[0] && has[1] && has[2] && has[3] && has[4];
        cls = !avx512 || !has[5] ? PT_BF16_ISA_NONE : has[6] && has[7] ? PT_BF16_ISA_AMX : PT_BF16_ISA_AVX512;
        break;
    }
    free(line);
    fclose(f);
    return cls;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child") == 0) return child_main();
    pt_rng_seed(&rng, (uint64_t)getpid() ^ (uint64_t)(pt_now() * 1e6), 11);
    const pt_backend *be = pt_backend_get("cpu");

    /* 1. rounding: fixed cases */
    static const struct { uint32_t in; pt_bf16 out; const char *what; } fixed[] = {
        {0x3f800000u, 0x3f80, "1.0 exact"},
        {0x3f808000u, 0x3f80, "tie, even below: down"},
        {0x3f818000u, 0x3f82, "tie, odd below: up to even"},
        {0x3f808001u, 0x3f81, "just above a tie: up"},
        {0x3f807fffu, 0x3f80, "just below a tie: down"},
        {0xbf818000u, 0xbf82, "negative tie, odd: away to even"},
        {0x00008000u, 0x0000, "subnormal tie: to even 0"},
        {0x00018000u, 0x0002, "subnormal tie, odd: up"},
        {0x80000000u, 0x8000, "-0 stays -0"},
        {0x7f7f7fffu, 0x7f7f, "below the overflow midpoint: largest finite"},
        {0x7f7f8000u, 0x7f80, "overflow midpoint (odd): inf"},
        {0x7f7fffffu, 0x7f80, "FLT_MAX: inf"},
        {0xff7fffffu, 0xff80, "-FLT_MAX: -inf"},
        {0x7f800000u, 0x7f80, "inf"},
        {0xff800000u, 0xff80, "-inf"},
        {0x7fc00000u, 0x7fc0, "quiet NaN"},
        {0x7fa00000u, 0x7fe0, "signalling NaN, high payload: quieted, payload kept"},
    };
    int bad = 0;
    char first[200] = "";
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        pt_bf16 got = pt_f32_to_bf16(float_of(fixed[i].in));
        if (got != fixed[i].out && !bad++)
            snprintf(first, sizeof first, "%08x (%s) -> %04x, want %04x", (unsigned)fixed[i].in, fixed[i].what,
                     (unsigned)got, (unsigned)fixed[i].out);
    }
    tap_ok(!bad, "fp32->bf16 fixed cases (ties to even, subnormal ties, overflow, inf, -0, NaN): %d wrong %s", bad,
           first);
    static const uint32_t snans[] = {0x7f800001u, 0xff800001u, 0x7f80ffffu, 0x7fbfffffu};
    bad = 0;
    for (size_t i = 0; i < sizeof snans / sizeof snans[0]; i++) {
        pt_bf16 h = pt_f32_to_bf16(float_of(snans[i]));
        if (!bf16_isnan(h) || (h & 0x8000) != ((snans[i] >> 16) & 0x8000)) bad++;
    }
    tap_ok(!bad, "NaNs with payload only in the low bits stay NaN of the same sign (truncation would give inf)");

    /* 1b. random patterns against the reference */
    bad = 0;
    first[0] = 0;
    for (int i = 0; i < (1 << 20); i++) {
        uint32_t u = (uint32_t)pt_rng_u64(&rng);
        if (i < 4096) u = (u & 0xffff0000u) | 0x8000u; /* ties */
        float x = float_of(u);
        if (isnan(x)) continue;
        pt_bf16 got = pt_f32_to_bf16(x), want = ref_round(x);
        if (got != want && !bad++)
            snprintf(first, sizeof first, "first: %08x -> %04x, reference %04x", (unsigned)u, (unsigned)got,
                     (unsigned)want);
    }
    tap_ok(!bad, "fp32->bf16 on 2^20 random patterns (4096 of them ties) == nearest-even reference: %d differ %s", bad,
           first);

    /* 2. round trip */
    bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        pt_bf16 back = pt_f32_to_bf16(pt_bf16_to_f32((pt_bf16)h));
        if (bf16_isnan((pt_bf16)h) ? !bf16_isnan(back) || (back & 0x8000) != (h & 0x8000) : back != h) bad++;
        if (!bf16_isnan((pt_bf16)h) && bits_of(pt_bf16_to_f32((pt_bf16)h)) != h << 16) bad++;
    }
    tap_ok(!bad, "all 65536 bf16 values widen exactly and round back to themselves (NaN to NaN): %d wrong", bad);

    /* 3. array converters */
    be->set_threads(2);
    const size_t nconv = 300007;
    float *xf = malloc(sizeof(float) * nconv), *yf = malloc(sizeof(float) * nconv);
    pt_bf16 *xh = malloc(sizeof(pt_bf16) * nconv);
    bad = 0;
    for (size_t i = 0; i < nconv; i++) xf[i] = float_of((uint32_t)pt_rng_u64(&rng));
    pt_f32_to_bf16_n(xh, xf, nconv);
    for (size_t i = 0; i < nconv; i++) {
        pt_bf16 want = pt_f32_to_bf16(xf[i]);
        if (xh[i] != want && !(bf16_isnan(xh[i]) && bf16_isnan(want))) bad++;
    }
    pt_bf16_to_f32_n(yf, xh, nconv);
    for (size_t i = 0; i < nconv; i++)
        if (bits_of(yf[i]) != (uint32_t)xh[i] << 16) bad++;
    tap_ok(!bad, "pt_f32_to_bf16_n / pt_bf16_to_f32_n == the scalar conversions on %zu random values, 2 threads",
           nconv);
    free(xf), free(yf), free(xh);

    /* 4. the implementations */
    const gcase small[] = {{37, 53, 71, 5}, {1, 19, 33, 0}, {45, 1, 7, 3}};
    const gcase big[] = {
        {2100, 33, 41, 0},  /* M past the sgemm path's 2048-row tile */
        {29, 4200, 43, 2},  /* N past its 4096-column tile */
        {31, 27, 1501, 1},  /* a deep K */
        {1100, 3900, 23, 0}, /* M*N past the 4 Mi-float bf16-output row block */
    };
    for (int impl = 1; impl < PT_GEMM_BF16_NIMPL; impl++) {
        char why[256];
        const char *name = pt_gemm_bf16_impl_name(impl);
        if (!pt_gemm_bf16_available(impl, why, sizeof why)) {
            tap_ok(1, "%s against fp64 # SKIP %s", name, why);
            continue;
        }
        if (impl == PT_GEMM_BF16_ONEDNN)
            tap_diag("onednn runs %s (forward shape)", pt_gemm_bf16_onednn_impl(0, 1, 37, 53, 71, PT_BF16_OUT_BF16));
        for (int t = 0; t < 4; t++) {
            const int ta = t >> 1, tb = t & 1;
            for (size_t s = 0; s < sizeof small / sizeof small[0]; s++) {
                char fail[400] = "";
                be->set_threads(s == 0 ? 2 : 1);
                double w = check_shape(impl, ta, tb, &small[s], 1, fail, sizeof fail);
                tap_ok(w <= 1,
                       "%s ta=%d tb=%d M=%d N=%d K=%d (ld +%d, NaN padding), fp32/bf16 C, alpha/beta/bias: worst %.2f "
                       "of tolerance%s%s",
                       name, ta, tb, small[s].M, small[s].N, small[s].K, small[s].pad, w, *fail ? "; " : "", fail);
            }
        }
        if (impl == PT_GEMM_BF16_SGEMM) { /* K in pieces: a budget of 1500 floats makes them 16 deep */
            size_t old = pt_gemm_bf16_tile_budget(1500);
            for (int t = 0; t < 4; t++) {
                const int ta = t >> 1, tb = t & 1;
                char fail[400] = "";
                double w = check_shape(impl, ta, tb, &small[0], 1, fail, sizeof fail);
                tap_ok(w <= 1,
                       "sgemm with a 1500-float tile budget (K in 16-deep pieces) ta=%d tb=%d M=%d N=%d K=%d: worst "
                       "%.2f of tolerance%s%s",
                       ta, tb, small[0].M, small[0].N, small[0].K, w, *fail ? "; " : "", fail);
            }
            pt_gemm_bf16_tile_budget(old);
        }
        be->set_threads(2);
        for (size_t s = 0; s < sizeof big / sizeof big[0]; s++) {
            const int ta = (int)(s & 1), tb = (int)((s >> 1) & 1) ^ 1;
            char fail[400] = "";
            double w = check_shape(impl, ta, tb, &big[s], 0, fail, sizeof fail);
            tap_ok(w <= 1, "%s ta=%d tb=%d M=%d N=%d K=%d: worst %.2f of tolerance%s%s", name, ta, tb, big[s].M,
                   big[s].N, big[s].K, w, *fail ? "; " : "", fail);
        }
    }
    be->set_threads(1);

    /* 5. the choice */
    const int isa = pt_bf16_isa();
    tap_diag("bf16 ISA class %s (CPU: %s); %s", pt_bf16_isa_name(isa), pt_bf16_isa_name(pt_bf16_cpu_isa()),
             pt_gemm_bf16_summary());
    char impl[32], msg[600];
    int rc, rc2, cisa;
    const char *env = getenv("PTRAIN_BF16_GEMM");
    if (env && *env) {
        tap_diag("PTRAIN_BF16_GEMM=%s set: the rule check is skipped", env);
    } else {
        /* AMX: oneDNN, else fp32 on converted tiles; avx512_bf16 and none: fp32 on converted tiles */
        int want = PT_GEMM_BF16_SGEMM;
        if (isa == PT_BF16_ISA_AMX && pt_gemm_bf16_available(PT_GEMM_BF16_ONEDNN, NULL, 0)) want = PT_GEMM_BF16_ONEDNN;
        tap_ok(pt_gemm_bf16_select() == PT_OK && pt_gemm_bf16_impl() == want &&
                   strstr(pt_gemm_bf16_summary(), "rule for"),
               "the rule for %s chooses %s: %s", pt_bf16_isa_name(isa), pt_gemm_bf16_impl_name(want),
               pt_gemm_bf16_summary());
    }
    if (child("PTRAIN_BF16_GEMM", "sgemm", impl, sizeof impl, &rc, &rc2, &cisa, msg, sizeof msg))
        tap_ok(strcmp(impl, "sgemm") == 0 && rc == 0 && rc2 == 0 && strstr(msg, "PTRAIN_BF16_GEMM=sgemm"),
               "PTRAIN_BF16_GEMM=sgemm forces sgemm and says so: %s", msg);
    else tap_ok(0, "child run with PTRAIN_BF16_GEMM=sgemm");
    if (child("PTRAIN_BF16_GEMM", "mkl", impl, sizeof impl, &rc, &rc2, &cisa, msg, sizeof msg))
        tap_ok(rc == PT_EINVAL && rc2 == PT_EINVAL && strstr(msg, "PTRAIN_BF16_GEMM=mkl") &&
                   strstr(msg, "onednn, sbgemm, sgemm, auto") && !strchr(msg, '\n'),
               "PTRAIN_BF16_GEMM=mkl is refused, by the choice and by a GEMM call, in one line: %s", msg);
    else tap_ok(0, "child run with PTRAIN_BF16_GEMM=mkl");
    for (int i = PT_GEMM_BF16_ONEDNN; i <= PT_GEMM_BF16_SBGEMM; i++) {
        char why[256];
        const char *name = pt_gemm_bf16_impl_name(i);
        const int avail = pt_gemm_bf16_available(i, why, sizeof why);
        if (child("PTRAIN_BF16_GEMM", name, impl, sizeof impl, &rc, &rc2, &cisa, msg, sizeof msg))
            tap_ok(avail ? rc == 0 && rc2 == 0 && strcmp(impl, name) == 0
                         : rc == PT_EUNSUPP && rc2 == PT_EUNSUPP && strstr(msg, why) && strstr(msg, name),
                   "PTRAIN_BF16_GEMM=%s (%s here): %s", name, avail ? "available" : "not available", msg);
        else tap_ok(0, "child run with PTRAIN_BF16_GEMM=%s", name);
    }
    if (pt_gemm_bf16_available(PT_GEMM_BF16_ONEDNN, NULL, 0) && pt_bf16_cpu_isa() >= PT_BF16_ISA_AVX512) {
        unsetenv("PTRAIN_BF16_GEMM");
        if (child("DNNL_MAX_CPU_ISA", "avx512_core", impl, sizeof impl, &rc, &rc2, &cisa, msg, sizeof msg))
            tap_ok(cisa == PT_BF16_ISA_NONE && strcmp(impl, "sgemm") == 0 && strstr(msg, "capped"),
                   "DNNL_MAX_CPU_ISA=avx512_core: class none, fp32 compute (sgemm): %s", msg);
        else tap_ok(0, "child run with DNNL_MAX_CPU_ISA=avx512_core");
        if (child("DNNL_MAX_CPU_ISA", "avx512_core_bf16", impl, sizeof impl, &rc, &rc2, &cisa, msg, sizeof msg))
            tap_ok(cisa == PT_BF16_ISA_AVX512 && strcmp(impl, "sgemm") == 0 && strstr(msg, "rule for avx512_bf16"),
                   "DNNL_MAX_CPU_ISA=avx512_core_bf16: class avx512_bf16, its rule: sgemm: %s", msg);
        else tap_ok(0, "child run with DNNL_MAX_CPU_ISA=avx512_core_bf16");
        if (env) setenv("PTRAIN_BF16_GEMM", env, 1);
    } else {
        tap_ok(1, "rule under DNNL_MAX_CPU_ISA # SKIP needs oneDNN and an AVX512_BF16 CPU");
    }

    /* 6. the class against /proc/cpuinfo */
    int pc = proc_class();
    if (pc == -2) tap_ok(1, "bf16 class against /proc/cpuinfo # SKIP /proc/cpuinfo unreadable or without flags");
    else tap_ok(pt_bf16_cpu_isa() == pc, "bf16 ISA class from cpuid (%s) == from /proc/cpuinfo flags (%s)",
                pt_bf16_isa_name(pt_bf16_cpu_isa()), pt_bf16_isa_name(pc));

    /* 7. argument errors */
    pt_bf16 a[64];
    float c[64];
    for (int i = 0; i < 64; i++) a[i] = rnd_bf16(), c[i] = 3.0f;
    rc = pt_gemm_bf16_with(PT_GEMM_BF16_SGEMM, 0, 1, 4, 4, 8, 1, a, 7, a, 8, 0, c, PT_BF16_OUT_F32, 4, NULL);
    tap_ok(rc == PT_EINVAL && strstr(pt_errmsg(), "lda=7") && strstr(pt_errmsg(), "lda >= 8"),
           "lda below K refused, naming it and its minimum: %s", pt_errmsg());
    rc = pt_gemm_bf16_with(PT_GEMM_BF16_SGEMM, 2, 0, 4, 4, 4, 1, a, 4, a, 4, 0, c, PT_BF16_OUT_F32, 4, NULL);
    tap_ok(rc == PT_EINVAL && strstr(pt_errmsg(), "ta=2"), "ta=2 refused: %s", pt_errmsg());
    rc = pt_gemm_bf16_with(PT_GEMM_BF16_SGEMM, 0, 0, 4, 4, 4, 1, NULL, 4, a, 4, 0, c, PT_BF16_OUT_F32, 4, NULL);
    tap_ok(rc == PT_EINVAL && strstr(pt_errmsg(), "NULL A"), "NULL A refused: %s", pt_errmsg());
    rc = pt_gemm_bf16_with(PT_GEMM_BF16_SGEMM, 0, 0, 4, 4, 4, 1, a, 4, a, 4, 0, c, 5, 4, NULL);
    tap_ok(rc == PT_EINVAL && strstr(pt_errmsg(), "output type 5"), "output type 5 refused: %s", pt_errmsg());
    rc = pt_gemm_bf16_with(9, 0, 0, 4, 4, 4, 1, a, 4, a, 4, 0, c, PT_BF16_OUT_F32, 4, NULL);
    tap_ok(rc == PT_EUNSUPP && strstr(pt_errmsg(), "no implementation 9"), "implementation 9 refused: %s", pt_errmsg());
    float bias[4] = {0.5f, -1.0f, 2.0f, 0.25f};
    rc = pt_gemm_bf16_with(PT_GEMM_BF16_SGEMM, 0, 0, 4, 4, 0, 1, NULL, 1, NULL, 4, 2.0f, c, PT_BF16_OUT_F32, 4, bias);
    tap_ok(rc == PT_OK && c[0] == 6.5f && c[1] == 5.0f && c[15] == 6.25f, "K = 0: C = beta C + bias (%g %g %g)", c[0],
           c[1], c[15]);
    c[0] = 3.0f;
    rc = pt_gemm_bf16_with(PT_GEMM_BF16_SGEMM, 0, 0, 0, 4, 4, 1, NULL, 4, NULL, 4, 0, c, PT_BF16_OUT_F32, 4, NULL);
    tap_ok(rc == PT_OK && c[0] == 3.0f, "M = 0: nothing done, nothing read");
    return tap_done();
}
