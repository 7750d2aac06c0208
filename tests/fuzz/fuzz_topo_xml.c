/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the hwloc XML topology loader with ptrain's Ptrain*
 * attributes and bandwidth distances (pt_topo_load_file). */
#include "fuzz_util.h"
#include "core/core.h"
#include "topo/topo.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    setenv("HWLOC_HIDE_ERRORS", "1", 1);
    /* hwloc's own XML parser: its libxml2 backend (hwloc_xml_libxml.so)
     * leaks on malformed input (regress/topo_xml/hwloc-libxml-leak.xml;
     * a library leak, reported from the unloaded plugin), which would stop
     * every run at the first such input.  Both backends hand ptrain the
     * same objects. */
    setenv("HWLOC_LIBXML_IMPORT", "0", 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0 || data[0] != '<') return 0; /* the JSON path has its own target */
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    pt_topo t;
    memset(&t, 0, sizeof t);
    if (pt_topo_load_file(&t, path) == PT_OK) {
        char *out = NULL;
        if (pt_topo_to_json(&t, &out) != PT_OK) abort();
        free(out);
        pt_topo_islands isl;
        (void)pt_topo_islands_find(&t, &isl);
    }
    pt_topo_free(&t);
    close(fd);
    return 0;
}
