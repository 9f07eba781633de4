"""Static renderings for where no live widget front end exists (nbconvert, GitHub, a
notebook saved without widget state): HTML tables and matplotlib PNGs.

matplotlib is imported only when a PNG is made, and through its object API (no pyplot
state); without matplotlib the widgets fall back to HTML alone.
"""

from __future__ import annotations

import base64
import html
import io

import numpy as np

from qnb.viz.arrays import format_value

# viridis, 9 stops: the same table as QNB_VIRIDIS in static/heatmap.js.
VIRIDIS = [
    (68, 1, 84),
    (71, 44, 122),
    (59, 81, 139),
    (44, 113, 142),
    (33, 144, 141),
    (39, 173, 129),
    (92, 200, 99),
    (170, 220, 50),
    (253, 231, 37),
]
HTML_TABLE_MAX = 32  # larger arrays get a PNG instead of a table of values
VALUES_MAX = 32  # arrays up to 32x32 show their values in the cells
READ_COLOUR, WRITE_COLOUR = "#00a0e0", "#e03030"
# a mismatch map's cells: agrees, differs closer to exact, differs farther (as
# QNB_MAP_COLOURS in static/compare_view.js)
MAP_COLOURS = ("#e4e4e4", "#f08c00", "#d0021b")
MIN_TILE_PX = 6  # a finer tile grid would hide the cells under it
THIN_PX = 30  # the least height (width) drawn of a thin array (1xN, Nx1) in a square panel


def colour(t: float) -> tuple[int, int, int]:
    if not np.isfinite(t):
        return (128, 128, 128)
    t = min(1.0, max(0.0, t)) * (len(VIRIDIS) - 1)
    i = min(int(t), len(VIRIDIS) - 2)
    f = t - i
    a, b = VIRIDIS[i], VIRIDIS[i + 1]
    return tuple(round(a[k] + (b[k] - a[k]) * f) for k in range(3))


def as_2d(a: np.ndarray) -> np.ndarray:
    """The 2-D view that is drawn: 1-D as one row, 3-D as its first slab (an empty 2-D
    array for a 3-D array with no slabs)."""
    if a.ndim == 1:
        return a.reshape(1, -1)
    if a.ndim == 3:
        return a[0] if len(a) else a.reshape(0, a.shape[2])
    return a


def shape_text(shape) -> str:
    return "\u00d7".join(str(n) for n in shape)


def sampling_text(steps) -> str:
    """How an array sent with every k-th element along each axis was sampled."""
    names = {1: ["elements"], 2: ["rows", "columns"], 3: ["slabs", "rows", "columns"]}
    taken = [f"{k} {name}" for k, name in zip(steps, names[len(steps)]) if k > 1]
    return "sampled: one in every " + " and ".join(taken)


def empty_note_html(shape) -> str:
    """What shows in place of the cells of an array with no elements."""
    return (
        '<div style="font:12px monospace;color:#888;padding:4px 0">'
        f"(empty array: shape {html.escape(shape_text(shape))}, no elements to show)</div>"
    )


def tick_step(rows: int, cols: int) -> int:
    """Rows/columns between two index labels: every 4 up to 32x32, else every 16 (a
    tile's edge), doubled until an axis has at most 16 labels (as ``qnbTickStep`` in
    static/heatmap.js, which spaces them by pixels instead)."""
    step = 4 if max(rows, cols) <= 32 else 16
    while max(rows, cols) > 16 * step:
        step *= 2
    return step


def html_table(a: np.ndarray, vmin: float, vmax: float) -> str:
    """A small array as an HTML table of coloured cells with values, its column and row
    indices labelled every few cells."""
    span = (vmax - vmin) or 1.0
    shown = as_2d(a)
    if shown.size == 0:
        return empty_note_html(np.shape(a))
    step = tick_step(*shown.shape)
    label = "color:#888;font-size:9px;font-weight:400;padding:0 3px"
    head = "".join(
        f'<th style="{label}">{j if j % step == 0 else ""}</th>' for j in range(shown.shape[1])
    )
    rows = [f'<tr><th style="{label}"></th>{head}</tr>']
    for i, row in enumerate(shown):
        row_label = i if i % step == 0 and np.ndim(a) != 1 else ""
        cells = [f'<th style="{label};text-align:right">{row_label}</th>']
        for v in row:
            t = (float(v) - vmin) / span
            r, g, b = colour(t)
            fg = "#000" if np.isfinite(t) and t > 0.6 else "#fff"
            cells.append(
                f'<td style="background:rgb({r},{g},{b});color:{fg};width:2.4em;height:1.6em;'
                f'text-align:center;padding:0;font-size:10px">{html.escape(format_value(v))}</td>'
            )
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        '<table style="border-collapse:collapse;font-family:monospace">'
        + "".join(rows)
        + "</table>"
    )


def colour_bar_html(vmin: float, vmax: float) -> str:
    stops = ", ".join(f"rgb{colour(1 - k / 8)}" for k in range(9))
    return (
        '<div style="display:inline-flex;gap:4px;vertical-align:top;margin-left:6px">'
        f'<div style="width:12px;height:160px;background:linear-gradient({stops})"></div>'
        '<div style="display:flex;flex-direction:column;justify-content:space-between;'
        f'font:11px monospace;height:160px"><span>{html.escape(format_value(vmax))}</span>'
        f"<span>{html.escape(format_value(vmin))}</span></div></div>"
    )


def png_data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def new_figure(width: float, height: float):
    """A matplotlib Figure with an Agg canvas, or None without matplotlib."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return None
    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)
    return fig


# The gid of a cell's value that cannot reach past its axes (draw_heatmap): the tight box
# of a figure is the same without it.
INSIDE_VALUE_GID = "qnb-value-inside"


def figure_png(fig) -> bytes:
    """``fig`` as a PNG cut to what it draws, as ``bbox_inches="tight"`` cuts it."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches=tight_box(fig))
    return buf.getvalue()


def tight_box(fig):
    """The box ``bbox_inches="tight"`` cuts ``fig`` to (inches, padded). matplotlib
    measures it in a dry run of the drawing (ticks and colour bars are placed at draw
    time); here the run leaves out the cells' values that lie well inside their axes: a
    tile's 256 labels, otherwise laid out three times, are most of a drawing's time."""
    from matplotlib import rcParams

    inside = [
        text
        for ax in fig.axes
        for text in ax.texts
        if text.get_gid() == INSIDE_VALUE_GID and text.get_visible()
    ]
    for text in inside:
        text.set_visible(False)
    try:
        fig.draw_without_rendering()
        box = fig.get_tightbbox(fig.canvas.get_renderer())
    finally:
        for text in inside:
            text.set_visible(True)
    return box.padded(rcParams["savefig.pad_inches"])


def _inside(text: str, i: int, j: int, rows: int, cols: int, cell, points: float, dpi) -> bool:
    """Whether a value ``text`` written at the centre of cell (i, j) surely stays inside
    the axes: half its width and height, bounded from above (0.9 em a character, 1.5 em a
    line; DejaVu Sans' digits are 0.64 em), fit between the centre and every edge, with a
    quarter to spare for the colour bar that narrows the axes after the cells are sized."""
    em = points * dpi / 72
    half_w, half_h = 1.25 * 0.9 * em * len(text) / 2, 1.25 * 1.5 * em / 2
    cell_w, cell_h = cell
    return (
        min(j + 0.5, cols - j - 0.5) * cell_w >= half_w
        and min(i + 0.5, rows - i - 0.5) * cell_h >= half_h
    )


def draw_heatmap(
    ax,
    a: np.ndarray,
    vmin: float,
    vmax: float,
    title: str = "",
    regions=(),
    values: bool | None = None,
    colour_bar: bool = True,
    aspect: str = "equal",
    steps: tuple[int, int] = (1, 1),
    tile: tuple[int, int] = (16, 16),
):
    """Draw a heatmap into a matplotlib Axes: cells, values (up to 32x32), row and column
    index labels, the tile grid (``tile``: the kernel's tile shape, 16x16 by default) over
    larger arrays, read/write regions as outlined rectangles (in the region's own ``rgb``
    where it has one). NaN and infinities are grey
    cells with their values written, as in the HTML table and the live view. ``steps``
    (rows, columns) says that ``a`` holds every k-th row and column of a larger array:
    labels, grid and regions are in that array's indices. A thin array (1x128) drawn
    ``equal`` keeps cells one can see: at least :data:`THIN_PX` across its short side."""
    from matplotlib import colormaps

    a2 = as_2d(np.asarray(a, dtype=np.float64))
    if title:
        ax.set_title(title, fontsize=8, family="monospace")
    if a2.size == 0:  # nothing to draw (and imshow would warn)
        _draw_empty(ax, np.shape(a))
        return None
    rows, cols = a2.shape
    box = ax.get_window_extent()
    cell_w = cell_h = min(box.width / cols, box.height / rows)  # px, at an equal aspect
    if aspect == "equal" and min(rows * cell_h, cols * cell_w) < THIN_PX:
        if rows < cols:
            cell_w, cell_h = box.width / cols, min(THIN_PX, box.height) / rows
        else:
            cell_w, cell_h = min(THIN_PX, box.width) / cols, box.height / rows
        aspect = cell_h / cell_w
    image = ax.imshow(
        a2,
        cmap=colormaps["viridis"].with_extremes(bad=tuple(c / 255 for c in colour(np.nan))),
        vmin=vmin,
        vmax=vmax if vmax > vmin else vmin + 1,
        interpolation="nearest",
        aspect=aspect,
    )
    if values is None:
        values = rows <= VALUES_MAX and cols <= VALUES_MAX
    if values:
        drawn = (cell_w, cell_h) if aspect != "auto" else (box.width / cols, box.height / rows)
        _draw_values(ax, a2, vmin, vmax, drawn)
    if aspect == "auto":
        cell_w, cell_h = box.width / cols, box.height / rows
    _draw_tile_grid(ax, rows, cols, (cell_h, cell_w), steps, tile)
    _draw_regions(ax, regions, steps)
    _draw_labels(ax, np.ndim(a), rows, cols, steps)
    if colour_bar:
        bar = ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        bar.ax.tick_params(labelsize=6)
        if not vmax > vmin:  # one value everywhere: one label, at its colour
            bar.set_ticks([vmin], labels=[format_value(vmin)])
    return image


def _draw_empty(ax, shape) -> None:
    ax.set_axis_off()
    ax.text(
        0.5,
        0.5,
        f"(empty array: shape {shape_text(shape)})",
        ha="center",
        va="center",
        fontsize=7,
        family="monospace",
        color="#888",
        transform=ax.transAxes,
    )


def _draw_values(ax, a2, vmin, vmax, drawn) -> None:
    """Each cell's value, black on light cells and white on dark ones; ``drawn`` is a
    cell's (width, height) in pixels."""
    rows, cols = a2.shape
    span = (vmax - vmin) or 1.0
    points = 5 if max(rows, cols) <= 16 else 4.5
    for i in range(rows):
        for j in range(cols):
            t = (a2[i, j] - vmin) / span
            text = format_value(a2[i, j])
            ax.text(
                j,
                i,
                text,
                ha="center",
                va="center",
                fontsize=points,
                color="black" if np.isfinite(t) and t > 0.6 else "white",
                gid=INSIDE_VALUE_GID
                if _inside(text, i, j, rows, cols, drawn, points, ax.figure.dpi)
                else None,
            )


def _draw_tile_grid(ax, rows, cols, cell, steps, tile) -> None:
    """The tile grid, where a tile is a whole number of cells and large enough to see
    (``cell``: a cell's (height, width) in pixels)."""
    (cell_h, cell_w), (row_step, col_step), (tile_rows, tile_cols) = cell, steps, tile
    tile_px = min(tile_rows / row_step * cell_h, tile_cols / col_step * cell_w)
    if tile_rows % row_step == 0 and tile_cols % col_step == 0 and tile_px >= MIN_TILE_PX:
        for i in range(tile_rows // row_step, rows, tile_rows // row_step):
            ax.axhline(i - 0.5, color="white", linewidth=0.8)
        for j in range(tile_cols // col_step, cols, tile_cols // col_step):
            ax.axvline(j - 0.5, color="white", linewidth=0.8)


def _draw_regions(ax, regions, steps) -> None:
    """Read/write regions as outlined rectangles (in the region's own ``rgb`` where it
    has one), in the indices of the whole array."""
    from matplotlib import patheffects
    from matplotlib.patches import Rectangle

    row_step, col_step = steps
    for region in regions:
        edge = WRITE_COLOUR if region["kind"] == "write" else READ_COLOUR
        if region.get("rgb"):  # a region of its own colour (HazardView: each program's)
            edge = "#{:02x}{:02x}{:02x}".format(*region["rgb"])
        r0, c0 = region["r0"] // row_step, region["c0"] // col_step
        r1, c1 = -(-region["r1"] // row_step), -(-region["c1"] // col_step)
        outline = Rectangle(
            (c0 - 0.5, r0 - 0.5),
            c1 - c0,
            r1 - r0,
            fill=True,
            facecolor=edge + "40",
            edgecolor=edge,
            linewidth=2.5,
        )
        # a white rim under the coloured edge: visible on every colour of the map
        outline.set_path_effects([patheffects.withStroke(linewidth=4.5, foreground="white")])
        ax.add_patch(outline)


def _draw_labels(ax, ndim, rows, cols, steps) -> None:
    row_step, col_step = steps
    # index labels: columns above (as in the live view), rows on the left
    step = tick_step(rows * row_step, cols * col_step)
    ax.set_xticks(range(0, cols, max(1, step // col_step)))
    ax.set_xticklabels([str(j * col_step) for j in range(0, cols, max(1, step // col_step))])
    if ndim != 1:
        ax.set_yticks(range(0, rows, max(1, step // row_step)))
        ax.set_yticklabels([str(i * row_step) for i in range(0, rows, max(1, step // row_step))])
    else:
        ax.set_yticks([])
    ax.tick_params(
        labelsize=5, length=2, pad=1, top=True, labeltop=True, bottom=False, labelbottom=False
    )


def map_ticks(n: int, element_px: float, gap_px: float = 48) -> list[int]:
    """Index labels along an axis of ``n`` elements drawn ``element_px`` apart: at the
    multiples of the least step of 1, 2, 4, 8, 16, 32 … whose labels lie at least
    ``gap_px`` apart (so a 512-element axis on 512 px is labelled every 64)."""
    step = 1
    while step * element_px < gap_px and step < n:
        step *= 2
    return list(range(0, n, step))


# What a mismatch map's codes mean (the legend of qnb.compare's maps).
COMPARE_LEGEND = (
    (1, "differs, at least as close to exact"),
    (2, "differs, farther from exact"),
    (0, "agrees within tolerance"),
)


def draw_mismatch_map(ax, state: dict, pooled: np.ndarray, legend=COMPARE_LEGEND) -> None:
    """Draw a map of marked elements (``qnb.viz.compare_view.coded_map``: a mismatch map,
    or a puzzle's wrong elements) into a matplotlib Axes: the array's elements grey,
    each marked one filled in its code's colour (1: orange, 2: red) and, up to the map's
    ``marks``, ringed so that one element shows on a map of any size; index labels at
    least a label's width apart; a legend of ``(code, text)`` pairs."""
    from matplotlib.colors import ListedColormap
    from matplotlib.lines import Line2D

    k = state["pool"]
    rows, cols = state["rows"], state["cols"]
    ax.imshow(
        pooled,
        cmap=ListedColormap(MAP_COLOURS),
        vmin=-0.5,
        vmax=2.5,
        interpolation="nearest",
        aspect="auto" if min(rows, cols) * 8 < max(rows, cols) and min(rows, cols) < 4 else "equal",
        extent=(-0.5, pooled.shape[1] * k - 0.5, pooled.shape[0] * k - 0.5, -0.5),
    )
    for code in (1, 2):
        found = [(i, j) for i, j, c, *_ in state["marks"] if c == code]
        if found:
            i, j = np.array(found).T
            ax.scatter(j, i, s=60, facecolors="none", edgecolors=MAP_COLOURS[code], linewidths=1.5)
    ax.set_title(state["title"], fontsize=7, family="monospace")
    _map_ticks(ax, state, rows, cols)
    symbols = {0: ("s", MAP_COLOURS[0], "#999"), 1: ("o", "none", MAP_COLOURS[1])}
    symbols[2] = ("o", "none", MAP_COLOURS[2])
    handles = [
        Line2D(
            [],
            [],
            marker=symbols[code][0],
            linestyle="",
            markerfacecolor=symbols[code][1],
            markeredgecolor=symbols[code][2],
            markersize=7,
            label=text,
        )
        for code, text in legend
    ]
    ax.legend(
        handles=handles, fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False
    )


def _map_ticks(ax, state: dict, rows: int, cols: int) -> None:
    """A map's index labels, spaced for the drawn axes (56 points apart across, 24 down)."""
    box = ax.get_window_extent()
    points = 72 / ax.figure.dpi
    col_ticks = map_ticks(cols, box.width * points / cols, 56)
    ax.set_xticks(col_ticks, [str(j) for j in col_ticks])
    if rows > 1:
        row_ticks = map_ticks(rows, box.height * points / rows, 24)
        ax.set_yticks(row_ticks, [str(i) for i in row_ticks])
    else:
        ax.set_yticks([])
    ax.tick_params(
        labelsize=6, length=2, pad=1, top=True, labeltop=True, bottom=False, labelbottom=False
    )
