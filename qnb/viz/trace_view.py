"""``TraceView``: step through a ``qnb.Trace`` op by op and program by program."""

from __future__ import annotations

import html

import numpy as np
import traitlets

from qnb.viz import arrays, static_render
from qnb.viz.assets import widget_module
from qnb.viz.widget import QnbWidget

TILE_SHAPES = {(16, 16), (16,)}  # Tile16 and Vec16 values show as heatmaps; others as text


def _region(region, kind: str) -> dict:
    return {
        "array": region.array,
        "r0": region.r0,
        "r1": region.r1,
        "c0": region.c0,
        "c1": region.c1,
        "batch": region.batch,
        "kind": kind,
    }


def _is_tile_value(value) -> bool:
    return isinstance(value, np.ndarray) and value.shape in TILE_SHAPES


def _colour_ranges(trace) -> dict[str, tuple[float, float]]:
    """Each array's colour scale, the same at every step: the values it held at launch
    and at the end (a value held only in between, outside them, takes the end colour)."""
    low = {name: [] for name in trace.arrays}
    high = {name: [] for name in trace.arrays}
    for contents in (trace.initial_arrays, trace.arrays):
        for name, value in contents.items():
            if value.size and value.dtype.kind in "biuf":
                vmin, vmax = arrays.value_range(value)
                low[name].append(vmin)
                high[name].append(vmax)
    return {name: (min(low[name], default=0.0), max(high[name], default=1.0)) for name in low}


def _scalar_text(value) -> str:
    if isinstance(value, np.ndarray):
        shape = "\u00d7".join(str(n) for n in value.shape)
        return f"array {shape} {value.dtype}"
    if isinstance(value, (np.generic, float, int, bool)):
        return arrays.format_value(value) if not isinstance(value, bool) else str(value)
    return repr(value)


class ProgramIndex(traitlets.Int):
    """An index into the view's ``programs``; setting it also takes a program's grid
    coordinates, as ``Trace.steps`` does: a tuple of up to 3 ints (``(1, 0)``, ``(1, 0,
    0)``). A plain int stays an index, which on a 1-D grid is the program's x coordinate.
    A program that is not in the trace is refused, not clamped."""

    info_text = "an index into programs, or a program's coordinates (a tuple of ints)"

    def validate(self, obj, value):
        programs = [tuple(p) for p in obj.programs]
        if isinstance(value, tuple | list):
            if not 1 <= len(value) <= 3 or not all(_is_int(n) for n in value):
                raise traitlets.TraitError(
                    f"program coordinates are a tuple of 1 to 3 ints, not {value!r}"
                )
            coordinates = tuple(int(n) for n in value) + (0,) * (3 - len(value))
            if coordinates not in programs:
                raise traitlets.TraitError(
                    f"program {coordinates} is not in this trace's grid {tuple(obj.grid)}"
                )
            return programs.index(coordinates)
        if isinstance(value, bool):  # True is not program 1
            self.error(obj, value)
        value = super().validate(obj, value)
        if programs and not -len(programs) <= value < len(programs):
            raise traitlets.TraitError(
                f"program index {value} is out of range: this trace has {len(programs)} "
                f"programs (indices 0 to {len(programs) - 1}, or their coordinates)"
            )
        return value % len(programs) if programs else 0


def _is_int(n) -> bool:
    return isinstance(n, int | np.integer) and not isinstance(n, bool | np.bool_)


class StepIndex(traitlets.Int):
    """An index into the current program's steps; a negative one counts from the end (as
    ``Trace.arrays_at`` and ``program`` do). A step the program does not have is refused,
    not clamped; a program with no steps has only step 0."""

    info_text = "an index into the program's steps (negative: from the end)"

    def validate(self, obj, value):
        if isinstance(value, bool | np.bool_):  # True is not step 1
            self.error(obj, value)
        value = super().validate(obj, value)
        if getattr(obj, "trace", None) is None:  # the default, before the trace is set
            return value
        count = len(obj._steps())
        if count == 0 and value == 0:
            return 0
        if not -count <= value < count:
            raise traitlets.TraitError(
                f"step {value} is out of range: program {obj.current_program} has {count} "
                f"steps" + (f" (0 to {count - 1}, or -{count} to -1 from the end)" if count else "")
            )
        return value % count


class TraceView(QnbWidget):
    """Show a recorded kernel run (``kernel.trace[grid](*args)``): pick a program and a
    step; the kernel's source with the step's line highlighted; the tiles it read and
    produced as small heatmaps; every array argument as it was at that step (after the
    step's own store), with the regions this step read (blue) and wrote (red). All state
    is in traitlets: set ``program`` (an index into ``programs``, or a program's
    coordinates such as ``(1, 0, 0)``) and ``step`` (negative: from the end) from Python or
    from the controls; either is refused where the trace has no such one. A step inside a
    ``@qnb.func`` shows that func's source. An array too large to send whole
    (:data:`qnb.viz.arrays.MAX_ELEMENTS`) is sent sampled, every k-th row and column.

    >>> TraceView(trace, program=(1, 0, 0), step=2)
    """

    _esm = widget_module("trace_view.js")

    kernel_name = traitlets.Unicode("").tag(sync=True)
    grid = traitlets.List(traitlets.Int()).tag(sync=True)
    programs = traitlets.List(traitlets.List(traitlets.Int())).tag(sync=True)
    program = ProgramIndex(0).tag(sync=True)
    step = StepIndex(0).tag(sync=True)
    num_steps = traitlets.Int(0).tag(sync=True)
    # the source of the unit the step is in: the kernel, or a @qnb.func it calls
    source = traitlets.List(traitlets.Unicode()).tag(sync=True)
    first_line = traitlets.Int(1).tag(sync=True)
    current_line = traitlets.Int(0).tag(sync=True)
    source_title = traitlets.Unicode("").tag(sync=True)
    op_text = traitlets.Unicode("").tag(sync=True)
    tiles = traitlets.List(traitlets.Dict()).tag(sync=True)  # this step's tile/vec values
    scalars = traitlets.List(traitlets.Dict()).tag(sync=True)  # this step's other values
    arrays = traitlets.List(traitlets.Dict()).tag(sync=True)  # array arguments at this step
    regions = traitlets.List(traitlets.Dict()).tag(sync=True)  # this step's reads/writes

    def __init__(self, trace, **kwargs):
        import qnb

        if not isinstance(trace, qnb.Trace):
            raise TypeError(
                f"TraceView shows a qnb.Trace (from kernel.trace[grid](*args)), "
                f"not {type(trace).__name__}"
            )
        # program and step are checked against the trace, so they are set after it
        chosen = {name: kwargs.pop(name) for name in ("program", "step") if name in kwargs}
        super().__init__(**kwargs)
        self.trace = trace
        self._colour_ranges = _colour_ranges(trace)
        self._shown_arrays: dict[str, np.ndarray] = {}
        with self.hold_sync():
            self.kernel_name = trace.kernel_name
            self.grid = [int(n) for n in trace.grid]
            self.programs = [[int(n) for n in p] for p in trace.programs]
            for name, value in chosen.items():
                setattr(self, name, value)
            self._show_step()

    @property
    def current_program(self) -> tuple[int, ...]:
        """The coordinates of the program on show."""
        return tuple(self.programs[self.program]) if self.programs else ()

    @property
    def current_step(self):
        """The ``qnb.TraceStep`` on show (None for a program with no steps)."""
        steps = self._steps()
        return steps[self.step] if steps else None

    def _steps(self):
        if not self.programs:
            return []
        return self.trace.steps(self.current_program)

    @traitlets.observe("program")
    def _on_program(self, change):
        with self.hold_sync():
            self.step = min(self.step, max(0, len(self._steps()) - 1))
            self._show_step()

    @traitlets.observe("step")
    def _on_step(self, change):
        self._show_step()

    def _show_step(self) -> None:
        steps = self._steps()
        self.num_steps = len(steps)
        step = steps[self.step] if steps else None
        if step is None:
            with self.hold_sync():
                self._show_source(None)
                self.op_text = "(no steps)"
                self.tiles, self.scalars, self.regions = [], [], []
                self._show_arrays(self.trace.initial_arrays)
            return
        tiles, scalars = [], []
        values = [(name, "in", v) for name, v in step.inputs.items()]
        if step.output is not None:
            values.append((step.target or "result", "out", step.output))
        for name, role, value in values:
            if _is_tile_value(value):
                tiles.append({"name": name, "role": role, **arrays.encode(value)})
            else:
                scalars.append({"name": name, "role": role, "text": _scalar_text(value)})
        target = f" \u2192 {step.target}" if step.target else ""
        with self.hold_sync():
            self._show_source(step)
            self.op_text = f"{step.op}{target}"
            self.tiles, self.scalars = tiles, scalars
            self.regions = [_region(r, "read") for r in step.reads] + [
                _region(r, "write") for r in step.writes
            ]
            self._show_arrays(self.trace.arrays_at(self.current_program, self.step))

    def _show_source(self, step) -> None:
        """The source the step ran in, its line highlighted: the kernel's, a ``@qnb.func``'s
        from another cell or file, or (where the trace does not hold that source) the
        step's own line alone. A kernel line is never highlighted for a step elsewhere."""
        trace = self.trace
        kernel = trace.kernel_source
        unit = kernel if step is None else trace.source_of(step)
        if unit is None:
            lines, first, title = [step.line], step.lineno, f"in {step.filename}"
        else:
            lines, first, title = unit.lines, unit.firstlineno, ""
            if unit != kernel:
                elsewhere = unit.filename != kernel.filename
                title = f"in {unit.name}" + (f" ({unit.filename})" if elsewhere else "")
        self.source = [line.rstrip("\n") for line in lines]
        self.first_line = int(first)
        self.current_line = int(step.lineno) if step is not None else 0
        self.source_title = title

    def _show_arrays(self, contents: dict[str, np.ndarray]) -> None:
        """Sync the arrays as of this step; nothing is sent when none changed."""
        shown = self._shown_arrays
        if shown.keys() == contents.keys() and all(
            np.array_equal(shown[name], a, equal_nan=a.dtype.kind == "f")
            for name, a in contents.items()
        ):
            return
        self._shown_arrays = contents
        self.arrays = [self._array_state(name, value) for name, value in contents.items()]

    def _array_state(self, name: str, value: np.ndarray) -> dict:
        """One array's synced state. An array too large to send is sent with every k-th
        row and column (``steps``: k along each axis; ``full_shape``: its own shape): the
        regions a step touches still show where they are, and the values that are sent
        are exact."""
        sampled, steps = arrays.downsampled(value)
        state = {"name": name, **arrays.encode(sampled), "full_shape": list(value.shape)}
        state["steps"] = steps
        # one colour scale for every step, so that a colour keeps its meaning
        state["vmin"], state["vmax"] = self._colour_ranges[name]
        return state

    def __repr__(self) -> str:
        return (
            f"TraceView({self.kernel_name!r}, program {self.current_program}, "
            f"step {self._step_text()})"
        )

    def _step_text(self) -> str:
        """``2/5``; ``0/0`` for a program with no steps (as the live view says)."""
        return f"{self.step + 1 if self.num_steps else 0}/{self.num_steps}"

    def _static_html(self, png: bytes | None) -> str:
        lines = []
        for k, text in enumerate(self.source):
            number = self.first_line + k
            style = (
                ' style="background:rgba(255,200,0,0.35)"' if number == self.current_line else ""
            )
            lines.append(
                f'<div{style}><span style="color:#888;display:inline-block;width:3em">'
                f"{number}</span>{html.escape(text)}</div>"
            )
        title = (
            f'<div style="font:12px monospace;color:#888">{html.escape(self.source_title)}</div>'
            if self.source_title
            else ""
        )
        values = "".join(
            f"<div>{html.escape(s['role'])} {html.escape(s['name'])} = "
            f"{html.escape(s['text'])}</div>"
            for s in self.scalars
        )
        notes = "".join(
            f'<div style="font:12px monospace;color:#888">{html.escape(note)}</div>'
            for note in (_array_note(a) for a in self.arrays)
            if note
        )
        return (
            '<div class="qnb-static qnb-traceview-static">'
            f"<b>{html.escape(repr(self))}</b>{title}"
            f'<div style="font:12px monospace;white-space:pre;margin:4px 0">{"".join(lines)}</div>'
            f'<div style="font:12px monospace">{html.escape(self.op_text)}</div>'
            f'<div style="font:12px monospace">{values}</div>{notes}{self._img(png)}</div>'
        )

    def _static_png(self) -> bytes | None:
        panels = [(f"{t['role']} {t['name']}", arrays.decode(t), t, []) for t in self.tiles]
        for a in self.arrays:
            mine = [r for r in self.regions if r["array"] == a["name"]]
            panels.append((a["name"], arrays.decode(a), a, mine))
        if not panels:
            return None
        fig = static_render.new_figure(2.4 * len(panels), 2.6)
        if fig is None:
            return None
        for k, (title, value, state, mine) in enumerate(panels):
            ax = fig.add_subplot(1, len(panels), k + 1)
            steps = state.get("steps") or [1] * value.ndim
            if value.ndim == 3 and len(value):  # a region names its slab; show the first one
                batch = next((r["batch"] for r in mine if r["batch"] is not None), 0)
                mine = [r for r in mine if r["batch"] in (None, batch)]
                value = value[batch // steps[0]]
                title = f"{title}[{batch // steps[0] * steps[0]}]"
            if max(steps) > 1:
                title += " (sampled)"
            static_render.draw_heatmap(
                ax,
                value,
                state["vmin"],
                state["vmax"],
                title=title,
                regions=mine,
                values=False,
                colour_bar=False,
                steps=(steps[-2] if len(steps) > 1 else 1, steps[-1]),
            )
        fig.suptitle(
            f"{self.kernel_name}, program {self.current_program}, step {self._step_text()}: "
            f"{self.op_text} (line {self.current_line}); arrays as they were at this step",
            fontsize=8,
            family="monospace",
            y=1.06,  # above the panels' titles and column labels
        )
        return static_render.figure_png(fig)


def _array_note(state: dict) -> str:
    """What the static HTML says of an array that is not drawn as it is."""
    shape = static_render.shape_text(state["full_shape"])
    if not np.prod(state["full_shape"]):
        return f"{state['name']}: empty array ({shape})"
    if max(state["steps"]) > 1:
        sampling = static_render.sampling_text(state["steps"])
        return f"{state['name']}: {shape}, too large to show whole; {sampling}"
    return ""
