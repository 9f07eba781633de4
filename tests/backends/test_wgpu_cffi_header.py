"""cffi's parse of wgpu-py's C header, kept under qnb's cache directory
(qnb/backends/wgpu_cffi.py: import_wgpu_native): a warm process gets from the file exactly
the types cffi's own parse gives, runs no C parser to make its device, and a file that does
not verify, or is another header's, is never served."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from qnb.backends import wgpu as wgpu_backend
from qnb.backends import wgpu_cffi
from tests.backends.wgpu_process import run_fresh_process

CDEF = """
typedef enum Colour { RED, GREEN = 5 } Colour;
typedef struct Point { int x; double y; } Point;
typedef struct Node { struct Node * next; Point where; Colour colour; } Node;
typedef union Either { int i; float f; } Either;
typedef void (*Visit)(Node const *, Colour, void *);
int visit_all(Node *, Visit, void *);
#define LIMIT 12
"""
TYPES = ("Node *", "Point[]", "void(Node const *, Colour, void *)")


def _cffi():
    return pytest.importorskip("cffi")


def _parsed(cffi, source):
    ffi = cffi.FFI()
    ffi.cdef(source)
    return ffi


def _through(cffi, path, source, types=()):
    """A new FFI given ``source`` through the file at ``path``; whether cffi parsed it."""
    ffi, parsed = cffi.FFI(), []

    def parse():
        parsed.append(True)
        cffi.FFI.cdef(ffi, source)

    wgpu_cffi._cdef_through(path, ffi, source, parse, types)
    return ffi, bool(parsed)


def _describe(ffi, declaration):
    """What cffi makes of a declared type: kind, size, fields (name, type, offset). (From
    the declaration's model: ``ffi.typeof(name)`` would parse each name, 20 ms apiece.)"""
    with ffi._lock:
        ctype = ffi._get_cached_btype(ffi._parser._declarations[declaration][0])
    out = [ctype.cname, ctype.kind]
    if ctype.kind in ("struct", "union") and ctype.fields is not None:  # (None: opaque)
        out.append(ffi.sizeof(ctype))
        out.append([(field, info.type.cname, info.offset) for field, info in ctype.fields])
    elif ctype.kind == "enum":
        out.append(sorted(ctype.elements.items()))
    elif ctype.kind == "function":
        out.append([arg.cname for arg in ctype.args])
    return out


def _declared_types(ffi):
    kinds = ("typedef", "struct", "union", "enum")
    return [name for name in ffi._parser._declarations if name.split(" ")[0] in kinds]


def _same_declarations(got, want):
    assert list(got._parser._declarations) == list(want._parser._declarations)
    assert got._parser._int_constants == want._parser._int_constants
    for name in _declared_types(want):
        assert _describe(got, name) == _describe(want, name), name


def test_the_file_gives_the_types_cffi_parses(tmp_path):
    cffi = _cffi()
    path = tmp_path / f"{wgpu_cffi.header_key(CDEF)}.json"
    first, parsed = _through(cffi, path, CDEF, TYPES)
    assert parsed and path.is_file()
    again, parsed = _through(cffi, path, CDEF, TYPES)
    assert not parsed  # from the file: no C parser ran
    want = _parsed(cffi, CDEF)
    for ffi in (first, again):
        _same_declarations(ffi, want)
        assert set(TYPES) <= set(ffi._parsed_types)  # the named types come with it
        node = ffi.new("Node *", {"where": {"x": 3, "y": 0.5}, "colour": 5})
        assert node.where.x == 3 and node.colour == 5 and ffi.sizeof("Either") == 4
        assert ffi.callback("void(Node const *, Colour, void *)", lambda *a: None) is not None
        assert ffi.typeof("Visit").result.cname == "void"
        assert ffi.string(ffi.cast("Colour", 5)) == "GREEN"


def test_the_wgpu_header_read_back_is_the_one_cffi_parses(tmp_path):
    """The real header, with every typedef, struct and enum it declares, and the real
    library bound through it."""
    cffi = _cffi()
    pytest.importorskip("wgpu")
    from wgpu._coreutils import get_header_filename
    from wgpu.backends.wgpu_native._ffi import get_wgpu_lib_path

    with open(get_header_filename("combined_header.h")) as file:
        header = file.read()
    path = tmp_path / f"{wgpu_cffi.header_key(header)}.json"
    types = (*wgpu_cffi.WGPU_NATIVE_IMPORT_TYPES, *wgpu_cffi.WGPU_NATIVE_C_TYPES)
    assert _through(cffi, path, header, types)[1]
    served, parsed = _through(cffi, path, header, types)
    assert not parsed
    want = _parsed(cffi, header)
    _same_declarations(served, want)
    assert set(types) <= set(served._parsed_types)
    for cdecl in types:
        got = served._typeof(cdecl, consider_function_as_funcptr=True)
        assert got.cname == want._typeof(cdecl, consider_function_as_funcptr=True).cname
    lib, lib_wanted = served.dlopen(get_wgpu_lib_path()), want.dlopen(get_wgpu_lib_path())
    assert lib.wgpuGetVersion() == lib_wanted.wgpuGetVersion() > 0


def _rewrite(path, change):
    _checksum, _, body = path.read_bytes().partition(b"\n")
    payload = json.loads(body)
    change(payload)
    body = json.dumps(payload).encode()
    path.write_bytes(hashlib.sha256(body).hexdigest().encode() + b"\n" + body)


def _not_a_model(payload):
    payload["models"][0][0] = "FFI"


def _another_key(payload):
    payload["key"] = "0" * 64


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[:-100]), id="truncated"),
        pytest.param(
            lambda p: p.write_bytes(p.read_bytes().replace(b"Point", b"Pound")), id="edited"
        ),
        pytest.param(lambda p: _rewrite(p, _not_a_model), id="not-a-cffi-model"),
        pytest.param(lambda p: _rewrite(p, _another_key), id="another-header"),
    ],
)
def test_a_file_that_does_not_verify_is_parsed_again_and_replaced(tmp_path, spoil):
    cffi = _cffi()
    path = tmp_path / f"{wgpu_cffi.header_key(CDEF)}.json"
    _through(cffi, path, CDEF, TYPES)
    spoil(path)
    ffi, parsed = _through(cffi, path, CDEF, TYPES)
    assert parsed
    _same_declarations(ffi, _parsed(cffi, CDEF))
    served, parsed = _through(cffi, path, CDEF, TYPES)  # the file written again serves,
    assert not parsed and set(TYPES) <= set(served._parsed_types)  # with the types


def test_another_header_or_cffi_is_another_file_and_the_oldest_go(tmp_path, monkeypatch):
    cffi = _cffi()
    key = wgpu_cffi.header_key(CDEF)
    monkeypatch.setattr(cffi, "__version__", cffi.__version__ + ".post1")
    assert wgpu_cffi.header_key(CDEF) != key
    monkeypatch.undo()
    sources = [CDEF.replace("double y;", f"double y[{n}];") for n in range(1, 7)]
    assert len({wgpu_cffi.header_key(source) for source in [CDEF, *sources]}) == 7
    names = []
    for n, source in enumerate(sources):
        path = tmp_path / f"{wgpu_cffi.header_key(source)}.json"
        ffi, parsed = _through(cffi, path, source)
        assert parsed and ffi.sizeof("Point") == 8 + 8 * (n + 1)
        os.utime(path, (n, n))  # (distinct times, oldest first)
        names.append(path.name)
    kept = wgpu_cffi.HEADER_FILES_KEPT
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[-kept:])
    for source in sources[-kept:]:  # each still served, none parsed again
        assert not _through(cffi, tmp_path / f"{wgpu_cffi.header_key(source)}.json", source)[1]


# ------------------------------------------------------------------ in fresh processes

# How many runs of pycparser making qnb's device and a first launch take.
PROCESS = r"""
import json
import numpy as np
import pycparser.c_parser
runs = []
real = pycparser.c_parser.CParser.parse
def spy(self, text, *args, **kwargs):
    runs.append(len(text))
    return real(self, text, *args, **kwargs)
pycparser.c_parser.CParser.parse = spy
import qnb
from qnb import Tile16

@qnb.kernel
def double(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
    i = qnb.program_id(0) * 16
    (Tile16.load(x, i, 0) * 2.0).store(y, i, 0)

x = np.arange(32 * 16, dtype=np.float32).reshape(32, 16)
y = np.zeros_like(x)
with qnb.backend("wgpu"):
    double[2](x, y)
import cffi
hook_gone = cffi.FFI.cdef.__module__ == "cffi.api"  # cffi's own cdef again after the import
print(json.dumps({"runs": runs, "right": bool((y == 2 * x).all()), "hook_gone": hook_gone}))
"""


def test_a_warm_process_runs_no_c_parser_to_make_its_device(tmp_path):
    env = {"QNB_EARLY_DEVICE": "0", "QNB_CACHE": None}
    cold = run_fresh_process(tmp_path, PROCESS, **env)
    assert cold["right"] and cold["hook_gone"] and max(cold["runs"]) > 50_000  # the header
    files = list((tmp_path / "cache" / wgpu_backend.HEADER_CACHE).iterdir())
    assert len(files) == 1
    warm = run_fresh_process(tmp_path, PROCESS, **env)
    assert warm == {"runs": [], "right": True, "hook_gone": True}
    unchanged = run_fresh_process(tmp_path, PROCESS, QNB_CACHE="0", QNB_EARLY_DEVICE="0")
    assert unchanged["right"] and max(unchanged["runs"]) > 50_000  # wgpu-py's own import
