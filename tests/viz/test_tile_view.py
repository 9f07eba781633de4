"""TileView: traitlets state after construction and updates, and the static fallback."""

import numpy as np
import pytest

pytest.importorskip("anywidget")

from qnb.viz import TileView
from qnb.viz.arrays import decode

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


def test_tile_state_is_bytes_shape_dtype():
    tile = np.arange(256, dtype=np.float32).reshape(16, 16)
    view = TileView(tile, title="t")
    assert view.shape == [16, 16]
    assert view.dtype == "float32"
    assert view.title == "t"
    assert isinstance(view.data, bytes) and len(view.data) == 256 * 4
    assert (view.vmin, view.vmax) == (0.0, 255.0)
    np.testing.assert_array_equal(view.array, tile)


def test_update_replaces_contents_and_range():
    view = TileView(np.zeros((16, 16), np.float32))
    view.update(np.full((32, 48), -2.5, np.float64), title="bigger")
    assert view.shape == [32, 48]
    assert view.dtype == "float64"
    assert view.title == "bigger"
    assert view.vmin == view.vmax == -2.5
    view.array = np.eye(16, dtype=np.int32)
    assert view.dtype == "int32" and view.array.sum() == 16


@pytest.mark.parametrize(
    ("dtype", "wire"),
    [(np.float16, "float16"), (np.float64, "float64"), (np.int64, "float64"), (np.bool_, "bool")],
)
def test_dtypes_on_the_wire(dtype, wire):
    a = (np.arange(16) % 3).astype(dtype)
    view = TileView(a)
    assert view.dtype == wire
    assert view.dtype_name == np.dtype(dtype).name
    np.testing.assert_array_equal(view.array, a.astype(view.array.dtype))


def test_nan_and_inf_do_not_break_the_range():
    a = np.array([[np.nan, 1.0], [np.inf, 3.0]], np.float32)
    view = TileView(a)
    assert (view.vmin, view.vmax) == (1.0, 3.0)


def test_three_d_arrays_pick_a_slab():
    view = TileView(np.random.default_rng(0).random((3, 16, 16)))
    assert view.shape == [3, 16, 16]
    view.batch = 9
    assert view.batch == 2  # clamped to the last slab
    view.update(np.ones((16, 16)))
    assert view.batch == 0


def test_objects_with_numpy_method_are_accepted():
    class DeviceLike:
        def numpy(self):
            return np.ones((16, 16), np.float32)

    assert TileView(DeviceLike()).array.sum() == 256


def test_rejects_four_dimensions():
    with pytest.raises(ValueError, match="1 to 3 dimensions"):
        TileView(np.zeros((2, 2, 2, 2)))


@pytest.mark.parametrize("value", ["abc", np.zeros((2, 2), complex), np.array([[None]])])
def test_rejects_what_is_not_numbers(value):
    with pytest.raises(TypeError, match="arrays of numbers"):
        TileView(value)


def test_mimebundle_has_widget_html_and_png():
    view = TileView(np.arange(256, dtype=np.float32).reshape(16, 16), title="A")
    data, _ = view._repr_mimebundle_()
    assert data[WIDGET_MIME]["model_id"] == view.model_id
    assert data["text/plain"] == "TileView(16×16 float32, title='A')"
    assert "<table" in data["text/html"] and ">255<" in data["text/html"]
    pytest.importorskip("matplotlib")
    assert data["image/png"].startswith(b"\x89PNG")


def test_large_array_html_embeds_the_png():
    pytest.importorskip("matplotlib")
    view = TileView(np.random.default_rng(1).random((64, 64)).astype(np.float32))
    data, _ = view._repr_mimebundle_()
    assert "data:image/png;base64," in data["text/html"]


def test_decode_roundtrip():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    view = TileView(a)
    state = {"data": view.data, "shape": view.shape, "dtype": view.dtype}
    np.testing.assert_array_equal(decode(state), a)


def drawn_axes(a):
    """The matplotlib Axes a TileView's static PNG is drawn from."""
    pytest.importorskip("matplotlib")
    from qnb.viz import static_render

    fig = static_render.new_figure(4, 4)
    ax = fig.add_subplot()
    static_render.draw_heatmap(ax, a, float(np.min(a)), float(np.max(a)))
    return ax


@pytest.mark.parametrize(
    ("shape", "xticks", "yticks", "texts"),
    [
        ((16, 16), [0, 4, 8, 12], [0, 4, 8, 12], 256),
        ((32, 24), [0, 4, 8, 12, 16, 20], [0, 4, 8, 12, 16, 20, 24, 28], 32 * 24),
        ((48, 64), [0, 16, 32, 48], [0, 16, 32], 0),
        ((20,), [0, 4, 8, 12, 16], [], 20),  # 1-D: one row, no row labels
        ((4, 1024), list(range(0, 1024, 64)), [0], 0),  # at most 16 labels an axis
    ],
)
def test_static_png_labels_indices_and_shows_values_up_to_32(shape, xticks, yticks, texts):
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    ax = drawn_axes(a)
    assert list(ax.get_xticks()) == xticks and list(ax.get_yticks()) == yticks
    assert [t.get_text() for t in ax.get_xticklabels()] == [str(n) for n in xticks]
    assert len(ax.texts) == texts


def test_static_png_of_a_32x32_array_has_room_for_its_values():
    pytest.importorskip("matplotlib")
    import io

    from matplotlib.image import imread

    small = TileView(np.zeros((16, 16), np.float32))._static_png()
    large = TileView(np.zeros((32, 32), np.float32))._static_png()
    width = {name: imread(io.BytesIO(png)).shape[1] for name, png in [("s", small), ("l", large)]}
    assert width["l"] > 1.7 * width["s"]  # about the same cell size as a 16x16 tile


def test_html_table_labels_rows_and_columns():
    view = TileView(np.zeros((20, 8), np.float32))
    html = view._repr_mimebundle_()[0]["text/html"]
    head = html.split("</tr>")[0]
    assert ">0<" in head and ">4<" in head
    assert ">8<" not in head  # 8 columns: 0 and 4 are labelled
    assert html.count('text-align:right">16</th>') == 1  # row 16's label


def test_static_png_of_a_1d_array_has_no_row_labels(monkeypatch):
    pytest.importorskip("matplotlib")
    from qnb.viz import static_render

    axes = []
    draw = static_render.draw_heatmap
    monkeypatch.setattr(
        static_render, "draw_heatmap", lambda ax, *a, **k: (axes.append(ax), draw(ax, *a, **k))
    )
    TileView(np.arange(20.0))._static_png()
    assert list(axes[0].get_yticks()) == [] and list(axes[0].get_xticks()) == [0, 4, 8, 12, 16]
