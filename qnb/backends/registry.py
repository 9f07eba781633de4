"""Backend registry and the backend choice (the one piece of global state besides the cache).

Backends are imported lazily: ``import qnb`` imports no backend module, and
``qnb.backends()`` probes each one the first time it is asked.
"""

from __future__ import annotations

import contextlib
import importlib
import threading

from qnb.backends.base import Backend, BackendInfo
from qnb.errors import BackendError, public

# name -> "module:Class", in the order ``qnb.backends()`` lists them.
_REGISTRY = {
    "cuda": "qnb.backends.cuda:CudaBackend",
    "wgpu": "qnb.backends.wgpu:WgpuBackend",
    "cpu": "qnb.backends.cpu.backend:CpuBackend",
    # the CUDA C++ run on the CPU through g++: to run and read it without a GPU
    "cuda-host": "qnb.backends.cuda_host:CudaHostBackend",
}
NAMES = tuple(_REGISTRY)
# What "auto" tries, in order: never cuda-host, which is slower than cpu by far.
AUTO_ORDER = ("cuda", "wgpu", "cpu")

_instances: dict[str, Backend] = {}
_lock = threading.Lock()


class _State(threading.local):
    override: str | None = None  # set by ``with qnb.backend(...)`` in this thread


_state = _State()
_default = ["auto"]


def check_name(name) -> None:
    """Raise BackendError unless ``name`` names a backend or is "auto"."""
    if name != "auto" and name not in _REGISTRY:
        raise BackendError(f"unknown backend {name!r}; choose one of {', '.join(NAMES)} or 'auto'")


def get(name: str) -> Backend:
    """The backend object named ``name`` (not "auto"); raises BackendError if unknown."""
    if name not in _REGISTRY:
        check_name(name)
    with _lock:
        if name not in _instances:
            module_name, class_name = _REGISTRY[name].split(":")
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:  # a backend whose module cannot import is unavailable
                _instances[name] = _Missing(name, f"cannot import {module_name}: {exc}")
            else:
                _instances[name] = getattr(module, class_name)()
        return _instances[name]


class _Missing(Backend):
    def __init__(self, name, reason):
        self.name, self._reason = name, reason

    def info(self) -> BackendInfo:
        return BackendInfo(self.name, False, "none", self._reason)


def backends() -> list[BackendInfo]:
    """One record per backend: name, available, device, reason (contract)."""
    return [get(name).info() for name in NAMES]


_auto_choice: list[str] = []


def _auto() -> str:
    # Backends do not appear or vanish within a process: probe once, then remember.
    if not _auto_choice:
        _auto_choice.append(_probe_auto())
    return _auto_choice[0]


def _probe_auto() -> str:
    for name in AUTO_ORDER:
        info = get(name).info()
        if not info.available:
            continue
        if name == "wgpu" and getattr(get(name), "is_software", lambda: False)():
            continue  # a CPU Vulkan driver is slower than NumPy: auto prefers cpu then
        return name
    return "cpu"


def current_name() -> str:
    """The backend a launch uses now, with "auto" resolved (on every launch: kept cheap)."""
    name = _state.override or _default[0]
    if name != "auto":
        return name
    return _auto_choice[0] if _auto_choice else _auto()


@public
def set_backend(name: str) -> None:
    """Choose the default backend: "cpu", "wgpu", "cuda", "cuda-host" or "auto" (contract)."""
    if name != "auto":
        _start_early(get(name))  # unknown names raise here
    _default[0] = name


@public
def backend(name: str):
    """``with qnb.backend("wgpu"):`` runs the block on that backend (contract). An unknown
    name raises here, at the ``with`` line, not inside the context manager's machinery."""
    if name != "auto":
        _start_early(get(name))
    return _chosen(name)


def _start_early(chosen: Backend) -> None:
    """A backend chosen now is launched soon: one whose device takes seconds to make
    (wgpu: ``start_early``) starts making it on a thread meanwhile."""
    start = getattr(chosen, "start_early", None)
    if start is not None:
        start()


@contextlib.contextmanager
def _chosen(name: str):
    previous = _state.override
    _state.override = name
    try:
        yield
    finally:
        _state.override = previous


def require(name: str) -> Backend:
    """The named backend, or BackendError saying why it is unavailable."""
    chosen = get(name)
    info = chosen.info()
    if not info.available:
        raise BackendError(f"backend {name!r} is not available: {info.reason}")
    return chosen
