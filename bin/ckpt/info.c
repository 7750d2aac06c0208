/* SPDX-License-Identifier: MIT */
/* ptrain-ckpt info: a checkpoint's manifest summary (ckpt_tool.h). */
#define _GNU_SOURCE
#include "config.h"
#include "ckpt_tool.h"
#include "bin/tool_util.h"
#include "ckpt/ckpt.h"

#include <stdio.h>

int ckpt_info(const char *arg)
{
    char path[4200];
    json_t *man;
    if (ckpt_resolve(arg, path, sizeof path) || pt_ckpt_manifest_read(path, &man)) return tool_die(2, "info: %s", pt_errmsg());
    ckpt_old_manifest_warning(path, man);
    json_t *mc = json_object_get(man, "model"), *mp = json_object_get(man, "plan"),
           *ls = json_object_get(man, "lr_schedule"), *files = json_object_get(man, "files"),
           *tens = json_object_get(man, "tensors");
    printf("checkpoint: %s\n", path);
    printf("step: %lld (AdamW step %lld)\n", jint(man, "step"), jint(man, "adam_step"));
    /* sums of numbers pt_ckpt_manifest_check bounded, taken unsigned: never undefined */
    unsigned long long nparam = 0;
    size_t k;
    json_t *x;
    json_array_foreach(tens, k, x) nparam += (unsigned long long)jint(x, "rows") * (unsigned long long)jint(x, "cols");
    printf("model: %s L=%lld H=%lld C=%lld T=%lld V=%lld, %.3fM parameters (with vocabulary padding)\n",
           *jstr(man, "model_name") ? jstr(man, "model_name") : "(unnamed)", jint(mc, "n_layer"), jint(mc, "n_head"),
           jint(mc, "n_embd"), jint(mc, "seq_len"), jint(mc, "vocab"), (double)nparam / 1e6);
    if (json_object_get(mc, "family"))
        printf("family: %s, spec %s\n", jstr(mc, "family"), jstr(mc, "spec"));
    printf("plan: %s (world %lld: mode %s, dp=%lld tp=%lld pp=%lld sp=%lld, ZeRO stage %lld)\n", jstr(mp, "summary"),
           jint(mp, "world"), jstr(mp, "mode"), jint(mp, "dp"), jint(mp, "tp"), jint(mp, "pp"), jint(mp, "sp"),
           jint(mp, "zero"));
    printf("lr schedule: lr %g -> min_lr %g, warmup %lld, total steps %lld\n",
           json_number_value(json_object_get(ls, "lr")), json_number_value(json_object_get(ls, "min_lr")),
           jint(ls, "warmup"), jint(ls, "total_steps"));
    printf("data: %s (position: step %lld); init seed %lld\n", *jstr(json_object_get(man, "data"), "spec") ? jstr(json_object_get(man, "data"), "spec") : "(none)",
           jint(json_object_get(man, "data"), "position_step"), jint(json_object_get(man, "rng"), "init_seed"));
    unsigned long long bytes = 0;
    json_array_foreach(files, k, x) bytes += (unsigned long long)jint(x, "bytes");
    printf("files: %zu, %llu bytes (parameters, AdamW m and v, fp32)\n", json_array_size(files), bytes);
    json_array_foreach(files, k, x) {
        json_t *co = json_object_get(x, "coords");
        printf("  %-16s %12lld bytes  fnv1a64 %s  rank %lld (dp %lld, pp %lld, tp %lld, sp %lld), %zu tensors\n",
               jstr(x, "name"), jint(x, "bytes"), jstr(x, "fnv1a64"), jint(x, "rank"), jint(co, "dp"), jint(co, "pp"),
               jint(co, "tp"), jint(co, "sp"), json_array_size(json_object_get(x, "tensors")));
    }
    printf("tensors: %zu\n", json_array_size(tens));
    json_array_foreach(tens, k, x) {
        if (jint(x, "cols") == 1) printf("  %-14s [%lld]\n", jstr(x, "name"), jint(x, "rows"));
        else printf("  %-14s [%lld, %lld]\n", jstr(x, "name"), jint(x, "rows"), jint(x, "cols"));
    }
    json_decref(man);
    return 0;
}
