/* SPDX-License-Identifier: MIT */
/* ptrain-ckpt's command line: the usage text, the subcommand and its
 * options (ckpt_tool.h). */
#define _GNU_SOURCE
#include "config.h"
#include "ckpt_tool.h"
#include "bin/tool_util.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ckpt_usage(FILE *f)
{
    fprintf(f,
            "usage: ptrain-ckpt COMMAND [OPTIONS] ARGS\n"
            "  info DIR            print a checkpoint's manifest summary: model, plan, step, lr\n"
            "                      schedule, data, rank files and tensors\n"
            "  verify DIR          check every rank file's size and checksum and the manifest;\n"
            "                      one line per problem; exit 0 when sound, 1 otherwise\n"
            "  convert [--to FORMAT] [--dtype fp32|bf16|fp16] [--model M] [--max-shard-size N] SRC DST\n"
            "                      SRC: a checkpoint, an llm.c gpt2 .bin (version 3, fp32, or 5,\n"
            "                      bf16), or a\n"
            "                      Hugging Face GPT-2 model.safetensors (F32, F16 or BF16; its shape\n"
            "                      from config.json beside it, or --model NAME|L,H,C,T,V);\n"
            "                      FORMAT: llmc (llm.c's .bin), safetensors (Hugging Face GPT-2\n"
            "                      names), ckpt (a save directory that ptrain-run --resume DST\n"
            "                      fine-tunes from: step 0, fresh AdamW state; from a model file);\n"
            "                      default from DST: *.bin llmc, *.safetensors safetensors, else ckpt;\n"
            "                      --dtype bf16 writes llm.c's version 5 (bf16, rounded to nearest\n"
            "                      even) instead of version 3 (fp32, the default)\n"
            "                      Llama family (LlamaForCausalLM, Qwen2, Mistral): SRC a Hugging\n"
            "                      Face directory (config.json, model.safetensors or its shards and\n"
            "                      index) streams into checkpoint DST; a llama checkpoint goes to\n"
            "                      --to hf DST (a directory: the source's files back, bit for bit;\n"
            "                      else --dtype fp32|bf16|fp16, sharded past --max-shard-size N bytes\n"
            "                      (or 5GB, 500MiB)) or to DST.safetensors\n"
            "  sample [--prompt TEXT] [--tokens N] [--temperature F] [--top-k K] [--seed S]\n"
            "         [--tokenizer TOK] [--ids] [--logits FILE] DIR\n"
            "                      print TEXT and N (default 64) tokens sampled from the checkpoint's\n"
            "                      model, decoded with the tokenizer TOK (as ptrain-data's: a directory,\n"
            "                      a tokenizer.json, gpt2 or llama3; default $PTRAIN_BPE_DIR; also spelt\n"
            "                      --vocab-dir); an empty TEXT starts from its end-of-text id; F default 1,\n"
            "                      K default 0 = all ids (1: greedy), S default 1337 (same seed, same\n"
            "                      text); --ids prints the new ids instead, one per line; --logits\n"
            "                      writes each step's logits (fp32 [N, V]) to FILE\n"
            "DIR is a checkpoint (DIR/manifest.json) or a save directory (its DIR/latest).\n"
            "--help, --version: this text; the version.\n");
}

int ckpt_options(int argc, char **argv, ckpt_cmdline *cl)
{
    if (argc < 2) {
        ckpt_usage(stderr);
        return 2;
    }
    static const struct option lo[] = {
        {"to", required_argument, 0, 't'},
        {"dtype", required_argument, 0, 'D'},
        {"prompt", required_argument, 0, 'p'},
        {"tokens", required_argument, 0, 'n'},
        {"temperature", required_argument, 0, 'T'},
        {"top-k", required_argument, 0, 'k'},
        {"seed", required_argument, 0, 's'},
        {"vocab-dir", required_argument, 0, 'v'},
        {"tokenizer", required_argument, 0, 'v'},
        {"ids", no_argument, 0, 'i'},
        {"logits", required_argument, 0, 'l'},
        {"model", required_argument, 0, 'm'},
        {"max-shard-size", required_argument, 0, 'S'},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0},
    };
    const char *c = argv[1], *to = NULL, *model = NULL, *dtype = NULL;
    long long max_shard = 0;
    const int sub = !strcmp(c, "info") || !strcmp(c, "verify") || !strcmp(c, "convert") || !strcmp(c, "sample");
    sample_opts so = {.prompt = "", .tokens = 64, .temperature = 1.0, .top_k = 0, .seed = 1337};
    so.vocab_dir = tool_bpe_dir_env();
    if (!sub && strcmp(c, "--help") && strcmp(c, "-h") && strcmp(c, "help") && strcmp(c, "--version") &&
        strcmp(c, "-V"))
        return tool_die(2, "unknown command '%s' (valid: info, verify, convert, sample, --help, --version)", c);
    if (!strcmp(c, "help")) {
        ckpt_usage(stdout);
        return 0;
    }
    opterr = 0;
    optind = sub ? 2 : 1;
    int o, li = 0;
    while ((o = getopt_long(argc, argv, ":hV", lo, &li)) != -1) {
        switch (o) {
        case 't':
            if (strcmp(c, "convert")) return tool_die(2, "%s: --to is only valid for convert", c);
            to = optarg;
            break;
        case 'D':
            if (strcmp(c, "convert")) return tool_die(2, "%s: --dtype is only valid for convert", c);
            dtype = optarg;
            break;
        case 'm':
            if (strcmp(c, "convert")) return tool_die(2, "%s: --model is only valid for convert", c);
            model = optarg;
            break;
        case 'S': {
            if (strcmp(c, "convert")) return tool_die(2, "%s: --max-shard-size is only valid for convert", c);
            char *end;
            errno = 0;
            double v = strtod(optarg, &end);
            static const struct { const char *s; double f; } u[] = {{"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6},
                {"GB", 1e9}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
            double f = 0;
            for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
                if (end != optarg && !strcmp(end, u[i].s)) f = u[i].f;
            if (errno || !f || !(v * f >= 1) || v * f > 1e15)
                return tool_die(2, "convert: --max-shard-size '%s' is not a size (valid: bytes in [1, 10^15], optionally "
                                "with B, KB, MB, GB, KiB, MiB or GiB, e.g. 5GB)", optarg);
            max_shard = (long long)(v * f);
            break;
        }
        case 'p': case 'n': case 'T': case 'k': case 's': case 'v': case 'i': case 'l':
            if (strcmp(c, "sample")) return tool_die(2, "%s: --%s is only valid for sample", c, lo[li].name);
            if (o == 'p') so.prompt = optarg;
            else if (o == 'v') so.vocab_dir = optarg;
            else if (o == 'l') so.logits_file = optarg;
            else if (o == 'i') so.ids = 1;
            else if (o == 'n' && pt_parse_int("--tokens", optarg, 1, 1000000, &so.tokens)) return tool_die(2, "sample: %s", pt_errmsg());
            else if (o == 'k' && pt_parse_int("--top-k", optarg, 0, 1 << 24, &so.top_k)) return tool_die(2, "sample: %s", pt_errmsg());
            else if (o == 's') {
                long v;
                if (pt_parse_int("--seed", optarg, 0, 2147483647L, &v)) return tool_die(2, "sample: %s", pt_errmsg());
                so.seed = (unsigned long long)v;
            } else if (o == 'T') {
                char *end;
                errno = 0;
                double f = strtod(optarg, &end);
                if (end == optarg || *end || errno || !(f > 0) || f > 100)
                    return tool_die(2, "sample: --temperature '%s' is not a number in (0, 100] (use --top-k 1 for greedy decoding)", optarg);
                so.temperature = f;
            }
            break;
        case 'h':
            ckpt_usage(stdout);
            return 0;
        case 'V':
            return tool_version();
        case ':':
            return tool_die(2, "%s: option '%s' needs a value", c, argv[optind - 1]);
        default:
            return tool_die(2, "%s: unknown option '%s' (valid: --to FORMAT, --dtype fp32|bf16|fp16, --model M, --max-shard-size N (convert); --prompt, --tokens, --temperature, "
                          "--top-k, --seed, --tokenizer, --ids, --logits (sample); --help, --version)", c, argv[optind - 1]);
        }
    }
    if (!sub) return tool_die(2, "a command is needed (valid: info, verify, convert, sample)");
    const int nargs = argc - optind, want = strcmp(c, "convert") ? 1 : 2;
    if (nargs != want)
        return tool_die(2, "%s: needs %s (got %d arguments)", c, want == 1 ? "one checkpoint directory" : "SRC and DST",
                   nargs);
    cl->cmd = c;
    cl->to = to;
    cl->model = model;
    cl->dtype = dtype;
    cl->max_shard = max_shard;
    cl->so = so;
    cl->args = argv + optind;
    return -1;
}
