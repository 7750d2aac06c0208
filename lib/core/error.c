/* SPDX-License-Identifier: MIT */
/* pt_error: see error.h. */
#include "core/error.h"

#include <stdio.h>
#include <string.h>

int pt_verrprintf(pt_error *e, const char *fmt, va_list ap)
{
    if (!e) return -1;
    /* Arguments may alias e->text (vsnprintf with overlapping source and
     * destination is undefined behaviour): format into a temporary. */
    char tmp[PT_ERROR_LEN];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    if (n < 0) snprintf(tmp, sizeof tmp, "(unformattable error message)");
    /* one line: a message must never break the caller's log format */
    for (char *c = tmp; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
    memcpy(e->text, tmp, sizeof tmp);
    return -1;
}

int pt_errprintf(pt_error *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pt_verrprintf(e, fmt, ap);
    va_end(ap);
    return -1;
}

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
