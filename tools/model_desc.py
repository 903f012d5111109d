#!/usr/bin/env python3
"""voxconv model descriptions (models/*.json, docs/networks.md and /net_spec section 2): the
generator of the shipped files and the parameter list a description implies. Standard library
only, so that the tests and the converter run without PyTorch.

Usage:
  model_desc.py write [DIR]        (re)write the shipped descriptions into DIR (default models/)
  model_desc.py check [DIR]        exit 1 if a shipped file differs from what `write` gives
  model_desc.py params MODEL.json  print the state_dict names and shapes the description needs

The shipped networks mirror the PyTorch modules they are named after, parameter names included
(the names of the module's state_dict), so that a trained checkpoint's backbone state_dict loads
as it is:
  - OpenPCDet pcdet/models/backbones_3d/spconv_backbone.py: VoxelBackBone8x (SECOND, PV-RCNN) and
    VoxelResBackBone8x (CenterPoint), with OpenPCDet's HeightCompression (map_to_bev) as the
    dense 'spatial_features' output;
  - Pointcept pointcept/models/sparse_unet/spconv_unet_v1m1.py: SpUNetBase ("SpUNet-v1m1").
"""
import json
import os
import sys

BN_EPS = 1e-3  # both projects build BatchNorm1d with eps=1e-3, momentum=0.01
BN_SUFFIXES = ("weight", "bias", "running_mean", "running_var")
CONV_OPS = ("subm", "conv", "downsample", "inverse", "transposed")


def _triple(v):
    return list(v) if isinstance(v, (list, tuple)) else [v, v, v]


class _Builder:
    """Appends layers; each helper returns the id of the result it made."""

    def __init__(self):
        self.layers = []

    def add(self, op, lid=None, inp=None, **kw):
        layer = {"op": op}
        if lid is not None:
            layer["id"] = lid
        if isinstance(inp, list):
            layer["inputs"] = inp
        elif inp is not None:
            layer["input"] = inp
        layer.update(kw)
        self.layers.append(layer)
        return lid

    def conv(self, op, name, cout, kernel, inp=None, key=None, bias=False, **kw):
        extra = dict(kw)
        if bias:
            extra["bias"] = True
        if key is not None:
            extra["indice_key"] = key
        return self.add(op, name, inp, name=name, out_channels=cout, kernel=kernel, **extra)

    def bn(self, name, inp=None):
        return self.add("batchnorm", name, inp, name=name, eps=BN_EPS)

    def conv_bn_relu(self, op, seq, cout, kernel, inp=None, key=None, rid=None, **kw):
        """spconv.SparseSequential(conv, BatchNorm1d, ReLU) named seq: seq.0 and seq.1; the
        result's id is rid or seq."""
        self.conv(op, seq + ".0", cout, kernel, inp, key, **kw)
        self.bn(seq + ".1")
        return self.add("relu", rid or seq)

    def res_block(self, name, cin, cout, inp, key, bias, proj=False, rid=None):
        """OpenPCDet SparseBasicBlock / Pointcept BasicBlock: relu(bn2(conv2(relu(bn1(conv1(x)))))
        + identity), identity = x or, with proj (Pointcept, cin != cout), bn(subm1x1(x))."""
        self.conv("subm", name + ".conv1", cout, 3, inp, key, bias=bias)
        self.bn(name + ".bn1")
        self.add("relu")
        self.conv("subm", name + ".conv2", cout, 3, None, key, bias=bias)
        main = self.bn(name + ".bn2")
        identity = inp
        if proj:
            assert cin != cout
            self.conv("subm", name + ".proj.0", cout, 1, inp)
            identity = self.bn(name + ".proj.1")
        self.add("add", name + ".add", [main, identity])
        return self.add("relu", rid or name)


def _detection_backbone(name, residual, in_ch, shape, vox):
    """VoxelBackBone8x (residual=False) or VoxelResBackBone8x (residual=True)."""
    b = _Builder()
    x = b.conv_bn_relu("subm", "conv_input", 16, 3, "input", "subm1")
    # (channels, padding of the stage's strided conv or None: stage 1 has none)
    stages = [(16, None), (32, 1), (64, 1), (128 if residual else 64, [0, 1, 1])]
    for i, (cout, pad) in enumerate(stages, start=1):
        seq = "conv%d" % i
        mods = []  # the SparseSequential's children: (index, kind)
        if pad is not None:  # post_act_block(conv_type='spconv')
            mods.append("strided")
        mods += ["block"] * (1 if (not residual and pad is None) else 2)
        for idx, kind in enumerate(mods):
            rid = seq if idx == len(mods) - 1 else None  # the stage's result is x_conv<i>
            sub = "%s.%d" % (seq, idx)
            if kind == "strided":
                x = b.conv_bn_relu("conv", sub, cout, 3, x, "spconv%d" % i, rid, stride=2,
                                   padding=pad)
            elif residual:  # SparseBasicBlock: biased convs (bias = norm_fn is not None)
                x = b.res_block(sub, cout, cout, x, "res%d" % i, True, rid=rid)
            else:  # post_act_block(conv_type='subm')
                x = b.conv_bn_relu("subm", sub, cout, 3, x, "subm%d" % i, rid)
    b.conv_bn_relu("conv", "conv_out", 128, [3, 1, 1], x, "spconv_down2", stride=[2, 1, 1],
                   padding=0)
    b.add("dense", "bev", "conv_out", layout="bev")  # HeightCompression
    return {
        "format": "voxconv-model", "version": 1, "name": name,
        "input": {"channels": in_ch, "spatial_shape": shape, "voxelize": vox},
        "layers": b.layers,
        "outputs": {"encoded_spconv_tensor": "conv_out", "x_conv1": "conv1", "x_conv2": "conv2",
                    "x_conv3": "conv3", "x_conv4": "conv4", "spatial_features": "bev"},
    }


def _spunet(name, in_ch, num_classes, shape, vox, base=32,
            channels=(32, 64, 128, 256, 256, 128, 96, 96), layers=(2, 3, 4, 6, 2, 2, 2, 2)):
    """Pointcept SpUNetBase (SpUNet-v1m1), cls_mode off."""
    b = _Builder()
    stages = len(layers) // 2
    x = b.conv_bn_relu("subm", "conv_input", base, 5, "input", "stem")
    skips = [x]
    for s in range(stages):
        x = b.conv_bn_relu("conv", "down.%d" % s, channels[s], 2, x, "spconv%d" % (s + 1),
                           stride=2, padding=0)
        for i in range(layers[s]):
            x = b.res_block("enc.%d.block%d" % (s, i), channels[s], channels[s], x,
                            "subm%d" % (s + 1), bias=False)
        skips.append(x)
    x = skips.pop()
    for s in reversed(range(stages)):
        enc_ch = base if s == 0 else channels[s - 1]  # channels of the skip at level s
        dec_ch = channels[len(channels) - s - 1]
        x = b.conv_bn_relu("inverse", "up.%d" % s, dec_ch, 2, x, "spconv%d" % (s + 1))
        x = b.add("concat", "cat.%d" % s, [x, skips.pop()])
        for i in range(layers[len(channels) - s - 1]):
            cin = dec_ch + enc_ch if i == 0 else dec_ch
            x = b.res_block("dec.%d.block%d" % (s, i), cin, dec_ch, x, "subm%d" % s,
                            bias=False, proj=(cin != dec_ch))
    b.conv("subm", "final", num_classes, 1, x, bias=True)
    return {
        "format": "voxconv-model", "version": 1, "name": name,
        "input": {"channels": in_ch, "spatial_shape": shape, "voxelize": vox},
        "layers": b.layers,
        "outputs": {"seg_logits": "final", "features": x},
    }


KITTI_VOX = {"voxel_size": [0.05, 0.05, 0.1], "range": [0, -40, -3, 70.4, 40, 1],
             "reduce": "mean", "max_voxels": 40000, "use_dim": 4}
NUSC_VOX = {"voxel_size": [0.075, 0.075, 0.2], "range": [-54, -54, -5, 54, 54, 3],
            "reduce": "mean", "max_voxels": 160000, "use_dim": 5}
# Indoor: Pointcept's ScanNet grid of 2 cm; a 32 x 16 x 4.16 m box around the origin, so that the
# grid (208 x 800 x 1600, z y x) is a multiple of 16 on every axis and the four k2 s2 levels
# of the U-Net drop no plane (spconv's k2 s2 output extent is floor(D / 2)).
INDOOR_VOX = {"voxel_size": [0.02, 0.02, 0.02], "range": [-16, -8, -2, 16, 8, 2.16],
              "reduce": "mean", "max_voxels": 0, "use_dim": 3}

# The sources (module and config) of each are in models/README.md.
MODELS = {
    "voxel_backbone8x_kitti.json": lambda: _detection_backbone(
        "VoxelBackBone8x-kitti", False, 4, [41, 1600, 1408], KITTI_VOX),
    "voxel_res_backbone8x_kitti.json": lambda: _detection_backbone(
        "VoxelResBackBone8x-kitti", True, 4, [41, 1600, 1408], KITTI_VOX),
    "voxel_res_backbone8x_nuscenes.json": lambda: _detection_backbone(
        "VoxelResBackBone8x-nuscenes", True, 5, [41, 1440, 1440], NUSC_VOX),
    # base_channels 32, channels and layers as SpUNetBase's defaults, ScanNet's 20 classes;
    # 3 input channels (the voxel's mean x, y, z) where Pointcept's ScanNet config has 6.
    "spunet_indoor.json": lambda: _spunet("SpUNet-v1m1-indoor", 3, 20, [208, 800, 1600],
                                          INDOOR_VOX),
}


def dumps(desc):
    """The shipped text: one layer per line, so that diffs stay readable."""
    head = {k: v for k, v in desc.items() if k not in ("layers", "outputs")}
    lines = ["{"]
    for k, v in head.items():
        lines.append("  %s: %s," % (json.dumps(k), json.dumps(v)))
    lines.append('  "layers": [')
    for i, layer in enumerate(desc["layers"]):
        comma = "," if i + 1 < len(desc["layers"]) else ""
        lines.append("    " + json.dumps(layer) + comma)
    lines.append("  ],")
    lines.append('  "outputs": ' + json.dumps(desc["outputs"]))
    lines.append("}")
    return "\n".join(lines) + "\n"


def layer_ids(desc):
    """(id, input ids) of every layer, defaults applied as the spec states."""
    out, prev = [], "input"
    for i, layer in enumerate(desc["layers"]):
        lid = layer.get("id", "#%d" % i)
        ins = layer.get("inputs") or [layer.get("input", prev)]
        out.append((lid, ins))
        prev = lid
    return out


def params(desc, counters=False):
    """[(state_dict name, shape)] the description needs, in layer order; with counters, the
    BatchNorm num_batches_tracked entries (shape ()) that a PyTorch state_dict also holds."""
    chans = {"input": desc["input"]["channels"]}
    res = []
    for layer, (lid, ins) in zip(desc["layers"], layer_ids(desc)):
        op = layer["op"]
        for i in ins:
            if i not in chans:
                raise ValueError("layer %s reads unknown or dense result %s" % (lid, i))
        cin = chans[ins[0]]
        if op in CONV_OPS:
            k = _triple(layer.get("kernel", 3))
            cout = layer["out_channels"]
            res.append((layer["name"] + ".weight", (cout, k[0], k[1], k[2], cin)))
            if layer.get("bias", False):
                res.append((layer["name"] + ".bias", (cout,)))
        elif op == "batchnorm":
            cout = cin
            res += [(layer["name"] + "." + s, (cin,)) for s in BN_SUFFIXES]
            if counters:
                res.append((layer["name"] + ".num_batches_tracked", ()))
        elif op == "concat":
            cout = sum(chans[i] for i in ins)
        elif op == "add":
            if chans[ins[0]] != chans[ins[1]]:
                raise ValueError("layer %s adds %d and %d channels" % (lid, chans[ins[0]],
                                                                       chans[ins[1]]))
            cout = cin
        elif op in ("dense", "global_maxpool", "global_avgpool"):
            continue  # dense results feed no layer
        else:  # relu, leaky_relu, maxpool, avgpool
            cout = cin
        if lid in chans:
            raise ValueError("duplicate layer id %s" % lid)
        chans[lid] = cout
    return res


def main(argv):
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models")
    if len(argv) >= 2 and argv[1] in ("write", "check"):
        d = argv[2] if len(argv) > 2 else root
        bad = 0
        for fname, make in MODELS.items():
            text, path = dumps(make()), os.path.join(d, fname)
            if argv[1] == "write":
                with open(path, "w") as f:
                    f.write(text)
            else:
                old = open(path).read() if os.path.exists(path) else None
                if old != text:
                    print("%s differs from `model_desc.py write`" % path)
                    bad = 1
        return bad
    if len(argv) == 3 and argv[1] == "params":
        with open(argv[2]) as f:
            for name, shape in params(json.load(f)):
                print(name, list(shape))
        return 0
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
