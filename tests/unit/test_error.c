/* SPDX-License-Identifier: MIT */
/* The one error convention (core/core.h): pt_fail records one line per
 * thread and returns the code, pt_errmsg reads it; messages are one line,
 * truncated safely, and an argument may alias the buffer being written
 * (pt_fail(code, "...: %s", pt_errmsg()) was once an overlapping
 * vsnprintf); pt_error_save/restore bracket a quiet check. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "tests/tap.h"

static void *other_thread(void *arg)
{
    char *seen = arg;
    snprintf(seen, 64, "%s", pt_errmsg()); /* this thread's: empty */
    pt_fail(PT_EIO, "from the other thread");
    return NULL;
}

int main(void)
{
    tap_ok(pt_fail(PT_EINVAL, "invalid x=%d (valid: 1..%d)", 9, 8) == PT_EINVAL && PT_EINVAL == -1 &&
               strcmp(pt_errmsg(), "invalid x=9 (valid: 1..8)") == 0,
           "pt_fail formats and returns its code (PT_EINVAL is -1): %s", pt_errmsg());
    tap_ok(pt_fail(PT_EUNSUPP, "ignored %d", 1) == PT_EUNSUPP && pt_fail(PT_OK, "%s", "") == PT_OK,
           "pt_fail returns whichever code it is given");

    /* aliasing: prefix a context to the message already in the buffer */
    pt_fail(PT_EINVAL, "inner %s", "detail");
    pt_fail(PT_EINVAL, "outer: %s (%s)", pt_errmsg(), pt_errmsg());
    tap_ok(strcmp(pt_errmsg(), "outer: inner detail (inner detail)") == 0,
           "an argument aliasing the buffer is read before it is overwritten: %s", pt_errmsg());

    /* truncation and one-line messages */
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
    /* a quiet check keeps the caller's message: save, fail, restore */
    pt_fail(PT_EINVAL, "the caller's message");
    pt_errsave keep;
    pt_error_save(&keep);
    pt_fail(PT_EINVAL, "a quiet check's refusal");
    pt_error_restore(&keep);
    tap_ok(strcmp(pt_errmsg(), "the caller's message") == 0, "pt_error_restore puts the saved message back: %s",
           pt_errmsg());
    pt_error_clear();
    tap_ok(pt_errmsg()[0] == '\0', "pt_error_clear empties the message");
    /* per thread, as errno: another thread neither sees nor changes this one's message */
    pt_fail(PT_EINVAL, "this thread's message");
    char seen[64] = "unset";
    pthread_t t;
    int made = pthread_create(&t, NULL, other_thread, seen) == 0;
    if (made) pthread_join(t, NULL);
    tap_ok(made && seen[0] == '\0' && strcmp(pt_errmsg(), "this thread's message") == 0,
           "the message is per thread (the other thread saw '%s'; here: %s)", seen, pt_errmsg());
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
