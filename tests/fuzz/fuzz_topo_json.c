/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the topology cache JSON loader (pt_topo_from_json); a
 * model it accepts must serialise and load back. */
#include "fuzz_util.h"
#include "core/core.h"
#include "topo/topo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_cstr(data, size);
    pt_topo t;
    memset(&t, 0, sizeof t);
    if (pt_topo_from_json(&t, text, "fuzz.json") == PT_OK) {
        char *out = NULL;
        if (pt_topo_to_json(&t, &out) != PT_OK) abort();
        pt_topo u;
        memset(&u, 0, sizeof u);
        if (pt_topo_from_json(&u, out, "round-trip") != PT_OK) {
            fprintf(stderr, "round trip refused: %s\n", pt_errmsg());
            abort();
        }
        pt_topo_islands isl;
        (void)pt_topo_islands_find(&u, &isl);
        char gres[256];
        pt_topo_gres(&u, gres, sizeof gres);
        pt_topo_free(&u);
        free(out);
    }
    pt_topo_free(&t);
    free(text);
    return 0;
}
