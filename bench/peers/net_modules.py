#!/usr/bin/env python3
"""PyTorch + spconv 2.x reference for voxconv's shipped networks (models/*.json).

Two ways to the same module, written here (not imported from OpenPCDet or Pointcept):
- VoxelBackBone8x, VoxelResBackBone8x (OpenPCDet spconv_backbone.py) and SpUNet (Pointcept
  SpUNet-v1m1), laid out as the originals so that their state_dict names are the originals';
- JsonNet(desc): reads one of OUR model descriptions and builds the spconv module it describes,
  each parameterised op placed at its "name", so that its state_dict names are those the JSON
  implies.
`python3 net_modules.py --selftest` checks on any device (CPU spconv builds too) that the two agree:
the same state_dict names and shapes, which are also what tools/model_desc.py derives from the
JSON and what the original module has (tests/models/test_models.py holds those lists, written by
hand from the original sources), and the same outputs on a real scan with the same weights.

Outputs of both: a dict name -> SparseConvTensor (sparse outputs) or torch.Tensor (dense), keyed
as the JSON's "outputs" (OpenPCDet: encoded_spconv_tensor, x_conv1..4 and HeightCompression's
spatial_features [B, C*D, H, W]; SpUNet: seg_logits and the last decoder features).
"""
import argparse
import json
import os
import sys
import zlib
from functools import partial

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import spconv.pytorch as spconv

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tools"))
import model_desc  # noqa: E402  (stdlib: the parameters a description implies)
import vxt  # noqa: E402

BN = partial(nn.BatchNorm1d, eps=1e-3, momentum=0.01)


def _feat(x, fn):
    return x.replace_feature(fn(x.features))


def _cbr(conv, cout):
    """SparseSequential(conv, BatchNorm1d, ReLU): names <seq>.0.*, <seq>.1.*."""
    return spconv.SparseSequential(conv, BN(cout), nn.ReLU())


class ResBlock(spconv.SparseModule):
    """OpenPCDet SparseBasicBlock (bias=True, no projection) and Pointcept BasicBlock (bias=False,
    proj = SubMConv3d 1x1 + BN where the widths differ): relu(bn2(conv2(relu(bn1(conv1(x)))))
    + identity)."""

    def __init__(self, cin, cout, key, bias, proj=False):
        super().__init__()
        if proj:  # registered first, as Pointcept does (only the state_dict order depends on it)
            self.proj = spconv.SparseSequential(spconv.SubMConv3d(cin, cout, 1, bias=False),
                                                BN(cout))
        else:
            self.proj = None
        self.conv1 = spconv.SubMConv3d(cin, cout, 3, padding=1, bias=bias, indice_key=key)
        self.bn1 = BN(cout)
        self.relu = nn.ReLU()
        self.conv2 = spconv.SubMConv3d(cout, cout, 3, padding=1, bias=bias, indice_key=key)
        self.bn2 = BN(cout)

    def forward(self, x):
        out = _feat(self.conv1(x), lambda f: self.relu(self.bn1(f)))
        out = _feat(self.conv2(out), self.bn2)
        identity = self.proj(x) if self.proj is not None else x
        return _feat(out, lambda f: self.relu(f + identity.features))


def _bev(x):
    d = x.dense()  # [B, C, D, H, W]
    b, c, z, h, w = d.shape
    return d.view(b, c * z, h, w)


class VoxelBackBone8x(nn.Module):
    """OpenPCDet VoxelBackBone8x (residual=False) / VoxelResBackBone8x (residual=True)."""

    def __init__(self, input_channels, sparse_shape, residual=False):
        super().__init__()
        self.sparse_shape = list(sparse_shape)
        subm = partial(spconv.SubMConv3d, padding=1, bias=False)
        strided = partial(spconv.SparseConv3d, bias=False)
        self.conv_input = _cbr(subm(input_channels, 16, 3, indice_key="subm1"), 16)
        c4 = 128 if residual else 64

        def blocks(c, i, n):
            if residual:
                return [ResBlock(c, c, "res%d" % i, bias=True) for _ in range(n)]
            return [_cbr(subm(c, c, 3, indice_key="subm%d" % i), c) for _ in range(n)]

        def down(cin, cout, i, pad):
            return _cbr(strided(cin, cout, 3, stride=2, padding=pad, indice_key="spconv%d" % i),
                        cout)

        self.conv1 = spconv.SparseSequential(*blocks(16, 1, 2 if residual else 1))
        self.conv2 = spconv.SparseSequential(down(16, 32, 2, 1), *blocks(32, 2, 2))
        self.conv3 = spconv.SparseSequential(down(32, 64, 3, 1), *blocks(64, 3, 2))
        self.conv4 = spconv.SparseSequential(down(64, c4, 4, (0, 1, 1)), *blocks(c4, 4, 2))
        self.conv_out = _cbr(strided(c4, 128, (3, 1, 1), stride=(2, 1, 1), padding=0,
                                     indice_key="spconv_down2"), 128)

    def forward(self, x):
        x = self.conv_input(x)
        out = {}
        for i in range(1, 5):
            x = getattr(self, "conv%d" % i)(x)
            out["x_conv%d" % i] = x
        out["encoded_spconv_tensor"] = self.conv_out(x)
        out["spatial_features"] = _bev(out["encoded_spconv_tensor"])
        return out


def VoxelResBackBone8x(input_channels, sparse_shape):
    return VoxelBackBone8x(input_channels, sparse_shape, residual=True)


class SpUNet(nn.Module):
    """Pointcept SpUNetBase ("SpUNet-v1m1"), cls_mode off."""

    def __init__(self, in_channels, num_classes, sparse_shape, base_channels=32,
                 channels=(32, 64, 128, 256, 256, 128, 96, 96), layers=(2, 3, 4, 6, 2, 2, 2, 2)):
        super().__init__()
        self.sparse_shape = list(sparse_shape)
        n = len(layers) // 2
        self.conv_input = _cbr(spconv.SubMConv3d(in_channels, base_channels, 5, padding=1,
                                                 bias=False, indice_key="stem"), base_channels)
        self.down, self.up = nn.ModuleList(), nn.ModuleList()
        self.enc, self.dec = nn.ModuleList(), nn.ModuleList()
        enc_ch, dec_ch = base_channels, channels[-1]
        for s in range(n):
            self.down.append(_cbr(spconv.SparseConv3d(enc_ch, channels[s], 2, stride=2,
                                                      bias=False, indice_key="spconv%d" % (s + 1)),
                                  channels[s]))
            self.enc.append(spconv.SparseSequential(*[
                ResBlock(channels[s], channels[s], "subm%d" % (s + 1), False)
                for _ in range(layers[s])]))
            self.up.append(_cbr(spconv.SparseInverseConv3d(
                channels[len(channels) - s - 2], dec_ch, 2, bias=False,
                indice_key="spconv%d" % (s + 1)), dec_ch))
            dec = []
            for i in range(layers[len(channels) - s - 1]):
                cin = dec_ch + enc_ch if i == 0 else dec_ch
                dec.append(ResBlock(cin, dec_ch, "subm%d" % s, False, proj=cin != dec_ch))
            self.dec.append(spconv.SparseSequential(*dec))
            enc_ch, dec_ch = channels[s], channels[len(channels) - s - 2]
        # Pointcept names the blocks block0, block1, ... (an OrderedDict); rename ours to match.
        for seq in list(self.enc) + list(self.dec):
            for i, m in enumerate(list(seq._modules.values())):
                seq._modules.pop(str(i))
                seq._modules["block%d" % i] = m
        self.final = spconv.SubMConv3d(channels[-1], num_classes, 1, padding=1, bias=True)

    def forward(self, x):
        x = self.conv_input(x)
        skips = [x]
        for s in range(len(self.down)):
            x = self.enc[s](self.down[s](x))
            skips.append(x)
        x = skips.pop()
        for s in reversed(range(len(self.down))):
            x = self.up[s](x)
            skip = skips.pop()
            x = self.dec[s](x.replace_feature(torch.cat((x.features, skip.features), 1)))
        return {"seg_logits": self.final(x), "features": x}


def reference_module(desc):
    """The hand-written module a shipped description mirrors, from its name."""
    c, shape = desc["input"]["channels"], desc["input"]["spatial_shape"]
    if desc["name"].startswith("VoxelResBackBone8x"):
        return VoxelResBackBone8x(c, shape)
    if desc["name"].startswith("VoxelBackBone8x"):
        return VoxelBackBone8x(c, shape)
    if desc["name"].startswith("SpUNet"):
        final = [l for l in desc["layers"] if l.get("name") == "final"][0]
        return SpUNet(c, final["out_channels"], shape)
    raise ValueError("no reference module for %s" % desc["name"])


# ---- the builder: OUR JSON -> spconv module ------------------------------------------------

def _t(v):
    return tuple(v) if isinstance(v, (list, tuple)) else (v, v, v)


def _make_conv(layer, cin):
    op, cout, key = layer["op"], layer["out_channels"], layer.get("indice_key")
    k, bias = _t(layer.get("kernel", 3)), layer.get("bias", False)
    s, p, d = _t(layer.get("stride", 1)), _t(layer.get("padding", 0)), _t(layer.get("dilation", 1))
    if op == "subm":
        return spconv.SubMConv3d(cin, cout, k, dilation=d, bias=bias, indice_key=key)
    if op in ("conv", "downsample"):  # downsample (k = s, p = 0) is spconv's strided conv here
        return spconv.SparseConv3d(cin, cout, k, stride=s, padding=p, dilation=d, bias=bias,
                                   indice_key=key)
    if op == "inverse":
        return spconv.SparseInverseConv3d(cin, cout, k, indice_key=key, bias=bias)
    if op == "transposed":
        return spconv.SparseConvTranspose3d(cin, cout, k, stride=s, padding=p, dilation=d,
                                            bias=bias, indice_key=key)
    raise ValueError(op)


def _make_pool(layer):
    cls = spconv.SparseMaxPool3d if layer["op"] == "maxpool" else spconv.SparseAvgPool3d
    k = _t(layer.get("kernel", 2))
    return cls(k, stride=_t(layer.get("stride", k)), padding=_t(layer.get("padding", 0)),
               indice_key=layer.get("indice_key"), subm=layer.get("map") == "subm")


class JsonNet(nn.Module):
    """The spconv module a voxconv model description describes; state_dict names = the layers'
    "name" fields (+ .weight, .bias, BatchNorm's buffers)."""

    def __init__(self, desc):
        super().__init__()
        self.desc = desc
        self.sparse_shape = list(desc["input"]["spatial_shape"])
        steps = []
        chans = {"input": desc["input"]["channels"]}
        for layer, (lid, ins) in zip(desc["layers"], model_desc.layer_ids(desc)):
            op, cin, mod = layer["op"], chans[ins[0]], None
            cout = cin
            if op in model_desc.CONV_OPS:
                mod, cout = _make_conv(layer, cin), layer["out_channels"]
            elif op == "batchnorm":
                mod = nn.BatchNorm1d(cin, eps=layer.get("eps", 1e-5), momentum=0.01)
            elif op in ("maxpool", "avgpool"):
                mod = _make_pool(layer)
            elif op == "concat":
                cout = sum(chans[i] for i in ins)
            if mod is not None and "name" in layer:
                self._place(layer["name"], mod)
            chans[lid] = cout
            steps.append((op, lid, ins, mod, layer))
        self.__dict__["steps"] = steps  # plain list: the modules are registered by _place

    def _place(self, path, mod):
        parts, node = path.split("."), self
        for p in parts[:-1]:
            if p not in node._modules:
                node.add_module(p, nn.Module())
            node = node._modules[p]
        node.add_module(parts[-1], mod)

    def forward(self, x):
        r = {"input": x}
        for op, lid, ins, mod, layer in self.steps:
            a = r[ins[0]]
            if op in model_desc.CONV_OPS or op in ("maxpool", "avgpool"):
                y = mod(a)
            elif op == "batchnorm":
                y = _feat(a, mod)
            elif op == "relu":
                y = _feat(a, F.relu)
            elif op == "leaky_relu":
                y = _feat(a, lambda f: F.leaky_relu(f, layer.get("slope", 0.01)))
            elif op == "add":
                y = _feat(a, lambda f: f + r[ins[1]].features)
            elif op == "concat":
                y = a.replace_feature(torch.cat([r[i].features for i in ins], 1))
            elif op == "dense":
                y = _bev(a) if layer.get("layout", "bev") == "bev" else a.dense()
            elif op in ("global_maxpool", "global_avgpool"):
                y = _global_pool(a, op == "global_maxpool")
            else:
                raise ValueError("unknown op %s" % op)
            r[lid] = y
        return {name: r[lid] for name, lid in self.desc["outputs"].items()}


def _global_pool(x, is_max):
    b = x.indices[:, 0].long()
    out = torch.zeros(x.batch_size, x.features.shape[1], dtype=torch.float32,
                      device=x.features.device)
    idx = b[:, None].expand(-1, x.features.shape[1])
    reduce = "amax" if is_max else "mean"
    return out.scatter_reduce(0, idx, x.features.float(), reduce, include_self=False)


# ---- weights --------------------------------------------------------------------------------

def randomize(module, seed):
    """Deterministic random weights, each tensor from its own generator seeded by (seed, name), so
    the values do not depend on the module's layout: conv weights N(0, 2 / fan_in), biases
    N(0, 0.1), BatchNorm weight U(0.5, 1.5), bias N(0, 0.1), running_mean N(0, 0.5),
    running_var U(0.5, 2). calibrate_bn then replaces the running statistics by a scene's."""
    sd = module.state_dict()
    with torch.no_grad():
        for name, t in sd.items():
            if name.endswith("num_batches_tracked"):
                continue
            g = torch.Generator().manual_seed((seed * 1000003 + zlib.crc32(name.encode())) % 2**63)
            shape, leaf = t.shape, name.rsplit(".", 1)[-1]
            if t.dim() == 5:
                v = torch.randn(shape, generator=g) * (2.0 / float(np.prod(shape[1:]))) ** 0.5
            elif leaf == "running_var":
                v = 0.5 + 1.5 * torch.rand(shape, generator=g)
            elif leaf == "running_mean":
                v = 0.5 * torch.randn(shape, generator=g)
            elif leaf == "weight":  # BatchNorm gamma (1-D)
                v = 0.5 + torch.rand(shape, generator=g)
            else:  # BatchNorm beta, conv bias
                v = 0.1 * torch.randn(shape, generator=g)
            t.copy_(v.to(t.dtype))


def calibrate_bn(module, make_input):
    """Sets every BatchNorm's running statistics to those of one forward on make_input() (train
    mode, momentum 1), as a trained network's are: non-trivial (means far from 0, variances far
    from 1) and of the scale the activations have, so that fp16 runs stay in range."""
    bns = [m for m in module.modules() if isinstance(m, nn.BatchNorm1d)]
    for m in bns:
        m.momentum = 1.0
    module.train()
    with torch.no_grad():
        module(make_input())
    for m in bns:
        m.momentum = 0.01
    module.eval()


def sparse_input(coords, feats, shape, batch, device, dtype):
    """A fresh SparseConvTensor (its own empty map cache) on device."""
    return spconv.SparseConvTensor(torch.as_tensor(feats).to(device=device, dtype=dtype),
                                   torch.as_tensor(coords).to(device=device, dtype=torch.int32),
                                   list(shape), batch)


# ---- self-test --------------------------------------------------------------------------------

def cpu_workarounds(module):
    """spconv 2.3.8's CPU path (tests only; the GPU path needs none of this): its convolutions
    give wrong, varying results when torch runs several threads (checked against a direct sum),
    and they refuse a bias ("cpu don't support act and bias"): one thread, and each biased conv
    runs unbiased with its bias added after, through hooks (the state_dict is unchanged)."""
    torch.set_num_threads(1)

    def pre(m, args):
        m.__dict__["_vc_bias"] = m.bias  # not an attribute nn.Module would register
        m.bias = None

    def post(m, args, out):
        b = m.__dict__.pop("_vc_bias")
        m.bias = b
        return out.replace_feature(out.features + b)

    for m in module.modules():
        if isinstance(m, spconv.conv.SparseConvolution) and m.bias is not None:
            m.register_forward_pre_hook(pre)
            m.register_forward_hook(post)


def _shapes(sd):
    return {k: tuple(v.shape) for k, v in sd.items()}


def _dense_or_sparse(v):
    if isinstance(v, spconv.SparseConvTensor):
        order = np.lexsort(v.indices.cpu().numpy().T[::-1])
        return v.indices.cpu().numpy()[order], v.features.float().cpu().numpy()[order]
    return None, v.float().cpu().numpy()


def selftest(models_dir, scene, device):
    sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
    import test_models  # hand-written key lists from the original sources
    failures = 0
    for fname in sorted(os.listdir(models_dir)):
        if not fname.endswith(".json"):
            continue
        desc = json.load(open(os.path.join(models_dir, fname)))
        built, ref = JsonNet(desc), reference_module(desc)
        implied = dict(model_desc.params(desc, counters=True))
        checks = [("JsonNet vs the JSON", _shapes(built.state_dict()), implied),
                  ("our module vs the JSON", _shapes(ref.state_dict()), implied)]
        expected = test_models.expected_params(desc)
        if expected is not None:
            checks.append(("hand-written original vs the JSON", dict(expected), implied))
        for what, got, want in checks:
            ok = got == want
            failures += not ok
            print("%-40s %-38s %s (%d tensors)" % (fname, what, "ok" if ok else "MISMATCH",
                                                   len(got)))
            if not ok:
                for k in sorted(set(got) | set(want)):
                    if got.get(k) != want.get(k):
                        print("   ", k, got.get(k), want.get(k))
        if scene is None or desc["input"]["channels"] not in scene:
            continue
        # Same weights in both; outputs on a real scan must agree (same graph, same maps).
        randomize(ref, 7)
        d = vxt.read(scene[desc["input"]["channels"]])
        mk = lambda: sparse_input(d["coords"], d["feats"], desc["input"]["spatial_shape"],
                                  d["batch"], device, torch.float32)
        ref.to(device)
        if device == "cpu":
            cpu_workarounds(ref)
            cpu_workarounds(built)
        calibrate_bn(ref, mk)
        built.load_state_dict(ref.state_dict())
        built.to(device).eval()
        with torch.no_grad():
            a, b = ref(mk()), built(mk())
        for name in desc["outputs"]:
            ca, fa = _dense_or_sparse(a[name])
            cb, fb = _dense_or_sparse(b[name])
            same_c = ca is None or np.array_equal(ca, cb)
            err = float(np.abs(fa - fb).max()) if fa.size else 0.0
            ok = same_c and err <= 1e-4 * max(1.0, float(np.abs(fa).max()))
            failures += not ok
            print("%-40s output %-31s %s (%s, max |diff| %.3g, max |x| %.3g)" % (
                fname, name, "ok" if ok else "MISMATCH",
                "%d voxels" % len(ca) if ca is not None else "dense %s" % (fa.shape,), err,
                float(np.abs(fa).max()) if fa.size else 0.0))
    print("selftest: %d failure(s)" % failures)
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--selftest", action="store_true")
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--scene", action="append", default=[],
                    help="C=FILE.vxt: a scene of C channels to run the models of C channels on")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    if not a.selftest:
        ap.print_help()
        return 2
    scenes = {int(s.split("=", 1)[0]): s.split("=", 1)[1] for s in a.scene}
    return 1 if selftest(a.models, scenes or None, a.device) else 0


if __name__ == "__main__":
    sys.exit(main())
