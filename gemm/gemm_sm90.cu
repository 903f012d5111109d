// gemm/gemm_sm90.cu - the launchers of the wgmma configurations listed in gemm/gemm_sm90.h, and
// the dense kernel (TMA-fed, warp-specialised, W held in shared memory) with its launcher.
// Built for sm_90a alone (CMakeLists.txt: its own object library), so that wgmma assembles here
// and nowhere else; gemm/gemm.cu offers these configurations only on a compute capability 9.0
// device.
#include <cuda.h>

#include "gemm/schedule.cuh"
#include "gemm/gemm_sm90.h"

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gemm/gemm_sm90.cu is built for sm_90a only (-gencode=arch=compute_90a,code=sm_90a)"
#endif

namespace vcg {

#define VC_GEMM_SM90_DEFINE(name, T, dt, math, BM, BN, BK, S, TG)                             \
    cudaError_t plan_##name(const Params &p, const Sched &sc, LaunchPlan *out)                \
    {                                                                                          \
        return plan_mma<T, BM, BN, BK, BM / 16, 1, S, 16, true, 1, kClusterWg<T, BM, TG>, TG>( \
            p, sc, out);                                                                       \
    }                                                                                          \
    cudaError_t launch_##name(const Params &p, const LaunchPlan &pl, cudaStream_t s, int *left) \
    {                                                                                          \
        return launch_mma<T, BM, BN, BK, BM / 16, 1, S, 16, true, 1, kClusterWg<T, BM, TG>,  \
                          TG>(p, pl, s, left);                                                 \
    }
VC_GEMM_SM90_CONFIGS(VC_GEMM_SM90_DEFINE)
#undef VC_GEMM_SM90_DEFINE

// ---- the dense kernel (gemm_sm90.h: VC_GEMM_SM90_DENSE_CONFIGS) -------------------------------
//
// C[i, n0 .. n0 + BN) = epilogue(A[i, :] W[n0 .. n0 + BN, :]^T) for the CTA's column slice; the
// CTA's 64-row tiles are member, member + group, ... (CTA b: slice b % slices, member b /
// slices). Warpgroup 0 is the producer (one thread issues every TMA copy); warpgroups 1 .. NC
// (NC = VC_GEMM_DENSE_CONSUMERS(BN)) consume local tiles j with j % NC = c for consumer c = 0 ..
// NC - 1. K block kb of local tile j is the (j * kb_n + kb)-th copy, into stage
// (j * kb_n + kb) % stages; full[s] completes when its bytes have landed, empty[s] when the
// consumer's wgmma on it have finished.
// The consumers' main loops take turns in tile order (turn[c] completes when consumer c - 1 mod
// NC has finished the main loop of the tile before): each consumer's epilogue overlaps the
// others' MMAs, and a consumer never waits on a stage more than one lap ahead of the copies - an
// mbarrier's parity cannot tell lap u from lap u - 2 (with 4 stages and 8 k blocks a tile, the
// second consumer's first wait would otherwise pass on the first lap's phase). Why three or
// four consumers where the registers allow: a tile's epilogue (a chain of shared-memory reads,
// conversions and stores a warp) takes several times its MMAs, so with two consumers a tile
// took half an epilogue plus a main loop and the copies waited on it (docs/benchmarks.md,
// "Three consumer warpgroups in the dense kernel", "A fourth consumer and a direct epilogue").
// tf32: wgmma reads only the top 19 bits of each fp32 word (truncation would miss the 5e-4
// tolerance), so the consumers round W once and each A stage before their wgmma (cvt.rna, as
// the mma.sync path), with a proxy fence before the tensor cores read.
// Epilogue: each warp stages its 16 rows 32 columns at a time in shared memory and runs the
// library's 8-column epilogue (epilogue8: 16-byte accesses) in a loop that is not unrolled: the
// unrolled per-fragment form was ~8k instructions, and the instruction-cache misses of jumping
// through it made every tile several microseconds long (measured).

// Threads of a dense CTA: the producer warpgroup and NC consumers.
__host__ __device__ constexpr int dense_threads(int nc) { return 128 * (1 + nc); }
// Registers a thread of a dense CTA starts with: what __launch_bounds__(threads, 1) allows,
// rounded down to a multiple of 8 (the kernels' REG count: 168 with two consumers, 128 with
// three, 96 with four), which ptxas gives a kernel that uses setmaxnreg.
__host__ __device__ constexpr int dense_launch_regs(int nc)
{
    return 65536 / dense_threads(nc) / 8 * 8;
}
// The producer's registers after setmaxnreg.dec, and the consumers' after setmaxnreg.inc: the
// launch count plus their share of what the producer gives back. setmaxnreg.inc takes
// registers from the CTA's own pool (not the SM's) and blocks until it has them, so asking for
// more than the producer released would hang every CTA.
constexpr int kDenseProducerRegs = 40;
__host__ __device__ constexpr int dense_consumer_regs(int nc)
{
    return (dense_launch_regs(nc) + (dense_launch_regs(nc) - kDenseProducerRegs) / nc) / 8 * 8;
}

template <typename T>
__device__ __forceinline__ void round_tf32_smem(uint32_t at)
{
    if constexpr (sizeof(T) == 4) {
        uint32_t v[4];
        asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(v[0]), "=r"(v[1]), "=r"(v[2]), "=r"(v[3])
                     : "r"(at));
        asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};\n" ::"r"(at), "r"(to_tf32(v[0])),
                     "r"(to_tf32(v[1])), "r"(to_tf32(v[2])), "r"(to_tf32(v[3])));
    }
}

template <typename T, int BN, int NC = VC_GEMM_DENSE_CONSUMERS(BN)>
__global__ void __launch_bounds__(dense_threads(NC), 1)
    dense_tma_kernel(const __grid_constant__ CUtensorMap tm_a,
                     const __grid_constant__ CUtensorMap tm_w, const Params p, const int kb_n,
                     const int stages, const int group, const int slices)
{
    extern __shared__ __align__(128) uint8_t smem[]; // aligned to 1024 below
    __shared__ __align__(8) uint64_t full[VC_GEMM_DENSE_MAX_STAGES];
    __shared__ __align__(8) uint64_t empty[VC_GEMM_DENSE_MAX_STAGES];
    __shared__ __align__(8) uint64_t turn[NC];
    __shared__ __align__(8) uint64_t w_full;
    constexpr int STAGE = 64 * 128; // bytes of one A stage
    constexpr int ES = (int)sizeof(T);
    constexpr int BKE = 128 / ES; // elements of a 128-byte row
    constexpr int LD = VC_GEMM_DENSE_EPI_LD;
    const uint32_t s_w = (smem_addr(smem) + 1023u) & ~1023u;
    const uint32_t s_a = s_w + (uint32_t)(kb_n * BN * 128);
    const int tid = threadIdx.x, wg = tid >> 7;
    const int slice = (int)(blockIdx.x % (unsigned)slices);
    const int64_t member = blockIdx.x / (unsigned)slices;
    const int n0 = slice * BN;
    const int64_t m_tiles = (p.m + 63) >> 6;

    if (tid == 0) {
        for (int s = 0; s < stages; s++) {
            mbar_init(smem_addr(&full[s]), 1);
            mbar_init(smem_addr(&empty[s]), 1);
        }
        for (int c = 0; c < NC; c++) mbar_init(smem_addr(&turn[c]), 1);
        mbar_init(smem_addr(&w_full), 1);
        mbar_init_fence();
    }
    __syncthreads();

    if (wg == 0) { // the producer
        setmaxnreg_dec<kDenseProducerRegs>();
        if (tid != 0) return;
        tma_prefetch_desc(&tm_a);
        tma_prefetch_desc(&tm_w);
        mbar_arrive_tx(smem_addr(&w_full), (uint32_t)(kb_n * BN * 128));
        for (int kb = 0; kb < kb_n; kb++)
            tma_load_2d(s_w + (uint32_t)(kb * BN * 128), &tm_w, smem_addr(&w_full), kb * BKE,
                        n0);
        int s = 0;
        uint32_t phase = 0;
        int64_t g = 0;
        for (int64_t tile = member; tile < m_tiles; tile += group) {
            for (int kb = 0; kb < kb_n; kb++, g++) {
                if (g >= stages) mbar_wait(smem_addr(&empty[s]), phase ^ 1u);
                mbar_arrive_tx(smem_addr(&full[s]), STAGE);
                tma_load_2d(s_a + (uint32_t)(s * STAGE), &tm_a, smem_addr(&full[s]), kb * BKE,
                            (int)(tile * 64));
                if (++s == stages) s = 0, phase ^= 1u;
            }
        }
        return;
    }

    // the consumers: the registers the producer gave back, shared
    constexpr int kConsumerRegs = dense_consumer_regs(NC);
    static_assert(kConsumerRegs >= BN / 2 + 56, "a consumer's accumulators and addresses");
    setmaxnreg_inc<kConsumerRegs>();
    const int c = wg - 1, ctid = tid & 127;
    // The direct epilogue (epilogue.cuh) on slices of 192 columns and more, where it measured
    // faster; on the narrower ones it was level or slower (docs/benchmarks.md).
    constexpr bool kDirect = sizeof(T) == 2 && BN >= 192;
    const bool direct = kDirect && direct_epilogue_ok<T>(p);
    const int warp = ctid >> 5, lane = tid & 31;
    float *slab = reinterpret_cast<float *>(smem + (s_a + stages * STAGE - smem_addr(smem))) +
                  (tid - 128) / 32 * 16 * LD;
    mbar_wait(smem_addr(&w_full), 0);
    if constexpr (ES == 4) {
        for (int u = tid - 128; u < kb_n * BN * 8; u += 128 * NC)
            round_tf32_smem<T>(s_w + 16u * u);
        fence_proxy_async();
        named_barrier(1, 128 * NC);
    }
    float acc[BN / 8][4];
    const int64_t per = (int64_t)kb_n;
    int t = 0; // tiles of this consumer so far
    for (int64_t j = c; member + j * group < m_tiles; j += NC, t++) {
        const int64_t tile = member + j * group;
#pragma unroll
        for (int f = 0; f < BN / 8; f++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[f][e] = 0.f;
        // my turn: consumer c - 1 mod NC has finished the main loop of tile j - 1 (phase t of
        // turn[c] for c > 0, whose predecessor's tile has the same t; phase t - 1 for c = 0)
        if (j > 0) mbar_wait(smem_addr(&turn[c]), (uint32_t)((c ? t : t - 1) & 1));
        const int64_t g = j * per;
        int s = (int)(g % stages);
        uint32_t phase = (uint32_t)((g / stages) & 1);
        int prev = -1;
        for (int kb = 0; kb < kb_n; kb++) {
            mbar_wait(smem_addr(&full[s]), phase);
            const uint32_t st = s_a + (uint32_t)(s * STAGE);
            if constexpr (ES == 4) {
#pragma unroll
                for (int u = 0; u < STAGE / 16 / 128; u++)
                    round_tf32_smem<T>(st + 16u * (ctid + 128 * u));
                fence_proxy_async();
                named_barrier(2 + c, 128);
            }
            const uint64_t da = wg_desc<128>(st);
            const uint64_t db = wg_desc<128>(s_w + (uint32_t)(kb * BN * 128));
            wg_fence_acc(acc);
            wg_fence();
#pragma unroll
            for (int ks = 0; ks < 4; ks++) wgmma<T, BN>(acc, da + 2 * ks, db + 2 * ks);
            wg_commit();
            if (prev >= 0) {
                wg_wait1(); // the previous stage's wgmma are done: hand it back
                if (ctid == 0) mbar_arrive(smem_addr(&empty[prev]));
            }
            prev = s;
            if (++s == stages) s = 0, phase ^= 1u;
        }
        wg_wait0();
        wg_fence_acc(acc);
        if (ctid == 0) {
            mbar_arrive(smem_addr(&empty[prev]));
            mbar_arrive(smem_addr(&turn[c + 1 == NC ? 0 : c + 1])); // the next one's turn
        }

        // Epilogue: fragment f holds columns 8 f + 2 (lane % 4) (+1) of rows lane / 4 and
        // lane / 4 + 8 of the warp's 16.
        const int64_t row0 = tile * 64 + warp * 16;
        const int g4 = lane >> 2, q = lane & 3;
        if (direct) {
            static_assert(LD == kDirectLd, "the direct epilogue's staging rows");
            epilogue_direct<T, BN / 8>(p, acc, slab, n0, g4, q, lane, [&](int row) -> int64_t {
                const int64_t i = row0 + row;
                if (i >= p.m) return -1;
                return p.row_map ? (int64_t)p.row_map[i] : i;
            });
            continue;
        }
        // The general case: staged 32 columns (4 fragments) at a time as fp32, each 8 columns
        // through the library's epilogue8.
#pragma unroll 1
        for (int cc = 0; cc < BN / 32 && n0 + 32 * cc < p.n_cols; cc++) {
#pragma unroll
            for (int c2 = 0; c2 < BN / 32; c2++) {
                if (c2 != cc) continue;
#pragma unroll
                for (int f = 0; f < 4; f++) {
                    *reinterpret_cast<float2 *>(slab + g4 * LD + 8 * f + 2 * q) =
                        make_float2(acc[4 * c2 + f][0], acc[4 * c2 + f][1]);
                    *reinterpret_cast<float2 *>(slab + (g4 + 8) * LD + 8 * f + 2 * q) =
                        make_float2(acc[4 * c2 + f][2], acc[4 * c2 + f][3]);
                }
            }
            __syncwarp();
#pragma unroll 1
            for (int u = lane; u < 64; u += 32) { // 16 rows x 4 chunks of 8 columns
                const int row = u >> 2, col = (u & 3) * 8;
                const int64_t i = row0 + row;
                const int n = n0 + 32 * cc + col;
                if (i >= p.m || n >= p.n_cols) continue;
                const int64_t r = p.row_map ? (int64_t)p.row_map[i] : i;
                if (r < 0) continue;
                const float4 *src = reinterpret_cast<const float4 *>(slab + row * LD + col);
                const float4 x = src[0], y = src[1];
                float v[8] = {x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
                epilogue8(p, r, n, v);
            }
            __syncwarp();
        }
    }
}

// cuTensorMapEncodeTiled, from the driver through the runtime (no link to libcuda).
typedef CUresult (*EncodeTiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

// The driver's cuTensorMapEncodeTiled, or null; asked once (a function-local static: C++
// initialises it once even when several threads call first).
EncodeTiled query_encoder()
{
    void *f = nullptr;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    cudaError_t e =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &q);
#else
    cudaError_t e = cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &f, cudaEnableDefault, &q);
#endif
    if (e == cudaSuccess && q == cudaDriverEntryPointSuccess) return (EncodeTiled)f;
    (void)cudaGetLastError();
    return nullptr;
}

EncodeTiled encoder()
{
    static const EncodeTiled fn = query_encoder();
    return fn;
}

bool dense_tma_available() { return encoder() != nullptr; }

// A 2-D tensor map of `rows` rows of `cols` elements, `stride` bytes apart, boxes of 128 bytes x
// box_rows, 128-byte swizzle, zero fill outside.
template <typename T>
cudaError_t make_map(CUtensorMap *m, const void *base, int64_t cols, int64_t rows, int64_t stride,
                     int box_rows)
{
    EncodeTiled enc = encoder();
    if (!enc) return cudaErrorNotSupported;
    const CUtensorMapDataType dt = sizeof(T) == 4 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                   : std::is_same<T, __half>::value
                                       ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                       : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    const cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    const cuuint64_t strides[1] = {(cuuint64_t)stride};
    const cuuint32_t box[2] = {(cuuint32_t)(128 / sizeof(T)), (cuuint32_t)box_rows};
    const cuuint32_t estr[2] = {1, 1};
    const CUresult r = enc(m, dt, 2, const_cast<void *>(base), dims, strides, box, estr,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                           CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// Launches the dense kernel: one CTA per SM (its shared memory allows no more), the SMs divided
// among the column slices. gemm.cu has checked that the problem is dense, that k and the bases
// suit the TMA unit and that W's slice fits (vc_gemm_dense_stages).
template <typename T, int BN>
cudaError_t launch_dense_tma(const Params &p, cudaStream_t s)
{
    constexpr int ES = (int)sizeof(T);
    const int stages = vc_gemm_dense_stages(ES, BN, p.k);
    if (stages == 0) return cudaErrorInvalidValue;
    const int kb_n = (int)vc_gemm_dense_kblocks(ES, p.k);
    CUtensorMap tm_a, tm_w;
    cudaError_t e = make_map<T>(&tm_a, p.a, p.k, p.m, (int64_t)p.k * ES, 64);
    if (e != cudaSuccess) return e;
    const T *w0 = static_cast<const T *>(p.w) + (int64_t)p.b_tap0 * p.k;
    e = make_map<T>(&tm_w, w0, p.k, p.n_cols, (int64_t)p.b_taps * p.k * ES, BN);
    if (e != cudaSuccess) return e;
    auto kern = dense_tma_kernel<T, BN>;
    static DeviceFlags set_on; // as launch_mma: the opt-in once per device
    int dev = 0, sms = 0;
    if ((e = cudaGetDevice(&dev)) != cudaSuccess) return e;
    if (!set_on.has(dev)) {
        e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 VC_GEMM_DENSE_SMEM_BUDGET);
        if (e != cudaSuccess) return e;
        set_on.done(dev);
    }
    if ((e = sm_count(&sms)) != cudaSuccess) return e;
    const int slices = (p.n_cols + BN - 1) / BN;
    const int64_t m_tiles = (p.m + 63) / 64;
    int64_t group = sms / slices;
    if (group < 1) group = 1;
    if (group > m_tiles) group = m_tiles;
    const int dyn = (int)vc_gemm_dense_smem(ES, BN, p.k, stages);
    constexpr int threads = dense_threads(VC_GEMM_DENSE_CONSUMERS(BN));
    kern<<<(unsigned)(group * slices), threads, dyn, s>>>(tm_a, tm_w, p, kb_n, stages,
                                                          (int)group, slices);
    return cudaGetLastError();
}

// The dense kernel's plan: no split, no tile order; launch_dense_tma sizes the grid.
inline cudaError_t plan_dense_tma(LaunchPlan *out)
{
    *out = {1, false, false, false, 0, 0};
    return cudaSuccess;
}

#define VC_GEMM_SM90_DENSE_DEFINE(name, T, dt, math, BN)                                       \
    cudaError_t plan_##name(const Params &, const Sched &, LaunchPlan *out)                   \
    {                                                                                          \
        return plan_dense_tma(out);                                                            \
    }                                                                                          \
    cudaError_t launch_##name(const Params &p, const LaunchPlan &, cudaStream_t s, int *left)   \
    {                                                                                          \
        *left = 1;                                                                             \
        return launch_dense_tma<T, BN>(p, s);                                                  \
    }
VC_GEMM_SM90_DENSE_CONFIGS(VC_GEMM_SM90_DENSE_DEFINE)
#undef VC_GEMM_SM90_DENSE_DEFINE

} // namespace vcg
