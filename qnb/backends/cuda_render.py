"""CUDA C++ spellings for the shared GPU walker (``qnb.backends.gpu.GpuRenderer``).

The walker decides what to compute; this module says how CUDA C++ writes it: type names,
literals, casts, declarations, the barrier (``__syncthreads()``), the kernel signature, and
a small prelude of overloaded device functions (math per dtype, Python's floor division
and modulo) so that the op templates stay dtype-free. One op is CUDA's own: an f16 or bf16
matrix product runs on the tensor cores (WMMA 16×16×16, half → float), spread over every
warp of the block: C's 16×16 blocks in groups of up to 2×2 per warp, and where C has fewer
blocks than the block has warps, slices of K too (``tensor_core_plan``). bf16 ops are written out in float and rounded once (``__float2bfloat16``,
nearest even), as the cpu backend computes them.

A program is a block of 256 threads; a kernel that holds no tile runs a program per
thread, 128 to a block (``solo``, see ``qnb.backends.gpu``; ``RenderedCuda.programs_per_block``
tells the launcher).

Kernel ABI (see ``abi``): in ``KernelIR.params`` order, an array is a pointer (``const``
unless the kernel stores to it) followed by one ``int`` per dimension; a scalar is passed
by value as ``int`` (i32, bool), ``float`` (f32, f16, bf16) or ``double`` (f64). Three ``int``s
end every signature: the launch grid, from which a kernel launched folded onto x (a grid
past CUDA's 65535 on y or z, see ``cuda.dispatch``) recovers its program ids. Flat array
offsets are computed in 64 bits.

Every generated line that comes from the kernel is preceded (when its source line changes)
by ``#line N "qnb-kernel"`` (``"qnb-unitK"`` for the K-th inlined ``@qnb.func``), N being
the IR ``Loc`` line, so NVRTC's log names the user's line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from qnb import ir, ops
from qnb.backends.base import Options
from qnb.backends.cuda_prelude import prelude_text
from qnb.backends.gpu import GpuRenderer, Layout, node_dtypes
from qnb.dtypes import DType, bf16, bool_, f16, f32, f64, i32

THREADS = ir.TILE * ir.TILE
_WRAPPING = {"add": "iadd", "sub": "isub", "mul": "imul"}  # i32 ops that wrap via unsigned


class ScalarPassing(NamedTuple):
    """How a scalar parameter crosses the launch boundary: the kernel's C type and the
    NumPy dtype (its name) the launcher passes."""

    c_type: str
    pass_as: str


SCALAR_ABI = {
    "f16": ScalarPassing("float", "float32"),
    "bf16": ScalarPassing("float", "float32"),
    "f32": ScalarPassing("float", "float32"),
    "f64": ScalarPassing("double", "float64"),
    "i32": ScalarPassing("int", "int32"),
    "bool": ScalarPassing("int", "int32"),
}


# qnb.atomic_add/max/min: CUDA's own atomics where it has them (i32 add, max and min;
# f32 add), the rest by compare-and-swap on the bit pattern (max_/min_ propagate NaN, as
# the cpu's do); each returns the element's value from before its update.
# (atomics.cuh in qnb/backends/cuda_prelude, read at render time)


def line_file(unit: int) -> str:
    """The ``#line`` file name that stands for IR unit ``unit``."""
    return "qnb-kernel" if unit == 0 else f"qnb-unit{unit}"


@dataclass
class RenderedCuda:
    """CUDA source, its entry point, the per-line IR locations and the parameter ABI."""

    text: str
    entry: str
    line_map: list  # [generated line (1-based), unit, line, col] for each located line
    abi: list[dict]
    threads: int = THREADS  # per block
    programs_per_block: int = 1  # more than 1 for a kernel that holds no tile (solo)


# ---- the prelude: helpers overloaded per dtype (half computes in float and rounds once)

# (common.cuh in qnb/backends/cuda_prelude, read at render time)

# (f16.cuh in qnb/backends/cuda_prelude, read at render time)

# The registry's math functions (qnb.ops.MATH), generated from their CUDA names: float
# and double call CUDA's own; f16 and bf16 compute in float and round once. (abs is
# written by hand in common.cuh and f16.cuh: it is an integer and a bool function too.)
_GENERATED = [(name, op.cuda) for name, op in ops.MATH.items() if isinstance(op.cuda, ops.CudaMath)]


def _unary(narrow: str, to_narrow: str, to_float: str, name: str) -> str:
    return (
        f"__device__ __forceinline__ {narrow} {name}_({narrow} x) "
        f"{{ return {to_narrow}({name}_({to_float}(x))); }}"
    )


_PRELUDE_MATH = "\n".join(
    [
        "namespace qnb {",
        *(
            f"__device__ __forceinline__ {c_type} {name}_({c_type} x) {{ return {fn}(x); }}"
            for name, cuda in _GENERATED
            for c_type, fn in (("float", cuda.f32), ("double", cuda.f64))
        ),
        "}  // namespace qnb",
    ]
)
_PRELUDE_MATH_F16 = "\n".join(
    [
        "namespace qnb {",
        *(_unary("__half", "__float2half", "__half2float", name) for name, _ in _GENERATED),
        "}  // namespace qnb",
    ]
)
# bf16 overloads for the walker's own uses (a Cholesky's sqrt, a reduction's max): in
# float, rounded once to nearest even. (bf16 ops of the kernel are written out in float,
# see CudaRenderer.bf16_binary.)
_PRELUDE_BF16 = "\n".join(
    [
        "namespace qnb {",
        *(
            _unary("__nv_bfloat16", "__float2bfloat16", "__bfloat162float", name)
            for name in ops.MATH
        ),
        *(
            f"__device__ __forceinline__ __nv_bfloat16 {name}_(__nv_bfloat16 a, __nv_bfloat16 b) "
            f"{{ return __float2bfloat16({name}_(__bfloat162float(a), __bfloat162float(b))); }}"
            for name in ("pow", "floordiv", "mod")
        ),
        "}  // namespace qnb",
    ]
)

# C = A @ B for f16 A (M x K) and B (K x N) in shared memory, M, N, K multiples of 16, on
# the tensor cores (WMMA 16x16x16, half -> float), every warp of the block at work
# (tensor_core_plan picks the split at the call site). A unit of work is a group of
# rows x cols 16x16 blocks of C (one fragment each, so that each A and B fragment a warp
# loads serves rows or cols products) over one of `splits` equal slices of the K steps;
# unit u is group u % groups, slice u / groups, and warp w computes the units w,
# w + warps, ..., each slice's steps in order (unrolled: a unit is straight-line code).
# Slice s of C is stored to c + s*M*N (c holds splits*M*N floats): the caller adds the
# slices in order, 0 first. `warps` is the block's (its threads / 32, a constant, as every
# other index of the generated code is). The caller puts a barrier before (A and B
# written) and after (C read).
# (wmma.cuh in qnb/backends/cuda_prelude, read at render time)


class CudaRenderer(GpuRenderer):
    """The CUDA C++ table of spellings and the few CUDA-shaped hooks."""

    language = "cuda"
    type_names = {
        f16: "__half",
        bf16: "__nv_bfloat16",
        f32: "float",
        f64: "double",
        i32: "int",
        bool_: "bool",
    }
    math_functions = {
        **ops.spellings("cuda"),  # the registry's: qnb::<name>_, overloaded per dtype
        "max": "qnb::max_",
        "min": "qnb::min_",
        "pow": "qnb::pow_",
    }
    # Python-semantics binary ops that the prelude overloads for every dtype.
    prelude_binary = {
        "floordiv": "qnb::floordiv_",
        "mod": "qnb::mod_",
        "pow": "qnb::pow_",
        "max": "qnb::max_",
        "min": "qnb::min_",
        "shl": "qnb::shl_",
        "shr": "qnb::shr_",
    }
    barrier = "__syncthreads();"
    storage_barrier = "__syncthreads();"  # also orders global memory within the block
    solo_programs = 128
    shared_limit = 48 * 1024  # static __shared__ memory per block
    scratch_align = 32  # every __shared__ declaration is __align__(32)

    def __init__(self, options: Options = Options()):
        super().__init__(options)

    # ---- literals and conversions

    def wide(self, value: str) -> str:
        return f"(long long)({value})"

    def literal(self, value, dtype: DType) -> str:
        if dtype is bool_:
            return "true" if value else "false"
        if dtype is i32:
            wrapped = (int(value) + 2**31) % 2**32 - 2**31
            return "(-2147483647 - 1)" if wrapped == -(2**31) else str(wrapped)
        value = float(value)
        if dtype is f64:
            if math.isfinite(value):
                return repr(value)
            bits = {math.inf: "0x7ff0000000000000LL", -math.inf: "0xfff0000000000000LL"}
            return f"__longlong_as_double({bits.get(value, '0x7ff8000000000000LL')})"
        if dtype is f16:
            return f"__float2half({self.literal(float(np.float16(value)), f32)})"
        if dtype is bf16:  # the bf16 value, exactly, as a float literal
            return f"__float2bfloat16({self.literal(float(bf16.numpy.type(value)), f32)})"
        if math.isfinite(value):
            narrowed = float(np.float32(value))
            if math.isfinite(narrowed):
                return repr(narrowed) + "f"
            value = narrowed
        bits = {math.inf: "0x7f800000", -math.inf: "0xff800000"}
        return f"__int_as_float({bits.get(value, '0x7fffffff')})"

    def cast(self, text: str, source: DType, target: DType) -> str:
        if source is bf16:
            if target is bool_:
                return f"(__bfloat162float({text}) != 0.0f)"
            if target is f16:
                return f"__float2half(__bfloat162float({text}))"
            return f"(({self.type_name(target)})__bfloat162float({text}))"
        if target is bf16:  # rounds to nearest even, as ml_dtypes (the cpu backend) does
            if source is f64:
                return f"__double2bfloat16({text})"
            if source is f16:
                return f"__float2bfloat16(__half2float({text}))"
            return f"__float2bfloat16((float)({text}))"
        if source is f16:
            if target is bool_:
                return f"(__half2float({text}) != 0.0f)"
            return f"(({self.type_name(target)})__half2float({text}))"
        if target is f16:
            if source is f64:
                return f"__double2half({text})"
            return f"__float2half((float)({text}))"
        return f"(({self.type_name(target)})({text}))"

    def select(self, cond: str, if_true: str, if_false: str) -> str:
        return f"(({cond}) ? ({if_true}) : ({if_false}))"

    # ---- declarations

    def declare_var(self, name: str, dtype: DType, init: str | None = None) -> str:
        return f"{self.type_name(dtype)} {name} = {init if init is not None else self.literal(0, dtype)};"

    def declare_let(self, name: str, dtype: DType, value: str) -> str:
        return f"const {self.type_name(dtype)} {name} = {value};"

    def declare_scratch(self, name: str, dtype: DType, size: int) -> str:
        extent = f"[{size}]" if size else ""
        return f"__shared__ __align__({self.scratch_align}) {self.type_name(dtype)} {name}{extent};"

    def declare_array(self, name: str, dtype: DType, count: int) -> str:
        return f"{self.type_name(dtype)} {name}[{count}] = {{}};"

    def function_open(self, name: str, params: list[tuple[str, DType]], result: DType) -> str:
        args = ", ".join(f"{self.type_name(d)} {n}" for n, d in params)
        return f"__device__ {self.type_name(result)} {name}({args}) {{"

    # ---- parameters, ids, loops

    def scalar_param(self, name: str) -> str:
        return name

    def array_dim(self, field_name: str) -> str:
        return field_name

    def probe_words(self, value: str, dtype: DType) -> list[str]:
        if dtype is f64:
            bits = f"__double_as_longlong({value})"
            return [f"(int)(unsigned int)({bits} & 0xffffffffll)", f"(int)({bits} >> 32)"]
        if dtype is f32:
            return [f"__float_as_int({value})"]
        if dtype is f16:
            return [f"__float_as_int(__half2float({value}))"]
        if dtype is bf16:
            return [f"__float_as_int(__bfloat162float({value}))"]
        return [f"(int)({value})"]

    def program_id(self, which: str, axis: int) -> str:
        return f"q_{'pid' if which == 'id' else 'grid'}_{'xyz'[axis]}"

    def open_loop(self, increment: str | None) -> None:
        # C's for-loop runs its third clause on ``continue``: exactly the walker's contract.
        step = increment.rstrip(";") if increment else ""
        self.open(f"for (;; {step}) {{")

    def close_loop(self, increment: str | None, ends: str | None = None) -> None:
        self.close()

    def counted_loop(self, name: str, start, stop) -> str:
        return f"for (int {name} = {start}; {name} < {stop}; ++{name}) {{"

    def strided_loop(self, name: str, start: str, stop, step: int) -> str:
        return f"for (int {name} = {start}; {name} < {stop}; {name} += {step}) {{"

    # ---- CUDA's own ops

    def expr_Binary(self, node: ir.Binary) -> str:
        if node.left.type.dtype is bf16:
            return self.bf16_binary(node)
        # Python semantics come from the overloaded prelude functions (exact NumPy divmod).
        if node.op in self.prelude_binary:
            a, b = self.expr(node.left), self.expr(node.right)
            return f"{self.prelude_binary[node.op]}({a}, {b})"
        if node.left.type.dtype is i32 and node.op in _WRAPPING:
            a, b = self.expr(node.left), self.expr(node.right)
            return self.arith(node.op, a, b, i32)
        if node.left.type.dtype is i32 and node.op == "div":
            return f"qnb::floordiv_({self.expr(node.left)}, {self.expr(node.right)})"
        return super().expr_Binary(node)

    def bf16_binary(self, node: ir.Binary) -> str:
        """bf16 computes in float and rounds once to nearest even (__float2bfloat16), as
        the cpu backend (ml_dtypes) does; written out so that no bf16 operator of
        cuda_bf16.h (whose division differs by arch) decides the rounding."""
        a = f"__bfloat162float({self.expr(node.left)})"
        b = f"__bfloat162float({self.expr(node.right)})"
        if node.op in self.prelude_binary:
            value = f"{self.prelude_binary[node.op]}({a}, {b})"
        else:
            value = self.binary_templates[node.op].format(a=a, b=b)
        return f"__float2bfloat16({value})" if node.type.dtype is bf16 else value

    def expr_Unary(self, node: ir.Unary) -> str:
        if node.type.dtype is bf16:  # in float, rounded once (see bf16_binary)
            a = f"__bfloat162float({self.expr(node.operand)})"
            if node.op in self.unary_templates:
                return f"__float2bfloat16({self.unary_templates[node.op].format(a=a)})"
            return f"__float2bfloat16({self.math_functions[node.op]}({a}))"
        if node.op == "neg" and node.type.dtype is i32:
            return f"qnb::ineg({self.expr(node.operand)})"
        return super().expr_Unary(node)

    def arith(self, op: str, a: str, b: str, dtype: DType) -> str:
        if dtype is i32:
            return f"qnb::{_WRAPPING[op]}({a}, {b})"
        return super().arith(op, a, b, dtype)

    def tile_Matmul(self, node: ir.Matmul) -> str:
        """f16/bf16 ``@`` with M, N, K multiples of 16 on the tensor cores (``matmul_f16``
        in the prelude, spread over the block's warps by :func:`tensor_core_plan`), through
        shared memory; other products take the walker's path."""
        dtype = node.a.type.dtype
        (m, k), n = node.a.type.shape, node.b.type.shape[1]
        room = self.shared_limit // 2 - (m * k + k * n) * 2  # for C
        if dtype not in (f16, bf16) or m % 16 or n % 16 or k % 16 or self.threads < 32:
            return super().tile_Matmul(node)
        if room < m * n * 4:
            return super().tile_Matmul(node)
        warps = self.threads // 32  # the block's (blockDim.x is the layout's threads)
        plan = tensor_core_plan(m, n, k, warps, room + SLICE_BYTES)
        self.uses_wmma = True
        self.wmma_types.add(dtype)
        a, b = self.materialize(node.a), self.materialize(node.b)
        acc = None if node.acc is None else self.materialize(node.acc)
        sa = self.to_shared(a, node.a.type, index=0)
        sb = self.to_shared(b, node.b.type, index=1)
        sc = self.scratch(f32, 2, plan.splits * m * n)
        self.emit(self.barrier)
        self.emit(
            f"qnb::matmul_{dtype.name}({sa}, {sb}, {sc}, {m}, {n}, {k}, {warps}, "
            f"{plan.splits}, {plan.rows}, {plan.cols});"
        )
        self.emit(self.barrier)
        # the K slices' partial products, added in slice order (deterministic)
        total = " + ".join(
            f"{sc}[{s * m * n} + q_e]" if s else f"{sc}[q_e]" for s in range(plan.splits)
        )
        if acc is None:
            return self.fill(node.type, lambda: f"({total})")
        return self.fill(node.type, lambda: f"({acc}[q_s] + ({total}))")

    # ---- the file around the body

    def atomic_update(self, op: str, binding: str, index: str, value: str, dtype: DType) -> str:
        return f"qnb::atomic_{op}(&{self.array_element(binding, index)}, {value})"

    def prelude(self, kernel: ir.KernelIR, layout: Layout, uses_f16: bool) -> list[str]:
        lines = [f"// qnb kernel {kernel.name!r}: CUDA C++ generated from the qnb IR."]
        if self.solo:
            lines.append(
                f"// The kernel holds no tile: one thread is one program, "
                f"{self.solo_programs} programs per block."
            )
        else:
            lines += [
                f"// One program = one block of {layout.threads} threads; flat element e of a",
                f"// tile or vec is held by thread e % {layout.threads} in slot e / {layout.threads}",
                "// of a private array (a value smaller than the block: replicated).",
            ]
        if uses_f16:
            lines.append("#include <cuda_fp16.h>")
        if _uses(kernel, bf16):
            lines.append("#include <cuda_bf16.h>")
        if self.uses_wmma:
            lines.append("#include <mma.h>")
        lines += prelude_text("common").splitlines()
        lines += _PRELUDE_MATH.splitlines()
        if uses_f16:
            lines += prelude_text("f16").splitlines()
            lines += _PRELUDE_MATH_F16.splitlines()
        if _uses(kernel, bf16):
            lines += _PRELUDE_BF16.splitlines()
        if any(isinstance(n, ir.Atomic) for n in ir.walk_body(kernel.body)):
            lines += prelude_text("atomics").splitlines()
        if f16 in self.wmma_types:
            lines += prelude_text("wmma").splitlines()
        if bf16 in self.wmma_types:  # the same product on bf16 fragments (sm_80 and later)
            bf16_product = (
                prelude_text("wmma")
                .replace("__half", "__nv_bfloat16")
                .replace("matmul_f16", "matmul_bf16")
            )
            lines += bf16_product.strip("\n").splitlines()
        return lines

    def entry_open(self, kernel: ir.KernelIR, layout: Layout) -> list[str]:
        params, unpack = [], []
        for param in kernel.params:
            dtype = param.type.dtype
            if param.type.kind == "array":
                const = "" if param.name in self.stored else "const "
                params.append(f"{const}{self.type_name(dtype)}* {self.binding(param.name)}")
                params += [
                    f"int {self.dim_field(param.name, axis)}" for axis in range(param.type.ndim)
                ]
                continue
            name = self.param_field(param.name)
            ctype = SCALAR_ABI[dtype.name].c_type
            if ctype == self.type_name(dtype):
                params.append(f"{ctype} {name}")
            else:  # f16 and bool scalars travel as float / int
                params.append(f"{ctype} {name}_arg")
                unpack.append(
                    f"  const {self.type_name(dtype)} {name} = "
                    f"{self.cast(name + '_arg', f32 if ctype == 'float' else i32, dtype)};"
                )
        params += [f"int q_grid_{axis}" for axis in "xyz"]  # the launch grid (module docstring)
        signature = ", ".join(params)
        head = f'extern "C" __global__ void __launch_bounds__({layout.threads}) '
        head += f"{self.entry}({signature}) {{"
        if self.solo:
            return [
                head,
                "  // This thread's program: its place in the grid's programs, in order",
                "  // (x fastest); a thread past the last program has nothing to do.",
                "  const long long q_lin = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
                "  const long long q_gx = q_grid_x, q_gxy = q_gx * q_grid_y;",
                "  if (q_lin >= q_gxy * q_grid_z) return;",
                "  const int q_pid_x = (int)(q_lin % q_gx), q_pid_y = (int)(q_lin / q_gx % q_grid_y);",
                "  const int q_pid_z = (int)(q_lin / q_gxy);",
                *unpack,
            ]
        return [
            head,
            "  const unsigned int q_lid = threadIdx.x;",
            "  const int q_t = (int)q_lid;",
            "  // The block's program: its place in the grid, or, where the grid was launched",
            "  // folded onto x (past 65535 programs on y or z), its place in that order.",
            "  int q_pid_x = (int)blockIdx.x, q_pid_y = (int)blockIdx.y, q_pid_z = (int)blockIdx.z;",
            "  if (gridDim.x != (unsigned int)q_grid_x) {",
            "    const unsigned int q_gx = (unsigned int)q_grid_x, q_gy = (unsigned int)q_grid_y;",
            "    q_pid_x = (int)(blockIdx.x % q_gx);",
            "    q_pid_y = (int)(blockIdx.x / q_gx % q_gy);",
            "    q_pid_z = (int)(blockIdx.x / (q_gx * q_gy));",
            "  }",
            *unpack,
        ]

    # ---- driver

    def render(self, kernel: ir.KernelIR):
        self.entry = "qnb_" + re.sub(r"\W", "_", kernel.name)
        self.uses_wmma = False
        self.wmma_types: set[DType] = set()  # the element types of tensor-core products
        return super().render(kernel)


# Shared memory that C's K slices past the first may take beyond the product's budget (half
# the block's): a float 16x16 block per warp of a 256-thread block, enough to give every
# idle warp a slice when C has fewer blocks than the program has warps.
SLICE_BYTES = 8 * 1024


class TensorCorePlan(NamedTuple):
    """How ``matmul_f16`` spreads one product over a block's warps (see the prelude)."""

    splits: int  # K slices, each a partial C in shared memory
    rows: int  # 16x16 blocks of C down one unit of work (1 or 2)
    cols: int  # ... and across
    busiest: int  # mma_sync calls of the busiest warp


def tensor_core_plan(m: int, n: int, k: int, warps: int, room: int) -> TensorCorePlan:
    """The split of C = A @ B (M x K times K x N, multiples of 16) into units for ``warps``
    warps: the fewest mma_sync calls on the busiest warp; then the least shared-memory
    traffic of that warp (fragment loads, C stores, its share of adding the slices); then
    the fewest K slices. The slices divide the K steps equally, and each holds M*N floats
    of shared memory, within ``room`` bytes."""
    steps = k // 16
    best = None
    for rows in (1, 2) if m % 32 == 0 else (1,):
        for cols in (1, 2) if n % 32 == 0 else (1,):
            groups = (m // (16 * rows)) * (n // (16 * cols))
            for splits in range(1, min(steps, warps) + 1):
                if splits * m * n * 4 > room:
                    break
                if steps % splits:  # (a slice's steps are then a constant, unrolled)
                    continue
                units = -(-groups * splits // warps)  # of the busiest warp
                longest = -(-steps // splits)
                busiest = units * rows * cols * longest
                # in 512-byte fragments of 16x16 halves: loads, stores (float: 2 each), sum
                traffic = units * ((rows + cols) * longest + 2 * rows * cols)
                traffic += splits * m * n * 4 / (512 * warps)
                key = (busiest, traffic, splits)
                if best is None or key < best[0]:
                    best = key, TensorCorePlan(splits, rows, cols, busiest)
    return best[1]


def abi(kernel: ir.KernelIR, stored: set[str]) -> list[dict]:
    """The launch ABI, in parameter order (see the module docstring)."""
    entries = []
    for param in kernel.params:
        entry = {"name": param.name, "kind": param.type.kind, "dtype": param.type.dtype.name}
        if param.type.kind == "array":
            entry.update(ndim=param.type.ndim, stored=param.name in stored)
        else:
            entry["pass_as"] = SCALAR_ABI[param.type.dtype.name].pass_as
        entries.append(entry)
    return entries


def _with_line_directives(lines: list[str], locs: list, file_name: str):
    """Insert ``#line`` directives so the compiler attributes each generated line to its IR
    location (and the rest to the generated file itself); returns (text, line map)."""
    out, line_map = [], []
    expected = (file_name, 1)  # where the compiler believes the next line is
    for text, loc in zip(lines, locs):
        if loc is not None:
            unit, line, col = loc
            where = (line_file(unit), line)
            line_map.append([len(out) + 1 + (where != expected), unit, line, col])
        else:
            where = (file_name, len(out) + 1)
            if where != expected:  # the directive itself takes a line
                where = (file_name, len(out) + 2)
        if where != expected:
            out.append(f'#line {where[1]} "{where[0]}"')
        out.append(text)
        expected = (where[0], where[1] + 1)
    return "\n".join(out) + "\n", line_map


def render_cuda(kernel: ir.KernelIR, options: Options = Options()) -> RenderedCuda:
    """CUDA C++ for ``kernel``; needs no GPU and no compiler."""
    renderer = CudaRenderer(options)
    rendered = renderer.render(kernel)
    lines = rendered.source.rstrip("\n").split("\n")
    text, line_map = _with_line_directives(lines, rendered.line_locs, f"{rendered.entry}.cu")
    layout = rendered.layout
    return RenderedCuda(
        text,
        rendered.entry,
        line_map,
        abi(kernel, renderer.stored),
        layout.threads,
        layout.programs_per_group,
    )


def _uses(kernel: ir.KernelIR, dtype: DType) -> bool:
    """Whether any value, parameter or local of ``kernel`` has ``dtype``."""
    return (
        any(d is dtype for node in ir.walk_body(kernel.body) for d in node_dtypes(node))
        or any(p.type.dtype is dtype for p in kernel.params)
        or any(t.dtype is dtype for t in kernel.locals.values())
    )
