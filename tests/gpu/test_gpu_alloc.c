/* tests/gpu/test_gpu_alloc.c - every device allocation of the CUDA engine goes through the
 * context's allocator. A device allocator over cudaMallocAsync / cudaFreeAsync (host requests
 * go to malloc) fails each device request in turn over the sweep of tests/common/alloc_sweep.h
 * (a voxelize, map builds of every type, convolutions, a pool, a global pool): each failure is
 * VC_ERR_OUT_OF_MEMORY with a message, leaks nothing, and the context then runs the whole
 * sequence with the bits of a reference made with the library's default memory. Then requests
 * larger than the device (a tensor, a conv's output) fail the same way, with the caller's
 * allocator and with the default pool, and the context goes on working.
 * Skips (77) without CUDA or a device. */
#include "alloc_sweep.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

static void *dev_alloc(size_t bytes, struct CUstream_st *stream)
{
    void *p = NULL;
    if (cudaMallocAsync(&p, bytes, (cudaStream_t)stream) != cudaSuccess) {
        cudaGetLastError(); /* a failed allocation is not sticky: clear it */
        return NULL;
    }
    return p;
}

static void dev_free(void *p, struct CUstream_st *stream)
{
    if (cudaFreeAsync(p, (cudaStream_t)stream) != cudaSuccess) cudaGetLastError();
}

/* Requests larger than the device on ctx: a tensor of `rows` x 2^20 fp32 channels on a set of
 * `rows` coordinates, and a 1x1x1 SUBM conv to 2^20 channels whose output is as large. Both
 * must be VC_ERR_OUT_OF_MEMORY with a message; then ctx must run the sweep's sequence with the
 * reference's bits. */
static void too_large(vc_context *ctx, const char *what, int64_t rows, const sweep_input *in,
                      const sweep_result *ref)
{
    const int64_t C = (int64_t)1 << 20;
    int32_t *xyz = malloc((size_t)rows * 4 * sizeof *xyz);
    float *feat = malloc((size_t)rows * sizeof *feat);
    float *w = malloc((size_t)C * sizeof *w);
    CHECK_MSG(xyz && feat && w, "%s: host buffers", what);
    if (!xyz || !feat || !w) {
        free(xyz);
        free(feat);
        free(w);
        return;
    }
    for (int64_t i = 0; i < rows; i++) {
        xyz[4 * i] = 0;
        xyz[4 * i + 1] = (int32_t)(i / 4096);
        xyz[4 * i + 2] = (int32_t)(i / 64 % 64);
        xyz[4 * i + 3] = (int32_t)(i % 64);
        feat[i] = 1.0f;
    }
    for (int64_t i = 0; i < C; i++) w[i] = 0.5f;
    const int32_t shape[3] = {(int32_t)(rows / 4096 + 1), 64, 64};
    vc_coords *c = NULL;
    vc_tensor *big = NULL, *x = NULL, *y = NULL;
    CHECK_MSG(vc_coords_create(ctx, xyz, rows, VC_MEMORY_HOST, shape, 1, &c) == VC_OK,
              "%s: coordinate set of %lld rows: %s", what, (long long)rows,
              vc_context_last_error(ctx));
    if (c) {
        vc_status s = vc_tensor_create(ctx, c, C, VC_DTYPE_FP32, NULL, VC_MEMORY_HOST, &big);
        const char *msg = vc_context_last_error(ctx);
        CHECK_MSG(s == VC_ERR_OUT_OF_MEMORY && big == NULL,
                  "%s: a %lld x %lld fp32 tensor (%.1f GiB) gave %s, expected "
                  "VC_ERR_OUT_OF_MEMORY; message: %s", what, (long long)rows, (long long)C,
                  (double)rows * (double)C * 4.0 / 1073741824.0, vc_status_string(s), msg);
        CHECK_MSG(msg[0] != '\0', "%s: the over-large tensor failed without a message", what);
        if (big) vc_tensor_destroy(big);

        CHECK_MSG(vc_tensor_create(ctx, c, 1, VC_DTYPE_FP32, feat, VC_MEMORY_HOST, &x) == VC_OK,
                  "%s: the conv's input tensor: %s", what, vc_context_last_error(ctx));
        if (x) {
            vc_conv_desc cd = VC_CONV_DESC_INIT;
            for (int a = 0; a < 3; a++) cd.map.kernel[a] = 1;
            cd.out_channels = C;
            cd.weights = w;
            s = vc_conv_forward(ctx, &cd, x, &y);
            msg = vc_context_last_error(ctx);
            CHECK_MSG(s == VC_ERR_OUT_OF_MEMORY && y == NULL,
                      "%s: a conv to %lld x %lld fp32 outputs gave %s, expected "
                      "VC_ERR_OUT_OF_MEMORY; message: %s", what, (long long)rows, (long long)C,
                      vc_status_string(s), msg);
            CHECK_MSG(msg[0] != '\0', "%s: the over-large conv failed without a message", what);
            if (y) vc_tensor_destroy(y);
            vc_tensor_destroy(x);
        }
        vc_coords_destroy(c);
    }
    free(xyz);
    free(feat);
    free(w);
    /* The context goes on working. */
    sweep_result *got = malloc(sizeof *got);
    int stage = 0;
    vc_status s = got ? sweep_sequence(ctx, in, NULL, got, &stage) : VC_ERR_INTERNAL;
    CHECK_MSG(s == VC_OK, "%s: after the over-large requests, stage '%s' failed with %s: %s",
              what, sweep_stage_name[stage], vc_status_string(s), vc_context_last_error(ctx));
    if (s == VC_OK)
        CHECK_MSG(sweep_same(got, ref, what),
                  "%s: after the over-large requests the results differ from the reference",
                  what);
    free(got);
}

int main(void)
{
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = VC_BACKEND_CUDA;
    vc_context *ctx = NULL;
    if (vc_context_create(&d, &ctx) != VC_OK) {
        printf("skipped: no usable CUDA device (%s)\n", vc_context_last_error(NULL));
        return 77;
    }
    vc_context_destroy(ctx);

    sweep_alloc a;
    memset(&a, 0, sizeof a);
    a.counted = VC_MEMORY_DEVICE;
    a.dev_alloc = dev_alloc;
    a.dev_free = dev_free;
    /* Device requests each stage makes at least (lower bounds counted from the sources): a
     * regular map build's workspace and out_in, offsets, masks, perm, in_rows, out_rows (and
     * output coordinates and a second workspace for the new-output types); a conv's host
     * weights staged on the device and its output tensor; the voxelizer's staged points and
     * batch, its temporaries and its result; the global pool's check flag, segments and
     * partial results. */
    const int64_t min_calls[SW_STAGES] = {
        [SW_VOXELIZE] = 5, [SW_CONV_SUBM] = 8, [SW_CONV_STRIDED] = 9,
        [SW_MAP_DOWNSAMPLE] = 7, [SW_POOL] = 1, [SW_CONV_INVERSE] = 8,
        [SW_CONV_TRANSPOSED] = 9, [SW_GLOBAL_POOL] = 4, [SW_READ_BACK] = 0};
    int64_t points = sweep_run(VC_BACKEND_CUDA, &a, min_calls, 400);
    CHECK_MSG(points >= 50, "only %lld device allocation points swept", (long long)points);

    /* Larger than the device. */
    size_t free_b = 0, total_b = 0;
    CHECK_MSG(cudaMemGetInfo(&free_b, &total_b) == cudaSuccess, "cudaMemGetInfo failed");
    const int64_t rows = (int64_t)(total_b / ((size_t)4 << 20)) + 64; /* x 2^20 x 4 bytes */
    printf("over-large requests: %lld rows x 2^20 fp32 channels against %.1f GiB of device "
           "memory\n", (long long)rows, (double)total_b / 1073741824.0);
    /* compute-sanitizer counts every failed CUDA call as an error, these intended ones too */
    if (getenv("VC_SANITIZE")) {
        printf("over-large requests skipped under VC_SANITIZE (their failing cudaMalloc calls "
               "are the point, and a sanitizer counts them as errors)\n");
        TEST_END();
    }
    sweep_input *in = malloc(sizeof *in);
    sweep_result *ref = malloc(sizeof *ref);
    CHECK(in && ref);
    if (in && ref) {
        sweep_make_input(in, 27);
        int stage = 0;
        CHECK_MSG(vc_context_create(&d, &ctx) == VC_OK, "default context: %s",
                  vc_context_last_error(NULL));
        vc_status s = ctx ? sweep_sequence(ctx, in, NULL, ref, &stage) : VC_ERR_INTERNAL;
        CHECK_MSG(s == VC_OK, "reference run failed at stage '%s'", sweep_stage_name[stage]);
        if (ctx && s == VC_OK) too_large(ctx, "default memory", rows, in, ref);
        if (ctx) CHECK_OK(ctx, vc_context_destroy(ctx));

        vc_allocator al = {sweep_alloc_fn, sweep_free_fn, &a};
        a.fail_at = -1;
        a.calls = a.failed = a.held[0] = a.held[1] = 0;
        d.allocator = &al;
        ctx = NULL;
        CHECK_MSG(vc_context_create(&d, &ctx) == VC_OK, "allocator context: %s",
                  vc_context_last_error(NULL));
        if (ctx && s == VC_OK) too_large(ctx, "caller's allocator", rows, in, ref);
        CHECK_MSG(a.held[0] == 0 && a.held[1] == 0,
                  "caller's allocator: %lld host and %lld device blocks held after the "
                  "over-large requests", (long long)a.held[0], (long long)a.held[1]);
        if (ctx) CHECK_OK(ctx, vc_context_destroy(ctx));
    }
    free(in);
    free(ref);
    TEST_END();
}

#else
int main(void)
{
    printf("skipped: built without CUDA\n");
    return 77;
}
#endif
