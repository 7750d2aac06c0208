/* Small sysfs helpers of lib/energy (internal): every path is taken under
 * $PTRAIN_SYSFS_ROOT (empty or unset: the real /sys), so the tests run the
 * energy sources and clock controllers against fake trees. */
#ifndef PTRAIN_ENERGY_SYSFS_H
#define PTRAIN_ENERGY_SYSFS_H

#include <stddef.h>
#include <stdint.h>

#define PT_SYSFS_ENV "PTRAIN_SYSFS_ROOT"

/* root + rel ("/sys/class/powercap") into buf; -1 when it does not fit. */
int pt_sysfs_path(char *buf, size_t len, const char *rel);

/* Read a small attribute (at most len - 1 bytes, trailing newline cut) of
 * a regular file; O_NONBLOCK, so a FIFO in a fake tree cannot block.
 * Returns 0, or -errno (-EACCES when not permitted). */
int pt_sysfs_read(const char *path, char *buf, size_t len);
/* The attribute as one unsigned decimal number: 0, -errno, or -EINVAL for
 * text that is not a number. */
int pt_sysfs_read_u64(const char *path, uint64_t *v);
/* Write text to an existing regular file (no creation, O_NOFOLLOW on the
 * last component); 0 or -errno. */
int pt_sysfs_write(const char *path, const char *text);

#endif
