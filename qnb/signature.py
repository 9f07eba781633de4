"""A kernel's parameters: their annotations, and the signature of a launch's arguments.

A launch's signature (one :class:`ArgSpec` per parameter) is what the launch memo is keyed
by, what the ``signature`` key component shows and what lowering types the parameters
from. :class:`Parameters` derives it: on the fast path (``fast_signature``: the common
call, checked in a few type tests) or in full (``signature``: every argument checked, a
wrong one explained at its parameter on the ``def`` line).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from qnb.backends.base import FAST_ARRAY_TYPES, DeviceArray
from qnb.dtypes import DType, as_dtype, bool_, f32, f64, i32
from qnb.errors import QnbCaptureError, QnbTypeError, caller_place
from qnb.frontend.capture import canonical, decode, describe, display
from qnb.frontend.parse import ParsedFunction
from qnb.language import _ArrayAnnotation, _TemplateAnnotation


class _Annotation:
    """A parameter's declared kind: array (dtype/ndim or None), scalar, template, or none."""

    __slots__ = ("kind", "dtype", "ndim")

    def __init__(self, kind, dtype=None, ndim=None):
        self.kind, self.dtype, self.ndim = kind, dtype, ndim


def _read_annotation(parsed: ParsedFunction, name: str, value) -> _Annotation:
    if value is None:
        return _Annotation(None)
    if isinstance(value, str):
        try:
            value = eval(value, parsed.fn.__globals__)  # noqa: S307 - the user's own annotation
        except Exception as exc:  # noqa: BLE001
            message = f"cannot read the annotation of {name!r}: {exc}"
            raise parsed.error(QnbTypeError, message, _param_node(parsed, name)) from None
    if isinstance(value, _ArrayAnnotation):
        return _Annotation("array", value.dtype, value.ndim)
    if isinstance(value, _TemplateAnnotation):
        return _Annotation("template")
    try:
        dtype = as_dtype(value)
    except TypeError:
        message = (
            f"parameter {name!r} has an annotation qnb does not understand: {value!r} (use "
            "qnb.Array, qnb.Array[dtype, ndim], qnb.i32, qnb.f32, qnb.f64 or qnb.Template)"
        )
        raise parsed.error(QnbTypeError, message, _param_node(parsed, name)) from None
    if dtype not in (i32, f32, f64):
        message = f"scalar parameter {name!r} must be qnb.i32, qnb.f32 or qnb.f64"
        raise parsed.error(QnbTypeError, message, _param_node(parsed, name))
    return _Annotation("scalar", dtype)


class ArgSpec(NamedTuple):
    """One parameter's entry in a launch signature: what the launch memo is keyed by, and
    what the ``signature`` key component and the lowering's parameter types come from.

    ``kind`` is "array" (``dtype``, ``ndim``), "scalar" (``dtype``) or "template":
    ``text`` is the value's canonical JSON (what the memo and the key compare, never
    ``==`` or ``repr``), ``value`` the value lowering uses, ``shown`` how the key shows it.
    """

    kind: str
    dtype: DType | None = None
    ndim: int | None = None
    text: str | None = None
    value: object = None
    shown: str | None = None

    def described(self) -> str:
        """How the ``signature`` key component shows this parameter."""
        if self.kind == "template":
            return self.shown
        if self.kind == "array":
            return f"Array[{self.dtype.name}, {self.ndim}]"
        return self.dtype.name


_FAST_ARRAY, _FAST_ANY_ARRAY, _FAST_FLOAT, _FAST_INT = "array", "any-array", "float", "int"


class _FastStep(NamedTuple):
    """What ``Kernel._fast_signature`` accepts for one parameter: ``check`` (one of the
    ``_FAST_*`` codes), the annotation's ``dtype`` and ``ndim`` (None for any), and the
    ``spec`` every accepted value has (None where it depends on the array)."""

    check: str
    dtype: DType | None
    ndim: int | None
    spec: ArgSpec | None


def _fast_plan(annotations) -> list[_FastStep] | None:
    """Per parameter, what ``Kernel._fast_signature`` accepts. None for a kernel with a
    Template parameter (its spec depends on the value)."""
    plan = []
    for a in annotations:
        if a.kind == "template":
            return None
        if a.kind == "array" and a.dtype is not None and a.ndim is not None:
            plan.append(_FastStep(_FAST_ARRAY, a.dtype, a.ndim, ArgSpec("array", a.dtype, a.ndim)))
        elif a.kind in ("array", None):  # an unannotated parameter: arrays only, here
            plan.append(_FastStep(_FAST_ANY_ARRAY, a.dtype, a.ndim, None))
        elif a.dtype is i32:
            plan.append(_FastStep(_FAST_INT, i32, None, ArgSpec("scalar", i32)))
        else:
            plan.append(_FastStep(_FAST_FLOAT, a.dtype, None, ArgSpec("scalar", a.dtype)))
    return plan


def _fixed_signature(plan) -> tuple[tuple | None, list | None]:
    """``(signature, checks)``: the signature every call the plan accepts has, where that
    is one (no parameter whose spec depends on the array passed), and per parameter
    ``(code, numpy dtype, dtype, ndim)``, the NumPy dtype an array is first compared with
    by identity (None where only the table ``_QNB_DTYPES`` decides); else (None, None)."""
    if plan is None or any(step.spec is None for step in plan):
        return None, None
    numpy_of = {dtype: numpy for numpy, dtype in _QNB_DTYPES.items()}
    checks = [(step.check, numpy_of.get(step.dtype), step.dtype, step.ndim) for step in plan]
    return tuple(step.spec for step in plan), checks


def _one_array_signature(fixed, numpy_dtype, dtype, ndim):
    """``Parameters._fast_signature`` for a kernel of one array parameter of a fixed dtype
    and rank (the commonest kernel), its loop over the parameters unrolled: the same
    checks, in the same order."""

    def fast_signature(args) -> tuple | None:
        if len(args) != 1:
            return None
        value = args[0]
        if type(value) not in FAST_ARRAY_TYPES or not value.flags.c_contiguous:
            return None
        found = value.dtype
        if found is not numpy_dtype and _QNB_DTYPES.get(found) is not dtype:
            return None
        return fixed if value.ndim == ndim else None

    return fast_signature


def _any_arrays_signature(count):
    """``Parameters._fast_signature`` for a kernel whose ``count`` parameters are all
    unannotated (``def k(x, y)``, arrays of any dtype and rank here): each array's spec
    found at once by its NumPy dtype and rank, as :func:`_plain_array_spec` finds it."""

    def fast_signature(args) -> tuple | None:
        if len(args) != count:
            return None
        signature = []
        for value in args:
            if type(value) not in FAST_ARRAY_TYPES or not value.flags.c_contiguous:
                return None
            spec = _SPECS_BY_NUMPY.get((value.dtype, value.ndim))
            if spec is None:
                return None
            signature.append(spec)
        return tuple(signature)

    return fast_signature


def _plain_array_spec(value, dtype, ndim) -> ArgSpec | None:
    """The array spec for a C-contiguous array of a fast-path type whose dtype and
    rank qnb supports and the annotation (``dtype``/``ndim``, None for any) allows; else
    None, and the full check decides (and explains)."""
    if type(value) not in FAST_ARRAY_TYPES or not value.flags.c_contiguous:
        return None
    got, rank = _QNB_DTYPES.get(value.dtype), value.ndim
    if got is None or not 1 <= rank <= 3:
        return None
    if (dtype is not None and got is not dtype) or ndim not in (None, rank):
        return None
    return _ARRAY_SPECS[got, rank]


def _param_node(parsed: ParsedFunction, name: str):
    """The ``def`` line's AST node of parameter ``name`` (errors point at it)."""
    return next((a for a in parsed.tree.args.args if a.arg == name), parsed.tree)


def _template_spec(value, form) -> ArgSpec:
    """A Template parameter's signature entry (its canonical JSON text, the value
    lowering uses, how the key shows it). The memo and the key both compare the
    canonical form (never ``==`` or ``repr``: ``0.0 == -0.0``, and a float subclass may
    print rounded); lowering uses the value the form decodes to, so what is compiled is
    what is keyed (a subclass is its plain value, a named tuple or enum member qnb's own
    stand-in: none of the class's own methods runs at compile time)."""
    from qnb import cache  # (imported on first use: ``import qnb`` stays light)

    text = cache.canonical_json(form)
    used = decode(form)
    # (what the key's signature holds: exact, so two values never share a key; an enum
    # member's or a named tuple's name has its module there)
    shown = f"Template = {display(form, exact=True)}"
    return ArgSpec("template", text=text, value=used, shown=shown)


_QNB_DTYPES = {d.numpy: d for d in (bool_, i32, f32, f64, as_dtype("f16"))}
# The fast path's array specs, made once: a NamedTuple costs a Python call to build.
_ARRAY_SPECS = {(d, n): ArgSpec("array", d, n) for d in _QNB_DTYPES.values() for n in (1, 2, 3)}
_SPECS_BY_NUMPY = {
    (numpy, n): _ARRAY_SPECS[d, n] for numpy, d in _QNB_DTYPES.items() for n in (1, 2, 3)
}


class _Example:
    """An example array for a fully annotated parameter (dtype and rank only)."""

    def __init__(self, dtype, ndim):
        self.dtype = dtype.numpy
        self.shape = (16,) * ndim


def _is_array(value) -> bool:
    return isinstance(value, np.ndarray | DeviceArray | _Example) or hasattr(
        value, "__cuda_array_interface__"
    )


def _is_template_value(value) -> bool:
    if isinstance(value, bool | np.bool_ | str) or value is None:
        return True
    if isinstance(value, DType | np.dtype) or (
        isinstance(value, type) and issubclass(value, np.generic)
    ):
        return True
    return isinstance(value, tuple)


def _not_constant(value, where: str = "") -> str:
    """What in a Template value is not a compile-time constant (for its error message)."""
    if isinstance(value, tuple):
        for index, item in enumerate(value):
            if canonical(item) is None:
                return _not_constant(item, f"{where}[{index}]")
    if where:
        return f"a tuple whose element {where} is of type {describe(value)}"
    return describe(value)


class Parameters:
    """A kernel's parameters as its annotations declare them, and the signature of the
    arguments of a launch."""

    def __init__(self, parsed: ParsedFunction, hints: dict):
        self.parsed = parsed
        self.name = parsed.name
        self._annotations = [_read_annotation(parsed, n, hints.get(n)) for n in parsed.param_names]
        self._fast_plan = _fast_plan(self._annotations)
        # Where every accepted call has the same signature (arrays of a fixed dtype and
        # rank, scalars): that one tuple, so a launch builds none and the memo compares it
        # by identity.
        self._fast_fixed, self._fast_checks = _fixed_signature(self._fast_plan)
        checks = self._fast_checks
        if checks is not None and len(checks) == 1 and checks[0][0] is _FAST_ARRAY:
            self._fast_signature = _one_array_signature(self._fast_fixed, *checks[0][1:])
        plan = self._fast_plan
        if plan and all(s.check is _FAST_ANY_ARRAY and s.dtype is s.ndim is None for s in plan):
            self._fast_signature = _any_arrays_signature(len(plan))

    @property
    def is_fully_annotated(self) -> bool:
        """True when every parameter's type is known without example arguments."""
        return all(
            a.kind == "scalar" or (a.kind == "array" and a.dtype is not None and a.ndim is not None)
            for a in self._annotations
        )

    def _positional(self, args: tuple, kwargs: dict) -> tuple:
        """``args`` followed by the keyword arguments, in parameter order."""
        names = self.parsed.param_names
        for name in kwargs:
            if name not in names:
                raise self._call_error(f"kernel {self.name!r} has no parameter {name!r}")
            if names.index(name) < len(args):
                raise self._call_error(
                    f"kernel {self.name!r} got parameter {name!r} both by position and by name"
                )
        missing = [n for n in names[len(args) :] if n not in kwargs]
        if missing:
            raise self._call_error(
                f"kernel {self.name!r} is missing {', '.join(map(repr, missing))} "
                f"(its parameters are {', '.join(names)})"
            )
        return (*args, *(kwargs[n] for n in names[len(args) :]))

    def _fast_signature(self, args) -> tuple | None:
        """The signature of the common call (C-contiguous NumPy arrays, or a loaded
        backend's own arrays, see ``FAST_ARRAY_TYPES``; Python floats for float parameters;
        Python ints in range for i32 ones), or None: then ``_signature`` decides, and
        explains what is wrong."""
        plan = self._fast_plan
        if plan is None or len(args) != len(plan):
            return None
        fixed = self._fast_fixed
        if fixed is None and len(plan) == 1:  # one array of any dtype or rank, unrolled
            code, dtype, ndim, _ = plan[0]
            if code is _FAST_ANY_ARRAY:
                spec = _plain_array_spec(args[0], dtype, ndim)
                return None if spec is None else (spec,)
        if fixed is not None:
            for value, (code, numpy_dtype, dtype, ndim) in zip(args, self._fast_checks):
                if code is _FAST_ARRAY:
                    if type(value) not in FAST_ARRAY_TYPES or not value.flags.c_contiguous:
                        return None
                    found = value.dtype
                    if found is not numpy_dtype and _QNB_DTYPES.get(found) is not dtype:
                        return None
                    if value.ndim != ndim:
                        return None
                elif code is _FAST_FLOAT:
                    if type(value) is not float:
                        return None
                elif type(value) is not int or not -(2**31) <= value < 2**31:
                    return None
            return fixed
        signature = []
        for value, (code, dtype, ndim, spec) in zip(args, plan):
            if code is _FAST_FLOAT:
                if type(value) is not float:
                    return None
            elif code is _FAST_INT:
                if type(value) is not int or not -(2**31) <= value < 2**31:
                    return None
            elif code is _FAST_ARRAY:  # a fixed dtype and rank: the spec is the plan's own
                if type(value) not in FAST_ARRAY_TYPES or not value.flags.c_contiguous:
                    return None
                if _QNB_DTYPES.get(value.dtype) is not dtype or value.ndim != ndim:
                    return None
            else:
                spec = _plain_array_spec(value, dtype, ndim)
                if spec is None:
                    return None
            signature.append(spec)
        return tuple(signature)

    def _signature(self, args) -> tuple[tuple, list]:
        parsed = self.parsed
        if len(args) != len(self._annotations):
            raise self._call_error(
                f"kernel {self.name!r} takes {len(self._annotations)} "
                f"argument{'' if len(self._annotations) == 1 else 's'} "
                f"({', '.join(parsed.param_names)}) but {len(args)} "
                f"{'was' if len(args) == 1 else 'were'} given"
            )
        signature = []
        runtime = []
        for name, annotation, value in zip(parsed.param_names, self._annotations, args):
            try:
                spec, runtime_value = self._arg_spec(name, annotation, value)
            except (QnbTypeError, QnbCaptureError) as err:
                node = _param_node(parsed, name)
                raise err.with_location(*parsed.position(node)) from None
            signature.append(spec)
            if spec.kind != "template":
                runtime.append(runtime_value)
        return tuple(signature), runtime

    def _arg_error(self, message):
        """An argument error; _signature points it at the parameter on the ``def`` line."""
        return QnbTypeError(message)

    def _def_error(self, message):
        """An error about the kernel as a whole, shown at its ``def`` line."""
        return self.parsed.error(QnbTypeError, message, self.parsed.tree)

    @staticmethod
    def _call_error(message):
        """An error about the arguments of a call as a whole, shown at the caller's line
        (the innermost frame outside qnb: the launch ``k[grid](...)`` the user wrote)."""
        return QnbTypeError(message, *caller_place())

    def _arg_spec(self, name, annotation, value):
        kind = annotation.kind
        if kind is None or kind == "array":  # the common case, kept cheap
            spec = _plain_array_spec(value, annotation.dtype, annotation.ndim)
            if spec is not None:
                return spec, value
        if kind == "template" or (kind is None and _is_template_value(value)):
            try:
                form = canonical(value)
            except QnbCaptureError as err:
                raise QnbCaptureError(f"Template parameter {name!r}: {err.message}") from None
            if form is None:
                raise self._arg_error(
                    f"Template parameter {name!r} must be a bool, int, float, str, "
                    f"None, dtype or tuple of these, not {_not_constant(value)}"
                )
            return _template_spec(value, form), None
        if _is_array(value):
            if kind == "scalar":
                raise self._arg_error(
                    f"parameter {name!r} is a {annotation.dtype} scalar; got an array "
                    "(pass a number, or read an element inside the kernel)"
                )
            return self._array_spec(name, annotation, value), value
        if kind == "array":
            raise self._arg_error(
                f"parameter {name!r} expects an array, got {type(value).__name__}"
            )
        if isinstance(value, bool | np.bool_):
            raise self._arg_error(
                f"parameter {name!r} is a {annotation.dtype or 'number'}; "
                "got a bool (annotate it qnb.Template to branch on it)"
            )
        if isinstance(value, int | np.integer):
            dtype = annotation.dtype or i32
            if dtype is i32 and not -(2**31) <= int(value) < 2**31:
                raise self._arg_error(f"parameter {name!r}: {value} does not fit in i32")
            return ArgSpec("scalar", dtype), (int(value) if dtype is i32 else float(value))
        if isinstance(value, float | np.floating):
            dtype = annotation.dtype or f32
            if dtype is i32:
                raise self._arg_error(f"parameter {name!r} is qnb.i32; got the float {value!r}")
            return ArgSpec("scalar", dtype), float(value)
        raise self._arg_error(
            f"parameter {name!r}: qnb cannot pass a {type(value).__name__} to a "
            "kernel (arrays, numbers, or Template values)"
        )

    def _array_spec(self, name, annotation, value):
        try:
            dtype = as_dtype(value.dtype)
        except TypeError:
            raise self._arg_error(
                f"array {name!r} has dtype {value.dtype}, which qnb does not "
                "support; convert it with .astype(np.float32) (or f16, f64, "
                "int32, bool)"
            ) from None
        ndim = len(value.shape)
        if isinstance(value, np.ndarray) and not value.flags.c_contiguous:
            raise self._arg_error(
                f"array {name!r} is not C-contiguous; pass "
                "np.ascontiguousarray(x) (and copy results back)"
            )
        if ndim not in (1, 2, 3):
            raise self._arg_error(
                f"array {name!r} has {ndim} dimensions; qnb kernels take 1-D, 2-D or 3-D arrays"
            )
        if annotation.dtype is not None and annotation.dtype is not dtype:
            raise self._arg_error(
                f"array {name!r} must be {annotation.dtype}, got {dtype} "
                f"(convert with .astype({annotation.dtype.numpy.name!r}))"
            )
        if annotation.ndim is not None and annotation.ndim != ndim:
            raise self._arg_error(f"array {name!r} must be {annotation.ndim}-D, got {ndim}-D")
        return ArgSpec("array", dtype, ndim)

    def _example_args(self, args):
        if args:
            return args
        if not self.is_fully_annotated:
            raise self._def_error(
                f"kernel {self.name!r} has parameters without full annotations; "
                "pass example arguments"
            )
        examples = []
        for annotation in self._annotations:
            if annotation.kind == "scalar":
                examples.append(0 if annotation.dtype is i32 else 0.0)
            else:
                examples.append(_Example(annotation.dtype, annotation.ndim))
        return examples
