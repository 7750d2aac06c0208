/* SPDX-License-Identifier: MIT */
/* ptrain-run's set-up: what every rank resolves alone before the first
 * collective -- model config, plan (defaults < PTRAIN_* < flags, or
 * planned here under --mode auto), data, memory (bin/run/run.h).  Nothing
 * here communicates; a failure returns one line, and the start-up
 * agreement makes every rank leave with status 2.  The plan is resolved
 * in plan.c, the memory checked in memory.c; this file drives them and
 * opens the data. */
#define _GNU_SOURCE
#include "run.h"
#include "backend/blas.h"
#include "backend/gemm_bf16.h"
#include "ckpt/ckpt.h"
#include "core/file.h"
#include "plan/cost.h"
#include "plan/planner.h"
#include "plan/resolve.h"
#include "topo/topo.h"
#include "topo/topo_plan.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* In-memory random shard for tests and benchmarks (--data synthetic[:SEED]). */
static uint16_t *synthetic_shard(pt_shard *s, const char *spec, int vocab, long ntok)
{
    long seed = 1;
    const char *colon = strchr(spec, ':');
    if (colon && pt_parse_int("--data synthetic:SEED", colon + 1, 0, 0x7fffffffL, &seed)) {
        return NULL;
    }
    uint16_t *t = malloc(sizeof(uint16_t) * (size_t)ntok);
    if (!t) {
        pt_fail(PT_ENOMEM, "synthetic data: out of memory");
        return NULL;
    }
    pt_rng r;
    pt_rng_seed(&r, (uint64_t)seed, 7);
    for (long i = 0; i < ntok; i++) t[i] = (uint16_t)(pt_rng_u64(&r) % (uint64_t)vocab);
    memset(s, 0, sizeof *s);
    s->tokens = t;
    s->ntokens = (uint64_t)ntok;
    s->vocab_size = (uint32_t)vocab;
    s->eot_id = (uint32_t)(vocab - 1);
    return t;
}

/* Divisors of n in [1, cap] as "1, 2, 4" into buf. */
static void divisors_text(int n, int cap, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int d = 1; d <= n && d <= cap && off < len; d++)
        if (n % d == 0) off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? ", " : "", d);
}

/* The model of the checkpoint --resume names (DIR, a save directory's
 * latest, or --resume auto's save_dir/latest): 1 and *m, path; 0 when
 * there is none or it cannot be read (pt_ckpt_resume reports that). */
static int resume_model(const run_opts *o, pt_model_shape *m, char *path, size_t n)
{
    const char *dir = !strcmp(o->resume, "auto") ? o->save_dir : o->resume;
    if (!dir || strlen(dir) > 4000) return 0;
    char p[4300];
    snprintf(p, sizeof p, "%s/manifest.json", dir);
    if (access(p, F_OK) == 0 && strcmp(o->resume, "auto")) snprintf(path, n, "%s", dir);
    else {
        char *txt = NULL, name[16];
        size_t len;
        long step;
        snprintf(p, sizeof p, "%s/latest", dir);
        pt_errsave es;
        pt_error_save(&es);
        const int ok = access(p, F_OK) == 0 && !pt_read_regular(p, "checkpoint pointer", &txt, &len) &&
                       pt_ckpt_pointer_parse(txt, len, name, &step);
        free(txt);
        pt_error_restore(&es);
        if (!ok) return 0;
        snprintf(path, n, "%s/%s", dir, name);
    }
    json_t *man = NULL;
    pt_errsave es;
    pt_error_save(&es);
    int rc = pt_ckpt_manifest_read(path, &man);
    if (!rc) rc = pt_ckpt_model_shape(json_object_get(man, "model"), m);
    json_decref(man);
    pt_error_restore(&es);
    return rc == PT_OK;
}

int run_setup_rank(int argc, char **argv, int world, const run_nodes *nodes, run_setup *s)
{
    memset(s, 0, sizeof *s);
    run_opts *o = &s->o;
    if (run_parse_args(argc, argv, o) < 0) return -1;
    pt_gpt_config *cfg = &s->cfg;
    /* a preset name or L,H,C,T,V (lib/contract/model.c's names, shared with the plugin) */
    if (pt_model_shape_parse(o->model_what, o->model, cfg) < 0) return PT_EINVAL;
    /* --resume: the checkpoint's model, unless --model (or PTRAIN_MODEL) names one, which must be it */
    pt_model_shape ck;
    char ckpath[4200];
    const int have_ck = o->resume ? resume_model(o, &ck, ckpath, sizeof ckpath) : 0;
    if (have_ck && !o->model_given) {
        *cfg = ck;
        pt_model_shape_format(&ck, o->model_ckpt, sizeof o->model_ckpt);
        o->model = o->model_ckpt;
        o->model_what = "--resume's checkpoint";
    }
    if (o->layers) cfg->n_layer = o->layers;
    if (o->heads) cfg->n_head = o->heads;
    if (o->embd) cfg->n_embd = o->embd;
    if (o->seq_len) cfg->seq_len = o->seq_len;
    if (o->vocab) cfg->vocab = o->vocab;
    if (cfg->n_head < 1 || cfg->n_embd % cfg->n_head) {
        char valid[256];
        divisors_text(cfg->n_embd, 4096, valid, sizeof valid);
        return pt_fail(PT_EINVAL, "--heads %d does not divide the embedding width %d (valid --heads for --embd %d: %s)",
                  cfg->n_head, cfg->n_embd, cfg->n_embd, valid);
    }
    if (have_ck && (strcmp(o->resume, "auto") || !o->model_given)) { /* auto with --model: a mismatch falls back */
        pt_model_shape a = ck, b = *cfg;
        pt_model_shape_normalise(&a);
        pt_model_shape_normalise(&b);
        if (memcmp(&a, &b, sizeof a)) {
            char sa[160], sb[160];
            pt_model_shape_format(&ck, sa, sizeof sa);
            pt_model_shape_format(cfg, sb, sizeof sb);
            return pt_fail(PT_EINVAL, "--resume %s: checkpoint %s holds model %s (L=%d H=%d C=%d T=%d V=%d), %s gives %s "
                           "(L=%d H=%d C=%d T=%d V=%d) (valid: no --model, or --model %s)", o->resume, ckpath, sa,
                           ck.n_layer, ck.n_head, ck.n_embd, ck.seq_len, ck.vocab,
                           o->model_given ? o->model_what : "the size flags", sb, cfg->n_layer, cfg->n_head, cfg->n_embd,
                           cfg->seq_len, cfg->vocab, sa);
        }
    }

    pt_plan *plan = &s->plan;
    if (run_resolve_plan(o, cfg, world, nodes, plan, &s->source, &s->aut) < 0) return -1;
    {   /* the model and batch the plugin's plan was made for (PTRAIN_MODEL,
         * PTRAIN_BATCH beside its PTRAIN_PLAN), for the start-up agreement */
        const char *pp = getenv("PTRAIN_PLAN"), *em = getenv("PTRAIN_MODEL"), *eb = getenv("PTRAIN_BATCH");
        char *end = NULL;
        if (pp && !s->aut.on && em && *em && eb && *eb &&
            pt_model_shape_parse("PTRAIN_MODEL", em, &s->plan_model) == 0) {
            s->plan_batch = strtol(eb, &end, 10);
            if (end && !*end && s->plan_batch > 0) {
                s->planned_for = 1;
                snprintf(s->plan_model_text, sizeof s->plan_model_text, "%.63s", em);
            }
        }
    }
    if (plan->mode == PT_MODE_1D && pt_gpt_check_tp(cfg, plan->tp)) {
        /* the 1d sizes that divide both the world and the heads: the mode
         * table's list over their greatest common divisor (1 always fits) */
        int g = world, h = cfg->n_head;
        while (h) {
            int t = g % h;
            g = h;
            h = t;
        }
        char valid[256];
        pt_plan_list_tp(PT_MODE_1D, 1, g, world, valid, sizeof valid);
        return pt_fail(PT_EINVAL, "%s; with %d ranks use --tp one of: %s", pt_errmsg(), world, valid);
    }
    if (o->batch % plan->dp)
        return pt_fail(PT_EINVAL, "--batch %ld is not a multiple of dp=%d (each data-parallel rank takes batch/dp sequences); try --batch %ld",
                  o->batch, plan->dp, (o->batch / plan->dp + 1) * plan->dp);
    {
        /* stages against the layers, the split's sum, microbatches against batch/dp */
        if (pt_plan_check_model(plan, cfg->n_layer, (int)(o->batch / plan->dp)) < 0)
            return pt_fail(PT_EINVAL, "%s (--batch %ld, dp=%d, --layers %d)", pt_errmsg(), o->batch, plan->dp, cfg->n_layer);
    }
    if (o->warmup < 0) o->warmup = o->steps / 10 < 100 ? o->steps / 10 : 100;
    if (o->min_lr < 0) o->min_lr = o->lr / 10;
    /* PTRAIN_MAX_CPU_ISA: a value that is not a level stops the run here */
    if (pt_kernel_isa_check() != PT_OK) return -1;
    if (o->dry_run) return 0;
    /* where to train: before the memory check, which is the host's */
    if (run_resolve_device(o, &s->device, s->device_note, sizeof s->device_note) < 0) return -1;
    /* the precision's choices on that backend now (the CPU's bf16 GEMM:
     * PTRAIN_BF16_GEMM or the ISA rule), so a bad or unavailable choice is
     * one start-up line, not an abort at the first matmul */
    const pt_backend *be = s->device == RUN_DEVICE_CUDA ? &pt_cuda_backend : &pt_cpu_backend;
    if (be->prepare(pt_prec_policy_for(plan->precision == PT_PREC_BF16 ? PT_BF16 : PT_F32)) != PT_OK)
        return pt_fail(PT_EINVAL, "--precision %s: %s", plan->precision == PT_PREC_BF16 ? "bf16" : "fp32", pt_errmsg());
    /* the MFU's peak: given, else the rate the planner prices one rank's
     * GEMMs at (the node model: a GPU's data-sheet peak, a CPU's measured
     * or estimated sgemm rate times its cores), so every train record has
     * an MFU and the header says against what */
    if (o->peak_gflops > 0) {
        snprintf(s->peak_source, sizeof s->peak_source, "%s", o->peak_what ? o->peak_what : "given");
    } else {
        pt_hw hw;
        int island = 0;
        char src[300];
        memset(&hw, 0, sizeof hw);
        /* in the run's precision: a bf16 run against the bf16 GEMM rate */
        const double rate = run_node_hw(o, nodes, &hw, &island, src, sizeof src) == 0
                                ? pt_hw_gemm_gflops(&hw, (int)s->plan.precision) : 0;
        if (rate > 0) {
            o->peak_gflops = rate;
            snprintf(s->peak_source, sizeof s->peak_source, "the node model's %s GEMM rate per rank (%.300s)",
                     s->plan.precision == PT_PREC_BF16 && hw.gemm_gflops_bf16 > 0 ? "bf16" : "fp32", src);
        }
    }
    if (run_check_memory(s, world, nodes) < 0) return -1;
    /* energy: the plan and profile files against this plan (bin/run/energy.c) */
    if (run_energy_setup(s, nodes) < 0) return -1;

    /* --save-dir (lib/ckpt): usable now rather than at the first save
     * (every rank writes its rank file there: each creates it when absent
     * and writes and removes a probe file), and this job's alone for the
     * run (rank 0 holds its lock; the descriptor stays open until exit) */
    if (o->save_dir) {
        static int save_lock = -1;
        if (pt_ckpt_dir_check(o->save_dir)) return pt_fail(PT_EINVAL, "--save-dir: %s", pt_errmsg());
        int rc = run_rank == 0 ? pt_ckpt_dir_lock(o->save_dir, getenv("SLURM_JOB_ID"), &save_lock) : PT_OK;
        if (rc == PT_EUNSUPP) fprintf(stderr, "ptrain-run: warning: %s\n", pt_errmsg());
        else if (rc) return pt_fail(PT_EINVAL, "--save-dir: %s", pt_errmsg());
    }

    /* data: opened here, so that a rank that cannot read it fails in the
     * start-up agreement and the data's identity is agreed on */
    const int T = cfg->seq_len;
    if (!o->data) return pt_fail(PT_EINVAL, "--data is required: a directory made by 'ptrain-data prepare', llm.c shards, nanogpt:DIR or 'synthetic'");
    if (strncmp(o->data, "synthetic", 9) == 0 && (o->data[9] == 0 || o->data[9] == ':')) {
        s->synth_train = synthetic_shard(&s->train, o->data, cfg->vocab, 1 << 20);
        if (!s->synth_train) return -1;
        s->synth_val = synthetic_shard(&s->val, o->data, cfg->vocab, 1 << 16);
        if (!s->synth_val) return -1;
        /* generated from (spec, vocab): their hash stands for the checksum */
        uint64_t h = pt_fnv1a64(o->data, strlen(o->data)) ^ (uint64_t)cfg->vocab;
        s->data_id[0] = s->train.ntokens;
        s->data_id[1] = h;
        s->data_id[2] = s->val.ntokens;
        s->data_id[3] = h + 1;
    } else {
        /* every format of lib/data (shard.h): ptrain-data prepare's set, llm.c
         * shards, nanogpt:DIR (ids checked against the model's vocabulary) */
        int rc = pt_dataset_open(o->data, (uint32_t)(cfg->vocab < 65536 ? cfg->vocab : 65536), &s->train, &s->val);
        if (rc) return pt_fail(PT_EINVAL, "data: %s", pt_errmsg());
        if (s->train.vocab_size > (uint32_t)cfg->vocab)
            return pt_fail(PT_EINVAL, "data vocabulary %u is larger than the model's %d (--vocab)", s->train.vocab_size, cfg->vocab);
        if (s->train.ntokens < (uint64_t)T + 2 || s->val.ntokens < (uint64_t)T + 2)
            return pt_fail(PT_EINVAL, "data in %s is too short for seq_len %d (train %llu, val %llu tokens)", o->data, T,
                      (unsigned long long)s->train.ntokens, (unsigned long long)s->val.ntokens);
        s->data_id[0] = s->train.ntokens;
        s->data_id[1] = s->train.checksum;
        s->data_id[2] = s->val.ntokens;
        s->data_id[3] = s->val.checksum;
    }
    return 0;
}

void run_setup_free(run_setup *s)
{
    run_energy_setup_free(s);
    if (s->synth_train || s->synth_val) {
        free(s->synth_train);
        free(s->synth_val);
    } else {
        pt_shard_close(&s->train);
        pt_shard_close(&s->val);
    }
    s->synth_train = s->synth_val = NULL;
}


void run_precision_line(int precision, int device, char *buf, size_t n)
{
    if (precision != PT_PREC_BF16) {
        snprintf(buf, n, "fp32 (activations, weights, gradients and AdamW state)");
        return;
    }
    const int k = snprintf(buf, n, "bf16 (bf16 activations and the weight copies the GEMMs read; fp32 master weights, "
                                   "gradients and AdamW state)");
    if (device != RUN_DEVICE_CPU || k < 0 || (size_t)k >= n) return;
    const double f32 = pt_blas_sgemm_gflops(512, 3), b16 = pt_blas_bf16_gemm_gflops(512, 3);
    const int tiles = pt_gemm_bf16_impl() == PT_GEMM_BF16_SGEMM;
    char ratio[64] = "";
    if (f32 > 0 && b16 > 0) snprintf(ratio, sizeof ratio, ", %.2fx fp32 sgemm on one core (measured now)", b16 / f32);
    snprintf(buf + k, n - (size_t)k, "; bf16 GEMM %s on a %s CPU%s%s", pt_gemm_bf16_impl_name(pt_gemm_bf16_impl()),
             pt_bf16_isa() == PT_BF16_ISA_NONE ? "no-bf16" : pt_bf16_isa_name(pt_bf16_isa()), ratio,
             tiles ? ": it is fp32 sgemm on bf16 operands converted to fp32, so bf16 saves activation memory here, "
                     "not time (--precision fp32 trains faster)"
                   : "");
}
