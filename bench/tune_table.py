#!/usr/bin/env python3
"""Per-layer table of `bench_conv --tune` logs (bench/run_speed PARTS=tune).

Usage: bench/tune_table.py tune_*.md

For each conv layer of each net and scene: the planner's time ("auto"), the fastest warp tile
(gemm/warp_tile.cuh, names ending "_warp"), the fastest other configuration, and their ratio
(other / warp: above 1, the warp tile is faster). A summary per (c_in, c_out) class follows:
layers, geometric mean of the ratio, and how many layers the warp tile wins. Times are medians
in ms as bench_conv prints them.
"""
import collections
import math
import re
import sys

HEAD = re.compile(r"^### (.+) on (.+)$")
TUNE = re.compile(r"^tune (\S+) (\d+)->(\d+) auto ([0-9.]+):(.*)\| best (\S+) ([0-9.]+)")
ENTRY = re.compile(r"(\S+)/(-?\d+) ([0-9.]+)")


def main(paths):
    rows = []
    for path in paths:
        net = scene = "?"
        for line in open(path, errors="replace"):
            line = line.rstrip("\n")
            h = HEAD.match(line)
            if h:
                net, scene = h.group(1), h.group(2)
                continue
            t = TUNE.match(line)
            if not t:
                continue
            name, cin, cout, auto = t.group(1), int(t.group(2)), int(t.group(3)), float(t.group(4))
            warp = other = None
            for cfg, _split, ms in ENTRY.findall(t.group(5)):
                ms = float(ms)
                if cfg.endswith("_warp"):
                    if warp is None or ms < warp[1]:
                        warp = (cfg, ms)
                elif other is None or ms < other[1]:
                    other = (cfg, ms)
            rows.append((scene, net, name, cin, cout, auto, warp, other))
    print("| scene | net | layer | c_in->c_out | auto ms | best warp | ms | best other | ms | other/warp |")
    print("|---|---|---|---|---:|---|---:|---|---:|---:|")
    cls = collections.defaultdict(list)
    for scene, net, name, cin, cout, auto, warp, other in rows:
        if warp is None or other is None:
            continue
        r = other[1] / warp[1]
        cls[(cin, cout)].append(r)
        print("| %s | %s | %s | %d->%d | %.4f | %s | %.4f | %s | %.4f | %.2f |" % (
            scene[:20], net[:14], name, cin, cout, auto, warp[0], warp[1], other[0], other[1], r))
    print("\n| c_in->c_out | layers | geomean other/warp | warp wins |")
    print("|---|---:|---:|---:|")
    for (cin, cout), rs in sorted(cls.items()):
        gm = math.exp(sum(math.log(x) for x in rs) / len(rs))
        print("| %d->%d | %d | %.2f | %d |" % (cin, cout, len(rs), gm, sum(1 for x in rs if x > 1)))


if __name__ == "__main__":
    main(sys.argv[1:])
