/* conv/conv.h - the convolution arguments and the CPU twin of the convolution.
 * These work on plain host arrays; src/ checks handles and arguments before calling. */
#ifndef VC_CONV_CONV_H
#define VC_CONV_CONV_H

#include <stdint.h>

#include "core/status.h"
#include "kmap/kmap.h"

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
vc_status vc_conv_cpu(const vc_conv_args *a, const vc_engine_options *opt, vc_err *err);
/* The checks of a's channels, dtypes, activation, buffers and sizes that the CPU and GPU
 * convolutions share (a and a->map non-NULL, the map's header already checked). */
vc_status vc_conv_check_operands(const vc_conv_args *a, vc_err *err);

#ifdef __cplusplus
}
#endif

#endif
