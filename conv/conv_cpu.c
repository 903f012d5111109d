/* conv/conv_cpu.c - CPU sparse convolution: gather-GEMM-scatter over the per-offset pair lists
 * of a kernel map, fp32 accumulation, fused epilogue (bias, residual, activation, out dtype).
 * Deterministic for any thread count: within one offset every output row occurs at most once,
 * so threads split the pairs of an offset and never touch the same accumulator row; offsets
 * run in order with a barrier between them. */
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "conv/conv.h"
#include "core/dtype.h"
#include "core/alloc.h"

#define VC_CONV_BLOCK 64 /* pairs gathered and multiplied per block */

static vc_status check_map(const vc_kmap_data *m, vc_err *err)
{
    if (m->volume < 1 || m->n_in < 0 || m->n_out < 0 || m->n_pairs < 0)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "conv: bad kernel map (volume %d, n_in %lld, n_out %lld, pairs %lld)",
                       (int)m->volume, (long long)m->n_in, (long long)m->n_out,
                       (long long)m->n_pairs);
    if (!m->offsets)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "conv: kernel map has no pair offsets");
    if (m->n_pairs > 0 && (!m->in_rows || !m->out_rows))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "conv: kernel map has no pair lists");
    if (m->offsets[0] != 0 || m->offsets[m->volume] != m->n_pairs)
        return vc_fail(err, VC_ERR_INTERNAL, "conv: kernel map pair offsets are inconsistent");
    for (int32_t k = 0; k < m->volume; k++)
        if (m->offsets[k + 1] < m->offsets[k])
            return vc_fail(err, VC_ERR_INTERNAL, "conv: kernel map offsets decrease at %d",
                           (int)k);
    for (int64_t i = 0; i < m->n_pairs; i++) {
        if (m->in_rows[i] < 0 || m->in_rows[i] >= m->n_in || m->out_rows[i] < 0 ||
            m->out_rows[i] >= m->n_out)
            return vc_fail(err, VC_ERR_INTERNAL,
                           "conv: kernel map pair %lld (in %d, out %d) is out of range",
                           (long long)i, (int)m->in_rows[i], (int)m->out_rows[i]);
    }
    return VC_OK;
}

vc_status vc_conv_check_operands(const vc_conv_args *a, vc_err *err)
{
    const vc_kmap_data *m = a->map;
    if (a->c_in < 1 || a->c_in > VC_MAX_CHANNELS || a->c_out < 1 || a->c_out > VC_MAX_CHANNELS)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "conv: channels must be in 1..%lld (c_in %lld, c_out %lld)",
                       (long long)VC_MAX_CHANNELS, (long long)a->c_in, (long long)a->c_out);
    if (!vc_is_float_dtype(a->in_dtype) || !vc_is_float_dtype(a->out_dtype) ||
        !vc_is_float_dtype(a->w_dtype) || (a->residual && !vc_is_float_dtype(a->res_dtype)))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT,
                       "conv: input, output, weight and residual dtypes must be fp32/fp16/bf16");
    if (a->act != VC_ACT_NONE && a->act != VC_ACT_RELU && a->act != VC_ACT_LEAKY_RELU)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "conv: unknown activation %d", (int)a->act);
    if (!a->weights)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "conv: weights are NULL");
    if (m->n_in > 0 && !a->in)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "conv: input features are NULL");
    if (m->n_out > 0 && !a->out)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "conv: output buffer is NULL");
    int64_t t;
    if (vc_mul_overflow_i64(m->n_out, a->c_out, &t) || t > INT64_MAX / 8 ||
        vc_mul_overflow_i64(m->n_in, a->c_in, &t) ||
        vc_mul_overflow_i64(a->c_in, a->c_out, &t) || vc_mul_overflow_i64(t, m->volume, &t) ||
        t > INT64_MAX / 8)
        return vc_fail(err, VC_ERR_LIMIT, "conv: sizes overflow (n_out %lld x c_out %lld, "
                       "K %d x c_in %lld x c_out %lld)", (long long)m->n_out,
                       (long long)a->c_out, (int)m->volume, (long long)a->c_in,
                       (long long)a->c_out);
    return VC_OK;
}

static vc_status check_args(const vc_conv_args *a, vc_err *err)
{
    if (!a || !a->map)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "conv: NULL arguments or kernel map");
    const vc_kmap_data *m = a->map;
    vc_status st = check_map(m, err);
    if (st != VC_OK) return st;
    return vc_conv_check_operands(a, err);
}

/* Allocates n floats through a, n > 0 (at least one element so NULL always means failure). */
static float *alloc_f32(const vc_allocator *a, int64_t n)
{
    if (n < 1) n = 1;
    if ((uint64_t)n > (uint64_t)SIZE_MAX / sizeof(float)) return NULL;
    return (float *)vc_host_alloc(a, (size_t)n * sizeof(float));
}

/* One block of up to VC_CONV_BLOCK pairs of offset k: gather, multiply, scatter-add. */
static void conv_block(const vc_conv_args *a, const float *wt_k, const int32_t *in_rows,
                       const int32_t *out_rows, int64_t count, float *gather, float *prod,
                       float *acc)
{
    const int64_t c_in = a->c_in, c_out = a->c_out;
    for (int64_t r = 0; r < count; r++) {
        const int64_t base = (int64_t)in_rows[r] * c_in;
        float *g = gather + r * c_in;
        if (a->in_dtype == VC_DTYPE_FP32) {
            memcpy(g, (const float *)a->in + base, (size_t)c_in * sizeof(float));
        } else {
            for (int64_t ci = 0; ci < c_in; ci++)
                g[ci] = vc_load_f32(a->in, a->in_dtype, base + ci);
        }
    }
    for (int64_t r = 0; r < count; r++) {
        const float *g = gather + r * c_in;
        float *restrict y = prod + r * c_out;
        for (int64_t co = 0; co < c_out; co++) y[co] = 0.0f;
        for (int64_t ci = 0; ci < c_in; ci++) {
            const float x = g[ci];
            const float *restrict w = wt_k + ci * c_out;
            for (int64_t co = 0; co < c_out; co++) y[co] += x * w[co];
        }
        float *restrict dst = acc + (int64_t)out_rows[r] * c_out;
        for (int64_t co = 0; co < c_out; co++) dst[co] += y[co];
    }
}

static inline float activate(float v, vc_activation act, float slope)
{
    if (act == VC_ACT_RELU) return v < 0.0f ? 0.0f : v;
    if (act == VC_ACT_LEAKY_RELU) return v < 0.0f ? v * slope : v;
    return v;
}

vc_status vc_conv_cpu(const vc_conv_args *a, const vc_engine_options *opt, vc_err *err)
{
    const vc_allocator *al = vc_opt_allocator(opt);
    vc_status st = check_args(a, err);
    if (st != VC_OK) return st;
    const vc_kmap_data *m = a->map;
    const int64_t c_in = a->c_in, c_out = a->c_out, n_out = m->n_out;
    const int32_t K = m->volume;
    if (n_out == 0) return VC_OK;

    int nt = 1;
#ifdef _OPENMP
    nt = a->num_threads > 0 ? a->num_threads : omp_get_max_threads();
    if (nt < 1) nt = 1;
#endif
    /* Scratch first: nothing is written to a->out until every allocation has succeeded. */
    float *acc = alloc_f32(al, n_out * c_out);
    float *wt = alloc_f32(al, (int64_t)K * c_in * c_out);
    float *scratch = alloc_f32(al, (int64_t)nt * VC_CONV_BLOCK * (c_in + c_out));
    if (!acc || !wt || !scratch) {
        vc_host_free(al, acc);
        vc_host_free(al, wt);
        vc_host_free(al, scratch);
        return vc_fail(err, VC_ERR_OUT_OF_MEMORY,
                       "conv: cannot allocate %lld floats of accumulator and weight scratch",
                       (long long)(n_out * c_out + (int64_t)K * c_in * c_out));
    }
    /* Weights [c_out, K, c_in] -> wt [K, c_in, c_out] fp32. */
    for (int64_t co = 0; co < c_out; co++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t ci = 0; ci < c_in; ci++)
                wt[(k * c_in + ci) * c_out + co] =
                    vc_load_f32(a->weights, a->w_dtype, (co * K + k) * c_in + ci);
    memset(acc, 0, (size_t)(n_out * c_out) * sizeof(float));

#ifdef _OPENMP
#pragma omp parallel num_threads(nt)
#endif
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *gather = scratch + (int64_t)tid * VC_CONV_BLOCK * (c_in + c_out);
        float *prod = gather + VC_CONV_BLOCK * c_in;
        for (int32_t k = 0; k < K; k++) {
            const int64_t begin = m->offsets[k], np = m->offsets[k + 1] - begin;
            const int64_t nblocks = (np + VC_CONV_BLOCK - 1) / VC_CONV_BLOCK;
            const float *wt_k = wt + (int64_t)k * c_in * c_out;
            /* The implicit barrier at the end of the loop keeps the offsets in order. */
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
            for (int64_t b = 0; b < nblocks; b++) {
                const int64_t p0 = begin + b * VC_CONV_BLOCK;
                int64_t cnt = np - b * VC_CONV_BLOCK;
                if (cnt > VC_CONV_BLOCK) cnt = VC_CONV_BLOCK;
                conv_block(a, wt_k, m->in_rows + p0, m->out_rows + p0, cnt, gather, prod, acc);
            }
        }

        /* Epilogue: act(acc + bias + residual) stored as out_dtype. */
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (int64_t p = 0; p < n_out; p++) {
            const float *row = acc + p * c_out;
            for (int64_t co = 0; co < c_out; co++) {
                float v = row[co];
                if (a->bias) v += a->bias[co];
                if (a->residual) v += vc_load_f32(a->residual, a->res_dtype, p * c_out + co);
                vc_store_f32(a->out, a->out_dtype, p * c_out + co, activate(v, a->act, a->slope));
            }
        }
    }
    vc_host_free(al, acc);
    vc_host_free(al, wt);
    vc_host_free(al, scratch);
    return VC_OK;
}
