/* SPDX-License-Identifier: MIT */
/* ptrain-data prepare: token shards from text with a BPE tokenizer (GPT-2, Llama 3)
 * (data_tool.h). */
#define _GNU_SOURCE
#include "config.h"
#include "data_tool.h"
#include "bin/tool_util.h"
#include "core/file.h"
#include "data/bpe.h"
#include "data/corpus.h"
#include "data/prepare.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void fmt_duration(char *buf, size_t len, double sec)
{
    long s = sec > 0 && sec < 1e9 ? (long)(sec + 0.5) : 0;
    if (s >= 3600) snprintf(buf, len, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else if (s >= 60) snprintf(buf, len, "%ldm%02lds", s / 60, s % 60);
    else snprintf(buf, len, "%lds", s);
}

/* prepare's progress line on standard error, for inputs over 64 MiB (or of
 * unknown size once 64 MiB were read): done of total, speed, ETA */
static void progress_line(uint64_t done, uint64_t total, double dt)
{
    if (total ? total < ((uint64_t)64 << 20) : done < ((uint64_t)64 << 20)) return;
    double rate = dt > 0 ? (double)done / dt : 0;
    if (total) {
        char eta[32];
        fmt_duration(eta, sizeof eta, rate > 0 && total > done ? (double)(total - done) / rate : 0);
        fprintf(stderr, "%s: prepare: encoded %.0f of %.0f MiB (%.0f%%), %.1f MB/s, ETA %s\n", tool_name,
                done / 1048576.0, total / 1048576.0, 100.0 * (double)done / (double)total, rate / 1e6, eta);
    } else {
        fprintf(stderr, "%s: prepare: encoded %.0f MiB, %.1f MB/s\n", tool_name, done / 1048576.0, rate / 1e6);
    }
}

static void progress_stream(const pt_prepare_progress *p, void *arg)
{
    (void)arg;
    progress_line(p->done, p->total, p->seconds);
}

static void progress_memory(size_t done, size_t total, void *arg)
{
    progress_line(done, total, pt_now() - *(const double *)arg);
}

/* The directory entries passed over, on standard error: each with its
 * reason (the first 20; control characters in names shown as ?), then how
 * many in all */
static void put_shown(const char *s)
{
    for (; *s; s++) fputc((unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s, stderr);
}

static void report_skipped(const pt_corpus *c)
{
    enum { SHOW = 20 };
    for (int i = 0; i < c->nskipped && i < SHOW; i++) { /* a name with a newline stays on one line */
        fprintf(stderr, "%s: prepare: skipped ", tool_name);
        put_shown(c->skipped[i].path);
        fputs(": ", stderr);
        put_shown(c->skipped[i].why);
        fputc('\n', stderr);
    }
    if (c->nskipped > 1)
        fprintf(stderr, "%s: prepare: skipped %d entries of the input directories in all%s\n", tool_name, c->nskipped,
                c->nskipped > SHOW ? " (the first 20 listed)" : "");
}

/* Read (--in-memory) or list the inputs. */
static int add_inputs(pt_corpus *c, char *const *paths, int n, const struct opts *o)
{
    for (int i = 0; i < n; i++) {
        int rc = o->in_memory ? pt_corpus_add(c, paths[i], o->format, o->field) : pt_corpus_list(c, paths[i], o->format);
        if (rc) return tool_die(lib_status(rc), "prepare: %s", pt_errmsg());
    }
    report_skipped(c);
    return -1;
}

/* The former path: every source and every id in memory (pt_corpus_encode),
 * then the same split and set (pt_prepare_write). */
static int prepare_in_memory(const struct opts *o, const pt_prepare_cfg *cfg, pt_corpus *train, pt_corpus *val,
                             pt_prepare_result *res)
{
    if (train->ndocs == 0)
        return tool_die(2, "prepare: the inputs hold no document (empty files, or JSON Lines with empty '%s' fields)",
                        o->field ? o->field : "text");
    if (o->nval_files && val->ndocs == 0) return tool_die(2, "prepare: the --val-file inputs hold no document");
    int32_t *ids = NULL, *vids = NULL;
    size_t n = 0, nv = 0, *starts = malloc(sizeof *starts * ((size_t)train->ndocs + 1));
    if (!starts) return tool_die(1, "prepare: out of memory");
    double t0 = pt_now();
    pt_corpus_progress pr = progress_memory;
    int st = -1, rc = pt_corpus_encode(train, o->vocab_dir, cfg->threads, &ids, &n, starts, pr, &t0);
    if (!rc && o->nval_files) rc = pt_corpus_encode(val, o->vocab_dir, cfg->threads, &vids, &nv, NULL, pr, &t0);
    pt_bpe *t = NULL;
    if (!rc) rc = pt_bpe_load(&t, o->vocab_dir);
    if (!rc)
        rc = pt_prepare_write(cfg, (uint32_t)pt_bpe_vocab_size(t), (uint32_t)pt_bpe_eot(t), ids, n, starts,
                              train->ndocs, vids, nv, o->nval_files ? val->ndocs : 0, res);
    if (rc) st = tool_die(lib_status(rc), "prepare: %s", pt_errmsg());
    res->seconds = pt_now() - t0;
    res->bytes = train->bytes + val->bytes;
    pt_bpe_free(t);
    free(ids);
    free(vids);
    free(starts);
    return st;
}

int data_prepare(int argc, char **argv)
{
    struct opts o;
    int st = data_parse(argc, argv, "prepare",
                   O_VOCAB_DIR | O_OUT | O_VAL_FRACTION | O_VAL_FILE | O_FORMAT | O_JSONL_FIELD | O_THREADS |
                       O_SHARD_TOKENS | O_MEMORY | O_IN_MEMORY, &o);
    if (st >= 0) return st;
    if (!o.out) return tool_die(2, "prepare: --out OUTDIR is required");
    if (o.nargs < 1) return tool_die(2, "prepare: no INPUT given (text or .jsonl files, directories, or - for standard input)");
    if (o.nval_files && o.val_fraction_set)
        return tool_die(2, "prepare: give either --val-fraction or --val-file, not both");
    if ((st = data_check_tokenizer("prepare", &o)) >= 0) return st;
    struct stat sb;
    /* the outputs, checked before the long encoding: OUTDIR a directory
     * (or absent), OUTDIR/train.bin, val.bin and index.json absent or
     * regular files (never a link, FIFO or device: the writer refuses those
     * again, and every shard name when it opens and renames it) */
    if (stat(o.out, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return tool_die(2, "prepare: --out %s exists and is not a directory", o.out);
    static const char *const outs[] = { "train.bin", "val.bin", "index.json" };
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        char p[4200];
        if (strlen(o.out) > 4000) return tool_die(2, "prepare: --out name of %zu bytes is too long", strlen(o.out));
        snprintf(p, sizeof p, "%s/%s", o.out, outs[i]);
        if (pt_output_check(p)) return tool_die(2, "prepare: %s", pt_errmsg());
    }
    long threads = o.threads;
    if (!threads) {
        threads = sysconf(_SC_NPROCESSORS_ONLN);
        if (threads < 1) threads = 1;
        if (threads > 64) threads = 64;
    }
    pt_corpus train = {0}, val = {0};
    if ((st = add_inputs(&train, o.args, o.nargs, &o)) >= 0) goto out;
    if ((st = add_inputs(&val, (char *const *)o.val_files, o.nval_files, &o)) >= 0) goto out;
    if (mkdir(o.out, 0755) != 0 && errno != EEXIST) {
        st = tool_die(2, "prepare: cannot create output directory %s: %s", o.out, strerror(errno));
        goto out;
    }
    pt_prepare_cfg cfg = { .vocab_dir = o.vocab_dir, .out_dir = o.out, .field = o.field, .threads = (int)threads,
                           .memory = (size_t)o.memory, .shard_tokens = (uint64_t)o.shard_tokens,
                           .val_fraction = o.val_fraction, .progress = progress_stream };
    pt_prepare_result res;
    memset(&res, 0, sizeof res);
    if (o.in_memory) {
        if ((st = prepare_in_memory(&o, &cfg, &train, &val, &res)) >= 0) goto out;
    } else {
        int rc = pt_prepare(&cfg, &train, &val, &res);
        if (rc) {
            st = tool_die(lib_status(rc), "prepare: %s", pt_errmsg());
            goto out;
        }
    }
    const int nin = train.nsrc + val.nsrc;
    const long long docs = (long long)(res.docs[0] + res.docs[1]);
    const unsigned long long ntok = (unsigned long long)(res.tokens[0] + res.tokens[1]);
    const double dt = res.seconds;
    printf("%d input%s, %lld document%s, %llu bytes -> %llu tokens in %.3f s on %ld thread%s (%.0f tokens/s, %.2f MB/s)\n",
           nin, nin == 1 ? "" : "s", docs, docs == 1 ? "" : "s", (unsigned long long)res.bytes, ntok, dt, threads,
           threads == 1 ? "" : "s", dt > 0 ? (double)ntok / dt : 0.0, dt > 0 ? (double)res.bytes / dt / 1e6 : 0.0);
    char how[160];
    if (res.held == PT_HELD_FILES)
        snprintf(how, sizeof how, "%lld document%s of --val-file", (long long)res.docs[1], res.docs[1] == 1 ? "" : "s");
    else if (res.held == PT_HELD_DOCS)
        snprintf(how, sizeof how, "the last %lld of %lld documents", (long long)res.held_docs, (long long)res.docs[0]);
    else
        snprintf(how, sizeof how, "the last %.4g of the tokens of the one document", o.val_fraction);
    const long long tdocs = (long long)(res.docs[0] - (res.held == PT_HELD_DOCS ? res.held_docs : 0));
    char shards[2][48] = { "", "" };
    for (int k = 0; k < 2; k++)
        if (res.nfiles[k] > 1) snprintf(shards[k], sizeof shards[k], " in %d shards", res.nfiles[k]);
    printf("%s/%s: %llu tokens%s (%lld document%s)\n", o.out, res.names[0], (unsigned long long)res.tokens[0], shards[0],
           tdocs, tdocs == 1 ? "" : "s");
    printf("%s/%s: %llu tokens%s (held out: %s)\n", o.out, res.names[1], (unsigned long long)res.tokens[1], shards[1],
           how);
    st = data_stdout_status("prepare");
out:
    pt_corpus_free(&train);
    pt_corpus_free(&val);
    return st;
}
