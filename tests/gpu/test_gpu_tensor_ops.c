/* tests/gpu/test_gpu_tensor_ops.c - vc_tensor_concat, vc_tensor_add, vc_tensor_affine and
 * vc_tensor_to_dense on a CUDA context against the same calls on a CPU context, bit for bit
 * (fp32, fp16, bf16; 0, 1, 31, 33 and many rows; one, odd and wide channel counts; batch 3).
 * The CUDA context allocates through an allocator that fills every device block with 0xFF
 * bytes (NaN in every float dtype), and dense destinations are poisoned the same way, so an
 * element the GPU forgets to write shows; elements past the dense array must stay poisoned.
 * Affine takes scale and shift from the host and from the device, to_dense writes device and
 * host destinations. Then the device-only calls are shown to queue work without waiting: they
 * run while the stream is held by a host callback, which they would wait for if they
 * synchronised. The device-count scatter (vc_to_dense_gpu_dev) is captured in a CUDA graph
 * and replayed with other counts against vc_tensor_to_dense. VC_SANITIZE=1: small sizes (for
 * compute-sanitizer). Prints its seed (VC_TEST_SEED replays). Exits 77 without a CUDA build or a usable device. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep */
#include <stdatomic.h>
#include <time.h>

#include "oracle.h"
#include "voxconv.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "gpu_testutil.h"

#include "tensor/tensor_ops.h"

static vc_context *g_gpu, *g_cpu;
static cudaStream_t g_stream;
static int g_small;

/* ---- the poisoning allocator ---------------------------------------------------------------- */

static void *poison_alloc(void *user, size_t bytes, vc_memory where, struct CUstream_st *s)
{
    (void)user;
    if (where == VC_MEMORY_HOST) return malloc(bytes ? bytes : 1);
    void *p = NULL;
    if (cudaMallocAsync(&p, bytes ? bytes : 1, (cudaStream_t)s) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    if (cudaMemsetAsync(p, 0xFF, bytes, (cudaStream_t)s) != cudaSuccess) {
        cudaGetLastError();
        cudaFreeAsync(p, (cudaStream_t)s);
        return NULL;
    }
    return p;
}

static void poison_free(void *user, void *p, vc_memory where, struct CUstream_st *s)
{
    (void)user;
    if (!p) return;
    if (where == VC_MEMORY_HOST) free(p);
    else cudaFreeAsync(p, (cudaStream_t)s);
}

/* ---- helpers -------------------------------------------------------------------------------- */

/* The same rows as a set on each context. */
typedef struct pair_set {
    vc_coords *g, *c;
    int32_t *rows;
    int64_t n;
} pair_set;

static pair_set make_sets(vc_rng *rng, int64_t n, int32_t B, const int32_t shape[3])
{
    pair_set s = {NULL, NULL, NULL, 0};
    s.rows = rand_coords(rng, shape, B, n, 0, &s.n);
    CHECK_OK(g_gpu, vc_coords_create(g_gpu, s.rows, s.n, VC_MEMORY_HOST, shape, B, &s.g));
    CHECK_OK(g_cpu, vc_coords_create(g_cpu, s.rows, s.n, VC_MEMORY_HOST, shape, B, &s.c));
    return s;
}

static void free_sets(pair_set *s)
{
    vc_coords_destroy(s->g);
    vc_coords_destroy(s->c);
    free(s->rows);
}

/* The same random features (rounded to dt) as a tensor on each context. */
static void make_tensors(vc_rng *rng, const pair_set *s, int64_t C, vc_dtype dt, double scale,
                         vc_tensor **g, vc_tensor **c)
{
    double *vals = malloc(sizeof(double) * (size_t)(s->n * C + 1));
    void *buf = rand_buffer(rng, s->n * C, dt, scale, vals);
    CHECK_OK(g_gpu, vc_tensor_create(g_gpu, s->g, C, dt, buf, VC_MEMORY_HOST, g));
    CHECK_OK(g_cpu, vc_tensor_create(g_cpu, s->c, C, dt, buf, VC_MEMORY_HOST, c));
    free(buf);
    free(vals);
}

/* Whether the GPU tensor holds exactly the CPU tensor's bytes (shape and dtype included). */
static int same_tensor(const vc_tensor *g, const vc_tensor *c)
{
    vc_tensor_info gi, ci;
    if (!g || !c || vc_tensor_get_info(g, &gi) != VC_OK || vc_tensor_get_info(c, &ci) != VC_OK)
        return 0;
    if (gi.count != ci.count || gi.channels != ci.channels || gi.dtype != ci.dtype) return 0;
    const size_t bytes = (size_t)(gi.count * gi.channels) * vc_dtype_size(gi.dtype);
    void *h = malloc(bytes + 1);
    int ok = vc_tensor_copy_out(g_gpu, g, h, gi.dtype, VC_MEMORY_HOST) == VC_OK &&
             memcmp(h, ci.data, bytes) == 0;
    free(h);
    return ok;
}

static const vc_dtype kDtypes[3] = {VC_DTYPE_FP32, VC_DTYPE_FP16, VC_DTYPE_BF16};

/* ---- the operations, GPU against CPU -------------------------------------------------------- */

static void test_elementwise(vc_rng *rng)
{
    const int64_t big = g_small ? 3000 : 60000;
    const int64_t rows[5] = {0, 1, 31, 33, big};
    static const int64_t chans[4] = {1, 3, 16, 64};
    const int32_t shape[3] = {41, 160, 141};
    for (int d = 0; d < 3; d++)
        for (int ni = 0; ni < 5; ni++) {
            const vc_dtype dt = kDtypes[d];
            const int64_t C = chans[(ni + d) % 4], C2 = chans[(ni + d + 1) % 4];
            pair_set s = make_sets(rng, rows[ni], ni % 2 ? 3 : 1, shape);
            vc_tensor *ag, *ac, *bg, *bc, *xg, *xc;
            make_tensors(rng, &s, C, dt, 3.0, &ag, &ac);
            make_tensors(rng, &s, C, dt, 3.0, &bg, &bc);
            make_tensors(rng, &s, C2, dt, 3.0, &xg, &xc);
            for (int act = VC_ACT_NONE; act <= VC_ACT_LEAKY_RELU; act++) {
                vc_tensor *og = NULL, *oc = NULL;
                CHECK_OK(g_gpu, vc_tensor_add(g_gpu, ag, bg, (vc_activation)act, 0.1f, &og));
                CHECK_OK(g_cpu, vc_tensor_add(g_cpu, ac, bc, (vc_activation)act, 0.1f, &oc));
                CHECK_MSG(same_tensor(og, oc), "add %s, %lld x %lld, act %d", dt_name(dt),
                          (long long)s.n, (long long)C, act);
                vc_tensor_destroy(og);
                vc_tensor_destroy(oc);
            }
            const vc_tensor *pg[3] = {ag, xg, bg}, *pc[3] = {ac, xc, bc};
            for (int32_t count = 1; count <= 3; count += 2) {
                vc_tensor *og = NULL, *oc = NULL;
                CHECK_OK(g_gpu, vc_tensor_concat(g_gpu, pg, count, &og));
                CHECK_OK(g_cpu, vc_tensor_concat(g_cpu, pc, count, &oc));
                CHECK_MSG(same_tensor(og, oc), "concat of %d %s, %lld rows, widths %lld %lld",
                          (int)count, dt_name(dt), (long long)s.n, (long long)C, (long long)C2);
                vc_tensor_destroy(og);
                vc_tensor_destroy(oc);
            }
            /* affine, in place on a and x: host arrays, device arrays, one of them, none */
            float *scale = malloc(sizeof(float) * (size_t)C2);
            float *shift = malloc(sizeof(float) * (size_t)C2);
            for (int64_t c = 0; c < C2; c++) {
                scale[c] = vc_rng_float(rng) * 1.9f;
                shift[c] = vc_rng_float(rng) * 0.7f;
            }
            float *dscale = to_device(scale, sizeof(float) * (size_t)C2);
            float *dshift = to_device(shift, sizeof(float) * (size_t)C2);
            for (int form = 0; form < 5; form++) {
                const int dev = form == 1;
                const float *sg = form <= 2 ? (dev ? dscale : scale) : NULL;
                const float *hg = form <= 1 || form == 3 ? (dev ? dshift : shift) : NULL;
                const float *sc = sg ? scale : NULL, *hc = hg ? shift : NULL;
                const vc_activation act = (vc_activation)(form % 3);
                CHECK_OK(g_gpu, vc_tensor_affine(g_gpu, xg, sg, hg,
                                                 dev ? VC_MEMORY_DEVICE : VC_MEMORY_HOST, act,
                                                 0.01f));
                CHECK_OK(g_cpu, vc_tensor_affine(g_cpu, xc, sc, hc, VC_MEMORY_HOST, act, 0.01f));
                CHECK_MSG(same_tensor(xg, xc), "affine %s, %lld x %lld, form %d", dt_name(dt),
                          (long long)s.n, (long long)C2, form);
            }
            CUDA_OK(cudaFree(dscale));
            CUDA_OK(cudaFree(dshift));
            free(scale);
            free(shift);
            vc_tensor_destroy(ag); vc_tensor_destroy(ac);
            vc_tensor_destroy(bg); vc_tensor_destroy(bc);
            vc_tensor_destroy(xg); vc_tensor_destroy(xc);
            printf("  %s %6lld rows: add, concat, affine bit-identical\n", dt_name(dt),
                   (long long)s.n);
            free_sets(&s);
        }
}

/* One dense case: the GPU into a poisoned device and a poisoned host buffer against the CPU. */
static void dense_case(vc_rng *rng, int64_t n, int32_t B, const int32_t shape[3], int64_t C,
                       vc_dtype dt, vc_dtype ot)
{
    pair_set s = make_sets(rng, n, B, shape);
    vc_tensor *tg, *tc;
    make_tensors(rng, &s, C, dt, 5.0, &tg, &tc);
    const int64_t total = (int64_t)B * C * shape[0] * shape[1] * shape[2], extra = 5;
    const size_t es = vc_dtype_size(ot), bytes = (size_t)(total + extra) * es;
    unsigned char *ref = malloc(bytes), *host = malloc(bytes), *back = malloc(bytes);
    memset(ref, 0xFF, bytes);
    memset(host, 0xFF, bytes);
    void *dev = NULL;
    CUDA_OK(cudaMalloc(&dev, bytes));
    CUDA_OK(cudaMemset(dev, 0xFF, bytes));
    CHECK_OK(g_cpu, vc_tensor_to_dense(g_cpu, tc, ref, total + extra, ot, VC_MEMORY_HOST));
    /* too small: refused, the destination untouched */
    CHECK_STATUS(g_gpu, vc_tensor_to_dense(g_gpu, tg, dev, total - 1, ot, VC_MEMORY_DEVICE),
                 VC_ERR_CAPACITY);
    CUDA_OK(cudaMemcpy(back, dev, bytes, cudaMemcpyDeviceToHost));
    CHECK_MSG(memcmp(back, host, bytes) == 0, "to_dense: a refused call wrote its destination");
    CHECK_OK(g_gpu, vc_tensor_to_dense(g_gpu, tg, dev, total + extra, ot, VC_MEMORY_DEVICE));
    CHECK_OK(g_gpu, vc_tensor_to_dense(g_gpu, tg, host, total + extra, ot, VC_MEMORY_HOST));
    CUDA_OK(cudaMemcpy(back, dev, bytes, cudaMemcpyDeviceToHost));
    CHECK_MSG(memcmp(back, ref, bytes) == 0, "to_dense %s -> %s (device dst), %lld rows x %lld "
              "ch, batch %d, %dx%dx%d", dt_name(dt), dt_name(ot), (long long)s.n, (long long)C,
              (int)B, (int)shape[0], (int)shape[1], (int)shape[2]);
    CHECK_MSG(memcmp(host, ref, bytes) == 0, "to_dense %s -> %s (host dst), %lld rows",
              dt_name(dt), dt_name(ot), (long long)s.n);
    int64_t nonzero = 0;
    for (int64_t i = 0; i < total; i++) nonzero += memcmp(ref + i * es, "\0\0\0\0", es) != 0;
    printf("  dense %s -> %s [%d, %lld, %d, %d, %d]: %lld nonzero, device and host dst "
           "bit-identical\n", dt_name(dt), dt_name(ot), (int)B, (long long)C, (int)shape[0],
           (int)shape[1], (int)shape[2], (long long)nonzero);
    CUDA_OK(cudaFree(dev));
    free(ref);
    free(host);
    free(back);
    vc_tensor_destroy(tg);
    vc_tensor_destroy(tc);
    free_sets(&s);
}

static void test_to_dense(vc_rng *rng)
{
    const int32_t small[3] = {5, 9, 7}, one[3] = {1, 1, 1};
    const int32_t bev[3] = {2, 200, 176}; /* the last level of the KITTI backbone */
    for (int d = 0; d < 3; d++)
        for (int o = 0; o < 3; o++) {
            dense_case(rng, 31, 3, small, 3, kDtypes[d], kDtypes[o]);
            dense_case(rng, 0, 2, small, 1, kDtypes[d], kDtypes[o]);
        }
    dense_case(rng, 1, 1, one, 16, VC_DTYPE_FP16, VC_DTYPE_FP32);
    dense_case(rng, 33, 1, small, 5, VC_DTYPE_BF16, VC_DTYPE_BF16);
    if (g_small) {
        dense_case(rng, 500, 2, bev, 8, VC_DTYPE_FP16, VC_DTYPE_FP16);
    } else {
        dense_case(rng, 20000, 1, bev, 128, VC_DTYPE_FP16, VC_DTYPE_FP16);
        dense_case(rng, 20000, 2, bev, 64, VC_DTYPE_FP32, VC_DTYPE_FP16);
    }
}

/* ---- the device-count dense scatter in a CUDA graph ------------------------------------------ */

/* vc_to_dense_gpu_dev (tensor/tensor_ops.h) over an extent of E rows, captured once in the
 * global capture mode and replayed with other counts and rows in the same buffers: each dense
 * array must equal vc_tensor_to_dense (CPU context) of the live rows. Every extent row holds a
 * distinct in-shape coordinate and non-zero features, so a replay that read a row past the
 * count would differ; the destination is poisoned with 0xFF before each replay. */
typedef struct dense_arg {
    const int32_t *coords;
    int64_t rows;
    const int64_t *count;
    const int32_t *shape;
    int32_t batch;
    const void *in;
    vc_dtype in_dtype;
    int64_t channels;
    void *dst;
    vc_dtype dst_dtype;
} dense_arg;

static vc_status dense_body(void *arg, cudaStream_t stream, vc_err *err)
{
    const dense_arg *a = arg;
    return vc_to_dense_gpu_dev(a->coords, a->rows, a->count, a->shape, a->batch, a->in,
                               a->in_dtype, a->channels, a->dst, a->dst_dtype,
                               (struct CUstream_st *)stream, err);
}

static void dense_graph_case(vc_rng *rng, int64_t E, int32_t B, const int32_t shape[3],
                             int64_t C, vc_dtype dt, vc_dtype ot)
{
    const int64_t total = (int64_t)B * C * shape[0] * shape[1] * shape[2];
    const size_t es = vc_dtype_size(ot), ies = vc_dtype_size(dt), bytes = (size_t)total * es;
    int32_t *dc = NULL;
    void *df = NULL, *dst = NULL;
    int64_t *dn = NULL;
    CUDA_OK(cudaMalloc((void **)&dc, (size_t)E * 16));
    CUDA_OK(cudaMalloc(&df, (size_t)(E * C) * ies));
    CUDA_OK(cudaMalloc((void **)&dn, sizeof(int64_t)));
    CUDA_OK(cudaMalloc(&dst, bytes));
    vc_err err = {{0}};
    const int64_t zero = 0;
    CUDA_OK(cudaMemcpyAsync(dn, &zero, sizeof zero, cudaMemcpyHostToDevice, g_stream));
    CUDA_OK(cudaStreamSynchronize(g_stream)); /* the warm-up's count */
    dense_arg a = {dc, E, dn, shape, B, df, dt, C, dst, ot};
    cudaGraphExec_t exec = capture_checked(g_stream, dense_body, &a, "to_dense_dev");
    unsigned char *ref = malloc(bytes + 1), *back = malloc(bytes + 1);
    const int64_t counts[7] = {E, 0, 1, E / 2 + 1, E - 1, E + 5, E};
    for (int k = 0; exec && k < 7; k++) {
        int64_t n = 0;
        int32_t *rows = rand_coords(rng, shape, B, E, 0, &n);
        CHECK_MSG(n == E, "the shape holds %lld of the %lld rows", (long long)n, (long long)E);
        double *vals = malloc(sizeof(double) * (size_t)(E * C + 1));
        void *buf = rand_buffer(rng, E * C, dt, 3.0, vals);
        const int64_t live = counts[k] < E ? counts[k] : E;
        CUDA_OK(cudaMemcpyAsync(dc, rows, (size_t)E * 16, cudaMemcpyHostToDevice, g_stream));
        CUDA_OK(cudaMemcpyAsync(df, buf, (size_t)(E * C) * ies, cudaMemcpyHostToDevice,
                                g_stream));
        CUDA_OK(cudaMemcpyAsync(dn, &counts[k], sizeof(int64_t), cudaMemcpyHostToDevice,
                                g_stream));
        CUDA_OK(cudaMemsetAsync(dst, 0xFF, bytes, g_stream));
        CUDA_OK(cudaGraphLaunch(exec, g_stream));
        CUDA_OK(cudaMemcpyAsync(back, dst, bytes, cudaMemcpyDeviceToHost, g_stream));
        CUDA_OK(cudaStreamSynchronize(g_stream));
        vc_coords *cc = NULL;
        vc_tensor *tc = NULL;
        CHECK_OK(g_cpu, vc_coords_create(g_cpu, rows, live, VC_MEMORY_HOST, shape, B, &cc));
        CHECK_OK(g_cpu, vc_tensor_create(g_cpu, cc, C, dt, buf, VC_MEMORY_HOST, &tc));
        memset(ref, 0xFF, bytes);
        CHECK_OK(g_cpu, vc_tensor_to_dense(g_cpu, tc, ref, total, ot, VC_MEMORY_HOST));
        const int same = memcmp(back, ref, bytes) == 0;
        CHECK_MSG(same, "to_dense_dev replay %d: %s -> %s, count %lld of %lld rows differs from "
                  "vc_tensor_to_dense", k, dt_name(dt), dt_name(ot), (long long)counts[k],
                  (long long)E);
        printf("  dense graph %s -> %s [%d, %lld, %d, %d, %d]: count %lld of %lld rows%s\n",
               dt_name(dt), dt_name(ot), (int)B, (long long)C, (int)shape[0], (int)shape[1],
               (int)shape[2], (long long)counts[k], (long long)E,
               same ? ", bit-identical" : ", DIFFERS");
        vc_tensor_destroy(tc);
        vc_coords_destroy(cc);
        free(rows);
        free(vals);
        free(buf);
    }
    if (exec) cudaGraphExecDestroy(exec);
    free(ref);
    free(back);
    CUDA_OK(cudaFree(dc));
    CUDA_OK(cudaFree(df));
    CUDA_OK(cudaFree(dn));
    CUDA_OK(cudaFree(dst));
    /* a NULL count is refused */
    CHECK(vc_to_dense_gpu_dev(NULL, 1, NULL, shape, B, NULL, dt, C, NULL, ot,
                              (struct CUstream_st *)g_stream, &err) == VC_ERR_INVALID_ARGUMENT);
}

static void test_dense_graph(vc_rng *rng)
{
    const int32_t small[3] = {5, 9, 7}, bev[3] = {2, 200, 176};
    dense_graph_case(rng, 40, 3, small, 3, VC_DTYPE_FP32, VC_DTYPE_FP32);
    dense_graph_case(rng, 33, 2, small, 5, VC_DTYPE_BF16, VC_DTYPE_FP16);
    if (g_small)
        dense_graph_case(rng, 400, 2, bev, 8, VC_DTYPE_FP16, VC_DTYPE_FP32);
    else
        dense_graph_case(rng, 20000, 2, bev, 64, VC_DTYPE_FP16, VC_DTYPE_FP16);
}

/* ---- no synchronisation --------------------------------------------------------------------- */

static atomic_int g_release, g_timed_out;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Holds the stream until the test releases it (3 s at most). */
static void CUDART_CB hold_stream(void *arg)
{
    (void)arg;
    const double t0 = now_s();
    while (!atomic_load(&g_release)) {
        if (now_s() - t0 > 3.0) {
            atomic_store(&g_timed_out, 1);
            return;
        }
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

static void test_no_sync(vc_rng *rng)
{
    const int32_t shape[3] = {8, 30, 30};
    pair_set s = make_sets(rng, 500, 2, shape);
    vc_tensor *ag, *ac, *bg, *bc;
    make_tensors(rng, &s, 16, VC_DTYPE_FP16, 2.0, &ag, &ac);
    make_tensors(rng, &s, 16, VC_DTYPE_FP16, 2.0, &bg, &bc);
    float scale[16];
    for (int i = 0; i < 16; i++) scale[i] = 0.5f + 0.1f * (float)i;
    float *dscale = to_device(scale, sizeof scale);
    const int64_t total = 2 * 16 * 8 * 30 * 30;
    void *dev = NULL;
    CUDA_OK(cudaMalloc(&dev, (size_t)total * 2));
    CUDA_OK(cudaStreamSynchronize(g_stream));
    atomic_store(&g_release, 0);
    atomic_store(&g_timed_out, 0);
    CUDA_OK(cudaLaunchHostFunc(g_stream, hold_stream, NULL));
    const double t0 = now_s();
    vc_tensor *sum = NULL, *cat = NULL;
    const vc_tensor *parts[2] = {ag, bg};
    CHECK_OK(g_gpu, vc_tensor_add(g_gpu, ag, bg, VC_ACT_RELU, 0.0f, &sum));
    CHECK_OK(g_gpu, vc_tensor_concat(g_gpu, parts, 2, &cat));
    CHECK_OK(g_gpu, vc_tensor_affine(g_gpu, sum, dscale, dscale, VC_MEMORY_DEVICE,
                                     VC_ACT_LEAKY_RELU, 0.01f));
    CHECK_OK(g_gpu, vc_tensor_to_dense(g_gpu, sum, dev, total, VC_DTYPE_FP16, VC_MEMORY_DEVICE));
    vc_tensor_destroy(cat);
    const double dt = now_s() - t0;
    atomic_store(&g_release, 1);
    CUDA_OK(cudaStreamSynchronize(g_stream));
    CHECK_MSG(!atomic_load(&g_timed_out) && dt < 1.5,
              "the device-only calls waited for the stream (%.3f s)", dt);
    printf("  add, concat, affine (device arrays), to_dense (device dst) queued in %.3f ms while "
           "the stream was held\n", dt * 1e3);
    /* and what they queued is right */
    vc_tensor *sc = NULL;
    CHECK_OK(g_cpu, vc_tensor_add(g_cpu, ac, bc, VC_ACT_RELU, 0.0f, &sc));
    CHECK_OK(g_cpu, vc_tensor_affine(g_cpu, sc, scale, scale, VC_MEMORY_HOST, VC_ACT_LEAKY_RELU,
                                     0.01f));
    CHECK(same_tensor(sum, sc));
    vc_tensor_destroy(sc);
    vc_tensor_destroy(sum);
    CUDA_OK(cudaFree(dev));
    CUDA_OK(cudaFree(dscale));
    vc_tensor_destroy(ag); vc_tensor_destroy(ac);
    vc_tensor_destroy(bg); vc_tensor_destroy(bc);
    free_sets(&s);
}

#endif

int main(void)
{
#ifndef VOXCONV_HAVE_CUDA
    printf("SKIP: this build has no CUDA backend\n");
    return 77;
#else
    if (!gpu_usable()) return 77;
    g_small = getenv("VC_SANITIZE") != NULL;
    vc_rng rng = vc_test_rng("test_gpu_tensor_ops");
    CUDA_OK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    vc_allocator poison = {poison_alloc, poison_free, NULL};
    vc_context_desc gd = VC_CONTEXT_DESC_INIT, cd = VC_CONTEXT_DESC_INIT;
    gd.backend = VC_BACKEND_CUDA;
    gd.stream = (struct CUstream_st *)g_stream;
    gd.allocator = &poison;
    cd.backend = VC_BACKEND_CPU;
    CHECK_OK(NULL, vc_context_create(&gd, &g_gpu));
    CHECK_OK(NULL, vc_context_create(&cd, &g_cpu));
    if (!g_gpu || !g_cpu) TEST_END();
    test_elementwise(&rng);
    test_to_dense(&rng);
    test_dense_graph(&rng);
    test_no_sync(&rng);
    CHECK_OK(g_gpu, vc_context_destroy(g_gpu));
    CHECK_OK(g_cpu, vc_context_destroy(g_cpu));
    CUDA_OK(cudaStreamDestroy(g_stream));
    TEST_END();
#endif
}
