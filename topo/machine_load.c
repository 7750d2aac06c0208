/* SPDX-License-Identifier: MIT */
/* The one loader of a job's machine (topo/machine_load.h). */
#include "topo/machine_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pt_machine_load(pt_plan_machine *m, int nkinds, pt_machine_kind *kinds, const int *kind_of, const int *tasks,
                    int nnodes, const pt_topo_hw_override *ov, double inter_lat_us, char *notes, size_t notes_len,
                    int *bad)
{
    memset(m, 0, sizeof *m);
    if (bad) *bad = -1;
    if (nkinds < 1 || nkinds > 1024 || nnodes < 1 || nnodes > (1 << 20))
        return pt_fail(PT_EINVAL, "machine: %d node kinds, %d nodes (valid: 1..1024 kinds, 1..%d nodes)", nkinds,
                       nnodes, 1 << 20);
    pt_topo *t = calloc((size_t)nkinds, sizeof *t);
    const pt_topo **models = calloc((size_t)nkinds, sizeof *models);
    const char **names = calloc((size_t)nkinds, sizeof *names);
    int *tk = malloc(sizeof(int) * (size_t)nnodes);
    int rc = 0, k = 0;
    if (!t || !models || !names || !tk) rc = pt_fail(PT_ENOMEM, "machine: out of memory for %d node models", nkinds);
    for (; rc == 0 && k < nkinds; k++) {
        pt_machine_kind *K = &kinds[k];
        K->from = PT_TOPO_FROM_NONE;
        if (K->model) {
            models[k] = K->model;
            K->from = PT_TOPO_FROM_PATH;
        } else if (!K->estimates) {
            if (pt_topo_plan_load(K->path, K->what, K->flags, &t[k], &K->from, notes, notes_len) < 0) {
                if (bad) *bad = k;
                rc = -1;
                break;
            }
            if (K->from != PT_TOPO_FROM_NONE) models[k] = &t[k];
        }
        K->gpus = models[k] ? models[k]->ngpus : 0;
        snprintf(K->source, sizeof K->source, "%.255s", models[k] ? models[k]->source : "defaults");
        names[k] = K->name ? K->name : K->source;
    }
    if (rc == 0) {
        for (int i = 0; i < nnodes; i++) {
            const int kk = kind_of && kind_of[i] >= 0 && kind_of[i] < nkinds ? kind_of[i] : 0;
            tk[i] = tasks && tasks[i] > 0 ? tasks[i] : kinds[kk].gpus > 0 ? kinds[kk].gpus : 1;
        }
        rc = pt_plan_machine_build(m, nkinds, models, names, kind_of, tk, nnodes, ov, inter_lat_us) < 0 ? -1 : 0;
    }
    for (int j = 0; j < k && models; j++)
        if (models[j] == &t[j]) pt_topo_free(&t[j]);
    free(t);
    free(models);
    free(names);
    free(tk);
    return rc;
}
