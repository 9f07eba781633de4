"""The hooks and table of spellings a GPU target fills in (WGSL, CUDA C++): the
walker asks these for every word it writes."""

from __future__ import annotations

from typing import ClassVar

from qnb import ir, ops
from qnb.backends.gpu.layout import (
    Layout,
)
from qnb.dtypes import DType, bf16, f16, f32, f64
from qnb.errors import BackendError


class GpuTarget:
    """The table of spellings and the hooks a target overrides."""

    language = "?"
    entry = "main"
    type_names: ClassVar[dict] = {}  # DType -> type spelling
    binary_templates: ClassVar[dict] = {
        "add": "({a} + {b})",
        "sub": "({a} - {b})",
        "mul": "({a} * {b})",
        "div": "({a} / {b})",
        "lt": "({a} < {b})",
        "le": "({a} <= {b})",
        "gt": "({a} > {b})",
        "ge": "({a} >= {b})",
        "eq": "({a} == {b})",
        "ne": "({a} != {b})",
        "and": "({a} & {b})",
        "or": "({a} | {b})",
        "xor": "({a} != {b})",
    }
    logical_templates: ClassVar[dict] = {"and": "({a} && {b})", "or": "({a} || {b})"}
    unary_templates: ClassVar[dict] = {"neg": "(-{a})", "not": "(!{a})", "invert": "(~{a})"}
    # the registry's math functions (qnb.ops) by their WGSL builtins, and the binary
    # functions the walker writes itself
    math_functions: ClassVar[dict] = {
        **ops.spellings("wgsl"),
        "max": "max",
        "min": "min",
        "pow": "pow",
    }
    barrier = "workgroupBarrier();"
    storage_barrier = "storageBarrier();"
    indent_unit = "  "
    solo_programs = 64  # programs per workgroup/block for a kernel that holds no tile
    shared_limit = 16384  # workgroup/shared bytes one program may declare
    scratch_align = 1  # bytes each scratch declaration's start is rounded up to
    staging_bytes = 8192  # scratch bytes for the two panels of one matmul chunk

    def type_name(self, dtype: DType) -> str:
        if dtype is f64 and f64 not in self.type_names:
            raise BackendError(f"{self.language} has no f64")
        return self.type_names[dtype]

    def literal(self, value, dtype: DType) -> str:
        raise NotImplementedError

    def cast(self, text: str, source: DType, target: DType) -> str:
        return f"{self.type_name(target)}({text})"

    def select(self, cond: str, if_true: str, if_false: str) -> str:
        return f"select({if_false}, {if_true}, {cond})"

    def declare_var(self, name: str, dtype: DType, init: str | None = None) -> str:
        raise NotImplementedError

    def declare_let(self, name: str, dtype: DType, value: str) -> str:
        raise NotImplementedError

    def declare_scratch(self, name: str, dtype: DType, size: int) -> str:
        raise NotImplementedError

    def declare_array(self, name: str, dtype: DType, count: int) -> str:
        """A private array of ``count`` elements (a thread's slots of a tile or vec)."""
        raise NotImplementedError

    def scratch_dtype(self, dtype: DType) -> DType:
        """The element type a value of ``dtype`` is exchanged through."""
        return dtype

    def scalar_param(self, name: str) -> str:
        """Reads scalar parameter ``name`` (already sanitised, e.g. ``p_x``)."""
        raise NotImplementedError

    def array_dim(self, field_name: str) -> str:
        raise NotImplementedError

    def array_element(self, binding: str, index: str) -> str:
        return f"{binding}[{index}]"

    def wide(self, value: str) -> str:
        """An i32 index term as the type flat array offsets are computed in. WGSL keeps
        i32 (a storage binding is far below 2**31 elements); CUDA widens to 64 bits, since
        an array on a large GPU may hold more than 2**31 elements."""
        return value

    def array_read(self, binding: str, index: str, dtype: DType) -> str:
        """An array element as a value of ``dtype`` (bool arrays may be stored as words)."""
        return self.array_element(binding, index)

    def array_write(self, binding: str, index: str, value: str, dtype: DType) -> str:
        return f"{self.array_element(binding, index)} = {value};"

    def program_id(self, which: str, axis: int) -> str:
        raise NotImplementedError

    def uniform_load(self, slot: str, target: str) -> list[str]:
        """Statements that wait for the whole program, then set ``target`` to ``slot``
        (written by one thread) in a way the compiler knows is uniform."""
        return [self.barrier, f"{target} = {slot};"]

    def open_loop(self, increment: str | None) -> None:
        """Emit the head of an endless loop whose ``continue`` runs the statement
        ``increment`` (if any) first; :meth:`close_loop` ends it."""
        raise NotImplementedError

    def close_loop(self, increment: str | None, ends: str | None = None) -> None:
        """End the loop :meth:`open_loop` began. ``ends``, where known, is an expression
        that is true when the loop's next test will leave it (its condition negated), to be
        evaluated after ``increment``: a target may use it (WGSL on a driver with a loop
        budget, ``wgsl.py``)."""
        raise NotImplementedError

    def function_open(self, name: str, params: list[tuple[str, DType]], result: DType) -> str:
        raise NotImplementedError

    def prelude(self, kernel: ir.KernelIR, layout: Layout, uses_f16: bool) -> list[str]:
        """Everything before the helpers: extensions, bindings, the parameter block."""
        raise NotImplementedError

    def entry_open(self, kernel: ir.KernelIR, layout: Layout) -> list[str]:
        """The entry point's signature; must define the thread index as u32 ``q_lid`` and
        as i32 ``q_t``."""
        raise NotImplementedError

    def entry_close(self) -> list[str]:
        return ["}"]

    def atomic_update(self, op: str, binding: str, index: str, value: str, dtype: DType) -> str:
        """The expression that applies ``qnb.atomic_<op>`` to one element and gives its old
        value. A target without atomics refuses (the caller places the error)."""
        raise BackendError(f"qnb.atomic_{op} does not run on {self.language} yet")

    def probe_words(self, value: str, dtype: DType) -> list[str]:
        """i32 words holding ``value``'s bits (f16 widened to f32; f64 low word, then high)."""
        raise NotImplementedError

    def helper_shift(self, op: str) -> str:
        """The function that shifts an i32 as NumPy does for every count (``ir.SHIFT_OPS``):
        C++ leaves a count outside 0..31 undefined and WGSL takes it modulo 32."""
        raise NotImplementedError

    def counted_loop(self, name: str, start, stop) -> str:
        """Header of ``for name in range(start, stop)``."""
        raise NotImplementedError

    def strided_loop(self, name: str, start: str, stop, step: int) -> str:
        """Header of ``for name in range(start, stop, step)`` (``step`` > 0)."""
        raise NotImplementedError

    def accumulate_dtype(self, dtype: DType) -> DType:
        return f32 if dtype in (f16, bf16) else dtype

    def minmax(self, op: str, a: str, b: str, dtype: DType) -> str:
        """NumPy's ``maximum``/``minimum``: a NaN operand gives NaN (a target whose builtin
        drops NaNs overrides this)."""
        return f"{self.math_functions[op]}({a}, {b})"

    def is_nan(self, x: str, dtype: DType) -> str:
        """A test of ``x`` for NaN, by IEEE comparison (a target whose compiler may assume
        there are no NaNs overrides it with a test it cannot fold away)."""
        return f"!({x} == {x})"

    def is_inf(self, x: str, dtype: DType) -> str:
        """A test of ``x`` for ±infinity (as ``is_nan``)."""
        return f"({x} == {x} && {x} - {x} != {x} - {x})"

    def sign_bit(self, x: str, dtype: DType) -> str:
        """Whether float ``x`` has its sign bit set (true for -0.0)."""
        return f"({x} < {self.literal(0, dtype)} || 1.0 / {x} < 0.0)"

    def shift_amount(self, n: int) -> str:
        return str(n)
