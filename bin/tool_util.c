/* SPDX-License-Identifier: MIT */
/* Helpers shared by the command-line tools; see tool_util.h. */
#include "config.h"
#include "bin/tool_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int tool_die(int status, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", tool_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return status;
}

int tool_version(void)
{
    printf("%s (ptrain) %s\n", tool_name, PACKAGE_VERSION);
    return 0;
}

const char *tool_bpe_dir_env(void)
{
    const char *d = getenv("PTRAIN_BPE_DIR");
    return d && *d ? d : NULL;
}
