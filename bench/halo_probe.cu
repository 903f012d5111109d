// bench/halo_probe.cu - a probe of one design, not a kernel of the library: the
// subm k3 layer C -> C (fp16, fp32 sums, bias + ReLU) on tiles of 64 rows in
// Morton order, each CTA copying its tile's halo (the distinct input rows its
// 64 x 27 pairs read) into shared memory once, then running every tap of the
// tile's taps from there (ldmatrix with a row address a lane, a local index per
// row and tap), W by a cp.async ring of one tap a stage. Against the library's
// tiles, which gather every tap's rows from global memory in mask-sorted order,
// it trades gathers (bench/halo_model.py: 2.3-6x fewer row loads) for taps (the
// tile's OR of masks: 13-26 of 27 against 5-17). Here the features are stored in
// Morton order; the library could keep its own order and scatter a tile's outputs
// by the Morton permutation instead. The tables (halo list, local indices,
// tap masks) are made here on the host; the library would make them with the
// map. Timed as bench_conv times a layer (a 256 MB memset before each run
// flushes L2, CUDA events around the launch, median), checked against a CPU sum
// on every 7th row. Input: the scenes `bench_conv --dump-only DIR` writes
// (DIR/scenes.tsv, DIR/sceneI.npy).
//   nvcc -O3 -std=c++17 -arch=sm_90 -I. -Iinclude -o /tmp/halo_probe bench/halo_probe.cu
//   /tmp/halo_probe DIR [runs]
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "gemm/mainloop.cuh"

namespace
{

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));     \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

const int kTaps = 27;
const uint16_t kNone = 0xffff;

// The tensor-core kernel's swizzle (gemm/mainloop.cuh, swz) for rows of CH 16-byte units:
// ldmatrix's eight rows of a phase spread over the banks.
template <int CH> __device__ __forceinline__ uint32_t hswz(int r, int u)
{
    return vcg::swz<CH, CH >= 8 ? 1 : 8 / CH>(r, u);
}

// meta[t] = {halo offset, halo rows, tap mask, 0}; halo: input rows; lidx[t][tap][row]: the
// row's neighbour at tap as an index into the tile's halo (kNone: none). hcap: the largest
// halo of any tile (shared memory is sized by it; row hcap is a row of zeros). W by a ring of
// S stages of P taps each (a tap past the walk's end: zeros, its rows the zero row), one
// barrier a stage. R: the tile's rows (a warp a 16-row slab: 2R threads).
template <int C, int P, int S, int R> __global__ void __launch_bounds__(2 * R)
    halo_kernel(const __half *X, const __half *Wt, const float *bias, __half *Y, int n,
                const int4 *meta, const int *halo, const uint16_t *lidx, int hcap)
{
    constexpr int CH = C * 2 / 16, kRows = R, kThreads = 2 * R, TB = C * C * 2;
    constexpr int WB = S * P * TB; // W's bytes
    extern __shared__ __align__(128) uint8_t sm[];
    const uint32_t s_w = vcg::smem_addr(sm);
    const uint32_t s_h = s_w + WB;
    uint16_t *s_l = reinterpret_cast<uint16_t *>(sm + WB + (hcap + 1) * C * 2);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int4 m = meta[blockIdx.x];
    uint32_t lm = (uint32_t)m.z, cm = lm;
    const uint8_t *lsrc =
        reinterpret_cast<const uint8_t *>(lidx + (size_t)blockIdx.x * kTaps * kRows);
    for (int j = tid; j < kTaps * kRows * 2 / 16; j += kThreads)
        vcg::cp_async<16>(vcg::smem_addr(s_l) + j * 16, lsrc + j * 16, 16);
    for (int j = tid; j < m.y * CH; j += kThreads) {
        const int i = j / CH, u = j % CH;
        vcg::cp_async<16>(s_h + hswz<CH>(i, u), X + (size_t)halo[m.x + i] * C + u * 8, 16);
    }
    for (int u = tid; u < CH; u += kThreads)
        *reinterpret_cast<uint4 *>(sm + WB + hswz<CH>(hcap, u)) = make_uint4(0, 0, 0, 0);
    // the next P taps of lm into a stage (none left: zeros)
    auto load_stage = [&](int stage) {
#pragma unroll
        for (int q = 0; q < P; q++) {
            const int t = lm ? __ffs(lm) - 1 : -1;
            lm &= lm - 1;
            for (int j = tid; j < C * CH; j += kThreads) {
                const int nn = j / CH, u = j % CH;
                vcg::cp_async<16>(s_w + (stage * P + q) * TB + hswz<CH>(nn, u),
                                  Wt + ((size_t)(t < 0 ? 0 : t) * C + nn) * C + u * 8,
                                  t < 0 ? 0 : 16);
            }
        }
    };
#pragma unroll
    for (int s = 0; s < S - 1; s++) {
        if (lm) load_stage(s);
        vcg::cp_async_commit();
    }
    float acc[C / 8][4];
#pragma unroll
    for (int j = 0; j < C / 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
    const int r16 = warp * 16 + (lane & 15);
    int stage = 0;
    while (cm) {
        int tq[P];
#pragma unroll
        for (int q = 0; q < P; q++) {
            tq[q] = cm ? __ffs(cm) - 1 : -1;
            cm &= cm - 1;
        }
        vcg::cp_async_wait<S - 2>();
        __syncthreads();
        if (lm) load_stage((stage + S - 1) % S);
        vcg::cp_async_commit();
#pragma unroll
        for (int q = 0; q < P; q++) {
            const uint16_t li = tq[q] < 0 ? kNone : s_l[tq[q] * kRows + r16];
            const int hr = li == kNone ? hcap : li;
            const uint32_t wb = s_w + (stage * P + q) * TB;
#pragma unroll
            for (int ks = 0; ks < C / 16; ks++) {
                uint32_t a[4];
                vcg::ldmatrix_x4(a, s_h + hswz<CH>(hr, ks * 2 + (lane >> 4)));
#pragma unroll
                for (int nj = 0; nj < C / 8; nj += 2) {
                    const int mat = lane >> 3;
                    uint32_t b[4];
                    vcg::ldmatrix_x4(b, wb + hswz<CH>((nj + (mat >> 1)) * 8 + (lane & 7),
                                                      ks * 2 + (mat & 1)));
                    vcg::mma<__half>(acc[nj], a, b[0], b[1]);
                    vcg::mma<__half>(acc[nj + 1], a, b[2], b[3]);
                }
            }
        }
        stage = stage + 1 == S ? 0 : stage + 1;
    }
    vcg::cp_async_wait<0>(); // a tile of no taps leaves its copies in flight
    const int g = lane >> 2, q = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int row = blockIdx.x * kRows + warp * 16 + g + 8 * h;
        if (row >= n) continue;
#pragma unroll
        for (int nj = 0; nj < C / 8; nj++) {
            const int col = nj * 8 + 2 * q;
            const float v0 = fmaxf(acc[nj][2 * h] + bias[col], 0.f);
            const float v1 = fmaxf(acc[nj][2 * h + 1] + bias[col + 1], 0.f);
            *reinterpret_cast<__half2 *>(Y + (size_t)row * C + col) = __floats2half2_rn(v0, v1);
        }
    }
}

struct Scene {
    std::string name;
    std::vector<int32_t> c; // n x 4: b, z, y, x
    int64_t n = 0;
    int Z = 0, Y = 0, X = 0;
};

bool load_npy(const std::string &path, std::vector<int32_t> *v, int64_t *rows)
{
    FILE *f = fopen(path.c_str(), "rb");
    if (!f) return false;
    char magic[8];
    uint16_t hl = 0;
    if (fread(magic, 1, 8, f) != 8 || fread(&hl, 2, 1, f) != 1) return fclose(f), false;
    std::string h(hl, ' ');
    if (fread(&h[0], 1, hl, f) != hl) return fclose(f), false;
    const size_t p = h.find("'shape': (");
    if (h.find("<i4") == std::string::npos || p == std::string::npos) return fclose(f), false;
    *rows = atoll(h.c_str() + p + 10);
    v->resize((size_t)*rows * 4);
    const bool ok = fread(v->data(), 4, v->size(), f) == v->size();
    fclose(f);
    return ok;
}

uint64_t morton(const int32_t *c)
{
    uint64_t k = 0;
    for (int bit = 0; bit < 16; bit++)
        for (int d = 0; d < 3; d++) k |= (uint64_t)((c[3 - d] >> bit) & 1) << (3 * bit + d);
    return k | (uint64_t)c[0] << 48;
}

template <int C, int P, int S, int kRows> void run(const Scene &sc, int runs, int warm, void *flush)
{
    const int64_t n = sc.n;
    // rows in Morton order: that order is the features' layout
    std::vector<int64_t> ord(n);
    for (int64_t i = 0; i < n; i++) ord[i] = i;
    std::vector<uint64_t> mk(n);
    for (int64_t i = 0; i < n; i++) mk[i] = morton(&sc.c[4 * i]);
    std::stable_sort(ord.begin(), ord.end(), [&](int64_t a, int64_t b) { return mk[a] < mk[b]; });
    auto key = [&](const int32_t *c, int dz, int dy, int dx) {
        return ((((int64_t)c[0] * (sc.Z + 2) + c[1] + 1 + dz) * (sc.Y + 2) + c[2] + 1 + dy) *
                    (sc.X + 2) +
                c[3] + 1 + dx);
    };
    std::unordered_map<int64_t, int32_t> at;
    at.reserve(2 * n);
    for (int64_t r = 0; r < n; r++) at[key(&sc.c[4 * ord[r]], 0, 0, 0)] = (int32_t)r;
    std::vector<int32_t> nb((size_t)n * kTaps, -1);
    int64_t pairs = 0;
    for (int64_t r = 0; r < n; r++) {
        int t = 0;
        for (int dz = -1; dz <= 1; dz++)
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++, t++) {
                    auto it = at.find(key(&sc.c[4 * ord[r]], dz, dy, dx));
                    if (it != at.end()) nb[r * kTaps + t] = it->second, pairs++;
                }
    }
    const int64_t tiles = (n + kRows - 1) / kRows;
    std::vector<int4> meta(tiles);
    std::vector<int32_t> halo;
    std::vector<uint16_t> lidx((size_t)tiles * kTaps * kRows, kNone);
    int hcap = 0;
    int64_t tap_sum = 0;
    for (int64_t t = 0; t < tiles; t++) {
        std::vector<int32_t> u;
        uint32_t mask = 0;
        for (int64_t r = t * kRows; r < std::min(n, (t + 1) * kRows); r++)
            for (int k = 0; k < kTaps; k++)
                if (nb[r * kTaps + k] >= 0) u.push_back(nb[r * kTaps + k]), mask |= 1u << k;
        std::sort(u.begin(), u.end());
        u.erase(std::unique(u.begin(), u.end()), u.end());
        meta[t] = make_int4((int)halo.size(), (int)u.size(), (int)mask, 0);
        for (int64_t r = t * kRows; r < std::min(n, (t + 1) * kRows); r++)
            for (int k = 0; k < kTaps; k++)
                if (nb[r * kTaps + k] >= 0)
                    lidx[(t * kTaps + k) * kRows + (r - t * kRows)] =
                        (uint16_t)(std::lower_bound(u.begin(), u.end(), nb[r * kTaps + k]) -
                                   u.begin());
        halo.insert(halo.end(), u.begin(), u.end());
        hcap = std::max(hcap, (int)u.size());
        tap_sum += __builtin_popcount(mask);
    }
    if (hcap >= kNone) {
        printf("%s C=%d: a halo of %d rows does not fit 16-bit indices\n", sc.name.c_str(), C,
               hcap);
        return;
    }
    // operands
    srand(1234 + C);
    auto rnd = [] { return (float)rand() / RAND_MAX * 2.f - 1.f; };
    std::vector<__half> x((size_t)n * C), w((size_t)kTaps * C * C);
    std::vector<float> bias(C);
    for (auto &v : x) v = __float2half(rnd());
    const float ws = 1.f / sqrtf(12.f * C);
    for (auto &v : w) v = __float2half(rnd() * ws);
    for (auto &v : bias) v = 0.1f * rnd();
    __half *dX, *dW, *dY;
    float *dB;
    int4 *dM;
    int *dH;
    uint16_t *dL;
    CK(cudaMalloc(&dX, x.size() * 2));
    CK(cudaMalloc(&dW, w.size() * 2));
    CK(cudaMalloc(&dY, x.size() * 2));
    CK(cudaMalloc(&dB, C * 4));
    CK(cudaMalloc(&dM, tiles * sizeof(int4)));
    CK(cudaMalloc(&dH, std::max<size_t>(1, halo.size()) * 4));
    CK(cudaMalloc(&dL, lidx.size() * 2));
    CK(cudaMemcpy(dX, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dW, w.data(), w.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dB, bias.data(), C * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dM, meta.data(), tiles * sizeof(int4), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dH, halo.data(), halo.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dL, lidx.data(), lidx.size() * 2, cudaMemcpyHostToDevice));
    CK(cudaMemset(dY, 0xff, x.size() * 2)); // poison: NaN halves
    const size_t smem = (size_t)S * P * C * C * 2 + (size_t)(hcap + 1) * C * 2 +
                        kTaps * kRows * 2;
    CK(cudaFuncSetAttribute(halo_kernel<C, P, S, kRows>,
                            cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, halo_kernel<C, P, S, kRows>,
                                                     2 * kRows, smem));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int r = -warm; r < runs; r++) {
        CK(cudaMemsetAsync(flush, r & 0xff, 256 << 20));
        CK(cudaEventRecord(e0));
        halo_kernel<C, P, S, kRows>
            <<<(unsigned)tiles, 2 * kRows, smem>>>(dX, dW, dB, dY, (int)n, dM, dH, dL, hcap);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (r >= 0) t.push_back(ms);
    }
    CK(cudaGetLastError());
    std::sort(t.begin(), t.end());
    std::vector<__half> y(x.size());
    CK(cudaMemcpy(y.data(), dY, y.size() * 2, cudaMemcpyDeviceToHost));
    double maxerr = 0, maxref = 0;
    int64_t checked = 0, bad = 0;
    for (int64_t r = 0; r < n; r += 7) {
        for (int o = 0; o < C; o++) {
            float s = 0;
            for (int k = 0; k < kTaps; k++) {
                const int32_t i = nb[r * kTaps + k];
                if (i < 0) continue;
                for (int c = 0; c < C; c++)
                    s += __half2float(x[(size_t)i * C + c]) *
                         __half2float(w[((size_t)k * C + o) * C + c]);
            }
            const float ref = fmaxf(s + bias[o], 0.f), got = __half2float(y[(size_t)r * C + o]);
            const double err = fabs((double)got - ref);
            if (!(err <= 2e-3 + 4e-3 * fabs(ref))) bad++;
            maxerr = std::max(maxerr, std::isnan(err) ? 1e9 : err);
            maxref = std::max(maxref, (double)fabs(ref));
            checked++;
        }
    }
    printf("| %s | %d -> %d, %d taps x %d stages, %d rows | %lld | %.1f | %lld | %.1f | %d | %.1f | "
           "%d | %.2f | %.2f | %s "
           "(%lld of %lld, max err %.2g of %.2g) |\n",
           sc.name.c_str(), C, C, P, S, kRows, (long long)n,
           (double)pairs / n, (long long)tiles, (double)halo.size() / tiles, hcap,
           (double)tap_sum / tiles, per_sm, 1e3 * t[t.size() / 2], 1e3 * t[t.size() / 10],
           bad ? "WRONG" : "ok", (long long)bad, (long long)checked, maxerr, maxref);
    fflush(stdout);
    cudaFree(dX), cudaFree(dW), cudaFree(dY), cudaFree(dB), cudaFree(dM), cudaFree(dH),
        cudaFree(dL);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
}

} // namespace

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: halo_probe DIR [runs [warm-up runs [scene name part]]]\n");
        return 2;
    }
    const std::string dir = argv[1];
    const int runs = argc > 2 ? atoi(argv[2]) : 30, warm = argc > 3 ? atoi(argv[3]) : 5;
    const char *only = argc > 4 ? argv[4] : NULL; // scenes whose name has it
    FILE *f = fopen((dir + "/scenes.tsv").c_str(), "r");
    if (!f) {
        fprintf(stderr, "%s/scenes.tsv: cannot open\n", dir.c_str());
        return 2;
    }
    void *flush = NULL;
    CK(cudaMalloc(&flush, 256 << 20));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("%s; halo tiles (a warp a 16-row slab), W in a ring of stages of one or two taps; "
           "median and p10 of %d runs, L2 flushed\n\n",
           prop.name, runs);
    printf("| scene | layer | rows | pairs a row | tiles | halo rows a tile | "
           "largest halo | taps "
           "a tile | CTAs an SM | us | p10 us | check "
           "|\n|---|---|---:|---:|---:|---:|---:|---:|"
           "---:|---:|---:|---|\n");
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        char file[256], name[512];
        Scene sc;
        if (sscanf(line, "%255[^\t]\t%d\t%d\t%d\t%511[^\n]", file, &sc.Z, &sc.Y, &sc.X, name) != 5)
            continue;
        sc.name = name;
        if (!load_npy(dir + "/" + file, &sc.c, &sc.n)) {
            fprintf(stderr, "%s/%s: not an int32 npy\n", dir.c_str(), file);
            continue;
        }
        if (only && !strstr(name, only)) continue;
        run<16, 1, 3, 64>(sc, runs, warm, flush);
        run<16, 2, 2, 64>(sc, runs, warm, flush);
        run<16, 2, 3, 64>(sc, runs, warm, flush);
        run<32, 1, 3, 64>(sc, runs, warm, flush);
        run<32, 2, 2, 64>(sc, runs, warm, flush);
        run<32, 2, 3, 64>(sc, runs, warm, flush);
        run<64, 1, 3, 64>(sc, runs, warm, flush);
        run<64, 2, 2, 64>(sc, runs, warm, flush);
    }
    fclose(f);
    cudaFree(flush);
    return 0;
}
