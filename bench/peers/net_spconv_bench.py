#!/usr/bin/env python3
"""spconv 2.x running voxconv's shipped networks as PyTorch modules: the peer side of the network
benchmark (bench/peers/run_net_spconv runs it on the GPU machine; bench/net_compare.py then runs
`voxconv run` on the same inputs and weights and compares).

  net_spconv_bench.py --voxconv BIN --work DIR [--runs 20] [--device cuda] [--models a,b]

1. Scenes, each voxelized by `voxconv voxelize` into the .vxt that BOTH engines read, so that
   voxelization differences cannot matter: the real scans of datasets/data (vlp16.bin,
   octomap_scan.bin: KITTI-range frames for the detection backbones, with a zero 5th feature
   (the sweep time lag) for the nuScenes input; bun0.pcd at the model's 2 cm and
   table_scene_lms400.pcd at 5 mm for the U-Net) and a synthetic LiDAR sweep of about 100k voxels
   (the points of `voxconv synth lidar`, KITTI and nuScenes grids, where the CLI has it; else
   the deterministic generator below, KITTI grid), voxelized without the model's voxel cap.
2. Per model: the module (bench/peers/net_modules.py, laid out as the original), random weights
   (seeded) with BatchNorm statistics calibrated on the model's first scene (non-trivial:
   net_modules.calibrate_bn), saved as DIR/weights/MODEL.state_dict.safetensors (the
   state_dict as OpenPCDet / Pointcept would save it, num_batches_tracked included) and as
   MODEL.safetensors, what tools/spconv_to_safetensors.py makes of it (what voxconv loads: the
   1x1x1 weights rewritten for spconv 2.x's reading of them, counters dropped).
3. Per (model, scene, dtype fp16 and fp32): eval-mode forward, each named output written under
   DIR/out/MODEL/SCENE/spconv_DTYPE/ (sparse: NAME.coords.npy int32 [N, 4] b z y x,
   NAME.feats.npy float32; dense: NAME.npy float32), and the per-frame wall time: a fresh
   SparseConvTensor each frame from features and coordinates already on the device (so every map
   is rebuilt, as in deployment), forward, torch.cuda.synchronize; median and p10/p90 of --runs
   after 5 warm-ups. Where the scene has points and the model a voxelize block, also the frame
   with voxelization included: points on the device -> spconv's PointToVoxel -> mean per voxel
   (OpenPCDet's MeanVFE) -> forward.
One JSON line per (model, scene, dtype) on stdout; DIR/manifest.json lists everything for
bench/net_compare.py."""
import argparse
import copy
import json
import os
import statistics
import subprocess
import sys

import numpy as np
import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, HERE)
import net_modules as nm  # noqa: E402
import spconv_to_safetensors as s2s  # noqa: E402  (tools/, on the path through net_modules)
import vxt  # noqa: E402
import wallclock  # noqa: E402

SEED = 20261127
WARMUP = 5
# OpenPCDet's MAX_POINTS_PER_VOXEL (KITTI 5, nuScenes 10); Pointcept samples one point per voxel
# at test time: 16 here, for the timing of the voxelize-included frame only.
MAX_POINTS = {"VoxelBackBone8x-kitti": 5, "VoxelResBackBone8x-kitti": 5,
              "VoxelResBackBone8x-nuscenes": 10, "SpUNet-v1m1-indoor": 16}


def synth_lidar_points(seed=1, beams=128, steps=3000):
    """A spinning 128-beam sweep (elevation -25..+3 degrees, sensor 1.73 m above the ground) over
    a ground plane, two facades and parked cars, front half (x > 0, the KITTI range): about 100k
    voxels at 0.05 x 0.05 x 0.1 m. Deterministic for a seed. Returns float32 [N, 4] x y z i."""
    rng = np.random.default_rng(seed)
    el = np.deg2rad(np.linspace(-25.0, 3.0, beams))
    az = np.deg2rad(np.linspace(-90.0, 90.0, steps, endpoint=False))
    el, az = np.meshgrid(el, az, indexing="ij")
    d = np.stack([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)], -1).reshape(-1, 3)
    t = np.full(len(d), np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = np.where(d[:, 2] < 0, -1.73 / d[:, 2], np.inf)           # ground z = -1.73
        t = np.minimum(t, g)
        for y0 in (14.0, -17.0):                                    # facades y = y0
            ty = y0 / d[:, 1]
            t = np.minimum(t, np.where((ty > 0) & (d[:, 2] * ty < 8.0), ty, np.inf))
        boxes = rng.uniform([5, -12, -1.73], [65, 12, -1.73], size=(40, 3))
        for bx, by, bz in boxes:                                    # cars 4.2 x 1.8 x 1.5 m
            lo = np.array([bx, by, bz]); hi = lo + [4.2, 1.8, 1.5]
            t0, t1 = (lo - 0) / d, (hi - 0) / d
            tn = np.minimum(t0, t1).max(1); tf = np.maximum(t0, t1).min(1)
            t = np.minimum(t, np.where((tn <= tf) & (tn > 0), tn, np.inf))
    keep = np.isfinite(t) & (t < 80)
    p = d[keep] * t[keep, None]
    p += rng.normal(0, 0.01, p.shape)
    inten = rng.uniform(0, 1, (len(p), 1))
    return np.concatenate([p, inten], 1).astype(np.float32)


def synth_sweeps(vc, sd):
    """{grid: points .bin} of the synthetic sweep: `voxconv synth lidar` (bench_conv's scene) on
    the KITTI and nuScenes grids where the CLI has it, else the generator above (KITTI only)."""
    out = {}
    for grid in ("kitti", "nuscenes"):
        p = os.path.join(sd, "synth_%s.bin" % grid)
        try:
            run([vc, "synth", "lidar", p, "--grid", grid])
            out[grid] = p
        except RuntimeError as e:
            print("voxconv synth: %s" % e, file=sys.stderr)
    if "kitti" not in out:
        out["kitti"] = os.path.join(sd, "synth_python.bin")
        synth_lidar_points().tofile(out["kitti"])
    return out


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(cmd), (r.stderr or r.stdout).strip()))
    return r.stdout


def voxelize(vc, points, out, vox, load_dim, use_dim):
    cmd = [vc, "voxelize", points, out, "--voxel-size", ",".join(map(str, vox["voxel_size"])),
           "--range=" + ",".join(map(str, vox["range"])), "--reduce", vox.get("reduce", "mean"),
           "--max-voxels", str(vox.get("max_voxels", 0)), "--json"]
    if load_dim:
        cmd += ["--load-dim", str(load_dim)]
    if use_dim:
        cmd += ["--use-dim", str(use_dim)]
    run(cmd)
    return out


def prepare_scenes(vc, work, data):
    """{model file: [scene dict]}; a scene: name, vxt, points (path, load_dim, use_dim) or None."""
    sd = os.path.join(work, "scenes")
    os.makedirs(sd, exist_ok=True)
    descs = {f: json.load(open(os.path.join(ROOT, "models", f)))
             for f in sorted(os.listdir(os.path.join(ROOT, "models"))) if f.endswith(".json")}
    # 5-float copies (zero time lag) of the 4-float scans, for the nuScenes input
    def five(src, name):
        p = np.fromfile(src, dtype="<f4").reshape(-1, 4)
        out = os.path.join(sd, name + "_5.bin")
        np.concatenate([p, np.zeros((len(p), 1), "<f4")], 1).tofile(out)
        return out
    synth = synth_sweeps(vc, sd)
    out = {}
    for f, desc in descs.items():
        vox, base, c = desc["input"].get("voxelize"), f[:-5], desc["input"]["channels"]
        scenes = []
        if desc["name"].startswith("Voxel"):
            grid = "nuscenes" if "nuscenes" in f else "kitti"
            srcs = [("vlp16", os.path.join(data, "vlp16.bin")),
                    ("octomap_scan", os.path.join(data, "octomap_scan.bin"))]
            if synth.get(grid):
                srcs.append(("synth", synth[grid]))
            for s, pts in srcs:
                if c == 5:
                    pts = five(pts, "%s_%s" % (s, grid))
                ld = 5 if c == 5 else None
                # the synthetic sweep is voxelized without the model's cap (40000 voxels on
                # KITTI): it is the ~100k-voxel benchmark scene; so it has no points-included
                # frame (the model's cap would apply there)
                v = voxelize(vc, pts, os.path.join(sd, "%s_%s.vxt" % (base, s)),
                             dict(vox, max_voxels=0) if s == "synth" else vox, ld, None)
                scenes.append(dict(name=s, vxt=v, points=None if s == "synth" else
                                   dict(path=pts, load_dim=ld, use_dim=None)))
        else:  # the indoor U-Net
            bun = os.path.join(data, "bun0.pcd")
            scenes.append(dict(name="bun0", points=dict(path=bun, load_dim=None, use_dim=3),
                               vxt=voxelize(vc, bun, os.path.join(sd, base + "_bun0.vxt"), vox,
                                            None, 3)))
            table = dict(vox, voxel_size=[0.005] * 3, range=[-1.2, -0.72, -1.96, 0.96, 0.56, -1])
            tp = os.path.join(data, "table_scene_lms400.pcd")
            scenes.append(dict(name="table_5mm", points=None,
                               vxt=voxelize(vc, tp, os.path.join(sd, base + "_table.vxt"),
                                            table, None, 3)))
        out[f] = scenes
    return descs, out


def fit_channels(feats, c):
    """A scene's features cut or zero-padded to the model's channels (a guard: the scenes above
    are voxelized with the model's columns)."""
    if feats.shape[1] >= c:
        return feats[:, :c]
    return np.concatenate([feats, np.zeros((len(feats), c - feats.shape[1]), feats.dtype)], 1)


def time_frames(fn, runs):
    ts = wallclock.samples(fn, runs, WARMUP)
    return dict(median_ms=statistics.median(ts), p10_ms=ts[len(ts) // 10],
                p90_ms=ts[(len(ts) * 9) // 10], runs=runs)


def save_outputs(outs, d):
    os.makedirs(d, exist_ok=True)
    info = {}
    for name, v in outs.items():
        if isinstance(v, nm.spconv.SparseConvTensor):
            np.save(os.path.join(d, name + ".coords.npy"), v.indices.int().cpu().numpy())
            np.save(os.path.join(d, name + ".feats.npy"), v.features.float().cpu().numpy())
            info[name] = dict(kind="sparse", voxels=int(v.indices.shape[0]),
                              channels=int(v.features.shape[1]))
        else:
            np.save(os.path.join(d, name + ".npy"), v.float().cpu().numpy())
            info[name] = dict(kind="dense", shape=list(v.shape))
    return info


def voxelize_fn(desc, points, device):
    """points -> SparseConvTensor through spconv's PointToVoxel and a mean per voxel."""
    from spconv.pytorch.utils import PointToVoxel
    vox = desc["input"]["voxelize"]
    c = desc["input"]["channels"]
    gen = PointToVoxel(vsize_xyz=vox["voxel_size"], coors_range_xyz=vox["range"],
                       num_point_features=c,
                       max_num_voxels=vox.get("max_voxels") or len(points),
                       max_num_points_per_voxel=MAX_POINTS.get(desc["name"], 16),
                       device=torch.device(device))
    pts = torch.as_tensor(points[:, :c]).to(device)
    shape = desc["input"]["spatial_shape"]

    def make(dtype):
        voxels, idx, num = gen(pts)
        feats = voxels.sum(1) / num.clamp(min=1).unsqueeze(1).to(voxels.dtype)
        b = torch.zeros((idx.shape[0], 1), dtype=torch.int32, device=device)
        return nm.spconv.SparseConvTensor(feats.to(dtype), torch.cat([b, idx.int()], 1),
                                          shape, 1)
    return make


def load_points(p):
    """A scene's points as the CLI reads them (4- or 5-float .bin; the PCD scenes have none)."""
    if p is None or not p["path"].endswith(".bin"):
        return None
    return np.fromfile(p["path"], dtype="<f4").reshape(-1, p["load_dim"] or 4)


DTYPES = [("fp16", torch.float16), ("fp32", torch.float32)]


def bench_model(f, desc, scenes, work, runs, device):
    c, shape = desc["input"]["channels"], desc["input"]["spatial_shape"]
    model = nm.reference_module(desc).to(device)
    nm.randomize(model, SEED)
    first = vxt.read(scenes[0]["vxt"])
    nm.calibrate_bn(model, lambda: nm.sparse_input(first["coords"], fit_channels(
        first["feats"], c), shape, first["batch"], device, torch.float32))
    wd = os.path.join(work, "weights")
    os.makedirs(wd, exist_ok=True)
    sd = {k: v.detach().float().cpu().contiguous() if v.is_floating_point() else v.cpu()
          for k, v in model.state_dict().items()}
    raw = os.path.join(wd, f[:-5] + ".state_dict.safetensors")
    save_file(sd, raw)  # as `save_file(model.state_dict(), path)` gives it
    # what voxconv loads: the converter's output (spconv's 1x1x1 weights rewritten, counters
    # dropped), the file a user makes from a checkpoint
    weights = os.path.join(wd, f[:-5] + ".safetensors")
    conv_sd, _ = s2s.convert(sd, "fp32", False, "spconv2", None, True, s2s.strided_weights(desc))
    save_file(conv_sd, weights)
    if device == "cpu":
        nm.cpu_workarounds(model)  # a CPU trial of this script; timings are the GPU's business
    copies = {"fp16": copy.deepcopy(model).half().eval(), "fp32": model.eval()}
    entries = []
    for sc in scenes:
        d = vxt.read(sc["vxt"])
        feats = fit_channels(d["feats"], c)
        if feats.shape[1] != d["feats"].shape[1]:  # write what both engines read
            sc["vxt"] = sc["vxt"][:-4] + ".c%d.vxt" % c
            vxt.write(sc["vxt"], d["coords"], feats, d["shape"], d["batch"])
        coords_dev = torch.as_tensor(d["coords"]).to(device)
        entry = dict(model=f, model_json=os.path.join(ROOT, "models", f), weights=weights,
                     state_dict=raw, first_scene_of_model=not entries,
                     scene=sc["name"], input_vxt=sc["vxt"], points=sc["points"],
                     voxels=int(len(d["coords"])), spconv={})
        pts = load_points(sc["points"]) if desc["input"].get("voxelize") else None
        for dt_name, dt in DTYPES:
            m = copies[dt_name]
            feats_dev = torch.as_tensor(feats).to(device=device, dtype=dt)

            def frame():
                with torch.no_grad():
                    return m(nm.spconv.SparseConvTensor(feats_dev, coords_dev, list(shape),
                                                        d["batch"]))
            od = os.path.join(work, "out", f[:-5], sc["name"], "spconv_" + dt_name)
            info = save_outputs(frame(), od)
            res = dict(dir=od, outputs=info, **time_frames(frame, runs))
            if pts is not None:
                make = voxelize_fn(desc, pts, device)

                def frame_v():
                    with torch.no_grad():
                        return m(make(dt))
                res["with_voxelize"] = time_frames(frame_v, runs)
            entry["spconv"][dt_name] = res
            line = dict(engine="spconv", model=desc["name"], scene=sc["name"], dtype=dt_name,
                        voxels=entry["voxels"], median_ms=round(res["median_ms"], 4),
                        p10_ms=round(res["p10_ms"], 4), p90_ms=round(res["p90_ms"], 4))
            if "with_voxelize" in res:
                line["with_voxelize_median_ms"] = round(res["with_voxelize"]["median_ms"], 4)
            print(json.dumps(line), flush=True)
        entries.append(entry)
    return entries


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--voxconv", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--data", default=os.path.join(ROOT, "datasets", "data"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--models", default="", help="comma-separated model files (default: all)")
    ap.add_argument("--fp32-only", action="store_true", help="(CPU trials: spconv's CPU path "
                    "has no fp16 BatchNorm)")
    a = ap.parse_args()
    if a.fp32_only:
        DTYPES[:] = DTYPES[1:]
    torch.backends.cudnn.benchmark = False
    import spconv
    print("# torch %s, spconv %s, %s" % (torch.__version__, spconv.__version__,
          torch.cuda.get_device_name() if a.device == "cuda" else "cpu"), flush=True)
    descs, scenes = prepare_scenes(a.voxconv, a.work, a.data)
    manifest = []
    for f, desc in descs.items():
        if a.models and f not in a.models.split(","):
            continue
        manifest += bench_model(f, desc, scenes[f], a.work, a.runs, a.device)
    with open(os.path.join(a.work, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
