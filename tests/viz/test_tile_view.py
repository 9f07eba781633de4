"""TileView: traitlets state after construction and updates, and the static fallback."""

import queue

import numpy as np
import pytest

pytest.importorskip("anywidget")

from qnb.errors import QnbTypeError
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


def test_device_arrays_are_copied_back():
    import qnb

    class DeviceLike(qnb.DeviceArray):
        def numpy(self):
            return np.ones((16, 16), np.float32)

    assert TileView(DeviceLike((16, 16), np.float32)).array.sum() == 256


@pytest.mark.parametrize(
    ("value", "name"), [({"a": 1}, "dict"), (queue.Queue(), "queue.Queue"), (None, "NoneType")]
)
def test_objects_that_are_not_arrays_are_refused_without_calling_them(value, name):
    # dict.get() needs an argument and Queue.get() blocks: neither is asked for an array
    with pytest.raises(QnbTypeError, match=rf"can show an array .*, not {name}$"):
        TileView(value)


def test_an_object_with_a_numpy_method_is_not_called():
    class Tricky:
        def numpy(self):
            raise AssertionError("called")

        get = numpy

    with pytest.raises(QnbTypeError, match=r"not .*Tricky"):
        TileView(Tricky())


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


def test_a_large_array_stores_its_png_once():
    pytest.importorskip("matplotlib")
    view = TileView(np.random.default_rng(1).random((64, 64)).astype(np.float32))
    data, _ = view._repr_mimebundle_()
    # an HTML that would only repeat the image is left out: nbconvert shows the PNG
    assert data["image/png"].startswith(b"\x89PNG") and "text/html" not in data


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
    html = view._static_html(None)  # the bundle's text/html (its PNG: the tests above)
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


@pytest.mark.parametrize("shape", [(0, 4, 4), (2, 0, 4), (0, 16), (0,)])
def test_an_empty_array_renders_a_note(shape, recwarn):
    view = TileView(np.zeros(shape, np.float32))
    view.batch = 3
    assert view.batch == (1 if shape == (2, 0, 4) else 0)  # never -1, with no slabs
    data, _ = view._repr_mimebundle_()
    assert f"(empty array: shape {'×'.join(map(str, shape))}" in data["text/html"]
    assert "image/png" not in data and not recwarn.list  # nothing drawn, nothing warned


def rendered(a, **kwargs):
    """A static heatmap of ``a`` as RGB pixels, and where each cell's centre lands."""
    pytest.importorskip("matplotlib")
    from qnb.viz import static_render

    fig = static_render.new_figure(4, 4)
    ax = fig.add_subplot()
    finite = a[np.isfinite(a)]
    static_render.draw_heatmap(ax, a, float(finite.min()), float(finite.max()), **kwargs)
    fig.canvas.draw()
    pixels = np.asarray(fig.canvas.buffer_rgba())[:, :, :3]

    def at(i, j):
        x, y = ax.transData.transform((j, i))
        return pixels[pixels.shape[0] - round(y), round(x)]

    return ax, at


def test_static_png_draws_nan_and_infinities_grey_with_visible_labels():
    a = np.array([[np.nan, np.inf, -np.inf, 1.0, 2.0]], np.float32)
    ax, at = rendered(a)
    for j in range(3):  # grey, as the HTML table's rgb(128,128,128) and the live view's
        np.testing.assert_allclose(at(0.4, j + 0.4), (128, 128, 128), atol=2)  # by the label
    np.testing.assert_allclose(at(0.4, 3.4), (68, 1, 84), atol=2)  # 1.0: the lowest colour
    labels = {t.get_text(): t.get_color() for t in ax.texts}
    assert labels["nan"] == labels["inf"] == labels["-inf"] == "white"  # white on grey


@pytest.mark.parametrize("shape", [(1, 1000), (1000, 1), (1000,)])
def test_static_png_of_a_thin_array_has_cells_that_can_be_seen(shape, monkeypatch):
    pytest.importorskip("matplotlib")
    from qnb.viz import static_render

    axes = []
    draw = static_render.draw_heatmap
    monkeypatch.setattr(
        static_render, "draw_heatmap", lambda ax, *a, **k: (axes.append(ax), draw(ax, *a, **k))
    )
    TileView(np.random.default_rng(0).random(shape))._static_png()
    box = axes[0].get_window_extent()
    assert min(box.width, box.height) >= 30  # pixels, not 1


def test_all_equal_values_label_the_colour_bar_once():
    pytest.importorskip("matplotlib")
    from qnb.viz import static_render

    fig = static_render.new_figure(4, 4)
    ax = fig.add_subplot()
    static_render.draw_heatmap(ax, np.full((4, 4), 3.0), 3.0, 3.0)
    bar = fig.axes[1]
    assert [t.get_text() for t in bar.get_yticklabels()] == ["3"]


def test_static_renderings_of_a_3d_array_name_the_slab_shown():
    view = TileView(np.arange(3 * 4 * 4, dtype=np.float32).reshape(3, 4, 4))
    view.batch = 2
    data, _ = view._repr_mimebundle_()
    assert "TileView(3×4×4 float32), slab [2] of 3" in data["text/html"]
    assert ">32<" in data["text/html"] and ">31<" not in data["text/html"]  # slab 2's values


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (9999, "9999"),
        (-9999, "-9999"),
        (12345, "1.2e4"),
        (255000765, "2.6e8"),
        (-(2**31), "-2.1e9"),
        (0.001, "1e-3"),
        (9999.5, "1e4"),
        (120.4, "120"),
        (0.5, "0.5"),
        (np.nan, "nan"),
    ],
)
def test_values_are_spelled_to_fit_a_cell(value, text):
    from qnb.viz.arrays import format_value

    assert format_value(value) == text
