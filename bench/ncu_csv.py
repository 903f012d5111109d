#!/usr/bin/env python3
"""bench/ncu_csv.py - tables from Nsight Compute's CSV (`ncu --csv --print-units base`, one row
per launch and metric; lines that do not start with a quote, ncu's and the program's own
output, are skipped). Used by bench/run_speed.

  ncu_csv.py table FILE      one row per kernel and grid size: launches, the median launch's
                             registers, occupancy, DRAM / L2 megabytes, warp instructions, and
                             the median duration (the `profile` part)
  ncu_csv.py launches FILE   one line per launch: grid, registers, duration, instructions,
                             occupancy, DRAM read, SM sub-partition active cycles against the
                             elapsed, and the six largest stall reasons (the `small` part)"""
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


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("table", "launches"):
        sys.exit(__doc__)
    (table if sys.argv[1] == "table" else per_launch)(sys.argv[2])
