"""A reference `spconv` for the tests: voxconv.spconv's classes (same parameters, same
state_dict) whose forward passes compute with the NumPy oracle (float64) instead of the
library. Coordinates of strided outputs come sorted by (batch, z, y, x), as voxconv's do."""
import numpy as np
import torch

import oracle
import voxconv.spconv as vsp
from voxconv.spconv import (SparseConvTensor, SparseModule, SparseSequential,  # noqa: F401
                            replace_feature)


def _np(t):
    return t.detach().cpu().double().numpy()


def _result(inp, feats, coords, shape, like):
    out = SparseConvTensor(torch.from_numpy(feats).to(like.dtype),
                           torch.from_numpy(np.ascontiguousarray(coords, np.int32)),
                           list(shape), inp.batch_size, indice_dict=inp.indice_dict)
    return out


class _RefConv:
    def forward(self, x):
        f, c = _np(x.features), x.indices.cpu().numpy()
        w = _np(self.weight)
        b = _np(self.bias) if self.bias is not None else None
        if self.inverse:
            in_c, in_shape, pairs = x.indice_dict[self.indice_key]
            out, oc, os_ = oracle.conv(f, c, w, None, bias=b,
                                       inverse_of=(in_c, in_shape, pairs))
            return _result(x, out, oc, os_, x.features)
        kind = "subm" if self.subm else "transposed" if self.transposed else "strided"
        out, oc, os_ = oracle.conv(f, c, w, x.spatial_shape, kind, tuple(self.stride),
                                   tuple(self.padding), tuple(self.dilation), bias=b)
        if self.indice_key is not None and not self.subm:
            _, _, pairs = oracle.kernel_map(c, x.spatial_shape, kind, self.kernel_size,
                                            self.stride, self.padding, self.dilation)
            x.indice_dict[self.indice_key] = (c, list(x.spatial_shape), pairs)
        return _result(x, out, oc, os_, x.features)


class SubMConv3d(_RefConv, vsp.SubMConv3d):
    pass


class SparseConv3d(_RefConv, vsp.SparseConv3d):
    pass


class SparseInverseConv3d(_RefConv, vsp.SparseInverseConv3d):
    pass


class SparseConvTranspose3d(_RefConv, vsp.SparseConvTranspose3d):
    pass


class SparseMaxPool3d(vsp.SparseMaxPool3d):
    """spconv 2.x starts each output's maximum at 0 (checked against spconv 2.3.8, CPU and
    GPU): the true maximum of the oracle, then max(0, .)."""

    def forward(self, x):
        out, oc, os_ = oracle.pool(_np(x.features), x.indices.numpy(), x.spatial_shape,
                                   tuple(self.kernel_size), tuple(self.stride),
                                   tuple(self.padding), tuple(self.dilation))
        return _result(x, np.maximum(out, 0.0), oc, os_, x.features)


def dense(x):
    """The reference of SparseConvTensor.dense()."""
    return torch.from_numpy(oracle.dense(_np(x.features), x.indices.numpy(), x.spatial_shape,
                                         x.batch_size))
