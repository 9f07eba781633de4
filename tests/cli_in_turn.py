"""qnb's command line, several commands in turn in one fresh process (``qnb.cli.main``,
as ``python -m qnb`` and the console script run it): a process each spends ~1 s (~4 s for
``qnb doctor``) on the same imports and backend probes. Each command runs under its own
settings, which are undone before the next (the command line reads them at call time, as
a launch does)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

_IN_TURN = """
import contextlib, io, json, os, sys
from qnb.cli import main
results = []
for env, args in json.loads(sys.argv[1]):
    saved = dict(os.environ)
    os.environ.update(env)
    printed, complained = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(complained):
        try:
            status = main(args)
        except SystemExit as exc:  # argparse: a usage error (2)
            status = exc.code
    os.environ.clear()
    os.environ.update(saved)
    results.append([status, printed.getvalue(), complained.getvalue()])
print(json.dumps(results))
"""


def run_in_turn(jobs: list, env: dict | None = None, timeout: float = 300) -> list:
    """``[status, stdout, stderr]`` of each ``(settings, args)`` in ``jobs``, in order, in
    one fresh process whose environment is ``env`` (this one's where None) with this
    checkout's qnb first on the path; ``settings`` are set for that command alone."""
    full = dict(os.environ if env is None else env)
    full["PYTHONPATH"] = os.pathsep.join([str(REPO), full.get("PYTHONPATH", "")])
    process = subprocess.run(
        [sys.executable, "-c", _IN_TURN, json.dumps(jobs)],
        capture_output=True,
        text=True,
        env=full,
        timeout=timeout,
    )
    assert process.returncode == 0, process.stderr
    return json.loads(process.stdout)
