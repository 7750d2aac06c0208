/* SPDX-License-Identifier: MIT */
/* ptrain-data: prepare token shards from text with a byte-level BPE tokenizer
 * (GPT-2, Llama 3),
 * encode/decode text, and describe shards.  See man/ptrain-data.1; the
 * modules are in bin/data/data_tool.h.
 *
 * Exit status: 0 success; 2 bad command line, missing/unreadable file or bad
 * input value; 1 any other failure (malformed file, out of memory); 4
 * (PT_SHARD_CHANGED_EXIT, from lib/data/shard.c's SIGBUS handler) a shard
 * truncated while info read it. */
#define _GNU_SOURCE
#include "config.h"
#include "data_tool.h"
#include "bin/tool_util.h"

#include <string.h>
#include <sys/resource.h>

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
    tool_name = "ptrain-data";
    if (argc < 2) {
        data_usage(stderr);
        return 2;
    }
    const char *c = argv[1];
    if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) {
        data_usage(stdout);
        return 0;
    }
    if (!strcmp(c, "--version") || !strcmp(c, "-V")) {
        return tool_version();
    }
    if (!strcmp(c, "prepare")) {
        raise_nofile();
        return data_prepare(argc - 1, argv + 1);
    }
    if (!strcmp(c, "encode")) return data_encode(argc - 1, argv + 1);
    if (!strcmp(c, "decode")) return data_decode(argc - 1, argv + 1);
    if (!strcmp(c, "info")) return data_info(argc - 1, argv + 1);
    if (!strcmp(c, "export")) {
        raise_nofile();
        return data_export(argc - 1, argv + 1);
    }
    return tool_die(2, "unknown command '%s' (valid: prepare, encode, decode, info, export, --help, --version)", c);
}
