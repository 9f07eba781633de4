"""What a newcomer meets first: ``dir(qnb)`` lists the API, not its plumbing; ``qnb
--help`` speaks of tiles of any shape; a ``%%qkernel`` cell's file name says which notebook
it is in where the front end tells the kernel; ``make lab`` on a machine with no display
says where to open Jupyter instead of looking for a browser."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import qnb

ROOT = Path(__file__).resolve().parent.parent


def test_dir_lists_the_api_not_the_plumbing():
    names = dir(qnb)
    for plumbing in ("annotations", "public", "frontend", "signature", "function", "ir"):
        assert plumbing not in names, plumbing
    for api in ("kernel", "Tile", "Vec", "cdiv", "check", "compare", "viz", "cache", "puzzles"):
        assert api in names, api
    assert all(hasattr(qnb, name) for name in names)  # each one a user can reach


def test_help_speaks_of_tiles_of_any_shape():
    ran = subprocess.run(
        [sys.executable, "-m", "qnb", "--help"], capture_output=True, text=True, check=True
    )
    assert "16x16" not in ran.stdout and "any power-of-two shape" in ran.stdout


@pytest.mark.parametrize(
    ("where", "value"),
    [
        ("env", "/home/u/work/01_first_tile_kernel.ipynb"),
        ("__vsc_ipynb_file__", "/home/u/work/01_first_tile_kernel.ipynb"),
        ("__session__", "notebooks/01_first_tile_kernel.ipynb"),
    ],
)
def test_a_cell_names_its_notebook_where_the_front_end_says_it(monkeypatch, where, value):
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "qnb")
    shell.run_cell("import qnb")
    if where == "env":
        monkeypatch.setenv("JPY_SESSION_NAME", value)
    else:
        monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
        shell.user_ns[where] = value
    try:
        ran = shell.run_cell(
            "%%qkernel\ndef named(x: qnb.Array[qnb.f32, 1]):\n    x[0] = 1.0\n", store_history=True
        )
        assert ran.success, ran.error_in_exec
        kernel = shell.user_ns["named"]
        assert kernel.parsed.filename.endswith(" of 01_first_tile_kernel.ipynb>"), (
            kernel.parsed.filename
        )
        assert kernel.parsed.filename.startswith("<qkernel-cell-In[")
    finally:
        shell.user_ns.pop(where, None)


def test_make_lab_on_a_machine_with_no_display_says_where_to_open_it():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    ran = subprocess.run(
        ["make", "-n", "lab"], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert "No display here: open the http://127.0.0.1:8888/lab" in ran.stdout
    assert "--no-browser" in ran.stdout
    shown = subprocess.run(
        ["make", "-n", "lab"], cwd=ROOT, env={**env, "DISPLAY": ":0"},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "--no-browser" not in shown.stdout
