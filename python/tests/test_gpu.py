"""CUDA tensors (skipped without a CUDA build of libvoxconv and a GPU): results on the GPU equal
the CPU backend's, in place on the tensors' device and the current stream; mixed devices are
refused."""
import numpy as np
import pytest

import oracle
import voxconv
from conftest import random_sparse

SHAPE = (12, 14, 16)


@pytest.fixture
def cuda(torch):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch")
    if not voxconv.cuda_available():
        pytest.skip("this libvoxconv has no usable CUDA backend (built with VOXCONV_CUDA=OFF?)")
    return torch


@pytest.mark.parametrize("type_,kw", [("subm", {}), ("strided", {"stride": 2, "padding": 1}),
                                      ("transposed", {"stride": 2})])
def test_conv_gpu_equals_cpu(cuda, rng, type_, kw):
    torch = cuda
    f, c = random_sparse(rng, shape=SHAPE, channels=16)
    w = (rng.standard_normal((32, 3, 3, 3, 16)) * 0.1).astype(np.float32)
    cpu, cpuc = voxconv.conv(f, c, w, SHAPE, type=type_, batch_size=2, **kw)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        g, gc = voxconv.conv(torch.from_numpy(f).cuda(), torch.from_numpy(c).cuda(),
                             torch.from_numpy(w).cuda(), SHAPE, type=type_, batch_size=2, **kw)
        assert g.device.type == "cuda" and gc.device.type == "cuda"
        g, gc = g.cpu(), gc.cpu()  # ordered on s: no explicit sync needed
    np.testing.assert_array_equal(gc.numpy(), cpuc)
    np.testing.assert_allclose(g.numpy(), cpu, rtol=1e-4, atol=1e-4)
    h, _ = voxconv.conv(torch.from_numpy(f).cuda().half(), torch.from_numpy(c).cuda(),
                        torch.from_numpy(w).cuda().half(), SHAPE, type=type_, batch_size=2,
                        **kw)
    ref, _, _ = oracle.conv(f.astype(np.float16), c, w.astype(np.float16), SHAPE, type_,
                            **kw)
    np.testing.assert_allclose(h.float().cpu().numpy(), ref, rtol=1e-2, atol=2e-2)


def test_pool_dense_voxelize_gpu(cuda, rng):
    torch = cuda
    f, c = random_sparse(rng, shape=SHAPE, channels=8)
    tf, tc = torch.from_numpy(f).cuda(), torch.from_numpy(c).cuda()
    p, pc = voxconv.pool(tf, tc, SHAPE, batch_size=2)
    rp, rpc = voxconv.pool(f, c, SHAPE, batch_size=2)
    np.testing.assert_array_equal(p.cpu().numpy(), rp)
    np.testing.assert_array_equal(pc.cpu().numpy(), rpc)
    d = voxconv.dense(tf, tc, SHAPE, batch_size=2)
    np.testing.assert_array_equal(d.cpu().numpy(), oracle.dense(f, c, SHAPE, 2))
    pts = torch.rand(5000, 4, device="cuda")
    vf, vc, _ = voxconv.voxelize(pts, (0.1,) * 3, (0, 0, 0, 1, 1, 1))
    cf, cc, _ = voxconv.voxelize(pts.cpu(), (0.1,) * 3, (0, 0, 0, 1, 1, 1))
    np.testing.assert_array_equal(vc.cpu().numpy(), cc.numpy())
    np.testing.assert_allclose(vf.cpu().numpy(), cf.numpy(), rtol=1e-5, atol=1e-6)


def test_two_devices_refused(cuda, rng):
    torch = cuda
    f, c = random_sparse(rng, shape=SHAPE, channels=4)
    w = torch.from_numpy(rng.standard_normal((8, 3, 3, 3, 4)).astype(np.float32))
    with pytest.raises(ValueError, match="different devices.*never copies"):
        voxconv.conv(torch.from_numpy(f).cuda(), torch.from_numpy(c), w.cuda(), SHAPE,
                     batch_size=2)
    with pytest.raises(ValueError, match="different devices"):
        voxconv.conv(torch.from_numpy(f).cuda(), torch.from_numpy(c).cuda(), w, SHAPE,
                     batch_size=2)


def test_spconv_layers_gpu_equal_cpu(cuda, rng):
    torch = cuda
    import voxconv.spconv as S
    f, c = random_sparse(rng, n=800, shape=(16, 16, 16), channels=4)
    m = torch.nn.ModuleDict({"a": S.SubMConv3d(4, 16, 3, indice_key="s"),
                             "d": S.SparseConv3d(16, 32, 3, 2, 1, indice_key="d"),
                             "u": S.SparseInverseConv3d(32, 16, 3, indice_key="d")}).eval()

    def run(dev):
        x = S.SparseConvTensor(torch.from_numpy(f).to(dev), torch.from_numpy(c).to(dev),
                               [16, 16, 16], 2)
        with torch.no_grad():
            y = m["u"](m["d"](m["a"](x)))
        return y.features.cpu(), y.indices.cpu(), y.dense().cpu()

    cpu = run("cpu")
    m.cuda()
    gpu = run("cuda")
    np.testing.assert_array_equal(gpu[1].numpy(), cpu[1].numpy())
    np.testing.assert_allclose(gpu[0].numpy(), cpu[0].numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gpu[2].numpy(), cpu[2].numpy(), rtol=1e-4, atol=1e-4)
