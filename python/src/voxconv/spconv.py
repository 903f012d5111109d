"""voxconv.spconv: a drop-in for spconv.pytorch (spconv 2.x) for inference.

`import voxconv.spconv as spconv` in place of `import spconv.pytorch as spconv`: the same classes,
constructor arguments, parameter names and shapes (weights [C_out, kz, ky, kx, C_in], bias
[C_out]), so a spconv model's state_dict loads unchanged. Indices are int32 (batch, z, y, x).
Every convolution and pooling runs in libvoxconv on the features' device and the current CUDA
stream; the layers between them (BatchNorm1d, ReLU, ...) stay PyTorch modules, applied to the
features as spconv's SparseSequential does. Backward is not implemented: a layer called with
autograd on and a tensor that requires grad raises RuntimeError.
"""
import ctypes

import torch
from torch import nn

from . import _core as C
from . import _lib as L
from . import functional as F
from ._sparse import Coords, Tensor, feature_view, triple, views

__all__ = ["SparseConvTensor", "SparseModule", "SparseSequential", "SparseConvolution",
           "SubMConv3d", "SparseConv3d", "SparseInverseConv3d", "SparseConvTranspose3d",
           "SparseMaxPool3d", "ToDense", "replace_feature"]


class _IndiceData:
    """What an indice_key names: the kernel map of a strided conv / pool and its input."""

    def __init__(self, kmap, in_coords, indices, spatial_shape, kernel_size):
        self.kmap, self.in_coords, self.indices = kmap, in_coords, indices
        self.spatial_shape, self.kernel_size = spatial_shape, kernel_size


class SparseConvTensor:
    """Features [N, C] on indices int32 [N, 4] (batch, z, y, x) in spatial_shape (z, y, x)."""

    def __init__(self, features, indices, spatial_shape, batch_size, grid=None,
                 voxel_num=None, indice_dict=None, benchmark=False):
        self._features = features
        self.indices = indices
        self.spatial_shape = [int(v) for v in spatial_shape]
        self.batch_size = int(batch_size)
        self.indice_dict = {} if indice_dict is None else indice_dict
        self.grid = grid
        self.voxel_num = voxel_num
        self.benchmark = benchmark
        self.benchmark_record = {}
        self.thrust_allocator = None
        self.int8_scale = None
        self._coords = None  # the voxconv coordinate set of `indices`, made on first use

    @property
    def features(self):
        return self._features

    @features.setter
    def features(self, value):
        self._features = value

    def replace_feature(self, feature):
        """A tensor with new features on the same indices (and the same voxconv set)."""
        new = SparseConvTensor(feature, self.indices, self.spatial_shape, self.batch_size,
                               self.grid, self.voxel_num, self.indice_dict, self.benchmark)
        new.benchmark_record = self.benchmark_record
        new._coords = self._coords
        return new

    def shadow_copy(self):
        return self.replace_feature(self._features)

    @property
    def spatial_size(self):
        n = 1
        for s in self.spatial_shape:
            n *= s
        return n

    def find_indice_pair(self, key):
        return self.indice_dict.get(key) if key is not None else None

    def vc_tensor(self):
        """The features and indices as a voxconv tensor (wrapped, no copy). The voxconv set
        of the indices is made once and kept through subm layers and replace_feature, so the
        kernel maps cached on it are shared (spconv's indice_key reuse)."""
        cs = self._coords
        if (cs is not None and cs.array is self.indices and cs.batch_size == self.batch_size
                and cs.spatial_shape == tuple(int(v) for v in self.spatial_shape)):
            fv = feature_view(self._features)
            ctx = C.context_for([fv], ["features"])
            if ctx is cs.ctx and fv.shape[0] == self.indices.shape[0]:
                return Tensor.wrap(ctx, fv, cs), ctx
        # first use, or something changed: the full checks (rows, devices) and a new set
        fv, cv, ctx = views(self._features, self.indices, feature_name="features",
                            coords_name="indices")
        cs = Coords.wrap(ctx, cv, self.indices, self.spatial_shape, self.batch_size)
        self._coords = cs
        return Tensor.wrap(ctx, fv, cs), ctx

    def dense(self, channels_first=True):
        """[B, C, D, H, W] (channels_first) or [B, D, H, W, C], zeros where no voxel."""
        t, ctx = self.vc_tensor()
        out = F.dense_of(t, ctx, "torch", "bcdhw")
        return out if channels_first else out.permute(0, 2, 3, 4, 1).contiguous()

    def __repr__(self):
        return (f"SparseConvTensor(voxels={self.indices.shape[0]}, "
                f"channels={self._features.shape[1]}, spatial_shape={self.spatial_shape}, "
                f"batch_size={self.batch_size})")


def replace_feature(out, new_features):
    """OpenPCDet's helper (pcdet.utils.spconv_utils.replace_feature)."""
    return out.replace_feature(new_features)


class SparseModule(nn.Module):
    """Base class of the sparse layers (SparseSequential passes a SparseConvTensor to them)."""


def _no_grad_check(what, *tensors):
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        raise RuntimeError(f"voxconv.spconv.{what}: backward is not available yet (voxconv "
                           f"runs inference only); call the model under torch.no_grad() or "
                           f"torch.inference_mode()")


def _out_tensor(inp, t, ctx, out_ptr, coords=None, spatial_shape=None):
    """The SparseConvTensor of a voxconv result `out_ptr` computed from `inp`."""
    r = Tensor.adopt(ctx, out_ptr, coords if coords is not None else t.coords)
    new = SparseConvTensor(r.features("torch"), r.coords.to("torch"),
                           spatial_shape or list(r.coords.spatial_shape), inp.batch_size,
                           inp.grid, inp.voxel_num, inp.indice_dict, inp.benchmark)
    new._coords = r.coords
    return new


class SparseConvolution(SparseModule):
    """spconv's SparseConvolution, 3-D: subm, strided, inverse or transposed."""

    def __init__(self, ndim, in_channels, out_channels, kernel_size=3, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, subm=False, output_padding=0,
                 transposed=False, inverse=False, indice_key=None, algo=None,
                 fp32_accum=None, record_voxel_count=False, act_type=None, act_alpha=0,
                 act_beta=0, large_kernel_fast_algo=False, name=None, device=None,
                 dtype=None):
        super().__init__()
        if ndim != 3:
            raise ValueError(f"voxconv.spconv: only 3-D convolutions (ndim=3), not ndim={ndim}")
        if groups != 1:
            raise ValueError("voxconv.spconv: groups must be 1")
        if triple(output_padding, "output_padding", 0) != (0, 0, 0):
            raise ValueError("voxconv.spconv: output_padding must be 0")
        self.ndim, self.in_channels, self.out_channels = ndim, in_channels, out_channels
        self.kernel_size = list(triple(kernel_size, "kernel_size", 1))
        self.stride = list(triple(stride, "stride", 1))
        self.padding = list(triple(padding, "padding", 0))
        self.dilation = list(triple(dilation, "dilation", 1))
        self.subm, self.transposed, self.inverse = subm, transposed, inverse
        self.output_padding = [0, 0, 0]
        self.groups, self.indice_key, self.algo, self.name = groups, indice_key, algo, name
        if subm and self.stride != [1, 1, 1]:
            raise ValueError("voxconv.spconv: a submanifold conv has stride 1")
        kw = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty(out_channels, *self.kernel_size, in_channels,
                                               **kw))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_channels, **kw))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        fan_in = self.in_channels
        for k in self.kernel_size:
            fan_in *= k
        bound = 1.0 / max(fan_in, 1) ** 0.5
        nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            nn.init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        kind = ("subm" if self.subm else "inverse" if self.inverse else
                "transposed" if self.transposed else "strided")
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}, dilation={self.dilation}, "
                f"{kind}, indice_key={self.indice_key!r}, bias={self.bias is not None}")

    def forward(self, input):
        if not isinstance(input, SparseConvTensor):
            raise TypeError(f"voxconv.spconv: {type(self).__name__} takes a SparseConvTensor")
        _no_grad_check(type(self).__name__, input.features, self.weight, self.bias)
        if input.features.shape[1] != self.in_channels:
            raise ValueError(f"voxconv.spconv: {type(self).__name__} expects "
                             f"{self.in_channels} input channels, the tensor has "
                             f"{input.features.shape[1]}")
        t, ctx = input.vc_tensor()
        bias = None
        if self.bias is not None:
            bias = self.bias if self.bias.dtype == torch.float32 else self.bias.float()
        wv, bv = F.weight_views(ctx, self.weight, bias, None)
        d = F.conv_desc(ctx, wv, bv, None, 0.01, None, 0, False)
        out = ctypes.c_void_p()
        if self.inverse:
            return self._inverse(input, t, ctx, d, out)
        mtype = (L.MAP_SUBM if self.subm else
                 L.MAP_TRANSPOSED if self.transposed else L.MAP_STRIDED)
        F.fill_map(d.map, mtype, self.kernel_size, self.stride, self.padding, self.dilation)
        keep = None
        if self.indice_key is not None and not self.subm:
            keep = _record_key(input, t, ctx, d.map, self.indice_key, self.kernel_size)
            d.kmap = keep.ptr
        ctx.call("vc_conv_forward", ctypes.byref(d), ctypes.c_void_p(t.ptr), ctypes.byref(out))
        return _out_tensor(input, t, ctx, out.value)

    def _inverse(self, input, t, ctx, d, out):
        data = input.find_indice_pair(self.indice_key)
        if data is None:
            raise ValueError(f"voxconv.spconv: SparseInverseConv3d: no conv recorded "
                             f"indice_key {self.indice_key!r} (the strided conv it inverts "
                             f"must have it)")
        if list(data.kernel_size) != self.kernel_size:
            raise ValueError(f"voxconv.spconv: SparseInverseConv3d kernel_size "
                             f"{self.kernel_size} differs from the kernel {data.kernel_size} "
                             f"of the conv of indice_key {self.indice_key!r}")
        d.map.type = L.MAP_INVERSE
        d.map.inverse_of = data.kmap.ptr
        ctx.call("vc_conv_forward", ctypes.byref(d), ctypes.c_void_p(t.ptr), ctypes.byref(out))
        return _out_tensor(input, t, ctx, out.value, coords=data.in_coords,
                           spatial_shape=list(data.spatial_shape))


def _record_key(input, t, ctx, map_desc, key, kernel_size):
    """Builds the kernel map of a strided layer and records it under `key` (spconv: a key
    names one map; recording it twice is an error)."""
    if key in input.indice_dict:
        data = input.indice_dict[key]
        if data.in_coords.ptr == t.coords.ptr:
            return data.kmap
        raise ValueError(f"voxconv.spconv: indice_key {key!r} is already used by another "
                         f"strided layer")
    out = ctypes.c_void_p()
    ctx.call("vc_kmap_build", ctypes.c_void_p(t.coords.ptr), ctypes.byref(map_desc),
             ctypes.byref(out))
    kmap = C.Handle(ctx, out.value, "kmap")
    input.indice_dict[key] = _IndiceData(kmap, t.coords, input.indices,
                                         list(input.spatial_shape), list(kernel_size))
    return kmap


def _conv3d(name, doc, **flags):
    """A spconv 3-D conv class: SparseConvolution with ndim 3 and `flags` fixed."""

    def __init__(self, in_channels, out_channels, kernel_size=3, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, indice_key=None, algo=None, **kw):
        SparseConvolution.__init__(self, 3, in_channels, out_channels, kernel_size, stride,
                                   padding, dilation, groups, bias, indice_key=indice_key,
                                   algo=algo, **flags, **kw)

    return type(name, (SparseConvolution,), {"__init__": __init__, "__doc__": doc,
                                               "__module__": __name__})


SubMConv3d = _conv3d("SubMConv3d", "spconv's SubMConv3d (outputs = inputs).", subm=True)
SparseConv3d = _conv3d("SparseConv3d", "spconv's SparseConv3d (strided).")
SparseConvTranspose3d = _conv3d("SparseConvTranspose3d", "spconv's SparseConvTranspose3d.",
                                transposed=True)


class SparseInverseConv3d(SparseConvolution):
    def __init__(self, in_channels, out_channels, kernel_size, indice_key=None, bias=True,
                 algo=None, **kw):
        super().__init__(3, in_channels, out_channels, kernel_size, bias=bias, inverse=True,
                         indice_key=indice_key, algo=algo, **kw)


class SparseMaxPool3d(SparseModule):
    """spconv's SparseMaxPool3d (stride defaults to the kernel size). spconv 2.x starts each
    output's maximum at 0, so an output whose inputs are all negative is 0, not their maximum:
    this drop-in does the same (a ReLU after voxconv's true max pool) so that its results are
    spconv's. voxconv.pool(mode="max") and the C API keep the true maximum."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, indice_key=None,
                 subm=False, name=None):
        super().__init__()
        self.kernel_size = list(triple(kernel_size, "kernel_size", 1))
        self.stride = list(triple(stride, "stride", 1)) if stride is not None \
            else list(self.kernel_size)
        self.padding = list(triple(padding, "padding", 0))
        self.dilation = list(triple(dilation, "dilation", 1))
        self.indice_key, self.subm, self.name = indice_key, subm, name

    def forward(self, input):
        _no_grad_check("SparseMaxPool3d", input.features)
        t, ctx = input.vc_tensor()
        d = L.pool_desc()
        F.fill_map(d.map, L.MAP_SUBM if self.subm else L.MAP_STRIDED, self.kernel_size,
                   self.stride, self.padding, self.dilation)
        d.mode = L.POOL_MAX
        keep = None
        if self.indice_key is not None and not self.subm:
            keep = _record_key(input, t, ctx, d.map, self.indice_key, self.kernel_size)
            d.kmap = keep.ptr
        out = ctypes.c_void_p()
        ctx.call("vc_pool_forward", ctypes.byref(d), ctypes.c_void_p(t.ptr), ctypes.byref(out))
        # max(0, .) in place, before the result is handed out: spconv's zero start (above)
        ctx.call("vc_tensor_affine", ctypes.c_void_p(out.value), None, None, L.MEMORY_HOST,
                 L.ACT_RELU, ctypes.c_float(0.0))
        return _out_tensor(input, t, ctx, out.value)


class SparseSequential(SparseModule):
    """spconv's SparseSequential: sparse modules take the SparseConvTensor, other modules its
    features (skipped when it has no voxels)."""

    def __init__(self, *args, **kwargs):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], dict):
            for name, module in args[0].items():
                self.add_module(name, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)
        for name, module in kwargs.items():
            if name in self._modules:
                raise ValueError(f"voxconv.spconv: name {name!r} exists")
            self.add_module(name, module)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return SparseSequential(dict(list(self._modules.items())[idx]))
        n = len(self._modules)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range")
        return list(self._modules.values())[idx % n]

    def __len__(self):
        return len(self._modules)

    def add(self, module, name=None):
        if name is None:
            name = str(len(self._modules))
            if name in self._modules:
                raise KeyError("name exists")
        self.add_module(name, module)

    def forward(self, input):
        for module in self._modules.values():
            if module is None:
                continue
            if isinstance(module, SparseModule):
                input = module(input)
            elif isinstance(input, SparseConvTensor):
                if input.indices.shape[0] != 0:
                    input = input.replace_feature(module(input.features))
            else:
                input = module(input)
        return input


class ToDense(SparseModule):
    """spconv's ToDense: .dense() as a module."""

    def forward(self, x):
        return x.dense()
