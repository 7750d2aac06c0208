/* SPDX-License-Identifier: MIT */
/* ptrain-data encode and decode: text to token ids (GPT-2, Llama 3, any
 * byte-level BPE tokenizer.json) and back
 * (data_tool.h). */
#define _GNU_SOURCE
#include "config.h"
#include "data_tool.h"
#include "bin/tool_util.h"
#include "core/file.h"
#include "data/bpe.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int load_bpe(const char *sub, const struct opts *o, pt_bpe **t)
{
    int st = data_check_tokenizer(sub, o);
    if (st >= 0) return st;
    int rc = pt_bpe_load(t, o->vocab_dir);
    if (rc) return tool_die(lib_status(rc), "%s: %s", sub, pt_errmsg());
    return -1;
}

/* The options and the one input (FILE, or - / none for standard input) of
 * encode and decode: its whole text in *text (the caller frees it), *len
 * bytes.  Returns -1 on success, else the exit status (the error printed). */
static int parse_input(int argc, char **argv, const char *sub, struct opts *o, char **text, size_t *len)
{
    int st = data_parse(argc, argv, sub, O_VOCAB_DIR, o);
    if (st >= 0) return st;
    if (o->nargs > 1) return tool_die(2, "%s: expected at most one FILE, got %d arguments", sub, o->nargs);
    int rc = pt_read_file(o->nargs ? o->args[0] : "-", text, len);
    if (rc) return tool_die(lib_status(rc), "%s: %s", sub, pt_errmsg());
    return -1;
}

int data_encode(int argc, char **argv)
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
        st = data_stdout_status("encode");
    }
    free(ids);
    pt_bpe_free(t);
    free(text);
    return st;
}

int data_decode(int argc, char **argv)
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
        st = data_stdout_status("decode");
    }
    free(out);
    free(ids);
    pt_bpe_free(t);
    return st;
}
