// gemm/ptx_sm80.cuh - the PTX of the tensor-core kernel's mma.sync path (sm_80 and later):
// shared addresses, cp.async with zero-fill, named barriers, ldmatrix, the tf32 rounding and
// mma.sync m16n8k16 (fp16, bf16) / m16n8k8 (tf32) with fp32 accumulators.
#ifndef VC_GEMM_PTX_SM80_CUH
#define VC_GEMM_PTX_SM80_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <type_traits>

namespace vcg {

// Waits until the kernel before this one in the stream has finished and its writes are
// visible, where this launch overlapped it (vc_gemm_args.overlap_prev; compute capability 9.0
// and up); at once otherwise.
__device__ __forceinline__ void grid_dep_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ uint32_t smem_addr(const void *p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// cp.async of LB bytes (16: .cg, 8/4: .ca); src_bytes 0 zero-fills the destination.
template <int LB>
__device__ __forceinline__ void cp_async(uint32_t dst, const void *src, int src_bytes)
{
    size_t g = __cvta_generic_to_global(src);
    if constexpr (LB == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(g),
                     "r"(src_bytes));
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(g),
                     "n"(LB), "r"(src_bytes));
    }
}

// cp.async of LB bytes that zero-fills and reads nothing where `on` is 0 (ignore-src): the
// address need not be valid then.
template <int LB>
__device__ __forceinline__ void cp_async_if(uint32_t dst, const void *src, uint32_t on)
{
    size_t g = __cvta_generic_to_global(src);
    if constexpr (LB == 16) {
        asm volatile("{\n.reg .pred z;\nsetp.eq.u32 z, %2, 0;\n"
                     "cp.async.cg.shared.global [%0], [%1], 16, z;\n}\n" ::"r"(dst),
                     "l"(g), "r"(on));
    } else {
        asm volatile("{\n.reg .pred z;\nsetp.eq.u32 z, %2, 0;\n"
                     "cp.async.ca.shared.global [%0], [%1], %3, z;\n}\n" ::"r"(dst),
                     "l"(g), "r"(on), "n"(LB));
    }
}

// Barrier `id` (1..15) among `count` threads (whole warps).
__device__ __forceinline__ void named_barrier(int id, int count)
{
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }

template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ uint32_t to_tf32(uint32_t x)
{
    uint32_t y;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(y) : "f"(__uint_as_float(x)));
    return y;
}

// D += A * B for one warp; T picks the instruction (k16 for 16-bit types, k8 for tf32). Not
// volatile: a register-only operation the compiler may schedule among the shared loads.
template <typename T>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1)
{
    if constexpr (sizeof(T) == 4) {
        asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else if constexpr (std::is_same<T, __half>::value) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

} // namespace vcg

#endif
