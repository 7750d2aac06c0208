/* What this node can measure and which clocks it can set, for ptrain-topo
 * --energy.  Reads only (NVML queries, sysfs attributes, access(2)); sets
 * nothing.  Paths under $PTRAIN_SYSFS_ROOT, NVML from $PTRAIN_NVML_LIBRARY
 * (lib/energy/sysfs.h, nvml.h). */
#ifndef PTRAIN_ENERGY_PROBE_H
#define PTRAIN_ENERGY_PROBE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The report as lines (each ending in '\n') into buf, cut to len - 1 bytes:
 * NVML (the library, each GPU's energy counter, its clocks, whether this
 * user may set them: locked clocks need root, application clocks need the
 * restriction lifted), each RAPL zone (readable or not, its range), the
 * cpufreq policies (driver, governor, frequencies, whether scaling_setspeed
 * or scaling_max_freq are writable), and a last line with the sources and
 * controllers ptrain-run's "auto" would find.  Returns the number of energy
 * sources found readable. */
int pt_energy_probe(char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
