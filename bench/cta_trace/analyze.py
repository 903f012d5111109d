#!/usr/bin/env python3
"""bench/cta_trace/analyze.py - reads the per-CTA timelines that the instrumented tensor-core
kernel writes (bench/cta_trace/run: one file per layer, a row per CTA) and prints, per file, the
layer's span and its two heaviest CTAs and its median one: each step's cycles from kernel entry
to the end of the epilogue, and the main loop's cycles a tap by part (the wait for the stage's
copies, the barrier, the MMAs' issue, the next stage's loads, the MMAs' wait). Then the median
of each step over the CTAs that started with the launch (within 1 us of the first) and over
those that started later, on an SM that had run one of the layer's CTAs already: whether the
set-up's cycles are the chain's own or the launch's (cold caches, every CTA loading at once).

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
        early = [r for r in rows if r[21] - g0 < 1000]
        late = [r for r in rows if r[21] - g0 >= 1000]
        for tag, grp in (("first wave", early), ("later", late)):
            if not grp:
                continue
            med = []
            for i in range(1, 13):
                d = [r[1 + i] - r[i] for r in grp if r[1 + i] and r[i]]
                if d:
                    med.append("%s %d" % (STEPS[i], statistics.median(d)))
            setup = [r[11] - r[1] for r in grp if r[11] and r[1]]
            print("  %s: %d CTAs, median entry to the first MMA %d cycles | %s" % (
                tag, len(grp), statistics.median(setup) if setup else 0, " ".join(med)))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
