"""Helpers shared by tests: define kernels from source text, as a notebook cell would."""

import linecache
import textwrap

import numpy as np
import pytest

import qnb
from qnb import Tile16, Vec16

_counter = [0]


def define(source: str, namespace=None, prefix="test-cell"):
    """Exec ``source`` under a fresh linecache filename (like a notebook cell); returns
    (namespace, filename)."""
    _counter[0] += 1
    filename = f"<{prefix}-{_counter[0]}>"
    text = textwrap.dedent(source)
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    scope = {"qnb": qnb, "Tile16": Tile16, "Vec16": Vec16, "np": np}
    scope.update(namespace or {})
    exec(compile(text, filename, "exec"), scope)  # noqa: S102 - the test's own source
    return scope, filename


def skip_unless_dtype_runs(backend: str, dtype) -> None:
    """Skip where ``backend`` cannot run ``dtype`` here: f16 on a wgpu adapter without
    ``shader-f16`` (f64 on wgpu is not a skip: it must raise BackendError)."""
    if backend != "wgpu" or np.dtype(dtype) != np.float16:
        return
    from qnb.backends import get

    if not get("wgpu")._dev().has_f16:
        pytest.skip("this adapter has no shader-f16")


def check_program_ids(backend: str, grid, holds_tile: bool = False) -> None:
    """Launch a kernel on ``grid`` in which every program writes its ids and the grid's
    sizes to its own row; check every row (each program ran once, and knew who it was).

    Both GPU program layouts: a kernel that ``holds_tile`` runs a workgroup/block per
    program; one whose values are all scalars runs a thread per program, many programs
    to a workgroup/block ("solo", see qnb.backends.gpu)."""
    # The tile variant passes its x through a tile, which makes the program a block.
    x_of = "Tile16.full(qnb.program_id(0), qnb.i32)[15, 15]" if holds_tile else "qnb.program_id(0)"
    scope, _ = define(f"""
        @qnb.kernel
        def ids(out):
            x, y, z = {x_of}, qnb.program_id(1), qnb.program_id(2)
            n = x + qnb.num_programs(0) * (y + qnb.num_programs(1) * z)
            out[n, 0] = x
            out[n, 1] = y
            out[n, 2] = z
            out[n, 3] = qnb.num_programs(0) * 10000 + qnb.num_programs(1) * 100 + qnb.num_programs(2)
        """)
    solo = "one thread is one program" in scope["ids"].source("cuda", np.zeros((1, 4), np.int32))
    assert solo != holds_tile
    full = tuple(grid) + (1,) * (3 - len(grid))
    total = full[0] * full[1] * full[2]
    # Spare rows: a thread or workgroup past the last program that ran would fill them.
    out = np.full((total + 256, 4), -1, np.int32)
    with qnb.backend(backend):
        scope["ids"][grid](out)
    assert (out[total:] == -1).all()
    out = out[:total]
    z, y, x = np.unravel_index(np.arange(total), full[::-1])
    np.testing.assert_array_equal(out[:, 0], x)
    np.testing.assert_array_equal(out[:, 1], y)
    np.testing.assert_array_equal(out[:, 2], z)
    assert (out[:, 3] == full[0] * 10000 + full[1] * 100 + full[2]).all()
