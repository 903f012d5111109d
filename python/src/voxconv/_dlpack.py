"""DLPack in and out over ctypes: the ABI's structs (DLPack 0.x, the unversioned
"dltensor" capsule every producer still offers), reading a producer's capsule without a copy and
making capsules whose deleter releases a voxconv handle.

Ownership: an imported capsule is kept (not renamed), so its producer's destructor frees it when
the last view of it goes; an exported capsule's DLManagedTensor lives in `_LIVE` until its
consumer calls the deleter (or the unconsumed capsule dies), which drops the Python owner, whose
finaliser destroys the voxconv handle under its context's lock.
"""
import ctypes
from ctypes import (CFUNCTYPE, POINTER, Structure, c_int32, c_int64, c_uint8, c_uint16,
                    c_uint64, c_void_p)

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13
_INT, _UINT, _FLOAT, _BFLOAT = 0, 1, 2, 4

# (type code, bits) <-> voxconv dtype name
_CODES = {(_FLOAT, 32): "float32", (_FLOAT, 16): "float16", (_BFLOAT, 16): "bfloat16",
          (_INT, 32): "int32", (_INT, 64): "int64", (_FLOAT, 64): "float64",
          (_INT, 8): "int8", (_UINT, 8): "uint8", (_INT, 16): "int16"}
_NAMES = {v: k for k, v in _CODES.items()}


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32),
                ("dtype", DLDataType), ("shape", POINTER(c_int64)),
                ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLManagedTensor(Structure):
    pass


_DELETER = CFUNCTYPE(None, POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p),
                            ("deleter", _DELETER)]

_api = ctypes.pythonapi
_api.PyCapsule_GetPointer.restype = c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [c_void_p, ctypes.c_char_p, c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [c_void_p, ctypes.c_char_p]
_CAPSULE_GET = ctypes.PYFUNCTYPE(c_void_p, c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_NAME = ctypes.create_string_buffer(b"dltensor")


class View:
    """A producer's array seen through its capsule: pointer, device, dtype, shape, contiguity."""

    __slots__ = ("ptr", "device", "dtype", "shape", "contiguous", "keep")

    def __init__(self, ptr, device, dtype, shape, contiguous, keep):
        self.ptr, self.device, self.dtype = ptr, device, dtype
        self.shape, self.contiguous, self.keep = shape, contiguous, keep


def _row_major(shape, strides):
    if strides is None:
        return True
    want = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != want:
            return False
        want *= n
    return True


def view_capsule(capsule, keep):
    """Reads a "dltensor" capsule (not consumed: `keep` holds it and its producer)."""
    addr = _api.PyCapsule_GetPointer(capsule, b"dltensor")
    m = DLManagedTensor.from_address(addr)
    t = m.dl_tensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    if t.dtype.lanes != 1:
        dtype = f"vector of {t.dtype.lanes} lanes"
    else:
        dtype = _CODES.get((t.dtype.code, t.dtype.bits),
                           f"type code {t.dtype.code} of {t.dtype.bits} bits")
    ptr = (t.data or 0) + t.byte_offset
    return View(ptr, (t.device.device_type, t.device.device_id), dtype, shape,
                _row_major(shape, strides), (capsule, keep))


# ---- export --------------------------------------------------------------------------------
_LIVE = {}   # address of a DLManagedTensor we made -> (struct, shape array, owner)


def _deleter(mptr):
    try:
        _LIVE.pop(ctypes.addressof(mptr.contents), None)
    except Exception:  # interpreter shutting down: nothing left to release
        pass


def _capsule_destructor(cap):
    # An unconsumed capsule still named "dltensor" owns its tensor: release it.
    try:
        if _api.PyCapsule_IsValid(cap, _NAME):
            addr = _CAPSULE_GET(cap, _NAME)
            _LIVE.pop(addr, None)
    except Exception:
        pass


_DELETER_FN = _DELETER(_deleter)
_DESTRUCTOR_FN = CFUNCTYPE(None, c_void_p)(_capsule_destructor)
# Callbacks a consumer may call at any later time: referenced forever, never freed.
for _cb in (_DELETER_FN, _DESTRUCTOR_FN):
    _api.Py_IncRef(ctypes.py_object(_cb))


class Exported:
    """An array voxconv owns, offered through __dlpack__ (np.from_dlpack / torch.from_dlpack)."""

    def __init__(self, ptr, dtype, shape, device, owner):
        self._ptr, self._dtype, self._shape = ptr, dtype, tuple(int(s) for s in shape)
        self._device, self._owner = device, owner

    def __dlpack_device__(self):
        return self._device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        # The data is ready on the context's stream, which is the consumer's current stream
        # (the package sets it before every call), so `stream` needs no event.
        if copy:
            raise BufferError("voxconv: copy=True is not supported; export without a copy")
        m = DLManagedTensor()
        nd = len(self._shape)
        shape = (c_int64 * max(nd, 1))(*self._shape)
        code, bits = _NAMES[self._dtype]
        m.dl_tensor.data = self._ptr
        m.dl_tensor.device = DLDevice(*self._device)
        m.dl_tensor.ndim = nd
        m.dl_tensor.dtype = DLDataType(code, bits, 1)
        m.dl_tensor.shape = ctypes.cast(shape, POINTER(c_int64))
        m.dl_tensor.strides = None
        m.dl_tensor.byte_offset = 0
        m.manager_ctx = None
        m.deleter = _DELETER_FN
        addr = ctypes.addressof(m)
        _LIVE[addr] = (m, shape, self._owner)
        return _api.PyCapsule_New(addr, _NAME, ctypes.cast(_DESTRUCTOR_FN, c_void_p).value)
