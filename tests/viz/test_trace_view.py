"""TraceView: stepping through a recorded trace updates the synced state."""

import numpy as np
import pytest
import traitlets

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


def test_an_out_of_range_step_is_clamped():
    view = TraceView(hand_made_trace())
    view.step = 99
    assert view.step == 2


@pytest.mark.parametrize(
    ("program", "message"),
    [
        (5, r"program index 5 is out of range: this trace has 2 programs"),
        (-4, r"program index -4 is out of range"),
        ((3, 0, 0), r"program \(3, 0, 0\) is not in this trace's grid \(2, 1, 1\)"),
        ((0, 1), r"program \(0, 1, 0\) is not in this trace's grid"),
        ((0, 0, 0, 0), r"a tuple of 1 to 3 ints"),
        (("a",), r"a tuple of 1 to 3 ints"),
        ("0", r"an index into programs, or a program's coordinates"),
    ],
)
def test_a_program_not_in_the_trace_is_refused(program, message):
    view = TraceView(hand_made_trace())
    view.program = 1
    with pytest.raises(traitlets.TraitError, match=message):
        view.program = program
    assert view.program == 1 and view.current_program == (1, 0, 0)


@pytest.mark.parametrize("program", [1, -1, (1,), (1, 0), (1, 0, 0), [1, 0, 0], np.int64(1)])
def test_program_takes_an_index_or_coordinates(program):
    view = TraceView(hand_made_trace())
    view.program = program
    assert view.program == 1  # the synced state stays the index the front end uses
    assert view.current_program == (1, 0, 0) and view.current_step.program == (1, 0, 0)


def test_program_and_step_can_be_chosen_at_construction():
    view = TraceView(hand_made_trace(), program=(1, 0, 0), step=2)
    assert (view.program, view.step) == (1, 2)
    assert view.regions[0]["kind"] == "write" and view.regions[0]["r0"] == 16
    with pytest.raises(traitlets.TraitError, match="not in this trace's grid"):
        TraceView(hand_made_trace(), program=(2, 0, 0))


def test_program_coordinates_on_a_2d_grid():
    import qnb

    @qnb.kernel
    def fill(out: qnb.Array[qnb.f32, 2]):
        i = qnb.program_id(0)
        j = qnb.program_id(1)
        qnb.Tile16.full(10.0 * i + j, qnb.f32).store(out, 16 * j, 16 * i)

    view = TraceView(fill.trace[3, 2](np.zeros((32, 48), np.float32)))
    view.program = (2, 1)
    assert view.program == 5 and view.current_step.program == (2, 1, 0)
    view.program = 4  # an int is still the index into programs
    assert view.current_program == (1, 1, 0)


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
    # arrays show as they were at the step on show: out is still all zeros at step 1
    assert not decode(next(a for a in view.arrays if a["name"] == "out")).any()
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


def shown(view, name):
    return decode(next(a for a in view.arrays if a["name"] == name))


def test_arrays_show_as_they_were_at_the_step():
    import qnb

    @qnb.kernel
    def twice(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
        i = qnb.program_id(0)
        t = qnb.Tile16.load(x, 16 * i, 0)
        t.store(out, 16 * i, 0)
        t = t * 2.0
        t.store(out, 16 * i, 0)

    x = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
    out = np.full_like(x, -1.0)
    view = TraceView(twice.trace[2](x, out))
    view.program = (1, 0, 0)
    ops = [s.op for s in view._steps()]
    assert ops == ["assign", "load", "store", "mul", "store"]
    expected = [
        np.full_like(x, -1.0),  # before any store
        np.full_like(x, -1.0),
        x,  # after the first store (programs run in lockstep: both halves are in)
        x,
        2 * x,  # after the step's own store
    ]
    for step, want in enumerate(expected):
        view.step = step
        np.testing.assert_array_equal(shown(view, "out"), want)
        np.testing.assert_array_equal(shown(view, "x"), x)
        # one colour scale for every step: the values at launch and at the end
        state = next(a for a in view.arrays if a["name"] == "out")
        assert (state["vmin"], state["vmax"]) == (-1.0, 2 * x.max())
    np.testing.assert_array_equal(view.trace.arrays["out"], 2 * x)  # final, unchanged


def test_static_renderings_follow_the_step(monkeypatch):
    pytest.importorskip("matplotlib")
    import qnb
    from qnb.viz import static_render

    drawn = {}
    draw = static_render.draw_heatmap

    def spy(ax, a, *args, title="", **kwargs):
        drawn[title] = np.array(a)
        return draw(ax, a, *args, title=title, **kwargs)

    monkeypatch.setattr(static_render, "draw_heatmap", spy)

    @qnb.kernel
    def copy(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
        t = qnb.Tile16.load(x, 0, 0)
        t.store(out, 0, 0)

    x = np.random.default_rng(2).random((16, 16)).astype(np.float32)
    view = TraceView(copy.trace[1](x, np.zeros_like(x)))
    assert view.num_steps == 2
    before, _ = view._repr_mimebundle_()
    assert before["image/png"].startswith(b"\x89PNG") and not drawn["out"].any()
    view.step = 1
    after, _ = view._repr_mimebundle_()
    np.testing.assert_array_equal(drawn["out"], x)  # the PNG's panel after the store
    assert "store" in after["text/html"] and "step 2/2" in after["text/html"]


def test_a_hand_made_trace_shows_its_final_arrays():
    view = TraceView(hand_made_trace())
    np.testing.assert_array_equal(shown(view, "c"), view.trace.arrays["c"])


# Trace.arrays_at: the arrays replayed to any step -----------------------------------------


def final_tick(trace):
    return max(
        ((p, k) for p in trace.programs for k in range(len(trace.steps(p)))),
        key=lambda pk: trace.steps(pk[0])[pk[1]].tick,
    )


def test_arrays_at_replays_each_store_of_a_loop():
    import qnb

    @qnb.kernel
    def running(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 3]):
        t = qnb.Tile16.load(x, 0, 0)
        acc = qnb.Tile16.zeros(qnb.f32)
        for k in range(3):
            acc = acc + t
            acc.store(out[k], 0, 0)

    x = np.random.default_rng(3).random((16, 16)).astype(np.float32)
    out = np.full((3, 16, 16), 7.0, np.float32)
    trace = running.trace[1](x, out)
    stores = [k for k, s in enumerate(trace.steps(0)) if s.op == "store"]
    assert len(stores) == 3
    for n, k in enumerate(stores):
        want = np.full((3, 16, 16), 7.0, np.float32)
        for m in range(n + 1):
            want[m] = x * (m + 1) if m == 0 else want[m - 1] + x
        np.testing.assert_allclose(trace.arrays_at(0, k)["out"], want, rtol=1e-6)
        np.testing.assert_array_equal(trace.arrays_at(0, k - 1)["out"][n], np.full((16, 16), 7))
    np.testing.assert_array_equal(trace.initial_arrays["out"], np.full((3, 16, 16), 7.0))


def test_arrays_at_covers_masked_vector_and_element_stores():
    import qnb

    @qnb.kernel
    def mixed(x: qnb.Array[qnb.f32, 1], m: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 1]):
        i = qnb.program_id(0)
        v = qnb.Vec16.load(x, 16 * i)
        (v + 1.0).store(x, 16 * i)
        if i == 1:
            qnb.Tile16.full(5.0 * i, qnb.f32).store(m, 3, 2)
        out[i] = x[16 * i] * 10.0

    x = np.arange(48, dtype=np.float32)
    m = np.zeros((20, 20), np.float32)
    out = np.zeros(3, np.float32)
    trace = mixed.trace[3](x.copy(), m.copy(), out.copy())
    first = trace.arrays_at(0, 0)
    np.testing.assert_array_equal(first["x"], x)
    assert not first["m"].any() and not first["out"].any()
    for name, final in trace.arrays_at(*final_tick(trace)).items():
        np.testing.assert_array_equal(final, trace.arrays[name])
    masked = next(k for k, s in enumerate(trace.steps(1)) if s.op == "store" and s.target == "m")
    after = trace.arrays_at(1, masked)["m"]
    assert (after[3:19, 2:18] == 5).all() and after.sum() == 5 * 16 * 16


def test_arrays_at_follows_a_parameter_bound_to_the_same_array():
    import qnb

    @qnb.kernel
    def double(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
        (qnb.Tile16.load(x, 0, 0) * 2.0).store(out, 0, 0)

    a = np.ones((16, 16), np.float32)
    trace = double.trace[1](a, a)
    end = trace.arrays_at(0, -1)
    np.testing.assert_array_equal(end["x"], 2 * np.ones((16, 16)))
    np.testing.assert_array_equal(end["out"], end["x"])


def test_arrays_at_keeps_only_the_written_windows():
    import qnb

    @qnb.kernel
    def copy(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
        i = qnb.program_id(0)
        qnb.Tile16.load(x, 16 * i, 0).store(out, 16 * i, 0)

    x = np.random.default_rng(4).random((64 * 16, 16)).astype(np.float32)
    trace = copy.trace[64](x, np.zeros_like(x))
    kept = sum(w.index.nbytes + w.values.nbytes for w in trace._writes)
    assert kept <= 64 * 256 * (4 + 4)  # each program's 16x16 window, int32 index + f32 value
    np.testing.assert_array_equal(trace.arrays_at(63, -1)["out"], x)


def test_arrays_at_refuses_a_step_that_is_not_there():
    trace = hand_made_trace()
    with pytest.raises(IndexError, match=r"program \(1, 0, 0\) has 3 steps; there is no step 3"):
        trace.arrays_at(1, 3)
    with pytest.raises(KeyError, match="not in this trace's grid"):
        trace.arrays_at((4, 0, 0), 0)


def test_trace_step_repr_is_one_short_line():
    step = hand_made_trace().steps(1)[1]
    text = repr(step)
    assert text == (
        "<TraceStep 1 of program (1, 0, 0), line 12: load \u2192 t; "
        "in a: 32\u00d716 float32, row: 16; out 16\u00d716 float32; reads a[16:32, 0:16]>"
    )
    assert step.output.shape == (16, 16) and step.inputs["a"].shape == (32, 16)  # data kept
    store = hand_made_trace().steps(0)[2]
    assert "\n" not in repr(store) and "writes c[0:16, 0:16]" in repr(store)
