/* SPDX-License-Identifier: MIT */
/* ptrain-plan's output: --env (the plan's PTRAIN_* variables), --json, or
 * the text explanation (bin/plan/plan_tool.h). */
#define _POSIX_C_SOURCE 200809L
#include "plan_tool.h"
#include "plan/cost.h"
#include "plan/resolve.h"
#include "plan_energy.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* --json: the machine, the plan, the runners-up (and the frontier) as one
 * JSON object on stdout; 0, or PT_EXIT_FAIL out of memory. */
static int print_json(const plan_cmdline *op, plan_run *run)
{
    const pt_cluster *cl = &run->mach.cluster;
    const pt_search_result *r = pt_planner_result(run->pl);
    const pt_model_shape m = op->req.model;
    int status = 0;
    int uniform = 1;
    for (int i = 1; i < op->nodes; i++) uniform &= run->tasks[i] == run->tasks[0];
    json_t *root = json_object();
    if (run->mach.nkinds == 1) {
        json_object_set_new(root, "topology", json_string(run->names[0]));
    } else {
        char all[1024] = "";
        for (int k = 0, l = 0; k < run->nkinds && l < (int)sizeof all; k++)
            l += snprintf(all + l, sizeof all - (size_t)l, "%s%s:%d", k ? "," : "", run->names[k], op->topo[k].count);
        json_object_set_new(root, "topology", json_string(all));
    }
    json_object_set_new(root, "nodes", json_integer(op->nodes));
    if (uniform) json_object_set_new(root, "tasks_per_node", json_integer(run->tasks[0]));
    else {
        json_t *a = json_array();
        for (int i = 0; i < op->nodes; i++) json_array_append_new(a, json_integer(run->tasks[i]));
        json_object_set_new(root, "tasks_per_node", a);
    }
    json_object_set_new(root, "island_ranks", json_integer(cl->island_ranks));
    json_object_set_new(root, "model", json_pack("{s:i, s:i, s:i, s:i, s:i}", "n_layer", m.n_layer, "n_head",
                                                 m.n_head, "n_embd", m.n_embd, "seq_len", m.seq_len, "vocab",
                                                 m.vocab));
    if (m.family == PT_FAMILY_LLAMA) { /* GPT-2's object stays as it was */
        char spell[160];
        pt_model_shape_format(&m, spell, (int)sizeof spell);
        json_t *mo = json_object_get(root, "model");
        json_object_set_new(mo, "family", json_string(pt_model_family_name(m.family)));
        json_object_set_new(mo, "n_kv_head", json_integer(pt_model_kv_heads(&m)));
        json_object_set_new(mo, "ffn", json_integer(pt_model_ffn(&m)));
        json_object_set_new(mo, "untied", json_boolean(pt_model_untied(&m)));
        json_object_set_new(mo, "num_params", json_integer(pt_model_num_params(&m)));
        json_object_set_new(mo, "spelling", json_string(spell));
    }
    json_object_set_new(root, "global_batch", json_integer(op->batch));
    json_object_set_new(root, "hw", hw_json(&cl->hw));
    if (cl->nkinds > 1) {
        json_t *ks = json_array();
        for (int k = 0; k < cl->nkinds; k++) {
            int cnt = 0;
            for (int i = 0; i < op->nodes; i++) cnt += run->mach.kind_of[i] == k;
            json_array_append_new(ks, json_pack("{s:s, s:i, s:i, s:o}", "topology", run->names[k], "nodes", cnt,
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
    if (op->energy)
        json_object_set_new(root, "energy", plan_energy_json(&run->edag, &run->eprof, &run->efront,
                                                             op->profile_path ? NULL : op->power_model,
                                                             op->profile_path,
                                                             op->slowdown, op->straggler));
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    json_decref(root);
    if (!text) {
        fprintf(stderr, "ptrain-plan: out of memory\n");
        status = PT_EXIT_FAIL;
    } else {
        printf("%s\n", text);
        free(text);
    }
    return status;
}

/* The machine, the planner's explanation (and the frontier) as text on
 * stdout; 0, or PT_EXIT_FAIL out of memory. */
static int print_text(const plan_cmdline *op, plan_run *run)
{
    const pt_cluster *cl = &run->mach.cluster;
    int status = 0;
    if (cl->nkinds <= 1) {
        char isl[48];
        if (cl->island_ranks > 0)
            snprintf(isl, sizeof isl, "islands of %d ranks", cl->island_ranks);
        else
            snprintf(isl, sizeof isl, "the node is one island");
        printf("machine: %d node%s x %d tasks, node model %s, %s\n", op->nodes, op->nodes == 1 ? "" : "s",
               run->tasks[0], run->names[0], isl);
    } else {
        printf("machine: %d nodes of %d kinds:", op->nodes, cl->nkinds);
        for (int k = 0; k < cl->nkinds; k++) {
            int cnt = 0, tk = 0;
            for (int i = 0; i < op->nodes; i++)
                if (run->mach.kind_of[i] == k) cnt++, tk = run->tasks[i];
            char isl[48];
            if (cl->kinds[k].island_ranks > 0) snprintf(isl, sizeof isl, "islands of %d ranks", cl->kinds[k].island_ranks);
            else snprintf(isl, sizeof isl, "the node is one island");
            printf("%s %d x %s (%d tasks, %s)", k ? "," : "", cnt, run->names[k], tk, isl);
        }
        printf("\n");
    }
    /* the bf16 GEMM rate's line ("gemm bf16:", after a kind's
     * "[name] ") only where a bf16 plan uses it */
    for (char *line = strtok(run->mach.note, "\n"); line; line = strtok(NULL, "\n")) {
        const char *body = line[0] == '[' && strstr(line, "] ") ? strstr(line, "] ") + 2 : line;
        if (op->req.plan.precision == PT_PREC_BF16 || strncmp(body, "gemm bf16:", 10) != 0) printf("  %s\n", line);
    }
    size_t need = pt_planner_explain(run->pl, NULL, 0) + 1;
    char *text = malloc(need);
    if (!text) {
        fprintf(stderr, "ptrain-plan: out of memory\n");
        status = PT_EXIT_FAIL;
    } else {
        pt_planner_explain(run->pl, text, need);
        fputs(text, stdout);
        free(text);
    }
    if (op->energy)
        plan_energy_print(stdout, &run->edag, &run->eprof, &run->efront, run->esource, op->slowdown, op->straggler);
    return status;
}

/* The plan as --out asks (plan_tool.h). */
int plan_print(const plan_cmdline *op, plan_run *run)
{
    const pt_search_result *r = pt_planner_result(run->pl);
    int status = 0;
    if (op->out == 'e') {
        if (pt_plan_export(&r->best.plan, print_env, NULL) != 0) status = PT_EXIT_FAIL;
    } else if (op->out == 'j') {
        status = print_json(op, run);
    } else {
        status = print_text(op, run);
    }
    return status;
}
