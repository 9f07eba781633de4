"""The *exact* result of a launch, as ``qnb.compare`` judges backends against it.

"Exact" here means: the kernel run on the cpu backend with every floating-point value
held in f64. :func:`widened` makes that kernel from the lowered IR, so it holds for
every op the IR has (and every op added to it later) without a line in the front end
or in the executor:

- every float type becomes f64: f16, bf16 and f32 tiles, vecs and scalars, float
  literals (which keep the spelling the user wrote: ``0.1`` is the f64 nearest 0.1),
  float parameters, the locals, the arrays of float dtype (their arguments are passed
  as f64 copies: f16, bf16 and f32 values are all exact in f64) and casts to a float
  type (which then round nothing);
- ints and bools stay as they are, and a cast to an int type keeps its meaning
  (truncation toward zero of the f64 value);
- stores into int or bool arrays convert as before, from the f64 value.

Where this is not exact:

- f64 itself rounds (about 1e-16 relative): the exact run is f64 arithmetic in the
  kernel's own order, and for an f64 kernel it *is* the reference;
- a kernel that relies on rounding (``(t + 1e8) - 1e8``, ``x.astype(qnb.f16)`` to round
  on purpose, compensated sums) gets the real-number answer of what it wrote, not of
  what it meant;
- a comparison, a ``floor`` or a float-to-int cast near a boundary can fall the other
  way in f64 than in the kernel's own dtype, and f16's overflow to ``inf`` does not
  happen in f64: there the exact result is the f64 path's;
- the math functions are NumPy's at f64 (rounded to about an ulp of f64).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from qnb import ir
from qnb.dtypes import bf16, f16, f32, f64

_NARROW_FLOATS = (f16, bf16, f32)


def _widened_type(typ: ir.Type) -> ir.Type:
    return typ.with_dtype(f64) if typ.dtype in _NARROW_FLOATS else typ


def _widened_node(node):
    """A copy of an IR node (an expression, a statement or a view) with every narrow
    float type in it, at any depth, made f64."""
    changes = {}
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if isinstance(value, ir.Type):
            changes[f.name] = _widened_type(value)
        elif isinstance(value, list):
            changes[f.name] = [_widened_value(v) for v in value]
        elif isinstance(value, ir.Expr | ir.Stmt | ir.ArrayView):
            changes[f.name] = _widened_node(value)
    return dataclasses.replace(node, **changes)


def _widened_value(value):
    return _widened_node(value) if isinstance(value, ir.Expr | ir.Stmt | ir.ArrayView) else value


def widened(kernel: ir.KernelIR) -> ir.KernelIR:
    """The f64 variant of ``kernel`` (see the module's docstring). The kernel given is
    not changed."""
    return dataclasses.replace(
        kernel,
        params=[ir.Param(p.name, _widened_type(p.type)) for p in kernel.params],
        body=[_widened_node(stmt) for stmt in kernel.body],
        locals={name: _widened_type(t) for name, t in kernel.locals.items()},
        display=dict(kernel.display),
    )


def holds_narrow_floats(kernel: ir.KernelIR) -> bool:
    """Whether any type of the kernel (a parameter, a local, a value) is f16, bf16 or
    f32; where none is, the kernel's own run is its exact run."""
    types = [p.type for p in kernel.params] + list(kernel.locals.values())
    types += [node.type for node in ir.walk_body(kernel.body) if isinstance(node, ir.Expr)]
    types += [node.type for node in ir.walk_body(kernel.body) if isinstance(node, ir.ArrayView)]
    return any(t.dtype in _NARROW_FLOATS for t in types)


def exact_arguments(kernel: ir.KernelIR, args) -> list:
    """The launch's runtime arguments (in ``kernel.params`` order) for the widened
    kernel: each array of a narrow float dtype as an f64 copy (one array passed twice
    stays one array); every other argument as it is."""
    made = {}
    out = []
    for param, value in zip(kernel.params, args):
        if param.type.kind == "array" and param.type.dtype in _NARROW_FLOATS:
            if id(value) not in made:
                made[id(value)] = np.asarray(value).astype(np.float64)
            out.append(made[id(value)])
        else:
            out.append(value)
    return out


def run_exact(kernel: ir.KernelIR, grid, args) -> list:
    """Run the widened ``kernel`` over ``grid`` on the cpu backend and return its
    arguments as it left them (f64 copies of the narrow float arrays; ``args``' own
    arrays of other dtypes, changed in place, as a launch changes them)."""
    from qnb.backends import registry
    from qnb.backends.base import Options

    wide = widened(kernel)
    exact_args = exact_arguments(kernel, args)
    cpu = registry.get("cpu")
    launcher = cpu.load(cpu.compile(wide, Options()))
    launcher(tuple(grid), exact_args)
    return exact_args


__all__ = ["exact_arguments", "holds_narrow_floats", "run_exact", "widened"]
