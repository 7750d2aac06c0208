/* SPDX-License-Identifier: MIT */
/* The mode -> layout table, and the divisors of "valid values" messages.
 * The pieces the layouts share are tp_common.c's, below this table and the
 * layouts (tp1d.c, tp2d.c, tp3d.c), so no layout calls back into the file
 * that chooses it.  See layout.h. */
#include "parallel/layout.h"

#include <stdio.h>

const pt_layout *pt_layout_for(pt_mode mode)
{
    switch (mode) {
    case PT_MODE_OFF:
    case PT_MODE_1D: return &pt_layout_1d;
    case PT_MODE_2D:
    case PT_MODE_2P5D: return &pt_layout_2d;
    case PT_MODE_3D: return &pt_layout_3d;
    default: break;
    }
    pt_fail(PT_EUNSUPP, "tensor-parallel mode '%s' has no layout (valid: %s)", pt_mode_name(mode),
            PT_PLAN_MODE_NAMES(", "));
    return NULL;
}

static void list_values(char *buf, size_t len, int from, int to, int step, int divides)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int v = from; v <= to && off + 12 < len; v += step)
        if (!divides || divides % v == 0) off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? " " : "", v);
}

void pt_list_divisors(char *buf, size_t len, int n) { list_values(buf, len, 1, n, 1, n); }
