/* SPDX-License-Identifier: MIT */
/* The one error type of ptrain: a fixed-size, one-line message buffer and
 * a printf-style setter that returns -1, modelled on flux-core's
 * flux_error_t / errprintf() (flux-core src/common/libflux/types.h,
 * src/common/libutil/errprintf.c).  libc only: used by lib/core, lib/plan,
 * topo/ and the SPANK plugin alike, so a message travels through every
 * layer without nested buffers.
 */
#ifndef PTRAIN_ERROR_H
#define PTRAIN_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PT_ERROR_LEN 512

/* One line of text naming the bad value and what would be valid. */
typedef struct pt_error {
    char text[PT_ERROR_LEN];
} pt_error;

/* Format a message into e->text (truncated to PT_ERROR_LEN - 1 bytes; e may
 * be NULL, then nothing is written) and return -1, so callers write
 * `return pt_errprintf(err, "invalid x=%d (valid: 1..8)", x);`.  An
 * argument may point into e->text itself (e.g. to prefix a context:
 * `pt_errprintf(err, "file %s: %s", path, err->text)`): the message is
 * formatted into a temporary first. */
int pt_errprintf(pt_error *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Append one line to notes, a NUL-terminated buffer of len bytes holding
 * lines separated by '\n' (what travels beside a result: the planner's
 * warnings, the node model's sources): a '\n' first unless notes is empty,
 * then the line, cut to what fits.  notes NULL or len 0: nothing. */
void pt_notef(char *notes, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int pt_verrprintf(pt_error *e, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

#ifdef __cplusplus
}
#endif
#endif
