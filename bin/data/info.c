/* SPDX-License-Identifier: MIT */
/* ptrain-data info: a token file or a data set directory validated and
 * described (data_tool.h). */
#define _GNU_SOURCE
#include "config.h"
#include "data_tool.h"
#include "bin/tool_util.h"
#include "data/shard.h"

#include <stdio.h>
#include <sys/stat.h>

/* one file's lines (info FILE) */
static void info_file(const pt_shard *s)
{
    printf("file             %s\n", s->path);
    printf("format           %s\n", pt_token_format_name(s->format));
    if (s->format == PT_TOKENS_PTRAIN) {
        printf("magic            %s\n", PT_SHARD_MAGIC);
        printf("version          %d\n", s->token_bytes == 4 ? PT_SHARD_VERSION_4 : PT_SHARD_VERSION);
    } else if (s->format == PT_TOKENS_LLMC) {
        printf("magic            %d\n", PT_LLMC_TOKENS_MAGIC);
        printf("version          %d\n", PT_LLMC_TOKENS_VERSION);
    }
    printf("bytes_per_token  %u\n", s->token_bytes ? s->token_bytes : 2);
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

int data_info(int argc, char **argv)
{
    struct opts o;
    int st = data_parse(argc, argv, "info", O_VOCAB, &o);
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
        printf("bytes_per_token  %u\n", tr.token_bytes ? tr.token_bytes : 2);
        info_split("train", &tr);
        info_split("val", &va);
        pt_shard_close(&tr);
        pt_shard_close(&va);
        return data_stdout_status("info");
    }
    pt_shard s;
    int rc = pt_tokens_open(&s, path, fmt, (uint32_t)o.vocab);
    if (rc) return tool_die(lib_status(rc), "info: %s", pt_errmsg());
    info_file(&s);
    pt_shard_close(&s);
    return data_stdout_status("info");
}
