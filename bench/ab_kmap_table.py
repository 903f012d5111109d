#!/usr/bin/env python3
"""Compares the map-build rows of bench_kmap outputs concatenated by bench/ab_trees
(sections headed '######## base' / '######## new'): per (scene, map), the mean of each side's
'call', 'call, host', 'call, queued' (where the outputs have them) and 'graph' columns
(microseconds) and new/base. Usage: ab_kmap_table.py FILE"""
import collections
import sys

COLUMNS = ("call", "call, host", "call, queued", "graph")
runs = collections.defaultdict(lambda: collections.defaultdict(list))
order, side, header = [], None, None
for line in open(sys.argv[1]):
    if line.startswith("######## "):
        side, header = line.split()[1], None
        continue
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if line.startswith("| scene | map |"):
        header = cells
        continue
    if not header or not line.startswith("| ") or len(cells) != len(header) or not cells[0]:
        if not line.startswith("|"):
            header = None
        continue
    key = (cells[0][:28], cells[1])
    if key not in order:
        order.append(key)
    runs[key][side].append(tuple(float(cells[header.index(c)]) if c in header else None
                                 for c in COLUMNS))
print("| scene | map | " + " | ".join("%s base | %s new | new/base" % (c, c) for c in COLUMNS)
      + " |")
print("|---|---|" + "---:|---:|---:|" * len(COLUMNS))
for key in order:
    b, n = runs[key]["base"], runs[key]["new"]
    if not b or not n:
        print("| %s | %s | %s |" % (key[0], key[1], "base only" if b else "new only"))
        continue
    cells = []
    for i in range(len(COLUMNS)):
        vb = [x[i] for x in b if x[i] is not None]
        vn = [x[i] for x in n if x[i] is not None]
        if not vb or not vn: # a column one side's bench_kmap does not print
            cells.append("%s | %s | " % tuple("%.1f" % (sum(v) / len(v)) if v else ""
                                              for v in (vb, vn)))
            continue
        mb, mn = sum(vb) / len(vb), sum(vn) / len(vn)
        cells.append("%.1f | %.1f | %.3f" % (mb, mn, mn / mb))
    print("| %s | %s | %s |" % (key[0], key[1], " | ".join(cells)))
