#!/usr/bin/env python3
"""Times spconv 2.x on the layers and voxels of bench/bench_conv.c, and sets the result beside
bench_conv's CSV. Not part of the library or of CI: it needs a GPU, PyTorch and the spconv/cumm
wheels (bench/peers/run_spconv sets those up on the lent machine).

Usage: spconv_bench.py --scenes DIR --layers datasets/layers --ours bench_conv.csv
                       [--runs 25] [--md OUT.md] [--csv OUT.csv]

DIR holds bench_conv --dump's output (sceneI.npy: int32 [N, 4] b, z, y, x; scenes.tsv). For each
network of the layer suites and each scene, the script walks the layers on a stack of coordinate
levels as bench_conv does, builds the spconv module of each layer (fp16 weights [Cout, k, k, k,
Cin], bias, ReLU fused through act_type), and times each distinct layer:

- "conv": the convolution alone with its map already built, which is what bench_conv times for
  voxconv. subm and inverse layers reuse the map through indice_key, as spconv's networks do;
  spconv rebuilds the map of a strided / downsample / pool layer at every forward, so for those
  the script calls the same kernel entry the forward calls (ops.implicit_gemm,
  indice_maxpool_implicit_gemm) on the map the first forward stored.
- "map": ops.get_indice_pairs_implicit_gemm with the layer's arguments (the map build a forward
  without a cached map runs), for the first layer of each distinct map.
Timing: CUDA events around the call, median of --runs after 5 warm-up calls (spconv tunes its
kernels on the first calls), the lower of two such medians; before each timed call a 256 MB memset flushes L2 and a 1 ms
device sleep lets the host queue the call's launches, so Python's launch overhead is hidden and
spconv's time is its GPU time (favourable to spconv). Features and weights are random
(seed printed). Counts of output voxels are compared with bench_conv's as a check that both
engines ran the same maps.

Grid: networks with a downsample or pool layer get their spatial shape rounded up to a multiple
of 64 per axis, because spconv's k2 s2 p0 output extent is floor((D - 2) / 2) + 1, which drops
the last plane of an odd extent, while bench_conv's downsample keeps ceil(D / 2); subm maps do not
depend on the extent. Networks with strided layers keep the real shape (spconv semantics on both
sides)."""
import argparse
import csv
import math
import statistics
import sys

import numpy as np
import torch

SEED = 20261123
WARMUP = 5
SLEEP_CYCLES = 2_000_000  # ~1 ms at 1.98 GHz


def parse_triple(s):
    v = [int(t) for t in s.split(",")]
    if len(v) == 1:
        v = v * 3
    assert len(v) == 3, s
    return v


def read_suite(path):
    layers = []
    for line in open(path):
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        name, ty, k, s, p, ci, co = line
        layers.append(dict(name=name, type=ty, k=parse_triple(k), s=parse_triple(s),
                           p=parse_triple(p), cin=int(ci), cout=int(co)))
    return layers


SUITES = [("subm_sweep.txt", "subm k3 sweep"),
          ("centerpoint.txt", "CenterPoint VoxelResBackBone8x"),
          ("minkunet.txt", "MinkUNet (SparseResUNet42)"),
          ("spconv_bench.txt", "spconv benchmark net")]


class Timer:
    def __init__(self, runs):
        self.runs = runs
        self.flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        self.e0 = torch.cuda.Event(enable_timing=True)
        self.e1 = torch.cuda.Event(enable_timing=True)

    def __call__(self, fn):
        """The lower of two medians of `runs` timed calls (each after the warm-up): one stray
        slow series (spconv re-tuning, a clock change) does not count against spconv."""
        meds = []
        for _ in range(2):
            ts = []
            for r in range(WARMUP + self.runs):
                self.flush.zero_()
                torch.cuda._sleep(SLEEP_CYCLES)
                self.e0.record()
                fn()
                self.e1.record()
                self.e1.synchronize()
                if r >= WARMUP:
                    ts.append(self.e0.elapsed_time(self.e1))
            meds.append(statistics.median(ts))
        return min(meds)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenes", required=True)
    ap.add_argument("--layers", default="datasets/layers")
    ap.add_argument("--ours", help="bench_conv --csv output")
    ap.add_argument("--runs", type=int, default=25)
    ap.add_argument("--md", help="write the markdown tables here too")
    ap.add_argument("--csv", help="write one row per layer here")
    ap.add_argument("--scene", type=int, action="append", help="scene index (default: all)")
    args = ap.parse_args()

    import spconv
    import spconv.pytorch as sp
    from spconv.pytorch import ops
    from spconv.pytorch import functional as Fsp
    from spconv.core import ConvAlgo
    from spconv.pytorch.conv import SparseConvolution
    from cumm import tensorview as tv

    torch.manual_seed(SEED)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.device("cuda")
    timer = Timer(args.runs)
    out_md = []

    def emit(s=""):
        print(s, flush=True)
        out_md.append(s)

    props = torch.cuda.get_device_properties(0)
    emit(f"# spconv {spconv.__version__} on {props.name} ({props.multi_processor_count} SMs), "
         f"torch {torch.__version__}, seed {SEED}, fp16, bias + ReLU fused (act_type), median of "
         f"{args.runs} after {WARMUP} warm-up (lower of two medians), L2 flushed, 1 ms device sleep "
         "before each call")

    ours = {}
    if args.ours:
        with open(args.ours) as f:
            for row in csv.DictReader(f):
                ours[(row["scene"], row["net"], row["layer"])] = row

    scenes = []
    for line in open(f"{args.scenes}/scenes.tsv"):
        fn, z, y, x, name = line.rstrip("\n").split("\t")
        scenes.append((fn, [int(z), int(y), int(x)], name))
    relu = tv.gemm.Activation.ReLU
    csv_rows = []

    for si, (fn, shape, sname) in enumerate(scenes):
        if args.scene and si not in args.scene:
            continue
        coords = torch.from_numpy(np.load(f"{args.scenes}/{fn}").astype(np.int32)).to(dev)
        emit(f"\n## {sname}: {coords.shape[0]} voxels, grid {shape}")
        for suite_file, net_name in SUITES:
            layers = read_suite(f"{args.layers}/{suite_file}")
            pools = any(l["type"] in ("downsample", "maxpool", "avgpool") for l in layers)
            grid = [((d + 63) // 64) * 64 for d in shape] if pools else list(shape)
            emit(f"\n### {net_name} (grid {grid})\n")
            emit("| layer | type | k | s | voxels in -> out (spconv) | voxconv out | Cin->Cout |"
                 " spconv conv ms | spconv map ms | voxconv ms (planner) | spconv / voxconv |")
            emit("|---|---|---|---|---|---|---|---|---|---|---|")
            # levels: (indices, spatial shape, indice_dict, level id)
            levels = [(coords, grid, {}, 0)]
            fwd_keys = []  # stack of (key, layer) of strided/downsample/pool layers not inverted
            next_level = 1
            seen = {}
            maps_timed = set()
            feats = {}
            sum_sp = sum_ours = 0.0
            n_cmp = n_win = 0
            for li, l in enumerate(layers):
                idx, sshape, idict, lid = levels[-1]
                n_in = idx.shape[0]
                ty, k, s, p = l["type"], l["k"], l["s"], l["p"]
                fkey = (lid, l["cin"], n_in)
                if fkey not in feats:
                    feats[fkey] = (torch.rand(n_in, l["cin"], device=dev) * 2 - 1).half()
                x = sp.SparseConvTensor(feats[fkey], idx, sshape, 1, indice_dict=idict)
                # the 3-D wrappers (SubMConv3d, ...) do not pass act_type on; their base does
                # (spconv refuses a fused activation on 1x1x1 kernels, which it runs as a dense
                # matrix product: those run without ReLU, in spconv's favour)
                kw = dict(bias=True, algo=ConvAlgo.MaskImplicitGemm,
                          act_type=relu if k != [1, 1, 1] else tv.gemm.Activation.None_)
                key = None
                if ty == "subm":
                    key = f"subm_L{lid}_k{k[0]}{k[1]}{k[2]}"
                    m = SparseConvolution(3, l["cin"], l["cout"], k, subm=True,
                                             indice_key=key, **kw)
                elif ty in ("strided", "downsample"):
                    key = f"conv{li}"
                    m = SparseConvolution(3, l["cin"], l["cout"], k, s, p, indice_key=key,
                                             **kw)
                elif ty == "inverse":
                    key, fl = fwd_keys.pop()
                    m = SparseConvolution(3, l["cin"], l["cout"], fl["k"], inverse=True,
                                             indice_key=key, **kw)
                elif ty == "maxpool":
                    key = f"pool{li}"
                    m = sp.SparseMaxPool3d(k, s, p, indice_key=key)
                elif ty == "avgpool":
                    key = f"pool{li}"
                    m = sp.SparseAvgPool3d(k, s, p, indice_key=key)
                else:
                    emit(f"| {l['name']} | {ty} | | | not run: no spconv counterpart here | | |"
                         " | | | |")
                    continue
                m = m.to(dev).half().eval()
                with torch.no_grad():
                    if hasattr(m, "weight"):
                        m.weight.copy_((torch.rand_like(m.weight.float()) * 2 - 1) * 0.02)
                        m.bias.copy_(torch.rand_like(m.bias.float()) * 0.05)
                    y = m(x)  # builds (or reuses) the map and stores it under key
                    n_out = y.indices.shape[0]
                    data = y.indice_dict.get(key)  # none for a 1x1x1 subm (a dense product)
                    dkey = (lid, ty, tuple(k), tuple(s), tuple(p), l["cin"], l["cout"])
                    if dkey in seen:
                        t_conv, t_map = seen[dkey]
                        dup = " (=)"
                    else:
                        dup = ""
                        t_map = float("nan")
                        if data is None:
                            t_conv = timer(lambda: m(x))
                        elif ty in ("subm", "inverse"):
                            # x's dictionary may not hold the map yet (the first layer of a
                            # level); y's does
                            xc = sp.SparseConvTensor(x.features, idx, sshape, 1,
                                                     indice_dict=y.indice_dict)
                            t_conv = timer(lambda: m(xc))
                        elif ty in ("strided", "downsample"):
                            args_ig = (x.features, m.weight, data.pair_fwd,
                                       data.pair_mask_fwd_splits, data.mask_argsort_fwd_splits,
                                       n_out, data.masks, False, False)
                            t_conv = timer(lambda: ops.implicit_gemm(
                                *args_ig, fp32_accum=m.fp32_accum, bias=m.bias,
                                act_alpha=m.act_alpha, act_beta=m.act_beta, act_type=m.act_type,
                                output_scale=1.0, scale=None, output_add=None,
                                output_add_scale=0.0, output_dtype=m.weight.dtype))
                        else:  # pools
                            if ty == "maxpool":
                                t_conv = timer(lambda: Fsp.indice_maxpool_implicit_gemm(
                                    x.features, data.pair_fwd, data.pair_bwd, n_out))
                            else:
                                t_conv = timer(lambda: m(sp.SparseConvTensor(
                                    x.features, idx, sshape, 1, indice_dict=dict(idict))))
                        mkey = (lid, ty == "subm", tuple(k), tuple(s), tuple(p))
                        if data is not None and ty != "inverse" and mkey not in maps_timed:
                            maps_timed.add(mkey)
                            t_map = timer(lambda: ops.get_indice_pairs_implicit_gemm(
                                idx, 1, sshape, ConvAlgo.MaskImplicitGemm, ksize=list(k),
                                stride=list(s), padding=list(p), dilation=[1, 1, 1],
                                out_padding=[0, 0, 0], subm=(ty == "subm"), transpose=False,
                                is_train=(ty != "subm")))
                        seen[dkey] = (t_conv, t_map)
                o = ours.get((sname, net_name, l["name"]))
                o_ms = o_out = None
                if o:
                    o_out = int(o["n_out"])
                    impl, ggs = float(o["implicit_ms"]), float(o["ggs_ms"])
                    plan = o.get("plan", "")
                    o_ms = ggs if plan == "ggs" else impl
                sum_sp += t_conv
                if o_ms is not None:
                    sum_ours += o_ms
                    n_cmp += 1
                    n_win += o_ms < t_conv
                check = "" if o_out is None or o_out == n_out else " MISMATCH"
                emit(f"| {l['name']}{dup} | {ty} | {','.join(map(str, k))} | "
                     f"{','.join(map(str, s))} | {n_in} -> {n_out} | "
                     f"{o_out if o_out is not None else '-'}{check} | {l['cin']}->{l['cout']} | "
                     f"{t_conv:.4f} | {'' if math.isnan(t_map) else f'{t_map:.4f}'} | "
                     f"{f'{o_ms:.4f}' if o_ms is not None else '-'} | "
                     f"{f'{t_conv / o_ms:.2f}' if o_ms else '-'} |")
                csv_rows.append([sname, net_name, l["name"], ty, n_in, n_out, o_out,
                                 l["cin"], l["cout"], f"{t_conv:.5f}",
                                 "" if math.isnan(t_map) else f"{t_map:.5f}",
                                 "" if o_ms is None else f"{o_ms:.5f}"])
                # move on the level stack
                if ty in ("strided", "downsample", "maxpool", "avgpool"):
                    fwd_keys.append((key, l))
                    levels.append((y.indices, list(y.spatial_shape), y.indice_dict, next_level))
                    next_level += 1
                elif ty == "inverse":
                    levels.pop()
                    pidx, pshape, _, plid = levels[-1]
                    levels[-1] = (pidx, pshape, y.indice_dict, plid)
                else:
                    levels[-1] = (idx, sshape, y.indice_dict, lid)
            emit(f"\n{net_name}: sum of layer medians spconv {sum_sp:.3f} ms, voxconv (planner) "
                 f"{sum_ours:.3f} ms over {n_cmp} layers; voxconv faster on {n_win} of {n_cmp}")
    if args.md:
        with open(args.md, "w") as f:
            f.write("\n".join(out_md) + "\n")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["scene", "net", "layer", "type", "n_in", "n_out", "voxconv_n_out", "cin",
                        "cout", "spconv_conv_ms", "spconv_map_ms", "voxconv_ms"])
            w.writerows(csv_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
