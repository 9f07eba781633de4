"""``TileView``: a heatmap of a tile or array, with values, a colour bar and the 16x16 grid."""

from __future__ import annotations

import html

import traitlets

from qnb.viz import arrays, static_render
from qnb.viz.assets import widget_module
from qnb.viz.widget import QnbWidget

THIN_INCHES = 0.4  # the least height (width) a static PNG gives a thin array


class TileView(QnbWidget):
    """Show a tile of any shape or an array: values written in the cells up to 32x32, row
    and column indices labelled, and the tile grid (16x16, or ``tile=(M, N)``: a kernel's
    own tile shape) drawn over larger arrays. Hovering shows the index and value. Cells
    shrink with the array to the least one can point at; past that the view scrolls.
    1-D arrays show as one row; 3-D arrays one slab at a time (``batch``).

    >>> TileView(np.eye(16, dtype=np.float32), title="I")
    >>> TileView(scores, tile=(64, 64))  # a 200x200 array in Tile[64, 64] blocks

    Call :meth:`update` (or set ``array``) to show new contents in the same view.
    """

    _esm = widget_module("tile_view.js")

    title = traitlets.Unicode("").tag(sync=True)
    data = traitlets.Bytes(b"").tag(sync=True)
    shape = traitlets.List(traitlets.Int(), default_value=[0]).tag(sync=True)
    dtype = traitlets.Unicode("float32").tag(sync=True)  # how ``data`` is encoded
    dtype_name = traitlets.Unicode("float32").tag(sync=True)  # the array's own dtype
    vmin = traitlets.Float(0.0).tag(sync=True)
    vmax = traitlets.Float(1.0).tag(sync=True)
    batch = traitlets.Int(0).tag(sync=True)
    tile = traitlets.List(traitlets.Int(), default_value=[16, 16]).tag(sync=True)  # the grid

    def __init__(self, tile_or_array, title: str | None = None, tile=(16, 16), **kwargs):
        super().__init__(title=title or "", tile=tile, **kwargs)
        self.update(tile_or_array)

    @traitlets.validate("tile")
    def _valid_tile(self, proposal):
        value = proposal["value"]
        if (
            len(value) != 2
            or not all(isinstance(n, int) and not isinstance(n, bool) for n in value)
            or min(value) < 1
        ):
            raise traitlets.TraitError(
                f"tile is the grid's (rows, columns), two positive ints, not {value!r}"
            )
        return [int(n) for n in value]

    @property
    def array(self):
        """The array shown (a read-only NumPy view of the synced bytes)."""
        return arrays.decode({"data": self.data, "shape": self.shape, "dtype": self.dtype})

    @array.setter
    def array(self, value) -> None:
        self.update(value)

    def update(self, tile_or_array, title: str | None = None) -> TileView:
        """Show new contents (and optionally a new title); returns self."""
        state = arrays.encode(tile_or_array)
        with self.hold_sync():
            for name, value in state.items():
                setattr(self, name, value)
            if title is not None:
                self.title = title
            if len(self.shape) != 3 or self.batch >= self.shape[0]:
                self.batch = 0
        return self

    @traitlets.validate("batch")
    def _valid_batch(self, proposal):
        slabs = self.shape[0] if len(self.shape) == 3 else 1
        return max(0, min(proposal["value"], slabs - 1))

    def __repr__(self) -> str:
        shape = "\u00d7".join(str(n) for n in self.shape)
        title = f", title={self.title!r}" if self.title else ""
        return f"TileView({shape} {self.dtype_name}{title})"

    def _shown(self):
        a = self.array
        return a[self.batch] if a.ndim == 3 and len(a) else a

    def _slab_text(self) -> str:
        """Which slab of a 3-D array the static renderings show."""
        if len(self.shape) == 3 and self.shape[0]:
            return f", slab [{self.batch}] of {self.shape[0]}"
        return ""

    def _static_html(self, png: bytes | None) -> str | None:
        shown = self._shown()
        head = f'<div style="font:600 12px sans-serif">{html.escape(repr(self) + self._slab_text())}</div>'
        if shown.size == 0:
            body = static_render.empty_note_html(self.shape)
        elif max(static_render.as_2d(shown).shape) <= static_render.HTML_TABLE_MAX:
            body = static_render.html_table(
                shown, self.vmin, self.vmax
            ) + static_render.colour_bar_html(self.vmin, self.vmax)
            body = f'<div style="display:flex;align-items:flex-start">{body}</div>'
        elif png is not None:
            return None  # the PNG alone says it all (its title is this heading)
        else:
            body = html.escape("(too large for a table of values: matplotlib would draw it)")
        return f'<div class="qnb-static qnb-tileview-static">{head}{body}</div>'

    def _static_png(self) -> bytes | None:
        shown = self._shown()
        if shown.size == 0:
            return None
        rows, cols = static_render.as_2d(shown).shape
        longest = max(rows, cols)
        # a quarter inch a cell up to 32x32, where values are written in the cells
        side = 4.0 if longest <= 16 else 8.0 * longest / 32 if longest <= 32 else 5.0
        width, height = side * cols / longest, side * rows / longest
        # a thin array (1x1000) keeps cells it can be seen in: wider than square
        aspect = "auto" if min(width, height) < THIN_INCHES else "equal"
        fig = static_render.new_figure(
            max(width, THIN_INCHES) + 0.8, max(height, THIN_INCHES) + 0.3
        )
        if fig is None:
            return None
        static_render.draw_heatmap(
            fig.add_subplot(),
            shown,
            self.vmin,
            self.vmax,
            title=(self.title or repr(self)) + self._slab_text(),
            aspect=aspect,
            tile=tuple(self.tile),
        )
        return static_render.figure_png(fig)
