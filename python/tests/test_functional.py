"""voxconv's functional API on NumPy arrays, against the NumPy oracle (oracle.py) on generated
tensors and the real scans."""
import gc

import numpy as np
import pytest

import oracle
import voxconv
from conftest import random_sparse
from voxconv import _dlpack

SHAPE = (12, 14, 16)
CONV_CASES = [  # type, kernel, stride, padding, dilation
    ("subm", (3, 3, 3), 1, 0, 1),
    ("subm", (1, 3, 5), 1, 0, 1),
    ("subm", (3, 3, 3), 1, 0, 2),
    ("strided", (3, 3, 3), 2, 1, 1),
    ("strided", (3, 1, 1), (2, 1, 1), 0, 1),
    ("strided", (2, 2, 2), 2, 0, 1),
    ("downsample", (2, 2, 2), 2, 0, 1),
    ("downsample", (3, 3, 3), 2, 0, 1),
    ("transposed", (3, 3, 3), 2, 1, 1),
    ("transposed", (2, 2, 2), 2, 0, 1),
]


def _check(feats, coords, ref, ref_coords, rtol=1e-4, atol=1e-4):
    np.testing.assert_array_equal(coords, ref_coords)
    np.testing.assert_allclose(feats.astype(np.float64), ref, rtol=rtol, atol=atol)


@pytest.mark.parametrize("case", CONV_CASES, ids=lambda c: f"{c[0]}-k{c[1]}-s{c[2]}")
def test_conv_matches_oracle(rng, case):
    type_, kernel, stride, padding, dilation = case
    f, c = random_sparse(rng, shape=SHAPE, channels=5)
    w = rng.standard_normal((7,) + kernel + (5,)).astype(np.float32)
    out, oc = voxconv.conv(f, c, w, SHAPE, type=type_, stride=stride, padding=padding,
                           dilation=dilation, batch_size=2)
    ref, rc, _ = oracle.conv(f, c, w, SHAPE, type_, stride, padding, dilation)
    assert out.dtype == np.float32 and oc.dtype == np.int32 and out.shape == (len(rc), 7)
    _check(out, oc, ref, rc)


def test_subm_returns_the_input_coords(sparse, rng):
    f, c = sparse
    w = rng.standard_normal((3, 3, 3, 3, 4)).astype(np.float32)
    _, oc = voxconv.conv(f, c, w, SHAPE, batch_size=2)
    assert oc is c


def test_conv_bias_and_activations(sparse, rng):
    f, c = sparse
    w = rng.standard_normal((6, 3, 3, 3, 4)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    ref, _, _ = oracle.conv(f, c, w, SHAPE, bias=b)
    out, _ = voxconv.conv(f, c, w, SHAPE, batch_size=2, bias=b, activation="relu")
    np.testing.assert_allclose(out, np.maximum(ref, 0), rtol=1e-4, atol=1e-4)
    out, _ = voxconv.conv(f, c, w, SHAPE, batch_size=2, bias=b, activation="leaky_relu",
                          leaky_slope=0.2)
    np.testing.assert_allclose(out, np.where(ref > 0, ref, 0.2 * ref), rtol=1e-4, atol=1e-4)


def test_conv_fp16(sparse, rng):
    f, c = sparse
    w = (rng.standard_normal((8, 3, 3, 3, 4)) * 0.2).astype(np.float16)
    f16 = f.astype(np.float16)
    out, _ = voxconv.conv(f16, c, w, SHAPE, batch_size=2)
    ref, _, _ = oracle.conv(f16, c, w, SHAPE)
    assert out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=1e-2, atol=2e-2)
    out32, _ = voxconv.conv(f16, c, w, SHAPE, batch_size=2, out_dtype="float32")
    assert out32.dtype == np.float32
    np.testing.assert_allclose(out32, ref, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("kernel,stride,padding", [(2, 2, 0), (3, 2, 1), ((1, 2, 2), None, 0)])
def test_pool_matches_oracle(sparse, mode, kernel, stride, padding):
    f, c = sparse
    out, oc = voxconv.pool(f, c, SHAPE, kernel=kernel, stride=stride, padding=padding,
                           mode=mode, batch_size=2)
    ref, rc, _ = oracle.pool(f, c, SHAPE, kernel, kernel if stride is None else stride,
                             padding, mode=mode)
    _check(out, oc, ref, rc, 1e-5, 1e-5)


def test_global_pool(sparse):
    f, c = sparse
    g = voxconv.global_pool(f, c, SHAPE, mode="max", batch_size=3)  # batch 2 has no voxels
    assert g.shape == (3, 4) and g.dtype == np.float32
    for b in range(2):
        np.testing.assert_allclose(g[b], f[c[:, 0] == b].max(0))
    np.testing.assert_array_equal(g[2], 0)
    a = voxconv.global_pool(f, c, SHAPE, mode="avg", batch_size=2)
    np.testing.assert_allclose(a[1], f[c[:, 0] == 1].mean(0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("layout", ["bcdhw", "bev"])
def test_dense(sparse, layout):
    f, c = sparse
    d = voxconv.dense(f, c, SHAPE, batch_size=2, layout=layout)
    ref = oracle.dense(f, c, SHAPE, 2)
    if layout == "bev":
        ref = ref.reshape(2, -1, SHAPE[1], SHAPE[2])
    assert d.shape == ref.shape and d.dtype == np.float32
    np.testing.assert_array_equal(d, ref)
    d16 = voxconv.dense(f, c, SHAPE, batch_size=2, layout=layout, dtype="float16")
    np.testing.assert_array_equal(d16, ref.astype(np.float16))


@pytest.mark.parametrize("reduce", ["mean", "first", "count"])
def test_voxelize_matches_oracle(rng, reduce):
    pts = rng.uniform(-1, 5, (3000, 4)).astype(np.float32)
    vs, rg = (0.25, 0.25, 0.5), (0, 0, 0, 4, 4, 4)
    f, c, shape, st = voxconv.voxelize(pts, vs, rg, reduce=reduce, stats=True)
    rf, rc, rs = oracle.voxelize(pts, vs, rg, reduce)
    assert shape == rs
    _check(f, c, rf, rc, 1e-5, 1e-5)
    assert st["points_in"] == 3000 and st["voxels_kept"] == len(rc)
    assert st["points_used"] + st["points_out_of_range"] == 3000


def test_voxelize_batch_and_cap(rng):
    pts = rng.uniform(0, 2, (500, 3)).astype(np.float32)
    batch = (np.arange(500) % 2).astype(np.int32)
    f, c, shape = voxconv.voxelize(pts, (0.5,) * 3, (0, 0, 0, 2, 2, 2), batch=batch)
    assert set(np.unique(c[:, 0])) == {0, 1} and shape == (4, 4, 4)
    f, c, _ = voxconv.voxelize(pts, (0.1,) * 3, (0, 0, 0, 2, 2, 2), max_voxels=10)
    assert len(c) == 10


def test_read_save_roundtrip(tmp_path, sparse):
    f, c = sparse
    p = tmp_path / "t.vxt"
    voxconv.save(p, f, c, SHAPE, batch_size=2)
    rf, rc, shape, bs = voxconv.read(p)
    np.testing.assert_array_equal(rf, f)
    np.testing.assert_array_equal(rc, c)
    assert shape == SHAPE and bs == 2
    pts = np.arange(40, dtype=np.float32).reshape(10, 4)
    voxconv.save(tmp_path / "p.bin", pts)
    np.testing.assert_array_equal(voxconv.read(tmp_path / "p.bin"), pts)
    np.testing.assert_array_equal(voxconv.read(tmp_path / "p.bin", use_dim=[1, 0, 3]),
                                  pts[:, [1, 0, 3]])
    np.testing.assert_array_equal(voxconv.read(tmp_path / "p.bin", load_dim=5, use_dim=3),
                                  pts.reshape(8, 5)[:, :3])


def test_real_scan_pipeline(scan, rng):
    """Read, voxelize, subm + strided + subm conv, pool on a real scan, against the oracle."""
    pts = voxconv.read(scan)
    np.testing.assert_array_equal(pts, np.fromfile(scan, np.float32).reshape(-1, 4))
    vs, rg = (0.1, 0.1, 0.2), (-20, -20, -3, 20, 20, 5)
    f, c, shape = voxconv.voxelize(pts, vs, rg)
    rf, rc, rs = oracle.voxelize(pts, vs, rg)
    _check(f, c, rf, rc, 1e-5, 1e-4)
    assert len(c) > 1000, "the scan should give a real workload"
    w1 = (rng.standard_normal((16, 3, 3, 3, 4)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((32, 3, 3, 3, 16)) * 0.1).astype(np.float32)
    x, xc = voxconv.conv(f, c, w1, shape, activation="relu")
    y, yc = voxconv.conv(x, xc, w2, shape, type="strided", stride=2, padding=1)
    r1, _, _ = oracle.conv(f, c, w1, shape)
    r1 = np.maximum(r1, 0)
    r2, r2c, r2s = oracle.conv(r1.astype(np.float32), c, w2, shape, "strided", 2, 1)
    _check(x, xc, r1, c, 1e-4, 1e-4)
    _check(y, yc, r2, r2c, 1e-4, 1e-3)
    p, pc = voxconv.pool(y, yc, r2s, kernel=2, mode="max")
    rp, rpc, _ = oracle.pool(r2, r2c, r2s, 2, 2)
    _check(p, pc, rp, rpc, 1e-4, 1e-3)


def test_results_own_their_memory(sparse, rng):
    """Results stay valid after every other object is gone; nothing stays exported after."""
    f, c = sparse
    gc.collect()
    live = len(_dlpack._LIVE)
    w = rng.standard_normal((8, 3, 3, 3, 4)).astype(np.float32)
    out, oc = voxconv.conv(f, c, w, SHAPE, type="strided", stride=2, padding=1, batch_size=2)
    ref = out.copy(), oc.copy()
    del w
    gc.collect()
    for _ in range(3):  # churn the allocator
        voxconv.conv(f, c, rng.standard_normal((8, 3, 3, 3, 4)).astype(np.float32), SHAPE,
                     batch_size=2)
    np.testing.assert_array_equal(out, ref[0])
    np.testing.assert_array_equal(oc, ref[1])
    assert not out.flags.owndata  # a view of the library's buffer, not a copy
    del out, oc
    gc.collect()
    assert len(_dlpack._LIVE) == live


def test_readonly_input(sparse, rng):
    f, c = sparse
    w = rng.standard_normal((2, 1, 1, 1, 4)).astype(np.float32)
    fr, cr = f.copy(), c.copy()
    fr.flags.writeable = False
    cr.flags.writeable = False
    a, _ = voxconv.conv(fr, cr, w, SHAPE, batch_size=2)
    b, _ = voxconv.conv(f, c, w, SHAPE, batch_size=2)
    np.testing.assert_array_equal(a, b)


def test_threads_share_the_package(sparse, rng):
    """Calls from several threads on one default context serialise on its lock."""
    import threading
    f, c = sparse
    ws = [rng.standard_normal((8, 3, 3, 3, 4)).astype(np.float32) for _ in range(4)]
    want = [voxconv.conv(f, c, w, SHAPE, type="strided", stride=2, batch_size=2)[0] for w in ws]
    got, errors = [None] * 4, []

    def work(i):
        try:
            for _ in range(5):
                got[i] = voxconv.conv(f, c, ws[i], SHAPE, type="strided", stride=2,
                                      batch_size=2)[0]
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


class _Producer:
    """A DLPack producer that is not NumPy: forwards to an array it hides."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None, **kw):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_any_dlpack_producer(sparse, rng):
    f, c = sparse
    w = rng.standard_normal((8, 3, 3, 3, 4)).astype(np.float32)
    a, ac = voxconv.conv(_Producer(f), _Producer(c), _Producer(w), SHAPE, type="strided",
                         stride=2, batch_size=2)
    b, bc = voxconv.conv(f, c, w, SHAPE, type="strided", stride=2, batch_size=2)
    assert isinstance(a, np.ndarray)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ac, bc)
