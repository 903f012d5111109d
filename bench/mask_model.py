#!/usr/bin/env python3
"""bench/mask_model.py - a CPU model of the mask sort's choices, on the scenes that
`bench_conv --dump-only DIR [scan ...]` writes (DIR/scenes.tsv and DIR/sceneI.npy).

For the subm k3 map of each scene (and of the scene halved, as after a stride-2 layer) it prints
how many distinct masks there are (a counting sort over distinct masks needs that many bins),
and the implicit GEMM's taps, sum over 128-row tiles of popcount(OR of the tile's masks), for
rows in input order, sorted by the map's sort key (kmap.h: the mask's bits reordered, offsets
farther from the centre more significant; 27 bits, three 9-bit passes), by the mask itself,
by the key's top or low 18 bits only (two passes), and by popcount first. Then, rows in the
map's order, the taps per tile of 32 rows (a warp tile), 64 rows (the CTA tiles) and 128 rows:
mean and largest. On a layer whose tiles are all in flight at once the largest is its chain of steps
(docs/benchmarks.md "Warp tiles that share a tile's taps").
Usage: bench/mask_model.py DIR   (numpy)"""
import sys

import numpy as np


def neighbours(c, shape):
    """nb[p, o]: the row of p's neighbour at offset o (dz slowest, dx fastest), -1 for none."""
    b, z, y, x = (c[:, i].astype(np.int64) for i in range(4))
    Z, Y, X = shape

    def key(dz, dy, dx):
        return ((b * (Z + 2) + z + 1 + dz) * (Y + 2) + y + 1 + dy) * (X + 2) + x + 1 + dx

    k0 = key(0, 0, 0)
    order = np.argsort(k0)
    s = k0[order]
    nb = np.full((len(c), 27), -1, np.int64)
    o = 0
    for dz in (-1, 0, 1):
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                nk = key(dz, dy, dx)
                i = np.minimum(np.searchsorted(s, nk), len(s) - 1)
                nb[:, o] = np.where(s[i] == nk, order[i], -1)
                o += 1
    return nb


def subm_masks(c, shape):
    """Bit o of row p: the neighbour at offset o (dz slowest, dx fastest) exists."""
    live = neighbours(c, shape) >= 0
    return (live.astype(np.uint32) << np.arange(27, dtype=np.uint32)).sum(1, dtype=np.uint32)


def scenes(d):
    """(name, voxels, grid shape) of each scene in DIR/scenes.tsv, then of the scene halved (as
    after a stride-2 layer), name suffixed ", halved"."""
    for line in open(f"{d}/scenes.tsv"):
        f, Z, Y, X, name = line.rstrip("\n").split("\t")
        c = np.load(f"{d}/{f}")
        shape = (int(Z), int(Y), int(X))
        half = np.unique(np.concatenate([c[:, :1], c[:, 1:] // 2], 1), axis=0)
        yield name, c, shape
        yield f"{name}, halved", half, tuple((v + 1) // 2 for v in shape)


def sort_key(m):
    """kmap.h's sort key of k3 masks: offsets by distance from the centre (in half-offsets),
    then by offset, descending, take the key's bits from 26 down."""
    reach = [sum(abs(2 * ((o // d) % 3) - 2) for d in (9, 3, 1)) for o in range(27)]
    order = sorted(range(27), key=lambda o: (-reach[o], -o))
    key = np.zeros_like(m)
    for r, o in enumerate(order):
        key |= ((m >> np.uint32(o)) & np.uint32(1)) << np.uint32(26 - r)
    return key


def tile_taps(m, rows):
    """Taps of each tile of `rows` consecutive rows: popcount of the OR of their masks."""
    return np.array([bin(int(np.bitwise_or.reduce(m[i:i + rows]))).count("1")
                     for i in range(0, len(m), rows)])


def taps(m, rows=128):
    return int(tile_taps(m, rows).sum())


def main():
    for name, cc, sh in scenes(sys.argv[1] if len(sys.argv) > 1 else "."):
        m = subm_masks(cc, sh)
        k = sort_key(m)
        pc = np.array([bin(int(v)).count("1") for v in m])
        exact = taps(m[np.argsort(~k, kind="stable")])
        mask = taps(m[np.argsort(~m, kind="stable")])
        top = taps(m[np.argsort(~(k >> 9), kind="stable")])
        low = taps(m[np.argsort(~(k & 0x3FFFF), kind="stable")])
        bypc = taps(m[np.lexsort((~k, -pc))])
        print(f"{name}: {len(m)} rows, {len(np.unique(m))} distinct masks; taps: row "
              f"order {taps(m)}, sort key {exact}, whole mask {mask / exact:.3f}x, top 18 "
              f"bits {top / exact:.3f}x, low 18 bits {low / exact:.3f}x, popcount first "
              f"{bypc / exact:.3f}x")
        ms = m[np.argsort(~k, kind="stable")]
        per = "; ".join(f"{r} rows mean {t.mean():.1f} largest {t.max()}"
                        for r, t in ((r, tile_taps(ms, r)) for r in (32, 64, 128)))
        print(f"  taps per tile, sort-key order: {per}")


if __name__ == "__main__":
    main()
