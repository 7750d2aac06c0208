/* A stand-in libnvidia-ml.so for the tests (there is no GPU here): the
 * NVML calls ptrain makes, with NVML's ABI (nvml.h: int status, opaque
 * device handles), their state in files of the directory $FAKE_NVML_DIR
 * so that a test can set and inspect it between calls:
 *   count          devices (default 1)
 *   busid.N        device N's PCI bus id (default 00000000:0(7+N):00.0)
 *   energy.N       its total-energy counter in mJ (missing: NOT_SUPPORTED)
 *   clocks         supported graphics clocks, MHz (default 900 1200 1500 1800 1980)
 *   mem            supported memory clocks, MHz (default 2619 1593)
 *   root           present: the caller counts as root (locked clocks and
 *                  the API restriction may be set)
 *   restricted.N   1 (default) application clocks root-only, 0 lifted
 *   deny           words: "init" (nvmlInit_v2 fails), "energy" (the counter
 *                  is NO_PERMISSION), "clocks" (no clock list)
 *   log            appended by every call that changes something: "init",
 *                  "shutdown", "locked N MIN MAX", "reset_locked N",
 *                  "app N MEM GFX", "reset_app N", "restriction N 0|1"
 * As the real driver: locked clocks need root; application clocks need
 * root or the restriction lifted; setting the restriction needs root. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum { OK = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3, NO_PERMISSION = 4, NOT_FOUND = 6,
       INSUFFICIENT_SIZE = 7 };

typedef struct fake_dev { int idx; } fake_dev;
static fake_dev devs[16] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}};
static int inited;

static const char *path(const char *name, char *buf, size_t len)
{
    const char *dir = getenv("FAKE_NVML_DIR");
    snprintf(buf, len, "%s/%s", dir ? dir : ".", name);
    return buf;
}

/* The file's text, "" when absent. */
static int read_text(const char *name, char *out, size_t len)
{
    char p[4096];
    FILE *f = fopen(path(name, p, sizeof p), "r");
    out[0] = '\0';
    if (!f) return -1;
    size_t n = fread(out, 1, len - 1, f);
    out[n] = '\0';
    fclose(f);
    return 0;
}

static void write_text(const char *name, const char *text)
{
    char p[4096];
    FILE *f = fopen(path(name, p, sizeof p), "w");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static void logf_(const char *fmt, ...)
{
    char p[4096];
    FILE *f = fopen(path("log", p, sizeof p), "a");
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fputc('\n', f);
    fclose(f);
}

static int denied(const char *what)
{
    char t[256];
    if (read_text("deny", t, sizeof t)) return 0;
    return strstr(t, what) != NULL;
}

static int is_root(void)
{
    char t[8];
    return read_text("root", t, sizeof t) == 0;
}

static int count(void)
{
    char t[32];
    int n = read_text("count", t, sizeof t) == 0 ? atoi(t) : 1;
    return n < 0 ? 0 : n > 16 ? 16 : n;
}

static int dev_index(void *dev)
{
    for (int i = 0; i < 16; i++)
        if (dev == &devs[i]) return i < count() ? i : -1;
    return -1;
}

static void busid(int i, char *out, size_t len)
{
    char name[32];
    snprintf(name, sizeof name, "busid.%d", i);
    if (read_text(name, out, len) != 0 || !out[0]) snprintf(out, len, "00000000:%02X:00.0", 7 + i);
    out[strcspn(out, "\n")] = '\0';
}

/* Parse a list of numbers from file name (default text def). */
static unsigned list(const char *name, const char *def, unsigned *out, unsigned cap)
{
    char t[1024];
    if (read_text(name, t, sizeof t) != 0) snprintf(t, sizeof t, "%s", def);
    unsigned n = 0;
    char *s = t, *end;
    while (n < cap) {
        unsigned long v = strtoul(s, &end, 10);
        if (end == s) break;
        out[n++] = (unsigned)v;
        s = end;
    }
    return n;
}

#define NEED_INIT if (!inited) return UNINITIALIZED
#define NEED_DEV(d, i) int i = dev_index(d); if (i < 0) return INVALID_ARGUMENT

EXPORT const char *nvmlErrorString(int rc)
{
    switch (rc) {
    case OK: return "Success";
    case UNINITIALIZED: return "Uninitialized";
    case INVALID_ARGUMENT: return "Invalid Argument";
    case NOT_SUPPORTED: return "Not Supported";
    case NO_PERMISSION: return "Insufficient Permissions";
    case NOT_FOUND: return "Not Found";
    case INSUFFICIENT_SIZE: return "Insufficient Size";
    default: return "Unknown Error";
    }
}

EXPORT int nvmlInit_v2(void)
{
    if (denied("init")) return NO_PERMISSION;
    inited++;
    logf_("init");
    return OK;
}

EXPORT int nvmlShutdown(void)
{
    NEED_INIT;
    inited--;
    logf_("shutdown");
    return OK;
}

EXPORT int nvmlDeviceGetCount_v2(unsigned *n)
{
    NEED_INIT;
    *n = (unsigned)count();
    return OK;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **dev)
{
    NEED_INIT;
    if (i >= (unsigned)count()) return INVALID_ARGUMENT;
    *dev = &devs[i];
    return OK;
}

/* bus ids compare without case and without the domain's leading zeros */
static const char *strip(const char *s, char *buf, size_t len)
{
    size_t k = 0;
    while (*s == '0' && s[1] != ':' && s[1]) s++;
    for (; *s && k + 1 < len; s++) buf[k++] = (char)(*s >= 'A' && *s <= 'F' ? *s - 'A' + 'a' : *s);
    buf[k] = '\0';
    return buf;
}

EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **dev)
{
    NEED_INIT;
    char a[64], b[64], mine[64];
    strip(bus, a, sizeof a);
    for (int i = 0; i < count(); i++) {
        busid(i, mine, sizeof mine);
        if (!strcmp(a, strip(mine, b, sizeof b))) {
            *dev = &devs[i];
            return OK;
        }
    }
    return NOT_FOUND;
}

EXPORT int nvmlDeviceGetHandleByUUID(const char *uuid, void **dev)
{
    NEED_INIT;
    for (int i = 0; i < count(); i++) {
        char u[64];
        snprintf(u, sizeof u, "GPU-fake-%d", i);
        if (!strcmp(u, uuid)) {
            *dev = &devs[i];
            return OK;
        }
    }
    return NOT_FOUND;
}

typedef struct pci_info {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
} pci_info;

EXPORT int nvmlDeviceGetPciInfo_v3(void *dev, pci_info *pi)
{
    NEED_INIT;
    NEED_DEV(dev, i);
    memset(pi, 0, sizeof *pi);
    busid(i, pi->bus_id, sizeof pi->bus_id);
    snprintf(pi->bus_id_legacy, sizeof pi->bus_id_legacy, "%.15s", pi->bus_id);
    return OK;
}

EXPORT int nvmlDeviceGetName(void *dev, char *name, unsigned len)
{
    NEED_INIT;
    NEED_DEV(dev, i);
    snprintf(name, len, "Fake GPU %d", i);
    return OK;
}

EXPORT int nvmlDeviceGetTotalEnergyConsumption(void *dev, unsigned long long *mj)
{
    NEED_INIT;
    NEED_DEV(dev, i);
    if (denied("energy")) return NO_PERMISSION;
    char name[32], t[64];
    snprintf(name, sizeof name, "energy.%d", i);
    if (read_text(name, t, sizeof t) != 0) return NOT_SUPPORTED;
    *mj = strtoull(t, NULL, 10);
    return OK;
}

EXPORT int nvmlDeviceGetSupportedMemoryClocks(void *dev, unsigned *n, unsigned *mhz)
{
    NEED_INIT;
    NEED_DEV(dev, i);
    (void)i;
    if (denied("clocks")) return NOT_SUPPORTED;
    unsigned v[64], k = list("mem", "2619 1593", v, 64);
    if (*n < k) {
        *n = k;
        return INSUFFICIENT_SIZE;
    }
    memcpy(mhz, v, sizeof(unsigned) * k);
    *n = k;
    return OK;
}

EXPORT int nvmlDeviceGetSupportedGraphicsClocks(void *dev, unsigned mem, unsigned *n, unsigned *mhz)
{
    NEED_INIT;
    NEED_DEV(dev, i);
    (void)i;
    unsigned m[64], km = list("mem", "2619 1593", m, 64), found = 0;
    for (unsigned k = 0; k < km; k++) found |= m[k] == mem;
    if (!found) return NOT_FOUND;
    unsigned v[256], k = list("clocks", "900 1200 1500 1800 1980", v, 256);
    if (*n < k) {
        *n = k;
        return INSUFFICIENT_SIZE;
    }
    memcpy(mhz, v, sizeof(unsigned) * k);
    *n = k;
    return OK;
}

EXPORT int nvmlDeviceGetClockInfo(void *dev, int type, unsigned *mhz)
{
    NEED_INIT;
    NEED_DEV(dev, i);
    (void)i;
    (void)type;
    *mhz = 1980;
    return OK;
}

EXPORT int nvmlDeviceSetGpuLockedClocks(void *dev, unsigned lo, unsigned hi)
{
    NEED_INIT;
    NEED_DEV(dev, i);
    if (!is_root()) return NO_PERMISSION;
    logf_("locked %d %u %u", i, lo, hi);
    return OK;
}

EXPORT int nvmlDeviceResetGpuLockedClocks(void *dev)
{
    NEED_INIT;
    NEED_DEV(dev, i);
    if (!is_root()) return NO_PERMISSION;
    logf_("reset_locked %d", i);
    return OK;
}

static int restricted(int i)
{
    char name[32], t[8];
    snprintf(name, sizeof name, "restricted.%d", i);
    return read_text(name, t, sizeof t) != 0 || t[0] != '0';
}

EXPORT int nvmlDeviceSetApplicationsClocks(void *dev, unsigned mem, unsigned gfx)
{
    NEED_INIT;
    NEED_DEV(dev, i);
    if (!is_root() && restricted(i)) return NO_PERMISSION;
    logf_("app %d %u %u", i, mem, gfx);
    return OK;
}

EXPORT int nvmlDeviceResetApplicationsClocks(void *dev)
{
    NEED_INIT;
    NEED_DEV(dev, i);
    if (!is_root() && restricted(i)) return NO_PERMISSION;
    logf_("reset_app %d", i);
    return OK;
}

EXPORT int nvmlDeviceGetAPIRestriction(void *dev, int api, int *state)
{
    NEED_INIT;
    NEED_DEV(dev, i);
    if (api != 0) return NOT_SUPPORTED;
    *state = restricted(i);
    return OK;
}

EXPORT int nvmlDeviceSetAPIRestriction(void *dev, int api, int state)
{
    NEED_INIT;
    NEED_DEV(dev, i);
    if (api != 0) return NOT_SUPPORTED;
    if (!is_root()) return NO_PERMISSION;
    char name[32];
    snprintf(name, sizeof name, "restricted.%d", i);
    write_text(name, state ? "1\n" : "0\n");
    logf_("restriction %d %d", i, state ? 1 : 0);
    return OK;
}
