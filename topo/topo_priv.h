/* SPDX-License-Identifier: MIT */
/* Internal to libptrain_topo: shared between the hwloc builder (topo.c) and
 * the JSON reader (topo_json.c).  Not installed. */
#ifndef PTRAIN_TOPO_PRIV_H
#define PTRAIN_TOPO_PRIV_H
#include "topo/topo.h"

/* Allocate the zeroed link-class and bandwidth matrices of t for its
 * ngpus, nnics and nnuma ([g*g], [g*n], [n*n], [m*m] entries, +1 so that
 * empty sets still get a valid pointer).  PT_ENOMEM on failure. */
int pt_topo_alloc_matrices_(pt_topo *t);

#endif
