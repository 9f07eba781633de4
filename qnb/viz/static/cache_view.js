// CacheView front end: the live event table (newest first) and the selected event's detail.

function render({ model, el }) {
  el.classList.add("qnb-widget", "qnb-cacheview");
  const columns = ["#", "time", "kernel", "backend", "outcome", "ms", "key", "reason"];
  function draw() {
    el.replaceChildren();
    const events = model.get("events");
    const selected = model.get("selected");
    el.append(qnbElement("div", "qnb-title", `kernel cache: ${events.length} events`));
    if (events.length === 0) {
      el.append(qnbElement("div", "qnb-empty", "no cache events yet: launch or compile a kernel"));
    } else {
      const table = qnbElement("table", "qnb-table");
      const head = qnbElement("tr");
      for (const c of columns) head.append(qnbElement("th", "", c));
      const thead = qnbElement("thead");
      thead.append(head);
      table.append(thead);
      const body = qnbElement("tbody");
      for (const ev of [...events].reverse()) {
        const tr = qnbElement("tr", ev.n === selected ? "qnb-selected" : "");
        tr.dataset.n = ev.n;
        const outcome = ev.count > 1 ? `${ev.outcome} \u00d7${ev.count}` : ev.outcome;
        const cells = [ev.n, ev.time, ev.kernel, ev.backend, outcome, ev.ms.toFixed(2), ev.short_key, ev.reason];
        cells.forEach((c, k) => {
          const td = qnbElement("td", k === 4 ? `qnb-outcome-${ev.outcome}` : "", String(c));
          tr.append(td);
        });
        tr.addEventListener("click", () => {
          model.set("selected", ev.n === model.get("selected") ? -1 : ev.n);
          model.save_changes();
        });
        body.append(tr);
      }
      table.append(body);
      el.append(table);
    }
    const detail = model.get("detail");
    if (detail) el.append(qnbElement("div", "qnb-detail", detail));
  }
  draw();
  const names = ["events", "selected", "detail"];
  for (const name of names) model.on(`change:${name}`, draw);
  return () => { for (const name of names) model.off(`change:${name}`, draw); };
}

export default { render };
