"""qnb parses the C types wgpu-py names through cffi in one run of cffi's parser when it
makes its device (qnb/backends/wgpu_cffi.py: parse_c_types_at_once, WGPU_NATIVE_C_TYPES),
instead of cffi's one run per type on first use."""

import pytest

from qnb.backends.wgpu import WGPU_NATIVE_C_TYPES, parse_c_types_at_once
from tests.backends.wgpu_process import run_fresh_process

CDEF = """
typedef enum Colour { RED, GREEN } Colour;
typedef struct Point { int x; double y; } Point;
typedef struct Node { struct Node * next; Point where; Colour colour; } Node;
typedef void (*Visit)(Node const *, Colour, void *);
"""
TYPES = [
    "Point *",
    "Node *",
    "Node[]",
    "Point * ",
    "uint8_t []",
    "intptr_t",
    "char []",
    "void(Node const *, Colour, void *)",  # a function type (as ffi.callback names one)
    "Visit",
]


def _ffi():
    cffi = pytest.importorskip("cffi")
    ffi = cffi.FFI()
    ffi.cdef(CDEF)
    return ffi


def _describe(ffi, ctype):
    out = [ctype.cname, ctype.kind]
    if ctype.kind == "pointer" and ctype.item.kind == "struct":
        out.append([(name, field.type.cname, field.offset) for name, field in ctype.item.fields])
    return out


def test_one_run_gives_the_types_cffi_gives_one_by_one():
    batched, lazy = _ffi(), _ffi()
    assert parse_c_types_at_once(batched, TYPES) == len(TYPES)
    assert parse_c_types_at_once(batched, TYPES) == 0  # all known now
    for cdecl in TYPES:
        want = lazy._typeof(cdecl, consider_function_as_funcptr=True)
        got = batched._typeof(cdecl, consider_function_as_funcptr=True)
        assert _describe(batched, got) == _describe(lazy, want), cdecl
    # usable as cffi's own: new, cast, callback
    node = batched.new("Node *", {"where": {"x": 3, "y": 0.5}})
    assert node.where.x == 3 and batched.sizeof("Node") == lazy.sizeof("Node")
    assert batched.callback("void(Node const *, Colour, void *)", lambda *a: None) is not None


def test_an_unknown_or_bad_type_leaves_cffi_to_parse_on_use():
    ffi = _ffi()
    assert parse_c_types_at_once(ffi, ["Point *", "NoSuchType *", "Point * ("]) == 0
    assert ffi.typeof("Point *").cname == "Point *"  # parsed on use, as without it
    ffi = _ffi()
    assert parse_c_types_at_once(ffi, ["Point *", "int *"]) == 2


PROCESS = """
import json, sys
import cffi.cparser
parsed = []
real = cffi.cparser.Parser.parse_type_and_quals
def spy(self, cdecl):
    parsed.append(cdecl)
    return real(self, cdecl)
cffi.cparser.Parser.parse_type_and_quals = spy
import numpy as np
import qnb
from qnb import Tile16

@qnb.kernel
def double(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
    i = qnb.program_id(0) * 16
    (Tile16.load(x, i, 0) * 2.0).store(y, i, 0)

import wgpu.backends.wgpu_native  # (its import parses two types of its own)
at_import = len(parsed)
x = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
y = np.zeros_like(x)
with qnb.backend("wgpu"):
    double[2](x, y)
assert (y == 2 * x).all()
print(json.dumps(parsed[at_import:]))
"""


def test_making_the_device_and_a_launch_parse_no_type_one_by_one(tmp_path):
    """Every C type wgpu-py names for qnb's device and a launch (cold: the pipeline too)
    is in WGPU_NATIVE_C_TYPES: without it, each is one parser run of its own."""
    one_by_one = run_fresh_process(tmp_path, PROCESS, QNB_EARLY_DEVICE="0")
    assert one_by_one == [], f"add to WGPU_NATIVE_C_TYPES: {one_by_one}"
    assert len(set(WGPU_NATIVE_C_TYPES)) == len(WGPU_NATIVE_C_TYPES)
