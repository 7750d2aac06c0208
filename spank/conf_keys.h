/* SPDX-License-Identifier: MIT */
/* Between the key table (conf_keys.c) and the readers of ptrain.conf and
 * the plugstack line (conf.c): how one key's value is set and how the
 * messages name keys and values.  Not part of spank_util.h's interface.
 * Errors as spank_util.h: -1 with one line in pt_errmsg(). */
#ifndef PTRAIN_SPANK_CONF_KEYS_H
#define PTRAIN_SPANK_CONF_KEYS_H
#include <stddef.h>

#include "spank/spank_util.h"

/* The keys of ptrain.conf (file 1) or of the plugstack line (file 0),
 * ", "-separated in table order, into out[len]; returns out. */
const char *pt_spank_key_list(int file, char *out, size_t len);

/* "a, b" -> "\"a\", \"b\"" into out[len] (ptrain.conf's messages quote
 * the values a string may take); returns out. */
const char *pt_spank_quote_list(const char *list, char *out, size_t len);

/* The field of c that key k sets (pt_spank_key.offset). */
void *pt_spank_key_field(pt_spank_conf *c, const pt_spank_key *k);

/* Key k's value v in plugstack syntax into *c (not CONFIG), named in
 * messages as the plugstack messages name it; no check of the whole
 * (pt_spank_conf_check). */
int pt_spank_key_set(const pt_spank_key *k, const char *v, pt_spank_conf *c);

/* "HOSTLIST=PATH" (the host list valid) as the next node_models entry of
 * c (at most PT_SPANK_NODE_MODELS); what names it in messages. */
int pt_spank_add_node_model(const char *what, const char *v, pt_spank_conf *c);

/* A non-empty path of at most sizeof c->topology - 1 bytes into c->topology
 * (not opened here). */
int pt_spank_set_topology(const char *what, const char *v, pt_spank_conf *c);

#endif
