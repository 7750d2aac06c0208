/* SPDX-License-Identifier: MIT */
/* ptrain-run's modules (bin/run/): one concern each, main.c drives them.
 *
 *   options.c   the command line: defaults, parsing, --help and --version
 *               (answered before MPI starts)
 *   setup.c     what every rank resolves alone before the first collective:
 *               model config, plan (PTRAIN_* < flags, --mode auto), data,
 *               checkpoint directory, memory
 *   agree.c     the start-up agreement (a field table) and the collective
 *               error exits
 *   liveness.c  watchdog, heartbeat, and the whole-job abort when a peer
 *               died, stopped or hangs
 *   metrics.c   --metrics: JSON Lines through jansson, every write checked
 *   loop.c      the training loop, validation, summary
 *   ckpt.c      resuming, the checkpoint saves, SIGTERM / SIGUSR1
 *   energy.c    --energy*: the options and the set-up before the agreement;
 *               energy_meter.c, energy_plan.c, energy_sweep.c the run's
 *               meter, clock plan and sweep (energy.h: what they share)
 *
 * Errors: every function that can fail returns a negative PT_E* code (-1,
 * PT_EINVAL, for bad input) with one line in pt_errmsg(), core/core.h's
 * convention; nothing here longjmps.  Exit statuses (ptrain-run(1),
 * EXIT STATUS): 0 done, 1 a runtime failure (files, memory, a library
 * error; also a metrics file that could not be written to the end), 2 bad
 * input or ranks that disagree at start-up, 3 a peer rank died, stopped or
 * hangs (the whole job is aborted), 4 a token shard changed under the run.
 */
#ifndef PTRAIN_RUN_H
#define PTRAIN_RUN_H
#include "bin/tool_util.h"
#include "core/core.h"
#include "data/shard.h"
#include "model/gpt.h"
#include "contract/plan.h"
#include "contract/settings.h"
#include "plan/search.h"
#include "energy/profile.h"

#include <stdint.h>
#include <stdio.h>

/* where a rank trains (--device) */
enum { RUN_DEVICE_CPU = 0, RUN_DEVICE_CUDA = 1 };

/* The command line (0 / NULL / -1 = not given where said). */
/* --topology FILE:COUNT options ptrain-run takes, one per kind of node (as ptrain-plan) */
#define RUN_MAX_TOPOLOGIES 16

typedef struct run_opts {
    const char *model, *data, *metrics;
    const char *model_what; /* "--model" or "PTRAIN_MODEL": where the model came from */
    int model_given;        /* 1: --model or PTRAIN_MODEL named it (else --resume's checkpoint may) */
    char model_ckpt[160];   /* the model's spelling when --resume's checkpoint gave it (model points here) */
    int layers, heads, embd, seq_len, vocab;
    long steps, batch, warmup, val_every, val_batches, log_every, threads, seed;
    long dp;                /* --dp; 0 = not given */
    /* the plan settings given as flags (lib/contract/settings.h's rows
     * ptrain-run offers, but --model and --batch, its own): their values,
     * and in flags.pinned which were given */
    pt_plan_request flags;
    float lr, min_lr, wd, clip, eps, beta1, beta2;
    int dry_run, quiet;
    double watchdog;     /* seconds without progress before the job is ended; 0 = off */
    double peak_gflops;  /* per-rank peak for MFU (--peak-gflops, PTRAIN_PEAK_GFLOPS, else set by
                          * run_setup_rank from the node model); 0 = none */
    const char *peak_what; /* "--peak-gflops" or "PTRAIN_PEAK_GFLOPS" when given, else NULL */
    const char *save_dir, *resume; /* --save-dir, --resume (NULL = not given) */
    long save_every, keep;         /* 0 = not given */
    const char *topology;          /* --topology (else PTRAIN_TOPOLOGY): node model for --mode auto
                                    * (the first when given several) */
    const char *topologies[RUN_MAX_TOPOLOGIES]; /* every --topology FILE[:COUNT], in node order */
    int ntopologies;               /* how many (0: none; PTRAIN_TOPOLOGY counts as one) */
    int explain;                   /* --explain: print the auto plan's explanation */
    /* energy (bin/run/energy.c; defaults from PTRAIN_ENERGY, the plugin's level) */
    const char *energy;            /* --energy SOURCE: auto, none, nvml, rapl, nvml,rapl */
    const char *energy_clock;      /* --energy-clock: auto, nvml, cpufreq, dry, dry:FILE */
    const char *energy_plan;       /* --energy-plan FILE|auto (NULL = no plan applied) */
    const char *energy_profile;    /* --energy-profile FILE: the profile --energy-plan auto plans from */
    const char *profile_energy;    /* --profile-energy FILE: sweep the clocks, write the profile */
    long profile_clocks, profile_steps; /* the sweep: clocks, steps at each */
    double straggler;              /* --energy-straggler PCT / 100: a dp replica this much slower is a
                                    * straggler; 0 = off */
    const char *energy_level;      /* PTRAIN_ENERGY: off, report, plan, apply (NULL: not set) */
    const char *device;            /* --device (else PTRAIN_DEVICE): cpu, cuda, auto; NULL = not given (auto) */
    const char *device_what;       /* "--device" or "PTRAIN_DEVICE": where it came from */
} run_opts;

/* What --mode auto chose, for rank 0 to print after the agreement. */
typedef struct run_auto {
    int on;               /* the plan was resolved here (--mode auto) */
    pt_search_result res; /* for --explain */
    pt_model_shape m;
    char notes[1024];     /* pt_plan_resolve's warnings */
    char machine[400];    /* "1 node x 4 tasks, node model FILE" */
} run_auto;

/* Everything a rank resolved before the first collective. */
typedef struct run_setup {
    run_opts o;
    pt_gpt_config cfg;
    pt_plan plan;
    const char *source;      /* where the plan came from: flags, env, slurm, auto... */
    pt_shard train, val;
    uint16_t *synth_train, *synth_val;
    uint64_t data_id[4];     /* train tokens, train checksum, val tokens, val checksum */
    double mem_need;         /* the plan's predicted peak per rank (bytes; pt_cost mem_peak) */
    double mem_avail;        /* memory this rank may use (bytes; 0 = unknown) */
    int device;              /* RUN_DEVICE_CPU or RUN_DEVICE_CUDA: where this rank trains */
    char device_note[400];   /* why (the run header's device line) */
    char peak_source[400];   /* where the MFU's peak comes from (the metrics header's peak_source) */
    run_auto aut;
    /* energy (bin/run/energy.c, run_energy_setup) */
    pt_energy_plan eplan;          /* --energy-plan FILE (n 0: none or auto) */
    pt_energy_profile eprofile;    /* --energy-profile FILE (ntypes 0: none) */
    pt_energy_meta eprofile_meta;
    pt_hw ehw;                     /* the node model's rates, for a modelled profile */
    double gpu_mhz[2], cpu_mhz[2]; /* the clock ranges allowed (PTRAIN_ENERGY_GPU_MHZ, _CPU_MHZ; 0 = open) */
    uint64_t energy_id;            /* the energy options and files' contents, for the agreement */
    /* what the SPANK plugin's plan (PTRAIN_PLAN) was made for: its
     * PTRAIN_MODEL and PTRAIN_BATCH; planned_for 0 when the plan was made
     * here or came without them (the start-up agreement compares them
     * with what this run trains) */
    int planned_for;
    pt_model_shape plan_model;
    long plan_batch;
    char plan_model_text[64];
} run_setup;

/* The job's nodes, learnt collectively before start-up (main.c). */
typedef struct run_nodes {
    int nnodes;
    int *tpn;                /* [nnodes] tasks on each node, nodes in rank order */
    int node;                /* this rank's node */
} run_nodes;

extern int run_rank;         /* MPI_COMM_WORLD rank (0 before MPI) */

/* ---- options.c ---- */
/* --help or --version anywhere on the command line (scanned as getopt
 * would: an option's argument is not taken for an option) sets *asked
 * (RUN_ASKED_HELP or RUN_ASKED_VERSION, else 0).  A process started alone
 * answers at once and returns 1, without MPI.  One of several ranks
 * returns 0: it must still start MPI and take part in the start-up
 * agreement, where any rank's request makes rank 0 answer and every rank
 * leave with status 0 (a rank that left before MPI_Init would leave the
 * others waiting in it). */
enum { RUN_ASKED_HELP = 1, RUN_ASKED_VERSION = 2 };
int run_early_exit(int argc, char **argv, int *asked);
/* Print the usage (RUN_ASKED_HELP) or the version to stdout. */
void run_answer(int asked);
void run_usage(FILE *f);
/* Parse argv into *o (defaults first) and the PTRAIN_MODEL, PTRAIN_BATCH,
 * PTRAIN_TOPOLOGY, PTRAIN_PEAK_GFLOPS, PTRAIN_DEVICE variables.  -1 with one line. */
int run_parse_args(int argc, char **argv, run_opts *o);
/* Where this rank trains, from o->device (auto when NULL): cpu; cuda when
 * this build has the CUDA backend and the task sees a CUDA device; auto =
 * cuda when both hold, else cpu.  Writes *device (RUN_DEVICE_*) and why
 * into note (len bytes, the run header's device line).  -1 with one line
 * when cuda is asked for (or chosen by auto) and cannot train: no CUDA
 * backend in this build (the plugin sets PTRAIN_DEVICE=cuda when it binds
 * a GPU: then only an explicit --device cpu trains on the CPU), no
 * device, or, until the CUDA kernels are wired into the ops table, always
 * (lib/backend/cuda/cuda.h: the backend's ops are NULL). */
int run_resolve_device(const run_opts *o, int *device, char *note, size_t len);

/* The run header's precision line (without "precision: "), into buf [n]:
 * what is kept in which type, and for a bf16 run on the CPU the bf16 GEMM
 * in use and its rate over fp32 sgemm measured now on one core (512^3, a
 * few ms): where the bf16 GEMM is fp32 sgemm on converted tiles (a CPU
 * without AMX-BF16: gemm_bf16.h's rule), it says bf16 saves activation
 * memory there, not time.  precision PT_PREC_*, device RUN_DEVICE_*. */
void run_precision_line(int precision, int device, char *buf, size_t n);

/* ---- setup.c ---- */
/* Resolve model, plan, data, checkpoint directory and memory for a world
 * of `world` ranks on `nodes`.  Every rank calls it; nothing collective.
 * -1 with one line (input errors: the agreement makes every rank exit 2). */
int run_setup_rank(int argc, char **argv, int world, const run_nodes *nodes, run_setup *s);
/* Release the data of run_setup_rank. */
void run_setup_free(run_setup *s);

/* ---- memory.c ---- */
/* The plan's predicted peak per rank (s->mem_need, bytes: the cost model's
 * pt_cost.mem_peak) against the memory this rank may use (s->mem_avail,
 * bytes: the least of MemAvailable and the control group's room, shared by
 * the node's ranks in nodes, and the address-space limit).  0 when it fits
 * or cannot be known; PT_EINVAL with one line naming the need, the room
 * and the single changes (--zero, --recompute, --microbatches, --batch)
 * that would fit.  world is unused.  Nothing collective. */
int run_check_memory(run_setup *s, int world, const run_nodes *nodes);
/* ---- plan.c ---- */
/* Resolve the plan: defaults < PTRAIN_* environment < flags.  When dp is
 * not given it is world / (tp * pp * sp).  A plan that does not fit the
 * world is refused listing the tp (or sp) values that would (pt_plan_list_tp,
 * pt_plan_validate).  Mode auto (--mode auto, or PTRAIN_MODE=auto) is
 * planned here by the planning handle, the sizes given by flags or PTRAIN_*
 * variables pinned, exactly as the plugin plans it; --mode auto beside a
 * plugin plan re-plans from the flags alone (the plugin's variables are its
 * choice, not the user's pins).  A plugin plan never says auto (it exports
 * the mode it chose), so PTRAIN_MODE=auto is always the user's request.
 * Writes *p, *source (where the plan came from: a static string) and, for
 * mode auto, *A (the search result and notes for --explain).  -1 (or a
 * negative PT_E* code) with one line in pt_errmsg(); nothing collective. */
int run_resolve_plan(const run_opts *o, const pt_gpt_config *cfg, int world, const run_nodes *nodes, pt_plan *p,
                     const char **source, run_auto *A);
/* The planner's rates of this job's nodes: the node model of --topology
 * (else PTRAIN_TOPOLOGY), else this node's hwloc model, else
 * pt_topo_plan_hw's estimates; its name into source.  -1 with one line. */
int run_node_hw(const run_opts *o, const run_nodes *nodes, pt_hw *hw, int *island_ranks, char *source, size_t len);

/* ---- agree.c ---- */
/* The collective start-up agreement: every rank, also one whose set-up
 * failed (ok 0, why in pt_errmsg()), contributes its record; --help or --version
 * on any rank (asked, run_early_exit) makes rank 0 answer and every rank
 * exit 0; else a failure anywhere or
 * any difference from rank 0 makes every rank exit 2 with one line from
 * rank 0 naming the ranks and fields.  Returns the hash of the agreed
 * record. */
uint64_t run_agree_startup(int ok, int asked, const run_setup *s, int world);
/* rc from a step that may fail on some ranks only: every rank learns it,
 * the lowest failing rank says why (pt_errmsg()), every rank exits 1. */
void run_agree(int rc, const char *what);
/* As run_agree, for a collective library call whose status every rank
 * shares; rank 0 prints the message. */
void run_agree_collective(int rc, const char *what);
/* Leave in order: the energy plan's cpufreq clocks back
 * (pt_clock_restore_emergency), MPI_Finalize, exit(status). */
void run_exit(int status) __attribute__((noreturn));

/* ---- liveness.c ---- */
void run_watchdog_beat(const char *phase);
void run_watchdog_start(double secs);
/* Right after MPI_Init, collective.  Returns PT_OK, or PT_EINVAL for an
 * invalid PTRAIN_HEARTBEAT (one line in pt_errmsg(); the heartbeat still
 * starts with its default timeout, so every rank takes part). */
int run_heartbeat_start(int world);
/* A peer died, stopped or hangs: print `line` (one line, stderr), put the
 * energy plan's cpufreq clocks back (pt_clock_restore_emergency) and end
 * the whole job: MPI_Abort (the launcher kills every task, stopped ones
 * too), with _exit(3) if the abort itself does not return within 10 s. */
void run_abort_job(const char *line) __attribute__((noreturn));

/* ---- metrics.c ---- */
struct json_t;
typedef struct run_metrics run_metrics;
/* Rank 0 with --metrics: create or truncate FILE (a regular file; no
 * symlink followed).  NULL with one line in pt_errmsg(). */
run_metrics *run_metrics_open(const char *path);
/* Append one record (a JSON object, stolen; NULL is a no-op) as one line,
 * written whole with one write(2).  A failed write is undone (the file is
 * cut back to its last whole line), reported once (one line on stderr)
 * and ends the metrics; run_metrics_failed says so.  m NULL: no-op. */
void run_metrics_write(run_metrics *m, struct json_t *rec);
/* A JSON number, or null for NaN and infinities (a diverged loss). */
struct json_t *run_json_num(double v);
int run_metrics_failed(const run_metrics *m);
/* Close; 0, or -1 when a record was lost or closing failed (reported). */
int run_metrics_close(run_metrics *m);

/* ---- energy.c ---- */
/* After the command line: PTRAIN_ENERGY's defaults (off: --energy none;
 * report: auto; plan: --energy-plan auto with the dry controller; apply:
 * --energy-plan auto), the clock ranges (PTRAIN_ENERGY_GPU_MHZ,
 * PTRAIN_ENERGY_CPU_MHZ: "MIN-MAX"), and the options' own checks.  -1
 * with one line. */
int run_energy_options(run_opts *o);
/* Every rank, before the agreement: load --energy-plan FILE and
 * --energy-profile FILE and check them against the plan (pp, virtual
 * stages, microbatches, schedule), the node model's rates for a modelled
 * profile, the --profile-energy output (rank 0) and the sweep's steps;
 * sets s->energy_id.  -1 with one line. */
int run_energy_setup(run_setup *s, const run_nodes *nodes);
void run_energy_setup_free(run_setup *s);

struct pt_pctx;
struct pt_pipeline;
typedef struct run_energy run_energy;
/* Collective, after the model and pipeline are built: open the meter (the
 * node's ranks share its RAPL packages), the clock controller (a cpufreq
 * one: SIGTERM without --save-dir, SIGINT and SIGHUP then put its clocks
 * back before they end the rank, energy_meter.c), plan the
 * frontier (--energy-plan), prepare the sweep (--profile-energy, from step
 * start_step + 1), install the pipeline hook; rank 0 prints what it
 * measures and sets.  NULL when nothing is measured, planned or profiled
 * (--energy none alone). */
run_energy *run_energy_start(const run_setup *s, const struct pt_pctx *ctx, struct pt_pipeline *pipe, int world,
                             long start_step);
/* Around one training step: begin before it, end after it (collective:
 * every rank, every step).  end fills the train record (rec, may be NULL)
 * and the step line's energy part ("| 5.2 J | 42 W | 237 tok/J", "" when
 * nothing is measured). */
void run_energy_step_begin(run_energy *e, long step);
void run_energy_step_end(run_energy *e, long step, double dt, double tokens, struct json_t *rec, char *line,
                         size_t len);
/* The header record's energy fields (rank 0). */
void run_energy_header(const run_energy *e, struct json_t *hdr);
/* Collective at the end: the summary's energy part (line), the done
 * record's fields, the plan's achieved-against-planned line (rank 0
 * prints it), the clocks restored. */
void run_energy_finish(run_energy *e, struct json_t *done, char *line, size_t len);
void run_energy_free(run_energy *e);

/* ---- loop.c ---- */
/* Build the model under the agreed plan, resume, train, validate, save,
 * print the summary; returns the exit status. */
int run_train(run_setup *s, uint64_t agreed, int world);

/* ---- ckpt.c ---- */
struct pt_train;
struct pt_ckpt_meta;
/* Every rank, collective: load --resume ("auto": the newest valid
 * checkpoint of --save-dir, a refused one warned about and the previous
 * tried; or a checkpoint directory: lib/ckpt's pt_ckpt_resume) into tr
 * under this run's plan and cfg; rank 0 prints what it resumed and warns when the checkpoint was
 * trained with another learning-rate schedule or AdamW settings.  Returns
 * the step to start from (0: no valid checkpoint, a fresh start); the
 * checkpoint loaded goes into which (n bytes; "" when none), so that a
 * NaN or infinity the loaded state produces can be blamed on it.  A
 * failure, or a checkpoint beyond --steps, makes every rank exit
 * (run_agree_collective, run_agree). */
long run_ckpt_resume(const run_opts *o, struct pt_train *tr, const pt_plan *plan, const pt_gpt_config *cfg,
                     char *which, size_t n);
/* With --save-dir: SIGTERM and SIGUSR1 ask for a save and a clean exit
 * (SA_RESTART); run_ckpt_stop_signal returns the signal caught, 0 = none. */
void run_ckpt_catch_signals(void);
int run_ckpt_stop_signal(void);
/* Every rank, collective: save the checkpoint of step `step` into
 * --save-dir (keeping --keep), cmeta's step and AdamW step set; its
 * directory's name into saved (len bytes).  The state is checked finite
 * first (pt_train_check_finite: weights, AdamW m and v): a NaN or an
 * infinity is never saved.  On failure (that one included: the previous
 * checkpoint and `latest` are left as they were) every rank leaves with
 * status 1 (run_exit) after the first failing rank names it. */
void run_ckpt_save(const run_opts *o, struct pt_train *tr, const pt_plan *plan, const pt_gpt_config *cfg,
                   struct pt_ckpt_meta *cmeta, long step, char *saved, size_t len);

#endif
