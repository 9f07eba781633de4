"""The widgets in a real browser: JupyterLab + Chromium (headless) driven by Playwright.

Starts JupyterLab on 127.0.0.1 (a free port, a token, ``expose_app_in_browser`` so the
test can run commands), opens a temporary copy of ``widgets.ipynb``, runs every cell and
checks that TileView, TraceView and CacheView rendered: their DOM nodes are there, no
"Loading widget" / "Error displaying widget" placeholder or error output, and their
canvases hold pixels of more than one colour, and that the index labels are there. Clicks
on TraceView's "next" button (up to the store, where an array's canvas changes) and on a
CacheView row check the round trip to the kernel. Screenshots (the page and
each widget) go to ``test-artifacts/``. Every wait is bounded; the server is stopped by its PID.

The two tests read one page: the server, Chromium and the run of every cell are the
module's (the notebook's CompareView cells come after the other widgets' and touch none of
them), so the notebook runs once, not once per test.

Needs Chromium (``/usr/bin/chromium`` or ``$QNB_CHROMIUM``) and the ``playwright``
package (no ``playwright install``: the system Chromium is used). ``make test`` installs
both; elsewhere the test is skipped with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(300)]

HERE = Path(__file__).parent
REPO = HERE.parents[1]
NOTEBOOK = HERE / "widgets.ipynb"
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--no-first-run",
    "--metrics-recording-only",
    "--mute-audio",
]
SERVER_START_S = 90
LAB_LOAD_MS = 90_000
RUN_ALL_MS = 150_000
WIDGET_MS = 60_000
# Lab settings for this server only: no news/update toast over the notebook.
USER_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


def chromium_path() -> str | None:
    candidate = os.environ.get("QNB_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    return candidate if Path(candidate).exists() else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_server(proc, url: str, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"jupyter lab exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.25)
    pytest.fail(f"jupyter lab did not answer within {SERVER_START_S} s:\n{log.read_text()[-4000:]}")


def stop(proc) -> None:
    """SIGTERM the server (it shuts its kernels down), then SIGKILL if it hangs."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser_tools():
    """(playwright.sync_api, chromium path), or skip saying what is missing."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    executable = chromium_path()
    if executable is None:
        pytest.skip(
            "Chromium not found (/usr/bin/chromium or $QNB_CHROMIUM): "
            "install it with scripts/install_system_deps.sh"
        )
    return sync_api, executable


@pytest.fixture(scope="module")
def lab_server(browser_tools):
    """(base_url, token) of a JupyterLab serving a temp copy of widgets.ipynb."""
    pytest.importorskip("jupyterlab", reason="jupyterlab is not installed")
    pytest.importorskip("anywidget", reason="anywidget is not installed")
    with tempfile.TemporaryDirectory(prefix="qnb-lab-") as tmp:
        tmp = Path(tmp)
        root = tmp / "root"
        root.mkdir()
        shutil.copy(NOTEBOOK, root / NOTEBOOK.name)
        settings = tmp / "settings"
        for name, values in USER_SETTINGS.items():
            path = settings / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        env = dict(os.environ)
        env.update(
            JUPYTERLAB_SETTINGS_DIR=str(settings),
            JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"),
            JUPYTER_CONFIG_DIR=str(tmp / "config"),
            JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
            QNB_CACHE_DIR=str(tmp / "cache"),
            PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
        )
        port, token = free_port(), "qnb-browser-test"
        command = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ip=127.0.0.1",
            f"--port={port}",
            "--ServerApp.port_retries=0",
            f"--ServerApp.root_dir={root}",
            f"--IdentityProvider.token={token}",
            "--LabApp.expose_app_in_browser=True",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.append("--allow-root")
        log = tmp / "server.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT
            )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for_server(proc, f"{base}/api/status?token={token}", log)
            yield base, token
        finally:
            stop(proc)


# JavaScript run in the page -------------------------------------------------------------

KERNEL_IDLE = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const kernel = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!kernel && kernel.status === "idle";
}"""

ALL_CELLS_RAN = """() => {
  const w = window.jupyterapp.shell.currentWidget;
  const kernel = w.sessionContext.session && w.sessionContext.session.kernel;
  if (!kernel || kernel.status !== "idle") return false;
  return w.content.widgets.every((cell) => cell.model.type !== "code" ||
    (cell.model.executionCount !== null &&
     !cell.node.querySelector(".jp-InputPrompt").textContent.includes("*")));
}"""

CANVAS_COLOURS = """(root) => {
  // distinct colours (sampled) in each canvas under root
  return [...root.querySelectorAll("canvas")].map((c) => {
    const data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    const seen = new Set();
    const step = Math.max(4, Math.floor(data.length / 4 / 4096) * 4);
    for (let i = 0; i < data.length; i += step) {
      if (data[i + 3] > 0) seen.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
    }
    return seen.size;
  });
}"""


@pytest.fixture(scope="module")
def lab_page(browser_tools, lab_server):
    """(page, console errors) of widgets.ipynb in JupyterLab after running every cell."""
    sync_api, executable = browser_tools
    base, token = lab_server
    ARTIFACTS.mkdir(exist_ok=True)
    console_errors = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            page.on("console", lambda m: m.type == "error" and console_errors.append(m.text))
            page.goto(f"{base}/lab/tree/{NOTEBOOK.name}?token={token}", timeout=LAB_LOAD_MS)
            page.wait_for_function(KERNEL_IDLE, timeout=LAB_LOAD_MS, polling=250)
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            page.wait_for_function(ALL_CELLS_RAN, timeout=RUN_ALL_MS, polling=250)
            yield page, console_errors
        finally:
            browser.close()


def assert_no_widget_errors(console_errors) -> None:
    widget_errors = [e for e in console_errors if "widget" in e.lower() or "qnb" in e.lower()]
    assert not widget_errors, widget_errors


def test_widgets_render_in_jupyterlab(lab_page):
    page, console_errors = lab_page
    try:
        check_widgets(page)
    finally:
        save_screenshots(page)
    assert_no_widget_errors(console_errors)


def save_screenshots(page) -> None:
    """The whole page, and each widget on its own (the notebook scrolls inside Lab)."""
    page.screenshot(path=str(ARTIFACTS / "lab-widgets.png"), full_page=True)
    for name in ("tileview", "traceview", "cacheview"):
        views = page.locator(f".qnb-{name}")
        if views.count():
            views.first.screenshot(path=str(ARTIFACTS / f"lab-{name}.png"), timeout=10_000)
    large = {"tileview": 2, "traceview": 1}  # the 128x64 array; the Tile[64, 32] trace
    for name, index in large.items():
        views = page.locator(f".qnb-{name}")
        if views.count() > index:
            path = ARTIFACTS / f"lab-{name}-large.png"
            views.nth(index).screenshot(path=str(path), timeout=10_000)


def check_widgets(page) -> None:
    for name in ("qnb-tileview", "qnb-traceview", "qnb-cacheview"):
        page.wait_for_selector(f".{name}", state="attached", timeout=WIDGET_MS)
    # placeholders go away once every view has rendered
    page.wait_for_function(
        """() => !document.body.innerText.includes("Loading widget")""",
        timeout=WIDGET_MS,
        polling=250,
    )
    text = page.inner_text("body")
    assert "Error displaying widget" not in text
    assert "Traceback" not in text
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    assert errors.count() == 0, errors.all_inner_texts()

    tile = page.locator(".qnb-tileview").first
    assert tile.locator("canvas.qnb-heatmap").count() == 1
    colours = tile.evaluate(CANVAS_COLOURS)
    assert colours and min(colours) > 1, f"TileView canvases look blank: {colours}"
    tile.locator("canvas.qnb-heatmap").hover(position={"x": 3, "y": 3})
    assert tile.locator(".qnb-readout").inner_text().endswith("[0, 0] = 0")
    # index labels: every 4 on a 16x16 tile, every 16 (the tile grid) on the 64x64 array
    assert tile.locator(".qnb-ticks-top .qnb-tick").all_inner_texts() == ["0", "4", "8", "12"]
    big = page.locator(".qnb-tileview").nth(1)
    assert big.locator(".qnb-ticks-left .qnb-tick").all_inner_texts() == ["0", "16", "32", "48"]

    trace = page.locator(".qnb-traceview").first
    assert trace.locator(".qnb-source-line.qnb-current").count() == 1
    assert trace.locator(".qnb-arrays canvas").count() >= 1
    colours = trace.evaluate(CANVAS_COLOURS)
    assert colours and min(colours) > 1, f"TraceView canvases look blank: {colours}"
    label = trace.locator(".qnb-step-label")
    assert label.inner_text().startswith("step 0 (0\u2013")  # numbered as view.step is
    current = trace.locator(".qnb-source-line.qnb-current").inner_text()
    trace.locator("button.qnb-next").click()  # kernel round trip: Python recomputes the step
    page.wait_for_function(
        """(el) => el.textContent.startsWith("step 1 (")""",
        arg=label.element_handle(),
        timeout=WIDGET_MS,
    )
    assert trace.locator(".qnb-source-line.qnb-current").count() == 1
    assert trace.locator(".qnb-source-line.qnb-current").inner_text() != "" and current != ""
    # the arrays show as they were at the step: out (zeros at launch) changes at the store
    out_canvas = trace.locator(".qnb-arrays canvas").nth(1)
    before = out_canvas.evaluate("(c) => c.toDataURL()")
    for shown in ("step 2 (", "step 3 ("):
        trace.locator("button.qnb-next").click()
        page.wait_for_function(
            "([el, text]) => el.textContent.startsWith(text)",
            arg=[label.element_handle(), shown],
            timeout=WIDGET_MS,
        )
        if shown == "step 2 (":
            check_trace_tiles(page, trace)
    # The step label and the op line are redrawn from separate trait changes: wait for
    # the op line (and the out canvas) to catch up rather than read them at once.
    page.wait_for_function(
        """(el) => el.querySelector(".qnb-op") &&
                   el.querySelector(".qnb-op").textContent.includes("store")""",
        arg=trace.element_handle(),
        timeout=WIDGET_MS,
    )
    deadline = time.monotonic() + WIDGET_MS / 1000
    while out_canvas.evaluate("(c) => c.toDataURL()") == before:
        assert time.monotonic() < deadline, "the out array did not change at its store"
        page.wait_for_timeout(100)

    check_cache_view(page)
    check_large_tile(page)
    check_large_trace(page)


def check_large_tile(page) -> None:
    """A 128x64 array in Tile[64, 32] blocks: 4px cells (the least one can point at),
    every value read on hover, the grid after row 64 and columns 32 and 64."""
    view = page.locator(".qnb-tileview").nth(2)
    canvas = view.locator("canvas.qnb-heatmap")
    size = canvas.evaluate("(c) => [c.style.width, c.style.height]")
    assert size == ["256px", "512px"], size
    canvas.hover(position={"x": 63 * 4 + 2, "y": 127 * 4 + 2})
    assert view.locator(".qnb-readout").inner_text().endswith("[127, 63] = 8191")
    grid = canvas.evaluate(
        """(c) => {
          const ctx = c.getContext("2d"), k = c.width / 256;  // device pixels per css px
          const at = (x, y) => [...ctx.getImageData(Math.floor(x * k), Math.floor(y * k), 1, 1).data];
          return [at(10, 256.5), at(10, 250), at(128.5, 10), at(100, 10)];
        }"""
    )
    line, cell, column, inside = grid
    assert min(line[:3]) > 200 and min(column[:3]) > 200, grid  # white lines
    assert min(cell[:3]) < 200 and min(inside[:3]) < 200, grid  # viridis cells


def check_large_trace(page) -> None:
    """A real Tile[64, 32] kernel over a 100x72 array: the step's tile labelled with its
    type, in 4px cells, every value read on hover; the array in a panel that scrolls, with
    the kernel's 64x32 tile grid drawn over it."""
    view = page.locator(".qnb-traceview").nth(1)
    view.locator(".qnb-tiles .qnb-block").first.wait_for(state="attached", timeout=WIDGET_MS)
    block = view.locator(".qnb-tiles .qnb-block").first
    assert block.locator(".qnb-block-info").inner_text() == "Tile[64, 32] float32"
    canvas = block.locator("canvas.qnb-heatmap")
    assert canvas.evaluate("(c) => [c.style.width, c.style.height]") == ["128px", "256px"]
    canvas.hover(position={"x": 31 * 4 + 2, "y": 63 * 4 + 2})
    assert block.locator(".qnb-readout").inner_text() == "t[63, 31] = 4567"  # x[63, 31]
    x_block = view.locator(".qnb-arrays .qnb-block").first
    scroll = x_block.locator(".qnb-scroll")
    sizes = scroll.evaluate("(s) => [s.clientHeight, s.scrollHeight]")
    assert sizes[0] < sizes[1], f"the 100x72 array's panel does not scroll: {sizes}"
    grid = x_block.locator("canvas.qnb-heatmap").evaluate(
        """(c) => {
          const ctx = c.getContext("2d"), k = c.width / 288;  // 72 columns of 4px
          const at = (x, y) => [...ctx.getImageData(Math.floor(x * k), Math.floor(y * k), 1, 1).data];
          return [at(200, 256.5), at(200, 250), at(128.5, 300), at(140, 300)];
        }"""
    )
    row_line, cell, column_line, inside = grid
    assert min(row_line[:3]) > 200 and min(column_line[:3]) > 200, grid  # after row 64, col 32
    assert min(cell[:3]) < 200 and min(inside[:3]) < 200, grid


def check_trace_tiles(page, trace) -> None:
    """At ``t = t * s``: in t and out t with their values on one colour scale (one colour
    bar), and "changed t" (out - in) with its own; hovering a cell reads its value."""
    page.wait_for_function(
        """(el) => el.querySelectorAll(".qnb-tiles .qnb-block").length === 3""",
        arg=trace.element_handle(),
        timeout=WIDGET_MS,
    )
    titles = trace.locator(".qnb-tiles .qnb-block-title").all_inner_texts()
    assert titles == ["in t", "out t", "changed t (out \u2212 in)"], titles
    assert trace.locator(".qnb-tiles .qnb-tile-range").count() == 1
    assert trace.locator(".qnb-tiles .qnb-colourbar").count() == 2  # and the changed one's
    # program 0: in t = x[:16] (0 to 255/16), out t = 2 * in: one scale from 0 to 31.9
    assert trace.locator(".qnb-tile-range .qnb-colourbar-labels").inner_text().split() == [
        "31.9",
        "0",
    ]
    cell = 18  # px: a 16x16 tile's cells hold their values
    for k, want in enumerate(["t[0, 1] = 0.0625", "t[0, 1] = 0.125", "t[0, 1] = 0.0625"]):
        block = trace.locator(".qnb-tiles .qnb-block").nth(k)
        block.locator("canvas").hover(position={"x": cell + 3, "y": 3})
        assert block.locator(".qnb-readout").inner_text() == want


def check_cache_view(page) -> None:
    cache = page.locator(".qnb-cacheview").first
    rows = cache.locator("tbody tr")
    assert rows.count() >= 1, "CacheView shows no events"
    assert cache.locator("td.qnb-outcome-miss").count() >= 1, "the compile's miss is not listed"
    # a configuration object's field changed: the reason names that leaf, as Python writes it
    reasons = cache.locator("tbody tr td:last-child").all_inner_texts()
    assert any("captured.cfg.scale: 2.0 → 3.0" in r for r in reasons), reasons
    # beside that long reason, the outcome keeps to one line ("memory-hit ×2", never wrapped)
    hits = cache.locator("td.qnb-outcome-memory-hit")
    assert hits.count() >= 1, "no memory hit is listed"
    for k in range(hits.count()):
        lines = hits.nth(k).evaluate(TEXT_LINES)
        assert lines == 1, f"{hits.nth(k).inner_text()!r} wraps onto {lines} lines"
    rows.first.click()  # the detail text is computed in Python
    cache.locator(".qnb-detail").wait_for(state="visible", timeout=WIDGET_MS)
    assert "key" in cache.locator(".qnb-detail").inner_text()


# How many lines an element's text is laid out on (the distinct tops of its line boxes).
TEXT_LINES = """(el) => {
  const range = document.createRange();
  range.selectNodeContents(el);
  return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
}"""


# CompareView (its own test: the same page, the notebook's own cells at the end) ----------


def test_compare_view_renders_in_jupyterlab(lab_page):
    """The notebook's ``CompareView`` of a real divergence on lavapipe: the diverging line
    highlighted, the step's value on cpu and wgpu and their difference drawn, differing
    elements outlined, and the mismatch map of ``out``."""
    page, console_errors = lab_page
    view = page.locator(".qnb-compareview").first
    try:
        view.wait_for(state="attached", timeout=WIDGET_MS)
        check_compare_view(page, view)
    finally:
        if view.count():
            view.screenshot(path=str(ARTIFACTS / "lab-compareview.png"), timeout=10_000)
    assert_no_widget_errors(console_errors)


# (every pixel: CANVAS_COLOURS samples every 16th, which on these 16-pixel cells is always
# a cell's red outline)
EVERY_PIXEL_COLOURS = """(root) => [...root.querySelectorAll("canvas")].map((c) => {
  const data = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
  const seen = new Set();
  for (let i = 0; i < data.length; i += 4) {
    if (data[i + 3] > 0) seen.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
  }
  return seen.size;
})"""


def check_compare_view(page, view) -> None:
    page.wait_for_function(
        """() => !document.body.innerText.includes("Loading widget")""",
        timeout=WIDGET_MS,
        polling=250,
    )
    text = page.inner_text("body")
    assert "Error displaying widget" not in text and "Traceback" not in text
    assert view.locator(".qnb-title").first.inner_text() == (
        "compare cancel on cpu, wgpu: rounding (wgpu is closer to exact than cpu)"
    )
    assert "wgpu: rounding, closer to exact than cpu" in view.inner_text()
    current = view.locator(".qnb-source-line.qnb-current")
    assert current.count() == 1 and "v = (t + 1e8) - 1e8" in current.inner_text()
    step = view.locator(".qnb-step-text").inner_text()
    assert step.startswith("first divergence on wgpu: program (0, 0, 0)"), step
    titles = view.locator(".qnb-values .qnb-block-title").all_inner_texts()
    assert titles == ["cpu", "wgpu", "wgpu \u2212 cpu"], titles
    colours = view.locator(".qnb-values").evaluate(EVERY_PIXEL_COLOURS)
    # cpu's value is all zeros (one colour); wgpu's and the difference vary, outlined in red
    # (cpu, wgpu, their colour bar, the difference, its colour bar)
    assert len(colours) == 5 and colours[0] == 1 and min(colours[1], colours[3]) > 2, colours
    assert view.locator(".qnb-maps .qnb-block-title").all_inner_texts() == [
        "out on wgpu (32\u00d716): 512 of 512 differ (512 closer to exact than cpu, 0 farther)"
    ]
    # the step's values share one colour bar; the difference has its own
    assert view.locator(".qnb-values .qnb-value-range").count() == 1
    assert view.locator(".qnb-values .qnb-difference-range").count() == 1


# CompareView's map of a 512x256 array, TraceView's scale after exp ------------------------------

MAP_RINGS = """(canvas, places) => {
  // around each place: the pixels of its ring (orange: at least as close to exact)
  const ctx = canvas.getContext("2d"), k = canvas.width / parseFloat(canvas.style.width);
  const pad = 6, orange = (p) => p[0] > 200 && p[1] > 90 && p[1] < 190 && p[2] < 80;
  const ringed = places.map(([i, j]) => {
    const x = Math.round((pad + j + 0.5 - 8) * k), y = Math.round((pad + i + 0.5 - 8) * k);
    const box = ctx.getImageData(x, y, Math.round(16 * k), Math.round(16 * k)).data;
    let count = 0;
    for (let n = 0; n < box.length; n += 4) if (orange(box.slice(n, n + 3))) count++;
    return count;
  });
  const far = [...ctx.getImageData(Math.round((pad + 250) * k), Math.round((pad + 2) * k), 1, 1).data];
  return [ringed, far];
}"""


def sparse_places() -> list[tuple[int, int]]:
    """Where the notebook's 512x256 ``sparse`` array is not zero (its own recipe)."""
    import numpy as np

    places = np.random.default_rng(0).choice(512 * 256, 35, replace=False)
    return sorted((int(p) // 256, int(p) % 256) for p in places)


def test_compare_view_marks_every_mismatch(lab_page):
    """35 differing elements of a 512x256 array: the map is drawn whole (1 px an element)
    and each is ringed; the legend says what the colours mean; hovering a ring reads the
    element's values and the exact one."""
    page, console_errors = lab_page
    view = page.locator(".qnb-compareview").nth(1)
    try:
        view.wait_for(state="attached", timeout=WIDGET_MS)
        block = view.locator(".qnb-mismatch-map")
        assert "35 of 131,072 differ" in block.locator(".qnb-block-title").inner_text()
        canvas = block.locator("canvas.qnb-map")
        assert canvas.evaluate("(c) => [c.style.width, c.style.height]") == ["268px", "524px"]
        places = sparse_places()
        ringed, far = canvas.evaluate(MAP_RINGS, places)
        assert min(ringed) >= 12, list(zip(places, ringed))  # every one ringed
        assert far[:3] == [228, 228, 228], far  # an agreeing element: grey
        legend = block.locator(".qnb-map-legend").inner_text()
        assert "at least as close to exact as cpu" in legend and "farther" in legend
        i, j = places[0]
        canvas.hover(position={"x": 6 + j + 0.5, "y": 6 + i + 0.5})
        readout = block.locator(".qnb-readout").inner_text()
        assert readout.startswith(f"out[{i}, {j}]: cpu 0, wgpu ") and "exact" in readout
        ticks = block.locator(".qnb-ticks-top .qnb-tick").all_inner_texts()
        assert ticks == ["0", "64", "128", "192"]
    finally:
        if view.count():
            view.screenshot(path=str(ARTIFACTS / "lab-compareview-map.png"), timeout=10_000)
    assert_no_widget_errors(console_errors)


def test_trace_view_scales_each_tile_after_exp(lab_page):
    """At ``p = qnb.exp(s - m)``: each tile on its own colour scale, with its own bar; p's
    runs up to 1 and its canvas is not one flat colour."""
    page, console_errors = lab_page
    view = page.locator(".qnb-traceview").nth(2)
    view.wait_for(state="attached", timeout=WIDGET_MS)
    page.wait_for_function(
        """(el) => el.querySelectorAll(".qnb-tiles .qnb-block").length === 3""",
        arg=view.element_handle(),
        timeout=WIDGET_MS,
    )
    titles = view.locator(".qnb-tiles .qnb-block-title").all_inner_texts()
    assert titles == ["in s", "in m", "out p"], titles
    assert view.locator(".qnb-tiles .qnb-tile-range").count() == 0  # no shared bar
    bars = view.locator(".qnb-tiles .qnb-tile-own-range .qnb-colourbar-labels")
    assert bars.count() == 3
    assert bars.nth(2).inner_text().split()[0] == "1"  # p: exp(0) at each row's max
    assert float(bars.nth(0).inner_text().split()[1]) < -3  # s: down to -4
    out = view.locator(".qnb-tiles .qnb-block").nth(2)
    colours = out.evaluate(EVERY_PIXEL_COLOURS)
    assert colours and colours[0] > 20, colours
    assert view.locator(".qnb-step-label").inner_text() == "step 3 (0\u20134)"
    assert_no_widget_errors(console_errors)


# HazardView (its own test: the same page, the notebook's last cells) ---------------------

# the stroke colours of HazardView's two programs' windows and of the conflicting elements
HAZARD_STROKES = """(canvas) => {
  const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  const want = {first: [0, 170, 255], second: [255, 0, 200], conflict: [255, 40, 40]};
  const found = {};
  for (const [name, [r, g, b]] of Object.entries(want)) {
    found[name] = false;
    for (let i = 0; i < data.length; i += 4) {
      if (data[i] === r && data[i + 1] === g && data[i + 2] === b) { found[name] = true; break; }
    }
  }
  return found;
}"""


def test_hazard_view_renders_in_jupyterlab(lab_page):
    """The notebook's ``HazardView`` of a real ``qnb.check``: the records table, the two
    programs' lines highlighted, the array drawn with both programs' windows and the
    conflicting rows outlined; selecting another record is a round trip to the kernel."""
    page, console_errors = lab_page
    view = page.locator(".qnb-hazardview").first
    try:
        view.wait_for(state="attached", timeout=WIDGET_MS)
        check_hazard_view(page, view)
    finally:
        if view.count():
            view.screenshot(path=str(ARTIFACTS / "lab-hazardview.png"), timeout=10_000)
    assert_no_widget_errors(console_errors)


def check_hazard_view(page, view) -> None:
    page.wait_for_function(
        """() => !document.body.innerText.includes("Loading widget")""",
        timeout=WIDGET_MS,
        polling=250,
    )
    assert view.locator(".qnb-title").first.inner_text() == "check blur_rows_in_place"
    assert "read-write hazards between programs" in view.locator(".qnb-summary").inner_text()
    rows = view.locator("table.qnb-hazards tbody tr")
    assert rows.count() == 6, rows.all_inner_texts()  # rows 15|16, 31|32, 47|48, both ways
    first = view.locator(".qnb-step-text").inner_text()
    assert first.startswith("program (1, 0, 0) reads x[15, 0]"), first
    # the reader's line (its "up" load) and the writer's (the store), one colour each
    assert "up = qnb.Tile16.load(x, i - 1, 0)" in view.locator(".qnb-hazard-line-0").inner_text()
    assert ".store(x, i, 0)" in view.locator(".qnb-hazard-line-1").inner_text()
    canvas = view.locator(".qnb-arrays canvas.qnb-heatmap")
    assert canvas.count() == 1
    strokes = canvas.evaluate(HAZARD_STROKES)
    assert strokes == {"first": True, "second": True, "conflict": True}, strokes
    rows.nth(1).click()  # kernel round trip: Python picks the record's windows and lines
    page.wait_for_function(
        "([el, before]) => el.textContent !== before",
        arg=[view.locator(".qnb-step-text").element_handle(), first],
        timeout=WIDGET_MS,
    )
    second = view.locator(".qnb-step-text").inner_text()
    assert second.startswith("program (0, 0, 0) reads x[16, 0]"), second
    # the step text and the line highlights are separate updates of one round trip: wait
    # for the highlight to move to the reader's new line before reading it
    page.wait_for_function(
        """(el) => (el.querySelector(".qnb-hazard-line-0") || {textContent: ""})
                   .textContent.includes("down = qnb.Tile16.load(x, i + 1, 0)")""",
        arg=view.element_handle(),
        timeout=WIDGET_MS,
    )
    assert view.locator("table.qnb-hazards tbody tr.qnb-selected").count() == 1
