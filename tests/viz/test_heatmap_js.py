"""The index labels of the bundled front end (static/heatmap.js), run under Node with a
tiny stand-in for the DOM; skipped without ``node``. The browser test draws them for real."""

import json
import shutil
import subprocess

import pytest

from qnb.viz.assets import read_asset

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")

FAKE_DOM = """
class Element {
  constructor(tag) { this.tag = tag; this.children = []; this.style = {}; this.className = ""; }
  append(...items) { this.children.push(...items); }
}
globalThis.document = { createElement: (tag) => new Element(tag) };
function labels(el) { return el.children.map((c) => [c.textContent, c.style.left || c.style.top]); }
"""


def run_js(body: str):
    script = FAKE_DOM + read_asset("heatmap.js") + "\n" + body
    done = subprocess.run(
        [NODE, "-e", script], capture_output=True, text=True, timeout=30, check=True
    )
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    ("rows", "cols", "cell", "step"),
    [(16, 16, 32, 4), (32, 32, 22, 4), (64, 64, 8, 16), (8, 512, 1, 32), (1, 4096, 1, 32)],
)
def test_tick_step(rows, cols, cell, step):
    assert run_js(f"console.log(qnbTickStep({rows}, {cols}, {cell}))") == step


def test_ticks_label_rows_and_columns():
    top, left = run_js("""
        const box = qnbWithTicks(document.createElement("canvas"), 48, 32, 10, 2);
        console.log(JSON.stringify([labels(box.children[1]), labels(box.children[2])]));
    """)
    assert top == [["0", "5px"], ["16", "165px"]]  # cell centres, every 16 (48 > 32)
    assert left == [["0", "5px"], ["16", "165px"], ["32", "325px"]]


def test_a_1d_array_has_no_row_labels():
    top, left = run_js("""
        const box = qnbWithTicks(document.createElement("canvas"), 1, 20, 30, 1);
        console.log(JSON.stringify([labels(box.children[1]), labels(box.children[2])]));
    """)
    assert [text for text, _ in top] == ["0", "4", "8", "12", "16"] and left == []


def test_cells_spell_values_as_the_static_renderings_do():
    from qnb.viz.arrays import format_value

    values = [0, 7, -9999, 12345, 255000765, -(2**31), 1e5, 0.001, 0.5, 3.14159, 120.4, 9999.5]
    values += [0.0123456, -0.5, 1e-300, 1e30]
    spelled = run_js(f"console.log(JSON.stringify({json.dumps(values)}.map(qnbFormat)))")
    assert spelled == [format_value(v) for v in values]
    # the hover readout keeps the digits a cell drops
    full = run_js("console.log(JSON.stringify([12345, 255000765, 3.14159265].map(qnbFormatFull)))")
    assert full == ["12345", "255000765", "3.141593"]


def test_a_sampled_array_keeps_its_own_indices():
    top, left, index, text = run_js("""
        const box = qnbWithTicks(document.createElement("canvas"), 50, 40, 4, 2, [4, 2]);
        console.log(JSON.stringify([labels(box.children[1]).map((l) => l[0]),
          labels(box.children[2]).map((l) => l[0]), qnbIndexSpeller(3, 8, [4, 2])(3, 5),
          qnbSamplingText([1, 4, 2])]));
    """)
    assert top == ["0", "32", "64"] and left == ["0", "64", "128", "192"]
    assert index == "8, 12, 10" and text == "sampled: one in every 4 rows and 2 columns"


WIDGET_DOM = """
class Element {
  constructor(tag) {
    this.tag = tag; this.children = []; this.style = {}; this.className = ""; this.options = [];
    this.classList = { add: (...names) => { this.className += " " + names.join(" "); } };
  }
  append(...items) { this.children.push(...items); }
  replaceChildren(...items) { this.children = items; }
  addEventListener() {}
  getContext() { return new Proxy({}, { get: () => () => {}, set: () => true }); }
  get text() {
    return (this.textContent || "") + this.children.map((c) => c.text || "").join(" ");
  }
}
globalThis.window = {};
globalThis.document = {
  createElement: (tag) => new Element(tag),
  createTextNode: (text) => ({ text }),
};
"""


def render_widget(view, module: str, tail: str | None = None):
    """Run a widget's front end on the view's synced state (Node, a stand-in DOM); the
    text of everything it drew (or what ``tail``, a script run on ``el``, prints)."""
    import base64

    def plain(value):
        if isinstance(value, bytes):
            return {"__bytes__": base64.b64encode(value).decode()}
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    from qnb.viz.widget import QnbWidget

    own = set(view.trait_names(sync=True)) - set(QnbWidget.class_trait_names(sync=True))
    state = {name: plain(getattr(view, name)) for name in own}
    script = (
        WIDGET_DOM
        + read_asset("heatmap.js")
        + read_asset(module).replace("export default { render };", "")
        + f"""
        const revive = (v) => v && v.__bytes__ !== undefined
          ? new DataView(Uint8Array.from(Buffer.from(v.__bytes__, "base64")).buffer)
          : Array.isArray(v) ? v.map(revive)
          : v && typeof v === "object" ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, revive(x)]))
          : v;
        const state = revive({json.dumps(state)});
        const model = {{ get: (n) => state[n], set() {{}}, save_changes() {{}}, on() {{}}, off() {{}} }};
        const el = new Element("div");
        render({{ model, el }});
        """
        + (tail or "console.log(JSON.stringify(el.text));")
    )
    # (on stdin: a 128x64 tile's state is longer than an argument may be)
    done = subprocess.run(
        [NODE, "-"], input=script, capture_output=True, text=True, timeout=30, check=True
    )
    return json.loads(done.stdout)


def test_trace_view_front_end_draws_empty_sampled_and_stepless(monkeypatch):
    import numpy as np

    import qnb
    from qnb.viz import TraceView, arrays

    monkeypatch.setattr(arrays, "MAX_ELEMENTS", 1024)

    @qnb.kernel
    def k(x: qnb.Array[qnb.f32, 2], big: qnb.Array[qnb.f32, 2], e: qnb.Array[qnb.f32, 3]):
        if qnb.program_id(0) == 0:
            qnb.Tile16.full(1.0, qnb.f32).store(big, 16, 16)

    trace = k.trace[2](
        np.zeros((4, 4), np.float32),
        np.zeros((64, 64), np.float32),
        np.zeros((0, 4, 4), np.float32),
    )
    assert [len(trace.steps(p)) for p in range(2)] == [1, 0]  # the store; nothing
    text = render_widget(TraceView(trace), "trace_view.js")
    assert "step 0 (0\u20130)" in text  # numbered as view.step
    assert "64×64: too large to show whole; sampled: one in every 2 rows and 2 columns" in text
    assert "(empty array: shape 0×4×4, no elements to show)" in text
    assert "no steps" in render_widget(TraceView(trace, program=1), "trace_view.js")


def test_tile_view_front_end_draws_an_empty_array():
    import numpy as np

    from qnb.viz import TileView

    text = render_widget(TileView(np.zeros((0, 4, 4), np.float32)), "tile_view.js")
    assert "(empty array: shape 0×4×4, no elements to show)" in text


# Any shape: cells shrink to a least size, then the panel scrolls; the kernel's tile grid


@pytest.mark.parametrize(
    ("rows", "cols", "cell"),
    [
        (16, 16, 18),
        (32, 32, 9),
        (64, 64, 4),
        (128, 64, 4),
        (8, 32, 9),
        (1, 128, 10),
        (128, 1, 10),
        (1, 4096, 4),
        (1, 16384, 1),
        (1024, 1024, 2),  # a canvas of at most 2048x2048 px
        (2048, 2048, 1),
    ],
)
def test_cells_shrink_to_a_size_one_can_point_at(rows, cols, cell):
    # a TraceView tile panel: 288px, 18px cells at most
    assert run_js(f"console.log(qnbCellSize({rows}, {cols}, 288, 18))") == cell


def test_the_tile_grid_is_the_kernels_tile_shape():
    lines = run_js("""
        const moves = [];
        const canvas = { style: {}, getContext: () => new Proxy({}, {
          get: (_, name) => name === "moveTo" ? (x, y) => moves.push([x, y]) : () => {},
          set: () => true }) };
        globalThis.window = {};
        const values = new Float64Array(100 * 72);
        qnbDrawHeatmap(canvas, values, 100, 72, { cell: 4, tile: [64, 32] });
        const tiled = moves.splice(0);
        qnbDrawHeatmap(canvas, values, 100, 72, { cell: 4 });
        console.log(JSON.stringify([tiled, moves.length]));
    """)
    tiled, default = lines
    assert tiled == [[0, 256.5], [128.5, 0], [256.5, 0]]  # after row 64, columns 32 and 64
    assert default == 100 // 16 + 72 // 16  # 16x16 by default


def test_trace_view_front_end_scrolls_a_128x64_tile():
    import numpy as np

    from qnb.trace import Trace, TraceStep
    from qnb.viz import TraceView

    tile = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    step = TraceStep(0, (0, 0, 0), "f", 2, "t = t + 1", "+", "t", {"t": tile}, tile + 1)
    source = ["def k(x):", "    t = t + 1"]
    trace = Trace.recorded("k", (1, 1, 1), "f", 1, source, {}, steps={(0, 0, 0): [step]})
    script_tail = """
        const found = [];
        (function walk(e) {
          if (e.className === "qnb-scroll") found.push([e.style.maxWidth, e.children[0].children[3].style.width]);
          for (const c of e.children || []) walk(c);
        })(el);
        console.log(JSON.stringify(found));
    """
    shown = render_widget(TraceView(trace), "trace_view.js", script_tail)
    # in t, out t, changed t: 4px cells (256x512), in 328px panels that scroll
    assert shown == [["328px", "256px"]] * 3
    text = render_widget(TraceView(trace), "trace_view.js")
    assert text.count("Tile[128, 64] float32") == 3  # in, out and changed: the kernel's dtype
