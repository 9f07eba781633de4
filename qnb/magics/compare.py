"""``%qcompare``: run ``qnb.compare`` on a launch expression ``k[grid](args)``, and what
it prints."""

from __future__ import annotations

import ast
import linecache

COMPARE_FILENAME = "<qcompare>"


def split_launch(expr: str, namespace: dict) -> tuple[object, list]:
    """The launch (``k[grid]`` or ``k``) and the argument values of ``k[grid](args)``,
    evaluated in ``namespace`` (``*xs`` spreads as in Python). Raises SyntaxError where
    ``expr`` is not one call, and ValueError for keyword arguments."""
    expr = expr.strip()
    # the expression's text where a traceback through it looks its line up (the last
    # one %qcompare ran: a frame of it shows its own source and caret)
    linecache.cache[COMPARE_FILENAME] = (len(expr), None, [expr + "\n"], COMPARE_FILENAME)
    tree = ast.parse(expr, COMPARE_FILENAME, mode="eval")
    call = tree.body
    if not isinstance(call, ast.Call):
        raise ValueError("EXPR must be one launch, k[grid](args)")
    if call.keywords:
        raise ValueError("pass the kernel's arguments by position: k[grid](a, b, c)")

    def value(node):
        code = compile(ast.Expression(node), COMPARE_FILENAME, "eval")
        return eval(code, namespace)  # noqa: S307 - the user's own notebook expression

    args = []
    for node in call.args:
        if isinstance(node, ast.Starred):
            args.extend(value(node.value))
        else:
            args.append(value(node))
    return value(call.func), args


def report_lines(comparison) -> list[str]:
    """What ``%qcompare`` prints: the verdict (``equal``, ``rounding`` or ``different``,
    and which side is closer to the exact result), then one line per backend."""
    return [f"{comparison.kernel_name}: {comparison.verdict_text()}", *comparison.summary()]
