"""Each typing rule bound to the language object it implements, checked at import.

A rule is bound to the stub a user reads in :mod:`qnb.language` (``@rule(language.exp)``,
``@rule(language.Tile16.sum, language.Vec16.sum)``), as cuTile binds ``@impl(ct.add)``:
no string joins the two. :func:`check_bindings` refuses, when :mod:`qnb.frontend.semantics`
is imported, a stub without a rule, a rule bound to no stub, two rules for one method
name, and a rule whose parameters (names, order, defaults, keyword-only) differ from its
stub's signature, so a mismatch fails at once, not when a kernel first calls it.

A rule is ``fn(builder, node, target, <the stub's parameters>)``: the binding binds a
call's arguments to the parameters as Python would (with qnb's messages) and passes
each as the walker's value (a :class:`Py` for a default). ``target`` is the object
called (a shaped constructor tells its shape) or, for a method, the ``_Method`` (its
receiver and node). A rule that reads its own arguments (``Vec16.load(arr, *window)``
takes several forms, each with its own message) is bound with ``accepts=``, a function
whose signature declares what it takes.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from qnb.errors import QnbTypeError

_PREFIX = 3  # (builder, node, target) before a rule's own parameters


class BindingError(TypeError):
    """A rule and the language stubs disagree (a developer's error, raised at import)."""


class Py:
    """A compile-time Python value (a captured constant, a Template value, a literal…).

    The walker's and the rules' (``qnb.frontend.semantics.Py`` is this class); it lives
    here because a binding passes a parameter's default as one."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        return f"Py({self.value!r})"


def is_number(value) -> bool:
    """Whether a compile-time value (a ``Py``'s) is a Python number (bools count)."""
    return isinstance(value, bool | int | float) and not isinstance(value, complex)


def _stub_name(stub) -> str:
    return f"qnb.{getattr(stub, '__qualname__', repr(stub))}"


def _call_parameters(stub) -> tuple[bool, list[inspect.Parameter]]:
    """Whether ``stub`` is a method of a tile or vec value (its first parameter is
    ``self``), and the parameters a call passes (a class: its ``__init__``'s)."""
    parameters = list(inspect.signature(stub).parameters.values())
    method = not isinstance(stub, type) and bool(parameters) and parameters[0].name == "self"
    return method, parameters[1:] if method else parameters


def stub_parameters(stub) -> list[inspect.Parameter]:
    """What a call of ``stub`` passes: its parameters without ``self`` (a class: its
    ``__init__``'s)."""
    return _call_parameters(stub)[1]


class Rule:
    """A typing rule bound to its stubs; called as the walker calls every intrinsic:
    ``rule(builder, node, target, args, kwargs)``."""

    __slots__ = (
        "before",
        "defaults",
        "fn",
        "keyword_only",
        "name",
        "names",
        "parameters",
        "positional",
        "reads_arguments",
        "simple",
        "stubs",
    )

    def __init__(self, fn, stubs, name, accepts, before):
        self.fn = fn
        self.stubs = stubs
        self.name = name
        self.before = before
        self.reads_arguments = accepts is not None
        if accepts is None:
            self.parameters = list(inspect.signature(fn).parameters.values())[_PREFIX:]
        else:
            self.parameters = list(inspect.signature(accepts).parameters.values())
        self.names = [p.name for p in self.parameters]
        self.positional = sum(p.kind is p.POSITIONAL_OR_KEYWORD for p in self.parameters)
        self.keyword_only = [p.name for p in self.parameters if p.kind is p.KEYWORD_ONLY]
        self.defaults = {p.name: Py(p.default) for p in self.parameters if p.default is not p.empty}
        # every parameter positional-or-keyword, nothing before binding: a call that gives
        # each by position passes its arguments straight through
        self.simple = before is None and accepts is None and self.positional == len(self.names)

    def __repr__(self):
        return f"<rule {self.fn.__qualname__} for {', '.join(map(_stub_name, self.stubs))}>"

    def spelled(self, target) -> str:
        """The call's name in an arity message (a shaped constructor names its shape)."""
        return self.name(target) if callable(self.name) else self.name

    def __call__(self, builder, node, target, args, kwargs):
        if self.simple and not kwargs and len(args) == self.positional:
            return self.fn(builder, node, target, *args)
        if self.before is not None:
            self.before(builder, node, target)
        if self.reads_arguments:
            return self.fn(builder, node, target, args, kwargs)
        values = self.bind(builder, node, target, args, kwargs)
        if not self.keyword_only:
            return self.fn(builder, node, target, *values)
        split = len(values) - len(self.keyword_only)
        keywords = dict(zip(self.keyword_only, values[split:]))
        return self.fn(builder, node, target, *values[:split], **keywords)

    def bind(self, builder, node, target, args, kwargs) -> list:
        """The arguments of a call, one per parameter, as Python binds them (defaults as
        :class:`Py`); arity errors in Python's words."""
        names = self.names
        if not kwargs and len(args) == self.positional == len(names):
            return args  # every parameter given by position, the common call
        if self.keyword_only and len(args) > self.positional:
            keywords = self.keyword_only
            raise builder.error(
                QnbTypeError,
                f"{self.spelled(target)}() takes {self.positional} positional arguments "
                f"({len(args)} given); {' and '.join(keywords)} are keyword arguments "
                f"({keywords[0]}=...)",
                node,
            )
        if len(args) > len(names):
            raise builder.error(
                QnbTypeError,
                f"{self.spelled(target)}() takes at most {len(names)} arguments "
                f"({len(args)} given)",
                node,
            )
        bound = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names:
                raise builder.error(
                    QnbTypeError,
                    f"{self.spelled(target)}() got an unexpected keyword argument {key!r}",
                    node,
                )
            if key in bound:
                raise builder.error(
                    QnbTypeError, f"{self.spelled(target)}() got multiple values for {key!r}", node
                )
            bound[key] = value
        for key in names:
            if key not in bound:
                if key not in self.defaults:
                    raise builder.error(
                        QnbTypeError,
                        f"{self.spelled(target)}() is missing the argument {key!r}",
                        node,
                    )
                bound[key] = self.defaults[key]
        return [bound[n] for n in names]


def rule(
    *stubs,
    name: str | Callable | None = None,
    accepts: Callable | None = None,
    before: Callable | None = None,
):
    """Bind the decorated rule to ``stubs`` (objects of :mod:`qnb.language`).

    ``name``: the call as arity messages spell it (default: the stub's ``__name__``; a
    function of the target for shaped constructors). ``accepts``: for a rule that reads
    its own ``(args, kwargs)``, a function whose signature is what it takes. ``before``:
    ``before(builder, node, target)``, run before the arguments are bound (a method's
    receiver check that comes first)."""

    def bind(fn) -> Rule:
        if not stubs:
            raise BindingError(f"the rule {fn.__qualname__} is bound to no language stub")
        return Rule(fn, stubs, name if name is not None else stubs[0].__name__, accepts, before)

    return bind


def _same_default(a, b) -> bool:
    if a is inspect.Parameter.empty or b is inspect.Parameter.empty:
        return a is b
    return type(a) is type(b) and a == b


def _default(parameter: inspect.Parameter) -> str:
    if parameter.default is parameter.empty:
        return "has no default"
    return f"defaults to {parameter.default!r}"


def _spelled(parameters: list[inspect.Parameter]) -> str:
    return str(inspect.Signature(parameters))


def signature_mismatch(rule_: Rule, stub, theirs: list | None = None) -> str | None:
    """Why ``rule_``'s parameters differ from ``stub``'s signature (None if they agree);
    ``theirs``: the stub's :func:`stub_parameters`, where the caller has them."""
    mine = rule_.parameters
    theirs = stub_parameters(stub) if theirs is None else theirs
    for position, (a, b) in enumerate(zip(mine, theirs)):
        if a.name != b.name:
            why = f"parameter {position + 1} is {a.name!r} in the rule, {b.name!r} in the stub"
        elif a.kind is not b.kind:
            why = (
                f"{a.name!r} is {a.kind.description} in the rule, {b.kind.description} in the stub"
            )
        elif not _same_default(a.default, b.default):
            why = f"{a.name!r} {_default(a)} in the rule, {_default(b)} in the stub"
        else:
            continue
        break
    else:
        if len(mine) == len(theirs):
            return None
        why = f"the rule takes {len(mine)} parameters, the stub {len(theirs)}"
    return (
        f"the rule {rule_.fn.__qualname__} takes {_spelled(mine)} but {_stub_name(stub)} "
        f"takes {_spelled(theirs)}: {why}"
    )


def check_bindings(rules: list[Rule], stubs: list) -> None:
    """Refuse (BindingError) a stub of ``stubs`` without a rule, a rule bound to no stub
    or to one not among ``stubs``, a method name with two rules, and a rule whose
    parameters differ from its stub's."""
    known = {id(s) for s in stubs}
    bound: dict[int, Rule] = {}
    method_rules: dict[str, Rule] = {}
    for rule_ in rules:
        if not rule_.stubs:
            raise BindingError(f"the rule {rule_.fn.__qualname__} is bound to no language stub")
        for stub in rule_.stubs:
            if id(stub) not in known:
                raise BindingError(
                    f"the rule {rule_.fn.__qualname__} is bound to {stub!r}, which is not a "
                    "stub of qnb.language"
                )
            if id(stub) in bound:
                raise BindingError(
                    f"{_stub_name(stub)} has two rules: {bound[id(stub)]!r} and {rule_!r}"
                )
            bound[id(stub)] = rule_
            method, parameters = _call_parameters(stub)
            mismatch = signature_mismatch(rule_, stub, parameters)
            if mismatch is not None:
                raise BindingError(mismatch)
            if method:
                other = method_rules.setdefault(stub.__name__, rule_)
                if other is not rule_:
                    raise BindingError(
                        f"the method {stub.__name__!r} has two rules ({other!r} and "
                        f"{rule_!r}); a method is found by its name, whatever its receiver"
                    )
    missing = [s for s in stubs if id(s) not in bound]
    if missing:
        raise BindingError(
            f"no typing rule for {', '.join(map(_stub_name, missing))}: bind one with "
            "@rule(<the stub>) in qnb/frontend/semantics.py"
        )


def language_stubs(language) -> list:
    """The objects of the language module ``language`` that a kernel calls: its tagged
    functions (``qnb.exp``, ``qnb.where`` …), the ``Tile16`` class (``Tile16(dtype)``),
    and the constructors and methods of ``Tile16`` and ``Vec16`` (every shape's class
    shares their rules)."""
    found = [
        value
        for value in vars(language).values()
        if inspect.isfunction(value) and hasattr(value, "_qnb_intrinsic")
    ]
    for cls in (language.Tile16, language.Vec16):
        if "__init__" in vars(cls):
            found.append(cls)
        for key, value in vars(cls).items():
            function = value.__func__ if isinstance(value, staticmethod) else value
            if not key.startswith("_") and inspect.isfunction(function):
                found.append(function)
    return found
