"""A miss reason names only the changed leaves, as Python writes the values (DESIGN.md
"Kernel cache"): ``captured.cfg.scale: 2.0 → 3.0``, never the whole object twice, a hex
float or a tagged list; in the event, ``qnb.cache.explain``, ``qnb cache explain``,
``%%qkernel --cache-detail`` and CacheView alike."""

from __future__ import annotations

import dataclasses
import re
import types
from typing import NamedTuple

import numpy as np
import pytest
from cache_fakes import qnb_cache_in_turn

import qnb
import qnb.cache
from qnb.viz.events import event_detail

# What no display may show: a float's hex form, or a form's tag.
HEX = re.compile(r"0x[0-9a-f]\.[0-9a-f]+p[+-]\d")
TAGGED = re.compile(r"\[(float|int|str|bool|tuple|namedtuple|enum|none)[,\]]")


class Pair(NamedTuple):
    scale: float
    use_bias: bool


@dataclasses.dataclass
class Config:
    scale: float = 2.0
    name: str = "a"
    shape: tuple = (16, 16)


PAIR = Pair(2.0, True)
CFG = Config()
NS = types.SimpleNamespace(depth=types.SimpleNamespace(levels=3))


@qnb.kernel(backend="cpu")
def configured(x: qnb.Array[qnb.f32, 1]):
    x[0] = qnb.static(PAIR.scale) + CFG.scale
    if PAIR.use_bias:
        x[1] = qnb.static(len(CFG.name) + CFG.shape[0] + NS.depth.levels)


def _launch():
    configured(np.zeros(2, np.float32))
    return [e for e in qnb.cache.events() if e.kernel == configured.name][-1]


def _clean(text: str) -> None:
    assert not HEX.search(text), text
    assert not TAGGED.search(text), text


@pytest.fixture
def restore():
    yield
    global PAIR
    PAIR = Pair(2.0, True)
    CFG.scale, CFG.name, CFG.shape = 2.0, "a", (16, 16)
    NS.depth = types.SimpleNamespace(levels=3)


@pytest.mark.parametrize(
    "change, reason",
    [
        (lambda: globals().update(PAIR=Pair(3.0, True)), "captured.PAIR.scale: 2.0 → 3.0"),
        (lambda: globals().update(PAIR=Pair(2.0, False)),
         "captured.PAIR.use_bias: True → False"),
        (lambda: setattr(CFG, "scale", 2.5), "captured.CFG.scale: 2.0 → 2.5"),
        (lambda: setattr(CFG, "name", "ab"), "captured.CFG.name: 'a' → 'ab'"),
        (lambda: setattr(CFG, "shape", (32, 16)), "captured.CFG.shape: (16, 16) → (32, 16)"),
        (lambda: setattr(CFG, "scale", -0.0), "captured.CFG.scale: 2.0 → -0.0"),
        (lambda: setattr(NS.depth, "levels", 4), "captured.NS.depth.levels: 3 → 4"),
    ],
    ids=["named-tuple", "named-tuple-bool", "dataclass", "str", "tuple", "minus-zero",
         "nested"],
)  # fmt: skip
def test_a_reason_names_the_one_leaf_that_changed(cache_dir, restore, change, reason):
    assert _launch().reason == "first compile"
    change()
    event = _launch()
    assert event.outcome == "miss"
    assert event.reason == reason
    _clean(event.reason)
    for text in (qnb.cache.explain(configured), event_detail(event)):
        _clean(text)
        assert reason in text, text


def test_the_key_components_show_values_as_python_writes_them(cache_dir, restore):
    event = _launch()
    detail = event_detail(event)
    _clean(detail)
    assert "PAIR.scale: 2.0" in detail and "CFG.shape: (16, 16)" in detail, detail
    explained = qnb.cache.explain(configured)
    assert "CFG.name: 'a'" in explained, explained


def test_qnb_cache_explain_shows_the_leaf_from_disk(cache_dir, restore):
    _launch()
    CFG.scale = 4.0
    _launch()
    (result,) = qnb_cache_in_turn(cache_dir, ["explain", configured.name])
    assert result.returncode == 0, result.stderr
    assert "captured.CFG.scale: 2.0 → 4.0" in result.stdout, result.stdout
    _clean(result.stdout)


def test_cache_view_rows_and_detail_show_the_leaf(cache_dir, restore):
    from qnb.viz import CacheView

    view = CacheView()
    try:
        _launch()
        CFG.scale = 3.5
        _launch()
        _launch()  # a memory hit
        view._flush()
        rows = [row for row in view.events if row["kernel"] == configured.name]
        miss = [row for row in rows if row["outcome"] == "miss"][-1]
        assert miss["reason"] == "captured.CFG.scale: 2.0 → 3.5"
        detail = view.select(miss["n"])
        _clean(detail)
        assert "captured.CFG.scale: 2.0 → 3.5" in detail
        html = view._static_html(None)  # (the static form: the outcome kept on one line)
        assert "white-space:nowrap" in html.split("<tbody>")[0] and "<td>memory-hit</td>" in html
    finally:
        view.close()


def test_qkernel_cache_detail_shows_the_leaf(cache_dir, restore):
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "qnb")
    shell.user_ns["qnb"] = qnb
    shell.user_ns["SETTINGS"] = types.SimpleNamespace(scale=1.5)
    cell = "def leafy(x: qnb.Array[qnb.f32, 1]):\n    x[0] = SETTINGS.scale\n"
    with capture_output():
        shell.run_cell_magic("qkernel", "-b cpu --cache-detail", cell)
    shell.user_ns["SETTINGS"].scale = 2.25
    with capture_output() as captured:
        shell.run_cell_magic("qkernel", "-b cpu --cache-detail", cell)
    text = captured.stdout
    assert "captured.SETTINGS.scale: 1.5 → 2.25" in text, text
    assert "SETTINGS.scale: 2.25" in text
    _clean(text)
