/* tensor/tensor_ops_cpu.c - the CPU twins of the tensor operations (tensor_ops.h): loops over
 * rows or channels, parallel with OpenMP where the work is independent; every element is
 * computed by the same scalar code whatever the thread count, so results do not depend on it. */
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/dtype.h"
#include "tensor/tensor_ops.h"

#ifdef _OPENMP
static int threads_of(int num_threads) { return num_threads > 0 ? num_threads : omp_get_max_threads(); }
#endif

vc_status vc_concat_cpu(const void *const *parts, const int64_t *channels, int32_t count,
                        int64_t rows, vc_dtype dtype, void *out, int num_threads, vc_err *err)
{
    (void)err;
    const size_t es = vc_dtype_size(dtype);
    int64_t total = 0;
    for (int32_t p = 0; p < count; p++) total += channels[p];
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads_of(num_threads))
#endif
    for (int64_t r = 0; r < rows; r++) {
        char *o = (char *)out + (size_t)(r * total) * es;
        for (int32_t p = 0; p < count; p++) {
            const size_t bytes = (size_t)channels[p] * es;
            memcpy(o, (const char *)parts[p] + (size_t)r * bytes, bytes);
            o += bytes;
        }
    }
    return VC_OK;
}

vc_status vc_add_cpu(const void *a, const void *b, void *out, vc_dtype dtype, int64_t n,
                     vc_activation act, float slope, int num_threads, vc_err *err)
{
    (void)err;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads_of(num_threads))
#endif
    for (int64_t i = 0; i < n; i++) {
        const float v = vc_load_f32(a, dtype, i) + vc_load_f32(b, dtype, i);
        vc_store_f32(out, dtype, i, vc_activate_f32(v, (int)act, slope));
    }
    return VC_OK;
}

vc_status vc_affine_cpu(void *x, vc_dtype dtype, int64_t rows, int64_t channels,
                        const float *scale, const float *shift, vc_activation act, float slope,
                        int num_threads, vc_err *err)
{
    (void)err;
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads_of(num_threads))
#endif
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < channels; c++) {
            const int64_t i = r * channels + c;
            const float v = vc_affine_f32(vc_load_f32(x, dtype, i), scale, shift, c);
            vc_store_f32(x, dtype, i, vc_activate_f32(v, (int)act, slope));
        }
    }
    return VC_OK;
}

vc_status vc_to_dense_cpu(const int32_t *coords, int64_t rows, const int32_t shape[3],
                          int32_t batch, const void *in, vc_dtype in_dtype, int64_t channels,
                          void *dst, vc_dtype dst_dtype, int num_threads, vc_err *err)
{
    (void)err;
    const int64_t D = shape[0], H = shape[1], W = shape[2];
    const int64_t plane = D * H * W; /* the caller checked B*C*D*H*W against int64 */
    const int64_t planes = (int64_t)batch * channels;
    const size_t es = vc_dtype_size(dst_dtype);
    /* Zero bits are +0 in every float dtype. */
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads_of(num_threads))
#endif
    for (int64_t p = 0; p < planes; p++) memset((char *)dst + (size_t)(p * plane) * es, 0,
                                                (size_t)plane * es);
    /* One channel per iteration, its rows in order: a channel's elements are written by one
     * thread, so with duplicate rows the last one wins whatever the thread count. */
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads_of(num_threads))
#endif
    for (int64_t c = 0; c < channels; c++) {
        for (int64_t r = 0; r < rows; r++) {
            const int32_t *q = coords + 4 * r;
            if (q[0] < 0 || q[0] >= batch || q[1] < 0 || q[1] >= D || q[2] < 0 || q[2] >= H ||
                q[3] < 0 || q[3] >= W)
                continue;
            const int64_t o = ((q[0] * channels + c) * D + q[1]) * H * W + q[2] * W + q[3];
            vc_store_f32(dst, dst_dtype, o, vc_load_f32(in, in_dtype, r * channels + c));
        }
    }
    return VC_OK;
}
