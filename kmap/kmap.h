/* kmap/kmap.h - kernel maps (docs/architecture.md): the CPU twin, the data layout the GPU shares.
 *
 * A map relates the rows of an input coordinate set to the rows of an output set through the
 * K = kz*ky*kx kernel offsets. All three representations are built together:
 *   out_in  int32 [n_out, K]: input row feeding output p at offset k, or -1;
 *   pairs   per offset k, rows offsets[k]..offsets[k+1]-1 of in_rows/out_rows, sorted by out row;
 *   masks   uint32 [n_out, mask_words], bit k%32 of word k/32 set when out_in[p,k] >= 0, and perm,
 *           the output rows sorted by their mask's sort key (below) descending, ties by row
 *           ascending.
 * Semantics of each type are documented at vc_map_type in include/voxconv.h. */
#ifndef VC_CONV_KMAP_H
#define VC_CONV_KMAP_H

#include <stdint.h>

#include "core/alloc.h"
#include "core/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest kernel extent per axis, and so the most offsets a map has (K = 343). */
#define VC_KMAP_MAX_KERNEL 7
#define VC_KMAP_MAX_VOLUME (VC_KMAP_MAX_KERNEL * VC_KMAP_MAX_KERNEL * VC_KMAP_MAX_KERNEL)

/* THE SORT KEY of perm: a row's mask with its bits reordered so that the offsets farther from the
 * kernel's centre are the more significant, compared as a K-bit number. Offset k (z slowest, x
 * fastest: k = (iz * ky + iy) * kx + ix) lies d(k) = |2 iz - kz + 1| + |2 iy - ky + 1| +
 * |2 ix - kx + 1| half-offsets from the centre; the offsets ranked by d descending, then by k
 * descending, take the key's bits from K - 1 down to 0 (key word mask_words - 1 the most
 * significant). Where every offset lies as far out (a 2x2x2 kernel, or K = 1) the key is the
 * mask.
 * Why: the rows of an implicit-GEMM tile walk the OR of their masks, and the far offsets are the
 * rare ones on surfaces; ordering by them first groups the rows that have them, so that the rest
 * share tiles whose ORs hold only the common near offsets (docs/benchmarks.md, "The mask sort's
 * key"). */
static inline int32_t vc_kmap_offset_reach(const int32_t kernel[3], int32_t k)
{
    const int32_t ix = k % kernel[2], iy = k / kernel[2] % kernel[1];
    const int32_t iz = k / kernel[2] / kernel[1];
    const int32_t a = 2 * iz - kernel[0] + 1, b = 2 * iy - kernel[1] + 1;
    const int32_t c = 2 * ix - kernel[2] + 1;
    return (a < 0 ? -a : a) + (b < 0 ? -b : b) + (c < 0 ? -c : c);
}

/* Each offset's key bit (0 .. K - 1) into kbit[K]: K - 1 minus the offsets ranked before it.
 * Returns 1 when every offset's bit is its own (the key is the mask), else 0. */
static inline int vc_kmap_key_bits(const int32_t kernel[3], int32_t *kbit)
{
    const int32_t K = kernel[0] * kernel[1] * kernel[2];
    int32_t reach[VC_KMAP_MAX_VOLUME];
    int ident = 1;
    for (int32_t k = 0; k < K; k++) reach[k] = vc_kmap_offset_reach(kernel, k);
    for (int32_t k = 0; k < K; k++) {
        int32_t before = 0;
        for (int32_t j = 0; j < K; j++)
            before += reach[j] > reach[k] || (reach[j] == reach[k] && j > k);
        kbit[k] = K - 1 - before;
        ident = ident && kbit[k] == k;
    }
    return ident;
}

typedef struct vc_kmap_data {
    vc_map_type type;
    int32_t kernel[3], stride[3], padding[3], dilation[3];
    int32_t volume;           /* K                                                             */
    int64_t n_in, n_out, n_pairs;
    int32_t out_shape[3];     /* z, y, x                                                       */
    int32_t out_batch_size;
    int32_t *out_coords;      /* [n_out, 4] for STRIDED, DOWNSAMPLE, TRANSPOSED; NULL when the
                                 outputs are a set that already exists (SUBM, INVERSE)          */
    int32_t *out_in;          /* [n_out, K]                                                    */
    int64_t *offsets;         /* [K + 1]                                                       */
    int32_t *in_rows;         /* [n_pairs]                                                     */
    int32_t *out_rows;        /* [n_pairs]                                                     */
    int32_t mask_words;
    uint32_t *masks;          /* [n_out, mask_words]                                           */
    int32_t *perm;            /* [n_out]                                                       */
    int64_t order_blocks;     /* tile order (vc_kmap_tile_order_cpu / _gpu), or 0 and NULL:     */
    int32_t *tile_order;      /* [order_blocks], see below                                      */
    const struct vc_allocator *alloc; /* where the arrays come from and go back to (core/alloc.h;
                                 NULL: malloc / the device pool); builders set it               */
} vc_kmap_data;

/* TILE ORDER: a schedule for the implicit GEMM, built on request after the map (by the GPU
 * convolution, on the first layer whose GEMM would take one: conv/conv.cu). The positions
 * of perm are cut into order_blocks = ceil(n_out / VC_KMAP_ORDER_ROWS) blocks (the last may be
 * short); a block's cost is the number of taps its rows' masks have (popcount of the OR over the
 * block, all words); tile_order lists the blocks by cost descending, ties by block ascending.
 * The GEMM's CTAs take tiles in that order (vc_gemm_args.tile_order): with mask-sorted rows, the
 * costly tiles would otherwise straggle into the last wave. The result does not depend on it. */
#define VC_KMAP_ORDER_ROWS 128

/* Builds m's tile order (host arrays), replacing an earlier one; none (0, NULL) when the map
 * has no outputs. */
vc_status vc_kmap_tile_order_cpu(vc_kmap_data *m, vc_err *err);

/* Checks a descriptor (kernel 1..7, stride >= 1, padding >= 0, dilation >= 1, odd kernel for
 * SUBM, zero padding for DOWNSAMPLE, INVERSE not handled here) and computes the output shape. */
vc_status vc_kmap_check_desc(const vc_map_desc *d, const int32_t in_shape[3], int32_t out_shape[3],
                             vc_err *err);
/* The argument checks the CPU and GPU map builds share: shape and descriptor present, n_in rows
 * (at most VC_MAX_ROWS, coordinates present when n_in > 0), batch_size >= 1, then
 * vc_kmap_check_desc (which writes the output shape). */
vc_status vc_kmap_check_build(const int32_t *in_coords, int64_t n_in, const int32_t shape[3],
                              int32_t batch_size, const vc_map_desc *d, int32_t out_shape[3],
                              vc_err *err);

/* Builds a SUBM, STRIDED, DOWNSAMPLE or TRANSPOSED map over host coordinates [n_in, 4] (rows
 * distinct and inside shape/batch_size; a duplicate gives VC_ERR_DUPLICATE). */
vc_status vc_kmap_build_cpu(const int32_t *in_coords, int64_t n_in, const int32_t shape[3],
                            int32_t batch_size, const vc_map_desc *d,
                            const vc_engine_options *opt, int num_threads, vc_kmap_data *out,
                            vc_err *err);

/* Builds the INVERSE of a STRIDED or DOWNSAMPLE map: inputs are fwd's outputs, outputs fwd's
 * inputs, out_in[q, k] = p where fwd has (q -> p at k). out_shape is the forward input shape,
 * which the caller passes. */
vc_status vc_kmap_inverse_cpu(const vc_kmap_data *fwd, const int32_t fwd_in_shape[3],
                              int32_t fwd_in_batch_size, const vc_engine_options *opt,
                              vc_kmap_data *out, vc_err *err);

/* The checks and the header (type, kernel parameters, shapes, counts, mask words) of the
 * INVERSE of fwd, shared by the CPU and GPU builders; *m is zeroed first, arrays left NULL. */
vc_status vc_kmap_inverse_header(const vc_kmap_data *fwd, const int32_t fwd_in_shape[3],
                                 int32_t fwd_in_batch_size, vc_kmap_data *m, vc_err *err);

/* Fills offsets/in_rows/out_rows/n_pairs and masks/perm from out_in (n_out, volume set). */
vc_status vc_kmap_finish_cpu(vc_kmap_data *m, vc_err *err);

void vc_kmap_data_free(vc_kmap_data *m);

#ifdef __cplusplus
}
#endif

#endif
