// bench/halo_probe.cu - a probe of one design, not a kernel of the library: the subm k3 layer
// C -> C (fp16, fp32 sums, bias + ReLU) on tiles of 64 rows in Morton order, each CTA copying its
// tile's halo (the distinct input rows its 64 x 27 pairs read) into shared memory once, then
// running every tap of the tile's taps from there (ldmatrix with a row address a lane, a local
// index per row and tap), W by a cp.async ring of taps; optionally with the next tap's index and
// A fragments loaded before this tap's MMAs (PF). Against the library's tiles, which gather
// every tap's rows from global memory in mask-sorted order, it trades gathers
// (bench/halo_model.py: 2.3-6x fewer row loads) for taps (the tile's OR of masks: 13-26 of 27
// against 5-17). Here the features are stored in Morton order, so a tile's outputs are
// contiguous; the library could keep its row order and scatter a tile's outputs by the Morton
// permutation instead. The kernel's tables (halo lists, local indices, tap masks) are made on
// the host; gpu_tables times making them on the GPU from the map's own arrays (a Morton sort,
// then a CTA a tile) and checks them entry by entry. Timed as bench_conv times a layer (a
// 256 MB memset before each run flushes L2, CUDA events around the launches, median); the
// layer checked against a CPU sum on every 7th row. Input: the scenes `bench_conv --dump-only
// DIR` writes (DIR/scenes.tsv, DIR/sceneI.npy).
// Built apart from the suite (bench/CMakeLists.txt: not in ALL; bench/run_halo_probe builds it):
//   cmake --build BUILD --target halo_probe
//   BUILD/bench/halo_probe DIR [runs [warm-up runs [scene name part]]]
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

#include <cub/cub.cuh>

#include "gemm/mainloop.cuh"
#include "voxconv.h"

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
// barrier a stage. R: the tile's rows (a warp a 16-row slab: 2R threads). PF: A one tap ahead.
template <int C, int P, int S, int R, bool PF> __global__ void __launch_bounds__(2 * R)
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
    // A's fragments of tap t for this lane's rows, from the halo (resident once group 0 is in)
    auto load_a = [&](int t, uint32_t(&a)[C / 16][4]) {
        const uint16_t li = t < 0 ? kNone : s_l[t * kRows + r16];
        const int hr = li == kNone ? hcap : li;
#pragma unroll
        for (int ks = 0; ks < C / 16; ks++)
            vcg::ldmatrix_x4(a[ks], s_h + hswz<CH>(hr, ks * 2 + (lane >> 4)));
    };
    // this tap's MMAs: A's fragments a, W's from slot wb
    auto mmas = [&](const uint32_t(&a)[C / 16][4], uint32_t wb) {
#pragma unroll
        for (int ks = 0; ks < C / 16; ks++) {
#pragma unroll
            for (int nj = 0; nj < C / 8; nj += 2) {
                const int mat = lane >> 3;
                uint32_t b[4];
                vcg::ldmatrix_x4(b, wb + hswz<CH>((nj + (mat >> 1)) * 8 + (lane & 7),
                                                  ks * 2 + (mat & 1)));
                vcg::mma<__half>(acc[nj], a[ks], b[0], b[1]);
                vcg::mma<__half>(acc[nj + 1], a[ks], b[2], b[3]);
            }
        }
    };
    if constexpr (PF) {
        // A one tap ahead: the next tap's index and fragments are loaded before this tap's
        // MMAs, so that their two shared-memory round trips overlap the MMAs.
        static_assert(P == 1, "A one tap ahead walks one tap a stage");
        vcg::cp_async_wait<S - 2>(); // group 0: the halo, the indices, the first tap's W
        __syncthreads();
        int t = cm ? __ffs(cm) - 1 : -1;
        cm &= cm - 1;
        uint32_t a[C / 16][4];
        load_a(t, a);
        for (bool first = true; t >= 0; first = false) {
            if (!first) {
                vcg::cp_async_wait<S - 2>();
                __syncthreads();
            }
            if (lm) load_stage((stage + S - 1) % S);
            vcg::cp_async_commit();
            const int tn = cm ? __ffs(cm) - 1 : -1;
            cm &= cm - 1;
            uint32_t an[C / 16][4];
            if (tn >= 0) load_a(tn, an);
            mmas(a, s_w + stage * TB);
#pragma unroll
            for (int ks = 0; ks < C / 16; ks++)
#pragma unroll
                for (int i = 0; i < 4; i++) a[ks][i] = an[ks][i];
            t = tn;
            stage = stage + 1 == S ? 0 : stage + 1;
        }
    } else {
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
                uint32_t a[C / 16][4];
                load_a(tq[q], a);
                mmas(a, s_w + (stage * P + q) * TB);
            }
            stage = stage + 1 == S ? 0 : stage + 1;
        }
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

// The scene's rows (n x 4 int32: b, z, y, x), by the library's reader (bench_conv writes them
// with vc_npy_write).
bool load_rows(const std::string &path, std::vector<int32_t> *v, int64_t *rows)
{
    vc_array a;
    if (vc_npy_read(NULL, path.c_str(), &a) != VC_OK) return false;
    const bool ok = a.dtype == VC_DTYPE_INT32 && a.ndim == 2 && a.shape[1] == 4;
    if (ok) {
        *rows = a.shape[0];
        v->assign((const int32_t *)a.data, (const int32_t *)a.data + a.shape[0] * 4);
    }
    vc_array_free(&a);
    return ok;
}

// The Morton key of row (b, z, y, x): x, y and z's low 16 bits interleaved from bit 0, the
// batch above them. The host's order (layout) and gpu_tables' sort both take it.
__host__ __device__ inline uint64_t morton(int32_t b, int32_t z, int32_t y, int32_t x)
{
    const int32_t d[3] = {x, y, z};
    uint64_t k = 0;
    for (int bit = 0; bit < 16; bit++)
        for (int j = 0; j < 3; j++) k |= (uint64_t)((d[j] >> bit) & 1) << (3 * bit + j);
    return k | (uint64_t)b << 48;
}

// The scene's rows in Morton order (ord[r]: the scene's row at Morton row r) and the subm k3
// neighbours of each row in the scene's own indexing (nb_scene, the map's out_in) and in Morton
// rows (nb: the probe's layout).
struct Layout {
    std::vector<int64_t> ord;
    std::vector<int32_t> nb_scene, nb;
    int64_t pairs = 0;
};

Layout layout(const Scene &sc)
{
    const int64_t n = sc.n;
    Layout L;
    L.ord.resize(n);
    for (int64_t i = 0; i < n; i++) L.ord[i] = i;
    std::vector<uint64_t> mk(n);
    for (int64_t i = 0; i < n; i++) {
        const int32_t *c = &sc.c[4 * i];
        mk[i] = morton(c[0], c[1], c[2], c[3]);
    }
    std::stable_sort(L.ord.begin(), L.ord.end(),
                     [&](int64_t a, int64_t b) { return mk[a] < mk[b]; });
    std::vector<int32_t> inv(n);
    for (int64_t r = 0; r < n; r++) inv[L.ord[r]] = (int32_t)r;
    auto key = [&](const int32_t *c, int dz, int dy, int dx) {
        return ((((int64_t)c[0] * (sc.Z + 2) + c[1] + 1 + dz) * (sc.Y + 2) + c[2] + 1 + dy) *
                    (sc.X + 2) +
                c[3] + 1 + dx);
    };
    std::unordered_map<int64_t, int32_t> at;
    at.reserve(2 * n);
    for (int64_t i = 0; i < n; i++) at[key(&sc.c[4 * i], 0, 0, 0)] = (int32_t)i;
    L.nb_scene.assign((size_t)n * kTaps, -1);
    L.nb.assign((size_t)n * kTaps, -1);
    for (int64_t i = 0; i < n; i++) {
        int t = 0;
        for (int dz = -1; dz <= 1; dz++)
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++, t++) {
                    auto it = at.find(key(&sc.c[4 * i], dz, dy, dx));
                    if (it == at.end()) continue;
                    L.nb_scene[i * kTaps + t] = it->second;
                    L.nb[(int64_t)inv[i] * kTaps + t] = inv[it->second];
                    L.pairs++;
                }
    }
    return L;
}

template <int C, int P, int S, int kRows, bool PF>
void run(const Scene &sc, const Layout &L, int runs, int warm, void *flush)
{
    const int64_t n = sc.n;
    const std::vector<int32_t> &nb = L.nb;
    const int64_t pairs = L.pairs;
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
    CK(cudaFuncSetAttribute(halo_kernel<C, P, S, kRows, PF>,
                            cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, halo_kernel<C, P, S, kRows, PF>,
                                                     2 * kRows, smem));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> t;
    for (int r = -warm; r < runs; r++) {
        CK(cudaMemsetAsync(flush, r & 0xff, 256 << 20));
        CK(cudaEventRecord(e0));
        halo_kernel<C, P, S, kRows, PF>
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
    printf("| %s | %d -> %d, %d taps x %d stages, %d rows%s | %lld | %.1f | %lld | %.1f | %d | "
           "%.1f | %d | %.2f | %.2f | %s (%lld of %lld, max err %.2g of %.2g) |\n",
           sc.name.c_str(), C, C, P, S, kRows, PF ? ", A ahead" : "", (long long)n,
           (double)pairs / n, (long long)tiles, (double)halo.size() / tiles, hcap,
           (double)tap_sum / tiles, per_sm, 1e3 * t[t.size() / 2], 1e3 * t[t.size() / 10],
           bad ? "WRONG" : "ok", (long long)bad, (long long)checked, maxerr, maxref);
    fflush(stdout);
    cudaFree(dX), cudaFree(dW), cudaFree(dY), cudaFree(dB), cudaFree(dM), cudaFree(dH),
        cudaFree(dL);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
}

// ---- the tables on the GPU, as a map build would make them ---------------------------------
//
// From the map's own arrays (the scene's voxels and its out_in, the scene's indexing): the rows
// in Morton order (a radix sort of Morton keys, stable), then a CTA a 64-row tile: its 64 x 27
// entries sorted in shared memory, the distinct input rows (the halo, ascending), each entry's
// index into them and the tile's taps; the halo lists at a fixed stride, then packed by a scan
// of their lengths. Timed from the keys to the packed lists (L2 flushed before), and checked
// entry by entry against out_in.

const int kTile = 64, kEntries = kTaps * kTile, kBT = 128, kPerThread = 14; // 1792 slots
static_assert(kBT * kPerThread >= kEntries, "a tile's entries fit the block sort");

__global__ void morton_kernel(const int32_t *c, int64_t n, uint64_t *keys, int32_t *rows)
{
    const int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int4 v = reinterpret_cast<const int4 *>(c)[i];
    keys[i] = morton(v.x, v.y, v.z, v.w);
    rows[i] = (int32_t)i;
}

// Tile b: rows perm[64b, 64b + 64). tmp: its halo at b x kEntries; count[b]: its length.
__global__ void __launch_bounds__(kBT)
    tile_kernel(const int32_t *out_in, const int32_t *perm, int64_t n, int32_t *tmp,
                int32_t *count, uint32_t *mask, uint16_t *lidx)
{
    typedef cub::BlockRadixSort<int32_t, kBT, kPerThread, int32_t> Sort;
    typedef cub::BlockScan<int32_t, kBT> Scan;
    __shared__ union {
        typename Sort::TempStorage sort;
        typename Scan::TempStorage scan;
    } tmp_s;
    __shared__ int32_t skey[kBT * kPerThread];
    __shared__ uint32_t smask;
    const int tid = threadIdx.x;
    const int64_t b = blockIdx.x;
    if (tid == 0) smask = 0;
    __syncthreads();
    int32_t key[kPerThread], val[kPerThread];
    for (int j = 0; j < kPerThread; j++) {
        const int e = tid * kPerThread + j; // entry e: tap e / 64, row e % 64
        const int64_t r = b * kTile + e % kTile;
        int32_t v = INT32_MAX;
        if (e < kEntries && r < n) {
            const int32_t g = out_in[(int64_t)perm[r] * kTaps + e / kTile];
            if (g >= 0) {
                v = g;
                atomicOr(&smask, 1u << (e / kTile));
            }
        }
        key[j] = v;
        val[j] = e;
    }
    Sort(tmp_s.sort).Sort(key, val); // blocked: thread t holds ranks [14t, 14t + 14)
    __syncthreads();
    for (int j = 0; j < kPerThread; j++) skey[tid * kPerThread + j] = key[j];
    __syncthreads();
    int firsts = 0;
    for (int j = 0; j < kPerThread; j++) {
        const int i = tid * kPerThread + j;
        firsts += key[j] != INT32_MAX && (i == 0 || skey[i - 1] != key[j]);
    }
    int base, total;
    Scan(tmp_s.scan).ExclusiveSum(firsts, base, total);
    int rank = base - 1; // the halo index of the current value
    for (int j = 0; j < kPerThread; j++) {
        const int i = tid * kPerThread + j;
        if (key[j] == INT32_MAX) continue;
        if (i == 0 || skey[i - 1] != key[j]) tmp[b * kEntries + ++rank] = key[j];
        lidx[b * kEntries + val[j]] = (uint16_t)rank;
    }
    // entries without a neighbour: no index
    for (int j = 0; j < kPerThread; j++)
        if (key[j] == INT32_MAX && val[j] < kEntries) lidx[b * kEntries + val[j]] = kNone;
    if (tid == 0) {
        count[b] = total;
        mask[b] = smask;
    }
}

__global__ void pack_kernel(const int32_t *tmp, const int32_t *count, const int32_t *offset,
                            const uint32_t *mask, int4 *meta, int32_t *halo)
{
    const int64_t b = blockIdx.x;
    const int c = count[b], o = offset[b];
    for (int i = threadIdx.x; i < c; i += blockDim.x) halo[o + i] = tmp[b * kEntries + i];
    if (threadIdx.x == 0) meta[b] = make_int4(o, c, (int)mask[b], 0);
}

void gpu_tables(const Scene &sc, const Layout &L, int runs, int warm, void *flush)
{
    const int64_t n = sc.n, tiles = (n + kTile - 1) / kTile;
    int32_t *dc, *dout_in, *drows, *dperm, *dtmp, *dcount, *doff, *dhalo;
    uint64_t *dkeys, *dkeys2;
    uint32_t *dmask;
    uint16_t *dlidx;
    int4 *dmeta;
    CK(cudaMalloc(&dc, n * 16));
    CK(cudaMalloc(&dout_in, n * kTaps * 4));
    CK(cudaMalloc(&drows, n * 4));
    CK(cudaMalloc(&dperm, n * 4));
    CK(cudaMalloc(&dkeys, n * 8));
    CK(cudaMalloc(&dkeys2, n * 8));
    CK(cudaMalloc(&dtmp, tiles * kEntries * 4));
    CK(cudaMalloc(&dcount, tiles * 4));
    CK(cudaMalloc(&doff, tiles * 4));
    CK(cudaMalloc(&dmask, tiles * 4));
    CK(cudaMalloc(&dlidx, tiles * kEntries * 2));
    CK(cudaMalloc(&dmeta, tiles * sizeof(int4)));
    CK(cudaMalloc(&dhalo, n * kTaps * 4));
    CK(cudaMemcpy(dc, sc.c.data(), n * 16, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dout_in, L.nb_scene.data(), n * kTaps * 4, cudaMemcpyHostToDevice));
    // the key's bits: 3 a level of the largest dimension, the batch above bit 48
    int bits = 1;
    while ((1 << bits) < std::max(sc.Z, std::max(sc.Y, sc.X))) bits++;
    int32_t bmax = 0;
    for (int64_t i = 0; i < n; i++) bmax = std::max(bmax, sc.c[4 * i]);
    const int end_bit = bmax > 0 ? 64 : 3 * bits;
    size_t sort_bytes = 0, scan_bytes = 0;
    CK(cub::DeviceRadixSort::SortPairs(NULL, sort_bytes, dkeys, dkeys2, drows, dperm, (int)n, 0,
                                       end_bit));
    CK(cub::DeviceScan::ExclusiveSum(NULL, scan_bytes, dcount, doff, (int)tiles));
    void *dws;
    CK(cudaMalloc(&dws, std::max(sort_bytes, scan_bytes)));
    cudaEvent_t e[4];
    for (auto &x : e) CK(cudaEventCreate(&x));
    std::vector<float> t_all, t_sort, t_tile;
    for (int r = -warm; r < runs; r++) {
        CK(cudaMemsetAsync(flush, r & 0xff, 256 << 20));
        CK(cudaEventRecord(e[0]));
        morton_kernel<<<(unsigned)((n + 255) / 256), 256>>>(dc, n, dkeys, drows);
        CK(cub::DeviceRadixSort::SortPairs(dws, sort_bytes, dkeys, dkeys2, drows, dperm, (int)n,
                                           0, end_bit));
        CK(cudaEventRecord(e[1]));
        tile_kernel<<<(unsigned)tiles, kBT>>>(dout_in, dperm, n, dtmp, dcount, dmask, dlidx);
        CK(cudaEventRecord(e[2]));
        CK(cub::DeviceScan::ExclusiveSum(dws, scan_bytes, dcount, doff, (int)tiles));
        pack_kernel<<<(unsigned)tiles, 64>>>(dtmp, dcount, doff, dmask, dmeta, dhalo);
        CK(cudaEventRecord(e[3]));
        CK(cudaEventSynchronize(e[3]));
        float a = 0, b = 0, c = 0;
        CK(cudaEventElapsedTime(&a, e[0], e[3]));
        CK(cudaEventElapsedTime(&b, e[0], e[1]));
        CK(cudaEventElapsedTime(&c, e[1], e[2]));
        if (r >= 0) t_all.push_back(a), t_sort.push_back(b), t_tile.push_back(c);
    }
    CK(cudaGetLastError());
    for (auto *v : {&t_all, &t_sort, &t_tile}) std::sort(v->begin(), v->end());
    // check: perm is the host's Morton order; every entry's index names its neighbour
    std::vector<int32_t> perm(n), halo;
    std::vector<int4> meta(tiles);
    std::vector<uint16_t> lidx(tiles * kEntries);
    CK(cudaMemcpy(perm.data(), dperm, n * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(meta.data(), dmeta, tiles * sizeof(int4), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(lidx.data(), dlidx, lidx.size() * 2, cudaMemcpyDeviceToHost));
    const int64_t total = tiles ? meta[tiles - 1].x + meta[tiles - 1].y : 0;
    halo.resize(total);
    CK(cudaMemcpy(halo.data(), dhalo, total * 4, cudaMemcpyDeviceToHost));
    int64_t bad = 0;
    for (int64_t r = 0; r < n; r++) bad += perm[r] != L.ord[r];
    for (int64_t b = 0; b < tiles; b++) {
        const int4 m = meta[b];
        uint32_t mask = 0;
        std::vector<char> used(m.y, 0);
        for (int i = 1; i < m.y; i++) bad += halo[m.x + i - 1] >= halo[m.x + i];
        for (int k = 0; k < kTaps; k++)
            for (int i = 0; i < kTile; i++) {
                const int64_t r = b * kTile + i;
                const int32_t g = r < n ? L.nb_scene[(int64_t)L.ord[r] * kTaps + k] : -1;
                const uint16_t li = lidx[b * kEntries + k * kTile + i];
                if (g < 0) {
                    bad += li != kNone;
                    continue;
                }
                mask |= 1u << k;
                if (li >= m.y || halo[m.x + li] != g) {
                    bad++;
                    continue;
                }
                used[li] = 1;
            }
        bad += mask != (uint32_t)m.z;
        for (int i = 0; i < m.y; i++) bad += !used[i];
    }
    printf("| %s | halo tables on the GPU | %lld | | %lld | %.1f | | | | %.2f | %.2f | %s (%lld "
           "wrong; keys and sort %.2f us, tiles %.2f us, %d key bits) |\n",
           sc.name.c_str(), (long long)n, (long long)tiles, (double)total / tiles,
           1e3 * t_all[t_all.size() / 2], 1e3 * t_all[t_all.size() / 10], bad ? "WRONG" : "ok",
           (long long)bad, 1e3 * t_sort[t_sort.size() / 2], 1e3 * t_tile[t_tile.size() / 2],
           end_bit);
    fflush(stdout);
    for (void *p : {(void *)dc, (void *)dout_in, (void *)drows, (void *)dperm, (void *)dkeys,
                    (void *)dkeys2, (void *)dtmp, (void *)dcount, (void *)doff, (void *)dmask,
                    (void *)dlidx, (void *)dmeta, (void *)dhalo, dws})
        cudaFree(p);
    for (auto &x : e) cudaEventDestroy(x);
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
        if (!load_rows(dir + "/" + file, &sc.c, &sc.n)) {
            fprintf(stderr, "%s/%s: not an int32 npy\n", dir.c_str(), file);
            continue;
        }
        if (only && !strstr(name, only)) continue;
        const Layout L = layout(sc);
        run<16, 1, 3, 64, false>(sc, L, runs, warm, flush);
        run<16, 1, 3, 64, true>(sc, L, runs, warm, flush);
        run<32, 1, 3, 64, false>(sc, L, runs, warm, flush);
        run<32, 1, 3, 64, true>(sc, L, runs, warm, flush);
        run<64, 2, 2, 64, false>(sc, L, runs, warm, flush);
        run<64, 1, 3, 64, true>(sc, L, runs, warm, flush);
        gpu_tables(sc, L, runs, warm, flush);
    }
    fclose(f);
    cudaFree(flush);
    return 0;
}
