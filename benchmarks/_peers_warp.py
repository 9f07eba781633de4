"""Warp's CPU tile kernels for ``benchmarks/bench_peers.py`` (imported only where warp-lang
is installed: the optional ``peers`` extra). Each is the qnb kernel of the same workload
written with Warp's tiles (``wp.tile_load`` / ``wp.tile_store`` on 16×16 blocks, one
block per program, ``block_dim=1`` as Warp runs tiles on the CPU); the tile-free form is
a plain SIMT kernel. Warp compiles them to native code on first use (cached by Warp)."""

from __future__ import annotations

import numpy as np
import warp as wp

wp.config.quiet = True
DEVICE = "cpu"


@wp.kernel
def trivial(d: wp.array2d(dtype=float)):
    wp.tile_store(d, wp.tile_full(shape=(16, 16), value=4.0, dtype=float))


@wp.func
def _affine(v: float):
    return 2.0 * v + 1.0


@wp.kernel
def affine_tiles(x: wp.array2d(dtype=float), y: wp.array2d(dtype=float)):
    i, j = wp.tid()
    t = wp.tile_load(x, shape=(16, 16), offset=(i * 16, j * 16))
    wp.tile_store(y, wp.tile_map(_affine, t), offset=(i * 16, j * 16))


@wp.kernel
def affine_elements(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i] + 1.0


@wp.kernel
def matmul(a: wp.array2d(dtype=float), b: wp.array2d(dtype=float), c: wp.array2d(dtype=float)):
    i, j = wp.tid()
    acc = wp.tile_zeros(shape=(16, 16), dtype=float)
    for k in range(a.shape[1] // 16):
        ta = wp.tile_load(a, shape=(16, 16), offset=(i * 16, k * 16))
        tb = wp.tile_load(b, shape=(16, 16), offset=(k * 16, j * 16))
        wp.tile_matmul(ta, tb, acc)
    wp.tile_store(c, acc, offset=(i * 16, j * 16))


@wp.kernel
def softmax(x: wp.array2d(dtype=float), y: wp.array2d(dtype=float)):
    i = wp.tid()
    t = wp.tile_load(x, shape=(16, 16), offset=(i * 16, 0))
    row_max = wp.tile_reshape(wp.tile_reduce(wp.max, t, axis=1), shape=(16, 1))
    e = wp.tile_map(wp.exp, t - wp.tile_broadcast(row_max, shape=(16, 16)))
    row_sum = wp.tile_reshape(wp.tile_sum(e, axis=1), shape=(16, 1))
    wp.tile_store(
        y, wp.tile_map(wp.div, e, wp.tile_broadcast(row_sum, shape=(16, 16))), offset=(i * 16, 0)
    )


@wp.kernel
def cholesky(
    a: wp.array3d(dtype=wp.float64),
    b: wp.array3d(dtype=wp.float64),
    x: wp.array3d(dtype=wp.float64),
):
    s = wp.tid()
    lower = wp.tile_cholesky(wp.tile_load(a[s], shape=(16, 16)))
    rhs = wp.tile_transpose(wp.tile_load(b[s], shape=(16, 16)))
    # L X = Bᵀ: X is the transpose of qnb's y (y @ Lᵀ == b)
    wp.tile_store(x[s], wp.tile_transpose(wp.tile_lower_solve(lower, rhs)))


def runner(workload, arrays):
    """``setup() -> run() -> result`` for ``workload`` (arrays already on Warp's CPU
    device before timing, as qnb's are NumPy's), or None."""

    def on_device(a, dtype=float):
        return wp.array(np.ascontiguousarray(a), dtype=dtype, device=DEVICE)

    def tiled(kernel, dim, inputs, out):
        def run():
            wp.launch_tiled(kernel, dim=dim, inputs=inputs, block_dim=1, device=DEVICE)
            return out.numpy()

        return lambda: run

    if workload == "trivial":
        d = wp.zeros((16, 16), dtype=float, device=DEVICE)
        return tiled(trivial, 1, [d], d)
    if workload == "affine_tiles":
        x = on_device(arrays["x"])
        y = wp.empty_like(x)
        return tiled(affine_tiles, (x.shape[0] // 16, x.shape[1] // 16), [x, y], y)
    if workload == "affine_elements":
        x = on_device(arrays["x"])
        y = wp.empty_like(x)

        def run():
            wp.launch(affine_elements, dim=x.shape[0], inputs=[x, y], device=DEVICE)
            return y.numpy()

        return lambda: run
    if workload == "matmul":
        a, b = on_device(arrays["a"]), on_device(arrays["b"])
        c = wp.empty((a.shape[0], b.shape[1]), dtype=float, device=DEVICE)
        return tiled(matmul, (a.shape[0] // 16, b.shape[1] // 16), [a, b, c], c)
    if workload == "softmax":
        x = on_device(arrays["x"])
        y = wp.empty_like(x)
        return tiled(softmax, x.shape[0] // 16, [x, y], y)
    if workload == "cholesky":
        a, b = on_device(arrays["a"], wp.float64), on_device(arrays["b"], wp.float64)
        x = wp.empty_like(b)
        return tiled(cholesky, a.shape[0], [a, b, x], x)
    return None
