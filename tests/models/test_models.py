#!/usr/bin/env python3
"""Checks the shipped model descriptions (models/*.json) without PyTorch:

- each file is what tools/model_desc.py generates (so the generator and the files agree);
- the graph is well formed: ids unique, inputs defined earlier, no layer reads a dense result,
  add / concat inputs on one coordinate set, subm convs of one indice_key on one coordinate set
  with one kernel, each inverse conv names an earlier strided conv's key and returns to that
  conv's input coordinates, outputs name layers;
- the parameters the JSON implies (names and shapes) are exactly the state_dict of the original
  PyTorch module, written out below by hand from the original sources (OpenPCDet
  pcdet/models/backbones_3d/spconv_backbone.py: VoxelBackBone8x, VoxelResBackBone8x; Pointcept
  pointcept/models/sparse_unet/spconv_unet_v1m1.py: SpUNetBase), num_batches_tracked included;
- the spatial shapes through the strided convs are OpenPCDet's (KITTI: 41x1600x1408 ->
  2x200x176, BEV 256 channels; nuScenes: 2x180x180) and the U-Net's levels lose no plane.
Prints one line per check and "N passed, N failed"; exit 1 on any failure."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tools"))
import model_desc  # noqa: E402


# ---- the original modules' state_dicts, by hand ----------------------------------------------

def bn(p, c):
    """nn.BatchNorm1d's state_dict."""
    return [(p + ".weight", (c,)), (p + ".bias", (c,)), (p + ".running_mean", (c,)),
            (p + ".running_var", (c,)), (p + ".num_batches_tracked", ())]


def w(p, cout, k, cin):
    """spconv 2.x conv weight [out, kz, ky, kx, in]."""
    k = k if isinstance(k, tuple) else (k, k, k)
    return [(p + ".weight", (cout,) + k + (cin,))]


def b(p, c):
    return [(p + ".bias", (c,))]


def pcdet_basic_block(p, c):
    """SparseBasicBlock(c, c, norm_fn): conv1 (SubMConv3d k3, bias = norm_fn is not None = True),
    bn1, relu, conv2 (same), bn2; downsample None."""
    return (w(p + ".conv1", c, 3, c) + b(p + ".conv1", c) + bn(p + ".bn1", c) +
            w(p + ".conv2", c, 3, c) + b(p + ".conv2", c) + bn(p + ".bn2", c))


def voxel_backbone8x(C):
    """VoxelBackBone8x: conv_input, conv1..conv4 of post_act_block (conv, bn, relu; bias=False),
    conv_out; widths 16, 16, 32, 64, 64, 128."""
    return (w("conv_input.0", 16, 3, C) + bn("conv_input.1", 16) +
            w("conv1.0.0", 16, 3, 16) + bn("conv1.0.1", 16) +
            w("conv2.0.0", 32, 3, 16) + bn("conv2.0.1", 32) +
            w("conv2.1.0", 32, 3, 32) + bn("conv2.1.1", 32) +
            w("conv2.2.0", 32, 3, 32) + bn("conv2.2.1", 32) +
            w("conv3.0.0", 64, 3, 32) + bn("conv3.0.1", 64) +
            w("conv3.1.0", 64, 3, 64) + bn("conv3.1.1", 64) +
            w("conv3.2.0", 64, 3, 64) + bn("conv3.2.1", 64) +
            w("conv4.0.0", 64, 3, 64) + bn("conv4.0.1", 64) +
            w("conv4.1.0", 64, 3, 64) + bn("conv4.1.1", 64) +
            w("conv4.2.0", 64, 3, 64) + bn("conv4.2.1", 64) +
            w("conv_out.0", 128, (3, 1, 1), 64) + bn("conv_out.1", 128))


def voxel_res_backbone8x(C):
    """VoxelResBackBone8x: conv1 = 2 SparseBasicBlocks; conv2..4 = a post_act_block spconv then
    2 SparseBasicBlocks; widths 16, 32, 64, 128; conv_out 128 -> 128."""
    return (w("conv_input.0", 16, 3, C) + bn("conv_input.1", 16) +
            pcdet_basic_block("conv1.0", 16) + pcdet_basic_block("conv1.1", 16) +
            w("conv2.0.0", 32, 3, 16) + bn("conv2.0.1", 32) +
            pcdet_basic_block("conv2.1", 32) + pcdet_basic_block("conv2.2", 32) +
            w("conv3.0.0", 64, 3, 32) + bn("conv3.0.1", 64) +
            pcdet_basic_block("conv3.1", 64) + pcdet_basic_block("conv3.2", 64) +
            w("conv4.0.0", 128, 3, 64) + bn("conv4.0.1", 128) +
            pcdet_basic_block("conv4.1", 128) + pcdet_basic_block("conv4.2", 128) +
            w("conv_out.0", 128, (3, 1, 1), 128) + bn("conv_out.1", 128))


def pointcept_block(p, cin, c):
    """Pointcept BasicBlock(cin, c, bias=False): proj (SparseSequential(Identity) when cin == c,
    else SubMConv3d k1 + BN), conv1, bn1, conv2, bn2."""
    proj = [] if cin == c else w(p + ".proj.0", c, 1, cin) + bn(p + ".proj.1", c)
    return proj + w(p + ".conv1", c, 3, cin) + bn(p + ".bn1", c) + w(p + ".conv2", c, 3, c) + \
        bn(p + ".bn2", c)


def spunet_v1m1(C, classes):
    """SpUNetBase defaults: base 32, channels (32, 64, 128, 256, 256, 128, 96, 96), layers
    (2, 3, 4, 6, 2, 2, 2, 2). Stage s: down[s] SparseConv3d k2 s2 (enc_ch -> channels[s]),
    enc[s] layers[s] blocks; up[s] SparseInverseConv3d k2 (channels[6 - s] -> dec_ch), dec[s]
    block0 (dec_ch + enc_ch -> dec_ch) then blocks, with (enc_ch, dec_ch) = (32, 96), (32, 96),
    (64, 128), (128, 256) for s = 0..3."""
    r = w("conv_input.0", 32, 5, C) + bn("conv_input.1", 32)
    down = [(32, 32), (32, 64), (64, 128), (128, 256)]        # (in, out) of down[s]
    enc_blocks = [2, 3, 4, 6]
    up = [(96, 96), (128, 96), (256, 128), (256, 256)]        # (in, out) of up[s]
    dec = [(96 + 32, 96), (96 + 32, 96), (128 + 64, 128), (256 + 128, 256)]  # block0 (in, out)
    for s in range(4):
        r += w("down.%d.0" % s, down[s][1], 2, down[s][0]) + bn("down.%d.1" % s, down[s][1])
        for i in range(enc_blocks[s]):
            r += pointcept_block("enc.%d.block%d" % (s, i), down[s][1], down[s][1])
        r += w("up.%d.0" % s, up[s][1], 2, up[s][0]) + bn("up.%d.1" % s, up[s][1])
        r += pointcept_block("dec.%d.block0" % s, dec[s][0], dec[s][1])
        r += pointcept_block("dec.%d.block1" % s, dec[s][1], dec[s][1])
    return r + w("final", classes, 1, 96) + b("final", classes)


def expected_params(desc):
    """The original module's state_dict names and shapes for a shipped description, or None."""
    c, name = desc["input"]["channels"], desc["name"]
    if name.startswith("VoxelBackBone8x"):
        return voxel_backbone8x(c)
    if name.startswith("VoxelResBackBone8x"):
        return voxel_res_backbone8x(c)
    if name.startswith("SpUNet-v1m1"):
        return spunet_v1m1(c, 20)
    return None


# ---- graph checks --------------------------------------------------------------------------

def _t(v):
    return list(v) if isinstance(v, (list, tuple)) else [v, v, v]


def walk(desc):
    """Coordinate sets (an int per distinct set) and spatial shapes per result id, spconv rules;
    raises AssertionError on a malformed graph."""
    coord = {"input": 0}
    shapes = {0: list(desc["input"]["spatial_shape"])}
    keys = {}  # indice_key -> (kind, input set, output set, kernel)
    dense = set()
    for layer, (lid, ins) in zip(desc["layers"], model_desc.layer_ids(desc)):
        op = layer["op"]
        assert lid not in coord and lid not in dense, "duplicate id %s" % lid
        for i in ins:
            assert i in coord, "%s reads %s: not an earlier sparse result" % (lid, i)
        src = coord[ins[0]]
        if op in ("add", "concat"):
            assert len(ins) >= 2 and all(coord[i] == src for i in ins), \
                "%s: inputs on different coordinate sets" % lid
        key, k = layer.get("indice_key"), _t(layer.get("kernel", 3))
        if op == "subm":
            if key is not None:
                prev = keys.setdefault(key, ("subm", src, src, k))
                assert prev == ("subm", src, src, k), "%s: key %s on another set/kernel" % (lid, key)
            coord[lid] = src
        elif op == "conv":
            assert key not in keys, "%s: key %s reused" % (lid, key)
            s, p = _t(layer.get("stride", 1)), _t(layer.get("padding", 0))
            new = len(shapes)
            shapes[new] = [(shapes[src][a] + 2 * p[a] - k[a]) // s[a] + 1 for a in range(3)]
            keys[key] = ("conv", src, new, k)
            coord[lid] = new
        elif op == "inverse":
            kind, fwd_in, fwd_out, fk = keys[key]
            assert kind == "conv" and fwd_out == src and fk == k, \
                "%s: inverse of key %s does not match its conv" % (lid, key)
            coord[lid] = fwd_in
        elif op == "dense":
            dense.add(lid)
        else:
            assert op in ("batchnorm", "relu", "leaky_relu", "add", "concat"), op
            coord[lid] = src
    for name, lid in desc["outputs"].items():
        assert lid in coord or lid in dense, "output %s names no layer (%s)" % (name, lid)
    return coord, shapes


def level_shapes(desc):
    coord, shapes = walk(desc)
    return {lid: shapes[c] for lid, c in coord.items()}


def check_file(path):
    desc = json.load(open(path))
    name = os.path.basename(path)
    results = []

    def check(what, ok, detail=""):
        results.append(ok)
        print("%-36s %-44s %s%s" % (name, what, "ok" if ok else "FAIL", detail))

    check("format/version", desc.get("format") == "voxconv-model" and desc.get("version") == 1)
    try:
        shapes = level_shapes(desc)
        check("graph well formed", True)
    except AssertionError as e:
        check("graph well formed", False, ": %s" % e)
        return results
    got = model_desc.params(desc, counters=True)
    check("parameter names unique", len(got) == len(dict(got)))
    want = expected_params(desc)
    if want is not None:
        g, x = dict(got), dict(want)
        diff = sorted(k for k in set(g) | set(x) if g.get(k) != x.get(k))
        check("params == original state_dict", not diff,
              " (%d tensors)" % len(g) if not diff else ": %s" % diff[:6])
    vox = desc["input"].get("voxelize")
    if vox:
        grid = [round((vox["range"][a + 3] - vox["range"][a]) / vox["voxel_size"][a])
                for a in (2, 1, 0)]
        check("voxel grid fits spatial_shape",
              all(g <= s for g, s in zip(grid, desc["input"]["spatial_shape"])),
              " (%s in %s)" % (grid, desc["input"]["spatial_shape"]))
    if desc["name"].startswith("Voxel"):
        out = shapes["conv_out"]
        want_out = {1408: [2, 200, 176], 1440: [2, 180, 180]}[desc["input"]["spatial_shape"][2]]
        check("conv_out shape (OpenPCDet)", out == want_out, " %s" % out)
        check("BEV channels 256 (NUM_BEV_FEATURES)", 128 * out[0] == 256)
    if desc["name"].startswith("SpUNet"):
        deepest = shapes["enc.3.block5"]
        check("U-Net levels keep every plane",
              all(s * 16 == t for s, t in zip(deepest, desc["input"]["spatial_shape"])),
              " %s" % deepest)
    return results


def main():
    models = os.path.join(ROOT, "models")
    results = []
    gen = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "model_desc.py"), "check",
                          models], capture_output=True, text=True)
    print("%-36s %-44s %s" % ("models/", "files == model_desc.py write",
                              "ok" if gen.returncode == 0 else "FAIL\n" + gen.stdout))
    results.append(gen.returncode == 0)
    files = sorted(f for f in os.listdir(models) if f.endswith(".json"))
    results.append(len(files) == 4)
    for f in files:
        results += check_file(os.path.join(models, f))
    # A broken description must fail the graph checks (so that they are real).
    desc = json.load(open(os.path.join(models, "spunet_indoor.json")))
    for layer in desc["layers"]:
        if layer.get("id") == "cat.1":
            layer["inputs"][1] = "enc.1.block2"  # a skip from the wrong level
    try:
        walk(desc)
        bad_caught = False
    except AssertionError:
        bad_caught = True
    print("%-36s %-44s %s" % ("(mutated spunet)", "wrong-level skip is refused",
                              "ok" if bad_caught else "FAIL"))
    results.append(bad_caught)
    passed = sum(results)
    print("%d passed, %d failed" % (passed, len(results) - passed))
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
