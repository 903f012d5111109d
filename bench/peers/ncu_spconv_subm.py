#!/usr/bin/env python3
"""Runs spconv's subm k3 C->C layer (fp16, bias + ReLU) on a bench_conv --dump scene inside an NVTX
range "prof" (after warm-up and spconv's tuning), so Nsight Compute can profile just those
kernels: ncu --nvtx --nvtx-include "prof/" ... python3 ncu_spconv_subm.py DIR/scene0.npy Z Y X C...
"""
import sys

import numpy as np
import torch
import spconv.pytorch as sp
from spconv.core import ConvAlgo
from spconv.pytorch.conv import SparseConvolution
from cumm import tensorview as tv

path, shape, chans = sys.argv[1], [int(v) for v in sys.argv[2:5]], [int(v) for v in sys.argv[5:]]
idx = torch.from_numpy(np.load(path).astype(np.int32)).cuda()
torch.manual_seed(1)
for c in chans:
    m = SparseConvolution(3, c, c, 3, subm=True, indice_key="s", bias=True,
                          algo=ConvAlgo.MaskImplicitGemm,
                          act_type=tv.gemm.Activation.ReLU).cuda().half().eval()
    x = sp.SparseConvTensor(torch.rand(idx.shape[0], c, device="cuda").half(), idx, shape, 1)
    with torch.no_grad():
        y = m(x)
        x = sp.SparseConvTensor(x.features, idx, shape, 1, indice_dict=y.indice_dict)
        for _ in range(10):
            m(x)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("prof")
        m(x)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        # the same call under torch.profiler: kernel names (spconv's encode the tile) and times
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            m(x)
            torch.cuda.synchronize()
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                print(f"C={c} kernel {e.name[:160]} {e.device_time:.1f} us", flush=True)
    print("profiled C =", c, flush=True)
