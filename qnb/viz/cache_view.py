"""``CacheView``: a live table of kernel-cache events; selecting one shows why it missed."""

from __future__ import annotations

import html
import threading
import weakref

import traitlets

from qnb.viz.assets import widget_module
from qnb.viz.events import event_detail, event_record
from qnb.viz.widget import QnbWidget


def _weak_listener(view: CacheView):
    """A cache listener that does not keep the view alive, and removes itself once the
    view has been garbage-collected."""
    ref = weakref.ref(view)

    def listener(event):
        target = ref()
        if target is None:
            import qnb.cache

            qnb.cache.remove_listener(listener)
            return
        target._add_event(event)

    return listener


class CacheView(QnbWidget):
    """Every kernel-cache event of this process, newest first, updated live: kernel,
    backend, outcome (miss / disk-hit / memory-hit), time, short key and reason. Selecting
    a row (``selected`` = its number) fills ``detail`` with the reason component by
    component and the key's components. ``close()`` stops listening."""

    _esm = widget_module("cache_view.js")

    events = traitlets.List(traitlets.Dict()).tag(sync=True)
    selected = traitlets.Int(-1).tag(sync=True)
    detail = traitlets.Unicode("").tag(sync=True)

    def __init__(self, max_events: int = 500, **kwargs):
        import qnb.cache

        super().__init__(**kwargs)
        self._lock = threading.Lock()
        self._max_events = max_events
        self._raw: dict[int, object] = {}
        self._count = 0
        for event in qnb.cache.events()[-max_events:]:
            self._add_event(event)
        self._listener = _weak_listener(self)
        qnb.cache.add_listener(self._listener)

    def _add_event(self, event) -> None:
        with self._lock:
            number = self._count
            self._count += 1
            self._raw[number] = event
            rows = [*self.events, event_record(number, event)]
            if len(rows) > self._max_events:
                for old in rows[: len(rows) - self._max_events]:
                    self._raw.pop(old["n"], None)
                rows = rows[-self._max_events :]
            self.events = rows

    @traitlets.observe("selected")
    def _on_select(self, change) -> None:
        event = self._raw.get(change["new"])
        self.detail = event_detail(event) if event is not None else ""

    def select(self, number: int) -> str:
        """Select event ``number`` (as in the table's first column); returns its detail."""
        self.selected = number
        return self.detail

    def close(self) -> None:
        listener = getattr(self, "_listener", None)
        if listener is not None:
            import qnb.cache

            qnb.cache.remove_listener(listener)
            self._listener = None
        super().close()

    def __repr__(self) -> str:
        return f"CacheView({len(self.events)} events)"

    def _static_html(self, png: bytes | None) -> str:
        head = (
            "<tr>"
            + "".join(
                f"<th>{h}</th>"
                for h in ("#", "time", "kernel", "backend", "outcome", "ms", "key", "reason")
            )
            + "</tr>"
        )
        rows = []
        for row in reversed(self.events):
            cells = (
                row["n"],
                row["time"],
                row["kernel"],
                row["backend"],
                row["outcome"],
                row["ms"],
                row["short_key"],
                row["reason"],
            )
            rows.append(
                "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>"
            )
        if not rows:
            rows.append('<tr><td colspan="8"><i>no cache events yet</i></td></tr>')
        detail = (
            f'<pre style="border-left:3px solid #c83c28;padding-left:6px">'
            f"{html.escape(self.detail)}</pre>"
            if self.detail
            else ""
        )
        return (
            f'<div class="qnb-static qnb-cacheview-static"><b>{html.escape(repr(self))}</b>'
            '<table style="border-collapse:collapse;font:12px monospace">'
            f"<thead>{head}</thead><tbody>{''.join(rows)}</tbody></table>{detail}</div>"
        )
