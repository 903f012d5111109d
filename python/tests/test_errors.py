"""Bad input raises TypeError / ValueError with a message that says what is wrong (the library's
own message where the library found it); nothing crashes."""
import numpy as np
import pytest

import voxconv

SHAPE = (12, 14, 16)


@pytest.fixture
def case(sparse, rng):
    f, c = sparse
    return f, c, rng.standard_normal((8, 3, 3, 3, 4)).astype(np.float32)


def test_wrong_dtypes(case):
    f, c, w = case
    with pytest.raises(TypeError, match="coords must be int32, not int64.*astype"):
        voxconv.conv(f, c.astype(np.int64), w, SHAPE, batch_size=2)
    with pytest.raises(TypeError, match="features must be float32 or float16 or bfloat16, "
                                        "not float64"):
        voxconv.conv(f.astype(np.float64), c, w, SHAPE, batch_size=2)
    with pytest.raises(TypeError, match="weights must be"):
        voxconv.conv(f, c, w.astype(np.int32), SHAPE, batch_size=2)
    with pytest.raises(TypeError, match="bias must be float32"):
        voxconv.conv(f, c, w, SHAPE, batch_size=2, bias=np.zeros(8, np.float16))
    with pytest.raises(TypeError, match="points must be float32"):
        voxconv.voxelize(np.zeros((4, 4)), (1, 1, 1), (0, 0, 0, 4, 4, 4))


def test_wrong_shapes(case):
    f, c, w = case
    with pytest.raises(ValueError, match="coords must have 4 columns"):
        voxconv.conv(f, c[:, :3].copy(), w, SHAPE, batch_size=2)
    with pytest.raises(ValueError, match="features must have 2 dimensions"):
        voxconv.conv(f[:, 0].copy(), c, w, SHAPE, batch_size=2)
    with pytest.raises(ValueError, match="weights must have 5 dimensions"):
        voxconv.conv(f, c, w.reshape(8, 27, 4), SHAPE, batch_size=2)
    with pytest.raises(ValueError, match="one feature row per coordinate row"):
        voxconv.conv(f[:-1], c, w, SHAPE, batch_size=2)
    with pytest.raises(ValueError, match="bias has 3 values"):
        voxconv.conv(f, c, w, SHAPE, batch_size=2, bias=np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="spatial_shape must be"):
        voxconv.conv(f, c, w, (12, 14), batch_size=2)
    # the library's own check: the weights' C_in against the features' channels
    with pytest.raises(ValueError, match="VC_ERR_SHAPE_MISMATCH"):
        voxconv.conv(f, c, w[..., :3].copy(), SHAPE, batch_size=2)


def test_non_contiguous(case):
    f, c, w = case
    with pytest.raises(ValueError, match="features is not contiguous"):
        voxconv.conv(np.asfortranarray(f), c, w, SHAPE, batch_size=2)
    f8 = np.repeat(f, 2, axis=1)
    with pytest.raises(ValueError, match="features is not contiguous"):
        voxconv.conv(f8[:, ::2], c, w, SHAPE, batch_size=2)
    with pytest.raises(ValueError, match="weights is not contiguous"):
        voxconv.conv(f, c, np.ascontiguousarray(w.transpose(4, 1, 2, 3, 0)).transpose(
            4, 1, 2, 3, 0), SHAPE, batch_size=2)


def test_library_errors_carry_its_message(case):
    f, c, w = case
    dup = c.copy()
    dup[5] = dup[4]
    with pytest.raises(ValueError, match=r"hold the same coordinate.*VC_ERR_DUPLICATE") as e:
        voxconv.conv(f, dup, w, SHAPE, batch_size=2)
    assert e.value.status.startswith("VC_ERR_DUPLICATE")
    bad = c.copy()
    bad[3, 2] = SHAPE[1]
    with pytest.raises(ValueError, match=r"row 3 .* is outside .*VC_ERR_OUT_OF_RANGE"):
        voxconv.conv(f, bad, w, SHAPE, batch_size=2)
    with pytest.raises(ValueError, match="outside batch size 1"):
        voxconv.conv(f, c, w, SHAPE, batch_size=1)
    with pytest.raises(ValueError, match="VC_ERR_INVALID_ARGUMENT"):
        voxconv.conv(f, c, w[:, :2].copy(), SHAPE, batch_size=2)   # even subm kernel
    w2 = w.copy()
    w2[0, 0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        voxconv.conv(f, c, w2, SHAPE, batch_size=2)


def test_bad_options(case):
    f, c, w = case
    with pytest.raises(ValueError, match="type must be"):
        voxconv.conv(f, c, w, SHAPE, type="sub", batch_size=2)
    with pytest.raises(ValueError, match="stride must be >= 1"):
        voxconv.conv(f, c, w, SHAPE, type="strided", stride=0, batch_size=2)
    with pytest.raises(ValueError, match="activation must be"):
        voxconv.conv(f, c, w, SHAPE, activation="gelu", batch_size=2)
    with pytest.raises(ValueError, match="mode must be"):
        voxconv.pool(f, c, SHAPE, mode="min", batch_size=2)
    with pytest.raises(ValueError, match="layout must be"):
        voxconv.dense(f, c, SHAPE, batch_size=2, layout="nhwc")
    with pytest.raises(ValueError, match="reduce must be"):
        voxconv.voxelize(np.zeros((4, 3), np.float32), (1, 1, 1), (0, 0, 0, 4, 4, 4),
                         reduce="max")


def test_files(tmp_path):
    with pytest.raises(OSError, match="VC_ERR_IO"):
        voxconv.read(tmp_path / "missing.bin")
    p = tmp_path / "bad.vxt"
    p.write_bytes(b"VXT\0garbage")
    with pytest.raises(ValueError, match="VC_ERR_FORMAT"):
        voxconv.read(p)
    q = tmp_path / "odd.bin"
    q.write_bytes(b"\0" * 20)
    with pytest.raises(ValueError, match="VC_ERR_FORMAT"):
        voxconv.read(q)
