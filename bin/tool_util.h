/* SPDX-License-Identifier: MIT */
/* Helpers shared by the command-line tools (bin/data/, bin/ckpt/): one way
 * to report an error and the version, so that every tool's messages have
 * the same shape ("TOOL: what is wrong"). */
#ifndef PTRAIN_TOOL_UTIL_H
#define PTRAIN_TOOL_UTIL_H
#include <stdio.h>

/* Exit statuses, one meaning each in every tool (each man page's EXIT
 * STATUS lists those its tool uses):
 *   0 success (also --help, --version);
 *   1 a failure while working (out of memory, a write that failed) or a
 *     problem the tool was asked to find (ptrain-ckpt verify, ptrain-topo
 *     --strict warnings);
 *   2 bad input, one line naming it (options, files, values; a plan that
 *     does not fit);
 *   3 ptrain-run only: a peer rank died, stopped or hung, the job aborted;
 *   4 a token shard changed or was truncated under the reader
 *     (lib/data/shard.h's PT_SHARD_CHANGED_EXIT, asserted in tool_util.c). */
enum { PT_EXIT_OK = 0, PT_EXIT_FAIL = 1, PT_EXIT_INPUT = 2, PT_EXIT_PEER = 3, PT_EXIT_CHANGED = 4 };

/* The tool's name ("ptrain-data"), which each tool's main() sets first;
 * it starts every message of tool_die and tool_version ("ptrain" until
 * set).  Defined here, not by the tool, so that the tools' modules and
 * these helpers use it without calling back into the tool's main.c. */
extern const char *tool_name;

/* Print "TOOL: " and the printf-style message on one line of stderr.
 * Returns status (the exit status the caller passes on), so that a caller
 * writes `return tool_die(2, "...", ...)`.  No errors of its own. */
int tool_die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Print "TOOL (ptrain) VERSION" to stdout (--version).  Returns 0. */
int tool_version(void);

/* The GPT-2 tokenizer directory named by $PTRAIN_BPE_DIR, or NULL when it
 * is unset or empty (the default of --vocab-dir). */
const char *tool_bpe_dir_env(void);

#endif
