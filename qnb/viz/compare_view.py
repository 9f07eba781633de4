"""``CompareView``: where one kernel parts between backends (a ``qnb.Comparison``)."""

from __future__ import annotations

import html

import numpy as np
import traitlets

from qnb.viz import arrays, static_render
from qnb.viz.assets import widget_module
from qnb.viz.widget import QnbWidget

MAX_MARKS = 4096  # differing elements outlined in one value (a 64x64 tile has 4,096)
MAP_PX = 512  # the longer side of a mismatch map, at most (px)
MAX_CELL_PX = 16  # an element of a small map, at most (px)
THIN_MAP_PX = 16  # the least height (width) of a map of one row (column)
MAX_RINGS = 2048  # differing elements ringed on a map (past it, each pixel is filled)
# what a map's cells hold (the codes of the pooled image)
AGREES, CLOSER, FARTHER = 0, 1, 2


def _as_map(a: np.ndarray) -> np.ndarray:
    """The 2-D view a map draws: a 1-D array as one row, a 3-D array's slabs stacked
    (slab b's rows below slab b - 1's)."""
    if a.ndim == 1:
        return a.reshape(1, -1)
    if a.ndim == 3:
        return a.reshape(-1, a.shape[2])
    return a


def _pooled(codes: np.ndarray, k: int) -> np.ndarray:
    """``codes`` (2-D) in k×k blocks, each the largest code in it: a block that holds a
    differing element shows it, however many elements a pixel covers."""
    if k == 1:
        return codes
    rows, cols = codes.shape
    padded = np.zeros((-(-rows // k) * k, -(-cols // k) * k), codes.dtype)
    padded[:rows, :cols] = codes
    return padded.reshape(padded.shape[0] // k, k, padded.shape[1] // k, k).max(axis=(1, 3))


def mismatch_map(comparison, array: str, backend: str) -> dict:
    """The synced state of one stored array's mismatch map on one backend: every
    differing element, coloured by whether the backend is closer to exact there than the
    reference (``CLOSER``) or farther (``FARTHER``), at any array size (see
    :func:`coded_map`); each mark carries the reference's, the backend's and the exact
    value."""
    from qnb.compare import abs_difference, agree

    record = comparison.arrays[array][backend]
    value = comparison.results[backend][array]
    reference = comparison.results[comparison.backends[0]][array]
    exact = comparison.exact.get(array, reference)
    differing = ~agree(value, reference, record.rtol, record.atol)
    near = agree(value, np.asarray(exact).astype(reference.dtype), record.rtol, record.atol)
    closer = (abs_difference(value, exact) <= abs_difference(reference, exact)) | near
    codes = np.where(differing, np.where(closer, CLOSER, FARTHER), AGREES).astype(np.int32)
    state = coded_map(codes, [reference, value, exact])
    state.update(
        name=f"{array} on {backend}",
        array=array,
        backend=backend,
        reference=comparison.backends[0],
        mismatches=record.mismatches,
        closer=int(np.count_nonzero(codes == CLOSER)),
        farther=int(np.count_nonzero(codes == FARTHER)),
    )
    state["title"] = map_title(state)
    return state


def coded_map(codes: np.ndarray, values=()) -> dict:
    """A map of an array whose elements carry codes (0: nothing to see; 1, 2: marked),
    drawn whole at any size: its 2-D view (``rows``, ``cols``; 1-D as a row, 3-D slabs
    stacked), ``pool`` elements a side per pixel past :data:`MAP_PX`, each pixel's size
    (``cell``), index labels a label's width apart (``row_ticks``, ``col_ticks``) and the
    ``marks`` to ring (up to :data:`MAX_RINGS`: ``[i, j, code, *values there]``); past
    that many, the pooled image (``data``: each pixel the largest code of the elements
    it covers) shows them alone."""
    full_shape = list(np.shape(codes))
    codes = _as_map(codes)
    rows, cols = codes.shape
    k = max(1, -(-max(rows, cols) // MAP_PX))
    pooled = _pooled(codes, k)
    cell = max(1, min(MAX_CELL_PX, MAP_PX // max(pooled.shape)))
    cell_w, cell_h = (
        max(cell, -(-THIN_MAP_PX // n)) if n * cell < THIN_MAP_PX else cell
        for n in (pooled.shape[1], pooled.shape[0])
    )
    found = np.argwhere(codes != AGREES)
    shown = [_as_map(np.asarray(v)) for v in values]
    marks = [
        [int(i), int(j), int(codes[i, j])] + [float(v[i, j]) for v in shown]
        for i, j in found[:MAX_RINGS]
    ]
    state = {
        "full_shape": full_shape,
        "rows": rows,
        "cols": cols,
        "pool": k,
        "cell": [cell_h, cell_w],
        "marks": marks,
        "row_ticks": static_render.map_ticks(rows, cell_h / k) if rows > 1 else [],
        "col_ticks": static_render.map_ticks(cols, cell_w / k),
        "slab_rows": full_shape[1] if len(full_shape) == 3 else 0,
    }
    if len(found) > MAX_RINGS:
        state.update(arrays.encode(pooled))  # (past MAX_RINGS, the pixels show them)
    return state


def map_title(state: dict) -> str:
    """``out on wgpu: 35 of 131,072 differ (35 closer to exact than cpu, 0 farther)``."""
    total = int(np.prod(state["full_shape"]))
    shape = static_render.shape_text(state["full_shape"])
    text = (
        f"{state['name']} ({shape}): {state['mismatches']:,} of {total:,} differ "
        f"({state['closer']:,} closer to exact than {state['reference']}, "
        f"{state['farther']:,} farther)"
    )
    if state["slab_rows"]:
        text += f"; slabs stacked, {state['slab_rows']} rows each"
    return text


def decode_pooled(state: dict) -> np.ndarray:
    """A map's pooled image of codes: sent as it is past :data:`MAX_RINGS` marks, else
    made from the marks (each ringed element's code, in its pixel)."""
    if "data" in state:
        return arrays.decode(state)
    k = state["pool"]
    pooled = np.zeros((-(-state["rows"] // k), -(-state["cols"] // k)), np.int32)
    for i, j, code, *_ in state["marks"]:
        pooled[i // k, j // k] = max(pooled[i // k, j // k], code)
    return pooled


# How to read a map (the live view and the static one say the same).
MAP_LEGEND = (
    ("ring, orange", "differs beyond tolerance; the backend is at least as close to exact"),
    ("ring, red", "differs beyond tolerance; the backend is farther from exact"),
    ("grey", "agrees with the reference within tolerance"),
)


def _marks(bad: np.ndarray) -> list[dict]:
    """The differing elements of a value as 1x1 regions (drawn outlined, as writes)."""
    out = []
    grid = bad.reshape(1, -1) if bad.ndim == 1 else bad
    for i, j in np.argwhere(grid)[:MAX_MARKS]:
        out.append(
            {"array": "", "r0": int(i), "r1": int(i) + 1, "c0": int(j), "c1": int(j) + 1}
            | {"batch": None, "kind": "write"}
        )
    return out


def _differing(value, expected) -> np.ndarray:
    from qnb.compare import agree

    value, expected = np.asarray(value), np.asarray(expected)
    if value.shape != expected.shape:
        return np.ones(expected.shape, bool)
    return ~agree(value, expected.astype(value.dtype), None, None)


def _difference(value, expected) -> np.ndarray:
    with np.errstate(all="ignore"):
        d = np.asarray(value, np.float64) - np.asarray(expected, np.float64)
    same = np.asarray(value) == np.asarray(expected)
    return np.where(same, 0.0, d)


def _text(value) -> str:
    value = np.asarray(value)
    return arrays.format_value(value.item()) if value.ndim == 0 else f"{value.shape} {value.dtype}"


class CompareView(QnbWidget):
    """Show a ``qnb.Comparison``: one line per backend; where they differ, the kernel's
    source with the diverging line highlighted, the value at that step on each backend
    side by side (differing elements outlined in red) with their difference, and per
    stored array a map of the elements that differ on each backend (1: outside
    tolerance). Renders statically (HTML and PNG) too.

    >>> CompareView(qnb.compare(k[grid], *args))
    """

    _esm = widget_module("compare_view.js")

    kernel_name = traitlets.Unicode("").tag(sync=True)
    backends = traitlets.List(traitlets.Unicode()).tag(sync=True)
    equal = traitlets.Bool(True).tag(sync=True)
    # "equal", "rounding (wgpu is closer to exact than cpu)", "different (...)"
    verdict = traitlets.Unicode("equal").tag(sync=True)
    summary = traitlets.List(traitlets.Unicode()).tag(sync=True)
    source = traitlets.List(traitlets.Unicode()).tag(sync=True)
    first_line = traitlets.Int(1).tag(sync=True)
    current_line = traitlets.Int(0).tag(sync=True)
    step_text = traitlets.Unicode("").tag(sync=True)
    values = traitlets.List(traitlets.Dict()).tag(sync=True)  # the step's value per backend
    scalars = traitlets.List(traitlets.Unicode()).tag(sync=True)  # a scalar step's values
    maps = traitlets.List(traitlets.Dict()).tag(sync=True)  # mismatch map per array, backend

    def __init__(self, comparison, **kwargs):
        from qnb.compare import Comparison

        if not isinstance(comparison, Comparison):
            raise TypeError(
                f"CompareView shows a qnb.Comparison (from qnb.compare(...)), "
                f"not {type(comparison).__name__}"
            )
        super().__init__(**kwargs)
        self.comparison = comparison
        with self.hold_sync():
            self.kernel_name = comparison.kernel_name
            self.backends = list(comparison.backends)
            self.equal = comparison.equal
            self.verdict = comparison.verdict_text()
            self.summary = comparison.summary()
            self.source = list(comparison.source_lines)
            self.first_line = comparison.firstlineno
            self._show_divergence(comparison.first_divergence)
            self.maps = self._maps(comparison)

    def _show_divergence(self, found) -> None:
        if found is None:
            self.step_text = "every backend agrees" if self.equal else ""
            return
        if found.step is None:
            self.step_text = f"{found.backend}, program {found.program}: {found.reason}"
            return
        step = found.step
        if not self.first_line <= step.lineno < self.first_line + len(self.source):
            self.source, self.first_line = [step.line], step.lineno  # a @qnb.func elsewhere
        self.current_line = int(step.lineno)
        got = found.values.get(found.backend)
        expected = np.asarray(found.expected)
        element = found.element
        pick = (lambda v: np.asarray(v)[element]) if element else (lambda v: np.asarray(v))
        detail = ""
        if got is not None and np.shape(got) == expected.shape:
            detail = (
                f": expected {_text(pick(expected))}, {found.backend} {_text(pick(got))}, "
                f"difference {_text(pick(_difference(got, expected)))}"
            )
        self.step_text = (
            f"first divergence on {found.backend}: program {found.program}, step "
            f"{step.index} (line {step.lineno}: {step.op}"
            + (f" \u2192 {step.target}" if step.target else "")
            + f"), element {element}{detail}"
        )
        values, scalars, differences = [], [], []
        for name, value in found.values.items():
            if value is None:
                continue
            value = np.asarray(value)
            if value.ndim == 0:
                scalars.append(f"{name}: {_text(value)}")
                continue
            marks = [] if name == "cpu" else _marks(_differing(value, expected))
            values.append({"name": name, **arrays.encode(value), "marks": marks, "role": "value"})
            if name != "cpu" and value.shape == expected.shape:
                diff = _difference(value, expected)
                state = {"name": f"{name} \u2212 cpu", **arrays.encode(diff), "marks": marks}
                differences.append(state | {"role": "difference"})
        # the backends' values on one colour scale (one colour bar); a difference its own
        if values:
            low = min(v["vmin"] for v in values)
            high = max(v["vmax"] for v in values)
            for v in values:
                v["vmin"], v["vmax"] = low, high
        self.values, self.scalars = values + differences, scalars

    @staticmethod
    def _maps(comparison) -> list[dict]:
        """A mismatch map per stored array and backend that differs there."""
        return [
            mismatch_map(comparison, name, backend)
            for name, per_backend in comparison.arrays.items()
            for backend in comparison.backends[1:]
            if per_backend[backend].mismatches
        ]

    def __repr__(self) -> str:
        return f"CompareView({self.kernel_name!r} on {', '.join(self.backends)}: {self.verdict})"

    # ------------------------------------------------------------------ static rendering

    def _static_html(self, png: bytes | None) -> str:
        lines = []
        if not self.equal:
            for k, text in enumerate(self.source):
                number = self.first_line + k
                style = (
                    ' style="background:rgba(255,200,0,0.35)"'
                    if number == self.current_line
                    else ""
                )
                lines.append(
                    f'<div{style}><span style="color:#888;display:inline-block;width:3em">'
                    f"{number}</span>{html.escape(text)}</div>"
                )
        summary = "".join(f"<div>{html.escape(s)}</div>" for s in self.summary)
        scalars = "".join(f"<div>{html.escape(s)}</div>" for s in self.scalars)
        return (
            '<div class="qnb-static qnb-compareview-static">'
            f"<b>{html.escape(repr(self))}</b>"
            f'<div style="font:12px monospace">{summary}</div>'
            f'<div style="font:12px monospace;white-space:pre;margin:4px 0">{"".join(lines)}</div>'
            f'<div style="font:12px monospace">{html.escape(self.step_text)}</div>'
            f'<div style="font:12px monospace">{scalars}</div>{self._img(png)}</div>'
        )

    def _static_png(self) -> bytes | None:
        values = [v for v in self.values if v["role"] == "value"]
        panels = [(v["name"], v, v is values[-1]) for v in values]
        panels += [(v["name"], v, True) for v in self.values if v["role"] == "difference"]
        maps = self.maps if not self.equal else []
        if not panels and not maps:
            return None
        columns = max(len(panels), 1)
        width = max(3.0 * columns, 6.0 if maps else 0.0)
        height = (3.0 if panels else 0.0) + 4.0 * len(maps)
        fig = static_render.new_figure(width, height)
        if fig is None:
            return None
        rows = (1 if panels else 0) + len(maps)
        grid = fig.add_gridspec(
            rows, columns, height_ratios=[3.0] * bool(panels) + [4.0] * len(maps)
        )
        for k, (title, state, bar) in enumerate(panels):
            static_render.draw_heatmap(
                fig.add_subplot(grid[0, k]),
                arrays.decode(state),
                state["vmin"],
                state["vmax"],
                title=title,
                regions=state["marks"],
                values=False,
                colour_bar=bar,  # (the backends' values share the last one's)
            )
        for k, state in enumerate(maps):
            ax = fig.add_subplot(grid[k + bool(panels), :])
            static_render.draw_mismatch_map(ax, state, decode_pooled(state))
        fig.suptitle(self.step_text or repr(self), fontsize=8, family="monospace", y=1.02)
        return static_render.figure_png(fig)
