"""``CompareView``: where one kernel parts between backends (a ``qnb.Comparison``)."""

from __future__ import annotations

import html

import numpy as np
import traitlets

from qnb.viz import arrays, static_render
from qnb.viz.assets import widget_module
from qnb.viz.widget import QnbWidget

MAX_MARKS = 4096  # differing elements outlined in one value (a 64x64 tile has 4,096)


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
        values, scalars = [], []
        for name, value in found.values.items():
            if value is None:
                continue
            value = np.asarray(value)
            if value.ndim == 0:
                scalars.append(f"{name}: {_text(value)}")
                continue
            marks = [] if name == "cpu" else _marks(_differing(value, expected))
            values.append({"name": name, **arrays.encode(value), "marks": marks})
            if name != "cpu" and value.shape == expected.shape:
                diff = _difference(value, expected)
                values.append({"name": f"{name} \u2212 cpu", **arrays.encode(diff), "marks": marks})
        self.values, self.scalars = values, scalars

    @staticmethod
    def _maps(comparison) -> list[dict]:
        from qnb.compare import agree

        out = []
        for name, per_backend in comparison.arrays.items():
            reference = comparison.results[comparison.backends[0]][name]
            for backend in comparison.backends[1:]:
                record = per_backend[backend]
                value = comparison.results[backend][name]
                bad = ~agree(value, reference, record.rtol, record.atol)
                shown, steps = arrays.downsampled(bad.astype(np.int32))
                state = {
                    "name": f"{name} on {backend}",
                    **arrays.encode(shown),
                    "full_shape": list(bad.shape),
                    "steps": steps,
                    "mismatches": record.mismatches,
                }
                state["vmin"], state["vmax"] = 0.0, 1.0
                out.append(state)
        return out

    def __repr__(self) -> str:
        state = "equal" if self.equal else "different"
        return f"CompareView({self.kernel_name!r} on {', '.join(self.backends)}: {state})"

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
        panels = [(v["name"], arrays.decode(v), v, v["marks"]) for v in self.values]
        panels += [(m["name"], arrays.decode(m), m, []) for m in self.maps if not self.equal]
        if not panels:
            return None
        fig = static_render.new_figure(2.4 * len(panels), 2.6)
        if fig is None:
            return None
        for k, (title, value, state, marks) in enumerate(panels):
            ax = fig.add_subplot(1, len(panels), k + 1)
            steps = state.get("steps") or [1] * value.ndim
            if value.ndim == 3:
                value, steps = value[0], steps[1:]
                title += "[0]"
            if "mismatches" in state:
                title += f": {state['mismatches']} differ"
            static_render.draw_heatmap(
                ax,
                value,
                state["vmin"],
                state["vmax"],
                title=title,
                regions=marks,
                values=False,
                colour_bar=False,
                steps=(steps[-2] if len(steps) > 1 else 1, steps[-1]),
            )
        fig.suptitle(self.step_text or repr(self), fontsize=8, family="monospace", y=1.06)
        return static_render.figure_png(fig)
