"""The public seams of a kernel: ``qnb.Launch`` (``kernel[grid]``) and
``qnb.Specialization`` (``kernel.specialize(...)``), what tools built on a kernel use."""

from __future__ import annotations

import numpy as np
import pytest

import qnb
from qnb import ir
from qnb.backends.cpu import observer

SCALE = 2.0


@qnb.kernel
def scaled(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    i = qnb.program_id(0)
    t = qnb.Tile16.load(x, i * 16, 0)
    (t * SCALE).store(out, i * 16, 0)


@qnb.kernel
def poke(out: qnb.Array[qnb.f32, 2]):
    i = qnb.program_id(0)
    out[i, 0] = 1.0  # past the array's rows for i >= 16


@qnb.kernel
def generic(x, out):
    qnb.Tile16.load(x, 0, 0).store(out, 0, 0)


def arrays(rows=32):
    x = np.arange(rows * 16, dtype=np.float32).reshape(rows, 16)
    return x, np.zeros_like(x)


# ----------------------------------------------------------------------------- launch


def test_a_launch_names_its_kernel_and_grid():
    launch = scaled[2]
    assert isinstance(launch, qnb.Launch)
    assert launch.kernel is scaled and launch.grid == (2, 1, 1)
    assert scaled[2, 3].grid == (2, 3, 1) and scaled[(4,)].grid == (4, 1, 1)
    assert launch is scaled[2]  # made once per grid
    assert repr(launch) == f"<qnb launch {scaled.parsed.qualname}[(2, 1, 1)]>"
    with pytest.raises(AttributeError):
        launch.grid = (3, 1, 1)  # read-only: a launch is shared by every k[2]
    x, out = arrays()
    launch(x, out)
    np.testing.assert_array_equal(out, x * 2)


def test_a_launch_specialises_with_its_grid():
    x, out = arrays()
    made = scaled[2].specialize(x, out, backend="cpu")
    assert made.grid == (2, 1, 1) and made.backend == "cpu" and made.kernel is scaled


# ----------------------------------------------------------------------------- what it holds


def test_a_specialisation_holds_the_launch_resolution():
    x, out = arrays()
    made = scaled.specialize(x, out, grid=2, backend="cpu")
    assert [spec.described() for spec in made.signature] == ["Array[f32, 2]"] * 2
    assert made.snapshot == scaled.captures.snapshot()
    assert isinstance(made.ir, ir.KernelIR) and [p.name for p in made.ir.params] == ["x", "out"]
    assert made.source("ir") == scaled.source("ir") == ir.format_kernel(made.ir)
    assert made.source("wgsl") == scaled.source("wgsl")
    event = made.compile()
    assert made.key.digest == event.key and made.event is event
    assert set(made.components) == set(qnb.cache.COMPONENTS)
    assert list(made.components["captured"]) == ["SCALE"]
    again = scaled.specialize(x, out, grid=2, backend="cpu")
    assert again.compile().outcome == "memory-hit" and again.key.digest == made.key.digest
    assert again.ir is made.ir  # the kernel keeps a launch's IR: tools ask for it often


def test_the_backend_defaults_to_the_kernels_then_the_current_one():
    x, out = arrays()
    with qnb.backend("cpu"):
        assert scaled.specialize(x, out).backend == "cpu"
    assert poke.specialize(np.zeros((4, 4), np.float32), backend="cpu").on("wgpu").backend == "wgpu"
    with pytest.raises(qnb.BackendError, match="nosuch"):
        scaled.specialize(x, out, backend="nosuch")


def test_example_arguments_only_where_parameters_are_not_annotated():
    assert [s.described() for s in scaled.specialize().signature] == ["Array[f32, 2]"] * 2
    with pytest.raises(qnb.QnbTypeError, match="pass example arguments"):
        generic.specialize()
    x = np.ones((16, 16), np.float64)
    assert generic.specialize(x, x).signature[0].dtype is qnb.f64


# ----------------------------------------------------------------------------- running it


def test_launch_runs_the_backend_with_arguments_of_its_signature():
    x, out = arrays()
    made = scaled.specialize(x, out, grid=2, backend="cpu")
    made.launch([x, out])
    np.testing.assert_array_equal(out, x * 2)
    with pytest.raises(qnb.QnbTypeError, match="must be f32") as caught:
        made.launch([x.astype(np.float64), out])  # refused as a launch refuses it
    assert caught.value.lineno == scaled.firstlineno  # at the parameter, on the def line
    loose = generic.specialize(x, out, backend="cpu")
    wide = x.astype(np.float64)
    with pytest.raises(qnb.QnbTypeError, match="do not fit this specialisation") as caught:
        loose.launch([wide, wide])  # a launch of its own: another signature
    assert caught.value.lineno == generic.firstlineno


def test_runtime_errors_name_the_users_line():
    out = np.zeros((16, 4), np.float32)
    made = poke.specialize(out, grid=20, backend="cpu")
    with pytest.raises(qnb.QnbIndexError) as caught:
        made.launch([out])
    store_line = poke.firstlineno + 2
    assert caught.value.lineno == store_line and caught.value.filename == __file__
    store = made.ir.body[-1]
    assert made.position(store.loc) == (__file__, store_line, 4)


def test_trace_and_interpret_run_the_cpu_interpreter():
    x, out = arrays()
    made = scaled.specialize(x, out, grid=2, backend="cpu")
    trace = made.trace([x, out])
    assert isinstance(trace, qnb.Trace) and trace.programs == [(0, 0, 0), (1, 0, 0)]
    assert [s.op for s in trace.steps(1)] == [s.op for s in scaled.trace[2](x, out).steps(1)]
    one = made.trace([x, out], programs=range(1, 2))
    assert one.programs == [(1, 0, 0)]

    class Stores(observer.Observer):
        count = 0

        def stored(self, stmt, value):
            self.count += 1

    watcher = Stores()
    out = np.zeros_like(x)  # (the traces above wrote to theirs, as a launch does)
    results = made.interpret([x, out], observer=watcher)
    assert watcher.count == 1  # one store statement, run for both programs at once
    np.testing.assert_array_equal(results[1], x * 2)
    assert results[0] is not x and results[1] is not out  # on copies
    assert not out.any()  # the arguments passed are not changed


def test_interpret_keeps_one_array_passed_twice_one_array():
    x = np.ones((16, 16), np.float32)
    results = scaled.specialize(x, x, backend="cpu").interpret([x, x])
    assert results[0] is results[1] and results[0] is not x
    np.testing.assert_array_equal(results[0], 2 * x)


def test_a_variant_has_its_own_key_and_the_same_ir():
    x, out = arrays()
    made = scaled.specialize(x, out, grid=2, backend="cpu")
    probe = made.variant(probe=True)
    assert probe.kernel is scaled.variant(probe=True) and probe.kernel is not scaled
    assert probe.ir is made.ir
    debug = made.variant(debug=True)
    assert debug.components["options"]["debug"] is True
    assert debug.key.digest != made.key.digest
    with pytest.raises(qnb.QnbTypeError, match="compile options are"):
        scaled.variant(colour="blue")


def test_a_captured_value_changed_after_specialising_is_refused_not_served():
    global SCALE
    x, out = arrays()
    made = scaled.specialize(x, out, grid=2, backend="cpu")
    SCALE = 5.0
    try:
        with pytest.raises(qnb.QnbCaptureError, match="specialise again"):
            made.ir  # noqa: B018 - lowering now would read 5.0
        fresh = scaled.specialize(x, out, grid=2, backend="cpu")
        fresh.launch([x, out])
        np.testing.assert_array_equal(out, x * 5)
        assert fresh.key.digest != made.key.digest
    finally:
        SCALE = 2.0


def test_compile_errors_from_source_name_the_users_line():
    @qnb.kernel
    def wide(x: qnb.Array[qnb.f64, 2]):
        qnb.Tile16.load(x, 0, 0).store(x, 0, 0)

    with pytest.raises(qnb.BackendError, match="f64") as caught:
        wide.specialize().source("wgsl")
    assert caught.value.filename == __file__ and caught.value.lineno is not None
