#!/usr/bin/env python3
"""bench/ncu_csv.py - tables from Nsight Compute's CSV (`ncu --csv --print-units base`, one row
per launch and metric; lines that do not start with a quote, ncu's and the program's own
output, are skipped). Used by bench/run_speed.

  ncu_csv.py table FILE      one row per kernel and grid size: launches, the median launch's
                             registers, occupancy, DRAM / L2 megabytes, warp instructions, and
                             the median duration (the `profile` part)
  ncu_csv.py launches FILE   one line per launch: grid, registers, duration, instructions,
                             occupancy, DRAM read, SM sub-partition active cycles against the
                             elapsed, and the six largest stall reasons (the `small` part)
  ncu_csv.py sass FILE       from `ncu --import R --page source --csv --print-source sass`
                             (stall sampling per SASS instruction): the samples by stall
                             reason, the same for the code run at most once a warp (set-up
                             and epilogue: at most as often as the kernel's first
                             instruction, which every warp runs once) and for the rest, the
                             once-a-warp code's span, and the 15 instructions with the most
                             samples"""
import collections
import csv
import sys

STALL = "smsp__average_warps_issue_stalled_"


def num(x):
    """A metric value as a float (thousands separators dropped; 0 when absent or not a number)."""
    try:
        return float(str(x).replace(",", ""))
    except ValueError:
        return 0.0


def launches(path, name_len):
    """{(launch ID, kernel name cut to name_len): {metric: value}}, in the file's order."""
    rows = [l for l in open(path) if l.startswith('"')]
    out = collections.OrderedDict()
    for r in csv.DictReader(rows):
        out.setdefault((r["ID"], r["Kernel Name"][:name_len]), {})[r["Metric Name"]] = r["Metric Value"]
    return out


def table(path):
    agg = collections.OrderedDict()
    for (_, name), m in launches(path, 70).items():
        agg.setdefault((name, m.get("launch__grid_size", "")), []).append(m)
    print("| kernel | grid | regs | launches | median us | occupancy % | DRAM rd MB | DRAM wr MB "
          "| L2 MB | inst M |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (name, grid), ms in agg.items():
        t = sorted(num(m.get("gpu__time_duration.sum", 0)) for m in ms)
        mid = ms[len(ms) // 2]
        print("| %s | %s | %s | %d | %.1f | %.0f | %.2f | %.2f | %.2f | %.2f |" % (
            name, grid, mid.get("launch__registers_per_thread", ""), len(ms), t[len(t) // 2] / 1e3,
            num(mid.get("sm__warps_active.avg.pct_of_peak_sustained_active", 0)),
            num(mid.get("dram__bytes_read.sum", 0)) / 1e6,
            num(mid.get("dram__bytes_write.sum", 0)) / 1e6,
            num(mid.get("lts__t_bytes.sum", 0)) / 1e6,
            num(mid.get("smsp__inst_executed.sum", 0)) / 1e6))


def per_launch(path):
    for (i, name), m in launches(path, 48).items():
        st = sorted(((num(v), k[len(STALL):].replace("_per_issue_active.ratio", ""))
                     for k, v in m.items() if k.startswith(STALL)), reverse=True)
        print("%s %-48s grid %s regs %s %.1f us inst %.2fM occ %.0f%% dram %.2fMB active %.0f/%.0f "
              "cyc | %s" % (
                  i, name, m.get("launch__grid_size"), m.get("launch__registers_per_thread"),
                  num(m.get("gpu__time_duration.sum", 0)) / 1e3,
                  num(m.get("smsp__inst_executed.sum", 0)) / 1e6,
                  num(m.get("sm__warps_active.avg.pct_of_peak_sustained_active", 0)),
                  num(m.get("dram__bytes_read.sum", 0)) / 1e6,
                  num(m.get("smsp__cycles_active.avg", 0)), num(m.get("sm__cycles_elapsed.max", 0)),
                  " ".join("%s %.1f" % (k, v) for v, k in st[:6])))


def sass(path):
    lines = [l for l in open(path) if l.startswith('"')]
    rows = [r for r in csv.reader(lines) if len(r) > 5]
    head, rows = rows[0], [r for r in rows[1:] if r[2].isdigit()]
    col = {h: i for i, h in enumerate(head)}
    reasons = [h for h in head if h.startswith("stall_") and "Not Issued" not in h]
    runs = [int(num(r[col["Instructions Executed"]])) for r in rows]
    warps = runs[0]  # the kernel's entry: every warp runs it once
    base = int(rows[0][0], 16)
    groups = {"all": rows, "once a warp": [], "the rest": []}
    for r, x in zip(rows, runs):
        if x:
            groups["once a warp" if x <= warps else "the rest"].append(r)
    total = sum(int(r[2]) for r in rows) or 1
    for name, g in groups.items():
        c = collections.Counter()
        for r in g:
            for h in reasons:
                c[h] += int(num(r[col[h]]))
        n = sum(int(r[2]) for r in g)
        print("%-12s %4d instructions, %5d samples (%4.1f %%): %s" % (
            name, len(g), n, 100.0 * n / total,
            " ".join("%s %d" % (h[6:], v) for h, v in c.most_common(6))))
    once = [int(r[0], 16) - base for r in groups["once a warp"]]
    if once:
        print("once a warp: code offsets 0x%x-0x%x (%d bytes) of the kernel's %d" % (
            min(once), max(once), max(once) - min(once) + 16, 16 * len(rows)))
    for r in sorted(rows, key=lambda r: -int(r[2]))[:15]:
        top = sorted(((int(num(r[col[h]])), h[6:]) for h in reasons), reverse=True)[:2]
        print("%5d %+8x run %7d %-44s %s" % (int(r[2]), int(r[0], 16) - base,
                                             int(num(r[col["Instructions Executed"]])),
                                             r[1].strip()[:44],
                                             " ".join("%s %d" % (k, v) for v, k in top if v)))


if __name__ == "__main__":
    modes = {"table": table, "launches": per_launch, "sass": sass}
    if len(sys.argv) != 3 or sys.argv[1] not in modes:
        sys.exit(__doc__)
    modes[sys.argv[1]](sys.argv[2])
