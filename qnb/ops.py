"""The op registry: each elementwise math function and each reduction of the tile
language, declared once with its name, typing rule, per-target spelling and cost.

Every stage reads its op table from here:

- the typing rules and compile-time folding (:mod:`qnb.frontend.op_rules`) and the
  ``math``/NumPy functions a kernel may call in their place (:mod:`qnb.frontend.capture`);
- the IR's op names (:data:`qnb.ir.UNARY_OPS`, :data:`qnb.ir.MATH_OPS`);
- the cpu's NumPy ufuncs (:mod:`qnb.backends.cpu.semantics`);
- the WGSL builtins (:mod:`qnb.backends.gpu.target`), the CUDA functions and the prelude
  overloads generated from them (:mod:`qnb.backends.cuda_render`), and which reductions
  combine by arithmetic (:mod:`qnb.backends.gpu.layout`);
- the FLOP count (:mod:`qnb.cost`).

A target that lacks an op says so with :class:`NotOn` and a message. :func:`check` runs
at import and refuses an entry that spells a target neither way, or whose
:mod:`qnb.language` stub is missing, naming both. The stub stays hand-written in
``language.py``: it is what a user reads (``help(qnb.exp2)``).

A new math function is an entry in :data:`MATH`, its stub in ``language.py`` and its name
in ``qnb/__init__.py``; a new reduction is an entry in :data:`REDUCTIONS` and its two
stubs (``Tile16`` and ``Vec16`` methods). The tests that check every op on every backend
read this registry too (``tests/backends/test_registry_ops.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from qnb import language

TARGETS = ("cpu", "wgsl", "cuda")


class RegistryError(Exception):
    """An op registry entry that disagrees with the language or lacks a spelling."""


@dataclass(frozen=True)
class NotOn:
    """A target's spelling of an op it does not have: ``message`` says why."""

    message: str


@dataclass(frozen=True)
class CudaMath:
    """A CUDA math function by its float and double names (``expf``, ``exp``): the
    renderer generates the prelude's ``qnb::<op>_`` overloads from them, f16 and bf16
    computing in float and rounding once."""

    f32: str
    f64: str


@dataclass(frozen=True)
class MathOp:
    """A unary elementwise function (``qnb.exp(x)``).

    ``typing``: "float" (integers compute in f32, floats keep their dtype) or "same" (any
    dtype but bool keeps its own). ``numpy``: the ufunc that defines it (the cpu runs it
    at the operand's dtype; f16 computes in f32 and rounds once, as every target does).
    ``fold``: the value of a compile-time number (by default NumPy's f64 ufunc, so a
    folded value is what the function gives on an f64 tile). ``wgsl``: the WGSL builtin.
    ``cuda``: a :class:`CudaMath`, or the name of a ``qnb::`` function the prelude's
    ``.cuh`` files write by hand. ``flops``: per float element."""

    name: str
    numpy: np.ufunc
    wgsl: str | NotOn
    cuda: CudaMath | str | NotOn
    typing: str = "float"
    fold: Callable | None = None
    flops: int = 1

    def folded(self, x):
        """The op's value at the compile-time number ``x`` (a Python float or int)."""
        if self.fold is not None:
            return self.fold(x)
        return float(self.numpy(np.float64(x)))

    @property
    def cuda_name(self) -> str | None:
        """The function the CUDA renderer calls (None where CUDA lacks the op)."""
        if isinstance(self.cuda, NotOn):
            return None
        return f"qnb::{self.name}_" if isinstance(self.cuda, CudaMath) else self.cuda

    @property
    def stubs(self) -> tuple:
        return (getattr(language, self.name, None),)


@dataclass(frozen=True)
class Reduction:
    """``t.<name>(axis, keepdims)`` of tiles and vecs.

    ``ufunc``: the NumPy ufunc whose ``reduce`` defines it (the cpu reduces C order with
    it). ``combine``: the binary IR op that folds two partial results where the reduction
    is arithmetic ("add", "mul"), None for an extreme, which the GPU walker writes with
    max/min. Arithmetic reductions of f16 and bf16 accumulate in f32 and round once,
    bools reduce as i32, and each has its inclusive scan (``cum<name>``, the ufunc's
    ``accumulate``). ``flops``: per element combined."""

    name: str
    ufunc: np.ufunc
    combine: str | None
    flops: int = 1

    @property
    def arithmetic(self) -> bool:
        return self.combine is not None

    @property
    def scan(self) -> str | None:
        """The method name of the reduction's running form, for arithmetic ones."""
        return f"cum{self.name}" if self.arithmetic else None

    @property
    def stubs(self) -> tuple:
        names = [self.name] + ([self.scan] if self.scan else [])
        return tuple(
            getattr(cls, name, None) for name in names for cls in (language.Tile16, language.Vec16)
        )


def _math(name, *, cuda=None, **options) -> MathOp:
    """A math function NumPy, WGSL and CUDA all spell by its name (CUDA's float form with
    an ``f``)."""
    return MathOp(
        name, getattr(np, name), wgsl=name, cuda=cuda or CudaMath(f"{name}f", name), **options
    )


MATH: dict[str, MathOp] = {
    op.name: op
    for op in (
        # (the prelude writes abs by hand: it is also an integer and a bool function)
        _math("abs", typing="same", fold=abs, cuda="qnb::abs_"),
        _math("exp", fold=math.exp),
        _math("log", fold=math.log),
        _math("sqrt", fold=math.sqrt),
        _math("exp2"),
        _math("log2"),
        # the precise CUDA functions, not the fast intrinsics (__sinf, __expf): those are
        # far outside NumPy's tolerance away from 0 (unless the kernel asks for fast_math).
        # WGSL's tanh is replaced by a helper on lavapipe (see qnb.backends.wgsl).
        _math("sin"),
        _math("cos"),
        _math("tanh"),
        _math("floor"),
        _math("ceil"),
        _math("trunc"),
    )
}
# the float math functions (``abs`` keeps any dtype): integers compute in f32 for these
FLOAT_MATH = tuple(name for name, op in MATH.items() if op.typing == "float")


REDUCTIONS: dict[str, Reduction] = {
    op.name: op
    for op in (
        Reduction("sum", np.add, combine="add"),
        Reduction("max", np.maximum, combine=None),
        Reduction("min", np.minimum, combine=None),
        Reduction("prod", np.multiply, combine="mul"),
    )
}
# the reductions that combine by arithmetic: name → the IR op of the combine
REDUCE_ARITH = {name: op.combine for name, op in REDUCTIONS.items() if op.arithmetic}
# the running forms: method name (``cumsum``) → the reduction (``sum``)
SCANS = {op.scan: name for name, op in REDUCTIONS.items() if op.scan}


def spellings(target: str) -> dict[str, str]:
    """Each math op's spelling on ``target`` ("wgsl" or "cuda"), those it lacks left out."""
    if target == "cuda":
        return {name: op.cuda_name for name, op in MATH.items() if op.cuda_name}
    return {name: op.wgsl for name, op in MATH.items() if not isinstance(op.wgsl, NotOn)}


def check(entries) -> None:
    """Refuse entries that lack a target's spelling (neither a spelling nor a
    :class:`NotOn` with a message), name an op :mod:`qnb.language` has no stub for, or
    whose typing is unknown."""
    for op in entries:
        kind = type(op).__name__
        if any(stub is None for stub in op.stubs):
            raise RegistryError(
                f"the op registry's {kind} {op.name!r} has no stub in qnb.language "
                f"(qnb/ops.py and qnb/language.py must agree)"
            )
        if isinstance(op, Reduction):
            if op.combine not in (None, "add", "mul") or not isinstance(op.ufunc, np.ufunc):
                raise RegistryError(f"Reduction {op.name!r}: combine {op.combine!r} is unknown")
            continue
        if op.typing not in ("float", "same") or not isinstance(op.numpy, np.ufunc):
            raise RegistryError(f"MathOp {op.name!r}: typing {op.typing!r} is unknown")
        for target in ("wgsl", "cuda"):
            spelled = getattr(op, target)
            if isinstance(spelled, NotOn):
                if not spelled.message:
                    raise RegistryError(
                        f"MathOp {op.name!r} is not on {target}, with no message saying why"
                    )
            elif not spelled:
                raise RegistryError(
                    f"MathOp {op.name!r} has no {target} spelling; give one or "
                    f"NotOn('why') (qnb/ops.py)"
                )


check([*MATH.values(), *REDUCTIONS.values()])
