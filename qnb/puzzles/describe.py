"""What a failed case says: one plain sentence, true of what the kernel did."""

from __future__ import annotations

import numpy as np


def _spell(value) -> str:
    value = value.item() if isinstance(value, np.generic) else value
    if isinstance(value, float):
        return "NaN" if np.isnan(value) else f"{value:.6g}"
    return repr(value)


def _index(name: str, index) -> str:
    return f"{name}[{', '.join(str(i) for i in index)}]"


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "s")


def _edge_runs(mask: np.ndarray) -> tuple[int, int]:
    """How many of ``mask``'s last rows and last columns are True throughout (2-D)."""
    rows = 0
    while rows < mask.shape[0] and mask[mask.shape[0] - 1 - rows].all():
        rows += 1
    cols = 0
    while cols < mask.shape[1] and mask[:, mask.shape[1] - 1 - cols].all():
        cols += 1
    return rows, cols


def unwritten_region(name: str, unwritten: np.ndarray) -> str:
    """The elements of output ``name`` no program wrote, as a reader would say them:
    ``any element of out``, ``the last 24 elements of out (out[976:1000])``, ``the last
    3 columns of out``, ``the last 2 rows and the last 3 columns of out``, else how many
    and the first."""
    count = int(unwritten.sum())
    if count == unwritten.size:
        return f"any element of {name}"
    if unwritten.ndim == 1:
        n = unwritten.size
        k = n - int(np.flatnonzero(~unwritten)[-1]) - 1  # the unwritten tail
        if k == count:
            return f"the last {_plural(k, 'element')} of {name} ({name}[{n - k}:{n}])"
        first = int(np.flatnonzero(unwritten)[0])
        if first == 0 and unwritten[:count].all():
            return f"the first {_plural(count, 'element')} of {name} ({name}[0:{count}])"
    else:
        rows, cols = _edge_runs(unwritten)
        inside = unwritten.copy()
        inside[unwritten.shape[0] - rows :] = False
        inside[:, unwritten.shape[1] - cols :] = False
        if not inside.any() and (rows or cols):
            parts = []
            if rows:
                parts.append(f"the last {_plural(rows, 'row')}")
            if cols:
                parts.append(f"the last {_plural(cols, 'column')}")
            return f"{' and '.join(parts)} of {name}"
    first = tuple(int(i) for i in np.argwhere(unwritten)[0])
    return (
        f"{count:,} of the {unwritten.size:,} elements of {name}, the first {_index(name, first)}"
    )


def wrong(name, got, want, wrong_mask, unwritten, owners=None) -> str:
    """The sentence for wrong results in output ``name``: the first element stored
    wrong (C order), the program and line that stored it (``owners``: per element the
    program, -1s where none stored, and the line; None where unknown), and the region no
    program wrote."""
    wrong_count = int(wrong_mask.sum())
    not_written = int(unwritten.sum())
    if not_written == wrong_count:
        return f"no program wrote {unwritten_region(name, unwritten)}."
    stored = wrong_count - not_written
    index = tuple(int(i) for i in np.argwhere(wrong_mask & ~unwritten)[0])
    who = ""
    if owners is not None and owners[0][index][0] >= 0:
        program = tuple(int(p) for p in owners[0][index])
        who = f", stored by program {program} at line {int(owners[1][index])}"
    value = f"{_spell(got[index])} where {_spell(want[index])} is expected{who}"
    text = (
        f"{_index(name, index)} is {value}"
        if stored == 1
        else f"{_plural(stored, 'element')} of {name} hold wrong values; the first, "
        f"{_index(name, index)}, is {value}"
    )
    if not_written:
        text += f", and no program wrote {unwritten_region(name, unwritten)}"
    return text + "."


def error(err) -> str:
    """The sentence for a launch that raised ``err`` (a ``qnb.QnbError``)."""
    where = f" at line {err.lineno}" if err.lineno is not None else ""
    first = err.message.splitlines()[0].rstrip(".")
    return f"the kernel raised {type(err).__name__}{where}: {first}."


def hazard(found) -> str:
    """The sentence for a race ``qnb.check`` found (a hazard record)."""
    a, b = (tuple(p) for p in found.programs)
    element = _index(found.array, found.index)
    more = f" (and {found.count - 1:,} more elements)" if found.count > 1 else ""
    if found.kind == "write-write":
        what = f"programs {a} and {b} both store {element}{more}"
    else:
        what = f"program {a} reads {element}{more}, which program {b} stores"
    lines = f" (lines {found.lines[0]} and {found.lines[1]})"
    return (
        f"{what}{lines}: a {found.kind} race, so the result depends on the order the "
        "programs run in, even where it is right here."
    )


__all__ = ["error", "hazard", "unwritten_region", "wrong"]
