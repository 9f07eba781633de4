"""``qnb.viz.CompareView``: state from a real ``qnb.compare`` on lavapipe, and its static forms.

(``(x + 1e8) - 1e8`` is reassociated to ``x`` by lavapipe and rounded to 0 by NumPy:
see tests/test_compare.py.)"""

from __future__ import annotations

import numpy as np
import pytest

import qnb
from qnb import Tile16
from qnb.viz import arrays
from tests.conftest import require_backend


@qnb.kernel
def shift_view(x, out):
    i = qnb.program_id(0)
    t = Tile16.load(x, i * 16, 0)
    v = (t + 1e8) - 1e8
    v.store(out, i * 16, 0)


LINE = shift_view.__wrapped__.__code__.co_firstlineno + 4  # ``v = (t + 1e8) - 1e8``


@pytest.fixture(scope="module")
def inputs():
    x = np.random.default_rng(2).uniform(0.5, 1.0, (48, 16)).astype(np.float32)
    x[:16] = 0.0  # program 0 agrees
    x[16, 0] = 0.0  # program 1's first differing element is (0, 1)
    return x, np.zeros_like(x)


@pytest.fixture(scope="module")
def differing(inputs):
    require_backend("wgpu")
    return qnb.compare(shift_view[3], *inputs, backends=["wgpu"])


def test_the_diverging_line_values_side_by_side_and_marks(differing, inputs):
    view = qnb.viz.CompareView(differing)
    assert not view.equal and view.backends == ["cpu", "wgpu"]
    assert view.current_line == LINE
    assert view.source[LINE - view.first_line].strip() == "v = (t + 1e8) - 1e8"
    assert "program (1, 0, 0)" in view.step_text and "element (0, 1)" in view.step_text
    names = [v["name"] for v in view.values]
    assert names == ["cpu", "wgpu", "wgpu \u2212 cpu"]
    cpu, wgpu, diff = (arrays.decode(v) for v in view.values)
    x = inputs[0]
    np.testing.assert_array_equal(cpu, (x[16:32] + np.float32(1e8)) - np.float32(1e8))
    np.testing.assert_allclose(wgpu, x[16:32], rtol=1e-6)
    np.testing.assert_allclose(diff, wgpu.astype(np.float64) - cpu, rtol=1e-6)
    # every element but (0, 0) differs, and each is outlined
    marked = {(m["r0"], m["c0"]) for m in view.values[1]["marks"]}
    assert (0, 0) not in marked and len(marked) == 255 and (0, 1) in marked


def test_a_mismatch_map_per_stored_array(differing, inputs):
    view = qnb.viz.CompareView(differing)
    (mismatch,) = view.maps
    assert mismatch["name"] == "out on wgpu"
    drawn = arrays.decode(mismatch)
    expected = ~np.isclose(
        differing.results["wgpu"]["out"], differing.results["cpu"]["out"], 1e-5, 1e-5
    )
    np.testing.assert_array_equal(drawn.astype(bool), expected)
    assert mismatch["mismatches"] == int(expected.sum()) == 2 * 256 - 1


def test_static_renderings(differing):
    data, _ = qnb.viz.CompareView(differing)._repr_mimebundle_()
    assert data["image/png"].startswith(b"\x89PNG")
    page = data["text/html"]
    assert "rgba(255,200,0,0.35)" in page and "v = (t + 1e8) - 1e8" in page
    assert "wgpu: differs" in page
    assert data["text/plain"] == "CompareView('shift_view' on cpu, wgpu: different)"


def test_an_equal_comparison_shows_only_the_summary(inputs):
    require_backend("wgpu")
    x, out = inputs
    view = qnb.viz.CompareView(qnb.compare(shift_view[1], x, out, backends=["wgpu"]))
    assert view.equal and view.values == [] and view.current_line == 0
    assert view.summary[1].startswith("wgpu: equal")
    data, _ = view._repr_mimebundle_()
    assert "image/png" not in data and "every backend agrees" in data["text/html"]


def test_needs_a_comparison():
    with pytest.raises(TypeError, match=r"qnb\.Comparison"):
        qnb.viz.CompareView(np.zeros(3))
