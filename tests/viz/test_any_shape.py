"""Tiles and vecs of any shape in the widgets: TraceView's tiles, the kernel's own tile
grid over arrays of any size, TileView's ``tile=(M, N)``, thin and large static PNGs."""

import numpy as np
import pytest

pytest.importorskip("anywidget")

from qnb.trace import Region, Trace, TraceStep
from qnb.viz import TileView, TraceView
from qnb.viz.arrays import decode
from qnb.viz.trace_view import _is_tile_value, tile_shapes

SOURCE = [
    "def blocks(x, y):",
    "    t = Tile[64, 32].load(x, 64 * i, 32 * j)",
    "    u = t @ w",
    "    u.store(y, 64 * i, 0)",
]
SHAPES = [(1, 128), (128, 1), (8, 32), (64, 64), (128, 64), (128,), (16, 16)]


def shapes_trace() -> Trace:
    """A one-program trace (as the cpu backend records one) whose steps hold tiles and
    vecs of many shapes, over a 100x72 array (not a multiple of 16) read in 64x32 windows."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((100, 72)).astype(np.float32)
    y = np.zeros((100, 64), np.float32)
    program = (0, 0, 0)
    steps = []
    for k, (r0, c0) in enumerate([(0, 0), (64, 32), (64, 64)]):  # the last two are partial
        window = x[r0 : r0 + 64, c0 : c0 + 32]
        tile = np.zeros((64, 32), np.float32)
        tile[: window.shape[0], : window.shape[1]] = window
        steps.append(
            TraceStep(
                k,
                program,
                "<qkernel-cell-2>",
                21,
                SOURCE[1],
                "load",
                "t",
                {"x": x},
                tile,
                reads=[Region("x", r0, min(r0 + 64, 100), c0, min(c0 + 32, 72))],
            )
        )
    for shape in SHAPES:
        value = rng.standard_normal(shape).astype(np.float32)
        steps.append(
            TraceStep(
                len(steps),
                program,
                "<qkernel-cell-2>",
                22,
                SOURCE[2],
                "mul",
                "u",
                {"t": value},
                value * 2,
            )
        )
    out = rng.standard_normal((64, 64)).astype(np.float32)
    steps.append(
        TraceStep(
            len(steps),
            program,
            "<qkernel-cell-2>",
            23,
            SOURCE[3],
            "store",
            "y",
            {"u": out},
            out,
            writes=[Region("y", 64, 100, 0, 64)],
        )
    )
    arrays = {"x": x, "y": y}
    steps = {program: steps}
    return Trace.recorded("blocks", (1, 1, 1), "<qkernel-cell-2>", 20, SOURCE, arrays, steps=steps)


@pytest.mark.parametrize("k", range(len(SHAPES)))
def test_every_tile_and_vec_shape_shows_as_a_heatmap(k):
    view = TraceView(shapes_trace(), step=3 + k)
    shape = list(SHAPES[k])
    assert [(t["role"], t["shape"]) for t in view.tiles] == [("in", shape), ("out", shape)]
    np.testing.assert_array_equal(decode(view.tiles[1]), view.current_step.output)
    assert view.scalars == []


def test_an_array_operand_stays_text_and_a_partial_load_is_a_whole_tile():
    view = TraceView(shapes_trace(), step=2)  # the load at (64, 64): 36x8 of x exist
    assert [(t["role"], t["shape"]) for t in view.tiles] == [("out", [64, 32])]
    assert view.scalars == [{"name": "x", "role": "in", "text": "array 100×72 float32"}]
    assert view.regions[0]["r1"] - view.regions[0]["r0"] == 36


def test_the_grid_over_an_array_is_the_kernels_tile_shape():
    trace = shapes_trace()
    # x: read in 64x32 windows (the partial ones clamped smaller); y: written 36x64
    assert tile_shapes(trace) == {"x": [64, 32], "y": [36, 64]}
    view = TraceView(trace)
    assert {a["name"]: a["tile"] for a in view.arrays} == {"x": [64, 32], "y": [36, 64]}
    arrays = {"a": np.zeros((40, 40))}
    untouched = Trace.recorded("k", (1, 1, 1), "f", 1, ["def k(a):"], arrays, steps={(0, 0, 0): []})
    assert tile_shapes(untouched) == {"a": [16, 16]}


def test_an_axis_touched_one_element_wide_has_no_grid_across_it():
    arrays = {"rows": np.zeros((40, 50)), "cells": np.zeros((6, 7)), "v": np.zeros(300)}
    reads = [Region("rows", 3, 4, 0, 50), Region("cells", 2, 3, 5, 6), Region("v", 0, 1, 0, 128)]
    steps = {(0, 0, 0): [TraceStep(0, (0, 0, 0), "f", 1, "", "load", "t", reads=reads)]}
    trace = Trace.recorded("k", (1, 1, 1), "f", 1, ["def k(rows, cells, v):"], arrays, steps=steps)
    # Vec.load_row: no lines between rows; element reads: no grid at all; a 1-D array: one row
    assert tile_shapes(trace) == {"rows": [40, 50], "cells": [6, 7], "v": [1, 128]}


@pytest.mark.parametrize(
    ("shape", "is_tile"),
    [
        ((128, 128), True),
        ((1, 128), True),
        ((128, 129), False),
        ((16384,), True),
        ((16385,), False),
        ((0, 4), False),
        ((2, 2, 2), False),
    ],
)
def test_what_counts_as_a_tile_value(shape, is_tile):
    assert _is_tile_value(np.zeros(shape, np.float32)) is is_tile


def spy_on_heatmaps(monkeypatch):
    pytest.importorskip("matplotlib")
    from qnb.viz import static_render

    calls = {}
    draw = static_render.draw_heatmap

    def spy(ax, a, *args, title="", **kwargs):
        image = draw(ax, a, *args, title=title, **kwargs)
        calls[title] = {"shape": np.shape(a), "texts": len(ax.texts), **kwargs}
        return image

    monkeypatch.setattr(static_render, "draw_heatmap", spy)
    return calls


def test_the_static_png_of_a_large_tile_draws_its_grid_and_no_values(monkeypatch):
    calls = spy_on_heatmaps(monkeypatch)
    view = TraceView(shapes_trace(), step=3 + SHAPES.index((128, 64)))
    data, _ = view._repr_mimebundle_()
    assert "image/png" in data or "<img" in data["text/html"]
    # 8,192 values would not fit: hover (live) or the colour bar tells them
    assert calls["out u"]["shape"] == (128, 64) and calls["out u"]["texts"] == 0
    assert calls["out u"]["values"] is False
    assert calls["x"]["tile"] == (64, 32) and calls["y"]["tile"] == (36, 64)
    view.step = 3 + SHAPES.index((16, 16))
    view._repr_mimebundle_()
    assert calls["out u"]["texts"] == 256  # a 16x16 tile still writes its values


def axes_drawn(a, size=(4, 4), **kwargs):
    pytest.importorskip("matplotlib")
    from qnb.viz import static_render

    fig = static_render.new_figure(*size)
    ax = fig.add_subplot()
    static_render.draw_heatmap(ax, a, float(np.min(a)), float(np.max(a)), **kwargs)
    fig.canvas.draw()
    return ax


@pytest.mark.parametrize("shape", [(1, 128), (128, 1), (2, 512)])
def test_a_thin_tile_keeps_cells_one_can_see_in_a_square_panel(shape):
    from qnb.viz.static_render import THIN_PX

    ax = axes_drawn(np.arange(np.prod(shape), dtype=np.float32).reshape(shape))
    box = ax.get_window_extent()  # (equal cells would be 2px across: 283px / 128)
    assert min(box.width, box.height) >= 0.8 * THIN_PX  # (the colour bar takes a little)


def test_the_static_grid_follows_the_tile_shape_on_an_array_of_any_size():
    a = np.arange(100 * 72, dtype=np.float32).reshape(100, 72)
    ax = axes_drawn(a, tile=(64, 32))
    rows = sorted(
        line.get_ydata()[0] for line in ax.lines if line.get_ydata()[0] == line.get_ydata()[1]
    )
    cols = sorted(
        line.get_xdata()[0] for line in ax.lines if line.get_xdata()[0] == line.get_xdata()[1]
    )
    assert rows == [63.5] and cols == [31.5, 63.5]
    default = axes_drawn(a)  # the 16x16 grid
    assert len(default.lines) == 100 // 16 + 72 // 16


def test_tile_view_takes_the_kernels_tile_shape(monkeypatch):
    view = TileView(np.zeros((100, 72), np.float32), tile=(64, 32))
    assert view.tile == [64, 32] and TileView(np.zeros(4)).tile == [16, 16]
    calls = spy_on_heatmaps(monkeypatch)
    view._repr_mimebundle_()
    assert next(iter(calls.values()))["tile"] == (64, 32)
    for bad in [(0, 4), (4,), (True, 4)]:
        with pytest.raises(Exception, match="two positive ints"):
            TileView(np.zeros(4), tile=bad)


def test_compare_view_outlines_every_differing_element_of_a_64x64_tile():
    from qnb.viz.compare_view import _marks

    bad = np.ones((64, 64), bool)
    bad[3, 5] = False
    marks = _marks(bad)
    assert len(marks) == 4095 and {"r0": 3, "c0": 5} not in [
        {"r0": m["r0"], "c0": m["c0"]} for m in marks
    ]
    assert [(m["r0"], m["c0"]) for m in _marks(np.arange(8) % 3 == 0)] == [(0, 0), (0, 3), (0, 6)]


# Real kernels with Tile[M, N] (cpu backend) --------------------------------------------------


def test_a_real_trace_of_tile_64x32_blocks_over_a_100x72_array():
    import qnb

    @qnb.kernel
    def blocks(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
        row = qnb.program_id(0) * 64
        col = qnb.program_id(1) * 32
        t = qnb.Tile[64, 32].load(x, row, col)
        (t * 2.0).store(out, row, col)

    x = np.random.default_rng(8).standard_normal((100, 72)).astype(np.float32)
    out = np.zeros_like(x)
    trace = blocks.trace[2, 3](x, out)
    np.testing.assert_array_equal(out, 2 * x)
    view = TraceView(trace, program=(1, 2), step=2)  # the load of the corner: 36x8 exist
    assert [(t["role"], t["shape"]) for t in view.tiles] == [("out", [64, 32])]
    tile = decode(view.tiles[0])
    np.testing.assert_array_equal(tile[:36, :8], x[64:, 64:])
    assert not tile[36:].any() and not tile[:, 8:].any()
    assert {a["name"]: a["tile"] for a in view.arrays} == {"x": [64, 32], "out": [64, 32]}


def test_a_real_trace_of_vec_rows_and_a_broadcast():
    import qnb

    @qnb.kernel
    def centre_rows(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
        row = qnb.program_id(0)
        v = qnb.Vec[128].load_row(x, row, 0)
        t = qnb.Tile[1, 128].zeros(qnb.f32) + v[None, :]
        (t - t.max(axis=1, keepdims=True)).store(out, row, 0)

    x = np.random.default_rng(9).standard_normal((5, 100)).astype(np.float32)
    out = np.full_like(x, np.nan)
    view = TraceView(centre_rows.trace[5](x, out))
    np.testing.assert_allclose(out, x - np.maximum(x.max(axis=1, keepdims=True), 0))
    shapes = {}
    for k in range(view.num_steps):
        view.step = k
        shapes[view.current_step.op] = [t["shape"] for t in view.tiles]
    assert shapes["load"] == [[128]]  # the Vec[128], a heatmap
    assert [128] in shapes["add"] and [1, 128] in shapes["add"]
    # rows are touched one at a time: no grid lines between them
    assert {a["name"]: a["tile"] for a in view.arrays} == {"x": [5, 100], "out": [5, 100]}
