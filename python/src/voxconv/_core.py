"""Contexts, handles, errors and array conversion: what every module of the package shares.

Device follows data: host arrays (NumPy, CPU tensors) run on a CPU-backend context, CUDA
arrays on a CUDA-backend context of their device, on the caller's current stream. Nothing is
ever copied to another device. Each context is used under its own lock (the C library wants
one thread at a time per context); the default contexts live as long as the process.
"""
import ctypes
import sys
import threading

import numpy as np

from . import _dlpack
from . import _lib as L


# ---- errors ------------------------------------------------------------------------------
class VoxconvError(Exception):
    """A failure the C library reported; `.status` is its vc_status name."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class VoxconvValueError(VoxconvError, ValueError):
    pass


class VoxconvTypeError(VoxconvError, TypeError):
    pass


class VoxconvIOError(VoxconvError, OSError):
    pass


class VoxconvRuntimeError(VoxconvError, RuntimeError):
    pass


class VoxconvMemoryError(VoxconvError, MemoryError):
    pass


_ERROR_CLASSES = {L.ERR_OUT_OF_MEMORY: VoxconvMemoryError, L.ERR_IO: VoxconvIOError,
                  L.ERR_CUDA: VoxconvRuntimeError, L.ERR_NO_DEVICE: VoxconvRuntimeError,
                  L.ERR_INTERNAL: VoxconvRuntimeError}


def status_name(status):
    s = L.lib().vc_status_string(status)
    return s.decode() if s else str(status)


def raise_status(status, message):
    cls = _ERROR_CLASSES.get(status, VoxconvValueError)
    raise cls(f"{message} [{status_name(status)}]", status_name(status))


# ---- contexts ----------------------------------------------------------------------------
class Context:
    """A vc_context of one backend and device, with the lock its calls take."""

    def __init__(self, backend, device=0):
        lib = L.lib()
        desc = L.ContextDesc(ctypes.sizeof(L.ContextDesc), backend, device, None, 0, None)
        ptr = ctypes.c_void_p()
        s = lib.vc_context_create(ctypes.byref(desc), ctypes.byref(ptr))
        if s != L.OK:
            msg = lib.vc_context_last_error(None) or b""
            raise_status(s, f"voxconv: cannot create a context: {msg.decode()}")
        self.ptr = ptr.value
        self.backend = backend
        self.device = device
        self.lock = threading.RLock()
        self.lib = lib

    @property
    def memory(self):
        return L.MEMORY_DEVICE if self.backend == L.BACKEND_CUDA else L.MEMORY_HOST

    @property
    def dl_device(self):
        if self.backend == L.BACKEND_CUDA:
            return (_dlpack.KDL_CUDA, self.device)
        return (_dlpack.KDL_CPU, 0)

    def call(self, name, *args):
        """Calls vc_<name>(ctx, *args) under the lock; raises with the library's message."""
        self.call_on(name, self.ptr, *args)

    def call_on(self, name, first, *args):
        """Calls vc_<name>(first, *args) of a handle on this context (a net), likewise."""
        fn = getattr(self.lib, name)
        if fn is None:
            raise VoxconvRuntimeError(f"voxconv: this libvoxconv has no {name} (older build)")
        with self.lock:
            s = fn(first, *args)
            if s != L.OK:
                msg = (self.lib.vc_context_last_error(self.ptr) or b"").decode()
                raise_status(s, msg or f"{name} failed")

    def plain(self, name, *args):
        """Calls a handle function (no context argument) under the lock."""
        with self.lock:
            s = getattr(self.lib, name)(*args)
        if s != L.OK:
            raise_status(s, f"{name} failed")

    def set_stream(self, stream):
        if self.backend == L.BACKEND_CUDA:
            self.call("vc_context_set_stream", ctypes.c_void_p(stream or None))

    def synchronize(self):
        self.call("vc_context_synchronize")


_CONTEXTS = {}
_CONTEXTS_LOCK = threading.Lock()


def context(kind="cpu", device=0):
    """The process's default context for 'cpu' or ('cuda', device)."""
    key = (kind, device)
    with _CONTEXTS_LOCK:
        ctx = _CONTEXTS.get(key)
        if ctx is None:
            backend = L.BACKEND_CUDA if kind == "cuda" else L.BACKEND_CPU
            ctx = Context(backend, device)
            _CONTEXTS[key] = ctx
        return ctx


class Handle:
    """Owns one reference to a voxconv handle (tensor, coords, kmap, net); destroys it, under
    its context's lock, when the last Python reference goes."""

    __slots__ = ("ctx", "ptr", "kind", "keep", "__weakref__")
    _DESTROY = {"tensor": "vc_tensor_destroy", "coords": "vc_coords_destroy",
                "kmap": "vc_kmap_destroy", "net": "vc_net_destroy"}

    def __init__(self, ctx, ptr, kind, keep=None):
        self.ctx, self.ptr, self.kind, self.keep = ctx, ptr, kind, keep

    def release(self):
        ptr, self.ptr = self.ptr, None
        if ptr:
            try:
                with self.ctx.lock:
                    getattr(self.ctx.lib, self._DESTROY[self.kind])(ptr)
            except Exception:  # interpreter shutdown
                pass

    def __del__(self):
        self.release()


# ---- frameworks ----------------------------------------------------------------------------
def torch_module():
    """torch if the caller imported it (the package never imports it on its own)."""
    return sys.modules.get("torch")


def is_torch(x):
    t = torch_module()
    return t is not None and isinstance(x, t.Tensor)


def current_stream(device):
    """The caller's current CUDA stream on `device`: PyTorch's when torch is imported, else
    CuPy's, else the legacy default stream (0)."""
    t = torch_module()
    if t is not None:
        return t.cuda.current_stream(device).cuda_stream
    cp = sys.modules.get("cupy")
    if cp is not None:
        with cp.cuda.Device(device):
            return cp.cuda.get_current_stream().ptr
    return 0


_DTYPES = {"float32": L.DTYPE_FP32, "float16": L.DTYPE_FP16, "bfloat16": L.DTYPE_BF16,
           "int32": L.DTYPE_INT32}


def view(x, what, stream=None):
    """A zero-copy View of an array-like (anything with __dlpack__; lists and other host
    sequences go through numpy.asarray). `what` names it in errors."""
    if is_torch(x):
        if x.requires_grad:
            t = torch_module()
            if t.is_grad_enabled():
                raise RuntimeError(f"voxconv: {what} requires grad and autograd is on: "
                                   f"voxconv has no backward pass yet; run under "
                                   f"torch.no_grad() or torch.inference_mode()")
            x = x.detach()
    elif not hasattr(x, "__dlpack__"):
        if x is None:
            raise TypeError(f"voxconv: {what} is None")
        x = np.asarray(x)
    dev = x.__dlpack_device__()
    dev = (int(dev[0]), int(dev[1]))
    try:
        if dev[0] in (_dlpack.KDL_CUDA, _dlpack.KDL_CUDA_MANAGED):
            s = stream if stream is not None else current_stream(dev[1])
            cap = x.__dlpack__(stream=s if s else 1)
        else:
            cap = x.__dlpack__()
    except BufferError:
        if isinstance(x, np.ndarray):  # read-only NumPy arrays: DLPack 0.x cannot flag them
            return _numpy_view(x)
        raise
    except TypeError:
        if isinstance(x, np.ndarray):
            return _numpy_view(x)
        raise
    return _dlpack.view_capsule(cap, x)


def _numpy_view(a):
    ai = a.__array_interface__
    strides = ai.get("strides")
    contig = strides is None or a.flags.c_contiguous
    name = a.dtype.name if a.dtype.name in _DTYPES or a.dtype.name in (
        "int64", "float64") else str(a.dtype)
    return _dlpack.View(ai["data"][0], (_dlpack.KDL_CPU, 0), name, tuple(a.shape), contig, a)


def check(v, what, ndim=None, dtypes=None, cols=None):
    """Type and shape checks of a View: TypeError for a dtype, ValueError for shape/layout."""
    if dtypes is not None and v.dtype not in dtypes:
        raise TypeError(f"voxconv: {what} must be {' or '.join(dtypes)}, not {v.dtype}"
                        + (" (cast with .int() / .astype(np.int32))"
                           if "int32" in dtypes and v.dtype.startswith("int") else ""))
    if ndim is not None and len(v.shape) != ndim:
        raise ValueError(f"voxconv: {what} must have {ndim} dimensions, has shape "
                         f"{list(v.shape)}")
    if cols is not None and v.shape[-1] != cols:
        raise ValueError(f"voxconv: {what} must have {cols} columns, has shape {list(v.shape)}")
    if not v.contiguous:
        raise ValueError(f"voxconv: {what} is not contiguous (row-major); pass "
                         f".contiguous() / np.ascontiguousarray(...) explicitly")
    return v


def context_for(views, names, stream=None):
    """The context of the device all views live on; ValueError when they are on two."""
    devs = {}
    for v, n in zip(views, names):
        if v is None:
            continue
        d = v.device
        if d[0] == _dlpack.KDL_CUDA_HOST:
            d = (_dlpack.KDL_CPU, 0)
        devs.setdefault(d, n)
    if len(devs) > 1:
        desc = ", ".join(f"{n} on {_dev_name(d)}" for d, n in devs.items())
        raise ValueError(f"voxconv: inputs are on different devices ({desc}); voxconv never "
                         f"copies between devices: move them to one device first")
    d = next(iter(devs)) if devs else (_dlpack.KDL_CPU, 0)
    if d[0] == _dlpack.KDL_CPU:
        return context("cpu")
    if d[0] != _dlpack.KDL_CUDA:
        raise ValueError(f"voxconv: arrays on {_dev_name(d)} are not supported (CPU or CUDA)")
    ctx = context("cuda", d[1])
    ctx.set_stream(stream if stream is not None else current_stream(d[1]))
    return ctx


def _dev_name(d):
    names = {_dlpack.KDL_CPU: "cpu", _dlpack.KDL_CUDA: "cuda", _dlpack.KDL_CUDA_HOST: "cpu",
             _dlpack.KDL_CUDA_MANAGED: "cuda_managed"}
    return f"{names.get(d[0], f'device type {d[0]}')}:{d[1]}"


def vc_dtype(name):
    return _DTYPES[name]


def dtype_name(code):
    return L.DTYPE_NAMES[code]


# ---- outputs -------------------------------------------------------------------------------
def to_framework(exported, like):
    """An array of the caller's framework ('torch', 'cupy' or 'numpy') over an Exported (no
    copy: the array owns the exported buffer)."""
    if like == "torch":
        return torch_module().from_dlpack(exported)
    if like == "cupy":
        return sys.modules["cupy"].from_dlpack(exported)
    return np.from_dlpack(exported)


def framework_of(x):
    """'torch' for torch tensors, 'cupy' for CuPy arrays, else 'numpy' (results of NumPy and
    of other host DLPack producers are NumPy arrays)."""
    if is_torch(x):
        return "torch"
    cp = sys.modules.get("cupy")
    if cp is not None and isinstance(x, cp.ndarray):
        return "cupy"
    return "numpy"
