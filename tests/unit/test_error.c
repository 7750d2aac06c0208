/* SPDX-License-Identifier: MIT */
/* The one error type (core/error.h) and pt_fail/pt_errmsg over it: messages
 * are one line, truncated safely, and an argument may alias the buffer being
 * written (pt_fail(code, "...: %s", pt_errmsg()) was once an overlapping
 * vsnprintf). */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tests/tap.h"

int main(void)
{
    pt_error e;
    tap_ok(pt_errprintf(&e, "invalid x=%d (valid: 1..%d)", 9, 8) == -1 &&
               strcmp(e.text, "invalid x=9 (valid: 1..8)") == 0,
           "pt_errprintf formats and returns -1: %s", e.text);
    tap_ok(pt_errprintf(NULL, "ignored %d", 1) == -1, "a NULL pt_error is allowed");

    /* aliasing: prefix a context to the message already in the buffer */
    pt_errprintf(&e, "inner %s", "detail");
    pt_errprintf(&e, "outer: %s (%s)", e.text, e.text);
    tap_ok(strcmp(e.text, "outer: inner detail (inner detail)") == 0,
           "an argument aliasing the buffer is read before it is overwritten: %s", e.text);

    /* the library's pt_fail over the thread's pt_error */
    char big[3 * PT_ERROR_LEN];
    for (size_t i = 0; i < sizeof big - 1; i++) big[i] = (char)('a' + (int)(i % 26));
    big[sizeof big - 1] = '\0';
    pt_fail(PT_EINVAL, "first %s", "cause");
    int rc = pt_fail(PT_ENOMEM, "out of memory for scratch (%s)", pt_errmsg());
    tap_ok(rc == PT_ENOMEM && strcmp(pt_errmsg(), "out of memory for scratch (first cause)") == 0,
           "pt_fail(code, \"...%%s\", pt_errmsg()) keeps the earlier message: %s", pt_errmsg());
    pt_fail(PT_EINVAL, "%s", big);
    size_t n = strlen(pt_errmsg());
    tap_ok(n == PT_ERROR_LEN - 1 && memcmp(pt_errmsg(), big, n) == 0,
           "a long message is truncated to %d bytes", PT_ERROR_LEN - 1);
    pt_fail(PT_EINVAL, "%s %s", pt_errmsg(), pt_errmsg());
    tap_ok(strlen(pt_errmsg()) == PT_ERROR_LEN - 1 && memcmp(pt_errmsg(), big, PT_ERROR_LEN - 1) == 0,
           "a long aliasing message is truncated, not garbled");
    pt_fail(PT_EIO, "line one\nline two");
    tap_ok(!strchr(pt_errmsg(), '\n'), "messages stay one line: %s", pt_errmsg());
    tap_ok(pt_error_last()->text == pt_errmsg(), "pt_error_last() is the buffer pt_errmsg() reads");
    /* pt_notef: lines joined by '\n', cut to the buffer, NULL ignored */
    char notes[24] = "";
    pt_notef(notes, sizeof notes, "one %d", 1);
    pt_notef(notes, sizeof notes, "two %s", "b");
    tap_ok(strcmp(notes, "one 1\ntwo b") == 0, "pt_notef joins lines with one newline (%zu bytes)", strlen(notes));
    pt_notef(notes, sizeof notes, "a line too long for the rest");
    tap_ok(strlen(notes) == sizeof notes - 1 && strncmp(notes, "one 1\ntwo b\na line", 18) == 0,
           "pt_notef cuts a line to the buffer (%zu bytes)", strlen(notes));
    pt_notef(notes, sizeof notes, "more");
    tap_ok(strlen(notes) == sizeof notes - 1, "pt_notef on a full buffer writes nothing");
    pt_notef(NULL, 8, "x");
    char one[1] = {'\0'};
    pt_notef(one, 0, "x");
    pt_notef(one, 1, "x");
    tap_ok(one[0] == '\0', "pt_notef with no room leaves the buffer empty");
    return tap_done();
}
