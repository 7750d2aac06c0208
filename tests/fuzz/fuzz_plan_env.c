/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the plan environment parser (pt_plan_from_env) and
 * validation.  The input is NAME=VALUE lines for the PTRAIN_* variables. */
#include "fuzz_util.h"
#include "contract/plan.h"

static const char *const vars[] = {"PTRAIN_MODE", "PTRAIN_DP", "PTRAIN_PP", "PTRAIN_TP",
                                   "PTRAIN_TP_DEPTH", "PTRAIN_SP", "PTRAIN_ZERO",
                                   "PTRAIN_MICROBATCHES", "PTRAIN_RECOMPUTE", "PTRAIN_CKPT_ACT",
                                   "PTRAIN_RANK_ORDER", "PTRAIN_SCHEDULE",
                                   "PTRAIN_VIRTUAL_STAGES", "PTRAIN_PP_SPLIT"};
#define NVARS (sizeof vars / sizeof vars[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (size_t i = 0; i < NVARS; i++) unsetenv(vars[i]);
    char *text = fuzz_cstr(data, size);
    int world = size ? data[0] % 65 : 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = '\0';
        for (size_t i = 0; i < NVARS; i++)
            if (strcmp(line, vars[i] + 7) == 0 || strcmp(line, vars[i]) == 0) setenv(vars[i], eq + 1, 1);
    }
    pt_plan p;
    pt_plan_default(&p);
    pt_error_clear(); /* a refusal must leave a message of its own */
    int rc = pt_plan_from_env(&p);
    if (rc < 0 && (!pt_errmsg()[0] || strchr(pt_errmsg(), '\n'))) abort();
    if (rc >= 0 && pt_plan_validate(&p, world) == 0) {
        char line[640];
        pt_plan_summary(&p, line, sizeof line);
        if (strlen(line) + 1 >= sizeof line) abort(); /* 640 bytes hold every plan */
        pt_error_clear();
        if (pt_plan_check_model(&p, 1 + (int)(size % 48), (int)(size % 33)) != 0 &&
            (!pt_errmsg()[0] || strchr(pt_errmsg(), '\n')))
            abort();
        int dims[3];
        if (pt_plan_tp_dims(&p, dims) != 0) abort(); /* validate checked the shape */
        if ((long long)dims[0] * dims[1] * dims[2] != p.tp) abort();
        if (world > 0)
            for (int r = 0; r < world; r++) {
                int d, pp, t, s;
                if (pt_plan_coords(&p, r, &d, &pp, &t, &s) != 0) abort();
            }
    }
    free(text);
    return 0;
}
