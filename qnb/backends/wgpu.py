"""The "wgpu" backend: WGSL rendered from the IR, run with wgpu-py on any adapter.

On a machine without a GPU the adapter is Mesa's lavapipe (a CPU Vulkan driver),
so the whole path (naga validation, pipelines, dispatch) runs and is tested there.

Runtime representation (see :mod:`qnb.backends.wgsl`): one storage buffer per
array parameter (bool arrays as u32 words), one uniform buffer with the scalar
parameters and array shapes. One process-wide device; shader modules, bind-group
layouts and pipelines are cached per WGSL text (the last ``MAX_PIPELINES``), bind
groups per buffer set. NumPy arguments are copied through the device's one pool of
staging buffers (:class:`_StagingPool`), never buffers of a launcher's own: a captured
value that changes at every launch makes a launcher per value, and memory stays flat.
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
    DeviceArray,
    Options,
    argument_error,
    check_dims,
)
from qnb.backends.host_arrays import HostArrays
from qnb.backends.wgpu_cffi import (
    WGPU_NATIVE_C_TYPES,
    import_wgpu_native,
    parse_c_types_at_once,
)
from qnb.backends.wgsl import WgslRenderer
from qnb.dtypes import as_dtype
from qnb.errors import BackendError, CompileError, QnbTypeError
from qnb.ir import KernelIR, Loc

MAX_WORKGROUPS = 65535
MAX_PIPELINES = 256  # shader modules and pipelines kept per device, least recently used out
# Drivers that end a program's loops after a number of iterations in all, by a word of the
# adapter's device name (lower case) → that number. llvmpipe (Mesa's lavapipe) counts
# every pass of every loop of an invocation, the last pass of each loop too, in one
# budget that the invocations of one SIMD group share, and leaves the loop it is in at
# the back edge where it runs out (and every later loop after one pass), silently. A
# loop Mesa unrolls (a small constant trip count) counts nothing. The generated code then
# watches for a cut (wgsl.py) and the launch raises BackendError.
LOOP_BUDGETS = {"llvmpipe": 65535}
_STORAGE_NUMPY = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "bool": np.uint32}


def _padded(nbytes: int) -> int:
    """Buffer sizes: a multiple of 4 bytes (16 for uniforms is handled separately), never 0."""
    return max(4, (nbytes + 3) // 4 * 4)


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


class _StagingPool:
    """The device's buffers for NumPy arguments, shared by every launcher.

    A launch takes one per array (of exactly the array's padded size, so a relaunch
    with the same shapes reuses the same buffers and bind groups) and gives them back
    when its work is submitted and read back: the queue runs a later write after it,
    and no two launches (threads) hold one at once. At most ``MAX_FREE`` idle buffers,
    of at most ``MAX_FREE_BYTES`` in all, are kept; one dropped beyond that (the sizes
    least recently given back first; a buffer larger than the whole bound at once) is
    destroyed (a launcher's cached bind group may still name it, but its id stays
    taken, so that group is never used)."""

    MAX_FREE = 8
    MAX_FREE_BYTES = 64 << 20

    def __init__(self, dev: _Device):
        self.dev = dev
        self.lock = threading.Lock()
        self.free: collections.OrderedDict[int, list] = collections.OrderedDict()  # size →
        self.idle = 0
        self.idle_bytes = 0

    def take(self, nbytes: int):
        size = _padded(nbytes)
        with self.lock:
            idle = self.free.get(size)
            if idle:
                self.idle -= 1
                self.idle_bytes -= size
                self.free.move_to_end(size)
                buffer = idle.pop()
                if not idle:
                    del self.free[size]
                return buffer
        return _new_buffer(self.dev, nbytes)

    def give(self, buffers: list) -> None:
        dropped = []
        with self.lock:
            for buffer in buffers:
                self.free.setdefault(buffer.size, []).append(buffer)
                self.free.move_to_end(buffer.size)
                self.idle += 1
                self.idle_bytes += buffer.size
            # the sizes least recently given back go first
            while self.idle > self.MAX_FREE or self.idle_bytes > self.MAX_FREE_BYTES:
                size, idle = next(iter(self.free.items()))
                dropped.append(idle.pop(0))
                self.idle -= 1
                self.idle_bytes -= size
                if not idle:
                    del self.free[size]
        for buffer in dropped:
            buffer.destroy()

    def clear(self) -> None:
        with self.lock:
            buffers = [b for idle in self.free.values() for b in idle]
            self.free.clear()
            self.idle = self.idle_bytes = 0
        for buffer in buffers:
            buffer.destroy()


class _BudgetWords:
    """Zeroed ``q_budget`` words (two u32) for launches of loop-budget builds: a launch
    takes one, binds it, reads it back after its work, and gives it back zeroed, so no
    two launches (threads) share one and each reads only its own program's report."""

    def __init__(self, dev: _Device):
        self.dev = dev
        self.lock = threading.Lock()
        self.free: list = []

    def take(self):
        with self.lock:
            if self.free:
                return self.free.pop()
        usage = self.dev.wgpu.BufferUsage
        return self.dev.device.create_buffer(
            size=8, usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST
        )

    def read(self, buffer) -> tuple[int, int]:
        """(invocations cut, the first such program's linear index) of a launch, and the
        words zeroed again where they were not."""
        cut, first = np.frombuffer(self.dev.queue.read_buffer(buffer, 0, 8), np.uint32)
        if cut:
            self.dev.queue.write_buffer(buffer, 0, np.zeros(2, np.uint32))
        return int(cut), 0xFFFFFFFF - int(first)

    def give(self, buffer) -> None:
        with self.lock:
            if len(self.free) < 8:
                self.free.append(buffer)
                return
        buffer.destroy()


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


def _private_directory(name: str, refusal: str) -> pathlib.Path | None:
    """``name`` under a usable (private) qnb cache directory, on the trust rules of
    :func:`driver_cache_problem`; None under ``QNB_CACHE=0`` or an untrusted cache dir,
    and None with one warning (``refusal`` with the path, then why) where the directory
    is refused."""
    from qnb.cache import store

    root = store.usable_directory()  # None: QNB_CACHE=0, or an untrusted cache dir
    if root is None:
        return None
    path = root / name
    why = driver_cache_problem(path)
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


class WgpuDeviceArray(DeviceArray):
    """A qnb array in a wgpu storage buffer (bool stored as u32 words)."""

    backend_name = "wgpu"

    def __init__(self, buffer, shape, dtype):
        super().__init__(shape, dtype)
        self.buffer = buffer

    def numpy(self) -> np.ndarray:
        dev = _get_device()
        storage = _STORAGE_NUMPY[as_dtype(self.dtype).name]
        count = self.size
        if count == 0:
            return np.zeros(self.shape, self.dtype)
        data = dev.queue.read_buffer(self.buffer, 0, _padded(count * np.dtype(storage).itemsize))
        flat = np.frombuffer(data, dtype=storage, count=count)
        return (flat != 0 if self.dtype == np.bool_ else flat.copy()).reshape(self.shape)


_SIZE_LIMITS = (
    "max-storage-buffer-binding-size",
    "max-buffer-size",
    "max-compute-workgroup-storage-size",  # the exchanges of large tiles (wgsl.py)
)


def _check_fits(dev: _Device, array: np.ndarray, name: str | None = None) -> None:
    """Refuse an array larger than one storage binding of this device, by name."""
    nbytes = array.size * (4 if array.dtype == np.bool_ else array.itemsize)
    if nbytes <= dev.max_binding:
        return
    what = f"array {name!r}" if name else "this array"
    message = (
        f"{what} is {nbytes / 2**20:.0f} MiB, but this wgpu device binds at most "
        f"{dev.max_binding / 2**20:.0f} MiB per array (its adapter's limit); split "
        "the work into smaller arrays, or use the cpu or cuda backend"
    )
    raise argument_error(BackendError, name, message) if name else BackendError(message)


def _budget_error(name, limit: int, cut: int, first: int, grid) -> BackendError:
    """The error of a launch whose loops the driver ended (``LOOP_BUDGETS``)."""
    gx, gy = grid[0], grid[1]
    program = (first % gx, first // gx % gy, first // (gx * gy))
    return BackendError(
        f"kernel {name!r} ran past this adapter's loop budget: its driver (llvmpipe) ends "
        f"a program's loops after {limit:,} iterations in all (every for and while loop "
        "of a program, nested or one after another, and the loops inside its tile "
        f"operations, count toward it), and it cut {cut:,} invocation(s) short, program "
        f"{program} first; their results would be wrong, so nothing was written back. "
        "Spread the work over more programs (a larger grid, fewer iterations each), or "
        "use the cpu backend"
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


def _uniform_bytes(words: int) -> int:
    """The uniform buffer's size for ``words`` parameter words (a multiple of 16 bytes)."""
    return max(4, (words + 3) // 4 * 4) * 4


def _dispatch(grid, programs_per_group: int = 1) -> tuple[int, int, int]:
    """The workgroups to dispatch for a launch grid: the grid itself when each axis fits
    a dispatch, else its programs folded onto x and y (the kernel recovers each program's
    id from the grid in its parameters, and workgroups past the last program return).
    A solo kernel (several programs per workgroup, one per invocation) always runs its
    programs in a row, folded onto x and y where they need more than 65535 workgroups."""
    total = grid[0] * grid[1] * grid[2]
    # The workgroups fold onto two axes, and the kernel numbers programs in u32.
    limit = min(MAX_WORKGROUPS**2 * programs_per_group, 2**32 - 64)
    if total > limit:
        raise BackendError(
            f"wgpu runs at most {limit} programs of this kernel in one launch; grid "
            f"{tuple(grid)} has {total}"
        )
    if programs_per_group > 1:
        groups = -(-total // programs_per_group)
    elif max(grid) <= MAX_WORKGROUPS:
        return tuple(grid)
    else:
        groups = total
    rows = -(-groups // MAX_WORKGROUPS)
    return (-(-groups // rows), rows, 1)


def _storage_bytes(array: np.ndarray) -> np.ndarray:
    """The array as its device words (contiguous; bool as u32)."""
    if array.dtype == np.bool_:
        return np.ascontiguousarray(array, dtype=np.uint32)
    return np.ascontiguousarray(array)


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
        return WgpuDeviceArray(buffer, array.shape, array.dtype)


def _pad_bytes(words: np.ndarray):
    data = words.reshape(-1).view(np.uint8)
    if data.nbytes % 4:
        data = np.concatenate([data, np.zeros(4 - data.nbytes % 4, np.uint8)])
    return data


def _new_buffer(dev: _Device, nbytes: int):
    usage = dev.wgpu.BufferUsage
    return dev.device.create_buffer(
        size=_padded(nbytes), usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST
    )


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


# --------------------------------------------------------------------------- launching


class _Launcher:
    """``launcher(grid, args)``: copy NumPy arrays in, dispatch, copy stored ones back.

    Threads may launch one launcher at once: what a launch copies in and reads back is
    its own (staging buffers and loop-budget words taken from the device's pools), and
    the one thing launches share, the uniform buffer with the scalars, the array shapes
    and the grid, is written and the dispatch that reads it submitted under ``lock``: the
    queue runs each write before the dispatches submitted after it, so every dispatch
    reads the words its own launch wrote."""

    def __init__(self, dev: _Device, artifact: Artifact, pipeline):
        self.dev = dev
        self.pipeline, self.group_layout = pipeline
        layout = artifact.text["layout"]
        self.arrays = layout["arrays"]
        self.name = artifact.text.get("name")
        kinds = layout["kinds"]
        array_positions = [i for i, kind in enumerate(kinds) if kind == "array"]
        scalar_positions = [i for i, kind in enumerate(kinds) if kind != "array"]
        self.param_count = len(kinds)
        self.array_args = list(zip(array_positions, self.arrays))
        # (arg position, word slot, stored as float?) per scalar; (slot, arg position, axis) per dim
        self.scalar_words = [
            (pos, spec["slot"], spec["dtype"] in ("f32", "f16"))
            for pos, spec in zip(scalar_positions, layout["scalars"])
        ]
        by_name = {spec["name"]: pos for pos, spec in self.array_args}
        self.dim_words = [
            (spec["slot"], by_name[spec["name"]], spec["axis"]) for spec in layout["dims"]
        ]
        self.words = np.zeros(_uniform_bytes(layout["words"]) // 4, np.int32)
        self.word_floats = self.words.view(np.float32)
        self.grid_words = self.words.view(np.uint32)[layout["grid_slot"] :][:3]
        self.programs_per_group = int(layout["programs_per_group"])
        self.budget = artifact.text.get("loop_budget")  # {"binding", "limit"} or None
        self.lock = threading.Lock()  # held while the uniform words are written and read
        self.written = None  # the words the uniform buffer holds now
        usage = dev.wgpu.BufferUsage
        self.uniform = dev.device.create_buffer(
            size=self.words.nbytes, usage=usage.UNIFORM | usage.COPY_DST
        )
        self.groups: dict[tuple, tuple] = {}

    def __call__(self, grid, args) -> None:
        taken = []  # staging buffers from the device's pool, given back at the end
        try:
            self._launch(grid, args, taken)
        finally:
            if taken:
                self.dev.staging.give(taken)

    def _launch(self, grid, args, taken: list) -> None:
        if len(grid) != 3:
            grid = tuple(grid) + (1,) * (3 - len(grid))
        dispatch = _dispatch(grid, self.programs_per_group)
        if len(args) != self.param_count:
            raise QnbTypeError(
                f"kernel {self.name!r} takes {self.param_count} arguments, got {len(args)}"
            )
        for pos, spec in self.array_args:
            check_dims(spec["name"], getattr(args[pos], "shape", ()))
        buffers = []
        host = HostArrays(
            "wgpu", lambda name, value: self._copy_in(name, value, taken), self._copy_back
        )
        for pos, spec in self.array_args:
            value = args[pos]
            if isinstance(value, WgpuDeviceArray):
                buffers.append(value.buffer)
            elif isinstance(value, np.ndarray):
                buffers.append(host.add(spec["name"], value, spec["stored"])[0])
            else:
                raise argument_error(
                    QnbTypeError,
                    spec["name"],
                    f"kernel {self.name!r}: {type(value).__name__} is not an array "
                    "the wgpu backend can use (pass a NumPy array or qnb.to_device(x))",
                )
        host.check()
        if 0 in grid:
            return
        if self.budget is None:
            self._submit(grid, args, dispatch, buffers)
        else:
            self._submit_watched(grid, args, dispatch, buffers)
        host.write_back()

    def _submit(self, grid, args, dispatch, buffers: list) -> None:
        """Write this launch's uniform words (where the buffer holds others) and submit
        its dispatch, as one step for the threads launching this launcher."""
        group = self._bind_group(buffers)
        dev = self.dev
        encoder = dev.device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(self.pipeline)
        compute.set_bind_group(0, group)
        compute.dispatch_workgroups(*dispatch)
        compute.end()
        commands = encoder.finish()
        with self.lock:
            words = self.words
            for pos, slot, is_float in self.scalar_words:
                if is_float:
                    self.word_floats[slot] = args[pos]
                else:
                    words[slot] = args[pos]
            for slot, pos, axis in self.dim_words:
                words[slot] = args[pos].shape[axis]
            self.grid_words[:] = grid
            packed = words.tobytes()
            if packed != self.written:
                dev.queue.write_buffer(self.uniform, 0, words)
                self.written = packed
            dev.queue.submit([commands])

    def _submit_watched(self, grid, args, dispatch, buffers: list) -> None:
        """:meth:`_submit` of a loop-budget build: the launch's own words to report a cut
        in, read back after it ran; BackendError (before anything is written back) where
        the driver ended a program's loops."""
        words = self.dev.budget_words.take()
        try:
            self._submit(grid, args, dispatch, [*buffers, words])
            cut, first = self.dev.budget_words.read(words)
        except BaseException:
            words.destroy()  # (what it holds is unknown)
            raise
        self.dev.budget_words.give(words)
        if cut:
            raise _budget_error(self.name, self.budget["limit"], cut, first, grid)

    def _copy_in(self, name: str, value: np.ndarray, taken: list):
        """The array in a staging buffer (added to ``taken``): (buffer, the words copied)."""
        _check_fits(self.dev, value, name)
        data = _storage_bytes(value)
        buffer = self.dev.staging.take(data.nbytes)
        taken.append(buffer)
        if data.nbytes:
            # Stored-only arrays are copied in too: a store leaves the elements
            # outside its window alone, and they are read back with the rest.
            self.dev.queue.write_buffer(buffer, 0, _pad_bytes(data))
        return buffer, data

    def _copy_back(self, value: np.ndarray, copy: tuple) -> None:
        buffer, data = copy
        raw = self.dev.queue.read_buffer(buffer, 0, _padded(data.nbytes))
        result = np.frombuffer(raw, dtype=data.dtype, count=data.size).reshape(value.shape)
        value[...] = result != 0 if value.dtype == np.bool_ else result

    def _bind_group(self, buffers: list):
        key = tuple(id(b) for b in buffers)
        cached = self.groups.get(key)
        if cached is not None:
            return cached[0]
        if len(self.groups) > 64:
            self.groups.clear()
        arrays = len(self.arrays)  # then the uniform words, then a budget build's words
        bound = [*buffers[:arrays], self.uniform, *buffers[arrays:]]
        entries = [
            {"binding": i, "resource": {"buffer": b, "offset": 0, "size": b.size}}
            for i, b in enumerate(bound)
        ]
        group = self.dev.device.create_bind_group(layout=self.group_layout, entries=entries)
        self.groups[key] = (group, buffers)  # holding the buffers keeps their ids unique
        return group
