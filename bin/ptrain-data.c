/* ptrain-data: prepare token shards from text with the GPT-2 BPE tokenizer,
 * encode/decode text, and describe shards.  See man/ptrain-data.1.
 *
 * Exit status: 0 success; 2 bad command line, missing/unreadable file or bad
 * input value; 1 any other failure (malformed file, out of memory). */
#define _GNU_SOURCE
#include "core/core.h"
#include "data/bpe.h"
#include "data/shard.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *cmd = "ptrain-data";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ptrain-data COMMAND [OPTIONS] [ARGS]\n"
            "  prepare --vocab-dir DIR [--val-fraction F] --out OUTDIR INPUT.txt\n"
            "          tokenize INPUT.txt into OUTDIR/train.bin and OUTDIR/val.bin; the validation\n"
            "          split is the last fraction F of the tokens (default 0.02)\n"
            "  encode  --vocab-dir DIR [FILE|-]   print token ids, one per line\n"
            "  decode  --vocab-dir DIR [FILE|-]   turn token ids (white-space separated) into text\n"
            "  info    SHARD                      print a token shard's header (after validating it)\n"
            "DIR holds GPT-2's encoder.json and vocab.bpe (scripts/get-tokenizer.sh prints it);\n"
            "--vocab-dir defaults to $PTRAIN_BPE_DIR.\n");
}

/* Print a one-line error and return the exit status for it. */
static int die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int die(int status, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return status;
}

/* Exit status for a library error: bad input or unreadable file -> 2. */
static int lib_status(int rc) { return (rc == PT_EINVAL || rc == PT_EIO) ? 2 : 1; }

struct opts {
    const char *vocab_dir;
    const char *out;
    double val_fraction;
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
        { "help", no_argument, 0, 'h' },
        { 0, 0, 0, 0 },
    };
    const char *valid = allow_prep ? "--vocab-dir DIR, --val-fraction F, --out OUTDIR, --help"
                                   : "--vocab-dir DIR, --help";
    memset(o, 0, sizeof *o);
    o->vocab_dir = getenv("PTRAIN_BPE_DIR");
    if (o->vocab_dir && !*o->vocab_dir) o->vocab_dir = NULL;
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
            if (!allow_prep)
                return die(2, "%s: option '%s' is only valid for 'prepare' (valid here: %s)", sub, argv[optind - 1],
                           valid);
            if (c == 'o') {
                o->out = optarg;
            } else {
                char *end;
                errno = 0;
                double f = strtod(optarg, &end);
                if (end == optarg || *end || errno || !isfinite(f) || f < 0 || f >= 1)
                    return die(2, "%s: --val-fraction '%s' is not a number in [0, 1)", sub, optarg);
                o->val_fraction = f;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        case ':':
            return die(2, "%s: option '%s' needs a value", sub, argv[optind - 1]);
        default:
            return die(2, "%s: unknown option '%s' (valid: %s)", sub, argv[optind - 1], valid);
        }
    }
    o->nargs = argc - optind;
    o->args = argv + optind;
    return -1;
}

static int load_bpe(const char *sub, const struct opts *o, pt_bpe **t)
{
    if (!o->vocab_dir)
        return die(2, "%s: no vocabulary: give --vocab-dir DIR or set PTRAIN_BPE_DIR (scripts/get-tokenizer.sh prints it)",
                   sub);
    struct stat sb;
    if (stat(o->vocab_dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return die(2, "%s: --vocab-dir '%s' is not a directory", sub, o->vocab_dir);
    int rc = pt_bpe_load(t, o->vocab_dir);
    if (rc) return die(lib_status(rc), "%s: %s", sub, pt_errmsg());
    return -1;
}

static int cmd_prepare(int argc, char **argv)
{
    struct opts o;
    int st = parse(argc, argv, "prepare", 1, &o);
    if (st >= 0) return st;
    if (!o.out) return die(2, "prepare: --out OUTDIR is required");
    if (o.nargs != 1) return die(2, "prepare: expected one INPUT.txt, got %d arguments", o.nargs);
    const char *input = o.args[0];
    char *text;
    size_t len;
    int rc = pt_read_file(input, &text, &len);
    if (rc) return die(lib_status(rc), "prepare: %s", pt_errmsg());
    pt_bpe *t = NULL;
    if ((st = load_bpe("prepare", &o, &t)) >= 0) {
        free(text);
        return st;
    }
    if (mkdir(o.out, 0755) != 0 && errno != EEXIST) {
        st = die(2, "prepare: cannot create output directory %s: %s", o.out, strerror(errno));
        goto out;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    double t0 = pt_now();
    rc = pt_bpe_encode(t, text, len, &ids, &n);
    double dt = pt_now() - t0;
    if (rc) {
        st = die(lib_status(rc), "prepare: %s: %s", input, pt_errmsg());
        goto out;
    }
    uint64_t nval = (uint64_t)floor((double)n * o.val_fraction + 0.5);
    if (nval > n) nval = n;
    uint64_t ntrain = n - nval;
    size_t ol = strlen(o.out) + 16;
    char *ptrain = malloc(ol), *pval = malloc(ol);
    if (!ptrain || !pval) {
        st = die(1, "prepare: out of memory");
    } else {
        snprintf(ptrain, ol, "%s/train.bin", o.out);
        snprintf(pval, ol, "%s/val.bin", o.out);
        uint32_t V = (uint32_t)pt_bpe_vocab_size(t);
        uint32_t eot = pt_bpe_eot(t) >= 0 ? (uint32_t)pt_bpe_eot(t) : V - 1;
        /* train and val as one set: both written and synced before either
         * is renamed into place, bound by a shared set id the loader checks */
        const char *paths[2] = { ptrain, pval };
        const int32_t *parts[2] = { ids, ids + ntrain };
        const uint64_t counts[2] = { ntrain, nval };
        if ((rc = pt_shard_write_set(2, paths, parts, counts, V, eot))) {
            st = die(lib_status(rc), "prepare: %s", pt_errmsg());
        } else {
            printf("%s: %zu bytes -> %zu tokens in %.3f s (%.0f tokens/s, %.2f MB/s)\n", input, len, n, dt,
                   dt > 0 ? (double)n / dt : 0.0, dt > 0 ? (double)len / dt / 1e6 : 0.0);
            printf("%s: %llu tokens (first %.4g of the corpus)\n", ptrain, (unsigned long long)ntrain,
                   1.0 - o.val_fraction);
            printf("%s: %llu tokens (last %.4g of the corpus, held out)\n", pval, (unsigned long long)nval,
                   o.val_fraction);
            st = 0;
        }
    }
    free(ptrain);
    free(pval);
    free(ids);
out:
    pt_bpe_free(t);
    free(text);
    return st;
}

static int cmd_encode(int argc, char **argv)
{
    struct opts o;
    int st = parse(argc, argv, "encode", 0, &o);
    if (st >= 0) return st;
    if (o.nargs > 1) return die(2, "encode: expected at most one FILE, got %d arguments", o.nargs);
    const char *in = o.nargs ? o.args[0] : "-";
    char *text;
    size_t len;
    int rc = pt_read_file(in, &text, &len);
    if (rc) return die(lib_status(rc), "encode: %s", pt_errmsg());
    pt_bpe *t = NULL;
    if ((st = load_bpe("encode", &o, &t)) >= 0) {
        free(text);
        return st;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    rc = pt_bpe_encode(t, text, len, &ids, &n);
    if (rc) {
        st = die(lib_status(rc), "encode: %s", pt_errmsg());
    } else {
        for (size_t i = 0; i < n; i++) printf("%d\n", (int)ids[i]);
        st = (fflush(stdout) != 0 || ferror(stdout)) ? die(1, "encode: cannot write standard output") : 0;
    }
    free(ids);
    pt_bpe_free(t);
    free(text);
    return st;
}

static int cmd_decode(int argc, char **argv)
{
    struct opts o;
    int st = parse(argc, argv, "decode", 0, &o);
    if (st >= 0) return st;
    if (o.nargs > 1) return die(2, "decode: expected at most one FILE, got %d arguments", o.nargs);
    const char *in = o.nargs ? o.args[0] : "-";
    char *text;
    size_t len;
    int rc = pt_read_file(in, &text, &len);
    if (rc) return die(lib_status(rc), "decode: %s", pt_errmsg());
    /* parse white-space separated decimal ids */
    size_t cap = len / 2 + 1, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) {
        free(text);
        return die(1, "decode: out of memory");
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
            st = die(2, "decode: a NUL byte on line %ld of %s is not a token id (valid: white-space "
                     "separated non-negative integers)", line, in);
            break;
        }
        if (end == p || errno || v < 0 || v > INT32_MAX ||
            (*end && *end != ' ' && *end != '\t' && *end != '\n' && *end != '\r')) {
            size_t w = strcspn(p, " \t\r\n");
            st = die(2, "decode: '%.*s' on line %ld of %s is not a token id (a non-negative integer)",
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
        st = die(lib_status(rc), "decode: %s", pt_errmsg());
    } else {
        fwrite(out, 1, olen, stdout);
        st = (fflush(stdout) != 0 || ferror(stdout)) ? die(1, "decode: cannot write standard output") : 0;
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
    if (o.nargs != 1) return die(2, "info: expected one SHARD, got %d arguments", o.nargs);
    pt_shard s;
    int rc = pt_shard_open(&s, o.args[0]);
    if (rc) return die(lib_status(rc), "info: %s", pt_errmsg());
    printf("file             %s\n", o.args[0]);
    printf("magic            %s\n", PT_SHARD_MAGIC);
    printf("version          %d\n", PT_SHARD_VERSION);
    printf("bytes_per_token  2\n");
    printf("ntokens          %llu\n", (unsigned long long)s.ntokens);
    printf("vocab_size       %u\n", s.vocab_size);
    printf("eot_id           %u\n", s.eot_id);
    printf("checksum         fnv1a64:%016llx (verified)\n", (unsigned long long)s.checksum);
    pt_shard_close(&s);
    return 0;
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
    if (!strcmp(c, "prepare")) return cmd_prepare(argc - 1, argv + 1);
    if (!strcmp(c, "encode")) return cmd_encode(argc - 1, argv + 1);
    if (!strcmp(c, "decode")) return cmd_decode(argc - 1, argv + 1);
    if (!strcmp(c, "info")) return cmd_info(argc - 1, argv + 1);
    return die(2, "unknown command '%s' (valid: prepare, encode, decode, info, --help)", c);
}
