"""Decoration time: a Python function's source becomes a checked AST.

Unsupported constructs and malformed slices raise :class:`QnbSyntaxError` here, at
the ``def``, with the user's own file, line and column. The parse also finds every
name the function reads from its enclosing scope (the *captured* names), as
attribute chains (``math.pi`` → ``("math", "pi")``) so module attributes can be
captured one by one.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass, field

from qnb.errors import QnbSyntaxError, QnbTypeError, caller_position

# Python builtins a kernel may call.
KERNEL_BUILTINS = ("range", "min", "max", "abs", "float", "int", "bool", "len")

_ALLOWED_STMTS = (
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.Expr,
    ast.If,
    ast.For,
    ast.While,
    ast.Break,
    ast.Continue,
    ast.Pass,
    ast.Return,
)
_ALLOWED_EXPRS = (
    ast.BoolOp,
    ast.BinOp,
    ast.UnaryOp,
    ast.Compare,
    ast.Call,
    ast.Constant,
    ast.Attribute,
    ast.Subscript,
    ast.Name,
    ast.Tuple,
    ast.IfExp,
    ast.Slice,
    ast.List,  # compile-time lists (qnb/frontend/lists.py)
    ast.ListComp,
)
_ALLOWED_OTHER = (
    ast.keyword,
    ast.arguments,
    ast.arg,
    ast.Load,
    ast.Store,
    ast.operator,
    ast.unaryop,
    ast.cmpop,
    ast.boolop,
    ast.expr_context,
    ast.comprehension,
)
_NAMES = {
    ast.Lambda: "lambda",
    ast.ListComp: "list comprehensions",
    ast.DictComp: "dict comprehensions",
    ast.SetComp: "set comprehensions",
    ast.GeneratorExp: "generator expressions",
    ast.Dict: "dicts",
    ast.Set: "sets",
    ast.List: "lists",
    ast.JoinedStr: "f-strings",
    ast.Try: "try/except",
    ast.With: "with",
    ast.Raise: "raise",
    ast.Import: "import",
    ast.ImportFrom: "import",
    ast.Global: "global",
    ast.Nonlocal: "nonlocal",
    ast.Delete: "del",
    ast.ClassDef: "class definitions",
    ast.FunctionDef: "nested functions",
    ast.AsyncFunctionDef: "async functions",
    ast.Assert: "assert",
    ast.Starred: "*args",
    ast.NamedExpr: "the walrus operator",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.Match: "match",
    ast.AsyncFor: "async for",
    ast.AsyncWith: "async with",
}


@dataclass
class ParsedFunction:
    """A kernel or func's checked source and what it reads from outside."""

    fn: object
    name: str
    qualname: str
    filename: str
    firstlineno: int  # absolute line of the ``def`` (decorators excluded)
    source: str  # dedented source from the ``def`` line on
    tree: ast.FunctionDef
    indent: int  # columns removed by dedenting
    param_names: list[str]
    local_names: set[str]
    chains: list[tuple[str, ...]] = field(default_factory=list)  # captured attribute chains
    # The chains read only inside ``qnb.static(...)``: Python runs them at compile time, so
    # they may name any function the cache key can identify (``capture.library_name``).
    static_chains: set[tuple[str, ...]] = field(default_factory=set)

    def position(self, node) -> tuple[str, int, int]:
        """The absolute (filename, line, col) of an AST node of this function."""
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        return self.filename, self.firstlineno + line - 1, col + self.indent

    def error(self, cls, message, node):
        filename, line, col = self.position(node)
        return cls(message, filename, line, col)

    @property
    def unit_name(self) -> str:
        """``module:qualname``; a launch names a second function object with the same one
        ``module:qualname#2`` (``Kernel._resolve``)."""
        module = getattr(self.fn, "__module__", None) or "?"
        return f"{module}:{self.qualname}"


def _unwrapped(fn):
    """The function a decorator that sets ``__wrapped__`` (``functools.wraps``, also on a
    callable object) wrapped, following the chain to its end: the source inspect reads is
    that function's, so its globals, closure and code are the ones the kernel's names mean.
    A qnb kernel or func is not looked into (decorating one again is an error)."""
    seen = set()
    while id(fn) not in seen and getattr(fn, "_qnb_parsed", None) is None:
        seen.add(id(fn))
        inner = getattr(fn, "__wrapped__", None)
        if inner is None or getattr(inner, "_qnb_parsed", None) is not None:
            break
        if not (inspect.isfunction(inner) or hasattr(inner, "__wrapped__")):
            break
        fn = inner
    return fn


def parse_function(fn) -> ParsedFunction:
    """Parse and check ``fn``; raise QnbSyntaxError on anything a kernel cannot do."""
    fn = _unwrapped(fn)
    name = getattr(fn, "__name__", "?")
    if not inspect.isfunction(fn):
        inner = getattr(fn, "_qnb_parsed", None)
        if inner is not None:  # @qnb.func on a @qnb.kernel, or a kernel decorated twice
            kind = "@qnb.kernel" if type(fn).__name__ == "Kernel" else "@qnb.func"
            raise inner.error(
                QnbTypeError,
                f"{name!r} is already a {kind}; decorate a plain function with one of "
                "@qnb.kernel or @qnb.func",
                inner.tree,
            )
        raise QnbTypeError(
            f"@qnb.kernel and @qnb.func decorate a Python function, not {type(fn).__name__}",
            *caller_position(),
        )
    if name == "<lambda>":
        code = fn.__code__
        raise QnbSyntaxError(
            "a kernel or func is written with def, not lambda",
            code.co_filename,
            code.co_firstlineno,
            0,
        )
    try:
        lines, start = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or inspect.getfile(fn)
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        raise QnbSyntaxError(
            f"cannot read the source of {name!r}: define kernels in a file or a notebook cell",
            getattr(code, "co_filename", None),
            getattr(code, "co_firstlineno", None),
            0,
        ) from None
    raw = "".join(lines)
    source = textwrap.dedent(raw)
    first = lines[0] if lines else ""
    indent = len(first) - len(first.lstrip())
    try:
        module = ast.parse(source)
    except SyntaxError as exc:
        raise QnbSyntaxError(
            f"cannot parse {name!r}: {exc.msg}",
            filename,
            start + (exc.lineno or 1) - 1,
            (exc.offset or 1) - 1 + indent,
        ) from None
    tree = module.body[0] if module.body else None
    if not isinstance(tree, ast.FunctionDef):
        raise QnbSyntaxError(
            f"{name!r} is not a plain function definition", filename, start, indent
        )
    # Line numbers relative to the ``def`` line (decorators come before it).
    def_offset = tree.lineno - 1
    tree.decorator_list = []
    for node in ast.walk(tree):
        if hasattr(node, "lineno"):
            node.lineno -= def_offset
            if getattr(node, "end_lineno", None) is not None:
                node.end_lineno -= def_offset
    source = "\n".join(source.splitlines()[def_offset:]) + "\n"
    parsed = ParsedFunction(
        fn=fn,
        name=name,
        qualname=getattr(fn, "__qualname__", name),
        filename=filename,
        firstlineno=start + def_offset,
        source=source,
        tree=tree,
        indent=indent,
        param_names=[a.arg for a in tree.args.args],
        local_names=set(),
    )
    _check_signature(parsed)
    _Checker(parsed).check_body(tree.body)
    _check_returns(parsed, tree.body, inside=None)
    parsed.local_names = _local_names(tree)
    parsed.chains, parsed.static_chains = _captured_chains(tree, parsed.local_names)
    return parsed


def _check_signature(parsed: ParsedFunction) -> None:
    args = parsed.tree.args
    for extra, what in ((args.vararg, "*args"), (args.kwarg, "**kwargs")):
        if extra is not None:
            raise parsed.error(QnbSyntaxError, f"kernels cannot take {what}", extra)
    if args.kwonlyargs or args.posonlyargs:
        node = (args.kwonlyargs or args.posonlyargs)[0]
        raise parsed.error(QnbSyntaxError, "kernels take plain positional parameters only", node)
    if args.defaults:
        raise parsed.error(
            QnbSyntaxError, "kernel parameters cannot have default values", args.defaults[0]
        )


RETURN_PLACES = (
    "a return may end the function, or end a branch of an `if` decided at compile time "
    "(`if qnb.static(...)`)"
)


def _check_returns(parsed: ParsedFunction, body: list, inside) -> None:
    """Where a ``return`` may stand: last in the function's body, or last in a branch
    of an ``if`` (that lowering then finds is decided at compile time), never in a loop
    and never before other statements of its block (they would never run). Checked at
    decoration; whether each such ``if`` is decided at compile time is known at the
    first launch."""
    for index, stmt in enumerate(body):
        if isinstance(stmt, ast.Return):
            if inside is not None:
                raise parsed.error(
                    QnbSyntaxError, f"return inside a {inside} loop: {RETURN_PLACES}", stmt
                )
            if index != len(body) - 1:
                raise parsed.error(
                    QnbSyntaxError,
                    f"the statements after this return never run: {RETURN_PLACES}",
                    stmt,
                )
        elif isinstance(stmt, ast.If):
            _check_returns(parsed, stmt.body, inside)
            _check_returns(parsed, stmt.orelse, inside)
        elif isinstance(stmt, ast.For | ast.While):
            loop = "for" if isinstance(stmt, ast.For) else "while"
            _check_returns(parsed, stmt.body, inside or loop)


class _Checker:
    """Walks a function body and rejects what the language does not support."""

    def __init__(self, parsed: ParsedFunction):
        self.parsed = parsed

    def fail(self, message, node):
        raise self.parsed.error(QnbSyntaxError, message, node)

    def check_body(self, body):
        for stmt in body:
            self.check_stmt(stmt)

    def check_stmt(self, stmt):
        if not isinstance(stmt, _ALLOWED_STMTS):
            what = _NAMES.get(type(stmt), type(stmt).__name__)
            self.fail(f"{what} cannot be used inside a kernel", stmt)
        if isinstance(stmt, ast.For):
            if stmt.orelse:
                self.fail("for ... else is not supported inside a kernel", stmt.orelse[0])
            if not isinstance(stmt.target, ast.Name):
                self.fail("a for loop needs a single loop variable", stmt.target)
        if isinstance(stmt, ast.While) and stmt.orelse:
            self.fail("while ... else is not supported inside a kernel", stmt.orelse[0])
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                self.check_target(target)
        if isinstance(stmt, ast.AugAssign | ast.AnnAssign):
            self.check_target(stmt.target)
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.stmt):
                self.check_stmt(child)
            elif child is not getattr(stmt, "target", None) and child not in getattr(
                stmt, "targets", ()
            ):
                self.check_expr(child)

    def check_target(self, target):
        if isinstance(target, ast.Name):
            return
        if isinstance(target, ast.Tuple):
            for element in target.elts:
                if not isinstance(element, ast.Name | ast.Subscript):
                    self.fail("tuple assignment targets must be names or elements", element)
                self.check_target(element)
            return
        if isinstance(target, ast.Subscript):
            is_full_tile = (
                isinstance(target.slice, ast.Slice)
                and target.slice.lower is None
                and target.slice.upper is None
                and target.slice.step is None
            )
            if not is_full_tile:  # ``t[:] = ...`` is the one slice without bounds
                self.check_subscript(target)
            self.check_expr(target.value)
            return
        self.fail("this kind of assignment target is not supported inside a kernel", target)

    def check_subscript(self, node: ast.Subscript):
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if _is_new_axis(parts):  # v[:, None] / v[None, :]: a vec as a column or a row
            return
        for part in parts:
            if isinstance(part, ast.Slice):
                if part.lower is None or part.upper is None:
                    self.fail("start and stop indices are required in a slice", part)
                if part.step is not None:
                    self.fail("slices with a step are not supported", part.step)
                for bound in (part.lower, part.upper):
                    if is_negative_literal(bound):
                        self.fail("Negative indices are not supported in a slice", bound)
            # A literal negative element index (arr[-1]) is refused when the kernel is
            # lowered: only then is it known whether the base is an array or a tile (refused)
            # or a tuple or arr.shape (allowed, as in Python).
            self.check_expr(part, in_subscript=True)

    def check_expr(self, node, in_subscript=False):
        if isinstance(node, _ALLOWED_OTHER):
            return
        if not isinstance(node, _ALLOWED_EXPRS):
            what = _NAMES.get(type(node), type(node).__name__)
            self.fail(f"{what} cannot be used inside a kernel", node)
        if isinstance(node, ast.Call) and _is_static_call(node):
            return  # any Python expression may run at compile time
        if isinstance(node, ast.ListComp):
            generator = node.generators[0]
            if len(node.generators) != 1 or generator.ifs or not _is_static_call(generator.iter):
                self.fail(
                    "list comprehensions in a kernel make compile-time lists: "
                    "[expr for k in qnb.static(range(n))], one for and no if",
                    node,
                )
        if isinstance(node, ast.Slice) and not in_subscript:
            self.fail("a slice is only allowed inside [...]", node)
        if isinstance(node, ast.Subscript):
            self.check_subscript(node)
            self.check_expr(node.value)
            return
        for child in ast.iter_child_nodes(node):
            self.check_expr(child)


def is_negative_literal(node) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return isinstance(node.operand, ast.Constant) and isinstance(
            node.operand.value, int | float
        )
    return isinstance(node, ast.Constant) and isinstance(node.value, int | float) and node.value < 0


def _is_static_call(node: ast.Call) -> bool:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name == "static"


def _local_names(tree: ast.FunctionDef) -> set[str]:
    """The function's own names: its parameters and every name it assigns, but not a
    comprehension's loop variables (inside ``qnb.static(...)``), which live in the
    comprehension's own scope, as in Python."""
    own_scope = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            for generator in node.generators:
                own_scope.update(id(n) for n in ast.walk(generator.target))
    names = {a.arg for a in tree.args.args}
    for node in ast.walk(tree):
        stored = isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)
        if stored and id(node) not in own_scope:
            names.add(node.id)
    return names


def _captured_chains(
    tree: ast.FunctionDef, local_names: set[str]
) -> tuple[list[tuple[str, ...]], set[tuple[str, ...]]]:
    """Every maximal attribute chain rooted at a name that is not local, in first-use order,
    and those of them read only inside ``qnb.static(...)``."""
    chains: list[tuple[str, ...]] = []
    seen = set()
    outside_static = set()

    def add(chain, in_static):
        if chain not in seen:
            seen.add(chain)
            chains.append(chain)
        if not in_static:
            outside_static.add(chain)

    def visit(node, in_static):
        if isinstance(node, ast.Attribute):
            parts = []
            base = node
            while isinstance(base, ast.Attribute):
                parts.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name):
                if base.id not in local_names:
                    add((base.id, *reversed(parts)), in_static)
                return
            visit(base, in_static)
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id not in local_names:
                add((node.id,), in_static)
            return
        if isinstance(node, ast.Call) and _is_static_call(node):
            visit(node.func, in_static)
            for child in [*node.args, *node.keywords]:
                visit(child, True)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, in_static)

    for stmt in tree.body:
        visit(stmt, False)
    return chains, set(chains) - outside_static


def _is_new_axis(parts) -> bool:
    """``[:, None]`` or ``[None, :]``: the one slice without bounds an expression may hold."""
    if len(parts) != 2:
        return False
    kinds = [
        "full"
        if isinstance(p, ast.Slice) and p.lower is None and p.upper is None and p.step is None
        else "none"
        if isinstance(p, ast.Constant) and p.value is None
        else "other"
        for p in parts
    ]
    return sorted(kinds) == ["full", "none"]
