"""A fresh Python process running qnb on wgpu, for the tests of what such a process does
before and at its first launch (making the device, parsing wgpu-py's C types)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run_fresh_process(tmp_path: Path, script: str, *argv: str, **env: str | None):
    """Runs ``script`` (Python source, written to a file: a kernel's source must be in
    one) with ``argv`` in a fresh process: this checkout's qnb first on the path, a cache
    directory of its own, and ``env`` over the test's environment (None: unset). Returns
    the JSON its last line printed. Skipped where no wgpu adapter is usable, unless CI
    requires one (QNB_REQUIRE_WGPU=1: then the process fails instead)."""
    pytest.importorskip("wgpu")
    from qnb.backends.wgpu import WgpuBackend

    if not WgpuBackend().info().available and os.environ.get("QNB_REQUIRE_WGPU") != "1":
        pytest.skip("no wgpu adapter")
    full = dict(os.environ, QNB_CACHE_DIR=str(tmp_path / "cache"))
    for name, value in env.items():
        if value is None:
            full.pop(name, None)
        else:
            full[name] = value
    full["PYTHONPATH"] = os.pathsep.join([str(REPO), full.get("PYTHONPATH", "")])
    path = tmp_path / "fresh_process.py"
    path.write_text(script)
    result = subprocess.run(
        [sys.executable, str(path), *argv], capture_output=True, text=True, env=full, timeout=600
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])
