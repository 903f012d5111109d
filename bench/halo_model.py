#!/usr/bin/env python3
"""bench/halo_model.py - a CPU model of halo tiles, on the scenes that
`bench_conv --dump-only DIR [scan ...]` writes (DIR/scenes.tsv and DIR/sceneI.npy).

For the subm k3 map of each scene (and of the scene halved, as after a stride-2 layer), tiles of
64 output rows in three row orders: the map's sort key (kmap.h, the library's tile order), Morton
order, and the scene's own. Per tile: the pairs (the gathers the library's tiles make, a row a
pair), the halo (the distinct input rows those pairs read: what a tile that copies each input
row once would load), their ratio, and the taps of the tile (popcount of the OR of its rows'
masks: what the tile walks). bench/halo_probe.cu measures a kernel built on Morton-order tiles.
Usage: bench/halo_model.py DIR   (numpy)"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mask_model import neighbours, scenes, sort_key, subm_masks  # noqa: E402


def morton(c):
    """Morton key of (z, y, x), 16 bits each, the batch above them."""
    v = np.zeros(len(c), np.uint64)
    z, y, x = (c[:, i].astype(np.uint64) for i in (1, 2, 3))
    for bit in range(16):
        for j, a in enumerate((x, y, z)):
            v |= ((a >> np.uint64(bit)) & np.uint64(1)) << np.uint64(3 * bit + j)
    return v | (c[:, 0].astype(np.uint64) << np.uint64(48))


def tiles(nb, order, rows=64):
    """Means over the tiles of `rows` rows in `order`: pairs, halo rows, taps; the largest halo."""
    pairs, halo, taps, big = [], [], [], 0
    for i in range(0, len(order), rows):
        t = nb[order[i:i + rows]]
        live = t >= 0
        h = len(np.unique(t[live]))
        pairs.append(live.sum())
        halo.append(h)
        taps.append(live.any(0).sum())
        big = max(big, h)
    return np.mean(pairs), np.mean(halo), big, np.mean(taps)


def main():
    for name, cc, sh in scenes(sys.argv[1] if len(sys.argv) > 1 else "."):
        nb = neighbours(cc, sh)
        k = sort_key(subm_masks(cc, sh))
        print(f"{name}: {len(cc)} rows, {(nb >= 0).sum() / len(cc):.1f} pairs a row")
        for tag, o in (("sort key", np.argsort(~k, kind="stable")),
                       ("Morton", np.argsort(morton(cc), kind="stable")),
                       ("scene", np.arange(len(cc)))):
            p, h, big, t = tiles(nb, o)
            print(f"  {tag:8s}: a 64-row tile {p:5.0f} pairs, {h:5.1f} halo rows (largest "
                  f"{big}), pairs / halo {p / h:4.2f}, {t:4.1f} taps")

if __name__ == "__main__":
    main()
