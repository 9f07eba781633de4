"""``%qcompare [-b BACKEND,...] EXPR`` through a real IPython shell (wgpu runs on lavapipe;
``(x + 1e8) - 1e8`` is where lavapipe and NumPy part: see tests/test_compare.py)."""

import numpy as np
import pytest

pytest.importorskip("IPython")

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import qnb
from tests.conftest import require_backend

SHIFT = """\
def shift(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    i = qnb.program_id(0)
    t = qnb.Tile16.load(x, 16 * i, 0)
    v = (t + 1e8) - 1e8
    v.store(out, 16 * i, 0)
"""


@pytest.fixture(scope="module")
def ip():
    require_backend("wgpu")
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "qnb")
    shell.run_cell("import numpy as np\nimport qnb")
    with capture_output():
        shell.run_cell_magic("qkernel", "", SHIFT)
    x = np.full((32, 16), 0.75, np.float32)
    x[:16] = 0.0  # program 0 agrees everywhere
    shell.user_ns.update(x=x, out=np.zeros_like(x))
    return shell


def compare(ip, line):
    with capture_output() as captured:
        result = ip.run_line_magic("qcompare", line)
    return captured, result


def test_one_line_per_backend_and_no_view_when_equal(ip):
    captured, result = compare(ip, "-b wgpu shift[1](x, out)")
    assert result is None
    assert captured.stdout.splitlines() == [
        "shift: equal",
        "cpu: reference (max error 0 from exact)",
        "wgpu: equal (max abs difference 0; max error 0 from exact)",
    ]
    assert not captured.outputs  # no CompareView
    assert not ip.user_ns["out"].any()  # the arguments are untouched


def test_a_difference_shows_compare_view_and_o_returns_the_comparison(ip):
    captured, result = compare(ip, "-b wgpu -o shift[2](x, out)")
    assert isinstance(result, qnb.Comparison) and not result.equal
    lines = captured.stdout.splitlines()
    # lavapipe keeps x in (x + 1e8) - 1e8, the exact answer; cpu's f32 rounds it to 0
    assert lines[0] == "shift: rounding (wgpu is closer to exact than cpu)"
    assert lines[1] == "cpu: reference (max error 0.75 from exact)"
    assert lines[2].startswith(
        "wgpu: rounding, closer to exact than cpu (out: 256 mismatches, first at (16, 0)"
    )
    assert "max error 0 from exact, cpu's 0.75" in lines[2]
    assert "line 5 (sub)" in lines[2]  # (line 1 is the %%qkernel line)
    assert "program (1, 0, 0)" in lines[2]
    (shown,) = captured.outputs
    assert shown.data["text/plain"] == (
        "CompareView('shift' on cpu, wgpu: rounding (wgpu is closer to exact than cpu))"
    )
    assert "application/vnd.jupyter.widget-view+json" in shown.data
    assert result.first_divergence.program == (1, 0, 0)


def test_arguments_may_be_spread(ip):
    ip.user_ns["pair"] = (ip.user_ns["x"], ip.user_ns["out"])
    _, result = compare(ip, "-o -b cpu,wgpu shift[2](*pair)")
    assert result.backends == ["cpu", "wgpu"] and not result.equal


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("", "needs a launch expression"),
        ("-b wgpu shift[2](x, out=out)", "by position"),
        ("-b wgpu shift[2](x,", "cannot parse"),
        ("-b wgpu x + 1", "one launch"),
        ("--frobnicate shift[2](x, out)", "unknown option"),
    ],
)
def test_usage_errors(ip, line, message):
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("qcompare", line)


def test_an_unknown_backend_is_a_qnb_error(ip):
    with pytest.raises(qnb.BackendError, match="nosuch"):
        ip.run_line_magic("qcompare", "-b nosuch shift[2](x, out)")


@pytest.mark.parametrize(
    ("line", "error", "caret"),
    [
        ("-b wgpu shift[1.5](x, out)", "a launch grid is an int", "~^^^^^"),
        ("-b wgpu shift[2](x, not_defined)", "name 'not_defined' is not defined", "^^^^^^^^^^^"),
    ],
)
def test_an_error_of_the_expression_shows_its_own_line(ip, line, error, caret):
    """A bad grid or a name the expression does not define is shown at the expression's
    own text with its caret, as a plain cell would show it: no frame of qnb's magic."""
    with capture_output() as captured:
        ip.run_cell(f"%qcompare {line}")
    shown = captured.stdout + captured.stderr
    expression = line.removeprefix("-b wgpu ")
    assert 'File "<qcompare>", line 1' in shown, shown
    assert f"    {expression}\n" in shown and caret in shown, shown
    assert error in shown, shown
    assert "magics.py" not in shown and "compare.py" not in shown, shown
