/* libFuzzer target: the safetensors reader (lib/ckpt/safetensors.c): every
 * input is refused in one line or opens with tensors whose byte ranges lie
 * inside the file and tile its data; each F32/F16/BF16 tensor of at most
 * 2^16 elements is then read (widened to fp32). */
#include "fuzz_util.h"
#include "ckpt/safetensors.h"
#include "core/core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    pt_safetensors st;
    if (pt_st_open(&st, path) == PT_OK) {
        uint64_t bytes = 0;
        for (int i = 0; i < st.n; i++) {
            const pt_st_tensor *t = &st.t[i];
            if (t->begin > t->end || st.data + t->end > st.size) abort();
            bytes += t->end - t->begin;
            if ((t->dtype == PT_ST_F32 || t->dtype == PT_ST_F16 || t->dtype == PT_ST_BF16) && t->numel <= (1u << 16)) {
                float *buf = malloc(sizeof *buf * (t->numel ? t->numel : 1));
                if (!buf || pt_st_read_f32(&st, t, buf) != PT_OK) abort();
                free(buf);
            }
        }
        if (st.data + bytes != st.size) abort(); /* the ranges tile the data */
        pt_st_close(&st);
    } else if (!*pt_errmsg() || strchr(pt_errmsg(), '\n')) {
        abort(); /* every refusal is one non-empty line */
    }
    close(fd);
    return 0;
}
