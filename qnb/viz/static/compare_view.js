// CompareView front end: one line per backend; where they differ, the source with the
// diverging line, the step's value on each backend side by side (differing elements
// outlined) with the difference, and a mismatch map per stored array and backend.
// State lives in the model (qnb/viz/compare_view.py); this only draws it.

function render({ model, el }) {
  el.classList.add("qnb-widget", "qnb-compareview");

  function draw() {
    el.replaceChildren();
    const state = model.get("equal") ? "equal" : "different";
    el.append(qnbElement("div", "qnb-title",
      `compare ${model.get("kernel_name")} on ${model.get("backends").join(", ")}: ${state}`));
    const summary = qnbElement("div", "qnb-summary");
    for (const line of model.get("summary")) summary.append(qnbElement("div", "qnb-op", line));
    el.append(summary);
    if (model.get("equal")) return;
    el.append(qnbSourceListing(model.get("source"), model.get("first_line"), model.get("current_line")));
    el.append(qnbElement("div", "qnb-op qnb-step-text", model.get("step_text")));
    for (const s of model.get("scalars")) el.append(qnbElement("div", "qnb-op", s));
    const values = qnbElement("div", "qnb-row qnb-values");
    for (const v of model.get("values")) {
      values.append(qnbHeatmapBlock(v, { title: v.name, maxPx: 256, largest: 16, regions: v.marks, ticks: true }));
    }
    el.append(values);
    const maps = qnbElement("div", "qnb-row qnb-maps");
    for (const m of model.get("maps")) {
      maps.append(qnbHeatmapBlock(m, { title: `${m.name}: ${m.mismatches} differ`, maxPx: 256, largest: 16, ticks: true }));
    }
    el.append(maps);
  }

  const names = ["kernel_name", "backends", "equal", "summary", "source", "first_line", "current_line", "step_text", "values", "scalars", "maps"];
  return qnbDrawOnChanges(model, names, draw);
}

export default { render };
