"""Networks: a model description (JSON, docs/networks.md) plus safetensors weights, run frame
by frame through the C library's vc_net_* API."""
import ctypes
import os

import numpy as np

from . import _core as C
from . import _dlpack
from . import _lib as L
from ._sparse import Coords, empty, export, sparse_input

_KIND_SPARSE, _KIND_DENSE = 0, 1


class Net:
    """A network on one device.

    Net(model, weights=None, *, random_weights=None, device="cpu", dtype=None, algo=0):
    model: a path to the JSON description or its text (a str starting with "{"); weights: a
    safetensors path or bytes, or random_weights=SEED for deterministic random weights;
    device: "cpu" or "cuda[:N]"; dtype: "float32" / "float16" / "bfloat16" (default fp16 on CUDA,
    fp32 on the CPU).
    """

    def __init__(self, model, weights=None, *, random_weights=None, device="cpu", dtype=None,
                 algo=0):
        kind, _, idx = str(device).partition(":")
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"voxconv: device must be 'cpu' or 'cuda[:N]', not {device!r}")
        self.ctx = C.context(kind, int(idx or 0))
        if self.ctx.lib.vc_net_create is None:
            raise C.VoxconvRuntimeError("voxconv: this libvoxconv has no network API "
                                        "(vc_net_create): rebuild it from a newer checkout")
        d = L.net_desc()
        keep = []
        if isinstance(model, str) and model.lstrip().startswith("{"):
            d.model_json = model.encode()
        else:
            d.model_path = os.fsencode(model)
        if random_weights is not None:
            d.random_weights = 1
            d.seed = int(random_weights)
        elif isinstance(weights, (bytes, bytearray, memoryview)):
            buf = (ctypes.c_char * len(weights)).from_buffer_copy(bytes(weights))
            keep.append(buf)
            d.weights_data = ctypes.cast(buf, ctypes.c_void_p)
            d.weights_size = len(weights)
        elif weights is not None:
            d.weights_path = os.fsencode(weights)
        else:
            raise ValueError("voxconv: Net needs weights (a safetensors path or bytes) or "
                             "random_weights=SEED")
        d.dtype = C.vc_dtype(dtype) if dtype is not None else -1
        d.algo = int(algo)
        out = ctypes.c_void_p()
        self.ctx.call("vc_net_create", ctypes.byref(d), ctypes.byref(out))
        self.handle = C.Handle(self.ctx, out.value, "net")

    # ---- running -------------------------------------------------------------------------
    def run(self, features, coords, spatial_shape, batch_size=1, copy=True, stream=None):
        """Runs one frame of voxels (features [N, C_in], coords int32 [N, 4]); returns
        {output name: (features, coords) for a sparse output, an array for a dense one}."""
        t, ctx, like = sparse_input(features, coords, spatial_shape, batch_size, stream)
        self._same_device(ctx)
        ctx.call_on("vc_net_run", ctypes.c_void_p(self.handle.ptr), ctypes.c_void_p(t.ptr))
        return self.outputs(like, copy)

    def run_points(self, points, batch=None, copy=True, stream=None):
        """Voxelizes points (float32 [N, D]) per the description's "voxelize" block and runs."""
        pv = C.check(C.view(points, "points", stream), "points", ndim=2, dtypes=("float32",))
        bv = None
        if batch is not None:
            bv = C.check(C.view(batch, "batch", stream), "batch", ndim=1, dtypes=("int32",))
        ctx = C.context_for([pv, bv], ["points", "batch"], stream)
        self._same_device(ctx)
        p = L.Points(pv.ptr or None, pv.shape[0], pv.shape[1], bv.ptr if bv else None,
                     ctx.memory)
        ctx.call_on("vc_net_run_points", ctypes.c_void_p(self.handle.ptr), ctypes.byref(p))
        return self.outputs(C.framework_of(points), copy)

    __call__ = run

    def _same_device(self, ctx):
        if ctx is not self.ctx:
            raise ValueError(f"voxconv: the net lives on {self._dev(self.ctx)} and the input "
                             f"on {self._dev(ctx)}; voxconv never copies between devices")

    @staticmethod
    def _dev(ctx):
        return f"cuda:{ctx.device}" if ctx.backend == L.BACKEND_CUDA else "cpu"

    # ---- outputs -------------------------------------------------------------------------
    def _records(self, count_fn, get_fn, cls):
        """Every record of an indexed net query (outputs, steps) as ctypes structs."""
        net = ctypes.c_void_p(self.handle.ptr)
        n = ctypes.c_int32()
        self.ctx.call_on(count_fn, net, ctypes.byref(n))
        recs = [cls() for _ in range(n.value)]
        for i, r in enumerate(recs):
            self.ctx.call_on(get_fn, net, i, ctypes.byref(r))
        return recs

    def _outputs(self):
        return self._records("vc_net_output_count", "vc_net_get_output", L.NetOutput)

    def output_names(self):
        return [o.name.decode() for o in self._outputs()]

    def outputs(self, like="numpy", copy=True):
        """The last run's outputs. copy=False gives views valid only until the next run."""
        res = {}
        for i, o in enumerate(self._outputs()):
            name = o.name.decode()
            if o.kind == _KIND_SPARSE:
                res[name] = self._sparse(o, like, copy)
            else:
                res[name] = self._dense(i, o, like, copy)
        return res

    def _sparse(self, o, like, copy):
        info = L.TensorInfo()
        self.ctx.plain("vc_tensor_get_info", ctypes.c_void_p(o.tensor), ctypes.byref(info))
        coords = Coords.borrow(self.ctx, info.coords)  # refcounted: survives the next run
        dtype, shape = C.dtype_name(info.dtype), (info.count, info.channels)
        if not copy:
            return self._borrowed(info.data, dtype, shape, like), coords.to(like)
        feats = empty(self.ctx, shape, dtype, like)
        if info.count:
            self.ctx.call("vc_tensor_copy_out", ctypes.c_void_p(o.tensor),
                          ctypes.c_void_p(C.view(feats, "output").ptr), info.dtype,
                          self.ctx.memory)
        return feats, coords.to(like)

    def _dense(self, i, o, like, copy):
        dtype, shape = C.dtype_name(o.dtype), tuple(o.shape[k] for k in range(o.ndim))
        if not copy:
            return self._borrowed(o.data, dtype, shape, like)
        out = empty(self.ctx, shape, dtype, like)
        nbytes = int(np.prod(shape)) * np.dtype(dtype if dtype != "bfloat16" else "u2").itemsize
        if nbytes:
            self.ctx.call_on("vc_net_copy_output", ctypes.c_void_p(self.handle.ptr), i,
                             ctypes.c_void_p(C.view(out, "output").ptr), nbytes,
                             self.ctx.memory)
        return out

    def _borrowed(self, ptr, dtype, shape, like):
        """A view of the net's buffer (valid until the next run; keeps the net alive)."""
        exp = _dlpack.Exported(ptr, dtype, shape, self.ctx.dl_device, self.handle)
        return export(self.ctx, exp, shape, dtype, like)

    # ---- profiling -----------------------------------------------------------------------
    def set_profiling(self, on=True):
        self.ctx.call_on("vc_net_set_profiling", ctypes.c_void_p(self.handle.ptr),
                         1 if on else 0)

    def steps(self):
        """Per-step timings of the last profiled run: a list of dicts."""
        keys = [f for f, _ in L.NetStepInfo._fields_]
        return [{k: (v.decode() if isinstance(v, bytes) else v)
                 for k, v in ((k, getattr(st, k)) for k in keys)}
                for st in self._records("vc_net_step_count", "vc_net_get_step", L.NetStepInfo)]
