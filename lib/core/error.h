/* SPDX-License-Identifier: MIT */
/* Notes that travel beside a result (the planner's warnings, the node
 * model's sources), and PT_ERROR_LEN, the size of the one-line error message
 * that core.h's pt_fail() records and pt_errmsg() reads.  libc only: used
 * by lib/core, lib/plan, topo/ and the SPANK plugin alike.  Errors
 * themselves follow the one convention stated in core/core.h.
 */
#ifndef PTRAIN_ERROR_H
#define PTRAIN_ERROR_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of a one-line error message, its NUL included (pt_fail truncates to
 * PT_ERROR_LEN - 1 characters). */
#define PT_ERROR_LEN 512

/* Append one line to notes, a NUL-terminated buffer of len bytes holding
 * lines separated by '\n' (what travels beside a result: the planner's
 * warnings, the node model's sources): a '\n' first unless notes is empty,
 * then the line, cut to what fits.  notes NULL or len 0: nothing. */
void pt_notef(char *notes, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
