/* SPDX-License-Identifier: MIT */
/* ptrain-plan: offline planning from a node model (hwloc XML or ptrain
 * JSON), a job geometry and a model shape; prints the chosen plan and the
 * runners-up with their predicted step time, memory and why.  See
 * ptrain-plan(1). */
#define _POSIX_C_SOURCE 200809L
#include "config.h"
#include "core/core.h"
#include "core/file.h"
#include "plan/cost.h"
#include "plan_energy.h"
#include "contract/plan.h"
#include "plan/planner.h"
#include "plan/resolve.h"
#include "plan/search.h"
#include "topo/topo.h"
#include "topo/topo_plan.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_BAD = 2, EXIT_FAIL = 3 };

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
            "  --model M           %s, or L,H,C,T,V (default gpt2-124M)\n"
            "  --batch N           global batch, sequences per step (default 512)\n"
            "Pins (as srun's --ptrain-*; default: the search chooses):\n"
            "  --mode M            auto, 1d, 2d, 2.5d, 3d\n"
            "  --tp N, --tp-depth N, --sp N, --pp N, --zero N, --microbatches N\n"
            "  --virtual-stages V, --pp-split N,N,...\n"
            "  --schedule S        gpipe, 1f1b, interleaved\n"
            "  --recompute R       none, block, attention\n"
            "  --precision P       fp32, bf16 (bf16 activations and GEMMs at the bf16 GEMM rate)\n"
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

static int print_env(const char *name, const char *value, void *arg)
{
    (void)arg;
    return printf("%s=%s\n", name, value) < 0;
}

static json_t *hw_json(const pt_hw *h)
{
    json_t *hw = json_object(), *g = json_object(), *l = json_object();
    json_object_set_new(hw, "gemm_gflops", json_real(h->gemm_gflops));
    json_object_set_new(hw, "gemm_n_half", json_real(h->gemm_n_half));
    if (h->gemm_gflops_bf16 > 0) /* known: bf16 plans' rate; absent: bf16 at gemm_gflops */
        json_object_set_new(hw, "gemm_gflops_bf16", json_real(h->gemm_gflops_bf16));
    json_object_set_new(hw, "mem_bytes", json_real(h->mem_bytes));
    json_object_set_new(hw, "ranks_per_core", json_real(h->ranks_per_core));
    json_object_set_new(hw, "busy_delay_s", json_real(h->busy_delay_s));
    for (int k = 0; k < PT_NET_N; k++) {
        json_object_set_new(g, pt_cost_link_name(k), json_real(h->gbps[k]));
        json_object_set_new(l, pt_cost_link_name(k), json_real(h->lat_s[k]));
    }
    json_object_set_new(hw, "gbps", g);
    json_object_set_new(hw, "lat_s", l);
    /* each collective kind's bus bandwidth and alpha per link class, as
     * the cost model takes them (the class's figures where not measured) */
    json_t *co = json_object();
    for (int k = 0; k < PT_KIND_N; k++) {
        json_t *kg = json_object(), *kl = json_object();
        for (int x = 0; x < PT_NET_N; x++) {
            json_object_set_new(kg, pt_cost_link_name(x), json_real(h->coll_gbps[k][x] > 0 ? h->coll_gbps[k][x] : h->gbps[x]));
            json_object_set_new(kl, pt_cost_link_name(x),
                                json_real(h->coll_lat_s[k][x] > 0 ? h->coll_lat_s[k][x] : h->lat_s[x]));
        }
        json_object_set_new(co, pt_cost_kind_name(k), json_pack("{s:o, s:o}", "busbw_gbps", kg, "lat_s", kl));
    }
    json_object_set_new(hw, "collectives", co);
    return hw;
}

static json_t *cand_json(const pt_candidate *c)
{
    char s[640];
    pt_plan_summary(&c->plan, s, sizeof s);
    json_t *o = json_object();
    json_object_set_new(o, "plan", json_string(s));
    json_object_set_new(o, "mode", json_string(pt_mode_name(c->plan.mode)));
    json_object_set_new(o, "dp", json_integer(c->plan.dp));
    json_object_set_new(o, "pp", json_integer(c->plan.pp));
    json_object_set_new(o, "tp", json_integer(c->plan.tp));
    json_object_set_new(o, "tp_depth", json_integer(c->plan.tp_depth));
    json_object_set_new(o, "sp", json_integer(c->plan.sp));
    json_object_set_new(o, "zero", json_integer(c->plan.zero));
    json_object_set_new(o, "microbatches", json_integer(c->plan.microbatches));
    json_object_set_new(o, "schedule", json_string(pt_schedule_name(c->plan.schedule)));
    json_object_set_new(o, "virtual_stages", json_integer(c->plan.virtual_stages));
    char split[256];
    pt_plan_split_format(&c->plan, split, sizeof split);
    json_object_set_new(o, "pp_split", json_string(split));
    json_object_set_new(o, "recompute", json_string(pt_recompute_name(c->plan.recompute)));
    json_object_set_new(o, "rank_order", json_string(c->plan.rank_order));
    json_object_set_new(o, "tp_order", json_string(c->plan.tp_order));
    json_object_set_new(o, "t_step_s", json_real(c->cost.t_step));
    json_object_set_new(o, "t_compute_s", json_real(c->cost.t_compute));
    json_object_set_new(o, "t_bubble_s", json_real(c->cost.t_bubble));
    json_object_set_new(o, "bubble", json_real(c->cost.bubble));
    json_t *comm = json_object(), *bytes = json_object(), *link = json_object();
    for (int g = 0; g < PT_GRP_N; g++) {
        json_object_set_new(comm, pt_cost_group_name(g), json_real(c->cost.t_comm[g]));
        json_object_set_new(bytes, pt_cost_group_name(g), json_real(c->cost.bytes[g]));
        json_object_set_new(link, pt_cost_group_name(g), json_string(pt_cost_link_name(c->link[g])));
    }
    json_object_set_new(o, "t_comm_s", comm);
    /* each communicator the layout sends on: bytes, time, link, role */
    json_t *subs = json_object();
    for (int k = 0; k < PT_SUB_N; k++) {
        if (c->cost.sub_bytes[k] <= 0) continue;
        char role[96];
        pt_cost_sub_role(&c->plan, k, role, sizeof role);
        json_object_set_new(subs, pt_cost_sub_name(k),
                            json_pack("{s:s, s:f, s:f, s:s}", "role", role, "bytes", c->cost.sub_bytes[k], "t_s",
                                      c->cost.sub_t[k], "link", pt_cost_link_name(c->cost.sub_link[k])));
    }
    json_object_set_new(o, "communicators", subs);
    json_object_set_new(o, "bytes", bytes);
    json_object_set_new(o, "link", link);
    json_object_set_new(o, "flops", json_real(c->cost.flops));
    json_object_set_new(o, "mem_bytes", json_pack("{s:f, s:f, s:f, s:f, s:f}", "params", c->cost.mem_params,
                                                  "grads", c->cost.mem_grads, "optim", c->cost.mem_optim,
                                                  "act", c->cost.mem_act, "total", c->cost.mem_total));
    return o;
}

/* One --topology FILE[:COUNT]: the file and its node count (0 = none
 * given), as pt_topo_plan_arg_parse reads it (ptrain-run's too). */
typedef struct topo_arg {
    char path[4096];
    int count;
} topo_arg;

static int parse_topology(const char *s, topo_arg *t)
{
    if (pt_topo_plan_arg_parse("--topology", s, t->path, sizeof t->path, &t->count) == 0) return 0;
    fprintf(stderr, "ptrain-plan: %s\n", pt_errmsg());
    return -1;
}

#define MAX_TOPOLOGIES 16

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"topology", required_argument, 0, 'T'},     {"nodes", required_argument, 0, 'N'},
        {"tasks-per-node", required_argument, 0, 'n'}, {"model", required_argument, 0, 'm'},
        {"batch", required_argument, 0, 'b'},        {"mode", required_argument, 0, 'M'},
        {"tp", required_argument, 0, 't'},           {"tp-depth", required_argument, 0, 'd'},
        {"sp", required_argument, 0, 's'},           {"pp", required_argument, 0, 'p'},
        {"zero", required_argument, 0, 'z'},         {"microbatches", required_argument, 0, 'u'},
        {"schedule", required_argument, 0, 'S'},     {"recompute", required_argument, 0, 'r'},
        {"mem-gb", required_argument, 0, 'G'},       {"inter-gbps", required_argument, 0, 'I'},
        {"gemm-gflops", required_argument, 0, 'F'},  {"json", no_argument, 0, 'j'},
        {"env", no_argument, 0, 'e'},                {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},            {"energy", no_argument, 0, 'E'},
        {"energy-slowdown", required_argument, 0, 'L'}, {"energy-straggler", required_argument, 0, 'K'},
        {"power-model", required_argument, 0, 'P'},   {"rank-order", required_argument, 0, 'O'},
        {"energy-profile", required_argument, 0, 'R'}, {"energy-plan-out", required_argument, 0, 'W'},
        {"tp-order", required_argument, 0, 'Q'},      {"mixed-nodes", required_argument, 0, 'X'},
        {"virtual-stages", required_argument, 0, 'v'}, {"pp-split", required_argument, 0, 'Y'},
        {"precision", required_argument, 0, 'C'},     {"gemm-gflops-bf16", required_argument, 0, 'B'},
        {0, 0, 0, 0}};
    /* the pins and their request keys (lib/plan/planner.h's builder) */
    static const struct { int c; const char *key; } pins[] = {
        {'M', "mode"}, {'t', "tp"}, {'d', "tp-depth"}, {'s', "sp"}, {'p', "pp"}, {'z', "zero"},
        {'u', "microbatches"}, {'S', "schedule"}, {'r', "recompute"}, {'O', "rank-order"}, {'Q', "tp-order"},
        {'v', "virtual-stages"}, {'Y', "pp-split"}, {'m', "model"}, {'C', "precision"}};
    topo_arg topo[MAX_TOPOLOGIES];
    int ntopo = 0, nodes = 0, tpn = 0, batch = 512, out = 0, c, energy = 0;
    double slowdown = 0, straggler = 0;
    const char *power_model = NULL, *profile_path = NULL, *plan_out = NULL;
    pt_topo_hw_override ov = {0, 0, 0, 0};
    pt_plan_limits lim;
    pt_plan_limits_default(&lim);
    lim.flag_prefix = "--"; /* the planner's messages name this tool's flags */
    pt_plan_request req;
    pt_plan_request_init(&req, PT_MODE_AUTO);
    if (pt_plan_request_set(&req, NULL, "model", "--model", "gpt2-124M") < 0) return EXIT_FAIL;
    req.pinned &= ~(unsigned)PT_PIN_MODEL; /* ptrain-plan's default model, not the user's */
    opterr = 0;
    while ((c = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
        int bad = 0;
        const char *key = NULL;
        for (size_t i = 0; i < sizeof pins / sizeof pins[0]; i++)
            if (pins[i].c == c) key = pins[i].key;
        if (key) {
            char what[32];
            snprintf(what, sizeof what, "--%s", key);
            if (c == 'M' && strcmp(optarg, "off") == 0) {
                fprintf(stderr, "ptrain-plan: invalid --mode '%s' (valid: auto, 1d, 2d, 2.5d, 3d)\n", optarg);
                return EXIT_BAD;
            }
            if (pt_plan_request_set(&req, NULL, key, what, optarg) < 0) {
                fprintf(stderr, "ptrain-plan: %s\n", pt_errmsg());
                return EXIT_BAD;
            }
            continue;
        }
        switch (c) {
        case 'T':
            if (ntopo == MAX_TOPOLOGIES) {
                fprintf(stderr, "ptrain-plan: more than %d --topology options (valid: at most %d node models)\n",
                        MAX_TOPOLOGIES, MAX_TOPOLOGIES);
                return EXIT_BAD;
            }
            if (parse_topology(optarg, &topo[ntopo++]) < 0) return EXIT_BAD;
            break;
        case 'N': bad = parse_pos("nodes", optarg, 1, 1 << 20, &nodes); break;
        case 'n': bad = parse_pos("tasks-per-node", optarg, 1, 1 << 16, &tpn); break;
        case 'b':
            bad = parse_pos("batch", optarg, 1, 1 << 24, &batch);
            req.pinned |= PT_PIN_BATCH;
            break;
        case 'X':
            if (strcmp(optarg, "adapt") && strcmp(optarg, "refuse")) {
                fprintf(stderr, "ptrain-plan: invalid --mixed-nodes '%s' (valid: adapt, refuse)\n", optarg);
                return EXIT_BAD;
            }
            lim.mixed = strcmp(optarg, "refuse") == 0 ? PT_MIXED_REFUSE : PT_MIXED_ADAPT;
            break;
        case 'G': bad = parse_real("mem-gb", optarg, &ov.mem_gb); break;
        case 'I': bad = parse_real("inter-gbps", optarg, &ov.inter_gbps); break;
        case 'F': bad = parse_real("gemm-gflops", optarg, &ov.gemm_gflops); break;
        case 'B': bad = parse_real("gemm-gflops-bf16", optarg, &ov.gemm_gflops_bf16); break;
        case 'j':
        case 'e':
            if (out && out != c) {
                fprintf(stderr, "ptrain-plan: --json and --env exclude each other\n");
                return EXIT_BAD;
            }
            out = c;
            break;
        case 'E': energy = 1; break;
        case 'L':
            bad = parse_real("energy-slowdown", optarg, &slowdown);
            if (!bad && slowdown > 1000) {
                fprintf(stderr, "ptrain-plan: invalid --energy-slowdown '%s' (valid: a percentage in (0, 1000])\n",
                        optarg);
                bad = 1;
            }
            slowdown /= 100;
            energy = 1;
            break;
        case 'K': bad = parse_real("energy-straggler", optarg, &straggler); straggler /= 1e3; energy = 1; break;
        case 'P':
            if (!pt_energy_power_model_named(optarg)) {
                fprintf(stderr, "ptrain-plan: invalid --power-model '%s' (valid: gpu, cpu)\n", optarg);
                return EXIT_BAD;
            }
            power_model = optarg;
            energy = 1;
            break;
        case 'R': profile_path = optarg; energy = 1; break;
        case 'W': plan_out = optarg; energy = 1; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("ptrain-plan (ptrain) %s\n", PACKAGE_VERSION); return 0;
        default:
            fprintf(stderr, "ptrain-plan: unknown or incomplete option '%s' (see --help)\n", argv[optind - 1]);
            return EXIT_BAD;
        }
        if (bad) return EXIT_BAD;
    }
    if (optind < argc) {
        fprintf(stderr, "ptrain-plan: unexpected argument '%s' (see --help)\n", argv[optind]);
        return EXIT_BAD;
    }
    if (profile_path && power_model) {
        fprintf(stderr, "ptrain-plan: --power-model and --energy-profile exclude each other (the profile holds "
                        "measured clocks, times and energy)\n");
        return EXIT_BAD;
    }
    /* the plan file's name, checked before planning (the profile is read
     * after it, where it is used) */
    if (plan_out && pt_output_check(plan_out) != PT_OK) {
        fprintf(stderr, "ptrain-plan: --energy-plan-out: %s\n", pt_errmsg());
        return EXIT_BAD;
    }
    req.global_batch = batch;
    const pt_model_shape m = req.model;
    if (req.plan.tp_depth > 0 && req.plan.mode != PT_MODE_2P5D) {
        fprintf(stderr, "ptrain-plan: --tp-depth=%d is for --mode=2.5d, but the mode is %s (valid: --mode=2.5d, "
                "or no --tp-depth)\n", req.plan.tp_depth, pt_mode_name(req.plan.mode));
        return EXIT_BAD;
    }
    /* the nodes: one model for --nodes N nodes, or FILE:COUNT per kind */
    int counted = 0, sum = 0;
    for (int i = 0; i < ntopo; i++) counted += topo[i].count > 0, sum += topo[i].count;
    if (ntopo > 1 && counted < ntopo) {
        fprintf(stderr, "ptrain-plan: with %d --topology options each needs its node count (valid: FILE:COUNT, e.g. "
                "--topology a.xml:4 --topology b.xml:2)\n", ntopo);
        return EXIT_BAD;
    }
    if (counted && nodes && nodes != sum) {
        fprintf(stderr, "ptrain-plan: --nodes %d, but the --topology counts add up to %d nodes (valid: --nodes %d, or "
                "no --nodes)\n", nodes, sum, sum);
        return EXIT_BAD;
    }
    if (counted) nodes = sum;
    if (!nodes) nodes = 1;
    const int nkinds = ntopo > 0 ? ntopo : 1;
    pt_topo t[MAX_TOPOLOGIES];
    const pt_topo *models[MAX_TOPOLOGIES];
    char names[MAX_TOPOLOGIES][256];
    const char *namep[MAX_TOPOLOGIES];
    int kind_gpus = 0;
    for (int k = 0; k < nkinds; k++) {
        int from;
        if (pt_topo_plan_load(ntopo ? topo[k].path : NULL, "--topology", 0, &t[k], &from, NULL, 0) < 0) {
            fprintf(stderr, "ptrain-plan: %s\n", pt_errmsg());
            for (int j = 0; j < k; j++) pt_topo_free(&t[j]);
            return EXIT_BAD;
        }
        models[k] = &t[k];
        snprintf(names[k], sizeof names[k], "%s", t[k].source);
        namep[k] = names[k];
        if (t[k].ngpus > 0) kind_gpus = 1;
    }
    if (!power_model) power_model = kind_gpus ? "gpu" : "cpu";
    int *tasks = malloc(sizeof(int) * (size_t)nodes), *kind_of = malloc(sizeof(int) * (size_t)nodes);
    if (!tasks || !kind_of) {
        fprintf(stderr, "ptrain-plan: out of memory\n");
        return EXIT_FAIL;
    }
    for (int i = 0, k = 0, left = ntopo ? topo[0].count : nodes; i < nodes; i++) {
        while (counted && left == 0 && k + 1 < nkinds) left = topo[++k].count;
        kind_of[i] = k;
        left--;
        tasks[i] = tpn ? tpn : t[k].ngpus > 0 ? t[k].ngpus : 1;
    }
    pt_plan_machine mach;
    int rc = pt_plan_machine_build(&mach, nkinds, models, namep, kind_of, tasks, nodes, &ov, 0);
    for (int k = 0; k < nkinds; k++) pt_topo_free(&t[k]);
    free(kind_of);
    if (rc < 0) {
        fprintf(stderr, "ptrain-plan: %s\n", pt_errmsg());
        free(tasks);
        return EXIT_BAD;
    }
    const pt_cluster *cl = &mach.cluster;
    /* the one planning handle the plugin and ptrain-run --mode auto use */
    pt_planner *pl = pt_planner_new(cl, &lim);
    if (!pl || pt_planner_set_request(pl, &req) < 0 || pt_planner_run(pl) < 0) {
        fprintf(stderr, "ptrain-plan: %s\n", pt_errmsg());
        pt_planner_free(pl);
        pt_plan_machine_free(&mach);
        free(tasks);
        return EXIT_BAD;
    }
    const pt_search_result *r = pt_planner_result(pl);
    const pt_plan chosen = *pt_planner_plan(pl);
    if (pt_planner_notes(pl)[0]) fprintf(stderr, "%s\n", pt_planner_notes(pl));
    int status = 0;
    /* --energy: the chosen plan's iteration on the time-energy frontier */
    pt_energy_dag edag;
    pt_energy_profile eprof;
    pt_energy_frontier efront;
    char esource[600];
    if (profile_path) snprintf(esource, sizeof esource, "profile %.500s", profile_path);
    else snprintf(esource, sizeof esource, "%s power model", power_model);
    pt_energy_profile measured;
    pt_energy_meta pmeta;
    memset(&measured, 0, sizeof measured);
    memset(&pmeta, 0, sizeof pmeta);
    int erc = 0;
    if (profile_path && pt_energy_profile_load(profile_path, &measured, &pmeta) != PT_OK) {
        fprintf(stderr, "ptrain-plan: --energy-profile: %s\n", pt_errmsg());
        pt_planner_free(pl);
        pt_plan_machine_free(&mach);
        free(tasks);
        return EXIT_BAD;
    }
    if (energy)
        erc = plan_energy(&m, batch, &chosen, &cl->hw, pt_energy_power_model_named(power_model),
                          profile_path ? &measured : NULL, &pmeta, 0, &edag, &eprof, &efront);
    pt_energy_profile_free(&measured);
    if (erc < 0) {
        fprintf(stderr, "ptrain-plan: --energy: %s\n", pt_errmsg());
        pt_planner_free(pl);
        pt_plan_machine_free(&mach);
        free(tasks);
        return EXIT_BAD;
    }
    if (plan_out) {
        /* the chosen point's clocks, for ptrain-run --energy-plan FILE */
        char point[48];
        int k = plan_energy_pick(&efront, slowdown, point, sizeof point);
        pt_energy_meta meta;
        memset(&meta, 0, sizeof meta);
        snprintf(meta.device, sizeof meta.device, "%s", profile_path ? pmeta.device : power_model);
        if (profile_path) snprintf(meta.basis, sizeof meta.basis, "profile %.200s", profile_path);
        else snprintf(meta.basis, sizeof meta.basis, "modelled: %s power model and the cost model", power_model);
        pt_plan_summary(&chosen, meta.plan, sizeof meta.plan);
        if (k < 0 || pt_energy_plan_save(plan_out, &edag, &eprof, &efront.p[k], &efront, point, &meta) != PT_OK) {
            fprintf(stderr, "ptrain-plan: --energy-plan-out: %s\n", k < 0 ? "no frontier point" : pt_errmsg());
            status = EXIT_FAIL;
        } else {
            fprintf(stderr, "ptrain-plan: wrote the %s point's clocks of %d instructions to %s\n", point, edag.n,
                    plan_out);
        }
    }
    int uniform = 1;
    for (int i = 1; i < nodes; i++) uniform &= tasks[i] == tasks[0];
    if (out == 'e') {
        if (pt_plan_export(&r->best.plan, print_env, NULL) != 0) status = EXIT_FAIL;
    } else if (out == 'j') {
        json_t *root = json_object();
        if (mach.nkinds == 1) {
            json_object_set_new(root, "topology", json_string(names[0]));
        } else {
            char all[1024] = "";
            for (int k = 0, l = 0; k < nkinds && l < (int)sizeof all; k++)
                l += snprintf(all + l, sizeof all - (size_t)l, "%s%s:%d", k ? "," : "", names[k], topo[k].count);
            json_object_set_new(root, "topology", json_string(all));
        }
        json_object_set_new(root, "nodes", json_integer(nodes));
        if (uniform) json_object_set_new(root, "tasks_per_node", json_integer(tasks[0]));
        else {
            json_t *a = json_array();
            for (int i = 0; i < nodes; i++) json_array_append_new(a, json_integer(tasks[i]));
            json_object_set_new(root, "tasks_per_node", a);
        }
        json_object_set_new(root, "island_ranks", json_integer(cl->island_ranks));
        json_object_set_new(root, "model", json_pack("{s:i, s:i, s:i, s:i, s:i}", "n_layer", m.n_layer, "n_head",
                                                     m.n_head, "n_embd", m.n_embd, "seq_len", m.seq_len, "vocab",
                                                     m.vocab));
        json_object_set_new(root, "global_batch", json_integer(batch));
        json_object_set_new(root, "hw", hw_json(&cl->hw));
        if (cl->nkinds > 1) {
            json_t *ks = json_array();
            for (int k = 0; k < cl->nkinds; k++) {
                int cnt = 0;
                for (int i = 0; i < nodes; i++) cnt += mach.kind_of[i] == k;
                json_array_append_new(ks, json_pack("{s:s, s:i, s:i, s:o}", "topology", names[k], "nodes", cnt,
                                                    "island_ranks", cl->kinds[k].island_ranks, "hw",
                                                    hw_json(&cl->kinds[k].hw)));
            }
            json_object_set_new(root, "kinds", ks);
            json_object_set_new(root, "limit", json_string(r->limit));
        }
        json_object_set_new(root, "best", cand_json(&r->best));
        json_t *runners = json_array();
        for (int i = 0; i < r->nrunners; i++) json_array_append_new(runners, cand_json(&r->runner[i]));
        json_object_set_new(root, "runners", runners);
        json_object_set_new(root, "considered", json_integer(r->nconsidered));
        json_object_set_new(root, "fit", json_integer(r->nfit));
        json_object_set_new(root, "why", json_string(r->why));
        if (energy)
            json_object_set_new(root, "energy", plan_energy_json(&edag, &eprof, &efront,
                                                                 profile_path ? NULL : power_model, profile_path,
                                                                 slowdown, straggler));
        char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
        json_decref(root);
        if (!text) {
            fprintf(stderr, "ptrain-plan: out of memory\n");
            status = EXIT_FAIL;
        } else {
            printf("%s\n", text);
            free(text);
        }
    } else {
        if (cl->nkinds <= 1) {
            char isl[48];
            if (cl->island_ranks > 0)
                snprintf(isl, sizeof isl, "islands of %d ranks", cl->island_ranks);
            else
                snprintf(isl, sizeof isl, "the node is one island");
            printf("machine: %d node%s x %d tasks, node model %s, %s\n", nodes, nodes == 1 ? "" : "s", tasks[0],
                   names[0], isl);
        } else {
            printf("machine: %d nodes of %d kinds:", nodes, cl->nkinds);
            for (int k = 0; k < cl->nkinds; k++) {
                int cnt = 0, tk = 0;
                for (int i = 0; i < nodes; i++)
                    if (mach.kind_of[i] == k) cnt++, tk = tasks[i];
                char isl[48];
                if (cl->kinds[k].island_ranks > 0) snprintf(isl, sizeof isl, "islands of %d ranks", cl->kinds[k].island_ranks);
                else snprintf(isl, sizeof isl, "the node is one island");
                printf("%s %d x %s (%d tasks, %s)", k ? "," : "", cnt, names[k], tk, isl);
            }
            printf("\n");
        }
        /* the bf16 GEMM rate's line ("gemm bf16:", after a kind's
         * "[name] ") only where a bf16 plan uses it */
        for (char *line = strtok(mach.note, "\n"); line; line = strtok(NULL, "\n")) {
            const char *body = line[0] == '[' && strstr(line, "] ") ? strstr(line, "] ") + 2 : line;
            if (req.plan.precision == PT_PREC_BF16 || strncmp(body, "gemm bf16:", 10) != 0) printf("  %s\n", line);
        }
        size_t need = pt_planner_explain(pl, NULL, 0) + 1;
        char *text = malloc(need);
        if (!text) {
            fprintf(stderr, "ptrain-plan: out of memory\n");
            status = EXIT_FAIL;
        } else {
            pt_planner_explain(pl, text, need);
            fputs(text, stdout);
            free(text);
        }
        if (energy) plan_energy_print(stdout, &edag, &eprof, &efront, esource, slowdown, straggler);
    }
    if (energy) {
        pt_energy_frontier_free(&efront);
        pt_energy_profile_free(&eprof);
        pt_energy_dag_free(&edag);
    }
    pt_planner_free(pl);
    pt_plan_machine_free(&mach);
    free(tasks);
    if (fflush(stdout) != 0 && !status) status = EXIT_FAIL;
    return status;
}
