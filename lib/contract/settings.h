/* SPDX-License-Identifier: MIT */
/* The plan settings as one table (issue 35): one row per setting a user
 * can pin, with its key, its PTRAIN_* variable, its pin bit, the front
 * ends that offer it as a flag, a one-line description of its valid
 * values, and its parser.  Everything that names a plan setting takes it
 * from here: pt_plan_request_set dispatches on the rows,
 * pt_plan_request_env reads their variables, pt_plan_request_keys lists
 * them, and tests/unit/test_settings_docs.sh holds the man pages, ptrain-run's
 * and ptrain-plan's --help and the plugin's options to the rows.
 *
 * Spelling, for every row: the key ("tp-depth"); the plugin's option
 * "--ptrain-" KEY; ptrain-run's and ptrain-plan's flag "--" KEY; the
 * variable "PTRAIN_" KEY upper-cased with '-' as '_' (PTRAIN_TP_DEPTH).
 *
 * Adding a setting: a pt_plan (contract/plan.h) or pt_plan_request field,
 * a PT_PIN_ bit, a row in settings.c with its parser (and, for a pt_plan
 * field, its case in pt_plan_request_overlay), its use, and the man pages
 * the test names.  The front ends that offer it take their flag (and
 * ptrain-run its --help lines) from the row.  libc only, as the rest of lib/contract. */
#ifndef PTRAIN_CONTRACT_SETTINGS_H
#define PTRAIN_CONTRACT_SETTINGS_H
#include <stddef.h>

#include "core/core.h"
#include "contract/model.h"
#include "contract/plan.h"

/* The settings a request can pin, one bit each. */
enum {
    PT_PIN_MODE = 1u << 0,
    PT_PIN_TP = 1u << 1,
    PT_PIN_TP_DEPTH = 1u << 2,
    PT_PIN_SP = 1u << 3,
    PT_PIN_PP = 1u << 4,
    PT_PIN_MICROBATCHES = 1u << 5,
    PT_PIN_SCHEDULE = 1u << 6,
    PT_PIN_VIRTUAL_STAGES = 1u << 7,
    PT_PIN_SPLIT = 1u << 8,
    PT_PIN_ZERO = 1u << 9,
    PT_PIN_RECOMPUTE = 1u << 10,
    PT_PIN_RANK_ORDER = 1u << 11,
    PT_PIN_TP_ORDER = 1u << 12,
    PT_PIN_MODEL = 1u << 13, /* the model and batch were given (not the defaults) */
    PT_PIN_BATCH = 1u << 14,
    PT_PIN_PRECISION = 1u << 15,
};

/* A request: what to plan, and for which model and batch.  plan holds the
 * values, pinned which of them the user gave; the others are the
 * defaults of pt_plan_request_init (mode: the administrator's default;
 * schedule and recompute: the administrator's defaults; sizes chosen by
 * the planner).  A caller may set a field directly and its bit. */
typedef struct pt_plan_request {
    pt_plan plan;
    unsigned pinned;       /* PT_PIN_* */
    char model_name[64];   /* as given: a preset name or L,H,C,T,V */
    pt_model_shape model;  /* its shape */
    int global_batch;      /* sequences per optimizer step */
} pt_plan_request;

/* The model and global batch a job trains when nothing names them: the
 * plugin's request and ptrain-run (--model, --batch) both start from them
 * (ptrain-plan's are its own: gpt2-124M, 512). */
#define PT_DEFAULT_MODEL "tiny"
#define PT_DEFAULT_BATCH 8

/* The request's defaults: mode default_mode, schedule 1f1b, recompute
 * none, precision fp32, model PT_DEFAULT_MODEL, global batch
 * PT_DEFAULT_BATCH, nothing pinned. */
void pt_plan_request_init(pt_plan_request *r, pt_mode default_mode);

/* The keys of pt_plan_request_set and pt_plan_request_env, the table's
 * keys in its order, comma-separated: "mode, tp, tp-depth, sp, pp,
 * microbatches, schedule, virtual-stages, pp-split, zero, recompute,
 * precision, rank-order, tp-order, model, batch". */
const char *pt_plan_request_keys(void);

/* Parse `text` for key into r and pin it; `what` names the value in the
 * message ("--ptrain-tp", "PTRAIN_TP", "--tp").  lim (may be NULL: no
 * limits) is checked where a single value can exceed it: modes,
 * max_tp, max_pp, max_zero, schedules, precisions.  The messages (one line, no
 * prefix):
 *   "<what>='<text>' is invalid (valid: an integer 1..1048576 that divides
 *    the tasks on every node)", "<what>=<v> exceeds this cluster's
 *    max_tp=<n>", "<what>=<m> is not allowed on this cluster
 *    (allowed_modes in ptrain.conf)", "<what>='<text>' is invalid (valid
 *    ZeRO stages: 0, 1, 2, 3)", "<what>=<p> is not allowed on this cluster
 *    (allowed_precisions in ptrain.conf)", the batch's, the model's, the
 *    schedule's, recompute's, precision's, split's and orders' own ("invalid <what> '<text>'
 *    (valid: ...)").
 * 0, or -1 (r unchanged) with the message; an unknown key is -1 naming the
 * valid keys. */
int pt_plan_request_set(pt_plan_request *r, const pt_plan_limits *lim, const char *key, const char *what,
                        const char *text);

/* The environment a request is read from: 1 and the value in buf when
 * `name` is set and not empty, 0 when unset or empty, -1 when the value
 * does not fit buf [len] (never cut: a cut value could pass as another). */
typedef int (*pt_plan_getenv_fn)(void *arg, const char *name, char *buf, int len);
/* getenv(3) as a pt_plan_getenv_fn (arg unused). */
int pt_plan_getenv(void *arg, const char *name, char *buf, int len);

/* Read the PTRAIN_* variable of every key r does not pin yet (a flag or
 * option given before wins over the environment) through get, parsed and
 * pinned as pt_plan_request_set with what = the variable's name; the
 * recompute mode also from PTRAIN_CKPT_ACT, the old name of
 * PTRAIN_RECOMPUTE (pt_plan_recompute_var: both set to different modes is
 * an error naming both).  -1 with one line on the first bad value, or
 * "<NAME> in the job environment is longer than 255 bytes; it is not a
 * valid value (valid: see ptrain-env(7))". */
int pt_plan_request_env(pt_plan_request *r, const pt_plan_limits *lim, pt_plan_getenv_fn get, void *arg);

/* The administrator's limits with nothing limited: max_tp and max_pp
 * 1048576, every mode, schedule and precision, max_zero 3, default_zero
 * 0, mixed nodes adapted to. */
void pt_plan_limits_default(pt_plan_limits *lim);

/* Where a setting is offered as a flag (every setting is read from its
 * variable by every front end). */
enum {
    PT_SETTING_PLUGIN = 1u << 0, /* srun/sbatch --ptrain-KEY (spank/options.c) */
    PT_SETTING_RUN = 1u << 1,    /* ptrain-run --KEY (bin/run/options.c) */
    PT_SETTING_PLAN = 1u << 2,   /* ptrain-plan --KEY (bin/plan) */
};

/* One plan setting. */
typedef struct pt_setting {
    const char *key;    /* "tp-depth" */
    const char *var;    /* "PTRAIN_TP_DEPTH" */
    unsigned pin;       /* PT_PIN_* */
    unsigned offered;   /* PT_SETTING_*: the front ends with a flag for it */
    const char *values;  /* its valid values, one line ("an integer 1..1048576") */
    const char *example; /* a valid value ("4"): what the docs and tests show */
    const char *plugin_arg;   /* srun --help's argument name ("N"); NULL where the plugin offers none */
    const char *plugin_usage; /* srun --help's text for --ptrain-KEY */
    /* parse `text` into q (`what` names the value in messages; lim may be
     * NULL): 0, or -1 with one line (q then unspecified) */
    int (*set)(const struct pt_setting *s, pt_plan_request *q, const pt_plan_limits *lim, const char *what,
               const char *text);
    /* ptrain-run --help's lines for --KEY, whole lines as printed (each
     * ending in '\n'); "" where another row's lines name it (tp's name
     * --tp-depth, --sp and --pp); NULL where ptrain-run offers none, or
     * where an option of its own is the flag (--model, --batch): ptrain-run
     * then prints "  --KEY ARG  VALUES (default VAR)" for a row it offers */
    const char *run_usage;
    /* an integer setting's range, min..max: ptrain-run reads the value as
     * its other integer flags (pt_parse_int: "--KEY: 'x' is not an integer
     * in MIN..MAX") before the parser; max 0: not an integer */
    long min, max;
} pt_setting;

/* The plan settings r pins (r->pinned), copied into p; p's others as
 * they were.  The model and batch are the request's, not p's: not copied. */
void pt_plan_request_overlay(const pt_plan_request *r, pt_plan *p);

/* The most rows the table may have (arrays sized by it: the plugin's options). */
#define PT_SETTINGS_MAX 32

/* The table: *n rows (may be NULL), in pt_plan_request_keys's order. */
const pt_setting *pt_settings(int *n);
/* The row of key, or NULL (no message). */
const pt_setting *pt_setting_find(const char *key);

#endif
