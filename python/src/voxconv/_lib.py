"""ctypes view of include/voxconv.h: the structs, enums and prototypes the package calls.

Every struct here mirrors the header field for field (C enums are int). The library is found as
libvoxconv.so beside this file (what `pip install ./python` installs), or at the path in the
VOXCONV_LIBRARY environment variable (a build tree's library, for development).
"""
import ctypes
import os
from ctypes import (POINTER, Structure, c_char_p, c_double, c_float, c_int, c_int32, c_int64,
                    c_size_t, c_uint32, c_uint64, c_void_p)

# ---- enums (values as in voxconv.h) ----------------------------------------------------------
OK = 0
ERR_INVALID_ARGUMENT, ERR_OUT_OF_MEMORY, ERR_OUT_OF_RANGE, ERR_SHAPE_MISMATCH = 1, 2, 3, 4
ERR_UNSUPPORTED, ERR_IO, ERR_FORMAT, ERR_CUDA, ERR_NO_DEVICE = 5, 6, 7, 8, 9
ERR_CAPACITY, ERR_LIMIT, ERR_DUPLICATE, ERR_INTERNAL = 10, 11, 12, 13

DTYPE_FP32, DTYPE_FP16, DTYPE_BF16, DTYPE_INT32 = 0, 1, 2, 3
MEMORY_HOST, MEMORY_DEVICE = 0, 1
BACKEND_AUTO, BACKEND_CPU, BACKEND_CUDA = 0, 1, 2
MAP_SUBM, MAP_STRIDED, MAP_DOWNSAMPLE, MAP_INVERSE, MAP_TRANSPOSED = 0, 1, 2, 3, 4
ACT_NONE, ACT_RELU, ACT_LEAKY_RELU = 0, 1, 2
ALGO_AUTO = 0
POOL_MAX, POOL_AVG = 0, 1
REDUCE = {"mean": 0, "first": 1, "count": 2}
FORMAT_AUTO = 0

MAP_TYPES = {"subm": MAP_SUBM, "strided": MAP_STRIDED, "conv": MAP_STRIDED,
             "downsample": MAP_DOWNSAMPLE, "inverse": MAP_INVERSE,
             "transposed": MAP_TRANSPOSED}
DTYPE_NAMES = {DTYPE_FP32: "float32", DTYPE_FP16: "float16", DTYPE_BF16: "bfloat16",
               DTYPE_INT32: "int32"}


class ContextDesc(Structure):
    _fields_ = [("struct_size", c_uint32), ("backend", c_int), ("device", c_int32),
                ("stream", c_void_p), ("num_threads", c_int32), ("allocator", c_void_p)]


class CoordsInfo(Structure):
    _fields_ = [("count", c_int64), ("spatial_shape", c_int32 * 3), ("batch_size", c_int32),
                ("memory", c_int), ("data", c_void_p)]


class TensorInfo(Structure):
    _fields_ = [("count", c_int64), ("channels", c_int64), ("dtype", c_int), ("memory", c_int),
                ("coords", c_void_p), ("data", c_void_p)]


class Points(Structure):
    _fields_ = [("data", c_void_p), ("count", c_int64), ("dim", c_int32), ("batch", c_void_p),
                ("memory", c_int)]


class VoxelizeDesc(Structure):
    _fields_ = [("struct_size", c_uint32), ("voxel_size", c_float * 3), ("range", c_float * 6),
                ("reduce", c_int), ("max_voxels", c_int64), ("batch_size", c_int32),
                ("nonfinite", c_int), ("dtype", c_int)]


class VoxelizeStats(Structure):
    _fields_ = [(n, c_int64) for n in ("points_in", "points_used", "points_out_of_range",
                                       "points_nonfinite", "voxels_total", "voxels_kept")]


class MapDesc(Structure):
    _fields_ = [("struct_size", c_uint32), ("type", c_int), ("kernel", c_int32 * 3),
                ("stride", c_int32 * 3), ("padding", c_int32 * 3), ("dilation", c_int32 * 3),
                ("inverse_of", c_void_p)]


class KmapInfo(Structure):
    _fields_ = [("type", c_int), ("kernel", c_int32 * 3), ("stride", c_int32 * 3),
                ("padding", c_int32 * 3), ("dilation", c_int32 * 3), ("volume", c_int32),
                ("in_count", c_int64), ("out_count", c_int64), ("pair_count", c_int64),
                ("mask_words", c_int32), ("memory", c_int), ("in_coords", c_void_p),
                ("out_coords", c_void_p)]


class ConvDesc(Structure):
    _fields_ = [("struct_size", c_uint32), ("map", MapDesc), ("kmap", c_void_p),
                ("in_channels", c_int64), ("out_channels", c_int64), ("weights", c_void_p),
                ("weight_dtype", c_int), ("weight_memory", c_int), ("bias", c_void_p),
                ("activation", c_int), ("leaky_slope", c_float), ("residual", c_void_p),
                ("out_dtype", c_int), ("algo", c_int), ("allow_tf32", c_int32),
                ("untuned", c_int32)]


class PoolDesc(Structure):
    _fields_ = [("struct_size", c_uint32), ("map", MapDesc), ("kmap", c_void_p),
                ("mode", c_int)]


class Cloud(Structure):
    _fields_ = [("data", POINTER(c_float)), ("count", c_int64), ("dim", c_int32),
                ("names", POINTER(c_char_p))]


class ReadOptions(Structure):
    _fields_ = [("struct_size", c_uint32), ("load_dim", c_int32), ("use_dim", c_void_p),
                ("n_use_dim", c_int32)]


class Array(Structure):
    _fields_ = [("data", c_void_p), ("dtype", c_int), ("ndim", c_int32),
                ("shape", c_int64 * 8)]


class NetDesc(Structure):
    _fields_ = [("struct_size", c_uint32), ("model_path", c_char_p), ("model_json", c_char_p),
                ("weights_path", c_char_p), ("weights_data", c_void_p),
                ("weights_size", c_size_t), ("random_weights", c_int32), ("seed", c_uint64),
                ("dtype", c_int), ("algo", c_int)]


class NetOutput(Structure):
    _fields_ = [("name", c_char_p), ("kind", c_int), ("tensor", c_void_p), ("data", c_void_p),
                ("dtype", c_int), ("ndim", c_int32), ("shape", c_int64 * 5)]


class NetStepInfo(Structure):
    _fields_ = [("name", c_char_p), ("op", c_char_p), ("voxels_in", c_int64),
                ("voxels_out", c_int64), ("pairs", c_int64), ("ms", c_double),
                ("map_ms", c_double)]


def _desc(cls, **fields):
    """A struct_size-versioned desc with the header's *_INIT defaults given as fields."""
    d = cls()
    d.struct_size = ctypes.sizeof(cls)
    for name, value in fields.items():
        setattr(d, name, value)
    return d


def map_desc():
    return _desc(MapDesc, type=MAP_SUBM, kernel=(c_int32 * 3)(3, 3, 3),
                 stride=(c_int32 * 3)(1, 1, 1), dilation=(c_int32 * 3)(1, 1, 1))


def conv_desc():
    return _desc(ConvDesc, map=map_desc(), weight_dtype=DTYPE_FP32, weight_memory=MEMORY_HOST,
                 leaky_slope=0.01, out_dtype=-1, algo=ALGO_AUTO)


def pool_desc():
    return _desc(PoolDesc, map=map_desc(), mode=POOL_MAX)


def voxelize_desc():
    return _desc(VoxelizeDesc, voxel_size=(c_float * 3)(0.1, 0.1, 0.1), reduce=REDUCE["mean"],
                 dtype=DTYPE_FP32)


def net_desc():
    return _desc(NetDesc, dtype=-1, algo=ALGO_AUTO)


_P = c_void_p
_PP = POINTER(c_void_p)
# name: argtypes (every function returns vc_status unless listed in _RESTYPES)
_PROTOTYPES = {
    "vc_version": [],
    "vc_status_string": [c_int],
    "vc_context_create": [POINTER(ContextDesc), _PP],
    "vc_context_destroy": [_P],
    "vc_context_backend": [_P, POINTER(c_int)],
    "vc_context_last_error": [_P],
    "vc_context_set_stream": [_P, _P],
    "vc_context_synchronize": [_P],
    "vc_coords_create": [_P, _P, c_int64, c_int, POINTER(c_int32), c_int32, _PP],
    "vc_coords_wrap": [_P, _P, c_int64, c_int, POINTER(c_int32), c_int32, _PP],
    "vc_coords_retain": [_P],
    "vc_coords_destroy": [_P],
    "vc_coords_get_info": [_P, POINTER(CoordsInfo)],
    "vc_coords_copy_out": [_P, _P, _P, c_int],
    "vc_tensor_create": [_P, _P, c_int64, c_int, _P, c_int, _PP],
    "vc_tensor_wrap": [_P, _P, c_int64, c_int, _P, c_int, _PP],
    "vc_tensor_destroy": [_P],
    "vc_tensor_get_info": [_P, POINTER(TensorInfo)],
    "vc_tensor_copy_out": [_P, _P, _P, c_int, c_int],
    "vc_tensor_cast": [_P, _P, c_int, _PP],
    "vc_voxelize": [_P, POINTER(VoxelizeDesc), POINTER(Points), _PP, POINTER(VoxelizeStats)],
    "vc_kmap_build": [_P, _P, POINTER(MapDesc), _PP],
    "vc_kmap_destroy": [_P],
    "vc_kmap_get_info": [_P, POINTER(KmapInfo)],
    "vc_conv_forward": [_P, POINTER(ConvDesc), _P, _PP],
    "vc_pool_forward": [_P, POINTER(PoolDesc), _P, _PP],
    "vc_global_pool": [_P, c_int, _P, _P, c_int],
    "vc_cloud_read_ex": [_P, c_char_p, c_int, POINTER(ReadOptions), POINTER(Cloud)],
    "vc_cloud_free": [POINTER(Cloud)],
    "vc_cloud_write_kitti": [_P, c_char_p, POINTER(Cloud)],
    "vc_npy_read": [_P, c_char_p, POINTER(Array)],
    "vc_npy_write": [_P, c_char_p, POINTER(Array)],
    "vc_array_free": [POINTER(Array)],
    "vc_tensor_save": [_P, _P, c_char_p],
    "vc_tensor_load": [_P, c_char_p, _PP],
    # Tensor operations and networks (net_spec.md): optional, bound when the library has them.
    "vc_tensor_to_dense": [_P, _P, _P, c_int64, c_int, c_int],
    "vc_tensor_affine": [_P, _P, _P, _P, c_int, c_int, c_float],
    "vc_net_create": [_P, POINTER(NetDesc), _PP],
    "vc_net_destroy": [_P],
    "vc_net_run": [_P, _P],
    "vc_net_run_points": [_P, POINTER(Points)],
    "vc_net_output_count": [_P, POINTER(c_int32)],
    "vc_net_get_output": [_P, c_int32, POINTER(NetOutput)],
    "vc_net_find_output": [_P, c_char_p, POINTER(c_int32)],
    "vc_net_copy_output": [_P, c_int32, _P, c_size_t, c_int],
    "vc_net_set_profiling": [_P, c_int32],
    "vc_net_step_count": [_P, POINTER(c_int32)],
    "vc_net_get_step": [_P, c_int32, POINTER(NetStepInfo)],
}
_RESTYPES = {"vc_version": c_char_p, "vc_status_string": c_char_p,
             "vc_context_last_error": c_char_p}


class _Lib:
    """The loaded library: each prototype above as an attribute, None when the library lacks it."""

    def __init__(self, path):
        self.path = path
        self.dll = ctypes.CDLL(path)
        for name, args in _PROTOTYPES.items():
            fn = getattr(self.dll, name, None)
            if fn is not None:
                fn.argtypes = args
                fn.restype = _RESTYPES.get(name, c_int)
            setattr(self, name, fn)


def _find():
    env = os.environ.get("VOXCONV_LIBRARY")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libvoxconv.so")


_lib = None


def lib():
    global _lib
    if _lib is None:
        path = _find()
        if not os.path.exists(path):
            raise ImportError(f"voxconv: the C library is not at {path}: install the package "
                              f"with `pip install ./python`, or set VOXCONV_LIBRARY to a built "
                              f"libvoxconv.so")
        _lib = _Lib(path)
    return _lib
