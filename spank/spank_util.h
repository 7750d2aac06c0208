/* SPDX-License-Identifier: MIT */
/* Helpers of the ptrain SPANK plugin that need no Slurm, kept apart from
 * the plugin's SPANK callbacks (dispatch.c and the files it routes to) so
 * they are unit-tested without a running Slurm (tests/slurm/test_spank_util.c,
 * test_spank_keys.c):
 *   hostlist.c     Slurm's compressed task counts and host lists, the
 *                  rendezvous port, the node kinds of node_models
 *   conf.c         the administrator's settings: ONE table of keys
 *                  (pt_spank_keys) for the defaults, ptrain.conf
 *                  (libconfig), the plugstack arguments and their messages
 *   request.c      the user's --ptrain-* options and PTRAIN_* variables
 *   bind.c         the per-task binding (mpibind-style)
 *   energy_util.c  the energy levels, clock ranges and NVML's restriction
 *
 * All functions return 0 on success and a negative PT_E* code on error (-1,
 * PT_EINVAL, for a bad value) with a one-line message in pt_errmsg()
 * (core/core.h's convention) naming the bad value and what would be valid.
 */
#ifndef PTRAIN_SPANK_UTIL_H
#define PTRAIN_SPANK_UTIL_H
#include <stddef.h>
#include <stdint.h>

#include "contract/plan.h"

/* Expand Slurm's compressed per-node task counts, the format of
 * SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE: comma-separated items
 * "N" or "N(xR)" (N tasks on each of R nodes), e.g. "2(x3),1" ->
 * {2, 2, 2, 1}.  Writes at most `cap` counts to out[] and the number of
 * nodes to *nnodes.  Errors: empty or malformed text, a count < 1 or
 * > 1048576, more than `cap` nodes.  Source: Slurm's
 * uint32_compressed_to_str() output format (src/common/slurm_step_layout.c). */
int pt_spank_parse_tasks_per_node(const char *s, int *out, int cap, int *nnodes);

/* Every host name of a Slurm host list such as "n[1-3,7],x" (-> n1, n2,
 * n3, n7, x; zero padding kept: "gpu[010-012]" -> gpu010, gpu011, gpu012;
 * a suffix after the bracket kept: "n[1-2]-ib"), in order, into
 * names[cap][len].  Writes the count to *n.  Errors: empty list,
 * unbalanced brackets, an empty or reversed range, a range of more than
 * 65536 names, more than cap names, a name longer than len - 1 bytes.
 * Source: the hostlist syntax of Slurm's hostlist_create()
 * (src/common/hostlist.c), one bracket per name. */
int pt_spank_hostlist_expand(const char *list, char *names, size_t len, int cap, int *n);

/* 1 when host `name` is in host list `list` (pt_spank_hostlist_expand's
 * syntax), 0 when not, -1 with one line when the list is malformed. */
int pt_spank_hostlist_has(const char *list, const char *name);

/* The first host name of a Slurm host list such as "n[1-3,7],x" (-> "n1"),
 * "gpu[010-012]" (-> "gpu010", zero padding kept), "a,b" (-> "a").
 * Errors: empty list, unbalanced brackets, an empty range, a name longer
 * than outlen - 1 bytes.  Source: the hostlist syntax of Slurm's
 * hostlist_create() (src/common/hostlist.c), first element only. */
int pt_spank_first_host(const char *list, char *out, size_t outlen);

/* Rendezvous port for (job_id, step_id): base + (job_id * 64 + step_id % 64)
 * mod count, so the steps of one job (up to 64 at a time) and neighbouring
 * jobs get different ports and every node computes the same one.
 * Requires 1024 <= base, 1 <= count, base + count - 1 <= 65535 (checked by
 * pt_spank_conf_check); returns the port number. */
int pt_spank_master_port(uint32_t job_id, uint32_t step_id, int base, int count);

/* Administrator settings (plugstack arguments and ptrain.conf). */
#define PT_SPANK_NODE_MODELS 16

typedef struct pt_spank_conf {
    pt_mode default_mode;      /* used when neither option nor environment asks: any mode */
    int max_tp;                /* largest tp auto may choose or a user may pin (>= 1) */
    unsigned allowed_modes;    /* bit (1u << pt_mode) per mode users may request; off always */
    int master_port_base;      /* first rendezvous port (1024..65535) */
    int master_port_count;     /* number of ports in the range (>= 1) */
    int max_pp;                /* largest pipeline size a user may ask for (>= 1) */
    int default_zero;          /* ZeRO stage of steps that ask none (0..max_zero); applied
                                * only where the plan has dp*sp > 1 (else nothing to shard) */
    int max_zero;              /* highest ZeRO stage users may ask for (0..3) */
    int default_schedule;      /* pt_schedule of steps that ask none: gpipe or 1f1b
                                * (interleaved needs per-job virtual stages) */
    unsigned allowed_schedules; /* bit (1u << pt_schedule) per schedule users may ask for */
    int default_recompute;     /* pt_recompute of steps that ask none */
    int default_precision;     /* pt_precision of steps that ask none (in allowed_precisions) */
    unsigned allowed_precisions; /* bit (1u << pt_precision) per precision users may ask for */
    char topology[4096];       /* cached node model (ptrain-topo --probe --save output, JSON or
                                * hwloc XML) the planner reads on every node; "" = build the
                                * model from hwloc on the node */
    double inter_node_gbps;    /* network bandwidth of one node (GB/s), shared by its tasks;
                                * 0 = the model's */
    double inter_node_lat_us;  /* latency of one message across nodes (microseconds); 0 = the
                                * model's */
    double gemm_gflops;        /* fp32 GEMM rate of one rank (GFLOP/s); 0 = the model's */
    double gemm_gflops_bf16;   /* bf16 GEMM rate of one rank (GFLOP/s), for bf16 plans; 0 = the model's */
    int bind;                  /* PT_SPANK_BIND_*: per-task GPU, CPU set and NIC binding */
    int energy;                /* PT_SPANK_ENERGY_*: the highest --ptrain-energy users may ask for */
    double gpu_clock_mhz[2];   /* GPU clocks energy plans may use, [min, max] MHz; {0, 0} = any */
    double cpu_clock_mhz[2];   /* CPU clocks, the same */
    /* node_models: the node model of the nodes of a host list, for
     * clusters of mixed nodes (a step over nodes of several kinds is
     * planned with each node's model); a node in none uses `topology`
     * (else its own hwloc model) */
    struct {
        char hosts[512];       /* a Slurm host list, e.g. "gpu[01-16]" */
        char path[1024];       /* its node model (ptrain-topo --save output or hwloc XML) */
    } node_model[PT_SPANK_NODE_MODELS];
    int n_node_models;
    int mixed_nodes;           /* PT_MIXED_ADAPT or PT_MIXED_REFUSE (lib/plan/plan.h) */
} pt_spank_conf;

/* --ptrain-energy levels, in order: each allows what the one below does. */
enum { PT_SPANK_ENERGY_OFF = 0, PT_SPANK_ENERGY_REPORT = 1, PT_SPANK_ENERGY_PLAN = 2, PT_SPANK_ENERGY_APPLY = 3 };

enum { PT_SPANK_BIND_NONE = 0, PT_SPANK_BIND_AUTO = 1 };

/* The node model of each of a step's nodes (nodelist: its Slurm host list,
 * nnodes names in node order): kind_of[i] = the index of the first of
 * c->node_model whose host list holds node i's name, -1 for none (the
 * default model: c->topology, else the node's own hwloc model).  Errors
 * (one line): a malformed list, a node count that is not the list's. */
int pt_spank_node_kinds(const pt_spank_conf *c, const char *nodelist, int nnodes, int *kind_of);

/* ---- the configuration keys: one table ---------------------------------- */
/* How a key's value is written (ptrain.conf / plugstack argument). */
enum {
    PT_SPANK_KEY_CONFIG,  /* config=PATH: read a ptrain.conf (plugstack only) */
    PT_SPANK_KEY_ENUM,    /* a string of `valid` (file) / the same text (plugstack), read by parse */
    PT_SPANK_KEY_INT,     /* an integer (lo..hi, checked by pt_spank_conf_check where it says so) */
    PT_SPANK_KEY_RATE,    /* a number > 0 and <= max, in unit; 0 (unset) = the node model's */
    PT_SPANK_KEY_LIST,    /* a list of strings each read by parse (file) / S[,S...] (plugstack): a bit mask */
    PT_SPANK_KEY_PATH,    /* a path, not opened here */
    PT_SPANK_KEY_HOSTMAP, /* "HOSTLIST=PATH" strings (file) / one per argument (plugstack): node_model[] */
    PT_SPANK_KEY_RANGE,   /* [min, max] MHz (file) / MIN-MAX (plugstack) */
};

/* One setting of the administrator: its names, how it is read, its
 * default, what is valid and what it does.  The ptrain.conf reader, the
 * plugstack parser, pt_spank_conf_default, the messages that list or
 * check keys and the key list of ptrain_spank(8) (tests/slurm/
 * test_spank_keys) all come from pt_spank_keys. */
typedef struct pt_spank_key {
    const char *name;      /* ptrain.conf setting; NULL: a plugstack argument only */
    const char *arg;       /* plugstack argument key; NULL: ptrain.conf only */
    int type;              /* PT_SPANK_KEY_* */
    size_t offset;         /* its field of pt_spank_conf (ENUM, INT: int; LIST: unsigned; RATE: double;
                            * RANGE: double[2]; PATH: char[]) */
    const char *valid;     /* the valid values as messages and the man page name them (ENUM, LIST, PATH) */
    const char *def;       /* the default in plugstack syntax, applied by pt_spank_conf_default;
                            * NULL: zero (unset) */
    const char *def_doc;   /* the default as the man page says it, where def is NULL */
    const char *doc;       /* what it sets: the first line of its entry in ptrain_spank(8) */
    int lo, hi;            /* INT: the range a ptrain.conf value is reported against */
    double max;            /* RATE: the largest value */
    const char *unit;      /* RATE: its unit, as pt_spank_conf_check names it */
    int (*parse)(const char *what, const char *text, int *out); /* ENUM, LIST element */
    unsigned base;         /* LIST: bits always set (allowed_modes: off) */
    const char *item;      /* LIST, HOSTMAP: how one element is named in messages */
    const char *file_form; /* LIST, HOSTMAP: the ptrain.conf form, for a value of another type */
    const char *file_msg;  /* ENUM: the one ptrain.conf message for a wrong type or value, where it has one */
    const char *arg_form;  /* the plugstack form where it differs from the file's */
    const char *arg_what;  /* how a plugstack value is named in messages, where not "plugstack KEY" */
} pt_spank_key;

extern const pt_spank_key pt_spank_keys[];
extern const int pt_spank_nkeys;

/* The key whose ptrain.conf name (file 1) or plugstack key (file 0) is the
 * first len bytes of name; NULL for none. */
const pt_spank_key *pt_spank_key_find(const char *name, size_t len, int file);

/* The header line of k's entry in ptrain_spank(8), PLUGSTACK ARGUMENTS AND
 * ptrain.conf: `.BR NAME " (TYPE: VALID; [plugstack: FORM;] default DEF)"`
 * into buf.  -1 when it does not fit len bytes. */
int pt_spank_key_man(const pt_spank_key *k, char *buf, size_t len);

/* Defaults (each key's `def` in pt_spank_keys; the rest zero): default_mode
 * off, max_tp 64, allowed_modes every mode (off, auto, 1d, 2d, 2.5d, 3d),
 * master ports 29500..30499 (base 29500, count
 * 1000), max_pp 64, default_zero 0, max_zero 3, default_schedule 1f1b,
 * allowed_schedules every schedule, default_recompute none,
 * default_precision fp32, allowed_precisions fp32 and bf16, no topology
 * file, no rate overrides, bind auto, energy plan (measuring and planning
 * need no privilege; apply must be allowed), any clock, no node_models,
 * mixed_nodes adapt. */
void pt_spank_conf_default(pt_spank_conf *c);

/* Range checks of a filled configuration (see the field comments), and
 * refusal of combinations under which requests could never run:
 * default_mode not allowed, auto without any layout (1d, 2d, 2.5d, 3d) to
 * choose from, default_zero above max_zero,
 * default_schedule interleaved or not allowed, no schedule allowed;
 * no precision allowed, default_precision not in allowed_precisions;
 * inter_node_gbps, gemm_gflops, gemm_gflops_bf16 0 or in (0, 1e9], inter_node_lat_us 0 or in
 * (0, 1e7]; bind none or auto. */
int pt_spank_conf_check(const pt_spank_conf *c);

/* Read a libconfig file over *c: settings default_mode (string), max_tp
 * (int), allowed_modes (list or array of mode strings, e.g. ["auto", "1d"]),
 * master_port_base (int), master_port_count (int), max_pp (int),
 * default_zero (int), max_zero (int), default_schedule (string),
 * allowed_schedules (list of schedule strings), default_recompute
 * (string: none, block, attention), default_precision (string: fp32,
 * bf16), allowed_precisions (list of precision strings), topology (string: a path, not
 * empty; read by the planner on each node, so not opened here),
 * inter_node_gbps, inter_node_lat_us, gemm_gflops, gemm_gflops_bf16 (positive numbers,
 * integer or float), bind (string: "none" or "auto"), energy (string: off,
 * report, plan, apply), gpu_clock_mhz and cpu_clock_mhz (a list of two
 * numbers [min, max], MHz), node_models (a list of strings "HOSTLIST=PATH",
 * at most PT_SPANK_NODE_MODELS, each host list valid), mixed_nodes (string:
 * "adapt" or "refuse").  An unknown setting, a
 * wrong type, a bad value or a syntax error is an error naming the file and
 * line; *c is left unchanged on error. */
int pt_spank_conf_load(const char *path, pt_spank_conf *c);

/* Apply one plugstack argument "key=value" (config=PATH, default_mode=M,
 * max_tp=N, master_port_base=N, master_port_count=N, max_pp=N,
 * default_zero=N, max_zero=N, default_schedule=S,
 * allowed_schedules=S[,S...], default_recompute=R, default_precision=P,
 * allowed_precisions=P[,P...], topology=PATH,
 * inter_node_gbps=X, inter_node_lat_us=X, gemm_gflops=X, gemm_gflops_bf16=X, bind=none|auto,
 * energy=LEVEL, gpu_clock_mhz=MIN-MAX, cpu_clock_mhz=MIN-MAX,
 * node_model=HOSTLIST=PATH (adds one), mixed_nodes=adapt|refuse) to *c.
 * config= loads the file at once. */
int pt_spank_conf_arg(const char *arg, pt_spank_conf *c);

/* The administrator's limits of c as lib/plan's request builder and
 * planner take them (max_tp, allowed_modes, max_pp, max_zero,
 * allowed_schedules, allowed_precisions, default_zero, mixed_nodes). */
pt_plan_limits pt_spank_conf_limits(const pt_spank_conf *c);

/* The value of plan setting `key` (a row of lib/contract/settings.h) given
 * as --ptrain-KEY or its variable (`what` names it in errors), checked
 * through pt_plan_request_set against c's limits (c NULL: none).  Errors
 * are one line prefixed "ptrain: ". */
int pt_spank_parse_setting(const pt_spank_conf *c, const char *key, const char *what, const char *text);

/* A mode requested by --ptrain-mode or PTRAIN_MODE (`what` names it in
 * errors): one of off, auto, 1d, 2d, 2.5d, 3d, and allowed by c (off is
 * always allowed; c NULL allows every mode).  Errors are one line prefixed
 * "ptrain: ". */
int pt_spank_parse_mode_opt(const pt_spank_conf *c, const char *what, const char *text,
                            pt_mode *out);

/* A group size requested by --ptrain-tp/-tp-depth/-sp or PTRAIN_TP...: a
 * decimal integer 1..1048576 (no sign, no blanks), and <= c->max_tp when
 * is_tp (c NULL skips that check). */
int pt_spank_parse_size_opt(const pt_spank_conf *c, const char *what, const char *text, int is_tp,
                            int *out);

/* A pipeline/ZeRO option (--ptrain-pp, --ptrain-microbatches,
 * --ptrain-virtual-stages, --ptrain-zero, --ptrain-schedule,
 * --ptrain-recompute, --ptrain-precision, --ptrain-pp-split) or its PTRAIN_*
 * variable, named `what` in errors, parsed into the request *req and checked
 * against c's limits (max_pp, max_zero, allowed_schedules,
 * allowed_precisions; c NULL skips them).  `key`
 * is the option's name without "--ptrain-".  Errors are one line prefixed
 * "ptrain: ". */
int pt_spank_parse_pipe_opt(const pt_spank_conf *c, const char *key, const char *what,
                            const char *text, pt_plan *req);

/* A model shape given by --ptrain-model or PTRAIN_MODEL (`what` names it):
 * a preset name or "L,H,C,T,V" (pt_model_shape_parse of lib/plan/cost.h),
 * at most 63 bytes.  Errors are one line prefixed "ptrain: ". */
int pt_spank_parse_model_opt(const char *what, const char *text);

/* A global batch given by --ptrain-batch or PTRAIN_BATCH: a decimal
 * integer 1..1048576 sequences per optimizer step. */
int pt_spank_parse_batch_opt(const char *what, const char *text, int *out);

/* ---- per-task binding, mpibind-style (LLNL mpibind: one device and a
 * CPU set near it per task, the node's cores split among its tasks) ---- */
struct pt_topo;
typedef struct pt_spank_binding {
    int gpu;              /* index into the model's GPUs (PCI bus id order), -1 = none */
    int nic;              /* index into the model's NICs (an InfiniBand/RoCE HCA), -1 = none */
    char cpus[1024];      /* the CPU set, OS indices as a list ("0-3,8"), "" = leave as is */
    char where[160];      /* what the set is near: "GPU 0000:07:00.0", "NUMA 1", "node" */
} pt_spank_binding;

/* The binding of local task `local` of the `ntasks` tasks a node runs:
 *   GPU: task i gets the i-th GPU in island order (pt_topo_device_order:
 *        GPUs in PCI bus order, those of one NVLink island together) when
 *        the model has GPUs and ntasks <= ngpus, so a tensor group of
 *        consecutive ranks, and the tp axis the planner put innermost,
 *        share an island as the planner priced them;
 *   CPU set: the PUs near the task's GPU (its PCI device's local CPUs),
 *        else near NUMA node i * nnuma / ntasks; the tasks sharing that
 *        locality split its cores evenly in core order (task k of m gets
 *        cores [k*nc/m, (k+1)*nc/m); with fewer cores than tasks, core
 *        k*nc/m); cores come from `machine` (an hwloc_topology_t of the
 *        machine the task runs on, NULL = whole PUs of the locality list),
 *        restricted to `allowed` (a CPU list, NULL = no restriction); a
 *        locality that does not meet `allowed` falls back to the whole
 *        allowed set split among all ntasks;
 *   NIC: the InfiniBand/RoCE HCA with the nearest PCI path to the GPU
 *        (lowest index on ties), else one on the task's NUMA node, else none.
 * Deterministic: the same inputs give the same binding.  -1 with a one-line
 * error on bad input (local outside 0..ntasks-1, an unreadable CPU list). */
int pt_spank_bind_compute(const struct pt_topo *t, void *machine, const char *allowed, int local,
                          int ntasks, pt_spank_binding *out);

/* bind text <-> value: "none", "auto". */
const char *pt_spank_bind_name(int b);

/* ---- energy (--ptrain-energy; ptrain-run(1), ENERGY) ---- */
/* "off", "report", "plan", "apply" for a PT_SPANK_ENERGY_* level. */
const char *pt_spank_energy_name(int level);
/* A level requested by --ptrain-energy or PTRAIN_ENERGY (`what` names it):
 * one of off, report, plan, apply, and at most c->energy (c NULL: no
 * limit).  Errors are one line prefixed "ptrain: " naming the levels the
 * cluster allows. */
int pt_spank_parse_energy_opt(const pt_spank_conf *c, const char *what, const char *text, int *out);
/* "MIN-MAX" into r (MHz: pt_clock_parse_range, plain decimals, 1 <= MIN <=
 * MAX <= 100000), for the plugstack arguments gpu_clock_mhz= and
 * cpu_clock_mhz=. */
int pt_spank_parse_clock_range(const char *what, const char *text, double r[2]);
/* At a task's start (root, slurmstepd): lift NVML's application-clock
 * restriction of the GPU at PCI bus id busid (nvmlDeviceSetAPIRestriction
 * with NVML_RESTRICTED_API_SET_APPLICATION_CLOCKS, NVML_FEATURE_DISABLED),
 * so that the task's own process may set that GPU's clocks and no other.
 * NVML is dlopen'ed (lib/energy/nvml.h), never linked.  *was: 1 when it
 * was restricted (pt_spank_nvml_restore puts it back), 0 when already
 * lifted (left alone).  -1 with one line: no NVML, no such GPU, not
 * permitted.  NOT VERIFIED ON A REAL GPU (only against the tests' stand-in
 * NVML). */
int pt_spank_nvml_unrestrict(const char *busid, int *was);
/* At the task's exit: the GPU's application and locked clocks back to the
 * defaults (nvmlDeviceResetApplicationsClocks, nvmlDeviceResetGpuLockedClocks:
 * a task that died leaves none set), and the restriction back when was is
 * 1.  -1 with one line (the first failure; the other steps are still
 * tried). */
int pt_spank_nvml_restore(const char *busid, int was);

/* The cpufreq settings of a step's CPUs as slurmstepd (root) found them
 * before its tasks ran, so that what a task killed by SIGKILL left changed
 * (an energy plan's clocks: ptrain-run restores them itself on every other
 * end) can be written back at its exit.  Only these files are read or
 * written: /sys/devices/system/cpu/cpuN/cpufreq/scaling_max_freq and
 * scaling_setspeed, under $PTRAIN_SYSFS_ROOT of slurmstepd's own
 * environment (the tests' fake trees; never the job's environment, which
 * the user controls), N a CPU number. */
typedef struct pt_spank_cpufreq_cpu {
    int cpu;                    /* OS index */
    unsigned long long max_khz; /* scaling_max_freq found, 0 none */
    unsigned long long set_khz; /* scaling_setspeed found (the userspace governor), 0 none */
} pt_spank_cpufreq_cpu;
typedef struct pt_spank_cpufreq {
    int n, cap;
    pt_spank_cpufreq_cpu *cpu; /* [n] */
} pt_spank_cpufreq;

/* Record the settings of cpus[0..ncpus-1] (OS indices) not recorded yet; a
 * CPU without cpufreq or without a readable number is left out.  0, or -1
 * (out of memory, one line); what was recorded stays. */
int pt_spank_cpufreq_save(pt_spank_cpufreq *s, const int *cpus, int ncpus);

/* Write back each recorded setting that reads otherwise now and that the
 * job's user could have written (uid 0 any; else the file's owner, group or
 * other write bit for uid, gid and the supplementary groups gids[0..ngids-1]):
 * a change made by someone else (an administrator, a file the user may not
 * write) is left alone.  *restored: the settings written; `note` (len bytes,
 * may be NULL) lists them, "CPU 3 scaling_setspeed 1500000 -> 2200000 kHz",
 * comma-separated, cut to fit.  0, or -1 with the first failure in one line
 * (the others are still tried). */
int pt_spank_cpufreq_restore(const pt_spank_cpufreq *s, unsigned uid, unsigned gid, const unsigned *gids, int ngids,
                             int *restored, char *note, size_t len);
void pt_spank_cpufreq_free(pt_spank_cpufreq *s);

#endif
