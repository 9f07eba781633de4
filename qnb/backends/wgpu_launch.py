"""The wgpu backend's launches: device buffers for the arguments, the uniform words, the
dispatch, and what comes back (see :mod:`qnb.backends.wgpu` for the device and compiling).
This module imports nothing of ``wgpu.py``: the device (``dev``: a ``wgpu._Device``, its
wgpu-py device, queue and pools) is passed in, so the two are not an import circle.

NumPy arguments are copied through the device's one pool of staging buffers
(:class:`_StagingPool`), never buffers of a launcher's own: a captured value that changes at
every launch makes a launcher per value, and memory stays flat. Threads may launch one
launcher at once (:class:`_Launcher`). On an adapter with a loop budget
(``wgpu.LOOP_BUDGETS``) a launch of a kernel with loops reads back the words in which its
programs report a loop the driver cut short, and raises.
"""

from __future__ import annotations

import collections
import threading

import numpy as np

from qnb.backends.base import Artifact, DeviceArray, argument_error, check_dims
from qnb.backends.host_arrays import HostArrays
from qnb.dtypes import as_dtype
from qnb.errors import BackendError, QnbTypeError

MAX_WORKGROUPS = 65535
REPORT_BYTES = 8  # a loop-budget launch's report: invocations cut, ~first program


_STORAGE_NUMPY = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "bool": np.uint32}


def _padded(nbytes: int) -> int:
    """Buffer sizes: a multiple of 4 bytes (16 for uniforms is handled separately), never 0."""
    return max(4, (nbytes + 3) // 4 * 4)


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

    def __init__(self, dev):
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

    def __init__(self, dev):
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


class WgpuDeviceArray(DeviceArray):
    """A qnb array in a wgpu storage buffer (bool stored as u32 words)."""

    backend_name = "wgpu"

    def __init__(self, buffer, shape, dtype, dev):
        super().__init__(shape, dtype)
        self.buffer, self._device = buffer, dev

    def numpy(self) -> np.ndarray:
        dev = self._device
        storage = _STORAGE_NUMPY[as_dtype(self.dtype).name]
        count = self.size
        if count == 0:
            return np.zeros(self.shape, self.dtype)
        data = dev.queue.read_buffer(self.buffer, 0, _padded(count * np.dtype(storage).itemsize))
        flat = np.frombuffer(data, dtype=storage, count=count)
        return (flat != 0 if self.dtype == np.bool_ else flat.copy()).reshape(self.shape)


def _check_fits(dev, array: np.ndarray, name: str | None = None) -> None:
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
        "of a program, nested or one after another, the loops inside its tile "
        "operations and each f32 atomic's compare-exchange, count toward it), and it cut "
        f"{cut:,} invocation(s) short, program {program} first; their results would be wrong, so nothing was written back. "
        "Spread the work over more programs (a larger grid, fewer iterations each), or "
        "use the cpu backend"
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


def _pad_bytes(words: np.ndarray):
    data = words.reshape(-1).view(np.uint8)
    if data.nbytes % 4:
        data = np.concatenate([data, np.zeros(4 - data.nbytes % 4, np.uint8)])
    return data


def _new_buffer(dev, nbytes: int):
    usage = dev.wgpu.BufferUsage
    return dev.device.create_buffer(
        size=_padded(nbytes), usage=usage.STORAGE | usage.COPY_SRC | usage.COPY_DST
    )


# --------------------------------------------------------------------------- launching


class _Launch:
    """What one launch holds of its own: the staging buffers it took (given back at its
    end), its bindings, and, in a loop-budget build, where its report words lie (the tail
    of a stored array's staging buffer, read back with it, or a buffer of their own)."""

    __slots__ = ("taken", "bindings", "report", "report_read")

    def __init__(self):
        self.taken: list = []
        self.bindings: list[tuple] = []  # (buffer, offset, size) per array, in order
        self.report: tuple | None = None  # (buffer, offset) of the report words
        self.report_read: tuple[int, int] | None = None  # (invocations cut, first program)


class _Launcher:
    """``launcher(grid, args)``: copy NumPy arrays in, dispatch, copy stored ones back.

    Threads may launch one launcher at once: what a launch copies in and reads back is
    its own (:class:`_Launch`: staging buffers and report words from the device's pools),
    and the one thing launches share, the uniform buffer with the scalars, the array
    shapes and the grid, is written and the dispatch that reads it submitted under
    ``lock``: the queue runs each write before the dispatches submitted after it, so every
    dispatch reads the words its own launch wrote."""

    def __init__(self, dev, artifact: Artifact, pipeline):
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
        launch = _Launch()
        try:
            self._launch(grid, args, launch)
        finally:
            if launch.taken:
                self.dev.staging.give(launch.taken)

    def _launch(self, grid, args, launch: _Launch) -> None:
        if len(grid) != 3:
            grid = tuple(grid) + (1,) * (3 - len(grid))
        dispatch = _dispatch(grid, self.programs_per_group)
        if len(args) != self.param_count:
            raise QnbTypeError(
                f"kernel {self.name!r} takes {self.param_count} arguments, got {len(args)}"
            )
        for pos, spec in self.array_args:
            check_dims(spec["name"], getattr(args[pos], "shape", ()))
        reporter = self._reporter(args) if self.budget else None
        host = HostArrays(
            "wgpu",
            lambda name, value: self._copy_in(name, value, launch, name == reporter),
            lambda value, copy: self._copy_back(value, copy, launch, grid),
        )
        for pos, spec in self.array_args:
            value = args[pos]
            if isinstance(value, WgpuDeviceArray):
                buffer = value.buffer
                launch.bindings.append((buffer, 0, buffer.size))
            elif isinstance(value, np.ndarray):
                buffer, data, _report = host.add(spec["name"], value, spec["stored"])
                launch.bindings.append((buffer, 0, _padded(data.nbytes)))
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
        if self.budget is None or launch.report is not None:
            self._submit(grid, args, dispatch, launch)
        else:
            self._submit_with_own_report(grid, args, dispatch, launch)
        host.write_back()

    def _reporter(self, args) -> str | None:
        """The stored NumPy array whose staging buffer holds a loop-budget launch's report
        words in its tail (read back with it, in the same read), if there is one."""
        for pos, spec in self.array_args:
            value = args[pos]
            if spec["stored"] and isinstance(value, np.ndarray) and value.size:
                return spec["name"]
        return None

    def _submit(self, grid, args, dispatch, launch: _Launch) -> None:
        """Write this launch's uniform words (where the buffer holds others) and submit
        its dispatch, as one step for the threads launching this launcher."""
        group = self._bind_group(launch)
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

    def _submit_with_own_report(self, grid, args, dispatch, launch: _Launch) -> None:
        """:meth:`_submit` of a loop-budget launch that stores to no NumPy array: its
        report words in a buffer of their own, read back (waiting for its work) now."""
        words = self.dev.budget_words.take()
        launch.report = (words, 0)
        try:
            self._submit(grid, args, dispatch, launch)
            cut, first = self.dev.budget_words.read(words)
        except BaseException:
            words.destroy()  # (what it holds is unknown)
            raise
        self.dev.budget_words.give(words)
        if cut:
            raise _budget_error(self.name, self.budget["limit"], cut, first, grid)

    def _copy_in(self, name: str, value: np.ndarray, launch: _Launch, report: bool):
        """The array in a staging buffer (added to ``launch``): (buffer, the words copied,
        the offset of the report words after them, or None)."""
        _check_fits(self.dev, value, name)
        data = _storage_bytes(value)
        at = None
        if report:
            align = int(self.dev.device.limits["min-storage-buffer-offset-alignment"])
            at = -(-_padded(data.nbytes) // align) * align
        buffer = self.dev.staging.take(data.nbytes if at is None else at + REPORT_BYTES)
        launch.taken.append(buffer)
        if at is not None:
            launch.report = (buffer, at)
            padded = np.zeros(at + REPORT_BYTES, np.uint8)  # the report words start zero
            padded[: data.nbytes] = data.reshape(-1).view(np.uint8)
            self.dev.queue.write_buffer(buffer, 0, padded)
        elif data.nbytes:
            # Stored-only arrays are copied in too: a store leaves the elements
            # outside its window alone, and they are read back with the rest.
            self.dev.queue.write_buffer(buffer, 0, _pad_bytes(data))
        return buffer, data, at

    def _copy_back(self, value: np.ndarray, copy: tuple, launch: _Launch, grid) -> None:
        buffer, data, at = copy
        raw = self.dev.queue.read_buffer(buffer, 0, _padded(data.nbytes) if at is None else at + 8)
        if at is not None:  # (the first array written back: nothing is written if cut)
            cut, first = np.frombuffer(raw, np.uint32, 2, at)
            if cut:
                raise _budget_error(
                    self.name, self.budget["limit"], int(cut), 0xFFFFFFFF - int(first), grid
                )
        result = np.frombuffer(raw, dtype=data.dtype, count=data.size).reshape(value.shape)
        value[...] = result != 0 if value.dtype == np.bool_ else result

    def _bind_group(self, launch: _Launch):
        bound = [*launch.bindings]  # the arrays, then the uniform words, then the report's
        bound.append((self.uniform, 0, self.words.nbytes))
        if launch.report is not None:
            bound.append((launch.report[0], launch.report[1], REPORT_BYTES))
        key = tuple((id(b), offset, size) for b, offset, size in bound)
        cached = self.groups.get(key)
        if cached is not None:
            return cached[0]
        if len(self.groups) > 64:
            self.groups.clear()
        entries = [
            {"binding": i, "resource": {"buffer": b, "offset": offset, "size": size}}
            for i, (b, offset, size) in enumerate(bound)
        ]
        group = self.dev.device.create_bind_group(layout=self.group_layout, entries=entries)
        self.groups[key] = (group, bound)  # holding the buffers keeps their ids unique
        return group
