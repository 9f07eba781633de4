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
    assert mismatch["name"] == "out on wgpu" and mismatch["pool"] == 1
    expected = ~np.isclose(
        differing.results["wgpu"]["out"], differing.results["cpu"]["out"], 1e-5, 1e-5
    )
    assert mismatch["mismatches"] == int(expected.sum()) == 2 * 256 - 1
    ringed = {(i, j) for i, j, *_ in mismatch["marks"]}
    assert ringed == {tuple(int(n) for n in ij) for ij in np.argwhere(expected)}
    # lavapipe keeps x, the exact answer: every ring is "closer" (code 1)
    assert {code for _, _, code, *_ in mismatch["marks"]} == {1}
    assert (mismatch["closer"], mismatch["farther"]) == (511, 0)
    i, j, _, ref, got, exact = mismatch["marks"][0]
    x = inputs[0]
    assert (ref, got, exact) == (0.0, pytest.approx(float(x[i, j])), pytest.approx(float(x[i, j])))
    assert "511 of 768 differ (511 closer to exact than cpu, 0 farther)" in mismatch["title"]


def test_the_steps_values_share_a_colour_scale_and_the_difference_has_its_own(differing):
    view = qnb.viz.CompareView(differing)
    cpu, wgpu, diff = view.values
    assert (cpu["role"], wgpu["role"], diff["role"]) == ("value", "value", "difference")
    assert (cpu["vmin"], cpu["vmax"]) == (wgpu["vmin"], wgpu["vmax"])
    assert cpu["vmin"] == 0.0 and wgpu["vmax"] == pytest.approx(arrays.decode(wgpu).max())
    assert (diff["vmin"], diff["vmax"]) == (arrays.decode(diff).min(), arrays.decode(diff).max())


def test_static_renderings(differing):
    data, _ = qnb.viz.CompareView(differing)._repr_mimebundle_()
    assert data["image/png"].startswith(b"\x89PNG")
    page = data["text/html"]
    assert "rgba(255,200,0,0.35)" in page and "v = (t + 1e8) - 1e8" in page
    assert "wgpu: rounding, closer to exact than cpu" in page
    assert data["text/plain"] == (
        "CompareView('shift_view' on cpu, wgpu: rounding (wgpu is closer to exact than cpu))"
    )


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


# Mismatch maps of large arrays: every differing element shows -------------------------------------


@qnb.kernel
def cancel_blocks(x, out):
    i = qnb.program_id(0) * 16
    j = qnb.program_id(1) * 16
    ((Tile16.load(x, i, j) + 1e8) - 1e8).store(out, i, j)


def _scattered(shape, count, seed=0):
    """Zeros but for ``count`` elements at random places (there cpu and lavapipe part)."""
    rng = np.random.default_rng(seed)
    x = np.zeros(shape, np.float32)
    places = rng.choice(x.size, count, replace=False)
    x.reshape(-1)[places] = rng.uniform(0.5, 1.0, count)
    return x, {tuple(int(n) for n in np.unravel_index(p, shape)) for p in places}


def test_35_mismatches_in_a_512x256_map_are_each_ringed():
    require_backend("wgpu")
    x, places = _scattered((512, 256), 35)
    comparison = qnb.compare(cancel_blocks[32, 16], x, np.zeros_like(x), backends=["wgpu"])
    (mismatch,) = qnb.viz.CompareView(comparison).maps
    assert mismatch["mismatches"] == 35
    assert {(i, j) for i, j, *_ in mismatch["marks"]} == places
    assert mismatch["pool"] == 1 and mismatch["cell"] == [1, 1]  # 512 px by 256: whole
    assert "data" not in mismatch  # (35 rings: no image needed)
    assert mismatch["col_ticks"] == [0, 64, 128, 192]  # labels 64 px apart, not crowded
    assert mismatch["row_ticks"] == [0, 64, 128, 192, 256, 320, 384, 448]


def test_a_map_too_large_for_its_pixels_keeps_every_differing_element():
    from qnb.viz.compare_view import MAX_RINGS, decode_pooled

    require_backend("wgpu")
    x, places = _scattered((1024, 1024), MAX_RINGS + 100, seed=1)
    comparison = qnb.compare(cancel_blocks[64, 64], x, np.zeros_like(x), backends=["wgpu"])
    (mismatch,) = qnb.viz.CompareView(comparison).maps
    assert mismatch["pool"] == 2 and len(mismatch["marks"]) == MAX_RINGS
    pooled = decode_pooled(mismatch)
    assert pooled.shape == (512, 512)
    lit = {(int(i), int(j)) for i, j in np.argwhere(pooled)}
    assert lit == {(i // 2, j // 2) for i, j in places}  # each one's pixel, and no other


def test_the_static_map_draws_a_ring_per_mismatch_and_a_legend():
    pytest.importorskip("matplotlib")
    from qnb.viz import static_render

    require_backend("wgpu")
    x, places = _scattered((512, 256), 35)
    comparison = qnb.compare(cancel_blocks[32, 16], x, np.zeros_like(x), backends=["wgpu"])
    view = qnb.viz.CompareView(comparison)
    fig = static_render.new_figure(6, 4)
    ax = fig.add_subplot()
    from qnb.viz.compare_view import decode_pooled

    static_render.draw_mismatch_map(ax, view.maps[0], decode_pooled(view.maps[0]))
    (rings,) = ax.collections  # one colour of ring here: all closer to exact
    assert {(int(i), int(j)) for j, i in rings.get_offsets()} == places
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[0].startswith("differs, at least as close") and "agrees" in legend[2]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels == ["0", "64", "128", "192"]
