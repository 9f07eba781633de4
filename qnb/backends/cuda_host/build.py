"""cuda-host's builds: the generated CUDA C++ compiled by g++ into a shared library.

A kernel's library is its rendered source, a host entry point (:func:`host_entry`) and the
block scheduler (``qnb_cuda_host_runtime.cpp``), compiled against ``qnb_cuda_host.h`` (the
host model of CUDA) and the stand-ins for CUDA's headers under ``include/``.

What is trusted, and how (the kernel cache's rules: nothing planted is run):

- the kernel cache stores the *source* (an artifact of text fields), and, beside it, the
  sha256 of the library that source was built into when the kernel was compiled;
- libraries are kept in ``cuda-host-build`` under a usable (private) cache directory, on
  the trust rules of the wgpu driver's directory (ours, 0o700, not a link), and otherwise
  in a directory of this process's own; a library is read as a regular file of ours, and
  loaded only if its bytes hash to what the kernel's entry recorded; anything else is
  built again from the source. What is loaded are the very bytes that were checked (a
  copy in this process's private directory), never a path that could change between the
  check and the load;
- what g++ itself reads besides the package's own files (the precompiled header and the
  scheduler's object) is made once per process in its private directory, never read
  from a directory that outlives it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import pathlib
import platform
import shutil
import subprocess
import tempfile
import threading
from typing import NamedTuple

from qnb.errors import BackendError

HERE = pathlib.Path(__file__).resolve().parent
SHIM = HERE / "qnb_cuda_host.h"
RUNTIME = HERE / "qnb_cuda_host_runtime.cpp"  # the block scheduler
INCLUDE = HERE / "include"  # cuda_fp16.h, cuda_bf16.h, mma.h: empty, the shim has all
CXXFLAGS = ["-std=c++17", "-O1", "-fPIC", "-w"]  # the header is precompiled with these too
BUILD_DIRECTORY = "cuda-host-build"  # under qnb's cache directory
ENTRY = "qnb_host_entry"  # the host entry point of a kernel built alone


@functools.lru_cache(maxsize=1)
def compiler() -> tuple[str | None, str]:
    """(path of the C++ compiler or None, its version line or why it is unusable). ``$CXX``
    where set, else ``g++`` on ``PATH``."""
    cxx = os.environ.get("CXX") or shutil.which("g++")
    if not cxx:
        return None, "no C++ compiler (g++) on PATH; install g++"
    try:
        probe = subprocess.run(
            [cxx, "-x", "c++", "-std=c++17", "-fsyntax-only", "-"],
            input="_Float16 h = (_Float16)1.0f;\nthread_local int t;\n",
            capture_output=True,
            text=True,
        )
        version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout
        target = subprocess.run([cxx, "-dumpmachine"], capture_output=True, text=True).stdout
    except OSError as exc:
        return None, f"cannot run {cxx} ({exc.strerror or exc})"
    if probe.returncode != 0:
        return None, f"{cxx} has no _Float16 (GCC >= 12 on x86-64 has it)"
    line = version.splitlines()[0] if version else cxx
    return cxx, f"{line} [{target.strip() or platform.machine()}]"


@functools.lru_cache(maxsize=1)
def emulation_digest() -> str:
    """A digest of the host model (the shim, the scheduler, the header stand-ins)."""
    digest = hashlib.sha256()
    for path in sorted([SHIM, RUNTIME, *INCLUDE.iterdir()]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def host_entry(entry: str, param_types: list[str], threads: int, name: str) -> str:
    """``name(blocks, grid, args)``: runs the kernel ``entry`` (its C parameter types
    ``param_types``, the launch grid's three ints after them) on every thread of every
    block of ``blocks`` (``threads`` per block), passing it the launch ``grid`` (which the
    cuda backend's ``dispatch`` may have folded into ``blocks``)."""
    call = [f"*({t}*)call.args[{k}]" for k, t in enumerate(param_types)]
    call += [f"(int)call.grid[{axis}]" for axis in range(3)]
    return (
        "\nnamespace {\n"
        "struct qnb_host_call { const unsigned int* grid; void** args; };\n"
        "void qnb_host_body(void* context) {\n"
        "  const qnb_host_call& call = *(const qnb_host_call*)context;\n"
        f"  {entry}({', '.join(call)});\n"
        "}\n"
        "}  // namespace\n"
        f'extern "C" long {name}(const unsigned int* blocks, const unsigned int* grid,'
        " void** args) {\n"
        "  qnb_host_call call{grid, args};\n"
        f"  return qnb_host::launch(blocks, {threads}, qnb_host_body, &call);\n"
        "}\n"
    )


# --------------------------------------------------------------------------- directories

_lock = threading.Lock()
_private: list[pathlib.Path] = []  # this process's own directory, made on first use


def private_directory() -> pathlib.Path:
    """A directory of this process alone (0o700, removed when it ends): the per-process
    inputs of g++, the builds where no cache directory is usable, loaded copies."""
    with _lock:
        if not _private:
            from qnb.cleanup import remove_when_process_ends

            path = pathlib.Path(tempfile.mkdtemp(prefix="qnb-cuda-host-"))
            remove_when_process_ends(path)
            _private.append(path)
        return _private[0]


_chosen: dict[tuple, pathlib.Path] = {}  # (cache directory, disk on) -> the build directory


def build_directory() -> pathlib.Path:
    """Where libraries are kept: ``cuda-host-build`` under a usable (private) cache
    directory, else this process's own directory (``QNB_CACHE=0``, an untrusted or
    refused cache directory). Decided once per cache directory (a refusal warns once)."""
    from qnb.cache import store

    setting = (str(store.directory()), store.disk_enabled())
    chosen = _chosen.get(setting)
    if chosen is None or (chosen.parent != private_directory() and not chosen.is_dir()):
        # The wgpu backend's helper holds the trust rules for a directory beside the
        # kernel cache's entries (the driver's shader cache is one); it imports no wgpu.
        from qnb.backends.wgpu import _private_directory

        kept = _private_directory(BUILD_DIRECTORY, "not keeping cuda-host's builds in {}")
        chosen = _chosen[setting] = kept if kept is not None else private_directory() / "builds"
    return chosen


# --------------------------------------------------------------------------- compiling


def compile_text(
    text: str, output: pathlib.Path, flags: list[str], inputs: tuple[pathlib.Path, ...] = ()
) -> bytes:
    """``text`` compiled by g++ with ``flags`` (and the header stand-ins), linked with
    ``inputs``, as ``output`` (written whole or not at all: built in a scratch directory
    beside it, then renamed); returns what was built. A compile error raises
    BackendError with g++'s log."""
    cxx, why = compiler()
    if cxx is None:
        raise BackendError(f"backend 'cuda-host' is not available: {why}")
    output.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=output.parent, prefix=".build-") as scratch:
        # Relative names, so that no directory of this run ends up in what is built.
        source = f"{output.name.split('-')[0]}.cpp"
        pathlib.Path(scratch, source).write_text(text)
        done = subprocess.run(
            [cxx, *flags, f"-I{INCLUDE}", source, *map(str, inputs), "-o", "out"],
            cwd=scratch,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise BackendError(f"g++ rejected the generated CUDA code:\n{done.stderr}")
        built = pathlib.Path(scratch, "out")
        data = built.read_bytes()
        os.replace(built, output)
    return data


class _Inputs(NamedTuple):
    shim: pathlib.Path  # the shim beside its precompiled header
    runtime: pathlib.Path  # the scheduler's object


_inputs: dict[tuple, _Inputs] = {}


def runtime_object(flags: tuple[str, ...] = (*CXXFLAGS, "-c")) -> pathlib.Path:
    """The scheduler compiled with ``flags`` into an object, once per process (in its
    private directory), for the kernel libraries or a ThreadSanitizer program."""
    return _per_process(flags).runtime


def _per_process(flags: tuple[str, ...]) -> _Inputs:
    with _lock:
        made = _inputs.get(flags)
    if made is not None:
        return made
    directory = (
        private_directory() / f"inputs-{hashlib.sha256(repr(flags).encode()).hexdigest()[:12]}"
    )
    directory.mkdir(mode=0o700, exist_ok=True)
    runtime = directory / "runtime-scheduler.o"
    compile_text(RUNTIME.read_text(), runtime, [*flags, f"-I{HERE}"])
    shim = directory / SHIM.name
    shutil.copy(SHIM, shim)
    compile_flags = [f for f in flags if f not in ("-c", "-shared")]
    # The precompiled header halves each kernel's compile; g++ reads the plain header
    # where the .gch does not fit (a failed precompile leaves only that).
    subprocess.run(
        [compiler()[0], *compile_flags, "-x", "c++-header", SHIM.name],
        cwd=directory,
        capture_output=True,
    )
    made = _Inputs(shim, runtime)
    with _lock:
        return _inputs.setdefault(flags, made)


def kernel_flags() -> list[str]:
    """g++'s command line for a kernel library (the shim force-included)."""
    return [*CXXFLAGS, "-shared", "-include", str(_per_process((*CXXFLAGS, "-c")).shim)]


class Library(NamedTuple):
    """A built kernel library as a kernel's artifact names it: its file in the build
    directory, the sha256 of its bytes, and the host entry point's symbol in it."""

    name: str
    sha256: str
    symbol: str

    def as_json(self) -> dict:
        return {"name": self.name, "sha256": self.sha256, "symbol": self.symbol}


def library_name(text: str, stem: str) -> str:
    """The file a library of ``text`` is kept as: named by everything it is built from."""
    key = "\0".join([emulation_digest(), compiler()[1], *CXXFLAGS, text])
    return f"{stem}-{hashlib.sha256(key.encode()).hexdigest()[:32]}.so"


# what this process built or adopted: a kernel's host text -> its library
_built: dict[str, Library] = {}


def build(text: str, stem: str) -> Library:
    """``text`` (a kernel with its host entry :data:`ENTRY`) built into a library now, or the
    library this process built for it before (:func:`adopt`)."""
    with _lock:
        known = _built.get(text)
    return known if known is not None else _build(text, stem)[0]


MAX_LIBRARIES = 256  # kept in the build directory; the least recently used go first


def _build(text: str, stem: str) -> tuple[Library, bytes]:
    name = library_name(text, stem)
    directory = build_directory()
    data = compile_text(text, directory / name, kernel_flags(), (runtime_object(),))
    _trim(directory)
    library = Library(name, hashlib.sha256(data).hexdigest(), ENTRY)
    with _lock:
        _built[text] = library
    return library, data


def adopt(text: str, library: Library) -> None:
    """Record that ``library``, which this process built (several kernels in one, each
    under a symbol of its own), holds the kernel ``text``: :func:`build` then returns it."""
    with _lock:
        _built[text] = library


_loaded: dict[str, ctypes.CDLL] = {}  # sha256 -> the library loaded from those bytes


def load(library: Library, text: str, stem: str):
    """The host entry point of ``library``, loaded from bytes that hash to its sha256; a
    library missing, changed or planted is built again from ``text`` (and that build is
    loaded)."""
    return symbol(library, text, stem, library.symbol)


def symbol(library: Library, text: str, stem: str, name: str):
    """Symbol ``name`` of ``library``, loaded as :func:`load` loads it (the scheduler's
    ``qnb_host_mma_calls`` too: each library holds a scheduler of its own)."""
    with _lock:
        handle = _loaded.get(library.sha256)
    if handle is None:
        data = _verified_bytes(build_directory() / library.name, library.sha256)
        if data is None:
            library, data = _build(text, stem)
        handle = _load_bytes(data)
        with _lock:
            handle = _loaded.setdefault(library.sha256, handle)
    return getattr(handle, name)


def _verified_bytes(path: pathlib.Path, sha256: str) -> bytes | None:
    """The bytes of the regular file ``path`` (ours, not a link) if they hash to
    ``sha256`` (then it counts as used now), else None."""
    from qnb.cache import store

    try:
        data, _info = store.read_regular(path)
    except OSError:  # missing, a link, another user's, too large: built again
        return None
    if hashlib.sha256(data).hexdigest() != sha256:
        return None
    with contextlib.suppress(OSError):
        os.utime(path)
    return data


def _trim(directory: pathlib.Path) -> None:
    """Keep at most ``MAX_LIBRARIES`` libraries in ``directory``, by last use (a kernel
    whose library went is built again from its cached source when it loads)."""
    try:
        found = [
            (entry.stat(follow_symlinks=False).st_mtime, entry.path)
            for entry in os.scandir(directory)
            if entry.name.endswith(".so")
        ]
    except OSError:
        return
    found.sort()
    for _mtime, path in found[: max(0, len(found) - MAX_LIBRARIES)]:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _load_bytes(data: bytes) -> ctypes.CDLL:
    """Load a library from its bytes: a copy in this process's private directory, under a
    name no other library of the process has had (the dynamic linker takes a name it has
    loaded before for the library it loaded then), kept until the process ends."""
    fd, path = tempfile.mkstemp(suffix=".so", dir=private_directory())
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return ctypes.CDLL(path)
