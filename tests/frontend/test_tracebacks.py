"""Outside IPython a qnb error's traceback holds the user's own frames and at most one
frame of qnb (the public call it came through), never the compiler's: in a plain
``python`` run and under pytest. Each case runs in a process of its own and its traceback
is read as a user sees it; the error still names the user's line with a caret."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
QNB_DIR = str(REPO / "qnb")

USER_SCRIPT = Path(__file__).with_name("traceback_cases.py")

# case → (error type, the user's line the caret is under, the user's line that called)
CASES = {
    "decoration": ("QnbSyntaxError", "t[:] = a[0:, 0:16]", "@qnb.kernel"),
    "decoration_with_options": (
        "QnbSyntaxError",
        "t[:] = a[0:, 0:16]",
        '@qnb.kernel(backend="cpu", debug=True)',
    ),
    "func_decoration": ("QnbSyntaxError", "return {a: 1}", "@qnb.func"),
    "launch_type": ("QnbTypeError", "def copy(", "copy[1](x, np.zeros((16, 16), np.int32))"),
    "call_type": ("QnbTypeError", "def copy(", "copy(x, np.zeros((16, 16), np.int32))"),
    "keyword": ("QnbTypeError", "copy[1](x, output=x)", "copy[1](x, output=x)"),
    "launch_capture": ("QnbCaptureError", "* LOOKUP", "captures[1](x)"),
    "launch_index": ("QnbIndexError", "out[i, 0] = 1.0", "outside[20](x, np.zeros_like(x))"),
    "source": ("QnbTypeError", "+ qnb.f32", 'mistyped.source("wgsl")'),
    "static": ("QnbTypeError", "qnb.static(Settings.MISSING > 1)", "static_read[1](x)"),
    "trace": ("QnbTypeError", "def copy(", "copy.trace[1](x, np.zeros((16, 16), np.int32))"),
    "bad_grid": ("QnbTypeError", "copy[0](x, x)", "copy[0](x, x)"),
    "device_copy": ("QnbTypeError", None, 'qnb.to_device(np.ones(4, np.int64), backend="cpu")'),
    "backend_name": ("BackendError", None, 'with qnb.backend("nope"):'),
    "compare_type": (
        "QnbTypeError",
        None,
        'qnb.compare(copy[1], x, np.zeros((16, 16), np.int32), backends=["cpu"])',
    ),
}

FRAME = re.compile(r'^  File "([^"]+)", line \d+, in (\S+)$', re.M)


def _env(tmp_path) -> dict:
    env = dict(os.environ, QNB_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(REPO))
    env.pop("PYTHONWARNINGS", None)
    return env


def _qnb_frames(text: str) -> list[str]:
    return [name for path, name in FRAME.findall(text) if path.startswith(QNB_DIR + os.sep)]


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("user") / "user_script.py"  # outside qnb's tree
    path.write_text(USER_SCRIPT.read_text())
    return path


# ``python user_script.py CASE`` for every case, each in a process of its own forked from
# one that has imported numpy and qnb (what a case's own interpreter spent its second
# on): the child runs the script as __main__ and, on the uncaught error, prints what
# Python prints for one (sys.excepthook, from the script's module level: the frames of
# this launcher and runpy are not the user's) and ends with status 1.
_FORKED_RUNS = r"""
import json, os, runpy, sys
import numpy, qnb
script, base, cases = sys.argv[1], sys.argv[2], sys.argv[3:]
results = {}
for case in cases:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        os.dup2(write_end, 2)
        sys.argv = [script, case]
        os.environ["QNB_CACHE_DIR"] = os.path.join(base, case)
        status = 0
        try:
            runpy.run_path(script, run_name="__main__")
        except BaseException:
            kind, error, tb = sys.exc_info()
            while tb is not None and tb.tb_frame.f_code.co_filename != script:
                tb = tb.tb_next
            sys.excepthook(kind, error.with_traceback(tb), tb)
            status = 1
        sys.stderr.flush()
        os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, encoding="utf-8") as printed:
        stderr = printed.read()
    results[case] = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), stderr]
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def plain_runs(script, tmp_path_factory) -> dict:
    """{case: (exit status, stderr)} of ``python user_script.py CASE``."""
    base = tmp_path_factory.mktemp("caches")
    run = subprocess.run(
        [sys.executable, "-c", _FORKED_RUNS, str(script), str(base), *CASES],
        capture_output=True,
        text=True,
        env=_env(base),
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.parametrize("case", list(CASES))
def test_a_plain_python_run_shows_the_users_frames_and_one_of_qnb(script, plain_runs, case):
    kind, caret_line, called_from = CASES[case]
    status, text = plain_runs[case]
    assert status == 1 and text.startswith("Traceback (most recent call last):"), text
    assert len(_qnb_frames(text)) <= 1, text
    users = [path for path, _ in FRAME.findall(text) if path == str(script)]
    assert len(users) >= 2, text  # the module level and the case's own function
    assert called_from in text  # the user's line that made the public call
    error = text[text.index(f"qnb.errors.{kind}: ") :]
    if caret_line is not None:  # the error's own rendering: file, line, caret
        assert f'File "{script}", line ' in error
        lines = error.splitlines()
        where = next(i for i, line in enumerate(lines) if caret_line in line)
        assert lines[where + 1].strip() == "^", error


PYTEST_FILE = textwrap.dedent(
    """
    import pytest
    import user_script

    @pytest.mark.parametrize("case", %r)
    def test_case(case):
        getattr(user_script, case)()
    """
)


def test_under_pytest_the_traceback_has_no_compiler_frames(script, tmp_path):
    cases = list(CASES)
    test_file = script.parent / "test_user.py"
    test_file.write_text(PYTEST_FILE % (cases,))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(test_file),
            "-q",
            "--tb=short",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "--rootdir",
            str(script.parent),
        ],
        capture_output=True,
        text=True,
        env=_env(tmp_path),
        timeout=300,
        cwd=script.parent,
    )
    text = run.stdout
    assert f"{len(cases)} failed" in text, text
    # --tb=short names each frame "path:line: in function"
    sections = re.split(r"_{3,} test_case\[", text)[1:]
    assert len(sections) == len(cases), text
    for section in sections:
        frames = re.findall(r"^(\S+\.py):\d+: in (\S+)$", section, re.M)
        ours = [f for f in frames if "qnb" + os.sep in f[0] and "user" not in f[0]]
        assert len(ours) <= 1, section
        assert any("user_script.py" in path for path, _ in frames), section
