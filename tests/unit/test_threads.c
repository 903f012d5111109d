/* tests/unit/test_threads.c - distinct contexts on distinct threads never interfere. Four CPU
 * contexts, each with its own thread count, engine options and counting allocator, run the same
 * network (subm, strided, downsample convolutions, map reuse, pooling, global pooling, casts) at
 * once, over and over, interleaved with failing vc_context_create calls; every result must be
 * bit-identical to a reference computed alone, every failed create must leave that thread's own
 * message, and each allocator must see only its own context's traffic. CI runs it under
 * ThreadSanitizer too (./run.sh tsan). */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "voxconv.h"

#if defined(__APPLE__) || \
    (defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34)))
#include <pthread.h> /* in the C library itself: no -pthread needed to link */

#include "src/internal.h"

enum { kThreads = 4, kRounds = 6, kGrid = 24, kRows = 1500, kC0 = 5, kC1 = 8, kC2 = 12 };

typedef struct scene {
    int32_t coords[kRows * 4];
    float feats[kRows * kC0];
    float w1[kC1 * 27 * kC0], w2[kC2 * 27 * kC1], w3[kC2 * 8 * kC2];
    float bias[kC2];
} scene;

/* The network's outputs, as host bytes. */
typedef struct result {
    int64_t n1, n2;
    float *f1;                /* strided output [n1, kC2]                                     */
    float *f2;                /* downsample output [n2, kC2]                                  */
    int32_t *c2;              /* its coordinates [n2, 4]                                      */
    float *pooled;            /* max pool of f1 over a k2 s2 downsample map [n?, kC2] as fp32 */
    int64_t np;
    float global[2 * kC2];    /* global avg per batch item                                    */
    uint16_t *half;           /* f2 cast to bf16                                               */
} result;

static void free_result(result *r)
{
    free(r->f1);
    free(r->f2);
    free(r->c2);
    free(r->pooled);
    free(r->half);
    memset(r, 0, sizeof *r);
}

typedef struct counting {
    int64_t allocs, frees;
} counting;

static void *count_alloc(void *user, size_t bytes, vc_memory where, struct CUstream_st *s)
{
    counting *c = user;
    c->allocs++;
    return where == VC_MEMORY_HOST ? malloc(bytes ? bytes : 1) : NULL;
}

static void count_free(void *user, void *p, vc_memory where, struct CUstream_st *s)
{
    counting *c = user;
    if (p) c->frees++;
    free(p);
}

static void make_scene(scene *s, vc_rng *rng)
{
    unsigned char *taken = calloc((size_t)2 * kGrid * kGrid * kGrid, 1);
    for (int64_t n = 0; n < kRows;) {
        const int64_t b = vc_rng_int(rng, 2), z = vc_rng_int(rng, kGrid),
                      y = vc_rng_int(rng, kGrid), x = vc_rng_int(rng, kGrid);
        const int64_t cell = ((b * kGrid + z) * kGrid + y) * kGrid + x;
        if (taken[cell]) continue;
        taken[cell] = 1;
        int32_t *r = s->coords + n * 4;
        r[0] = (int32_t)b, r[1] = (int32_t)z, r[2] = (int32_t)y, r[3] = (int32_t)x;
        n++;
    }
    free(taken);
    for (int i = 0; i < kRows * kC0; i++) s->feats[i] = vc_rng_float(rng);
    for (size_t i = 0; i < sizeof s->w1 / 4; i++) s->w1[i] = vc_rng_float(rng) * 0.3f;
    for (size_t i = 0; i < sizeof s->w2 / 4; i++) s->w2[i] = vc_rng_float(rng) * 0.3f;
    for (size_t i = 0; i < sizeof s->w3 / 4; i++) s->w3[i] = vc_rng_float(rng) * 0.3f;
    for (int i = 0; i < kC2; i++) s->bias[i] = vc_rng_float(rng);
}

static vc_status conv(vc_context *ctx, const vc_tensor *x, vc_map_type type, int k, int s,
                      int p, int64_t cout, const float *w, const float *bias, vc_tensor **y)
{
    vc_conv_desc d = VC_CONV_DESC_INIT;
    d.map.type = type;
    for (int a = 0; a < 3; a++)
        d.map.kernel[a] = k, d.map.stride[a] = s, d.map.padding[a] = p;
    d.out_channels = cout;
    d.weights = w;
    d.bias = bias;
    d.activation = VC_ACT_LEAKY_RELU;
    return vc_conv_forward(ctx, &d, x, y);
}

static float *host_feats(vc_context *ctx, const vc_tensor *t, int64_t *n)
{
    vc_tensor_info ti;
    if (vc_tensor_get_info(t, &ti) != VC_OK) return NULL;
    *n = ti.count;
    float *f = malloc((size_t)(ti.count * ti.channels + 1) * 4);
    if (vc_tensor_copy_out(ctx, t, f, VC_DTYPE_FP32, VC_MEMORY_HOST) != VC_OK) {
        free(f);
        return NULL;
    }
    return f;
}

/* Runs the network on ctx; VC_OK and *r filled, or the first failing status. */
static vc_status run_net(vc_context *ctx, const scene *s, result *r)
{
    const int32_t shape[3] = {kGrid, kGrid, kGrid};
    vc_coords *c = NULL;
    vc_tensor *x = NULL, *a = NULL, *b = NULL, *d = NULL, *pl = NULL, *h = NULL;
    memset(r, 0, sizeof *r);
    vc_status st = vc_coords_create(ctx, s->coords, kRows, VC_MEMORY_HOST, shape, 2, &c);
    if (!st) st = vc_tensor_create(ctx, c, kC0, VC_DTYPE_FP32, s->feats, VC_MEMORY_HOST, &x);
    if (!st) st = conv(ctx, x, VC_MAP_SUBM, 3, 1, 0, kC1, s->w1, NULL, &a);
    if (!st) st = conv(ctx, a, VC_MAP_STRIDED, 3, 2, 1, kC2, s->w2, s->bias, &b);
    if (!st) st = conv(ctx, b, VC_MAP_DOWNSAMPLE, 2, 2, 0, kC2, s->w3, NULL, &d);
    if (!st) {
        vc_pool_desc pd = VC_POOL_DESC_INIT;
        pd.map.type = VC_MAP_DOWNSAMPLE;
        for (int k = 0; k < 3; k++) pd.map.kernel[k] = 2, pd.map.stride[k] = 2;
        st = vc_pool_forward(ctx, &pd, b, &pl); /* the downsample map again, from the cache */
    }
    if (!st) st = vc_global_pool(ctx, VC_POOL_AVG, b, r->global, VC_MEMORY_HOST);
    if (!st) st = vc_tensor_cast(ctx, d, VC_DTYPE_BF16, &h);
    if (!st) {
        r->f1 = host_feats(ctx, b, &r->n1);
        r->f2 = host_feats(ctx, d, &r->n2);
        r->pooled = host_feats(ctx, pl, &r->np);
        r->half = malloc((size_t)(r->n2 * kC2 + 1) * 2);
        r->c2 = malloc((size_t)(r->n2 + 1) * 16);
        vc_tensor_info ti;
        vc_tensor_get_info(d, &ti);
        if (!r->f1 || !r->f2 || !r->pooled ||
            vc_tensor_copy_out(ctx, h, r->half, VC_DTYPE_BF16, VC_MEMORY_HOST) != VC_OK ||
            vc_coords_copy_out(ctx, ti.coords, r->c2, VC_MEMORY_HOST) != VC_OK)
            st = VC_ERR_INTERNAL;
    }
    vc_tensor_destroy(h);
    vc_tensor_destroy(pl);
    vc_tensor_destroy(d);
    vc_tensor_destroy(b);
    vc_tensor_destroy(a);
    vc_tensor_destroy(x);
    vc_coords_destroy(c);
    return st;
}

static int same_result(const result *a, const result *b)
{
    return a->n1 == b->n1 && a->n2 == b->n2 && a->np == b->np &&
           !memcmp(a->f1, b->f1, (size_t)a->n1 * kC2 * 4) &&
           !memcmp(a->f2, b->f2, (size_t)a->n2 * kC2 * 4) &&
           !memcmp(a->c2, b->c2, (size_t)a->n2 * 16) &&
           !memcmp(a->pooled, b->pooled, (size_t)a->np * kC2 * 4) &&
           !memcmp(a->global, b->global, sizeof a->global) &&
           !memcmp(a->half, b->half, (size_t)a->n2 * kC2 * 2);
}

typedef struct worker {
    int index;
    const scene *s;
    const result *ref;
    counting count;
    int runs, mismatches, failures, create_checks, create_failures, foreign_allocs;
    char first_error[256];
} worker;

/* A create that must fail, with this thread's own message. */
static int failing_create(int index)
{
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.num_threads = -1 - index; /* the message names the value: each thread's differs */
    vc_context *ctx = NULL;
    char want[32];
    snprintf(want, sizeof want, "%d", (int)d.num_threads);
    return vc_context_create(&d, &ctx) == VC_ERR_INVALID_ARGUMENT && ctx == NULL &&
           strstr(vc_context_last_error(NULL), want) != NULL;
}

static void *work(void *arg)
{
    worker *w = arg;
    vc_allocator al = {count_alloc, count_free, &w->count};
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = VC_BACKEND_CPU;
    d.num_threads = 1 + w->index % 2;
    d.allocator = &al;
    vc_context *ctx = NULL;
    if (vc_context_create(&d, &ctx) != VC_OK) {
        w->failures++;
        return NULL;
    }
    vc_engine_options *o = vc_context_options(ctx); /* different on every thread */
    o->kmap_dense = w->index % 3 - 1;
    o->gemm_config = w->index - 1;
    o->tile_order = w->index % 2;
    for (int round = 0; round < kRounds; round++) {
        for (int i = 0; i < 300; i++) { /* tight, so that a shared buffer would be caught */
            w->create_checks++;
            if (!failing_create(w->index)) w->create_failures++;
        }
        result r;
        const vc_status st = run_net(ctx, w->s, &r);
        w->runs++;
        if (st != VC_OK) {
            if (!w->failures++)
                snprintf(w->first_error, sizeof w->first_error, "%s: %s",
                         vc_status_string(st), vc_context_last_error(ctx));
        } else if (!same_result(&r, w->ref)) {
            w->mismatches++;
        }
        free_result(&r);
    }
    vc_context_destroy(ctx);
    return NULL;
}

int main(void)
{
    vc_rng rng = vc_test_rng("test_threads");
    static scene s;
    make_scene(&s, &rng);
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = VC_BACKEND_CPU;
    d.num_threads = 1;
    vc_context *ctx = NULL;
    CHECK(vc_context_create(&d, &ctx) == VC_OK);
    result ref;
    CHECK_OK(ctx, run_net(ctx, &s, &ref));
    vc_context_destroy(ctx);
    printf("  reference: %lld strided rows, %lld downsample rows, %lld pooled rows\n",
           (long long)ref.n1, (long long)ref.n2, (long long)ref.np);

    static worker w[kThreads];
    pthread_t th[kThreads];
    for (int i = 0; i < kThreads; i++) {
        w[i].index = i;
        w[i].s = &s;
        w[i].ref = &ref;
        CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
    }
    for (int i = 0; i < kThreads; i++) CHECK(pthread_join(th[i], NULL) == 0);
    for (int i = 0; i < kThreads; i++) {
        printf("  thread %d: %d runs, %d mismatches, %d failures, %lld allocations, "
               "%lld frees, %d/%d failing creates with their own message\n", i, w[i].runs,
               w[i].mismatches, w[i].failures, (long long)w[i].count.allocs,
               (long long)w[i].count.frees, w[i].create_checks - w[i].create_failures,
               w[i].create_checks);
        CHECK_MSG(w[i].runs == kRounds && w[i].failures == 0, "thread %d: %s", i,
                  w[i].first_error);
        CHECK_MSG(w[i].mismatches == 0, "thread %d: %d results differ from the reference", i,
                  w[i].mismatches);
        CHECK_MSG(w[i].create_failures == 0, "thread %d: a failed create showed another "
                  "thread's message", i);
        /* the context's allocations all went through its own allocator, and all came back */
        CHECK_MSG(w[i].count.allocs > 0 && w[i].count.allocs == w[i].count.frees,
                  "thread %d: %lld allocations, %lld frees", i, (long long)w[i].count.allocs,
                  (long long)w[i].count.frees);
    }
    free_result(&ref);
    TEST_END();
}

#else
int main(void)
{
    printf("skipped: threads need glibc 2.34 or later here\n");
    return 77;
}
#endif
