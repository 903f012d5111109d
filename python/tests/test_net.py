"""voxconv.Net: the shipped OpenPCDet model descriptions with safetensors weights written from
the voxconv.spconv backbones' state_dicts, against those backbones (layer by layer in PyTorch,
BatchNorm unfolded) on the real scans; random weights, points, profiling, errors."""
import json
import os
import struct

import numpy as np
import pytest

import voxconv
from conftest import ROOT

MODELS = os.path.join(ROOT, "models")
KITTI = {"voxel_size": (0.05, 0.05, 0.1), "range": (0, -40, -3, 70.4, 40, 1)}


def _need_net():
    if voxconv._lib.lib().vc_net_create is None:
        pytest.skip("this libvoxconv has no network API (vc_net_create)")


def safetensors_bytes(tensors):
    """A safetensors file (8-byte LE header size, JSON header, raw LE data) of fp32 arrays."""
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, np.float32)
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [off, off + a.nbytes]}
        blobs.append(a.tobytes())
        off += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def test_random_weights_and_points(scan):
    _need_net()
    net = voxconv.Net(os.path.join(MODELS, "voxel_backbone8x_kitti.json"), random_weights=3)
    names = net.output_names()
    assert names[0] == "encoded_spconv_tensor" and "spatial_features" in names
    pts = voxconv.read(scan)
    out = net.run_points(pts)
    f, c = out["encoded_spconv_tensor"]
    assert f.shape[1] == 128 and c.shape == (f.shape[0], 4) and c.dtype == np.int32
    assert out["spatial_features"].shape == (1, 256, 200, 176)
    # the same frame voxelized here and run as voxels gives the same outputs
    vf, vc, _ = voxconv.voxelize(pts, KITTI["voxel_size"], KITTI["range"], max_voxels=40000)
    again = net.run(vf, vc, (41, 1600, 1408))
    np.testing.assert_array_equal(again["encoded_spconv_tensor"][0], f)
    np.testing.assert_array_equal(again["spatial_features"], out["spatial_features"])
    # copies survive the next run; copy=False views are the net's own buffers
    view = net.run(vf, vc, (41, 1600, 1408), copy=False)["encoded_spconv_tensor"][0]
    assert not view.flags.owndata
    np.testing.assert_array_equal(view, f)
    net.run(vf[:100].copy(), vc[:100].copy(), (41, 1600, 1408))
    np.testing.assert_array_equal(again["encoded_spconv_tensor"][0], f)
    net.set_profiling(True)
    net.run(vf, vc, (41, 1600, 1408))
    steps = net.steps()
    assert steps and steps[0]["voxels_in"] == len(vc) and all(s["ms"] >= 0 for s in steps)


def test_net_errors(tmp_path):
    _need_net()
    with pytest.raises(ValueError, match="version"):
        voxconv.Net('{"format": "voxconv-model"}', random_weights=1)
    with pytest.raises(ValueError, match="weights"):
        voxconv.Net(os.path.join(MODELS, "voxel_backbone8x_kitti.json"))
    with pytest.raises(ValueError, match="conv_input.0.weight"):
        voxconv.Net(os.path.join(MODELS, "voxel_backbone8x_kitti.json"),
                    safetensors_bytes({"x": np.zeros(3)}))
    with pytest.raises(OSError):
        voxconv.Net(str(tmp_path / "missing.json"), random_weights=1)
    net = voxconv.Net(os.path.join(MODELS, "voxel_backbone8x_kitti.json"), random_weights=1)
    with pytest.raises(ValueError, match="VC_ERR"):  # 3 channels where the net takes 4
        net.run(np.zeros((1, 3), np.float32), np.zeros((1, 4), np.int32), (41, 1600, 1408))


@pytest.mark.parametrize("name,model", [
    ("VoxelBackBone8x", "voxel_backbone8x_kitti.json"),
    ("VoxelResBackBone8x", "voxel_res_backbone8x_kitti.json")])
def test_net_matches_spconv_layers(torch, scan, name, model):
    _need_net()
    import pcdet_backbones
    from test_torch import _assert_same, _randomize
    import voxconv.spconv as S
    pts = voxconv.read(scan)
    f, c, shape = voxconv.voxelize(torch.from_numpy(pts), KITTI["voxel_size"], KITTI["range"],
                                   max_voxels=40000)
    grid = np.array([shape[2], shape[1], shape[0]])
    m = _randomize(torch, getattr(pcdet_backbones, name)({}, 4, grid), 11)
    sd = {k: v.numpy() for k, v in m.state_dict().items() if "num_batches" not in k}
    net = voxconv.Net(os.path.join(MODELS, model), safetensors_bytes(sd))
    with torch.no_grad():
        ref = m({"voxel_features": f, "voxel_coords": c, "batch_size": 1})
    out = net.run(f, c, shape)
    assert isinstance(out["encoded_spconv_tensor"][0], torch.Tensor)
    feats = dict(ref["multi_scale_3d_features"], encoded_spconv_tensor=ref[
        "encoded_spconv_tensor"])
    for key, r in feats.items():
        nf, nc = out[key]
        got = S.SparseConvTensor(nf, nc, r.spatial_shape, 1)
        _assert_same(torch, got, r, rtol=1e-3, atol=1e-3)
    bev = out["spatial_features"]
    dense = ref["encoded_spconv_tensor"].dense()
    np.testing.assert_allclose(bev.numpy(), dense.reshape(bev.shape).numpy(), rtol=1e-3,
                               atol=1e-3 * max(1.0, float(dense.abs().max())))
