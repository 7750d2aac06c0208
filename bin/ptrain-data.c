/* ptrain-data: prepare token shards from text with the GPT-2 BPE tokenizer,
 * encode/decode text, and describe shards.  See man/ptrain-data.1.
 *
 * Exit status: 0 success; 2 bad command line, missing/unreadable file or bad
 * input value; 1 any other failure (malformed file, out of memory); 4
 * (PT_SHARD_CHANGED_EXIT, from lib/data/shard.c's SIGBUS handler) a shard
 * truncated while info read it. */
#define _GNU_SOURCE
#include "config.h"
#include "bin/tool_util.h"
#include "core/core.h"
#include "core/file.h"
#include "data/bpe.h"
#include "data/corpus.h"
#include "data/prepare.h"
#include "data/shard.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const tool_name = "ptrain-data";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ptrain-data COMMAND [OPTIONS] [ARGS]\n"
            "  prepare --vocab-dir DIR --out OUTDIR [--val-fraction F | --val-file PATH...]\n"
            "          [--format auto|text|jsonl] [--jsonl-field NAME] [--threads N]\n"
            "          [--shard-tokens N] [--memory SIZE] [--in-memory] INPUT...\n"
            "          tokenize the documents of every INPUT (a text file, a JSON Lines file\n"
            "          (*.jsonl: the string field NAME, default text, of each line), a directory\n"
            "          of them, or - for standard input) with <|endoftext|> before each document\n"
            "          into OUTDIR/train.bin and OUTDIR/val.bin, or with --shard-tokens N into\n"
            "          shards of N tokens (OUTDIR/train_000000.bin ...), listed in OUTDIR/index.json.\n"
            "          Validation: the last fraction F of the documents (default 0.02; of the\n"
            "          tokens when there is one document), or the documents of --val-file PATH\n"
            "          (repeatable).  The corpus is streamed: --memory SIZE (default 1G) bounds\n"
            "          the text and ids in flight; --in-memory holds it all, as before\n"
            "  encode  --vocab-dir DIR [FILE|-]   print token ids, one per line\n"
            "  decode  --vocab-dir DIR [FILE|-]   turn token ids (white-space separated) into text\n"
            "  info    [--vocab N] [FORMAT:]PATH  validate and describe a token file (ptrain shard,\n"
            "          llm.c shard, or with nanogpt: a nanoGPT .bin of N ids) or a data set directory\n"
            "  export  [--format llmc] [--vocab N] [--shard-tokens N] [FORMAT:]SRC DST\n"
            "          write llm.c token files: a file from a token file, or from a data set\n"
            "          directory DST/ptrain_train_000000.bin ... and DST/ptrain_val_000000.bin ...\n"
            "          of N tokens each (default 100000000)\n"
            "DIR holds GPT-2's encoder.json and vocab.bpe, or Hugging Face's vocab.json and\n"
            "merges.txt (scripts/get-tokenizer.sh prints one); --vocab-dir defaults to\n"
            "$PTRAIN_BPE_DIR.  FORMAT: ptrain, llmc or nanogpt (ptrain and llm.c files are\n"
            "recognised by their magic).  --help, --version: this text; the version.\n");
}

/* 0 when everything printed reached standard output, else 1 with one line
 * (a full disk, a closed pipe: the output would be silently incomplete) */
static int stdout_status(const char *sub)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
    return tool_die(1, "%s: cannot write standard output%s%s", sub, errno ? ": " : "", errno ? strerror(errno) : "");
}

/* Exit status for a library error: bad input or unreadable file -> 2. */
static int lib_status(int rc) { return (rc == PT_EINVAL || rc == PT_EIO) ? 2 : 1; }

/* the subcommands' options */
enum {
    O_VOCAB_DIR = 1 << 0, O_OUT = 1 << 1, O_VAL_FRACTION = 1 << 2, O_VAL_FILE = 1 << 3, O_FORMAT = 1 << 4,
    O_JSONL_FIELD = 1 << 5, O_THREADS = 1 << 6, O_SHARD_TOKENS = 1 << 7, O_MEMORY = 1 << 8, O_IN_MEMORY = 1 << 9,
    O_VOCAB = 1 << 10,
};

struct opts {
    const char *vocab_dir;
    const char *out;
    double val_fraction;
    int val_fraction_set;
    const char *val_files[64];
    int nval_files;
    pt_corpus_format format;
    const char *out_format; /* export --format */
    const char *field;
    long threads;
    long long shard_tokens; /* 0: not given */
    unsigned long long memory;
    int in_memory;
    long vocab;             /* --vocab (nanoGPT files); 0: not given */
    int nargs;
    char **args;
};

/* "1048576", "64K", "512M", "2G", "1T" (binary multiples) in [lo, hi] bytes */
static int parse_size(const char *what, const char *s, unsigned long long lo, unsigned long long hi,
                      unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    int shift = 0;
    if (end != s && *end && !end[1]) {
        const char *u = strchr("KMGT", *end == 'k' ? 'K' : *end);
        if (u) shift = 10 * (int)(u - "KMGT" + 1), end++;
    }
    if (end == s || *end || errno || *s == '-' || (shift && v > (ULLONG_MAX >> shift)) || (v << shift) < lo ||
        (v << shift) > hi)
        return pt_fail(PT_EINVAL, "%s '%s' is not a size in [%lluM, %lluG] (bytes, or with K, M, G or T)", what, s,
                       lo >> 20, hi >> 30);
    *out = v << shift;
    return PT_OK;
}

/* Parse the options of subcommand `sub` (argv[0] is the subcommand), those
 * in `allowed`.  Returns -1 on success, else the exit status. */
static int parse(int argc, char **argv, const char *sub, unsigned allowed, struct opts *o)
{
    static const struct option lo[] = {
        { "vocab-dir", required_argument, 0, 'v' },
        { "out", required_argument, 0, 'o' },
        { "val-fraction", required_argument, 0, 'f' },
        { "val-file", required_argument, 0, 'V' },
        { "format", required_argument, 0, 'F' },
        { "jsonl-field", required_argument, 0, 'J' },
        { "threads", required_argument, 0, 'T' },
        { "shard-tokens", required_argument, 0, 'S' },
        { "memory", required_argument, 0, 'M' },
        { "in-memory", no_argument, 0, 'I' },
        { "vocab", required_argument, 0, 'N' },
        { "help", no_argument, 0, 'h' },
        { "version", no_argument, 0, 'R' },
        { 0, 0, 0, 0 },
    };
    static const struct { int c; unsigned bit; const char *text; } names[] = {
        { 'v', O_VOCAB_DIR, "--vocab-dir DIR" }, { 'o', O_OUT, "--out OUTDIR" },
        { 'f', O_VAL_FRACTION, "--val-fraction F" }, { 'V', O_VAL_FILE, "--val-file PATH" },
        { 'F', O_FORMAT, "--format FORMAT" }, { 'J', O_JSONL_FIELD, "--jsonl-field NAME" },
        { 'T', O_THREADS, "--threads N" }, { 'S', O_SHARD_TOKENS, "--shard-tokens N" },
        { 'M', O_MEMORY, "--memory SIZE" }, { 'I', O_IN_MEMORY, "--in-memory" }, { 'N', O_VOCAB, "--vocab N" },
    };
    char valid[512] = "";
    size_t vl = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (allowed & names[i].bit) vl += (size_t)snprintf(valid + vl, sizeof valid - vl, "%s, ", names[i].text);
    snprintf(valid + vl, sizeof valid - vl, "--help");
    memset(o, 0, sizeof *o);
    o->vocab_dir = tool_bpe_dir_env();
    o->val_fraction = 0.02;
    o->memory = 1ULL << 30;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
            if (names[i].c == c && !(allowed & names[i].bit))
                return tool_die(2, "%s: option '%s' is not valid for '%s' (valid here: %s)", sub, argv[optind - 1], sub,
                                valid);
        long v;
        switch (c) {
        case 'v':
            o->vocab_dir = optarg;
            break;
        case 'o':
            o->out = optarg;
            break;
        case 'V':
            if (o->nval_files == (int)(sizeof o->val_files / sizeof o->val_files[0]))
                return tool_die(2, "%s: more than %d --val-file options", sub, o->nval_files);
            o->val_files[o->nval_files++] = optarg;
            break;
        case 'F':
            if (!strcmp(sub, "export")) {
                if (strcmp(optarg, "llmc")) return tool_die(2, "%s: --format '%s' is not one of llmc", sub, optarg);
                o->out_format = optarg;
            } else if (!strcmp(optarg, "auto")) o->format = PT_CORPUS_AUTO;
            else if (!strcmp(optarg, "text")) o->format = PT_CORPUS_TEXT;
            else if (!strcmp(optarg, "jsonl")) o->format = PT_CORPUS_JSONL;
            else return tool_die(2, "%s: --format '%s' is not one of auto, text, jsonl", sub, optarg);
            break;
        case 'J':
            if (!*optarg) return tool_die(2, "%s: --jsonl-field needs a field name", sub);
            o->field = optarg;
            break;
        case 'T':
            if (pt_parse_int("--threads", optarg, 1, 1024, &v)) return tool_die(2, "%s: %s", sub, pt_errmsg());
            o->threads = v;
            break;
        case 'S':
            if (pt_parse_int("--shard-tokens", optarg, 1, LONG_MAX, &v)) return tool_die(2, "%s: %s", sub, pt_errmsg());
            o->shard_tokens = v;
            break;
        case 'M':
            if (parse_size("--memory", optarg, 16ULL << 20, 1ULL << 40, &o->memory))
                return tool_die(2, "%s: %s", sub, pt_errmsg());
            break;
        case 'I':
            o->in_memory = 1;
            break;
        case 'N':
            if (pt_parse_int("--vocab", optarg, 1, 65536, &v)) return tool_die(2, "%s: %s", sub, pt_errmsg());
            o->vocab = v;
            break;
        case 'f': {
            char *end;
            errno = 0;
            double f = strtod(optarg, &end);
            if (end == optarg || *end || errno || !isfinite(f) || f < 0 || f >= 1)
                return tool_die(2, "%s: --val-fraction '%s' is not a number in [0, 1)", sub, optarg);
            o->val_fraction = f;
            o->val_fraction_set = 1;
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        case 'R':
            return tool_version();
        case ':':
            return tool_die(2, "%s: option '%s' needs a value", sub, argv[optind - 1]);
        default:
            return tool_die(2, "%s: unknown option '%s' (valid: %s)", sub, argv[optind - 1], valid);
        }
    }
    o->nargs = argc - optind;
    o->args = argv + optind;
    return -1;
}

static int load_bpe(const char *sub, const struct opts *o, pt_bpe **t)
{
    if (!o->vocab_dir)
        return tool_die(2, "%s: no vocabulary: give --vocab-dir DIR or set PTRAIN_BPE_DIR (scripts/get-tokenizer.sh prints it)",
                   sub);
    struct stat sb;
    if (stat(o->vocab_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return tool_die(2, "%s: --vocab-dir '%s' is not a directory", sub, o->vocab_dir);
    int rc = pt_bpe_load(t, o->vocab_dir);
    if (rc) return tool_die(lib_status(rc), "%s: %s", sub, pt_errmsg());
    return -1;
}

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

static int cmd_prepare(int argc, char **argv)
{
    struct opts o;
    int st = parse(argc, argv, "prepare",
                   O_VOCAB_DIR | O_OUT | O_VAL_FRACTION | O_VAL_FILE | O_FORMAT | O_JSONL_FIELD | O_THREADS |
                       O_SHARD_TOKENS | O_MEMORY | O_IN_MEMORY, &o);
    if (st >= 0) return st;
    if (!o.out) return tool_die(2, "prepare: --out OUTDIR is required");
    if (o.nargs < 1) return tool_die(2, "prepare: no INPUT given (text or .jsonl files, directories, or - for standard input)");
    if (o.nval_files && o.val_fraction_set)
        return tool_die(2, "prepare: give either --val-fraction or --val-file, not both");
    if (!o.vocab_dir)
        return tool_die(2, "prepare: no vocabulary: give --vocab-dir DIR or set PTRAIN_BPE_DIR (scripts/get-tokenizer.sh prints it)");
    struct stat sb;
    if (stat(o.vocab_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return tool_die(2, "prepare: --vocab-dir '%s' is not a directory", o.vocab_dir);
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
    st = stdout_status("prepare");
out:
    pt_corpus_free(&train);
    pt_corpus_free(&val);
    return st;
}

/* The options and the one input (FILE, or - / none for standard input) of
 * encode and decode: its whole text in *text (the caller frees it), *len
 * bytes.  Returns -1 on success, else the exit status (the error printed). */
static int parse_input(int argc, char **argv, const char *sub, struct opts *o, char **text, size_t *len)
{
    int st = parse(argc, argv, sub, O_VOCAB_DIR, o);
    if (st >= 0) return st;
    if (o->nargs > 1) return tool_die(2, "%s: expected at most one FILE, got %d arguments", sub, o->nargs);
    int rc = pt_read_file(o->nargs ? o->args[0] : "-", text, len);
    if (rc) return tool_die(lib_status(rc), "%s: %s", sub, pt_errmsg());
    return -1;
}

static int cmd_encode(int argc, char **argv)
{
    struct opts o;
    char *text;
    size_t len;
    int rc, st = parse_input(argc, argv, "encode", &o, &text, &len);
    if (st >= 0) return st;
    pt_bpe *t = NULL;
    if ((st = load_bpe("encode", &o, &t)) >= 0) {
        free(text);
        return st;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    rc = pt_bpe_encode(t, text, len, &ids, &n);
    if (rc) {
        st = tool_die(lib_status(rc), "encode: %s", pt_errmsg());
    } else {
        for (size_t i = 0; i < n; i++) printf("%d\n", (int)ids[i]);
        st = stdout_status("encode");
    }
    free(ids);
    pt_bpe_free(t);
    free(text);
    return st;
}

static int cmd_decode(int argc, char **argv)
{
    struct opts o;
    char *text;
    size_t len;
    int rc, st = parse_input(argc, argv, "decode", &o, &text, &len);
    if (st >= 0) return st;
    const char *in = o.nargs ? o.args[0] : "-";
    /* parse white-space separated decimal ids */
    size_t cap = len / 2 + 1, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) {
        free(text);
        return tool_die(1, "decode: out of memory");
    }
    char *p = text, *stop = text + len;
    long line = 1;
    st = -1;
    while (p < stop) {
        if (*p == '\n') line++;
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
            p++;
            continue;
        }
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (*p == '\0') { /* a NUL byte must not end the list silently */
            st = tool_die(2, "decode: a NUL byte on line %ld of %s is not a token id (valid: white-space "
                     "separated non-negative integers)", line, in);
            break;
        }
        if (end == p || errno || v < 0 || v > INT32_MAX ||
            (*end && *end != ' ' && *end != '\t' && *end != '\n' && *end != '\r')) {
            size_t w = strcspn(p, " \t\r\n");
            st = tool_die(2, "decode: '%.*s' on line %ld of %s is not a token id (a non-negative integer)",
                     (int)(w > 40 ? 40 : w), p, line, in);
            break;
        }
        ids[n++] = (int32_t)v;
        p = end;
    }
    free(text);
    if (st >= 0) {
        free(ids);
        return st;
    }
    pt_bpe *t = NULL;
    if ((st = load_bpe("decode", &o, &t)) >= 0) {
        free(ids);
        return st;
    }
    char *out = NULL;
    size_t olen = 0;
    rc = pt_bpe_decode(t, ids, n, &out, &olen);
    if (rc) {
        st = tool_die(lib_status(rc), "decode: %s", pt_errmsg());
    } else {
        fwrite(out, 1, olen, stdout);
        st = stdout_status("decode");
    }
    free(out);
    free(ids);
    pt_bpe_free(t);
    return st;
}

/* one file's lines (info FILE) */
static void info_file(const pt_shard *s)
{
    printf("file             %s\n", s->path);
    printf("format           %s\n", pt_token_format_name(s->format));
    if (s->format == PT_TOKENS_PTRAIN) {
        printf("magic            %s\n", PT_SHARD_MAGIC);
        printf("version          %d\n", PT_SHARD_VERSION);
    } else if (s->format == PT_TOKENS_LLMC) {
        printf("magic            %d\n", PT_LLMC_TOKENS_MAGIC);
        printf("version          %d\n", PT_LLMC_TOKENS_VERSION);
    }
    printf("bytes_per_token  2\n");
    printf("ntokens          %llu\n", (unsigned long long)s->ntokens);
    printf("vocab_size       %u\n", s->vocab_size);
    printf("eot_id           %u\n", s->eot_id);
    printf("checksum         fnv1a64:%016llx (%s)\n", (unsigned long long)s->checksum,
           s->format == PT_TOKENS_PTRAIN ? "verified" : "of the payload, computed");
}

/* one split of a data set (info DIR): its stream and its files (the first 20) */
static void info_split(const char *name, const pt_shard *s)
{
    int n = s->nfiles > 1 ? s->nfiles : 1;
    printf("%-16s %llu tokens in %d file%s, vocab_size %u, eot_id %u, checksum fnv1a64:%016llx\n", name,
           (unsigned long long)s->ntokens, n, n == 1 ? "" : "s", s->vocab_size, s->eot_id,
           (unsigned long long)s->checksum);
    for (int k = 0; k < n && k < 20; k++) {
        const pt_shard *f = s->nfiles > 1 ? &s->files[k] : s;
        printf("  %s  %llu tokens  fnv1a64:%016llx\n", f->path, (unsigned long long)f->ntokens,
               (unsigned long long)f->checksum);
    }
    if (n > 20) printf("  ... and %d more files\n", n - 20);
}

static int cmd_info(int argc, char **argv)
{
    struct opts o;
    int st = parse(argc, argv, "info", O_VOCAB, &o);
    if (st >= 0) return st;
    if (o.nargs != 1) return tool_die(2, "info: expected one token file or data set directory, got %d arguments", o.nargs);
    int fmt;
    const char *path;
    pt_token_format_parse(o.args[0], &fmt, &path);
    if (fmt == PT_TOKENS_NANOGPT && !o.vocab)
        return tool_die(2, "info: nanoGPT's .bin files do not record their vocabulary: give --vocab N (the largest id + 1)");
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        pt_shard tr, va;
        int rc = pt_dataset_open(o.args[0], (uint32_t)o.vocab, &tr, &va);
        if (rc) return tool_die(lib_status(rc), "info: %s", pt_errmsg());
        printf("data set         %s\n", path);
        printf("format           %s\n", pt_token_format_name(tr.format));
        if (tr.set_id) printf("set_id           %016llx\n", (unsigned long long)tr.set_id);
        info_split("train", &tr);
        info_split("val", &va);
        pt_shard_close(&tr);
        pt_shard_close(&va);
        return stdout_status("info");
    }
    pt_shard s;
    int rc = pt_tokens_open(&s, path, fmt, (uint32_t)o.vocab);
    if (rc) return tool_die(lib_status(rc), "info: %s", pt_errmsg());
    info_file(&s);
    pt_shard_close(&s);
    return stdout_status("info");
}

/* export: llm.c token files from a token file or a data set */
static int cmd_export(int argc, char **argv)
{
    struct opts o;
    int st = parse(argc, argv, "export", O_FORMAT | O_VOCAB | O_SHARD_TOKENS, &o);
    if (st >= 0) return st;
    if (o.nargs != 2) return tool_die(2, "export: expected SRC and DST, got %d arguments", o.nargs);
    const char *src = o.args[0], *dst = o.args[1];
    if (strlen(dst) > 4000) return tool_die(2, "export: DST name of %zu bytes is too long (at most 4000)", strlen(dst));
    int fmt;
    const char *path;
    pt_token_format_parse(src, &fmt, &path);
    if (fmt == PT_TOKENS_NANOGPT && !o.vocab)
        return tool_die(2, "export: nanoGPT's .bin files do not record their vocabulary: give --vocab N (the largest id + 1)");
    struct stat sb;
    const int set = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    const uint64_t per = o.shard_tokens ? (uint64_t)o.shard_tokens : 100000000ULL; /* llm.c's fineweb.py shard_size */
    pt_shard sp[2];
    memset(sp, 0, sizeof sp);
    int rc = set ? pt_dataset_open(src, (uint32_t)o.vocab, &sp[0], &sp[1]) : pt_tokens_open(&sp[0], path, fmt, (uint32_t)o.vocab);
    if (rc) return tool_die(lib_status(rc), "export: %s", pt_errmsg());
    /* the files: one, or ceil(n / per) (at least one) per split */
    uint64_t nf[2] = { 1, 0 };
    if (set)
        for (int k = 0; k < 2; k++) nf[k] = sp[k].ntokens ? (sp[k].ntokens + per - 1) / per : 1;
    const uint64_t total = nf[0] + nf[1];
    pt_atomic_file *files = NULL;
    int opened = 0;
    st = -1;
    if (set && total > 100000) {
        st = tool_die(2, "export: %llu files of --shard-tokens %llu: give a larger --shard-tokens",
                      (unsigned long long)total, (unsigned long long)per);
        goto out;
    }
    if (!set && sp[0].ntokens > INT32_MAX) {
        st = tool_die(2, "export: %s holds %llu tokens, more than an llm.c token file holds (2^31 - 1): export a data "
                         "set directory, which is cut into files of --shard-tokens", src,
                      (unsigned long long)sp[0].ntokens);
        goto out;
    }
    if (set && per > INT32_MAX) {
        st = tool_die(2, "export: --shard-tokens %llu is more than an llm.c token file holds (2^31 - 1)",
                      (unsigned long long)per);
        goto out;
    }
    if (set && mkdir(dst, 0755) != 0 && errno != EEXIST) {
        st = tool_die(2, "export: cannot create directory %s: %s", dst, strerror(errno));
        goto out;
    }
    struct rlimit rl; /* every file stays open until all are written */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && total + 32 > rl.rlim_cur) {
        st = tool_die(2, "export: %llu files would be open at once, more than this process may hold (ulimit -n %llu): "
                         "give a larger --shard-tokens", (unsigned long long)total, (unsigned long long)rl.rlim_cur);
        goto out;
    }
    files = calloc((size_t)total, sizeof *files);
    if (!files) {
        st = tool_die(1, "export: out of memory");
        goto out;
    }
    static const char *const word[2] = { "train", "val" };
    for (int k = 0; k < 2 && st < 0; k++)
        for (uint64_t i = 0; i < nf[k] && st < 0; i++) {
            char name[4200];
            if (set) snprintf(name, sizeof name, "%s/ptrain_%s_%06llu.bin", dst, word[k], (unsigned long long)i);
            else snprintf(name, sizeof name, "%s", dst);
            uint64_t off = i * per, n = set ? (sp[k].ntokens - off < per ? sp[k].ntokens - off : per) : sp[0].ntokens;
            if (set && !sp[k].ntokens) n = 0;
            if ((rc = pt_atomic_open(&files[opened], name))) {
                st = tool_die(2, "export: %s", pt_errmsg());
                break;
            }
            opened++;
            if ((rc = pt_llmc_write(files[opened - 1].fd, name, &sp[k], off, n))) st = tool_die(lib_status(rc), "export: %s", pt_errmsg());
        }
    if (st < 0 && (rc = pt_atomic_commit(files, opened))) st = tool_die(1, "export: %s", pt_errmsg());
    else if (st >= 0)
        for (int i = 0; i < opened; i++) pt_atomic_abort(&files[i]);
    if (st < 0) {
        if (set)
            printf("export: %s (%s, %llu + %llu tokens) -> %s/ptrain_train_*.bin (%llu file%s) and ptrain_val_*.bin "
                   "(%llu file%s), llm.c token files version %d\n", path, pt_token_format_name(sp[0].format),
                   (unsigned long long)sp[0].ntokens, (unsigned long long)sp[1].ntokens, dst,
                   (unsigned long long)nf[0], nf[0] == 1 ? "" : "s", (unsigned long long)nf[1], nf[1] == 1 ? "" : "s",
                   PT_LLMC_TOKENS_VERSION);
        else
            printf("export: %s (%s, %llu tokens) -> %s (llm.c token file version %d)\n", path,
                   pt_token_format_name(sp[0].format), (unsigned long long)sp[0].ntokens, dst, PT_LLMC_TOKENS_VERSION);
        st = stdout_status("export");
    }
out:
    free(files);
    pt_shard_close(&sp[0]);
    pt_shard_close(&sp[1]);
    return st;
}

/* A process writing many shards holds each open until its set is complete:
 * the soft limit on open files raised to the hard one. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *c = argv[1];
    if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(c, "--version") || !strcmp(c, "-V")) {
        return tool_version();
    }
    if (!strcmp(c, "prepare")) {
        raise_nofile();
        return cmd_prepare(argc - 1, argv + 1);
    }
    if (!strcmp(c, "encode")) return cmd_encode(argc - 1, argv + 1);
    if (!strcmp(c, "decode")) return cmd_decode(argc - 1, argv + 1);
    if (!strcmp(c, "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(c, "export")) {
        raise_nofile();
        return cmd_export(argc - 1, argv + 1);
    }
    return tool_die(2, "unknown command '%s' (valid: prepare, encode, decode, info, export, --help, --version)", c);
}
