/* pool/pool.h - pooling over a kernel map (max, average) and global pooling per batch item:
 * the CPU twins (pool_cpu.c) and their GPU versions (pool.cu, CUDA builds only), one semantics. */
#ifndef VC_POOL_POOL_H
#define VC_POOL_POOL_H

#include <stdint.h>

#include "core/status.h"
#include "kmap/kmap.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The argument checks the CPU and GPU pooling share (the map's header, mode, dtype, channels,
 * sizes; the buffers when n_out > 0). */
vc_status vc_pool_check_args(const vc_kmap_data *map, vc_pool_mode mode, const void *in,
                             vc_dtype dtype, int64_t channels, const void *out, vc_err *err);
/* Pooling over a map (max or mean of the present inputs), any float dtype in and out (same). */
vc_status vc_pool_cpu(const vc_kmap_data *map, vc_pool_mode mode, const void *in, vc_dtype dtype,
                      int64_t channels, void *out, int num_threads, vc_err *err);

/* The argument checks the CPU and GPU global pooling share (mode, dtype, sizes and their
 * overflow, the buffers), in that order. */
vc_status vc_global_pool_check_args(const int32_t *coords, int64_t n, int32_t batch_size,
                                    vc_pool_mode mode, const void *in, vc_dtype dtype,
                                    int64_t channels, const float *dst, vc_err *err);
/* Global pooling into dst [batch_size, channels] fp32. */
vc_status vc_global_pool_cpu(const int32_t *coords, int64_t n, int32_t batch_size,
                             vc_pool_mode mode, const void *in, vc_dtype dtype, int64_t channels,
                             float *dst, const vc_engine_options *opt, vc_err *err);

struct CUstream_st;

/* Pooling over a device map; out has the input's dtype and channels. The map's entries are
 * trusted (as built by vc_kmap_build_gpu); an entry outside [-1, n_in) is skipped, never read.
 * No host synchronisation. */
vc_status vc_pool_gpu(const vc_kmap_data *map, vc_pool_mode mode, const void *in, vc_dtype dtype,
                      int64_t channels, void *out, const vc_engine_options *opt,
                      struct CUstream_st *stream, vc_err *err);

/* Global pooling into dst [batch_size, channels] fp32 (device). Deterministic (no float
 * atomics). Synchronises once: the batch indices are checked on the device and the first bad
 * row is read back before anything is written, so a bad index gives VC_ERR_OUT_OF_RANGE and
 * leaves dst as it was, as on the CPU. */
vc_status vc_global_pool_gpu(const int32_t *coords, int64_t n, int32_t batch_size,
                             vc_pool_mode mode, const void *in, vc_dtype dtype, int64_t channels,
                             float *dst, const vc_engine_options *opt,
                             struct CUstream_st *stream, vc_err *err);

#ifdef __cplusplus
}
#endif

#endif
