/* SPDX-License-Identifier: MIT */
/* The host-memory check before a large allocation: the one check of
 * ptrain-run (the plan's predicted peak per rank, before anything is
 * allocated) and of ptrain-ckpt convert and sample (the one-rank model and
 * the file's buffers, before they are read), so that a size beyond the
 * machine is refused in one line instead of the process being killed by
 * the kernel (exit 137, no message) after minutes of swapping or paging.
 * libc only (/proc, /sys, getrlimit).
 *
 * What a process may use is the least of: MemAvailable (/proc/meminfo)
 * shared by the `local` ranks of the job on this node; the room left under
 * the smallest memory limit of its control groups (cgroup v2 memory.max
 * minus memory.current from its own group up to the root, or v1's
 * memory.limit_in_bytes minus memory.usage_in_bytes; under Slurm with
 * task/cgroup that is the job's or step's limit on this node), shared the
 * same way; and the address-space room under RLIMIT_AS / RLIMIT_DATA
 * (ulimit -v, -d) minus what the process maps already.
 *
 * Errors: PT_OK or a negative PT_E* code with one line (core/core.h).
 */
#ifndef PTRAIN_HOSTMEM_H
#define PTRAIN_HOSTMEM_H
#include <stddef.h>

/* Memory a process may still allocate. */
typedef struct pt_mem_room {
    double bytes;      /* bytes; < 0 when unknown (nothing readable, no limit) */
    char whence[200];  /* where the number comes from, for messages: "MemAvailable 21.50 GiB shared by
                        * 2 ranks on this node", "the address-space limit (ulimit -v / -d) leaves
                        * 2.60 GiB", ...; "" when unknown */
} pt_mem_room;

/* The memory this process may allocate (above), `local` (>= 1; smaller
 * values count as 1) processes of the job sharing this node.  Reads
 * /proc/meminfo, /proc/self/cgroup with its groups' files and
 * /proc/self/statm.  No errors: what cannot be read is left out. */
void pt_mem_room_get(int local, pt_mem_room *r);

/* Compare `need` bytes with pt_mem_room_get(local).  PT_OK when it fits or
 * the room is unknown; else PT_ENOMEM with the one line
 * "WHAT needs X GiB DETAIL, but WHO may use Y GiB (WHENCE)" (X, Y in GiB,
 * two decimals; DETAIL may be "" and is placed as given, e.g. " per rank
 * (parameters ...)").  room (may be NULL) receives the room, so that a
 * caller can price alternatives against room->bytes. */
int pt_mem_check(double need, int local, const char *what, const char *detail, const char *who, pt_mem_room *room);

/* bytes / 2^30 */
static inline double pt_gib(double bytes) { return bytes / (1024.0 * 1024.0 * 1024.0); }

#endif
