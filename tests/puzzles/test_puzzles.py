"""``qnb.puzzles`` (contract: "Puzzles"): the names in teaching order, the statements,
the solutions, what a grade holds and says, and how it shows in a notebook."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import qnb
import qnb.puzzles as puzzles
from qnb.puzzles import describe, solutions
from qnb.puzzles.grade import store_owners

HEADER = "import qnb\nfrom qnb import Tile, Vec\n\n\n"


def _kernel(tmp_path, name: str, text: str):
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def test_names_in_teaching_order():
    names = puzzles.names()
    assert len(names) >= 20 and len(set(names)) == len(names)
    assert names[0] == "add_ten" and names[-1] == "causal_attention"
    order = [
        "add_ten",
        "guarded_square",
        "outer_sum",
        "total",
        "masked_softmax",
        "stencil_3",
        "matmul",
        "causal_attention",
    ]
    assert [names.index(n) for n in order] == sorted(names.index(n) for n in order)
    assert qnb.puzzles.names() == names  # (qnb.puzzles loads on first use)


@pytest.mark.parametrize("name", puzzles.names())
def test_a_statement_says_what_to_compute_its_numpy_its_signature_and_grid(name):
    puzzle = puzzles.puzzle(name)
    text = puzzles.show(name)
    assert isinstance(text, str) and text._repr_markdown_() == text
    assert puzzle.goal in text and puzzle.signature in text and puzzle.grid_text in text
    assert f"def {puzzle.numpy.__name__}(" in text and "```python" in text
    for case in puzzle.cases:
        assert case.label in text
    sizes = [case.sizes for case in puzzle.cases]
    assert any(all(v == 1 for v in s.values()) for s in sizes), "no case of size 1"
    assert len(sizes) >= 3


@pytest.mark.parametrize("name", puzzles.names())
def test_every_case_holds_random_non_zero_data(name):
    puzzle = puzzles.puzzle(name)
    for number, case in enumerate(puzzle.cases):
        args, expected = puzzle.arguments(np.random.default_rng(number), case)
        for param, value in args.items():
            if param in puzzle.outputs:
                if param in puzzle.initial:  # (a histogram adds to zeros)
                    assert (value == puzzle.initial[param]).all()
                else:
                    assert np.isnan(value).all()  # poisoned
            elif isinstance(value, np.ndarray) and value.dtype.kind in "iu":
                # indices (a histogram's values): 0 is a bin like any other, but not all
                assert value.size and (value.size == 1 or len(np.unique(value)) > 1)
            elif isinstance(value, np.ndarray):
                assert value.size and (value != 0).all(), (name, param)
        assert set(expected) == set(puzzle.outputs)


def test_unknown_names_and_non_kernels_are_refused():
    with pytest.raises(qnb.QnbTypeError, match=r"there is no puzzle 'nope'.*add_ten"):
        puzzles.show("nope")
    with pytest.raises(qnb.QnbTypeError, match=r"grades a @qnb\.kernel, not function"):
        puzzles.check("add_ten", solutions.add_ten.__wrapped__)


def test_a_grade_that_passes():
    grade = puzzles.check("matmul", solutions.matmul)
    assert grade.passed and grade.case is None and grade.index is None
    assert [r.tried and r.passed for r in grade.cases] == [True] * 3
    assert repr(grade) == "<qnb.puzzles.Grade 'matmul' on cpu: passed 3 of 3 cases>"
    page = grade._repr_html_()
    assert "matmul: passed" in page and "<img" not in page


NO_LAST_COLUMNS = """\
@qnb.kernel
def scale_2d(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * 16
    col = qnb.program_id(1) * 16
    t = Tile[16, 32].load(x, row, col)
    (t * 2.0 + 1.0).store(out, row, col)
"""


def test_a_failed_grade_names_the_case_element_program_and_line(tmp_path):
    """Programs 16 columns apart each store 32: the last columns are never written (the
    contract's example: "no program wrote the last 2 columns")."""
    kernel = _kernel(tmp_path, "scale_2d", NO_LAST_COLUMNS)
    grade = puzzles.check("scale_2d", kernel)
    assert not grade.passed and grade.case.sizes == {"rows": 37, "cols": 50}
    assert grade.message == (
        "For rows = 37, cols = 50: no program wrote the last 2 columns of out."
    )
    assert grade.array == "out" and grade.index == (0, 48) and grade.program is None
    assert np.isnan(grade.got) and grade.expected == pytest.approx(grade.expected_array[0, 48])
    assert [(r.passed, r.tried) for r in grade.cases] == [
        (True, True),
        (False, True),
        (False, False),
    ]
    assert grade.report()[-1].endswith(": not tried")
    page = grade._repr_html_()
    assert "no program wrote the last 2 columns of out" in page
    assert '<img src="data:image/png;base64,' in page  # the picture of the wrong elements


WRONG_VALUE = """\
@qnb.kernel
def add_ten(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):
    start = qnb.program_id(0) * 128
    v = Vec[128].load(x, start)
    if qnb.program_id(0) == 1:
        v = v + 1.0
    (v + 10.0).store(out, start)
"""


def test_the_program_and_line_of_a_wrong_store(tmp_path):
    kernel = _kernel(tmp_path, "add_ten", WRONG_VALUE)
    grade = puzzles.check("add_ten", kernel)
    assert grade.case.sizes == {"n": 200} and grade.index == (128,)
    assert grade.program == (1, 0, 0)
    assert grade.line == kernel.firstlineno + 5  # the store's own line (def + 5)
    assert grade.got == pytest.approx(grade.expected + 1.0)
    assert "72 elements of out hold wrong values; the first, out[128]" in grade.message
    assert f"stored by program (1, 0, 0) at line {grade.line}" in grade.message


def test_the_last_store_is_the_one_named(tmp_path):
    """Where two programs store one element, the later one (as the cpu runs them) owns it."""
    kernel = _kernel(tmp_path, "scale_2d", NO_LAST_COLUMNS)
    x = np.ones((16, 64), np.float32)
    programs, lines = store_owners(
        kernel, (1, 2), {"x": x, "out": np.zeros_like(x)}, "out", x.shape
    )
    assert tuple(programs[0, 20]) == (0, 1, 0) and tuple(programs[0, 40]) == (0, 1, 0)
    assert tuple(programs[0, 5]) == (0, 0, 0) and (programs[:, 48:] == -1).all()
    assert (lines[:, :48] == kernel.firstlineno + 4).all()  # the store (def + 4)


@pytest.mark.parametrize(
    ("shape", "region", "text"),
    [
        ((10,), np.s_[7:], "the last 3 elements of out (out[7:10])"),
        ((10,), np.s_[:2], "the first 2 elements of out (out[0:2])"),
        ((10,), np.s_[9:], "the last 1 element of out (out[9:10])"),
        ((10,), np.s_[:], "any element of out"),
        ((4, 6), np.s_[:, 3:], "the last 3 columns of out"),
        ((4, 6), np.s_[3:, :], "the last 1 row of out"),
        ((4, 6), np.s_[1:3, 1:2], "2 of the 24 elements of out, the first out[1, 1]"),
    ],
)
def test_unwritten_regions_as_a_reader_says_them(shape, region, text):
    mask = np.zeros(shape, bool)
    mask[region] = True
    assert describe.unwritten_region("out", mask) == text


def test_last_rows_and_columns_together():
    mask = np.zeros((5, 6), bool)
    mask[3:, :] = mask[:, 4:] = True
    assert describe.unwritten_region("c", mask) == "the last 2 rows and the last 2 columns of c"


def test_a_kernel_that_raises_fails_at_its_line(tmp_path):
    kernel = _kernel(
        tmp_path,
        "guarded_square",
        "@qnb.kernel\ndef guarded_square(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):\n"
        "    i = qnb.program_id(0)\n    out[i] = x[i]\n",
    )
    grade = puzzles.check("guarded_square", kernel)
    assert isinstance(grade.error, qnb.QnbIndexError) and grade.line == kernel.firstlineno + 2
    assert grade.message.startswith(
        f"For n = 1: the kernel raised QnbIndexError at line {grade.line}: index out of range"
    )


def test_the_histogram_puzzle_s_definition_counts_and_starts_from_zero():
    hist = puzzles.puzzle("histogram")
    args, expected = hist.arguments(np.random.default_rng(0), hist.cases[1])
    np.testing.assert_array_equal(expected["hist"], np.bincount(args["x"], minlength=37))
    assert (args["hist"] == 0).all()  # a histogram adds to zeros


def test_the_scan_puzzle_s_definition_is_numpy_s_cumsum():
    scan = puzzles.puzzle("prefix_sums")
    args, expected = scan.arguments(np.random.default_rng(0), scan.cases[1])
    np.testing.assert_allclose(expected["out"], np.cumsum(args["x"].astype(np.float64)), rtol=1e-6)


def test_a_kernel_whose_programs_race_fails_with_the_hazard_even_where_its_values_are_right():
    """Every program also stores ``out[0]`` (the same value): each case's values are right,
    and the grade fails all the same, naming the race qnb.check finds, its element, the
    two programs and the line of the second one's store."""
    from qnb import Vec

    @qnb.kernel
    def add_ten(x: qnb.Array[qnb.f32, 1], out: qnb.Array[qnb.f32, 1]):
        start = qnb.program_id(0) * 128
        (Vec[128].load(x, start) + 10.0).store(out, start)
        out[0] = x[0] + 10.0

    grade = qnb.puzzles.check("add_ten", add_ten)
    assert not grade.passed
    assert grade.hazard is not None and grade.hazard.kind == "write-write"
    assert grade.array == "out" and grade.index == (0,)
    line = add_ten.parsed.firstlineno + 3  # the out[0] store (firstlineno: the def)
    assert grade.line == line, (grade.line, line)
    assert "both store out[0]" in grade.message and "write-write race" in grade.message
