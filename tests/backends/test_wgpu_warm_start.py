"""What a warm wgpu process waits for before its first launch: making the device. qnb
parses the C types wgpu-py names in one parser run whose prelude declares only the
typedef names those types mention (not every typedef of webgpu.h), and starts making the
device as soon as a kernel is defined for wgpu."""

from __future__ import annotations

import pytest

from qnb.backends.wgpu import parse_c_types_at_once

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
