"""Scopes: what each name of the function being lowered is bound to, and the kernel's
runtime variables with their types.

A name is bound to one of (:data:`Binding`): a runtime variable (:class:`Var`), an array
(``ir.ArrayView``), a compile-time value (``Py``: a number, a dtype, a tuple…), a
compile-time list (``lists.StaticList``), a tuple of lowered values, or, after runtime
control flow, :class:`Ambiguous` (different compile-time values on different paths: reading
it is an error) or :class:`PathNumber` (different compile-time numbers: a runtime variable
once read). A compile-time binding has no runtime storage, so a runtime ``if`` or loop
cannot choose between two of them: each branch (or loop body) is lowered from the bindings
at its entry, and :meth:`Scopes.merge_paths` joins what the paths left.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from qnb import ir
from qnb.dtypes import DType, bool_, is_dtype_like
from qnb.errors import QnbTypeError
from qnb.frontend import lists, operators
from qnb.frontend.bindings import Py, is_number
from qnb.frontend.capture import UNDEFINED
from qnb.frontend.parse import ParsedFunction
from qnb.frontend.values import py_name


@dataclass
class Var:
    """A name bound to a runtime variable: its IR name and type."""

    name: str  # the IR name
    type: ir.Type
    block: tuple = ()  # the runtime blocks open where it was bound (Scopes.block_path)

    def read(self, loc: ir.Loc) -> ir.Var:
        return ir.Var(self.type, loc, self.name)


@dataclass(eq=False)
class Ambiguous:
    """A name that runtime control flow leaves bound to different compile-time values
    (an array, a tuple, a dtype…) on different paths: reading it is an error."""

    name: str
    node: ast.AST  # the assignment under the runtime condition
    what: str  # what the name holds on some path ("an array", "a tuple"…)


@dataclass(eq=False)
class PathNumber:
    """A name that runtime control flow leaves bound to compile-time numbers that differ
    between paths (a ``qnb.static`` loop's, under a runtime ``if``), or to one on some paths
    only: a runtime variable, made when first read (see Pending)."""

    name: str
    node: ast.AST
    numbers: list  # the Python numbers it may hold (they type the variable)
    var: Var | None = None

    def settled(self):
        """The runtime variable, once made; else this binding."""
        return self if self.var is None else self.var


@dataclass(eq=False)
class Pending:
    """A statement-to-be, placed where a ``qnb.static`` loop inside a runtime block left
    ``name`` bound to a compile-time number. If the number turns out to differ between
    paths (the name becomes a runtime variable after the block) this is the assignment of
    that variable, at the point Python made the binding (before any later break or
    continue); otherwise it is dropped, so the generated code has no dead stores."""

    name: str
    value: object
    loc: ir.Loc
    assign: ir.Assign | None = None


Binding = Var | ir.ArrayView | Py | lists.StaticList | tuple | Ambiguous | PathNumber | None

UNBOUND = object()  # "no binding" in a path's changes (None is a binding: a func's `x = None`)


@dataclass(eq=False)
class LoopWatch:
    """Compile-time bindings a runtime loop's body reads before it may rebind them."""

    frame: Frame
    entry: dict
    reads: dict[str, ast.AST] = field(default_factory=dict)


class Frame:
    """One function being lowered: the kernel itself or an inlined func."""

    def __init__(self, parsed: ParsedFunction, unit: int, unit_name: str, roots: dict, prefix: str):
        self.parsed = parsed
        self.unit = unit
        self.unit_name = unit_name
        self.roots = roots
        self.prefix = prefix
        self.scope: dict[str, Binding] = {}
        # Parameters bound to the caller's Tile16/Vec16 variable: in-place ops reach it.
        self.aliases: set[str] = set()
        # Aliased parameters reassigned under a runtime condition (name -> that statement):
        # whether they still are the caller's tile depends on the run.
        self.detached: dict[str, ast.AST] = {}
        self.bound_at: dict[str, ast.AST] = {}  # where a compile-time binding was made
        self.base_depth = 0  # the runtime block depth its body starts at
        # Runtime variables assigned a compile-time number outside runtime control flow and
        # not assigned since: qnb.static(...) may read them (``n = 2``, ``rows, cols = shape``).
        self.known: dict[str, object] = {}
        self.pending: dict[str, list[Pending]] = {}  # name -> its unresolved Pending


class Scopes:
    """The frames being lowered (the kernel's, then each inlined func's), the kernel's
    runtime variables (``joined``: name -> type, widened to every dtype assigned) and
    where the walk stands in runtime control flow."""

    def __init__(self, lower, declared: dict[str, ir.Type]):
        self.lower = lower  # the walker: emits, locates errors, types values
        self.frames: list[Frame] = []
        self.declared = declared  # variable types widened by an earlier pass
        self.joined: dict[str, ir.Type] = {}
        self.widened = False
        self.display: dict[str, str] = {}  # IR local -> the name a trace shows
        self.counter = 0
        self.block_depth = 0  # runtime blocks (if branches, loop bodies) open now
        self.block_path: tuple = ()  # an id per runtime block open now, outermost first
        self.blocks_opened = 0
        self.static_blocks: list[int] = []  # block_depth where each static loop began
        self.loop_watches: list[LoopWatch] = []

    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    def fresh(self, hint: str) -> str:
        """A new IR name. It has a "." (no Python identifier has one) and a number no
        other generated name has, so it never meets a user's variable."""
        self.counter += 1
        return f"{hint}.{self.counter}"

    def in_runtime_block(self) -> bool:
        """Whether a static loop starting now is the outermost one of a runtime block
        (the numbers it leaves bound may become runtime variables after the block)."""
        return self.block_depth > self.frame.base_depth and (
            not self.static_blocks or self.static_blocks[-1] < self.block_depth
        )

    # ------------------------------------------------------------------ variables

    def bind_local(self, name, type_, node) -> Var:
        """Declare (or reuse) the IR variable for a Python local."""
        self.frame.known.pop(name, None)
        existing = self.frame.scope.get(name)
        if isinstance(existing, Var):
            self.record_type(existing.name, type_, existing.type, node)
            return existing
        ir_name = self.frame.prefix + name
        if ir_name in self.joined:
            ir_name = self.fresh(ir_name)
        declared = self.declared.get(ir_name, type_)
        if declared.kind != type_.kind or declared.shape != type_.shape:
            declared = type_
        var = Var(ir_name, declared, self.block_path)
        self.display[ir_name] = name
        self.frame.scope[name] = var
        self.record_type(ir_name, type_, declared, node)
        return var

    def record_type(self, ir_name, new: ir.Type, current: ir.Type, node):
        if (
            new.kind != current.kind
            or new.shape != current.shape
            or ((new.dtype is bool_) != (current.dtype is bool_))
        ):
            raise self.lower.error(
                QnbTypeError,
                f"variable {self.display.get(ir_name, ir_name)!r} holds a {current} from "
                f"before this loop or runtime branch; it cannot hold a {new} in it (a name "
                "a loop or branch assigns keeps its type there: give the new value a name "
                "of its own)",
                node,
            )
        known = self.joined.get(ir_name, current)
        joined = (
            known
            if new.dtype is known.dtype
            else known.with_dtype(operators.join_dtypes(known.dtype, new.dtype))
        )
        if joined != current:
            self.widened = True
        self.joined[ir_name] = joined

    def assign_name(self, target: ast.Name, value, stmt):
        lower = self.lower
        if lists.is_list(value):
            lists.bind(lower, target, value, stmt)
            return
        name = target.id
        frame = self.frame
        frame.bound_at[name] = stmt
        frame.known.pop(name, None)
        replaced = frame.scope.get(name)
        if isinstance(replaced, PathNumber):
            # Not inside a block that assigns it (those make its variable at their entry):
            # this binding replaces it on every path.
            if replaced.var is not None:
                frame.scope[name] = replaced.var
            else:
                del frame.scope[name]
                frame.pending.pop(name, None)
        if isinstance(value, ir.ArrayView):
            if value.batch is not None and not isinstance(value.batch, ir.Const):
                batch = lower.order.materialise(value.batch, "batch", target)
                value = ir.ArrayView(value.param, value.type, batch)
            frame.scope[name] = value
            return
        unconditional = self.static_blocks and self.block_depth == self.static_blocks[-1]
        still_static = isinstance(frame.scope.get(name, value), Py)
        if isinstance(value, Py) and unconditional and still_static:
            # A name computed from static loop values stays static - unless a runtime
            # branch assigns it, which only the running kernel can resolve.
            frame.scope[name] = value
            return
        if isinstance(value, Py) and not is_number(value.value):
            frame.scope[name] = value  # dtypes, tuples, None
            return
        existing = frame.scope.get(name)
        if isinstance(existing, Var):
            raw = lower.to_expr(value, stmt, existing.type.dtype)
            if self.rebinds(existing, raw.type):
                # As in Python: from here on the name holds the new value, of its own type
                # (``m = m[:, None]``, ``mask = qnb.where(mask, 0.0, -math.inf)``).
                del frame.scope[name]
                var = self.bind_local(name, raw.type, target)
                expr = raw if var.type == raw.type else lower.coerce(raw, var.type, target)
                lower.emit(ir.Assign(lower.loc(stmt), var.name, expr))
            else:
                self.record_type(existing.name, raw.type, existing.type, target)
                expr = lower.coerce(raw, existing.type, target)
                lower.emit(ir.Assign(lower.loc(stmt), existing.name, expr))
        else:
            expr = lower.to_expr(value, stmt)
            var = self.bind_local(name, expr.type, target)
            if var.type != expr.type:
                expr = lower.coerce(expr, var.type, target)
            lower.emit(ir.Assign(lower.loc(stmt), var.name, expr))
        # Outside runtime control flow, a number stays known: qnb.static(...) reads it.
        outside = self.block_depth == frame.base_depth
        if isinstance(value, Py) and outside and frame.scope[name].type.kind == "scalar":
            frame.known[name] = value.value

    def rebinds(self, existing: Var, new: ir.Type) -> bool:
        """Whether assigning a value of type ``new`` to the name bound to ``existing``
        binds the name to a new variable: its type differs and no runtime block opened
        since ``existing`` was bound (in a loop or branch, the name's one storage must
        keep one type: :meth:`record_type` widens a dtype there, or refuses)."""
        current = existing.type
        differs = (new.kind, new.shape, new.dtype) != (current.kind, current.shape, current.dtype)
        return differs and existing.block == self.block_path

    def release_alias(self, name: str):
        """Plain assignment to a func parameter that is the caller's Tile16/Vec16 makes the
        name the func's own value, as in Python: the caller's tile is not changed."""
        frame = self.frame
        if name in frame.aliases:
            frame.aliases.discard(name)
            del frame.scope[name]
        frame.detached.pop(name, None)

    def update_in_place(self, target: ast.Name, value, stmt):
        """``t.load_(…)``, ``t[i, j] = s``, ``t += u``, ``t[:] = …``: the tile ``t`` names
        changes (the caller's, for a func parameter that received one)."""
        rebound = self.frame.detached.get(target.id)
        if rebound is not None:
            line = self.frame.parsed.position(rebound)[1]
            raise self.lower.error(
                QnbTypeError,
                f"{target.id!r} is reassigned under the runtime condition at line {line}, so "
                "whether this in-place update reaches the caller's tile depends on the run; "
                "assign the new value to another name",
                stmt,
            )
        self.assign_name(target, value, stmt)

    # ------------------------------------------------------------------ reading names

    def read(self, name: str, node):
        """What reading ``name`` gives (UNBOUND if the function binds no such name): a
        runtime variable's value, or its compile-time binding."""
        found = self.frame.scope.get(name, UNBOUND)
        if found is UNBOUND:
            return found
        if isinstance(found, PathNumber):
            found = self.path_number_var(name, found, node)
        if isinstance(found, Var):
            return found.read(self.lower.loc(node))
        self.compile_time_read(name, found, node)
        return found

    def compile_time_read(self, name, found, node):
        """Note a read of a compile-time binding (see leave_loop); refuse an ambiguous one."""
        if isinstance(found, Ambiguous):
            line = self.frame.parsed.position(found.node)[1]
            raise self.lower.error(
                QnbTypeError,
                f"{name!r} is bound to {found.what}, which cannot be rebound under a runtime "
                f"condition (it has no runtime storage): line {line} binds it on some paths "
                "only; bind it before the runtime if/loop, or use another name on each path",
                node,
            )
        for watch in self.loop_watches:
            if watch.frame is self.frame and watch.entry.get(name, UNBOUND) is found:
                watch.reads.setdefault(name, node)

    def static_namespace(self, expression: ast.expr) -> dict:
        """What a ``qnb.static`` expression sees: captured names (an undefined one stays
        out, so Python's NameError names it), then the compile-time bindings, which shadow
        them. Each compile-time binding the expression names is read (compile_time_read)."""
        frame = self.frame
        namespace = {k: v for k, v in frame.roots.items() if v is not UNDEFINED}
        for name, value in frame.scope.items():
            if isinstance(value, Py):
                namespace[name] = value.value
            elif isinstance(value, Var) and name in frame.known:
                namespace[name] = frame.known[name]
            elif isinstance(value, lists.StaticList):
                namespace[name] = lists.Length(len(value))  # len(xs) only
            elif name in namespace:
                del namespace[name]
        for name_node in ast.walk(expression):
            if isinstance(name_node, ast.Name) and name_node.id in frame.scope:
                found = frame.scope[name_node.id]
                if not isinstance(found, Var | PathNumber):
                    self.compile_time_read(name_node.id, found, name_node)
        return namespace

    # ------------------------------------------------------------------ runtime control flow

    def enter_runtime_block(self, statements, node) -> set[str]:
        """Before a runtime ``if``/loop: a number the block assigns becomes a runtime
        variable now, and a func parameter that is the caller's tile and that the block
        reassigns becomes the func's own copy. Returns those parameters."""
        lower = self.lower
        frame = self.frame
        plain, every = assigned_names(statements)
        for name in sorted(every):
            value = frame.scope.get(name)
            frame.known.pop(name, None)  # the block may change it
            if isinstance(value, Py) and is_number(value.value):
                expr = lower.to_expr(value, node)
                var = self.bind_local(name, expr.type, node)
                lower.emit(ir.Assign(lower.loc(node), var.name, lower.coerce(expr, var.type, node)))
            elif isinstance(value, PathNumber):
                self.path_number_var(name, value, node)
        detached = set()
        for name in sorted(plain & (frame.aliases | set(frame.detached))):
            if name in frame.aliases:
                alias = frame.scope[name]
                self.release_alias(name)
                var = self.bind_local(name, alias.type, node)
                lower.emit(ir.Assign(lower.loc(node), var.name, alias.read(lower.loc(node))))
            frame.detached[name] = node  # until the block reassigns it
            detached.add(name)
        return detached

    def rewind(self, entry: dict) -> dict:
        """The bindings a branch changed (name -> value, UNBOUND if none); a compile-time
        one is set back to its value at ``entry``, so the next branch starts from there.
        (A runtime variable stays: both branches assign the same IR variable.)"""
        scope = self.frame.scope
        changed = {}
        for name in set(scope) | set(entry):
            now, before = scope.get(name, UNBOUND), entry.get(name, UNBOUND)
            if now is before:
                continue
            changed[name] = now
            if not (before is UNBOUND and isinstance(now, Var)):
                if before is UNBOUND:
                    del scope[name]
                else:
                    scope[name] = before
        return changed

    def merge_paths(self, entry: dict, paths: list[dict], detached: set[str], node):
        """After a runtime branch: a name bound alike on every path keeps that binding.
        A runtime variable is one storage on every path, so it stays (where a path never
        assigned it, it holds what it held before: zero if nothing). Compile-time numbers
        that differ between paths become a runtime variable (PathNumber). A name bound
        to different compile-time values of another kind becomes Ambiguous."""
        frame = self.frame
        for name in set().union(*paths):
            values = [path.get(name, entry.get(name, UNBOUND)) for path in paths]
            first = values[0]
            if all(same_binding(first, other) for other in values[1:]):
                if first is UNBOUND:
                    frame.scope.pop(name, None)
                else:
                    frame.scope[name] = first
            else:
                frame.scope[name] = self.merged_binding(name, values, node)
        for name in detached:
            frame.detached[name] = node  # reassigned on some paths only

    def merged_binding(self, name: str, values: list, node):
        """The binding after a runtime branch whose paths left ``name`` bound to ``values``
        (not all the same)."""
        variables: dict[str, Var] = {}
        numbers: list = []
        others = []
        for value in values:
            if isinstance(value, PathNumber):
                value = value.settled()
            if isinstance(value, Var):
                variables[value.name] = value
            elif isinstance(value, PathNumber):
                numbers.extend(value.numbers)
            elif isinstance(value, Py) and is_number(value.value):
                numbers.append(value.value)
            elif value is not UNBOUND:
                others.append(value)
        bound_at = self.frame.bound_at.get(name, node)
        if others or len(variables) > 1:
            what = binding_name(others[0]) if others else "a different variable on each path"
            return Ambiguous(name, bound_at, what)
        if variables:
            (var,) = variables.values()
            self.settle(name, var, numbers, node)
            return var
        return PathNumber(name, bound_at, numbers)

    def path_number_var(self, name: str, found: PathNumber, node) -> Var:
        """The runtime variable of a PathNumber, made on first use."""
        if found.var is None:
            first = operators.const(self.lower.builder, found.numbers[0], found.node).type
            found.var = self.bind_local(name, first, found.node)
            self.settle(name, found.var, found.numbers, node)
        self.frame.scope[name] = found.var
        return found.var

    def settle(self, name: str, var: Var, numbers: list, node):
        """``name``'s compile-time numbers become values of its runtime variable ``var``:
        typed with it, and assigned where each was bound (its Pending)."""
        lower = self.lower
        for number in numbers:
            self.record_type(
                var.name, operators.const(lower.builder, number, node).type, var.type, node
            )
        for pending in self.frame.pending.pop(name, []):
            value = lower.coerce(Py(pending.value), var.type, node)
            pending.assign = ir.Assign(pending.loc, var.name, value)

    def note_static_numbers(self, before: dict, node):
        """After a static loop inside a runtime block: a Pending for each name it left
        bound to a new compile-time number."""
        frame = self.frame
        for name, value in frame.scope.items():
            if isinstance(value, Py) and is_number(value.value) and before.get(name) is not value:
                loc = self.lower.loc(frame.bound_at.get(name, node))
                pending = Pending(name, value.value, loc)
                self.lower.emit(pending)
                frame.pending.setdefault(name, []).append(pending)

    def watch_loop(self) -> LoopWatch:
        """Start watching a runtime loop's body (the bindings at its entry); see leave_loop."""
        watch = LoopWatch(self.frame, dict(self.frame.scope))
        self.loop_watches.append(watch)
        return watch

    def leave_loop(self, watch: LoopWatch, detached: set[str], node):
        """After a runtime loop's body: a compile-time binding the body read and then
        changed would differ between iterations, which the lowered body cannot do."""
        frame = self.frame
        body = self.rewind(watch.entry)
        for name, value in body.items():
            before = watch.entry.get(name, UNBOUND)
            if name in watch.reads and not same_binding(before, value):
                read_line = frame.parsed.position(watch.reads[name])[1]
                raise self.lower.error(
                    QnbTypeError,
                    f"{name!r} holds {binding_name(before)}, which cannot be rebound under "
                    f"a runtime condition: this loop reads it (line {read_line}) and then "
                    "rebinds it, so its iterations would differ; use another name",
                    frame.bound_at.get(name, node),
                )
        self.merge_paths(watch.entry, [body, {}], detached, node)


def assigned_names(statements) -> tuple[set[str], set[str]]:
    """The names ``statements`` assign: (by plain assignment and for loops, by any
    assignment including ``x += …``)."""
    plain: set[str] = set()
    every: set[str] = set()
    for stmt in statements:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                every.add(node.id)
            targets = ()
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign | ast.For):
                targets = (node.target,)
            for target in targets:
                for element in target.elts if isinstance(target, ast.Tuple) else (target,):
                    if isinstance(element, ast.Name):
                        plain.add(element.id)
    return plain, every


def same_binding(a, b) -> bool:
    """Whether two bindings of a name are the same value (so paths that made them agree)."""
    if a is b:
        return True
    if isinstance(a, Py) and isinstance(b, Py):
        return _same_py(a.value, b.value)
    if isinstance(a, ir.ArrayView) and isinstance(b, ir.ArrayView):
        return a.param == b.param and a.type == b.type and _same_index(a.batch, b.batch)
    if isinstance(a, Var) and isinstance(b, Var):
        return a.name == b.name
    return False


def _same_py(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same_py(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return a.hex() == b.hex() or (a != a and b != b)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - a compile-time value without a usable ==
        return False


def _same_index(a, b) -> bool:
    if a is None or b is None:
        return a is b
    if isinstance(a, ir.Const) and isinstance(b, ir.Const):
        return a.value == b.value and a.type == b.type
    return isinstance(a, ir.Var) and isinstance(b, ir.Var) and a.name == b.name


def binding_name(value) -> str:
    """How a message names a compile-time binding."""
    if isinstance(value, ir.ArrayView):
        return "an array"
    if isinstance(value, Py):
        if isinstance(value.value, tuple):
            return f"the tuple {value.value!r}"
        if isinstance(value.value, DType) or is_dtype_like(value.value):
            return py_name(value.value)
        return f"the compile-time value {value.value!r}"
    return "a compile-time value"


def settle_pending(statements: list) -> list:
    """``statements`` with each Pending replaced by its assignment, or dropped."""
    out = []
    for stmt in statements:
        if isinstance(stmt, Pending):
            if stmt.assign is not None:
                out.append(stmt.assign)
            continue
        if isinstance(stmt, ir.If):
            stmt.then_body = settle_pending(stmt.then_body)
            stmt.else_body = settle_pending(stmt.else_body)
        elif isinstance(stmt, ir.For | ir.While):
            stmt.body = settle_pending(stmt.body)
        out.append(stmt)
    return out
