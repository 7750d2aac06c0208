/* SPDX-License-Identifier: MIT */
/* ptrain-data's command line: the usage text, each subcommand's options,
 * and the exit status of standard output (data_tool.h). */
#define _GNU_SOURCE
#include "config.h"
#include "data_tool.h"
#include "bin/tool_util.h"
#include "data/bpe.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void data_usage(FILE *f)
{
    fprintf(f,
            "usage: ptrain-data COMMAND [OPTIONS] [ARGS]\n"
            "  prepare --tokenizer TOK --out OUTDIR [--val-fraction F | --val-file PATH...]\n"
            "          [--format auto|text|jsonl] [--jsonl-field NAME] [--threads N]\n"
            "          [--shard-tokens N] [--memory SIZE] [--in-memory] INPUT...\n"
            "          tokenize the documents of every INPUT (a text file, a JSON Lines file\n"
            "          (*.jsonl: the string field NAME, default text, of each line), a directory\n"
            "          of them, or - for standard input) with the tokenizer's end-of-text token\n"
            "          (GPT-2: <|endoftext|>, Llama 3: <|end_of_text|>) before each document\n"
            "          into OUTDIR/train.bin and OUTDIR/val.bin, or with --shard-tokens N into\n"
            "          shards of N tokens (OUTDIR/train_000000.bin ...), listed in OUTDIR/index.json.\n"
            "          Validation: the last fraction F of the documents (default 0.02; of the\n"
            "          tokens when there is one document), or the documents of --val-file PATH\n"
            "          (repeatable).  The corpus is streamed: --memory SIZE (default 1G) bounds\n"
            "          the text and ids in flight; --in-memory holds it all, as before\n"
            "  encode  --tokenizer TOK [FILE|-]   print token ids, one per line\n"
            "  decode  --tokenizer TOK [FILE|-]   turn token ids (white-space separated) into text\n"
            "  info    [--vocab N] [FORMAT:]PATH  validate and describe a token file (ptrain shard,\n"
            "          llm.c shard, or with nanogpt: a nanoGPT .bin of N ids) or a data set directory\n"
            "  export  [--format llmc] [--vocab N] [--shard-tokens N] [FORMAT:]SRC DST\n"
            "          write llm.c token files: a file from a token file, or from a data set\n"
            "          directory DST/ptrain_train_000000.bin ... and DST/ptrain_val_000000.bin ...\n"
            "          of N tokens each (default 100000000)\n"
            "TOK: a directory holding GPT-2's encoder.json and vocab.bpe, Hugging Face's\n"
            "vocab.json and merges.txt, or a byte-level BPE tokenizer.json (or that file);\n"
            "gpt2 ($PTRAIN_BPE_DIR, scripts/get-tokenizer.sh prints it) or llama3\n"
            "($PTRAIN_LLAMA3_DIR, scripts/get-tokenizer-llama3.sh).  Default $PTRAIN_BPE_DIR;\n"
            "--vocab-dir DIR is the same option.  FORMAT: ptrain, llmc or nanogpt (ptrain and\n"
            "llm.c files are recognised by their magic).  --help, --version: this text; the version.\n");
}

/* 0 when everything printed reached standard output, else 1 with one line
 * (a full disk, a closed pipe: the output would be silently incomplete) */
int data_stdout_status(const char *sub)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
    return tool_die(1, "%s: cannot write standard output%s%s", sub, errno ? ": " : "", errno ? strerror(errno) : "");
}

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

int data_check_tokenizer(const char *sub, const struct opts *o)
{
    if (!o->vocab_dir)
        return tool_die(2, "%s: no tokenizer: give --tokenizer DIR|gpt2|llama3 or set PTRAIN_BPE_DIR "
                           "(scripts/get-tokenizer.sh prints it)", sub);
    struct stat sb;
    if (stat(o->vocab_dir, &sb) == 0) {
        if (S_ISDIR(sb.st_mode) || S_ISREG(sb.st_mode)) return -1;
        return tool_die(2, "%s: --tokenizer '%s' is neither a directory nor a tokenizer.json file", sub, o->vocab_dir);
    }
    if (strcmp(o->vocab_dir, "gpt2") && strcmp(o->vocab_dir, "llama3"))
        return tool_die(2, "%s: --tokenizer '%s' is not a directory, a tokenizer.json file or a name (valid: gpt2, llama3)",
                        sub, o->vocab_dir);
    pt_bpe *t = NULL;
    int rc = pt_bpe_load(&t, o->vocab_dir);
    pt_bpe_free(t);
    return rc ? tool_die(2, "%s: %s", sub, pt_errmsg()) : -1;
}

/* Parse the options of subcommand `sub` (argv[0] is the subcommand), those
 * in `allowed`.  Returns -1 on success, else the exit status. */
int data_parse(int argc, char **argv, const char *sub, unsigned allowed, struct opts *o)
{
    static const struct option lo[] = {
        { "tokenizer", required_argument, 0, 'v' },
        { "vocab-dir", required_argument, 0, 'v' }, /* its first spelling */
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
        { 'v', O_VOCAB_DIR, "--tokenizer DIR|gpt2|llama3" }, { 'o', O_OUT, "--out OUTDIR" },
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
            data_usage(stdout);
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
