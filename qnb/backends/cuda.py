"""The cuda backend: CUDA C++ rendered from the IR, compiled by NVRTC to a cubin, launched
through CuPy.

Pipeline: ``render`` (``cuda_render``, no device and no compiler needed) → ``compile``
(NVRTC through CuPy's low-level ``cupy.cuda.nvrtc``, to a cubin for the device's arch; on a
machine without a GPU ``compile_for_arch`` compiles for an explicit arch) → ``load``
(``cupy.cuda.function.Module.load`` of the cubin bytes) → a launcher.

What a fresh machine needs, all from pip (the ``cuda`` extra): ``cupy-cuda13x``;
``nvidia-cuda-nvrtc==13.0.*`` (13.0 writes PTX ISA 9.0, which 13.0-era drivers accept);
``nvidia-cuda-runtime==13.0.*`` (``cuda_fp16.h``, ``mma.h``) and ``nvidia-cuda-crt==13.0.*``
(``crt/mma.h``, which ``mma.h`` includes). NVRTC ships no headers of its own; the wheels put
them in ``site-packages/nvidia/cu13/include``. A CUDA toolkit's include directory
(``$CUDA_PATH``, ``/usr/local/cuda``) is the fallback.

The kernel's parameter ABI (``artifact.text["abi"]``), in ``KernelIR.params`` order: an array
parameter is a pointer to its elements (C order, contiguous) followed by one ``int`` per
dimension; a scalar parameter is passed by value in its own dtype.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import threading
from typing import NamedTuple

import numpy as np

from qnb.backends.base import (
    FAST_ARRAY_TYPES,
    Artifact,
    Backend,
    BackendInfo,
    DeviceArray,
    Launcher,
    Options,
    argument_error,
    check_dims,
)
from qnb.backends.cuda_prelude import prelude_digest
from qnb.backends.host_arrays import HostArrays
from qnb.errors import BackendError, CompileError, QnbTypeError
from qnb.ir import KernelIR

CUDA_EXTRA_HINT = (
    "pip install 'qnb[cuda]' (cupy-cuda13x, nvidia-cuda-nvrtc==13.0.*, "
    "nvidia-cuda-runtime==13.0.*, nvidia-cuda-crt==13.0.*)"
)
_MAX_GRID = (2**31 - 1, 65535, 65535)
# A kernel's parameters (the ABI below, then the grid's three ints) must fit the parameter
# space: 4,096 bytes classically, 32,764 from CUDA 12.1 on Volta (sm_70) and newer, which
# NVRTC 12.1+ compiles for and the drivers that run its PTX accept.
PARAMETER_SPACE = 4096
LARGE_PARAMETER_SPACE = 32764
_C_SIZES = {"float": 4, "double": 8, "int": 4}


# --------------------------------------------------------------------------- toolchain


def _import_cupy():
    try:
        import cupy
    except ImportError as exc:
        raise BackendError(f"CuPy is not installed ({exc}); {CUDA_EXTRA_HINT}") from None
    FAST_ARRAY_TYPES.add(cupy.ndarray)  # CuPy arrays take the launch fast path
    return cupy


def _nvrtc():
    """CuPy's low-level NVRTC bindings (they load libnvrtc without needing a driver)."""
    _import_cupy()
    from cupy.cuda import nvrtc

    try:
        nvrtc.getVersion()
    except Exception as exc:  # the library itself is missing
        raise BackendError(f"NVRTC cannot be loaded ({exc}); {CUDA_EXTRA_HINT}") from None
    return nvrtc


@functools.lru_cache(maxsize=1)
def nvrtc_version() -> str:
    major, minor = _nvrtc().getVersion()
    return f"{major}.{minor}"


def _candidate_include_dirs():
    if os.environ.get("QNB_CUDA_INCLUDE"):  # an explicit choice wins
        yield os.environ["QNB_CUDA_INCLUDE"]
    for entry in sys.path:
        for cuda_major in ("cu13", "cu12"):
            yield os.path.join(entry or ".", "nvidia", cuda_major, "include")
    for var in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(var):
            yield os.path.join(os.environ[var], "include")
    yield "/usr/local/cuda/include"


_HEADERS = ("cuda_fp16.h", os.path.join("crt", "mma.h"))


@functools.lru_cache(maxsize=1)
def include_dirs() -> tuple[str, ...]:
    """The ``-I`` directories for NVRTC: the first that holds both ``cuda_fp16.h`` and
    ``crt/mma.h`` (one CUDA release), else the first holding each. ``$QNB_CUDA_INCLUDE``
    overrides the search.

    Raises BackendError naming the wheels to install when a header is missing.
    """
    first: dict[str, str] = {}
    for directory in dict.fromkeys(_candidate_include_dirs()):
        present = [h for h in _HEADERS if os.path.isfile(os.path.join(directory, h))]
        if len(present) == len(_HEADERS):
            return (os.path.abspath(directory),)
        for header in present:
            first.setdefault(header, os.path.abspath(directory))
    missing = [h for h in _HEADERS if h not in first]
    if missing:
        raise BackendError(
            f"CUDA headers not found ({', '.join(missing)}); NVRTC needs them: "
            "pip install 'nvidia-cuda-runtime==13.0.*' 'nvidia-cuda-crt==13.0.*' "
            "(or set QNB_CUDA_INCLUDE to a CUDA include directory)"
        )
    return tuple(dict.fromkeys(first[h] for h in _HEADERS))


def nvrtc_options(arch: str, options: Options) -> list[str]:
    """NVRTC's command line for ``arch`` ("sm_90", or "compute_90" for PTX only)."""
    args = [f"-arch={arch}", "-std=c++17", "-default-device"]
    args += [f"-I{d}" for d in include_dirs()]
    if options.fast_math:
        args.append("--use_fast_math")
    if options.debug:
        args.append("-lineinfo")
    return args


def nvrtc_compile(
    source: str, arch: str, options: Options = Options(), name: str = "qnb_kernel.cu"
) -> tuple[bytes | None, str, str]:
    """Compile CUDA C++ with NVRTC: (cubin or None for a ``compute_`` arch, PTX, log).

    Needs no GPU and no driver. A compiler error raises CompileError with the log;
    ``ir_loc`` is set where the log names a ``#line`` location (see ``line_file``).
    """
    nvrtc = _nvrtc()
    program = nvrtc.createProgram(source, name, [], [])
    try:
        try:
            nvrtc.compileProgram(program, nvrtc_options(arch, options))
        except nvrtc.NVRTCError:
            raise compile_error(nvrtc.getProgramLog(program), source) from None
        log = nvrtc.getProgramLog(program)
        ptx = nvrtc.getPTX(program)
        ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
        cubin = nvrtc.getCUBIN(program) if arch.startswith("sm_") else None
        return cubin, ptx.rstrip("\x00"), log
    finally:
        nvrtc.destroyProgram(program)


_LOG_LOCATION = re.compile(r"(qnb-kernel|qnb-unit(\d+))\((\d+)\): (error|catastrophic error)")


def compile_error(log: str, source: str) -> CompileError:
    """A CompileError for an NVRTC log; ``ir_loc`` points at the first error's IR line."""
    from qnb.ir import Loc

    log = log.decode() if isinstance(log, bytes) else log
    log = log.rstrip("\x00").strip()
    match = _LOG_LOCATION.search(log)
    first = next((line for line in log.splitlines() if "error" in line), log[:200])
    error = CompileError(f"NVRTC rejected the generated CUDA code: {first.strip()}", log=log)
    if match:
        unit = int(match.group(2) or 0)
        loc = Loc(unit, int(match.group(3)))
        error.ir_loc = loc
        error.generated_line = _generated_line_for(source, loc)
    return error


def _generated_line_for(source: str, loc) -> str | None:
    """The first generated line that the ``#line`` directives attribute to ``loc``."""
    from qnb.backends.cuda_render import line_file

    current = None
    for text in source.splitlines():
        directive = re.match(r'\s*#line (\d+) "([^"]+)"', text)
        if directive:
            current = (directive.group(2), int(directive.group(1)))
            continue
        if current == (line_file(loc.unit), loc.line) and text.strip():
            return text
        if current is not None:
            current = (current[0], current[1] + 1)
    return None


# --------------------------------------------------------------------------- device


NO_DRIVER_OR_GPU = "no NVIDIA driver/GPU found"


def _driver_installed() -> bool:
    """Whether the NVIDIA driver's library (libcuda) can be loaded."""
    import ctypes

    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll", "libcuda.dylib"):
        try:
            ctypes.CDLL(name)
        except OSError:
            continue
        return True
    return False


def _no_device_reason(exc: Exception) -> str:
    """Why the CUDA runtime found no device, in words a user can act on: without a
    driver the runtime says "CUDA driver version is insufficient", which would send the
    user to upgrade a driver that is not there."""
    text = str(exc)
    if not _driver_installed() or "NoDevice" in text:  # (also CUDA_VISIBLE_DEVICES="")
        return NO_DRIVER_OR_GPU
    if "InsufficientDriver" in text:
        return f"the NVIDIA driver is older than this CUDA runtime needs ({text})"
    return f"{NO_DRIVER_OR_GPU} ({text})"


@functools.lru_cache(maxsize=1)
def _device_probe() -> tuple[str | None, str | None, str | None]:
    """(arch like "sm_90", device name, reason unavailable): probed once per process."""
    try:
        cupy = _import_cupy()
        _nvrtc()
        include_dirs()
    except BackendError as exc:
        return None, None, exc.message
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # cudaErrorInsufficientDriver / NoDevice on a machine w/o GPU
        return None, None, _no_device_reason(exc)
    if count < 1:
        return None, None, NO_DRIVER_OR_GPU
    device = cupy.cuda.Device()
    name = cupy.cuda.runtime.getDeviceProperties(device.id)["name"]
    name = name.decode() if isinstance(name, bytes) else str(name)
    return f"sm_{device.compute_capability}", name, None


def parameter_bytes(abi: list[dict]) -> int:
    """The bytes a kernel's parameters take, laid out as C lays out its arguments: an
    array's pointer (8) and one ``int`` per dimension, each scalar in its C type, then
    the grid's three ints; each value aligned to its size."""
    sizes = []
    for entry in abi:
        if entry["kind"] == "array":
            sizes += [8] + [4] * entry["ndim"]
        else:
            from qnb.backends.cuda_render import SCALAR_ABI

            sizes.append(_C_SIZES[SCALAR_ABI[entry["dtype"]].c_type])
    offset = 0
    for size in [*sizes, 4, 4, 4]:
        offset = -(-offset // size) * size + size
    return offset


def parameter_space(arch: str, nvrtc: tuple[int, int] | None) -> int:
    """The parameter space a kernel for ``arch`` ("sm_90", "compute_80") may use, built
    by NVRTC ``nvrtc`` ((major, minor); None: a current one)."""
    number = int(arch.split("_")[1])
    modern = nvrtc is None or tuple(nvrtc) >= (12, 1)
    return LARGE_PARAMETER_SPACE if modern and number >= 70 else PARAMETER_SPACE


def check_parameter_space(name: str, abi: list[dict], arch: str, nvrtc=None) -> None:
    """BackendError, naming the limit, for a kernel whose parameters do not fit."""
    used, limit = parameter_bytes(abi), parameter_space(arch, nvrtc)
    if used > limit:
        arrays = sum(entry["kind"] == "array" for entry in abi)
        raise BackendError(
            f"kernel {name!r} passes {used} bytes of parameters ({arrays} arrays, each a "
            f"pointer and its shape, and {len(abi) - arrays} scalars), past CUDA's "
            f"parameter space of {limit} bytes for {arch}: pass fewer arrays (stack "
            "several into one), or use the cpu backend"
        )


def _compile_arch(device_arch: str) -> str:
    """The NVRTC target for a device: its own sm_XX, or PTX for the newest arch NVRTC
    knows when the device is newer than this NVRTC (the driver then compiles the PTX)."""
    supported = _nvrtc().getSupportedArchs()
    number = int(device_arch[3:])
    if number in supported:
        return device_arch
    older = [a for a in supported if a <= number]
    return f"compute_{max(older) if older else min(supported)}"


# --------------------------------------------------------------------------- arrays


class CudaDeviceArray(DeviceArray):
    """A ``qnb.DeviceArray`` on the cuda backend: a thin wrapper of a CuPy array."""

    backend_name = "cuda"

    def __init__(self, data):
        super().__init__(data.shape, data.dtype)
        self.data = data

    def numpy(self):
        return self.data.get()


# Words in a CUDA error after which the context is lost (every later call fails too).
_STICKY = ("illegal", "ILLEGAL", "LaunchFailure", "LAUNCH_FAILED", "isaligned", "MISALIGNED")


def gpu_error(exc: Exception, kernel_name: str | None, when: str) -> Exception:
    """qnb's ``BackendError`` for what CuPy raised ``when`` … a kernel (e.g. "launching"):
    out of GPU memory (CuPy's ``OutOfMemoryError``, a ``MemoryError``), or an error the
    driver or runtime reported, which for a kernel's own fault (an illegal address)
    arrives asynchronously, at the next copy or synchronisation, and leaves the context
    unusable. Anything else is returned unchanged (the caller re-raises it)."""
    what = "the kernels" if kernel_name is None else f"kernel {kernel_name!r}"
    if isinstance(exc, MemoryError):
        return BackendError(
            f"out of GPU memory {when} {what}: {exc} Free device arrays (del them; "
            "cupy.get_default_memory_pool().free_all_blocks()) or launch on less data"
        )
    if type(exc).__name__ not in ("CUDADriverError", "CUDARuntimeError"):
        return exc
    text = str(exc)
    message = f"the GPU reported an error {when} {what}: {text}"
    if any(word in text for word in _STICKY):
        message += (
            " (CUDA reports a kernel's own fault at the next copy or synchronisation, so "
            "it may be an earlier launch's; it leaves this process's CUDA context "
            "unusable: restart the Python process before the next launch)"
        )
    return BackendError(message)


def dispatch(grid: tuple[int, int, int], programs_per_block: int = 1) -> tuple[int, int, int]:
    """The blocks to launch for a grid of programs: the grid itself within CUDA's limits,
    else (past 65535 programs on y or z) all its programs in a row on x; the kernel
    recovers each program's ids from the grid it is passed. A solo kernel (several
    programs per block, one per thread) always runs its programs in a row on x."""
    total = grid[0] * grid[1] * grid[2]
    if programs_per_block > 1:
        blocks = -(-total // programs_per_block)
        if blocks > _MAX_GRID[0]:
            raise BackendError(
                f"grid {grid} has {total} programs; CUDA launches at most "
                f"{_MAX_GRID[0] * programs_per_block} of this kernel's"
            )
        return (blocks, 1, 1)
    if all(g <= limit for g, limit in zip(grid, _MAX_GRID)):
        return grid
    if total > _MAX_GRID[0]:
        raise BackendError(
            f"grid {grid} has {total} programs; CUDA launches at most {_MAX_GRID[0]} "
            f"(and {_MAX_GRID[1]} on y and z unless the whole grid fits on x)"
        )
    return (total, 1, 1)


class ArrayArgument(NamedTuple):
    """What a launch needs of an array parameter: the NumPy dtype and ndim it must have,
    and whether the kernel stores to it (then it is copied back)."""

    name: str
    dtype: np.dtype
    ndim: int
    stored: bool


class ScalarArgument(NamedTuple):
    """What a launch needs of a scalar parameter: the NumPy scalar type it is passed as."""

    name: str
    pass_as: type


def _argument_plan(abi: list[dict]) -> list[ArrayArgument | ScalarArgument]:
    """Per parameter (the ABI's order), what a launch needs, worked out once per loaded
    kernel."""
    from qnb.dtypes import as_dtype

    plan = []
    for entry in abi:
        if entry["kind"] == "array":
            dtype = as_dtype(entry["dtype"]).numpy
            plan.append(
                ArrayArgument(entry["name"], dtype, entry["ndim"], bool(entry.get("stored")))
            )
        else:
            plan.append(ScalarArgument(entry["name"], np.dtype(entry["pass_as"]).type))
    return plan


def _device_view(value):
    """A bf16 array's bits travel as uint16 (a dtype maps likewise): CuPy before 14 has
    no bfloat16, and the kernel's ABI takes the bits either way."""
    if isinstance(value, np.dtype):
        return np.dtype(np.uint16) if value.name == "bfloat16" else value
    return value.view(np.uint16) if value.dtype.name == "bfloat16" else value


def check_array_kind(name: str, array, dtype, ndim: int) -> None:
    """The array an ABI entry expects: its NumPy ``dtype`` and ``ndim``."""
    if array.dtype != dtype or array.ndim != ndim:
        raise argument_error(
            QnbTypeError,
            name,
            f"parameter {name!r}: expected a {ndim}-D {dtype} array, got "
            f"{array.ndim}-D {array.dtype}",
        )


class _Words:
    """The kernel's ``int`` parameters for a shape or a grid, made once per distinct
    tuple (a launch is on the fast path: NumPy scalars cost ~0.15 µs each to make)."""

    def __init__(self):
        self.made: dict[tuple, tuple] = {}

    def __call__(self, name: str | None, shape: tuple) -> tuple:
        words = self.made.get(shape)
        if words is None:
            if name is not None:
                check_dims(name, shape)  # (only a shape that passed is kept)
            if len(self.made) > 256:
                self.made.clear()
            words = self.made[shape] = tuple(np.int32(n) for n in shape)
        return words


def _copy_back(host: np.ndarray, device) -> None:
    _device_view(host)[...] = device.get()


def _launch_arguments(
    plan: list[ArrayArgument | ScalarArgument], args: list, cupy, words: _Words
) -> tuple:
    """CuPy launch arguments for ``args``, and the launch's :class:`HostArrays` (to write
    back after it ran)."""
    values = []
    host = HostArrays(
        "cuda",
        lambda name, value: cupy.asarray(_device_view(np.ascontiguousarray(value))),
        _copy_back,
    )
    for step, value in zip(plan, args):
        if type(step) is ScalarArgument:
            values.append(step.pass_as(value))
            continue
        name = step.name
        if isinstance(value, cupy.ndarray):
            # CuPy 14 has bfloat16; the kernel takes a bf16 array's bits, as uint16
            device = value.view(np.uint16) if value.dtype.name == "bfloat16" else value
        elif isinstance(value, CudaDeviceArray):
            device = value.data
        elif isinstance(value, np.ndarray):
            check_dims(name, value.shape)  # before a copy of a huge array
            device = host.add(name, value, step.stored)
        elif isinstance(value, DeviceArray):
            raise argument_error(
                BackendError,
                name,
                f"parameter {name!r} is a DeviceArray of the "
                f"{value.backend_name!r} backend; the cuda backend needs its own "
                "(qnb.to_device under the cuda backend) or a NumPy/CuPy array",
            )
        else:
            raise argument_error(
                QnbTypeError,
                name,
                f"parameter {name!r}: cannot pass {type(value).__name__} to the cuda backend",
            )
        if device.dtype != _device_view(step.dtype) or device.ndim != step.ndim:
            check_array_kind(name, device, _device_view(step.dtype), step.ndim)
        if not device.flags.c_contiguous:
            raise argument_error(
                QnbTypeError,
                name,
                f"parameter {name!r} is not C-contiguous; pass cupy.ascontiguousarray(x)",
            )
        values.append(device)
        values += words(name, device.shape)
    host.check()
    return values, host


# --------------------------------------------------------------------------- backend


class CudaBackend(Backend):
    """CUDA C++ through NVRTC and CuPy (see the module docstring)."""

    name = "cuda"
    language = "cuda"

    def info(self) -> BackendInfo:
        arch, device, reason = _device_probe()
        if reason is not None:
            return BackendInfo(self.name, False, "none", reason)
        return BackendInfo(self.name, True, f"{device} ({arch})")

    def device_arch(self) -> str:
        arch, _, reason = _device_probe()
        if arch is None:
            raise BackendError(f"backend 'cuda' is not available: {reason}")
        return arch

    def key_components(self) -> tuple[dict, dict]:
        arch, device, _ = _device_probe()
        backend = {"name": self.name, "arch": arch or "none", "device": device or "none"}
        compiler = {"nvrtc": _safe(nvrtc_version), "cupy": _safe(_cupy_version), "std": "c++17"}
        compiler["prelude"] = prelude_digest()  # the .cuh bytes: an edit is a miss
        return backend, compiler

    # rendering needs no device and no compiler
    def render(self, ir: KernelIR, options: Options = Options()) -> str:
        from qnb.backends.cuda_render import render_cuda

        return render_cuda(ir, options).text

    def compile(self, ir: KernelIR, options: Options = Options()) -> Artifact:
        return self.compile_for_arch(ir, options, _compile_arch(self.device_arch()))

    def compile_for_arch(
        self, ir: KernelIR, options: Options = Options(), arch: str = "sm_90"
    ) -> Artifact:
        """Render and compile for an explicit arch; works on a machine with no GPU."""
        from qnb.backends.cuda_render import render_cuda

        rendered = render_cuda(ir, options)
        check_parameter_space(ir.name, rendered.abi, arch, _nvrtc().getVersion())
        cubin, ptx, log = nvrtc_compile(rendered.text, arch, options, name=f"{rendered.entry}.cu")
        text = {
            "language": "cuda",
            "source": rendered.text,
            "entry": rendered.entry,
            "kernel": ir.name,
            "arch": arch,
            "ptx": ptx,
            "abi": rendered.abi,
            "line_map": rendered.line_map,
            "threads": rendered.threads,
            "programs_per_block": rendered.programs_per_block,
            "nvrtc": nvrtc_version(),
            "log": log.rstrip("\x00") if isinstance(log, str) else "",
        }
        return Artifact(text=text, binary=cubin)

    def load(self, artifact: Artifact) -> Launcher:
        cupy = _import_cupy()
        from cupy.cuda import function

        _make_context_current(cupy)  # the driver API below needs a current context
        module = function.Module()
        try:
            if artifact.binary is not None:
                module.load(bytes(artifact.binary))
            else:  # PTX only: the driver compiles it
                module.load(artifact.text["ptx"].encode() + b"\0")
            kernel = module.get_function(artifact.text["entry"])
        except Exception as exc:  # CUDADriverError: wrong arch, driver too old, ...
            raise BackendError(
                f"the CUDA driver cannot load this kernel (built for "
                f"{artifact.text.get('arch')}, NVRTC "
                f"{artifact.text.get('nvrtc')}): {exc}"
            ) from None
        plan = _argument_plan(artifact.text["abi"])
        block = (int(artifact.text["threads"]), 1, 1)
        per_block = int(artifact.text["programs_per_block"])
        # What a launch shares with others (threads may launch it at once): these two
        # memos, each a dict whose entries are made whole before they are stored (a
        # thread sees an entry or none), and the module. Everything else is the launch's
        # own: its argument list, its host copies, its stream (CuPy's current one is per
        # thread).
        words = _Words()
        blocks_for: dict[tuple, tuple] = {}  # grid -> blocks, for the grids seen so far
        name = artifact.text.get("kernel", artifact.text["entry"])

        def launch(grid: tuple[int, int, int], args: list) -> None:
            if not _thread.has_context:
                _make_context_current(cupy)
            if len(grid) != 3:
                grid = tuple(grid) + (1,) * (3 - len(grid))
            blocks = blocks_for.get(grid)
            if blocks is None:
                if len(blocks_for) > 256:
                    blocks_for.clear()
                blocks = blocks_for[grid] = dispatch(tuple(int(g) for g in grid), per_block)
            try:
                values, host = _launch_arguments(plan, args, cupy, words)
            except (MemoryError, RuntimeError) as exc:
                raise gpu_error(exc, name, "copying the arguments of") from None
            values += words(None, grid)  # the kernel's q_grid_x/y/z
            if min(grid) > 0:
                try:
                    kernel(blocks, block, values)
                except (MemoryError, RuntimeError) as exc:
                    raise gpu_error(exc, name, "launching") from None
            try:
                host.write_back()
            except (MemoryError, RuntimeError) as exc:
                raise gpu_error(exc, name, "copying back the results of") from None

        launch.module = module  # keeps the module alive with the launcher
        return launch

    def synchronize(self) -> None:
        cupy = sys.modules.get("cupy")
        if cupy is not None and _device_probe()[0] is not None:
            try:
                cupy.cuda.runtime.deviceSynchronize()
            except (MemoryError, RuntimeError) as exc:
                raise gpu_error(exc, None, "waiting for") from None

    def to_device(self, array) -> CudaDeviceArray:
        cupy = _import_cupy()
        self.device_arch()
        return CudaDeviceArray(cupy.ascontiguousarray(cupy.asarray(array)))


class _Thread(threading.local):
    has_context = False  # whether this thread has made the device's context current


_thread = _Thread()


def _make_context_current(cupy) -> None:
    """Make the device's primary context current in this thread. A launch goes through
    the driver API, which runs in the context current in the calling thread; a thread that
    has called no runtime function yet (all its arrays on the device already, none copied)
    has none (cupy/cupy#72). ``cudaFree(0)`` makes it current, as at ``load``."""
    cupy.cuda.runtime.free(0)
    _thread.has_context = True


def _cupy_version() -> str:
    return _import_cupy().__version__


def _safe(fn) -> str:
    try:
        return fn()
    except BackendError:
        return "missing"


__all__ = [
    "CudaBackend",
    "CudaDeviceArray",
    "compile_error",
    "include_dirs",
    "nvrtc_compile",
    "nvrtc_version",
]
