"""``cuda-host``: the cuda backend's generated CUDA C++, compiled by g++ and run on the host.

A test backend, registered by ``tests/conftest.py`` (``qnb.backends()`` does not list it and
"auto" never picks it). It renders exactly what the cuda backend renders
(``cuda_render.render_cuda``) and passes arguments by the same ABI, then compiles the text
with the host compiler against ``qnb_cuda_host.h``, which provides CUDA's execution model
(blocks of fibers, ``__shared__``, ``__syncthreads``, WMMA). So the differential suite checks
the generated code's logic on machines without a GPU: indexing, guards, barriers, exchanges
through shared memory, f16 rounding, the parameter ABI, debug-mode checks. It says nothing
about speed, the memory model, or NVRTC (``test_cuda_compile.py`` compiles the same text
with NVRTC; ``scripts/gpu_check.sh`` runs it on a GPU).

Each array argument is copied into a buffer with guard bytes on both sides; a launch that
writes outside an array raises ``AssertionError`` naming the parameter.

The compiled library is built from the artifact's source when the kernel is loaded (so the
cache, as for every backend, holds no host code), once per source text, under
``build/cuda-host/``.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import pathlib
import shutil
import subprocess
import tempfile

import numpy as np

from qnb.backends.base import (
    Artifact,
    Backend,
    BackendInfo,
    DeviceArray,
    Launcher,
    Options,
    argument_error,
    check_dims,
)
from qnb.backends.cuda import ScalarArgument, _argument_plan, check_array_kind, dispatch
from qnb.backends.cuda_render import SCALAR_ABI, CudaRenderer, render_cuda
from qnb.backends.host_arrays import HostArrays
from qnb.dtypes import as_dtype
from qnb.errors import BackendError, QnbTypeError
from qnb.ir import KernelIR

HERE = pathlib.Path(__file__).resolve().parent
SHIM = HERE / "qnb_cuda_host.h"
RUNTIME = HERE / "qnb_cuda_host_runtime.cpp"  # the block scheduler, built once per shim
BUILD = HERE.parents[1] / "build" / "cuda-host"
GUARD = 64  # bytes of guard pattern on each side of every array
GUARD_BYTE = 0xA5
CXXFLAGS = ["-std=c++17", "-O1", "-fPIC", "-w"]  # the header is precompiled with these too


@functools.lru_cache(maxsize=1)
def compiler() -> tuple[str | None, str]:
    """(path of g++ or None, its version line or why it is unusable)."""
    cxx = os.environ.get("CXX") or shutil.which("g++")
    if not cxx:
        return None, "no C++ compiler (g++) on PATH; install g++"
    probe = subprocess.run(
        [cxx, "-x", "c++", "-std=c++17", "-fsyntax-only", "-"],
        input="_Float16 h = (_Float16)1.0f;\n",
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        return None, f"{cxx} has no _Float16 (GCC >= 12 on x86-64 has it)"
    version = subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout
    return cxx, version.splitlines()[0] if version else cxx


def _shim_digest() -> str:
    digest = hashlib.sha256()
    for path in sorted([SHIM, RUNTIME, *(HERE / "include").iterdir()]):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def _precompiled_shim() -> pathlib.Path:
    """The shim beside its precompiled header (halves each kernel's compile time); g++
    reads the plain header where the .gch does not fit."""
    directory = BUILD / f"shim-{_shim_digest()}"
    if not directory.exists():
        BUILD.mkdir(parents=True, exist_ok=True)
        scratch = pathlib.Path(tempfile.mkdtemp(dir=BUILD))
        shutil.copy(SHIM, scratch / SHIM.name)
        subprocess.run(
            [compiler()[0], *CXXFLAGS, "-x", "c++-header", SHIM.name],
            cwd=scratch,
            capture_output=True,
        )
        try:
            os.rename(scratch, directory)
        except OSError:  # another process made it first
            shutil.rmtree(scratch, ignore_errors=True)
    return directory / SHIM.name


# What a hand-written artifact says of its launch shape: blocks of 256 threads, a block per
# program (the shape of the probes and of a kernel that holds tiles).
ONE_PROGRAM = {"threads": 256, "programs_per_block": 1}


def _c_param_types(abi: list[dict]) -> list[str]:
    """The C type of each kernel parameter, in signature order (the cuda ABI), without
    the launch grid's three ints, which end every signature."""
    types = []
    for entry in abi:
        if entry["kind"] == "array":
            types.append(CudaRenderer.type_names[as_dtype(entry["dtype"])] + "*")
            types += ["int"] * entry["ndim"]
        else:
            types.append(SCALAR_ABI[entry["dtype"]].c_type)
    return types


def _host_entry(entry: str, abi: list[dict], threads: int, name: str = "qnb_host_entry") -> str:
    """``name(blocks, grid, args)`` (``qnb_host_entry``): runs the kernel on every thread of
    every block of ``blocks`` (``threads`` per block), passing it the launch ``grid`` (which
    the cuda backend's ``dispatch`` may have folded into ``blocks``)."""
    call = [f"*({t}*)call.args[{k}]" for k, t in enumerate(_c_param_types(abi))]
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


def compile_once(
    text: str, stem: str, flags: list[str], inputs: tuple[pathlib.Path, ...] = ()
) -> pathlib.Path:
    """``text`` compiled by g++ with ``flags`` (and the CUDA header stand-ins), linked with
    ``inputs``, into ``build/cuda-host/<stem>-<digest>``, once per text, flags and shim.
    A compile error raises BackendError with g++'s log."""
    cxx, why = compiler()
    if cxx is None:
        raise BackendError(f"backend 'cuda-host' is not available: {why}")
    flags = [*flags, f"-I{HERE / 'include'}"]
    key = "\0".join([_shim_digest(), why, *flags, *map(str, inputs), text])
    output = BUILD / f"{stem}-{hashlib.sha256(key.encode()).hexdigest()[:24]}"
    if not output.exists():
        BUILD.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=BUILD) as scratch:
            cpp = pathlib.Path(scratch) / f"{stem}.cpp"
            cpp.write_text(text)
            partial = pathlib.Path(scratch) / output.name
            done = subprocess.run(
                [cxx, *flags, str(cpp), *map(str, inputs), "-o", str(partial)],
                capture_output=True,
                text=True,
            )
            if done.returncode != 0:
                raise BackendError(f"g++ rejected the generated CUDA code:\n{done.stderr}")
            os.replace(partial, output)
    return output


@functools.cache
def runtime(flags: tuple[str, ...] = (*CXXFLAGS, "-shared")) -> pathlib.Path:
    """The block scheduler (``qnb_cuda_host_runtime.cpp``) built with ``flags``, once per
    shim: a shared library for the kernel libraries, an object for the TSan programs."""
    text = RUNTIME.read_text()
    return compile_once(text, "runtime", [*flags, f"-I{HERE}"])


# kernels per library in build_many: past a few dozen, a bigger one saves no more
BATCH = 32
# what build_many built: a kernel's host text -> (its library, its entry point there)
_BUILT_MANY: dict[str, tuple[pathlib.Path, str]] = {}


def prebuild_in_batches(backend, keys, kernel_of):
    """``prebuild(key)`` for a test file's cuda-host kernels: the first time a key is asked
    for, ``backend.prebuild`` builds the run of ``BATCH`` keys that holds it (``kernel_of(key)``
    gives each one's ``(KernelIR, Options)``), so each test then compiles its own kernel from
    what was built; a kernel whose batch fails is compiled alone, failing its own test."""
    keys, built = list(keys), set()

    def prebuild(key) -> None:
        start = keys.index(key) // BATCH * BATCH
        if start not in built:
            built.add(start)
            backend.prebuild([kernel_of(k) for k in keys[start : start + BATCH]])

    return prebuild


def build(source: str, entry: str, abi: list[dict], threads: int) -> ctypes._CFuncPtr:
    """Compile ``source`` (+ the host entry point) to a shared library (or find it in one
    ``build_many`` built), load it, and return its host entry point."""
    text = source + _host_entry(entry, abi, threads)
    if text in _BUILT_MANY:
        library, name = _BUILT_MANY[text]
    else:
        flags = [*CXXFLAGS, "-shared", "-include", str(_precompiled_shim())]
        library, name = compile_once(text, entry, flags, (runtime(),)), "qnb_host_entry"
    return getattr(ctypes.CDLL(str(library)), name)


def build_many(kernels: list[tuple[str, str, list[dict], int]]) -> None:
    """Build many kernels (``(source, entry, abi, threads)`` each) as few g++ runs, so that
    ``build`` of each then only loads it: most of a kernel's compile is g++'s fixed cost
    (starting, reading the precompiled shim). Up to ``BATCH`` kernels go into one library,
    each in a namespace of its own (its prelude, its helpers) with its entry and host entry
    renamed, so each sees what it would alone (the #include lines, the header stand-ins,
    go first). A batch g++ rejects is left unbuilt: each of its kernels then compiles alone
    in ``build``, where the error names it."""
    pending = {}
    for source, entry, abi, threads in kernels:
        text = source + _host_entry(entry, abi, threads)
        if text not in _BUILT_MANY:
            pending[text] = (source, entry, abi, threads)
    todo = list(pending.items())
    flags = [*CXXFLAGS, "-shared", "-include", str(_precompiled_shim())]
    for start in range(0, len(todo), BATCH):
        batch = todo[start : start + BATCH]
        lines = batched_lines([kernel for _text, kernel in batch], "qnbh")
        try:
            library = compile_once("\n".join(lines), "batch", flags, (runtime(),))
        except BackendError:
            continue
        for index, (text, _kernel) in enumerate(batch):
            _BUILT_MANY[text] = (library, batched_entry(index))


def batched_lines(kernels: list[tuple[str, str, list[dict], int]], prefix: str, inside=None):
    """The lines of one program holding ``kernels`` (``(source, entry, abi, threads)``
    each), the #include lines first, then each kernel in a namespace of its own
    (``batched_namespace``) (its prelude, its helpers, its entry renamed) with its host entry
    ``batched_entry(index)`` and the lines ``inside(index, abi)`` gives (none where None)."""
    from tests.backends.nvrtc_batch import renamed_body, split_includes

    includes, parts = set(), []
    for index, (source, entry, abi, threads) in enumerate(kernels):
        tag = batched_namespace(prefix, index)
        includes.update(split_includes(source)[0])
        renamed, body = renamed_body(source, tag, entry)
        parts += [f"namespace {tag} {{", body]
        parts.append(_host_entry(renamed, abi, threads, batched_entry(index)))
        parts += [*(inside(index, abi) if inside else ()), f"}}  // namespace {tag}"]
    return [*sorted(includes), *parts]


def batched_namespace(prefix: str, index: int) -> str:
    """The namespace of the kernel at ``index`` of ``batched_lines(..., prefix)``."""
    return f"{prefix}{index}x"


def batched_entry(index: int) -> str:
    """The host entry of the kernel at ``index`` of ``batched_lines``."""
    return f"qnb_host_entry_{index}"


def _nvrtc_missing() -> bool:
    """Whether NVRTC or its headers are missing (test_cuda_compile.py says why, or fails
    in CI)."""
    from tests.backends.nvrtc_batch import toolchain_reason

    return toolchain_reason() is not None


def nvrtc_check(source: str, entry: str, options: Options) -> None:
    """The same text through NVRTC to a cubin for sm_90 (where NVRTC and its headers are
    installed): every kernel a test runs on cuda-host also compiles for a GPU, so g++'s
    view of the code cannot hide what NVRTC rejects. A rejection raises CompileError, and
    the test fails. Once per text: what compiled is kept by ``nvrtc_batch`` (``store``),
    where the every-shape and suite compiles find it too, and it finds theirs."""
    from qnb.backends import cuda
    from tests.backends import nvrtc_batch

    if _nvrtc_missing() or nvrtc_batch.stored(source, "sm_90", options) is not None:
        return
    cubin, ptx, _log = cuda.nvrtc_compile(source, "sm_90", options, name=f"{entry}.cu")
    assert cubin[:4] == b"\x7fELF" and f".entry {entry}(" in ptx
    nvrtc_batch.store(source, "sm_90", options, nvrtc_batch.Compiled(entry, entry, ptx))


def nvrtc_check_many(kernels: list[tuple[str, Options]]) -> None:
    """``nvrtc_check`` of many kernels (``(source, options)`` each) as few NVRTC programs
    (``nvrtc_batch``: each kernel alone in a namespace). A kernel NVRTC rejects is left
    unstored: its own ``nvrtc_check`` then compiles it alone, and fails naming it."""
    from tests.backends.nvrtc_batch import Unit, compile_units

    if _nvrtc_missing():
        return
    groups: dict[str, tuple[Options, list[str]]] = {}
    for source, options in kernels:
        group = groups.setdefault(repr(options.as_component()), (options, []))
        if source not in group[1]:
            group[1].append(source)
    for options, sources in groups.values():
        # compile_units stores what compiles (and reads what was stored before)
        compile_units([Unit(str(k), source) for k, source in enumerate(sources)], "sm_90", options)


class HostDeviceArray(DeviceArray):
    """``qnb.to_device`` under cuda-host: the array stays in host memory."""

    backend_name = "cuda-host"

    def __init__(self, data: np.ndarray):
        super().__init__(data.shape, data.dtype)
        self.data = data

    def numpy(self):
        return self.data.copy()


class _Guarded:
    """A C-contiguous copy of an array between two runs of guard bytes."""

    def __init__(self, name: str, array: np.ndarray):
        self.name = name
        data = np.ascontiguousarray(array)
        self.raw = np.full(data.nbytes + 2 * GUARD, GUARD_BYTE, np.uint8)
        self.view = self.raw[GUARD : GUARD + data.nbytes].view(data.dtype).reshape(data.shape)
        self.view[...] = data

    def pointer(self) -> int:
        return self.raw.ctypes.data + GUARD

    def check(self) -> None:
        outside = np.concatenate([self.raw[:GUARD], self.raw[-GUARD:]])
        if (outside != GUARD_BYTE).any():
            raise AssertionError(f"the kernel wrote outside array parameter {self.name!r}")


def _copy_back(host: np.ndarray, buffer: _Guarded) -> None:
    host[...] = buffer.view


class CudaHostBackend(Backend):
    """The cuda backend's code on the host (see the module docstring)."""

    name = "cuda-host"
    language = "cuda"

    def info(self) -> BackendInfo:
        cxx, why = compiler()
        if cxx is None:
            return BackendInfo(self.name, False, "none", why)
        return BackendInfo(self.name, True, f"host emulation of CUDA ({why})")

    def key_components(self) -> tuple[dict, dict]:
        backend = {"name": self.name, "emulation": _shim_digest()}
        return backend, {"cxx": compiler()[1], "flags": " ".join(CXXFLAGS)}

    def render(self, ir: KernelIR, options: Options = Options()) -> str:
        return render_cuda(ir, options).text

    def compile(self, ir: KernelIR, options: Options = Options()) -> Artifact:
        rendered = render_cuda(ir, options)
        text = {
            "source": rendered.text,
            "entry": rendered.entry,
            "abi": rendered.abi,
            "threads": rendered.threads,
            "programs_per_block": rendered.programs_per_block,
        }
        self._build(text)  # a compile error shows here
        nvrtc_check(rendered.text, rendered.entry, options)
        return Artifact(text=text)

    @staticmethod
    def _build(text: dict) -> ctypes._CFuncPtr:
        return build(text["source"], text["entry"], text["abi"], text["threads"])

    def prebuild(self, kernels: list[tuple[KernelIR, Options]]) -> None:
        """Compile many kernels ahead, as few g++ and NVRTC runs (``build_many``,
        ``nvrtc_check_many``), so that ``compile`` and ``load`` of each then find it
        built and checked. Changes nothing that is checked: a kernel whose batch fails
        is built and checked alone when it is compiled."""
        rendered = [(render_cuda(kernel, options), options) for kernel, options in kernels]
        build_many([(r.text, r.entry, r.abi, r.threads) for r, _options in rendered])
        nvrtc_check_many([(r.text, options) for r, options in rendered])

    def load(self, artifact: Artifact) -> Launcher:
        abi = artifact.text["abi"]
        entry = self._build(artifact.text)
        per_block = artifact.text["programs_per_block"]
        entry.argtypes = [
            ctypes.POINTER(ctypes.c_uint),
            ctypes.POINTER(ctypes.c_uint),
            ctypes.POINTER(ctypes.c_void_p),
        ]
        entry.restype = ctypes.c_long
        plan = _argument_plan(abi)

        def launch(grid: tuple[int, int, int], args: list) -> None:
            grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
            keep, guarded = [], []

            def guard(name: str, host: np.ndarray) -> _Guarded:
                guarded.append(_Guarded(name, host))
                return guarded[-1]

            hosts = HostArrays("cuda-host", guard, _copy_back)
            for step, value in zip(plan, args):
                if type(step) is ScalarArgument:
                    keep.append(np.array([value], step.pass_as))
                    continue
                name = step.name
                host = value.data if isinstance(value, HostDeviceArray) else value
                if not isinstance(host, np.ndarray):
                    raise argument_error(
                        QnbTypeError,
                        name,
                        f"parameter {name!r}: cannot pass {type(value).__name__}",
                    )
                check_array_kind(name, host, step.dtype, step.ndim)
                check_dims(name, host.shape)
                buffer = hosts.add(name, host, step.stored)
                keep.append(np.array([buffer.pointer()], np.uintp))
                keep += [np.array([n], np.int32) for n in host.shape]
            hosts.check()
            pointers = (ctypes.c_void_p * max(len(keep), 1))(*(k.ctypes.data for k in keep))
            blocks = dispatch(grid, per_block)  # the cuda backend's, limits and folding
            if min(grid) > 0:
                entry((ctypes.c_uint * 3)(*blocks), (ctypes.c_uint * 3)(*grid), pointers)
            for buffer in guarded:
                buffer.check()
            hosts.write_back()

        return launch

    def to_device(self, array) -> HostDeviceArray:
        return HostDeviceArray(np.ascontiguousarray(np.asarray(array)).copy())
