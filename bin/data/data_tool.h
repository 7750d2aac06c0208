/* SPDX-License-Identifier: MIT */
/* ptrain-data's modules (bin/data/): one subcommand or concern each;
 * main.c dispatches on the subcommand.
 *
 *   options.c   the command line: usage, each subcommand's options, and
 *               the exit status of standard output
 *   prepare.c   prepare: token shards from text (streamed or in memory)
 *   tokenize.c  encode and decode: text to token ids and back
 *   info.c      info: a token file or a data set directory described
 *   export.c    export: llm.c token files from a token file or a data set
 *
 * Exit statuses (ptrain-data(1)): 0 success; 2 bad command line,
 * missing/unreadable file or bad input value; 1 any other failure
 * (malformed file, out of memory); 4 (PT_SHARD_CHANGED_EXIT) a shard
 * truncated while it was read.  Every subcommand prints one line on stderr
 * (tool_die, bin/tool_util.h) for each failure. */
#ifndef PTRAIN_DATA_TOOL_H
#define PTRAIN_DATA_TOOL_H
#include "core/core.h"
#include "data/corpus.h"

#include <stdio.h>

/* Exit status for a library error: bad input or unreadable file -> 2. */
static inline int lib_status(int rc) { return (rc == PT_EINVAL || rc == PT_EIO) ? 2 : 1; }

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

/* Print the usage text to f (stdout for --help, stderr for a bare
 * ptrain-data).  No errors. */
void data_usage(FILE *f);

/* Parse the options of subcommand `sub` (argv[0] is the subcommand), those
 * in `allowed` (O_* bits), into *o (defaults: --tokenizer $PTRAIN_BPE_DIR,
 * --val-fraction 0.02, --memory 1 GiB).  Returns -1 on success, else the
 * exit status: 0 after --help or --version, 2 (one line printed) for an
 * unknown, misplaced or bad option. */
int data_parse(int argc, char **argv, const char *sub, unsigned allowed, struct opts *o);

/* Check --tokenizer (o->vocab_dir) before any work: a directory, a
 * tokenizer.json file, or a name pt_bpe_load resolves (gpt2, llama3; loaded
 * once here, so an unset variable is reported now).  Returns -1 when usable,
 * else the exit status 2 after one line naming sub and the value. */
int data_check_tokenizer(const char *sub, const struct opts *o);

/* 0 when everything printed reached standard output, else 1 with one line
 * naming sub (a full disk, a closed pipe: the output would be silently
 * incomplete). */
int data_stdout_status(const char *sub);

/* The subcommands: argv[0] is the subcommand's name, argv[1..] its options
 * and arguments.  Each returns the exit status (above), one line on stderr
 * for a failure. */
int data_prepare(int argc, char **argv);
int data_encode(int argc, char **argv);
int data_decode(int argc, char **argv);
int data_info(int argc, char **argv);
int data_export(int argc, char **argv);

#endif
