/* SPDX-License-Identifier: MIT */
/* ptrain-ckpt sample: text from a checkpoint's model (ckpt_tool.h).
 *
 * Autoregressive sampling from the model of a checkpoint, on one process
 * (the checkpoint resharded to the full model, as convert does): for each
 * new token, the forward pass over the last min(n, T) tokens (the rest of
 * the T positions padded; attention is causal, so padding after position
 * n-1 does not change its logits), the logits row of the last real
 * position (pt_gpt_logits: the head keeps none, one GEMM row again), then
 * on the host:
 * top-k filtering (Fan et al. 2018, "Hierarchical Neural Story
 * Generation", sec. 5.4: keep the k largest logits; ties at the k-th value
 * broken by the lower id), softmax at temperature F (logits / F), and one
 * draw by inverse CDF over the kept ids in id order with a uniform number
 * from a seeded xorshift64* generator (as llm.c's sample_mult with its
 * random_f32), so a seed gives the same text on every machine with the
 * same floating-point results.  --top-k 1 is greedy decoding (argmax, the
 * lowest id among equal maxima). */
#define _GNU_SOURCE
#include "config.h"
#include "ckpt_tool.h"
#include "bin/tool_util.h"
#include "ckpt/ckpt.h"
#include "core/file.h"
#include "data/bpe.h"

#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1Dull;
}

typedef struct cand { float v; int id; } cand;
static int cand_cmp(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->v != y->v) return x->v < y->v ? 1 : -1;
    return x->id - y->id;
}

/* one id from logits [V] (host memory); scratch c [V] */
static int sample_one(const float *logits, int V, double temp, long top_k, uint64_t *rng, cand *c)
{
    int n = V;
    for (int i = 0; i < V; i++) c[i] = (cand){logits[i], i};
    if (top_k > 0 && top_k < V) {
        qsort(c, (size_t)V, sizeof *c, cand_cmp);
        n = (int)top_k;
        /* back to id order for the draw */
        for (int i = 1; i < n; i++)
            for (int j = i; j > 0 && c[j - 1].id > c[j].id; j--) {
                cand t = c[j]; c[j] = c[j - 1]; c[j - 1] = t;
            }
    }
    if (n == 1) return c[0].id;
    float mx = c[0].v;
    for (int i = 1; i < n; i++) if (c[i].v > mx) mx = c[i].v;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += exp(((double)c[i].v - mx) / temp);
    const double coin = (double)(rng_next(rng) >> 11) / 9007199254740992.0 * sum;
    double cdf = 0;
    for (int i = 0; i < n; i++) {
        cdf += exp(((double)c[i].v - mx) / temp);
        if (coin < cdf) return c[i].id;
    }
    return c[n - 1].id; /* rounding */
}

int ckpt_sample(const char *arg, const sample_opts *so)
{
    if (!so->vocab_dir) return tool_die(2, "sample: a tokenizer is needed: --tokenizer DIR|gpt2|llama3 or $PTRAIN_BPE_DIR (scripts/get-tokenizer.sh prints it)");
    pt_bpe *bpe = NULL;
    if (pt_bpe_load(&bpe, so->vocab_dir))
        return tool_die(2, "sample: the tokenizer (--tokenizer %s): %s", so->vocab_dir, pt_errmsg());
    char path[4200];
    json_t *man = NULL;
    pt_gpt_config cfg;
    int rc = ckpt_resolve(arg, path, sizeof path);
    if (!rc) rc = pt_ckpt_manifest_read(path, &man);
    if (!rc) rc = ckpt_manifest_config(man, &cfg);
    const double load = rc ? 0 : ckpt_load_bytes(man);
    json_decref(man);
    if (rc) {
        pt_bpe_free(bpe);
        return tool_die(2, "sample: %s", pt_errmsg());
    }
    int32_t *pids = NULL;
    size_t np = 0;
    if (pt_bpe_encode(bpe, so->prompt, strlen(so->prompt), &pids, &np)) {
        pt_bpe_free(bpe);
        return tool_die(2, "sample: --prompt: %s", pt_errmsg());
    }
    const int V = cfg.vocab, T = cfg.seq_len;
    const int eot = pt_bpe_eot(bpe);
    if (np == 0) { /* no prompt: start from the end-of-text id (GPT-2's <|endoftext|>, as GPT-2 and llm.c do) */
        free(pids);
        pids = malloc(sizeof *pids);
        if (!pids || eot < 0 || eot >= V) {
            free(pids);
            pt_bpe_free(bpe);
            return tool_die(2, "sample: an empty --prompt starts from the tokenizer's end-of-text id (%d), outside this model's vocabulary of %d", eot, V);
        }
        pids[0] = eot;
        np = 1;
    }
    for (size_t i = 0; i < np; i++)
        if (pids[i] >= V) {
            int bad = pids[i];
            free(pids);
            pt_bpe_free(bpe);
            return tool_die(2, "sample: the prompt's token %d (position %zu) is outside this model's vocabulary of %d ids", bad, i, V);
        }
    /* the model (activations of T tokens), the checkpoint's data, the
     * tokens and a logits row with its candidates: checked before any of
     * them is allocated, and before MPI starts */
    if ((rc = ckpt_holder_fits(&cfg, T, load + 12.0 * V + 4.0 * ((double)np + (double)so->tokens + 2.0 * T)))) {
        free(pids);
        pt_bpe_free(bpe);
        return tool_die(1, "sample: %s", pt_errmsg());
    }
    int status = 0;
    pt_atomic_file lf = {.fd = -1}; /* --logits: written atomically, never through a link (lib/core/file.h) */
    int have_lf = 0;
    holder h;
    memset(&h, 0, sizeof h);
    const size_t total = np + (size_t)so->tokens;
    int32_t *all = malloc(sizeof *all * total), *in = calloc((size_t)T, sizeof *in), *tg = calloc((size_t)T, sizeof *tg);
    float *row = malloc(sizeof *row * (size_t)V);
    cand *sc = malloc(sizeof *sc * (size_t)V);
    MPI_Init(NULL, NULL);
    if (!all || !in || !tg || !row || !sc) {
        status = tool_die(1, "sample: out of memory");
        goto out;
    }
    memcpy(all, pids, sizeof *all * np);
    pt_ckpt_meta meta;
    if ((rc = ckpt_holder_build(&h, &cfg, T)) || (rc = pt_ckpt_load(path, &h.tr, &h.plan, &cfg, &meta))) {
        status = tool_die(rc == PT_ENOMEM ? 1 : 2, "sample: %s", pt_errmsg());
        goto out;
    }
    if (so->logits_file) {
        if (pt_atomic_open(&lf, so->logits_file)) {
            status = tool_die(2, "sample: --logits %s: %s", so->logits_file, pt_errmsg());
            goto out;
        }
        have_lf = 1;
    }
    fprintf(stderr, "sample: %s (step %ld, L=%d H=%d C=%d T=%d V=%d): %zu prompt tokens + %ld, temperature %g, top-k %ld, seed %llu\n",
            path, meta.step, cfg.n_layer, cfg.n_head, cfg.n_embd, T, V, np, so->tokens, so->temperature, so->top_k,
            so->seed);
    uint64_t rng = so->seed * 0x9E3779B97F4A7C15ull + 0x6A09E667F3BCC909ull;
    if (!rng) rng = 1;
    size_t n = np;
    if (h.model.g.Vl > V) { /* the whole vocabulary on one process: padded to Vl (= V at tp 1) */
        float *wide = realloc(row, sizeof *row * (size_t)h.model.g.Vl);
        if (!wide) {
            status = tool_die(1, "sample: out of memory");
            goto out;
        }
        row = wide;
    }
    for (long s = 0; s < so->tokens; s++) {
        const size_t w = n < (size_t)T ? n : (size_t)T;
        memcpy(in, all + (n - w), sizeof *in * w);
        memset(in + w, 0, sizeof *in * ((size_t)T - w));
        float loss;
        if ((rc = pt_gpt_forward(&h.model, in, tg, &loss))) {
            status = tool_die(1, "sample: forward: %s", pt_errmsg());
            goto out;
        }
        if ((rc = pt_gpt_logits(&h.model, (int)w - 1, row))) { /* the head keeps no logits: this row's again */
            status = tool_die(1, "sample: logits: %s", pt_errmsg());
            goto out;
        }
        if (have_lf && pt_write_all(lf.fd, row, sizeof *row * (size_t)V)) {
            status = tool_die(1, "sample: --logits %s: write failed: %s", so->logits_file, strerror(errno));
            goto out;
        }
        all[n++] = sample_one(row, V, so->temperature, so->top_k, &rng, sc);
    }
    if (so->ids) {
        for (size_t i = np; i < n; i++) printf("%d\n", all[i]);
    } else {
        char *text = NULL;
        size_t len;
        if (pt_bpe_decode(bpe, all, n, &text, &len)) {
            status = tool_die(1, "sample: decode: %s", pt_errmsg());
            goto out;
        }
        fwrite(text, 1, len, stdout);
        putchar('\n');
        free(text);
    }
    if (have_lf) {
        have_lf = 0;
        if (pt_atomic_commit(&lf, 1)) status = tool_die(1, "sample: --logits %s: %s", so->logits_file, pt_errmsg());
    }
out:
    if (have_lf) pt_atomic_abort(&lf);
    ckpt_holder_free(&h);
    MPI_Finalize();
    free(all);
    free(in);
    free(tg);
    free(row);
    free(sc);
    free(pids);
    pt_bpe_free(bpe);
    return status;
}
