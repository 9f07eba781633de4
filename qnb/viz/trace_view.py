"""``TraceView``: step through a ``qnb.Trace`` op by op and program by program."""

from __future__ import annotations

import html

import numpy as np
import traitlets

from qnb.viz import arrays, static_render
from qnb.viz.assets import widget_module
from qnb.viz.widget import QnbWidget

# A step's tile and vec values, of any shape qnb holds (sides up to 128, vecs up to 16,384
# elements), show as heatmaps; array operands and other values as text.
MAX_TILE_SIDE, MAX_TILE_ELEMENTS = 128, 16_384
MAX_SLABS = 4  # the slabs of one 3-D array drawn at a step, at most
TILE_PANEL_INCHES = 4.6  # a static tile panel, wide enough to write its 16x16 values
STATIC_VALUES_MAX = 16  # a static tile panel writes the values of tiles up to 16 a side
DEFAULT_TILE = [16, 16]  # the grid over an array no step touched


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
    """A tile (2-D, each side at most 128) or vec (1-D) value, of at most 16,384 elements."""
    if not isinstance(value, np.ndarray) or not 0 < value.size <= MAX_TILE_ELEMENTS:
        return False
    return value.ndim == 1 or (value.ndim == 2 and max(value.shape) <= MAX_TILE_SIDE)


def tile_shapes(trace) -> dict[str, list[int]]:
    """The tile grid to draw over each array: the largest window the kernel's steps read
    or wrote in it, along each axis (a partial tile at an edge is clamped, so the largest
    is a whole tile: ``Tile[64, 32]`` loads give ``[64, 32]`` on an array of any size);
    16x16 for an array no step touched. An axis only ever touched one element wide
    (element reads, ``Vec.load_row``) has no grid lines across it."""
    found: dict[str, list[int]] = {}
    for program in trace.programs:
        for step in trace.steps(program):
            for region in (*step.reads, *step.writes):
                rows, cols = region.r1 - region.r0, region.c1 - region.c0
                shape = found.setdefault(region.array, [1, 1])
                shape[0], shape[1] = max(shape[0], rows), max(shape[1], cols)
    out = {}
    for name, array in trace.arrays.items():
        shape = found.get(name, list(DEFAULT_TILE))
        whole = [1, *np.shape(array)][-2:]  # the drawn 2-D view's rows and columns
        out[name] = [n if n > 1 else max(1, int(m)) for n, m in zip(shape, whole)]
    return out


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


def _shared_range(values) -> tuple[float, float]:
    """One colour scale for a step's in and out tiles: the finite values of them all."""
    ranges = [arrays.value_range(np.asarray(v)) for v in values if np.asarray(v).size]
    if not ranges:
        return 0.0, 1.0
    return min(r[0] for r in ranges), max(r[1] for r in ranges)


# In "auto", a step's tiles share one colour scale while each spans at least this part
# of the scale they would share; an op that changes the range (``p = qnb.exp(s - m)``:
# 0 to 1 out of -4 to 4.6 in) gives each tile its own.
SHARED_SPAN = 0.4
SCALES = ("auto", "shared", "per-tile")


def scale_in_use(values, scale: str) -> str:
    """``"shared"`` or ``"per-tile"``: the colour scale a step's in/out ``values`` are
    drawn on under the view's ``scale`` option."""
    if scale != "auto":
        return scale
    low, high = _shared_range(values)
    span = high - low
    if span <= 0:
        return "shared"
    for value in values:
        own_low, own_high = arrays.value_range(np.asarray(value))
        if own_high - own_low < SHARED_SPAN * span:
            return "per-tile"
    return "shared"


def loop_text(step) -> str:
    """The loop iteration of a step: ``kb = 2`` (``i = 1, kb = 2`` in nested loops);
    empty outside loops."""
    return ", ".join(f"{name} = {value}" for name, value in getattr(step, "loops", {}).items())


def changed_tile(step) -> np.ndarray | None:
    """``out − in`` of a step that updates a tile in place (``acc = qnb.mma(a, b, acc)``,
    ``t.cholesky_(eps)``, ``t += u``: an input named as the target, of the output's
    shape), as float64; an element equal before and after (an unchanged ±inf or NaN too)
    is 0. None for any other step."""
    before = step.inputs.get(step.target) if step.target else None
    after = step.output
    if not (_is_tile_value(before) and _is_tile_value(after)) or before.shape != after.shape:
        return None
    if before.dtype.kind not in "iuf" or after.dtype.kind not in "iuf":
        return None
    old, new = before.astype(np.float64), after.astype(np.float64)
    same = (old == new) | (np.isnan(old) & np.isnan(new))
    with np.errstate(invalid="ignore"):
        return np.where(same, 0.0, new - old)


def slabs_touched(steps, name: str) -> list[int]:
    """The slabs of 3-D array ``name`` that ``steps`` read or wrote, in order."""
    found = {
        region.batch
        for step in steps
        for region in (*step.reads, *step.writes)
        if region.array == name and region.batch is not None
    }
    return sorted(found)


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

    Steps are numbered as ``view.step`` and ``TraceStep.index`` number them, from 0
    ("step 5 (0–6)"); a step inside ``for`` loops says its iteration (``kb = 2``). The
    step's tiles share one colour scale, except where the op changes the range (a tile
    spans less than 40% of the shared scale: ``p = qnb.exp(s - m)``), where each has its
    own; ``scale="shared"`` or ``"per-tile"`` chooses one for every step (``"auto"``:
    the default). Tiles are labelled with the kernel's dtype.

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
    # the colour scale the step's in/out tiles share ("changed", out − in, has its own)
    tile_range = traitlets.List(traitlets.Float(), [0.0, 1.0]).tag(sync=True)
    # the option: "auto" (one scale, or one per tile where the op changes the range),
    # "shared" or "per-tile"; and the one in use at this step ("shared" or "per-tile")
    scale = traitlets.Enum(SCALES, "auto").tag(sync=True)
    tile_scale = traitlets.Unicode("shared").tag(sync=True)
    # the loop iteration of the step ("kb = 2"), and the step's place ("step 5 (0–6)")
    loop_text = traitlets.Unicode("").tag(sync=True)
    step_text = traitlets.Unicode("").tag(sync=True)
    scalars = traitlets.List(traitlets.Dict()).tag(sync=True)  # this step's other values
    arrays = traitlets.List(traitlets.Dict()).tag(sync=True)  # array arguments at this step
    regions = traitlets.List(traitlets.Dict()).tag(sync=True)  # this step's reads/writes
    # 3-D array -> the slabs shown: those the step touched, else those its program touched
    slabs = traitlets.Dict().tag(sync=True)

    def __init__(self, trace, **kwargs):
        import qnb

        if not isinstance(trace, qnb.Trace):
            raise TypeError(
                f"TraceView shows a qnb.Trace (from kernel.trace[grid](*args)), "
                f"not {type(trace).__name__}"
            )
        # program and step are checked against the trace, so they are set after it
        chosen = {name: kwargs.pop(name) for name in ("program", "step") if name in kwargs}
        if "scale" in kwargs:
            chosen["scale"] = kwargs.pop("scale")
        super().__init__(**kwargs)
        self.trace = trace
        self._colour_ranges = _colour_ranges(trace)
        self._tile_shapes = tile_shapes(trace)
        self._shown_arrays: dict[str, np.ndarray] = {}
        self._program_slabs: dict[tuple[int, str], list[int]] = {}
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

    @traitlets.observe("step", "scale")
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
                self.loop_text, self.step_text = "", self._step_text()
                self.tiles, self.scalars, self.regions = [], [], []
                self.tile_range = [0.0, 1.0]
                self._show_arrays(self.trace.initial_arrays)
                self.slabs = self._slabs(None, steps)
            return
        tiles, scalars, shown = [], [], []
        values = [(name, "in", v) for name, v in step.inputs.items()]
        if step.output is not None:
            values.append((step.target or "result", "out", step.output))
        for name, role, value in values:
            # an array operand (in a hand-made trace) is not one of the step's tiles
            if _is_tile_value(value) and not (role == "in" and name in self.trace.arrays):
                tiles.append({"name": name, "role": role, **arrays.encode(value)})
                shown.append(value)
            else:
                scalars.append({"name": name, "role": role, "text": _scalar_text(value)})
        vmin, vmax = _shared_range(shown)
        in_use = scale_in_use(shown, self.scale)
        if in_use == "shared":
            for tile in tiles:
                tile["vmin"], tile["vmax"] = vmin, vmax
        changed = changed_tile(step)
        if changed is not None:
            # (computed in f64, exactly; labelled with the tile's own dtype)
            state = {"name": step.target, "role": "changed", **arrays.encode(changed)}
            state["dtype_name"] = str(step.output.dtype)
            tiles.append(state)
        target = f" \u2192 {step.target}" if step.target else ""
        with self.hold_sync():
            self._show_source(step)
            self.op_text = f"{step.op}{target}"
            self.loop_text = loop_text(step)
            self.step_text = self._step_text()
            self.tiles, self.scalars, self.tile_range = tiles, scalars, [vmin, vmax]
            self.tile_scale = in_use
            self.regions = [_region(r, "read") for r in step.reads] + [
                _region(r, "write") for r in step.writes
            ]
            self._show_arrays(self.trace.arrays_at(self.current_program, self.step))
            self.slabs = self._slabs(step, steps)

    def _slabs(self, step, steps) -> dict[str, dict]:
        """For each 3-D array, the slabs to draw (``shown``, at most :data:`MAX_SLABS`)
        and how many there were (``count``): those this step read or wrote; for a step
        that touched none of the array, those its program touched (a batched kernel's
        program works on its own slab); else slab 0."""
        out = {}
        for a in self.arrays:
            if len(a["full_shape"]) != 3:
                continue
            name = a["name"]
            touched = slabs_touched([step], name) if step is not None else []
            if not touched:
                key = (self.program, name)
                if key not in self._program_slabs:
                    self._program_slabs[key] = slabs_touched(steps, name)
                touched = self._program_slabs[key] or [0]
            if not a["full_shape"][0]:
                touched = []
            out[name] = {"shown": touched[:MAX_SLABS], "count": len(touched)}
        return out

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
        state["tile"] = self._tile_shapes.get(name, list(DEFAULT_TILE))  # the kernel's grid
        return state

    def __repr__(self) -> str:
        loop = f", {self.loop_text}" if self.loop_text else ""
        return (
            f"TraceView({self.kernel_name!r}, program {self.current_program}, "
            f"{self._step_text()}{loop})"
        )

    def _step_text(self) -> str:
        """``step 5 (0–6)``: the step's index, as ``view.step`` and ``TraceStep.index``
        number it, and the indices the program has; ``no steps`` for a program with none
        (as the live view says)."""
        if not self.num_steps:
            return "no steps"
        return f"step {self.step} (0\u2013{self.num_steps - 1})"

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
        # (title, 2-D values, state, regions, values written, colour bar)
        panels = []
        pairs = [t for t in self.tiles if t["role"] != "changed"]
        for t in self.tiles:
            last_pair = t is (pairs[-1] if pairs else None)
            title = f"{t['role']} {t['name']}"
            if t["role"] == "changed":
                title = f"changed {t['name']} (out \u2212 in)"
            # in/out tiles share one colour bar (on the last of them) unless each has its
            # own scale (tile_scale "per-tile"); "changed" has its own
            bar = last_pair or t["role"] == "changed" or self.tile_scale == "per-tile"
            value = arrays.decode(t)
            panels.append((title, value, t, [], max(value.shape) <= STATIC_VALUES_MAX, bar))
        for a in self.arrays:
            mine = [r for r in self.regions if r["array"] == a["name"]]
            value, steps = arrays.decode(a), a.get("steps") or [1] * len(a["shape"])
            if value.ndim != 3 or not len(value):
                panels.append((a["name"], value, a, mine, False, False))
                continue
            slabs = self.slabs.get(a["name"], {"shown": [0], "count": 1})
            sent = sorted({b // steps[0] for b in slabs["shown"]})  # the slabs sent
            for k, index in enumerate(sent):
                batch = index * steps[0]
                title = f"{a['name']}[{batch}]"
                if k == len(sent) - 1 and slabs["count"] > len(slabs["shown"]):
                    title += f" (+{slabs['count'] - len(slabs['shown'])} more)"
                shown = [r for r in mine if r["batch"] is None or r["batch"] // steps[0] == index]
                panels.append((title, value[index], a, shown, False, False))
        if not panels:
            return None
        # a tile needs room: 16 cells of 0.28 in for its values, 128 rows of 1/28 in (a
        # tall tile's panel is narrower: 128x64 is half as wide)
        widths = [
            TILE_PANEL_INCHES * max(0.45, min(1.0, _columns(p[1]) / _rows(p[1])))
            for p in panels[: len(self.tiles)]
        ] + [2.6] * (len(panels) - len(self.tiles))
        height = TILE_PANEL_INCHES if self.tiles else max(widths)
        fig = static_render.new_figure(sum(widths), height)
        if fig is None:
            return None
        grid = fig.add_gridspec(1, len(panels), width_ratios=widths)
        for k, (title, value, state, mine, values, bar) in enumerate(panels):
            ax = fig.add_subplot(grid[0, k])
            steps = state.get("steps") or [1] * len(state["shape"])
            if max(steps) > 1:
                title += " (sampled)"
            static_render.draw_heatmap(
                ax,
                value,
                state["vmin"],
                state["vmax"],
                title=title,
                regions=mine,
                values=values,
                colour_bar=bar,
                steps=(steps[-2] if len(steps) > 1 else 1, steps[-1]),
                tile=tuple(state.get("tile", DEFAULT_TILE)),
            )
        fig.suptitle(
            f"{self.kernel_name}, program {self.current_program}, {self._step_text()}"
            + (f" ({self.loop_text})" if self.loop_text else "")
            + f": {self.op_text} (line {self.current_line}); arrays as they were at this step",
            fontsize=8,
            family="monospace",
            y=1.06,  # above the panels' titles and column labels
        )
        return static_render.figure_png(fig)


def _rows(value: np.ndarray) -> int:
    return value.shape[0] if value.ndim == 2 else 1


def _columns(value: np.ndarray) -> int:
    return value.shape[-1]


def _array_note(state: dict) -> str:
    """What the static HTML says of an array that is not drawn as it is."""
    shape = static_render.shape_text(state["full_shape"])
    if not np.prod(state["full_shape"]):
        return f"{state['name']}: empty array ({shape})"
    if max(state["steps"]) > 1:
        sampling = static_render.sampling_text(state["steps"])
        return f"{state['name']}: {shape}, too large to show whole; {sampling}"
    return ""
