"""Attacks on the graders: every puzzle's reference solution, mutated the ways learners
go wrong (a constant changed, a mask or guard dropped, a grid one too small, a load off
by one, a tile too small), must fail, at the case named here, with a message that says
what is wrong; and everything the grade says must be true of the mutated kernel, which
is run again here and compared with the puzzle's NumPy definition independently.
The unmutated reference passes, on cpu and on wgpu.
"""

from __future__ import annotations

import importlib.util
import linecache
from dataclasses import dataclass

import numpy as np
import pytest

import qnb.puzzles as puzzles
from qnb.puzzles import solutions
from tests.conftest import require_backend

HEADER = "import math\n\nimport qnb\nfrom qnb import Tile, Vec\n\n\n"
# a kernel whose last program (along axis 0) does nothing: as if the grid were one short
LAST_PROGRAM = "    if qnb.program_id(0) < qnb.num_programs(0) - 1:\n"


@dataclass(frozen=True)
class Mutation:
    what: str
    old: str
    new: str
    case: int  # the index of the first case it must fail
    words: tuple[str, ...]  # what the message must say


def _skip_last(line: str) -> tuple[str, str]:
    """``line`` (a whole line, indented 4) run only in programs before the last one."""
    return line, LAST_PROGRAM + "    " + line


NOT_WRITTEN = "no program wrote"
STORED = "stored by program"

MUTATIONS = {
    "add_ten": [
        Mutation("a constant changed", "v + 10.0", "v + 11.0", 0, ("out[0] is", STORED)),
        Mutation("a load off by one", "load(x, start)", "load(x, start + 1)", 0, ("out[0] is",)),
        Mutation(
            "a grid one too small",
            *_skip_last("    (v + 10.0).store(out, start)\n"),
            0,
            (f"{NOT_WRITTEN} any element of out",),
        ),
        Mutation(
            "a tile too small",
            "v = Vec[128].load(x, start)",
            "v = Vec[64].load(x, start)",
            1,
            (f"{NOT_WRITTEN} 72 of the 200 elements of out, the first out[64]",),
        ),
    ],
    "multiply": [
        Mutation("another op", "start) * Vec", "start) + Vec", 0, ("out[0] is", STORED)),
        Mutation("a load off by one", "load(y, start)", "load(y, start + 1)", 0, ("out[0] is 0",)),
        Mutation(
            "a grid one too small",
            *_skip_last(
                "    (Vec[128].load(x, start) * Vec[128].load(y, start)).store(out, start)\n"
            ),
            0,
            (f"{NOT_WRITTEN} any element",),
        ),
    ],
    "guarded_square": [
        Mutation(
            "the guard dropped",
            "    if i < x.shape[0]:\n        out",
            "    out",
            0,
            ("raised QnbIndexError", "index out of range for 'x'"),
        ),
        Mutation(
            "a guard off by one",
            "if i < x.shape[0]:",
            "if i < x.shape[0] - 1:",
            0,
            (f"{NOT_WRITTEN} any element of out",),
        ),
        Mutation(
            "a guard one too far",
            "if i < x.shape[0]:",
            "if i <= x.shape[0]:",
            0,
            ("raised QnbIndexError",),
        ),
        Mutation("a constant", "x[i] * x[i]", "x[i] * 2.0", 0, ("out[0] is", STORED)),
    ],
    "clip": [
        Mutation(
            "min and max swapped",
            "qnb.minimum(qnb.maximum(v, low), high)",
            "qnb.maximum(qnb.minimum(v, low), high)",
            1,
            ("is 0.75 where -0.5",),
        ),
        Mutation(
            "a bound changed", "v, low), high)", "v, low), high + 0.5)", 0, ("is 1.25 where 0.75",)
        ),
        Mutation(
            "a grid one too small",
            *_skip_last("    qnb.minimum(qnb.maximum(v, low), high).store(out, start)\n"),
            0,
            (f"{NOT_WRITTEN} any element",),
        ),
    ],
    "scale_2d": [
        Mutation(
            "a constant changed", "t * 2.0 + 1.0", "t * 3.0 + 1.0", 0, ("out[0, 0] is", STORED)
        ),
        Mutation(
            "a load off by one",
            "load(x, row, col)",
            "load(x, row, col + 1)",
            0,
            ("out[0, 0] is 1 where",),
        ),
        Mutation(
            "a tile step too small",
            "col = qnb.program_id(1) * 32",
            "col = qnb.program_id(1) * 16",
            1,
            (f"{NOT_WRITTEN} the last 2 columns of out",),
        ),
        Mutation(
            "a grid one too small",
            *_skip_last("    (t * 2.0 + 1.0).store(out, row, col)\n"),
            0,
            (f"{NOT_WRITTEN} any element",),
        ),
    ],
    "outer_sum": [
        Mutation(
            "a constant added",
            "u[:, None] + v[None, :])",
            "u[:, None] + v[None, :] + 1.0)",
            0,
            ("out[0, 0] is", STORED),
        ),
        Mutation("a load off by one", "load(b, col)", "load(b, col + 1)", 0, ("out[0, 0] is",)),
        Mutation("row and column swapped", "load(a, row)", "load(a, col)", 1, ("out[0, 32]",)),
    ],
    "add_bias": [
        Mutation(
            "the bias of another column",
            "load(bias, col)",
            "load(bias, row)",
            1,
            ("out[0, 32]", STORED),
        ),
        Mutation(
            "the bias dropped", "(t + Vec[32].load(bias, col))", "(t + 0.0)", 0, ("out[0, 0] is",)
        ),
        Mutation(
            "a load off by one", "load(bias, col)", "load(bias, col + 1)", 0, ("out[0, 0] is",)
        ),
    ],
    "total": [
        Mutation(
            "the loop starts late",
            "range(0, x.shape[0], 1024)",
            "range(1024, x.shape[0], 1024)",
            0,
            ("out[0] is 0 where", STORED),
        ),
        Mutation(
            "a tile too small",
            "acc + Vec[1024].load(x, start)",
            "acc + Vec[512].load(x, start)[None, :].sum(axis=0)",
            0,
            ("raised QnbTypeError",),
        ),
        Mutation(
            "a wrong start value",
            "Vec[1024].zeros(qnb.f32)",
            "Vec[1024].ones(qnb.f32)",
            0,
            ("out[0] is",),
        ),
    ],
    "row_sums": [
        Mutation(
            "a tile too small",
            "Tile[16, 64].load(x, row, col)",
            "Tile[16, 32].load(x, row, col)",
            1,
            ("out[0]", STORED),
        ),
        Mutation("the other axis", ".sum(axis=1)", ".sum(axis=0)", 0, ("raised QnbTypeError",)),
        Mutation(
            "a grid one too small",
            *_skip_last("    acc.store(out, row)\n"),
            0,
            (f"{NOT_WRITTEN} any element",),
        ),
    ],
    "column_means": [
        Mutation(
            "divided by the other size", "acc / x.shape[0]", "acc / x.shape[1]", 1, ("out[0]",)
        ),
        Mutation("no mean: the sum", "(acc / x.shape[0])", "(acc + 0.0)", 1, ("out[0]", STORED)),
        Mutation(
            "rows counted twice",
            "range(0, x.shape[0], 16)",
            "range(0, x.shape[0], 8)",
            1,
            ("out[0]",),
        ),
    ],
    "row_max": [
        Mutation(
            "the padding dropped", ", other=-math.inf)", ")", 0, ("out[0] is 0 where", STORED)
        ),
        Mutation(
            "a start of 0",
            "Vec[16].full(-math.inf, qnb.f32)",
            "Vec[16].zeros(qnb.f32)",
            0,
            ("out[0] is 0 where",),
        ),
        Mutation(
            "columns skipped",
            "range(0, x.shape[1], 64)",
            "range(0, x.shape[1], 128)",
            2,
            ("out[1]", "hold wrong values"),
        ),
        Mutation("min for max", "qnb.maximum(best", "qnb.minimum(best", 0, ("out[0] is -inf",)),
    ],
    "masked_softmax": [
        Mutation("the mask dropped", ", other=-math.inf)", ")", 0, ("out[0, 0] is", STORED)),
        # (the padded rows are -inf: exp(-inf - -inf) is NaN, summed into every column)
        Mutation(
            "summed down the columns",
            "e.sum(axis=1, keepdims=True)",
            "e.sum(axis=0, keepdims=True)",
            0,
            ("out[0, 0] is NaN where 1 is expected",),
        ),
        Mutation("exp2 for exp", "qnb.exp(t", "qnb.exp2(t", 1, ("out[0, 0]",)),
    ],
    "layer_norm": [
        # (a row of one element is 0 however its variance comes out)
        Mutation(
            "the mask dropped",
            "d = qnb.where(inside, t - mean, 0.0)",
            "d = t - mean",
            1,
            ("out[0, 0]",),
        ),
        Mutation(
            "eps dropped",
            "qnb.sqrt(var + eps)",
            "qnb.sqrt(var)",
            0,
            ("out[0, 0] is NaN where 0 is expected", STORED),
        ),
        Mutation(
            "the tile's width for the row's",
            "t.sum(axis=1, keepdims=True) / n",
            "t.sum(axis=1, keepdims=True) / 128",
            0,
            ("out[0, 0] is", "where 0 is expected"),
        ),
    ],
    "stencil_3": [
        Mutation(
            "a load off by one", "load(x, start - 1)", "load(x, start)", 0, ("out[0] is", STORED)
        ),
        Mutation(
            "a neighbour dropped", "(left + middle + right)", "(middle + right)", 1, ("out[1]",)
        ),
        Mutation(
            "a grid one too small",
            *_skip_last("    (left + middle + right).store(out, start)\n"),
            0,
            (f"{NOT_WRITTEN} any element",),
        ),
    ],
    "box_blur": [
        Mutation("a constant changed", "acc / 9.0", "acc / 8.0", 0, ("out[0, 0] is", STORED)),
        Mutation(
            "a column of the block dropped",
            "for dj in qnb.static(range(-1, 2))",
            "for dj in qnb.static(range(-1, 1))",
            1,
            ("out[0, 0]",),
        ),
        # (at 1x1 the shifted block still holds img[0, 0] and padding only)
        Mutation(
            "a load off by one",
            "load(img, row + di, col + dj)",
            "load(img, row + di + 1, col + dj)",
            1,
            ("out[0, 0]",),
        ),
    ],
    "histogram": [
        Mutation("a constant changed", "values, 1)", "values, 2)", 0, ("hist[0] is",)),
        Mutation(
            "the padding counted",
            "load(x, start, other=-1)",
            "load(x, start, other=0)",
            0,
            ("hist[0] is",),
        ),
        Mutation(
            "a grid one too small",
            *_skip_last("    qnb.atomic_add(hist, values, 1)\n"),
            0,
            (f"{NOT_WRITTEN} any element of hist",),
        ),
    ],
    "prefix_sums": [
        Mutation("a constant changed", "+ carry", "+ carry + 1.0", 0, ("out[0] is", STORED)),
        Mutation("the carry dropped", ".cumsum() + carry", ".cumsum()", 1, ("first, out[1024]",)),
        Mutation("a product, not a sum", ".cumsum()", ".cumprod()", 1, ("first, out[1],",)),
        Mutation(
            "a loop step too large",
            "range(0, x.shape[0], 1024)",
            "range(0, x.shape[0], 2048)",
            1,
            (f"{NOT_WRITTEN} 2,048 of the 5,000 elements of out, the first out[1024]",),
        ),
    ],
    "transpose": [
        Mutation(
            "not stored transposed",
            ".T.store(out, col, row)",
            ".T.store(out, row, col)",
            1,
            ("out[0, 32]",),
        ),
        Mutation("no .T", ").T.store(out, col, row)", ").store(out, col, row)", 1, ("out[0, 1]",)),
        Mutation(
            "a tile too small",
            "Tile[32, 32].load(x",
            "Tile[32, 16].load(x",
            1,
            (f"{NOT_WRITTEN} 666 of the 1,850 elements of out, the first out[16, 0]",),
        ),
    ],
    "outer_product": [
        Mutation(
            "u and v swapped",
            "qnb.outer(Vec[32].load(u, row), Vec[32].load(v, col))",
            "qnb.outer(Vec[32].load(v, col), Vec[32].load(u, row))",
            1,
            ("out[0, 1]",),
        ),
        Mutation(
            "a load off by one", "load(v, col)", "load(v, col + 1)", 0, ("out[0, 0] is 0 where",)
        ),
        Mutation(
            "a grid one too small",
            *_skip_last(
                "    qnb.outer(Vec[32].load(u, row), Vec[32].load(v, col)).store(out, row, col)\n"
            ),
            0,
            (f"{NOT_WRITTEN} any element",),
        ),
    ],
    "matvec": [
        Mutation(
            "a load off by one",
            "Vec[64].load(x, col)",
            "Vec[64].load(x, col + 1)",
            0,
            ("y[0] is 0 where", STORED),
        ),
        Mutation(
            "a tile too small",
            "Tile[16, 64].load(a, row, col)",
            "Tile[16, 32].load(a, row, col)",
            0,
            ("raised QnbTypeError",),
        ),
        Mutation(
            "columns skipped",
            "range(0, a.shape[1], 64)",
            "range(64, a.shape[1], 64)",
            0,
            ("y[0] is 0 where",),
        ),
    ],
    "matmul": [
        Mutation(
            "a wrong start value",
            "Tile[32, 32].zeros(qnb.f32)",
            "Tile[32, 32].ones(qnb.f32)",
            0,
            ("c[0, 0] is", STORED),
        ),
        Mutation(
            "k stepped by half a tile",
            "range(0, a.shape[1], 32)",
            "range(0, a.shape[1], 16)",
            1,
            ("c[0, 0]",),
        ),
        Mutation(
            "a load off by one",
            "load(b, k, col)",
            "load(b, k, col + 1)",
            0,
            ("c[0, 0] is 0 where",),
        ),
        Mutation(
            "stored at the other place",
            "acc.store(c, row, col)",
            "acc.store(c, col, row)",
            1,
            (f"{NOT_WRITTEN}",),
        ),
    ],
    "linear_relu": [
        Mutation(
            "the bias of another row", "load(bias, col)", "load(bias, row)", 1, ("out[32, 0]",)
        ),
        # (at 1x1x1 this element's sum happens to be negative: relu gives 0 either way)
        Mutation(
            "the bias dropped", "acc + Vec[32].load(bias, col)", "acc + 0.0", 1, ("out[0, 0]",)
        ),
        Mutation(
            "a grid one too small",
            *_skip_last(
                "    qnb.maximum(acc + Vec[32].load(bias, col), 0.0).store(out, row, col)\n"
            ),
            0,
            (f"{NOT_WRITTEN} any element",),
        ),
    ],
    "causal_attention": [
        Mutation(
            "the causal mask dropped",
            "qnb.where(cols <= rows, s, -math.inf)",
            "qnb.where(cols < k.shape[0], s, -math.inf)",
            1,
            ("out[0, 0]", STORED),
        ),
        # (query 0 sees key 0 alone: its softmax is 1 at any scale)
        Mutation("the scale dropped", ") * scale", ") * 1.0", 1, ("out[1, 0]",)),
        # (only queries whose maximum rises in their second key block: here row 36)
        Mutation(
            "no rescale of what was summed",
            "acc = acc * alpha +",
            "acc = acc +",
            1,
            ("out[36, 0]", "program (1, 0, 0)"),
        ),
        Mutation(
            "a key block short",
            "for kb in range(qb + 1):",
            "for kb in range(qb):",
            0,
            ("out[0, 0] is NaN where",),
        ),
    ],
}


def _kernel(tmp_path, name: str, text: str, tag: str):
    """The kernel ``name`` of module text ``text``, from a real file (kernels read
    their source)."""
    path = tmp_path / f"{name}_{tag}.py"
    path.write_text(HEADER + text)
    spec = importlib.util.spec_from_file_location(f"{name}_{tag}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def _mutated(tmp_path, name: str, mutation: Mutation, tag: str):
    text = puzzles.solution(name)
    assert text.count(mutation.old) == 1, (name, mutation.what)
    return _kernel(tmp_path, name, text.replace(mutation.old, mutation.new), tag)


def _cases():
    for name, mutations in MUTATIONS.items():
        for k, mutation in enumerate(mutations):
            yield pytest.param(name, mutation, id=f"{name}-{k}-{mutation.what.replace(' ', '_')}")


def test_every_puzzle_is_attacked_in_several_ways():
    assert set(MUTATIONS) == set(puzzles.names())
    assert all(len(m) >= 3 for m in MUTATIONS.values())


@pytest.mark.parametrize(("name", "mutation"), list(_cases()))
def test_a_mutated_solution_fails_with_the_right_case_and_a_true_message(tmp_path, name, mutation):
    kernel = _mutated(tmp_path, name, mutation, "mutated")
    puzzle = puzzles.puzzle(name)
    grade = puzzles.check(name, kernel)
    assert not grade.passed
    assert grade.case == puzzle.cases[mutation.case], grade.message
    assert grade.message.startswith(f"For {grade.case.label}: ")
    for words in mutation.words:
        assert words in grade.message, grade.message
    assert [r.passed for r in grade.cases] == [True] * mutation.case + [False] * (
        len(puzzle.cases) - mutation.case
    )
    _assert_true(grade, puzzle, kernel)


def _assert_true(grade, puzzle, kernel) -> None:
    """What the grade says, checked against the kernel run here on the same case."""
    number = puzzle.cases.index(grade.case)
    args, expected = puzzle.arguments(np.random.default_rng(number), grade.case)
    grid = puzzle.grid(dict(grade.case.sizes))
    if grade.error is not None:
        with pytest.raises(type(grade.error)):
            kernel[grid](*args.values())
        assert grade.line is not None and grade.index is None
        return
    kernel[grid](*args.values())
    got, want = args[grade.array], expected[grade.array]
    wrong = ~np.isclose(got, want, rtol=puzzle.rtol, atol=puzzle.atol)
    flat = np.ravel_multi_index(grade.index, got.shape)
    assert wrong.flat[flat] and not wrong.flat[:flat].any()  # the first wrong element
    assert grade.expected == want[grade.index]
    assert grade.got == got[grade.index] or (np.isnan(grade.got) and np.isnan(got[grade.index]))
    if grade.program is None and grade.array in puzzle.initial:  # (updated atomically:
        # the element has no one owner, and starts from its initial value, not poison)
        assert NOT_WRITTEN in grade.message or STORED not in grade.message
        assert grade.line is None
    elif grade.program is None:  # "no program wrote": the poison is still there
        assert NOT_WRITTEN in grade.message and np.isnan(got[grade.index])
        assert grade.line is None
    else:
        source = linecache.getline(kernel.filename, grade.line)
        assert ".store(" in source or "] =" in source, source
        assert f"program {grade.program} at line {grade.line}" in grade.message or (
            STORED not in grade.message
        )


# --------------------------------------------------------------------------- the references


@pytest.mark.parametrize("backend", ["cpu", "wgpu"])
@pytest.mark.parametrize("name", puzzles.names())
def test_the_reference_passes(name, backend):
    require_backend(backend)
    grade = puzzles.check(name, getattr(solutions, name), backend=backend)
    assert grade.passed, grade.message
    assert [r.passed for r in grade.cases] == [True] * len(puzzles.puzzle(name).cases)
    assert grade.index is None and grade.program is None and grade.message == "every case passed"


@pytest.mark.parametrize("name", puzzles.names())
def test_the_solution_text_is_the_kernel_that_passes(tmp_path, name):
    """``solution(name)`` is the source of a ``@qnb.kernel`` that passes on its own."""
    text = puzzles.solution(name)
    assert text.startswith(f"@qnb.kernel\ndef {name}(")
    assert puzzles.check(name, _kernel(tmp_path, name, text, "solution")).passed
