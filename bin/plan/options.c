/* SPDX-License-Identifier: MIT */
/* ptrain-plan's command line: the usage, the options and their checks
 * (bin/plan/plan_tool.h). */
#define _POSIX_C_SOURCE 200809L
#include "config.h"
#include "plan_tool.h"
#include "core/file.h"
#include "plan/cost.h"
#include "plan/resolve.h"
#include "topo/topo_plan.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ptrain-plan [--topology FILE[:COUNT]]... [--nodes N] [--tasks-per-node N] [--model M]\n"
            "                   [--batch N] [pins] [--mem-gb G] [--inter-gbps G] [--gemm-gflops G]\n"
            "                   [--gemm-gflops-bf16 G]\n"
            "                   [--json | --env]\n"
            "Machine and job:\n"
            "  --topology FILE     node model: hwloc XML or ptrain-topo JSON/XML (default: this\n"
            "                      machine, or $" PT_TOPO_ENV ")\n"
            "  --topology FILE:COUNT  COUNT nodes of this model; repeat for mixed nodes (e.g. 8-GPU\n"
            "                      and 4-GPU nodes): planned at the slowest node's rates\n"
            "  --mixed-nodes adapt|refuse  plan mixed nodes (default) or refuse them\n"
            "  --nodes N           nodes in the job (default 1)\n"
            "  --tasks-per-node N  tasks on each node (default: the node's GPUs, else 1)\n"
            "  --mem-gb G          memory one rank may use, GB (default: from the model)\n"
            "  --inter-gbps G      network bandwidth of one node, GB/s (default: measured, else\n"
            "                      an estimate from its adapters)\n"
            "  --gemm-gflops G     fp32 GEMM rate of one rank, GFLOP/s (default: measured, else\n"
            "                      an estimate from the cores)\n"
            "  --gemm-gflops-bf16 G  bf16 GEMM rate of one rank, GFLOP/s, for --precision bf16\n"
            "                      (default: measured, else the GPU's data sheet, else the fp32 rate)\n"
            "Model:\n"
            "  --model M           %s,\n"
            "                      L,H,C,T,V or llama:L,H,KV,C,I,T,V[,untied][,qkv-bias][,theta=X]\n"
            "                      (default gpt2-124M; llama: modes off and 1d)\n"
            "  --batch N           global batch, sequences per step (default 512)\n"
            "Pins (as srun's --ptrain-*; default: the search chooses):\n"
            "  --mode M            " PT_SEARCH_MODE_NAMES(", ") "\n"
            "  --tp N, --tp-depth N, --sp N, --pp N, --zero N, --microbatches N\n"
            "  --virtual-stages V, --pp-split N,N,...\n"
            "  --schedule S        gpipe, 1f1b, interleaved\n"
            "  --recompute R       none, block, attention\n"
            "  --precision P       fp32, bf16 (bf16 activations and GEMMs at the bf16 GEMM rate)\n"
            "  --default-precision P  the cluster's default_precision instead of a pin: a default\n"
            "                      bf16 gives way to fp32 where fp32 prices a faster step\n"
            "  --rank-order O      a permutation of D, P, T (cluster = DPT, spread = TPD)\n"
            "  --tp-order O        the tp grid's axes slowest first, a permutation of 0, 1, 2\n"
            "                      (2d: 012 rows on consecutive ranks, 021 columns)\n"
            "Output:\n"
            "Energy (Perseus's time-energy frontier of one iteration of the chosen plan):\n"
            "  --energy            print the frontier, the max-clock and intrinsic-bloat points\n"
            "  --energy-slowdown PCT  also the least-energy point within PCT %% of the max-clock time\n"
            "  --energy-straggler MS  also the point at a straggler's iteration time (extrinsic)\n"
            "  --power-model gpu|cpu  the modelled device (default: gpu when the node has GPUs)\n"
            "  --energy-profile FILE  a profile measured by ptrain-run --profile-energy instead of\n"
            "                      the power model\n"
            "  --energy-plan-out FILE  write the intrinsic point's (with --energy-slowdown: the\n"
            "                      deadline point's) clock of every instruction, for\n"
            "                      ptrain-run --energy-plan FILE\n"
            "  --json              the result as JSON\n"
            "  --env               the PTRAIN_* lines the plugin would inject\n"
            "  --help, --version   this text; the version\n"
            "exit: 0 planned, 2 bad input or no plan fits, 3 out of memory or write failure\n",
            pt_model_preset_names());
}

static int parse_pos(const char *opt, const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "ptrain-plan: invalid --%s '%s' (valid: an integer %d..%d)\n", opt, s, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int parse_real(const char *opt, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v > 0) || v > 1e12) {
        fprintf(stderr, "ptrain-plan: invalid --%s '%s' (valid: a positive number)\n", opt, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_topology(const char *s, topo_arg *t)
{
    if (pt_topo_plan_arg_parse("--topology", s, t->path, sizeof t->path, &t->count) == 0) return 0;
    fprintf(stderr, "ptrain-plan: %s\n", pt_errmsg());
    return -1;
}

/* this tool's own options; then one per plan setting it offers
 * (lib/contract/settings.h's rows; val PLAN_SETTING + the row), but
 * --batch, which prices batches up to 2^24 (the table's batch is a
 * job's, up to 2^20) */
static const struct option own[] = {
    {"topology", required_argument, 0, 'T'},     {"nodes", required_argument, 0, 'N'},
    {"tasks-per-node", required_argument, 0, 'n'}, {"batch", required_argument, 0, 'b'},
    {"mem-gb", required_argument, 0, 'G'},       {"inter-gbps", required_argument, 0, 'I'},
    {"gemm-gflops", required_argument, 0, 'F'},  {"json", no_argument, 0, 'j'},
    {"env", no_argument, 0, 'e'},                {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, 'V'},            {"energy", no_argument, 0, 'E'},
    {"energy-slowdown", required_argument, 0, 'L'}, {"energy-straggler", required_argument, 0, 'K'},
    {"power-model", required_argument, 0, 'P'},   {"energy-profile", required_argument, 0, 'R'},
    {"energy-plan-out", required_argument, 0, 'W'}, {"mixed-nodes", required_argument, 0, 'X'},
    {"gemm-gflops-bf16", required_argument, 0, 'B'}, {"default-precision", required_argument, 0, 'D'}};
enum { NOWN = sizeof own / sizeof own[0], PLAN_SETTING = 1000 };

/* --KEY ARG of a plan setting: 0, or PT_EXIT_INPUT. */
static int setting_option(plan_cmdline *op, const char *key, const char *arg)
{
    char what[32];
    snprintf(what, sizeof what, "--%s", key);
    if (!strcmp(key, "mode") && strcmp(arg, "off") == 0) {
        fprintf(stderr, "ptrain-plan: invalid --mode '%s' (valid: %s)\n", arg, PT_SEARCH_MODE_NAMES(", "));
        return PT_EXIT_INPUT;
    }
    if (pt_plan_request_set(&op->req, NULL, key, what, arg) < 0) {
        fprintf(stderr, "ptrain-plan: %s\n", pt_errmsg());
        return PT_EXIT_INPUT;
    }
    return 0;
}

/* One of the machine and job options (c: its getopt value) with its
 * argument: 0, or PT_EXIT_INPUT. */
static int machine_option(plan_cmdline *op, int c, const char *arg)
{
    int bad = 0;
    switch (c) {
    case 'T':
        if (op->ntopo == MAX_TOPOLOGIES) {
            fprintf(stderr, "ptrain-plan: more than %d --topology options (valid: at most %d node models)\n",
                    MAX_TOPOLOGIES, MAX_TOPOLOGIES);
            return PT_EXIT_INPUT;
        }
        if (parse_topology(arg, &op->topo[op->ntopo++]) < 0) return PT_EXIT_INPUT;
        break;
    case 'N': bad = parse_pos("nodes", arg, 1, 1 << 20, &op->nodes); break;
    case 'n': bad = parse_pos("tasks-per-node", arg, 1, 1 << 16, &op->tpn); break;
    case 'b':
        bad = parse_pos("batch", arg, 1, 1 << 24, &op->batch);
        op->req.pinned |= PT_PIN_BATCH;
        break;
    case 'X':
        if (strcmp(arg, "adapt") && strcmp(arg, "refuse")) {
            fprintf(stderr, "ptrain-plan: invalid --mixed-nodes '%s' (valid: adapt, refuse)\n", arg);
            return PT_EXIT_INPUT;
        }
        op->lim.mixed = strcmp(arg, "refuse") == 0 ? PT_MIXED_REFUSE : PT_MIXED_ADAPT;
        break;
    case 'G': bad = parse_real("mem-gb", arg, &op->ov.mem_gb); break;
    case 'I': bad = parse_real("inter-gbps", arg, &op->ov.inter_gbps); break;
    case 'F': bad = parse_real("gemm-gflops", arg, &op->ov.gemm_gflops); break;
    case 'B': bad = parse_real("gemm-gflops-bf16", arg, &op->ov.gemm_gflops_bf16); break;
    case 'D': { /* the administrator's default_precision: not a pin (--precision is) */
        int prec;
        if (pt_precision_parse("--default-precision", arg, &prec) < 0) {
            fprintf(stderr, "ptrain-plan: %s\n", pt_errmsg());
            return PT_EXIT_INPUT;
        }
        if (!(op->req.pinned & PT_PIN_PRECISION)) op->req.plan.precision = prec;
        break;
    }
    }
    return bad ? PT_EXIT_INPUT : 0;
}

/* One of the energy options (c: its getopt value) with its argument: 0,
 * or PT_EXIT_INPUT. */
static int energy_option(plan_cmdline *op, int c, const char *arg)
{
    int bad = 0;
    switch (c) {
    case 'E': op->energy = 1; break;
    case 'L':
        bad = parse_real("energy-slowdown", arg, &op->slowdown);
        if (!bad && op->slowdown > 1000) {
            fprintf(stderr, "ptrain-plan: invalid --energy-slowdown '%s' (valid: a percentage in (0, 1000])\n",
                    arg);
            bad = 1;
        }
        op->slowdown /= 100;
        op->energy = 1;
        break;
    case 'K':
        bad = parse_real("energy-straggler", arg, &op->straggler);
        op->straggler /= 1e3;
        op->energy = 1;
        break;
    case 'P':
        if (!pt_energy_power_model_named(arg)) {
            fprintf(stderr, "ptrain-plan: invalid --power-model '%s' (valid: gpu, cpu)\n", arg);
            return PT_EXIT_INPUT;
        }
        op->power_model = arg;
        op->energy = 1;
        break;
    case 'R': op->profile_path = arg; op->energy = 1; break;
    case 'W': op->plan_out = arg; op->energy = 1; break;
    }
    return bad ? PT_EXIT_INPUT : 0;
}

/* The checks across options, after the last: -1 (go on), or
 * PT_EXIT_INPUT. */
static int options_check(int argc, char **argv, plan_cmdline *op)
{
    if (optind < argc) {
        fprintf(stderr, "ptrain-plan: unexpected argument '%s' (see --help)\n", argv[optind]);
        return PT_EXIT_INPUT;
    }
    if (op->profile_path && op->power_model) {
        fprintf(stderr, "ptrain-plan: --power-model and --energy-profile exclude each other (the profile holds "
                        "measured clocks, times and energy)\n");
        return PT_EXIT_INPUT;
    }
    /* the plan file's name, checked before planning (the profile is read
     * after it, where it is used) */
    if (op->plan_out && pt_output_check(op->plan_out) != PT_OK) {
        fprintf(stderr, "ptrain-plan: --energy-plan-out: %s\n", pt_errmsg());
        return PT_EXIT_INPUT;
    }
    op->req.global_batch = op->batch;
    if (op->req.plan.tp_depth > 0 && op->req.plan.mode != PT_MODE_2P5D) {
        fprintf(stderr, "ptrain-plan: --tp-depth=%d is for --mode=2.5d, but the mode is %s (valid: --mode=2.5d, "
                "or no --tp-depth)\n", op->req.plan.tp_depth, pt_mode_name(op->req.plan.mode));
        return PT_EXIT_INPUT;
    }
    return -1;
}

/* The command line (plan_tool.h). */
int plan_options(int argc, char **argv, plan_cmdline *op)
{
    struct option opts[NOWN + PT_SETTINGS_MAX + 1];
    int nrows = 0, nopt = NOWN;
    const pt_setting *rows = pt_settings(&nrows);
    memcpy(opts, own, sizeof own);
    for (int i = 0; i < nrows && i < PT_SETTINGS_MAX; i++)
        if ((rows[i].offered & PT_SETTING_PLAN) && strcmp(rows[i].key, "batch") != 0)
            opts[nopt++] = (struct option){rows[i].key, required_argument, 0, PLAN_SETTING + i};
    opts[nopt] = (struct option){0, 0, 0, 0};
    memset(op, 0, sizeof *op);
    op->batch = 512;
    int c;
    pt_plan_limits_default(&op->lim);
    op->lim.flag_prefix = "--"; /* the planner's messages name this tool's flags */
    pt_plan_request_init(&op->req, PT_MODE_AUTO);
    if (pt_plan_request_set(&op->req, NULL, "model", "--model", "gpt2-124M") < 0) return PT_EXIT_FAIL;
    op->req.pinned &= ~(unsigned)PT_PIN_MODEL; /* ptrain-plan's default model, not the user's */
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
        int st = 0;
        const char *key = c >= PLAN_SETTING && c < PLAN_SETTING + nrows ? rows[c - PLAN_SETTING].key : NULL;
        if (key) {
            st = setting_option(op, key, optarg);
            if (st) return st;
            continue;
        }
        switch (c) {
        case 'T': case 'N': case 'n': case 'b': case 'X': case 'G': case 'I': case 'F': case 'B': case 'D':
            st = machine_option(op, c, optarg);
            break;
        case 'j':
        case 'e':
            if (op->out && op->out != c) {
                fprintf(stderr, "ptrain-plan: --json and --env exclude each other\n");
                return PT_EXIT_INPUT;
            }
            op->out = c;
            break;
        case 'E': case 'L': case 'K': case 'P': case 'R': case 'W': st = energy_option(op, c, optarg); break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("ptrain-plan (ptrain) %s\n", PACKAGE_VERSION); return 0;
        default:
            fprintf(stderr, "ptrain-plan: unknown or incomplete option '%s' (see --help)\n", argv[optind - 1]);
            return PT_EXIT_INPUT;
        }
        if (st) return st;
    }
    return options_check(argc, argv, op);
}
