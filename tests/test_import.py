"""``import qnb`` must stay fast and import no backend, GPU library or notebook library."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY_MODULES = (
    "wgpu",
    "cupy",
    "IPython",
    "ipywidgets",
    "anywidget",
    "matplotlib",
    "qnb.backends.wgpu",
    "qnb.backends.cuda",
    "qnb.backends.cpu",
)

PROBE = """
import json, sys, time
start = time.perf_counter()
import qnb
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "modules": sorted(sys.modules)}))
"""


@pytest.fixture(scope="module")
def fresh_import():
    """What a fresh interpreter holds right after ``import qnb``, and how long it took."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", HEAVY_MODULES)
def test_import_qnb_does_not_import(fresh_import, module):
    assert module not in fresh_import["modules"], f"`import qnb` imported {module}"


def test_import_time_is_reported(fresh_import, record_property, capsys):
    # Reported, not asserted: absolute times depend on the machine and its load.
    seconds = fresh_import["seconds"]
    record_property("import_qnb_seconds", seconds)
    with capsys.disabled():
        print(f"\n[import qnb: {seconds * 1000:.1f} ms, {len(fresh_import['modules'])} modules]")


def test_version_comes_from_pyproject():
    from qnb._version import __version__

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    declared = re.search(r'^version = "([^"]+)"', pyproject.read_text(), re.MULTILINE)
    assert declared and __version__ == declared.group(1)
