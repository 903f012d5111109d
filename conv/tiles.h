// conv/tiles.h - the implicit GEMM's tile planner (conv/tiles.cu), for conv/conv.cu: which GEMM
// configurations (gemm/gemm.h's table) a convolution layer tries, best first, and the tap split
// each runs with. The rules and the measurements behind them are in conv/tiles.cu.
#ifndef VC_CONV_TILES_H
#define VC_CONV_TILES_H

#include <stdint.h>

#include "conv/conv_gpu.h"
#include "core/options.h"

namespace conv_tiles {

// The configurations for a layer (map type, outputs, pairs, channels, kernel volume K; dense: a
// SUBM 1x1x1 map, which runs as a dense GEMM), as table indices, best first, those compiled in
// for 16-bit dtype dt; -1 (gemm/'s pick) in the slots left, all -1 for fp32 features.
void implicit_configs(vc_map_type type, int64_t n_out, int64_t n_pairs, int64_t c_in,
                      int64_t c_out, int64_t K, bool dense, vc_dtype dt, int32_t out[4]);

// For a layer on map m whose CTAs walk few taps (at most one pair an output: a SUBM 1x1x1 map,
// dense: run as a dense GEMM, or a k2 inverse; or a kernel of fewer than 8 taps): puts a tile
// that takes one wave of CTAs on the current device ahead of cfgs (as implicit_configs filled
// them) where the rule in conv/tiles.cu says. Queries the device (occupancy); launches nothing.
void wave_first(const vc_kmap_data *m, int64_t c_in, int64_t c_out, bool dense, vc_dtype dt,
                const vc_engine_options &o, int32_t cfgs[4]);

// The tap split of configuration cfg for a layer on map m with c_in input channels (the GEMM's
// k): 0 for none, -g for an automatic split of at most g groups, or the options' forced count.
int32_t tap_splits(const vc_kmap_data *m, int64_t c_in, int32_t cfg, vc_dtype dt,
                   const vc_engine_options &o);

} // namespace conv_tiles

#endif
