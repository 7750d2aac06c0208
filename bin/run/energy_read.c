/* SPDX-License-Identifier: MIT */
/* ptrain-run's one reading of a rank's meter, shared by the meter's step
 * and hook (energy_meter.c) and the sweep's idle power (energy_sweep.c):
 * below both, so neither calls into the other for it (bin/run/energy.h;
 * energy.c has the overview). */
#include "energy.h"
#include "energy/meter.h"

#include <stdio.h>

double run_energy_read(run_energy *e, double *j)
{
    double t = pt_now();
    *j = 0;
    if (e->measuring && pt_meter_read(e->meter, j) != PT_OK) {
        fprintf(stderr, "ptrain-run: warning: rank %d: %s; energy is not measured on this rank from here on\n",
                run_rank, pt_errmsg());
        e->measuring = 0;
    }
    return t;
}
