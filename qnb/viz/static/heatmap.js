// Shared drawing code for qnb's widgets: decoding arrays sent as bytes, the colour map,
// the heatmap canvas with values, grid and regions, the colour bar and the hover readout.
// qnb/viz/assets.py prepends this file to each widget's module, so the functions below
// are plain declarations (no imports, no CDN).

// viridis, 9 stops; qnb/viz/colours.py holds the same table for the static fallback.
const QNB_VIRIDIS = [
  [68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
  [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37],
];

function qnbColour(t) {
  if (!Number.isFinite(t)) return [128, 128, 128];
  t = Math.min(1, Math.max(0, t)) * (QNB_VIRIDIS.length - 1);
  const i = Math.min(Math.floor(t), QNB_VIRIDIS.length - 2);
  const f = t - i, a = QNB_VIRIDIS[i], b = QNB_VIRIDIS[i + 1];
  return [0, 1, 2].map((k) => Math.round(a[k] + (b[k] - a[k]) * f));
}

function qnbHalfToFloat(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

// Turn the bytes of an array (a DataView, as ipywidgets delivers a traitlets.Bytes) into
// a Float64Array. dtype is one of float16/float32/float64/int32/bool (little-endian).
function qnbDecode(view, dtype) {
  if (!view) return new Float64Array(0);
  if (!(view instanceof DataView)) {
    view = ArrayBuffer.isView(view)
      ? new DataView(view.buffer, view.byteOffset, view.byteLength)
      : new DataView(view);
  }
  const size = { float16: 2, float32: 4, float64: 8, int32: 4, bool: 1 }[dtype] || 8;
  const n = Math.floor(view.byteLength / size), out = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const at = i * size;
    if (dtype === "float16") out[i] = qnbHalfToFloat(view.getUint16(at, true));
    else if (dtype === "float32") out[i] = view.getFloat32(at, true);
    else if (dtype === "int32") out[i] = view.getInt32(at, true);
    else if (dtype === "bool") out[i] = view.getUint8(at);
    else out[i] = view.getFloat64(at, true);
  }
  return out;
}

function qnbFormat(v) {
  if (Number.isNaN(v)) return "nan";
  if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
  if (Number.isInteger(v) && Math.abs(v) < 1e5) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-2 || a >= 1e4)) return v.toExponential(1);
  return v.toPrecision(3).replace(/\.?0+$/, "");
}

function qnbRange(values, vmin, vmax) {
  if (vmin === null || vmin === undefined || vmax === null || vmax === undefined) {
    vmin = Infinity; vmax = -Infinity;
    for (const v of values) if (Number.isFinite(v)) { vmin = Math.min(vmin, v); vmax = Math.max(vmax, v); }
    if (vmin === Infinity) { vmin = 0; vmax = 1; }
  }
  return [vmin, vmax];
}

function qnbElement(tag, className, text) {
  const el = document.createElement(tag);
  if (className) el.className = className;
  if (text !== undefined) el.textContent = text;
  return el;
}

// Draw rows x cols values as coloured cells. opts: cell (px), vmin, vmax, showValues,
// regions [{r0, r1, c0, c1, kind: "read"|"write"}]. Returns the canvas.
function qnbDrawHeatmap(canvas, values, rows, cols, opts) {
  const cell = opts.cell, dpr = window.devicePixelRatio || 1;
  const [vmin, vmax] = qnbRange(values, opts.vmin, opts.vmax);
  const span = vmax - vmin || 1;
  canvas.width = Math.max(1, Math.round(cols * cell * dpr));
  canvas.height = Math.max(1, Math.round(rows * cell * dpr));
  canvas.style.width = `${cols * cell}px`;
  canvas.style.height = `${rows * cell}px`;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      const [r, g, b] = qnbColour((values[i * cols + j] - vmin) / span);
      ctx.fillStyle = `rgb(${r},${g},${b})`;
      ctx.fillRect(j * cell, i * cell, cell, cell);
    }
  }
  if (opts.showValues && cell >= 18) {
    ctx.font = `${Math.min(11, Math.floor(cell / 2.5))}px monospace`;
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < cols; j++) {
        const v = values[i * cols + j];
        const t = (v - vmin) / span;
        ctx.fillStyle = Number.isFinite(t) && t > 0.6 ? "#000" : "#fff";
        ctx.fillText(qnbFormat(v), j * cell + cell / 2, i * cell + cell / 2, cell - 2);
      }
    }
  }
  if (rows > 16 || cols > 16) {
    // the 16x16 tile grid
    ctx.strokeStyle = "rgba(255,255,255,0.85)";
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let i = 16; i < rows; i += 16) { ctx.moveTo(0, i * cell + 0.5); ctx.lineTo(cols * cell, i * cell + 0.5); }
    for (let j = 16; j < cols; j += 16) { ctx.moveTo(j * cell + 0.5, 0); ctx.lineTo(j * cell + 0.5, rows * cell); }
    ctx.stroke();
  }
  for (const reg of opts.regions || []) {
    const colour = reg.kind === "write" ? "255,64,64" : "0,200,255";
    const x = reg.c0 * cell, y = reg.r0 * cell;
    const w = (reg.c1 - reg.c0) * cell, h = (reg.r1 - reg.r0) * cell;
    ctx.fillStyle = `rgba(${colour},0.25)`;
    ctx.fillRect(x, y, w, h);
    ctx.strokeStyle = `rgb(${colour})`;
    ctx.lineWidth = 2;
    ctx.strokeRect(x + 1, y + 1, Math.max(0, w - 2), Math.max(0, h - 2));
  }
  return canvas;
}

function qnbColourBar(vmin, vmax, height) {
  const box = qnbElement("div", "qnb-colourbar");
  const bar = document.createElement("canvas");
  bar.width = 12; bar.height = Math.max(16, Math.round(height));
  bar.style.height = `${bar.height}px`;
  const ctx = bar.getContext("2d");
  for (let y = 0; y < bar.height; y++) {
    const [r, g, b] = qnbColour(1 - y / (bar.height - 1));
    ctx.fillStyle = `rgb(${r},${g},${b})`;
    ctx.fillRect(0, y, 12, 1);
  }
  const labels = qnbElement("div", "qnb-colourbar-labels");
  labels.style.height = `${bar.height}px`;
  labels.append(qnbElement("span", "", qnbFormat(vmax)), qnbElement("span", "", qnbFormat(vmin)));
  box.append(bar, labels);
  return box;
}

// Show "name[i, j] = value" in readout while the pointer is over a cell.
// indexOf(i, j) spells the index, e.g. "3, 4" (2-D), "4" (1-D), "0, 3, 4" (3-D slab 0).
function qnbHover(canvas, readout, rows, cols, cell, values, label, indexOf) {
  canvas.addEventListener("mousemove", (ev) => {
    const rect = canvas.getBoundingClientRect();
    const j = Math.floor((ev.clientX - rect.left) / cell), i = Math.floor((ev.clientY - rect.top) / cell);
    if (i < 0 || j < 0 || i >= rows || j >= cols) return;
    readout.textContent = `${label}[${indexOf(i, j)}] = ${qnbFormat(values[i * cols + j])}`;
  });
  canvas.addEventListener("mouseleave", () => { readout.textContent = "\u00a0"; });
}

function qnbIndexSpeller(ndim, slab) {
  if (ndim === 1) return (i, j) => `${j}`;
  if (ndim === 3) return (i, j) => `${slab}, ${i}, ${j}`;
  return (i, j) => `${i}, ${j}`;
}

// Rows/columns between two tick labels: every 4 on arrays up to 32x32, else every 16
// (a tile's edge), spread further where cells are too small for the labels to fit.
function qnbTickStep(rows, cols, cell) {
  let step = Math.max(rows, cols) <= 32 ? 4 : 16;
  while (step * cell < 26) step *= 2;
  return step;
}

// The canvas of a rows x cols heatmap with its indices: column numbers above, row
// numbers on the left (none for a 1-D array, shown as one row). Labels are text, not
// drawn, so the canvas and its hover coordinates stay as they are.
function qnbWithTicks(canvas, rows, cols, cell, ndim) {
  const step = qnbTickStep(rows, cols, cell);
  const box = qnbElement("div", "qnb-axes");
  const top = qnbElement("div", "qnb-ticks-top");
  top.style.width = `${cols * cell}px`;
  for (let j = 0; j < cols; j += step) {
    const label = qnbElement("span", "qnb-tick", String(j));
    label.style.left = `${j * cell + cell / 2}px`;
    top.append(label);
  }
  const left = qnbElement("div", "qnb-ticks-left");
  left.style.height = `${rows * cell}px`;
  left.style.width = ndim === 1 ? "0px" : `${String(rows - 1).length * 0.65 + 0.2}em`;
  if (ndim !== 1) {
    for (let i = 0; i < rows; i += step) {
      const label = qnbElement("span", "qnb-tick", String(i));
      label.style.top = `${i * cell + cell / 2}px`;
      left.append(label);
    }
  }
  box.append(qnbElement("div", ""), top, left, canvas);
  return box;
}

// Cell size that keeps the canvas within maxPx on its longer side.
function qnbCellSize(rows, cols, maxPx, largest) {
  return Math.max(1, Math.min(largest, Math.floor(maxPx / Math.max(rows, cols))));
}

// A small self-contained heatmap (used for tiles and arrays in TraceView).
// spec: {name, shape, dtype, data}; opts: title, maxPx, largest, showValues, regions,
// batch, ticks (index labels). Returns an element.
function qnbHeatmapBlock(spec, opts) {
  const values = qnbDecode(spec.data, spec.dtype);
  const shape = spec.shape.length === 1 ? [1, spec.shape[0]] : spec.shape;
  const [rows, cols] = [shape[shape.length - 2], shape[shape.length - 1]];
  const slab = opts.batch || 0;
  const slice = values.subarray(slab * rows * cols, (slab + 1) * rows * cols);
  const cell = qnbCellSize(rows, cols, opts.maxPx, opts.largest || 32);
  const box = qnbElement("div", "qnb-block");
  box.append(qnbElement("div", "qnb-block-title", opts.title || spec.name));
  const canvas = document.createElement("canvas");
  canvas.className = "qnb-heatmap";
  qnbDrawHeatmap(canvas, slice, rows, cols, {
    cell, showValues: opts.showValues, regions: opts.regions, vmin: spec.vmin, vmax: spec.vmax,
  });
  const readout = qnbElement("div", "qnb-readout", "\u00a0");
  qnbHover(canvas, readout, rows, cols, cell, slice, spec.name, qnbIndexSpeller(spec.shape.length, slab));
  box.append(opts.ticks ? qnbWithTicks(canvas, rows, cols, cell, spec.shape.length) : canvas, readout);
  return box;
}

// Draw now, then redraw once per batch of changes to the named traits (several change
// together on each update). Returns the cleanup function render() hands back.
function qnbDrawOnChanges(model, names, draw) {
  let pending = false;
  function schedule() {
    if (pending) return;
    pending = true;
    queueMicrotask(() => { pending = false; draw(); });
  }
  draw();
  for (const name of names) model.on(`change:${name}`, schedule);
  return () => { for (const name of names) model.off(`change:${name}`, schedule); };
}
