// TileView front end: heatmap with values, index labels, colour bar, the tile grid
// (16x16 or the view's tile), hover readout; a large array scrolls.
// State lives in the model (qnb/viz/tile_view.py); this only draws it.

function render({ model, el }) {
  el.classList.add("qnb-widget", "qnb-tileview");
  function draw() {
    el.replaceChildren();
    const shape = model.get("shape");
    const title = model.get("title");
    const dtype = model.get("dtype");
    const header = qnbElement("div", "qnb-title", title || "");
    const info = qnbElement("span", "qnb-info", ` ${shape.join("\u00d7")} ${model.get("dtype_name") || dtype}`);
    header.append(info);
    el.append(header);
    const values = qnbDecode(model.get("data"), dtype);
    if (values.length === 0) {
      el.append(qnbEmptyNote(shape));
      return;
    }
    if (shape.length === 3) {
      const picker = qnbElement("label", "qnb-batch", "slab ");
      const input = document.createElement("input");
      input.type = "number"; input.min = 0; input.max = shape[0] - 1; input.value = model.get("batch");
      input.addEventListener("change", () => {
        model.set("batch", Math.max(0, Math.min(shape[0] - 1, Number(input.value) || 0)));
        model.save_changes();
      });
      picker.append(input);
      el.append(picker);
    }
    const body = qnbElement("div", "qnb-row");
    const rows = shape.length === 1 ? 1 : shape[shape.length - 2];
    const cols = shape[shape.length - 1];
    const slab = shape.length === 3 ? model.get("batch") : 0;
    const slice = values.subarray(slab * rows * cols, (slab + 1) * rows * cols);
    // up to 32x32 the cells stay large enough to hold their values
    const cell = qnbCellSize(rows, cols, Math.max(rows, cols) <= 32 ? 704 : 512, 32);
    const canvas = document.createElement("canvas");
    canvas.className = "qnb-heatmap";
    qnbDrawHeatmap(canvas, slice, rows, cols, {
      cell, showValues: true, vmin: model.get("vmin"), vmax: model.get("vmax"), tile: model.get("tile"),
    });
    const [vmin, vmax] = qnbRange(values, model.get("vmin"), model.get("vmax"));
    // cells shrink to the least one can point at; past that the panel scrolls
    body.append(qnbScroll(qnbWithTicks(canvas, rows, cols, cell, shape.length), 760, 760),
                qnbColourBar(vmin, vmax, Math.max(48, Math.min(rows * cell, 256))));
    const readout = qnbElement("div", "qnb-readout", "\u00a0");
    qnbHover(canvas, readout, rows, cols, cell, slice, title || "a", qnbIndexSpeller(shape.length, slab));
    el.append(body, readout);
  }
  const names = ["data", "shape", "dtype", "dtype_name", "title", "vmin", "vmax", "batch", "tile"];
  return qnbDrawOnChanges(model, names, draw);
}

export default { render };
