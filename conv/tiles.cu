// conv/tiles.cu - the implicit GEMM's tile planner (conv/tiles.h): the GEMM configurations a
// convolution layer tries, best first, and its tap split. Host code: rules over the layer's
// shape and map counts, and gemm/'s plan where a rule needs the device's occupancy.
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "conv/tiles.h"
#include "gemm/gemm.h"

namespace conv_tiles {

namespace {

// The GEMM configurations of the implicit GEMM, best first (kTileRows; the next is used when one
// is absent or does not fit the device, e.g. wgmma tiles off Hopper; after the last, gemm/ picks
// by shape). From `bench_conv --tune` (fp16, every conv layer of the four suites on the
// synthetic scan, then A/Bs of the planner on the synthetic and OctoMap scans; the figures are
// in docs/journal/benchmarks-history.md, "Occupancy: the epilogue in the pipeline's shared
// memory, register-capped small tiles" and "A 64-deep k step and wgmma 64x64 in the implicit
// GEMM"). The gathered
// problem is latency-bound: what wins is CTAs in flight per SM (the _s3 tiles, registers capped
// so that 6-11 CTAs fit), then wgmma where the layer is wide and large:
//  - dense (SUBM 1x1x1) layers: the small tiles below 50k rows, gemm/'s dense pick above;
//    below, from 192 input channels or to 96 columns from 30k rows, the dense TMA kernel's 64-
//    or 96-column slice (gemm_sm90.h: each CTA holds W's slice and streams A by TMA, so a long
//    k or an exact 96-column slice pays; it was level or slower to 96 columns under 20k rows
//    and on half the narrower layers); where the small tile takes more than one wave of CTAs
//    and wgmma 128x128 one, that one first (wave_first, which also picks the tiles of k2
//    inverses and 3x1x1 maps by their waves);
//  - c_out <= 32 and c_in <= 16 from 10k outputs: the warp tile 32x16x16_warp (a warp a 32-row
//    tile, 16 columns at a time, no barriers: gemm/warp_tile.cuh), but 64x32x16_s4 first for a
//    strided k3 map from 30k outputs (it won on every such strided layer tuned, where the subm
//    layers of those widths stay fastest on the warp tile; docs/benchmarks.md "Planner rules of
//    the 2026-11-28 tune"; a tap-packed tile goes before it from 9 input channels:
//    packed_first);
//  - c_out <= 32: the two-warp 64x32 tiles (16-deep for c_in <= 16), or 64x64x32_s4 for the
//    layers under 50k outputs with K < 27;
//  - c_out 96 from 10k outputs: wgmma 128x128;
//  - c_out a multiple of 256 from 30k outputs, or from 4k with K >= 27: wgmma 128x256;
//  - c_out >= 128 from 10k outputs, or from 1k with K >= 27: wgmma 128x128;
//  - otherwise 64x64x32_s3 from 50k outputs, else 64x64x32_s4 (the coarse levels).
// Where that gives 64x64x32_s4 and c_in >= 128, or c_in = c_out = 64 from 10k outputs (DEEP),
// a 64-deep k step goes first (64x64x64_s3: half the iterations, barriers and tap switches; it
// lost where c_in is 32, or 64 with c_out 128, or 64->64 on few outputs). Then, on Hopper, the
// k3 layers (K >= 27) with c_in >= 64, c_out >= 64 but not 96, under 50k outputs, whose tile so
// far is a 64x64 one (or wgmma 128x128 under 30k outputs), take wgmma 64x64x64 first (WG64: one
// warpgroup a 64-row tile, async MMAs under the next stage's loads; it lost at 100k outputs, at
// 96 columns, at c_in 32 and on the larger k2 layers). Sparse k3 levels, 64/128 -> 96 k3
// layers and k2 maps under 10k outputs take it first as well (prefers_wg64, a later tune). The
// narrow k3 layers (c_in <= 16, or c_in and c_out <= 32) with few tiles take a warp tile whose 2
// or 4 warps share each tile's taps first (warp_first), and the k3 layers of 64-256 columns with
// a few hundred tiles (not on dense levels of over 300) and the small k2 downsamples the wgmma
// tile whose two warpgroups share them (prefers_wg2); the mid-size k3 layers to 96 channels
// take the wgmma 64x96 tile (wg96_first), the sparser mid-size 32 -> 32 k3 levels the
// wgmma 64x32 tile of two tap sets (wg32_first), and the larger or denser mid-size 32 -> 64 k3
// levels the 32-deep 64x96 one (wg96_for_64); the stems and the strided levels of 16 or 32
// input channels, ahead of all these, a tap-packed tile (packed_first: several taps a stage).
// fp32 features keep gemm/'s choice.
// Below a device's worth of tiles each layer also gets a tap split (tap_splits).

// What the rules test of a layer (one bit each).
enum TileCond : uint32_t {
    DENSE = 1u << 0,    // a SUBM 1x1x1 map: the dense GEMM
    CI_LE16 = 1u << 1,  // c_in <= 16
    CO_LE32 = 1u << 2,  // c_out <= 32
    CO_96 = 1u << 3,    // c_out == 96
    CO_X256 = 1u << 4,  // c_out a multiple of 256
    CO_GE128 = 1u << 5, // c_out >= 128
    CO_GE256 = 1u << 6, // c_out >= 256
    N_GE1K = 1u << 7,   // outputs >= 1000
    N_GE4K = 1u << 8,   // outputs >= 4000
    N_GE10K = 1u << 9,  // outputs >= 10000
    N_GE30K = 1u << 10, // outputs >= 30000
    N_GE50K = 1u << 11, // outputs >= 50000
    K_GE27 = 1u << 12,  // a k3 map (K >= 27)
    DEEP = 1u << 13,    // c_in >= 128, or c_in = c_out = 64 from 10k outputs
    WG64 = 1u << 14,    // K >= 27, c_in >= 64, c_out >= 64 but not 96, under 50k outputs
    CI_GE192 = 1u << 15, // c_in >= 192
    STRIDED = 1u << 16, // a strided map (new outputs, each gathering the inputs its kernel covers)
};

// A row: a layer with every bit of `when` takes `tiles` (names without the dtype prefix, best
// first; none: gemm/'s pick). The first row that matches is taken.
struct TileRow {
    uint32_t when;
    const char *tiles[4];
};

const TileRow kTileRows[] = {
    {DENSE | N_GE50K, {}},
    {DENSE | CO_96 | N_GE30K, {"dense_64x96_tma", "64x32x32_s3"}},
    {DENSE | CI_GE192 | CO_GE256, {"dense_64x64_tma", "64x64x64_s3", "64x64x32_s4"}},
    {DENSE | CI_GE192, {"dense_64x64_tma", "64x32x32_s3"}},
    {DENSE | CO_GE256 | DEEP, {"64x64x64_s3", "64x64x32_s4"}},
    {DENSE | CO_GE256, {"64x64x32_s4"}},
    {DENSE, {"64x32x32_s3"}},
    {CO_LE32 | CI_LE16 | N_GE30K | K_GE27 | STRIDED,
     {"64x32x16_s4", "32x16x16_warp", "64x32x16_s3"}},
    {CO_LE32 | CI_LE16 | N_GE10K, {"32x16x16_warp", "64x32x16_s3", "64x32x16_s4"}},
    {CO_LE32 | CI_LE16, {"64x32x16_s3", "64x32x16_s4"}},
    {CO_LE32 | N_GE50K, {"64x32x32_s3", "64x32x16_s4"}},
    {CO_LE32 | K_GE27, {"64x32x32_s3", "64x32x16_s4"}},
    {CO_LE32 | DEEP, {"64x64x64_s3", "64x64x32_s4"}},
    {CO_LE32, {"64x64x32_s4", "64x32x16_s4"}},
    {CO_96 | N_GE10K, {"128x128x32_s5_wg", "128x96x32_s4"}},
    {CO_X256 | N_GE30K, {"128x256x64_s3_wg", "128x128x32_s3"}},
    {CO_X256 | K_GE27 | N_GE4K, {"128x256x64_s3_wg", "64x64x32_s4"}},
    {CO_GE128 | N_GE30K, {"128x128x32_s5_wg", "128x128x32_s3"}},
    {CO_GE128 | N_GE10K | WG64, {"64x64x64_s4_wg", "128x128x32_s5_wg", "64x64x32_s4"}},
    {CO_GE128 | N_GE10K, {"128x128x32_s5_wg", "64x64x32_s4"}},
    {CO_GE128 | K_GE27 | N_GE1K | WG64, {"64x64x64_s4_wg", "128x128x32_s5_wg", "64x64x32_s4"}},
    {CO_GE128 | K_GE27 | N_GE1K, {"128x128x32_s5_wg", "64x64x32_s4"}},
    {N_GE50K, {"64x64x32_s3", "64x64x32_s4"}},
    {DEEP | WG64, {"64x64x64_s4_wg", "64x64x64_s3", "64x64x32_s4"}},
    {DEEP, {"64x64x64_s3", "64x64x32_s4"}},
    {WG64, {"64x64x64_s4_wg", "64x64x32_s4"}},
    {0, {"64x64x32_s4"}},
};

// The bits of TileCond a layer has.
uint32_t tile_conds(vc_map_type type, int64_t n_out, int64_t c_in, int64_t c_out, int64_t K,
                    bool dense)
{
    uint32_t f = 0;
    const auto put = [&f](bool on, uint32_t bit) { f |= on ? bit : 0u; };
    put(dense, DENSE);
    put(type == VC_MAP_STRIDED, STRIDED);
    put(c_in >= 192, CI_GE192);
    put(c_in <= 16, CI_LE16);
    put(c_out <= 32, CO_LE32);
    put(c_out == 96, CO_96);
    put(c_out % 256 == 0, CO_X256);
    put(c_out >= 128, CO_GE128);
    put(c_out >= 256, CO_GE256);
    put(n_out >= 1000, N_GE1K);
    put(n_out >= 4000, N_GE4K);
    put(n_out >= 10000, N_GE10K);
    put(n_out >= 30000, N_GE30K);
    put(n_out >= 50000, N_GE50K);
    put(K >= 27, K_GE27);
    put(c_in >= 128 || (c_in == 64 && c_out == 64 && n_out >= 10000), DEEP);
    put(K >= 27 && c_in >= 64 && c_out >= 64 && c_out != 96 && n_out < 50000, WG64);
    return f;
}

// The index of GEMM configuration `name` for 16-bit dtype dt ("64x32x32_s3" is f16_64x32x32_s3
// for fp16), or -1 when it is not compiled in (or dt is not 16-bit).
int32_t config_index(vc_dtype dt, const char *name)
{
    if (dt != VC_DTYPE_FP16 && dt != VC_DTYPE_BF16) return -1;
    char full[64];
    const int n = snprintf(full, sizeof full, "%s%s", dt == VC_DTYPE_FP16 ? "f16_" : "bf16_", name);
    return n > 0 && (size_t)n < sizeof full ? vc_gemm_config_named(full, (size_t)n) : -1;
}

// Whether a layer takes the wgmma 64x64x64 tile before its row's tiles: on 64-256 channels, a
// k3 map that is sparse (fewer than 5 pairs an output) under 50k outputs (under 30k to 256
// columns or more, where the rows' 128x256 tile gathers each row once, not four times, and won
// from 41.5k outputs: docs/benchmarks.md "Planner rules of the 2026-11-28 tune"), a k3 layer
// of c_in 64-128 -> 96 under 30k outputs, or a k2 map of several pairs an output (a
// downsample) under 10k outputs not to 96. Why: the 128-row tiles the rows give OR the masks
// of twice the rows, which on such levels costs more taps than the 64-row tile's fewer CTAs
// save. The bounds are where the 64-row tile stopped winning in bench_conv --tune on the four
// suites (at 96 -> 96 and from 41k k3 outputs; figures in docs/benchmarks.md "Sparse and coarse
// levels"). The k2 inverses (one pair an output) follow their CTA waves instead (wave_first).
bool prefers_wg64(int64_t n_out, int64_t n_pairs, int64_t c_in, int64_t c_out, int64_t K)
{
    if (c_in < 64 || c_out < 64 || n_out <= 0) return false;
    if (K == 8) return n_pairs > n_out && c_out != 96 && n_out < 10000; // one pair: wave_first
    if (K < 27) return false;
    const bool sparse = n_out < (c_out >= 256 ? 30000 : 50000) && n_pairs < 5 * n_out;
    const bool to96 = c_out == 96 && c_in != 96 && c_in <= 128 && n_out < 30000;
    return sparse || to96;
}

// The wgmma 64x96 tile a k3 layer to 96 channels takes before its row's tiles, or NULL: under
// 50k outputs, from 10k outputs at c_in 96, 16k at c_in 64 and 25k at c_in 128 or more (64 deep
// where c_in is a multiple of 64 from 128, else 32 deep). The tiles it replaces run the 96
// columns as two 64-column tiles (A gathered twice, twice the CTAs) or as a 128-column one (a
// quarter of the MMAs and of W's copies wasted, twice the rows ORing their masks). The bounds
// are where it won in bench_conv --tune on the four suites and five scenes (figures in
// docs/benchmarks.md "The 96- and 32-column wgmma tiles"); it lost on fewer outputs at c_in 64
// and 128 (the 64-column tiles' CTAs fill the device better there), at 100k outputs and more
// (the 128-row tile reads W half as often), and on the k1 and inverse maps.
const char *wg96_first(int64_t n_out, int64_t c_in, int64_t c_out, int64_t K)
{
    if (K < 27 || c_out != 96 || c_in < 64 || n_out >= 50000) return NULL;
    if (n_out < (c_in == 96 ? 10000 : c_in < 128 ? 16000 : 25000)) return NULL;
    return c_in >= 128 && c_in % 64 == 0 ? "64x96x64_s3_wg" : "64x96x32_s6_wg";
}

// The wgmma 64x32 tile whose two warpgroups divide each tile's taps (64x32x32_s4_wg2), for a
// k3 32 -> 32 layer of 15k to 45k outputs with fewer than 9 pairs an output, or a k2 32 -> 32
// downsample (a strided or downsample map of 8 taps) under 25k outputs, before its row's tiles
// and the warp tiles. Such a level is its heaviest tiles' chains of taps, which the two sets
// halve, and has the rows to keep three such CTAs an SM busy. The bounds are where it won in
// bench_conv --tune on the four suites and five scenes (figures in docs/benchmarks.md "The 96-
// and 32-column wgmma tiles" and "Planner rules of the 2026-11-28 tune"): the k3 levels lost
// from 9.7 pairs an output and under 15k outputs; the k2 downsamples won on every one tuned
// under 19k outputs and lost from 33k (the 64x64 two-set tile that prefers_wg2 names wastes
// half its columns at 32).
const char *wg32_first(vc_map_type type, int64_t n_out, int64_t n_pairs, int64_t c_in,
                       int64_t c_out, int64_t K)
{
    if (c_in != 32 || c_out != 32) return NULL;
    if (K == 8)
        return (type == VC_MAP_DOWNSAMPLE || type == VC_MAP_STRIDED) && n_out < 25000
                   ? "64x32x32_s4_wg2"
                   : NULL;
    if (K < 27 || n_out < 15000 || n_out >= 45000) return NULL;
    return n_pairs < 9 * n_out ? "64x32x32_s4_wg2" : NULL;
}

// The wgmma 64x96 tile, 32 deep, for a k3 32 -> 64 layer of 10k to 45k outputs that is dense
// (9.5 pairs an output or more) or has 20k outputs or more, before its row's tiles and
// prefers_wg2's. A third of its columns are zeros; why it beats the 64-column tiles on these
// levels is not established (a 64x64x32 wgmma tile of the same six stages was slower). The
// bounds come from bench_conv --tune on the four suites and five scenes, then an A/B: inside
// them it won on the strided 32 -> 64 maps and on a dense subm level; it lost on the sparser
// subm levels under 20k outputs and at 46k (docs/benchmarks.md "The 32-deep 64x96 tile on
// 32 -> 64 levels").
const char *wg96_for_64(int64_t n_out, int64_t n_pairs, int64_t c_in, int64_t c_out, int64_t K)
{
    if (K < 27 || c_in != 32 || c_out != 64 || n_out < 10000 || n_out >= 45000) return NULL;
    return 2 * n_pairs >= 19 * n_out || n_out >= 20000 ? "64x96x32_s6_wg" : NULL;
}

// The warp tiles (32 rows x 16 columns) of a layer, and the most that warp_first gives a warp
// tile of c_in <= 16 (2 warps a tile): past it, the rows' tiles or a tap-packed one.
int64_t warp_tiles(int64_t n_out, int64_t c_out)
{
    return (n_out + 31) / 32 * ((c_out + 15) / 16);
}
constexpr int64_t kWarpTileBound = 3000;

// The tap-packed tile (gemm/gemm_packed.h: several taps a stage along k) a k3 layer of few
// input channels takes before every other, or NULL: a SUBM stem of up to 8 channels (its
// features widened to 8: four taps a 32-deep stage) to 33-64 columns, or to 17-32 columns from
// 30k outputs; a map of 9-16 channels (widened to 16: two taps a stage) past warp_first's bound
// (3000 warp tiles), strided to 17-32 columns (48k outputs), where 64x32x16_s4 took them, or
// subm to 9-16 columns (96k outputs), where the single-warp tile took them; a strided map of 25-32
// channels (two taps a 64-deep stage) to 64 columns. Without packs each such stage holds one
// tap and BK - k columns of zeros. The bounds are where the packed tile was faster than the
// planner's in bench_conv --tune on the four suites and five scenes (docs/benchmarks.md "Tap
// packs"): it lost on the 32-channel subm layers, on the 16-channel ones within the warp
// tiles' bound (19k-42k outputs), on the 5 -> 16 stem and on the 4 -> 32 stem under 30k outputs
// (the warp tiles win there), and was level on the strided 16 -> 32 maps of 36k-38k outputs
// (the warp tiles').
const char *packed_first(vc_map_type type, int64_t n_out, int64_t c_in, int64_t c_out, int64_t K)
{
    if (K < 27 || c_in < 1 || n_out <= 0) return NULL;
    if (type == VC_MAP_SUBM && c_in <= 8) {
        if (c_out > 32 && c_out <= 64) return "64x64x32_s3_p4";
        return c_out > 16 && c_out <= 32 && n_out >= 30000 ? "64x32x32_s3_p4" : NULL;
    }
    if (c_in > 8 && c_in <= 16 && warp_tiles(n_out, c_out) > kWarpTileBound) {
        if (type == VC_MAP_SUBM && c_out > 8 && c_out <= 16) return "64x16x32_s3_p2";
        if (type == VC_MAP_STRIDED && c_out > 16 && c_out <= 32) return "64x32x32_s3_p2";
    }
    if (type != VC_MAP_STRIDED) return NULL;
    if (c_in > 24 && c_in <= 32 && c_out == 64) return "64x64x64_s3_p2";
    return NULL;
}

// The warp tile a k3 layer of c_in <= 16 (c_out <= 64) or of c_in <= 32 (c_out <= 32) takes
// before its row's tiles, or NULL: the one whose S warps a tile divide its taps
// (gemm/warp_tile.cuh). Such a layer's time is its heaviest tile's chain of taps (a scan's
// sorted tiles OR 1-27 taps; every tile is in flight at once), so the fewer its tiles the more
// warps a tile: at c_in <= 16, 4 up to 800 tiles of 32 rows x 16 columns, 2 up to 3000; at c_in
// 17-32 only sparse levels (fewer than 5 pairs an output, under 30k outputs) gain, with 4. From
// bench_conv --tune on the four suites (docs/benchmarks.md "Warp tiles that share a tile's
// taps"; the bound of 2 moved from 2500 to 3000 tiles for bun0's stem of 2596, "Planner rules of
// the 2026-11-28 tune").
const char *warp_first(int64_t n_out, int64_t n_pairs, int64_t c_in, int64_t c_out, int64_t K)
{
    if (K < 27 || c_in > 32 || c_out > (c_in <= 16 ? 64 : 32) || n_out <= 0) return NULL;
    const int64_t tiles = warp_tiles(n_out, c_out);
    if (c_in <= 16)
        return tiles <= 800              ? "32x16x16_warp4"
               : tiles <= kWarpTileBound ? "32x16x16_warp2"
                                         : NULL;
    return n_out < 30000 && n_pairs < 5 * n_out ? "32x16x16_warp4" : NULL;
}

// Whether a layer takes the wgmma 64x64x64 tile whose two warpgroups divide each tile's taps
// (64x64x64_s3_wg2, gemm/mainloop.cuh's tap sets) before its row's tiles. Such a layer's time is
// its heaviest tile's chain of taps (docs/benchmarks.md "Inside the heaviest CTA": most of a
// tap is the issue of its stage's loads); two chains halve it but the tile holds two rings (two
// CTAs an SM, not three) and has no tap split. The bounds are where it won in bench_conv --tune
// on the four suites and three scenes (tiles of 64 x 64; figures in docs/benchmarks.md "Two
// warpgroups that divide a tile's taps"):
// - k3, c_in 32-192, c_out 64-160, 64 (c_in <= 64) or 200 (wider) to 450 tiles: it won on every
//   such layer; it lost from 456 tiles (the occupancy) and at 68-162 tiles of c_in 128-160 (the
//   single warpgroup's tap split runs a tile on several CTAs there);
// - k3, c_in 128-384, c_out 161-256, 250-450 tiles (MinkUNet u1b1c1/c2); it lost at 112-144
//   tiles, from 1216, and on the narrower levels of spconv's net (c_in 160-256, c_out 192-256,
//   4-108 tiles);
// - k2 downsamples (a strided or downsample map: an output gathers several inputs), c_in
//   32-128, c_out 32-128, up to 240 tiles; it lost from 293 tiles, and on the inverse maps (one
//   pair an output) at every size.
// - Not on a dense k3 level (10 pairs an output or more) of over 300 tiles: there every tile
//   walks many taps, so the layer is its tiles' throughput, not its heaviest tile's chain, and
//   the single warpgroup's three CTAs an SM win (one wave, where two an SM take two). From a
//   tune on table_scene_lms400 at 5 mm (13-18 pairs an output; docs/benchmarks.md "Dense levels
//   leave the two-warpgroup tile"): 64x64x64_s4_wg won from 352 tiles, was level at 10.6 pairs
//   and 333 tiles (the synthetic CenterPoint c3 blocks), and below 264 tiles this tile still
//   won or tied at 13-19 pairs an output.
bool prefers_wg2(vc_map_type type, int64_t n_out, int64_t n_pairs, int64_t c_in, int64_t c_out,
                 int64_t K)
{
    if (n_out <= 0 || c_in < 32) return false;
    const int64_t tiles = (n_out + 63) / 64 * ((c_out + 63) / 64);
    if (K == 8)
        return (type == VC_MAP_DOWNSAMPLE || type == VC_MAP_STRIDED) && c_in <= 128 &&
               c_out >= 32 && c_out <= 128 && tiles <= 240;
    if (K < 27) return false;
    if (n_pairs >= 10 * n_out && tiles > 300) return false;
    if (c_out > 160)
        return c_in >= 128 && c_in <= 384 && c_out <= 256 && tiles >= 250 && tiles <= 450;
    if (c_in > 192 || c_out < 64) return false;
    return tiles >= (c_in <= 64 ? 64 : 200) && tiles <= 450;
}

// The CTA waves of a layer's GEMM on configuration cfg with tap split `splits` (tap_splits) on
// the current device, as vc_gemm_plan counts them for the launch the layer makes: the dense
// GEMM's persistent grid (dense) or the masked gather's CTA a tile over map m's rows and taps;
// 0 where the configuration does not plan here or its plan does not count waves. vc_gemm_plan
// plans the shape: it checks that the operands are not NULL and are aligned, and reads none, so
// a local block stands in for A, W, C, the gather table and the masks.
int64_t layer_waves(const vc_kmap_data *m, int64_t k, int64_t c_out, bool dense, vc_dtype dt,
                    int32_t cfg, int32_t splits)
{
    const vc_gemm_config *t = NULL;
    if (cfg < 0 || cfg >= vc_gemm_configs(&t) || m->n_out <= 0) return 0;
    alignas(16) unsigned char operand[16];
    vc_gemm_args g;
    memset(&g, 0, sizeof g);
    g.a = g.w = operand;
    g.c = operand;
    g.m = m->n_out;
    g.a_rows = m->n_in;
    g.n_cols = (int32_t)c_out;
    g.k = (int32_t)k;
    g.taps = g.b_taps = dense ? 1 : m->volume;
    if (!dense) {
        g.gather = g.gather_rows = g.row_map = reinterpret_cast<const int32_t *>(operand);
        g.masks = reinterpret_cast<const uint32_t *>(operand);
        g.mask_words = m->mask_words;
    }
    g.splits = splits;
    g.ab_dtype = g.c_dtype = (vc_gemm_dtype)dt;
    g.math = VC_GEMM_MATH_DEFAULT;
    vc_gemm_launch_plan pl;
    return vc_gemm_plan(&g, cfg, &pl, NULL) == VC_OK ? pl.waves : 0;
}

} // namespace

// The configurations of kTileRows for a layer, as indices (those compiled in, best first), then
// -1 (gemm/'s pick) in the slots left; all -1 for fp32 features. warp_first, or else
// prefers_wg2, or else wg96_first, or else prefers_wg64, puts its tile first, wg32_first or
// wg96_for_64 its tile before that one, and packed_first its tile before both (each where it
// is compiled in, once).
void implicit_configs(vc_map_type type, int64_t n_out, int64_t n_pairs, int64_t c_in,
                      int64_t c_out, int64_t K, bool dense, vc_dtype dt, int32_t out[4])
{
    out[0] = out[1] = out[2] = out[3] = -1;
    if (dt != VC_DTYPE_FP16 && dt != VC_DTYPE_BF16) return;
    const uint32_t f = tile_conds(type, n_out, c_in, c_out, K, dense);
    const char *packed = dense ? NULL : packed_first(type, n_out, c_in, c_out, K);
    const char *wg32 = dense ? NULL : wg32_first(type, n_out, n_pairs, c_in, c_out, K);
    const char *to64 = dense ? NULL : wg96_for_64(n_out, n_pairs, c_in, c_out, K);
    const char *warp = dense ? NULL : warp_first(n_out, n_pairs, c_in, c_out, K);
    const bool wg2 = !dense && prefers_wg2(type, n_out, n_pairs, c_in, c_out, K);
    const char *wg96 = dense ? NULL : wg96_first(n_out, c_in, c_out, K);
    const bool wg64 = !dense && prefers_wg64(n_out, n_pairs, c_in, c_out, K);
    // packed_first's tile goes first, then wg32's or wg96_for_64's tile (wgmma: Hopper only),
    // then the one the other rules name.
    const int32_t lead[3] = {packed ? config_index(dt, packed) : -1,
                             wg32   ? config_index(dt, wg32)
                             : to64 ? config_index(dt, to64)
                                    : -1,
                             warp   ? config_index(dt, warp)
                             : wg2  ? config_index(dt, "64x64x64_s3_wg2")
                             : wg96 ? config_index(dt, wg96)
                             : wg64 ? config_index(dt, "64x64x64_s4_wg")
                                    : -1};
    for (const TileRow &row : kTileRows) {
        if ((f & row.when) != row.when) continue;
        int k = 0;
        const auto put = [&](int32_t i) {
            for (int j = 0; j < k; j++)
                if (out[j] == i) return;
            if (i >= 0 && k < 4) out[k++] = i;
        };
        for (int32_t l : lead) put(l);
        for (int j = 0; j < 4 && row.tiles[j]; j++) put(config_index(dt, row.tiles[j]));
        return;
    }
}

// The tap split of the implicit GEMM (gemm.h: vc_gemm_args.splits) for a layer on tile cfg.
// A layer whose tiles cannot fill the device (the coarse levels: a few hundred CTAs, each
// walking its taps x c_in / BK iterations in series) runs each tile's taps on several CTAs and
// adds their fp32 sums in a second pass or, on sm_90, in the cluster. gemm/ picks the groups
// that fill the device (the CTAs of the tile it holds at once over the tiles); this caps them so
// that each group keeps 10 iterations or more: a tile's taps are estimated as 3x the map's mean
// taps per output (a tile ORs 64-128 outputs' masks; a map with one tap per output, an inverse,
// has one a tile), capped at K, and at most 8 groups (the most measured). From `bench_conv
// --tune --tune-splits "1 2 3 4 6 8"` (docs/journal/benchmarks-history.md, "Tap split: the
// coarse levels on more CTAs"): with this rule the planner ran close to the sweep's best on
// every conv layer of MinkUNet; the k1 and inverse layers and the large levels do not split.
// 16-bit features on tensor-core tiles only; 0 = no split (opt->tap_split > 0 forces that many
// groups).
int32_t tap_splits(const vc_kmap_data *m, int64_t c_in, int32_t cfg, vc_dtype dt,
                   const vc_engine_options &o)
{
    if (cfg < 0 || (dt != VC_DTYPE_FP16 && dt != VC_DTYPE_BF16)) return 0;
    if (o.tap_split > 0) return o.tap_split < VC_GEMM_MAX_SPLITS ? o.tap_split
                                                                  : VC_GEMM_MAX_SPLITS;
    const vc_gemm_config *t = NULL;
    if (cfg >= vc_gemm_configs(&t) || m->n_out <= 0) return 0;
    const double mean = (double)m->n_pairs / (double)m->n_out;
    double taps = mean <= 1.5 ? 1.0 : 3.0 * mean;
    if (taps > m->volume) taps = m->volume;
    const double iters = taps * (double)((c_in + t[cfg].tile_k - 1) / t[cfg].tile_k);
    const int cap = iters >= 80.0 ? 8 : (int)(iters / 10.0);
    // Fewer than 30 iterations (cap 2) split only where the split runs as clusters
    // (vc_gemm_split_in_clusters: no second pass): the two-pass split's second launch cost more
    // than half a 20-29-iteration chain saved on nearly every such layer tuned, while two groups
    // as a cluster ran faster (measured, docs/benchmarks.md).
    return cap > 2 || (cap == 2 && o.cluster_split && vc_gemm_split_in_clusters(cfg)) ? -cap
                                                                                     : 0;
}

// Maps whose CTAs walk few taps: at most one pair an output (a dense layer, SUBM 1x1x1, or a
// k2 inverse) or a kernel of fewer than 8 taps (a 3x1x1 map). A layer of one wave of CTAs then
// lasts about one tile's short chain and each further wave adds a chain (a dense layer's
// persistent CTAs take the tiles in turn, a masked layer's CTAs start as others finish), so the
// rule counts the waves on the device (layer_waves):
//  - such a masked map of c_in >= 64 to 64 columns or more but not 96 takes the wgmma 64x64x64
//    tile (64x64x64_s4_wg) where its tiles fit one wave (it keeps three CTAs an SM; the rows'
//    mma.sync tiles keep more);
//  - else, on a map of one pair an output, where the first configuration takes more than one
//    wave and wgmma 128x128 (128x128x32_s5_wg) one, that one goes first, with four to eight
//    times the small tiles' work a CTA (the others follow, for the devices without them).
// Where both take one wave, or both more than one, the rows' tile was level or faster. From
// bench_conv --tune on MinkUNet's k1 layers and k2 inverses and CenterPoint's 3x1x1 conv_out on
// five scenes, then A/Bs (docs/benchmarks.md "Maps of few taps and waves").
void wave_first(const vc_kmap_data *m, int64_t c_in, int64_t c_out, bool dense, vc_dtype dt,
                const vc_engine_options &o, int32_t cfgs[4])
{
    const bool one_pair = m->n_pairs <= m->n_out;
    if (m->n_out <= 0 || cfgs[0] < 0 || !(one_pair || (!dense && m->volume < 8))) return;
    const auto waves = [&](int32_t cfg) -> int64_t {
        if (cfg < 0) return 0;
        return layer_waves(m, c_in, c_out, dense, dt, cfg, tap_splits(m, c_in, cfg, dt, o));
    };
    int32_t first = -1;
    const int32_t wg64 = config_index(dt, "64x64x64_s4_wg");
    if (!dense && c_in >= 64 && c_out >= 64 && c_out != 96 && waves(wg64) == 1) first = wg64;
    const int32_t big = config_index(dt, "128x128x32_s5_wg");
    if (first < 0 && one_pair && cfgs[0] != big && waves(cfgs[0]) > 1 && waves(big) == 1)
        first = big;
    if (first < 0 || first == cfgs[0]) return;
    int32_t out[4] = {first, -1, -1, -1};
    for (int j = 0, n = 1; j < 4 && n < 4; j++)
        if (cfgs[j] != first) out[n++] = cfgs[j];
    for (int j = 0; j < 4; j++) cfgs[j] = out[j];
}

} // namespace conv_tiles
