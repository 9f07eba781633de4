"""Tools built on a kernel go through its public objects, never its private members.

The rule, held over every module of ``qnb/``: outside the kernel's own implementation
(``qnb/kernel.py``, and ``qnb/specialization.py``, the object ``Kernel.specialize``
returns, split from it for size), no code reads a name that is private to a ``Kernel``
(an attribute of the class, or of an instance, starting with one underscore) from
anything but ``self``/``cls``: not as an attribute (``kernel._memo``), not through
``getattr``/``setattr``/``hasattr``/``delattr`` with that name, not as a key of an
object's ``__dict__`` or ``vars()``. A name can only be recognised, not its receiver's
type, so a private name that another class happens to share is refused too: name it
otherwise, or go through the kernel's public API (``kernel.specialize``,
``qnb.Launch``, ``kernel.variant``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np

import qnb

QNB = Path(qnb.__file__).resolve().parent
KERNEL_MODULES = {"kernel.py", "specialization.py"}


def _private_kernel_names() -> set[str]:
    @qnb.kernel
    def sample(x: qnb.Array[qnb.f32, 2]):
        qnb.Tile16.load(x, 0, 0).store(x, 0, 0)

    x = np.zeros((16, 16), np.float32)
    sample[1](x)  # (an instance that has launched: its memo and grids are filled)
    names = set(vars(sample)) | set(vars(sample.variant(debug=True)))
    for cls in type(sample).__mro__:
        names |= set(vars(cls))
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


PRIVATE = _private_kernel_names()
_DYNAMIC = {"getattr", "setattr", "hasattr", "delattr"}


def _reaches(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE:
            receiver = node.value
            if not (isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call) and _names_private(node):
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Subscript) and _is_dict_of_other(node.value):
            key = node.slice
            if isinstance(key, ast.Constant) and _refused(key.value, True):
                found.append((node.lineno, ast.unparse(node)))
    return found


def _names_private(call: ast.Call) -> bool:
    """``getattr(k, "_memo")``, ``k.__dict__.get("_memo")``, ``vars(k).setdefault(...)``."""
    func = call.func
    dynamic = isinstance(func, ast.Name) and func.id in _DYNAMIC
    through_dict = isinstance(func, ast.Attribute) and _is_dict_of_other(func.value)
    if not (dynamic or through_dict):
        return False
    strings = [a.value for a in call.args if isinstance(a, ast.Constant)]
    return any(_refused(s, through_dict) for s in strings)


def _refused(name, through_dict: bool) -> bool:
    """A Kernel's private name; through another object's ``__dict__``, any private name
    (state stashed on a kernel that way, ``_compare_stored``, is a private member too)."""
    if not isinstance(name, str):
        return False
    if through_dict:
        return name.startswith("_") and not name.startswith("__")
    return name in PRIVATE


def _is_dict_of_other(node) -> bool:
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars"


def test_the_rule_knows_the_private_names_it_holds():
    # the members qnb.compare reached before it went through the specialisation
    reached = {"_fast_signature", "_signature", "_memo", "_prepare", "_locate", "_resolve"}
    assert reached | {"_lower", "_lower_for", "_options", "_launch"} <= PRIVATE


def test_the_rule_finds_each_form_of_reach():
    source = """
k._memo.clear()
getattr(k, "_prepare")(1)
k.__dict__.setdefault("_compare_stored", {})
vars(k)["_options"]
self._memo.clear()
k.specialize(x).ir
getattr(k, "name")
"""
    assert sorted(line for line, _ in _reaches(ast.parse(source))) == [2, 3, 4, 5]


def test_no_module_outside_the_kernel_reads_a_private_member_of_a_kernel():
    offences = []
    for path in sorted(QNB.rglob("*.py")):
        relative = path.relative_to(QNB).as_posix()
        if relative in KERNEL_MODULES:
            continue
        for line, text in _reaches(ast.parse(path.read_text(), str(path))):
            offences.append(f"qnb/{relative}:{line}: {text}")
    assert not offences, "a Kernel's private members read outside qnb/kernel.py:\n" + "\n".join(
        offences
    )


def test_no_module_imports_a_private_name_of_qnb_compare():
    offences = []
    for path in sorted(QNB.rglob("*.py")):
        if path.name == "compare.py" and path.parent == QNB:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "qnb.compare":
                offences += [
                    f"{path.relative_to(QNB)}:{node.lineno}: {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_")
                ]
    assert not offences, offences
