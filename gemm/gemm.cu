// gemm/gemm.cu - vc_gemm_plan, vc_gemm_run, vc_gemm_configs and vc_gemm_config_named
// (gemm/gemm.h): argument checks, the table of compiled tile configurations, the choice of one by
// shape and dtype, the plan and the launch. The kernels are in gemm/mainloop.cuh (tensor cores)
// and gemm/simt.cuh (exact fp32), their launch in gemm/schedule.cuh. Never synchronises, never
// prints.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "gemm/gemm.h"
#include "gemm/schedule.cuh"
#include "gemm/simt.cuh"
#include "gemm/gemm_packed.h"
#include "gemm/gemm_sm90.h"
#include "gemm/warp_tile.cuh"

namespace {

using vcg::Params;
using vcg::sm_count;

typedef cudaError_t (*plan_fn)(const Params &p, const vcg::Sched &sc, vcg::LaunchPlan *out);
typedef cudaError_t (*launch_fn)(const Params &p, const vcg::LaunchPlan &pl, cudaStream_t s,
                                 int *left);

// One compiled configuration: its public description, how it loads (bytes per global load; 2 =
// 16-bit scalar loads; 0 = the fp32 FMA kernel's scalar loads), its launcher, whether it is
// a wgmma kernel (runs on compute capability 9.0 only), whether it is the dense TMA kernel
// (dense problems only; gemm/gemm_sm90.h), whether it is a warp tile (gemm/warp_tile.cuh:
// no tap split), and its tap sets (gemm/mainloop.cuh's TG).
struct Entry {
    vc_gemm_config cfg;
    int load_bytes;
    plan_fn plan;
    launch_fn launch;
    bool sm90;
    bool dense;
    bool cluster; // its tap splits can run as thread-block clusters (sm_90)
    bool warp;    // a warp tile: an explicit tap split is refused, an automatic one is 1 group
    int tap_sets; // > 1: a wgmma tile whose warpgroups divide a tile's taps (0 or 1: none; only
                  // WGMMA sets it)
};

// Whether a tile's taps are shared out within its CTA: a tap-set tile's warpgroups divide them,
// a tap-packed tile's stages (cfg.tap_pack > 1, gemm_packed.h) hold several. Such a tile keeps
// the gather indices of all its taps in shared memory at once (one gather chunk) and has no
// tap split.
bool taps_in_cta(const Entry &e) { return e.tap_sets > 1 || e.cfg.tap_pack > 1; }

// Whether the current device has compute capability 9.0 (the sm_90a kernels run there only),
// cached per device.
bool device_sm90()
{
    static vcg::DeviceInts cache; // 0 unknown, 1 no, 2 yes
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (const int c = cache.get(dev)) return c == 2;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
        return false;
    const bool yes = major == 9 && minor == 0;
    cache.put(dev, yes ? 2 : 1);
    return yes;
}

#ifdef VC_GEMM_HAVE_SM90A
// Whether the current device lets a block have the dense kernel's shared memory (its budget and
// 1 KB of static mbarriers; every compute capability 9.0 part has 227 KB), cached per device.
bool device_dense_smem()
{
    static vcg::DeviceInts cache; // 0 unknown, 1 no, 2 yes
    int dev = 0, optin = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (const int c = cache.get(dev)) return c == 2;
    if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) !=
        cudaSuccess)
        return false;
    const bool yes = optin >= VC_GEMM_DENSE_SMEM_BUDGET + 1024;
    cache.put(dev, yes ? 2 : 1);
    return yes;
}
#endif

// Tap split, second pass: each thread adds the groups' sums of 8 outputs in group order and
// runs the epilogue on them (output row r = row_map[i]).
__global__ void __launch_bounds__(256) split_reduce_kernel(const Params p, const float *partial,
                                                            int splits)
{
    const int cpr = (p.n_cols + 7) >> 3;
    const int64_t live = p.m_live && *p.m_live < p.m ? *p.m_live : p.m; // rows past: skipped
    const int64_t total = live * cpr, plane = p.m * (int64_t)p.n_cols;
    for (int64_t x = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; x < total;
         x += (int64_t)gridDim.x * blockDim.x) {
        const int64_t i = x / cpr;
        const int n = (int)(x - i * cpr) * 8;
        const float *src = partial + i * p.n_cols + n;
        float v[8], u[8];
        if ((p.n_cols & 7) == 0) {
            vcg::load_any8(src, VC_GEMM_F32, 0, v);
            for (int s = 1; s < splits; s++) {
                vcg::load_any8(src + s * plane, VC_GEMM_F32, 0, u);
#pragma unroll
                for (int e = 0; e < 8; e++) v[e] += u[e];
            }
        } else {
#pragma unroll
            for (int e = 0; e < 8; e++) v[e] = n + e < p.n_cols ? src[e] : 0.f;
            for (int s = 1; s < splits; s++)
#pragma unroll
                for (int e = 0; e < 8; e++)
                    if (n + e < p.n_cols) v[e] += src[s * plane + e];
        }
        vcg::epilogue8(p, p.row_map ? (int64_t)p.row_map[i] : i, n, v);
    }
}

// The fp32 FMA kernel: a CTA per tile; vc_gemm_plan refuses a tap split here; no tile order.
cudaError_t plan_simt(const Params &p, const vcg::Sched &, vcg::LaunchPlan *out)
{
    *out = {1, false, false, false, p.m_tiles * p.n_tiles, 0};
    return cudaSuccess;
}

template <int BM, int BN, int BK, int TM, int TN>
cudaError_t launch_simt(const Params &p, const vcg::LaunchPlan &pl, cudaStream_t s, int *left)
{
    *left = 1;
    vcg::simt_kernel<BM, BN, BK, TM, TN><<<(unsigned)pl.grid, (BM / TM) * (BN / TN), 0, s>>>(p);
    return cudaGetLastError();
}

#define MMA(name, T, dt, math, BM, BN, BK, WM, WN, S, LB)                                      \
    MMAB(name, T, dt, math, BM, BN, BK, WM, WN, S, LB, 1)
// MINB > 1: registers capped so that MINB CTAs fit on an SM (__launch_bounds__)
#define MMAB(name, T, dt, math, BM, BN, BK, WM, WN, S, LB, MINB)                                \
    MMAX(name, T, dt, math, BM, BN, BK, WM, WN, S, LB, MINB, false)
// CL: the tile also has a cluster kernel for its tap splits (sm_90: gemm/cluster.cuh)
#define MMAX(name, T, dt, math, BM, BN, BK, WM, WN, S, LB, MINB, CL)                            \
    {{name, BM, BN, BK, S, WM * WN, dt, math, 1},                                              \
     LB,                                                                                       \
     vcg::plan_mma<T, BM, BN, BK, WM, WN, S, LB, false, MINB, CL>,                             \
     vcg::launch_mma<T, BM, BN, BK, WM, WN, S, LB, false, MINB, CL>,                           \
     false, false, CL, false}
// a warp tile (gemm/warp_tile.cuh): 32 rows x BN columns, its taps divided among S warps, k
// steps of 16, 8-byte loads
#define WARP(name, T, dt, BN, S)                                                               \
    {{name, vcg::kWarpTileRows, BN, 16, 1, vcg::kWarpTileWarps, dt, VC_GEMM_MATH_DEFAULT, 1},    \
     8, vcg::plan_warp<S>, vcg::launch_warp<T, BN, S>, false, false, false, true}
#define WGMMA(name, T, dt, math, BM, BN, BK, S, TG)                                            \
    {{#name, BM, BN, BK, S, BM / 16 * TG, dt, math, 1}, 16, vcg::plan_##name,                  \
     vcg::launch_##name, true, false, vcg::kClusterWg<T, BM, TG>, false, TG},
// a tap-packed tile (gemm/gemm_packed.h): TP taps a stage, k = BK / TP
#define PACKED(name, T, dt, BM, BN, BK, WM, WN, S, MINB, TP)                                   \
    {{#name, BM, BN, BK, S, WM * WN, dt, VC_GEMM_MATH_DEFAULT, TP}, 16, vcg::plan_##name,      \
     vcg::launch_##name, false, false, false, false, 1},
// the dense kernel: 64-row tiles, BN columns, 128-byte k blocks; "stages" and "warps" report
// its most stages and its warps (one producer and VC_GEMM_DENSE_CONSUMERS(BN) consumer
// warpgroups: 20, 16 or 12)
#define DENSE_TMA(name, T, dt, math, BN)                                                       \
    {{#name, 64, BN, 128 / (int)sizeof(T), VC_GEMM_DENSE_MAX_STAGES,                           \
      4 * (1 + VC_GEMM_DENSE_CONSUMERS(BN)), dt, math, 1},                                     \
     16, vcg::plan_##name, vcg::launch_##name, true, true, false, false},

// The table, by name. Each dtype has tiles for wide n (128x128), the common case (128x64), few
// rows (64x64), narrow n (128x32, 256x32), the implicit-GEMM convolution's small tiles (two-warp
// 64x32 and four-warp 64x64 with three stages and registers capped (MMAB) so that 6-11 CTAs fit
// on an SM: the gathered problem runs on CTAs in flight; conv/conv.cu picks them; and a 64-deep
// 64x64x64 with 4, for 64-256-channel layers of a few thousand outputs), and a tile for k that is
// not a multiple of the 16-byte load; on Hopper, the wgmma tiles and the dense kernel of
// gemm/gemm_sm90.h. The small tiles that coarse layers split (conv/conv.cu: tap_splits) also
// have a cluster kernel for their tap splits on sm_90 (MMAX ... true; the 16-bit 64-row wgmma
// tiles too). Last, the tap-packed tiles for narrow gathered k (gemm/gemm_packed.h).
// (mma.sync 128x256 tiles were measured and dropped: 238 registers, one CTA per SM, slower.)
const Entry kTable[] = {
    MMA("f16_128x128x32_s3", __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 128, 128, 32, 2, 4, 3, 16),
    MMA("f16_128x96x32_s4", __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 128, 96, 32, 4, 2, 4, 16),
    MMAB("f16_128x64x32_s4", __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 128, 64, 32, 2, 2, 4, 16,
         4),
    MMAX("f16_64x64x32_s4", __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 64, 64, 32, 2, 2, 4, 16, 1,
         true),
    MMA("f16_128x32x32_s4", __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 128, 32, 32, 4, 1, 4, 16),
    MMA("f16_256x32x32_s4", __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 256, 32, 32, 8, 1, 4, 16),
    MMAX("f16_64x32x16_s4", __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 64, 32, 16, 2, 1, 4, 16, 10,
         true),
    MMAB("f16_64x64x32_s3", __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 64, 64, 32, 2, 2, 3, 16, 6),
    MMAX("f16_64x64x64_s3", __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 64, 64, 64, 2, 2, 3, 16, 4,
         true),
    MMAX("f16_64x32x16_s3", __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 64, 32, 16, 2, 1, 3, 16, 11,
         true),
    MMAX("f16_64x32x32_s3", __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 64, 32, 32, 2, 1, 3, 16, 8,
         true),
    WARP("f16_32x16x16_warp", __half, VC_GEMM_F16, 16, 1),
    WARP("f16_32x16x16_warp2", __half, VC_GEMM_F16, 16, 2),
    WARP("f16_32x16x16_warp4", __half, VC_GEMM_F16, 16, 4),
    MMA("f16_64x64x16_s3_scalar", __half, VC_GEMM_F16, VC_GEMM_MATH_DEFAULT, 64, 64, 16, 2, 2, 3,
        2),
    MMA("bf16_128x128x32_s3", __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 128, 128, 32, 2,
        4, 3, 16),
    MMA("bf16_128x96x32_s4", __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 128, 96, 32, 4, 2,
        4, 16),
    MMAB("bf16_128x64x32_s4", __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 128, 64, 32, 2, 2,
         4, 16, 4),
    MMAX("bf16_64x64x32_s4", __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 64, 64, 32, 2, 2,
        4, 16, 1, true),
    MMA("bf16_128x32x32_s4", __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 128, 32, 32, 4, 1,
        4, 16),
    MMA("bf16_256x32x32_s4", __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 256, 32, 32, 8, 1,
        4, 16),
    MMAX("bf16_64x32x16_s4", __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 64, 32, 16, 2, 1,
         4, 16, 10, true),
    MMAB("bf16_64x64x32_s3", __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 64, 64, 32, 2, 2,
         3, 16, 6),
    MMAX("bf16_64x64x64_s3", __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 64, 64, 64, 2, 2,
         3, 16, 4, true),
    MMAX("bf16_64x32x16_s3", __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 64, 32, 16, 2, 1,
         3, 16, 11, true),
    MMAX("bf16_64x32x32_s3", __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 64, 32, 32, 2, 1,
         3, 16, 8, true),
    WARP("bf16_32x16x16_warp", __nv_bfloat16, VC_GEMM_BF16, 16, 1),
    WARP("bf16_32x16x16_warp2", __nv_bfloat16, VC_GEMM_BF16, 16, 2),
    WARP("bf16_32x16x16_warp4", __nv_bfloat16, VC_GEMM_BF16, 16, 4),
    MMA("bf16_64x64x16_s3_scalar", __nv_bfloat16, VC_GEMM_BF16, VC_GEMM_MATH_DEFAULT, 64, 64, 16,
        2, 2, 3, 2),
    MMA("tf32_128x96x16_s4", float, VC_GEMM_F32, VC_GEMM_MATH_TF32, 128, 96, 16, 2, 2, 4, 16),
    MMA("tf32_128x64x16_s4", float, VC_GEMM_F32, VC_GEMM_MATH_TF32, 128, 64, 16, 2, 2, 4, 16),
    MMA("tf32_64x64x16_s4", float, VC_GEMM_F32, VC_GEMM_MATH_TF32, 64, 64, 16, 2, 2, 4, 16),
    MMA("tf32_64x64x16_s4_a4", float, VC_GEMM_F32, VC_GEMM_MATH_TF32, 64, 64, 16, 2, 2, 4, 4),
    {{"f32_64x64x16_fma", 64, 64, 16, 1, 8, VC_GEMM_F32, VC_GEMM_MATH_FP32, 1}, 0,
     plan_simt, launch_simt<64, 64, 16, 4, 4>, false, false, false, false},
#ifdef VC_GEMM_HAVE_SM90A
    VC_GEMM_SM90_CONFIGS(WGMMA)
    VC_GEMM_SM90_DENSE_CONFIGS(DENSE_TMA)
#endif
    VC_GEMM_PACKED_CONFIGS(PACKED)
};
const int kTableSize = (int)(sizeof kTable / sizeof kTable[0]);

#undef MMA
#undef MMAX
#undef WARP
#undef WGMMA
#undef PACKED
#undef DENSE_TMA

bool valid_dtype(int d) { return d == VC_GEMM_F32 || d == VC_GEMM_F16 || d == VC_GEMM_BF16; }

int dtype_size(int d) { return d == VC_GEMM_F32 ? 4 : 2; }

bool aligned(const void *p, int bytes) { return ((uintptr_t)p % (uintptr_t)bytes) == 0; }

// Whether entry e can run these arguments (dtype, math, load width against k and alignment).
// Writes the reason into why when it cannot.
bool fits(const Entry &e, const vc_gemm_args *a, char *why, size_t why_len)
{
    const bool f32 = a->ab_dtype == VC_GEMM_F32;
    const int32_t tap_hi = a->tap_hi == 0 ? a->taps : a->tap_hi; // gemm.h: 0 is all taps
    if (e.cfg.ab_dtype != a->ab_dtype) {
        snprintf(why, why_len, "configuration %s is for another dtype", e.cfg.name);
        return false;
    }
    if (f32) {
        const bool tf32 = a->math == VC_GEMM_MATH_TF32;
        if ((e.cfg.math == VC_GEMM_MATH_TF32) != tf32) {
            snprintf(why, why_len, "configuration %s is for %s math", e.cfg.name,
                     tf32 ? "exact fp32" : "tf32");
            return false;
        }
    }
    if (e.sm90 && !device_sm90()) {
        snprintf(why, why_len, "configuration %s (wgmma) needs a compute capability 9.0 device",
                 e.cfg.name);
        return false;
    }
    if (e.warp && (a->m > INT32_MAX || a->a_rows > INT32_MAX)) {
        snprintf(why, why_len, "configuration %s indexes rows in 32 bits (m = %lld, a_rows = %lld)",
                 e.cfg.name, (long long)a->m, (long long)a->a_rows);
        return false;
    }
    if (taps_in_cta(e) &&
        (a->taps > 32 * vcg::kMaxMaskWords ||
         (a->gather && tap_hi - a->tap_lo > vcg::kGatherChunk))) {
        snprintf(why, why_len,
                 "configuration %s keeps the gather indices of all a tile's taps in shared "
                 "memory: up to %d taps computed, %d in all (this launch: %d of %d)",
                 e.cfg.name, vcg::kGatherChunk, 32 * vcg::kMaxMaskWords, tap_hi - a->tap_lo,
                 a->taps);
        return false;
    }
    if (e.cfg.tap_pack > 1) {
        const int kt = e.cfg.tile_k / e.cfg.tap_pack;
        if (!a->gather || a->k != kt) {
            snprintf(why, why_len,
                     "configuration %s packs %d taps a stage: needs gathered rows with k = %d "
                     "(this one: %s, k = %d)",
                     e.cfg.name, e.cfg.tap_pack, kt, a->gather ? "gathered" : "not gathered",
                     a->k);
            return false;
        }
    }
    if (e.dense) {
        const int es = dtype_size(a->ab_dtype);
        const char *no = a->gather || a->gather_rows ? "gathered rows"
                         : a->masks                  ? "masks"
                         : a->taps != 1 || a->tap_lo != 0 || tap_hi != 1 ? "several taps"
                         : (a->splits > 1 || a->splits < -1)             ? "a tap split"
                         : a->m > INT32_MAX - 64                         ? "m past 2^31 - 64"
                                                                         : nullptr;
        if (no) {
            snprintf(why, why_len, "configuration %s is for dense problems (this one has %s)",
                     e.cfg.name, no);
            return false;
        }
        if (vc_gemm_dense_stages(es, e.cfg.tile_n, a->k) == 0) {
            snprintf(why, why_len,
                     "configuration %s keeps a %d-row slice of W in shared memory: k = %d is too "
                     "long for it",
                     e.cfg.name, e.cfg.tile_n, a->k);
            return false;
        }
#ifdef VC_GEMM_HAVE_SM90A // the dense entries exist only then
        const bool ready = vcg::dense_tma_available() && device_dense_smem();
#else
        const bool ready = false;
#endif
        if (!ready) {
            snprintf(why, why_len,
                     "configuration %s needs the driver's tensor-map encoder and %d KB of shared "
                     "memory a block",
                     e.cfg.name, VC_GEMM_DENSE_SMEM_BUDGET / 1024 + 1);
            return false;
        }
    }
    if (e.load_bytes >= 4) {
        const int per = e.load_bytes / dtype_size(a->ab_dtype);
        if (a->k % per != 0 || !aligned(a->a, e.load_bytes) || !aligned(a->w, e.load_bytes)) {
            snprintf(why, why_len,
                     "configuration %s loads %d bytes: needs k %% %d == 0 (k = %d) and A, W "
                     "aligned to %d bytes",
                     e.cfg.name, e.load_bytes, per, a->k, e.load_bytes);
            return false;
        }
    }
    return true;
}

int find(const char *name)
{
    for (int i = 0; i < kTableSize; i++) {
        const char *s = kTable[i].cfg.name, *t = name;
        while (*s && *s == *t) s++, t++;
        if (*s == 0 && *t == 0) return i;
    }
    return -1;
}

// The wgmma configuration of this dtype and math with this tile, or -1.
int find_wg(const vc_gemm_args *a, int bm, int bn)
{
    for (int i = 0; i < kTableSize; i++) {
        const vc_gemm_config &c = kTable[i].cfg;
        if (kTable[i].sm90 && !kTable[i].dense && c.ab_dtype == a->ab_dtype &&
            c.tile_m == bm && c.tile_n == bn && (a->ab_dtype != VC_GEMM_F32 || c.math == a->math))
            return i;
    }
    return -1;
}

// On a compute capability 9.0 device, the wgmma tile for n > 64 with a full wave of tiles, or -1
// (measured, docs/benchmarks.md): 128x128 at two CTAs per SM, or 128x256 where n is a multiple
// of 256 and the arithmetic dominates (tf32; 16-bit with k * taps >= 2048); tf32 n of
// 64 or 128 stays on the mma.sync 128x64 tile (as fast). Gathers over several taps (the implicit
// convolution) stay on mma.sync: wgmma was measured on dense problems only, and its gather-index
// staging would leave one 128x128 CTA per SM.
int pick_wg(const vc_gemm_args *a)
{
    if (a->n_cols <= 64 || (a->gather && a->taps > 1) || !device_sm90()) return -1;
    const bool tf32 = a->ab_dtype == VC_GEMM_F32;
    if (tf32 && a->n_cols <= 128 && a->n_cols % 64 == 0) return -1;
    int sms = 132;
    if (sm_count(&sms) != cudaSuccess) return -1;
    const bool wide = a->n_cols % 256 == 0 && (tf32 || (int64_t)a->k * a->taps >= 2048);
    const int bn = wide ? 256 : 128;
    const int i = find_wg(a, 128, bn);
    if (i < 0) return -1;
    const int64_t tiles = (a->m + 127) / 128 * ((a->n_cols + bn - 1) / bn);
    char why[8];
    return tiles >= (wide ? sms : 2 * sms) && fits(kTable[i], a, why, sizeof why) ? i : -1;
}

// On a compute capability 9.0 device, the dense kernel for a dense problem with n >= 32 (16-bit:
// n > 32 and rows of 128 bytes or more, k >= 64) and at least a 64-row tile per SM, or -1: the W
// slice width that needs the fewest slices (each slice reads A again, from L2 when the slices'
// CTAs run the same rows together), then the narrowest. From tunes of every configuration on
// the suite's shapes (docs/benchmarks.md, "Tensor-core GEMM against cuBLAS"): with three or four
// consumer warpgroups the dense kernel is the fastest from n = 48 at k = 64 (16-bit); at
// k = n = 32 (rows of 64 bytes, half of each 128-byte TMA box zero-filled) the mma.sync tiles
// are.
int pick_dense(const vc_gemm_args *a)
{
    const bool tf32 = a->ab_dtype == VC_GEMM_F32;
    // A cheap pre-filter of what fits() also checks (with a message), so that gathered launches
    // - the per-offset GEMMs run 27 a layer - do not format a refusal for every dense entry.
    if ((tf32 ? a->n_cols < 32 : a->n_cols <= 32 || a->k < 64) || a->gather || a->gather_rows ||
        a->masks || a->taps != 1 || !device_sm90())
        return -1;
    int sms = 132;
    if (sm_count(&sms) != cudaSuccess || a->m < 64 * (int64_t)sms) return -1;
    // The four-consumer slices (64 and 96 columns) only up to 64 tiles of 64 rows an SM: faster
    // than the 128-column slice from 100k to 500k rows, slower at 1M (memory-bound there).
    const bool many = (a->m + 63) / 64 > 64 * (int64_t)sms;
    int best = -1, best_slices = 0;
    char why[8];
    for (int i = 0; i < kTableSize; i++) {
        const Entry &e = kTable[i];
        if (!e.dense || e.cfg.ab_dtype != a->ab_dtype || !fits(e, a, why, sizeof why)) continue;
        if (VC_GEMM_DENSE_CONSUMERS(e.cfg.tile_n) == 4 && many) continue;
        const int slices = (a->n_cols + e.cfg.tile_n - 1) / e.cfg.tile_n;
        if (best < 0 || slices < best_slices ||
            (slices == best_slices && e.cfg.tile_n < kTable[best].cfg.tile_n))
            best = i, best_slices = slices;
    }
    return best;
}

// The configuration for these arguments, by dtype, load width, n_cols and row count (chosen
// from measurements, docs/benchmarks.md). A dense 16-bit problem with n <= 32 and k <= 16 (rows
// of 32-64 bytes) takes the 64x32 tile 16 deep: in the suite's tune it was the fastest at 100k
// and 1M rows (k = n = 16 at 1M rows: 94% of cuBLAS, where the 256x32 tile made 74%), the small
// tile keeping the most CTAs, so the most bytes, in flight.
int pick(const vc_gemm_args *a)
{
    const int sms_x2 = 2 * 132; // tiles to fill a 132-SM device twice over (as tuned)
    char why[8];
    if (a->ab_dtype == VC_GEMM_F32 && a->math != VC_GEMM_MATH_TF32)
        return find("f32_64x64x16_fma");
    const int dense = pick_dense(a);
    if (dense >= 0) return dense;
    const int wg = pick_wg(a);
    if (wg >= 0) return wg;
    if (a->ab_dtype == VC_GEMM_F32) {
        const int64_t tiles_128 = (a->m + 127) / 128 * ((a->n_cols + 63) / 64);
        const bool small = (a->k <= 16 && a->n_cols <= 64) || tiles_128 < sms_x2;
        int vec = find(small                ? "tf32_64x64x16_s4"
                       : a->n_cols % 96 == 0 ? "tf32_128x96x16_s4"
                                             : "tf32_128x64x16_s4");
        if (fits(kTable[vec], a, why, sizeof why)) return vec;
        return find("tf32_64x64x16_s4_a4");
    }
    const bool h = a->ab_dtype == VC_GEMM_F16;
    const int64_t m_128 = (a->m + 127) / 128;
    const char *name;
    const bool plain = !a->gather && !a->gather_rows && !a->masks && a->taps == 1;
    if (a->n_cols <= 32 && a->k <= 16 && plain)
        name = h ? "f16_64x32x16_s3" : "bf16_64x32x16_s3";
    else if (a->n_cols <= 32)
        name = m_128 >= 4 * sms_x2 ? (h ? "f16_256x32x32_s4" : "bf16_256x32x32_s4")
                                   : (h ? "f16_128x32x32_s4" : "bf16_128x32x32_s4");
    else if (m_128 * ((a->n_cols + 127) / 128) < sms_x2)
        name = h ? "f16_64x64x32_s4" : "bf16_64x64x32_s4"; // few rows: more, smaller tiles
    else if (a->n_cols <= 64)
        name = h ? "f16_128x64x32_s4" : "bf16_128x64x32_s4";
    else if (a->n_cols <= 96)
        name = h ? "f16_128x96x32_s4" : "bf16_128x96x32_s4";
    else
        name = h ? "f16_128x128x32_s3" : "bf16_128x128x32_s3";
    int i = find(name);
    if (fits(kTable[i], a, why, sizeof why)) return i;
    return find(h ? "f16_64x64x16_s3_scalar" : "bf16_64x64x16_s3_scalar");
}

// The argument checks of vc_gemm_plan that need no configuration (every message names
// vc_gemm_run, the one launch of a plan).
vc_status check_args(const vc_gemm_args *a, int32_t config, vc_err *err)
{
#define BAD(...) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "vc_gemm_run: " __VA_ARGS__)
    if (!a) BAD("args is NULL");
    if (a->m < 0) BAD("m = %lld is negative", (long long)a->m);
    if (a->n_cols < 1) BAD("n_cols = %d must be >= 1", a->n_cols);
    if (a->k < 1 || a->k > (1 << 27)) BAD("k = %d is not in [1, 2^27]", a->k);
    if (a->taps < 1) BAD("taps = %d must be >= 1", a->taps);
    if (!valid_dtype(a->ab_dtype)) BAD("ab_dtype %d is not a dtype", (int)a->ab_dtype);
    if (!valid_dtype(a->c_dtype)) BAD("c_dtype %d is not a dtype", (int)a->c_dtype);
    if (a->math != VC_GEMM_MATH_DEFAULT && a->math != VC_GEMM_MATH_TF32 &&
        a->math != VC_GEMM_MATH_FP32)
        BAD("math %d is not a vc_gemm_math", (int)a->math);
    if (a->act != VC_GEMM_ACT_NONE && a->act != VC_GEMM_ACT_RELU && a->act != VC_GEMM_ACT_LEAKY)
        BAD("act %d is not a vc_gemm_act", (int)a->act);
    if (a->residual && !valid_dtype(a->residual_dtype))
        BAD("residual_dtype %d is not a dtype", (int)a->residual_dtype);
    const int32_t tap_hi = a->tap_hi == 0 ? a->taps : a->tap_hi;
    if (a->tap_lo < 0 || a->tap_lo >= tap_hi || tap_hi > a->taps)
        BAD("tap range [%d, %d) is not inside [0, %d)", a->tap_lo, a->tap_hi, a->taps);
    if (a->a_rows < 0) BAD("a_rows = %lld is negative", (long long)a->a_rows);
    if (a->b_taps < 1) BAD("b_taps = %d must be >= 1", a->b_taps);
    if (a->b_tap0 < 0 || (int64_t)a->b_tap0 + a->taps > a->b_taps)
        BAD("taps [%d, %d) fall outside the weights' %d taps", a->b_tap0, a->b_tap0 + a->taps,
            a->b_taps);
    if (!a->gather && a->taps != 1) BAD("a dense GEMM (gather NULL) needs taps == 1");
    if (!a->gather && !a->gather_rows && a->m > a->a_rows)
        BAD("dense rows: m = %lld exceeds a_rows = %lld", (long long)a->m, (long long)a->a_rows);
    if (a->masks && a->mask_words < (a->taps + 31) / 32)
        BAD("mask_words = %d cannot hold %d taps", a->mask_words, a->taps);
    if (a->tile_order &&
        a->order_blocks != (a->m + VC_GEMM_ORDER_ROWS - 1) / VC_GEMM_ORDER_ROWS)
        BAD("order_blocks = %lld, but %lld rows make %lld blocks of %d", (long long)a->order_blocks,
            (long long)a->m, (long long)((a->m + VC_GEMM_ORDER_ROWS - 1) / VC_GEMM_ORDER_ROWS),
            VC_GEMM_ORDER_ROWS);
    if (a->splits < -VC_GEMM_MAX_SPLITS || a->splits > VC_GEMM_MAX_SPLITS)
        BAD("splits = %d is not in [%d, %d]", a->splits, -VC_GEMM_MAX_SPLITS,
            VC_GEMM_MAX_SPLITS);
    const int max_splits = a->splits < 0 ? -a->splits : a->splits;
    if (max_splits > 1 && a->taps > 32 * vcg::kMaxMaskWords)
        BAD("a tap split handles up to %d taps (taps = %d)", 32 * vcg::kMaxMaskWords, a->taps);
    if (config < -1 || config >= kTableSize)
        BAD("config %d is not -1 or an index below %d", config, kTableSize);
    return VC_OK;
#undef BAD
}

// The kernel parameters of arguments a on entry e (checked by check_args and fits); fails where
// the tiles exceed one launch.
vc_status make_params(const vc_gemm_args *a, const Entry &e, Params *out, vc_err *err)
{
    const int max_splits = a->splits < 0 ? -a->splits : a->splits;
    Params p = {}; // every field zero, then set (epi_alias by launch_mma)
    p.m = a->m;
    p.n_cols = a->n_cols;
    p.k = a->k;
    p.taps = a->taps;
    p.a = a->a;
    p.a_rows = a->a_rows;
    p.gather = a->gather;
    p.gather_rows = a->gather_rows;
    p.row_map = a->row_map;
    // Masks only skip work (a masked tap has -1 gathers): past what a CTA keeps, ignore them.
    p.masks = (a->masks && (a->taps + 31) / 32 <= vcg::kMaxMaskWords) ? a->masks : nullptr;
    p.mask_words = a->mask_words;
    p.w = a->w;
    p.b_taps = a->b_taps;
    p.b_tap0 = a->b_tap0;
    p.c = a->c;
    p.c_dtype = a->c_dtype;
    p.accumulate = a->accumulate ? 1 : 0;
    p.tap_lo = a->tap_lo;
    p.tap_hi = a->tap_hi == 0 ? a->taps : a->tap_hi;
    p.bias = a->bias;
    p.residual = a->residual;
    p.res_dtype = a->residual ? a->residual_dtype : VC_GEMM_F32;
    p.act = a->act;
    p.slope = a->slope;
    p.pair_store = (a->n_cols % 2 == 0) && aligned(a->c, 2 * dtype_size(a->c_dtype)) &&
                   (!a->residual || aligned(a->residual, 2 * dtype_size(a->residual_dtype)));
    p.vec8 = (a->n_cols % 8 == 0) && aligned(a->c, 16) &&
             (!a->residual || aligned(a->residual, 16)) && (!a->bias || aligned(a->bias, 16));
    const int64_t n_tiles = (a->n_cols + e.cfg.tile_n - 1) / e.cfg.tile_n;
    const int64_t m_tiles = (a->m + e.cfg.tile_m - 1) / e.cfg.tile_m;
    if (m_tiles * n_tiles > INT32_MAX)
        return vc_fail(err, VC_ERR_UNSUPPORTED, "vc_gemm_run: %lld x %lld tiles of %s exceed one "
                       "launch", (long long)m_tiles, (long long)n_tiles, e.cfg.name);
    p.n_tiles = (int32_t)n_tiles;
    p.m_tiles = m_tiles;
    p.gchunk = a->taps < vcg::kGatherChunk ? a->taps : vcg::kGatherChunk;
    p.gstride = p.gchunk | 1;
    p.epi_alias = 0; // launch_mma decides
    p.splits = max_splits > 1 ? a->splits : 1; // plan_mma resolves an automatic split
    p.partial = a->partial;
    p.tile_order = a->tile_order;
    p.order_blocks = a->order_blocks;
    p.m_live = a->masks ? a->m_live : nullptr;
    const int64_t plan_rows = a->m_plan > 0 && a->m_plan < a->m ? a->m_plan : a->m;
    p.plan_tiles = (plan_rows + e.cfg.tile_m - 1) / e.cfg.tile_m * n_tiles;
    if (m_tiles * n_tiles * (max_splits > 1 ? max_splits : 1) > INT32_MAX)
        return vc_fail(err, VC_ERR_UNSUPPORTED, "vc_gemm_run: %lld tiles in %d groups exceed one "
                       "launch", (long long)(m_tiles * n_tiles), max_splits);
    *out = p;
    return VC_OK;
}

vc_status launch_failed(const Entry &e, cudaError_t ce, vc_err *err)
{
    (void)cudaGetLastError();
    return vc_fail(err, VC_ERR_CUDA, "vc_gemm_run: launch of %s failed: %s", e.cfg.name,
                   cudaGetErrorString(ce));
}

// The launch of arguments a on entry e into the plan.
vc_status plan_launch(const vc_gemm_args *a, const Entry &e, vc_gemm_launch_plan *plan,
                      vc_err *err)
{
    Params p;
    const vc_status st = make_params(a, e, &p, err);
    if (st != VC_OK) return st;
    const vcg::Sched sc = {a->force_order != 0, a->two_pass_split != 0};
    vcg::LaunchPlan lp = {1, false, false, false, 0, 0};
    const cudaError_t ce = e.plan(p, sc, &lp);
    if (ce != cudaSuccess) return launch_failed(e, ce, err);
    plan->groups = lp.splits;
    plan->takes_order = lp.orderable;
    plan->clusters = lp.clusters;
    plan->epi_alias = lp.epi_alias;
    plan->smem = lp.dyn;
    plan->grid = lp.grid;
    plan->waves = lp.waves;
    return VC_OK;
}

} // namespace

extern "C" vc_status vc_gemm_plan(const vc_gemm_args *a, int32_t config,
                                  vc_gemm_launch_plan *plan, vc_err *err)
{
    if (!plan) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "vc_gemm_run: plan is NULL");
    memset(plan, 0, sizeof *plan);
    plan->config = -1;
    plan->groups = 1;
    vc_status st = check_args(a, config, err);
    if (st != VC_OK) return st;
    plan->args = *a;
    if (a->m == 0) return VC_OK;
    if (!a->a || !a->w || !a->c)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "vc_gemm_run: A, W and C must not be NULL");
    const int idx = config < 0 ? pick(a) : config;
    char why[160];
    if (idx < 0 || !fits(kTable[idx], a, why, sizeof why))
        return vc_fail(err, VC_ERR_UNSUPPORTED, "vc_gemm_run: %s",
                       idx < 0 ? "no configuration" : why);
    const Entry &e = kTable[idx];
    // Tap splits: the fp32 FMA kernel has none; a warp tile's, a tap-set tile's and a
    // tap-packed tile's taps stay within its CTA (its warps divide them, or its stages hold
    // several), so an automatic split is one group there (plan_warp, plan_mma) and an explicit
    // one is refused.
    if ((a->splits > 1 || a->splits < -1) && e.load_bytes == 0)
        return vc_fail(err, VC_ERR_UNSUPPORTED, "vc_gemm_run: configuration %s has no tap split "
                       "(tensor-core configurations only)", e.cfg.name);
    if (a->splits > 1 && (e.warp || taps_in_cta(e)))
        return vc_fail(err, VC_ERR_UNSUPPORTED, "vc_gemm_run: configuration %s keeps a tile's "
                       "taps within one CTA: it has no tap split", e.cfg.name);
    if ((st = plan_launch(a, e, plan, err)) != VC_OK) return st;
    // The split runs as the explicit split of the groups it resolved to (0: none); an automatic
    // one is planned again as such, so that it launches as the count its workspace is sized for.
    plan->args.splits = plan->groups > 1 ? plan->groups : 0;
    if (a->splits < -1 && (st = plan_launch(&plan->args, e, plan, err)) != VC_OK) return st;
    plan->config = idx;
    return VC_OK;
}

extern "C" vc_status vc_gemm_run(const vc_gemm_launch_plan *plan, struct CUstream_st *stream,
                                 vc_err *err)
{
    if (!plan) return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "vc_gemm_run: plan is NULL");
    if (plan->config < 0) return VC_OK; // m = 0
    const vc_gemm_args *a = &plan->args;
    if (plan->groups > 1 && (!a->partial || !aligned(a->partial, 16)))
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "vc_gemm_run: a tap split needs a 16-byte "
                       "aligned fp32 workspace (partial)");
    if (a->tile_order &&
        a->order_blocks != (a->m + VC_GEMM_ORDER_ROWS - 1) / VC_GEMM_ORDER_ROWS)
        return vc_fail(err, VC_ERR_INVALID_ARGUMENT, "vc_gemm_run: order_blocks = %lld, but %lld "
                       "rows make %lld blocks of %d", (long long)a->order_blocks, (long long)a->m,
                       (long long)((a->m + VC_GEMM_ORDER_ROWS - 1) / VC_GEMM_ORDER_ROWS),
                       VC_GEMM_ORDER_ROWS);
    const Entry &e = kTable[plan->config];
    Params p;
    vc_status st = make_params(a, e, &p, err);
    if (st != VC_OK) return st;
    // An overlapped launch (overlap_prev): the warp tiles always; the tiles of mainloop.cuh
    // where they take more than one wave - in one wave that fills the SMs, the CTAs that the other
    // kernel's resident blocks displace cost more than the overlap saves (docs/benchmarks.md
    // "Overlapped stems").
    const bool overlap = a->overlap_prev && (e.warp || plan->waves > 1);
    const vcg::LaunchPlan lp = {plan->groups, plan->clusters != 0, plan->takes_order != 0,
                                plan->epi_alias != 0, plan->grid, plan->smem, plan->waves,
                                overlap};
    cudaStream_t s = (cudaStream_t)stream;
    // Tap split: the GEMM writes each group's plain fp32 sums into the workspace (row
    // group * m + i); unless the groups ran as clusters, a second kernel adds them in group
    // order and runs p's epilogue.
    int left = 1;
    cudaError_t ce = e.launch(p, lp, s, &left);
    if (ce == cudaSuccess && left > 1) {
        int sms = 132;
        ce = sm_count(&sms);
        const int64_t chunks = a->m * ((a->n_cols + 7) / 8), cap = (int64_t)sms * 16;
        const int64_t blocks = (chunks + 255) / 256;
        if (ce == cudaSuccess) {
            split_reduce_kernel<<<(unsigned)(blocks < cap ? blocks : cap), 256, 0, s>>>(
                p, a->partial, left);
            ce = cudaGetLastError();
        }
    }
    return ce == cudaSuccess ? VC_OK : launch_failed(e, ce, err);
}

extern "C" int32_t vc_gemm_configs(const vc_gemm_config **table)
{
    struct Configs {
        vc_gemm_config c[sizeof kTable / sizeof kTable[0]];
        Configs()
        {
            for (int i = 0; i < kTableSize; i++) c[i] = kTable[i].cfg;
        }
    };
    static const Configs cfgs; // built once, even when several threads call first
    if (table) *table = cfgs.c;
    return kTableSize;
}

extern "C" int32_t vc_gemm_config_named(const char *name, size_t len)
{
    if (!name) return -1;
    for (int i = 0; i < kTableSize; i++)
        if (strlen(kTable[i].cfg.name) == len && !strncmp(kTable[i].cfg.name, name, len))
            return i;
    return -1;
}

extern "C" int vc_gemm_split_in_clusters(int32_t config)
{
    if (config < 0 || config >= kTableSize || !kTable[config].cluster) return 0;
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return major >= 9;
}
