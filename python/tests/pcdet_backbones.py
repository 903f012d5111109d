"""OpenPCDet's VoxelBackBone8x and VoxelResBackBone8x (pcdet/models/backbones_3d/
spconv_backbone.py), restated for the tests: the same classes, constructor arguments, module
names, layer parameters and batch_dict keys, so an OpenPCDet state_dict loads into them and they
compute what OpenPCDet's do. Written against the spconv 2.x API only through the names of the
IMPORT line below, which is the one line a backbone changes to move from spconv to voxconv;
load() swaps that line for another provider of `spconv` and `replace_feature` (the test
reference, or real spconv on the GPU). VOXCONV_PCDET_SOURCE=/path/to/spconv_backbone.py makes
load() use OpenPCDet's own file instead, with its import line swapped the same way.
"""
from functools import partial

import torch.nn as nn

from voxconv.spconv_utils import replace_feature, spconv

IMPORT = "from voxconv.spconv_utils import replace_feature, spconv"
PCDET_IMPORT = "from ...utils.spconv_utils import replace_feature, spconv"


def post_act_block(in_channels, out_channels, kernel_size, indice_key=None, stride=1,
                   padding=0, conv_type='subm', norm_fn=None):
    if conv_type == 'subm':
        conv = spconv.SubMConv3d(in_channels, out_channels, kernel_size, bias=False,
                                 indice_key=indice_key)
    elif conv_type == 'spconv':
        conv = spconv.SparseConv3d(in_channels, out_channels, kernel_size, stride=stride,
                                   padding=padding, bias=False, indice_key=indice_key)
    elif conv_type == 'inverseconv':
        conv = spconv.SparseInverseConv3d(in_channels, out_channels, kernel_size,
                                          indice_key=indice_key, bias=False)
    else:
        raise NotImplementedError
    return spconv.SparseSequential(conv, norm_fn(out_channels), nn.ReLU())


class SparseBasicBlock(spconv.SparseModule):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, bias=None, norm_fn=None, downsample=None,
                 indice_key=None):
        super().__init__()
        assert norm_fn is not None
        if bias is None:
            bias = norm_fn is not None
        self.conv1 = spconv.SubMConv3d(inplanes, planes, kernel_size=3, stride=stride,
                                       padding=1, bias=bias, indice_key=indice_key)
        self.bn1 = norm_fn(planes)
        self.relu = nn.ReLU()
        self.conv2 = spconv.SubMConv3d(planes, planes, kernel_size=3, stride=stride, padding=1,
                                       bias=bias, indice_key=indice_key)
        self.bn2 = norm_fn(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.conv1(x)
        out = replace_feature(out, self.relu(self.bn1(out.features)))
        out = self.conv2(out)
        out = replace_feature(out, self.bn2(out.features))
        if self.downsample is not None:
            identity = self.downsample(x)
        out = replace_feature(out, self.relu(out.features + identity.features))
        return out


def _stages(block, norm_fn, chans, res_block=None):
    """conv1..conv4 of both backbones: a strided block (stages 2-4) then subm or residual
    blocks, with OpenPCDet's indice keys and paddings."""
    stages = []
    c_in = 16
    for i, c in enumerate(chans, start=1):
        mods = []
        if i > 1:
            pad = (0, 1, 1) if i == 4 else 1
            mods.append(block(c_in, c, 3, norm_fn=norm_fn, stride=2, padding=pad,
                              indice_key=f'spconv{i}', conv_type='spconv'))
        n_rest = 2 if (res_block is not None or i > 1) else 1
        for _ in range(n_rest):
            if res_block is not None:
                mods.append(res_block(c, c, norm_fn=norm_fn, indice_key=f'res{i}'))
            else:
                mods.append(block(c, c, 3, norm_fn=norm_fn, padding=1, indice_key=f'subm{i}'))
        stages.append(spconv.SparseSequential(*mods))
        c_in = c
    return stages


class _Backbone8x(nn.Module):
    CHANNELS = (16, 32, 64, 64)
    RESIDUAL = False

    def __init__(self, model_cfg, input_channels, grid_size, **kwargs):
        super().__init__()
        self.model_cfg = model_cfg
        norm_fn = partial(nn.BatchNorm1d, eps=1e-3, momentum=0.01)
        self.sparse_shape = grid_size[::-1] + [1, 0, 0]
        self.conv_input = spconv.SparseSequential(
            spconv.SubMConv3d(input_channels, 16, 3, padding=1, bias=False,
                              indice_key='subm1'),
            norm_fn(16),
            nn.ReLU(),
        )
        self.conv1, self.conv2, self.conv3, self.conv4 = _stages(
            post_act_block, norm_fn, self.CHANNELS,
            SparseBasicBlock if self.RESIDUAL else None)
        last_pad = self.model_cfg.get('last_pad', 0)
        c4 = self.CHANNELS[3]
        self.conv_out = spconv.SparseSequential(
            spconv.SparseConv3d(c4, 128, (3, 1, 1), stride=(2, 1, 1), padding=last_pad,
                                bias=False, indice_key='spconv_down2'),
            norm_fn(128),
            nn.ReLU(),
        )
        self.num_point_features = 128
        self.backbone_channels = {'x_conv1': 16, 'x_conv2': 32, 'x_conv3': 64,
                                  'x_conv4': c4}

    def forward(self, batch_dict):
        voxel_features, voxel_coords = batch_dict['voxel_features'], batch_dict['voxel_coords']
        batch_size = batch_dict['batch_size']
        input_sp_tensor = spconv.SparseConvTensor(
            features=voxel_features,
            indices=voxel_coords.int(),
            spatial_shape=self.sparse_shape,
            batch_size=batch_size
        )
        x = self.conv_input(input_sp_tensor)
        x_conv1 = self.conv1(x)
        x_conv2 = self.conv2(x_conv1)
        x_conv3 = self.conv3(x_conv2)
        x_conv4 = self.conv4(x_conv3)
        out = self.conv_out(x_conv4)
        batch_dict.update({'encoded_spconv_tensor': out, 'encoded_spconv_tensor_stride': 8})
        batch_dict.update({'multi_scale_3d_features': {
            'x_conv1': x_conv1, 'x_conv2': x_conv2, 'x_conv3': x_conv3, 'x_conv4': x_conv4}})
        batch_dict.update({'multi_scale_3d_strides': {
            'x_conv1': 1, 'x_conv2': 2, 'x_conv3': 4, 'x_conv4': 8}})
        return batch_dict


class VoxelBackBone8x(_Backbone8x):
    pass


class VoxelResBackBone8x(_Backbone8x):
    CHANNELS = (16, 32, 64, 128)
    RESIDUAL = True


def load(import_line, name="pcdet_backbones_alt"):
    """This module (or VOXCONV_PCDET_SOURCE's file) as a new module whose import line is
    `import_line`: the same backbone source on another spconv."""
    import os
    import types
    src_path = os.environ.get("VOXCONV_PCDET_SOURCE") or __file__
    with open(src_path) as fh:
        src = fh.read()
    lines = src.split("\n")
    hits = [i for i, line in enumerate(lines) if line.strip() in (IMPORT, PCDET_IMPORT)]
    if len(hits) != 1:
        raise RuntimeError(f"{src_path}: expected one import line {IMPORT!r} or "
                           f"{PCDET_IMPORT!r}, found {len(hits)}")
    lines[hits[0]] = import_line
    mod = types.ModuleType(name)
    mod.__file__ = src_path
    exec(compile("\n".join(lines), src_path, "exec"), mod.__dict__)
    return mod
