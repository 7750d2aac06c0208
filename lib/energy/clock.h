/* SPDX-License-Identifier: MIT */
/* Clock controllers: set the clock a rank's device runs at, one pipeline
 * instruction at a time (Perseus's per-instruction frequency plan).
 *
 *   nvml     the rank's GPU: nvmlDeviceSetGpuLockedClocks(f, f) (root or
 *            CAP_SYS_ADMIN), else nvmlDeviceSetApplicationsClocks(memory
 *            clock, f), which any user may call while the GPU's
 *            application-clock restriction is lifted (the SPANK plugin
 *            does that for a task's own GPU under --ptrain-energy=apply);
 *            the offered clocks: nvmlDeviceGetSupportedGraphicsClocks at
 *            the top memory clock.  NOT VERIFIED ON A REAL GPU (only
 *            against tests/energy/fake_nvml.c).
 *   cpufreq  the rank's CPUs (its affinity): with the userspace governor,
 *            scaling_setspeed; else scaling_max_freq (a cap the governor
 *            stays under); the offered clocks: scaling_available_frequencies,
 *            else cpuinfo_min_freq..cpuinfo_max_freq in 8 even steps.  Both
 *            files are root's unless an administrator opened them; several
 *            ranks whose CPUs share a policy set each other's clock.
 *   dry      sets nothing: it offers the clocks the device would (NVML's or
 *            cpufreq's list when it can read them, else the range given)
 *            and counts, and with a log file writes every change there.
 * A clock asked for is rounded to the nearest offered one; a call that
 * would not change the clock does nothing (no system call).  Closing (or
 * pt_clock_reset) restores what opening found: locked or application
 * clocks reset, scaling_setspeed / scaling_max_freq written back; a
 * process that ends otherwise calls pt_clock_restore_emergency.  One thread
 * at a time sets the clocks of a process.
 * Paths are under $PTRAIN_SYSFS_ROOT (lib/energy/sysfs.h).  Errors:
 * pt_fail (core.h), one line. */
#ifndef PTRAIN_ENERGY_CLOCK_H
#define PTRAIN_ENERGY_CLOCK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { PT_CLOCK_NONE = 0, PT_CLOCK_NVML = 1, PT_CLOCK_CPUFREQ = 2, PT_CLOCK_DRY = 3 };

/* The highest clock (MHz) a plan, a profile or an allowed range may name:
 * 100 GHz, far above any device's, so that a number such as 1.7e308 is
 * refused rather than planned with. */
#define PT_CLOCK_MAX_MHZ 100000.0
/* What pt_clock_parse_range accepts, for messages. */
#define PT_CLOCK_RANGE_VALID "MIN-MAX in MHz, plain decimals, 1 <= MIN <= MAX <= 100000, e.g. 1100-1980"

/* An allowed clock range "MIN-MAX" (PTRAIN_ENERGY_GPU_MHZ, the plugin's
 * gpu_clock_mhz=...) into r[0], r[1] (MHz): each a plain decimal (digits,
 * at most one '.', digits; no sign, exponent, hex, inf or space), 1 <= MIN
 * <= MAX <= PT_CLOCK_MAX_MHZ.  PT_EINVAL with one line "'TEXT' is not a
 * clock range (valid: " PT_CLOCK_RANGE_VALID ")"; r is left alone then. */
int pt_clock_parse_range(const char *text, double r[2]);

/* "auto", "nvml", "cpufreq", "dry" or "dry:FILE" into *kind (auto:
 * PT_CLOCK_NONE, decided by pt_clock_open) and *log (FILE of dry:FILE, else
 * NULL; points into spec).  PT_EINVAL with one line. */
int pt_clock_parse(const char *spec, int *kind, const char **log);

typedef struct pt_clock pt_clock;

/* Open the controller of `kind` (PT_CLOCK_NONE: nvml when gpu names a
 * device NVML can clock, else cpufreq on cpus[0..ncpus-1]) for the GPU
 * `gpu` (pt_nvml_device's names; NULL: none) or the CPUs (OS indices).
 * lo_mhz, hi_mhz: the clocks allowed (an administrator's range; 0 = no
 * bound): clocks outside are not offered.  A test write (the top offered
 * clock, then restored) checks that the clocks can be set.  dry_log:
 * the dry controller's log file (created or appended; a regular file, no
 * symbolic link followed), NULL for none.
 * Errors: PT_EUNSUPP with one line when the clocks cannot be set here (no
 * NVML or no permission, no cpufreq or its files not writable, a VM),
 * so that the caller can say so and run at the default clocks; PT_EINVAL
 * when no offered clock lies in [lo_mhz, hi_mhz]; PT_EIO (the dry log);
 * PT_ENOMEM. */
int pt_clock_open(pt_clock **out, int kind, const char *gpu, const int *cpus, int ncpus, double lo_mhz,
                  double hi_mhz, const char *dry_log);
/* Restore the clocks found at open and free; NULL is a no-op.  Errors of
 * the restore are reported by pt_clock_reset only. */
void pt_clock_close(pt_clock *c);

/* For a process that is ending without closing its controllers: a handler
 * of SIGTERM, SIGINT or SIGHUP (also while the process is blocked in MPI,
 * where a flag for its loop would never be seen), an exit or _exit path.
 * Writes back the cpufreq file (scaling_setspeed or scaling_max_freq) of
 * every CPU of every open cpufreq controller of this process with the text
 * found at its open, prepared then: open(2), write(2), fstat(2),
 * ftruncate(2), close(2), nanosleep(2) and gettid(2) only, no allocation,
 * no lock, so it is async-signal-safe.  It writes once per process: a
 * later call (a signal handler after the heartbeat's abort restored)
 * waits for the first to finish and writes nothing, since a SIGKILL may
 * follow at any moment.
 * A thread setting a clock meanwhile is waited for (a second at most); from
 * the call on, pt_clock_set and pt_clock_reset of this process write
 * nothing, and pt_clock_close keeps (leaks) what it would free.  NVML
 * clocks are not reset here (NVML is not async-signal-safe): under Slurm
 * the plugin resets the task's GPU at its exit (--ptrain-energy=apply).
 * Returns the number of files that could not be written (0: all, or
 * nothing to write); errno is preserved. */
int pt_clock_restore_emergency(void);
/* Restore the clocks found at open (the controller stays usable). */
int pt_clock_reset(pt_clock *c);

int pt_clock_kind(const pt_clock *c);
/* The offered clocks, MHz ascending; returns their number (>= 1). */
int pt_clock_freqs(const pt_clock *c, const double **mhz);
/* Run at the offered clock nearest mhz (> 0).  No call when it is the
 * current one.  PT_EIO / PT_EUNSUPP with one line when setting fails. */
int pt_clock_set(pt_clock *c, double mhz);
/* The clock last set (MHz), 0 while at the default. */
double pt_clock_current(const pt_clock *c);
/* Clock changes made (set calls that changed the clock). */
long pt_clock_changes(const pt_clock *c);
/* One line: "nvml GPU 0000:07:00.0 (locked clocks), 8 clocks 810-1980 MHz". */
void pt_clock_describe(const pt_clock *c, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif
