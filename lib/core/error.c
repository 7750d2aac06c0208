/* SPDX-License-Identifier: MIT */
/* pt_notef: see error.h (pt_fail and pt_errmsg are in core.c). */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>

void pt_notef(char *notes, size_t len, const char *fmt, ...)
{
    if (!notes || len == 0) return;
    size_t l = 0;
    while (l + 1 < len && notes[l]) l++;
    notes[l] = '\0';
    if (l && l + 1 < len) notes[l++] = '\n', notes[l] = '\0';
    if (l + 1 >= len) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(notes + l, len - l, fmt, ap);
    va_end(ap);
}
