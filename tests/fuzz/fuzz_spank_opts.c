/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the SPANK plugin's parsers that need no Slurm: option
 * values (--ptrain-mode, --ptrain-tp...), Slurm's tasks-per-node and host
 * list formats, plugstack arguments.  The first byte picks the parser. */
#include "fuzz_util.h"
#include "spank/spank_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    char *text = fuzz_cstr(data + 1, size - 1);
    pt_spank_conf c;
    pt_spank_conf_default(&c);
    int rc = 0;
    pt_error_clear(); /* a refusal must leave a message of its own */
    switch (data[0] % 5) {
    case 0: {
        pt_mode m;
        rc = pt_spank_parse_mode_opt(&c, "--ptrain-mode", text, &m);
        break;
    }
    case 1: {
        int v = 0;
        rc = pt_spank_parse_size_opt(&c, "--ptrain-tp", text, data[0] & 8, &v);
        if (rc == 0 && (v < 1 || v > (1 << 20))) abort();
        break;
    }
    case 2: {
        int out[64], n = 0;
        rc = pt_spank_parse_tasks_per_node(text, out, 64, &n);
        if (rc == 0)
            for (int i = 0; i < n; i++)
                if (out[i] < 1) abort();
        break;
    }
    case 3: {
        char host[32];
        rc = pt_spank_first_host(text, host, sizeof host);
        if (rc == 0 && strlen(host) >= sizeof host) abort();
        break;
    }
    case 4:
        if (strncmp(text, "config=", 7) == 0) break; /* file loading: fuzz_spank_conf */
        rc = pt_spank_conf_arg(text, &c);
        if (rc == 0 && pt_spank_conf_check(&c) != 0) abort();
        if (rc == 0) {
            int port = pt_spank_master_port(0xffffffffu, 0xfffffffeu, c.master_port_base,
                                            c.master_port_count);
            if (port < 1024 || port > 65535) abort();
        }
        break;
    }
    if (rc != 0 && (!pt_errmsg()[0] || strchr(pt_errmsg(), '\n'))) abort();
    free(text);
    return 0;
}
