/* tests/gpu/test_gpu_graph.c - kernel-map builds captured in CUDA graphs (the bounded variant of
 * kmap/kmap_gpu.h). For subm k3, subm k5 (dilation 2), strided k3 s2 p1, downsample k2 s2 and
 * transposed k2 s2: one bounded build is captured with stream capture in the global mode (so any
 * hidden synchronisation or allocation would fail the capture), the graph is checked to hold
 * only kernel and memset nodes, then replayed on several new clouds copied into the same input
 * buffer; after each replay vc_kmap_gpu_bounded_check must pass and every array must equal the
 * CPU twin's bit for bit (the arrays are poisoned with 0xA5 before each replay, so an element a
 * replay forgets to write shows). Then bounds that are too small (max_out for the new-output
 * maps, max_pairs for all) must come back from the check as VC_ERR_CAPACITY with the needed
 * count, and a replay on a cloud with a repeated row / a row outside the shape as
 * VC_ERR_DUPLICATE / VC_ERR_OUT_OF_RANGE, the regular build's verdicts.
 * VC_SANITIZE=1: small clouds (for compute-sanitizer runs). Prints its seed (VC_TEST_SEED
 * replays). Exits 77 without a CUDA build or a usable device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kmap/kmap.h"
#include "kmap/kmap_gpu.h"
#include "hash/hash.h"
#include "kmap_compare.h"
#include "map_desc.h"
#include "scenes.h"
#include "testutil.h"
#include "voxconv.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "gpu_testutil.h"

#define NFRAMES 3

static cudaStream_t g_stream;

/* ---- clouds: surfaces of a scan-like scene, exactly n distinct rows, shuffled (scenes.h) -- */

#define make_rows scene_surface_rows

/* ---- comparison (kmap_compare.h) ----------------------------------------------------------- */

/* Uploads and poison go through g_stream, not the legacy default stream: g_stream is
 * non-blocking, so a cudaMemcpy / cudaMemset on the legacy stream is not ordered with the graph
 * replays. A pageable cudaMemcpy returns before its last chunk reaches the device and cudaMemset
 * returns at once, so a replay launched right after could read the previous frame's last rows,
 * or have its results overwritten by a late poison. (Read-backs stay plain cudaMemcpy: they
 * follow vc_kmap_gpu_bounded_check, which synchronises g_stream.) */
static void upload(int32_t *d_in, const int32_t *rows, int64_t n)
{
    CUDA_OK(cudaMemcpyAsync(d_in, rows, (size_t)n * 16, cudaMemcpyHostToDevice, g_stream));
    CUDA_OK(cudaStreamSynchronize(g_stream));
}

static void fill(void *p, size_t bytes)
{
    CUDA_OK(cudaMemsetAsync(p, 0xa5, bytes, g_stream));
}

static void poison_bounded(const vc_kmap_gpu_bounded *b)
{
    const vc_kmap_data *m = &b->map;
    const int64_t K = m->volume;
    if (m->out_coords) fill(m->out_coords, (size_t)b->max_out * 16);
    fill(m->out_in, (size_t)(b->max_out * K) * 4);
    fill(m->offsets, (size_t)(K + 1) * 8);
    fill(m->in_rows, (size_t)b->max_pairs * 4);
    fill(m->out_rows, (size_t)b->max_pairs * 4);
    fill(m->masks, (size_t)(b->max_out * m->mask_words) * 4);
    fill(m->perm, (size_t)b->max_out * 4);
}

/* One bounded build, as capture_checked (gpu_testutil.h) runs it. */
typedef struct build_arg {
    vc_kmap_gpu_bounded *b;
    const int32_t *d_in;
    int64_t n;
} build_arg;

static vc_status build_body(void *arg, cudaStream_t stream, vc_err *err)
{
    const build_arg *a = arg;
    return vc_kmap_build_gpu_bounded(a->b, a->d_in, a->n, stream, err);
}

/* Captures one bounded build of b over d_in [n] into an executable graph; NULL on failure. */
static cudaGraphExec_t capture(vc_kmap_gpu_bounded *b, const int32_t *d_in, int64_t n,
                               const char *label)
{
    build_arg a = {b, d_in, n};
    return capture_checked(g_stream, build_body, &a, label);
}

static void run_desc(const vc_map_desc *d, int32_t *const *frames, int64_t n, int32_t batch,
                     const int32_t shape[3], int32_t *d_in)
{
    char label[160];
    snprintf(label, sizeof label, "type %d k %d s %d p %d d %d | n %lld",
             (int)d->type, d->kernel[0], d->stride[0], d->padding[0], d->dilation[0],
             (long long)n);
    vc_kmap_data cm[NFRAMES];
    memset(cm, 0, sizeof cm);
    int64_t max_out = 1, max_pairs = 1;
    for (int f = 0; f < NFRAMES; f++) {
        vc_err ce = {{0}};
        vc_status cs = vc_kmap_build_cpu(frames[f], n, shape, batch, d, NULL, 0, &cm[f], &ce);
        CHECK_MSG(cs == VC_OK, "%s: cpu frame %d: %s", label, f, ce.msg);
        if (cs != VC_OK) goto done;
        if (cm[f].n_out > max_out) max_out = cm[f].n_out;
        if (cm[f].n_pairs > max_pairs) max_pairs = cm[f].n_pairs;
    }
    if (d->type == VC_MAP_SUBM) max_out = n;
    upload(d_in, frames[0], n);

    /* 1. bounds that fit: three frames and the first again, each bit-identical */
    {
        vc_kmap_gpu_bounded b;
        vc_err err = {{0}};
        vc_status st = vc_kmap_gpu_bounded_create(d, shape, batch, n,
                                                  max_out + (d->type == VC_MAP_SUBM ? 0 : 17),
                                                  max_pairs + 101, NULL, &b, &err);
        CHECK_MSG(st == VC_OK, "%s: create: %s", label, err.msg);
        if (st != VC_OK) goto done;
        cudaGraphExec_t exec = capture(&b, d_in, n, label);
        for (int r = 0; exec && r <= NFRAMES; r++) {
            const int f = r % NFRAMES;
            upload(d_in, frames[f], n);
            poison_bounded(&b);
            CUDA_OK(cudaGraphLaunch(exec, g_stream));
            st = vc_kmap_gpu_bounded_check(&b, g_stream, &err);
            CHECK_MSG(st == VC_OK, "%s: replay %d: check: %s", label, r, err.msg);
            if (st == VC_OK) {
                char l2[220];
                snprintf(l2, sizeof l2, "%s (graph replay %d, frame %d)", label, r, f);
                cmp_maps(l2, &cm[f], &b.map);
            }
        }
        /* 2. a replay on a cloud with a repeated row, then one with a row outside the shape */
        if (exec && n >= 4) {
            int32_t *bad = malloc((size_t)n * 16);
            memcpy(bad, frames[0], (size_t)n * 16);
            memcpy(bad + 4 * (n - 1), bad + 4 * (n / 3), 16); /* row n-1 repeats row n/3 */
            upload(d_in, bad, n);
            CUDA_OK(cudaGraphLaunch(exec, g_stream));
            st = vc_kmap_gpu_bounded_check(&b, g_stream, &err);
            CHECK_MSG(st == VC_ERR_DUPLICATE && strstr(err.msg, "row ") &&
                          strtoll(strstr(err.msg, "row ") + 4, NULL, 10) == n - 1,
                      "%s: replay with a duplicate: %s (%s)", label, vc_status_string(st),
                      err.msg);
            memcpy(bad, frames[1], (size_t)n * 16);
            bad[4 * (n / 2) + 2] = shape[1]; /* y one past the edge */
            upload(d_in, bad, n);
            CUDA_OK(cudaGraphLaunch(exec, g_stream));
            st = vc_kmap_gpu_bounded_check(&b, g_stream, &err);
            CHECK_MSG(st == VC_ERR_OUT_OF_RANGE, "%s: replay with a row outside: %s (%s)", label,
                      vc_status_string(st), err.msg);
            /* and a good frame again: nothing stale */
            upload(d_in, frames[2], n);
            poison_bounded(&b);
            CUDA_OK(cudaGraphLaunch(exec, g_stream));
            st = vc_kmap_gpu_bounded_check(&b, g_stream, &err);
            CHECK_MSG(st == VC_OK, "%s: replay after bad rows: %s", label, err.msg);
            if (st == VC_OK) {
                char l2[220];
                snprintf(l2, sizeof l2, "%s (graph replay after bad rows)", label);
                cmp_maps(l2, &cm[2], &b.map);
            }
            free(bad);
        }
        if (exec) cudaGraphExecDestroy(exec);
        vc_kmap_gpu_bounded_destroy(&b);
    }

    /* 3. bounds too small: the flag comes up, the check names the count needed */
    for (int which = 0; which < 2; which++) {
        if (which == 0 && d->type == VC_MAP_SUBM) continue; /* n_out = n_in: known up front */
        const int64_t need_out = cm[0].n_out, need_pairs = cm[0].n_pairs;
        if (which == 0 && need_out < 2) continue;
        if (which == 1 && need_pairs < 2) continue;
        const int64_t mo = which == 0 ? need_out - 1 : (d->type == VC_MAP_SUBM ? n : need_out);
        const int64_t mp = which == 1 ? need_pairs - 1 : need_pairs + 101;
        vc_kmap_gpu_bounded b;
        vc_err err = {{0}};
        vc_status st = vc_kmap_gpu_bounded_create(d, shape, batch, n, mo, mp, NULL, &b, &err);
        CHECK_MSG(st == VC_OK, "%s: create (small bounds): %s", label, err.msg);
        if (st != VC_OK) continue;
        cudaGraphExec_t exec = capture(&b, d_in, n, label);
        if (exec) {
            upload(d_in, frames[0], n);
            CUDA_OK(cudaGraphLaunch(exec, g_stream));
            st = vc_kmap_gpu_bounded_check(&b, g_stream, &err);
            CHECK_MSG(st == VC_ERR_CAPACITY, "%s: max_%s one short: %s (%s)", label,
                      which == 0 ? "out" : "pairs", vc_status_string(st), err.msg);
            if (which == 0)
                CHECK_MSG(b.map.n_out == need_out, "%s: n_out needed %lld, reported %lld",
                          label, (long long)need_out, (long long)b.map.n_out);
            else
                CHECK_MSG(b.map.n_pairs == need_pairs, "%s: n_pairs needed %lld, reported %lld",
                          label, (long long)need_pairs, (long long)b.map.n_pairs);
            int64_t st_words[VC_KMAP_GPU_STATUS_WORDS];
            CUDA_OK(cudaMemcpy(st_words, b.d_status, sizeof st_words, cudaMemcpyDeviceToHost));
            CHECK_MSG(st_words[VC_KMAP_GPU_FLAGS] & (which == 0 ? VC_KMAP_GPU_F_OUT_OVERFLOW
                                                                : VC_KMAP_GPU_F_PAIR_OVERFLOW),
                      "%s: overflow flag not set (flags 0x%llx)", label,
                      (unsigned long long)st_words[VC_KMAP_GPU_FLAGS]);
            cudaGraphExecDestroy(exec);
        }
        vc_kmap_gpu_bounded_destroy(&b);
    }

done:
    for (int f = 0; f < NFRAMES; f++) vc_kmap_data_free(&cm[f]);
}

int main(void)
{
    if (!gpu_usable()) return 77;
    vc_rng rng = vc_test_rng("test_gpu_graph");
    const char *san = getenv("VC_SANITIZE");
    const int small = san && atoi(san) != 0;
    if (small) printf("VC_SANITIZE: small sizes only\n");

    CUDA_OK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    const int32_t big[3] = {41, 1600, 1408}, huge[3] = {1000, 2000, 3000};
    struct {
        int64_t n;
        int32_t batch;
        const int32_t *shape;
    } sets[] = {{small ? 3000 : 100000, 1, big}, {small ? 1500 : 20000, 3, huge}};
    const vc_map_desc descs[] = {
        mkdesc(VC_MAP_SUBM, 3, 1, 0, 1),       mkdesc(VC_MAP_SUBM, 5, 1, 0, 2),
        mkdesc(VC_MAP_STRIDED, 3, 2, 1, 1),    mkdesc(VC_MAP_DOWNSAMPLE, 2, 2, 0, 1),
        mkdesc(VC_MAP_TRANSPOSED, 2, 2, 0, 1),
    };
    for (size_t si = 0; si < sizeof sets / sizeof sets[0]; si++) {
        const int64_t n = sets[si].n;
        int32_t *frames[NFRAMES];
        for (int f = 0; f < NFRAMES; f++)
            frames[f] = make_rows(&rng, n, sets[si].batch, sets[si].shape);
        int32_t *d_in = NULL;
        CUDA_OK(cudaMalloc((void **)&d_in, (size_t)n * 16));
        for (size_t di = 0; di < sizeof descs / sizeof descs[0]; di++)
            run_desc(&descs[di], frames, n, sets[si].batch, sets[si].shape, d_in);
        cudaFree(d_in);
        for (int f = 0; f < NFRAMES; f++) free(frames[f]);
    }
    cudaStreamDestroy(g_stream);
    TEST_END();
}

#else
int main(void)
{
    printf("test_gpu_graph: built without CUDA, skipped\n");
    return 77;
}
#endif
