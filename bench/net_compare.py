#!/usr/bin/env python3
"""voxconv's networks against spconv's: the same voxels, the same weights, outputs and times.

  net_compare.py --voxconv BIN --work DIR [--md OUT.md] [--json OUT.json] [--args "..."]

DIR is bench/peers/net_spconv_bench.py's work folder: its manifest.json lists, per (model,
scene), the model description, the safetensors weights, the input .vxt both engines read and
spconv's outputs (fp16 and fp32) and per-frame times. For each, this runs

  voxconv run MODEL WEIGHTS IN.vxt DIR/out/MODEL/SCENE/voxconv --json --profile [--args]

(and, where the scene has points and the model a voxelize block, once more on the points, for the
time with voxelization included), then compares each named output with spconv's:
- sparse outputs: the coordinate sets must be identical (compared sorted by b, z, y, x);
- features, and dense outputs: the largest |voxconv - spconv fp32| relative to the largest
  |spconv fp32| must stay within max(3 x spconv fp16's own such error, 2e-2) -- voxconv runs in
  the net's dtype (fp16 on CUDA by default), so spconv fp16's distance to fp32 is the scale of
  what rounding alone gives.
Times: spconv's median per-frame wall time (net_spconv_bench.py: fresh SparseConvTensor, maps
rebuilt, synchronised) beside the time voxconv's --json reports (the first of frame_ms, run_ms,
median_ms, wall_ms, total_ms, ms found, named in the table), and the layer/map totals of its
--profile steps where present. Needs NumPy only. Exit status 1 if any output differs."""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tools"))
import vxt  # noqa: E402

TIME_KEYS = ("frame_ms", "run_ms", "median_ms", "wall_ms", "total_ms", "ms")
REL_FLOOR = 2e-2


def parse_json(text):
    """The last JSON object printed (voxconv prints one; tolerate lines before it)."""
    text = text.strip()
    for start in [i for i, ch in enumerate(text) if ch == "{"]:
        try:
            return json.loads(text[start:])
        except ValueError:
            continue
    return None


def find_ms(obj):
    """(key, value) of voxconv's per-frame time in its --json, or (None, None)."""
    if not isinstance(obj, dict):
        return None, None
    for k in TIME_KEYS:
        if isinstance(obj.get(k), (int, float)):
            return k, float(obj[k])
    for k, v in obj.items():
        if isinstance(v, dict):
            kk, vv = find_ms(v)
            if kk:
                return k + "." + kk, vv
    return None, None


def profile_totals(obj):
    """Sums of ms and map_ms over the --profile steps (a list of dicts under any key)."""
    if not isinstance(obj, dict):
        return None
    for v in obj.values():
        if isinstance(v, list) and v and isinstance(v[0], dict) and "ms" in v[0]:
            return dict(steps=len(v), layers_ms=sum(float(s.get("ms", 0)) for s in v),
                        maps_ms=sum(float(s.get("map_ms", 0)) for s in v))
    return None


def run_voxconv(vc, model, weights, inp, outdir, extra, points=None):
    os.makedirs(outdir, exist_ok=True)
    cmd = [vc, "run", model, weights, inp, outdir, "--json", "--profile"] + extra
    if points and points.get("load_dim"):
        cmd += ["--load-dim", str(points["load_dim"])]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return r.returncode, parse_json(r.stdout), (r.stderr or "").strip(), " ".join(cmd)


def load_ours(outdir, name, kind):
    if kind == "sparse":
        p = os.path.join(outdir, name + ".vxt")
        if not os.path.exists(p):
            return None
        d = vxt.read(p)
        return d["coords"], d["feats"].astype(np.float32)
    p = os.path.join(outdir, name + ".npy")
    return (None, np.load(p).astype(np.float32)) if os.path.exists(p) else None


def load_spconv(d, name, kind):
    if kind == "sparse":
        return (np.load(os.path.join(d, name + ".coords.npy")),
                np.load(os.path.join(d, name + ".feats.npy")))
    return None, np.load(os.path.join(d, name + ".npy"))


def sorted_rows(coords, feats):
    order = np.lexsort(coords.T[::-1])
    return coords[order], feats[order]


def rel_err(a, ref):
    if ref.size == 0:
        return 0.0
    return float(np.abs(a - ref).max() / max(float(np.abs(ref).max()), 1e-6))


def compare_output(name, info, ours_dir, sp16_dir, sp32_dir):
    kind = info["kind"]
    ours = load_ours(ours_dir, name, kind)
    if ours is None:
        return dict(name=name, ok=False, why="voxconv wrote no %s output" % name)
    c32, f32 = load_spconv(sp32_dir, name, kind)
    c16, f16 = load_spconv(sp16_dir, name, kind)
    co, fo = ours
    res = dict(name=name, kind=kind)
    if kind == "sparse":
        c32, f32 = sorted_rows(c32, f32)
        c16, f16 = sorted_rows(c16, f16)
        co, fo = sorted_rows(co, fo)
        res["voxels"] = [int(len(co)), int(len(c32))]
        if co.shape != c32.shape or not np.array_equal(co, c32):
            res.update(ok=False, why="coordinates differ (voxconv %d rows, spconv %d)" % (
                len(co), len(c32)))
            return res
    elif fo.shape != f32.shape:
        res.update(ok=False, why="dense shape %s, spconv %s" % (fo.shape, f32.shape))
        return res
    if fo.shape != f32.shape:
        res.update(ok=False, why="feature shape %s, spconv %s" % (fo.shape, f32.shape))
        return res
    e_ours, e_sp16 = rel_err(fo, f32), rel_err(f16, f32)
    tol = max(3 * e_sp16, REL_FLOOR)
    finite = bool(np.isfinite(fo).all())
    res.update(rel_err=e_ours, spconv16_rel_err=e_sp16, tol=tol, ok=finite and e_ours <= tol,
               why="" if finite else "non-finite values")
    return res


def compare_entry(e, vc, extra):
    base = os.path.dirname(e["spconv"]["fp32"]["dir"])
    ours_dir = os.path.join(base, "voxconv")
    rc, js, err, cmd = run_voxconv(vc, e["model_json"], e["weights"], e["input_vxt"], ours_dir,
                                   extra)
    note = ""
    if rc != 0 and "num_batches_tracked" in err:
        note = "weights without num_batches_tracked (voxconv refused them: %s)" % err[:120]
        w = e["weights"].replace(".safetensors", ".nocounters.safetensors")
        rc, js, err, cmd = run_voxconv(vc, e["model_json"], w, e["input_vxt"], ours_dir, extra)
    row = dict(model=e["model"], scene=e["scene"], voxels=e["voxels"], cmd=cmd, rc=rc,
               stderr=err[-2000:], note=note, voxconv_json=js,
               spconv={k: {kk: v[kk] for kk in ("median_ms", "p10_ms", "p90_ms")} |
                       ({"with_voxelize_ms": v["with_voxelize"]["median_ms"]}
                        if "with_voxelize" in v else {}) for k, v in e["spconv"].items()})
    if rc != 0:
        row.update(ok=False, outputs=[])
        return row
    row["time_key"], row["voxconv_ms"] = find_ms(js)
    row["profile"] = profile_totals(js)
    outs = [compare_output(n, i, ours_dir, e["spconv"].get("fp16", e["spconv"]["fp32"])["dir"],
                           e["spconv"]["fp32"]["dir"])
            for n, i in e["spconv"]["fp32"]["outputs"].items()]
    row.update(outputs=outs, ok=all(o["ok"] for o in outs))
    if e.get("points"):
        rc2, js2, err2, cmd2 = run_voxconv(vc, e["model_json"], e["weights"], e["points"]["path"],
                                           os.path.join(base, "voxconv_points"), extra,
                                           e["points"])
        row["points_run"] = dict(rc=rc2, cmd=cmd2, stderr=err2[-500:])
        if rc2 == 0:
            row["points_run"]["time_key"], row["voxconv_points_ms"] = find_ms(js2)
    return row


def fmt(v, spec="%.3f"):
    return spec % v if isinstance(v, (int, float)) else "-"


def markdown(rows):
    out = ["| model | scene | voxels | spconv fp16 ms | spconv fp16 + voxelize ms | voxconv ms "
           "| voxconv + voxelize ms | spconv / voxconv | outputs | worst rel. err (spconv fp16's) |",
           "|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        sp = r["spconv"].get("fp16", r["spconv"].get("fp32", {}))
        ours = r.get("voxconv_ms")
        ratio = sp.get("median_ms") / ours if ours else None
        worst = max((o for o in r.get("outputs", []) if "rel_err" in o),
                    key=lambda o: o["rel_err"], default=None)
        bad = [o["name"] + ": " + o.get("why", "") for o in r.get("outputs", []) if not o["ok"]]
        status = "ok" if r["ok"] else ("voxconv rc=%d" % r["rc"] if r["rc"] else "; ".join(bad))
        out.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            r["model"][:-5], r["scene"], r["voxels"], fmt(sp.get("median_ms")),
            fmt(sp.get("with_voxelize_ms")), fmt(ours), fmt(r.get("voxconv_points_ms")),
            fmt(ratio, "%.1fx"), status,
            "%s %.2e (%.2e)" % (worst["name"], worst["rel_err"], worst["spconv16_rel_err"])
            if worst else "-"))
    keys = sorted({r.get("time_key") for r in rows if r.get("time_key")})
    out.append("")
    out.append("voxconv time from its --json key(s): %s" % (", ".join(keys) or "none found"))
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--voxconv", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--md")
    ap.add_argument("--json")
    ap.add_argument("--args", default="", help="extra arguments for every `voxconv run`")
    a = ap.parse_args()
    manifest = json.load(open(os.path.join(a.work, "manifest.json")))
    rows = []
    for e in manifest:
        r = compare_entry(e, a.voxconv, a.args.split())
        rows.append(r)
        print(json.dumps({k: r.get(k) for k in ("model", "scene", "voxels", "ok", "rc",
                                                "voxconv_ms", "voxconv_points_ms", "note")}),
              flush=True)
        if r["rc"]:
            print("  %s\n  %s" % (r["cmd"], r["stderr"][-400:]), flush=True)
        for o in r.get("outputs", []):
            if not o["ok"]:
                print("  MISMATCH %s: %s" % (o["name"], o.get("why") or
                      "rel. err %.3g > tol %.3g" % (o["rel_err"], o["tol"])), flush=True)
    md = markdown(rows)
    print(md)
    if a.md:
        open(a.md, "w").write(md)
    if a.json:
        json.dump(rows, open(a.json, "w"), indent=1, default=str)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
