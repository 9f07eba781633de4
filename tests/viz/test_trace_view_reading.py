"""TraceView as a learner reads it, on real cpu traces: a colour scale per tile where an op
changes the range (and a shared one on request), the loop iteration of each step, the
kernel's dtype in the labels, and one numbering of steps in the API and the label."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("anywidget")

import qnb
from qnb import Tile, Tile16
from qnb.viz import TraceView
from qnb.viz.arrays import decode


@qnb.kernel
def softmax_rows(x, out):
    r = qnb.program_id(0) * 8
    s = Tile[8, 16].load(x, r, 0)
    m = s.max(axis=1, keepdims=True)
    p = qnb.exp(s - m)
    (p / p.sum(axis=1, keepdims=True)).store(out, r, 0)


def _softmax_view(**options) -> TraceView:
    x = np.random.default_rng(0).uniform(-4.0, 4.6, (16, 16)).astype(np.float32)
    trace = softmax_rows.trace[2](x, np.zeros_like(x))
    (k,) = [s.index for s in trace.steps(0) if s.target == "p"]
    return TraceView(trace, step=k, **options)


def test_a_tile_after_exp_has_its_own_colour_scale():
    view = _softmax_view()
    step = view.current_step
    assert view.tile_scale == "per-tile"
    tiles = {(t["role"], t["name"]): t for t in view.tiles}
    out = tiles[("out", "p")]
    p = step.output
    assert (out["vmin"], out["vmax"]) == (pytest.approx(p.min()), pytest.approx(p.max()))
    assert out["vmin"] > 0 and out["vmax"] == pytest.approx(1.0)  # exp(0) in every row
    s = tiles[("in", "s")]
    assert (s["vmin"], s["vmax"]) == (
        pytest.approx(step.inputs["s"].min()),
        pytest.approx(step.inputs["s"].max()),
    )
    assert s["vmin"] < -2 and s["vmax"] > 2
    np.testing.assert_array_equal(decode(out), p)


def test_a_shared_scale_stays_available():
    view = _softmax_view(scale="shared")
    assert view.tile_scale == "shared"
    low, high = view.tile_range
    for tile in view.tiles:
        assert (tile["vmin"], tile["vmax"]) == (low, high)
    view.scale = "auto"  # the option can change on a view on show
    assert view.tile_scale == "per-tile"


def test_the_static_png_gives_each_tile_its_colour_bar():
    pytest.importorskip("matplotlib")
    from qnb.viz import static_render

    bars = {}
    draw = static_render.draw_heatmap

    def spy(ax, a, vmin, vmax, *args, title="", **kwargs):
        bars[title] = (vmin, vmax, kwargs["colour_bar"])
        return draw(ax, a, vmin, vmax, *args, title=title, **kwargs)

    view = _softmax_view()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(static_render, "draw_heatmap", spy)
        view._repr_mimebundle_()
    assert bars["out p"][2] and bars["in s"][2]  # a colour bar beside each
    assert bars["out p"][:2] != bars["in s"][:2]


@qnb.kernel
def blocked_matmul(a, b, out):
    acc = Tile16.zeros(qnb.f32)
    for kb in range(a.shape[1] // 16):
        acc = qnb.mma(Tile16.load(a, 0, kb * 16), Tile16.load(b, kb * 16, 0), acc)
    acc.store(out, 0, 0)


def _matmul_view() -> TraceView:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 64)).astype(np.float32)
    b = rng.standard_normal((64, 16)).astype(np.float32)
    return TraceView(blocked_matmul.trace(a, b, np.zeros((16, 16), np.float32)))


def test_each_step_in_a_loop_says_its_iteration():
    view = _matmul_view()
    assert [s.loops for s in view.trace.steps()] == [{}, *({"kb": k} for k in range(4)), {}]
    view.step = 3
    assert view.loop_text == "kb = 2" and view.op_text == "mma \u2192 acc"
    assert repr(view) == "TraceView('blocked_matmul', program (0, 0, 0), step 3 (0\u20135), kb = 2)"
    view.step = 5
    assert view.loop_text == "" and view.op_text == "store \u2192 out"


def test_one_numbering_of_steps():
    view = _matmul_view()
    view.step = 5
    assert view.current_step.index == 5 and view.step_text == "step 5 (0\u20135)"
    view.step = -1
    assert view.step == 5 and view.step_text == "step 5 (0\u20135)"


def test_labels_carry_the_kernels_dtype():
    view = _matmul_view()
    view.step = 2
    (changed,) = [t for t in view.tiles if t["role"] == "changed"]
    assert changed["dtype_name"] == "float32"  # (its values: out - in, in f64)
    assert all(t["dtype_name"] == "float32" for t in view.tiles)
    step = view.current_step
    np.testing.assert_allclose(
        decode(changed), step.output.astype(np.float64) - step.inputs["acc"], rtol=0, atol=0
    )
