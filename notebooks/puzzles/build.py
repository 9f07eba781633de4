"""Write the puzzle notebooks (without outputs) from ``qnb.puzzles``: each puzzle's
statement, a cell for the learner's kernel and its check, and the reference solution
checked too. Then store their outputs as every notebook's are stored:

    .venv/bin/python notebooks/puzzles/build.py
    .venv/bin/python scripts/run_notebooks.py notebooks/puzzles/*.ipynb

(``tests/puzzles/test_puzzle_notebooks.py`` checks that the notebooks hold every puzzle
and the solutions ``qnb.puzzles.solution`` gives.)
"""

from __future__ import annotations

import json
from pathlib import Path

import qnb.puzzles as puzzles

HERE = Path(__file__).parent
NOTEBOOKS = {
    "01_maps_and_guards.ipynb": (
        "Maps and guards",
        ["add_ten", "multiply", "guarded_square", "clip", "scale_2d"],
    ),
    "02_broadcasting_and_reductions.ipynb": (
        "Broadcasting and reductions",
        ["outer_sum", "add_bias", "total", "row_sums", "column_means", "row_max"],
    ),
    "03_softmax_and_stencils.ipynb": (
        "A masked softmax, a layer norm, stencils, a histogram and a scan",
        ["masked_softmax", "layer_norm", "stencil_3", "box_blur", "histogram", "prefix_sums"],
    ),
    "04_matrices.ipynb": (
        "Matrices",
        ["transpose", "outer_product", "matvec", "matmul", "linear_relu"],
    ),
    "05_attention.ipynb": ("Causal attention", ["causal_attention"]),
}
SETUP = """\
%load_ext qnb

import math

import numpy as np

import qnb
import qnb.puzzles as puzzles
from qnb import Tile, Vec

qnb.set_backend("cpu")  # where the kernels compile as the cells run (the checks run on cpu too)"""
HOW_TO_READ = """\
**How to read a grade.** `puzzles.check(name, kernel)` runs your kernel on every case of
the puzzle (a size of 1, sizes that are not multiples of the tile, a large one; random
non-zero data; the outputs filled with NaN first, so an element nobody writes shows) and
compares it with the NumPy definition. The report says *passed*, or *not yet* and one
sentence: the case, the first wrong element, the program that stored it and the line of
that store (or that no program wrote it). Each case has a mark: ✓ passed, ✗ failed, · not
tried (after the first failure). The picture is the output array: grey where it is right,
a **red** ring round each element that holds a wrong value, an **orange** one round each
element that no program wrote (every one is ringed, however large the array)."""


def _cell(kind: str, source: str, number: int) -> dict:
    cell = {"cell_type": kind, "id": f"c{number:02d}", "metadata": {}, "source": source}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def starter(name: str) -> str:
    """The learner's cell: the signature and nothing done yet."""
    signature = puzzles.puzzle(name).signature
    return f"%%qkernel\n{signature}\n    # your kernel here: see the statement above\n    pass"


def notebook(title: str, names: list[str], number: int) -> dict:
    sources = [
        (
            "markdown",
            f"# Puzzles {number} · {title}\n\n"
            f"{len(names)} puzzle{'s' if len(names) > 1 else ''}: "
            + ", ".join(f"`{n}`" for n in names)
            + ". Each gives its statement, a cell for your kernel and its check, then a "
            "reference solution, checked too.\n\n" + HOW_TO_READ,
        ),
        ("code", SETUP),
    ]
    for name in names:
        sources += [
            ("markdown", f"## `{name}`"),
            ("code", f'puzzles.show("{name}")'),
            ("markdown", "Your kernel (run the cell, then the check below it):"),
            ("code", starter(name)),
            ("code", f'puzzles.check("{name}", {name})'),
            ("markdown", "A reference solution (try your own first):"),
            ("code", "%%qkernel\n" + puzzles.solution(name).rstrip("\n")),
            ("code", f'puzzles.check("{name}", {name})'),
        ]
    cells = [_cell(kind, text, k) for k, (kind, text) in enumerate(sources)]
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {
                "display_name": "Python 3 (ipykernel)",
                "language": "python",
                "name": "python3",
            },
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def main() -> None:
    for number, (filename, (title, names)) in enumerate(NOTEBOOKS.items(), start=1):
        path = HERE / filename
        path.write_text(
            json.dumps(notebook(title, names, number), indent=1, ensure_ascii=False) + "\n"
        )
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
