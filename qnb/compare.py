"""``qnb.compare``: one kernel on several backends, and where they first part.

Every backend runs the launch on its own copy of the arguments; each array the kernel
stores to is compared with the reference's (``"cpu"``, the first backend) element by
element. Where a GPU backend differs, the first program (in grid order) that stored a
differing element is run again there in a *probe build* (qnb/backends/probe.py) that
records the value of each step, and on the cpu with a trace; the steps are matched by
position in the program's sequence (loops included), and the first step whose value
differs is the divergence: its op, its line, its first differing element.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from qnb.errors import public

# Default tolerances by dtype (contract): rtol = atol = these; integers and bools exact.
TOLERANCES = {"float16": 1e-2, "bfloat16": 1e-2, "float32": 1e-5, "float64": 1e-12}
# Programs one cpu trace records at a time while looking for the program to probe.
_TRACE_CHUNK = 4096


@dataclass(frozen=True)
class ArrayDifference:
    """How one stored array of one backend differs from the reference's.

    ``max_abs``/``max_rel``: the largest absolute and relative difference (``inf`` where
    one side is NaN or infinite and the other not); ``mismatches``: how many elements lie
    outside tolerance; ``first_index``: the first of them in C order (an index tuple),
    or None."""

    max_abs: float
    max_rel: float
    mismatches: int
    first_index: tuple[int, ...] | None
    rtol: float = 0.0
    atol: float = 0.0

    def __repr__(self) -> str:
        if not self.mismatches:
            return f"<agrees: max_abs={self.max_abs:.3g}>"
        return (
            f"<{self.mismatches} mismatches, first at {self.first_index}: "
            f"max_abs={self.max_abs:.3g}, max_rel={self.max_rel:.3g}>"
        )


@dataclass
class Divergence:
    """The first step at which ``backend`` parts from the reference, in ``program``.

    ``step`` is the reference trace's ``qnb.TraceStep``, ``line`` its (absolute) line
    number and ``op`` its op; ``element`` the first differing element of the step's value
    (C order; ``()`` for a scalar); ``expected`` the reference's value there and ``values``
    each backend's. Where no step could be named (past the step budget, or every step
    agreed), ``step``, ``line``, ``op`` and ``element`` are None and ``reason`` says why."""

    backend: str
    program: tuple[int, int, int]
    step: object = None  # qnb.TraceStep
    line: int | None = None
    op: str | None = None
    element: tuple[int, ...] | None = None
    expected: object = None
    values: dict = field(default_factory=dict)
    reason: str | None = None
    steps_compared: int = 0

    def __repr__(self) -> str:
        where = f"{self.backend}, program {self.program}"
        if self.step is None:
            return f"<Divergence on {where}: {self.reason}>"
        return (
            f"<Divergence on {where}, step {self.step.index} (line {self.line}: "
            f"{self.op}), element {self.element}: expected {_short(self.expected, self.element)}, "
            f"got {_short(self.values.get(self.backend), self.element)}>"
        )


@dataclass
class Comparison:
    """What ``qnb.compare`` found (see its help)."""

    kernel_name: str
    grid: tuple[int, int, int]
    backends: list[str]
    equal: bool
    arrays: dict[str, dict[str, ArrayDifference]]
    first_divergence: Divergence | None
    # each backend's final arrays (the stored ones), for views
    results: dict[str, dict[str, np.ndarray]] = field(default_factory=dict, repr=False)
    filename: str = ""
    firstlineno: int = 1
    source_lines: list[str] = field(default_factory=list, repr=False)

    def summary(self) -> list[str]:
        """One line per backend: the reference, then each one's agreement."""
        lines = [f"{self.backends[0]}: reference"]
        for name in self.backends[1:]:
            bad = {a: d[name] for a, d in self.arrays.items() if d[name].mismatches}
            if not bad:
                worst = max((d[name].max_abs for d in self.arrays.values()), default=0.0)
                lines.append(f"{name}: equal (max abs difference {worst:.3g})")
                continue
            parts = [
                f"{a}: {d.mismatches} mismatches, first at {d.first_index}, max abs {d.max_abs:.3g}"
                for a, d in bad.items()
            ]
            text = f"{name}: differs ({'; '.join(parts)})"
            found = self.first_divergence
            if found is not None and found.backend == name:
                if found.step is not None:
                    text += f"; first at line {found.line} ({found.op}), element {found.element}"
                    text += f" of program {found.program}"
                else:
                    text += f"; {found.reason}"
            lines.append(text)
        return lines

    def __repr__(self) -> str:
        state = "equal" if self.equal else "different"
        return f"<qnb.Comparison of {self.kernel_name!r} on {', '.join(self.backends)}: {state}>"

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self) + "\n" + "\n".join("  " + s for s in self.summary()))


@public
def compare(launch, *args, backends=None, program=None, rtol=None, atol=None) -> Comparison:
    """Run one launch on several backends and say whether, and where, they part.

    ``launch`` is ``kernel[grid]`` or a kernel (grid 1); ``args`` its arguments. Each
    backend (default: every available one, ``"cpu"`` first, the reference) runs on its own
    copy of the arguments: the arguments passed are not changed.

    Returns a ``qnb.Comparison``:

    - ``.backends``: the names, the reference first; ``.equal``: True when every array the
      kernel stores to agrees with the reference on every backend.
    - ``.arrays[name][backend]``: ``max_abs``, ``max_rel``, ``mismatches`` (elements outside
      tolerance) and ``first_index`` (the first such element in C order, or None).
      Elements agree as ``numpy.isclose(value, reference, rtol, atol, equal_nan=True)``
      says: NaN equals NaN, ±inf equals itself and no finite number. Default tolerances:
      ``rtol = atol =`` 1e-2 for f16 and bf16, 1e-5 for f32, 1e-12 for f64; integers and
      bools exact. Passing only ``rtol`` (or ``atol``) keeps the other's default.
    - ``.first_divergence``: None when equal; else the backend, the ``program`` (default:
      the first program in grid order that stored a differing element), the ``step`` (the
      reference trace's ``qnb.TraceStep``: the first whose value differs), its ``line``
      and ``op``, the ``element`` (first differing index of that value; ``()`` for a
      scalar), the ``expected`` value and ``values`` (backend → its value there). A GPU
      backend finds the step by running that program again in a probe build that
      records each step's value; at most 10,000 steps are compared (past them,
      ``reason`` says so).

    ``qnb.viz.CompareView(comparison)`` shows it; ``%qcompare`` runs it in a notebook.
    """
    from qnb.backends import registry

    kernel, grid = _kernel_and_grid(launch)
    names = _backend_names(backends, registry)
    if program is not None:
        program = _program(program, grid)
    host_args = [_to_host(a) for a in args]
    stored = _stored_arrays(kernel, host_args)
    positions = {name: kernel.param_names.index(name) for name in stored}
    results = {}
    for name in names:
        copies = _copies(host_args)
        _run(kernel, name, grid, copies)
        results[name] = {a: copies[positions[a]] for a in stored}
    reference = names[0]
    arrays = {
        a: {b: _difference(results[b][a], results[reference][a], rtol, atol) for b in names}
        for a in stored
    }
    equal = all(d.mismatches == 0 for per in arrays.values() for d in per.values())
    parsed = kernel.parsed
    comparison = Comparison(
        kernel_name=kernel.name,
        grid=grid,
        backends=names,
        equal=equal,
        arrays=arrays,
        first_divergence=None,
        results=results,
        filename=parsed.filename,
        firstlineno=parsed.firstlineno,
        source_lines=parsed.source.splitlines(),
    )
    if not equal:
        differing = [b for b in names[1:] if any(arrays[a][b].mismatches for a in stored)]
        comparison.first_divergence = _first_divergence(
            kernel, grid, host_args, differing, arrays, results, stored, program, rtol, atol
        )
    return comparison


# --------------------------------------------------------------------------- running


def _kernel_and_grid(launch):
    from qnb.errors import QnbTypeError
    from qnb.kernel import Kernel, Launch

    if isinstance(launch, Kernel):
        return launch, (1, 1, 1)
    if isinstance(launch, Launch):
        return launch.kernel, launch.grid
    raise QnbTypeError(
        f"qnb.compare takes a launch, kernel[grid], or a kernel; not {type(launch).__name__}"
    )


def _backend_names(backends, registry) -> list[str]:
    from qnb.errors import QnbTypeError

    if backends is None:
        names = [n for n in registry.NAMES if registry.get(n).info().available]
    else:
        names = [backends] if isinstance(backends, str) else list(backends)
        for name in names:
            registry.require(name)
    names = ["cpu"] + [n for n in dict.fromkeys(names) if n != "cpu"]
    if len(names) < 2:
        raise QnbTypeError("qnb.compare needs a backend besides cpu; none is available here")
    return names


def _program(program, grid) -> tuple[int, int, int]:
    from qnb.errors import QnbTypeError

    values = (program,) if isinstance(program, int | np.integer) else tuple(program)
    values = tuple(int(v) for v in values) + (0,) * (3 - len(values))
    if len(values) != 3 or not all(0 <= v < g for v, g in zip(values, grid)):
        raise QnbTypeError(f"program {program!r} is not in the grid {grid}")
    return values


def _to_host(value):
    """A NumPy copy of a device array (a ``qnb.DeviceArray`` or a CuPy array)."""
    from qnb.backends.base import DeviceArray

    if isinstance(value, DeviceArray):
        return value.numpy()
    if type(value).__module__.startswith("cupy"):
        return value.get()
    return value


def _copies(args) -> list:
    """Each array copied once (one array passed twice stays one array)."""
    made = {}
    out = []
    for value in args:
        if isinstance(value, np.ndarray):
            if id(value) not in made:
                made[id(value)] = np.array(value, copy=True)
            out.append(made[id(value)])
        else:
            out.append(value)
    return out


def _stored_arrays(kernel, args) -> list[str]:
    """The array parameters the kernel stores to, in parameter order (the kernel keeps
    a launch's IR per signature and captured values: lowering again costs milliseconds)."""
    from qnb import ir

    kernel_ir = kernel.specialize(*args).ir
    stored = ir.array_uses(kernel_ir)[1]
    return [p.name for p in kernel_ir.params if p.name in stored]


def _run(kernel, backend: str, grid, args, extra=()) -> None:
    kernel.specialize(*args, grid=grid, backend=backend).launch(args, extra)


# --------------------------------------------------------------------------- arrays


def _tolerance(dtype, rtol, atol) -> tuple[float, float]:
    default = TOLERANCES.get(np.dtype(dtype).name)
    if default is None:  # integers and bools: exact
        return 0.0, 0.0
    return (default if rtol is None else float(rtol)), (default if atol is None else float(atol))


def _agree(value, reference, rtol, atol) -> np.ndarray:
    """Elementwise: does ``value`` agree with ``reference`` (contract's rule)?"""
    value, reference = np.asarray(value), np.asarray(reference)
    if reference.dtype.kind not in "fc" and reference.dtype.name != "bfloat16":
        return value == reference
    rtol, atol = _tolerance(reference.dtype, rtol, atol)
    v, r = value.astype(np.float64), reference.astype(np.float64)
    return np.isclose(v, r, rtol=rtol, atol=atol, equal_nan=True)


def agree(value, reference, rtol=None, atol=None) -> np.ndarray:
    """Elementwise: does ``value`` agree with ``reference`` as ``qnb.compare`` judges
    (its default tolerances by dtype where ``rtol``/``atol`` are None)?"""
    return _agree(value, reference, rtol, atol)


def _difference(value, reference, rtol, atol) -> ArrayDifference:
    value, reference = np.asarray(value), np.asarray(reference)
    close = _agree(value, reference, rtol, atol)
    rt, at = _tolerance(reference.dtype, rtol, atol)
    v, r = value.astype(np.float64), reference.astype(np.float64)
    with np.errstate(all="ignore"):
        diff = np.abs(v - r)
        same = (v == r) | (np.isnan(v) & np.isnan(r))
        diff = np.where(same, 0.0, np.where(np.isnan(diff), np.inf, diff))
        rel = np.where(diff == 0, 0.0, diff / np.abs(r))
        rel = np.where(np.isnan(rel), np.inf, rel)
    bad = ~close
    flat = np.flatnonzero(bad)
    first = tuple(int(i) for i in np.unravel_index(flat[0], bad.shape)) if flat.size else None
    return ArrayDifference(
        max_abs=float(diff.max()) if diff.size else 0.0,
        max_rel=float(rel.max()) if rel.size else 0.0,
        mismatches=int(flat.size),
        first_index=first,
        rtol=rt,
        atol=at,
    )


# --------------------------------------------------------------------------- the first step


def _first_divergence(
    kernel, grid, args, differing, arrays, results, stored, program, rtol, atol
) -> Divergence:
    from qnb.backends import probe, registry

    backend = differing[0]
    reference = results["cpu"]
    masks = {a: ~_agree(results[backend][a], reference[a], rtol, atol) for a in stored}
    trace = None
    total = grid[0] * grid[1] * grid[2]
    if program is None:
        for start in range(0, total, _TRACE_CHUNK):
            chunk = _trace(kernel, grid, args, range(start, min(total, start + _TRACE_CHUNK)))
            program = _first_storing(chunk, masks)
            if program is not None:
                trace = chunk
                break
        if program is None:
            return Divergence(
                backend,
                _unflat(0, grid),
                reason="no program's stores reach the differing elements in the cpu trace",
            )
    if trace is None:
        flat = _flat(program, grid)
        trace = _trace(kernel, grid, args, range(flat, flat + 1))
    steps = trace.steps(program)
    probed = {}
    counts = {}
    for name in differing:
        if registry.get(name).language is None:
            continue  # a backend without generated code has no probe build
        words = probe.words_for([s.output for s in steps[: probe.STEP_BUDGET]])
        buffer = probe.new_buffer(words + 1)
        _run(
            kernel.variant(probe=True),
            name,
            grid,
            _copies(args),
            extra=(buffer, _flat(program, grid)),
        )
        probed[name], counts[name] = probe.decode(buffer)
    found = Divergence(backend, program)
    if backend not in probed:
        found.reason = f"backend {backend!r} has no probe build"
        return found
    values = probed[backend]
    limit = min(len(steps), probe.STEP_BUDGET)
    for k in range(limit):
        if k >= len(values):
            found.steps_compared = k
            found.reason = (
                f"{backend} recorded {len(values)} steps of program {program}; "
                f"the cpu ran {len(steps)}"
            )
            return found
        step = steps[k]
        expected, got = _as_value(step.output), values[k]
        element = _first_difference(got, expected, rtol, atol)
        if element is not None:
            found.step, found.line, found.op, found.element = step, step.lineno, step.op, element
            found.expected = expected
            found.values = {"cpu": expected}
            for name, recorded in probed.items():
                found.values[name] = recorded[k] if k < len(recorded) else None
            found.steps_compared = k + 1
            return found
    found.steps_compared = limit
    if len(steps) > probe.STEP_BUDGET or counts[backend] > probe.STEP_BUDGET:
        found.reason = (
            f"the first {probe.STEP_BUDGET:,} steps of program {program} agree; the step "
            "budget ends there"
        )
    else:
        found.reason = (
            f"every one of the {limit} steps of program {program} agrees "
            f"({_where_else(kernel, grid, args)})"
        )
    return found


def _where_else(kernel, grid, args) -> str:
    """Where arrays differ although a program's own steps agree: a race between programs
    only where ``qnb.check`` finds one (and then that one), else the other steps."""
    from qnb.hazards import check

    hazards = check(kernel[grid], *args)
    if hazards.ok:
        return "qnb.check finds no race between programs: the arrays differ outside its steps"
    first = hazards.hazards[0]
    return f"programs race, as qnb.check finds: {first.kind}, {first.describe()}"


def _trace(kernel, grid, args, programs: range):
    """The cpu trace of ``programs`` (flat indices) alone, on a fresh copy of ``args``:
    programs are independent, so each one's steps are those of the whole launch."""
    copies = _copies(args)
    return kernel.specialize(*copies, grid=grid, backend="cpu").trace(copies, programs)


def _first_storing(trace, masks) -> tuple[int, int, int] | None:
    """The first program of ``trace`` (grid order) with a store into a differing element."""
    shaped = {name: _as_3d(mask) for name, mask in masks.items()}
    for program in trace.programs:
        for step in trace.steps(program):
            for region in step.writes:
                mask = shaped.get(region.array)
                if mask is None:
                    continue
                slab = 0 if region.batch is None else region.batch
                if mask[slab, region.r0 : region.r1, region.c0 : region.c1].any():
                    return program
    return None


def _as_3d(mask: np.ndarray) -> np.ndarray:
    return mask.reshape((1,) * (3 - mask.ndim) + mask.shape)


def _flat(program, grid) -> int:
    return program[0] + grid[0] * (program[1] + grid[1] * program[2])


def _unflat(flat: int, grid) -> tuple[int, int, int]:
    return (flat % grid[0], (flat // grid[0]) % grid[1], flat // (grid[0] * grid[1]))


def _as_value(output):
    return output if isinstance(output, np.ndarray) else np.asarray(output)


def _first_difference(got, expected, rtol, atol) -> tuple[int, ...] | None:
    """The first element (C order) where ``got`` differs from ``expected``; None if none."""
    got = np.asarray(got)
    expected = np.asarray(expected)
    if got.shape != expected.shape:  # another op ran here: the whole value differs
        return ()
    reference = expected.astype(got.dtype) if got.dtype != expected.dtype else expected
    bad = ~_agree(got, reference, rtol, atol)
    flat = np.flatnonzero(bad)
    if not flat.size:
        return None
    return tuple(int(i) for i in np.unravel_index(flat[0], bad.shape))


def _short(value, element) -> str:
    if value is None:
        return "nothing"
    value = np.asarray(value)
    if element and value.ndim == len(element):
        value = value[element]
    return repr(value.item()) if value.ndim == 0 else f"{value.shape} {value.dtype}"


__all__ = ["ArrayDifference", "Comparison", "Divergence", "agree", "compare"]
