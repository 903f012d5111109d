/* tests/gpu/bench_kmap.c - benchmark of the GPU hash table and GPU kernel-map builds (not a
 * ctest). Usage: bench_kmap [runs] [kitti.bin ...]
 *   - hash insert and lookup of 1M and 10M random keys: keys/s, effective GB/s against the
 *     ~3.0 TB/s copy floor, and random sectors/s against the ~135 G/s sector floor (ANCHORS §3);
 *   - map builds (subm k3, strided k3 s2 p1, downsample k2 s2) on synthetic scenes: a spinning
 *     128-beam LiDAR over a ground plane and a few walls (~100k voxels, SECOND grid 41x1600x1408)
 *     and an indoor room of surfaces (~300k voxels), and on KITTI .bin files given on the command
 *     line (float32 x, y, z, i; voxelized on the host by floor((p - min) / size));
 *   - a sort-and-binary-search subm k3 query (Minuet's idea) on the same data, compiled at run
 *     time with NVRTC; its keys are sorted on the host beforehand, so only the query is timed.
 * Timing: CUDA events, 3 warm-up runs, median of `runs` (default 25, at least 20) runs, inputs
 * rotated over 3 frames of each scene. Prints markdown tables to stdout. Seeds are fixed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv/kmap.h"
#include "conv/kmap_gpu.h"
#include "hash/hash.h"
#include "hash/hash_gpu.h"
#include "testutil.h"
#include "voxconv.h"

#ifdef VOXCONV_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <nvrtc.h>

#define NFRAMES 3
#define WARMUP 3

static int g_runs = 25;

#define DIE_IF(cond, ...)                                                                      \
    do {                                                                                       \
        if (cond) {                                                                            \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)
#define CUDA_CHECK(call)                                                                       \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        DIE_IF(e_ != cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));                    \
    } while (0)

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static float median(float *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_float);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- scenes ------------------------------------------------------------------------------ */

typedef struct scene {
    const char *name;
    int32_t shape[3];
    int32_t *rows[NFRAMES];
    int64_t n[NFRAMES];
    int nframes;
} scene;

typedef struct voxel_set {
    int32_t *rows;
    int64_t n, cap;
    vc_hash seen;
    vc_keypack kp;
} voxel_set;

static void vs_init(voxel_set *v, const int32_t shape[3], int64_t expected)
{
    v->n = 0;
    v->cap = expected;
    v->rows = malloc((size_t)v->cap * 16);
    vc_hash_init(&v->seen, expected);
    vc_keypack_init(&v->kp, 1, shape);
}

static void vs_add(voxel_set *v, int32_t z, int32_t y, int32_t x)
{
    if (!vc_key_in_range(&v->kp, 0, z, y, x)) return;
    if (vc_hash_insert_grow(&v->seen, vc_key_pack(&v->kp, 0, z, y, x), 0, NULL) !=
        VC_HASH_INSERTED)
        return;
    if (v->n == v->cap) {
        v->cap *= 2;
        v->rows = realloc(v->rows, (size_t)v->cap * 16);
    }
    int32_t *r = v->rows + 4 * v->n++;
    r[0] = 0;
    r[1] = z;
    r[2] = y;
    r[3] = x;
}

/* A vertical wall segment: x = c for y in [a, b] (axis 0), or y = c for x in [a, b] (axis 1). */
typedef struct wall {
    int axis;
    double c, a, b, h;
} wall;

/* One sweep of a 128-beam spinning LiDAR 1.73 m above a ground plane with walls; voxels of
 * 0.05 x 0.05 x 0.1 m over x [0, 70.4), y [-40, 40), z [-3, 1) (the SECOND / KITTI grid). */
static void gen_outdoor(vc_rng *rng, int32_t **rows, int64_t *n, const int32_t shape[3])
{
    const wall walls[] = {{0, 20, -15, -5, 6}, {1, 12, 5, 40, 8},  {0, 45, -30, 30, 10},
                          {1, -18, 10, 60, 5}, {0, 8, 3, 5, 1.5},  {1, 4, 8, 12, 1.5},
                          {1, -6, 15, 19, 1.6}, {0, 30, -9, -7, 1.5}};
    const int nw = (int)(sizeof walls / sizeof walls[0]);
    voxel_set v;
    vs_init(&v, shape, 1 << 17);
    const double pi = 3.14159265358979323846, h0 = 1.73;
    double yaw = vc_rng_float(rng) * 0.05;
    for (int beam = 0; beam < 128; beam++) {
        double el = (-24.8 + 26.8 * beam / 127.0) * pi / 180.0;
        for (int s = 0; s < 4096; s++) {
            double az = yaw + 2 * pi * s / 4096.0;
            double dx = cos(el) * cos(az), dy = cos(el) * sin(az), dz = sin(el);
            double best = 80.0;
            if (dz < 0) {
                double t = -h0 / dz;
                if (t < best) best = t;
            }
            for (int w = 0; w < nw; w++) {
                double d = walls[w].axis == 0 ? dx : dy;
                if (fabs(d) < 1e-9) continue;
                double t = walls[w].c / d;
                if (t <= 0 || t >= best) continue;
                double u = walls[w].axis == 0 ? t * dy : t * dx, z = h0 + t * dz;
                if (u >= walls[w].a && u <= walls[w].b && z >= 0 && z <= walls[w].h) best = t;
            }
            if (best >= 80.0) continue;
            double x = best * dx + 0.02 * vc_rng_float(rng);
            double y = best * dy + 0.02 * vc_rng_float(rng);
            double z = h0 + best * dz - 1.73 + 0.02 * vc_rng_float(rng); /* sensor frame */
            vs_add(&v, (int32_t)floor((z + 3.0) / 0.1), (int32_t)floor((y + 40.0) / 0.05),
                   (int32_t)floor(x / 0.05));
        }
    }
    vc_hash_free(&v.seen);
    *rows = v.rows;
    *n = v.n;
}

/* A 10 x 8 x 3 m room at 3 cm: floor, ceiling, four walls and a few boxes, partly open. */
static void gen_indoor(vc_rng *rng, int32_t **rows, int64_t *n, const int32_t shape[3])
{
    voxel_set v;
    vs_init(&v, shape, 1 << 19);
    const int32_t Z = shape[0], Y = shape[1], X = shape[2];
    for (int32_t y = 0; y < Y; y++)
        for (int32_t x = 0; x < X; x++) {
            vs_add(&v, 0, y, x);
            if ((x / 40 + y / 40) % 3) vs_add(&v, Z - 1, y, x); /* ceiling with gaps */
        }
    for (int32_t z = 0; z < Z; z++) {
        for (int32_t y = 0; y < Y; y++) {
            vs_add(&v, z, y, 0);
            vs_add(&v, z, y, X - 1);
        }
        for (int32_t x = 0; x < X; x++) {
            vs_add(&v, z, 0, x);
            vs_add(&v, z, Y - 1, x);
        }
    }
    for (int b = 0; b < 8; b++) { /* boxes standing on the floor: top and sides */
        int32_t x0 = 10 + (int32_t)vc_rng_int(rng, X - 80);
        int32_t y0 = 10 + (int32_t)vc_rng_int(rng, Y - 80);
        int32_t sx = 20 + (int32_t)vc_rng_int(rng, 50), sy = 20 + (int32_t)vc_rng_int(rng, 50);
        int32_t sz = 15 + (int32_t)vc_rng_int(rng, 30);
        for (int32_t y = y0; y < y0 + sy; y++)
            for (int32_t x = x0; x < x0 + sx; x++) vs_add(&v, sz, y, x);
        for (int32_t z = 1; z < sz; z++) {
            for (int32_t y = y0; y < y0 + sy; y++) {
                vs_add(&v, z, y, x0);
                vs_add(&v, z, y, x0 + sx - 1);
            }
            for (int32_t x = x0; x < x0 + sx; x++) {
                vs_add(&v, z, y0, x);
                vs_add(&v, z, y0 + sy - 1, x);
            }
        }
    }
    vc_hash_free(&v.seen);
    /* shuffle: a map builder must not rely on input order */
    for (int64_t i = v.n - 1; i > 0; i--) {
        int64_t j = vc_rng_int(rng, i + 1);
        for (int a = 0; a < 4; a++) {
            int32_t t = v.rows[4 * i + a];
            v.rows[4 * i + a] = v.rows[4 * j + a];
            v.rows[4 * j + a] = t;
        }
    }
    *rows = v.rows;
    *n = v.n;
}

/* KITTI .bin: float32 (x, y, z, intensity); voxels of 0.05 x 0.05 x 0.1 m from the minimum. */
static int load_kitti(const char *path, int32_t **rows, int64_t *n, int32_t shape[3])
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    int64_t np = bytes / 16;
    float *p = malloc((size_t)(np > 0 ? np : 1) * 16);
    if (fread(p, 16, (size_t)np, f) != (size_t)np) np = 0;
    fclose(f);
    const double size[3] = {0.05, 0.05, 0.1};
    double mn[3] = {1e30, 1e30, 1e30}, mx[3] = {-1e30, -1e30, -1e30};
    for (int64_t i = 0; i < np; i++)
        for (int a = 0; a < 3; a++) {
            double c = p[4 * i + a];
            if (!isfinite(c)) continue;
            if (c < mn[a]) mn[a] = c;
            if (c > mx[a]) mx[a] = c;
        }
    if (np == 0) {
        free(p);
        return -1;
    }
    /* shape is z, y, x */
    for (int a = 0; a < 3; a++) shape[2 - a] = (int32_t)floor((mx[a] - mn[a]) / size[a]) + 1;
    voxel_set v;
    vs_init(&v, shape, np);
    for (int64_t i = 0; i < np; i++) {
        int32_t c[3];
        for (int a = 0; a < 3; a++) c[a] = (int32_t)floor((p[4 * i + a] - mn[a]) / size[a]);
        vs_add(&v, c[2], c[1], c[0]);
    }
    vc_hash_free(&v.seen);
    free(p);
    *rows = v.rows;
    *n = v.n;
    return 0;
}

/* ---- hash throughput --------------------------------------------------------------------- */

static void bench_hash(int64_t n, vc_rng *rng)
{
    uint64_t *keys = malloc((size_t)n * 8);
    for (int64_t i = 0; i < n; i++) keys[i] = vc_rng_next(rng) >> 2; /* 62-bit keys */
    uint64_t *q = malloc((size_t)n * 8);
    for (int64_t i = 0; i < n; i++) q[i] = keys[i];
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = vc_rng_int(rng, i + 1);
        uint64_t t = q[i];
        q[i] = q[j];
        q[j] = t;
    }
    uint64_t *dk, *dq;
    int32_t *dout;
    CUDA_CHECK(cudaMalloc((void **)&dk, (size_t)n * 8));
    CUDA_CHECK(cudaMalloc((void **)&dq, (size_t)n * 8));
    CUDA_CHECK(cudaMalloc((void **)&dout, (size_t)n * 4));
    CUDA_CHECK(cudaMemcpy(dk, keys, (size_t)n * 8, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(dq, q, (size_t)n * 8, cudaMemcpyHostToDevice));
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    float *ti = malloc(sizeof(float) * (size_t)g_runs);
    float *tf = malloc(sizeof(float) * (size_t)g_runs);
    vc_hash_gpu h;
    int64_t cap = 0;
    for (int r = -WARMUP; r < g_runs; r++) {
        DIE_IF(vc_hash_gpu_create(&h, n, NULL) != VC_HASH_GPU_OK, "hash create failed");
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaEventRecord(e0, NULL));
        /* includes the one read-back of the insert counters (a stream sync) */
        DIE_IF(vc_hash_gpu_insert(&h, dk, NULL, n, NULL, NULL) != VC_HASH_GPU_OK, "insert failed");
        CUDA_CHECK(cudaEventRecord(e1, NULL));
        CUDA_CHECK(cudaEventSynchronize(e1));
        if (r >= 0) CUDA_CHECK(cudaEventElapsedTime(&ti[r], e0, e1));
        CUDA_CHECK(cudaEventRecord(e0, NULL));
        DIE_IF(vc_hash_gpu_find(&h, dq, n, dout, NULL) != VC_HASH_GPU_OK, "find failed");
        CUDA_CHECK(cudaEventRecord(e1, NULL));
        CUDA_CHECK(cudaEventSynchronize(e1));
        if (r >= 0) CUDA_CHECK(cudaEventElapsedTime(&tf[r], e0, e1));
        cap = h.capacity;
        vc_hash_gpu_destroy(&h, NULL);
    }
    float mi = median(ti, g_runs), mf = median(tf, g_runs);
    /* bytes: insert reads the key (8) and writes key + value slots (8 + 4); find reads the key,
     * the slot key and value and writes the result (8 + 8 + 4 + 4). Sectors: 2 random sectors
     * per key (key slot, value slot), probes past the home slot not counted. */
    double ki = n / (mi * 1e-3), kf = n / (mf * 1e-3);
    printf("| insert | %lld | %lld MB | %.3f | %.2f G | %.0f GB/s (%.1f%% of 3.0 TB/s) | "
           "%.1f G/s (%.1f%% of 135) |\n", (long long)n, (long long)(cap * 12 >> 20), mi,
           ki * 1e-9, ki * 20e-9, ki * 20e-9 / 30.0, ki * 2e-9, ki * 2e-9 / 1.35);
    printf("| lookup | %lld | %lld MB | %.3f | %.2f G | %.0f GB/s (%.1f%% of 3.0 TB/s) | "
           "%.1f G/s (%.1f%% of 135) |\n", (long long)n, (long long)(cap * 12 >> 20), mf,
           kf * 1e-9, kf * 24e-9, kf * 24e-9 / 30.0, kf * 2e-9, kf * 2e-9 / 1.35);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(dk);
    cudaFree(dq);
    cudaFree(dout);
    free(keys);
    free(q);
    free(ti);
    free(tf);
}

/* ---- map builds -------------------------------------------------------------------------- */

static void bench_build(const scene *sc, int32_t *const *d_rows, const char *label,
                        const vc_map_desc *d)
{
    float *t[6];
    for (int i = 0; i < 6; i++) t[i] = malloc(sizeof(float) * (size_t)g_runs);
    int64_t n_out = 0, n_pairs = 0;
    for (int r = -WARMUP; r < g_runs; r++) {
        int f = (r + WARMUP) % sc->nframes;
        vc_kmap_data m;
        vc_kmap_gpu_timing tm;
        vc_err err = {{0}};
        vc_status st = vc_kmap_build_gpu_timed(d_rows[f], sc->n[f], sc->shape, 1, d, NULL, &m,
                                               &tm, &err);
        DIE_IF(st != VC_OK, "%s %s: %s", sc->name, label, err.msg);
        if (f == 0) {
            n_out = m.n_out;
            n_pairs = m.n_pairs;
        }
        vc_kmap_data_free_gpu(&m);
        if (r < 0) continue;
        t[0][r] = tm.insert_ms;
        t[1][r] = tm.out_coords_ms;
        t[2][r] = tm.out_in_ms;
        t[3][r] = tm.pairs_ms;
        t[4][r] = tm.masks_ms;
        t[5][r] = tm.total_ms;
    }
    printf("| %s | %s | %lld | %lld | %lld |", sc->name, label, (long long)sc->n[0],
           (long long)n_out, (long long)n_pairs);
    for (int i = 0; i < 6; i++) printf(" %.3f |", median(t[i], g_runs));
    printf("\n");
    for (int i = 0; i < 6; i++) free(t[i]);
}

/* ---- sort-and-binary-search subm k3 (Minuet's idea), compiled with NVRTC -------------------- */

static const char *kMinuetSrc =
    "extern \"C\" __global__ void query(const unsigned long long *sorted, const int *order,\n"
    "    long long n, const int *coords, int sz, int sy, int sx, int Z, int Y, int X,\n"
    "    int *out_in)\n"
    "{\n"
    "  long long total = n * 27;\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;\n"
    "       i += (long long)gridDim.x * blockDim.x) {\n"
    "    long long p = i / 27; int k = (int)(i - p * 27);\n"
    "    const int *c = coords + 4 * p;\n"
    "    int z = c[1] + k / 9 - 1, y = c[2] + (k / 3) % 3 - 1, x = c[3] + k % 3 - 1;\n"
    "    int v = -1;\n"
    "    if (z >= 0 && z < Z && y >= 0 && y < Y && x >= 0 && x < X) {\n"
    "      /* batch size 1: the batch field has no bits */\n"
    "      unsigned long long key =\n"
    "        ((unsigned long long)(unsigned)z << sz) | ((unsigned long long)(unsigned)y << sy) |\n"
    "        ((unsigned long long)(unsigned)x << sx);\n"
    "      long long lo = 0, hi = n;\n"
    "      while (lo < hi) { long long mid = (lo + hi) >> 1;\n"
    "        if (sorted[mid] < key) lo = mid + 1; else hi = mid; }\n"
    "      if (lo < n && sorted[lo] == key) v = order[lo];\n"
    "    }\n"
    "    out_in[i] = v;\n"
    "  }\n"
    "}\n";

static CUfunction g_query;

static int minuet_init(void)
{
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, kMinuetSrc, "minuet.cu", 0, NULL, NULL) != NVRTC_SUCCESS)
        return -1;
    int major = 0, minor = 0, dev = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    char arch[64];
    snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d", major, minor);
    const char *opts[] = {arch};
    if (nvrtcCompileProgram(prog, 1, opts) != NVRTC_SUCCESS) {
        size_t len = 0;
        nvrtcGetProgramLogSize(prog, &len);
        char *log = malloc(len + 1);
        nvrtcGetProgramLog(prog, log);
        fprintf(stderr, "nvrtc: %s\n", log);
        free(log);
        return -1;
    }
    size_t size = 0;
    nvrtcGetCUBINSize(prog, &size);
    char *cubin = malloc(size);
    nvrtcGetCUBIN(prog, cubin);
    nvrtcDestroyProgram(&prog);
    CUmodule mod;
    int rc = cuModuleLoadData(&mod, cubin) == CUDA_SUCCESS &&
                     cuModuleGetFunction(&g_query, mod, "query") == CUDA_SUCCESS
                 ? 0
                 : -1;
    free(cubin);
    return rc;
}

typedef struct key_row {
    uint64_t key;
    int32_t row;
} key_row;

static int cmp_key_row(const void *a, const void *b)
{
    uint64_t x = ((const key_row *)a)->key, y = ((const key_row *)b)->key;
    return (x > y) - (x < y);
}

/* Times the binary-search query of a subm k3 map and checks it against vc_kmap_build_gpu. */
static void bench_minuet(const scene *sc, int32_t *const *d_rows)
{
    uint64_t *d_sorted[NFRAMES];
    int32_t *d_order[NFRAMES], *d_out = NULL;
    int32_t sh[3];
    vc_keypack kp;
    vc_keypack_init(&kp, 1, sc->shape);
    for (int a = 0; a < 3; a++) sh[a] = kp.shift[1 + a];
    int64_t nmax = 0;
    for (int f = 0; f < sc->nframes; f++) {
        int64_t n = sc->n[f];
        if (n > nmax) nmax = n;
        key_row *kr = malloc((size_t)n * sizeof *kr);
        for (int64_t i = 0; i < n; i++) {
            const int32_t *r = sc->rows[f] + 4 * i;
            kr[i].key = vc_key_pack(&kp, r[0], r[1], r[2], r[3]);
            kr[i].row = (int32_t)i;
        }
        qsort(kr, (size_t)n, sizeof *kr, cmp_key_row);
        uint64_t *k = malloc((size_t)n * 8);
        int32_t *o = malloc((size_t)n * 4);
        for (int64_t i = 0; i < n; i++) {
            k[i] = kr[i].key;
            o[i] = kr[i].row;
        }
        CUDA_CHECK(cudaMalloc((void **)&d_sorted[f], (size_t)n * 8));
        CUDA_CHECK(cudaMalloc((void **)&d_order[f], (size_t)n * 4));
        CUDA_CHECK(cudaMemcpy(d_sorted[f], k, (size_t)n * 8, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(d_order[f], o, (size_t)n * 4, cudaMemcpyHostToDevice));
        free(kr);
        free(k);
        free(o);
    }
    CUDA_CHECK(cudaMalloc((void **)&d_out, (size_t)nmax * 27 * 4));
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    float *t = malloc(sizeof(float) * (size_t)g_runs);
    for (int r = -WARMUP; r < g_runs; r++) {
        int f = (r + WARMUP) % sc->nframes;
        long long n = sc->n[f];
        int Z = sc->shape[0], Y = sc->shape[1], X = sc->shape[2], sz = sh[0], sy = sh[1],
            sx = sh[2];
        void *args[] = {&d_sorted[f], &d_order[f], &n, (void *)&d_rows[f], &sz, &sy, &sx,
                        &Z, &Y, &X, &d_out};
        unsigned blocks = (unsigned)((n * 27 + 255) / 256);
        CUDA_CHECK(cudaEventRecord(e0, NULL));
        DIE_IF(cuLaunchKernel(g_query, blocks ? blocks : 1, 1, 1, 256, 1, 1, 0, NULL, args, NULL) !=
                   CUDA_SUCCESS, "launching the binary-search query failed");
        CUDA_CHECK(cudaEventRecord(e1, NULL));
        CUDA_CHECK(cudaEventSynchronize(e1));
        if (r >= 0) CUDA_CHECK(cudaEventElapsedTime(&t[r], e0, e1));
        if (r == g_runs - 1 || r == -WARMUP) {
            /* the last run's frame: the result must equal the hash-built out_in */
            vc_map_desc d = VC_MAP_DESC_INIT;
            vc_kmap_data m;
            vc_err err = {{0}};
            DIE_IF(vc_kmap_build_gpu(d_rows[f], n, sc->shape, 1, &d, NULL, &m, &err) != VC_OK,
                   "%s", err.msg);
            int32_t *a = malloc((size_t)n * 27 * 4), *b = malloc((size_t)n * 27 * 4);
            CUDA_CHECK(cudaMemcpy(a, m.out_in, (size_t)n * 27 * 4, cudaMemcpyDeviceToHost));
            CUDA_CHECK(cudaMemcpy(b, d_out, (size_t)n * 27 * 4, cudaMemcpyDeviceToHost));
            DIE_IF(memcmp(a, b, (size_t)n * 27 * 4) != 0, "%s: binary-search out_in differs "
                   "from the hash-built one", sc->name);
            free(a);
            free(b);
            vc_kmap_data_free_gpu(&m);
        }
    }
    printf("| %s | sorted keys + binary search, subm k3 out_in only | %lld | %.3f |\n", sc->name,
           (long long)sc->n[0], median(t, g_runs));
    free(t);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    for (int f = 0; f < sc->nframes; f++) {
        cudaFree(d_sorted[f]);
        cudaFree(d_order[f]);
    }
    cudaFree(d_out);
}

int main(int argc, char **argv)
{
    int count = 0;
    (void)vc_t_pass; /* the test counters of testutil.h are unused here */
    (void)vc_t_fail;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1) {
        printf("bench_kmap: no CUDA device\n");
        return 77;
    }
    int argi = 1;
    if (argc > 1 && atoi(argv[1]) > 0) {
        g_runs = atoi(argv[1]);
        if (g_runs < 20) g_runs = 20;
        argi = 2;
    }
    CUDA_CHECK(cudaFree(0)); /* creates the primary context the driver API calls use */
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    int clock_khz = 0, mem_khz = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, 0);
    printf("# bench_kmap\n\ndevice: %s, %d SMs, L2 %d MB, max SM clock %d MHz, memory clock %d "
           "MHz; median of %d runs after %d warm-up, CUDA events\n\n", prop.name,
           prop.multiProcessorCount, prop.l2CacheSize >> 20, clock_khz / 1000, mem_khz / 1000,
           g_runs, WARMUP);

    vc_rng rng = {0x5eed5eed12345ull};
    printf("## Hash table (random 62-bit keys, 12-byte slots at load <= 0.5)\n\n");
    printf("| op | keys | table | ms | keys/s | effective bandwidth | random sectors |\n");
    printf("|---|---|---|---|---|---|---|\n");
    bench_hash(1000000, &rng);
    bench_hash(10000000, &rng);

    scene scenes[8];
    int ns = 0;
    {
        scene *s = &scenes[ns++];
        memset(s, 0, sizeof *s);
        s->name = "outdoor 128-beam (synthetic)";
        s->shape[0] = 41;
        s->shape[1] = 1600;
        s->shape[2] = 1408;
        s->nframes = NFRAMES;
        for (int f = 0; f < NFRAMES; f++) gen_outdoor(&rng, &s->rows[f], &s->n[f], s->shape);
    }
    {
        scene *s = &scenes[ns++];
        memset(s, 0, sizeof *s);
        s->name = "indoor room (synthetic)";
        s->shape[0] = 100;
        s->shape[1] = 267;
        s->shape[2] = 334;
        s->nframes = NFRAMES;
        for (int f = 0; f < NFRAMES; f++) gen_indoor(&rng, &s->rows[f], &s->n[f], s->shape);
    }
    for (; argi < argc && ns < 8; argi++) {
        scene *s = &scenes[ns];
        memset(s, 0, sizeof *s);
        if (load_kitti(argv[argi], &s->rows[0], &s->n[0], s->shape) != 0) {
            fprintf(stderr, "bench_kmap: cannot read %s\n", argv[argi]);
            continue;
        }
        s->name = argv[argi];
        s->nframes = 1;
        ns++;
    }

    printf("\n## Map builds (stage medians in ms; stages per vc_kmap_gpu_timing)\n\n");
    printf("| scene | map | voxels | outputs | pairs | insert | out coords | out_in | pairs | "
           "masks+perm | total |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
    int32_t *d_rows[8][NFRAMES];
    vc_map_desc subm = VC_MAP_DESC_INIT, strided = VC_MAP_DESC_INIT, down = VC_MAP_DESC_INIT;
    strided.type = VC_MAP_STRIDED;
    for (int a = 0; a < 3; a++) {
        strided.stride[a] = 2;
        strided.padding[a] = 1;
        down.kernel[a] = 2;
        down.stride[a] = 2;
    }
    down.type = VC_MAP_DOWNSAMPLE;
    for (int i = 0; i < ns; i++) {
        for (int f = 0; f < scenes[i].nframes; f++) {
            size_t b = (size_t)scenes[i].n[f] * 16;
            CUDA_CHECK(cudaMalloc((void **)&d_rows[i][f], b ? b : 16));
            CUDA_CHECK(cudaMemcpy(d_rows[i][f], scenes[i].rows[f], b, cudaMemcpyHostToDevice));
        }
        bench_build(&scenes[i], d_rows[i], "subm k3", &subm);
        bench_build(&scenes[i], d_rows[i], "strided k3 s2 p1", &strided);
        bench_build(&scenes[i], d_rows[i], "downsample k2 s2", &down);
    }

    printf("\n## Sorted-array alternative (keys sorted on the host beforehand; query only)\n\n");
    printf("| scene | method | voxels | ms |\n|---|---|---|---|\n");
    if (minuet_init() != 0) {
        printf("| - | NVRTC compile failed | - | - |\n");
    } else {
        for (int i = 0; i < ns; i++) bench_minuet(&scenes[i], d_rows[i]);
    }
    for (int i = 0; i < ns; i++)
        for (int f = 0; f < scenes[i].nframes; f++) {
            cudaFree(d_rows[i][f]);
            free(scenes[i].rows[f]);
        }
    return 0;
}

#else
int main(void)
{
    printf("bench_kmap: built without CUDA\n");
    return 77;
}
#endif
