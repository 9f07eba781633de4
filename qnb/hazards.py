"""``qnb.check``: races between the programs of one launch.

A GPU runs the programs of a launch in no fixed order, so a kernel whose result depends
on that order has no single right answer; the cpu backend, which runs one order, returns
one without a word. ``qnb.check`` runs the launch on the cpu interpreter with a recorder
watching (``qnb/backends/cpu/hazards.py``: an observer of the executor, not another
executor) and names every pair of programs that touch one element where one of them
stores it: a **write-write** (both store it) or a **read-write** (one reads what the
other stores). Where it finds one, the programs run one at a time, in grid order and
in reverse, to say whether the stored values depend on the order.

Atomics (``qnb.atomic_add`` …) are not accesses here: updating one element through
them from many programs is how such a kernel is written without a race.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from qnb.errors import public

MAX_RECORDS = 1000  # hazard records kept (the first, by kind, array and element)
MAX_WINDOWS = 64  # windows kept per program of a record, for a view
_KINDS = ("write-write", "read-write")


@dataclass(frozen=True)
class Window:
    """A rectangle of ``array`` one program touched where it conflicts: rows ``[r0, r1)``
    and columns ``[c0, c1)`` of the 2-D view (``batch``: the slab of a 3-D array, else
    None; a 1-D array has rows (0, 1)), ``write`` for a store, at the user's ``line``."""

    array: str
    batch: int | None
    r0: int
    r1: int
    c0: int
    c1: int
    write: bool
    line: int


@dataclass(frozen=True)
class Hazard:
    """Two programs of one launch in conflict on array ``array``.

    ``kind``: ``"write-write"`` (both store an element) or ``"read-write"`` (the first
    program reads an element the second stores). ``index``: the first such element (C
    order, an index tuple in ``array``'s shape); ``count``: how many elements the pair
    conflicts on that way. ``programs``: the two programs (3-tuples; a read-write's
    reader first, a write-write's in grid order); ``lines``: the user's line of each
    one's access at ``index`` (absolute, as a trace step's ``lineno``); ``values``: for a
    write-write, what each stored there (the same value twice is still a race: another
    run, or a GPU, may store something else between them), else None. ``windows``: each
    program's windows in ``array`` that touch conflicting elements (for a view)."""

    kind: str
    array: str
    index: tuple[int, ...]
    count: int
    programs: tuple[tuple[int, int, int], tuple[int, int, int]]
    lines: tuple[int, int]
    values: tuple | None = None
    windows: tuple = field(default=((), ()), repr=False, compare=False)

    @property
    def same_value(self) -> bool:
        """A write-write whose two programs stored the same value (still a hazard)."""
        return self.values is not None and _same(*self.values)

    def describe(self) -> str:
        """One sentence a learner reads."""
        (a, b), (line_a, line_b) = self.programs, self.lines
        element = f"{self.array}[{', '.join(map(str, self.index))}]"
        more = f" (and {self.count - 1:,} more elements)" if self.count > 1 else ""
        if self.kind == "write-write":
            stored = f"storing {_text(self.values[0])} and {_text(self.values[1])}"
            if self.same_value:
                stored += ": the same value, still a race"
            return (
                f"programs {a} (line {line_a}) and {b} (line {line_b}) both store "
                f"{element}{more}, {stored}"
            )
        return (
            f"program {a} reads {element} (line {line_a}), which program {b} stores "
            f"(line {line_b}){more}"
        )

    def __repr__(self) -> str:
        return f"<{self.kind} hazard: {self.describe()}>"


@dataclass
class Hazards:
    """What ``qnb.check`` found (see its help): ``ok``, ``hazards``, ``order_dependent``.

    ``elements``: per array in conflict, how many of its elements are; ``truncated``:
    more program pairs conflict than ``hazards`` holds (:data:`MAX_RECORDS`).
    ``arrays`` and ``conflicts`` (each array in conflict after the check's run, and the
    mask of its conflicting elements) and the kernel's source are for a view."""

    kernel_name: str
    grid: tuple[int, int, int]
    hazards: list[Hazard]
    order_dependent: bool = False
    elements: dict[str, int] = field(default_factory=dict)
    truncated: bool = False
    arrays: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    conflicts: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    filename: str = ""
    firstlineno: int = 1
    source_lines: list[str] = field(default_factory=list, repr=False)

    @property
    def ok(self) -> bool:
        """True when no two programs of the launch conflict."""
        return not self.hazards

    def summary(self) -> str:
        """One line: no hazard, or how many, of which kinds, on which arrays."""
        grid = "×".join(str(g) for g in self.grid)
        if self.ok:
            return f"{self.kernel_name}[{grid}]: no hazard between programs"
        kinds = [k for k in _KINDS if any(h.kind == k for h in self.hazards)]
        arrays = ", ".join(
            f"{name} ({count:,} element{'' if count == 1 else 's'})"
            for name, count in self.elements.items()
        )
        count = len(self.hazards)
        pairs = f"{count:,}{'+' if self.truncated else ''} program pair{'' if count == 1 else 's'}"
        order = (
            "one at a time, in grid order and in reverse, the programs store different values"
            if self.order_dependent
            else "one at a time, in grid order and in reverse, they store the same values "
            "(run together, as on a GPU, they need not)"
        )
        return (
            f"{self.kernel_name}[{grid}]: {' and '.join(kinds)} hazards between programs "
            f"({pairs}) on {arrays}; {order}"
        )

    def __repr__(self) -> str:
        return f"<qnb.Hazards {self.summary()}>"

    def _repr_pretty_(self, printer, cycle) -> None:
        lines = [repr(self)] + [f"  {h.kind}: {h.describe()}" for h in self.hazards[:10]]
        if len(self.hazards) > 10:
            lines.append(f"  … {len(self.hazards) - 10:,} more")
        printer.text("\n".join(lines))


@public
def check(launch, *args) -> Hazards:
    """Find races between the programs of one launch (see ``qnb.Hazards``).

    ``launch`` is ``kernel[grid]`` or a kernel (grid 1), ``args`` its arguments. The
    launch runs on the cpu backend on copies of the arguments (the arguments passed are
    not changed), recording which programs read and which stored each array element;
    atomics are not accesses here.

    Returns a ``qnb.Hazards``: ``.ok`` (True when there is none) and ``.hazards``, each
    a record with ``kind`` (``"write-write"``: two programs store one element;
    ``"read-write"``: a program reads an element another program stores), ``array``
    (the parameter's name), ``index`` (the first element concerned, C order), ``count``
    (how many elements this pair of programs conflicts on), ``programs`` (the two
    programs, 3-tuples), ``lines`` (the user's line of each one's access) and, for a
    write-write, ``values`` (what each stored). ``.order_dependent``: whether running
    the programs one at a time, in grid order and then in reverse, stores different
    values. A kernel with no hazard gives the same result in any order.

    ``qnb.viz.HazardView(hazards)`` shows it; ``%qcheck`` runs it in a notebook.
    """
    return _check(_specialise(launch, args), _host_arrays(args))


def _check(launch_: _Launch, host: list, skeleton: bool = True) -> Hazards:
    """``check`` of one launch (``host``: its arguments, NumPy arrays). ``skeleton``
    False: pass 1 runs the whole kernel instead of its access skeleton (tests compare
    the two)."""
    from qnb.backends.cpu import hazards as cpu_hazards
    from qnb.backends.cpu import interpreter

    parsed = launch_.parsed
    found = Hazards(
        kernel_name=launch_.name,
        grid=launch_.grid,
        hazards=[],
        filename=getattr(parsed, "filename", ""),
        firstlineno=getattr(parsed, "firstlineno", 1),
        source_lines=parsed.source.splitlines() if parsed is not None else [],
    )
    stored = launch_.stored_arguments(host)
    overlaps = _first_pass(launch_, host, stored, skeleton)
    hot = overlaps.conflicts()
    if not hot:
        return found
    # Pass 2: the whole kernel again, logging each access to a conflicting element (its
    # arrays afterwards are the launch's: the view shows them)
    accesses = cpu_hazards.Accesses(launch_.ir, launch_.grid, hot)
    second = _copies_keeping_overlaps(host, stored)
    launch_.run(interpreter, second, observer=accesses)
    layouts = overlaps.layouts
    records = []
    columns = accesses.log.columns()
    for index in sorted(hot):
        memory = next(lay.memory for lay in layouts.values() if lay.memory.index == index)
        for name in memory.params:
            mask = layouts[name].mask(hot[index])
            if mask.any():
                found.elements[name] = int(mask.sum())
                found.conflicts[name] = mask
                found.arrays[name] = np.array(_argument(launch_, second, name))
        orders = [layouts[name].order for name in memory.params]
        part = np.isin(columns["params"], orders)
        records += cpu_hazards.pairs({k: v[part] for k, v in columns.items()})
    # by kind, then array, element (C order within an array) and programs
    records.sort(key=lambda pair: (_KINDS.index(pair.kind), pair.param, pair.unit, pair.programs))
    windows = _Windows(accesses, launch_, layouts)
    found.hazards = [
        _record(pair, launch_, layouts, accesses, windows) for pair in records[:MAX_RECORDS]
    ]
    found.truncated = len(records) > MAX_RECORDS
    found.order_dependent = _order_dependent(launch_, host, stored, interpreter)
    return found


def _first_pass(launch_: _Launch, host: list, stored: list, skeleton: bool):
    """Pass 1: the launch itself on copies (any error it raises is the check's), and
    beside it the kernel's access skeleton with the recorder watching. Returns the
    recorder."""
    from qnb.backends.cpu import hazards as cpu_hazards
    from qnb.backends.cpu import interpreter
    from qnb.backends.cpu import skeleton as cpu_skeleton

    first = _copies_keeping_overlaps(host, stored)
    launch_.launch(first)
    kernel_ir, unread = launch_.ir, []
    if skeleton:
        layouts = cpu_hazards.layouts_of(launch_.ir, launch_.runtime_args(host))
        watched = {name for name, lay in layouts.items() if lay.memory.watched}
        memory_of = {name: lay.memory.index for name, lay in layouts.items()}
        kernel_ir, read_back = cpu_skeleton.skeleton(launch_.ir, watched, memory_of)
        # a memory whose contents the skeleton never reads back may start as anything
        names = launch_.stored_names()
        unread = [a for a, name in zip(stored, names) if memory_of[name] not in read_back]
    # (the launch's own buffers serve where no value is read back: fresh ones would cost
    # their page faults, as much as the skeleton's run)
    copies = _copies_keeping_overlaps(host, stored, reuse=(first, unread))
    overlaps = cpu_hazards.Overlaps(kernel_ir, launch_.grid)
    launch_.run(interpreter, copies, observer=overlaps, kernel_ir=kernel_ir)
    return overlaps


# --------------------------------------------------------------------------- the launch


@dataclass
class _Launch:
    """One launch as the recorder runs it: the kernel's IR for these arguments, the
    grid, and how to name the user's lines and bind fresh copies of the arguments."""

    name: str
    grid: tuple[int, int, int]
    ir: object  # qnb.ir.KernelIR
    parsed: object  # the kernel's ParsedFunction
    parsed_units: dict
    runtime_args: object  # copies -> the runtime arguments (KernelIR.params order)
    locate: object  # QnbError -> the same error at the user's line
    launch: object  # copies -> None: the plain cpu launch on them

    def run(self, cpu, copies, observer=None, order=None, kernel_ir=None) -> None:
        """The interpreter over ``copies`` (``kernel_ir``: another IR of the same
        parameters, the skeleton; by default the kernel's)."""
        from qnb.errors import QnbError

        kernel_ir = kernel_ir or self.ir
        try:
            cpu.run(kernel_ir, self.grid, self.runtime_args(copies), observer=observer, order=order)
        except QnbError as err:
            raise self.locate(err) from None

    def stored_names(self) -> list[str]:
        """The array parameters the kernel stores to, in parameter order."""
        from qnb import ir

        stored = ir.array_uses(self.ir)[1]
        return [p.name for p in self.ir.params if p.name in stored]

    def stored_arguments(self, args) -> list:
        """The arrays among ``args`` that the kernel stores to (:meth:`stored_names`)."""
        names = self.stored_names()
        bound = self.runtime_args(args)
        return [a for p, a in zip(self.ir.params, bound) if p.name in names]

    def line(self, stmt) -> int:
        """The user's (absolute) line of IR statement ``stmt``."""
        loc = stmt.loc
        if self.parsed is None:  # IR built by hand: its own line numbers
            return loc.line if loc is not None else 0
        if loc is None:
            return self.parsed.firstlineno
        unit = self.ir.units[loc.unit].qualname if loc.unit < len(self.ir.units) else None
        parsed = self.parsed_units.get(unit, self.parsed)
        return parsed.firstlineno + loc.line - 1


def _specialise(launch, args) -> _Launch:
    """The kernel and grid of ``launch`` and its IR for ``args``, through the kernel's
    public specialisation (``qnb.Specialization``: its IR, runtime arguments, units,
    error placement and plain cpu launch)."""
    from qnb.errors import QnbTypeError
    from qnb.kernel import Kernel, Launch

    if isinstance(launch, Kernel):
        kernel, grid = launch, (1, 1, 1)
    elif isinstance(launch, Launch):
        kernel, grid = launch.kernel, launch.grid
    else:
        raise QnbTypeError(
            f"qnb.check takes a launch, kernel[grid], or a kernel; not {type(launch).__name__}"
        )
    spec = kernel.specialize(*args, grid=grid, backend="cpu")
    return _Launch(
        kernel.name, grid, spec.ir, kernel.parsed, spec.units, spec.arguments, spec.locate,
        spec.launch,
    )  # fmt: skip


def _ir_launch(kernel_ir, grid) -> _Launch:
    """A launch of IR built by hand (no kernel object; its arguments are already the
    runtime ones): the interpreter is its launch, its lines the IR's own."""
    from qnb.backends.cpu import interpreter

    grid = tuple(grid) + (1,) * (3 - len(grid))
    return _Launch(
        kernel_ir.name, grid, kernel_ir, None, {}, list, lambda err: err,
        lambda copies: interpreter.run(kernel_ir, grid, copies),
    )  # fmt: skip


def _host_arrays(args) -> list:
    from qnb.backends.base import to_host

    return [to_host(a) for a in args]


def _copies_keeping_overlaps(args, stored: list, reuse=None) -> list:
    """``args`` with a copy of each array that shares bytes with one of ``stored`` (the
    arrays the kernel stores to); arrays that did share bytes (one array passed twice,
    two views of one buffer) share them in the copy too, so a race through an alias is
    one in the copy. The other arrays are only read: they are passed as they are.
    ``reuse``: (earlier copies made by this function, some of ``stored``): a group that
    holds one of those takes the earlier copies, whatever they hold now."""
    spans = []
    for k, value in enumerate(args):
        if isinstance(value, np.ndarray) and value.nbytes:
            low = value.__array_interface__["data"][0]
            spans.append((low, low + value.nbytes, k))
    spans.sort()
    groups: list[list] = []
    for low, high, k in spans:
        if groups and low < groups[-1][1]:
            groups[-1][1] = max(groups[-1][1], high)
            groups[-1][2].append((low, k))
        else:
            groups.append([low, high, [(low, k)]])
    earlier, reused = reuse if reuse is not None else (None, ())
    written, taken = {id(a) for a in stored}, {id(a) for a in reused}
    out = list(args)
    for low, high, members in groups:
        if not any(id(args[k]) in written for _, k in members):
            continue
        if any(id(args[k]) in taken for _, k in members):
            for _, k in members:
                out[k] = earlier[k]
        elif len(members) == 1 or not all(args[k].flags.c_contiguous for _, k in members):
            for _, k in members:
                out[k] = np.array(args[k], copy=True)
        else:
            origin = args[members[0][1]]  # the lowest: its bytes start the group's
            buffer = np.lib.stride_tricks.as_strided(
                origin.reshape(-1).view(np.uint8), shape=(high - low,), strides=(1,)
            ).copy()
            for start, k in members:
                value = args[k]
                part = buffer[start - low : start - low + value.nbytes]
                out[k] = part.view(value.dtype).reshape(value.shape)
    return out


def _argument(launch_: _Launch, copies, name: str):
    """Array parameter ``name``'s argument among ``copies`` (in its own shape)."""
    params = launch_.ir.params
    position = next(k for k, p in enumerate(params) if p.name == name)
    return launch_.runtime_args(copies)[position]


# --------------------------------------------------------------------------- records


def _record(pair, launch_: _Launch, layouts, accesses, windows: _Windows) -> Hazard:
    arrays = launch_.ir.arrays
    layout = layouts[arrays[pair.param].name]
    flat = int(layout.elements(np.int64(pair.unit)))
    index = tuple(int(i) for i in np.unravel_index(flat, layout.shape)) if layout.shape else ()
    statements = [accesses.statements[s] for s in pair.statements]
    values = None
    if pair.values is not None:
        values = tuple(_as_stored(v, layout.dtype) for v in pair.values)
    return Hazard(
        kind=pair.kind,
        array=layout.param,
        index=index,
        count=pair.count,
        programs=tuple(_unflat(p, launch_.grid) for p in pair.programs),
        lines=tuple(launch_.line(s) for s in statements),
        values=values,
        windows=tuple(windows.of(p, layout) for p in pair.programs),
    )


class _Windows:
    """The windows pass 2 logged, found by program and array."""

    def __init__(self, accesses, launch_: _Launch, layouts: dict):
        rows = accesses.log.window_rows()
        self.rows = rows[np.lexsort((rows[:, 1], rows[:, 0]))] if rows.size else rows
        self.accesses, self.launch = accesses, launch_
        self.by_order = {lay.order: lay for lay in layouts.values()}

    def of(self, program: int, layout) -> tuple[Window, ...]:
        """``program``'s windows in ``layout``'s array, each once: its own, and those
        through another parameter of the same memory laid out alike (an alias), moved
        into this array's indices."""
        keys = self.rows[:, 0]
        mine = self.rows[
            np.searchsorted(keys, program, "left") : np.searchsorted(keys, program, "right")
        ]
        out = []
        for row in np.unique(mine, axis=0).tolist():
            other = self.by_order[row[1]]
            if other.memory is not layout.memory:
                continue
            moved = _moved(row[4:], other, layout)
            if moved is not None:
                line = self.launch.line(self.accesses.statements[row[2]])
                out.append(Window(layout.param, *moved, bool(row[3]), line))
        return tuple(out[:MAX_WINDOWS])


def _moved(box, source, target):
    """A window (batch, r0, r1, c0, c1) of ``source``'s 3-D view in ``target``'s
    indices (batch None unless ``target`` is 3-D), or None where the two are not laid
    out alike (other strides) or the window does not fit a row of ``target``."""
    batch, r0, r1, c0, c1 = box
    if source.strides[1:] != target.strides[1:] or source.span != target.span:
        return None
    shift = source.offset - target.offset + batch * source.strides[0]
    slab_units = target.strides[0] if len(target.shape) == 3 else 0
    slab, shift = divmod(shift, slab_units) if slab_units else (0, shift)
    rows, columns = divmod(shift, target.strides[1]) if target.strides[1] else (0, shift)
    width = target.shape[-1]
    if c1 + columns > width:
        return None
    slabbed = len(target.shape) == 3
    return (slab if slabbed else None, r0 + rows, r1 + rows, c0 + columns, c1 + columns)


def _as_stored(value: float, dtype):
    """A logged float64 as the Python number the array holds."""
    return np.asarray(value).astype(dtype).item()


def _unflat(flat: int, grid) -> tuple[int, int, int]:
    return (flat % grid[0], (flat // grid[0]) % grid[1], flat // (grid[0] * grid[1]))


def _same(a, b) -> bool:
    return a == b or (a != a and b != b)  # NaN stored twice is the same value


def _text(value) -> str:
    return repr(value)


# --------------------------------------------------------------------------- order


def _order_dependent(launch_: _Launch, host, stored, cpu) -> bool:
    """Whether the programs one at a time in grid order and in reverse grid order store
    different values (compared bit for bit, every array argument)."""
    results = []
    for order in ("forward", "reverse"):
        copies = _copies_keeping_overlaps(host, stored)
        launch_.run(cpu, copies, order=order)
        results.append(copies)
    forward, reverse = results
    for a, b in zip(forward, reverse):
        if isinstance(a, np.ndarray) and a.tobytes() != b.tobytes():
            return True
    return False


__all__ = ["Hazard", "Hazards", "Window", "check"]
