#!/usr/bin/env python3
"""Compares the map-build rows of bench_kmap outputs concatenated by bench/ab_trees
(sections headed '######## base' / '######## new'): per (scene, map), the mean of each side's
'call' and 'graph' columns (microseconds) and new/base. Usage: ab_kmap_table.py FILE"""
import collections
import sys

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
    runs[key][side].append((float(cells[header.index("call")]),
                            float(cells[header.index("graph")])))
print("| scene | map | call base | call new | new/base | graph base | graph new | new/base |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for key in order:
    b, n = runs[key]["base"], runs[key]["new"]
    if not b or not n:
        print("| %s | %s | %s |" % (key[0], key[1], "base only" if b else "new only"))
        continue
    mean = lambda v, i: sum(x[i] for x in v) / len(v)
    cb, cn, gb, gn = mean(b, 0), mean(n, 0), mean(b, 1), mean(n, 1)
    print("| %s | %s | %.1f | %.1f | %.3f | %.1f | %.1f | %.3f |"
          % (key[0], key[1], cb, cn, cn / cb, gb, gn, gn / gb))
