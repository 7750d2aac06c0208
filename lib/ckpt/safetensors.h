/* SPDX-License-Identifier: MIT */
/* Reading safetensors files (huggingface/safetensors, docs "Format"): an
 * 8-byte little-endian header length N, N bytes of a JSON object (padded
 * with spaces; it starts with '{') mapping each tensor's name to
 * {"dtype": D, "shape": [d0, ...], "data_offsets": [BEGIN, END]} -- offsets
 * into the data that follows the header -- and an optional "__metadata__"
 * object of strings; then the data, little-endian, row-major.
 *
 * Every size and offset is checked before anything is allocated from it or
 * read through it, as the reference implementation does (safetensors'
 * SafeTensors::validate): N at most 100,000,000 bytes and inside the file,
 * a known dtype, a shape of at most 8 dimensions whose element count and
 * byte size do not overflow (each dimension below 2^40, the bytes below
 * 2^62), END - BEGIN equal to those bytes, and the tensors' byte ranges,
 * in order of BEGIN, tiling the data from 0 to its end with no gap and no
 * overlap.  A hostile file gets one line naming what is wrong, never an
 * allocation of its claimed sizes.  Duplicate names are refused.
 *
 * Errors: PT_OK or a negative PT_E* code with a one-line message
 * (pt_errmsg()).
 */
#ifndef PTRAIN_CKPT_SAFETENSORS_H
#define PTRAIN_CKPT_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>

#define PT_ST_MAX_HEADER 100000000ULL /* safetensors' MAX_HEADER_SIZE */
#define PT_ST_MAX_DIMS 8

/* the byte-sized dtypes of the format (safetensors' Dtype; the sub-byte
 * F4 and F6 kinds of later versions are refused as unknown) */
typedef enum pt_st_dtype {
    PT_ST_BOOL, PT_ST_U8, PT_ST_I8, PT_ST_F8_E5M2, PT_ST_F8_E4M3, PT_ST_I16, PT_ST_U16, PT_ST_F16, PT_ST_BF16,
    PT_ST_I32, PT_ST_U32, PT_ST_F32, PT_ST_F64, PT_ST_I64, PT_ST_U64, PT_ST_NDTYPES
} pt_st_dtype;

typedef struct pt_st_tensor {
    char *name;
    int dtype;                        /* pt_st_dtype */
    int ndim;
    int64_t shape[PT_ST_MAX_DIMS];
    uint64_t numel;                   /* product of shape (1 for []) */
    uint64_t begin, end;              /* bytes, from the start of the data */
} pt_st_tensor;

typedef struct pt_safetensors {
    int fd;
    char *path;
    uint64_t size;                    /* the file's bytes */
    uint64_t data;                    /* where the data starts: 8 + N */
    int n;                            /* tensors (without __metadata__) */
    pt_st_tensor *t;                  /* [n], in the header's order */
} pt_safetensors;

/* Open `path` (a regular file) and read and check its header (above).
 * Keeps the file open for pt_st_read_f32.  On error *st is closed.
 * Errors: PT_EIO (cannot open or read), PT_EFORMAT (every check above,
 * naming the tensor and the numbers), PT_EUNSUPP (a big-endian host),
 * PT_ENOMEM. */
int pt_st_open(pt_safetensors *st, const char *path);

/* The tensor called name, or NULL. */
const pt_st_tensor *pt_st_find(const pt_safetensors *st, const char *name);

/* Read tensor t's numel elements as fp32 into dst [t->numel]: F32 as it
 * is, F16 (IEEE 754 binary16, subnormals, infinities and NaNs included)
 * and BF16 (the upper half of a binary32) widened exactly.  Reads in
 * blocks of 64 KiB.  Errors: PT_EUNSUPP (another dtype), PT_EIO (a short
 * read: the file changed). */
int pt_st_read_f32(const pt_safetensors *st, const pt_st_tensor *t, float *dst);

/* pt_st_read_f32 of elements [first, first + count) of t only.
 * PT_EINVAL for a range outside the tensor. */
int pt_st_read_f32_at(const pt_safetensors *st, const pt_st_tensor *t, uint64_t first, uint64_t count, float *dst);

/* "F32", "BF16", ... ("?" outside the enum). */
const char *pt_st_dtype_name(int dtype);

/* Close the file and free everything (a zeroed struct is fine). */
void pt_st_close(pt_safetensors *st);

#endif
