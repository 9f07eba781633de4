// CompareView front end: the verdict and one line per backend; where they differ, the
// source with the diverging line, the step's value on each backend side by side (one
// colour scale and bar; differing elements outlined) with the difference (its own bar),
// and a mismatch map per stored array and backend: every differing element ringed (or,
// past a few thousand, its pixel filled) in orange where the backend is at least as
// close to exact as the reference, red where it is farther, on a grey map of the array,
// with index labels, a legend and the values of a ringed element under the pointer.
// State lives in the model (qnb/viz/compare_view.py, which also decides the map's scale,
// labels and marks); this only draws it.

// agrees, differs closer to exact, differs farther (static_render.MAP_COLOURS)
const QNB_MAP_COLOURS = ["#e4e4e4", "#f08c00", "#d0021b"];

// The pooled image of a map's codes: sent past the marks' limit, else made from the marks.
function qnbMapCodes(m) {
  const k = m.pool, prow = Math.ceil(m.rows / k), pcol = Math.ceil(m.cols / k);
  if (m.data) return [qnbDecode(m.data, m.dtype), prow, pcol];
  const codes = new Float64Array(prow * pcol);
  for (const [i, j, code] of m.marks) {
    const at = Math.floor(i / k) * pcol + Math.floor(j / k);
    codes[at] = Math.max(codes[at], code);
  }
  return [codes, prow, pcol];
}

function qnbMapTicks(m, width, height, cellW, cellH) {
  const k = m.pool;
  const box = qnbElement("div", "qnb-axes");
  box.style.width = "max-content";  // (the labels' column as wide as its labels)
  const top = qnbElement("div", "qnb-ticks-top");
  top.style.width = `${width}px`;
  for (const j of m.col_ticks) {
    const label = qnbElement("span", "qnb-tick", String(j));
    label.style.left = `${((j + 0.5) * cellW) / k}px`;
    top.append(label);
  }
  const left = qnbElement("div", "qnb-ticks-left");
  left.style.height = `${height}px`;
  left.style.width = m.rows > 1 ? `${String(m.rows - 1).length * 0.65 + 0.2}em` : "0px";
  for (const i of m.row_ticks) {
    const label = qnbElement("span", "qnb-tick", String(i));
    label.style.top = `${((i + 0.5) * cellH) / k}px`;
    left.append(label);
  }
  box.append(qnbElement("div", ""), top, left);
  return box;
}

function qnbMismatchMap(m) {
  const block = qnbElement("div", "qnb-block qnb-mismatch-map");
  block.append(qnbElement("div", "qnb-block-title", m.title));
  const [codes, prow, pcol] = qnbMapCodes(m);
  const [cellH, cellW] = m.cell, k = m.pool;
  const width = pcol * cellW, height = prow * cellH;
  const canvas = document.createElement("canvas");
  canvas.className = "qnb-heatmap qnb-map";
  const dpr = window.devicePixelRatio || 1;
  const pad = 6;  // room for the rings at the edges
  canvas.width = Math.round((width + 2 * pad) * dpr);
  canvas.height = Math.round((height + 2 * pad) * dpr);
  canvas.style.width = `${width + 2 * pad}px`;
  canvas.style.height = `${height + 2 * pad}px`;
  canvas.style.margin = `-${pad}px`;
  canvas.style.border = "none";
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, pad * dpr, pad * dpr);
  ctx.fillStyle = QNB_MAP_COLOURS[0];
  ctx.fillRect(0, 0, width, height);
  for (let i = 0; i < prow; i++) {
    for (let j = 0; j < pcol; j++) {
      const code = codes[i * pcol + j];
      if (!code) continue;
      ctx.fillStyle = QNB_MAP_COLOURS[code];
      ctx.fillRect(j * cellW, i * cellH, cellW, cellH);
    }
  }
  // a ring round each marked element: seen at any size (a white rim under the colour)
  const radius = Math.max(4, Math.min(cellW, cellH) / k / 2 + 2);
  for (const [i, j, code] of m.marks) {
    const x = ((j + 0.5) * cellW) / k, y = ((i + 0.5) * cellH) / k;
    for (const [style, lineWidth] of [["#fff", 3.5], [QNB_MAP_COLOURS[code], 1.8]]) {
      ctx.strokeStyle = style;
      ctx.lineWidth = lineWidth;
      ctx.beginPath();
      ctx.arc(x, y, radius, 0, 2 * Math.PI);
      ctx.stroke();
    }
  }
  const axes = qnbMapTicks(m, width, height, cellW, cellH);
  const frame = qnbElement("div", "qnb-map-frame");
  frame.style.width = `${width}px`;
  frame.style.height = `${height}px`;
  frame.style.border = "1px solid var(--jp-border-color1, #bbb)";
  frame.append(canvas);
  axes.append(frame);
  block.append(axes);
  const readout = qnbElement("div", "qnb-readout", "\u00a0");
  canvas.addEventListener("mousemove", (ev) => {
    const rect = canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left - pad, y = ev.clientY - rect.top - pad;
    const i = Math.floor((y / cellH) * k), j = Math.floor((x / cellW) * k);
    if (i < 0 || j < 0 || i >= m.rows || j >= m.cols) return;
    let best = null, bestDistance = (radius + 2) ** 2;
    for (const mark of m.marks) {
      const dx = ((mark[1] + 0.5) * cellW) / k - x, dy = ((mark[0] + 0.5) * cellH) / k - y;
      if (dx * dx + dy * dy <= bestDistance) { best = mark; bestDistance = dx * dx + dy * dy; }
    }
    if (best) {
      const [bi, bj, code, ref, got, exact] = best;
      const side = code === 1 ? "at least as close to exact" : "farther from exact";
      readout.textContent = `${m.array}[${bi}, ${bj}]: ${m.reference} ${qnbFormatFull(ref)}, ` +
        `${m.backend} ${qnbFormatFull(got)}, exact ${qnbFormatFull(exact)} (${m.backend} ${side})`;
    } else {
      readout.textContent = k === 1 ? `${m.array}[${i}, ${j}]` : `${m.array}[${i}, ${j}] (one pixel: ${k}\u00d7${k} elements)`;
    }
  });
  canvas.addEventListener("mouseleave", () => { readout.textContent = "\u00a0"; });
  block.append(readout);
  const legend = qnbElement("div", "qnb-map-legend");
  legend.style.cssText = "display:flex;flex-wrap:wrap;gap:4px 14px;font-size:11px;max-width:640px";
  const items = [
    [QNB_MAP_COLOURS[1], "\u25cb", `differs; ${m.backend} at least as close to exact as ${m.reference}`],
    [QNB_MAP_COLOURS[2], "\u25cb", `differs; ${m.backend} farther from exact`],
    ["#999", "\u25a0", "agrees within tolerance (grey)"],
  ];
  for (const [colour, symbol, text] of items) {
    const item = qnbElement("span", "qnb-map-legend-item");
    const mark = qnbElement("span", "", `${symbol} `);
    mark.style.color = colour;
    mark.style.fontWeight = "700";
    item.append(mark, document.createTextNode(text));
    legend.append(item);
  }
  if (m.mismatches > m.marks.length) {
    legend.append(qnbElement("span", "qnb-map-legend-item",
      `(${m.marks.length} of ${m.mismatches} ringed; every differing pixel is filled)`));
  }
  block.append(legend);
  return block;
}

function render({ model, el }) {
  el.classList.add("qnb-widget", "qnb-compareview");

  function draw() {
    el.replaceChildren();
    el.append(qnbElement("div", "qnb-title",
      `compare ${model.get("kernel_name")} on ${model.get("backends").join(", ")}: ${model.get("verdict")}`));
    const summary = qnbElement("div", "qnb-summary");
    for (const line of model.get("summary")) summary.append(qnbElement("div", "qnb-op", line));
    el.append(summary);
    if (model.get("equal")) return;
    el.append(qnbSourceListing(model.get("source"), model.get("first_line"), model.get("current_line")));
    el.append(qnbElement("div", "qnb-op qnb-step-text", model.get("step_text")));
    for (const s of model.get("scalars")) el.append(qnbElement("div", "qnb-op", s));
    const values = qnbElement("div", "qnb-row qnb-values");
    const shown = model.get("values");
    const backendValues = shown.filter((v) => v.role === "value");
    const blocks = [];
    for (const v of shown) {
      const block = qnbHeatmapBlock(v, { title: v.name, maxPx: 256, largest: 16, regions: v.marks, ticks: true });
      blocks.push(block);
      values.append(block);
      // the backends' values share one colour bar (after the last); a difference has its own
      const last = v === backendValues[backendValues.length - 1];
      if (last || v.role === "difference") {
        const height = Math.max(48, ...(last ? blocks : [block]).map((b) => b.qnbHeight || 0));
        const bar = qnbColourBar(v.vmin, v.vmax, height);
        bar.classList.add(v.role === "difference" ? "qnb-difference-range" : "qnb-value-range");
        values.append(bar);
      }
    }
    el.append(values);
    const maps = qnbElement("div", "qnb-col qnb-maps");
    for (const m of model.get("maps")) maps.append(qnbMismatchMap(m));
    el.append(maps);
  }

  const names = ["kernel_name", "backends", "equal", "verdict", "summary", "source", "first_line", "current_line", "step_text", "values", "scalars", "maps"];
  return qnbDrawOnChanges(model, names, draw);
}

export default { render };
