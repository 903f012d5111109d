#!/usr/bin/env python3
"""bench/peers/spconv_summary.py - the summary of a spconv comparison (bench/peers/run_spconv's
spconv.csv, one row per layer of each suite and scene, repeated layers counted each time): per
suite and scene the layer count, both engines' sums of per-layer medians, the geometric mean of
spconv's time / voxconv's and the closest layer (the table of docs/benchmarks.md); then the
geometric mean over all layers and per scene, by layer type and by voxconv's time (under 10 us,
10-15, 15-30, 30-60, 60 and more: what a class of layer costs decides how far past spconv it can
go), and every layer under 1.1x.

Usage: bench/peers/spconv_summary.py SPCONV_CSV [--under R]
Layers voxconv did not time (an empty voxconv_ms) are left out and counted."""
import argparse
import csv
import math
import statistics
import sys
from collections import OrderedDict


# voxconv's time classes: (label, upper bound in us)
BUCKETS = [("under 10 us", 10.0), ("10-15 us", 15.0), ("15-30 us", 30.0), ("30-60 us", 60.0),
           ("60 us and more", float("inf"))]


def geomean(ratios):
    return math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="spconv.csv of bench/peers/run_spconv")
    ap.add_argument("--under", type=float, default=1.1,
                    help="list the layers whose spconv / voxconv ratio is below this (1.1)")
    args = ap.parse_args()
    groups = OrderedDict()  # (scene, net) -> [(layer, spconv ms, voxconv ms)]
    scenes = OrderedDict()  # scene -> [ratio]
    classes = {}  # ("type", name) or ("time", bucket) -> [(spconv ms, voxconv ms)]
    skipped = 0
    with open(args.csv, newline="") as f:
        for row in csv.DictReader(f):
            if not row["voxconv_ms"] or not row["spconv_conv_ms"]:
                skipped += 1
                continue
            sp, vc = float(row["spconv_conv_ms"]), float(row["voxconv_ms"])
            if sp <= 0 or vc <= 0:
                skipped += 1
                continue
            groups.setdefault((row["scene"], row["net"]), []).append((row["layer"], sp, vc))
            scenes.setdefault(row["scene"], []).append(sp / vc)
            classes.setdefault(("type", row.get("type") or "?"), []).append((sp, vc))
            bucket = next(b for b in BUCKETS if vc * 1000.0 < b[1])
            classes.setdefault(("time", bucket[0]), []).append((sp, vc))
    if not groups:
        print(f"{args.csv}: no layer timed by both engines", file=sys.stderr)
        return 1
    print("| suite | scene | layers | spconv sum ms | voxconv sum ms | geomean spconv / voxconv "
          "| worst layer |")
    print("|---|---|---:|---:|---:|---:|---|")
    under = []
    for (scene, net), rows in groups.items():
        ratios = [sp / vc for _, sp, vc in rows]
        worst = min(rows, key=lambda r: r[1] / r[2])
        print(f"| {net} | {scene} | {len(rows)} | {sum(r[1] for r in rows):.3f} | "
              f"{sum(r[2] for r in rows):.3f} | {geomean(ratios):.2f} | "
              f"{worst[0]} {worst[1] / worst[2]:.2f} |")
        under += [(sp / vc, scene, net, name, sp, vc) for name, sp, vc in rows
                  if sp / vc < args.under]
    everything = [r for rs in scenes.values() for r in rs]
    print(f"\ngeomean over {len(everything)} layers: {geomean(everything):.3f}x"
          + (f" ({skipped} rows without both times left out)" if skipped else ""))
    for scene, rs in scenes.items():
        print(f"  {scene}: {geomean(rs):.3f}x over {len(rs)} layers")
    print("\n| class | layers | geomean spconv / voxconv | median voxconv us | median spconv us |")
    print("|---|---:|---:|---:|---:|")
    order = [("type", t) for t in sorted({k[1] for k in classes if k[0] == "type"})]
    order += [("time", b[0]) for b in BUCKETS if ("time", b[0]) in classes]
    for key in order:
        rows = classes[key]
        label = ("type " if key[0] == "type" else "voxconv ") + key[1]
        print(f"| {label} | {len(rows)} | {geomean([sp / vc for sp, vc in rows]):.2f} | "
              f"{statistics.median(vc for _, vc in rows) * 1000:.1f} | "
              f"{statistics.median(sp for sp, _ in rows) * 1000:.1f} |")
    slower = sum(1 for r in everything if r < 1.0)
    print(f"\n{len(under)} layers under {args.under:g}x, {slower} slower than spconv's:")
    for ratio, scene, net, name, sp, vc in sorted(under):
        print(f"  {ratio:.3f}x  {scene} / {net} / {name}: spconv {sp * 1000:.1f} us, "
              f"voxconv {vc * 1000:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
