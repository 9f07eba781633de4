"""`make test` runs the notebooks beside the test suite and fails when either fails.

The recipe runs for real (GNU make, its shell) over a stand-in venv whose ``python``
records when the tests and the notebook check start and end, and exits as told; its
install stamp is newer than pyproject.toml and the system packages are taken as done
(``-o``), so nothing is installed; the notebooks' output goes through a log of the test's
own (a `make test` running this test uses build/test-notebooks.log).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

STAND_IN = """#!/bin/sh
# $1 $2 is "-m pytest" for the tests, "scripts/run_notebooks.py --check" for the notebooks
if [ "$1 $2" = "-m pytest" ]; then what=tests; status=$TESTS_STATUS
else what=notebooks; status=$NOTEBOOKS_STATUS; fi
echo "start $what" >> "$LOG"
echo "$what say this"
sleep 1
echo "end $what" >> "$LOG"
exit "$status"
"""


def make_test(tmp_path, tests_status: int, notebooks_status: int):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(STAND_IN)
    python.chmod(0o755)
    (venv / ".qnb-installed").touch()  # after pyproject.toml was written: no install
    log = tmp_path / "log"
    ran = subprocess.run(
        ["make", "-s", "-o", "system-deps", "test", f"VENV={venv}", "TEST_WORKERS=2",
         f"NOTEBOOK_LOG={tmp_path / 'notebooks.log'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "LOG": str(log), "TESTS_STATUS": str(tests_status),
             "NOTEBOOKS_STATUS": str(notebooks_status)},
    )  # fmt: skip
    return ran, log.read_text().splitlines()


@pytest.fixture(autouse=True)
def _needs_make():
    if shutil.which("make") is None:
        pytest.skip("GNU make is not installed")


def test_the_notebooks_run_while_the_tests_run(tmp_path):
    ran, log = make_test(tmp_path, 0, 0)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert sorted(log) == ["end notebooks", "end tests", "start notebooks", "start tests"]
    assert log[:2] in (["start notebooks", "start tests"], ["start tests", "start notebooks"])
    said = ran.stdout.index("tests say this"), ran.stdout.index("notebooks say this")
    assert said[0] < said[1]  # the notebooks' output is printed after the tests'
    assert not (tmp_path / "notebooks.log").exists()  # printed, then removed


@pytest.mark.parametrize(("tests_status", "notebooks_status"), [(1, 0), (0, 1), (1, 1)])
def test_either_failure_fails_make_test(tmp_path, tests_status, notebooks_status):
    ran, log = make_test(tmp_path, tests_status, notebooks_status)
    assert ran.returncode != 0
    assert len(log) == 4  # both ran to their end
