/* SPDX-License-Identifier: MIT */
/* Test helper for tests/mpi/test_ckpt_tool.sh, written from llm.c's and
 * safetensors' own descriptions, independently of bin/ckpt/:
 *
 *   llmc_tool write FILE L NH C T V Vp SEED
 *       an llm.c gpt2 model file as train_gpt2.py's write_model lays it out
 *       (int32 header[256]: 20240326, 3, maxT, V, L, NH, C, Vp; then fp32
 *       wte [Vp, C] (padding rows zero, as pad_vocab), wpe [maxT, C], ln1w
 *       [L, C], ln1b, qkvw [L, 3C, C], qkvb [L, 3C], attprojw [L, C, C],
 *       attprojb, ln2w, ln2b, fcw [L, 4C, C], fcb [L, 4C], fcprojw [L, C,
 *       4C], fcprojb, lnfw [C], lnfb [C]) with uniform random values in
 *       [-1, 1) from SEED (never zeros);
 *   llmc_tool check-st FILE.bin FILE.safetensors
 *       every tensor of the llm.c file against the safetensors tensor of its
 *       Hugging Face GPT-2 name (Conv1D weights transposed, wte without the
 *       padding rows), bit for bit; prints "ok N tensors" or the first
 *       mismatch, exit 0/1;
 *   llmc_tool close A.bin B.bin TOL
 *       same header, and every float after it within TOL (absolute);
 *       prints the largest difference, exit 0/1;
 *   llmc_tool write-bf16 FILE L NH C T V Vp SEED
 *       the same model as a bf16 file (llm.c's version 5: the header with
 *       version 5, then every element as the upper 16 bits of the float
 *       rounded to nearest even), from the same random values;
 *   llmc_tool check-widen BF16.bin F32.bin
 *       a version 5 and a version 3 file of the same model: headers equal
 *       but for the version, every float the bf16 value widened (its bits
 *       shifted up 16), bit for bit; prints "ok N elements", exit 0/1;
 *   llmc_tool check-round F32.bin BF16.bin
 *       the other way: every bf16 element the float rounded to nearest even
 *       (NaN never occurs in these files), bit for bit.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 88172645463325252ull;
static float urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) / 16777216.0 * 2.0 - 1.0);
}

static char *slurp(const char *p, size_t *n)
{
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) { free(b); b = NULL; }
    fclose(f);
    *n = (size_t)len;
    return b;
}

/* the 16 tensors of llm.c: name, rows and cols per layer (or whole) */
static void sizes(int k, long L, long C, long T, long Vp, long *per, long *count)
{
    const long s[16] = {Vp * C, T * C, C, C, 3 * C * C, 3 * C, C * C, C, C, C, 4 * C * C, 4 * C, 4 * C * C, C, C, C};
    *per = s[k];
    *count = (k >= 2 && k < 14) ? L : 1;
}

/* fp32 -> bf16, round to nearest even, written from IEEE 754's rule
 * (not from lib/backend): add 0x7fff plus the lowest kept bit, keep the
 * upper half */
static uint16_t round_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* the two files' headers (1 KiB), element counts; 0 when they pair */
static int pair(const char *a, size_t na, const char *b, size_t nb, int va, int vb, size_t *n)
{
    if (!a || !b || na < 1024 || nb < 1024) { printf("cannot read the files\n"); return 1; }
    int32_t ha[256], hb[256];
    memcpy(ha, a, sizeof ha);
    memcpy(hb, b, sizeof hb);
    if (ha[1] != va || hb[1] != vb) { printf("versions %d, %d (expected %d, %d)\n", ha[1], hb[1], va, vb); return 1; }
    hb[1] = va;
    if (memcmp(ha, hb, sizeof ha)) { printf("headers differ beyond the version\n"); return 1; }
    const size_t ea = va == 5 ? 2 : 4, eb = vb == 5 ? 2 : 4;
    *n = (na - 1024) / ea;
    if ((na - 1024) % ea || (nb - 1024) != *n * eb) { printf("sizes %zu, %zu do not pair\n", na, nb); return 1; }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 10 && (!strcmp(argv[1], "write") || !strcmp(argv[1], "write-bf16"))) {
        const int bf16 = !strcmp(argv[1], "write-bf16");
        long L = atol(argv[3]), NH = atol(argv[4]), C = atol(argv[5]), T = atol(argv[6]), V = atol(argv[7]),
             Vp = atol(argv[8]);
        rng ^= (uint64_t)atoll(argv[9]) * 0x9e3779b97f4a7c15ull;
        int32_t h[256] = {20240326, bf16 ? 5 : 3, (int32_t)T, (int32_t)V, (int32_t)L, (int32_t)NH, (int32_t)C,
                          (int32_t)Vp};
        FILE *f = fopen(argv[2], "wb");
        if (!f) return 2;
        fwrite(h, sizeof h, 1, f);
        for (int k = 0; k < 16; k++) {
            long per, cnt;
            sizes(k, L, C, T, Vp, &per, &cnt);
            for (long i = 0; i < per * cnt; i++) {
                float x = (k == 0 && i >= V * C) ? 0.0f : urand();
                uint16_t y = round_bf16(x);
                if (bf16) fwrite(&y, 2, 1, f);
                else fwrite(&x, 4, 1, f);
            }
        }
        return fclose(f) ? 2 : 0;
    }
    if (argc == 4 && (!strcmp(argv[1], "check-widen") || !strcmp(argv[1], "check-round"))) {
        const int widen = !strcmp(argv[1], "check-widen");
        size_t na, nb, n;
        char *a = slurp(argv[2], &na), *b = slurp(argv[3], &nb);
        if (pair(a, na, b, nb, widen ? 5 : 3, widen ? 3 : 5, &n)) return 1;
        const char *f32 = widen ? b : a, *b16 = widen ? a : b;
        for (size_t i = 0; i < n; i++) {
            float x;
            uint16_t y;
            memcpy(&x, f32 + 1024 + 4 * i, 4);
            memcpy(&y, b16 + 1024 + 2 * i, 2);
            uint32_t u;
            memcpy(&u, &x, 4);
            if (widen ? u != (uint32_t)y << 16 : round_bf16(x) != y) {
                printf("element %zu: fp32 %08x, bf16 %04x\n", i, (unsigned)u, (unsigned)y);
                return 1;
            }
        }
        printf("ok %zu elements\n", n);
        free(a);
        free(b);
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "check-st")) {
        size_t nb, ns;
        char *b = slurp(argv[2], &nb), *s = slurp(argv[3], &ns);
        if (!b || !s || nb < 1024 || ns < 8) { printf("cannot read the files\n"); return 1; }
        int32_t h[256];
        memcpy(h, b, sizeof h);
        const long T = h[2], V = h[3], L = h[4], C = h[6], Vp = h[7];
        uint64_t hl = 0;
        for (int i = 0; i < 8; i++) hl |= (uint64_t)(unsigned char)s[i] << (8 * i);
        if (8 + hl > ns) { printf("header length %llu beyond the file\n", (unsigned long long)hl); return 1; }
        json_error_t je;
        json_t *hd = json_loadb(s + 8, (size_t)hl, 0, &je);
        if (!hd) { printf("header is not JSON: %s\n", je.text); return 1; }
        const char *data = s + 8 + hl;
        static const char *const hf[12] = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                                           "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                           "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
        /* [out, in] of llm.c's per-layer weights: rows (out) and cols (in) */
        const long wrows[12] = {0, 0, 3 * C, 0, C, 0, 0, 0, 4 * C, 0, C, 0};
        const long wcols[12] = {0, 0, C, 0, C, 0, 0, 0, C, 0, 4 * C, 0};
        const float *src = (const float *)(b + 1024);
        int n = 0;
        for (int k = 0; k < 16; k++) {
            long per, cnt;
            sizes(k, L, C, T, Vp, &per, &cnt);
            for (long l = 0; l < cnt; l++, src += per) {
                char name[64];
                if (k == 0) snprintf(name, sizeof name, "wte.weight");
                else if (k == 1) snprintf(name, sizeof name, "wpe.weight");
                else if (k < 14) snprintf(name, sizeof name, "h.%ld.%s", l, hf[k - 2]);
                else snprintf(name, sizeof name, "ln_f.%s", k == 14 ? "weight" : "bias");
                json_t *e = json_object_get(hd, name);
                if (!e) { printf("no tensor %s in the safetensors header\n", name); return 1; }
                const long b0 = (long)json_integer_value(json_array_get(json_object_get(e, "data_offsets"), 0));
                const long b1 = (long)json_integer_value(json_array_get(json_object_get(e, "data_offsets"), 1));
                const long want = k == 0 ? V * C : per;
                if (strcmp(json_string_value(json_object_get(e, "dtype")), "F32") || b1 - b0 != 4 * want ||
                    8 + (long)hl + b1 > (long)ns) {
                    printf("%s: dtype or offsets [%ld, %ld) wrong for %ld floats\n", name, b0, b1, want);
                    return 1;
                }
                const float *dst = (const float *)(data + b0);
                const int j = k - 2;
                const int tr = k >= 2 && k < 14 && wrows[j] > 0;
                for (long i = 0; i < want; i++) {
                    /* safetensors element i of a Conv1D weight [in, out] is (in = i / out, out = i % out) */
                    const float x = tr ? src[(i % wrows[j]) * wcols[j] + i / wrows[j]] : src[i];
                    if (memcmp(&x, &dst[i], 4)) {
                        printf("%s: element %ld is %.9g, the llm.c file has %.9g\n", name, i, dst[i], x);
                        return 1;
                    }
                }
                n++;
            }
        }
        printf("ok %d tensors\n", n);
        json_decref(hd);
        free(b);
        free(s);
        return 0;
    }
    if (argc == 5 && !strcmp(argv[1], "close")) {
        size_t na, nb;
        char *a = slurp(argv[2], &na), *b = slurp(argv[3], &nb);
        if (!a || !b || na != nb || na < 1024 || memcmp(a, b, 1024)) { printf("different sizes or headers\n"); return 1; }
        const double tol = atof(argv[4]);
        double worst = 0;
        long at = 0;
        for (size_t i = 0; i < (na - 1024) / 4; i++) {
            float x, y;
            memcpy(&x, a + 1024 + 4 * i, 4);
            memcpy(&y, b + 1024 + 4 * i, 4);
            double d = x > y ? (double)x - y : (double)y - x;
            if (!(d <= worst)) { worst = d; at = (long)i; }
        }
        printf("max |a - b| = %.3g at float %ld\n", worst, at);
        free(a);
        free(b);
        return worst <= tol ? 0 : 1;
    }
    fprintf(stderr, "usage: llmc_tool write FILE L NH C T V Vp SEED | write-bf16 FILE L NH C T V Vp SEED | check-st FILE.bin FILE.safetensors | close A B TOL | check-widen BF16.bin F32.bin | check-round F32.bin BF16.bin\n");
    return 2;
}
