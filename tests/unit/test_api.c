/* tests/unit/test_api.c - the public API's contract: versions and statuses, contexts, coordinate
 * sets and tensors (copy, wrap, convert, fill), reference counting and the kernel-map cache,
 * and bad input: every failure returns a status, records a message and leaves the caller's
 * buffers and output pointers untouched. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "voxconv.h"

static vc_context *cpu_context(void)
{
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = VC_BACKEND_CPU;
    vc_context *ctx = NULL;
    if (vc_context_create(&d, &ctx) != VC_OK) {
        fprintf(stderr, "cannot create a CPU context: %s\n", vc_context_last_error(NULL));
        exit(1);
    }
    return ctx;
}

static void test_version_status(void)
{
    CHECK(strcmp(vc_version(), "0.1.0") == 0);
    CHECK(vc_version_number() == VC_VERSION_NUMBER);
    for (int s = 0; s <= 13; s++) CHECK(strncmp(vc_status_string((vc_status)s), "VC_", 3) == 0);
    CHECK(strstr(vc_status_string(VC_ERR_FORMAT), "FORMAT") != NULL);
    CHECK(vc_status_string((vc_status)999) != NULL);
    CHECK(vc_dtype_size(VC_DTYPE_FP16) == 2 && vc_dtype_size(VC_DTYPE_FP32) == 4 &&
          vc_dtype_size(VC_DTYPE_BF16) == 2 && vc_dtype_size((vc_dtype)77) == 0);
}

static void test_context(void)
{
    vc_context *ctx = (vc_context *)0x1;
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = (vc_backend)42;
    CHECK(vc_context_create(&d, &ctx) == VC_ERR_INVALID_ARGUMENT);
    CHECK(ctx == (vc_context *)0x1); /* untouched on failure */
    CHECK(strstr(vc_context_last_error(NULL), "backend") != NULL);
    d = (vc_context_desc)VC_CONTEXT_DESC_INIT;
    d.struct_size = 4;
    CHECK(vc_context_create(&d, &ctx) == VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_context_create(NULL, NULL) == VC_ERR_INVALID_ARGUMENT);
    /* AUTO resolves to a concrete backend */
    CHECK(vc_context_create(NULL, &ctx) == VC_OK);
    vc_backend b = VC_BACKEND_AUTO;
    CHECK(vc_context_backend(ctx, &b) == VC_OK && b != VC_BACKEND_AUTO);
    CHECK(vc_context_synchronize(ctx) == VC_OK);
    CHECK(vc_context_destroy(ctx) == VC_OK);
    CHECK(vc_context_destroy(NULL) == VC_OK);
#ifndef VOXCONV_HAVE_CUDA
    d = (vc_context_desc)VC_CONTEXT_DESC_INIT;
    d.backend = VC_BACKEND_CUDA;
    CHECK(vc_context_create(&d, &ctx) == VC_ERR_UNSUPPORTED);
#endif
}

/* The message of a failed vc_context_create is per thread: threads do not see each other's. */
#if defined(__APPLE__) || \
    (defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34)))
#include <pthread.h> /* in the C library itself: no -pthread needed to link */
#define VC_TEST_THREADS 1

typedef struct create_probe {
    int empty_at_start; /* the thread's message before its first failure was "" */
    int own_message;    /* after its failure, the thread sees its own message   */
} create_probe;

static void *fail_create_on_thread(void *arg)
{
    create_probe *p = arg;
    p->empty_at_start = vc_context_last_error(NULL)[0] == '\0';
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.num_threads = -1;
    vc_context *ctx = NULL;
    vc_status s = vc_context_create(&d, &ctx);
    p->own_message = s == VC_ERR_INVALID_ARGUMENT &&
                     strstr(vc_context_last_error(NULL), "num_threads") != NULL;
    return NULL;
}
#endif

static void test_create_error_per_thread(void)
{
#ifdef VC_TEST_THREADS
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = (vc_backend)42;
    vc_context *ctx = NULL;
    CHECK(vc_context_create(&d, &ctx) == VC_ERR_INVALID_ARGUMENT);
    CHECK(strstr(vc_context_last_error(NULL), "backend") != NULL);
    create_probe p = {0, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, fail_create_on_thread, &p) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(p.empty_at_start && p.own_message);
    CHECK(strstr(vc_context_last_error(NULL), "backend") != NULL); /* not the thread's */
#endif
}

static void test_coords_tensors(void)
{
    vc_context *ctx = cpu_context();
    const int32_t shape[3] = {4, 5, 6};
    int32_t rows[3][4] = {{0, 0, 0, 0}, {1, 3, 4, 5}, {0, 2, 1, 3}};
    vc_coords *c = NULL;
    CHECK_OK(ctx, vc_coords_create(ctx, &rows[0][0], 3, VC_MEMORY_HOST, shape, 2, &c));
    vc_coords_info ci;
    CHECK_OK(ctx, vc_coords_get_info(c, &ci));
    CHECK(ci.count == 3 && ci.batch_size == 2 && ci.spatial_shape[2] == 6 &&
          ci.memory == VC_MEMORY_HOST);
    CHECK(ci.data != &rows[0][0] && memcmp(ci.data, rows, sizeof rows) == 0); /* a copy */
    int32_t back[3][4];
    CHECK_OK(ctx, vc_coords_copy_out(ctx, c, &back[0][0], VC_MEMORY_HOST));
    CHECK(memcmp(back, rows, sizeof rows) == 0);

    /* out of range rows, each axis and the batch: status, message, out untouched */
    for (int axis = 0; axis < 4; axis++) {
        for (int high = 0; high < 2; high++) {
            int32_t bad[3][4];
            memcpy(bad, rows, sizeof bad);
            bad[1][axis] = high ? (axis == 0 ? 2 : shape[axis - 1]) : -1;
            int32_t copy[3][4];
            memcpy(copy, bad, sizeof bad);
            vc_coords *o = (vc_coords *)0x1;
            CHECK_STATUS(ctx, vc_coords_create(ctx, &bad[0][0], 3, VC_MEMORY_HOST, shape, 2, &o),
                         VC_ERR_OUT_OF_RANGE);
            CHECK(o == (vc_coords *)0x1);
            CHECK(memcmp(copy, bad, sizeof bad) == 0);
            CHECK(strstr(vc_context_last_error(ctx), "row 1") != NULL);
        }
    }
    vc_coords *o = NULL;
    const int32_t zero_shape[3] = {4, 0, 6};
    CHECK_STATUS(ctx, vc_coords_create(ctx, &rows[0][0], 3, VC_MEMORY_HOST, zero_shape, 1, &o),
                 VC_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ctx, vc_coords_create(ctx, NULL, 3, VC_MEMORY_HOST, shape, 1, &o),
                 VC_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ctx, vc_coords_create(ctx, &rows[0][0], -1, VC_MEMORY_HOST, shape, 1, &o),
                 VC_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ctx, vc_coords_create(ctx, &rows[0][0], (int64_t)1 << 40, VC_MEMORY_HOST, shape,
                                       1, &o), VC_ERR_LIMIT);
    CHECK_STATUS(ctx, vc_coords_create(ctx, &rows[0][0], 3, VC_MEMORY_DEVICE, shape, 2, &o),
                 VC_ERR_INVALID_ARGUMENT);
    CHECK(o == NULL);
    /* N = 0 is a valid set */
    vc_coords *empty = NULL;
    CHECK_OK(ctx, vc_coords_create(ctx, NULL, 0, VC_MEMORY_HOST, shape, 1, &empty));

    /* tensors: copy, fp16/bf16 conversion both ways */
    float f[3][5];
    for (int i = 0; i < 15; i++) (&f[0][0])[i] = 0.25f * (float)(i - 7);
    vc_tensor *t = NULL, *h = NULL, *b = NULL;
    CHECK_OK(ctx, vc_tensor_create(ctx, c, 5, VC_DTYPE_FP32, f, VC_MEMORY_HOST, &t));
    vc_tensor_info ti;
    CHECK_OK(ctx, vc_tensor_get_info(t, &ti));
    CHECK(ti.count == 3 && ti.channels == 5 && ti.dtype == VC_DTYPE_FP32 && ti.coords == c);
    CHECK_OK(ctx, vc_tensor_cast(ctx, t, VC_DTYPE_FP16, &h));
    CHECK_OK(ctx, vc_tensor_cast(ctx, h, VC_DTYPE_BF16, &b));
    float g[3][5];
    memset(g, 0xff, sizeof g);
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, b, g, VC_DTYPE_FP32, VC_MEMORY_HOST));
    CHECK(memcmp(f, g, sizeof f) == 0); /* quarter steps are exact in every dtype */
    uint16_t half[15];
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, t, half, VC_DTYPE_FP16, VC_MEMORY_HOST));
    CHECK(half[7] == 0x0000 && half[8] == 0x3400 && half[0] == 0xBF00); /* 0, 0.25, -1.75 */
    CHECK_OK(ctx, vc_tensor_fill(ctx, h, NAN));
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, h, g, VC_DTYPE_FP32, VC_MEMORY_HOST));
    CHECK(isnan(g[2][4]) && isnan(g[0][0]));
    CHECK_OK(ctx, vc_tensor_copy_in(ctx, h, half, VC_DTYPE_FP16, VC_MEMORY_HOST));
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, h, g, VC_DTYPE_FP32, VC_MEMORY_HOST));
    CHECK(memcmp(f, g, sizeof f) == 0);
    /* zero-initialised when features is NULL */
    vc_tensor *z = NULL;
    CHECK_OK(ctx, vc_tensor_create(ctx, c, 2, VC_DTYPE_BF16, NULL, VC_MEMORY_HOST, &z));
    float zz[6] = {1, 1, 1, 1, 1, 1};
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, z, zz, VC_DTYPE_FP32, VC_MEMORY_HOST));
    CHECK(zz[0] == 0 && zz[5] == 0);
    /* wrap: results land in the caller's buffer, no copy */
    float w[3][2] = {{1, 2}, {3, 4}, {5, 6}};
    vc_tensor *wt = NULL;
    CHECK_OK(ctx, vc_tensor_wrap(ctx, c, 2, VC_DTYPE_FP32, w, VC_MEMORY_HOST, &wt));
    CHECK_OK(ctx, vc_tensor_get_info(wt, &ti));
    CHECK(ti.data == (void *)w);
    CHECK_OK(ctx, vc_tensor_fill(ctx, wt, 9.0f));
    CHECK(w[2][1] == 9.0f);
    /* bad tensors */
    vc_tensor *bad = (vc_tensor *)0x1;
    CHECK_STATUS(ctx, vc_tensor_create(ctx, c, 0, VC_DTYPE_FP32, NULL, VC_MEMORY_HOST, &bad),
                 VC_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ctx, vc_tensor_create(ctx, c, 4, VC_DTYPE_INT32, NULL, VC_MEMORY_HOST, &bad),
                 VC_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ctx, vc_tensor_create(ctx, NULL, 4, VC_DTYPE_FP32, NULL, VC_MEMORY_HOST, &bad),
                 VC_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(ctx, vc_tensor_create(ctx, c, (int64_t)1 << 40, VC_DTYPE_FP32, NULL,
                                       VC_MEMORY_HOST, &bad), VC_ERR_LIMIT);
    CHECK_STATUS(ctx, vc_tensor_wrap(ctx, c, 2, VC_DTYPE_FP32, NULL, VC_MEMORY_HOST, &bad),
                 VC_ERR_INVALID_ARGUMENT);
    CHECK(bad == (vc_tensor *)0x1);

    /* a context refuses to die while handles live; the coords outlive their creator's ref */
    CHECK_STATUS(ctx, vc_context_destroy(ctx), VC_ERR_INVALID_ARGUMENT);
    CHECK_OK(ctx, vc_coords_destroy(c)); /* tensors still hold it */
    CHECK_OK(ctx, vc_tensor_get_info(t, &ti));
    CHECK(ti.count == 3);
    vc_tensor_destroy(t);
    vc_tensor_destroy(h);
    vc_tensor_destroy(b);
    vc_tensor_destroy(z);
    vc_tensor_destroy(wt);
    vc_tensor_destroy(NULL);
    vc_coords_destroy(empty);
    vc_coords_destroy(NULL);
    CHECK_OK(ctx, vc_context_destroy(ctx));
}

static void test_kmap_cache(void)
{
    vc_context *ctx = cpu_context();
    const int32_t shape[3] = {8, 8, 8};
    int32_t rows[6][4] = {{0, 0, 0, 0}, {0, 0, 0, 1}, {0, 1, 1, 1},
                          {0, 7, 7, 7}, {1, 3, 3, 3}, {1, 3, 4, 3}};
    vc_coords *c = NULL;
    CHECK_OK(ctx, vc_coords_create(ctx, &rows[0][0], 6, VC_MEMORY_HOST, shape, 2, &c));
    vc_map_desc d = VC_MAP_DESC_INIT;
    vc_kmap *m1 = NULL, *m2 = NULL, *s1 = NULL, *s2 = NULL, *inv = NULL;
    CHECK_OK(ctx, vc_kmap_build(ctx, c, &d, &m1));
    CHECK_OK(ctx, vc_kmap_build(ctx, c, &d, &m2));
    CHECK(m1 == m2 && m1 != NULL); /* built once, shared */
    vc_kmap_info info;
    CHECK_OK(ctx, vc_kmap_get_info(m1, &info));
    CHECK(info.volume == 27 && info.in_count == 6 && info.out_count == 6 &&
          info.in_coords == c && info.out_coords == c && info.mask_words == 1);
    /* 6 self pairs + (0,1) both ways + (1,2) both ways + (0,2) both ways + (4,5) both ways */
    CHECK(info.pair_count == 6 + 2 * 4);
    const int32_t *out_in = NULL;
    CHECK_OK(ctx, vc_kmap_out_in(m1, &out_in));
    CHECK(out_in[0 * 27 + 13] == 0 && out_in[0 * 27 + 14] == 1 && out_in[0 * 27 + 26] == 2);
    CHECK(out_in[3 * 27 + 13] == 3 && out_in[3 * 27 + 0] == -1);

    d.type = VC_MAP_STRIDED;
    d.stride[0] = d.stride[1] = d.stride[2] = 2;
    d.padding[0] = d.padding[1] = d.padding[2] = 1;
    CHECK_OK(ctx, vc_kmap_build(ctx, c, &d, &s1));
    CHECK(s1 != m1);
    CHECK_OK(ctx, vc_kmap_get_info(s1, &info));
    CHECK(info.out_coords != c && info.out_count > 0);
    vc_coords *down = info.out_coords;
    vc_coords_info di;
    CHECK_OK(ctx, vc_coords_get_info(down, &di));
    CHECK(di.spatial_shape[0] == 4 && di.batch_size == 2);
    /* the inverse: input must be the strided output */
    vc_map_desc id = VC_MAP_DESC_INIT;
    id.type = VC_MAP_INVERSE;
    id.inverse_of = s1;
    vc_kmap *junk = (vc_kmap *)0x1;
    CHECK_STATUS(ctx, vc_kmap_build(ctx, c, &id, &junk), VC_ERR_SHAPE_MISMATCH);
    CHECK(junk == (vc_kmap *)0x1);
    CHECK_OK(ctx, vc_kmap_build(ctx, down, &id, &inv));
    CHECK_OK(ctx, vc_kmap_get_info(inv, &info));
    CHECK(info.out_coords == c && info.in_coords == down && info.type == VC_MAP_INVERSE);
    id.inverse_of = m1; /* subm maps have no inverse */
    CHECK_STATUS(ctx, vc_kmap_build(ctx, c, &id, &junk), VC_ERR_INVALID_ARGUMENT);
    id.inverse_of = NULL;
    CHECK_STATUS(ctx, vc_kmap_build(ctx, c, &id, &junk), VC_ERR_INVALID_ARGUMENT);

    /* the user references keep maps alive after the set's creator lets go */
    CHECK_OK(ctx, vc_coords_destroy(c));
    CHECK_OK(ctx, vc_kmap_get_info(inv, &info));
    CHECK(info.out_count == 6);
    id.inverse_of = s1;
    CHECK_OK(ctx, vc_kmap_build(ctx, down, &id, &s2));
    CHECK(s2 == inv); /* the inverse is built once too */
    vc_kmap_destroy(s2);
    vc_kmap_destroy(m1);
    vc_kmap_destroy(m2);
    vc_kmap_destroy(inv);
    CHECK_OK(ctx, vc_kmap_get_info(s1, &info)); /* still held */
    vc_kmap_destroy(s1);
    vc_kmap_destroy(NULL);
    CHECK_OK(ctx, vc_context_destroy(ctx)); /* everything was freed */

    /* duplicates are detected when a map is built */
    ctx = cpu_context();
    int32_t dup[3][4] = {{0, 1, 1, 1}, {0, 2, 2, 2}, {0, 1, 1, 1}};
    CHECK_OK(ctx, vc_coords_create(ctx, &dup[0][0], 3, VC_MEMORY_HOST, shape, 1, &c));
    d = (vc_map_desc)VC_MAP_DESC_INIT;
    CHECK_STATUS(ctx, vc_kmap_build(ctx, c, &d, &junk), VC_ERR_DUPLICATE);
    CHECK(junk == (vc_kmap *)0x1);
    d.kernel[0] = 2; /* even subm kernel */
    CHECK_STATUS(ctx, vc_kmap_build(ctx, c, &d, &junk), VC_ERR_INVALID_ARGUMENT);
    d = (vc_map_desc)VC_MAP_DESC_INIT;
    d.struct_size = 3;
    CHECK_STATUS(ctx, vc_kmap_build(ctx, c, &d, &junk), VC_ERR_INVALID_ARGUMENT);
    vc_coords_destroy(c);
    CHECK_OK(ctx, vc_context_destroy(ctx));
}

static void test_conv_bad_input(void)
{
    vc_context *ctx = cpu_context();
    const int32_t shape[3] = {4, 4, 4};
    int32_t rows[2][4] = {{0, 1, 1, 1}, {0, 1, 1, 2}};
    float feats[2][3] = {{1, 2, 3}, {4, 5, 6}};
    float w[2 * 27 * 3];
    for (int i = 0; i < 2 * 27 * 3; i++) w[i] = 0.01f * (float)(i % 17) - 0.05f;
    vc_coords *c = NULL;
    vc_tensor *x = NULL, *y = NULL, *other = NULL;
    CHECK_OK(ctx, vc_coords_create(ctx, &rows[0][0], 2, VC_MEMORY_HOST, shape, 1, &c));
    CHECK_OK(ctx, vc_tensor_create(ctx, c, 3, VC_DTYPE_FP32, feats, VC_MEMORY_HOST, &x));
    vc_conv_desc d = VC_CONV_DESC_INIT;
    d.out_channels = 2;
    d.weights = w;
    float wcopy[2 * 27 * 3];
    memcpy(wcopy, w, sizeof w);
    vc_tensor *keep = (vc_tensor *)0x1;
    d.in_channels = 4;
    CHECK_STATUS(ctx, vc_conv_forward(ctx, &d, x, &keep), VC_ERR_SHAPE_MISMATCH);
    d.in_channels = 3;
    d.weights = NULL;
    CHECK_STATUS(ctx, vc_conv_forward(ctx, &d, x, &keep), VC_ERR_INVALID_ARGUMENT);
    d.weights = w;
    d.out_channels = 0;
    CHECK_STATUS(ctx, vc_conv_forward(ctx, &d, x, &keep), VC_ERR_INVALID_ARGUMENT);
    d.out_channels = 2;
    d.weight_dtype = VC_DTYPE_INT32;
    CHECK_STATUS(ctx, vc_conv_forward(ctx, &d, x, &keep), VC_ERR_INVALID_ARGUMENT);
    d.weight_dtype = VC_DTYPE_FP32;
    d.activation = (vc_activation)9;
    CHECK_STATUS(ctx, vc_conv_forward(ctx, &d, x, &keep), VC_ERR_INVALID_ARGUMENT);
    d.activation = VC_ACT_RELU;
    CHECK_OK(ctx, vc_tensor_create(ctx, c, 3, VC_DTYPE_FP32, NULL, VC_MEMORY_HOST, &other));
    d.residual = other; /* 3 channels, conv makes 2 */
    CHECK_STATUS(ctx, vc_conv_forward(ctx, &d, x, &keep), VC_ERR_SHAPE_MISMATCH);
    d.residual = NULL;
    d.map.kernel[1] = 9;
    CHECK_STATUS(ctx, vc_conv_forward(ctx, &d, x, &keep), VC_ERR_INVALID_ARGUMENT);
    d.map.kernel[1] = 3;
    CHECK(keep == (vc_tensor *)0x1);
    CHECK(memcmp(w, wcopy, sizeof w) == 0);
    CHECK(feats[1][2] == 6);
    CHECK_OK(ctx, vc_conv_forward(ctx, &d, x, &y));
    float out[2][2];
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, y, out, VC_DTYPE_FP32, VC_MEMORY_HOST));
    /* row 0 at (1,1,1) sees itself (k=13) and row 1 at dx=+1 (k=14) */
    for (int co = 0; co < 2; co++) {
        double ref0 = 0, ref1 = 0;
        for (int ci = 0; ci < 3; ci++) {
            ref0 += (double)w[(co * 27 + 13) * 3 + ci] * feats[0][ci] +
                    (double)w[(co * 27 + 14) * 3 + ci] * feats[1][ci];
            ref1 += (double)w[(co * 27 + 13) * 3 + ci] * feats[1][ci] +
                    (double)w[(co * 27 + 12) * 3 + ci] * feats[0][ci];
        }
        ref0 = ref0 > 0 ? ref0 : 0;
        ref1 = ref1 > 0 ? ref1 : 0;
        CHECK_MSG(fabs(out[0][co] - ref0) < 1e-6 && fabs(out[1][co] - ref1) < 1e-6,
                  "co %d: %g vs %g, %g vs %g", co, out[0][co], ref0, out[1][co], ref1);
    }
    vc_tensor_destroy(y);
    vc_tensor_destroy(other);
    vc_tensor_destroy(x);
    vc_coords_destroy(c);
    CHECK_OK(ctx, vc_context_destroy(ctx));
}

/* The caller's allocator receives every allocation of the context and gets all of it back. */
static int64_t g_live, g_total;
static void *count_alloc(void *user, size_t bytes, vc_memory where, struct CUstream_st *s)
{
    (void)user; (void)where; (void)s;
    g_live++;
    g_total++;
    return malloc(bytes);
}
static void count_free(void *user, void *p, vc_memory where, struct CUstream_st *s)
{
    (void)user; (void)where; (void)s;
    if (p) g_live--;
    free(p);
}

static void test_allocator(void)
{
    vc_allocator a = {count_alloc, count_free, NULL};
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = VC_BACKEND_CPU;
    d.allocator = &a;
    vc_context *ctx = NULL;
    CHECK(vc_context_create(&d, &ctx) == VC_OK);
    const int32_t shape[3] = {5, 5, 5};
    int32_t rows[2][4] = {{0, 1, 1, 1}, {0, 3, 3, 3}};
    vc_coords *c = NULL;
    vc_tensor *t = NULL;
    vc_kmap *m = NULL;
    CHECK_OK(ctx, vc_coords_create(ctx, &rows[0][0], 2, VC_MEMORY_HOST, shape, 1, &c));
    CHECK_OK(ctx, vc_tensor_create(ctx, c, 2, VC_DTYPE_FP32, NULL, VC_MEMORY_HOST, &t));
    vc_map_desc md = VC_MAP_DESC_INIT;
    md.type = VC_MAP_STRIDED;
    md.stride[0] = md.stride[1] = md.stride[2] = 2;
    CHECK_OK(ctx, vc_kmap_build(ctx, c, &md, &m));
    CHECK(g_total >= 3 && g_live >= 3);
    vc_kmap_destroy(m);
    vc_tensor_destroy(t);
    vc_coords_destroy(c);
    CHECK(g_live == 0);
    CHECK_OK(ctx, vc_context_destroy(ctx));
}

/* An allocator that fails from the n-th allocation on: every call must then either succeed or
 * return VC_ERR_OUT_OF_MEMORY, leave *out as it was, and give back all it took. */
static int64_t g_fail_at, g_calls, g_held;
static void *failing_alloc(void *user, size_t bytes, vc_memory where, struct CUstream_st *s)
{
    (void)user; (void)where; (void)s;
    if (g_calls++ >= g_fail_at) return NULL;
    g_held++;
    return malloc(bytes);
}
static void failing_free(void *user, void *p, vc_memory where, struct CUstream_st *s)
{
    (void)user; (void)where; (void)s;
    if (p) g_held--;
    free(p);
}

static void test_allocation_failure(void)
{
    const int32_t shape[3] = {6, 6, 6};
    int32_t rows[5][4] = {{0, 1, 1, 1}, {0, 1, 1, 2}, {0, 2, 2, 2}, {1, 5, 5, 5}, {1, 0, 0, 0}};
    float feats[5][2] = {{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}};
    float w[3 * 27 * 2];
    for (int i = 0; i < 3 * 27 * 2; i++) w[i] = 0.03f * (float)(i % 11) - 0.1f;
    int completed = 0, failures = 0;
    for (g_fail_at = 0; g_fail_at < 40 && !completed; g_fail_at++) {
        g_calls = 0;
        g_held = 0;
        vc_allocator a = {failing_alloc, failing_free, NULL};
        vc_context_desc d = VC_CONTEXT_DESC_INIT;
        d.backend = VC_BACKEND_CPU;
        d.allocator = &a;
        vc_context *ctx = NULL;
        if (vc_context_create(&d, &ctx) != VC_OK) continue;
        vc_coords *c = (vc_coords *)0x1;
        vc_tensor *x = (vc_tensor *)0x1, *y = (vc_tensor *)0x1, *z = (vc_tensor *)0x1;
        vc_status s = vc_coords_create(ctx, &rows[0][0], 5, VC_MEMORY_HOST, shape, 2, &c);
        int ok = s == VC_OK;
        CHECK(ok || (s == VC_ERR_OUT_OF_MEMORY && c == (vc_coords *)0x1));
        if (ok) {
            s = vc_tensor_create(ctx, c, 2, VC_DTYPE_FP32, feats, VC_MEMORY_HOST, &x);
            ok = s == VC_OK;
            CHECK(ok || (s == VC_ERR_OUT_OF_MEMORY && x == (vc_tensor *)0x1));
        }
        vc_conv_desc cd = VC_CONV_DESC_INIT;
        cd.map.type = VC_MAP_STRIDED;
        for (int i = 0; i < 3; i++) { cd.map.stride[i] = 2; cd.map.padding[i] = 1; }
        cd.out_channels = 3;
        cd.weights = w;
        if (ok) {
            s = vc_conv_forward(ctx, &cd, x, &y); /* allocates the output set and tensor */
            ok = s == VC_OK;
            CHECK(ok || (s == VC_ERR_OUT_OF_MEMORY && y == (vc_tensor *)0x1));
        }
        if (ok) {
            vc_pool_desc pd = VC_POOL_DESC_INIT;
            s = vc_pool_forward(ctx, &pd, y, &z);
            ok = s == VC_OK;
            CHECK(ok || (s == VC_ERR_OUT_OF_MEMORY && z == (vc_tensor *)0x1));
        }
        if (!ok) {
            failures++;
            CHECK(strlen(vc_context_last_error(ctx)) > 0);
        }
        completed = ok;
        CHECK(feats[4][1] == 10 && rows[3][3] == 5); /* caller data untouched */
        if (z != (vc_tensor *)0x1) vc_tensor_destroy(z);
        if (y != (vc_tensor *)0x1) vc_tensor_destroy(y);
        if (x != (vc_tensor *)0x1) vc_tensor_destroy(x);
        if (c != (vc_coords *)0x1) vc_coords_destroy(c);
        CHECK_MSG(g_held == 0, "fail at %lld: %lld allocations not returned",
                  (long long)g_fail_at, (long long)g_held);
        CHECK_OK(ctx, vc_context_destroy(ctx));
    }
    CHECK(completed && failures >= 4); /* every allocation point was hit once */
}

/* Bounded maps are device maps: a CPU context refuses them with a message, bad descriptors
 * and NULL handles are argument errors, and nothing is left alive. */
/* Non-finite input is a choice: features by vc_tensor_check_finite's policy, host weights and
 * bias always refused with a message that names the element. */
static void test_nonfinite(void)
{
    vc_context *ctx = cpu_context();
    const int32_t shape[3] = {4, 4, 4};
    int32_t rows[3][4] = {{0, 0, 0, 0}, {0, 1, 1, 1}, {0, 2, 1, 3}};
    float feats[3][2] = {{1, 2}, {NAN, 4}, {5, INFINITY}};
    vc_coords *c = NULL;
    vc_tensor *t = NULL, *y = NULL;
    CHECK_OK(ctx, vc_coords_create(ctx, &rows[0][0], 3, VC_MEMORY_HOST, shape, 1, &c));
    CHECK_OK(ctx, vc_tensor_create(ctx, c, 2, VC_DTYPE_FP32, feats, VC_MEMORY_HOST, &t));
    int64_t n = -1;
    CHECK_STATUS(ctx, vc_tensor_check_finite(ctx, t, VC_NONFINITE_REFUSE, &n),
                 VC_ERR_INVALID_ARGUMENT);
    CHECK(n == 2 && strstr(vc_context_last_error(ctx), "row 1, channel 0") != NULL);
    CHECK_STATUS(ctx, vc_tensor_check_finite(ctx, t, (vc_nonfinite_policy)7, &n),
                 VC_ERR_INVALID_ARGUMENT);
    n = -1;
    CHECK_OK(ctx, vc_tensor_check_finite(ctx, t, VC_NONFINITE_KEEP, &n));
    CHECK(n == 2);
    float back[3][2];
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, t, back, VC_DTYPE_FP32, VC_MEMORY_HOST));
    CHECK(isnan(back[1][0]) && isinf(back[2][1])); /* kept */
    CHECK_OK(ctx, vc_tensor_check_finite(ctx, t, VC_NONFINITE_ZERO, &n));
    CHECK(n == 2);
    CHECK_OK(ctx, vc_tensor_copy_out(ctx, t, back, VC_DTYPE_FP32, VC_MEMORY_HOST));
    CHECK(back[1][0] == 0.0f && back[2][1] == 0.0f && back[0][1] == 2.0f && back[2][0] == 5.0f);
    CHECK_OK(ctx, vc_tensor_check_finite(ctx, t, VC_NONFINITE_REFUSE, &n));
    CHECK(n == 0);

    float w[3 * 27 * 2], bias[3] = {0.5f, 0.25f, 0.125f};
    for (int i = 0; i < 3 * 27 * 2; i++) w[i] = 0.01f * (float)(i % 7);
    vc_conv_desc d = VC_CONV_DESC_INIT;
    d.out_channels = 3;
    d.weights = w;
    d.bias = bias;
    w[1 * 54 + 13 * 2 + 1] = NAN; /* out channel 1, offset 13, in channel 1 */
    CHECK_STATUS(ctx, vc_conv_forward(ctx, &d, t, &y), VC_ERR_INVALID_ARGUMENT);
    CHECK(y == NULL && strstr(vc_context_last_error(ctx), "weights[1, 13, 1]") != NULL);
    w[1 * 54 + 13 * 2 + 1] = 0.0f;
    bias[2] = -INFINITY;
    CHECK_STATUS(ctx, vc_conv_forward(ctx, &d, t, &y), VC_ERR_INVALID_ARGUMENT);
    CHECK(y == NULL && strstr(vc_context_last_error(ctx), "bias[2]") != NULL);
    bias[2] = 1.0f;
    CHECK_OK(ctx, vc_conv_forward(ctx, &d, t, &y));
    vc_tensor_destroy(y);
    vc_tensor_destroy(t);
    vc_coords_destroy(c);
    vc_context_destroy(ctx);
}

static void test_kmap_bounded_cpu(void)
{
    vc_context *ctx = cpu_context();
    vc_kmap_bounded_desc d = VC_KMAP_BOUNDED_DESC_INIT;
    d.shape[0] = d.shape[1] = d.shape[2] = 8;
    d.max_in = d.max_out = 64;
    d.max_pairs = 64 * 27;
    vc_kmap_bounded *b = (vc_kmap_bounded *)0x1;
    CHECK_STATUS(ctx, vc_kmap_bounded_create(ctx, &d, &b), VC_ERR_UNSUPPORTED);
    CHECK(b == (vc_kmap_bounded *)0x1);
    CHECK(strstr(vc_context_last_error(ctx), "CUDA") != NULL);
    CHECK_STATUS(ctx, vc_kmap_bounded_create(ctx, NULL, &b), VC_ERR_INVALID_ARGUMENT);
    d.struct_size = 3;
    CHECK_STATUS(ctx, vc_kmap_bounded_create(ctx, &d, &b), VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_kmap_bounded_create(NULL, &d, &b) == VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_kmap_bounded_build(NULL, NULL, 0) == VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_kmap_bounded_build_dev(NULL, NULL, NULL) == VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_kmap_bounded_check(NULL, NULL, NULL) == VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_kmap_bounded_arrays_get(NULL, NULL) == VC_ERR_INVALID_ARGUMENT);
    CHECK(vc_kmap_bounded_destroy(NULL) == VC_OK);
    CHECK_OK(ctx, vc_context_destroy(ctx));
}

int main(void)
{
    test_version_status();
    test_context();
    test_create_error_per_thread();
    test_coords_tensors();
    test_kmap_cache();
    test_kmap_bounded_cpu();
    test_conv_bad_input();
    test_allocator();
    test_allocation_failure();
    test_nonfinite();
    TEST_END();
}
