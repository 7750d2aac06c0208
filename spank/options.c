/* SPDX-License-Identifier: MIT */
/* ptrain.so, every SPANK context: the administrator's settings (plugstack
 * arguments and ptrain.conf, read in slurm_spank_init), the --ptrain-*
 * options (registered there; each value checked by its callback, in srun
 * and again where Slurm hands them to slurmstepd), and the request they
 * make with the PTRAIN_* variables and the administrator's defaults.  See
 * plugin.h and man/ptrain_spank.8. */
#include <stdio.h>
#include <string.h>

#include "plan/planner.h"
#include "spank/plugin.h"

pt_spank_conf ptsp_conf;
char ptsp_conf_err[PT_ERROR_LEN];
int ptsp_conf_bad;
int ptsp_opt_verbose;
int ptsp_opt_explain;

/* The plan options given (lib/contract/settings.h's rows offered to the
 * plugin; index = the row): their text as given, validated by cb_setting
 * against the administrator's limits, and read over the PTRAIN_* variables
 * and the admin defaults in ptsp_resolve_request. */
static char opt_text[PT_SETTINGS_MAX][400];
static int opt_given[PT_SETTINGS_MAX];

/* --ptrain-energy (ptrain_spank(8), ENERGY): the level asked for, -1 none */
static int opt_energy = -1;

/* Some --ptrain-* option was given (srun, sbatch, or handed to slurmstepd):
 * the step asks for ptrain (ptsp_is_ptrain_step). */
static int opt_any;

/* ---- options ------------------------------------------------------------ */
/* --ptrain-KEY of settings row val: its value through the one request
 * builder (pt_plan_request_set) against the administrator's limits (none
 * while the configuration is bad, which ptsp_resolve_request refuses on
 * its own), kept as given. */
static int cb_setting(int val, const char *optarg, int remote)
{
    (void)remote;
    int n = 0;
    const pt_setting *rows = pt_settings(&n);
    if (val < 0 || val >= n || val >= PT_SETTINGS_MAX) return -1;
    char what[64];
    snprintf(what, sizeof what, "--ptrain-%s", rows[val].key);
    if (pt_spank_parse_setting(ptsp_conf_bad ? NULL : &ptsp_conf, rows[val].key, what, optarg) < 0) {
        slurm_error("%s", pt_errmsg());
        return -1;
    }
    snprintf(opt_text[val], sizeof opt_text[val], "%s", optarg ? optarg : "");
    opt_given[val] = 1;
    opt_any = 1;
    return 0;
}

static int cb_explain(int val, const char *optarg, int remote)
{
    (void)val;
    (void)optarg;
    (void)remote;
    ptsp_opt_explain = 1;
    opt_any = 1;
    return 0;
}

static int cb_energy(int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    if (pt_spank_parse_energy_opt(&ptsp_conf, "--ptrain-energy", optarg, &opt_energy) < 0) {
        slurm_error("%s", pt_errmsg());
        return -1;
    }
    opt_any = 1;
    return 0;
}

static int cb_verbose(int val, const char *optarg, int remote)
{
    (void)val;
    (void)optarg;
    (void)remote;
    ptsp_opt_verbose = 1;
    opt_any = 1;
    return 0;
}

/* ---- the request -------------------------------------------------------- */
int ptsp_is_ptrain_step(ptsp_env_fn get, void *arg)
{
    if (opt_any) return 1;
    char buf[64];
    int g = get(arg, "PTRAIN_MODE", buf, (int)sizeof buf);
    if (g < 0) return 1; /* too long for any mode: a request, refused as such */
    if (g > 0) return strcmp(buf, "off") != 0;
    return ptsp_conf.default_mode != PT_MODE_OFF;
}

/* The request of a ptrain step (ptsp_resolve_request's contract). */
static int resolve_request(ptsp_env_fn get, void *arg, pt_plan_request *r)
{
    pt_plan_request_init(r, ptsp_conf.default_mode);
    r->plan.schedule = ptsp_conf.default_schedule;
    r->plan.recompute = ptsp_conf.default_recompute;
    r->plan.precision = ptsp_conf.default_precision;
    pt_plan_limits lim = pt_spank_conf_limits(&ptsp_conf);
    const pt_plan_limits *lp = ptsp_conf_bad ? NULL : &lim;
    /* the options given (validated by their callbacks) */
    int n = 0;
    const pt_setting *rows = pt_settings(&n);
    for (int i = 0; i < n && i < PT_SETTINGS_MAX; i++) {
        if (!opt_given[i]) continue;
        char what[64];
        snprintf(what, sizeof what, "--ptrain-%s", rows[i].key);
        if (pt_plan_request_set(r, lp, rows[i].key, what, opt_text[i]) < 0)
            return pt_fail(PT_EINVAL, "ptrain: %s", pt_errmsg());
    }
    /* the job's PTRAIN_* variables for the rest */
    if (pt_plan_request_env(r, lp, get, arg) < 0) return pt_fail(PT_EINVAL, "ptrain: %s", pt_errmsg());
    if (r->plan.mode == PT_MODE_OFF) return 0;
    if (ptsp_conf_bad)
        return pt_fail(PT_EINVAL, "ptrain: cluster configuration is invalid, refusing "
                       "--ptrain-mode=%s: %s", pt_mode_name(r->plan.mode), ptsp_conf_err);
    if (pt_plan_request_check(&r->plan, &lim) < 0)
        return pt_fail(PT_EINVAL, "ptrain: %s", pt_errmsg());
    return 0;
}

int ptsp_resolve_request(ptsp_env_fn get, void *arg, pt_plan_request *r)
{
    if (!ptsp_is_ptrain_step(get, arg)) { /* its PTRAIN_* are not read: mode off, the defaults */
        pt_plan_request_init(r, PT_MODE_OFF);
        return 0;
    }
    return resolve_request(get, arg, r);
}

/* The plan options: one per settings row offered to the plugin (val = the
 * row), built by ptsp_options_init; then the plugin's own. */
static struct spank_option plan_options[PT_SETTINGS_MAX];
static char plan_option_names[PT_SETTINGS_MAX][48];
static int n_plan_options;

static struct spank_option options[] = {
    {"ptrain-explain", NULL,
     "ptrain: print the chosen plan, the runners-up with predicted time and memory, and why "
     "(once, from rank 0's task).", 0, 0, cb_explain},
    {"ptrain-verbose", NULL, "ptrain: print the chosen plan (from rank 0's task).", 0, 0,
     cb_verbose},
    {"ptrain-energy", "off|report|plan|apply",
     "ptrain: energy: report (measure joules per step), plan (also plan each pipeline "
     "instruction's clock), apply (also set them: the task may set its own GPU's clocks); "
     "injected as PTRAIN_ENERGY, at most the cluster's energy level. Default: $PTRAIN_ENERGY.",
     1, 0, cb_energy},
};

/* The energy level of a ptrain step (ptsp_resolve_energy's contract). */
static int resolve_energy(ptsp_env_fn get, void *arg, int *level)
{
    char buf[64];
    *level = opt_energy;
    if (*level >= 0) return 0;
    int g = get(arg, "PTRAIN_ENERGY", buf, (int)sizeof buf);
    if (g < 0)
        return pt_fail(PT_EINVAL, "ptrain: PTRAIN_ENERGY in the job environment is longer than %d bytes; it is not a "
                       "valid value (valid: off, report, plan, apply)", (int)sizeof buf - 1);
    if (g && pt_spank_parse_energy_opt(&ptsp_conf, "PTRAIN_ENERGY", buf, level) < 0) return -1;
    return 0;
}

int ptsp_resolve_energy(ptsp_env_fn get, void *arg, int *level)
{
    *level = -1;
    return ptsp_is_ptrain_step(get, arg) ? resolve_energy(get, arg, level) : 0;
}

int ptsp_stray_check(ptsp_env_fn get, void *arg)
{
    if (ptsp_is_ptrain_step(get, arg)) return 0;
    pt_plan_request r;
    int level;
    if (resolve_request(get, arg, &r) < 0 || resolve_energy(get, arg, &level) < 0) return -1;
    return 0;
}

/* ---- slurm_spank_init ---------------------------------------------------- */
int ptsp_options_init(spank_t sp, int ac, char **av)
{
    pt_spank_conf_default(&ptsp_conf);
    ptsp_conf_bad = 0;
    ptsp_conf_err[0] = 0;
    for (int i = 0; i < ac && !ptsp_conf_bad; i++) {
        if (pt_spank_conf_arg(av[i], &ptsp_conf) < 0) {
            ptsp_conf_bad = 1;
            snprintf(ptsp_conf_err, sizeof ptsp_conf_err, "%s", pt_errmsg());
        }
    }
    if (ptsp_conf_bad) {
        /* Logged where an administrator looks (slurmd / slurmstepd log);
         * steps that ask for ptrain are refused with the same text. */
        spank_context_t ctx = spank_context();
        if (ctx == S_CTX_SLURMD || ctx == S_CTX_REMOTE) slurm_error("ptrain: %s", ptsp_conf_err);
        pt_spank_conf_default(&ptsp_conf);
    }
    if (!n_plan_options) {
        int n = 0;
        const pt_setting *rows = pt_settings(&n);
        for (int i = 0; i < n && i < PT_SETTINGS_MAX; i++) {
            if (!(rows[i].offered & PT_SETTING_PLUGIN) || !rows[i].plugin_usage) continue;
            snprintf(plan_option_names[i], sizeof plan_option_names[i], "ptrain-%s", rows[i].key);
            plan_options[n_plan_options++] = (struct spank_option){
                plan_option_names[i], (char *)rows[i].plugin_arg, (char *)rows[i].plugin_usage, 1, i, cb_setting};
        }
    }
    for (int i = 0; i < n_plan_options; i++) {
        spank_err_t rc = spank_option_register(sp, &plan_options[i]);
        if (rc != ESPANK_SUCCESS) {
            slurm_error("ptrain: cannot register --%s: %s", plan_options[i].name, spank_strerror(rc));
            return -1;
        }
    }
    for (size_t i = 0; i < sizeof options / sizeof options[0]; i++) {
        spank_err_t rc = spank_option_register(sp, &options[i]);
        if (rc != ESPANK_SUCCESS) {
            slurm_error("ptrain: cannot register --%s: %s", options[i].name, spank_strerror(rc));
            return -1;
        }
    }
    return 0;
}
