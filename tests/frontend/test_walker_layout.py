"""The lowering walker's layout: what the typing rules and compile-time lists call on the
walker exists there, and no class of the walk grows back into one of a thousand lines."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from qnb.frontend import lists, lower, semantics

FRONTEND = Path(lower.__file__).parent
WALK_MODULES = [
    "lower.py",
    "statements.py",
    "expressions.py",
    "scopes.py",
    "order.py",
    "inline.py",
    "indexing.py",
    "compile_time.py",
    "values.py",
]


def walker_calls(module) -> set[str]:
    """The attributes ``module`` reads on a name ``lower`` (how it calls the walker)."""
    tree = ast.parse(inspect.getsource(module))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "lower"
    }


@pytest.mark.parametrize("module", [semantics, lists], ids=lambda m: m.__name__)
def test_every_walker_method_the_rules_call_exists(module):
    walker = lower._Lowerer(None, None, [], {}, None)
    calls = walker_calls(module)
    assert calls, "the module no longer calls the walker: update this test"
    found = set(dir(type(walker))) | set(vars(walker))  # methods, properties, attributes
    missing = sorted(calls - found)
    assert not missing, f"{module.__name__} calls walker methods that do not exist: {missing}"


@pytest.mark.parametrize("filename", WALK_MODULES)
def test_no_class_of_the_walk_is_over_400_lines(filename):
    tree = ast.parse((FRONTEND / filename).read_text())
    sizes = {
        node.name: node.end_lineno - node.lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    }
    assert all(size <= 400 for size in sizes.values()), sizes
