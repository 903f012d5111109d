#!/usr/bin/env python3
"""bench/cta_trace/analyze.py - reads the per-CTA timelines that the instrumented tensor-core
kernel writes (bench/cta_trace/run: one file per layer, a row per CTA) and prints, per file, the
layer's span and its two heaviest CTAs and its median one: each step's cycles from kernel entry
to the end of the epilogue, and the main loop's cycles a tap by part (the wait for the stage's
copies, the barrier, the MMAs' issue, the next stage's loads, the MMAs' wait).

Usage: analyze.py TRACE.txt [...]"""
import statistics
import sys

# The kernel's stamps (clock64 of thread 0, slots 0-12 of a row): kernel entry, first tile known,
# the tile set-up's first barrier, mask cleared, rows and masks loaded, set-up done, gather copy
# start and wait, the prologue's first stage issued and all issued, the first iteration's
# barrier, the main loop's end, the epilogue's end.
STEPS = ["entry", "first_tile", "su_sync", "su_clear", "su_rows", "su_end", "gidx0", "gidx_wait",
         "pro_ld1", "pro_end", "it0", "main_end", "epi_end"]
PARTS = ["wait", "sync", "mma", "load", "mmawait"]  # slots 13-17, summed over the iterations


def show(r, g0, tag):
    c = r[1:14]
    steps = " ".join("%s %d" % (STEPS[i], c[i] - c[i - 1]) for i in range(1, 13) if c[i] and c[i - 1])
    it = max(r[19], 1)
    print("  %s cta %d: %d iterations, start %.2f us, end %.2f us | %s" % (
        tag, r[0], r[19], (r[21] - g0) / 1e3, (r[22] - g0) / 1e3, steps))
    print("      cycles a tap: " + " ".join("%s %.0f" % (PARTS[i], r[14 + i] / it) for i in range(5)))


def main(paths):
    for path in paths:
        lines = open(path).read().split("\n")
        rows = [list(map(int, l.split())) for l in lines[1:] if l.strip()]
        rows = [r for r in rows if r[21]]  # CTAs that ran a tile
        if not rows:
            print("==", path, "no CTA wrote a timeline")
            continue
        g0 = min(r[21] for r in rows)
        span = (max(r[22] for r in rows) - g0) / 1e3
        print("== %s %s, %d CTAs, span %.1f us, median prologue (entry to the first stages issued) %d cycles" % (
            path.split("/")[-1], lines[0].lstrip("# "), len(rows), span,
            statistics.median(r[10] - r[1] for r in rows)))
        rows.sort(key=lambda r: -(r[22] - g0))
        for r in rows[:2]:
            show(r, g0, "heaviest")
        show(rows[len(rows) // 2], g0, "median")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
