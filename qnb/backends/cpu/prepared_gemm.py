"""prepared_gemm"""

from __future__ import annotations

import numpy as np

from qnb import ir
from qnb.backends.cpu.prepared_base import _add_tiles, _Blocks, _zero_padded
from qnb.backends.cpu.semantics import is_narrow_float


class GemmMixin:
    """Strategy: the K loop of a tiled matmul over block strips run as one GEMM."""

    def gemm_loop(self, s):
        """``gemm(st, first, last, step) -> done`` for the K loop of a tiled matmul,
        ``for k in range(…, K): acc = mma(Tile[M, K].load(a, i, k), Tile[K, N].load(b, k, j),
        acc)`` with ``i``, ``j`` the block offsets (``program_id * M``, ``program_id * N``) of
        two grid axes: over all programs together the loop is
        one GEMM of the block row strips of ``a`` by the block column strips of ``b``
        (zero where the tiles' windows leave the arrays, as the loads read), added to
        ``acc``. None where the loop is not of that form; ``done`` False where a launch
        is not (a partial chunk, a mask, another dtype): the loop then runs step by step."""
        if self.masked or len(s.body) != 1 or not isinstance(s.body[0], ir.Assign):
            return None
        stmt, k = s.body[0], s.var
        acc = stmt.name
        product = stmt.value
        if isinstance(product, ir.Binary) and product.op == "add":
            for mine, other in ((product.left, product.right), (product.right, product.left)):
                if (
                    isinstance(mine, ir.Var)
                    and mine.name == acc
                    and isinstance(other, ir.Matmul)
                    and other.acc is None
                    and other.type == product.type
                ):
                    product = other
                    break
            else:
                return None
        elif not (
            isinstance(product, ir.Matmul)
            and isinstance(product.acc, ir.Var)
            and product.acc.name == acc
        ):
            return None
        a, b = product.a, product.b
        if acc == k or not all(self.zero_load(x) for x in (a, b)):
            return None
        (m, depth), (depth_b, n) = a.type.shape, b.type.shape
        if depth != depth_b or not (isinstance(s.step, ir.Const) and s.step.value == depth):
            return None
        if not (self.is_k_window(a.c0, a.c1, k, depth) and self.is_k_window(b.r0, b.r1, k, depth)):
            return None
        ra, ca = self.pid_block(a.r0, m), self.pid_block(b.c0, n)
        if ra is None or ca is None or ra == ca:
            return None
        if not (self.block_end(a.r1, ra, m) and self.block_end(b.c1, ca, n)):
            return None
        views = []
        for load in (a, b):
            if load.view.batch is not None and self.is_varying(load.view.batch):
                return None
            views.append(self.view(load.view, load))
        view_a, view_b = views
        a_dtype, b_dtype = a.type.dtype.numpy, b.type.dtype.numpy
        out = product.type.dtype.numpy
        unpadded = not (a.padded and b.padded)

        def gemm(st, first, last, by):
            grid = st.grid
            if st.mask is not None or not st.whole or grid[2] != 1:
                return False
            steps = range(first, last, by)
            if not steps:
                return True
            if unpadded and first < 0:  # the loads' error, from the loop
                return False
            x, xb = view_a(st)
            y, yb = view_b(st)
            if x.dtype != a_dtype or y.dtype != b_dtype or x.size == 0 or y.size == 0:
                return False
            rows, cols = grid[ra] * m, grid[ca] * n
            if max(rows, cols) >= 2**31:
                return False
            # the K columns where a or b has elements: elsewhere both tiles read 0, and
            # 0 * 0 adds nothing (a range far past the arrays allocates nothing)
            lo = max(first, 0)
            hi = max(lo, min(steps[-1] + depth, max(x.shape[2], y.shape[1])))
            x = _zero_padded(x[xb], 0, rows, lo, hi)
            y = _zero_padded(y[yb], lo, hi, 0, cols)
            if is_narrow_float(x.dtype):
                x, y = x.astype(np.float32), y.astype(np.float32)
            result = np.matmul(x, y).astype(out, copy=False)
            _add_tiles(result, st.env[acc], ra, grid, (m, n))
            st.env[acc] = _Blocks(result.reshape(rows // m, m, cols // n, n), ra)
            st.env[k] = np.array([steps[-1]], np.int32)
            st.aliased.discard(acc)
            st.aliased.discard(k)
            return True

        return gemm

    def zero_load(self, e):
        """Whether ``e`` is a tile load whose elements outside the array read 0."""
        return (
            isinstance(e, ir.LoadWindow)
            and isinstance(e.base, ir.TileFill)
            and e.base.kind == "full"
            and isinstance(e.base.value, ir.Const)
            and e.base.value.value == 0
        )

    @staticmethod
    def is_k_window(lo, hi, k, depth):
        """Whether ``(lo, hi)`` is ``(k, k + depth)`` for the loop variable ``k``."""
        return (
            isinstance(lo, ir.Var)
            and lo.name == k
            and isinstance(hi, ir.Binary)
            and hi.op == "add"
            and isinstance(hi.left, ir.Var)
            and hi.left.name == k
            and isinstance(hi.right, ir.Const)
            and hi.right.value == depth
        )
