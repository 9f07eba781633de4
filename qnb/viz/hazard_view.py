"""``HazardView``: races between the programs of one launch (a ``qnb.Hazards``)."""

from __future__ import annotations

import html
import linecache

import numpy as np
import traitlets

from qnb.viz import arrays, static_render
from qnb.viz.assets import widget_module
from qnb.viz.widget import QnbWidget

MAX_ROWS = 200  # hazard records listed (the first, as qnb.check orders them)
MAX_MARKS = 4096  # runs of conflicting elements outlined in one array
# the two programs of the selected record, and the conflicting elements
FIRST, SECOND, CONFLICT = (0, 170, 255), (255, 0, 200), (255, 40, 40)


def _text(program) -> str:
    return "(" + ", ".join(str(p) for p in program) + ")"


def _runs(mask: np.ndarray) -> list[dict]:
    """The True elements of a 2-D mask as rectangles: runs along a row, merged with the
    same run of the rows below (a conflicting tile is one rectangle, not 16 runs)."""
    padded = np.zeros((mask.shape[0], mask.shape[1] + 2), np.int8)
    padded[:, 1:-1] = mask
    edges = np.diff(padded, axis=1)
    starts, stops = np.nonzero(edges == 1), np.nonzero(edges == -1)
    open_runs: dict[tuple[int, int], dict] = {}  # (c0, c1) -> its rectangle, still growing
    out = []
    for row, c0, c1 in zip(starts[0].tolist(), starts[1].tolist(), stops[1].tolist()):
        found = open_runs.get((c0, c1))
        if found is not None and found["r1"] == row:
            found["r1"] = row + 1
            continue
        found = {"array": "", "batch": None, "r0": row, "r1": row + 1, "c0": c0, "c1": c1}
        found |= {"kind": "write", "rgb": list(CONFLICT)}
        open_runs[(c0, c1)] = found
        out.append(found)
        if len(out) >= MAX_MARKS:
            break
    return out


class HazardView(QnbWidget):
    """Show a ``qnb.Hazards``: its summary and records (select one); each array in
    conflict as a heatmap of its values after the launch with the conflicting elements
    outlined in red, the selected record's two programs' windows outlined in blue
    (the first program) and magenta (the second); and the kernel's source with each
    program's line highlighted in its colour. Renders statically (HTML and PNG) too.

    >>> HazardView(qnb.check(k[grid], *args))
    """

    _esm = widget_module("hazard_view.js")

    kernel_name = traitlets.Unicode("").tag(sync=True)
    ok = traitlets.Bool(True).tag(sync=True)
    summary = traitlets.Unicode("").tag(sync=True)
    records = traitlets.List(traitlets.Dict()).tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)
    source = traitlets.List(traitlets.Unicode()).tag(sync=True)
    first_line = traitlets.Int(1).tag(sync=True)
    lines = traitlets.List(traitlets.Int()).tag(sync=True)  # the two programs' lines
    other_lines = traitlets.List(traitlets.Dict()).tag(sync=True)  # lines outside source
    panels = traitlets.List(traitlets.Dict()).tag(sync=True)  # one per array in conflict

    def __init__(self, hazards, **kwargs):
        from qnb.hazards import Hazards

        if not isinstance(hazards, Hazards):
            raise TypeError(
                f"HazardView shows a qnb.Hazards (from qnb.check(...)), "
                f"not {type(hazards).__name__}"
            )
        super().__init__(**kwargs)
        self.hazards = hazards
        with self.hold_sync():
            self.kernel_name = hazards.kernel_name
            self.ok = hazards.ok
            self.summary = hazards.summary()
            self.source = list(hazards.source_lines)
            self.first_line = hazards.firstlineno
            self.records = [self._row(h) for h in hazards.hazards[:MAX_ROWS]]
            self.selected = 0 if self.records else -1
            self._show(self.selected)

    @staticmethod
    def _row(h) -> dict:
        return {
            "kind": h.kind,
            "array": h.array,
            "index": list(h.index),
            "programs": [_text(p) for p in h.programs],
            "lines": list(h.lines),
            "count": h.count,
            "text": h.describe(),
        }

    @traitlets.observe("selected")
    def _on_select(self, change) -> None:
        number = change["new"]
        if not 0 <= number < len(self.records):
            return
        with self.hold_sync():
            self._show(number)

    def _show(self, number: int) -> None:
        if number < 0:
            self.lines, self.other_lines, self.panels = [], [], []
            return
        record = self.hazards.hazards[number]
        self.lines = list(record.lines)
        inside = range(self.first_line, self.first_line + len(self.source))
        self.other_lines = [
            {"line": n, "text": linecache.getline(self.hazards.filename, n).rstrip()}
            for n in dict.fromkeys(record.lines)
            if n not in inside
        ]
        self.panels = [self._panel(name, record) for name in self.hazards.arrays]

    def _panel(self, name: str, record) -> dict:
        value = self.hazards.arrays[name]
        conflicts = self.hazards.conflicts[name]
        mine = record.array == name
        slab = None
        if value.ndim == 3:
            slab = record.index[0] if mine else int(np.argwhere(conflicts)[0][0])
        shown, steps = arrays.downsampled(value)
        mask = conflicts[slab] if slab is not None else conflicts.reshape(-1, conflicts.shape[-1])
        regions = _runs(mask)
        if mine:
            for program, colour in zip(record.windows, (FIRST, SECOND)):
                for w in program:
                    if w.batch is None or w.batch == slab:
                        regions.append(
                            {"array": name, "batch": w.batch, "r0": w.r0, "r1": w.r1}
                            | {"c0": w.c0, "c1": w.c1, "kind": "write", "rgb": list(colour)}
                        )
        count = int(conflicts.sum())
        return {
            "name": name,
            **arrays.encode(shown),
            "full_shape": list(value.shape),
            "steps": steps,
            "batch": slab,
            "regions": regions,
            "title": f"{name}{'' if slab is None else f'[{slab}]'}: {count:,} in conflict",
        }

    def __repr__(self) -> str:
        more = "+" if self.hazards.truncated else ""
        state = "no hazard" if self.ok else f"{len(self.hazards.hazards):,}{more} hazards"
        return f"HazardView({self.kernel_name!r}: {state})"

    # ------------------------------------------------------------------ static rendering

    def _static_html(self, png: bytes | None) -> str:
        lines = []
        colours = {n: c for n, c in zip(reversed(self.lines), (SECOND, FIRST))}
        shown = [(self.first_line + k, text) for k, text in enumerate(self.source)]
        shown += [(row["line"], row["text"]) for row in self.other_lines]
        for number, text in shown:
            colour = colours.get(number)
            style = f' style="background:rgba({",".join(map(str, colour))},0.35)"' if colour else ""
            lines.append(
                f'<div{style}><span style="color:#888;display:inline-block;width:3em">'
                f"{number}</span>{html.escape(text)}</div>"
            )
        rows = "".join(
            f"<div>{html.escape(r['kind'])}: {html.escape(r['text'])}</div>"
            for r in self.records[:20]
        )
        more = len(self.records) - 20
        if more > 0:
            rows += f"<div>… {more:,} more</div>"
        return (
            '<div class="qnb-static qnb-hazardview-static">'
            f"<b>{html.escape(repr(self))}</b>"
            f'<div style="font:12px monospace">{html.escape(self.summary)}</div>'
            f'<div style="font:12px monospace;margin:4px 0">{rows}</div>'
            f'<div style="font:12px monospace;white-space:pre;margin:4px 0">{"".join(lines)}</div>'
            f"{self._img(png)}</div>"
        )

    def _static_png(self) -> bytes | None:
        if not self.panels:
            return None
        fig = static_render.new_figure(4.2 * len(self.panels), 4.2)
        if fig is None:
            return None
        for k, panel in enumerate(self.panels):
            ax = fig.add_subplot(1, len(self.panels), k + 1)
            value, steps = arrays.decode(panel), panel["steps"]
            if value.ndim == 3:
                value, steps = value[panel["batch"] // steps[0]], steps[1:]
            static_render.draw_heatmap(
                ax,
                value,
                panel["vmin"],
                panel["vmax"],
                title=panel["title"],
                regions=panel["regions"],
                values=False,
                colour_bar=False,
                steps=(steps[-2] if len(steps) > 1 else 1, steps[-1]),
            )
        record = self.records[self.selected] if self.selected >= 0 else None
        title = record["text"] if record else self.summary
        fig.suptitle(title, fontsize=8, family="monospace", y=1.04)
        return static_render.figure_png(fig)
