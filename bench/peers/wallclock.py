"""Wall-clock timing of a call to a synchronised result, shared by the peer benchmarks
(net_spconv_bench.py, py_spconv_bench.py): `warmup` calls, then `runs` timed ones, each followed
by a CUDA synchronisation; the times in ms, sorted."""
import time

import torch


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def samples(fn, runs, warmup):
    for _ in range(warmup):
        fn()
    sync()
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        sync()
        ts.append((time.perf_counter() - t0) * 1e3)
    return sorted(ts)
