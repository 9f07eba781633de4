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


def hand_made_trace(without_steps=()) -> Trace:
    """A two-program trace shaped like the cpu backend's (no kernel API needed); the
    programs in ``without_steps`` have none."""
    a = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
    steps = {}
    for p in range(2):
        tile = a[16 * p : 16 * p + 16]
        program = (p, 0, 0)
        steps[program] = [
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
    steps.update({(p, 0, 0): [] for p in without_steps})
    arrays = {"a": a, "c": a.copy()}
    return Trace.recorded("add", (2, 1, 1), "<qkernel-cell-1>", 10, SOURCE, arrays, steps=steps)


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


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (3, r"step 3 is out of range: program \(1, 0, 0\) has 3 steps \(0 to 2, or -3 to -1"),
        (-4, r"step -4 is out of range"),
        (True, r"expected an index into the program's steps .* not the bool True"),
        (None, r"expected an index into the program's steps"),
    ],
)
def test_a_step_not_in_the_program_is_refused(step, message):
    view = TraceView(hand_made_trace(), program=1, step=1)
    with pytest.raises(traitlets.TraitError, match=message):
        view.step = step
    assert view.step == 1
    with pytest.raises(traitlets.TraitError, match=message):
        TraceView(hand_made_trace(), program=1, step=step)


@pytest.mark.parametrize(("step", "index"), [(-1, 2), (-3, 0), (np.int64(-2), 1)])
def test_a_negative_step_counts_from_the_end(step, index):
    view = TraceView(hand_made_trace(), step=step)
    assert view.step == index and view.current_step is view.trace.steps(0)[index]
    # one numbering: the label says the index view.step and TraceStep.index hold
    assert repr(view) == f"TraceView('add', program (0, 0, 0), step {index} (0\u20132))"
    assert view.step_text == f"step {index} (0\u20132)" and view.current_step.index == index


def test_a_program_is_not_a_bool():
    view = TraceView(hand_made_trace())
    with pytest.raises(traitlets.TraitError, match="not the bool True"):
        view.program = True
    with pytest.raises(traitlets.TraitError, match="a tuple of 1 to 3 ints"):
        view.program = (True, 0)
    assert view.program == 0


def test_a_program_with_no_steps_says_so():
    trace = hand_made_trace(without_steps=[1])
    view = TraceView(trace, step=2)
    view.program = 1  # the step follows to the only one there is
    assert (view.step, view.num_steps, view.op_text) == (0, 0, "(no steps)")
    assert repr(view).endswith("no steps)") and view.step_text == "no steps"
    assert "no steps" in view._repr_mimebundle_()[0]["text/html"]
    with pytest.raises(traitlets.TraitError, match="has 0 steps"):
        view.step = 1


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
    assert data["text/plain"] == "TraceView('add', program (0, 0, 0), step 1 (0\u20132))"
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
    assert "store" in after["text/html"] and "step 1 (0\u20131)" in after["text/html"]


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


# Parameters bound to overlapping memory ---------------------------------------------------

ALIASED = {
    # name: (the launch's memory, the two parameters as views of it)
    "shifted": (np.zeros((17, 16)), lambda m: (m[:-1], m[1:])),
    "reshaped": (np.arange(256.0), lambda m: (m.reshape(16, 16), m.reshape(8, 32))),
    "prefix": (np.arange(512.0).reshape(32, 16), lambda m: (m, m[:8])),
    "slab": (np.arange(512.0).reshape(2, 16, 16), lambda m: (m[1], m.reshape(32, 16))),
    "middle": (np.arange(1024.0).reshape(64, 16), lambda m: (m[4:40], m[10:20])),
    "same": (np.ones((16, 16)), lambda m: (m, m)),
}


def bump_kernel():
    import qnb

    @qnb.kernel
    def bump(src: qnb.Array[qnb.f32, 2], dst: qnb.Array[qnb.f32, 2]):
        t = qnb.Tile16.load(src, 0, 0)
        (t + 1.0).store(dst, 0, 0)

    return bump


def bumped(memory, views):
    """What ``bump`` leaves, by NumPy: each parameter before and after its store."""
    memory = memory.astype(np.float32)
    src, dst = views(memory)
    before = {"src": src.copy(), "dst": dst.copy()}
    tile = np.zeros((16, 16), np.float32)
    window = src[:16, :16]
    tile[: window.shape[0], : window.shape[1]] = window
    target = dst[:16, :16]
    target[...] = (tile + 1)[: target.shape[0], : target.shape[1]]
    return before, {"src": src.copy(), "dst": dst.copy()}


@pytest.mark.parametrize("case", list(ALIASED))
def test_arrays_at_shows_a_store_in_every_parameter_of_the_same_memory(case):
    memory, views = ALIASED[case]
    before, after = bumped(memory, views)
    trace = bump_kernel().trace[1](*views(memory.astype(np.float32)))
    assert [s.op for s in trace.steps(0)] == ["load", "store"]
    for step, want in [(0, before), (1, after)]:
        got = trace.arrays_at(0, step)
        for name in ("src", "dst"):
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"{name} at {step}")
    for name in ("src", "dst"):  # the final arrays are what the run left, as they were
        np.testing.assert_array_equal(trace.arrays[name], after[name])
        np.testing.assert_array_equal(trace.arrays_at(0, -1)[name], trace.arrays[name])


def test_arrays_at_replays_overlapping_parameters_of_another_view_in_a_loop():
    import qnb

    @qnb.kernel
    def smear(a: qnb.Array[qnb.f32, 1], b: qnb.Array[qnb.f32, 2]):
        for k in range(3):
            v = qnb.Vec16.load(a, 16 * k)
            (v + 1.0).store(a, 16 * k + 16)
        qnb.Tile16.full(-1.0, qnb.f32).store(b, 3, 0)

    x = np.zeros(16 * 16, np.float32)
    trace = smear.trace[1](x, x.reshape(16, 16))
    stores = [k for k, s in enumerate(trace.steps(0)) if s.op == "store"]
    expected = np.zeros(256, np.float32)
    for k, step in zip(range(3), stores):
        expected[16 * k + 16 : 16 * k + 32] = k + 1
        got = trace.arrays_at(0, step)
        np.testing.assert_array_equal(got["a"], expected)
        np.testing.assert_array_equal(got["b"], expected.reshape(16, 16))
    np.testing.assert_array_equal(trace.arrays_at(0, -1)["a"], x)  # the final store too
    np.testing.assert_array_equal(trace.arrays["b"], x.reshape(16, 16))


def test_parameters_that_do_not_overlap_are_replayed_on_their_own():
    from qnb.trace import SharedMemory

    x = np.zeros((32, 16), np.float32)
    assert SharedMemory.find({"a": x[:16], "b": x[16:]}) == []
    assert SharedMemory.find({"c": x[::2], "d": x[1::2]}) == []  # interleaved, not shared
    groups = SharedMemory.find({"a": x[:16], "b": x[8:24], "c": x[20:], "e": np.zeros(3)})
    assert [sorted(g.layouts) for g in groups] == [["a", "b", "c"]]
    # the launch's bytes of the memory they span, and no more
    assert groups[0].initial.nbytes == x.nbytes


# Where a step ran: the kernel, or a func from another cell ---------------------------------


def test_a_step_in_a_func_from_another_cell_shows_that_funcs_source():
    from tests.helpers import define

    funcs, func_file = define(
        """
        @qnb.func
        def bump(x, r):
            t = Tile16.load(x, r, 0)
            (t * 2.0).store(x, r, 0)
        """
    )
    kernels, kernel_file = define(
        """
        @qnb.kernel
        def main(x: qnb.Array[qnb.f32, 2]):
            r = qnb.program_id(0) * 16
            bump(x, r)
            x[r, 0] = 7.0
        """,
        {"bump": funcs["bump"]},
    )
    trace = kernels["main"].trace[1](np.ones((16, 16), np.float32))
    view = TraceView(trace)
    seen = {}
    for k, step in enumerate(trace.steps(0)):
        view.step = k
        highlighted = [
            text for n, text in enumerate(view.source) if view.first_line + n == view.current_line
        ]
        assert [line.strip() for line in highlighted] == [step.line], step
        # the static HTML alone (test_static_fallback: it is the bundle's text/html); the
        # PNG, 2 s a step, shows nothing this test checks
        assert view._static_html(None).count("rgba(255,200,0,0.35)") == 1
        seen[step.filename] = (view.source[0], view.source_title)
    assert seen[kernel_file] == ("def main(x: qnb.Array[qnb.f32, 2]):", "")
    assert seen[func_file] == ("def bump(x, r):", f"in bump ({func_file})")


def test_a_step_whose_source_the_trace_lacks_shows_its_own_line():
    trace = hand_made_trace()
    step = trace.steps(0)[1]
    # a func's line 12 in another file: not the kernel's line 12
    trace.steps(0)[1] = TraceStep(1, step.program, "other.py", 12, "u = f(a)", "load", "u")
    view = TraceView(trace, step=1)
    assert view.source == ["u = f(a)"] and (view.first_line, view.current_line) == (12, 12)
    assert view.source_title == "in other.py"
    html = view._repr_mimebundle_()[0]["text/html"]
    assert "u = f(a)" in html and "Tile16.load(a, 16 * i, 0)" not in html
    view.step = 2  # back in the kernel: its listing again
    assert view.source == SOURCE and view.current_line == 13 and view.source_title == ""


# Regions -----------------------------------------------------------------------------------


def test_an_empty_window_touches_no_region():
    import qnb

    @qnb.kernel
    def edges(x: qnb.Array[qnb.f32, 2]):
        t = qnb.Tile16.full(1.0, qnb.f32)
        t.store(x, 12, 8, 0, 16)  # rows 12..8: none
        t.store(x, 40, 0)  # past the last row
        x[0:4, 30:40] = t  # past the last column
        u = qnb.Tile16.load(x, 0, 25)
        (t + u).store(x, 14, 18)  # clamped to the array: rows 14..19, columns 18..19

    trace = edges.trace[1](np.zeros((20, 20), np.float32))
    steps = trace.steps(0)
    assert [(s.op, s.reads, s.writes) for s in steps[1:5]] == [
        ("store", [], []),
        ("store", [], []),
        ("store", [], []),
        ("load", [], []),
    ]
    assert [str(r) for r in steps[5].writes] == ["x[14:20, 18:20]"]
    view = TraceView(trace, step=1)
    assert view.regions == []


# Arrays too large to send whole ------------------------------------------------------------


def test_a_trace_with_a_large_array_opens_with_it_sampled(monkeypatch):
    import qnb
    from qnb.viz import arrays

    monkeypatch.setattr(arrays, "MAX_ELEMENTS", 1024)

    @qnb.kernel
    def touch(big: qnb.Array[qnb.f32, 2], unused: qnb.Array[qnb.f32, 3]):
        qnb.Tile16.full(5.0, qnb.f32).store(big, 32, 48)

    big = np.random.default_rng(5).random((64, 80)).astype(np.float32)
    unused = np.ones((3, 24, 24), np.float32)
    view = TraceView(touch.trace[1](big, unused))
    states = {a["name"]: a for a in view.arrays}
    assert (states["big"]["steps"], states["big"]["full_shape"]) == ([4, 4], [64, 80])
    np.testing.assert_array_equal(decode(states["big"]), view.trace.arrays["big"][::4, ::4])
    assert (states["unused"]["steps"], states["unused"]["shape"]) == ([1, 2, 2], [3, 12, 12])
    assert view.regions[0]["r0"] == 32  # regions stay in the array's own indices
    data, _ = view._repr_mimebundle_()
    assert (
        "big: 64×80, too large to show whole; sampled: one in every 4 rows and 4 columns"
        in (data["text/html"])
    )


def test_a_trace_with_an_array_over_the_limit_builds():
    import qnb

    @qnb.kernel
    def touch(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
        t = qnb.Tile16.load(y, 0, 0)
        (t + 1.0).store(y, 0, 0)

    x, y = np.zeros((2100, 2100), np.float32), np.zeros((16, 16), np.float32)
    view = TraceView(touch.trace[1](x, y))
    assert [a["shape"] for a in view.arrays] == [[1050, 1050], [16, 16]]


# Empty arrays ------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(0, 16, 16), (2, 0, 16), (0,)])
def test_a_trace_with_an_empty_array_renders(shape):
    import qnb

    @qnb.kernel
    def k(x: qnb.Array[qnb.f32, 2], e: qnb.Array):
        t = qnb.Tile16.load(x, 0, 0)
        (t + 1.0).store(x, 0, 0)

    view = TraceView(k.trace[1](np.zeros((16, 16), np.float32), np.zeros(shape, np.float32)))
    data, _ = view._repr_mimebundle_()
    assert f"e: empty array ({'×'.join(map(str, shape))})" in data["text/html"]


# 3-D arrays: the slabs a step (else its program) touched --------------------------------------


def batched_trace():
    """Notebook 03's shape of kernel: program s loads A[s], works on the tile, stores to B[s]."""
    import qnb

    @qnb.kernel
    def batched(A: qnb.Array[qnb.f32, 3], B: qnb.Array[qnb.f32, 3]):
        s = qnb.program_id(0)
        t = qnb.Tile16.load(A[s], 0, 0)
        t.cholesky_(1e-6)
        t.store(B[s], 0, 0)

    rng = np.random.default_rng(6)
    m = rng.uniform(-1, 1, (3, 16, 16))
    A = (m @ m.transpose(0, 2, 1) + 16 * np.eye(16)).astype(np.float32)
    return batched.trace[3](A, np.zeros_like(A))


@pytest.mark.parametrize("program", [0, 1, 2])
def test_a_3d_array_shows_the_slab_the_program_touched(program):
    view = TraceView(batched_trace(), program=program)
    ops = [s.op for s in view._steps()]
    assert ops == ["assign", "load", "cholesky_", "store"]
    for step, want in enumerate([program, program, program, program]):
        view.step = step
        # the load reads A[s], the store writes B[s]; the other steps touch neither, and
        # show the slabs their program touched, never slab 0 of another program's data
        assert view.slabs == {
            "A": {"shown": [want], "count": 1},
            "B": {"shown": [want], "count": 1},
        }


def test_a_step_that_touches_slabs_shows_those(monkeypatch):
    pytest.importorskip("matplotlib")
    import qnb
    from qnb.viz import static_render

    @qnb.kernel
    def sweep(A: qnb.Array[qnb.f32, 3], out: qnb.Array[qnb.f32, 2]):
        acc = qnb.Tile16.zeros(qnb.f32)
        for b in range(6):
            acc += qnb.Tile16.load(A[b], 0, 0)
        acc.store(out, 0, 0)

    A = np.random.default_rng(7).random((6, 16, 16)).astype(np.float32)
    view = TraceView(sweep.trace[1](A, np.zeros((16, 16), np.float32)))
    loads = [k for k, s in enumerate(view._steps()) if any(r.array == "A" for r in s.reads)]
    assert len(loads) == 6
    view.step = loads[2]
    assert view.slabs["A"] == {"shown": [2], "count": 1}
    view.step = 0  # the fill touches no slab: those of the whole program, the first four
    assert view.slabs["A"] == {"shown": [0, 1, 2, 3], "count": 6}
    titles = []
    draw = static_render.draw_heatmap

    def spy(ax, a, *args, title="", **kwargs):
        titles.append(title)
        return draw(ax, a, *args, title=title, **kwargs)

    monkeypatch.setattr(static_render, "draw_heatmap", spy)
    view._repr_mimebundle_()
    assert [t for t in titles if t.startswith("A[")] == ["A[0]", "A[1]", "A[2]", "A[3] (+2 more)"]
    titles.clear()
    view.step = loads[4]
    view._repr_mimebundle_()
    assert [t for t in titles if t.startswith("A[")] == ["A[4]"]


@pytest.fixture(scope="module")
def cholesky_step_png():
    """The static PNG of notebook 03's cholesky_ step (program 1): the view and what it
    drew, {title: (values, vmin, vmax, values written, colour bar)}. One drawing (6 s)
    serves the tests of the slabs and of the tiles' values below."""
    pytest.importorskip("matplotlib")
    from qnb.viz import static_render

    calls = {}
    draw = static_render.draw_heatmap

    def spy(ax, a, vmin, vmax, *args, title="", **kwargs):
        calls[title] = (np.array(a), vmin, vmax, kwargs["values"], kwargs["colour_bar"])
        return draw(ax, a, vmin, vmax, *args, title=title, **kwargs)

    trace = batched_trace()
    # cholesky_: touches no array; one colour scale chosen (auto gives each its own)
    view = TraceView(trace, program=1, step=2, scale="shared")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(static_render, "draw_heatmap", spy)
        data, _ = view._repr_mimebundle_()
    assert data["image/png"].startswith(b"\x89PNG")
    return view, calls


def test_the_static_png_draws_the_slab_the_step_touched(cholesky_step_png):
    view, drawn = cholesky_step_png
    np.testing.assert_array_equal(drawn["A[1]"][0], view.trace.initial_arrays["A"][1])
    assert "A[0]" not in drawn and "B[1]" in drawn


# The step's tiles: values, one colour scale, and what changed ------------------------------------


def test_in_and_out_tiles_share_one_colour_scale_and_a_changed_view():
    trace = batched_trace()
    view = TraceView(trace, program=1, step=2, scale="shared")  # t.cholesky_(eps)
    assert view.tile_scale == "shared"
    step = view.current_step
    roles = [(t["role"], t["name"]) for t in view.tiles]
    assert roles == [("in", "t"), ("out", "t"), ("changed", "t")]
    before, after = step.inputs["t"], step.output
    low = min(before.min(), after.min())
    high = max(before.max(), after.max())
    assert view.tile_range == [pytest.approx(low), pytest.approx(high)]
    for tile in view.tiles[:2]:
        assert (tile["vmin"], tile["vmax"]) == tuple(view.tile_range)
    changed = decode(view.tiles[2])
    np.testing.assert_allclose(changed, after.astype(np.float64) - before)
    # its own colour scale: a difference is not on the values' scale
    assert (view.tiles[2]["vmin"], view.tiles[2]["vmax"]) == (changed.min(), changed.max())
    view.step = 1  # a load makes a new tile: nothing to compare it with
    assert [t["role"] for t in view.tiles] == ["out"]


def test_changed_is_zero_where_an_element_kept_its_value_even_inf_or_nan():
    from qnb.viz.trace_view import changed_tile

    before = np.array([[np.inf, np.nan, 1.0, -np.inf]] * 16, np.float32).repeat(4, axis=1)
    after = before.copy()
    after[:, 8:12] = 3.0
    after[:, 12:] = np.inf  # -inf -> inf: a change, shown as what it is
    step = TraceStep(0, (0, 0, 0), "f", 1, "", "add", "t", {"t": before}, after)
    out = changed_tile(step)
    assert (out[:, :8] == 0).all() and (out[:, 8:12] == 2).all()  # inf and nan kept: 0
    assert np.isposinf(out[:, 12:]).all()
    assert changed_tile(TraceStep(0, (0, 0, 0), "f", 1, "", "load", "t", {}, after)) is None


def test_the_static_png_writes_the_tiles_values_with_one_colour_bar(cholesky_step_png):
    view, drawn = cholesky_step_png
    calls = {title: call[1:] for title, call in drawn.items()}
    low, high = view.tile_range
    assert calls["in t"] == (low, high, True, False)
    assert calls["out t"] == (low, high, True, True)  # the one shared colour bar
    changed = view.tiles[2]
    assert calls["changed t (out \u2212 in)"] == (changed["vmin"], changed["vmax"], True, True)


@pytest.mark.parametrize(
    ("shape", "colour_bar"),
    [((16, 16), True), ((16, 16), False), ((32, 32), False), ((2, 24), False)],
)
def test_the_static_png_is_cut_as_a_tight_box_is(shape, colour_bar):
    """tight_box measures the box without the values that lie well inside their axes:
    it is the box ``bbox_inches="tight"`` cuts to (so the PNG is the same, byte for byte),
    with the widest values at every edge and no colour bar beside them."""
    pytest.importorskip("matplotlib")
    from matplotlib import rcParams

    from qnb.viz import static_render

    a = np.random.default_rng(8).standard_normal(shape).astype(np.float32)
    a[0, :] = a[-1, :] = a[:, 0] = a[:, -1] = -1.2345e-7  # "-1.2e-7": wider than a cell
    fig = static_render.new_figure(2.6, 2.6)
    static_render.draw_heatmap(fig.add_subplot(), a, -1.0, 1.0, title="a", colour_bar=colour_bar)
    ours = static_render.tight_box(fig)
    fig.draw_without_rendering()  # as savefig(bbox_inches="tight") measures it: every text
    theirs = fig.get_tightbbox(fig.canvas.get_renderer()).padded(rcParams["savefig.pad_inches"])
    assert ours.bounds == theirs.bounds
    assert any(t.get_gid() == static_render.INSIDE_VALUE_GID for t in fig.axes[0].texts)
