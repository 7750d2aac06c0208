/* NVML, loaded at run time: the NVIDIA Management Library is opened with
 * dlopen (libnvidia-ml.so.1, or the path in $PTRAIN_NVML_LIBRARY), so
 * nothing in ptrain links it and a node without the driver simply has no
 * NVML.  Only the calls ptrain uses are looked up; the types are NVML's
 * ABI (nvml.h): every function returns an nvmlReturn_t (an int, 0 =
 * NVML_SUCCESS), devices are opaque handles.  libc and libdl only: the
 * SPANK plugin links it too.
 *
 * What is used (NVML API reference, docs.nvidia.com/deploy/nvml-api):
 *   nvmlInit_v2, nvmlShutdown, nvmlErrorString,
 *   nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2,
 *   nvmlDeviceGetHandleByPciBusId_v2, nvmlDeviceGetHandleByUUID,
 *   nvmlDeviceGetPciInfo_v3 (bus id), nvmlDeviceGetName,
 *   nvmlDeviceGetTotalEnergyConsumption (mJ since the driver was loaded;
 *     Volta and newer),
 *   nvmlDeviceGetSupportedMemoryClocks, nvmlDeviceGetSupportedGraphicsClocks,
 *   nvmlDeviceGetClockInfo (NVML_CLOCK_SM),
 *   nvmlDeviceSetGpuLockedClocks / nvmlDeviceResetGpuLockedClocks (root or
 *     CAP_SYS_ADMIN), nvmlDeviceSetApplicationsClocks /
 *     nvmlDeviceResetApplicationsClocks (any user once the
 *     NVML_RESTRICTED_API_SET_APPLICATION_CLOCKS restriction is lifted),
 *   nvmlDeviceGetAPIRestriction / nvmlDeviceSetAPIRestriction (root).
 * A symbol the library lacks leaves that capability off (PT_EUNSUPP when
 * asked for), never a crash.
 *
 * Errors: pt_fail (core.h) with one line naming the call and NVML's own
 * text; PT_EUNSUPP where the library, a device or a capability is absent
 * or NVML says NOT_SUPPORTED or NO_PERMISSION (pt_nvml_denied says which),
 * PT_EIO for other NVML failures, PT_EINVAL for a bad device name.
 * NOT VERIFIED ON A REAL GPU: this code has only run against the fake
 * library of the tests (tests/energy/fake_nvml.c).
 */
#ifndef PTRAIN_ENERGY_NVML_H
#define PTRAIN_ENERGY_NVML_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PT_NVML_ENV "PTRAIN_NVML_LIBRARY"
#define PT_NVML_DEFAULT "libnvidia-ml.so.1"

typedef struct pt_nvml pt_nvml;
typedef void *pt_nvml_dev; /* an nvmlDevice_t */

/* Load and initialise NVML ($PTRAIN_NVML_LIBRARY when set and not empty,
 * else libnvidia-ml.so.1 on the loader's path).  PT_EUNSUPP when the
 * library cannot be loaded or lacks nvmlInit_v2 (no driver: the common
 * case off GPU nodes), PT_EIO when nvmlInit_v2 fails, PT_ENOMEM. */
int pt_nvml_open(pt_nvml **out);
/* nvmlShutdown and dlclose; NULL is a no-op. */
void pt_nvml_close(pt_nvml *n);
/* The library that was loaded (a path or the soname). */
const char *pt_nvml_library(const pt_nvml *n);

/* Number of devices NVML sees. */
int pt_nvml_count(pt_nvml *n, int *count);
/* The device named by `which`: a decimal NVML index ("0"), a PCI bus id
 * ("0000:07:00.0", any case, the domain may be 4 or 8 digits) or a UUID
 * ("GPU-...").  Its PCI bus id (lower case, NVML's form) into busid (may
 * be NULL).  PT_EINVAL for text that is none of these, PT_EUNSUPP when no
 * such device. */
int pt_nvml_device(pt_nvml *n, const char *which, pt_nvml_dev *dev, char *busid, size_t len);
/* The device's marketing name ("NVIDIA H100 80GB HBM3"), "" when unknown. */
void pt_nvml_name(pt_nvml *n, pt_nvml_dev dev, char *name, size_t len);

/* Total energy since the driver was loaded, millijoules (a 64-bit counter
 * that does not wrap in practice; it restarts at a driver reload). */
int pt_nvml_energy_mj(pt_nvml *n, pt_nvml_dev dev, unsigned long long *mj);

/* The graphics clocks the device supports at its highest memory clock
 * (MHz, ascending, at most cap of them, duplicates dropped) and that
 * memory clock.  PT_EUNSUPP when it lists none. */
int pt_nvml_clocks(pt_nvml *n, pt_nvml_dev dev, unsigned *mem_mhz, unsigned *gfx_mhz, int cap, int *count);
/* The SM clock now (MHz). */
int pt_nvml_clock_now(pt_nvml *n, pt_nvml_dev dev, unsigned *mhz);

/* How a clock was set. */
enum { PT_NVML_LOCKED = 1, PT_NVML_APPLICATION = 2 };
/* Run the graphics clock at mhz: nvmlDeviceSetGpuLockedClocks(mhz, mhz)
 * when *how is 0 or PT_NVML_LOCKED; when that is refused (NO_PERMISSION:
 * not root) and *how is 0, nvmlDeviceSetApplicationsClocks(mem_mhz, mhz),
 * which any user may call while the application-clock restriction is
 * lifted (the SPANK plugin does that for a task's own GPU).  *how is set
 * to the method that worked, so later calls go straight to it. */
int pt_nvml_set_clock(pt_nvml *n, pt_nvml_dev dev, unsigned mhz, unsigned mem_mhz, int *how);
/* Undo pt_nvml_set_clock: nvmlDeviceResetGpuLockedClocks or
 * nvmlDeviceResetApplicationsClocks for `how`. */
int pt_nvml_reset_clock(pt_nvml *n, pt_nvml_dev dev, int how);

/* The application-clock API restriction: *restricted 1 when only root may
 * change application clocks (NVML's default), 0 when any user may. */
int pt_nvml_get_restriction(pt_nvml *n, pt_nvml_dev dev, int *restricted);
/* Set it (root only): nvmlDeviceSetAPIRestriction(dev,
 * NVML_RESTRICTED_API_SET_APPLICATION_CLOCKS, restricted ?
 * NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED). */
int pt_nvml_set_restriction(pt_nvml *n, pt_nvml_dev dev, int restricted);

/* Whether the last failing call was refused for permission
 * (NVML_ERROR_NO_PERMISSION). */
int pt_nvml_denied(const pt_nvml *n);

#ifdef __cplusplus
}
#endif
#endif
