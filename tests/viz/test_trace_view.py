"""TraceView: stepping through a recorded trace updates the synced state."""

import numpy as np
import pytest

pytest.importorskip("anywidget")

from qnb.trace import Region, Trace, TraceStep
from qnb.viz import TraceView
from qnb.viz.arrays import decode

SOURCE = [
    "def add(a, b, c):",
    "    i = qnb.program_id(0)",
    "    t = Tile16.load(a, 16 * i, 0)",
    "    t.store(c, 16 * i, 0)",
]


def hand_made_trace() -> Trace:
    """A two-program trace shaped like the cpu backend's (no kernel API needed)."""
    a = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
    trace = Trace("add", (2, 1, 1), "<qkernel-cell-1>", 10, SOURCE, {"a": a, "c": a.copy()})
    for p in range(2):
        tile = a[16 * p : 16 * p + 16]
        program = (p, 0, 0)
        trace._steps[program] = [
            TraceStep(0, program, "<qkernel-cell-1>", 11, SOURCE[1], "assign", "i", {}, p),
            TraceStep(
                1,
                program,
                "<qkernel-cell-1>",
                12,
                SOURCE[2],
                "load",
                "t",
                {"a": a, "row": 16 * p},
                tile,
                reads=[Region("a", 16 * p, 16 * p + 16, 0, 16)],
            ),
            TraceStep(
                2,
                program,
                "<qkernel-cell-1>",
                13,
                SOURCE[3],
                "store",
                "c",
                {"t": tile},
                tile,
                writes=[Region("c", 16 * p, 16 * p + 16, 0, 16)],
            ),
        ]
    return trace


def test_initial_state():
    view = TraceView(hand_made_trace())
    assert view.kernel_name == "add"
    assert view.programs == [[0, 0, 0], [1, 0, 0]]
    assert (view.program, view.step, view.num_steps) == (0, 0, 3)
    assert view.source == SOURCE and view.first_line == 10
    assert view.current_line == 11
    assert [a["name"] for a in view.arrays] == ["a", "c"]
    assert view.scalars == [{"name": "i", "role": "out", "text": "0"}]


def test_step_shows_tiles_and_regions():
    view = TraceView(hand_made_trace())
    view.step = 1
    assert view.current_line == 12 and view.op_text == "load → t"
    # the whole array operand is too big for a tile: it shows as text, the tile as a heatmap
    assert [t["name"] for t in view.tiles] == ["t"]
    assert {s["name"] for s in view.scalars} == {"a", "row"}
    np.testing.assert_array_equal(decode(view.tiles[0]), view.current_step.output)
    assert view.regions == [
        {"array": "a", "r0": 0, "r1": 16, "c0": 0, "c1": 16, "batch": None, "kind": "read"}
    ]


def test_program_switch_keeps_the_step_and_moves_regions():
    view = TraceView(hand_made_trace())
    view.step = 2
    view.program = 1
    assert view.step == 2 and view.current_step.program == (1, 0, 0)
    assert view.regions[0]["kind"] == "write" and view.regions[0]["r0"] == 16


def test_out_of_range_values_are_clamped():
    view = TraceView(hand_made_trace())
    view.step = 99
    assert view.step == 2
    view.program = -4
    assert view.program == 0


def test_static_fallback():
    view = TraceView(hand_made_trace())
    view.step = 1
    data, _ = view._repr_mimebundle_()
    assert data["text/plain"] == "TraceView('add', program (0, 0, 0), step 2/3)"
    html = data["text/html"]
    assert "rgba(255,200,0,0.35)" in html and "Tile16.load(a, 16 * i, 0)" in html
    pytest.importorskip("matplotlib")
    assert data["image/png"].startswith(b"\x89PNG")


def test_real_trace_from_a_kernel():
    import qnb

    @qnb.kernel
    def scale(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2], s: qnb.f32):
        i = qnb.program_id(0)
        t = qnb.Tile16.load(x, 16 * i, 0)
        t = t * s
        t.store(out, 16 * i, 0)

    x = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
    out = np.zeros_like(x)
    view = TraceView(scale.trace[2](x, out, 2.0))
    assert view.programs == [[0, 0, 0], [1, 0, 0]]
    assert view.source[0].lstrip().startswith("def scale(")
    assert {a["name"] for a in view.arrays} == {"x", "out"}
    np.testing.assert_array_equal(decode(next(a for a in view.arrays if a["name"] == "out")), 2 * x)
    seen = set()
    for program in range(2):
        view.program = program
        for step in range(view.num_steps):
            view.step = step
            line = view.source[view.current_line - view.first_line]
            assert view.current_step.line.strip() == line.strip()
            seen.update((r["array"], r["kind"], r["r0"]) for r in view.regions)
    assert ("x", "read", 16) in seen and ("out", "write", 16) in seen


@pytest.mark.parametrize("value", [None, "trace", np.zeros(3)])
def test_needs_a_trace(value):
    with pytest.raises(TypeError, match=r"kernel\.trace"):
        TraceView(value)
