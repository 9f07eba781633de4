"""``qnb.viz.HazardView``: state from real ``qnb.check`` results, selection, and its
static forms."""

from __future__ import annotations

import numpy as np
import pytest

import qnb
from qnb import Tile16
from qnb.viz import arrays
from qnb.viz.hazard_view import CONFLICT, FIRST, SECOND
from tests.hazards.planted import (
    _spd,
    cuda_style_histogram,
    forgotten_slab_index,
    marker_lines,
    transpose_in_place,
)


@pytest.fixture(scope="module")
def transposed():
    a = np.random.default_rng(0).uniform(size=(32, 32)).astype(np.float32)
    return qnb.check(transpose_in_place[2, 2], a), a


def _line(kernel, marker):
    from tests.hazards.planted import PLANTED

    case = next(c for c in PLANTED if c.kernel is kernel)
    (line,) = marker_lines(case, marker)
    return line


def test_the_array_in_conflict_its_marks_and_the_two_programs_windows(transposed):
    hazards, a = transposed
    view = qnb.viz.HazardView(hazards)
    assert not view.ok and view.selected == 0 and len(view.records) == len(hazards.hazards)
    (panel,) = view.panels
    assert panel["name"] == "a" and panel["title"] == "a: 512 in conflict"
    transposed_a = a.copy()
    for i in (0, 16):
        for j in (0, 16):
            transposed_a[j : j + 16, i : i + 16] = a[i : i + 16, j : j + 16].T
    np.testing.assert_array_equal(arrays.decode(panel), transposed_a)  # after the launch
    marks = [r for r in panel["regions"] if r["rgb"] == list(CONFLICT)]
    # the two off-diagonal tiles, each one rectangle
    assert sorted((m["r0"], m["r1"], m["c0"], m["c1"]) for m in marks) == [
        (0, 16, 16, 32),
        (16, 32, 0, 16),
    ]
    first, second = hazards.hazards[0].programs
    assert (first, second) == ((0, 1, 0), (1, 0, 0))
    # program (0, 1) read a[0:16, 16:32] and stored a[16:32, 0:16]; (1, 0) the mirror
    boxes = {
        tuple(colour): sorted(
            (r["r0"], r["r1"], r["c0"], r["c1"])
            for r in panel["regions"]
            if r["rgb"] == list(colour)
        )
        for colour in (FIRST, SECOND)
    }
    assert boxes[FIRST] == [(0, 16, 16, 32), (16, 32, 0, 16)]
    assert boxes[SECOND] == [(0, 16, 16, 32), (16, 32, 0, 16)]
    assert view.lines == [_line(transpose_in_place, "A"), _line(transpose_in_place, "B")]
    assert view.source[view.lines[0] - view.first_line].strip() == "t = Tile16.load(a, i, j)  # A"


def test_selecting_a_record_shows_its_programs_and_lines():
    x = np.array([3, 1, 3, 0, 1], np.int32)
    hazards = qnb.check(cuda_style_histogram[5], x, np.zeros(4, np.int32))
    view = qnb.viz.HazardView(hazards)
    kinds = [r["kind"] for r in view.records]
    assert kinds[0] == "write-write" and "read-write" in kinds
    assert view.records[0]["programs"] == ["(1, 0, 0)", "(4, 0, 0)"]
    (panel,) = view.panels
    assert [(m["c0"], m["c1"]) for m in panel["regions"] if m["rgb"] == list(CONFLICT)] == [
        (1, 2),
        (3, 4),
    ]
    view.selected = 1  # as the front end sets it
    assert view.records[1]["programs"] == ["(0, 0, 0)", "(2, 0, 0)"]  # h[3]
    windows = [(r["c0"], r["c1"]) for r in view.panels[0]["regions"] if r["rgb"] == list(FIRST)]
    assert windows == [(3, 4), (3, 4)]  # program 0 read h[3] and stored it


def test_a_3d_array_shows_the_slab_of_the_element():
    rng = np.random.default_rng(0)
    view = qnb.viz.HazardView(
        qnb.check(forgotten_slab_index[3], _spd(rng, 3), np.zeros((3, 16, 16)))
    )
    (panel,) = view.panels
    assert panel["batch"] == 0 and panel["title"] == "out[0]: 256 in conflict"
    assert panel["shape"] == [3, 16, 16]


def test_static_renderings(transposed):
    hazards, _ = transposed
    data, _ = qnb.viz.HazardView(hazards)._repr_mimebundle_()
    assert data["image/png"].startswith(b"\x89PNG")
    page = data["text/html"]
    assert "t = Tile16.load(a, i, j)  # A" in page and "t.T.store(a, j, i)  # B" in page
    assert f"rgba({','.join(map(str, FIRST))},0.35)" in page
    assert f"rgba({','.join(map(str, SECOND))},0.35)" in page
    assert "read-write" in page and "reads a[0, 16]" in page
    assert data["text/plain"] == "HazardView('transpose_in_place': 2 hazards)"


def test_a_launch_without_hazard_shows_its_summary_only():
    @qnb.kernel
    def double_rows(x, out):
        i = qnb.program_id(0) * 16
        (Tile16.load(x, i, 0) * 2.0).store(out, i, 0)

    x = np.ones((32, 16), np.float32)
    view = qnb.viz.HazardView(qnb.check(double_rows[2], x, np.zeros_like(x)))
    assert view.ok and view.records == [] and view.panels == [] and view.selected == -1
    data, _ = view._repr_mimebundle_()
    assert "image/png" not in data and "no hazard between programs" in data["text/html"]


def test_needs_hazards():
    with pytest.raises(TypeError, match=r"qnb\.Hazards"):
        qnb.viz.HazardView(np.zeros(3))
