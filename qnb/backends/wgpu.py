"""The "wgpu" backend: WGSL rendered from the IR, run with wgpu-py on any adapter.

On a machine without a GPU the adapter is Mesa's lavapipe (a CPU Vulkan driver),
so the whole path (naga validation, pipelines, dispatch) runs and is tested there.

Runtime representation (see :mod:`qnb.backends.wgsl`): one storage buffer per
array parameter (bool arrays as u32 words), one uniform buffer with the scalar
parameters and array shapes. One process-wide device; shader modules, bind-group
layouts and pipelines are cached per WGSL text (the last ``MAX_PIPELINES``), bind
groups per buffer set. Launching (the arguments' buffers, the staging pool, threads,
the loop-budget report) is :mod:`qnb.backends.wgpu_launch`.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import pathlib
import re
import stat
import sys
import tempfile
import threading

import numpy as np

from qnb.backends.base import (
    Artifact,
    Backend,
    BackendInfo,
    Options,
)
from qnb.backends.wgpu_cffi import (
    WGPU_NATIVE_C_TYPES,
    import_wgpu_native,
    parse_c_types_at_once,
)
from qnb.backends.wgpu_launch import (  # noqa: F401 - _dispatch, _StagingPool: tests
    MAX_WORKGROUPS,
    WgpuDeviceArray,
    _BudgetWords,
    _check_fits,
    _dispatch,
    _Launcher,
    _new_buffer,
    _pad_bytes,
    _StagingPool,
    _storage_bytes,
    _uniform_bytes,
)
from qnb.backends.wgsl import WgslRenderer
from qnb.dtypes import as_dtype
from qnb.errors import BackendError, CompileError, QnbTypeError
from qnb.ir import KernelIR, Loc

MAX_PIPELINES = 256  # shader modules and pipelines kept per device, least recently used out
# Drivers that end a program's loops after a number of iterations in all, by a word of the
# adapter's device name (lower case) → that number. llvmpipe (Mesa's lavapipe) counts
# every pass of every loop of an invocation, the last pass of each loop too, in one
# budget that the invocations of one SIMD group share, and leaves the loop it is in at
# the back edge where it runs out (and every later loop after one pass), silently. A
# loop Mesa unrolls (a small constant trip count) counts nothing. The generated code then
# watches for a cut (wgsl.py) and the launch raises BackendError.
LOOP_BUDGETS = {"llvmpipe": 65535}


class _Device:
    """The process-wide adapter and device, made on first use."""

    def __init__(self):
        _private_runtime_dir()
        _driver_shader_cache()  # before the Vulkan driver loads: it reads the variable once
        import wgpu

        self.wgpu = wgpu
        with contextlib.suppress(ImportError):
            native = import_wgpu_native(_header_cache())
            parse_c_types_at_once(native.ffi, WGPU_NATIVE_C_TYPES)  # (known: a warm start)
        self.adapter = _request_adapter(wgpu)
        if self.adapter is None:
            raise BackendError("wgpu found no adapter")
        self.adapter_info = dict(self.adapter.info)
        self.loop_budget = loop_budget(self.adapter_info)
        self.has_f16 = "shader-f16" in self.adapter.features
        # shader-f16 is requested where the adapter has it, so one device serves
        # every kernel (and every DeviceArray) of the process.
        features = ["shader-f16"] if self.has_f16 else []
        # A device gets WebGPU's default limits unless it asks: ask for the largest
        # arrays the adapter can bind (the default is 128 MiB per storage binding).
        limits = {k: self.adapter.limits[k] for k in _SIZE_LIMITS if k in self.adapter.limits}
        self.device = self.adapter.request_device_sync(
            required_features=features, required_limits=limits
        )
        self.max_binding = int(self.device.limits["max-storage-buffer-binding-size"])
        self.queue = self.device.queue
        # 4 bytes to read back: a queue runs its work in order, so the read completes
        # after everything submitted before it (see WgpuBackend.synchronize).
        self.fence = self.device.create_buffer(size=4, usage=wgpu.BufferUsage.COPY_SRC)
        self.modules: collections.OrderedDict[str, object] = collections.OrderedDict()
        self.pipelines: collections.OrderedDict[str, tuple] = collections.OrderedDict()
        self.layouts: dict[tuple, tuple] = {}
        self.cache_lock = threading.RLock()  # modules, pipelines, layouts (threads compile)
        self.staging = _StagingPool(self)
        self.budget_words = _BudgetWords(self)


def loop_budget(adapter_info: dict) -> int | None:
    """The loop budget of an adapter's driver (``LOOP_BUDGETS``), or None."""
    name = str(adapter_info.get("device", "")).lower()
    return next((n for word, n in LOOP_BUDGETS.items() if word in name), None)


def _request_adapter(wgpu):
    """The adapter, from an instance of Vulkan alone on Linux where it has one.

    An instance of every backend (wgpu-py's default) also starts OpenGL through EGL: on
    lavapipe's machine the instance and the adapter take ~230 ms of every process, warm or
    cold, and ~120 ms with Vulkan alone (measured side by side under load); on Linux wgpu
    picks a Vulkan adapter over a GL one anyway.
    Where Vulkan finds none (no driver), the instance is made again with every backend, as
    without this. Left alone: ``WGPU_BACKEND_TYPE`` set, or an instance that exists
    already (wgpu-py used before qnb's device)."""
    restricted = _vulkan_only_instance()
    try:
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    except RuntimeError:  # "No suitable graphics adapter found"
        if not restricted:
            raise
        adapter = None
    if adapter is None and restricted:
        from wgpu.backends.wgpu_native import _helpers

        _helpers._the_instance = None  # (no adapter, device or surface holds it)
        adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    return adapter


def _vulkan_only_instance() -> bool:
    """Make wgpu-py's instance one of Vulkan alone (see :func:`_request_adapter`); False
    where it is left as it is."""
    if not sys.platform.startswith("linux") or os.environ.get("WGPU_BACKEND_TYPE", "").strip():
        return False
    try:
        from wgpu.backends.wgpu_native import _helpers, extras

        if _helpers._the_instance is not None:
            return False
        extras.set_instance_extras(backends=["Vulkan"])
    except Exception:  # noqa: BLE001 - another wgpu-py: its default instance, as before
        return False
    return True


def _private_runtime_dir() -> None:
    """Mesa's Vulkan drivers print "XDG_RUNTIME_DIR is invalid" on stderr when it is unset
    (as in containers and CI): give the process a private one, as a login session would."""
    current = os.environ.get("XDG_RUNTIME_DIR")
    if current and os.path.isdir(current) and os.access(current, os.W_OK):
        return
    from qnb.cleanup import remove_when_process_ends

    runtime = tempfile.mkdtemp(prefix="qnb-runtime-")  # mode 0700
    os.environ["XDG_RUNTIME_DIR"] = runtime
    remove_when_process_ends(runtime)  # nothing of a run may outlive it


DRIVER_CACHE = "driver-shader-cache"


# Mesa's own settings for its shader cache: where one is set (even to disable it), the
# user decided, and qnb leaves the driver alone.
_MESA_CACHE_SETTINGS = ("MESA_SHADER_CACHE_DIR", "MESA_SHADER_CACHE_DISABLE", "MESA_GLSL_CACHE_DIR")


def _driver_shader_cache() -> None:
    """Point Mesa's on-disk shader cache at a directory under qnb's cache, so a warm start
    skips the driver's shader compile too (wgpu-py has no pipeline cache to hand it), and
    a fresh ``QNB_CACHE_DIR`` starts cold for the driver as well. The kernel cache lists
    and clears only its own entries; this directory sits beside them. A Mesa setting the
    user made, or ``QNB_CACHE=0``, is left alone.

    The directory follows the kernel cache's trust rules (the driver loads what it finds
    there): it is used only under a usable (private) qnb cache directory, made 0o700, and
    refused, with one warning, where it is not a directory of ours that only we may
    write; then the driver keeps its own default."""
    if any(name in os.environ for name in _MESA_CACHE_SETTINGS):
        return
    path = _private_directory(DRIVER_CACHE, "not using {} for the Vulkan driver's shader cache")
    if path is not None:
        os.environ["MESA_SHADER_CACHE_DIR"] = str(path)


HEADER_CACHE = "wgpu-cffi-header"


def _header_cache() -> pathlib.Path | None:
    """The directory under qnb's cache that keeps cffi's parse of wgpu-py's C header
    (:func:`qnb.backends.wgpu_cffi.import_wgpu_native`), on the driver cache's trust
    rules; None (wgpu-py parses it, as without qnb) under ``QNB_CACHE=0`` or a cache
    directory qnb does not use."""
    return _private_directory(HEADER_CACHE, "not keeping wgpu-py's parsed C header in {}")


# What each directory of :func:`_private_directory` holds (what another account able to
# write there could plant): its refusals say so, not "kernels".
_HOLDS = {
    DRIVER_CACHE: "shader binaries for the Vulkan driver to load",
    HEADER_CACHE: "a parse of wgpu-py's C header for qnb to serve to cffi",
}


def _private_directory(name: str, refusal: str) -> pathlib.Path | None:
    """``name`` under a usable (private) qnb cache directory, on the trust rules of
    :func:`driver_cache_problem`; None under ``QNB_CACHE=0`` or an untrusted cache dir,
    and None with one warning (``refusal`` with the path, then why, worded for what the
    directory holds) where the directory is refused: a symbolic link (never followed, and
    said so), not a directory, another account's, or one group or others may write."""
    from qnb.cache import store

    root = store.usable_directory()  # None: QNB_CACHE=0, or an untrusted cache dir
    if root is None:
        return None
    path = root / name
    if path.is_symlink():
        why = "it is a symbolic link (qnb uses only a directory of its own there, never a link)"
    else:
        why = driver_cache_problem(path)
        if why is not None and why == store.refusal(path):  # the trust rules: say what it holds
            why = store.refusal(path, holds=_HOLDS.get(name, "files qnb reads"))
    if why is not None:
        store.warn(f"qnb: {refusal.format(path)}: {why}")
        return None
    return path


def driver_cache_problem(path: pathlib.Path) -> str | None:
    """Why ``path`` must not hold the driver's shader cache (creating it 0o700, and
    tightening our own to 0o700, where needed), or None."""
    from qnb.cache import store

    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        return f"cannot create it ({exc.strerror or exc})"
    try:
        info = os.lstat(path)
    except OSError as exc:
        return f"cannot check it ({exc.strerror or exc})"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a directory"
    why = store.refusal(path)  # owned by another user, or group/others may write
    if why is not None:
        return why
    if stat.S_IMODE(info.st_mode) != 0o700:
        try:
            os.chmod(path, 0o700)
        except OSError as exc:
            return f"cannot make it private ({exc.strerror or exc})"
    return None


def start_device_in_background() -> threading.Thread | None:
    """Create the process's device on a daemon thread (creating it parses wgpu-py's cffi
    types: a second or more), so that the first wgpu launch finds it made. A launch that
    comes first waits for it under the same lock; a failure is kept, as when a launch
    makes the device. Started by ``%load_ext qnb`` and by choosing wgpu
    (``qnb.set_backend("wgpu")``, ``with qnb.backend("wgpu"):``); ``QNB_EARLY_DEVICE=0``
    opts out. An exiting interpreter waits for a device being made (at most
    ``EARLY_DEVICE_EXIT_WAIT``). None where wgpu is not installed, the device exists or is
    being made."""
    import importlib.util

    if os.environ.get("QNB_EARLY_DEVICE", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    if "device" in _device_state or "error" in _device_state:
        return None
    with _early_lock:
        if _early_threads and _early_threads[-1].is_alive():
            return None  # one is making it already
        if importlib.util.find_spec("wgpu") is None:
            return None

        def make():
            with contextlib.suppress(BackendError):
                _get_device()

        thread = threading.Thread(target=make, name="qnb-wgpu-device", daemon=True)
        if not _early_threads:
            atexit.register(_wait_for_early_device)
        _early_threads[:] = [thread]
        thread.start()
    return thread


_early_lock = threading.Lock()
_early_threads: list[threading.Thread] = []
EARLY_DEVICE_EXIT_WAIT = 60.0  # seconds an exiting interpreter waits for a device being made


def _wait_for_early_device() -> None:
    """At interpreter exit, let a device being made finish first (the driver must not be
    torn down under it); a daemon thread never holds the exit up longer than this."""
    for thread in list(_early_threads):
        thread.join(EARLY_DEVICE_EXIT_WAIT)


_device_lock = threading.Lock()
_device_state: dict = {}


def _get_device() -> _Device:
    with _device_lock:
        if "device" not in _device_state:
            if "error" in _device_state:
                raise BackendError(_device_state["error"])
            try:
                _device_state["device"] = _Device()
            except Exception as exc:  # no wgpu, no adapter, no driver
                _device_state["error"] = f"{type(exc).__name__}: {exc}"
                raise BackendError(f"wgpu backend unavailable: {_device_state['error']}") from None
        return _device_state["device"]


_SIZE_LIMITS = (
    "max-storage-buffer-binding-size",
    "max-buffer-size",
    "max-compute-workgroup-storage-size",  # the exchanges of large tiles (wgsl.py)
)


def _check_bindings(dev: _Device, name: str, layout, budget_words: bool) -> None:
    """BackendError, naming the limit, for a kernel that binds more than the device
    allows: storage buffers (one per array, and a loop-budget build's words), bindings in
    all, or bytes of parameters (the uniform buffer)."""
    limits = dev.device.limits
    arrays = len(layout.arrays)
    storage = arrays + budget_words
    words = " and the words that report a loop cut short (LOOP_BUDGETS)" if budget_words else ""
    checks = [
        (
            storage,
            "max-storage-buffers-per-shader-stage",
            f"storage buffers ({arrays} arrays{words})",
        ),
        (
            storage + 1,
            "max-bindings-per-bind-group",
            "bindings (its storage buffers and parameters)",
        ),
        (
            _uniform_bytes(layout.words),
            "max-uniform-buffer-binding-size",
            "bytes of uniform buffer (its scalar parameters and array shapes)",
        ),
    ]
    for used, limit_name, what in checks:
        limit = int(limits.get(limit_name, used))
        if used > limit:
            raise BackendError(
                f"kernel {name!r} needs {used} {what}, but this wgpu device allows "
                f"{limit} ({limit_name} of adapter {dev.adapter_info.get('device')!r}): "
                "pass fewer arrays (stack several into one), or use the cpu or cuda backend"
            )


class WgpuBackend(Backend):
    name = "wgpu"
    language = "wgsl"
    renderer = WgslRenderer  # tests swap in a subclass to check error mapping

    def __init__(self):
        self._info: BackendInfo | None = None

    def start_early(self) -> None:
        """Chosen (``qnb.set_backend("wgpu")``): make the device on a thread meanwhile."""
        start_device_in_background()

    # ---- description

    def _dev(self) -> _Device:
        return _get_device()

    def info(self) -> BackendInfo:
        if self._info is None:
            try:
                dev = self._dev()
            except BackendError as exc:
                self._info = BackendInfo(self.name, False, "none", str(exc))
            else:
                a = dev.adapter_info
                device = f"{a.get('device', '?')} ({a.get('backend_type', '?')}, {a.get('adapter_type', '?')})"
                self._info = BackendInfo(self.name, True, device, None)
        return self._info

    def is_software(self) -> bool:
        """True for a CPU adapter (lavapipe / llvmpipe / SwiftShader)."""
        if not self.info().available:
            return False
        a = self._dev().adapter_info
        return a.get("adapter_type") == "CPU" or "llvmpipe" in str(a.get("device", "")).lower()

    def key_components(self) -> tuple[dict, dict]:
        import wgpu
        import wgpu.backends.wgpu_native as native

        dev = self._dev()
        a = dev.adapter_info
        backend = {
            "name": self.name,
            "adapter": a.get("device"),
            "vendor": a.get("vendor"),
            "vendor_id": a.get("vendor_id"),
            "device_id": a.get("device_id"),
            "driver": a.get("description"),
            "backend_type": a.get("backend_type"),
            "adapter_type": a.get("adapter_type"),
            "features": ["shader-f16"] if dev.has_f16 else [],
        }
        compiler = {"wgpu-py": wgpu.__version__, "wgpu-native": native.__version__}
        return backend, compiler

    # ---- rendering and compiling

    def render(self, ir: KernelIR, options: Options | None = None) -> str:
        return self.renderer(options).render(ir).source

    def compile(self, ir: KernelIR, options: Options | None = None) -> Artifact:
        dev = self._dev()
        renderer = self.renderer(options)
        renderer.loop_budget = dev.loop_budget
        rendered = renderer.render(ir)
        budget_binding = getattr(renderer, "loop_budget_binding", None)
        _check_bindings(dev, ir.name, rendered.layout, budget_binding is not None)
        storage = int(dev.device.limits["max-compute-workgroup-storage-size"])
        if rendered.layout.shared_bytes > storage:
            raise BackendError(
                f"kernel {ir.name!r} needs {rendered.layout.shared_bytes} bytes of workgroup "
                f"memory per program, past this adapter's limit of {storage}: use smaller "
                "tiles, or the cpu backend"
            )
        if rendered.uses_f16 and not dev.has_f16:
            raise BackendError(
                f"kernel {ir.name!r} uses f16 but the adapter "
                f"{dev.adapter_info.get('device')!r} lacks the shader-f16 feature; "
                "use f32, or the cpu or cuda backend"
            )
        artifact = Artifact(
            text={
                "name": ir.name,
                "wgsl": rendered.source,
                "entry": rendered.entry,
                "layout": rendered.layout.as_json(),
                "line_locs": [list(loc) if loc else None for loc in rendered.line_locs],
                "features": ["shader-f16"] if rendered.uses_f16 else [],
            }
        )
        if budget_binding is not None:
            artifact.text["loop_budget"] = {"binding": budget_binding, "limit": dev.loop_budget}
        _shader_module(dev, artifact)  # validate now, so errors surface at compile time
        return artifact

    def load(self, artifact: Artifact) -> _Launcher:
        dev = self._dev()
        return _Launcher(dev, artifact, _pipeline(dev, artifact))

    def synchronize(self) -> None:
        # (wgpu-py 0.32's queue.on_submitted_work_done_sync() raises a TypeError with its
        # bundled wgpu-native, pygfx/wgpu-py#834; a read back works with every version.)
        dev = _device_state.get("device")
        if dev is not None:  # no device yet: nothing was launched
            dev.queue.read_buffer(dev.fence, 0, 4)

    def to_device(self, array) -> WgpuDeviceArray:
        array = np.asarray(array)
        try:
            dtype = as_dtype(array.dtype)
        except TypeError as exc:
            raise QnbTypeError(f"cannot put this array on the wgpu device: {exc}") from None
        if dtype.name == "f64":
            raise QnbTypeError(
                "WGSL has no f64: convert with x.astype(numpy.float32), "
                "or use the cpu or cuda backend"
            )
        dev = self._dev()
        if dtype.name == "f16" and not dev.has_f16:
            raise QnbTypeError("this adapter has no shader-f16; convert to float32")
        _check_fits(dev, array)
        words = _storage_bytes(array)
        buffer = _new_buffer(dev, words.nbytes)
        if words.nbytes:
            dev.queue.write_buffer(buffer, 0, _pad_bytes(words))
        return WgpuDeviceArray(buffer, array.shape, array.dtype, dev)


# --------------------------------------------------------------------------- compile helpers

_LINE = re.compile(r"wgsl:(\d+):(\d+)")


def _shader_module(dev: _Device, artifact: Artifact):
    source = artifact.text["wgsl"]
    with dev.cache_lock:
        module = dev.modules.get(source)
        if module is not None:
            dev.modules.move_to_end(source)
            return module
        try:
            module = dev.device.create_shader_module(code=source)
        except Exception as exc:  # GPUValidationError: naga rejected the WGSL
            raise _compile_error(artifact, exc) from None
        _keep(dev.modules, source, module)
        return module


def _keep(cache: collections.OrderedDict, source: str, value) -> None:
    """``cache[source] = value``, dropping the least recently used beyond MAX_PIPELINES
    (a launcher keeps what it uses itself)."""
    cache[source] = value
    while len(cache) > MAX_PIPELINES:
        cache.popitem(last=False)


def _compile_error(artifact: Artifact, exc: Exception) -> CompileError:
    source = artifact.text["wgsl"].splitlines()
    log = str(exc)
    match = _LINE.search(log)
    generated, loc = None, None
    if match:
        index = int(match.group(1)) - 1
        if 0 <= index < len(source):
            generated = source[index]
            locs = artifact.text.get("line_locs") or []
            if index < len(locs) and locs[index]:
                loc = Loc(*locs[index])
    error = CompileError(
        f"the WGSL compiler (naga) rejected the code generated for kernel "
        f"{artifact.text.get('name')!r}:\n{_first_message(log)}",
        generated_line=generated,
        log=log,
    )
    error.ir_loc = loc
    return error


def _first_message(log: str) -> str:
    for line in log.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith(("Validation Error", "Caused by", "In wgpu")):
            return stripped
    return log.strip()


def _pipeline(dev: _Device, artifact: Artifact):
    """(pipeline, bind-group layout) for an artifact, cached per WGSL text."""
    source = artifact.text["wgsl"]
    with dev.cache_lock:
        cached = dev.pipelines.get(source)
        if cached is not None:
            dev.pipelines.move_to_end(source)
            return cached
        return _new_pipeline(dev, artifact)


def _new_pipeline(dev: _Device, artifact: Artifact):
    source = artifact.text["wgsl"]
    wgpu = dev.wgpu
    # the arrays (storage), the parameters (uniform), and a loop-budget build's words
    shape = (len(artifact.text["layout"]["arrays"]), "loop_budget" in artifact.text)
    if shape not in dev.layouts:
        kinds = [wgpu.BufferBindingType.storage] * shape[0] + [wgpu.BufferBindingType.uniform]
        kinds += [wgpu.BufferBindingType.storage] * shape[1]
        entries = [
            {"binding": i, "visibility": wgpu.ShaderStage.COMPUTE, "buffer": {"type": kind}}
            for i, kind in enumerate(kinds)
        ]
        group_layout = dev.device.create_bind_group_layout(entries=entries)
        pipeline_layout = dev.device.create_pipeline_layout(bind_group_layouts=[group_layout])
        dev.layouts[shape] = (group_layout, pipeline_layout)
    group_layout, pipeline_layout = dev.layouts[shape]
    module = _shader_module(dev, artifact)
    pipeline = dev.device.create_compute_pipeline(
        layout=pipeline_layout, compute={"module": module, "entry_point": artifact.text["entry"]}
    )
    _keep(dev.pipelines, source, (pipeline, group_layout))
    return pipeline, group_layout
