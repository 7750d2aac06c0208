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
#include "data/shard.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const tool_name = "ptrain-data";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ptrain-data COMMAND [OPTIONS] [ARGS]\n"
            "  prepare --vocab-dir DIR --out OUTDIR [--val-fraction F | --val-file PATH...]\n"
            "          [--format auto|text|jsonl] [--jsonl-field NAME] [--threads N] INPUT...\n"
            "          tokenize the documents of every INPUT (a text file, a JSON Lines file\n"
            "          (*.jsonl: the string field NAME, default text, of each line), a directory\n"
            "          of them, or - for standard input) with <|endoftext|> before each document\n"
            "          into OUTDIR/train.bin and OUTDIR/val.bin.  Validation: the last fraction F\n"
            "          of the documents (default 0.02; of the tokens when there is one document),\n"
            "          or the documents of --val-file PATH (repeatable)\n"
            "  encode  --vocab-dir DIR [FILE|-]   print token ids, one per line\n"
            "  decode  --vocab-dir DIR [FILE|-]   turn token ids (white-space separated) into text\n"
            "  info    SHARD                      print a token shard's header (after validating it)\n"
            "DIR holds GPT-2's encoder.json and vocab.bpe (scripts/get-tokenizer.sh prints it);\n"
            "--vocab-dir defaults to $PTRAIN_BPE_DIR.  --help, --version: this text; the version.\n");
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

struct opts {
    const char *vocab_dir;
    const char *out;
    double val_fraction;
    int val_fraction_set;
    const char *val_files[64];
    int nval_files;
    pt_corpus_format format;
    const char *field;
    long threads;
    int nargs;
    char **args;
};

/* Parse the options of subcommand `sub` (argv[0] is the subcommand).
 * Returns -1 on success, else the exit status. */
static int parse(int argc, char **argv, const char *sub, int allow_prep, struct opts *o)
{
    static const struct option lo[] = {
        { "vocab-dir", required_argument, 0, 'v' },
        { "out", required_argument, 0, 'o' },
        { "val-fraction", required_argument, 0, 'f' },
        { "val-file", required_argument, 0, 'V' },
        { "format", required_argument, 0, 'F' },
        { "jsonl-field", required_argument, 0, 'J' },
        { "threads", required_argument, 0, 'T' },
        { "help", no_argument, 0, 'h' },
        { "version", no_argument, 0, 'R' },
        { 0, 0, 0, 0 },
    };
    const char *valid = allow_prep ? "--vocab-dir DIR, --out OUTDIR, --val-fraction F, --val-file PATH, "
                                     "--format auto|text|jsonl, --jsonl-field NAME, --threads N, --help"
                                   : "--vocab-dir DIR, --help";
    memset(o, 0, sizeof *o);
    o->vocab_dir = tool_bpe_dir_env();
    o->val_fraction = 0.02;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        switch (c) {
        case 'v':
            o->vocab_dir = optarg;
            break;
        case 'o':
        case 'f':
        case 'V':
        case 'F':
        case 'J':
        case 'T':
            if (!allow_prep)
                return tool_die(2, "%s: option '%s' is only valid for 'prepare' (valid here: %s)", sub, argv[optind - 1],
                           valid);
            if (c == 'o') {
                o->out = optarg;
            } else if (c == 'V') {
                if (o->nval_files == (int)(sizeof o->val_files / sizeof o->val_files[0]))
                    return tool_die(2, "%s: more than %d --val-file options", sub, o->nval_files);
                o->val_files[o->nval_files++] = optarg;
            } else if (c == 'F') {
                if (!strcmp(optarg, "auto")) o->format = PT_CORPUS_AUTO;
                else if (!strcmp(optarg, "text")) o->format = PT_CORPUS_TEXT;
                else if (!strcmp(optarg, "jsonl")) o->format = PT_CORPUS_JSONL;
                else return tool_die(2, "%s: --format '%s' is not one of auto, text, jsonl", sub, optarg);
            } else if (c == 'J') {
                if (!*optarg) return tool_die(2, "%s: --jsonl-field needs a field name", sub);
                o->field = optarg;
            } else if (c == 'T') {
                long v;
                if (pt_parse_int("--threads", optarg, 1, 1024, &v)) return tool_die(2, "%s: %s", sub, pt_errmsg());
                o->threads = v;
            } else {
                char *end;
                errno = 0;
                double f = strtod(optarg, &end);
                if (end == optarg || *end || errno || !isfinite(f) || f < 0 || f >= 1)
                    return tool_die(2, "%s: --val-fraction '%s' is not a number in [0, 1)", sub, optarg);
                o->val_fraction = f;
                o->val_fraction_set = 1;
            }
            break;
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

/* prepare's progress line on standard error (inputs over 64 MiB) */
static void progress(size_t done, size_t total, void *arg)
{
    double t0 = *(const double *)arg, dt = pt_now() - t0;
    fprintf(stderr, "%s: prepare: encoded %.0f of %.0f MiB (%.0f%%), %.1f MB/s\n", tool_name, done / 1048576.0,
            total / 1048576.0, total ? 100.0 * (double)done / (double)total : 100.0, dt > 0 ? done / dt / 1e6 : 0.0);
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

static int add_inputs(pt_corpus *c, char *const *paths, int n, const struct opts *o)
{
    for (int i = 0; i < n; i++) {
        int rc = pt_corpus_add(c, paths[i], o->format, o->field);
        if (rc) return tool_die(lib_status(rc), "prepare: %s", pt_errmsg());
    }
    report_skipped(c);
    return -1;
}

static int cmd_prepare(int argc, char **argv)
{
    struct opts o;
    int st = parse(argc, argv, "prepare", 1, &o);
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
     * (or absent), OUTDIR/train.bin and val.bin absent or regular files
     * (never a link, FIFO or device: pt_atomic_open refuses those again) */
    if (stat(o.out, &sb) == 0 && !S_ISDIR(sb.st_mode))
        return tool_die(2, "prepare: --out %s exists and is not a directory", o.out);
    size_t ol = strlen(o.out) + 16;
    char *ptrain = malloc(ol), *pval = malloc(ol);
    if (!ptrain || !pval) {
        free(ptrain);
        free(pval);
        return tool_die(1, "prepare: out of memory");
    }
    snprintf(ptrain, ol, "%s/train.bin", o.out);
    snprintf(pval, ol, "%s/val.bin", o.out);
    if (pt_output_check(ptrain) || pt_output_check(pval)) {
        free(ptrain);
        free(pval);
        return tool_die(2, "prepare: %s", pt_errmsg());
    }
    long threads = o.threads;
    if (!threads) {
        threads = sysconf(_SC_NPROCESSORS_ONLN);
        if (threads < 1) threads = 1;
        if (threads > 64) threads = 64;
    }
    pt_corpus train = {0}, val = {0};
    int32_t *ids = NULL, *vids = NULL;
    size_t n = 0, nv = 0, *starts = NULL;
    if ((st = add_inputs(&train, o.args, o.nargs, &o)) >= 0) goto out;
    if ((st = add_inputs(&val, (char *const *)o.val_files, o.nval_files, &o)) >= 0) goto out;
    if (train.ndocs == 0) {
        st = tool_die(2, "prepare: the inputs hold no document (empty files, or JSON Lines with empty '%s' fields)",
                 o.field ? o.field : "text");
        goto out;
    }
    if (o.nval_files && val.ndocs == 0) {
        st = tool_die(2, "prepare: the --val-file inputs hold no document");
        goto out;
    }
    if (mkdir(o.out, 0755) != 0 && errno != EEXIST) {
        st = tool_die(2, "prepare: cannot create output directory %s: %s", o.out, strerror(errno));
        goto out;
    }
    starts = malloc(sizeof *starts * ((size_t)train.ndocs + 1));
    if (!starts) { st = tool_die(1, "prepare: out of memory"); goto out; }
    double t0 = pt_now();
    size_t bytes = train.bytes + val.bytes;
    pt_corpus_progress pr = bytes >= ((size_t)64 << 20) ? progress : NULL;
    int rc = pt_corpus_encode(&train, o.vocab_dir, (int)threads, &ids, &n, starts, pr, &t0);
    if (!rc && o.nval_files) rc = pt_corpus_encode(&val, o.vocab_dir, (int)threads, &vids, &nv, NULL, pr, &t0);
    double dt = pt_now() - t0;
    if (rc) { st = tool_die(lib_status(rc), "prepare: %s", pt_errmsg()); goto out; }

    /* the split: --val-file documents; else the last fraction of the
     * documents; else (one document) the last fraction of its tokens */
    const int32_t *vpart = vids;
    uint64_t ntrain = n, nval = nv;
    int val_docs = val.ndocs;
    char how[160];
    if (o.nval_files) {
        snprintf(how, sizeof how, "%d document%s of --val-file", val.ndocs, val.ndocs == 1 ? "" : "s");
    } else if (train.ndocs > 1) {
        int k = (int)floor(train.ndocs * o.val_fraction + 0.5);
        if (k == 0 && o.val_fraction > 0) k = 1;
        if (k >= train.ndocs) k = train.ndocs - 1;
        ntrain = starts[train.ndocs - k];
        nval = n - ntrain;
        vpart = ids + ntrain;
        val_docs = k;
        snprintf(how, sizeof how, "the last %d of %d documents", k, train.ndocs);
    } else {
        nval = (uint64_t)floor((double)n * o.val_fraction + 0.5);
        if (nval > n) nval = n;
        ntrain = n - nval;
        vpart = ids + ntrain;
        val_docs = 0;
        snprintf(how, sizeof how, "the last %.4g of the tokens of the one document", o.val_fraction);
    }
    pt_bpe *t = NULL;
    if ((st = load_bpe("prepare", &o, &t)) >= 0) goto out;
    uint32_t V = (uint32_t)pt_bpe_vocab_size(t);
    uint32_t eot = (uint32_t)pt_bpe_eot(t);
    pt_bpe_free(t);
    /* train and val as one set: both written and synced before either
     * is renamed into place, bound by a shared set id the loader checks */
    const char *paths[2] = { ptrain, pval };
    const int32_t *parts[2] = { ids, vpart };
    const uint64_t counts[2] = { ntrain, nval };
    if ((rc = pt_shard_write_set(2, paths, parts, counts, V, eot))) {
        st = tool_die(lib_status(rc), "prepare: %s", pt_errmsg());
        goto out;
    }
    printf("%d input%s, %d document%s, %zu bytes -> %zu tokens in %.3f s on %ld thread%s (%.0f tokens/s, %.2f MB/s)\n",
           train.nsrc + val.nsrc, train.nsrc + val.nsrc == 1 ? "" : "s", train.ndocs + val.ndocs,
           train.ndocs + val.ndocs == 1 ? "" : "s", bytes, n + nv, dt, threads, threads == 1 ? "" : "s",
           dt > 0 ? (double)(n + nv) / dt : 0.0, dt > 0 ? (double)bytes / dt / 1e6 : 0.0);
    printf("%s: %llu tokens (%d document%s)\n", ptrain, (unsigned long long)ntrain, train.ndocs - (o.nval_files ? 0 : val_docs),
           train.ndocs - (o.nval_files ? 0 : val_docs) == 1 ? "" : "s");
    printf("%s: %llu tokens (held out: %s)\n", pval, (unsigned long long)nval, how);
    st = stdout_status("prepare");
out:
    free(ptrain);
    free(pval);
    free(ids);
    free(vids);
    free(starts);
    pt_corpus_free(&train);
    pt_corpus_free(&val);
    return st;
}

/* The options and the one input (FILE, or - / none for standard input) of
 * encode and decode: its whole text in *text (the caller frees it), *len
 * bytes.  Returns -1 on success, else the exit status (the error printed). */
static int parse_input(int argc, char **argv, const char *sub, struct opts *o, char **text, size_t *len)
{
    int st = parse(argc, argv, sub, 0, o);
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

static int cmd_info(int argc, char **argv)
{
    struct opts o;
    int st = parse(argc, argv, "info", 0, &o);
    if (st >= 0) return st;
    if (o.nargs != 1) return tool_die(2, "info: expected one SHARD, got %d arguments", o.nargs);
    pt_shard s;
    int rc = pt_shard_open(&s, o.args[0]);
    if (rc) return tool_die(lib_status(rc), "info: %s", pt_errmsg());
    printf("file             %s\n", o.args[0]);
    printf("magic            %s\n", PT_SHARD_MAGIC);
    printf("version          %d\n", PT_SHARD_VERSION);
    printf("bytes_per_token  2\n");
    printf("ntokens          %llu\n", (unsigned long long)s.ntokens);
    printf("vocab_size       %u\n", s.vocab_size);
    printf("eot_id           %u\n", s.eot_id);
    printf("checksum         fnv1a64:%016llx (verified)\n", (unsigned long long)s.checksum);
    pt_shard_close(&s);
    return stdout_status("info");
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
    if (!strcmp(c, "prepare")) return cmd_prepare(argc - 1, argv + 1);
    if (!strcmp(c, "encode")) return cmd_encode(argc - 1, argv + 1);
    if (!strcmp(c, "decode")) return cmd_decode(argc - 1, argv + 1);
    if (!strcmp(c, "info")) return cmd_info(argc - 1, argv + 1);
    return tool_die(2, "unknown command '%s' (valid: prepare, encode, decode, info, --help, --version)", c);
}
