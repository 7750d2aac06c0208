/* SPDX-License-Identifier: MIT */
/* Energy of the plugin without Slurm: the --ptrain-energy levels, the clock
 * ranges of ptrain.conf, and NVML's application-clock restriction that
 * --ptrain-energy=apply lifts for a task's own GPU; see spank_util.h. */
#include "spank/spank_util.h"
#include "core/core.h"
#include "energy/clock.h"
#include "energy/nvml.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const energy_names[] = {"off", "report", "plan", "apply"};

const char *pt_spank_energy_name(int level)
{
    return level >= PT_SPANK_ENERGY_OFF && level <= PT_SPANK_ENERGY_APPLY ? energy_names[level] : "?";
}

int pt_spank_parse_energy_opt(const pt_spank_conf *c, const char *what, const char *text, int *out)
{
    int lv = -1;
    for (int i = 0; i <= PT_SPANK_ENERGY_APPLY; i++)
        if (text && strcmp(text, energy_names[i]) == 0) lv = i;
    if (lv < 0)
        return pt_fail(PT_EINVAL, "ptrain: %s='%s' is invalid (valid: off, report, plan, apply)", what,
                       text ? text : "");
    if (c && lv > c->energy) {
        char allowed[64] = "";
        for (int i = 0; i <= c->energy; i++)
            pt_notef(allowed, sizeof allowed, "%s", energy_names[i]);
        for (char *p = allowed; *p; p++)
            if (*p == '\n') *p = ',';
        return pt_fail(PT_EINVAL, "ptrain: %s=%s is not allowed on this cluster (allowed: %s; energy in "
                       "ptrain.conf)", what, text, allowed);
    }
    *out = lv;
    return 0;
}

int pt_spank_parse_clock_range(const char *what, const char *text, double r[2])
{
    /* ptrain-run's parser: what the plugin passes on, ptrain-run takes */
    if (pt_clock_parse_range(text, r) != PT_OK)
        return pt_fail(PT_EINVAL, "%s='%s' is invalid (valid: " PT_CLOCK_RANGE_VALID ")", what, text ? text : "");
    return 0;
}

int pt_spank_nvml_unrestrict(const char *busid, int *was)
{
    *was = 0;
    pt_nvml *n = NULL;
    pt_nvml_dev dev;
    int restricted = 1;
    if (pt_nvml_open(&n) != PT_OK || pt_nvml_device(n, busid, &dev, NULL, 0) != PT_OK ||
        pt_nvml_get_restriction(n, dev, &restricted) != PT_OK ||
        (restricted && pt_nvml_set_restriction(n, dev, 0) != PT_OK)) {
        pt_fail(PT_EINVAL, "cannot lift the application-clock restriction of GPU %s: %s", busid, pt_errmsg());
        pt_nvml_close(n);
        return -1;
    }
    *was = restricted;
    pt_nvml_close(n);
    return 0;
}

int pt_spank_nvml_restore(const char *busid, int was)
{
    pt_nvml *n = NULL;
    pt_nvml_dev dev;
    if (pt_nvml_open(&n) != PT_OK || pt_nvml_device(n, busid, &dev, NULL, 0) != PT_OK) {
        pt_fail(PT_EINVAL, "cannot restore the clocks of GPU %s: %s", busid, pt_errmsg());
        pt_nvml_close(n);
        return -1;
    }
    int rc = 0;
    /* each step is tried; the first failure is the one reported */
    if (pt_nvml_reset_clock(n, dev, PT_NVML_APPLICATION) != PT_OK)
        rc = pt_fail(PT_EINVAL, "GPU %s: %s", busid, pt_errmsg());
    if (pt_nvml_reset_clock(n, dev, PT_NVML_LOCKED) != PT_OK && !rc)
        rc = pt_fail(PT_EINVAL, "GPU %s: %s", busid, pt_errmsg());
    if (was && pt_nvml_set_restriction(n, dev, 1) != PT_OK && !rc)
        rc = pt_fail(PT_EINVAL, "cannot restrict the application clocks of GPU %s again: %s", busid, pt_errmsg());
    pt_nvml_close(n);
    return rc;
}
