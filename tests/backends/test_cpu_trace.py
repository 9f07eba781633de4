"""The cpu executor's observer (``qnb.backends.cpu.observer.Observer``) and the trace recorder
that watches it (``qnb.backends.cpu.trace``), which builds ``qnb.Trace`` through
``Trace.recorded``."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

import qnb
from qnb import Tile16, Vec16
from qnb.backends.cpu import interpreter, observer
from qnb.trace import ArrayWrite, Region, Trace, TraceStep

ROOT = Path(__file__).resolve().parents[2]


@qnb.kernel
def touches(x: qnb.Array[qnb.f32, 2], v: qnb.Array[qnb.f32, 1], y: qnb.Array[qnb.f32, 2]):
    t = Tile16.load(x, 0, 16)
    t.store(y, 16, 0)
    u = Vec16.load(v, 4)
    u.store(v, 20)
    y[1, 2] = x[3, 4]


class Log(observer.Observer):
    """Writes down every event, in the order the executor reports them."""

    def __init__(self):
        self.events = []

    def start(self, executor):
        self.events.append(("start", executor.program(0)))

    def assign_begins(self, stmt):
        self.events.append(("assign_begins", stmt.name))

    def assigned(self, stmt, value):
        self.events.append(("assigned", stmt.name, value.shape))

    def store_begins(self, stmt):
        self.events.append(("store_begins", stmt.view.param))

    def stored(self, stmt, value):
        self.events.append(("stored", stmt.view.param))

    def window(self, param, batch, r0, c0, row_end, col_end, shape, write):
        self.events.append(("window", param, int(r0[0]), int(c0[0]), tuple(shape), write))

    def line(self, param, batch, start, end, fixed, axis, size, write):
        self.events.append(("line", param, int(start[0]), int(end[0]), size, write))

    def element(self, param, batch, row, col, write):
        self.events.append(("element", param, int(row[0]), int(col[0]), write))


def lowered(kernel, args):
    signature, runtime_args = kernel._signature(args)
    return kernel._lower(signature, kernel._resolve()), runtime_args


def arguments():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (32, 32)).astype(np.float32)
    v = rng.uniform(-1, 1, 40).astype(np.float32)
    return [x, v, np.zeros((32, 32), np.float32)]


def test_an_observer_hears_each_assignment_store_and_touch_in_order():
    args = arguments()
    kernel_ir, runtime_args = lowered(touches, args)
    log = Log()
    interpreter.run(kernel_ir, (1, 1, 1), runtime_args, observer=log)
    assert log.events == [
        ("start", (0, 0, 0)),
        ("assign_begins", "t"),
        ("window", "x", 0, 16, (16, 16), False),
        ("assigned", "t", (1, 16, 16)),
        ("store_begins", "y"),
        ("window", "y", 16, 0, (16, 16), True),
        ("stored", "y"),
        ("assign_begins", "u"),
        ("line", "v", 4, 20, 16, False),
        ("assigned", "u", (1, 16)),
        ("store_begins", "v"),
        ("line", "v", 20, 36, 16, True),
        ("stored", "v"),
        ("store_begins", "y"),
        ("element", "x", 3, 4, False),
        ("element", "y", 1, 2, True),
        ("stored", "y"),
    ]
    x, _, y = args
    np.testing.assert_array_equal(y[16:32, 0:16], x[0:16, 16:32])  # watched, it still ran
    assert y[1, 2] == x[3, 4]


def test_the_recorder_turns_the_touches_into_regions():
    trace = touches.trace[1](*arguments())
    steps = trace.steps(0)
    assert [s.op for s in steps] == ["load", "store", "load", "store", "store"]
    assert steps[0].reads == [Region("x", 0, 16, 16, 32)]
    assert steps[1].writes == [Region("y", 16, 32, 0, 16)]
    assert steps[2].reads == [Region("v", 0, 1, 4, 20)]
    assert steps[3].writes == [Region("v", 0, 1, 20, 36)]
    assert (steps[4].reads, steps[4].writes) == (
        [Region("x", 3, 4, 4, 5)],
        [Region("y", 1, 2, 2, 3)],
    )


def test_an_unwatched_run_never_imports_the_recorder(tmp_path):
    script = tmp_path / "launch.py"
    script.write_text(
        "import sys, numpy as np, qnb\n"
        "from qnb import Tile16\n"
        "@qnb.kernel\n"
        "def copy(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):\n"
        "    Tile16.load(x, 0, 0).store(y, 0, 0)\n"
        "x, y = np.ones((16, 16), np.float32), np.zeros((16, 16), np.float32)\n"
        "with qnb.backend('cpu'):\n"
        "    copy[1](x, y)\n"
        "print('qnb.backends.cpu.trace' in sys.modules)\n"
        "copy.trace[1](x, y)\n"
        "print('qnb.backends.cpu.trace' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.split() == ["False", "True"]


def test_trace_recorded_is_the_public_constructor():
    before = np.zeros((2, 3), np.float32)
    after = before.copy()
    after[1, 2] = 5.0
    step = TraceStep(0, (0, 0, 0), "f", 2, "a[1, 2] = 5.0", "store", "a", tick=0)
    trace = Trace.recorded(
        "k",
        (1, 1, 1),
        "f",
        1,
        ["def k(a):", "    a[1, 2] = 5.0"],
        {"a": after},
        steps={(0, 0, 0): [step]},
        initial={"a": before},
        writes=[ArrayWrite(0, "a", np.array([5]), np.array([5.0], np.float32))],
    )
    assert trace.programs == [(0, 0, 0)] and trace.steps(0) == [step]
    np.testing.assert_array_equal(trace.initial_arrays["a"], before)
    np.testing.assert_array_equal(trace.arrays_at(0, 0)["a"], after)
    made_by_hand = Trace.recorded(
        "k", (1, 1, 1), "f", 1, [], {"a": after}, steps={(0, 0, 0): [step]}
    )
    np.testing.assert_array_equal(made_by_hand.initial_arrays["a"], after)  # no history


def test_nothing_outside_trace_py_writes_the_private_fields_of_a_trace():
    private = re.compile(r"\._(steps|initial|writes|shared|units)\b(\[[^\]]*\])?\s*=[^=]")
    writers = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "qnb").rglob("*.py"))
        if path.name != "trace.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if private.search(line)
    ]
    assert writers == []
