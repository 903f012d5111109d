// gemm/wgmma.cuh - Hopper warpgroup MMA (wgmma.mma_async, sm_90a) for the tensor-core kernel of
// gemm/mainloop.cuh: the shared-memory matrix descriptor of a K-major tile stored with the
// 128-byte swizzle (rows of 128 bytes, 16-byte unit u of row r at unit u ^ (r % 8): the layout
// swz<8, 1> of mainloop.cuh writes) or the 64-byte one (rows of 64 bytes, u ^ (r / 2 % 4):
// swz<4, 2>), the fences, and m64nNk16 (fp16, bf16) / m64nNk8 (tf32) for N = 32, 64, 96, 128,
// 192 and 256 with fp32 accumulators; and for the dense kernel of gemm/gemm_sm90.cu, the
// tensor-memory-access (TMA) copy, mbarriers and setmaxnreg (named barriers: ptx_sm80.cuh). The
// instructions assemble for sm_90a only: they are used by gemm/gemm_sm90.cu, the one file
// built for that target.
#ifndef VC_GEMM_WGMMA_CUH
#define VC_GEMM_WGMMA_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

namespace vcg {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define VC_WG_ASM(...) asm volatile(__VA_ARGS__)
#else
#define VC_WG_ASM(...) __trap() // never instantiated outside the sm_90a file
#endif

// Descriptor of a K-major operand with rows of ROWB = 128 or 64 bytes, stored with the swizzle
// of that width, at shared address `saddr` (an 8-row atom base, 8 x ROWB aligned, or that plus 32
// bytes per k-step): start address (bits 0-13, 16-byte units), leading byte offset 16 (unused by
// swizzled K-major tiles), stride byte offset 8 x ROWB (one 8-row atom), swizzle mode (bits 62-63:
// 1 = 128-byte, 2 = 64-byte).
template <int ROWB>
__device__ __forceinline__ uint64_t wg_desc(uint32_t saddr)
{
    static_assert(ROWB == 128 || ROWB == 64, "128- or 64-byte swizzle");
    return (uint64_t)((saddr >> 4) & 0x3FFFu) | (1ull << 16) |
           ((uint64_t)(8 * ROWB >> 4) << 32) | ((ROWB == 128 ? 1ull : 2ull) << 62);
}

// Registers written by other instructions are ready for the wgmma that follow.
__device__ __forceinline__ void wg_fence() { VC_WG_ASM("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit()
{
    VC_WG_ASM("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wg_wait0()
{
    VC_WG_ASM("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
}
__device__ __forceinline__ void wg_wait1()
{
    VC_WG_ASM("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
}
// Shared memory written through the generic proxy (cp.async, st.shared) is visible to the
// tensor cores' async proxy after this fence and a barrier.
__device__ __forceinline__ void fence_proxy_async()
{
    VC_WG_ASM("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Keeps the compiler from moving accumulator reads or writes across a wgmma wait.
template <int NI>
__device__ __forceinline__ void wg_fence_acc(float (&d)[NI][4])
{
#pragma unroll
    for (int j = 0; j < NI; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) asm volatile("" : "+f"(d[j][e])::"memory");
}

// D[64 x N] += A[64 x K] B[N x K]^T for one warpgroup, A and B K-major in shared memory
// (descriptors), K = 16 (fp16/bf16) or 8 (tf32). Fragment j of d: columns 8j + 2q, 8j + 2q + 1 of
// rows 16 w + g and 16 w + g + 8 (w: warp of the group, g = lane / 4, q = lane % 4), as mma.sync.
template <typename T, int N>
__device__ void wgmma(float (&d)[N / 8][4], uint64_t da, uint64_t db);

#define VC_WG_D1(d, j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
#define VC_WG_D8(d, j)                                                                         \
    VC_WG_D1(d, j), VC_WG_D1(d, j + 1), VC_WG_D1(d, j + 2), VC_WG_D1(d, j + 3),               \
        VC_WG_D1(d, j + 4), VC_WG_D1(d, j + 5), VC_WG_D1(d, j + 6), VC_WG_D1(d, j + 7)
#define VC_WG_OUT32(d) VC_WG_D1(d, 0), VC_WG_D1(d, 1), VC_WG_D1(d, 2), VC_WG_D1(d, 3)
#define VC_WG_OUT64(d) VC_WG_D8(d, 0)
#define VC_WG_OUT96(d)                                                                         \
    VC_WG_D8(d, 0), VC_WG_D1(d, 8), VC_WG_D1(d, 9), VC_WG_D1(d, 10), VC_WG_D1(d, 11)
#define VC_WG_OUT128(d) VC_WG_D8(d, 0), VC_WG_D8(d, 8)
#define VC_WG_OUT192(d) VC_WG_OUT128(d), VC_WG_D8(d, 16)
#define VC_WG_OUT256(d) VC_WG_OUT128(d), VC_WG_D8(d, 16), VC_WG_D8(d, 24)
#define VC_WG_R0 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23," \
    "%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44," \
    "%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define VC_WG_R64 "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84," \
    "%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95"
#define VC_WG_R96 "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113," \
    "%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
// "{accumulators}, descA, descB" and the operand number of the scale-d flag, per N.
#define VC_WG_R0_31 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20," \
    "%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define VC_WG_REGS32 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17"
#define VC_WG_REGS64 "{" VC_WG_R0_31 "}, %32, %33"
#define VC_WG_REGS96                                                                           \
    "{" VC_WG_R0_31 ",%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47}, %48, %49"
#define VC_WG_REGS128 "{" VC_WG_R0 "}, %64, %65"
#define VC_WG_REGS192 "{" VC_WG_R0 "," VC_WG_R64 "}, %96, %97"
#define VC_WG_REGS256 "{" VC_WG_R0 "," VC_WG_R64 "," VC_WG_R96 "}, %128, %129"
#define VC_WG_FLAG32 "%18"
#define VC_WG_FLAG64 "%34"
#define VC_WG_FLAG96 "%50"
#define VC_WG_FLAG128 "%66"
#define VC_WG_FLAG192 "%98"
#define VC_WG_FLAG256 "%130"

#define VC_WG_STR(regs, flag, op, tail)                                                          \
    "{\n.reg .pred p;\nsetp.ne.b32 p, " flag ", 0;\n" op " " regs ", p" tail ";\n}\n"
#define VC_WG_OP(T, N, op, tail)                                                               \
    template <>                                                                                \
    __device__ __forceinline__ void wgmma<T, N>(float(&d)[N / 8][4], uint64_t da, uint64_t db) \
    {                                                                                          \
        VC_WG_ASM(VC_WG_STR(VC_WG_REGS##N, VC_WG_FLAG##N, op, tail)                            \
                  : VC_WG_OUT##N(d)                                                            \
                  : "l"(da), "l"(db), "r"(1));                                                 \
    }
// The 16-bit forms take no transpose (K-major A and B); tf32 is K-major only.
#define VC_WG_OPS(N)                                                                           \
    VC_WG_OP(__half, N, "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.f16.f16", ", 1, 1, 0, 0") \
    VC_WG_OP(__nv_bfloat16, N, "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16",     \
             ", 1, 1, 0, 0")                                                                   \
    VC_WG_OP(float, N, "wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32", ", 1, 1")
VC_WG_OPS(32)
VC_WG_OPS(64)
VC_WG_OPS(96)
VC_WG_OPS(128)
VC_WG_OPS(192)
VC_WG_OPS(256)

#undef VC_WG_OPS
#undef VC_WG_OP
#undef VC_WG_STR
#undef VC_WG_REGS32
#undef VC_WG_REGS64
#undef VC_WG_REGS96
#undef VC_WG_R0_31
#undef VC_WG_REGS128
#undef VC_WG_REGS192
#undef VC_WG_REGS256
#undef VC_WG_FLAG32
#undef VC_WG_FLAG64
#undef VC_WG_FLAG96
#undef VC_WG_FLAG128
#undef VC_WG_FLAG192
#undef VC_WG_FLAG256
#undef VC_WG_R0
#undef VC_WG_R64
#undef VC_WG_R96
#undef VC_WG_OUT32
#undef VC_WG_OUT64
#undef VC_WG_OUT96
#undef VC_WG_OUT128
#undef VC_WG_OUT192
#undef VC_WG_OUT256
#undef VC_WG_D8
#undef VC_WG_D1

// ---- mbarriers, TMA, named barriers, register reallocation (the dense kernel) ----------------

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count)
{
    VC_WG_ASM("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes initialised mbarriers visible to the async proxy (the TMA unit); a barrier follows.
__device__ __forceinline__ void mbar_init_fence()
{
    VC_WG_ASM("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar)
{
    VC_WG_ASM("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// One arrival that also announces `bytes` of TMA transactions the phase must see complete.
__device__ __forceinline__ void mbar_arrive_tx(uint32_t bar, uint32_t bytes)
{
    VC_WG_ASM("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
              : "memory");
}
// Waits until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity)
{
    VC_WG_ASM("{\n.reg .pred P;\nVC_MBAR_WAIT:\n"
              "mbarrier.try_wait.parity.shared::cta.b64 P, [%0], %1;\n"
              "@!P bra VC_MBAR_WAIT;\n}\n" ::"r"(bar),
              "r"(parity)
              : "memory");
}
// 2-D TMA tile load of the box at (inner element c0, row c1) into shared memory at dst, completing
// on mbarrier bar; elements outside the tensor are zero-filled (and still counted as bytes).
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const void *tmap, uint32_t bar, int c0,
                                            int c1)
{
    VC_WG_ASM("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
              " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
              "l"(reinterpret_cast<uint64_t>(tmap)), "r"(bar), "r"(c0), "r"(c1)
              : "memory");
}
__device__ __forceinline__ void tma_prefetch_desc(const void *tmap)
{
    VC_WG_ASM("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(tmap)) : "memory");
}
template <int N> __device__ __forceinline__ void setmaxnreg_dec()
{
    VC_WG_ASM("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N> __device__ __forceinline__ void setmaxnreg_inc()
{
    VC_WG_ASM("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}


} // namespace vcg

#endif
