/* SPDX-License-Identifier: MIT */
/* Helpers shared by the command-line tools; see tool_util.h. */
#include "config.h"
#include "bin/tool_util.h"
#include "data/shard.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

_Static_assert(PT_EXIT_CHANGED == PT_SHARD_CHANGED_EXIT, "the shard reader's _exit status is the tools' exit 4");

const char *tool_name = "ptrain";

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
