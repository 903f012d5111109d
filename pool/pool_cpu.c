/* pool/pool_cpu.c - CPU pooling: max / mean over a kernel map's out_in table, and global
 * max / mean per batch item. Inputs are read as fp32; means accumulate in k order (map pooling,
 * fp32) or row order (global pooling, double), so results do not depend on the thread count. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "pool/pool.h"
#include "core/dtype.h"
#include "core/alloc.h"

vc_status vc_pool_check_args(const vc_kmap_data *map, vc_pool_mode mode, const void *in,
                             vc_dtype dtype, int64_t channels, const void *out, vc_err *err)
{
    if (!map)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "pool: kernel map is NULL");
    if (mode != VC_POOL_MAX && mode != VC_POOL_AVG)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "pool: unknown mode %d", (int)mode);
    if (!vc_is_float_dtype(dtype))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "pool: dtype must be fp32, fp16 or bf16");
    if (channels < 1 || channels > VC_MAX_CHANNELS)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "pool: channels %lld not in 1..%lld",
                       (long long)channels, (long long)VC_MAX_CHANNELS);
    const int64_t n_in = map->n_in, n_out = map->n_out;
    const int64_t K = map->volume;
    int64_t t;
    if (K < 1 || n_in < 0 || n_out < 0)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "pool: bad kernel map (volume %lld, n_in %lld, n_out %lld)",
                       (long long)K, (long long)n_in, (long long)n_out);
    if (vc_mul_overflow_i64(n_out, K, &t) || vc_mul_overflow_i64(n_out, channels, &t) ||
        vc_mul_overflow_i64(n_in, channels, &t))
        return vc_fail(err, VC_ERR_LIMIT, "pool: sizes overflow (n_in %lld, n_out %lld, volume "
                       "%lld, channels %lld)", (long long)n_in, (long long)n_out, (long long)K,
                       (long long)channels);
    if (n_out > 0 && (!map->out_in || !out || (n_in > 0 && !in)))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "pool: NULL map table, input or output");
    return VC_OK;
}

vc_status vc_pool_cpu(const vc_kmap_data *map, vc_pool_mode mode, const void *in, vc_dtype dtype,
                      int64_t channels, void *out, int num_threads, vc_err *err)
{
    vc_status st = vc_pool_check_args(map, mode, in, dtype, channels, out, err);
    if (st != VC_OK) return st;
    const int64_t n_in = map->n_in, n_out = map->n_out;
    const int64_t K = map->volume;
    if (n_out == 0) return VC_OK;
    /* Check every table entry before writing anything. */
    const int32_t *oi = map->out_in;
    for (int64_t i = 0; i < n_out * K; i++)
        if (oi[i] < -1 || oi[i] >= n_in)
            return vc_fail(err, VC_ERR_INTERNAL,
                           "pool: map entry [%lld, %lld] = %d is out of range (n_in %lld)",
                           (long long)(i / K), (long long)(i % K), (int)oi[i], (long long)n_in);

#ifdef _OPENMP
    int nt = num_threads > 0 ? num_threads : omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(nt)
#endif
    for (int64_t p = 0; p < n_out; p++) {
        const int32_t *row = oi + p * K;
        for (int64_t c = 0; c < channels; c++) {
            float v = 0.0f;
            int64_t count = 0;
            for (int64_t k = 0; k < K; k++) {
                if (row[k] < 0) continue;
                float x = vc_load_f32(in, dtype, (int64_t)row[k] * channels + c);
                if (mode == VC_POOL_AVG) {
                    v += x;
                } else if (count == 0 || (!isnan(v) && (x > v || isnan(x)))) {
                    v = x; /* a NaN, once seen, stays */
                }
                count++;
            }
            if (mode == VC_POOL_AVG && count > 0) v /= (float)count;
            vc_store_f32(out, dtype, p * channels + c, v);
        }
    }
    return VC_OK;
}

vc_status vc_global_pool_check_args(const int32_t *coords, int64_t n, int32_t batch_size,
                                    vc_pool_mode mode, const void *in, vc_dtype dtype,
                                    int64_t channels, const float *dst, vc_err *err)
{
    if (mode != VC_POOL_MAX && mode != VC_POOL_AVG)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "global pool: unknown mode %d", (int)mode);
    if (!vc_is_float_dtype(dtype))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "global pool: dtype must be fp32, fp16 or bf16");
    if (channels < 1 || channels > VC_MAX_CHANNELS || batch_size < 1 || n < 0)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "global pool: bad sizes (rows %lld, batch %d, channels %lld)",
                       (long long)n, (int)batch_size, (long long)channels);
    int64_t t;
    if (vc_mul_overflow_i64(n, channels, &t) || vc_mul_overflow_i64(batch_size, channels, &t))
        return vc_fail(err, VC_ERR_LIMIT, "global pool: sizes overflow");
    if (!dst || (n > 0 && (!coords || !in)))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "global pool: NULL coordinates, input or output");
    return VC_OK;
}

vc_status vc_global_pool_cpu(const int32_t *coords, int64_t n, int32_t batch_size,
                             vc_pool_mode mode, const void *in, vc_dtype dtype, int64_t channels,
                             float *dst, const vc_engine_options *opt, vc_err *err)
{
    vc_status st = vc_global_pool_check_args(coords, n, batch_size, mode, in, dtype, channels,
                                             dst, err);
    if (st != VC_OK) return st;
    for (int64_t i = 0; i < n; i++)
        if (coords[i * 4] < 0 || coords[i * 4] >= batch_size)
            return vc_fail(err, VC_ERR_OUT_OF_RANGE,
                           "global pool: row %lld has batch index %d outside [0, %d)",
                           (long long)i, (int)coords[i * 4], (int)batch_size);

    const int64_t nb = (int64_t)batch_size * channels;
    const vc_allocator *al = vc_opt_allocator(opt);
    double *sum = (double *)vc_host_alloc_n(al, (size_t)nb, sizeof(double));
    int64_t *cnt = (int64_t *)vc_host_calloc(al, (size_t)batch_size, sizeof(int64_t));
    if (!sum || !cnt) {
        vc_host_free(al, sum);
        vc_host_free(al, cnt);
        return vc_fail(err, VC_ERR_OUT_OF_MEMORY, "global pool: cannot allocate %lld sums",
                       (long long)nb);
    }
    for (int64_t i = 0; i < nb; i++) sum[i] = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const int64_t b = coords[i * 4];
        double *s = sum + b * channels;
        const int first = cnt[b] == 0;
        for (int64_t c = 0; c < channels; c++) {
            double x = vc_load_f32(in, dtype, i * channels + c);
            if (mode == VC_POOL_AVG) {
                s[c] += x;
            } else if (first || (!isnan(s[c]) && (x > s[c] || isnan(x)))) {
                s[c] = x;
            }
        }
        cnt[b]++;
    }
    for (int64_t b = 0; b < batch_size; b++)
        for (int64_t c = 0; c < channels; c++) {
            double v = sum[b * channels + c];
            if (cnt[b] == 0) v = 0.0;
            else if (mode == VC_POOL_AVG) v /= (double)cnt[b];
            dst[b * channels + c] = (float)v;
        }
    vc_host_free(al, sum);
    vc_host_free(al, cnt);
    return VC_OK;
}
