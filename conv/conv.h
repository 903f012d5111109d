/* conv/conv.h - convolution, pooling, voxelization and elementwise ops: CPU twins.
 * These work on plain host arrays; src/ checks handles and arguments before calling. */
#ifndef VC_CONV_CONV_H
#define VC_CONV_CONV_H

#include <stdint.h>

#include "common.h"
#include "kmap.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vc_conv_args {
    const vc_kmap_data *map;
    const void *in;           /* [map->n_in, c_in]                                             */
    vc_dtype in_dtype;
    int64_t c_in;
    void *out;                /* [map->n_out, c_out]                                           */
    vc_dtype out_dtype;
    int64_t c_out;
    const void *weights;      /* [c_out, K, c_in]                                              */
    vc_dtype w_dtype;
    const float *bias;        /* [c_out] or NULL                                               */
    const void *residual;     /* [n_out, c_out] or NULL                                        */
    vc_dtype res_dtype;
    vc_activation act;
    float slope;
    int num_threads;          /* 0 = OpenMP default                                            */
    vc_kmap_data *map_cache;  /* GPU: map itself, writable, or NULL. Where the implicit GEMM
                                 would take a tile order (kmap.h) and the map has none, it
                                 builds one into it, kept for the later layers on the map        */
} vc_conv_args;

/* Gather-GEMM-scatter forward: for each offset k, gather the pair rows of the input (fp32),
 * multiply by W_k, add into an fp32 accumulator [n_out, c_out]; then the epilogue
 * act(acc + bias + residual) converted to out_dtype. Deterministic: every output element sums its
 * offsets in k order and its input channels in order, whatever the thread count. */
vc_status vc_conv_cpu(const vc_conv_args *a, vc_err *err);
/* The checks of a's channels, dtypes, activation, buffers and sizes that the CPU and GPU
 * convolutions share (a and a->map non-NULL, the map's header already checked). */
vc_status vc_conv_check_operands(const vc_conv_args *a, vc_err *err);

/* The argument checks the CPU and GPU pooling share (the map's header, mode, dtype, channels,
 * sizes; the buffers when n_out > 0). */
vc_status vc_pool_check_args(const vc_kmap_data *map, vc_pool_mode mode, const void *in,
                             vc_dtype dtype, int64_t channels, const void *out, vc_err *err);
/* Pooling over a map (max or mean of the present inputs), any float dtype in and out (same). */
vc_status vc_pool_cpu(const vc_kmap_data *map, vc_pool_mode mode, const void *in, vc_dtype dtype,
                      int64_t channels, void *out, int num_threads, vc_err *err);

/* Global pooling into dst [batch_size, channels] fp32. */
vc_status vc_global_pool_cpu(const int32_t *coords, int64_t n, int32_t batch_size,
                             vc_pool_mode mode, const void *in, vc_dtype dtype, int64_t channels,
                             float *dst, vc_err *err);

/* Voxelization result (host arrays, malloc'ed). */
typedef struct vc_voxels {
    int32_t *coords;          /* [n, 4]                                                        */
    void *features;           /* [n, channels] of desc->dtype                                  */
    int64_t n;
    int64_t channels;
    int32_t shape[3];         /* z, y, x                                                       */
    int32_t batch_size;
} vc_voxels;

/* Checks the descriptor and computes the grid shape (z, y, x). */
vc_status vc_voxelize_check(const vc_voxelize_desc *d, int32_t shape[3], vc_err *err);
/* The argument checks both voxelizers make, in their order (vc_voxelize_check, then the points:
 * memory `where`, dim, count, data, size): shape and dim*count on success. */
vc_status vc_voxelize_check_args(const vc_voxelize_desc *d, const vc_points *pts,
                                 const vc_voxels *out, vc_memory where, int32_t shape[3],
                                 int64_t *total_elems, vc_err *err);
vc_status vc_voxelize_cpu(const vc_voxelize_desc *d, const vc_points *pts, vc_voxels *out,
                          vc_voxelize_stats *stats, vc_err *err);
void vc_voxels_free(vc_voxels *v);

#ifdef __cplusplus
}
#endif

#endif
