"""Every compile-time value lowering reads enters the key, however it is reached
(DESIGN.md "Kernel cache": "The key covers everything compilation reads").

The values below are read past the names the parser sees: a module passed to a func, bound
to a local name or given by ``qnb.static``; a func reached as ``m.h(...)``; an enum member's
property and an attribute set on it; a named tuple's field names; a class reached through a
module; a module rebound under a captured name. Each scenario runs in fresh processes that
share one cache directory: values A, then B on the warm cache, then A again; every answer
must be the one a fresh compile gives.
"""

from __future__ import annotations

import json
import os
import textwrap

import numpy as np
import pytest
from cache_fakes import run_python

import qnb
from qnb.errors import QnbCaptureError

MODULES = {
    "cfg_a": """
        import os
        SCALE = float(os.environ["SCALE"])

        class Box:
            N = float(os.environ["SCALE"]) * 10
    """,
    "cfg_b": """
        import os
        SCALE = float(os.environ["SCALE"]) + 100
    """,
    "helpers": """
        import os
        import qnb
        FACTOR = float(os.environ["FACTOR"])

        if os.environ["H_BODY"] == "times":
            @qnb.func
            def h(v):
                return v * FACTOR
        else:
            @qnb.func
            def h(v):
                return v + FACTOR
    """,
    "reads_kernels": """
        import enum
        import os
        import typing

        import cfg_a
        import cfg_b
        import helpers
        import qnb

        M = cfg_a if os.environ["WHICH"] == "a" else cfg_b

        @qnb.func
        def scale_of(m):
            return m.SCALE

        @qnb.kernel
        def through_func_arg(x: qnb.Array[qnb.f32, 1]):
            x[0] = scale_of(cfg_a)

        @qnb.kernel
        def through_local_name(x: qnb.Array[qnb.f32, 1]):
            m = cfg_a
            x[0] = m.SCALE

        @qnb.kernel
        def through_static(x: qnb.Array[qnb.f32, 1]):
            c = qnb.static(cfg_a)
            x[0] = qnb.static(c.SCALE * 2.0)

        @qnb.kernel
        def through_rebound_module(x: qnb.Array[qnb.f32, 1]):
            x[0] = scale_of(M)

        @qnb.func
        def call_h(m, v):
            return m.h(v)

        @qnb.kernel
        def func_reached_through_module(x: qnb.Array[qnb.f32, 1]):
            x[0] = call_h(helpers, 2.0)

        @qnb.func
        def box_of(m):
            return m.Box.N

        @qnb.kernel
        def class_through_module(x: qnb.Array[qnb.f32, 1]):
            x[0] = box_of(cfg_a)

        class Color(enum.Enum):
            RED = 1
            BLUE = 2

            @property
            def weight(self):
                return float(os.environ["WEIGHT"]) * self.value

        Color.RED.extra = float(os.environ["EXTRA"])

        @qnb.kernel
        def enum_property(x: qnb.Array[qnb.f32, 1]):
            c = Color.RED
            x[0] = qnb.static(c.weight)

        @qnb.kernel
        def enum_attribute(x: qnb.Array[qnb.f32, 1]):
            x[0] = qnb.static(Color.RED.extra)

        if os.environ["FIELDS"] == "ab":
            class Pair(typing.NamedTuple):
                a: float
                b: float
        else:
            class Pair(typing.NamedTuple):
                b: float
                a: float
        PAIR = Pair(1.0, 2.0)

        @qnb.kernel
        def named_tuple_fields(x: qnb.Array[qnb.f32, 1]):
            x[0] = qnb.static(PAIR.a)

        def expected(env):
            scale = float(env["SCALE"])
            factor = float(env["FACTOR"])
            return {
                "through_func_arg": scale,
                "through_local_name": scale,
                "through_static": scale * 2,
                "through_rebound_module": scale + (0 if env["WHICH"] == "a" else 100),
                "func_reached_through_module": 2 * factor if env["H_BODY"] == "times"
                else 2 + factor,
                "class_through_module": scale * 10,
                "enum_property": float(env["WEIGHT"]),
                "enum_attribute": float(env["EXTRA"]),
                "named_tuple_fields": 1.0 if env["FIELDS"] == "ab" else 2.0,
            }

        KERNELS = [
            through_func_arg, through_local_name, through_static, through_rebound_module,
            func_reached_through_module, class_through_module, enum_property,
            enum_attribute, named_tuple_fields,
        ]
    """,
}

DRIVER = r"""
import json, os, sys
import numpy as np
import qnb
sys.path.insert(0, sys.argv[1])
import reads_kernels as m
qnb.set_backend("cpu")
report = {}
for k in m.KERNELS:
    x = np.full(1, -1.0, np.float32)
    k(x)
    report[k.__name__] = [float(x[0]), qnb.cache.events()[-1].outcome]
print(json.dumps({"report": report, "expected": m.expected(os.environ)}))
"""

A = {"SCALE": "2", "FACTOR": "3", "H_BODY": "times", "WHICH": "a", "WEIGHT": "4", "EXTRA": "5",
     "FIELDS": "ab"}  # fmt: skip
B = {"SCALE": "7", "FACTOR": "11", "H_BODY": "plus", "WHICH": "b", "WEIGHT": "13",
     "EXTRA": "17", "FIELDS": "ba"}  # fmt: skip


def write_modules(directory, modules=MODULES):
    for name, text in modules.items():
        (directory / f"{name}.py").write_text(textwrap.dedent(text))


def run(tmp_path, values) -> dict:
    env = {"QNB_CACHE_DIR": str(tmp_path / "cache"), "QNB_CACHE": "1", "QNB_ALWAYS_COMPILE": "0"}
    result = run_python(DRIVER, env={**env, **values}, args=[str(tmp_path)])
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def check(report):
    for name, (value, _) in report["report"].items():
        assert value == report["expected"][name], (name, report)


def test_every_value_read_past_the_captured_names_changes_the_entry(tmp_path):
    write_modules(tmp_path)
    first = run(tmp_path, A)
    check(first)
    # Each scenario alone: only what that kernel reads differs from A.
    for name in ("SCALE", "FACTOR", "H_BODY", "WHICH", "WEIGHT", "EXTRA", "FIELDS"):
        report = run(tmp_path, {**A, name: B[name]})
        check(report)
        changed = [k for k, (v, _) in report["report"].items() if v != first["report"][k][0]]
        assert changed, name  # the scenario's kernel gives another answer, not A's
    again = run(tmp_path, A)
    check(again)
    assert {outcome for _, outcome in again["report"].values()} == {"disk-hit"}


def test_all_values_changed_at_once_never_load_a_stale_kernel(tmp_path):
    write_modules(tmp_path)
    for values in (A, B, A, B):
        check(run(tmp_path, values))


@pytest.fixture
def cfg_module(tmp_path, monkeypatch, cache_dir):
    (tmp_path / "qnb_reads_cfg.py").write_text("SCALE = 2.0\nLIMIT = 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module("qnb_reads_cfg")
    yield module
    import sys

    sys.modules.pop("qnb_reads_cfg", None)


def test_the_launch_memo_rechecks_the_reads_in_process(cfg_module):
    @qnb.func
    def scale_of(m):
        return m.SCALE

    @qnb.kernel(backend="cpu")
    def k(x: qnb.Array[qnb.f32, 1]):
        x[0] = scale_of(cfg_module)

    x = np.zeros(1, np.float32)
    for value in (2.0, 5.0, 2.0, 5.0):
        cfg_module.SCALE = value
        k(x)
        assert x[0] == value
    outcomes = [e.outcome for e in qnb.cache.events() if e.kernel == "k"]
    assert outcomes == ["miss", "miss", "memory-hit", "memory-hit"]
    event = [e for e in qnb.cache.events() if e.outcome == "miss"][-1]
    assert "qnb_reads_cfg.SCALE" in event.reason


def test_a_branch_on_a_read_value_keys_the_reads_of_the_branch_taken(cfg_module):
    @qnb.func
    def pick(m):
        value = 0.5
        if qnb.static(m.LIMIT > 2):
            value = m.SCALE
        return value

    @qnb.kernel(backend="cpu")
    def k(x: qnb.Array[qnb.f32, 1]):
        x[0] = pick(cfg_module)

    x = np.zeros(1, np.float32)
    for limit, scale, want in ((3, 2.0, 2.0), (1, 2.0, 0.5), (1, 9.0, 0.5), (3, 9.0, 9.0)):
        cfg_module.LIMIT, cfg_module.SCALE = limit, scale
        k(x)
        assert x[0] == want


def test_a_read_qnb_cannot_check_again_is_a_capture_error_at_its_line(cfg_module):
    @qnb.func
    def start_of(m):
        return qnb.static(range(m.START, 9).start)  # (a range: nothing names it again)

    cfg_module.START = 3

    @qnb.kernel(backend="cpu")
    def k(x: qnb.Array[qnb.f32, 1]):
        x[0] = start_of(cfg_module)

    with pytest.raises(QnbCaptureError) as info:
        k(np.zeros(1, np.float32))
    assert info.value.lineno == start_of.__wrapped__.__code__.co_firstlineno + 2
    assert info.value.filename == __file__


def test_an_object_of_a_local_class_read_through_a_module_is_keyed_by_its_path(cfg_module):
    class Local:
        N = 3.0

    cfg_module.OBJ = Local()

    @qnb.func
    def n_of(m):
        return qnb.static(m.OBJ.N)

    @qnb.kernel(backend="cpu")
    def k(x: qnb.Array[qnb.f32, 1]):
        x[0] = n_of(cfg_module)

    x = np.zeros(1, np.float32)
    for value in (3.0, 5.0, 3.0):
        cfg_module.OBJ.N = value
        k(x)
        assert x[0] == value
    cfg_module.OBJ = Local()  # another object at the same path, N = 3.0 again
    Local.N = 7.0
    k(x)
    assert x[0] == 7.0


def test_a_plain_function_read_through_a_module_is_a_capture_error(cfg_module):
    cfg_module.helper = lambda: 1.0

    @qnb.kernel(backend="cpu")
    def k(x: qnb.Array[qnb.f32, 1]):
        m = cfg_module
        x[0] = qnb.static(m.helper())

    with pytest.raises(QnbCaptureError, match="helper"):
        k(np.zeros(1, np.float32))
    assert not [p for p in os.listdir(qnb.cache.stats()["directory"]) if "k-" in p]


def test_a_func_reached_through_a_module_enters_source_and_is_rechecked(
    tmp_path, monkeypatch, cache_dir
):
    (tmp_path / "qnb_reads_funcs.py").write_text(
        "import qnb\n\n@qnb.func\ndef h(v):\n    return v * 2.0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib
    import sys

    module = importlib.import_module("qnb_reads_funcs")

    @qnb.func
    def call_h(m):
        return m.h(3.0)

    @qnb.kernel(backend="cpu")
    def k(x: qnb.Array[qnb.f32, 1]):
        x[0] = call_h(module)

    x = np.zeros(1, np.float32)
    try:
        k(x)
        assert x[0] == 6.0
        source = qnb.cache.events()[-1].components["source"]
        assert "return v * 2.0" in source["module qnb_reads_funcs.h"]

        @qnb.func
        def h(v):
            return v + 2.0

        module.h = h  # another func under the same name: the memo must not reuse the first
        k(x)
        assert x[0] == 5.0
        event = qnb.cache.events()[-1]
        assert event.outcome == "miss" and "source" in event.reason
    finally:
        sys.modules.pop("qnb_reads_funcs", None)


@pytest.mark.parametrize("plant", ["fifo", "link-to-dev-zero", "directory", "garbage"])
def test_a_special_file_under_a_manifest_name_never_hangs_a_launch(cfg_module, plant):
    @qnb.func
    def scale_of(m):
        return m.SCALE

    @qnb.kernel(backend="cpu")
    def k(x: qnb.Array[qnb.f32, 1]):
        x[0] = scale_of(cfg_module)

    x = np.zeros(1, np.float32)
    k(x)
    directory = qnb.cache.stats()["directory"]
    (manifest,) = [n for n in os.listdir(directory) if n.endswith(".reads")]
    path = os.path.join(directory, manifest)
    os.unlink(path)
    if plant == "fifo":
        os.mkfifo(path)
    elif plant == "link-to-dev-zero":
        os.symlink("/dev/zero", path)
    elif plant == "directory":
        os.mkdir(path)
    else:
        with open(path, "w") as handle:
            handle.write('{"pre_key": 1, "reads": [[["x"]]]}')
    qnb.cache.lookup._memory.clear()
    qnb.cache.lookup._manifests.clear()
    k._memo.clear()
    cfg_module.SCALE = 4.0
    k(x)  # the manifest is unreadable: a compile, never a hang or a traceback
    assert x[0] == 4.0
