/* SPDX-License-Identifier: MIT */
/* The op list (lib/backend/ops.h's PT_OPS) against the tables built from it:
 *  1. every table this build has (the CPU's f32, bf16 and f64; CUDA's f32
 *     and bf16 where the backend is built: its tables are host code, built
 *     at load with no device) has every REQ entry of the list, its policy
 *     and the policy's act/acc;
 *  2. building a table with one op family left out fails, naming the
 *     family's first required op, the family and the backend, for every
 *     family and backend; with every family it is the loaded table, entry
 *     by entry;
 *  3. the precision policies: the fp32 and bf16 rows, the lookups by name,
 *     by dtype and by backend, and a policy no backend has (fp8, a scaled
 *     GEMM policy) refused in one line saying what is valid. */
#include "config.h"
#include "backend/ops.h"
#include "core/core.h"
#include "tests/tap.h"
#ifdef HAVE_CUDA
#include "backend/cuda/ops_cuda.h"
#endif

#include <stdio.h>
#include <string.h>

typedef int (*build_fn)(pt_ops *o, const pt_prec_policy *p, unsigned families);

static const struct backend_case {
    const char *name;
    build_fn build;
    pt_ops *f32, *bf16;
} backends[] = {
    {"cpu", pt_cpu_ops_build, &pt_cpu_ops_f32, &pt_cpu_ops_bf16},
#ifdef HAVE_CUDA
    {"cuda", pt_cuda_ops_build, &pt_cuda_ops_f32, &pt_cuda_ops_bf16},
#endif
};
enum { NBE = sizeof backends / sizeof backends[0] };

#define NEED_REQ 1
#define NEED_OPT 0

/* REQ entries of PT_OPS missing from t: their count, their names in buf */
static int missing(const pt_ops *t, char *buf, size_t len)
{
    int n = 0;
    size_t k = 0;
    buf[0] = '\0';
#define M(op, ret, args, fam, role, need)                                                                             \
    if (NEED_##need && !t->op) {                                                                                     \
        n++;                                                                                                         \
        if (k < len) k += (size_t)snprintf(buf + k, len - k, " %s", #op);                                            \
    }
    PT_OPS(M)
#undef M
    return n;
}

/* entries of a and b that differ (every row, REQ or OPT) */
static int differ(const pt_ops *a, const pt_ops *b)
{
    int n = 0;
#define D(op, ret, args, fam, role, need) n += a->op != b->op;
    PT_OPS(D)
#undef D
    return n;
}

/* the first REQ op of family f in list order, and the number of rows of f */
static const char *first_req(int f, int *rows)
{
    const char *first = NULL;
    *rows = 0;
#define F(op, ret, args, fam, role, need)                                                                             \
    if (PT_FAM_##fam == f) {                                                                                         \
        ++*rows;                                                                                                     \
        if (NEED_##need && !first) first = #op;                                                                      \
    }
    PT_OPS(F)
#undef F
    return first;
}

static void check_table(const char *be, const pt_ops *t, const pt_prec_policy *p)
{
    char buf[512];
    const int n = missing(t, buf, sizeof buf);
    tap_ok(n == 0 && t->prec == p && t->act == p->act && t->acc == p->acc,
           "%s %s: every required entry of PT_OPS is set (%d missing:%s), policy %s, act %s, acc %s", be,
           t->name ? t->name : "?", n, buf, t->prec && t->prec->name ? t->prec->name : "none",
           pt_dtype_name(t->act), pt_dtype_name(t->acc));
}

int main(void)
{
    int rows = 0;
#define R(...) rows++;
    PT_OPS(R)
#undef R
    tap_diag("PT_OPS has %d ops in %d families", rows, PT_FAM_N);

    /* 1. the loaded tables */
    static const pt_prec_policy f64 = {"f64", PT_F64, PT_F64, PT_F64, PT_SCALE_NONE, 0};
    for (int b = 0; b < NBE; b++) {
        check_table(backends[b].name, backends[b].f32, PT_PREC_POLICY_FP32);
        check_table(backends[b].name, backends[b].bf16, PT_PREC_POLICY_BF16);
    }
    {
        char buf[512];
        const int n = missing(&pt_cpu_ops_f64, buf, sizeof buf);
        tap_ok(n == 0 && pt_cpu_ops_f64.prec && pt_cpu_ops_f64.act == PT_F64 && pt_cpu_ops_f64.acc == PT_F64 &&
                   pt_cpu_ops_f64.attention_ref_fwd && pt_cpu_ops_f64.attention_ref_bwd,
               "cpu f64 (the tests' reference): every entry, the materialised attention too (%d missing:%s)", n, buf);
    }
    int fams_ok = 1;
    for (int f = 0; f < PT_FAM_N; f++) {
        int nr;
        if (!first_req(f, &nr) || strcmp(pt_op_family_id(f), "?") == 0) fams_ok = 0;
    }
    tap_ok(fams_ok, "every family has a required op and a name (%s .. %s)", pt_op_family_id(0),
           pt_op_family_id(PT_FAM_N - 1));

    /* 2. a family left out fails at build time, naming its first op */
    for (int b = 0; b < NBE; b++) {
        const char *be = backends[b].name;
        int all_ok = 1;
        for (int f = 0; f < PT_FAM_N; f++) {
            int nr;
            const char *op = first_req(f, &nr);
            pt_ops t;
            const int rc = backends[b].build(&t, PT_PREC_POLICY_BF16, PT_FAM_ALL & ~(1u << f));
            char want_op[64], want_be[64], want_fam[64];
            snprintf(want_op, sizeof want_op, "op '%s'", op ? op : "?");
            snprintf(want_be, sizeof want_be, "backend '%s'", be);
            snprintf(want_fam, sizeof want_fam, "(family %s)", pt_op_family_id(f));
            const int ok = rc == PT_EUNSUPP && strstr(pt_errmsg(), want_op) && strstr(pt_errmsg(), want_be) &&
                           strstr(pt_errmsg(), want_fam) && !t.prec;
            if (!ok) all_ok = 0;
            if (f == PT_FAM_XENT || !ok)
                tap_diag("%s without family %s: rc %d: %s", be, pt_op_family_id(f), rc, pt_errmsg());
        }
        tap_ok(all_ok, "%s: a table built with any one of the %d families left out fails naming that family's first op",
               be, PT_FAM_N);
        pt_ops t32, t16;
        const int r32 = backends[b].build(&t32, PT_PREC_POLICY_FP32, PT_FAM_ALL);
        const int r16 = backends[b].build(&t16, PT_PREC_POLICY_BF16, PT_FAM_ALL);
        tap_ok(r32 == PT_OK && r16 == PT_OK && differ(&t32, backends[b].f32) == 0 &&
                   differ(&t16, backends[b].bf16) == 0 && !strcmp(t32.name, "f32") && !strcmp(t16.name, "bf16"),
               "%s: every family gives the loaded tables entry by entry (%d, %d entries differ)", be,
               differ(&t32, backends[b].f32), differ(&t16, backends[b].bf16));
        /* ACC/ANY ops: one kernel for both tables */
        int shared = 1;
#define S(op, ret, args, fam, role, need)                                                                             \
    if (strcmp(#role, "ACT") != 0 && t32.op != t16.op) shared = 0;
        PT_OPS(S)
#undef S
        tap_ok(shared, "%s: the ACC and ANY ops of the fp32 and bf16 tables are the same kernels", be);
    }
    {
        pt_ops t;
        tap_ok(pt_cpu_ops_build(&t, &f64, PT_FAM_ALL) == PT_OK && differ(&t, &pt_cpu_ops_f64) == 0,
               "cpu: the f64 reference policy gives pt_cpu_ops_f64");
    }

    /* 3. the policies */
    const pt_prec_policy *fp32 = pt_prec_policy_find("fp32"), *bf16 = pt_prec_policy_find("bf16");
    tap_ok(fp32 == PT_PREC_POLICY_FP32 && fp32->act == PT_F32 && fp32->gemm == PT_F32 && fp32->acc == PT_F32 &&
               fp32->scaling == PT_SCALE_NONE && fp32->amax_history == 0,
           "policy fp32: act fp32, GEMM operands fp32, accumulation fp32, no scaling");
    tap_ok(bf16 == PT_PREC_POLICY_BF16 && bf16->act == PT_BF16 && bf16->gemm == PT_BF16 && bf16->acc == PT_F32 &&
               bf16->scaling == PT_SCALE_NONE,
           "policy bf16: act bf16, GEMM operands bf16, accumulation fp32, no scaling");
    tap_ok(pt_prec_policy_for(PT_F32) == fp32 && pt_prec_policy_for(PT_BF16) == bf16 && !pt_prec_policy_for(PT_F64) &&
               strstr(pt_errmsg(), "fp64"),
           "by dtype: fp32 and bf16 rows, fp64 refused: %s", pt_errmsg());
    tap_ok(!pt_prec_policy_find("fp8") && strstr(pt_errmsg(), "'fp8'") && strstr(pt_errmsg(), "fp32, bf16"),
           "fp8 is not implemented and says what is valid: %s", pt_errmsg());
    const pt_backend *cpu = pt_backend_find("cpu");
    tap_ok(cpu && pt_backend_ops_for(cpu, fp32) == &pt_cpu_ops_f32 && pt_backend_ops_for(cpu, bf16) == &pt_cpu_ops_bf16 &&
               pt_backend_ops(cpu, PT_BF16) == &pt_cpu_ops_bf16 && cpu->prepare(fp32) == PT_OK,
           "cpu: the lookup and prepare take the policy; pt_backend_ops(dtype) picks the same tables");
    /* a scaled-GEMM policy (what FP8 will be: new rows) has no table yet */
    static const pt_prec_policy scaled = {"scaled", PT_BF16, PT_BF16, PT_F32, PT_SCALE_DELAYED, 16};
    pt_ops t;
    tap_ok(!pt_backend_ops_for(cpu, &scaled) && strstr(pt_errmsg(), "'scaled'") && strstr(pt_errmsg(), "fp32, bf16"),
           "a policy without a table is refused by the lookup: %s", pt_errmsg());
    tap_ok(cpu->prepare(&scaled) != PT_OK, "and by prepare: %s", pt_errmsg());
    for (int b = 0; b < NBE; b++)
        tap_ok(backends[b].build(&t, &scaled, PT_FAM_ALL) == PT_EUNSUPP && strstr(pt_errmsg(), backends[b].name) &&
                   strstr(pt_errmsg(), "valid: fp32, bf16"),
               "%s: building a table for it fails: %s", backends[b].name, pt_errmsg());
    return tap_done();
}
