#!/usr/bin/env python3
"""bench/tune_compare.py - the tuned choice against the planner's, from voxconv bench --ab-cache.

usage: tune_compare.py BENCH_DIR [TUNE_LAYERS.json [AB.csv]]

BENCH_DIR holds SCENE_SUITE.json files of `voxconv bench --ab-cache CACHE` (bench/run_tune):
in one process, per conv layer, the planner's own choice (A) and the cached choice (B)
alternate ABBA... for several rounds, each side the median of --runs calls; "gain" is the
median of the per-round ratios A / B, "spread" their median absolute deviation over the gain.

A layer is *tuned* where bench took its choice from the cache ("tuned" true): only those can be
made slower by the cache. The other layers ran the same choice on both sides (an A/A run):
their |gain - 1| is the A/B method's own noise, and its 95th percentile (aa95) is printed.
A tuned layer is *slower beyond noise* where gain < 1 - max(2 x its spread, aa95).

Prints markdown: per scene and suite the tuned layers (planner's and cached choice, both
medians, gain, spread); the A/A noise; the geomean gain over the tuned layers; the worst tuned
layer, its ratio and whether it is beyond its noise; one PASS/FAIL line for "no tuned layer
slower than the planner beyond noise". TUNE_LAYERS.json (voxconv tune --json) adds the tuner's
own A/B figures of every bucket it confirmed. AB.csv: every A/B row as CSV. Standard library
only.
"""
import csv
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


def pct(xs, q):
    """Nearest-rank percentile q (0..100) of xs (not empty)."""
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(math.ceil(q / 100.0 * len(s))) - 1))]


def rows_of(bdir):
    """Every A/B row of the bench results: (stem, layer, ab, device)."""
    out, device = [], "?"
    for p in sorted(glob.glob(os.path.join(bdir, "*.json"))):
        d = load(p)
        if "ab_rounds" not in d:
            continue
        device = d.get("device", device)
        stem = os.path.basename(p)[: -len(".json")]
        for l in d["layers"]:
            if l.get("ab"):
                out.append((stem, l, l["ab"]))
    return out, device


def tuner_figures(path):
    d = load(path)
    conf = [l for l in d["layers"] if not l["known"] and l.get("rounds", 0) > 0]
    print("\n## The tuner's own A/B of the %d layers whose bucket reached a finalist\n"
          % len(conf))
    print("| scene | suite | layer | bucket | layers in bucket | planner | finalist | gain | "
          "spread | kept |")
    print("|---|---|---|---|---:|---|---|---:|---:|---|")
    for l in conf:
        print("| %s | %s | %s | %s | %d | %s | %s | %.3f | %.3f | %s |" % (
            l["scene"], l["suite"], l["layer"], l["bucket"], l["members"], l["planner"],
            l["finalist"], l["gain"], l["spread"], "yes" if l["changed"] else "no"))
    buckets = {l["bucket"] for l in d["layers"] if l["changed"]}
    print("\ntuner: %d layers, %d timed, %d buckets written, %d buckets kept a choice"
          % (len(d["layers"]), sum(not l["known"] for l in d["layers"]), d["buckets"],
             len(buckets)))


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    rows, device = rows_of(sys.argv[1])
    if not rows:
        print("no voxconv bench --ab-cache results in %s" % sys.argv[1])
        return 1
    aa = [abs(ab["gain"] - 1.0) for _, l, ab in rows if not l["tuned"]]
    aa95 = pct(aa, 95) if aa else 0.0
    print("# Tuned against the planner, interleaved in one process (%s)\n" % device)
    print("Per conv layer `voxconv bench --ab-cache`: A = the planner's own choice, B = the "
          "cached one, alternating ABBA... for %d rounds; gain = median per-round A / B, "
          "spread = its median absolute deviation over the gain. Slower beyond noise: gain < 1 - "
          "max(2 x spread, aa95 = %.2f %%, the 95th percentile of |gain - 1| over the %d layers "
          "the cache did not touch).\n" % (rows[0][2]["rounds"], 100 * aa95, len(aa)))
    tuned, verdict = [], []
    cur = None
    for stem, l, ab in rows:
        if not l["tuned"]:
            continue
        if stem != cur:
            print("\n## %s\n" % stem)
            print("| layer | planner | tuned | planner ms | tuned ms | gain | spread | "
                  "beyond noise |")
            print("|---|---|---|---:|---:|---:|---:|---|")
            cur = stem
        thr = max(2.0 * ab["spread"], aa95)
        bad = ab["gain"] < 1.0 - thr
        tuned.append((stem, l, ab, thr, bad))
        print("| %s | %s/%s | %s/%s | %.4f | %.4f | %.3f | %.3f | %s |" % (
            l["name"], ab["planner_config"], ab["planner_tap_split"], l["config"],
            l["tap_split"], ab["planner_ms"], ab["cached_ms"], ab["gain"], ab["spread"],
            "**slower**" if bad else "no"))
    print("\n## Summary\n")
    changed = [t for t in tuned if (t[1]["config"], t[1]["tap_split"]) !=
               (t[2]["planner_config"], t[2]["planner_tap_split"])]
    print("- conv layers with an A/B: %d; tuned (choice from the cache): %d, of which %d run "
          "another configuration or tap split than the planner's (the others differ in a "
          "schedule switch)" % (len(rows), len(tuned), len(changed)))
    if aa:
        print("- A/A noise (layers the cache did not touch, %d): |gain - 1| median %.2f %%, "
              "90th percentile %.2f %%, 95th %.2f %%, largest %.2f %%; their geomean gain "
              "%.4f (the method's bias: 1 if A and B are timed alike)" % (
                  len(aa), 100 * pct(aa, 50), 100 * pct(aa, 90), 100 * aa95, 100 * max(aa),
                  geomean([ab["gain"] for _, l, ab in rows if not l["tuned"]])))
    if tuned:
        gains = [t[2]["gain"] for t in tuned]
        w = min(tuned, key=lambda t: t[2]["gain"])
        print("- geomean gain over the tuned layers: %.4f (least %.3f, most %.3f); sum of "
              "medians planner %.4f ms, tuned %.4f ms" % (
                  geomean(gains), min(gains), max(gains),
                  sum(t[2]["planner_ms"] for t in tuned), sum(t[2]["cached_ms"] for t in tuned)))
        print("- worst tuned layer: %s %s: gain %.3f, spread %.3f, threshold %.3f: %s" % (
            w[0], w[1]["name"], w[2]["gain"], w[2]["spread"], 1.0 - w[3],
            "slower beyond noise" if w[4] else "within noise" if w[2]["gain"] < 1.0
            else "not slower"))
    else:
        print("- no layer took its choice from the cache")
    own = [t for t in tuned if t[2]["gain"] < 1.0 - 2.0 * t[2]["spread"]]
    print("- tuned layers slower by more than twice their own spread alone (no A/A floor): %d%s"
          % (len(own), "".join(", %s %s %.3f +- %.3f" % (t[0], t[1]["name"], t[2]["gain"],
                                                          t[2]["spread"]) for t in own)))
    bad = [t for t in tuned if t[4]]
    for t in bad:
        print("- slower beyond noise: %s %s: %.4f -> %.4f ms, gain %.3f +- %.3f" % (
            t[0], t[1]["name"], t[2]["planner_ms"], t[2]["cached_ms"], t[2]["gain"],
            t[2]["spread"]))
    print("\n%s: no tuned layer slower than the planner beyond noise (%d tuned layers, %d "
          "slower beyond noise)%s" % ("FAIL" if bad else "PASS", len(tuned), len(bad),
                                      "" if tuned else "; vacuous: the cache changed no layer"))
    if len(sys.argv) > 2 and os.path.exists(sys.argv[2]):
        tuner_figures(sys.argv[2])
    if len(sys.argv) > 3:
        with open(sys.argv[3], "w", newline="") as f:
            wr = csv.writer(f)
            wr.writerow(["run", "layer", "type", "cin", "cout", "voxels_out", "pairs",
                         "planner_config", "planner_tap_split", "cached_config",
                         "cached_tap_split", "tuned", "planner_ms", "cached_ms", "gain",
                         "spread", "rounds", "slower_beyond_noise"])
            for stem, l, ab in rows:
                thr = max(2.0 * ab["spread"], aa95)
                wr.writerow([stem, l["name"], l["type"], l["cin"], l["cout"], l["voxels_out"],
                             l["pairs"], ab["planner_config"], ab["planner_tap_split"],
                             l["config"], l["tap_split"], int(l["tuned"]), ab["planner_ms"],
                             ab["cached_ms"], ab["gain"], ab["spread"], ab["rounds"],
                             int(l["tuned"] and ab["gain"] < 1.0 - thr)])
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
