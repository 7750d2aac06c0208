/* SPDX-License-Identifier: MIT */
/* Minimal TAP producer for C tests (read by automake's tap-driver.sh). */
#ifndef PTRAIN_TAP_H
#define PTRAIN_TAP_H
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_n = 0, tap_failed = 0;

static inline void tap_plan(int n) { printf("1..%d\n", n); fflush(stdout); }
static inline void tap_skip_all(const char *why) { printf("1..0 # SKIP %s\n", why); fflush(stdout); }

static inline int tap_ok(int cond, const char *fmt, ...)
{
    va_list ap;
    tap_n++;
    printf("%s %d - ", cond ? "ok" : "not ok", tap_n);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    if (!cond) tap_failed++;
    return cond;
}

static inline void tap_diag(const char *fmt, ...)
{
    va_list ap;
    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

/* Print the plan at the end ("1..N" trailing is valid TAP) and exit. */
static inline int tap_done(void)
{
    printf("1..%d\n", tap_n);
    fflush(stdout);
    return tap_failed ? 1 : 0;
}
#endif
