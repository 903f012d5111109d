/* conv/kmap_gpu.h - kernel maps on the GPU (DESIGN §3). The maps are bit-identical to those of
 * the CPU twin (conv/kmap_cpu.c): same out_shape, n_out, out_coords, out_in, pair lists, masks
 * and perm, run after run. The vc_kmap_data these functions fill holds DEVICE pointers
 * (cudaMalloc); free it with vc_kmap_data_free_gpu, never vc_kmap_data_free.
 *
 * Host synchronisation (each call reads counts back; nothing else waits on the device):
 *   1. after inserting the input keys: the duplicate count, the first out-of-range row and the
 *      probe-overflow flag (once more per table doubling, which is rare);
 *   2. STRIDED, DOWNSAMPLE, TRANSPOSED: the number of unique output coordinates n_out, then the
 *      output table's insert counters (as 1);
 *   3. the pair count n_pairs, together with the consistency flags of out_in.
 * Work runs on `stream`; temporaries are stream-ordered allocations (cudaMallocAsync) freed on
 * the same stream. */
#ifndef VC_CONV_KMAP_GPU_H
#define VC_CONV_KMAP_GPU_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kmap.h" /* C declarations: keep them C-linked when included from CUDA sources */

struct CUstream_st;

/* Milliseconds per stage of one build, measured with CUDA events on the stream. */
typedef struct vc_kmap_gpu_timing {
    float insert_ms;      /* pack and insert the input keys, duplicate check                     */
    float out_coords_ms;  /* candidate keys, sort, unique, unpack, output table (0 for SUBM)    */
    float out_in_ms;      /* out_in by lookup                                                    */
    float pairs_ms;       /* flag scan, n_pairs, pair scatter                                    */
    float masks_ms;       /* masks and the mask-sorted permutation                               */
    float total_ms;
} vc_kmap_gpu_timing;

/* Builds a SUBM, STRIDED, DOWNSAMPLE or TRANSPOSED map over device coordinates d_in_coords
 * [n_in, 4] (rows distinct and inside shape/batch_size: a duplicate gives VC_ERR_DUPLICATE, a row
 * outside gives VC_ERR_OUT_OF_RANGE, as on the CPU). On failure *out is left untouched. */
vc_status vc_kmap_build_gpu(const int32_t *d_in_coords, int64_t n_in, const int32_t shape[3],
                            int32_t batch_size, const vc_map_desc *d, struct CUstream_st *stream,
                            vc_kmap_data *out, vc_err *err);

/* The same, filling *timing (may be NULL) with the stage times; it synchronises at the end. */
vc_status vc_kmap_build_gpu_timed(const int32_t *d_in_coords, int64_t n_in,
                                  const int32_t shape[3], int32_t batch_size,
                                  const vc_map_desc *d, struct CUstream_st *stream,
                                  vc_kmap_data *out, vc_kmap_gpu_timing *timing, vc_err *err);

/* Builds the INVERSE of a STRIDED or DOWNSAMPLE map whose arrays are on the device (fwd as made
 * by vc_kmap_build_gpu): inputs are fwd's outputs, outputs fwd's inputs. Same checks as
 * vc_kmap_inverse_cpu. */
vc_status vc_kmap_inverse_gpu(const vc_kmap_data *fwd, const int32_t fwd_in_shape[3],
                              int32_t fwd_in_batch_size, struct CUstream_st *stream,
                              vc_kmap_data *out, vc_err *err);

/* Frees the device arrays of a map built here (cudaFree) and zeroes the struct; NULL is fine. */
void vc_kmap_data_free_gpu(vc_kmap_data *m);

#ifdef __cplusplus
}
#endif

#endif
