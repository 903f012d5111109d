"""Sparse tensors over voxconv handles: wrapping caller arrays without a copy, and exporting the
library's results as arrays that own their memory."""
import ctypes
import sys

import numpy as np

from . import _core as C
from . import _dlpack
from . import _lib as L

FEATURE_DTYPES = ("float32", "float16", "bfloat16")


def triple(v, what, minimum):
    """An int or a 3-sequence (z, y, x) as a tuple of 3 ints >= minimum."""
    if isinstance(v, (int, np.integer)):
        t = (int(v),) * 3
    else:
        t = tuple(int(a) for a in v)
        if len(t) != 3:
            raise ValueError(f"voxconv: {what} must be an int or 3 values (z, y, x), got {v!r}")
    if any(a < minimum for a in t):
        raise ValueError(f"voxconv: {what} must be >= {minimum}, got {v!r}")
    return t


class _Owner:
    """Holds one Handle; its context and raw pointer."""

    @property
    def ctx(self):
        return self.handle.ctx

    @property
    def ptr(self):
        return self.handle.ptr


class Coords(_Owner):
    """A vc_coords handle, with the array it was made from (kept alive and unchanged while the
    handle lives: the handle wraps it)."""

    def __init__(self, handle, spatial_shape, batch_size, array=None):
        self.handle = handle
        self.spatial_shape = tuple(int(s) for s in spatial_shape)
        self.batch_size = int(batch_size)
        self.array = array

    @staticmethod
    def wrap(ctx, view, array, spatial_shape, batch_size):
        shape = triple(spatial_shape, "spatial_shape", 1)
        batch_size = int(batch_size)
        out = ctypes.c_void_p()
        ctx.call("vc_coords_wrap", ctypes.c_void_p(view.ptr or None), view.shape[0], ctx.memory,
                 (ctypes.c_int32 * 3)(*shape), batch_size, ctypes.byref(out))
        return Coords(C.Handle(ctx, out.value, "coords", keep=view), shape, batch_size, array)

    @staticmethod
    def borrow(ctx, ptr):
        """A new reference to a set the library made (an output's coordinates)."""
        ctx.plain("vc_coords_retain", ctypes.c_void_p(ptr))
        info = L.CoordsInfo()
        ctx.plain("vc_coords_get_info", ctypes.c_void_p(ptr), ctypes.byref(info))
        return Coords(C.Handle(ctx, ptr, "coords"), tuple(info.spatial_shape), info.batch_size)

    def info(self):
        info = L.CoordsInfo()
        self.ctx.plain("vc_coords_get_info", ctypes.c_void_p(self.ptr), ctypes.byref(info))
        return info

    def to(self, like):
        """The rows as an int32 [N, 4] array of framework `like` (zero-copy; cached)."""
        if self.array is None or C.framework_of(self.array) != like:
            info = self.info()
            exp = _dlpack.Exported(info.data, "int32", (info.count, 4), self.ctx.dl_device,
                                   self.handle)
            self.array = export(self.ctx, exp, (info.count, 4), "int32", like)
        return self.array


def export(ctx, exp, shape, dtype, like):
    """An array of framework `like` over an Exported (no copy)."""
    if 0 in shape:
        return empty(ctx, shape, dtype, like)
    if like == "numpy" and ctx.backend == L.BACKEND_CUDA:
        raise TypeError("voxconv: device results need a framework with device arrays "
                        "(torch, cupy)")
    if like == "numpy" and dtype == "bfloat16":
        raise TypeError("voxconv: NumPy has no bfloat16; use fp32 / fp16 or torch tensors")
    return C.to_framework(exp, like)


def empty(ctx, shape, dtype, like):
    """A new array of framework `like` on the context's device."""
    if like == "torch":
        t = C.torch_module()
        dev = f"cuda:{ctx.device}" if ctx.backend == L.BACKEND_CUDA else "cpu"
        return t.empty(shape, dtype=getattr(t, dtype), device=dev)
    if like == "cupy":
        cp = sys.modules["cupy"]
        with cp.cuda.Device(ctx.device):
            return cp.empty(shape, dtype=dtype)
    if ctx.backend == L.BACKEND_CUDA:
        raise TypeError("voxconv: device results need a framework with device arrays "
                        "(torch, cupy)")
    return np.empty(shape, dtype=dtype)


def numel(a):
    return a.numel() if hasattr(a, "numel") else a.size


class Tensor(_Owner):
    """A vc_tensor handle (features on a Coords)."""

    def __init__(self, handle, coords):
        self.handle = handle
        self.coords = coords

    @staticmethod
    def wrap(ctx, view, coords):
        out = ctypes.c_void_p()
        ctx.call("vc_tensor_wrap", ctypes.c_void_p(coords.ptr), view.shape[1],
                 C.vc_dtype(view.dtype), ctypes.c_void_p(view.ptr or None), ctx.memory,
                 ctypes.byref(out))
        return Tensor(C.Handle(ctx, out.value, "tensor", keep=(view, coords.handle)), coords)

    @staticmethod
    def adopt(ctx, ptr, coords=None):
        """Takes ownership of a tensor the library made; its coords are `coords` when they are
        that very set, else a new reference to the tensor's set."""
        h = C.Handle(ctx, ptr, "tensor")
        info = L.TensorInfo()
        ctx.plain("vc_tensor_get_info", ctypes.c_void_p(ptr), ctypes.byref(info))
        if coords is None or coords.ptr != info.coords:
            coords = Coords.borrow(ctx, info.coords)
        return Tensor(h, coords)

    def info(self):
        info = L.TensorInfo()
        self.ctx.plain("vc_tensor_get_info", ctypes.c_void_p(self.ptr), ctypes.byref(info))
        return info

    def features(self, like):
        """The features as an [N, C] array of framework `like`, owning the tensor (no copy)."""
        info = self.info()
        dtype = C.dtype_name(info.dtype)
        shape = (info.count, info.channels)
        exp = _dlpack.Exported(info.data, dtype, shape, self.ctx.dl_device, self.handle)
        return export(self.ctx, exp, shape, dtype, like)


def views(features, coords, stream=None, feature_name="features", coords_name="coords"):
    """Checked views of a features / coords pair (N rows each) and their context."""
    fv = C.check(C.view(features, feature_name, stream), feature_name, ndim=2,
                 dtypes=FEATURE_DTYPES)
    cv = C.check(C.view(coords, coords_name, stream), coords_name, ndim=2, dtypes=("int32",),
                 cols=4)
    if fv.shape[0] != cv.shape[0]:
        raise ValueError(f"voxconv: {feature_name} has {fv.shape[0]} rows and {coords_name} "
                         f"{cv.shape[0]}: one feature row per coordinate row")
    ctx = C.context_for([fv, cv], [feature_name, coords_name], stream)
    return fv, cv, ctx


def sparse_input(features, coords, spatial_shape, batch_size, stream=None):
    """(Tensor, context, framework) for caller features and coords, wrapped without a copy."""
    fv, cv, ctx = views(features, coords, stream)
    cs = Coords.wrap(ctx, cv, coords, spatial_shape, batch_size)
    return Tensor.wrap(ctx, fv, cs), ctx, C.framework_of(features)
