/* SPDX-License-Identifier: MIT */
/* ptrain.so: the SPANK plugin that plans a parallel training job and hands
 * the plan to every task.  See man/ptrain_spank.8 (options, plugstack
 * arguments, ptrain.conf), man/ptrain-env.7 (the variables it sets) and
 * docs/ARCHITECTURE.md ("Data flow of the main job").
 *
 * This file holds the only exported functions: each slurm_spank_* callback
 * routes by spank_context() to the file of that context, as NVIDIA pyxis's
 * pyxis_dispatch.c does (plugin.h lists the files):
 *
 *   callback          local/allocator (srun,   remote (slurmstepd)        job script
 *                     sbatch, salloc)
 *   init              options.c: the administrator's settings, the --ptrain-* options (every context)
 *   init_post_opt     srun.c: refuse a bad     stepd.c: SLURM_PMIX_FENCE  -
 *                     request before any       =ring before Slurm's
 *                     allocation               mpi/pmix plugin reads it
 *   local_user_init   srun.c (srun only):      -                          -
 *                     refuse a request no
 *                     plan satisfies
 *   user_init         -                        stepd.c: the step's plan   -
 *   task_post_fork    -                        energy.c: record the       -
 *                                              CPUs' cpufreq settings;
 *                                              lift the GPU's clock
 *                                              restriction (apply)
 *   task_init         -                        task.c: PTRAIN_*, ranks,   -
 *                                              binding, rank 0's plan
 *   task_exit         -                        energy.c: restore them     -
 *                                              (cpufreq: at the last
 *                                              task's exit)
 *   exit              planning.c: return the   energy.c, planning.c       -
 *                     node model
 *
 * Only the slurm_spank_* entry points and the plugin identification
 * symbols are exported (spank/ptrain_spank.map and -fvisibility=hidden).
 * Nothing may crash slurmstepd: every failure is a slurm_error() line and
 * a -1 return.
 */
#include "spank/plugin.h"

#pragma GCC visibility push(default)
SPANK_PLUGIN(ptrain, 1)
#pragma GCC visibility pop
#define PT_EXPORT __attribute__((visibility("default")))

PT_EXPORT int slurm_spank_init(spank_t sp, int ac, char **av)
{
    /* every context: srun parses the options, slurmstepd receives them */
    return ptsp_options_init(sp, ac, av);
}

PT_EXPORT int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    switch (spank_context()) {
    case S_CTX_LOCAL:
    case S_CTX_ALLOCATOR: return ptsp_srun_post_opt(sp);
    case S_CTX_REMOTE: return ptsp_stepd_post_opt(sp);
    default: return 0;
    }
}

PT_EXPORT int slurm_spank_local_user_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    return spank_context() == S_CTX_LOCAL ? ptsp_srun_user_init(sp) : 0;
}

PT_EXPORT int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    return spank_context() == S_CTX_REMOTE ? ptsp_stepd_user_init(sp) : 0;
}

PT_EXPORT int slurm_spank_task_post_fork(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    return spank_context() == S_CTX_REMOTE ? ptsp_energy_task_post_fork(sp) : 0;
}

PT_EXPORT int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    return spank_context() == S_CTX_REMOTE ? ptsp_task_init(sp) : 0;
}

PT_EXPORT int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    return spank_context() == S_CTX_REMOTE ? ptsp_energy_task_exit(sp) : 0;
}

/* slurmstepd at the end of the step, and srun: what the step held is
 * returned, so that a plugin kept loaded across steps holds none of it. */
PT_EXPORT int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (spank_context() == S_CTX_REMOTE) ptsp_energy_exit(sp);
    ptsp_node_free();
    return 0;
}
