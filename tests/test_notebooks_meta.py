"""The teaching notebooks are present and stored with the outputs nbval compares.

nbval (``make test``) re-runs each notebook and compares against the stored outputs, but it
silently skips a cell whose stored ``execution_count`` is null, so a notebook saved
without running would "pass" while checking nothing. Most checks here catch that kind of
thing in a second, without starting a kernel. A few do more: notebook 04 runs twice against
one kernel cache (as "Restart & Run All" in ``make lab`` does), the exercise in notebook 01
accepts its own solution, and ``make demo``'s pages load nothing from a CDN.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
from pathlib import Path

import pytest

import qnb

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = ROOT / "notebooks"
EXPECTED = [
    "01_first_tile_kernel.ipynb",
    "02_tiled_matmul.ipynb",
    "03_batched_cholesky.ipynb",
    "04_cache_keys.ipynb",
    "05_one_kernel_three_backends.ipynb",
    "06_softmax_and_attention.ipynb",
    "07_races_and_atomics.ipynb",
]
IGNORE_TAG = "nbval-ignore-output"
RAISES_TAG = "raises-exception"


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


def tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


@pytest.mark.parametrize("name", EXPECTED)
def test_no_stored_errors_or_stderr(name):
    """No errors, except in a cell tagged raises-exception (a mistake shown on purpose)."""
    for cell in code_cells(load(name)):
        for output in cell["outputs"]:
            if RAISES_TAG not in tags(cell):
                assert output["output_type"] != "error", (
                    f"{name}: stored error {output.get('ename')}"
                )
            if output["output_type"] == "stream":
                assert output["name"] == "stdout", (
                    f"{name}: stderr stored (Mesa without XDG_RUNTIME_DIR?): {output['text'][:200]}"
                )


@pytest.mark.parametrize("name", EXPECTED)
def test_strict_where_possible(name):
    """Most cells are compared exactly; only a few (timings, devices) are exempt."""
    cells = code_cells(load(name))
    ignored = [c for c in cells if IGNORE_TAG in tags(c)]
    assert len(ignored) <= 2, f"{name}: {len(ignored)} cells tagged {IGNORE_TAG}"


@pytest.mark.parametrize("name", EXPECTED)
def test_loads_the_extension(name):
    first = "".join(code_cells(load(name))[0]["source"])
    assert "%load_ext qnb" in first


def test_deliberate_mistakes_show_the_cell_line_and_a_caret():
    """A cell tagged raises-exception must raise (the tag is not left behind by an edit),
    and what it shows is a qnb error: the cell's line and a caret, no long traceback."""
    shown = []
    for name in EXPECTED:
        for cell in code_cells(load(name)):
            if RAISES_TAG not in tags(cell):
                continue
            errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
            assert errors, f"{name}: a cell tagged {RAISES_TAG} raised nothing"
            traceback = errors[0]["traceback"]
            assert errors[0]["ename"].startswith("Qnb"), errors[0]["ename"]
            assert any('File "<qkernel-cell-' in line for line in traceback), traceback
            assert traceback[-1].strip() == "^", traceback
            assert len(traceback) <= 6, "a compiler traceback leaked into the error"
            shown.append(name)
    assert "01_first_tile_kernel.ipynb" in shown


# ------------------------------------------------------------------------ the exercise in 01


def _exercise_cells() -> tuple[str, str, str]:
    """Notebook 01's exercise: the kernel as given, its check, and the solution."""
    cells = load("01_first_tile_kernel.ipynb")["cells"]
    sources = ["".join(cell["source"]) for cell in cells]
    given = next(s for s in sources if s.startswith("%%qkernel\ndef relu_tiles("))
    check = next(s for s in sources if s.startswith("def check_relu_tiles("))
    details = next(s for s in sources if "<details>" in s and "def relu_tiles(" in s)
    solution = re.search(r"```python\n(.*?)```", details, re.S).group(1)
    return given, check, solution


def _run_exercise(kernel_cell: str, check_cell: str, tmp_path: Path, name: str) -> str:
    """What the check cell prints for ``kernel_cell`` (as a plain module, on cpu)."""
    kernel = kernel_cell.replace("%%qkernel\n", "@qnb.kernel\n", 1)
    module_text = "\n\n".join(
        [
            "import numpy as np\nimport qnb\nfrom qnb import Tile16",
            kernel,
            check_cell.replace("print(check_relu_tiles())", ""),
        ]
    )
    path = tmp_path / f"{name}.py"  # a real file: kernels read their source
    path.write_text(module_text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    printed = io.StringIO()
    with qnb.backend("cpu"), contextlib.redirect_stdout(printed):
        spec.loader.exec_module(module)
        return module.check_relu_tiles()


def test_the_exercise_check_accepts_the_solution(tmp_path):
    given, check, solution = _exercise_cells()
    assert _run_exercise(given, check, tmp_path, "exercise_given").startswith("Not yet")
    assert _run_exercise(solution, check, tmp_path, "exercise_solved").startswith("Correct")


# ------------------------------------------------- notebook 04 against a cache it already filled


def _sanitizers() -> list[tuple[re.Pattern, str]]:
    text = (NOTEBOOKS_DIR / "sanitize.cfg").read_text(encoding="utf-8")
    pairs = re.findall(r"^regex: (.*)$\n^replace: (.*)$", text, flags=re.MULTILINE)
    return [(re.compile(regex), replace) for regex, replace in pairs]


def _printed(cell, sanitizers) -> str:
    text = "".join("".join(o["text"]) for o in cell.outputs if o["output_type"] == "stream")
    # IPython's own note when a cell loads the extension a second time in one kernel.
    text = text.replace(
        "The qnb extension is already loaded. To reload it, use:\n  %reload_ext qnb\n", ""
    )
    for regex, replace in sanitizers:
        text = regex.sub(replace, text)
    return text


@pytest.mark.slow
def test_notebook_04_runs_again_against_the_same_cache(tmp_path, monkeypatch):
    """``make lab`` keeps the user's disk cache, so "Restart & Run All" meets the kernels of
    the previous run; "Run All" without a restart meets them in memory as well. Neither
    may raise, and both must tell the same story as the first run.

    The first run's story is the stored outputs (nbval holds a fresh run to them), so the
    notebook runs here as nbval runs it (scripts/run_notebooks.py's reference machine) in
    one kernel, twice: "Restart & Run All" is its first pass (the notebook starts each run
    on a fresh cache directory of its own and empties this process's memory level), "Run
    All" its second."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    run_notebooks = _script_module("run_notebooks")
    for name, value in run_notebooks.reference_environment(tmp_path / "shared-cache").items():
        monkeypatch.setenv(name, value)
    for name, value in run_notebooks.REFERENCE_MACHINE.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
    path = NOTEBOOKS_DIR / "04_cache_keys.ipynb"
    sanitizers = _sanitizers()
    again = nbformat.read(path, as_version=4)
    expected = [_printed(c, sanitizers) for c in again.cells if c.cell_type == "code"]
    assert any(expected) and all("Traceback" not in text for text in expected)

    client = nbclient.NotebookClient(again, timeout=120, kernel_name="python3")
    with client.setup_kernel():
        for run in ("restart & run all", "run all without a restart"):
            for index, cell in enumerate(again.cells):
                if cell.cell_type == "code":
                    cell.outputs = []
                    client.execute_cell(cell, index)  # raises CellExecutionError on an error
            printed = [_printed(c, sanitizers) for c in again.cells if c.cell_type == "code"]
            for number, (want, got) in enumerate(zip(expected, printed)):
                assert got == want, f"{run}: code cell {number} printed\n{got}\ninstead of\n{want}"


def _script_module(name: str):
    """scripts/NAME.py as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- make demo's pages


def _demo_html_module():
    spec = importlib.util.spec_from_file_location("demo_html", ROOT / "scripts" / "demo_html.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_demo_pages_load_no_script_from_the_network():
    """`make demo` says its pages work offline: no <script src="http...">, no ES module
    imported from a URL (nbconvert's lab template loads require.js, MathJax and mermaid
    from CDNs unless told otherwise)."""
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbconvert")
    notebook = nbformat.read(NOTEBOOKS_DIR / "04_cache_keys.ipynb", as_version=4)
    html = _demo_html_module().to_html(notebook)  # its stored outputs: nothing is executed
    assert "diagonal_demo" in html
    remote_scripts = re.findall(r"<script[^>]*\bsrc\s*=\s*[\"']?(?:https?:)?//[^>]*>", html, re.I)
    assert not remote_scripts
    assert not re.findall(r"\bimport\b[^;\n]*[\"'](?:https?:)?//", html)
    assert not re.findall(r"<link[^>]*href\s*=\s*[\"']?(?:https?:)?//[^>]*>", html, re.I)


# ------------------------------------------------------------------ the reference environment


def test_notebooks_are_checked_and_stored_on_the_reference_machine(monkeypatch):
    """`make test` checks the notebooks through scripts/run_notebooks.py --check, which
    runs them as they were stored: no CUDA device, wgpu on lavapipe, none of qnb's
    cache settings, so the stored backend lines do not depend on this machine."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "scripts/run_notebooks.py --check" in makefile
    spec = importlib.util.spec_from_file_location(
        "run_notebooks", ROOT / "scripts" / "run_notebooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("QNB_ALWAYS_COMPILE", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    env = module.reference_environment("/some/cache")
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert env["QNB_CACHE_DIR"] == "/some/cache"
    assert "QNB_ALWAYS_COMPILE" not in env
    assert env["WGPUPY_WGPU_ADAPTER_NAME"] == "(CPU) via Vulkan"  # lavapipe's adapter
