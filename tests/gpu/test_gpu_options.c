/* tests/gpu/test_gpu_options.c - engine options are per context: two CUDA contexts on two
 * threads at once, one forcing every GEMM configuration of the table in turn (and the map and
 * schedule switches), the other on the defaults. The default thread's results must stay
 * bit-identical to a reference made before the threads start, every call of it must succeed,
 * and the forcing thread must get what its own options ask for (a configuration that does not
 * fit the layer: VC_ERR_UNSUPPORTED; one that fits: the reference within fp16 rounding). With
 * process-wide switches the default thread would see the other's forced configurations.
 * Skips (77) without CUDA or a device. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "voxconv.h"

#ifdef VOXCONV_HAVE_CUDA
#include "core/dtype.h"
#include "gemm/gemm.h"
#include "src/internal.h"

enum { kGrid = 48, kChannels = 32, kRounds = 3 };

typedef struct scene {
    int32_t *coords;          /* [n, 4] distinct, in a kGrid^3 grid                          */
    int64_t n;
    uint16_t *feats;          /* [n, kChannels] fp16 bits                                    */
    uint16_t *weights;        /* [kChannels, 27, kChannels] fp16 bits                        */
} scene;

static void make_scene(scene *s, vc_rng *rng)
{
    const int64_t want = 12000;
    unsigned char *taken = calloc((size_t)kGrid * kGrid * kGrid, 1);
    s->coords = malloc((size_t)want * 16);
    s->n = 0;
    while (s->n < want) {
        const int64_t z = vc_rng_int(rng, kGrid), y = vc_rng_int(rng, kGrid),
                      x = vc_rng_int(rng, kGrid);
        const int64_t cell = (z * kGrid + y) * kGrid + x;
        if (taken[cell]) continue;
        taken[cell] = 1;
        int32_t *r = s->coords + s->n * 4;
        r[0] = 0, r[1] = (int32_t)z, r[2] = (int32_t)y, r[3] = (int32_t)x;
        s->n++;
    }
    free(taken);
    s->feats = malloc((size_t)(s->n * kChannels) * 2);
    for (int64_t i = 0; i < s->n * kChannels; i++)
        s->feats[i] = vc_f32_to_f16((float)(vc_rng_int(rng, 255) - 127) / 256.0f);
    s->weights = malloc((size_t)kChannels * 27 * kChannels * 2);
    for (int64_t i = 0; i < (int64_t)kChannels * 27 * kChannels; i++)
        s->weights[i] = vc_f32_to_f16((float)(vc_rng_int(rng, 63) - 31) / 256.0f);
}

/* One subm k3 fp16 conv of the scene on ctx; the output's fp16 bits into out ([n, kChannels]).
 * Returns the call's status. */
static vc_status run_conv(vc_context *ctx, const scene *s, uint16_t *out)
{
    const int32_t shape[3] = {kGrid, kGrid, kGrid};
    vc_coords *c = NULL;
    vc_tensor *x = NULL, *y = NULL;
    vc_status st = vc_coords_create(ctx, s->coords, s->n, VC_MEMORY_HOST, shape, 1, &c);
    if (st == VC_OK)
        st = vc_tensor_create(ctx, c, kChannels, VC_DTYPE_FP16, s->feats, VC_MEMORY_HOST, &x);
    if (st == VC_OK) {
        vc_conv_desc d = VC_CONV_DESC_INIT;
        d.out_channels = kChannels;
        d.weights = s->weights;
        d.weight_dtype = VC_DTYPE_FP16;
        d.algo = VC_ALGO_IMPLICIT_GEMM;
        d.activation = VC_ACT_RELU;
        st = vc_conv_forward(ctx, &d, x, &y);
    }
    if (st == VC_OK) st = vc_tensor_copy_out(ctx, y, out, VC_DTYPE_FP16, VC_MEMORY_HOST);
    vc_tensor_destroy(y);
    vc_tensor_destroy(x);
    vc_coords_destroy(c);
    return st;
}

typedef struct worker {
    const scene *s;
    const uint16_t *ref;      /* the default options' output bits                             */
    int forcing;              /* 1: walks the options; 0: defaults throughout                 */
    int32_t n_configs;
    /* results */
    int calls, ok, unsupported, other_errors, bit_mismatches, tol_failures, setup_failed;
    char first_error[256];
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    vc_context_desc d = VC_CONTEXT_DESC_INIT;
    d.backend = VC_BACKEND_CUDA;
    vc_context *ctx = NULL;
    if (vc_context_create(&d, &ctx) != VC_OK) {
        w->setup_failed = 1;
        return NULL;
    }
    const size_t elems = (size_t)w->s->n * kChannels;
    uint16_t *out = malloc(elems * 2);
    double *ref = malloc(elems * sizeof(double));
    float *got = malloc(elems * 4);
    for (size_t i = 0; i < elems; i++) ref[i] = vc_f16_to_f32(w->ref[i]);
    vc_engine_options *o = vc_context_options(ctx);
    for (int round = 0; round < kRounds; round++) {
        for (int32_t cfg = -1; cfg < w->n_configs; cfg++) {
            if (w->forcing) {
                o->gemm_config = cfg;
                o->kmap_dense = round == 0 ? -1 : round == 1 ? 1 : 0;
                o->tile_order = round != 1;
                o->tap_split = round == 2 ? 2 : 0;
            }
            memset(out, 0xff, elems * 2); /* NaN poison */
            const vc_status st = run_conv(ctx, w->s, out);
            w->calls++;
            if (st == VC_ERR_UNSUPPORTED) {
                w->unsupported++;
                continue;
            }
            if (st != VC_OK) {
                if (!w->other_errors++)
                    snprintf(w->first_error, sizeof w->first_error, "%s: %s",
                             vc_status_string(st), vc_context_last_error(ctx));
                continue;
            }
            w->ok++;
            if (!w->forcing) {
                if (memcmp(out, w->ref, elems * 2) != 0) w->bit_mismatches++;
            } else {
                for (size_t i = 0; i < elems; i++) got[i] = vc_f16_to_f32(out[i]);
                if (!(vc_rel_err(got, ref, (int64_t)elems) <= 1e-2)) w->tol_failures++;
            }
        }
    }
    free(out);
    free(ref);
    free(got);
    vc_context_destroy(ctx);
    return NULL;
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
    vc_rng rng = vc_test_rng("test_gpu_options");
    scene s;
    make_scene(&s, &rng);
    const vc_gemm_config *table = NULL;
    const int32_t n_configs = vc_gemm_configs(&table);
    uint16_t *ref = malloc((size_t)(s.n * kChannels) * 2);
    CHECK_OK(ctx, run_conv(ctx, &s, ref));
    vc_context_destroy(ctx);

    worker w[2];
    memset(w, 0, sizeof w);
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        w[i].s = &s;
        w[i].ref = ref;
        w[i].forcing = i == 0;
        w[i].n_configs = n_configs;
        CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);

    for (int i = 0; i < 2; i++) {
        printf("  %-8s thread: %d calls, %d ok, %d unsupported, %d other errors, %d bit "
               "mismatches, %d over tolerance\n", i ? "default" : "forcing", w[i].calls, w[i].ok,
               w[i].unsupported, w[i].other_errors, w[i].bit_mismatches, w[i].tol_failures);
        CHECK_MSG(!w[i].setup_failed, "thread %d could not create its context", i);
        CHECK_MSG(w[i].other_errors == 0, "thread %d: %s", i, w[i].first_error);
        CHECK_MSG(w[i].tol_failures == 0, "thread %d: results over fp16 tolerance", i);
    }
    /* the default thread is untouched by the other's options */
    CHECK_MSG(w[1].ok == w[1].calls && w[1].calls == kRounds * (n_configs + 1),
              "default thread: %d of %d calls succeeded", w[1].ok, w[1].calls);
    CHECK_MSG(w[1].bit_mismatches == 0, "default thread: %d results differ from the reference",
              w[1].bit_mismatches);
    /* the forcing thread really forced something: some configuration of the table does not fit
     * this layer (fp16 configurations of other dtypes, or tiles the layer cannot take) */
    CHECK_MSG(w[0].unsupported > 0, "forcing thread: every forced configuration ran, so the "
              "test shows nothing about isolation");
    CHECK_MSG(w[0].ok > kRounds, "forcing thread: only %d calls ran", w[0].ok);
    free(ref);
    free(s.coords);
    free(s.feats);
    free(s.weights);
    TEST_END();
}

#else
int main(void)
{
    printf("skipped: built without CUDA\n");
    return 77;
}
#endif
