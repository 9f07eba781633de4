"""Configuration objects, subclasses and enums across processes on one warm disk cache:
each process computes its values from the environment (a cell edited and re-run, a config
file changed), and every launch must give what a fresh compile gives, and what Python
computes from those values, never a disk hit of the other values' kernel.

- a dataclass / namespace / class configuration, read directly, through ``qnb.static``,
  through a func and through a local name, on cpu and wgpu;
- an ``IntEnum`` whose ``__mul__``/``__bool__`` is edited, a ``str`` subclass whose
  ``__len__`` is edited, a named tuple whose ``__getitem__`` is edited (none of them runs at
  compile time: the answer is the plain value's, in every process);
- an enum that gains a member, read as a class through a module (``len(m.Mode)``), iterated,
  and reached as ``member.__class__``.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from cache_fakes import run_python

from tests.conftest import require_backend

MODULES = {
    "cfg_values": """
        import dataclasses, enum, os, types, typing

        SCALE = float(os.environ["SCALE"])
        M = int(os.environ["M"])

        @dataclasses.dataclass
        class Block:
            m: int

        @dataclasses.dataclass(frozen=True)
        class Config:
            scale: float
            block: Block
            use_bias: bool = True

        CFG = Config(SCALE, Block(M), use_bias=SCALE > 2.5)
        NS = types.SimpleNamespace(scale=SCALE, inner=types.SimpleNamespace(m=M))

        class Settings:
            SCALE = SCALE * 10

        # Classes whose own methods change between processes (METHOD): none may run.
        class Level(enum.IntEnum):
            LOW = 1
            HIGH = 2
            if os.environ["METHOD"] == "a":
                def __mul__(self, other):
                    return 100
                def __bool__(self):
                    return False
            else:
                def __mul__(self, other):
                    return -100

        class Name(str):
            if os.environ["METHOD"] == "a":
                def __len__(self):
                    return 1
            def __repr__(self):
                return "Name"

        class Point(typing.NamedTuple):
            x: float
            y: float
            if os.environ["METHOD"] == "a":
                def __getitem__(self, index):
                    return 100.0

        NAME = Name("a" * M)
        POINT = Point(SCALE, 1.0)

        # An enum that gains a member between processes.
        class Mode(enum.Enum):
            A = 1
            B = 2
            if M > 3:
                C = 3
        MEMBER = Mode.A
    """,
    "cfg_kernels": """
        import os
        import qnb
        import cfg_values
        from cfg_values import CFG, NS, Settings, Level, NAME, POINT, Mode, MEMBER

        @qnb.func
        def scaled(c, v):
            return v * c.scale + c.inner.m

        @qnb.func
        def modes(m):
            return qnb.static(len(m.Mode) * 10 + sum(mode.value for mode in m.Mode))

        @qnb.kernel
        def direct(x: qnb.Array[qnb.f32, 1]):
            x[0] = CFG.scale
            x[1] = qnb.static(CFG.block.m * 2)
            if CFG.use_bias:
                x[2] = 1.0

        @qnb.kernel
        def through_func_and_local(x: qnb.Array[qnb.f32, 1]):
            x[0] = scaled(NS, 2.0)
            b = CFG.block
            x[1] = qnb.static(b.m + Settings.SCALE)

        @qnb.kernel
        def own_methods(x: qnb.Array[qnb.f32, 1]):
            x[0] = qnb.static(Level.HIGH * 3)
            if qnb.static(Level.LOW):
                x[1] = 1.0
            x[2] = qnb.static(len(NAME) + POINT[0])

        @qnb.kernel
        def enum_classes(x: qnb.Array[qnb.f32, 1]):
            x[0] = modes(cfg_values)
            x[1] = qnb.static(len(MEMBER.__class__))
            x[2] = qnb.static(sum(m.value for m in Mode))

        def expected(env):
            scale, m = float(env["SCALE"]), int(env["M"])
            modes = 3 if m > 3 else 2
            return {
                "direct": [scale, 2.0 * m, 1.0 if scale > 2.5 else -1.0],
                "through_func_and_local": [2 * scale + m, m + scale * 10, -1.0],
                "own_methods": [6.0, 1.0, m + scale],
                "enum_classes": [modes * 10 + modes * (modes + 1) / 2, modes,
                                 modes * (modes + 1) / 2],
            }

        KERNELS = [direct, through_func_and_local, own_methods, enum_classes]
    """,
}

DRIVER = r"""
import json, os, sys
import numpy as np
import qnb
sys.path.insert(0, sys.argv[1])
import cfg_kernels as m
qnb.set_backend(sys.argv[2])
report = {}
for k in m.KERNELS:
    got = []
    for always in ("0", "1"):  # from the cache, then a fresh compile
        os.environ["QNB_ALWAYS_COMPILE"] = always
        x = np.full(3, -1.0, np.float32)
        k(x)
        got.append(x.tolist())
        if always == "0":
            outcome = qnb.cache.events()[-1].outcome
    report[k.__name__] = [got[0], got[1], outcome]
print(json.dumps({"report": report, "expected": m.expected(os.environ)}))
"""

A = {"SCALE": "2.0", "M": "3", "METHOD": "a"}
B = {"SCALE": "3.0", "M": "4", "METHOD": "b"}
METHODS_ONLY = {"SCALE": "2.0", "M": "3", "METHOD": "b"}


def _run(tmp_path, backend, values) -> dict:
    env = {"QNB_CACHE_DIR": str(tmp_path / "cache"), "QNB_CACHE": "1", **values}
    result = run_python(DRIVER, env=env, args=[str(tmp_path), backend], timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    for name, (cached, fresh, outcome) in report["report"].items():
        assert cached == fresh == report["expected"][name], (name, outcome, report)
    return {name: outcome for name, (_, _, outcome) in report["report"].items()}


@pytest.mark.parametrize("backend", ["cpu", "wgpu"])
def test_configuration_objects_on_a_warm_disk_cache(tmp_path, backend):
    require_backend(backend)
    for name, text in MODULES.items():
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
    first = _run(tmp_path, backend, A)
    assert set(first.values()) == {"miss"}
    assert set(_run(tmp_path, backend, B).values()) == {"miss"}  # every kernel's values changed
    again = _run(tmp_path, backend, A)  # the first values: every kernel from disk, and right
    assert set(again.values()) == {"disk-hit"}, again
    methods = _run(tmp_path, backend, METHODS_ONLY)  # only the classes' own methods changed
    assert methods["own_methods"] == "disk-hit"  # (they never run: the same kernel is right)
