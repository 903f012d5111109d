"""An independent NumPy statement of voxconv's operations (float64, brute force by offset), for
the tests: kernel-map semantics as include/voxconv.h states them for vc_map_type, convolution
out[p] = sum_k in[q_k(p)] @ W[:, k, :].T, pooling, voxelization and sparse-to-dense."""
import itertools

import numpy as np


def _keys(coords, shape):
    c = coords.astype(np.int64)
    return ((c[:, 0] * shape[0] + c[:, 1]) * shape[1] + c[:, 2]) * shape[2] + c[:, 3]


def unkey(keys, shape):
    x = keys % shape[2]
    r = keys // shape[2]
    y = r % shape[1]
    r //= shape[1]
    z = r % shape[0]
    b = r // shape[0]
    return np.stack([b, z, y, x], 1).astype(np.int32)


def _lookup(sorted_keys, order, keys):
    """Rows whose key equals keys[i] (-1 where none)."""
    pos = np.searchsorted(sorted_keys, keys)
    pos = np.minimum(pos, len(sorted_keys) - 1) if len(sorted_keys) else pos * 0
    found = len(sorted_keys) > 0
    hit = (sorted_keys[pos] == keys) if found else np.zeros(len(keys), bool)
    return np.where(hit, order[pos] if found else -1, -1)


def offsets(kernel):
    """Kernel offsets (dz, dy, dx) in voxconv's order k = ((dz*ky)+dy)*kx+dx."""
    return list(itertools.product(range(kernel[0]), range(kernel[1]), range(kernel[2])))


def kernel_map(coords, shape, type, kernel, stride=(1, 1, 1), padding=(0, 0, 0),
               dilation=(1, 1, 1)):
    """(out_coords, out_shape, [(k, in_rows, out_rows)]) of a map over coords [N, 4]."""
    coords = np.asarray(coords, np.int64)
    shape, kernel = np.array(shape), np.array(kernel)
    stride, padding, dilation = np.array(stride), np.array(padding), np.array(dilation)
    if type == "subm":
        out_shape = shape
    elif type == "strided":
        out_shape = (shape + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1
    elif type == "downsample":
        out_shape = -(-shape // stride)
    elif type == "transposed":
        out_shape = (shape - 1) * stride - 2 * padding + dilation * (kernel - 1) + 1
    else:
        raise ValueError(type)
    center = np.where(kernel % 2 == 1, kernel // 2, 0)
    cand = []  # per offset: (input rows, output positions [M, 3])
    for k, off in enumerate(offsets(kernel)):
        off = np.array(off)
        q = coords[:, 1:]
        if type == "subm":
            # output p reads input p + (k - kernel/2)*dilation: input q feeds p = q - that
            p = q - (off - kernel // 2) * dilation
            ok = np.ones(len(q), bool)
        elif type == "strided":
            t = q + padding - off * dilation
            ok = np.all(t % stride == 0, 1)
            p = t // stride
        elif type == "downsample":
            t = q - (off - center) * dilation
            ok = np.all(t % stride == 0, 1)
            p = t // stride
        else:  # transposed: input q writes q*stride - padding + k*dilation
            p = q * stride - padding + off * dilation
            ok = np.ones(len(q), bool)
        ok &= np.all((p >= 0) & (p < out_shape), 1)
        rows = np.nonzero(ok)[0]
        cand.append((k, rows, np.concatenate([coords[rows, :1], p[rows]], 1)))
    if type == "subm":
        out_coords = coords.astype(np.int32)
    else:
        allp = np.concatenate([c for _, _, c in cand]) if cand else np.zeros((0, 4), np.int64)
        if type == "downsample":  # outputs are exactly the floor(q / stride) of the inputs
            allp = np.concatenate([coords[:, :1], coords[:, 1:] // stride], 1)
        keys = np.unique(_keys(allp, out_shape))
        out_coords = unkey(keys, out_shape)
    ok_ = _keys(out_coords, out_shape)
    order = np.argsort(ok_, kind="stable")
    sk = ok_[order]
    pairs = []
    for k, rows, p in cand:
        orow = _lookup(sk, order, _keys(p, out_shape))
        m = orow >= 0
        assert len(np.unique(orow[m])) == m.sum(), "an output has two inputs at one offset"
        pairs.append((k, rows[m], orow[m]))
    return out_coords, tuple(int(v) for v in out_shape), pairs


def conv(feats, coords, weights, shape, type="subm", stride=1, padding=0, dilation=1,
         bias=None, inverse_of=None):
    """Reference conv; weights [C_out, kz, ky, kx, C_in]. inverse_of: the (in_coords,
    in_shape, pairs) of a forward map whose output is `coords`."""
    w = np.asarray(weights, np.float64)
    co, kernel, ci = w.shape[0], w.shape[1:4], w.shape[4]
    wk = w.reshape(co, -1, ci)
    f = np.asarray(feats, np.float64)
    t3 = (lambda v: (v,) * 3 if np.isscalar(v) else tuple(v))
    if inverse_of is not None:
        out_coords, out_shape, fwd = inverse_of
        pairs = [(k, o, i) for k, i, o in fwd]
    else:
        out_coords, out_shape, pairs = kernel_map(coords, shape, type, kernel, t3(stride),
                                                  t3(padding), t3(dilation))
    out = np.zeros((len(out_coords), co))
    for k, i, o in pairs:  # within one offset an output has at most one input: no repeats in o
        out[o] += f[i] @ wk[:, k, :].T
    if bias is not None:
        out += np.asarray(bias, np.float64)
    return out, out_coords, out_shape


def pool(feats, coords, shape, kernel, stride, padding=0, dilation=1, type="strided",
         mode="max"):
    t3 = (lambda v: (v,) * 3 if np.isscalar(v) else tuple(v))
    out_coords, out_shape, pairs = kernel_map(coords, shape, type, t3(kernel), t3(stride),
                                              t3(padding), t3(dilation))
    f = np.asarray(feats, np.float64)
    n, c = len(out_coords), f.shape[1]
    if mode == "max":
        out = np.full((n, c), -np.inf)
        for _, i, o in pairs:
            out[o] = np.maximum(out[o], f[i])
    else:
        out, cnt = np.zeros((n, c)), np.zeros(n)
        for _, i, o in pairs:
            out[o] += f[i]
            cnt[o] += 1
        out /= np.maximum(cnt, 1)[:, None]
    return out, out_coords, out_shape


def voxelize(points, voxel_size, rng, reduce="mean"):
    """Mean / first / count voxelization: (features, coords sorted by (b, z, y, x), shape)."""
    p = np.asarray(points, np.float32)
    vs, lo, hi = (np.asarray(voxel_size, np.float32), np.asarray(rng[:3], np.float32),
                  np.asarray(rng[3:], np.float32))
    grid = np.round((hi - lo) / vs).astype(np.int64)            # x, y, z
    idx = np.floor((p[:, :3] - lo) / vs).astype(np.int64)
    ok = np.all((idx >= 0) & (idx < grid), 1) & np.all(np.isfinite(p[:, :3]), 1)
    shape = (int(grid[2]), int(grid[1]), int(grid[0]))
    zyx = idx[ok][:, ::-1]
    c4 = np.concatenate([np.zeros((len(zyx), 1), np.int64), zyx], 1)
    keys = _keys(c4, shape)
    uk, inv = np.unique(keys, return_inverse=True)
    pts = p[ok].astype(np.float64)
    if reduce == "count":
        feats = np.bincount(inv, minlength=len(uk))[:, None].astype(np.float64)
    elif reduce == "first":
        first = np.full(len(uk), len(pts))
        np.minimum.at(first, inv, np.arange(len(pts)))
        feats = pts[first]
    else:
        feats = np.zeros((len(uk), p.shape[1]))
        np.add.at(feats, inv, pts)
        feats /= np.bincount(inv, minlength=len(uk))[:, None]
    return feats, unkey(uk, shape), shape


def dense(feats, coords, shape, batch_size):
    out = np.zeros((batch_size, feats.shape[1]) + tuple(shape), np.float64)
    c = np.asarray(coords)
    out.transpose(0, 2, 3, 4, 1)[c[:, 0], c[:, 1], c[:, 2], c[:, 3]] = feats
    return out
