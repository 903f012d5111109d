#!/usr/bin/env python3
"""bench/tune_compare.py - the tuned choice against the planner's, from voxconv bench JSONs.

usage: tune_compare.py BENCH_DIR [TUNE_LAYERS.json]

BENCH_DIR holds SCENE_SUITE_PASS.json for the passes A (planner), T (--tune-cache) and A2
(planner again), as bench/run_tune writes them. Per layer timed by bench (repeats of a layer
are skipped: bench marks them with repeat_of) the planner's median is the mean of A and A2, the
noise |A - A2| / mean; a layer changed where T's configuration or tap split differs from A's.
A layer is tuned where bench says its choice came from the cache ("tuned" in T's JSON): only
those can be made slower by the cache; the others ran the planner's choice in T too, and their
T against the planner is the run-to-run spread of a bench pass, printed as such.
Prints markdown: per scene and suite the layers that changed (planner ms, tuned ms, gain) and
every tuned layer slower with the cache by more than max(3 %, 2 x its noise); then the geomean
gain over all layers and over the changed ones, the sums, and that spread. TUNE_LAYERS.json (voxconv tune
--json) adds the tuner's own confirming-round figures for the changed buckets. Standard library
only.
"""
import glob
import json
import math
import os
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    bdir = sys.argv[1]
    runs = {}
    for p in sorted(glob.glob(os.path.join(bdir, "*_A.json"))):
        stem = os.path.basename(p)[: -len("_A.json")]
        t, a2 = os.path.join(bdir, stem + "_T.json"), os.path.join(bdir, stem + "_A2.json")
        if os.path.exists(t) and os.path.exists(a2):
            runs[stem] = (load(p), load(t), load(a2))
    if not runs:
        print("no complete A / T / A2 bench results in %s" % bdir)
        return 1
    device = next(iter(runs.values()))[0].get("device", "?")
    print("# Tuned against the planner (%s)\n" % device)
    print("Per layer: the planner's median (mean of two bench runs A, A2), the tuned one (bench "
          "with --tune-cache), gain = planner / tuned; noise = |A - A2| / mean. Slower beyond "
          "noise: tuned > planner x (1 + max(3 %, 2 x noise)).\n")
    all_gain, changed_gain, slower, spread = [], [], [], []
    tuned_gain, untouched_gain = [], []
    sums = [0.0, 0.0]
    for stem, (a, t, a2) in sorted(runs.items()):
        rows = []
        for la, lt, l2 in zip(a["layers"], t["layers"], a2["layers"]):
            if la.get("repeat_of", -1) >= 0 or la["type"] in ("maxpool", "avgpool"):
                continue
            base = 0.5 * (la["median_ms"] + l2["median_ms"])
            tuned = lt["median_ms"]
            if base <= 0 or tuned <= 0:
                continue
            noise = abs(la["median_ms"] - l2["median_ms"]) / base
            changed = (la["config"], la["tap_split"]) != (lt["config"], lt["tap_split"])
            gain = base / tuned
            sums[0] += base
            sums[1] += tuned
            all_gain.append(gain)
            if changed:
                changed_gain.append(gain)
            used = lt.get("tuned", changed)
            if not used:
                spread.append(abs(tuned - base) / base)
            (tuned_gain if used else untouched_gain).append(base / tuned)
            bad = used and tuned > base * (1.0 + max(0.03, 2.0 * noise))
            if bad:
                slower.append((stem, la["name"], base, tuned, noise))
            if changed or bad:
                rows.append("| %s | %s/%s | %s/%s | %.4f | %.4f | %.3f | %.1f %% |%s" % (
                    la["name"], la["config"], la["tap_split"], lt["config"], lt["tap_split"],
                    base, tuned, gain, 100 * noise, " **slower**" if bad else ""))
        print("## %s\n" % stem)
        if rows:
            print("| layer | planner | tuned | planner ms | tuned ms | gain | noise |")
            print("|---|---|---|---|---|---|---|")
            print("\n".join(rows))
        else:
            print("no layer changed")
        print()
    print("## Summary\n")
    print("- layers: %d, changed: %d, tuned layers slower beyond noise: %d" %
          (len(all_gain), len(changed_gain), len(slower)))
    if spread:
        spread.sort()
        print("- run-to-run spread of the %d layers the cache did not touch (|T - planner| / "
              "planner): median %.1f %%, 90th percentile %.1f %%, largest %.1f %%" % (
                  len(spread), 100 * spread[len(spread) // 2],
                  100 * spread[(len(spread) * 9) // 10], 100 * spread[-1]))
    print("- geomean gain, all layers: %.4f; changed layers: %.4f; tuned layers (%d): %.4f; "
          "untouched layers (%d, the passes' bias: 1 if T ran as A and A2): %.4f" %
          (geomean(all_gain), geomean(changed_gain), len(tuned_gain), geomean(tuned_gain),
           len(untouched_gain), geomean(untouched_gain)))
    print("- sum of medians: planner %.4f ms, tuned %.4f ms (%.3f)" %
          (sums[0], sums[1], sums[0] / sums[1] if sums[1] else float("nan")))
    for s in slower:
        print("- slower: %s %s: %.4f -> %.4f ms (noise %.1f %%)" % (s[0], s[1], s[2], s[3],
                                                                      100 * s[4]))
    if len(sys.argv) > 2 and os.path.exists(sys.argv[2]):
        d = load(sys.argv[2])
        ch = [l for l in d["layers"] if l.get("changed")]
        print("\n## The tuner's own figures (confirming round) of the %d changed buckets\n"
              % len(ch))
        print("| scene | suite | layer | bucket | planner | ms | tuned | ms |")
        print("|---|---|---|---|---|---|---|---|")
        for l in ch:
            print("| %s | %s | %s | %s | %s | %.4f | %s | %.4f |" % (
                l["scene"], l["suite"], l["layer"], l["bucket"], l["planner"],
                l["planner_ms"], l["tuned"], l["tuned_ms"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
