/* SPDX-License-Identifier: MIT */
/* Energy sources: what a rank can read of the energy its hardware used.
 *
 *   nvml   the GPU's total-energy counter (nvmlDeviceGetTotalEnergyConsumption,
 *          millijoules since the driver was loaded; lib/energy/nvml.h);
 *   rapl   Linux powercap (/sys/class/powercap/intel-rapl:*: Intel RAPL, and
 *          AMD Zen's RAPL, which the kernel's intel_rapl_msr driver presents
 *          under the same names): each CPU package ("package-N", top-level
 *          zones) and its DRAM ("dram" subzones, where the CPU has them);
 *          energy_uj in microjoules, wrapping at max_energy_range_uj.  Core,
 *          uncore and psys zones are left out: core and uncore are inside
 *          the package, psys holds the packages (summing it too would count
 *          them twice).  Since the PLATYPUS fix (CVE-2020-8694) energy_uj
 *          is usually readable by root only: then there is no RAPL source;
 *   none   nothing measured.
 * A meter is a set of counters; its reading is the sum of their energy
 * since the meter was opened, each weighted by its share (a package
 * shared by the node's ranks is attributed to each in part: the caller
 * sets the shares, pt_meter_set_share).
 *
 * Wrap-around: a counter that reads less than last time has wrapped
 * (RAPL: it counts modulo its range, pt_energy_counter_delta); one that
 * wraps more than once between two reads cannot be told from one that
 * wrapped once, so read at least once per range / power (about 17 minutes
 * for a 250 W package with the usual 262 kJ range).  An NVML counter that
 * goes backwards was reset (a driver reload): the energy since the reset
 * is taken.  A RAPL counter that goes backwards with no
 * max_energy_range_uj (or from above it) wrapped or was reset by an
 * amount not known: that interval counts 0 J, never its whole value.
 *
 * All paths are under $PTRAIN_SYSFS_ROOT (lib/energy/sysfs.h); NVML is
 * $PTRAIN_NVML_LIBRARY or libnvidia-ml.so.1.  Errors: pt_fail (core.h).
 */
#ifndef PTRAIN_ENERGY_METER_H
#define PTRAIN_ENERGY_METER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { PT_METER_NVML = 1u << 0, PT_METER_RAPL = 1u << 1 };

/* The energy (in the counter's unit) between two readings `last` and `now`
 * of one counter.  RAPL's energy_uj runs from 0 up to max_energy_range_uj
 * (`range`) and starts again at 0 (Linux, Documentation/power/powercap/
 * powercap.rst), so a reading below the last one means range - last + now.
 * range 0 (no wrap known: NVML) or a last reading above range: a reading
 * below the last is a reset of the counter, and `now` is the energy since
 * (right for NVML's counter; pt_meter_read counts a RAPL counter's such
 * interval as 0, its value being the energy since boot). */
uint64_t pt_energy_counter_delta(uint64_t last, uint64_t now, uint64_t range);

/* "auto", "none", or a comma-separated list of "nvml" and "rapl" into
 * *kinds (PT_METER_* bits; auto sets both and *automatic).  PT_EINVAL
 * with one line naming the text and the valid words. */
int pt_meter_parse(const char *spec, unsigned *kinds, int *automatic);

typedef struct pt_meter pt_meter;

typedef struct pt_meter_counter {
    int kind;          /* PT_METER_NVML or PT_METER_RAPL */
    char name[48];     /* "package-0", "dram (package-0)", "GPU 0000:07:00.0" */
    char key[320];     /* the counter's identity on its node: its energy_uj path, or "nvml:BUSID" */
    double range_j;    /* wrap range in joules (0: none known) */
    double share;      /* the part attributed to this meter's owner, (0, 1]; 1 after open */
} pt_meter_counter;

/* Open the counters of `kinds` (pt_meter_parse).  gpu names the NVML
 * device (an index, PCI bus id or UUID, pt_nvml_device; NULL or "": no
 * GPU counter).  A source that cannot be read (no NVML, no device, no
 * counter, RAPL not readable by this user) is left out and said in
 * `note` (lines, may be NULL); with automatic set, sources that are simply
 * absent (no NVML library, no powercap) are left out silently.  The meter
 * may hold no counter: it then reads 0 and pt_meter_ncounters is 0.
 * PT_ENOMEM only. */
int pt_meter_open(pt_meter **out, unsigned kinds, int automatic, const char *gpu, char *note, size_t len);
void pt_meter_close(pt_meter *m);

int pt_meter_ncounters(const pt_meter *m);
const pt_meter_counter *pt_meter_counter_at(const pt_meter *m, int i);
/* Attribute the part `share` in (0, 1] of counter i to this meter. */
void pt_meter_set_share(pt_meter *m, int i, double share);

/* Energy since open (joules, >= 0, non-decreasing): the sum over counters
 * of share * (the counter's energy since open), every counter read now.
 * PT_EIO when a counter could not be read (one line naming it; the
 * reading is then the last good one). */
int pt_meter_read(pt_meter *m, double *joules);

/* One line: "nvml GPU 0000:07:00.0 + rapl package-0 (1/2), dram (1/2)", or
 * "none". */
void pt_meter_describe(const pt_meter *m, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
