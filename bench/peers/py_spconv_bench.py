"""voxconv's Python package against spconv 2.x on the GPU, on the real scans.

Per layer (voxconv.spconv module vs spconv.pytorch module, the same weights) and per backbone
(OpenPCDet's VoxelBackBone8x / VoxelResBackBone8x from python/tests/pcdet_backbones.py, only the
import line differing; and voxconv.Net on the shipped model description with the same weights):
  - coordinates: identical sets (compared sorted by (batch, z, y, x));
  - features: within fp16 tolerance (max |a - b| / max |b|);
  - wall clock of the PyTorch module call to a synchronised result, median of --runs.
Writes $OUT/py_spconv.json and $OUT/py_spconv.md. Usage:
  python3 bench/peers/py_spconv_bench.py [--runs 20] [--dtype fp16|fp32] scan.bin ...
"""
import argparse
import json
import os
import statistics
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python", "tests"))

import pcdet_backbones  # noqa: E402
import voxconv  # noqa: E402
import voxconv.spconv as vsp  # noqa: E402
import wallclock  # noqa: E402  (bench/peers: this script's folder)

DEV = "cuda" if torch.cuda.is_available() else "cpu"
sp = None  # the peer: spconv.pytorch, or with --peer ref the NumPy-oracle reference (a CPU
#            self-test of this script)
KITTI = {"voxel_size": (0.05, 0.05, 0.1), "range": (0, -40, -3, 70.4, 40, 1)}
# name, in, out, kind, kernel, stride, padding (spconv 2.x constructor arguments)
LAYERS = [
    ("subm16 k3", 16, 16, "subm", 3, 1, 1),
    ("subm32 k3", 32, 32, "subm", 3, 1, 1),
    ("subm64 k3", 64, 64, "subm", 3, 1, 1),
    ("conv16-32 k3s2", 16, 32, "conv", 3, 2, 1),
    ("conv32-64 k3s2", 32, 64, "conv", 3, 2, 1),
    ("conv32 k3s2 + inverse32-16", 32, 16, "inverse", 3, 2, 1),
    ("transposed32-16 k2s2", 32, 16, "transposed", 2, 2, 0),
    ("maxpool k3s2", 16, 16, "maxpool", 3, 2, 1),
]


def make(mod, kind, cin, cout, k, s, p):
    if kind == "subm":
        return mod.SubMConv3d(cin, cout, k, padding=p, bias=False, indice_key="subm")
    if kind == "conv":
        return mod.SparseConv3d(cin, cout, k, stride=s, padding=p, bias=False, indice_key="dn")
    if kind == "transposed":
        return mod.SparseConvTranspose3d(cin, cout, k, stride=s, padding=p, bias=False)
    if kind == "maxpool":
        return mod.SparseMaxPool3d(k, stride=s, padding=p)
    return mod.SparseInverseConv3d(cin, cout, k, indice_key="dn", bias=False)


def copy_weights(src, dst):
    """src's state_dict (voxconv: [out, kz, ky, kx, in]) into dst, permuting conv weights to the
    layout dst's spconv algorithm uses where it differs."""
    sd = {}
    dst_sd = dst.state_dict()
    for name, v in src.state_dict().items():
        want = dst_sd[name].shape
        if v.dim() == 5 and tuple(v.shape) != tuple(want):
            if tuple(want) == tuple(v.shape[1:4]) + (v.shape[4], v.shape[0]):
                v = v.permute(1, 2, 3, 4, 0)   # [kz, ky, kx, in, out]
            else:
                v = v.permute(1, 2, 3, 0, 4)   # [kz, ky, kx, out, in]
        sd[name] = v.contiguous()
    dst.load_state_dict(sd)


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    for name, p in model.state_dict().items():
        if p.dtype.is_floating_point:
            if "running_var" in name:
                v = torch.rand(p.shape, generator=g) + 0.5
            else:
                v = torch.randn(p.shape, generator=g) * (0.1 if p.dim() > 1 else 0.05)
            p.copy_(v)
    return model.eval()


def sorted_rows(indices, features):
    idx = indices.long()
    key = ((idx[:, 0] * 4096 + idx[:, 1]) * 4096 + idx[:, 2]) * 4096 + idx[:, 3]
    order = torch.argsort(key)
    return indices[order].cpu(), features[order].float().cpu()


def compare(a, b):
    """(same coordinates, relative max error) of two sparse tensors (a: voxconv, b: spconv)."""
    ai, af = sorted_rows(a.indices, a.features)
    bi, bf = sorted_rows(b.indices, b.features)
    same = ai.shape == bi.shape and torch.equal(ai, bi)
    if not same:
        return False, float("nan")
    scale = float(bf.abs().max()) or 1.0
    return True, float((af - bf).abs().max()) / scale


def timed(fn, runs):
    return statistics.median(wallclock.samples(fn, runs, 3 if runs > 1 else 0))


def layer_rows(scan, feats, coords, shape, dtype, runs):
    rows = []
    for name, cin, cout, kind, k, s, p in LAYERS:
        torch.manual_seed(0)
        mv = randomize(make(vsp, kind, cin, cout, k, s, p), 1).to(DEV).to(dtype)
        ms = make(sp, kind, cin, cout, k, s, p).to(DEV).to(dtype).eval()
        copy_weights(mv, ms)
        f = torch.randn(len(coords), cin, device=DEV, dtype=dtype)
        pre = None
        if kind == "inverse":  # its input: the output of the strided conv it inverts
            pre = (make(vsp, "conv", cin, cin, k, s, p).to(DEV).to(dtype).eval(),
                   make(sp, "conv", cin, cin, k, s, p).to(DEV).to(dtype).eval())
            randomize(pre[0], 2)
            copy_weights(pre[0], pre[1])

        def inputs(mod, first):
            x = mod.SparseConvTensor(f, coords, list(shape), 1)
            return first(x) if first is not None else x

        with torch.no_grad():
            xv = inputs(vsp, pre[0] if pre else None)
            xs = inputs(sp, pre[1] if pre else None)
            yv, ys = mv(xv), ms(xs)
            same, err = compare(yv, ys)
            # each timed call starts from a fresh input tensor (no cached maps), as in a frame
            tv = timed(lambda: mv(inputs(vsp, pre[0] if pre else None)), runs)
            ts = timed(lambda: ms(inputs(sp, pre[1] if pre else None)), runs)
        rows.append({"scan": scan, "what": name, "voxels": len(coords),
                     "out_voxels": int(yv.indices.shape[0]), "same_coords": same,
                     "rel_err": err, "voxconv_ms": tv, "spconv_ms": ts})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def backbone_rows(scan, feats, coords, vshape, dtype, runs):
    rows = []
    vc_mod = pcdet_backbones.load(pcdet_backbones.IMPORT, "bb_voxconv")
    sp_mod = pcdet_backbones.load(
        f"import {sp.__name__} as spconv; from voxconv.spconv import replace_feature",
        "bb_spconv")
    grid = np.array([vshape[2], vshape[1], vshape[0]])
    shape = [int(v) for v in grid[::-1] + [1, 0, 0]]  # the backbones' sparse_shape
    for name, model in (("VoxelBackBone8x", "voxel_backbone8x_kitti.json"),
                        ("VoxelResBackBone8x", "voxel_res_backbone8x_kitti.json")):
        mv = randomize(getattr(vc_mod, name)({}, 4, grid), 3)
        net = _net(model, mv, dtype)
        mv = mv.to(DEV).to(dtype)
        ms = getattr(sp_mod, name)({}, 4, grid).to(DEV).to(dtype).eval()
        copy_weights(mv, ms)
        f = feats.to(dtype)

        def batch():
            return {"voxel_features": f, "voxel_coords": coords, "batch_size": 1}

        with torch.no_grad():
            bv, bs = mv(batch()), ms(batch())
            stages = dict(bv["multi_scale_3d_features"], out=bv["encoded_spconv_tensor"])
            ref = dict(bs["multi_scale_3d_features"], out=bs["encoded_spconv_tensor"])
            checks = {k: compare(stages[k], ref[k]) for k in stages}
            tv = timed(lambda: mv(batch()), runs)
            ts = timed(lambda: ms(batch()), runs)
            tn = timed(lambda: net.run(f, coords, shape, copy=False), runs)
            nf, nc = net.run(f, coords, shape)["encoded_spconv_tensor"]
            net_same, net_err = compare(vsp.SparseConvTensor(nf, nc, shape, 1),
                                        bs["encoded_spconv_tensor"])
        rows.append({"scan": scan, "what": name, "voxels": len(coords),
                     "same_coords": all(s for s, _ in checks.values()),
                     "rel_err": max(e for _, e in checks.values()),
                     "stages": {k: {"same_coords": s, "rel_err": e} for k, (s, e) in
                                checks.items()},
                     "net_same_coords": net_same, "net_rel_err": net_err,
                     "voxconv_ms": tv, "spconv_ms": ts, "voxconv_net_ms": tn})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def _net(model, m, dtype):
    from test_net import safetensors_bytes
    sd = {k: v.numpy() for k, v in m.state_dict().items() if "num_batches" not in k}
    return voxconv.Net(os.path.join(ROOT, "models", model), safetensors_bytes(sd),
                       device=DEV, dtype={torch.float16: "float16"}.get(dtype, "float32"))


def markdown(rows, dtype, gpu):
    peer = sys.modules[sp.__name__.split(".")[0]]
    out = [f"voxconv (Python package) vs {peer.__name__} {getattr(peer, '__version__', '')}"
           f" on {gpu}, {dtype}; median ms of the module call to a synchronised result", "",
           "| scan | layer / backbone | voxels in | same coords | max rel err | voxconv ms "
           "| spconv ms | voxconv.Net ms |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['scan']} | {r['what']} | {r['voxels']} | {r['same_coords']} | "
                   f"{r['rel_err']:.2e} | {r['voxconv_ms']:.3f} | {r['spconv_ms']:.3f} | "
                   f"{r.get('voxconv_net_ms', float('nan')):.3f} |")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scans", nargs="+")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "fp32"])
    ap.add_argument("--peer", default="spconv", choices=["spconv", "ref"])
    a = ap.parse_args()
    global sp
    if a.peer == "ref":
        import ref_spconv as sp
    else:
        import spconv.pytorch as sp
    dtype = torch.float16 if a.dtype == "fp16" else torch.float32
    out_dir = os.environ.get("OUT", "out")
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    for path in a.scans:
        scan = os.path.basename(path)
        pts = torch.from_numpy(voxconv.read(path)).to(DEV)
        feats, coords, shape = voxconv.voxelize(pts, KITTI["voxel_size"], KITTI["range"],
                                                max_voxels=40000)
        rows += layer_rows(scan, feats, coords, shape, dtype, a.runs)
        rows += backbone_rows(scan, feats, coords, shape, dtype, a.runs)
    gpu = torch.cuda.get_device_name() if DEV == "cuda" else "cpu"
    with open(os.path.join(out_dir, "py_spconv.json"), "w") as fh:
        json.dump({"gpu": gpu, "dtype": a.dtype, "rows": rows}, fh, indent=1)
    md = markdown(rows, a.dtype, gpu)
    with open(os.path.join(out_dir, "py_spconv.md"), "w") as fh:
        fh.write(md)
    print(md)
    tol = 2e-2 if dtype == torch.float16 else 1e-3
    bad = [r for r in rows if not r["same_coords"] or not r["rel_err"] <= tol]
    for r in bad:
        print(f"MISMATCH: {r['scan']} {r['what']}: same_coords={r['same_coords']} "
              f"rel_err={r['rel_err']:.3e} (tolerance {tol})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
