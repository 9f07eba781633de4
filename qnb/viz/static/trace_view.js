// TraceView front end: program selector, step slider, colour-scale choice, source with
// the current line, this step's tiles as heatmaps with their values (in and out on one
// colour scale with one colour bar, or each on its own where the op changes the range:
// Python decides, tile_scale; "changed", out - in, always on its own), and the array
// arguments with the regions read/written (a 3-D array: the slabs the step, else its
// program, touched).

function render({ model, el }) {
  el.classList.add("qnb-widget", "qnb-traceview");

  function setState(name, value) {
    model.set(name, value);
    model.save_changes();
  }

  // The controls are built once and kept (so a slider being dragged is never replaced);
  // everything else is redrawn from the model.
  const select = document.createElement("select");
  select.className = "qnb-program";
  select.addEventListener("change", () => setState("program", Number(select.value)));
  const slider = document.createElement("input");
  slider.type = "range"; slider.className = "qnb-step"; slider.min = 0;
  slider.addEventListener("input", () => setState("step", Number(slider.value)));
  const prev = qnbElement("button", "qnb-prev", "\u25c0");
  const next = qnbElement("button", "qnb-next", "\u25b6");
  // step is refused outside 0 .. num_steps - 1 (a program with no steps has only 0)
  prev.addEventListener("click", () => setState("step", Math.max(0, model.get("step") - 1)));
  next.addEventListener("click", () =>
    setState("step", Math.max(0, Math.min(model.get("num_steps") - 1, model.get("step") + 1))));
  const label = qnbElement("span", "qnb-step-label");
  // the colour scale of the step's tiles: Python's option "scale"
  const scale = document.createElement("select");
  scale.className = "qnb-scale";
  for (const [value, text] of [["auto", "scale: auto"], ["shared", "scale: shared"], ["per-tile", "scale: per tile"]]) {
    const option = qnbElement("option", "", text);
    option.value = value;
    scale.append(option);
  }
  scale.addEventListener("change", () => setState("scale", scale.value));
  const controls = qnbElement("div", "qnb-controls");
  controls.append(select, prev, slider, next, label, scale);
  const header = qnbElement("div", "qnb-title");
  const body = qnbElement("div", "qnb-body");
  el.append(header, controls, body);

  function syncControls() {
    const grid = model.get("grid");
    header.textContent = `trace of ${model.get("kernel_name")} over grid (${grid.join(", ")})`;
    const programs = model.get("programs");
    if (select.options.length !== programs.length) {
      select.replaceChildren();
      programs.forEach((p, k) => {
        const option = qnbElement("option", "", `program (${p.join(", ")})`);
        option.value = k;
        select.append(option);
      });
    }
    select.value = String(model.get("program"));
    const steps = model.get("num_steps");
    slider.max = Math.max(0, steps - 1);
    slider.value = model.get("step");
    scale.value = model.get("scale");
    // the numbering of view.step and TraceStep.index (Python writes it): "step 5 (0–6)",
    // and the loop iteration of a step inside loops: "step 5 (0–6) · kb = 2"
    const loop = model.get("loop_text");
    label.textContent = model.get("step_text") + (loop ? ` \u00b7 ${loop}` : "");
  }

  function draw() {
    syncControls();
    body.replaceChildren();
    body.append(
      qnbSourceListing(model.get("source"), model.get("first_line"), model.get("current_line"), model.get("source_title"))
    );
    body.append(qnbElement("div", "qnb-op", model.get("op_text")));
    for (const s of model.get("scalars")) {
      body.append(qnbElement("div", "qnb-op", `${s.role} ${s.name} = ${s.text}`));
    }
    const tiles = qnbElement("div", "qnb-row qnb-tiles");
    const values = model.get("tiles");
    // 18px cells hold a value each: a 16x16 tile is 288px; a larger tile's cells shrink
    // (values on hover), to at least 4px, past which its panel scrolls (128x64: 512x256)
    const tileOpts = { maxPx: 288, largest: 18, showValues: true, ticks: true };
    const barHeight = (blocks) => Math.max(48, ...blocks.map((b) => b.qnbHeight || 0));
    // the value's type: Tile[128, 64] float32, Vec[128] int32
    const typeOf = (t) => `${t.shape.length === 1 ? "Vec" : "Tile"}[${t.shape.join(", ")}] ${t.dtype_name}`;
    const pairs = values.filter((t) => t.role !== "changed");
    const pairBlocks = pairs.map((t) => qnbHeatmapBlock(t, { ...tileOpts, title: `${t.role} ${t.name}`, label: typeOf(t) }));
    if (model.get("tile_scale") === "per-tile") {
      // each tile on its own scale: a colour bar beside each
      pairBlocks.forEach((block, k) => {
        const bar = qnbColourBar(pairs[k].vmin, pairs[k].vmax, barHeight([block]));
        bar.classList.add("qnb-tile-own-range");
        tiles.append(block, bar);
      });
    } else {
      tiles.append(...pairBlocks);
    }
    if (pairs.length && model.get("tile_scale") !== "per-tile") {
      const [vmin, vmax] = model.get("tile_range");
      const bar = qnbColourBar(vmin, vmax, barHeight(pairBlocks));
      bar.classList.add("qnb-tile-range");
      tiles.append(bar);
    }
    for (const t of values.filter((t) => t.role === "changed")) {
      const block = qnbHeatmapBlock(t, { ...tileOpts, title: `changed ${t.name} (out \u2212 in)`, label: typeOf(t) });
      block.classList.add("qnb-changed");
      tiles.append(block, qnbColourBar(t.vmin, t.vmax, barHeight([block])));
    }
    body.append(tiles);
    const regions = model.get("regions");
    const legend = qnbElement("div", "qnb-op");
    legend.append(qnbElement("span", "qnb-legend-read", "\u25a0 read "),
                  qnbElement("span", "qnb-legend-write", " \u25a0 written"), document.createTextNode(" by this step; arrays as they were at this step"));
    const row = qnbElement("div", "qnb-row qnb-arrays");
    const slabsShown = model.get("slabs");
    for (const a of model.get("arrays")) {
      const mine = regions.filter((r) => r.array === a.name);
      if (a.shape.length !== 3 || !a.shape[0]) {
        row.append(qnbHeatmapBlock(a, { title: a.name, maxPx: 256, largest: 16, regions: mine, ticks: true }));
        continue;
      }
      // the slabs the step read or wrote, else those its program touched (Python chooses)
      const slabs = slabsShown[a.name] || { shown: [0], count: 1 };
      const slabStep = a.steps ? a.steps[0] : 1;
      // the slabs sent (every k-th, for an array too large to send)
      const sent = [...new Set(slabs.shown.map((b) => b - (b % slabStep)))];
      sent.forEach((batch, k) => {
        const shown = mine.filter((r) => r.batch === null || r.batch - (r.batch % slabStep) === batch);
        let title = `${a.name}[${batch}]`;
        if (k === sent.length - 1 && slabs.count > slabs.shown.length) title += ` (+${slabs.count - slabs.shown.length} more)`;
        row.append(qnbHeatmapBlock(a, { title, maxPx: 256, largest: 16, regions: shown, batch, ticks: true }));
      });
    }
    body.append(legend, row);
  }

  const names = ["program", "step", "num_steps", "scale", "tile_scale", "loop_text", "step_text", "current_line", "op_text", "tiles", "tile_range", "scalars", "arrays", "regions", "slabs", "programs", "source", "first_line", "source_title"];
  return qnbDrawOnChanges(model, names, draw);
}

export default { render };
