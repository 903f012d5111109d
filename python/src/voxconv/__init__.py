"""voxconv: sparse 3D convolution for point clouds, from Python.

A ctypes binding of libvoxconv (installed beside this file by `pip install ./python`): NumPy
arrays and any object with __dlpack__ (PyTorch, CuPy) go in without a copy, on their own device
and the caller's current CUDA stream; results come back in the caller's framework, owning their
memory. Modules: voxconv.functional (re-exported here), voxconv.spconv (a drop-in for
spconv.pytorch), voxconv.Net (model description + safetensors weights). docs/python.md.
"""
from ._core import (VoxconvError, VoxconvIOError, VoxconvMemoryError, VoxconvRuntimeError,
                    VoxconvTypeError, VoxconvValueError, context)
from .functional import conv, dense, global_pool, pool, read, save, voxelize
from .net import Net

__version__ = "0.1.0"


def library_version():
    """The version of the libvoxconv actually loaded."""
    from . import _lib
    return _lib.lib().vc_version().decode()


def cuda_available():
    """Whether this libvoxconv has a CUDA backend and a usable device."""
    from . import _core, _lib
    try:
        return _core.context("cuda", 0).backend == _lib.BACKEND_CUDA
    except VoxconvError:
        return False


__all__ = ["conv", "pool", "global_pool", "dense", "voxelize", "read", "save", "Net",
           "VoxconvError", "VoxconvValueError", "VoxconvTypeError", "VoxconvIOError",
           "VoxconvRuntimeError", "VoxconvMemoryError", "context", "library_version",
           "cuda_available"]
