"""What a warm wgpu process waits for before its first launch: making the device. qnb
parses the C types wgpu-py names in one parser run whose prelude declares only the
typedef names those types mention (not every typedef of webgpu.h), and starts making the
device as soon as a kernel is defined for wgpu."""

from __future__ import annotations

import pytest

from qnb.backends.wgpu import parse_c_types_at_once
from tests.backends.wgpu_process import run_fresh_process

CDEF = """
typedef enum Colour { RED, GREEN } Colour;
typedef struct Point { int x; double y; } Point;
typedef struct Node { struct Node * next; Point where; Colour colour; } Node;
typedef int Unused;
typedef struct Elsewhere { int z; } Elsewhere;
"""


def test_the_batched_run_declares_only_the_typedefs_it_names(monkeypatch):
    cffi = pytest.importorskip("cffi")
    from cffi import cparser

    ffi, lazy = cffi.FFI(), cffi.FFI()
    ffi.cdef(CDEF)
    lazy.cdef(CDEF)
    parser = cparser._get_parser()
    sources = []
    real = type(parser).parse

    def spy(self, text, *args, **kwargs):
        sources.append(text)
        return real(self, text, *args, **kwargs)

    monkeypatch.setattr(type(parser), "parse", spy)
    types = ["Node *", "Point[]", "void(Node const *, Colour, void *)"]
    assert parse_c_types_at_once(ffi, types) == len(types)
    (source,) = sources
    assert "typedef int Node;" in source and "typedef int Colour;" in source
    assert "Unused" not in source and "Elsewhere" not in source
    for cdecl in types:  # the very types cffi parses one by one
        got = ffi._typeof(cdecl, consider_function_as_funcptr=True)
        want = lazy._typeof(cdecl, consider_function_as_funcptr=True)
        assert (got.cname, got.kind) == (want.cname, want.kind), cdecl
    assert ffi.new("Node *", {"where": {"x": 3}}).where.x == 3


# A kernel bound to wgpu at its definition, in a fresh process that never calls
# set_backend: the device is being made (or made) before the first launch.
EARLY = r"""
import json, sys, threading
import numpy as np
import qnb
from qnb import Tile16

@qnb.kernel(backend="wgpu")
def double(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
    i = qnb.program_id(0) * 16
    (Tile16.load(x, i, 0) * 2.0).store(y, i, 0)

from qnb.backends import wgpu as backend
started = any(t.name == "qnb-wgpu-device" for t in threading.enumerate()) or (
    "device" in backend._device_state)
x = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
y = np.full_like(x, np.nan)
double[2](x, y)
print(json.dumps({"started": started, "right": bool((y == 2 * x).all())}))
"""


@pytest.mark.parametrize("early", ["1", "0"])
def test_a_kernel_defined_for_wgpu_starts_the_device_before_its_first_launch(tmp_path, early):
    report = run_fresh_process(tmp_path, EARLY, QNB_EARLY_DEVICE=early)
    assert report["right"]
    assert report["started"] == (early == "1")  # QNB_EARLY_DEVICE=0 opts out


# qnb's device in a fresh process: which instance extras qnb set, and the adapter's backend.
INSTANCE = r"""
import json, sys
import wgpu
from wgpu.backends.wgpu_native import extras
asked = []
real = extras.set_instance_extras
def spy(*args, **kwargs):
    asked.append(list(kwargs.get("backends", args[0] if args else ["All"])))
    return real(*args, **kwargs)
extras.set_instance_extras = spy
if sys.argv[1] == "instance first":  # wgpu-py used before qnb: its instance is kept
    wgpu.gpu.request_adapter_sync(power_preference="high-performance")
from qnb.backends import wgpu as backend
device = backend._get_device()
print(json.dumps({"asked": asked, "backend": device.adapter_info["backend_type"]}))
"""


def _instance(tmp_path, mode, **env):
    return run_fresh_process(
        tmp_path, INSTANCE, mode, QNB_EARLY_DEVICE="0", WGPU_BACKEND_TYPE=None, **env
    )


def test_the_device_comes_from_a_vulkan_only_instance(tmp_path):
    """No OpenGL/EGL start-up (~100 ms of every process on lavapipe's machine)."""
    assert _instance(tmp_path, "qnb first") == {"asked": [["Vulkan"]], "backend": "Vulkan"}


def test_without_a_vulkan_driver_every_backend_is_asked_again(tmp_path):
    found = _instance(tmp_path, "qnb first", VK_ICD_FILENAMES=str(tmp_path / "none.json"))
    assert found == {"asked": [["Vulkan"]], "backend": "OpenGL"}  # as without qnb's choice


def test_an_instance_wgpu_py_made_before_is_left_alone(tmp_path):
    assert _instance(tmp_path, "instance first") == {"asked": [], "backend": "Vulkan"}
