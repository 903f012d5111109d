/* tests/gpu/test_gpu_kmap.c - the GPU hash table and GPU kernel maps against their CPU twins.
 * Hash table: random keys with repeats, inserted on the GPU and on the CPU; every lookup (present
 * and absent keys) must agree, the value of a repeated key is its smallest index, the duplicate
 * count and first duplicate are exact, also when a tiny probe bound forces rebuilds.
 * Kernel maps: for random clouds (batch 1..3, tiny and large shapes incl. 41x1600x1408,
 * coordinates on the edges, N = 0, 1, 31, 33, thousands, one 1M-voxel cloud), every map type and
 * a sweep of kernel / stride / padding / dilation (non-cubic 3x1x1 and 1x3x1, kernel 7 with
 * K = 343 and 11 mask words), vc_kmap_build_cpu and vc_kmap_build_gpu must return the same
 * status and bit-identical arrays (out_shape, n_out, out_coords, out_in, offsets, in_rows,
 * out_rows, masks, perm); the INVERSE of each strided / downsample map too; a second GPU build
 * must be identical (determinism); duplicate and out-of-range rows give the CPU's status. Builds
 * read their counts back through an engine cache's mapped block, as a context's do (the second
 * build by a copy, without one), also where the block holds the number a build is about to
 * post before the build has posted it (test_stale_word). The
 * device allocator and the library's memory pool are dirtied with 0xA5 before each GPU build, so
 * an unwritten element shows. The hash table is tested in both slot layouts (packed 8-byte slots
 * for keys of <= 31 bits, 16-byte slots otherwise), and the maps on a grid whose keys need more
 * than 31 bits too. Each map that also fits a bounded build (vc_kmap_gpu_bounded_*) is built that
 * way with loose bounds and compared as well.
 * Both output paths of the new-output maps (hash table, dense bitmap) are compared, each forced
 * on three clouds.
 * VC_SANITIZE=1: a small subset (for compute-sanitizer runs). Prints its seed (VC_TEST_SEED
 * replays). Exits 77 without a CUDA build or a usable device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/device_pool.h"
#include "kmap/kmap.h"
#include "kmap/kmap_gpu.h"
#include "hash/hash.h"
#include "hash/hash_gpu.h"
#include "kmap_compare.h"
#include "map_desc.h"
#include "scenes.h"
#include "testutil.h"
#include "voxconv.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "gpu_testutil.h"

static cudaStream_t g_stream;
static int g_small; /* VC_SANITIZE=1: small sizes only */

/* Fills freed device memory (the driver's and the map pool's) with 0xA5 so that unwritten
 * output elements do not read as zeros or as the previous build's values. */
static void dirty_device(void)
{
    const size_t bytes = (size_t)(g_small ? 4 : 64) << 20;
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        cudaGetLastError();
    } else {
        cudaMemset(p, 0xa5, bytes);
        cudaDeviceSynchronize();
        cudaFree(p);
    }
    vc_err err = {{0}};
    CHECK_MSG(vc_device_pool_dirty(bytes, 0xa5, &err) == VC_OK, "dirty pool: %s", err.msg);
}

/* ---- the hash table ---------------------------------------------------------------------- */

/* key_bits: 64 for the wide layout, <= 31 for the packed one (range must then fit). */
static void test_hash(vc_rng *rng, int64_t n, int64_t range, int32_t max_probe, int32_t key_bits)
{
    uint64_t *keys = malloc((size_t)n * 8 + 8), *queries = malloc((size_t)2 * n * 8 + 8);
    int32_t *got = malloc((size_t)2 * n * 4 + 4);
    for (int64_t i = 0; i < n; i++) keys[i] = (uint64_t)vc_rng_int(rng, range);
    if (n > 3) keys[n / 2] = VC_HASH_EMPTY; /* skipped by the GPU insert */
    for (int64_t i = 0; i < 2 * n; i++)
        queries[i] = i < n ? keys[i] : (uint64_t)vc_rng_int(rng, 2 * range);
    /* the CPU reference: the first index of each key wins, as atomicMin does */
    vc_hash ref;
    CHECK(vc_hash_init(&ref, n, NULL) == VC_HASH_INSERTED);
    int64_t dups = 0, first_dup = -1, valid = 0;
    for (int64_t i = 0; i < n; i++) {
        if (keys[i] == VC_HASH_EMPTY) continue;
        valid++;
        int32_t prev;
        vc_hash_result r = vc_hash_insert_grow(&ref, keys[i], (int32_t)i, &prev);
        if (r == VC_HASH_EXISTS) {
            dups++;
            if (first_dup < 0) first_dup = i;
        } else {
            CHECK(r == VC_HASH_INSERTED);
        }
    }
    uint64_t *dk = to_device(keys, (size_t)n * 8), *dq = to_device(queries, (size_t)2 * n * 8);
    int32_t *dout = to_device(NULL, (size_t)2 * n * 4);
    vc_hash_gpu h;
    CHECK(vc_hash_gpu_create_ex(&h, n, key_bits, g_stream) == VC_HASH_GPU_OK);
    CHECK(h.packed == (key_bits <= 31));
    h.max_probe = max_probe;
    vc_hash_gpu_insert_info info;
    CHECK(vc_hash_gpu_insert(&h, dk, NULL, n, g_stream, &info) == VC_HASH_GPU_OK);
    CHECK_MSG(info.duplicates == dups && info.first_duplicate == first_dup &&
                  info.inserted == valid - dups && h.count == ref.count,
              "n %lld probe %d bits %d: dups %lld/%lld first %lld/%lld inserted %lld count "
              "%lld/%lld", (long long)n, (int)max_probe, (int)key_bits,
              (long long)info.duplicates, (long long)dups, (long long)info.first_duplicate,
              (long long)first_dup, (long long)info.inserted, (long long)h.count,
              (long long)ref.count);
    if (max_probe <= 4 && n > 1000)
        CHECK_MSG(info.grows > 0, "probe bound %d never grew", max_probe);
    CHECK(vc_hash_gpu_find(&h, dq, 2 * n, dout, g_stream) == VC_HASH_GPU_OK);
    CUDA_OK(cudaStreamSynchronize(g_stream));
    CUDA_OK(cudaMemcpy(got, dout, (size_t)2 * n * 4, cudaMemcpyDeviceToHost));
    int64_t bad = 0, first_bad = -1;
    for (int64_t i = 0; i < 2 * n; i++) {
        int32_t v = -1;
        if (vc_hash_find(&ref, queries[i], &v) != VC_HASH_FOUND) v = -1;
        if (v != got[i]) {
            if (first_bad < 0) first_bad = i;
            bad++;
        }
    }
    CHECK_MSG(bad == 0, "hash n %lld probe %d bits %d: %lld lookups differ, first at %lld",
              (long long)n, (int)max_probe, (int)key_bits, (long long)bad, (long long)first_bad);
    /* a second insert into the non-empty table: every key is now a duplicate */
    CHECK(vc_hash_gpu_insert(&h, dk, NULL, n, g_stream, &info) == VC_HASH_GPU_OK);
    CHECK(info.inserted == 0 && info.duplicates == valid);
    vc_hash_gpu_destroy(&h, g_stream);
    /* the split insert (no growth, no read-back inside) gives the same counts */
    if (max_probe == 256) {
        CHECK(vc_hash_gpu_create_ex(&h, n, key_bits, g_stream) == VC_HASH_GPU_OK);
        CHECK(vc_hash_gpu_insert_async(&h, dk, NULL, n, g_stream) == VC_HASH_GPU_OK);
        CHECK(vc_hash_gpu_insert_result(&h, g_stream, &info) == VC_HASH_GPU_OK);
        CHECK_MSG(info.duplicates == dups && info.first_duplicate == first_dup &&
                      h.count == ref.count,
                  "split insert n %lld bits %d: dups %lld/%lld first %lld/%lld count %lld/%lld",
                  (long long)n, (int)key_bits, (long long)info.duplicates, (long long)dups,
                  (long long)info.first_duplicate, (long long)first_dup, (long long)h.count,
                  (long long)ref.count);
        vc_hash_gpu_destroy(&h, g_stream);
    }
    vc_hash_free(&ref);
    cudaFree(dk);
    cudaFree(dq);
    cudaFree(dout);
    free(keys);
    free(queries);
    free(got);
}

/* ---- clouds ------------------------------------------------------------------------------ */

/* The random clouds of scenes.h. */
typedef scene_cloud cloud;
#define make_cloud scene_random_cloud

/* ---- map comparison (kmap_compare.h) ------------------------------------------------------ */

/* the engine options of every GPU build (kmap_dense: the dense sweeps below; cache: main's) */
static vc_engine_options g_opts = VC_ENGINE_OPTIONS_INIT;

/* Poisons the arrays of a bounded map with 0xA5 bytes. */
static void poison_bounded(const vc_kmap_gpu_bounded *b)
{
    const vc_kmap_data *m = &b->map;
    const int64_t K = m->volume;
    if (m->out_coords) CUDA_OK(cudaMemset(m->out_coords, 0xa5, (size_t)b->max_out * 16));
    CUDA_OK(cudaMemset(m->out_in, 0xa5, (size_t)(b->max_out * K) * 4));
    CUDA_OK(cudaMemset(m->offsets, 0xa5, (size_t)(K + 1) * 8));
    CUDA_OK(cudaMemset(m->in_rows, 0xa5, (size_t)b->max_pairs * 4));
    CUDA_OK(cudaMemset(m->out_rows, 0xa5, (size_t)b->max_pairs * 4));
    CUDA_OK(cudaMemset(m->masks, 0xa5, (size_t)(b->max_out * m->mask_words) * 4));
    CUDA_OK(cudaMemset(m->perm, 0xa5, (size_t)b->max_out * 4));
}

/* The bounded build of the same map with loose bounds must give the same arrays. */
static void run_bounded(const char *label, const cloud *c, const int32_t *d_rows,
                        const vc_map_desc *d, const vc_kmap_data *cm)
{
    vc_kmap_gpu_bounded b;
    vc_err ge = {{0}};
    const int64_t max_in = c->n + 2;
    int64_t max_out = cm->n_out + 5;
    if (d->type == VC_MAP_SUBM) max_out = max_in;
    vc_status gs = vc_kmap_gpu_bounded_create(d, c->shape, c->batch, max_in, max_out,
                                              cm->n_pairs + 3, &g_opts, &b, &ge);
    CHECK_MSG(gs == VC_OK, "%s (bounded): create: %s", label, ge.msg);
    if (gs != VC_OK) return;
    poison_bounded(&b);
    gs = vc_kmap_build_gpu_bounded(&b, d_rows, c->n, g_stream, &ge);
    CHECK_MSG(gs == VC_OK, "%s (bounded): build: %s", label, ge.msg);
    if (gs == VC_OK) {
        gs = vc_kmap_gpu_bounded_check(&b, g_stream, &ge);
        CHECK_MSG(gs == VC_OK, "%s (bounded): check: %s", label, ge.msg);
    }
    if (gs == VC_OK) {
        char l2[300];
        snprintf(l2, sizeof l2, "%s (bounded)", label);
        cmp_maps(l2, cm, &b.map);
    }
    vc_kmap_gpu_bounded_destroy(&b);
}

/* Builds one map on both sides, compares, and checks the inverse and a second GPU build. */
static void run_case(const cloud *c, const int32_t *d_rows, const vc_map_desc *d, int full)
{
    char label[256];
    snprintf(label, sizeof label,
             "type %d k %dx%dx%d s %dx%dx%d p %dx%dx%d d %dx%dx%d | n %lld batch %d shape "
             "%dx%dx%d", (int)d->type, d->kernel[0], d->kernel[1], d->kernel[2], d->stride[0],
             d->stride[1], d->stride[2], d->padding[0], d->padding[1], d->padding[2],
             d->dilation[0], d->dilation[1], d->dilation[2], (long long)c->n, (int)c->batch,
             (int)c->shape[0], (int)c->shape[1], (int)c->shape[2]);
    vc_kmap_data cm, gm, gm2;
    memset(&cm, 0, sizeof cm);
    memset(&gm, 0, sizeof gm);
    memset(&gm2, 0, sizeof gm2);
    vc_err ce = {{0}}, ge = {{0}};
    vc_status cs = vc_kmap_build_cpu(c->rows, c->n, c->shape, c->batch, d, NULL, 0, &cm, &ce);
    dirty_device();
    vc_status gs =
        vc_kmap_build_gpu(d_rows, c->n, c->shape, c->batch, d, &g_opts, g_stream, &gm, &ge);
    CHECK_MSG(cs == gs, "%s: cpu %s (%s), gpu %s (%s)", label, vc_status_string(cs), ce.msg,
              vc_status_string(gs), ge.msg);
    if (cs != VC_OK || gs != VC_OK) {
        vc_kmap_data_free(&cm);
        vc_kmap_data_free_gpu(&gm);
        return;
    }
    cmp_maps(label, &cm, &gm);
    cmp_tile_order(label, &cm, &gm, g_stream);
    if (full) {
        /* determinism: a second build (on the legacy stream) gives the same arrays */
        dirty_device();
        vc_engine_options plain = g_opts;
        plain.cache = NULL; /* the read-back by a copy, no mapped block */
        gs = vc_kmap_build_gpu(d_rows, c->n, c->shape, c->batch, d, &plain, NULL, &gm2, &ge);
        CHECK_MSG(gs == VC_OK, "%s: second build: %s", label, ge.msg);
        if (gs == VC_OK) {
            char l2[300];
            snprintf(l2, sizeof l2, "%s (second GPU build)", label);
            cmp_maps(l2, &cm, &gm2);
        }
        vc_kmap_data_free_gpu(&gm2);
        run_bounded(label, c, d_rows, d, &cm);
    }
    if (d->type == VC_MAP_STRIDED || d->type == VC_MAP_DOWNSAMPLE) {
        vc_kmap_data ci, gi;
        memset(&ci, 0, sizeof ci);
        memset(&gi, 0, sizeof gi);
        cs = vc_kmap_inverse_cpu(&cm, c->shape, c->batch, NULL, &ci, &ce);
        dirty_device();
        gs = vc_kmap_inverse_gpu(&gm, c->shape, c->batch, NULL, g_stream, &gi, &ge);
        CHECK_MSG(cs == gs, "%s inverse: cpu %s (%s), gpu %s (%s)", label, vc_status_string(cs),
                  ce.msg, vc_status_string(gs), ge.msg);
        if (cs == VC_OK && gs == VC_OK) {
            char l2[300];
            snprintf(l2, sizeof l2, "%s (inverse)", label);
            cmp_maps(l2, &ci, &gi);
            cmp_tile_order(l2, &ci, &gi, g_stream);
        }
        vc_kmap_data_free(&ci);
        vc_kmap_data_free_gpu(&gi);
    }
    vc_kmap_data_free(&cm);
    vc_kmap_data_free_gpu(&gm);
}

static void run_sweep(const cloud *c, int big)
{
    int32_t *d_rows = to_device(c->rows, (size_t)c->n * 16);
    /* g_small's pick[] below indexes this list: append, do not insert */
    const vc_map_desc all[] = {
        mkdesc_zyx(VC_MAP_SUBM, 3, 3, 3, 1, 0, 1),
        mkdesc_zyx(VC_MAP_SUBM, 1, 1, 1, 1, 0, 1),
        mkdesc_zyx(VC_MAP_SUBM, 5, 5, 5, 1, 0, 1),
        mkdesc_zyx(VC_MAP_SUBM, 7, 7, 7, 1, 0, 1),
        mkdesc_zyx(VC_MAP_SUBM, 3, 3, 3, 1, 0, 2),
        mkdesc_zyx(VC_MAP_SUBM, 3, 1, 1, 1, 0, 1),
        mkdesc_zyx(VC_MAP_SUBM, 1, 3, 1, 1, 0, 1),
        mkdesc_zyx(VC_MAP_SUBM, 3, 5, 1, 1, 0, 3),
        mkdesc_zyx(VC_MAP_STRIDED, 3, 3, 3, 2, 1, 1),
        mkdesc_zyx(VC_MAP_STRIDED, 3, 3, 3, 2, 0, 1),
        mkdesc_zyx(VC_MAP_STRIDED, 2, 2, 2, 2, 0, 1),
        mkdesc_zyx(VC_MAP_STRIDED, 3, 3, 3, 1, 1, 1),
        mkdesc_zyx(VC_MAP_STRIDED, 3, 1, 1, 2, 1, 1),
        mkdesc_zyx(VC_MAP_STRIDED, 1, 3, 1, 1, 0, 1),
        mkdesc_zyx(VC_MAP_STRIDED, 3, 3, 3, 2, 2, 2),
        mkdesc_zyx(VC_MAP_STRIDED, 7, 7, 7, 3, 3, 1),
        mkdesc_zyx(VC_MAP_STRIDED, 4, 2, 3, 3, 1, 1),
        mkdesc_zyx(VC_MAP_DOWNSAMPLE, 2, 2, 2, 2, 0, 1),
        mkdesc_zyx(VC_MAP_DOWNSAMPLE, 3, 3, 3, 2, 0, 1),
        mkdesc_zyx(VC_MAP_DOWNSAMPLE, 1, 1, 1, 3, 0, 1),
        mkdesc_zyx(VC_MAP_DOWNSAMPLE, 3, 3, 3, 3, 0, 2),
        mkdesc_zyx(VC_MAP_DOWNSAMPLE, 7, 7, 7, 2, 0, 1),
        mkdesc_zyx(VC_MAP_TRANSPOSED, 2, 2, 2, 2, 0, 1),
        mkdesc_zyx(VC_MAP_TRANSPOSED, 3, 3, 3, 2, 1, 1),
        mkdesc_zyx(VC_MAP_TRANSPOSED, 3, 1, 1, 2, 1, 1),
        mkdesc_zyx(VC_MAP_TRANSPOSED, 3, 3, 3, 1, 1, 1),
        mkdesc_zyx(VC_MAP_TRANSPOSED, 5, 5, 5, 3, 2, 2),
        mkdesc_zyx(VC_MAP_TRANSPOSED, 7, 7, 7, 2, 3, 1),
        /* rejected by both: even SUBM kernel, padded DOWNSAMPLE, kernel 8 */
        mkdesc_zyx(VC_MAP_SUBM, 2, 2, 2, 1, 0, 1),
        mkdesc_zyx(VC_MAP_DOWNSAMPLE, 2, 2, 2, 2, 1, 1),
        mkdesc_zyx(VC_MAP_STRIDED, 8, 3, 3, 2, 1, 1),
        /* strides past the remainder table of kmap/kmap_internal.cuh (Geom::rbits, strides <= 8) */
        mkdesc_zyx(VC_MAP_STRIDED, 3, 3, 3, 9, 1, 4),
        mkdesc_zyx(VC_MAP_DOWNSAMPLE, 3, 3, 3, 10, 0, 4),
        mkdesc_zyx(VC_MAP_TRANSPOSED, 3, 3, 3, 9, 1, 1),
    };
    const vc_map_desc few[] = {
        mkdesc_zyx(VC_MAP_SUBM, 3, 3, 3, 1, 0, 1),
        mkdesc_zyx(VC_MAP_STRIDED, 3, 3, 3, 2, 1, 1),
        mkdesc_zyx(VC_MAP_DOWNSAMPLE, 2, 2, 2, 2, 0, 1),
        mkdesc_zyx(VC_MAP_TRANSPOSED, 2, 2, 2, 2, 0, 1),
    };
    const vc_map_desc *list = big ? few : all;
    size_t count = big ? sizeof few / sizeof few[0] : sizeof all / sizeof all[0];
    if (g_small) {
        /* sanitizer runs: one of each kind (k3, k7, non-cubic, even kernels, rejected) */
        static const int pick[] = {0, 3, 5, 8, 10, 15, 17, 18, 22, 27, 28, 29, 30};
        for (size_t i = 0; i < sizeof pick / sizeof pick[0]; i++)
            run_case(c, d_rows, &all[pick[i]], 1);
        cudaFree(d_rows);
        return;
    }
    for (size_t i = 0; i < count; i++) {
        /* kernel 7 on thousands of voxels: keep it, but only once per cloud size class */
        run_case(c, d_rows, &list[i], i % 3 == 0 || big);
    }
    cudaFree(d_rows);
}

/* Duplicate and out-of-range rows: the GPU reports what the CPU reports. */
static void test_bad_rows(vc_rng *rng)
{
    const int32_t shape[3] = {41, 1600, 1408};
    cloud c = make_cloud(rng, 2000, 2, shape, 1);
    int32_t *rows = malloc((size_t)(c.n + 2) * 16);
    const vc_map_desc ds[2] = {mkdesc_zyx(VC_MAP_SUBM, 3, 3, 3, 1, 0, 1),
                               mkdesc_zyx(VC_MAP_STRIDED, 3, 3, 3, 2, 1, 1)};
    for (int variant = 0; variant < 4; variant++) {
        int64_t n = c.n;
        memcpy(rows, c.rows, (size_t)n * 16);
        int64_t at = vc_rng_int(rng, n);
        if (variant == 0 || variant == 2) { /* a duplicate of an earlier row */
            memcpy(rows + 4 * n, rows + 4 * at, 16);
            n++;
        }
        if (variant == 1 || variant == 2) { /* a row one past the edge (variant 2: before the
                                               duplicate, which the CPU meets last) */
            int64_t r = variant == 2 ? at / 2 : vc_rng_int(rng, n);
            rows[4 * r + 3] = shape[2];
        }
        if (variant == 3) { /* duplicate early, out of range late */
            memcpy(rows + 4 * n, rows + 4 * 1, 16);
            memcpy(rows + 4 * 2, rows + 4 * 1, 16);
            rows[4 * n + 1] = -1;
            n++;
        }
        int32_t *d = to_device(rows, (size_t)n * 16);
        for (int j = 0; j < 2; j++) {
            vc_kmap_data cm, gm;
            memset(&cm, 0, sizeof cm);
            memset(&gm, 0, sizeof gm);
            vc_err ce = {{0}}, ge = {{0}};
            vc_status cs = vc_kmap_build_cpu(rows, n, shape, 2, &ds[j], NULL, 0, &cm, &ce);
            vc_status gs = vc_kmap_build_gpu(d, n, shape, 2, &ds[j], &g_opts, g_stream, &gm, &ge);
            CHECK_MSG(cs == gs && cs != VC_OK, "bad rows variant %d: cpu %s (%s), gpu %s (%s)",
                      variant, vc_status_string(cs), ce.msg, vc_status_string(gs), ge.msg);
            if (cs == VC_ERR_DUPLICATE && gs == VC_ERR_DUPLICATE) {
                /* both name the same row: the first that repeats an earlier one */
                const char *a = strstr(ce.msg, "and "), *b = strstr(ge.msg, "row ");
                long long ra = a ? strtoll(a + 4, NULL, 10) : -1;
                long long rb = b ? strtoll(b + 4, NULL, 10) : -2;
                CHECK_MSG(ra == rb, "duplicate row: cpu '%s' gpu '%s'", ce.msg, ge.msg);
            }
            /* the bounded build reports the same through its check */
            vc_kmap_gpu_bounded b;
            vc_err be = {{0}};
            vc_status bs = vc_kmap_gpu_bounded_create(&ds[j], shape, 2, n, 16 * n, 64 * n,
                                                      &g_opts, &b, &be);
            CHECK_MSG(bs == VC_OK, "bad rows variant %d: bounded create: %s", variant, be.msg);
            if (bs == VC_OK) {
                bs = vc_kmap_build_gpu_bounded(&b, d, n, g_stream, &be);
                if (bs == VC_OK) bs = vc_kmap_gpu_bounded_check(&b, g_stream, &be);
                CHECK_MSG(bs == cs, "bad rows variant %d: cpu %s (%s), bounded %s (%s)", variant,
                          vc_status_string(cs), ce.msg, vc_status_string(bs), be.msg);
                if (cs == VC_ERR_DUPLICATE && bs == VC_ERR_DUPLICATE)
                    CHECK_MSG(strcmp(ge.msg, be.msg) == 0, "duplicate row: gpu '%s' bounded '%s'",
                              ge.msg, be.msg);
                vc_kmap_gpu_bounded_destroy(&b);
            }
            vc_kmap_data_free(&cm);
            vc_kmap_data_free_gpu(&gm);
        }
        cudaFree(d);
    }
    free(rows);
    free(c.rows);
}

/* A cloud of the main sweep's list, made from rng and run through run_sweep. */
typedef struct sweep_case {
    int64_t n;
    int32_t batch;
    const int32_t *shape;
    int style;
    int small_mode; /* part of the VC_SANITIZE subset */
} sweep_case;

/* The mapped read-back block (the engine cache's) holding, before a build, the number that
 * build's posting will carry, as pinned memory can when the block is made over memory freed
 * elsewhere: each build must still wait for its own posting. A strided map (then its inverse),
 * the word set to the next number, a subm map over other rows, each against the CPU's. */
static void test_stale_word(vc_rng *rng)
{
    const int32_t shape[3] = {20, 30, 40};
    cloud a = make_cloud(rng, 3000, 2, shape, 1), b = make_cloud(rng, 1500, 1, shape, 0);
    int32_t *da = to_device(a.rows, (size_t)a.n * 16), *db = to_device(b.rows, (size_t)b.n * 16);
    const vc_map_desc strided = mkdesc_zyx(VC_MAP_STRIDED, 3, 3, 3, 2, 1, 1),
                      subm = mkdesc_zyx(VC_MAP_SUBM, 3, 3, 3, 1, 0, 1);
    vc_engine_cache *k = g_opts.cache;
    for (int i = 0; i < 3; i++) {
        run_case(&a, da, &strided, 0);
        if (!k->status_pinned || !k->status_mapped) {
            printf("SKIP stale word: no mapped read-back block on this device\n");
            break;
        }
        __atomic_store_n(k->status_pinned + VC_KMAP_GPU_STATUS_WORDS, k->status_seq + 1,
                         __ATOMIC_RELAXED);
        run_case(&b, db, &subm, 0);
    }
    cudaFree(da);
    cudaFree(db);
    free(a.rows);
    free(b.rows);
}

static void sweep_cloud(vc_rng *rng, const sweep_case *k)
{
    cloud c = make_cloud(rng, k->n, k->batch, k->shape, k->style);
    run_sweep(&c, 0);
    free(c.rows);
}

int main(void)
{
    if (!gpu_usable()) return 77;
    vc_rng rng = vc_test_rng("test_gpu_kmap");
    CUDA_OK(cudaStreamCreate(&g_stream));

    const char *san = getenv("VC_SANITIZE");
    g_small = san && atoi(san) != 0;
    if (g_small) printf("VC_SANITIZE: small sizes only\n");
    g_opts.cache = vc_engine_cache_new(); /* a context's: the read-back by its mapped block */
    CHECK(g_opts.cache != NULL);
    if (g_opts.cache) test_stale_word(&rng);
    for (int layout = 0; layout < 2; layout++) {
        const int32_t bits = layout ? 31 : 64;
        const int64_t big_range = layout ? ((int64_t)1 << 31) - 1 : (int64_t)1 << 40;
        test_hash(&rng, 0, 10, 256, bits);
        test_hash(&rng, 1, 10, 256, bits);
        test_hash(&rng, 33, 20, 256, bits);
        test_hash(&rng, g_small ? 3000 : 100000, g_small ? 2000 : 60000, 256, bits);
        test_hash(&rng, g_small ? 5000 : 1000000, big_range, 256, bits);
        /* probe bound 4: forces rebuilds */
        test_hash(&rng, g_small ? 4000 : 200000, g_small ? 3000 : 150000, 4, bits);
    }

    /* huge: keys of 35 bits (16-byte slots, 64-bit output keys); mixed: 32-bit input keys
     * (16-byte slots) whose stride-2 outputs pack into 29 bits */
    const int32_t big[3] = {41, 1600, 1408}, small[3] = {5, 6, 7}, mid[3] = {20, 30, 40},
                  flat[3] = {1, 64, 64}, one[3] = {1, 1, 1}, huge[3] = {1000, 2000, 3000},
                  mixed[3] = {256, 2048, 4096};
    const sweep_case cases[] = {
        {0, 1, small, 0, 1},    {1, 1, small, 0, 1},   {1, 3, big, 2, 0},
        {31, 2, small, 0, 0},   {33, 3, small, 2, 1},  {31, 1, big, 1, 0},
        {33, 2, big, 2, 0},     {1, 1, one, 0, 1},     {200, 2, flat, 1, 1},
        {3000, 1, big, 1, 0},   {4000, 3, big, 3, 0},  {2500, 2, mid, 1, 1},
        {3000, 3, mid, 2, 0},   {5000, 2, big, 0, 0},  {6000, 1, mid, 0, 0},
        {3000, 4, huge, 1, 1},  {2500, 2, huge, 3, 0}, {3000, 2, mixed, 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!g_small || cases[i].small_mode) sweep_cloud(&rng, &cases[i]);
    }
    /* the new-output maps' other output path: the sweep takes the dense bitmap where the output
     * keys have at most 26 bits (most clouds here) and the hash table past that (batch 3 on the
     * 41x1600x1408 grid, huge, mixed); -1 sends every map to the table, 1 the maps of up to
     * 28-bit keys to the bitmap */
    const size_t dense_again[3] = {g_small ? 4u : 9u, g_small ? 11u : 10u, g_small ? 8u : 12u};
    for (int mode = -1; mode <= 1; mode += 2) {
        g_opts.kmap_dense = mode;
        printf("dense output path: mode %d\n", mode);
        for (size_t a = 0; a < 3; a++) sweep_cloud(&rng, &cases[dense_again[a]]);
    }
    g_opts.kmap_dense = 0;
    if (!g_small) {
        cloud c = make_cloud(&rng, 1000000, 2, big, 3);
        printf("1M cloud: %lld voxels\n", (long long)c.n);
        run_sweep(&c, 1);
        free(c.rows);
    }
    test_bad_rows(&rng);
    vc_engine_cache_free(g_opts.cache);
    cudaStreamDestroy(g_stream);
    TEST_END();
}

#else
int main(void)
{
    printf("test_gpu_kmap: built without CUDA, skipped\n");
    return 77;
}
#endif
