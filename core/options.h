/* core/options.h - per-context engine options: choices of which kernels run, never of what they
 * compute (every setting gives the same bits, or fails with VC_ERR_UNSUPPORTED where a forced
 * choice does not fit). They replace process-wide switches, so two contexts on two threads can
 * run with different options. The defaults are what the planners pick; tests and benchmarks set
 * fields through vc_context_options() (src/internal.h) to reach every path and to A/B them in
 * one binary. Engine entry points take `const vc_engine_options *` (NULL = the defaults).
 * The struct also carries the context's memory source (allocator: every bulk array of the
 * engine comes from it, core/alloc.h) and its cache (resources kept between calls, owned and
 * freed by the context), not only kernel choices. */
#ifndef VC_CORE_OPTIONS_H
#define VC_CORE_OPTIONS_H

#include <stdint.h>

struct vc_allocator;
struct vc_engine_cache;
struct vc_tune_table;
struct vc_conv_choice;

typedef struct vc_engine_options {
    /* Kernel maps: output discovery of STRIDED/DOWNSAMPLE/TRANSPOSED maps through a bitmap of
     * the output grid. 0: where the output keys fit its default bit budget; 1: up to the larger
     * test budget; -1: never (always the hash table). */
    int32_t kmap_dense;
    /* Implicit GEMM: the GEMM configuration (an index into vc_gemm_configs' table); -1: the
     * planner's. A configuration that does not fit a layer fails with VC_ERR_UNSUPPORTED. */
    int32_t gemm_config;
    /* Implicit GEMM: tap-split groups (16-bit features, at most VC_GEMM_MAX_SPLITS); 0: the
     * planner's. */
    int32_t tap_split;
    /* Implicit GEMM: 1 lets the planner build and use tile orders; 0 neither builds nor uses
     * them. */
    int32_t tile_order;
    /* GEMM: 1 takes a given tile order whatever the waves (tests reach it on small layers). */
    int32_t force_order;
    /* GEMM: 1 lets a tap split run as thread-block clusters where the device allows; 0 forces
     * the two-pass split. */
    int32_t cluster_split;
    /* Where bulk memory comes from (core/alloc.h); NULL: the library's defaults (malloc on the
     * host, the device pool of core/device_pool.h on the GPU). */
    const struct vc_allocator *allocator;
    /* Per-context resources the engine keeps between calls, owned by the context; NULL: none
     * kept (what they would hold is made and freed per call). */
    struct vc_engine_cache *cache;
    /* Implicit GEMM: the tuned choices per layer bucket (conv/tune.h), owned by the context,
     * consulted where gemm_config and tap_split are left to the planner; NULL: none. */
    const struct vc_tune_table *tune;
    /* Where the GPU convolution records what it ran (conv/tune.h), or NULL. */
    struct vc_conv_choice *choice;
} vc_engine_options;

#define VC_ENGINE_OPTIONS_INIT {0, -1, 0, 1, 0, 1, NULL, NULL, NULL, NULL}

/* The defaults, for callers that have no context (tests of engine internals). */
static inline vc_engine_options vc_engine_options_default(void)
{
    vc_engine_options o = VC_ENGINE_OPTIONS_INIT;
    return o;
}

#endif
