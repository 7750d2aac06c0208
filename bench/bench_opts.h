/* bench_opts.h: the command line of the benches (bench/bench-*), one table
 * of options per program and one parser for all of them, header-only.
 *
 * Each bench describes its options as a bench_opt table ending in {0} and
 * calls bench_opts_parse first thing in main, before MPI_Init (so that
 * `bench-layouts --help` works without mpirun and prints no MPI noise) and
 * before it allocates anything.  The parser is getopt_long (libc; a long
 * option may be abbreviated to a unique prefix and given as --name=value):
 *   -h, --help       the usage (every option with its value, range and
 *                    default) on stdout, exit status 0;
 *   a bad command    (unknown option, missing value, value that is not a
 *                    number or out of range, list with a bad element,
 *                    choice not among the valid ones, positional argument)
 *                    ONE line on stderr naming the value and what is valid,
 *                    exit status 2.
 * Under mpirun or srun only rank 0 prints (read from OMPI_COMM_WORLD_RANK,
 * PMIX_RANK, PMI_RANK or SLURM_PROCID, since MPI is not initialised yet);
 * every rank exits with the same status.
 *
 * Values are stored through the table's pointers as they are parsed; what
 * a pointer holds before the call is the default the usage prints (unless
 * the entry's `def` text says otherwise, for defaults that depend on the
 * run, such as the world size). */
#ifndef PTRAIN_BENCH_OPTS_H
#define PTRAIN_BENCH_OPTS_H

#include "core/core.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum bench_kind {
    BENCH_INT,    /* int *: a decimal integer in [min, max] */
    BENCH_DOUBLE, /* double *: a finite number in [min, max] */
    BENCH_STR,    /* const char **: any non-empty text (the bench checks it) */
    BENCH_CHOICE, /* const char **: one of the '|'-separated words in arg */
    BENCH_INTS,   /* bench_ints *: comma-separated integers in [min, max] */
    BENCH_FLAG    /* int *: set to 1; takes no value */
} bench_kind;

enum { BENCH_INTS_MAX = 16 };

/* A list option's value: n integers (n = 0: not given, the default). */
typedef struct bench_ints {
    int n;
    int v[BENCH_INTS_MAX];
} bench_ints;

typedef struct bench_opt {
    const char *name;  /* the long name, without "--" */
    bench_kind kind;
    double min, max;   /* BENCH_INT, BENCH_DOUBLE, BENCH_INTS: the valid range, inclusive */
    void *ptr;         /* where the value goes (type by kind) */
    const char *arg;   /* the value's name in the usage ("N", "LIST"); BENCH_CHOICE: "wall|cpu" */
    const char *help;  /* what the option does, one line */
    const char *def;   /* the default as the usage prints it; NULL: the value *ptr holds */
} bench_opt;

/* 1 unless the launcher's environment names this process a rank other than 0. */
static int bench_opts_rank0(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) return strcmp(v, "0") == 0;
    }
    return 1;
}

/* "1..1000000" for a numeric entry, "" for the others. */
static void bench_opts_range(const bench_opt *o, char *buf, size_t len)
{
    if (o->kind == BENCH_INT || o->kind == BENCH_INTS) snprintf(buf, len, "%.0f..%.0f", o->min, o->max);
    else if (o->kind == BENCH_DOUBLE) snprintf(buf, len, "%g..%g", o->min, o->max);
    else buf[0] = 0;
}

/* The default held by *o->ptr, as text. */
static void bench_opts_default(const bench_opt *o, char *buf, size_t len)
{
    if (o->def) {
        snprintf(buf, len, "%s", o->def);
        return;
    }
    switch (o->kind) {
    case BENCH_INT: snprintf(buf, len, "%d", *(const int *)o->ptr); break;
    case BENCH_DOUBLE: snprintf(buf, len, "%g", *(const double *)o->ptr); break;
    case BENCH_STR:
    case BENCH_CHOICE: snprintf(buf, len, "%s", *(const char *const *)o->ptr); break;
    case BENCH_INTS: {
        const bench_ints *l = o->ptr;
        size_t at = 0;
        buf[0] = 0;
        for (int i = 0; i < l->n && at < len; i++) at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? "," : "", l->v[i]);
        break;
    }
    case BENCH_FLAG: snprintf(buf, len, "off"); break;
    }
}

static void bench_opts_usage(const char *file, const char *prog, const char *synopsis, const char *about,
                             const bench_opt *opts)
{
    const char *src = strstr(file, "bench/") ? strstr(file, "bench/") : file;
    printf("usage: %s\n%s\n\nOptions:\n", synopsis, about);
    for (const bench_opt *o = opts; o->name; o++) {
        char left[64], range[64], def[128];
        if (o->kind == BENCH_FLAG) snprintf(left, sizeof left, "--%s", o->name);
        else snprintf(left, sizeof left, "--%s %s", o->name, o->arg);
        bench_opts_range(o, range, sizeof range);
        bench_opts_default(o, def, sizeof def);
        printf("  %-22s %s", left, o->help);
        if (range[0]) printf(", %s%s", o->kind == BENCH_INTS ? "each " : "", range);
        printf(" (default %s)\n", def);
    }
    printf("  %-22s %s\n", "-h, --help", "print this help and exit");
    printf("\n%s refuses a bad option or value in one line, exit status 2.  What it measures and prints: the "
           "comment at the top of %s.\n", prog, src);
}

/* Parse s into o's pointer; 0, or -1 after the one-line message. */
static int bench_opts_value(const char *prog, const bench_opt *o, const char *s)
{
    char range[64];
    bench_opts_range(o, range, sizeof range);
    switch (o->kind) {
    case BENCH_INT: {
        long v;
        if (pt_parse_int(o->name, s, (long)o->min, (long)o->max, &v)) break;
        *(int *)o->ptr = (int)v;
        return 0;
    }
    case BENCH_DOUBLE: {
        char *end;
        double v = *s ? strtod(s, &end) : NAN;
        if (!*s || *end || !isfinite(v) || v < o->min || v > o->max) {
            if (bench_opts_rank0()) fprintf(stderr, "%s: --%s: '%s' is not a number in %s\n", prog, o->name, s, range);
            return -1;
        }
        *(double *)o->ptr = v;
        return 0;
    }
    case BENCH_STR:
        if (!*s) {
            if (bench_opts_rank0()) fprintf(stderr, "%s: --%s: empty value, expected %s\n", prog, o->name, o->arg);
            return -1;
        }
        *(const char **)o->ptr = s;
        return 0;
    case BENCH_CHOICE: {
        size_t n = strlen(s);
        for (const char *w = o->arg; n && *w;) {
            size_t wl = strcspn(w, "|");
            if (wl == n && !strncmp(w, s, n)) {
                *(const char **)o->ptr = s;
                return 0;
            }
            w += wl + (w[wl] == '|');
        }
        if (bench_opts_rank0()) fprintf(stderr, "%s: --%s: '%s' is not one of %s\n", prog, o->name, s, o->arg);
        return -1;
    }
    case BENCH_INTS: {
        bench_ints l = {0};
        const char *p = s;
        for (;;) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p || (*end && *end != ',') || v < (long)o->min || v > (long)o->max || l.n == BENCH_INTS_MAX) {
                if (bench_opts_rank0())
                    fprintf(stderr, "%s: --%s: '%s' is not a comma-separated list of up to %d integers in %s\n", prog,
                            o->name, s, BENCH_INTS_MAX, range);
                return -1;
            }
            l.v[l.n++] = (int)v;
            if (!*end) break;
            p = end + 1;
        }
        *(bench_ints *)o->ptr = l;
        return 0;
    }
    case BENCH_FLAG: *(int *)o->ptr = 1; return 0;
    }
    /* BENCH_INT's range error: pt_parse_int's message, after the option's dashes */
    if (bench_opts_rank0()) fprintf(stderr, "%s: --%s\n", prog, pt_errmsg());
    return -1;
}

/* Parse argv against opts (a table ended by an entry with a NULL name).
 * prog: the program's name for messages ("bench-step"); synopsis: the
 * usage line after "usage: " ("mpirun -np P bench-layouts [options]");
 * about: what the bench measures, one or a few lines.  Returns only when
 * the command is good, with every given value stored; exits with status 0
 * after the usage (-h, --help) and with status 2 after one line on stderr
 * for a bad command.  No other errors; allocates nothing.  A macro, so that
 * the usage names the bench's source file (__FILE__ of the caller). */
#define bench_opts_parse(argc, argv, prog, synopsis, about, opts) \
    bench_opts_parse_at(__FILE__, argc, argv, prog, synopsis, about, opts)
static void bench_opts_parse_at(const char *file, int argc, char **argv, const char *prog, const char *synopsis,
                                const char *about, const bench_opt *opts)
{
    enum { MAXOPT = 32 };
    struct option lo[MAXOPT + 2];
    char valid[512] = "";
    int n = 0;
    for (const bench_opt *o = opts; o->name && n < MAXOPT; o++, n++) {
        lo[n] = (struct option){o->name, o->kind == BENCH_FLAG ? no_argument : required_argument, NULL, 1000 + n};
        size_t at = strlen(valid);
        snprintf(valid + at, sizeof valid - at, "--%s ", o->name);
    }
    lo[n++] = (struct option){"help", no_argument, NULL, 'h'};
    lo[n] = (struct option){0, 0, 0, 0};
    opterr = 0;
    optind = 1;
    int c, bad = 0;
    while (!bad && (c = getopt_long(argc, argv, "+:h", lo, NULL)) != -1) {
        const char *what = argv[optind - 1];
        if (c == 'h') {
            if (bench_opts_rank0()) {
                bench_opts_usage(file, prog, synopsis, about, opts);
                fflush(stdout);
            }
            exit(0);
        } else if (c == ':') {
            const bench_opt *o = NULL;
            for (const bench_opt *p = opts; p->name; p++)
                if (optopt == 1000 + (int)(p - opts)) o = p;
            char range[64] = "";
            if (o) bench_opts_range(o, range, sizeof range);
            if (bench_opts_rank0())
                fprintf(stderr, "%s: option %s needs a value (%s%s%s)\n", prog, what, o ? o->arg : "see --help",
                        range[0] ? " in " : "", range);
            bad = 1;
        } else if (c == '?') {
            if (bench_opts_rank0()) {
                if (optopt && !strncmp(what, "--", 2) && strchr(what, '='))
                    fprintf(stderr, "%s: option '%s': %.*s takes no value\n", prog, what, (int)strcspn(what, "="), what);
                else if (optopt && optopt < 1000) fprintf(stderr, "%s: unknown option -%c (valid: %s-h --help)\n", prog, optopt, valid);
                else {
                    size_t len = strcspn(what + 2, "="), hits = 0;
                    for (const bench_opt *p = opts; p->name && !strncmp(what, "--", 2); p++)
                        hits += !strncmp(p->name, what + 2, len);
                    fprintf(stderr, "%s: %s option '%s' (valid: %s-h --help)\n", prog, hits > 1 ? "ambiguous" : "unknown",
                            what, valid);
                }
            }
            bad = 1;
        } else {
            bad = bench_opts_value(prog, &opts[c - 1000], optarg) != 0;
        }
    }
    if (!bad && optind < argc) {
        if (bench_opts_rank0())
            fprintf(stderr, "%s: unexpected argument '%s' (it takes options only: %s-h --help)\n", prog, argv[optind],
                    valid);
        bad = 1;
    }
    if (bad) exit(2);
}

#endif
