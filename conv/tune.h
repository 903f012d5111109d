/* conv/tune.h - the tuning table the implicit GEMM's planner consults (conv/conv.cu), and the
 * record of what a convolution ran. Plain host data, no CUDA: the API layer (src/tune_cache.c)
 * fills a table from a cache file or from vc_conv_tune, and hands it to the engine through
 * vc_engine_options.tune; a context owns its table (no process-global state).
 *
 * BUCKETS. Layers whose GEMM problems are alike share a bucket (vc_tune_key), and the planner
 * looks a layer's bucket up: an exact match of every field, never a nearest one (a miss runs the
 * planner's rules). The fields are what the planner's rules and the tap-split rule read:
 *   math       fp32 (exact), fp16, bf16 or tf32: which GEMM configurations exist;
 *   map_type   vc_map_type (subm, strided, ...): subm 1x1x1 runs as a dense GEMM;
 *   volume     K, the kernel volume: taps per output row of the GEMM;
 *   c_in       input channels as the layer has them (16-bit features are widened to a multiple
 *              of 8 before the GEMM; the bucket keeps the caller's count);
 *   c_out      output channels;
 *   out_log2   floor(log2(n_out)): the GEMM's rows, so its tile count against the device;
 *   taps_x2    floor(2 * log2(n_pairs / n_out)), half octaves of the mean taps per output
 *              (0 for fewer than 1): the work a tile's masks leave, which the tap split
 *              rule reads.
 * A layer with no outputs or no pairs never reaches the GEMM and has no bucket. */
#ifndef VC_CONV_TUNE_H
#define VC_CONV_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "kmap/kmap.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Most tap-split groups an entry may name (gemm/gemm.h's VC_GEMM_MAX_SPLITS; conv/tune_gpu.cu
 * checks that they agree). */
#define VC_TUNE_MAX_SPLIT 16

/* vc_tune_key.math */
enum { VC_TUNE_FP32 = 0, VC_TUNE_FP16 = 1, VC_TUNE_BF16 = 2, VC_TUNE_TF32 = 3 };

typedef struct vc_tune_key {
    int32_t math, map_type, volume, c_in, c_out, out_log2, taps_x2;
} vc_tune_key;

/* A bucket's tuned choice. config: an index into vc_gemm_configs' table, or -1 where the tuning
 * kept the planner's choice (nothing overridden). split: the tap split's groups the tuning
 * measured (1: none, 2 .. VC_GEMM_MAX_SPLITS); 0 with config -1. no_order: 1 runs without the
 * tile order the planner's rule would take; two_pass: 1 runs the tap split in two passes where
 * it would run as thread-block clusters (both 0 with config -1). ms_*: the medians measured
 * (informative; the planner does not read them): for a kept choice, the planner's A/B median
 * on the member layer where it gained least and that median over the gain (the median
 * per-round ratio), so ms_planner / ms_tuned is the entry's least measured gain. */
typedef struct vc_tune_entry {
    vc_tune_key key;
    int32_t config;
    int32_t split;
    int32_t no_order, two_pass;
    double ms_planner, ms_tuned;
} vc_tune_entry;

/* A context's table: entries with distinct keys, in the order they were put. */
typedef struct vc_tune_table {
    vc_tune_entry *e;
    int32_t n, cap;
} vc_tune_table;

/* The bucket of a layer: map m (its header fields only: type, volume, n_out, n_pairs; no array is
 * read), the layer's channels, feature dtype and whether fp32 may use tf32. Returns 0, or -1
 * where the layer has no bucket (no outputs or no pairs; channels past 2^31 - 1). */
int vc_tune_key_of(const vc_kmap_data *m, int64_t c_in, int64_t c_out, vc_dtype dtype, int tf32,
                   vc_tune_key *out);
/* The bucket as text: "fp16 subm K27 32->32 out 2^17 taps 2^2.5" (the map type by its
 * vc_map_type value's name). */
void vc_tune_key_text(const vc_tune_key *k, char *buf, size_t len);
/* 1 when a and b are the same bucket. */
int vc_tune_key_equal(const vc_tune_key *a, const vc_tune_key *b);
/* The entry of bucket k, or NULL (t may be NULL). */
const vc_tune_entry *vc_tune_find(const vc_tune_table *t, const vc_tune_key *k);
/* Puts e into t, replacing the entry of its bucket. Returns 0, or -1 when out of memory (t is
 * then unchanged). */
int vc_tune_put(vc_tune_table *t, const vc_tune_entry *e);
/* Frees t's entries and empties it (t may be NULL). */
void vc_tune_table_clear(vc_tune_table *t);

/* What the last GPU convolution on a context ran (vc_engine_options.choice; written by
 * conv/conv.cu, read by the tuner and the tests). config: the GEMM configuration of the
 * implicit GEMM (an index into vc_gemm_configs' table), -1 for the other algorithms and for
 * layers that ran no GEMM; groups: its tap split's groups (1: none); tuned: 1 when the choice
 * came from the tune table; order: 1 when the GEMM took the map's tile order; clusters: 1 when
 * the tap split ran as thread-block clusters. */
typedef struct vc_conv_choice {
    int32_t algo, config, groups, tuned, order, clusters;
} vc_conv_choice;

#ifdef __cplusplus
}
#endif

#endif
