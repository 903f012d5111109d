/* core/floor.h - the floor model of docs/benchmarks.md ("Floors") for convolution and pooling
 * layers: the one copy, used by vc_layer_floor_get (src/bench_op.c) and bench/bench_conv.c; its
 * bandwidth also prices the map stages of bench/bench_kmap.c.
 * The least time a layer can take is max(FLOPs / peak FLOP/s, bytes / peak bytes/s): FLOPs the
 * useful work (2 x pairs x C_in x C_out), bytes the fewest a layer must move (input and output
 * features, weights, the int32 out_in table, each once). */
#ifndef VC_CORE_FLOOR_H
#define VC_CORE_FLOOR_H

#include <stdint.h>
#include <string.h>

#include "voxconv.h"

/* The H100 rates of docs/benchmarks.md: what mma.sync m16n8k16 issued from registers peaks at
 * for fp16 and bf16, and HBM3 bandwidth as a device-to-device copy reaches it. */
#define VC_FLOOR_H100_FLOPS_16BIT 650e12
#define VC_FLOOR_H100_BYTES 3.0e12

/* The rates on record for a device name and dtype: 0 where there is none. */
static inline void vc_floor_rates(const char *device_name, vc_dtype dtype, int tf32,
                                  double *peak_flops, double *peak_bytes)
{
    *peak_flops = *peak_bytes = 0;
    if (!device_name || !strstr(device_name, "H100")) return;
    *peak_bytes = VC_FLOOR_H100_BYTES;
    if ((dtype == VC_DTYPE_FP16 || dtype == VC_DTYPE_BF16) && !tf32)
        *peak_flops = VC_FLOOR_H100_FLOPS_16BIT;
}

/* ms from the terms whose rate is given (a zero rate leaves its term out). */
static inline double vc_floor_ms(const vc_layer_floor *f)
{
    double t = 0;
    if (f->peak_flops > 0 && f->flops / f->peak_flops > t) t = f->flops / f->peak_flops;
    if (f->peak_bytes > 0 && f->bytes / f->peak_bytes > t) t = f->bytes / f->peak_bytes;
    return 1e3 * t;
}

/* The floor of a layer with n_in inputs, n_out outputs, `pairs` pairs, K offsets, C_in -> C_out
 * channels of elem_bytes each; pool: no weights, no arithmetic. ms is 0 where a rate the layer
 * needs is 0 (a conv needs both, a pool the bandwidth). */
static inline vc_layer_floor vc_floor_layer(int64_t n_in, int64_t n_out, int64_t pairs,
                                            int64_t K, int64_t c_in, int64_t c_out,
                                            double elem_bytes, int pool, double peak_flops,
                                            double peak_bytes)
{
    vc_layer_floor f;
    memset(&f, 0, sizeof f);
    const double w = pool ? 0.0 : (double)K * (double)c_in * (double)c_out;
    f.flops = pool ? 0.0 : 2.0 * (double)pairs * (double)c_in * (double)c_out;
    f.bytes = elem_bytes * ((double)n_in * (double)c_in + (double)n_out * (double)c_out + w) +
              4.0 * (double)n_out * (double)K;
    f.peak_flops = peak_flops;
    f.peak_bytes = peak_bytes;
    f.ms = (peak_bytes > 0 && (pool || peak_flops > 0)) ? vc_floor_ms(&f) : 0.0;
    return f;
}

#endif
