/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the administrator's ptrain.conf loader (libconfig) and
 * its validator: an accepted configuration must pass pt_spank_conf_check
 * and give ports inside 1024..65535. */
#include "fuzz_util.h"
#include "spank/spank_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    pt_spank_conf c;
    pt_spank_conf_default(&c);
    pt_error_clear(); /* a refusal must leave a message of its own */
    if (pt_spank_conf_load(path, &c) == 0) {
        if (pt_spank_conf_check(&c) != 0) abort();
        for (uint32_t j = 0; j < 4; j++) {
            int port = pt_spank_master_port(j * 0x7fffffffu, j, c.master_port_base, c.master_port_count);
            if (port < 1024 || port > 65535) abort();
        }
    } else if (!pt_errmsg()[0] || strchr(pt_errmsg(), '\n')) {
        abort();
    }
    close(fd);
    return 0;
}
