#!/usr/bin/env python3
"""Per-layer table of `bench_conv --tune` logs (bench/run_speed PARTS=tune).

Usage: bench/tune_table.py [--configs "A B ..."] [--channels CIN:COUT] tune_*.md

For each conv layer of each net and scene: its map type, kernel, output count and pairs an
output (from the layer's row that follows its tune line), the planner's time ("auto"), the
fastest configuration timed and auto / fastest (above 1, the planner left time on the table;
below 1 where VC_BENCH_TUNE_CONFIGS left the planner's own configuration out).
--configs adds a column per named configuration (with or without its dtype prefix): its time,
the fastest of its tap splits. --channels keeps the layers of those widths ("*" for any, e.g.
"32:*"). A summary per (c_in, c_out) class follows: layers, the geometric mean of auto /
fastest, and how many layers the planner is more than 5 % slower than the fastest. Times are
bench_conv's medians, in microseconds here.
"""
import argparse
import collections
import math
import re

SCENE = re.compile(r"^## Scene: (.+?), \d+ voxels")
HEAD = re.compile(r"^### (.+) on (.+)$")
TUNE = re.compile(r"^tune (\S+) (\d+)->(\d+) auto ([0-9.]+):(.*)\| best (\S+) ([0-9.]+)")
ENTRY = re.compile(r"(\S+)/(-?\d+) ([0-9.]+)")


def short(cfg):
    return cfg.split("_", 1)[1] if cfg.startswith(("f16_", "bf16_", "tf32_")) else cfg


def parse(paths):
    """Rows: scene, net, layer, c_in, c_out, auto ms, {configuration: fastest ms}, type, kernel,
    outputs, pairs (the last four None where the layer's row is missing)."""
    rows = []
    for path in paths:
        net = scene = "?"
        pending = None
        for line in open(path, errors="replace"):
            line = line.rstrip("\n")
            s = SCENE.match(line)
            if s:
                scene = s.group(1).split("/")[-1]
                continue
            h = HEAD.match(line)
            if h:
                net = h.group(1)
                continue
            t = TUNE.match(line)
            if t:
                if pending:
                    rows.append(pending + [None] * 4)
                times = {}
                for cfg, _split, ms in ENTRY.findall(t.group(5)):
                    c = short(cfg)
                    times[c] = min(times.get(c, float("inf")), float(ms))
                pending = [scene, net, t.group(1), int(t.group(2)), int(t.group(3)),
                           float(t.group(4)), times]
                continue
            if pending and line.startswith("| %s |" % pending[2]):
                c = [x.strip() for x in line.strip().strip("|").split("|")]
                try:
                    pending += [c[1], c[2].split(",")[0], int(c[4].split("->")[1]), int(c[5])]
                except (IndexError, ValueError):
                    pending += [None] * 4
                rows.append(pending)
                pending = None
        if pending:
            rows.append(pending + [None] * 4)
    return rows


def keep(row, channels):
    if not channels:
        return True
    want = channels.split(":")
    return all(w in ("*", "") or int(w) == v for w, v in zip(want, (row[3], row[4])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+", help="bench_conv --tune outputs (tune_NET.md)")
    ap.add_argument("--configs", default="", help="configurations to show a column each")
    ap.add_argument("--channels", default="", help="CIN:COUT, either may be *")
    args = ap.parse_args()
    cols = [short(c) for c in args.configs.split()]
    rows = [r for r in parse(args.logs) if keep(r, args.channels)]
    print("| scene | net | layer | map | c_in->c_out | outputs | pairs an output | auto us | "
          "fastest | us | auto / fastest |" + "".join(" %s us |" % c for c in cols))
    print("|---|---|---|---|---|---:|---:|---:|---|---:|---:|" + "---:|" * len(cols))
    cls = collections.defaultdict(list)
    for scene, net, name, cin, cout, auto, times, typ, k, outs, pairs in rows:
        if not times:
            continue
        best = min(times.items(), key=lambda kv: kv[1])
        ratio = auto / best[1]
        cls[(cin, cout)].append(ratio)
        ppo = "%.1f" % (pairs / outs) if outs else "-"
        print("| %s | %s | %s | %s k%s | %d->%d | %s | %s | %.1f | %s | %.1f | %.2f |%s" % (
            scene[:24], net[:14], name, typ or "?", k or "?", cin, cout,
            outs if outs is not None else "-", ppo, auto * 1e3, best[0], best[1] * 1e3, ratio,
            "".join(" %s |" % ("%.1f" % (times[c] * 1e3) if c in times else "-")
                    for c in cols)))
    print("\n| c_in->c_out | layers | geomean auto / fastest | planner > 5 % slower |")
    print("|---|---:|---:|---:|")
    for (cin, cout), rs in sorted(cls.items()):
        gm = math.exp(sum(math.log(x) for x in rs) / len(rs))
        print("| %d->%d | %d | %.2f | %d |" % (cin, cout, len(rs), gm,
                                              sum(1 for x in rs if x > 1.05)))


if __name__ == "__main__":
    main()
