#!/usr/bin/env python3
"""tools/spconv_to_safetensors.py on made-up checkpoints shaped as OpenPCDet's and Pointcept's
(the tensors a description needs, under the projects' prefixes, beside other modules' tensors and
an optimizer state). Needs PyTorch and safetensors: exits 77 (skipped) without them.
Seed printed; prints "N passed, N failed"."""
import contextlib
import io
import json
import os
import sys
import tempfile

try:
    import torch
    from safetensors.torch import load_file
except ImportError as e:
    print("skipped: %s" % e)
    sys.exit(77)

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tools"))
import model_desc  # noqa: E402
import spconv_to_safetensors as conv  # noqa: E402

SEED = 2811
results = []


def check(what, ok):
    results.append(bool(ok))
    print("%-60s %s" % (what, "ok" if ok else "FAIL"))


def backbone(model, gen):
    desc = json.load(open(os.path.join(ROOT, "models", model)))
    sd = {}
    for name, shape in model_desc.params(desc, counters=True):
        sd[name] = torch.tensor(7) if not shape else torch.randn(shape, generator=gen)
    return sd


def run(args):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = conv.main(args)
        except SystemExit as e:
            rc, msg = 1, str(e)
            err.write(msg)
    return rc, err.getvalue()


def main():
    print("seed %d" % SEED)
    gen = torch.Generator().manual_seed(SEED)
    d = tempfile.mkdtemp()
    kitti = os.path.join(ROOT, "models", "voxel_res_backbone8x_kitti.json")
    bb = backbone("voxel_res_backbone8x_kitti.json", gen)
    full = {"model_state": {**{"backbone_3d." + k: v for k, v in bb.items()},
                            "vfe.dummy": torch.zeros(3),
                            "dense_head.heads_list.0.center.0.0.weight": torch.randn(64, 64, 3, 3)},
            "optimizer_state": {"state": {}, "param_groups": []}, "epoch": 80, "it": 1,
            "version": "pcdet+0.6.0"}
    ckpt, out = os.path.join(d, "ckpt.pth"), os.path.join(d, "out.safetensors")
    torch.save(full, ckpt)
    rc, _ = run([ckpt, out, "--model", kitti])
    got = load_file(out) if rc == 0 else {}
    plain = {k: v for k, v in bb.items() if not k.endswith("num_batches_tracked")}
    check("OpenPCDet checkpoint: backbone_3d. found and stripped", rc == 0 and
          set(got) == set(plain))
    check("values bit-identical in fp32", all(torch.equal(got[k], v) for k, v in plain.items()))
    rc, _ = run([ckpt, out, "--model", kitti, "--dtype", "fp16", "--keep-counters"])
    got = load_file(out) if rc == 0 else {}
    check("fp16 and counters kept", rc == 0 and got["conv_input.0.weight"].dtype == torch.float16
          and "conv_input.1.num_batches_tracked" in got)

    old = {k: (v.permute(1, 2, 3, 4, 0).contiguous() if v.dim() == 5 else v) for k, v in bb.items()}
    torch.save({"model_state": {"backbone_3d." + k: v for k, v in old.items()}}, ckpt)
    rc, _ = run([ckpt, out, "--model", kitti])
    got = load_file(out) if rc == 0 else {}
    check("spconv 1.x layout transposed (auto, with --model)",
          rc == 0 and all(torch.equal(got[k], v) for k, v in plain.items()))

    bad = dict(bb)
    del bad["conv2.1.bn1.running_var"]
    bad["conv3.1.conv1.bias"] = torch.full((64,), float("nan"))
    bad["conv4.9.extra"] = torch.zeros(1)
    bad["conv1.0.conv1.weight"] = torch.zeros(16, 3, 3, 3, 8)
    torch.save(bad, ckpt)
    os.remove(out)
    rc, err = run([ckpt, out, "--model", kitti, "--prefix", ""])
    check("errors name each bad tensor", rc == 1 and all(n in err for n in (
        "missing tensor conv2.1.bn1.running_var", "conv3.1.conv1.bias holds NaN",
        "conv4.9.extra is not used", "conv1.0.conv1.weight has shape")))
    check("nothing written on error", not os.path.exists(out))

    un = backbone("spunet_indoor.json", gen)
    torch.save({"state_dict": {"module.backbone." + k: v for k, v in un.items()},
                "epoch": 3}, ckpt)
    rc, _ = run([ckpt, out, "--model", os.path.join(ROOT, "models", "spunet_indoor.json"),
                 "--dtype", "bf16"])
    got = load_file(out) if rc == 0 else {}
    check("Pointcept checkpoint: module.backbone. stripped, bf16", rc == 0 and
          got["final.bias"].dtype == torch.bfloat16 and len(got) == len(model_desc.params(
              json.load(open(os.path.join(ROOT, "models", "spunet_indoor.json"))))))
    passed = sum(results)
    print("%d passed, %d failed" % (passed, len(results) - passed))
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
