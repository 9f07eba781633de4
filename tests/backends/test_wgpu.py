"""The wgpu backend on hand-built IR: WGSL validation, values, errors, device arrays.

Runs on any adapter; on a machine without a GPU that is lavapipe (Vulkan on the CPU).
Sizes stay small: lavapipe is slow. The front-end-driven comparison against the cpu
backend lives in test_differential.py.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from qnb import dtypes as D
from qnb import ir
from qnb.backends.base import Options
from qnb.errors import BackendError, CompileError
from tests.backends.cuda_ir_cases import L, all_cases, array, const, tile_kernel, var

CASES = {case.name: case for case in all_cases()}


@pytest.fixture(scope="module")
def backend():
    from qnb.backends import get

    chosen = get("wgpu")
    info = chosen.info()
    if not info.available:
        if os.environ.get("QNB_REQUIRE_WGPU") == "1":
            pytest.fail(f"QNB_REQUIRE_WGPU=1 but the wgpu backend is unavailable: {info.reason}")
        pytest.skip(f"wgpu unavailable: {info.reason}")
    return chosen


def launch(backend, kernel, inputs, grid=(1, 1, 1)):
    """Compile, load and launch; returns the (copied) inputs after the run."""
    values = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in inputs.items()}
    launcher = backend.load(backend.compile(kernel, Options()))
    launcher(grid, [values[p.name] for p in kernel.params])
    return values


def test_adapter_is_vulkan_on_linux(backend):
    info = backend._dev().adapter_info
    if os.environ.get("QNB_REQUIRE_WGPU") == "1" or backend.is_software():
        # Without the Vulkan driver wgpu silently falls back to OpenGL: never accept that.
        assert info["backend_type"] == "Vulkan", info
    backend_component, compiler_component = backend.key_components()
    assert backend_component["adapter"] and compiler_component["wgpu-native"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_hand_built_case_validates(backend, name):
    """Every IR op at every dtype renders to WGSL that naga accepts (f64, bf16:
    BackendError)."""
    case = CASES[name]
    missing = [d for d in ("f64", "bf16") if d in name]
    if missing:
        with pytest.raises(BackendError, match=f"WGSL has no ({'|'.join(missing)})") as caught:
            backend.compile(case.kernel, Options())
        assert "cpu or cuda" in str(caught.value)
        assert isinstance(caught.value.ir_loc, ir.Loc)
        return
    artifact = backend.compile(case.kernel, Options())
    assert "@compute" in artifact.text["wgsl"]
    assert len(artifact.text["line_locs"]) == artifact.text["wgsl"].count("\n")
    # ... and computes what the cpu backend computes (scalar reads outside an array
    # raise on cpu and read 0 here: those cases only validate).
    if name.startswith("memory_control"):
        return
    from qnb.backends import get

    got = launch(backend, case.kernel, case.inputs, case.grid)
    want = launch(get("cpu"), case.kernel, case.inputs, case.grid)
    for key, expected in want.items():
        if not isinstance(expected, np.ndarray):
            continue
        if expected.dtype.kind in "iub":
            np.testing.assert_array_equal(got[key], expected, err_msg=key)
        else:
            loose = expected.dtype == np.float16  # lavapipe's f16 exp/pow are a few ulp off
            np.testing.assert_allclose(
                got[key].astype(np.float64),
                expected.astype(np.float64),
                rtol=1e-2 if loose else max(case.rtol, 1e-5),
                atol=1e-2 if loose else 1e-5,
                err_msg=key,
            )


def test_render_needs_no_device():
    from qnb.backends.wgsl import render_wgsl

    rendered = render_wgsl(CASES["matmul_f16"].kernel)
    assert rendered.source.startswith("// qnb kernel") and "enable f16;" in rendered.source
    assert rendered.layout.arrays[2] == {
        "name": "out",
        "dtype": "f32",
        "ndim": 2,
        "binding": 2,
        "stored": True,
        "loaded": False,
    }


def _expected(name, a, b, s):
    """NumPy meaning of the tile cases checked by value below."""
    f = a.dtype
    table = {
        "binary_add": lambda: a + b,
        "binary_floordiv": lambda: a // np.maximum(np.abs(b), 1),
        "binary_mod": lambda: a % np.maximum(np.abs(b), 1),
        "binary_pow_scalar": lambda: np.abs(a) ** f.type(s),
        "transpose": lambda: a.T,
        "eye": lambda: a + np.eye(16, dtype=f),
        "reduce_sum_None": lambda: np.full((16, 16), a.sum(), f),
        "reduce_max_0": lambda: np.outer(a.max(axis=0), np.ones(16, f)),
        "reduce_min_1": lambda: np.outer(a.min(axis=1), np.ones(16, f)),
        "row_outer": None,
        "matmul": lambda: a.astype(np.float32) @ b.astype(np.float32) if f == np.float16 else a @ b,
        "tile_get_set": lambda: _set(a, 3, 5, b[7, 2]),
    }
    return table[name]()


def _set(t, i, j, value):
    t = t.copy()
    t[i, j] = value
    return t


@pytest.mark.parametrize(
    "name",
    [
        "binary_add_i32",
        "binary_floordiv_i32",
        "binary_mod_i32",
        "binary_mod_f32",
        "binary_floordiv_f32",
        "binary_pow_scalar_f32",
        "transpose_f32",
        "eye_i32",
        "reduce_sum_None_f32",
        "reduce_max_0_i32",
        "reduce_min_1_f32",
        "matmul_f32",
        "matmul_f16",
        "tile_get_set_f32",
        "tile_get_set_i32",
    ],
)
def test_tile_case_values(backend, name):
    case = CASES[name]
    out = launch(backend, case.kernel, case.inputs)["out"]
    op = name.rsplit("_", 1)[0]
    want = _expected(op, case.inputs["a"], case.inputs["b"], case.inputs["s"])
    if out.dtype.kind == "i":
        np.testing.assert_array_equal(out, want)
    else:
        np.testing.assert_allclose(out, want, rtol=case.rtol * 10, atol=1e-5)


def test_cholesky_and_solve_f32(backend):
    case = CASES["cholesky_solve_f32"]
    a, b = case.inputs["a"].astype(np.float64), case.inputs["b"].astype(np.float64)
    lower = np.linalg.cholesky(a @ a.T + 16 * np.eye(16))
    want = np.linalg.solve(lower, b.T).T  # X @ L.T == B
    out = launch(backend, case.kernel, case.inputs)["out"]
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_windows_control_flow_and_scalars(backend):
    """The memory_control case against a direct NumPy transcription of its IR."""
    case = CASES["memory_control_i32"]
    got = launch(backend, case.kernel, case.inputs, grid=case.grid)
    a, v, n = case.inputs["a"], case.inputs["v"], case.inputs["n"]
    out, w = case.inputs["out"].copy(), case.inputs["w"].copy()
    programs = case.grid[0]
    shared_writes = []
    for pid in range(programs):
        t = np.ones((16, 16), a.dtype)
        rows, cols = a.shape[1], a.shape[2]
        for i in range(16):
            for j in range(16):
                r, c = 2 + i, 1 + j
                if r < rows and c < min(cols - 3, cols):
                    t[i, j] = a[pid, r, c]
        acc, k = 0, 0
        for k in range(16):
            if k < n and k % 2 == 1:
                continue
            if k >= 12:
                break
            acc += t[k, k]
        while k < 18:
            k += 3
        acc += a[pid, k, 1]
        if programs < out.shape[0]:
            # Every program writes its own acc here: a race between programs, so any
            # program's value is a right answer (GPUs run programs in no set order).
            shared_writes.append(acc)
            out[programs, 0, 0] = acc
        out[pid, 15, 15] = k
        vv = np.zeros(16, a.dtype)
        for i in range(16):
            if 3 + i < min(n, len(v)):
                vv[i] += v[3 + i]
            vv[i] += a[pid, i, 2] if i < rows else 0
        for i in range(16):
            if 0 <= pid * 16 + i < len(w):
                w[pid * 16 + i] = vv[i]
        for i in range(16):
            for j in range(16):
                if 1 + i < min(17, out.shape[1]) and j < min(15, out.shape[2]):
                    out[pid, 1 + i, j] = t[i, j]
    np.testing.assert_array_equal(got["w"], w)
    if shared_writes:
        assert got["out"][programs, 0, 0] in shared_writes
        out[programs, 0, 0] = got["out"][programs, 0, 0]
    np.testing.assert_array_equal(got["out"], out)


def test_wgsl_error_maps_to_the_ir_line(backend, monkeypatch):
    from qnb.backends.wgsl import WgslRenderer

    class Broken(WgslRenderer):
        # A deliberately wrong spelling of "add" (test only).
        binary_templates = {**WgslRenderer.binary_templates, "add": "({a} +* {b})"}  # noqa: RUF012

    dtype = D.f32
    a, out = array("a", dtype), array("out", dtype)
    t = var("t", ir.tile(dtype))
    here = ir.Loc(0, 7, 4)
    body = [
        ir.Assign(ir.Loc(0, 2), "t", ir.TileFill(t.type, L, "full", const(2.0, dtype))),
        ir.Assign(here, "t", ir.Binary(t.type, here, "add", t, t)),
        ir.StoreWindow(
            ir.Loc(0, 9),
            t,
            ir.ArrayView("out", out.type),
            const(0, D.i32),
            const(16, D.i32),
            const(0, D.i32),
            const(16, D.i32),
        ),
    ]
    kernel = ir.KernelIR("broken", [a, out], body, {"t": t.type}, [ir.Unit("broken")])
    monkeypatch.setattr(backend, "renderer", Broken)
    with pytest.raises(CompileError) as caught:
        backend.compile(kernel, Options())
    error = caught.value
    assert error.ir_loc == here
    assert "+*" in error.generated_line
    assert error.log and "wgsl:" in error.log


def test_f64_names_the_first_line_that_uses_it(backend):
    kernel, _ = tile_kernel("f64_kernel", D.f64, lambda t, u, s: t)
    with pytest.raises(BackendError, match="WGSL has no f64") as caught:
        backend.render(kernel)
    assert caught.value.ir_loc == ir.Loc(0, 2)


def test_device_arrays_round_trip_and_run_in_place(backend):
    for values in (
        np.arange(7, dtype=np.float16),
        np.array([True, False, True]),
        np.arange(-5, 6, dtype=np.int32),
        np.zeros((0, 3), np.float32),
    ):
        back = backend.to_device(values).numpy()
        assert back.dtype == values.dtype and back.shape == values.shape
        np.testing.assert_array_equal(back, values)
    with pytest.raises(Exception, match="f64"):
        backend.to_device(np.zeros(3))
    case = CASES["transpose_f32"]
    args = {
        k: (backend.to_device(v) if isinstance(v, np.ndarray) else v)
        for k, v in case.inputs.items()
    }
    launcher = backend.load(backend.compile(case.kernel, Options()))
    launcher((1, 1, 1), [args[p.name] for p in case.kernel.params])
    np.testing.assert_array_equal(args["out"].numpy(), case.inputs["a"].T)


def test_bool_arrays_and_pipeline_reuse(backend):
    case = CASES["compare_lt_f32"]
    artifact = backend.compile(case.kernel, Options())
    first, second = backend.load(artifact), backend.load(artifact)
    assert first.pipeline is second.pipeline
    kernel, inputs = tile_kernel(
        "mask", D.f32, lambda t, u, s: ir.Binary(ir.tile(D.bool_), L, "lt", t, u), out_dtype=D.bool_
    )
    got = launch(backend, kernel, inputs)["out"]
    np.testing.assert_array_equal(got, inputs["a"] < inputs["b"])


@pytest.mark.parametrize("holds_tile", [True, False], ids=["block-per-program", "solo"])
@pytest.mark.parametrize("grid", [(70000,), (3, 70000), (2, 3, 70000), (300, 300)])
def test_grids_past_a_dispatch_axis_are_folded(backend, grid, holds_tile):
    # A dispatch has at most 65535 workgroups per axis; qnb folds a larger grid onto x and
    # y and every program still sees its own ids and the grid's sizes. A kernel that holds
    # no tile runs 64 programs per workgroup, always in a row.
    from tests.helpers import check_program_ids

    check_program_ids("wgpu", grid, holds_tile)


@pytest.mark.parametrize("grid", [(1,), (63,), (65,), (7, 50), (3, 5, 20)])
def test_a_kernel_without_tiles_runs_a_program_per_invocation(backend, grid, monkeypatch):
    # 64 programs to a workgroup; invocations past the last program return. With the
    # dispatch limit lowered to 3 workgroups per axis, the larger grids also fold.
    from qnb.backends import wgpu_launch
    from tests.helpers import check_program_ids

    check_program_ids("wgpu", grid)
    monkeypatch.setattr(wgpu_launch, "MAX_WORKGROUPS", 3)
    check_program_ids("wgpu", grid)
    assert wgpu_launch._dispatch((63, 1, 1), 64) == (1, 1, 1)
    assert wgpu_launch._dispatch((3, 5, 20), 64) == (3, 2, 1)  # 5 workgroups, folded


def test_grid_limits(backend):
    case = CASES["transpose_f32"]
    launcher = backend.load(backend.compile(case.kernel, Options()))
    for grid in ((65536, 65536, 1), (65535, 65535, 2)):  # folded, and not (u32 ids)
        with pytest.raises(BackendError, match=f"at most {65535**2} programs"):
            launcher(grid, [case.inputs[p.name] for p in case.kernel.params])
    # 64 programs to a workgroup when the kernel holds no tile: u32 numbering binds first
    from qnb.backends import wgpu

    x, y, z = wgpu._dispatch((2**32 - 64, 1, 1), 64)
    assert max(x, y) <= 65535 and z == 1 and x * y * 64 >= 2**32 - 64
    with pytest.raises(BackendError, match=f"at most {2**32 - 64} programs"):
        wgpu._dispatch((2**16, 2**16, 1), 64)


def test_an_array_passed_twice_is_one_buffer(backend):
    case = CASES["binary_add_f32"]  # out = a + b
    x = case.inputs["a"].copy()
    launcher = backend.load(backend.compile(case.kernel, Options()))
    launcher((1, 1, 1), [x, x, x, 1.0])
    np.testing.assert_allclose(x, case.inputs["a"] * 2)


def test_operands_that_use_scratch_do_not_clobber_each_other(backend):
    """a @ b.T: the transpose goes through scratch after a could have been written there."""
    kernel, inputs = tile_kernel(
        "matmul_transposed",
        D.f32,
        lambda t, u, s: ir.Matmul(
            t.type,
            L,
            ir.Transpose(t.type, L, t),
            ir.Transpose(u.type, L, u),
            ir.Transpose(t.type, L, t),
        ),
    )
    a, b = inputs["a"], inputs["b"]
    got = launch(backend, kernel, inputs)["out"]
    np.testing.assert_allclose(got, a.T @ b.T + a.T, rtol=1e-5, atol=1e-5)


def test_an_array_larger_than_one_binding_is_refused_by_name(backend):
    import qnb
    from tests.helpers import define

    dev = backend._dev()
    if dev.max_binding > 2**29:
        pytest.skip(f"this adapter binds {dev.max_binding} bytes; the test would need as much")
    scope, filename = define("""
        @qnb.kernel
        def head(x, out):
            Vec16.load(x, 0).store(out, 0)
        """)
    big = np.zeros(dev.max_binding // 4 + 16, np.float32)  # 64 bytes over the limit
    with qnb.backend("wgpu"):
        with pytest.raises(BackendError, match="binds at most") as info:
            scope["head"](big, np.zeros(16, np.float32))
        assert "'x'" in info.value.message
        assert info.value.filename == filename and info.value.lineno == 3
        with pytest.raises(BackendError, match="this array is"):
            qnb.to_device(big)
        head = big[: dev.max_binding // 4]  # exactly the limit: fine
        out = np.zeros(16, np.float32)
        scope["head"](head, out)
