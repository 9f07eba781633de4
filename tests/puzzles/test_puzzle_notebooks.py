"""``notebooks/puzzles/``: every puzzle, with its statement, the learner's cell and its
check, and the reference solution checked too, stored from one run for nbval (which
``make test`` runs over them: the Makefile's NOTEBOOKS)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import qnb.puzzles as puzzles

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "notebooks" / "puzzles"
NOTEBOOKS = sorted(FOLDER.glob("*.ipynb"))


def _build():
    spec = importlib.util.spec_from_file_location("build_puzzles", FOLDER / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _code(path: Path) -> list[dict]:
    return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]


def _text(cell: dict) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def _printed(cell: dict) -> str:
    out = []
    for output in cell["outputs"]:
        data = output.get("data", {})
        out.append("".join(output.get("text", "")) + "".join(data.get("text/plain", "")))
    return "".join(out)


def test_every_puzzle_is_in_a_notebook_in_teaching_order():
    build = _build()
    assert [p.name for p in NOTEBOOKS] == sorted(build.NOTEBOOKS)
    listed = [name for _, names in build.NOTEBOOKS.values() for name in names]
    assert listed == puzzles.names()


def test_the_notebooks_are_what_build_writes():
    build = _build()
    for number, (filename, (title, names)) in enumerate(build.NOTEBOOKS.items(), start=1):
        want = [_text(c) for c in build.notebook(title, names, number)["cells"]]
        have = [_text(c) for c in json.loads((FOLDER / filename).read_text())["cells"]]
        assert have == want, f"{filename}: run notebooks/puzzles/build.py, then store its outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_each_puzzle_has_its_statement_a_learner_cell_a_check_and_the_solution(path):
    cells = _code(path)
    assert "%load_ext qnb" in _text(cells[0])
    texts = [_text(c) for c in cells]
    shown = [n for n in puzzles.names() if f'puzzles.show("{n}")' in texts]
    assert shown
    for name in shown:
        at = texts.index(f'puzzles.show("{name}")')
        show, starter, first, solution, second = cells[at : at + 5]
        assert puzzles.puzzle(name).title in _printed(show)
        assert _text(starter).startswith("%%qkernel\n" + puzzles.puzzle(name).signature)
        assert _text(first) == _text(second) == f'puzzles.check("{name}", {name})'
        assert _printed(first).startswith(f"{name}: not yet. For ")
        assert _text(solution) == "%%qkernel\n" + puzzles.solution(name).rstrip("\n")
        assert _printed(second).startswith(f"{name}: passed, every case")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_from_one_run_without_errors(path):
    notebook = json.loads(path.read_text())
    assert notebook["metadata"]["kernelspec"]["name"] == "python3"
    cells = _code(path)
    assert [c["execution_count"] for c in cells] == list(range(1, len(cells) + 1))
    for cell in cells:
        for output in cell["outputs"]:
            assert output["output_type"] != "error", _text(cell)
            if output["output_type"] == "stream":
                assert output["name"] == "stdout", output["text"]


def test_make_test_runs_them_under_nbval():
    makefile = (ROOT / "Makefile").read_text()
    assert "$(wildcard notebooks/puzzles/*.ipynb)" in makefile
