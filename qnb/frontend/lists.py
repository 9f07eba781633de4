"""Compile-time lists: ``[a, b]`` or ``[f(k) for k in qnb.static(range(n))]`` of tiles,
vecs or scalars, indexed and assigned with compile-time ints.

A list has no runtime storage of its own: each element is a variable of the kernel,
named ``xs[0]``, ``xs[1]``… (a name no Python identifier has, so it never meets the
user's), so ``xs[k] = v`` is an assignment to that variable and a runtime ``if`` or loop
merges elements as it merges any variable. The list itself is a compile-time binding (like
an array or a tuple): its length and element names are fixed when it is made, and an index
must be known at compile time. The IR has no list node: a trace shows each element by its
``xs[k]`` name.
"""

from __future__ import annotations

import ast

from qnb import ir
from qnb.errors import QnbIndexError, QnbTypeError
from qnb.frontend.bindings import Py, is_number


class ListDisplay:
    """A list display or comprehension, lowered but not yet bound to a name."""

    __slots__ = ("items",)

    def __init__(self, items: list):
        self.items = items


class StaticList:
    """A list bound to a name: the scope keys of its elements, in order."""

    __slots__ = ("slots",)

    def __init__(self, slots: list[str]):
        self.slots = slots

    def __len__(self) -> int:
        return len(self.slots)


class Length:
    """What ``qnb.static(...)`` sees of a list: its length (``range(len(xs))``); its
    elements are runtime values."""

    __slots__ = ("count",)

    def __init__(self, count: int):
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __repr__(self) -> str:
        return f"<compile-time list of {self.count}>"


def is_list(value) -> bool:
    return isinstance(value, ListDisplay | StaticList)


def display(lower, node: ast.List) -> ListDisplay:
    """``[a, b, c]``: every item lowered, left to right."""
    if not isinstance(node.ctx, ast.Load):
        raise lower.error(QnbTypeError, "a list cannot be assigned to", node)
    return ListDisplay([_item(lower, v, n) for v, n in zip(lower.ordered(node.elts), node.elts)])


def comprehension(lower, node: ast.ListComp) -> ListDisplay:
    """``[elt for k in qnb.static(iterable)]``: ``elt`` lowered once per item, with ``k``
    bound to the item in the comprehension's own scope (as in Python)."""
    if len(node.generators) != 1:
        raise lower.error(QnbTypeError, "a list comprehension in a kernel has one for", node)
    generator = node.generators[0]
    if generator.ifs or generator.is_async or not isinstance(generator.target, ast.Name):
        raise lower.error(
            QnbTypeError,
            "a list comprehension in a kernel is [expr for k in qnb.static(...)], "
            "with one loop variable and no if",
            node,
        )
    if not lower.is_static_call(generator.iter):
        raise lower.error(
            QnbTypeError,
            "a list comprehension in a kernel iterates over qnb.static(...) "
            "(its length must be known at compile time)",
            generator.iter,
        )
    values = lower.static_value(generator.iter).value
    try:
        values = list(values)
    except TypeError:
        raise lower.error(
            QnbTypeError, "qnb.static(...) in a comprehension must give an iterable", generator.iter
        ) from None
    name = generator.target.id
    scope = lower.frame.scope
    saved = scope.get(name, _ABSENT)
    items = []
    try:
        for value in values:
            scope[name] = Py(value)
            items.append(_item(lower, lower.lower_expr(node.elt), node.elt))
    finally:
        if saved is _ABSENT:
            scope.pop(name, None)
        else:
            scope[name] = saved
    return ListDisplay(items)


_ABSENT = object()


def _item(lower, value, node):
    if isinstance(value, ir.Expr) and value.type.kind in ("scalar", "tile", "vec"):
        return value
    if isinstance(value, Py) and is_number(value.value):
        return value
    raise lower.error(
        QnbTypeError,
        "a compile-time list holds tiles, vecs or scalars; this item is not one",
        node,
    )


def bind(lower, target: ast.Name, value, stmt) -> None:
    """``xs = [...]`` (a new list of element variables ``xs[0]``…) or ``ys = xs`` (the same
    list, as in Python)."""
    frame = lower.frame
    if isinstance(value, StaticList):
        frame.scope[target.id] = value
        frame.bound_at[target.id] = stmt
        return
    existing = frame.scope.get(target.id)
    shared = isinstance(existing, StaticList) and any(
        other is existing for key, other in frame.scope.items() if key != target.id
    )
    if isinstance(existing, StaticList) and len(existing) == len(value.items) and not shared:
        # The same list again (a loop body's ``xs = [...]``): the same element variables,
        # so a runtime loop or branch sees one binding.
        found = existing
    else:
        stem = target.id
        if any(key.startswith(f"{stem}[") for key in frame.scope):
            stem = lower.fresh(stem)
        found = StaticList([f"{stem}[{k}]" for k in range(len(value.items))])
    for slot, item in zip(found.slots, value.items):
        lower.assign_name(_slot_name(slot, target), item, stmt)
    frame.scope[target.id] = found
    frame.bound_at[target.id] = stmt


def _slot_name(slot: str, like: ast.AST, ctx=None) -> ast.Name:
    return ast.copy_location(ast.Name(slot, ctx or ast.Store()), like)


def index(lower, lst, key, node) -> int:
    """The element a compile-time ``key`` names (negative counts from the end)."""
    if not (isinstance(key, Py) and isinstance(key.value, int) and not isinstance(key.value, bool)):
        what = "a runtime value" if isinstance(key, ir.Expr) else "not an int"
        raise lower.error(
            QnbTypeError,
            f"a compile-time list is indexed with a compile-time int (a literal or a "
            f"qnb.static loop variable); this index is {what}",
            node,
        )
    count = len(lst.items) if isinstance(lst, ListDisplay) else len(lst)
    k = key.value + count if key.value < 0 else key.value
    if not 0 <= k < count:
        raise lower.error(
            QnbIndexError, f"list index {key.value} is out of range for a list of {count}", node
        )
    return k


def read(lower, lst, key, node):
    """``xs[k]``: the element variable (a tile variable is the tile, as a NumPy array is)."""
    k = index(lower, lst, key, node)
    if isinstance(lst, ListDisplay):
        return lst.items[k]
    return lower.expr_Name(_slot_name(lst.slots[k], node, ast.Load()))


def write(lower, lst, key, value, target, stmt) -> None:
    """``xs[k] = v``: assigns element variable ``xs[k]``."""
    if not isinstance(lst, StaticList):
        raise lower.error(
            QnbTypeError, "only a list bound to a name can be assigned by index", target
        )
    k = index(lower, lst, key, target)
    _item(lower, value, target)
    lower.assign_name(_slot_name(lst.slots[k], target), value, stmt)


def elements(lower, lst, node) -> list:
    """What ``for x in qnb.static(xs)`` binds ``x`` to, item by item: the element variable
    itself (so ``x += 1`` updates the list's element, as on a list of NumPy arrays), or
    the value of a display's item."""
    if isinstance(lst, ListDisplay):
        return [("value", item) for item in lst.items]
    return [("slot", slot) for slot in lst.slots]
