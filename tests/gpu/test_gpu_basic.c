/* tests/gpu/test_gpu_basic.c - the CUDA backend's memory layer: contexts on a device, coordinate
 * sets and tensors in device memory (copied from host and from device, wrapped), validation of
 * device rows, the device fill and dtype-conversion kernels against their CPU twin
 * (bit-identical), and the map cache on a device set. Skips with code 77 where the build has no
 * CUDA or no device is usable. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "testutil.h"
#include "voxconv.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

static void test_device(void)
{
    vc_context_desc cd = VC_CONTEXT_DESC_INIT;
    cd.backend = VC_BACKEND_CUDA;
    vc_context *ctx = NULL;
    CHECK_OK(NULL, vc_context_create(&cd, &ctx));
    if (!ctx) return;
    vc_rng rng = vc_test_rng("test_gpu_basic");

    const int64_t n = 33;
    const int32_t shape[3] = {41, 1600, 1408};
    int32_t *rows = malloc((size_t)n * 16);
    for (int64_t i = 0; i < n; i++) {
        rows[4 * i + 0] = (int32_t)vc_rng_int(&rng, 3);
        rows[4 * i + 1] = (int32_t)vc_rng_int(&rng, shape[0]);
        rows[4 * i + 2] = (int32_t)vc_rng_int(&rng, shape[1]);
        rows[4 * i + 3] = i == 0 ? shape[2] - 1 : (int32_t)vc_rng_int(&rng, shape[2]);
    }
    vc_coords *c = NULL, *cw = NULL;
    CHECK_OK(ctx, vc_coords_create(ctx, rows, n, VC_MEMORY_HOST, shape, 3, &c));
    vc_coords_info ci;
    CHECK_OK(ctx, vc_coords_get_info(c, &ci));
    CHECK(ci.memory == VC_MEMORY_DEVICE);
    /* a device buffer: wrap it, and validation reads it back */
    int32_t *drows = NULL;
    CHECK(cudaMalloc((void **)&drows, (size_t)n * 16) == cudaSuccess);
    CHECK(cudaMemcpy(drows, rows, (size_t)n * 16, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK_OK(ctx, vc_coords_wrap(ctx, drows, n, VC_MEMORY_DEVICE, shape, 3, &cw));
    int32_t *back = calloc((size_t)n, 16);
    CHECK_OK(ctx, vc_coords_copy_out(ctx, cw, back, VC_MEMORY_HOST));
    CHECK(memcmp(back, rows, (size_t)n * 16) == 0);
    rows[4 * 5 + 3] = shape[2]; /* one past the edge */
    CHECK(cudaMemcpy(drows, rows, (size_t)n * 16, cudaMemcpyHostToDevice) == cudaSuccess);
    vc_coords *bad = NULL;
    CHECK_STATUS(ctx, vc_coords_create(ctx, drows, n, VC_MEMORY_DEVICE, shape, 3, &bad),
                 VC_ERR_OUT_OF_RANGE);
    CHECK(bad == NULL);

    /* features: random values over the whole fp32 range, subnormals and specials included */
    const int64_t ch = 17, total = n * ch;
    float *f = malloc((size_t)total * 4);
    for (int64_t i = 0; i < total; i++) {
        uint32_t u = (uint32_t)vc_rng_next(&rng);
        if (i % 5 == 0) u = (u & 0x807fffffu) | (uint32_t)(96 + vc_rng_int(&rng, 64)) << 23;
        f[i] = vc_bits_f32(u);
    }
    f[0] = 65520.0f; f[1] = -0.0f; f[2] = 1e-8f; f[3] = INFINITY;
    vc_tensor *t = NULL, *th = NULL, *tb = NULL;
    CHECK_OK(ctx, vc_tensor_create(ctx, c, ch, VC_DTYPE_FP32, f, VC_MEMORY_HOST, &t));
    CHECK_OK(ctx, vc_tensor_cast(ctx, t, VC_DTYPE_FP16, &th));
    CHECK_OK(ctx, vc_tensor_cast(ctx, t, VC_DTYPE_BF16, &tb));
    uint16_t *gh = malloc((size_t)total * 2), *gb = malloc((size_t)total * 2);
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, th, gh, VC_DTYPE_FP16, VC_MEMORY_HOST));
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, tb, gb, VC_DTYPE_BF16, VC_MEMORY_HOST));
    int64_t mism_h = 0, mism_b = 0;
    for (int64_t i = 0; i < total; i++) {
        uint16_t rh = vc_f32_to_f16(f[i]), rb = vc_f32_to_bf16(f[i]);
        int nan_h = (rh & 0x7c00u) == 0x7c00u && (rh & 0x3ffu);
        int nan_b = (rb & 0x7f80u) == 0x7f80u && (rb & 0x7fu);
        if (nan_h ? !((gh[i] & 0x7c00u) == 0x7c00u && (gh[i] & 0x3ffu)) : gh[i] != rh) mism_h++;
        if (nan_b ? !((gb[i] & 0x7f80u) == 0x7f80u && (gb[i] & 0x7fu)) : gb[i] != rb) mism_b++;
    }
    CHECK_MSG(mism_h == 0 && mism_b == 0, "fp16 mismatches %lld, bf16 mismatches %lld",
              (long long)mism_h, (long long)mism_b);
    /* poison with NaN on the device, read back */
    CHECK_OK(ctx, vc_tensor_fill(ctx, th, NAN));
    float *g = malloc((size_t)total * 4);
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, th, g, VC_DTYPE_FP32, VC_MEMORY_HOST));
    int64_t not_nan = 0;
    for (int64_t i = 0; i < total; i++) not_nan += !isnan(g[i]);
    CHECK(not_nan == 0);
    /* host fp16 in, device conversion out to fp32 */
    CHECK_OK(ctx, vc_tensor_copy_in(ctx, th, gh, VC_DTYPE_FP16, VC_MEMORY_HOST));
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, th, g, VC_DTYPE_FP32, VC_MEMORY_HOST));
    int64_t bad_up = 0;
    for (int64_t i = 0; i < total; i++) {
        float r = vc_f16_to_f32(gh[i]);
        if (!(isnan(r) ? isnan(g[i]) : memcmp(&r, &g[i], 4) == 0)) bad_up++;
    }
    CHECK(bad_up == 0);
    /* a device map is built where the set lives and cached on it */
    vc_map_desc md = VC_MAP_DESC_INIT;
    vc_kmap *m = NULL, *m2 = NULL;
    CHECK_OK(ctx, vc_kmap_build(ctx, c, &md, &m));
    CHECK_OK(ctx, vc_kmap_build(ctx, c, &md, &m2));
    CHECK(m && m == m2);
    vc_kmap_info mi;
    if (m && vc_kmap_get_info(m, &mi) == VC_OK)
        CHECK(mi.memory == VC_MEMORY_DEVICE && mi.out_count == n && mi.pair_count >= n);
    vc_kmap_destroy(m);
    vc_kmap_destroy(m2);

    vc_tensor_destroy(t);
    vc_tensor_destroy(th);
    vc_tensor_destroy(tb);
    vc_coords_destroy(c);
    vc_coords_destroy(cw);
    CHECK_OK(ctx, vc_context_destroy(ctx));
    cudaFree(drows);
    free(rows);
    free(back);
    free(f);
    free(g);
    free(gh);
    free(gb);
}
#endif

int main(void)
{
#ifndef VOXCONV_HAVE_CUDA
    printf("SKIP: this build has no CUDA backend (VOXCONV_CUDA=OFF or no nvcc)\n");
    return 77;
#else
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        printf("SKIP: no usable CUDA device (%s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 77;
    }
    test_device();
    TEST_END();
#endif
}
