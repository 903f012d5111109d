"""Fixtures of the Python suite: generated sparse tensors, the real scans of datasets/data and,
where it is installed, PyTorch. Random cases print their seed (VOXCONV_TEST_SEED overrides)."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import oracle  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DATA = os.path.join(ROOT, "datasets", "data")
SEED = int(os.environ.get("VOXCONV_TEST_SEED", "20261127"))


def pytest_report_header(config):
    import voxconv
    try:
        import torch
        t = f"torch {torch.__version__}"
    except ImportError:
        t = "torch not installed: the torch and spconv tests skip"
    return [f"voxconv {voxconv.library_version()} ({voxconv._lib.lib().path}); {t}; "
            f"seed {SEED} (VOXCONV_TEST_SEED)"]


@pytest.fixture
def rng():
    return np.random.default_rng(SEED)


def random_sparse(rng, n=400, shape=(12, 14, 16), channels=4, batch_size=2, dtype=np.float32):
    """n distinct coordinates (batch, z, y, x) sorted, and features."""
    total = batch_size * shape[0] * shape[1] * shape[2]
    keys = np.sort(rng.choice(total, size=min(n, total), replace=False))
    coords = oracle.unkey(keys, shape)
    feats = rng.standard_normal((len(keys), channels)).astype(dtype)
    return feats, coords


@pytest.fixture
def sparse(rng):
    return random_sparse(rng)


def scan_path(name):
    return os.path.join(DATA, name)


@pytest.fixture(params=["vlp16.bin", "octomap_scan.bin"])
def scan(request):
    path = scan_path(request.param)
    if not os.path.exists(path):
        msg = f"real scan {path} missing (run `bash datasets/fetch`)"
        if os.environ.get("VC_REQUIRE_DATA") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return path


@pytest.fixture
def torch():
    try:
        import torch as t
    except ImportError:
        pytest.skip("torch is not installed (run.sh installs it where that takes under "
                    "VOXCONV_TORCH_TIMEOUT seconds)")
    return t
