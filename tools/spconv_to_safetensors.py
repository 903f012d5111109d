#!/usr/bin/env python3
"""Converts a spconv network checkpoint (.pth) into the safetensors file `voxconv run` loads.

  spconv_to_safetensors.py CKPT.pth OUT.safetensors [--prefix P] [--dtype fp32|fp16|bf16|keep]
                           [--model models/NAME.json] [--layout auto|spconv2|spconv1]
                           [--keep-counters] [--unsafe-load]

CKPT is a full OpenPCDet checkpoint ({'model_state': ...}, the backbone under 'backbone_3d.'),
a Pointcept one ({'state_dict': ...}, under 'backbone.' or 'module.backbone.'), or a plain
state_dict. --prefix keeps the tensors whose names start with P and strips it ('' keeps all as
they are); without it the first of 'backbone_3d.', 'module.backbone.', 'backbone.' that any name
starts with is used, else none. Floating tensors are written as --dtype (default fp32; 'keep'
keeps each one's). BatchNorm's num_batches_tracked counters are dropped unless --keep-counters
(voxconv ignores them). --model checks the result against a model description: every tensor it
needs present with its shape, nothing else, all finite; errors name the tensor. Conv weights
must be in spconv 2.x layout [out, kz, ky, kx, in]; spconv 1.x checkpoints (OpenPCDet models
trained before spconv 2) hold [kz, ky, kx, in, out]: --layout spconv1 transposes them, and
--layout auto (the default) does so for the 5-D tensors whose shape only fits that way when
--model is given. The .pth is read with torch.load(weights_only=True); --unsafe-load allows
arbitrary pickles (only for files you trust). Needs PyTorch and safetensors."""
import argparse
import json
import os
import sys

import torch
from safetensors.torch import save_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model_desc  # noqa: E402

PREFIXES = ("backbone_3d.", "module.backbone.", "backbone.")
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


def state_dict_of(ckpt):
    """The state_dict inside a checkpoint object."""
    for key in ("model_state", "state_dict", "model"):
        if isinstance(ckpt, dict) and isinstance(ckpt.get(key), dict):
            return ckpt[key]
    if isinstance(ckpt, dict) and all(torch.is_tensor(v) for v in ckpt.values()):
        return ckpt
    raise SystemExit("no state_dict found (looked for 'model_state', 'state_dict', 'model', or a "
                     "dict of tensors)")


def select(sd, prefix):
    if prefix is None:
        prefix = next((p for p in PREFIXES if any(k.startswith(p) for k in sd)), "")
    out = {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}
    if not out:
        raise SystemExit("no tensor name starts with %r" % prefix)
    return out, prefix


def convert(sd, dtype, keep_counters, layout, want):
    out, notes = {}, []
    for name, t in sd.items():
        if not torch.is_tensor(t):
            raise SystemExit("%s is not a tensor" % name)
        if name.endswith("num_batches_tracked") and not keep_counters:
            continue
        t = t.detach().cpu()
        if t.dim() == 5:
            spconv1_fits = want is not None and name in want and \
                tuple(t.permute(4, 0, 1, 2, 3).shape) == tuple(want[name]) and \
                tuple(t.shape) != tuple(want[name])
            if layout == "spconv1" or (layout == "auto" and spconv1_fits):
                t = t.permute(4, 0, 1, 2, 3)
                notes.append(name)
        if t.is_floating_point() and dtype != "keep":
            t = t.to(DTYPES[dtype])
        out[name] = t.contiguous()
    return out, notes


def check(tensors, want):
    """Errors, each naming its tensor."""
    errs = []
    for name, shape in want.items():
        if name not in tensors:
            errs.append("missing tensor %s %s" % (name, list(shape)))
        elif tuple(tensors[name].shape) != tuple(shape):
            errs.append("tensor %s has shape %s, the model needs %s" % (
                name, list(tensors[name].shape), list(shape)))
        elif tensors[name].is_floating_point() and not torch.isfinite(tensors[name]).all():
            errs.append("tensor %s holds NaN or infinite values" % name)
    for name in tensors:
        if name not in want and not name.endswith("num_batches_tracked"):
            errs.append("tensor %s is not used by the model" % name)
    return errs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("ckpt")
    ap.add_argument("out")
    ap.add_argument("--prefix")
    ap.add_argument("--dtype", choices=["fp32", "fp16", "bf16", "keep"], default="fp32")
    ap.add_argument("--model")
    ap.add_argument("--layout", choices=["auto", "spconv2", "spconv1"], default="auto")
    ap.add_argument("--keep-counters", action="store_true")
    ap.add_argument("--unsafe-load", action="store_true")
    a = ap.parse_args(argv)
    try:
        ckpt = torch.load(a.ckpt, map_location="cpu", weights_only=not a.unsafe_load)
    except Exception as e:  # noqa: BLE001  (torch raises several kinds)
        raise SystemExit("%s: cannot load: %s%s" % (a.ckpt, str(e).splitlines()[0],
                         "" if a.unsafe_load else " (a trusted file may need --unsafe-load)"))
    sd, prefix = select(state_dict_of(ckpt), a.prefix)
    want = None
    if a.model:
        with open(a.model) as f:
            want = dict(model_desc.params(json.load(f)))
    tensors, transposed = convert(sd, a.dtype, a.keep_counters, a.layout, want)
    if want is not None:
        errs = check(tensors, want)
        if errs:
            for e in errs:
                print("%s: %s" % (a.ckpt, e), file=sys.stderr)
            return 1
    save_file(tensors, a.out, metadata={"source": os.path.basename(a.ckpt), "prefix": prefix})
    print("%s: %d tensors (prefix %r stripped, %s%s) -> %s" % (
        a.ckpt, len(tensors), prefix, a.dtype,
        ", %d conv weights transposed from spconv 1.x" % len(transposed) if transposed else "",
        a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
