"""A checkout named ``qnb`` (the directory ``git clone`` makes) passes the tests that tell
qnb's own frames and files from the user's: they go by the package's real directory, not
by a path fragment such as ``/qnb/`` (which every file of such a checkout holds, the test
files too). The check copies the package and the tests into ``<tmp>/qnb`` and runs those
tests there, in a fresh process that imports the copy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import qnb

ROOT = Path(qnb.__file__).resolve().parent.parent
# The tests that look at which frames and files are qnb's.
TESTS = [
    "tests/frontend/test_error_messages.py",
    "tests/magics/test_magics.py::test_syntax_errors_found_by_compile_show_the_cell_line_only",
]


@pytest.mark.slow
def test_the_frame_and_file_checks_pass_in_a_checkout_named_qnb(tmp_path):
    checkout = tmp_path / "qnb"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for part in ("qnb", "tests"):
        shutil.copytree(ROOT / part, checkout / part, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", checkout / "pyproject.toml")
    env = dict(os.environ, PYTHONPATH=str(checkout))
    env.pop("PYTEST_ADDOPTS", None)
    where = subprocess.run(
        [sys.executable, "-c", "import qnb; print(qnb.__file__)"],
        cwd=checkout, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert Path(where.stdout.strip()).resolve().is_relative_to(checkout), where.stdout
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
         "-n", "0", *TESTS],
        cwd=checkout, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
    assert " passed" in ran.stdout and "failed" not in ran.stdout, ran.stdout[-2000:]
