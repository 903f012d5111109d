/* src/io/safetensors.h - the safetensors reader: an 8-byte little-endian header length, a JSON
 * header (an object of tensors {"dtype", "shape", "data_offsets"} plus an optional
 * "__metadata__", ignored), then the raw little-endian data. Every check is made before a
 * tensor is handed out: the header length fits the file; the header is a JSON object; each
 * entry has one of the format's dtypes (only F32, F16 and BF16 are readable), a shape of at
 * most 8 non-negative dimensions, and data_offsets [begin, end] with end - begin = the bytes the
 * shape and dtype need; the entries, sorted by begin, tile the data section exactly (no gap, no
 * overlap, nothing past its end), as the format requires. Internal to the library (src/net/ and
 * the fuzz target use it). */
#ifndef VC_SRC_IO_SAFETENSORS_H
#define VC_SRC_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "src/io/io.h"

#define VC_ST_MAX_DIMS 8
/* Longest JSON header accepted, as the reference implementation does (VC_ERR_LIMIT). */
#define VC_ST_MAX_HEADER ((uint64_t)100 << 20)

typedef struct vc_st_tensor {
    char *name;               /* owned, NUL-terminated                                         */
    vc_dtype dtype;           /* FP32, FP16 or BF16; (vc_dtype)-1 for the format's other
                                 dtypes (I64, U8, F64...), whose data is laid out and checked
                                 but not readable here (a state_dict's num_batches_tracked is
                                 I64): a user refuses them naming dtype_name                   */
    char dtype_name[8];       /* as the header spells it                                       */
    int32_t esize;            /* bytes per element                                             */
    int32_t ndim;
    int64_t shape[VC_ST_MAX_DIMS];
    int64_t count;            /* elements (product of the shape; 1 for a scalar)               */
    const uint8_t *data;      /* little-endian elements inside the file's bytes (unaligned)    */
    int used;                 /* for the caller: set when a tensor is consumed                 */
} vc_st_tensor;

typedef struct vc_safetensors {
    uint8_t *owned;           /* the file's bytes when read from a path, else NULL             */
    vc_st_tensor *tensors;    /* in header order                                               */
    int64_t count;
} vc_safetensors;

/* Parses `n` bytes at `p` (borrowed: they must outlive *out). On failure *out is zeroed and
 * nothing is left allocated; the message (on src->ctx) names the file and the tensor. */
vc_status vc_st_parse(const vc_io_src *src, const uint8_t *p, size_t n, vc_safetensors *out);
/* Reads a whole file and parses it; *out owns the bytes. */
vc_status vc_st_read(const vc_io_src *src, const char *path, vc_safetensors *out);
/* Frees what parse / read made; a zeroed struct is fine. */
void vc_st_free(vc_safetensors *st);
/* The tensor of that name, or NULL. */
vc_st_tensor *vc_st_find(const vc_safetensors *st, const char *name);
/* The name of a dtype in safetensors' spelling ("F32", ...). */
const char *vc_st_dtype_name(vc_dtype dtype);
/* Element i of a tensor of a readable dtype, converted to fp32. */
float vc_st_load(const vc_st_tensor *t, int64_t i);

#endif
