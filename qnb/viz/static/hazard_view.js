// HazardView front end: the summary, the hazard records (click one to select it), the
// source with the two programs' lines highlighted in their colours, and each array in
// conflict as a heatmap: conflicting elements outlined in red, the selected record's
// programs' windows in blue (the first) and magenta (the second).
// State and every choice live in the model (qnb/viz/hazard_view.py); this only draws it.

const QNB_HAZARD_COLOURS = ["0,170,255", "255,0,200"];

function qnbHazardSource(lines, first, marked, extra) {
  const box = qnbElement("div", "qnb-source");
  const shown = lines.map((text, k) => [first + k, text]).concat(extra.map((e) => [e.line, e.text]));
  for (const [number, text] of shown) {
    const line = qnbElement("div", "qnb-source-line");
    // the second program's colour first: where both are on one line, the first's shows
    [1, 0].forEach((k) => {
      if (marked[k] === number) {
        line.style.background = `rgba(${QNB_HAZARD_COLOURS[k]},0.35)`;
        line.classList.add(`qnb-hazard-line-${k}`);
      }
    });
    line.append(qnbElement("span", "qnb-lineno", String(number)), document.createTextNode(text));
    box.append(line);
  }
  return box;
}

function qnbHazardLegend(record) {
  const box = qnbElement("div", "qnb-op qnb-hazard-legend");
  record.programs.forEach((program, k) => {
    const item = qnbElement("span", "", `program ${program} (line ${record.lines[k]})`);
    item.style.color = `rgb(${QNB_HAZARD_COLOURS[k]})`;
    item.style.fontWeight = "600";
    item.style.marginRight = "12px";
    box.append(item);
  });
  const marks = qnbElement("span", "", "conflicting elements");
  marks.style.color = "rgb(255,40,40)";
  marks.style.fontWeight = "600";
  box.append(marks);
  return box;
}

function render({ model, el }) {
  el.classList.add("qnb-widget", "qnb-hazardview");

  function draw() {
    el.replaceChildren();
    el.append(qnbElement("div", "qnb-title", `check ${model.get("kernel_name")}`));
    el.append(qnbElement("div", "qnb-op qnb-summary", model.get("summary")));
    if (model.get("ok")) return;
    const records = model.get("records");
    const selected = model.get("selected");
    const table = qnbElement("table", "qnb-table qnb-hazards");
    const head = qnbElement("tr");
    for (const c of ["kind", "array", "first element", "programs", "lines", "elements"]) head.append(qnbElement("th", "", c));
    const thead = qnbElement("thead");
    thead.append(head);
    table.append(thead);
    const body = qnbElement("tbody");
    records.forEach((r, n) => {
      const tr = qnbElement("tr", n === selected ? "qnb-selected" : "");
      const cells = [r.kind, r.array, `[${r.index.join(", ")}]`, r.programs.join(" \u2194 "), r.lines.join(", "), String(r.count)];
      for (const c of cells) tr.append(qnbElement("td", "", c));
      tr.addEventListener("click", () => { model.set("selected", n); model.save_changes(); });
      body.append(tr);
    });
    table.append(body);
    const scroll = qnbScroll(table, 900, 220);
    el.append(scroll);
    if (selected < 0) return;
    const record = records[selected];
    el.append(qnbElement("div", "qnb-op qnb-step-text", record.text));
    el.append(qnbHazardLegend(record));
    el.append(qnbHazardSource(model.get("source"), model.get("first_line"), model.get("lines"), model.get("other_lines")));
    const panels = qnbElement("div", "qnb-row qnb-arrays");
    for (const p of model.get("panels")) {
      panels.append(qnbHeatmapBlock(p, { title: p.title, maxPx: 320, largest: 16, regions: p.regions, batch: p.batch || 0, ticks: true }));
    }
    el.append(panels);
  }

  const names = ["kernel_name", "ok", "summary", "records", "selected", "source", "first_line", "lines", "other_lines", "panels"];
  return qnbDrawOnChanges(model, names, draw);
}

export default { render };
