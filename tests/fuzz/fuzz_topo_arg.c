/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the node-model argument FILE[:COUNT] of ptrain-plan's
 * and ptrain-run's --topology (topo/topo_plan.c, pt_topo_plan_arg_parse),
 * then the cluster the tools build from the counts (pt_plan_machine_build,
 * with the estimates in place of the models: the model files have targets
 * of their own, topo_json and topo_xml).
 *
 * The input is up to 16 arguments separated by NUL bytes; its first byte
 * picks the path buffer's size (1, 2, 8, 64 or 4096 bytes).  Each argument
 * is refused in one line, or gives a path shorter than the buffer and a
 * count in 0..2^20: 0 with the path the whole argument, else the argument
 * is the path, ':' and the count's digits.  When every argument has a count
 * (or there is one argument, then 4 nodes) and the nodes are at most 256,
 * the machine of those kinds and nodes is built as ptrain-plan builds it
 * and has them. */
#include "fuzz_util.h"
#include "core/core.h"
#include "topo/topo_plan.h"

enum { MAX_ARGS = 16, MAX_NODES = 256 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    static const size_t lens[5] = {1, 2, 8, 64, 4096};
    const size_t plen = lens[data[0] % 5];
    char *text = fuzz_cstr(data + 1, size - 1), *end = text + (size - 1);
    char paths[MAX_ARGS][4096];
    int counts[MAX_ARGS], n = 0, all_ok = 1, counted = 0;
    long sum = 0;
    for (char *s = text; s <= end && n < MAX_ARGS; s += strlen(s) + 1, n++) {
        int count = -1;
        memset(paths[n], 'x', sizeof paths[n]);
        pt_error_clear();
        if (pt_topo_plan_arg_parse("--topology", s, paths[n], plen, &count) != 0) {
            fuzz_check_msg(pt_errmsg());
            all_ok = 0;
            continue;
        }
        const char *p = paths[n];
        const size_t pl = strnlen(p, plen);
        if (pl >= plen || count < 0 || count > (1 << 20) || strncmp(p, s, pl)) abort();
        if (count == 0) {
            if (strcmp(p, s)) abort(); /* no count: the path is the argument */
        } else {
            char tail[16];
            snprintf(tail, sizeof tail, ":%d", count);
            const char *digits = s + pl + 1;
            if (pl == 0 || s[pl] != ':' || strspn(digits, "0123456789") != strlen(digits) || !*digits ||
                strtol(digits, NULL, 10) != count)
                abort();
            counted++;
            sum += count;
        }
        counts[n] = count;
    }
    free(text);
    if (!all_ok || n == 0) return 0;
    /* the nodes, as ptrain-plan lays them out: each kind's count in turn */
    int nnodes;
    if (counted == n) nnodes = (int)(sum < MAX_NODES + 1 ? sum : MAX_NODES + 1);
    else if (n == 1) nnodes = 4;
    else return 0; /* the tools refuse several models without counts */
    if (nnodes > MAX_NODES) return 0;
    int tasks[MAX_NODES], kind_of[MAX_NODES];
    const char *names[MAX_ARGS];
    for (int k = 0, i = 0; k < n; k++) {
        names[k] = paths[k];
        for (int j = 0; j < (counted == n ? counts[k] : nnodes); j++, i++) {
            kind_of[i] = k;
            tasks[i] = 1 + i % 4;
        }
    }
    pt_plan_machine m;
    pt_error_clear();
    if (pt_plan_machine_build(&m, n, NULL, names, kind_of, tasks, nnodes, NULL, 0) != 0) {
        fprintf(stderr, "machine of %d kinds, %d nodes: %s\n", n, nnodes, pt_errmsg());
        abort();
    }
    if (m.cluster.nnodes != nnodes || m.cluster.nkinds != (n > 1 ? n : 0)) abort();
    pt_plan_machine_free(&m);
    return 0;
}
