"""The typing rules' type computations (qnb.frontend.typing_rules), on IR types alone:
no kernel, no walker, no AST."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qnb import ir
from qnb.dtypes import bf16, bool_, f16, f32, f64, i32
from qnb.frontend import typing_rules as rules
from qnb.frontend.typing_rules import TypeRefusal


def refused(fn, *args) -> str:
    with pytest.raises(TypeRefusal) as info:
        fn(*args)
    return str(info.value)


# ---------------------------------------------------------------------------- literals


def test_constant_dtype_takes_the_weak_hint_and_refuses_what_i32_cannot_hold():
    assert rules.constant_dtype(True) is bool_
    assert rules.constant_dtype(3) is i32
    assert rules.constant_dtype(3, f16) is f16
    assert rules.constant_dtype(3, bool_) is i32  # an int next to a bool is no bool
    assert rules.constant_dtype(0.5) is f32
    assert rules.constant_dtype(0.5, i32) is f32  # a float never becomes an integer
    assert rules.constant_dtype(0.5, f64) is f64
    assert rules.constant_dtype(2**31 - 1) is i32
    assert refused(rules.constant_dtype, 2**31) == "the integer 2147483648 does not fit in i32"
    assert refused(rules.constant_dtype, -(2**31) - 1, i32).endswith("does not fit in i32")
    assert rules.constant_dtype(2**40, f32) is f32  # a float hint holds it


def test_weak_dtype_adopts_the_typed_operands_except_float_next_to_integer():
    assert rules.weak_dtype(2.0, f16) is f16
    assert rules.weak_dtype(1, i32) is i32
    assert rules.weak_dtype(1.5, i32) is f32
    assert rules.weak_dtype(True, bool_) is bool_
    assert rules.weak_dtype(2, bool_) is i32
    assert rules.weak_dtype(2.5, bool_) is f32


# ---------------------------------------------------------------------------- elementwise


def test_broadcast_follows_numpy_and_skips_scalars():
    t, v, s = ir.tile(f32, (8, 32)), ir.vec(f32, 32), ir.scalar(i32)
    assert rules.broadcast(t, v, s) == (8, 32)
    assert rules.broadcast(s, s) == ()
    assert rules.broadcast(ir.tile(f32, (16, 1)), ir.tile(f32, (1, 8))) == (16, 8)
    message = refused(rules.broadcast, t, ir.vec(f32, 8))
    assert message.startswith("a Tile[8, 32] and a Vec[8] do not broadcast together")
    assert "(shapes (8, 32) and (8,)" in message


sides = st.sampled_from([1, 2, 4, 8])


@given(st.lists(st.lists(sides, min_size=1, max_size=2).map(tuple), min_size=1, max_size=3))
def test_broadcast_agrees_with_numpy_on_every_shape(shapes):
    types = [ir.value_type(f32, shape) for shape in shapes]
    try:
        expected = np.broadcast_shapes(*shapes)
    except ValueError:
        with pytest.raises(TypeRefusal):
            rules.broadcast(*types)
    else:
        assert rules.broadcast(*types) == expected


@pytest.mark.parametrize(
    ("op", "dtype", "through", "result"),
    [
        ("add", f16, (), f16),
        ("add", bool_, (i32,), i32),  # bools compute arithmetic as i32
        ("mod", i32, (), i32),
        ("div", i32, (f32,), f32),  # true division
        ("div", bool_, (i32, f32), f32),  # through i32, as bool arithmetic goes
        ("div", f64, (), f64),
        ("lt", bool_, (i32,), bool_),  # bools order as 0 and 1
        ("eq", bool_, (), bool_),
        ("ge", f32, (), bool_),
        ("and", bool_, (), bool_),
        ("xor", i32, (), i32),
        ("shl", bool_, (i32,), i32),
        ("max", bool_, (i32,), i32),
    ],
)
def test_binary_dtypes(op, dtype, through, result):
    assert rules.binary_dtypes(op, dtype) == (through, result)


def test_bitwise_operators_refuse_floats_naming_the_operator():
    assert refused(rules.binary_dtypes, "and", f32) == (
        "the operator & needs i32 or bool operands, not f32 "
        "(convert with .astype(qnb.i32) or qnb.i32(x) first)"
    )
    assert refused(rules.binary_dtypes, "shr", f16).startswith(
        "the operator >> needs i32 operands, not f16"
    )


def test_power_dtypes():
    assert rules.power_dtypes(f32, None) == ()
    assert rules.power_dtypes(bool_, None) == (i32,)
    assert rules.power_dtypes(i32, -1) == (f32,)  # as Python gives a float
    assert rules.power_dtypes(bool_, -2) == (i32, f32)
    assert rules.power_dtypes(i32, 3) == ()
    assert rules.power_dtypes(f16, -1) == ()


def test_unary_rules():
    assert rules.invert_op(ir.vec(bool_)) == "not"
    assert rules.invert_op(ir.scalar(i32)) == "invert"
    assert refused(rules.invert_op, ir.tile(f32)) == "~ needs an i32 or bool operand, not f32"
    assert rules.math_dtype("exp", f16) is f16
    assert rules.math_dtype("sqrt", i32) is f32
    assert rules.math_dtype("abs", i32) is i32
    assert refused(rules.math_dtype, "log", bool_) == "log is not defined for bool values"
    assert refused(rules.math_dtype, "abs", bool_) == "abs is not defined for bool values"


# ---------------------------------------------------------------------------- linear algebra


def test_matmul_type_shapes_and_accumulation():
    a, b = ir.tile(f16, (8, 32)), ir.tile(f16, (32, 4))
    assert rules.matmul_type(a, b) == (f16, ir.tile(f32, (8, 4)))
    assert rules.matmul_type(ir.tile(i32, (4, 4)), ir.tile(f64, (4, 4))) == (
        f64,
        ir.tile(f64, (4, 4)),
    )
    assert rules.matmul_type(ir.tile(bf16), ir.tile(bf16)) == (bf16, ir.tile(f32))
    assert refused(rules.matmul_type, a, a) == (
        "@ needs Tile[M, K] @ Tile[K, N]: a Tile[8, 32] @ a Tile[8, 32] has "
        "32 columns on the left and 8 rows on the right"
    )
    assert refused(rules.matmul_type, ir.vec(f32), ir.tile(f32)).startswith(
        "@ multiplies two tiles (Tile[M, K] @ Tile[K, N]), got "
    )
    assert refused(rules.matmul_type, ir.tile(bool_), ir.tile(bool_)) == (
        "@ is not defined for bool tiles"
    )


def test_check_accumulator():
    a, b = ir.tile(f16, (8, 32)), ir.tile(f16, (32, 4))
    dtype, out = rules.matmul_type(a, b)
    rules.check_accumulator(ir.tile(f32, (8, 4)), a, b, dtype, out)
    rules.check_accumulator(ir.tile(f16, (8, 4)), a, b, dtype, out)  # f32 holds f16
    assert refused(rules.check_accumulator, ir.tile(f32, (4, 8)), a, b, dtype, out) == (
        "the accumulator of mma(Tile[8, 32], Tile[32, 4]) must be a Tile[8, 4], got "
        f"{ir.tile(f32, (4, 8))}"
    )
    assert refused(rules.check_accumulator, ir.tile(f64, (8, 4)), a, b, dtype, out) == (
        "mma of f16 tiles accumulates in f32; the accumulator is f64"
    )


def test_outer_type():
    assert rules.outer_type(ir.vec(f16, 8), ir.vec(f32, 32)) == ir.tile(f32, (8, 32))
    assert rules.outer_type(ir.vec(bool_, 4), ir.vec(bool_, 4)) == ir.tile(i32, (4, 4))
    assert refused(rules.outer_type, ir.tile(f32), ir.vec(f32)).startswith(
        "qnb.outer takes two vecs, got "
    )
    assert "more than a tile's 16384 elements" in refused(
        rules.outer_type, ir.vec(f32, 256), ir.vec(f32, 128)
    )


def test_square_cholesky_and_triangular_solve():
    rules.check_square(ir.tile(f32, (4, 4)), "eye_")
    assert refused(rules.check_square, ir.tile(f32, (4, 8)), "eye_") == (
        "eye_ needs a square tile; this one is a Tile[4, 8]"
    )
    assert refused(rules.check_square, ir.vec(f32), "eye_").startswith(
        "eye_ is a method of square tiles, not of a "
    )
    rules.check_cholesky(ir.tile(f64, (8, 8)))
    assert refused(rules.check_cholesky, ir.tile(i32)).startswith("cholesky_ needs a float Tile16")
    assert refused(rules.check_cholesky, ir.vec(f32)).startswith("cholesky_ needs a float Tile16")
    L, B = ir.tile(f32, (8, 8)), ir.tile(f32, (4, 8))
    assert rules.solve_triangular_dtype(L, B) is f32
    assert rules.solve_triangular_dtype(ir.tile(f16, (8, 8)), B) is f32
    assert refused(rules.solve_triangular_dtype, L, ir.tile(f32, (8, 4))) == (
        "L.solve_triangular_(B) needs L: Tile[N, N] and B: Tile[M, N]; L is a "
        "Tile[8, 8] and B a Tile[8, 4]"
    )
    assert refused(rules.solve_triangular_dtype, ir.tile(f64, (8, 8)), B) == (
        "B is f32 but L is f64"
    )
    assert refused(rules.solve_triangular_dtype, ir.tile(i32, (8, 8)), ir.tile(i32, (4, 8))) == (
        "solve_triangular_ needs float tiles"
    )


# ---------------------------------------------------------------------------- reductions


def test_reduction_axes_and_types():
    t, v = ir.tile(bool_, (8, 32)), ir.vec(f16, 32)
    assert [rules.reduce_axis(t, a) for a in (None, 0, 1, -1, -2)] == [None, 0, 1, 1, 0]
    assert rules.reduce_axis(v, None) == rules.reduce_axis(v, -1) == "vec"
    assert refused(rules.reduce_axis, v, 1) == "a Vec32 reduces over axis None or 0"
    assert rules.reduce_dtype(bool_) is i32
    assert rules.reduce_type(t, None) == ir.scalar(i32)
    assert rules.reduce_type(t, 0) == ir.vec(i32, 32)  # each column
    assert rules.reduce_type(t, 1) == ir.vec(i32, 8)
    assert rules.reduce_type(v, "vec") == ir.scalar(f16)
    assert rules.keepdims_type(t, None) == ir.tile(i32, (1, 1))
    assert rules.keepdims_type(t, 0) == ir.tile(i32, (1, 32))
    assert rules.keepdims_type(t, 1) == ir.tile(i32, (8, 1))
    assert rules.keepdims_type(v, "vec") == ir.vec(f16, 1)


def test_line_and_fill_types():
    t = ir.tile(f64, (8, 32))
    assert rules.line_type(t, "row") == ir.vec(f64, 32)
    assert rules.line_type(t, "col") == ir.vec(f64, 8)
    assert refused(rules.line_type, ir.vec(f32), "col").startswith(
        ".col() is a tile method, not one of a "
    )
    assert rules.fill_type("tile", i32) == ir.tile(i32, (16, 16))
    assert rules.fill_type("vec", f32) == ir.vec(f32, 16)
    assert rules.fill_type("tile", f16, (1, 64)) == ir.tile(f16, (1, 64))
    assert rules.fill_type("vec", bool_, (128,)) == ir.vec(bool_, 128)


# ---------------------------------------------------------------------------- the builder


def test_the_builder_offers_the_rules_its_few_operations_and_nothing_else_of_the_walker():
    from qnb.frontend import lower
    from qnb.frontend.builder import Builder, RuleBuilder

    operations = {
        "error",
        "loc",
        "require_value",
        "to_index",
        "condition",
        "py_truth",
        "coerce",
        "cast_elements",
        "emit",
        "load_window",
        "update_in_place",
        "temporary",  # (an atomic's old value: a local its statement assigns)
    }
    assert set(Builder.__slots__) == operations
    assert {n for n in vars(RuleBuilder) if not n.startswith("_")} == operations
    walker = lower._Lowerer(None, None, [], {}, None)
    builder = walker.builder
    walker_names = {"temporary": "typed_temporary"}  # (the walker's own `temporary` is untyped)
    for name in operations:
        assert getattr(builder, name) == getattr(walker, walker_names.get(name, name))
    for reach in ("lower_expr", "frame", "frames", "block", "ordered", "inline", "_walker"):
        assert not hasattr(builder, reach)
