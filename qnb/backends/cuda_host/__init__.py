"""The "cuda-host" backend: the CUDA C++ a kernel becomes, compiled by g++ and run on the CPU.

A way to run, and read, what the cuda backend would run on an NVIDIA GPU on a machine
without one. It renders exactly what the cuda backend renders (``cuda_render.render_cuda``)
and passes the arguments by the same ABI, then compiles the text with the host's C++
compiler against ``qnb_cuda_host.h``, a host model of CUDA's execution: a block's threads
are fibers meeting at ``__syncthreads``, ``__shared__`` is per block, WMMA's 16×16×16
product computes in float. It checks the generated code's logic (indexing, guards,
barriers, exchanges, f16/bf16 rounding, the launch ABI), never speed: it is much slower
than the cpu backend, and "auto" never picks it. It says nothing of the GPU's memory
model, of NVRTC, or of CUDA's math-library ulps.

Each array argument is copied into a buffer with guard bytes on both sides; a launch that
writes outside an array raises ``BackendError`` naming the parameter. Launches from
several threads run at once, each on its own host thread's blocks (the model's state is
per thread).

The kernel cache holds the source, never host code; the library built from it is kept
beside the cache and loaded only when its bytes are the ones recorded at compile time
(see :mod:`qnb.backends.cuda_host.build`).
"""

from __future__ import annotations

import ctypes

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
from qnb.backends.cuda import (
    ScalarArgument,
    _argument_plan,
    check_array_kind,
    check_parameter_space,
    dispatch,
)
from qnb.backends.cuda_host import build
from qnb.backends.cuda_prelude import prelude_digest
from qnb.backends.cuda_render import SCALAR_ABI, CudaRenderer, render_cuda
from qnb.backends.host_arrays import HostArrays
from qnb.dtypes import as_dtype
from qnb.errors import BackendError, QnbTypeError
from qnb.ir import KernelIR

GUARD = 64  # bytes of guard pattern on each side of every array
GUARD_BYTE = 0xA5
# The parameter space cuda-host allows: a current GPU's (CUDA 12.1+ on Volta or newer), so
# a kernel that runs here also fits there.
PARAMETER_SPACE_ARCH = "sm_90"


def c_param_types(abi: list[dict]) -> list[str]:
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


def host_text(text: dict) -> str:
    """An artifact's kernel with its host entry point: what its library is built from."""
    entry = build.host_entry(
        text["entry"], c_param_types(text["abi"]), text["threads"], build.ENTRY
    )
    return text["source"] + entry


class HostDeviceArray(DeviceArray):
    """``qnb.to_device`` under cuda-host: the array stays in host memory."""

    backend_name = "cuda-host"

    def __init__(self, data: np.ndarray):
        super().__init__(data.shape, data.dtype)
        self.data = data

    def numpy(self):
        return self.data.copy()


class Guarded:
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
        if (self.raw[:GUARD] != GUARD_BYTE).any() or (self.raw[-GUARD:] != GUARD_BYTE).any():
            raise BackendError(
                f"the kernel wrote outside array parameter {self.name!r} (cuda-host's guard "
                "bytes changed): a bug of qnb's generated code, please report it"
            )


def _copy_back(host: np.ndarray, buffer: Guarded) -> None:
    host[...] = buffer.view


class CudaHostBackend(Backend):
    """The cuda backend's code on the host (see the module docstring)."""

    name = "cuda-host"
    language = "cuda"

    def info(self) -> BackendInfo:
        cxx, why = build.compiler()
        if cxx is None:
            return BackendInfo(self.name, False, "none", why)
        return BackendInfo(self.name, True, f"CUDA C++ on the CPU ({why})")

    def key_components(self) -> tuple[dict, dict]:
        identity = build.compiler()[1]
        backend = {"name": self.name, "emulation": build.emulation_digest(), "cxx": identity}
        flags = " ".join(build.CXXFLAGS)
        return backend, {"cxx": identity, "flags": flags, "prelude": prelude_digest()}

    def render(self, ir: KernelIR, options: Options = Options()) -> str:
        return render_cuda(ir, options).text

    def compile(self, ir: KernelIR, options: Options = Options()) -> Artifact:
        rendered, text = self.rendered(ir, options)
        text["library"] = build.build(host_text(text), rendered.entry).as_json()
        return Artifact(text=text)

    @staticmethod
    def rendered(ir: KernelIR, options: Options) -> tuple:
        """The CUDA C++ of ``ir`` (its parameter space checked as cuda's is) and the
        artifact text that describes it, before the library is built."""
        rendered = render_cuda(ir, options)
        check_parameter_space(ir.name, rendered.abi, PARAMETER_SPACE_ARCH)
        text = {
            "source": rendered.text,
            "entry": rendered.entry,
            "abi": rendered.abi,
            "threads": rendered.threads,
            "programs_per_block": rendered.programs_per_block,
        }
        return rendered, text

    def load(self, artifact: Artifact) -> Launcher:
        text = artifact.text
        library = build.Library(**text["library"]) if "library" in text else None
        if library is None:  # (a hand-made artifact: built now)
            library = build.build(host_text(text), text["entry"])
        entry = build.load(library, host_text(text), text["entry"])
        entry.argtypes = [
            ctypes.POINTER(ctypes.c_uint),
            ctypes.POINTER(ctypes.c_uint),
            ctypes.POINTER(ctypes.c_void_p),
        ]
        entry.restype = ctypes.c_long
        return _launcher(entry, _argument_plan(text["abi"]), int(text["programs_per_block"]))

    def to_device(self, array) -> HostDeviceArray:
        return HostDeviceArray(np.ascontiguousarray(np.asarray(array)).copy())


def _launcher(entry, plan: list, per_block: int) -> Launcher:
    """``launch(grid, args)`` of a loaded kernel: everything it makes is its own (the
    guarded copies, the argument words), so threads may launch it at once."""

    def launch(grid: tuple[int, int, int], args: list) -> None:
        grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
        keep, guarded = [], []

        def guard(name: str, host: np.ndarray) -> Guarded:
            guarded.append(Guarded(name, host))
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
                    f"parameter {name!r}: cannot pass {type(value).__name__} to the cuda-host "
                    "backend (pass a NumPy array or qnb.to_device(x))",
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


__all__ = ["CudaHostBackend", "HostDeviceArray"]
