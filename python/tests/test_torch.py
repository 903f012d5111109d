"""PyTorch CPU tensors: the functional API, DLPack ownership, autograd refusal, and
voxconv.spconv's layers and OpenPCDet's backbones against the oracle-backed reference."""
import gc

import numpy as np
import pytest

import oracle
import voxconv
from conftest import random_sparse
from voxconv import _dlpack

SHAPE = (12, 14, 16)


def test_functional_on_tensors_equals_numpy(torch, rng):
    f, c = random_sparse(rng, shape=SHAPE, channels=4)
    w = rng.standard_normal((8, 3, 3, 3, 4)).astype(np.float32)
    for type_, kw in (("subm", {}), ("strided", {"stride": 2, "padding": 1})):
        a, ac = voxconv.conv(f, c, w, SHAPE, type=type_, batch_size=2, **kw)
        t, tc = voxconv.conv(torch.from_numpy(f), torch.from_numpy(c), torch.from_numpy(w),
                             SHAPE, type=type_, batch_size=2, **kw)
        assert isinstance(t, torch.Tensor) and t.dtype == torch.float32
        assert tc.dtype == torch.int32
        np.testing.assert_array_equal(t.numpy(), a)
        np.testing.assert_array_equal(tc.numpy(), ac)
    p, pc = voxconv.pool(torch.from_numpy(f), torch.from_numpy(c), SHAPE, batch_size=2)
    rp, rpc, _ = oracle.pool(f, c, SHAPE, 2, 2)
    np.testing.assert_allclose(p.numpy(), rp, rtol=1e-6)
    np.testing.assert_array_equal(pc.numpy(), rpc)
    d = voxconv.dense(torch.from_numpy(f), torch.from_numpy(c), SHAPE, batch_size=2)
    np.testing.assert_array_equal(d.numpy(), oracle.dense(f, c, SHAPE, 2))
    g = voxconv.global_pool(torch.from_numpy(f), torch.from_numpy(c), SHAPE, batch_size=2)
    assert isinstance(g, torch.Tensor) and g.shape == (2, 4)
    pts = torch.rand(500, 4)
    vf, vc, vs = voxconv.voxelize(pts, (0.25,) * 3, (0, 0, 0, 1, 1, 1))
    rf, rc, rs = oracle.voxelize(pts.numpy(), (0.25,) * 3, (0, 0, 0, 1, 1, 1))
    np.testing.assert_allclose(vf.numpy(), rf, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(vc.numpy(), rc)


def test_bf16(torch, rng):
    f, c = random_sparse(rng, shape=SHAPE, channels=4)
    w = (rng.standard_normal((8, 3, 3, 3, 4)) * 0.2).astype(np.float32)
    fb = torch.from_numpy(f).bfloat16()
    out, _ = voxconv.conv(fb, torch.from_numpy(c), torch.from_numpy(w).bfloat16(), SHAPE,
                          batch_size=2)
    assert out.dtype == torch.bfloat16
    ref, _, _ = oracle.conv(fb.float().numpy(), c, torch.from_numpy(w).bfloat16().float(),
                            SHAPE)
    np.testing.assert_allclose(out.float().numpy(), ref, rtol=2e-2, atol=5e-2)


def test_zero_copy_and_ownership(torch, rng):
    f, c = random_sparse(rng, shape=SHAPE, channels=4)
    tf, tc = torch.from_numpy(f), torch.from_numpy(c)
    w = torch.from_numpy(rng.standard_normal((8, 3, 3, 3, 4)).astype(np.float32))
    gc.collect()
    live = len(_dlpack._LIVE)
    out, oc = voxconv.conv(tf, tc, w, SHAPE, type="strided", stride=2, padding=1, batch_size=2)
    assert oc.data_ptr() != tc.data_ptr()
    keep = out.clone(), oc.clone()
    for _ in range(3):
        voxconv.conv(tf, tc, w, SHAPE, batch_size=2)
    assert torch.equal(out, keep[0]) and torch.equal(oc, keep[1])
    # a subm result lives on the caller's very coordinate tensor
    sf, sc = voxconv.conv(tf, tc, w, SHAPE, batch_size=2)
    assert sc is tc
    del out, oc, sf
    gc.collect()
    assert len(_dlpack._LIVE) == live
    # a non-contiguous tensor is refused, not copied
    with pytest.raises(ValueError, match="not contiguous"):
        voxconv.conv(tf.t().contiguous().t(), tc, w, SHAPE, batch_size=2)


def test_autograd_is_refused(torch, rng):
    f, c = random_sparse(rng, shape=SHAPE, channels=4)
    w = torch.from_numpy(rng.standard_normal((8, 3, 3, 3, 4)).astype(np.float32))
    tf = torch.from_numpy(f).requires_grad_()
    with pytest.raises(RuntimeError, match="no backward pass yet"):
        voxconv.conv(tf, torch.from_numpy(c), w, SHAPE, batch_size=2)
    with torch.no_grad():
        voxconv.conv(tf, torch.from_numpy(c), w, SHAPE, batch_size=2)


def test_tensor_errors(torch, rng):
    f, c = random_sparse(rng, shape=SHAPE, channels=4)
    w = torch.from_numpy(rng.standard_normal((8, 3, 3, 3, 4)).astype(np.float32))
    with pytest.raises(TypeError, match="coords must be int32, not int64"):
        voxconv.conv(torch.from_numpy(f), torch.from_numpy(c).long(), w, SHAPE, batch_size=2)
    with pytest.raises(TypeError, match="not float64"):
        voxconv.conv(torch.from_numpy(f).double(), torch.from_numpy(c), w, SHAPE, batch_size=2)
    meta = torch.empty(len(c), 4, device="meta")
    with pytest.raises((ValueError, TypeError, RuntimeError, BufferError)):
        voxconv.conv(meta, torch.from_numpy(c), w, SHAPE, batch_size=2)


# ---- voxconv.spconv ------------------------------------------------------------------------
def _randomize(torch, model, seed):
    """Deterministic weights and BatchNorm statistics (eval mode uses them)."""
    g = torch.Generator().manual_seed(seed)
    for name, p in model.state_dict().items():
        if p.dtype.is_floating_point:
            v = torch.rand(p.shape, generator=g) if "running_var" in name else \
                torch.randn(p.shape, generator=g) * (0.2 if p.dim() > 1 else 0.1)
            if "running_var" in name:
                v = v + 0.5
            p.copy_(v)
    return model.eval()


def _assert_same(torch, a, b, rtol=1e-3, atol=1e-3):
    assert list(a.spatial_shape) == list(b.spatial_shape)
    np.testing.assert_array_equal(a.indices.numpy(), b.indices.numpy())
    scale = max(1.0, float(b.features.abs().max()))
    np.testing.assert_allclose(a.features.double().numpy(), b.features.double().numpy(),
                               rtol=rtol, atol=atol * scale)


def test_spconv_layers_against_reference(torch, rng):
    import ref_spconv as R
    import voxconv.spconv as S
    f, c = random_sparse(rng, n=600, shape=(16, 16, 16), channels=4)

    def build(sp):
        return torch.nn.ModuleDict({
            "a": sp.SparseSequential(sp.SubMConv3d(4, 8, 3, padding=1, bias=False,
                                                   indice_key="s1"),
                                     torch.nn.BatchNorm1d(8), torch.nn.ReLU()),
            "down": sp.SparseConv3d(8, 16, 3, stride=2, padding=1, bias=True,
                                    indice_key="d1"),
            "b": sp.SubMConv3d(16, 16, (1, 3, 3), bias=True, dilation=(1, 2, 2)),
            "up": sp.SparseInverseConv3d(16, 8, 3, indice_key="d1", bias=False),
            "t": sp.SparseConvTranspose3d(8, 4, 2, stride=2, bias=True),
            "pool": sp.SparseMaxPool3d(3, stride=2, padding=1),
        })

    mv = _randomize(torch, build(S), 1)
    mr = build(R).eval()
    mr.load_state_dict(mv.state_dict())
    assert mv["down"].weight.shape == (16, 3, 3, 3, 8)  # spconv 2.x [out, kz, ky, kx, in]

    def run(m, sp):
        x = sp.SparseConvTensor(torch.from_numpy(f), torch.from_numpy(c), [16, 16, 16], 2)
        outs = [m["a"](x)]
        for k in ("down", "b", "up", "t", "pool"):
            outs.append(m[k](outs[-1]))
        return outs

    with torch.no_grad():
        ov, orf = run(mv, S), run(mr, R)
    for a, b in zip(ov, orf):
        _assert_same(torch, a, b)
    assert ov[3].indices is ov[0].indices  # the inverse conv's output is the input's set
    np.testing.assert_array_equal(ov[2].dense().numpy(), R.dense(ov[2]).numpy())
    d = ov[2].dense(channels_first=False)
    assert d.shape == (2, 8, 8, 8, 16)
    with pytest.raises(RuntimeError, match="backward is not available"):
        mv["b"](ov[1])


@pytest.mark.parametrize("name", ["VoxelBackBone8x", "VoxelResBackBone8x"])
def test_pcdet_backbone_against_reference(torch, scan, name):
    """OpenPCDet's backbones, only their import line changed, on a real scan: voxconv against
    the oracle-backed reference, every stage's coordinates and features."""
    import pcdet_backbones
    ref_mod = pcdet_backbones.load(
        "import ref_spconv as spconv; from ref_spconv import replace_feature")
    vc_mod = pcdet_backbones.load(pcdet_backbones.IMPORT, "pcdet_backbones_vc")
    pts = voxconv.read(scan)
    vs, rg = (0.05, 0.05, 0.1), (-28.8, -28.8, -3, 28.8, 28.8, 1)
    f, c, shape = voxconv.voxelize(torch.from_numpy(pts), vs, rg, max_voxels=40000)
    grid = np.array([shape[2], shape[1], shape[0]])
    mv = _randomize(torch, getattr(vc_mod, name)({}, 4, grid), 7)
    mr = getattr(ref_mod, name)({}, 4, grid).eval()
    assert type(mr.conv_input[0]).__module__ == "ref_spconv"
    assert type(mv.conv_input[0]).__module__ == "voxconv.spconv"
    mr.load_state_dict(mv.state_dict())
    with torch.no_grad():
        bv = mv({"voxel_features": f, "voxel_coords": c, "batch_size": 1})
        br = mr({"voxel_features": f, "voxel_coords": c, "batch_size": 1})
    for k in ("x_conv1", "x_conv2", "x_conv3", "x_conv4"):
        _assert_same(torch, bv["multi_scale_3d_features"][k], br["multi_scale_3d_features"][k])
    _assert_same(torch, bv["encoded_spconv_tensor"], br["encoded_spconv_tensor"])
    out = bv["encoded_spconv_tensor"]
    assert out.features.shape[1] == 128 and out.indices.shape[0] > 0
    dense = out.dense()
    n, ch, d, h, w = dense.shape
    bev = dense.view(n, ch * d, h, w)  # OpenPCDet's HeightCompression
    np.testing.assert_allclose(bev.numpy(), R_dense(br["encoded_spconv_tensor"]).reshape(
        bev.shape), rtol=1e-3, atol=1e-3 * max(1.0, float(out.features.abs().max())))


def R_dense(x):
    import ref_spconv
    return ref_spconv.dense(x).numpy()
