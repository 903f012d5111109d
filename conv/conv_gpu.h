/* conv/conv_gpu.h - convolution and pooling on the GPU, with the semantics of the CPU twins in
 * conv/conv.h (the tests compare against them). Every pointer in the arguments, the map's arrays
 * included (a vc_kmap_data from vc_kmap_build_gpu), is a DEVICE pointer. Work is queued on
 * `stream`; no call synchronises the host except where its comment says so (gather-GEMM-scatter
 * reads the pair counts back; global pooling reads its batch-index check back). */
#ifndef VC_CONV_CONV_GPU_H
#define VC_CONV_CONV_GPU_H

#include "conv/conv.h"
#include "core/options.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;

/* Forward convolution. algo: VC_ALGO_IMPLICIT_GEMM (output-stationary, gather through out_in,
 * outputs in mask order, CTA mask skipping, fused epilogue, no atomics), VC_ALGO_GATHER_GEMM_SCATTER
 * (per-offset GEMMs into an fp32 accumulator, then the epilogue),
 * VC_ALGO_GATHER_GEMM_SCATTER_GROUPED (one GEMM over the pairs of every offset into fp32 partial
 * products in output-major order, then one reduction per output in offset order with the
 * epilogue; scratch of n_pairs x c_out floats), or VC_ALGO_AUTO (the planner
 * picks from the map and the channels). Deterministic for a given algo and device (the implicit
 * GEMM's tap split, on coarse layers, takes its group count from the device). a->num_threads is
 * ignored. fp32 features use exact fp32 arithmetic unless `tf32` is set. Weights in another
 * dtype than the features are converted to the features' dtype on the device.
 * Synchronisation: VC_ALGO_IMPLICIT_GEMM never waits for the device. VC_ALGO_GATHER_GEMM_SCATTER
 * reads the map's K+1 pair offsets back to size its per-offset launches: ONE stream
 * synchronisation per call (the only one); the grouped GGS sizes its launches from the host's
 * n_pairs and never waits; AUTO synchronises only when it picks the per-offset GGS.
 * opt (NULL: the defaults) chooses among the implicit GEMM's kernels (core/options.h:
 * gemm_config, tap_split, tile_order, force_order, cluster_split); a forced configuration
 * that does not fit the layer fails with VC_ERR_UNSUPPORTED. */
vc_status vc_conv_gpu(const vc_conv_args *a, vc_algo algo, int tf32,
                      const vc_engine_options *opt, struct CUstream_st *stream, vc_err *err);

/* The algorithm VC_ALGO_AUTO runs for this map, channels and feature dtype under options opt
 * (NULL: the defaults); never AUTO. */
vc_algo vc_conv_gpu_plan(const vc_kmap_data *map, int64_t c_in, int64_t c_out, vc_dtype dtype,
                         const vc_engine_options *opt);

/* The implicit GEMM's first tile configuration for the layer (a gemm/gemm.h name, or "gemm
 * default" where gemm/ picks, as for fp32) and its tap split (tap_splits: 0 none, N > 0 forced
 * groups, -N up to N as the device allows). Launches nothing. */
void vc_conv_gpu_describe(const vc_kmap_data *map, int64_t c_in, int64_t c_out, vc_dtype dtype,
                          const vc_engine_options *opt, const char **config,
                          int32_t *tap_split);

#ifdef __cplusplus
}
#endif

#endif
