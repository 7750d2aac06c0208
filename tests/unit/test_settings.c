/* SPDX-License-Identifier: MIT */
/* The plan settings' table (lib/contract/settings.h): its spelling rule,
 * one pin bit per row covering every PT_PIN_*, pt_plan_request_keys from
 * the rows, and each row's parser through pt_plan_request_set and
 * pt_plan_request_env (its example pins its bit and only it; a bad value
 * is refused naming the flag or variable).  With --dump it prints one line
 * per row, "KEY VAR OFFERED ARG" (OFFERED: the PT_SETTING_* bits; ARG:
 * srun --help's argument name, "-" for none), for
 * tests/unit/test_settings_docs.sh, which holds the man pages, --help and the
 * plugin's options to the table. */
#define _POSIX_C_SOURCE 200809L
#include "contract/settings.h"
#include "../tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int n = 0;
    const pt_setting *rows = pt_settings(&n);
    if (argc > 1 && !strcmp(argv[1], "--dump")) {
        for (int i = 0; i < n; i++)
            printf("%s %s %u %s\n", rows[i].key, rows[i].var, rows[i].offered,
                   rows[i].plugin_arg ? rows[i].plugin_arg : "-");
        return 0;
    }
    tap_ok(n >= 16 && n <= PT_SETTINGS_MAX, "the table has %d rows (at most PT_SETTINGS_MAX %d)", n,
           PT_SETTINGS_MAX);
    unsigned all = 0;
    int spelled = 1, distinct = 1, docs = 1;
    char keys[1024] = "";
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        const pt_setting *s = &rows[i];
        char want[64] = "PTRAIN_";
        for (size_t j = 0; s->key[j] && j + 8 < sizeof want; j++)
            want[7 + j] = s->key[j] == '-' ? '_' : (char)(s->key[j] - (s->key[j] >= 'a' && s->key[j] <= 'z' ? 32 : 0));
        if (strcmp(want, s->var)) spelled = 0, tap_diag("row %s: variable %s, the rule says %s", s->key, s->var, want);
        if (all & s->pin || !s->pin || (s->pin & (s->pin - 1))) distinct = 0, tap_diag("row %s: pin %#x", s->key, s->pin);
        all |= s->pin;
        if (!s->values || !*s->values || !s->example || !*s->example || !s->set || !s->offered) docs = 0;
        /* the plugin's option is generated from the row: its argument and usage text */
        if (!(s->offered & PT_SETTING_PLUGIN) != !(s->plugin_arg && s->plugin_usage)) docs = 0;
        if (pt_setting_find(s->key) != s) distinct = 0;
        k += (size_t)snprintf(keys + k, sizeof keys - k, "%s%s", i ? ", " : "", s->key);
    }
    tap_ok(spelled, "every row's variable is PTRAIN_ and its key upper-cased, '-' as '_'");
    tap_ok(distinct, "one distinct pin bit per row, each row found by its key");
    tap_ok(all == (PT_PIN_PRECISION << 1) - 1, "the pins cover every PT_PIN_ bit (%#x)", all);
    tap_ok(docs, "every row has its valid values, an example, a parser and a front end that offers it; srun --help's "
           "argument and text exactly where the plugin offers it");
    tap_ok(!strcmp(pt_plan_request_keys(), keys), "pt_plan_request_keys lists the rows in order: %s",
           pt_plan_request_keys());
    tap_ok(pt_setting_find("no-such") == NULL, "an unknown key is not found");

    int set_ok = 1, bad_ok = 1, env_ok = 1;
    for (int i = 0; i < n; i++) {
        const pt_setting *s = &rows[i];
        pt_plan_request r;
        pt_plan_request_init(&r, PT_MODE_AUTO);
        char what[64];
        snprintf(what, sizeof what, "--%s", s->key);
        if (pt_plan_request_set(&r, NULL, s->key, what, s->example) != 0 || r.pinned != s->pin) {
            set_ok = 0;
            tap_diag("row %s: example '%s': %s (pinned %#x)", s->key, s->example, pt_errmsg(), r.pinned);
        }
        pt_plan_request b = r;
        if (pt_plan_request_set(&b, NULL, s->key, what, "x!") == 0 || !strstr(pt_errmsg(), what) ||
            memcmp(&b, &r, sizeof b) != 0) {
            bad_ok = 0;
            tap_diag("row %s: 'x!' gave: %s", s->key, pt_errmsg());
        }
        pt_plan_request e;
        pt_plan_request_init(&e, PT_MODE_AUTO);
        setenv(s->var, s->example, 1);
        if (pt_plan_request_env(&e, NULL, pt_plan_getenv, NULL) != 0 || e.pinned != s->pin ||
            memcmp(&e.plan, &r.plan, sizeof e.plan) != 0 || e.global_batch != r.global_batch) {
            env_ok = 0;
            tap_diag("row %s: %s=%s: %s (pinned %#x)", s->key, s->var, s->example, pt_errmsg(), e.pinned);
        }
        unsetenv(s->var);
    }
    tap_ok(set_ok, "each row's example parses through pt_plan_request_set and pins its bit and only it");
    tap_ok(bad_ok, "each row refuses 'x!' naming the flag, and leaves the request as it was");
    tap_ok(env_ok, "each row's variable set to its example gives the same request through pt_plan_request_env");
    pt_plan_request r;
    pt_plan_request_init(&r, PT_MODE_AUTO);
    tap_ok(pt_plan_request_set(&r, NULL, "bogus", "--bogus", "1") != 0 && strstr(pt_errmsg(), pt_plan_request_keys()),
           "an unknown key is refused naming the valid ones: %s", pt_errmsg());
    return tap_done();
}
