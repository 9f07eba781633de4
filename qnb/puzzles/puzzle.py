"""What a puzzle is: its statement, its NumPy definition, the launch it is graded on and
the cases it is tried on."""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Case:
    """One shape a puzzle is tried on: ``sizes`` (``{"n": 1000}``), a ``label`` that
    says them (``n = 1000``) and ``why`` it is tried (``not a multiple of 128``)."""

    sizes: dict
    why: str

    @property
    def label(self) -> str:
        return ", ".join(f"{k} = {v:,}" for k, v in self.sizes.items())

    def __str__(self) -> str:
        return f"{self.label} ({self.why})"


@dataclass(frozen=True)
class Puzzle:
    """A self-grading exercise.

    ``params`` are the kernel's parameters in order; ``outputs`` those it must store
    (each allocated from the NumPy definition's result, poisoned before the launch: NaN
    for floats, the least i32 for ints). ``make(rng, sizes)`` gives every other argument
    (arrays of random non-zero values, scalars; a key that is not a parameter goes to
    the definition alone); ``numpy(**inputs)`` is the definition,
    in float64, returning the outputs in order; ``grid(sizes)`` the launch grid."""

    name: str
    title: str
    goal: str  # Markdown: what to compute
    signature: str  # the kernel's def line(s)
    grid_text: str  # the grid, in words
    params: tuple[str, ...]
    outputs: tuple[str, ...]
    make: Callable[[np.random.Generator, dict], dict]
    numpy: Callable
    grid: Callable[[dict], tuple]
    cases: tuple[Case, ...]
    rtol: float = 1e-5
    atol: float = 1e-5
    hint: str = ""
    output_dtypes: dict = field(default_factory=dict)  # output -> NumPy dtype (f32 if absent)
    initial: dict = field(default_factory=dict)  # output -> its value before the launch

    def numpy_source(self) -> str:
        return textwrap.dedent(inspect.getsource(self.numpy)).strip()

    def statement(self) -> str:
        """The statement as Markdown: what to compute, its NumPy definition, the
        kernel's signature, the grid, and the cases it is graded on."""
        cases = "\n".join(f"- {case.label} ({case.why})" for case in self.cases)
        parts = [
            f"### {self.title} (`{self.name}`)",
            self.goal,
            "In NumPy (in float64; each output is compared in its own dtype, "
            f"`rtol = {self.rtol:g}`, `atol = {self.atol:g}`):",
            f"```python\n{self.numpy_source()}\n```",
            f"The kernel:\n```python\n@qnb.kernel\n{self.signature}\n    ...\n```",
            f"Launched as `kernel[grid](...)` over {self.grid_text}.",
            f"Graded on random non-zero data at:\n{cases}",
        ]
        if self.hint:
            parts.append(f"Hint: {self.hint}")
        return "\n\n".join(parts)

    def arguments(self, rng: np.random.Generator, case: Case) -> tuple[dict, dict]:
        """``(arguments by parameter, expected outputs)`` for one case: the inputs made,
        the outputs poisoned."""
        inputs = self.make(rng, dict(case.sizes))
        wide = {
            k: v.astype(np.float64) if isinstance(v, np.ndarray) and v.dtype.kind == "f" else v
            for k, v in inputs.items()
        }
        found = self.numpy(**wide)
        found = found if isinstance(found, tuple) else (found,)
        expected = {}
        args = dict(inputs)
        for name, value in zip(self.outputs, found):
            dtype = np.dtype(self.output_dtypes.get(name, np.float32))
            expected[name] = np.asarray(value).astype(dtype)
            if name in self.initial:  # (an output the kernel adds to: a histogram's)
                args[name] = np.full(expected[name].shape, self.initial[name], dtype)
            else:
                args[name] = poisoned(expected[name].shape, dtype)
        return {p: args[p] for p in self.params}, expected


def poisoned(shape, dtype) -> np.ndarray:
    """An output before the launch: NaN (floats) or the least i32 (ints) everywhere, so
    an element no program writes shows."""
    dtype = np.dtype(dtype)
    fill = np.nan if dtype.kind == "f" else np.iinfo(dtype).min
    return np.full(shape, fill, dtype)


def nonzero(rng: np.random.Generator, shape, low: float = 0.25, high: float = 2.0) -> np.ndarray:
    """Random f32 values of either sign, each of magnitude in [low, high): never 0, so
    a missing term or a zero-padded read shows."""
    magnitude = rng.uniform(low, high, shape)
    return (magnitude * rng.choice([-1.0, 1.0], shape)).astype(np.float32)


def cdiv(a: int, b: int) -> int:
    """The programs that cover ``a`` elements ``b`` at a time: ``-(-a // b)``."""
    return -(-a // b)


__all__ = ["Case", "Puzzle", "cdiv", "nonzero", "poisoned"]
