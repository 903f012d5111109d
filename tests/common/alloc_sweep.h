/* tests/common/alloc_sweep.h - the allocation-failure sweep that tests/unit/test_alloc_sweep.c
 * (CPU context) and tests/gpu/test_gpu_alloc.c (CUDA context) share: a counting allocator that
 * fails exactly its n-th request of one kind of memory, and a fixed sequence of operations that
 * reaches every engine stage: a voxelize, map builds of every type (SUBM, STRIDED, DOWNSAMPLE,
 * TRANSPOSED, INVERSE), convolutions over them, a pool and a global pool.
 * sweep_run() makes the allocator fail at n = 0, 1, ... until the sequence completes; for each n
 * the failing call must return VC_ERR_OUT_OF_MEMORY with a message, nothing may stay allocated
 * once the handles are gone, and the same context must then run the whole sequence with bits
 * identical to a reference made with the library's default memory. Header only (static). */
#ifndef VC_TESTS_ALLOC_SWEEP_H
#define VC_TESTS_ALLOC_SWEEP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "voxconv.h"

/* The counting allocator. Requests in `counted` memory are numbered from 0; request fail_at
 * (-1: none) returns NULL. Live blocks are counted per kind of memory. Device blocks come from
 * dev_alloc / dev_free (the GPU test's cudaMallocAsync / cudaFreeAsync); host blocks from
 * malloc. */
typedef struct sweep_alloc {
    vc_memory counted;
    int64_t fail_at, calls, failed;
    int64_t held[2]; /* [VC_MEMORY_HOST], [VC_MEMORY_DEVICE]: live blocks */
    void *(*dev_alloc)(size_t bytes, struct CUstream_st *stream);
    void (*dev_free)(void *p, struct CUstream_st *stream);
} sweep_alloc;

static void *sweep_alloc_fn(void *user, size_t bytes, vc_memory where, struct CUstream_st *s)
{
    sweep_alloc *a = (sweep_alloc *)user;
    if (where == a->counted) {
        if (a->calls++ == a->fail_at) {
            a->failed++;
            return NULL;
        }
    }
    void *p = where == VC_MEMORY_DEVICE ? (a->dev_alloc ? a->dev_alloc(bytes, s) : NULL)
                                        : malloc(bytes);
    if (p) a->held[where == VC_MEMORY_DEVICE]++;
    return p;
}

static void sweep_free_fn(void *user, void *p, vc_memory where, struct CUstream_st *s)
{
    sweep_alloc *a = (sweep_alloc *)user;
    if (!p) return;
    a->held[where == VC_MEMORY_DEVICE]--;
    if (where == VC_MEMORY_DEVICE) {
        if (a->dev_free) a->dev_free(p, s);
    } else {
        free(p);
    }
}

/* The stages of the sequence, in order. */
enum {
    SW_VOXELIZE, SW_CONV_SUBM, SW_CONV_STRIDED, SW_MAP_DOWNSAMPLE, SW_POOL, SW_CONV_INVERSE,
    SW_CONV_TRANSPOSED, SW_GLOBAL_POOL, SW_READ_BACK, SW_STAGES
};
static const char *const sweep_stage_name[SW_STAGES] = {
    "voxelize", "conv SUBM", "conv STRIDED", "map DOWNSAMPLE", "pool (DOWNSAMPLE map)",
    "conv INVERSE", "conv TRANSPOSED", "global pool", "read back"};

#define SW_POINTS 400
#define SW_CIN 4  /* point dim: x, y, z, intensity */
#define SW_C1 3
#define SW_C2 5
#define SW_MAX_ROWS SW_POINTS
#define SW_NOUT 5 /* tensors read back: conv SUBM, STRIDED, pool, INVERSE, TRANSPOSED */

typedef struct sweep_input {
    float pts[SW_POINTS * SW_CIN];
    int32_t batch[SW_POINTS];
    float w1[SW_C1 * 27 * SW_CIN];  /* SUBM k3, C_in 4 -> 3           */
    float w2[SW_C2 * 8 * SW_C1];    /* STRIDED k2 s2, 3 -> 5          */
    float w3[SW_C1 * 8 * SW_C2];    /* INVERSE of it, 5 -> 3          */
    float w4[SW_C1 * 8 * SW_C2];    /* TRANSPOSED k2 s2, 5 -> 3       */
} sweep_input;

/* What a complete run yields: every tensor's rows and features, and the global pool. */
typedef struct sweep_result {
    int64_t rows[SW_NOUT], channels[SW_NOUT];
    float feats[SW_NOUT][SW_MAX_ROWS * 8 * SW_C2];
    float global[2 * SW_C1];
    int64_t stage_calls[SW_STAGES]; /* counted allocation requests per stage */
} sweep_result;

static void sweep_make_input(sweep_input *in, uint64_t seed)
{
    uint64_t x = seed;
    for (int i = 0; i < SW_POINTS * SW_CIN; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        in->pts[i] = (float)((x >> 40) % 3200) / 1000.0f; /* [0, 3.2) metres */
    }
    for (int i = 0; i < SW_POINTS; i++) in->batch[i] = i % 3 == 0;
    float *ws[4] = {in->w1, in->w2, in->w3, in->w4};
    int n[4] = {SW_C1 * 27 * SW_CIN, SW_C2 * 8 * SW_C1, SW_C1 * 8 * SW_C2, SW_C1 * 8 * SW_C2};
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < n[k]; i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            ws[k][i] = (float)((int)((x >> 40) % 2001) - 1000) / 4000.0f;
        }
}

/* Runs the sequence on ctx. Returns VC_OK, or the status of the first failing call with its
 * stage in *stage. Every handle it made is destroyed before it returns. `a` (may be NULL) gives
 * the per-stage request counts into r->stage_calls. */
static vc_status sweep_sequence(vc_context *ctx, const sweep_input *in, const sweep_alloc *a,
                                sweep_result *r, int *stage)
{
    vc_tensor *t[8] = {0};
    vc_kmap *strided = NULL, *down = NULL;
    vc_status s = VC_OK;
    int st = 0;
    int64_t before = a ? a->calls : 0;
    memset(r->stage_calls, 0, sizeof r->stage_calls);
#define SW_STAGE(k, expr)                                                                      \
    do {                                                                                       \
        st = (k);                                                                              \
        before = a ? a->calls : 0;                                                             \
        s = (expr);                                                                            \
        if (a) r->stage_calls[k] += a->calls - before;                                         \
        if (s != VC_OK) goto done;                                                             \
    } while (0)

    vc_voxelize_desc vd = VC_VOXELIZE_DESC_INIT;
    for (int i = 0; i < 3; i++) {
        vd.voxel_size[i] = 0.2f;
        vd.range[i + 3] = 3.2f;
    }
    vc_points p = {in->pts, SW_POINTS, SW_CIN, in->batch, VC_MEMORY_HOST};
    SW_STAGE(SW_VOXELIZE, vc_voxelize(ctx, &vd, &p, &t[0], NULL));

    vc_conv_desc c1 = VC_CONV_DESC_INIT;
    c1.out_channels = SW_C1;
    c1.weights = in->w1;
    SW_STAGE(SW_CONV_SUBM, vc_conv_forward(ctx, &c1, t[0], &t[1]));

    vc_conv_desc c2 = VC_CONV_DESC_INIT;
    c2.map.type = VC_MAP_STRIDED;
    for (int i = 0; i < 3; i++) {
        c2.map.kernel[i] = 2;
        c2.map.stride[i] = 2;
    }
    c2.out_channels = SW_C2;
    c2.weights = in->w2;
    SW_STAGE(SW_CONV_STRIDED, vc_conv_forward(ctx, &c2, t[1], &t[2]));

    vc_tensor_info i1;
    SW_STAGE(SW_MAP_DOWNSAMPLE, vc_tensor_get_info(t[1], &i1));
    vc_map_desc md = c2.map;
    md.type = VC_MAP_DOWNSAMPLE;
    SW_STAGE(SW_MAP_DOWNSAMPLE, vc_kmap_build(ctx, i1.coords, &md, &down));
    vc_pool_desc pd = VC_POOL_DESC_INIT;
    pd.kmap = down;
    pd.mode = VC_POOL_AVG;
    SW_STAGE(SW_POOL, vc_pool_forward(ctx, &pd, t[1], &t[3]));

    /* The STRIDED map of the conv above (cached: no allocation), inverted. */
    SW_STAGE(SW_CONV_INVERSE, vc_kmap_build(ctx, i1.coords, &c2.map, &strided));
    vc_conv_desc c3 = VC_CONV_DESC_INIT;
    c3.map = c2.map;
    c3.map.type = VC_MAP_INVERSE;
    c3.map.inverse_of = strided;
    c3.out_channels = SW_C1;
    c3.weights = in->w3;
    SW_STAGE(SW_CONV_INVERSE, vc_conv_forward(ctx, &c3, t[2], &t[4]));

    vc_conv_desc c4 = VC_CONV_DESC_INIT;
    c4.map = c2.map;
    c4.map.type = VC_MAP_TRANSPOSED;
    c4.out_channels = SW_C1;
    c4.weights = in->w4;
    SW_STAGE(SW_CONV_TRANSPOSED, vc_conv_forward(ctx, &c4, t[2], &t[5]));

    SW_STAGE(SW_GLOBAL_POOL, vc_global_pool(ctx, VC_POOL_AVG, t[4], r->global, VC_MEMORY_HOST));

    const int outs[SW_NOUT] = {1, 2, 3, 4, 5};
    for (int k = 0; k < SW_NOUT; k++) {
        vc_tensor_info ti;
        SW_STAGE(SW_READ_BACK, vc_tensor_get_info(t[outs[k]], &ti));
        r->rows[k] = ti.count;
        r->channels[k] = ti.channels;
        if (ti.count * ti.channels > (int64_t)(sizeof r->feats[k] / sizeof(float))) {
            s = VC_ERR_INTERNAL; /* the test's buffers are too small: say so below */
            fprintf(stderr, "sweep: tensor %d has %lld x %lld features, over the test's buffer\n",
                    k, (long long)ti.count, (long long)ti.channels);
            goto done;
        }
        SW_STAGE(SW_READ_BACK, vc_tensor_copy_out(ctx, t[outs[k]], r->feats[k], VC_DTYPE_FP32,
                                                  VC_MEMORY_HOST));
    }
#undef SW_STAGE
done:
    *stage = st;
    for (int k = 7; k >= 0; k--)
        if (t[k]) vc_tensor_destroy(t[k]);
    if (strided) vc_kmap_destroy(strided);
    if (down) vc_kmap_destroy(down);
    return s;
}

/* Bitwise comparison of two complete runs; prints the first difference. */
static int sweep_same(const sweep_result *x, const sweep_result *ref, const char *what)
{
    for (int k = 0; k < SW_NOUT; k++) {
        if (x->rows[k] != ref->rows[k] || x->channels[k] != ref->channels[k]) {
            fprintf(stderr, "%s: tensor %d is %lld x %lld, the reference %lld x %lld\n", what, k,
                    (long long)x->rows[k], (long long)x->channels[k], (long long)ref->rows[k],
                    (long long)ref->channels[k]);
            return 0;
        }
        const size_t n = (size_t)(x->rows[k] * x->channels[k]) * sizeof(float);
        if (memcmp(x->feats[k], ref->feats[k], n) != 0) {
            fprintf(stderr, "%s: the features of tensor %d differ from the reference\n", what,
                    k);
            return 0;
        }
    }
    if (memcmp(x->global, ref->global, sizeof x->global) != 0) {
        fprintf(stderr, "%s: the global pool differs from the reference\n", what);
        return 0;
    }
    return 1;
}

/* The sweep on a context of `backend` with allocator `a` (its counted kind and device
 * functions set). min_calls[k]: the fewest counted requests stage k must make (the sweep then
 * provably failed an allocation inside it). Returns the number of allocation points swept. */
static int64_t sweep_run(vc_backend backend, sweep_alloc *a, const int64_t min_calls[SW_STAGES],
                         int64_t cap)
{
    sweep_input *in = malloc(sizeof *in);
    sweep_result *ref = malloc(sizeof *ref), *got = malloc(sizeof *got);
    CHECK(in && ref && got);
    if (!in || !ref || !got) {
        free(in);
        free(ref);
        free(got);
        return 0;
    }
    const uint64_t seed = 27;
    printf("alloc sweep: seed %llu\n", (unsigned long long)seed);
    sweep_make_input(in, seed);

    /* The reference: the library's default memory. */
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = backend;
    vc_context *ctx = NULL;
    int stage = 0;
    CHECK_MSG(vc_context_create(&d, &ctx) == VC_OK, "reference context: %s",
              vc_context_last_error(NULL));
    vc_status s = ctx ? sweep_sequence(ctx, in, NULL, ref, &stage) : VC_ERR_INTERNAL;
    CHECK_MSG(s == VC_OK, "reference run failed at stage '%s': %s", sweep_stage_name[stage],
              ctx ? vc_context_last_error(ctx) : "no context");
    if (ctx) CHECK_OK(ctx, vc_context_destroy(ctx));

    vc_allocator al = {sweep_alloc_fn, sweep_free_fn, a};
    d.allocator = &al;
    a->fail_at = -1;
    a->calls = a->failed = a->held[0] = a->held[1] = 0;
    ctx = NULL;
    CHECK_MSG(vc_context_create(&d, &ctx) == VC_OK, "allocator context: %s",
              vc_context_last_error(NULL));
    int64_t total = -1;
    if (ctx) {
        /* One full run counts the allocation points, per stage. */
        s = sweep_sequence(ctx, in, a, got, &stage);
        CHECK_MSG(s == VC_OK, "counting run failed at stage '%s': %s",
                  sweep_stage_name[stage], vc_context_last_error(ctx));
        CHECK_MSG(sweep_same(got, ref, "counting run"),
                  "a run through the caller's allocator differs from the default memory's");
        total = a->calls;
        printf("alloc sweep: %lld counted allocation requests:", (long long)total);
        for (int k = 0; k < SW_STAGES; k++) {
            printf(" %s %lld%s", sweep_stage_name[k], (long long)got->stage_calls[k],
                   k + 1 < SW_STAGES ? "," : "\n");
            CHECK_MSG(got->stage_calls[k] >= min_calls[k],
                      "stage '%s' made %lld counted allocation requests, expected at least "
                      "%lld: its memory does not come from the context's allocator",
                      sweep_stage_name[k], (long long)got->stage_calls[k],
                      (long long)min_calls[k]);
        }
        CHECK_MSG(a->held[0] == 0 && a->held[1] == 0,
                  "after the counting run %lld host and %lld device blocks are still held",
                  (long long)a->held[0], (long long)a->held[1]);
    }
    int completed = 0;
    int64_t n = 0;
    for (; ctx && n <= cap && !completed; n++) {
        a->fail_at = n;
        a->calls = a->failed = 0;
        s = sweep_sequence(ctx, in, a, got, &stage);
        const char *msg = vc_context_last_error(ctx);
        if (s == VC_OK) {
            completed = 1;
            CHECK_MSG(a->failed == 0 && n >= total,
                      "fail at %lld: the sequence completed although request %lld failed "
                      "(%lld failures seen): a failed allocation went unnoticed",
                      (long long)n, (long long)n, (long long)a->failed);
            CHECK_MSG(sweep_same(got, ref, "completed sweep run"),
                      "fail at %lld: results differ", (long long)n);
        } else {
            CHECK_MSG(s == VC_ERR_OUT_OF_MEMORY,
                      "fail at %lld (stage '%s'): status %s, expected VC_ERR_OUT_OF_MEMORY; "
                      "message: %s", (long long)n, sweep_stage_name[stage], vc_status_string(s),
                      msg);
            CHECK_MSG(msg && msg[0],
                      "fail at %lld (stage '%s'): VC_ERR_OUT_OF_MEMORY without a message",
                      (long long)n, sweep_stage_name[stage]);
            CHECK_MSG(a->failed == 1, "fail at %lld (stage '%s'): the allocator failed %lld "
                      "requests, expected 1", (long long)n, sweep_stage_name[stage],
                      (long long)a->failed);
        }
        CHECK_MSG(a->held[0] == 0 && a->held[1] == 0,
                  "fail at %lld (stage '%s'): %lld host and %lld device blocks still held after "
                  "every handle was destroyed (a leak on the failure path)", (long long)n,
                  sweep_stage_name[stage], (long long)a->held[0], (long long)a->held[1]);
        /* The same context goes on working. */
        a->fail_at = -1;
        s = sweep_sequence(ctx, in, a, got, &stage);
        CHECK_MSG(s == VC_OK, "fail at %lld: the context did not recover: stage '%s' failed "
                  "with %s: %s", (long long)n, sweep_stage_name[stage], vc_status_string(s),
                  vc_context_last_error(ctx));
        if (s == VC_OK)
            CHECK_MSG(sweep_same(got, ref, "recovery run"),
                      "fail at %lld: the recovery run's results differ from the reference",
                      (long long)n);
        CHECK_MSG(a->held[0] == 0 && a->held[1] == 0,
                  "fail at %lld: %lld host and %lld device blocks held after the recovery run",
                  (long long)n, (long long)a->held[0], (long long)a->held[1]);
    }
    CHECK_MSG(completed, "the sequence never completed within %lld failure points (%lld "
              "counted requests in a full run)", (long long)cap, (long long)total);
    CHECK_MSG(!completed || n - 1 == total,
              "the sweep completed at fail point %lld but a full run makes %lld requests",
              (long long)(n - 1), (long long)total);
    printf("alloc sweep: %lld failure points swept\n", (long long)(n - 1));
    if (ctx) CHECK_OK(ctx, vc_context_destroy(ctx));
    free(in);
    free(ref);
    free(got);
    return n - 1;
}

#endif
