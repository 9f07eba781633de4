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
