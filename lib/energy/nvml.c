/* SPDX-License-Identifier: MIT */
/* NVML loaded with dlopen (see nvml.h). */
#define _GNU_SOURCE
#include "energy/nvml.h"
#include "core/core.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* nvml.h's ABI: nvmlReturn_t values, nvmlEnableState_t, nvmlRestrictedAPI_t,
 * nvmlClockType_t, nvmlPciInfo_t (the _v3 layout). */
enum { NV_SUCCESS = 0, NV_NOT_SUPPORTED = 3, NV_NO_PERMISSION = 4, NV_NOT_FOUND = 6, NV_INSUFFICIENT_SIZE = 7 };
enum { NV_FEATURE_DISABLED = 0, NV_FEATURE_ENABLED = 1 };
enum { NV_API_APPLICATION_CLOCKS = 0 };
enum { NV_CLOCK_SM = 1 };
typedef struct nv_pci_info {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
} nv_pci_info;

typedef int (*fn_void)(void);
typedef const char *(*fn_errstr)(int);
typedef int (*fn_count)(unsigned *);
typedef int (*fn_by_index)(unsigned, pt_nvml_dev *);
typedef int (*fn_by_text)(const char *, pt_nvml_dev *);
typedef int (*fn_pci)(pt_nvml_dev, nv_pci_info *);
typedef int (*fn_name)(pt_nvml_dev, char *, unsigned);
typedef int (*fn_energy)(pt_nvml_dev, unsigned long long *);
typedef int (*fn_mem_clocks)(pt_nvml_dev, unsigned *, unsigned *);
typedef int (*fn_gfx_clocks)(pt_nvml_dev, unsigned, unsigned *, unsigned *);
typedef int (*fn_clock_info)(pt_nvml_dev, int, unsigned *);
typedef int (*fn_dev2u)(pt_nvml_dev, unsigned, unsigned);
typedef int (*fn_dev)(pt_nvml_dev);
typedef int (*fn_get_restr)(pt_nvml_dev, int, int *);
typedef int (*fn_set_restr)(pt_nvml_dev, int, int);

struct pt_nvml {
    void *lib;
    char path[512];
    int last;          /* NVML's status of the last failing call */
    fn_void init, shutdown;
    fn_errstr errstr;
    fn_count count;
    fn_by_index by_index;
    fn_by_text by_bus, by_uuid;
    fn_pci pci;
    fn_name name;
    fn_energy energy;
    fn_mem_clocks mem_clocks;
    fn_gfx_clocks gfx_clocks;
    fn_clock_info clock_info;
    fn_dev2u set_locked, set_app;
    fn_dev reset_locked, reset_app;
    fn_get_restr get_restr;
    fn_set_restr set_restr;
};

/* dlsym into a function pointer of any type (POSIX guarantees the
 * conversion for dlsym's results). */
#define LOOKUP(n, field, sym) do { void *p_ = dlsym((n)->lib, sym); memcpy(&(n)->field, &p_, sizeof p_); } while (0)

const char *pt_nvml_library(const pt_nvml *n) { return n ? n->path : ""; }

int pt_nvml_denied(const pt_nvml *n) { return n && n->last == NV_NO_PERMISSION; }

/* One line for a failed call: PT_EUNSUPP for NOT_SUPPORTED, NO_PERMISSION
 * and NOT_FOUND, else PT_EIO. */
static int nv_fail(pt_nvml *n, int rc, const char *call)
{
    n->last = rc;
    const char *text = n->errstr ? n->errstr(rc) : NULL;
    char why[160];
    snprintf(why, sizeof why, "%s", text ? text : "unknown error");
    int code = rc == NV_NOT_SUPPORTED || rc == NV_NO_PERMISSION || rc == NV_NOT_FOUND ? PT_EUNSUPP : PT_EIO;
    return pt_fail(code, "NVML %s: %s (NVML status %d)%s", call, why, rc,
                   rc == NV_NO_PERMISSION ? ": not permitted for this user" : "");
}

static int missing(const char *sym)
{
    return pt_fail(PT_EUNSUPP, "NVML: the library has no %s (a driver too old for it)", sym);
}

int pt_nvml_open(pt_nvml **out)
{
    *out = NULL;
    const char *path = getenv(PT_NVML_ENV);
    if (!path || !*path) path = PT_NVML_DEFAULT;
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        return pt_fail(PT_EUNSUPP, "NVML: cannot load %s (%s)", path, e ? e : "not found");
    }
    pt_nvml *n = calloc(1, sizeof *n);
    if (!n) {
        dlclose(lib);
        return pt_fail(PT_ENOMEM, "NVML: out of memory");
    }
    n->lib = lib;
    snprintf(n->path, sizeof n->path, "%s", path);
    LOOKUP(n, init, "nvmlInit_v2");
    LOOKUP(n, shutdown, "nvmlShutdown");
    LOOKUP(n, errstr, "nvmlErrorString");
    LOOKUP(n, count, "nvmlDeviceGetCount_v2");
    LOOKUP(n, by_index, "nvmlDeviceGetHandleByIndex_v2");
    LOOKUP(n, by_bus, "nvmlDeviceGetHandleByPciBusId_v2");
    LOOKUP(n, by_uuid, "nvmlDeviceGetHandleByUUID");
    LOOKUP(n, pci, "nvmlDeviceGetPciInfo_v3");
    LOOKUP(n, name, "nvmlDeviceGetName");
    LOOKUP(n, energy, "nvmlDeviceGetTotalEnergyConsumption");
    LOOKUP(n, mem_clocks, "nvmlDeviceGetSupportedMemoryClocks");
    LOOKUP(n, gfx_clocks, "nvmlDeviceGetSupportedGraphicsClocks");
    LOOKUP(n, clock_info, "nvmlDeviceGetClockInfo");
    LOOKUP(n, set_locked, "nvmlDeviceSetGpuLockedClocks");
    LOOKUP(n, reset_locked, "nvmlDeviceResetGpuLockedClocks");
    LOOKUP(n, set_app, "nvmlDeviceSetApplicationsClocks");
    LOOKUP(n, reset_app, "nvmlDeviceResetApplicationsClocks");
    LOOKUP(n, get_restr, "nvmlDeviceGetAPIRestriction");
    LOOKUP(n, set_restr, "nvmlDeviceSetAPIRestriction");
    if (!n->init || !n->shutdown) {
        dlclose(lib);
        free(n);
        return pt_fail(PT_EUNSUPP, "NVML: %s has no nvmlInit_v2/nvmlShutdown: not NVML", path);
    }
    int rc = n->init();
    if (rc != NV_SUCCESS) {
        nv_fail(n, rc, "nvmlInit_v2");
        dlclose(lib);
        free(n);
        return rc == NV_NO_PERMISSION ? PT_EUNSUPP : PT_EIO;
    }
    *out = n;
    return PT_OK;
}

void pt_nvml_close(pt_nvml *n)
{
    if (!n) return;
    if (n->shutdown) n->shutdown();
    if (n->lib) dlclose(n->lib);
    free(n);
}

int pt_nvml_count(pt_nvml *n, int *count)
{
    *count = 0;
    if (!n->count) return missing("nvmlDeviceGetCount_v2");
    unsigned c = 0;
    int rc = n->count(&c);
    if (rc != NV_SUCCESS) return nv_fail(n, rc, "nvmlDeviceGetCount_v2");
    *count = c > 4096 ? 4096 : (int)c;
    return PT_OK;
}

/* 1 when s is a PCI address [domain:]bus:device[.function] in hex. */
static int looks_like_busid(const char *s)
{
    int colons = 0;
    for (const char *p = s; *p; p++) {
        if (*p == ':') colons++;
        else if (*p != '.' && !isxdigit((unsigned char)*p)) return 0;
    }
    return colons >= 1 && colons <= 2;
}

int pt_nvml_device(pt_nvml *n, const char *which, pt_nvml_dev *dev, char *busid, size_t len)
{
    *dev = NULL;
    if (busid && len) busid[0] = '\0';
    if (!which || !*which)
        return pt_fail(PT_EINVAL, "NVML device '': name one by index (0), PCI bus id (0000:07:00.0) or UUID (GPU-...)");
    int rc;
    const char *call;
    if (strspn(which, "0123456789") == strlen(which)) {
        if (!n->by_index) return missing("nvmlDeviceGetHandleByIndex_v2");
        if (strlen(which) > 6) return pt_fail(PT_EINVAL, "NVML device index '%s' is out of range", which);
        rc = n->by_index((unsigned)atoi(which), dev);
        call = "nvmlDeviceGetHandleByIndex_v2";
    } else if (strncmp(which, "GPU-", 4) == 0 || strncmp(which, "MIG-", 4) == 0) {
        if (!n->by_uuid) return missing("nvmlDeviceGetHandleByUUID");
        rc = n->by_uuid(which, dev);
        call = "nvmlDeviceGetHandleByUUID";
    } else if (looks_like_busid(which)) {
        if (!n->by_bus) return missing("nvmlDeviceGetHandleByPciBusId_v2");
        rc = n->by_bus(which, dev);
        call = "nvmlDeviceGetHandleByPciBusId_v2";
    } else {
        return pt_fail(PT_EINVAL, "NVML device '%s' is not an index, a PCI bus id or a UUID (valid: 0, "
                       "0000:07:00.0, GPU-...)", which);
    }
    if (rc != NV_SUCCESS) {
        nv_fail(n, rc, call);
        return pt_fail(PT_EUNSUPP, "NVML: no device '%s': %s", which, pt_errmsg());
    }
    if (busid && len) {
        nv_pci_info pi;
        memset(&pi, 0, sizeof pi);
        if (n->pci && n->pci(*dev, &pi) == NV_SUCCESS) {
            pi.bus_id[sizeof pi.bus_id - 1] = '\0';
            /* NVML's "00000000:07:00.0" -> hwloc's "0000:07:00.0" */
            const char *b = pi.bus_id;
            if (strlen(b) == 16 && strncmp(b, "0000", 4) == 0) b += 4;
            snprintf(busid, len, "%s", b);
            for (char *c = busid; *c; c++) *c = (char)tolower((unsigned char)*c);
        } else {
            snprintf(busid, len, "%s", which);
        }
    }
    return PT_OK;
}

void pt_nvml_name(pt_nvml *n, pt_nvml_dev dev, char *name, size_t len)
{
    if (!len) return;
    name[0] = '\0';
    char buf[96] = "";
    if (n->name && n->name(dev, buf, sizeof buf) == NV_SUCCESS) {
        buf[sizeof buf - 1] = '\0';
        snprintf(name, len, "%s", buf);
    }
}

int pt_nvml_energy_mj(pt_nvml *n, pt_nvml_dev dev, unsigned long long *mj)
{
    if (!n->energy) return missing("nvmlDeviceGetTotalEnergyConsumption");
    int rc = n->energy(dev, mj);
    return rc == NV_SUCCESS ? PT_OK : nv_fail(n, rc, "nvmlDeviceGetTotalEnergyConsumption");
}

static int cmp_unsigned(const void *a, const void *b)
{
    unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
    return x < y ? -1 : x > y;
}

/* Sort ascending and drop duplicates; returns the new count. */
static int sort_unique(unsigned *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_unsigned);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (v[i] > 0 && (k == 0 || v[i] != v[k - 1])) v[k++] = v[i];
    return k;
}

int pt_nvml_clocks(pt_nvml *n, pt_nvml_dev dev, unsigned *mem_mhz, unsigned *gfx_mhz, int cap, int *count)
{
    *count = 0;
    *mem_mhz = 0;
    if (!n->mem_clocks) return missing("nvmlDeviceGetSupportedMemoryClocks");
    if (!n->gfx_clocks) return missing("nvmlDeviceGetSupportedGraphicsClocks");
    unsigned mem[64], nm = 64;
    int rc = n->mem_clocks(dev, &nm, mem);
    if (rc != NV_SUCCESS && rc != NV_INSUFFICIENT_SIZE) return nv_fail(n, rc, "nvmlDeviceGetSupportedMemoryClocks");
    if (nm > 64) nm = 64;
    unsigned top = 0;
    for (unsigned i = 0; i < nm; i++)
        if (mem[i] > top) top = mem[i];
    if (!top) return pt_fail(PT_EUNSUPP, "NVML: the device lists no memory clock");
    unsigned g[1024], ng = 1024;
    rc = n->gfx_clocks(dev, top, &ng, g);
    if (rc != NV_SUCCESS && rc != NV_INSUFFICIENT_SIZE) return nv_fail(n, rc, "nvmlDeviceGetSupportedGraphicsClocks");
    if (ng > 1024) ng = 1024;
    int k = sort_unique(g, (int)ng);
    if (!k) return pt_fail(PT_EUNSUPP, "NVML: the device lists no graphics clock at memory clock %u MHz", top);
    if (k > cap) { /* keep the top and an even spread below it */
        unsigned keep[1024];
        for (int i = 0; i < cap; i++) keep[i] = g[cap > 1 ? (long)i * (k - 1) / (cap - 1) : k - 1];
        k = sort_unique(keep, cap);
        memcpy(g, keep, sizeof(unsigned) * (size_t)k);
    }
    memcpy(gfx_mhz, g, sizeof(unsigned) * (size_t)k);
    *count = k;
    *mem_mhz = top;
    return PT_OK;
}

int pt_nvml_clock_now(pt_nvml *n, pt_nvml_dev dev, unsigned *mhz)
{
    if (!n->clock_info) return missing("nvmlDeviceGetClockInfo");
    int rc = n->clock_info(dev, NV_CLOCK_SM, mhz);
    return rc == NV_SUCCESS ? PT_OK : nv_fail(n, rc, "nvmlDeviceGetClockInfo");
}

int pt_nvml_set_clock(pt_nvml *n, pt_nvml_dev dev, unsigned mhz, unsigned mem_mhz, int *how)
{
    int rc = NV_NOT_SUPPORTED;
    if (*how != PT_NVML_APPLICATION) {
        if (!n->set_locked) {
            if (*how == PT_NVML_LOCKED) return missing("nvmlDeviceSetGpuLockedClocks");
        } else {
            rc = n->set_locked(dev, mhz, mhz);
            if (rc == NV_SUCCESS) {
                *how = PT_NVML_LOCKED;
                return PT_OK;
            }
            if (*how == PT_NVML_LOCKED || (rc != NV_NO_PERMISSION && rc != NV_NOT_SUPPORTED))
                return nv_fail(n, rc, "nvmlDeviceSetGpuLockedClocks");
        }
    }
    if (!n->set_app) return missing("nvmlDeviceSetApplicationsClocks");
    int rc2 = n->set_app(dev, mem_mhz, mhz);
    if (rc2 == NV_SUCCESS) {
        *how = PT_NVML_APPLICATION;
        return PT_OK;
    }
    if (*how == 0 && rc == NV_NO_PERMISSION && rc2 == NV_NO_PERMISSION) {
        n->last = NV_NO_PERMISSION;
        return pt_fail(PT_EUNSUPP, "NVML: neither locked clocks (root only) nor application clocks (restricted to "
                       "root; the SPANK plugin lifts that for a task's own GPU at energy level apply) may be "
                       "set by this user");
    }
    return nv_fail(n, rc2, "nvmlDeviceSetApplicationsClocks");
}

int pt_nvml_reset_clock(pt_nvml *n, pt_nvml_dev dev, int how)
{
    if (how == PT_NVML_LOCKED) {
        if (!n->reset_locked) return missing("nvmlDeviceResetGpuLockedClocks");
        int rc = n->reset_locked(dev);
        return rc == NV_SUCCESS ? PT_OK : nv_fail(n, rc, "nvmlDeviceResetGpuLockedClocks");
    }
    if (how == PT_NVML_APPLICATION) {
        if (!n->reset_app) return missing("nvmlDeviceResetApplicationsClocks");
        int rc = n->reset_app(dev);
        return rc == NV_SUCCESS ? PT_OK : nv_fail(n, rc, "nvmlDeviceResetApplicationsClocks");
    }
    return PT_OK;
}

int pt_nvml_get_restriction(pt_nvml *n, pt_nvml_dev dev, int *restricted)
{
    if (!n->get_restr) return missing("nvmlDeviceGetAPIRestriction");
    int state = NV_FEATURE_ENABLED;
    int rc = n->get_restr(dev, NV_API_APPLICATION_CLOCKS, &state);
    if (rc != NV_SUCCESS) return nv_fail(n, rc, "nvmlDeviceGetAPIRestriction");
    *restricted = state != NV_FEATURE_DISABLED;
    return PT_OK;
}

int pt_nvml_set_restriction(pt_nvml *n, pt_nvml_dev dev, int restricted)
{
    if (!n->set_restr) return missing("nvmlDeviceSetAPIRestriction");
    int rc = n->set_restr(dev, NV_API_APPLICATION_CLOCKS, restricted ? NV_FEATURE_ENABLED : NV_FEATURE_DISABLED);
    return rc == NV_SUCCESS ? PT_OK : nv_fail(n, rc, "nvmlDeviceSetAPIRestriction");
}
