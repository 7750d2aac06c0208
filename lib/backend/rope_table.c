/* SPDX-License-Identifier: MIT */
/* pt_rope_table (ops.h): the (cos, sin) table of rope_fwd/bwd, with Llama
 * 3.1's frequency scaling (Hugging Face transformers' modeling_rope_utils:
 * _compute_default_rope_parameters, _compute_llama3_parameters).  Host code,
 * double arithmetic, one rounding to float per entry. */
#include "backend/ops.h"
#include "core/core.h"

#include <math.h>

int pt_rope_table(float *cs, int Tmax, int HS, double theta, double factor, double low_freq, double high_freq,
                  int orig_ctx)
{
    if (!cs || Tmax < 1 || HS < 2 || HS % 2 || !(theta > 1))
        return pt_fail(PT_EINVAL, "rope table: Tmax %d, HS %d, theta %g are not valid (valid: Tmax >= 1, HS even "
                       ">= 2, theta > 1, a buffer)", Tmax, HS, theta);
    if (factor > 0 && (!(low_freq > 0) || !(high_freq > low_freq) || orig_ctx < 1))
        return pt_fail(PT_EINVAL, "rope table: llama3 scaling factor %g with low_freq %g, high_freq %g, "
                       "orig_ctx %d is not valid (valid: 0 < low_freq < high_freq, orig_ctx >= 1)",
                       factor, low_freq, high_freq, orig_ctx);
    const int h = HS / 2;
    const double pi = 3.14159265358979323846;
    for (int i = 0; i < h; i++) {
        double inv = pow(theta, -(2.0 * i) / HS);
        if (factor > 0) {
            const double wavelen = 2 * pi / inv, lo_wl = orig_ctx / low_freq, hi_wl = orig_ctx / high_freq;
            if (wavelen > lo_wl) inv = inv / factor;
            else if (!(wavelen < hi_wl)) {
                const double smooth = (orig_ctx / wavelen - low_freq) / (high_freq - low_freq);
                inv = (1 - smooth) * inv / factor + smooth * inv;
            }
        }
        for (int p = 0; p < Tmax; p++) {
            const double a = (double)p * inv;
            float *e = cs + ((size_t)p * h + i) * 2;
            e[0] = (float)cos(a);
            e[1] = (float)sin(a);
        }
    }
    return PT_OK;
}
