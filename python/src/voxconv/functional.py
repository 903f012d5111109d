"""The functional API: one voxconv operation per call on NumPy arrays or tensors.

Coordinates are int32 [N, 4] rows (batch, z, y, x); spatial shapes (z, y, x); features [N, C]
fp32 / fp16 / bf16 (bf16: torch only); conv weights [C_out, kz, ky, kx, C_in] (spconv 2.x).
Results come back in the framework and on the device of the inputs and own their memory.
"""
import ctypes
import os

import numpy as np

from . import _core as C
from . import _lib as L
from ._sparse import FEATURE_DTYPES, Tensor, empty, numel, sparse_input, triple

_ACTS = {None: L.ACT_NONE, "none": L.ACT_NONE, "relu": L.ACT_RELU,
         "leaky_relu": L.ACT_LEAKY_RELU}


def _map_type(type):
    if type not in L.MAP_TYPES or type == "inverse":
        raise ValueError(f"voxconv: type must be subm, strided (or conv), downsample or "
                         f"transposed, not {type!r} (inverse convs: voxconv.spconv)")
    return L.MAP_TYPES[type]


def fill_map(m, type, kernel, stride, padding, dilation):
    m.type = type
    m.kernel[:] = triple(kernel, "kernel", 1)
    m.stride[:] = triple(stride, "stride", 1)
    m.padding[:] = triple(padding, "padding", 0)
    m.dilation[:] = triple(dilation, "dilation", 1)


def weight_views(ctx, weights, bias, stream):
    """Checked views of conv weights [C_out, kz, ky, kx, C_in] and an optional fp32 bias."""
    wv = C.check(C.view(weights, "weights", stream), "weights", ndim=5, dtypes=FEATURE_DTYPES)
    bv = None
    if bias is not None:
        bv = C.check(C.view(bias, "bias", stream), "bias", ndim=1, dtypes=("float32",))
        if bv.shape[0] != wv.shape[0]:
            raise ValueError(f"voxconv: bias has {bv.shape[0]} values, weights {wv.shape[0]} "
                             f"output channels")
    C.context_for([wv, bv, _Dev(ctx)], ["weights", "bias", "features"], stream)
    return wv, bv


class _Dev:
    """A stand-in view carrying only a context's device (for the two-devices check)."""

    def __init__(self, ctx):
        self.device = ctx.dl_device


def conv_desc(ctx, wv, bv, activation, leaky_slope, out_dtype, algo, allow_tf32):
    d = L.conv_desc()
    d.in_channels = wv.shape[4]
    d.out_channels = wv.shape[0]
    d.weights = wv.ptr
    d.weight_dtype = C.vc_dtype(wv.dtype)
    d.weight_memory = ctx.memory
    d.bias = bv.ptr if bv is not None else None
    if activation not in _ACTS:
        raise ValueError(f"voxconv: activation must be None, 'relu' or 'leaky_relu', "
                         f"not {activation!r}")
    d.activation = _ACTS[activation]
    d.leaky_slope = leaky_slope
    d.out_dtype = C.vc_dtype(out_dtype) if out_dtype is not None else -1
    d.algo = int(algo)
    d.allow_tf32 = 1 if allow_tf32 else 0
    return d


def conv(features, coords, weights, spatial_shape, type="subm", stride=1, padding=0,
         dilation=1, batch_size=1, bias=None, activation=None, leaky_slope=0.01,
         out_dtype=None, algo=0, allow_tf32=False, stream=None):
    """One sparse convolution; returns (features [M, C_out], coords [M, 4]).

    type: "subm" (outputs = inputs), "strided" / "conv" (spconv SparseConv3d), "downsample"
    (Minkowski), "transposed". The kernel size is the weights' (kz, ky, kx). A subm conv returns
    the very `coords` given."""
    t, ctx, like = sparse_input(features, coords, spatial_shape, batch_size, stream)
    wv, bv = weight_views(ctx, weights, bias, stream)
    d = conv_desc(ctx, wv, bv, activation, leaky_slope, out_dtype, algo, allow_tf32)
    fill_map(d.map, _map_type(type), wv.shape[1:4], stride, padding, dilation)
    out = ctypes.c_void_p()
    ctx.call("vc_conv_forward", ctypes.byref(d), ctypes.c_void_p(t.ptr), ctypes.byref(out))
    r = Tensor.adopt(ctx, out.value, t.coords)
    return r.features(like), r.coords.to(like)


def pool(features, coords, spatial_shape, kernel=2, stride=None, padding=0, dilation=1,
         type="strided", mode="max", batch_size=1, stream=None):
    """Max / avg pooling over a kernel map (stride defaults to the kernel); returns
    (features, coords)."""
    t, ctx, like = sparse_input(features, coords, spatial_shape, batch_size, stream)
    d = L.pool_desc()
    fill_map(d.map, _map_type(type), kernel, kernel if stride is None else stride, padding,
             dilation)
    d.mode = _mode(mode)
    out = ctypes.c_void_p()
    ctx.call("vc_pool_forward", ctypes.byref(d), ctypes.c_void_p(t.ptr), ctypes.byref(out))
    r = Tensor.adopt(ctx, out.value, t.coords)
    return r.features(like), r.coords.to(like)


def _mode(mode):
    if mode not in ("max", "avg"):
        raise ValueError(f"voxconv: mode must be 'max' or 'avg', not {mode!r}")
    return L.POOL_MAX if mode == "max" else L.POOL_AVG


def global_pool(features, coords, spatial_shape, mode="max", batch_size=1, stream=None):
    """Global max / avg pooling per batch item: a dense fp32 [batch_size, C] array."""
    t, ctx, like = sparse_input(features, coords, spatial_shape, batch_size, stream)
    info = t.info()
    out = empty(ctx, (int(batch_size), int(info.channels)), "float32", like)
    ov = C.view(out, "output")
    ctx.call("vc_global_pool", _mode(mode), ctypes.c_void_p(t.ptr), ctypes.c_void_p(ov.ptr),
             ctx.memory)
    return out


def dense(features, coords, spatial_shape, batch_size=1, layout="bcdhw", dtype=None,
          stream=None):
    """Sparse to dense: [B, C, D, H, W] ("bcdhw", spconv's .dense()) or [B, C*D, H, W] ("bev",
    OpenPCDet's HeightCompression), zeros where no voxel."""
    t, ctx, like = sparse_input(features, coords, spatial_shape, batch_size, stream)
    return dense_of(t, ctx, like, layout, dtype)


def dense_of(t, ctx, like, layout="bcdhw", dtype=None):
    info = t.info()
    dtype = dtype or C.dtype_name(info.dtype)
    if dtype not in FEATURE_DTYPES:
        raise TypeError(f"voxconv: dense dtype must be one of {FEATURE_DTYPES}, not {dtype}")
    d, h, w = t.coords.spatial_shape
    b, c = t.coords.batch_size, int(info.channels)
    shape = (b, c, d, h, w) if layout == "bcdhw" else (b, c * d, h, w)
    if layout not in ("bcdhw", "bev"):
        raise ValueError(f"voxconv: layout must be 'bcdhw' or 'bev', not {layout!r}")
    out = empty(ctx, shape, dtype, like)
    if numel(out) == 0:
        return out
    ov = C.view(out, "output")
    ctx.call("vc_tensor_to_dense", ctypes.c_void_p(t.ptr), ctypes.c_void_p(ov.ptr),
             int(np.prod(shape)), C.vc_dtype(dtype), ctx.memory)
    return out


def voxelize(points, voxel_size, range, reduce="mean", max_voxels=0, batch=None,
             batch_size=0, dtype="float32", nonfinite="skip", stats=False, stream=None):
    """Points [N, D>=3] float32 (x, y, z, ...) to voxels: (features, coords, spatial_shape)
    (+ a stats dict with stats=True). voxel_size (x, y, z); range (xmin, ymin, zmin, xmax,
    ymax, zmax); batch: optional int32 [N] batch index per point."""
    pv = C.check(C.view(points, "points", stream), "points", ndim=2, dtypes=("float32",))
    bv = None
    if batch is not None:
        bv = C.check(C.view(batch, "batch", stream), "batch", ndim=1, dtypes=("int32",))
        if bv.shape[0] != pv.shape[0]:
            raise ValueError(f"voxconv: batch has {bv.shape[0]} entries, points {pv.shape[0]}")
    ctx = C.context_for([pv, bv], ["points", "batch"], stream)
    d = L.voxelize_desc()
    d.voxel_size[:] = tuple(float(v) for v in voxel_size)
    rng = tuple(float(v) for v in range)
    if len(rng) != 6:
        raise ValueError("voxconv: range must be 6 values: xmin ymin zmin xmax ymax zmax")
    d.range[:] = rng
    if reduce not in L.REDUCE:
        raise ValueError(f"voxconv: reduce must be mean, first or count, not {reduce!r}")
    d.reduce = L.REDUCE[reduce]
    d.max_voxels = int(max_voxels)
    d.batch_size = int(batch_size)
    d.nonfinite = {"skip": 0, "error": 1}[nonfinite]
    d.dtype = C.vc_dtype(dtype)
    p = L.Points(pv.ptr or None, pv.shape[0], pv.shape[1], bv.ptr if bv else None, ctx.memory)
    st = L.VoxelizeStats()
    out = ctypes.c_void_p()
    ctx.call("vc_voxelize", ctypes.byref(d), ctypes.byref(p), ctypes.byref(out),
             ctypes.byref(st))
    like = C.framework_of(points)
    r = Tensor.adopt(ctx, out.value)
    res = (r.features(like), r.coords.to(like), r.coords.spatial_shape)
    if stats:
        res += ({n: getattr(st, n) for n, _ in L.VoxelizeStats._fields_},)
    return res


def read(path, load_dim=None, use_dim=None):
    """Reads a file. A .vxt gives (features, coords, spatial_shape, batch_size) as NumPy
    arrays; a point cloud (KITTI .bin, PCD, PLY, float32 .npy) a float32 [N, dim] array."""
    ctx = C.context("cpu")
    bpath = os.fsencode(path)
    if bpath.endswith(b".vxt"):
        out = ctypes.c_void_p()
        ctx.call("vc_tensor_load", bpath, ctypes.byref(out))
        r = Tensor.adopt(ctx, out.value)
        return (r.features("numpy"), r.coords.to("numpy"), r.coords.spatial_shape,
                r.coords.batch_size)
    opts = L.ReadOptions(ctypes.sizeof(L.ReadOptions), int(load_dim or 0), None, 0)
    keep = None
    if use_dim is not None:
        # An int n keeps the first n columns (mmdetection3d's use_dim=n).
        cols = list(range(use_dim)) if isinstance(use_dim, int) else list(use_dim)
        keep = (ctypes.c_int32 * len(cols))(*cols)
        opts.use_dim = ctypes.cast(keep, ctypes.c_void_p)
        opts.n_use_dim = len(cols)
    cloud = L.Cloud()
    ctx.call("vc_cloud_read_ex", bpath, L.FORMAT_AUTO, ctypes.byref(opts), ctypes.byref(cloud))
    try:
        n = cloud.count * cloud.dim
        arr = np.ctypeslib.as_array(cloud.data, (n,)).copy() if n else np.empty(0, np.float32)
        return arr.reshape(cloud.count, cloud.dim)
    finally:
        ctx.lib.vc_cloud_free(ctypes.byref(cloud))


def save(path, features, coords=None, spatial_shape=None, batch_size=1):
    """Writes a file atomically: features + coords + spatial_shape as a .vxt; or, without
    coords, a float32 [N, >=4] point array as a KITTI .bin."""
    ctx = C.context("cpu")
    bpath = os.fsencode(path)
    if coords is None:
        pv = C.check(C.view(features, "points"), "points", ndim=2, dtypes=("float32",))
        if C.context_for([pv], ["points"]) is not ctx:
            raise ValueError("voxconv: save writes host arrays; move the points to the CPU")
        cloud = L.Cloud(ctypes.cast(ctypes.c_void_p(pv.ptr), ctypes.POINTER(ctypes.c_float)),
                        pv.shape[0], pv.shape[1], None)
        ctx.call("vc_cloud_write_kitti", bpath, ctypes.byref(cloud))
        return
    if spatial_shape is None:
        raise ValueError("voxconv: save needs the spatial_shape of a sparse tensor")
    t, tctx, _ = sparse_input(features, coords, spatial_shape, batch_size)
    tctx.call("vc_tensor_save", ctypes.c_void_p(t.ptr), bpath)
