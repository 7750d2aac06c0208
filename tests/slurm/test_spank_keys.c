/* SPDX-License-Identifier: MIT */
/* The plugin's one table of configuration keys (spank/conf_keys.c) against
 * what repeats it: the key list of ptrain_spank(8) (each entry's header
 * line and first line are the table's), share/ptrain.conf.example and
 * share/plugstack.conf.example (every key they name is in the table, and
 * the example file with every setting uncommented loads), the defaults,
 * the messages that list the keys, and ptrain.conf and plugstack reading a
 * random valid value of each key alike. */
#define _GNU_SOURCE
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "spank/conf_keys.h"
#include "tests/tap.h"

static char tmpdir[] = "/tmp/ptrain-keys-XXXXXX";

static char *slurp(const char *rel)
{
    const char *top = getenv("top_srcdir");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", top ? top : ".", rel);
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    size_t r;
    while (s && (r = fread(s + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 >= cap) s = realloc(s, cap *= 2);
    }
    fclose(f);
    if (s) s[n] = '\0';
    return s;
}

static const char *write_file(const char *name, const char *text)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return path;
}

/* A roff text line as the reader sees it: \- -> -, \(dq -> ", \e -> \. */
static void unroff(const char *in, char *out, size_t len)
{
    size_t n = 0;
    for (const char *p = in; *p && n + 1 < len; p++) {
        if (p[0] == '\\' && p[1] == '-') out[n++] = '-', p++;
        else if (strncmp(p, "\\(dq", 4) == 0) out[n++] = '"', p += 3;
        else if (p[0] == '\\' && p[1] == 'e') out[n++] = '\\', p++;
        else out[n++] = *p;
    }
    out[n] = '\0';
}

/* The lines of the man page's PLUGSTACK ARGUMENTS AND ptrain.conf section. */
static int man_section(char *man, char **line, int cap)
{
    int n = 0, in = 0;
    for (char *save = NULL, *l = strtok_r(man, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (strncmp(l, ".SH ", 4) == 0) {
            if (in) break;
            in = strcmp(l, ".SH PLUGSTACK ARGUMENTS AND ptrain.conf") == 0;
            continue;
        }
        if (in && n < cap) line[n++] = l;
    }
    return n;
}

static void test_man(void)
{
    char *man = slurp("man/ptrain_spank.8");
    if (!tap_ok(man != NULL, "man/ptrain_spank.8 is readable")) return;
    char *line[1024];
    int n = man_section(man, line, 1024);
    tap_ok(n > 0, "ptrain_spank(8) has the section PLUGSTACK ARGUMENTS AND ptrain.conf (%d lines)", n);
    for (int k = 0; k < pt_spank_nkeys; k++) {
        const pt_spank_key *key = &pt_spank_keys[k];
        char want[512], doc[512];
        tap_ok(pt_spank_key_man(key, want, sizeof want) == 0, "%s: header fits", key->name ? key->name : key->arg);
        int at = -1;
        for (int i = 0; i < n && at < 0; i++)
            if (strcmp(line[i], want) == 0) at = i;
        tap_ok(at > 0 && strcmp(line[at - 1], ".TP") == 0, "man: an entry headed %s", want);
        if (at > 0 && at + 1 < n) unroff(line[at + 1], doc, sizeof doc);
        else doc[0] = '\0';
        tap_ok(at > 0 && strcmp(doc, key->doc) == 0, "man: its first line is the table's doc '%s' (man: '%s')",
               key->doc, doc);
    }
    /* no entry the table does not hold */
    int entries = 0, stale = 0;
    for (int i = 0; i + 1 < n; i++) {
        if (strcmp(line[i], ".TP") != 0) continue;
        entries++;
        char name[64] = "";
        if (sscanf(line[i + 1], ".BR %63s", name) != 1 ||
            (!pt_spank_key_find(name, strlen(name), 1) && !pt_spank_key_find(name, strlen(name), 0))) {
            stale++;
            tap_diag("man entry not in the table: %s", line[i + 1]);
        }
    }
    tap_ok(stale == 0 && entries == pt_spank_nkeys, "man: %d entries, one per key of the table (%d), none other",
           entries, pt_spank_nkeys);
    free(man);
}

static void test_examples(void)
{
    char *ex = slurp("share/ptrain.conf.example");
    if (!tap_ok(ex != NULL, "share/ptrain.conf.example is readable")) return;
    /* every setting, commented or not, uncommented */
    size_t len = strlen(ex);
    char *all = malloc(len + 1);
    all[0] = '\0';
    int seen[64] = {0}, unknown = 0;
    for (char *save = NULL, *l = strtok_r(ex, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char *p = l;
        if (*p == '#') p++;
        char name[64];
        int w = 0;
        if (sscanf(p, "%63[a-z_0-9] =%n", name, &w) == 1 && w > 0) {
            const pt_spank_key *k = pt_spank_key_find(name, strlen(name), 1);
            if (k) seen[k - pt_spank_keys] = 1;
            else unknown++, tap_diag("ptrain.conf.example sets '%s', not a key", name);
            strcat(all, p);
            strcat(all, "\n");
        }
    }
    tap_ok(unknown == 0, "ptrain.conf.example sets only keys of the table");
    int missing = 0;
    for (int k = 0; k < pt_spank_nkeys; k++)
        if (pt_spank_keys[k].name && !seen[k]) missing++, tap_diag("ptrain.conf.example lacks %s", pt_spank_keys[k].name);
    tap_ok(missing == 0, "ptrain.conf.example shows every ptrain.conf key");
    pt_spank_conf c;
    pt_spank_conf_default(&c);
    tap_ok(pt_spank_conf_load(write_file("example.conf", all), &c) == 0,
           "ptrain.conf.example with every setting uncommented loads: %s", pt_errmsg());
    free(all);
    free(ex);

    char *ps = slurp("share/plugstack.conf.example");
    if (!tap_ok(ps != NULL, "share/plugstack.conf.example is readable")) return;
    int named = 0, bad = 0;
    for (char *p = ps; *p; p++) {
        if (*p != '=' || p == ps || !(islower((unsigned char)p[-1]) || p[-1] == '_')) continue;
        char *b = p;
        while (b > ps && (islower((unsigned char)b[-1]) || b[-1] == '_')) b--;
        named++;
        if (!pt_spank_key_find(b, (size_t)(p - b), 0)) bad++, tap_diag("plugstack.conf.example names '%.*s'", (int)(p - b), b);
    }
    tap_ok(named > 0 && bad == 0, "plugstack.conf.example names only plugstack keys (%d named)", named);
    free(ps);
}

/* Bytes of the field key k sets in c (its size by type). */
static int same_field(const pt_spank_key *k, pt_spank_conf *a, pt_spank_conf *b)
{
    if (k->type == PT_SPANK_KEY_HOSTMAP) {
        if (a->n_node_models != b->n_node_models) return 0;
        for (int i = 0; i < a->n_node_models; i++)
            if (strcmp(a->node_model[i].hosts, b->node_model[i].hosts) || strcmp(a->node_model[i].path, b->node_model[i].path))
                return 0;
        return 1;
    }
    if (k->type == PT_SPANK_KEY_PATH) return strcmp(a->topology, b->topology) == 0;
    size_t size = k->type == PT_SPANK_KEY_RATE ? sizeof(double) : k->type == PT_SPANK_KEY_RANGE ? 2 * sizeof(double)
                                                                                                 : sizeof(int);
    return memcmp(pt_spank_key_field(a, k), pt_spank_key_field(b, k), size) == 0;
}

static void test_defaults(void)
{
    pt_spank_conf c;
    pt_spank_conf_default(&c);
    tap_ok(pt_spank_conf_check(&c) == 0, "the table's defaults pass the check: %s", pt_errmsg());
    for (int i = 0; i < pt_spank_nkeys; i++) {
        const pt_spank_key *k = &pt_spank_keys[i];
        if (!k->def || !k->arg) continue;
        char arg[256];
        snprintf(arg, sizeof arg, "%s=%s", k->arg, k->def);
        pt_spank_conf d = c;
        tap_ok(pt_spank_conf_arg(arg, &d) == 0 && same_field(k, &c, &d), "%s is the default of %s", arg,
               k->arg);
    }
    /* the messages that list the keys list every one */
    pt_spank_conf d = c;
    char ea[PT_ERROR_LEN], ef[PT_ERROR_LEN];
    pt_spank_conf_arg("no_such_key=1", &d);
    snprintf(ea, sizeof ea, "%s", pt_errmsg());
    pt_spank_conf_load(write_file("unknown.conf", "no_such_key = 1;\n"), &d);
    snprintf(ef, sizeof ef, "%s", pt_errmsg());
    int all_a = 1, all_f = 1;
    for (int i = 0; i < pt_spank_nkeys; i++) {
        if (pt_spank_keys[i].arg && !strstr(ea, pt_spank_keys[i].arg)) all_a = 0;
        if (pt_spank_keys[i].name && !strstr(ef, pt_spank_keys[i].name)) all_f = 0;
    }
    tap_ok(all_a, "an unknown plugstack argument names every plugstack key: %s", ea);
    tap_ok(all_f, "an unknown ptrain.conf setting names every setting: %s", ef);
}

static double urand(void) { return (double)rand() / ((double)RAND_MAX + 1.0); }

/* A random value of key k: its ptrain.conf form into file[], its plugstack
 * form into arg[]. */
static void random_value(const pt_spank_key *k, char *file, char *arg)
{
    const size_t len = 256; /* arg[len], file[2 * len] */
    switch (k->type) {
    case PT_SPANK_KEY_ENUM: {
        char items[8][32];
        int n = 0;
        for (const char *p = k->valid; *p && n < 8;) {
            size_t w = strcspn(p, ",");
            snprintf(items[n++], sizeof items[0], "%.*s", (int)w, p);
            p += w;
            while (*p == ',' || *p == ' ') p++;
        }
        const char *v = items[rand() % n];
        snprintf(file, 2 * len, "\"%s\"", v);
        snprintf(arg, len, "%s", v);
        break;
    }
    case PT_SPANK_KEY_LIST: {
        char f[256] = "[", a[256] = "";
        int any = 0;
        for (const char *p = k->valid; *p;) {
            size_t w = strcspn(p, ",");
            if (rand() % 2 || (!any && !p[w])) {
                snprintf(f + strlen(f), sizeof f - strlen(f), "%s\"%.*s\"", any ? ", " : "", (int)w, p);
                snprintf(a + strlen(a), sizeof a - strlen(a), "%s%.*s", any ? "," : "", (int)w, p);
                any = 1;
            }
            p += w;
            while (*p == ',' || *p == ' ') p++;
        }
        snprintf(file, 2 * len, "%s]", f);
        snprintf(arg, len, "%s", a);
        break;
    }
    case PT_SPANK_KEY_INT: {
        int v = k->lo + (int)(urand() * (k->hi - k->lo + 1));
        snprintf(file, 2 * len, "%d", v);
        snprintf(arg, len, "%d", v);
        break;
    }
    case PT_SPANK_KEY_RATE: {
        double v = ldexp(1.0 + (double)(rand() % 1000), rand() % 12) / 8;
        snprintf(file, 2 * len, "%.17g", v); /* an integer or a float: both are numbers */
        snprintf(arg, len, "%.17g", v);
        break;
    }
    case PT_SPANK_KEY_RANGE: {
        int a = 100 + rand() % 2000, b = a + rand() % 2000;
        snprintf(file, 2 * len, "[%d, %d]", a, b);
        snprintf(arg, len, "%d-%d", a, b);
        break;
    }
    case PT_SPANK_KEY_PATH:
        snprintf(arg, len, "/var/cache/ptrain/n%d.json", rand() % 1000);
        snprintf(file, 2 * len, "\"%s\"", arg);
        break;
    case PT_SPANK_KEY_HOSTMAP: {
        int hi = 2 + rand() % 60;
        snprintf(arg, len, "gpu[01-%02d]=/etc/ptrain/m%d.json", hi, rand() % 100);
        snprintf(file, 2 * len, "[\"%s\"]", arg);
        break;
    }
    default: file[0] = arg[0] = '\0';
    }
}

static void test_file_equals_arg(void)
{
    int keys = 0, tried = 0, same = 1;
    for (int i = 0; i < pt_spank_nkeys; i++) {
        const pt_spank_key *k = &pt_spank_keys[i];
        if (!k->name || !k->arg) continue;
        keys++;
        for (int r = 0; r < 20; r++) {
            char fv[512], av[256], text[600], arg[300];
            random_value(k, fv, av);
            snprintf(arg, sizeof arg, "%s=%s", k->arg, av);
            pt_spank_conf a, f;
            pt_spank_conf_default(&a);
            pt_spank_conf_default(&f);
            if (pt_spank_conf_arg(arg, &a) < 0) continue; /* valid alone, not with the defaults */
            tried++;
            snprintf(text, sizeof text, "%s = %s;\n", k->name, fv);
            if (pt_spank_conf_load(write_file("one.conf", text), &f) < 0 || !same_field(k, &a, &f)) {
                same = 0;
                tap_diag("'%s' and '%s' differ: %s", arg, text, pt_errmsg());
            }
        }
    }
    tap_ok(tried >= keys && same, "ptrain.conf and plugstack read %d random values of %d keys alike", tried, keys);
    /* a value of the wrong type names the key and the line */
    int named = 1;
    for (int i = 0; i < pt_spank_nkeys; i++) {
        const pt_spank_key *k = &pt_spank_keys[i];
        if (!k->name) continue;
        char text[128];
        snprintf(text, sizeof text, "\n%s = { x = 1; };\n", k->name);
        pt_spank_conf c;
        pt_spank_conf_default(&c);
        if (pt_spank_conf_load(write_file("group.conf", text), &c) == 0 || !strstr(pt_errmsg(), k->name) ||
            !strstr(pt_errmsg(), ".conf:2: ")) {
            named = 0;
            tap_diag("%s = { }: %s", k->name, pt_errmsg());
        }
    }
    tap_ok(named, "a group for any setting is refused, naming the setting and line 2");
}

int main(void)
{
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    srand(seed);
    tap_diag("seed %u", seed);
    if (!mkdtemp(tmpdir)) {
        tap_ok(0, "mkdtemp");
        return tap_done();
    }
    test_man();
    test_examples();
    test_defaults();
    test_file_equals_arg();
    static const char *const written[] = {"example.conf", "unknown.conf", "one.conf", "group.conf"};
    for (size_t i = 0; i < sizeof written / sizeof *written; i++) unlink(write_file(written[i], ""));
    rmdir(tmpdir);
    return tap_done();
}
