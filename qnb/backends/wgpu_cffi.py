"""A faster start of wgpu-py's cffi bindings, which a wgpu process pays before its device.

wgpu-py (0.32) binds wgpu-native in cffi's in-line ABI mode: importing it parses the whole
C header (``ffi.cdef``: ~2,000 lines through pycparser, about 100 ms of every process), and
each C type it then names is a parser run of its own on first use (15-90 ms each, by load,
without :func:`parse_c_types_at_once`). Here:

- :func:`parse_c_types_at_once`: the types qnb's device and launches name, in one run;
- :func:`import_wgpu_native`: the header's parse kept under qnb's cache directory, as
  data (cffi's own type descriptions, never code), and served to cffi in a later process.

Both work through cffi's private parts (2.x); any surprise leaves cffi to parse as it
always does.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import re
import sys
from pathlib import Path

# The C types wgpu-py's import names itself (its log callback): parsed with the header.
WGPU_NATIVE_IMPORT_TYPES = ("void(WGPULogLevel, WGPUStringView, void *)", "WGPUStringView *")

# The C types wgpu-py's wgpu_native backend (0.32) names through cffi (``ffi.new``,
# ``ffi.callback``) while qnb makes its device and runs a launch, in that order, after
# the two its import parses (tests/backends/test_wgpu_cffi_types.py checks the list).
WGPU_NATIVE_C_TYPES = (
    # the adapter and the device
    "WGPURequestAdapterOptions *",
    "void(WGPURequestAdapterStatus, WGPUAdapter, WGPUStringView, void *, void *)",
    "WGPURequestAdapterCallbackInfo *",
    "WGPUInstanceExtras *",
    "WGPUInstanceDescriptor *",
    "WGPUAdapterInfo *",
    "WGPUChainedStruct *",
    "WGPUNativeLimits *",
    "WGPULimits *",
    "char []",
    "WGPUQueueDescriptor *",
    "WGPUDeviceExtras *",
    "WGPUChainedStruct * ",
    "void(WGPUDevice const *, WGPUDeviceLostReason, WGPUStringView, void *, void *)",
    "WGPUDeviceLostCallbackInfo *",
    "void(WGPUDevice const *, WGPUErrorType, WGPUStringView, void *, void *)",
    "WGPUUncapturedErrorCallbackInfo *",
    "WGPUFeatureName[]",
    "WGPUDeviceDescriptor *",
    "void(WGPURequestDeviceStatus, WGPUDevice, WGPUStringView, void *, void *)",
    "WGPURequestDeviceCallbackInfo *",
    "WGPUBufferDescriptor *",
    # a pipeline
    "WGPUShaderSourceWGSL *",
    "WGPUShaderModuleDescriptor *",
    "WGPUBufferBindingLayout *",
    "WGPUBindGroupLayoutEntry *",
    "WGPUBindGroupLayoutEntry[]",
    "WGPUBindGroupLayoutDescriptor *",
    "WGPUBindGroupLayout[]",
    "WGPUPipelineLayoutDescriptor *",
    "WGPUComputeState *",
    "WGPUComputePipelineDescriptor *",
    # a launch: copy in, dispatch, copy back
    "uint8_t []",
    "uintptr_t",
    "uint8_t *",
    "WGPUCommandEncoderDescriptor *",
    "WGPUComputePassDescriptor *",
    "WGPUBindGroupEntry *",
    "WGPUBindGroupEntry[]",
    "WGPUBindGroupDescriptor *",
    "uint32_t []",
    "WGPUCommandBufferDescriptor *",
    "WGPUCommandBuffer[]",
    "void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)",
    "WGPUBufferMapCallbackInfo *",
    "intptr_t",
)


def parse_c_types_at_once(ffi, types) -> int:
    """Parse the C ``types`` not yet known to ``ffi`` (a ``cffi.FFI``) in one run of its C
    parser; returns how many it parsed (0 where anything is unexpected).

    In cffi's in-line ABI mode (wgpu-py's) a type is parsed on its first use, each by a
    pycparser run over a prelude that redeclares every typedef of the cdef (webgpu.h's
    ~450): 30-90 ms a type, and qnb's device and first launch name 45 (about 1.6 s of
    every process, warm or cold). One run for all of them costs about as much as one.
    This does what ``FFI._typeof_locked`` does for one type, through the same private
    parts of cffi (2.x); any surprise leaves cffi to parse each type when first used,
    exactly as without it."""
    try:
        parsed = _parse_c_types(ffi, types)
        return _install_types(ffi, parsed) if parsed else 0
    except Exception:  # noqa: BLE001 - an optimisation only: cffi parses lazily instead
        return 0


def _parse_c_types(ffi, types) -> list | None:
    """[(cdecl, cffi model)] for the ``types`` not yet known to ``ffi``, from one parser
    run (no backend type is built yet); None where anything is unexpected."""
    with ffi._lock:
        todo = [t for t in dict.fromkeys(types) if t not in ffi._parsed_types]
    if not todo:
        return []
    parser = ffi._parser
    source = "\n".join(f"void __qnb_type_{i}(\n{t}\n);" for i, t in enumerate(todo))
    declarations = _parse_naming_only_used_typedefs(parser, source).ext[-len(todo) :]
    parsed = []
    for i, (cdecl, declaration) in enumerate(zip(todo, declarations)):
        if declaration.name != f"__qnb_type_{i}":
            return None
        node = declaration.type.args.params[0]
        if type(node).__name__ == "ID":  # an unknown name: cffi reports it on use
            continue
        parsed.append((cdecl, parser._get_type_and_quals(node.type)[0]))
    return parsed


def _install_types(ffi, parsed: list) -> int:
    """Make the parsed (cdecl, model) pairs known to ``ffi``, as its first use of each
    would; returns how many were new."""
    count = 0
    with ffi._lock:
        for cdecl, model in parsed:
            if cdecl not in ffi._parsed_types:
                is_function = model.is_raw_function
                if is_function:
                    model = model.as_function_pointer()
                ffi._parsed_types[cdecl] = (ffi._get_cached_btype(model), is_function)
                count += 1
    return count


def _parse_naming_only_used_typedefs(parser, source: str):
    """pycparser's AST of ``source``, as cffi's ``Parser._parse`` makes it, with a prelude
    that declares only the typedef names ``source`` mentions (cffi's declares every typedef
    of the cdef: ~450 lines for webgpu.h, most of the run's ~200 ms). A typedef name the
    source never mentions plays no part in parsing it; the types themselves come from
    ``parser._declarations`` afterwards, as in cffi."""
    from cffi import cparser

    csource, _macros = cparser._preprocess(source)
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", csource))
    typenames = sorted(
        name[8:]
        for name in parser._declarations
        if name.startswith("typedef ") and name[8:] in words
    )
    common = cparser._common_type_names(csource).difference(typenames)
    lines = ['# 1 "<cdef automatic initialization code>"']
    lines += [f"typedef int {name};" for name in [*typenames, *sorted(common)]]
    lines.append("typedef int __dotdotdotint__, __dotdotdotfloat__, __dotdotdot__;")
    lines += [f'# 1 "{cparser.CDEF_SOURCE_STRING}"', csource, ""]
    lock = cparser.lock or contextlib.nullcontext()
    with lock:  # pycparser is not thread-safe (cffi takes this lock too)
        return cparser._get_parser().parse("\n".join(lines))


# --------------------------------------------------------------------------- the header

HEADER_FORMAT = 1  # of the files below: a change makes every older file a miss
HEADER_FILES_KEPT = 4  # one per header/cffi/pycparser: the newest are kept
_NATIVE = "wgpu.backends.wgpu_native"
_HEADER_FILE = re.compile(r"[0-9a-f]{64}\.json")
# The parser's state after a cdef: what a file restores (the rest must be as new).
_PARSER_STATE = ("_declarations", "_int_constants", "_anonymous_counter", "_uses_new_feature")
_PARSER_LEFTOVERS = ("_inside_extern_python", "_partial_length")  # set by any parse
_PARSER_FRESH = ("_included_declarations", "_structnode2type", "_options", "_recomplete")


def import_wgpu_native(directory: Path | None):
    """``wgpu.backends.wgpu_native``, imported with its header's parse served from a file
    in ``directory`` where one for this very header, cffi and pycparser is there and
    verifies, and written there otherwise (with the types of :data:`WGPU_NATIVE_IMPORT_TYPES`
    and ``WGPU_NATIVE_C_TYPES``: a warm process runs no C parser at all).

    The file holds what cffi's parser made of the header: its type descriptions
    (``cffi.model`` objects, as class names and attribute values), read back as data;
    nothing in it is executed. Its name is a hash of the header's text and the versions
    of cffi and pycparser, so a new wgpu-py (another header) or cffi is a miss, never a
    stale parse. ``directory`` None (no usable cache), a module imported already, or
    anything unexpected: the import is wgpu-py's own."""
    if directory is None or _NATIVE in sys.modules:
        return importlib.import_module(_NATIVE)
    try:
        import cffi
        from wgpu._coreutils import get_header_filename

        header = Path(get_header_filename("combined_header.h")).read_text()
        path = directory / f"{header_key(header)}.json"
    except Exception:  # noqa: BLE001 - another wgpu-py or cffi: its own import
        return importlib.import_module(_NATIVE)
    try:
        return _import_through(cffi, path, header)
    except Exception as exc:  # noqa: BLE001 - re-raised where the file is not to blame
        if not _SERVED:
            raise
        # The file verified, yet wgpu-py does not import with the parse it held (a file
        # forged with a checksum, or a cffi that reads its parse otherwise): it is dropped
        # and the header parsed again, as a corrupt kernel-cache entry is recompiled.
        _SERVED.clear()
        from qnb.cache import store

        store.warn(
            f"qnb: discarding {path}: wgpu-py does not import with the parse of its C header "
            f"that it holds ({type(exc).__name__}: {exc}); parsing the header again"
        )
        with contextlib.suppress(OSError):
            path.unlink()
        for name in [n for n in sys.modules if n == _NATIVE or n.startswith(_NATIVE + ".")]:
            del sys.modules[name]  # (its modules made from that parse: imported anew)
        return _import_through(cffi, path, header)


_SERVED: list = []  # set where the last import's cdef was served from a file


def _import_through(cffi, path: Path, header: str):
    """``wgpu.backends.wgpu_native`` imported with its header's cdef going through the
    file at ``path`` (:func:`_cdef_through`)."""
    real_cdef = cffi.FFI.cdef

    def cdef(ffi, csource, override=False, packed=False, pack=None):
        plain = type(ffi) is cffi.FFI and not (override or packed or pack)
        if plain and csource == header and not ffi._cdefsources:
            types = (*WGPU_NATIVE_IMPORT_TYPES, *WGPU_NATIVE_C_TYPES)
            if _cdef_through(path, ffi, csource, lambda: real_cdef(ffi, csource), types):
                _SERVED.append(path)
        else:
            real_cdef(ffi, csource, override=override, packed=packed, pack=pack)

    _SERVED.clear()
    cffi.FFI.cdef = cdef  # (any other cdef meanwhile goes through to cffi's own)
    try:
        return importlib.import_module(_NATIVE)
    finally:
        cffi.FFI.cdef = real_cdef


def header_key(header: str) -> str:
    """The file name's hash: the header's text, cffi's and pycparser's versions, the
    format of the file."""
    import cffi
    import pycparser

    h = hashlib.sha256()
    for part in (str(HEADER_FORMAT), cffi.__version__, pycparser.__version__, sys.platform):
        h.update(part.encode() + b"\0")
    h.update(header.encode())
    return h.hexdigest()


def _cdef_through(path: Path, ffi, csource: str, parse, types=()) -> bool:
    """``ffi.cdef(csource)``: from the file at ``path`` where it verifies; else ``parse()``
    (cffi's own), then the file is written for the next process, with the C ``types``
    (cdecls) parsed too. Returns whether the file served it."""
    try:
        state, served_types = _read_header_file(path)
    except Exception:  # noqa: BLE001 - missing, corrupt, foreign: cffi parses
        state = None
    if state is not None:
        with ffi._lock:  # what FFI._cdef does around its parse
            ffi._cdef_version = object()
            vars(ffi._parser).update(state)
            ffi._cdefsources.append(csource)
        with contextlib.suppress(Exception):  # (cffi would parse them on use)
            _install_types(ffi, served_types)
        with contextlib.suppress(OSError):  # used: the cache's eviction keeps it longest
            os.utime(path)
        return True
    parse()
    with contextlib.suppress(Exception):  # an optimisation only: nothing is written
        _write_header_file(path, ffi, types)
    return False


def _write_header_file(path: Path, ffi, types) -> None:
    """The parser's state just after the header's cdef (before any backend type is built:
    cffi marks the models it builds) and the models of the types qnb names, as a file;
    written only where it reads back as the very same state."""
    from qnb.cache import store

    parser = ffi._parser
    known = set(_PARSER_STATE) | set(_PARSER_LEFTOVERS) | set(_PARSER_FRESH)
    if set(vars(parser)) - known or parser._included_declarations or parser._recomplete:
        return  # another cffi, or a cdef this file does not describe
    try:
        parsed = _parse_c_types(ffi, types) or []
    except Exception:  # noqa: BLE001 - the header alone: cffi parses these on use
        parsed = []
    state = {name: getattr(parser, name) for name in _PARSER_STATE}
    state.update({name: vars(parser)[name] for name in _PARSER_LEFTOVERS if name in vars(parser)})
    encoder = _ModelEncoder()
    payload = {
        "key": path.stem,
        "state": {name: encoder.value(value) for name, value in state.items()},
        "types": [[cdecl, encoder.value(model)] for cdecl, model in parsed],
    }
    payload["models"] = encoder.finish()
    text = json.dumps(payload, separators=(",", ":"))
    again, again_types = _decode(json.loads(text), path.stem)
    if not (_same(again, state) and _same(again_types, parsed)):
        return
    _install_types(ffi, parsed)
    body = text.encode()
    store.write_atomically(
        path.parent, path, hashlib.sha256(body).hexdigest().encode() + b"\n" + body
    )
    _drop_older_files(path)


def _drop_older_files(path: Path) -> None:
    """Keep ``path`` and the ``HEADER_FILES_KEPT - 1`` newest other files (the parses of
    other wgpu-py or cffi versions: environments may share the user's cache directory,
    and each should stay warm); delete the rest."""
    others = []
    for item in path.parent.iterdir():
        if _HEADER_FILE.fullmatch(item.name) and item.name != path.name:
            with contextlib.suppress(OSError):
                others.append((item.lstat().st_mtime, item))
    others.sort(reverse=True)
    for _mtime, item in others[HEADER_FILES_KEPT - 1 :]:
        item.unlink(missing_ok=True)


def _read_header_file(path: Path) -> tuple[dict | None, list]:
    """(parser state, [(cdecl, model)]) from the file at ``path``, or (None, [])."""
    from qnb.cache import store

    data, _info = store.read_regular(path)  # never a link, a FIFO or another's file
    checksum, _, body = data.partition(b"\n")
    if hashlib.sha256(body).hexdigest().encode() != checksum:
        return None, []
    return _decode(json.loads(body), path.stem)


class _ModelEncoder:
    """cffi model objects as JSON values: each object once (``{"ref": n}``), so shared and
    cyclic references (a struct whose field points at itself) come back as they were."""

    def __init__(self):
        from cffi import model

        self.model = model
        self.index: dict[int, int] = {}
        self.objects: list = []
        self.todo: list = []

    def value(self, value):
        model = self.model
        if value is None or type(value) in (bool, int, str):
            return value
        if type(value) is tuple:
            return {"tuple": [self.value(item) for item in value]}
        if type(value) is dict and all(type(name) is str for name in value):
            return {"dict": [[name, self.value(item)] for name, item in value.items()]}
        cls = type(value)
        if (
            not isinstance(value, model.BaseTypeByIdentity)
            or getattr(model, cls.__name__, None) is not cls
        ):
            raise TypeError(f"not a cffi model: {cls.__name__}")
        ref = self.index.get(id(value))
        if ref is None:
            ref = self.index[id(value)] = len(self.objects)
            self.objects.append(None)
            self.todo.append(value)
        return {"ref": ref}

    def finish(self) -> list:
        while self.todo:
            obj = self.todo.pop()
            attrs = {name: self.value(value) for name, value in vars(obj).items()}
            self.objects[self.index[id(obj)]] = [type(obj).__name__, attrs]
        return self.objects


def _decode(payload: dict, key: str) -> tuple[dict | None, list]:
    """The parser state and types of a file's payload; (None, []) where it is not one of
    this key's (every class must be one of ``cffi.model``'s types)."""
    from cffi import model

    if payload.get("key") != key:
        return None, []
    objects = []
    for name, _attrs in payload["models"]:
        cls = getattr(model, name, None)
        if not (isinstance(cls, type) and issubclass(cls, model.BaseTypeByIdentity)):
            return None, []
        objects.append(cls.__new__(cls))

    def value(item):
        if isinstance(item, dict):
            if "ref" in item:
                return objects[item["ref"]]
            if "dict" in item:
                return {str(name): value(part) for name, part in item["dict"]}
            return tuple(value(part) for part in item["tuple"])
        if item is None or type(item) in (bool, int, str):
            return item
        raise ValueError(f"unexpected {type(item).__name__}")

    for obj, (_name, attrs) in zip(objects, payload["models"]):
        vars(obj).update({str(name): value(item) for name, item in attrs.items()})
    state = {name: value(item) for name, item in payload["state"].items()}
    if not set(_PARSER_STATE) <= set(state) <= set(_PARSER_STATE) | set(_PARSER_LEFTOVERS):
        return None, []
    types = [(str(cdecl), value(item)) for cdecl, item in payload["types"]]
    return state, types


def _same(a, b) -> bool:
    """Whether ``a`` and ``b`` are the same values, model objects compared by class and
    attributes, one to one (each object of ``a`` stands for exactly one of ``b``)."""
    from cffi import model

    there: dict[int, object] = {}
    back: dict[int, object] = {}
    todo = [(a, b)]
    while todo:
        x, y = todo.pop()
        if isinstance(x, model.BaseTypeByIdentity):
            if type(x) is not type(y):
                return False
            if id(x) in there or id(y) in back:
                if there.get(id(x)) is not y or back.get(id(y)) is not x:
                    return False
                continue
            there[id(x)], back[id(y)] = y, x
            x, y = vars(x), vars(y)
        if type(x) is not type(y):
            return False
        if type(x) is dict:
            if list(x) != list(y):
                return False
            todo.extend((x[name], y[name]) for name in x)
        elif type(x) in (tuple, list):
            if len(x) != len(y):
                return False
            todo.extend(zip(x, y))
        elif x != y:
            return False
    return True
