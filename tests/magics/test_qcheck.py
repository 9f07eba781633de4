"""``%qcheck`` through a real IPython shell: ``%load_ext qnb``, a ``%%qkernel`` cell,
then the magic as a user types it."""

import pytest

pytest.importorskip("IPython")

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import qnb

HISTOGRAM = """\
def bins(x, h):
    i = qnb.program_id(0)
    h[x[i]] = h[x[i]] + 1
"""

PER_BIN = """\
def per_bin(x, h):
    b = qnb.program_id(0)
    count = 0
    for i in range(x.shape[0]):
        if x[i] == b:
            count += 1
    h[b] = count
"""


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "qnb")
    shell.run_cell("import numpy as np\nimport qnb")
    for cell in (HISTOGRAM, PER_BIN):
        with capture_output():
            shell.run_cell_magic("qkernel", "-b cpu", cell)
    shell.run_cell("x = np.array([0, 2, 2, 1, 2], np.int32)\nh = np.zeros(3, np.int32)")
    return shell


def test_a_race_prints_one_line_and_shows_the_view(ip):
    with capture_output() as captured:
        result = ip.run_line_magic("qcheck", "bins[5](x, h)")
    assert result is None
    (line,) = captured.stdout.splitlines()
    assert line.startswith("bins[5×1×1]: write-write and read-write hazards between programs")
    assert "on h (1 element);" in line
    (shown,) = captured.outputs
    assert shown.data["text/plain"] == "HazardView('bins': 5 hazards)"
    assert (ip.user_ns["h"] == 0).all()  # the arguments are not changed


def test_no_hazard_prints_so_and_shows_nothing(ip):
    with capture_output() as captured:
        found = ip.run_line_magic("qcheck", "-o per_bin[3](x, h)")
    assert isinstance(found, qnb.Hazards) and found.ok
    assert captured.stdout.strip() == "per_bin[3×1×1]: no hazard between programs"
    assert not captured.outputs


def test_returns_the_hazards_with_o(ip):
    with capture_output():
        found = ip.run_line_magic("qcheck", "-o bins[5](x, h)")
    first = found.hazards[0]
    assert (first.kind, first.array, first.index, first.programs) == (
        "write-write",
        "h",
        (2,),
        ((1, 0, 0), (2, 0, 0)),
    )


def test_usage_errors(ip):
    with pytest.raises(UsageError, match="needs a launch expression"):
        ip.run_line_magic("qcheck", "")
    with pytest.raises(UsageError, match="cannot parse"):
        ip.run_line_magic("qcheck", "bins[5](x,")
    with pytest.raises(UsageError, match="by position"):
        ip.run_line_magic("qcheck", "bins[5](x=x, h=h)")


def test_a_qnb_error_is_shown_as_one(ip):
    with pytest.raises(qnb.QnbTypeError, match=r"qnb\.check takes a launch"):
        ip.run_line_magic("qcheck", "len(x)")
