"""The lowering walker's layout: what the typing rules and compile-time lists call on the
walker exists there, and no class of the walk grows back into one of a thousand lines."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from qnb.frontend import lists, lower, semantics
from qnb.frontend.builder import Builder

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


def calls_on(module, name: str) -> set[str]:
    """The attributes ``module`` reads on a name ``name`` (how it calls the walker or the
    builder)."""
    tree = ast.parse(inspect.getsource(module))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == name
    }


def test_every_walker_method_the_lists_call_exists():
    walker = lower._Lowerer(None, None, [], {}, None)
    calls = calls_on(lists, "lower")
    assert calls, "lists.py no longer calls the walker: update this test"
    found = set(dir(type(walker))) | set(vars(walker))  # methods, properties, attributes
    missing = sorted(calls - found)
    assert not missing, f"lists.py calls walker methods that do not exist: {missing}"


def test_the_rules_reach_the_walker_only_through_the_builder():
    walker = lower._Lowerer(None, None, [], {}, None)
    assert isinstance(walker.builder, Builder)  # made from the walker's own methods
    calls = calls_on(semantics, "builder")
    assert calls, "the rules no longer use the builder: update this test"
    missing = sorted(calls - set(Builder.__slots__))
    assert not missing, f"semantics.py uses what the builder does not offer: {missing}"


@pytest.mark.parametrize("filename", WALK_MODULES)
def test_no_class_of_the_walk_is_over_400_lines(filename):
    tree = ast.parse((FRONTEND / filename).read_text())
    sizes = {
        node.name: node.end_lineno - node.lineno + 1
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
    }
    assert all(size <= 400 for size in sizes.values()), sizes
