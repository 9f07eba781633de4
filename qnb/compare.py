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

from dataclasses import dataclass, field, replace

import numpy as np

from qnb.errors import QnbTypeError, caller_position, public

# Default tolerances by dtype (contract): rtol = atol = these; integers and bools exact.
TOLERANCES = {"float16": 1e-2, "bfloat16": 1e-2, "float32": 1e-5, "float64": 1e-12}


@dataclass(frozen=True)
class ArrayDifference:
    """How one stored array of one backend differs from the reference's.

    ``max_abs``/``max_rel``: the largest absolute and relative difference (``inf`` where
    one side is NaN or infinite and the other not); ``mismatches``: how many elements lie
    outside tolerance; ``first_index``: the first of them in C order (an index tuple),
    or None.

    Against the exact result (the kernel run on cpu in f64, see :mod:`qnb.exact`):
    ``max_error``, the largest ``|value - exact|`` over the array (``inf`` where one of
    them is NaN or infinite and the other not); ``closer``, True when at every element
    outside tolerance the value is at least as close to exact as the reference's (so
    always True for the reference's own record); ``farther``, how many of those elements
    are farther from exact than the reference's."""

    max_abs: float
    max_rel: float
    mismatches: int
    first_index: tuple[int, ...] | None
    rtol: float = 0.0
    atol: float = 0.0
    max_error: float = 0.0
    closer: bool = True
    farther: int = 0

    def __repr__(self) -> str:
        error = f"max_error={self.max_error:.3g}"
        if not self.mismatches:
            return f"<agrees: max_abs={self.max_abs:.3g}, {error}>"
        side = "closer to exact" if self.closer else f"farther from exact at {self.farther}"
        return (
            f"<{self.mismatches} mismatches, first at {self.first_index}: "
            f"max_abs={self.max_abs:.3g}, max_rel={self.max_rel:.3g}, {error}, {side}>"
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
    # "equal", "rounding" (every backend that differs is at least as close to exact as
    # the reference wherever it differs) or "different"
    verdict: str = "equal"
    # the exact result of each stored array (f64; qnb.exact), for views
    exact: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def summary(self) -> list[str]:
        """One line per backend: the reference, then each one's agreement and which side
        is closer to the exact result."""
        return [_reference_line(self), *(_backend_line(self, name) for name in self.backends[1:])]

    def verdict_text(self) -> str:
        """The verdict and which side is closer to exact: ``equal``, ``rounding (wgpu
        is closer to exact than cpu)``, ``different (wgpu is farther from exact than
        cpu)``."""
        return _verdict_text(self)

    def __repr__(self) -> str:
        text = f"<qnb.Comparison of {self.kernel_name!r} on {', '.join(self.backends)}: "
        return text + self.verdict_text() + ">"

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(repr(self) + "\n" + "\n".join("  " + s for s in self.summary()))


def _differing_backends(comparison) -> list[str]:
    return [
        name
        for name in comparison.backends[1:]
        if any(per[name].mismatches for per in comparison.arrays.values())
    ]


def _verdict_text(comparison) -> str:
    """``equal``; ``rounding (wgpu is closer to exact than cpu)``; ``different (wgpu is
    farther from exact than cpu)``."""
    reference = comparison.backends[0]
    differing = _differing_backends(comparison)
    if not differing:
        return comparison.verdict
    closer = [b for b in differing if _closer(comparison, b)]
    farther = [b for b in differing if b not in closer]
    parts = []
    if closer:
        parts.append(f"{' and '.join(closer)} {_are(closer)} closer to exact than {reference}")
    if farther:
        parts.append(f"{' and '.join(farther)} {_are(farther)} farther from exact than {reference}")
    return f"{comparison.verdict} ({'; '.join(parts)})"


def _are(names) -> str:
    return "is" if len(names) == 1 else "are"


def _closer(comparison, backend: str) -> bool:
    return all(per[backend].closer for per in comparison.arrays.values())


def _worst(comparison, backend: str, attribute: str) -> float:
    return max(
        (getattr(per[backend], attribute) for per in comparison.arrays.values()), default=0.0
    )


def _reference_line(comparison) -> str:
    reference = comparison.backends[0]
    error = _worst(comparison, reference, "max_error")
    return f"{reference}: reference (max error {error:.3g} from exact)"


def _backend_line(comparison, name: str) -> str:
    reference = comparison.backends[0]
    error = _worst(comparison, name, "max_error")
    bad = {a: per[name] for a, per in comparison.arrays.items() if per[name].mismatches}
    if not bad:
        worst = _worst(comparison, name, "max_abs")
        return f"{name}: equal (max abs difference {worst:.3g}; max error {error:.3g} from exact)"
    reference_error = _worst(comparison, reference, "max_error")
    parts = [
        f"{a}: {d.mismatches} mismatches, first at {d.first_index}, max abs {d.max_abs:.3g}"
        for a, d in bad.items()
    ]
    if _closer(comparison, name):
        side = f"rounding, closer to exact than {reference}"
    else:
        count = sum(d.farther for d in bad.values())
        total = sum(d.mismatches for d in bad.values())
        side = f"differs, farther from exact than {reference} at {count} of {total}"
    text = (
        f"{name}: {side} ({'; '.join(parts)}; max error {error:.3g} from exact, "
        f"{reference}'s {reference_error:.3g})"
    )
    found = comparison.first_divergence
    if found is not None and found.backend == name:
        if found.step is not None:
            text += f"; first at line {found.line} ({found.op}), element {found.element}"
            text += f" of program {found.program}"
        else:
            text += f"; {found.reason}"
    return text


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
      bools exact. Passing only ``rtol`` (or ``atol``) keeps the other's default; each
      is None or a number >= 0 (a negative one, NaN or a non-number is refused).
    - Beside the reference, the **exact** result: the kernel run on cpu with every
      floating-point value held in f64 (``qnb.exact`` says what that means and where it
      is not exact; for an f64 kernel, the reference itself). Each record has
      ``max_error`` (the largest ``|value - exact|``; the reference has its own record)
      and ``closer`` (True when, at every element outside tolerance, the value is at
      least as close to exact as the reference's).
    - ``.verdict``: ``"equal"``; ``"rounding"`` (not equal, but wherever a backend
      differs it is at least as close to exact as the reference: summation order or
      reassociation, not a wrong answer); or ``"different"``.
    - ``.first_divergence``: None when equal; else (for ``"rounding"`` too) the backend, the ``program`` (default:
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
    from qnb.backends.base import to_host

    rtol, atol = _checked_tolerance("rtol", rtol), _checked_tolerance("atol", atol)
    kernel, grid = _kernel_and_grid(launch)
    names = _backend_names(backends, registry)
    if program is not None:
        program = _program(program, grid)
    host_args = [to_host(a) for a in args]
    stored = _stored_arrays(kernel, host_args)
    positions = {name: kernel.param_names.index(name) for name in stored}
    results = {}
    for name in names:
        copies = _copies(host_args)
        _run(kernel, name, grid, copies)
        results[name] = {a: copies[positions[a]] for a in stored}
    reference = names[0]
    exact = _exact_results(kernel, grid, host_args, stored, results[reference])
    arrays = {
        a: {b: _judged(results[b][a], results[reference][a], exact[a], rtol, atol) for b in names}
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
        verdict=_verdict(arrays, equal),
        exact=exact,
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


def abs_difference(value, reference) -> np.ndarray:
    """``|value - reference|`` elementwise in f64: 0 where they are equal (NaN and NaN,
    ``inf`` and ``inf`` too), ``inf`` where one is NaN or infinite and the other not."""
    v = np.asarray(value).astype(np.float64)
    r = np.asarray(reference).astype(np.float64)
    with np.errstate(all="ignore"):
        diff = np.abs(v - r)
        same = (v == r) | (np.isnan(v) & np.isnan(r))
        return np.where(same, 0.0, np.where(np.isnan(diff), np.inf, diff))


def _difference(value, reference, rtol, atol) -> ArrayDifference:
    value, reference = np.asarray(value), np.asarray(reference)
    close = _agree(value, reference, rtol, atol)
    rt, at = _tolerance(reference.dtype, rtol, atol)
    r = reference.astype(np.float64)
    diff = abs_difference(value, reference)
    with np.errstate(all="ignore"):
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


def _judged(value, reference, exact, rtol, atol) -> ArrayDifference:
    """The record of ``value`` against the reference, with its error from ``exact``.
    At an element outside tolerance, ``value`` is as close to exact as the reference
    where its error is no larger, or where it agrees with exact itself (within the same
    tolerance: closer than the comparison can tell apart)."""
    record = _difference(value, reference, rtol, atol)
    error = abs_difference(value, exact)
    differing = ~_agree(value, reference, rtol, atol)
    exact_here = np.asarray(exact)[differing].astype(np.asarray(reference).dtype)
    far = error[differing] > abs_difference(reference, exact)[differing]
    far &= ~_agree(np.asarray(value)[differing], exact_here, rtol, atol)
    farther = int(np.count_nonzero(far))
    return replace(
        record,
        max_error=float(error.max()) if error.size else 0.0,
        closer=farther == 0,
        farther=farther,
    )


def _verdict(arrays, equal: bool) -> str:
    if equal:
        return "equal"
    if all(d.closer for per in arrays.values() for d in per.values()):
        return "rounding"
    return "different"


def _checked_tolerance(name: str, value):
    """``rtol``/``atol`` as passed, if it is None or a real number >= 0 (a bool, a
    string, NaN or a negative number is refused, at the caller's line)."""
    if value is None:
        return None
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        problem = f"a number, not {type(value).__name__} {value!r}"
    elif isinstance(value, complex | np.complexfloating):
        problem = f"a real number, not {value!r}"
    elif np.isnan(value):
        problem = "a number, not NaN"
    elif value < 0:
        problem = f"at least 0, not {value!r}"
    else:
        return float(value)
    message = (
        f"qnb.compare: {name} must be {problem} (None keeps the dtype's default: "
        f"1e-2 for f16 and bf16, 1e-5 for f32, 1e-12 for f64)"
    )
    raise ToleranceError(message).with_location(*caller_position())


class ToleranceError(QnbTypeError, ValueError):
    """A tolerance that is not a number >= 0: a ``QnbTypeError`` (the misuse of an
    argument) and a ``ValueError`` (a value out of range) alike."""


# --------------------------------------------------------------------------- the exact result


def _lowered(kernel, grid, args):
    """The cpu specialisation of a launch with ``args`` and its runtime arguments (in the
    IR's parameter order)."""
    launch = kernel.specialize(*args, grid=grid, backend="cpu")
    return launch, launch.arguments(args)


def _exact_results(kernel, grid, args, stored, reference) -> dict[str, np.ndarray]:
    """Each stored array's exact result (qnb.exact) for this launch; the reference's own
    where the kernel holds no narrow float (an f64 or integer kernel)."""
    from qnb import exact
    from qnb.errors import QnbError

    launch, runtime_args = _lowered(kernel, grid, _copies(args))
    kernel_ir = launch.ir
    if not exact.holds_narrow_floats(kernel_ir):
        return dict(reference)
    try:
        ran = exact.run_exact(kernel_ir, grid, runtime_args)
    except QnbError as err:
        raise launch.locate(err) from None
    positions = {p.name: k for k, p in enumerate(kernel_ir.params)}
    return {name: ran[positions[name]] for name in stored}


# --------------------------------------------------------------------------- the first step


def _first_divergence(
    kernel, grid, args, differing, arrays, results, stored, program, rtol, atol
) -> Divergence:
    from qnb.backends import probe, registry

    backend = differing[0]
    reference = results["cpu"]
    masks = {a: ~_agree(results[backend][a], reference[a], rtol, atol) for a in stored}
    if program is None:
        program = _first_storing_program(kernel, grid, args, masks)
        if program is None:
            return Divergence(
                backend,
                _unflat(0, grid),
                reason="no program's stores reach the differing elements in the cpu run",
            )
    flat = _flat(program, grid)
    # one step past the budget: enough to say that the program runs past it
    trace = _trace(kernel, grid, args, range(flat, flat + 1), max_steps=probe.STEP_BUDGET + 1)
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


def _trace(kernel, grid, args, programs: range, max_steps=None):
    """The cpu trace of ``programs`` (flat indices) alone, on a fresh copy of ``args``:
    programs are independent, so each one's steps are those of the whole launch. With
    ``max_steps``, the run stops where a program has recorded that many steps."""
    copies = _copies(args)
    launch = kernel.specialize(*copies, grid=grid, backend="cpu")
    return launch.trace(copies, programs, max_steps)


def _first_storing_program(kernel, grid, args, masks) -> tuple[int, int, int] | None:
    """The first program (grid order) that stores into an element where ``masks`` (per
    stored array) is True: the only one of a one-program grid; else found by one cpu
    run that watches the stores only (no values are recorded)."""
    from qnb.backends.cpu import stores
    from qnb.errors import QnbError

    if grid[0] * grid[1] * grid[2] == 1:
        return (0, 0, 0) if any(mask.any() for mask in masks.values()) else None
    launch, runtime_args = _lowered(kernel, grid, _copies(args))
    try:
        found = stores.first_storing(launch.ir, grid, runtime_args, masks)
    except QnbError as err:
        raise launch.locate(err) from None
    return None if found is None else _unflat(found, grid)


def _flat(program, grid) -> int:
    return program[0] + grid[0] * (program[1] + grid[1] * program[2])


def _unflat(flat: int, grid) -> tuple[int, int, int]:
    return (flat % grid[0], (flat // grid[0]) % grid[1], flat // (grid[0] * grid[1]))


def _as_value(output):
    return output if isinstance(output, np.ndarray) else np.asarray(output)


def _first_difference(got, expected, rtol, atol) -> tuple[int, ...] | None:
    """The first element (C order) where ``got`` differs from ``expected``; None if none."""
    if type(got) is type(expected) and isinstance(got, float | int | bool) and got == expected:
        return None  # (most steps of a long scalar loop: no array made)
    got = np.asarray(got)
    expected = np.asarray(expected)
    if got.shape != expected.shape:  # another op ran here: the whole value differs
        return ()
    if got.dtype == expected.dtype and np.array_equal(got, expected):
        return None
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
