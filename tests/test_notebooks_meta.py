"""The teaching notebooks are present and stored with the outputs nbval compares.

nbval (``make test``) re-runs each notebook and compares against the stored outputs, but it
silently skips a cell whose stored ``execution_count`` is null, so a notebook saved
without running would "pass" while checking nothing. These checks catch that in a second,
without starting a kernel.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
EXPECTED = [
    "01_first_tile_kernel.ipynb",
    "02_tiled_matmul.ipynb",
    "03_batched_cholesky.ipynb",
    "04_cache_keys.ipynb",
    "05_one_kernel_three_backends.ipynb",
]
IGNORE_TAG = "nbval-ignore-output"


def load(name: str) -> dict:
    return json.loads((NOTEBOOKS_DIR / name).read_text(encoding="utf-8"))


def code_cells(notebook: dict) -> list[dict]:
    return [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]


def test_every_notebook_exists():
    present = sorted(p.name for p in NOTEBOOKS_DIR.glob("*.ipynb"))
    assert present == EXPECTED


def test_sanitizers_exist():
    text = (NOTEBOOKS_DIR / "sanitize.cfg").read_text(encoding="utf-8")
    pairs = re.findall(r"^regex: (.*)$\n^replace: (.*)$", text, flags=re.MULTILINE)
    assert pairs, "notebooks/sanitize.cfg has no regex/replace pairs"
    for regex, _ in pairs:
        re.compile(regex)


@pytest.mark.parametrize("name", EXPECTED)
def test_declares_the_python3_kernel(name):
    spec = load(name)["metadata"].get("kernelspec", {})
    assert spec.get("name") == "python3"
    assert spec.get("language") == "python"


@pytest.mark.parametrize("name", EXPECTED)
def test_stored_outputs_come_from_one_run(name):
    cells = code_cells(load(name))
    assert cells, f"{name} has no code cells"
    counts = [cell["execution_count"] for cell in cells]
    assert None not in counts, f"{name}: unrun cells (nbval would skip them): {counts}"
    assert counts == list(range(1, len(cells) + 1)), (
        f"{name}: execution counts {counts} are not one top-to-bottom run; "
        "re-run scripts/run_notebooks.py"
    )
    assert sum(len(cell["outputs"]) for cell in cells) >= len(cells) // 2, (
        f"{name}: most cells have no stored output"
    )


@pytest.mark.parametrize("name", EXPECTED)
def test_no_stored_errors_or_stderr(name):
    for cell in code_cells(load(name)):
        for output in cell["outputs"]:
            assert output["output_type"] != "error", f"{name}: stored error {output.get('ename')}"
            if output["output_type"] == "stream":
                assert output["name"] == "stdout", (
                    f"{name}: stderr stored (Mesa without XDG_RUNTIME_DIR?): {output['text'][:200]}"
                )


@pytest.mark.parametrize("name", EXPECTED)
def test_strict_where_possible(name):
    """Most cells are compared exactly; only a few (timings, devices) are exempt."""
    cells = code_cells(load(name))
    ignored = [c for c in cells if IGNORE_TAG in c.get("metadata", {}).get("tags", [])]
    assert len(ignored) <= 2, f"{name}: {len(ignored)} cells tagged {IGNORE_TAG}"


@pytest.mark.parametrize("name", EXPECTED)
def test_loads_the_extension(name):
    first = "".join(code_cells(load(name))[0]["source"])
    assert "%load_ext qnb" in first
