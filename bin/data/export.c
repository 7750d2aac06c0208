/* SPDX-License-Identifier: MIT */
/* ptrain-data export: llm.c token files from a token file or a data set
 * (data_tool.h). */
#define _GNU_SOURCE
#include "config.h"
#include "data_tool.h"
#include "bin/tool_util.h"
#include "core/file.h"
#include "data/shard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

/* export: llm.c token files from a token file or a data set */
int data_export(int argc, char **argv)
{
    struct opts o;
    int st = data_parse(argc, argv, "export", O_FORMAT | O_VOCAB | O_SHARD_TOKENS, &o);
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
    st = -1;
    if (sp[0].token_bytes == 4) { /* llm.c version 1 and nanoGPT files hold uint16 ids */
        st = tool_die(2, "export: %s holds 4-byte token ids (vocab_size %u > 65536): llm.c token files version %d "
                         "hold 2-byte GPT-2 ids (and nanoGPT's np.uint16), so it cannot be exported", src,
                      sp[0].vocab_size, PT_LLMC_TOKENS_VERSION);
        pt_shard_close(&sp[0]);
        pt_shard_close(&sp[1]);
        return st;
    }
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
        st = data_stdout_status("export");
    }
out:
    free(files);
    pt_shard_close(&sp[0]);
    pt_shard_close(&sp[1]);
    return st;
}
