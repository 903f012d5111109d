"""Read and write voxconv's .vxt sparse tensors (docs/formats.md, version 1) with NumPy.

read(path) -> dict(coords=int32 [N, 4] (b, z, y, x), feats=[N, C] float32/float16 (bf16 is
returned as float32), shape=(z, y, x), batch=int, dtype='fp32'|'fp16'|'bf16');
write(path, coords, feats, shape, batch=1, dtype=None) writes one (dtype from feats: float32 ->
fp32, float16 -> fp16; 'bf16' rounds float32 to nearest even)."""
import os
import struct
import zlib

import numpy as np

MAGIC = b"VXCT"
HEADER = struct.Struct("<4sIIIqqiiiiQII")  # 64 bytes
DTYPES = {0: "fp32", 1: "fp16", 2: "bf16"}
CODES = {v: k for k, v in DTYPES.items()}


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 64 or data[:4] != MAGIC:
        raise ValueError("%s: not a .vxt file" % path)
    (_, version, hsize, dcode, n, c, z, y, x, batch, psize, pcrc, hcrc) = HEADER.unpack_from(data)
    if version != 1:
        raise ValueError("%s: .vxt version %d" % (path, version))
    if zlib.crc32(data[:60] + data[64:hsize]) != hcrc:
        raise ValueError("%s: header CRC mismatch" % path)
    payload = data[hsize:]
    if len(payload) != psize or zlib.crc32(payload) != pcrc:
        raise ValueError("%s: payload size or CRC mismatch" % path)
    coords = np.frombuffer(payload, dtype="<i4", count=4 * n).reshape(n, 4)
    dtype = DTYPES[dcode]
    raw = payload[16 * n:]
    if dtype == "fp32":
        feats = np.frombuffer(raw, dtype="<f4").reshape(n, c)
    elif dtype == "fp16":
        feats = np.frombuffer(raw, dtype="<f2").reshape(n, c)
    else:
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        feats = bits.view(np.float32).reshape(n, c)
    return {"coords": coords.copy(), "feats": feats.copy(), "shape": (z, y, x), "batch": batch,
            "dtype": dtype}


def write(path, coords, feats, shape, batch=1, dtype=None):
    coords = np.ascontiguousarray(coords, dtype="<i4")
    feats = np.asarray(feats)
    n, c = feats.shape
    assert coords.shape == (n, 4), coords.shape
    if dtype is None:
        dtype = "fp16" if feats.dtype == np.float16 else "fp32"
    if dtype == "fp32":
        fbytes = np.ascontiguousarray(feats, dtype="<f4").tobytes()
    elif dtype == "fp16":
        fbytes = np.ascontiguousarray(feats, dtype="<f2").tobytes()
    else:
        u = np.ascontiguousarray(feats, dtype="<f4").view(np.uint32)
        u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16  # round to nearest even
        fbytes = u.astype("<u2").tobytes()
    payload = coords.tobytes() + fbytes
    head = HEADER.pack(MAGIC, 1, 64, CODES[dtype], n, c, int(shape[0]), int(shape[1]),
                       int(shape[2]), int(batch), len(payload), zlib.crc32(payload), 0)
    head = head[:60] + struct.pack("<I", zlib.crc32(head[:60]))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head + payload)
    os.replace(tmp, path)
