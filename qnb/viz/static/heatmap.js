// Shared drawing code for qnb's widgets: decoding arrays sent as bytes, the colour map,
// the heatmap canvas with values, grid and regions, the colour bar and the hover readout.
// qnb/viz/assets.py prepends this file to each widget's module, so the functions below
// are plain declarations (no imports, no CDN).

// viridis, 9 stops; qnb/viz/static_render.py holds the same table for the static fallback.
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

// A short spelling of a value for a cell, as format_value in qnb/viz/arrays.py: integers
// up to 4 digits as they are, others in 3 significant digits, very small or large ones as
// 1.2e5 (no "+", no trailing zeros).
function qnbFormat(v) {
  if (Number.isNaN(v)) return "nan";
  if (!Number.isFinite(v)) return v > 0 ? "inf" : "-inf";
  if (Number.isInteger(v) && Math.abs(v) < 1e4) return String(v);
  const a = Math.abs(v);
  return qnbCompact(a !== 0 && (a < 1e-2 || a >= 1e4) ? v.toExponential(1) : v.toPrecision(3));
}

// The value in full (the hover readout): integers exactly, others in 7 digits.
function qnbFormatFull(v) {
  if (Number.isInteger(v)) return qnbCompact(String(v));
  if (!Number.isFinite(v)) return qnbFormat(v);
  return qnbCompact(v.toPrecision(7));
}

// "1.50e+5" -> "1.5e5", "0.500" -> "0.5", "120" stays (zeros go only after a point).
function qnbCompact(text) {
  let [mantissa, exponent] = text.split("e");
  if (mantissa.includes(".")) mantissa = mantissa.replace(/0+$/, "").replace(/\.$/, "");
  return exponent === undefined ? mantissa : `${mantissa}e${Number(exponent)}`;
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

// A kernel's source lines numbered from `first`, the line `current` highlighted, under
// `title` when there is one (the unit a step is in: the kernel, or a @qnb.func).
function qnbSourceListing(lines, first, current, title) {
  const box = qnbElement("div", "qnb-source");
  if (title) box.append(qnbElement("div", "qnb-source-title", title));
  lines.forEach((text, k) => {
    const line = qnbElement("div", "qnb-source-line" + (first + k === current ? " qnb-current" : ""));
    line.append(qnbElement("span", "qnb-lineno", String(first + k)), document.createTextNode(text));
    box.append(line);
  });
  return box;
}

// Draw rows x cols values as coloured cells. opts: cell (px), vmin, vmax, showValues,
// regions [{r0, r1, c0, c1, kind: "read"|"write", rgb?: [r, g, b] (its own colour)}],
// steps [row step, column step] when
// the values are every k-th row/column of a larger array (regions are in its indices),
// tile [M, N]: the tile grid drawn over an array larger than one tile (16x16 by default).
// Returns the canvas.
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
  const [rowStep, colStep] = opts.steps || [1, 1];
  const [tileM, tileN] = opts.tile || [16, 16];  // the kernel's tile shape (16x16 by default)
  const tileRows = tileM / rowStep, tileCols = tileN / colStep;  // a tile, in cells
  const tileSeen = Math.min(tileRows, tileCols) * cell >= 6;  // finer would hide the cells
  if ((rows * rowStep > tileM || cols * colStep > tileN) && Number.isInteger(tileRows) && Number.isInteger(tileCols) && tileSeen) {
    // the tile grid
    ctx.strokeStyle = "rgba(255,255,255,0.85)";
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let i = tileRows; i < rows; i += tileRows) { ctx.moveTo(0, i * cell + 0.5); ctx.lineTo(cols * cell, i * cell + 0.5); }
    for (let j = tileCols; j < cols; j += tileCols) { ctx.moveTo(j * cell + 0.5, 0); ctx.lineTo(j * cell + 0.5, rows * cell); }
    ctx.stroke();
  }
  for (const reg of opts.regions || []) {
    const colour = reg.rgb ? reg.rgb.join(",") : reg.kind === "write" ? "255,64,64" : "0,200,255";
    const r0 = Math.floor(reg.r0 / rowStep), r1 = Math.ceil(reg.r1 / rowStep);
    const c0 = Math.floor(reg.c0 / colStep), c1 = Math.ceil(reg.c1 / colStep);
    const x = c0 * cell, y = r0 * cell;
    const w = (c1 - c0) * cell, h = (r1 - r0) * cell;
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
    readout.textContent = `${label}[${indexOf(i, j)}] = ${qnbFormatFull(values[i * cols + j])}`;
  });
  canvas.addEventListener("mouseleave", () => { readout.textContent = "\u00a0"; });
}

// steps: [row step, column step] of a view that holds every k-th row/column.
function qnbIndexSpeller(ndim, slab, steps) {
  const [rs, cs] = steps || [1, 1];
  if (ndim === 1) return (i, j) => `${j * cs}`;
  if (ndim === 3) return (i, j) => `${slab}, ${i * rs}, ${j * cs}`;
  return (i, j) => `${i * rs}, ${j * cs}`;
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
// drawn, so the canvas and its hover coordinates stay as they are. steps: [row step,
// column step] of a view holding every k-th row/column (labels are the array's indices).
function qnbWithTicks(canvas, rows, cols, cell, ndim, steps) {
  const [rs, cs] = steps || [1, 1];
  const step = qnbTickStep(rows, cols, cell);
  const box = qnbElement("div", "qnb-axes");
  const top = qnbElement("div", "qnb-ticks-top");
  top.style.width = `${cols * cell}px`;
  for (let j = 0; j < cols; j += step) {
    const label = qnbElement("span", "qnb-tick", String(j * cs));
    label.style.left = `${j * cell + cell / 2}px`;
    top.append(label);
  }
  const left = qnbElement("div", "qnb-ticks-left");
  left.style.height = `${rows * cell}px`;
  left.style.width = ndim === 1 ? "0px" : `${String((rows - 1) * rs).length * 0.65 + 0.2}em`;
  if (ndim !== 1) {
    for (let i = 0; i < rows; i += step) {
      const label = qnbElement("span", "qnb-tick", String(i * rs));
      label.style.top = `${i * cell + cell / 2}px`;
      left.append(label);
    }
  }
  box.append(qnbElement("div", ""), top, left, canvas);
  return box;
}

// The least cell a pointer can rest on (a thin array, 1xN or Nx1, gets a larger one), and
// the longest canvas side and largest canvas drawn (a larger array gets smaller cells,
// down to 1px: a 2048x2048 array is not drawn 8192px wide).
const QNB_MIN_CELL = 4, QNB_MIN_THIN_CELL = 10;
const QNB_MAX_CANVAS_PX = 16384, QNB_MAX_CANVAS_AREA = 2048 * 2048;

// Cell size that keeps the canvas within maxPx on its longer side, but no smaller than a
// cell one can point at: past that the canvas is larger than maxPx, and the caller
// scrolls it (qnbScroll).
function qnbCellSize(rows, cols, maxPx, largest) {
  const longest = Math.max(rows, cols), thin = Math.min(rows, cols) <= 2;
  const fit = Math.min(largest, Math.floor(maxPx / longest));
  const cell = Math.max(fit, Math.min(largest, thin ? QNB_MIN_THIN_CELL : QNB_MIN_CELL));
  const area = Math.floor(Math.sqrt(QNB_MAX_CANVAS_AREA / (rows * cols)));
  return Math.max(1, Math.min(cell, Math.floor(QNB_MAX_CANVAS_PX / longest), area));
}

// drawn (a heatmap with its labels) in a panel that scrolls where the cells are larger
// than width x height px; the labels scroll with the cells.
function qnbScroll(drawn, width, height) {
  const box = qnbElement("div", "qnb-scroll");
  box.style.maxWidth = `${width}px`;
  box.style.maxHeight = `${height}px`;
  box.append(drawn);
  return box;
}

// How an array sent with every k-th element along each axis was sampled (as
// sampling_text in qnb/viz/static_render.py).
function qnbSamplingText(steps) {
  const names = { 1: ["elements"], 2: ["rows", "columns"], 3: ["slabs", "rows", "columns"] }[steps.length];
  const taken = steps.map((k, axis) => `${k} ${names[axis]}`).filter((_, axis) => steps[axis] > 1);
  return `sampled: one in every ${taken.join(" and ")}`;
}

// What shows in place of the cells of an array with no elements.
function qnbEmptyNote(shape) {
  return qnbElement("div", "qnb-empty", `(empty array: shape ${shape.join("\u00d7")}, no elements to show)`);
}

// A small self-contained heatmap (used for tiles and arrays in TraceView).
// spec: {name, shape, dtype, data, steps?, full_shape?, tile?}; opts: title, maxPx,
// largest, showValues, regions, batch (the slab's index in the array), ticks (index
// labels), scrollPx (the panel's size, past which it scrolls; maxPx + 40 by default),
// label (a line under the title: the value's type).
// spec.tile: [M, N], the tile grid drawn over the array (16x16 by default).
// spec.steps: the array was sent with every k-th element along each axis (too large to
// send whole); labels, hover and regions stay in the array's own indices. Returns an element.
function qnbHeatmapBlock(spec, opts) {
  const box = qnbElement("div", "qnb-block");
  box.append(qnbElement("div", "qnb-block-title", opts.title || spec.name));
  if (opts.label) box.append(qnbElement("div", "qnb-block-info", opts.label));
  const values = qnbDecode(spec.data, spec.dtype);
  if (values.length === 0) {
    box.append(qnbEmptyNote(spec.full_shape || spec.shape));
    return box;
  }
  const shape = spec.shape.length === 1 ? [1, spec.shape[0]] : spec.shape;
  const [rows, cols] = [shape[shape.length - 2], shape[shape.length - 1]];
  const steps = spec.steps || spec.shape.map(() => 1);
  const cellSteps = steps.length === 1 ? [1, steps[0]] : steps.slice(-2);
  const slabStep = steps.length === 3 ? steps[0] : 1;
  const slab = Math.floor((opts.batch || 0) / slabStep);  // its index in what was sent
  const slice = values.subarray(slab * rows * cols, (slab + 1) * rows * cols);
  const cell = qnbCellSize(rows, cols, opts.maxPx, opts.largest || 32);
  const canvas = document.createElement("canvas");
  canvas.className = "qnb-heatmap";
  qnbDrawHeatmap(canvas, slice, rows, cols, {
    cell, showValues: opts.showValues, regions: opts.regions, vmin: spec.vmin, vmax: spec.vmax,
    steps: cellSteps, tile: spec.tile,
  });
  const readout = qnbElement("div", "qnb-readout", "\u00a0");
  const speller = qnbIndexSpeller(spec.shape.length, slab * slabStep, cellSteps);
  qnbHover(canvas, readout, rows, cols, cell, slice, spec.name, speller);
  const drawn = opts.ticks ? qnbWithTicks(canvas, rows, cols, cell, spec.shape.length, cellSteps) : canvas;
  // past maxPx (cells at their least size) the panel scrolls: a little room for the labels
  const scrollPx = opts.scrollPx || opts.maxPx + 40;
  box.append(qnbScroll(drawn, scrollPx, scrollPx), readout);
  box.qnbHeight = Math.min(rows * cell, scrollPx);  // what a colour bar beside it spans
  if (steps.some((k) => k > 1)) {
    const full = (spec.full_shape || spec.shape).join("\u00d7");
    box.append(qnbElement("div", "qnb-note", `${full}: too large to show whole; ${qnbSamplingText(steps)}`));
  }
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
